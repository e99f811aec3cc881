//! The training loop: sample questions, generate, score, select, update; evaluate and checkpoint on
//! their cadence. Each phase is a function elsewhere; this file strings them together, times them and
//! writes one metrics line per step.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Var};
use cppo_core::select::drop_uniform;
use cppo_core::Problem;
use cppo_data::{PromptTemplate, Sampler};
use cppo_engine::SamplingParams;
use cppo_io::{ChatTokenizer, ModelConfig};
use cppo_model::Decoder;

use crate::checkpoint::{self, TrainerState};
use crate::config::TrainConfig;
use crate::eval::{evaluate, EvalSettings, EvalSummary};
use crate::fsutil::write_atomic;
use crate::metrics::{JsonlLog, PhaseTimes, StepMetrics};
use crate::optim::{AdamW, GradAccumulator};
use crate::prompt::Prompter;
use crate::rollout::{generate_groups, score_groups, RewardSet, Rollout, RolloutRequest};
use crate::schedule::learning_rate;
use crate::shaping::shape_groups;
use crate::sources::{load_problems, parse_device, resolve_model_path};
use crate::tensorboard::{scalars_of, EventWriter};
use crate::update::{build_batch, Updater};

/// A resumed run must keep the configuration it was trained with, except that `train.steps` may be
/// raised (to train a finished run for longer). Any other difference is an error naming the keys.
fn check_resumable(saved: &str, cfg: &TrainConfig, dir: &Path) -> Result<()> {
    let saved: TrainConfig = TrainConfig::from_toml(saved, &[])
        .with_context(|| format!("--resume: cannot read the configuration saved in {}", dir.display()))?;
    let diffs = crate::config::config_differences(&saved, cfg)?;
    let others: Vec<String> =
        diffs.iter().filter(|(k, _, _)| k != "train.steps").map(|(k, a, b)| format!("{k} ({a} -> {b})")).collect();
    if !others.is_empty() {
        bail!(
            "--resume: the configuration differs from the one {} was trained with at {}; resume with the same config (only train.steps may be raised)",
            dir.display(),
            others.join(", ")
        );
    }
    if cfg.train.steps < saved.train.steps {
        bail!(
            "--resume: train.steps = {} is smaller than the run's {}: a resumed run can only be made longer",
            cfg.train.steps,
            saved.train.steps
        );
    }
    Ok(())
}

/// A fresh run starts its TensorBoard folder empty, as it starts `metrics.jsonl` anew; other files
/// there are left alone.
fn remove_event_files(dir: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with("events.out.tfevents.") {
            std::fs::remove_file(entry.path()).with_context(|| format!("cannot remove {}", entry.path().display()))?;
        }
    }
    Ok(())
}

pub struct Trainer {
    pub cfg: TrainConfig,
    pub policy: Decoder,
    pub reference: Option<Decoder>,
    pub tokenizer: ChatTokenizer,
    pub model_config: ModelConfig,
    pub prompter: Prompter,
    pub rewards: RewardSet,
    pub sampler: Sampler,
    pub eval_problems: Vec<Problem>,
    vars: Vec<(String, Var)>,
    optimizer: AdamW,
    grads: GradAccumulator,
    /// Training steps completed.
    pub step: u64,
    pub best_eval: Option<(u64, f64)>,
    pub out: PathBuf,
    metrics: JsonlLog,
    evals: JsonlLog,
    /// With `train.tensorboard`: the same lines as TensorBoard scalars.
    tensorboard: Option<EventWriter>,
}

/// TensorBoard's folder inside the output folder.
pub const TENSORBOARD_DIR: &str = "tensorboard";

/// What a step hands back besides its metrics line (for tests and progress display).
pub struct StepReport {
    pub metrics: StepMetrics,
    /// The groups that went on to selection and the update (all drawn groups without dynamic sampling).
    pub rollouts: Vec<Rollout>,
    /// Groups drawn but dropped by dynamic sampling (uniform rewards, or beyond the planned number), in
    /// the order drawn. None of them reached selection or any forward pass.
    pub dropped: Vec<Rollout>,
    /// (group in `rollouts`, completion index) of every completion that went to the update.
    pub kept: Vec<(usize, usize)>,
}

