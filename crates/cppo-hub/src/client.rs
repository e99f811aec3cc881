//! Talking to the Hub through `hf-hub`: the listing of a revision (its commit and every file's size and
//! hash), and downloads into the cache that are checked against that listing before anyone reads them.

use std::path::{Path, PathBuf};

use hf_hub::api::sync::{Api, ApiBuilder, ApiError};
use serde::Deserialize;

use crate::cache::CachedRepo;
use crate::error::{HubError, Result};
use crate::progress::DownloadProgress;
use crate::repo::RepoId;
use crate::settings::{HubSettings, OFFLINE_ENV};
use crate::verify::{mismatch, size_mismatch, FileHash, RemoteFile};

/// A download whose content differs from the listing is deleted and fetched again, this many times in
/// all, before it is an error.
const ATTEMPTS: usize = 2;
/// `hf-hub`'s own retries of a broken transfer, each resuming where the last one stopped.
const RESUME_RETRIES: usize = 3;

pub struct Hub {
    settings: HubSettings,
    api: Api,
}

/// A revision of a repository as the Hub lists it.
#[derive(Clone, Debug)]
pub struct Listing {
    pub commit: String,
    pub files: Vec<RemoteFile>,
}

impl Listing {
    pub fn get(&self, path: &str) -> Option<&RemoteFile> {
        self.files.iter().find(|f| f.path == path)
    }

    pub fn has(&self, path: &str) -> bool {
        self.get(path).is_some()
    }
}

#[derive(Deserialize)]
struct ListingJson {
    sha: String,
    siblings: Vec<SiblingJson>,
}

#[derive(Deserialize)]
struct SiblingJson {
    rfilename: String,
    #[serde(rename = "blobId")]
    blob_id: Option<String>,
    size: Option<u64>,
    lfs: Option<LfsJson>,
}

#[derive(Deserialize)]
struct LfsJson {
    sha256: String,
    size: Option<u64>,
}

impl Hub {
    pub fn new(settings: HubSettings) -> Result<Self> {
        let api = ApiBuilder::from_cache(hf_hub::Cache::new(settings.cache_dir.clone()))
            .with_endpoint(settings.endpoint.clone())
            .with_token(settings.token.clone())
            .with_progress(false)
            .with_retries(RESUME_RETRIES)
            .with_user_agent("cppo", env!("CARGO_PKG_VERSION"))
            .build()
            .map_err(|e| HubError::Network {
                repo: "-".into(),
                url: settings.endpoint.clone(),
                detail: format!("cannot set up the HTTP client: {e}"),
            })?;
        Ok(Hub { settings, api })
    }

    /// A client configured by the environment (`HF_ENDPOINT`, `HF_TOKEN`, `HF_HUB_OFFLINE`, `HF_HOME`,
    /// `HF_HUB_CACHE`).
    pub fn from_env() -> Result<Self> {
        Hub::new(HubSettings::from_env())
    }

    pub fn settings(&self) -> &HubSettings {
        &self.settings
    }

    pub fn cached(&self, repo: &RepoId) -> CachedRepo {
        CachedRepo::new(&self.settings.cache_dir, repo)
    }

    /// The error for "needed, not cached, and offline".
    pub(crate) fn offline_error(&self, repo: &RepoId, what: impl Into<String>) -> HubError {
        HubError::Offline {
            repo: repo.to_string(),
            what: what.into(),
            cache: self.cached(repo).dir.display().to_string(),
            var: OFFLINE_ENV,
        }
    }

    /// The revision's commit and files (with sizes and hashes), from the Hub's API.
    pub fn listing(&self, repo: &RepoId) -> Result<Listing> {
        let url = format!(
            "{}/api/{}/{}/revision/{}",
            self.settings.endpoint,
            repo.kind.plural(),
            repo.id,
            repo.revision.replace('/', "%2F")
        );
        let response = self
            .api
            .repo(repo.at(&repo.revision))
            .info_request()
            .query("blobs", "true")
            .call()
            .map_err(|e| self.classify(repo, &url, ApiError::RequestError(Box::new(e))))?;
        let json: ListingJson = response.into_json().map_err(|e| HubError::Network {
            repo: repo.to_string(),
            url: url.clone(),
            detail: format!("the answer is not a repository listing: {e}"),
        })?;
        let files = json
            .siblings
            .into_iter()
            .map(|s| {
                let (size, hash) = match s.lfs {
                    Some(lfs) => (lfs.size.or(s.size), Some(FileHash::Sha256(lfs.sha256))),
                    None => (s.size, s.blob_id.map(FileHash::GitBlob)),
                };
                RemoteFile {
                    path: s.rfilename,
                    size,
                    hash,
                }
            })
            .collect();
        Ok(Listing {
            commit: json.sha,
            files,
        })
    }

    /// The file in the cache's snapshot of `commit`, downloaded when missing. A cached file is checked
    /// against the listing's size; a downloaded one against size and hash, and deleted and fetched again
    /// when it differs, so a broken copy is never returned.
    pub fn fetch(&self, repo: &RepoId, commit: &str, file: &RemoteFile) -> Result<PathBuf> {
        let cached = self.cached(repo);
        let pointer = cached.snapshot_dir(commit).join(&file.path);
        let mut last_problem = String::new();
        for _ in 0..ATTEMPTS {
            if pointer.is_file() {
                // A cached copy of the wrong size (cut short behind the cache's back) is replaced.
                if size_mismatch(&pointer, file).is_none() {
                    return Ok(pointer);
                }
                discard(&pointer)?;
            }
            prepare_for_download(&cached, &pointer, file)?;
            let label = repo.to_string();
            let progress = DownloadProgress::new(self.settings.progress, label);
            let api_repo = self.api.repo(repo.at(commit));
            let url = api_repo.url(&file.path);
            let path = api_repo
                .download_with_progress(&file.path, progress)
                .map_err(|e| self.classify(repo, &url, e))?;
            match mismatch(&path, file) {
                None => return Ok(path),
                Some(problem) => {
                    last_problem = problem;
                    discard(&path)?;
                }
            }
        }
        Err(HubError::Corrupt {
            repo: repo.to_string(),
            file: file.path.clone(),
            detail: last_problem,
            attempts: ATTEMPTS,
        })
    }

