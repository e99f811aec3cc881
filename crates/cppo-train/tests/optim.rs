//! AdamW against a scalar f64 transcription of the PyTorch update, clipping, and state round trips.

use candle_core::{Device, Tensor, Var};
use cppo_train::optim::{AdamW, AdamWConfig, GradAccumulator};

fn vars(seed: u64) -> Vec<(String, Var)> {
    let d = Device::Cpu;
    let mk = |shape: &[usize], k: u64| {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|i| (((i as u64 * 7919 + k * 104729 + seed) % 1000) as f32 / 500.0) - 1.0).collect();
        Var::from_tensor(&Tensor::from_vec(data, shape, &d).unwrap()).unwrap()
    };
    vec![("w".into(), mk(&[3, 5], 1)), ("norm".into(), mk(&[5], 2))]
}

/// loss = sum_i c_i * p_i^2 so the gradient is 2 c_i p_i: a different gradient every step.
fn backward(vars: &[(String, Var)], acc: &mut GradAccumulator, scale: f64) {
    let mut loss = Tensor::new(0f32, &Device::Cpu).unwrap();
    for (k, (_, v)) in vars.iter().enumerate() {
        let c = (k as f64 + 1.0) * scale;
        loss = (loss + (v.as_tensor().sqr().unwrap().sum_all().unwrap() * c).unwrap()).unwrap();
    }
    let grads = loss.backward().unwrap();
    acc.add(vars, &grads).unwrap();
}

fn flat(v: &Var) -> Vec<f32> {
    v.as_tensor().flatten_all().unwrap().to_vec1().unwrap()
}

#[test]
fn matches_the_pytorch_update_rule_with_decay_only_on_matrices() {
    let vs = vars(0);
    let cfg = AdamWConfig { beta1: 0.9, beta2: 0.99, eps: 1e-8, weight_decay: 0.1, max_grad_norm: None };
    let mut opt = AdamW::new(&vs, cfg.clone());
    let mut acc = GradAccumulator::new(&vs);
    // Reference state in f64.
    let mut p: Vec<Vec<f64>> = vs.iter().map(|(_, v)| flat(v).iter().map(|&x| x as f64).collect()).collect();
    let mut m: Vec<Vec<f64>> = p.iter().map(|x| vec![0.0; x.len()]).collect();
    let mut s: Vec<Vec<f64>> = m.clone();
    let lr = 1e-2;
    for t in 1..=5 {
        acc.zero();
        backward(&vs, &mut acc, 1.0);
        opt.step(&vs, &acc, lr).unwrap();
        for k in 0..p.len() {
            let c = k as f64 + 1.0;
            let decay = if k == 0 { cfg.weight_decay } else { 0.0 };
            for i in 0..p[k].len() {
                let g = 2.0 * c * p[k][i];
                p[k][i] *= 1.0 - lr * decay;
                m[k][i] = 0.9 * m[k][i] + 0.1 * g;
                s[k][i] = 0.99 * s[k][i] + 0.01 * g * g;
                let bc1 = 1.0 - 0.9f64.powi(t);
                let bc2 = 1.0 - 0.99f64.powi(t);
                p[k][i] -= lr / bc1 * m[k][i] / (s[k][i].sqrt() / bc2.sqrt() + 1e-8);
            }
        }
    }
    for (k, (_, v)) in vs.iter().enumerate() {
        for (a, b) in flat(v).iter().zip(&p[k]) {
            assert!((*a as f64 - b).abs() < 1e-5, "{a} vs {b}");
        }
    }
}

#[test]
fn clipping_bounds_the_applied_gradient_norm() {
    let vs = vars(1);
    let mut acc = GradAccumulator::new(&vs);
    backward(&vs, &mut acc, 100.0);
    let norm = acc.norm();
    let mut opt = AdamW::new(&vs, AdamWConfig { max_grad_norm: Some(1.0), ..Default::default() });
    let report = opt.step(&vs, &acc, 1e-3).unwrap();
    assert!((report.grad_norm - norm).abs() < 1e-6 * norm);
    assert!((report.clip_coef * norm - 1.0).abs() < 1e-4, "coef {} norm {norm}", report.clip_coef);
}

#[test]
fn accumulation_over_micro_batches_equals_one_pass() {
    let vs = vars(2);
    let mut once = GradAccumulator::new(&vs);
    backward(&vs, &mut once, 1.0);
    let mut twice = GradAccumulator::new(&vs);
    backward(&vs, &mut twice, 0.25);
    backward(&vs, &mut twice, 0.75);
    for (a, b) in once.buffers().iter().zip(twice.buffers()) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-5);
        }
    }
}

#[test]
fn saved_state_resumes_to_identical_weights() {
    let dir = std::env::temp_dir().join(format!("cppo-optim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("optimizer.safetensors");
    let run = |stop_at: Option<usize>| -> Vec<Vec<f32>> {
        let vs = vars(3);
        let mut opt = AdamW::new(&vs, AdamWConfig::default());
        let mut acc = GradAccumulator::new(&vs);
        for t in 0..6 {
            if Some(t) == stop_at {
                opt.save(&path).unwrap();
                let weights: Vec<Tensor> = vs.iter().map(|(_, v)| v.as_tensor().copy().unwrap()).collect();
                // A fresh optimizer, restored from disk, continues.
                opt = AdamW::new(&vs, AdamWConfig::default());
                opt.load(&path).unwrap();
                for ((_, v), w) in vs.iter().zip(weights) {
                    v.set(&w).unwrap();
                }
            }
            acc.zero();
            backward(&vs, &mut acc, 1.0);
            opt.step(&vs, &acc, 1e-2).unwrap();
        }
        vs.iter().map(|(_, v)| flat(v)).collect()
    };
    assert_eq!(run(None), run(Some(3)));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_non_finite_gradient_is_refused_and_weights_stay() {
    let vs = vars(4);
    let before: Vec<Vec<f32>> = vs.iter().map(|(_, v)| flat(v)).collect();
    let mut acc = GradAccumulator::new(&vs);
    let loss = (vs[0].1.as_tensor().sum_all().unwrap() * f64::NAN).unwrap();
    acc.add(&vs, &loss.backward().unwrap()).unwrap();
    let mut opt = AdamW::new(&vs, AdamWConfig::default());
    assert!(opt.step(&vs, &acc, 1e-2).is_err());
    let after: Vec<Vec<f32>> = vs.iter().map(|(_, v)| flat(v)).collect();
    assert_eq!(before, after);
}
