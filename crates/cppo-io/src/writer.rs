//! Writing a Hugging Face model directory that transformers and this crate load: `model.safetensors`,
//! `config.json`, `generation_config.json`, `tokenizer.json`, `tokenizer_config.json`. The directory is
//! built beside the target and renamed into place, so a reader never sees half a model.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use candle_core::{DType, Device};
use serde_json::{json, Value};

use crate::config::ModelConfig;
use crate::error::{ModelIoError, Result};
use crate::hf::config_json::config_json;
use crate::hf::safetensors_io::write_safetensors;
use crate::tokenizer::ChatTokenizer;
use crate::weights::{check_dtype, Weights};

/// Writes the model to `dir` with tensors stored as `dtype` (f32 or bf16). An existing `dir` is replaced
/// only once the new one is complete, and only if it is empty or a model directory (has `config.json`).
pub fn save_hf(
    dir: &Path,
    config: &ModelConfig,
    weights: &Weights,
    tokenizer: &ChatTokenizer,
    dtype: DType,
) -> Result<()> {
    check_dtype(dtype)?;
    weights.check_against(config, dir)?;
    write_dir_atomic(dir, "config.json", |tmp| write_contents(tmp, config, weights, tokenizer, dtype))
}

/// Converts a GGUF file into a Hugging Face directory with f32 tensors (dequantised values, exactly).
pub fn convert_gguf(gguf: &Path, out: &Path) -> Result<()> {
    let model = crate::gguf::load_gguf(gguf, DType::F32, &Device::Cpu)?;
    save_hf(
        out,
        &model.config,
        &model.weights,
        &model.tokenizer,
        DType::F32,
    )
}

/// Whether `dir` is empty or holds `marker` (a directory of the kind about to replace it).
fn replaceable_with(dir: &Path, marker: &str) -> Result<bool> {
    if !dir.is_dir() {
        return Ok(false);
    }
    let mut entries = std::fs::read_dir(dir).map_err(|e| ModelIoError::io(dir, e))?;
    Ok(entries.next().is_none() || dir.join(marker).is_file())
}

/// Builds a directory with `fill` beside `dir` and renames it into place; an existing `dir` is replaced
/// only if it is empty or holds `marker`.
pub(crate) fn write_dir_atomic(dir: &Path, marker: &str, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let name = dir
        .file_name()
        .ok_or_else(|| ModelIoError::invalid(dir, "path", "needs a final directory name"))?
        .to_string_lossy()
        .into_owned();
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if dir.exists() && !replaceable_with(dir, marker)? {
        return Err(ModelIoError::invalid(dir, "path", format!("exists and is neither empty nor a directory holding {marker}; refusing to replace it")));
    }
    std::fs::create_dir_all(&parent).map_err(|e| ModelIoError::io(&parent, e))?;
    let tmp = parent.join(format!(".{name}.tmp-{}", unique_suffix()));
    std::fs::create_dir(&tmp).map_err(|e| ModelIoError::io(&tmp, e))?;
    let written = fill(&tmp).and_then(|()| swap_into_place(&tmp, dir));
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    written
}

fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos}", std::process::id())
}

fn swap_into_place(tmp: &Path, dir: &Path) -> Result<()> {
    if !dir.exists() {
        return std::fs::rename(tmp, dir).map_err(|e| ModelIoError::io(dir, e));
    }
    let old = tmp.with_file_name(format!(
        ".{}.old-{}",
        dir.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        unique_suffix()
    ));
    std::fs::rename(dir, &old).map_err(|e| ModelIoError::io(dir, e))?;
    if let Err(e) = std::fs::rename(tmp, dir) {
        // Put the previous model back rather than leave nothing at `dir`.
        let _ = std::fs::rename(&old, dir);
        return Err(ModelIoError::io(dir, e));
    }
    std::fs::remove_dir_all(&old).map_err(|e| ModelIoError::io(&old, e))
}

fn write_contents(
    dir: &Path,
    config: &ModelConfig,
    weights: &Weights,
    tokenizer: &ChatTokenizer,
    dtype: DType,
) -> Result<()> {
    let mut tensors = std::collections::BTreeMap::new();
    for (name, t) in &weights.tensors {
        let t = t
            .to_dtype(dtype)
            .map_err(|e| ModelIoError::tensor(name, e))?;
        tensors.insert(name.clone(), t);
    }
    let st_path = dir.join("model.safetensors");
    write_safetensors(&st_path, &tensors)?;
    sync(&st_path)?;
    drop(tensors);

    write_json(&dir.join("config.json"), &config_json(config, dtype)?)?;
    write_json(
        &dir.join("generation_config.json"),
        &generation_config(config, tokenizer),
    )?;
    write_file(
        &dir.join("tokenizer.json"),
        tokenizer.to_tokenizer_json()?.as_bytes(),
    )?;
    write_json(
        &dir.join("tokenizer_config.json"),
        &tokenizer_config(config, tokenizer),
    )?;
    Ok(())
}

fn ids_value(ids: &[u32]) -> Value {
    match ids {
        [] => Value::Null,
        [one] => json!(one),
        many => json!(many),
    }
}

fn generation_config(config: &ModelConfig, tokenizer: &ChatTokenizer) -> Value {
    let mut g = json!({
        "bos_token_id": config.bos_token_id,
        "eos_token_id": ids_value(&config.eos_token_ids),
    });
    if let Some(pad) = tokenizer.pad_token_id() {
        g["pad_token_id"] = json!(pad);
    }
    g
}

fn tokenizer_config(config: &ModelConfig, tokenizer: &ChatTokenizer) -> Value {
    let special = tokenizer.special_tokens();
    json!({
        // The chat template writes the special tokens itself; encoding adds none.
        "add_bos_token": false,
        "add_eos_token": false,
        "bos_token": special.bos_token,
        "eos_token": special.eos_token,
        "pad_token": special.pad_token,
        "unk_token": special.unk_token,
        "chat_template": tokenizer.chat_template(),
        "clean_up_tokenization_spaces": false,
        "model_max_length": config.max_position_embeddings,
        // The pipeline in tokenizer.json as is: a model-specific class would rebuild parts of it.
        "tokenizer_class": "PreTrainedTokenizerFast",
    })
}

fn write_json(path: &Path, value: &Value) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| ModelIoError::json(path, e))?;
    text.push('\n');
    write_file(path, text.as_bytes())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = std::fs::File::create(path).map_err(|e| ModelIoError::io(path, e))?;
    file.write_all(bytes)
        .map_err(|e| ModelIoError::io(path, e))?;
    file.sync_all().map_err(|e| ModelIoError::io(path, e))
}

fn sync(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| ModelIoError::io(path, e))
}
