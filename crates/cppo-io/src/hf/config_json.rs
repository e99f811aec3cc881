//! `config.json` <-> [`ModelConfig`], following the defaults of transformers' `LlamaConfig`, `Qwen2Config`
//! and `Qwen3Config` for keys a file leaves out.

use std::path::Path;

use candle_core::DType;
use serde_json::{json, Map, Value};

use crate::config::{Architecture, ModelConfig, RopeScaling};
use crate::error::{ModelIoError, Result};

/// Parses a Hugging Face `config.json`; `path` only names the file in errors.
pub fn parse_config_json(text: &str, path: &Path) -> Result<ModelConfig> {
    let value: Value = serde_json::from_str(text).map_err(|e| ModelIoError::json(path, e))?;
    let obj = value
        .as_object()
        .ok_or_else(|| ModelIoError::invalid(path, "<root>", "expected a JSON object"))?;
    ConfigReader { obj, path }.read()
}

struct ConfigReader<'a> {
    obj: &'a Map<String, Value>,
    path: &'a Path,
}

impl ConfigReader<'_> {
    fn read(&self) -> Result<ModelConfig> {
        let architecture = self.architecture()?;
        let hidden_size = self.usize("hidden_size")?;
        let num_attention_heads = self.usize("num_attention_heads")?;
        let head_dim = match self.opt_usize("head_dim")? {
            Some(d) => d,
            None if num_attention_heads > 0 && hidden_size % num_attention_heads == 0 => {
                hidden_size / num_attention_heads
            }
            None => {
                return Err(self.invalid(
                    "num_attention_heads",
                    format!("does not divide hidden_size {hidden_size} and there is no head_dim"),
                ))
            }
        };
        self.require_unsupported_absent(architecture)?;
        let (rope_theta, rope_scaling) = self.rope()?;
        let config = ModelConfig {
            architecture,
            vocab_size: self.usize("vocab_size")?,
            hidden_size,
            intermediate_size: self.usize("intermediate_size")?,
            num_hidden_layers: self.usize("num_hidden_layers")?,
            num_attention_heads,
            num_key_value_heads: self
                .opt_usize("num_key_value_heads")?
                .unwrap_or(num_attention_heads),
            head_dim,
            max_position_embeddings: self.usize("max_position_embeddings")?,
            rms_norm_eps: self.opt_f64("rms_norm_eps")?.unwrap_or(1e-6),
            rope_theta,
            rope_scaling,
            tie_word_embeddings: self.opt_bool("tie_word_embeddings")?.unwrap_or(false),
            // Qwen2 always has q/k/v biases (its config has no switch for them).
            attention_bias: architecture == Architecture::Qwen2,
            qk_norm: architecture == Architecture::Qwen3,
            bos_token_id: self
                .opt_token_ids("bos_token_id")?
                .and_then(|ids| ids.first().copied()),
            eos_token_ids: self.opt_token_ids("eos_token_id")?.unwrap_or_default(),
        };
        if let Some((key, reason)) = config.inconsistency() {
            return Err(self.invalid(key, reason));
        }
        Ok(config)
    }

    fn architecture(&self) -> Result<Architecture> {
        let class = match self.obj.get("architectures") {
            Some(Value::Array(list)) => list.first().and_then(Value::as_str),
            _ => None,
        };
        let by_class = |c: &str| match c {
            "LlamaForCausalLM" => Some(Architecture::Llama),
            "Qwen2ForCausalLM" => Some(Architecture::Qwen2),
            "Qwen3ForCausalLM" => Some(Architecture::Qwen3),
            _ => None,
        };
        let by_type = |t: &str| match t {
            "llama" => Some(Architecture::Llama),
            "qwen2" => Some(Architecture::Qwen2),
            "qwen3" => Some(Architecture::Qwen3),
            _ => None,
        };
        let model_type = self.obj.get("model_type").and_then(Value::as_str);
        match (class, model_type) {
            (Some(c), _) => by_class(c).ok_or_else(|| self.unknown(c)),
            (None, Some(t)) => by_type(t).ok_or_else(|| self.unknown(t)),
            (None, None) => Err(ModelIoError::MissingKey {
                path: self.path.to_path_buf(),
                key: "architectures".into(),
            }),
        }
    }

    fn unknown(&self, found: &str) -> ModelIoError {
        ModelIoError::UnknownArchitecture {
            path: self.path.to_path_buf(),
            found: found.to_string(),
            supported: Architecture::SUPPORTED,
        }
    }

    /// Features of these families that the decoder does not implement: refuse them rather than load a model
    /// that would compute something else.
    fn require_unsupported_absent(&self, architecture: Architecture) -> Result<()> {
        if let Some(act) = self.obj.get("hidden_act") {
            if act.as_str() != Some("silu") {
                return Err(self.invalid(
                    "hidden_act",
                    format!("{act} is not supported (only \"silu\")"),
                ));
            }
        }
        if architecture != Architecture::Qwen2 && self.opt_bool("attention_bias")? == Some(true) {
            return Err(self.invalid(
                "attention_bias",
                "true is not supported for this architecture",
            ));
        }
        if self.opt_bool("mlp_bias")? == Some(true) {
            return Err(self.invalid("mlp_bias", "true is not supported"));
        }
        if self.opt_bool("use_sliding_window")? == Some(true) {
            return Err(self.invalid(
                "use_sliding_window",
                "sliding-window attention is not supported",
            ));
        }
        Ok(())
    }

    /// `rope_theta` + `rope_scaling` (transformers 4) or `rope_parameters` (transformers 5).
    fn rope(&self) -> Result<(f64, Option<RopeScaling>)> {
        let params = match self.obj.get("rope_parameters") {
            Some(Value::Object(p)) => Some(("rope_parameters", p)),
            _ => None,
        };
        let theta = match params.and_then(|(_, p)| p.get("rope_theta")) {
            Some(v) => v
                .as_f64()
                .ok_or_else(|| self.invalid("rope_parameters.rope_theta", "expected a number"))?,
            None => self.opt_f64("rope_theta")?.unwrap_or(10000.0),
        };
        let scaling = match (self.obj.get("rope_scaling"), params) {
            (Some(Value::Object(s)), _) => Some(("rope_scaling", s)),
            (_, Some(p)) => Some(p),
            _ => None,
        };
        let Some((prefix, s)) = scaling else {
            return Ok((theta, None));
        };
        let kind = s
            .get("rope_type")
            .or_else(|| s.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("default");
        match kind {
            "default" => Ok((theta, None)),
            "llama3" => {
                let num = |key: &str| -> Result<f64> {
                    s.get(key)
                        .and_then(Value::as_f64)
                        .ok_or_else(|| ModelIoError::MissingKey {
                            path: self.path.to_path_buf(),
                            key: format!("{prefix}.{key}"),
                        })
                };
                let original = num("original_max_position_embeddings")?;
                if original < 1.0 || original.fract() != 0.0 {
                    return Err(self.invalid(
                        format!("{prefix}.original_max_position_embeddings"),
                        "expected a positive integer",
                    ));
                }
                Ok((
                    theta,
                    Some(RopeScaling {
                        factor: num("factor")?,
                        low_freq_factor: num("low_freq_factor")?,
                        high_freq_factor: num("high_freq_factor")?,
                        original_max_position_embeddings: original as usize,
                    }),
                ))
            }
            other => Err(self.invalid(
                format!("{prefix}.rope_type"),
                format!("\"{other}\" is not supported (only \"default\" and \"llama3\")"),
            )),
        }
    }

    fn invalid(&self, key: impl Into<String>, reason: impl Into<String>) -> ModelIoError {
        ModelIoError::invalid(self.path, key, reason)
    }

    fn present(&self, key: &str) -> Option<&Value> {
        self.obj.get(key).filter(|v| !v.is_null())
    }

    fn usize(&self, key: &str) -> Result<usize> {
        self.opt_usize(key)?
            .ok_or_else(|| ModelIoError::MissingKey {
                path: self.path.to_path_buf(),
                key: key.to_string(),
            })
    }

    fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        self.present(key)
            .map(|v| {
                v.as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| {
                        self.invalid(key, format!("expected a non-negative integer, found {v}"))
                    })
            })
            .transpose()
    }

    fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        self.present(key)
            .map(|v| {
                v.as_f64()
                    .ok_or_else(|| self.invalid(key, format!("expected a number, found {v}")))
            })
            .transpose()
    }

    fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        self.present(key)
            .map(|v| {
                v.as_bool()
                    .ok_or_else(|| self.invalid(key, format!("expected true or false, found {v}")))
            })
            .transpose()
    }

    /// An id or a list of ids (`eos_token_id` is either).
    fn opt_token_ids(&self, key: &str) -> Result<Option<Vec<u32>>> {
        let Some(v) = self.present(key) else {
            return Ok(None);
        };
        let one = |v: &Value| {
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| self.invalid(key, format!("expected a token id, found {v}")))
        };
        match v {
            Value::Array(list) => list.iter().map(one).collect::<Result<Vec<_>>>().map(Some),
            v => one(v).map(|id| Some(vec![id])),
        }
    }
}

