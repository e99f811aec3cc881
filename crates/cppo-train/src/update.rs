//! The policy update for the completions a strategy kept: reference and old-policy log-probs (only when
//! needed), then mu passes of forward, loss and backward over token-budgeted micro-batches and one
//! optimizer step per pass. The loss and its gradient dL/dlogp come from `cppo_core::loss`; the
//! decoder's backward pass takes that gradient directly. Nothing here ever sees a pruned completion:
//! the batch is built from the selection alone.

use std::time::Instant;

use anyhow::{bail, Result};
use candle_core::{DType, Tensor, Var};
use cppo_core::loss::{policy_loss, LossStats, Rows};
use cppo_core::Selection;
use cppo_model::Decoder;

use crate::config::LossSection;
use crate::optim::{AdamW, GradAccumulator};
use crate::rollout::Rollout;

/// One kept completion as the update sees it.
pub struct Item<'a> {
    pub group: usize,
    /// The completion's index within its group.
    pub index: usize,
    pub tokens: &'a [u32],
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
        kept.push((g, i, &c.tokens[..], a));
    }
    let counts: Vec<usize> = kept.iter().map(|(_, _, t, _)| t.len()).collect();
    let weights = loss.aggregation.weights(&counts, normaliser).map_err(|e| anyhow::anyhow!("loss: {e}"))?;
    let items: Vec<Item> = kept
        .iter()
        .zip(&weights)
        .map(|(&(group, index, tokens, a), &w)| Item { group, index, tokens, advantage: a as f32, weight: w as f32 })
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

pub struct Updater<'a> {
    pub policy: &'a Decoder,
    pub reference: Option<&'a Decoder>,
    pub vars: &'a [(String, Var)],
    pub optimizer: &'a mut AdamW,
    pub grads: &'a mut GradAccumulator,
    pub loss: &'a LossSection,
}

/// One micro-batch's question: its prompt and the completions it trains on.
type Question<'a> = (&'a [u32], Vec<&'a [u32]>);

/// The questions as the decoder's grouped calls take them.
fn as_refs<'a>(groups: &'a [Question<'a>]) -> Vec<(&'a [u32], &'a [&'a [u32]])> {
    groups.iter().map(|(p, c)| (*p, c.as_slice())).collect()
}

impl Updater<'_> {
    /// Runs mu passes over the batch; `lr(pass)` gives the learning rate of each optimizer step.
    pub fn run(&mut self, batch: &Batch, lr: impl Fn(usize) -> f64) -> Result<UpdateOutcome> {
        let mut out = UpdateOutcome::default();
        if batch.items.is_empty() {
            return Ok(out);
        }
        let device = self.policy.device().clone();
        let mu = self.loss.num_iterations;
        let need_ref = self.loss.beta > 0.0;
        // Forward rows are counted by the decoders themselves, so they report what really reached a forward pass.
        let scored = |u: &Self| u.policy.scored_completion_rows() + u.reference.map_or(0, |r| r.scored_completion_rows());
        let rows_before = scored(self);
        // Every pass scores a backward group's questions together (one forward pass of the large products
        // instead of one per question), then hands each micro-batch its own rows and columns.
        let groups: Vec<Vec<Question>> = batch
            .backward_groups
            .iter()
            .map(|g| {
                g.clone()
                    .map(|m| {
                        let mb = &batch.micro[m];
                        (batch.prompts[mb.group], mb.items.iter().map(|&i| batch.items[i].tokens).collect())
                    })
                    .collect()
            })
            .collect();
        let mut reference: Vec<Option<Tensor>> = vec![None; batch.micro.len()];
        let mut old: Vec<Option<Tensor>> = vec![None; batch.micro.len()];
        for (group, qs) in batch.backward_groups.iter().zip(&groups) {
            let qs = as_refs(qs);
            if need_ref {
                let model = self.reference.ok_or_else(|| anyhow::anyhow!("beta > 0 but no reference model was built"))?;
                let t = Instant::now();
                for (m, part) in group.clone().zip(model.grouped_completion_logprobs(&qs)?.per_group(&qs)?) {
                    reference[m] = Some(part.logprobs.detach());
                }
                out.reference_seconds += t.elapsed().as_secs_f64();
            }
            if mu > 1 {
                let t = Instant::now();
                for (m, part) in group.clone().zip(self.policy.grouped_completion_logprobs_detached(&qs)?.per_group(&qs)?) {
                    old[m] = Some(part.logprobs);
                }
                out.old_policy_seconds += t.elapsed().as_secs_f64();
            }
        }
        let policy_loss_cfg = self.loss.policy();
        for pass in 0..mu {
            let t = Instant::now();
            self.grads.zero();
            let mut pass_stats = LossStats::default();
            for (group, qs) in batch.backward_groups.iter().zip(&groups) {
                let qs = as_refs(qs);
                let scored = self.policy.grouped_completion_logprobs(&qs)?;
                // dL/dlogp of the whole call, each micro-batch's rows filled in by its loss.
                let (rows, width) = scored.logprobs.dims2()?;
                let mut dlogp = vec![0f32; rows * width];
                let mut row = 0;
                for (m, lp) in group.clone().zip(scored.per_group(&qs)?) {
                    let mb = &batch.micro[m];
                    let (k, w) = lp.logprobs.dims2()?;
                    let (logprobs, mask) = (host(&lp.logprobs)?, host(&lp.mask)?);
                    let (old, reference) = (old[m].as_ref().map(host).transpose()?, reference[m].as_ref().map(host).transpose()?);
                    let advantages: Vec<f32> = mb.items.iter().map(|&i| batch.items[i].advantage).collect();
                    let weights: Vec<f32> = mb.items.iter().map(|&i| batch.items[i].weight).collect();
                    let inputs = Rows {
                        width: w,
                        logprobs: &logprobs,
                        old: old.as_deref(),
                        reference: reference.as_deref(),
                        mask: &mask,
                        advantages: &advantages,
                        weights: &weights,
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
                        out.entropy_sum += masked_sum(&lp.entropy, &lp.mask)?;
                    }
                    pass_stats.add(&stats);
                }
                if let Some(backward) = &scored.backward {
                    let grads = backward.run(&Tensor::from_vec(dlogp, (rows, width), &device)?.to_dtype(scored.logprobs.dtype())?)?;
                    self.grads.add(self.vars, &grads)?;
                }
            }
            out.policy_seconds += t.elapsed().as_secs_f64();
            let t = Instant::now();
            let rate = lr(pass);
            let report = self.optimizer.step(self.vars, self.grads, rate)?;
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
        out.forward_rows = (scored(self) - rows_before) as usize;
        Ok(out)
    }
}

/// A (k, L) tensor's values as f32, row-major.
fn host(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
}

/// The token sum of a (k, L) tensor over the mask, e.g. the entropy.
fn masked_sum(t: &Tensor, mask: &Tensor) -> Result<f64> {
    Ok((t * mask)?.sum_all()?.to_dtype(DType::F64)?.to_scalar::<f64>()?)
}
