//! Loss weights: normalisation, and micro-batch invariance against the aggregation formulas.

use cppo_core::Aggregation;
use proptest::prelude::*;

const RULES: [Aggregation; 4] = [
    Aggregation::SeqMeanTokenMean,
    Aggregation::TokenMean,
    Aggregation::SeqMeanTokenSumNorm,
    Aggregation::SeqMeanTokenSum,
];

/// Per-token losses for up to 12 completions of 0..20 tokens (zero-token completions included).
fn losses() -> impl Strategy<Value = Vec<Vec<f64>>> {
    prop::collection::vec(prop::collection::vec(-3.0f64..3.0, 0..20), 1..12)
}

/// The loss of the whole batch, written straight from each rule's definition.
fn reference(agg: Aggregation, l: &[Vec<f64>], norm: f64) -> f64 {
    let nonempty: Vec<&Vec<f64>> = l.iter().filter(|s| !s.is_empty()).collect();
    if nonempty.is_empty() {
        return 0.0;
    }
    let n = nonempty.len() as f64;
    match agg {
        Aggregation::SeqMeanTokenMean => {
            nonempty
                .iter()
                .map(|s| s.iter().sum::<f64>() / s.len() as f64)
                .sum::<f64>()
                / n
        }
        Aggregation::TokenMean => {
            nonempty.iter().flat_map(|s| s.iter()).sum::<f64>()
                / nonempty.iter().map(|s| s.len()).sum::<usize>() as f64
        }
        Aggregation::SeqMeanTokenSumNorm => {
            nonempty
                .iter()
                .map(|s| s.iter().sum::<f64>() / norm)
                .sum::<f64>()
                / n
        }
        // LUSPO: the mean over sequences of each sequence's token sum.
        Aggregation::SeqMeanTokenSum => nonempty.iter().map(|s| s.iter().sum::<f64>()).sum::<f64>() / n,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn mean_rules_weigh_the_batch_to_one(tokens in prop::collection::vec(0usize..50, 0..20), norm in 1.0f64..100.0) {
        for agg in RULES {
            let w = agg.weights(&tokens, norm).unwrap();
            prop_assert_eq!(w.len(), tokens.len());
            prop_assert!(w.iter().all(|x| x.is_finite() && *x >= 0.0));
            prop_assert!(w.iter().zip(&tokens).all(|(x, &t)| t > 0 || *x == 0.0));
            let mass: f64 = w.iter().zip(&tokens).map(|(x, &t)| x * t as f64).sum();
            let total: usize = tokens.iter().sum();
            let seqs = tokens.iter().filter(|&&t| t > 0).count();
            let want = match (agg, total) {
                (_, 0) => 0.0,
                (Aggregation::SeqMeanTokenSumNorm, _) => total as f64 / (seqs as f64 * norm),
                (Aggregation::SeqMeanTokenSum, _) => total as f64 / seqs as f64,
                _ => 1.0,
            };
            prop_assert!((mass - want).abs() < 1e-9, "{:?}: {} vs {}", agg, mass, want);
        }
    }

    /// Summing weighted micro-batch losses over any split equals the full-batch loss of each rule.
    #[test]
    fn micro_batch_split_invariance(l in losses(), cuts in prop::collection::vec(any::<bool>(), 12), norm in 1.0f64..64.0) {
        let tokens: Vec<usize> = l.iter().map(Vec::len).collect();
        for agg in RULES {
            let w = agg.weights(&tokens, norm).unwrap();
            let mut total = 0.0;
            let mut start = 0;
            // A micro-batch ends after completion i where cuts[i + 1] is set, and after the last one.
            for end in (1..=l.len()).filter(|&e| e == l.len() || cuts[e]) {
                total += (start..end).map(|i| w[i] * l[i].iter().sum::<f64>()).sum::<f64>();
                start = end;
            }
            let want = reference(agg, &l, norm);
            prop_assert!((total - want).abs() < 1e-9, "{:?}: {} vs {}", agg, total, want);
        }
    }
}
