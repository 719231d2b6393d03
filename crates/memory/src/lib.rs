//! autoplan-memory
