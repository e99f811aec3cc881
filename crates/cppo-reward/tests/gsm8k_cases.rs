//! GSM8K grading: gold extraction, answer extraction order, numeric equality, and the Reward wrapper.

use cppo_core::{Problem, Task};
use cppo_reward::gsm8k::{self, Extraction, Gold, Source};
use cppo_reward::{Gsm8kReward, Reward};

const REFERENCE: &str = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 every day at the farmer’s market.\n#### 18";

fn correct(completion: &str, reference: &str) -> bool {
    let s = gsm8k::grade(completion, reference);
    assert_eq!(s.value, if s.correct == Some(true) { 1.0 } else { 0.0 }, "{s:?}");
    s.correct == Some(true)
}

fn extracted(completion: &str) -> Option<(String, Source)> {
    gsm8k::extract_answer(completion).map(|(d, s)| (d.to_string(), s))
}

#[test]
fn gold_comes_after_the_hashes_or_is_the_whole_reference() {
    assert_eq!(gsm8k::gold_answer(REFERENCE).to_string(), "18");
    assert_eq!(gsm8k::gold_answer("so #### 1,000").to_string(), "1000");
    assert_eq!(gsm8k::gold_answer("#### -3").to_string(), "-3");
    assert_eq!(gsm8k::gold_answer("#### 18 apples").to_string(), "18");
    assert_eq!(gsm8k::gold_answer("1,000").to_string(), "1000");
    assert_eq!(gsm8k::gold_answer(" 42 ").to_string(), "42");
    assert_eq!(gsm8k::gold_answer("$5.50").to_string(), "5.5");
    assert_eq!(gsm8k::gold_answer("#### Tuesday"), Gold::Text("Tuesday".into()));
}

#[test]
fn extraction_order_is_tag_box_hashes_last_number() {
    let all = "<answer>7</answer> \\boxed{8} #### 9 then 10";
    assert_eq!(extracted(all), Some(("7".into(), Source::AnswerTag)));
    assert_eq!(extracted("\\boxed{8} #### 9 then 10"), Some(("8".into(), Source::Boxed)));
    assert_eq!(extracted("#### 9\n\nQuestion: 10 eggs"), Some(("9".into(), Source::Hashes)));
    assert_eq!(extracted("we get 3 then 10."), Some(("10".into(), Source::LastNumber)));
    assert_eq!(extracted("no digits at all"), None);
    // A source without a number falls through to the next one.
    assert_eq!(extracted("<answer>eighteen</answer> \\boxed{18}"), Some(("18".into(), Source::Boxed)));
    // Prose in the tag around its one number.
    assert_eq!(extracted("<answer>The answer is 18 apples.</answer>"), Some(("18".into(), Source::AnswerTag)));
    // Several numbers in the tag are no single answer, and the box after it is not consulted.
    assert_eq!(gsm8k::extract("<answer>3 bags of 6 make 18</answer> \\boxed{18}"), Extraction::NotSingle { source: Source::AnswerTag, content: "3 bags of 6 make 18".into() });
    // The last complete tag wins; an unclosed trailing one does not hide it.
    assert_eq!(extracted("<answer>5</answer> <answer>6</answer> <answer>7"), Some(("6".into(), Source::AnswerTag)));
}

#[test]
fn numbers_compare_numerically_across_formats() {
    for answer in ["18", "18.0", "18.00", "$18", "\\$18", "18%", "018", "<answer>$18.</answer>", "\\boxed{18}", "\\boxed{\\$18}"] {
        assert!(correct(answer, REFERENCE), "{answer}");
    }
    for answer in ["1,000", "1000", "1000.0", "$1,000.00", "<answer>1,000</answer>", "\\boxed{1{,}000}"] {
        assert!(correct(answer, "#### 1,000"), "{answer}");
    }
    assert!(correct("The temperature fell to -5 degrees.", "#### -5"));
    assert!(correct("<answer>-5</answer>", "#### -5"));
    assert!(correct("<answer>0.5</answer>", "#### .5"));
    assert!(correct("<answer>2.50</answer>", "#### 2.5"));
}

#[test]
fn wrong_answers_are_wrong() {
    for answer in ["17", "19", "180", "1.8", "-18", "<answer>17</answer> 18", "\\boxed{17}. So 18", "", "eighteen"] {
        assert!(!correct(answer, REFERENCE), "{answer:?}");
    }
    assert!(!correct("1,000,000", "#### 1,000"));
    assert!(!correct("10-5", "#### -5")); // a binary minus is not a sign: the last number is 5
    assert!(!correct("<answer>1000.1</answer>", "#### 1000"));
    assert!(!correct("anything", "#### Tuesday"));
}

#[test]
fn reasons_and_extractions_are_reported() {
    let s = gsm8k::grade("<answer>17</answer>", REFERENCE);
    assert_eq!(s.extracted.as_deref(), Some("17"));
    assert!(s.reason.contains("wrong") && s.reason.contains("17") && s.reason.contains("18"), "{}", s.reason);
    let s = gsm8k::grade("nothing", REFERENCE);
    assert_eq!(s.extracted, None);
    assert!(s.reason.contains("no number"), "{}", s.reason);
}