impl Trainer {
    /// Builds everything a run needs and checks the inputs before any training: the model loads, the
    /// datasets exist, every prompt fits. With `resume`, continues from the newest checkpoint in the
    /// output folder.
    pub fn new(cfg: TrainConfig, resume: bool) -> Result<Self> {
        let device = parse_device(&cfg.model.device)?;
        let dtype = match cfg.model.dtype {
            cppo_kernels::Precision::Bf16 => DType::BF16,
            _ => DType::F32,
        };
        let out = cfg.output_dir.clone();
        if resume {
            checkpoint::remove_leftovers(&out)?;
        }
        let latest = if resume { checkpoint::latest(&out)? } else { None };
        if resume && latest.is_none() {
            // A run killed before its first checkpoint starts over from the configuration it saved
            // (the one it must keep); without that there is no run to resume.
            let saved = out.join("config.toml");
            let text = std::fs::read_to_string(&saved)
                .map_err(|_| anyhow::anyhow!("--resume: {} holds no checkpoint and no config.toml: there is no run to resume", out.display()))?;
            check_resumable(&text, &cfg, &out)?;
        }
        let lora = cfg.lora.as_ref().map(|l| l.spec()).transpose()?;
        // A LoRA checkpoint holds only the adapters: the base always comes from model.path.
        let model_path = match (&latest, &lora) {
            (Some(dir), None) => dir.join(checkpoint::MODEL_DIR),
            _ => resolve_model_path(&cfg.model.path)?,
        };
        let loaded = cppo_io::load_model(&model_path, dtype, &device)
            .with_context(|| format!("model.path: cannot load the model from {}", model_path.display()))?;
        let mp = cfg.optim.matmul_precision.for_update();
        // Every log-prob of the loss (policy, old policy, reference) is taken at the sampling temperature.
        let temp = cfg.logprob_temperature();
        let (policy, reference) = match &lora {
            None => {
                let policy = Decoder::new(&loaded.config, &loaded.weights, true, &device)?.with_matmul_precision(mp).with_logprob_temperature(temp)?;
                // The reference is the initial policy, frozen; with beta = 0 it is never built.
                let reference = if cfg.loss.beta > 0.0 {
                    let ref_path = resolve_model_path(&cfg.model.path)?;
                    if latest.is_some() {
                        let initial = cppo_io::load_model(&ref_path, dtype, &device)?;
                        Some(Decoder::new(&initial.config, &initial.weights, false, &device)?.with_matmul_precision(mp).with_logprob_temperature(temp)?)
                    } else {
                        Some(policy.frozen_copy()?)
                    }
                } else {
                    None
                };
                (policy, reference)
            }
            Some(spec) => {
                let base = Decoder::new(&loaded.config, &loaded.weights, false, &device)?.with_matmul_precision(mp).with_logprob_temperature(temp)?;
                let policy = match &latest {
                    Some(dir) => {
                        let adapter_dir = dir.join(checkpoint::MODEL_DIR);
                        let (_, adapters) = cppo_io::peft::load_peft_adapter(&adapter_dir)
                            .with_context(|| format!("--resume: cannot read the adapter in {}", adapter_dir.display()))?;
                        base.with_lora_weights(spec.clone(), &adapters, true)
                            .with_context(|| format!("--resume: the adapter in {}", adapter_dir.display()))?
                    }
                    None => base.with_lora(spec.clone(), cfg.seed)?,
                };
                let policy = match cfg.lora.as_ref().map(|l| l.base_dtype) {
                    Some(cppo_kernels::Precision::Bf16) => policy.with_bf16_base()?,
                    _ => policy,
                };
                // The masks depend on the seed and the step only, so a resumed run draws the same ones.
                let policy = policy.with_lora_dropout(cfg.lora.as_ref().map_or(0.0, |l| l.dropout), cfg.seed ^ 0x6c6f_7261)?;
                // The reference is the base: the policy with its adapters switched off, no second copy.
                let reference = (cfg.loss.beta > 0.0).then(|| policy.without_adapters());
                (policy, reference)
            }
        };
        let template = match cfg.data.template.as_str() {
            "custom" => PromptTemplate::new(cfg.data.system.clone(), cfg.data.user.clone().unwrap_or_else(|| "{question}".into()))
                .map_err(|e| anyhow::anyhow!("data.user: {e}"))?,
            name => PromptTemplate::preset(name).map_err(|e| anyhow::anyhow!("data.template: {e}"))?,
        };
        let prompter = Prompter { template, max_prompt_tokens: cfg.data.max_prompt_tokens };
        let train = load_problems(&cfg.data.train, &cfg.data, cfg.seed).context("data.train")?;
        if train.is_empty() {
            bail!("data.train = {}: no problems", cfg.data.train);
        }
        let mut eval_problems = match &cfg.data.eval {
            Some(name) => load_problems(name, &cfg.data, cfg.seed).context("data.eval")?,
            None => vec![],
        };
        if let Some(limit) = cfg.data.eval_limit {
            eval_problems.truncate(limit);
        }
        for p in train.iter().chain(&eval_problems) {
            prompter.ids(&loaded.tokenizer, p)?;
        }
        let rewards = RewardSet::from_config(&cfg.reward)?;
        let vars = policy.vars();
        let mut optimizer = AdamW::new(&vars, cfg.optim.adamw());
        let grads = GradAccumulator::new(&vars);
        let config_text = toml::to_string(&cfg)?;
        let (sampler, step, best_eval) = match &latest {
            Some(dir) => {
                let state = checkpoint::load_state(dir)?;
                if state.config != config_text {
                    check_resumable(&state.config, &cfg, dir)?;
                }
                optimizer.load(&dir.join(checkpoint::OPTIMIZER_FILE))?;
                (Sampler::restore(train, state.sampler)?, state.step, state.best_eval)
            }
            None => (Sampler::new(train, cfg.seed)?, 0, None),
        };
        std::fs::create_dir_all(&out).with_context(|| format!("cannot create output_dir {}", out.display()))?;
        let metrics = JsonlLog::new(out.join("metrics.jsonl"));
        let evals = JsonlLog::new(out.join("eval.jsonl"));
        if latest.is_some() {
            metrics.truncate_after(step)?;
            evals.truncate_after(step)?;
        } else {
            for log in [&metrics, &evals] {
                if log.path.exists() {
                    std::fs::remove_file(&log.path)?;
                }
            }
        }
        let tensorboard = if cfg.train.tensorboard {
            let dir = out.join(TENSORBOARD_DIR);
            if latest.is_none() {
                remove_event_files(&dir)?;
            }
            let mut writer = EventWriter::create(&dir)?;
            if latest.is_some() {
                writer.restart_at(step + 1)?;
            }
            Some(writer)
        } else {
            None
        };
        write_atomic(&out.join("config.toml"), config_text.as_bytes())?;
        Ok(Trainer {
            tensorboard,
            model_config: loaded.config,
            tokenizer: loaded.tokenizer,
            cfg,
            policy,
            reference,
            prompter,
            rewards,
            sampler,
            eval_problems,
            vars,
            optimizer,
            grads,
            step,
            best_eval,
            out,
            metrics,
            evals,
        })
    }

