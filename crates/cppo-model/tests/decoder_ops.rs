//! Each custom op against a direct computation (forward) and against central finite differences in
//! f64 (backward), over every input coordinate.

mod decoder_support;

use std::sync::Arc;

use candle_core::{DType, Device, Tensor, Var};
use cppo_kernels::attention::{AttnLayout, Attention};
use cppo_kernels::linear::linear;
use cppo_kernels::logprob::{token_logprobs, Gather};
use cppo_kernels::rms_norm::rms_norm;
use cppo_kernels::rope::RopeTable;
use cppo_kernels::swiglu::swiglu;
use decoder_support::{finite_difference, flat, max_diff, scalar, values};

fn var(shape: &[usize], seed: u64) -> Var {
    let n = shape.iter().product();
    Var::from_tensor(&Tensor::from_vec(values(n, seed), shape, &Device::Cpu).unwrap()).unwrap()
}

/// Checks the gradient of `sum(f(inputs) * r)` for a fixed random `r` against finite differences.
fn check_grads(name: &str, inputs: &[Var], f: &dyn Fn(&[Tensor]) -> Tensor) {
    let ts: Vec<Tensor> = inputs.iter().map(|v| v.as_tensor().clone()).collect();
    let out = f(&ts);
    let r = Tensor::from_vec(values(out.elem_count(), 99), out.shape(), &Device::Cpu).unwrap();
    let loss = |ts: &[Tensor]| f(ts).mul(&r).unwrap().sum_all().unwrap();
    let grads = loss(&ts).backward().unwrap();
    for (vi, v) in inputs.iter().enumerate() {
        let g = flat(grads.get(v).unwrap_or_else(|| panic!("{name}: input {vi} got no gradient")));
        assert!(g.iter().any(|x| x.abs() > 1e-8), "{name}: input {vi} has an all-zero gradient");
        let mut fd = Vec::with_capacity(g.len());
        for i in 0..g.len() {
            fd.push(finite_difference(v, i, 1e-5, &mut || scalar(&loss(&ts))));
        }
        let scale = g.iter().fold(1.0f64, |a, x| a.max(x.abs()));
        let err = max_diff(&g, &fd);
        assert!(err < 1e-7 * scale, "{name}: input {vi}: analytic vs finite-difference gradient differ by {err}");
    }
}

#[test]
fn linear_matches_matmul_and_finite_differences() {
    let x = var(&[2, 3, 5], 1);
    let w = var(&[4, 5], 2);
    let b = var(&[4], 3);
    let y = linear(&x, &w, Some(&b)).unwrap();
    let want = x.broadcast_matmul(&w.t().unwrap()).unwrap().broadcast_add(&b).unwrap();
    assert_eq!(y.dims(), &[2, 3, 4]);
    assert!(max_diff(&flat(&y), &flat(&want)) < 1e-12);
    check_grads("linear+bias", &[x.clone(), w.clone(), b], &|t| linear(&t[0], &t[1], Some(&t[2])).unwrap());
    check_grads("linear", &[x, w], &|t| linear(&t[0], &t[1], None).unwrap());
}

#[test]
fn linear_computes_no_gradient_for_a_frozen_weight() {
    let x = var(&[3, 5], 1);
    let w = Tensor::from_vec(values(20, 2), (4, 5), &Device::Cpu).unwrap();
    let grads = linear(&x, &w, None).unwrap().sum_all().unwrap().backward().unwrap();
    assert!(grads.get(&x).is_some());
    assert!(grads.get(&w).is_none(), "a frozen weight must not receive a gradient");
    let y = linear(&w.unsqueeze(0).unwrap(), &w, None).unwrap();
    assert!(!y.track_op(), "an op on plain tensors must build no graph");
}

#[test]
fn rms_norm_matches_definition_and_finite_differences() {
    let x = var(&[4, 7], 4);
    let w = var(&[7], 5);
    let eps = 1e-5;
    let y = rms_norm(&x, &w, eps).unwrap();
    let xs = flat(&x);
    let ws = flat(&w);
    let mut want = vec![];
    for row in xs.chunks(7) {
        let ms = row.iter().map(|v| v * v).sum::<f64>() / 7.0;
        let r = 1.0 / (ms + eps).sqrt();
        want.extend(row.iter().zip(&ws).map(|(v, w)| v * r * w));
    }
    assert!(max_diff(&flat(&y), &want) < 1e-12);
    check_grads("rms_norm", &[x, w], &|t| rms_norm(&t[0], &t[1], eps).unwrap());
}

#[test]
fn swiglu_matches_definition_and_finite_differences() {
    let g = var(&[3, 6], 6);
    let u = var(&[3, 6], 7);
    let y = swiglu(&g, &u).unwrap();
    let want: Vec<f64> = flat(&g).iter().zip(flat(&u)).map(|(g, u)| g / (1.0 + (-g).exp()) * u).collect();
    assert!(max_diff(&flat(&y), &want) < 1e-12);
    check_grads("swiglu", &[g, u], &|t| swiglu(&t[0], &t[1]).unwrap());
}

