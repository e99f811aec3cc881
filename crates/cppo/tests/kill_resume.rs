//! `cppo train` SIGKILLed at random moments of an 8-step run (before its first checkpoint, mid-step,
//! mid-save, mid-evaluation: wherever the kill lands), each time resumed with `cppo train --resume OUT`,
//! ends with the metrics, evaluations and model of an uninterrupted run, and no leftovers of an
//! interrupted save in `checkpoints/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use candle_core::{DType, Device};
use serde_json::Value;

use cppo_test_support as common;

use common::{out_dir, tiny_model_dir};

const CONFIG: &str = r#"
seed = 5
output_dir = "OUT"
[model]
path = "MODEL"
[data]
train = "arith:train"
eval = "arith:test"
eval_limit = 2
template = "plain"
[reward]
accuracy = 1.0
brevity = 1.0
[rollout]
num_generations = 4
questions_per_step = 2
strategy = { kind = "cppo", pruning_rate = 0.5 }
[generation]
max_new_tokens = 6
max_batch = 8
temperature = 0.7
[loss]
num_iterations = 2
[optim]
lr = 1e-2
[train]
steps = 8
save_every = 1
eval_every = 3
[eval]
max_new_tokens = 4
"#;

fn config(name: &str) -> (PathBuf, PathBuf) {
    let out = out_dir(name);
    let dir = out_dir(&format!("{name}-config"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.toml");
    let text = CONFIG.replace("OUT", &out.display().to_string()).replace("MODEL", &tiny_model_dir().display().to_string());
    std::fs::write(&path, text).unwrap();
    (path, out)
}

fn train(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cppo"));
    c.arg("train").args(args).arg("--quiet");
    c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
    c
}

/// A JSON-lines file with the timing fields removed (they differ from run to run).
fn lines_without_timings(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("time");
            o.remove("seconds");
            v
        })
        .collect()
}

fn weights(dir: &Path) -> Vec<(String, Vec<f32>)> {
    let m = cppo_io::load_model(dir, DType::F32, &Device::Cpu).unwrap_or_else(|e| panic!("load {}: {e}", dir.display()));
    let mut w: Vec<(String, Vec<f32>)> =
        m.weights.tensors.iter().map(|(k, t)| (k.clone(), t.flatten_all().unwrap().to_vec1::<f32>().unwrap())).collect();
    w.sort_by(|a, b| a.0.cmp(&b.0));
    w
}

/// A small deterministic generator (splitmix64), so a failure names the delays that caused it.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn four_sigkills_each_resumed_end_as_an_uninterrupted_run() {
    let (straight_cfg, straight) = config("kill-straight");
    let t0 = Instant::now();
    let done = train(&[straight_cfg.to_str().unwrap()]).output().unwrap();
    assert!(done.status.success(), "uninterrupted run failed:\n{}", String::from_utf8_lossy(&done.stderr));
    let whole = t0.elapsed();

    let (killed_cfg, killed) = config("kill-resumed");
    let seed = std::process::id() as u64 ^ t0.elapsed().as_nanos() as u64;
    let mut rng = seed;
    let mut delays = Vec::new();
    for _ in 0..4 {
        // Anywhere from process start to most of an uninterrupted run's length.
        let ms = (whole.as_millis() as u64 * (2 + next(&mut rng) % 88) / 100).max(1);
        delays.push(ms);
        // Until a run has saved its configuration there is nothing to resume: the user retypes the
        // command, as the test does.
        let args: Vec<String> = if killed.join("config.toml").is_file() {
            vec!["--resume".into(), killed.display().to_string()]
        } else {
            vec![killed_cfg.display().to_string()]
        };
        let mut child = train(&args.iter().map(String::as_str).collect::<Vec<_>>()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(ms));
        // `Child::kill` is SIGKILL on Unix: no destructor, no flush, no cleanup runs.
        let _ = child.kill();
        child.wait().unwrap();
    }
    let args: Vec<String> = if killed.join("config.toml").is_file() {
        vec!["--resume".into(), killed.display().to_string()]
    } else {
        vec![killed_cfg.display().to_string()]
    };
    let last = train(&args.iter().map(String::as_str).collect::<Vec<_>>()).output().unwrap();
    assert!(last.status.success(), "delays {delays:?} ms: the last resume failed:\n{}", String::from_utf8_lossy(&last.stderr));

    let why = format!("kill delays {delays:?} ms (an uninterrupted run took {} ms)", whole.as_millis());
    let metrics = lines_without_timings(&killed.join("metrics.jsonl"));
    assert_eq!(metrics.len(), 8, "{why}");
    assert_eq!(metrics, lines_without_timings(&straight.join("metrics.jsonl")), "{why}: metrics differ");
    assert_eq!(lines_without_timings(&killed.join("eval.jsonl")), lines_without_timings(&straight.join("eval.jsonl")), "{why}: evaluations differ");
    assert!(weights(&killed.join("model")) == weights(&straight.join("model")), "{why}: final models differ");
    let leftovers: Vec<String> = std::fs::read_dir(killed.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{why}: leftovers in checkpoints/: {leftovers:?}");
}
