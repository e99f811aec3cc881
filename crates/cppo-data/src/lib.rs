//! Datasets for cppo: the published sets by name (from a local data folder, or the Hub repositories that
//! publish them), users' own JSON-lines and parquet files, generated arithmetic, the prompt templates
//! that turn a problem into chat messages, and a resumable batch sampler.

#![forbid(unsafe_code)]

pub mod arith;
pub mod dataset;
pub mod error;
pub mod jsonl;
pub mod parquet;
pub mod root;
pub mod sampler;
pub mod template;

pub use arith::{
    generate as generate_arith, split_of, ArithConfig, ArithOp, ArithSplit, ARITH_PRESETS,
};
pub use dataset::{Dataset, HubSource};
pub use error::{DataError, Result};
pub use jsonl::{load_jsonl, task_of_data_source, JsonlSpec, VERL_GROUND_TRUTH};
pub use parquet::{load_file, load_parquet, load_split_files};
pub use root::{data_root, resolve_data_root, resolve_data_root_in, DataRoot, RootOrigin, DATA_DIR_ENV};
pub use sampler::{take, take_random, Sampler, SamplerState};
pub use template::{ChatMessage, PromptTemplate, PRESET_NAMES, R1_MATH_SYSTEM, R1_THINK_SYSTEM};

pub use cppo_core::{Problem, Task};
