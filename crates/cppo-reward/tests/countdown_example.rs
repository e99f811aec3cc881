//! `examples/countdown/`: the generator is seeded and its splits disjoint and solvable, and the
//! TRL-style rewards, run through the Python shim as a training run calls them, credit the row's own
//! solution and nothing that breaks the rules.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cppo_core::{Problem, Task};
use cppo_reward::external::{ExternalRewards, FunctionSpec, Sample, Style, WorkerOptions};
use serde_json::Value;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/countdown")
}

fn generate(out: &Path, seed: u64) -> (Vec<Value>, Vec<Value>) {
    let python = WorkerOptions::resolve_python(None);
    let status = Command::new(&python)
        .arg(example().join("generate.py"))
        .args(["--out", out.to_str().unwrap(), "--seed", &seed.to_string(), "--train", "300", "--test", "50"])
        .status()
        .unwrap();
    assert!(status.success());
    let read = |name: &str| -> Vec<Value> {
        std::fs::read_to_string(out.join(name)).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    (read("train.jsonl"), read("test.jsonl"))
}

#[test]
fn the_generator_is_seeded_disjoint_and_solvable() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = generate(&dir.path().join("a"), 7);
    let (train_again, test_again) = generate(&dir.path().join("b"), 7);
    let (train_other, _) = generate(&dir.path().join("c"), 8);
    assert_eq!((train.len(), test.len()), (300, 50));
    assert_eq!((&train, &test), (&train_again, &test_again), "the same seed gives the same rows");
    assert_ne!(train, train_other, "another seed gives other rows");
    let key = |r: &Value| {
        let mut nums: Vec<i64> = r["nums"].as_array().unwrap().iter().map(|n| n.as_i64().unwrap()).collect();
        nums.sort();
        (nums, r["target"].as_i64().unwrap())
    };
    let held_out: HashSet<_> = test.iter().map(key).collect();
    assert!(train.iter().all(|r| !held_out.contains(&key(r))), "no held-out row is trained on");
}

#[test]
fn the_rewards_credit_right_equations_only() {
    let dir = tempfile::tempdir().unwrap();
    let (train, _) = generate(dir.path(), 3);
    let rows = &train[..40];
    let problems: Vec<Problem> = rows
        .iter()
        .map(|r| Problem {
            id: "cd".into(),
            prompt: r["prompt"].as_str().unwrap().into(),
            answer: String::new(),
            task: Task::Math,
            record: r.clone(),
            messages: None,
            prompt_field: Some("prompt".into()),
        })
        .collect();
    // Each row five times: its own solution in tags, the solution with its first number changed in
    // tags, no tags, the bare solution with its value on the first line, the bare wrong one.
    let mut completions = Vec::new();
    for r in rows {
        let solution = r["solution"].as_str().unwrap();
        let first = solution.find(|c: char| c.is_ascii_digit()).unwrap();
        let wrong = format!("{}9{}", &solution[..first], &solution[first..]);
        completions.push(format!("<think>trying</think> <answer>{solution}</answer>"));
        completions.push(format!("<think>trying</think> <answer>{wrong}</answer>"));
        completions.push(format!("the answer is {solution}"));
        completions.push(format!("\n{solution} = {}\nso that is it", r["target"]));
        completions.push(format!("{wrong} = {}", r["target"]));
    }
    let ids: Vec<u32> = vec![];
    let samples: Vec<Sample> =
        completions.iter().enumerate().map(|(i, c)| Sample { problem: &problems[i / 5], completion: c, completion_ids: &ids }).collect();
    let file = example().join("rewards.py");
    let spec = |name: &str| FunctionSpec { path: file.clone(), name: name.into(), weight: 1.0, style: Style::Trl };
    let options = WorkerOptions { python: WorkerOptions::resolve_python(None), timeout: Duration::from_secs(30) };
    let rewards = ExternalRewards::start(&[spec("countdown_format"), spec("countdown_exact"), spec("countdown_equation")], &[], &options).unwrap();
    let scores = rewards.score(0, &samples).unwrap();
    let expect = |pattern: [f64; 5]| -> Vec<Option<f64>> { (0..rows.len()).flat_map(|_| pattern.map(Some)).collect() };
    assert_eq!(scores[0], expect([1.0, 1.0, 0.0, 0.0, 0.0]), "format");
    assert_eq!(scores[1], expect([1.0, 0.0, 0.0, 0.0, 0.0]), "exactness");
    assert_eq!(scores[2], expect([0.0, 0.0, 0.0, 1.0, 0.0]), "the bare equation of the short prompt");
}

/// The short style lists the numbers in words and asks for the bare equation; the operators are drawn
/// evenly (not mostly sums); and a request for more rows than exist stops with a message, not a hang.
#[test]
fn the_short_style_balances_operators_and_impossible_sizes_stop() {
    let dir = tempfile::tempdir().unwrap();
    let python = WorkerOptions::resolve_python(None);
    let run = |args: &[&str]| {
        Command::new(&python).arg(example().join("generate.py")).args(["--out", dir.path().to_str().unwrap()]).args(args).output().unwrap()
    };
    let out = run(&["--numbers", "2", "--high", "60", "--style", "short", "--train", "400", "--test", "40"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Value> = std::fs::read_to_string(dir.path().join("train.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut ops = [0usize; 4];
    for r in &rows {
        let prompt = r["prompt"].as_str().unwrap();
        let nums: Vec<String> = r["nums"].as_array().unwrap().iter().map(|n| n.to_string()).collect();
        assert!(prompt.contains(&format!("{} and {}", nums[0], nums[1])) && prompt.ends_with("Answer with just the equation."), "{prompt}");
        assert!(!prompt.contains("<answer>"));
        let solution = r["solution"].as_str().unwrap();
        ops["+-*/".find(|c| solution.contains(c)).unwrap()] += 1;
    }
    assert!(ops.iter().all(|&n| n >= rows.len() / 8), "operators {ops:?} (+ - * /) are not balanced");
    let out = run(&["--numbers", "2", "--high", "5", "--train", "500"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("distinct rows"), "{}", String::from_utf8_lossy(&out.stderr));
}
