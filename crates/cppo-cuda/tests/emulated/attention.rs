//! The softmax kernels composed with stand-in products into a whole attention over packed spans
//! (shared prefixes, several questions, an empty prompt), against cppo-model's attention semantics
//! written out directly: the score table's layout, the masks and the backward formula together.

use cppo_cuda::ops::attention::{softmax_backward, softmax_forward, DeviceTable, ScoreTable, SpanShape};
use cppo_cuda::DType::{self, Bf16, F32};

use crate::check::{assert_close, read_f32, rng, tunes, uniform};
use crate::emu::Emu;

#[derive(Clone, Copy)]
struct Span {
    start: usize,
    len: usize,
    prefix: Option<(usize, usize)>,
}

/// `AttnLayout::shared_prefixes`: each group a prompt span, then completions that see it.
fn shared_prefixes(groups: &[(usize, &[usize])]) -> (Vec<Span>, usize) {
    let mut spans = Vec::new();
    let mut rows = 0;
    for &(pl, lens) in groups {
        let p0 = rows;
        spans.push(Span { start: p0, len: pl, prefix: None });
        rows += pl;
        for &len in lens {
            spans.push(Span { start: rows, len, prefix: Some((p0, pl)) });
            rows += len;
        }
    }
    (spans, rows)
}

struct Dims {
    heads: usize,
    kvh: usize,
    d: usize,
}

impl Dims {
    fn q(&self, row: usize, h: usize) -> usize {
        (row * self.heads + h) * self.d
    }
    fn k(&self, row: usize, kh: usize) -> usize {
        (row * self.kvh + kh) * self.d
    }
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum()
}

/// The rows a span's query `i` sees: the whole prefix, then its own rows up to itself.
fn visible(s: &Span, i: usize) -> Vec<usize> {
    let mut v: Vec<usize> = s.prefix.map(|(ps, pl)| (ps..ps + pl).collect()).unwrap_or_default();
    v.extend(s.start..s.start + i + 1);
    v
}

/// (out, dq, dk, dv) by cppo-model's attention semantics, in f64.
#[allow(clippy::type_complexity)]
fn reference(spans: &[Span], rows: usize, m: &Dims, q: &[f32], k: &[f32], v: &[f32], dout: &[f32]) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let scale = 1.0 / (m.d as f64).sqrt();
    let (mut out, mut dq) = (vec![0.0; rows * m.heads * m.d], vec![0.0; rows * m.heads * m.d]);
    let (mut dk, mut dv) = (vec![0.0; rows * m.kvh * m.d], vec![0.0; rows * m.kvh * m.d]);
    for s in spans {
        for h in 0..m.heads {
            let kh = h / (m.heads / m.kvh);
            for i in 0..s.len {
                let qi = &q[m.q(s.start + i, h)..][..m.d];
                let keys = visible(s, i);
                let sc: Vec<f64> = keys.iter().map(|&j| dot(qi, &k[m.k(j, kh)..][..m.d]) * scale).collect();
                let mx = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = sc.iter().map(|x| (x - mx).exp()).collect();
                let z: f64 = e.iter().sum();
                let p: Vec<f64> = e.iter().map(|x| x / z).collect();
                let go = &dout[m.q(s.start + i, h)..][..m.d];
                let dp: Vec<f64> = keys.iter().map(|&j| dot(go, &v[m.k(j, kh)..][..m.d])).collect();
                let pdp: f64 = p.iter().zip(&dp).map(|(a, b)| a * b).sum();
                for (n, &j) in keys.iter().enumerate() {
                    let ds = p[n] * (dp[n] - pdp);
                    for c in 0..m.d {
                        out[m.q(s.start + i, h) + c] += p[n] * v[m.k(j, kh) + c] as f64;
                        dq[m.q(s.start + i, h) + c] += scale * ds * k[m.k(j, kh) + c] as f64;
                        dk[m.k(j, kh) + c] += scale * ds * qi[c] as f64;
                        dv[m.k(j, kh) + c] += p[n] * go[c] as f64;
                    }
                }
            }
        }
    }
    (out, dq, dk, dv)
}

fn shapes(spans: &[Span]) -> Vec<SpanShape> {
    spans.iter().map(|s| SpanShape { len: s.len, prefix_len: s.prefix.map_or(0, |p| p.1) }).collect()
}

/// The cache row behind score column `c` of span `s`.
fn key_row(s: &Span, c: usize) -> usize {
    let pl = s.prefix.map_or(0, |p| p.1);
    if c < pl {
        s.prefix.expect("prefix columns need a prefix").0 + c
    } else {
        s.start + c - pl
    }
}

/// What the products compute: for every span and head, `a[row i] . b[key row c]` into the score layout.
fn products(table: &ScoreTable, spans: &[Span], m: &Dims, a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut s = vec![0f32; table.elements];
    for (sp, span) in spans.iter().enumerate() {
        for h in 0..m.heads {
            let kh = h / (m.heads / m.kvh);
            let (first, n, cols) = table.block(sp, h);
            for i in 0..n {
                for c in 0..cols {
                    s[first + i * cols + c] = dot(&a[m.q(span.start + i, h)..][..m.d], &b[m.k(key_row(span, c), kh)..][..m.d]) as f32;
                }
            }
        }
    }
    s
}

fn upload_table(emu: &mut Emu, t: &ScoreTable) -> DeviceTable {
    DeviceTable { off: emu.upload(&t.off), pair_start: emu.upload(&t.pair_start), len: emu.upload(&t.len), prefix_len: emu.upload(&t.prefix_len) }
}

