//! Bad input fails before any training with a message that says what to change; a NaN loss stops the
//! step without touching the weights or writing a checkpoint.

use cppo_test_support as common;

use cppo_train::config::TrainConfig;
use cppo_train::trainer::Trainer;

fn failure(cfg: TrainConfig) -> String {
    let out = cfg.output_dir.clone();
    let e = format!("{:#}", Trainer::new(cfg, false).err().expect("should fail"));
    assert!(!out.join("metrics.jsonl").exists(), "nothing may be written before the checks pass");
    e
}

#[test]
fn a_missing_dataset_is_named() {
    let mut cfg = common::tiny_config("no-data", &[]);
    cfg.data.train = "/nonexistent/train.jsonl".into();
    cfg.data.prompt_field = Some("q".into());
    cfg.data.answer_field = Some("a".into());
    cfg.data.task = Some(cppo_core::Task::Gsm8k);
    let e = failure(cfg);
    assert!(e.contains("data.train") && e.contains("/nonexistent/train.jsonl"), "{e}");
    let mut cfg = common::tiny_config("bad-name", &[]);
    cfg.data.train = "gsm9k:train".into();
    let e = failure(cfg);
    assert!(e.contains("gsm9k"), "{e}");
}

#[test]
fn a_model_that_does_not_load_is_named() {
    let mut cfg = common::tiny_config("no-model", &[]);
    cfg.model.path = "/nonexistent/model".into();
    let e = failure(cfg);
    assert!(e.contains("model.path") && e.contains("/nonexistent/model"), "{e}");
    let dir = common::out_dir("broken-model");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), "{ not json").unwrap();
    let mut cfg = common::tiny_config("broken-model-run", &[]);
    cfg.model.path = dir.display().to_string();
    let e = failure(cfg);
    assert!(e.contains("config.json"), "{e}");
}

#[test]
fn a_group_of_one_is_refused_with_the_key() {
    let text = format!(
        "output_dir = \"/tmp/x\"\n[model]\npath = \"{}\"\n[data]\ntrain = \"arith:train\"\n[rollout]\nnum_generations = 1\n",
        common::tiny_model_dir().display()
    );
    let e = format!("{:#}", TrainConfig::from_toml(&text, &[]).unwrap_err());
    assert!(e.contains("rollout.num_generations") && e.contains("G >= 2"), "{e}");
}

#[test]
fn a_prompt_over_the_limit_names_the_problem_and_the_key() {
    let cfg = common::tiny_config("long-prompt", &["data.max_prompt_tokens=5"]);
    let e = failure(cfg);
    assert!(e.contains("data.max_prompt_tokens = 5") && e.contains("arith"), "{e}");
}

#[test]
fn a_nan_loss_stops_the_step_and_leaves_the_weights() {
    // An absurd learning rate overflows the weights in one step; the next step's loss is not finite.
    let cfg = common::tiny_config("nan", &["optim.lr=1e38", "optim.max_grad_norm=0"]);
    let out = cfg.output_dir.clone();
    let mut t = Trainer::new(cfg, false).unwrap();
    let weights = |t: &mut Trainer| -> Vec<f32> {
        t.trained_policy().unwrap().to_weights().unwrap().tensors.values().flat_map(|x| x.flatten_all().unwrap().to_vec1::<f32>().unwrap()).collect()
    };
    let mut failure = None;
    let mut before = weights(&mut t);
    for _ in 0..3 {
        before = weights(&mut t);
        if let Err(e) = t.train_step(|_| {}) {
            failure = Some(e);
            break;
        }
    }
    let e = format!("{:#}", failure.expect("a non-finite loss must stop a step"));
    assert!(e.contains("loss is") || e.contains("gradient norm is"), "{e}");
    let after = weights(&mut t);
    assert_eq!(before.len(), after.len());
    assert!(before.iter().zip(&after).all(|(a, b)| a.to_bits() == b.to_bits()));
    assert!(!out.join("checkpoints").exists());
}
