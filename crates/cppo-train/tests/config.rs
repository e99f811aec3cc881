//! The training config: presets parse, overrides apply, and bad input names its key.

use cppo_core::select::Strategy;
use cppo_train::config::TrainConfig;

const MINIMAL: &str = r#"
output_dir = "runs/x"
[model]
path = "smollm2-135m-instruct"
[data]
train = "gsm8k:train"
"#;

fn err(text: &str, overrides: &[&str]) -> String {
    let ov: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    format!("{:#}", TrainConfig::from_toml(text, &ov).unwrap_err())
}

#[test]
fn minimal_config_gets_the_documented_defaults() {
    let c = TrainConfig::from_toml(MINIMAL, &[]).unwrap();
    assert_eq!(c.rollout.num_generations, 16);
    assert_eq!(c.loss.beta, 0.04);
    assert_eq!(c.rollout.selection.strategy, Strategy::All);
    assert_eq!(c.reward.weights.get("accuracy"), Some(&1.0));
}

#[test]
fn overrides_set_leaves_and_tables() {
    let c = TrainConfig::from_toml(
        MINIMAL,
        &[
            "rollout.num_generations=8".into(),
            "rollout.strategy={ kind = \"cppo\", pruning_rate = 0.75 }".into(),
            "data.eval=gsm8k:test".into(),
            "loss.dual_clip=3.0".into(),
        ],
    )
    .unwrap();
    assert_eq!(c.rollout.num_generations, 8);
    assert_eq!(c.rollout.selection.strategy, Strategy::Cppo { pruning_rate: 0.75 });
    assert_eq!(c.data.eval.as_deref(), Some("gsm8k:test"));
    assert_eq!(c.loss.dual_clip, Some(3.0));
}

#[test]
fn unknown_keys_are_named() {
    // The whole path of the key, not only its leaf; and its line when it is in the file.
    let e = err(MINIMAL, &["rollout.num_generation=8"]);
    assert!(e.contains("rollout.num_generation"), "{e}");
    let e = err(MINIMAL, &["loss.bta=0.1"]);
    assert!(e.contains("loss.bta"), "{e}");
    let e = err(&format!("{MINIMAL}\n[optim]\nlearning_rate = 1e-6\n"), &[]);
    assert!(e.contains("optim.learning_rate") && e.contains("(line 9)"), "{e}");
    let e = err(MINIMAL, &["generation.temperature=\"hot\""]);
    assert!(e.contains("generation.temperature"), "{e}");
}

#[test]
fn bad_values_are_named() {
    assert!(err(MINIMAL, &["rollout.num_generations=1"]).contains("rollout.num_generations"));
    assert!(err(MINIMAL, &["loss.dual_clip=0.5"]).contains("loss.dual_clip"));
    assert!(err(MINIMAL, &["rollout.strategy={ kind = \"cppo\", pruning_rate = 1.0 }"]).contains("rollout"));
    assert!(err(MINIMAL, &["rollout.strategy={ kind = \"pods-max-variance\", m = 32 }"]).contains("m = 32"));
    assert!(err(MINIMAL, &["optim.lr=-1"]).contains("optim.lr"));
    assert!(err(MINIMAL, &["eval.pass_k=[4]"]).contains("eval.pass_k"));
    assert!(err(MINIMAL, &["nokey"]).contains("key=value"));
}

#[test]
fn allocation_plans_more_questions_for_cppo() {
    let c = TrainConfig::from_toml(
        MINIMAL,
        &[
            "rollout.questions_per_step=2".into(),
            "rollout.allocation=true".into(),
            "rollout.strategy={ kind = \"cppo\", pruning_rate = 0.875 }".into(),
        ],
    )
    .unwrap();
    let plan = c.plan().unwrap();
    // Capacity 2 * 16 = 32 kept completions, k = 2 per question: 16 questions.
    assert_eq!(plan.questions_per_step, 16);
    assert_eq!(plan.completions_kept, 32);
    assert_eq!(plan.group_size, 16);
}

#[test]
fn every_shipped_preset_parses() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            TrainConfig::load(&path, &[]).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            n += 1;
        }
    }
    assert!(n >= 10, "expected the GSM8K and MATH presets, found {n}");
}

#[test]
fn cuda_needs_a_cuda_build_and_bad_devices_are_named() {
    for device in ["cuda", "cuda:1"] {
        let r = TrainConfig::from_toml(MINIMAL, &[format!("model.device=\"{device}\"")]);
        if cfg!(feature = "cuda") {
            assert!(r.is_ok(), "{device}: {:?}", r.err());
        } else {
            let e = format!("{:#}", r.unwrap_err());
            assert!(e.contains("model.device") && e.contains("built without CUDA") && e.contains("--features cuda"), "{e}");
        }
    }
    for bad in ["tpu", "cuda:x", "cuda:"] {
        let e = err(MINIMAL, &[&format!("model.device=\"{bad}\"")]);
        assert!(e.contains("model.device") && e.contains(bad), "{e}");
    }
    let e = err(MINIMAL, &["model.device=\"tpu\""]);
    assert!(e.contains("\"cpu\""), "{e}");
    assert!(TrainConfig::from_toml(MINIMAL, &["model.device=\"cpu\"".into()]).is_ok());
}

/// TRL's options under TRL's names, and DAPO's overlong punishment, as the README's config reference
/// gives them; the DAPO presets use the punishment and no longer mask truncated completions.
#[test]
fn trl_options_and_the_overlong_penalty_parse() {
    let c = TrainConfig::from_toml(
        MINIMAL,
        &[
            "rollout.estimator={ kind = \"grpo\", scale_rewards = \"batch\" }".to_string(),
            "loss.use_bias_correction_kl=true".to_string(),
            "overlong_penalty={ max_length = 1024, cache_length = 205 }".to_string(),
        ],
    )
    .unwrap();
    assert!(matches!(c.rollout.selection.estimator, cppo_core::Estimator::Grpo { scale_rewards: cppo_core::ScaleRewards::Batch, .. }));
    assert!(c.loss.use_bias_correction_kl);
    assert_eq!(c.overlong_penalty.map(|p| (p.max_length, p.cache_length)), Some((1024, 205)));
    let d = TrainConfig::from_toml(MINIMAL, &[]).unwrap();
    assert!(!d.loss.use_bias_correction_kl && d.overlong_penalty.is_none());
    assert!(err(MINIMAL, &["rollout.estimator={ kind = \"grpo\", scale_rewards = \"global\" }"]).contains("rollout"));
    for preset in ["gsm8k-dapo", "math-dapo"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../configs/{preset}.toml"));
        let c = TrainConfig::load(&path, &[]).unwrap();
        assert!(c.overlong_penalty.is_some() && !c.loss.mask_truncated, "{preset}");
        assert_eq!(c.overlong_penalty.unwrap().max_length, c.generation.max_new_tokens, "{preset}: L_max is the generation limit");
    }
}

/// The shipped example configs parse and pass every check (the Countdown one names its reward function
/// and takes accuracy from it; its rows are generated by the user, so only the config is read here).
#[test]
fn the_example_configs_load() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let countdown = TrainConfig::load(&root.join("examples/countdown/config.toml"), &[]).unwrap();
    assert_eq!(countdown.reward.accuracy_from.as_deref(), Some("countdown_equation"));
    assert_eq!(countdown.reward.functions.len(), 1);
    assert_eq!(countdown.rollout.num_generations, 16);
    TrainConfig::load(&root.join("configs/quickstart.toml"), &[]).unwrap();
}
