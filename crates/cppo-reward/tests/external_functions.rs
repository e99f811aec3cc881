//! Users' reward functions through the Python shim (the system `python3`, standard library only) and a
//! worker written in Rust: TRL's and verl's calling conventions, both dataset formats, and every way a
//! function or worker can fail, each named with the function and its file.

use std::path::PathBuf;
use std::time::Duration;

use cppo_core::{ChatMessage, Problem, Task};
use cppo_reward::external::{CommandSpec, ExternalRewards, FunctionSpec, Sample, Style, WorkerOptions};
use serde_json::json;

fn options(timeout_s: f64) -> WorkerOptions {
    WorkerOptions { python: WorkerOptions::resolve_python(None), timeout: Duration::from_secs_f64(timeout_s) }
}

/// Writes `source` as `rewards.py` in a fresh folder (kept alive by the returned guard).
fn reward_file(source: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rewards.py");
    std::fs::write(&path, source).unwrap();
    (dir, path)
}

fn function(path: &PathBuf, name: &str, style: Style) -> FunctionSpec {
    FunctionSpec { path: path.clone(), name: name.into(), weight: 1.0, style }
}

fn start(source: &str, names: &[(&str, Style)], timeout_s: f64) -> (tempfile::TempDir, Result<ExternalRewards, cppo_reward::ExternalError>) {
    let (dir, path) = reward_file(source);
    let specs: Vec<FunctionSpec> = names.iter().map(|&(n, s)| function(&path, n, s)).collect();
    let started = ExternalRewards::start(&specs, &[], &options(timeout_s));
    (dir, started)
}

/// A row of a TRL standard dataset: `prompt`, plus its own columns.
fn row(prompt: &str, record: serde_json::Value) -> Problem {
    let mut record = record;
    record["prompt"] = json!(prompt);
    Problem { id: prompt.into(), prompt: prompt.into(), answer: String::new(), task: Task::Math, record, messages: None, prompt_field: Some("prompt".into()) }
}

fn samples<'a>(problems: &'a [Problem], completions: &'a [&'a str], ids: &'a [Vec<u32>]) -> Vec<Sample<'a>> {
    problems.iter().zip(completions).zip(ids).map(|((p, c), i)| Sample { problem: p, completion: c, completion_ids: i }).collect()
}

fn score_one(source: &str, name: &str, style: Style, problems: &[Problem], completions: &[&str]) -> Result<Vec<Option<f64>>, String> {
    let (_dir, started) = start(source, &[(name, style)], 20.0);
    let rewards = started.map_err(|e| e.to_string())?;
    let ids: Vec<Vec<u32>> = completions.iter().map(|c| c.bytes().map(u32::from).collect()).collect();
    rewards.score(0, &samples(problems, completions, &ids)).map(|mut v| v.remove(0)).map_err(|e| e.to_string())
}

#[test]
fn trl_standard_format_gets_prompts_completions_ids_and_every_column() {
    let source = r#"
def exact(prompts, completions, completion_ids, target, meta, **kwargs):
    assert isinstance(prompts[0], str) and isinstance(completions[0], str)
    assert "prompt" not in kwargs, "the prompt column is passed as prompts, not again"
    assert kwargs["trainer_state"].global_step == 0
    out = []
    for p, c, ids, t, m in zip(prompts, completions, completion_ids, target, meta):
        assert ids == [ord(ch) for ch in c]
        assert m["nested"] == [1, {"deep": True}], m
        out.append(None if c == "skip" else float(c.strip() == str(t)) + len(p) / 1000)
    return out
"#;
    let meta = json!({ "nested": [1, { "deep": true }] });
    let problems = [row("ab", json!({ "target": 3, "meta": meta })), row("abc", json!({ "target": 4, "meta": meta })), row("a", json!({ "target": 5, "meta": meta }))];
    let got = score_one(source, "exact", Style::Trl, &problems, &["3", "5", "skip"]).unwrap();
    assert_eq!(got, vec![Some(1.002), Some(0.003), None]);
}

#[test]
fn trl_conversational_format_passes_messages() {
    let source = r#"
def judge(prompts, completions, **kwargs):
    return [float(p[0]["role"] == "system" and p[-1]["content"].endswith("?") and c[0]["role"] == "assistant")
            + len(c[0]["content"]) for p, c in zip(prompts, completions)]
"#;
    let mut p = row("two plus two?", json!({}));
    p.messages = Some(vec![ChatMessage::system("Be brief."), ChatMessage::user("two plus two?")]);
    let got = score_one(source, "judge", Style::Trl, &[p.clone(), p], &["4", "four"]).unwrap();
    assert_eq!(got, vec![Some(2.0), Some(5.0)]);
}

