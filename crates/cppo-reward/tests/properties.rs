//! Property tests: graders are total and bounded on arbitrary input, numbers written many ways equal
//! themselves, and equivalence agrees with brute-force oracles (rational arithmetic, polynomial
//! coefficients, an exhaustive reading of the CPPO format regex).

use cppo_core::{Problem, Task};
use cppo_reward::format::format_violation;
use cppo_reward::limits::STEP_BUDGET;
use cppo_reward::{gsm8k, math, reward_by_name, REWARD_NAMES};
use proptest::prelude::*;

/// Strings made of the pieces graders care about, so random input reaches deep into the parsers.
fn latexish() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "\\frac", "\\dfrac", "\\sqrt", "{", "}", "(", ")", "[", "]", "\\{", "\\}", "^", "_", ",", ";", "=", "+", "-",
        "*", "/", "!", "|", "&", "\\\\", "\\cup", "\\pm", "\\in", "\\approx", "\\left", "\\right", "\\text{", "\\boxed{",
        "\\boxed ", "\\fbox{", "<answer>", "</answer>", "<think>", "</think>", "\n", "$", "\\$", "\\%", "^\\circ", "\\!",
        "\\,", " ", "x", "y", "e", "i", "a_1", "\\pi", "\\infty", "\\theta", "\\sin", "\\log_", "\\cdot", "0", "1", "2",
        "10", "0.5", ".5", "1,000", "{,}", "####", "\\begin{pmatrix}", "\\end{pmatrix}", "\\begin{array}{cc}",
        "\\end{array}", "\\mathbb{R}", "May", "answer is", "\u{221e}", "\u{2212}", "é",
    ]);
    prop::collection::vec(pieces, 0..40).prop_map(|v| v.concat())
}

fn problem(task: Task, answer: &str) -> Problem {
    Problem { id: "p".into(), prompt: String::new(), answer: answer.into(), task, record: serde_json::Value::Null, messages: None, prompt_field: None }
}

