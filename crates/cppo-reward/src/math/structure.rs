//! The shape of a normalised answer (a value, a tuple or interval, a set, a list, a union of intervals,
//! a matrix, an equation) and equivalence of two shapes.
//!
//! - Tuples and intervals compare element-wise, and their brackets must match: `(1,2)` is not `[1,2]`.
//! - Lists (`1, 2`), sets (`\{1,2\}`, or `{1,2}`: plain braces around a list) and unions (`A \cup B`)
//!   are unordered; a list equals a set; a union of finite sets is the set of their elements.
//! - `\pm` in a list item or a whole answer makes two items: `1\pm\sqrt{2}` = `1+\sqrt{2}, 1-\sqrt{2}`.
//! - `x = 5`, `x \in [0,1]`, `f(x) = 2x`: a bare variable on the left is dropped, and so is any other
//!   left side that names a constant value ([`names_value`]: `|AB| = 1`, `(p,q) = (3,2)`, `A:B = 1:2`); a chain
//!   `x = 3 + 3 = 6` whose first side is a name is its last side. In a list whose items name different
//!   things (`a=1, b=2`, `AB=4, CD=5`) the names are kept and matched.
//! - An inequality in one variable is the interval of its solutions ([`super::relation`]):
//!   `-2 \le x \le 7` is `[-2,7]`; inequalities joined by `or` / `and` (a list) whose solution sets do
//!   not overlap are their union.
//! - Matrices (`pmatrix`, `bmatrix`, `array`) compare element-wise with equal dimensions; sums,
//!   differences, scalar multiples and products of matrices are the matrix they make ([`super::matrix`]).
//! - A chain of equalities without variables whose sides are all the same number (`3 \cdot 4 = 12`) is
//!   that number; one with a false step is an equation, which equals no number.
//! - `a \approx b` is the answer `a` (when the other side writes an approximation too, both must agree);
//!   `\approx b` alone, or after a name (`x \approx 11`), is `b`. Items may also be separated by `;`.
//! - Values compare equal when their normalised text is identical, or else when both parse as
//!   expressions that are numerically equivalent ([`super::eval`]), or when one is a long decimal that
//!   rounds the other ([`super::value::long_decimal`]).

use crate::limits::{MAX_DEPTH, MAX_ITEMS, MAX_NODES};

use super::budget::Budget;
use super::eval;
use super::expr::{self, Expr};
use super::label::names_value;
use super::relation;
use super::value::{long_decimal, rounds_to, same};

#[derive(Clone, Debug, PartialEq)]
pub enum Ans {
    Value { text: String, expr: Option<Expr> },
    Tuple { open: char, close: char, items: Vec<Ans> },
    Set(Vec<Ans>),
    List(Vec<Ans>),
    Union(Vec<Ans>),
    Matrix(Vec<Vec<Ans>>),
    Equation(Box<Ans>, Box<Ans>),
    /// `exact \approx approximation`: equals a plain answer equal to the exact side, or another
    /// approximation whose two sides both agree.
    Approx(Box<Ans>, Box<Ans>),
}

/// Splits a normalised string into units: `\name`, `\` plus one character, or one character.
pub(crate) fn units(s: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut it = s.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        let mut end = i + c.len_utf8();
        if c == '\\' {
            match it.peek().copied() {
                Some((_, n)) if n.is_ascii_alphabetic() => {
                    while let Some((j, n)) = it.peek().copied() {
                        if !n.is_ascii_alphabetic() {
                            break;
                        }
                        end = j + 1;
                        it.next();
                    }
                }
                Some((j, n)) => {
                    end = j + n.len_utf8();
                    it.next();
                }
                None => {}
            }
        }
        out.push((i, end));
    }
    out
}

pub(crate) fn delta(u: &str) -> i32 {
    match u {
        "(" | "[" | "{" | "\\{" | "\\begin" => 1,
        ")" | "]" | "}" | "\\}" | "\\end" => -1,
        _ => 0,
    }
}

/// Depths never go negative and end at zero.
pub(crate) fn balanced(s: &str, us: &[(usize, usize)]) -> bool {
    let mut d = 0i32;
    for &(a, b) in us {
        d += delta(&s[a..b]);
        if d < 0 {
            return false;
        }
    }
    d == 0
}

