//! The decoder of the Llama family (Llama 2/3, SmolLM2, Qwen2/2.5, Qwen3) with two execution paths over
//! the same weights: a differentiable training path (`train.rs`: log-probs through a hand-differentiated
//! tape, `tape.rs`, whose weight gradients reach candle's autograd through `attach.rs`; plain logits
//! through a graph of the custom ops in `ops`) and a no-autograd generation path over a preallocated
//! KV cache (`infer.rs`).

mod attach;
mod error;
mod infer;
mod random;
mod slices;
mod tape;
mod train;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use candle_core::{DType, Device, Tensor, Var};

pub use error::{DecoderError, Result};
pub use random::{random_weights, RandomInit};
pub use infer::RolloutWeights;
pub use train::CompletionLogProbs;

use cppo_io::config::ModelConfig;
use cppo_kernels::rope::RopeTable;
use cppo_kernels::MatmulPrecision;
use cppo_io::weights::Weights;

/// One weight: a `Var` when trainable, a plain tensor when frozen.
#[derive(Clone, Debug)]
pub(crate) struct Param {
    pub name: String,
    pub t: Tensor,
    pub var: Option<Var>,
}

impl Param {
    /// The current value with no link to the gradient graph (for the inference path).
    pub fn value(&self) -> Tensor {
        self.t.detach()
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Layer {
    pub input_norm: Param,
    pub q: Param,
    pub q_bias: Option<Param>,
    pub k: Param,
    pub k_bias: Option<Param>,
    pub v: Param,
    pub v_bias: Option<Param>,
    pub q_norm: Option<Param>,
    pub k_norm: Option<Param>,
    pub o: Param,
    pub post_norm: Param,
    pub gate: Param,
    pub up: Param,
    pub down: Param,
}

impl Layer {
    fn params(&self) -> Vec<&Param> {
        let mut v = vec![&self.input_norm, &self.q];
        v.extend(self.q_bias.as_ref());
        v.push(&self.k);
        v.extend(self.k_bias.as_ref());
        v.push(&self.v);
        v.extend(self.v_bias.as_ref());
        v.extend(self.q_norm.as_ref());
        v.extend(self.k_norm.as_ref());
        v.extend([&self.o, &self.post_norm, &self.gate, &self.up, &self.down]);
        v
    }
}

/// A Llama-family decoder. Weights are `Var`s when trainable; computation is in `dtype` (f32 by
/// default; f64 for gradient checks).
#[derive(Clone, Debug)]
pub struct Decoder {
    cfg: ModelConfig,
    device: Device,
    dtype: DType,
    trainable: bool,
    pub(crate) embed: Param,
    pub(crate) layers: Vec<Layer>,
    pub(crate) norm: Param,
    /// `None` when the output projection is tied to the embedding.
    pub(crate) lm_head: Option<Param>,
    pub(crate) rope: Arc<RopeTable>,
    /// What `completion_logprobs*` has scored, shared by clones (not by `frozen_copy`).
    scored: Arc<ScoredCompletions>,
    /// How the training path's large products multiply (`with_matmul_precision`).
    matmul: MatmulPrecision,
}

/// A running count of the completions a decoder has scored through `completion_logprobs` and
/// `completion_logprobs_detached` (one forward row each), with an order-independent fingerprint of their
/// token sequences, so a caller can check which completions reached a forward pass without hooks.
/// Clones of a decoder share it; `frozen_copy` starts a fresh one. Two relaxed atomic adds per call.
#[derive(Debug, Default)]
struct ScoredCompletions {
    rows: AtomicU64,
    fingerprint: AtomicU64,
}

/// The fingerprint of one token sequence (FNV-1a over its tokens, then a final mix); the fingerprint
/// of a multiset of sequences is the wrapping sum of theirs.
pub fn sequence_fingerprint(tokens: &[u32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &t in tokens {
        for b in t.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h ^= tokens.len() as u64;
    h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// The Hugging Face name of a tensor of layer `i`.
fn layer_name(i: usize, rest: &str) -> String {
    format!("model.layers.{i}.{rest}")
}

pub const EMBED: &str = "model.embed_tokens.weight";
pub const NORM: &str = "model.norm.weight";
pub const LM_HEAD: &str = "lm_head.weight";

/// Every tensor a configuration needs, with its shape, in the decoder's stable order.
pub fn expected_tensors(cfg: &ModelConfig) -> Vec<(String, Vec<usize>)> {
    let (h, hd) = (cfg.hidden_size, cfg.head_dim);
    let (qw, kw) = (cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd);
    let mut out = vec![(EMBED.to_string(), vec![cfg.vocab_size, h])];
    for i in 0..cfg.num_hidden_layers {
        let mut push = |rest: &str, shape: Vec<usize>| out.push((layer_name(i, rest), shape));
        push("input_layernorm.weight", vec![h]);
        push("self_attn.q_proj.weight", vec![qw, h]);
        if cfg.attention_bias {
            push("self_attn.q_proj.bias", vec![qw]);
        }
        push("self_attn.k_proj.weight", vec![kw, h]);
        if cfg.attention_bias {
            push("self_attn.k_proj.bias", vec![kw]);
        }
        push("self_attn.v_proj.weight", vec![kw, h]);
        if cfg.attention_bias {
            push("self_attn.v_proj.bias", vec![kw]);
        }
        if cfg.qk_norm {
            push("self_attn.q_norm.weight", vec![hd]);
            push("self_attn.k_norm.weight", vec![hd]);
        }
        push("self_attn.o_proj.weight", vec![h, qw]);
        push("post_attention_layernorm.weight", vec![h]);
        push("mlp.gate_proj.weight", vec![cfg.intermediate_size, h]);
        push("mlp.up_proj.weight", vec![cfg.intermediate_size, h]);
        push("mlp.down_proj.weight", vec![h, cfg.intermediate_size]);
    }
    out.push((NORM.to_string(), vec![h]));
    if !cfg.tie_word_embeddings {
        out.push((LM_HEAD.to_string(), vec![cfg.vocab_size, h]));
    }
    out
}

fn check_config(cfg: &ModelConfig) -> Result<()> {
    let bad = |m: String| Err(DecoderError::BadConfig(m));
    if cfg.vocab_size == 0 || cfg.hidden_size == 0 || cfg.intermediate_size == 0 {
        return bad("vocab_size, hidden_size and intermediate_size must be positive".into());
    }
    if cfg.num_attention_heads == 0 || cfg.num_key_value_heads == 0 {
        return bad("num_attention_heads and num_key_value_heads must be positive".into());
    }
    if cfg.num_attention_heads % cfg.num_key_value_heads != 0 {
        return bad(format!(
            "num_attention_heads {} is not a multiple of num_key_value_heads {}",
            cfg.num_attention_heads, cfg.num_key_value_heads
        ));
    }
    if cfg.head_dim == 0 || cfg.head_dim % 2 != 0 {
        return bad(format!("head_dim must be even and positive, got {}", cfg.head_dim));
    }
    if cfg.max_position_embeddings == 0 {
        return bad("max_position_embeddings must be positive".into());
    }
    if cfg.rms_norm_eps.is_nan() || cfg.rms_norm_eps < 0.0 || cfg.rope_theta.is_nan() || cfg.rope_theta <= 0.0 {
        return bad(format!("bad rms_norm_eps {} or rope_theta {}", cfg.rms_norm_eps, cfg.rope_theta));
    }
    Ok(())
}

impl Decoder {
    /// Builds a decoder computing in f32 from `weights` (any float dtype, converted), as `Var`s when
    /// `trainable`.
    pub fn new(cfg: &ModelConfig, weights: &Weights, trainable: bool, device: &Device) -> Result<Decoder> {
        Self::new_with_dtype(cfg, weights, trainable, device, DType::F32)
    }

    /// As `new`, computing in `dtype` (f32 or f64; the inference path needs f32).
    pub fn new_with_dtype(
        cfg: &ModelConfig,
        weights: &Weights,
        trainable: bool,
        device: &Device,
        dtype: DType,
    ) -> Result<Decoder> {
        check_config(cfg)?;
        cppo_kernels::check_float(dtype, "decoder").map_err(DecoderError::from)?;
        let mut params = std::collections::BTreeMap::new();
        for (name, shape) in expected_tensors(cfg) {
            let t = weights.get(&name).ok_or_else(|| DecoderError::MissingTensor { name: name.clone() })?;
            if t.dims() != shape.as_slice() {
                return Err(DecoderError::BadShape { name, expected: shape, got: t.dims().to_vec() });
            }
            // A deep copy, so that training never writes into the caller's tensors.
            let t = t.detach().to_device(device)?.to_dtype(dtype)?;
            let (t, var) = if trainable {
                // `from_tensor` copies a plain tensor into fresh, contiguous storage.
                let var = Var::from_tensor(&t)?;
                (var.as_tensor().clone(), Some(var))
            } else {
                (t.copy()?.contiguous()?, None)
            };
            params.insert(name.clone(), Param { name, t, var });
        }
        let mut take = |name: &str| params.remove(name).expect("every expected tensor was inserted");
        let embed = take(EMBED);
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let mut p = |rest: &str| take(&layer_name(i, rest));
            let input_norm = p("input_layernorm.weight");
            let q = p("self_attn.q_proj.weight");
            let k = p("self_attn.k_proj.weight");
            let v = p("self_attn.v_proj.weight");
            let (q_bias, k_bias, v_bias) = if cfg.attention_bias {
                (Some(p("self_attn.q_proj.bias")), Some(p("self_attn.k_proj.bias")), Some(p("self_attn.v_proj.bias")))
            } else {
                (None, None, None)
            };
            let (q_norm, k_norm) = if cfg.qk_norm {
                (Some(p("self_attn.q_norm.weight")), Some(p("self_attn.k_norm.weight")))
            } else {
                (None, None)
            };
            layers.push(Layer {
                input_norm,
                q,
                q_bias,
                k,
                k_bias,
                v,
                v_bias,
                q_norm,
                k_norm,
                o: p("self_attn.o_proj.weight"),
                post_norm: p("post_attention_layernorm.weight"),
                gate: p("mlp.gate_proj.weight"),
                up: p("mlp.up_proj.weight"),
                down: p("mlp.down_proj.weight"),
            });
        }
        let norm = take(NORM);
        let lm_head = if cfg.tie_word_embeddings { None } else { Some(take(LM_HEAD)) };
        let inv = cppo_io::config::inverse_frequencies(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling.as_ref());
        let rope = RopeTable::new(&inv, cfg.max_position_embeddings)?;
        Ok(Decoder {
            cfg: cfg.clone(),
            device: device.clone(),
            dtype,
            trainable,
            embed,
            layers,
            norm,
            lm_head,
            rope: Arc::new(rope),
            scored: Arc::default(),
            matmul: MatmulPrecision::Full,
        })
    }

    /// A trainable decoder with Hugging Face's default initialisation (normal(0, 0.02) matrices, unit
    /// norms, zero biases), deterministic in `seed`.
    pub fn random(cfg: &ModelConfig, seed: u64, device: &Device) -> Result<Decoder> {
        let w = random_weights(cfg, seed, &RandomInit::default())?;
        Self::new(cfg, &w, true, device)
    }

    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn is_trainable(&self) -> bool {
        self.trainable
    }

    /// The same decoder (sharing its weights) whose log-prob forward and backward passes multiply at
    /// `precision`: `Bf16` is mixed precision as in `torch.autocast`, with the weights, their gradients
    /// and everything but the linear layers' and output projection's products in the decoder's dtype.
    /// Generation (`infer.rs`) and `forward_logits` are unaffected.
    pub fn with_matmul_precision(mut self, precision: MatmulPrecision) -> Self {
        self.matmul = precision;
        self
    }

    pub fn matmul_precision(&self) -> MatmulPrecision {
        self.matmul
    }

    /// Completions scored so far by `completion_logprobs` and `completion_logprobs_detached` of this
    /// decoder and its clones (each completion of each call counts once: one forward row).
    pub fn scored_completion_rows(&self) -> u64 {
        self.scored.rows.load(Ordering::Relaxed)
    }

    /// The wrapping sum of `sequence_fingerprint` over every completion counted by
    /// `scored_completion_rows`: equal to the same sum over the completions a caller meant to score.
    pub fn scored_completion_fingerprint(&self) -> u64 {
        self.scored.fingerprint.load(Ordering::Relaxed)
    }

    pub(crate) fn count_scored(&self, completions: &[&[u32]]) {
        let sum = completions.iter().fold(0u64, |acc, c| acc.wrapping_add(sequence_fingerprint(c)));
        self.scored.rows.fetch_add(completions.len() as u64, Ordering::Relaxed);
        self.scored.fingerprint.fetch_add(sum, Ordering::Relaxed);
    }

    /// Every weight in a fixed order (that of `vars()` and `expected_tensors`).
    pub(crate) fn params(&self) -> Vec<&Param> {
        let mut v = vec![&self.embed];
        for l in &self.layers {
            v.extend(l.params());
        }
        v.push(&self.norm);
        v.extend(self.lm_head.as_ref());
        v
    }

    /// The trainable variables by Hugging Face name, in a stable order (embedding, layers in order,
    /// final norm, untied lm_head); empty when frozen.
    pub fn vars(&self) -> Vec<(String, Var)> {
        self.params().into_iter().filter_map(|p| p.var.clone().map(|v| (p.name.clone(), v))).collect()
    }

    /// A copy of the current values under their Hugging Face names (a tied embedding appears once, as
    /// `model.embed_tokens.weight`).
    pub fn to_weights(&self) -> Result<Weights> {
        let mut w = Weights::default();
        for p in self.params() {
            w.insert(p.name.clone(), p.value().copy()?);
        }
        Ok(w)
    }

    /// A deep copy as plain tensors (no graph, no gradients), e.g. for the reference model.
    pub fn frozen_copy(&self) -> Result<Decoder> {
        let mut d = self.clone();
        let freeze = |p: &mut Param| -> Result<()> {
            p.t = p.value().copy()?;
            p.var = None;
            Ok(())
        };
        freeze(&mut d.embed)?;
        freeze(&mut d.norm)?;
        if let Some(p) = d.lm_head.as_mut() {
            freeze(p)?;
        }
        for l in d.layers.iter_mut() {
            for p in [&mut l.input_norm, &mut l.q, &mut l.k, &mut l.v, &mut l.o, &mut l.post_norm, &mut l.gate, &mut l.up, &mut l.down] {
                freeze(p)?;
            }
            for p in [&mut l.q_bias, &mut l.k_bias, &mut l.v_bias, &mut l.q_norm, &mut l.k_norm].into_iter().flatten() {
                freeze(p)?;
            }
        }
        d.trainable = false;
        d.scored = Arc::default();
        Ok(d)
    }

    /// The output projection's weight (the embedding when tied).
    pub(crate) fn lm_head_weight(&self) -> &Param {
        self.lm_head.as_ref().unwrap_or(&self.embed)
    }

    pub(crate) fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= self.cfg.vocab_size) {
            return Err(DecoderError::TokenOutOfRange { token: t, vocab: self.cfg.vocab_size });
        }
        Ok(())
    }
}
