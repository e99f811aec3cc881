//! The per-token policy loss of one micro-batch and its gradient dL/dlogp, written out by hand.
//!
//! Everything is computed in f32, the precision the decoder's log-probs come in, in the order of the
//! operations below, and where the loss is not differentiable (a ratio exactly at a clip bound, or the
//! clipped and unclipped surrogates equal, as at ratio 1) the gradient is split evenly between the
//! two sides, as a subgradient; at ratio 1 both sides agree, so the gradient is -A w either way.

use serde::{Deserialize, Serialize};

use super::masks::{high_entropy_mask, off_policy_keep};
use super::rollout::{correction_factors, CorrectionMode, MismatchStats, RolloutCorrection};
use crate::error::Error;

/// The per-token objective of the policy term (TRL's `loss_type`, without its aggregation part).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Objective {
    /// PPO's clipped surrogate -min(r A, clip(r) A) (TRL's grpo, bnpo, dr_grpo, dapo, luspo).
    #[default]
    Clip,
    /// MiniMax-M1's CISPO: -sg(min(r, epsilon_high)) A logp; the clipped ratio carries no gradient,
    /// so every token keeps a gradient.
    Cispo,
    /// SAPO's soft gate: -sigmoid(tau (r - 1)) 4 / tau A, tau the positive or the negative temperature
    /// by the sign of A (A = 0 takes the negative one, as TRL).
    Sapo { temperature_pos: f64, temperature_neg: f64 },
    /// VESPO (TRL's `vespo`): -sg(phi(w)) A logp, w the sequence's importance ratio exp(sum of its
    /// clamped log-ratios, and of the token rollout correction's log-ratios), phi(w) = e^lambda w^k
    /// e^(-lambda w) a gamma weight with phi(1) = 1, (k, lambda) the positive pair for A >= 0 and the
    /// negative one otherwise. The rollout correction enters w rather than multiplying the token.
    Vespo { k_pos: f64, lambda_pos: f64, k_neg: f64, lambda_neg: f64 },
}

/// TRL's `importance_sampling_level`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportanceSamplingLevel {
    /// One ratio per token, pi_theta(y_t) / pi_old(y_t).
    #[default]
    Token,
    /// GSPO: one ratio per sequence, exp of the mean over its loss tokens of the log-ratios, shared
    /// by all its tokens (its gradient reaches each token as 1 / T of the sequence's).
    Sequence,
    /// GSPO-token (the GSPO paper's token variant): each token's weight is sg(s) pi(y_t) / sg(pi(y_t)),
    /// whose value is the sequence ratio s but whose gradient reaches that token alone, so per-token
    /// advantages could differ. TRL 1.16 has no such level.
    SequenceToken,
}

/// The loss settings (the `[loss]` section's objective, clip, KL, masks and rollout correction).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolicyLoss {
    pub epsilon_low: f64,
    /// With `Objective::Cispo`, the cap of the ratio itself (TRL's convention), not 1 + epsilon.
    pub epsilon_high: f64,
    /// Dual clip c: for A < 0 the token's loss is bounded by -c A (clip objective only).
    pub dual_clip: Option<f64>,
    /// The KL coefficient; 0 leaves the reference out.
    pub beta: f64,
    pub kl_clamp: Option<f64>,
    /// TRL's `use_bias_correction_kl`: k3 times the ratio pi_theta / pi_old, with the ratio's gradient.
    pub use_bias_correction_kl: bool,
    pub objective: Objective,
    pub importance_sampling_level: ImportanceSamplingLevel,
    /// INTELLECT-2's two-sided clip (TRL's `delta`): the unclipped ratio is also capped at delta, so a
    /// negative-advantage token's loss is bounded (clip objective only).
    pub delta: Option<f64>,
    /// TRL's `off_policy_mask_threshold`: drops the policy term of a negative-advantage sequence whose
    /// mean log-ratio sampler / trainer exceeds it (`masks::off_policy_keep`).
    pub off_policy_mask_threshold: Option<f64>,
    /// TRL's `top_entropy_quantile` rho: only the top-rho tokens by entropy keep their policy term (1:
    /// all); the quantile is over the loss tokens of the rows given to one call.
    pub top_entropy_quantile: f64,
    /// The rollout correction; applied when `Rows::rollout` is given and its mode is not `None`.
    pub rollout_correction: RolloutCorrection,
}

