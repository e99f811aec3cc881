//! The rollout (train-inference mismatch) correction: the completions were sampled by an engine whose
//! log-probs differ from the trainer's (bf16 rollout weights, another kernel), so each token's loss is
//! weighted by the importance ratio pi_trainer / pi_sampler of the weights that sampled it, truncated or
//! masked outside [min, max] (TRL's `vllm_importance_sampling_*`). The ratio is a constant of the loss
//! (no gradient), computed from the trainer's log-probs of the sampling weights: the old policy's when
//! mu > 1, the current detached ones in the single pass of mu = 1 (they are the same weights).
//!
//! Whatever the mode, the gap between the two log-probs is measured, so a run shows how far apart its
//! sampler and trainer are even without correcting for it.

use serde::{Deserialize, Serialize};

/// TRL's `vllm_importance_sampling_mode`, with `none` for no correction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CorrectionMode {
    None,
    /// Per token, ratio clamped to [min, max].
    TokenTruncate,
    /// Per token, ratio set to 0 outside [min, max].
    TokenMask,
    /// One ratio per sequence, exp(sum_t diff_t), clamped to [min, max].
    SequenceTruncate,
    /// One ratio per sequence, set to 0 outside [min, max] (TRL's default).
    SequenceMask,
}

impl CorrectionMode {
    pub fn per_sequence(self) -> bool {
        matches!(self, CorrectionMode::SequenceTruncate | CorrectionMode::SequenceMask)
    }
}

/// The correction's settings; `min` / `max` are TRL's `vllm_importance_sampling_clip_min / _max`
/// (`None`: unbounded on that side).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RolloutCorrection {
    pub mode: CorrectionMode,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl RolloutCorrection {
    /// TRL's default: sequence-level masking above 3.
    pub const TRL_DEFAULT: RolloutCorrection = RolloutCorrection { mode: CorrectionMode::SequenceMask, min: None, max: Some(3.0) };

    pub const NONE: RolloutCorrection = RolloutCorrection { mode: CorrectionMode::None, min: None, max: None };

    /// The ratio after truncation or masking.
    fn bound(&self, ratio: f64) -> f64 {
        let (lo, hi) = (self.min.unwrap_or(f64::NEG_INFINITY), self.max.unwrap_or(f64::INFINITY));
        match self.mode {
            CorrectionMode::None => 1.0,
            CorrectionMode::TokenTruncate | CorrectionMode::SequenceTruncate => ratio.max(lo).min(hi),
            CorrectionMode::TokenMask | CorrectionMode::SequenceMask => {
                if ratio < lo || ratio > hi {
                    0.0
                } else {
                    ratio
                }
            }
        }
    }
}

/// How far the sampler's log-probs are from the trainer's, and what the correction did, summed over
/// micro-batches (divide by the counts for means).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MismatchStats {
    /// Loss tokens compared.
    pub tokens: f64,
    /// Sum over tokens of |logp_trainer - logp_sampler|.
    pub token_abs_diff: f64,
    pub token_abs_diff_max: f64,
    pub sequences: f64,
    /// Sum over sequences of |sum_t (logp_trainer - logp_sampler)|.
    pub sequence_abs_diff: f64,
    /// The correction's ratios after truncation / masking: per token for token modes, per sequence
    /// for sequence modes (as TRL reports them); `ratios` counts them.
    pub ratios: f64,
    pub ratio_sum: f64,
    pub ratio_min: f64,
    pub ratio_max: f64,
    /// Ratios set to 0 by a mask mode.
    pub masked: f64,
}

impl MismatchStats {
    pub fn add(&mut self, o: &MismatchStats) {
        if o.ratios > 0.0 {
            let first = self.ratios == 0.0;
            self.ratio_min = if first { o.ratio_min } else { self.ratio_min.min(o.ratio_min) };
            self.ratio_max = if first { o.ratio_max } else { self.ratio_max.max(o.ratio_max) };
        }
        self.tokens += o.tokens;
        self.token_abs_diff += o.token_abs_diff;
        self.token_abs_diff_max = self.token_abs_diff_max.max(o.token_abs_diff_max);
        self.sequences += o.sequences;
        self.sequence_abs_diff += o.sequence_abs_diff;
        self.ratios += o.ratios;
        self.ratio_sum += o.ratio_sum;
        self.masked += o.masked;
    }

    fn ratio(&mut self, r: f64) {
        let first = self.ratios == 0.0;
        self.ratio_min = if first { r } else { self.ratio_min.min(r) };
        self.ratio_max = if first { r } else { self.ratio_max.max(r) };
        self.ratios += 1.0;
        self.ratio_sum += r;
        if r == 0.0 {
            self.masked += 1.0;
        }
    }
}

/// The correction's factor for every token of rows of `width` (1 where `mode` is `None`), and the
/// mismatch statistics. `trainer` and `sampler` are the two log-probs of each token, `mask` 1 on loss
/// tokens; padding gets factor 1 (its loss weight is 0 anyway). As TRL: diff = (trainer - sampler) on
/// loss tokens; a token mode's ratio is exp(diff), a sequence mode's exp(sum of the row's diffs).
pub fn correction_factors(trainer: &[f32], sampler: &[f32], mask: &[f32], width: usize, c: &RolloutCorrection, st: &mut MismatchStats) -> Vec<f32> {
    let mut out = vec![1f32; trainer.len()];
    if width == 0 {
        return out;
    }
    for (row, ((tr, sa), m)) in trainer.chunks(width).zip(sampler.chunks(width)).zip(mask.chunks(width)).enumerate() {
        let mut seq = 0f64;
        let mut any = false;
        for t in 0..tr.len() {
            if m[t] == 0.0 {
                continue;
            }
            any = true;
            let d = ((tr[t] - sa[t]) * m[t]) as f64;
            seq += d;
            st.tokens += 1.0;
            st.token_abs_diff += d.abs();
            st.token_abs_diff_max = st.token_abs_diff_max.max(d.abs());
            if c.mode != CorrectionMode::None && !c.mode.per_sequence() {
                let r = c.bound(d.exp());
                st.ratio(r);
                out[row * width + t] = r as f32;
            }
        }
        st.sequences += 1.0;
        st.sequence_abs_diff += seq.abs();
        if c.mode.per_sequence() {
            let r = c.bound(seq.exp());
            st.ratio(r);
            if any {
                out[row * width..][..tr.len()].iter_mut().zip(m).filter(|(_, &m)| m != 0.0).for_each(|(o, _)| *o = r as f32);
            }
        }
    }
    out
}
