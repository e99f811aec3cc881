//! The masked softmax around the attention products, over every span of an `AttnLayout` at once.
//!
//! The products (cuBLASLt, batched over heads) write each span's scores `q k^T` into one f32
//! buffer, laid out by `ScoreTable`: span `sp` owns `heads * len` rows of `prefix_len + len` columns
//! from `off[sp]`, row `head * len + i` for its query `i`; its first `prefix_len` columns are the
//! shared prefix's keys, the rest its own (causal). The kernels then need one launch for every span
//! of every question of the pass.

use super::{int, name, F32, FLOAT, I32};
use crate::buf::{Buf, DType};
use crate::error::{Error, Result};
use crate::geometry::Tune;
use crate::launch::{launch, Arg, Launcher};

/// One span of query rows: its own length and the length of the prefix it sees in full (0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanShape {
    pub len: usize,
    pub prefix_len: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScoreTable {
    pub heads: usize,
    pub spans: Vec<SpanShape>,
    /// Where each span's scores start (elements).
    pub off: Vec<i64>,
    /// Score rows before each span.
    pub pair_start: Vec<i32>,
    pub len: Vec<i32>,
    pub prefix_len: Vec<i32>,
    /// Score rows in all.
    pub pairs: usize,
    /// Score elements in all: the size of the score (and probability) buffers.
    pub elements: usize,
}

impl ScoreTable {
    pub fn new(heads: usize, spans: &[SpanShape]) -> Result<ScoreTable> {
        const OP: &str = "attention scores";
        let mut t = ScoreTable { heads, spans: spans.to_vec(), off: vec![], pair_start: vec![], len: vec![], prefix_len: vec![], pairs: 0, elements: 0 };
        for s in spans {
            t.off.push(t.elements as i64);
            t.pair_start.push(int(OP, "score rows", t.pairs)?);
            t.len.push(int(OP, "span length", s.len)?);
            t.prefix_len.push(int(OP, "prefix length", s.prefix_len)?);
            t.pairs += heads * s.len;
            t.elements += heads * s.len * (s.prefix_len + s.len);
        }
        int(OP, "score rows", t.pairs)?;
        Ok(t)
    }

    /// Span `sp`'s scores for `head`: (first element, rows, columns); row `i` at `first + i * columns`.
    pub fn block(&self, sp: usize, head: usize) -> (usize, usize, usize) {
        let s = self.spans[sp];
        let cols = s.prefix_len + s.len;
        (self.off[sp] as usize + head * s.len * cols, s.len, cols)
    }
}

/// The table's arrays on the device: `off` (i64), `pair_start`, `len`, `prefix_len` (i32), one
/// entry per span.
#[derive(Clone, Copy, Debug)]
pub struct DeviceTable {
    pub off: Buf,
    pub pair_start: Buf,
    pub len: Buf,
    pub prefix_len: Buf,
}

fn table_args(op: &'static str, t: &ScoreTable, d: &DeviceTable) -> Result<[Arg; 4]> {
    let n = t.spans.len();
    d.off.need(op, "offsets", &[DType::I64], n)?;
    d.pair_start.need(op, "row starts", I32, n)?;
    d.len.need(op, "lengths", I32, n)?;
    d.prefix_len.need(op, "prefix lengths", I32, n)?;
    Ok([d.off.into(), d.pair_start.into(), d.len.into(), d.prefix_len.into()])
}

fn geometry(t: &Tune, table: &ScoreTable) -> crate::launch::LaunchConfig {
    let widest = table.spans.iter().map(|s| s.prefix_len + s.len).max().unwrap_or(1);
    t.rows(table.pairs, widest)
}

/// `p = softmax(scale s)` row by row, zeros where masked.
pub fn softmax_forward(l: &mut dyn Launcher, t: &Tune, table: &ScoreTable, dev: &DeviceTable, s: Buf, p: Buf, scale: f32) -> Result<()> {
    const OP: &str = "attn_softmax_fwd";
    s.need(OP, "scores", F32, table.elements)?;
    p.need(OP, "probabilities", FLOAT, table.elements)?;
    if table.spans.is_empty() {
        return Err(Error::shape(OP, "no spans"));
    }
    let [a, b, c, d] = table_args(OP, table, dev)?;
    let args = [s.into(), p.into(), a, b, c, d, Arg::I32(table.pairs as i32), Arg::I32(table.spans.len() as i32), Arg::F32(scale)];
    launch(l, &name(OP, &[p]), geometry(t, table), &args)
}

/// `ds = p * (dp - sum p dp)` row by row from the scores (p recomputed), and `p` itself into
/// `p_out` when given (the dV product's operand); `ds` and `p_out` of one dtype.
#[allow(clippy::too_many_arguments)]
pub fn softmax_backward(l: &mut dyn Launcher, t: &Tune, table: &ScoreTable, dev: &DeviceTable, s: Buf, dp: Buf, ds: Buf, p_out: Option<Buf>, scale: f32) -> Result<()> {
    const OP: &str = "attn_softmax_bwd";
    s.need(OP, "scores", F32, table.elements)?;
    dp.need(OP, "dp", F32, table.elements)?;
    ds.need(OP, "ds", FLOAT, table.elements)?;
    let p_out = match p_out {
        Some(p) => {
            p.need(OP, "p", &[ds.dtype], table.elements)?;
            p
        }
        None => Buf::null(ds.dtype),
    };
    if table.spans.is_empty() {
        return Err(Error::shape(OP, "no spans"));
    }
    let [a, b, c, d] = table_args(OP, table, dev)?;
    let args = [s.into(), dp.into(), ds.into(), p_out.into(), a, b, c, d, Arg::I32(table.pairs as i32), Arg::I32(table.spans.len() as i32), Arg::F32(scale)];
    launch(l, &name(OP, &[ds]), geometry(t, table), &args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_laid_out_end_to_end_by_head() {
        let t = ScoreTable::new(2, &[SpanShape { len: 3, prefix_len: 0 }, SpanShape { len: 0, prefix_len: 3 }, SpanShape { len: 2, prefix_len: 3 }]).unwrap();
        assert_eq!(t.off, vec![0, 18, 18]);
        assert_eq!(t.pair_start, vec![0, 6, 6]);
        assert_eq!((t.pairs, t.elements), (10, 18 + 20));
        assert_eq!(t.block(2, 1), (18 + 10, 2, 5));
    }
}
