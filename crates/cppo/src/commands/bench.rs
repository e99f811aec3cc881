//! `cppo bench generate` and `cppo bench step`: speed figures measured side by side in one run, so their
//! ratios mean something on a noisy machine.

use std::time::Instant;

use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use cppo_core::loss::CorrectionMode;
use cppo_core::select::{SelectionConfig, Strategy};
use cppo_data::{Dataset, PromptTemplate};
use cppo_engine::{generate, DecoderBackend, EngineOptions, Request, SamplingParams, Precision};
use cppo_model::Decoder;
use serde::Serialize;

use cppo_train::config::LossSection;
use cppo_kernels::cpu::Cpu;
use cppo_train::device::{DeviceState, OnDevice};
use cppo_train::optim::{AdamW, AdamWConfig};
use cppo_train::prompt::Prompter;
use cppo_train::rollout::{score_groups, GenerateOptions, RewardSet, RolloutRequest};
use cppo_train::sources::resolve_model_path;
use cppo_train::update::build_batch;

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
    pub weights: Precision,
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

impl GenerateBench {
    /// The figures as a Markdown table, with the largest batch's speedup over the smallest.
    pub fn table(&self) -> String {
        let mut out = format!(
            "model {} ({:.1}M parameters), prompt {} tokens, {} new tokens per row\nf32 matmul (512x576x1536, candle gemm): {:.1} GFLOP/s\n",
            self.model,
            self.parameters as f64 / 1e6,
            self.prompt_tokens,
            self.rows.first().map_or(0, |r| r.new_tokens),
            self.matmul_gflops
        );
        out += "| batch | weights | questions x samples | tokens/s | seconds (prefill / decode / sampling) | share of matmul peak |\n|---|---|---|---|---|---|\n";
        for r in &self.rows {
            out += &format!(
                "| {} | {} | {} x {} | {:.1} | {:.2} ({:.2} / {:.2} / {:.2}) | {:.0}% |\n",
                r.batch,
                r.weights.name(),
                r.questions,
                r.samples_per_question,
                r.tokens_per_second,
                r.seconds,
                r.prefill_seconds,
                r.decode_seconds,
                r.sampling_seconds,
                100.0 * r.fraction_of_matmul_peak
            );
        }
        for w in [Precision::F32, Precision::Bf16] {
            let rows: Vec<&GenerateRow> = self.rows.iter().filter(|r| r.weights == w).collect();
            if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
                if first.batch != last.batch {
                    out += &format!(
                        "{} weights: batch {} / batch {}: {:.1}x the aggregate tokens/s\n",
                        w.name(),
                        last.batch,
                        first.batch,
                        last.tokens_per_second / first.tokens_per_second
                    );
                }
            }
        }
        out
    }
}

