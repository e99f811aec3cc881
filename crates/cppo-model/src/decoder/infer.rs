//! The generation path: no autograd, f32, keys and values in a preallocated `KvCache`. A prefill
//! appends a run of tokens to one row; a decode step appends one token to each of the rows it is
//! given, each at its own position, and computes nothing for the others.

use candle_core::{DType, Tensor};
use rayon::prelude::*;

use super::slices::{index, Locked};
use super::{Decoder, DecoderError, Result};
use crate::kv_cache::KvCache;
use cppo_kernels::attention::{head_forward, Keys};
use cppo_kernels::few_queries;
use cppo_kernels::gemm::{threads, View, ViewMut};
use cppo_kernels::rope::rope_rows;
use cppo_kernels::skinny::{self, Out, Weight};
use cppo_kernels::{linear, rms_norm, swiglu, MatmulPrecision, SendPtr};

/// Where the new tokens go in the cache.
enum Placement<'a> {
    /// All tokens into one row, after its current contents.
    Run { row: usize, start: usize },
    /// One token per row, each after that row's contents.
    Step { rows: &'a [usize] },
}

/// A bf16 copy of the decoder's matrix weights for the generation path: a decode step streams every
/// weight from memory, so half the bytes make a step at a few rows faster, and on CPUs with
/// AVX512-BF16 the products' inputs are rounded to bf16 too, which doubles the products per
/// instruction at many rows (`cppo bench generate`). Sums stay f32, and so do norms, embeddings
/// looked up, attention and the KV cache. A snapshot: weights updated afterwards are not seen, so take
/// one per generation.
pub struct RolloutWeights {
    /// Indexed like `Decoder::params()`; `None` for weights the generation path reads in f32.
    half: Vec<Option<Vec<u16>>>,
}

impl RolloutWeights {
    fn get(&self, i: usize) -> Option<&[u16]> {
        self.half.get(i).and_then(|h| h.as_deref())
    }
}

