//! Errors of building rewards from configuration.

/// A reward could not be built from its configured name and weight.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RewardError {
    #[error("unknown reward `{name}` (known rewards: {known})")]
    UnknownReward { name: String, known: String },
    #[error("reward `{name}` has weight {weight}, which is not a finite number")]
    BadWeight { name: String, weight: f64 },
    #[error("no rewards configured: a weighted reward needs at least one part")]
    NoParts,
}
