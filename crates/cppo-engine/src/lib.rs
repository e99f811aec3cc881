//! Batched generation for RL rollouts: a prompt prefilled once per question and shared by its samples,
//! continuous batching, per-token log-probs, stop on EOS / stop strings / length, seeded and reproducible.

#![forbid(unsafe_code)]

pub mod agreement;
pub mod backend;
pub mod decoder_backend;
pub mod engine;
pub mod sampling;
pub mod stop;

pub use backend::Backend;
pub use cppo_kernels::Precision;
pub use decoder_backend::DecoderBackend;
pub use engine::{generate, Completion, EngineOptions, Finish, GenerationStats, Request};
pub use sampling::SamplingParams;