impl Decoder {
    /// The bf16 snapshot of this decoder's current matrix weights (q, k, v, o, gate, up, down and the
    /// output projection) for `prefill_logits_with` / `decode_step_logits_with`.
    pub fn rollout_weights(&self) -> Result<RolloutWeights> {
        if self.dtype() != DType::F32 {
            return Err(DecoderError::BadInput(format!("the inference path computes in f32, this decoder in {:?}", self.dtype())));
        }
        let params = self.params();
        let ix = index(self);
        let mut matrices = vec![ix.lm_head];
        for l in &ix.layers {
            matrices.extend([l.q, l.k, l.v, l.o, l.gate, l.up, l.down]);
        }
        let mut half: Vec<Option<Vec<u16>>> = vec![None; params.len()];
        for i in matrices {
            let lock = Locked::new(params[i]);
            let w = lock.slice::<f32>()?;
            let mut h = vec![0u16; w.len()];
            h.par_chunks_mut(1 << 16).zip(w.par_chunks(1 << 16)).for_each(|(d, s)| {
                for (d, &v) in d.iter_mut().zip(s) {
                    *d = skinny::to_bf16(v);
                }
            });
            half[i] = Some(h);
        }
        Ok(RolloutWeights { half })
    }

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
        let logits = self.prefill_logits(tokens, cache, row)?;
        Ok(Tensor::from_vec(logits, self.config().vocab_size, self.device())?)
    }

    /// As `prefill`, with the logits as a plain vector.
    pub fn prefill_logits(&self, tokens: &[u32], cache: &mut KvCache, row: usize) -> Result<Vec<f32>> {
        self.prefill_logits_with(tokens, cache, row, None)
    }

    /// As `prefill_logits`, reading the matrix weights from `half` where given.
    pub fn prefill_logits_with(&self, tokens: &[u32], cache: &mut KvCache, row: usize, half: Option<&RolloutWeights>) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            return Err(DecoderError::BadInput("prefill: no tokens".into()));
        }
        let start = cache.len(row)?;
        let h = self.config().hidden_size;
        let n = tokens.len();
        let mut hidden = self.run_cached(tokens, Placement::Run { row, start }, cache, half)?;
        hidden.drain(..(n - 1) * h);
        self.head_logits(&hidden, half)
    }

    /// Appends `tokens[i]` to row `rows[i]` for every i and returns the next-token logits
    /// `(rows.len(), vocab)`, in the order of `rows`. Rows not listed cost nothing.
    pub fn decode_step(&self, tokens: &[u32], rows: &[usize], cache: &mut KvCache) -> Result<Tensor> {
        let logits = self.decode_step_logits(tokens, rows, cache)?;
        Ok(Tensor::from_vec(logits, (rows.len(), self.config().vocab_size), self.device())?)
    }

    /// As `decode_step`, with the logits as a plain row-major vector.
    pub fn decode_step_logits(&self, tokens: &[u32], rows: &[usize], cache: &mut KvCache) -> Result<Vec<f32>> {
        self.decode_step_logits_with(tokens, rows, cache, None)
    }

    /// As `decode_step_logits`, reading the matrix weights from `half` where given.
    pub fn decode_step_logits_with(&self, tokens: &[u32], rows: &[usize], cache: &mut KvCache, half: Option<&RolloutWeights>) -> Result<Vec<f32>> {
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
        let hidden = self.run_cached(tokens, Placement::Step { rows }, cache, half)?;
        self.head_logits(&hidden, half)
    }

    /// Logits `(n, vocab)` of hidden rows `(n, hidden)` before the final norm.
    fn head_logits(&self, hidden: &[f32], half: Option<&RolloutWeights>) -> Result<Vec<f32>> {
        let cfg = self.config();
        let (h, vocab) = (cfg.hidden_size, cfg.vocab_size);
        let n = hidden.len() / h;
        let norm = Locked::new(&self.norm);
        let head = Locked::new(self.lm_head_weight());
        let hn = rms_norm::forward(hidden, norm.slice::<f32>()?, cfg.rms_norm_eps);
        let mut logits = vec![0f32; n * vocab];
        let half = half.and_then(|r| r.get(index(self).lm_head));
        project(&hn, n, h, &mut [Proj { w: head.slice::<f32>()?, half, n: vocab, y: &mut logits, ys: vocab, add: false }]);
        Ok(logits)
    }

    /// Runs the layers over the new tokens, writing their keys and values into the cache; returns the
    /// last layer's output `(n, hidden)` before the final norm.
    fn run_cached(&self, tokens: &[u32], place: Placement, cache: &mut KvCache, half: Option<&RolloutWeights>) -> Result<Vec<f32>> {
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
        let params = self.params();
        let locks: Vec<Locked> = params.iter().map(|p| Locked::new(p)).collect();
        let w: Vec<&[f32]> = locks.iter().map(|l| l.slice::<f32>()).collect::<candle_core::Result<_>>()?;
        let ix = index(self);
        if let Some(r) = half {
            if r.half.len() != params.len() {
                return Err(DecoderError::BadInput("rollout weights of another model".into()));
            }
        }
        let hw = |i: usize| half.and_then(|r| r.get(i));
        let (h, inter, eps) = (cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps);
        let (heads, kv_heads, hd) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
        let (qw, kw) = (heads * hd, kv_heads * hd);
        let g = heads / kv_heads;
        let scale = 1.0 / (hd as f32).sqrt();
        let mut x = Vec::with_capacity(n * h);
        for &t in tokens {
            x.extend_from_slice(&w[ix.embed][t as usize * h..(t as usize + 1) * h]);
        }
        let (mut q, mut k, mut v) = (vec![0f32; n * qw], vec![0f32; n * kw], vec![0f32; n * kw]);
        let (mut gate, mut up) = (vec![0f32; n * inter], vec![0f32; n * inter]);
        let mut out = vec![0f32; n * qw];
        for (li, l) in ix.layers.iter().enumerate() {
            let hn = rms_norm::forward(&x, w[l.input_norm], eps);
            let qb = with_bias(&mut q, l.q_bias.map(|i| w[i]));
            let kb = with_bias(&mut k, l.k_bias.map(|i| w[i]));
            let vb = with_bias(&mut v, l.v_bias.map(|i| w[i]));
            project(
                &hn,
                n,
                h,
                &mut [
                    Proj { w: w[l.q], half: hw(l.q), n: qw, y: &mut q, ys: qw, add: qb },
                    Proj { w: w[l.k], half: hw(l.k), n: kw, y: &mut k, ys: kw, add: kb },
                    Proj { w: w[l.v], half: hw(l.v), n: kw, y: &mut v, ys: kw, add: vb },
                ],
            );
            if let (Some(qn), Some(kn)) = (l.q_norm, l.k_norm) {
                q = rms_norm::forward(&q, w[qn], eps);
                k = rms_norm::forward(&k, w[kn], eps);
            }
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
                        let (qa, oa) = (qp.get().add(at) as *const f32, op.get().add(at));
                        if !few_queries::attend(g, hd, qa, keys.k, keys.v, hd, keys.rows, scale, oa, p) {
                            head_forward(g, View::rows(qa, hd), &[keys], hd, scale, ViewMut::rows(oa, hd), p);
                        }
                    });
                }
            }
            project(&out, n, qw, &mut [Proj { w: w[l.o], half: hw(l.o), n: h, y: &mut x, ys: h, add: true }]);
            let h2 = rms_norm::forward(&x, w[l.post_norm], eps);
            project(
                &h2,
                n,
                h,
                &mut [
                    Proj { w: w[l.gate], half: hw(l.gate), n: inter, y: &mut gate, ys: inter, add: false },
                    Proj { w: w[l.up], half: hw(l.up), n: inter, y: &mut up, ys: inter, add: false },
                ],
            );
            let m = swiglu::forward(&gate, &up);
            project(&m, n, inter, &mut [Proj { w: w[l.down], half: hw(l.down), n: h, y: &mut x, ys: h, add: true }]);
        }
        for (&r, &p) in rows.iter().zip(&positions) {
            cache.set_len(r, p + 1);
        }
        Ok(x)
    }
}

