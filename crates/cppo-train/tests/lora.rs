//! LoRA end to end on a tiny random model: GRPO steps move only the adapters (the base and the
//! reference, which is the base with adapters off, stay bit-identical), the first step's KL is exactly
//! zero (B = 0), checkpoints hold the adapter in PEFT's format with optimizer state for the adapters
//! only, a resumed run matches an uninterrupted one, the final adapter merges into a plain model that
//! scores like the adapted one, and bad `[lora]` settings are errors naming the key.

use cppo_test_support as common;

use candle_core::{DType, Device};
use cppo_model::Decoder;
use cppo_train::checkpoint;
use cppo_train::run::{run, RunOptions};
use cppo_train::metrics::{JsonlLog, StepMetrics};
use cppo_train::trainer::Trainer;

const LORA: [&str; 3] = ["lora.r=2", "lora.alpha=4", "lora.target_modules=\"all-linear\""];

fn lora_config(name: &str, extra: &[&str]) -> cppo_train::config::TrainConfig {
    let ov: Vec<&str> = LORA.iter().chain(extra).copied().collect();
    common::tiny_config(name, &ov)
}

fn flat(w: &cppo_io::Weights) -> Vec<f32> {
    w.tensors.values().flat_map(|t| t.flatten_all().unwrap().to_vec1::<f32>().unwrap()).collect()
}

fn logprobs(d: &Decoder) -> Vec<f32> {
    let (p, c1, c2): (Vec<u32>, Vec<u32>, Vec<u32>) = (vec![5, 9, 13, 200], vec![7, 1, 30], vec![44, 2]);
    let out = d.completion_logprobs_detached(&p, &[&c1, &c2]).unwrap();
    out.logprobs.flatten_all().unwrap().to_vec1::<f32>().unwrap()
}

#[test]
fn grpo_steps_with_lora_move_only_the_adapters() {
    let mut t = Trainer::new(lora_config("steps", &[]), false).unwrap();
    let vars = t.policy.vars();
    let layers = t.model_config.num_hidden_layers;
    assert_eq!(vars.len(), layers * 7 * 2, "A and B of all seven linear layers, nothing else");
    assert!(vars.iter().all(|(n, _)| n.contains(".lora_")));
    let base0 = flat(&t.trained_policy().unwrap().to_weights().unwrap());
    let adapters0 = t.trained_policy().unwrap().adapter_weights().unwrap();
    let reference = t.reference.as_ref().expect("beta > 0 builds a reference");
    assert!(reference.vars().is_empty() && reference.lora().is_some(), "the reference is the policy's base, adapters off");
    let ref_lp0 = logprobs(reference);
    assert_eq!(logprobs(t.trained_policy().unwrap()), ref_lp0, "B = 0: the adapted policy starts as the base");

    let first = t.train_step(|_| {}).unwrap().metrics;
    assert!(first.loss.is_finite());
    assert_eq!(first.kl, 0.0, "step 1 scores the policy against itself");
    let second = t.train_step(|_| {}).unwrap().metrics;
    assert!(second.loss.is_finite() && second.kl.is_finite());

    assert_eq!(flat(&t.trained_policy().unwrap().to_weights().unwrap()), base0, "the frozen base moved");
    let adapters1 = t.trained_policy().unwrap().adapter_weights().unwrap();
    let moved = adapters0.tensors.iter().filter(|(n, a)| flat_one(a) != flat_one(&adapters1.tensors[*n])).count();
    assert!(moved > 0, "no adapter moved");
    let b_moved = adapters1.tensors.iter().filter(|(n, b)| n.contains("lora_B") && flat_one(b).iter().any(|&x| x != 0.0)).count();
    assert!(b_moved > 0, "every B is still zero");
    let reference = t.reference.as_ref().unwrap();
    assert_eq!(flat(&reference.to_weights().unwrap()), base0, "the reference moved");
    assert_eq!(logprobs(reference), ref_lp0, "the reference scores as the base");
    assert_ne!(logprobs(t.trained_policy().unwrap()), ref_lp0, "the policy still scores as the base");
}

fn flat_one(t: &candle_core::Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
}

