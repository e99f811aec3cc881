//! RMS norm over the last dimension, `x * rsqrt(mean(x^2) + eps) * w`, as in Hugging Face's
//! `LlamaRMSNorm` (the statistic in the compute dtype, f32 or f64).

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use super::{dispatch, slice, storage, tensor, with_data, Float};

/// Normalises each row of `x (.., d)` and scales it by `w (d)`.
pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f64) -> Result<Tensor> {
    x.contiguous()?.apply_op2(&w.contiguous()?, RmsNorm { eps })
}

struct RmsNorm {
    eps: f64,
}

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
    y.par_chunks_mut(d * br).zip(x.par_chunks(d * br)).for_each(|(yb, xb)| {
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
            let mut dw = if need_dw { vec![T::zero(); d] } else { Vec::new() };
            for ((dxr, xr), gr) in dxb.chunks_exact_mut(d).zip(xb.chunks_exact(d)).zip(gb.chunks_exact(d)) {
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

fn backward<T: Float>(x: &[T], w: &[T], g: &[T], eps: f64, need_dw: bool) -> (Vec<T>, Vec<T>) {
    let mut dx = vec![T::zero(); x.len()];
    let dw = backward_into(x, w, g, eps, &mut dx, false, need_dw);
    (dx, dw)
}

fn fwd_storage<T: Float>(s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout, eps: f64) -> Result<(CpuStorage, Shape)> {
    let x = slice::<T>(s1, l1, "rms_norm x")?;
    let w = slice::<T>(s2, l2, "rms_norm w")?;
    let d = w.len();
    if l2.shape().rank() != 1 || l1.shape().dims().last() != Some(&d) {
        bail!("rms_norm: weight {:?} does not match the last dimension of {:?}", l2.shape(), l1.shape());
    }
    Ok((storage(forward(x, w, eps)), l1.shape().clone()))
}

fn bwd_tensors<T: Float>(x: &Tensor, w: &Tensor, g: &Tensor, eps: f64) -> Result<(Option<Tensor>, Option<Tensor>)> {
    let need_dw = w.track_op();
    let (dx, dw) = with_data::<T, _>(x, |xs| {
        with_data::<T, _>(w, |ws| with_data::<T, _>(g, |gs| backward(xs, ws, gs, eps, need_dw)))
    })???;
    let dx = if x.track_op() { Some(tensor(dx, x.shape(), x.device())?) } else { None };
    let dw = if need_dw { Some(tensor(dw, w.shape(), w.device())?) } else { None };
    Ok((dx, dw))
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "cppo-rms-norm"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        dispatch!(s1.dtype(), "rms_norm", fwd_storage(s1, l1, s2, l2, self.eps))
    }

    fn bwd(&self, x: &Tensor, w: &Tensor, _res: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        dispatch!(g.dtype(), "rms_norm", bwd_tensors(x, w, g, self.eps))
    }
}
