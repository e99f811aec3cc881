//! The training path's attention over an `AttnLayout`: the rotary embedding of q and k (our kernel),
//! the product plan of `ops::attention_plan` (strided-batched products over the score table) around
//! the masked softmax kernels, and for the backward pass the inverse rotation of dq and dk. Scores,
//! probabilities and every operand stay in f32, as the CPU backend's attention.

use std::collections::HashMap;

use cppo_kernels::attention::Attention;

use super::{Ctx, DevBuf, DeviceSide};
use crate::buf::{Buf, DType};
use crate::error::{Error, Result};
use crate::ops::attention::{softmax_backward, softmax_forward, DeviceTable, ScoreTable};
use crate::ops::attention_plan::{self, Heads, Product, Role, Span};

struct Plan {
    spans: Vec<Span>,
    table: ScoreTable,
    heads: Heads,
    scale: f32,
}

fn plan(a: &Attention, q: Buf, k: Buf, v: Buf) -> Result<Plan> {
    const OP: &str = "attention";
    let (rows, d) = (a.layout.rows, a.head_dim);
    if a.kv_heads == 0 || !a.heads.is_multiple_of(a.kv_heads) || a.layout.positions.len() != rows {
        return Err(Error::shape(OP, format!("{} heads over {} kv heads, {} positions for {rows} rows", a.heads, a.kv_heads, a.layout.positions.len())));
    }
    q.need(OP, "q", &[DType::F32], rows * a.heads * d)?;
    k.need(OP, "k", &[DType::F32], rows * a.kv_heads * d)?;
    v.need(OP, "v", &[DType::F32], rows * a.kv_heads * d)?;
    let spans: Vec<Span> = a.layout.spans.iter().map(|s| Span { start: s.start, len: s.len, prefix: s.prefix }).collect();
    for s in &spans {
        let end = s.prefix.map_or(0, |(ps, pl)| ps + pl).max(s.start + s.len);
        if end > rows {
            return Err(Error::shape(OP, format!("span {s:?} beyond {rows} rows")));
        }
    }
    let table = ScoreTable::new(a.heads, &spans.iter().map(|s| s.shape()).collect::<Vec<_>>())?;
    Ok(Plan { spans, table, heads: Heads { heads: a.heads, kv_heads: a.kv_heads, d }, scale: (1.0 / (d as f64).sqrt()) as f32 })
}

fn upload_table<D: DeviceSide>(c: &mut Ctx<'_, D>, t: &ScoreTable) -> Result<(Vec<DevBuf<D::Mem>>, DeviceTable)> {
    let off = c.upload_i64(&t.off)?;
    let ps = c.upload_i32(&t.pair_start)?;
    let len = c.upload_i32(&t.len)?;
    let pl = c.upload_i32(&t.prefix_len)?;
    let dev = DeviceTable { off: off.buf(), pair_start: ps.buf(), len: len.buf(), prefix_len: pl.buf() };
    Ok((vec![off, ps, len, pl], dev))
}

/// Issues `products`, each operand the buffer of its role from its offset on.
fn run<D: DeviceSide>(c: &mut Ctx<'_, D>, products: &[Product], bufs: &HashMap<Role, Buf>) -> Result<()> {
    let at = |(role, off): (Role, usize)| -> Result<Buf> {
        let b = *bufs.get(&role).ok_or_else(|| Error::shape("attention", format!("no buffer for {role:?}")))?;
        b.slice(off, b.len.saturating_sub(off))
    };
    for p in products {
        c.d.matmul(&p.gemm, at(p.a)?, at(p.b)?, at(p.d)?)?;
    }
    Ok(())
}

/// Two device buffers (q and k rotated).
type Pair<M> = (DevBuf<M>, DevBuf<M>);