impl Default for PolicyLoss {
    fn default() -> Self {
        PolicyLoss {
            epsilon_low: 0.2,
            epsilon_high: 0.2,
            dual_clip: None,
            beta: 0.0,
            kl_clamp: None,
            use_bias_correction_kl: false,
            objective: Objective::Clip,
            importance_sampling_level: ImportanceSamplingLevel::Token,
            delta: None,
            off_policy_mask_threshold: None,
            top_entropy_quantile: 1.0,
            rollout_correction: RolloutCorrection::NONE,
        }
    }
}

/// One micro-batch of k completions, right-padded to width L: every per-token slice is (k, L) row-major.
pub struct Rows<'a> {
    pub width: usize,
    /// Log-probs of the completion tokens under the policy being trained.
    pub logprobs: &'a [f32],
    /// Under the policy that generated the batch; `None` when the batch is used once (mu = 1), where
    /// they equal `logprobs` (ratio 1) and carry no gradient.
    pub old: Option<&'a [f32]>,
    /// Under the frozen reference; needed when beta > 0.
    pub reference: Option<&'a [f32]>,
    /// 1 on loss tokens, 0 on padding and masked tokens.
    pub mask: &'a [f32],
    /// One advantage per completion (k).
    pub advantages: &'a [f32],
    /// One aggregation weight per completion (k), from `Aggregation::weights`.
    pub weights: &'a [f32],
    /// The sampler's log-probs of the tokens (under the weights and temperature it sampled with); with
    /// them the mismatch is measured and, per `rollout_correction`, corrected.
    pub rollout: Option<&'a [f32]>,
    /// Each token's entropy under the policy; needed when `top_entropy_quantile` < 1.
    pub entropy: Option<&'a [f32]>,
}

/// Token sums for the metrics line, to be divided by `tokens` over the whole step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LossStats {
    pub tokens: f64,
    /// The micro-batch's share of the step loss, sum_t w_t l_t.
    pub loss: f64,
    pub kl_sum: f64,
    pub clipped_low: f64,
    pub clipped_high: f64,
    pub dual_clipped: f64,
    pub ratio_sum: f64,
    /// Tokens whose policy term a mask (off-policy, entropy) or a masked rollout ratio took out.
    pub policy_masked: f64,
    pub mismatch: MismatchStats,
}

impl LossStats {
    pub fn add(&mut self, o: &LossStats) {
        self.tokens += o.tokens;
        self.loss += o.loss;
        self.kl_sum += o.kl_sum;
        self.clipped_low += o.clipped_low;
        self.clipped_high += o.clipped_high;
        self.dual_clipped += o.dual_clipped;
        self.ratio_sum += o.ratio_sum;
        self.policy_masked += o.policy_masked;
        self.mismatch.add(&o.mismatch);
    }
}

/// How the gradient reaching `min(x, y)` splits between x and y (ties evenly).
fn split_min(x: f32, y: f32) -> (f32, f32) {
    if x < y {
        (1.0, 0.0)
    } else if x > y {
        (0.0, 1.0)
    } else {
        (0.5, 0.5)
    }
}

/// The share of the gradient of `clamp(x, lo, hi)` that reaches x: 1 inside, 0 outside, 1/2 at a bound.
fn clamp_share(x: f32, lo: f32, hi: f32) -> f32 {
    let maxed = x.max(lo);
    let at_x = if maxed == x { if maxed == lo { 0.5 } else { 1.0 } } else { 0.0 };
    let clamped = maxed.min(hi);
    let at_maxed = if clamped == maxed { if clamped == hi { 0.5 } else { 1.0 } } else { 0.0 };
    at_x * at_maxed
}


