//! The chat messages a problem becomes before the model's own chat template renders them.

use std::str::FromStr;

pub use cppo_core::ChatMessage;
use cppo_core::Problem;
use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};

/// The system prompt of the CPPO code's GSM8K training (lzhxmu/CPPO, `recipes/gsm8k/Qwen2.5-1.5B-Instruct.yaml`),
/// word for word, including the newline before `<answer>`.
pub const R1_THINK_SYSTEM: &str = "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. The assistant first thinks about the reasoning process in the mind and then provides the user with the answer. The reasoning process and answer are enclosed within <think> </think> and <answer> </answer> tags, respectively, i.e., <think> reasoning process here </think>\n<answer> answer here </answer>.";

/// The system prompt of the CPPO code's MATH training (lzhxmu/CPPO, `recipes/math/Qwen2.5-7B-Instruct.yaml`),
/// word for word: the doubled braces and the trailing space are in the published prompt.
pub const R1_MATH_SYSTEM: &str = "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. The assistant first thinks about the reasoning process in the mind and then provides the user with the answer. And the answer should be of the following format: 'Therefore, the final answer is: $\\boxed{{ANSWER}}$. I hope it is correct' (without quotes) where ANSWER is just the final number or expression that solves the problem. The reasoning process and answer are enclosed within <think> </think> and <answer> </answer> tags, respectively, i.e., <think> reasoning process here </think>\n<answer> answer here </answer>. ";

/// The preset names [`PromptTemplate::preset`] knows.
pub const PRESET_NAMES: [&str; 4] = ["r1-think", "r1-math", "plain", "boxed"];

/// A system prompt (used verbatim) and a user template in which `{question}` stands for the problem and
/// `{{`/`}}` for literal braces; any other brace is an error, so a typo cannot reach the model unnoticed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawTemplate", into = "RawTemplate")]
pub struct PromptTemplate {
    system: Option<String>,
    user: String,
    segments: Vec<Segment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Question,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTemplate {
    #[serde(default)]
    system: Option<String>,
    user: String,
}

impl TryFrom<RawTemplate> for PromptTemplate {
    type Error = DataError;
    fn try_from(raw: RawTemplate) -> Result<Self> {
        PromptTemplate::new(raw.system, raw.user)
    }
}

impl From<PromptTemplate> for RawTemplate {
    fn from(t: PromptTemplate) -> Self {
        RawTemplate {
            system: t.system,
            user: t.user,
        }
    }
}

impl PromptTemplate {
    pub fn new(system: Option<String>, user: impl Into<String>) -> Result<Self> {
        let user = user.into();
        let segments = parse_user(&user)?;
        if !segments.contains(&Segment::Question) {
            return Err(DataError::Template(format!(
                "user template {user:?} has no {{question}} placeholder"
            )));
        }
        Ok(PromptTemplate {
            system,
            user,
            segments,
        })
    }

    /// `r1-think` (CPPO's GSM8K system prompt), `r1-math` (CPPO's MATH system prompt), `plain` (the question
    /// alone) or `boxed` (the question, then "Please reason step by step, and put your final answer within
    /// \boxed{}.").
    pub fn preset(name: &str) -> Result<Self> {
        let (system, user) = match name.trim() {
            "r1-think" => (Some(R1_THINK_SYSTEM), "{question}"),
            "r1-math" => (Some(R1_MATH_SYSTEM), "{question}"),
            "plain" => (None, "{question}"),
            "boxed" => (None, "{question}\nPlease reason step by step, and put your final answer within \\boxed{{}}."),
            other => return Err(DataError::UnknownPreset(other.to_owned(), PRESET_NAMES.join(", "))),
        };
        PromptTemplate::new(system.map(str::to_owned), user)
    }

    pub fn system(&self) -> Option<&str> {
        self.system.as_deref()
    }

    /// The user template as written, placeholders and doubled braces included.
    pub fn user_template(&self) -> &str {
        &self.user
    }

    pub fn render_user(&self, question: &str) -> String {
        let mut out = String::with_capacity(self.user.len() + question.len());
        for segment in &self.segments {
            match segment {
                Segment::Literal(text) => out.push_str(text),
                Segment::Question => out.push_str(question),
            }
        }
        out
    }

    /// The system message (when there is one), then the user message holding the rendered question.
    pub fn messages(&self, problem: &Problem) -> Vec<ChatMessage> {
        let mut messages = Vec::with_capacity(2);
        if let Some(system) = &self.system {
            messages.push(ChatMessage::system(system.clone()));
        }
        messages.push(ChatMessage::user(self.render_user(&problem.prompt)));
        messages
    }
}

impl FromStr for PromptTemplate {
    type Err = DataError;
    fn from_str(name: &str) -> Result<Self> {
        PromptTemplate::preset(name)
    }
}

fn parse_user(template: &str) -> Result<Vec<Segment>> {
    let mut segments = Vec::new();
    let mut literal = String::new();
    let mut chars = template.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '{' if chars.peek().map(|&(_, n)| n) == Some('{') => {
                chars.next();
                literal.push('{');
            }
            '}' if chars.peek().map(|&(_, n)| n) == Some('}') => {
                chars.next();
                literal.push('}');
            }
            '{' => {
                let rest = &template[at + 1..];
                let Some(end) = rest.find('}') else {
                    return Err(DataError::Template(format!(
                        "unclosed `{{` at byte {at} of {template:?}; write `{{{{` for a literal brace"
                    )));
                };
                let name = &rest[..end];
                if name != "question" {
                    return Err(DataError::Template(format!(
                        "unknown placeholder `{{{name}}}` in {template:?} (the only placeholder is {{question}}; \
                         write `{{{{` and `}}}}` for literal braces)"
                    )));
                }
                if !literal.is_empty() {
                    segments.push(Segment::Literal(std::mem::take(&mut literal)));
                }
                segments.push(Segment::Question);
                for _ in 0..name.chars().count() + 1 {
                    chars.next();
                }
            }
            '}' => {
                return Err(DataError::Template(format!(
                    "lone `}}` at byte {at} of {template:?}; write `}}}}` for a literal brace"
                )));
            }
            other => literal.push(other),
        }
    }
    if !literal.is_empty() {
        segments.push(Segment::Literal(literal));
    }
    Ok(segments)
}
