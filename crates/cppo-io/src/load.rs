//! One entry point for every model source: a Hugging Face directory or a `.gguf` file.

use std::io::Read;
use std::path::Path;

use candle_core::{DType, Device};

use crate::config::ModelConfig;
use crate::error::{ModelIoError, Result};
use crate::tokenizer::ChatTokenizer;
use crate::weights::Weights;

#[derive(Clone, Debug)]
pub struct LoadedModel {
    pub config: ModelConfig,
    pub weights: Weights,
    pub tokenizer: ChatTokenizer,
}

/// Loads `path` (a Hugging Face model directory or a `.gguf` file) with tensors in `dtype` (f32 or bf16)
/// on `device`. Tensor names are Hugging Face's whatever the source.
pub fn load_model(path: &Path, dtype: DType, device: &Device) -> Result<LoadedModel> {
    let meta = std::fs::metadata(path).map_err(|e| ModelIoError::io(path, e))?;
    if meta.is_dir() {
        crate::hf::load_hf_dir(path, dtype, device)
    } else if is_gguf(path)? {
        crate::gguf::load_gguf(path, dtype, device)
    } else {
        Err(ModelIoError::corrupt(
            path,
            "neither a model directory nor a GGUF file (no `GGUF` magic at the start)",
        ))
    }
}

fn is_gguf(path: &Path) -> Result<bool> {
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path).map_err(|e| ModelIoError::io(path, e))?;
    match file.read_exact(&mut magic) {
        Ok(()) => Ok(&magic == b"GGUF"),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(ModelIoError::io(path, e)),
    }
}
