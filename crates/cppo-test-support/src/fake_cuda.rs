//! Test-time builds of C++ beside the kernels (shared by the emulation tests and the fake-GPU test):
//! the emulation's translation unit (emu/cuda_emu.h, every kernel file, the
//! export table), compiled with the `cc` crate's compiler, and the CPU-hosted CUDA driver and cuBLASLt
//! (fake_cuda.cpp, fake_cublaslt.cpp) as `libcuda.so.1` and `libcublasLt.so.13` with those sonames and
//! the names cudarc opens (`libcuda.so`, `libcublasLt.so`) as links. Cached by a hash of every input.
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use cppo_cuda::kernels::{KERNELS, SOURCES};

/// cppo-cuda's folder.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("cppo-cuda")
}

/// The emulation, every kernel file, and the export table of `KERNELS` and `extra` (kernel names
/// defined in `extra_files`, relative to cppo-cuda): a name missing from the sources fails to compile.
pub fn emulation_source(extra_files: &[&str], extra: &[&str]) -> String {
    let root = root();
    let inc = |p: &str| format!("#include \"{}\"\n", root.join(p).display());
    let mut s = inc("emu/cuda_emu.h");
    s += &inc("kernels/common.cuh");
    for f in SOURCES {
        s += &inc(&format!("kernels/{}", f.name));
    }
    for f in extra_files {
        s += &inc(f);
    }
    s += &inc("emu/exports.h");
    s += "static const emu::Entry cppo_entries[] = {\n";
    for name in KERNELS.iter().map(|k| k.name).chain(extra.iter().copied()) {
        s += &format!("    EMU_ENTRY({name}),\n");
    }
    s += "};\nEMU_EXPORTS(cppo_entries)\n";
    s
}

/// A hash of `source`, `extra` and every file the emulation includes.
fn hash(source: &str, extra: &str, files: &[&str]) -> Result<u64, String> {
    let root = root();
    let mut h = DefaultHasher::new();
    source.hash(&mut h);
    extra.hash(&mut h);
    for p in ["emu/cuda_emu.h", "emu/exports.h", "kernels/common.cuh"].iter().chain(files) {
        std::fs::read(root.join(p)).map_err(|e| format!("{p}: {e}"))?.hash(&mut h);
    }
    for f in SOURCES {
        f.code.hash(&mut h);
    }
    Ok(h.finish())
}

/// Compiles `source` (C++17) into the shared library `out` (through a temporary file and a rename),
/// with `-Wl,-soname,SONAME` when given.
pub fn compile_shared(source: &str, out: &Path, soname: Option<&str>, flags: &[&str], target: &str, host: &str) -> Result<(), String> {
    let dir = out.parent().expect("a folder");
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let unique = format!("{}-{:?}", std::process::id(), std::thread::current().id()).replace(['(', ')'], "");
    let stem = out.file_name().and_then(|n| n.to_str()).unwrap_or("lib");
    let cpp = dir.join(format!("{stem}-{unique}.cpp"));
    let tmp = dir.join(format!(".{stem}-{unique}.tmp"));
    std::fs::write(&cpp, source).map_err(|e| format!("{}: {e}", cpp.display()))?;
    let tool = cc::Build::new()
        .cpp(true)
        .target(target)
        .host(host)
        .opt_level(2)
        .debug(false)
        .cargo_metadata(false)
        .try_get_compiler()
        .map_err(|e| format!("no C++ compiler: {e}"))?;
    let mut cmd = tool.to_command();
    cmd.args(["-std=c++17", "-shared", "-fPIC", "-pthread", "-Wall", "-Wno-unused-function", "-o"]).arg(&tmp).arg(&cpp);
    if let Some(s) = soname {
        cmd.arg(format!("-Wl,-soname,{s}"));
    }
    cmd.args(flags).arg("-ldl");
    let output = cmd.output().map_err(|e| format!("running {cmd:?}: {e}"))?;
    let _ = std::fs::remove_file(&cpp);
    if !output.status.success() {
        return Err(format!("compiling {} failed:\n{}", out.display(), String::from_utf8_lossy(&output.stderr)));
    }
    std::fs::rename(&tmp, out).map_err(|e| format!("{}: {e}", out.display()))
}

/// The emulation library of the tests (`extra_files` add kernels of their own), cached under `dir`.
pub fn emulation_library(dir: &Path, extra_files: &[&str], extra: &[&str], flags: &str, target: &str, host: &str) -> Result<PathBuf, String> {
    let src = emulation_source(extra_files, extra);
    let out = dir.join(format!("libcppo_emu_{:016x}.so", hash(&src, flags, extra_files)?));
    if !out.is_file() {
        compile_shared(&src, &out, None, &flags.split_whitespace().collect::<Vec<_>>(), target, host)?;
    }
    Ok(out)
}

pub const DRIVER: &str = "libcuda.so.1";
pub const BLAS_LT: &str = "libcublasLt.so.13";

/// A folder holding the fake `libcuda.so.1` and `libcublasLt.so.13`, each also under the name cudarc
/// tries first (`libcuda.so`, `libcublasLt.so`). Built once per set of sources, under `dir`.
pub fn fake_libraries(dir: &Path, target: &str, host: &str) -> Result<PathBuf, String> {
    let root = root();
    let driver = format!("{}#include \"{}\"\n", emulation_source(&[], &[]), root.join("fake/fake_cuda.cpp").display());
    let blas = format!("#include \"{}\"\n", root.join("fake/fake_cublaslt.cpp").display());
    let files = ["fake/fake_cuda.cpp", "fake/fake_cublaslt.cpp"];
    let out = dir.join(format!("cppo-fake-cuda-{:016x}", hash(&(driver.clone() + &blas), "", &files)?));
    if out.join("ready").is_file() {
        return Ok(out);
    }
    let staging = dir.join(format!(".fake-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    compile_shared(&driver, &staging.join(DRIVER), Some(DRIVER), &[], target, host)?;
    compile_shared(&blas, &staging.join(BLAS_LT), Some(BLAS_LT), &[], target, host)?;
    for (real, link) in [(DRIVER, "libcuda.so"), (BLAS_LT, "libcublasLt.so")] {
        std::os::unix::fs::symlink(real, staging.join(link)).map_err(|e| format!("{link}: {e}"))?;
    }
    std::fs::write(staging.join("ready"), b"").map_err(|e| e.to_string())?;
    match std::fs::rename(&staging, &out) {
        Ok(()) => Ok(out),
        // Another test process got there first.
        Err(_) if out.join("ready").is_file() => {
            let _ = std::fs::remove_dir_all(&staging);
            Ok(out)
        }
        Err(e) => Err(format!("{}: {e}", out.display())),
    }
}
