//! The trainer's side of LoRA: the `[lora]` settings as PEFT's adapter config and back, `cppo merge`
//! (a base and an adapter into one plain Hugging Face model), and the memory plan printed at start.

use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device};
use cppo_io::peft::PeftLora;
use cppo_io::{LayerParam, ModelConfig};
use cppo_model::{Decoder, LoraSpec};

use crate::config::LoraSection;

/// The adapter config a run with these settings writes.
pub fn peft_settings(lora: &LoraSection, base: &str) -> Result<PeftLora> {
    let spec = lora.spec()?;
    Ok(PeftLora {
        r: lora.r,
        alpha: lora.alpha,
        dropout: lora.dropout,
        target_modules: spec.targets.iter().filter_map(|p| p.linear_module()).map(String::from).collect(),
        use_rslora: lora.use_rslora,
        base_model: Some(base.to_string()),
    })
}

/// The decoder's view of an adapter config read from disk (its dropout only acts in training, so
/// merging and inference ignore it, as PEFT does in eval mode).
pub fn spec_of(peft: &PeftLora) -> Result<LoraSpec> {
    let targets = peft
        .target_modules
        .iter()
        .map(|m| LayerParam::of_module(m).with_context(|| format!("adapter_config.json: unknown target module `{m}`")))
        .collect::<Result<Vec<_>>>()?;
    Ok(LoraSpec { r: peft.r, alpha: peft.alpha, use_rslora: peft.use_rslora, targets })
}

/// A frozen decoder of `base` carrying the adapter in `adapter_dir` (for merging, generation, eval).
pub fn load_adapted(cfg: &ModelConfig, weights: &cppo_io::Weights, adapter_dir: &Path, device: &Device) -> Result<Decoder> {
    let (peft, adapters) = cppo_io::peft::load_peft_adapter(adapter_dir).with_context(|| format!("--adapter {}", adapter_dir.display()))?;
    let spec = spec_of(&peft)?;
    Decoder::new(cfg, weights, false, device)?
        .with_lora_weights(spec, &adapters, false)
        .with_context(|| format!("--adapter {}: it does not fit this base model", adapter_dir.display()))
}

/// `cppo merge`: writes `base` with the adapter merged in (`W + s B A`, f32) as a Hugging Face model.
pub fn merge(base: &Path, adapter: &Path, out: &Path) -> Result<()> {
    let loaded = cppo_io::load_model(base, DType::F32, &Device::Cpu).with_context(|| format!("--base {}", base.display()))?;
    let dec = load_adapted(&loaded.config, &loaded.weights, adapter, &Device::Cpu)?;
    if out == base || out == adapter {
        bail!("--out {} would overwrite an input", out.display());
    }
    let merged = dec.merged_weights()?;
    cppo_io::save_hf(out, &loaded.config, &merged, &loaded.tokenizer, DType::F32).with_context(|| format!("--out {}", out.display()))?;
    Ok(())
}

/// Bytes of f32 values.
fn mib(values: usize) -> f64 {
    values as f64 * 4.0 / (1024.0 * 1024.0)
}

/// What a run holds in memory besides activations, as lines to print at start: the base, the
/// trainable weights, their gradients and AdamW's two moments (all f32), and the reference model.
pub fn memory_plan(policy: &Decoder, reference: Option<&Decoder>, micro_batch_tokens: usize) -> Vec<String> {
    let total: usize = policy.config().param_count();
    let trainable: usize = policy.vars().iter().map(|(_, v)| v.elem_count()).sum();
    let mut lines = Vec::new();
    match policy.lora() {
        Some(spec) => {
            let held = policy.weight_bytes() - 4 * trainable;
            lines.push(format!(
                "memory plan (LoRA r={}, {} modules): frozen base {total} params {:.1} MiB ({}); adapters {trainable} params {:.2} MiB ({:.3}% of the base)",
                spec.r,
                spec.targets.len(),
                held as f64 / (1024.0 * 1024.0),
                if policy.has_bf16_base() { "linear layers in bf16, the rollout snapshot shares them" } else { "f32" },
                mib(trainable),
                100.0 * trainable as f64 / total.max(1) as f64
            ));
            lines.push(format!(
                "  gradients {:.2} MiB + AdamW moments {:.2} MiB (adapters only); reference: {}",
                mib(trainable),
                mib(2 * trainable),
                if reference.is_some() { "the base with adapters off (no copy)" } else { "none (beta = 0)" }
            ));
        }
        None => {
            lines.push(format!("memory plan (full fine-tuning): weights {total} params {:.1} MiB", mib(total)));
            lines.push(format!(
                "  gradients {:.1} MiB + AdamW moments {:.1} MiB; reference: {}",
                mib(trainable),
                mib(2 * trainable),
                if reference.is_some() { format!("a frozen copy, {:.1} MiB", mib(total)) } else { "none (beta = 0)".into() }
            ));
        }
    }
    lines.push(format!(
        "  activations: about {:.1} MiB kept for the backward per micro-batch of {micro_batch_tokens} tokens (optim.micro_batch_tokens), plus one layer's backward scratch",
        tape_bytes(policy.config(), micro_batch_tokens) as f64 / (1024.0 * 1024.0)
    ));
    lines
}

/// The bytes the training tape keeps for the backward pass over `tokens` rows: per layer and row, in
/// f32, the residual stream before and after attention, q, k, v, the attention output, gate and up
/// (q and k before their norm too with per-head q/k norms), and the final hidden row.
pub fn tape_bytes(cfg: &cppo_io::ModelConfig, tokens: usize) -> usize {
    let (h, inter) = (cfg.hidden_size, cfg.intermediate_size);
    let (qw, kw) = (cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim);
    let raw = if cfg.qk_norm { qw + kw } else { 0 };
    let per_layer = 2 * h + qw + 2 * kw + qw + 2 * inter + raw;
    4 * tokens * (cfg.num_hidden_layers * per_layer + h)
}

#[cfg(test)]
mod tests {
    use super::tape_bytes;
    use cppo_io::{Architecture, ModelConfig};

    /// SmolLM2-135M's shapes (30 layers, hidden 576, 9 heads and 3 kv heads of 64, intermediate 1536):
    /// per layer and row 2 x 576 + 576 + 2 x 192 + 576 + 2 x 1536 = 5760 floats, plus the final 576.
    #[test]
    fn the_tape_estimate_counts_every_saved_buffer() {
        let cfg = ModelConfig {
            vocab_size: 49152,
            hidden_size: 576,
            intermediate_size: 1536,
            num_hidden_layers: 30,
            num_attention_heads: 9,
            num_key_value_heads: 3,
            head_dim: 64,
            ..ModelConfig::tiny(Architecture::Llama)
        };
        assert_eq!(tape_bytes(&cfg, 1), 4 * (30 * 5760 + 576));
        assert_eq!(tape_bytes(&cfg, 4096), 4096 * tape_bytes(&cfg, 1));
        let qwen3 = ModelConfig { qk_norm: true, ..cfg.clone() };
        assert_eq!(tape_bytes(&qwen3, 1) - tape_bytes(&cfg, 1), 4 * 30 * (576 + 192));
    }
}
