//! The CPU backend: buffers are `Vec<T>`, views are slices, and every operation is one of this crate's
//! kernels (AVX2 / AVX-512 / AVX512-BF16 where the CPU has them, `isa`), parallel over rayon's pool.

use std::marker::PhantomData;
use std::ops::Range;

use rayon::prelude::*;

use crate::attention::{self, head_forward, Attention, Keys};
use crate::backend::{AdamWStep, Backend, CacheLayout, CachedQuery, Product, Scored};
use crate::gemm::{View, ViewMut};
use crate::logprob::{self, Gather};
use crate::rope::{rope_rows, RopeTable};
use crate::skinny::{from_bf16, to_bf16};
use crate::{linear, rms_norm, swiglu, Float, Precision, SendPtr};

/// The CPU backend computing in `T`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu<T>(PhantomData<T>);

impl<T> Cpu<T> {
    pub const fn new() -> Self {
        Cpu(PhantomData)
    }
}

/// Rows of a parallel elementwise pass.
const CHUNK: usize = 1 << 14;

impl<T: Float> Backend for Cpu<T> {
    type T = T;
    type Buf = Vec<T>;
    type Half = Vec<u16>;
    type View<'a> = &'a [T];
    type ViewMut<'a> = &'a mut [T];

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn rollout_precision(&self, p: Precision) -> Precision {
        p.for_rollouts()
    }

    fn bf16_copies_pay(&self) -> bool {
        false
    }