/// Decodes `new_tokens` per row (end-of-sequence ignored, so every row runs to the limit) at the given
/// batch sizes, with each weight precision in turn; a batch of 16 or more is made of questions of 16
/// samples each.
pub fn bench_generate(model: &str, batches: &[usize], new_tokens: usize, precisions: &[Precision]) -> Result<GenerateBench> {
    let loaded = cppo_io::load_model(&resolve_model_path(model)?, DType::F32, &Device::Cpu)?;
    let decoder = Decoder::new(&loaded.config, &loaded.weights, false, &Device::Cpu)?;
    let cpu = Cpu::<f32>::new();
    let parameters: usize = loaded.weights.tensors.values().map(|t| t.elem_count()).sum();
    let tok = &loaded.tokenizer;
    let question = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?";
    let prompt = tok.encode(&tok.render(&[cppo_io::ChatMessage::new("user", question)], true)?)?;
    let gflops = matmul_gflops()?;
    let params = SamplingParams { temperature: 1.0, max_new_tokens: new_tokens, ..Default::default() };
    let mut rows = Vec::new();
    for &weights in precisions {
        for &batch in batches {
            let per_question = batch.min(16);
            let questions = batch.div_ceil(per_question);
            let requests: Vec<Request> = (0..questions).map(|_| Request { prompt: prompt.clone(), n: per_question }).collect();
            let options = EngineOptions { max_batch: batch, eos: vec![], seed: 0 };
            // The upload is a copy in host memory here, outside the timing; the bf16 snapshot, made per
            // generation as a run makes it, inside.
            let uploaded = decoder.upload_weights(&cpu)?;
            let t = Instant::now();
            let backend = DecoderBackend::with_weights(&decoder, &cpu, uploaded, weights)?;
            let (out, stats) = generate(&backend, &requests, &params, &options, &|_| String::new(), |_| {})?;
            let seconds = t.elapsed().as_secs_f64();
            let tokens: usize = out.iter().flatten().map(|c| c.tokens.len()).sum();
            let tps = tokens as f64 / seconds;
            rows.push(GenerateRow {
                batch,
                weights,
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
    }
    Ok(GenerateBench { model: model.to_string(), prompt_tokens: prompt.len(), matmul_gflops: gflops, parameters, rows })
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct StepTimes {
    pub label: String,
    pub rollout_weights: String,
    /// The update's matrix products (`optim.matmul_precision`).
    pub update_products: String,
    pub beta: f64,
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
    /// Runs of each step; phases are their medians.
    pub repeats: usize,
    /// One GRPO step at G = 16 and a CPPO (P = 0.875) update on the same batch.
    pub grpo_16: StepTimes,
    pub cppo_16: StepTimes,
    /// CPPO's policy phase over GRPO's, and its kept count over GRPO's (ideally equal).
    pub policy_ratio: f64,
    pub kept_ratio: f64,
    /// Whole GRPO steps at G = 8 with the defaults (bf16 rollouts and update products): with the KL
    /// term (beta = 0.04) and without it on the same rollouts (TRL's default, beta = 0, builds no
    /// reference).
    pub grpo_8: StepTimes,
    pub grpo_8_no_kl: StepTimes,
    /// The same two with the update in f32.
    pub grpo_8_f32_update: StepTimes,
    pub grpo_8_no_kl_f32_update: StepTimes,
    /// `grpo_8_f32_update` with the rollout correction (sequence_mask, cap 3), in the same runs: the
    /// correction's cost.
    pub grpo_8_f32_update_corrected: StepTimes,
    /// With KL, everything f32 (rollouts and update).
    pub grpo_8_f32: StepTimes,
}

impl StepBench {
    pub fn table(&self) -> String {
        let mut out = format!(
            "model {}, prompt {} tokens, <= {} new tokens; median of {} runs per phase\n",
            self.model, self.prompt_tokens, self.max_new_tokens, self.repeats
        );
        out += "| step | rollout weights | update products | beta | generated | kept | loss tokens | generation s | reward s | reference s | policy fwd+bwd s | optimizer s | total s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
        let rows = [&self.grpo_16, &self.cppo_16, &self.grpo_8, &self.grpo_8_no_kl, &self.grpo_8_f32_update, &self.grpo_8_no_kl_f32_update, &self.grpo_8_f32_update_corrected, &self.grpo_8_f32];
        for t in rows {
            out += &format!(
                "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.3} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
                t.label,
                t.rollout_weights,
                t.update_products,
                t.beta,
                t.completions_generated,
                t.completions_kept,
                t.loss_tokens,
                t.generation,
                t.reward,
                t.reference,
                t.policy,
                t.optimizer,
                t.total
            );
        }
        let update = |t: &StepTimes| t.reference + t.policy + t.optimizer;
        out += &format!(
            "CPPO / GRPO at G = 16: policy phase {:.3}x, loss tokens {:.3}x, update (reference + policy + optimizer) {:.3}x\n",
            self.policy_ratio,
            self.kept_ratio,
            update(&self.cppo_16) / update(&self.grpo_16)
        );
        out += &format!(
            "rollout correction (sequence_mask) on / off at G = 8, bf16 rollouts, f32 update: policy phase {:.3}x, update {:.3}x\n",
            self.grpo_8_f32_update_corrected.policy / self.grpo_8_f32_update.policy,
            update(&self.grpo_8_f32_update_corrected) / update(&self.grpo_8_f32_update)
        );
        out
    }
}

/// Each phase's median over runs of the same step (counts from the first run).
fn median_times(runs: &[StepTimes]) -> StepTimes {
    let med = |f: fn(&StepTimes) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    StepTimes {
        generation: med(|t| t.generation),
        reward: med(|t| t.reward),
        reference: med(|t| t.reference),
        policy: med(|t| t.policy),
        optimizer: med(|t| t.optimizer),
        total: med(|t| t.total),
        ..runs[0].clone()
    }
}

/// Times one step's phases. The updates of the arms of one batch run on the very same rollouts.
pub fn bench_step(model: &str, max_new_tokens: usize, repeats: usize) -> Result<StepBench> {
    let path = resolve_model_path(model)?;
    let loaded = cppo_io::load_model(&path, DType::F32, &Device::Cpu)?;
    let policy = Decoder::new(&loaded.config, &loaded.weights, true, &Device::Cpu)?;
    let reference = policy.frozen_copy()?;
    // Handles on the same weights whose update multiplies in bf16 (the default) or f32.
    let at = |d: &Decoder, p: Precision| d.clone().with_matmul_precision(p);
    let tok = &loaded.tokenizer;
    let problems = cppo_train::sources::load_builtin(Dataset::Gsm8kTrain)?.into_iter().take(1).collect::<Vec<_>>();
    let prompter = Prompter { template: PromptTemplate::preset("r1-think")?, max_prompt_tokens: 1024 };
    let prompts = vec![prompter.ids(tok, &problems[0])?];
    let rewards = RewardSet::from_config(&[("accuracy".to_string(), 1.0), ("brevity".to_string(), 0.1)].into_iter().collect())?;
    let optimizer = AdamW::new(&policy.vars(), AdamWConfig::default());
    // The run's path on the CPU backend: one set of weights that every arm updates and the rollouts are
    // sampled from, as a run's; each arm's decoders say at which precision its products multiply.
    let decoders = |mp: Precision| (at(&policy, mp), at(&reference, mp));
    let mut dev = OnDevice::new(Cpu::<f32>::new(), &policy, Some(&reference), &optimizer)?;
    let params = SamplingParams { temperature: 1.0, max_new_tokens, ..Default::default() };

    let mut one = |label: &str, g: usize, weights: Precision, arms: &[(&str, Strategy, f64, Precision, CorrectionMode)]| -> Result<Vec<StepTimes>> {
        let t_all = Instant::now();
        let req = RolloutRequest { problems: &problems, prompts: prompts.clone(), group_size: g };
        let t = Instant::now();
        let (mut rollouts, _) = dev.generate(&policy, tok, &req, &params, GenerateOptions::new(64, 11, weights), &mut |_| {})?;
        let generation = t.elapsed().as_secs_f64();
        let t = Instant::now();
        score_groups(&mut rollouts, &rewards, 0)?;
        let reward = t.elapsed().as_secs_f64();
        let shared = t_all.elapsed().as_secs_f64();
        let mut out = Vec::new();
        for (name, strategy, beta, mp, correction) in arms {
            let loss = LossSection { beta: *beta, rollout_correction: Some(*correction), ..Default::default() };
            let sel = SelectionConfig { strategy: strategy.clone(), ..Default::default() }
                .select(&rollouts.iter().map(|r| r.rewards.clone()).collect::<Vec<_>>(), 0)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let batch = build_batch(&rollouts, &sel, &loss, max_new_tokens as f64, 4096)?;
            let t = Instant::now();
            let (policy, reference) = decoders(*mp);
            let o = dev.update(&policy, (*beta > 0.0).then_some(&reference), &loss, &batch, &|_| 1e-6)?;
            let update = t.elapsed().as_secs_f64();
            out.push(StepTimes {
                label: format!("{label} {name}"),
                rollout_weights: weights.name().to_string(),
                update_products: mp.name().to_string(),
                beta: *beta,
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
    let (off, on) = (CorrectionMode::None, CorrectionMode::SequenceMask);
    // Warm the allocator and caches once so the first measured phase is not penalised.
    one("warm-up", 2, Precision::Bf16, &[("grpo", Strategy::All, 0.04, Precision::Bf16, off)])?;
    // Each row is measured `repeats` times (same seed, so the same rollouts) and each phase reported
    // by its median: on a shared machine single runs of the same step vary by 10-20%.
    let mut measure = |label: &str, g: usize, weights: Precision, arms: &[(&str, Strategy, f64, Precision, CorrectionMode)]| -> Result<Vec<StepTimes>> {
        let runs: Vec<Vec<StepTimes>> = (0..repeats.max(1)).map(|_| one(label, g, weights, arms)).collect::<Result<_>>()?;
        Ok((0..arms.len()).map(|a| median_times(&runs.iter().map(|r| r[a].clone()).collect::<Vec<_>>())).collect())
    };
    let (bf16, mixed, full) = (Precision::Bf16, Precision::Bf16, Precision::F32);
    let cppo = Strategy::Cppo { pruning_rate: 0.875 };
    let sixteen = measure("G=16", 16, bf16, &[("grpo", Strategy::All, 0.04, mixed, off), ("cppo P=0.875", cppo, 0.04, mixed, off)])?;
    let eight = measure(
        "G=8",
        8,
        bf16,
        &[
            ("grpo", Strategy::All, 0.04, mixed, off),
            ("grpo", Strategy::All, 0.0, mixed, off),
            ("grpo", Strategy::All, 0.04, full, off),
            ("grpo", Strategy::All, 0.0, full, off),
            ("grpo +rollout correction", Strategy::All, 0.04, full, on),
        ],
    )?;
    let eight_f32 = measure("G=8", 8, Precision::F32, &[("grpo", Strategy::All, 0.04, full, off)])?;
    let (grpo, cppo) = (sixteen[0].clone(), sixteen[1].clone());
    Ok(StepBench {
        model: model.to_string(),
        prompt_tokens: prompts[0].len(),
        max_new_tokens,
        repeats,
        policy_ratio: cppo.policy / grpo.policy,
        kept_ratio: cppo.loss_tokens as f64 / grpo.loss_tokens.max(1) as f64,
        grpo_16: grpo,
        cppo_16: cppo,
        grpo_8: eight[0].clone(),
        grpo_8_no_kl: eight[1].clone(),
        grpo_8_f32_update: eight[2].clone(),
        grpo_8_no_kl_f32_update: eight[3].clone(),
        grpo_8_f32_update_corrected: eight[4].clone(),
        grpo_8_f32: eight_f32[0].clone(),
    })
}
