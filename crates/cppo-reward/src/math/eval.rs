//! Numeric equivalence of two expressions: evaluate both, at several pseudo-random points when they
//! have variables, and compare with [`same`].
//!
//! Points are rationals (so polynomials and rational functions are compared exactly), drawn from a
//! fixed-seed generator so grading is deterministic. Points where either side is undefined (a square
//! root of a negative, a pole) are skipped; equivalence needs [`POINTS`] defined points that all agree,
//! found within [`ATTEMPTS`] tries. Both sides must use the same variables.

use super::budget::Budget;
use super::expr::{Expr, Op};
use super::value::{same, EvalError, Ratio, Value};

/// Defined points that must agree before two expressions in variables are called equivalent.
pub const POINTS: usize = 5;
/// Most points tried.
pub const ATTEMPTS: usize = 24;

/// Runs a postfix program with the given variable values (indexed like `expr.vars`).
pub fn evaluate(expr: &Expr, vars: &[Value], budget: &mut Budget) -> Result<Value, EvalError> {
    if !budget.spend(expr.ops.len() as u64) {
        return Err(EvalError::Budget);
    }
    let mut stack: Vec<Value> = Vec::with_capacity(16);
    for op in &expr.ops {
        let v = match op {
            Op::Num(v) => *v,
            Op::Var(i) => *vars.get(*i).ok_or(EvalError::Domain)?,
            Op::Pi => Value::Approx(std::f64::consts::PI),
            Op::E => Value::Approx(std::f64::consts::E),
            Op::Neg | Op::Fact | Op::Abs | Op::Func(_) => {
                let a = stack.pop().ok_or(EvalError::Domain)?;
                match op {
                    Op::Neg => a.negated(),
                    Op::Fact => a.factorial()?,
                    Op::Abs => a.abs(),
                    Op::Func(f) => a.map(|x| f.apply(x))?,
                    _ => unreachable_op()?,
                }
            }
            _ => {
                let b = stack.pop().ok_or(EvalError::Domain)?;
                let a = stack.pop().ok_or(EvalError::Domain)?;
                match op {
                    Op::Add => a.plus(b)?,
                    Op::Sub => a.minus(b)?,
                    Op::Mul => a.times(b)?,
                    Op::Div => a.over(b)?,
                    Op::Pow => a.pow(b)?,
                    Op::Root => a.root(b)?,
                    Op::Binom => a.binom(b)?,
                    Op::LogBase => {
                        let (base, x) = (a.f(), b.f());
                        if base <= 0.0 || base == 1.0 || x <= 0.0 {
                            return Err(EvalError::Domain);
                        }
                        Value::Approx(x.ln() / base.ln())
                    }
                    _ => unreachable_op()?,
                }
            }
        };
        stack.push(v);
    }
    match (stack.pop(), stack.is_empty()) {
        (Some(v), true) => Ok(v),
        _ => Err(EvalError::Domain),
    }
}

/// The parser never emits a shape the evaluator does not know; treat one as undefined, not a panic.
fn unreachable_op() -> Result<Value, EvalError> {
    Err(EvalError::Domain)
}

/// A small deterministic generator (splitmix64): grading must give the same verdict every run.
struct Points(u64);

impl Points {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A rational in roughly (0.1, 40), avoiding 0 and 1, negative when `signed` and the coin says so.
    fn value(&mut self, signed: bool) -> Value {
        loop {
            let n = 1 + (self.next() % 40) as i128;
            let d = 1 + (self.next() % 13) as i128;
            let Some(r) = Ratio::new(n, d) else { continue };
            if r == Ratio::int(1) {
                continue;
            }
            let v = Value::Exact(r);
            return if signed && self.next() & 1 == 0 { v.negated() } else { v };
        }
    }
}

/// `Some(true)` / `Some(false)` when the expressions are (not) numerically equal; `None` when it cannot
/// be decided (undefined everywhere tried, too large, or out of budget).
pub fn equivalent(a: &Expr, b: &Expr, budget: &mut Budget) -> Option<bool> {
    let mut names: Vec<&String> = a.vars.iter().collect();
    names.sort();
    let mut other: Vec<&String> = b.vars.iter().collect();
    other.sort();
    if names != other {
        return Some(false);
    }
    if names.is_empty() {
        let (x, y) = (evaluate(a, &[], budget).ok()?, evaluate(b, &[], budget).ok()?);
        return Some(same(x, y));
    }
    let mut points = Points(0x00C0_FFEE);
    let mut agreed = 0;
    for attempt in 0..ATTEMPTS {
        // Every other point is positive, where square roots and logs of variables are defined; the rest
        // have random signs, so `\sqrt{x^2}` and `x` disagree.
        let signed = attempt % 2 == 1;
        let values: Vec<(&String, Value)> = names.iter().map(|n| (*n, points.value(signed))).collect();
        let lookup = |e: &Expr| -> Vec<Value> {
            e.vars.iter().map(|v| values.iter().find(|(n, _)| *n == v).map_or(Value::int(0), |p| p.1)).collect()
        };
        let (x, y) = (evaluate(a, &lookup(a), budget), evaluate(b, &lookup(b), budget));
        match (x, y) {
            (Ok(x), Ok(y)) => {
                if !same(x, y) {
                    return Some(false);
                }
                agreed += 1;
                if agreed == POINTS {
                    return Some(true);
                }
            }
            (Err(EvalError::Budget), _) | (_, Err(EvalError::Budget)) => return None,
            _ => {}
        }
    }
    None
}

