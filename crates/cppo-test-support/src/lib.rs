//! What several crates' tests share, as a crate rather than files included by `#[path]`: the tiny
//! random model with its byte-level tokenizer and a config that trains it (`tiny`), training runs on a
//! backend the test brings and their comparison (`device_runs`), and the test-time C++ builds of the
//! CUDA emulation and the CPU-hosted fake driver (`fake_cuda`).

#![forbid(unsafe_code)]

pub mod device_runs;
pub mod fake_cuda;
pub mod tiny;

pub use tiny::{out_dir, tiny_config, tiny_model_dir, tiny_tokenizer};