fn check_total(completion: &str, reference: &str) {
    for task in [Task::Gsm8k, Task::Math] {
        let p = problem(task, reference);
        for name in REWARD_NAMES {
            let r = reward_by_name(name).expect("known name");
            let s = r.score(completion, &p);
            // Every shipped reward is in [0, 1]; the graders and the format reward are exactly 0 or 1.
            if *name == "brevity" {
                assert!(s.value > 0.0 && s.value <= 1.0, "{name}: {s:?}");
            } else {
                assert!(s.value == 0.0 || s.value == 1.0, "{name}: {s:?}");
            }
        }
    }
    let v = math::compare(completion, reference);
    assert!(v.steps <= STEP_BUDGET);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn graders_never_panic_on_arbitrary_strings(a in any::<String>(), b in any::<String>()) {
        check_total(&a, &b);
    }

    #[test]
    fn graders_never_panic_on_latex_like_strings(a in latexish(), b in latexish()) {
        check_total(&a, &b);
    }

    #[test]
    fn every_answer_equals_itself(a in latexish()) {
        prop_assert!(math::compare(&a, &a).equal, "{a:?}");
        // A reference graded against itself is correct whenever it has a complete box to read.
        let boxed = format!("\\boxed{{{a}}}");
        if cppo_reward::scan::last_boxed(&boxed).is_some() {
            prop_assert_eq!(math::grade(&boxed, &boxed).correct, Some(true), "{:?}", boxed);
        }
    }

    #[test]
    fn equivalence_is_symmetric(a in latexish(), b in latexish()) {
        prop_assert_eq!(math::compare(&a, &b).equal, math::compare(&b, &a).equal, "{:?} vs {:?}", a, b);
    }

    #[test]
    fn gsm8k_numbers_equal_themselves_in_many_formats(n in -10_000_000i64..10_000_000, frac in prop::option::of(1u32..100)) {
        let plain = match frac {
            Some(f) => format!("{n}.{f:02}"),
            None => n.to_string(),
        };
        let gold = format!("#### {plain}");
        let int_part = n.unsigned_abs().to_string();
        let grouped: String = int_part.chars().rev().collect::<Vec<_>>().chunks(3).map(|c| c.iter().collect::<String>()).collect::<Vec<_>>().join(",").chars().rev().collect();
        let sign = if n < 0 { "-" } else { "" };
        let tail = frac.map(|f| format!(".{f:02}")).unwrap_or_default();
        let variants = [
            plain.clone(),
            format!("{sign}{grouped}{tail}"),
            format!("{sign}${grouped}{tail}"),
            // A trailing zero in the fraction changes nothing.
            if frac.is_some() { format!("{plain}0") } else { format!("{plain}.00") },
            format!("0{plain}").replacen("0-", "-0", 1),
            format!("<answer>{plain}</answer>"),
            format!("<answer>The answer is {sign}{grouped}{tail}.</answer>"),
            format!("\\boxed{{{plain}}}"),
            format!("so it is {plain}%"),
        ];
        for v in &variants {
            let s = gsm8k::grade(v, &gold);
            prop_assert_eq!(s.correct, Some(true), "{:?} vs {:?}: {}", v, gold, s.reason);
        }
        let off = format!("<answer>{}</answer>", n + 1);
        prop_assert_eq!(gsm8k::grade(&off, &format!("#### {n}")).correct, Some(false));
    }

    #[test]
    fn math_numbers_equal_themselves_in_many_formats(n in -100_000i64..100_000, k in 1i64..50) {
        let variants = [
            format!("{n}"),
            format!("{n}.0"),
            format!("{{{n}}}"),
            format!("\\left({n}\\right)"),
            format!("\\frac{{{}}}{{{k}}}", n * k),
            format!("{}/{k}", n * k),
            format!("{n}^{{1}}"),
            format!("x = {n}"),
            format!("{n}\\text{{ units}}"),
            format!("\\sqrt{{{}}}", n * n).replace("\\sqrt", if n < 0 { "-\\sqrt" } else { "\\sqrt" }),
        ];
        for v in &variants {
            prop_assert!(math::is_equiv(v, &n.to_string()), "{v:?} vs {n}");
        }
        let (next, off) = ((n + 1).to_string(), format!("\\frac{{{}}}{{{k}}}", n * k + 1));
        prop_assert!(!math::is_equiv(&next, &n.to_string()));
        prop_assert!(!math::is_equiv(&off, &n.to_string()));
    }

    #[test]
    fn fractions_agree_with_rational_arithmetic(p in -60i64..60, q in 1i64..60, r in -60i64..60, s in 1i64..60) {
        let a = format!("\\frac{{{p}}}{{{q}}}");
        let b = format!("\\dfrac{{{r}}}{{{s}}}");
        prop_assert_eq!(math::is_equiv(&a, &b), p * s == r * q, "{} vs {}", a, b);
        let c = format!("{r}/{s}");
        prop_assert_eq!(math::is_equiv(&a, &c), p * s == r * q, "{} vs {}", a, c);
    }

    #[test]
    fn polynomials_agree_with_their_coefficients(
        c in prop::collection::vec(-5i64..6, 1..5),
        d in prop::collection::vec(-5i64..6, 1..5),
        order in any::<u64>(),
    ) {
        let render = |coef: &[i64], rotate: u64| {
            let terms: Vec<String> = coef.iter().enumerate().filter(|(_, &k)| k != 0).map(|(i, &k)| match i {
                0 => format!("{k}"),
                1 => format!("{k}x"),
                _ => format!("{k}x^{{{i}}}"),
            }).collect();
            if terms.is_empty() {
                return "0".to_string();
            }
            let r = rotate as usize % terms.len();
            let mut t = terms[r..].to_vec();
            t.extend_from_slice(&terms[..r]);
            t.join("+").replace("+-", "-")
        };
        let trim = |v: &[i64]| { let mut v = v.to_vec(); while v.last() == Some(&0) { v.pop(); } v };
        let (a, b) = (render(&c, order), render(&d, order / 7));
        // Same variables are required, so compare only when both mention x or neither does.
        let uses_x = |v: &[i64]| v.iter().skip(1).any(|&k| k != 0);
        prop_assume!(uses_x(&c) == uses_x(&d));
        prop_assert_eq!(math::is_equiv(&a, &b), trim(&c) == trim(&d), "{} vs {}", a, b);
    }

    #[test]
    fn format_reward_matches_an_exhaustive_reading_of_the_regex(parts in prop::collection::vec(
        prop::sample::select(vec!["<think>", "</think>", "<answer>", "</answer>", "\n", " ", "a", "\r"]), 0..14)) {
        let s = parts.concat();
        prop_assert_eq!(format_violation(&s).is_none(), brute_force_format(&s), "{:?}", s);
    }
}

