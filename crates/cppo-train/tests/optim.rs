//! AdamW as a run takes it: the state (`optim::AdamW`: which variables decay, the moments a checkpoint
//! holds) driving the CPU backend's one AdamW op over flat buffers, against a scalar f64 transcription
//! of the PyTorch update; clipping; state round trips.

use candle_core::{Device, Tensor, Var};
use cppo_kernels::backend::{AdamWParam, AdamWStep, Backend};
use cppo_kernels::cpu::Cpu;
use cppo_train::optim::{AdamW, AdamWConfig};
use proptest::prelude::*;

fn vars(seed: u64) -> Vec<(String, Var)> {
    let d = Device::Cpu;
    let mk = |shape: &[usize], k: u64| {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|i| (((i as u64 * 7919 + k * 104729 + seed) % 1000) as f32 / 500.0) - 1.0).collect();
        Var::from_tensor(&Tensor::from_vec(data, shape, &d).unwrap()).unwrap()
    };
    vec![("w".into(), mk(&[3, 5], 1)), ("norm".into(), mk(&[5], 2))]
}

fn flat(v: &Var) -> Vec<f32> {
    v.as_tensor().flatten_all().unwrap().to_vec1().unwrap()
}

/// One step of the run's optimizer on the CPU backend: the gradient norm, its clipping coefficient from
/// the config, and one `adamw_all` call over every variable (as `device.rs` does on any backend).
fn step(opt: &AdamW, step: u64, weights: &mut [Vec<f32>], grads: &[f32], m: &mut [f32], v: &mut [f32], lr: f64) -> anyhow::Result<f64> {
    let b = Cpu::<f32>::new();
    let norm = b.sum_squares(grads).sqrt();
    let clip = opt.config.clip_coefficient(norm)?;
    let c = &opt.config;
    let s = AdamWStep { lr, beta1: c.beta1, beta2: c.beta2, eps: c.eps, weight_decay: c.weight_decay, step, grad_scale: clip };
    let mut offset = 0;
    let params = weights
        .iter_mut()
        .zip(opt.decays())
        .map(|(w, &decay)| {
            let p = AdamWParam::<Cpu<f32>> { offset, decay, half: None, w: &mut w[..] };
            offset += p.w.len();
            p
        })
        .collect();
    b.adamw_all(params, grads, m, v, &s);
    Ok(norm)
}

#[test]
fn matches_the_pytorch_update_rule_with_decay_only_on_matrices() {
    let vs = vars(0);
    let cfg = AdamWConfig { beta1: 0.9, beta2: 0.99, eps: 1e-8, weight_decay: 0.1, max_grad_norm: None };
    let opt = AdamW::new(&vs, cfg.clone());
    assert_eq!(opt.decays(), &[true, false], "decay on the matrix only");
    let mut w: Vec<Vec<f32>> = vs.iter().map(|(_, v)| flat(v)).collect();
    let total: usize = w.iter().map(Vec::len).sum();
    let (mut m, mut v) = (vec![0f32; total], vec![0f32; total]);
    // Reference state in f64.
    let mut p: Vec<Vec<f64>> = w.iter().map(|x| x.iter().map(|&x| x as f64).collect()).collect();
    let mut m64: Vec<Vec<f64>> = p.iter().map(|x| vec![0.0; x.len()]).collect();
    let mut s64: Vec<Vec<f64>> = m64.clone();
    let lr = 1e-2;
    for t in 1..=5 {
        // loss = sum_k c_k sum_i p_i^2, a different gradient every step.
        let grads: Vec<f32> = w.iter().enumerate().flat_map(|(k, x)| x.iter().map(move |&x| 2.0 * (k as f32 + 1.0) * x)).collect();
        step(&opt, t, &mut w, &grads, &mut m, &mut v, lr).unwrap();
        for k in 0..p.len() {
            let c = k as f64 + 1.0;
            let decay = if k == 0 { cfg.weight_decay } else { 0.0 };
            for i in 0..p[k].len() {
                let g = 2.0 * c * p[k][i];
                p[k][i] *= 1.0 - lr * decay;
                m64[k][i] = 0.9 * m64[k][i] + 0.1 * g;
                s64[k][i] = 0.99 * s64[k][i] + 0.01 * g * g;
                let bc1 = 1.0 - 0.9f64.powi(t as i32);
                let bc2 = 1.0 - 0.99f64.powi(t as i32);
                p[k][i] -= lr / bc1 * m64[k][i] / (s64[k][i].sqrt() / bc2.sqrt() + 1e-8);
            }
        }
    }
    for (a, b) in w.iter().flatten().zip(p.iter().flatten()) {
        assert!((*a as f64 - b).abs() < 1e-5, "{a} vs {b}");
    }
}

