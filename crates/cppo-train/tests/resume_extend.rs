//! Resuming finished runs: no second final evaluation, `--set train.steps=N` makes a run longer, any other
//! change is refused naming its key; and with mu > 1 the step's learning rate is the last pass's, like
//! its other statistics.

use cppo_test_support as common;

use cppo_train::run::{resume_config, run, RunOptions};
use cppo_train::eval::EvalSummary;
use cppo_train::metrics::{JsonlLog, StepMetrics};
use cppo_train::schedule::{learning_rate, Schedule};
use cppo_train::trainer::Trainer;

fn quiet() -> RunOptions {
    RunOptions { progress: false, ..Default::default() }
}

#[test]
fn resuming_a_finished_run_adds_nothing_and_a_longer_one_continues() {
    let cfg = common::tiny_config("extend", &["train.steps=1", "loss.beta=0.0", "data.eval_limit=1", "train.eval_before=true"]);
    let out = cfg.output_dir.clone();
    run(cfg, &quiet()).unwrap();
    let evals = |out: &std::path::Path| JsonlLog::read::<EvalSummary>(&out.join("eval.jsonl")).unwrap();
    let steps_of = |e: Vec<EvalSummary>| e.into_iter().map(|e| e.step).collect::<Vec<_>>();
    assert_eq!(steps_of(evals(&out)), vec![0, 1]);
    let metrics_before = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();

    // The run is finished: resuming it runs no step, evaluates nothing again and reports the last evaluation.
    let summary = run(resume_config(&out, &[]).unwrap(), &RunOptions { resume: true, ..quiet() }).unwrap();
    assert_eq!(summary.steps, 1);
    assert_eq!(steps_of(evals(&out)), vec![0, 1], "a duplicate final evaluation was appended");
    assert_eq!(summary.final_eval.as_ref().map(|e| e.step), Some(1));
    assert_eq!(std::fs::read_to_string(out.join("metrics.jsonl")).unwrap(), metrics_before);

    // Only train.steps may be given, and only larger.
    let e = format!("{:#}", resume_config(&out, &["optim.lr=0.5".into()]).unwrap_err());
    assert!(e.contains("optim.lr") && e.contains("train.steps"), "{e}");
    let mut changed = resume_config(&out, &[]).unwrap();
    changed.optim.lr = 0.5;
    changed.rollout.num_generations = 8;
    let e = format!("{:#}", Trainer::new(changed, true).err().unwrap());
    assert!(e.contains("configuration differs") && e.contains("optim.lr") && e.contains("rollout.num_generations"), "{e}");
    assert!(!e.contains("train.steps ("), "{e}");

    // Two more steps: the run continues from its checkpoint to step 3.
    let longer = resume_config(&out, &["train.steps=3".into()]).unwrap();
    assert_eq!(longer.train.steps, 3);
    let summary = run(longer, &RunOptions { resume: true, ..quiet() }).unwrap();
    assert_eq!(summary.steps, 3);
    let metrics: Vec<StepMetrics> = JsonlLog::read(&out.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.iter().map(|m| m.step).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert!(std::fs::read_to_string(out.join("metrics.jsonl")).unwrap().starts_with(&metrics_before));
    assert_eq!(steps_of(evals(&out)), vec![0, 1, 3]);
    // The run's saved configuration now says 3, so a plain resume keeps it; going back to 1 is refused.
    assert_eq!(resume_config(&out, &[]).unwrap().train.steps, 3);
    let mut back = resume_config(&out, &[]).unwrap();
    back.train.steps = 1;
    let e = format!("{:#}", Trainer::new(back, true).err().unwrap());
    assert!(e.contains("train.steps") && e.contains("smaller"), "{e}");
}

#[test]
fn with_two_passes_the_learning_rate_is_the_last_passes() {
    // Linear warmup over 4 optimizer steps: every pass has its own rate.
    let cfg = common::tiny_config(
        "mu2-lr",
        &["loss.num_iterations=2", "optim.schedule=\"linear\"", "optim.warmup_steps=4", "train.steps=2", "loss.beta=0.0"],
    );
    let (base, total) = (cfg.optim.lr, cfg.optimizer_steps());
    let mut t = Trainer::new(cfg, false).unwrap();
    for step in 0..2u64 {
        let m = t.train_step(|_| {}).unwrap().metrics;
        let last = learning_rate(Schedule::Linear, base, step * 2 + 1, 4, total);
        let first = learning_rate(Schedule::Linear, base, step * 2, 4, total);
        assert_ne!(first, last);
        assert_eq!(m.learning_rate, last, "step {step}");
        assert!(m.grad_norm.is_finite() && m.grad_norm > 0.0);
    }
}
