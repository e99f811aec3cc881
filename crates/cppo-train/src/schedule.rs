//! Learning-rate schedules with linear warmup, as in the Hugging Face Trainer that TRL users know.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    #[default]
    Constant,
    Linear,
    Cosine,
}

/// The learning rate for optimizer step `step` (0-based) of `total`: linear warmup from 0 over
/// `warmup` steps, then constant, linear decay to 0, or half a cosine to 0 at `total`.
pub fn learning_rate(schedule: Schedule, base: f64, step: u64, warmup: u64, total: u64) -> f64 {
    if step < warmup {
        return base * (step + 1) as f64 / warmup as f64;
    }
    let decay_steps = total.saturating_sub(warmup).max(1) as f64;
    let progress = ((step - warmup) as f64 / decay_steps).clamp(0.0, 1.0);
    match schedule {
        Schedule::Constant => base,
        Schedule::Linear => base * (1.0 - progress),
        Schedule::Cosine => base * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_rises_linearly_to_the_base() {
        let lrs: Vec<f64> = (0..4).map(|s| learning_rate(Schedule::Constant, 1.0, s, 4, 10)).collect();
        assert_eq!(lrs, vec![0.25, 0.5, 0.75, 1.0]);
        assert_eq!(learning_rate(Schedule::Constant, 1.0, 9, 4, 10), 1.0);
    }

    #[test]
    fn linear_and_cosine_reach_zero_at_the_end_and_decrease() {
        for s in [Schedule::Linear, Schedule::Cosine] {
            let lrs: Vec<f64> = (0..=20).map(|t| learning_rate(s, 2.0, t, 5, 20)).collect();
            assert!(lrs[5..].windows(2).all(|w| w[1] <= w[0] + 1e-12), "{s:?} not decreasing: {lrs:?}");
            assert!(lrs[20].abs() < 1e-12, "{s:?} ends at {}", lrs[20]);
            assert!((lrs[5] - 2.0).abs() < 1e-12);
        }
        // Cosine is at half the base half-way through the decay.
        assert!((learning_rate(Schedule::Cosine, 2.0, 15, 10, 20) - 1.0).abs() < 1e-12);
    }
}
