//! `y (+)= x @ w^T` for products with few rows (a decode step's tokens) against weights kept as stored
//! (out, in), one or several weights in a single pass.
//!
//! At a few rows such a product costs the time it takes to stream the weight from memory. A general
//! multiply packs the weight into panels first, which reads and writes it once more than needed; here
//! each weight row is read once, in place, and dotted with every input row while it is in registers,
//! with the next weight rows prefetched so that memory and arithmetic overlap. The output rows are
//! split across the threads, so the weights are too; several weights sharing one input (q, k, v; gate,
//! up) go out as one split, so they cost one dispatch and the threads stay balanced.
//!
//! A weight may also be a bf16 copy (`Weight::Bf16`, the upper halves of its f32 values): a rollout
//! streams half the bytes per decode step. Where the CPU has AVX512-BF16 the inputs are rounded to
//! bf16 too and multiplied by bf16 dot products (twice the products per instruction, sums in f32:
//! what a bf16 inference engine computes); elsewhere each weight is widened back to f32 in registers.
//!
//! The kernel runs on AVX2 + FMA (8 lanes, blocks of 4 input rows) and AVX-512 F/VL/BW (16 lanes,
//! blocks of 8), chosen by `isa`; `available()` says whether either exists here. On AVX2 a bf16 weight
//! is widened to f32 in registers (one shift): half the bytes of a memory-bound decode step.

use rayon::prelude::*;

use super::isa::Isa;

/// Input rows up to this many take the kernel in one pass: with the weights walked in cache-sized
/// panels, a 64-row decode step of SmolLM2-135M runs 1.4x faster than through gemm (`cppo bench
/// generate`, 2 threads, AVX-512).
pub const MAX_ROWS: usize = 64;

/// A weight's elements as the kernel reads them.
#[derive(Clone, Copy, Debug)]
pub enum Weight<'a> {
    F32(&'a [f32]),
    /// bf16 bit patterns (see `to_bf16`).
    Bf16(&'a [u16]),
}

impl Weight<'_> {
    fn len(&self) -> usize {
        match self {
            Weight::F32(w) => w.len(),
            Weight::Bf16(w) => w.len(),
        }
    }
}

/// `v` rounded to the nearest bf16 (ties to even), as its bit pattern.
pub fn to_bf16(v: f32) -> u16 {
    let b = v.to_bits();
    if v.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}

/// The f32 value of a bf16 bit pattern.
pub fn from_bf16(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// One weight `w (n x k)` and where its product goes: `y[i * ys + j]` for row i, output j.
pub struct Out<'a> {
    pub w: Weight<'a>,
    pub n: usize,
    pub y: &'a mut [f32],
    pub ys: usize,
    /// Add to what `y` holds (a residual stream, a bias) instead of overwriting it.
    pub add: bool,
}

/// Whether this machine runs the kernel (AVX2 + FMA at least; see `isa`).
pub fn available() -> bool {
    super::isa::has(Isa::Avx2)
}

/// Whether bf16 weights are multiplied with bf16 dot products (AVX512-BF16, twice the products
/// per instruction of an f32 FMA; the inputs are then rounded to bf16 as well).
pub fn dot_bf16_available() -> bool {
    super::isa::has(Isa::Avx512Bf16)
}

/// `outs[o].y (+)= x (m x k) @ outs[o].w^T` for every o, split over `threads` tasks. Returns false,
/// doing nothing, when the kernel is not available here.
///
/// # Panics
/// When a slice is too short for the sizes given (a caller's bug, not user input).
pub fn matmul_many(x: &[f32], m: usize, k: usize, outs: &mut [Out], threads: usize) -> bool {
    matmul_many_at(super::isa::level(), x, m, k, outs, threads)
}

