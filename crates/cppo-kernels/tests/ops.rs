//! Every backend operation against a direct computation (forward) and against central finite
//! differences in f64 (backward, over every input coordinate), on both backends; then the CPU backend
//! against the reference backend on fresh random inputs in f32, the precision training runs in.

use std::sync::Arc;

use cppo_kernels::attention::{Attention, AttnLayout};
use cppo_kernels::backend::{AdamWStep, Backend, CacheLayout, CachedQuery, Product};
use cppo_kernels::cpu::Cpu;
use cppo_kernels::logprob::Gather;
use cppo_kernels::reference::Reference;
use cppo_kernels::rope::RopeTable;
use cppo_kernels::Precision;

/// A backend over host memory computing in `T`: both of this crate's.
trait Host<T>:
    'static
    + for<'a> Backend<
        T = T,
        Buf = Vec<T>,
        Half = Vec<u16>,
        View<'a> = &'a [T],
        ViewMut<'a> = &'a mut [T],
    >
{
}
impl<T, B> Host<T> for B where
    B: 'static
        + for<'a> Backend<
            T = T,
            Buf = Vec<T>,
            Half = Vec<u16>,
            View<'a> = &'a [T],
            ViewMut<'a> = &'a mut [T],
        >
{
}

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % (1 << 20)) as f64 / (1 << 19) as f64 - 1.0
        })
        .collect()
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// Hugging Face's inverse frequencies without scaling, in f32, written out here.
fn inverse_frequencies(d: usize, theta: f64) -> Vec<f32> {
    (0..d / 2)
        .map(|i| (1.0 / theta.powf((2 * i) as f64 / d as f64)) as f32)
        .collect()
}

fn rope_table(d: usize, theta: f64) -> Arc<RopeTable> {
    Arc::new(RopeTable::new(&inverse_frequencies(d, theta), 64).unwrap())
}

/// The gradient of `sum(r * f(inputs))` with respect to `inputs[which]`, by central differences.
fn numeric_grad(
    inputs: &[Vec<f64>],
    which: usize,
    r: &[f64],
    f: &dyn Fn(&[Vec<f64>]) -> Vec<f64>,
) -> Vec<f64> {
    let h = 1e-5;
    (0..inputs[which].len())
        .map(|i| {
            let at = |delta: f64| {
                let mut x = inputs.to_vec();
                x[which][i] += delta;
                f(&x).iter().zip(r).map(|(a, b)| a * b).sum::<f64>()
            };
            (at(h) - at(-h)) / (2.0 * h)
        })
        .collect()
}

fn assert_grad(name: &str, analytic: &[f64], numeric: &[f64]) {
    assert!(
        analytic.iter().any(|x| x.abs() > 1e-8),
        "{name}: an all-zero gradient checks nothing"
    );
    let scale = analytic.iter().fold(1.0f64, |a, x| a.max(x.abs()));
    let err = max_diff(analytic, numeric);
    assert!(
        err < 1e-7 * scale,
        "{name}: analytic vs finite-difference gradient differ by {err}"
    );
}

/// Runs a generic check on both backends in f64.
macro_rules! on_both_f64 {
    ($check:ident) => {
        $check(&Cpu::<f64>::new());
        $check(&Reference::<f64>::new());
    };
}

