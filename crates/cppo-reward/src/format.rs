//! The `<think>...</think>\n<answer>...</answer>` format reward of the CPPO code.
//!
//! CPPO (lzhxmu/CPPO, `src/open_r1/rewards_gsm.py`, `format_reward`) scores 1 when
//! `re.match(r"^<think>.*?</think>\n<answer>.*?</answer>$", text, re.DOTALL | re.MULTILINE)` matches.
//! Read exactly, that rule is:
//! - the completion starts with `<think>`: no leading whitespace;
//! - somewhere after it comes `</think>`, exactly one `\n`, then `<answer>` (no other whitespace);
//! - somewhere after that comes `</answer>` followed by a newline or the end of the text. Because of
//!   `re.MULTILINE`, `$` matches before any `\n`, and `re.match` does not demand that the whole text
//!   match: text after `</answer>\n` is allowed, text after `</answer>` on the same line is not.
//!
//! Both lazy `.*?` also match tags, so `<think>` may contain further tags; only the existence of such
//! positions matters, which this checks in linear time without a regex.

use cppo_core::Problem;

use crate::{Reward, Score};

const OPEN: &str = "<think>";
const MIDDLE: &str = "</think>\n<answer>";
const CLOSE: &str = "</answer>";

/// Why a completion misses the format, or `None` when it has it.
pub fn format_violation(completion: &str) -> Option<&'static str> {
    if !completion.starts_with(OPEN) {
        return Some("does not start with <think>");
    }
    // The earliest middle leaves the most room for the closing tag, so it decides existence.
    let Some(m) = completion[OPEN.len()..].find(MIDDLE) else {
        return Some("no </think> followed by a newline and <answer>");
    };
    let after = OPEN.len() + m + MIDDLE.len();
    let rest = &completion[after..];
    let ends_line = rest.match_indices(CLOSE).any(|(p, _)| {
        let tail = &rest[p + CLOSE.len()..];
        tail.is_empty() || tail.starts_with('\n')
    });
    if ends_line {
        None
    } else {
        Some("no </answer> at the end of a line after <answer>")
    }
}

/// 1.0 when the completion has the CPPO `<think>`/`<answer>` format, else 0.0.
#[derive(Clone, Copy, Debug, Default)]
pub struct FormatReward;

impl Reward for FormatReward {
    fn name(&self) -> &str {
        "format"
    }
    fn score(&self, completion: &str, _problem: &Problem) -> Score {
        match format_violation(completion) {
            None => Score { value: 1.0, correct: None, extracted: None, reason: "has the <think>/<answer> format".into() },
            Some(why) => Score { value: 0.0, correct: None, extracted: None, reason: format!("format: {why}") },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::format_violation;

    fn ok(s: &str) -> bool {
        format_violation(s).is_none()
    }

    #[test]
    fn matches_the_cppo_rule() {
        assert!(ok("<think>reason</think>\n<answer>18</answer>"));
        assert!(ok("<think>\nmulti\nline\n</think>\n<answer>\n18\n</answer>"));
        assert!(ok("<think></think>\n<answer></answer>"));
        // `$` under MULTILINE: a newline may follow, and then anything.
        assert!(ok("<think>a</think>\n<answer>1</answer>\n"));
        assert!(ok("<think>a</think>\n<answer>1</answer>\ntrailing text"));
        // Lazy dots match tags too.
        assert!(ok("<think>a</think> b</think>\n<answer>1</answer> x </answer>"));
    }

    #[test]
    fn rejects_what_the_cppo_rule_rejects() {
        assert!(!ok(" <think>a</think>\n<answer>1</answer>"));
        assert!(!ok("<think>a</think><answer>1</answer>"));
        assert!(!ok("<think>a</think>\n\n<answer>1</answer>"));
        assert!(!ok("<think>a</think> \n<answer>1</answer>"));
        assert!(!ok("<think>a</think>\n<answer>1</answer> trailing"));
        assert!(!ok("<think>a</think>\n<answer>1"));
        assert!(!ok("<think>a</think>\n<answer>1</answer>\r\n"));
        assert!(!ok("answer: <think>a</think>\n<answer>1</answer>"));
        assert!(!ok(""));
        assert!(!ok("<think>a\n<answer>1</answer>"));
    }
}
