//! Evaluation arithmetic: the unbiased pass@k estimator of Chen et al. (2021) and avg@n.

/// The probability that at least one of k samples drawn without replacement from n, of which c are
/// correct, is correct: 1 - C(n - c, k) / C(n, k). Computed as a product so it never overflows.
/// Returns `None` when k is 0 or exceeds n, or c exceeds n.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    // C(n-c, k) / C(n, k) = prod_{i=0}^{k-1} (n - c - i) / (n - i).
    let mut all_wrong = 1.0f64;
    for i in 0..k {
        all_wrong *= (n - c - i) as f64 / (n - i) as f64;
    }
    Some(1.0 - all_wrong)
}

/// The mean correctness over n samples.
pub fn avg_at_n(correct: &[bool]) -> f64 {
    if correct.is_empty() {
        return 0.0;
    }
    correct.iter().filter(|&&c| c).count() as f64 / correct.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Fraction of all k-subsets of n samples (the first c correct) that contain a correct one.
    fn brute(n: usize, c: usize, k: usize) -> f64 {
        let (mut hit, mut total) = (0u64, 0u64);
        for mask in 0u32..(1 << n) {
            if mask.count_ones() as usize != k {
                continue;
            }
            total += 1;
            if (0..c).any(|i| mask & (1 << i) != 0) {
                hit += 1;
            }
        }
        hit as f64 / total as f64
    }

    proptest! {
        #[test]
        fn matches_enumeration(n in 1usize..=10, c_frac in 0.0f64..=1.0, k_frac in 0.0f64..=1.0) {
            let c = (c_frac * n as f64).round() as usize;
            let k = ((k_frac * (n - 1) as f64).round() as usize) + 1;
            let got = pass_at_k(n, c, k).unwrap();
            prop_assert!((got - brute(n, c, k)).abs() < 1e-12, "n={n} c={c} k={k}: {got}");
        }
    }

    #[test]
    fn edge_cases() {
        assert_eq!(pass_at_k(4, 0, 2), Some(0.0));
        assert_eq!(pass_at_k(4, 4, 1), Some(1.0));
        assert_eq!(pass_at_k(4, 1, 1), Some(0.25));
        assert_eq!(pass_at_k(4, 1, 0), None);
        assert_eq!(pass_at_k(4, 1, 5), None);
        assert_eq!(avg_at_n(&[true, false, true, true]), 0.75);
        assert_eq!(avg_at_n(&[]), 0.0);
    }
}
