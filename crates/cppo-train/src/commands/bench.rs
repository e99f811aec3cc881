//! `cppo bench generate` and `cppo bench step`: speed figures measured side by side in one run, so their
//! ratios mean something on a noisy machine.

use std::time::Instant;

use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use cppo_core::select::{SelectionConfig, Strategy};
use cppo_data::{Dataset, PromptTemplate};
use cppo_engine::{generate, DecoderBackend, EngineOptions, Request, SamplingParams};
use cppo_model::Decoder;
use serde::Serialize;

use crate::config::LossSection;
use crate::optim::{AdamW, AdamWConfig, GradAccumulator};
use crate::prompt::Prompter;
use crate::rollout::{generate_groups, score_groups, RewardSet, RolloutRequest};
use crate::sources::resolve_model_path;
use crate::update::{build_batch, Updater};

/// f32 matmul rate of this machine through candle's CPU gemm, at a shape typical of the model's layers.
pub fn matmul_gflops() -> Result<f64> {
    let (m, k, n) = (512, 576, 1536);
    let a = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu)?;
    let b = Tensor::randn(0f32, 1.0, (k, n), &Device::Cpu)?;
    a.matmul(&b)?;
    let reps = 20;
    let t = Instant::now();
    for _ in 0..reps {
        a.matmul(&b)?;
    }
    Ok(2.0 * (m * k * n) as f64 * reps as f64 / t.elapsed().as_secs_f64() / 1e9)
}

