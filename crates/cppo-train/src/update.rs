//! The policy update for the completions a strategy kept: reference and old-policy log-probs (only when
//! needed), then mu passes of forward, loss and backward over token-budgeted micro-batches and one
//! optimizer step per pass, on the run's backend (`device::Models`, the CPU's or a GPU's). The loss
//! and its gradient dL/dlogp come from `cppo_core::loss`; the decoder's backward pass takes that
//! gradient directly. Nothing here ever sees a pruned completion:
//! the batch is built from the selection alone.

use std::time::Instant;

use anyhow::{bail, Result};
use cppo_core::loss::{policy_loss, LossStats, RolloutCorrection, Rows};
use cppo_core::Selection;
use cppo_kernels::backend::Backend;

use crate::config::LossSection;
use crate::device::Models;
use crate::rollout::Rollout;

/// One kept completion as the update sees it.
pub struct Item<'a> {
    pub group: usize,
    /// The completion's index within its group.
    pub index: usize,
    pub tokens: &'a [u32],
    /// The sampler's log-prob of each token (under the weights and temperature it sampled with).
    pub rollout_logprobs: &'a [f32],
    pub advantage: f32,
    pub weight: f32,
}

/// The kept completions of one question that go through the model together, sharing the prompt.
pub struct MicroBatch {
    pub group: usize,
    pub items: Vec<usize>,
}

pub struct Batch<'a> {
    pub prompts: Vec<&'a [u32]>,
    pub items: Vec<Item<'a>>,
    pub micro: Vec<MicroBatch>,
    /// Runs of consecutive micro-batches whose rows fit the token budget together: their losses are
    /// summed and back-propagated once, so a step of many small questions (CPPO with allocation) pays
    /// for one gradient buffer and one accumulation per run rather than per question.
    pub backward_groups: Vec<std::ops::Range<usize>>,
    pub loss_tokens: usize,
    /// The rollout correction the loss applies: the loss section's explicit one (or none) from
    /// `build_batch`; a run sets the one its precisions call for (`objectives::run_rollout_correction`).
    pub correction: RolloutCorrection,
}

/// Builds the update batch from the selection. Truncated completions are left out entirely when
/// `mask_truncated` is on (they would carry no loss), and so is any completion without tokens.
pub fn build_batch<'a>(
    rollouts: &'a [Rollout],
    selection: &Selection,
    loss: &LossSection,
    normaliser: f64,
    micro_batch_tokens: usize,
) -> Result<Batch<'a>> {
    let mut kept = Vec::new();
    for (g, i, a) in selection.iter_kept() {
        let c = &rollouts[g].completions[i];
        if c.tokens.is_empty() || (loss.mask_truncated && c.truncated()) {
            continue;
        }
        kept.push((g, i, c, a));
    }
    let counts: Vec<usize> = kept.iter().map(|(_, _, c, _)| c.tokens.len()).collect();
    let weights = loss.aggregation().weights(&counts, normaliser).map_err(|e| anyhow::anyhow!("loss: {e}"))?;
    let items: Vec<Item> = kept
        .iter()
        .zip(&weights)
        .map(|(&(group, index, c, a), &w)| Item { group, index, tokens: &c.tokens, rollout_logprobs: &c.logprobs, advantage: a as f32, weight: w as f32 })
        .collect();
    // Pack each question's items greedily under the token budget (its prompt counted once per micro-batch).
    let mut micro: Vec<MicroBatch> = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let g = items[i].group;
        let prompt = rollouts[g].prompt.len();
        let mut mb = MicroBatch { group: g, items: vec![i] };
        let mut used = prompt + items[i].tokens.len();
        i += 1;
        while i < items.len() && items[i].group == g && used + items[i].tokens.len() <= micro_batch_tokens {
            used += items[i].tokens.len();
            mb.items.push(i);
            i += 1;
        }
        micro.push(mb);
    }
    let rows = |mb: &MicroBatch| rollouts[mb.group].prompt.len() + mb.items.iter().map(|&i| items[i].tokens.len()).sum::<usize>();
    let mut backward_groups = Vec::new();
    let (mut start, mut used) = (0, 0);
    for (m, mb) in micro.iter().enumerate() {
        let r = rows(mb);
        if m > start && used + r > micro_batch_tokens {
            backward_groups.push(start..m);
            (start, used) = (m, 0);
        }
        used += r;
    }
    if start < micro.len() {
        backward_groups.push(start..micro.len());
    }
    Ok(Batch {
        backward_groups,
        prompts: rollouts.iter().map(|r| &r.prompt[..]).collect(),
        loss_tokens: counts.iter().sum(),
        items,
        micro,
        correction: loss.rollout_correction(false),
    })
}

