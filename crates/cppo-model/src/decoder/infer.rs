//! The generation path: no autograd, f32, keys and values in a preallocated `KvCache`. A prefill
//! appends a run of tokens to one row; a decode step appends one token to each of the rows it is
//! given, each at its own position, and computes nothing for the others.

use candle_core::{DType, Tensor};
use rayon::prelude::*;

use super::{Decoder, DecoderError, Result};
use crate::kv_cache::KvCache;
use crate::ops::attention::{head_forward, Keys};
use crate::ops::gemm::{View, ViewMut};
use crate::ops::linear::linear;
use crate::ops::rms_norm::rms_norm;
use crate::ops::rope::rope_rows;
use crate::ops::swiglu::swiglu;
use crate::ops::{to_vec, SendPtr};

/// Where the new tokens go in the cache.
enum Placement<'a> {
    /// All tokens into one row, after its current contents.
    Run { row: usize, start: usize },
    /// One token per row, each after that row's contents.
    Step { rows: &'a [usize] },
}

impl Decoder {
    /// A cache for this model with `rows` rows of up to `max_len` positions.
    pub fn new_cache(&self, rows: usize, max_len: usize) -> Result<KvCache> {
        KvCache::new(self.config(), rows, max_len)
    }

    /// Copies a prefilled row into other rows (see `KvCache::copy_row`).
    pub fn copy_row(&self, cache: &mut KvCache, from_row: usize, to_rows: &[usize]) -> Result<()> {
        cache.copy_row(from_row, to_rows)
    }

    /// Appends `tokens` to row `row` of the cache (normally empty: a prompt) and returns the logits
    /// `(vocab)` that follow the last of them.
    pub fn prefill(&self, tokens: &[u32], cache: &mut KvCache, row: usize) -> Result<Tensor> {
        if tokens.is_empty() {
            return Err(DecoderError::BadInput("prefill: no tokens".into()));
        }
        let start = cache.len(row)?;
        let hidden = self.run_cached(tokens, Placement::Run { row, start }, cache)?;
        let last = hidden.narrow(0, tokens.len() - 1, 1)?;
        Ok(self.head_logits(&last)?.squeeze(0)?)
    }

    /// Appends `tokens[i]` to row `rows[i]` for every i and returns the next-token logits
    /// `(rows.len(), vocab)`, in the order of `rows`. Rows not listed cost nothing.
    pub fn decode_step(&self, tokens: &[u32], rows: &[usize], cache: &mut KvCache) -> Result<Tensor> {
        if tokens.len() != rows.len() {
            return Err(DecoderError::BadInput(format!("decode_step: {} tokens for {} rows", tokens.len(), rows.len())));
        }
        if rows.is_empty() {
            return Err(DecoderError::BadInput("decode_step: no rows".into()));
        }
        let mut seen = vec![false; cache.rows()];
        for &r in rows {
            cache.check_row(r)?;
            if std::mem::replace(&mut seen[r], true) {
                return Err(DecoderError::BadInput(format!("decode_step: row {r} given twice")));
            }
        }
        let hidden = self.run_cached(tokens, Placement::Step { rows }, cache)?;
        self.head_logits(&hidden)
    }

    fn head_logits(&self, hidden: &Tensor) -> Result<Tensor> {
        let h = rms_norm(hidden, &self.norm.value(), self.config().rms_norm_eps)?;
        Ok(linear(&h, &self.lm_head_weight().value(), None)?)
    }