/// The parts of `s` between top-level occurrences of `sep`.
pub(crate) fn split_top<'a>(s: &'a str, us: &[(usize, usize)], sep: &str) -> Vec<&'a str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for &(a, b) in us {
        let u = &s[a..b];
        if depth == 0 && u == sep {
            parts.push(&s[start..a]);
            start = b;
        }
        depth += delta(u);
    }
    parts.push(&s[start..]);
    parts
}

/// The index of the unit closing the first one, if the first opens a bracket.
fn first_match(s: &str, us: &[(usize, usize)]) -> Option<usize> {
    let mut depth = 0i32;
    for (k, &(a, b)) in us.iter().enumerate() {
        depth += delta(&s[a..b]);
        if depth == 0 {
            return (k > 0).then_some(k);
        }
    }
    None
}

/// `x`, `a_1`, `a_{12}`, `\theta`, `f(x)`: a name that `= ...` merely labels.
pub(crate) fn is_bare_var(s: &str) -> bool {
    let s = s.trim();
    let mut chars = s.chars();
    let Some(first) = chars.next() else { return false };
    let rest = chars.as_str();
    if first == '\\' {
        return rest.len() > 1 && rest.chars().all(|c| c.is_ascii_alphabetic()) && !["infty", "pi", "emptyset"].contains(&rest);
    }
    if !first.is_ascii_alphabetic() {
        return false;
    }
    if rest.is_empty() {
        return true;
    }
    if let Some(sub) = rest.strip_prefix('_') {
        return sub.len() == 1 && sub.chars().all(|c| c.is_ascii_alphanumeric())
            || sub.starts_with('{') && sub.ends_with('}') && sub[1..sub.len() - 1].chars().all(|c| c.is_ascii_alphanumeric())
            || sub.chars().all(|c| c.is_ascii_digit()) && !sub.is_empty();
    }
    if let Some(args) = rest.strip_prefix('(').and_then(|r| r.strip_suffix(')')) {
        return !args.is_empty() && args.chars().all(|c| c.is_ascii_alphabetic() || c == ',');
    }
    false
}

/// `a \pm b` -> (`a+b`, `a-b`) when there is exactly one top-level `\pm` (or `\mp`).
fn expand_pm(s: &str) -> Option<(String, String)> {
    let us = units(s);
    let mut depth = 0i32;
    let mut found = None;
    for &(a, b) in &us {
        let u = &s[a..b];
        if depth == 0 && (u == "\\pm" || u == "\\mp") {
            if found.is_some() {
                return None;
            }
            found = Some((a, b, u == "\\pm"));
        }
        depth += delta(u);
    }
    let (a, b, pm) = found?;
    let (first, second) = if pm { ('+', '-') } else { ('-', '+') };
    Some((format!("{}{first}{}", &s[..a], &s[b..]), format!("{}{second}{}", &s[..a], &s[b..])))
}

/// The structure of a normalised answer.
pub fn build(s: &str) -> Ans {
    build_at(s, 0)
}

fn value(s: &str) -> Ans {
    Ans::Value { text: s.to_string(), expr: expr::parse(s).ok() }
}

