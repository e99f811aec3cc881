//! The optimizer step on the device: gradient norm, clipping coefficient, fused AdamW over one
//! buffer or over every trainable tensor in one launch.

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

impl Hyper {
    /// The bias corrections `1 - beta1^t` and `sqrt(1 - beta2^t)`: as the CPU, in f64, then rounded
    /// to f32.
    fn corrections(&self) -> (f32, f32) {
        let step = self.step.min(i32::MAX as u64) as i32;
        ((1.0 - self.beta1.powi(step)) as f32, (1.0 - self.beta2.powi(step)).sqrt() as f32)
    }
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
    let (bc1, bc2_sqrt) = h.corrections();
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
        Arg::F32(bc1),
        Arg::F32(bc2_sqrt),
        stats.into(),
    ];
    launch(l, OP, t.flat(n), &args)
}

/// One tensor of `update_tensors`: its f32 weights (a separate allocation), its optional bf16 copy,
/// its place in the flat gradient and moment buffers, whether it takes weight decay.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tensor {
    pub p: Buf,
    pub p_bf16: Option<Buf>,
    pub offset: usize,
    pub decay: bool,
}

/// The host side of `update_tensors`: the tables its one launch reads, laid out as the kernel
/// expects (`adamw_tensors` in adamw.cu), and how many blocks it takes.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorTable {
    /// Per tensor: weights' address, bf16 copy's address (0: none), offset, length.
    pub tensors: Vec<i64>,
    /// Per tensor: its `lr * weight_decay`, or 0.
    pub decays: Vec<f32>,
    /// Per block: its tensor, the chunk's start in it.
    pub chunks: Vec<i64>,
    pub chunk_len: usize,
}

impl TensorTable {
    /// Checks every tensor against the flat buffers' length `total` (each inside, none overlapping
    /// another) and cuts each into chunks of `chunk_len` elements.
    pub fn new(list: &[Tensor], total: usize, chunk_len: usize, h: &Hyper) -> Result<Self> {
        const OP: &str = "adamw_tensors";
        if chunk_len == 0 {
            return Err(Error::shape(OP, "chunks of 0 elements"));
        }
        let mut spans: Vec<(usize, usize)> = Vec::with_capacity(list.len());
        let (mut tensors, mut decays, mut chunks) = (Vec::new(), Vec::new(), Vec::new());
        for (i, t) in list.iter().enumerate() {
            let n = t.p.len;
            t.p.need(OP, "weights", F32, n)?;
            if let Some(b) = t.p_bf16 {
                b.need(OP, "bf16 weights", &[DType::Bf16], n)?;
            }
            if t.offset.checked_add(n).is_none_or(|end| end > total) {
                return Err(Error::shape(OP, format!("tensor {i}: {}..+{n} of flat buffers of {total}", t.offset)));
            }
            spans.push((t.offset, n));
            tensors.extend([t.p.addr as i64, t.p_bf16.map_or(0, |b| b.addr as i64), t.offset as i64, n as i64]);
            decays.push(if t.decay { (h.lr * h.weight_decay) as f32 } else { 0.0 });
            chunks.extend((0..n.div_ceil(chunk_len)).flat_map(|c| [i as i64, (c * chunk_len) as i64]));
        }
        spans.sort_unstable();
        if let Some(w) = spans.windows(2).find(|w| w[0].0 + w[0].1 > w[1].0) {
            return Err(Error::shape(OP, format!("tensors at {} and {} overlap in the flat buffers", w[0].0, w[1].0)));
        }
        Ok(TensorTable { tensors, decays, chunks, chunk_len })
    }

    pub fn blocks(&self) -> usize {
        self.chunks.len() / 2
    }
}

/// One AdamW update of every tensor of `table` in one launch: `g`, `m`, `v` are the flat gradient
/// and moment buffers, `tensors` / `decays` / `chunks` the table uploaded (i64, f32, i64), `stats`
/// as for `update`.
#[allow(clippy::too_many_arguments)]
pub fn update_tensors(l: &mut dyn Launcher, t: &Tune, table: &TensorTable, uploaded: [Buf; 3], g: Buf, m: Buf, v: Buf, h: &Hyper, stats: Buf) -> Result<()> {
    const OP: &str = "adamw_tensors";
    let [tensors, decays, chunks] = uploaded;
    tensors.need(OP, "tensor table", &[DType::I64], table.tensors.len())?;
    decays.need(OP, "decays", F32, table.decays.len())?;
    chunks.need(OP, "chunk table", &[DType::I64], table.chunks.len())?;
    let total = table.tensors.chunks_exact(4).map(|e| (e[2] + e[3]) as usize).max().unwrap_or(0);
    for (b, what) in [(g, "gradient"), (m, "first moment"), (v, "second moment")] {
        b.need(OP, what, F32, total)?;
    }
    stats.need(OP, "stats", &[DType::F64], 2)?;
    if h.step == 0 {
        return Err(Error::shape(OP, "steps count from 1"));
    }
    if table.blocks() == 0 {
        return Ok(());
    }
    let blocks = u32::try_from(table.blocks()).map_err(|_| Error::shape(OP, format!("{} chunks", table.blocks())))?;
    let (bc1, bc2_sqrt) = h.corrections();
    let args = [
        tensors.into(),
        decays.into(),
        chunks.into(),
        Arg::I64(table.chunk_len as i64),
        g.into(),
        m.into(),
        v.into(),
        Arg::F32(h.lr as f32),
        Arg::F32(h.beta1 as f32),
        Arg::F32(h.beta2 as f32),
        Arg::F32(h.eps as f32),
        Arg::F32(bc1),
        Arg::F32(bc2_sqrt),
        stats.into(),
    ];
    launch(l, OP, LaunchConfig::blocks(blocks, t.block), &args)
}