    fn zeros(&self, n: usize) -> Vec<T> {
        vec![T::zero(); n]
    }
    fn upload(&self, host: &[T]) -> Vec<T> {
        host.to_vec()
    }
    fn download(&self, x: &[T]) -> Vec<T> {
        x.to_vec()
    }
    fn len(&self, x: &[T]) -> usize {
        x.len()
    }
    fn view<'a>(&self, b: &'a Vec<T>) -> &'a [T] {
        b
    }
    fn view_mut<'a>(&self, b: &'a mut Vec<T>) -> &'a mut [T] {
        b
    }
    fn as_view<'a>(&self, x: &'a &mut [T]) -> &'a [T] {
        x
    }
    fn reborrow<'a>(&self, x: &'a mut &mut [T]) -> &'a mut [T] {
        x
    }
    fn slice<'a>(&self, x: &'a [T], r: Range<usize>) -> &'a [T]
    where
        Self: 'a,
    {
        &x[r]
    }
    fn slice_mut<'a>(&self, x: &'a mut [T], r: Range<usize>) -> &'a mut [T]
    where
        Self: 'a,
    {
        &mut x[r]
    }
    fn copy(&self, src: &[T], dst: &mut [T]) {
        dst.copy_from_slice(src);
    }
    fn duplicate(&self, x: &[T]) -> Vec<T> {
        x.to_vec()
    }
    fn to_half(&self, w: &[T]) -> Vec<u16> {
        let mut h = vec![0u16; w.len()];
        h.par_chunks_mut(1 << 16)
            .zip(w.par_chunks(1 << 16))
            .for_each(|(d, s)| {
                for (d, &v) in d.iter_mut().zip(s) {
                    *d = to_bf16(candle_core::WithDType::to_f64(v) as f32);
                }
            });
        h
    }

    fn widen(&self, h: &Vec<u16>) -> Vec<T> {
        let mut w = vec![T::zero(); h.len()];
        w.par_chunks_mut(1 << 16)
            .zip(h.par_chunks(1 << 16))
            .for_each(|(d, s)| {
                for (d, &v) in d.iter_mut().zip(s) {
                    *d = T::of(f64::from(from_bf16(v)));
                }
            });
        w
    }

    fn embed(&self, table: &[T], width: usize, tokens: &[u32]) -> Vec<T> {
        let mut out = Vec::with_capacity(tokens.len() * width);
        for &t in tokens {
            out.extend_from_slice(&table[t as usize * width..(t as usize + 1) * width]);
        }
        out
    }
    fn embed_backward(&self, dtable: &mut [T], width: usize, tokens: &[u32], dx: &[T]) {
        for (r, &t) in tokens.iter().enumerate() {
            let t = t as usize;
            for (a, &b) in dtable[t * width..(t + 1) * width]
                .iter_mut()
                .zip(&dx[r * width..(r + 1) * width])
            {
                *a += b;
            }
        }
    }

    fn rms_norm(&self, x: &[T], w: &[T], eps: f64) -> Vec<T> {
        rms_norm::forward(x, w, eps)
    }
    fn rms_norm_backward(
        &self,
        x: &[T],
        w: &[T],
        dy: &[T],
        eps: f64,
        dx: &mut [T],
        accumulate: bool,
    ) -> Vec<T> {
        rms_norm::backward_into(x, w, dy, eps, dx, accumulate, true)
    }

    fn linear(
        &self,
        x: &[T],
        w: &[T],
        bias: Option<&[T]>,
        din: usize,
        dout: usize,
        y: &mut [T],
        add: bool,
        p: Precision,
    ) {
        if let Some(b) = bias {
            for row in y.chunks_exact_mut(dout) {
                if add {
                    row.iter_mut().zip(b).for_each(|(o, &v)| *o += v);
                } else {
                    row.copy_from_slice(b);
                }
            }
        }
        linear::accumulate(y, x, w, din, dout, add || bias.is_some(), p);
    }
    fn project(&self, x: &[T], n: usize, din: usize, outs: &mut [Product<'_, '_, Self>]) {
        for o in outs.iter_mut() {
            if let Some(b) = o.bias {
                for row in o.y.chunks_exact_mut(o.dout) {
                    row.copy_from_slice(b);
                }
            }
        }
        let mut rows: Vec<linear::ProjectOut<T>> = outs
            .iter_mut()
            .map(|o| linear::ProjectOut {
                w: o.w,
                half: o.half.map(|h| h.as_slice()),
                n: o.dout,
                add: o.add || o.bias.is_some(),
                y: &mut *o.y,
            })
            .collect();
        T::project(x, n, din, &mut rows);
    }
    fn linear_grad_input(
        &self,
        dx: &mut [T],
        g: &[T],
        w: &[T],
        din: usize,
        dout: usize,
        add: bool,
        p: Precision,
    ) {
        linear::grad_input(dx, g, w, din, dout, add, p);
    }
    fn linear_grad_weight(
        &self,
        g: &[T],
        x: &[T],
        din: usize,
        dout: usize,
        p: Precision,
    ) -> Vec<T> {
        linear::grad_weight(g, x, din, dout, p)
    }
    fn linear_grad_bias(&self, g: &[T], dout: usize) -> Vec<T> {
        linear::grad_bias(g, dout)
    }

    fn attention(&self, a: &Attention, q: &[T], k: &[T], v: &[T]) -> Vec<T> {
        attention::forward(a, q, k, v)
    }
    fn attention_backward(
        &self,
        a: &Attention,
        q: &[T],
        k: &[T],
        v: &[T],
        dout: &[T],
    ) -> (Vec<T>, Vec<T>, Vec<T>) {
        attention::backward(a, q, k, v, dout)
    }

    fn swiglu(&self, gate: &[T], up: &[T]) -> Vec<T> {
        swiglu::forward(gate, up)
    }
    fn swiglu_backward(&self, gate: &[T], up: &[T], dy: &[T]) -> (Vec<T>, Vec<T>) {
        swiglu::backward(gate, up, dy)
    }

    fn logprobs(
        &self,
        g: &Gather,
        h: &[T],
        head: &[T],
        vocab: usize,
        width: usize,
        keep: bool,
        p: Precision,
    ) -> Scored<Self> {
        let s = logprob::forward(g, h, head, vocab, width, keep, p);
        Scored {
            out: s.out,
            entropy: s.entropy,
            lse: s.lse,
            logits: s.logits,
        }
    }
    fn logprobs_backward(
        &self,
        g: &Gather,
        kept: Option<Vec<Vec<T>>>,
        lse: &[T],
        h: &[T],
        head: &[T],
        dlogp: &[T],
        vocab: usize,
        width: usize,
        dh: &mut [T],
        dhead: Option<&mut [T]>,
        p: Precision,
    ) {
        logprob::backward_into(
            g,
            kept,
            lse,
            h,
            head,
            dlogp,
            vocab,
            width,
            Some(dh),
            dhead,
            p,
        );
    }

    fn rope(&self, x: &mut [T], heads: usize, positions: &[usize], table: &RopeTable) {
        rope_rows(x, heads, positions, table, false);
    }
    fn cache_write(
        &self,
        cache_k: &mut [T],
        cache_v: &mut [T],
        l: &CacheLayout,
        k: &[T],
        v: &[T],
        slots: &[(usize, usize)],
    ) {
        let (hd, kw) = (l.head_dim, l.kv_heads * l.head_dim);
        for (i, &(row, pos)) in slots.iter().enumerate() {
            for kh in 0..l.kv_heads {
                let dst = l.offset(row, kh) + pos * hd;
                let src = i * kw + kh * hd;
                cache_k[dst..dst + hd].copy_from_slice(&k[src..src + hd]);
                cache_v[dst..dst + hd].copy_from_slice(&v[src..src + hd]);
            }
        }
    }
    fn cache_copy_row(
        &self,
        cache: &mut [T],
        l: &CacheLayout,
        from: usize,
        len: usize,
        to: &[usize],
    ) {
        let n = len * l.head_dim;
        for &t in to.iter().filter(|&&t| t != from) {
            for kh in 0..l.kv_heads {
                let src = l.offset(from, kh);
                cache.copy_within(src..src + n, l.offset(t, kh));
            }
        }
    }
    fn cached_attention(
        &self,
        q: &[T],
        cache_k: &[T],
        cache_v: &[T],
        l: &CacheLayout,
        heads: usize,
        queries: &[CachedQuery],
        out: &mut [T],
    ) {
        let hd = l.head_dim;
        // Query head h reads kv head h / g: heads must be a whole multiple of the kv heads.
        assert!(l.kv_heads > 0 && heads % l.kv_heads == 0, "cached_attention: {heads} heads over {} kv heads", l.kv_heads);
        let (qw, g) = (heads * hd, heads / l.kv_heads);
        let n = queries.len();
        assert!(
            q.len() >= n * qw && out.len() >= n * qw,
            "cached_attention: q or out shorter than {n} rows"
        );
        for c in queries {
            assert!(
                c.visible >= 1
                    && c.visible <= l.max_len
                    && l.offset(c.row, l.kv_heads - 1) + l.max_len * hd
                        <= cache_k.len().min(cache_v.len()),
                "cached_attention: {c:?} outside the cache"
            );
        }
        let scale = T::of(1.0 / (hd as f64).sqrt());
        let (kc, vc) = (
            SendPtr(cache_k.as_ptr() as *mut T),
            SendPtr(cache_v.as_ptr() as *mut T),
        );
        let (qp, op) = (SendPtr(q.as_ptr() as *mut T), SendPtr(out.as_mut_ptr()));
        // A run of queries on one row at consecutive positions (a prefill) goes head by head, each
        // head's queries seeing the keys causally; otherwise (a decode step) row by row.
        let run = n > 1
            && queries.iter().all(|c| c.row == queries[0].row)
            && queries.windows(2).all(|w| w[1].visible == w[0].visible + 1);
        if run {
            let (row, start) = (queries[0].row, queries[0].visible - 1);
            (0..heads)
                .into_par_iter()
                .for_each_init(Vec::new, |p, head| {
                    let off = l.offset(row, head / g);
                    // SAFETY: the asserts above keep the cache row and the q / out rows of this head in
                    // bounds; each task writes only its own head's columns of `out`. They cover kv heads
                    // below `kv_heads`, where `head / g` stays since `heads` is a multiple of `kv_heads`
                    // (asserted above).
                    unsafe {
                        let keys = Keys {
                            k: kc.get().add(off) as *const T,
                            v: vc.get().add(off) as *const T,
                            rs: hd,
                            rows: start + n,
                            causal: Some(start),
                        };
                        let qv = View::rows(qp.get().add(head * hd) as *const T, qw);
                        let ov = ViewMut::rows(op.get().add(head * hd), qw);
                        head_forward(n, qv, &[keys], hd, scale, ov, p);
                    }
                });
            return;
        }
        let kvh = l.kv_heads;
        (0..n * kvh)
            .into_par_iter()
            .for_each_init(Vec::new, |p, t| {
                let (i, kh) = (t / kvh, t % kvh);
                let c = queries[i];
                let off = l.offset(c.row, kh);
                let at = i * qw + kh * g * hd;
                // SAFETY: as above; each task writes the g query heads of one (row, kv head).
                unsafe {
                    let (qa, oa) = (qp.get().add(at) as *const T, op.get().add(at));
                    let (k, v) = (kc.get().add(off) as *const T, vc.get().add(off) as *const T);
                    if !T::few_queries(g, hd, qa, k, v, hd, c.visible, scale, oa, p) {
                        let keys = Keys {
                            k,
                            v,
                            rs: hd,
                            rows: c.visible,
                            causal: None,
                        };
                        head_forward(
                            g,
                            View::rows(qa, hd),
                            &[keys],
                            hd,
                            scale,
                            ViewMut::rows(oa, hd),
                            p,
                        );
                    }
                }
            });
    }

    fn adamw(&self, w: &mut [T], g: &[T], m: &mut [T], v: &mut [T], s: &AdamWStep) {
        assert!(
            w.len() == g.len() && m.len() == g.len() && v.len() == g.len(),
            "adamw: sizes differ"
        );
        // In the element type, in this order (the update the trainer has always taken).
        let lr = T::of(s.lr);
        let bc1 = T::of(1.0 - s.beta1.powi(s.step as i32));
        let bc2_sqrt = T::of((1.0 - s.beta2.powi(s.step as i32)).sqrt());
        let (b1, b2, eps) = (T::of(s.beta1), T::of(s.beta2), T::of(s.eps));
        let decay = T::of(s.lr * s.weight_decay);
        let clip = T::of(s.grad_scale);
        let step = lr / bc1;
        w.par_chunks_mut(CHUNK)
            .zip(m.par_chunks_mut(CHUNK))
            .zip(v.par_chunks_mut(CHUNK))
            .zip(g.par_chunks(CHUNK))
            .for_each(|(((p, m), v), g)| {
                for j in 0..p.len() {
                    let g = g[j] * clip;
                    m[j] = b1 * m[j] + (T::one() - b1) * g;
                    v[j] = b2 * v[j] + (T::one() - b2) * g * g;
                    let denom = v[j].sqrt() / bc2_sqrt + eps;
                    p[j] = p[j] * (T::one() - decay) - step * m[j] / denom;
                }
            });
    }
    fn sum_squares(&self, x: &[T]) -> f64 {
        x.par_chunks(CHUNK)
            .map(|c| {
                c.iter()
                    .map(|&v| candle_core::WithDType::to_f64(v).powi(2))
                    .sum::<f64>()
            })
            .sum()
    }
    fn add_into(&self, dst: &mut [T], src: &[T]) {
        dst.par_chunks_mut(CHUNK)
            .zip(src.par_chunks(CHUNK))
            .for_each(|(d, s)| d.iter_mut().zip(s).for_each(|(d, &s)| *d += s));
    }
}
