//! Rollouts: G completions for each question from the generation engine, decoded and scored.

use anyhow::Result;
use cppo_core::Problem;
use cppo_engine::{generate, Completion, DecoderBackend, EngineOptions, GenerationStats, Precision, Request, SamplingParams};
use cppo_io::ChatTokenizer;
use cppo_kernels::backend::Backend as Kernels;
use cppo_model::Decoder;

pub use crate::rewards::{score_groups, RewardSet};

/// One question's group of completions with their scores.
pub struct Rollout {
    pub problem: Problem,
    pub prompt: Vec<u32>,
    pub completions: Vec<Completion>,
    pub texts: Vec<String>,
    /// The weighted reward of each completion.
    pub rewards: Vec<f64>,
    /// `parts[p][i]`: the unweighted score of reward part p for completion i (NaN where a user's
    /// function said "not applicable").
    pub parts: Vec<Vec<f64>>,
    /// Whether each completion was graded correct by the accuracy part (false when no part grades).
    pub correct: Vec<bool>,
}

pub struct RolloutRequest<'a> {
    pub problems: &'a [Problem],
    pub prompts: Vec<Vec<u32>>,
    pub group_size: usize,
}

/// How a rollout is generated besides the sampling parameters.
#[derive(Clone, Copy, Debug)]
pub struct GenerateOptions {
    /// Rows decoded together.
    pub max_batch: usize,
    pub seed: u64,
    /// The rollout weights' precision.
    pub precision: Precision,
    /// Completions that do not decode (ids beyond the tokenizer, e.g. from a random model of a larger
    /// vocabulary: `cppo bench step --random-config`) get empty texts instead of failing the rollout.
    pub lossy_text: bool,
}

impl GenerateOptions {
    pub fn new(max_batch: usize, seed: u64, precision: Precision) -> Self {
        GenerateOptions { max_batch, seed, precision, lossy_text: false }
    }
}

/// Rollouts from `model`'s current weights on kernel backend `b` (uploaded for this call): a model
/// that is not being trained (`cppo eval`, `cppo generate`, benchmarks); a run's own rollouts read the
/// weights its backend trains (`device::DeviceState::generate`).
pub fn generate_from<B: Kernels<T = f32>>(
    model: &Decoder,
    b: &B,
    tokenizer: &ChatTokenizer,
    req: &RolloutRequest,
    params: &SamplingParams,
    opts: GenerateOptions,
    on_finish: impl FnMut(usize),
) -> Result<(Vec<Rollout>, GenerationStats)> {
    let backend = DecoderBackend::new(model, b, opts.precision)?;
    generate_groups(&backend, tokenizer, req, params, opts, on_finish)
}

/// Generates and decodes on an engine backend (the run's: `device::DeviceState::generate`); scoring
/// is separate so its time is reported on its own.
pub fn generate_groups(
    backend: &impl cppo_engine::Backend,
    tokenizer: &ChatTokenizer,
    req: &RolloutRequest,
    params: &SamplingParams,
    opts: GenerateOptions,
    on_finish: impl FnMut(usize),
) -> Result<(Vec<Rollout>, GenerationStats)> {
    let options = EngineOptions { max_batch: opts.max_batch, eos: tokenizer.eos_token_ids().to_vec(), seed: opts.seed };
    let requests: Vec<Request> =
        req.prompts.iter().map(|p| Request { prompt: p.clone(), n: req.group_size }).collect();
    let detok = |ids: &[u32]| tokenizer.decode(ids, true).unwrap_or_default();
    let (groups, stats) = generate(backend, &requests, params, &options, &detok, on_finish)?;
    let mut out = Vec::with_capacity(groups.len());
    for ((problem, prompt), completions) in req.problems.iter().zip(&req.prompts).zip(groups) {
        let texts = completions
            .iter()
            .map(|c| if opts.lossy_text { Ok(detok(&c.tokens)) } else { tokenizer.decode(&c.tokens, true).map_err(anyhow::Error::from) })
            .collect::<Result<Vec<_>>>()?;
        out.push(Rollout {
            problem: problem.clone(),
            prompt: prompt.clone(),
            completions,
            texts,
            rewards: vec![],
            parts: vec![],
            correct: vec![],
        });
    }
    Ok((out, stats))
}