#[test]
fn the_reward_reads_the_problem_answer() {
    let p = Problem { id: "t".into(), prompt: "q".into(), answer: REFERENCE.into(), task: Task::Gsm8k, record: serde_json::Value::Null, messages: None, prompt_field: None };
    assert_eq!(Gsm8kReward.name(), "gsm8k");
    assert_eq!(Gsm8kReward.score("<answer>18</answer>", &p).value, 1.0);
    assert_eq!(Gsm8kReward.score("<answer>19</answer>", &p).value, 0.0);
}

/// The content of a tag or box is the answer: one number after the last `=`, decoration ignored.
#[test]
fn tag_and_box_content_is_read_as_one_number() {
    let one = |span: &str, want: &str| {
        for completion in [format!("<think>\nwork 7 and 9\n</think>\n<answer>{span}</answer>"), format!("So 7 and 9 give $\\boxed{{{span}}}$.")] {
            let got = extracted(&completion);
            assert_eq!(got.as_ref().map(|(d, _)| d.as_str()), Some(want), "{completion:?}");
        }
    };
    for span in [
        "18", " 18 ", "\n18\n", "18.", "18.00", "$18", "\\$18", "\\$18.00", "18%", "18\\%", "18 eggs", "18 dollars per day",
        "The answer is 18.", "Janet makes $18 every day.", "**18**", "\\textbf{18}", "18 \\text{ dollars}", "\\text{\\$}18",
        "\\$18 \\text{ per day}", "x = 18", "9 \\times 2 = 18", "16 - 3 - 4 = 9, 9 * 2 = $18", "9 * 2 = 18 dollars", "\\(18\\)",
        "$18$", "\\boxed{18}", "18 \\, \\text{eggs}", "18\\!", "18 m^2", "18 \\text{ m}^2", "18 \\text{ ft}^{2}", "18^\\circ",
        "18/1", "36/2", "\\frac{36}{2}", "\\dfrac{36}{2}", "18 \\text{ dollars/day}",
    ] {
        one(span, "18");
    }
    for (span, want) in [
        ("1,000", "1000"), ("1{,}000", "1000"), ("1,\\!000", "1000"), ("1\\,000", "1000"), ("$1,000.50", "1000.5"),
        ("-5", "-5"), ("\u{2212}5", "-5"), ("$-5", "-5"), ("-$5", "-5"), ("x = -5", "-5"), ("(-5)", "-5"), ("0.5", "0.5"), (".5", "0.5"),
        ("\\frac{1}{2}", "0.5"), ("\\dfrac{1}{2}", "0.5"), ("\\tfrac{1}{2}", "0.5"), ("\\frac12", "0.5"), ("\\frac 1 2", "0.5"),
        ("1/2", "0.5"), ("1 / 2", "0.5"), ("-\\frac{3}{4}", "-0.75"), ("\\frac{-3}{4}", "-0.75"), ("-\\frac{-3}{4}", "0.75"),
        ("\\frac{3}{8} \\text{ cup}", "0.375"), ("\\frac{1,000}{4}", "250"), ("\\frac{2.5}{0.5}", "5"), ("\\frac{1}{3}", "1/3"),
        ("-\\frac{2}{6}", "-1/3"), ("\\frac{1}{0}", "1/0"), ("25\\%", "25"),
    ] {
        one(span, want);
    }
    // Several numbers, or a fraction of non-numbers: no single answer, graded incorrect even when one of
    // the numbers is the gold.
    for span in [
        "18 - 3", "15 + 3", "3 bags of 6 make 18", "5 hours and 18 minutes", "18 or 19", "2^{10}", "10^2", "1.8 \\times 10^1",
        "\\frac{x}{18}", "\\frac{18-3}{1}", "\\sqrt{18}", "2\\frac{1}{2}", "18, 19", "3/4/18", "x = 5, y = 18 - 3",
    ] {
        for completion in [format!("<answer>{span}</answer> so 18"), format!("\\boxed{{{span}}} and then 18")] {
            assert!(matches!(gsm8k::extract(&completion), Extraction::NotSingle { .. }), "{completion:?}");
            let s = gsm8k::grade(&completion, "#### 18");
            assert_eq!((s.correct, s.extracted.as_deref()), (Some(false), None), "{completion:?}");
            assert!(s.reason.contains("not a single answer"), "{}", s.reason);
        }
    }
    // A span without any number falls through; `=` with nothing after it leaves no number.
    assert_eq!(extracted("<answer>eighteen</answer> \\boxed{18}"), Some(("18".into(), Source::Boxed)));
    assert_eq!(extracted("<answer>18 =</answer> then 17"), Some(("17".into(), Source::LastNumber)));
}

#[test]
fn fractions_compare_exactly() {
    assert!(correct("\\boxed{\\frac{1}{2}}", "#### 0.5"));
    assert!(!correct("\\boxed{\\frac{1}{2}}", "#### 2"));
    assert!(!correct("\\boxed{\\frac{1}{2}}", "#### 1"));
    assert!(correct("<answer>\\frac{36}{2}</answer>", REFERENCE));
    assert!(correct("<answer>7/4</answer>", "#### 1.75"));
    // 1/3 has no decimal: equal to no gold, however close.
    for gold in ["#### 0.33", "#### 0.3333333333", "#### 0"] {
        assert!(!correct("\\boxed{\\frac{1}{3}}", gold), "{gold}");
    }
    let s = gsm8k::grade("\\boxed{\\frac{2}{6}}", "#### 0.33");
    assert_eq!(s.extracted.as_deref(), Some("1/3"));
}