    fn sampling(&self) -> SamplingParams {
        let g = &self.cfg.generation;
        SamplingParams { temperature: g.temperature, top_p: g.top_p, top_k: g.top_k, max_new_tokens: g.max_new_tokens, stop: g.stop.clone() }
    }

    /// Seeds of step s depend only on (seed, s), so a resumed run draws what an uninterrupted one would.
    fn step_seed(&self, step: u64) -> u64 {
        self.cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(step)
    }

    /// The generation seed of a step's sampling round; round 0 uses the step's seed, so a run without
    /// refills draws exactly what it did before refills existed.
    fn round_seed(&self, step: u64, round: usize) -> u64 {
        self.step_seed(step) ^ (round as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)
    }

    /// One training step. With dynamic sampling, groups whose rewards are all equal never reach the
    /// update, and when fewer than the planned number of questions remain the step draws further batches
    /// of questions (up to `rollout.max_sampling_rounds` batches in all, as DAPO does), then trains on
    /// the first planned number of informative groups, in the order drawn; the rest are dropped. Every
    /// question drawn advances the data cursor.
    pub fn train_step(&mut self, mut on_generated: impl FnMut(usize)) -> Result<StepReport> {
        let t_step = Instant::now();
        let step = self.step;
        self.policy.start_dropout_step(step as u64);
        let plan = self.cfg.plan().map_err(|e| anyhow::anyhow!("rollout: {e}"))?;
        let g = self.cfg.rollout.num_generations;
        let planned = plan.questions_per_step;
        let dynamic = self.cfg.rollout.selection.dynamic_sampling;
        let max_rounds = if dynamic { self.cfg.rollout.max_sampling_rounds.max(1) } else { 1 };
        let mut times = PhaseTimes::default();

        let mut drawn: Vec<Rollout> = Vec::new();
        // Per drawn group: whether its rewards differ (always true without dynamic sampling).
        let mut varied: Vec<bool> = Vec::new();
        let (mut informative, mut rounds) = (0usize, 0usize);
        while rounds == 0 || (rounds < max_rounds && informative < planned) {
            let problems = self.sampler.next_batch(planned);
            let prompts = problems.iter().map(|p| self.prompter.ids(&self.tokenizer, p)).collect::<Result<Vec<_>>>()?;
            let t = Instant::now();
            let req = RolloutRequest { problems: &problems, prompts, group_size: g };
            let (mut batch, _gen) = generate_groups(
                &self.policy,
                &self.tokenizer,
                &req,
                &self.sampling(),
                self.cfg.generation.max_batch,
                self.round_seed(step, rounds),
                self.cfg.generation.weights,
                &mut on_generated,
            )?;
            times.generation += t.elapsed().as_secs_f64();

            let t = Instant::now();
            score_groups(&mut batch, &self.rewards);
            // DAPO's filter, the only one: it judges the task rewards (DAPO's accuracy), before the
            // length shaping below, which would otherwise keep an all-correct group whose lengths differ.
            if dynamic {
                let rewards: Vec<Vec<f64>> = batch.iter().map(|r| r.rewards.clone()).collect();
                let survivors = drop_uniform(&rewards).map_err(|e| anyhow::anyhow!("selection: {e}"))?.survivors;
                informative += survivors.len();
                varied.extend((0..batch.len()).map(|g| survivors.binary_search(&g).is_ok()));
            } else {
                varied.extend(std::iter::repeat_n(true, batch.len()));
            }
            if let Some(p) = &self.cfg.overlong_penalty {
                shape_groups(&mut batch, p);
            }
            times.reward += t.elapsed().as_secs_f64();
            drawn.extend(batch);
            rounds += 1;
        }

        // Figures over everything drawn, before any group is dropped.
        let all: Vec<f64> = drawn.iter().flat_map(|r| r.rewards.iter().copied()).collect();
        let n = all.len().max(1) as f64;
        let mean = all.iter().sum::<f64>() / n;
        let std = (all.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n).sqrt();
        let lengths: Vec<usize> = drawn.iter().flat_map(|r| r.completions.iter().map(|c| c.tokens.len())).collect();
        let truncated = drawn.iter().flat_map(|r| &r.completions).filter(|c| c.truncated()).count();
        let correct = drawn.iter().flat_map(|r| &r.correct).filter(|&&c| c).count();
        let mut parts = std::collections::BTreeMap::new();
        for (p, (name, _, _)) in self.rewards.parts.iter().enumerate() {
            let v: Vec<f64> = drawn.iter().flat_map(|r| r.parts[p].iter().copied()).collect();
            parts.insert(name.clone(), v.iter().sum::<f64>() / v.len().max(1) as f64);
        }
        if let Some(p) = &self.cfg.overlong_penalty {
            let v: Vec<f64> = lengths.iter().map(|&l| p.penalty(l)).collect();
            parts.insert("overlong_penalty".into(), v.iter().sum::<f64>() / v.len().max(1) as f64);
        }
        let questions_drawn = drawn.len();
        let completions_generated = all.len();

        // Which groups go on: with dynamic sampling, the first `planned` informative ones. The others
        // leave here, so nothing after this point (selection, reference, update) ever sees them.
        let (mut uniform, mut surplus) = (0usize, 0usize);
        let (mut rollouts, mut dropped) = (Vec::new(), Vec::new());
        for (r, varied) in drawn.into_iter().zip(varied) {
            if !varied {
                uniform += 1;
                dropped.push(r);
            } else if dynamic && rollouts.len() >= planned {
                surplus += 1;
                dropped.push(r);
            } else {
                rollouts.push(r);
            }
        }

        let rewards: Vec<Vec<f64>> = rollouts.iter().map(|r| r.rewards.clone()).collect();
        // The uniform groups left above; the strategy sees only the groups that go on.
        let selection = self.cfg.rollout.selection.strategy.select(self.cfg.estimator(), &rewards, step).map_err(|e| anyhow::anyhow!("selection: {e}"))?;
        let normaliser = self.cfg.loss.normaliser.unwrap_or(self.cfg.generation.max_new_tokens as f64);
        let batch = build_batch(&rollouts, &selection, &self.cfg.loss, normaliser, self.cfg.optim.micro_batch_tokens)?;

        let total_opt = self.cfg.optimizer_steps();
        let warmup = self.cfg.warmup_steps();
        let (sched, base, mu) = (self.cfg.optim.schedule, self.cfg.optim.lr, self.cfg.loss.num_iterations as u64);
        let outcome = Updater {
            policy: &self.policy,
            reference: self.reference.as_ref(),
            vars: &self.vars,
            optimizer: &mut self.optimizer,
            grads: &mut self.grads,
            loss: &self.cfg.loss,
        }
        .run(&batch, |pass| learning_rate(sched, base, step * mu + pass as u64, warmup, total_opt))?;
        times.reference = outcome.reference_seconds;
        times.old_policy = outcome.old_policy_seconds;
        times.policy = outcome.policy_seconds;
        times.optimizer = outcome.optimizer_seconds;
        times.total = t_step.elapsed().as_secs_f64();

        let tokens = outcome.stats.tokens.max(1.0);
        let metrics = StepMetrics {
            step: step + 1,
            questions: questions_drawn,
            completions_generated,
            completions_kept: batch.items.len(),
            groups_dropped: uniform,
            groups_surplus: surplus,
            groups_trained: rollouts.len(),
            sampling_rounds: rounds,
            reward_mean: mean,
            reward_std: std,
            rewards: parts,
            accuracy: correct as f64 / n,
            completion_length_mean: lengths.iter().sum::<usize>() as f64 / lengths.len().max(1) as f64,
            completion_length_max: lengths.iter().copied().max().unwrap_or(0),
            truncated_fraction: truncated as f64 / n,
            kl: outcome.stats.kl_sum / tokens,
            clip_fraction: (outcome.stats.clipped_low + outcome.stats.clipped_high) / tokens,
            clip_fraction_low: outcome.stats.clipped_low / tokens,
            clip_fraction_high: outcome.stats.clipped_high / tokens,
            entropy: outcome.entropy_sum / tokens,
            loss: outcome.stats.loss,
            grad_norm: outcome.grad_norm,
            learning_rate: outcome.learning_rate,
            loss_tokens: batch.loss_tokens,
            forward_rows: outcome.forward_rows,
            time: times,
        };
        let kept: Vec<(usize, usize)> = batch.items.iter().map(|it| (it.group, it.index)).collect();
        drop(batch);
        self.step += 1;
        self.metrics.append(&metrics)?;
        if let Some(tb) = &mut self.tensorboard {
            tb.scalars(metrics.step, &scalars_of("train", &serde_json::to_value(&metrics)?))?;
        }
        if self.cfg.train.log_completions {
            self.log_completions(&rollouts, &dropped, &selection)?;
        }
        Ok(StepReport { metrics, rollouts, dropped, kept })
    }