/// Fills every row of `y` with `bias` when there is one; returns whether the product should add to it.
fn with_bias(y: &mut [f32], bias: Option<&[f32]>) -> bool {
    match bias {
        Some(b) => {
            for row in y.chunks_exact_mut(b.len()) {
                row.copy_from_slice(b);
            }
            true
        }
        None => false,
    }
}

/// Up to this many chunks of `skinny::MAX_ROWS` rows (a large decode step, a short prefill), streaming
/// the weights once per chunk beats one general multiply over all the rows.
const SKINNY_CHUNKS: usize = 2;

/// One weight of a projection (its bf16 copy too, when the rollout has one) and where its product goes.
struct Proj<'a> {
    w: &'a [f32],
    half: Option<&'a [u16]>,
    n: usize,
    y: &'a mut [f32],
    ys: usize,
    add: bool,
}

/// `outs[i].y (+)= x (n x din) @ outs[i].w^T`: a decode step's few rows go through the skinny kernel,
/// every weight of one input in a single dispatch (from the bf16 copy where there is one); more rows
/// through the general multiply in f32, unless a bf16 copy is given (then chunks of the skinny kernel). Every `Proj` here is a whole row-major matrix (`ys == n`).
fn project(x: &[f32], n: usize, din: usize, outs: &mut [Proj]) {
    // A bf16 snapshot is read by every product of its generation, however many rows (a long prompt
    // too), so the sampled distribution does not depend on how rows were batched.
    let half = outs.iter().any(|o| o.half.is_some());
    if (half || n <= SKINNY_CHUNKS * skinny::MAX_ROWS) && skinny::available() {
        // Streaming the weights once per chunk of rows beats one general multiply over them all.
        let chunks = n.div_ceil(skinny::MAX_ROWS);
        let per = n.div_ceil(chunks);
        for r0 in (0..n).step_by(per) {
            let m = per.min(n - r0);
            let mut part: Vec<Out> = outs
                .iter_mut()
                .map(|o| Out {
                    w: o.half.map_or(Weight::F32(o.w), Weight::Bf16),
                    n: o.n,
                    y: &mut o.y[r0 * o.ys..],
                    ys: o.ys,
                    add: o.add,
                })
                .collect();
            skinny::matmul_many(&x[r0 * din..], m, din, &mut part, threads());
        }
        return;
    }
    for o in outs.iter_mut() {
        linear::accumulate(o.y, x, o.w, din, o.n, o.add, MatmulPrecision::Full);
    }
}
