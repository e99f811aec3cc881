//! The subcommands that are more than one library call: the CLI (main.rs) parses arguments and calls
//! these; they print tables, draw plots and time benchmarks around `cppo-train`'s library.

pub mod bench;
pub mod bench_device;
pub mod bench_lora;
pub mod bench_rewards;
pub mod compare;
pub mod eval;
pub mod generate;
pub mod quickstart;
pub mod train;

/// The model shape a benchmark's `--random-config` names (a Hugging Face `config.json`).
pub fn read_random_config(path: &std::path::Path) -> anyhow::Result<cppo_io::ModelConfig> {
    use anyhow::Context;
    let text = std::fs::read_to_string(path).with_context(|| format!("--random-config {}", path.display()))?;
    cppo_io::hf::parse_config_json(&text, path).with_context(|| format!("--random-config {}", path.display()))
}
