//! Shared by the decoder tests: tiny model families, random weights with some spread, a reference
//! forward pass written with candle's primitive (differentiable) ops, and finite differences.
#![allow(dead_code)]

pub mod reference;

use candle_core::{DType, Device, Tensor, Var};
use cppo_model::decoder::{random_weights, RandomInit};
use cppo_io::{Architecture, ModelConfig, RopeScaling, Weights};
use cppo_model::{CompletionLogProbs, Decoder, WeightGrads};

/// Tiny configurations covering every variant the decoder supports.
pub fn families() -> Vec<(&'static str, ModelConfig)> {
    let llama = ModelConfig::tiny(Architecture::Llama);
    let mut llama_untied_mha = llama.clone();
    llama_untied_mha.tie_word_embeddings = false;
    llama_untied_mha.num_key_value_heads = llama_untied_mha.num_attention_heads;
    llama_untied_mha.rope_scaling = Some(RopeScaling {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 16,
    });
    let qwen2 = ModelConfig::tiny(Architecture::Qwen2);
    let mut qwen3_tied = ModelConfig::tiny(Architecture::Qwen3);
    qwen3_tied.tie_word_embeddings = true;
    qwen3_tied.num_key_value_heads = 1;
    vec![
        ("llama-tied-gqa", llama),
        ("llama-untied-mha-llama3rope", llama_untied_mha),
        ("qwen2-bias", qwen2),
        ("qwen3-qknorm-tied-mqa", qwen3_tied),
    ]
}

/// Weights spread enough that logits, norms and biases all matter.
pub fn weights(cfg: &ModelConfig, seed: u64) -> Weights {
    random_weights(cfg, seed, &RandomInit { std: 0.25, norm_jitter: 0.3, bias_std: 0.2 }).unwrap()
}

pub fn decoder(cfg: &ModelConfig, seed: u64, dtype: DType) -> Decoder {
    Decoder::new_with_dtype(cfg, &weights(cfg, seed), true, &Device::Cpu, dtype).unwrap()
}

/// Deterministic pseudo-random token ids.
pub fn tokens(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % vocab as u64) as u32
        })
        .collect()
}

/// Deterministic values in [-1, 1).
pub fn values(n: usize, seed: u64) -> Vec<f64> {
    tokens(n, 1 << 20, seed).into_iter().map(|t| t as f64 / (1 << 19) as f64 - 1.0).collect()
}

/// The weight gradients of `pg_loss` through the decoder's backward pass: dL/dlogp = mask * A.
pub fn pg_grads(out: &CompletionLogProbs, advantages: &[f64]) -> WeightGrads {
    out.backward.as_ref().expect("a forward pass that kept its gradient").run(&pg_dlogp(&out.mask, advantages)).unwrap()
}

/// dL/dlogp of `pg_loss`: A_j on every real token of row j, shaped and typed like `mask`.
pub fn pg_dlogp(mask: &Tensor, advantages: &[f64]) -> Tensor {
    let k = advantages.len();
    let a = Tensor::from_vec(advantages.to_vec(), (k, 1), &Device::Cpu).unwrap().to_dtype(mask.dtype()).unwrap();
    mask.broadcast_mul(&a).unwrap()
}

/// The policy-gradient-shaped objective: sum_j A_j sum_t logprob[j, t] mask[j, t].
pub fn pg_loss(logprobs: &Tensor, mask: &Tensor, advantages: &[f64]) -> Tensor {
    let k = advantages.len();
    let a = Tensor::from_vec(advantages.to_vec(), (k, 1), &Device::Cpu).unwrap().to_dtype(logprobs.dtype()).unwrap();
    logprobs.mul(mask).unwrap().broadcast_mul(&a).unwrap().sum_all().unwrap()
}

pub fn scalar(t: &Tensor) -> f64 {
    t.to_dtype(DType::F64).unwrap().to_scalar::<f64>().unwrap()
}

pub fn flat(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap()
}

/// Central finite difference of `f` with respect to coordinate `i` of `var`.
pub fn finite_difference(var: &Var, i: usize, h: f64, f: &mut dyn FnMut() -> f64) -> f64 {
    let orig = flat(var.as_tensor());
    let set = |v: f64| {
        let mut w = orig.clone();
        w[i] = v;
        let t = Tensor::from_vec(w, var.shape(), &Device::Cpu).unwrap().to_dtype(var.dtype()).unwrap();
        var.set(&t).unwrap();
    };
    set(orig[i] + h);
    let up = f();
    set(orig[i] - h);
    let down = f();
    let t = Tensor::from_vec(orig.clone(), var.shape(), &Device::Cpu).unwrap().to_dtype(var.dtype()).unwrap();
    var.set(&t).unwrap();
    (up - down) / (2.0 * h)
}

/// Largest absolute difference.
pub fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

/// log_softmax over the last dimension, from primitive differentiable ops.
pub fn log_softmax(logits: &Tensor) -> Tensor {
    candle_nn::ops::log_softmax(logits, candle_core::D::Minus1).unwrap()
}
