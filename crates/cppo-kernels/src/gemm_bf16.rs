//! `dst (+)= scale * a @ b` with both operands rounded to bf16 and the products summed in f32: the
//! mixed-precision multiply of the update (what `torch.autocast(dtype=bfloat16)` computes on a CPU).
//!
//! An AVX512-BF16 dot product multiplies 32 bf16 pairs per instruction where an f32 FMA multiplies 16;
//! on these cores (2 x Zen 4) that is 440 against 220 GFLOP/s at peak, and the training step is
//! three quarters matrix products. Master weights, gradients, optimizer state, norms, softmax and
//! attention all stay f32; only the operands of the large products are rounded, once, while they are
//! packed.
//!
//! Layout: `a` is packed in blocks of `MR` rows, `b` in strips of `NR` columns, both as pairs of
//! consecutive k (one u32 per pair, the lower k in the low half, as the instruction pairs them). Each
//! task takes whole strips of `b` (packed by the task itself) against every block of `a`, over the whole
//! of k: a tile's sums never leave the registers until they are stored.

use rayon::prelude::*;

use super::gemm::{View, ViewMut};
use super::skinny::{dot_bf16_available, to_bf16};
use super::SendPtr;

/// Rows of `a` per block, columns of `b` per strip: 8 x 3 vectors of sums, 3 vectors of `b` and one
/// broadcast take 28 of the 32 vector registers.
const MR: usize = 8;
const NR: usize = 48;

/// Whether this machine multiplies in bf16 (AVX512-BF16); elsewhere callers use the f32 multiply.
pub fn available() -> bool {
    dot_bf16_available()
}

#[inline]
fn pair(lo: f32, hi: f32) -> u32 {
    to_bf16(lo) as u32 | (to_bf16(hi) as u32) << 16
}

/// `a (m x k)` as `m.div_ceil(MR)` blocks of `kp` pairs x `MR` rows (zeros past the edges).
///
/// # Safety
/// `a` must address an `m x k` matrix; on x86-64 the CPU must have AVX512-BF16 (as for `pack_panel`).
unsafe fn pack_a(m: usize, k: usize, a: View<f32>, parallel: bool) -> Vec<u32> {
    let kp = k.div_ceil(2);
    let blocks = m.div_ceil(MR);
    let mut out = vec![0u32; blocks * kp * MR];
    let (src, rs, cs) = (SendPtr(a.ptr as *mut f32), a.rs, a.cs);
    let fill = |(blk, dst): (usize, &mut [u32])| {
        let rows = (m - blk * MR).min(MR);
        pack_panel(src.get().add(blk * MR * rs), rs, cs, rows, k, MR, dst);
    };
    if parallel {
        out.par_chunks_mut(kp * MR).enumerate().for_each(fill);
    } else {
        out.chunks_mut(kp * MR).enumerate().for_each(fill);
    }
    out
}

/// Columns `j0..j0 + NR` of `b (k x n)` as `kp` pairs x `NR` columns (zeros past the edges).
///
/// # Safety
/// `b` must address a `k x n` matrix, `j0 < n`, and `dst` hold `k.div_ceil(2) * NR`; on x86-64 the
/// CPU must have AVX512-BF16 (as for `pack_panel`).
unsafe fn pack_b(k: usize, n: usize, b: View<f32>, j0: usize, dst: &mut [u32]) {
    let cols = (n - j0).min(NR);
    if cols < NR {
        dst.fill(0);
    }
    pack_panel(b.ptr.add(j0 * b.cs), b.cs, b.rs, cols, k, NR, dst);
}

/// Entries `e < count` of a panel, entry e's k-th element at `src + e * es + kk * ks`, as
/// `dst[p * width + e] = (bf16 of element 2p, of element 2p + 1)` (zero past k). The two layouts the
/// update's operands come in, k contiguous (`ks == 1`) and entries contiguous (`es == 1`), are
/// converted 16 pairs at a time.
///
/// # Safety
/// Entry `e < count`'s elements `kk < k` must be readable at `src + e * es + kk * ks`; `count <=
/// width` and `dst.len() >= k.div_ceil(2) * width` (the vector packers write unchecked). On x86-64,
/// where `ks == 1` or `es == 1`, the CPU must have AVX512-F/VL/BW/BF16 (those packers' features).
unsafe fn pack_panel(
    src: *const f32,
    es: usize,
    ks: usize,
    count: usize,
    k: usize,
    width: usize,
    dst: &mut [u32],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if ks == 1 {
            return x86::pack_k_contiguous(src, es, count, k, width, dst);
        }
        if es == 1 {
            return x86::pack_entries_contiguous(src, ks, count, k, width, dst);
        }
    }
    let at = |e: usize, kk: usize| {
        if kk < k {
            *src.add(e * es + kk * ks)
        } else {
            0.0
        }
    };
    for p in 0..k.div_ceil(2) {
        for e in 0..count {
            dst[p * width + e] = pair(at(e, 2 * p), at(e, 2 * p + 1));
        }
    }
}