#[derive(Clone, Debug, Serialize)]
pub struct GenerateRow {
    pub batch: usize,
    pub questions: usize,
    pub samples_per_question: usize,
    pub new_tokens: usize,
    pub seconds: f64,
    pub tokens_per_second: f64,
    /// Model FLOPs per generated token (2 x parameters) times tokens/s, over the matmul rate.
    pub fraction_of_matmul_peak: f64,
    /// Where the time went: the model's prompt and decode passes, and sampling.
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
    pub sampling_seconds: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct GenerateBench {
    pub model: String,
    pub prompt_tokens: usize,
    pub matmul_gflops: f64,
    pub parameters: usize,
    pub rows: Vec<GenerateRow>,
}

/// Decodes `new_tokens` per row (end-of-sequence ignored, so every row runs to the limit) at the given
/// batch sizes; a batch of 16 or more is made of questions of 16 samples each.
pub fn bench_generate(model: &str, batches: &[usize], new_tokens: usize) -> Result<GenerateBench> {
    let loaded = cppo_model::load_model(&resolve_model_path(model)?, DType::F32, &Device::Cpu)?;
    let decoder = Decoder::new(&loaded.config, &loaded.weights, false, &Device::Cpu)?;
    let parameters: usize = loaded.weights.tensors.values().map(|t| t.elem_count()).sum();
    let tok = &loaded.tokenizer;
    let question = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?";
    let prompt = tok.encode(&tok.render(&[cppo_model::ChatMessage::new("user", question)], true)?)?;
    let gflops = matmul_gflops()?;
    let params = SamplingParams { temperature: 1.0, max_new_tokens: new_tokens, ..Default::default() };
    let mut rows = Vec::new();
    for &batch in batches {
        let per_question = batch.min(16);
        let questions = batch.div_ceil(per_question);
        let requests: Vec<Request> = (0..questions).map(|_| Request { prompt: prompt.clone(), n: per_question }).collect();
        let options = EngineOptions { max_batch: batch, eos: vec![], seed: 0 };
        let t = Instant::now();
        let (out, stats) = generate(&DecoderBackend(&decoder), &requests, &params, &options, &|_| String::new(), |_| {})?;
        let seconds = t.elapsed().as_secs_f64();
        let tokens: usize = out.iter().flatten().map(|c| c.tokens.len()).sum();
        let tps = tokens as f64 / seconds;
        rows.push(GenerateRow {
            batch,
            questions,
            samples_per_question: per_question,
            new_tokens,
            seconds,
            tokens_per_second: tps,
            fraction_of_matmul_peak: tps * 2.0 * parameters as f64 / (gflops * 1e9),
            prefill_seconds: stats.prefill_seconds,
            decode_seconds: stats.decode_seconds,
            sampling_seconds: stats.sampling_seconds,
        });
    }
    Ok(GenerateBench { model: model.to_string(), prompt_tokens: prompt.len(), matmul_gflops: gflops, parameters, rows })
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct StepTimes {
    pub label: String,
    pub completions_generated: usize,
    pub completions_kept: usize,
    pub loss_tokens: usize,
    pub generation: f64,
    pub reward: f64,
    pub reference: f64,
    pub policy: f64,
    pub optimizer: f64,
    pub total: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct StepBench {
    pub model: String,
    pub prompt_tokens: usize,
    pub max_new_tokens: usize,
    /// One GRPO step at G = 16 and a CPPO (P = 0.875) update on the same batch.
    pub grpo_16: StepTimes,
    pub cppo_16: StepTimes,
    /// CPPO's policy phase over GRPO's, and its kept count over GRPO's (ideally equal).
    pub policy_ratio: f64,
    pub kept_ratio: f64,
    /// A whole GRPO step at G = 8.
    pub grpo_8: StepTimes,
}

/// Times one step's phases. The update of each arm runs on the very same rollouts; the KL term
/// (beta = 0.04) makes the reference phase count too.
pub fn bench_step(model: &str, max_new_tokens: usize) -> Result<StepBench> {
    let path = resolve_model_path(model)?;
    let loaded = cppo_model::load_model(&path, DType::F32, &Device::Cpu)?;
    let policy = Decoder::new(&loaded.config, &loaded.weights, true, &Device::Cpu)?;
    let reference = policy.frozen_copy()?;
    let tok = &loaded.tokenizer;
    let problems = Dataset::Gsm8kTrain.load()?.into_iter().take(1).collect::<Vec<_>>();
    let prompter = Prompter { template: PromptTemplate::preset("r1-think")?, max_prompt_tokens: 1024 };
    let prompts = vec![prompter.ids(tok, &problems[0])?];
    let rewards = RewardSet::from_config(&[("accuracy".to_string(), 1.0), ("brevity".to_string(), 0.1)].into_iter().collect())?;
    let loss = LossSection { beta: 0.04, ..Default::default() };
    let vars = policy.vars();
    let mut optimizer = AdamW::new(&vars, AdamWConfig::default());
    let mut grads = GradAccumulator::new(&vars);
    let params = SamplingParams { temperature: 1.0, max_new_tokens, ..Default::default() };

    let mut one = |label: &str, g: usize, strategies: &[(&str, Strategy)]| -> Result<Vec<StepTimes>> {
        let t_all = Instant::now();
        let req = RolloutRequest { problems: &problems, prompts: prompts.clone(), group_size: g };
        let t = Instant::now();
        let (mut rollouts, _) = generate_groups(&policy, tok, &req, &params, 64, 11, |_| {})?;
        let generation = t.elapsed().as_secs_f64();
        let t = Instant::now();
        score_groups(&mut rollouts, &rewards);
        let reward = t.elapsed().as_secs_f64();
        let shared = t_all.elapsed().as_secs_f64();
        let mut out = Vec::new();
        for (name, strategy) in strategies {
            let sel = SelectionConfig { strategy: strategy.clone(), ..Default::default() }
                .select(&rollouts.iter().map(|r| r.rewards.clone()).collect::<Vec<_>>(), 0)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let batch = build_batch(&rollouts, &sel, &loss, max_new_tokens as f64, 4096)?;
            let t = Instant::now();
            let o = Updater { policy: &policy, reference: Some(&reference), vars: &vars, optimizer: &mut optimizer, grads: &mut grads, loss: &loss }
                .run(&batch, |_| 1e-6)?;
            let update = t.elapsed().as_secs_f64();
            out.push(StepTimes {
                label: format!("{label} {name}"),
                completions_generated: g,
                completions_kept: batch.items.len(),
                loss_tokens: batch.loss_tokens,
                generation,
                reward,
                reference: o.reference_seconds,
                policy: o.policy_seconds,
                optimizer: o.optimizer_seconds,
                total: shared + update,
            });
        }
        Ok(out)
    };
    // Warm the allocator and caches once so the first measured phase is not penalised.
    one("warm-up", 2, &[("grpo", Strategy::All)])?;
    let sixteen = one("G=16", 16, &[("grpo", Strategy::All), ("cppo P=0.875", Strategy::Cppo { pruning_rate: 0.875 })])?;
    let eight = one("G=8", 8, &[("grpo", Strategy::All)])?;
    let (grpo, cppo) = (sixteen[0].clone(), sixteen[1].clone());
    Ok(StepBench {
        model: model.to_string(),
        prompt_tokens: prompts[0].len(),
        max_new_tokens,
        policy_ratio: cppo.policy / grpo.policy,
        kept_ratio: cppo.loss_tokens as f64 / grpo.loss_tokens.max(1) as f64,
        grpo_16: grpo,
        cppo_16: cppo,
        grpo_8: eight[0].clone(),
    })
}
