//! [`ModelConfig`] from GGUF metadata (`{arch}.block_count`, ...), with what the metadata leaves implicit
//! (tied embeddings, q/k/v biases) read off the tensors present.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::TensorInfo;

use super::metadata::Metadata;
use super::tokenizer::stop_ids;
use crate::config::{Architecture, ModelConfig, RopeScaling};
use crate::error::{ModelIoError, Result};

pub fn architecture(md: &Metadata<'_>) -> Result<Architecture> {
    match md.str("general.architecture")? {
        "llama" => Ok(Architecture::Llama),
        "qwen2" => Ok(Architecture::Qwen2),
        "qwen3" => Ok(Architecture::Qwen3),
        other => Err(ModelIoError::UnknownArchitecture {
            path: md.path.to_path_buf(),
            found: other.to_string(),
            supported: "llama, qwen2, qwen3",
        }),
    }
}

pub fn config_from_metadata(
    md: &Metadata<'_>,
    tensors: &HashMap<String, TensorInfo>,
    rope_freqs: Option<&[f32]>,
) -> Result<ModelConfig> {
    let architecture = architecture(md)?;
    let arch = md.str("general.architecture")?;
    let key = |k: &str| format!("{arch}.{k}");
    let hidden_size = md.usize(&key("embedding_length"))?;
    let num_attention_heads = md.usize(&key("attention.head_count"))?;
    if num_attention_heads == 0 {
        return Err(ModelIoError::invalid(
            md.path,
            key("attention.head_count"),
            "must be positive",
        ));
    }
    // These families rotate whole heads, so llama.cpp's rotary dimension is the head size.
    let head_dim = match (
        md.opt_usize(&key("attention.key_length"))?,
        md.opt_usize(&key("rope.dimension_count"))?,
    ) {
        (Some(d), _) | (None, Some(d)) => d,
        (None, None) => hidden_size / num_attention_heads,
    };
    let vocab_size = match md.opt_usize(&key("vocab_size"))? {
        Some(v) => v,
        None => tensors
            .get("token_embd.weight")
            .map(|t| t.shape.dims()[0])
            .ok_or_else(|| ModelIoError::MissingTensor {
                path: md.path.to_path_buf(),
                name: "token_embd.weight".into(),
            })?,
    };
    let rope_theta = md.opt_f64(&key("rope.freq_base"))?.unwrap_or(10000.0);
    let max_position_embeddings = md.usize(&key("context_length"))?;
    let rope_scaling = match rope_freqs {
        Some(factors) => Some(llama3_scaling_from_factors(
            md, factors, rope_theta, head_dim,
        )?),
        None => None,
    };
    if let Some(kind) = md.opt_str(&key("rope.scaling.type"))? {
        if kind != "none" {
            return Err(ModelIoError::invalid(
                md.path,
                key("rope.scaling.type"),
                format!("\"{kind}\" rotary scaling is not supported"),
            ));
        }
    }
    let config = ModelConfig {
        architecture,
        vocab_size,
        hidden_size,
        intermediate_size: md.usize(&key("feed_forward_length"))?,
        num_hidden_layers: md.usize(&key("block_count"))?,
        num_attention_heads,
        num_key_value_heads: md
            .opt_usize(&key("attention.head_count_kv"))?
            .unwrap_or(num_attention_heads),
        head_dim,
        max_position_embeddings,
        rms_norm_eps: md
            .opt_f64(&key("attention.layer_norm_rms_epsilon"))?
            .unwrap_or(1e-6),
        rope_theta,
        rope_scaling,
        tie_word_embeddings: !tensors.contains_key("output.weight"),
        attention_bias: architecture == Architecture::Qwen2,
        qk_norm: architecture == Architecture::Qwen3,
        bos_token_id: md.opt_u32("tokenizer.ggml.bos_token_id")?,
        eos_token_ids: stop_ids(md)?,
    };
    if let Some((field, reason)) = config.inconsistency() {
        return Err(ModelIoError::invalid(md.path, field, reason));
    }
    Ok(config)
}

/// llama.cpp stores Llama 3's frequency-dependent rotary scaling only as the per-frequency divisors
/// (`rope_freqs.weight`). Llama 3.x releases all use low/high frequency factors 1 and 4 and an original
/// context of 8192, so those are assumed, the factor read off the largest divisor, and the result checked
/// by recomputing every divisor.
fn llama3_scaling_from_factors(
    md: &Metadata<'_>,
    factors: &[f32],
    theta: f64,
    head_dim: usize,
) -> Result<RopeScaling> {
    let factor = factors.iter().copied().fold(f32::MIN, f32::max) as f64;
    let scaling = RopeScaling {
        factor,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
    };
    let expected = llama3_rope_divisors(&scaling, theta, head_dim);
    let matches = expected.len() == factors.len()
        && expected
            .iter()
            .zip(factors)
            .all(|(e, f)| (e - f64::from(*f)).abs() <= 1e-4 * e.abs().max(1.0));
    if !matches {
        return Err(ModelIoError::corrupt(
            md.path,
            "tensor `rope_freqs.weight` is not Llama 3 rotary scaling with low/high frequency factors 1/4 \
             and original context 8192; other rotary scalings are not supported",
        ));
    }
    Ok(scaling)
}

/// The divisor of each rotary frequency under Llama 3 scaling, as llama.cpp's converter computes it.
pub fn llama3_rope_divisors(s: &RopeScaling, theta: f64, head_dim: usize) -> Vec<f64> {
    let original = s.original_max_position_embeddings as f64;
    let low_wavelen = original / s.low_freq_factor;
    let high_wavelen = original / s.high_freq_factor;
    (0..head_dim / 2)
        .map(|i| {
            let freq = 1.0 / theta.powf((2 * i) as f64 / head_dim as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                s.factor
            } else {
                let smooth = (original / wavelen - s.low_freq_factor)
                    / (s.high_freq_factor - s.low_freq_factor);
                1.0 / ((1.0 - smooth) / s.factor + smooth)
            }
        })
        .collect()
}
