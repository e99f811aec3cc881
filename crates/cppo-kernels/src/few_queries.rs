//! Attention of a few queries over one run of cached keys: a decode step's query heads of one kv head
//! against that row's keys. In such a block every key and value is used by only a handful of queries,
//! so a general multiply does not pay for its setup and a dot product per (query, key) pays a
//! horizontal sum each; here the queries and their outputs stay in registers, four keys are scored at
//! a time with one combined reduction, and each value row is read once for all queries.
//!
//! AVX-512 (F and VL), head dimensions 64 and 128; `attend` says when it does not apply.

use super::Float;

/// `out (nq x d, rows d apart) = softmax(scale q k^T) v` for `q (nq x d, rows d apart)` over `len`
/// keys and values (rows `rs` apart). `p` is scratch. Returns false, doing nothing, when the kernel
/// does not apply (machine, head dimension).
///
/// # Safety
/// The pointers must address the sizes given; `out` must not overlap the inputs.
#[allow(clippy::too_many_arguments)]
pub unsafe fn attend(
    nq: usize,
    d: usize,
    q: *const f32,
    k: *const f32,
    v: *const f32,
    rs: usize,
    len: usize,
    scale: f32,
    out: *mut f32,
    p: &mut Vec<f32>,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if len == 0 || !super::isa::has(super::isa::Isa::Avx512) {
            return false;
        }
        let blocks: &[(usize, usize)] = match d {
            64 => &[(3, 4), (2, 4), (1, 4)],
            128 => &[(2, 8), (1, 8)],
            _ => return false,
        };
        p.clear();
        p.resize(3 * len, 0.0);
        let mut i = 0;
        while i < nq {
            let &(g, _) = blocks
                .iter()
                .find(|(g, _)| *g <= nq - i)
                .expect("a block of one query exists");
            let (qi, oi) = (q.add(i * d), out.add(i * d));
            match (g, d) {
                (3, 64) => x86::group::<4, 3>(qi, k, v, rs, len, scale, oi, p),
                (2, 64) => x86::group::<4, 2>(qi, k, v, rs, len, scale, oi, p),
                (1, 64) => x86::group::<4, 1>(qi, k, v, rs, len, scale, oi, p),
                (2, 128) => x86::group::<8, 2>(qi, k, v, rs, len, scale, oi, p),
                _ => x86::group::<8, 1>(qi, k, v, rs, len, scale, oi, p),
            }
            i += g;
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (nq, d, q, k, v, rs, len, scale, out, p);
        false
    }
}

