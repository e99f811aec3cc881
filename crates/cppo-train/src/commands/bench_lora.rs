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

use crate::config::LossSection;
use crate::optim::{AdamW, AdamWConfig, GradAccumulator};
use crate::prompt::Prompter;
use crate::rollout::{generate_groups, score_groups, RewardSet, RolloutRequest};
use crate::sources::resolve_model_path;
use crate::update::{build_batch, Updater};

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
        out
    }
}

/// The process's peak resident set (VmHWM), in MiB; 0 where /proc is not there.
fn peak_rss_mib() -> f64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return 0.0 };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
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
    let problems = crate::sources::load_builtin(Dataset::Gsm8kTrain)?.into_iter().take(1).collect::<Vec<_>>();
    let prompter = Prompter { template: PromptTemplate::preset("r1-think")?, max_prompt_tokens: 1024 };
    let prompts = vec![prompter.ids(tok, &problems[0])?];
    let rewards = RewardSet::from_config(&[("accuracy".to_string(), 1.0), ("brevity".to_string(), 0.1)].into_iter().collect())?;
    let params = SamplingParams { temperature: 1.0, max_new_tokens, ..Default::default() };
    let spec = LoraSpec { r, alpha: 2.0 * r as f64, use_rslora: false, targets: LayerParam::linear().collect() };
    let lora = Decoder::new(&loaded.config, &loaded.weights, false, &Device::Cpu)?.with_matmul_precision(mp).with_lora(spec, 1)?.with_bf16_base()?;
    // The batch: eight completions sampled once from the base, shared by both arms.
    let req = RolloutRequest { problems: &problems, prompts, group_size: 8 };
    let (mut rollouts, _) = generate_groups(&lora, tok, &req, &params, 64, 11, Precision::Auto, |_| {})?;
    score_groups(&mut rollouts, &rewards);
    let loss = LossSection { beta: 0.04, ..Default::default() };
    let sel = SelectionConfig { strategy: Strategy::All, ..Default::default() }
        .select(&rollouts.iter().map(|r| r.rewards.clone()).collect::<Vec<_>>(), 0)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let batch = build_batch(&rollouts, &sel, &loss, max_new_tokens as f64, 4096)?;

    let arm = |label: &str, policy: &Decoder, reference: &Decoder| -> Result<UpdateTimes> {
        let vars = policy.vars();
        let mut optimizer = AdamW::new(&vars, AdamWConfig::default());
        let mut grads = GradAccumulator::new(&vars);
        let (mut rt, mut pt, mut ot) = (vec![], vec![], vec![]);
        // One unmeasured pass first: allocator and caches.
        for i in 0..=repeats.max(1) {
            let o = Updater { policy, reference: Some(reference), vars: &vars, optimizer: &mut optimizer, grads: &mut grads, loss: &loss }.run(&batch, |_| 1e-6)?;
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
    })
}