#[test]
fn async_functions_are_awaited_and_functions_without_kwargs_get_only_what_they_name() {
    let source = r#"
import asyncio
async def slow(completions):
    await asyncio.sleep(0)
    return [len(c) for c in completions]
"#;
    let got = score_one(source, "slow", Style::Trl, &[row("q", json!({ "x": 1 }))], &["four"]).unwrap();
    assert_eq!(got, vec![Some(4.0)]);
}

#[test]
fn verl_style_is_called_per_completion_with_its_four_arguments() {
    let source = r#"
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    assert data_source == "my/task" and extra_info["index"] in (0, 1)
    if extra_info["index"] == 1:
        return {"score": float(solution_str == ground_truth), "acc": True}
    return 0.25
"#;
    let verl = |i: u64| row("q", json!({ "data_source": "my/task", "reward_model": { "ground_truth": "42", "style": "rule" }, "extra_info": { "index": i } }));
    let got = score_one(source, "compute_score", Style::Verl, &[verl(0), verl(1), verl(1)], &["x", "42", "41"]).unwrap();
    assert_eq!(got, vec![Some(0.25), Some(1.0), Some(0.0)]);
}

#[test]
fn several_functions_share_one_worker_and_keep_their_order() {
    let source = "def a(completions, **kw):\n    return [1.0] * len(completions)\ndef b(completions, **kw):\n    return [2.0] * len(completions)\n";
    let (_dir, started) = start(source, &[("b", Style::Trl), ("a", Style::Trl)], 20.0);
    let rewards = started.unwrap();
    assert_eq!(rewards.parts().map(|(n, _)| n).collect::<Vec<_>>(), ["b", "a"]);
    let problems = [row("q", json!({}))];
    let ids = [vec![1u32]];
    let got = rewards.score(3, &samples(&problems, &["x"], &ids)).unwrap();
    assert_eq!(got, vec![vec![Some(2.0)], vec![Some(1.0)]]);
}

#[test]
fn a_worker_in_rust_speaks_the_same_protocol() {
    let command = CommandSpec { name: "short".into(), argv: vec![env!("CARGO_BIN_EXE_length-worker").into(), "3".into()], weight: 0.5 };
    let rewards = ExternalRewards::start(&[], &[command], &options(20.0)).unwrap();
    assert_eq!(rewards.parts().collect::<Vec<_>>(), [("short", 0.5)]);
    let problems = [row("q", json!({})), row("q", json!({}))];
    let ids = [vec![], vec![]];
    let got = rewards.score(0, &samples(&problems, &["abc", "abcd"], &ids)).unwrap();
    assert_eq!(got, vec![vec![Some(1.0), Some(0.0)]]);
}

/// The error of a function that fails, which must name the function and its file.
fn failure(source: &str, name: &str, style: Style, problems: &[Problem], completions: &[&str], timeout_s: f64) -> String {
    let (dir, started) = start(source, &[(name, style)], timeout_s);
    let file = dir.path().join("rewards.py").display().to_string();
    let e = match started {
        Err(e) => e.to_string(),
        Ok(rewards) => {
            let ids: Vec<Vec<u32>> = completions.iter().map(|_| vec![]).collect();
            rewards.score(0, &samples(problems, completions, &ids)).expect_err("the call should fail").to_string()
        }
    };
    assert!(e.contains(&format!("`{name}`")) && e.contains(&file), "the error names neither the function nor {file}: {e}");
    e
}

#[test]
fn a_missing_or_broken_file_is_named() {
    let (dir, path) = reward_file("");
    let missing = dir.path().join("nope.py");
    let e = ExternalRewards::start(&[function(&missing, "f", Style::Trl)], &[], &options(20.0)).err().unwrap().to_string();
    assert!(e.contains("no such file") && e.contains("nope.py") && e.contains("`f`"), "{e}");
    drop(path);
    let e = failure("def f(completions:\n    pass\n", "f", Style::Trl, &[], &[], 20.0);
    assert!(e.contains("SyntaxError") && e.contains("does not load"), "{e}");
    let e = failure("import no_such_module_here\n", "f", Style::Trl, &[], &[], 20.0);
    assert!(e.contains("ModuleNotFoundError") && e.contains("Traceback"), "{e}");
}

#[test]
fn a_missing_function_name_lists_what_the_file_defines() {
    let e = failure("def countdown_reward(completions, **kw):\n    return []\n", "countdown", Style::Trl, &[], &[], 20.0);
    assert!(e.contains("has no function `countdown`") && e.contains("countdown_reward"), "{e}");
}

#[test]
fn an_exception_comes_with_its_traceback() {
    let source = "def f(completions, **kw):\n    return helper(completions)\n\ndef helper(c):\n    raise ValueError('bad completion ' + c[0])\n";
    let e = failure(source, "f", Style::Trl, &[row("q", json!({}))], &["zz"], 20.0);
    assert!(e.contains("ValueError: bad completion zz") && e.contains("Traceback") && e.contains("in helper"), "{e}");
}

