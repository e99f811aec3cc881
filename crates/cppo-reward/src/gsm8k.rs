//! The GSM8K grader: numeric final answers compared exactly as decimals.
//!
//! Gold: the text after the last `####` of the reference (a GSM8K solution), or the whole reference when
//! it has none (a bare gold answer such as `18` or `1,000`).
//!
//! The model's answer, from the first of these sources that holds a number:
//! 1. the last complete `<answer>...</answer>`;
//! 2. the last `\boxed{...}`;
//! 3. a trailing `#### N`: the rest of that line read as one answer (see below), else the first number
//!    after the last `####`;
//! 4. the last "answer is" / "answer:" phrase (the Minerva template "The final answer is 120. I hope it
//!    is correct."): the rest of its sentence, read as one answer;
//! 5. the last number anywhere in the completion. Digits inside a word (`AZYUK2A`, `H2O`) are no
//!    number; `,\!` and non-breaking or thin spaces separate thousands (`1,\! 250`, `2 500`).
//!
//! The content of an answer tag or a box *is* the answer, so it must state one number
//! ([`read_answer`]): only the part after its last `=` counts (`9 * 2 = 18` is 18); words, `$`, `%`,
//! `\text{...}` units, unit words and LaTeX spacing are ignored (`The answer is $18.` and
//! `18 \text{ eggs}` are 18); thousands separators join (`1{,}000`, `1 000`); a fraction is one number
//! (`\frac{1}{2}`, `\dfrac`, `\tfrac`, `1/2` are 0.5; `\frac{1}{3}` has no decimal and equals no gold).
//! Content that holds several numbers (`18 - 3`, `3 bags of 6 make 18`), or a `\frac` / `\sqrt` that is
//! not a plain number, is not a single answer: the completion is graded incorrect, with no answer
//! extracted, rather than one of the numbers picked. A tag or box that holds no number
//! (`<answer>eighteen</answer>`) falls through to the next source.

use cppo_core::Problem;

use crate::limits::MAX_COMPLETION_BYTES;
use crate::number::{first_number, join_digit_groups, last_number, parse_number, read_answer, Decimal, Reading, Value};
use crate::scan::{after_answer_phrase, last_boxed, last_tag_content};
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
    AnswerPhrase,
    LastNumber,
}

impl Source {
    pub fn describe(self) -> &'static str {
        match self {
            Source::AnswerTag => "<answer>",
            Source::Boxed => "\\boxed{}",
            Source::Hashes => "####",
            Source::AnswerPhrase => "\"answer is\"",
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

/// What a completion answers (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Extraction {
    /// One number, and where it came from.
    Number(Value, Source),
    /// The answer tag or box holds several numbers (or a fraction that is not plain numbers): no single
    /// answer. `content` is the span as written.
    NotSingle { source: Source, content: String },
    /// No number anywhere.
    Nothing,
}

/// Reads the model's answer (see the module docs for the order and the rule for tags and boxes).
pub fn extract(completion: &str) -> Extraction {
    // The box is looked for only when the tag gives no number.
    let tag = last_tag_content(completion, "answer").map(|s| (s, Source::AnswerTag));
    let boxed = std::iter::once_with(|| last_boxed(completion).map(|s| (s, Source::Boxed))).flatten();
    for (span, source) in tag.into_iter().chain(boxed) {
        match read_answer(span) {
            Reading::One(v) => return Extraction::Number(v, source),
            Reading::NotSingle => return Extraction::NotSingle { source, content: span.to_string() },
            Reading::NoNumber => {}
        }
    }
    // LaTeX thousands separators (`1{,}000`, `1,\!000`, `1,\! 000`) and wide spaces between digit groups.
    let joined = join_digit_groups(completion, false);
    let cleaned;
    let completion = if joined.contains("{,}") || joined.contains(",\\!") {
        cleaned = joined.replace("{,}", ",").replace(",\\!", ",");
        cleaned.as_str()
    } else {
        joined.as_ref()
    };
    if let Some(p) = completion.rfind("####") {
        let rest = &completion[p + 4..];
        let line = rest.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        if let Reading::One(v) = read_answer(line) {
            return Extraction::Number(v, Source::Hashes);
        }
        if let Some(d) = first_number(rest) {
            return Extraction::Number(Value::Finite(d), Source::Hashes);
        }
    }
    if let Some(span) = after_answer_phrase(completion) {
        if let Reading::One(v) = read_answer(span) {
            return Extraction::Number(v, Source::AnswerPhrase);
        }
    }
    match last_number(completion) {
        Some(d) => Extraction::Number(Value::Finite(d), Source::LastNumber),
        None => Extraction::Nothing,
    }
}

/// The model's numeric answer and where it came from, when it gave exactly one ([`extract`]).
pub fn extract_answer(completion: &str) -> Option<(Value, Source)> {
    match extract(completion) {
        Extraction::Number(v, source) => Some((v, source)),
        Extraction::NotSingle { .. } | Extraction::Nothing => None,
    }
}

/// Grades one completion against a reference; the verdict of [`Gsm8kReward`].
pub fn grade(completion: &str, reference: &str) -> Score {
    if completion.len() > MAX_COMPLETION_BYTES {
        return Score::accuracy(false, None, format!("completion too long ({} bytes)", completion.len()));
    }
    let gold = gold_answer(reference);
    let (value, src) = match extract(completion) {
        Extraction::Number(v, src) => (v, src),
        none => {
            // A non-numeric gold can still be matched by the literal answer-tag content.
            if let Gold::Text(t) = &gold {
                if let Some(content) = last_tag_content(completion, "answer").map(str::trim) {
                    let ok = content == t;
                    let reason = format!("answer {:?} vs gold {}", clip(content), clip(&gold.to_string()));
                    return Score::accuracy(ok, Some(content.to_string()), reason);
                }
            }
            let reason = match none {
                Extraction::NotSingle { source, content } => {
                    format!("not a single answer: {} holds {:?}; gold {}", source.describe(), clip(&content), clip(&gold.to_string()))
                }
                _ => format!("no number in the completion; gold {}", clip(&gold.to_string())),
            };
            return Score::accuracy(false, None, reason);
        }
    };
    let ok = matches!((&gold, &value), (Gold::Number(g), Value::Finite(d)) if d == g);
    let verdict = if ok { "correct" } else { "wrong" };
    let shown = value.to_string();
    let gold_kind = if matches!(gold, Gold::Text(_)) { "non-numeric gold" } else { "gold" };
    let reason = format!("{verdict}: {} from {} vs {gold_kind} {}", clip(&shown), src.describe(), clip(&gold.to_string()));
    Score::accuracy(ok, Some(shown), reason)
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
