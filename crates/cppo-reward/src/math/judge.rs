//! One grading decision, kept with every comparison it made, so that [`super::grade`] can score it and
//! [`explain`] can show a person what was compared.
//!
//! Several boxes: a reference or completion that ends with several boxes joined by `and`, `or` or
//! commas ([`trailing_boxes`]) is read both as its last box (MATH's convention, and right where the
//! reference lists alternative forms of one answer: `28` or `28_9`) and as all of them together, a list
//! (a multi-part answer). The completion is correct when either reading equals either reading of the
//! gold. A lone box never equals a list of several different items, so boxing one of two required
//! answers stays wrong unless it is the reference's last box, as before.
//!
//! Labelled golds: `AB=4, CD=5` also accepts the bare values in the labels' order ([`labelled`]).
//!
//! Alternatives: a gold that offers one tuple in several orders joined by "or" accepts each order
//! alone ([`alternatives`]).

use std::borrow::Cow;

use crate::limits::{MAX_ANSWER_BYTES, MAX_COMPLETION_BYTES, MAX_ITEMS, STEP_BUDGET};
use crate::scan::trailing_boxes;
use crate::clip;

use super::label::bare_values;
use super::structure::{self, describe, Ans};
use super::{compare_forms, extract_answer_counting, gold_answer_counting, normalize, Source, Verdict};

/// One comparison: the answer as read, the gold as read, and the verdict.
pub struct Compared<'a> {
    pub answer: Cow<'a, str>,
    /// The answer normalised, when it could be.
    pub answer_form: Option<String>,
    pub gold: Cow<'a, str>,
    pub verdict: Verdict,
}

impl<'a> Compared<'a> {
    fn new(answer: Cow<'a, str>, gold: Cow<'a, str>) -> Self {
        let (verdict, answer_form) = compare_forms(&answer, &gold, STEP_BUDGET);
        Compared { answer, answer_form, gold, verdict }
    }
}

/// What grading found.
pub enum Judgement<'a> {
    TooLong(usize),
    NoGold,
    NoAnswer { gold: &'a str },
    /// Every comparison made, in order, up to the first that found equality (if any).
    Compared { source: Source, tried: Vec<Compared<'a>> },
}

/// Several boxes read together as one list: `1, 2`; `boxes` counts the box commands in `text`.
fn joined(text: &str, boxes: usize) -> Option<String> {
    if boxes < 2 {
        return None;
    }
    let group = trailing_boxes(text, MAX_ITEMS, MAX_ANSWER_BYTES);
    (!group.is_empty()).then(|| group.join(", "))
}

/// Grades `completion` against `reference` (see the module docs for several boxes).
pub fn judge<'a>(completion: &'a str, reference: &'a str) -> Judgement<'a> {
    if completion.len() > MAX_COMPLETION_BYTES {
        return Judgement::TooLong(completion.len());
    }
    let (Some(gold), gold_boxes) = gold_answer_counting(reference) else { return Judgement::NoGold };
    let Some((answer, source, answer_boxes)) = extract_answer_counting(completion) else { return Judgement::NoAnswer { gold } };
    let first = Compared::new(answer.into(), gold.into());
    let decided = first.verdict.equal;
    let mut tried = vec![first];
    if decided {
        return Judgement::Compared { source, tried };
    }
    // Other readings only when the plain one fails and there are several boxes: the common case pays
    // for no second scan.
    let answer_group = joined(completion, answer_boxes);
    let gold_group = joined(reference, gold_boxes);
    let answers = [Some(Cow::Borrowed(answer)), answer_group.map(Cow::Owned)];
    let golds = [Some(Cow::Borrowed(gold)), gold_group.map(Cow::Owned)];
    let mut settles = |c: Compared<'a>| {
        let equal = c.verdict.equal;
        tried.push(c);
        equal
    };
    for (i, a) in answers.iter().enumerate() {
        for (j, g) in golds.iter().enumerate() {
            let (Some(a), Some(g)) = (a, g) else { continue };
            if (i, j) != (0, 0) && settles(Compared::new(a.clone(), g.clone())) {
                return Judgement::Compared { source, tried };
            }
        }
    }
    // Readings of the gold alone: its labels' values in order, and its alternatives.
    let orders = alternatives(gold);
    for a in answers.iter().flatten() {
        if let Some((answer_form, values)) = labelled(a, gold) {
            if settles(Compared::new(answer_form.into(), values.into())) {
                return Judgement::Compared { source, tried };
            }
        }
        for alternative in &orders {
            if settles(Compared::new(a.clone(), alternative.clone().into())) {
                return Judgement::Compared { source, tried };
            }
        }
    }
    Judgement::Compared { source, tried }
}

