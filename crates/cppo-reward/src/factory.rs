//! Building rewards from the names and weights of the trainer's config.

use cppo_core::{Problem, Task};
use serde::Deserialize;

use crate::brevity::BrevityReward;
use crate::format::FormatReward;
use crate::gsm8k::Gsm8kReward;
use crate::math::MathReward;
use crate::{Reward, RewardError, Score, Weighted};

/// The reward names [`reward_by_name`] knows.
pub const REWARD_NAMES: &[&str] = &["accuracy", "gsm8k", "math", "format", "brevity"];

/// Accuracy with the grader of the problem's task: GSM8K numbers or MATH LaTeX.
#[derive(Clone, Copy, Debug, Default)]
pub struct AccuracyReward;

impl Reward for AccuracyReward {
    fn name(&self) -> &str {
        "accuracy"
    }
    fn score(&self, completion: &str, problem: &Problem) -> Score {
        match problem.task {
            Task::Gsm8k => Gsm8kReward.score(completion, problem),
            Task::Math => MathReward.score(completion, problem),
        }
    }
}

/// One configured part, as written in TOML: `{ name = "accuracy", weight = 1.0 }`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct RewardSpec {
    pub name: String,
    #[serde(default = "one")]
    pub weight: f64,
}

fn one() -> f64 {
    1.0
}

/// The reward called `name`: `accuracy` (by task), `gsm8k`, `math`, `format` or `brevity`.
pub fn reward_by_name(name: &str) -> Result<Box<dyn Reward>, RewardError> {
    Ok(match name {
        "accuracy" => Box::new(AccuracyReward),
        "gsm8k" => Box::new(Gsm8kReward),
        "math" => Box::new(MathReward),
        "format" => Box::new(FormatReward),
        "brevity" => Box::new(BrevityReward),
        other => return Err(RewardError::UnknownReward { name: other.to_string(), known: REWARD_NAMES.join(", ") }),
    })
}

/// The weighted sum of the configured parts; every name must be known and every weight finite.
pub fn build_weighted(specs: &[RewardSpec]) -> Result<Weighted, RewardError> {
    if specs.is_empty() {
        return Err(RewardError::NoParts);
    }
    let mut parts = Vec::with_capacity(specs.len());
    for spec in specs {
        if !spec.weight.is_finite() {
            return Err(RewardError::BadWeight { name: spec.name.clone(), weight: spec.weight });
        }
        parts.push((spec.weight, reward_by_name(&spec.name)?));
    }
    Ok(Weighted::new(parts))
}