/// One token's policy term for its importance weight `coef` (its ratio, or its sequence's).
struct Term {
    value: f32,
    /// d value / d coef.
    d_coef: f32,
    /// d value / d logp besides through coef (CISPO's logp factor).
    d_lp: f32,
    low: bool,
    high: bool,
    dual: bool,
}

fn policy_term(coef: f32, lp: f32, a: f32, cfg: &PolicyLoss, lo: f32, hi: f32, phi: f32) -> Term {
    match cfg.objective {
        Objective::Vespo { .. } => Term { value: -phi * a * lp, d_coef: 0.0, d_lp: -phi * a, low: false, high: false, dual: false },
        Objective::Clip => {
            // PPO: maximise min(r A, clip(r) A), i.e. minimise its negative; with delta the first r is
            // min(r, delta).
            let (capped, cap_share) = match cfg.delta {
                Some(d) => (coef.min(d as f32), split_min(coef, d as f32).0),
                None => (coef, 1.0),
            };
            let clipped = coef.max(lo).min(hi);
            let (surrogate, surrogate_clipped) = (capped * a, clipped * a);
            let mut value = -surrogate.min(surrogate_clipped);
            let (mut to_term, mut dual) = (1.0, false);
            if let (Some(c), true) = (cfg.dual_clip, a < 0.0) {
                // For A < 0 the loss is also bounded by -c A, so a huge ratio on a bad token cannot
                // dominate the step.
                let bound = -a * c as f32;
                dual = value > bound;
                to_term = split_min(value, bound).0;
                value = value.min(bound);
            }
            let (to_s, to_sc) = split_min(surrogate, surrogate_clipped);
            let d_coef = -to_term * (to_s * a * cap_share + to_sc * a * clamp_share(coef, lo, hi));
            Term { value, d_coef, d_lp: 0.0, low: coef < lo && a < 0.0, high: coef > hi && a > 0.0, dual }
        }
        Objective::Cispo => {
            let cap = cfg.epsilon_high as f32;
            let c = coef.min(cap);
            Term { value: -c * a * lp, d_coef: 0.0, d_lp: -c * a, low: false, high: coef > cap && a > 0.0, dual: false }
        }
        Objective::Sapo { temperature_pos, temperature_neg } => {
            let tau = if a > 0.0 { temperature_pos } else { temperature_neg } as f32;
            let gate = 1.0 / (1.0 + (-tau * (coef - 1.0)).exp());
            Term { value: -gate * 4.0 / tau * a, d_coef: -4.0 * a * gate * (1.0 - gate), d_lp: 0.0, low: false, high: false, dual: false }
        }
    }
}

/// VESPO's gamma weight phi(w) of one sequence, computed in log space as TRL does: log w is the sum over
/// its loss tokens of the log-ratios clamped to [-20, 20], plus those of the token rollout correction's
/// factors clamped to [ln 1e-8, 20], then clamped to [ln 1e-8, 20]; log phi = lambda + k log w - lambda w;
/// a non-finite phi is 0.
fn vespo_weight(a: f32, log_ratios: impl Iterator<Item = f32>, correction: Option<&[f32]>, mask: &[f32], params: (f64, f64, f64, f64)) -> f32 {
    let lower = 1e-8f32.ln();
    let mut log_w: f32 = log_ratios.zip(mask).map(|(r, m)| r.clamp(-20.0, 20.0) * m).sum();
    if let Some(c) = correction {
        log_w += c.iter().zip(mask).map(|(&f, m)| f.ln().clamp(lower, 20.0) * m).sum::<f32>();
    }
    let log_w = log_w.clamp(lower, 20.0);
    let (k_pos, lambda_pos, k_neg, lambda_neg) = params;
    let (k, lambda) = if a >= 0.0 { (k_pos as f32, lambda_pos as f32) } else { (k_neg as f32, lambda_neg as f32) };
    let lambda = lambda.max(1e-4);
    let phi = (lambda + k * log_w - lambda * log_w.exp()).exp();
    if phi.is_finite() { phi } else { 0.0 }
}

