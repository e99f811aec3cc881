//! What the backend needs from a device besides kernel launches: memory, copies and the matrix
//! products. The CUDA device (`cuda::CudaSide`) implements it with cudarc and cuBLASLt; the tests
//! implement it over the CPU emulation with host memory and `gemm::host_matmul`, so the backend's
//! own code (every launch, every product's shape, every temporary) runs in `cargo test`.

use crate::buf::{Buf, DType};
use crate::error::Result;
use crate::gemm::Gemm;
use crate::geometry::Tune;
use crate::launch::Launcher;

pub trait DeviceSide: Launcher + Send {
    /// An owned allocation; dropping it frees the memory (after the work queued before, on a
    /// stream-ordered device).
    type Mem: Send + Sync;

    /// A short name for reports (`cuda`, `cuda-emulated`).
    fn name(&self) -> &'static str;
    /// Launch geometry for this device.
    fn tune(&self) -> Tune;

    /// `len` elements of `dtype`, contents unspecified (the emulation poisons them with NaN).
    fn alloc(&mut self, dtype: DType, len: usize) -> Result<Self::Mem>;
    /// The kernels' view of an allocation.
    fn buf_of(m: &Self::Mem) -> Buf;
    /// `dst`'s bytes from host memory (`bytes.len()` is `dst.len * dtype size`).
    fn write(&mut self, dst: Buf, bytes: &[u8]) -> Result<()>;
    /// `src`'s bytes, after everything queued before has run.
    fn read(&mut self, src: Buf) -> Result<Vec<u8>>;
    /// `dst = src` (same dtype and length; the two do not overlap).
    fn copy(&mut self, src: Buf, dst: Buf) -> Result<()>;
    /// `d = alpha op(a) op(b) + beta d` (row-major, `gemm::Gemm`); `a` and `b` of one dtype (bf16 or
    /// f32), accumulation in f32.
    fn matmul(&mut self, g: &Gemm, a: Buf, b: Buf, d: Buf) -> Result<()>;
}