fn build_at(s: &str, depth: usize) -> Ans {
    let s = s.trim();
    if depth >= MAX_DEPTH || s.is_empty() {
        return Ans::Value { text: s.to_string(), expr: None };
    }
    let us = units(s);
    if !balanced(s, &us) {
        return value(s);
    }
    let unions = split_top(s, &us, "\\cup");
    if unions.len() > 1 {
        if unions.len() > MAX_ITEMS {
            return value(s);
        }
        return union(unions.iter().map(|p| union_part(p, depth + 1)).collect());
    }
    for sep in [";", ","] {
        let parts = split_top(s, &us, sep);
        if parts.len() > 1 {
            if let Some(union) = union_of_inequalities(&parts, depth) {
                return union;
            }
            return items(&parts, depth).map_or_else(|| value(s), Ans::List);
        }
    }
    let approx = split_top(s, &us, "\\approx");
    if approx.len() == 2 {
        if approx[0].trim().is_empty() || names_value(approx[0], approx[1]) {
            return build_at(approx[1], depth + 1);
        }
        return Ans::Approx(Box::new(build_at(approx[0], depth + 1)), Box::new(build_at(approx[1], depth + 1)));
    }
    if let Some((p, m)) = expand_pm(s) {
        return Ans::List(vec![build_at(&p, depth + 1), build_at(&m, depth + 1)]);
    }
    if let Some(solutions) = relation::solutions(s) {
        return build_at(&relation::to_latex(&solutions), depth + 1);
    }
    let sides = split_top(s, &us, "=");
    // `3 \cdot 4 = 12`: arithmetic shown, every side the same number, is that number.
    if sides.len() > 1 {
        if let Some(last) = true_arithmetic(&sides) {
            return build_at(last, depth + 1);
        }
    }
    if sides.len() == 2 {
        if names_value(sides[0], sides[1]) {
            return build_at(sides[1], depth + 1);
        }
        return Ans::Equation(Box::new(build_at(sides[0], depth + 1)), Box::new(build_at(sides[1], depth + 1)));
    }
    // `x = 3 + 3 = 6`: working shown after the name; the last side is the answer.
    if let (true, Some(last)) = (sides.len() > 2, sides.last()) {
        if !last.trim().is_empty() && names_value(sides[0], last) {
            return build_at(last, depth + 1);
        }
    }
    let member = split_top(s, &us, "\\in");
    if member.len() == 2 && is_bare_var(member[0]) {
        return build_at(member[1], depth + 1);
    }
    if s == "\\emptyset" {
        return Ans::Set(Vec::new());
    }
    if s.starts_with("\\begin{pmatrix}") {
        if let Some(m) = matrix(s, depth) {
            return m;
        }
    }
    if s.contains("\\begin{pmatrix}") {
        if let Some(cells) = super::matrix::arithmetic(s) {
            return Ans::Matrix(cells.iter().map(|row| row.iter().map(|c| build_at(c, depth + 1)).collect()).collect());
        }
    }
    if let Some(close) = first_match(s, &us).filter(|&k| k == us.len() - 1) {
        let open_u = &s[us[0].0..us[0].1];
        let close_u = &s[us[close].0..us[close].1];
        let inner = &s[us[0].1..us[close].0];
        match (open_u, close_u) {
            ("\\{", "\\}") => {
                let iu = units(inner);
                let parts = split_top(inner, &iu, ",");
                if inner.trim().is_empty() {
                    return Ans::Set(Vec::new());
                }
                return items(&parts, depth).map_or_else(|| value(s), Ans::Set);
            }
            ("(" | "[", ")" | "]") => {
                let iu = units(inner);
                let mut parts = split_top(inner, &iu, ",");
                if parts.len() == 1 {
                    // `(1;2)`: coordinates separated by semicolons, where no comma separates them.
                    parts = split_top(inner, &iu, ";");
                }
                if parts.len() == 1 {
                    return build_at(inner, depth + 1);
                }
                if parts.len() > MAX_ITEMS {
                    return value(s);
                }
                let open = if open_u == "(" { '(' } else { '[' };
                let close = if close_u == ")" { ')' } else { ']' };
                return Ans::Tuple { open, close, items: parts.iter().map(|p| build_at(p, depth + 1)).collect() };
            }
            // `{1,3}`: braces around a list are set braces written without their backslashes.
            ("{", "}") => {
                let parts = split_top(inner, &units(inner), ",");
                if parts.len() > 1 {
                    return items(&parts, depth).map_or_else(|| value(s), Ans::Set);
                }
                return build_at(inner, depth + 1);
            }
            _ => {}
        }
    }
    value(s)
}

/// The last side of a chain of equalities without variables whose sides all have the same value.
fn true_arithmetic<'a>(sides: &[&'a str]) -> Option<&'a str> {
    let mut budget = Budget::new(8 * MAX_NODES as u64);
    let mut first = None;
    for side in sides {
        let e = expr::parse(side.trim()).ok().filter(|e| e.vars.is_empty())?;
        let v = eval::evaluate(&e, &[], &mut budget).ok()?;
        match first {
            None => first = Some(v),
            Some(f) if same(f, v) => {}
            Some(_) => return None,
        }
    }
    sides.last().copied()
}

/// One side of a `\cup`, where braces around even one element (`{7}`) make a set.
fn union_part(p: &str, depth: usize) -> Ans {
    let t = p.trim();
    let us = units(t);
    let braced = t.starts_with('{') && first_match(t, &us) == Some(us.len() - 1);
    match build_at(p, depth) {
        Ans::Set(v) => Ans::Set(v),
        single if braced && t.len() > 2 => Ans::Set(vec![single]),
        other => other,
    }
}

