//! The model: a decoder for the Llama family (Llama 2/3, SmolLM2, Qwen2/2.5, Qwen3) on candle, its loaders
//! (Hugging Face directory, GGUF), its writer (Hugging Face directory), and its tokenizer with chat template.

pub mod config;
pub mod weights;

pub use config::{Architecture, ModelConfig, RopeScaling};
pub use weights::Weights;
