//! Numbers for the evaluator: exact rationals while the arithmetic allows, floating point after.
//!
//! Keeping rationals exact means `1000000` and `1000001` never compare equal under a tolerance, and
//! polynomials compared at rational points are compared exactly. Irrational operations (`\sqrt{2}`,
//! `\pi`, trigonometry, fractional powers) fall back to `f64`, compared with a tolerance (see [`same`]).

use crate::limits::{MAX_EXACT_EXPONENT, MAX_FACTORIAL};

/// Relative tolerance for comparing values when either is inexact.
pub const REL_TOL: f64 = 1e-6;
/// Absolute tolerance for comparing inexact values near zero (`\sin\pi` is about 1e-16, not 0).
pub const ABS_TOL: f64 = 1e-9;

/// Significant digits from which a decimal literal reads as a rounded result (a floating-point
/// printout such as `0.0833333333333333`) rather than an exact number. Shorter decimals stay exact:
/// `0.333333` is a rounding, the answer to another question than "what is 1/3".
pub const LONG_DECIMAL_DIGITS: usize = 10;
/// Relative tolerance between a long decimal and the value it rounds: nine significant digits agree.
pub const LONG_DECIMAL_REL_TOL: f64 = 1e-9;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalError {
    /// Outside the real domain: division by zero, even root or log of a negative, `0^{-1}`, ...
    Domain,
    /// Infinite or NaN, or too large to evaluate (`10^{10^{10}}`, `200!`).
    NotFinite,
    /// The step budget ran out.
    Budget,
}

/// A reduced fraction with a positive denominator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ratio {
    n: i128,
    d: i128,
}

/// Greatest common divisor (Euclid); gcd(0, 0) = 0.
pub(crate) fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Ratio {
    pub fn new(n: i128, d: i128) -> Option<Ratio> {
        if d == 0 || n == i128::MIN || d == i128::MIN {
            return None;
        }
        let g = gcd(n.unsigned_abs(), d.unsigned_abs()).max(1) as i128;
        let (n, d) = (n / g, d / g);
        Some(if d < 0 { Ratio { n: -n, d: -d } } else { Ratio { n, d } })
    }

    pub fn int(n: i128) -> Ratio {
        Ratio { n, d: 1 }
    }

    pub fn to_f64(self) -> f64 {
        self.n as f64 / self.d as f64
    }

    pub fn is_integer(self) -> bool {
        self.d == 1
    }

    pub fn is_negative(self) -> bool {
        self.n < 0
    }

    /// The fraction as LaTeX the expression parser reads back: `3`, `-3`, `\frac{1}{2}`, `-\frac{1}{2}`.
    pub fn to_latex(self) -> String {
        let sign = if self.n < 0 { "-" } else { "" };
        if self.d == 1 {
            format!("{sign}{}", self.n.unsigned_abs())
        } else {
            format!("{sign}\\frac{{{}}}{{{}}}", self.n.unsigned_abs(), self.d)
        }
    }

    fn add(self, o: Ratio) -> Option<Ratio> {
        let n = self.n.checked_mul(o.d)?.checked_add(o.n.checked_mul(self.d)?)?;
        Ratio::new(n, self.d.checked_mul(o.d)?)
    }

    fn mul(self, o: Ratio) -> Option<Ratio> {
        // Cross-reduce first so products overflow later.
        let g1 = gcd(self.n.unsigned_abs(), o.d.unsigned_abs()).max(1) as i128;
        let g2 = gcd(o.n.unsigned_abs(), self.d.unsigned_abs()).max(1) as i128;
        Ratio::new((self.n / g1).checked_mul(o.n / g2)?, (self.d / g2).checked_mul(o.d / g1)?)
    }

    fn recip(self) -> Option<Ratio> {
        Ratio::new(self.d, self.n)
    }

    fn powi(self, k: u32) -> Option<Ratio> {
        Ratio::new(self.n.checked_pow(k)?, self.d.checked_pow(k)?)
    }
}

/// Exact integer `k`-th root of a non-negative integer, if it has one.
fn exact_root(x: i128, k: u32) -> Option<i128> {
    if x < 0 {
        return None;
    }
    let guess = (x as f64).powf(1.0 / k as f64).round() as i128;
    (guess.saturating_sub(1)..=guess.saturating_add(1)).find(|&r| r >= 0 && r.checked_pow(k) == Some(x))
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Exact(Ratio),
    Approx(f64),
}

use Value::{Approx, Exact};

fn approx(x: f64) -> Result<Value, EvalError> {
    if x.is_finite() {
        Ok(Approx(x))
    } else {
        Err(EvalError::NotFinite)
    }
}

impl Value {
    pub fn int(n: i128) -> Value {
        Exact(Ratio::int(n))
    }

