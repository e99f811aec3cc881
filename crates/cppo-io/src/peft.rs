//! LoRA adapters in PEFT's format, so that `PeftModel.from_pretrained(base, dir)` loads what cppo
//! saves and cppo loads what PEFT saves: `adapter_config.json` (PEFT's `LoraConfig` fields) and
//! `adapter_model.safetensors`, whose tensors are named `base_model.model.<module>.lora_A.weight`
//! (`A (r, in)`) and `...lora_B.weight` (`B (out, r)`). In memory the adapters go by the module's own
//! name (`model.layers.0.self_attn.q_proj.lora_A.weight`, as `ModelConfig::lora_params` names them).
//! Settings cppo does not implement (DoRA, per-module ranks, bias training, ...) are refused by key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device};
use serde_json::{json, Value};

use crate::error::{ModelIoError, Result};
use crate::hf::safetensors_io::{read_safetensors, write_safetensors};
use crate::params::{kind_of_name, ParamKind};
use crate::weights::Weights;

pub const ADAPTER_CONFIG: &str = "adapter_config.json";
pub const ADAPTER_WEIGHTS: &str = "adapter_model.safetensors";
/// What PEFT's `PeftModelForCausalLM` puts before a module's name in a saved adapter.
const PREFIX: &str = "base_model.model.";

/// The settings of a LoRA adapter, as `adapter_config.json` holds them.
#[derive(Clone, Debug, PartialEq)]
pub struct PeftLora {
    pub r: usize,
    pub alpha: f64,
    pub dropout: f64,
    /// PEFT's module names (`q_proj`, ...).
    pub target_modules: Vec<String>,
    pub use_rslora: bool,
    /// Where the base model came from (`base_model_name_or_path`), if known.
    pub base_model: Option<String>,
}

/// PEFT's `lora_alpha` is an int in Python; write it as one when it is whole.
fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// The `adapter_config.json` PEFT writes for these settings (every field of its `LoraConfig` that a
/// loader may look at, at PEFT's defaults where cppo has no setting).
pub fn adapter_config_json(lora: &PeftLora) -> Value {
    json!({
        "alpha_pattern": {},
        "auto_mapping": null,
        "base_model_name_or_path": lora.base_model,
        "bias": "none",
        "fan_in_fan_out": false,
        "inference_mode": true,
        "init_lora_weights": true,
        "layers_pattern": null,
        "layers_to_transform": null,
        "lora_alpha": number(lora.alpha),
        "lora_dropout": lora.dropout,
        "modules_to_save": null,
        "peft_type": "LORA",
        "r": lora.r,
        "rank_pattern": {},
        "revision": null,
        "target_modules": lora.target_modules,
        "task_type": "CAUSAL_LM",
        "use_dora": false,
        "use_rslora": lora.use_rslora,
    })
}

/// Writes the adapter (tensors by their in-memory names, stored as f32) into `dir`, built beside it
/// and renamed into place.
pub fn save_peft_adapter(dir: &Path, lora: &PeftLora, adapters: &Weights) -> Result<()> {
    let mut tensors = BTreeMap::new();
    for (name, t) in &adapters.tensors {
        if !matches!(kind_of_name(name), Some(ParamKind::Lora(..))) {
            return Err(ModelIoError::invalid(dir, name, "is not a LoRA adapter tensor"));
        }
        let t = t.to_dtype(DType::F32).map_err(|e| ModelIoError::tensor(name, e))?;
        tensors.insert(format!("{PREFIX}{name}"), t);
    }
    let config = serde_json::to_string_pretty(&adapter_config_json(lora)).map_err(|e| ModelIoError::json(dir, e))?;
    crate::writer::write_dir_atomic(dir, ADAPTER_CONFIG, |tmp| {
        write_safetensors(&tmp.join(ADAPTER_WEIGHTS), &tensors)?;
        let path = tmp.join(ADAPTER_CONFIG);
        std::fs::write(&path, config.as_bytes()).map_err(|e| ModelIoError::io(&path, e))
    })
}

fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|x| !x.is_null())
}

