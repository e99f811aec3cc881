//! Where the Hub and its cache are, read from the same environment variables as `huggingface_hub`, so
//! cppo and transformers share one cache and one login.

use std::path::PathBuf;

/// The Hub every tool uses unless `HF_ENDPOINT` says otherwise.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// Set to 1 / true / yes / on: use the cache only and never reach the network.
pub const OFFLINE_ENV: &str = "HF_HUB_OFFLINE";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubSettings {
    /// `HF_ENDPOINT`, without a trailing slash.
    pub endpoint: String,
    /// The hub cache holding `models--org--name/` and `datasets--org--name/`: `HF_HUB_CACHE`, else
    /// `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.
    pub cache_dir: PathBuf,
    /// `HF_TOKEN`, else the token file `huggingface-cli login` wrote (`HF_TOKEN_PATH`, else
    /// `$HF_HOME/token`).
    pub token: Option<String>,
    /// `HF_HUB_OFFLINE`.
    pub offline: bool,
    /// Show a progress bar per download (on a terminal; elsewhere one line per file).
    pub progress: bool,
}

impl HubSettings {
    /// The settings of this process's environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// The settings as `lookup` gives the environment, so the rules can be tested without touching the
    /// process's own variables. Empty values count as unset, as in `huggingface_hub`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |key: &str| lookup(key).filter(|v| !v.trim().is_empty());
        let hf_home = get("HF_HOME").map(PathBuf::from).unwrap_or_else(|| {
            let cache = get("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| get("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .unwrap_or_else(|| PathBuf::from(".cache"));
            cache.join("huggingface")
        });
        let cache_dir = get("HF_HUB_CACHE")
            .or_else(|| get("HUGGINGFACE_HUB_CACHE"))
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home.join("hub"));
        let token_file = get("HF_TOKEN_PATH")
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home.join("token"));
        let token = get("HF_TOKEN")
            .or_else(|| get("HUGGING_FACE_HUB_TOKEN"))
            .or_else(|| std::fs::read_to_string(token_file).ok())
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty());
        let endpoint = get("HF_ENDPOINT")
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned())
            .trim_end_matches('/')
            .to_owned();
        let offline = get(OFFLINE_ENV).is_some_and(|v| is_truthy(&v));
        HubSettings {
            endpoint,
            cache_dir,
            token,
            offline,
            progress: true,
        }
    }

    /// A server and cache given outright (tests, or a caller with its own configuration); online, no
    /// token, no progress output.
    pub fn new(endpoint: impl Into<String>, cache_dir: impl Into<PathBuf>) -> Self {
        HubSettings {
            endpoint: endpoint.into().trim_end_matches('/').to_owned(),
            cache_dir: cache_dir.into(),
            token: None,
            offline: false,
            progress: false,
        }
    }
}

/// `huggingface_hub`'s reading of a boolean variable.
fn is_truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}
