//! The Hugging Face forward pass written plainly with candle's primitive ops, every one of which has a
//! backward: an independent check of both the decoder's values and its hand-written gradients.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor, D};
use cppo_io::ModelConfig;

fn rms_norm(x: &Tensor, w: &Tensor, eps: f64) -> Tensor {
    let ms = x.sqr().unwrap().mean_keepdim(D::Minus1).unwrap();
    let r = (ms + eps).unwrap().sqrt().unwrap().recip().unwrap();
    x.broadcast_mul(&r).unwrap().broadcast_mul(w).unwrap()
}

/// HF's inverse frequencies (f32), with the Llama 3 rule if configured.
fn inv_freq(cfg: &ModelConfig) -> Vec<f32> {
    let d = cfg.head_dim;
    (0..d / 2)
        .map(|i| {
            let f = (1.0 / cfg.rope_theta.powf((2 * i) as f64 / d as f64)) as f32 as f64;
            let Some(s) = &cfg.rope_scaling else { return f as f32 };
            let old = s.original_max_position_embeddings as f64;
            let wavelen = 2.0 * std::f64::consts::PI / f;
            if wavelen < old / s.high_freq_factor {
                f as f32
            } else if wavelen > old / s.low_freq_factor {
                (f / s.factor) as f32
            } else {
                let smooth = (old / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
                ((1.0 - smooth) * f / s.factor + smooth * f) as f32
            }
        })
        .collect()
}

/// cos and sin, (t, head_dim), the halves repeated as in HF's `cat((freqs, freqs))`.
fn rope_tables(cfg: &ModelConfig, t: usize, dtype: DType) -> (Tensor, Tensor) {
    let inv = inv_freq(cfg);
    let d = cfg.head_dim;
    let mut c = Vec::with_capacity(t * d);
    let mut s = Vec::with_capacity(t * d);
    for p in 0..t {
        for rep in 0..2 {
            let _ = rep;
            for &f in &inv {
                let a = (p as f32 * f) as f64;
                c.push(a.cos());
                s.push(a.sin());
            }
        }
    }
    let mk = |v: Vec<f64>| Tensor::from_vec(v, (t, d), &Device::Cpu).unwrap().to_dtype(dtype).unwrap();
    (mk(c), mk(s))
}

fn rotate_half(x: &Tensor) -> Tensor {
    let d = x.dim(D::Minus1).unwrap();
    let x1 = x.narrow(D::Minus1, 0, d / 2).unwrap();
    let x2 = x.narrow(D::Minus1, d / 2, d / 2).unwrap();
    Tensor::cat(&[&x2.neg().unwrap(), &x1], D::Minus1).unwrap()
}

fn lin(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Tensor {
    let y = x.broadcast_matmul(&w.t().unwrap()).unwrap();
    match b {
        Some(b) => y.broadcast_add(b).unwrap(),
        None => y,
    }
}

/// Logits (b, t, vocab) for token rows `ids` (b, t), reading weights by Hugging Face name.
pub fn logits(cfg: &ModelConfig, w: &HashMap<String, Tensor>, ids: &[Vec<u32>]) -> Tensor {
    let b = ids.len();
    let t = ids[0].len();
    let get = |n: &str| w.get(n).unwrap_or_else(|| panic!("reference: no tensor {n}"));
    let opt = |n: &str| w.get(n);
    let embed = get("model.embed_tokens.weight");
    let dtype = embed.dtype();
    let (h, kv, hd) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
    let g = h / kv;
    let eps = cfg.rms_norm_eps;
    let flat: Vec<u32> = ids.iter().flatten().copied().collect();
    let idt = Tensor::from_vec(flat, b * t, &Device::Cpu).unwrap();
    let mut x = embed.index_select(&idt, 0).unwrap().reshape((b, t, cfg.hidden_size)).unwrap();
    let (cos, sin) = rope_tables(cfg, t, dtype);
    let mut mask = vec![0f64; t * t];
    for i in 0..t {
        for j in i + 1..t {
            mask[i * t + j] = -1e9;
        }
    }
    let mask = Tensor::from_vec(mask, (t, t), &Device::Cpu).unwrap().to_dtype(dtype).unwrap();
    let rope = |x: &Tensor| x.broadcast_mul(&cos).unwrap().add(&rotate_half(x).broadcast_mul(&sin).unwrap()).unwrap();
    for i in 0..cfg.num_hidden_layers {
        let n = |s: &str| format!("model.layers.{i}.{s}");
        let hs = rms_norm(&x, get(&n("input_layernorm.weight")), eps);
        let q = lin(&hs, get(&n("self_attn.q_proj.weight")), opt(&n("self_attn.q_proj.bias")));
        let k = lin(&hs, get(&n("self_attn.k_proj.weight")), opt(&n("self_attn.k_proj.bias")));
        let v = lin(&hs, get(&n("self_attn.v_proj.weight")), opt(&n("self_attn.v_proj.bias")));
        let mut q = q.reshape((b, t, h, hd)).unwrap();
        let mut k = k.reshape((b, t, kv, hd)).unwrap();
        let v = v.reshape((b, t, kv, hd)).unwrap();
        if cfg.qk_norm {
            q = rms_norm(&q, get(&n("self_attn.q_norm.weight")), eps);
            k = rms_norm(&k, get(&n("self_attn.k_norm.weight")), eps);
        }
        let q = rope(&q.transpose(1, 2).unwrap().contiguous().unwrap());
        let k = rope(&k.transpose(1, 2).unwrap().contiguous().unwrap());
        let v = v.transpose(1, 2).unwrap().contiguous().unwrap();
        let rep = |x: Tensor| {
            x.unsqueeze(2).unwrap().broadcast_as((b, kv, g, t, hd)).unwrap().contiguous().unwrap().reshape((b, h, t, hd)).unwrap()
        };
        let (k, v) = (rep(k), rep(v));
        let scores = (q.matmul(&k.t().unwrap().contiguous().unwrap()).unwrap() / (hd as f64).sqrt()).unwrap();
        let p = candle_nn::ops::softmax(&scores.broadcast_add(&mask).unwrap(), D::Minus1).unwrap();
        let o = p.matmul(&v).unwrap().transpose(1, 2).unwrap().contiguous().unwrap().reshape((b, t, h * hd)).unwrap();
        x = x.add(&lin(&o, get(&n("self_attn.o_proj.weight")), None)).unwrap();
        let hs = rms_norm(&x, get(&n("post_attention_layernorm.weight")), eps);
        let gate = lin(&hs, get(&n("mlp.gate_proj.weight")), None).silu().unwrap();
        let up = lin(&hs, get(&n("mlp.up_proj.weight")), None);
        x = x.add(&lin(&gate.mul(&up).unwrap(), get(&n("mlp.down_proj.weight")), None)).unwrap();
    }
    let x = rms_norm(&x, get("model.norm.weight"), eps);
    let head = if cfg.tie_word_embeddings { embed } else { get("lm_head.weight") };
    lin(&x, head, None)
}
