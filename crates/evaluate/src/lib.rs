//! autoplan-evaluate
