//! `cppo compare`: runs several arms (GRPO, CPPO at some pruning rates, PODS) from the same initial model,
//! data order and seed, one after another, and reports wall time per phase, held-out accuracy and the two
//! speedups the papers use: time to finish the same questions (CPPO) and time to first reach 99% of
//! GRPO's best held-out accuracy (PODS).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cppo_core::select::Strategy;
use serde::{Deserialize, Serialize};

use cppo_train::run::RunOptions;

use crate::commands::train::train;
use cppo_train::config::TrainConfig;
use cppo_train::eval::EvalSummary;
use cppo_train::fsutil::write_atomic;
use cppo_train::metrics::{JsonlLog, StepMetrics};
use crate::plot::{band_chart, stacked_bars, SeriesGroup};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ArmKind {
    Grpo,
    /// CPPO at pruning rate P, with dynamic completion allocation (as in the paper).
    Cppo { pruning_rate: f64 },
    /// PODS: generate n per question, train on the m of maximum reward variance.
    Pods { n: usize, m: usize },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Arm {
    pub label: String,
    pub kind: ArmKind,
    /// `key=value` config overrides of this arm alone (`cppo:0.75@loss.rollout_correction=none`), applied
    /// after the arm's selection settings.
    #[serde(default)]
    pub overrides: Vec<String>,
}

/// Parses `grpo,cppo:0.75,cppo:0.875,pods:64/16`; an arm may carry its own config overrides after `@`
/// (`grpo@loss.beta=0@generation.temperature=0.7`), so two arms can differ in any key.
pub fn parse_arms(spec: &str) -> Result<Vec<Arm>> {
    let mut arms = Vec::new();
    for raw in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let mut parts = raw.split('@').map(str::trim);
        let base = parts.next().unwrap_or_default();
        let overrides: Vec<String> = parts.map(str::to_string).collect();
        if let Some(bad) = overrides.iter().find(|o| !o.contains('=')) {
            bail!("--arms {raw}: `@{bad}` is not a key=value override");
        }
        let kind = match base.split_once(':') {
            None if base == "grpo" => ArmKind::Grpo,
            Some(("cppo", p)) => {
                let pruning_rate: f64 = p.parse().with_context(|| format!("--arms {raw}: `{p}` is not a pruning rate"))?;
                if !(0.0..1.0).contains(&pruning_rate) {
                    bail!("--arms {raw}: the pruning rate must be in [0, 1)");
                }
                ArmKind::Cppo { pruning_rate }
            }
            Some(("pods", nm)) => {
                let Some((n, m)) = nm.split_once('/') else { bail!("--arms {raw}: expected pods:N/M, e.g. pods:64/16") };
                let n: usize = n.parse().with_context(|| format!("--arms {raw}: `{n}` is not a rollout count"))?;
                let m: usize = m.parse().with_context(|| format!("--arms {raw}: `{m}` is not a kept count"))?;
                if m < 2 || m > n {
                    bail!("--arms {raw}: need 2 <= m <= n");
                }
                ArmKind::Pods { n, m }
            }
            _ => bail!("--arms: unknown arm `{raw}` (use grpo, cppo:P or pods:N/M)"),
        };
        if arms.iter().any(|a: &Arm| a.label == raw) {
            bail!("--arms: `{raw}` is given twice");
        }
        arms.push(Arm { label: raw.to_string(), kind, overrides });
    }
    if arms.is_empty() {
        bail!("--arms names no arm");
    }
    Ok(arms)
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Budget {
    /// GRPO runs this many steps; every other arm runs until it has trained on the same questions.
    Steps(u64),
    /// Every arm trains for this many minutes (steps only, evaluations excluded).
    Minutes(f64),
}

pub struct CompareArgs {
    pub base: TrainConfig,
    pub arms: Vec<Arm>,
    pub seeds: usize,
    pub budget: Budget,
    pub out: PathBuf,
    /// Evaluations per run (besides the one before training), evenly spaced in questions.
    pub evals: u64,
    pub progress: bool,
}

/// One arm's configuration derived from the base.
pub fn arm_config(base: &TrainConfig, arm: &Arm) -> Result<TrainConfig> {
    let mut c = base.clone();
    let r = &mut c.rollout;
    match arm.kind {
        ArmKind::Grpo => {
            r.selection.strategy = Strategy::All;
            r.allocation = false;
        }
        ArmKind::Cppo { pruning_rate } => {
            r.selection.strategy = Strategy::Cppo { pruning_rate };
            r.allocation = true;
        }
        ArmKind::Pods { n, m } => {
            r.num_generations = n;
            r.selection.strategy = Strategy::PodsMaxVariance { m };
            r.allocation = false;
        }
    }
    c.validate().with_context(|| format!("arm {}", arm.label))?;
    c.with_overrides(&arm.overrides).with_context(|| format!("arm {}", arm.label))
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunFigures {
    pub seed: u64,
    pub steps: u64,
    pub questions: usize,
    pub completions_generated: usize,
    pub completions_trained: usize,
    pub train_seconds: f64,
    pub generation_seconds: f64,
    pub reward_seconds: f64,
    /// Reference + old policy + policy forward/backward + optimizer.
    pub update_seconds: f64,
    #[serde(default)]
    pub reference_seconds: f64,
    #[serde(default)]
    pub old_policy_seconds: f64,
    /// Policy forward + backward over all update passes.
    #[serde(default)]
    pub policy_seconds: f64,
    #[serde(default)]
    pub optimizer_seconds: f64,
    pub final_accuracy: f64,
    pub best_accuracy: f64,
    /// (training seconds so far, held-out accuracy) at each evaluation.
    pub curve: Vec<(f64, f64)>,
    pub seconds_per_question: f64,
    /// Training seconds to first reach 99% of GRPO's best held-out accuracy (same seed); none if never.
    pub time_to_target: Option<f64>,
    /// GRPO's seconds per question over this arm's (the CPPO papers' measure).
    pub speedup_same_questions: Option<f64>,
    /// GRPO's time to target over this arm's (the PODS paper's measure).
    pub speedup_to_target: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Spread {
    pub mean: f64,
    pub std: f64,
    pub n: usize,
}

impl Spread {
    fn of(values: impl Iterator<Item = f64>) -> Option<Spread> {
        let v: Vec<f64> = values.collect();
        if v.is_empty() {
            return None;
        }
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let std = if v.len() > 1 {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Spread { mean, std, n: v.len() })
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ArmReport {
    pub arm: Arm,
    pub runs: Vec<RunFigures>,
    /// Mean and spread over seeds of the figures above.
    pub summary: BTreeMap<String, Spread>,
}

impl Default for Arm {
    fn default() -> Self {
        Arm { label: String::new(), kind: ArmKind::Grpo, overrides: Vec::new() }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompareReport {
    pub budget: Budget,
    pub seeds: usize,
    pub target_fraction: f64,
    pub arms: Vec<ArmReport>,
}

const TARGET_FRACTION: f64 = 0.99;

pub fn compare(args: &CompareArgs) -> Result<CompareReport> {
    if args.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let configs: Vec<TrainConfig> = args.arms.iter().map(|a| arm_config(&args.base, a)).collect::<Result<_>>()?;
    let questions_per_step: Vec<usize> =
        configs.iter().map(|c| c.plan().map(|p| p.questions_per_step).map_err(|e| anyhow::anyhow!("{e}"))).collect::<Result<_>>()?;
    let grpo_questions = args.base.rollout.questions_per_step as u64;
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let mut runs: Vec<Vec<RunFigures>> = vec![Vec::new(); args.arms.len()];
    for s in 0..args.seeds {
        let seed = args.base.seed + s as u64;
        for (a, arm) in args.arms.iter().enumerate() {
            let mut cfg = configs[a].clone();
            cfg.seed = seed;
            cfg.output_dir = args.out.join(sanitize(&arm.label)).join(format!("seed-{seed}"));
            let b = questions_per_step[a] as u64;
            let (steps, limit) = match args.budget {
                Budget::Steps(s) => ((s * grpo_questions).div_ceil(b).max(1), None),
                // The learning-rate schedule still spans the config's run (the same questions as
                // GRPO's train.steps); the clock stops the arm early.
                Budget::Minutes(m) => ((args.base.train.steps * grpo_questions).div_ceil(b).max(1), Some(m * 60.0)),
            };
            cfg.train.steps = steps;
            cfg.train.eval_before = true;
            cfg.train.save_every = 0;
            cfg.train.eval_every = match args.budget {
                Budget::Steps(_) if args.evals > 0 => (steps / args.evals).max(1),
                Budget::Steps(_) => 0,
                // With a time budget the step count is unknown: evaluate every few steps.
                Budget::Minutes(_) => (8 * grpo_questions).div_ceil(b).max(1),
            };
            if args.progress {
                eprintln!("== arm {} (seed {seed}): {steps} steps of {b} questions", arm.label);
            }
            train(cfg.clone(), &RunOptions { progress: args.progress, resume: false, time_limit: limit, save: false })
                .with_context(|| format!("arm {} seed {seed}", arm.label))?;
            runs[a].push(figures(&cfg.output_dir, seed)?);
        }
    }
    // Speedups against GRPO of the same seed (the first `grpo` arm; none without one).
    if let Some(g) = args.arms.iter().position(|a| a.kind == ArmKind::Grpo) {
        speedups(&mut runs, g);
    }
    let arms = args
        .arms
        .iter()
        .zip(runs)
        .map(|(arm, runs)| ArmReport { summary: summarise(&runs), arm: arm.clone(), runs })
        .collect();
    let report = CompareReport { budget: args.budget, seeds: args.seeds, target_fraction: TARGET_FRACTION, arms };
    write_atomic(&args.out.join("compare.json"), serde_json::to_string_pretty(&report)?.as_bytes())?;
    plot(&report, &args.out)?;
    Ok(report)
}

/// Fills each run's time to target and its two speedups against the GRPO run (`runs[grpo]`) of the same
/// seed: `runs[arm][seed]`. The target is 99% of that GRPO run's best held-out accuracy; a run that never
/// reaches it, or reaches it before training (time 0), has no time-to-target speedup.
pub fn speedups(runs: &mut [Vec<RunFigures>], grpo: usize) {
    for s in 0..runs[grpo].len() {
        let base = runs[grpo][s].clone();
        let target = TARGET_FRACTION * base.best_accuracy;
        let grpo_time = time_to(&base.curve, target);
        for arm_runs in runs.iter_mut() {
            let Some(r) = arm_runs.get_mut(s) else { continue };
            r.time_to_target = time_to(&r.curve, target);
            r.speedup_same_questions = (r.seconds_per_question > 0.0).then(|| base.seconds_per_question / r.seconds_per_question);
            r.speedup_to_target = match (grpo_time, r.time_to_target) {
                (Some(g), Some(t)) if t > 0.0 => Some(g / t),
                _ => None,
            };
        }
    }
}

fn sanitize(label: &str) -> String {
    label.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect()
}

/// The first training time at which the curve reaches `target` (an evaluation before training counts at 0).
fn time_to(curve: &[(f64, f64)], target: f64) -> Option<f64> {
    if target <= 0.0 {
        return None;
    }
    curve.iter().find(|(_, acc)| *acc >= target - 1e-12).map(|(t, _)| *t)
}

fn figures(out: &Path, seed: u64) -> Result<RunFigures> {
    let metrics: Vec<StepMetrics> = JsonlLog::read(&out.join("metrics.jsonl"))?;
    let evals: Vec<EvalSummary> = JsonlLog::read(&out.join("eval.jsonl"))?;
    let mut elapsed = vec![0.0];
    for m in &metrics {
        elapsed.push(elapsed.last().unwrap() + m.time.total);
    }
    let curve: Vec<(f64, f64)> = evals.iter().map(|e| (elapsed[(e.step as usize).min(metrics.len())], e.accuracy)).collect();
    let questions: usize = metrics.iter().map(|m| m.questions).sum();
    let train_seconds = *elapsed.last().unwrap();
    Ok(RunFigures {
        seed,
        steps: metrics.len() as u64,
        questions,
        completions_generated: metrics.iter().map(|m| m.completions_generated).sum(),
        completions_trained: metrics.iter().map(|m| m.completions_kept).sum(),
        train_seconds,
        generation_seconds: metrics.iter().map(|m| m.time.generation).sum(),
        reward_seconds: metrics.iter().map(|m| m.time.reward).sum(),
        update_seconds: metrics.iter().map(|m| m.time.update()).sum(),
        reference_seconds: metrics.iter().map(|m| m.time.reference).sum(),
        old_policy_seconds: metrics.iter().map(|m| m.time.old_policy).sum(),
        policy_seconds: metrics.iter().map(|m| m.time.policy).sum(),
        optimizer_seconds: metrics.iter().map(|m| m.time.optimizer).sum(),
        final_accuracy: evals.last().map_or(0.0, |e| e.accuracy),
        best_accuracy: evals.iter().map(|e| e.accuracy).fold(0.0, f64::max),
        curve,
        seconds_per_question: train_seconds / questions.max(1) as f64,
        time_to_target: None,
        speedup_same_questions: None,
        speedup_to_target: None,
    })
}

/// Mean and spread (sample standard deviation) over seeds of each figure; a figure no run has (a
/// speedup never reached) is left out.
pub fn summarise(runs: &[RunFigures]) -> BTreeMap<String, Spread> {
    let fields: [(&str, fn(&RunFigures) -> Option<f64>); 16] = [
        ("train_seconds", |r| Some(r.train_seconds)),
        ("generation_seconds", |r| Some(r.generation_seconds)),
        ("reward_seconds", |r| Some(r.reward_seconds)),
        ("reference_seconds", |r| Some(r.reference_seconds)),
        ("old_policy_seconds", |r| Some(r.old_policy_seconds)),
        ("policy_seconds", |r| Some(r.policy_seconds)),
        ("optimizer_seconds", |r| Some(r.optimizer_seconds)),
        ("update_seconds", |r| Some(r.update_seconds)),
        ("final_accuracy", |r| Some(r.final_accuracy)),
        ("best_accuracy", |r| Some(r.best_accuracy)),
        ("questions", |r| Some(r.questions as f64)),
        ("completions_generated", |r| Some(r.completions_generated as f64)),
        ("completions_trained", |r| Some(r.completions_trained as f64)),
        ("speedup_same_questions", |r| r.speedup_same_questions),
        ("speedup_to_target", |r| r.speedup_to_target),
        ("time_to_target", |r| r.time_to_target),
    ];
    fields.iter().filter_map(|(name, f)| Spread::of(runs.iter().filter_map(f)).map(|s| (name.to_string(), s))).collect()
}

fn plot(report: &CompareReport, out: &Path) -> Result<()> {
    // Every seed's curve, with the mean over seeds and its min-max band when there are several.
    let groups: Vec<SeriesGroup> = report
        .arms
        .iter()
        .map(|a| SeriesGroup { name: a.arm.label.clone(), runs: a.runs.iter().map(|r| r.curve.clone()).collect() })
        .collect();
    let title = if report.seeds > 1 {
        format!("held-out accuracy against training time ({} seeds: each, mean, min-max band)", report.seeds)
    } else {
        "held-out accuracy against training time".to_string()
    };
    band_chart(&out.join("accuracy_vs_time.png"), &title, "training seconds", "held-out accuracy", &groups)?;
    let labels: Vec<String> = report.arms.iter().map(|a| a.arm.label.clone()).collect();
    let (names, segments) = phase_segments(report);
    let segments: Vec<(String, Vec<f64>)> = names.into_iter().map(String::from).zip(segments).collect();
    stacked_bars(&out.join("time_per_phase.png"), "training time per phase (mean over seeds)", "seconds", &labels, &segments)
}

/// The segments of the time-per-phase bars, one value per arm (means over seeds): each phase of a step
/// as `metrics.jsonl` times it, and what remains of the training time (selection, batching).
pub fn phase_segments(report: &CompareReport) -> ([&'static str; 7], Vec<Vec<f64>>) {
    let names = ["generation", "reward", "reference", "old policy", "policy fwd+bwd", "optimizer", "other"];
    let keys = ["generation_seconds", "reward_seconds", "reference_seconds", "old_policy_seconds", "policy_seconds", "optimizer_seconds"];
    let mean = |a: &ArmReport, k: &str| a.summary.get(k).map_or(0.0, |s| s.mean);
    let mut segments: Vec<Vec<f64>> = keys.iter().map(|k| report.arms.iter().map(|a| mean(a, k)).collect()).collect();
    let other =
        report.arms.iter().map(|a| (mean(a, "train_seconds") - keys.iter().map(|k| mean(a, k)).sum::<f64>()).max(0.0)).collect();
    segments.push(other);
    (names, segments)
}

/// The table the CLI prints (Markdown, so it pastes into a README).
pub fn table(report: &CompareReport) -> String {
    let mut s = String::from(
        "| arm | train s (gen / update) | questions | completions gen / trained | final acc | best acc | speedup, same questions | speedup, to 99% of GRPO best |\n|---|---|---|---|---|---|---|---|\n",
    );
    #[derive(Clone, Copy, PartialEq)]
    enum Unit {
        Seconds,
        Count,
        Percent,
        Times,
    }
    let fmt = |sp: Option<&Spread>, unit: Unit| match sp {
        None => "n/a".to_string(),
        Some(v) => {
            let k = if unit == Unit::Percent { 100.0 } else { 1.0 };
            let (m, d) = (k * v.mean, k * v.std);
            let body = match unit {
                Unit::Count => format!("{m:.0}"),
                Unit::Seconds => format!("{m:.1}"),
                Unit::Percent => format!("{m:.1}%"),
                Unit::Times => format!("{m:.2}x"),
            };
            if v.n > 1 { format!("{body} ± {d:.2}") } else { body }
        }
    };
    for a in &report.arms {
        let g = |k: &str| a.summary.get(k);
        s.push_str(&format!(
            "| {} | {} ({} / {}) | {} | {} / {} | {} | {} | {} | {} |\n",
            a.arm.label,
            fmt(g("train_seconds"), Unit::Seconds),
            fmt(g("generation_seconds"), Unit::Seconds),
            fmt(g("update_seconds"), Unit::Seconds),
            fmt(g("questions"), Unit::Count),
            fmt(g("completions_generated"), Unit::Count),
            fmt(g("completions_trained"), Unit::Count),
            fmt(g("final_accuracy"), Unit::Percent),
            fmt(g("best_accuracy"), Unit::Percent),
            fmt(g("speedup_same_questions"), Unit::Times),
            fmt(g("speedup_to_target"), Unit::Times),
        ));
    }
    s
}