#[test]
fn a_list_of_the_wrong_length_is_refused() {
    let e = failure("def f(completions, **kw):\n    return [1.0]\n", "f", Style::Trl, &[row("q", json!({})), row("r", json!({}))], &["a", "b"], 20.0);
    assert!(e.contains("returned 1 rewards for 2 completions"), "{e}");
    let e = failure("def f(completions, **kw):\n    return 1.0\n", "f", Style::Trl, &[row("q", json!({}))], &["a"], 20.0);
    assert!(e.contains("returned float, not a list"), "{e}");
}

#[test]
fn a_value_that_is_not_a_number_or_is_nan_is_refused() {
    let one = [row("q", json!({})), row("r", json!({}))];
    let e = failure("def f(completions, **kw):\n    return [1.0, 'high']\n", "f", Style::Trl, &one, &["a", "b"], 20.0);
    assert!(e.contains("reward 1 is not a number") && e.contains("high"), "{e}");
    let e = failure("def f(completions, **kw):\n    return [float('nan'), 1]\n", "f", Style::Trl, &one, &["a", "b"], 20.0);
    assert!(e.contains("reward 0 is NaN"), "{e}");
    let e = failure("def f(completions, **kw):\n    return [1, float('inf')]\n", "f", Style::Trl, &one, &["a", "b"], 20.0);
    assert!(e.contains("reward 1 is Infinity"), "{e}");
    let e = failure("def compute_score(data_source, solution_str, ground_truth, extra_info):\n    return {'acc': 1}\n", "compute_score", Style::Verl,
        &[row("q", json!({ "reward_model": { "ground_truth": "1" } }))], &["a"], 20.0);
    assert!(e.contains("without a `score` key"), "{e}");
}

#[test]
fn a_worker_that_hangs_is_stopped_at_the_time_limit() {
    let source = "import time\ndef f(completions, **kw):\n    time.sleep(30)\n    return [1.0]\n";
    let t = std::time::Instant::now();
    let e = failure(source, "f", Style::Trl, &[row("q", json!({}))], &["a"], 0.5);
    assert!(e.contains("no reply within reward.timeout_s = 0.5 s"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(20), "the hung worker was waited for: {:?}", t.elapsed());
}

#[test]
fn a_worker_that_dies_is_named_with_its_last_words() {
    let source = "import os, sys\ndef f(completions, **kw):\n    print('about to go', file=sys.stderr, flush=True)\n    os._exit(3)\n";
    let e = failure(source, "f", Style::Trl, &[row("q", json!({}))], &["a"], 20.0);
    assert!(e.contains("died") && e.contains("exit status: 3") && e.contains("about to go"), "{e}");
}

#[test]
fn a_column_the_function_asks_for_and_the_dataset_lacks_is_named() {
    let e = failure("def f(completions, target, **kw):\n    return [1.0]\n", "f", Style::Trl, &[row("q", json!({ "nums": [1, 2] }))], &["a"], 20.0);
    assert!(e.contains("asks for `target`, which the dataset lacks") && e.contains("nums"), "{e}");
    let e = failure("def compute_score(data_source, solution_str, ground_truth, extra_info):\n    return 1\n", "compute_score", Style::Verl,
        &[row("q", json!({ "data_source": "x" }))], &["a"], 20.0);
    assert!(e.contains("`ground_truth`") && e.contains("reward_model.ground_truth"), "{e}");
}

#[test]
fn what_a_function_prints_does_not_corrupt_the_replies() {
    let source = "def f(completions, **kw):\n    print('debugging', completions)\n    return [2.0] * len(completions)\n";
    assert_eq!(score_one(source, "f", Style::Trl, &[row("q", json!({}))], &["a"]).unwrap(), vec![Some(2.0)]);
}

#[test]
fn a_command_that_does_not_start_or_greets_wrongly_is_named() {
    let missing = CommandSpec { name: "ghost".into(), argv: vec!["/nonexistent/worker".into()], weight: 1.0 };
    let e = ExternalRewards::start(&[], &[missing], &options(5.0)).err().unwrap().to_string();
    assert!(e.contains("reward command `ghost`") && e.contains("/nonexistent/worker") && e.contains("did not start"), "{e}");
    let rude = CommandSpec { name: "rude".into(), argv: vec!["sh".into(), "-c".into(), "echo hello".into()], weight: 1.0 };
    let e = ExternalRewards::start(&[], &[rude], &options(5.0)).err().unwrap().to_string();
    assert!(e.contains("reward command `rude`") && e.contains("not a JSON object"), "{e}");
}
