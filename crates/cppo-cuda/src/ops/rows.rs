//! Row gathers (embedding lookup, the scored rows), their deterministic scatter-add, column sums.

use super::{int, name, F32, FLOAT, I32};
use crate::buf::Buf;
use crate::error::{Error, Result};
use crate::geometry::Tune;
use crate::index::Segments;
use crate::launch::{launch, Arg, Launcher};

/// `out[i] = table[ids[i]]` for `n` ids, rows of `width`. The ids must be below `table_rows` (checked
/// on the host by whoever built them: the kernel does not bound-check).
#[allow(clippy::too_many_arguments)]
pub fn gather(l: &mut dyn Launcher, t: &Tune, table: Buf, table_rows: usize, ids: Buf, out: Buf, n: usize, width: usize) -> Result<()> {
    const OP: &str = "gather_rows";
    table.need(OP, "table", FLOAT, table_rows * width)?;
    ids.need(OP, "ids", I32, n)?;
    out.need(OP, "out", FLOAT, n * width)?;
    let args = [table.into(), ids.into(), out.into(), Arg::I32(int(OP, "n", n)?), Arg::I32(int(OP, "width", width)?)];
    launch(l, &name(OP, &[table, out]), t.rows(n, width), &args)
}

/// `dst[r] += sum of src[k]` over the sources `seg` gives destination row `r`, rows of `width`.
/// `seg`'s arrays are on the device already (`Segments::device_arrays` lays them out).
#[allow(clippy::too_many_arguments)]
pub fn index_add(l: &mut dyn Launcher, t: &Tune, dst: Buf, dst_rows: usize, src: Buf, seg: &Segments, dev: [Buf; 3], width: usize) -> Result<()> {
    const OP: &str = "index_add_rows";
    dst.need(OP, "dst", F32, dst_rows * width)?;
    src.need(OP, "src", FLOAT, seg.src_rows() * width)?;
    if seg.max_dst() >= dst_rows {
        return Err(Error::shape(OP, format!("destination row {} of {dst_rows}", seg.max_dst())));
    }
    let [d_rows, d_seg, d_src] = dev;
    d_rows.need(OP, "dst rows", I32, seg.dst.len())?;
    d_seg.need(OP, "segments", I32, seg.dst.len() + 1)?;
    d_src.need(OP, "src rows", I32, seg.src.len())?;
    let n = seg.dst.len();
    let args = [dst.into(), src.into(), d_rows.into(), d_seg.into(), d_src.into(), Arg::I32(int(OP, "rows", n)?), Arg::I32(int(OP, "width", width)?)];
    launch(l, &name(OP, &[src]), t.rows(n, width), &args)
}

/// `out[c] (+)= sum over r of x[r, c]`.
pub fn sum_rows(l: &mut dyn Launcher, t: &Tune, x: Buf, out: Buf, rows: usize, cols: usize, accumulate: bool) -> Result<()> {
    const OP: &str = "sum_rows";
    x.need(OP, "x", FLOAT, rows * cols)?;
    out.need(OP, "out", F32, cols)?;
    let args = [x.into(), out.into(), Arg::I32(int(OP, "rows", rows)?), Arg::I32(int(OP, "cols", cols)?), Arg::I32(accumulate as i32)];
    launch(l, &name(OP, &[x]), t.flat(cols), &args)
}
