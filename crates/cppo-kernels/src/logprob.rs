//! The log-probability of chosen tokens under `softmax(hidden @ lm_head^T)`, computed a chunk of the
//! vocabulary at a time so the (tokens x vocab) logits never need to exist as a whole: the backward
//! pass recomputes each chunk from the saved log-normaliser, unless the training forward kept the
//! chunks because they fit `KEEP_LOGITS_BYTES` (a small batch then skips a third of the output
//! projection's work). The forward pass also yields each predicting row's entropy, as a detached
//! by-product for metrics.

use candle_core::WithDType;
use rayon::prelude::*;

use super::gemm::{matmul, View, ViewMut};
use super::{Float, Precision};

/// What to score: slot `s` is the log-probability of token `targets[s]` given hidden row `rows[s]`,
/// written at flat index `out_index[s]` of an output of shape `out_shape` (zeros elsewhere).
#[derive(Clone, Debug)]
pub struct Gather {
    pub rows: Vec<usize>,
    pub targets: Vec<u32>,
    pub out_index: Vec<usize>,
    pub out_shape: Vec<usize>,
    /// Vocabulary columns per chunk; 0 picks about 2M logits per chunk.
    pub chunk_cols: usize,
}

/// Vocabulary columns per chunk: as asked, or about 2M logits at a time.
fn chunk(asked: usize, slots: usize, vocab: usize) -> usize {
    if asked > 0 {
        return asked.min(vocab.max(1));
    }
    ((1 << 21) / slots.max(1)).max(256).min(vocab.max(1))
}

fn gather_rows<T: Float>(h: &[T], width: usize, rows: &[usize]) -> Vec<T> {
    let mut out = Vec::with_capacity(rows.len() * width);
    for &r in rows {
        out.extend_from_slice(&h[r * width..(r + 1) * width]);
    }
    out
}

/// logits (slots x vc) of vocabulary rows `v0..v0 + vc`.
fn logits_chunk<T: Float>(
    hs: &[T],
    w: &[T],
    width: usize,
    v0: usize,
    vc: usize,
    out: &mut Vec<T>,
    mp: Precision,
) {
    let slots = hs.len() / width;
    out.clear();
    out.resize(slots * vc, T::zero());
    assert!(w.len() >= (v0 + vc) * width, "log-probs: head of {} values for vocabulary rows up to {} of {width}", w.len(), v0 + vc);
    // SAFETY: out is resized to slots x vc here and hs holds slots rows of width (the definition of
    // slots); w holds vocabulary rows v0..v0 + vc of width (asserted above).
    unsafe {
        matmul(
            mp,
            slots,
            vc,
            width,
            ViewMut::rows(out.as_mut_ptr(), vc),
            false,
            View::rows(hs.as_ptr(), width),
            View::rows(w.as_ptr().add(v0 * width), width).t(),
            T::one(),
            true,
        )
    };
}

/// Logits up to this size are kept by a training forward for its backward pass.
pub const KEEP_LOGITS_BYTES: usize = 256 << 20;

/// The scored slots (flat output of `g.out_shape`), and per slot its row's log-normaliser and entropy;
/// the logits chunk by chunk when asked to keep them and they fit.
pub struct Scored<T> {
    pub out: Vec<T>,
    pub lse: Vec<T>,
    pub entropy: Vec<f64>,
    pub logits: Option<Vec<Vec<T>>>,
}

pub fn forward<T: Float>(
    g: &Gather,
    h: &[T],
    w: &[T],
    vocab: usize,
    width: usize,
    keep: bool,
    mp: Precision,
) -> Scored<T> {
    let slots = g.rows.len();
    let hs = gather_rows(h, width, &g.rows);
    let vc = chunk(g.chunk_cols, slots, vocab);
    // Online log-sum-exp: running max m, s = sum exp(z - m), t = sum exp(z - m) z.
    let mut state = vec![(T::neg_infinity(), T::zero(), T::zero(), T::zero()); slots];
    let keep = keep && slots * vocab * std::mem::size_of::<T>() <= KEEP_LOGITS_BYTES;
    let mut kept = Vec::new();
    let mut buf = Vec::new();
    let mut v0 = 0;
    while v0 < vocab {
        let n = vc.min(vocab - v0);
        if keep {
            buf = Vec::new();
        }
        logits_chunk(&hs, w, width, v0, n, &mut buf, mp);
        buf.par_chunks(n)
            .zip(state.par_iter_mut())
            .zip(g.targets.par_iter())
            .for_each(|((z, st), &tgt)| {
                let (m, s, t, zt) = st;
                let cm = z
                    .iter()
                    .fold(T::neg_infinity(), |a, &b| if b > a { b } else { a });
                if cm > *m {
                    let f = (*m - cm).exp();
                    *s *= f;
                    *t *= f;
                    *m = cm;
                }
                let (ds, dt) = T::exp_stats(z, *m);
                *s += ds;
                *t += dt;
                let tgt = tgt as usize;
                if tgt >= v0 && tgt < v0 + n {
                    *zt = z[tgt - v0];
                }
            });
        if keep {
            kept.push(std::mem::take(&mut buf));
        }
        v0 += n;
    }
    let total: usize = g.out_shape.iter().product();
    let mut out = vec![T::zero(); total];
    let mut lse = Vec::with_capacity(slots);
    let mut entropy = Vec::with_capacity(slots);
    for (&(m, s, t, zt), &o) in state.iter().zip(&g.out_index) {
        let l = m + s.ln();
        out[o] = zt - l;
        lse.push(l);
        entropy.push(WithDType::to_f64(l - t / s));
    }
    Scored {
        out,
        lse,
        entropy,
        logits: keep.then_some(kept),
    }
}

