//! Reward shaping: terms that depend on a completion's form rather than its task, added to the task
//! reward before advantages are taken. DAPO's soft overlong punishment is the one built so far.

use serde::{Deserialize, Serialize};

use crate::rollout::Rollout;

/// DAPO's soft overlong punishment (Yu et al. 2025, eq. 13): with maximum length L_max and cache
/// interval L_cache, a completion of |y| tokens gets
///   0                                  if |y| <= L_max - L_cache,
///   (L_max - L_cache - |y|) / L_cache  if L_max - L_cache < |y| <= L_max,
///   -1                                 if |y| > L_max,
/// added to its task reward: a penalty that grows linearly over the last L_cache tokens before the
/// limit, so a completion that runs long is discouraged before it is cut off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverlongPenalty {
    /// L_max, in tokens (the paper sets it to the generation limit).
    pub max_length: usize,
    /// L_cache, in tokens: the interval before L_max over which the penalty falls from 0 to -1.
    pub cache_length: usize,
}

impl OverlongPenalty {
    /// The shaping term of a completion of `len` tokens.
    pub fn penalty(&self, len: usize) -> f64 {
        let start = self.max_length - self.cache_length;
        if len <= start {
            0.0
        } else if len <= self.max_length {
            (start as f64 - len as f64) / self.cache_length as f64
        } else {
            -1.0
        }
    }

    /// The checks on the two lengths; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.cache_length == 0 {
            return Err("cache_length must be at least 1".into());
        }
        if self.cache_length > self.max_length {
            return Err(format!("cache_length = {} exceeds max_length = {}", self.cache_length, self.max_length));
        }
        Ok(())
    }
}

/// Adds the penalty of each completion's length (in tokens) to its reward.
pub fn shape_groups(rollouts: &mut [Rollout], penalty: &OverlongPenalty) {
    for r in rollouts {
        for (reward, c) in r.rewards.iter_mut().zip(&r.completions) {
            *reward += penalty.penalty(c.tokens.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The paper's three cases, written out independently of `penalty`.
    fn formula(l_max: usize, l_cache: usize, y: usize) -> f64 {
        let (l_max, l_cache, y) = (l_max as f64, l_cache as f64, y as f64);
        if y <= l_max - l_cache {
            0.0
        } else if y <= l_max {
            ((l_max - l_cache) - y) / l_cache
        } else {
            -1.0
        }
    }

    proptest! {
        #[test]
        fn matches_the_dapo_formula(l_max in 1usize..5000, frac in 0.0f64..=1.0, y in 0usize..6000) {
            let l_cache = ((l_max as f64 * frac) as usize).clamp(1, l_max);
            let p = OverlongPenalty { max_length: l_max, cache_length: l_cache };
            prop_assert!(p.validate().is_ok());
            let (got, want) = (p.penalty(y), formula(l_max, l_cache, y));
            prop_assert!((got - want).abs() < 1e-12, "L_max {} L_cache {} |y| {}: {} vs {}", l_max, l_cache, y, got, want);
            prop_assert!((-1.0..=0.0).contains(&got));
        }

        /// Never rewarded for length, and never less penalised for being longer.
        #[test]
        fn is_non_increasing_in_length(l_max in 1usize..500, l_cache in 1usize..500, y in 0usize..600) {
            prop_assume!(l_cache <= l_max);
            let p = OverlongPenalty { max_length: l_max, cache_length: l_cache };
            prop_assert!(p.penalty(y + 1) <= p.penalty(y));
        }
    }

    #[test]
    fn by_hand() {
        // L_max 20480, L_cache 4096 (the paper's): free up to 16384, -0.5 at 18432, -1 at and past 20480.
        let p = OverlongPenalty { max_length: 20480, cache_length: 4096 };
        assert_eq!(p.penalty(16384), 0.0);
        assert_eq!(p.penalty(18432), -0.5);
        assert_eq!(p.penalty(20480), -1.0);
        assert_eq!(p.penalty(30000), -1.0);
    }

    #[test]
    fn bad_lengths_are_refused() {
        assert!(OverlongPenalty { max_length: 10, cache_length: 0 }.validate().unwrap_err().contains("cache_length"));
        assert!(OverlongPenalty { max_length: 10, cache_length: 11 }.validate().unwrap_err().contains("max_length"));
    }
}
