//! `cppo bench step --device cuda --random-config CONFIG`: a whole GRPO step on a device backend, then
//! CPPO (P = 0.875) on the same rollouts, phase by phase (rollouts, reference pass, policy forward and
//! backward, AdamW), on a random model of the config's shapes. Rollouts and update both run on the
//! backend, as `model.device = "cuda"` trains; no tokenizer (token prompts, no end of sequence, so every
//! completion runs to its length) and synthetic rewards (all different, so every completion has an
//! advantage and CPPO's choice is by |A|). Generic over the backend, so the test runs it on the
//! reference backend; gpu-check.sh runs it on a GPU.

use std::time::Instant;

use anyhow::{anyhow, Result};
use candle_core::Device;
use cppo_core::select::{SelectionConfig, Strategy};
use cppo_core::{Problem, Task};
use cppo_engine::{EngineOptions, Precision, Request, SamplingParams};
use cppo_io::ModelConfig;
use cppo_kernels::backend::Backend;
use cppo_model::decoder::random_weights;
use cppo_model::Decoder;

use cppo_train::config::{LossSection, OptimSection};
use cppo_train::device::{DeviceState, OnDevice};
use cppo_train::optim::{AdamW, AdamWConfig};
use cppo_train::rollout::Rollout;
use cppo_train::update::build_batch;

/// The step's shape: the GPU comparison is 8 questions, G = 16, <= 512 new tokens.
#[derive(Clone, Debug)]
pub struct DeviceStepShape {
    pub questions: usize,
    pub group: usize,
    pub prompt_len: usize,
    pub max_new_tokens: usize,
    /// Rows the engine decodes together.
    pub max_batch: usize,
    pub pruning_rate: f64,
}

impl Default for DeviceStepShape {
    fn default() -> Self {
        DeviceStepShape { questions: 8, group: 16, prompt_len: 256, max_new_tokens: 512, max_batch: 128, pruning_rate: 0.875 }
    }
}

/// One arm's update on the shared rollouts.
#[derive(Clone, Debug)]
pub struct ArmTimes {
    pub label: String,
    pub completions_kept: usize,
    pub loss_tokens: usize,
    pub reference: f64,
    pub policy: f64,
    pub optimizer: f64,
    /// The whole update call, wall clock.
    pub update: f64,
}

#[derive(Clone, Debug)]
pub struct DeviceStepBench {
    pub backend: String,
    pub params: usize,
    pub shape: DeviceStepShape,
    pub generated_tokens: usize,
    pub generation: f64,
    pub grpo: ArmTimes,
    pub cppo: ArmTimes,
}

impl DeviceStepBench {
    /// CPPO's policy phase over GRPO's (the target: at most 0.2 at P = 0.875).
    pub fn policy_ratio(&self) -> f64 {
        self.cppo.policy / self.grpo.policy
    }

    pub fn table(&self) -> String {
        let s = &self.shape;
        let mut out = format!(
            "device step on {}: random model of {:.2} B parameters, {} questions x G = {}, prompt {} tokens, {} new tokens each (bf16 rollouts and products, beta 0.04)\n",
            self.backend,
            self.params as f64 / 1e9,
            s.questions,
            s.group,
            s.prompt_len,
            s.max_new_tokens
        );
        out += &format!(
            "rollouts: {} tokens in {:.2} s ({:.0} tokens/s), shared by both arms\n",
            self.generated_tokens,
            self.generation,
            self.generated_tokens as f64 / self.generation.max(1e-12)
        );
        out += "| arm | kept | loss tokens | reference s | policy fwd+bwd s | optimizer s | update s | step s |\n|---|---|---|---|---|---|---|---|\n";
        for a in [&self.grpo, &self.cppo] {
            out += &format!(
                "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |\n",
                a.label,
                a.completions_kept,
                a.loss_tokens,
                a.reference,
                a.policy,
                a.optimizer,
                a.update,
                self.generation + a.update
            );
        }
        out += &format!(
            "CPPO / GRPO: policy phase {:.3}x (target <= 0.2x), update {:.3}x, whole step {:.3}x\n",
            self.policy_ratio(),
            self.cppo.update / self.grpo.update,
            (self.generation + self.cppo.update) / (self.generation + self.grpo.update)
        );
        out
    }
}

