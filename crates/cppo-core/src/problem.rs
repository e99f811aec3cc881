//! The one problem type every dataset loads into and every reward grades against.

use serde::{Deserialize, Serialize};

use crate::ChatMessage;

/// How a problem's answer is graded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Task {
    /// A numeric final answer (GSM8K, and generated arithmetic).
    Gsm8k,
    /// A LaTeX final answer compared up to mathematical equivalence (MATH, MATH-500, AMC, AIME).
    Math,
}

impl std::str::FromStr for Task {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "gsm8k" => Ok(Task::Gsm8k),
            "math" => Ok(Task::Math),
            other => Err(format!("unknown task `{other}` (expected `gsm8k` or `math`)")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    /// Stable identifier (the dataset's own id, or `<file>:<line>`).
    pub id: String,
    /// The question as the user turn of the chat, before any prompt template.
    pub prompt: String,
    /// The reference the grader reads the gold answer from: a GSM8K solution ending in `#### N`, a MATH
    /// solution with a `\boxed{}`, or a bare gold answer.
    pub answer: String,
    pub task: Task,
    /// The original record, kept so rewards and reports can reach any other field.
    #[serde(default)]
    pub record: serde_json::Value,
    /// The prompt as chat messages, when the dataset gives a conversation (TRL's conversational format,
    /// verl's `prompt`): the model sees them as they are, with no prompt template. `prompt` then holds
    /// the last user turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<ChatMessage>>,
    /// The field of `record` that held the prompt; every other field is a column that users' reward
    /// functions receive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_field: Option<String>,
}

impl Problem {
    /// The record's fields except the prompt, as reward functions receive them (TRL passes every
    /// dataset column but the prompt); empty when the record is not an object.
    pub fn columns(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut columns = match &self.record {
            serde_json::Value::Object(m) => m.clone(),
            _ => serde_json::Map::new(),
        };
        if let Some(field) = &self.prompt_field {
            columns.remove(field);
        }
        columns
    }
}
