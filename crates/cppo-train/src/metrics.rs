//! One JSON line per step in `metrics.jsonl` (and per evaluation in `eval.jsonl`), appended atomically, and
//! cut back to a checkpoint's step when a run resumes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::fsutil::{append_line, write_atomic};
use crate::rollout::{RewardSet, Rollout};
use crate::shaping::OverlongPenalty;
use crate::update::UpdateOutcome;

/// What one training step did. Rewards are over all generated completions (before selection); loss
/// statistics are over the kept ones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepMetrics {
    pub step: u64,
    /// Questions drawn from the data (over every sampling round); the data cursor moved by this many.
    pub questions: usize,
    /// Completions generated (G per question drawn).
    pub completions_generated: usize,
    pub completions_kept: usize,
    /// Groups dropped by dynamic sampling (all rewards equal).
    pub groups_dropped: usize,
    /// Groups dropped by dynamic sampling because the planned number of informative groups was already
    /// reached (the surplus of the last sampling round).
    #[serde(default)]
    pub groups_surplus: usize,
    /// Groups that went to selection and the update: questions - groups_dropped - groups_surplus.
    #[serde(default)]
    pub groups_trained: usize,
    /// Batches of questions drawn this step: 1, or more when dynamic sampling refilled the batch.
    #[serde(default)]
    pub sampling_rounds: usize,
    pub reward_mean: f64,
    pub reward_std: f64,
    /// Mean of each reward component (unweighted).
    pub rewards: BTreeMap<String, f64>,
    /// Fraction of generated completions graded correct.
    pub accuracy: f64,
    pub completion_length_mean: f64,
    pub completion_length_max: usize,
    pub truncated_fraction: f64,
    /// Mean over kept loss tokens of the k3 KL estimate (0 when beta = 0).
    pub kl: f64,
    /// Fraction of kept loss tokens whose ratio was clipped (low + high).
    pub clip_fraction: f64,
    pub clip_fraction_low: f64,
    pub clip_fraction_high: f64,
    /// Mean per-token entropy of the policy on the kept completions.
    pub entropy: f64,
    pub loss: f64,
    pub grad_norm: f64,
    pub learning_rate: f64,
    pub loss_tokens: usize,
    /// Completion rows that went through a policy or reference forward pass this step.
    pub forward_rows: usize,
    pub time: PhaseTimes,
    /// Sampler against trainer on the kept loss tokens, and what the rollout correction did.
    #[serde(default)]
    pub mismatch: Mismatch,
}

/// The gap between the sampler's log-probs (bf16 rollout weights, another kernel) and the trainer's
/// for the same weights, over the kept loss tokens of the step's last pass, and the rollout
/// correction's ratios (TRL's `sampling/sampling_logp_difference/*` and
/// `sampling/importance_sampling_ratio/*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Mismatch {
    /// Mean over tokens of |logp_trainer - logp_sampler|.
    pub logp_diff_mean: f64,
    pub logp_diff_max: f64,
    /// Mean over completions of |sum over its tokens of (logp_trainer - logp_sampler)|.
    pub sequence_logp_diff_mean: f64,
    /// The correction's ratios (per token or per sequence, by its mode); 0 without a correction.
    pub ratio_mean: f64,
    pub ratio_min: f64,
    pub ratio_max: f64,
    /// Fraction of those ratios a mask mode set to 0.
    pub ratio_masked_fraction: f64,
    /// Fraction of loss tokens whose policy term a mask (rollout, off-policy, entropy) took out.
    pub policy_masked_fraction: f64,
}

impl Mismatch {
    pub fn of(st: &cppo_core::loss::LossStats) -> Self {
        let m = &st.mismatch;
        let per = |x: f64, n: f64| if n > 0.0 { x / n } else { 0.0 };
        Mismatch {
            logp_diff_mean: per(m.token_abs_diff, m.tokens),
            logp_diff_max: m.token_abs_diff_max,
            sequence_logp_diff_mean: per(m.sequence_abs_diff, m.sequences),
            ratio_mean: per(m.ratio_sum, m.ratios),
            ratio_min: m.ratio_min,
            ratio_max: m.ratio_max,
            ratio_masked_fraction: per(m.masked, m.ratios),
            policy_masked_fraction: per(st.policy_masked, st.tokens),
        }
    }
}

/// Wall-clock seconds of each phase of a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseTimes {
    pub generation: f64,
    pub reward: f64,
    pub reference: f64,
    pub old_policy: f64,
    /// Policy forward + backward over all update passes.
    pub policy: f64,
    pub optimizer: f64,
    pub total: f64,
}

impl PhaseTimes {
    pub fn update(&self) -> f64 {
        self.reference + self.old_policy + self.policy + self.optimizer
    }
}

/// The figures of everything a step drew, before any group is dropped.
#[derive(Clone, Debug, Default)]
pub struct RolloutSummary {
    pub questions: usize,
    pub completions: usize,
    pub reward_mean: f64,
    pub reward_std: f64,
    pub rewards: BTreeMap<String, f64>,
    pub accuracy: f64,
    pub completion_length_mean: f64,
    pub completion_length_max: usize,
    pub truncated_fraction: f64,
}

