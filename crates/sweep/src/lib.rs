//! autoplan-sweep
