//! Shared ranking rules. Every strategy orders candidates by one key and breaks ties by position: among
//! equal keys the lower index (the earlier completion) is preferred. Keys are compared as computed f64
//! values, with -0.0 equal to 0.0.

use std::cmp::Ordering;

use crate::error::Error;

/// Which end of the key order a strategy keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prefer {
    Largest,
    Smallest,
}

/// Completions kept from `total` at `pruning_rate`: floor(total * (1 - P)). A 1e-9 slack absorbs the
/// rounding of decimal rates, so that 10 * (1 - 0.9) keeps 1, not 0.
pub fn kept_count(total: usize, pruning_rate: f64) -> usize {
    ((total as f64) * (1.0 - pruning_rate) + 1e-9).floor() as usize
}

pub(crate) fn check_rate(pruning_rate: f64) -> Result<(), Error> {
    if (0.0..1.0).contains(&pruning_rate) {
        Ok(())
    } else {
        Err(Error::BadPruningRate(pruning_rate))
    }
}

/// Indices of `keys` best first under `prefer`, ties to the lower index.
pub(crate) fn ranked(keys: &[f64], prefer: Prefer) -> Vec<usize> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    // A stable sort keeps equal keys in index order.
    order.sort_by(|&a, &b| {
        let by_key = keys[a].partial_cmp(&keys[b]).unwrap_or(Ordering::Equal);
        match prefer {
            Prefer::Largest => by_key.reverse(),
            Prefer::Smallest => by_key,
        }
    });
    order
}

/// The `k` best indices under `prefer`, in increasing index order.
pub(crate) fn best(keys: &[f64], prefer: Prefer, k: usize) -> Vec<usize> {
    let mut kept: Vec<usize> = ranked(keys, prefer).into_iter().take(k).collect();
    kept.sort_unstable();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_rates_keep_the_expected_count() {
        assert_eq!(kept_count(10, 0.9), 1);
        assert_eq!(kept_count(10, 0.7), 3);
        assert_eq!(kept_count(16, 0.875), 2);
        assert_eq!(kept_count(16, 0.5), 8);
        assert_eq!(kept_count(16, 0.0), 16);
        assert_eq!(kept_count(7, 0.5), 3);
        assert_eq!(kept_count(16, 0.95), 0);
    }

    #[test]
    fn ties_go_to_the_lower_index() {
        let keys = [1.0, 3.0, 3.0, -0.0, 0.0, 1.0];
        assert_eq!(ranked(&keys, Prefer::Largest), vec![1, 2, 0, 5, 3, 4]);
        assert_eq!(ranked(&keys, Prefer::Smallest), vec![3, 4, 0, 5, 1, 2]);
        assert_eq!(best(&keys, Prefer::Largest, 3), vec![0, 1, 2]);
    }
}
