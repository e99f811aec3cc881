//! The MATH grader: LaTeX final answers compared up to mathematical equivalence.
//!
//! Gold: the last `\boxed{}` / `\fbox{}` of the reference (a MATH solution); a reference without a box
//! is itself the gold answer (MATH-500's `answer` field), or, if it has a `####`, the text after it.
//!
//! The model's answer, from the first source present:
//! 1. the last complete `\boxed{...}` / `\fbox{...}` / `\boxed X` anywhere in the completion;
//! 2. the last complete `<answer>...</answer>`: inside it, an "answer is" phrase, else the value its
//!    content states as a sentence (see 3), else its last `$...$`, else the whole content;
//! 3. the last "answer is X" / "answer: X" (X: the math span right after it, or the rest of its
//!    sentence; a sentence about something else, "The largest $n$ is 34", gives the value it states);
//! 4. the last inline math span (`$...$`, `\(...\)`, `\[...\]`).
//!
//! A completion or reference that ends with several boxes joined by `and`, `or` or commas is also read
//! as all of them together ([`mod@judge`]).
//!
//! Equivalence: identical after [`normalize()`], else equivalent in structure ([`structure`]) with
//! values compared numerically ([`eval`], tolerances in [`value`]), else the same equation up to a
//! non-zero factor ([`equation`]), else one number written with a decimal comma and the other with a
//! decimal point (`1,22` = `1.22`).

mod budget;
pub mod equation;
pub mod eval;
pub mod expr;
pub mod judge;
pub mod label;
pub mod latex;
pub mod matrix;
pub mod normalize;
pub mod relation;
pub mod structure;
pub mod value;

use cppo_core::Problem;

pub use budget::Budget;
pub use judge::explain;
pub use normalize::normalize;
use value::Value;

use judge::{judge, Judgement};

use crate::limits::{MAX_ANSWER_BYTES, STEP_BUDGET};
use crate::scan::{after_answer_phrase, last_boxed_counting, last_inline_math, last_tag_content, sentence_value};
use crate::{clip, Reward, Score};

/// Where in the completion the answer was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Boxed,
    AnswerTag,
    AnswerPhrase,
    InlineMath,
}

impl Source {
    pub fn describe(self) -> &'static str {
        match self {
            Source::Boxed => "\\boxed{}",
            Source::AnswerTag => "<answer>",
            Source::AnswerPhrase => "\"answer is\"",
            Source::InlineMath => "the last $...$",
        }
    }
}

/// Reads the gold answer from a reference (see the module docs). `None` for an empty reference, and
/// for one whose only boxes are empty (`\boxed{}`: two MATH train solutions lost their answer so).
pub fn gold_answer(reference: &str) -> Option<&str> {
    gold_answer_counting(reference).0
}

/// [`gold_answer`], and how many box commands the reference holds.
pub(crate) fn gold_answer_counting(reference: &str) -> (Option<&str>, usize) {
    let (boxed, boxes) = last_boxed_counting(reference);
    if boxed.is_some() {
        return (boxed, boxes);
    }
    if has_empty_box(reference) {
        return (None, boxes);
    }
    let tail = match reference.rfind("####") {
        Some(p) => &reference[p + 4..],
        None => reference,
    };
    let tail = tail.trim();
    ((!tail.is_empty()).then_some(tail), boxes)
}

fn has_empty_box(text: &str) -> bool {
    ["\\boxed{", "\\fbox{"].iter().any(|open| {
        text.match_indices(open).any(|(p, _)| text[p + open.len()..].trim_start().starts_with('}'))
    })
}

/// The model's answer and where it came from (see the module docs for the order).
pub fn extract_answer(completion: &str) -> Option<(&str, Source)> {
    extract_answer_counting(completion).map(|(a, source, _)| (a, source))
}

/// [`extract_answer`], and how many box commands the completion holds when the answer is a box.
pub(crate) fn extract_answer_counting(completion: &str) -> Option<(&str, Source, usize)> {
    let (boxed, boxes) = last_boxed_counting(completion);
    if let Some(b) = boxed {
        return Some((b, Source::Boxed, boxes));
    }
    if let Some(content) = last_tag_content(completion, "answer") {
        let inner = answer_sentence(content)
            .or_else(|| sentence_value(content.trim()))
            .or_else(|| last_inline_math(content))
            .unwrap_or(content.trim());
        if !inner.is_empty() {
            return Some((inner, Source::AnswerTag, 0));
        }
    }
    if let Some(a) = answer_sentence(completion) {
        return Some((a, Source::AnswerPhrase, 0));
    }
    last_inline_math(completion).map(|m| (m, Source::InlineMath, 0))
}

/// What follows the last "answer is" / "answer:", reduced to the value it states when it is a sentence
/// about something else ("Final Answer: The largest $n$ is 34." gives 34; see [`sentence_value`]).
fn answer_sentence(text: &str) -> Option<&str> {
    after_answer_phrase(text).map(|a| sentence_value(a).unwrap_or(a))
}

/// How a comparison reached its verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// The same text after normalisation.
    Identical,
    /// Equal shapes whose parts are identical.
    Structural,
    /// Equal after numeric evaluation.
    Numeric,
    /// Not equivalent.
    Different,
    /// Longer than [`MAX_ANSWER_BYTES`]: compared as trimmed text only.
    TooLong,
    /// Unbalanced or too deeply nested braces: compared as trimmed text only.
    Malformed,
    /// The work budget ran out before equivalence was shown.
    BudgetExhausted,
}

