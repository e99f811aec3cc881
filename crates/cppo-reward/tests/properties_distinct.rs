//! No false positives from the readings added for issue 17: distinct numbers, equations, intervals and
//! labelled values never grade equal, in whichever new form they are written (long decimals, spaced
//! thousands, inequalities, named left sides, several boxes, answer sentences), while the same value in
//! another form does. The oracles are exact integer arithmetic.

use cppo_reward::{gsm8k, math};
use proptest::prelude::*;

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 { a.abs() } else { gcd(b, a % b) }
}

/// `p / q` written one of several ways; `q > 0`.
fn rational(p: i64, q: i64, form: usize) -> String {
    let g = gcd(p, q).max(1);
    let (p, q) = (p / g, q / g);
    match form {
        0 => format!("\\frac{{{p}}}{{{q}}}"),
        1 => format!("{p}/{q}"),
        // A floating-point printout: 17 significant digits, long enough to be read as a rounding.
        2 => format!("{:.16e}", p as f64 / q as f64).parse::<f64>().map(|x| format!("{x:.17}")).unwrap_or_default(),
        3 => format!("x = {}", rational(p, q, 0)),
        4 => format!("|AB| = {}", rational(p, q, 1)),
        5 => format!("k = {p} \\cdot 1 = \\frac{{{p}}}{{{q}}}"),
        _ => format!("\\left( \\dfrac{{{p}}}{{{q}}} \\right)"),
    }
}

