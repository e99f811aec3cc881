//! `cppo_kernels::Backend` on a CUDA device: every operation is a launch of `ops` (our kernels) or a
//! product through `DeviceSide::matmul` (cuBLASLt on a GPU), on the device's own buffers.
//!
//! The backend is generic over the device side, so the same code runs on a GPU (`cuda::CudaSide`,
//! feature `cuda`) and in `cargo test` on the CPU, where the kernels run under the CUDA emulation
//! and the products on the host (`gemm::host_matmul`: bf16 operands widened, f32 sums, as
//! cuBLASLt's f32 compute). Buffers hold f32 (`T`); `Half` is a bf16 copy of a weight.
//!
//! Precision: the products follow `Precision` (bf16 operands and f32 accumulation for `Bf16`,
//! f32 operands for `F32`; `Auto` is bf16 here, since every GPU this backend targets multiplies bf16 natively), as the CPU backend does; attention scores and probabilities stay in f32
//! (the CPU backend's attention is f32 too). The `Backend` trait returns no errors, so a failure here
//! (a shape the ops refuse, a failed launch, which names its kernel) panics with its message, as the
//! CPU backend's asserts do.

mod attention;
pub mod device;
mod logprob;
mod products;

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use cppo_kernels::attention::Attention;
use cppo_kernels::backend::{AdamWParam, AdamWStep, Backend, CacheLayout, CachedQuery, Product, Scored};
use cppo_kernels::logprob::Gather;
use cppo_kernels::rope::RopeTable;
use cppo_kernels::sample::SampleParams;
use cppo_kernels::Precision;

pub use device::DeviceSide;

use crate::buf::{Buf, DType};
use crate::error::{Error, Result};
use crate::geometry::Tune;
use crate::index::Segments;
use crate::launch::{launch, Arg};
use crate::ops;

/// An owned device buffer: the allocation and the kernels' view of it.
pub struct DevBuf<M> {
    _mem: M,
    buf: Buf,
}

impl<M> DevBuf<M> {
    pub fn buf(&self) -> Buf {
        self.buf
    }
}

/// A borrowed buffer (a `Buf` that may not outlive what it borrows).
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    pub buf: Buf,
    _life: PhantomData<&'a ()>,
}

/// A mutably borrowed buffer.
#[derive(Debug)]
pub struct ViewMut<'a> {
    pub buf: Buf,
    _life: PhantomData<&'a mut ()>,
}

fn view<'a>(buf: Buf) -> View<'a> {
    View { buf, _life: PhantomData }
}

fn view_mut<'a>(buf: Buf) -> ViewMut<'a> {
    ViewMut { buf, _life: PhantomData }
}

/// The device memory and geometry one operation works with, under the backend's lock.
pub(crate) struct Ctx<'d, D: DeviceSide> {
    pub(crate) d: MutexGuard<'d, D>,
    pub(crate) t: Tune,
}

