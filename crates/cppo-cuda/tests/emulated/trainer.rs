//! Rollouts and the update of the trainer on the CUDA backend under the emulation (`Trainer::with_update_backend`): the
//! policy, the reference and the AdamW moments in the backend's buffers, the policy, reference and
//! old-policy passes, the backward from the loss's dL/dlogp, gradient accumulation, clipping and the
//! fused AdamW kernel, for whole training steps of the trainer's tiny model, against the CPU update.

#[path = "../../../cppo-train/tests/common/mod.rs"]
mod common;

use common::device_runs::{assert_agree, run};
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