/// `n` with thousands written as MATH and models write them.
fn grouped(n: u64, form: usize) -> String {
    let digits = n.to_string();
    let groups: Vec<String> = digits.as_bytes().rchunks(3).rev().map(|c| String::from_utf8_lossy(c).into_owned()).collect();
    match form {
        0 => groups.join(",\\! "),
        1 => groups.join(" "),
        2 => groups.join("{,}"),
        _ => digits,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn distinct_rationals_never_equal(p in -60i64..60, q in 1i64..60, r in -60i64..60, s in 1i64..60, f in 0usize..7, g in 0usize..7) {
        let (a, b) = (rational(p, q, f), rational(r, s, g));
        prop_assert_eq!(math::is_equiv(&a, &b), p * s == r * q, "{} vs {}", a, b);
        let graded = math::grade(&format!("so \\boxed{{{a}}}"), &b).correct == Some(true);
        prop_assert_eq!(graded, p * s == r * q, "{} vs {}", a, b);
    }

    /// The nearest misses: a neighbouring fraction, and the printout of `p / q` off in its 2nd to 8th
    /// significant digit (a long decimal is matched to 9 digits, see the README's rule).
    #[test]
    fn near_misses_of_a_long_decimal_never_equal(p in -60i64..60, q in 1i64..60, s in 1i64..60, digit in 1i32..8, f in 0usize..7) {
        let neighbour = rational(p * s + 1, q * s, 2);
        let exact = rational(p, q, f);
        prop_assert!(!math::is_equiv(&neighbour, &exact), "{} vs {}", neighbour, exact);
        prop_assume!(p != 0);
        let nudged = format!("{:.17}", p as f64 / q as f64 * (1.0 + 10f64.powi(-digit)));
        prop_assert!(!math::is_equiv(&nudged, &exact), "{} vs {}", nudged, exact);
        prop_assert!(math::is_equiv(&rational(p, q, 2), &exact), "{} vs {}", rational(p, q, 2), exact);
    }

    #[test]
    fn distinct_grouped_integers_never_equal(n in 0u64..100_000_000, m in 0u64..100_000_000, f in 0usize..4, g in 0usize..4) {
        let (a, b) = (grouped(n, f), grouped(m, g));
        prop_assert_eq!(math::is_equiv(&a, &b), n == m, "{} vs {}", a, b);
        let completion = format!("The final answer is {}. I hope it is correct.", grouped(n, f));
        prop_assert_eq!(math::grade(&completion, &m.to_string()).correct, Some(n == m), "{}", completion);
        let boxed = format!("\\boxed{{{}}}", grouped(n, f));
        prop_assert_eq!(gsm8k::grade(&boxed, &format!("#### {m}")).correct, Some(n == m), "{}", boxed);
    }

    #[test]
    fn equations_are_equal_exactly_when_proportional(
        a in -6i64..7, b in -6i64..7, c in -6i64..7, d in -6i64..7, e in -6i64..7, f in -6i64..7, k in 1i64..4, y_form in any::<bool>(),
    ) {
        // Both lines must be lines: some coefficient of x or y non-zero, and the same variables used.
        prop_assume!((a, b) != (0, 0) && (d, e) != (0, 0));
        prop_assume!((a != 0) == (d != 0) && (b != 0) == (e != 0));
        let line = |a: i64, b: i64, c: i64| format!("{a}x + {b}y + {c} = 0").replace("+ -", "- ");
        let left = line(a, b, c);
        // The second line as `y = ...` when it can be, else scaled by k.
        let right = if y_form && e != 0 {
            format!("y = \\frac{{{}}}{{{e}}}x + \\frac{{{}}}{{{e}}}", -d, -f)
        } else {
            line(k * d, k * e, k * f)
        };
        let proportional = a * e == b * d && a * f == c * d && b * f == c * e;
        prop_assert_eq!(math::is_equiv(&left, &right), proportional, "{} vs {}", left, right);
    }

    #[test]
    fn inequalities_equal_only_their_own_interval(
        lo in -20i64..20, width in 1i64..20, lo2 in -20i64..20, width2 in 1i64..20,
        closed in any::<(bool, bool)>(), closed2 in any::<(bool, bool)>(), flip in any::<bool>(),
    ) {
        let (hi, hi2) = (lo + width, lo2 + width2);
        let rel = |c: bool| if c { "\\le" } else { "<" };
        let grel = |c: bool| if c { "\\ge" } else { ">" };
        let inequality = if flip {
            format!("{hi} {} x {} {lo}", grel(closed.1), grel(closed.0))
        } else {
            format!("{lo} {} x {} {hi}", rel(closed.0), rel(closed.1))
        };
        let interval = format!("{}{lo2}, {hi2}{}", if closed2.0 { '[' } else { '(' }, if closed2.1 { ']' } else { ')' });
        let same = (lo, hi, closed) == (lo2, hi2, closed2);
        prop_assert_eq!(math::is_equiv(&inequality, &interval), same, "{} vs {}", inequality, interval);
    }

    #[test]
    fn several_boxes_equal_only_the_same_items(xs in prop::collection::vec(-30i64..30, 1..4), ys in prop::collection::vec(-30i64..30, 1..4)) {
        let boxes: Vec<String> = xs.iter().map(|x| format!("\\boxed{{{x}}}")).collect();
        let completion = format!("The answers are {}.", boxes.join(" and "));
        let gold: Vec<String> = ys.iter().map(|y| y.to_string()).collect();
        let (mut sx, mut sy) = (xs.clone(), ys.clone());
        sx.sort_unstable();
        sy.sort_unstable();
        // Right when the boxes are the gold's items in any order, or the last box is the gold's one item.
        let right = sx == sy || (ys.len() == 1 && xs.last() == ys.first());
        prop_assert_eq!(math::grade(&completion, &gold.join(", ")).correct, Some(right), "{} vs {:?}", completion, gold);
    }

    #[test]
    fn gsm8k_new_readings_never_credit_another_number(n in 0i64..1_000_000, m in 0i64..1_000_000, form in 0usize..4) {
        let completion = match form {
            0 => format!("The final answer is {n}. I hope it is correct. It took 3 steps."),
            1 => format!("Item AZ{m}Q costs {n} dollars"),
            2 => format!("<answer>{}</answer>", grouped(n as u64, 1)),
            _ => format!("Total:\n#### {}", grouped(n as u64, 0)),
        };
        prop_assert_eq!(gsm8k::grade(&completion, &format!("#### {m}")).correct, Some(n == m), "{}", completion);
        prop_assert_eq!(gsm8k::grade(&completion, &format!("#### {n}")).correct, Some(true), "{}", completion);
    }
}
