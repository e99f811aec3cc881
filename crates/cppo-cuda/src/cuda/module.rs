//! Kernels compiled by NVRTC for the device's architecture on first use, a file at a time, and kept
//! for the process; launches through the driver with every status checked. Never run on a GPU yet.

use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys, Ptx};

use super::device::Device;
use crate::error::{Error, Result};
use crate::kernels::{nvrtc_options, program, source, Kernel};
use crate::launch::{Arg, LaunchConfig, Launcher, DEFAULT_SHARED_BYTES};

#[derive(Default)]
pub struct ModuleCache {
    modules: HashMap<&'static str, Arc<CudaModule>>,
    functions: HashMap<&'static str, (CudaFunction, u32)>,
}

/// Makes NVRTC loadable (`libs`: probed once per process, fetched at most once, never offline).
fn ensure_nvrtc() -> Result<()> {
    super::libs::ensure(super::libs::Library::Nvrtc).map(|_| ())
}

/// What NVRTC made of one file.
pub enum Image {
    /// PTX text (`compute_XY`): the driver finishes it, if it is as new as the NVRTC that wrote it.
    Ptx(String),
    /// Machine code for one architecture (`sm_XY`): nothing left for the driver to compile.
    Cubin(Vec<u8>),
}

/// `code` compiled for `arch` (`compute_XY`: PTX; `sm_XY`: a cubin), or NVRTC's log.
pub fn compile(name: &str, code: &str, arch: &str) -> Result<Image> {
    ensure_nvrtc()?;
    let src = CString::new(code).map_err(|_| Error::Nvrtc(format!("{name}: NUL in the source")))?;
    let cname = CString::new(name).map_err(|_| Error::Nvrtc(format!("{name}: NUL in the name")))?;
    let prog = nvrtc::create_program(&src, Some(&cname)).map_err(|e| Error::Nvrtc(format!("{name}: {e:?}")))?;
    let fail = |e: cudarc::nvrtc::result::NvrtcError| Error::Nvrtc(format!("{name} for {arch}: {e:?}"));
    // SAFETY: `prog` comes from create_program and is destroyed exactly once, below; the log and
    // PTX buffers are NUL-terminated by NVRTC; the cubin buffer is sized by its size call.
    unsafe {
        let compiled = nvrtc::compile_program(prog, &nvrtc_options(arch));
        let out = match compiled {
            Ok(()) if arch.starts_with("sm_") => {
                let mut size = 0usize;
                nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size).result().map_err(fail).and_then(|()| {
                    let mut bytes = vec![0u8; size];
                    nvrtc_sys::nvrtcGetCUBIN(prog, bytes.as_mut_ptr() as *mut std::ffi::c_char).result().map_err(fail).map(|()| Image::Cubin(bytes))
                })
            }
            Ok(()) => nvrtc::get_ptx(prog).map(|p| Image::Ptx(CStr::from_ptr(p.as_ptr()).to_string_lossy().into_owned())).map_err(fail),
            Err(e) => {
                let log = nvrtc::get_program_log(prog).map(|l| CStr::from_ptr(l.as_ptr()).to_string_lossy().into_owned()).unwrap_or_default();
                Err(Error::Nvrtc(format!("{name} for {arch}: {e:?}\n{log}")))
            }
        };
        nvrtc::destroy_program(prog).map_err(|e| Error::Nvrtc(format!("{name}: {e:?}")))?;
        out
    }
}

/// The driver's and NVRTC's versions, e.g. `CUDA driver 13.0, NVRTC 13.0`.
pub fn versions() -> String {
    let (mut drv, mut major, mut minor) = (0, 0, 0);
    // SAFETY: plain out-parameters; both libraries were probed (`libs`) before any module loads.
    let d = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut drv) }.result();
    // SAFETY: as above: two plain out-parameters.
    let n = unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }.result();
    let drv = if d.is_ok() { format!("{}.{}", drv / 1000, (drv % 1000) / 10) } else { format!("unknown ({d:?})") };
    let nv = if n.is_ok() { format!("{major}.{minor}") } else { format!("unknown ({n:?})") };
    format!("CUDA driver {drv}, NVRTC {nv}")
}

/// Says once per process which versions compile and load the kernels, and how they loaded.
fn say_versions(how: &str) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| eprintln!("cppo cuda: {}; kernels load {how}", versions()));
}

