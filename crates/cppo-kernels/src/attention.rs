//! Causal self-attention with rotary embedding and grouped-query heads, as one graph node over packed
//! rows.
//!
//! Rows are tokens of several sequences laid end to end (`AttnLayout`). A span of rows attends to
//! itself causally and, optionally, to every row of a shared prefix span: this is how the k
//! completions of one prompt attend to a prompt computed once, while the gradient of the prompt's
//! keys and values collects the contributions of every completion. The backward pass recomputes the
//! attention probabilities per head instead of keeping (tokens x tokens) tensors alive.

use std::sync::Arc;

use candle_core::{bail, Result, Shape};
use rayon::prelude::*;

use super::gemm::{matmul, View, ViewMut};
use super::rope::{rope_rows, RopeTable};
use super::{Float, Precision, SendPtr};

/// A run of consecutive rows that form (the end of) one sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub len: usize,
    /// Rows `(start, len)` of a prefix that every row of this span sees in full, before its own rows.
    pub prefix: Option<(usize, usize)>,
}

/// Which rows attend to which, and the position (for the rotary embedding) of every row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttnLayout {
    pub rows: usize,
    pub spans: Vec<Span>,
    pub positions: Vec<usize>,
}

impl AttnLayout {
    /// `b` independent sequences of `t` tokens each.
    pub fn batch(b: usize, t: usize) -> Self {
        Self::sequences(&vec![t; b])
    }

    /// Independent sequences of the given lengths, end to end.
    pub fn sequences(lens: &[usize]) -> Self {
        let mut spans = Vec::with_capacity(lens.len());
        let mut positions = Vec::with_capacity(lens.iter().sum());
        let mut start = 0;
        for &len in lens {
            if len > 0 {
                spans.push(Span {
                    start,
                    len,
                    prefix: None,
                });
            }
            positions.extend(0..len);
            start += len;
        }
        AttnLayout {
            rows: start,
            spans,
            positions,
        }
    }

    /// A prefix of `prefix_len` rows followed by spans of the given lengths, each continuing the prefix.
    pub fn shared_prefix(prefix_len: usize, lens: &[usize]) -> Self {
        Self::shared_prefixes(&[(prefix_len, lens)])
    }

    /// Groups end to end, each a prefix followed by spans of the given lengths that continue it (and
    /// see no other group's rows): the questions of one update pass.
    pub fn shared_prefixes(groups: &[(usize, &[usize])]) -> Self {
        let mut out = AttnLayout {
            rows: 0,
            spans: Vec::new(),
            positions: Vec::new(),
        };
        for &(prefix_len, lens) in groups {
            let p0 = out.rows;
            out.spans.push(Span {
                start: p0,
                len: prefix_len,
                prefix: None,
            });
            out.positions.extend(0..prefix_len);
            let mut start = p0 + prefix_len;
            for &len in lens {
                if len > 0 {
                    out.spans.push(Span {
                        start,
                        len,
                        prefix: Some((p0, prefix_len)),
                    });
                }
                out.positions.extend(prefix_len..prefix_len + len);
                start += len;
            }
            out.rows = start;
        }
        out
    }

    pub fn validate(&self) -> Result<()> {
        if self.positions.len() != self.rows {
            bail!(
                "attention layout: {} positions for {} rows",
                self.positions.len(),
                self.rows
            );
        }
        for s in &self.spans {
            if s.start + s.len > self.rows {
                bail!("attention layout: span {s:?} runs past {} rows", self.rows);
            }
            if let Some((ps, pl)) = s.prefix {
                if ps + pl > self.rows || (ps < s.start + s.len && s.start < ps + pl) {
                    bail!("attention layout: prefix of span {s:?} is out of range or overlaps it");
                }
            }
        }
        // Each span's rows are written by its own tasks alone: two spans must not share a row.
        let mut by_start: Vec<&Span> = self.spans.iter().filter(|s| s.len > 0).collect();
        by_start.sort_by_key(|s| s.start);
        if let Some(w) = by_start.windows(2).find(|w| w[0].start + w[0].len > w[1].start) {
            bail!("attention layout: spans {:?} and {:?} overlap", w[0], w[1]);
        }
        Ok(())
    }
}

