//! The gated MLP's activation, `silu(gate) * up`, in one pass forward and one pass backward.

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use super::{dispatch, slice, storage, tensor, with_data, Float};

pub fn swiglu(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    gate.contiguous()?.apply_op2(&up.contiguous()?, SwiGlu)
}

struct SwiGlu;

const BLOCK: usize = 16384;

/// `sigmoid(g)` of a block, through the vectorised exp.
fn sigmoids<T: Float>(g: &[T], s: &mut Vec<T>) {
    s.clear();
    s.extend(g.iter().map(|&v| -v));
    T::exp_scale(s, T::zero(), T::one());
    for v in s.iter_mut() {
        *v = T::one() / (T::one() + *v);
    }
}

pub fn forward<T: Float>(g: &[T], u: &[T]) -> Vec<T> {
    let mut y = vec![T::zero(); g.len()];
    y.par_chunks_mut(BLOCK).zip(g.par_chunks(BLOCK).zip(u.par_chunks(BLOCK))).for_each(|(y, (g, u))| {
        let mut s = Vec::with_capacity(g.len());
        sigmoids(g, &mut s);
        for (((o, &gv), &uv), &sv) in y.iter_mut().zip(g).zip(u).zip(&s) {
            *o = gv * sv * uv;
        }
    });
    y
}

/// d/dgate = dy * up * s * (1 + gate * (1 - s)), d/dup = dy * gate * s, with s = sigmoid(gate).
pub fn backward<T: Float>(g: &[T], u: &[T], dy: &[T]) -> (Vec<T>, Vec<T>) {
    let n = g.len();
    let mut dg = vec![T::zero(); n];
    let mut du = vec![T::zero(); n];
    dg.par_chunks_mut(BLOCK)
        .zip(du.par_chunks_mut(BLOCK))
        .zip(g.par_chunks(BLOCK).zip(u.par_chunks(BLOCK)).zip(dy.par_chunks(BLOCK)))
        .for_each(|((dg, du), ((g, u), dy))| {
            let mut s = Vec::with_capacity(g.len());
            sigmoids(g, &mut s);
            for i in 0..g.len() {
                let silu = g[i] * s[i];
                dg[i] = dy[i] * u[i] * s[i] * (T::one() + g[i] * (T::one() - s[i]));
                du[i] = dy[i] * silu;
            }
        });
    (dg, du)
}

fn fwd_storage<T: Float>(s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
    if l1.shape() != l2.shape() {
        bail!("swiglu: gate {:?} and up {:?} differ in shape", l1.shape(), l2.shape());
    }
    let g = slice::<T>(s1, l1, "swiglu gate")?;
    let u = slice::<T>(s2, l2, "swiglu up")?;
    Ok((storage(forward(g, u)), l1.shape().clone()))
}

fn bwd_tensors<T: Float>(gate: &Tensor, up: &Tensor, dy: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
    let (dg, du) = with_data::<T, _>(gate, |g| {
        with_data::<T, _>(up, |u| with_data::<T, _>(dy, |dy| backward(g, u, dy)))
    })???;
    let dg = if gate.track_op() { Some(tensor(dg, gate.shape(), gate.device())?) } else { None };
    let du = if up.track_op() { Some(tensor(du, up.shape(), up.device())?) } else { None };
    Ok((dg, du))
}

impl CustomOp2 for SwiGlu {
    fn name(&self) -> &'static str {
        "cppo-swiglu"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        dispatch!(s1.dtype(), "swiglu", fwd_storage(s1, l1, s2, l2))
    }

    fn bwd(&self, gate: &Tensor, up: &Tensor, _res: &Tensor, dy: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        dispatch!(dy.dtype(), "swiglu", bwd_tensors(gate, up, dy))
    }
}
