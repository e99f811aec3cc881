//! The subcommands that are more than one library call: the CLI (main.rs) parses arguments and calls
//! these; they print tables, draw plots and time benchmarks around `cppo-train`'s library.

pub mod bench;
pub mod bench_device;
pub mod bench_lora;
pub mod compare;
pub mod eval;
pub mod generate;
pub mod quickstart;
pub mod train;
