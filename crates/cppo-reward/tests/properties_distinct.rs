//! No false positives from the readings added for issue 17: distinct numbers, equations, intervals and
//! labelled values never grade equal, in whichever new form they are written (long decimals, spaced
//! thousands, inequalities, named left sides, several boxes, answer sentences), while the same value in
//! another form does. The second round (issue 32) adds the same for its forms: digits split by spaces,
//! decimal commas, sets of tuples, labelled golds, "or" golds, matrix arithmetic, absolute values,
//! final sentences, chains of arithmetic and boxes with words between them. The oracles are exact
//! integer arithmetic.

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

fn sorted(v: &[i64]) -> Vec<i64> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v
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
        let (sx, sy) = (sorted(&xs), sorted(&ys));
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

/// `n` written with its digits split by spaces at `cuts` (positions from the left), which may or may
/// not be thousands groups.
fn spaced_at(n: u64, cuts: &[usize]) -> (String, bool) {
    let digits = n.to_string();
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % digits.len()).filter(|&c| c > 0).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = String::new();
    let mut last = 0;
    for &c in &cuts {
        out.push_str(&digits[last..c]);
        out.push(' ');
        last = c;
    }
    out.push_str(&digits[last..]);
    // Thousands groups: every cut leaves a multiple of three digits after it, the first group is 1 to 3
    // digits, and groups between cuts are exactly three.
    let mut ends: Vec<usize> = cuts.clone();
    ends.push(digits.len());
    let grouped = cuts.is_empty()
        || (cuts[0] <= 3 && ends.windows(2).all(|w| w[1] - w[0] == 3));
    (out, grouped)
}

/// `int,frac` with the fractional part written to `width` digits.
fn comma_decimal(int: u32, frac: u32, width: usize) -> String {
    format!("{int},{frac:0width$}")
}

