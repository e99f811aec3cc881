//! The CUDA device: context, one stream, plain device allocations, copies. Never run on a GPU yet.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};

use super::module::ModuleCache;
use crate::buf::{Buf, DType};
use crate::error::{Error, Result};
use crate::geometry::Tune;

fn driver(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Driver(format!("{what}: {e}"))
}

/// Whether a CUDA driver library can be loaded at all (`libs` probes once per process). cudarc
/// panics when it is missing, so every entry point asks first.
pub fn driver_present() -> bool {
    super::libs::ensure(super::libs::Library::Driver).is_ok()
}

pub struct Device {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) modules: ModuleCache,
    /// `compute_XY`, for NVRTC.
    pub arch: String,
    pub name: String,
    pub tune: Tune,
    pub(crate) max_shared: u32,
    /// `CPPO_CUDA_SYNC=1`: wait for every kernel, so a fault names the kernel that caused it.
    pub(crate) sync_each_launch: bool,
}

/// The device's default memory pool (which the stream-ordered allocations come from) keeps what is
/// freed: its release threshold is 0 by default, so at every synchronisation the freed memory went
/// back to the OS and the next step mapped it again.
fn keep_freed_memory(ctx: &CudaContext) -> Result<()> {
    use cudarc::driver::sys;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let mut threshold = u64::MAX;
    // SAFETY: out-parameter for the pool; the attribute is a cuuint64_t, alive for the call; the
    // context is current on this thread (`CudaContext::new` bound it).
    unsafe {
        sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()).result().map_err(|e| driver("the default memory pool", e))?;
        sys::cuMemPoolSetAttribute(pool, sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &mut threshold as *mut u64 as *mut std::ffi::c_void)
            .result()
            .map_err(|e| driver("the memory pool's release threshold", e))
    }
}

