//! The GRPO-family policy loss, all of it: the aggregation weight w_i of every token of completion i
//! (so that the step's loss is sum_i sum_t w_i * l_{i,t}), the per-token loss l_{i,t} (PPO clipped
//! surrogate with separate low / high clip, optional dual clip, the k3 KL estimate to the reference,
//! optionally bias-corrected), and its gradient with respect to each token's log-prob, dL/dlogp,
//! which the decoder's backward pass takes. Plain slices, no tensors.
//!
//! Aggregation weights: Weights are computed once over the whole step's kept completions; a trainer
//! that splits the batch into micro-batches sums the micro-batch losses with these weights unchanged, and
//! the accumulated gradient equals the full-batch one.
//!
//! A completion with no loss tokens (fully masked, e.g. truncated) gets weight 0 and does not count as a
//! sequence in the sequence means: it is as if it were not in the batch. With no loss token at all, every
//! weight is 0.

use serde::{Deserialize, Serialize};

use crate::error::Error;

pub mod masks;
mod policy;
pub mod rollout;
pub use policy::{policy_loss, ImportanceSamplingLevel, LossStats, Objective, PolicyLoss, Rows};
pub use rollout::{CorrectionMode, MismatchStats, RolloutCorrection};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Aggregation {
    /// GRPO: the mean over sequences of each sequence's token mean, w_i = 1 / (N * T_i).
    #[default]
    SeqMeanTokenMean,
    /// DAPO: every token of the batch weighs the same, w_i = 1 / sum_j T_j.
    TokenMean,
    /// Dr.GRPO: token sums over a constant L (e.g. the max completion length), averaged over sequences,
    /// w_i = 1 / (N * L).
    SeqMeanTokenSumNorm,
    /// LUSPO: each sequence's token sum, averaged over sequences, w_i = 1 / N (with GSPO's sequence
    /// ratio, the sequence's loss times its length).
    SeqMeanTokenSum,
}

impl Aggregation {
    /// One weight per completion from its loss-token count T_i. `normaliser` is Dr.GRPO's L and is ignored
    /// (and not checked) by the other two rules. N counts the completions with T_i > 0.
    pub fn weights(self, loss_tokens: &[usize], normaliser: f64) -> Result<Vec<f64>, Error> {
        if self == Aggregation::SeqMeanTokenSumNorm && !(normaliser.is_finite() && normaliser > 0.0)
        {
            return Err(Error::BadNormaliser(normaliser));
        }
        let sequences = loss_tokens.iter().filter(|&&t| t > 0).count() as f64;
        let tokens: f64 = loss_tokens.iter().map(|&t| t as f64).sum();
        Ok(loss_tokens
            .iter()
            .map(|&t| {
                if t == 0 {
                    return 0.0;
                }
                match self {
                    Aggregation::SeqMeanTokenMean => 1.0 / (sequences * t as f64),
                    Aggregation::TokenMean => 1.0 / tokens,
                    Aggregation::SeqMeanTokenSumNorm => 1.0 / (sequences * normaliser),
                    Aggregation::SeqMeanTokenSum => 1.0 / sequences,
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_hand() {
        let t = [2, 0, 4];
        assert_eq!(
            Aggregation::SeqMeanTokenMean.weights(&t, 0.0).unwrap(),
            vec![0.25, 0.0, 0.125]
        );
        assert_eq!(
            Aggregation::TokenMean.weights(&t, 0.0).unwrap(),
            vec![1.0 / 6.0, 0.0, 1.0 / 6.0]
        );
        assert_eq!(
            Aggregation::SeqMeanTokenSumNorm.weights(&t, 8.0).unwrap(),
            vec![1.0 / 16.0, 0.0, 1.0 / 16.0]
        );
        assert_eq!(Aggregation::SeqMeanTokenSum.weights(&t, 0.0).unwrap(), vec![0.5, 0.0, 0.5]);
    }

    #[test]
    fn no_tokens_gives_zero_weights() {
        for agg in [
            Aggregation::SeqMeanTokenMean,
            Aggregation::TokenMean,
            Aggregation::SeqMeanTokenSumNorm,
            Aggregation::SeqMeanTokenSum,
        ] {
            assert_eq!(agg.weights(&[0, 0], 4.0).unwrap(), vec![0.0, 0.0]);
            assert_eq!(agg.weights(&[], 4.0).unwrap(), Vec::<f64>::new());
        }
    }

    #[test]
    fn bad_normaliser_is_an_error() {
        for l in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                Aggregation::SeqMeanTokenSumNorm.weights(&[3], l),
                Err(Error::BadNormaliser(_))
            ));
        }
        assert!(Aggregation::TokenMean.weights(&[3], f64::NAN).is_ok());
    }

    #[test]
    fn names() {
        let a: Aggregation = serde_json::from_str("\"seq-mean-token-sum-norm\"").unwrap();
        assert_eq!(a, Aggregation::SeqMeanTokenSumNorm);
        assert_eq!(
            serde_json::to_string(&Aggregation::TokenMean).unwrap(),
            "\"token-mean\""
        );
    }
}
