use std::path::PathBuf;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Buffers or sizes that do not fit the operation; caught on the host before any launch.
    #[error("{op}: {detail}")]
    Shape { op: &'static str, detail: String },
    #[error("no kernel named {0} in kernels/ (that dtype combination is not instantiated)")]
    NoKernel(String),
    #[error("kernel {kernel}: arguments `{got}` do not match its parameters `{want}`")]
    Signature { kernel: &'static str, got: String, want: &'static str },
    #[error("kernel {kernel}: {detail}")]
    Launch { kernel: &'static str, detail: String },
    #[error("CUDA driver: {0}")]
    Driver(String),
    /// cuBLASLt missing or refusing a call that is not a product (those are `Launch`).
    #[error("cuBLASLt: {0}")]
    Blas(String),
    #[error("NVRTC: {0}")]
    Nvrtc(String),
    #[error("fetching {what}: {detail}")]
    Fetch { what: String, detail: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

impl Error {
    pub(crate) fn shape(op: &'static str, detail: impl Into<String>) -> Self {
        Error::Shape { op, detail: detail.into() }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
