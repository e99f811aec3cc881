//! Training runs with the update on a backend the test brings (`Trainer::with_update_backend`) or on
//! the CPU, and their comparison: shared by the trainer's device tests and cppo-cuda's emulated ones.

use cppo_kernels::backend::Backend;
use cppo_train::metrics::{JsonlLog, StepMetrics};
use cppo_train::trainer::Trainer;

pub fn overrides(steps: u64, extra: &[&str]) -> Vec<String> {
    let mut o = vec![
        // Exact products on both sides: the comparison is then between summation orders only.
        "optim.matmul_precision=\"f32\"".to_string(),
        "generation.weights=\"f32\"".to_string(),
        "loss.num_iterations=2".to_string(),
        "optim.max_grad_norm=0.5".to_string(),
        "optim.weight_decay=0.1".to_string(),
        "rollout.strategy={ kind = \"cppo\", pruning_rate = 0.5 }".to_string(),
        // A config needs at least one step; `run` stops after `steps`.
        format!("train.steps={}", steps.max(1)),
    ];
    o.extend(extra.iter().map(|s| s.to_string()));
    o
}

pub struct Run {
    pub metrics: Vec<StepMetrics>,
    pub weights: Vec<f32>,
}

/// `steps` steps of the tiny config (with `extra` overrides); the update on `backend()` when given;
/// with `kill_after`, a checkpoint then a resumed trainer at that step.
pub fn run<B: Backend<T = f32> + 'static>(name: &str, steps: u64, backend: Option<&dyn Fn() -> B>, extra: &[&str], kill_after: Option<u64>) -> Run {
    let ov = overrides(steps, extra);
    let ov: Vec<&str> = ov.iter().map(String::as_str).collect();
    let cfg = crate::tiny_config(name, &ov);
    let out = cfg.output_dir.clone();
    let start = |resume: bool| {
        let t = Trainer::new(cfg.clone(), resume).unwrap();
        if let Some(backend) = backend {
            let t = t.with_update_backend(backend()).unwrap();
            assert_ne!(t.update_backend(), "cpu");
            t
        } else {
            t
        }
    };
    let mut t = start(false);
    while t.step < steps {
        t.train_step(|_| {}).unwrap();
        if Some(t.step) == kill_after {
            t.save_checkpoint().unwrap();
            drop(t);
            t = start(true);
        }
    }
    let metrics: Vec<StepMetrics> = if steps == 0 { vec![] } else { JsonlLog::read(&out.join("metrics.jsonl")).unwrap() };
    t.sync_host_weights().unwrap();
    Run { metrics, weights: host_weights(&t) }
}

pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * (1e-6 + a.abs().max(b.abs()))
}

/// Same rollouts (the trained weights agree to f32 rounding, so the samples agree), and the loss,
/// KL, gradient norm, entropy and weights within a few f32 roundings of the CPU update's.
pub fn assert_agree(cpu: &Run, dev: &Run, what: &str) {
    assert_agree_within(cpu, dev, what, 1e-4);
}

/// `assert_agree` with the weights within `weights` of each other.
pub fn assert_agree_within(cpu: &Run, dev: &Run, what: &str, weights: f32) {
    assert_eq!(cpu.metrics.len(), dev.metrics.len(), "{what}");
    for (a, b) in cpu.metrics.iter().zip(&dev.metrics) {
        assert_eq!(a.completions_kept, b.completions_kept, "{what} step {}", a.step);
        assert_eq!(a.forward_rows, b.forward_rows, "{what} step {}: forward rows", a.step);
        assert_eq!(a.loss_tokens, b.loss_tokens, "{what} step {}", a.step);
        assert_eq!(a.reward_mean, b.reward_mean, "{what} step {}", a.step);
        for (name, x, y) in [("loss", a.loss, b.loss), ("kl", a.kl, b.kl), ("grad_norm", a.grad_norm, b.grad_norm), ("entropy", a.entropy, b.entropy)] {
            assert!(x.is_finite() && y.is_finite(), "{what} step {}: {name} {x} vs {y}", a.step);
            assert!(close(x, y, 1e-3), "{what} step {}: {name} cpu {x} device {y}", a.step);
        }
    }
    assert_eq!(cpu.weights.len(), dev.weights.len());
    let worst = cpu.weights.iter().zip(&dev.weights).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst <= weights, "{what}: weights differ by up to {worst}");
}

/// The policy's host copy, every tensor flattened in name order.
pub fn host_weights(t: &Trainer) -> Vec<f32> {
    let w = t.policy.to_weights().unwrap();
    let mut names: Vec<&String> = w.tensors.keys().collect();
    names.sort();
    names.iter().flat_map(|n| w.tensors[*n].flatten_all().unwrap().to_vec1::<f32>().unwrap()).collect()
}
