//! DAPO dynamic sampling with refill on the tiny model, under a reward that makes about half the questions'
//! groups uniform: the step draws further batches until it has the planned number of informative groups
//! (or runs out of rounds), trains on exactly the first ones drawn, and nothing it dropped reaches the
//! update; the data cursor moves over every question drawn, so a resumed run matches an uninterrupted one.

use cppo_test_support as common;

use std::collections::HashMap;

use cppo_core::Problem;
use cppo_data::SamplerState;
use cppo_reward::{Reward, Score};
use cppo_train::metrics::{JsonlLog, StepMetrics};
use cppo_train::rollout::{RewardSet, Rollout};
use cppo_train::trainer::Trainer;

/// Questions whose id's bytes sum to an odd number score 0 on every completion (a uniform group); the
/// others score the parity of the completion's length, which varies across a random model's completions.
struct HalfUniform;

fn uniform_question(p: &Problem) -> bool {
    p.id.bytes().map(u32::from).sum::<u32>() % 2 == 1
}

impl Reward for HalfUniform {
    fn name(&self) -> &str {
        "half-uniform"
    }
    fn score(&self, completion: &str, problem: &Problem) -> Score {
        let value = if uniform_question(problem) { 0.0 } else { (completion.chars().count() % 2) as f64 };
        Score { value, correct: Some(value > 0.5), extracted: None, reason: String::new() }
    }
}

/// Every completion scores the same: every group is uniform.
struct Constant;

impl Reward for Constant {
    fn name(&self) -> &str {
        "constant"
    }
    fn score(&self, _: &str, _: &Problem) -> Score {
        Score { value: 0.5, correct: None, extracted: None, reason: String::new() }
    }
}

fn trainer(name: &str, rounds: usize, reward: Box<dyn Reward>, extra: &[&str]) -> Trainer {
    let rounds = format!("rollout.max_sampling_rounds={rounds}");
    let mut ov = vec!["rollout.dynamic_sampling=true", rounds.as_str(), "loss.beta=0.0"];
    ov.extend_from_slice(extra);
    let cfg = common::tiny_config(name, &ov);
    let mut t = Trainer::new(cfg, false).unwrap();
    t.rewards = RewardSet::from_config(&Default::default()).unwrap();
    t.rewards.parts = vec![("test".into(), 1.0, reward)];
    t
}

fn cursor(s: SamplerState) -> u64 {
    s.epoch * s.len as u64 + s.position as u64
}

fn informative(r: &Rollout) -> bool {
    r.rewards.iter().any(|&x| x != r.rewards[0])
}

#[test]
fn refill_trains_on_the_first_planned_informative_groups() {
    const PLANNED: usize = 2;
    const MAX_ROUNDS: usize = 4;
    let mut t = trainer("ds-refill", MAX_ROUNDS, Box::new(HalfUniform), &["train.steps=8"]);
    let (mut refilled, mut surplus_seen, mut uniform_seen) = (0, 0, 0);
    for _ in 0..8 {
        let before = t.sampler.state();
        // The questions this step will draw, in order.
        let mut preview = t.sampler.clone();
        let report = t.train_step(|_| {}).unwrap();
        let m = &report.metrics;
        let drawn = preview.next_batch(m.questions);

        // Rounds of the planned size, the cursor over all of them.
        assert_eq!(m.questions, m.sampling_rounds * PLANNED, "{m:?}");
        assert!((1..=MAX_ROUNDS).contains(&m.sampling_rounds));
        assert_eq!(cursor(t.sampler.state()) - cursor(before), m.questions as u64);
        assert_eq!(m.completions_generated, m.questions * 4);

        // Which groups were informative, in the order drawn.
        let mut by_id: HashMap<&str, &Rollout> = HashMap::new();
        for r in report.rollouts.iter().chain(&report.dropped) {
            by_id.insert(&r.problem.id, r);
        }
        assert_eq!(by_id.len(), m.questions, "every drawn question is either trained or dropped");
        let order: Vec<bool> = drawn.iter().map(|p| informative(by_id[p.id.as_str()])).collect();
        for (p, &inf) in drawn.iter().zip(&order) {
            // The reward does what it says: odd questions are always uniform.
            assert!(!(uniform_question(p) && inf));
        }
        let first: Vec<&str> =
            drawn.iter().zip(&order).filter(|(_, &i)| i).take(PLANNED).map(|(p, _)| p.id.as_str()).collect();
        let trained: Vec<&str> = report.rollouts.iter().map(|r| r.problem.id.as_str()).collect();
        assert_eq!(trained, first, "the first planned informative groups, in the order drawn");
        let total_informative = order.iter().filter(|&&i| i).count();
        assert_eq!(m.groups_trained, total_informative.min(PLANNED));
        assert_eq!(m.groups_dropped, m.questions - total_informative);
        assert_eq!(m.groups_surplus, total_informative - m.groups_trained);
        assert_eq!(report.dropped.len(), m.groups_dropped + m.groups_surplus);
        // It stopped at the first round that completed the batch, or at the cap.
        let informative_before_last = order[..(m.sampling_rounds - 1) * PLANNED].iter().filter(|&&i| i).count();
        assert!(informative_before_last < PLANNED, "a round too many: {m:?}");
        assert!(m.groups_trained == PLANNED || m.sampling_rounds == MAX_ROUNDS);

        // Nothing dropped reached the update: only the trained groups' completions (all kept by `all`),
        // each through one policy forward (beta = 0, mu = 1).
        assert!(report.kept.iter().all(|&(g, _)| g < report.rollouts.len()));
        assert_eq!(m.completions_kept, 4 * m.groups_trained);
        assert_eq!(m.completions_kept, report.kept.len());
        assert_eq!(m.forward_rows, m.completions_kept);

        refilled += usize::from(m.sampling_rounds > 1);
        surplus_seen += m.groups_surplus;
        uniform_seen += m.groups_dropped;
    }
    // The reward makes this run exercise every path (fixed seeds, so this is deterministic).
    assert!(refilled > 0 && surplus_seen > 0 && uniform_seen > 0, "refilled {refilled}, surplus {surplus_seen}, uniform {uniform_seen}");

    // The metrics line says it too.
    let lines = std::fs::read_to_string(t.metrics_path()).unwrap();
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    for key in ["questions", "groups_dropped", "groups_surplus", "groups_trained", "sampling_rounds"] {
        assert!(first[key].is_u64(), "{key} missing from {first}");
    }
}

