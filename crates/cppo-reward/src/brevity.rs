//! A length-shaping reward: 1 / (1 + chars / 200), preferring short completions. Useful as a small
//! penalty beside an accuracy reward, and in smoke tests of the trainer, because it varies across any
//! completions (even a random model's), unlike an accuracy reward.

use cppo_core::Problem;

use crate::{Reward, Score};

#[derive(Clone, Copy, Debug, Default)]
pub struct BrevityReward;

/// Characters at which the reward is one half.
pub const BREVITY_SCALE: f64 = 200.0;

impl Reward for BrevityReward {
    fn name(&self) -> &str {
        "brevity"
    }

    fn score(&self, completion: &str, _problem: &Problem) -> Score {
        let chars = completion.chars().count();
        Score {
            value: 1.0 / (1.0 + chars as f64 / BREVITY_SCALE),
            correct: None,
            extracted: None,
            reason: format!("{chars} characters"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem() -> Problem {
        Problem { id: "x".into(), prompt: String::new(), answer: "1".into(), task: cppo_core::Task::Gsm8k, record: serde_json::Value::Null, messages: None, prompt_field: None }
    }

    #[test]
    fn shorter_scores_higher_and_half_at_the_scale() {
        let r = BrevityReward;
        assert_eq!(r.score("", &problem()).value, 1.0);
        let half = "a".repeat(BREVITY_SCALE as usize);
        assert!((r.score(&half, &problem()).value - 0.5).abs() < 1e-12);
        assert!(r.score("short", &problem()).value > r.score("a much longer completion", &problem()).value);
        assert_eq!(r.score("é", &problem()).reason, "1 characters");
    }
}
