//! A second implementation of `Backend` in plain loops over host memory, summing in f64: what each
//! operation means, with nothing of the CPU backend's blocking, threads, vector paths or chunking. The
//! tests run the decoder on both and compare, so the seam is proven by two implementations; a GPU
//! backend is checked against the same ground.
//!
//! Mixed precision follows the CPU backend's rule by default (`new`): products round their operands to
//! bf16 where `Precision::Bf16` is asked for and the machine multiplies in bf16 (AVX512-BF16), and a
//! rollout's bf16 weights meet bf16-rounded inputs where the machine's bf16 dot product would.
//! `rounding_bf16` rounds them on every machine, as a GPU's bf16 products do: the ground a GPU backend
//! is checked against on a CPU without AVX512-BF16, where the CPU backend multiplies in f32.

use std::marker::PhantomData;
use std::ops::Range;

use candle_core::WithDType;

use crate::attention::Attention;
use crate::backend::{AdamWStep, Backend, CacheLayout, CachedQuery, Product, Scored};
use crate::logprob::Gather;
use crate::rope::RopeTable;
use crate::skinny::{dot_bf16_available, from_bf16, to_bf16};
use crate::{Float, Precision};

/// The reference backend computing in `T` (sums in f64).
#[derive(Clone, Copy, Debug, Default)]
pub struct Reference<T> {
    /// Whether bf16 products round their operands on every machine (`rounding_bf16`), or only where
    /// the CPU backend would (`new`).
    always_rounds: bool,
    _t: PhantomData<T>,
}

impl<T> Reference<T> {
    /// bf16 products as the CPU backend computes them on this machine.
    pub const fn new() -> Self {
        Reference { always_rounds: false, _t: PhantomData }
    }

    /// bf16 products that round their operands (f32 elements) on every machine, as cuBLASLt's and
    /// AVX512-BF16's do.
    pub const fn rounding_bf16() -> Self {
        Reference { always_rounds: true, _t: PhantomData }
    }

    /// The value an operand takes in a product at precision `p`: rounded to bf16 where this
    /// reference's machine would round it.
    fn operand(&self, v: T, p: Precision) -> f64
    where
        T: Float,
    {
        let rounds = p.is_bf16() && (self.always_rounds || Precision::bf16_available()) && std::mem::size_of::<T>() == 4;
        if rounds {
            from_bf16(to_bf16(f(v) as f32)) as f64
        } else {
            f(v)
        }
    }

    /// Whether a product from a bf16 weight copy rounds its input too (a bf16 dot product).
    fn rounds_inputs_of_half(&self) -> bool {
        self.always_rounds || dot_bf16_available()
    }
}

fn f<T: Float>(v: T) -> f64 {
    WithDType::to_f64(v)
}

/// `sum_k a(i, k) b(k)` over `k < n`, in f64.
fn dot(n: usize, a: impl Fn(usize) -> f64, b: impl Fn(usize) -> f64) -> f64 {
    (0..n).map(|k| a(k) * b(k)).sum()
}

/// The rotation of one row's heads by position `pos` (`inverse`: the transposed rotation).
fn rotate<T: Float>(row: &mut [T], heads: usize, pos: usize, table: &RopeTable, inverse: bool) {
    let half = table.half;
    let (cos, sin) = T::rope_table(table);
    for h in 0..heads {
        for i in 0..half {
            let (a, b) = (h * 2 * half + i, h * 2 * half + half + i);
            let (x1, x2) = (f(row[a]), f(row[b]));
            let (c, s) = (f(cos[pos * half + i]), f(sin[pos * half + i]));
            let (y1, y2) = if inverse {
                (x1 * c + x2 * s, x2 * c - x1 * s)
            } else {
                (x1 * c - x2 * s, x2 * c + x1 * s)
            };
            row[a] = T::of(y1);
            row[b] = T::of(y2);
        }
    }
}

/// The rows that row `i` of the layout attends to, in order (its span's prefix, then its own span up to
/// itself).
fn visible_rows(a: &Attention, i: usize) -> Vec<usize> {
    let span = a
        .layout
        .spans
        .iter()
        .find(|s| i >= s.start && i < s.start + s.len)
        .expect("every attending row lies in a span");
    let mut rows: Vec<usize> = span
        .prefix
        .map(|(s, l)| (s..s + l).collect())
        .unwrap_or_default();
    rows.extend(span.start..=i);
    rows
}

