//! The products of an attention over packed spans, as a list the backend issues through cuBLASLt
//! between the softmax kernels: per span, per kv head, per key segment (the shared prefix, the span's
//! own rows), batched over the query heads that share the kv head (the key operand repeated with
//! stride 0). Offsets are elements into buffers named by role. Forward: scores, softmax, output;
//! backward: dP, softmax backward, then dQ, dK, dV (dK and dV one query head at a time, because the
//! heads of a group add into the same rows and batched outputs must not overlap).

use super::attention::{ScoreTable, SpanShape};
use crate::gemm::{Batch, Gemm, Operand};

/// q rows of `heads * d`, k and v rows of `kv_heads * d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heads {
    pub heads: usize,
    pub kv_heads: usize,
    pub d: usize,
}

/// A span of an `AttnLayout`: rows `start .. start + len`, seeing `prefix = (start, len)` in full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub len: usize,
    pub prefix: Option<(usize, usize)>,
}

impl Span {
    pub fn shape(&self) -> SpanShape {
        SpanShape { len: self.len, prefix_len: self.prefix.map_or(0, |p| p.1) }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Q,
    K,
    V,
    Out,
    /// f32 scores `q k^T` (the score table's layout), and the same layout's p, dp, ds.
    Scores,
    Probs,
    DOut,
    DProbs,
    DScores,
    DQ,
    DK,
    DV,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Product {
    pub gemm: Gemm,
    pub a: (Role, usize),
    pub b: (Role, usize),
    pub d: (Role, usize),
}

/// The key segments of a span: (first key row, rows, first score column).
fn segments(s: &Span) -> Vec<(usize, usize, usize)> {
    let mut v = Vec::with_capacity(2);
    let pl = match s.prefix {
        Some((ps, pl)) if pl > 0 => {
            v.push((ps, pl, 0));
            pl
        }
        _ => 0,
    };
    v.push((s.start, s.len, pl));
    v
}

struct Ctx<'a> {
    table: &'a ScoreTable,
    h: Heads,
}

#[allow(clippy::too_many_arguments)]
impl Ctx<'_> {
    fn group(&self) -> usize {
        self.h.heads / self.h.kv_heads
    }
    fn qw(&self) -> usize {
        self.h.heads * self.h.d
    }
    fn kw(&self) -> usize {
        self.h.kv_heads * self.h.d
    }

    /// `S[head] (len x seg) (+)= A[rows of the span, head] B[segment rows, kv head]^T` for the heads
    /// of kv head `kh`: scores from q and k, or dp from dout and v.
    fn scores(&self, sp: usize, s: &Span, kh: usize, a: Role, b: Role, d: Role, out: &mut Vec<Product>) {
        let g = self.group();
        let (first, len, cols) = self.table.block(sp, kh * g);
        for (row0, rows, col0) in segments(s) {
            out.push(Product {
                gemm: Gemm {
                    m: len,
                    n: rows,
                    k: self.h.d,
                    a: Operand { trans: false, ld: self.qw() },
                    b: Operand { trans: true, ld: self.kw() },
                    ld_d: cols,
                    alpha: 1.0,
                    beta: 0.0,
                    batch: Some(Batch { count: g, stride_a: self.h.d, stride_b: 0, stride_d: len * cols }),
                },
                a: (a, s.start * self.qw() + kh * g * self.h.d),
                b: (b, row0 * self.kw() + kh * self.h.d),
                d: (d, first + col0),
            });
        }
    }

    /// `D[rows of the span, head] = alpha sum over segments P[head] (len x seg) B[segment, kv head]`:
    /// the output from p and v, or dq from ds and k.
    fn rows(&self, sp: usize, s: &Span, kh: usize, p: Role, b: Role, d: Role, alpha: f32, out: &mut Vec<Product>) {
        let g = self.group();
        let (first, len, cols) = self.table.block(sp, kh * g);
        for (i, (row0, rows, col0)) in segments(s).into_iter().enumerate() {
            out.push(Product {
                gemm: Gemm {
                    m: len,
                    n: self.h.d,
                    k: rows,
                    a: Operand { trans: false, ld: cols },
                    b: Operand { trans: false, ld: self.kw() },
                    ld_d: self.qw(),
                    alpha,
                    beta: if i == 0 { 0.0 } else { 1.0 },
                    batch: Some(Batch { count: g, stride_a: len * cols, stride_b: 0, stride_d: self.h.d }),
                },
                a: (p, first + col0),
                b: (b, row0 * self.kw() + kh * self.h.d),
                d: (d, s.start * self.qw() + kh * g * self.h.d),
            });
        }
    }

    /// `D[segment rows, kv head] += alpha P[head]^T (seg x len) B[rows of the span, head]`, one query
    /// head at a time: dk from ds and q, dv from p and dout. Adds (beta 1): the buffer starts zeroed.
    fn keys(&self, sp: usize, s: &Span, kh: usize, p: Role, b: Role, d: Role, alpha: f32, out: &mut Vec<Product>) {
        let g = self.group();
        for head in kh * g..(kh + 1) * g {
            let (first, len, cols) = self.table.block(sp, head);
            for (row0, rows, col0) in segments(s) {
                out.push(Product {
                    gemm: Gemm {
                        m: rows,
                        n: self.h.d,
                        k: len,
                        a: Operand { trans: true, ld: cols },
                        b: Operand { trans: false, ld: self.qw() },
                        ld_d: self.kw(),
                        alpha,
                        beta: 1.0,
                        batch: None,
                    },
                    a: (p, first + col0),
                    b: (b, s.start * self.qw() + head * self.h.d),
                    d: (d, row0 * self.kw() + kh * self.h.d),
                });
            }
        }
    }
}

fn each(table: &ScoreTable, spans: &[Span], h: Heads, mut f: impl FnMut(&Ctx, usize, &Span, usize)) {
    let c = Ctx { table, h };
    for (sp, s) in spans.iter().enumerate() {
        if s.len == 0 {
            continue;
        }
        for kh in 0..h.kv_heads {
            f(&c, sp, s, kh);
        }
    }
}

/// The products before the softmax (scores) and after it (the output), for spans laid out by `table`
/// (built from these spans' shapes).
pub fn forward(table: &ScoreTable, spans: &[Span], h: Heads) -> (Vec<Product>, Vec<Product>) {
    let (mut before, mut after) = (Vec::new(), Vec::new());
    each(table, spans, h, |c, sp, s, kh| {
        c.scores(sp, s, kh, Role::Q, Role::K, Role::Scores, &mut before);
        c.rows(sp, s, kh, Role::Probs, Role::V, Role::Out, 1.0, &mut after);
    });
    (before, after)
}

/// The products of the backward pass: before the softmax backward (the scores again, and dp), and
/// after it (dq, then dk and dv into zeroed buffers). `scale` is the attention's 1 / sqrt(d).
pub fn backward(table: &ScoreTable, spans: &[Span], h: Heads, scale: f32) -> (Vec<Product>, Vec<Product>) {
    let (mut before, mut after) = (Vec::new(), Vec::new());
    each(table, spans, h, |c, sp, s, kh| {
        c.scores(sp, s, kh, Role::Q, Role::K, Role::Scores, &mut before);
        c.scores(sp, s, kh, Role::DOut, Role::V, Role::DProbs, &mut before);
        c.rows(sp, s, kh, Role::DScores, Role::K, Role::DQ, scale, &mut after);
        c.keys(sp, s, kh, Role::DScores, Role::Q, Role::DK, scale, &mut after);
        c.keys(sp, s, kh, Role::Probs, Role::DOut, Role::DV, 1.0, &mut after);
    });
    (before, after)
}
