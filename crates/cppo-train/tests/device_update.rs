//! The update on a device backend (`Trainer::with_update_backend`): here the reference backend (plain
//! loops summing in f64) stands in for a device, so the whole device path (uploads, forward passes of
//! the policy, the reference and the old policy on the backend, the backward from dL/dlogp, gradient
//! accumulation, AdamW and clipping on the backend, weights copied back for the rollouts, moments
//! copied back for checkpoints) runs here and is compared with the CPU update.

mod common;

use cppo_kernels::reference::Reference;
use cppo_train::metrics::{JsonlLog, StepMetrics};
use cppo_train::trainer::Trainer;

fn overrides(steps: u64, extra: &[&str]) -> Vec<String> {
    let mut o = vec![
        // Exact products on both sides: the comparison is then between summation orders only.
        "optim.matmul_precision=\"f32\"".to_string(),
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

struct Run {
    metrics: Vec<StepMetrics>,
    weights: Vec<f32>,
}

fn run(name: &str, steps: u64, on_device: bool, extra: &[&str], kill_after: Option<u64>) -> Run {
    let ov = overrides(steps, extra);
    let ov: Vec<&str> = ov.iter().map(String::as_str).collect();
    let cfg = common::tiny_config(name, &ov);
    let out = cfg.output_dir.clone();
    let start = |resume: bool| {
        let t = Trainer::new(cfg.clone(), resume).unwrap();
        if on_device {
            let t = t.with_update_backend(Reference::<f32>::new()).unwrap();
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
    let w = t.policy.to_weights().unwrap();
    let mut names: Vec<&String> = w.tensors.keys().collect();
    names.sort();
    let weights = names.iter().flat_map(|n| w.tensors[*n].flatten_all().unwrap().to_vec1::<f32>().unwrap()).collect();
    Run { metrics, weights }
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * (1e-6 + a.abs().max(b.abs()))
}

/// Same rollouts (the trained weights agree to f32 rounding, so the samples agree), and the loss,
/// KL, gradient norm, entropy and weights within a few f32 roundings of the CPU update's.
fn assert_agree(cpu: &Run, dev: &Run, what: &str) {
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
    assert!(worst <= 1e-4, "{what}: weights differ by up to {worst}");
}

#[test]
fn the_update_on_a_backend_matches_the_cpu_update() {
    // beta > 0 (reference passes), mu = 2 (old-policy passes), clipping and weight decay.
    let cpu = run("dev-cpu", 3, false, &[], None);
    let dev = run("dev-ref", 3, true, &[], None);
    assert!(cpu.metrics.iter().any(|m| m.kl != 0.0), "the reference pass ran");
    assert!(cpu.metrics.iter().any(|m| m.grad_norm > 0.5), "clipping was exercised");
    assert_agree(&cpu, &dev, "beta 0.04, mu 2");
    // The weights moved: a device update that did nothing (or was never copied back) fails here.
    let init = run("dev-init", 0, true, &[], None);
    let moved = init.weights.iter().zip(&dev.weights).filter(|(a, b)| a != b).count();
    assert!(moved > dev.weights.len() / 2, "only {moved} of {} weights changed", dev.weights.len());
}

#[test]
fn lora_updates_on_a_backend_match_the_cpu() {
    // The base held in bf16 (widened on the device), adapters with dropout (the masks the tape recomputes).
    let lora = ["lora.r=2", "lora.alpha=4", "lora.target_modules=\"all-linear\"", "lora.dropout=0.1", "optim.lr=5e-2"];
    let cpu = run("dev-lora-cpu", 2, false, &lora, None);
    let dev = run("dev-lora-ref", 2, true, &lora, None);
    assert_agree(&cpu, &dev, "lora");
}

#[test]
fn a_device_run_resumed_from_its_checkpoint_matches_the_uninterrupted_one() {
    // The moments come back from the device into the checkpoint and go up again on resume.
    let straight = run("dev-straight", 4, true, &[], None);
    let resumed = run("dev-resumed", 4, true, &[], Some(2));
    let strip = |m: &StepMetrics| {
        let mut m = m.clone();
        m.time = Default::default();
        serde_json::to_string(&m).unwrap()
    };
    assert_eq!(straight.metrics.iter().map(strip).collect::<Vec<_>>(), resumed.metrics.iter().map(strip).collect::<Vec<_>>());
    assert_eq!(straight.weights, resumed.weights);
}

/// `model.device = "cuda"` in a build with the `cuda` feature (`cargo test -p cppo-train --features cuda
/// --test device_update`, which .ci/run runs): on a machine without a CUDA driver the trainer refuses
/// with an error naming the key and the missing driver; with one, the update runs on the GPU and
/// agrees with the CPU update.
#[cfg(feature = "cuda")]
#[test]
fn cuda_trains_on_a_gpu_or_says_plainly_that_there_is_none() {
    let ov = overrides(2, &["model.device=\"cuda\""]);
    let ov: Vec<&str> = ov.iter().map(String::as_str).collect();
    let cfg = common::tiny_config("dev-cuda", &ov);
    if !cppo_cuda::cuda::device::driver_present() {
        let e = format!("{:#}", Trainer::new(cfg, false).err().expect("no driver: an error, not a trainer"));
        assert!(e.contains("model.device = \"cuda\"") && e.to_lowercase().contains("driver"), "{e}");
        return;
    }
    let mut t = Trainer::new(cfg.clone(), false).unwrap();
    assert!(t.update_backend().contains("cuda"), "{}", t.update_backend());
    while t.step < 2 {
        t.train_step(|_| {}).unwrap();
    }
    let dev_metrics: Vec<StepMetrics> = JsonlLog::read(&cfg.output_dir.join("metrics.jsonl")).unwrap();
    let cpu = run("dev-cuda-cpu", 2, false, &[], None);
    let w = t.policy.to_weights().unwrap();
    let mut names: Vec<&String> = w.tensors.keys().collect();
    names.sort();
    let weights = names.iter().flat_map(|n| w.tensors[*n].flatten_all().unwrap().to_vec1::<f32>().unwrap()).collect();
    assert_agree(&cpu, &Run { metrics: dev_metrics, weights }, "cuda");
}