/// Attention computed one query at a time, with its own rotary embedding.
#[allow(clippy::too_many_arguments)]
fn naive_attention(q: &[f64], k: &[f64], v: &[f64], layout: &AttnLayout, heads: usize, kvh: usize, d: usize, theta: f64) -> Vec<f64> {
    let inv: Vec<f64> = (0..d / 2).map(|i| (1.0 / theta.powf((2 * i) as f64 / d as f64)) as f32 as f64).collect();
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
            let mut keys: Vec<usize> = span.prefix.map(|(s, l)| (s..s + l).collect()).unwrap_or_default();
            keys.extend(span.start..=r);
            for h in 0..heads {
                let kh = h / (heads / kvh);
                let qr = rot(&q[r * qw + h * d..r * qw + (h + 1) * d], layout.positions[r]);
                let s: Vec<f64> = keys
                    .iter()
                    .map(|&j| {
                        let kr = rot(&k[j * kw + kh * d..j * kw + (kh + 1) * d], layout.positions[j]);
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

fn attention_case(name: &str, layout: AttnLayout, heads: usize, kvh: usize, d: usize) {
    let theta = 100.0;
    let rope = Arc::new(RopeTable::new(&cppo_io::config::inverse_frequencies(d, theta, None), 64).unwrap());
    let n = layout.rows;
    let q = var(&[n, heads * d], 10);
    let k = var(&[n, kvh * d], 11);
    let v = var(&[n, kvh * d], 12);
    let op = Attention { layout: Arc::new(layout.clone()), rope, heads, kv_heads: kvh, head_dim: d };
    let y = op.clone().apply(&q, &k, &v).unwrap();
    let want = naive_attention(&flat(&q), &flat(&k), &flat(&v), &layout, heads, kvh, d, theta);
    let err = max_diff(&flat(&y), &want);
    assert!(err < 1e-12, "{name}: forward differs from the naive attention by {err}");
    check_grads(name, &[q, k, v], &|t| op.clone().apply(&t[0], &t[1], &t[2]).unwrap());
}

#[test]
fn attention_batch_matches_naive_and_finite_differences() {
    attention_case("attention batch gqa", AttnLayout::batch(2, 5), 4, 2, 6);
    attention_case("attention batch mha", AttnLayout::batch(1, 4), 2, 2, 4);
}

#[test]
fn attention_shared_prefix_matches_naive_and_finite_differences() {
    // Spans of different lengths, one empty; the prefix gradient sums over every span.
    attention_case("attention shared prefix", AttnLayout::shared_prefix(4, &[3, 0, 5, 1]), 4, 2, 6);
    attention_case("attention shared prefix mqa", AttnLayout::shared_prefix(2, &[2, 3]), 3, 1, 4);
    attention_case("attention two groups", AttnLayout::shared_prefixes(&[(3, &[2, 0, 4]), (2, &[3])]), 4, 2, 6);
}

fn logprob_case(chunk_cols: usize) {
    let (rows, width, vocab) = (6, 5, 11);
    let h = var(&[rows, width], 20);
    let w = var(&[vocab, width], 21);
    // Row 1 is scored twice (as a shared prompt's last row is); output slots (2, 4) with gaps.
    let gather = Gather {
        rows: vec![1, 1, 2, 3, 5, 0],
        targets: vec![3, 7, 0, 10, 4, 4],
        out_index: vec![0, 4, 1, 5, 6, 2],
        out_shape: vec![2, 4],
        chunk_cols,
    };
    let (lp, ent) = token_logprobs(&h, &w, gather.clone()).unwrap();
    assert!(!ent.track_op(), "entropy must be detached");
    let logits = h.matmul(&w.t().unwrap()).unwrap();
    let ls = flat(&decoder_support::log_softmax(&logits));
    let mut want = vec![0.0; 8];
    let mut want_ent = vec![0.0; 8];
    for s in 0..gather.rows.len() {
        let row = &ls[gather.rows[s] * vocab..(gather.rows[s] + 1) * vocab];
        want[gather.out_index[s]] = row[gather.targets[s] as usize];
        want_ent[gather.out_index[s]] = -row.iter().map(|l| l.exp() * l).sum::<f64>();
    }
    assert!(max_diff(&flat(&lp), &want) < 1e-12, "chunk {chunk_cols}: log-probs differ");
    assert!(max_diff(&flat(&ent), &want_ent) < 1e-12, "chunk {chunk_cols}: entropies differ");
    check_grads(&format!("logprob chunk {chunk_cols}"), &[h, w], &|t| {
        token_logprobs(&t[0], &t[1], gather.clone()).unwrap().0
    });
}

#[test]
fn token_logprobs_match_log_softmax_and_finite_differences_in_any_chunking() {
    for chunk in [0, 1, 3, 4, 11] {
        logprob_case(chunk);
    }
}

#[test]
fn ops_compute_in_f32_too() {
    let x = Tensor::from_vec(values(12, 1), (3, 4), &Device::Cpu).unwrap();
    let w = Tensor::from_vec(values(4, 2), 4, &Device::Cpu).unwrap();
    let a = rms_norm(&x.to_dtype(DType::F32).unwrap(), &w.to_dtype(DType::F32).unwrap(), 1e-6).unwrap();
    let b = rms_norm(&x, &w, 1e-6).unwrap();
    assert_eq!(a.dtype(), DType::F32);
    assert!(max_diff(&flat(&a), &flat(&b)) < 1e-6);
    let bad = rms_norm(&x.to_dtype(DType::BF16).unwrap(), &w.to_dtype(DType::BF16).unwrap(), 1e-6);
    assert!(bad.unwrap_err().to_string().contains("unsupported dtype"));
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
