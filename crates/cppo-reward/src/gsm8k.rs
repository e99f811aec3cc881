//! The GSM8K grader: numeric final answers compared exactly as decimals.
//!
//! Gold: the text after the last `####` of the reference (a GSM8K solution), or the whole reference when
//! it has none (a bare gold answer such as `18` or `1,000`).
//!
//! The model's answer, from the first of these sources that holds a number:
//! 1. the last complete `<answer>...</answer>`: the last number inside it ("The answer is 18 apples." gives 18);
//! 2. the last `\boxed{...}`: the last number inside it;
//! 3. a trailing `#### N`: the first number after the last `####`;
//! 4. the last number anywhere in the completion.
//!
//! A source that is present but holds no number (`<answer>eighteen</answer>`) falls through to the next.

use cppo_core::Problem;

use crate::limits::MAX_COMPLETION_BYTES;
use crate::number::{first_number, last_number, parse_number, Decimal};
use crate::scan::{last_boxed, last_tag_content};
use crate::{clip, Reward, Score};

/// The gold answer of a GSM8K reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gold {
    Number(Decimal),
    /// A reference whose answer is not a number: compared as a trimmed string.
    Text(String),
}

impl std::fmt::Display for Gold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gold::Number(d) => write!(f, "{d}"),
            Gold::Text(t) => write!(f, "{t:?}"),
        }
    }
}

/// Where in the completion the answer was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    AnswerTag,
    Boxed,
    Hashes,
    LastNumber,
}

impl Source {
    pub fn describe(self) -> &'static str {
        match self {
            Source::AnswerTag => "<answer>",
            Source::Boxed => "\\boxed{}",
            Source::Hashes => "####",
            Source::LastNumber => "the last number",
        }
    }
}

/// Reads the gold answer from a reference (see the module docs).
pub fn gold_answer(reference: &str) -> Gold {
    let tail = match reference.rfind("####") {
        Some(p) => &reference[p + 4..],
        None => reference,
    };
    let tail = tail.trim();
    if let Some(d) = parse_number(tail) {
        return Gold::Number(d);
    }
    // `#### 18 apples` or a prose reference: the number it states.
    let found = if reference.contains("####") { first_number(tail) } else { last_number(tail) };
    match found {
        Some(d) => Gold::Number(d),
        None => Gold::Text(tail.to_string()),
    }
}

/// The model's numeric answer and where it came from (see the module docs for the order).
pub fn extract_answer(completion: &str) -> Option<(Decimal, Source)> {
    // LaTeX thousands separators (`1{,}000`, `1,\!000`) read as plain commas.
    let cleaned;
    let completion = if completion.contains("{,}") || completion.contains(",\\!") {
        cleaned = completion.replace("{,}", ",").replace(",\\!", ",");
        cleaned.as_str()
    } else {
        completion
    };
    if let Some(d) = last_tag_content(completion, "answer").and_then(last_number) {
        return Some((d, Source::AnswerTag));
    }
    if let Some(d) = last_boxed(completion).and_then(last_number) {
        return Some((d, Source::Boxed));
    }
    if let Some(p) = completion.rfind("####") {
        if let Some(d) = first_number(&completion[p + 4..]) {
            return Some((d, Source::Hashes));
        }
    }
    last_number(completion).map(|d| (d, Source::LastNumber))
}

/// Grades one completion against a reference; the verdict of [`Gsm8kReward`].
pub fn grade(completion: &str, reference: &str) -> Score {
    if completion.len() > MAX_COMPLETION_BYTES {
        return Score::accuracy(false, None, format!("completion too long ({} bytes)", completion.len()));
    }
    let gold = gold_answer(reference);
    match (&gold, extract_answer(completion)) {
        (_, None) => {
            // A non-numeric gold can still be matched by the literal answer-tag content.
            if let Gold::Text(t) = &gold {
                if let Some(content) = last_tag_content(completion, "answer").map(str::trim) {
                    let ok = content == t;
                    let reason = format!("answer {:?} vs gold {}", clip(content), clip(&gold.to_string()));
                    return Score::accuracy(ok, Some(content.to_string()), reason);
                }
            }
            Score::accuracy(false, None, format!("no number in the completion; gold {}", clip(&gold.to_string())))
        }
        (Gold::Number(g), Some((d, src))) => {
            let ok = &d == g;
            let verdict = if ok { "correct" } else { "wrong" };
            let (d, g) = (d.to_string(), g.to_string());
            let reason = format!("{verdict}: {} from {} vs gold {}", clip(&d), src.describe(), clip(&g));
            Score::accuracy(ok, Some(d), reason)
        }
        (Gold::Text(_), Some((d, src))) => {
            let d = d.to_string();
            let reason = format!("wrong: {} from {} vs non-numeric gold {}", clip(&d), src.describe(), clip(&gold.to_string()));
            Score::accuracy(false, Some(d), reason)
        }
    }
}

/// Accuracy on GSM8K-style numeric answers: 1.0 when the extracted number equals the gold, else 0.0.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gsm8kReward;

impl Reward for Gsm8kReward {
    fn name(&self) -> &str {
        "gsm8k"
    }
    fn score(&self, completion: &str, problem: &Problem) -> Score {
        grade(completion, &problem.answer)
    }
}
