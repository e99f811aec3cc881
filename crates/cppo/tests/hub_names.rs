//! The `cppo` binary given Hub names, against the fake Hub on 127.0.0.1 (HF_ENDPOINT) with a cache of
//! its own (HF_HUB_CACHE): a model id and a `hub:` dataset (parquet written here) are downloaded once,
//! then read from the cache; offline mode uses the cache and names what it lacks; a built-in set that no
//! local data folder has comes from its Hub repository.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use cppo_hub::fake_hub::FakeHub;
use cppo_hub::RepoKind;
use parquet::arrow::ArrowWriter;

use cppo_test_support as common;

fn parquet_bytes(questions: &[&str], answers: Vec<f64>) -> Vec<u8> {
    let batch = RecordBatch::try_from_iter([
        ("question", Arc::new(StringArray::from(questions.to_vec())) as ArrayRef),
        ("answer", Arc::new(Float64Array::from(answers)) as ArrayRef),
    ])
    .unwrap();
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    bytes
}

fn model_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect()
}

/// `cppo ARGS` with the Hub settings of this test and nothing inherited that could change them.
fn cppo(hub: &FakeHub, cache: &Path, offline: bool, data_dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cppo"));
    cmd.args(args)
        .env("HF_ENDPOINT", hub.endpoint())
        .env("HF_HUB_CACHE", cache.join("hub"))
        .env("HF_HOME", cache.join("home"))
        .env("CPPO_DATA_DIR", data_dir)
        .env_remove("HF_TOKEN")
        .env_remove("HUGGING_FACE_HUB_TOKEN")
        .env_remove("HF_HUB_OFFLINE");
    if offline {
        cmd.env("HF_HUB_OFFLINE", "1");
    }
    cmd.output().expect("run cppo")
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "cppo failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn hub_model_and_datasets_download_once_then_come_from_the_cache() {
    let hub = FakeHub::start();
    let files = model_files(&common::tiny_model_dir());
    let refs: Vec<(&str, Vec<u8>)> = files.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    let commit = hub.add_repo(RepoKind::Model, "test-org/tiny", &refs);
    hub.add_repo(
        RepoKind::Dataset,
        "test-org/sums",
        &[("main/test-00000-of-00001.parquet", parquet_bytes(&["What is 1 + 1?", "What is 2 + 2?", "What is 3 + 3?"], vec![2.0, 4.0, 6.0]))],
    );
    hub.add_repo(RepoKind::Dataset, "math-ai/amc23", &[("test-00000-of-00001.parquet", parquet_bytes(&["Find 7.", "Find 9."], vec![7.0, 9.0]))]);
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path();
    // A data folder without the built-in sets: they come from the Hub.
    let empty_data = cache.join("data");
    std::fs::create_dir_all(&empty_data).unwrap();
    let out_dir = cache.join("eval");
    let eval = |offline: bool, model: &str, data: &str| {
        cppo(&hub, cache, offline, &empty_data, &[
            "eval", "--model", model, "--data", data, "--prompt-field", "question", "--answer-field", "answer", "--task", "gsm8k",
            "--max-new-tokens", "3", "--template", "plain", "--out", out_dir.to_str().unwrap(),
        ])
    };

    let summary: serde_json::Value = serde_json::from_str(&ok(eval(false, "test-org/tiny", "hub:test-org/sums:main:test"))).unwrap();
    assert_eq!(summary["problems"], 3, "{summary}");
    let generations = std::fs::read_to_string(out_dir.join("generations.jsonl")).unwrap();
    assert!(generations.contains("What is 2 + 2?"), "{generations}");
    let snapshot = cache.join("hub/models--test-org--tiny/snapshots").join(&commit);
    assert!(snapshot.join("model.safetensors").is_file() && snapshot.join("tokenizer.json").is_file());
    assert!(cache.join("hub/datasets--test-org--sums/refs/main").is_file());

    // Everything is cached now: offline works and no request reaches the Hub.
    let before = hub.requests().len();
    let again: serde_json::Value = serde_json::from_str(&ok(eval(true, "test-org/tiny", "hub:test-org/sums:main:test"))).unwrap();
    assert_eq!(again["accuracy"], summary["accuracy"]);
    // Pinned to the commit: the snapshot of that commit, no ref needed.
    let pinned: serde_json::Value = serde_json::from_str(&ok(eval(false, &format!("test-org/tiny@{commit}"), "hub:test-org/sums:main:test"))).unwrap();
    assert_eq!(pinned["accuracy"], summary["accuracy"]);
    assert_eq!(hub.requests().len(), before, "a cached model or dataset reached the network");

    // Offline with a model nobody downloaded: the error names the repository and the variable.
    let failed = eval(true, "test-org/other", "hub:test-org/sums:main:test");
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("test-org/other") && stderr.contains("HF_HUB_OFFLINE"), "{stderr}");

    // A built-in set (amc23) that the data folder lacks comes from its Hub repository.
    let amc: serde_json::Value = serde_json::from_str(&ok(cppo(&hub, cache, false, &empty_data, &[
        "eval", "--model", "test-org/tiny", "--data", "amc23", "--max-new-tokens", "2", "--template", "plain", "--out", out_dir.to_str().unwrap(),
    ])))
    .unwrap();
    assert_eq!(amc["problems"], 2, "{amc}");
    assert!(std::fs::read_to_string(out_dir.join("generations.jsonl")).unwrap().contains("amc23:1"));
    assert!(hub.requests().iter().any(|r| r.path.starts_with("/api/datasets/math-ai/amc23/")));
}
