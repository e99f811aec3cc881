//! Log-probs of gathered targets through the output projection, a vocabulary chunk at a time: the
//! chunk's logits by a product, folded by `logprob_chunk` into a running state per slot; the
//! backward pass recomputes each chunk (or takes the forward's kept chunk), forms dz with
//! `logprob_bwd_chunk`, and adds its two products into dh (through the scored rows) and dhead.

use cppo_kernels::logprob::{Gather, KEEP_LOGITS_BYTES};
use cppo_kernels::Precision;

use super::products::product;
use super::{Ctx, DevBuf, DeviceSide};
use crate::buf::{Buf, DType};
use crate::error::{Error, Result};
use crate::gemm::Operand;
use crate::index::Segments;
use crate::ops;

pub(crate) struct Forward<M> {
    pub out: Vec<f32>,
    pub entropy: Vec<f64>,
    pub lse: DevBuf<M>,
    pub logits: Option<Vec<DevBuf<M>>>,
}

struct Tables<M> {
    slots: usize,
    out_len: usize,
    hs: DevBuf<M>,
    targets: DevBuf<M>,
    out_index: DevBuf<M>,
    cols: usize,
}

fn tables<D: DeviceSide>(c: &mut Ctx<'_, D>, g: &Gather, h: Buf, head: Buf, vocab: usize, width: usize) -> Result<Tables<D::Mem>> {
    const OP: &str = "logprobs";
    let slots = g.rows.len();
    let out_len: usize = g.out_shape.iter().product();
    if g.targets.len() != slots || g.out_index.len() != slots {
        return Err(Error::shape(OP, format!("{slots} rows, {} targets, {} output indices", g.targets.len(), g.out_index.len())));
    }
    // A bf16 head is a copy the caller keeps for bf16 products (`logprobs_half`).
    head.need(OP, "head", &[DType::F32, DType::Bf16], vocab * width)?;
    let rows = h.len.checked_div(width).unwrap_or(0);
    let ids = c.upload_ids(OP, g.rows.iter().copied(), rows)?;
    let hs = c.alloc(DType::F32, slots * width)?;
    if slots > 0 {
        ops::rows::gather(&mut *c.d, &c.t, h, rows, ids.buf(), hs.buf(), slots, width)?;
    }
    let targets = c.upload_ids(OP, g.targets.iter().map(|&t| t as usize), vocab)?;
    let out_index = c.upload_ids(OP, g.out_index.iter().copied(), out_len)?;
    Ok(Tables { slots, out_len, hs, targets, out_index, cols: ops::logprob::chunk_cols(g.chunk_cols, slots, vocab) })
}

