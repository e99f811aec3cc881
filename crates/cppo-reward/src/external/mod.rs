//! Users' reward functions, run out of process: Python functions written for TRL or verl (through a shim
//! that ships inside this crate and needs only Python's standard library), or any program that speaks
//! the same JSON-lines protocol (`[[reward.command]]`). One long-lived worker per run serves every
//! Python function; each command is its own worker. A batch of completions is one request per function.
//!
//! The protocol, for every worker:
//! - the worker's first line: `{"ready": true}`, or `{"error": "...", "function": "name"}` when it
//!   cannot serve (then it may exit);
//! - then, per request line `{"function", "step", "prompts", "completions", "completion_ids",
//!   "columns"}`, one reply line: `{"rewards": [number or null, ...]}` (one per completion, null for
//!   "not applicable") or `{"error": "...", "traceback": "..."}`.
//!
//! Any fault (an error reply, a wrong length, a value that is not a finite number, no reply within the
//! time limit, a worker that dies) is an [`ExternalError`] naming the function, its file and the fault.

mod protocol;
mod worker;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cppo_core::Problem;
use serde::{Deserialize, Serialize};

pub use protocol::{batch_request, read_rewards};
use worker::Worker;

/// The Python shim: `python3 -c SHIM '<json list of functions>'`.
pub const SHIM: &str = include_str!("shim.py");

/// The environment variable naming the Python to run the shim with, when `reward.python` is unset.
pub const PYTHON_ENV: &str = "CPPO_PYTHON";

/// How a Python function is called.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Style {
    /// TRL's: once per batch, `f(prompts=, completions=, completion_ids=, **columns)`, a list back.
    #[default]
    Trl,
    /// verl's: once per completion, `f(data_source=, solution_str=, ground_truth=, extra_info=)`, a
    /// number or a dict with a `score` back.
    Verl,
}

/// `[[reward.function]]`: a Python function in a file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionSpec {
    /// The `.py` file (relative paths from the current directory, as dataset paths are).
    pub path: PathBuf,
    /// The function's name in the file; also its name in metrics.
    pub name: String,
    #[serde(default = "one")]
    pub weight: f64,
    #[serde(default)]
    pub style: Style,
}

/// `[[reward.command]]`: a worker program in any language.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// Its name in requests (`"function"`), metrics and errors.
    pub name: String,
    /// The program and its arguments.
    pub argv: Vec<String>,
    #[serde(default = "one")]
    pub weight: f64,
}

fn one() -> f64 {
    1.0
}

/// How workers run.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// The Python that runs the shim.
    pub python: String,
    /// The longest wait for any one reply (the start-up greeting included).
    pub timeout: Duration,
}

impl WorkerOptions {
    /// `python` when given, else `CPPO_PYTHON`, else `python3`.
    pub fn resolve_python(python: Option<&str>) -> String {
        python
            .map(str::to_owned)
            .or_else(|| std::env::var(PYTHON_ENV).ok().filter(|v| !v.is_empty()))
            .unwrap_or_else(|| "python3".into())
    }
}

/// One completion to score, with what the functions may ask about it.
#[derive(Clone, Copy, Debug)]
pub struct Sample<'a> {
    pub problem: &'a Problem,
    pub completion: &'a str,
    pub completion_ids: &'a [u32],
}

/// A reward function or worker that failed: who (function, file) and what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("{who}: {what}")]
pub struct ExternalError {
    pub who: String,
    pub what: String,
}

struct Part {
    name: String,
    weight: f64,
    /// `reward function `f` (file.py)` or `reward command `c` (argv)`, for errors.
    who: String,
    worker: usize,
}

/// The run's external reward parts and their workers.
pub struct ExternalRewards {
    parts: Vec<Part>,
    workers: Vec<Mutex<Worker>>,
    /// Seconds the workers took to start (reported with the first step's reward time).
    pub startup_seconds: f64,
}

