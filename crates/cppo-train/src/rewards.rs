//! The run's rewards: the built-in graders by name and users' reward functions and workers
//! (`cppo_reward::external`), scored a batch at a time; the total is the weighted sum of the parts that
//! apply (a function's `None` is skipped, as TRL's `nansum` does).

use std::collections::BTreeMap;

use anyhow::{anyhow, Result};
use cppo_core::Problem;
use cppo_reward::external::{ExternalRewards, Sample, WorkerOptions};
use cppo_reward::Reward;
use serde::{Deserialize, Serialize};

use crate::rollout::Rollout;

pub use cppo_reward::external::{CommandSpec, FunctionSpec};

/// `[reward]`: built-in rewards by name with their weights (`accuracy = 1.0`), users' Python
/// functions (`[[reward.function]]`) and reward workers in any language (`[[reward.command]]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RewardSection {
    #[serde(default, rename = "function", skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<FunctionSpec>,
    #[serde(default, rename = "command", skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandSpec>,
    /// The Python that runs the functions; else `CPPO_PYTHON`, else `python3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// The longest wait for a worker's reply to one batch (or its start); past it the run stops.
    #[serde(default = "default_timeout_s")]
    pub timeout_s: f64,
    /// The name of the part whose reward says whether a completion is correct (1 or more: correct),
    /// for the accuracy of training steps and evaluations on tasks no built-in grader knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy_from: Option<String>,
    /// Built-in rewards: name = weight.
    #[serde(flatten)]
    pub weights: BTreeMap<String, f64>,
}

fn default_timeout_s() -> f64 {
    60.0
}

impl Default for RewardSection {
    fn default() -> Self {
        RewardSection {
            functions: vec![],
            commands: vec![],
            python: None,
            timeout_s: default_timeout_s(),
            accuracy_from: None,
            weights: [("accuracy".to_string(), 1.0)].into_iter().collect(),
        }
    }
}

/// The built-in rewards that grade against a gold answer.
const GOLD_READERS: [&str; 3] = ["accuracy", "gsm8k", "math"];

impl RewardSection {
    /// Every part's name, built-in ones first, as metrics report them.
    pub fn names(&self) -> Vec<&str> {
        let builtin = self.weights.keys().map(String::as_str);
        builtin.chain(self.functions.iter().map(|f| f.name.as_str())).chain(self.commands.iter().map(|c| c.name.as_str())).collect()
    }

    /// The checks serde cannot express; each names its key.
    pub fn validate(&self) -> Result<()> {
        for (name, w) in &self.weights {
            if !w.is_finite() {
                anyhow::bail!("reward.{name} = {w} must be finite");
            }
        }
        for f in &self.functions {
            if !f.weight.is_finite() {
                anyhow::bail!("reward.function `{}`: weight = {} must be finite", f.name, f.weight);
            }
        }
        for c in &self.commands {
            if !c.weight.is_finite() || c.argv.is_empty() {
                anyhow::bail!("reward.command `{}`: needs a non-empty argv and a finite weight", c.name);
            }
        }
        let names = self.names();
        if names.is_empty() {
            anyhow::bail!("[reward] names no reward: add e.g. `accuracy = 1.0`, or a [[reward.function]]");
        }
        if let Some(dup) = names.iter().enumerate().find_map(|(i, n)| names[..i].contains(n).then_some(n)) {
            anyhow::bail!("[reward]: the name `{dup}` is given to two rewards; each part needs its own name (it keys the metrics)");
        }
        if let Some(a) = &self.accuracy_from {
            if !names.contains(&a.as_str()) {
                anyhow::bail!("reward.accuracy_from = \"{a}\" names no reward part (parts: {})", names.join(", "));
            }
        }
        if !(self.timeout_s > 0.0 && self.timeout_s.is_finite()) {
            anyhow::bail!("reward.timeout_s = {} must be > 0", self.timeout_s);
        }
        Ok(())
    }

    /// The built-in part that reads gold answers, if one is configured.
    pub fn gold_reader(&self) -> Option<&str> {
        self.weights.keys().map(String::as_str).find(|n| GOLD_READERS.contains(n))
    }
}

/// The configured rewards, scored part by part so each part's mean can be reported.
pub struct RewardSet {
    /// Built-in parts: (name, weight, reward).
    pub parts: Vec<(String, f64, Box<dyn Reward>)>,
    /// Users' functions and workers, after the built-in parts.
    pub external: Option<ExternalRewards>,
    /// The part (index into `names()`) whose reward of 1 or more means correct.
    pub accuracy_part: Option<usize>,
    /// Worker start-up seconds not yet reported in a step's reward time.
    pending_startup: f64,
}

