//! `y = x @ W^T (+ b)` with the weight kept as stored (out, in), as one graph node whose backward writes
//! dW in that same layout (candle's matmul of `x` by `W.t()` would hand back a transposed gradient that
//! the gradient store then copies element by element).

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor};

use super::gemm::{matmul, View, ViewMut};
use super::{dispatch, slice, storage, tensor, with_data, Float, MatmulPrecision};

/// `x (.., in) @ w (out, in)^T + b (out)`.
pub fn linear(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    let x = x.contiguous()?;
    let w = w.contiguous()?;
    match b {
        None => x.apply_op2(&w, Linear),
        Some(b) => x.apply_op3(&w, &b.contiguous()?, Linear),
    }
}

struct Linear;

fn dims(x: &Shape, w: &Shape, b: Option<&Shape>) -> Result<(usize, usize, usize, Shape)> {
    let (dout, din) = w.dims2()?;
    let xd = x.dims();
    if xd.is_empty() || xd[xd.len() - 1] != din {
        bail!("linear: input {x:?} does not end in the weight's input size {din} (weight {w:?})");
    }
    if let Some(b) = b {
        if b.dims() != [dout] {
            bail!("linear: bias {b:?} does not match the weight's output size {dout}");
        }
    }
    let n = x.elem_count() / din;
    let mut out = xd.to_vec();
    *out.last_mut().unwrap() = dout;
    Ok((n, din, dout, Shape::from(out)))
}

fn forward<T: Float>(
    x: &CpuStorage,
    lx: &Layout,
    w: &CpuStorage,
    lw: &Layout,
    b: Option<(&CpuStorage, &Layout)>,
) -> Result<(CpuStorage, Shape)> {
    let (_, din, dout, shape) = dims(lx.shape(), lw.shape(), b.map(|(_, l)| l.shape()))?;
    let x = slice::<T>(x, lx, "linear x")?;
    let w = slice::<T>(w, lw, "linear w")?;
    let b = match b {
        Some((bs, bl)) => Some(slice::<T>(bs, bl, "linear b")?),
        None => None,
    };
    Ok((storage(forward_slices(x, w, b, din, dout, MatmulPrecision::Full)), shape))
}

/// `y (n x dout) = x (n x din) @ w (dout x din)^T (+ b)`.
pub fn forward_slices<T: Float>(x: &[T], w: &[T], b: Option<&[T]>, din: usize, dout: usize, p: MatmulPrecision) -> Vec<T> {
    let n = x.len() / din.max(1);
    let mut y = vec![T::zero(); n * dout];
    if let Some(b) = b {
        for row in y.chunks_exact_mut(dout) {
            row.copy_from_slice(b);
        }
    }
    accumulate(&mut y, x, w, din, dout, b.is_some(), p);
    y
}

/// Up to this many rows, the product is written column-major and transposed into place: gemm runs
/// 1.2-1.5x faster that way at 32-256 rows (measured on the model's shapes at 2 threads, AVX-512);
/// at 650 rows both layouts are equal.
const SKINNY_ROWS: usize = 256;

/// `y (+)= x @ w^T` in place (`add` keeps what `y` holds, e.g. the residual stream).
pub fn accumulate<T: Float>(y: &mut [T], x: &[T], w: &[T], din: usize, dout: usize, add: bool, p: MatmulPrecision) {
    let n = x.len() / din.max(1);
    if p == MatmulPrecision::Bf16
        && unsafe { T::matmul_bf16(n, dout, din, ViewMut::rows(y.as_mut_ptr(), dout), add, View::rows(x.as_ptr(), din), View::rows(w.as_ptr(), din).t(), T::one(), true) }
    {
        return;
    }
    if T::skinny(y, x, w, din, dout, add) {
        return;
    }
    if n > 1 && n <= SKINNY_ROWS {
        let mut t = vec![T::zero(); n * dout];
        unsafe {
            matmul(
                MatmulPrecision::Full,
                n,
                dout,
                din,
                ViewMut { ptr: t.as_mut_ptr(), rs: 1, cs: n },
                false,
                View::rows(x.as_ptr(), din),
                View::rows(w.as_ptr(), din).t(),
                T::one(),
                true,
            )
        };
        transpose_into(y, &t, n, dout, add);
        return;
    }
    unsafe {
        matmul(
            MatmulPrecision::Full,
            n,
            dout,
            din,
            ViewMut::rows(y.as_mut_ptr(), dout),
            add,
            View::rows(x.as_ptr(), din),
            View::rows(w.as_ptr(), din).t(),
            T::one(),
            true,
        )
    };
}

