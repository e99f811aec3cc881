//! The kernels compiled as C++ for this CPU under `emu/cuda_emu.h`, loaded as a shared library, and a
//! `Launcher` over it whose device memory is host memory with guard bytes around every buffer.
//!
//! ThreadSanitizer, by hand (Rust's own std is not instrumented, so its channel shows up too):
//! `CPPO_EMU_CXXFLAGS="-fsanitize=thread -g -O1" cargo test -p cppo-cuda --test emulated --no-run`,
//! then run that test binary with the same variable and `LD_PRELOAD=$(gcc -print-file-name=libtsan.so)`.

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cppo_cuda::kernels::{Kernel, KERNELS};

use cppo_test_support::fake_cuda as build_fake;
use cppo_cuda::{Buf, DType, Error, LaunchConfig, Launcher, Result};

/// The emulation's own test kernels (`emu/selftest.cu`), all `(int* out, int n)`.
pub static SELFTEST: &[Kernel] = &[
    Kernel { name: "emu_divergent_barrier", sig: "pi", file: "selftest.cu" },
    Kernel { name: "emu_two_barriers", sig: "pi", file: "selftest.cu" },
    Kernel { name: "emu_partial_mask", sig: "pi", file: "selftest.cu" },
    Kernel { name: "emu_warp_ops", sig: "pi", file: "selftest.cu" },
    Kernel { name: "emu_shared", sig: "pi", file: "selftest.cu" },
    Kernel { name: "emu_write_past", sig: "pi", file: "selftest.cu" },
];

type LaunchFn = unsafe extern "C" fn(i32, *const u32, *const u32, usize, *mut *mut c_void, *mut c_char, usize) -> i32;

struct Lib {
    _lib: libloading::Library,
    launch: LaunchFn,
    index: HashMap<String, i32>,
}

static LIB: OnceLock<std::result::Result<Lib, String>> = OnceLock::new();

fn lib() -> &'static Lib {
    match LIB.get_or_init(load) {
        Ok(l) => l,
        Err(e) => panic!("the emulation library: {e}"),
    }
}

fn build() -> std::result::Result<PathBuf, String> {
    // Extra flags (e.g. `-fsanitize=thread -g`) for a run by hand; they are part of the cache key.
    let extra = std::env::var("CPPO_EMU_CXXFLAGS").unwrap_or_default();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cppo-emu");
    let names: Vec<&str> = SELFTEST.iter().map(|k| k.name).collect();
    build_fake::emulation_library(&dir, &["emu/selftest.cu"], &names, &extra, env!("CPPO_CUDA_TARGET"), env!("CPPO_CUDA_HOST"))
}

fn load() -> std::result::Result<Lib, String> {
    let path = build()?;
    // SAFETY: the library is ours, built just above from the kernel sources; its initialisers only
    // set up C++ statics.
    let lib = unsafe { libloading::Library::new(&path) }.map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: the symbols are the extern "C" functions of emu/exports.h with exactly these types.
    let (count, name, sig, launch) = unsafe {
        let count = *lib.get::<unsafe extern "C" fn() -> i32>(b"cppo_emu_count").map_err(|e| e.to_string())?;
        let name = *lib.get::<unsafe extern "C" fn(i32) -> *const c_char>(b"cppo_emu_name").map_err(|e| e.to_string())?;
        let sig = *lib.get::<unsafe extern "C" fn(i32) -> *const c_char>(b"cppo_emu_sig").map_err(|e| e.to_string())?;
        let launch = *lib.get::<LaunchFn>(b"cppo_emu_launch").map_err(|e| e.to_string())?;
        (count, name, sig, launch)
    };
    let mut index = HashMap::new();
    let mut wrong = Vec::new();
    // SAFETY: `cppo_emu_count` takes nothing and returns the table's length.
    let count = unsafe { count() };
    for i in 0..count {
        // SAFETY: both return pointers to static NUL-terminated strings of the library.
        let (n, s) = unsafe { (CStr::from_ptr(name(i)), CStr::from_ptr(sig(i))) };
        let (n, s) = (n.to_string_lossy().into_owned(), s.to_string_lossy().into_owned());
        let k = KERNELS.iter().chain(SELFTEST).find(|k| k.name == n).expect("the table is made from KERNELS and SELFTEST");
        if k.sig != s {
            wrong.push(format!("{n}: declared `{}`, the source has `{s}`", k.sig));
        }
        index.insert(n, i);
    }
    if !wrong.is_empty() {
        return Err(format!("kernel signatures in src/kernels.rs do not match the sources:\n{}", wrong.join("\n")));
    }
    Ok(Lib { _lib: lib, launch, index })
}

const GUARD: usize = 64;
const GUARD_BYTE: u8 = 0xA5;