/// d logit_v = g * (onehot(target) - softmax_v), folded into `dh (rows x width)` (added to) and `dw
/// (vocab x width)` (overwritten) chunk by chunk; from `kept` chunks of the forward's logits when
/// given, else recomputed.
#[allow(clippy::too_many_arguments)]
pub fn backward_into<T: Float>(
    g: &Gather,
    kept: Option<Vec<Vec<T>>>,
    lse: &[T],
    h: &[T],
    w: &[T],
    gout: &[T],
    vocab: usize,
    width: usize,
    dh: Option<&mut [T]>,
    mut dw: Option<&mut [T]>,
    mp: Precision,
) {
    let slots = g.rows.len();
    assert!(w.len() >= vocab * width, "log-prob backward: head of {} values for {vocab} x {width}", w.len());
    if let Some(dw) = dw.as_deref() {
        assert!(dw.len() >= vocab * width, "log-prob backward: head gradient of {} values for {vocab} x {width}", dw.len());
    }
    let gs: Vec<T> = g.out_index.iter().map(|&o| gout[o]).collect();
    let hs = gather_rows(h, width, &g.rows);
    let mut dhs = vec![T::zero(); if dh.is_some() { slots * width } else { 0 }];
    let vc = chunk(g.chunk_cols, slots, vocab);
    let mut kept = kept.map(|k| k.into_iter());
    let mut buf = Vec::new();
    let mut v0 = 0;
    while v0 < vocab {
        let n = vc.min(vocab - v0);
        match kept
            .as_mut()
            .and_then(|k| k.next())
            .filter(|c| c.len() == slots * n)
        {
            Some(chunk) => buf = chunk,
            None => logits_chunk(&hs, w, width, v0, n, &mut buf, mp),
        }
        buf.par_chunks_mut(n)
            .zip(lse.par_iter().zip(gs.par_iter()))
            .zip(g.targets.par_iter())
            .for_each(|((z, (&l, &gi)), &tgt)| {
                T::exp_scale(z, l, -gi);
                let tgt = tgt as usize;
                if tgt >= v0 && tgt < v0 + n {
                    z[tgt - v0] += gi;
                }
            });
        // SAFETY: dhs (slots x width), buf (slots x n: recomputed, or a kept chunk of that length) and hs
        // are sized here; w's and dw's rows v0..v0 + n exist (w.len(), dw.len() >= vocab * width,
        // asserted above); dw is a `&mut` slice, so it overlaps none of the inputs.
        unsafe {
            if dh.is_some() {
                matmul(
                    mp,
                    slots,
                    width,
                    n,
                    ViewMut::rows(dhs.as_mut_ptr(), width),
                    true,
                    View::rows(buf.as_ptr(), n),
                    View::rows(w.as_ptr().add(v0 * width), width),
                    T::one(),
                    true,
                );
            }
            if let Some(dw) = dw.as_deref_mut() {
                matmul(
                    mp,
                    n,
                    width,
                    slots,
                    ViewMut::rows(dw.as_mut_ptr().add(v0 * width), width),
                    false,
                    View::rows(buf.as_ptr(), n).t(),
                    View::rows(hs.as_ptr(), width),
                    T::one(),
                    true,
                );
            }
        }
        v0 += n;
    }
    if let Some(dh) = dh {
        for (s, &r) in g.rows.iter().enumerate() {
            for (a, &b) in dh[r * width..(r + 1) * width]
                .iter_mut()
                .zip(&dhs[s * width..(s + 1) * width])
            {
                *a += b;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_values as values;

    /// The backward pass gives the same gradients from the forward's kept logits as from recomputed
    /// ones, over several vocabulary chunks (the last one short).
    #[test]
    fn kept_logits_give_the_recomputed_gradients() {
        let (rows, width, vocab) = (7, 12, 50);
        let h = values(rows * width, 1);
        let w = values(vocab * width, 2);
        let g = Gather {
            rows: vec![0, 2, 3, 6, 6],
            targets: vec![4, 49, 0, 17, 33],
            out_index: vec![0, 1, 2, 3, 4],
            out_shape: vec![5],
            chunk_cols: 16,
        };
        let gout = values(5, 3);
        let kept = forward(&g, &h, &w, vocab, width, true, Precision::F32);
        let plain = forward(&g, &h, &w, vocab, width, false, Precision::F32);
        assert_eq!(kept.out, plain.out);
        assert!(plain.logits.is_none());
        let chunks = kept.logits.expect("small logits are kept");
        assert_eq!(chunks.len(), 4);
        let grads = |k: Option<Vec<Vec<f32>>>| {
            let (mut dh, mut dw) = (vec![0f32; rows * width], vec![0f32; vocab * width]);
            backward_into(
                &g,
                k,
                &kept.lse,
                &h,
                &w,
                &gout,
                vocab,
                width,
                Some(&mut dh),
                Some(&mut dw),
                Precision::F32,
            );
            (dh, dw)
        };
        let (a, b) = (grads(Some(chunks)), grads(None));
        assert_eq!(a, b);
        assert!(a.0.iter().any(|&x| x != 0.0) && a.1.iter().any(|&x| x != 0.0));
    }
}