/// A labelled gold (`AB=4, CD=5`; `p=5, q=2; p=7, q=2`) against the bare values in the labels' order:
/// the answer `4, 5` is read as the tuple `(4,5)`, and the gold as its values, `(4,5)` (one group) or
/// the set of tuples `(5,2),(7,2)` (several groups): the two forms to compare. A labelled answer is
/// compared as it is, names and all; a bare one in another order is wrong.
fn labelled(answer: &str, gold: &str) -> Option<(String, String)> {
    if answer.len() > MAX_ANSWER_BYTES || gold.len() > MAX_ANSWER_BYTES || !gold.contains('=') || answer.contains('=') {
        return None;
    }
    let bare = bare_values(&normalize(gold).ok()?)?;
    let answer_normal = normalize(answer).ok()?;
    let answer_form = if bare.groups == 1 {
        match structure::build(&answer_normal) {
            Ans::List(items) if items.len() == bare.per_group => format!("({answer_normal})"),
            Ans::Tuple { .. } => answer_normal,
            _ => return None,
        }
    } else {
        answer_normal
    };
    Some((answer_form, bare.text))
}

/// `(11,7) or (7,11)`: a gold that offers one tuple in several orders, joined by "or" (and no "and"),
/// accepts each of them alone. Other lists joined by "or" (`x = 2 or x = 3`, `(1,2) or (3,4)`) are
/// all the solutions, and stay one answer.
fn alternatives(gold: &str) -> Vec<String> {
    // Any "or" will do here: only a list of one tuple reordered passes the checks below.
    if gold.len() > MAX_ANSWER_BYTES || !gold.contains("or") || gold.contains("and") {
        return Vec::new();
    }
    let Ok(normal) = normalize(gold) else { return Vec::new() };
    let us = structure::units(&normal);
    let parts = structure::split_top(&normal, &us, ",");
    if parts.len() < 2 || parts.len() > MAX_ITEMS {
        return Vec::new();
    }
    // Each part's coordinates, sorted: the parts are one tuple reordered when these agree.
    let mut coordinates = Vec::with_capacity(parts.len());
    for part in &parts {
        let Ans::Tuple { items, .. } = structure::build(part) else { return Vec::new() };
        let mut texts: Vec<String> = items.iter().map(describe).collect();
        texts.sort_unstable();
        coordinates.push(texts);
    }
    if coordinates.windows(2).any(|w| w[0] != w[1]) {
        return Vec::new();
    }
    parts.iter().map(|p| p.to_string()).collect()
}

/// An answer as compared: normalised when short enough to be.
pub fn shown(answer: &str) -> String {
    if answer.len() <= MAX_ANSWER_BYTES {
        normalize(answer).unwrap_or_else(|_| answer.to_string())
    } else {
        answer.to_string()
    }
}

/// Why `completion` graded as it did against `reference`: where the answer came from, and for each
/// comparison the normalised forms, the shapes they were read as, and the verdict.
pub fn explain(completion: &str, reference: &str) -> String {
    match judge(completion, reference) {
        Judgement::TooLong(n) => format!("completion too long ({n} bytes): not read"),
        Judgement::NoGold => "the reference has no answer".into(),
        Judgement::NoAnswer { gold } => format!("no answer found (no \\boxed{{}}, <answer>, \"answer is\" or $...$); gold {}", clip(gold)),
        Judgement::Compared { source, tried } => {
            let mut out = format!("answer from {}", source.describe());
            for c in &tried {
                out.push_str(&format!("; {} vs gold {}: {}", form(&c.answer), form(&c.gold), c.verdict.how.describe()));
            }
            out
        }
    }
}

/// `x\le2` read as `(-\infty;2]`: the normalised form, and its shape when that says more.
fn form(answer: &str) -> String {
    let normal = shown(answer);
    if normal.len() > MAX_ANSWER_BYTES {
        return format!("{} (too long to read)", clip(&normal));
    }
    let shape = describe(&structure::build(&normal));
    if shape == normal {
        format!("`{}`", clip(&normal))
    } else {
        format!("`{}` read as {}", clip(&normal), clip(&shape))
    }
}
