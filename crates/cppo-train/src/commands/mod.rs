//! The library side of the `cppo` subcommands that are more than one call: the CLI parses arguments and
//! calls these.

pub mod bench;
pub mod bench_lora;
pub mod compare;
pub mod eval;
pub mod generate;
pub mod quickstart;
pub mod train;
