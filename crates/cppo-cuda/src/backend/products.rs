//! The linear layers' products (forward, the generation path's shared-input projections, both
//! gradients) as row-major `Gemm`s, with operands cast to bf16 first where the precision asks.

use cppo_kernels::Precision;

use super::{rows_of, Ctx, DeviceSide};
use crate::buf::{Buf, DType};
use crate::error::{Error, Result};
use crate::gemm::{Gemm, Operand};
use crate::ops;

/// `d (m x n, rows n apart) = op(a) op(b) (+ d when accumulating)`, `k` deep; operands rounded to
/// bf16 first when `p` is `Bf16` and they are f32. An empty product overwrites `d` with zeros (or
/// leaves it, accumulating), as a sum over nothing.
#[allow(clippy::too_many_arguments)]
pub(crate) fn product<D: DeviceSide>(c: &mut Ctx<'_, D>, m: usize, n: usize, k: usize, a: (Buf, Operand), b: (Buf, Operand), d: Buf, accumulate: bool, p: Precision) -> Result<()> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        if !accumulate {
            ops::elementwise::fill(&mut *c.d, &c.t, d, 0.0, m * n)?;
        }
        return Ok(());
    }
    let g = Gemm { m, n, k, a: a.1, b: b.1, ld_d: n, alpha: 1.0, beta: if accumulate { 1.0 } else { 0.0 }, batch: None };
    let (ea, eb, _) = g.extents();
    let (mut ab, mut bb) = (a.0.slice(0, ea)?, b.0.slice(0, eb)?);
    // Kept alive until the product has been issued (a stream-ordered free comes after it).
    let mut tmp = Vec::new();
    if p != Precision::F32 {
        for op in [&mut ab, &mut bb] {
            if op.dtype == DType::F32 {
                let h = c.bf16_copy(*op)?;
                *op = h.buf();
                tmp.push(h);
            }
        }
    } else if ab.dtype != bb.dtype {
        return Err(Error::shape("matmul", format!("operands of {:?} and {:?} at full precision", ab.dtype, bb.dtype)));
    }
    c.d.matmul(&g, ab, bb, d)?;
    drop(tmp);
    Ok(())
}

fn plain(ld: usize) -> Operand {
    Operand { trans: false, ld }
}

fn transposed(ld: usize) -> Operand {
    Operand { trans: true, ld }
}

/// `y (+)= x w^T (+ bias)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn linear<D: DeviceSide>(c: &mut Ctx<'_, D>, x: Buf, w: Buf, bias: Option<Buf>, din: usize, dout: usize, y: Buf, add: bool, p: Precision) -> Result<()> {
    let n = rows_of("linear", y.len, dout)?;
    x.need("linear", "x", &[DType::F32], n * din)?;
    // A bf16 weight is a copy the caller keeps for bf16 products (`linear_half`).
    let dtypes: &[DType] = if p == Precision::F32 { &[DType::F32] } else { &[DType::F32, DType::Bf16] };
    w.need("linear", "w", dtypes, dout * din)?;
    product(c, n, dout, din, (x, plain(din)), (w, transposed(din)), y, add, p)?;
    if let Some(b) = bias {
        if n > 0 {
            ops::elementwise::add_bias(&mut *c.d, &c.t, y, b, n, dout)?;
        }
    }
    Ok(())
}

/// One output of `project`.
pub(crate) struct Out {
    pub w: Buf,
    pub half: Option<Buf>,
    pub bias: Option<Buf>,
    pub dout: usize,
    pub y: Buf,
    pub add: bool,
}

/// Several weights over one input: each from its bf16 copy where given (the input rounded to bf16
/// once for all of them), else in f32. A bias replaces what `y` held, as on the CPU.
pub(crate) fn project<D: DeviceSide>(c: &mut Ctx<'_, D>, x: Buf, n: usize, din: usize, outs: &[Out]) -> Result<()> {
    x.need("project", "x", &[DType::F32], n * din)?;
    let x_half = if outs.iter().any(|o| o.half.is_some()) { Some(c.bf16_copy(x.slice(0, n * din)?)?) } else { None };
    for o in outs {
        o.y.need("project", "y", &[DType::F32], n * o.dout)?;
        let accumulate = o.add && o.bias.is_none();
        match (o.half, &x_half) {
            (Some(h), Some(xh)) => {
                h.need("project", "bf16 weight", &[DType::Bf16], o.dout * din)?;
                product(c, n, o.dout, din, (xh.buf(), plain(din)), (h, transposed(din)), o.y, accumulate, Precision::Bf16)?;
            }
            _ => {
                o.w.need("project", "w", &[DType::F32], o.dout * din)?;
                product(c, n, o.dout, din, (x, plain(din)), (o.w, transposed(din)), o.y, accumulate, Precision::F32)?;
            }
        }
        if let Some(b) = o.bias {
            if n > 0 {
                ops::elementwise::add_bias(&mut *c.d, &c.t, o.y, b, n, o.dout)?;
            }
        }
    }
    Ok(())
}

/// `dx (n x din) (+)= g (n x dout) w (dout x din)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn grad_input<D: DeviceSide>(c: &mut Ctx<'_, D>, dx: Buf, g: Buf, w: Buf, din: usize, dout: usize, add: bool, p: Precision) -> Result<()> {
    let n = rows_of("linear_grad_input", g.len, dout)?;
    dx.need("linear_grad_input", "dx", &[DType::F32], n * din)?;
    let dtypes: &[DType] = if p == Precision::F32 { &[DType::F32] } else { &[DType::F32, DType::Bf16] };
    w.need("linear_grad_input", "w", dtypes, dout * din)?;
    product(c, n, din, dout, (g, plain(dout)), (w, plain(din)), dx, add, p)
}

/// `g (n x dout)^T x (n x din)`, a new `dout x din` buffer.
pub(crate) fn grad_weight<D: DeviceSide>(c: &mut Ctx<'_, D>, g: Buf, x: Buf, din: usize, dout: usize, p: Precision) -> Result<super::DevBuf<D::Mem>> {
    let n = rows_of("linear_grad_weight", g.len, dout)?;
    x.need("linear_grad_weight", "x", &[DType::F32], n * din)?;
    let out = c.alloc(DType::F32, dout * din)?;
    product(c, dout, din, n, (g, transposed(dout)), (x, plain(din)), out.buf(), false, p)?;
    Ok(out)
}
