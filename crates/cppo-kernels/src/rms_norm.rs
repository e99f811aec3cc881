//! RMS norm over the last dimension, `x * rsqrt(mean(x^2) + eps) * w`, as in Hugging Face's
//! `LlamaRMSNorm` (the statistic in the compute dtype, f32 or f64).

use rayon::prelude::*;

use super::Float;

/// Rows per rayon task: enough work per task to amortise scheduling.
fn block_rows(d: usize) -> usize {
    (16384 / d.max(1)).max(1)
}

pub fn forward<T: Float>(x: &[T], w: &[T], eps: f64) -> Vec<T> {
    let d = w.len();
    let mut y = vec![T::zero(); x.len()];
    let eps = T::of(eps);
    let dn = T::of(d as f64);
    let br = block_rows(d);
    y.par_chunks_mut(d * br)
        .zip(x.par_chunks(d * br))
        .for_each(|(yb, xb)| {
            for (yr, xr) in yb.chunks_exact_mut(d).zip(xb.chunks_exact(d)) {
                let ss: T = xr.iter().map(|&v| v * v).sum();
                let r = T::one() / (ss / dn + eps).sqrt();
                for ((o, &xv), &wv) in yr.iter_mut().zip(xr).zip(w) {
                    *o = xv * r * wv;
                }
            }
        });
    y
}

/// With xhat = x * r: dx = r * (g w - xhat * mean(g w xhat)), dw = sum over rows of g xhat.
/// `dx` is overwritten, or added to when `accumulate` (a residual stream's gradient); returns dw, or
/// nothing when `need_dw` is false.
pub fn backward_into<T: Float>(
    x: &[T],
    w: &[T],
    g: &[T],
    eps: f64,
    dx: &mut [T],
    accumulate: bool,
    need_dw: bool,
) -> Vec<T> {
    let d = w.len();
    let eps = T::of(eps);
    let dn = T::of(d as f64);
    let br = block_rows(d);
    let dw = dx
        .par_chunks_mut(d * br)
        .zip(x.par_chunks(d * br).zip(g.par_chunks(d * br)))
        .map(|(dxb, (xb, gb))| {
            let mut dw = if need_dw {
                vec![T::zero(); d]
            } else {
                Vec::new()
            };
            for ((dxr, xr), gr) in dxb
                .chunks_exact_mut(d)
                .zip(xb.chunks_exact(d))
                .zip(gb.chunks_exact(d))
            {
                let ss: T = xr.iter().map(|&v| v * v).sum();
                let r = T::one() / (ss / dn + eps).sqrt();
                let mut dot = T::zero();
                for ((&xv, &gv), &wv) in xr.iter().zip(gr).zip(w) {
                    dot += gv * wv * xv * r;
                }
                let mean = dot / dn;
                for (((o, &xv), &gv), &wv) in dxr.iter_mut().zip(xr).zip(gr).zip(w) {
                    let v = r * (gv * wv - xv * r * mean);
                    if accumulate {
                        *o += v;
                    } else {
                        *o = v;
                    }
                }
                if need_dw {
                    for ((a, &xv), &gv) in dw.iter_mut().zip(xr).zip(gr) {
                        *a += gv * xv * r;
                    }
                }
            }
            dw
        })
        .reduce(Vec::new, |mut a, b| {
            if a.is_empty() {
                return b;
            }
            for (x, y) in a.iter_mut().zip(&b) {
                *x += *y;
            }
            a
        });
    if need_dw && dw.is_empty() {
        vec![T::zero(); d]
    } else {
        dw
    }
}