/// `matmul_many` with the kernel of instruction-set level `level` (no higher than this machine's), so
/// the tests can check every path the CPU has.
pub fn matmul_many_at(
    level: Isa,
    x: &[f32],
    m: usize,
    k: usize,
    outs: &mut [Out],
    threads: usize,
) -> bool {
    if level < Isa::Avx2 || !super::isa::has(level) {
        return false;
    }
    for o in outs.iter() {
        assert!(
            x.len() >= m * k && o.w.len() >= o.n * k,
            "skinny: operands shorter than {m} x {k} / {} x {k}",
            o.n
        );
        assert!(
            m == 0 || o.n == 0 || o.y.len() >= (m - 1) * o.ys + o.n,
            "skinny: output too short"
        );
        // Rows closer than n would share output elements between the threads that write them.
        assert!(m <= 1 || o.ys >= o.n, "skinny: output row stride {} under {} columns", o.ys, o.n);
    }
    if m == 0 || k == 0 && outs.iter().all(|o| o.add) {
        return true;
    }
    // For bf16 dot products, the inputs rounded once, each row padded with zeros to whole 32-element
    // blocks so the kernel reads whole vectors.
    let kp = k.div_ceil(32) * 32;
    let xb: Vec<u16> =
        if level >= Isa::Avx512Bf16 && outs.iter().any(|o| matches!(o.w, Weight::Bf16(_))) {
            let mut xb = vec![0u16; m * kp];
            for (d, s) in xb.chunks_exact_mut(kp).zip(x.chunks_exact(k)) {
                for (d, &v) in d.iter_mut().zip(s) {
                    *d = to_bf16(v);
                }
            }
            xb
        } else {
            Vec::new()
        };
    let total: usize = outs.iter().map(|o| o.n).sum();
    // Each task takes a run of whole 3-row blocks of the outputs laid end to end.
    let per = total.div_ceil(threads.max(1)).div_ceil(3) * 3;
    let parts = total.div_ceil(per.max(1));
    let segs: Vec<Seg> = outs
        .iter_mut()
        .map(|o| Seg {
            w: o.w,
            n: o.n,
            y: o.y.as_mut_ptr(),
            ys: o.ys,
            add: o.add,
        })
        .collect();
    let run = |p: usize| {
        let (mut lo, hi) = (p * per, ((p + 1) * per).min(total));
        let mut base = 0;
        for s in &segs {
            if lo < hi && lo < base + s.n {
                let j0 = lo - base;
                let j1 = (hi - base).min(s.n);
                // SAFETY: the asserts above bound every access for rows < m and columns < o.n; `level`
                // is at most this machine's (checked on entry) and xb is non-empty only at AVX512-BF16.
                // Tasks take disjoint output columns, which are disjoint memory since `ys >= n` or
                // `m == 1` (asserted on entry).
                unsafe { kernel(level, m, k, x.as_ptr(), (&xb, kp), s, j0, j1) };
                lo = base + j1;
            }
            base += s.n;
        }
    };
    if parts <= 1 {
        run(0);
    } else {
        (0..parts).into_par_iter().for_each(run);
    }
    true
}

#[derive(Clone, Copy)]
struct Seg<'a> {
    w: Weight<'a>,
    n: usize,
    y: *mut f32,
    ys: usize,
    add: bool,
}
// SAFETY: tasks read `w` and write disjoint columns of `y`.
unsafe impl Send for Seg<'_> {}
// SAFETY: as for `Send`: a shared `Seg` is only read; its `y` is written through by the one task
// that owns each column range.
unsafe impl Sync for Seg<'_> {}

/// Output columns `j0..j1` of one weight, by the kernel of `level`; `xb` holds the inputs in bf16 (rows
/// `kp` apart) when bf16 weights take the dot-product kernel.
///
/// # Safety
/// `level` is no higher than this machine's, and `xb.0` is non-empty only where it has AVX512-BF16
/// (rows `xb.1` apart, zero-padded); the pointers address the sizes given; no other thread writes
/// columns `j0..j1` of `s.y` meanwhile.
#[allow(clippy::too_many_arguments)]
unsafe fn kernel(
    level: Isa,
    m: usize,
    k: usize,
    x: *const f32,
    xb: (&[u16], usize),
    s: &Seg,
    j0: usize,
    j1: usize,
) {
    #[cfg(target_arch = "x86_64")]
    match s.w {
        Weight::Bf16(w) if !xb.0.is_empty() => avx512::columns_dot(
            m,
            k,
            xb.0.as_ptr(),
            xb.1,
            w.as_ptr(),
            s.y,
            s.ys,
            s.add,
            j0,
            j1,
        ),
        Weight::F32(w) if level >= Isa::Avx512 => {
            avx512::columns(m, k, x, w.as_ptr(), s.y, s.ys, s.add, j0, j1)
        }
        Weight::Bf16(w) if level >= Isa::Avx512 => {
            avx512::columns(m, k, x, w.as_ptr(), s.y, s.ys, s.add, j0, j1)
        }
        Weight::F32(w) => avx2::columns(m, k, x, w.as_ptr(), s.y, s.ys, s.add, j0, j1),
        Weight::Bf16(w) => avx2::columns(m, k, x, w.as_ptr(), s.y, s.ys, s.add, j0, j1),
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (level, m, k, x, xb, s, j0, j1);
        unreachable!("skinny: no kernel on this architecture")
    }
}

