//! Held-out evaluation: greedy accuracy, or n samples per problem with avg@n and pass@k; every generation
//! is kept with its grade.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Result;
use cppo_core::passk::{avg_at_n, pass_at_k};
use cppo_core::Problem;
use cppo_engine::{Finish, SamplingParams, Precision};
use cppo_io::ChatTokenizer;
use cppo_reward::{AccuracyReward, Reward};
use serde::{Deserialize, Serialize};

use crate::prompt::Prompter;
use crate::rewards::{nan_mean, RewardSet};
use crate::rollout::{GenerateOptions, Rollout, RolloutRequest};

#[derive(Clone, Debug)]
pub struct EvalSettings {
    pub samples: usize,
    pub temperature: f64,
    pub top_p: f64,
    pub max_new_tokens: usize,
    pub pass_k: Vec<usize>,
    pub max_batch: usize,
    pub seed: u64,
    pub stop: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalSummary {
    pub step: u64,
    pub problems: usize,
    pub samples: usize,
    /// avg@n: the mean correctness over all samples (greedy accuracy when n = 1 at temperature 0).
    pub accuracy: f64,
    pub pass_at_k: BTreeMap<String, f64>,
    pub mean_completion_tokens: f64,
    pub truncated_fraction: f64,
    pub seconds: f64,
    /// The mean of each configured reward part over every generation (users' functions included;
    /// "not applicable" skipped), and of their weighted sum.
    #[serde(default)]
    pub rewards: BTreeMap<String, f64>,
    #[serde(default)]
    pub reward_mean: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EvalGeneration {
    pub text: String,
    pub correct: bool,
    pub extracted: Option<String>,
    pub tokens: usize,
    pub finish: Finish,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EvalRecord {
    pub id: String,
    pub prompt: String,
    pub answer: String,
    pub generations: Vec<EvalGeneration>,
}

/// What evaluation generates with: the trainer's backend (`DeviceState::generate`), or a model the
/// caller put on one (`cppo eval`).
pub type Generator<'a> = dyn FnMut(&RolloutRequest, &SamplingParams, GenerateOptions) -> Result<Vec<Rollout>> + 'a;

/// Evaluates with the generation the caller brings. The run's rewards score every generation;
/// correctness is the part `reward.accuracy_from` names, else the built-in grader of the problem's task.
pub fn evaluate(
    generate: &mut Generator<'_>,
    tokenizer: &ChatTokenizer,
    prompter: &Prompter,
    rewards: &RewardSet,
    problems: &[Problem],
    settings: &EvalSettings,
    step: u64,
) -> Result<(EvalSummary, Vec<EvalRecord>)> {
    let t = Instant::now();
    let prompts = problems.iter().map(|p| prompter.ids(tokenizer, p)).collect::<Result<Vec<_>>>()?;
    let params = SamplingParams {
        temperature: settings.temperature,
        top_p: settings.top_p,
        top_k: 0,
        max_new_tokens: settings.max_new_tokens,
        stop: settings.stop.clone(),
        ..Default::default()
    };
    let req = RolloutRequest { problems, prompts, group_size: settings.samples };
    let groups = generate(&req, &params, GenerateOptions::new(settings.max_batch, settings.seed, Precision::F32))?;
    let grader = AccuracyReward;
    let batch: Vec<(&Problem, &str, &[u32])> = groups
        .iter()
        .flat_map(|g| g.texts.iter().zip(&g.completions).map(move |(t, c)| (&g.problem, t.as_str(), c.tokens.as_slice())))
        .collect();
    let scores = rewards.score_batch(step, &batch).map_err(|e| e.context(format!("evaluation at step {step}: rewards")))?;
    let mut scored = 0usize;
    let mut records = Vec::with_capacity(groups.len());
    let mut all_correct = Vec::new();
    let mut pass: BTreeMap<usize, f64> = settings.pass_k.iter().map(|&k| (k, 0.0)).collect();
    let (mut tokens, mut truncated, mut count) = (0usize, 0usize, 0usize);
    for g in &groups {
        let mut generations = Vec::with_capacity(g.texts.len());
        for (text, c) in g.texts.iter().zip(&g.completions) {
            let s = grader.score(text, &g.problem);
            let correct = if rewards.accuracy_part.is_some() { scores.correct[scored] } else { s.correct.unwrap_or(false) };
            scored += 1;
            all_correct.push(correct);
            tokens += c.tokens.len();
            truncated += c.truncated() as usize;
            count += 1;
            generations.push(EvalGeneration { text: text.clone(), correct, extracted: s.extracted, tokens: c.tokens.len(), finish: c.finish });
        }
        let c = generations.iter().filter(|x| x.correct).count();
        for (&k, v) in pass.iter_mut() {
            *v += pass_at_k(generations.len(), c, k).unwrap_or(0.0);
        }
        records.push(EvalRecord {
            id: g.problem.id.clone(),
            prompt: g.problem.prompt.clone(),
            answer: g.problem.answer.clone(),
            generations,
        });
    }
    let n = groups.len().max(1) as f64;
    let summary = EvalSummary {
        step,
        problems: groups.len(),
        samples: settings.samples,
        accuracy: avg_at_n(&all_correct),
        pass_at_k: pass.into_iter().map(|(k, v)| (format!("pass@{k}"), v / n)).collect(),
        mean_completion_tokens: tokens as f64 / count.max(1) as f64,
        truncated_fraction: truncated as f64 / count.max(1) as f64,
        seconds: t.elapsed().as_secs_f64(),
        rewards: rewards.names().into_iter().zip(&scores.parts).map(|(name, v)| (name, nan_mean(v.iter().copied()))).collect(),
        reward_mean: nan_mean(scores.totals.iter().copied()),
    };
    Ok((summary, records))
}
