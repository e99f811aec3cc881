//! The self-test on a GPU (feature `cuda`). Without a CUDA driver (this CI) only the refusal is checked:
//! a clear error, not cudarc's panic. With a GPU, every check of the suite runs there; that half has
//! never run.
#![cfg(feature = "cuda")]

use cppo_cuda::cuda::device::driver_present;

/// Without a CUDA driver the self-test is an error that says so (cudarc would panic); with one, it
/// runs and every check passes.
#[test]
fn the_selftest_without_a_driver_is_a_clear_error() {
    match cppo_conformance::selftest::run("cuda", Some(1), None, &mut |_| {}) {
        Err(e) => {
            assert!(!driver_present(), "a driver is present, yet: {e}");
            assert!(e.to_string().contains("no CUDA driver"), "{e}");
        }
        Ok(report) => {
            assert!(driver_present());
            assert_eq!(report.failed(), 0, "{report}");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test -p cppo-conformance --features cuda --test selftest -- --ignored (or `cppo selftest --device cuda`)"]
fn every_op_of_the_cuda_backend_on_a_gpu_matches_the_cpu_backend() {
    let report = cppo_conformance::selftest::run("cuda", None, None, &mut |l| eprintln!("{l}")).expect("a GPU and its driver");
    eprintln!("{report}");
    assert_eq!(report.checks.len(), cppo_conformance::CHECKS + 1, "{report}");
    assert_eq!(report.failed(), 0, "{report}");
}