/// The weight rows one panel holds (an L2-sized share per thread).
const PANEL_BYTES: usize = 1 << 17;

/// Output columns `j0..j1` of a weight of `k` elements (`esize` bytes each) per row, walked in panels
/// of weight rows that stay in cache while every block of up to `rows_max` input rows passes over them,
/// so each block's inputs are read from L1 and the weights leave memory once: `block(i, r, j, c, pf,
/// ahead)` multiplies input rows `i..i + r` by weight rows `j..j + c` and prefetches `pf` weight rows
/// from row `ahead` (only the first pass over a panel fetches; far enough ahead that a block's weights
/// arrive while earlier blocks compute).
#[inline(always)]
fn walk(
    m: usize,
    k: usize,
    esize: usize,
    rows_max: usize,
    j0: usize,
    j1: usize,
    mut block: impl FnMut(usize, usize, usize, usize, usize, usize),
) {
    let ahead = 3 * (rows_max / m.clamp(1, rows_max)).min(4);
    let panel = (PANEL_BYTES / (esize * k.max(1))).max(1).div_ceil(3) * 3;
    let mut p0 = j0;
    while p0 < j1 {
        let p1 = (p0 + panel).min(j1);
        let mut i = 0;
        while i < m {
            let r = (m - i).min(rows_max);
            let mut j = p0;
            while j < p1 {
                let c = (p1 - j).min(3);
                let pf = if i == 0 {
                    (j1 - j).saturating_sub(ahead).min(3)
                } else {
                    0
                };
                block(i, r, j, c, pf, (j + ahead).min(j1.saturating_sub(1)));
                j += c;
            }
            i += r;
        }
        p0 = p1;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// A weight element type: 8 of them widened to f32 lanes, or one.
    pub(super) trait Elem: Copy {
        /// # Safety
        /// The CPU must have AVX2 and FMA; 8 elements must be readable from `p`.
        unsafe fn load(p: *const Self) -> __m256;
        fn value(self) -> f32;
    }

    impl Elem for f32 {
        /// # Safety
        /// As [`Elem::load`]: AVX2 and FMA, 8 readable f32 at `p`.
        #[target_feature(enable = "avx2,fma")]
        #[inline]
        unsafe fn load(p: *const f32) -> __m256 {
            _mm256_loadu_ps(p)
        }
        #[inline]
        fn value(self) -> f32 {
            self
        }
    }

    impl Elem for u16 {
        /// # Safety
        /// As [`Elem::load`]: AVX2 and FMA, 8 readable u16 at `p`.
        #[target_feature(enable = "avx2,fma")]
        #[inline]
        unsafe fn load(p: *const u16) -> __m256 {
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(
                _mm_loadu_si128(p as *const __m128i),
            )))
        }
        #[inline]
        fn value(self) -> f32 {
            super::from_bf16(self)
        }
    }

    /// # Safety
    /// The CPU must have AVX2 and FMA. No memory is touched.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)))
    }

    /// Input rows `x[0..R]` (k apart) against weight rows `w[0..C]` (k apart): `y[t * ys + c] (+)=`
    /// their dot products (the last `k % 8` elements summed one by one); `ahead` is prefetched a line
    /// per weight row per step. 4 x 3 sums, 3 weight vectors and one input take the 16 registers.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `x` must address `R` rows and `w` `C` rows of `k` elements (`k`
    /// apart), `ahead` `ahead_rows` such rows (prefetched only, but the addresses must stay inside the
    /// weight); `y[t * ys + c]` for `t < R`, `c < C` must be writable, by this thread alone.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block<E: Elem, const R: usize, const C: usize>(
        k: usize,
        x: *const f32,
        w: *const E,
        ahead: *const E,
        ahead_rows: usize,
        y: *mut f32,
        ys: usize,
        add: bool,
    ) {
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        let full = k / 8 * 8;
        let mut kk = 0;
        while kk < full {
            let mut a = [_mm256_setzero_ps(); C];
            for c in 0..C {
                a[c] = E::load(w.add(c * k + kk));
            }
            for c in 0..ahead_rows {
                _mm_prefetch::<_MM_HINT_T0>(ahead.add(c * k + kk) as *const i8);
            }
            for t in 0..R {
                let xv = _mm256_loadu_ps(x.add(t * k + kk));
                for c in 0..C {
                    acc[t][c] = _mm256_fmadd_ps(xv, a[c], acc[t][c]);
                }
            }
            kk += 8;
        }
        for t in 0..R {
            for c in 0..C {
                let mut s = hsum(acc[t][c]);
                for kk in full..k {
                    s += *x.add(t * k + kk) * (*w.add(c * k + kk)).value();
                }
                let out = y.add(t * ys + c);
                *out = if add { *out + s } else { s };
            }
        }
    }

    /// Up to 4 input rows against C weight rows.
    ///
    /// # Safety
    /// As `block` with `R = r` (1 to 4).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn rows<E: Elem, const C: usize>(
        r: usize,
        k: usize,
        x: *const f32,
        w: *const E,
        ahead: *const E,
        ahead_rows: usize,
        y: *mut f32,
        ys: usize,
        add: bool,
    ) {
        match r {
            4 => block::<E, 4, C>(k, x, w, ahead, ahead_rows, y, ys, add),
            3 => block::<E, 3, C>(k, x, w, ahead, ahead_rows, y, ys, add),
            2 => block::<E, 2, C>(k, x, w, ahead, ahead_rows, y, ys, add),
            _ => block::<E, 1, C>(k, x, w, ahead, ahead_rows, y, ys, add),
        }
    }

    /// Output columns `j0..j1` of `y (m x n, ys apart) (+)= x (m x k) @ w (n x k)^T`.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `x` must address `m x k` f32 and `w` at least `j1` rows of `k`
    /// elements; row `i < m` of `y` starts at `y + i * ys`, and its columns `j0..j1` must be writable and
    /// written by no other thread meanwhile.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn columns<E: Elem>(
        m: usize,
        k: usize,
        x: *const f32,
        w: *const E,
        y: *mut f32,
        ys: usize,
        add: bool,
        j0: usize,
        j1: usize,
    ) {
        super::walk(
            m,
            k,
            std::mem::size_of::<E>(),
            4,
            j0,
            j1,
            // SAFETY: `walk` hands out `i + r <= m`, `j + c <= j1` and a prefetch run of `pf` rows from
            // `ahead` that ends below `j1`, so every pointer formed here stays inside x, w and y as this
            // function's caller guarantees; the CPU features are the caller's guarantee too.
            |i, r, j, c, pf, ahead| unsafe {
                let (xi, wj, next, yi) = (
                    x.add(i * k),
                    w.add(j * k),
                    w.add(ahead * k),
                    y.add(i * ys + j),
                );
                match c {
                    3 => rows::<E, 3>(r, k, xi, wj, next, pf, yi, ys, add),
                    2 => rows::<E, 2>(r, k, xi, wj, next, pf, yi, ys, add),
                    _ => rows::<E, 1>(r, k, xi, wj, next, pf, yi, ys, add),
                }
            },
        );
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// A weight element type: 16 of them widened to f32 lanes.
    pub(super) trait Elem: Copy {
        /// # Safety
        /// The CPU must have AVX-512 F/VL/BW; 16 elements must be readable from `p`.
        unsafe fn load(p: *const Self) -> __m512;
        /// # Safety
        /// As `load`, for the elements whose `mask` bit is set (the others are not read).
        unsafe fn load_masked(mask: __mmask16, p: *const Self) -> __m512;
    }

    impl Elem for f32 {
        /// # Safety
        /// As [`Elem::load`]: AVX-512 F/VL/BW, 16 readable f32 at `p`.
        #[target_feature(enable = "avx512f,avx512vl,avx512bw")]
        #[inline]
        unsafe fn load(p: *const f32) -> __m512 {
            _mm512_loadu_ps(p)
        }
        /// # Safety
        /// As [`Elem::load_masked`]: AVX-512 F/VL/BW, the masked-in f32 at `p` readable.
        #[target_feature(enable = "avx512f,avx512vl,avx512bw")]
        #[inline]
        unsafe fn load_masked(mask: __mmask16, p: *const f32) -> __m512 {
            _mm512_maskz_loadu_ps(mask, p)
        }
    }

    impl Elem for u16 {
        /// # Safety
        /// As [`Elem::load`]: AVX-512 F/VL/BW, 16 readable u16 at `p`.
        #[target_feature(enable = "avx512f,avx512vl,avx512bw")]
        #[inline]
        unsafe fn load(p: *const u16) -> __m512 {
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(
                _mm256_loadu_si256(p as *const __m256i),
            )))
        }
        /// # Safety
        /// As [`Elem::load_masked`]: AVX-512 F/VL/BW, the masked-in u16 at `p` readable.
        #[target_feature(enable = "avx512f,avx512vl,avx512bw")]
        #[inline]
        unsafe fn load_masked(mask: __mmask16, p: *const u16) -> __m512 {
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(
                _mm256_maskz_loadu_epi16(mask, p as *const i16),
            )))
        }
    }

    /// The sums of four vectors, as the four lanes of one.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F/VL/BW. No memory is touched.
    #[target_feature(enable = "avx512f,avx512vl,avx512bw")]
    #[inline]
    unsafe fn reduce4(a: __m512, b: __m512, c: __m512, d: __m512) -> __m128 {
        let ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
        let cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
        let (ab, cd) = (_mm512_castps_pd(ab), _mm512_castps_pd(cd));
        let s = _mm512_add_ps(
            _mm512_castpd_ps(_mm512_unpacklo_pd(ab, cd)),
            _mm512_castpd_ps(_mm512_unpackhi_pd(ab, cd)),
        );
        let h = _mm256_add_ps(
            _mm512_castps512_ps256(s),
            _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)),
        );
        _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1))
    }

    /// Input rows `x[0..R]` (k apart) against weight rows `w[0..C]` (k apart): `y[t * ys + c] (+)=`
    /// their dot products; `ahead` is prefetched a line per weight row per step.
    ///
    /// # Safety
    /// As `avx2::block`, with AVX-512 F/VL/BW (the last `k % 16` elements are read by masked loads).
    #[target_feature(enable = "avx512f,avx512vl,avx512bw")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block<E: Elem, const R: usize, const C: usize>(
        k: usize,
        x: *const f32,
        w: *const E,
        ahead: *const E,
        ahead_rows: usize,
        y: *mut f32,
        ys: usize,
        add: bool,
    ) {
        let mut acc = [[_mm512_setzero_ps(); C]; R];
        let full = k / 16 * 16;
        let mut kk = 0;
        while kk < full {
            let mut a = [_mm512_setzero_ps(); C];
            for c in 0..C {
                a[c] = E::load(w.add(c * k + kk));
            }
            for c in 0..ahead_rows {
                _mm_prefetch::<_MM_HINT_T0>(ahead.add(c * k + kk) as *const i8);
            }
            for t in 0..R {
                let xv = _mm512_loadu_ps(x.add(t * k + kk));
                for c in 0..C {
                    acc[t][c] = _mm512_fmadd_ps(xv, a[c], acc[t][c]);
                }
            }
            kk += 16;
        }
        if full < k {
            let mask: __mmask16 = (1u16 << (k - full)) - 1;
            let mut a = [_mm512_setzero_ps(); C];
            for c in 0..C {
                a[c] = E::load_masked(mask, w.add(c * k + full));
            }
            for t in 0..R {
                let xv = _mm512_maskz_loadu_ps(mask, x.add(t * k + full));
                for c in 0..C {
                    acc[t][c] = _mm512_fmadd_ps(xv, a[c], acc[t][c]);
                }
            }
        }
        store::<R, C>(&acc, y, ys, add);
    }

    /// `y[t * ys + c] (+)=` the lane sum of `acc[t][c]`.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F/VL/BW; `y[t * ys + c]` for `t < R`, `c < C` must be writable (and
    /// readable when `add`), by this thread alone.
    #[target_feature(enable = "avx512f,avx512vl,avx512bw")]
    #[inline]
    unsafe fn store<const R: usize, const C: usize>(
        acc: &[[__m512; C]; R],
        y: *mut f32,
        ys: usize,
        add: bool,
    ) {
        let lanes: __mmask8 = (1u8 << C) - 1;
        let z = _mm512_setzero_ps();
        for (t, r) in acc.iter().enumerate() {
            let mut s = reduce4(
                r[0],
                r.get(1).copied().unwrap_or(z),
                r.get(2).copied().unwrap_or(z),
                z,
            );
            let out = y.add(t * ys);
            if add {
                s = _mm_add_ps(s, _mm_maskz_loadu_ps(lanes, out));
            }
            _mm_mask_storeu_ps(out, lanes, s);
        }
    }

    /// As `block`, for bf16 inputs `x` (rows `kp` apart, zero-padded) and bf16 weights, by dot
    /// products of bf16 pairs summed into f32.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F/VL/BW/BF16; `x` must address `R` rows of `kp` bf16 (`kp` apart:
    /// `k` rounded up to 32, zero-padded), `w` `C` rows and `ahead` `ahead_rows` rows of `k` bf16 (`k`
    /// apart; the tail is read by masked loads); `y` as for `store`.
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512bf16")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block_dot<const R: usize, const C: usize>(
        k: usize,
        kp: usize,
        x: *const u16,
        w: *const u16,
        ahead: *const u16,
        ahead_rows: usize,
        y: *mut f32,
        ys: usize,
        add: bool,
    ) {
        let mut acc = [[_mm512_setzero_ps(); C]; R];
        let full = k / 32 * 32;
        let mut kk = 0;
        while kk < kp {
            let mut a = [_mm512_setzero_si512(); C];
            if kk < full {
                for c in 0..C {
                    a[c] = _mm512_loadu_si512(w.add(c * k + kk) as *const __m512i);
                }
            } else {
                let mask: __mmask32 = ((1u64 << (k - full)) - 1) as u32;
                for c in 0..C {
                    a[c] = _mm512_maskz_loadu_epi16(mask, w.add(c * k + kk) as *const i16);
                }
            }
            for c in 0..ahead_rows {
                _mm_prefetch::<_MM_HINT_T0>(ahead.add(c * k + kk) as *const i8);
            }
            for t in 0..R {
                let xv: __m512bh =
                    std::mem::transmute(_mm512_loadu_si512(x.add(t * kp + kk) as *const __m512i));
                for c in 0..C {
                    acc[t][c] = _mm512_dpbf16_ps(
                        acc[t][c],
                        xv,
                        std::mem::transmute::<__m512i, __m512bh>(a[c]),
                    );
                }
            }
            kk += 32;
        }
        store::<R, C>(&acc, y, ys, add);
    }

    /// # Safety
    /// As `block_dot` with `R = r` (1 to 8).
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512bf16")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn rows_dot<const C: usize>(
        r: usize,
        k: usize,
        kp: usize,
        x: *const u16,
        w: *const u16,
        ahead: *const u16,
        ahead_rows: usize,
        y: *mut f32,
        ys: usize,
        add: bool,
    ) {
        match r {
            8 => block_dot::<8, C>(k, kp, x, w, ahead, ahead_rows, y, ys, add),
            7 => block_dot::<7, C>(k, kp, x, w, ahead, ahead_rows, y, ys, add),
            6 => block_dot::<6, C>(k, kp, x, w, ahead, ahead_rows, y, ys, add),
            5 => block_dot::<5, C>(k, kp, x, w, ahead, ahead_rows, y, ys, add),
            4 => block_dot::<4, C>(k, kp, x, w, ahead, ahead_rows, y, ys, add),
            3 => block_dot::<3, C>(k, kp, x, w, ahead, ahead_rows, y, ys, add),
            2 => block_dot::<2, C>(k, kp, x, w, ahead, ahead_rows, y, ys, add),
            _ => block_dot::<1, C>(k, kp, x, w, ahead, ahead_rows, y, ys, add),
        }
    }

    /// As `columns`, by `block_dot`.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F/VL/BW/BF16; `x` must address `m` rows of `kp` bf16 (zero-padded),
    /// `w` at least `j1` rows of `k` bf16; `y` as for `avx2::columns`.
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512bf16")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn columns_dot(
        m: usize,
        k: usize,
        x: *const u16,
        kp: usize,
        w: *const u16,
        y: *mut f32,
        ys: usize,
        add: bool,
        j0: usize,
        j1: usize,
    ) {
        // SAFETY: as in `avx2::columns`: `walk` keeps rows below m and weight rows below j1, so every
        // pointer stays inside x (rows kp apart), w and y as the caller guarantees, with its CPU features.
        super::walk(m, k, 2, 8, j0, j1, |i, r, j, c, pf, ahead| unsafe {
            let (xi, wj, next, yi) = (
                x.add(i * kp),
                w.add(j * k),
                w.add(ahead * k),
                y.add(i * ys + j),
            );
            match c {
                3 => rows_dot::<3>(r, k, kp, xi, wj, next, pf, yi, ys, add),
                2 => rows_dot::<2>(r, k, kp, xi, wj, next, pf, yi, ys, add),
                _ => rows_dot::<1>(r, k, kp, xi, wj, next, pf, yi, ys, add),
            }
        });
    }

    /// Up to 8 input rows against C weight rows.
    ///
    /// # Safety
    /// As `block` with `R = r` (1 to 8).
    #[target_feature(enable = "avx512f,avx512vl,avx512bw")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn rows<E: Elem, const C: usize>(
        r: usize,
        k: usize,
        x: *const f32,
        w: *const E,
        ahead: *const E,
        ahead_rows: usize,
        y: *mut f32,
        ys: usize,
        add: bool,
    ) {
        match r {
            8 => block::<E, 8, C>(k, x, w, ahead, ahead_rows, y, ys, add),
            7 => block::<E, 7, C>(k, x, w, ahead, ahead_rows, y, ys, add),
            6 => block::<E, 6, C>(k, x, w, ahead, ahead_rows, y, ys, add),
            5 => block::<E, 5, C>(k, x, w, ahead, ahead_rows, y, ys, add),
            4 => block::<E, 4, C>(k, x, w, ahead, ahead_rows, y, ys, add),
            3 => block::<E, 3, C>(k, x, w, ahead, ahead_rows, y, ys, add),
            2 => block::<E, 2, C>(k, x, w, ahead, ahead_rows, y, ys, add),
            _ => block::<E, 1, C>(k, x, w, ahead, ahead_rows, y, ys, add),
        }
    }

    /// Output columns `j0..j1` of `y (m x n, ys apart) (+)= x (m x k) @ w (n x k)^T`.
    ///
    /// # Safety
    /// As `avx2::columns`, with AVX-512 F/VL/BW.
    #[target_feature(enable = "avx512f,avx512vl,avx512bw")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn columns<E: Elem>(
        m: usize,
        k: usize,
        x: *const f32,
        w: *const E,
        y: *mut f32,
        ys: usize,
        add: bool,
        j0: usize,
        j1: usize,
    ) {
        super::walk(
            m,
            k,
            std::mem::size_of::<E>(),
            8,
            j0,
            j1,
            // SAFETY: as in `avx2::columns`: `walk` keeps rows below m and weight rows below j1, so every
            // pointer stays inside x, w and y as the caller guarantees, with its CPU features.
            |i, r, j, c, pf, ahead| unsafe {
                let (xi, wj, next, yi) = (
                    x.add(i * k),
                    w.add(j * k),
                    w.add(ahead * k),
                    y.add(i * ys + j),
                );
                match c {
                    3 => rows::<E, 3>(r, k, xi, wj, next, pf, yi, ys, add),
                    2 => rows::<E, 2>(r, k, xi, wj, next, pf, yi, ys, add),
                    _ => rows::<E, 1>(r, k, xi, wj, next, pf, yi, ys, add),
                }
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::test_values as values;

    /// Every level of the kernel this machine runs (AVX2, and AVX-512 where it has it).
    fn levels() -> Vec<Isa> {
        let levels: Vec<Isa> = [Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16]
            .into_iter()
            .filter(|&l| crate::isa::has(l))
            .collect();
        assert!(
            !levels.is_empty(),
            "built for a CPU with AVX2 (cppo_isa_avx2) but it is not available at run time"
        );
        levels
    }

    #[test]
    #[cfg_attr(
        not(cppo_isa_avx2),
        ignore = "needs AVX2 + FMA, which this CPU lacks or CPPO_MAX_ISA caps (ops::isa)"
    )]
    fn panels_of_a_long_weight_cover_every_column() {
        // k = 3000 makes a panel 12 weight rows, so 40 outputs take four panels (the last short).
        let (m, k, n) = (19, 3000, 40);
        let x = values(m * k, 1);
        let w = values(n * k, 2);
        for level in levels() {
            let mut y = vec![0f32; m * n];
            assert!(matmul_many_at(
                level,
                &x,
                m,
                k,
                &mut [Out {
                    w: Weight::F32(&w),
                    n,
                    y: &mut y,
                    ys: n,
                    add: false
                }],
                2
            ));
            for i in 0..m {
                for j in 0..n {
                    let dot: f64 = (0..k)
                        .map(|t| x[i * k + t] as f64 * w[j * k + t] as f64)
                        .sum();
                    assert!(
                        (y[i * n + j] as f64 - dot).abs() <= 1e-5 * k as f64,
                        "{level}: ({i}, {j}): {} vs {dot}",
                        y[i * n + j]
                    );
                }
            }
        }
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3F80);
        // 1 + 2^-8 lies halfway between two bf16 values: ties go to the even one (1.0).
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3F80);
        assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3F82);
        assert_eq!(from_bf16(to_bf16(-2.5)), -2.5);
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
        for v in [0.1f32, -3.3, 1e-20, 6.5e4, 1.234e30] {
            let r = from_bf16(to_bf16(v));
            assert!(((r - v) / v).abs() <= 1.0 / 256.0, "{v} -> {r}");
        }
    }

    proptest! {
        /// A bf16 weight gives the product of its widened values: with f32 inputs, or with the inputs
        /// rounded to bf16 where the dot-product instruction takes them.
        #[test]
        #[cfg_attr(not(cppo_isa_avx2), ignore = "needs AVX2 + FMA, which this CPU lacks or CPPO_MAX_ISA caps (ops::isa)")]
        fn bf16_weights_multiply_their_widened_values(
            m in 1usize..20,
            k in 1usize..100,
            n in 1usize..14,
            add in any::<bool>(),
            threads in 1usize..4,
            seed in 0u32..1000,
        ) {
            let x = values(m * k, seed);
            let half: Vec<u16> = values(n * k, seed + 1).iter().map(|&v| to_bf16(v)).collect();
            let start = values(m * n, seed + 2);
            for level in levels() {
            let mut y = start.clone();
            let ran = matmul_many_at(level, &x, m, k, &mut [Out { w: Weight::Bf16(&half), n, y: &mut y, ys: n, add }], threads);
            prop_assert!(ran);
            let input = |v: f32| if level >= Isa::Avx512Bf16 { from_bf16(to_bf16(v)) } else { v } as f64;
            for i in 0..m {
                for j in 0..n {
                    let dot: f64 = (0..k).map(|t| input(x[i * k + t]) * from_bf16(half[j * k + t]) as f64).sum();
                    let want = if add { start[i * n + j] as f64 + dot } else { dot };
                    let got = y[i * n + j] as f64;
                    prop_assert!((got - want).abs() <= 1e-5 * (1.0 + k as f64), "{level}: ({i}, {j}): {got} vs {want}");
                }
            }
            }
        }

        #[test]
        #[cfg_attr(not(cppo_isa_avx2), ignore = "needs AVX2 + FMA, which this CPU lacks or CPPO_MAX_ISA caps (ops::isa)")]
        fn matches_a_plain_product(
            m in 0usize..20,
            k in 0usize..70,
            ns in proptest::collection::vec(0usize..14, 1..4),
            adds in proptest::collection::vec(any::<bool>(), 3),
            pad in 0usize..3,
            threads in 1usize..4,
            seed in 0u32..1000,
        ) {
            let x = values(m * k, seed);
            let ws: Vec<Vec<f32>> = ns.iter().enumerate().map(|(o, &n)| values(n * k, seed + 7 * o as u32 + 1)).collect();
            // Outputs may be strided (`ys = n + pad`): the padding must stay untouched.
            let before: Vec<Vec<f32>> = ns.iter().enumerate().map(|(o, &n)| values(m * (n + pad), seed + 100 + o as u32)).collect();
            for level in levels() {
            let mut ys = before.clone();
            let mut outs: Vec<Out> = ws
                .iter()
                .zip(ys.iter_mut())
                .zip(&ns)
                .zip(&adds)
                .map(|(((w, y), &n), &add)| Out { w: Weight::F32(w), n, y, ys: n + pad, add })
                .collect();
            prop_assert!(matmul_many_at(level, &x, m, k, &mut outs, threads));
            for (o, &n) in ns.iter().enumerate() {
                let s = n + pad;
                for i in 0..m {
                    for j in 0..s {
                        let got = ys[o][i * s + j];
                        if j >= n {
                            prop_assert_eq!(got, before[o][i * s + j]);
                            continue;
                        }
                        let dot: f64 = (0..k).map(|t| x[i * k + t] as f64 * ws[o][j * k + t] as f64).sum();
                        let want = if adds[o] { before[o][i * s + j] as f64 + dot } else { dot };
                        prop_assert!((got as f64 - want).abs() <= 1e-5 * (1.0 + k as f64), "{level} out {o} ({i}, {j}): {got} vs {want}");
                    }
                }
            }
            }
        }
    }
}
