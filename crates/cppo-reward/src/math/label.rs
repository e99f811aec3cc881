//! Left sides that name the value on their right: in `|AB| = 1` the answer is 1, while in
//! `2x + z = 1` or `7 = 11a + c` the left side is part of an equation to solve.
//!
//! A name is a bare variable (`x`, `a_1`, `f(x)`), a product or quotient of names (`AB`, `xy`,
//! `\frac{NO}{BO}`), an absolute value (`|AB|`), a function at a point (`f(2)`), an angle or segment
//! (`m\angle ABC`, `\overline{AB}`), a tuple of names (`(p,q)`) or a ratio of names (`A:B`). What makes a
//! left side an equation instead: a sum or difference at the top level, a leading number (a
//! coefficient, `2x = 6`), a relation, or no letter at all (`\pi`, `7`). A name other than a bare
//! variable labels only a constant: in `x^2 = 4y` or `xy = 3x + 1` the sides relate variables, and the
//! answer is the equation.

use super::expr::GREEK;
use super::structure::{delta, is_bare_var, split_top, units};

/// Commands that may appear inside a name; any other command (`\sin`, `\pi`, `\infty`) makes the side
/// an expression.
const NAMING_COMMANDS: &[&str] = &[
    "frac", "sqrt", "angle", "measuredangle", "overline", "overrightarrow", "vec", "hat", "widehat", "bar", "triangle",
    "cdot", "prime",
];

/// Units that make a side an expression or a statement when they appear outside brackets.
const TOP_LEVEL_BREAKS: &[&str] =
    &["+", "-", "=", "<", ">", "\\le", "\\ge", "\\ne", ",", ";", "\\pm", "\\mp", "\\cup", "\\approx", "\\in"];

/// What [`bare_values`] reads: the values as tuples, how many groups, and how many labels in each.
pub struct BareValues {
    pub text: String,
    pub groups: usize,
    pub per_group: usize,
}

/// A labelled gold's values in the order of their labels: `AB=4,CD=5` gives `(4,5)` (one tuple), and
/// `p=5,q=2;p=7,q=2` (groups with the same labels in the same order) gives `(5,2),(7,2)` (a set of
/// tuples). `None` unless every item names a value and one group names at least two different things.
/// The input is normalised.
pub fn bare_values(gold: &str) -> Option<BareValues> {
    let mut names: Option<Vec<&str>> = None;
    let mut tuples = Vec::new();
    let groups = split_top(gold, &units(gold), ";");
    for group in &groups {
        let mut these = Vec::new();
        let mut values = Vec::new();
        for item in split_top(group, &units(group), ",") {
            let sides = split_top(item, &units(item), "=");
            let [name, value] = sides.as_slice() else { return None };
            if !names_value(name, value) || !is_label(name) {
                return None;
            }
            these.push(name.trim());
            values.push(value.trim());
        }
        let mut distinct = these.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() < 2 || distinct.len() != these.len() || names.as_ref().is_some_and(|n| *n != these) {
            return None;
        }
        tuples.push(format!("({})", values.join(",")));
        names = Some(these);
    }
    let per_group = names?.len();
    Some(BareValues { text: tuples.join(","), groups: groups.len(), per_group })
}

/// Whether `left = right` (normalised sides) is a name and its value, so that the answer is `right`.
pub fn names_value(left: &str, right: &str) -> bool {
    is_bare_var(left) || (is_label(left) && !mentions_variable(right))
}

/// Whether a side holds a letter or Greek letter outside command names (`4y`, `2\theta`; not `2\sqrt{3}`).
fn mentions_variable(s: &str) -> bool {
    units(s).iter().any(|&(a, b)| {
        let u = &s[a..b];
        u.chars().all(|c| c.is_ascii_alphabetic()) || u.strip_prefix('\\').is_some_and(|cmd| GREEK.contains(&cmd))
    })
}

/// Whether `s` (normalised) is a name (see the module docs).
pub fn is_label(s: &str) -> bool {
    let s = s.trim();
    if s.is_empty() {
        return false;
    }
    if is_bare_var(s) {
        return true;
    }
    let us = units(s);
    // `(p,q)`, `[a,b]`: a tuple of names.
    if let (Some(&(a0, b0)), Some(&(a1, b1))) = (us.first(), us.last()) {
        let (open, close) = (&s[a0..b0], &s[a1..b1]);
        if matches!((open, close), ("(", ")") | ("[", "]")) && closes_at_end(s, &us) {
            let inner = &s[b0..a1];
            let parts = split_top(inner, &units(inner), ",");
            if parts.len() > 1 {
                return parts.iter().all(|p| is_label(p));
            }
        }
    }
    // `A:B`: a ratio of names.
    let ratio = split_top(s, &us, ":");
    if ratio.len() > 1 {
        return ratio.iter().all(|p| is_label(p));
    }
    let first = &s[us[0].0..us[0].1];
    if first.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return false;
    }
    let mut depth = 0i32;
    let mut has_name = false;
    for &(a, b) in &us {
        let u = &s[a..b];
        if depth == 0 && TOP_LEVEL_BREAKS.contains(&u) {
            return false;
        }
        depth += delta(u);
        if let Some(cmd) = u.strip_prefix('\\').filter(|c| c.starts_with(|ch: char| ch.is_ascii_alphabetic())) {
            if GREEK.contains(&cmd) {
                has_name = true;
            } else if !NAMING_COMMANDS.contains(&cmd) {
                return false;
            }
        } else if u.chars().all(|c| c.is_ascii_alphabetic()) {
            has_name = true;
        } else if !u.chars().all(|c| c.is_ascii_digit() || "_^{}()[]|'/* \\".contains(c)) {
            return false;
        }
    }
    has_name
}

/// Whether the bracket opening `s` closes at its very end (`(a)(b)` is no tuple).
fn closes_at_end(s: &str, us: &[(usize, usize)]) -> bool {
    let mut depth = 0i32;
    for (k, &(a, b)) in us.iter().enumerate() {
        depth += delta(&s[a..b]);
        if depth == 0 {
            return k == us.len() - 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::is_label;

    #[test]
    fn names_and_equations() {
        for s in ["x", "f(x)", "a_1", "|AB|", "(p,q)", "A:B", r"\frac{NO}{BO}", r"m\angle ABC", r"\overline{AB}", "f(2)", "xy", "BC", r"\theta", "x^2", "(t,u)"] {
            assert!(is_label(s), "{s}");
        }
        for s in ["7", "2x", "11a+c", "a+3z", "x-y", r"\pi", r"\infty", "(3,2)", "", r"\sin x", "x<3", "1:2", "-x", ".5x"] {
            assert!(!is_label(s), "{s}");
        }
    }

    #[test]
    fn names_label_constants_and_variables_label_anything() {
        use super::names_value;
        assert!(names_value("|AB|", r"2\sqrt{3}"));
        assert!(names_value("(p,q)", "(3,2)"));
        assert!(names_value("y", "2x+1"));
        assert!(!names_value("x^2", "4y"));
        assert!(!names_value("xy", r"3\theta"));
        assert!(!names_value("2x", "6"));
    }
}
