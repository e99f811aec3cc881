//! The cppo trainer.

#![forbid(unsafe_code)]

pub mod optim;
pub mod schedule;
pub mod config;
pub mod lora;
pub mod fsutil;
pub mod metrics;
pub mod tensorboard;
pub mod checkpoint;
pub mod eval;
pub mod prompt;
pub mod rewards;
pub mod rollout;
pub mod shaping;
pub mod sources;
pub mod step;
pub mod trainer;
pub mod update;
pub mod objectives;
pub mod device;
pub mod run;