/// 2x2 integer matrices as LaTeX.
fn pmatrix(m: [[i64; 2]; 2]) -> String {
    format!("\\begin{{pmatrix}}{}&{}\\\\{}&{}\\end{{pmatrix}}", m[0][0], m[0][1], m[1][0], m[1][1])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// A space between digits joins them only as a thousands separator; any other split is no number.
    #[test]
    fn spaced_digits_equal_a_number_only_as_thousands(n in 10u64..100_000_000, cuts in prop::collection::vec(1usize..9, 1..3), m in 0u64..100_000_000) {
        let (spaced, grouped) = spaced_at(n, &cuts);
        prop_assert_eq!(math::is_equiv(&spaced, &n.to_string()), grouped, "{}", spaced);
        prop_assert_eq!(math::is_equiv(&spaced, &m.to_string()), grouped && n == m, "{} vs {}", spaced, m);
    }

    /// A decimal comma equals the decimal with a point of the same value, and only that, where the comma
    /// cannot separate thousands; elsewhere it is what it was (a thousands separator or a list).
    #[test]
    fn decimal_commas_equal_only_their_own_value(int in 0u32..3000, frac in 0u32..10_000, width in 1usize..5, int2 in 0u32..3000, frac2 in 0u32..10_000, width2 in 1usize..5, same in any::<bool>()) {
        let (frac, frac2) = (frac % 10u32.pow(width as u32), frac2 % 10u32.pow(width2 as u32));
        // Half the time the point decimal is the comma decimal's own digits.
        let (int2, frac2, width2) = if same { (int, frac, width) } else { (int2, frac2, width2) };
        let comma = comma_decimal(int, frac, width);
        let point = format!("{int2}.{frac2:0width2$}");
        // Exact values as integers over 10^4.
        let scaled = |i: u32, f: u32, w: usize| i as u64 * 10_000 + f as u64 * 10u64.pow(4 - w as u32);
        let thousands = width == 3 && int > 0 && int < 1000;
        let want = if thousands {
            // `1,220` is 1220, equal to a decimal only when that decimal is the integer.
            frac2 == 0 && (int * 1000 + frac) as u64 == int2 as u64
        } else {
            scaled(int, frac, width) == scaled(int2, frac2, width2)
        };
        prop_assert_eq!(math::is_equiv(&comma, &point), want, "{} vs {}", comma, point);
        let graded = math::grade(&format!("\\boxed{{{point}}}"), &comma).correct == Some(true);
        prop_assert_eq!(graded, want, "{} vs gold {}", point, comma);
    }

    /// Collections of points are sets: equal exactly when the same points appear, repeats ignored.
    #[test]
    fn sets_of_tuples_equal_exactly_as_sets(xs in prop::collection::vec((-3i64..3, -3i64..3), 1..5), other in prop::collection::vec((-3i64..3, -3i64..3), 1..5), related in any::<bool>(), semicolons in any::<bool>()) {
        // Half the time the gold is the answer's points reordered, some repeated.
        let ys: Vec<(i64, i64)> = if related { xs.iter().rev().chain(xs.first()).copied().collect() } else { other };
        let sep = if semicolons { ";" } else { "," };
        let write = |v: &[(i64, i64)]| v.iter().map(|(a, b)| format!("({a}{sep}{b})")).collect::<Vec<_>>().join(", ");
        let (a, b) = (write(&xs), format!("\\{{{}\\}}", ys.iter().map(|(a, b)| format!("({a},{b})")).collect::<Vec<_>>().join(",")));
        let set = |v: &[(i64, i64)]| v.iter().copied().collect::<std::collections::BTreeSet<_>>();
        // One tuple alone is a tuple, not a collection of them.
        let want = set(&xs) == set(&ys) && xs.len() > 1;
        prop_assert_eq!(math::is_equiv(&a, &b), want, "{} vs {}", a, b);
    }

    /// A labelled gold is matched by its bare values in the labels' order, and by nothing else.
    #[test]
    fn labelled_golds_match_only_their_values_in_order(values in prop::collection::vec(-9i64..9, 2..4), other in prop::collection::vec(-9i64..9, 1..4), mode in 0usize..3) {
        let answer = match mode {
            0 => values.clone(),
            1 => values.iter().rev().copied().collect(),
            _ => other,
        };
        let names = ["AB", "CD", "EF"];
        let gold: Vec<String> = values.iter().zip(names).map(|(v, n)| format!("{n} = {v}")).collect();
        let said: Vec<String> = answer.iter().map(|v| v.to_string()).collect();
        let completion = format!("\\boxed{{{}}}", said.join(", "));
        prop_assert_eq!(math::grade(&completion, &gold.join(", ")).correct, Some(values == answer), "{} vs {:?}", completion, gold);
    }

    /// "or" between one tuple's orders accepts each; between anything else, no single item.
    #[test]
    fn or_golds_accept_a_single_item_only_when_it_is_the_tuple_reordered(a in -5i64..5, b in -5i64..5, cd in (-5i64..5, -5i64..5), xy in (-5i64..5, -5i64..5), swapped in any::<bool>(), pick in 0usize..3) {
        let (c, d) = if swapped { (b, a) } else { cd };
        let (x, y) = [(a, b), (b, a), xy][pick];
        let gold = format!("({a},{b}) or ({c},{d})");
        // The gold's two tuples are one reordered: either is accepted alone, and nothing else is.
        let reordered = (a.min(b), a.max(b)) == (c.min(d), c.max(d));
        let want = reordered && ((x, y) == (a, b) || (x, y) == (c, d));
        prop_assert_eq!(math::grade(&format!("\\boxed{{({x},{y})}}"), &gold).correct, Some(want), "({},{}) vs {}", x, y, gold);
    }

    /// Matrix sums, scalings and products equal exactly the matrix computed in integers.
    #[test]
    fn matrix_arithmetic_agrees_with_integer_arithmetic(p in prop::array::uniform2(prop::array::uniform2(-5i64..5)), q in prop::array::uniform2(prop::array::uniform2(-5i64..5)), k in -3i64..4, op in 0usize..3, nudge in prop::option::of((0usize..2, 0usize..2))) {
        let (expression, mut result) = match op {
            0 => (format!("{}+{}", pmatrix(p), pmatrix(q)), [[p[0][0] + q[0][0], p[0][1] + q[0][1]], [p[1][0] + q[1][0], p[1][1] + q[1][1]]]),
            1 => (format!("{k}{}", pmatrix(p)), [[k * p[0][0], k * p[0][1]], [k * p[1][0], k * p[1][1]]]),
            _ => {
                let cell = |i: usize, j: usize| p[i][0] * q[0][j] + p[i][1] * q[1][j];
                (format!("{}{}", pmatrix(p), pmatrix(q)), [[cell(0, 0), cell(0, 1)], [cell(1, 0), cell(1, 1)]])
            }
        };
        if let Some((i, j)) = nudge {
            result[i][j] += 1;
        }
        prop_assert_eq!(math::is_equiv(&expression, &pmatrix(result)), nudge.is_none(), "{} vs {}", expression, pmatrix(result));
    }

    /// `|x - c| <= r` (or `<`) is exactly the interval `[c - r, c + r]` with matching brackets, and
    /// `r1 <= |x| <= r2` exactly its two pieces.
    #[test]
    fn absolute_value_inequalities_equal_only_their_intervals(c in -9i64..9, r in 1i64..9, lo in -20i64..20, width in 1i64..20, exact in any::<bool>(), closed in any::<bool>(), brackets in any::<bool>(), r2 in 1i64..9) {
        let (lo, width) = if exact { (c - r, 2 * r) } else { (lo, width) };
        let (rel, open, close) = if closed { ("\\le", '[', ']') } else { ("<", '(', ')') };
        let inequality = format!("|x - {c}| {rel} {r}").replace("- -", "+ ");
        let (o, cl) = if brackets { (open, close) } else { (if closed { '(' } else { '[' }, if closed { ')' } else { ']' }) };
        let interval = format!("{o}{lo}, {}{cl}", lo + width);
        let want = brackets && lo == c - r && lo + width == c + r;
        prop_assert_eq!(math::is_equiv(&inequality, &interval), want, "{} vs {}", inequality, interval);
        let (inner, outer) = (r.min(r2), r.max(r2));
        prop_assume!(inner < outer);
        let ring = format!("{inner} \\le |x| \\le {outer}");
        let pieces = format!("[-{outer}, -{inner}] \\cup [{inner}, {outer}]");
        prop_assert!(math::is_equiv(&ring, &pieces), "{} vs {}", ring, pieces);
        let shifted = format!("[-{outer}, -{inner}] \\cup [{}, {outer}]", inner + 1);
        prop_assert!(!math::is_equiv(&ring, &shifted), "{} vs {}", ring, shifted);
    }

    /// A final sentence gives its value, only that, and only when nothing but words follows it; chains
    /// of arithmetic give their last side only when every step is true.
    #[test]
    fn final_sentences_and_chains_state_exactly_their_value(n in -999i64..999, m in -999i64..999, a in 1i64..30, b in 1i64..30, c in 1i64..900, extra in any::<bool>(), agree in any::<bool>()) {
        let (m, c) = if agree { (n, a * b) } else { (m, c) };
        let sentence = if extra {
            format!("Final Answer: the value of $k$ is {n} more than {m}.")
        } else {
            format!("Final Answer: the value of $k$ is {n} square units.")
        };
        prop_assert_eq!(math::grade(&sentence, &m.to_string()).correct, Some(!extra && n == m), "{}", sentence);
        let chain = format!("{a} \\cdot {b} = {c}");
        prop_assert_eq!(math::is_equiv(&chain, &c.to_string()), a * b == c, "{}", chain);
        prop_assert_eq!(math::is_equiv(&chain, &(a * b).to_string()), a * b == c, "{}", chain);
    }

    /// Several boxes with words between them equal only the same items.
    #[test]
    fn boxes_with_words_equal_only_the_same_items(xs in prop::collection::vec(-30i64..30, 2..4), other in prop::collection::vec(-30i64..30, 2..4), related in any::<bool>()) {
        let ys: Vec<i64> = if related { xs.iter().rev().copied().collect() } else { other };
        let boxes: Vec<String> = xs.iter().map(|x| format!("\\boxed{{{x}}} apples")).collect();
        let completion = format!("We get {}.", boxes.join(" and "));
        let gold: Vec<String> = ys.iter().map(|y| y.to_string()).collect();
        prop_assert_eq!(math::grade(&completion, &gold.join(", ")).correct, Some(sorted(&xs) == sorted(&ys)), "{} vs {:?}", completion, gold);
    }
}
