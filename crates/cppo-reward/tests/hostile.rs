//! Hostile input: deep nesting, huge numbers, megabyte strings, unbalanced braces. Every call must return
//! a verdict (no panic, no stack overflow) and spend no more work than its budget; the caps that make
//! this so are checked directly, and each deep or megabyte case must finish within a wall-clock bound.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use cppo_reward::limits::{MAX_ANSWER_BYTES, MAX_COMPLETION_BYTES, MAX_DEPTH, STEP_BUDGET};
use cppo_reward::math::{self, How};
use cppo_reward::{format, gsm8k};
use proptest::prelude::*;

const MB: usize = 1 << 20;

/// Wall-clock bound for one hostile case (a few grader calls on up to 2 MB of input). Measured in the
/// unoptimised test build on the project's 2-core machine: at most 0.4 s per case (the 1 MB `1,000,`
/// run graded three times), most under 0.15 s. The bound is over 10x that, so a loaded machine does not
/// trip it, while quadratic work on 1 MB (about 10^12 steps) or exponential work misses it by hours.
const CASE_BOUND: Duration = Duration::from_secs(5);

/// Runs `case` on its own thread and fails when it has not finished within [`CASE_BOUND`]: the test
/// fails at the bound instead of hanging until a super-linear case completes. A panic in the case is
/// re-raised here.
fn within_bound(label: &str, case: impl FnOnce() + Send + 'static) {
    within(CASE_BOUND, label, case)
}

fn within(bound: Duration, label: &str, case: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let start = Instant::now();
    let worker = thread::spawn(move || {
        case();
        let _ = done.send(());
    });
    match finished.recv_timeout(bound) {
        Ok(()) => worker.join().expect("the case finished"),
        Err(RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("a case that returns reports it"),
        },
        Err(RecvTimeoutError::Timeout) => {
            panic!("{label}: still running after {:?} (bound {bound:?}): super-linear work on hostile input?", start.elapsed())
        }
    }
}

fn label(s: &str) -> String {
    format!("{:?} ({} bytes)", s.chars().take(40).collect::<String>(), s.len())
}

fn grade_everything(completion: &str, reference: &str) {
    let m = math::grade(completion, reference);
    let g = gsm8k::grade(completion, reference);
    let _ = format::format_violation(completion);
    assert!(m.value.is_finite() && g.value.is_finite());
    assert!(m.reason.len() < 1000 && g.reason.len() < 1000, "reasons are clipped: {} / {}", m.reason.len(), g.reason.len());
}

#[test]
fn huge_numbers_are_not_equal_to_each_other() {
    for (a, b) in [
        ("10^{10^{10}}", "10^{10^{11}}"),
        ("10^10^10", "10^10^11"),
        ("2^{100000}", "2^{100000}+1"),
        ("9!!!", "9!!!+1"),
        ("\\binom{10^{9}}{5\\cdot10^{8}}", "0"),
        (&"9".repeat(4000), &format!("{}8", "9".repeat(3999))),
    ] {
        let v = math::compare(a, b);
        assert!(!v.equal, "{a} vs {b}: {v:?}");
        assert!(math::compare(a, a).equal);
    }
    // Large but exact powers still compare exactly.
    assert!(math::is_equiv("2^{100}", "1267650600228229401496703205376"));
    assert!(!math::is_equiv("2^{100}", "1267650600228229401496703205377"));
}

#[test]
fn deep_nesting_hits_the_depth_cap_not_the_stack() {
    let depth = 5000;
    let cases = [
        format!("{}1{}", "{".repeat(depth), "}".repeat(depth)),
        format!("{}1{}", "(".repeat(depth), ")".repeat(depth)),
        format!("{}1{}", "\\frac{1}{".repeat(depth), "}".repeat(depth)),
        format!("{}x", "-".repeat(depth)),
        format!("x{}", "^x".repeat(depth)),
        format!("{}1{}", "\\sqrt{".repeat(depth), "}".repeat(depth)),
        format!("{}1{}", "\\{".repeat(depth), "\\}".repeat(depth)),
        format!("{}1{}", "\\begin{pmatrix}".repeat(depth / 10), "\\end{pmatrix}".repeat(depth / 10)),
        format!("1{}", "+1".repeat(depth)),
    ];
    for a in cases {
        within_bound(&label(&a), move || {
            let short: String = a.chars().take(40).collect();
            let v = math::compare(&a, "1");
            assert!(v.steps <= STEP_BUDGET, "{short}: {v:?}");
            assert!(math::compare(&a, &a).equal, "{short}");
            grade_everything(&format!("\\boxed{{{a}}}"), &a);
        });
    }
    // Just within the caps, nesting is still understood.
    let ok = format!("{}1{}", "(".repeat(MAX_DEPTH / 2), ")".repeat(MAX_DEPTH / 2));
    assert!(math::is_equiv(&ok, "1"));
    let too_deep = format!("{}1{}", "{".repeat(MAX_DEPTH + 5), "}".repeat(MAX_DEPTH + 5));
    assert_eq!(math::compare(&too_deep, "1").how, How::Malformed);
}

