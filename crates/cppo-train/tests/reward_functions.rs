//! Runs with users' reward functions (the system `python3`, no packages): their rewards reach the
//! metrics and evaluations, their time the reward phase; a function that fails stops the run at that
//! step with its name, file and reason and every checkpoint before it intact, and once the file is fixed
//! `--resume` goes on to end exactly as an uninterrupted run does.

use cppo_test_support as common;

use std::path::{Path, PathBuf};

use cppo_train::config::TrainConfig;
use cppo_train::metrics::{JsonlLog, StepMetrics};
use cppo_train::rewards::FunctionSpec;
use cppo_train::run::{run, RunOptions};

/// Rewards digits and the right answer; None ("not applicable") for an empty completion. `broken`
/// raises from the third step on, as a bug found mid-run would.
fn reward_source(broken: bool) -> String {
    format!(
        r#"
BROKEN = {}
def digits(completions, completion_ids, answer, expression, trainer_state, **kwargs):
    if BROKEN and trainer_state.global_step >= 2:
        raise RuntimeError("broken at step %d" % trainer_state.global_step)
    assert len(completions) == len(completion_ids) == len(answer) == len(expression)
    return [None if c == "" else sum(ch.isdigit() for ch in c) / (1 + len(ids)) + (0.5 if str(a) in c else 0.0)
            for c, ids, a in zip(completions, completion_ids, answer)]
"#,
        if broken { "True" } else { "False" }
    )
}

fn write_rewards(dir: &Path, broken: bool) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("rewards.py");
    std::fs::write(&path, reward_source(broken)).unwrap();
    path
}

fn config(name: &str, rewards: &Path, function: &str) -> TrainConfig {
    let mut cfg = common::tiny_config(name, &["train.steps=4", "train.save_every=2", "rollout.questions_per_step=2"]);
    cfg.reward.functions = vec![FunctionSpec { path: rewards.to_path_buf(), name: function.into(), weight: 0.5, style: Default::default() }];
    cfg
}

fn quiet(resume: bool) -> RunOptions {
    RunOptions { progress: false, resume, time_limit: None, save: true }
}

fn metrics_of(out: &Path) -> Vec<StepMetrics> {
    let path = out.join("metrics.jsonl");
    if !path.exists() {
        return vec![];
    }
    JsonlLog::read::<StepMetrics>(&path).unwrap().into_iter().map(|mut m| { m.time = Default::default(); m }).collect()
}

#[test]
fn a_function_scores_training_and_evaluation() {
    let dir = common::out_dir("fn-scores-files");
    let file = write_rewards(&dir, false);
    let cfg = config("fn-scores", &file, "digits");
    let out = cfg.output_dir.clone();
    let builtin = cfg.reward.weights.clone();
    let summary = run(cfg, &quiet(false)).unwrap();
    let lines: Vec<StepMetrics> = JsonlLog::read(&out.join("metrics.jsonl")).unwrap();
    assert_eq!(lines.len(), 4);
    for m in &lines {
        assert!(m.rewards.contains_key("digits") && m.rewards.contains_key("accuracy"), "{:?}", m.rewards);
        assert!(m.time.reward > 0.0);
        // The total is the weighted sum of the parts, where an empty completion's None adds nothing (so
        // the total's mean is at most the weighted sum of the means over the completions that apply).
        let bound: f64 = builtin.iter().map(|(name, w)| w * m.rewards[name]).sum::<f64>() + 0.5 * m.rewards["digits"];
        assert!(m.reward_mean <= bound + 1e-9, "{m:?}");
    }
    assert!(lines.iter().any(|m| m.rewards["digits"] > 0.0), "a random model writes some digits");
    let eval = summary.final_eval.expect("the tiny config evaluates");
    assert!(eval.rewards.contains_key("digits") && eval.rewards.contains_key("accuracy"), "{:?}", eval.rewards);
}

