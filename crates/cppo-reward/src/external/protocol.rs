//! The protocol's messages: the request for a batch and the checks on a reply.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::Sample;

/// The request for `samples`, without its `"function"` (set per part). Prompts and completions are
/// strings, or, when a problem's prompt is a conversation, lists of `{"role", "content"}` messages (the
/// completion as one assistant message), as TRL passes them. `columns` holds every field of the
/// problems' records except the prompt, one entry per completion (null where a row lacks the field).
pub fn batch_request(step: u64, samples: &[Sample<'_>]) -> Value {
    let conversational = samples.iter().any(|s| s.problem.messages.is_some());
    let prompts: Vec<Value> = samples
        .iter()
        .map(|s| match &s.problem.messages {
            Some(m) => json!(m),
            None if conversational => json!([{ "role": "user", "content": s.problem.prompt }]),
            None => json!(s.problem.prompt),
        })
        .collect();
    let completions: Vec<Value> = samples
        .iter()
        .map(|s| if conversational { json!([{ "role": "assistant", "content": s.completion }]) } else { json!(s.completion) })
        .collect();
    let rows: Vec<_> = samples.iter().map(|s| s.problem.columns()).collect();
    let mut columns: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for row in &rows {
        for key in row.keys() {
            columns.entry(key.as_str()).or_default();
        }
    }
    for (key, values) in columns.iter_mut() {
        values.extend(rows.iter().map(|row| row.get(*key).cloned().unwrap_or(Value::Null)));
    }
    json!({
        "function": "",
        "step": step,
        "prompts": prompts,
        "completions": completions,
        "completion_ids": samples.iter().map(|s| s.completion_ids).collect::<Vec<_>>(),
        "columns": columns,
    })
}

/// The error a reply (or greeting) reports, with its traceback when it has one.
pub(super) fn error_text(reply: &Value) -> Option<String> {
    let error = reply.get("error")?;
    let message = error.as_str().map_or_else(|| error.to_string(), str::to_owned);
    Some(match reply.get("traceback").and_then(Value::as_str) {
        Some(tb) if !tb.trim().is_empty() => format!("{message}\n{}", tb.trim_end()),
        _ => message,
    })
}

/// The rewards of a reply for `n` completions: each a finite number, or null ("not applicable").
pub fn read_rewards(reply: &Value, n: usize) -> Result<Vec<Option<f64>>, String> {
    if let Some(error) = error_text(reply) {
        return Err(error);
    }
    let Some(Value::Array(values)) = reply.get("rewards") else {
        return Err(format!("the reply has no \"rewards\" list: {}", crate::clip(&reply.to_string())));
    };
    if values.len() != n {
        return Err(format!("returned {} rewards for {n} completions (one per completion, None where one does not apply)", values.len()));
    }
    values
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::Null => Ok(None),
            Value::Number(x) => x.as_f64().filter(|x| x.is_finite()).map(Some).ok_or_else(|| format!("reward {i} is {x}, out of range")),
            Value::String(s) if s == "NaN" => Err(format!("reward {i} is NaN (return None for \"not applicable\")")),
            Value::String(s) if s.ends_with("Infinity") => Err(format!("reward {i} is {s}, not a finite number")),
            other => Err(format!("reward {i} is not a number: {}", crate::clip(&other.to_string()))),
        })
        .collect()
}
