//! `cppo bench step --lora`: one batch of rollouts, then the same GRPO update (beta = 0.04) run as
//! LoRA and as full fine-tuning, phase by phase, in one process. LoRA's policy phase skips every
//! weight-gradient product of the base; its optimizer touches only the adapters; its reference is the
//! base with adapters off. Peak memory is the process's high-water mark (VmHWM) after each arm: the
//! LoRA arm runs first, so its figure is LoRA's own peak and the full arm's is the larger of the two.

use anyhow::Result;
use candle_core::{DType, Device};
use cppo_core::select::{SelectionConfig, Strategy};
use cppo_data::{Dataset, PromptTemplate};
use cppo_engine::{Precision, SamplingParams};
use cppo_io::LayerParam;
use cppo_model::{Decoder, LoraSpec};
use serde::Serialize;

use cppo_train::config::LossSection;
use cppo_kernels::cpu::Cpu;
use cppo_train::device::{DeviceState, OnDevice};
use cppo_train::optim::{AdamW, AdamWConfig};
use cppo_train::prompt::Prompter;
use cppo_train::rollout::{generate_from, score_groups, GenerateOptions, RewardSet, RolloutRequest};
use cppo_train::sources::resolve_model_path;
use cppo_train::update::build_batch;

#[derive(Clone, Debug, Serialize)]
pub struct UpdateTimes {
    pub label: String,
    pub trainable_params: usize,
    /// Medians over the repeats.
    pub reference: f64,
    pub policy: f64,
    pub optimizer: f64,
    /// The process's peak resident memory after this arm, in MiB (Linux; 0 elsewhere).
    pub peak_mib: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct LoraBench {
    pub model: String,
    pub r: usize,
    pub completions: usize,
    pub loss_tokens: usize,
    pub update_products: String,
    pub lora: UpdateTimes,
    pub full: UpdateTimes,
    pub rollouts: RolloutCompare,
}

impl LoraBench {
    pub fn table(&self) -> String {
        let mut out = format!(
            "model {}, one batch of {} completions ({} loss tokens), update products {}, beta 0.04; LoRA r={} on all linear layers\n",
            self.model, self.completions, self.loss_tokens, self.update_products, self.r
        );
        out += "| update | trainable params | reference s | policy fwd+bwd s | optimizer s | peak RSS MiB |\n|---|---|---|---|---|---|\n";
        for t in [&self.lora, &self.full] {
            out += &format!("| {} | {} | {:.3} | {:.3} | {:.4} | {:.0} |\n", t.label, t.trainable_params, t.reference, t.policy, t.optimizer, t.peak_mib);
        }
        out += &format!(
            "LoRA / full: policy phase {:.3}x, optimizer {:.3}x\n",
            self.lora.policy / self.full.policy.max(1e-12),
            self.lora.optimizer / self.full.optimizer.max(1e-12)
        );
        let r = &self.rollouts;
        out += &format!(
            "rollouts (8 completions, bf16 snapshot): adapters unmerged {:.1} tokens/s, merged {:.1} tokens/s (+ {:.2} s to merge and snapshot before each generation)\n",
            r.unmerged_tokens_per_s, r.merged_tokens_per_s, r.merge_seconds
        );
        out
    }
}

/// A line of /proc/self/status in MiB (`VmHWM:` the peak resident set, `VmRSS:` the current one);
/// 0 where /proc is not there.
fn status_mib(key: &str) -> f64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return 0.0 };
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

/// Rollouts of one batch with the adapters unmerged (beside the base's bf16 snapshot, what training
/// does) and merged into a bf16 snapshot of `W + s B A`, in one process, the same requests and seed.
#[derive(Clone, Debug, Serialize)]
pub struct RolloutCompare {
    /// Completion tokens per second of generation, adapters unmerged.
    pub unmerged_tokens_per_s: f64,
    /// The same, from the merged snapshot.
    pub merged_tokens_per_s: f64,
    /// What merging costs before each generation: `W + s B A` for every adapted matrix and its bf16
    /// snapshot.
    pub merge_seconds: f64,
}

