//! autoplan-placement