#[test]
fn unbalanced_braces_compare_as_text() {
    for a in ["{", "}", "\\frac{1}{2", "\\boxed{", "((1,2)", "[0,1))", "\\left( 1", "\\{1,2", "\\begin{pmatrix}1"] {
        assert!(math::compare(a, a).equal, "{a}");
        assert!(!math::compare(a, "1").equal, "{a}");
        grade_everything(a, a);
    }
    let v = math::compare("\\frac{1}{2", "\\frac{1}{2}");
    assert_eq!((v.equal, v.how), (false, How::Malformed));
}

#[test]
fn megabyte_strings_are_handled_linearly() {
    let cases = [
        "\\boxed{".repeat(MB / 7),
        "{".repeat(MB),
        "}".repeat(MB),
        "1".repeat(MB),
        "1,000,".repeat(MB / 6),
        "<answer>".repeat(MB / 8),
        "$".repeat(MB),
        "\\(".repeat(MB / 2),
        "answer is ".repeat(MB / 10),
        "<think>".repeat(MB / 7) + "</think>\n<answer>" + &"</answer> ".repeat(MB / 10),
        format!("\\boxed{{{}}}", "x+".repeat(MB / 2)),
        "é".repeat(MB / 2),
        // Answer spans read as one number: fractions, unit exponents, slashes, `=` signs, spacing.
        format!("<answer>{}</answer>", "\\frac{1}{".repeat(MB / 10)),
        format!("<answer>{}</answer>", "\\frac ".repeat(MB / 6)),
        format!("<answer>18{}</answer>", " m^{".repeat(MB / 4)),
        format!("<answer>18{}</answer>", " ^".repeat(MB / 2)),
        format!("<answer>18{}</answer>", " /".repeat(MB / 2)),
        format!("<answer>{}18</answer>", "=".repeat(MB)),
        format!("\\boxed{{18{}}}", "\\,\\!\\text{x}".repeat(MB / 14)),
        format!("\\boxed{{{}}}", "1/".repeat(MB / 2)),
    ];
    for c in cases {
        within_bound(&label(&c), move || {
            grade_everything(&c, &c);
            grade_everything(&c, "#### 18");
            grade_everything(&c, "\\boxed{\\frac{1}{2}}");
        });
    }
    let long = "x".repeat(MAX_ANSWER_BYTES + 1);
    assert_eq!(math::compare(&long, &long).how, How::TooLong);
    assert!(!math::compare(&long, "x").equal);
    within_bound("a completion over the size cap", || {
        let too_long = "1".repeat(MAX_COMPLETION_BYTES + 1);
        let s = gsm8k::grade(&too_long, "#### 1");
        assert_eq!(s.correct, Some(false));
        assert!(s.reason.contains("too long"), "{}", s.reason);
    });
}

/// The readings added for issue 17 (several boxes, relations, chains, spaced thousands, answer
/// sentences, digits in words) on megabyte input: linear, and within the caps (measured in the test
/// build: at most 0.6 s per case, the `1,\! ` run).
#[test]
fn new_readings_stay_linear_on_megabyte_input() {
    let cases = [
        "\\boxed{1} and ".repeat(MB / 14),
        format!("{}\\boxed{{2}}", "\\boxed{1}, ".repeat(MB / 12)),
        "x<".repeat(MB / 2),
        format!("\\boxed{{{}}}", "x\\le ".repeat(MB / 6)),
        format!("\\boxed{{{}1}}", "x=".repeat(MB / 2)),
        format!("\\boxed{{{}}}", "1 ".repeat(MB / 2)),
        format!("<answer>{}</answer>", "1 000 ".repeat(MB / 6)),
        "1,\\! ".repeat(MB / 5),
        format!("The answer is {}", "1. ".repeat(MB / 3)),
        format!("the answer is {}", "A1".repeat(MB / 2)),
        format!("#### {}", "1\u{202f}000".repeat(MB / 8)),
        format!("{}\\boxed{{1}}", " and $x = \\boxed{1}$".repeat(MB / 22)),
    ];
    for c in cases {
        within_bound(&label(&c), move || {
            grade_everything(&c, &c);
            grade_everything(&c, "#### 18");
            grade_everything(&c, "\\boxed{1} and \\boxed{2}");
            let _ = math::explain(&c, "1, 2");
        });
    }
}