#[derive(Clone, Debug, Default)]
pub struct UpdateOutcome {
    pub stats: LossStats,
    pub entropy_sum: f64,
    pub grad_norm: f64,
    pub learning_rate: f64,
    pub forward_rows: usize,
    pub reference_seconds: f64,
    pub old_policy_seconds: f64,
    pub policy_seconds: f64,
    pub optimizer_seconds: f64,
}

/// One question's scored completions on the host: `(k, width)` row-major, width its longest completion.
pub struct GroupScores {
    pub k: usize,
    pub width: usize,
    pub logprobs: Vec<f32>,
    /// 1 for a real token, 0 for padding.
    pub mask: Vec<f32>,
    /// Each scored token's predicted-distribution entropy (0 on padding).
    pub entropy: Vec<f64>,
}

/// The questions as the models' grouped calls take them.
pub type Questions<'q> = [(&'q [u32], &'q [&'q [u32]])];

/// One question's micro-batch of a scored call: its rows, cut to its own longest completion.
struct Question<'a> {
    prompt: &'a [u32],
    completions: Vec<&'a [u32]>,
}

/// The questions as the models' grouped calls take them.
fn as_refs<'a>(qs: &'a [Question<'a>]) -> Vec<(&'a [u32], &'a [&'a [u32]])> {
    qs.iter().map(|q| (q.prompt, q.completions.as_slice())).collect()
}

