//! The built `cppo` binary on a tiny random model (SmolLM2's tokenizer, two small layers) written to a
//! temporary folder: `train` then `train --resume` for longer, the checkpoint folder README promises,
//! `generate --json` from that checkpoint, and `eval` on a JSON-lines file with every generation graded.

use std::path::Path;
use std::process::{Command, Output};

use candle_core::{DType, Device};
use cppo_io::ChatMessage;
use cppo_model::Decoder;
use serde_json::Value;

/// The trainer tests' fixtures: the tiny model (saved once per test binary) and fresh output folders.
use cppo_test_support as common;

use common::{out_dir, tiny_model_dir};

fn cppo(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_cppo")).args(args).output().expect("run cppo");
    assert!(out.status.success(), "cppo {args:?} failed ({:?}):\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json_lines(path: &Path) -> Vec<Value> {
    read(path).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn weights(dir: &Path) -> Vec<(String, Vec<f32>)> {
    let m = cppo_io::load_model(dir, DType::F32, &Device::Cpu).unwrap_or_else(|e| panic!("load {}: {e}", dir.display()));
    let mut w: Vec<(String, Vec<f32>)> =
        m.weights.tensors.iter().map(|(k, t)| (k.clone(), t.flatten_all().unwrap().to_vec1::<f32>().unwrap())).collect();
    w.sort_by(|a, b| a.0.cmp(&b.0));
    w
}

const CONFIG: &str = r#"
seed = 3
output_dir = "OUT"
[model]
path = "MODEL"
[data]
train = "arith:train"
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
[optim]
lr = 1e-2
[train]
steps = 100
save_every = 1
eval_before = false
"#;

/// `cppo train CONFIG --set train.steps=2`, then `cppo train --resume OUT --set train.steps=3`; the
/// checkpoints hold the model (Hugging Face layout), the optimizer state, the data cursor and `latest`;
/// `cppo generate` runs the checkpoint's model (its log-probs are the checkpoint's, not the initial
/// model's).
#[test]
fn train_resume_checkpoint_and_generate() {
    let model = tiny_model_dir();
    let out = out_dir("run");
    let dir = out_dir("config");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("tiny.toml");
    std::fs::write(&config, CONFIG.replace("OUT", &out.display().to_string()).replace("MODEL", &model.display().to_string())).unwrap();

    let r = cppo(&["train", config.to_str().unwrap(), "--set", "train.steps=2", "--quiet"]);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("trained 2 steps"), "{stderr}");
    let first = read(&out.join("metrics.jsonl"));
    let metrics = json_lines(&out.join("metrics.jsonl"));
    assert_eq!(metrics.iter().map(|m| m["step"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2]);
    for m in &metrics {
        assert_eq!((m["completions_generated"].as_u64(), m["completions_kept"].as_u64()), (Some(8), Some(4)));
        assert!(m["loss"].as_f64().unwrap().is_finite());
    }

    // The checkpoint folder, as README describes it.
    let ckpts = out.join("checkpoints");
    assert_eq!(read(&ckpts.join("latest")).trim(), "step-000002");
    for (step, position) in [(1u64, 2u64), (2, 4)] {
        let c = ckpts.join(format!("step-{step:06}"));
        for f in ["model/config.json", "model/model.safetensors", "model/tokenizer.json", "model/tokenizer_config.json", "optimizer.safetensors", "trainer_state.json"] {
            assert!(c.join(f).is_file(), "{}/{f} missing", c.display());
        }
        let state: Value = serde_json::from_str(&read(&c.join("trainer_state.json"))).unwrap();
        assert_eq!(state["step"].as_u64(), Some(step));
        // The data cursor: two questions a step.
        assert_eq!(state["sampler"]["position"].as_u64(), Some(position), "{state}");
        assert_eq!(state["sampler"]["epoch"].as_u64(), Some(0));
    }
    let ckpt = ckpts.join("step-000002");
    let trained = weights(&ckpt.join("model"));
    assert_eq!(trained, weights(&out.join("model")), "the last checkpoint is not the final model");
    assert_ne!(trained, weights(&model), "the checkpoint holds the initial weights");
    // The optimizer state loads into the model's variables: one Adam step per training step.
    let loaded = cppo_io::load_model(&ckpt.join("model"), DType::F32, &Device::Cpu).unwrap();
    let policy = Decoder::new(&loaded.config, &loaded.weights, true, &Device::Cpu).unwrap();
    let cfg = cppo_train::config::TrainConfig::load(&out.join("config.toml"), &[]).unwrap();
    let mut adam = cppo_train::optim::AdamW::new(&policy.vars(), cfg.optim.adamw());
    adam.load(&ckpt.join("optimizer.safetensors")).unwrap();
    assert_eq!(adam.step, 2);

    // Resume for one more step: the first two lines stay as they were, a third is appended.
    let r = cppo(&["train", "--resume", out.to_str().unwrap(), "--set", "train.steps=3", "--quiet"]);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("trained 3 steps"), "{stderr}");
    let metrics = read(&out.join("metrics.jsonl"));
    assert!(metrics.starts_with(&first), "resuming rewrote the first steps' metrics");
    assert_eq!(json_lines(&out.join("metrics.jsonl")).iter().map(|m| m["step"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(read(&ckpts.join("latest")).trim(), "step-000003");
    let state: Value = serde_json::from_str(&read(&ckpts.join("step-000003/trainer_state.json"))).unwrap();
    assert_eq!((state["step"].as_u64(), state["sampler"]["position"].as_u64()), (Some(3), Some(6)));
    assert_ne!(weights(&out.join("model")), trained, "the resumed step did not train");

    // `cppo generate` on the checkpoint: two JSON lines whose log-probs are the checkpoint model's.
    let prompt = "What is 2 + 3?";
    let r = cppo(&["generate", "--model", ckpt.join("model").to_str().unwrap(), "--prompt", prompt, "--n", "2", "--max-new-tokens", "5", "--seed", "4", "--json"]);
    let lines: Vec<Value> = String::from_utf8_lossy(&r.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let tok = &loaded.tokenizer;
    let prompt_ids = tok.encode(&tok.render(&[ChatMessage::new("user", prompt)], true).unwrap()).unwrap();
    let initial = cppo_io::load_model(&model, DType::F32, &Device::Cpu).unwrap();
    let initial = Decoder::new(&initial.config, &initial.weights, false, &Device::Cpu).unwrap();
    let mut differs_from_initial = false;
    for (s, line) in lines.iter().enumerate() {
        assert_eq!((line["prompt"].as_u64(), line["sample"].as_u64()), (Some(0), Some(s as u64)));
        let tokens: Vec<u32> = serde_json::from_value(line["tokens"].clone()).unwrap();
        let logprobs: Vec<f32> = serde_json::from_value(line["logprobs"].clone()).unwrap();
        assert!(!tokens.is_empty() && tokens.len() <= 5);
        assert_eq!(logprobs.len(), tokens.len());
        assert_eq!(line["text"].as_str().unwrap(), tok.decode(&tokens, true).unwrap());
        let finish = line["finish"].as_str().unwrap();
        assert_eq!(line["truncated"].as_bool(), Some(finish == "length"), "{line}");
        assert_eq!(finish == "length", tokens.len() == 5);
        // Sampled at temperature 1 with no top-p/top-k: the reported log-probs are the model's.
        let expect = policy.completion_logprobs(&prompt_ids, &[&tokens]).unwrap().logprobs.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (a, b) in logprobs.iter().zip(&expect) {
            assert!((a - b).abs() < 1e-3, "generate's log-prob {a} vs the checkpoint model's {b}");
        }
        let before = initial.completion_logprobs(&prompt_ids, &[&tokens]).unwrap().logprobs.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        differs_from_initial |= logprobs.iter().zip(&before).any(|(a, b)| (a - b).abs() > 1e-2);
    }
    assert!(differs_from_initial, "generate's log-probs match the untrained model: the checkpoint was not loaded");
    for d in [&out, &dir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// `cppo eval --data FILE`: every generation written with its grade, the summary consistent with them.
#[test]
fn eval_writes_every_generation_with_its_grade() {
    let model = tiny_model_dir();
    let dir = out_dir("eval");
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("problems.jsonl");
    let problems = [("What is 2 + 3?", "5"), ("What is 10 - 4?", "6"), ("What is 7 * 6?", "42")];
    let text: String = problems.iter().map(|(q, a)| format!("{}\n", serde_json::json!({"q": q, "a": a}))).collect();
    std::fs::write(&data, text).unwrap();
    let out = dir.join("out");
    let r = cppo(&[
        "eval", "--model", model.to_str().unwrap(), "--data", data.to_str().unwrap(), "--prompt-field", "q", "--answer-field", "a",
        "--task", "gsm8k", "--template", "plain", "--max-new-tokens", "4", "--samples", "2", "--temperature", "1.0", "--pass-k", "1,2",
        "--out", out.to_str().unwrap(),
    ]);
    let summary: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(summary, serde_json::from_str::<Value>(&read(&out.join("summary.json"))).unwrap());
    assert_eq!((summary["problems"].as_u64(), summary["samples"].as_u64()), (Some(3), Some(2)));
    let records = json_lines(&out.join("generations.jsonl"));
    assert_eq!(records.len(), 3);
    let mut correct = 0;
    for (rec, (q, a)) in records.iter().zip(problems) {
        assert_eq!((rec["prompt"].as_str(), rec["answer"].as_str()), (Some(q), Some(a)));
        let gens = rec["generations"].as_array().unwrap();
        assert_eq!(gens.len(), 2);
        for g in gens {
            let text = g["text"].as_str().unwrap();
            // The grade written is the GSM8K grader's on that very text.
            let s = cppo_reward::gsm8k::grade(text, a);
            assert_eq!(g["correct"].as_bool(), Some(s.correct == Some(true)), "{g}");
            assert_eq!(g["extracted"], serde_json::to_value(&s.extracted).unwrap(), "{g}");
            assert!(g["tokens"].as_u64().unwrap() <= 4);
            assert!(g["finish"].is_string());
            correct += usize::from(s.correct == Some(true));
        }
    }
    assert!((summary["accuracy"].as_f64().unwrap() - correct as f64 / 6.0).abs() < 1e-12);
    std::fs::remove_dir_all(&dir).ok();
}