/// Reads `adapter_config.json`, refusing what cppo cannot run, by key.
pub fn read_adapter_config(dir: &Path) -> Result<PeftLora> {
    let path: PathBuf = dir.join(ADAPTER_CONFIG);
    let text = std::fs::read_to_string(&path).map_err(|e| ModelIoError::io(&path, e))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| ModelIoError::json(&path, e))?;
    let bad = |key: &str, reason: String| ModelIoError::invalid(&path, key, reason);
    match get(&v, "peft_type").and_then(Value::as_str) {
        Some("LORA") => {}
        other => return Err(bad("peft_type", format!("{other:?}: only LORA adapters are supported"))),
    }
    let r = get(&v, "r").ok_or_else(|| ModelIoError::MissingKey { path: path.clone(), key: "r".into() })?;
    let r = r.as_u64().filter(|&r| r > 0).ok_or_else(|| bad("r", format!("{r} must be a positive integer")))? as usize;
    let num = |key: &str, default: f64| -> Result<f64> {
        match get(&v, key) {
            None => Ok(default),
            Some(x) => x.as_f64().ok_or_else(|| bad(key, format!("{x} is not a number"))),
        }
    };
    let (alpha, dropout) = (num("lora_alpha", 8.0)?, num("lora_dropout", 0.0)?);
    let flag = |key: &str| -> Result<bool> {
        match get(&v, key) {
            None => Ok(false),
            Some(x) => x.as_bool().ok_or_else(|| bad(key, format!("{x} is not true or false"))),
        }
    };
    let use_rslora = flag("use_rslora")?;
    for key in ["use_dora", "fan_in_fan_out"] {
        if flag(key)? {
            return Err(bad(key, "true is not supported".into()));
        }
    }
    if let Some(b) = get(&v, "bias").filter(|b| b.as_str() != Some("none")) {
        return Err(bad("bias", format!("{b}: only \"none\" is supported")));
    }
    for key in ["rank_pattern", "alpha_pattern"] {
        if get(&v, key).is_some_and(|p| p.as_object().is_none_or(|o| !o.is_empty())) {
            return Err(bad(key, "per-module ranks or alphas are not supported".into()));
        }
    }
    for key in ["layers_to_transform", "modules_to_save"] {
        if get(&v, key).is_some() {
            return Err(bad(key, "is not supported (it must be null)".into()));
        }
    }
    let all: Vec<String> = crate::params::LayerParam::linear().filter_map(|p| p.linear_module()).map(String::from).collect();
    let target_modules = match get(&v, "target_modules") {
        Some(Value::String(s)) if s == "all-linear" => all.clone(),
        Some(Value::String(s)) if all.contains(s) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(String::from).ok_or_else(|| bad("target_modules", format!("{x} is not a module name"))))
            .collect::<Result<_>>()?,
        Some(other) => return Err(bad("target_modules", format!("{other}: a list of module names or \"all-linear\" (regular expressions are not supported)"))),
        None => return Err(ModelIoError::MissingKey { path: path.clone(), key: "target_modules".into() }),
    };
    if let Some(t) = target_modules.iter().find(|t| !all.contains(t)) {
        return Err(bad("target_modules", format!("unknown module `{t}` (the decoder's linear layers are {})", all.join(", "))));
    }
    let base_model = get(&v, "base_model_name_or_path").and_then(Value::as_str).map(String::from);
    Ok(PeftLora { r, alpha, dropout, target_modules, use_rslora, base_model })
}

/// Reads an adapter directory: its settings and its tensors by their in-memory names, in f32. A
/// tensor that is not a LoRA factor of a decoder layer is an error naming it. PEFT's names with the
/// adapter's name inside (`lora_A.default.weight`) are read too.
pub fn load_peft_adapter(dir: &Path) -> Result<(PeftLora, Weights)> {
    let lora = read_adapter_config(dir)?;
    let path = dir.join(ADAPTER_WEIGHTS);
    let mut weights = Weights::default();
    for (stored, t) in read_safetensors(&path, DType::F32, &Device::Cpu)? {
        let name = stored.strip_prefix(PREFIX).unwrap_or(&stored).replace(".lora_A.default.", ".lora_A.").replace(".lora_B.default.", ".lora_B.");
        if !matches!(kind_of_name(&name), Some(ParamKind::Lora(..))) {
            return Err(ModelIoError::corrupt(&path, format!("tensor `{stored}` is not a LoRA factor of a decoder layer")));
        }
        weights.insert(name, t);
    }
    Ok((lora, weights))
}
