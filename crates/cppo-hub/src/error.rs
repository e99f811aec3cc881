//! Every way resolving a Hub name can fail, each saying what to do about it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// A name that is not `org/name[@revision]` (or a dataset name's extra parts).
    #[error("`{name}`: {problem}")]
    BadName { name: String, problem: String },

    /// Offline mode, and what the name asks for is not in the cache.
    #[error("{repo}: {what} is not in the Hugging Face cache ({cache}) and {var} is set, so nothing is downloaded; unset {var} to download it, or set HF_HUB_CACHE / HF_HOME to a cache that has it")]
    Offline {
        repo: String,
        what: String,
        cache: String,
        var: &'static str,
    },

    #[error("{repo}: not found on {endpoint} ({detail}); check the name (it is case-sensitive){hint}")]
    NotFound {
        repo: String,
        endpoint: String,
        detail: String,
        hint: String,
    },

    /// A gated repository (licence to accept) asked for without a token, or with one that has no access.
    #[error("{repo} is gated on {endpoint}: {advice}")]
    Gated {
        repo: String,
        endpoint: String,
        advice: String,
    },

    /// 401 / 403 that is not a gate: a private repository or a bad token.
    #[error("{repo}: {endpoint} refused access (HTTP {status}{detail}): {advice}")]
    Unauthorized {
        repo: String,
        endpoint: String,
        status: u16,
        detail: String,
        advice: String,
    },

    /// A downloaded file whose size or hash is not the Hub's; it was deleted each time, never kept.
    #[error("{repo}: {file} was downloaded {attempts} times and each copy differed from the Hub's record ({detail}); the copies were deleted. Try again later, or check HF_ENDPOINT / a proxy that may alter downloads")]
    Corrupt {
        repo: String,
        file: String,
        detail: String,
        attempts: usize,
    },

    #[error("{repo}: {url}: {detail}; check the network and HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use only what is cached")]
    Network {
        repo: String,
        url: String,
        detail: String,
    },

    /// The repository exists but does not hold what cppo needs (no safetensors, no data files for a split).
    #[error("{repo}: {message}")]
    Content { repo: String, message: String },

    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl HubError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        HubError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = HubError> = std::result::Result<T, E>;