    fn log_completions(&self, rollouts: &[Rollout], dropped: &[Rollout], selection: &cppo_core::Selection) -> Result<()> {
        let log = JsonlLog::new(self.out.join("completions.jsonl"));
        let kept: std::collections::HashSet<(usize, usize)> = selection.iter_kept().map(|(g, i, _)| (g, i)).collect();
        let groups = rollouts.iter().enumerate().map(|(g, r)| (Some(g), r)).chain(dropped.iter().map(|r| (None, r)));
        for (g, r) in groups {
            for (i, text) in r.texts.iter().enumerate() {
                log.append(&serde_json::json!({
                    "step": self.step, "problem": r.problem.id, "completion": text, "reward": r.rewards[i],
                    "kept": g.is_some_and(|g| kept.contains(&(g, i))), "group_dropped": g.is_none(),
                }))?;
            }
        }
        Ok(())
    }

    pub fn eval_settings(&self) -> EvalSettings {
        let e = &self.cfg.eval;
        EvalSettings {
            samples: e.samples,
            temperature: e.temperature,
            top_p: e.top_p,
            max_new_tokens: e.max_new_tokens.unwrap_or(self.cfg.generation.max_new_tokens),
            pass_k: e.pass_k.clone(),
            max_batch: self.cfg.generation.max_batch,
            seed: self.cfg.seed ^ 0xE7A1,
            stop: self.cfg.generation.stop.clone(),
        }
    }