impl Device {
    /// Device `ordinal` (`model.device = "cuda:N"`), or a clear error where there is no driver or no
    /// such device.
    pub fn new(ordinal: usize) -> Result<Device> {
        super::libs::ensure(super::libs::Library::Driver)?;
        // NVRTC too, before anything runs: a missing compiler is one error here, not one per kernel.
        super::libs::ensure(super::libs::Library::Nvrtc)?;
        let count = CudaContext::device_count().map_err(|e| driver("counting devices", e))?;
        if ordinal >= count.max(0) as usize {
            return Err(Error::Driver(format!("cuda:{ordinal} asked for, {count} device(s) present")));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| driver("creating the context", e))?;
        // One stream, and buffers addressed by raw pointers in the launches: cudarc's per-buffer
        // events would order nothing here and cost two events per allocation.
        // SAFETY: no other stream exists in this context, so nothing relies on the events.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(|e| driver("creating a stream", e))?;
        keep_freed_memory(&ctx)?;
        let (major, minor) = ctx.compute_capability().map_err(|e| driver("compute capability", e))?;
        let attr = |a: CUdevice_attribute, what: &str| ctx.attribute(a).map_err(|e| driver(what, e));
        let sms = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count")?;
        let max_shared = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "shared memory")?;
        let name = ctx.name().map_err(|e| driver("device name", e))?;
        Ok(Device {
            ctx,
            stream,
            modules: ModuleCache::default(),
            arch: format!("compute_{major}{minor}"),
            name,
            tune: Tune::for_device(sms.max(1) as u32),
            max_shared: max_shared.max(0) as u32,
            sync_each_launch: std::env::var("CPPO_CUDA_SYNC").is_ok_and(|v| v == "1"),
        })
    }

    /// (free, total) bytes of device memory.
    pub fn memory(&self) -> Result<(usize, usize)> {
        self.ctx.mem_get_info().map_err(|e| driver("memory info", e))
    }

    /// `len` elements of `dtype`, uninitialised: a plain device allocation (not managed memory).
    pub fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer> {
        let bytes = len.checked_mul(dtype.size()).ok_or_else(|| Error::Driver(format!("{len} x {dtype:?} overflows")))?;
        // SAFETY: the memory is uninitialised until written; every reader of a DeviceBuffer is a
        // kernel or a copy issued after the writes on the same stream.
        let slice = unsafe { self.stream.alloc::<u8>(bytes.max(1)) }.map_err(|e| driver(&format!("allocating {bytes} bytes"), e))?;
        Ok(DeviceBuffer { slice, dtype, len })
    }

    pub fn zeros(&self, dtype: DType, len: usize) -> Result<DeviceBuffer> {
        let mut b = self.alloc(dtype, len)?;
        self.stream.memset_zeros(&mut b.slice).map_err(|e| driver("zeroing", e))?;
        Ok(b)
    }

    /// Copies `data` (plain numbers: f32, i32, f64, i64, u16 for bf16 bits) into a new buffer.
    pub fn upload<T: Plain>(&self, dtype: DType, data: &[T]) -> Result<DeviceBuffer> {
        if std::mem::size_of::<T>() != dtype.size() {
            return Err(Error::Driver(format!("uploading {}-byte values as {dtype:?}", std::mem::size_of::<T>())));
        }
        let mut b = self.alloc(dtype, data.len())?;
        // SAFETY: `T: Plain` is a number type without padding, so `data` is `size_of_val(data)`
        // initialised bytes.
        let bytes = unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data)) };
        self.stream.memcpy_htod(bytes, &mut b.slice).map_err(|e| driver("copying to the device", e))?;
        Ok(b)
    }

    /// A new buffer of `len` elements of `dtype` holding `bytes`.
    pub fn upload_bytes(&self, dtype: DType, len: usize, bytes: &[u8]) -> Result<DeviceBuffer> {
        if bytes.len() != len * dtype.size() {
            return Err(Error::Driver(format!("{} bytes for {len} x {dtype:?}", bytes.len())));
        }
        let mut b = self.alloc(dtype, len)?;
        if !bytes.is_empty() {
            self.stream.memcpy_htod(bytes, &mut b.slice).map_err(|e| driver("copying to the device", e))?;
        }
        Ok(b)
    }

    /// The buffer's bytes, after everything queued before has run.
    pub fn download_bytes(&self, b: &DeviceBuffer) -> Result<Vec<u8>> {
        let mut out = vec![0u8; b.len * b.dtype.size()];
        if !out.is_empty() {
            let view = b.slice.slice(0..out.len());
            self.stream.memcpy_dtoh(&view, out.as_mut_slice()).map_err(|e| driver("copying from the device", e))?;
        }
        self.synchronize()?;
        Ok(out)
    }

    /// The buffer's contents, after everything queued before has run.
    pub fn download<T: Plain>(&self, b: &DeviceBuffer) -> Result<Vec<T>> {
        if std::mem::size_of::<T>() != b.dtype.size() {
            return Err(Error::Driver(format!("reading {:?} as {}-byte values", b.dtype, std::mem::size_of::<T>())));
        }
        let mut out = vec![T::default(); b.len];
        // SAFETY: `out` owns `len * size_of::<T>()` bytes, and any bit pattern is a valid value of a
        // `T: Plain` number type.
        let bytes = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, std::mem::size_of_val(out.as_slice())) };
        let view = b.slice.slice(0..bytes.len());
        self.stream.memcpy_dtoh(&view, bytes).map_err(|e| driver("copying from the device", e))?;
        self.synchronize()?;
        Ok(out)
    }

    /// Waits for the stream; an asynchronous fault of any earlier launch surfaces here.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(|e| driver("a kernel or copy failed", e))
    }
}

/// A device allocation with the dtype and length the kernels see.
pub struct DeviceBuffer {
    pub(crate) slice: CudaSlice<u8>,
    pub dtype: DType,
    pub len: usize,
}

impl DeviceBuffer {
    pub fn buf(&self) -> Buf {
        let (ptr, _sync) = self.slice.device_ptr(self.slice.stream());
        Buf::new(ptr, self.dtype, self.len)
    }
}

/// The number types a buffer is copied from and into as bytes: no padding, and every bit pattern a
/// valid value. Sealed: only the types below.
pub trait Plain: Copy + Default + plain::Sealed {}

mod plain {
    pub trait Sealed {}
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl plain::Sealed for $t {}
        impl Plain for $t {}
    )*};
}
plain!(f32, f64, i32, i64, u8, u16, u32, u64);
