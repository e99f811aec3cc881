//! The attention's product plan (run here by a CPU model of cuBLASLt) and the softmax kernels
//! together, over packed spans (shared prefixes, several questions, an empty prompt), against
//! cppo-model's attention semantics written out directly: the score layout, the products' offsets,
//! strides and accumulation, the masks and the backward formula.

use std::collections::HashMap;

use cppo_cuda::gemm::Batch;
use cppo_cuda::ops::attention::{softmax_backward, softmax_forward, DeviceTable, ScoreTable, SpanShape};
use cppo_cuda::ops::attention_plan::{self, Heads, Product, Role, Span as PlanSpan};
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

/// The products as cuBLASLt computes them (row-major semantics of `Gemm`), in f64, on host buffers.
fn run(products: &[Product], bufs: &mut HashMap<Role, Vec<f32>>) {
    for p in products {
        let g = &p.gemm;
        let a = bufs[&p.a.0].clone();
        let b = bufs[&p.b.0].clone();
        let d = bufs.get_mut(&p.d.0).expect("an output buffer");
        let batch = g.batch.unwrap_or(Batch { count: 1, stride_a: 0, stride_b: 0, stride_d: 0 });
        for bi in 0..batch.count {
            let (ao, bo, dof) = (p.a.1 + bi * batch.stride_a, p.b.1 + bi * batch.stride_b, p.d.1 + bi * batch.stride_d);
            for i in 0..g.m {
                for j in 0..g.n {
                    let s: f64 = (0..g.k)
                        .map(|l| {
                            let av = if g.a.trans { a[ao + l * g.a.ld + i] } else { a[ao + i * g.a.ld + l] };
                            let bv = if g.b.trans { b[bo + j * g.b.ld + l] } else { b[bo + l * g.b.ld + j] };
                            av as f64 * bv as f64
                        })
                        .sum();
                    // As cuBLAS: with beta = 0 the old output is not read (it may be NaN).
                    let o = &mut d[dof + i * g.ld_d + j];
                    let old = if g.beta == 0.0 { 0.0 } else { g.beta as f64 * *o as f64 };
                    *o = (g.alpha as f64 * s + old) as f32;
                }
            }
        }
    }
}

fn upload_table(emu: &mut Emu, t: &ScoreTable) -> DeviceTable {
    DeviceTable { off: emu.upload(&t.off), pair_start: emu.upload(&t.pair_start), len: emu.upload(&t.len), prefix_len: emu.upload(&t.prefix_len) }
}

#[test]
fn the_product_plan_and_softmax_kernels_make_the_cpu_attention_forward_and_backward() {
    let mut r = rng("attention");
    let (spans, rows) = shared_prefixes(&[(5, &[4, 1, 3]), (3, &[6]), (0, &[2])]);
    let m = Dims { heads: 4, kvh: 2, d: 8 };
    let heads = Heads { heads: m.heads, kv_heads: m.kvh, d: m.d };
    let scale = 1.0 / (m.d as f32).sqrt();
    let q = uniform(&mut r, rows * m.heads * m.d, -1.5, 1.5);
    let k = uniform(&mut r, rows * m.kvh * m.d, -1.5, 1.5);
    let v = uniform(&mut r, rows * m.kvh * m.d, -1.0, 1.0);
    let dout = uniform(&mut r, rows * m.heads * m.d, -1.0, 1.0);
    let (w_out, w_dq, w_dk, w_dv) = reference(&spans, rows, &m, &q, &k, &v, &dout);
    let plan_spans: Vec<PlanSpan> = spans.iter().map(|s| PlanSpan { start: s.start, len: s.len, prefix: s.prefix }).collect();
    let table = ScoreTable::new(m.heads, &plan_spans.iter().map(|s| s.shape()).collect::<Vec<_>>()).unwrap();
    let (fwd_before, fwd_after) = attention_plan::forward(&table, &plan_spans, heads);
    let (bwd_before, bwd_after) = attention_plan::backward(&table, &plan_spans, heads, scale);
    for t in tunes() {
        for pd in [F32, Bf16] {
            // bf16 probabilities round every term of the sums below by up to 2^-9 (values ~1).
            let tol = if pd == Bf16 { 1e-2 } else { 2e-5 };
            let nan = |n: usize| vec![f32::NAN; n];
            let mut bufs: HashMap<Role, Vec<f32>> = HashMap::from([
                (Role::Q, q.clone()),
                (Role::K, k.clone()),
                (Role::V, v.clone()),
                (Role::DOut, dout.clone()),
                (Role::Out, nan(q.len())),
                (Role::Scores, nan(table.elements)),
                (Role::DProbs, nan(table.elements)),
                (Role::DQ, nan(q.len())),
                (Role::DK, vec![0.0; k.len()]),
                (Role::DV, vec![0.0; v.len()]),
            ]);
            let mut emu = Emu::new();
            let dev = upload_table(&mut emu, &table);
            run(&fwd_before, &mut bufs);
            let s = emu.upload(&bufs[&Role::Scores]);
            let p = emu.alloc(pd, table.elements);
            softmax_forward(&mut emu, &t, &table, &dev, s, p, scale).unwrap();
            bufs.insert(Role::Probs, read_f32(&emu, p));
            run(&fwd_after, &mut bufs);
            let what = format!("{pd:?} {t:?}");
            assert_close(&format!("out {what}"), &bufs[&Role::Out], &w_out, 0.0, tol);
            bufs.insert(Role::Scores, nan(table.elements));
            run(&bwd_before, &mut bufs);
            let (s, dp) = (emu.upload(&bufs[&Role::Scores]), emu.upload(&bufs[&Role::DProbs]));
            let (ds, p2) = (emu.alloc(pd, table.elements), emu.alloc(pd, table.elements));
            softmax_backward(&mut emu, &t, &table, &dev, s, dp, ds, Some(p2), scale).unwrap();
            let p2v = read_f32(&emu, p2);
            assert_eq!(p2v, bufs[&Role::Probs], "the backward's recomputed p is the forward's");
            bufs.insert(Role::DScores, read_f32(&emu, ds));
            bufs.insert(Role::Probs, p2v);
            run(&bwd_after, &mut bufs);
            assert_close(&format!("dq {what}"), &bufs[&Role::DQ], &w_dq, 0.0, tol);
            assert_close(&format!("dk {what}"), &bufs[&Role::DK], &w_dk, 0.0, tol);
            assert_close(&format!("dv {what}"), &bufs[&Role::DV], &w_dv, 0.0, tol);
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
