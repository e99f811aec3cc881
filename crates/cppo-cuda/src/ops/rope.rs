//! The rotary embedding of q or k rows, forward or inverse (the backward pass).

use super::{int, name, F32, FLOAT, I32};
use crate::buf::Buf;
use crate::error::{Error, Result};
use crate::geometry::Tune;
use crate::launch::{launch, Arg, Launcher};

/// The cos and sin table on the device: `positions` rows of `half` f32 each, position-major (as
/// cppo-model's `RopeTable::cos32` / `sin32`).
#[derive(Clone, Copy, Debug)]
pub struct Table {
    pub cos: Buf,
    pub sin: Buf,
    pub half: usize,
    pub positions: usize,
}

/// Rotates `rows` rows of `heads` heads of `x` into `y` (which may be `x` when the dtypes agree) by
/// the position of each row, `pos` (i32, on the device; the caller vouches every entry is below
/// `pos_bound`, which is checked against the table).
#[allow(clippy::too_many_arguments)]
pub fn apply(l: &mut dyn Launcher, t: &Tune, table: &Table, x: Buf, y: Buf, pos: Buf, pos_bound: usize, rows: usize, heads: usize, inverse: bool) -> Result<()> {
    const OP: &str = "rope";
    let width = heads * 2 * table.half;
    x.need(OP, "x", FLOAT, rows * width)?;
    y.need(OP, "y", FLOAT, rows * width)?;
    pos.need(OP, "positions", I32, rows)?;
    table.cos.need(OP, "cos", F32, table.positions * table.half)?;
    table.sin.need(OP, "sin", F32, table.positions * table.half)?;
    if pos_bound > table.positions {
        return Err(Error::shape(OP, format!("positions up to {pos_bound}, the table has {}", table.positions)));
    }
    let args = [
        x.into(),
        y.into(),
        pos.into(),
        table.cos.into(),
        table.sin.into(),
        Arg::I32(int(OP, "rows", rows)?),
        Arg::I32(int(OP, "heads", heads)?),
        Arg::I32(int(OP, "half", table.half)?),
        Arg::I32(inverse as i32),
    ];
    launch(l, &name(OP, &[x, y]), t.flat(rows * heads * table.half), &args)
}