#[test]
fn a_failing_function_stops_the_run_at_its_step_and_resume_goes_on_once_fixed() {
    // Uninterrupted, with the fixed file.
    let fixed = write_rewards(&common::out_dir("fn-straight-files"), false);
    let cfg = config("fn-straight", &fixed, "digits");
    let straight_out = cfg.output_dir.clone();
    run(cfg, &quiet(false)).unwrap();
    let straight = metrics_of(&straight_out);
    assert_eq!(straight.len(), 4);

    // Broken from the third step: the run stops there, naming the function, the file and the cause.
    let dir = common::out_dir("fn-broken-files");
    let file = write_rewards(&dir, true);
    let cfg = config("fn-broken", &file, "digits");
    let out = cfg.output_dir.clone();
    let e = format!("{:#}", run(cfg.clone(), &quiet(false)).unwrap_err());
    assert!(e.contains("step 3") && e.contains("`digits`") && e.contains(&file.display().to_string()), "{e}");
    assert!(e.contains("RuntimeError: broken at step 2") && e.contains("Traceback"), "{e}");
    assert_eq!(metrics_of(&out).len(), 2, "the steps before the failure are logged, the failed one is not");
    assert!(out.join("checkpoints/step-000002").is_dir(), "the checkpoint before the failure is intact");

    // Fixed, resumed (with a longer time limit, which a resumed run may change): it ends as the
    // uninterrupted run did.
    write_rewards(&dir, false);
    let mut cfg = cfg;
    cfg.reward.timeout_s = 120.0;
    run(cfg, &quiet(true)).unwrap();
    assert_eq!(metrics_of(&out), straight);
}

#[test]
fn a_column_the_dataset_lacks_stops_the_first_step_and_a_missing_file_stops_the_start() {
    let dir = common::out_dir("fn-column-files");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("needs_target.py");
    std::fs::write(&file, "def needs_target(completions, target, **kw):\n    return [1.0] * len(completions)\n").unwrap();
    let cfg = config("fn-column", &file, "needs_target");
    let out = cfg.output_dir.clone();
    let e = format!("{:#}", run(cfg, &quiet(false)).unwrap_err());
    assert!(e.contains("step 1") && e.contains("asks for `target`, which the dataset lacks") && e.contains("expression"), "{e}");
    assert!(metrics_of(&out).is_empty());

    let cfg = config("fn-no-file", &dir.join("absent.py"), "f");
    let out = cfg.output_dir.clone();
    let e = format!("{:#}", cppo_train::trainer::Trainer::new(cfg, false).err().expect("should fail"));
    assert!(e.contains("`f`") && e.contains("absent.py") && e.contains("no such file"), "{e}");
    assert!(!out.join("metrics.jsonl").exists());
}

#[test]
fn reward_sections_round_trip_through_toml_and_are_checked() {
    let text = r#"
output_dir = "/tmp/x"
[model]
path = "m"
[data]
train = "arith:train"
[reward]
format = 0.5
timeout_s = 5
accuracy_from = "exact"
[[reward.function]]
path = "rewards.py"
name = "exact"
[[reward.function]]
path = "rewards.py"
name = "score"
style = "verl"
weight = 2
[[reward.command]]
name = "short"
argv = ["length-worker", "200"]
"#;
    let cfg = TrainConfig::from_toml(text, &[]).unwrap();
    assert_eq!(cfg.reward.names(), ["format", "exact", "score", "short"]);
    assert_eq!(cfg.reward.weights.get("format"), Some(&0.5));
    assert_eq!(cfg.reward.functions[1].weight, 2.0);
    let again = TrainConfig::from_toml(&toml::to_string(&cfg).unwrap(), &[]).unwrap();
    assert_eq!(again, cfg, "the config saved with a run reads back the same");
    for (bad, expected) in [
        ("accuracy_from = \"exact\"", "names no reward part"),
        ("timeout_s = 0", "reward.timeout_s = 0 must be > 0"),
    ] {
        let text = format!("output_dir = \"/tmp/x\"\n[model]\npath = \"m\"\n[data]\ntrain = \"arith:train\"\n[reward]\naccuracy = 1.0\n{bad}\n");
        let e = format!("{:#}", TrainConfig::from_toml(&text, &[]).unwrap_err());
        assert!(e.contains(expected), "{e}");
    }
    let twice = "output_dir = \"/tmp/x\"\n[model]\npath = \"m\"\n[data]\ntrain = \"arith:train\"\n[reward]\n[[reward.function]]\npath = \"a.py\"\nname = \"f\"\n[[reward.command]]\nname = \"f\"\nargv = [\"w\"]\n";
    let e = format!("{:#}", TrainConfig::from_toml(twice, &[]).unwrap_err());
    assert!(e.contains("the name `f` is given to two rewards"), "{e}");
}
