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

impl Architecture {
    /// The `architectures[0]` of a Hugging Face `config.json`.
    pub fn hf_class(self) -> &'static str {
        match self {
            Architecture::Llama => "LlamaForCausalLM",
            Architecture::Qwen2 => "Qwen2ForCausalLM",
            Architecture::Qwen3 => "Qwen3ForCausalLM",
        }
    }

    /// The `model_type` of a Hugging Face `config.json`.
    pub fn model_type(self) -> &'static str {
        match self {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
            Architecture::Qwen3 => "qwen3",
        }
    }

    pub const SUPPORTED: &'static str = "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM";
}

impl ModelConfig {
    /// The name of the first inconsistent field and why, if any: sizes that cannot build a model.
    pub fn inconsistency(&self) -> Option<(&'static str, String)> {
        let positive = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("head_dim", self.head_dim),
            ("max_position_embeddings", self.max_position_embeddings),
        ];
        if let Some((key, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Some((key, "must be positive".into()));
        }
        if self.num_attention_heads % self.num_key_value_heads != 0 {
            return Some((
                "num_key_value_heads",
                format!(
                    "{} does not divide num_attention_heads {}",
                    self.num_key_value_heads, self.num_attention_heads
                ),
            ));
        }
        if self.head_dim % 2 != 0 {
            return Some((
                "head_dim",
                format!("{} is odd; rotary embedding needs pairs", self.head_dim),
            ));
        }
        if self.rms_norm_eps.is_nan() || self.rms_norm_eps <= 0.0 {
            return Some(("rms_norm_eps", "must be positive".into()));
        }
        if self.rope_theta.is_nan() || self.rope_theta <= 0.0 {
            return Some(("rope_theta", "must be positive".into()));
        }
        let outside = |id: &u32| *id as usize >= self.vocab_size;
        if let Some(id) = self.bos_token_id.iter().find(|id| outside(id)) {
            return Some((
                "bos_token_id",
                format!("{id} is outside the vocabulary of {}", self.vocab_size),
            ));
        }
        if let Some(id) = self.eos_token_ids.iter().find(|id| outside(id)) {
            return Some((
                "eos_token_id",
                format!("{id} is outside the vocabulary of {}", self.vocab_size),
            ));
        }
        None
    }
}

/// The inverse frequencies as Hugging Face computes them (in f32), with Llama 3 scaling if configured.
pub fn inverse_frequencies(head_dim: usize, theta: f64, scaling: Option<&RopeScaling>) -> Vec<f32> {
    let half = head_dim / 2;
    let base: Vec<f64> = (0..half)
        .map(|i| 1.0 / theta.powf((2 * i) as f64 / head_dim as f64))
        .map(|f| f as f32 as f64)
        .collect();
    let Some(s) = scaling else {
        return base.iter().map(|&f| f as f32).collect();
    };
    let old = s.original_max_position_embeddings as f64;
    let low_wavelen = old / s.low_freq_factor;
    let high_wavelen = old / s.high_freq_factor;
    base.iter()
        .map(|&f| {
            let wavelen = 2.0 * std::f64::consts::PI / f;
            let scaled = if wavelen > low_wavelen { f / s.factor } else { f };
            let medium = wavelen >= high_wavelen && wavelen <= low_wavelen;
            let out = if medium {
                let smooth = (old / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
                (1.0 - smooth) * scaled / s.factor + smooth * scaled
            } else {
                scaled
            };
            out as f32
        })
        .collect()
}
