//! `compare` on a tiny random model: two arms, a two-step budget; the JSON holds what the README promises
//! and the plots are real PNGs.

// The trainer's test fixture (a tiny random model and its config), shared rather than copied.
use cppo_test_support as common;

use cppo::commands::compare::{arm_config, compare, parse_arms, table, ArmKind, Budget, CompareArgs};

#[test]
fn arms_parse_and_bad_ones_are_named() {
    let arms = parse_arms("grpo, cppo:0.75,pods:64/16").unwrap();
    assert_eq!(arms[1].kind, ArmKind::Cppo { pruning_rate: 0.75 });
    assert_eq!(arms[2].kind, ArmKind::Pods { n: 64, m: 16 });
    for bad in ["", "ppo", "cppo:x", "cppo:1.5", "pods:16", "pods:4/8", "grpo,grpo"] {
        assert!(parse_arms(bad).is_err(), "{bad} should be refused");
    }
}

#[test]
fn an_arm_carries_its_own_overrides_after_its_selection() {
    let base = common::tiny_config("compare-overrides", &["loss.beta=0.0"]);
    let arms = parse_arms("cppo:0.75,cppo:0.75@loss.rollout_correction=none@loss.beta=0.02,grpo@rollout.allocation=true").unwrap();
    assert_eq!(arms.len(), 2 + 1);
    assert_eq!(arms[1].kind, ArmKind::Cppo { pruning_rate: 0.75 });
    assert_eq!(arms[1].overrides, ["loss.rollout_correction=none", "loss.beta=0.02"]);
    let plain = arm_config(&base, &arms[0]).unwrap();
    let other = arm_config(&base, &arms[1]).unwrap();
    assert_eq!(plain.loss.beta, 0.0);
    assert_eq!(other.loss.beta, 0.02);
    assert_ne!(plain.loss.rollout_correction, other.loss.rollout_correction);
    // Everything the override does not name is the arm's own setting.
    assert_eq!(plain.rollout, other.rollout);
    // The override comes after the arm's kind, so it can even undo what the kind set.
    assert!(arm_config(&base, &arms[2]).unwrap().rollout.allocation);
    for bad in ["grpo@", "grpo@loss.beta", "cppo:0.5@loss.nonsense=1", "grpo@loss.beta=\"x\""] {
        let refused = parse_arms(bad).and_then(|arms| arm_config(&base, &arms[0]));
        assert!(refused.is_err(), "{bad} should be refused");
    }
}

#[test]
fn two_arms_two_steps_write_json_and_pngs() {
    let base = common::tiny_config("compare-base", &["loss.beta=0.0"]);
    let out = common::out_dir("compare");
    let args = CompareArgs {
        base,
        arms: parse_arms("grpo,cppo:0.75").unwrap(),
        seeds: 1,
        budget: Budget::Steps(2),
        out: out.clone(),
        evals: 1,
        progress: false,
    };
    let report = compare(&args).unwrap();
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    let arms = json["arms"].as_array().unwrap();
    assert_eq!(arms.len(), 2);
    let grpo = &arms[0]["runs"][0];
    let cppo = &arms[1]["runs"][0];
    // GRPO: 2 steps of 2 questions. CPPO (G = 4, P = 0.75, k = 1) with allocation: 8 questions per step,
    // so the same 4 questions take one step.
    assert_eq!(grpo["steps"], 2);
    assert_eq!(grpo["questions"], 4);
    assert_eq!(cppo["steps"], 1);
    assert_eq!(cppo["questions"], 8);
    assert_eq!(grpo["completions_trained"], 16);
    assert_eq!(cppo["completions_trained"], 8);
    assert_eq!(grpo["speedup_same_questions"].as_f64(), Some(1.0));
    assert!(cppo["speedup_same_questions"].as_f64().unwrap() > 0.0);
    for r in [grpo, cppo] {
        assert!(r["train_seconds"].as_f64().unwrap() > 0.0);
        assert!(r["generation_seconds"].as_f64().unwrap() <= r["train_seconds"].as_f64().unwrap());
        let curve = r["curve"].as_array().unwrap();
        assert!(curve.len() >= 2, "an evaluation before and after training: {curve:?}");
        assert_eq!(curve[0][0].as_f64(), Some(0.0));
    }
    assert!(arms[0]["summary"]["final_accuracy"]["mean"].is_number());
    for png in ["accuracy_vs_time.png", "time_per_phase.png"] {
        let bytes = std::fs::read(out.join(png)).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{png}");
        assert!(bytes.len() > 5000, "{png} looks empty");
    }
    let t = table(&report);
    assert!(t.contains("| grpo |") && t.contains("| cppo:0.75 |"), "{t}");
}
