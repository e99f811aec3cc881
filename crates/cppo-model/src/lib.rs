//! The model: a decoder for the Llama family (Llama 2/3, SmolLM2, Qwen2/2.5, Qwen3) on candle, its loaders
//! (Hugging Face directory, GGUF), its writer (Hugging Face directory), and its tokenizer with chat template.

pub mod config;
pub mod weights;

pub use config::{Architecture, ModelConfig, RopeScaling};
pub use weights::Weights;

pub mod alloc;
pub mod chat_template;
pub mod error;
pub mod fetch;
pub mod gguf;
pub mod hf;
pub mod load;
pub mod tokenizer;
pub mod writer;

pub use chat_template::{ChatMessage, ChatTemplate, SpecialTokens};
pub use error::ModelIoError;
pub use load::{load_model, LoadedModel};
pub use tokenizer::ChatTokenizer;
pub use writer::{convert_gguf, save_hf};

pub mod decoder;
pub mod kv_cache;
pub mod ops;

pub use decoder::{sequence_fingerprint, CompletionLogProbs, Decoder, DecoderError, RolloutWeights};
pub use kv_cache::KvCache;
