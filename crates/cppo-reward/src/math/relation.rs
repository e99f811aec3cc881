//! Inequalities in one variable read as the set of their solutions, so that `-2 \le x \le 7`,
//! `7 \ge x \ge -2`, `x \in [-2,7]` and `[-2,7]` are one answer, `5 \ge x` is `x \le 5`, and `x \ne 3`
//! is `(-\infty,3)\cup(3,\infty)` (MATH writes domains and ranges both ways).
//!
//! Read (on normalised text): `x op c` and `c op x`, with `x` a bare variable and `c` a constant;
//! chains `a op x op b` whose two relations point the same way; and `f op g` linear in one variable
//! (`2x + 1 \le 7`, `-x > -1`), solved exactly over the rationals; and the same with the linear side
//! inside an absolute value (`|x - 1| \ge 2`, `1 \le |z| \le 3/2`), read as the one or two intervals
//! of its solutions when they are intervals with rational ends. Anything else (two variables, a
//! non-linear side, a mixed chain) is not read, and stays text.

use super::budget::Budget;
use super::eval::evaluate;
use super::expr;
use super::structure::{balanced, delta, is_bare_var, units};
use super::value::{Ratio, Value};
use crate::limits::MAX_NODES;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Ne,
    Eq,
}

impl Op {
    fn of(unit: &str) -> Option<Op> {
        Some(match unit {
            "<" => Op::Lt,
            "\\le" => Op::Le,
            ">" => Op::Gt,
            "\\ge" => Op::Ge,
            "\\ne" => Op::Ne,
            "=" => Op::Eq,
            _ => return None,
        })
    }

    /// `c op x` as `x flipped(op) c`.
    fn flipped(self) -> Op {
        match self {
            Op::Lt => Op::Gt,
            Op::Le => Op::Ge,
            Op::Gt => Op::Lt,
            Op::Ge => Op::Le,
            other => other,
        }
    }
}

/// One interval of solutions, its bounds as written (or computed), `\infty` where unbounded.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    lo: Bound,
    hi: Bound,
}

#[derive(Clone, Debug, PartialEq)]
struct Bound {
    text: String,
    value: f64,
    closed: bool,
}

impl Bound {
    fn infinite(negative: bool) -> Bound {
        let (text, value) = if negative { ("-\\infty", f64::NEG_INFINITY) } else { ("\\infty", f64::INFINITY) };
        Bound { text: text.into(), value, closed: false }
    }

    fn at(c: &Constant, closed: bool) -> Bound {
        Bound { text: c.text.clone(), value: c.value, closed }
    }
}

struct Constant {
    text: String,
    value: f64,
}

/// Work allowed for evaluating the constant sides of one relation: they are short expressions.
const STEPS: u64 = 8 * MAX_NODES as u64;

/// A side without variables, with its value; infinities included.
fn constant(side: &str) -> Option<Constant> {
    let t = side.trim();
    let text = t.to_string();
    match t {
        "\\infty" | "+\\infty" => return Some(Constant { text: "\\infty".into(), value: f64::INFINITY }),
        "-\\infty" => return Some(Constant { text, value: f64::NEG_INFINITY }),
        _ => {}
    }
    let e = expr::parse(t).ok().filter(|e| e.vars.is_empty())?;
    let v = evaluate(&e, &[], &mut Budget::new(STEPS)).ok()?;
    Some(Constant { text, value: v.f() })
}

/// The sides and relations of `s` at the top level of its brackets.
fn split(s: &str) -> Option<(Vec<&str>, Vec<Op>)> {
    let us = units(s);
    if !balanced(s, &us) {
        return None;
    }
    let (mut sides, mut ops) = (Vec::new(), Vec::new());
    let (mut depth, mut start) = (0i32, 0usize);
    for &(a, b) in &us {
        let u = &s[a..b];
        if depth == 0 {
            if let Some(op) = Op::of(u) {
                sides.push(&s[start..a]);
                ops.push(op);
                start = b;
            }
        }
        depth += delta(u);
    }
    sides.push(&s[start..]);
    Some((sides, ops))
}

