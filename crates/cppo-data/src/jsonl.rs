//! JSON-lines files of problems, with the field names given by the caller, so users can train on their own
//! files and the built-in sets share one strict reader.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use cppo_core::{Problem, Task};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{DataError, Result};

/// Which fields of each JSON object hold the problem's parts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonlSpec {
    /// The field holding the question text (a non-empty string).
    pub prompt_field: String,
    /// The field holding the grader's reference (a non-empty string, or a number, which is written out).
    pub answer_field: String,
    /// The field holding an id (a string or a number); without it ids are `<path>:<line>`.
    #[serde(default)]
    pub id_field: Option<String>,
    pub task: Task,
}

impl JsonlSpec {
    pub fn new(
        prompt_field: impl Into<String>,
        answer_field: impl Into<String>,
        task: Task,
    ) -> Self {
        JsonlSpec {
            prompt_field: prompt_field.into(),
            answer_field: answer_field.into(),
            id_field: None,
            task,
        }
    }

    pub fn with_id_field(mut self, id_field: impl Into<String>) -> Self {
        self.id_field = Some(id_field.into());
        self
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

    let prompt = non_empty_string(get(&spec.prompt_field)?, false)
        .map_err(|p| field_error(&spec.prompt_field, p))?;
    let answer = non_empty_string(get(&spec.answer_field)?, true)
        .map_err(|p| field_error(&spec.answer_field, p))?;
    let id = match &spec.id_field {
        Some(field) => {
            let value = non_empty_string(get(field)?, true).map_err(|p| field_error(field, p))?;
            format!("{}{value}", ids.prefix)
        }
        None => format!("{}:{}", ids.line_label, line + ids.offset),
    };
    Ok(Problem {
        id,
        prompt,
        answer,
        task: spec.task,
        record,
    })
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
