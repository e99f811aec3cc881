//! `cppo grade`: grade JSON lines of `{"response", "answer"}` offline.
//!
//! Every input line yields exactly one output line, in order, so outputs zip with inputs:
//! `{"correct": bool, "extracted": string|null, "reward": number}`, or `{"error": "line N: ..."}` for a
//! line that is not a JSON object with a string `response` and a string (or number) `answer`. Empty
//! lines are errors too (`line N: empty line`), for the same reason. The run goes on after bad lines;
//! only I/O errors stop it.
//!
//! With [`Options::explain`] each verdict line also has `"explain"`: why the pair was judged as it was.
//! MATH: where the answer was found, and for each comparison the normalised forms, the shapes they were
//! read as and the verdict ([`crate::math::explain`]); GSM8K: the number read, its source and the gold.

use std::fmt;
use std::io::{BufRead, Write};

use cppo_core::Task;
use serde::Serialize;
use serde_json::json;

use crate::grade_line::{self, Field, LineError};
use crate::Score;

/// Counts of one grading run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GradeSummary {
    pub lines: usize,
    pub correct: usize,
    pub errors: usize,
}

impl fmt::Display for GradeSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = if self.lines == 0 { 0.0 } else { 100.0 * self.correct as f64 / self.lines as f64 };
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        write!(f, "graded {}: {} correct ({pct:.1}%), {}", plural(self.lines, "line"), self.correct, plural(self.errors, "error"))
    }
}

/// What each verdict line holds beyond `correct`, `extracted` and `reward`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Add `"explain"`: why the pair was judged equal or not (see the module docs).
    pub explain: bool,
}

/// Reads `{"response", "answer"}` lines from `input`, writes one verdict line per input line to `out`.
pub fn run(task: Task, input: &mut dyn BufRead, out: &mut dyn Write) -> std::io::Result<GradeSummary> {
    run_with(task, Options::default(), input, out)
}

/// [`run`] with [`Options`].
pub fn run_with(task: Task, options: Options, input: &mut dyn BufRead, out: &mut dyn Write) -> std::io::Result<GradeSummary> {
    let mut summary = GradeSummary::default();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if input.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        summary.lines += 1;
        let n = summary.lines;
        match grade_line(task, &buf, options.explain) {
            Ok((score, explanation)) => {
                if score.correct == Some(true) {
                    summary.correct += 1;
                }
                let verdict = VerdictLine { correct: score.correct == Some(true), explain: explanation, extracted: score.extracted, reward: score.value };
                serde_json::to_writer(&mut *out, &verdict)?;
            }
            Err(why) => {
                summary.errors += 1;
                serde_json::to_writer(&mut *out, &json!({ "error": format!("line {n}: {why}") }))?;
            }
        }
        writeln!(out)?;
    }
    Ok(summary)
}

/// One output line; keys in alphabetical order, as a JSON map writes them.
#[derive(Serialize)]
struct VerdictLine {
    correct: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    explain: Option<String>,
    extracted: Option<String>,
    reward: f64,
}

/// The verdict on one input line, and its explanation when asked for.
fn grade_line(task: Task, raw: &[u8], explain: bool) -> Result<(Score, Option<String>), String> {
    let text = std::str::from_utf8(raw).map_err(|e| format!("not UTF-8 ({e})"))?;
    let text = text.trim_end_matches(['\n', '\r']);
    if text.trim().is_empty() {
        return Err("empty line".into());
    }
    let fields = grade_line::read(text).map_err(|e| match e {
        LineError::Invalid(why) => format!("invalid JSON: {why}"),
        LineError::NotAnObject => "expected a JSON object".to_string(),
    })?;
    let response = match &fields.response {
        Some(Field::Text(s)) => s.as_ref(),
        Some(_) => return Err("field `response` must be a string".into()),
        None => return Err("missing field `response`".into()),
    };
    let answer = match &fields.answer {
        Some(Field::Text(s)) => s.as_ref(),
        Some(Field::Number(x)) => x.as_str(),
        Some(Field::Other) => return Err("field `answer` must be a string or a number".into()),
        None => return Err("missing field `answer`".into()),
    };
    let score = match task {
        Task::Gsm8k => crate::gsm8k::grade(response, answer),
        Task::Math => crate::math::grade(response, answer),
    };
    let explanation = explain.then(|| match task {
        Task::Gsm8k => score.reason.clone(),
        Task::Math => crate::math::explain(response, answer),
    });
    Ok((score, explanation))
}
