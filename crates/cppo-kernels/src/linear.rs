//! `y = x @ W^T (+ b)` with the weight kept as stored (out, in), as one graph node whose backward writes
//! dW in that same layout (candle's matmul of `x` by `W.t()` would hand back a transposed gradient that
//! the gradient store then copies element by element).

use super::gemm::{matmul, View, ViewMut};
use super::{Float, Precision};

/// `y (n x dout) = x (n x din) @ w (dout x din)^T (+ b)`.
pub fn forward_slices<T: Float>(
    x: &[T],
    w: &[T],
    b: Option<&[T]>,
    din: usize,
    dout: usize,
    p: Precision,
) -> Vec<T> {
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
pub fn accumulate<T: Float>(
    y: &mut [T],
    x: &[T],
    w: &[T],
    din: usize,
    dout: usize,
    add: bool,
    p: Precision,
) {
    let n = x.len() / din.max(1);
    // The products below read and write through raw views: a short slice must stop here, not there.
    assert!(y.len() >= n * dout && w.len() >= dout * din, "linear: y {} / w {} for {n} rows of {din} -> {dout}", y.len(), w.len());
    // SAFETY: x holds n rows of din (the definition of n); y (n x dout) and w (dout x din) are at least
    // that long (asserted above). y is a `&mut` slice, so it overlaps neither input.
    if p.is_bf16()
        && unsafe {
            T::matmul_bf16(
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
        }
    {
        return;
    }
    if T::skinny(y, x, w, din, dout, add) {
        return;
    }
    if n > 1 && n <= SKINNY_ROWS {
        let mut t = vec![T::zero(); n * dout];
        // SAFETY: t is n x dout (column-major) by construction; x and w as in the bf16 product above.
        unsafe {
            matmul(
                Precision::F32,
                n,
                dout,
                din,
                ViewMut {
                    ptr: t.as_mut_ptr(),
                    rs: 1,
                    cs: n,
                },
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
    // SAFETY: as for the bf16 product above: x by the definition of n; y and w asserted.
    unsafe {
        matmul(
            Precision::F32,
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

/// One weight of a generation-path product (its bf16 copy too, when the rollout has one) and where its
/// product goes: `y (n x n_out) (+)= x @ w^T`, a whole row-major matrix.
pub struct ProjectOut<'a, T> {
    pub w: &'a [T],
    pub half: Option<&'a [u16]>,
    pub n: usize,
    pub y: &'a mut [T],
    pub add: bool,
}

/// Up to this many chunks of `skinny::MAX_ROWS` rows (a large decode step, a short prefill), streaming
/// the weights once per chunk beats one general multiply over all the rows.
const SKINNY_CHUNKS: usize = 2;

/// The generation path's `outs[i].y (+)= x (n x din) @ outs[i].w^T`: a decode step's few rows go through
/// the skinny kernel, every weight of one input in a single dispatch (from the bf16 copy where there is
/// one); more rows through the general multiply in f32, unless a bf16 copy is given (then chunks of the
/// skinny kernel).
pub fn project_f32(x: &[f32], n: usize, din: usize, outs: &mut [ProjectOut<f32>]) {
    use super::skinny::{self, Out, Weight};
    // A bf16 snapshot is read by every product of its generation, however many rows (a long prompt
    // too), so the sampled distribution does not depend on how rows were batched.
    let half = outs.iter().any(|o| o.half.is_some());
    if (half || n <= SKINNY_CHUNKS * skinny::MAX_ROWS) && skinny::available() {
        let chunks = n.div_ceil(skinny::MAX_ROWS);
        let per = n.div_ceil(chunks.max(1)).max(1);
        for r0 in (0..n).step_by(per) {
            let m = per.min(n - r0);
            let mut part: Vec<Out> = outs
                .iter_mut()
                .map(|o| Out {
                    w: o.half.map_or(Weight::F32(o.w), Weight::Bf16),
                    n: o.n,
                    y: &mut o.y[r0 * o.n..],
                    ys: o.n,
                    add: o.add,
                })
                .collect();
            skinny::matmul_many(&x[r0 * din..], m, din, &mut part, super::gemm::threads());
        }
        return;
    }
    for o in outs.iter_mut() {
        match o.half {
            // Without the skinny kernel a bf16 weight (a snapshot, or a weight held only in bf16,
            // whose `w` is then empty) is widened for the product, exactly.
            Some(h) => {
                let wide: Vec<f32> = h.iter().map(|&v| super::skinny::from_bf16(v)).collect();
                accumulate(o.y, x, &wide, din, o.n, o.add, Precision::F32);
            }
            None => accumulate(o.y, x, o.w, din, o.n, o.add, Precision::F32),
        }
    }
}

/// `dx (n x din) (+)= g (n x dout) @ w (dout x din)`.
pub fn grad_input<T: Float>(
    dx: &mut [T],
    g: &[T],
    w: &[T],
    din: usize,
    dout: usize,
    add: bool,
    p: Precision,
) {
    let n = g.len() / dout.max(1);
    assert!(dx.len() >= n * din && w.len() >= dout * din, "linear backward: dx {} / w {} for {n} rows of {din} <- {dout}", dx.len(), w.len());
    // SAFETY: g holds n rows of dout (the definition of n); dx (n x din) and w (dout x din) are at least
    // that long (asserted above); dx is a `&mut` slice, so it overlaps neither input.
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
pub fn grad_weight<T: Float>(
    g: &[T],
    x: &[T],
    din: usize,
    dout: usize,
    p: Precision,
) -> Vec<T> {
    let n = g.len() / dout.max(1);
    let mut dw = vec![T::zero(); dout * din];
    assert!(x.len() >= n * din, "linear weight gradient: x {} for {n} rows of {din}", x.len());
    // SAFETY: dw is dout x din by construction, g n x dout by the definition of n, and x n x din
    // (asserted above).
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