    /// Evaluates the current policy on the held-out problems, appends the summary to `eval.jsonl` and
    /// writes every generation to `evals/step-NNNNNN.jsonl`.
    pub fn evaluate(&mut self) -> Result<Option<EvalSummary>> {
        if self.eval_problems.is_empty() {
            return Ok(None);
        }
        let (summary, records) = evaluate(&self.policy, &self.tokenizer, &self.prompter, &self.eval_problems, &self.eval_settings(), self.step)?;
        self.evals.append(&summary)?;
        if let Some(tb) = &mut self.tensorboard {
            tb.scalars(self.step, &scalars_of("eval", &serde_json::to_value(&summary)?))?;
        }
        let dir = self.out.join("evals");
        std::fs::create_dir_all(&dir)?;
        let mut text = String::new();
        for r in &records {
            text.push_str(&serde_json::to_string(r)?);
            text.push('\n');
        }
        write_atomic(&dir.join(format!("step-{:06}.jsonl", self.step)), text.as_bytes())?;
        if self.best_eval.is_none_or(|(_, b)| summary.accuracy > b) {
            self.best_eval = Some((self.step, summary.accuracy));
        }
        Ok(Some(summary))
    }

    pub fn save_checkpoint(&self) -> Result<PathBuf> {
        let state = TrainerState {
            step: self.step,
            seed: self.cfg.seed,
            sampler: self.sampler.state(),
            config: toml::to_string(&self.cfg)?,
            best_eval: self.best_eval,
        };
        checkpoint::save(
            &self.out,
            &state,
            |dir| self.save_model(dir),
            |path| self.optimizer.save(path),
            self.cfg.train.save_total_limit,
        )
    }

    /// Writes the current policy as a Hugging Face directory (f32); with LoRA, its adapters in PEFT's
    /// format (`adapter_config.json`, `adapter_model.safetensors`).
    pub fn save_model(&self, dir: &Path) -> Result<()> {
        if let Some(lora) = &self.cfg.lora {
            let settings = crate::lora::peft_settings(lora, &self.cfg.model.path)?;
            cppo_io::peft::save_peft_adapter(dir, &settings, &self.policy.adapter_weights()?)?;
            return Ok(());
        }
        let weights = self.policy.to_weights()?;
        cppo_io::save_hf(dir, &self.model_config, &weights, &self.tokenizer, DType::F32)?;
        Ok(())
    }

    /// Where `cppo train` writes the final model: `OUT/model`, or `OUT/adapter` for LoRA.
    pub fn final_model_dir(&self) -> PathBuf {
        self.out.join(if self.cfg.lora.is_some() { "adapter" } else { "model" })
    }

    pub fn device(&self) -> &Device {
        self.policy.device()
    }

    pub fn metrics_path(&self) -> &Path {
        &self.metrics.path
    }
}