/// Turns a row of scores into probabilities in place, as `attention::probabilities` does.
fn softmax(row: &mut [f32]) {
    let max = row
        .iter()
        .fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a });
    f32::exp_scale(row, max, 1.0);
    let sum = row.iter().fold(0.0f32, |a, &b| a + b);
    let inv = 1.0 / sum;
    for x in row.iter_mut() {
        *x *= inv;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// The sums of four vectors, as the four lanes of one.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and VL. No memory is touched.
    #[target_feature(enable = "avx512f,avx512vl")]
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

    /// `G` queries of `16 D` dimensions: scores into `p[g * len..]`, softmax, then `out = p v`.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and VL; `q` and `out` must address `G` rows of `16 D` f32 (`16 D`
    /// apart, not overlapping), `k` and `v` `len` rows of `16 D` readable f32 (`rs` apart), and `p`
    /// hold `G * len` (its 4-lane stores are unchecked).
    #[target_feature(enable = "avx512f,avx512vl")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn group<const D: usize, const G: usize>(
        q: *const f32,
        k: *const f32,
        v: *const f32,
        rs: usize,
        len: usize,
        scale: f32,
        out: *mut f32,
        p: &mut [f32],
    ) {
        let d = 16 * D;
        let mut qr = [[_mm512_setzero_ps(); D]; G];
        for g in 0..G {
            for c in 0..D {
                qr[g][c] = _mm512_loadu_ps(q.add(g * d + 16 * c));
            }
        }
        let sc = _mm_set1_ps(scale);
        let mut j = 0;
        while j + 4 <= len {
            let mut acc = [[_mm512_setzero_ps(); 4]; G];
            for c in 0..D {
                for t in 0..4 {
                    let kv = _mm512_loadu_ps(k.add((j + t) * rs + 16 * c));
                    for g in 0..G {
                        acc[g][t] = _mm512_fmadd_ps(qr[g][c], kv, acc[g][t]);
                    }
                }
            }
            for g in 0..G {
                let s = _mm_mul_ps(reduce4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]), sc);
                _mm_storeu_ps(p.as_mut_ptr().add(g * len + j), s);
            }
            j += 4;
        }
        while j < len {
            let mut acc = [_mm512_setzero_ps(); G];
            for c in 0..D {
                let kv = _mm512_loadu_ps(k.add(j * rs + 16 * c));
                for g in 0..G {
                    acc[g] = _mm512_fmadd_ps(qr[g][c], kv, acc[g]);
                }
            }
            for g in 0..G {
                p[g * len + j] = _mm512_reduce_add_ps(acc[g]) * scale;
            }
            j += 1;
        }
        for g in 0..G {
            super::softmax(&mut p[g * len..(g + 1) * len]);
        }
        let mut o = [[_mm512_setzero_ps(); D]; G];
        for j in 0..len {
            let mut vr = [_mm512_setzero_ps(); D];
            for c in 0..D {
                vr[c] = _mm512_loadu_ps(v.add(j * rs + 16 * c));
            }
            for g in 0..G {
                let pj = _mm512_set1_ps(p[g * len + j]);
                for c in 0..D {
                    o[g][c] = _mm512_fmadd_ps(pj, vr[c], o[g][c]);
                }
            }
        }
        for g in 0..G {
            for c in 0..D {
                _mm512_storeu_ps(out.add(g * d + 16 * c), o[g][c]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        #[cfg_attr(not(cppo_isa_avx512), ignore = "needs AVX-512 F/VL/BW, which this CPU lacks or CPPO_MAX_ISA caps (ops::isa)")]
        fn matches_a_plain_softmax_attention(
            nq in 1usize..8,
            wide in any::<bool>(),
            len in 1usize..40,
            pad in 0usize..20,
            seed in 0u32..1000,
        ) {
            let d = if wide { 128 } else { 64 };
            let rs = d + pad;
            let val = |i: usize, s: u32| ((i as u32).wrapping_mul(2654435761) ^ s.wrapping_mul(97)) % 1999;
            let q: Vec<f32> = (0..nq * d).map(|i| val(i, seed) as f32 / 500.0 - 2.0).collect();
            let k: Vec<f32> = (0..len * rs).map(|i| val(i, seed + 1) as f32 / 500.0 - 2.0).collect();
            let v: Vec<f32> = (0..len * rs).map(|i| val(i, seed + 2) as f32 / 1000.0 - 1.0).collect();
            let scale = 1.0 / (d as f32).sqrt();
            let mut out = vec![f32::NAN; nq * d];
            let mut p = Vec::new();
            // SAFETY: q holds nq x d, k and v len rows of rs >= d, out its own nq x d Vec.
            let ran = unsafe { attend(nq, d, q.as_ptr(), k.as_ptr(), v.as_ptr(), rs, len, scale, out.as_mut_ptr(), &mut p) };
            prop_assert!(ran);
            for i in 0..nq {
                let s: Vec<f64> = (0..len)
                    .map(|j| (0..d).map(|c| q[i * d + c] as f64 * k[j * rs + c] as f64).sum::<f64>() * scale as f64)
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for c in 0..d {
                    let want: f64 = (0..len).map(|j| e[j] / z * v[j * rs + c] as f64).sum();
                    let got = out[i * d + c] as f64;
                    prop_assert!((got - want).abs() < 1e-5, "query {i} dim {c}: {got} vs {want}");
                }
            }
        }
    }
}
