//! The one problem type every dataset loads into and every reward grades against.

use serde::{Deserialize, Serialize};

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
}