struct Alloc {
    mem: Vec<u8>,
    bytes: usize,
}

/// Element types tests move in and out of emulated device memory.
pub trait Elem: Copy {
    const DTYPE: DType;
    fn write(self, out: &mut [u8]);
    fn read(b: &[u8]) -> Self;
}

macro_rules! elem {
    ($t:ty, $d:expr) => {
        impl Elem for $t {
            const DTYPE: DType = $d;
            fn write(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_ne_bytes());
            }
            fn read(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().expect("element size"))
            }
        }
    };
}
elem!(f32, DType::F32);
elem!(f64, DType::F64);
elem!(i32, DType::I32);
elem!(i64, DType::I64);

impl Elem for half::bf16 {
    const DTYPE: DType = DType::Bf16;
    fn write(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_bits().to_ne_bytes());
    }
    fn read(b: &[u8]) -> Self {
        half::bf16::from_bits(u16::from_ne_bytes(b.try_into().expect("element size")))
    }
}

/// Where a test's kernels run: the CPU emulation, or, with `--features cuda` and
/// `CPPO_TEST_DEVICE=cuda`, the GPU (the same tests then check the device against the references;
/// that mode has never run: no GPU has been available).
enum Target {
    Cpu(Vec<Alloc>),
    #[cfg(feature = "cuda")]
    Gpu(cppo_cuda::cuda::Device, Vec<cppo_cuda::cuda::DeviceBuffer>),
}

/// A fresh device for one test: its buffers live as long as it does.
pub struct Emu {
    target: Target,
    pub launches: Vec<&'static str>,
}

/// Whether the tests run on the GPU (`CPPO_TEST_DEVICE=cuda`).
pub fn on_gpu() -> bool {
    std::env::var("CPPO_TEST_DEVICE").is_ok_and(|v| v == "cuda")
}

impl Emu {
    pub fn new() -> Emu {
        if on_gpu() {
            #[cfg(feature = "cuda")]
            {
                let dev = cppo_cuda::cuda::Device::new(0).expect("CPPO_TEST_DEVICE=cuda needs a GPU");
                return Emu { target: Target::Gpu(dev, Vec::new()), launches: Vec::new() };
            }
            #[cfg(not(feature = "cuda"))]
            panic!("CPPO_TEST_DEVICE=cuda needs --features cuda");
        }
        Emu::cpu()
    }

    /// The CPU emulation whatever `CPPO_TEST_DEVICE` says (the emulation's own tests).
    pub fn cpu() -> Emu {
        Emu { target: Target::Cpu(Vec::new()), launches: Vec::new() }
    }

    /// `len` elements of `dtype`, every byte 0xFF: NaN as f32, bf16 and f64, -1 as an integer.
    pub fn alloc(&mut self, dtype: DType, len: usize) -> Buf {
        self.upload_bytes(dtype, len, &vec![0xFF; len * dtype.size()])
    }

    fn upload_bytes(&mut self, dtype: DType, len: usize, bytes: &[u8]) -> Buf {
        match &mut self.target {
            Target::Cpu(allocs) => {
                let mut mem = vec![GUARD_BYTE; bytes.len() + 2 * GUARD];
                mem[GUARD..GUARD + bytes.len()].copy_from_slice(bytes);
                let addr = mem.as_ptr() as u64 + GUARD as u64;
                allocs.push(Alloc { mem, bytes: bytes.len() });
                Buf::new(addr, dtype, len)
            }
            #[cfg(feature = "cuda")]
            Target::Gpu(dev, bufs) => {
                let b = dev.upload_bytes(dtype, len, bytes).expect("device upload");
                let buf = b.buf();
                bufs.push(b);
                buf
            }
        }
    }

    pub fn upload<T: Elem>(&mut self, data: &[T]) -> Buf {
        let n = T::DTYPE.size();
        let mut bytes = vec![0u8; data.len() * n];
        for (i, &v) in data.iter().enumerate() {
            v.write(&mut bytes[i * n..(i + 1) * n]);
        }
        self.upload_bytes(T::DTYPE, data.len(), &bytes)
    }

    /// The contents of `b` (which may be a slice of an allocation).
    pub fn read<T: Elem>(&self, b: Buf) -> Vec<T> {
        assert_eq!(b.dtype, T::DTYPE, "reading a {:?} buffer", b.dtype);
        self.raw(b, T::DTYPE.size()).chunks_exact(T::DTYPE.size()).map(T::read).collect()
    }