/// The loss of one micro-batch: dL/dlogp for every token (0 where the weight or mask is 0) and its
/// statistics. Per token: (policy term) x (off-policy keep) x (entropy mask) x (rollout correction)
/// + beta k3, in TRL's order; the masks and the correction are constants of the loss. Errors: beta > 0
/// without reference log-probs, a rollout correction without rollout log-probs, an entropy quantile
/// without entropies, or slices of the wrong length.
pub fn policy_loss(rows: &Rows, cfg: &PolicyLoss) -> Result<(Vec<f32>, LossStats), Error> {
    let (k, width) = (rows.advantages.len(), rows.width);
    let n = k * width;
    let lens_ok = rows.logprobs.len() == n
        && rows.mask.len() == n
        && rows.weights.len() == k
        && rows.old.is_none_or(|o| o.len() == n)
        && rows.reference.is_none_or(|r| r.len() == n)
        && rows.rollout.is_none_or(|r| r.len() == n)
        && rows.entropy.is_none_or(|e| e.len() == n);
    if !lens_ok {
        return Err(Error::LossShape { rows: k, width });
    }
    let reference = match (cfg.beta > 0.0, rows.reference) {
        (true, None) => return Err(Error::NoReference),
        (true, Some(r)) => Some(r),
        (false, _) => None,
    };
    let mut st = LossStats::default();
    // The trainer's log-probs of the weights that sampled: the old policy's, or (mu = 1) the current ones.
    let sampling_weights = rows.old.unwrap_or(rows.logprobs);
    let correction = match (cfg.rollout_correction.mode, rows.rollout) {
        (_, Some(r)) => Some(correction_factors(sampling_weights, r, rows.mask, width, &cfg.rollout_correction, &mut st.mismatch)),
        (CorrectionMode::None, None) => None,
        (_, None) => return Err(Error::NoRolloutLogprobs),
    };
    let vespo = match cfg.objective {
        Objective::Vespo { k_pos, lambda_pos, k_neg, lambda_neg } => {
            if matches!(cfg.rollout_correction.mode, CorrectionMode::SequenceMask | CorrectionMode::SequenceTruncate) && correction.is_some() {
                return Err(Error::VespoSequenceCorrection);
            }
            Some((k_pos, lambda_pos, k_neg, lambda_neg))
        }
        _ => None,
    };
    let entropy_mask = match (cfg.top_entropy_quantile < 1.0, rows.entropy) {
        (false, _) => None,
        (true, Some(e)) => Some(high_entropy_mask(e, rows.mask, cfg.top_entropy_quantile)),
        (true, None) => return Err(Error::NoEntropy),
    };
    let (lo, hi) = ((1.0 - cfg.epsilon_low) as f32, (1.0 + cfg.epsilon_high) as f32);
    let beta = cfg.beta as f32;
    let level = cfg.importance_sampling_level;
    let sequence_level = level == ImportanceSamplingLevel::Sequence;
    let sequence_value = level != ImportanceSamplingLevel::Token;
    let mut dlogp = vec![0f32; n];
    for j in 0..k {
        let (a, w_row) = (rows.advantages[j], rows.weights[j]);
        let span = j * width..(j + 1) * width;
        let (lp_row, mask_row) = (&rows.logprobs[span.clone()], &rows.mask[span.clone()]);
        let old_row = rows.old.map(|o| &o[span.clone()]);
        let tokens: f32 = mask_row.iter().sum();
        // GSPO's sequence weight: the mean log-ratio over the loss tokens.
        let seq_log_weight = match old_row {
            Some(o) if sequence_value => lp_row.iter().zip(o).zip(mask_row).map(|((l, o), m)| (l - o) * m).sum::<f32>() / tokens.max(1.0),
            _ => 0.0,
        };
        let keep = match cfg.off_policy_mask_threshold {
            Some(delta) => {
                let sampler = rows.rollout.or(rows.old).map_or(lp_row, |s| &s[span.clone()]);
                off_policy_keep(a, lp_row, sampler, mask_row, delta)
            }
            None => 1.0,
        };
        // VESPO's weight, a constant of the loss (TRL computes it under no_grad).
        let phi = vespo.map_or(1.0, |params| {
            let log_ratios = lp_row.iter().zip(old_row.unwrap_or(lp_row)).map(|(l, o)| l - o);
            vespo_weight(a, log_ratios, correction.as_ref().map(|c| &c[span.clone()]), mask_row, params)
        });
        // d L / d (the sequence's log weight), spread over its tokens after the row.
        let mut g_seq = 0f32;
        for t in 0..width {
            let i = j * width + t;
            let (lp, mask) = (rows.logprobs[i], rows.mask[i]);
            let w = mask * w_row;
            let log_weight = if sequence_value { seq_log_weight } else { old_row.map_or(0.0, |o| lp - o[t]) };
            let coef = log_weight.exp();
            let term = policy_term(coef, lp, a, cfg, lo, hi, phi);
            // VESPO takes the rollout correction into its weight instead (TRL: `loss_type != "vespo"`).
            let is = if vespo.is_some() { 1.0 } else { correction.as_ref().map_or(1.0, |c| c[i]) };
            let factor = keep * entropy_mask.as_ref().map_or(1.0, |m| m[i]) * is;
            let mut per_token = term.value * factor;
            let g_term = w * factor;
            let mut g_coef = g_term * term.d_coef;
            let g_lp_direct = g_term * term.d_lp;
            let mut g_lp_kl = 0.0f32;
            if let Some(reference) = reference {
                // k3 = exp(ref - lp) - (ref - lp) - 1 >= 0, an unbiased, low-variance KL(policy || ref)
                // estimate.
                let d = reference[i] - lp;
                let e = d.exp();
                let mut k3 = (e - d) - 1.0;
                let mut share = 1.0;
                if let Some(c) = cfg.kl_clamp {
                    let c = c as f32;
                    share = clamp_share(k3, -c, c);
                    k3 = k3.max(-c).min(c);
                }
                let g_k3 = w * beta;
                let g_raw = if cfg.use_bias_correction_kl {
                    // The tokens were drawn from the old policy, so k3 is importance-weighted by the ratio.
                    g_coef += g_k3 * k3;
                    let g = g_k3 * coef;
                    k3 *= coef;
                    g
                } else {
                    g_k3
                } * share;
                // d k3 / d d = e - 1, and d d / d lp = -1.
                let g_d = g_raw * e - g_raw;
                g_lp_kl = -g_d;
                per_token += k3 * beta;
                st.kl_sum += (k3 * mask) as f64;
            }
            // d coef / d log weight = coef; GSPO spreads it over the sequence, GSPO-token gives it to
            // this token alone (its log weight is sg(seq) + lp - sg(lp)).
            let g_log_weight = g_coef * coef;
            if sequence_level {
                g_seq += g_log_weight;
                dlogp[i] = g_lp_direct + g_lp_kl;
            } else {
                dlogp[i] = g_log_weight + g_lp_direct + g_lp_kl;
            }
            st.loss += (per_token * w) as f64;
            st.tokens += mask as f64;
            st.clipped_low += (term.low as u8 as f32 * mask) as f64;
            st.clipped_high += (term.high as u8 as f32 * mask) as f64;
            st.dual_clipped += (term.dual as u8 as f32 * mask) as f64;
            st.ratio_sum += (coef * mask) as f64;
            if factor == 0.0 {
                st.policy_masked += mask as f64;
            }
        }
        if sequence_level && tokens > 0.0 {
            for t in 0..width {
                dlogp[j * width + t] += g_seq * mask_row[t] / tokens;
            }
        }
    }
    Ok((dlogp, st))
}