    /// A decimal literal (`12`, `0.5`, `.25`); long literals become inexact.
    pub fn from_decimal(s: &str) -> Result<Value, EvalError> {
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        let digits = format!("{int}{frac}");
        let digits = digits.trim_start_matches('0');
        if digits.len() <= 36 && frac.len() <= 36 {
            let n: i128 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| EvalError::NotFinite)? };
            if let Some(r) = Ratio::new(n, 10i128.pow(frac.len() as u32)) {
                return Ok(Exact(r));
            }
        }
        approx(s.parse::<f64>().map_err(|_| EvalError::NotFinite)?)
    }

    pub fn f(self) -> f64 {
        match self {
            Exact(r) => r.to_f64(),
            Approx(x) => x,
        }
    }

    fn exact_int(self) -> Option<i128> {
        match self {
            Exact(r) if r.is_integer() => Some(r.n),
            _ => None,
        }
    }

    pub fn negated(self) -> Value {
        match self {
            Exact(r) => Exact(Ratio { n: -r.n, d: r.d }),
            Approx(x) => Approx(-x),
        }
    }

    pub fn abs(self) -> Value {
        match self {
            Exact(r) => Exact(Ratio { n: r.n.abs(), d: r.d }),
            Approx(x) => Approx(x.abs()),
        }
    }

    pub fn plus(self, o: Value) -> Result<Value, EvalError> {
        if let (Exact(a), Exact(b)) = (self, o) {
            if let Some(r) = a.add(b) {
                return Ok(Exact(r));
            }
        }
        approx(self.f() + o.f())
    }

    pub fn minus(self, o: Value) -> Result<Value, EvalError> {
        self.plus(o.negated())
    }

    pub fn times(self, o: Value) -> Result<Value, EvalError> {
        if let (Exact(a), Exact(b)) = (self, o) {
            if let Some(r) = a.mul(b) {
                return Ok(Exact(r));
            }
        }
        approx(self.f() * o.f())
    }

    pub fn over(self, o: Value) -> Result<Value, EvalError> {
        if o.f() == 0.0 {
            return Err(EvalError::Domain);
        }
        if let (Exact(a), Exact(b)) = (self, o) {
            if let Some(r) = b.recip().and_then(|rb| a.mul(rb)) {
                return Ok(Exact(r));
            }
        }
        approx(self.f() / o.f())
    }

    pub fn pow(self, e: Value) -> Result<Value, EvalError> {
        let base = self.f();
        if let Some(k) = e.exact_int() {
            if base == 0.0 && k < 0 {
                return Err(EvalError::Domain);
            }
            if let Exact(r) = self {
                if k.abs() <= MAX_EXACT_EXPONENT {
                    let r = if k < 0 { r.recip() } else { Some(r) };
                    if let Some(p) = r.and_then(|r| r.powi(k.unsigned_abs() as u32)) {
                        return Ok(Exact(p));
                    }
                }
            }
            return approx(base.powf(k as f64));
        }
        let x = e.f();
        if base >= 0.0 {
            if base == 0.0 && x <= 0.0 {
                return Err(EvalError::Domain);
            }
            return approx(base.powf(x));
        }
        // A negative base has a real power only for a rational exponent with an odd denominator.
        match e {
            Exact(r) if r.d % 2 == 1 => {
                let magnitude = (-base).powf(x);
                approx(if r.n % 2 == 0 { magnitude } else { -magnitude })
            }
            _ => Err(EvalError::Domain),
        }
    }

    /// The real `n`-th root (`n` = 2 for `\sqrt`); exact when the value is a perfect power.
    pub fn root(self, n: Value) -> Result<Value, EvalError> {
        let Some(k) = n.exact_int().filter(|&k| (1..=64).contains(&k)) else {
            return self.pow(Value::int(1).over(n)?);
        };
        let k = k as u32;
        let negative = self.f() < 0.0;
        if negative && k & 1 == 0 {
            return Err(EvalError::Domain);
        }
        if let Exact(r) = self {
            if let (Some(a), Some(b)) = (exact_root(r.n.abs(), k), exact_root(r.d, k)) {
                let root = Exact(Ratio { n: a, d: b });
                return Ok(if negative { root.negated() } else { root });
            }
        }
        let a = self.f().abs();
        let m = match k {
            2 => a.sqrt(),
            3 => a.cbrt(),
            _ => a.powf(1.0 / k as f64),
        };
        approx(if negative { -m } else { m })
    }

    pub fn factorial(self) -> Result<Value, EvalError> {
        let k = self.exact_int().filter(|&k| k >= 0).ok_or(EvalError::Domain)?;
        if k > MAX_FACTORIAL {
            return Err(EvalError::NotFinite);
        }
        let mut acc = Value::int(1);
        for i in 2..=k {
            acc = acc.times(Value::int(i))?;
        }
        Ok(acc)
    }

    pub fn binom(self, k: Value) -> Result<Value, EvalError> {
        let n = self.exact_int().ok_or(EvalError::Domain)?;
        let k = k.exact_int().ok_or(EvalError::Domain)?;
        if k < 0 || n < 0 || k > n {
            return Ok(Value::int(0));
        }
        let k = k.min(n - k);
        if k > MAX_FACTORIAL * 8 {
            return Err(EvalError::NotFinite);
        }
        let mut acc = Value::int(1);
        for i in 0..k {
            acc = acc.times(Value::int(n - i))?.over(Value::int(i + 1))?;
        }
        Ok(acc)
    }

    pub fn map(self, f: impl Fn(f64) -> f64) -> Result<Value, EvalError> {
        let y = f(self.f());
        if y.is_nan() {
            Err(EvalError::Domain)
        } else {
            approx(y)
        }
    }
}

