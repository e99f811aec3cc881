//! The optimizer step on the device: gradient norm, clipping coefficient, fused AdamW.

use super::{int, F32};
use crate::buf::{Buf, DType};
use crate::error::{Error, Result};
use crate::geometry::Tune;
use crate::launch::{launch, Arg, LaunchConfig, Launcher};

/// f64 partial sums `grad_norm` needs for gradient buffers of these lengths.
pub fn norm_scratch(t: &Tune, lens: &[usize]) -> usize {
    lens.iter().map(|&n| t.flat(n).grid.0 as usize).sum()
}

/// The global norm of the gradient buffers into `stats[0]` and the clipping coefficient
/// (`max_norm / (norm + 1e-6)` above `max_norm`, else 1; `None` or <= 0 disables clipping) into
/// `stats[1]` (f64 both), as cppo-train's `AdamW::step` computes them. Nothing leaves the device.
pub fn grad_norm(l: &mut dyn Launcher, t: &Tune, grads: &[(Buf, usize)], partial: Buf, stats: Buf, max_norm: Option<f64>) -> Result<()> {
    const OP: &str = "grad_norm";
    let lens: Vec<usize> = grads.iter().map(|g| g.1).collect();
    let count = norm_scratch(t, &lens);
    partial.need(OP, "partial sums", &[DType::F64], count)?;
    stats.need(OP, "stats", &[DType::F64], 2)?;
    if count == 0 {
        return Err(Error::shape(OP, "no gradient elements"));
    }
    let mut at = 0;
    for &(g, n) in grads {
        g.need(OP, "gradient", F32, n)?;
        let cfg = t.flat(n);
        let slot = partial.slice(at, cfg.grid.0 as usize)?;
        launch(l, "sumsq_partial", cfg, &[g.into(), Arg::I64(n as i64), slot.into()])?;
        at += cfg.grid.0 as usize;
    }
    let max = max_norm.filter(|&m| m > 0.0).unwrap_or(0.0);
    let args = [partial.into(), Arg::I32(int(OP, "partial sums", count)?), Arg::F64(max), stats.into()];
    launch(l, "grad_norm_finish", LaunchConfig::blocks(1, t.block), &args)
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hyper {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// This update's number, from 1 (bias correction).
    pub step: u64,
}

/// One AdamW update of a flat buffer `p` (f32 master weights) from `g`, with moments `m`, `v`, the
/// clipping coefficient from `stats` (a non-finite norm there leaves everything untouched), and the
/// bf16 copy `p_bf16` rewritten when given. `decay`: whether this buffer takes weight decay (the
/// matrices, not norms and biases).
#[allow(clippy::too_many_arguments)]
pub fn update(l: &mut dyn Launcher, t: &Tune, p: Buf, g: Buf, m: Buf, v: Buf, p_bf16: Option<Buf>, n: usize, h: &Hyper, decay: bool, stats: Buf) -> Result<()> {
    const OP: &str = "adamw";
    for (b, what) in [(p, "weights"), (g, "gradient"), (m, "first moment"), (v, "second moment")] {
        b.need(OP, what, F32, n)?;
    }
    stats.need(OP, "stats", &[DType::F64], 2)?;
    let pb = match p_bf16 {
        Some(b) => {
            b.need(OP, "bf16 weights", &[DType::Bf16], n)?;
            b
        }
        None => Buf::null(DType::Bf16),
    };
    if h.step == 0 {
        return Err(Error::shape(OP, "steps count from 1"));
    }
    // As the CPU: corrections in f64, then every factor rounded to f32.
    let step = h.step.min(i32::MAX as u64) as i32;
    let bc1 = 1.0 - h.beta1.powi(step);
    let bc2 = 1.0 - h.beta2.powi(step);
    let decay = if decay { h.lr * h.weight_decay } else { 0.0 };
    let args = [
        p.into(),
        g.into(),
        m.into(),
        v.into(),
        pb.into(),
        Arg::I64(n as i64),
        Arg::F32(h.lr as f32),
        Arg::F32(h.beta1 as f32),
        Arg::F32(h.beta2 as f32),
        Arg::F32(h.eps as f32),
        Arg::F32(decay as f32),
        Arg::F32(bc1 as f32),
        Arg::F32(bc2.sqrt() as f32),
        stats.into(),
    ];
    launch(l, OP, t.flat(n), &args)
}