impl ExternalRewards {
    /// Starts the workers (one for all Python functions, one per command) and waits for each to say it
    /// is ready: a file that does not load, a missing function or a program that does not start fails
    /// here, before any training.
    pub fn start(functions: &[FunctionSpec], commands: &[CommandSpec], options: &WorkerOptions) -> Result<Self, ExternalError> {
        let t = Instant::now();
        let mut parts = Vec::new();
        let mut workers = Vec::new();
        if !functions.is_empty() {
            let specs: Vec<serde_json::Value> = functions
                .iter()
                .map(|f| serde_json::json!({ "name": f.name, "path": f.path, "function": f.name, "style": f.style }))
                .collect();
            let argv = vec![options.python.clone(), "-c".into(), SHIM.into(), serde_json::Value::from(specs).to_string()];
            let label = functions.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(",");
            let whos: Vec<String> = functions.iter().map(|f| format!("reward function `{}` ({})", f.name, f.path.display())).collect();
            let all = format!("reward functions ({}, run by {})", whos.join(", "), options.python);
            let worker = start_worker(&label, &argv, options.timeout, &all, |name| {
                functions.iter().position(|f| f.name == name).map(|i| whos[i].clone())
            })?;
            workers.push(Mutex::new(worker));
            for (f, who) in functions.iter().zip(whos) {
                parts.push(Part { name: f.name.clone(), weight: f.weight, who, worker: 0 });
            }
        }
        for c in commands {
            let who = format!("reward command `{}` ({})", c.name, c.argv.join(" "));
            let worker = start_worker(&c.name, &c.argv, options.timeout, &who, |_| None)?;
            parts.push(Part { name: c.name.clone(), weight: c.weight, who, worker: workers.len() });
            workers.push(Mutex::new(worker));
        }
        Ok(ExternalRewards { parts, workers, startup_seconds: t.elapsed().as_secs_f64() })
    }

    /// (name, weight) of each part, in the order `score` returns them.
    pub fn parts(&self) -> impl Iterator<Item = (&str, f64)> {
        self.parts.iter().map(|p| (p.name.as_str(), p.weight))
    }

    /// Each part's rewards for `samples`: `out[part][sample]`, `None` where the function said "not
    /// applicable". One request per part.
    pub fn score(&self, step: u64, samples: &[Sample<'_>]) -> Result<Vec<Vec<Option<f64>>>, ExternalError> {
        let mut request = batch_request(step, samples);
        let mut out = Vec::with_capacity(self.parts.len());
        for part in &self.parts {
            let fault = |what: String| ExternalError { who: part.who.clone(), what };
            request["function"] = part.name.clone().into();
            let mut worker = self.workers[part.worker].lock().unwrap_or_else(|p| p.into_inner());
            let reply = worker.call(&request).map_err(|f| fault(f.to_string()))?;
            out.push(read_rewards(&reply, samples.len()).map_err(fault)?);
        }
        Ok(out)
    }
}

/// Starts one worker and checks its greeting; `who_of` names the function a start-up error is about.
fn start_worker(
    label: &str,
    argv: &[String],
    timeout: Duration,
    who: &str,
    who_of: impl Fn(&str) -> Option<String>,
) -> Result<Worker, ExternalError> {
    let fault = |who: &str, what: String| ExternalError { who: who.to_string(), what };
    let (worker, greeting) = Worker::start(label, argv, timeout).map_err(|f| fault(who, f.to_string()))?;
    if greeting.get("ready") == Some(&serde_json::Value::Bool(true)) {
        return Ok(worker);
    }
    let function = greeting.get("function").and_then(|f| f.as_str()).and_then(&who_of);
    let what = protocol::error_text(&greeting)
        .unwrap_or_else(|| format!("the worker's first line must be {{\"ready\": true}}, got {}", crate::clip(&greeting.to_string())));
    Err(fault(function.as_deref().unwrap_or(who), what))
}
