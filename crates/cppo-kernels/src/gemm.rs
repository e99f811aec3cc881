//! A strided view of a matrix and `dst (+)= scale * a @ b` on such views, through the `gemm` crate (the
//! same kernels candle's CPU matmul uses), so the kernels can multiply heads and chunks in place
//! without transposing or copying them first.

use super::{Float, Precision};
use gemm::Parallelism;

/// A matrix in memory: element (i, j) lives at `ptr + i * rs + j * cs`.
#[derive(Clone, Copy)]
pub struct View<T> {
    pub ptr: *const T,
    pub rs: usize,
    pub cs: usize,
}

impl<T> View<T> {
    /// A row-major matrix whose rows are `rs` elements apart.
    pub fn rows(ptr: *const T, rs: usize) -> Self {
        View { ptr, rs, cs: 1 }
    }
    /// The transpose of the same memory.
    pub fn t(self) -> Self {
        View {
            ptr: self.ptr,
            rs: self.cs,
            cs: self.rs,
        }
    }
}

#[derive(Clone, Copy)]
pub struct ViewMut<T> {
    pub ptr: *mut T,
    pub rs: usize,
    pub cs: usize,
}

impl<T> ViewMut<T> {
    pub fn rows(ptr: *mut T, rs: usize) -> Self {
        ViewMut { ptr, rs, cs: 1 }
    }
}

/// Threads for a parallel multiply, looked up once: candle's lookup reads /proc/cpuinfo on every call.
pub fn threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(candle_core::utils::get_num_threads)
}

/// `dst (m x n) = [dst +] scale * a (m x k) @ b (k x n)`, in bf16 (`gemm_bf16`) when `precision` says so
/// and the machine can.
///
/// # Safety
/// Every view must address valid memory for the given sizes, and `dst` must not overlap `a` or `b`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn matmul<T: Float>(
    precision: Precision,
    m: usize,
    n: usize,
    k: usize,
    dst: ViewMut<T>,
    accumulate: bool,
    a: View<T>,
    b: View<T>,
    scale: T,
    parallel: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                for j in 0..n {
                    *dst.ptr.add(i * dst.rs + j * dst.cs) = T::zero();
                }
            }
        }
        return;
    }
    if precision.is_bf16()
        && T::matmul_bf16(m, n, k, dst, accumulate, a, b, scale, parallel)
    {
        return;
    }
    let threads = if parallel { threads() } else { 1 };
    let parallelism = if threads > 1 {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    };
    gemm::gemm(
        m,
        n,
        k,
        dst.ptr,
        dst.cs as isize,
        dst.rs as isize,
        accumulate,
        a.ptr,
        a.cs as isize,
        a.rs as isize,
        b.ptr,
        b.cs as isize,
        b.rs as isize,
        T::one(),
        scale,
        false,
        false,
        false,
        parallelism,
    )
}
