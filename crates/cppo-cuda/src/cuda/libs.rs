//! Finding the three CUDA libraries before cudarc first touches them: cudarc opens a library on its
//! first call and panics when it finds none, and it only looks on the loader's path. PyTorch's wheels
//! keep cuBLASLt and NVRTC in `site-packages/nvidia/*/lib`, which no loader path names; a GPU machine
//! with PyTorch but no toolkit has them only there. Each library is probed once per process: on the
//! loader path under cudarc's own names, else in the usual folders, where it is opened by full path
//! with RTLD_GLOBAL (the dynamic linker then matches cudarc's later request against its soname). A
//! library found nowhere is an error naming it and every place searched, never cudarc's panic.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Library {
    /// `libcuda.so`: part of the NVIDIA driver.
    Driver,
    /// `libcublasLt.so`: the matrix products.
    BlasLt,
    /// `libnvrtc.so`: compiles the kernels at run time.
    Nvrtc,
}

impl Library {
    pub const ALL: [Library; 3] = [Library::Driver, Library::BlasLt, Library::Nvrtc];

    pub fn file(self) -> &'static str {
        match self {
            Library::Driver => "libcuda.so",
            Library::BlasLt => "libcublasLt.so",
            Library::Nvrtc => "libnvrtc.so",
        }
    }

    /// Whether cudarc's own search (its candidate names through the dynamic loader) finds it now.
    fn on_loader_path(self) -> bool {
        // SAFETY: each only tries to dlopen the library under cudarc's candidate names.
        unsafe {
            match self {
                Library::Driver => cudarc::driver::sys::is_culib_present(),
                Library::BlasLt => cudarc::cublaslt::sys::is_culib_present(),
                Library::Nvrtc => cudarc::nvrtc::sys::is_culib_present(),
            }
        }
    }

    /// Files to open in a folder, in order (NVRTC's builtins first, which it opens by soname).
    fn members(self) -> &'static [&'static str] {
        match self {
            Library::Driver => &["libcuda.so."],
            Library::BlasLt => &["libcublasLt.so."],
            Library::Nvrtc => &["libnvrtc-builtins.so.", "libnvrtc.so."],
        }
    }
}

/// Where a library was found: `None` = on the loader path (cudarc opens it itself).
pub type Found = Option<PathBuf>;

static PROBED: [OnceLock<std::result::Result<Found, String>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];

/// Makes `lib` loadable for cudarc (once per process; the answer, found or not, is kept).
pub fn ensure(lib: Library) -> Result<Found> {
    let slot = &PROBED[Library::ALL.iter().position(|l| *l == lib).expect("listed")];
    let r = slot.get_or_init(|| probe(lib, &search_dirs(lib)));
    match (r, lib) {
        (Ok(f), _) => Ok(f.clone()),
        (Err(e), Library::Driver) => Err(Error::Driver(e.clone())),
        (Err(e), Library::Nvrtc) => Err(Error::Nvrtc(e.clone())),
        (Err(e), Library::BlasLt) => Err(Error::Blas(e.clone())),
    }
}

fn probe(lib: Library, dirs: &[(String, PathBuf)]) -> std::result::Result<Found, String> {
    // An explicit CPPO_NVRTC_DIR wins over whatever NVRTC the loader would find.
    let explicit = dirs.first().filter(|(why, _)| why == "CPPO_NVRTC_DIR");
    if explicit.is_none() && lib.on_loader_path() {
        return Ok(None);
    }
    for (_, dir) in dirs {
        if let Some(path) = preload(lib, dir)? {
            if lib.on_loader_path() {
                return Ok(Some(path));
            }
            return Err(format!("{} opened from {}, but cudarc still cannot load it under its names (a soname cudarc does not ask for)", lib.file(), path.display()));
        }
    }
    if explicit.is_some() && lib.on_loader_path() {
        return Ok(None);
    }
    if lib == Library::Nvrtc {
        if let Some(path) = fetch_nvrtc()? {
            return Ok(Some(path));
        }
    }
    Err(not_found(lib, dirs))
}

