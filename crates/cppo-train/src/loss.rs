//! The GRPO-family policy loss on tensors: PPO clipped surrogate with separate low / high clip
//! (clip-higher), optional dual clip, and the k3 KL estimate to the reference, weighted per token by the
//! aggregation rule chosen in the core.

use anyhow::Result;
use candle_core::{DType, Tensor, D};

use crate::config::LossSection;

/// Everything the loss of one micro-batch needs; all tensors are (k, L) except `advantages` (k).
pub struct LossInputs<'a> {
    /// Log-probs of the completion tokens under the policy, with gradient.
    pub logprobs: &'a Tensor,
    /// Log-probs under the policy that generated the batch; `None` when the batch is used once (mu = 1),
    /// where they equal the detached current log-probs.
    pub old_logprobs: Option<&'a Tensor>,
    /// Log-probs under the frozen reference; `None` when beta = 0.
    pub ref_logprobs: Option<&'a Tensor>,
    pub advantages: &'a Tensor,
    /// The aggregation weight of every token (0 on padding and masked tokens).
    pub weights: &'a Tensor,
    /// 1 on loss tokens, 0 elsewhere.
    pub mask: &'a Tensor,
}

/// Token sums for the metrics line, to be divided by `tokens` over the whole step.
#[derive(Clone, Copy, Debug, Default)]
pub struct LossStats {
    pub tokens: f64,
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

/// The micro-batch's share of the step loss (a scalar to back-propagate) and its statistics.
pub fn policy_loss(inputs: &LossInputs, cfg: &LossSection) -> Result<(Tensor, LossStats)> {
    let lp = inputs.logprobs;
    let old = match inputs.old_logprobs {
        Some(o) => o.clone(),
        None => lp.detach(),
    };
    let adv = inputs.advantages.to_dtype(DType::F32)?.unsqueeze(1)?.broadcast_as(lp.shape())?;
    let ratio = (lp - &old)?.exp()?;
    let clipped = ratio.clamp(1.0 - cfg.epsilon_low, 1.0 + cfg.epsilon_high)?;
    let surrogate = (&ratio * &adv)?;
    let surrogate_clipped = (&clipped * &adv)?;
    // PPO: maximise min(r A, clip(r) A), i.e. minimise its negative.
    let mut per_token = surrogate.minimum(&surrogate_clipped)?.neg()?;
    let mut dual_mask = None;
    if let Some(c) = cfg.dual_clip {
        // Dual clip: for A < 0 the loss is also bounded by -c A, so a huge ratio on a bad token cannot
        // dominate the step.
        let bound = (adv.neg()? * c)?;
        let negative = adv.lt(0.0)?;
        let bounded = per_token.minimum(&bound)?;
        dual_mask = Some(negative.to_dtype(DType::F32)?.mul(&per_token.gt(&bound)?.to_dtype(DType::F32)?)?);
        per_token = negative.where_cond(&bounded, &per_token)?;
    }
    let mut kl_tok = None;
    if cfg.beta > 0.0 {
        let reference = inputs.ref_logprobs.ok_or_else(|| anyhow::anyhow!("beta > 0 but no reference log-probs"))?;
        // k3 = exp(ref - lp) - (ref - lp) - 1 >= 0, an unbiased, low-variance KL(policy || ref) estimate.
        let d = (reference - lp)?;
        let mut k3 = ((d.exp()? - &d)? - 1.0)?;
        if let Some(c) = cfg.kl_clamp {
            k3 = k3.clamp(-c, c)?;
        }
        if cfg.use_bias_correction_kl {
            // TRL's `use_bias_correction_kl` (DeepSeek-V3.2): the tokens were drawn from the old policy,
            // so k3 is importance-weighted by pi_theta / pi_old, the ratio with its gradient.
            k3 = (k3 * &ratio)?;
        }
        per_token = (per_token + (&k3 * cfg.beta)?)?;
        kl_tok = Some(k3);
    }
    let loss = (per_token * inputs.weights)?.sum_all()?;

    let mask = inputs.mask;
    let sum = |t: &Tensor| -> Result<f64> { Ok((t * mask)?.sum_all()?.to_dtype(DType::F64)?.to_scalar::<f64>()?) };
    let ratio_d = ratio.detach();
    let adv_pos = adv.gt(0.0)?.to_dtype(DType::F32)?;
    let adv_neg = adv.lt(0.0)?.to_dtype(DType::F32)?;
    let low = (ratio_d.lt(1.0 - cfg.epsilon_low)?.to_dtype(DType::F32)? * &adv_neg)?;
    let high = (ratio_d.gt(1.0 + cfg.epsilon_high)?.to_dtype(DType::F32)? * &adv_pos)?;
    let stats = LossStats {
        tokens: mask.sum_all()?.to_dtype(DType::F64)?.to_scalar::<f64>()?,
        loss: loss.to_dtype(DType::F64)?.to_scalar::<f64>()?,
        kl_sum: match &kl_tok {
            Some(k) => sum(&k.detach())?,
            None => 0.0,
        },
        clipped_low: sum(&low)?,
        clipped_high: sum(&high)?,
        dual_clipped: match &dual_mask {
            Some(m) => sum(m)?,
            None => 0.0,
        },
        ratio_sum: sum(&ratio_d)?,
    };
    Ok((loss, stats))
}

/// Mean over loss tokens of a detached (k, L) tensor, e.g. the entropy, as a token sum.
pub fn masked_sum(t: &Tensor, mask: &Tensor) -> Result<f64> {
    Ok((t.detach() * mask)?.sum_all()?.to_dtype(DType::F64)?.to_scalar::<f64>()?)
}

/// Per-row token counts of a (k, L) mask.
pub fn row_counts(mask: &Tensor) -> Result<Vec<f32>> {
    Ok(mask.sum(D::Minus1)?.to_vec1::<f32>()?)
}