/// `y (n x dout, row-major) (+)= t (n x dout, column-major)`, a tile of columns at a time so that both
/// sides stay in cache (a column at a time, every write of a wide output lands on another line).
fn transpose_into<T: Float>(y: &mut [T], t: &[T], n: usize, dout: usize, add: bool) {
    const TILE: usize = 16;
    for j0 in (0..dout).step_by(TILE) {
        let j1 = (j0 + TILE).min(dout);
        for i in 0..n {
            let row = &mut y[i * dout + j0..i * dout + j1];
            for (jj, o) in row.iter_mut().enumerate() {
                let v = t[(j0 + jj) * n + i];
                *o = if add { *o + v } else { v };
            }
        }
    }
}

/// `dx (n x din) (+)= g (n x dout) @ w (dout x din)`.
pub fn grad_input<T: Float>(dx: &mut [T], g: &[T], w: &[T], din: usize, dout: usize, add: bool, p: MatmulPrecision) {
    let n = g.len() / dout.max(1);
    unsafe {
        matmul(
            p,
            n,
            din,
            dout,
            ViewMut::rows(dx.as_mut_ptr(), din),
            add,
            View::rows(g.as_ptr(), dout),
            View::rows(w.as_ptr(), din),
            T::one(),
            true,
        )
    };
}

/// `dw (dout x din) = g (n x dout)^T @ x (n x din)`.
pub fn grad_weight<T: Float>(g: &[T], x: &[T], din: usize, dout: usize, p: MatmulPrecision) -> Vec<T> {
    let n = g.len() / dout.max(1);
    let mut dw = vec![T::zero(); dout * din];
    unsafe {
        matmul(
            p,
            dout,
            din,
            n,
            ViewMut::rows(dw.as_mut_ptr(), din),
            false,
            View::rows(g.as_ptr(), dout).t(),
            View::rows(x.as_ptr(), din),
            T::one(),
            true,
        )
    };
    dw
}

/// `db = the column sums of g (n x dout)`.
pub fn grad_bias<T: Float>(g: &[T], dout: usize) -> Vec<T> {
    let mut db = vec![T::zero(); dout];
    for row in g.chunks_exact(dout) {
        for (d, &v) in db.iter_mut().zip(row) {
            *d += v;
        }
    }
    db
}

fn grad_x<T: Float>(g: &Tensor, w: &Tensor, x: &Tensor) -> Result<Tensor> {
    let (dout, din) = w.dims2()?;
    let n = g.elem_count() / dout;
    let dx = with_data::<T, _>(g, |g| {
        with_data::<T, _>(w, |w| {
            let mut dx = vec![T::zero(); n * din];
            grad_input(&mut dx, g, w, din, dout, false, MatmulPrecision::Full);
            dx
        })
    })??;
    tensor(dx, x.shape(), x.device())
}

fn grad_w<T: Float>(g: &Tensor, x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let (dout, din) = w.dims2()?;
    let dw = with_data::<T, _>(g, |g| with_data::<T, _>(x, |x| grad_weight(g, x, din, dout, MatmulPrecision::Full)))??;
    tensor(dw, w.shape(), w.device())
}

fn grad_b<T: Float>(g: &Tensor, b: &Tensor) -> Result<Tensor> {
    let db = with_data::<T, _>(g, |g| grad_bias(g, b.elem_count()))?;
    tensor(db, b.shape(), b.device())
}

fn maybe<T>(need: bool, f: impl FnOnce() -> Result<T>) -> Result<Option<T>> {
    if need {
        f().map(Some)
    } else {
        Ok(None)
    }
}

impl CustomOp2 for Linear {
    fn name(&self) -> &'static str {
        "cppo-linear"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        dispatch!(s1.dtype(), "linear", forward(s1, l1, s2, l2, None))
    }

    fn bwd(&self, x: &Tensor, w: &Tensor, _res: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let g = g.contiguous()?;
        let dx = maybe(x.track_op(), || dispatch!(g.dtype(), "linear", grad_x(&g, w, x)))?;
        // A frozen weight costs no dW.
        let dw = maybe(w.track_op(), || dispatch!(g.dtype(), "linear", grad_w(&g, x, w)))?;
        Ok((dx, dw))
    }
}

impl CustomOp3 for Linear {
    fn name(&self) -> &'static str {
        "cppo-linear-bias"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        dispatch!(s1.dtype(), "linear", forward(s1, l1, s2, l2, Some((s3, l3))))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let g = g.contiguous()?;
        let dx = maybe(x.track_op(), || dispatch!(g.dtype(), "linear", grad_x(&g, w, x)))?;
        let dw = maybe(w.track_op(), || dispatch!(g.dtype(), "linear", grad_w(&g, x, w)))?;
        let db = maybe(b.track_op(), || dispatch!(g.dtype(), "linear", grad_b(&g, b)))?;
        Ok((dx, dw, db))
    }
}
