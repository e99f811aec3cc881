//! Model input and output: a model's configuration and tensors from a Hugging Face directory or a GGUF
//! file, a Hugging Face directory out (`save_hf`, `convert_gguf`), the tokenizer with its chat template,
//! and the fetch of the small model the tests and quickstart run.

#![forbid(unsafe_code)]

pub mod config;
pub mod params;
pub mod weights;

pub use config::{Architecture, ModelConfig, RopeScaling};
pub use params::{LayerParam, ParamKind, ParamSpec};
pub use weights::Weights;

pub mod chat_template;
pub mod error;
pub mod fetch;
pub mod gguf;
pub mod hf;
pub mod load;
pub mod peft;
pub mod tokenizer;
pub mod writer;

pub use chat_template::{ChatMessage, ChatTemplate, SpecialTokens};
pub use error::ModelIoError;
pub use load::{load_model, LoadedModel};
pub use tokenizer::ChatTokenizer;
pub use writer::{convert_gguf, save_hf};