    /// Turns an `hf-hub` error into one that says what to do.
    fn classify(&self, repo: &RepoId, url: &str, error: ApiError) -> HubError {
        let endpoint = self.settings.endpoint.clone();
        let network = |detail: String| HubError::Network {
            repo: repo.to_string(),
            url: url.to_owned(),
            detail,
        };
        match error {
            ApiError::TooManyRetries(inner) => self.classify(repo, url, *inner),
            ApiError::RequestError(e) => match *e {
                ureq::Error::Status(status, response) => {
                    let code = response.header("x-error-code").unwrap_or_default().to_owned();
                    let message = response.header("x-error-message").unwrap_or_default().to_owned();
                    let url = response.get_url().to_owned();
                    self.status_error(repo, &url, status, &code, &message)
                }
                ureq::Error::Transport(t) => network(t.to_string()),
            },
            ApiError::IoError(e) => network(format!("the transfer broke off: {e}")),
            ApiError::MissingHeader(h) => network(format!(
                "the answer has no `{h}` header, which the Hub sends: is HF_ENDPOINT ({endpoint}) a Hugging Face Hub?"
            )),
            ApiError::InvalidHeader(h) => network(format!("the answer's `{h}` header is malformed")),
            ApiError::LockAcquisition(path) => HubError::Content {
                repo: repo.to_string(),
                message: format!(
                    "another process holds the download lock {}; wait for it to finish (or delete the lock file if none is running)",
                    path.display()
                ),
            },
            other => network(other.to_string()),
        }
    }

    fn status_error(&self, repo: &RepoId, url: &str, status: u16, code: &str, message: &str) -> HubError {
        let endpoint = self.settings.endpoint.clone();
        let has_token = self.settings.token.is_some();
        let page = repo.page(&endpoint);
        let detail = if message.is_empty() { String::new() } else { format!(": {message}") };
        match (status, code) {
            (401 | 403, "GatedRepo") => HubError::Gated {
                repo: repo.to_string(),
                endpoint,
                advice: if has_token {
                    format!("the token cppo used (HF_TOKEN, or the login saved by `huggingface-cli login`) has no access yet; accept the conditions on {page} with that account")
                } else {
                    format!("accept its conditions on {page}, then set HF_TOKEN to a token of that account (or log in with `huggingface-cli login`)")
                },
            },
            (_, "RepoNotFound") | (404, "") => HubError::NotFound {
                repo: repo.to_string(),
                endpoint,
                detail: format!("HTTP {status}{detail}"),
                hint: if has_token {
                    String::new()
                } else {
                    "; a private repository also needs HF_TOKEN".to_owned()
                },
            },
            (_, "RevisionNotFound") => HubError::NotFound {
                repo: repo.to_string(),
                endpoint,
                detail: format!("no revision `{}`{detail}", repo.revision),
                hint: " and the revision after `@`".to_owned(),
            },
            (_, "EntryNotFound") => HubError::NotFound {
                repo: repo.to_string(),
                endpoint,
                detail: format!("{url} does not exist{detail}"),
                hint: String::new(),
            },
            (401 | 403, _) => HubError::Unauthorized {
                repo: repo.to_string(),
                endpoint,
                status,
                detail,
                advice: if has_token {
                    "the token (HF_TOKEN, or the saved login) is invalid or cannot read this repository".to_owned()
                } else {
                    "the repository is private or needs a login: set HF_TOKEN to a token that can read it".to_owned()
                },
            },
            (404, _) => HubError::NotFound {
                repo: repo.to_string(),
                endpoint,
                detail: format!("HTTP 404{detail}"),
                hint: String::new(),
            },
            _ => HubError::Network {
                repo: repo.to_string(),
                url: url.to_owned(),
                detail: format!("HTTP {status}{detail}"),
            },
        }
    }
}

/// Deletes a cached file: its blob and the snapshot's link to it.
fn discard(pointer: &Path) -> Result<()> {
    if let Ok(blob) = std::fs::canonicalize(pointer) {
        if blob != pointer {
            remove_if_present(&blob)?;
        }
    }
    remove_if_present(pointer)
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(HubError::io(path, e)),
    }
}

/// Clears what would stop `hf-hub` from downloading cleanly: a snapshot link whose blob is gone (it
/// would refuse to replace it), and a partial download longer than the file (not a prefix of it, so it
/// cannot be resumed). A shorter partial download stays and is resumed.
fn prepare_for_download(cached: &CachedRepo, pointer: &Path, file: &RemoteFile) -> Result<()> {
    if pointer.symlink_metadata().is_ok() && !pointer.exists() {
        remove_if_present(pointer)?;
    }
    if let (Some(hash), Some(size)) = (&file.hash, file.size) {
        let part = cached.blob_path(hash.etag()).with_extension("part");
        if std::fs::metadata(&part).is_ok_and(|m| m.len() > size) {
            remove_if_present(&part)?;
        }
    }
    Ok(())
}
