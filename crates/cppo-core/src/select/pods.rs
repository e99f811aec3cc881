//! The PODS family: per question keep m of the n completions, by the rewards alone (the advantage
//! stage then re-runs the estimator on the kept subsets, `Basis::KeptSubset`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::rank::{best, Prefer};
use super::Kept;
use crate::error::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    MaxVariance,
    MaxReward,
    Random { seed: u64, salt: u64 },
}

pub(crate) fn keep(
    rule: Rule,
    m: usize,
    rewards: &[Vec<f64>],
    ids: &[usize],
) -> Result<Vec<Kept>, Error> {
    if let Some(g) = rewards.iter().position(|r| r.len() < m) {
        return Err(Error::KeepTooMany {
            m,
            group: ids[g],
            size: rewards[g].len(),
        });
    }
    Ok(rewards
        .iter()
        .zip(ids)
        .enumerate()
        .map(|(group, (r, &id))| Kept {
            group,
            kept: match rule {
                Rule::MaxVariance => max_variance_subset(r, m),
                Rule::MaxReward => best(r, Prefer::Largest, m),
                Rule::Random { seed, salt } => random_subset(r.len(), m, seed, salt, id),
            },
        })
        .collect())
}

/// The m-subset of largest reward variance, in O(n log n). PODS shows an optimal subset is the i lowest
/// plus the m - i highest rewards for some i in 0..=m; each candidate's m^2 * variance,
/// m * sum(x^2) - sum(x)^2, comes from prefix sums over the sorted rewards. Equal scores go to the smaller
/// i, and among equal rewards the lower indices are kept.
pub(crate) fn max_variance_subset(rewards: &[f64], m: usize) -> Vec<usize> {
    let n = rewards.len();
    let order = ascending(rewards);
    // Shifting by a reward of the group leaves variances unchanged, keeps the sums small (no cancellation
    // for rewards like 1e6 + noise) and exact for grid rewards such as {0, 0.25, 0.5, 1}.
    let shift = rewards[order[n / 2]];
    let x: Vec<f64> = order.iter().map(|&i| rewards[i] - shift).collect();
    let low = prefix_sums(x.iter().copied());
    let high = prefix_sums(x.iter().rev().copied());
    let mut best_i = 0;
    let mut best_score = f64::NEG_INFINITY;
    for (i, lo) in low.iter().enumerate().take(m + 1) {
        let hi = high[m - i];
        let (s1, s2) = (lo.0 + hi.0, lo.1 + hi.1);
        let score = m as f64 * s2 - s1 * s1;
        if score > best_score {
            best_score = score;
            best_i = i;
        }
    }
    let j = m - best_i;
    let mut chosen = vec![false; n];
    chosen[..best_i].iter_mut().for_each(|c| *c = true);
    chosen[n - j..].iter_mut().for_each(|c| *c = true);
    lowest_indices_per_value(rewards, &order, &chosen)
}

/// Indices sorted by reward, ties by index.
fn ascending(rewards: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..rewards.len()).collect();
    order.sort_by(|&a, &b| {
        rewards[a]
            .partial_cmp(&rewards[b])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    order
}

/// (sum, sum of squares) of the first t values, for t in 0..=len.
fn prefix_sums(values: impl Iterator<Item = f64>) -> Vec<(f64, f64)> {
    let mut out = vec![(0.0, 0.0)];
    let mut acc = (0.0, 0.0);
    for v in values {
        acc = (acc.0 + v, acc.1 + v * v);
        out.push(acc);
    }
    out
}

/// The chosen sorted positions fix how many copies of each reward value are kept; within a run of equal
/// rewards keep the lowest indices, so the tie rule matches every other strategy.
fn lowest_indices_per_value(rewards: &[f64], order: &[usize], chosen: &[bool]) -> Vec<usize> {
    let mut kept = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && rewards[order[end]] == rewards[order[start]] {
            end += 1;
        }
        let count = chosen[start..end].iter().filter(|&&c| c).count();
        kept.extend_from_slice(&order[start..start + count]);
        start = end;
    }
    kept.sort_unstable();
    kept
}

/// m of n indices, uniformly, from a generator seeded by (seed, salt, group) so that the draw of a group
/// depends on nothing else: reproducible across runs, different between steps and between groups.
pub(crate) fn random_subset(n: usize, m: usize, seed: u64, salt: u64, group: usize) -> Vec<usize> {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&salt.to_le_bytes());
    key[16..24].copy_from_slice(&(group as u64).to_le_bytes());
    let mut rng = ChaCha8Rng::from_seed(key);
    // Partial Fisher-Yates: the first m slots end up a uniform m-subset.
    let mut idx: Vec<usize> = (0..n).collect();
    for t in 0..m {
        let j = rng.gen_range(t..n);
        idx.swap(t, j);
    }
    idx.truncate(m);
    idx.sort_unstable();
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_variance_by_hand() {
        // Two of each extreme beat any mix with the middle.
        assert_eq!(
            max_variance_subset(&[0.5, 0.0, 1.0, 0.0, 1.0, 0.5], 4),
            vec![1, 2, 3, 4]
        );
        // One low and the single high; the low is the lower index of the two zeros.
        assert_eq!(max_variance_subset(&[0.0, 0.0, 1.0], 2), vec![0, 2]);
        // Equal rewards: the lowest indices.
        assert_eq!(max_variance_subset(&[0.3; 5], 3), vec![0, 1, 2]);
    }

    #[test]
    fn random_is_reproducible_and_salted() {
        let a = random_subset(16, 4, 7, 0, 3);
        assert_eq!(a, random_subset(16, 4, 7, 0, 3));
        assert_eq!(a.len(), 4);
        let differs = (1..20).any(|salt| random_subset(16, 4, 7, salt, 3) != a);
        assert!(differs);
    }
}
