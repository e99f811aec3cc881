//! RMS norm forward and backward (the weight gradient through per-block partial rows and a column sum).

use super::{int, name, F32, FLOAT};
use crate::buf::Buf;
use crate::error::{Error, Result};
use crate::geometry::Tune;
use crate::launch::{launch, Arg, Launcher};

/// `y = x * rsqrt(mean(x^2) + eps) * w` for `rows` rows of `d`; x f32 or bf16, w f32.
#[allow(clippy::too_many_arguments)]
pub fn forward(l: &mut dyn Launcher, t: &Tune, x: Buf, w: Buf, y: Buf, rows: usize, d: usize, eps: f32) -> Result<()> {
    const OP: &str = "rms_norm_fwd";
    x.need(OP, "x", FLOAT, rows * d)?;
    w.need(OP, "w", F32, d)?;
    y.need(OP, "y", FLOAT, rows * d)?;
    let args = [x.into(), w.into(), y.into(), Arg::I32(int(OP, "rows", rows)?), Arg::I32(int(OP, "d", d)?), Arg::F32(eps)];
    launch(l, &name(OP, &[x, y]), t.rows(rows, d), &args)
}

/// f32 elements of scratch `backward` needs for the weight gradient.
pub fn backward_scratch(t: &Tune, rows: usize, d: usize) -> usize {
    t.rows(rows, d).grid.0 as usize * d
}

/// Where the backward pass's gradients go.
pub struct Grads {
    /// dx (f32), overwritten or added to (`accumulate_dx`: a residual stream's gradient).
    pub dx: Buf,
    pub accumulate_dx: bool,
    /// dw (f32, `d`), overwritten or added to (`accumulate_dw`: across micro-batches), with its
    /// scratch of `backward_scratch` elements; `None` when the weight is frozen.
    pub dw: Option<(Buf, Buf)>,
    pub accumulate_dw: bool,
}

/// The gradients of `forward` given `g = dL/dy` (f32).
#[allow(clippy::too_many_arguments)]
pub fn backward(l: &mut dyn Launcher, t: &Tune, x: Buf, w: Buf, g: Buf, out: &Grads, rows: usize, d: usize, eps: f32) -> Result<()> {
    const OP: &str = "rms_norm_bwd";
    x.need(OP, "x", FLOAT, rows * d)?;
    w.need(OP, "w", F32, d)?;
    g.need(OP, "g", F32, rows * d)?;
    out.dx.need(OP, "dx", F32, rows * d)?;
    let cfg = t.rows(rows, d);
    let partial = match out.dw {
        Some((dw, scratch)) => {
            dw.need(OP, "dw", F32, d)?;
            scratch.need(OP, "dw scratch", F32, backward_scratch(t, rows, d))?;
            scratch
        }
        None => Buf::null(crate::buf::DType::F32),
    };
    if rows == 0 {
        return Err(Error::shape(OP, "no rows"));
    }
    let (ri, di) = (int(OP, "rows", rows)?, int(OP, "d", d)?);
    let args = [x.into(), w.into(), g.into(), out.dx.into(), partial.into(), Arg::I32(ri), Arg::I32(di), Arg::F32(eps), Arg::I32(out.accumulate_dx as i32)];
    launch(l, &name(OP, &[x]), cfg, &args)?;
    if let Some((dw, scratch)) = out.dw {
        super::rows::sum_rows(l, t, scratch, dw, cfg.grid.0 as usize, d, out.accumulate_dw)?;
    }
    Ok(())
}