/// Softmax probabilities (in f64) of query row `i`, head `h`, over `rows`, with roped q and k.
fn probs<T: Float>(
    a: &Attention,
    q: &[T],
    k: &[T],
    i: usize,
    h: usize,
    rows: &[usize],
) -> Vec<f64> {
    let d = a.head_dim;
    let (qw, kw, g) = (a.heads * d, a.kv_heads * d, a.heads / a.kv_heads);
    let scale = 1.0 / (d as f64).sqrt();
    let kh = h / g;
    let s: Vec<f64> = rows
        .iter()
        .map(|&j| {
            dot(
                d,
                |c| f(q[i * qw + h * d + c]),
                |c| f(k[j * kw + kh * d + c]),
            ) * scale
        })
        .collect();
    let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
    let z: f64 = e.iter().sum();
    e.into_iter().map(|x| x / z).collect()
}

fn roped<T: Float>(a: &Attention, x: &[T], heads: usize) -> Vec<T> {
    let w = heads * a.head_dim;
    let mut out = x.to_vec();
    for (r, row) in out.chunks_exact_mut(w).enumerate() {
        rotate(row, heads, a.layout.positions[r], &a.rope, false);
    }
    out
}

impl<T: Float> Backend for Reference<T> {
    type T = T;
    type Buf = Vec<T>;
    type Half = Vec<u16>;
    type View<'a> = &'a [T];
    type ViewMut<'a> = &'a mut [T];