/// A union; of finite sets only, the set of their elements (`\{1,3\} \cup \{3,4\}` is `\{1,3,4\}`, an
/// element written alike in two sets counted once).
fn union(parts: Vec<Ans>) -> Ans {
    if !parts.iter().all(|p| matches!(p, Ans::Set(_))) {
        return Ans::Union(parts);
    }
    let mut elements: Vec<Ans> = Vec::new();
    for part in parts {
        let Ans::Set(items) = part else { continue };
        for item in items {
            if !elements.contains(&item) {
                elements.push(item);
            }
        }
    }
    Ans::Set(elements)
}

/// `x < -1 \text{ or } x > 3`: list items that are all inequalities in one variable, with solution sets
/// that do not overlap, are their union. Overlapping ones (`x > -1 \text{ and } x < 3`, where `and`
/// means both) are left a list, which equals no interval.
fn union_of_inequalities(parts: &[&str], depth: usize) -> Option<Ans> {
    let parts: Vec<&str> = parts.iter().copied().filter(|p| !p.trim().is_empty()).collect();
    if parts.len() < 2 || parts.len() > MAX_ITEMS {
        return None;
    }
    let mut all = Vec::new();
    for p in &parts {
        all.extend(relation::solutions(p)?);
    }
    relation::disjoint(&all).then(|| Ans::Union(all.iter().map(|iv| build_at(&relation::to_latex(std::slice::from_ref(iv)), depth + 1)).collect()))
}

/// The items of a list or set, expanding `\pm` and handling `name = value` items.
fn items(parts: &[&str], depth: usize) -> Option<Vec<Ans>> {
    if parts.len() > MAX_ITEMS {
        return None;
    }
    let labelled: Vec<Option<(&str, &str)>> = parts
        .iter()
        .map(|p| {
            let us = units(p);
            let sides = split_top(p, &us, "=");
            (sides.len() == 2 && names_value(sides[0], sides[1])).then(|| (sides[0].trim(), sides[1]))
        })
        .collect();
    let mut names: Vec<&str> = labelled.iter().flatten().map(|(n, _)| *n).collect();
    names.sort_unstable();
    names.dedup();
    let keep_names = names.len() > 1;
    let mut out = Vec::new();
    // Empty items come from `2, 3, and 4` (`and` -> `,`) or a trailing comma.
    for (part, label) in parts.iter().zip(&labelled).filter(|(p, _)| !p.trim().is_empty()) {
        match label {
            Some((name, rhs)) if keep_names => {
                out.push(Ans::Equation(Box::new(value(name)), Box::new(build_at(rhs, depth + 1))));
            }
            _ => {
                let body = label.map_or(*part, |(_, rhs)| rhs);
                match expand_pm(body) {
                    Some((p, m)) => {
                        out.push(build_at(&p, depth + 1));
                        out.push(build_at(&m, depth + 1));
                    }
                    None => out.push(build_at(body, depth + 1)),
                }
            }
        }
    }
    Some(out)
}

fn matrix(s: &str, depth: usize) -> Option<Ans> {
    let rows = super::matrix::cells(s)?;
    Some(Ans::Matrix(rows.iter().map(|row| row.iter().map(|c| build_at(c, depth + 1)).collect()).collect()))
}

/// A person's view of a shape: `(1, 2]` for a tuple or interval, `list [1; 2]`, `set {1; 2}`,
/// `union [(..); (..)]`, `matrix [1, 2; 3, 4]`, `equation l = r`, `e ~ approximation`; a value is its text.
pub fn describe(a: &Ans) -> String {
    let all = |v: &[Ans]| v.iter().map(describe).collect::<Vec<_>>().join("; ");
    match a {
        Ans::Value { text, .. } => text.clone(),
        Ans::Tuple { open, close, items } => format!("{open}{}{close}", items.iter().map(describe).collect::<Vec<_>>().join(", ")),
        Ans::Set(v) => format!("set {{{}}}", all(v)),
        Ans::List(v) => format!("list [{}]", all(v)),
        Ans::Union(v) => format!("union [{}]", all(v)),
        Ans::Matrix(rows) => {
            let rows: Vec<String> = rows.iter().map(|r| r.iter().map(describe).collect::<Vec<_>>().join(", ")).collect();
            format!("matrix [{}]", rows.join("; "))
        }
        Ans::Equation(l, r) => format!("equation {} = {}", describe(l), describe(r)),
        Ans::Approx(e, x) => format!("{} ~ {}", describe(e), describe(x)),
    }
}

