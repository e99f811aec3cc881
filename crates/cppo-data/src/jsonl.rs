//! JSON-lines files of problems, with the field names given by the caller, so users can train on their own
//! files and the built-in sets share one strict reader.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use cppo_core::{ChatMessage, Problem, Task};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{DataError, Result};

/// Which fields of each JSON object hold the problem's parts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonlSpec {
    /// The field holding the question: a non-empty string, or a list of `{"role", "content"}` chat
    /// messages (TRL's conversational format, verl's `prompt`).
    pub prompt_field: String,
    /// The field holding the grader's reference (a non-empty string, or a number, which is written out);
    /// a dotted path reaches into an object (`reward_model.ground_truth`). None: the gold is verl's
    /// `reward_model.ground_truth` when the row has one as a string or number, else empty (a gold answer
    /// is only needed by the built-in graders).
    #[serde(default)]
    pub answer_field: Option<String>,
    /// The field holding an id (a string or a number); without it ids are `<path>:<line>`.
    #[serde(default)]
    pub id_field: Option<String>,
    /// How answers are graded. A row's `data_source` naming a built-in grader (verl's names:
    /// `openai/gsm8k`, `lighteval/MATH`, ...) wins; without either the MATH grader is used (it reads
    /// plain numbers too).
    #[serde(default)]
    pub task: Option<Task>,
}

impl JsonlSpec {
    pub fn new(
        prompt_field: impl Into<String>,
        answer_field: impl Into<String>,
        task: Task,
    ) -> Self {
        JsonlSpec {
            prompt_field: prompt_field.into(),
            answer_field: Some(answer_field.into()),
            id_field: None,
            task: Some(task),
        }
    }

    /// TRL's standard and conversational formats and verl's parquet layout as they are: the prompt in
    /// `prompt`, the gold (if any) in `reward_model.ground_truth`, the grader from `data_source`.
    pub fn prompt_only(prompt_field: impl Into<String>) -> Self {
        JsonlSpec { prompt_field: prompt_field.into(), answer_field: None, id_field: None, task: None }
    }

    pub fn with_id_field(mut self, id_field: impl Into<String>) -> Self {
        self.id_field = Some(id_field.into());
        self
    }
}

/// verl's field for the gold answer, read when no answer field is named.
pub const VERL_GROUND_TRUTH: &str = "reward_model.ground_truth";

/// The built-in grader a verl `data_source` names (as verl's `default_compute_score` dispatches them),
/// if any: GSM8K's numbers for `openai/gsm8k`, MATH's LaTeX for the MATH sets, DAPO's math and AIME.
pub fn task_of_data_source(source: &str) -> Option<Task> {
    let s = source.trim();
    let math = ["lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500", "math_dapo", "math", "math_dapo_reasoning"];
    if s == "openai/gsm8k" || s == "gsm8k" {
        Some(Task::Gsm8k)
    } else if math.contains(&s) || s.starts_with("aime") || s.starts_with("numina_") {
        Some(Task::Math)
    } else {
        None
    }
}

/// Loads every non-blank line of `path` as a problem. Ids come from `spec.id_field`, else `<path>:<line>`.
pub fn load_jsonl(path: impl AsRef<Path>, spec: &JsonlSpec) -> Result<Vec<Problem>> {
    let path = path.as_ref();
    let label = path.display().to_string();
    read_jsonl(
        path,
        spec,
        &IdScheme {
            prefix: "",
            line_label: &label,
            offset: 0,
        },
    )
}

/// How ids are formed, so the built-in sets can give ids that say which set a problem came from.
pub(crate) struct IdScheme<'a> {
    /// Prepended to the value of the id field.
    pub prefix: &'a str,
    /// Without an id field the id is `<line_label>:<line>`.
    pub line_label: &'a str,
    /// Added to the line (or row) number in ids, so the shards of one split number their rows on
    /// from the previous shard's (errors still name the file's own line).
    pub offset: usize,
}

