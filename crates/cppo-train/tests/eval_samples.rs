//! The trainer's held-out evaluation with n > 1 samples: avg@n and pass@k in `eval.jsonl`, every sample
//! with its grade in `evals/step-N.jsonl`, and the summary agreeing with those grades.
//!
//! A random model never answers right, so the model here is built to answer: its layers write nothing
//! into the residual stream, every embedding points along one axis, and the final norm keeps only that
//! axis, so the logits of the tokens "1" and "2" (whose embeddings are six times longer) beat every other
//! token by ~28 nats. Sampled at temperature 1, each answer is "1" or "2" with probability 1/2.

use cppo_test_support as common;

use std::path::PathBuf;

use candle_core::{DType, Device, Tensor};
use cppo_core::{Problem, Task};
use cppo_train::eval::{EvalRecord, EvalSummary};
use cppo_train::metrics::JsonlLog;
use cppo_train::trainer::Trainer;

fn one_or_two_model() -> PathBuf {
    let loaded = cppo_io::load_model(&common::tiny_model_dir(), DType::F32, &Device::Cpu).unwrap();
    let (cfg, tokenizer) = (loaded.config, loaded.tokenizer);
    assert!(cfg.tie_word_embeddings, "the construction needs tied embeddings");
    let digits = [tokenizer.token_to_id("1").unwrap(), tokenizer.token_to_id("2").unwrap()];
    let (v, h) = (cfg.vocab_size, cfg.hidden_size);
    let mut weights = loaded.weights;
    let mut put = |name: &str, data: Vec<f32>, shape: &[usize]| {
        assert!(weights.tensors.contains_key(name), "{name}");
        weights.tensors.insert(name.to_string(), Tensor::from_vec(data, shape, &Device::Cpu).unwrap());
    };
    let mut emb = vec![0f32; v * h];
    for t in 0..v {
        emb[t * h] = if digits.contains(&(t as u32)) { 6.0 } else { 1.0 };
    }
    put("model.embed_tokens.weight", emb, &[v, h]);
    let mut norm = vec![0f32; h];
    norm[0] = 1.0;
    put("model.norm.weight", norm, &[h]);
    let q = cfg.num_attention_heads * cfg.head_dim;
    for l in 0..cfg.num_hidden_layers {
        put(&format!("model.layers.{l}.self_attn.o_proj.weight"), vec![0.0; h * q], &[h, q]);
        put(&format!("model.layers.{l}.mlp.down_proj.weight"), vec![0.0; h * cfg.intermediate_size], &[h, cfg.intermediate_size]);
    }
    let dir = common::out_dir("one-or-two-model");
    cppo_io::save_hf(&dir, &cfg, &weights, &tokenizer, DType::F32).unwrap();
    dir
}

fn problem(id: &str, answer: &str) -> Problem {
    Problem { id: id.into(), prompt: format!("Say {answer}."), answer: answer.into(), task: Task::Gsm8k, record: serde_json::Value::Null, messages: None, prompt_field: None }
}

/// pass@k = 1 - C(n - c, k) / C(n, k), computed as a product.
fn pass_at_k(n: usize, c: usize, k: usize) -> f64 {
    if n - c < k {
        return 1.0;
    }
    1.0 - (0..k).map(|i| (n - c - i) as f64 / (n - i) as f64).product::<f64>()
}

#[test]
fn avg_at_n_and_pass_at_k_from_n_samples() {
    const N: usize = 8;
    let model = one_or_two_model();
    let model_set = format!("model.path=\"{}\"", model.display());
    let cfg = common::tiny_config(
        "eval-samples",
        &[&model_set, "eval.samples=8", "eval.temperature=1.0", "eval.pass_k=[1, 2, 8]", "eval.max_new_tokens=1"],
    );
    let out = cfg.output_dir.clone();
    let mut t = Trainer::new(cfg, false).unwrap();
    // "3" is never said: pass@8 = 0 there; "1" and "2" are each said about half the time.
    t.eval_problems = vec![problem("one", "1"), problem("three", "3"), problem("two", "2")];
    let s = t.evaluate().unwrap().unwrap();

    let logged: Vec<EvalSummary> = JsonlLog::read(&out.join("eval.jsonl")).unwrap();
    // serde_json's default float parsing may come back one ulp off (no `float_roundtrip`).
    assert_eq!(logged.len(), 1);
    assert!((logged[0].reward_mean - s.reward_mean).abs() <= 1e-12 * s.reward_mean.abs(), "{logged:?} against {s:?}");
    assert_eq!(logged, vec![EvalSummary { reward_mean: logged[0].reward_mean, ..s.clone() }]);
    assert_eq!((s.step, s.problems, s.samples), (0, 3, N));
    let keys: Vec<&str> = s.pass_at_k.keys().map(String::as_str).collect();
    assert_eq!(keys, ["pass@1", "pass@2", "pass@8"]);

    let text = std::fs::read_to_string(out.join("evals/step-000000.jsonl")).unwrap();
    let records: Vec<EvalRecord> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 3);
    let mut correct = Vec::new();
    for r in &records {
        assert_eq!(r.generations.len(), N, "{}", r.id);
        for g in &r.generations {
            assert!(g.text == "1" || g.text == "2", "the model says only 1 or 2, said {:?}", g.text);
            assert_eq!(g.correct, g.text == r.answer, "{}: {:?} graded {}", r.id, g.text, g.correct);
        }
        correct.push(r.generations.iter().filter(|g| g.correct).count());
    }
    assert_eq!(correct[1], 0);
    // Samples, not one answer copied n times (fixed seed: deterministic).
    assert!(correct.iter().any(|&c| 0 < c && c < N), "{correct:?}");

    let avg = correct.iter().sum::<usize>() as f64 / (3 * N) as f64;
    assert!((s.accuracy - avg).abs() < 1e-12, "avg@n {} vs {avg}", s.accuracy);
    for k in [1, 2, 8] {
        let expect = correct.iter().map(|&c| pass_at_k(N, c, k)).sum::<f64>() / 3.0;
        let got = s.pass_at_k[&format!("pass@{k}")];
        assert!((got - expect).abs() < 1e-12, "pass@{k}: {got} vs {expect} ({correct:?})");
    }
    assert!((s.pass_at_k["pass@1"] - s.accuracy).abs() < 1e-12);
    assert!(s.pass_at_k["pass@1"] < s.pass_at_k["pass@2"] && s.pass_at_k["pass@2"] <= s.pass_at_k["pass@8"]);
    assert_eq!(s.mean_completion_tokens, 1.0);
}