#[test]
fn softmax_pieces_compose_into_the_cpu_attention_forward_and_backward() {
    let mut r = rng("attention");
    let (spans, rows) = shared_prefixes(&[(5, &[4, 1, 3]), (3, &[6]), (0, &[2])]);
    let m = Dims { heads: 4, kvh: 2, d: 8 };
    let scale = 1.0 / (m.d as f32).sqrt();
    let q = uniform(&mut r, rows * m.heads * m.d, -1.5, 1.5);
    let k = uniform(&mut r, rows * m.kvh * m.d, -1.5, 1.5);
    let v = uniform(&mut r, rows * m.kvh * m.d, -1.0, 1.0);
    let dout = uniform(&mut r, rows * m.heads * m.d, -1.0, 1.0);
    let (w_out, w_dq, w_dk, w_dv) = reference(&spans, rows, &m, &q, &k, &v, &dout);
    let table = ScoreTable::new(m.heads, &shapes(&spans)).unwrap();
    let s0 = products(&table, &spans, &m, &q, &k);
    let dp0 = products(&table, &spans, &m, &dout, &v);
    for t in tunes() {
        for pd in [F32, Bf16] {
            // bf16 probabilities round every term of the sums below by up to 2^-9 (values ~1).
            let tol = if pd == Bf16 { 1e-2 } else { 2e-5 };
            let mut emu = Emu::new();
            let dev = upload_table(&mut emu, &table);
            let s = emu.upload(&s0);
            let p = emu.alloc(pd, table.elements);
            softmax_forward(&mut emu, &t, &table, &dev, s, p, scale).unwrap();
            let pv = read_f32(&emu, p);
            let mut out = vec![0f32; w_out.len()];
            let (mut dq, mut dk, mut dv) = (vec![0f32; w_dq.len()], vec![0f32; w_dk.len()], vec![0f32; w_dv.len()]);
            let dpb = emu.upload(&dp0);
            let ds = emu.alloc(pd, table.elements);
            let p2 = emu.alloc(pd, table.elements);
            softmax_backward(&mut emu, &t, &table, &dev, s, dpb, ds, Some(p2), scale).unwrap();
            let (dsv, p2v) = (read_f32(&emu, ds), read_f32(&emu, p2));
            assert_eq!(pv, p2v, "the backward's recomputed p is the forward's");
            // The remaining products, over every column: masked ones must be exact zeros to vanish.
            for (sp, span) in spans.iter().enumerate() {
                for h in 0..m.heads {
                    let kh = h / (m.heads / m.kvh);
                    let (first, n, cols) = table.block(sp, h);
                    for i in 0..n {
                        let row = span.start + i;
                        for c in 0..cols {
                            let (pc, dsc, kr) = (pv[first + i * cols + c], dsv[first + i * cols + c], key_row(span, c));
                            for e in 0..m.d {
                                out[m.q(row, h) + e] += pc * v[m.k(kr, kh) + e];
                                dq[m.q(row, h) + e] += scale * dsc * k[m.k(kr, kh) + e];
                                dk[m.k(kr, kh) + e] += scale * dsc * q[m.q(row, h) + e];
                                dv[m.k(kr, kh) + e] += pc * dout[m.q(row, h) + e];
                            }
                        }
                    }
                }
            }
            let what = format!("{pd:?} {t:?}");
            assert_close(&format!("out {what}"), &out, &w_out, 0.0, tol);
            assert_close(&format!("dq {what}"), &dq, &w_dq, 0.0, tol);
            assert_close(&format!("dk {what}"), &dk, &w_dk, 0.0, tol);
            assert_close(&format!("dv {what}"), &dv, &w_dv, 0.0, tol);
        }
    }
}

#[test]
fn masked_scores_are_exact_zeros_and_rows_sum_to_one() {
    let mut r = rng("attention_mask");
    let spans = [SpanShape { len: 7, prefix_len: 0 }, SpanShape { len: 5, prefix_len: 7 }];
    let table = ScoreTable::new(3, &spans).unwrap();
    // Scores far apart (up to 60): a mask that leaks shows as a big error.
    let s0 = uniform(&mut r, table.elements, -60.0, 60.0);
    let mut emu = Emu::new();
    let dev = upload_table(&mut emu, &table);
    let s = emu.upload(&s0);
    let p = emu.alloc(DType::F32, table.elements);
    softmax_forward(&mut emu, &tunes()[1], &table, &dev, s, p, 0.5).unwrap();
    let pv = emu.read::<f32>(p);
    for (sp, shape) in spans.iter().enumerate() {
        for h in 0..3 {
            let (first, n, cols) = table.block(sp, h);
            for i in 0..n {
                let row = &pv[first + i * cols..][..cols];
                let vis = shape.prefix_len + i + 1;
                assert!(row[vis..].iter().all(|&x| x == 0.0), "span {sp} head {h} row {i}: {:?}", &row[vis..]);
                let sum: f64 = row.iter().map(|&x| x as f64).sum();
                assert!((sum - 1.0).abs() < 1e-5, "row sums to {sum}");
                let want: Vec<f64> = {
                    let z: Vec<f64> = s0[first + i * cols..][..vis].iter().map(|&x| x as f64 * 0.5).collect();
                    let mx = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let tot: f64 = z.iter().map(|x| (x - mx).exp()).sum();
                    z.iter().map(|x| (x - mx).exp() / tot).collect()
                };
                assert_close("probabilities", &row[..vis], &want, 1e-5, 1e-7);
            }
        }
    }
}