    /// The bytes of `b`'s elements, each `n` bytes.
    fn raw(&self, b: Buf, n: usize) -> Vec<u8> {
        let end = b.addr + (b.len * n) as u64;
        match &self.target {
            Target::Cpu(allocs) => {
                let a = allocs
                    .iter()
                    .find(|a| {
                        let start = a.mem.as_ptr() as u64 + GUARD as u64;
                        b.addr >= start && end <= start + a.bytes as u64
                    })
                    .expect("a buffer of this device");
                let off = (b.addr - a.mem.as_ptr() as u64) as usize;
                a.mem[off..off + b.len * n].to_vec()
            }
            #[cfg(feature = "cuda")]
            Target::Gpu(dev, bufs) => {
                let d = bufs
                    .iter()
                    .find(|d| {
                        let s = d.buf();
                        b.addr >= s.addr && end <= s.addr + (s.len * s.dtype.size()) as u64
                    })
                    .expect("a buffer of this device");
                let off = (b.addr - d.buf().addr) as usize;
                dev.download_bytes(d).expect("device read")[off..off + b.len * n].to_vec()
            }
        }
    }

    /// The bytes of `b` (which may be a slice of an allocation).
    pub fn read_bytes(&self, b: Buf) -> Vec<u8> {
        self.raw(b, b.dtype.size())
    }

    /// Overwrites `b` (which may be a slice of an allocation) with `bytes`.
    pub fn write_bytes(&mut self, b: Buf, bytes: &[u8]) {
        let n = b.len * b.dtype.size();
        assert_eq!(bytes.len(), n, "{} bytes for {b:?}", bytes.len());
        match &mut self.target {
            Target::Cpu(allocs) => {
                let a = allocs
                    .iter_mut()
                    .find(|a| {
                        let start = a.mem.as_ptr() as u64 + GUARD as u64;
                        b.addr >= start && b.addr + n as u64 <= start + a.bytes as u64
                    })
                    .expect("a buffer of this device");
                let off = (b.addr - a.mem.as_ptr() as u64) as usize;
                a.mem[off..off + n].copy_from_slice(bytes);
            }
            #[cfg(feature = "cuda")]
            Target::Gpu(..) => panic!("the emulated backend's device side runs on the CPU target only"),
        }
    }

    fn check_guards(&self, kernel: &'static str) -> Result<()> {
        // Without the cuda feature the CPU is the only target.
        #[allow(irrefutable_let_patterns)]
        if let Target::Cpu(allocs) = &self.target {
            for a in allocs {
                let (head, tail) = (&a.mem[..GUARD], &a.mem[GUARD + a.bytes..]);
                if head.iter().chain(tail).any(|&b| b != GUARD_BYTE) {
                    return Err(Error::Launch { kernel, detail: format!("wrote outside a buffer of {} bytes", a.bytes) });
                }
            }
        }
        Ok(())
    }
}

impl Launcher for Emu {
    /// # Safety
    /// `Launcher::launch_raw`'s: arguments matching the kernel's signature, geometry within limits.
    unsafe fn launch_raw(&mut self, k: &'static Kernel, cfg: LaunchConfig, args: &[cppo_cuda::Arg]) -> Result<()> {
        self.launches.push(k.name);
        #[cfg(feature = "cuda")]
        if let Target::Gpu(dev, _) = &mut self.target {
            // SAFETY: this method's own contract, passed on unchanged.
            let r = unsafe { dev.launch_raw(k, cfg, args) };
            return r.and_then(|()| dev.synchronize());
        }
        let lib = lib();
        let i = *lib.index.get(k.name).expect("every kernel is exported");
        let mut slots: Vec<u64> = args.iter().map(|a| u64::from_ne_bytes(a.bytes())).collect();
        let mut ptrs: Vec<*mut c_void> = slots.iter_mut().map(|s| s as *mut u64 as *mut c_void).collect();
        let (grid, block) = ([cfg.grid.0, cfg.grid.1, cfg.grid.2], [cfg.block.0, cfg.block.1, cfg.block.2]);
        let mut err = vec![0 as c_char; 1024];
        // SAFETY: by `launch_raw`'s contract the arguments match the kernel's signature, which the
        // library checked against the C++ parameter types at load; each slot holds the value's bytes with
        // the alignment of a u64. Pointer arguments are buffers of this emulated device, sized by the
        // launch functions' checks.
        let rc = unsafe { (lib.launch)(i, grid.as_ptr(), block.as_ptr(), cfg.shared_mem_bytes as usize, ptrs.as_mut_ptr(), err.as_mut_ptr(), err.len()) };
        if rc != 0 {
            // SAFETY: the library wrote a NUL-terminated message into `err` (snprintf).
            let msg = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
            return Err(Error::Launch { kernel: k.name, detail: msg });
        }
        self.check_guards(k.name)
    }

    fn max_shared_bytes(&self) -> u32 {
        match &self.target {
            #[cfg(feature = "cuda")]
            Target::Gpu(dev, _) => dev.max_shared_bytes(),
            _ => cppo_cuda::launch::DEFAULT_SHARED_BYTES,
        }
    }
}
