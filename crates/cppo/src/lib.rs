//! The command line's side of cppo: the subcommands' implementations (tables, plots, benchmarks) over the
//! `cppo-train` library. `main.rs` only parses arguments and calls these; tests call them directly.

#![forbid(unsafe_code)]

pub mod commands;
pub mod plot;