/// Runs mu passes over the batch on `models`; `lr(pass)` gives the learning rate of each optimizer step.
pub(crate) fn update<B: Backend<T = f32>>(models: &mut Models<'_, B>, loss_cfg: &LossSection, batch: &Batch, lr: impl Fn(usize) -> f64) -> Result<UpdateOutcome> {
    let mut out = UpdateOutcome::default();
    if batch.items.is_empty() {
        return Ok(out);
    }
    let mu = loss_cfg.num_iterations;
    let need_ref = loss_cfg.beta > 0.0;
    // Forward rows are counted by the decoders themselves, so they report what really reached a forward pass.
    let rows_before = models.scored_rows();
    // Every pass scores a backward group's questions together (one forward pass of the large products
    // instead of one per question), then hands each micro-batch its own rows and columns.
    let groups: Vec<Vec<Question>> = batch
        .backward_groups
        .iter()
        .map(|g| {
            g.clone()
                .map(|m| {
                    let mb = &batch.micro[m];
                    Question { prompt: batch.prompts[mb.group], completions: mb.items.iter().map(|&i| batch.items[i].tokens).collect() }
                })
                .collect()
        })
        .collect();
    let mut reference: Vec<Option<Vec<f32>>> = vec![None; batch.micro.len()];
    let mut old: Vec<Option<Vec<f32>>> = vec![None; batch.micro.len()];
    for (group, qs) in batch.backward_groups.iter().zip(&groups) {
        let qs = as_refs(qs);
        if need_ref {
            let t = Instant::now();
            for (m, part) in group.clone().zip(models.reference(&qs)?) {
                reference[m] = Some(part.logprobs);
            }
            out.reference_seconds += t.elapsed().as_secs_f64();
        }
        if mu > 1 {
            let t = Instant::now();
            for (m, part) in group.clone().zip(models.old_policy(&qs)?) {
                old[m] = Some(part.logprobs);
            }
            out.old_policy_seconds += t.elapsed().as_secs_f64();
        }
    }
    let policy_loss_cfg = loss_cfg.policy_with(batch.correction);
    let need_entropy = policy_loss_cfg.top_entropy_quantile < 1.0;
    for pass in 0..mu {
        let t = Instant::now();
        models.zero_grads()?;
        let mut pass_stats = LossStats::default();
        for (group, qs) in batch.backward_groups.iter().zip(&groups) {
            let qs = as_refs(qs);
            // dL/dlogp of the whole call, each micro-batch's rows filled in by its loss.
            let mut loss = |parts: &[GroupScores], rows: usize, width: usize| -> Result<Vec<f32>> {
                let mut dlogp = vec![0f32; rows * width];
                let mut row = 0;
                for (m, lp) in group.clone().zip(parts) {
                    let mb = &batch.micro[m];
                    let (k, w) = (lp.k, lp.width);
                    let advantages: Vec<f32> = mb.items.iter().map(|&i| batch.items[i].advantage).collect();
                    let weights: Vec<f32> = mb.items.iter().map(|&i| batch.items[i].weight).collect();
                    let rollout = padded_rows(mb.items.iter().map(|&i| batch.items[i].rollout_logprobs), w);
                    let entropy: Option<Vec<f32>> = need_entropy.then(|| lp.entropy.iter().map(|&e| e as f32).collect());
                    let inputs = Rows {
                        width: w,
                        logprobs: &lp.logprobs,
                        old: old[m].as_deref(),
                        reference: reference[m].as_deref(),
                        mask: &lp.mask,
                        advantages: &advantages,
                        weights: &weights,
                        rollout: Some(&rollout),
                        entropy: entropy.as_deref(),
                    };
                    let (grad, stats) = policy_loss(&inputs, &policy_loss_cfg).map_err(|e| anyhow::anyhow!("loss: {e}"))?;
                    if !stats.loss.is_finite() {
                        bail!("the loss is {} (micro-batch {m} of question {}): stopping this step without updating the weights", stats.loss, mb.group);
                    }
                    for (j, g) in grad.chunks(w.max(1)).take(k).enumerate() {
                        dlogp[(row + j) * width..][..w].copy_from_slice(g);
                    }
                    row += k;
                    if pass + 1 == mu {
                        out.entropy_sum += lp.entropy.iter().zip(&lp.mask).map(|(e, &m)| e * m as f64).sum::<f64>();
                    }
                    pass_stats.add(&stats);
                }
                Ok(dlogp)
            };
            models.forward_backward(&qs, &mut loss)?;
        }
        out.policy_seconds += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let rate = lr(pass);
        let report = models.optimizer_step(rate)?;
        out.optimizer_seconds += t.elapsed().as_secs_f64();
        // Every statistic reported is the last pass's (with mu = 1, the only one): loss, KL, clip
        // fractions, entropy, gradient norm and learning rate all describe the step's last optimizer
        // step. The first pass's ratios are 1 by construction, so its clip fractions say nothing.
        if pass + 1 == mu {
            out.stats = pass_stats;
            out.grad_norm = report.grad_norm;
            out.learning_rate = rate;
        }
    }
    out.forward_rows = (models.scored_rows() - rows_before) as usize;
    Ok(out)
}

/// Per-completion values right-padded with 0 to `width`, row-major.
fn padded_rows<'a>(rows: impl Iterator<Item = &'a [f32]>, width: usize) -> Vec<f32> {
    let mut out = Vec::new();
    for r in rows {
        let start = out.len();
        out.extend_from_slice(&r[..r.len().min(width)]);
        out.resize(start + width, 0.0);
    }
    out
}
