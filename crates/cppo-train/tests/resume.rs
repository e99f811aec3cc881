//! Kill-then-resume: a run stopped after a checkpoint and resumed produces the same metrics, the same
//! evaluations and the same weights as an uninterrupted run (CPU, same seed).

use cppo_test_support as common;

use cppo_train::metrics::{JsonlLog, StepMetrics};
use cppo_train::trainer::Trainer;

fn comparable(mut m: StepMetrics) -> StepMetrics {
    m.time = Default::default();
    m
}

fn run(name: &str, steps: u64, stop_after: Option<u64>) -> (Vec<StepMetrics>, Vec<f32>, String) {
    let overrides = [
        "rollout.strategy={ kind = \"cppo\", pruning_rate = 0.5 }".to_string(),
        "loss.num_iterations=2".to_string(),
        format!("train.steps={steps}"),
        "train.save_every=2".to_string(),
    ];
    let ov: Vec<&str> = overrides.iter().map(String::as_str).collect();
    let cfg = common::tiny_config(name, &ov);
    let out = cfg.output_dir.clone();
    let mut t = Trainer::new(cfg.clone(), false).unwrap();
    while t.step < steps {
        t.train_step(|_| {}).unwrap();
        if t.step % 2 == 0 {
            t.save_checkpoint().unwrap();
            t.evaluate().unwrap();
        }
        if Some(t.step) == stop_after {
            // Another step runs after the checkpoint and is lost with the "kill": its metrics line must
            // be dropped on resume and recomputed identically.
            t.train_step(|_| {}).unwrap();
            drop(t);
            t = Trainer::new(cfg.clone(), true).unwrap();
            assert_eq!(t.step, stop_after.unwrap());
        }
    }
    let metrics: Vec<StepMetrics> = JsonlLog::read(&out.join("metrics.jsonl")).unwrap();
    let w = t.trained_policy().unwrap().to_weights().unwrap();
    let weights = w.tensors.values().flat_map(|t| t.flatten_all().unwrap().to_vec1::<f32>().unwrap()).collect();
    (metrics.into_iter().map(comparable).collect(), weights, evals_of(&out))
}

/// `eval.jsonl` without its timings.
fn evals_of(out: &std::path::Path) -> String {
    let evals = std::fs::read_to_string(out.join("eval.jsonl")).unwrap();
    evals.lines().map(|l| {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        v.as_object_mut().unwrap().remove("seconds");
        v.to_string()
    }).collect::<Vec<_>>().join("\n")
}

#[test]
fn resumed_run_matches_the_uninterrupted_one() {
    let (a, wa, ea) = run("straight", 4, None);
    let (b, wb, eb) = run("resumed", 4, Some(2));
    assert_eq!(a.len(), 4);
    assert_eq!(a, b);
    assert_eq!(ea, eb);
    assert!(wa == wb, "weights differ after resume");
}

#[test]
fn resume_refuses_a_changed_config_and_a_missing_checkpoint() {
    let cfg = common::tiny_config("refuse", &["train.steps=1"]);
    assert!(format!("{:#}", Trainer::new(cfg.clone(), true).err().unwrap()).contains("no checkpoint"));
    let mut t = Trainer::new(cfg.clone(), false).unwrap();
    t.train_step(|_| {}).unwrap();
    t.save_checkpoint().unwrap();
    let mut changed = cfg.clone();
    changed.optim.lr *= 2.0;
    assert!(format!("{:#}", Trainer::new(changed, true).err().unwrap()).contains("configuration differs"));
}

/// A run killed before its first checkpoint resumes from the configuration it saved: it starts over,
/// and ends as an uninterrupted run does (metrics, evaluations, weights). A kill midway through a save
/// leaves a temporary folder that the resume removes.
#[test]
fn a_run_killed_before_its_first_checkpoint_starts_over_from_its_config() {
    let (straight, w_straight, e_straight) = run("straight-nockpt", 4, None);
    let overrides = [
        "rollout.strategy={ kind = \"cppo\", pruning_rate = 0.5 }",
        "loss.num_iterations=2",
        "train.steps=4",
        "train.save_every=2",
    ];
    let cfg = common::tiny_config("killed-nockpt", &overrides);
    let out = cfg.output_dir.clone();
    let mut t = Trainer::new(cfg.clone(), false).unwrap();
    t.train_step(|_| {}).unwrap();
    drop(t);
    // A save killed midway: its temporary folder, under another process's id.
    let tmp = out.join("checkpoints/.step-000002.tmp-4242");
    std::fs::create_dir_all(tmp.join("model")).unwrap();
    assert!(out.join("config.toml").is_file() && out.join("metrics.jsonl").is_file());
    let mut t = Trainer::new(cfg.clone(), true).unwrap();
    assert_eq!(t.step, 0);
    assert!(!tmp.exists(), "the resume left the interrupted save's folder");
    assert!(!out.join("metrics.jsonl").exists(), "the lost step's metrics line survived the restart");
    while t.step < 4 {
        t.train_step(|_| {}).unwrap();
        if t.step % 2 == 0 {
            t.save_checkpoint().unwrap();
            t.evaluate().unwrap();
        }
    }
    let metrics: Vec<StepMetrics> = JsonlLog::read(&out.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.into_iter().map(comparable).collect::<Vec<_>>(), straight);
    let w = t.trained_policy().unwrap().to_weights().unwrap();
    let weights: Vec<f32> = w.tensors.values().flat_map(|t| t.flatten_all().unwrap().to_vec1::<f32>().unwrap()).collect();
    assert!(weights == w_straight, "weights differ after restarting the run");
    assert_eq!(evals_of(&out), e_straight);

    // The saved configuration still binds: a changed one is refused by name.
    let cfg = common::tiny_config("killed-nockpt-changed", &overrides);
    let out = cfg.output_dir.clone();
    drop(Trainer::new(cfg.clone(), false).unwrap());
    let mut changed = cfg;
    changed.optim.lr *= 2.0;
    let err = format!("{:#}", Trainer::new(changed, true).err().unwrap());
    assert!(err.contains("configuration differs") && err.contains("optim.lr"), "{err}");
    assert!(out.join("config.toml").is_file());
}
