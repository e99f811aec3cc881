//! Loading a Hugging Face model directory: `config.json`, one `model.safetensors` or shards listed in
//! `model.safetensors.index.json`, and the tokenizer files.

pub mod config_json;
pub mod safetensors_io;
pub mod tokenizer_files;

use std::path::Path;

use candle_core::{DType, Device};
use serde_json::Value;

use crate::config::ModelConfig;
use crate::error::{ModelIoError, Result};
use crate::load::LoadedModel;
use crate::weights::{check_dtype, Weights};

pub use config_json::{config_json, parse_config_json};
pub use tokenizer_files::load_tokenizer_dir;

pub fn read_config(dir: &Path) -> Result<ModelConfig> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|e| ModelIoError::io(&path, e))?;
    let mut config = parse_config_json(&text, &path)?;
    // Chat models often list their end-of-turn tokens only in generation_config.json.
    for id in generation_eos_ids(dir)? {
        if !config.eos_token_ids.contains(&id) {
            config.eos_token_ids.push(id);
        }
    }
    Ok(config)
}

fn generation_eos_ids(dir: &Path) -> Result<Vec<u32>> {
    let path = dir.join("generation_config.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(ModelIoError::io(&path, e)),
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| ModelIoError::json(&path, e))?;
    let ids = match value.get("eos_token_id") {
        None | Some(Value::Null) => vec![],
        Some(Value::Array(list)) => list.clone(),
        Some(one) => vec![one.clone()],
    };
    ids.iter()
        .map(|v| {
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    ModelIoError::invalid(
                        &path,
                        "eos_token_id",
                        format!("expected a token id, found {v}"),
                    )
                })
        })
        .collect()
}

/// The weights of a directory, checked against `config`, in `dtype` on `device`.
pub fn read_weights(
    dir: &Path,
    config: &ModelConfig,
    dtype: DType,
    device: &Device,
) -> Result<Weights> {
    check_dtype(dtype)?;
    let single = dir.join("model.safetensors");
    let index = dir.join("model.safetensors.index.json");
    let mut weights = Weights::default();
    let source;
    if single.is_file() {
        weights.tensors = safetensors_io::read_safetensors(&single, dtype, device)?;
        source = single;
    } else if index.is_file() {
        for (file, names) in safetensors_io::read_index(&index)? {
            let mut shard = safetensors_io::read_safetensors(&file, dtype, device)?;
            for name in names {
                let tensor = shard
                    .remove(&name)
                    .ok_or_else(|| ModelIoError::MissingTensor {
                        path: file.clone(),
                        name: name.clone(),
                    })?;
                weights.insert(name, tensor);
            }
        }
        source = index;
    } else {
        return Err(ModelIoError::io(
            &single,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "neither model.safetensors nor model.safetensors.index.json is in this directory",
            ),
        ));
    }
    // Old checkpoints store the rotary frequencies, which are recomputed from the config.
    weights
        .tensors
        .retain(|name, _| !name.ends_with("rotary_emb.inv_freq"));
    if config.tie_word_embeddings {
        weights.tensors.remove("lm_head.weight");
    }
    weights.check_against(config, &source)?;
    Ok(weights)
}

pub fn load_hf_dir(dir: &Path, dtype: DType, device: &Device) -> Result<LoadedModel> {
    let config = read_config(dir)?;
    let weights = read_weights(dir, &config, dtype, device)?;
    let tokenizer = load_tokenizer_dir(dir, &config.eos_token_ids)?;
    Ok(LoadedModel {
        config,
        weights,
        tokenizer,
    })
}
