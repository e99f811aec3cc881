//! The few inner loops that are not matrix products (dot products and axpy in small attention
//! blocks, exp over vocabulary rows), with AVX2/FMA versions chosen at run time: the crate is built
//! for baseline x86-64, where these loops would run 4 lanes wide with a scalar `exp`.

/// `sum_i a[i] b[i]`.
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: avx2() holds only where the CPU has AVX2 and FMA (`isa::detected` checks both), the
        // features `x86::dot` is compiled for; it reads below `min(a.len(), b.len())` only.
        return unsafe { x86::dot(a, b) };
    }
    dot_generic(a, b)
}

/// `y += alpha x`.
pub fn axpy_f32(alpha: f32, x: &[f32], y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: AVX2 and FMA are present (as in `dot_f32`); `x86::axpy` reads and writes below
        // `min(x.len(), y.len())` only.
        return unsafe { x86::axpy(alpha, x, y) };
    }
    for (o, &v) in y.iter_mut().zip(x) {
        *o += alpha * v;
    }
}

/// `(sum_i exp(z[i] - shift), sum_i exp(z[i] - shift) z[i])`: a log-sum-exp and an entropy step.
pub fn exp_stats_f32(z: &[f32], shift: f32) -> (f32, f32) {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: AVX2 and FMA are present (as in `dot_f32`); `x86::exp_stats` loads 8 lanes only while
        // `i + 8 <= z.len()`.
        return unsafe { x86::exp_stats(z, shift) };
    }
    let (mut s, mut t) = (0.0, 0.0);
    for &x in z {
        let e = (x - shift).exp();
        s += e;
        t += e * x;
    }
    (s, t)
}

/// `z[i] = scale * exp(z[i] - shift)`.
pub fn exp_scale_f32(z: &mut [f32], shift: f32, scale: f32) {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: AVX2 and FMA are present (as in `dot_f32`); `x86::exp_scale` loads and stores 8 lanes
        // only while `i + 8 <= z.len()`.
        return unsafe { x86::exp_scale(z, shift, scale) };
    }
    for x in z.iter_mut() {
        *x = scale * (*x - shift).exp();
    }
}

pub fn dot_generic<T: num_traits::Float + std::ops::AddAssign>(a: &[T], b: &[T]) -> T {
    let mut acc = [T::zero(); 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s = acc.iter().fold(T::zero(), |s, &v| s + v);
    for (&x, &y) in ca.remainder().iter().zip(cb.remainder()) {
        s += x * y;
    }
    s
}

#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    super::isa::has(super::isa::Isa::Avx2)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must have AVX2 and FMA. No memory is touched.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn hsum(v: __m256) -> f32 {
        let lo = _mm256_castps256_ps128(v);
        let hi = _mm256_extractf128_ps(v, 1);
        let s = _mm_add_ps(lo, hi);
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
        _mm_cvtss_f32(s)
    }

    /// exp of 8 lanes, Cephes-style: 2^n * p(r) with r = x - n ln 2; relative error about 2e-7 on
    /// [-87, 88] (inputs are clamped there, below which the result is negligible in a softmax).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA. No memory is touched.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn exp8(x: __m256) -> __m256 {
        let x = _mm256_min_ps(
            _mm256_max_ps(x, _mm256_set1_ps(-87.0)),
            _mm256_set1_ps(88.0),
        );
        let n = _mm256_round_ps(
            _mm256_mul_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E)),
            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
        );
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
        let mut p = _mm256_set1_ps(1.987_569_1e-4);
        for c in [
            1.398_199_9e-3,
            8.333_452e-3,
            4.166_579_6e-2,
            1.666_666_5e-1,
            5e-1,
        ] {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
        }
        let r2 = _mm256_mul_ps(r, r);
        let y = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0));
        let pow2 = _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
            23,
        ));
        _mm256_mul_ps(y, pow2)
    }

    /// # Safety
    /// The CPU must have AVX2 and FMA (`isa::has(Isa::Avx2)`). Any lengths: only the first
    /// `min(a.len(), b.len())` elements are read.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut i = 0;
        while i + 16 <= n {
            acc0 = _mm256_fmadd_ps(
                _mm256_loadu_ps(a.as_ptr().add(i)),
                _mm256_loadu_ps(b.as_ptr().add(i)),
                acc0,
            );
            acc1 = _mm256_fmadd_ps(
                _mm256_loadu_ps(a.as_ptr().add(i + 8)),
                _mm256_loadu_ps(b.as_ptr().add(i + 8)),
                acc1,
            );
            i += 16;
        }
        if i + 8 <= n {
            acc0 = _mm256_fmadd_ps(
                _mm256_loadu_ps(a.as_ptr().add(i)),
                _mm256_loadu_ps(b.as_ptr().add(i)),
                acc0,
            );
            i += 8;
        }
        let mut s = hsum(_mm256_add_ps(acc0, acc1));
        while i < n {
            s += a[i] * b[i];
            i += 1;
        }
        s
    }

    /// # Safety
    /// The CPU must have AVX2 and FMA (`isa::has(Isa::Avx2)`). Any lengths: only the first
    /// `min(x.len(), y.len())` elements are read and written.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn axpy(alpha: f32, x: &[f32], y: &mut [f32]) {
        let n = x.len().min(y.len());
        let a = _mm256_set1_ps(alpha);
        let mut i = 0;
        while i + 8 <= n {
            let v = _mm256_fmadd_ps(
                a,
                _mm256_loadu_ps(x.as_ptr().add(i)),
                _mm256_loadu_ps(y.as_ptr().add(i)),
            );
            _mm256_storeu_ps(y.as_mut_ptr().add(i), v);
            i += 8;
        }
        while i < n {
            y[i] += alpha * x[i];
            i += 1;
        }
    }

    /// # Safety
    /// The CPU must have AVX2 and FMA (`isa::has(Isa::Avx2)`); every access is within `z`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn exp_stats(z: &[f32], shift: f32) -> (f32, f32) {
        let sh = _mm256_set1_ps(shift);
        let (mut s, mut t) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut i = 0;
        while i + 8 <= z.len() {
            let x = _mm256_loadu_ps(z.as_ptr().add(i));
            let e = exp8(_mm256_sub_ps(x, sh));
            s = _mm256_add_ps(s, e);
            t = _mm256_fmadd_ps(e, x, t);
            i += 8;
        }
        let (mut s, mut t) = (hsum(s), hsum(t));
        while i < z.len() {
            let e = (z[i] - shift).exp();
            s += e;
            t += e * z[i];
            i += 1;
        }
        (s, t)
    }

    /// # Safety
    /// The CPU must have AVX2 and FMA (`isa::has(Isa::Avx2)`); every access is within `z`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn exp_scale(z: &mut [f32], shift: f32, scale: f32) {
        let (sh, sc) = (_mm256_set1_ps(shift), _mm256_set1_ps(scale));
        let mut i = 0;
        while i + 8 <= z.len() {
            let x = _mm256_loadu_ps(z.as_ptr().add(i));
            _mm256_storeu_ps(
                z.as_mut_ptr().add(i),
                _mm256_mul_ps(sc, exp8(_mm256_sub_ps(x, sh))),
            );
            i += 8;
        }
        while i < z.len() {
            z[i] = scale * (z[i] - shift).exp();
            i += 1;
        }
    }
}