/// Every part's scores of a batch of completions, in the batch's order.
pub struct BatchScores {
    pub totals: Vec<f64>,
    /// `parts[p][i]`; NaN where a function said "not applicable".
    pub parts: Vec<Vec<f64>>,
    pub correct: Vec<bool>,
}

impl RewardSet {
    /// Built-in rewards only.
    pub fn from_config(weights: &BTreeMap<String, f64>) -> Result<Self> {
        let mut parts = Vec::new();
        for (name, &w) in weights {
            let reward = cppo_reward::reward_by_name(name).map_err(|e| anyhow!("reward.{name}: {e}"))?;
            parts.push((name.clone(), w, reward));
        }
        Ok(RewardSet { parts, external: None, accuracy_part: None, pending_startup: 0.0 })
    }

    /// The whole `[reward]` section: the built-in parts, and the workers started (a file that does
    /// not load or a function it lacks fails here, before any training).
    pub fn from_section(section: &RewardSection) -> Result<Self> {
        let mut set = Self::from_config(&section.weights)?;
        if !section.functions.is_empty() || !section.commands.is_empty() {
            let options = WorkerOptions {
                python: WorkerOptions::resolve_python(section.python.as_deref()),
                timeout: std::time::Duration::from_secs_f64(section.timeout_s),
            };
            let external = ExternalRewards::start(&section.functions, &section.commands, &options)?;
            set.pending_startup = external.startup_seconds;
            set.external = Some(external);
        }
        set.accuracy_part = section.accuracy_from.as_ref().and_then(|a| section.names().iter().position(|n| *n == a.as_str()));
        Ok(set)
    }

    /// Part names: built-in ones, then users' functions and commands.
    pub fn names(&self) -> Vec<String> {
        let external = self.external.iter().flat_map(|e| e.parts().map(|(n, _)| n.to_string()));
        self.parts.iter().map(|(n, _, _)| n.clone()).chain(external).collect()
    }

    /// The workers' start-up time, once (the first step's reward phase reports it).
    pub fn take_startup_seconds(&mut self) -> f64 {
        std::mem::take(&mut self.pending_startup)
    }

    /// Scores `(problem, completion text, completion ids)` triples: built-in parts one by one, each user
    /// function once over the whole batch.
    pub fn score_batch(&self, step: u64, batch: &[(&Problem, &str, &[u32])]) -> Result<BatchScores> {
        let mut parts: Vec<Vec<f64>> = Vec::new();
        let mut judged: Vec<Option<bool>> = vec![None; batch.len()];
        for (_, _, reward) in &self.parts {
            let scores: Vec<_> = batch.iter().map(|(p, text, _)| reward.score(text, p)).collect();
            for (j, s) in judged.iter_mut().zip(&scores) {
                *j = j.or(s.correct);
            }
            parts.push(scores.into_iter().map(|s| s.value).collect());
        }
        if let Some(external) = &self.external {
            let samples: Vec<Sample> = batch.iter().map(|&(problem, completion, completion_ids)| Sample { problem, completion, completion_ids }).collect();
            for values in external.score(step, &samples)? {
                parts.push(values.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect());
            }
        }
        let weights: Vec<f64> = self.parts.iter().map(|(_, w, _)| *w).chain(self.external.iter().flat_map(|e| e.parts().map(|(_, w)| w))).collect();
        let totals = (0..batch.len())
            .map(|i| parts.iter().zip(&weights).map(|(p, w)| if p[i].is_nan() { 0.0 } else { w * p[i] }).sum::<f64>())
            .collect();
        let correct = match self.accuracy_part {
            Some(a) => parts[a].iter().map(|&v| v >= 1.0).collect(),
            None => judged.into_iter().map(|j| j.unwrap_or(false)).collect(),
        };
        Ok(BatchScores { totals, parts, correct })
    }
}

/// Scores every completion of `rollouts` (one batch for users' functions).
pub fn score_groups(rollouts: &mut [Rollout], rewards: &RewardSet, step: u64) -> Result<()> {
    let batch: Vec<(&Problem, &str, &[u32])> = rollouts
        .iter()
        .flat_map(|r| r.texts.iter().zip(&r.completions).map(move |(t, c)| (&r.problem, t.as_str(), c.tokens.as_slice())))
        .collect();
    let scores = rewards.score_batch(step, &batch)?;
    let mut at = 0;
    for r in rollouts {
        let n = r.texts.len();
        r.rewards = scores.totals[at..at + n].to_vec();
        r.parts = scores.parts.iter().map(|p| p[at..at + n].to_vec()).collect();
        r.correct = scores.correct[at..at + n].to_vec();
        at += n;
    }
    Ok(())
}

/// The mean of the values that apply (NaN: "not applicable"); 0 when none does.
pub fn nan_mean(values: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = values.into_iter().filter(|v| !v.is_nan()).fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}