/// Prompt `q`'s tokens: spread over the vocabulary, different per question (a random model reads any).
fn prompt(q: usize, len: usize, vocab: usize) -> Vec<u32> {
    (0..len).map(|i| ((q * 7919 + i * 104_729 + 17) % vocab) as u32).collect()
}

/// Rewards in [0, 1), all different within a group.
fn rewards(q: usize, g: usize) -> Vec<f64> {
    (0..g).map(|i| ((q * g + i) as u64).wrapping_mul(2_654_435_761) % 10_007).map(|x| x as f64 / 10_007.0).collect()
}

/// One step's rollouts on `b`, then the GRPO and the CPPO update on them, each timed by phase.
pub fn bench_device_step<B: Backend<T = f32> + 'static>(b: B, cfg: &ModelConfig, shape: &DeviceStepShape) -> Result<DeviceStepBench> {
    let backend = b.name().to_string();
    let params = cfg.param_count();
    let policy = {
        let w = random_weights(cfg, 1, &Default::default())?;
        Decoder::new(cfg, &w, true, &Device::Cpu)?
    }
    .with_matmul_precision(Precision::Bf16);
    let reference = policy.frozen_copy()?;
    let optimizer = AdamW::new(&policy.vars(), AdamWConfig::default());
    let mut dev = OnDevice::new(b, &policy, Some(&reference), &optimizer)?;

    let requests: Vec<Request> = (0..shape.questions).map(|q| Request { prompt: prompt(q, shape.prompt_len, cfg.vocab_size), n: shape.group }).collect();
    let params_s = SamplingParams { temperature: 1.0, max_new_tokens: shape.max_new_tokens, ..Default::default() };
    let options = EngineOptions { max_batch: shape.max_batch, eos: vec![], seed: 11 };
    let t = Instant::now();
    let (groups, stats) = dev.generate_tokens(&policy, &requests, &params_s, &options, Precision::Bf16)?;
    let generation = t.elapsed().as_secs_f64();
    let rollouts: Vec<Rollout> = groups
        .into_iter()
        .zip(&requests)
        .enumerate()
        .map(|(q, (completions, r))| {
            let rw = rewards(q, completions.len());
            Rollout {
                problem: Problem { id: format!("random-{q}"), prompt: String::new(), answer: String::new(), task: Task::Gsm8k, record: serde_json::Value::Null, messages: None, prompt_field: None },
                prompt: r.prompt.clone(),
                texts: vec![String::new(); completions.len()],
                completions,
                parts: vec![rw.clone()],
                correct: vec![false; rw.len()],
                rewards: rw,
            }
        })
        .collect();

    let loss = LossSection { beta: 0.04, ..Default::default() };
    let micro = OptimSection::default().micro_batch_tokens;
    let all_rewards: Vec<Vec<f64>> = rollouts.iter().map(|r| r.rewards.clone()).collect();
    let mut arm = |label: &str, strategy: Strategy| -> Result<ArmTimes> {
        let sel = SelectionConfig { strategy, ..Default::default() }.select(&all_rewards, 0).map_err(|e| anyhow!("{e}"))?;
        let batch = build_batch(&rollouts, &sel, &loss, shape.max_new_tokens as f64, micro)?;
        let t = Instant::now();
        // A tiny learning rate: the second arm's model is the first's to within noise.
        let o = dev.update(&policy, Some(&reference), &loss, &batch, &|_| 1e-7)?;
        Ok(ArmTimes {
            label: label.to_string(),
            completions_kept: batch.items.len(),
            loss_tokens: batch.loss_tokens,
            reference: o.reference_seconds,
            policy: o.policy_seconds,
            optimizer: o.optimizer_seconds,
            update: t.elapsed().as_secs_f64(),
        })
    };
    let grpo = arm("grpo", Strategy::All)?;
    let cppo = arm(&format!("cppo P={}", shape.pruning_rate), Strategy::Cppo { pruning_rate: shape.pruning_rate })?;
    Ok(DeviceStepBench { backend, params, shape: shape.clone(), generated_tokens: stats.generated_tokens, generation, grpo, cppo })
}
