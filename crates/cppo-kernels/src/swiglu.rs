//! The gated MLP's activation, `silu(gate) * up`, in one pass forward and one pass backward.

use rayon::prelude::*;

use super::Float;

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
    y.par_chunks_mut(BLOCK)
        .zip(g.par_chunks(BLOCK).zip(u.par_chunks(BLOCK)))
        .for_each(|(y, (g, u))| {
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
        .zip(
            g.par_chunks(BLOCK)
                .zip(u.par_chunks(BLOCK))
                .zip(dy.par_chunks(BLOCK)),
        )
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
