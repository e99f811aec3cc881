//! The Hugging Face cache as `huggingface_hub` lays it out, read without the network:
//! `<cache>/models--org--name/refs/<branch>` holds a commit, `snapshots/<commit>/<path>` are the files
//! (links into `blobs/<etag>`). A snapshot transformers filled is used as it is, and one cppo fills is
//! the same shape.

use std::path::{Path, PathBuf};

use crate::error::{HubError, Result};
use crate::repo::RepoId;

pub struct CachedRepo {
    /// `<cache>/models--org--name`.
    pub dir: PathBuf,
    revision: String,
    revision_is_commit: bool,
}

impl CachedRepo {
    pub fn new(cache_dir: &Path, repo: &RepoId) -> Self {
        CachedRepo {
            dir: cache_dir.join(repo.folder_name()),
            revision: repo.revision.clone(),
            revision_is_commit: repo.revision_is_commit(),
        }
    }

    /// The commit the revision points at in the cache: `refs/<revision>`, or the revision itself when it
    /// is a commit hash whose snapshot exists.
    pub fn commit(&self) -> Option<String> {
        if let Ok(text) = std::fs::read_to_string(self.dir.join("refs").join(&self.revision)) {
            let commit = text.trim();
            if !commit.is_empty() {
                return Some(commit.to_owned());
            }
        }
        (self.revision_is_commit && self.snapshot_dir(&self.revision).is_dir())
            .then(|| self.revision.clone())
    }

    pub fn snapshot_dir(&self, commit: &str) -> PathBuf {
        self.dir.join("snapshots").join(commit)
    }

    /// The snapshot of the revision, when the cache has one.
    pub fn snapshot(&self) -> Option<PathBuf> {
        self.commit()
            .map(|c| self.snapshot_dir(&c))
            .filter(|d| d.is_dir())
    }

    pub fn blob_path(&self, etag: &str) -> PathBuf {
        self.dir.join("blobs").join(etag)
    }

    /// Points `refs/<revision>` at `commit`, through a rename so a reader never sees half a hash. A
    /// commit revision needs no ref.
    pub fn set_ref(&self, commit: &str) -> Result<()> {
        if self.revision_is_commit {
            return Ok(());
        }
        let path = self.dir.join("refs").join(&self.revision);
        let parent = path.parent().unwrap_or(&self.dir).to_path_buf();
        std::fs::create_dir_all(&parent).map_err(|e| HubError::io(&parent, e))?;
        let tmp = parent.join(format!(".ref-{}.tmp", std::process::id()));
        std::fs::write(&tmp, commit).map_err(|e| HubError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| HubError::io(&path, e))
    }
}

/// Every file under `snapshot` as a `/`-separated path relative to it; links are followed, so a link
/// whose blob is gone is not listed (it counts as missing and is fetched again).
pub fn snapshot_files(snapshot: &Path) -> Vec<String> {
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
            if path.is_dir() {
                walk(&path, &rel, out);
            } else if path.is_file() {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(snapshot, "", &mut out);
    out.sort();
    out
}
