//! The `cppo` command line: each subcommand parses its arguments and calls one library function.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use cppo_core::Task;

#[derive(Parser)]
#[command(name = "cppo", version, about = "GRPO-family RL for LLM reasoning, with completion pruning (CPPO) and down-sampling (PODS)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Grade model responses: JSON lines {"response", "answer"} in, one {"correct", "extracted", "reward"} out per line.
    Grade {
        /// Which grader: `gsm8k` (numeric answers) or `math` (LaTeX answers up to equivalence).
        #[arg(long)]
        task: Task,
        /// JSON lines to grade; standard input when absent.
        #[arg(long)]
        input: Option<PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Grade { task, input } => {
            let mut reader: Box<dyn BufRead> = match &input {
                Some(path) => Box::new(BufReader::new(
                    std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
                )),
                None => Box::new(BufReader::new(std::io::stdin().lock())),
            };
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let summary = cppo_reward::grade::run(task, &mut reader, &mut out)?;
            out.flush()?;
            eprintln!("{summary}");
        }
    }
    Ok(())
}