/// The solutions of `s` when it is an inequality in one variable (see the module docs); `None` when it
/// is not one, or is one that is not read.
pub fn solutions(s: &str) -> Option<Vec<Interval>> {
    if !mentions_inequality(s) {
        return None;
    }
    let (sides, ops) = split(s)?;
    if ops.is_empty() || ops.contains(&Op::Eq) || sides.iter().any(|side| side.trim().is_empty()) {
        return None;
    }
    match (sides.as_slice(), ops.as_slice()) {
        ([l, r], [op]) => {
            if let Some(inner) = abs_inner(l) {
                return abs_one_side(inner, *op, exact(r)?);
            }
            if let Some(inner) = abs_inner(r) {
                return abs_one_side(inner, op.flipped(), exact(l)?);
            }
            if is_bare_var(l) {
                let c = constant(r)?;
                return Some(one_side(*op, &c));
            }
            if is_bare_var(r) {
                let c = constant(l)?;
                return Some(one_side(op.flipped(), &c));
            }
            let (root, increasing) = linear_root(l, r)?;
            let c = Constant { text: root.to_latex(), value: root.to_f64() };
            Some(one_side(if increasing { *op } else { op.flipped() }, &c))
        }
        ([a, x, b], [o1, o2]) if abs_inner(x).is_some() => {
            let inner = abs_inner(x)?;
            let (a, b) = (exact(a)?, exact(b)?);
            let strict = |o: &Op| matches!(o, Op::Lt | Op::Gt);
            match (o1, o2) {
                (Op::Lt | Op::Le, Op::Lt | Op::Le) => abs_between(inner, Some((a, strict(o1))), Some((b, strict(o2)))),
                (Op::Gt | Op::Ge, Op::Gt | Op::Ge) => abs_between(inner, Some((b, strict(o2))), Some((a, strict(o1)))),
                _ => None,
            }
        }
        ([a, x, b], [o1, o2]) if is_bare_var(x) => {
            let (a, b) = (constant(a)?, constant(b)?);
            let upward = |o: &Op| matches!(o, Op::Lt | Op::Le);
            let downward = |o: &Op| matches!(o, Op::Gt | Op::Ge);
            if upward(o1) && upward(o2) {
                Some(vec![Interval { lo: Bound::at(&a, *o1 == Op::Le), hi: Bound::at(&b, *o2 == Op::Le) }])
            } else if downward(o1) && downward(o2) {
                Some(vec![Interval { lo: Bound::at(&b, *o2 == Op::Ge), hi: Bound::at(&a, *o1 == Op::Ge) }])
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A cheap first test, one pass over the bytes: most answers hold no inequality at all.
fn mentions_inequality(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().enumerate().any(|(i, &c)| c == b'<' || c == b'>' || (c == b'\\' && matches!(b.get(i + 1..i + 3), Some(b"le" | b"ge" | b"ne"))))
}

/// The solutions of `x op c`.
fn one_side(op: Op, c: &Constant) -> Vec<Interval> {
    let below = |closed| Interval { lo: Bound::infinite(true), hi: Bound::at(c, closed) };
    let above = |closed| Interval { lo: Bound::at(c, closed), hi: Bound::infinite(false) };
    match op {
        Op::Lt => vec![below(false)],
        Op::Le => vec![below(true)],
        Op::Gt => vec![above(false)],
        Op::Ge => vec![above(true)],
        Op::Ne | Op::Eq => vec![below(false), above(false)],
    }
}

/// For `l op r` with `l - r = a t + b` in one variable `t` and rational `a != 0`: the root `-b / a` and
/// whether `a > 0` (else dividing by `a` flips the relation).
fn linear_root(l: &str, r: &str) -> Option<(Ratio, bool)> {
    let (a, b) = linear(&format!("({l})-({r})"))?;
    let root = Value::Exact(b).negated().over(Value::Exact(a)).ok()?;
    match root {
        Value::Exact(root) => Some((root, !a.is_negative())),
        Value::Approx(_) => None,
    }
}

/// `(a, b)` for an expression `a t + b` in one variable `t`, rational `a != 0` and `b`. Linearity is
/// checked exactly at five points, a negative one among them so that `|t|` is not mistaken for `t`.
fn linear(f: &str) -> Option<(Ratio, Ratio)> {
    let f = expr::parse(f).ok().filter(|e| e.vars.len() == 1)?;
    let mut budget = Budget::new(STEPS);
    let mut at = |n: i128, d: i128| -> Option<Ratio> {
        match evaluate(&f, &[Value::Exact(Ratio::new(n, d)?)], &mut budget).ok()? {
            Value::Exact(v) => Some(v),
            Value::Approx(_) => None,
        }
    };
    let (f0, f1) = (at(0, 1)?, at(1, 1)?);
    let slope = Value::Exact(f1).minus(Value::Exact(f0)).ok()?;
    let Value::Exact(a) = slope else { return None };
    if a == Ratio::int(0) {
        return None;
    }
    for (n, d) in [(2, 1), (-3, 1), (7, 3)] {
        let expected = Value::Exact(f0).plus(slope.times(Value::Exact(Ratio::new(n, d)?)).ok()?).ok()?;
        if expected != Value::Exact(at(n, d)?) {
            return None;
        }
    }
    Some((a, f0))
}

/// A side without variables whose value is an exact rational.
fn exact(side: &str) -> Option<Ratio> {
    let e = expr::parse(side.trim()).ok().filter(|e| e.vars.is_empty())?;
    match evaluate(&e, &[], &mut Budget::new(STEPS)).ok()? {
        Value::Exact(r) => Some(r),
        Value::Approx(_) => None,
    }
}

/// The inside of a side written as one absolute value, `|2x-1|`.
fn abs_inner(side: &str) -> Option<&str> {
    let inner = side.trim().strip_prefix('|')?.strip_suffix('|')?;
    (!inner.contains('|') && !inner.trim().is_empty()).then_some(inner)
}

/// The solutions of `|f| op c`.
fn abs_one_side(inner: &str, op: Op, c: Ratio) -> Option<Vec<Interval>> {
    match op {
        Op::Lt | Op::Le => abs_between(inner, None, Some((c, op == Op::Lt))),
        Op::Gt | Op::Ge => abs_between(inner, Some((c, op == Op::Gt)), None),
        Op::Ne | Op::Eq => None,
    }
}

/// One end of an interval of `u`: `None` where unbounded, else the value and whether it is included.
type End = Option<(Ratio, bool)>;

/// The solutions in `t` of `lo < |f(t)| < hi` (each bound optional, `(value, strict)`), for `f` linear in
/// one variable. First the solutions in `u = f(t)`: `|u| < h` is `(-h, h)`, `|u| > l` is `u < -l or u > l`,
/// both together the two pieces between; then `t = (u - b) / a`. `None` when there are no solutions or
/// only single points, which are no intervals.
fn abs_between(inner: &str, lo: Option<(Ratio, bool)>, hi: Option<(Ratio, bool)>) -> Option<Vec<Interval>> {
    let (a, b) = linear(inner)?;
    let zero = Ratio::int(0);
    let negated = |r: Ratio| Value::Exact(r).negated();
    let neg = |r: Ratio| match negated(r) {
        Value::Exact(n) => Some(n),
        Value::Approx(_) => None,
    };
    // A lower bound that every `|u|` meets is no bound.
    let lo = lo.filter(|&(l, strict)| !(l.is_negative() || (l == zero && !strict)));
    if let Some((h, strict)) = hi {
        if h.is_negative() || (h == zero && strict) {
            return None;
        }
    }
    let pieces: Vec<(End, End)> = match (lo, hi) {
        (None, None) => vec![(None, None)],
        (None, Some((h, s))) => vec![(Some((neg(h)?, !s)), Some((h, !s)))],
        (Some((l, s)), None) => vec![(None, Some((neg(l)?, !s))), (Some((l, !s)), None)],
        (Some((l, sl)), Some((h, sh))) => {
            if Value::Exact(h).minus(Value::Exact(l)).ok()?.f() <= 0.0 {
                return None;
            }
            vec![(Some((neg(h)?, !sh)), Some((neg(l)?, !sl))), (Some((l, !sl)), Some((h, !sh)))]
        }
    };
    // `t = (u - b) / a`; a negative `a` reverses each piece.
    let to_t = |end: End| -> Option<End> {
        match end {
            None => Some(None),
            Some((u, closed)) => match Value::Exact(u).minus(Value::Exact(b)).ok()?.over(Value::Exact(a)).ok()? {
                Value::Exact(t) => Some(Some((t, closed))),
                Value::Approx(_) => None,
            },
        }
    };
    let bound = |end: End, negative_infinity: bool| match end {
        None => Bound::infinite(negative_infinity),
        Some((t, closed)) => Bound { text: t.to_latex(), value: t.to_f64(), closed },
    };
    let mut out = Vec::with_capacity(pieces.len());
    for (u_lo, u_hi) in pieces {
        let (t_lo, t_hi) = if a.is_negative() { (to_t(u_hi)?, to_t(u_lo)?) } else { (to_t(u_lo)?, to_t(u_hi)?) };
        out.push(Interval { lo: bound(t_lo, true), hi: bound(t_hi, false) });
    }
    out.sort_by(|x, y| x.lo.value.total_cmp(&y.lo.value));
    Some(out)
}

/// Interval notation for the solutions: `[a,b)`, joined by `\cup`.
pub fn to_latex(solutions: &[Interval]) -> String {
    let one = |iv: &Interval| {
        let open = if iv.lo.closed { '[' } else { '(' };
        let close = if iv.hi.closed { ']' } else { ')' };
        format!("{open}{},{}{close}", iv.lo.text, iv.hi.text)
    };
    solutions.iter().map(one).collect::<Vec<_>>().join("\\cup")
}

/// Whether no two of the intervals share a point.
pub fn disjoint(solutions: &[Interval]) -> bool {
    let mut sorted: Vec<&Interval> = solutions.iter().collect();
    if sorted.iter().any(|iv| iv.lo.value.is_nan() || iv.hi.value.is_nan()) {
        return false;
    }
    sorted.sort_by(|x, y| x.lo.value.total_cmp(&y.lo.value));
    sorted.windows(2).all(|w| {
        let (first, next) = (w[0], w[1]);
        first.hi.value < next.lo.value || (first.hi.value == next.lo.value && !(first.hi.closed && next.lo.closed))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &str) -> Option<String> {
        solutions(s).map(|v| to_latex(&v))
    }

    #[test]
    fn inequalities_become_intervals() {
        assert_eq!(read(r"-2\le x\le7").as_deref(), Some("[-2,7]"));
        assert_eq!(read(r"7\ge x\ge-2").as_deref(), Some("[-2,7]"));
        assert_eq!(read("0<f(x)<1").as_deref(), Some("(0,1)"));
        assert_eq!(read(r"5\ge x").as_deref(), Some(r"(-\infty,5]"));
        assert_eq!(read("x>2").as_deref(), Some(r"(2,\infty)"));
        assert_eq!(read(r"x\ne3").as_deref(), Some(r"(-\infty,3)\cup(3,\infty)"));
        assert_eq!(read("-x>-1").as_deref(), Some(r"(-\infty,1)"));
        assert_eq!(read(r"2x+1\le7").as_deref(), Some(r"(-\infty,3]"));
        assert_eq!(read(r"3x<1").as_deref(), Some(r"(-\infty,\frac{1}{3})"));
        assert_eq!(read("|x|<2").as_deref(), Some("(-2,2)"));
        assert_eq!(read(r"|x-1|\ge2").as_deref(), Some(r"(-\infty,-1]\cup[3,\infty)"));
        assert_eq!(read(r"1\le|z|\le3/2").as_deref(), Some(r"[-\frac{3}{2},-1]\cup[1,\frac{3}{2}]"));
        assert_eq!(read(r"3>|1-2x|>0").as_deref(), Some(r"(-1,\frac{1}{2})\cup(\frac{1}{2},2)"));
        assert_eq!(read(r"|x|\ge0").as_deref(), Some(r"(-\infty,\infty)"));
    }

    #[test]
    fn other_relations_are_not_read() {
        for s in ["x+y<3", "x^2<4", "|x|<-2", "|x|<0", "|x-y|<2", "|x^2|<2", "1<x>2", "x=3", "x<y", "f(2)<f(1)<f(4)", r"x<\sqrt{2}y", "3<5", "x", ""] {
            assert_eq!(read(s), None, "{s}");
        }
    }

    #[test]
    fn disjointness() {
        let both = |a: &str, b: &str| {
            let mut v = solutions(a).unwrap();
            v.extend(solutions(b).unwrap());
            disjoint(&v)
        };
        assert!(both("x<-1", "x>3"));
        assert!(both("x<3", "x>3"));
        assert!(!both(r"x\le3", r"x\ge3"));
        assert!(!both("x>-1", "x<3"));
    }
}