fn not_found(lib: Library, dirs: &[(String, PathBuf)]) -> String {
    let places: Vec<String> = dirs.iter().map(|(why, d)| format!("{} ({why})", d.display())).collect();
    let what = match lib {
        Library::Driver => "no CUDA driver (libcuda.so) on this machine: the CUDA backend needs an NVIDIA GPU and its driver",
        Library::BlasLt => "no cuBLASLt (libcublasLt.so) found: install the CUDA toolkit or PyTorch's nvidia-cublas wheel, or put its folder on LD_LIBRARY_PATH",
        Library::Nvrtc => "no NVRTC (libnvrtc.so) found: set CPPO_NVRTC_DIR to a folder holding libnvrtc.so.13 (e.g. a wheel's nvidia/cu13/lib), install the CUDA toolkit, or allow cppo to fetch the nvidia-cuda-nvrtc wheel once (network)",
    };
    format!(
        "{what}; searched the loader path (LD_LIBRARY_PATH={}, the system's ld.so cache) under cudarc's names, then: {}",
        std::env::var("LD_LIBRARY_PATH").unwrap_or_default(),
        if places.is_empty() { "nothing else".to_string() } else { places.join(", ") }
    )
}

/// Opens `lib`'s files in `dir` by full path, if they are all there. `Ok(None)`: not in this folder.
fn preload(lib: Library, dir: &Path) -> std::result::Result<Found, String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(None) };
    let names: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    let pick = |prefix: &str| {
        names.iter().filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix) && !n.contains(".alt."))).min().cloned()
    };
    let Some(paths) = lib.members().iter().map(|m| pick(m)).collect::<Option<Vec<PathBuf>>>() else { return Ok(None) };
    for path in &paths {
        // SAFETY: NVIDIA's libraries (or a test's stand-ins); their initialisers set up their own
        // state. RTLD_GLOBAL so NVRTC's own dlopen of its builtins finds this copy.
        let h = unsafe { libloading::os::unix::Library::open(Some(path), libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL) }
            .map_err(|e| format!("{} found at {} but it does not load: {e}", lib.file(), path.display()))?;
        // Unloading would pull the library from under cudarc's cached handle.
        std::mem::forget(h);
    }
    Ok(paths.last().cloned())
}

/// The folders searched after the loader path, each with why: `CPPO_NVRTC_DIR` (NVRTC), `CUDA_HOME`
/// / `CUDA_PATH` / `/usr/local/cuda`, the Python wheels (`site-packages/nvidia/*/lib`), and, for the
/// driver, the distributions' folders and the CUDA compat package.
pub fn search_dirs(lib: Library) -> Vec<(String, PathBuf)> {
    let mut dirs = Vec::new();
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if lib == Library::Nvrtc {
        if let Some(d) = var("CPPO_NVRTC_DIR") {
            dirs.push(("CPPO_NVRTC_DIR".to_string(), d));
        }
        if let Ok(c) = crate::nvrtc_lib::cache_dir() {
            dirs.push(("cppo's cached NVRTC wheel".to_string(), c.join(format!("nvrtc-{}", crate::nvrtc_lib::WHEEL_VERSION))));
        }
    }
    for k in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(d) = var(k) {
            dirs.push((k.to_string(), d.join("lib64")));
            dirs.push((k.to_string(), d.join("lib")));
        }
    }
    dirs.push(("the CUDA toolkit's usual place".to_string(), PathBuf::from("/usr/local/cuda/lib64")));
    if lib == Library::Driver {
        for d in ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib", "/usr/local/cuda/compat"] {
            dirs.push(("the driver's usual places".to_string(), PathBuf::from(d)));
        }
    } else {
        for sp in site_packages() {
            let Ok(entries) = std::fs::read_dir(sp.join("nvidia")) else { continue };
            let mut libs: Vec<PathBuf> = entries.flatten().map(|e| e.path().join("lib")).filter(|p| p.is_dir()).collect();
            libs.sort();
            dirs.extend(libs.into_iter().map(|d| ("a Python wheel (site-packages/nvidia/*/lib)".to_string(), d)));
        }
    }
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|(_, d)| seen.insert(d.clone()));
    dirs
}

