//! GDPO's reward aggregation (TRL's `multi_objective_aggregation = "normalize_then_sum"`): each reward
//! part is normalised within its group first, (r - group mean) / (group std + 1e-4), std with n - 1,
//! and the weighted sum of the normalised parts is the completion's reward. GRPO's plain sum would let a
//! part with a large spread drown the others; here each part weighs by its weight alone. The advantage
//! then whitens these rewards over the batch (`Estimator::ReinforcePlusPlus` with n - 1 and 1e-4, as
//! TRL does after the sum).

use crate::advantage::{Estimator, StdKind};

/// The eps TRL adds to each part's group std and to the batch std.
pub const GDPO_EPS: f64 = 1e-4;

/// The estimator GDPO's advantages come from: (r - batch mean) / (batch std + 1e-4), std with n - 1.
pub fn gdpo_estimator() -> Estimator {
    Estimator::ReinforcePlusPlus { std: StdKind::Bessel, eps: GDPO_EPS }
}

/// `parts[g][p][i]`: part p's unweighted score of completion i of group g; `weights[p]` part p's
/// weight. Returns one reward per completion, shaped like the groups. A group of one has std 0 for
/// every part (as TRL with one generation).
pub fn normalize_then_sum(parts: &[Vec<Vec<f64>>], weights: &[f64]) -> Vec<Vec<f64>> {
    parts
        .iter()
        .map(|group| {
            let n = group.first().map_or(0, Vec::len);
            let mut out = vec![0.0; n];
            for (scores, &w) in group.iter().zip(weights) {
                let mean = scores.iter().sum::<f64>() / n.max(1) as f64;
                let std = if n > 1 { (scores.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64).sqrt() } else { 0.0 };
                for (o, x) in out.iter_mut().zip(scores) {
                    *o += w * (x - mean) / (std + GDPO_EPS);
                }
            }
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two parts on very different scales weigh by their weights alone after the per-part
    /// normalisation: a part scaled by 100 gives the same rewards (up to eps).
    #[test]
    fn each_part_is_normalised_in_its_group_before_the_weighted_sum() {
        let a = vec![vec![vec![1.0, 0.0, 0.0, 1.0], vec![0.0, 10.0, 20.0, 30.0]]];
        let b = vec![vec![vec![1.0, 0.0, 0.0, 1.0], vec![0.0, 1000.0, 2000.0, 3000.0]]];
        let (ra, rb) = (normalize_then_sum(&a, &[1.0, 0.5]), normalize_then_sum(&b, &[1.0, 0.5]));
        for (x, y) in ra[0].iter().zip(&rb[0]) {
            assert!((x - y).abs() < 1e-3, "{ra:?} {rb:?}");
        }
        // By hand: part 0 has mean 0.5 and std sqrt(1/3); part 1 mean 15, std sqrt(500/3).
        let (s0, s1) = ((1.0f64 / 3.0).sqrt() + 1e-4, (500.0f64 / 3.0).sqrt() + 1e-4);
        let want = [0.5 / s0 + 0.5 * -15.0 / s1, -0.5 / s0 + 0.5 * -5.0 / s1, -0.5 / s0 + 0.5 * 5.0 / s1, 0.5 / s0 + 0.5 * 15.0 / s1];
        for (x, w) in ra[0].iter().zip(want) {
            assert!((x - w).abs() < 1e-12, "{x} vs {w}");
        }
    }

    #[test]
    fn a_group_of_equal_scores_gives_zero() {
        assert_eq!(normalize_then_sum(&[vec![vec![2.0, 2.0, 2.0]]], &[3.0]), vec![vec![0.0, 0.0, 0.0]]);
    }
}
