//! One JSON line per step in `metrics.jsonl` (and per evaluation in `eval.jsonl`), appended atomically, and
//! cut back to a checkpoint's step when a run resumes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::fsutil::{append_line, write_atomic};

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
