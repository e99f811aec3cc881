//! Where the shared data folder is, so the same binary finds it from a checkout, a test, or anywhere else
//! once `CPPO_DATA_DIR` is set.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{DataError, Result};

/// The environment variable that names the data folder; it wins over every other place.
pub const DATA_DIR_ENV: &str = "CPPO_DATA_DIR";

/// `../shared/data` beside the repository this crate was built in (the crate sits at `<repo>/crates/cppo-data`).
const REPO_RELATIVE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data");

/// How a data root was found, so a missing-file error can say which setting to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootOrigin {
    /// From `CPPO_DATA_DIR`.
    Env,
    /// `../shared/data` relative to the current directory.
    CurrentDir,
    /// `../shared/data` beside the repository the crate was built from.
    Repo,
    /// Passed in by the caller.
    Given,
}

impl fmt::Display for RootOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RootOrigin::Env => "from CPPO_DATA_DIR",
            RootOrigin::CurrentDir => "found as ../shared/data from the current directory",
            RootOrigin::Repo => "found as ../shared/data beside the repository",
            RootOrigin::Given => "as given",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataRoot {
    pub path: PathBuf,
    pub origin: RootOrigin,
}

impl DataRoot {
    pub fn given(path: impl Into<PathBuf>) -> Self {
        DataRoot {
            path: path.into(),
            origin: RootOrigin::Given,
        }
    }
}

/// Finds the data folder, in this order:
/// 1. `CPPO_DATA_DIR`, when set and non-empty (used alone: a set but wrong value is an error, never skipped);
/// 2. `../shared/data` relative to the current directory;
/// 3. `../shared/data` beside the repository this crate was built from.
pub fn data_root() -> Result<DataRoot> {
    let env = std::env::var_os(DATA_DIR_ENV);
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    resolve_data_root(env.as_deref(), &cwd)
}

/// [`data_root`] with the environment and current directory passed in, so the order can be tested.
pub fn resolve_data_root(env_value: Option<&OsStr>, cwd: &Path) -> Result<DataRoot> {
    resolve_data_root_in(env_value, cwd, Path::new(REPO_RELATIVE))
}

/// [`resolve_data_root`] with the repository's `../shared/data` passed in too, so a test can place one
/// without depending on what lies beside the checkout.
pub fn resolve_data_root_in(env_value: Option<&OsStr>, cwd: &Path, repo_data: &Path) -> Result<DataRoot> {
    if let Some(value) = env_value.filter(|v| !v.is_empty()) {
        let path = PathBuf::from(value);
        if path.is_dir() {
            return Ok(DataRoot {
                path,
                origin: RootOrigin::Env,
            });
        }
        return Err(DataError::NoDataRoot {
            tried: format!(
                "{} from {DATA_DIR_ENV}, which is not a folder",
                path.display()
            ),
        });
    }
    let candidates = [
        (cwd.join("../shared/data"), RootOrigin::CurrentDir),
        (repo_data.to_path_buf(), RootOrigin::Repo),
    ];
    for (path, origin) in &candidates {
        if path.is_dir() {
            return Ok(DataRoot {
                path: path.clone(),
                origin: *origin,
            });
        }
    }
    let tried = candidates
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    Err(DataError::NoDataRoot {
        tried: format!("{DATA_DIR_ENV} unset, {tried}"),
    })
}
