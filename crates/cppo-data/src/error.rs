//! Every way loading, templating, generating or sampling can fail, each naming what the user has to fix.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A parquet file that cannot be read (not parquet, truncated, a codec cppo lacks).
    #[error("{}: cannot read it as parquet: {message}", path.display())]
    Parquet { path: PathBuf, message: String },

    #[error("{}:{line}: not valid UTF-8", path.display())]
    NotUtf8 { path: PathBuf, line: usize },

    #[error("{}:{line}: not valid JSON: {message}", path.display())]
    Json {
        path: PathBuf,
        line: usize,
        message: String,
    },

    #[error("{}:{line}: expected a JSON object, got {got}", path.display())]
    NotAnObject {
        path: PathBuf,
        line: usize,
        got: &'static str,
    },

    #[error("{}:{line}: field \"{field}\": {problem}", path.display())]
    Field {
        path: PathBuf,
        line: usize,
        field: String,
        problem: String,
    },

    /// A dataset's file is absent where the data root says it should be.
    #[error("dataset `{dataset}`: {} not found (data root {} {origin}); set CPPO_DATA_DIR to the folder that holds {relative}",
        path.display(), root.display())]
    MissingFile {
        dataset: String,
        path: PathBuf,
        root: PathBuf,
        origin: String,
        relative: String,
    },

    /// No data root could be found at all.
    #[error("no data folder found (tried {tried}); set CPPO_DATA_DIR to the folder that holds gsm8k/, math/, math500/, amc23/ and aime24/")]
    NoDataRoot { tried: String },

    #[error("unknown dataset `{0}` (expected one of: {1})")]
    UnknownDataset(String, String),

    #[error("prompt template: {0}")]
    Template(String),

    #[error("unknown prompt preset `{0}` (expected one of: {1})")]
    UnknownPreset(String, String),

    #[error("arith config: {0}")]
    ArithConfig(String),

    #[error("arith: {0}")]
    ArithExhausted(String),

    #[error("sampler: {0}")]
    Sampler(String),
}

pub type Result<T, E = DataError> = std::result::Result<T, E>;
