//! Cases by category, written from what other graders' test suites check (Math-Verify, the MATH
//! dataset's `is_equiv`, Qwen2.5-Math's `math_equal`), restricted to cases whose meaning is the same for
//! cppo. Each category holds right answers that must grade correct and near misses that must not, so a
//! fix that accepts more cannot pass by accepting everything. Each test prints how many of its cases
//! pass before it asserts that all do.

mod arithmetic_answers;
mod boxes_with_text;
mod decimal_commas;
mod decimals;
mod digits_in_words;
mod equations;
mod equivalent_forms;
mod grouping_braces;
mod inequalities;
mod labelled_answers;
mod labelled_golds;
mod or_and_golds;
mod prose_sentences;
mod relations;
mod several_answers;
mod spaced_thousands;
mod sets_of_tuples;
mod thousands_separators;
mod unboxed_answers;

use cppo_reward::{gsm8k, math};

/// One case: how it is graded, and the verdict it must get.
pub enum Case {
    /// Two MATH answers as written (the contents of two boxes), compared both ways round.
    Same(&'static str, &'static str),
    Differ(&'static str, &'static str),
    /// A completion graded by the MATH grader against a reference.
    Math { completion: &'static str, reference: &'static str, correct: bool },
    /// A completion graded by the GSM8K grader against a reference.
    Gsm8k { completion: &'static str, reference: &'static str, correct: bool },
}

impl Case {
    /// `None` when the case gets its verdict, else what went wrong.
    fn failure(&self) -> Option<String> {
        match *self {
            Case::Same(a, b) | Case::Differ(a, b) => {
                let want = matches!(self, Case::Same(..));
                let (ab, ba) = (math::compare(a, b), math::compare(b, a));
                (ab.equal != want || ba.equal != want).then(|| {
                    format!("{a:?} vs {b:?}: want equal={want}, got {} ({:?}) / reversed {} ({:?})", ab.equal, ab.how, ba.equal, ba.how)
                })
            }
            Case::Math { completion, reference, correct } => {
                let s = math::grade(completion, reference);
                (s.correct != Some(correct)).then(|| format!("math {completion:?} vs {reference:?}: want {correct}: {}", s.reason))
            }
            Case::Gsm8k { completion, reference, correct } => {
                let s = gsm8k::grade(completion, reference);
                (s.correct != Some(correct)).then(|| format!("gsm8k {completion:?} vs {reference:?}: want {correct}: {}", s.reason))
            }
        }
    }
}

/// Grades every case, prints the category's count, and fails listing every case that went wrong.
pub fn check(category: &str, cases: &[Case]) {
    let failures: Vec<String> = cases.iter().filter_map(Case::failure).collect();
    eprintln!("{category}: {} of {} cases pass", cases.len() - failures.len(), cases.len());
    assert!(failures.is_empty(), "{category}: {} failing:\n  {}", failures.len(), failures.join("\n  "));
}
