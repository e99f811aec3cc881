//! Casts, fills, adds and bias broadcasts over flat buffers.

use super::{int, name, F32, FLOAT};
use crate::buf::Buf;
use crate::error::{Error, Result};
use crate::geometry::Tune;
use crate::launch::{launch, Arg, Launcher};

/// `y = x` converted (f32 to bf16 rounds to nearest even), over `n` elements.
pub fn cast(l: &mut dyn Launcher, t: &Tune, x: Buf, y: Buf, n: usize) -> Result<()> {
    x.need("cast", "x", FLOAT, n)?;
    y.need("cast", "y", FLOAT, n)?;
    if x.dtype == y.dtype {
        return Err(Error::shape("cast", format!("both buffers are {:?}", x.dtype)));
    }
    launch(l, &name("cast", &[x, y]), t.flat(n), &[x.into(), y.into(), Arg::I64(n as i64)])
}

pub fn fill(l: &mut dyn Launcher, t: &Tune, x: Buf, value: f32, n: usize) -> Result<()> {
    x.need("fill", "x", FLOAT, n)?;
    launch(l, &name("fill", &[x]), t.flat(n), &[x.into(), Arg::F32(value), Arg::I64(n as i64)])
}

/// `y += x` (y f32).
pub fn add(l: &mut dyn Launcher, t: &Tune, y: Buf, x: Buf, n: usize) -> Result<()> {
    y.need("add", "y", F32, n)?;
    x.need("add", "x", FLOAT, n)?;
    launch(l, &name("add", &[y, x]), t.flat(n), &[y.into(), x.into(), Arg::I64(n as i64)])
}

/// `y[r, c] += b[c]` over `rows` rows of `width`.
pub fn add_bias(l: &mut dyn Launcher, t: &Tune, y: Buf, b: Buf, rows: usize, width: usize) -> Result<()> {
    y.need("add_bias", "y", FLOAT, rows * width)?;
    b.need("add_bias", "bias", F32, width)?;
    let args = [y.into(), b.into(), Arg::I32(int("add_bias", "rows", rows)?), Arg::I32(int("add_bias", "width", width)?)];
    launch(l, &name("add_bias", &[y]), t.flat(rows * width), &args)
}