/// The logits `z (slots x n)` of vocabulary rows `v0 .. v0 + n`.
fn logits<D: DeviceSide>(c: &mut Ctx<'_, D>, t: &Tables<D::Mem>, head: Buf, width: usize, v0: usize, n: usize, p: Precision) -> Result<DevBuf<D::Mem>> {
    let z = c.alloc(DType::F32, t.slots * n)?;
    let w = head.slice(v0 * width, n * width)?;
    product(c, t.slots, n, width, (t.hs.buf(), Operand { trans: false, ld: width }), (w, Operand { trans: true, ld: width }), z.buf(), false, p)?;
    Ok(z)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn forward<D: DeviceSide>(c: &mut Ctx<'_, D>, g: &Gather, h: Buf, head: Buf, vocab: usize, width: usize, keep: bool, p: Precision) -> Result<Forward<D::Mem>> {
    let t = tables(c, g, h, head, vocab, width)?;
    let lse = c.alloc(DType::F32, t.slots)?;
    if t.slots == 0 {
        return Ok(Forward { out: vec![0.0; t.out_len], entropy: Vec::new(), lse, logits: keep.then(Vec::new) });
    }
    if vocab == 0 {
        return Err(Error::shape("logprobs", "an empty vocabulary"));
    }
    let keep = keep && t.slots * vocab * 4 <= KEEP_LOGITS_BYTES;
    let state = c.alloc(DType::F32, 4 * t.slots)?;
    let mut kept = Vec::new();
    let mut v0 = 0;
    while v0 < vocab {
        let n = t.cols.min(vocab - v0);
        let z = logits(c, &t, head, width, v0, n, p)?;
        ops::logprob::chunk(&mut *c.d, &c.t, z.buf(), t.targets.buf(), state.buf(), t.slots, n, v0, vocab)?;
        if keep {
            kept.push(z);
        }
        v0 += n;
    }
    let out = c.alloc(DType::F32, t.out_len)?;
    let entropy = c.alloc(DType::F32, t.slots)?;
    ops::logprob::finish(&mut *c.d, &c.t, state.buf(), t.out_index.buf(), out.buf(), t.out_len, lse.buf(), Some(entropy.buf()), t.slots)?;
    let out = c.download_f32(out.buf())?;
    let entropy = c.download_f32(entropy.buf())?.into_iter().map(f64::from).collect();
    Ok(Forward { out, entropy, lse, logits: keep.then_some(kept) })
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn backward<D: DeviceSide>(
    c: &mut Ctx<'_, D>,
    g: &Gather,
    kept: Option<Vec<DevBuf<D::Mem>>>,
    lse: Buf,
    h: Buf,
    head: Buf,
    dlogp: &[f32],
    vocab: usize,
    width: usize,
    dh: Buf,
    dhead: Option<Buf>,
    p: Precision,
) -> Result<()> {
    const OP: &str = "logprobs_backward";
    let t = tables(c, g, h, head, vocab, width)?;
    if let Some(dhead) = dhead {
        dhead.need(OP, "dhead", &[DType::F32], vocab * width)?;
    }
    lse.need(OP, "lse", &[DType::F32], t.slots)?;
    if dlogp.len() < t.out_len {
        return Err(Error::shape(OP, format!("{} output gradients for an output of {}", dlogp.len(), t.out_len)));
    }
    if t.slots == 0 {
        // No scored row: the head's gradient is zero (it is overwritten), dh unchanged.
        return match dhead {
            Some(dhead) => ops::elementwise::fill(&mut *c.d, &c.t, dhead, 0.0, vocab * width),
            None => Ok(()),
        };
    }
    let gout = c.upload_f32(&dlogp[..t.out_len])?;
    let dhs = c.zeros(t.slots * width)?;
    // dz feeds two products: bf16 straight from the kernel when they multiply in bf16.
    let dz_type = if p != Precision::F32 { DType::Bf16 } else { DType::F32 };
    let mut kept = kept.map(|k| k.into_iter());
    let mut v0 = 0;
    while v0 < vocab {
        let n = t.cols.min(vocab - v0);
        let z = match kept.as_mut().and_then(|k| k.next()).filter(|z| z.buf().len == t.slots * n) {
            Some(z) => z,
            None => logits(c, &t, head, width, v0, n, p)?,
        };
        let dz = c.alloc(dz_type, t.slots * n)?;
        ops::logprob::backward_chunk(&mut *c.d, &c.t, z.buf(), lse, gout.buf(), t.out_len, t.out_index.buf(), t.targets.buf(), dz.buf(), t.slots, n, v0, vocab)?;
        let w = head.slice(v0 * width, n * width)?;
        // dh_s += dz (slots x n) w (n x width); dhead[v0..] = dz^T (n x slots) hs (slots x width).
        product(c, t.slots, width, n, (dz.buf(), Operand { trans: false, ld: n }), (w, Operand { trans: false, ld: width }), dhs.buf(), true, p)?;
        // A frozen head (LoRA) gets no weight-gradient product.
        if let Some(dhead) = dhead {
            let dw = dhead.slice(v0 * width, n * width)?;
            product(c, n, width, t.slots, (dz.buf(), Operand { trans: true, ld: n }), (t.hs.buf(), Operand { trans: false, ld: width }), dw, false, p)?;
        }
        v0 += n;
    }
    // The scored rows' gradients into their hidden rows (a row scored twice gets both).
    let rows = h.len / width;
    dh.need(OP, "dh", &[DType::F32], rows * width)?;
    let targets: Vec<u32> = g.rows.iter().map(|&r| r as u32).collect();
    let seg = Segments::by_target(&targets);
    let (a, b, s) = (c.upload_i32(&seg.dst)?, c.upload_i32(&seg.seg)?, c.upload_i32(&seg.src)?);
    ops::rows::index_add(&mut *c.d, &c.t, dh, rows, dhs.buf(), &seg, [a.buf(), b.buf(), s.buf()], width)
}