/// The readings added for issue 32 on megabyte input (final sentences, boxes with words between them,
/// "or" golds, labelled golds) and on answers at the size cap (matrix arithmetic, chains of equalities,
/// sets of tuples, absolute values, labelled golds): bounded in time and within the work budget
/// (measured in the test build: at most 0.9 s per case with other work loading the 2 cores 4x over).
#[test]
fn second_round_readings_stay_bounded() {
    let mega = [
        format!("Final Answer: the value is {}", "1 000 ".repeat(MB / 6)),
        format!("Final Answer: {}", "it is 3 ".repeat(MB / 8)),
        "\\boxed{1} cups and ".repeat(MB / 18),
        format!("<answer>{}</answer>", "x is 5 ".repeat(MB / 7)),
        "(1,2) or (2,1) ".repeat(MB / 15),
        "a=1, ".repeat(MB / 5),
        "1,5".repeat(MB / 3),
    ];
    // The MATH grader only: these readings are its own, and GSM8K on the same megabytes is timed above.
    for c in mega {
        within_bound(&label(&c), move || {
            for gold in [c.as_str(), "(2,1) or (1,2)", "p=5, q=2; p=7, q=2"] {
                let s = math::grade(&c, gold);
                assert!(s.reason.len() < 1000, "reasons are clipped: {}", s.reason.len());
            }
            assert!(math::grade("\\boxed{1}", &c).reason.len() < 1000);
            let _ = math::explain(&c, "1, 2");
        });
    }
    let matrix = |cells: &[&str], sep: &str| format!("\\begin{{pmatrix}}{}\\end{{pmatrix}}", cells.join(sep));
    let (row, column) = (matrix(&["1"; 255], "&"), matrix(&["1"; 255], "\\\\"));
    let square = matrix(&["1&1", "1&1"], "\\\\");
    let capped = [
        format!("{column}{row}"),
        format!("{row}{column}"),
        format!("{row}+{row}-2{row}"),
        square.repeat(MAX_ANSWER_BYTES / square.len()),
        format!("{}=1", ["1"; 1000].join("=")),
        (0..300).map(|k| format!("({k},{k})")).collect::<Vec<_>>().join(","),
        format!("1\\le|{}x|\\le2", "1+".repeat(1000)),
        (0..300).map(|k| format!("a_{{{k}}}={k}")).collect::<Vec<_>>().join(","),
        (0..200).map(|k| format!("p={k},q={k}")).collect::<Vec<_>>().join(";"),
    ];
    for c in capped {
        assert!(c.len() <= MAX_ANSWER_BYTES, "{} bytes", c.len());
        within_bound(&label(&c), move || {
            for other in ["1", "x", &c] {
                let v = math::compare(&c, other);
                assert!(v.steps <= STEP_BUDGET);
            }
            assert!(math::compare(&c, &c).equal);
            grade_everything(&format!("\\boxed{{{c}}}"), &c);
            grade_everything("\\boxed{1, 2}", &c);
        });
    }
}

/// The bound itself: a case that outlives it fails the test, and a case's own panic is not hidden.
#[test]
fn the_wall_clock_bound_fails_slow_cases() {
    let slow = std::panic::catch_unwind(|| within(Duration::from_millis(50), "sleeper", || thread::sleep(Duration::from_secs(2))));
    let message = slow.expect_err("a case past the bound fails");
    let message = message.downcast_ref::<String>().expect("a formatted message");
    assert!(message.contains("sleeper: still running after"), "{message}");
    let failing = std::panic::catch_unwind(|| within_bound("failing", || panic!("the case's own failure")));
    within_bound("quick", || ());
    let message = failing.expect_err("a failing case fails");
    assert_eq!(message.downcast_ref::<&str>(), Some(&"the case's own failure"));
}

#[test]
fn the_work_budget_bounds_big_unordered_comparisons() {
    // 60 distinct polynomials against the same list reversed: greedy matching evaluates many pairs.
    let items: Vec<String> = (1..=60).map(|k| format!("x^{{{k}}}+{k}x+\\sqrt{{x+{k}}}")).collect();
    let forward = items.join(", ");
    let backward: Vec<String> = items.iter().rev().cloned().collect();
    let backward = backward.join(", ");
    let (f, b) = (forward.clone(), backward.clone());
    within_bound("60 polynomials against the list reversed", move || {
        let full = math::compare(&f, &b);
        assert!(full.equal, "{full:?}");
        assert!(full.steps <= STEP_BUDGET);
    });
    let small = math::compare_with_budget(&forward, &backward, 500);
    assert_eq!((small.equal, small.how), (false, How::BudgetExhausted));
    assert!(small.steps <= 500, "{small:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_hostile_compositions_stay_within_budget(
        unit in prop::sample::select(vec!["{", "}", "(", ")", "\\frac{", "\\sqrt{", "^", "10^", "!", "x", "\\{", ",", "\\pm", "\\cup", "=", "-", "\\boxed{"]),
        repeat in 1usize..3000,
        tail in prop::sample::select(vec!["", "}", ")", "1", "x}"]),
    ) {
        let a = format!("{}{}", unit.repeat(repeat), tail);
        let v = math::compare(&a, "x");
        prop_assert!(v.steps <= STEP_BUDGET);
        prop_assert!(math::compare(&a, &a).equal);
        grade_everything(&a, "\\boxed{x}");
    }
}
