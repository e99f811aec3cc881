//! Masks that take tokens or whole sequences out of the policy term of the loss (the KL term keeps
//! them), each as TRL computes it.

/// "Beyond the 80/20 rule" (TRL's `top_entropy_quantile` rho): 1 on the loss tokens whose entropy is
/// at least the (1 - rho) quantile of the loss tokens' entropies of these rows (linear interpolation,
/// as `torch.quantile`), 0 elsewhere. No loss token: all 0.
pub fn high_entropy_mask(entropy: &[f32], mask: &[f32], top_quantile: f64) -> Vec<f32> {
    let mut values: Vec<f32> = entropy.iter().zip(mask).filter(|(_, &m)| m != 0.0).map(|(&e, _)| e).collect();
    if values.is_empty() {
        return vec![0.0; entropy.len()];
    }
    values.sort_by(f32::total_cmp);
    let q = (1.0 - top_quantile).clamp(0.0, 1.0);
    let pos = q * (values.len() - 1) as f64;
    let (below, frac) = (pos.floor() as usize, (pos - pos.floor()) as f32);
    let above = (below + 1).min(values.len() - 1);
    // torch.quantile's linear rule: v[below] + (v[above] - v[below]) * frac.
    let threshold = values[below] + (values[above] - values[below]) * frac;
    entropy.iter().zip(mask).map(|(&e, &m)| if m != 0.0 && e * m >= threshold { 1.0 } else { 0.0 }).collect()
}

/// DeepSeek-V3.2's off-policy sequence mask (TRL's `off_policy_mask_threshold` delta) for one row:
/// keep (1) when the advantage is >= 0 or the mean over loss tokens of (logp_sampler - logp_trainer),
/// a KL estimate of how far the current policy moved from the one that sampled, is <= delta.
pub fn off_policy_keep(advantage: f32, trainer: &[f32], sampler: &[f32], mask: &[f32], threshold: f64) -> f32 {
    let (mut sum, mut count) = (0f32, 0f32);
    for ((&lp, &s), &m) in trainer.iter().zip(sampler).zip(mask) {
        sum += (s - lp) * m;
        count += m;
    }
    let kl = sum / count.max(1.0);
    if advantage >= 0.0 || kl as f64 <= threshold {
        1.0
    } else {
        0.0
    }
}