/// The Python environments' package folders: the virtual or conda environment, `PYTHONPATH`, and
/// what `python3` itself says (which covers pyenv and user installs); no network, no import of torch.
fn site_packages() -> Vec<PathBuf> {
    static SITES: OnceLock<Vec<PathBuf>> = OnceLock::new();
    SITES
        .get_or_init(|| {
            let mut out = Vec::new();
            for k in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
                if let Some(prefix) = std::env::var_os(k) {
                    let lib = PathBuf::from(prefix).join("lib");
                    if let Ok(entries) = std::fs::read_dir(&lib) {
                        out.extend(entries.flatten().map(|e| e.path().join("site-packages")).filter(|p| p.is_dir()));
                    }
                }
            }
            if let Some(pp) = std::env::var_os("PYTHONPATH") {
                out.extend(std::env::split_paths(&pp));
            }
            let asked = std::process::Command::new("python3")
                .args(["-c", "import site, sys\nfor p in site.getsitepackages() + [site.getusersitepackages()] + sys.path: print(p)"])
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output();
            if let Ok(o) = asked {
                out.extend(String::from_utf8_lossy(&o.stdout).lines().filter(|l| !l.is_empty()).map(PathBuf::from));
            }
            let mut seen = std::collections::HashSet::new();
            out.retain(|p| p.is_dir() && seen.insert(p.clone()));
            out
        })
        .clone()
}

/// Whether this process may reach PyPI: not where `CPPO_OFFLINE=1` (the GPU check sets it) or
/// `PIP_NO_INDEX` says no, nor where pypi.org does not even resolve (no network: pip would only wait
/// for its time-out).
fn online() -> bool {
    let off = |k: &str| std::env::var(k).is_ok_and(|v| !v.is_empty() && v != "0");
    if off("CPPO_OFFLINE") || off("PIP_NO_INDEX") {
        return false;
    }
    use std::net::ToSocketAddrs;
    ("pypi.org", 443).to_socket_addrs().is_ok_and(|mut a| a.next().is_some())
}

/// The `nvidia-cuda-nvrtc` wheel fetched into cppo's cache (at most once per process: `ensure` keeps
/// the answer). `Ok(None)` when offline.
fn fetch_nvrtc() -> std::result::Result<Found, String> {
    if !online() {
        return Ok(None);
    }
    let dir = crate::nvrtc_lib::wheel_dir().map_err(|e| e.to_string())?;
    match preload(Library::Nvrtc, &dir)? {
        Some(p) if Library::Nvrtc.on_loader_path() => Ok(Some(p)),
        _ => Err(format!("the fetched NVRTC wheel in {} does not load", dir.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_names_itself_and_every_place_searched() {
        let dirs = vec![("CUDA_HOME".to_string(), PathBuf::from("/nowhere/cuda/lib64")), ("a Python wheel (site-packages/nvidia/*/lib)".to_string(), PathBuf::from("/nowhere/nvidia/cublas/lib"))];
        let e = not_found(Library::BlasLt, &dirs);
        assert!(e.contains("libcublasLt.so") && e.contains("LD_LIBRARY_PATH"), "{e}");
        assert!(e.contains("/nowhere/cuda/lib64 (CUDA_HOME)") && e.contains("/nowhere/nvidia/cublas/lib (a Python wheel"), "{e}");
        assert!(not_found(Library::Driver, &[]).contains("no CUDA driver"));
    }

    #[test]
    fn a_folder_without_the_library_is_skipped_and_one_with_a_broken_file_is_an_error() {
        let dir = std::env::temp_dir().join(format!("cppo-libs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(preload(Library::BlasLt, &dir), Ok(None));
        // NVRTC needs both files: the library alone is not NVRTC's folder.
        std::fs::write(dir.join("libnvrtc.so.13"), b"not an ELF file").unwrap();
        assert_eq!(preload(Library::Nvrtc, &dir), Ok(None));
        std::fs::write(dir.join("libcublasLt.so.13"), b"not an ELF file").unwrap();
        let e = preload(Library::BlasLt, &dir).unwrap_err();
        assert!(e.contains("libcublasLt.so.13") && e.contains("does not load"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_search_covers_cuda_home_and_the_nvrtc_override() {
        // Read only: the variables as this process has them.
        let dirs = search_dirs(Library::Nvrtc);
        assert!(dirs.iter().any(|(_, d)| d == Path::new("/usr/local/cuda/lib64")), "{dirs:?}");
        if let Some(d) = std::env::var_os("CPPO_NVRTC_DIR").filter(|v| !v.is_empty()) {
            assert_eq!(dirs[0].1, PathBuf::from(d));
        }
        assert!(search_dirs(Library::Driver).iter().all(|(why, _)| !why.contains("wheel")));
    }
}
