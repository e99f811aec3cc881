//! A weighted sum of rewards, as the trainer's config combines them.

use cppo_core::Problem;

use crate::{Reward, Score};

/// Scores `sum(weight * part.value)`. `correct` is the conjunction of the parts that judge correctness
/// (`None` when none does); `extracted` is the first part's extraction; the reason lists every part.
pub struct Weighted {
    pub parts: Vec<(f64, Box<dyn Reward>)>,
}

impl Weighted {
    pub fn new(parts: Vec<(f64, Box<dyn Reward>)>) -> Self {
        Weighted { parts }
    }
}

impl Reward for Weighted {
    fn name(&self) -> &str {
        "weighted"
    }

    fn score(&self, completion: &str, problem: &Problem) -> Score {
        let mut value = 0.0;
        let mut correct: Option<bool> = None;
        let mut extracted = None;
        let mut reasons = Vec::with_capacity(self.parts.len());
        for (weight, part) in &self.parts {
            let s = part.score(completion, problem);
            value += weight * s.value;
            if let Some(c) = s.correct {
                correct = Some(correct.unwrap_or(true) && c);
            }
            if extracted.is_none() {
                extracted = s.extracted;
            }
            reasons.push(format!("{weight}*{}={} ({})", part.name(), s.value, s.reason));
        }
        Score { value, correct, extracted, reason: reasons.join("; ") }
    }
}
