//! Verifiable rewards.
