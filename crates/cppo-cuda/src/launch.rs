//! A kernel launch as plain data (entry, geometry, arguments), and the trait that runs it: the CUDA
//! device with the `cuda` feature, the CPU emulation in the tests. The launch functions in `ops`
//! are written once against it, so their geometry and argument order are tested without a GPU.

use crate::buf::Buf;
use crate::error::{Error, Result};
use crate::kernels::{kernel, Kernel};

/// The most threads a block may have, on every GPU since Kepler.
pub const MAX_BLOCK: u32 = 1024;
/// Dynamic shared memory a kernel gets without opting in (`cuFuncSetAttribute`).
pub const DEFAULT_SHARED_BYTES: u32 = 48 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    pub fn blocks(grid: u32, block: u32) -> Self {
        LaunchConfig { grid: (grid, 1, 1), block: (block, 1, 1), shared_mem_bytes: 0 }
    }

    pub fn with_shared(mut self, bytes: u32) -> Self {
        self.shared_mem_bytes = bytes;
        self
    }

    fn threads(&self) -> u64 {
        self.block.0 as u64 * self.block.1 as u64 * self.block.2 as u64
    }
}

/// One kernel argument, passed by value as CUDA does (`kernelParams`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    Ptr(u64),
    I32(i32),
    I64(i64),
    F32(f32),
    F64(f64),
}

impl Arg {
    pub fn code(&self) -> char {
        match self {
            Arg::Ptr(_) => 'p',
            Arg::I32(_) => 'i',
            Arg::I64(_) => 'l',
            Arg::F32(_) => 'f',
            Arg::F64(_) => 'd',
        }
    }

    /// The argument's bytes, as the kernel parameter of its type holds them.
    pub fn bytes(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        match *self {
            Arg::Ptr(v) => b.copy_from_slice(&v.to_ne_bytes()),
            Arg::I64(v) => b.copy_from_slice(&v.to_ne_bytes()),
            Arg::F64(v) => b.copy_from_slice(&v.to_ne_bytes()),
            Arg::I32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
            Arg::F32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
        }
        b
    }
}

impl From<Buf> for Arg {
    fn from(b: Buf) -> Self {
        Arg::Ptr(b.addr)
    }
}

/// Runs kernels. Implementations may assume the arguments match the kernel's signature and the
/// geometry is within the hardware's limits (`launch` checks both).
pub trait Launcher {
    /// # Safety
    /// `args` must match `kernel.sig` (one argument per code, of that kind) and `cfg` be within the
    /// hardware's limits, as `launch` checks: the driver reads the arguments as the signature says and
    /// would read past `args` otherwise. Pointer arguments must be live buffers as the kernel uses them.
    unsafe fn launch_raw(&mut self, kernel: &'static Kernel, cfg: LaunchConfig, args: &[Arg]) -> Result<()>;

    /// The most dynamic shared memory a block may use on this device.
    fn max_shared_bytes(&self) -> u32 {
        DEFAULT_SHARED_BYTES
    }
}

/// Launches kernel `name` after checking its arguments and geometry; an empty grid launches nothing.
pub fn launch(l: &mut (impl Launcher + ?Sized), name: &str, cfg: LaunchConfig, args: &[Arg]) -> Result<()> {
    let k = kernel(name).ok_or_else(|| Error::NoKernel(name.to_string()))?;
    let got: String = args.iter().map(Arg::code).collect();
    if got != k.sig {
        return Err(Error::Signature { kernel: k.name, got, want: k.sig });
    }
    if cfg.grid.0 == 0 || cfg.grid.1 == 0 || cfg.grid.2 == 0 {
        return Ok(());
    }
    let threads = cfg.threads();
    if threads == 0 || threads > MAX_BLOCK as u64 || !threads.is_multiple_of(32) {
        return Err(Error::Launch { kernel: k.name, detail: format!("block {:?}: whole warps, at most {MAX_BLOCK} threads", cfg.block) });
    }
    if cfg.grid.1 > 65535 || cfg.grid.2 > 65535 || cfg.grid.0 > i32::MAX as u32 {
        return Err(Error::Launch { kernel: k.name, detail: format!("grid {:?} beyond the hardware's limits", cfg.grid) });
    }
    if cfg.shared_mem_bytes > l.max_shared_bytes() {
        return Err(Error::Launch {
            kernel: k.name,
            detail: format!("{} bytes of shared memory, at most {}", cfg.shared_mem_bytes, l.max_shared_bytes()),
        });
    }
    // SAFETY: the arguments match the kernel's signature and the geometry is within the limits (both
    // checked above); the buffers are the callers' (each op checks its buffers' types and lengths).
    unsafe { l.launch_raw(k, cfg, args) }
}
