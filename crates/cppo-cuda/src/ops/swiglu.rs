//! `silu(gate) * up` and its backward.

use super::{name, F32, FLOAT};
use crate::buf::Buf;
use crate::error::{Error, Result};
use crate::geometry::Tune;
use crate::launch::{launch, Arg, Launcher};

fn same(op: &'static str, a: Buf, b: Buf) -> Result<()> {
    if a.dtype != b.dtype {
        return Err(Error::shape(op, format!("gate is {:?}, up {:?}", a.dtype, b.dtype)));
    }
    Ok(())
}

pub fn forward(l: &mut dyn Launcher, t: &Tune, gate: Buf, up: Buf, y: Buf, n: usize) -> Result<()> {
    const OP: &str = "swiglu_fwd";
    gate.need(OP, "gate", FLOAT, n)?;
    up.need(OP, "up", FLOAT, n)?;
    y.need(OP, "y", FLOAT, n)?;
    same(OP, gate, up)?;
    launch(l, &name(OP, &[gate, y]), t.flat(n), &[gate.into(), up.into(), y.into(), Arg::I64(n as i64)])
}

/// `dgate` and `dup` (one dtype) from `dy` (f32).
#[allow(clippy::too_many_arguments)]
pub fn backward(l: &mut dyn Launcher, t: &Tune, gate: Buf, up: Buf, dy: Buf, dgate: Buf, dup: Buf, n: usize) -> Result<()> {
    const OP: &str = "swiglu_bwd";
    gate.need(OP, "gate", FLOAT, n)?;
    up.need(OP, "up", FLOAT, n)?;
    dy.need(OP, "dy", F32, n)?;
    dgate.need(OP, "dgate", FLOAT, n)?;
    dup.need(OP, "dup", FLOAT, n)?;
    same(OP, gate, up)?;
    same(OP, dgate, dup)?;
    let args = [gate.into(), up.into(), dy.into(), dgate.into(), dup.into(), Arg::I64(n as i64)];
    launch(l, &name(OP, &[gate, dgate]), t.flat(n), &args)
}
