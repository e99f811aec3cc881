//! The README's main command, shortened: `cppo quickstart --smoke` runs the same path a new user takes
//! (fetch, evaluate, train with CPPO, evaluate, save) and leaves every promised file.

use std::process::Command;

#[test]
fn quickstart_smoke_leaves_metrics_evals_plot_and_model() {
    let out = std::env::temp_dir().join(format!("cppo-quickstart-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let result = Command::new(env!("CARGO_BIN_EXE_cppo"))
        .args(["quickstart", "--smoke", "--out"])
        .arg(&out)
        .output()
        .expect("run cppo");
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "cppo quickstart --smoke failed:\n{stderr}");
    assert!(stderr.contains("held-out accuracy: before"), "{stderr}");
    assert!(stderr.contains(&out.display().to_string()), "the output folder is not named:\n{stderr}");
    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 2);
    for line in metrics.lines() {
        let m: serde_json::Value = serde_json::from_str(line).unwrap();
        // CPPO at G = 8, P = 0.75 with allocation: 8 questions, 64 generated, 16 kept.
        assert_eq!(m["completions_generated"], 64);
        assert_eq!(m["completions_kept"], 16);
        assert!(m["loss"].as_f64().unwrap().is_finite());
    }
    let evals = std::fs::read_to_string(out.join("eval.jsonl")).unwrap();
    assert_eq!(evals.lines().count(), 2, "an evaluation before and after training");
    let png = std::fs::read(out.join("reward.png")).unwrap();
    assert_eq!(&png[..4], b"\x89PNG");
    for f in ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"] {
        assert!(out.join("model").join(f).exists(), "model/{f} missing");
    }
    std::fs::remove_dir_all(&out).ok();
}
