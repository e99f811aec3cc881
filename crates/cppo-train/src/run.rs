//! A whole training run: the steps with a progress bar, evaluation and checkpoint cadence, resuming, and
//! the final model in `OUT/model` (with LoRA, the adapter in `OUT/adapter`). The command line's `train`,
//! `quickstart` and `compare` call `run`; tests call it too.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::config::TrainConfig;
use crate::eval::EvalSummary;
use crate::metrics::JsonlLog;
use crate::trainer::Trainer;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrainSummary {
    pub output_dir: PathBuf,
    pub steps: u64,
    pub initial_eval: Option<EvalSummary>,
    pub final_eval: Option<EvalSummary>,
    pub best_eval: Option<(u64, f64)>,
    pub seconds: f64,
}

pub struct RunOptions {
    pub progress: bool,
    pub resume: bool,
    /// Stop after the first step that brings the run's training time (steps only, not evaluations) past
    /// this many seconds.
    pub time_limit: Option<f64>,
    /// Write the final checkpoint and `OUT/model` (a comparison of arms skips them).
    pub save: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { progress: true, resume: false, time_limit: None, save: true }
    }
}

/// The configuration of a run to resume (the one saved in its output folder) with `--set` overrides. Only `train.steps` may be given (to run
/// a finished or interrupted run for longer); any other key is refused, naming it.
pub fn resume_config(out: &Path, overrides: &[String]) -> Result<TrainConfig> {
    for spec in overrides {
        let key = spec.split_once('=').map_or(spec.as_str(), |(k, _)| k).trim();
        if !crate::trainer::RESUMABLE_CHANGES.contains(&key) {
            bail!("--resume --set {key}: a resumed run keeps its configuration; only train.steps (raised), reward.timeout_s and reward.python can be changed, e.g. --set train.steps=200");
        }
    }
    let path = out.join("config.toml");
    TrainConfig::load(&path, overrides).with_context(|| format!("--resume {}: cannot read the run's configuration", out.display()))
}

pub fn run(cfg: TrainConfig, opts: &RunOptions) -> Result<TrainSummary> {
    let start = std::time::Instant::now();
    let mut trainer = Trainer::new(cfg, opts.resume)?;
    let steps = trainer.cfg.train.steps;
    let (eval_every, save_every) = (trainer.cfg.train.eval_every, trainer.cfg.train.save_every);
    if opts.progress {
        let (update, rollouts) = (trainer.cfg.optim.matmul_precision, trainer.cfg.generation.weights);
        let auto = |p: cppo_kernels::Precision| if p == cppo_kernels::Precision::Auto { " (auto)" } else { "" };
        let update = if update == cppo_kernels::Precision::Auto && trainer.update_backend() != "cpu" {
            "bf16 by auto (the device's)".to_string()
        } else if update == cppo_kernels::Precision::Auto {
            format!("{} by auto", cppo_kernels::describe_auto_update())
        } else {
            update.name().to_string()
        };
        if trainer.update_backend() != "cpu" {
            eprintln!("rollouts, update and evaluation on {}", trainer.update_backend());
        }
        eprintln!(
            "kernels: {} on {}; update products {update}, rollout weights {}{}",
            cppo_kernels::isa::describe(),
            cppo_kernels::isa::vendor().name(),
            rollouts.for_rollouts().name(),
            auto(rollouts)
        );
        for line in crate::lora::memory_plan(&trainer.policy, trainer.reference.as_ref(), trainer.cfg.optim.micro_batch_tokens) {
            eprintln!("{line}");
        }
    }
    let mut initial_eval = None;
    if trainer.step == 0 && trainer.cfg.train.eval_before {
        initial_eval = trainer.evaluate()?;
        if let (true, Some(e)) = (opts.progress, &initial_eval) {
            eprintln!("held-out accuracy before training: {:.1}% ({} problems)", 100.0 * e.accuracy, e.problems);
        }
    }
    let bar = if opts.progress { ProgressBar::new(steps) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{spinner} step {pos}/{len} [{elapsed_precise} < {eta_precise}] {bar:30} {msg}")
            .expect("valid template"),
    );
    bar.set_position(trainer.step);
    // A resumed run has evaluated and saved at its checkpoint's step already (the logs were cut back to
    // it): resuming a finished run must not append a second final evaluation or rewrite its checkpoint.
    let mut last_eval_step = if initial_eval.is_some() {
        Some(0)
    } else if opts.resume {
        last_eval_of(&trainer.out)?.map(|e| e.step).filter(|&s| s == trainer.step)
    } else {
        None
    };
    let mut last_save_step = opts.resume.then_some(trainer.step);
    let mut train_seconds = 0.0;
    while trainer.step < steps {
        if opts.time_limit.is_some_and(|limit| train_seconds >= limit) {
            break;
        }
        let report = trainer.train_step(|_| bar.tick())?;
        let m = &report.metrics;
        train_seconds += m.time.total;
        bar.set_message(format!(
            "reward {:.3} acc {:.2} kept {}/{} len {:.0}",
            m.reward_mean, m.accuracy, m.completions_kept, m.completions_generated, m.completion_length_mean
        ));
        bar.set_position(trainer.step);
        if eval_every > 0 && trainer.step % eval_every == 0 {
            if let Some(e) = trainer.evaluate()? {
                bar.println(format!("step {}: held-out accuracy {:.1}%", trainer.step, 100.0 * e.accuracy));
            }
            last_eval_step = Some(trainer.step);
        }
        if save_every > 0 && trainer.step % save_every == 0 {
            trainer.save_checkpoint()?;
            last_save_step = Some(trainer.step);
        }
    }
    bar.finish_and_clear();
    let final_eval = if last_eval_step == Some(trainer.step) {
        last_eval_of(&trainer.out)?
    } else {
        trainer.evaluate()?
    };
    if opts.save {
        if last_save_step != Some(trainer.step) {
            trainer.save_checkpoint()?;
        }
        let dir = trainer.final_model_dir();
        trainer.save_model(&dir)?;
    }
    Ok(TrainSummary {
        output_dir: trainer.out.clone(),
        steps: trainer.step,
        initial_eval: initial_eval.or(first_eval_of(&trainer.out)?),
        final_eval,
        best_eval: trainer.best_eval,
        seconds: start.elapsed().as_secs_f64(),
    })
}

pub fn evals_of(out: &Path) -> Result<Vec<EvalSummary>> {
    let path = out.join("eval.jsonl");
    if !path.exists() {
        return Ok(vec![]);
    }
    JsonlLog::read(&path)
}

fn last_eval_of(out: &Path) -> Result<Option<EvalSummary>> {
    Ok(evals_of(out)?.pop())
}

fn first_eval_of(out: &Path) -> Result<Option<EvalSummary>> {
    Ok(evals_of(out)?.into_iter().find(|e| e.step == 0))
}