impl How {
    pub fn describe(self) -> &'static str {
        match self {
            How::Identical => "identical after normalisation",
            How::Structural => "equivalent in structure",
            How::Numeric => "numerically equivalent",
            How::Different => "not equivalent",
            How::TooLong => "too long to normalise; compared as text",
            How::Malformed => "unbalanced braces; compared as text",
            How::BudgetExhausted => "gave up: work budget exhausted",
        }
    }
}

/// The verdict of comparing two answers.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub equal: bool,
    pub how: How,
    /// Work spent, in budget steps (never above the budget, [`STEP_BUDGET`] by default).
    pub steps: u64,
}

/// Compares two answers (each as written, e.g. the contents of a `\boxed{}`).
pub fn compare(a: &str, b: &str) -> Verdict {
    compare_with_budget(a, b, STEP_BUDGET)
}

/// [`compare`] with a work budget other than [`STEP_BUDGET`].
pub fn compare_with_budget(a: &str, b: &str, steps: u64) -> Verdict {
    compare_forms(a, b, steps).0
}

/// [`compare_with_budget`], and `a` normalised when it could be (a grade shows it; normalising twice
/// costs as much as the rest of a typical comparison).
pub(crate) fn compare_forms(a: &str, b: &str, steps: u64) -> (Verdict, Option<String>) {
    let (a, b) = (a.trim(), b.trim());
    if a.len() > MAX_ANSWER_BYTES || b.len() > MAX_ANSWER_BYTES {
        return (Verdict { equal: a == b, how: How::TooLong, steps: 0 }, None);
    }
    let (na, nb) = match (normalize(a), normalize(b)) {
        (Ok(x), Ok(y)) => (x, y),
        (x, _) => return (Verdict { equal: a == b, how: How::Malformed, steps: 0 }, x.ok()),
    };
    if na == nb {
        return (Verdict { equal: true, how: How::Identical, steps: 0 }, Some(na));
    }
    let (sa, sb) = (structure::build(&na), structure::build(&nb));
    let mut budget = Budget::new(steps);
    let mut equal = structure::equivalent(&sa, &sb, &mut budget);
    if !equal && !budget.exhausted && (equation::same_equation(&na, &nb, &mut budget) || decimal_comma_agrees((a, &na), (b, &nb))) {
        equal = true;
        budget.numeric = true;
    }
    let how = match (equal, budget.numeric, budget.exhausted) {
        (true, true, _) => How::Numeric,
        (true, false, _) => How::Structural,
        (false, _, true) => How::BudgetExhausted,
        (false, _, false) => How::Different,
    };
    (Verdict { equal, how, steps: budget.used() }, Some(na))
}

/// One side a number with a decimal comma (`1,22`), the other the same number with a decimal point
/// (`1.22`): only then is the comma read as a decimal point, where nothing else can be meant (against
/// anything else `1,22` stays the list `1, 22`). Each side as written and normalised: a space written
/// after the comma (`1, 22`) makes it a list separator.
fn decimal_comma_agrees(a: (&str, &str), b: (&str, &str)) -> bool {
    let one_way = |(written, x): (&str, &str), (_, y): (&str, &str)| {
        !written.contains(char::is_whitespace) && normalize::decimal_comma(x).is_some_and(|d| {
            normalize::is_point_decimal(y) && matches!((Value::from_decimal(&d), Value::from_decimal(y)), (Ok(p), Ok(q)) if value::same(p, q))
        })
    };
    one_way(a, b) || one_way(b, a)
}

/// Whether two answers are mathematically equivalent.
pub fn is_equiv(a: &str, b: &str) -> bool {
    compare(a, b).equal
}

/// Grades one completion against a reference; the verdict of [`MathReward`].
pub fn grade(completion: &str, reference: &str) -> Score {
    match judge(completion, reference) {
        Judgement::TooLong(n) => Score::accuracy(false, None, format!("completion too long ({n} bytes)")),
        Judgement::NoGold => Score::accuracy(false, None, "the reference has no answer".into()),
        Judgement::NoAnswer { gold } => {
            Score::accuracy(false, None, format!("no answer found (no \\boxed{{}}, <answer>, \"answer is\" or $...$); gold {}", clip(gold)))
        }
        Judgement::Compared { source, tried } => {
            // The pair that matched, or else the plain reading of both (the first pair).
            let Some(last) = tried.iter().find(|c| c.verdict.equal).or(tried.first()) else {
                return Score::accuracy(false, None, "nothing compared".into());
            };
            let v = &last.verdict;
            let verdict = if v.equal { "correct" } else { "wrong" };
            let reason = format!("{verdict}: {} from {} vs gold {}: {}", clip(&last.answer), source.describe(), clip(&last.gold), v.how.describe());
            let shown = last.answer_form.clone().unwrap_or_else(|| last.answer.to_string());
            Score::accuracy(v.equal, Some(shown), reason)
        }
    }
}

/// Accuracy on MATH-style LaTeX answers: 1.0 when equivalent to the gold, else 0.0.
#[derive(Clone, Copy, Debug, Default)]
pub struct MathReward;

impl Reward for MathReward {
    fn name(&self) -> &str {
        "math"
    }
    fn score(&self, completion: &str, problem: &Problem) -> Score {
        grade(completion, &problem.answer)
    }
}