fn comparable(mut m: StepMetrics) -> StepMetrics {
    m.time = Default::default();
    m
}

fn resume_run(name: &str, stop_after: Option<u64>, extra: &[&str]) -> (Vec<StepMetrics>, Vec<f32>, std::path::PathBuf) {
    let ov: Vec<&str> = ["train.steps=4", "train.save_every=2", "loss.num_iterations=2"].iter().chain(extra).copied().collect();
    let cfg = lora_config(name, &ov);
    let out = cfg.output_dir.clone();
    let mut t = Trainer::new(cfg.clone(), false).unwrap();
    while t.step < 4 {
        t.train_step(|_| {}).unwrap();
        if t.step % 2 == 0 {
            t.save_checkpoint().unwrap();
        }
        if Some(t.step) == stop_after {
            t.train_step(|_| {}).unwrap();
            drop(t);
            t = Trainer::new(cfg.clone(), true).unwrap();
            assert_eq!(t.step, stop_after.unwrap());
        }
    }
    let metrics: Vec<StepMetrics> = JsonlLog::read(&out.join("metrics.jsonl")).unwrap();
    (metrics.into_iter().map(comparable).collect(), flat(&t.trained_policy().unwrap().adapter_weights().unwrap()), out)
}

#[test]
fn lora_checkpoints_hold_the_adapter_and_resume_exactly() {
    let (a, wa, out) = resume_run("straight", None, &[]);
    let (b, wb, _) = resume_run("resumed", Some(2), &[]);
    assert_eq!(a.len(), 4);
    assert_eq!(a, b, "a resumed LoRA run differs from an uninterrupted one");
    assert!(wa == wb, "adapters differ after resume");
    let ck = checkpoint::latest(&out).unwrap().unwrap();
    let model = ck.join(checkpoint::MODEL_DIR);
    assert!(model.join("adapter_config.json").is_file() && model.join("adapter_model.safetensors").is_file());
    assert!(!model.join("model.safetensors").exists(), "a LoRA checkpoint holds no copy of the base");
    let opt = candle_core::safetensors::load(ck.join(checkpoint::OPTIMIZER_FILE), &Device::Cpu).unwrap();
    let cfg = lora_config("count", &[]);
    let adapters = cfg.lora.as_ref().unwrap();
    let n_adapters = 2 * 7 * common_layers();
    assert_eq!(adapters.r, 2);
    assert_eq!(opt.len(), 2 * n_adapters + 1, "AdamW moments for the adapters only (plus the step)");
    assert!(opt.keys().filter(|k| *k != "step").all(|k| k.contains(".lora_")), "{:?}", opt.keys());
}

#[test]
fn lora_dropout_trains_and_resumes_exactly() {
    let (a, wa, _) = resume_run("dropout-straight", None, &["lora.dropout=0.1"]);
    let (b, wb, _) = resume_run("dropout-resumed", Some(2), &["lora.dropout=0.1"]);
    assert_eq!(a, b, "a resumed run with dropout differs from an uninterrupted one");
    assert!(wa == wb, "adapters differ after resume");
    let (_, w0, _) = resume_run("dropout-none", None, &[]);
    assert!(wa != w0, "dropout 0.1 trains other adapters than no dropout");
}

fn common_layers() -> usize {
    cppo_io::load_model(&common::tiny_model_dir(), DType::F32, &Device::Cpu).unwrap().config.num_hidden_layers
}