#[test]
fn one_round_means_no_refill() {
    for rounds in [0, 1] {
        let mut t = trainer(&format!("ds-one-{rounds}"), rounds, Box::new(HalfUniform), &[]);
        for _ in 0..2 {
            let m = t.train_step(|_| {}).unwrap().metrics;
            assert_eq!((m.sampling_rounds, m.questions, m.groups_surplus), (1, 2, 0), "{m:?}");
            assert_eq!(m.groups_trained + m.groups_dropped, 2);
        }
    }
}

#[test]
fn all_uniform_draws_every_round_and_trains_on_nothing() {
    let mut t = trainer("ds-uniform", 3, Box::new(Constant), &[]);
    let before = t.trained_policy().unwrap().to_weights().unwrap();
    let report = t.train_step(|_| {}).unwrap();
    let m = &report.metrics;
    assert_eq!((m.sampling_rounds, m.questions, m.groups_dropped, m.groups_trained), (3, 6, 6, 0));
    assert_eq!((m.completions_generated, m.completions_kept, m.forward_rows), (24, 0, 0));
    assert!(report.rollouts.is_empty() && report.kept.is_empty());
    let after = t.trained_policy().unwrap().to_weights().unwrap();
    for (name, w) in &before.tensors {
        let d = (w - after.get(name).unwrap()).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert_eq!(d, 0.0, "{name} moved without any trained group");
    }
}

#[test]
fn resumed_run_with_refills_matches_the_uninterrupted_one() {
    let strip = |mut m: StepMetrics| {
        m.time = Default::default();
        m
    };
    let run = |name: &str, resume_after: Option<u64>| {
        let mut t = trainer(name, 4, Box::new(HalfUniform), &["train.steps=3"]);
        let cfg = t.cfg.clone();
        while t.step < 3 {
            t.train_step(|_| {}).unwrap();
            if Some(t.step) == resume_after {
                t.save_checkpoint().unwrap();
                drop(t);
                t = Trainer::new(cfg.clone(), true).unwrap();
                t.rewards.parts = vec![("test".into(), 1.0, Box::new(HalfUniform))];
            }
        }
        let metrics: Vec<StepMetrics> = JsonlLog::read(&cfg.output_dir.join("metrics.jsonl")).unwrap();
        (metrics.into_iter().map(strip).collect::<Vec<_>>(), t.sampler.state())
    };
    let (a, sa) = run("ds-straight", None);
    let (b, sb) = run("ds-resumed", Some(1));
    assert_eq!(a.len(), 3);
    assert!(a.iter().any(|m| m.sampling_rounds > 1), "no refill happened: {a:?}");
    assert_eq!(a, b);
    assert_eq!(sa, sb);
}