/// The `torch_dtype` string transformers uses.
pub fn torch_dtype_name(dtype: DType) -> Result<&'static str> {
    match dtype {
        DType::F32 => Ok("float32"),
        DType::BF16 => Ok("bfloat16"),
        other => Err(ModelIoError::UnsupportedDtype(other)),
    }
}

/// A `config.json` transformers loads as the same model; written in the transformers 4 layout, which
/// transformers 5 still reads.
pub fn config_json(config: &ModelConfig, dtype: DType) -> Result<Value> {
    let arch = config.architecture;
    let mut obj = json!({
        "architectures": [arch.hf_class()],
        "model_type": arch.model_type(),
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "head_dim": config.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": config.max_position_embeddings,
        "rms_norm_eps": config.rms_norm_eps,
        "rope_theta": config.rope_theta,
        "rope_scaling": config.rope_scaling.as_ref().map(|s| json!({
            "rope_type": "llama3",
            "factor": s.factor,
            "low_freq_factor": s.low_freq_factor,
            "high_freq_factor": s.high_freq_factor,
            "original_max_position_embeddings": s.original_max_position_embeddings,
        })),
        "tie_word_embeddings": config.tie_word_embeddings,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": true,
        "bos_token_id": config.bos_token_id,
        "eos_token_id": match config.eos_token_ids.as_slice() {
            [] => Value::Null,
            [one] => json!(one),
            many => json!(many),
        },
        "torch_dtype": torch_dtype_name(dtype)?,
    });
    let map = obj.as_object_mut().expect("a JSON object literal");
    match arch {
        Architecture::Llama => {
            map.insert("attention_bias".into(), json!(false));
            map.insert("mlp_bias".into(), json!(false));
            map.insert("pretraining_tp".into(), json!(1));
        }
        Architecture::Qwen2 | Architecture::Qwen3 => {
            if arch == Architecture::Qwen3 {
                map.insert("attention_bias".into(), json!(false));
            }
            map.insert("use_sliding_window".into(), json!(false));
            map.insert("sliding_window".into(), Value::Null);
            map.insert("max_window_layers".into(), json!(config.num_hidden_layers));
        }
    }
    Ok(obj)
}