fn unordered(a: &Ans) -> Option<(u8, &[Ans])> {
    match a {
        Ans::List(v) | Ans::Set(v) => Some((0, v)),
        Ans::Union(v) => Some((1, v)),
        _ => None,
    }
}

/// Whether two answer shapes are equivalent. Spends the budget; false when it runs out.
pub fn equivalent(a: &Ans, b: &Ans, budget: &mut Budget) -> bool {
    if !budget.spend(1) {
        return false;
    }
    match (a, b) {
        (Ans::Value { text: x, expr: ex }, Ans::Value { text: y, expr: ey }) => {
            if x == y {
                return true;
            }
            match (ex, ey) {
                (Some(ex), Some(ey)) => {
                    let same = eval::equivalent(ex, ey, budget) == Some(true) || rounded_value_agrees(x, ex, y, ey, budget);
                    budget.numeric |= same;
                    same
                }
                _ => false,
            }
        }
        (Ans::Tuple { open: o1, close: c1, items: i1 }, Ans::Tuple { open: o2, close: c2, items: i2 }) => {
            o1 == o2 && c1 == c2 && i1.len() == i2.len() && i1.iter().zip(i2).all(|(x, y)| equivalent(x, y, budget))
        }
        (Ans::Matrix(r1), Ans::Matrix(r2)) => {
            r1.len() == r2.len()
                && r1.iter().zip(r2).all(|(x, y)| x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equivalent(p, q, budget)))
        }
        (Ans::Approx(e1, a1), Ans::Approx(e2, a2)) => equivalent(e1, e2, budget) && equivalent(a1, a2, budget),
        (Ans::Approx(e, _), other) | (other, Ans::Approx(e, _)) => equivalent(e, other, budget),
        (Ans::Equation(l1, r1), Ans::Equation(l2, r2)) => {
            (equivalent(l1, l2, budget) && equivalent(r1, r2, budget))
                || (equivalent(l1, r2, budget) && equivalent(r1, l2, budget))
        }
        _ => match (unordered(a), unordered(b)) {
            (Some((k1, x)), Some((k2, y))) if k1 == k2 => same_multiset(x, y, budget),
            _ => false,
        },
    }
}

/// One side a long decimal (a printout such as `0.0833333333333333`), the other a constant that it
/// rounds (`\frac{1}{12}`). Two long decimals are both exact and were compared already.
fn rounded_value_agrees(x: &str, ex: &Expr, y: &str, ey: &Expr, budget: &mut Budget) -> bool {
    let (decimal, other) = match (long_decimal(x), long_decimal(y)) {
        (Some(d), None) => (d, ey),
        (None, Some(d)) => (d, ex),
        _ => return false,
    };
    other.vars.is_empty() && eval::evaluate(other, &[], budget).is_ok_and(|v| rounds_to(decimal, v))
}

/// Every item of `x` matched to a distinct equivalent item of `y` (greedy, in order). Collections of
/// tuples (points, solutions of a system) are sets: a tuple repeated on one side is the same element.
fn same_multiset(x: &[Ans], y: &[Ans], budget: &mut Budget) -> bool {
    let tuples = |v: &[Ans]| !v.is_empty() && v.iter().all(|a| matches!(a, Ans::Tuple { .. }));
    if tuples(x) && tuples(y) {
        return covers(x, y, budget) && covers(y, x, budget);
    }
    if x.len() != y.len() {
        return false;
    }
    let mut used = vec![false; y.len()];
    'outer: for a in x {
        for (j, b) in y.iter().enumerate() {
            if !used[j] && equivalent(a, b, budget) {
                used[j] = true;
                continue 'outer;
            }
        }
        return false;
    }
    true
}

