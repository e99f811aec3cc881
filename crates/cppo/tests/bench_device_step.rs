//! `cppo bench step --device`'s harness on the reference backend standing in for a GPU: one step's
//! rollouts on the device, then GRPO's and CPPO's update on the same rollouts, each phase timed, and
//! CPPO's update given only the kept completions.

use cppo::commands::bench_device::{bench_device_step, DeviceStepShape};
use cppo_io::{Architecture, ModelConfig};
use cppo_kernels::reference::Reference;

#[test]
fn a_device_step_times_grpo_and_cppo_on_the_same_rollouts() {
    let cfg = ModelConfig::tiny(Architecture::Qwen2);
    let shape = DeviceStepShape { questions: 3, group: 8, prompt_len: 5, max_new_tokens: 4, max_batch: 10, pruning_rate: 0.75 };
    let r = bench_device_step(Reference::<f32>::new(), &cfg, &shape).unwrap();
    // No end of sequence: every completion runs to its length.
    assert_eq!(r.generated_tokens, 3 * 8 * 4);
    assert_eq!((r.grpo.completions_kept, r.grpo.loss_tokens), (24, 24 * 4));
    // floor(G (1 - P)) = 2 kept per question.
    assert_eq!((r.cppo.completions_kept, r.cppo.loss_tokens), (6, 6 * 4));
    for a in [&r.grpo, &r.cppo] {
        assert!(a.reference > 0.0 && a.policy > 0.0 && a.optimizer > 0.0, "{a:?}");
        assert!(a.update >= a.reference + a.policy, "{a:?}");
    }
    assert!(r.generation > 0.0 && r.policy_ratio().is_finite());
    let table = r.table();
    assert!(table.contains("| grpo | 24 | 96 |") && table.contains("| cppo P=0.75 | 6 | 24 |"), "{table}");
    assert!(table.contains("CPPO / GRPO: policy phase"), "{table}");
}

/// The command line: `--device` needs `--random-config`, and a build without CUDA says how to get one.
#[cfg(not(feature = "cuda"))]
#[test]
fn the_device_step_command_explains_what_it_needs() {
    let run = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_cppo")).args(args).output().unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let e = run(&["bench", "step", "--device", "cuda"]);
    assert!(e.contains("--random-config"), "{e}");
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/models/qwen2.5-1.5b-instruct.json");
    let e = run(&["bench", "step", "--device", "cuda", "--random-config", config, "--max-new-tokens", "512"]);
    assert!(e.contains("built without CUDA") && e.contains("--features cuda"), "{e}");
}
