//! Loading a `.gguf` file: every tensor dequantised to f32 under its Hugging Face name (Llama's q/k rows
//! put back in Hugging Face order), the config, tokenizer and chat template from the metadata.

pub mod config;
pub mod metadata;
pub mod tensors;
pub mod tokenizer;

use std::io::BufReader;
use std::path::Path;

use candle_core::quantized::gguf_file::Content;
use candle_core::{DType, Device};

use crate::config::Architecture;
use crate::error::{candle_text, ModelIoError, Result};
use crate::load::LoadedModel;
use crate::weights::{check_dtype, Weights};
use metadata::Metadata;

pub use tensors::{hf_name, reverse_llama_rotary_permutation};

const ROPE_FREQS: &str = "rope_freqs.weight";

/// Only the tokenizer and chat template of a GGUF file, without reading its tensors.
pub fn load_gguf_tokenizer(path: &Path) -> Result<crate::tokenizer::ChatTokenizer> {
    let file = std::fs::File::open(path).map_err(|e| ModelIoError::io(path, e))?;
    let content = Content::read(&mut BufReader::new(file)).map_err(|e| {
        ModelIoError::corrupt(path, format!("invalid GGUF header: {}", candle_text(&e)))
    })?;
    tokenizer::tokenizer_from_metadata(&Metadata {
        values: &content.metadata,
        path,
    })
}

pub fn load_gguf(path: &Path, dtype: DType, device: &Device) -> Result<LoadedModel> {
    check_dtype(dtype)?;
    let file = std::fs::File::open(path).map_err(|e| ModelIoError::io(path, e))?;
    let mut reader = BufReader::new(file);
    let content = Content::read(&mut reader).map_err(|e| {
        ModelIoError::corrupt(path, format!("invalid GGUF header: {}", candle_text(&e)))
    })?;
    let md = Metadata {
        values: &content.metadata,
        path,
    };
    let architecture = config::architecture(&md)?;

    let read_f32 = |reader: &mut BufReader<std::fs::File>, gguf_name: &str| {
        content
            .tensor(reader, gguf_name, &Device::Cpu)
            .and_then(|q| q.dequantize(&Device::Cpu))
            .map_err(|e| {
                ModelIoError::corrupt(path, format!("tensor `{gguf_name}`: {}", candle_text(&e)))
            })
    };
    let rope_freqs = match content.tensor_infos.contains_key(ROPE_FREQS) {
        true => Some(
            read_f32(&mut reader, ROPE_FREQS)?
                .flatten_all()
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(|e| ModelIoError::tensor(ROPE_FREQS, e))?,
        ),
        false => None,
    };
    let config = config::config_from_metadata(&md, &content.tensor_infos, rope_freqs.as_deref())?;

    let mut names: Vec<&String> = content
        .tensor_infos
        .keys()
        .filter(|n| *n != ROPE_FREQS)
        .collect();
    // File order keeps reads sequential.
    names.sort_by_key(|n| content.tensor_infos[*n].offset);
    let mut weights = Weights::default();
    for gguf_name in names {
        let name = hf_name(gguf_name).ok_or_else(|| ModelIoError::UnexpectedTensor {
            path: path.to_path_buf(),
            name: gguf_name.clone(),
            architecture: architecture.model_type().to_string(),
        })?;
        let mut tensor = read_f32(&mut reader, gguf_name)?;
        if architecture == Architecture::Llama {
            let heads = if name.contains(".self_attn.q_proj.") {
                Some(config.num_attention_heads)
            } else if name.contains(".self_attn.k_proj.") {
                Some(config.num_key_value_heads)
            } else {
                None
            };
            if let Some(heads) = heads {
                // A wrong shape is reported by the shape check below, naming the tensor.
                if tensor
                    .dims()
                    .first()
                    .is_some_and(|rows| rows % (2 * heads) == 0)
                {
                    tensor = reverse_llama_rotary_permutation(&tensor, heads)?;
                }
            }
        }
        let tensor = tensor
            .to_dtype(dtype)
            .and_then(|t| t.to_device(device))
            .map_err(|e| ModelIoError::tensor(&name, e))?;
        weights.insert(name, tensor);
    }
    weights.check_against(&config, path)?;
    let tokenizer = tokenizer::tokenizer_from_metadata(&md)?;
    Ok(LoadedModel {
        config,
        weights,
        tokenizer,
    })
}