/// Every item of `x` has an equivalent item in `y`.
fn covers(x: &[Ans], y: &[Ans], budget: &mut Budget) -> bool {
    x.iter().all(|a| y.iter().any(|b| equivalent(a, b, budget)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(a: &Ans) -> String {
        match a {
            Ans::Value { text, .. } => text.clone(),
            Ans::Tuple { open, close, items } => format!("{open}{}{close}", items.iter().map(text).collect::<Vec<_>>().join(";")),
            Ans::Set(v) => format!("set[{}]", v.iter().map(text).collect::<Vec<_>>().join(";")),
            Ans::List(v) => format!("list[{}]", v.iter().map(text).collect::<Vec<_>>().join(";")),
            Ans::Union(v) => format!("union[{}]", v.iter().map(text).collect::<Vec<_>>().join(";")),
            Ans::Matrix(r) => format!("mat[{}]", r.iter().map(|row| row.iter().map(text).collect::<Vec<_>>().join(",")).collect::<Vec<_>>().join(";")),
            Ans::Equation(l, r) => format!("{}={}", text(l), text(r)),
            Ans::Approx(e, a) => format!("{}~{}", text(e), text(a)),
        }
    }

    #[test]
    fn shapes() {
        assert_eq!(text(&build("(1,2)")), "(1;2)");
        assert_eq!(text(&build("[0,\\infty)")), "[0;\\infty)");
        assert_eq!(text(&build("(x+1)")), "x+1");
        assert_eq!(text(&build("(x+1)(x-1)")), "(x+1)(x-1)");
        assert_eq!(text(&build("1,2")), "list[1;2]");
        assert_eq!(text(&build("\\{1,2\\}")), "set[1;2]");
        assert_eq!(text(&build("\\emptyset")), "set[]");
        assert_eq!(text(&build("(-\\infty,1)\\cup(2,3]")), "union[(-\\infty;1);(2;3]]");
        assert_eq!(text(&build("{1,3}\\cup\\{3,4\\}")), "set[1;3;4]");
        assert_eq!(text(&build("x\\in{1,3}")), "set[1;3]");
        assert_eq!(text(&build("\\{1\\}\\cup(2,3)")), "union[set[1];(2;3)]");
        assert_eq!(text(&build("x=5")), "5");
        assert_eq!(text(&build("f(x)=2x")), "2x");
        assert_eq!(text(&build("x\\in[-2,7]")), "[-2;7]");
        assert_eq!(text(&build("x+y=5")), "x+y=5");
        assert_eq!(text(&build("x=1,x=2")), "list[1;2]");
        assert_eq!(text(&build("a=1,b=2")), "list[a=1;b=2]");
        assert_eq!(text(&build("1\\pm\\sqrt{2}")), "list[1+\\sqrt{2};1-\\sqrt{2}]");
        assert_eq!(text(&build("\\{1\\pm\\sqrt{5},-2\\}")), "set[1+\\sqrt{5};1-\\sqrt{5};-2]");
        assert_eq!(text(&build("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}")), "mat[1,2;3,4]");
        assert_eq!(text(&build("\\begin{pmatrix}1\\\\2\\\\\\end{pmatrix}")), "mat[1;2]");
        assert_eq!(text(&build("(1,2")), "(1,2");
        assert_eq!(text(&build("A")), "A");
        assert_eq!(text(&build("2,3,,4")), "list[2;3;4]");
        assert_eq!(text(&build("(-4,27);(2,15)")), "list[(-4;27);(2;15)]");
        assert_eq!(text(&build("\\frac{2}{3}\\approx0.67")), "\\frac{2}{3}~0.67");
        assert_eq!(text(&build("\\approx8.24")), "8.24");
        assert_eq!(text(&build("x\\approx11")), "11");
        assert_eq!(text(&build("|AB|=1")), "1");
        assert_eq!(text(&build("(p,q)=(3,2)")), "(3;2)");
        assert_eq!(text(&build("x=3+3=6")), "6");
        assert_eq!(text(&build("1+x=3+3=6")), "1+x=3+3=6");
        assert_eq!(text(&build("7=11a+c")), "7=11a+c");
        assert_eq!(text(&build("AB=4,CD=5")), "list[AB=4;CD=5]");
        assert_eq!(text(&build("-2\\le x\\le7")), "[-2;7]");
        assert_eq!(text(&build("x\\ne3")), "union[(-\\infty;3);(3;\\infty)]");
        assert_eq!(text(&build("x<-1,x>3")), "union[(-\\infty;-1);(3;\\infty)]");
        assert_eq!(text(&build("x>-1,x<3")), "list[(-1;\\infty);(-\\infty;3)]");
    }

    #[test]
    fn bare_variables() {
        for v in ["x", "k", "a_1", "a_{12}", "\\theta", "f(x)", "p(x,y)"] {
            assert!(is_bare_var(v), "{v}");
        }
        for v in ["2", "x+y", "xy", "\\infty", "\\pi", "f(2)", ""] {
            assert!(!is_bare_var(v), "{v}");
        }
    }
}