impl Device {
    /// `file` as a cubin for this device's own architecture; where the driver refuses it (a driver
    /// without that architecture's support), as PTX, which the driver compiles itself.
    fn load(&self, file: &'static str) -> Result<Arc<CudaModule>> {
        let src = source(file).ok_or_else(|| Error::NoKernel(file.to_string()))?;
        let code = program(src);
        let sm = self.arch.replace("compute_", "sm_");
        let cubin_error = match compile(src.name, &code, &sm) {
            Ok(Image::Cubin(bytes)) => match self.ctx.load_module(Ptx::from_binary(bytes)) {
                Ok(m) => {
                    say_versions(&format!("as {sm} cubins"));
                    return Ok(m);
                }
                Err(e) => e.to_string(),
            },
            Ok(Image::Ptx(_)) => "NVRTC gave PTX for a real architecture".to_string(),
            Err(e) => e.to_string(),
        };
        let ptx = match compile(src.name, &code, &self.arch)? {
            Image::Ptx(p) => p,
            Image::Cubin(_) => return Err(Error::Nvrtc(format!("{file}: a cubin for the virtual architecture {}", self.arch))),
        };
        match self.ctx.load_module(Ptx::from_src(ptx)) {
            Ok(m) => {
                say_versions(&format!("as {} PTX (the driver refused the {sm} cubin: {cubin_error})", self.arch));
                Ok(m)
            }
            Err(e) => Err(Error::Driver(format!("loading {file}: the {sm} cubin: {cubin_error}; the {} PTX: {e} ({})", self.arch, versions()))),
        }
    }

    /// The kernel's function, its file compiled and loaded on first use.
    fn function(&mut self, k: &'static Kernel) -> Result<(CudaFunction, u32)> {
        if let Some(f) = self.modules.functions.get(k.name) {
            return Ok(f.clone());
        }
        let module = match self.modules.modules.get(k.file) {
            Some(m) => m.clone(),
            None => {
                let m = self.load(k.file)?;
                self.modules.modules.insert(k.file, m.clone());
                m
            }
        };
        let f = module.load_function(k.name).map_err(|e| Error::Launch { kernel: k.name, detail: format!("not in its module: {e}") })?;
        self.modules.functions.insert(k.name, (f.clone(), DEFAULT_SHARED_BYTES));
        Ok((f, DEFAULT_SHARED_BYTES))
    }
}

impl Launcher for Device {
    /// # Safety
    /// `Launcher::launch_raw`'s: arguments matching the kernel's signature, geometry within limits.
    unsafe fn launch_raw(&mut self, k: &'static Kernel, cfg: LaunchConfig, args: &[Arg]) -> Result<()> {
        let fail = |detail: String| Error::Launch { kernel: k.name, detail };
        let (f, allowed) = self.function(k)?;
        if cfg.shared_mem_bytes > allowed {
            f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, cfg.shared_mem_bytes as i32)
                .map_err(|e| fail(format!("allowing {} bytes of shared memory: {e}", cfg.shared_mem_bytes)))?;
            self.modules.functions.insert(k.name, (f.clone(), cfg.shared_mem_bytes));
        }
        let mut slots: Vec<u64> = args.iter().map(|a| u64::from_ne_bytes(a.bytes())).collect();
        let mut params: Vec<*mut c_void> = slots.iter_mut().map(|s| s as *mut u64 as *mut c_void).collect();
        // SAFETY: by `launch_raw`'s contract the arguments match the kernel's signature (which the
        // emulation tests check against the source) and the geometry its limits; each parameter is read
        // from an 8-byte slot holding its value in its first bytes; pointers are device buffers sized
        // by the ops' checks.
        unsafe {
            cudarc::driver::result::launch_kernel(f.cu_function(), cfg.grid, cfg.block, cfg.shared_mem_bytes, self.stream.cu_stream(), &mut params)
        }
        .map_err(|e| fail(format!("launch {cfg:?}: {e}")))?;
        if self.sync_each_launch {
            self.stream.synchronize().map_err(|e| fail(format!("failed while running: {e}")))?;
        }
        Ok(())
    }

    fn max_shared_bytes(&self) -> u32 {
        self.max_shared
    }
}
