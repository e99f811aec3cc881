//! `train.tensorboard = true`: every metrics and evaluation line also lands in `OUT/tensorboard/` as
//! TensorBoard scalars. The first tests read the event files back record by record (framing, checksums,
//! messages); the ignored one has TensorBoard's own reader (the `tensorboard` Python package) read them:
//!
//! ```sh
//! CPPO_TENSORBOARD_PYTHON=/path/to/python cargo test -p cppo-train --test tensorboard -- --ignored
//! ```
//!
//! (`CPPO_TENSORBOARD_PYTHON` unset: `python3`; a Python without `tensorboard` fails the test with the
//! import error, it never passes.)

use cppo_test_support as common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::tiny_config;
use cppo_train::run::{run, RunOptions};
use cppo_train::metrics::{JsonlLog, StepMetrics};
use cppo_train::tensorboard::{masked_crc32c, scalars_of, tfrecord, Event, EventKind, FILE_VERSION, SESSION_START};
use prost::Message;

#[test]
fn masked_crc_is_tfrecords() {
    // CRC-32C's check value (RFC 3720) and TFRecord's mask: rotate right by 15, add 0xa282ead8.
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    assert_eq!(masked_crc32c(b"123456789"), 0xE306_9283u32.rotate_right(15).wrapping_add(0xa282_ead8));
    let record = tfrecord(b"abc");
    assert_eq!(record.len(), 8 + 4 + 3 + 4);
    assert_eq!(&record[..8], &3u64.to_le_bytes());
    assert_eq!(&record[12..15], b"abc");
}

/// The events of one file, checking each record's framing and checksums.
fn read_events(path: &Path) -> Vec<Event> {
    let bytes = std::fs::read(path).unwrap();
    let mut events = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len_bytes = &bytes[at..at + 8];
        let len = u64::from_le_bytes(len_bytes.try_into().unwrap()) as usize;
        let len_crc = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap());
        assert_eq!(len_crc, masked_crc32c(len_bytes), "{}: length checksum at byte {at}", path.display());
        let data = &bytes[at + 12..at + 12 + len];
        let data_crc = u32::from_le_bytes(bytes[at + 12 + len..at + 16 + len].try_into().unwrap());
        assert_eq!(data_crc, masked_crc32c(data), "{}: data checksum at byte {at}", path.display());
        events.push(Event::decode(data).unwrap());
        at += 16 + len;
    }
    events
}

fn event_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("events.out.tfevents."))
        .collect();
    files.sort();
    files
}

/// tag -> [(step, value)] from the summaries of the events.
fn scalars(events: &[Event]) -> BTreeMap<String, Vec<(i64, f32)>> {
    let mut out: BTreeMap<String, Vec<(i64, f32)>> = BTreeMap::new();
    for e in events {
        if let Some(EventKind::Summary(s)) = &e.what {
            for v in &s.value {
                out.entry(v.tag.clone()).or_default().push((e.step, v.simple_value.expect("a scalar")));
            }
        }
    }
    out
}

fn train_with_tensorboard(name: &str) -> PathBuf {
    let cfg = tiny_config(name, &["train.tensorboard=true", "train.eval_every=1"]);
    let out = cfg.output_dir.clone();
    run(cfg, &RunOptions { progress: false, ..RunOptions::default() }).unwrap();
    out
}

#[test]
fn every_metrics_line_is_in_the_event_file() {
    let out = train_with_tensorboard("tb-events");
    let files = event_files(&out.join("tensorboard"));
    assert_eq!(files.len(), 1, "{files:?}");
    let events = read_events(&files[0]);
    assert_eq!(events[0].what, Some(EventKind::FileVersion(FILE_VERSION.into())));
    let got = scalars(&events);
    let metrics: Vec<StepMetrics> = JsonlLog::read(&out.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.len(), 2);
    for m in &metrics {
        for (tag, value) in scalars_of("train", &serde_json::to_value(m).unwrap()) {
            let series = got.get(&tag).unwrap_or_else(|| panic!("no {tag} in {:?}", got.keys()));
            assert!(series.contains(&(m.step as i64, value as f32)), "{tag} at step {}: {series:?}", m.step);
        }
    }
    for tag in ["train/reward_mean", "train/loss", "train/kl", "train/learning_rate", "train/time/generation", "train/rewards/accuracy", "eval/accuracy"] {
        assert!(got.contains_key(tag), "{tag} missing: {:?}", got.keys());
    }
    let evals: Vec<serde_json::Value> = JsonlLog::read(&out.join("eval.jsonl")).unwrap();
    let steps: Vec<i64> = got["eval/accuracy"].iter().map(|(s, _)| *s).collect();
    assert_eq!(steps, evals.iter().map(|e| e["step"].as_i64().unwrap()).collect::<Vec<_>>());
}

