//! The reward interface: a completion and its problem in, a score and a reason out.

use cppo_core::Problem;

/// What a reward says about one completion.
#[derive(Clone, Debug, PartialEq)]
pub struct Score {
    /// The reward itself (accuracy rewards: 1.0 correct, 0.0 otherwise; format: 1.0 or 0.0).
    pub value: f64,
    /// Whether the final answer is right, for rewards that judge answers; `None` for pure format rewards.
    pub correct: Option<bool>,
    /// The answer the grader read from the completion, as compared (normalised), if any.
    pub extracted: Option<String>,
    /// One line a person can read to see why the score is what it is.
    pub reason: String,
}

impl Score {
    /// An accuracy verdict: 1.0 when correct, 0.0 otherwise.
    pub fn accuracy(correct: bool, extracted: Option<String>, reason: String) -> Self {
        Score { value: if correct { 1.0 } else { 0.0 }, correct: Some(correct), extracted, reason }
    }
}

/// A scalar reward for one completion of one problem. Implementations must not panic on any input.
pub trait Reward: Send + Sync {
    /// The name the trainer's config and the reasons use (`accuracy`, `format`, ...).
    fn name(&self) -> &str;
    fn score(&self, completion: &str, problem: &Problem) -> Score;
}