pub(crate) fn read_jsonl(
    path: &Path,
    spec: &JsonlSpec,
    ids: &IdScheme<'_>,
) -> Result<Vec<Problem>> {
    let file = File::open(path).map_err(|source| DataError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut reader = BufReader::new(file);
    let mut problems = Vec::new();
    let mut bytes = Vec::new();
    let mut line_no = 0usize;
    loop {
        bytes.clear();
        let read = reader
            .read_until(b'\n', &mut bytes)
            .map_err(|source| DataError::Io {
                path: path.to_owned(),
                source,
            })?;
        if read == 0 {
            break;
        }
        line_no += 1;
        let text = std::str::from_utf8(&bytes).map_err(|_| DataError::NotUtf8 {
            path: path.to_owned(),
            line: line_no,
        })?;
        let text = if line_no == 1 {
            text.trim_start_matches('\u{feff}')
        } else {
            text
        };
        if text.trim().is_empty() {
            continue;
        }
        problems.push(parse_line(path, line_no, text, spec, ids)?);
    }
    Ok(problems)
}

pub(crate) fn parse_line(
    path: &Path,
    line: usize,
    text: &str,
    spec: &JsonlSpec,
    ids: &IdScheme<'_>,
) -> Result<Problem> {
    let record: Value = serde_json::from_str(text).map_err(|e| DataError::Json {
        path: path.to_owned(),
        line,
        message: json_message(&e),
    })?;
    let Value::Object(fields) = &record else {
        return Err(DataError::NotAnObject {
            path: path.to_owned(),
            line,
            got: type_name(&record),
        });
    };
    let field_error = |field: &str, problem: String| DataError::Field {
        path: path.to_owned(),
        line,
        field: field.to_owned(),
        problem,
    };
    let get = |field: &str| {
        fields
            .get(field)
            .ok_or_else(|| field_error(field, "missing".to_owned()))
    };

    let (prompt, messages) = read_prompt(get(&spec.prompt_field)?)
        .map_err(|p| field_error(&spec.prompt_field, p))?;
    let answer = match &spec.answer_field {
        Some(field) => {
            let value = lookup(fields, field).ok_or_else(|| field_error(field, "missing".to_owned()))?;
            non_empty_string(value, true).map_err(|p| field_error(field, p))?
        }
        None => lookup(fields, VERL_GROUND_TRUTH)
            .and_then(|v| non_empty_string(v, true).ok())
            .unwrap_or_default(),
    };
    let id = match &spec.id_field {
        Some(field) => {
            let value = non_empty_string(get(field)?, true).map_err(|p| field_error(field, p))?;
            format!("{}{value}", ids.prefix)
        }
        None => format!("{}:{}", ids.line_label, line + ids.offset),
    };
    let from_source = fields.get("data_source").and_then(Value::as_str).and_then(task_of_data_source);
    Ok(Problem {
        id,
        prompt,
        answer,
        task: from_source.or(spec.task).unwrap_or(Task::Math),
        messages,
        prompt_field: Some(spec.prompt_field.clone()),
        record,
    })
}

/// A field by name, or by a dotted path into nested objects when no field has the whole name.
fn lookup<'a>(fields: &'a serde_json::Map<String, Value>, path: &str) -> Option<&'a Value> {
    if let Some(v) = fields.get(path) {
        return Some(v);
    }
    let (head, rest) = path.split_once('.')?;
    match fields.get(head)? {
        Value::Object(inner) => lookup(inner, rest),
        _ => None,
    }
}

/// A prompt is a non-empty string, or a non-empty list of `{"role", "content"}` messages; for a
/// conversation the text is its last user turn (what reports show as the question).
fn read_prompt(value: &Value) -> std::result::Result<(String, Option<Vec<ChatMessage>>), String> {
    let items = match value {
        Value::Array(items) => items,
        Value::String(_) => return non_empty_string(value, false).map(|s| (s, None)),
        other => return Err(format!("expected a string or a list of chat messages, got {}", type_name(other))),
    };
    if items.is_empty() {
        return Err("expected a non-empty list of chat messages, got an empty list".to_owned());
    }
    let mut messages = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let role = item.get("role").and_then(Value::as_str);
        let content = item.get("content").and_then(Value::as_str);
        let (Some(role), Some(content)) = (role, content) else {
            return Err(format!("message {i}: expected an object with string \"role\" and \"content\", got {}", clip_json(item)));
        };
        messages.push(ChatMessage::new(role, content));
    }
    let text = messages.iter().rev().find(|m| m.role == "user").unwrap_or(&messages[messages.len() - 1]).content.clone();
    Ok((text, Some(messages)))
}

fn clip_json(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// The value as a non-empty string; numbers are accepted where `numbers_ok` (answers and ids often are).
fn non_empty_string(value: &Value, numbers_ok: bool) -> std::result::Result<String, String> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) if numbers_ok => number_text(n),
        other if numbers_ok => {
            return Err(format!(
                "expected a string or a number, got {}",
                type_name(other)
            ))
        }
        other => return Err(format!("expected a string, got {}", type_name(other))),
    };
    if text.trim().is_empty() {
        return Err("expected a non-empty string, got an empty one".to_owned());
    }
    Ok(text)
}

/// Whole numbers stored as floats (AMC's `27.0`) are written without the fraction, as the problem states them.
pub(crate) fn number_text(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if !n.is_i64() && !n.is_u64() && f.fract() == 0.0 && f.abs() < 1e15 => {
            format!("{}", f as i64)
        }
        _ => n.to_string(),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// serde_json reports positions as `line 1 column N` of the one line it saw; only the column means anything
/// to the user, whose line number is already in the error.
fn json_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match full.strip_suffix(&suffix) {
        Some(message) => format!("{message} at column {}", e.column()),
        None => full,
    }
}
