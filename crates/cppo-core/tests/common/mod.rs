//! Reward generators and brute-force references shared by the property tests.
#![allow(dead_code)]

use proptest::prelude::*;

/// Rewards of one group of `n` completions: binary, graded, continuous, or continuous with many ties.
pub fn group(n: usize) -> BoxedStrategy<Vec<f64>> {
    prop_oneof![
        prop::collection::vec(prop::bool::ANY.prop_map(|b| if b { 1.0 } else { 0.0 }), n),
        prop::collection::vec(prop::sample::select(vec![0.0, 0.25, 0.5, 1.0]), n),
        prop::collection::vec(-10.0f64..10.0, n),
        // A few distinct continuous values, reused: ties everywhere.
        prop::collection::vec(-5.0f64..5.0, 1..4)
            .prop_flat_map(move |pool| prop::collection::vec(prop::sample::select(pool), n)),
    ]
    .boxed()
}

/// A batch of `groups` groups of the same size `n`.
pub fn batch(groups: usize, n: usize) -> BoxedStrategy<Vec<Vec<f64>>> {
    prop::collection::vec(group(n), groups).boxed()
}

/// 1..=4 groups of one common size in 1..=10.
pub fn equal_batch() -> BoxedStrategy<Vec<Vec<f64>>> {
    (1usize..=4, 1usize..=10)
        .prop_flat_map(|(b, n)| batch(b, n))
        .boxed()
}

/// Every m-subset of 0..n, each as increasing indices.
pub fn subsets(n: usize, m: usize) -> Vec<Vec<usize>> {
    (0u32..1 << n)
        .filter(|mask| mask.count_ones() as usize == m)
        .map(|mask| (0..n).filter(|i| mask & (1 << i) != 0).collect())
        .collect()
}

/// Population variance, two-pass.
pub fn variance(xs: &[f64]) -> f64 {
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / xs.len() as f64
}

pub fn pick(values: &[f64], idx: &[usize]) -> Vec<f64> {
    idx.iter().map(|&i| values[i]).collect()
}

/// The indices of 0..n not in `kept`.
pub fn complement(n: usize, kept: &[usize]) -> Vec<usize> {
    (0..n).filter(|i| !kept.contains(i)).collect()
}

/// Checks that `kept` is the rule's choice: every kept key is at least as good as every pruned key, and
/// where they tie the kept index is the lower one.
pub fn assert_ordered(keys: &[f64], kept: &[usize], prefer_largest: bool) {
    for &k in kept {
        for p in complement(keys.len(), kept) {
            let (kk, pk) = (keys[k], keys[p]);
            let better = if prefer_largest { kk > pk } else { kk < pk };
            assert!(
                better || (kk == pk && k < p),
                "kept {k} (key {kk}) vs pruned {p} (key {pk}); keys {keys:?}, kept {kept:?}"
            );
        }
    }
}

pub fn assert_increasing_distinct(kept: &[usize], n: usize) {
    assert!(
        kept.windows(2).all(|w| w[0] < w[1]),
        "not increasing: {kept:?}"
    );
    assert!(
        kept.iter().all(|&i| i < n),
        "out of range: {kept:?} for n = {n}"
    );
}