/// `Some(true)` when `a = c b` for a constant `c != 0` at [`POINTS`] points where either is non-zero
/// (the zero sets of `a` and `b` are then the same: the equations `a = 0` and `b = 0` agree);
/// `Some(false)` when some point shows otherwise; `None` when it cannot be decided. Both must use the
/// same variables, at least one.
pub fn proportional(a: &Expr, b: &Expr, budget: &mut Budget) -> Option<bool> {
    let mut names: Vec<&String> = a.vars.iter().collect();
    names.sort();
    let mut other: Vec<&String> = b.vars.iter().collect();
    other.sort();
    if names != other || names.is_empty() {
        return Some(false);
    }
    let zero = Value::int(0);
    let mut points = Points(0x00C0_FFEE);
    let mut factor: Option<Value> = None;
    let mut agreed = 0;
    for attempt in 0..ATTEMPTS {
        let signed = attempt % 2 == 1;
        let values: Vec<(&String, Value)> = names.iter().map(|n| (*n, points.value(signed))).collect();
        let lookup = |e: &Expr| -> Vec<Value> {
            e.vars.iter().map(|v| values.iter().find(|(n, _)| *n == v).map_or(zero, |p| p.1)).collect()
        };
        match (evaluate(a, &lookup(a), budget), evaluate(b, &lookup(b), budget)) {
            (Ok(x), Ok(y)) => {
                let (x_zero, y_zero) = (same(x, zero), same(y, zero));
                if x_zero && y_zero {
                    continue;
                }
                if x_zero != y_zero {
                    return Some(false);
                }
                let c = x.over(y).ok()?;
                match factor {
                    Some(f) if !same(f, c) => return Some(false),
                    Some(_) => {}
                    None => factor = Some(c),
                }
                agreed += 1;
                if agreed == POINTS {
                    return Some(true);
                }
            }
            (Err(EvalError::Budget), _) | (_, Err(EvalError::Budget)) => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::expr::parse;

    fn eq(a: &str, b: &str) -> Option<bool> {
        let mut budget = Budget::default();
        equivalent(&parse(a).unwrap(), &parse(b).unwrap(), &mut budget)
    }

    fn val(s: &str) -> f64 {
        evaluate(&parse(s).unwrap(), &[], &mut Budget::default()).unwrap().f()
    }

    #[test]
    fn constants_evaluate() {
        assert_eq!(val(r"\frac{1}{2}"), 0.5);
        assert_eq!(val("2^10"), 1024.0);
        assert_eq!(val("2^3^2"), 512.0);
        assert_eq!(val(r"3\frac{1}{2}"), 3.5);
        assert_eq!(val(r"-3\frac{1}{2}"), -3.5);
        assert_eq!(val(r"2\cdot3+4"), 10.0);
        assert_eq!(val("-2^2"), -4.0);
        assert_eq!(val("5!"), 120.0);
        assert_eq!(val(r"\binom{5}{2}"), 10.0);
        assert_eq!(val(r"\sqrt[3]{27}"), 3.0);
        assert_eq!(val(r"\log_{2}8"), 3.0);
        assert_eq!(val("|-3|"), 3.0);
        assert!((val(r"\sin^{-1}(1)") - std::f64::consts::FRAC_PI_2).abs() < 1e-12);
        assert!((val(r"\sin^2(1)+\cos^2(1)") - 1.0).abs() < 1e-12);
        assert!((val(r"2\pi") - std::f64::consts::TAU).abs() < 1e-12);
    }

    #[test]
    fn expressions_in_variables() {
        assert_eq!(eq("(x+1)^2", "x^2+2x+1"), Some(true));
        assert_eq!(eq("x+1", "x+2"), Some(false));
        assert_eq!(eq("2xy", "yx2"), Some(true));
        assert_eq!(eq(r"\frac{x}{2}", "0.5x"), Some(true));
        assert_eq!(eq(r"\sqrt{x^2}", "|x|"), Some(true));
        assert_eq!(eq(r"\sqrt{x^2}", "x"), Some(false));
        assert_eq!(eq(r"\sqrt{x}\sqrt{y}", r"\sqrt{xy}"), Some(true));
        assert_eq!(eq("x", "y"), Some(false));
        assert_eq!(eq(r"\sin(2\theta)", r"2\sin\theta\cos\theta"), Some(true));
        assert_eq!(eq("a_1+a_2", "a_2+a_1"), Some(true));
        assert_eq!(eq(r"\sqrt{-x^2-1}", r"\sqrt{-x^2-1}"), None); // undefined at every real point
    }
}
