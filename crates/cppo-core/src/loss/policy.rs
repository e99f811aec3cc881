//! The per-token policy loss of one micro-batch and its gradient dL/dlogp, written out by hand.
//!
//! Everything is computed in f32, the precision the decoder's log-probs come in, in the order of the
//! operations below, and where the loss is not differentiable (a ratio exactly at a clip bound, or the
//! clipped and unclipped surrogates equal, as at ratio 1) the gradient is split evenly between the
//! two sides, as a subgradient; at ratio 1 both sides agree, so the gradient is -A w either way.

use crate::error::Error;

/// The loss settings (the `[loss]` section's clip, KL and dual-clip fields).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolicyLoss {
    pub epsilon_low: f64,
    pub epsilon_high: f64,
    /// Dual clip c: for A < 0 the token's loss is bounded by -c A.
    pub dual_clip: Option<f64>,
    /// The KL coefficient; 0 leaves the reference out.
    pub beta: f64,
    pub kl_clamp: Option<f64>,
    /// TRL's `use_bias_correction_kl`: k3 times the ratio pi_theta / pi_old, with the ratio's gradient.
    pub use_bias_correction_kl: bool,
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

/// The loss of one micro-batch: dL/dlogp for every token (0 where the weight or mask is 0) and its
/// statistics. With beta > 0 and no reference log-probs, or slices of the wrong length, an error.
pub fn policy_loss(rows: &Rows, cfg: &PolicyLoss) -> Result<(Vec<f32>, LossStats), Error> {
    let (k, width) = (rows.advantages.len(), rows.width);
    let n = k * width;
    let lens_ok = rows.logprobs.len() == n
        && rows.mask.len() == n
        && rows.weights.len() == k
        && rows.old.is_none_or(|o| o.len() == n)
        && rows.reference.is_none_or(|r| r.len() == n);
    if !lens_ok {
        return Err(Error::LossShape { rows: k, width });
    }
    let reference = match (cfg.beta > 0.0, rows.reference) {
        (true, None) => return Err(Error::NoReference),
        (true, Some(r)) => Some(r),
        (false, _) => None,
    };
    let (lo, hi) = ((1.0 - cfg.epsilon_low) as f32, (1.0 + cfg.epsilon_high) as f32);
    let beta = cfg.beta as f32;
    let mut dlogp = vec![0f32; n];
    let mut st = LossStats::default();
    for j in 0..k {
        let (a, w_row) = (rows.advantages[j], rows.weights[j]);
        for t in 0..width {
            let i = j * width + t;
            let (lp, mask) = (rows.logprobs[i], rows.mask[i]);
            let w = mask * w_row;
            let old = rows.old.map_or(lp, |o| o[i]);
            // PPO: maximise min(r A, clip(r) A), i.e. minimise its negative.
            let ratio = (lp - old).exp();
            let clipped = ratio.max(lo).min(hi);
            let (surrogate, surrogate_clipped) = (ratio * a, clipped * a);
            let mut per_token = -surrogate.min(surrogate_clipped);
            // dL/d per_token is the token's weight; `g_ppo` is what reaches the PPO term.
            let mut g_ppo = w;
            if let Some(c) = cfg.dual_clip {
                // For A < 0 the loss is also bounded by -c A, so a huge ratio on a bad token cannot
                // dominate the step.
                let bound = -a * c as f32;
                if a < 0.0 {
                    let (to_ppo, _) = split_min(per_token, bound);
                    if per_token > bound {
                        st.dual_clipped += mask as f64;
                    }
                    per_token = per_token.min(bound);
                    g_ppo = w * to_ppo;
                }
            }
            let (to_s, to_sc) = split_min(surrogate, surrogate_clipped);
            let g_min = -g_ppo;
            let mut g_ratio = g_min * to_s * a + g_min * to_sc * a * clamp_share(ratio, lo, hi);
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
                    g_ratio += g_k3 * k3;
                    let corrected = k3 * ratio;
                    let g = g_k3 * ratio;
                    k3 = corrected;
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
            dlogp[i] = g_ratio * ratio + g_lp_kl;
            st.loss += (per_token * w) as f64;
            st.tokens += mask as f64;
            if ratio < lo && a < 0.0 {
                st.clipped_low += mask as f64;
            }
            if ratio > hi && a > 0.0 {
                st.clipped_high += mask as f64;
            }
            st.ratio_sum += (ratio * mask) as f64;
        }
    }
    Ok((dlogp, st))
}