    /// Runs the layers over the new tokens, writing their keys and values into the cache; returns the
    /// last layer's output `(n, hidden)` before the final norm.
    fn run_cached(&self, tokens: &[u32], place: Placement, cache: &mut KvCache) -> Result<Tensor> {
        if self.dtype() != DType::F32 {
            return Err(DecoderError::BadInput(format!("the inference path computes in f32, this decoder in {:?}", self.dtype())));
        }
        cache.matches(self.config())?;
        self.check_tokens(tokens)?;
        let cfg = self.config();
        let n = tokens.len();
        let (rows, positions): (Vec<usize>, Vec<usize>) = match &place {
            Placement::Run { row, start } => ((0..n).map(|_| *row).collect(), (*start..*start + n).collect()),
            Placement::Step { rows } => (rows.to_vec(), rows.iter().map(|&r| cache.lens()[r]).collect()),
        };
        for (&r, &p) in rows.iter().zip(&positions) {
            if p >= cache.max_len() {
                return Err(DecoderError::Cache(format!("row {r} is full ({} positions)", cache.max_len())));
            }
            if p >= cfg.max_position_embeddings {
                return Err(DecoderError::BadInput(format!(
                    "row {r} reaches position {p}, beyond max_position_embeddings {}",
                    cfg.max_position_embeddings
                )));
            }
        }
        let eps = cfg.rms_norm_eps;
        let (heads, kv_heads, hd) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
        let (qw, kw) = (heads * hd, kv_heads * hd);
        let g = heads / kv_heads;
        let scale = 1.0 / (hd as f32).sqrt();
        let ids = Tensor::from_slice(tokens, n, self.device())?;
        let mut x = self.embed.value().index_select(&ids, 0)?;
        let mut out = vec![0f32; n * qw];
        for (li, l) in self.layers.iter().enumerate() {
            let h = rms_norm(&x, &l.input_norm.value(), eps)?;
            let mut q = linear(&h, &l.q.value(), l.q_bias.as_ref().map(|p| p.value()).as_ref())?;
            let mut k = linear(&h, &l.k.value(), l.k_bias.as_ref().map(|p| p.value()).as_ref())?;
            let v = linear(&h, &l.v.value(), l.v_bias.as_ref().map(|p| p.value()).as_ref())?;
            if let (Some(qn), Some(kn)) = (&l.q_norm, &l.k_norm) {
                q = rms_norm(&q.reshape((n * heads, hd))?, &qn.value(), eps)?.reshape((n, qw))?;
                k = rms_norm(&k.reshape((n * kv_heads, hd))?, &kn.value(), eps)?.reshape((n, kw))?;
            }
            let mut q: Vec<f32> = to_vec(&q)?;
            let mut k: Vec<f32> = to_vec(&k)?;
            let v: Vec<f32> = to_vec(&v)?;
            rope_rows(&mut q, heads, &positions, &self.rope, false);
            rope_rows(&mut k, kv_heads, &positions, &self.rope, false);
            for (i, (&r, &p)) in rows.iter().zip(&positions).enumerate() {
                for kh in 0..kv_heads {
                    let dst = cache.offset(r, kh) + p * hd;
                    let src = i * kw + kh * hd;
                    cache.k[li][dst..dst + hd].copy_from_slice(&k[src..src + hd]);
                    cache.v[li][dst..dst + hd].copy_from_slice(&v[src..src + hd]);
                }
            }
            let (kc, vc) = (SendPtr(cache.k[li].as_mut_ptr()), SendPtr(cache.v[li].as_mut_ptr()));
            let qp = SendPtr(q.as_mut_ptr());
            let op = SendPtr(out.as_mut_ptr());
            let cache_ref = &*cache;
            match &place {
                Placement::Run { row, start } => {
                    // One task per query head; each sees its kv head's keys up to its own position.
                    (0..heads).into_par_iter().for_each_init(Vec::new, |p, head| unsafe {
                        let off = cache_ref.offset(*row, head / g);
                        let keys = Keys { k: kc.get().add(off), v: vc.get().add(off), rs: hd, rows: start + n, causal: Some(*start) };
                        let qv = View::rows(qp.get().add(head * hd) as *const f32, qw);
                        let ov = ViewMut::rows(op.get().add(head * hd), qw);
                        head_forward(n, qv, &[keys], hd, scale, ov, p);
                    });
                }
                Placement::Step { .. } => {
                    // One task per (row, kv head): its g query heads against that row's keys.
                    let pos = &positions;
                    let rws = &rows;
                    (0..n * kv_heads).into_par_iter().for_each_init(Vec::new, |p, t| unsafe {
                        let (i, kh) = (t / kv_heads, t % kv_heads);
                        let off = cache_ref.offset(rws[i], kh);
                        let keys = Keys { k: kc.get().add(off), v: vc.get().add(off), rs: hd, rows: pos[i] + 1, causal: None };
                        let at = i * qw + kh * g * hd;
                        let qv = View::rows(qp.get().add(at) as *const f32, hd);
                        let ov = ViewMut::rows(op.get().add(at), hd);
                        head_forward(g, qv, &[keys], hd, scale, ov, p);
                    });
                }
            }
            let a = Tensor::from_slice(&out, (n, qw), self.device())?;
            x = (x + linear(&a, &l.o.value(), None)?)?;
            let h = rms_norm(&x, &l.post_norm.value(), eps)?;
            let m = swiglu(&linear(&h, &l.gate.value(), None)?, &linear(&h, &l.up.value(), None)?)?;
            x = (x + linear(&m, &l.down.value(), None)?)?;
        }
        for (&r, &p) in rows.iter().zip(&positions) {
            cache.set_len(r, p + 1);
        }
        Ok(x)
    }
}