/// Times the generation of `req` from `lora` unmerged, then merged (median of `repeats` each).
fn compare_rollouts(lora: &Decoder, tok: &cppo_io::ChatTokenizer, req: &RolloutRequest, params: &SamplingParams, repeats: usize) -> Result<RolloutCompare> {
    let rate = |dec: &Decoder| -> Result<f64> {
        let mut v = vec![];
        for _ in 0..repeats.max(1) {
            let t = std::time::Instant::now();
            let (rollouts, _) = generate_from(dec, &Cpu::<f32>::new(), tok, req, params, GenerateOptions::new(64, 11, Precision::Auto), |_| {})?;
            let n: usize = rollouts.iter().flat_map(|r| r.completions.iter().map(|c| c.tokens.len())).sum();
            v.push(n as f64 / t.elapsed().as_secs_f64());
        }
        Ok(median(v))
    };
    let unmerged = rate(lora)?;
    let t = std::time::Instant::now();
    let merged = Decoder::new(lora.config(), &lora.merged_weights()?, false, &Device::Cpu)?;
    drop(merged.rollout_weights()?);
    let merge_seconds = t.elapsed().as_secs_f64();
    let merged_rate = rate(&merged)?;
    Ok(RolloutCompare { unmerged_tokens_per_s: unmerged, merged_tokens_per_s: merged_rate, merge_seconds })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn bench_step_lora(model: &str, max_new_tokens: usize, repeats: usize, r: usize) -> Result<LoraBench> {
    let path = resolve_model_path(model)?;
    let loaded = cppo_io::load_model(&path, DType::F32, &Device::Cpu)?;
    let mp = Precision::Auto.for_update();
    let tok = &loaded.tokenizer;
    let problems = cppo_train::sources::load_builtin(Dataset::Gsm8kTrain)?.into_iter().take(1).collect::<Vec<_>>();
    let prompter = Prompter { template: PromptTemplate::preset("r1-think")?, max_prompt_tokens: 1024 };
    let prompts = vec![prompter.ids(tok, &problems[0])?];
    let rewards = RewardSet::from_config(&[("accuracy".to_string(), 1.0), ("brevity".to_string(), 0.1)].into_iter().collect())?;
    let params = SamplingParams { temperature: 1.0, max_new_tokens, ..Default::default() };
    let spec = LoraSpec { r, alpha: 2.0 * r as f64, use_rslora: false, targets: LayerParam::linear().collect() };
    let lora = Decoder::new(&loaded.config, &loaded.weights, false, &Device::Cpu)?.with_matmul_precision(mp).with_lora(spec, 1)?.with_bf16_base()?;
    // The batch: eight completions sampled once from the base, shared by both arms.
    let req = RolloutRequest { problems: &problems, prompts, group_size: 8 };
    let rollouts_compared = compare_rollouts(&lora, tok, &req, &params, repeats)?;
    let (mut rollouts, _) = generate_from(&lora, &Cpu::<f32>::new(), tok, &req, &params, GenerateOptions::new(64, 11, Precision::Auto), |_| {})?;
    score_groups(&mut rollouts, &rewards, 0)?;
    let loss = LossSection { beta: 0.04, ..Default::default() };
    let sel = SelectionConfig { strategy: Strategy::All, ..Default::default() }
        .select(&rollouts.iter().map(|r| r.rewards.clone()).collect::<Vec<_>>(), 0)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let batch = build_batch(&rollouts, &sel, &loss, max_new_tokens as f64, 4096)?;

    let arm = |label: &str, policy: &Decoder, reference: &Decoder| -> Result<UpdateTimes> {
        let vars = policy.vars();
        let mut dev = OnDevice::new(Cpu::<f32>::new(), policy, Some(reference), &AdamW::new(&vars, AdamWConfig::default()))?;
        let (mut rt, mut pt, mut ot) = (vec![], vec![], vec![]);
        // One unmeasured pass first: allocator and caches.
        for i in 0..=repeats.max(1) {
            let o = dev.update(policy, Some(reference), &loss, &batch, &|_| 1e-6)?;
            if i > 0 {
                rt.push(o.reference_seconds);
                pt.push(o.policy_seconds);
                ot.push(o.optimizer_seconds);
            }
        }
        Ok(UpdateTimes {
            label: label.to_string(),
            trainable_params: vars.iter().map(|(_, v)| v.elem_count()).sum(),
            reference: median(rt),
            policy: median(pt),
            optimizer: median(ot),
            peak_mib: peak_rss_mib(),
        })
    };
    let lora_times = arm("LoRA", &lora, &lora.without_adapters())?;
    drop(lora);
    let full = Decoder::new(&loaded.config, &loaded.weights, true, &Device::Cpu)?.with_matmul_precision(mp);
    let full_ref = full.frozen_copy()?;
    let full_times = arm("full fine-tuning", &full, &full_ref)?;
    Ok(LoraBench {
        model: model.to_string(),
        r,
        completions: batch.items.len(),
        loss_tokens: batch.loss_tokens,
        update_products: mp.name().to_string(),
        lora: lora_times,
        full: full_times,
        rollouts: rollouts_compared,
    })
}

/// One LoRA GRPO step on a random model of a given shape (a `config.json`, e.g. Qwen2.5-1.5B's in
/// `configs/models/`): the base's linear layers in bf16, adapters on all linear layers.
#[derive(Clone, Debug, Serialize)]
pub struct RandomLoraStep {
    pub config: String,
    pub params: usize,
    pub trainable_params: usize,
    pub r: usize,
    pub completions: usize,
    pub loss_tokens: usize,
    pub generated_tokens: usize,
    pub update_products: String,
    /// Bytes the decoder's weights hold (base and adapters), MiB.
    pub weights_mib: f64,
    pub generation: f64,
    pub reference: f64,
    pub policy: f64,
    pub optimizer: f64,
    /// Resident set after building the model, after the step, and the peak over the whole process.
    pub rss_setup_mib: f64,
    pub rss_after_mib: f64,
    pub peak_mib: f64,
}

impl RandomLoraStep {
    pub fn table(&self) -> String {
        format!(
            "random model of {} ({} params, base linear layers in bf16, weights held {:.0} MiB), LoRA r={} on all linear layers ({} trainable), {} completions, {} generated tokens, {} loss tokens, update products {}, beta 0.04\n\
             | generation s | reference s | policy fwd+bwd s | optimizer s | RSS after setup MiB | RSS after step MiB | peak RSS MiB |\n|---|---|---|---|---|---|---|\n\
             | {:.1} | {:.1} | {:.1} | {:.3} | {:.0} | {:.0} | {:.0} |\n",
            self.config, self.params, self.weights_mib, self.r, self.trainable_params, self.completions, self.generated_tokens, self.loss_tokens, self.update_products,
            self.generation, self.reference, self.policy, self.optimizer, self.rss_setup_mib, self.rss_after_mib, self.peak_mib
        )
    }
}

pub fn bench_step_lora_random(config: &std::path::Path, tokenizer_model: &str, max_new_tokens: usize, r: usize) -> Result<RandomLoraStep> {
    let cfg = super::read_random_config(config)?;
    let params: usize = cfg.param_count();
    let tok_model = cppo_io::load_model(&resolve_model_path(tokenizer_model)?, DType::F32, &Device::Cpu)?;
    let tok = tok_model.tokenizer;
    drop(tok_model.weights);
    if tok.vocab_size() > cfg.vocab_size {
        anyhow::bail!("the tokenizer of {tokenizer_model} has {} ids, more than the model's vocabulary {}", tok.vocab_size(), cfg.vocab_size);
    }
    let mp = Precision::Auto.for_update();
    let spec = LoraSpec { r, alpha: 2.0 * r as f64, use_rslora: false, targets: LayerParam::linear().collect() };
    // Built one tensor at a time where it can be: the random f32 weights, then the decoder's own copy.
    let lora = {
        let w = cppo_model::decoder::random_weights(&cfg, 1, &Default::default())?;
        Decoder::new(&cfg, &w, false, &Device::Cpu)?
    }
    .with_matmul_precision(mp)
    .with_lora(spec, 1)?
    .with_bf16_base()?;
    let rss_setup_mib = status_mib("VmRSS:");
    let problems = cppo_train::sources::load_builtin(Dataset::Gsm8kTrain)?.into_iter().take(1).collect::<Vec<_>>();
    let prompter = Prompter { template: PromptTemplate::preset("r1-think")?, max_prompt_tokens: 1024 };
    let prompts = vec![prompter.ids(&tok, &problems[0])?];
    let req = RolloutRequest { problems: &problems, prompts, group_size: 8 };
    // A random model's text is noise: no stop token, so every completion runs to max_new_tokens.
    let params_s = SamplingParams { temperature: 1.0, max_new_tokens, ..Default::default() };
    let t = std::time::Instant::now();
    let cpu = Cpu::<f32>::new();
    let (mut rollouts, _) = generate_from(&lora, &cpu, &tok, &req, &params_s, GenerateOptions { lossy_text: true, ..GenerateOptions::new(64, 11, Precision::Auto) }, |_| {})?;
    let generation = t.elapsed().as_secs_f64();
    let generated_tokens = rollouts.iter().flat_map(|r| r.completions.iter().map(|c| c.tokens.len())).sum();
    // Rewards that differ within the group, so every completion has an advantage.
    for r in &mut rollouts {
        let n = r.completions.len();
        r.rewards = (0..n).map(|i| (i % 2) as f64).collect();
        r.parts = vec![r.rewards.clone()];
        r.correct = r.rewards.iter().map(|&x| x > 0.0).collect();
    }
    let loss = LossSection { beta: 0.04, ..Default::default() };
    let sel = SelectionConfig { strategy: Strategy::All, ..Default::default() }
        .select(&rollouts.iter().map(|r| r.rewards.clone()).collect::<Vec<_>>(), 0)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let batch = build_batch(&rollouts, &sel, &loss, max_new_tokens as f64, 4096)?;
    let vars = lora.vars();
    let reference = lora.without_adapters();
    let mut dev = OnDevice::new(cpu, &lora, Some(&reference), &AdamW::new(&vars, AdamWConfig::default()))?;
    let o = dev.update(&lora, Some(&reference), &loss, &batch, &|_| 1e-5)?;
    Ok(RandomLoraStep {
        config: config.display().to_string(),
        params,
        trainable_params: vars.iter().map(|(_, v)| v.elem_count()).sum(),
        r,
        completions: batch.items.len(),
        loss_tokens: batch.loss_tokens,
        generated_tokens,
        update_products: mp.name().to_string(),
        weights_mib: lora.weight_bytes() as f64 / (1024.0 * 1024.0),
        generation,
        reference: o.reference_seconds,
        policy: o.policy_seconds,
        optimizer: o.optimizer_seconds,
        rss_setup_mib,
        rss_after_mib: status_mib("VmRSS:"),
        peak_mib: peak_rss_mib(),
    })
}