/// q and k rotated by the rows' positions.
fn roped<D: DeviceSide>(c: &mut Ctx<'_, D>, a: &Attention, q: Buf, k: Buf) -> Result<Pair<D::Mem>> {
    let rows = a.layout.rows;
    let qr = c.alloc(DType::F32, rows * a.heads * a.head_dim)?;
    let kr = c.alloc(DType::F32, rows * a.kv_heads * a.head_dim)?;
    c.rope(&a.rope, q, qr.buf(), a.heads, &a.layout.positions, false)?;
    c.rope(&a.rope, k, kr.buf(), a.kv_heads, &a.layout.positions, false)?;
    Ok((qr, kr))
}

pub(crate) fn forward<D: DeviceSide>(c: &mut Ctx<'_, D>, a: &Attention, q: Buf, k: Buf, v: Buf) -> Result<DevBuf<D::Mem>> {
    let p = plan(a, q, k, v)?;
    // Rows no span covers attend to nothing: zeros, as on the CPU.
    let out = c.zeros(a.layout.rows * a.heads * a.head_dim)?;
    if p.table.elements == 0 {
        return Ok(out);
    }
    let (qr, kr) = roped(c, a, q, k)?;
    let (_tables, dev) = upload_table(c, &p.table)?;
    let (s, probs) = (c.alloc(DType::F32, p.table.elements)?, c.alloc(DType::F32, p.table.elements)?);
    let bufs = HashMap::from([(Role::Q, qr.buf()), (Role::K, kr.buf()), (Role::V, v), (Role::Out, out.buf()), (Role::Scores, s.buf()), (Role::Probs, probs.buf())]);
    let (before, after) = attention_plan::forward(&p.table, &p.spans, p.heads);
    run(c, &before, &bufs)?;
    softmax_forward(&mut *c.d, &c.t, &p.table, &dev, s.buf(), probs.buf(), p.scale)?;
    run(c, &after, &bufs)?;
    Ok(out)
}

/// `(dq, dk, dv)` before the rotary embedding (dq and dk rotated back).
#[allow(clippy::type_complexity)]
pub(crate) fn backward<D: DeviceSide>(c: &mut Ctx<'_, D>, a: &Attention, q: Buf, k: Buf, v: Buf, dout: Buf) -> Result<(DevBuf<D::Mem>, DevBuf<D::Mem>, DevBuf<D::Mem>)> {
    let p = plan(a, q, k, v)?;
    dout.need("attention_backward", "dout", &[DType::F32], q.len)?;
    let rows = a.layout.rows;
    let dq = c.zeros(rows * a.heads * a.head_dim)?;
    let dk = c.zeros(rows * a.kv_heads * a.head_dim)?;
    let dv = c.zeros(rows * a.kv_heads * a.head_dim)?;
    if p.table.elements == 0 {
        return Ok((dq, dk, dv));
    }
    let (qr, kr) = roped(c, a, q, k)?;
    let (_tables, dev) = upload_table(c, &p.table)?;
    let e = p.table.elements;
    let (s, dp, ds, probs) = (c.alloc(DType::F32, e)?, c.alloc(DType::F32, e)?, c.alloc(DType::F32, e)?, c.alloc(DType::F32, e)?);
    let bufs = HashMap::from([
        (Role::Q, qr.buf()),
        (Role::K, kr.buf()),
        (Role::V, v),
        (Role::DOut, dout),
        (Role::Scores, s.buf()),
        (Role::DProbs, dp.buf()),
        (Role::DScores, ds.buf()),
        (Role::Probs, probs.buf()),
        (Role::DQ, dq.buf()),
        (Role::DK, dk.buf()),
        (Role::DV, dv.buf()),
    ]);
    let (before, after) = attention_plan::backward(&p.table, &p.spans, p.heads, p.scale);
    run(c, &before, &bufs)?;
    softmax_backward(&mut *c.d, &c.t, &p.table, &dev, s.buf(), dp.buf(), ds.buf(), Some(probs.buf()), p.scale)?;
    run(c, &after, &bufs)?;
    c.rope(&a.rope, dq.buf(), dq.buf(), a.heads, &a.layout.positions, true)?;
    c.rope(&a.rope, dk.buf(), dk.buf(), a.kv_heads, &a.layout.positions, true)?;
    Ok((dq, dk, dv))
}
