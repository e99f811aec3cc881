use thiserror::Error;

#[derive(Debug, Error)]
pub enum DecoderError {
    #[error("decoder weights: missing tensor `{name}`")]
    MissingTensor { name: String },
    #[error("decoder weights: tensor `{name}` has shape {got:?}, expected {expected:?}")]
    BadShape { name: String, expected: Vec<usize>, got: Vec<usize> },
    #[error("decoder config: {0}")]
    BadConfig(String),
    #[error("token id {token} is out of range for vocabulary size {vocab}")]
    TokenOutOfRange { token: u32, vocab: usize },
    #[error("decoder input: {0}")]
    BadInput(String),
    #[error("kv cache: {0}")]
    Cache(String),
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

pub type Result<T> = std::result::Result<T, DecoderError>;
