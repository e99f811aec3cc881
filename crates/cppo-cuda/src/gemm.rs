//! Row-major products as cuBLASLt's column-major calls. cuBLASLt sees a row-major matrix as its
//! transpose, so `D = op(A) op(B)` (row-major) is issued as `D^T = op(B)^T op(A)^T`: the operands swap
//! and every layout is described by its stored shape. The translation is plain data, checked here
//! against a column-major reference of cuBLASLt's semantics; `cuda::blas` issues it.

/// One operand as stored: row-major, `ld` elements between rows. `trans`: the product uses its
/// transpose (a weight `W (out x in)` in `x W^T`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    pub trans: bool,
    pub ld: usize,
}

/// Strided batches: `count` products, operands and output `stride_*` elements apart (0 repeats an
/// operand, as the grouped-query heads repeat a key head).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    pub count: usize,
    pub stride_a: usize,
    pub stride_b: usize,
    pub stride_d: usize,
}

/// `D (m x n, rows ld_d apart) = alpha op(A) (m x k) op(B) (k x n) + beta D`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: Operand,
    pub b: Operand,
    pub ld_d: usize,
    pub alpha: f32,
    /// 0 overwrites D; 1 accumulates into it (a gradient summed over micro-batches or branches).
    pub beta: f32,
    pub batch: Option<Batch>,
}

/// A column-major matrix layout as cuBLASLt takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub rows: u64,
    pub cols: u64,
    pub ld: i64,
    pub batch_stride: i64,
}

/// The column-major call: `D' = alpha op(X) op(Y) + beta D'` with X the first operand's memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LtCall {
    /// Whether the first operand is the row-major `B` (always: the operands swap).
    pub trans_x: bool,
    pub trans_y: bool,
    pub x: Layout,
    pub y: Layout,
    pub d: Layout,
    pub batch_count: i32,
    pub alpha: f32,
    pub beta: f32,
}

impl Gemm {
    /// Checks that every operand's rows fit its leading dimension.
    pub fn validate(&self) -> Result<(), String> {
        let ac = if self.a.trans { self.m } else { self.k };
        let bc = if self.b.trans { self.k } else { self.n };
        if self.a.ld < ac || self.b.ld < bc || self.ld_d < self.n {
            return Err(format!("leading dimensions too small for {self:?}"));
        }
        if self.m == 0 || self.n == 0 || self.k == 0 {
            return Err(format!("empty product {self:?}"));
        }
        Ok(())
    }

    /// Elements each operand spans (the last batch included), for bounds checks of the buffers.
    pub fn extents(&self) -> (usize, usize, usize) {
        let (ar, ac) = if self.a.trans { (self.k, self.m) } else { (self.m, self.k) };
        let (br, bc) = if self.b.trans { (self.n, self.k) } else { (self.k, self.n) };
        let span = |rows: usize, cols: usize, ld: usize| (rows - 1) * ld + cols;
        let (mut ea, mut eb, mut ed) = (span(ar, ac, self.a.ld), span(br, bc, self.b.ld), span(self.m, self.n, self.ld_d));
        if let Some(b) = self.batch {
            let last = b.count.saturating_sub(1);
            ea += last * b.stride_a;
            eb += last * b.stride_b;
            ed += last * b.stride_d;
        }
        (ea, eb, ed)
    }

    pub fn lt_call(&self) -> LtCall {
        let bs = self.batch.unwrap_or(Batch { count: 1, stride_a: 0, stride_b: 0, stride_d: 0 });
        // Stored B (k x n row-major) is, column-major, n x k: op N gives op(B)^T. Stored B^T
        // (n x k row-major) is k x n column-major, transposed by the call.
        let x = if self.b.trans {
            Layout { rows: self.k as u64, cols: self.n as u64, ld: self.b.ld as i64, batch_stride: bs.stride_b as i64 }
        } else {
            Layout { rows: self.n as u64, cols: self.k as u64, ld: self.b.ld as i64, batch_stride: bs.stride_b as i64 }
        };
        let y = if self.a.trans {
            Layout { rows: self.m as u64, cols: self.k as u64, ld: self.a.ld as i64, batch_stride: bs.stride_a as i64 }
        } else {
            Layout { rows: self.k as u64, cols: self.m as u64, ld: self.a.ld as i64, batch_stride: bs.stride_a as i64 }
        };
        let d = Layout { rows: self.n as u64, cols: self.m as u64, ld: self.ld_d as i64, batch_stride: bs.stride_d as i64 };
        LtCall { trans_x: self.b.trans, trans_y: self.a.trans, x, y, d, batch_count: bs.count as i32, alpha: self.alpha, beta: self.beta }
    }
}