proptest! {
    /// Clipping scales a norm above `max_grad_norm` down to it, leaves one within it alone, and never
    /// applies without a positive bound.
    #[test]
    fn clipping_bounds_the_applied_gradient_norm(norm in 1e-6f64..1e6, max in prop::option::of(-1.0f64..100.0)) {
        let cfg = AdamWConfig { max_grad_norm: max, ..Default::default() };
        let coef = cfg.clip_coefficient(norm).unwrap();
        match max {
            Some(max) if max > 0.0 && norm > max => prop_assert!((coef * norm - max).abs() <= 1e-5 * max, "coef {coef} norm {norm} max {max}"),
            _ => prop_assert_eq!(coef, 1.0),
        }
    }
}

#[test]
fn clipping_in_a_step_bounds_the_applied_gradient() {
    let vs = vars(1);
    let opt = AdamW::new(&vs, AdamWConfig { max_grad_norm: Some(1.0), beta1: 0.0, beta2: 0.0, eps: 0.0, weight_decay: 0.0 });
    let mut w: Vec<Vec<f32>> = vs.iter().map(|(_, v)| flat(v)).collect();
    let total: usize = w.iter().map(Vec::len).sum();
    let grads: Vec<f32> = (0..total).map(|i| 100.0 * (i as f32 - 7.0)).collect();
    let (mut m, mut v) = (vec![0f32; total], vec![0f32; total]);
    let norm = step(&opt, 1, &mut w, &grads, &mut m, &mut v, 1e-3).unwrap();
    let exact = grads.iter().map(|&g| (g as f64).powi(2)).sum::<f64>().sqrt();
    assert!((norm - exact).abs() < 1e-6 * exact);
    // With beta1 = 0 the first moment is the applied (clipped) gradient: its norm is the bound.
    let applied = m.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
    assert!((applied - 1.0).abs() < 1e-4, "applied norm {applied}");
}

#[test]
fn saved_state_round_trips_and_a_mismatch_is_refused() {
    let dir = std::env::temp_dir().join(format!("cppo-optim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("optimizer.safetensors");
    let vs = vars(3);
    let mut opt = AdamW::new(&vs, AdamWConfig::default());
    let moments = |k: f32| vs.iter().map(|(_, v)| (0..v.elem_count()).map(|i| k * i as f32 - 0.5).collect()).collect::<Vec<Vec<f32>>>();
    opt.set_moments(7, moments(0.25), moments(0.125)).unwrap();
    opt.save(&path).unwrap();
    let mut back = AdamW::new(&vs, AdamWConfig::default());
    back.load(&path).unwrap();
    assert_eq!(back.step, 7);
    assert_eq!(back.moments(), opt.moments());
    let short: Vec<Vec<f32>> = vec![vec![0.0; 2]; 2];
    assert!(back.set_moments(8, short.clone(), short).is_err());
    assert_eq!(back.step, 7, "a refused set leaves the state alone");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_non_finite_gradient_is_refused_and_weights_stay() {
    let vs = vars(4);
    let opt = AdamW::new(&vs, AdamWConfig::default());
    let mut w: Vec<Vec<f32>> = vs.iter().map(|(_, v)| flat(v)).collect();
    let before = w.clone();
    let total: usize = w.iter().map(Vec::len).sum();
    let mut grads = vec![0.5f32; total];
    grads[3] = f32::NAN;
    let (mut m, mut v) = (vec![0f32; total], vec![0f32; total]);
    assert!(step(&opt, 1, &mut w, &grads, &mut m, &mut v, 1e-2).is_err());
    assert_eq!(before, w);
}
