//! Comparisons and the report: fresh random inputs, outputs compared within a relative bound, NaN
//! never passing.

use std::fmt;

/// splitmix64: fresh inputs from a printed seed, with no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo .. hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo) as u64) as usize
    }

    /// Uniform in [-scale, scale).
    pub fn values(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale).collect()
    }
}

/// One compared output.
#[derive(Clone, Debug)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// Every check of a run, with the seed that replays it.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub backend: String,
    pub seed: u64,
    pub checks: Vec<Check>,
    /// Figures printed after the checks, before the final count (timings of a benchmark).
    pub notes: Vec<String>,
}

impl Report {
    pub fn passed(&self) -> usize {
        self.checks.iter().filter(|c| c.passed).count()
    }

    pub fn failed(&self) -> usize {
        self.checks.len() - self.passed()
    }

    /// `got` against `want`: |got - want| <= rel (|want| + mean |want|) everywhere (`rel = 0`: equal).
    /// The mean term keeps elements that cancel to near zero from demanding a precision their
    /// inputs never had; NaN or infinity in `got` never passes.
    pub fn compare(&mut self, name: &str, got: &[f32], want: &[f32], rel: f64) {
        let check = compare(name, got, want, rel);
        self.checks.push(check);
    }

    /// As `compare`, but up to `allowed` finite values may fall outside the bound (see
    /// `compare_allowing`).
    pub fn compare_allowing(&mut self, name: &str, got: &[f32], want: &[f32], rel: f64, allowed: usize) {
        let check = compare_allowing(name, got, want, rel, allowed);
        self.checks.push(check);
    }

    /// A check decided elsewhere (a panic caught, a count).
    pub fn record(&mut self, name: &str, passed: bool, detail: impl Into<String>) {
        self.checks.push(Check { name: name.into(), passed, detail: detail.into() });
    }
}

pub fn compare(name: &str, got: &[f32], want: &[f32], rel: f64) -> Check {
    compare_allowing(name, got, want, rel, 0)
}

/// `compare`, passing when at most `allowed` values are out of bounds and every value is finite: for
/// outputs where a few elements may legitimately differ by far more than rounding (AdamW's first steps
/// move each weight by about lr times the sign of its gradient, so an element whose gradient is within
/// rounding of zero may move either way on two correct backends).
pub fn compare_allowing(name: &str, got: &[f32], want: &[f32], rel: f64, allowed: usize) -> Check {
    if got.len() != want.len() {
        return Check { name: name.into(), passed: false, detail: format!("{} values, expected {}", got.len(), want.len()) };
    }
    let mean = if want.is_empty() { 0.0 } else { want.iter().map(|w| (*w as f64).abs()).sum::<f64>() / want.len() as f64 };
    let (mut bad, mut worst): (usize, Option<(usize, f64)>) = (0, None);
    let mut max_ratio = 0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w as f64).abs();
        let bound = rel * ((w as f64).abs() + mean);
        // Written so that NaN (every comparison false) fails.
        let ok = g.is_finite() && (err <= bound);
        let ratio = if !g.is_finite() { f64::INFINITY } else if bound > 0.0 { err / bound } else if err == 0.0 { 0.0 } else { f64::INFINITY };
        max_ratio = max_ratio.max(ratio);
        if !ok {
            bad += 1;
            if worst.is_none_or(|(_, r)| ratio > r) {
                worst = Some((i, ratio));
            }
        }
    }
    let finite = got.iter().all(|g| g.is_finite());
    match worst {
        Some((i, _)) if finite && bad <= allowed => Check {
            name: name.into(),
            passed: true,
            detail: format!("{bad} of {} values out of bounds (rel {rel:e}, {allowed} allowed); worst at {i}: got {}, want {}", got.len(), got[i], want[i]),
        },
        None => Check { name: name.into(), passed: true, detail: format!("{} values, worst error {max_ratio:.2} of its bound (rel {rel:e})", got.len()) },
        Some((i, _)) => Check {
            name: name.into(),
            passed: false,
            detail: format!("{bad} of {} values out of bounds (rel {rel:e}); worst at {i}: got {}, want {}", got.len(), got[i], want[i]),
        },
    }
}

impl Report {
    /// The report's first line.
    pub fn header(&self) -> String {
        format!("{} against the CPU backend, bf16 products against the reference rounding their operands (seed {}):", self.backend, self.seed)
    }

    /// The last line: `N passed, N failed`.
    pub fn count(&self) -> String {
        format!("{} passed, {} failed", self.passed(), self.failed())
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "  {} {}: {}", if self.passed { "ok  " } else { "FAIL" }, self.name, self.detail)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.header())?;
        for c in &self.checks {
            writeln!(f, "{c}")?;
        }
        for n in &self.notes {
            writeln!(f, "{n}")?;
        }
        write!(f, "{}", self.count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_infinity_and_errors_past_the_bound_fail_and_exact_matches_pass() {
        let want = [1.0f32, -2.0, 0.0, 4.0];
        assert!(compare("same", &want, &want, 0.0).passed);
        assert!(!compare("nan", &[1.0, f32::NAN, 0.0, 4.0], &want, 1.0).passed);
        assert!(!compare("inf", &[1.0, -2.0, f32::INFINITY, 4.0], &want, 1.0).passed);
        // mean |want| = 1.75: element 0 may move by 0.01 * 2.75.
        assert!(compare("inside", &[1.0 + 0.027, -2.0, 0.0, 4.0], &want, 0.01).passed);
        let c = compare("outside", &[1.0 + 0.028, -2.0, 0.0, 4.0], &want, 0.01);
        assert!(!c.passed && c.detail.contains("worst at 0"), "{}", c.detail);
        assert!(!compare("length", &want[..3], &want, 1.0).passed);
        let mut r = Report::default();
        r.compare("a", &want, &want, 0.0);
        r.record("b", false, "broken");
        assert_eq!((r.passed(), r.failed()), (1, 1));
        assert!(r.to_string().ends_with("1 passed, 1 failed"));
    }

    #[test]
    fn the_generator_spreads_its_values_over_the_range() {
        let v = Rng::new(7).values(1000, 2.0);
        assert!(v.iter().all(|x| (-2.0..2.0).contains(x)));
        assert!(v.iter().any(|&x| x > 1.5) && v.iter().any(|&x| x < -1.5));
        assert_ne!(Rng::new(7).next_u64(), Rng::new(8).next_u64());
    }

    #[test]
    fn a_few_outliers_pass_only_where_allowed_and_never_as_nan() {
        let want = vec![1.0f32; 100];
        let mut got = want.clone();
        got[3] = -1.0;
        assert!(compare_allowing("one", &got, &want, 1e-3, 1).passed);
        assert!(!compare("none allowed", &got, &want, 1e-3).passed);
        got[7] = -1.0;
        assert!(!compare_allowing("two", &got, &want, 1e-3, 1).passed);
        got[7] = f32::NAN;
        assert!(!compare_allowing("nan", &got, &want, 1e-3, 5).passed);
    }
}