/// p / q by long division, digit by digit: the exact decimal when it ends within 40 digits, else `None`.
fn long_division(p: i64, q: i64) -> Option<String> {
    let (n, d) = (p.unsigned_abs(), q.unsigned_abs());
    let mut out = format!("{}{}", if (p < 0) != (q < 0) && p != 0 { "-" } else { "" }, n / d);
    let mut rem = n % d;
    if rem != 0 {
        out.push('.');
    }
    for _ in 0..40 {
        if rem == 0 {
            return Some(out);
        }
        rem *= 10;
        out.push(char::from(b'0' + (rem / d) as u8));
        rem %= d;
    }
    (rem == 0).then_some(out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// A fraction in a tag or box is graded as the exact rational p / q: right against its decimal
    /// exactly when long division ends, never against a rounding of one that does not.
    #[test]
    fn gsm8k_fractions_agree_with_long_division(p in -3000i64..3000, q in 1i64..3000, form in 0usize..5, tag in any::<bool>()) {
        let span = match form {
            0 => format!("\\frac{{{p}}}{{{q}}}"),
            1 => format!("\\dfrac{{{p}}}{{{q}}} \\text{{ cups}}"),
            2 => format!("{p}/{q}"),
            3 => format!("x = {p} / {q}"),
            _ if p < 0 => format!("-\\tfrac{{{}}}{{{q}}}", -p),
            _ => format!("\\tfrac{{{p}}}{{{q}}}"),
        };
        let completion = if tag { format!("<answer>{span}</answer>") } else { format!("so $\\boxed{{{span}}}$") };
        match long_division(p, q) {
            Some(exact) => {
                let s = gsm8k::grade(&completion, &format!("#### {exact}"));
                prop_assert_eq!(s.correct, Some(true), "{:?} vs {}: {}", completion, exact, s.reason);
                let s = gsm8k::grade(&completion, &format!("#### {exact}1"));
                prop_assert_eq!(s.correct, Some(false), "{:?}: {}", completion, s.reason);
            }
            None => {
                let rounded = format!("{:.6}", p as f64 / q as f64);
                let s = gsm8k::grade(&completion, &format!("#### {rounded}"));
                prop_assert_eq!(s.correct, Some(false), "{:?} vs {}: {}", completion, rounded, s.reason);
                // Reported as the reduced fraction: the largest common divisor by trial.
                let g = (1..=q).rev().find(|d| p % d == 0 && q % d == 0).unwrap_or(1);
                prop_assert_eq!(s.extracted, Some(format!("{}/{}", p / g, q / g)), "{:?}", completion);
            }
        }
        // The numerator alone (the old "last number" reading would give q) is wrong unless p / q = p.
        let s = gsm8k::grade(&completion, &format!("#### {q}"));
        prop_assert_eq!(s.correct, Some(p == q * q), "{:?}: {}", completion, s.reason);
    }

    /// A tag or box holding two numbers joined by anything is no answer, whichever number is the gold.
    #[test]
    fn gsm8k_spans_with_two_numbers_are_never_correct(
        a in 0i64..100_000, b in 0i64..100_000,
        joiner in prop::sample::select(vec![" - ", "-", " + ", " and ", ", ", " \\times ", "\\cdot", " or ", " to ", " per ", " hours ", "/x/", "^"]),
        tag in any::<bool>(),
    ) {
        let span = format!("{a}{joiner}{b}");
        let completion = if tag { format!("<answer>{span}</answer> {a}") } else { format!("\\boxed{{{span}}} {b}") };
        for gold in [a, b] {
            let s = gsm8k::grade(&completion, &format!("#### {gold}"));
            prop_assert_eq!((s.correct, s.extracted.as_deref()), (Some(false), None), "{:?}: {}", completion, s.reason);
        }
    }

    /// Working before the last `=`, words and units around the result: the result is the answer.
    #[test]
    fn gsm8k_the_part_after_the_last_equals_sign_is_the_answer(
        a in 0i64..1000, b in 0i64..1000, n in -100_000i64..100_000,
        prefix in prop::sample::select(vec!["", "The answer is ", "Total: ", "$", "\\text{so } "]),
        unit in prop::sample::select(vec!["", " eggs", " \\text{ dollars}", ".", "\\%", " km^2", " \\text{ m}^{2}"]),
    ) {
        let completion = format!("<answer>{prefix}{a} + {b} = {} = {n}{unit}</answer>", a + b);
        let s = gsm8k::grade(&completion, &format!("#### {n}"));
        prop_assert_eq!(s.correct, Some(true), "{:?}: {}", completion, s.reason);
        let s = gsm8k::grade(&completion, &format!("#### {}", a + b));
        prop_assert_eq!(s.correct, Some(a + b == n), "{:?}: {}", completion, s.reason);
    }
}

/// `^<think>.*?</think>\n<answer>.*?</answer>$` under DOTALL | MULTILINE with `re.match`: try every
/// position of the middle and closing tags.
fn brute_force_format(s: &str) -> bool {
    const MIDDLE: &str = "</think>\n<answer>";
    if !s.starts_with("<think>") {
        return false;
    }
    (7..=s.len()).filter(|&p| s.is_char_boundary(p) && s[p..].starts_with(MIDDLE)).any(|p| {
        (p + MIDDLE.len()..=s.len()).filter(|&q| s.is_char_boundary(q)).any(|q| {
            let rest = &s[q..];
            rest.starts_with("</answer>") && {
                let after = &rest["</answer>".len()..];
                after.is_empty() || after.starts_with('\n')
            }
        })
    })
}