/// The value of a decimal literal with a fractional part and at least [`LONG_DECIMAL_DIGITS`]
/// significant digits (`0.0833333333333333`, `-3.3333333333`); `None` for anything else.
pub fn long_decimal(text: &str) -> Option<f64> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (int, frac) = unsigned.split_once('.')?;
    let digits_only = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
    if frac.is_empty() || !digits_only(int) || !digits_only(frac) {
        return None;
    }
    let significant = format!("{int}{frac}").trim_start_matches('0').len();
    if significant < LONG_DECIMAL_DIGITS {
        return None;
    }
    text.parse().ok()
}

/// Whether a long decimal (see [`long_decimal`]) and a value agree within [`LONG_DECIMAL_REL_TOL`].
pub fn rounds_to(decimal: f64, v: Value) -> bool {
    let x = v.f();
    (decimal - x).abs() <= LONG_DECIMAL_REL_TOL * decimal.abs().max(x.abs())
}

/// Whether two values are the same number: exactly, when both are exact; otherwise within
/// [`REL_TOL`] relative or [`ABS_TOL`] absolute difference.
pub fn same(a: Value, b: Value) -> bool {
    match (a, b) {
        (Exact(x), Exact(y)) => x == y,
        _ => {
            let (x, y) = (a.f(), b.f());
            let diff = (x - y).abs();
            diff <= ABS_TOL || diff <= REL_TOL * x.abs().max(y.abs())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Value {
        Value::from_decimal(s).unwrap()
    }

    #[test]
    fn exact_arithmetic() {
        assert_eq!(d("0.5"), Exact(Ratio::new(1, 2).unwrap()));
        assert_eq!(d("1").over(d("3")).unwrap().times(d("3")).unwrap(), d("1"));
        assert!(same(d("1000000"), d("1000000.0")));
        assert!(!same(d("1000000"), d("1000001")));
        assert!(!same(d("0.333333"), d("1").over(d("3")).unwrap()));
        assert_eq!(d("2").pow(d("10")).unwrap(), d("1024"));
        assert_eq!(d("2").pow(d("-2")).unwrap(), d("0.25"));
        assert_eq!(d("8").root(d("2")).unwrap(), Approx(8f64.sqrt()));
        assert_eq!(d("2").root(d("3")).unwrap(), Approx(2f64.cbrt()));
        assert_eq!(d("16").root(d("2")).unwrap(), d("4"));
        assert_eq!(d("-27").root(d("3")).unwrap(), d("-3"));
        assert_eq!(d("0.25").root(d("2")).unwrap(), d("0.5"));
        assert_eq!(d("5").factorial().unwrap(), d("120"));
        assert_eq!(d("5").binom(d("2")).unwrap(), d("10"));
    }

    #[test]
    fn long_decimals_are_floating_point_printouts() {
        assert_eq!(long_decimal("0.0833333333333333"), Some(0.0833333333333333));
        assert_eq!(long_decimal("-3.3333333333"), Some(-3.3333333333));
        assert_eq!(long_decimal("0.333333"), None);
        assert_eq!(long_decimal("0.000000001"), None); // one significant digit
        assert_eq!(long_decimal("562949953421313"), None); // an integer is exact however long
        assert_eq!(long_decimal("1.2.3"), None);
        let third = d("1").over(d("3")).unwrap();
        assert!(rounds_to(0.3333333333, third));
        assert!(!rounds_to(0.3333333343, third));
        assert_eq!(Ratio::new(-3, 6).unwrap().to_latex(), "-\\frac{1}{2}");
        assert_eq!(Ratio::int(7).to_latex(), "7");
    }

    #[test]
    fn inexact_values_compare_with_tolerance() {
        let r8 = d("8").root(d("2")).unwrap();
        let two_r2 = d("2").times(d("2").root(d("2")).unwrap()).unwrap();
        assert!(same(r8, two_r2));
        assert!(same(Approx(1e-17), d("0")));
        assert!(!same(Approx(2f64.sqrt()), d("1.41")));
    }

    #[test]
    fn domain_and_overflow_are_errors() {
        assert_eq!(d("1").over(d("0")), Err(EvalError::Domain));
        assert_eq!(d("-4").root(d("2")), Err(EvalError::Domain));
        assert_eq!(d("0").pow(d("-1")), Err(EvalError::Domain));
        assert_eq!(d("10").pow(d("10000000000")), Err(EvalError::NotFinite));
        assert_eq!(d("200").factorial(), Err(EvalError::NotFinite));
        assert_eq!(d("-8").pow(d("0.5")), Err(EvalError::Domain));
        assert_eq!(d("-8").pow(Value::int(1).over(d("3")).unwrap()).unwrap().f().round(), -2.0);
        // Huge exact powers overflow into floating point, still finite here.
        assert!(d("3").pow(d("100")).unwrap().f() > 5e47);
    }
}
