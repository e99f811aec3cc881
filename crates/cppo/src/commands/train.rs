//! `cppo train` (and the quickstart's and compare's runs): the library's run, then the reward curve in
//! `OUT/reward.png`.

use std::path::Path;

use anyhow::Result;
use cppo_train::metrics::{JsonlLog, StepMetrics};
use cppo_train::run::{evals_of, run, RunOptions, TrainSummary};
use cppo_train::config::TrainConfig;

use crate::plot::{line_chart, Series};

pub fn train(cfg: TrainConfig, opts: &RunOptions) -> Result<TrainSummary> {
    let summary = run(cfg, opts)?;
    plot_rewards(&summary.output_dir)?;
    Ok(summary)
}

/// `OUT/reward.png`: mean reward per step, its moving average, and held-out accuracy at each evaluation.
pub fn plot_rewards(out: &Path) -> Result<()> {
    let metrics: Vec<StepMetrics> = JsonlLog::read(&out.join("metrics.jsonl"))?;
    let raw: Vec<(f64, f64)> = metrics.iter().map(|m| (m.step as f64, m.reward_mean)).collect();
    const WINDOW: usize = 5;
    let smooth: Vec<(f64, f64)> = (0..raw.len())
        .map(|i| {
            let from = i.saturating_sub(WINDOW - 1);
            let w = &raw[from..=i];
            (raw[i].0, w.iter().map(|p| p.1).sum::<f64>() / w.len() as f64)
        })
        .collect();
    let mut series = vec![
        Series { name: "train reward (step mean)".into(), points: raw },
        Series { name: format!("train reward ({WINDOW}-step average)"), points: smooth },
    ];
    let evals = evals_of(out)?;
    if !evals.is_empty() {
        series.push(Series { name: "held-out accuracy".into(), points: evals.iter().map(|e| (e.step as f64, e.accuracy)).collect() });
    }
    line_chart(&out.join("reward.png"), "reward during training", "step", "reward / accuracy", &series)
}
