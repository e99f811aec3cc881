//! Rollouts and the update of the trainer on the CUDA backend under the emulation (`Trainer::with_update_backend`): the
//! policy, the reference and the AdamW moments in the backend's buffers, the policy, reference and
//! old-policy passes, the backward from the loss's dL/dlogp, gradient accumulation, clipping and the
//! fused AdamW kernel, for whole training steps of the trainer's tiny model, against the CPU update.

use cppo_test_support as common;

use common::device_runs::{assert_agree, assert_agree_within, run};
use cppo_cuda::backend::CudaBackend;
use cppo_kernels::cpu::Cpu;

use crate::backend::EmuSide;

fn emulated() -> CudaBackend<EmuSide> {
    CudaBackend::new(EmuSide::new())
}

#[test]
fn training_steps_with_the_update_on_the_emulated_cuda_backend_match_the_cpu() {
    // beta > 0, mu = 2, clipping and weight decay (common::device_runs::overrides).
    let cpu = run::<Cpu<f32>>("emu-train-cpu", 2, None, &[], None);
    let dev = run("emu-train-cuda", 2, Some(&emulated), &[], None);
    assert!(cpu.metrics.iter().all(|m| m.completions_kept > 0), "every step trained on something");
    assert_agree(&cpu, &dev, "emulated cuda");
}

#[test]
#[cfg_attr(not(cppo_isa_avx512bf16), ignore = "the CPU trainer rounds bf16 products only with AVX512-BF16, which this CPU lacks or CPPO_MAX_ISA caps")]
fn at_bf16_products_the_emulated_cuda_update_reads_copies_that_the_adamw_launch_keeps_current_with_avx512bf16() {
    // The update's products from the bf16 copies (`linear_half` on the device), rewritten by the one
    // AdamW launch over every tensor; the reference's matrices in bf16 only. Tolerances as in
    // cppo-train's device_update test of the same name: products summed in another order round
    // the other way now and then. Without AVX512-BF16 the CPU side would multiply in f32.
    let bf16 = ["optim.matmul_precision=\"bf16\""];
    let cpu = run::<Cpu<f32>>("emu-bf16-cpu", 1, None, &bf16, None);
    let dev = run("emu-bf16-cuda", 1, Some(&emulated), &bf16, None);
    assert_agree_within(&cpu, &dev, "emulated cuda, bf16 products", 1e-2);
    let far = cpu.weights.iter().zip(&dev.weights).filter(|(a, b)| (*a - *b).abs() > 1e-4).count();
    assert!(far * 20 < cpu.weights.len(), "{far} of {} weights differ by more than 1e-4", cpu.weights.len());
}
