//! Errors of model input/output: each names the file and the key or tensor at fault, so a user can tell a
//! truncated download from a wrong architecture without reading code.

use std::path::{Path, PathBuf};

pub type Result<T> = std::result::Result<T, ModelIoError>;

#[derive(Debug, thiserror::Error)]
pub enum ModelIoError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Malformed JSON; serde_json's message carries the line and column.
    #[error("{path}: invalid JSON: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    #[error("{path}: missing key `{key}`")]
    MissingKey { path: PathBuf, key: String },

    #[error("{path}: key `{key}`: {reason}")]
    InvalidValue {
        path: PathBuf,
        key: String,
        reason: String,
    },

    #[error("{path}: unsupported architecture `{found}` (supported: {supported})")]
    UnknownArchitecture {
        path: PathBuf,
        found: String,
        supported: &'static str,
    },

    #[error("{path}: missing tensor `{name}`")]
    MissingTensor { path: PathBuf, name: String },

    #[error(
        "{path}: unexpected tensor `{name}` (not part of a {architecture} model with this config)"
    )]
    UnexpectedTensor {
        path: PathBuf,
        name: String,
        architecture: String,
    },

    #[error("{path}: tensor `{name}` has shape {found:?}, the config implies {expected:?}")]
    ShapeMismatch {
        path: PathBuf,
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },

    /// A truncated or corrupt safetensors or GGUF file; `detail` names the tensor when one is at fault.
    #[error("{path}: {detail}")]
    Corrupt { path: PathBuf, detail: String },

    #[error("tokenizer ({origin}): {detail}")]
    Tokenizer { origin: String, detail: String },

    #[error("chat template ({origin}): {detail}")]
    Template { origin: String, detail: String },

    #[error("unsupported dtype {0:?}: only f32 and bf16 are loaded and written")]
    UnsupportedDtype(candle_core::DType),

    #[error("fetching {what}: {detail}")]
    Fetch { what: String, detail: String },

    #[error("tensor `{name}`: {}", candle_text(source))]
    Tensor {
        name: String,
        #[source]
        source: candle_core::Error,
    },
}

impl ModelIoError {
    pub(crate) fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        ModelIoError::Io {
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    pub(crate) fn json(path: impl AsRef<Path>, source: serde_json::Error) -> Self {
        ModelIoError::Json {
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    pub(crate) fn corrupt(path: impl AsRef<Path>, detail: impl Into<String>) -> Self {
        ModelIoError::Corrupt {
            path: path.as_ref().to_path_buf(),
            detail: detail.into(),
        }
    }

    pub(crate) fn invalid(
        path: impl AsRef<Path>,
        key: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        ModelIoError::InvalidValue {
            path: path.as_ref().to_path_buf(),
            key: key.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn tensor(name: impl Into<String>, source: candle_core::Error) -> Self {
        ModelIoError::Tensor {
            name: name.into(),
            source,
        }
    }
}

/// candle's message without the backtrace it attaches when `RUST_BACKTRACE` is set: users need the
/// cause, and the error already names the file and tensor.
pub(crate) fn candle_text(e: &candle_core::Error) -> String {
    match e {
        candle_core::Error::WithBacktrace { inner, .. } => candle_text(inner),
        other => other.to_string(),
    }
}