#[test]
fn a_resumed_run_marks_where_it_restarts() {
    let cfg = tiny_config("tb-resume", &["train.tensorboard=true", "train.save_every=1"]);
    let out = cfg.output_dir.clone();
    run(cfg, &RunOptions { progress: false, ..RunOptions::default() }).unwrap();
    let mut more = cppo_train::run::resume_config(&out, &["train.steps=3".into()]).unwrap();
    more.train.steps = 3;
    run(more, &RunOptions { progress: false, resume: true, ..RunOptions::default() }).unwrap();
    let files = event_files(&out.join("tensorboard"));
    assert_eq!(files.len(), 2, "{files:?}");
    let second = read_events(&files[1]);
    let restart = second.iter().find_map(|e| match &e.what {
        Some(EventKind::SessionLog(l)) => Some((l.status, e.step)),
        _ => None,
    });
    assert_eq!(restart, Some((SESSION_START, 3)), "the resumed file starts at step 3");
    assert_eq!(scalars(&second)["train/loss"].iter().map(|(s, _)| *s).collect::<Vec<_>>(), [3]);
}

fn python() -> String {
    let py = std::env::var("CPPO_TENSORBOARD_PYTHON").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".into());
    match Command::new(&py).args(["-c", "import tensorboard"]).output() {
        Ok(o) if o.status.success() => py,
        Ok(o) => panic!("{py} cannot import tensorboard (set CPPO_TENSORBOARD_PYTHON):\n{}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => panic!("cannot run {py} (set CPPO_TENSORBOARD_PYTHON): {e}"),
    }
}

/// TensorBoard's reader: every scalar it finds (after its own purge of a resumed run's superseded
/// steps), as JSON `{tag: [[step, value], ...]}`.
const READ_SCALARS: &str = r#"
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
acc.Reload()
print(json.dumps({t: [[e.step, e.value] for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}))
"#;

#[test]
#[ignore = "needs Python with the tensorboard package: CPPO_TENSORBOARD_PYTHON=/path/to/python cargo test -p cppo-train --test tensorboard -- --ignored"]
fn tensorboard_reads_the_event_files() {
    let python = python();
    let cfg = tiny_config("tb-python", &["train.tensorboard=true", "train.eval_every=1", "train.save_every=1"]);
    let out = cfg.output_dir.clone();
    run(cfg, &RunOptions { progress: false, ..RunOptions::default() }).unwrap();
    let mut more = cppo_train::run::resume_config(&out, &["train.steps=3".into()]).unwrap();
    more.train.steps = 3;
    run(more, &RunOptions { progress: false, resume: true, ..RunOptions::default() }).unwrap();

    let result = Command::new(&python).args(["-c", READ_SCALARS]).arg(out.join("tensorboard")).output().unwrap();
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    let read: BTreeMap<String, Vec<(i64, f64)>> = serde_json::from_slice(&result.stdout).unwrap();
    let metrics: Vec<StepMetrics> = JsonlLog::read(&out.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.iter().map(|m| m.step).collect::<Vec<_>>(), [1, 2, 3]);
    for m in &metrics {
        for (tag, value) in scalars_of("train", &serde_json::to_value(m).unwrap()) {
            let series = read.get(&tag).unwrap_or_else(|| panic!("TensorBoard has no {tag}: {:?}", read.keys()));
            // TensorBoard holds f32 values; serde_json's parse of their decimal text may be off by an f64
            // ulp, which the f32 rounding removes.
            let at: Vec<f32> = series.iter().filter(|(s, _)| *s == m.step as i64).map(|(_, v)| *v as f32).collect();
            assert_eq!(at, [value as f32], "{tag} at step {}", m.step);
        }
    }
    assert_eq!(read["train/loss"].iter().map(|(s, _)| *s).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(read.contains_key("eval/accuracy"), "{:?}", read.keys());
}
