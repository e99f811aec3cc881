//! `y = x @ W^T (+ b)` with the weight kept as stored (out, in), as one graph node whose backward writes
//! dW in that same layout (candle's matmul of `x` by `W.t()` would hand back a transposed gradient that
//! the gradient store then copies element by element).

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor};

use super::gemm::{matmul, View, ViewMut};
use super::{dispatch, slice, storage, tensor, with_data, Float};

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
    let (n, din, dout, shape) = dims(lx.shape(), lw.shape(), b.map(|(_, l)| l.shape()))?;
    let x = slice::<T>(x, lx, "linear x")?;
    let w = slice::<T>(w, lw, "linear w")?;
    let mut y = vec![T::zero(); n * dout];
    if let Some((bs, bl)) = b {
        let b = slice::<T>(bs, bl, "linear b")?;
        for row in y.chunks_exact_mut(dout) {
            row.copy_from_slice(b);
        }
    }
    unsafe {
        matmul(
            n,
            dout,
            din,
            ViewMut::rows(y.as_mut_ptr(), dout),
            b.is_some(),
            View::rows(x.as_ptr(), din),
            View::rows(w.as_ptr(), din).t(),
            T::one(),
            true,
        )
    };
    Ok((storage(y), shape))
}

/// dx = g @ W
fn grad_x<T: Float>(g: &Tensor, w: &Tensor, x: &Tensor) -> Result<Tensor> {
    let (dout, din) = w.dims2()?;
    let n = g.elem_count() / dout;
    let dx = with_data::<T, _>(g, |g| {
        with_data::<T, _>(w, |w| {
            let mut dx = vec![T::zero(); n * din];
            unsafe {
                matmul(
                    n,
                    din,
                    dout,
                    ViewMut::rows(dx.as_mut_ptr(), din),
                    false,
                    View::rows(g.as_ptr(), dout),
                    View::rows(w.as_ptr(), din),
                    T::one(),
                    true,
                )
            };
            dx
        })
    })??;
    tensor(dx, x.shape(), x.device())
}

/// dW = g^T @ x
fn grad_w<T: Float>(g: &Tensor, x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let (dout, din) = w.dims2()?;
    let n = g.elem_count() / dout;
    let dw = with_data::<T, _>(g, |g| {
        with_data::<T, _>(x, |x| {
            let mut dw = vec![T::zero(); dout * din];
            unsafe {
                matmul(
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
        })
    })??;
    tensor(dw, w.shape(), w.device())
}

/// db = the column sums of g
fn grad_b<T: Float>(g: &Tensor, b: &Tensor) -> Result<Tensor> {
    let dout = b.elem_count();
    let db = with_data::<T, _>(g, |g| {
        let mut db = vec![T::zero(); dout];
        for row in g.chunks_exact(dout) {
            for (d, &v) in db.iter_mut().zip(row) {
                *d += v;
            }
        }
        db
    })?;
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