fn linear_case<B: Host<f64>>(b: &B) {
    let (n, din, dout) = (3, 5, 4);
    let base = values(n * dout, 9);
    let fwd = |t: &[Vec<f64>]| {
        let mut y = base.clone();
        b.linear(
            &t[0],
            &t[1],
            Some(&t[2]),
            din,
            dout,
            &mut y,
            true,
            Precision::F32,
        );
        y
    };
    let inputs = vec![values(n * din, 1), values(dout * din, 2), values(dout, 3)];
    let y = fwd(&inputs);
    for i in 0..n {
        for j in 0..dout {
            let want = base[i * dout + j]
                + inputs[2][j]
                + (0..din)
                    .map(|k| inputs[0][i * din + k] * inputs[1][j * din + k])
                    .sum::<f64>();
            assert!(
                (y[i * dout + j] - want).abs() < 1e-12,
                "{}: linear ({i}, {j})",
                b.name()
            );
        }
    }
    // Without add, the old contents do not matter; without a bias, none is added.
    let mut y2 = vec![7.0; n * dout];
    b.linear(
        &inputs[0],
        &inputs[1],
        None,
        din,
        dout,
        &mut y2,
        false,
        Precision::F32,
    );
    assert!(
        max_diff(
            &y2,
            &y.iter()
                .zip(&base)
                .enumerate()
                .map(|(i, (v, z))| v - z - inputs[2][i % dout])
                .collect::<Vec<_>>()
        ) < 1e-12
    );
    let r = values(n * dout, 4);
    let mut dx = vec![0.0; n * din];
    b.linear_grad_input(
        &mut dx,
        &r,
        &inputs[1],
        din,
        dout,
        false,
        Precision::F32,
    );
    assert_grad(
        &format!("{} linear dx", b.name()),
        &dx,
        &numeric_grad(&inputs, 0, &r, &fwd),
    );
    let dw = b.linear_grad_weight(&r, &inputs[0], din, dout, Precision::F32);
    assert_grad(
        &format!("{} linear dw", b.name()),
        &dw,
        &numeric_grad(&inputs, 1, &r, &fwd),
    );
    let db = b.linear_grad_bias(&r, dout);
    assert_grad(
        &format!("{} linear db", b.name()),
        &db,
        &numeric_grad(&inputs, 2, &r, &fwd),
    );
    let mut dx2 = dx.clone();
    b.linear_grad_input(
        &mut dx2,
        &r,
        &inputs[1],
        din,
        dout,
        true,
        Precision::F32,
    );
    assert!(
        max_diff(&dx2, &dx.iter().map(|v| 2.0 * v).collect::<Vec<_>>()) < 1e-12,
        "{}: accumulating dx must add",
        b.name()
    );
}

#[test]
fn linear_matches_the_definition_and_finite_differences() {
    on_both_f64!(linear_case);
}

fn rms_norm_case<B: Host<f64>>(b: &B) {
    let (rows, d, eps) = (4, 7, 1e-5);
    let inputs = vec![values(rows * d, 4), values(d, 5)];
    let y = b.rms_norm(&inputs[0], &inputs[1], eps);
    let mut want = vec![];
    for row in inputs[0].chunks(d) {
        let r = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / d as f64 + eps).sqrt();
        want.extend(row.iter().zip(&inputs[1]).map(|(v, w)| v * r * w));
    }
    assert!(
        max_diff(&y, &want) < 1e-12,
        "{}: rms_norm forward",
        b.name()
    );
    let fwd = |t: &[Vec<f64>]| b.rms_norm(&t[0], &t[1], eps);
    let r = values(rows * d, 6);
    let start = values(rows * d, 7);
    let mut dx = start.clone();
    let dw = b.rms_norm_backward(&inputs[0], &inputs[1], &r, eps, &mut dx, true);
    let numeric_dx = numeric_grad(&inputs, 0, &r, &fwd);
    let added: Vec<f64> = dx.iter().zip(&start).map(|(a, s)| a - s).collect();
    assert_grad(
        &format!("{} rms_norm dx (accumulated)", b.name()),
        &added,
        &numeric_dx,
    );
    assert_grad(
        &format!("{} rms_norm dw", b.name()),
        &dw,
        &numeric_grad(&inputs, 1, &r, &fwd),
    );
    let mut dx = start;
    b.rms_norm_backward(&inputs[0], &inputs[1], &r, eps, &mut dx, false);
    assert_grad(
        &format!("{} rms_norm dx (overwritten)", b.name()),
        &dx,
        &numeric_dx,
    );
}

#[test]
fn rms_norm_matches_the_definition_and_finite_differences() {
    on_both_f64!(rms_norm_case);
}

fn swiglu_case<B: Host<f64>>(b: &B) {
    let inputs = vec![values(18, 6), values(18, 7)];
    let y = b.swiglu(&inputs[0], &inputs[1]);
    let want: Vec<f64> = inputs[0]
        .iter()
        .zip(&inputs[1])
        .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
        .collect();
    assert!(max_diff(&y, &want) < 1e-12, "{}: swiglu forward", b.name());
    let fwd = |t: &[Vec<f64>]| b.swiglu(&t[0], &t[1]);
    let r = values(18, 8);
    let (dg, du) = b.swiglu_backward(&inputs[0], &inputs[1], &r);
    assert_grad(
        &format!("{} swiglu dgate", b.name()),
        &dg,
        &numeric_grad(&inputs, 0, &r, &fwd),
    );
    assert_grad(
        &format!("{} swiglu dup", b.name()),
        &du,
        &numeric_grad(&inputs, 1, &r, &fwd),
    );
}