#[test]
fn the_final_adapter_merges_into_a_model_that_scores_like_the_adapted_policy() {
    let cfg = lora_config("final", &["train.steps=1", "eval.samples=1"]);
    let out = cfg.output_dir.clone();
    run(cfg.clone(), &RunOptions { progress: false, ..Default::default() }).unwrap();
    let adapter = out.join("adapter");
    assert!(adapter.join("adapter_config.json").is_file(), "cppo train writes OUT/adapter with LoRA");
    let merged_dir = out.join("merged");
    cppo_train::lora::merge(&common::tiny_model_dir(), &adapter, &merged_dir).unwrap();
    let base = cppo_io::load_model(&common::tiny_model_dir(), DType::F32, &Device::Cpu).unwrap();
    let adapted = cppo_train::lora::load_adapted(&base.config, &base.weights, &adapter, &Device::Cpu).unwrap();
    let merged = cppo_io::load_model(&merged_dir, DType::F32, &Device::Cpu).unwrap();
    let merged_dec = Decoder::new(&merged.config, &merged.weights, false, &Device::Cpu).unwrap();
    let (x, y) = (logprobs(&adapted), logprobs(&merged_dec));
    let err = x.iter().zip(&y).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(err < 1e-4, "merged model scores differently by {err}");
    assert_ne!(logprobs(&adapted.without_adapters()), x, "the trained adapter changes nothing");
    // A base of another shape is refused, naming the tensor that does not fit.
    let mut other = base.config.clone();
    other.intermediate_size += 8;
    let w = cppo_model::decoder::random_weights(&other, 1, &Default::default()).unwrap();
    let err = format!("{:#}", cppo_train::lora::load_adapted(&other, &w, &adapter, &Device::Cpu).unwrap_err());
    assert!(err.contains("lora_") && (err.contains("gate_proj") || err.contains("up_proj") || err.contains("down_proj")), "{err}");
}

#[test]
fn bad_lora_settings_are_errors_naming_the_key() {
    let try_cfg = |extra: &[&str]| {
        let ov: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let base = toml::to_string(&common::tiny_config("bad", &[])).unwrap();
        cppo_train::config::TrainConfig::from_toml(&base, &ov).map(|_| ()).map_err(|e| format!("{e:#}"))
    };
    let e = try_cfg(&["lora.target_modules=[\"q_proj\", \"qkv_proj\"]"]).unwrap_err();
    assert!(e.contains("lora.target_modules") && e.contains("qkv_proj"), "{e}");
    let e = try_cfg(&["lora.r=0"]).unwrap_err();
    assert!(e.contains("lora.r = 0"), "{e}");
    let e = try_cfg(&["lora.dropout=1.0"]).unwrap_err();
    assert!(e.contains("lora.dropout = 1"), "{e}");
    assert!(try_cfg(&["lora.dropout=0.05"]).is_ok());
    let e = try_cfg(&["lora.rank=4"]).unwrap_err();
    assert!(e.contains("lora.rank"), "{e}");
    assert!(try_cfg(&["lora.r=4", "lora.target_modules=\"all-linear\"", "lora.use_rslora=true"]).is_ok());
    // The rank against the matrices is checked when the model is loaded.
    let cfg = lora_config("too-big", &["lora.r=100000"]);
    let e = format!("{:#}", Trainer::new(cfg, false).err().unwrap());
    assert!(e.contains("lora.r = 100000") && e.contains("model.layers.N."), "{e}");
}

#[test]
fn lora_trains_under_other_strategies_estimators_and_losses() {
    let arms: [(&str, &[&str]); 3] = [
        ("cppo-alloc", &["rollout.strategy={ kind = \"cppo\", pruning_rate = 0.75 }", "rollout.allocation=true"]),
        ("pods-mu2", &["rollout.strategy={ kind = \"pods-max-variance\", m = 2 }", "loss.num_iterations=2"]),
        (
            "dapo-dr",
            &["loss.beta=0.0", "loss.epsilon_high=0.28", "loss.aggregation=\"token-mean\"", "rollout.estimator={ kind = \"dr-grpo\" }"],
        ),
    ];
    for (name, extra) in arms {
        let mut t = Trainer::new(lora_config(name, extra), false).unwrap();
        assert_eq!(t.reference.is_some(), t.cfg.loss.beta > 0.0, "{name}");
        let base0 = flat(&t.trained_policy().unwrap().to_weights().unwrap());
        let adapters0 = flat(&t.trained_policy().unwrap().adapter_weights().unwrap());
        for _ in 0..2 {
            let m = t.train_step(|_| {}).unwrap().metrics;
            assert!(m.loss.is_finite(), "{name}: loss {}", m.loss);
        }
        assert_eq!(flat(&t.trained_policy().unwrap().to_weights().unwrap()), base0, "{name}: the base moved");
        assert_ne!(flat(&t.trained_policy().unwrap().adapter_weights().unwrap()), adapters0, "{name}: the adapters did not move");
    }
}