impl RolloutSummary {
    /// Over `drawn` in the order drawn: the reward's mean and (population) std, each part's mean
    /// (and the overlong penalty's, when shaping), accuracy, lengths and truncation.
    pub fn of(drawn: &[Rollout], rewards: &RewardSet, overlong: Option<&OverlongPenalty>) -> Self {
        let all: Vec<f64> = drawn.iter().flat_map(|r| r.rewards.iter().copied()).collect();
        let n = all.len().max(1) as f64;
        let mean = all.iter().sum::<f64>() / n;
        let std = (all.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n).sqrt();
        let lengths: Vec<usize> = drawn.iter().flat_map(|r| r.completions.iter().map(|c| c.tokens.len())).collect();
        let truncated = drawn.iter().flat_map(|r| &r.completions).filter(|c| c.truncated()).count();
        let correct = drawn.iter().flat_map(|r| &r.correct).filter(|&&c| c).count();
        let mean_of = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let mut parts = BTreeMap::new();
        for (p, name) in rewards.names().into_iter().enumerate() {
            parts.insert(name, crate::rewards::nan_mean(drawn.iter().flat_map(|r| r.parts[p].iter().copied())));
        }
        if let Some(p) = overlong {
            let v: Vec<f64> = lengths.iter().map(|&l| p.penalty(l)).collect();
            parts.insert("overlong_penalty".into(), mean_of(&v));
        }
        RolloutSummary {
            questions: drawn.len(),
            completions: all.len(),
            reward_mean: mean,
            reward_std: std,
            rewards: parts,
            accuracy: correct as f64 / n,
            completion_length_mean: lengths.iter().sum::<usize>() as f64 / lengths.len().max(1) as f64,
            completion_length_max: lengths.iter().copied().max().unwrap_or(0),
            truncated_fraction: truncated as f64 / n,
        }
    }
}

/// How many groups and completions each stage of a step passed on.
#[derive(Clone, Copy, Debug, Default)]
pub struct StepCounts {
    pub sampling_rounds: usize,
    pub groups_dropped: usize,
    pub groups_surplus: usize,
    pub groups_trained: usize,
    pub completions_kept: usize,
    pub loss_tokens: usize,
}

impl StepMetrics {
    /// The metrics line of step `step` (counted from 1) from what its stages returned; the update's
    /// phase times go into `time` beside the rollout's. Loss figures are token means over the step's
    /// last optimizer pass.
    pub fn of(step: u64, drawn: &RolloutSummary, counts: &StepCounts, update: &UpdateOutcome, mut time: PhaseTimes) -> Self {
        time.reference = update.reference_seconds;
        time.old_policy = update.old_policy_seconds;
        time.policy = update.policy_seconds;
        time.optimizer = update.optimizer_seconds;
        let tokens = update.stats.tokens.max(1.0);
        StepMetrics {
            step,
            questions: drawn.questions,
            completions_generated: drawn.completions,
            completions_kept: counts.completions_kept,
            groups_dropped: counts.groups_dropped,
            groups_surplus: counts.groups_surplus,
            groups_trained: counts.groups_trained,
            sampling_rounds: counts.sampling_rounds,
            reward_mean: drawn.reward_mean,
            reward_std: drawn.reward_std,
            rewards: drawn.rewards.clone(),
            accuracy: drawn.accuracy,
            completion_length_mean: drawn.completion_length_mean,
            completion_length_max: drawn.completion_length_max,
            truncated_fraction: drawn.truncated_fraction,
            kl: update.stats.kl_sum / tokens,
            clip_fraction: (update.stats.clipped_low + update.stats.clipped_high) / tokens,
            clip_fraction_low: update.stats.clipped_low / tokens,
            clip_fraction_high: update.stats.clipped_high / tokens,
            entropy: update.entropy_sum / tokens,
            loss: update.stats.loss,
            grad_norm: update.grad_norm,
            learning_rate: update.learning_rate,
            loss_tokens: counts.loss_tokens,
            forward_rows: update.forward_rows,
            time,
            mismatch: Mismatch::of(&update.stats),
        }
    }
}

/// A JSON-lines log whose records carry a `step`.
pub struct JsonlLog {
    pub path: PathBuf,
}

impl JsonlLog {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        JsonlLog { path: path.into() }
    }

    pub fn append<T: Serialize>(&self, record: &T) -> Result<()> {
        append_line(&self.path, &serde_json::to_string(record)?)
    }

    /// Keeps only the records with `step <= last_step` (a resumed run rewrites what came after its
    /// checkpoint). Lines that do not parse are an error naming the line: they are never dropped silently.
    pub fn truncate_after(&self, last_step: u64) -> Result<()> {
        let Ok(text) = std::fs::read_to_string(&self.path) else { return Ok(()) };
        let mut kept = String::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not valid JSON", self.path.display(), i + 1))?;
            let step = v.get("step").and_then(|s| s.as_u64()).with_context(|| {
                format!("{}:{}: field \"step\": missing or not an integer", self.path.display(), i + 1)
            })?;
            if step <= last_step {
                kept.push_str(line);
                kept.push('\n');
            }
        }
        write_atomic(&self.path, kept.as_bytes())
    }

    pub fn read<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{}:{}", path.display(), i + 1)))
            .collect()
    }
}
