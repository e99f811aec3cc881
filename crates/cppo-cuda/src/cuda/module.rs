//! Kernels compiled by NVRTC for the device's architecture on first use, a file at a time, and kept
//! for the process; launches through the driver with every status checked. Never run on a GPU yet.

use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::{result as nvrtc, Ptx};

use super::device::Device;
use crate::error::{Error, Result};
use crate::kernels::{nvrtc_options, program, source, Kernel};
use crate::launch::{Arg, LaunchConfig, Launcher, DEFAULT_SHARED_BYTES};

#[derive(Default)]
pub struct ModuleCache {
    modules: HashMap<&'static str, Arc<CudaModule>>,
    functions: HashMap<&'static str, (CudaFunction, u32)>,
}

/// Makes NVRTC loadable: an explicit `CPPO_NVRTC_DIR` or an already fetched wheel wins, then a
/// system NVRTC, and only then is the wheel fetched (cudarc panics if it finds none).
fn ensure_nvrtc() -> Result<()> {
    let cached = crate::nvrtc_lib::cache_dir().ok().map(|d| d.join(format!("nvrtc-{}", crate::nvrtc_lib::WHEEL_VERSION)));
    if std::env::var_os("CPPO_NVRTC_DIR").is_some() || cached.as_ref().is_some_and(|d| d.is_dir()) {
        return crate::nvrtc_lib::preload(&crate::nvrtc_lib::library_dir()?).map(|_| ());
    }
    // SAFETY: only tries to dlopen libnvrtc under its usual names.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Ok(());
    }
    crate::nvrtc_lib::preload(&crate::nvrtc_lib::wheel_dir()?).map(|_| ())
}

/// PTX of `code` for `arch`, or NVRTC's log.
pub fn compile(name: &str, code: &str, arch: &str) -> Result<String> {
    ensure_nvrtc()?;
    let src = CString::new(code).map_err(|_| Error::Nvrtc(format!("{name}: NUL in the source")))?;
    let cname = CString::new(name).map_err(|_| Error::Nvrtc(format!("{name}: NUL in the name")))?;
    let prog = nvrtc::create_program(&src, Some(&cname)).map_err(|e| Error::Nvrtc(format!("{name}: {e:?}")))?;
    // SAFETY: `prog` comes from create_program and is destroyed exactly once, below; the log and
    // PTX buffers are NUL-terminated by NVRTC.
    unsafe {
        let compiled = nvrtc::compile_program(prog, &nvrtc_options(arch));
        let out = match compiled {
            Ok(()) => nvrtc::get_ptx(prog).map(|p| CStr::from_ptr(p.as_ptr()).to_string_lossy().into_owned()).map_err(|e| Error::Nvrtc(format!("{name}: {e:?}"))),
            Err(e) => {
                let log = nvrtc::get_program_log(prog).map(|l| CStr::from_ptr(l.as_ptr()).to_string_lossy().into_owned()).unwrap_or_default();
                Err(Error::Nvrtc(format!("{name} for {arch}: {e:?}\n{log}")))
            }
        };
        nvrtc::destroy_program(prog).map_err(|e| Error::Nvrtc(format!("{name}: {e:?}")))?;
        out
    }
}

impl Device {
    /// The kernel's function, its file compiled and loaded on first use.
    fn function(&mut self, k: &'static Kernel) -> Result<(CudaFunction, u32)> {
        if let Some(f) = self.modules.functions.get(k.name) {
            return Ok(f.clone());
        }
        let module = match self.modules.modules.get(k.file) {
            Some(m) => m.clone(),
            None => {
                let src = source(k.file).ok_or_else(|| Error::NoKernel(k.name.to_string()))?;
                let ptx = compile(src.name, &program(src), &self.arch)?;
                let m = self.ctx.load_module(Ptx::from_src(ptx)).map_err(|e| Error::Driver(format!("loading {}: {e}", k.file)))?;
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
    fn launch_raw(&mut self, k: &'static Kernel, cfg: LaunchConfig, args: &[Arg]) -> Result<()> {
        let fail = |detail: String| Error::Launch { kernel: k.name, detail };
        let (f, allowed) = self.function(k)?;
        if cfg.shared_mem_bytes > allowed {
            f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, cfg.shared_mem_bytes as i32)
                .map_err(|e| fail(format!("allowing {} bytes of shared memory: {e}", cfg.shared_mem_bytes)))?;
            self.modules.functions.insert(k.name, (f.clone(), cfg.shared_mem_bytes));
        }
        let mut slots: Vec<u64> = args.iter().map(|a| u64::from_ne_bytes(a.bytes())).collect();
        let mut params: Vec<*mut c_void> = slots.iter_mut().map(|s| s as *mut u64 as *mut c_void).collect();
        // SAFETY: `launch` checked the arguments against the kernel's signature (which the emulation
        // tests check against the source); each parameter is read from an 8-byte slot holding its
        // value in its first bytes; pointers are device buffers sized by the ops' checks.
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
