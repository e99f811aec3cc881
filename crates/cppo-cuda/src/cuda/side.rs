//! The GPU as the backend's device side: cudarc allocations, raw stream-ordered copies, our kernels
//! through the module cache, products through cuBLASLt. Never run on a GPU yet.

use cudarc::driver::result as drv;

use super::blas::Blas;
use super::device::{Device, DeviceBuffer};
use crate::backend::DeviceSide;
use crate::buf::{Buf, DType};
use crate::error::{Error, Result};
use crate::gemm::Gemm;
use crate::geometry::Tune;
use crate::kernels::Kernel;
use crate::launch::{Arg, LaunchConfig, Launcher};

pub struct CudaSide {
    dev: Device,
    blas: Blas,
    ordinal: usize,
}

// SAFETY: `Blas` holds a cuBLASLt handle (a raw pointer), which makes it !Send. cuBLASLt handles
// may be used from any host thread as long as one thread uses them at a time and the device's
// context is current; the backend keeps its `CudaSide` behind a mutex (one user at a time) and every
// call below makes the context current first (`bind`).
unsafe impl Send for CudaSide {}

fn driver(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Driver(format!("{what}: {e}"))
}

impl CudaSide {
    /// Device `ordinal`, or a clear error where there is no driver or no such device (never
    /// cudarc's panic: `Device::new` probes for libcuda first).
    pub fn new(ordinal: usize) -> Result<CudaSide> {
        let dev = Device::new(ordinal)?;
        let blas = Blas::new(&dev)?;
        Ok(CudaSide { dev, blas, ordinal })
    }

    pub fn device(&self) -> &Device {
        &self.dev
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The context current on this thread (the backend may be called from any thread).
    fn bind(&self) -> Result<()> {
        self.dev.ctx.bind_to_thread().map_err(|e| driver("making the context current", e))
    }

    /// Waits for the stream: an asynchronous fault of an earlier launch surfaces here.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        self.dev.synchronize()
    }

    fn bytes(op: &'static str, b: Buf, n: usize) -> Result<()> {
        if b.is_null() && n > 0 {
            return Err(Error::shape(op, "a null buffer"));
        }
        if n != b.len * b.dtype.size() {
            return Err(Error::shape(op, format!("{n} bytes for {} x {:?}", b.len, b.dtype)));
        }
        Ok(())
    }
}

impl Launcher for CudaSide {
    /// # Safety
    /// `Launcher::launch_raw`'s: arguments matching the kernel's signature, geometry within limits.
    unsafe fn launch_raw(&mut self, k: &'static Kernel, cfg: LaunchConfig, args: &[Arg]) -> Result<()> {
        self.dev.ctx.bind_to_thread().map_err(|e| Error::Launch { kernel: k.name, detail: format!("making the context current: {e}") })?;
        // SAFETY: this method's own contract, passed on unchanged.
        unsafe { self.dev.launch_raw(k, cfg, args) }
    }

    fn max_shared_bytes(&self) -> u32 {
        self.dev.max_shared_bytes()
    }
}

impl DeviceSide for CudaSide {
    type Mem = DeviceBuffer;

    fn name(&self) -> &'static str {
        "cuda"
    }
    fn tune(&self) -> Tune {
        self.dev.tune
    }
    fn alloc(&mut self, dtype: DType, len: usize) -> Result<DeviceBuffer> {
        self.bind()?;
        self.dev.alloc(dtype, len)
    }
    fn buf_of(m: &DeviceBuffer) -> Buf {
        m.buf()
    }
    fn write(&mut self, dst: Buf, bytes: &[u8]) -> Result<()> {
        Self::bytes("write", dst, bytes.len())?;
        if bytes.is_empty() {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: `dst` is a live device buffer of this context holding exactly `bytes.len()` bytes
        // (checked above; the backend's views never outlive their allocation); the host slice is
        // kept alive until the stream has finished with it (synchronised below).
        unsafe { drv::memcpy_htod_async(dst.addr, bytes, self.dev.stream.cu_stream()) }.map_err(|e| driver("copying to the device", e))?;
        self.dev.synchronize()
    }
    fn read(&mut self, src: Buf) -> Result<Vec<u8>> {
        let mut out = vec![0u8; src.len * src.dtype.size()];
        if out.is_empty() {
            return Ok(out);
        }
        self.bind()?;
        // SAFETY: `src` is a live device buffer of this context of `out.len()` bytes; `out` lives
        // until the stream has written it (synchronised below).
        unsafe { drv::memcpy_dtoh_async(out.as_mut_slice(), src.addr, self.dev.stream.cu_stream()) }.map_err(|e| driver("copying from the device", e))?;
        self.dev.synchronize()?;
        Ok(out)
    }
    fn copy(&mut self, src: Buf, dst: Buf) -> Result<()> {
        if src.dtype != dst.dtype || src.len != dst.len {
            return Err(Error::shape("copy", format!("{src:?} into {dst:?}")));
        }
        let n = src.len * src.dtype.size();
        if n == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: both are live device buffers of this context of `n` bytes (checked above), and the
        // backend never copies a buffer onto itself (its callers copy between rows or buffers).
        unsafe { drv::memcpy_dtod_async(dst.addr, src.addr, n, self.dev.stream.cu_stream()) }.map_err(|e| driver("copying on the device", e))
    }
    fn matmul(&mut self, g: &Gemm, a: Buf, b: Buf, d: Buf) -> Result<()> {
        self.bind()?;
        self.blas.matmul(g, a, b, d)
    }
}