impl<D: DeviceSide> Ctx<'_, D> {
    pub(crate) fn alloc(&mut self, dtype: DType, len: usize) -> Result<DevBuf<D::Mem>> {
        let mem = self.d.alloc(dtype, len)?;
        let buf = D::buf_of(&mem);
        Ok(DevBuf { _mem: mem, buf })
    }

    pub(crate) fn zeros(&mut self, len: usize) -> Result<DevBuf<D::Mem>> {
        let b = self.alloc(DType::F32, len)?;
        if len > 0 {
            ops::elementwise::fill(&mut *self.d, &self.t, b.buf, 0.0, len)?;
        }
        Ok(b)
    }

    pub(crate) fn upload_f32(&mut self, v: &[f32]) -> Result<DevBuf<D::Mem>> {
        let b = self.alloc(DType::F32, v.len())?;
        self.d.write(b.buf, &v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>())?;
        Ok(b)
    }

    pub(crate) fn upload_i32(&mut self, v: &[i32]) -> Result<DevBuf<D::Mem>> {
        let b = self.alloc(DType::I32, v.len())?;
        self.d.write(b.buf, &v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>())?;
        Ok(b)
    }

    pub(crate) fn upload_i64(&mut self, v: &[i64]) -> Result<DevBuf<D::Mem>> {
        let b = self.alloc(DType::I64, v.len())?;
        self.d.write(b.buf, &v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>())?;
        Ok(b)
    }

    pub(crate) fn upload_f64(&mut self, v: &[f64]) -> Result<DevBuf<D::Mem>> {
        let b = self.alloc(DType::F64, v.len())?;
        self.d.write(b.buf, &v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>())?;
        Ok(b)
    }

    pub(crate) fn download_f32(&mut self, b: Buf) -> Result<Vec<f32>> {
        if b.dtype != DType::F32 {
            return Err(Error::shape("download", format!("a {:?} buffer read as f32", b.dtype)));
        }
        let bytes = self.d.read(b)?;
        Ok(bytes.chunks_exact(4).map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    /// A bf16 copy of `x` (rounded to nearest even by the cast kernel).
    pub(crate) fn bf16_copy(&mut self, x: Buf) -> Result<DevBuf<D::Mem>> {
        let h = self.alloc(DType::Bf16, x.len)?;
        if x.len > 0 {
            ops::elementwise::cast(&mut *self.d, &self.t, x, h.buf, x.len)?;
        }
        Ok(h)
    }

    /// Token ids as the kernels' i32, each checked below `bound` (the kernels do not bound-check).
    pub(crate) fn upload_ids(&mut self, op: &'static str, ids: impl Iterator<Item = usize>, bound: usize) -> Result<DevBuf<D::Mem>> {
        let mut v = Vec::new();
        for id in ids {
            if id >= bound {
                return Err(Error::shape(op, format!("index {id} of {bound} rows")));
            }
            v.push(ops::int(op, "index", id)?);
        }
        self.upload_i32(&v)
    }

    /// The rotary table's rows `0..positions` on the device.
    pub(crate) fn rope_table(&mut self, table: &RopeTable, positions: usize) -> Result<DeviceRope<D::Mem>> {
        if positions > table.max_positions {
            return Err(Error::shape("rope", format!("position {} beyond the table's {}", positions - 1, table.max_positions)));
        }
        let n = positions * table.half;
        let cos = self.upload_f32(&table.cos32[..n])?;
        let sin = self.upload_f32(&table.sin32[..n])?;
        let table = ops::rope::Table { cos: cos.buf, sin: sin.buf, half: table.half, positions };
        Ok(DeviceRope { _cos: cos, _sin: sin, table })
    }

    /// Rotates `rows` rows of `heads` heads of `x` into `y` (which may be `x`) by `positions`.
    pub(crate) fn rope(&mut self, table: &RopeTable, x: Buf, y: Buf, heads: usize, positions: &[usize], inverse: bool) -> Result<()> {
        if positions.is_empty() {
            return Ok(());
        }
        let bound = positions.iter().max().map_or(0, |&p| p + 1);
        let rope = self.rope_table(table, bound)?;
        let pos = self.upload_ids("rope", positions.iter().copied(), bound)?;
        ops::rope::apply(&mut *self.d, &self.t, &rope.table, x, y, pos.buf, bound, positions.len(), heads, inverse)
    }
}

/// A rotary table on the device: its buffers and the kernels' view of them.
pub(crate) struct DeviceRope<M> {
    _cos: DevBuf<M>,
    _sin: DevBuf<M>,
    table: ops::rope::Table,
}

/// The backend over one device side.
pub struct CudaBackend<D: DeviceSide> {
    dev: Mutex<D>,
    tune: Tune,
    name: &'static str,
}

impl<D: DeviceSide> CudaBackend<D> {
    pub fn new(dev: D) -> Self {
        let (tune, name) = (dev.tune(), dev.name());
        CudaBackend { dev: Mutex::new(dev), tune, name }
    }

    /// The device side, for what the trait does not cover (memory figures, synchronisation).
    pub fn device(&self) -> MutexGuard<'_, D> {
        self.dev.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn ctx(&self) -> Ctx<'_, D> {
        Ctx { d: self.device(), t: self.tune }
    }

    /// Runs `f` under the device's lock; an error becomes a panic naming the operation (the trait
    /// returns no errors).
    pub(crate) fn run<R>(&self, op: &str, f: impl FnOnce(&mut Ctx<'_, D>) -> Result<R>) -> R {
        let mut c = self.ctx();
        match f(&mut c) {
            Ok(r) => r,
            Err(e) => panic!("{} backend, {op}: {e}", self.name),
        }
    }
}

fn same_len(op: &'static str, a: Buf, b: Buf) -> Result<()> {
    if a.len != b.len {
        return Err(Error::shape(op, format!("{} elements and {}", a.len, b.len)));
    }
    Ok(())
}

fn rows_of(op: &'static str, len: usize, width: usize) -> Result<usize> {
    if width == 0 || !len.is_multiple_of(width) {
        return Err(Error::shape(op, format!("{len} elements are not rows of {width}")));
    }
    Ok(len / width)
}

impl<D: DeviceSide> Backend for CudaBackend<D> {
    type T = f32;
    type Buf = DevBuf<D::Mem>;
    type Half = DevBuf<D::Mem>;
    type View<'a>
        = View<'a>
    where
        Self: 'a;
    type ViewMut<'a>
        = ViewMut<'a>
    where
        Self: 'a;

    fn name(&self) -> &'static str {
        self.name
    }

    fn zeros(&self, n: usize) -> Self::Buf {
        self.run("zeros", |c| c.zeros(n))
    }
    fn upload(&self, host: &[f32]) -> Self::Buf {
        self.run("upload", |c| c.upload_f32(host))
    }
    fn download(&self, x: View<'_>) -> Vec<f32> {
        self.run("download", |c| c.download_f32(x.buf))
    }
    fn len(&self, x: View<'_>) -> usize {
        x.buf.len
    }
    fn view<'a>(&self, b: &'a Self::Buf) -> View<'a> {
        view(b.buf)
    }
    fn view_mut<'a>(&self, b: &'a mut Self::Buf) -> ViewMut<'a> {
        view_mut(b.buf)
    }
    fn as_view<'a>(&self, x: &'a ViewMut<'_>) -> View<'a> {
        view(x.buf)
    }
    fn reborrow<'a>(&self, x: &'a mut ViewMut<'_>) -> ViewMut<'a> {
        view_mut(x.buf)
    }
    fn slice<'a>(&self, x: View<'a>, r: Range<usize>) -> View<'a>
    where
        Self: 'a,
    {
        let len = r.end.checked_sub(r.start).unwrap_or_else(|| panic!("slice {r:?}"));
        view(x.buf.slice(r.start, len).unwrap_or_else(|e| panic!("{e}")))
    }
    fn slice_mut<'a>(&self, x: ViewMut<'a>, r: Range<usize>) -> ViewMut<'a>
    where
        Self: 'a,
    {
        let len = r.end.checked_sub(r.start).unwrap_or_else(|| panic!("slice {r:?}"));
        view_mut(x.buf.slice(r.start, len).unwrap_or_else(|e| panic!("{e}")))
    }
    fn copy(&self, src: View<'_>, dst: ViewMut<'_>) {
        self.run("copy", |c| {
            same_len("copy", src.buf, dst.buf)?;
            if src.buf.len > 0 {
                c.d.copy(src.buf, dst.buf)?;
            }
            Ok(())
        })
    }
    fn duplicate(&self, x: View<'_>) -> Self::Buf {
        self.run("duplicate", |c| {
            let b = c.alloc(DType::F32, x.buf.len)?;
            if x.buf.len > 0 {
                c.d.copy(x.buf, b.buf)?;
            }
            Ok(b)
        })
    }
    fn to_half(&self, w: View<'_>) -> Self::Half {
        self.run("to_half", |c| c.bf16_copy(w.buf))
    }
    fn upload_half(&self, h: &[u16]) -> Self::Half {
        self.run("upload_half", |c| {
            let b = c.alloc(DType::Bf16, h.len())?;
            if !h.is_empty() {
                c.d.write(b.buf, &h.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>())?;
            }
            Ok(b)
        })
    }
    fn widen(&self, h: &Self::Half) -> Self::Buf {
        self.run("widen", |c| {
            let out = c.alloc(DType::F32, h.buf.len)?;
            if h.buf.len > 0 {
                ops::elementwise::cast(&mut *c.d, &c.t, h.buf, out.buf, h.buf.len)?;
            }
            Ok(out)
        })
    }

    fn embed(&self, table: View<'_>, width: usize, tokens: &[u32]) -> Self::Buf {
        self.run("embed", |c| {
            let vocab = rows_of("embed", table.buf.len, width)?;
            let ids = c.upload_ids("embed", tokens.iter().map(|&t| t as usize), vocab)?;
            let out = c.alloc(DType::F32, tokens.len() * width)?;
            if !tokens.is_empty() {
                ops::rows::gather(&mut *c.d, &c.t, table.buf, vocab, ids.buf, out.buf, tokens.len(), width)?;
            }
            Ok(out)
        })
    }
    fn embed_backward(&self, dtable: ViewMut<'_>, width: usize, tokens: &[u32], dx: View<'_>) {
        self.run("embed_backward", |c| {
            let vocab = rows_of("embed_backward", dtable.buf.len, width)?;
            if tokens.is_empty() {
                return Ok(());
            }
            if let Some(&t) = tokens.iter().find(|&&t| t as usize >= vocab) {
                return Err(Error::shape("embed_backward", format!("token {t} of a table of {vocab}")));
            }
            let seg = Segments::by_target(tokens);
            let (a, b, s) = (c.upload_i32(&seg.dst)?, c.upload_i32(&seg.seg)?, c.upload_i32(&seg.src)?);
            ops::rows::index_add(&mut *c.d, &c.t, dtable.buf, vocab, dx.buf, &seg, [a.buf, b.buf, s.buf], width)
        })
    }

    fn rms_norm(&self, x: View<'_>, w: View<'_>, eps: f64) -> Self::Buf {
        self.run("rms_norm", |c| {
            let d = w.buf.len;
            let rows = rows_of("rms_norm", x.buf.len, d)?;
            let y = c.alloc(DType::F32, x.buf.len)?;
            if rows > 0 {
                ops::rms_norm::forward(&mut *c.d, &c.t, x.buf, w.buf, y.buf, rows, d, eps as f32)?;
            }
            Ok(y)
        })
    }
    fn rms_norm_backward(&self, x: View<'_>, w: View<'_>, dy: View<'_>, eps: f64, dx: ViewMut<'_>, accumulate: bool) -> Self::Buf {
        self.run("rms_norm_backward", |c| {
            let d = w.buf.len;
            let rows = rows_of("rms_norm_backward", x.buf.len, d)?;
            if rows == 0 {
                return c.zeros(d);
            }
            let dw = c.alloc(DType::F32, d)?;
            let scratch = c.alloc(DType::F32, ops::rms_norm::backward_scratch(&c.t, rows, d))?;
            let g = ops::rms_norm::Grads { dx: dx.buf, accumulate_dx: accumulate, dw: Some((dw.buf, scratch.buf)), accumulate_dw: false };
            ops::rms_norm::backward(&mut *c.d, &c.t, x.buf, w.buf, dy.buf, &g, rows, d, eps as f32)?;
            Ok(dw)
        })
    }

    fn linear(&self, x: View<'_>, w: View<'_>, bias: Option<View<'_>>, din: usize, dout: usize, y: ViewMut<'_>, add: bool, p: Precision) {
        self.run("linear", |c| products::linear(c, x.buf, w.buf, bias.map(|b| b.buf), din, dout, y.buf, add, p))
    }
    fn project(&self, x: View<'_>, n: usize, din: usize, outs: &mut [Product<'_, '_, Self>]) {
        let outs: Vec<products::Out> = outs
            .iter()
            .map(|o| products::Out { w: o.w.buf, half: o.half.map(|h| h.buf), bias: o.bias.map(|b| b.buf), dout: o.dout, y: o.y.buf, add: o.add })
            .collect();
        self.run("project", |c| products::project(c, x.buf, n, din, &outs))
    }
    fn linear_grad_input(&self, dx: ViewMut<'_>, g: View<'_>, w: View<'_>, din: usize, dout: usize, add: bool, p: Precision) {
        self.run("linear_grad_input", |c| products::grad_input(c, dx.buf, g.buf, w.buf, din, dout, add, p))
    }
    /// At bf16 products the copy is the operand as it is (what `linear` would round the weight to);
    /// at f32 the weight is widened, as the trait's default.
    fn linear_half(&self, x: View<'_>, w: &Self::Half, bias: Option<View<'_>>, din: usize, dout: usize, y: ViewMut<'_>, add: bool, p: Precision) {
        if p == Precision::F32 {
            let wide = self.widen(w);
            return self.linear(x, view(wide.buf), bias, din, dout, y, add, p);
        }
        self.run("linear_half", |c| products::linear(c, x.buf, w.buf, bias.map(|b| b.buf), din, dout, y.buf, add, p))
    }
    fn linear_grad_input_half(&self, dx: ViewMut<'_>, g: View<'_>, w: &Self::Half, din: usize, dout: usize, add: bool, p: Precision) {
        if p == Precision::F32 {
            let wide = self.widen(w);
            return self.linear_grad_input(dx, g, view(wide.buf), din, dout, add, p);
        }
        self.run("linear_grad_input_half", |c| products::grad_input(c, dx.buf, g.buf, w.buf, din, dout, add, p))
    }
    fn linear_grad_weight(&self, g: View<'_>, x: View<'_>, din: usize, dout: usize, p: Precision) -> Self::Buf {
        self.run("linear_grad_weight", |c| products::grad_weight(c, g.buf, x.buf, din, dout, p))
    }
    fn linear_grad_bias(&self, g: View<'_>, dout: usize) -> Self::Buf {
        self.run("linear_grad_bias", |c| {
            let rows = rows_of("linear_grad_bias", g.buf.len, dout)?;
            let out = c.alloc(DType::F32, dout)?;
            if rows == 0 {
                ops::elementwise::fill(&mut *c.d, &c.t, out.buf, 0.0, dout)?;
            } else {
                ops::rows::sum_rows(&mut *c.d, &c.t, g.buf, out.buf, rows, dout, false)?;
            }
            Ok(out)
        })
    }

    fn attention(&self, a: &Attention, q: View<'_>, k: View<'_>, v: View<'_>) -> Self::Buf {
        self.run("attention", |c| attention::forward(c, a, q.buf, k.buf, v.buf))
    }
    fn attention_backward(&self, a: &Attention, q: View<'_>, k: View<'_>, v: View<'_>, dout: View<'_>) -> (Self::Buf, Self::Buf, Self::Buf) {
        self.run("attention_backward", |c| attention::backward(c, a, q.buf, k.buf, v.buf, dout.buf))
    }

    fn swiglu(&self, gate: View<'_>, up: View<'_>) -> Self::Buf {
        self.run("swiglu", |c| {
            same_len("swiglu", gate.buf, up.buf)?;
            let y = c.alloc(DType::F32, gate.buf.len)?;
            ops::swiglu::forward(&mut *c.d, &c.t, gate.buf, up.buf, y.buf, gate.buf.len)?;
            Ok(y)
        })
    }
    fn swiglu_backward(&self, gate: View<'_>, up: View<'_>, dy: View<'_>) -> (Self::Buf, Self::Buf) {
        self.run("swiglu_backward", |c| {
            same_len("swiglu_backward", gate.buf, up.buf)?;
            same_len("swiglu_backward", gate.buf, dy.buf)?;
            let n = gate.buf.len;
            let (dg, du) = (c.alloc(DType::F32, n)?, c.alloc(DType::F32, n)?);
            ops::swiglu::backward(&mut *c.d, &c.t, gate.buf, up.buf, dy.buf, dg.buf, du.buf, n)?;
            Ok((dg, du))
        })
    }

    fn sample_rows(&self, logits: View<'_>, vocab: usize, draws: &[f64], p: &SampleParams, seen: &[&[u32]]) -> Vec<(u32, f32)> {
        self.run("sample_rows", |c| {
            let rows = draws.len();
            if logits.buf.len != rows * vocab {
                return Err(Error::shape("sample_rows", format!("{} logits for {rows} rows of {vocab}", logits.buf.len)));
            }
            if rows == 0 {
                return Ok(Vec::new());
            }
            // The repetition penalty works on a copy: the logits may be shared (one prefill's row for
            // all its samples) and are the caller's.
            let penalised;
            let mut source = logits.buf;
            if p.penalises() {
                if seen.len() != rows {
                    return Err(Error::shape("sample_rows", format!("a repetition penalty with earlier tokens of {} rows for {rows}", seen.len())));
                }
                let mut at: Vec<i32> = Vec::new();
                for (r, tokens) in seen.iter().enumerate() {
                    let mut distinct: Vec<u32> = tokens.iter().copied().filter(|&t| (t as usize) < vocab).collect();
                    distinct.sort_unstable();
                    distinct.dedup();
                    at.extend(distinct.iter().map(|&t| (r * vocab + t as usize) as i32));
                }
                penalised = c.alloc(DType::F32, rows * vocab)?;
                c.d.copy(logits.buf, penalised.buf)?;
                if !at.is_empty() {
                    let at_buf = c.upload_i32(&at)?;
                    ops::sample::repetition_penalty(&mut *c.d, &c.t, penalised.buf, at_buf.buf, at.len(), rows, vocab, p.repetition_penalty as f32)?;
                }
                source = penalised.buf;
            }
            let probs = c.alloc(DType::F32, rows * vocab)?;
            let u = c.upload_f64(draws)?;
            let (token, logprob) = (c.alloc(DType::I32, rows)?, c.alloc(DType::F32, rows)?);
            ops::sample::sample(&mut *c.d, &c.t, source, probs.buf, u.buf, token.buf, logprob.buf, rows, vocab, p)?;
            let tokens = c.d.read(token.buf)?;
            let logprobs = c.download_f32(logprob.buf)?;
            Ok(tokens.chunks_exact(4).map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as u32).zip(logprobs).collect())
        })
    }

    fn logprobs(&self, g: &Gather, h: View<'_>, head: View<'_>, vocab: usize, width: usize, keep: bool, p: Precision) -> Scored<Self> {
        self.run("logprobs", |c| {
            let s = logprob::forward(c, g, h.buf, head.buf, vocab, width, keep, p)?;
            Ok(Scored { out: s.out, entropy: s.entropy, lse: s.lse, logits: s.logits })
        })
    }
    fn logprobs_backward(
        &self,
        g: &Gather,
        kept: Option<Vec<Self::Buf>>,
        lse: View<'_>,
        h: View<'_>,
        head: View<'_>,
        dlogp: &[f32],
        vocab: usize,
        width: usize,
        dh: ViewMut<'_>,
        dhead: Option<ViewMut<'_>>,
        p: Precision,
    ) {
        self.run("logprobs_backward", |c| logprob::backward(c, g, kept, lse.buf, h.buf, head.buf, dlogp, vocab, width, dh.buf, dhead.map(|d| d.buf), p))
    }

    /// At bf16 products the head's products read its copy as it is, not a rounding made per chunk.
    fn logprobs_half(&self, g: &Gather, h: View<'_>, head: View<'_>, head_half: &Self::Half, vocab: usize, width: usize, keep: bool, p: Precision) -> Scored<Self> {
        let head = if p == Precision::F32 { head.buf } else { head_half.buf };
        self.run("logprobs", |c| {
            let s = logprob::forward(c, g, h.buf, head, vocab, width, keep, p)?;
            Ok(Scored { out: s.out, entropy: s.entropy, lse: s.lse, logits: s.logits })
        })
    }
    fn logprobs_backward_half(
        &self,
        g: &Gather,
        kept: Option<Vec<Self::Buf>>,
        lse: View<'_>,
        h: View<'_>,
        head: View<'_>,
        head_half: &Self::Half,
        dlogp: &[f32],
        vocab: usize,
        width: usize,
        dh: ViewMut<'_>,
        dhead: Option<ViewMut<'_>>,
        p: Precision,
    ) {
        let head = if p == Precision::F32 { head.buf } else { head_half.buf };
        self.run("logprobs_backward", |c| logprob::backward(c, g, kept, lse.buf, h.buf, head, dlogp, vocab, width, dh.buf, dhead.map(|d| d.buf), p))
    }

    fn rope(&self, x: ViewMut<'_>, heads: usize, positions: &[usize], table: &RopeTable) {
        self.run("rope", |c| c.rope(table, x.buf, x.buf, heads, positions, false))
    }
    fn cache_write(&self, cache_k: ViewMut<'_>, cache_v: ViewMut<'_>, l: &CacheLayout, k: View<'_>, v: View<'_>, slots: &[(usize, usize)]) {
        self.run("cache_write", |c| {
            if slots.is_empty() {
                return Ok(());
            }
            let shape = cache_shape("cache_write", l, cache_k.buf)?;
            let rows = c.upload_ids("cache_write", slots.iter().map(|s| s.0), shape.rows)?;
            let pos = c.upload_ids("cache_write", slots.iter().map(|s| s.1), shape.max_len)?;
            ops::decode::append(&mut *c.d, &c.t, &shape, k.buf, v.buf, cache_k.buf, cache_v.buf, rows.buf, pos.buf, slots)
        })
    }
    fn cache_copy_row(&self, cache: ViewMut<'_>, l: &CacheLayout, from: usize, len: usize, to: &[usize]) {
        self.run("cache_copy_row", |c| {
            let shape = cache_shape("cache_copy_row", l, cache.buf)?;
            if len > l.max_len || from >= shape.rows || to.iter().any(|&t| t >= shape.rows) {
                return Err(Error::shape("cache_copy_row", format!("rows {from} -> {to:?}, {len} positions, of a cache of {} x {}", shape.rows, l.max_len)));
            }
            if len == 0 {
                return Ok(());
            }
            for &t in to.iter().filter(|&&t| t != from) {
                for kh in 0..l.kv_heads {
                    let n = len * l.head_dim;
                    c.d.copy(cache.buf.slice(l.offset(from, kh), n)?, cache.buf.slice(l.offset(t, kh), n)?)?;
                }
            }
            Ok(())
        })
    }
    fn cached_attention(&self, q: View<'_>, cache_k: View<'_>, cache_v: View<'_>, l: &CacheLayout, heads: usize, queries: &[CachedQuery], out: ViewMut<'_>) {
        self.run("cached_attention", |c| {
            if queries.is_empty() {
                return Ok(());
            }
            let shape = cache_shape("cached_attention", l, cache_k.buf)?;
            let keys: Vec<ops::decode::Keys> = queries
                .iter()
                .map(|q| ops::decode::Keys { prompt: None, own: ops::decode::Segment { row: q.row, start: 0, len: q.visible } })
                .collect();
            let segs = c.upload_i32(&ops::decode::segment_table(&keys))?;
            let scale = (1.0 / (l.head_dim as f64).sqrt()) as f32;
            ops::decode::attention(&mut *c.d, &c.t, &shape, heads, q.buf, cache_k.buf, cache_v.buf, out.buf, segs.buf, &keys, scale)
        })
    }

    fn bf16_cache_zeros(&self, n: usize) -> Option<Self::Buf> {
        Some(self.run("bf16_cache_zeros", |c| {
            let b = c.alloc(DType::Bf16, n)?;
            if n > 0 {
                ops::elementwise::fill(&mut *c.d, &c.t, b.buf, 0.0, n)?;
            }
            Ok(b)
        }))
    }

    fn adamw(&self, w: ViewMut<'_>, g: View<'_>, m: ViewMut<'_>, v: ViewMut<'_>, s: &AdamWStep) {
        self.run("adamw", |c| {
            for b in [m.buf, v.buf, g.buf] {
                same_len("adamw", w.buf, b)?;
            }
            if w.buf.len == 0 {
                return Ok(());
            }
            // The clipping coefficient the caller computed; a finite "norm" so the kernel applies it.
            let stats = c.upload_f64(&[0.0, s.grad_scale])?;
            let h = ops::adamw::Hyper { lr: s.lr, beta1: s.beta1, beta2: s.beta2, eps: s.eps, weight_decay: s.weight_decay, step: s.step };
            ops::adamw::update(&mut *c.d, &c.t, w.buf, g.buf, m.buf, v.buf, None, w.buf.len, &h, true, stats.buf)
        })
    }
    fn adamw_all(&self, params: Vec<AdamWParam<'_, Self>>, g: View<'_>, m: ViewMut<'_>, v: ViewMut<'_>, s: &AdamWStep) {
        self.run("adamw_all", |c| {
            for b in [m.buf, v.buf] {
                same_len("adamw_all", g.buf, b)?;
            }
            let h = ops::adamw::Hyper { lr: s.lr, beta1: s.beta1, beta2: s.beta2, eps: s.eps, weight_decay: s.weight_decay, step: s.step };
            let list: Vec<ops::adamw::Tensor> =
                params.iter().map(|p| ops::adamw::Tensor { p: p.w.buf, p_bf16: p.half.as_ref().map(|x| x.buf), offset: p.offset, decay: p.decay }).collect();
            // A block's chunk: 256 of its strides, so a 1.5B model takes about 24k blocks.
            let table = ops::adamw::TensorTable::new(&list, g.buf.len, c.t.block as usize * 256, &h)?;
            if table.blocks() == 0 {
                return Ok(());
            }
            let (tensors, decays, chunks) = (c.upload_i64(&table.tensors)?, c.upload_f32(&table.decays)?, c.upload_i64(&table.chunks)?);
            let stats = c.upload_f64(&[0.0, s.grad_scale])?;
            ops::adamw::update_tensors(&mut *c.d, &c.t, &table, [tensors.buf, decays.buf, chunks.buf], g.buf, m.buf, v.buf, &h, stats.buf)
        })
    }
    fn sum_squares(&self, x: View<'_>) -> f64 {
        self.run("sum_squares", |c| {
            let n = x.buf.len;
            if n == 0 {
                return Ok(0.0);
            }
            x.buf.need("sum_squares", "x", &[DType::F32], n)?;
            let cfg = c.t.flat(n);
            let partial = c.alloc(DType::F64, cfg.grid.0 as usize)?;
            launch(&mut *c.d, "sumsq_partial", cfg, &[x.buf.into(), Arg::I64(n as i64), partial.buf.into()])?;
            let bytes = c.d.read(partial.buf)?;
            Ok(bytes.chunks_exact(8).map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes"))).sum())
        })
    }
    fn add_into(&self, dst: ViewMut<'_>, src: View<'_>) {
        self.run("add_into", |c| {
            same_len("add_into", dst.buf, src.buf)?;
            if dst.buf.len > 0 {
                ops::elementwise::add(&mut *c.d, &c.t, dst.buf, src.buf, dst.buf.len)?;
            }
            Ok(())
        })
    }
}

/// The kernels' cache shape for a layer's cache buffer laid out as `l`.
fn cache_shape(op: &'static str, l: &CacheLayout, cache: Buf) -> Result<ops::decode::CacheShape> {
    let rows = rows_of(op, cache.len, l.kv_heads * l.max_len * l.head_dim)?;
    Ok(ops::decode::CacheShape { rows, kv_heads: l.kv_heads, max_len: l.max_len, head_dim: l.head_dim })
}
