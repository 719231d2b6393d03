//! autoplan-search