/// `dst (m x n) = [dst +] scale * a (m x k) @ b (k x n)` in bf16 with f32 sums. Returns false, doing
/// nothing, where the machine has no AVX512-BF16 or a size is 0.
///
/// # Safety
/// Every view must address valid memory for the given sizes, and `dst` must not overlap `a` or `b`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn matmul(
    m: usize,
    n: usize,
    k: usize,
    dst: ViewMut<f32>,
    accumulate: bool,
    a: View<f32>,
    b: View<f32>,
    scale: f32,
    parallel: bool,
) -> bool {
    if !available() {
        return false;
    }
    if m == 0 || n == 0 || k == 0 {
        // Nothing to multiply: the caller's f32 path writes the zeros (or leaves `dst`).
        return false;
    }
    let kp = k.div_ceil(2);
    let ap = pack_a(m, k, a, parallel);
    let (blocks, strips) = (m.div_ceil(MR), n.div_ceil(NR));
    let out = SendPtr(dst.ptr);
    let (bsrc, brs, bcs, drs, dcs) = (SendPtr(b.ptr as *mut f32), b.rs, b.cs, dst.rs, dst.cs);
    let strip = |s: usize, bp: &mut Vec<u32>| {
        bp.resize(kp * NR, 0);
        pack_b(
            k,
            n,
            View {
                ptr: bsrc.get(),
                rs: brs,
                cs: bcs,
            },
            s * NR,
            bp,
        );
        let cols = (n - s * NR).min(NR);
        for blk in 0..blocks {
            let rows = (m - blk * MR).min(MR);
            let d = ViewMut {
                ptr: out.get().add(blk * MR * drs + s * NR * dcs),
                rs: drs,
                cs: dcs,
            };
            #[cfg(target_arch = "x86_64")]
            x86::tile(
                kp,
                ap.as_ptr().add(blk * kp * MR),
                bp.as_ptr(),
                d,
                rows,
                cols,
                accumulate,
                scale,
            );
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = (d, rows, cols);
                unreachable!("gemm_bf16: no kernel on this architecture");
            }
        }
    };
    if parallel && strips > 1 {
        (0..strips)
            .into_par_iter()
            .for_each_init(Vec::new, |bp, s| strip(s, bp));
    } else {
        let mut bp = Vec::new();
        (0..strips).for_each(|s| strip(s, &mut bp));
    }
    true
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{ViewMut, MR, NR};
    use std::arch::x86_64::*;

    /// 16 pairs from 32 consecutive f32 (fewer at the end of k, zeros after).
    ///
    /// # Safety
    /// The CPU must have AVX512-F/VL/BW/BF16, and the first `min(left, 32)` f32 from `p` be readable
    /// (the masked loads read no others; the second half's address is formed with `wrapping_add`, so
    /// it may lie past the buffer when fewer than 16 are left).
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512bf16")]
    #[inline]
    unsafe fn pairs32(p: *const f32, left: usize) -> __m512i {
        let (m0, m1) = (mask16(left), mask16(left.saturating_sub(16)));
        let lo = _mm512_maskz_loadu_ps(m0, p);
        // wrapping_add: fewer than 16 values may be left, and a masked load reads none of them.
        let hi = _mm512_maskz_loadu_ps(m1, p.wrapping_add(16));
        std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo))
    }

    #[inline]
    fn mask16(n: usize) -> __mmask16 {
        if n >= 16 {
            0xFFFF
        } else {
            ((1u32 << n) - 1) as u16
        }
    }

    /// `pack_panel` for k contiguous: each entry's pairs are converted in runs of 16 and spread
    /// `width` apart.
    ///
    /// # Safety
    /// The CPU must have AVX512-F/VL/BW/BF16; entry `e < count` must have `k` readable f32 from
    /// `src + e * es`; `count <= width` and `dst.len() >= k.div_ceil(2) * width` (writes are unchecked).
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512bf16")]
    pub(super) unsafe fn pack_k_contiguous(
        src: *const f32,
        es: usize,
        count: usize,
        k: usize,
        width: usize,
        dst: &mut [u32],
    ) {
        let mut run = [0u32; 16];
        for e in 0..count {
            let row = src.add(e * es);
            let mut kk = 0;
            while kk < k {
                _mm512_storeu_si512(
                    run.as_mut_ptr() as *mut __m512i,
                    pairs32(row.add(kk), k - kk),
                );
                let p0 = kk / 2;
                for (q, &v) in run.iter().enumerate().take((k - kk).div_ceil(2).min(16)) {
                    *dst.get_unchecked_mut((p0 + q) * width + e) = v;
                }
                kk += 32;
            }
        }
    }

    /// `pack_panel` for entries contiguous: each pair of k rows is converted 16 entries at a time and
    /// interleaved into place.
    ///
    /// # Safety
    /// The CPU must have AVX512-F/VL/BW/BF16; row `kk < k` must have `count` readable f32 from
    /// `src + kk * ks`; `count <= width` and `dst.len() >= k.div_ceil(2) * width` (writes are unchecked).
    /// For odd `k` the last pass's second row does not exist: its address is formed with
    /// `wrapping_add` and never read.
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512bf16")]
    pub(super) unsafe fn pack_entries_contiguous(
        src: *const f32,
        ks: usize,
        count: usize,
        k: usize,
        width: usize,
        dst: &mut [u32],
    ) {
        // Word i of the result: element i / 2 of the first row for even i, of the second for odd.
        let idx = _mm512_set_epi16(
            31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20,
            4, 19, 3, 18, 2, 17, 1, 16, 0,
        );
        let zero = _mm512_setzero_ps();
        for p in 0..k.div_ceil(2) {
            let (r0, r1) = (src.add(2 * p * ks), src.wrapping_add((2 * p + 1) * ks));
            let out = dst.as_mut_ptr().add(p * width);
            let mut e = 0;
            while e < count {
                let m = mask16(count - e);
                let lo = _mm512_maskz_loadu_ps(m, r0.add(e));
                let hi = if 2 * p + 1 < k {
                    _mm512_maskz_loadu_ps(m, r1.add(e))
                } else {
                    zero
                };
                let both: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
                _mm512_mask_storeu_epi32(
                    out.add(e) as *mut i32,
                    m,
                    _mm512_permutexvar_epi16(idx, both),
                );
                e += 16;
            }
        }
    }

    /// One tile: `rows (<= MR) x cols (<= NR)` of `d (+)= scale * a-block @ b-strip` over `kp` pairs.
    ///
    /// # Safety
    /// The CPU must have AVX512-F/VL/BW/BF16; `a` must hold `kp * MR` and `b` `kp * NR` packed pairs;
    /// `d` must address `rows x cols` writable f32 (`rows <= MR`, `cols <= NR`) that no other thread
    /// touches meanwhile.
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512bf16")]
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    pub(super) unsafe fn tile(
        kp: usize,
        a: *const u32,
        b: *const u32,
        d: ViewMut<f32>,
        rows: usize,
        cols: usize,
        accumulate: bool,
        scale: f32,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 3]; MR];
        for p in 0..kp {
            let bv = [
                _mm512_loadu_si512(b.add(p * NR) as *const __m512i),
                _mm512_loadu_si512(b.add(p * NR + 16) as *const __m512i),
                _mm512_loadu_si512(b.add(p * NR + 32) as *const __m512i),
            ];
            let ar = a.add(p * MR);
            for r in 0..MR {
                let av: __m512bh = std::mem::transmute(_mm512_set1_epi32(*ar.add(r) as i32));
                for c in 0..3 {
                    acc[r][c] = _mm512_dpbf16_ps(
                        acc[r][c],
                        av,
                        std::mem::transmute::<__m512i, __m512bh>(bv[c]),
                    );
                }
            }
        }
        let sv = _mm512_set1_ps(scale);
        if d.cs == 1 {
            for (r, row) in acc.iter().enumerate().take(rows) {
                let base = d.ptr.add(r * d.rs);
                for (c, v) in row.iter().enumerate() {
                    let c0 = c * 16;
                    if c0 >= cols {
                        break;
                    }
                    let mask: __mmask16 = if cols - c0 >= 16 {
                        0xFFFF
                    } else {
                        ((1u32 << (cols - c0)) - 1) as u16
                    };
                    let mut v = _mm512_mul_ps(*v, sv);
                    if accumulate {
                        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, base.add(c0)));
                    }
                    _mm512_mask_storeu_ps(base.add(c0), mask, v);
                }
            }
        } else {
            let mut lanes = [0f32; NR];
            for (r, row) in acc.iter().enumerate().take(rows) {
                for (c, v) in row.iter().enumerate() {
                    _mm512_storeu_ps(lanes.as_mut_ptr().add(c * 16), *v);
                }
                for (j, &v) in lanes.iter().enumerate().take(cols) {
                    let o = d.ptr.add(r * d.rs + j * d.cs);
                    *o = if accumulate {
                        *o + scale * v
                    } else {
                        scale * v
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skinny::from_bf16;
    use crate::test_values as values;
    use proptest::prelude::*;

    /// The product of the bf16-rounded operands, summed in f64.
    fn reference(
        m: usize,
        n: usize,
        k: usize,
        a: &[f32],
        a_t: bool,
        b: &[f32],
        b_t: bool,
    ) -> Vec<f64> {
        let r = |v: f32| from_bf16(to_bf16(v)) as f64;
        let ai = |i: usize, kk: usize| r(if a_t { a[kk * m + i] } else { a[i * k + kk] });
        let bi = |kk: usize, j: usize| r(if b_t { b[j * k + kk] } else { b[kk * n + j] });
        (0..m * n)
            .map(|ij| (0..k).map(|kk| ai(ij / n, kk) * bi(kk, ij % n)).sum())
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Any sizes (odd k, edge tiles), either operand transposed, with and without accumulation, row-
        /// or column-major output: equal to the rounded operands' product up to f32 summation.
        #[test]
        #[cfg_attr(not(cppo_isa_avx512bf16), ignore = "needs AVX512-BF16, which this CPU lacks or CPPO_MAX_ISA caps (ops::isa)")]
        fn matches_rounded_product(m in 1usize..40, n in 1usize..110, k in 1usize..70, a_t: bool, b_t: bool, acc: bool, col_major: bool, par: bool) {
            let a = values(m * k, 1);
            let b = values(k * n, 2);
            let init = values(m * n, 3);
            let mut out = init.clone();
            let av = if a_t { View { ptr: a.as_ptr(), rs: 1, cs: m } } else { View::rows(a.as_ptr(), k) };
            let bv = if b_t { View { ptr: b.as_ptr(), rs: 1, cs: k } } else { View::rows(b.as_ptr(), n) };
            let dv = if col_major { ViewMut { ptr: out.as_mut_ptr(), rs: 1, cs: m } } else { ViewMut::rows(out.as_mut_ptr(), n) };
            // SAFETY: the views address a (m x k), b (k x n) and out (m x n) exactly as laid out above, each
            // transposed or not as the view says; out is its own Vec, overlapping neither input.
            let ran = unsafe { matmul(m, n, k, dv, acc, av, bv, 0.5, par) };
            prop_assert!(ran);
            let want = reference(m, n, k, &a, a_t, &b, b_t);
            for i in 0..m {
                for j in 0..n {
                    let idx = if col_major { j * m + i } else { i * n + j };
                    let base = if acc { init[idx] as f64 } else { 0.0 };
                    let w = base + 0.5 * want[i * n + j];
                    prop_assert!((out[idx] as f64 - w).abs() <= 1e-5 * (1.0 + k as f64), "({i}, {j}): {} vs {w}", out[idx]);
                }
            }
        }
    }

    #[test]
    #[cfg_attr(
        not(cppo_isa_avx512bf16),
        ignore = "needs AVX512-BF16, which this CPU lacks or CPPO_MAX_ISA caps (ops::isa)"
    )]
    fn close_to_the_f32_product() {
        let (m, n, k) = (37, 100, 300);
        let (a, b) = (values(m * k, 4), values(k * n, 5));
        let mut out = vec![0f32; m * n];
        // SAFETY: row-major views of a (m x k), b (k x n) and out (m x n), each its own Vec.
        assert!(unsafe {
            matmul(
                m,
                n,
                k,
                ViewMut::rows(out.as_mut_ptr(), n),
                false,
                View::rows(a.as_ptr(), k),
                View::rows(b.as_ptr(), n),
                1.0,
                true,
            )
        });
        let exact: Vec<f64> = (0..m * n)
            .map(|ij| {
                (0..k)
                    .map(|kk| a[ij / n * k + kk] as f64 * b[kk * n + ij % n] as f64)
                    .sum()
            })
            .collect();
        let scale = (exact.iter().map(|v| v * v).sum::<f64>() / exact.len() as f64).sqrt();
        let err = out
            .iter()
            .zip(&exact)
            .map(|(&o, &e)| (o as f64 - e).abs())
            .fold(0.0, f64::max);
        // bf16 keeps 8 bits: each product is off by up to ~2^-8 relative, and the errors mostly cancel.
        assert!(err < 0.02 * scale, "max error {err} against rms {scale}");
        assert!(err > 0.0, "the operands were not rounded");
    }
}