    fn name(&self) -> &'static str {
        if self.always_rounds {
            "reference (bf16 products rounded)"
        } else {
            "reference"
        }
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
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = s;
        }
    }
    fn duplicate(&self, x: &[T]) -> Vec<T> {
        x.to_vec()
    }
    fn to_half(&self, w: &[T]) -> Vec<u16> {
        w.iter().map(|&v| to_bf16(f(v) as f32)).collect()
    }
    fn widen(&self, h: &Vec<u16>) -> Vec<T> {
        h.iter().map(|&v| T::of(f64::from(from_bf16(v)))).collect()
    }

    fn embed(&self, table: &[T], width: usize, tokens: &[u32]) -> Vec<T> {
        tokens
            .iter()
            .flat_map(|&t| {
                table[t as usize * width..(t as usize + 1) * width]
                    .iter()
                    .copied()
            })
            .collect()
    }
    fn embed_backward(&self, dtable: &mut [T], width: usize, tokens: &[u32], dx: &[T]) {
        for (r, &t) in tokens.iter().enumerate() {
            for c in 0..width {
                dtable[t as usize * width + c] += dx[r * width + c];
            }
        }
    }

    fn rms_norm(&self, x: &[T], w: &[T], eps: f64) -> Vec<T> {
        let d = w.len();
        let mut y = vec![T::zero(); x.len()];
        for (yr, xr) in y.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
            let r = 1.0 / (xr.iter().map(|&v| f(v) * f(v)).sum::<f64>() / d as f64 + eps).sqrt();
            for c in 0..d {
                yr[c] = T::of(f(xr[c]) * r * f(w[c]));
            }
        }
        y
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
        let d = w.len();
        let mut dw = vec![0f64; d];
        for ((xr, gr), dr) in x
            .chunks_exact(d)
            .zip(dy.chunks_exact(d))
            .zip(dx.chunks_exact_mut(d))
        {
            let r = 1.0 / (xr.iter().map(|&v| f(v) * f(v)).sum::<f64>() / d as f64 + eps).sqrt();
            let xhat: Vec<f64> = xr.iter().map(|&v| f(v) * r).collect();
            let gw: Vec<f64> = (0..d).map(|c| f(gr[c]) * f(w[c])).collect();
            let mean = dot(d, |c| gw[c], |c| xhat[c]) / d as f64;
            for c in 0..d {
                let g = r * (gw[c] - xhat[c] * mean);
                dr[c] = T::of(if accumulate { f(dr[c]) + g } else { g });
                dw[c] += f(gr[c]) * xhat[c];
            }
        }
        dw.into_iter().map(T::of).collect()
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
        let n = x.len() / din.max(1);
        for i in 0..n {
            for j in 0..dout {
                let s = dot(
                    din,
                    |k| self.operand(x[i * din + k], p),
                    |k| self.operand(w[j * din + k], p),
                ) + bias.map_or(0.0, |b| f(b[j]));
                y[i * dout + j] = T::of(if add { f(y[i * dout + j]) + s } else { s });
            }
        }
    }
    fn project(&self, x: &[T], n: usize, din: usize, outs: &mut [Product<'_, '_, Self>]) {
        for o in outs.iter_mut() {
            let half = o.half;
            let rounded_inputs = half.is_some() && self.rounds_inputs_of_half();
            let wv = |j: usize, k: usize| match half {
                Some(h) => from_bf16(h[j * din + k]) as f64,
                None => f(o.w[j * din + k]),
            };
            for i in 0..n {
                for j in 0..o.dout {
                    let xv = |k: usize| {
                        if rounded_inputs {
                            from_bf16(to_bf16(f(x[i * din + k]) as f32)) as f64
                        } else {
                            f(x[i * din + k])
                        }
                    };
                    let s = dot(din, xv, |k| wv(j, k));
                    let base = match o.bias {
                        Some(b) => f(b[j]),
                        None if o.add => f(o.y[i * o.dout + j]),
                        None => 0.0,
                    };
                    o.y[i * o.dout + j] = T::of(base + s);
                }
            }
        }
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
        let n = g.len() / dout.max(1);
        for i in 0..n {
            for k in 0..din {
                let s = dot(
                    dout,
                    |j| self.operand(g[i * dout + j], p),
                    |j| self.operand(w[j * din + k], p),
                );
                dx[i * din + k] = T::of(if add { f(dx[i * din + k]) + s } else { s });
            }
        }
    }
    fn linear_grad_weight(
        &self,
        g: &[T],
        x: &[T],
        din: usize,
        dout: usize,
        p: Precision,
    ) -> Vec<T> {
        let n = g.len() / dout.max(1);
        let mut dw = vec![T::zero(); dout * din];
        for j in 0..dout {
            for k in 0..din {
                dw[j * din + k] = T::of(dot(
                    n,
                    |i| self.operand(g[i * dout + j], p),
                    |i| self.operand(x[i * din + k], p),
                ));
            }
        }
        dw
    }
    fn linear_grad_bias(&self, g: &[T], dout: usize) -> Vec<T> {
        (0..dout)
            .map(|j| T::of(g.chunks_exact(dout).map(|r| f(r[j])).sum()))
            .collect()
    }

    fn attention(&self, a: &Attention, q: &[T], k: &[T], v: &[T]) -> Vec<T> {
        let d = a.head_dim;
        let (qw, kw, g) = (a.heads * d, a.kv_heads * d, a.heads / a.kv_heads);
        let (q, k) = (roped(a, q, a.heads), roped(a, k, a.kv_heads));
        let mut out = vec![T::zero(); a.layout.rows * qw];
        for span in &a.layout.spans {
            for i in span.start..span.start + span.len {
                let rows = visible_rows(a, i);
                for h in 0..a.heads {
                    let p = probs(a, &q, &k, i, h, &rows);
                    for c in 0..d {
                        out[i * qw + h * d + c] = T::of(dot(
                            rows.len(),
                            |t| p[t],
                            |t| f(v[rows[t] * kw + (h / g) * d + c]),
                        ));
                    }
                }
            }
        }
        out
    }
    fn attention_backward(
        &self,
        a: &Attention,
        q: &[T],
        k: &[T],
        v: &[T],
        dout: &[T],
    ) -> (Vec<T>, Vec<T>, Vec<T>) {
        let d = a.head_dim;
        let (qw, kw, g) = (a.heads * d, a.kv_heads * d, a.heads / a.kv_heads);
        let scale = 1.0 / (d as f64).sqrt();
        let (qr, kr) = (roped(a, q, a.heads), roped(a, k, a.kv_heads));
        let rows_n = a.layout.rows;
        let (mut dq, mut dk, mut dv) = (
            vec![0f64; rows_n * qw],
            vec![0f64; rows_n * kw],
            vec![0f64; rows_n * kw],
        );
        for span in &a.layout.spans {
            for i in span.start..span.start + span.len {
                let rows = visible_rows(a, i);
                for h in 0..a.heads {
                    let kh = h / g;
                    let p = probs(a, &qr, &kr, i, h, &rows);
                    // dP_t = dO . V_t; dS_t = P_t (dP_t - sum_u P_u dP_u).
                    let dp: Vec<f64> = rows
                        .iter()
                        .map(|&j| {
                            dot(
                                d,
                                |c| f(dout[i * qw + h * d + c]),
                                |c| f(v[j * kw + kh * d + c]),
                            )
                        })
                        .collect();
                    let mean = dot(rows.len(), |t| p[t], |t| dp[t]);
                    for (t, &j) in rows.iter().enumerate() {
                        let ds = p[t] * (dp[t] - mean) * scale;
                        for c in 0..d {
                            dq[i * qw + h * d + c] += ds * f(kr[j * kw + kh * d + c]);
                            dk[j * kw + kh * d + c] += ds * f(qr[i * qw + h * d + c]);
                            dv[j * kw + kh * d + c] += p[t] * f(dout[i * qw + h * d + c]);
                        }
                    }
                }
            }
        }
        let back = |x: Vec<f64>, heads: usize| -> Vec<T> {
            let w = heads * d;
            let mut t: Vec<T> = x.into_iter().map(T::of).collect();
            for (r, row) in t.chunks_exact_mut(w).enumerate() {
                rotate(row, heads, a.layout.positions[r], &a.rope, true);
            }
            t
        };
        (
            back(dq, a.heads),
            back(dk, a.kv_heads),
            dv.into_iter().map(T::of).collect(),
        )
    }

    fn swiglu(&self, gate: &[T], up: &[T]) -> Vec<T> {
        gate.iter()
            .zip(up)
            .map(|(&g, &u)| T::of(f(g) / (1.0 + (-f(g)).exp()) * f(u)))
            .collect()
    }
    fn swiglu_backward(&self, gate: &[T], up: &[T], dy: &[T]) -> (Vec<T>, Vec<T>) {
        let mut dg = Vec::with_capacity(gate.len());
        let mut du = Vec::with_capacity(gate.len());
        for ((&g, &u), &d) in gate.iter().zip(up).zip(dy) {
            let (g, u, d) = (f(g), f(u), f(d));
            let s = 1.0 / (1.0 + (-g).exp());
            dg.push(T::of(d * u * s * (1.0 + g * (1.0 - s))));
            du.push(T::of(d * g * s));
        }
        (dg, du)
    }

    fn logprobs(
        &self,
        g: &Gather,
        h: &[T],
        head: &[T],
        vocab: usize,
        width: usize,
        _keep: bool,
        p: Precision,
    ) -> Scored<Self> {
        let mut out = vec![T::zero(); g.out_shape.iter().product()];
        let (mut lse, mut entropy) = (
            Vec::with_capacity(g.rows.len()),
            Vec::with_capacity(g.rows.len()),
        );
        for ((&r, &t), &o) in g.rows.iter().zip(&g.targets).zip(&g.out_index) {
            let z: Vec<f64> = (0..vocab)
                .map(|v| {
                    dot(
                        width,
                        |c| self.operand(h[r * width + c], p),
                        |c| self.operand(head[v * width + c], p),
                    )
                })
                .collect();
            let m = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = z.iter().map(|x| (x - m).exp()).sum();
            let l = m + s.ln();
            let mean: f64 = z.iter().map(|x| (x - l).exp() * x).sum();
            out[o] = T::of(z[t as usize] - l);
            lse.push(T::of(l));
            entropy.push(l - mean);
        }
        Scored {
            out,
            entropy,
            lse,
            logits: None,
        }
    }
    fn logprobs_backward(
        &self,
        g: &Gather,
        _kept: Option<Vec<Vec<T>>>,
        _lse: &[T],
        h: &[T],
        head: &[T],
        dlogp: &[T],
        vocab: usize,
        width: usize,
        dh: &mut [T],
        dhead: Option<&mut [T]>,
        p: Precision,
    ) {
        let mut dw = vec![0f64; vocab * width];
        for ((&r, &t), &o) in g.rows.iter().zip(&g.targets).zip(&g.out_index) {
            let z: Vec<f64> = (0..vocab)
                .map(|v| {
                    dot(
                        width,
                        |c| self.operand(h[r * width + c], p),
                        |c| self.operand(head[v * width + c], p),
                    )
                })
                .collect();
            let m = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let l = m + z.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
            let gi = f(dlogp[o]);
            // d logit_v = g (onehot(t) - softmax_v).
            let dz: Vec<f64> = (0..vocab)
                .map(|v| gi * (f64::from(u8::from(v == t as usize)) - (z[v] - l).exp()))
                .collect();
            for c in 0..width {
                let s = dot(
                    vocab,
                    |v| self.operand(T::of(dz[v]), p),
                    |v| self.operand(head[v * width + c], p),
                );
                dh[r * width + c] = T::of(f(dh[r * width + c]) + s);
                for v in 0..vocab {
                    dw[v * width + c] += self.operand(T::of(dz[v]), p) * self.operand(h[r * width + c], p);
                }
            }
        }
        if let Some(dhead) = dhead {
            for (d, s) in dhead.iter_mut().zip(dw) {
                *d = T::of(s);
            }
        }
    }

    fn rope(&self, x: &mut [T], heads: usize, positions: &[usize], table: &RopeTable) {
        let w = heads * 2 * table.half;
        for (row, &pos) in x.chunks_exact_mut(w).zip(positions) {
            rotate(row, heads, pos, table, false);
        }
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
                for c in 0..hd {
                    cache_k[l.offset(row, kh) + pos * hd + c] = k[i * kw + kh * hd + c];
                    cache_v[l.offset(row, kh) + pos * hd + c] = v[i * kw + kh * hd + c];
                }
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
        for &t in to {
            for kh in 0..l.kv_heads {
                for e in 0..len * l.head_dim {
                    cache[l.offset(t, kh) + e] = cache[l.offset(from, kh) + e];
                }
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
        let (qw, g) = (heads * hd, heads / l.kv_heads);
        let scale = 1.0 / (hd as f64).sqrt();
        for (i, c) in queries.iter().enumerate() {
            for h in 0..heads {
                let base = l.offset(c.row, h / g);
                let s: Vec<f64> = (0..c.visible)
                    .map(|j| {
                        dot(
                            hd,
                            |e| f(q[i * qw + h * hd + e]),
                            |e| f(cache_k[base + j * hd + e]),
                        ) * scale
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for d in 0..hd {
                    out[i * qw + h * hd + d] = T::of(dot(
                        c.visible,
                        |j| e[j] / z,
                        |j| f(cache_v[base + j * hd + d]),
                    ));
                }
            }
        }
    }

    fn adamw(&self, w: &mut [T], g: &[T], m: &mut [T], v: &mut [T], s: &AdamWStep) {
        let bc1 = 1.0 - s.beta1.powi(s.step as i32);
        let bc2 = 1.0 - s.beta2.powi(s.step as i32);
        for j in 0..w.len() {
            let gj = f(g[j]) * s.grad_scale;
            let mj = s.beta1 * f(m[j]) + (1.0 - s.beta1) * gj;
            let vj = s.beta2 * f(v[j]) + (1.0 - s.beta2) * gj * gj;
            let update = (mj / bc1) / ((vj / bc2).sqrt() + s.eps);
            w[j] = T::of(f(w[j]) * (1.0 - s.lr * s.weight_decay) - s.lr * update);
            m[j] = T::of(mj);
            v[j] = T::of(vj);
        }
    }
    fn sum_squares(&self, x: &[T]) -> f64 {
        x.iter().map(|&v| f(v) * f(v)).sum()
    }
    fn add_into(&self, dst: &mut [T], src: &[T]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = T::of(f(*d) + f(s));
        }
    }
}
