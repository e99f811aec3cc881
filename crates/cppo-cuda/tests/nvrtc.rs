//! Every kernel file compiled by NVRTC for Hopper, without a GPU: PTX for compute_90 (what the runtime
//! module cache loads) with every entry the host launches, and a cubin for sm_90 (ptxas too, so
//! register and shared-memory limits are checked). The NVRTC library is the `nvidia-cuda-nvrtc`
//! 13.0 wheel from PyPI, fetched into cppo's cache on first use (`CPPO_NVRTC_DIR` points elsewhere),
//! driven through cudarc, as the device's module cache drives it.

use std::ffi::{c_char, CStr};
use std::time::Instant;

use cppo_cuda::kernels::{nvrtc_options, program, KERNELS, SOURCES};
use cudarc::nvrtc::{result, sys};

/// Compiles `src` for `arch`; returns (PTX, cubin bytes) or NVRTC's log.
fn compile(name: &str, src: &str, arch: &str) -> Result<(String, usize), String> {
    let csrc = std::ffi::CString::new(src).expect("no NUL in sources");
    let cname = std::ffi::CString::new(name).expect("no NUL in names");
    let prog = result::create_program(&csrc, Some(&cname)).map_err(|e| format!("create: {e:?}"))?;
    // SAFETY: `prog` was created above and is destroyed once, at the end; the buffers passed to the
    // size/get pairs are sized by the size calls.
    unsafe {
        let compiled = result::compile_program(prog, &nvrtc_options(arch));
        let log = result::get_program_log(prog).map(|l| CStr::from_ptr(l.as_ptr()).to_string_lossy().into_owned()).unwrap_or_default();
        let out = match compiled {
            Err(e) => Err(format!("{e:?}\n{log}")),
            Ok(()) => {
                let ptx = result::get_ptx(prog).map(|p| CStr::from_ptr(p.as_ptr()).to_string_lossy().into_owned());
                let mut cubin = 0usize;
                let cubin_ok = sys::nvrtcGetCUBINSize(prog, &mut cubin).result();
                if cubin > 0 {
                    let mut bytes = vec![0 as c_char; cubin];
                    sys::nvrtcGetCUBIN(prog, bytes.as_mut_ptr()).result().map_err(|e| format!("cubin: {e:?}"))?;
                }
                match (ptx, cubin_ok) {
                    (Ok(p), Ok(())) => Ok((p, cubin)),
                    (p, c) => Err(format!("ptx {:?}, cubin {:?}", p.err(), c.err())),
                }
            }
        };
        result::destroy_program(prog).map_err(|e| format!("destroy: {e:?}"))?;
        out
    }
}

#[test]
fn every_kernel_compiles_with_nvrtc_13_for_sm_90() {
    let t0 = Instant::now();
    let dir = cppo_cuda::nvrtc_lib::library_dir().expect("the NVRTC wheel (needs PyPI once, or CPPO_NVRTC_DIR)");
    let lib = cppo_cuda::nvrtc_lib::preload(&dir).expect("loading NVRTC");
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain out-parameters.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }.result().expect("nvrtcVersion");
    assert_eq!((major, minor), (13, 0), "cudarc loaded another NVRTC than {}", lib.display());
    eprintln!("NVRTC {major}.{minor} from {} ({:.1} s to fetch/load)", lib.display(), t0.elapsed().as_secs_f64());
    let mut failures = Vec::new();
    for src in SOURCES {
        let t = Instant::now();
        let code = program(src);
        match compile(src.name, &code, "compute_90") {
            Err(log) => failures.push(format!("{} for compute_90:\n{log}", src.name)),
            Ok((ptx, _)) => {
                for k in KERNELS.iter().filter(|k| k.file == src.name) {
                    if !ptx.contains(&format!(".entry {}(", k.name)) {
                        failures.push(format!("{}: no entry {} in the PTX", src.name, k.name));
                    }
                }
            }
        }
        match compile(src.name, &code, "sm_90") {
            Err(log) => failures.push(format!("{} for sm_90:\n{log}", src.name)),
            Ok((_, 0)) => failures.push(format!("{}: empty cubin for sm_90", src.name)),
            Ok(_) => {}
        }
        eprintln!("{}: {:.2} s", src.name, t.elapsed().as_secs_f64());
    }
    eprintln!("all files: {:.1} s", t0.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