/// The product `g` describes, on host memory, as cuBLASLt computes it with f32 compute: operands as
/// stored (bf16 ones already widened exactly), each dot product summed in f32, `beta = 0` never
/// reading the old output (it may be poison). The emulated device's stand-in for cuBLASLt.
pub fn host_matmul(g: &Gemm, a: &[f32], b: &[f32], d: &mut [f32]) -> Result<(), String> {
    g.validate()?;
    let (ea, eb, ed) = g.extents();
    if a.len() < ea || b.len() < eb || d.len() < ed {
        return Err(format!("operands of {} / {} / {} elements for {g:?}", a.len(), b.len(), d.len()));
    }
    let bs = g.batch.unwrap_or(Batch { count: 1, stride_a: 0, stride_b: 0, stride_d: 0 });
    for bi in 0..bs.count {
        let (ao, bo, dof) = (bi * bs.stride_a, bi * bs.stride_b, bi * bs.stride_d);
        for i in 0..g.m {
            for j in 0..g.n {
                let mut s = 0f32;
                for l in 0..g.k {
                    let av = if g.a.trans { a[ao + l * g.a.ld + i] } else { a[ao + i * g.a.ld + l] };
                    let bv = if g.b.trans { b[bo + j * g.b.ld + l] } else { b[bo + l * g.b.ld + j] };
                    s += av * bv;
                }
                let o = &mut d[dof + i * g.ld_d + j];
                *o = if g.beta == 0.0 { g.alpha * s } else { g.alpha * s + g.beta * *o };
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cuBLASLt's definition, column-major: D[i, j] = alpha sum_l op(X)[i, l] op(Y)[l, j] + beta D[i, j].
    fn run_lt(c: &LtCall, x: &[f64], y: &[f64], d: &mut [f64]) {
        let at = |l: &Layout, t: bool, m: &[f64], b: usize, i: usize, j: usize| {
            let (r, cc) = if t { (j, i) } else { (i, j) };
            assert!(r < l.rows as usize && cc < l.cols as usize);
            m[b * l.batch_stride as usize + r + cc * l.ld as usize]
        };
        let k = if c.trans_x { c.x.rows } else { c.x.cols } as usize;
        for b in 0..c.batch_count as usize {
            for i in 0..c.d.rows as usize {
                for j in 0..c.d.cols as usize {
                    let s: f64 = (0..k).map(|l| at(&c.x, c.trans_x, x, b, i, l) * at(&c.y, c.trans_y, y, b, l, j)).sum();
                    let o = b * c.d.batch_stride as usize + i + j * c.d.ld as usize;
                    // With beta = 0 the old output is not read (it may be NaN).
                    let old = if c.beta == 0.0 { 0.0 } else { c.beta as f64 * d[o] };
                    d[o] = c.alpha as f64 * s + old;
                }
            }
        }
    }

    fn vals(n: usize, seed: usize) -> Vec<f64> {
        (0..n).map(|i| ((i * 7919 + seed * 104729) % 23) as f64 - 11.0).collect()
    }

    #[test]
    fn every_transpose_and_batch_matches_the_row_major_product() {
        let (m, n, k) = (5, 7, 3);
        for ta in [false, true] {
            for tb in [false, true] {
                for batch in [None, Some((3, true)), Some((2, false))] {
                    let (ar, ac) = if ta { (k, m) } else { (m, k) };
                    let (br, bc) = if tb { (n, k) } else { (k, n) };
                    let (lda, ldb, ldd) = (ac + 2, bc + 1, n + 3);
                    let (count, shared_b) = batch.unwrap_or((1, false));
                    let (sa, sb, sd) = (ar * lda + 1, if shared_b { 0 } else { br * ldb }, m * ldd);
                    let g = Gemm {
                        m,
                        n,
                        k,
                        a: Operand { trans: ta, ld: lda },
                        b: Operand { trans: tb, ld: ldb },
                        ld_d: ldd,
                        alpha: 0.5,
                        beta: 1.0,
                        batch: batch.map(|_| Batch { count, stride_a: sa, stride_b: sb, stride_d: sd }),
                    };
                    g.validate().unwrap();
                    let (ea, eb, ed) = g.extents();
                    let (a, b, d0) = (vals(ea, 1), vals(eb, 2), vals(ed, 3));
                    let mut want = d0.clone();
                    for bi in 0..count {
                        for i in 0..m {
                            for j in 0..n {
                                let s: f64 = (0..k)
                                    .map(|l| {
                                        let av = if ta { a[bi * sa + l * lda + i] } else { a[bi * sa + i * lda + l] };
                                        let bv = if tb { b[bi * sb + j * ldb + l] } else { b[bi * sb + l * ldb + j] };
                                        av * bv
                                    })
                                    .sum();
                                want[bi * sd + i * ldd + j] = 0.5 * s + d0[bi * sd + i * ldd + j];
                            }
                        }
                    }
                    let mut got = d0.clone();
                    run_lt(&g.lt_call(), &b, &a, &mut got);
                    assert_eq!(got, want, "trans a {ta} b {tb} batch {batch:?}");
                }
            }
        }
    }

    #[test]
    fn the_host_product_matches_the_column_major_reference_and_ignores_old_output_when_beta_is_zero() {
        let (m, n, k) = (3, 5, 4);
        let g = Gemm { m, n, k, a: Operand { trans: true, ld: m + 1 }, b: Operand { trans: false, ld: n }, ld_d: n, alpha: 2.0, beta: 0.0, batch: None };
        let (ea, eb, ed) = g.extents();
        let (a, b) = (vals(ea, 4), vals(eb, 5));
        let mut want = vec![0.0; ed];
        run_lt(&g.lt_call(), &b, &a, &mut want);
        let mut got = vec![f32::NAN; ed];
        let (af, bf): (Vec<f32>, Vec<f32>) = (a.iter().map(|&x| x as f32).collect(), b.iter().map(|&x| x as f32).collect());
        host_matmul(&g, &af, &bf, &mut got).unwrap();
        assert_eq!(got.iter().map(|&x| x as f64).collect::<Vec<_>>(), want);
        let acc = Gemm { beta: 1.0, ..g };
        host_matmul(&acc, &af, &bf, &mut got).unwrap();
        assert_eq!(got.iter().map(|&x| x as f64).collect::<Vec<_>>(), want.iter().map(|x| 2.0 * x).collect::<Vec<_>>());
        assert!(host_matmul(&g, &af[..ea - 1], &bf, &mut got).is_err());
    }

    #[test]
    fn short_leading_dimensions_are_refused() {
        let g = Gemm { m: 2, n: 3, k: 4, a: Operand { trans: false, ld: 3 }, b: Operand { trans: true, ld: 4 }, ld_d: 3, alpha: 1.0, beta: 0.0, batch: None };
        assert!(g.validate().is_err());
    }
}
