//! The architecture hyper-parameters, named as in Hugging Face `config.json` so they read the same.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    /// Llama 2 / 3 and SmolLM2 (`LlamaForCausalLM`).
    Llama,
    /// Qwen2 / Qwen2.5: q/k/v projections carry a bias.
    Qwen2,
    /// Qwen3: RMS norm on each head of q and k before rotary embedding.
    Qwen3,
}

/// Llama 3 style frequency-dependent rotary scaling (`rope_scaling.rope_type == "llama3"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RopeScaling {
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_max_position_embeddings: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    pub architecture: Architecture,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub max_position_embeddings: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub rope_scaling: Option<RopeScaling>,
    pub tie_word_embeddings: bool,
    /// Bias on the q, k and v projections (Qwen2).
    pub attention_bias: bool,
    /// Per-head RMS norm of q and k (Qwen3).
    pub qk_norm: bool,
    pub bos_token_id: Option<u32>,
    pub eos_token_ids: Vec<u32>,
}

impl ModelConfig {
    /// A small random-initialisable configuration for tests that must not depend on downloaded weights.
    pub fn tiny(architecture: Architecture) -> Self {
        ModelConfig {
            architecture,
            vocab_size: 64,
            hidden_size: 32,
            intermediate_size: 48,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            head_dim: 8,
            max_position_embeddings: 256,
            rms_norm_eps: 1e-5,
            rope_theta: 10000.0,
            rope_scaling: None,
            tie_word_embeddings: architecture == Architecture::Llama,
            attention_bias: architecture == Architecture::Qwen2,
            qk_norm: architecture == Architecture::Qwen3,
            bos_token_id: Some(1),
            eos_token_ids: vec![2],
        }
    }
}
