//! A run moved to another backend (`Trainer::with_update_backend`): here the reference backend (plain
//! loops summing in f64) stands in for a device, so the one path (uploads, forward passes of the
//! policy, the reference and the old policy on the backend, the backward from dL/dlogp, gradient
//! accumulation, AdamW and clipping on the backend, weights copied back when the host reads them,
//! moments copied back for checkpoints) runs on two backends and the runs are compared: the CPU
//! backend's (every run's default) and the reference's.

use cppo_test_support as common;

use common::device_runs::{self, assert_agree, assert_agree_within, Run};
use cppo_kernels::reference::Reference;
use cppo_train::metrics::StepMetrics;
#[cfg(feature = "cuda")]
use cppo_train::metrics::JsonlLog;
use cppo_train::trainer::Trainer;

/// The run's own backend (the CPU's).
const CPU: Option<&dyn Fn() -> Reference<f32>> = None;

fn on_reference() -> Reference<f32> {
    Reference::new()
}

fn run(name: &str, steps: u64, on_device: bool, extra: &[&str], kill_after: Option<u64>) -> Run {
    if on_device {
        device_runs::run(name, steps, Some(&on_reference), extra, kill_after)
    } else {
        device_runs::run(name, steps, CPU, extra, kill_after)
    }
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

/// TRL's objectives and the rollout correction are loss inputs in `cppo_core`, so the device update
/// applies them as the CPU does: GSPO's sequence ratio with SAPO's gate, the entropy and off-policy
/// masks and a sequence-level correction, with CPPO pruning and mu = 2.
#[test]
fn trl_objectives_and_the_rollout_correction_on_a_backend_match_the_cpu_update() {
    let extra = [
        "loss.loss_type=\"sapo\"",
        "loss.importance_sampling_level=\"sequence\"",
        "loss.top_entropy_quantile=0.5",
        // Below any drift: every negative-advantage completion is dropped, far from the threshold.
        "loss.off_policy_mask_threshold=-0.5",
        "loss.rollout_correction=\"sequence_truncate\"",
    ];
    let cpu = run("dev-obj-cpu", 2, false, &extra, None);
    let dev = run("dev-obj-ref", 2, true, &extra, None);
    assert!(cpu.metrics.iter().all(|m| m.mismatch.ratio_mean > 0.0), "the correction ran: {:?}", cpu.metrics[0].mismatch);
    assert!(cpu.metrics.iter().any(|m| m.mismatch.policy_masked_fraction > 0.0), "the entropy mask took tokens out");
    assert_agree(&cpu, &dev, "sapo, sequence level, masks, rollout correction");
    for (a, b) in cpu.metrics.iter().zip(&dev.metrics) {
        assert!((a.mismatch.ratio_mean - b.mismatch.ratio_mean).abs() < 1e-3, "{:?} vs {:?}", a.mismatch, b.mismatch);
    }
}

#[test]
fn the_host_copy_is_refreshed_when_the_host_reads_it_not_after_every_step() {
    let ov = device_runs::overrides(2, &[]);
    let ov: Vec<&str> = ov.iter().map(String::as_str).collect();
    let mut t = Trainer::new(common::tiny_config("dev-lazy", &ov), false).unwrap().with_update_backend(on_reference()).unwrap();
    let before = device_runs::host_weights(&t);
    t.train_step(|_| {}).unwrap();
    t.train_step(|_| {}).unwrap();
    assert_eq!(device_runs::host_weights(&t), before, "the weights were copied back without being read");
    t.sync_host_weights().unwrap();
    let after = device_runs::host_weights(&t);
    assert_ne!(after, before);
    assert_eq!(after, run("dev-lazy-run", 2, true, &[], None).weights, "the copy is the trained weights");
}

#[test]
fn evaluation_on_the_device_reads_the_trained_weights_there_and_grades_as_on_the_cpu() {
    // Two device steps, then evaluate on the device (host copy stale); then the same weights on the
    // host, evaluated on the CPU: the same generations (eval writes them) and the same summary.
    let ov = device_runs::overrides(2, &["eval.samples=2", "eval.temperature=1.0"]);
    let ov: Vec<&str> = ov.iter().map(String::as_str).collect();
    let mut t = Trainer::new(common::tiny_config("dev-eval", &ov), false).unwrap().with_update_backend(on_reference()).unwrap();
    let before = device_runs::host_weights(&t);
    t.train_step(|_| {}).unwrap();
    t.train_step(|_| {}).unwrap();
    let on_device = t.evaluate().unwrap().expect("the tiny config has held-out problems");
    assert_eq!(device_runs::host_weights(&t), before, "evaluation on the device needs no host copy");
    let records = std::fs::read_to_string(t.out.join("evals/step-000002.jsonl")).unwrap();
    t.sync_host_weights().unwrap();
    let cpu = cppo_kernels::cpu::Cpu::<f32>::new();
    let mut on_cpu = |req: &cppo_train::rollout::RolloutRequest, params: &cppo_engine::SamplingParams, opts: cppo_train::rollout::GenerateOptions| {
        Ok(cppo_train::rollout::generate_from(&t.policy, &cpu, &t.tokenizer, req, params, opts, |_| {})?.0)
    };
    let host = cppo_train::eval::evaluate(&mut on_cpu, &t.tokenizer, &t.prompter, &t.rewards, &t.eval_problems, &t.eval_settings(), t.step).unwrap();
    let strip = |s: &cppo_train::eval::EvalSummary| cppo_train::eval::EvalSummary { seconds: 0.0, ..s.clone() };
    assert_eq!(strip(&on_device), strip(&host.0));
    let host_records: String = host.1.iter().map(|r| serde_json::to_string(r).unwrap() + "\n").collect();
    assert_eq!(records, host_records);
    assert_eq!(on_device.problems * on_device.samples, host.1.iter().map(|r| r.generations.len()).sum::<usize>());
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
    let ov = device_runs::overrides(2, &["model.device=\"cuda\""]);
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
    t.sync_host_weights().unwrap();
    assert_agree(&cpu, &Run { metrics: dev_metrics, weights: device_runs::host_weights(&t) }, "cuda");
}

#[test]
#[cfg_attr(not(cppo_isa_avx512bf16), ignore = "the CPU trainer rounds bf16 products only with AVX512-BF16, which this CPU lacks or CPPO_MAX_ISA caps")]
fn at_bf16_products_the_update_from_bf16_copies_matches_the_cpu_with_avx512bf16() {
    // bf16 products in the update (rollouts stay f32, so both sides sample the same completions):
    // the device keeps bf16 copies of the policy's matrices, rewritten by the AdamW step, and the
    // frozen reference's matrices in bf16 only; the CPU rounds its f32 weights at every product
    // (without AVX512-BF16 it would multiply in f32: nothing to agree with).
    let bf16 = ["optim.matmul_precision=\"bf16\""];
    let cpu = run("dev-bf16-cpu", 3, false, &bf16, None);
    let dev = run("dev-bf16-ref", 3, true, &bf16, None);
    assert!(cpu.metrics.iter().any(|m| m.kl != 0.0), "the reference pass ran");
    // The two sides sum bf16 products in different orders (f32 here, f64 on the reference backend),
    // so now and then a product rounds the other way and a tiny gradient changes sign; Adam moves a
    // weight by about lr whatever its gradient's size, so those few weights differ by up to lr
    // (1e-2). Over 95% agree as closely as at f32 products (about 98% do here).
    assert_agree_within(&cpu, &dev, "bf16 products", 1e-2);
    let far = cpu.weights.iter().zip(&dev.weights).filter(|(a, b)| (*a - *b).abs() > 1e-4).count();
    assert!(far * 20 < cpu.weights.len(), "{far} of {} weights differ by more than 1e-4", cpu.weights.len());
}

#[test]
fn at_bf16_products_adamw_keeps_the_bf16_copies_current() {
    // With bf16 rollouts too, the engine samples from the same copies and hands them back.
    let ov = device_runs::overrides(2, &["optim.matmul_precision=\"bf16\"", "generation.weights=\"bf16\""]);
    let ov: Vec<&str> = ov.iter().map(String::as_str).collect();
    let mut t = Trainer::new(common::tiny_config("dev-bf16-copies", &ov), false).unwrap().with_update_backend(on_reference()).unwrap();
    let copies = t.device_state().stale_bf16_copies().1;
    assert!(copies > 0, "no bf16 copies kept");
    for _ in 0..2 {
        t.train_step(|_| {}).unwrap();
        assert_eq!(t.device_state().stale_bf16_copies(), (0, copies), "a copy lags its weights after step {}", t.step);
    }
}

#[test]
fn lora_at_bf16_products_on_a_backend_keeps_its_base_in_bf16_and_matches_the_cpu() {
    // The base held in bf16 is uploaded as bf16 (no f32 buffer) and read as it is; the only copy of
    // an f32 weight is the output projection's, which never changes; the adapters train in f32.
    let lora = ["lora.r=2", "lora.alpha=4", "lora.target_modules=\"all-linear\"", "optim.lr=5e-2", "optim.matmul_precision=\"bf16\""];
    let cpu = run("dev-lora-bf16-cpu", 2, false, &lora, None);
    let dev = run("dev-lora-bf16-ref", 2, true, &lora, None);
    // As at bf16 products without LoRA: summation orders differ, so a few roundings do.
    assert_agree_within(&cpu, &dev, "lora, bf16 products", 5e-2);
    let ov = device_runs::overrides(1, &lora);
    let ov: Vec<&str> = ov.iter().map(String::as_str).collect();
    let mut t = Trainer::new(common::tiny_config("dev-lora-bf16-copies", &ov), false).unwrap().with_update_backend(on_reference()).unwrap();
    t.train_step(|_| {}).unwrap();
    assert_eq!(t.device_state().stale_bf16_copies(), (0, 1), "only the output projection's copy follows an f32 weight");
}
