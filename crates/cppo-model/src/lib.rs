//! The decoder of the Llama family (Llama 2/3, SmolLM2, Qwen2/2.5, Qwen3): its training path (log-probs
//! through a tape with a hand-written backward) and its cached generation path. Kernels live in
//! `cppo-kernels`, loading and saving in `cppo-io`.

#![forbid(unsafe_code)]

mod cache_rows;
pub mod decoder;
pub mod device_cache;
pub mod kv_cache;

pub use decoder::{Backward, CompletionLogProbs, Decoder, DecoderError, LoraSpec, RolloutWeights, TapeRun, WeightGrads};
pub use device_cache::DeviceCache;
pub use kv_cache::KvCache;
