//! One reward worker process: started once per run, fed one JSON request per line on stdin, read one
//! JSON reply per line on stdout, within a time limit. Its stderr is passed through, each line prefixed
//! with the worker's name, and its last lines are kept for the error when it dies.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

/// Lines of a dead worker's stderr quoted in its error.
const STDERR_TAIL: usize = 20;

/// Why a worker gave no usable reply. The caller adds which function and file it was serving.
#[derive(Debug)]
pub enum WorkerFault {
    /// The program could not be started at all.
    Spawn(String),
    /// No reply within the time limit (the worker is stopped).
    Timeout(Duration),
    /// The worker exited (or closed its stdout) before replying.
    Died { status: String, stderr: Vec<String> },
    /// A reply that is not one JSON object on one line.
    Garbled(String),
}

impl std::fmt::Display for WorkerFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerFault::Spawn(why) => write!(f, "the worker did not start: {why}"),
            WorkerFault::Timeout(t) => write!(f, "no reply within reward.timeout_s = {} s; the worker was stopped", t.as_secs_f64()),
            WorkerFault::Died { status, stderr } if stderr.is_empty() => write!(f, "the worker died ({status}) without a reply"),
            WorkerFault::Died { status, stderr } => {
                write!(f, "the worker died ({status}) without a reply; its last stderr lines:\n{}", stderr.join("\n"))
            }
            WorkerFault::Garbled(why) => write!(f, "the worker's reply is not a JSON object on one line: {why}"),
        }
    }
}

pub struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    replies: Receiver<String>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    timeout: Duration,
}

impl Worker {
    /// Starts `argv` and waits for its first line (the `ready` greeting, or its reason for not starting).
    pub fn start(label: &str, argv: &[String], timeout: Duration) -> Result<(Self, Value), WorkerFault> {
        let (program, args) = argv.split_first().ok_or_else(|| WorkerFault::Spawn("argv is empty".into()))?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| WorkerFault::Spawn(format!("{program}: {e}")))?;
        let (stdout, stderr) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let (tail, prefix) = (stderr_tail.clone(), label.to_string());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("[{prefix}] {line}");
                let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
                if tail.len() == STDERR_TAIL {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        });
        let stdin = child.stdin.take();
        let mut worker = Worker { child, stdin, replies, stderr_tail, timeout };
        let greeting = worker.read_reply()?;
        Ok((worker, greeting))
    }

    /// Sends one request and waits for its reply.
    pub fn call(&mut self, request: &Value) -> Result<Value, WorkerFault> {
        let mut line = serde_json::to_string(request).map_err(|e| WorkerFault::Garbled(e.to_string()))?;
        line.push('\n');
        let sent = match &mut self.stdin {
            Some(stdin) => stdin.write_all(line.as_bytes()).and_then(|_| stdin.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        if sent.is_err() {
            // The worker is gone; its exit status says more than the broken pipe.
            return Err(self.died());
        }
        self.read_reply()
    }

    fn read_reply(&mut self) -> Result<Value, WorkerFault> {
        let line = match self.replies.recv_timeout(self.timeout) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                self.stop();
                return Err(WorkerFault::Timeout(self.timeout));
            }
            Err(RecvTimeoutError::Disconnected) => return Err(self.died()),
        };
        match serde_json::from_str::<Value>(&line) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(other) => Err(WorkerFault::Garbled(format!("got {}", clip(&other.to_string())))),
            Err(e) => Err(WorkerFault::Garbled(format!("{e} in {}", clip(&line)))),
        }
    }

    /// The fault of a worker that closed its stdout: its exit status and last stderr lines.
    fn died(&mut self) -> WorkerFault {
        self.stdin = None;
        let status = match self.child.wait_timeout_ish() {
            Some(s) => s.to_string(),
            None => "still running, stdout closed".into(),
        };
        // The stderr thread may still be copying the last lines.
        std::thread::sleep(Duration::from_millis(50));
        let stderr = self.stderr_tail.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect();
        WorkerFault::Died { status, stderr }
    }

    fn stop(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing stdin asks a well-behaved worker to finish; one that does not is killed.
        self.stdin = None;
        if self.child.wait_timeout_ish().is_none() {
            self.stop();
        }
    }
}

trait WaitBriefly {
    /// The exit status once the process has exited, waiting up to a second for it.
    fn wait_timeout_ish(&mut self) -> Option<std::process::ExitStatus>;
}

impl WaitBriefly for Child {
    fn wait_timeout_ish(&mut self) -> Option<std::process::ExitStatus> {
        for _ in 0..100 {
            if let Ok(Some(status)) = self.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

fn clip(s: &str) -> String {
    crate::clip(s).into_owned()
}