/// The attention op's fixed parameters.
#[derive(Clone)]
pub struct Attention {
    pub layout: Arc<AttnLayout>,
    pub rope: Arc<RopeTable>,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

impl Attention {
    pub fn check(&self, q: &Shape, k: &Shape, v: &Shape) -> Result<()> {
        let rows = self.layout.rows;
        let (qw, kw) = (self.heads * self.head_dim, self.kv_heads * self.head_dim);
        if q.dims() != [rows, qw] || k.dims() != [rows, kw] || v.dims() != [rows, kw] {
            bail!("attention: q {q:?}, k {k:?}, v {v:?} do not match {rows} rows of {qw} / {kw}");
        }
        if self.kv_heads == 0 || self.heads % self.kv_heads != 0 {
            bail!(
                "attention: {} heads are not a multiple of {} kv heads",
                self.heads,
                self.kv_heads
            );
        }
        if self.head_dim != 2 * self.rope.half {
            bail!(
                "attention: head_dim {} does not match the rotary table",
                self.head_dim
            );
        }
        if let Some(&p) = self.layout.positions.iter().max() {
            self.rope.check(p)?;
        }
        self.layout.validate()
    }

    fn tasks(&self) -> Vec<(usize, usize)> {
        (0..self.layout.spans.len())
            .flat_map(|s| (0..self.kv_heads).map(move |h| (s, h)))
            .collect()
    }
}

/// Keys and values seen by a block of queries: `rows` rows, `rs` elements apart.
#[derive(Clone, Copy)]
pub struct Keys<T> {
    pub k: *const T,
    pub v: *const T,
    pub rs: usize,
    pub rows: usize,
    /// `Some(o)`: query i sees rows `..i + 1 + o` (causal); `None`: every row.
    pub causal: Option<usize>,
}

impl<T> Keys<T> {
    #[inline]
    fn visible(&self, i: usize) -> usize {
        match self.causal {
            Some(o) => (i + 1 + o).min(self.rows),
            None => self.rows,
        }
    }
}

/// Query blocks up to this size (a decode step's query heads of one kv head) are multiplied by plain
/// loops: a general matrix multiply costs more to set up than such a product takes.
const SMALL_QUERIES: usize = 8;

/// Fills `p (nq x total)` with the attention probabilities of `nq` queries over the segments.
///
/// # Safety
/// `q` must address an `nq x d` matrix and each segment's `k` a `rows x d` matrix (rows `rs` apart).
unsafe fn probabilities<T: Float>(
    nq: usize,
    q: View<T>,
    segs: &[Keys<T>],
    d: usize,
    scale: T,
    p: &mut Vec<T>,
) -> usize {
    let total: usize = segs.iter().map(|s| s.rows).sum();
    p.clear();
    p.resize(nq * total, T::zero());
    let mut c = 0;
    for s in segs {
        if nq <= SMALL_QUERIES && q.cs == 1 {
            for j in 0..s.rows {
                let kj = std::slice::from_raw_parts(s.k.add(j * s.rs), d);
                for i in 0..nq {
                    let qi = std::slice::from_raw_parts(q.ptr.add(i * q.rs), d);
                    p[i * total + c + j] = T::dot(qi, kj) * scale;
                }
            }
        } else {
            let kt = View {
                ptr: s.k,
                rs: 1,
                cs: s.rs,
            };
            matmul(
                Precision::F32,
                nq,
                s.rows,
                d,
                ViewMut::rows(p.as_mut_ptr().add(c), total),
                false,
                q,
                kt,
                scale,
                false,
            );
        }
        c += s.rows;
    }
    for i in 0..nq {
        let row = &mut p[i * total..(i + 1) * total];
        let mut max = T::neg_infinity();
        let mut c = 0;
        for s in segs {
            for &x in &row[c..c + s.visible(i)] {
                if x > max {
                    max = x;
                }
            }
            c += s.rows;
        }
        let mut sum = T::zero();
        let mut c = 0;
        for s in segs {
            let vis = s.visible(i);
            T::exp_scale(&mut row[c..c + vis], max, T::one());
            sum += row[c..c + vis].iter().fold(T::zero(), |a, &b| a + b);
            for x in &mut row[c + vis..c + s.rows] {
                *x = T::zero();
            }
            c += s.rows;
        }
        let inv = T::one() / sum;
        for x in row.iter_mut() {
            *x *= inv;
        }
    }
    total
}

/// `out (nq x d) = softmax(q k^T * scale) v` over the segments (causally masked where they say so).
///
/// # Safety
/// The views and segments must address valid memory of the given sizes; `out` must not alias them.
pub unsafe fn head_forward<T: Float>(
    nq: usize,
    q: View<T>,
    segs: &[Keys<T>],
    d: usize,
    scale: T,
    out: ViewMut<T>,
    p: &mut Vec<T>,
) {
    let total = probabilities(nq, q, segs, d, scale, p);
    if nq <= SMALL_QUERIES && out.cs == 1 {
        for i in 0..nq {
            std::slice::from_raw_parts_mut(out.ptr.add(i * out.rs), d).fill(T::zero());
        }
        let mut c = 0;
        for s in segs {
            for j in 0..s.rows {
                let vj = std::slice::from_raw_parts(s.v.add(j * s.rs), d);
                for i in 0..nq {
                    let pij = p[i * total + c + j];
                    if pij != T::zero() {
                        T::axpy(
                            pij,
                            vj,
                            std::slice::from_raw_parts_mut(out.ptr.add(i * out.rs), d),
                        );
                    }
                }
            }
            c += s.rows;
        }
        return;
    }
    let mut c = 0;
    for (i, s) in segs.iter().enumerate() {
        let ps = View::rows(p.as_ptr().add(c), total);
        matmul(
            Precision::F32,
            nq,
            d,
            s.rows,
            out,
            i > 0,
            ps,
            View::rows(s.v, s.rs),
            T::one(),
            false,
        );
        c += s.rows;
    }
}

/// Gradients of one head: `dq` is overwritten, `dk[s]` and `dv[s]` accumulate.
///
/// # Safety
/// As `head_forward` for `q`, `segs` and `dout` (`nq x d`); `dk` and `dv` hold one view per
/// segment; `dq` (`nq x d`) and `dk[s]`, `dv[s]` (segment s's `rows x d`) must be writable, alias
/// none of the inputs nor each other, and be written by no other thread meanwhile.
#[allow(clippy::too_many_arguments)]
unsafe fn head_backward<T: Float>(
    nq: usize,
    q: View<T>,
    segs: &[Keys<T>],
    d: usize,
    scale: T,
    dout: View<T>,
    dq: ViewMut<T>,
    dk: &[ViewMut<T>],
    dv: &[ViewMut<T>],
    p: &mut Vec<T>,
    dp: &mut Vec<T>,
) {
    let total = probabilities(nq, q, segs, d, scale, p);
    dp.clear();
    dp.resize(nq * total, T::zero());
    let mut c = 0;
    for s in segs {
        let vt = View {
            ptr: s.v,
            rs: 1,
            cs: s.rs,
        };
        matmul(
            Precision::F32,
            nq,
            s.rows,
            d,
            ViewMut::rows(dp.as_mut_ptr().add(c), total),
            false,
            dout,
            vt,
            T::one(),
            false,
        );
        c += s.rows;
    }
    // dS = P * (dP - sum_j P dP): the softmax backward; masked entries have P = 0.
    for i in 0..nq {
        let pr = &p[i * total..(i + 1) * total];
        let dr = &mut dp[i * total..(i + 1) * total];
        let dot: T = pr.iter().zip(dr.iter()).map(|(&a, &b)| a * b).sum();
        for (g, &pv) in dr.iter_mut().zip(pr) {
            *g = pv * (*g - dot);
        }
    }
    let mut c = 0;
    for (i, s) in segs.iter().enumerate() {
        let ds = View::rows(dp.as_ptr().add(c), total);
        let ps = View::rows(p.as_ptr().add(c), total);
        matmul(
            Precision::F32,
            nq,
            d,
            s.rows,
            dq,
            i > 0,
            ds,
            View::rows(s.k, s.rs),
            scale,
            false,
        );
        matmul(
            Precision::F32,
            s.rows,
            d,
            nq,
            dk[i],
            true,
            ds.t(),
            q,
            scale,
            false,
        );
        matmul(
            Precision::F32,
            s.rows,
            d,
            nq,
            dv[i],
            true,
            ps.t(),
            dout,
            T::one(),
            false,
        );
        c += s.rows;
    }
}

struct Roped<T> {
    q: Vec<T>,
    k: Vec<T>,
}

fn rope_inputs<T: Float>(op: &Attention, q: &[T], k: &[T]) -> Roped<T> {
    let mut qr = q.to_vec();
    let mut kr = k.to_vec();
    rope_rows(&mut qr, op.heads, &op.layout.positions, &op.rope, false);
    rope_rows(&mut kr, op.kv_heads, &op.layout.positions, &op.rope, false);
    Roped { q: qr, k: kr }
}

/// The key segments a span sees, for kv head `kh`.
fn segments<T>(op: &Attention, span: &Span, k: *const T, v: *const T, kh: usize) -> Vec<Keys<T>> {
    let kw = op.kv_heads * op.head_dim;
    // SAFETY: address arithmetic only: `row` is a span's or prefix's start (< layout.rows for a valid
    // layout) and kh < kv_heads, so the offsets stay inside k and v of layout.rows x kw, the shapes
    // `Attention::check` accepts; `forward` / `backward` assert those (`assert_inputs`) first.
    let at = |row: usize| unsafe {
        (
            k.add(row * kw + kh * op.head_dim),
            v.add(row * kw + kh * op.head_dim),
        )
    };
    let mut segs = Vec::with_capacity(2);
    if let Some((ps, pl)) = span.prefix {
        if pl > 0 {
            let (kp, vp) = at(ps);
            segs.push(Keys {
                k: kp,
                v: vp,
                rs: kw,
                rows: pl,
                causal: None,
            });
        }
    }
    let (ko, vo) = at(span.start);
    segs.push(Keys {
        k: ko,
        v: vo,
        rs: kw,
        rows: span.len,
        causal: Some(0),
    });
    segs
}

/// The shapes and layout the raw-pointer walks below rely on, checked before any of them: q is rows x
/// heads * head_dim, k and v rows x kv_heads * head_dim, heads a multiple of kv_heads, the layout valid
/// (spans and prefixes in range, spans disjoint).
fn assert_inputs<T>(op: &Attention, q: &[T], k: &[T], v: &[T]) {
    let rows = op.layout.rows;
    let (qw, kw) = (op.heads * op.head_dim, op.kv_heads * op.head_dim);
    assert!(q.len() == rows * qw && k.len() == rows * kw && v.len() == rows * kw, "attention: q {} / k {} / v {} for {rows} rows of {qw} / {kw}", q.len(), k.len(), v.len());
    assert!(op.kv_heads > 0 && op.heads % op.kv_heads == 0, "attention: {} heads over {} kv heads", op.heads, op.kv_heads);
    if let Err(e) = op.layout.validate() {
        panic!("{e}");
    }
}

pub fn forward<T: Float>(op: &Attention, q: &[T], k: &[T], v: &[T]) -> Vec<T> {
    assert_inputs(op, q, k, v);
    let (h, d) = (op.heads, op.head_dim);
    let g = op.heads / op.kv_heads;
    let qw = h * d;
    let r = rope_inputs(op, q, k);
    let mut out = vec![T::zero(); op.layout.rows * qw];
    let out_ptr = SendPtr(out.as_mut_ptr());
    let (qp, kp, vp) = (
        SendPtr(r.q.as_ptr() as *mut T),
        SendPtr(r.k.as_ptr() as *mut T),
        SendPtr(v.as_ptr() as *mut T),
    );
    let scale = T::of(1.0 / (d as f64).sqrt());
    op.tasks().into_par_iter().for_each(|(si, kh)| {
        let span = &op.layout.spans[si];
        if span.len == 0 {
            return;
        }
        let segs = segments(op, span, kp.get() as *const T, vp.get() as *const T, kh);
        let mut p = Vec::new();
        for head in kh * g..(kh + 1) * g {
            // SAFETY: q and out are layout.rows x qw (checked shapes, as in `segments`; out allocated above),
            // so this head's rows of the span are in bounds; only this task writes them in `out`, as one task
            // owns each (span, kv head) and the span's rows belong to it alone (spans are disjoint:
            // `assert_inputs`).
            unsafe {
                let qv = View::rows((qp.get() as *const T).add(span.start * qw + head * d), qw);
                let ov = ViewMut::rows(out_ptr.get().add(span.start * qw + head * d), qw);
                head_forward(span.len, qv, &segs, d, scale, ov, &mut p);
            }
        }
    });
    out
}

/// Returns (dq, dk, dv) before the rotary embedding.
pub fn backward<T: Float>(
    op: &Attention,
    q: &[T],
    k: &[T],
    v: &[T],
    dout: &[T],
) -> (Vec<T>, Vec<T>, Vec<T>) {
    assert_inputs(op, q, k, v);
    assert_eq!(dout.len(), q.len(), "attention backward: dout of {} for q of {}", dout.len(), q.len());
    let (h, d) = (op.heads, op.head_dim);
    let g = op.heads / op.kv_heads;
    let (qw, kw) = (h * d, op.kv_heads * d);
    let rows = op.layout.rows;
    let r = rope_inputs(op, q, k);
    let mut dq = vec![T::zero(); rows * qw];
    let mut dk = vec![T::zero(); rows * kw];
    let mut dv = vec![T::zero(); rows * kw];
    let (dqp, dkp, dvp) = (
        SendPtr(dq.as_mut_ptr()),
        SendPtr(dk.as_mut_ptr()),
        SendPtr(dv.as_mut_ptr()),
    );
    let (qp, kp, vp) = (
        SendPtr(r.q.as_ptr() as *mut T),
        SendPtr(r.k.as_ptr() as *mut T),
        SendPtr(v.as_ptr() as *mut T),
    );
    let dop = SendPtr(dout.as_ptr() as *mut T);
    let scale = T::of(1.0 / (d as f64).sqrt());
    // Rows of a span (and kv head) belong to one task; a shared prefix's gradient is summed over the
    // spans that see it, so each task keeps its own copy and they are added up afterwards.
    let prefix_grads: Vec<(usize, usize, Vec<T>, Vec<T>)> = op
        .tasks()
        .into_par_iter()
        .filter_map(|(si, kh)| {
            let span = &op.layout.spans[si];
            if span.len == 0 {
                return None;
            }
            let segs = segments(op, span, kp.get() as *const T, vp.get() as *const T, kh);
            let pl = if segs.len() == 2 { segs[0].rows } else { 0 };
            let mut dk_pre = vec![T::zero(); pl * d];
            let mut dv_pre = vec![T::zero(); pl * d];
            // SAFETY: rows span.start.. of dk and dv (rows x kw, allocated above), kv head kh's columns: in
            // bounds for a valid layout, and written only by this task (disjoint spans, as in `forward`).
            let own_k = ViewMut::rows(unsafe { dkp.get().add(span.start * kw + kh * d) }, kw);
            // SAFETY: as for `own_k`, in dv.
            let own_v = ViewMut::rows(unsafe { dvp.get().add(span.start * kw + kh * d) }, kw);
            let (dks, dvs) = if pl > 0 {
                (
                    vec![ViewMut::rows(dk_pre.as_mut_ptr(), d), own_k],
                    vec![ViewMut::rows(dv_pre.as_mut_ptr(), d), own_v],
                )
            } else {
                (vec![own_k], vec![own_v])
            };
            let (mut p, mut dp) = (Vec::new(), Vec::new());
            for head in kh * g..(kh + 1) * g {
                // SAFETY: as in `forward`: this head's rows of the span in q, dout and dq (rows x qw; dq allocated
                // above), written in dq by this task alone; dks / dvs are this task's own views (see above).
                unsafe {
                    let off = span.start * qw + head * d;
                    let qv = View::rows((qp.get() as *const T).add(off), qw);
                    let dov = View::rows((dop.get() as *const T).add(off), qw);
                    let dqv = ViewMut::rows(dqp.get().add(off), qw);
                    head_backward(
                        span.len, qv, &segs, d, scale, dov, dqv, &dks, &dvs, &mut p, &mut dp,
                    );
                }
            }
            let prefix_start = span.prefix.map(|(s, _)| s).unwrap_or(0);
            (pl > 0).then_some((prefix_start, kh, dk_pre, dv_pre))
        })
        .collect();
    for (start, kh, dk_pre, dv_pre) in prefix_grads {
        for (i, (a, b)) in dk_pre
            .chunks_exact(d)
            .zip(dv_pre.chunks_exact(d))
            .enumerate()
        {
            let o = (start + i) * kw + kh * d;
            for j in 0..d {
                dk[o + j] += a[j];
                dv[o + j] += b[j];
            }
        }
    }
    rope_rows(&mut dq, op.heads, &op.layout.positions, &op.rope, true);
    rope_rows(&mut dk, op.kv_heads, &op.layout.positions, &op.rope, true);
    (dq, dk, dv)
}
