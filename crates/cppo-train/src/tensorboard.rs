//! TensorBoard event files beside `metrics.jsonl` (`train.tensorboard = true`), so a run can be watched
//! live with `tensorboard --logdir OUT/tensorboard`.
//!
//! Written here rather than with a crate: the Rust crates that write event files (`tensorboard-rs`,
//! `syntaxdot-summary`, `tfrecord`) are unmaintained since 2022 or pull in image and protobuf-codegen
//! stacks. An event file is TFRecord framing (length, masked CRC-32C of the length, the bytes, masked
//! CRC-32C of the bytes) around `tensorflow.Event` protobuf messages; the messages are encoded by
//! `prost` (only the fields used are declared) and the checksums by `crc32c`, so what is ours is the
//! framing alone. Each record goes out in one write and is flushed, so TensorBoard reading the file live
//! never sees half a record from us.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use prost::Message;

/// `tensorflow.Event` (tensorflow/core/util/event.proto), the fields cppo writes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    #[prost(int64, tag = "2")]
    pub step: i64,
    #[prost(oneof = "EventKind", tags = "3, 5, 7")]
    pub what: Option<EventKind>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum EventKind {
    /// The first event of every file: `brain.Event:2`.
    #[prost(string, tag = "3")]
    FileVersion(String),
    #[prost(message, tag = "5")]
    Summary(Summary),
    #[prost(message, tag = "7")]
    SessionLog(SessionLog),
}

/// `tensorflow.Summary`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Summary {
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<SummaryValue>,
}

/// `tensorflow.Summary.Value` with a scalar (`simple_value`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SummaryValue {
    #[prost(string, tag = "1")]
    pub tag: String,
    #[prost(float, optional, tag = "2")]
    pub simple_value: Option<f32>,
}

/// `tensorflow.SessionLog`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SessionLog {
    #[prost(int32, tag = "1")]
    pub status: i32,
}

/// `SessionLog.START`: TensorBoard drops the events of earlier files at or after this event's step, as
/// a resumed run rewrites them.
pub const SESSION_START: i32 = 1;
pub const FILE_VERSION: &str = "brain.Event:2";

/// TFRecord's checksum of `bytes`: CRC-32C, rotated and offset ("masked") so that a CRC of CRCs is not
/// itself a CRC.
pub fn masked_crc32c(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// One TFRecord: length, its checksum, the data, its checksum.
pub fn tfrecord(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
    out
}

pub struct EventWriter {
    file: File,
    path: PathBuf,
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

impl EventWriter {
    /// A new event file in `dir` (created when missing), named as TensorBoard expects
    /// (`events.out.tfevents.<seconds>.<host>`, plus the process id and a counter so two runs never
    /// share one).
    pub fn create(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let host = std::fs::read_to_string("/etc/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty() && !h.contains('/'))
            .unwrap_or_else(|| "cppo".to_owned());
        // TensorBoard reads a folder's files in name order: seconds first, then a counter, so a run
        // resumed within the same second and process still sorts after the file it continues.
        static CREATED: AtomicUsize = AtomicUsize::new(0);
        let n = CREATED.fetch_add(1, Ordering::SeqCst);
        let secs = now() as u64;
        let path = dir.join(format!("events.out.tfevents.{secs:010}.{host}.{}.{n:04}", std::process::id()));
        let file = File::options()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut writer = EventWriter { file, path };
        writer.write(&Event { wall_time: now(), step: 0, what: Some(EventKind::FileVersion(FILE_VERSION.to_owned())) })?;
        Ok(writer)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write(&mut self, event: &Event) -> Result<()> {
        let record = tfrecord(&event.encode_to_vec());
        self.file.write_all(&record).with_context(|| format!("cannot write {}", self.path.display()))?;
        self.file.flush()?;
        Ok(())
    }

    /// One event holding every scalar of a step.
    pub fn scalars(&mut self, step: u64, values: &[(String, f64)]) -> Result<()> {
        let value = values
            .iter()
            .filter(|(_, v)| v.is_finite())
            .map(|(tag, v)| SummaryValue { tag: tag.clone(), simple_value: Some(*v as f32) })
            .collect();
        self.write(&Event { wall_time: now(), step: step as i64, what: Some(EventKind::Summary(Summary { value })) })
    }

    /// Marks a resumed run: what earlier files hold from `step` on is superseded by what follows.
    pub fn restart_at(&mut self, step: u64) -> Result<()> {
        self.write(&Event { wall_time: now(), step: step as i64, what: Some(EventKind::SessionLog(SessionLog { status: SESSION_START })) })
    }
}

/// Every number of a metrics record as a scalar tagged `<prefix>/<key>` (nested objects joined with
/// `/`: `train/time/generation`, `train/rewards/accuracy`); the step itself and non-numbers are left out.
pub fn scalars_of(prefix: &str, record: &serde_json::Value) -> Vec<(String, f64)> {
    fn walk(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, f64)>) {
        match value {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    walk(&format!("{prefix}/{k}"), v, out);
                }
            }
            serde_json::Value::Number(n) => {
                if let Some(f) = n.as_f64() {
                    out.push((prefix.to_owned(), f));
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let serde_json::Value::Object(map) = record {
        for (k, v) in map.iter().filter(|(k, _)| k.as_str() != "step") {
            walk(&format!("{prefix}/{k}"), v, &mut out);
        }
    }
    out
}