#[test]
fn swiglu_matches_the_definition_and_finite_differences() {
    on_both_f64!(swiglu_case);
}

fn embed_case<B: Host<f64>>(b: &B) {
    let (vocab, width) = (6, 3);
    let table = values(vocab * width, 1);
    let tokens = [4u32, 0, 4, 5];
    let x = b.embed(&table, width, &tokens);
    for (r, &t) in tokens.iter().enumerate() {
        assert_eq!(
            &x[r * width..(r + 1) * width],
            &table[t as usize * width..(t as usize + 1) * width]
        );
    }
    let r = values(tokens.len() * width, 2);
    let mut dtable = vec![0.0; vocab * width];
    b.embed_backward(&mut dtable, width, &tokens, &r);
    let fwd = |t: &[Vec<f64>]| b.embed(&t[0], width, &tokens);
    assert_grad(
        &format!("{} embedding", b.name()),
        &dtable,
        &numeric_grad(&[table], 0, &r, &fwd),
    );
}

#[test]
fn embedding_gathers_rows_and_scatters_gradients() {
    on_both_f64!(embed_case);
}

/// Attention computed one query at a time, with its own rotary embedding.
#[allow(clippy::too_many_arguments)]
fn naive_attention(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    layout: &AttnLayout,
    heads: usize,
    kvh: usize,
    d: usize,
    theta: f64,
) -> Vec<f64> {
    let inv: Vec<f64> = inverse_frequencies(d, theta)
        .into_iter()
        .map(f64::from)
        .collect();
    let rot = |x: &[f64], pos: usize| -> Vec<f64> {
        let mut o = vec![0.0; d];
        for i in 0..d / 2 {
            let a = (pos as f32 * inv[i] as f32) as f64;
            o[i] = x[i] * a.cos() - x[i + d / 2] * a.sin();
            o[i + d / 2] = x[i + d / 2] * a.cos() + x[i] * a.sin();
        }
        o
    };
    let (qw, kw) = (heads * d, kvh * d);
    let mut out = vec![0.0; layout.rows * qw];
    for span in &layout.spans {
        for i in 0..span.len {
            let r = span.start + i;
            let mut keys: Vec<usize> = span
                .prefix
                .map(|(s, l)| (s..s + l).collect())
                .unwrap_or_default();
            keys.extend(span.start..=r);
            for h in 0..heads {
                let kh = h / (heads / kvh);
                let qr = rot(
                    &q[r * qw + h * d..r * qw + (h + 1) * d],
                    layout.positions[r],
                );
                let s: Vec<f64> = keys
                    .iter()
                    .map(|&j| {
                        let kr = rot(
                            &k[j * kw + kh * d..j * kw + (kh + 1) * d],
                            layout.positions[j],
                        );
                        qr.iter().zip(&kr).map(|(a, b)| a * b).sum::<f64>() / (d as f64).sqrt()
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for (p, &j) in e.iter().zip(&keys) {
                    for c in 0..d {
                        out[r * qw + h * d + c] += p / z * v[j * kw + kh * d + c];
                    }
                }
            }
        }
    }
    out
}

fn layouts() -> Vec<(&'static str, AttnLayout, usize, usize, usize)> {
    vec![
        ("batch gqa", AttnLayout::batch(2, 5), 4, 2, 6),
        ("batch mha", AttnLayout::batch(1, 4), 2, 2, 4),
        // Spans of different lengths, one empty; the prefix gradient sums over every span.
        (
            "shared prefix",
            AttnLayout::shared_prefix(4, &[3, 0, 5, 1]),
            4,
            2,
            6,
        ),
        (
            "shared prefix mqa",
            AttnLayout::shared_prefix(2, &[2, 3]),
            3,
            1,
            4,
        ),
        (
            "two groups",
            AttnLayout::shared_prefixes(&[(3, &[2, 0, 4]), (2, &[3])]),
            4,
            2,
            6,
        ),
    ]
}

fn attention_case<B: Host<f64>>(b: &B) {
    let theta = 100.0;
    for (name, layout, heads, kvh, d) in layouts() {
        let n = layout.rows;
        let op = Attention {
            layout: Arc::new(layout.clone()),
            rope: rope_table(d, theta),
            heads,
            kv_heads: kvh,
            head_dim: d,
        };
        let inputs = vec![
            values(n * heads * d, 10),
            values(n * kvh * d, 11),
            values(n * kvh * d, 12),
        ];
        let y = b.attention(&op, &inputs[0], &inputs[1], &inputs[2]);
        let err = max_diff(
            &y,
            &naive_attention(
                &inputs[0], &inputs[1], &inputs[2], &layout, heads, kvh, d, theta,
            ),
        );
        assert!(
            err < 1e-12,
            "{} attention {name}: forward differs from the naive attention by {err}",
            b.name()
        );
        let fwd = |t: &[Vec<f64>]| b.attention(&op, &t[0], &t[1], &t[2]);
        let r = values(n * heads * d, 13);
        let (dq, dk, dv) = b.attention_backward(&op, &inputs[0], &inputs[1], &inputs[2], &r);
        for (which, g) in [(0, dq), (1, dk), (2, dv)] {
            assert_grad(
                &format!("{} attention {name} input {which}", b.name()),
                &g,
                &numeric_grad(&inputs, which, &r, &fwd),
            );
        }
    }
}

#[test]
fn attention_matches_the_naive_attention_and_finite_differences_on_every_layout() {
    on_both_f64!(attention_case);
}

fn gather(chunk_cols: usize) -> Gather {
    // Row 1 is scored twice (as a shared prompt's last row is); output slots (2, 4) with gaps.
    Gather {
        rows: vec![1, 1, 2, 3, 5, 0],
        targets: vec![3, 7, 0, 10, 4, 4],
        out_index: vec![0, 4, 1, 5, 6, 2],
        out_shape: vec![2, 4],
        chunk_cols,
    }
}

fn logprob_case<B: Host<f64>>(b: &B) {
    let (rows, width, vocab) = (6, 5, 11);
    for chunk in [0, 1, 3, 4, 11] {
        let g = gather(chunk);
        let inputs = vec![values(rows * width, 20), values(vocab * width, 21)];
        for keep in [false, true] {
            let s = b.logprobs(
                &g,
                &inputs[0],
                &inputs[1],
                vocab,
                width,
                keep,
                Precision::F32,
            );
            let (mut want, mut want_ent) = (vec![0.0; 8], vec![]);
            for (slot, &row) in g.rows.iter().enumerate() {
                let z: Vec<f64> = (0..vocab)
                    .map(|v| {
                        (0..width)
                            .map(|c| inputs[0][row * width + c] * inputs[1][v * width + c])
                            .sum()
                    })
                    .collect();
                let m = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let lse = m + z.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
                want[g.out_index[slot]] = z[g.targets[slot] as usize] - lse;
                want_ent.push(-z.iter().map(|x| (x - lse).exp() * (x - lse)).sum::<f64>());
            }
            assert!(
                max_diff(&s.out, &want) < 1e-12,
                "{} chunk {chunk}: log-probs differ",
                b.name()
            );
            assert!(
                max_diff(&s.entropy, &want_ent) < 1e-12,
                "{} chunk {chunk}: entropies differ",
                b.name()
            );
            let fwd = |t: &[Vec<f64>]| {
                b.logprobs(&g, &t[0], &t[1], vocab, width, false, Precision::F32)
                    .out
            };
            let r = values(8, 22);
            let mut dh = vec![0.0; rows * width];
            let mut dhead = vec![f64::NAN; vocab * width];
            b.logprobs_backward(
                &g,
                s.logits,
                &s.lse,
                &inputs[0],
                &inputs[1],
                &r,
                vocab,
                width,
                &mut dh,
                Some(&mut dhead),
                Precision::F32,
            );
            assert_grad(
                &format!("{} logprob chunk {chunk} keep {keep} dh", b.name()),
                &dh,
                &numeric_grad(&inputs, 0, &r, &fwd),
            );
            assert_grad(
                &format!("{} logprob chunk {chunk} keep {keep} dhead", b.name()),
                &dhead,
                &numeric_grad(&inputs, 1, &r, &fwd),
            );
        }
    }
}

#[test]
fn log_probs_match_log_softmax_and_finite_differences_in_any_chunking() {
    on_both_f64!(logprob_case);
}

fn cached_case<B: Host<f64>>(b: &B) {
    // Two rows of a cache of 3 rows x 2 kv heads x 8 positions x head_dim 4, 4 query heads.
    let (heads, layout) = (
        4,
        CacheLayout {
            kv_heads: 2,
            max_len: 8,
            head_dim: 4,
        },
    );
    let (hd, kw, qw) = (4, 8, 16);
    let mut ck = vec![0.0; 3 * 2 * 8 * 4];
    let mut cv = ck.clone();
    // Fill row 2 with five positions, then copy them to row 0.
    let (k5, v5) = (values(5 * kw, 30), values(5 * kw, 31));
    let slots: Vec<(usize, usize)> = (0..5).map(|p| (2, p)).collect();
    b.cache_write(&mut ck, &mut cv, &layout, &k5, &v5, &slots);
    b.cache_copy_row(&mut ck, &layout, 2, 5, &[0]);
    b.cache_copy_row(&mut cv, &layout, 2, 5, &[0]);
    for (i, &(row, pos)) in slots.iter().enumerate() {
        for kh in 0..2 {
            for r in [row, 0] {
                assert_eq!(
                    &ck[layout.offset(r, kh) + pos * hd..][..hd],
                    &k5[i * kw + kh * hd..][..hd],
                    "{}: key written",
                    b.name()
                );
            }
        }
    }
    // A decode step of rows 0 and 2 (seeing 3 and 5 positions), and a prefill run of three queries on row 2.
    for queries in [
        vec![
            CachedQuery { row: 0, visible: 3 },
            CachedQuery { row: 2, visible: 5 },
        ],
        (0..3)
            .map(|i| CachedQuery {
                row: 2,
                visible: 3 + i,
            })
            .collect(),
    ] {
        let q = values(queries.len() * qw, 32);
        let mut out = vec![f64::NAN; queries.len() * qw];
        b.cached_attention(&q, &ck, &cv, &layout, heads, &queries, &mut out);
        for (i, c) in queries.iter().enumerate() {
            for h in 0..heads {
                let base = layout.offset(c.row, h / 2);
                let s: Vec<f64> = (0..c.visible)
                    .map(|j| {
                        (0..hd)
                            .map(|e| q[i * qw + h * hd + e] * ck[base + j * hd + e])
                            .sum::<f64>()
                            / 2.0
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
                for e in 0..hd {
                    let want: f64 = (0..c.visible)
                        .map(|j| (s[j] - m).exp() / z * cv[base + j * hd + e])
                        .sum();
                    assert!(
                        (out[i * qw + h * hd + e] - want).abs() < 1e-12,
                        "{}: cached attention {c:?} head {h}",
                        b.name()
                    );
                }
            }
        }
    }
    // The rotary embedding of a generation step rotates each row by its own position.
    let table = rope_table(4, 100.0);
    let mut x = values(2 * qw, 33);
    let before = x.clone();
    b.rope(&mut x, heads, &[5, 0], &table);
    assert_eq!(
        &x[qw..],
        &before[qw..],
        "{}: position 0 is the identity",
        b.name()
    );
    let a = (5.0f32 * inverse_frequencies(4, 100.0)[1]) as f64;
    let want = before[1] * a.cos() - before[3] * a.sin();
    assert!((x[1] - want).abs() < 1e-12, "{}: rope", b.name());
}

#[test]
fn the_generation_path_writes_copies_and_attends_to_the_cache() {
    on_both_f64!(cached_case);
}

fn adamw_case<B: Host<f64>>(b: &B) {
    let s = AdamWStep {
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.99,
        eps: 1e-8,
        weight_decay: 0.1,
        step: 3,
        grad_scale: 0.5,
    };
    let (w0, g, m0, v0) = (
        values(37, 40),
        values(37, 41),
        values(37, 42),
        values(37, 43).iter().map(|x| x.abs()).collect::<Vec<_>>(),
    );
    let (mut w, mut m, mut v) = (w0.clone(), m0.clone(), v0.clone());
    b.adamw(&mut w, &g, &mut m, &mut v, &s);
    for j in 0..37 {
        let gj = g[j] * 0.5;
        let mj = 0.9 * m0[j] + 0.1 * gj;
        let vj = 0.99 * v0[j] + 0.01 * gj * gj;
        let step = mj / (1.0 - 0.9f64.powi(3)) / ((vj / (1.0 - 0.99f64.powi(3))).sqrt() + 1e-8);
        let want = w0[j] * (1.0 - 0.01 * 0.1) - 0.01 * step;
        assert!(
            (m[j] - mj).abs() < 1e-12 && (v[j] - vj).abs() < 1e-12,
            "{}: moments",
            b.name()
        );
        assert!(
            (w[j] - want).abs() < 1e-9,
            "{}: weight {j}: {} vs {want}",
            b.name(),
            w[j]
        );
    }
    assert!((b.sum_squares(&g) - g.iter().map(|x| x * x).sum::<f64>()).abs() < 1e-12);
    let mut acc = w0.clone();
    b.add_into(&mut acc, &g);
    assert!(
        max_diff(
            &acc,
            &w0.iter().zip(&g).map(|(a, c)| a + c).collect::<Vec<_>>()
        ) < 1e-15
    );
}

#[test]
fn adamw_takes_the_decoupled_step() {
    on_both_f64!(adamw_case);
}

/// The CPU backend against the reference in f32, on the shapes a small model has, products exact and
/// in bf16: the decoder's every operation, on fresh random inputs.
#[test]
fn cpu_agrees_with_the_reference_in_f32() {
    let (cpu, rf) = (Cpu::<f32>::new(), Reference::<f32>::new());
    let rel = |a: &[f32], b: &[f32]| {
        let scale = b.iter().fold(1e-3f64, |m, &v| m.max((v as f64).abs()));
        max_diff(&f64s(a), &f64s(b)) / scale
    };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("seed {seed}");
    let v = |n: usize, k: u64| f32s(&values(n, seed.wrapping_add(k)));
    for p in [Precision::F32, Precision::Bf16] {
        // bf16 products round each operand: relative errors of ~2^-8, mostly cancelling.
        let tol = if p == Precision::F32 {
            1e-5
        } else {
            2e-2
        };
        for n in [1, 7, 70, 130] {
            let (din, dout) = (96, 40);
            let (x, w, bias) = (v(n * din, 1), v(dout * din, 2), v(dout, 3));
            let mut ya = v(n * dout, 4);
            let mut yb = ya.clone();
            cpu.linear(&x, &w, Some(&bias), din, dout, &mut ya, true, p);
            rf.linear(&x, &w, Some(&bias), din, dout, &mut yb, true, p);
            assert!(
                rel(&ya, &yb) < tol,
                "linear {n} rows {p:?}: {}",
                rel(&ya, &yb)
            );
            let g = v(n * dout, 5);
            let (mut da, mut db) = (vec![0f32; n * din], vec![0f32; n * din]);
            cpu.linear_grad_input(&mut da, &g, &w, din, dout, false, p);
            rf.linear_grad_input(&mut db, &g, &w, din, dout, false, p);
            assert!(rel(&da, &db) < tol, "grad input {n} rows {p:?}");
            let (wa, wb) = (
                cpu.linear_grad_weight(&g, &x, din, dout, p),
                rf.linear_grad_weight(&g, &x, din, dout, p),
            );
            assert!(rel(&wa, &wb) < tol, "grad weight {n} rows {p:?}");
            // The generation path's products, from f32 weights and from their bf16 copy.
            let half = cpu.to_half(&w);
            assert_eq!(half, rf.to_half(&w));
            for use_half in [false, true] {
                let (mut pa, mut pb) = (vec![f32::NAN; n * dout], vec![f32::NAN; n * dout]);
                let h = use_half.then_some(&half);
                cpu.project(
                    &x,
                    n,
                    din,
                    &mut [Product {
                        w: &w,
                        half: h,
                        bias: Some(&bias),
                        dout,
                        y: &mut pa,
                        add: false,
                    }],
                );
                rf.project(
                    &x,
                    n,
                    din,
                    &mut [Product {
                        w: &w,
                        half: h,
                        bias: Some(&bias),
                        dout,
                        y: &mut pb,
                        add: false,
                    }],
                );
                assert!(
                    rel(&pa, &pb) < 1e-5,
                    "project {n} rows half {use_half}: {}",
                    rel(&pa, &pb)
                );
            }
        }
        let (rows, width, vocab) = (9, 32, 300);
        let g = Gather {
            rows: (0..9).collect(),
            targets: (0..9).map(|i| (i * 31 % 300) as u32).collect(),
            out_index: (0..9).collect(),
            out_shape: vec![9],
            chunk_cols: 64,
        };
        let (h, head) = (v(rows * width, 6), v(vocab * width, 7));
        let (sa, sb) = (
            cpu.logprobs(&g, &h, &head, vocab, width, true, p),
            rf.logprobs(&g, &h, &head, vocab, width, true, p),
        );
        assert!(rel(&sa.out, &sb.out) < tol, "log-probs {p:?}");
        let r = v(9, 8);
        let (mut dha, mut dhb, mut dwa, mut dwb) = (
            vec![0f32; rows * width],
            vec![0f32; rows * width],
            vec![0f32; vocab * width],
            vec![0f32; vocab * width],
        );
        cpu.logprobs_backward(
            &g, sa.logits, &sa.lse, &h, &head, &r, vocab, width, &mut dha, Some(&mut dwa), p,
        );
        rf.logprobs_backward(
            &g, sb.logits, &sb.lse, &h, &head, &r, vocab, width, &mut dhb, Some(&mut dwb), p,
        );
        assert!(
            rel(&dha, &dhb) < tol && rel(&dwa, &dwb) < tol,
            "log-prob gradients {p:?}"
        );
    }
    for (name, layout, heads, kvh, d) in layouts() {
        let n = layout.rows;
        let op = Attention {
            layout: Arc::new(layout),
            rope: rope_table(d, 1e4),
            heads,
            kv_heads: kvh,
            head_dim: d,
        };
        let (q, k, vv, dout) = (
            v(n * heads * d, 10),
            v(n * kvh * d, 11),
            v(n * kvh * d, 12),
            v(n * heads * d, 13),
        );
        assert!(
            rel(
                &cpu.attention(&op, &q, &k, &vv),
                &rf.attention(&op, &q, &k, &vv)
            ) < 1e-5,
            "attention {name}"
        );
        let (a, b) = (
            cpu.attention_backward(&op, &q, &k, &vv, &dout),
            rf.attention_backward(&op, &q, &k, &vv, &dout),
        );
        assert!(
            rel(&a.0, &b.0) < 1e-5 && rel(&a.1, &b.1) < 1e-5 && rel(&a.2, &b.2) < 1e-5,
            "attention backward {name}"
        );
    }
    let (x, w, dy) = (v(5 * 64, 20), v(64, 21), v(5 * 64, 22));
    assert!(rel(&cpu.rms_norm(&x, &w, 1e-6), &rf.rms_norm(&x, &w, 1e-6)) < 1e-5);
    let (mut da, mut db) = (vec![0f32; 5 * 64], vec![0f32; 5 * 64]);
    let (wa, wb) = (
        cpu.rms_norm_backward(&x, &w, &dy, 1e-6, &mut da, false),
        rf.rms_norm_backward(&x, &w, &dy, 1e-6, &mut db, false),
    );
    assert!(rel(&da, &db) < 1e-5 && rel(&wa, &wb) < 1e-5);
    assert!(rel(&cpu.swiglu(&x, &dy), &rf.swiglu(&x, &dy)) < 1e-5);
    // A decode step over a cache with head_dim 64 (the few-queries kernel where the CPU has it).
    let (layout, heads) = (
        CacheLayout {
            kv_heads: 2,
            max_len: 40,
            head_dim: 64,
        },
        6,
    );
    let (ck, cv) = (v(4 * 2 * 40 * 64, 30), v(4 * 2 * 40 * 64, 31));
    for queries in [
        vec![
            CachedQuery {
                row: 3,
                visible: 33,
            },
            CachedQuery { row: 1, visible: 7 },
        ],
        (0..5)
            .map(|i| CachedQuery {
                row: 2,
                visible: 20 + i,
            })
            .collect(),
    ] {
        let q = v(queries.len() * heads * 64, 32);
        let (mut oa, mut ob) = (vec![f32::NAN; q.len()], vec![f32::NAN; q.len()]);
        cpu.cached_attention(&q, &ck, &cv, &layout, heads, &queries, &mut oa);
        rf.cached_attention(&q, &ck, &cv, &layout, heads, &queries, &mut ob);
        assert!(rel(&oa, &ob) < 1e-5, "cached attention {queries:?}");
    }
    let s = AdamWStep {
        lr: 1e-3,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.01,
        step: 1,
        grad_scale: 1.0,
    };
    let (mut wa, mut ma, mut va) = (v(1000, 40), vec![0f32; 1000], vec![0f32; 1000]);
    let (mut wb, mut mb, mut vb) = (wa.clone(), ma.clone(), va.clone());
    let g = v(1000, 41);
    cpu.adamw(&mut wa, &g, &mut ma, &mut va, &s);
    rf.adamw(&mut wb, &g, &mut mb, &mut vb, &s);
    // The CPU computes 1 - beta2 in f32 (1 - 0.999f32 is off by 1.3e-5 relative), the reference in f64.
    assert!(
        rel(&wa, &wb) < 1e-5 && rel(&ma, &mb) < 1e-5 && rel(&va, &vb) < 1e-4,
        "adamw: {} {} {}",
        rel(&wa, &wb),
        rel(&ma, &mb),
        rel(&va, &vb)
    );
}

#[test]
fn f32_and_f64_compute_the_same_values() {
    let (x, w) = (values(12, 1), values(4, 2));
    let a = Cpu::<f32>::new().rms_norm(&f32s(&x), &f32s(&w), 1e-6);
    let b = Cpu::<f64>::new().rms_norm(&x, &w, 1e-6);
    assert!(max_diff(&f64s(&a), &b) < 1e-6);
}

mod simd_kernels {
    use cppo_kernels::simd::{axpy_f32, dot_f32, exp_scale_f32, exp_stats_f32};
    use proptest::prelude::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * (1.0 + a.abs().max(b.abs()))
    }

    proptest! {
        #[test]
        fn dot_and_axpy_match_plain_loops(v in proptest::collection::vec(-10.0f32..10.0, 0..70), alpha in -3.0f32..3.0) {
            let w: Vec<f32> = v.iter().rev().map(|x| x * 0.5 - 1.0).collect();
            let want: f64 = v.iter().zip(&w).map(|(&a, &b)| a as f64 * b as f64).sum();
            prop_assert!(close(dot_f32(&v, &w) as f64, want, 1e-5 * (v.len() as f64 + 1.0)));
            let mut y = w.clone();
            axpy_f32(alpha, &v, &mut y);
            for i in 0..v.len() {
                prop_assert!(close(y[i] as f64, w[i] as f64 + alpha as f64 * v[i] as f64, 1e-6));
            }
        }

        #[test]
        fn exp_kernels_match_exp(z in proptest::collection::vec(-90.0f32..30.0, 0..70), shift in -5.0f32..40.0, scale in -2.0f32..2.0) {
            let mut s = 0.0f64;
            let mut t = 0.0f64;
            for &x in &z {
                let e = ((x - shift) as f64).exp();
                s += e;
                t += e * x as f64;
            }
            let (gs, gt) = exp_stats_f32(&z, shift);
            prop_assert!(close(gs as f64, s, 1e-5), "sum {gs} vs {s}");
            prop_assert!((gt as f64 - t).abs() <= 1e-5 * (1.0 + z.iter().map(|&x| ((x - shift) as f64).exp() * (x as f64).abs()).sum::<f64>()), "weighted {gt} vs {t}");
            let mut out = z.clone();
            exp_scale_f32(&mut out, shift, scale);
            for (o, &x) in out.iter().zip(&z) {
                let want = scale as f64 * ((x - shift) as f64).exp();
                // Below exp(-87) the kernel may flush to ~1e-38 instead of the exact tiny value.
                prop_assert!(close(*o as f64, want, 1e-6) || (x - shift) < -87.0 && o.abs() < 1e-37, "{o} vs {want}");
            }
        }
    }
}
