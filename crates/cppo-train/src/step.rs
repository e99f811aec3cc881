//! One training step, start to end: data -> rollout -> reward (+ shaping) -> advantage -> select ->
//! update -> log. Each stage is a call into the module named beside it; this file is the order they
//! run in and what passes between them. Building the run (`trainer.rs`), evaluation and checkpoints
//! happen around it.

use std::time::Instant;

use anyhow::{anyhow, Result};
use cppo_core::advantage::of_kept;
use cppo_core::select::drop_uniform;
use cppo_core::Selection;
use cppo_engine::SamplingParams;

use crate::metrics::{JsonlLog, PhaseTimes, RolloutSummary, StepCounts, StepMetrics};
use crate::rollout::{score_groups, GenerateOptions, Rollout, RolloutRequest};
use crate::schedule::learning_rate;
use crate::shaping::shape_groups;
use crate::tensorboard::scalars_of;
use crate::trainer::Trainer;
use crate::update::build_batch;

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

/// The groups a step drew, over all its sampling rounds, in the order drawn.
struct Drawn {
    groups: Vec<Rollout>,
    /// Per group: whether its task rewards differ (always true without dynamic sampling).
    varied: Vec<bool>,
    rounds: usize,
}

impl Trainer {
    /// One training step. With dynamic sampling, groups whose rewards are all equal never reach the
    /// update, and when fewer than the planned number of questions remain the step draws further batches
    /// of questions (up to `rollout.max_sampling_rounds` batches in all, as DAPO does), then trains on
    /// the first planned number of informative groups, in the order drawn; the rest are dropped. Every
    /// question drawn advances the data cursor.
    pub fn train_step(&mut self, on_generated: impl FnMut(usize)) -> Result<StepReport> {
        let t_step = Instant::now();
        let step = self.step;
        let mut time = PhaseTimes::default();
        // LoRA dropout's masks are drawn per step, so a resumed run draws the same ones.
        self.policy.start_dropout_step(step as u64);

        // data -> rollout -> reward (+ shaping): G completions per question, scored.
        let drawn = self.draw(step, &mut time, on_generated)?;
        let summary = RolloutSummary::of(&drawn.groups, &self.rewards, self.cfg.overlong_penalty.as_ref());

        // DAPO's filter: only informative groups go on, at most the planned number of them.
        let planned = self.cfg.plan().map_err(|e| anyhow!("rollout: {e}"))?.questions_per_step;
        let dynamic = self.cfg.rollout.selection.dynamic_sampling;
        let (mut rollouts, mut dropped) = (Vec::new(), Vec::new());
        let mut counts = StepCounts { sampling_rounds: drawn.rounds, ..Default::default() };
        for (r, varied) in drawn.groups.into_iter().zip(drawn.varied) {
            if !varied {
                counts.groups_dropped += 1;
                dropped.push(r);
            } else if dynamic && rollouts.len() >= planned {
                counts.groups_surplus += 1;
                dropped.push(r);
            } else {
                rollouts.push(r);
            }
        }
        counts.groups_trained = rollouts.len();

        // advantage: one per completion, from its group's rewards (GRPO, Dr.GRPO, RLOO, REINFORCE++).
        let (rewards, estimator) = crate::objectives::advantage_inputs(&self.cfg, &self.rewards, &rollouts);
        let estimator = &estimator;
        let advantages = estimator.advantages(&rewards).map_err(|e| anyhow!("selection: {e}"))?;

        // select: which completions train; the CPPO family keeps their full-group advantages, the PODS
        // family's are recomputed on what it kept.
        let strategy = &self.cfg.rollout.selection.strategy;
        let kept = strategy.keep(&rewards, &advantages, step).map_err(|e| anyhow!("selection: {e}"))?;
        let groups = of_kept(estimator, strategy.basis(), &rewards, &advantages, kept).map_err(|e| anyhow!("selection: {e}"))?;
        let selection = Selection { groups, dropped_uniform: 0, questions: rewards.len(), generated: rewards.iter().map(Vec::len).sum() };

        // update: mu passes of forward, loss, backward and one AdamW step over the kept completions.
        let normaliser = self.cfg.loss.normaliser.unwrap_or(self.cfg.generation.max_new_tokens as f64);
        let mut batch = build_batch(&rollouts, &selection, &self.cfg.loss, normaliser, self.cfg.optim.micro_batch_tokens)?;
        batch.correction = crate::objectives::run_rollout_correction(&self.cfg);
        let (sched, base, mu) = (self.cfg.optim.schedule, self.cfg.optim.lr, self.cfg.loss.num_iterations as u64);
        let (warmup, total) = (self.cfg.warmup_steps(), self.cfg.optimizer_steps());
        let lr = |pass: usize| learning_rate(sched, base, step * mu + pass as u64, warmup, total);
        let update = self.device.update(&self.policy, self.reference.as_ref(), &self.cfg.loss, &batch, &lr)?;
        // The next rollouts read the backend's weights; the host copy waits until it is read.
        self.host_stale = true;
        time.total = t_step.elapsed().as_secs_f64();

        // log: one metrics line (and TensorBoard scalars, and the completions when asked).
        counts.completions_kept = batch.items.len();
        counts.loss_tokens = batch.loss_tokens;
        let metrics = StepMetrics::of(step + 1, &summary, &counts, &update, time);
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

    /// Draws batches of questions, generates and scores their groups, until enough are informative
    /// (or `rollout.max_sampling_rounds` batches are drawn; exactly one without dynamic sampling).
    fn draw(&mut self, step: u64, time: &mut PhaseTimes, mut on_generated: impl FnMut(usize)) -> Result<Drawn> {
        let planned = self.cfg.plan().map_err(|e| anyhow!("rollout: {e}"))?.questions_per_step;
        let dynamic = self.cfg.rollout.selection.dynamic_sampling;
        let max_rounds = if dynamic { self.cfg.rollout.max_sampling_rounds.max(1) } else { 1 };
        let mut drawn = Drawn { groups: Vec::new(), varied: Vec::new(), rounds: 0 };
        let mut informative = 0usize;
        while drawn.rounds == 0 || (drawn.rounds < max_rounds && informative < planned) {
            let problems = self.sampler.next_batch(planned);
            let prompts = problems.iter().map(|p| self.prompter.ids(&self.tokenizer, p)).collect::<Result<Vec<_>>>()?;
            let t = Instant::now();
            let req = RolloutRequest { problems: &problems, prompts, group_size: self.cfg.rollout.num_generations };
            let g = &self.cfg.generation;
            let (opts, params) = (GenerateOptions::new(g.max_batch, self.round_seed(step, drawn.rounds), g.weights), self.sampling());
            let (mut batch, _) = self.device.generate(&self.policy, &self.tokenizer, &req, &params, opts, &mut on_generated)?;
            time.generation += t.elapsed().as_secs_f64();

            let t = Instant::now();
            score_groups(&mut batch, &self.rewards, step).map_err(|e| e.context(format!("step {}: rewards", step + 1)))?;
            time.reward += self.rewards.take_startup_seconds();
            // DAPO's filter judges the task rewards (DAPO's accuracy), before the length shaping below,
            // which would otherwise keep an all-correct group whose lengths differ.
            if dynamic {
                let rewards: Vec<Vec<f64>> = batch.iter().map(|r| r.rewards.clone()).collect();
                let survivors = drop_uniform(&rewards).map_err(|e| anyhow!("selection: {e}"))?.survivors;
                informative += survivors.len();
                drawn.varied.extend((0..batch.len()).map(|g| survivors.binary_search(&g).is_ok()));
            } else {
                drawn.varied.extend(std::iter::repeat_n(true, batch.len()));
            }
            if let Some(p) = &self.cfg.overlong_penalty {
                shape_groups(&mut batch, p);
            }
            time.reward += t.elapsed().as_secs_f64();
            drawn.groups.extend(batch);
            drawn.rounds += 1;
        }
        Ok(drawn)
    }

    fn sampling(&self) -> SamplingParams {
        let g = &self.cfg.generation;
        SamplingParams {
            temperature: g.temperature,
            top_p: g.top_p,
            top_k: g.top_k,
            min_p: g.min_p,
            repetition_penalty: g.repetition_penalty,
            max_new_tokens: g.max_new_tokens,
            stop: g.stop.clone(),
        }
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

    fn log_completions(&self, rollouts: &[Rollout], dropped: &[Rollout], selection: &Selection) -> Result<()> {
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
}
