//! The production CUDA path end to end on a CPU-hosted driver: the `cppo` binary built with
//! `--features cuda`, unchanged, run as a subprocess with the fake `libcuda.so.1` and
//! `libcublasLt.so.13` (crates/cppo-cuda/fake: C++ built here by the `cc` crate's compiler, the
//! kernels running under the CPU emulation, the products from cuBLASLt's documented semantics) first
//! on its library path, and the real NVRTC 13 (the `nvidia-cuda-nvrtc` wheel from PyPI, fetched once
//! into cppo's cache, or `CPPO_NVRTC_DIR`) compiling the kernels. What runs: the library probes, the
//! context, the stream, allocations, copies, module loading (cubin, and PTX where the driver refuses
//! the cubin), launches, the cuBLASLt wrapper, the self-test, the trainer with `model.device = "cuda"`,
//! `bench step --device cuda` and `scripts/gpu-check.sh --dry-run`. Timings mean nothing here.
//!
//! `cargo test -p cppo --features cuda --test fake_gpu` (CI runs it). Needs a C++ compiler and, once,
//! PyPI (or CPPO_NVRTC_DIR); assumes no real CUDA driver or cuBLASLt on the loader path (the
//! library-missing cases would find it).
#![cfg(feature = "cuda")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

use cppo_test_support::fake_cuda as build_fake;

/// The trainer tests' tiny model (saved once per test binary) and fresh output folders.
use cppo_test_support as common;

struct Fake {
    /// The fake libcuda and libcublasLt.
    libs: PathBuf,
    /// The real NVRTC's folder.
    nvrtc: PathBuf,
}

fn target() -> String {
    format!("{}-unknown-linux-gnu", std::env::consts::ARCH)
}

fn fake() -> &'static Fake {
    static FAKE: OnceLock<Fake> = OnceLock::new();
    FAKE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let libs = build_fake::fake_libraries(dir, &target(), &target()).unwrap_or_else(|e| panic!("building the fake CUDA libraries: {e}"));
        let nvrtc = cppo_cuda::nvrtc_lib::library_dir().expect("NVRTC: the nvidia-cuda-nvrtc wheel (PyPI once) or CPPO_NVRTC_DIR");
        Fake { libs, nvrtc }
    })
}

/// `cppo ARGS` on the fake GPU; `env` adds or (value None) removes variables.
fn cppo_env(args: &[&str], libs: &Path, env: &[(&str, Option<&str>)]) -> Output {
    let f = fake();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cppo"));
    cmd.args(args)
        .env("LD_LIBRARY_PATH", libs)
        .env("CPPO_NVRTC_DIR", &f.nvrtc)
        // Never fetch anything: a missing library must be an error, not a download.
        .env("CPPO_OFFLINE", "1")
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .env_remove("CPPO_CUDA_SYNC");
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.output().expect("run cppo")
}

fn cppo(args: &[&str]) -> Output {
    cppo_env(args, &fake().libs, &[])
}

fn text(o: &Output) -> String {
    format!("status {:?}\n--- stdout\n{}\n--- stderr\n{}", o.status, String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn the_selftest_passes_every_check_on_the_fake_gpu() {
    let o = cppo(&["selftest", "--device", "cuda", "--seed", "5"]);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let out = String::from_utf8_lossy(&o.stdout);
    let want = format!("{} passed, 0 failed", cppo_conformance::CHECKS + 1);
    assert_eq!(out.lines().last(), Some(want.as_str()), "{all}");
    // Each section is printed as it finishes, and the count before anything else could start.
    for section in ["-- memory", "-- linear", "-- generation engine", "-- decoder steps"] {
        assert!(out.contains(section), "{section}:\n{all}");
    }
    assert!(out.contains("cppo fake GPU"), "the device's name:\n{all}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("CUDA driver 13.0, NVRTC 13.0") && err.contains("cubins"), "the versions, once:\n{all}");
    assert_eq!(err.matches("CUDA driver 13.0").count(), 1, "{all}");
}

/// Two things a GPU machine with PyTorch but no CUDA toolkit meets: cuBLASLt only in a wheel's
/// `site-packages/nvidia/*/lib` (no loader path names it: found and opened by full path), and a driver
/// that refuses the cubins (the kernels load as PTX).
#[test]
fn cublaslt_from_a_python_wheel_and_kernels_as_ptx_where_the_driver_refuses_cubins() {
    let f = fake();
    let driver_only = common::out_dir("fake-gpu-driver-only");
    let wheel = common::out_dir("fake-gpu-site-packages");
    std::fs::create_dir_all(&driver_only).unwrap();
    std::fs::create_dir_all(wheel.join("nvidia/cublas/lib")).unwrap();
    for lib in ["libcuda.so", build_fake::DRIVER] {
        std::os::unix::fs::symlink(f.libs.join(lib), driver_only.join(lib)).unwrap();
    }
    std::os::unix::fs::symlink(f.libs.join(build_fake::BLAS_LT), wheel.join("nvidia/cublas/lib").join(build_fake::BLAS_LT)).unwrap();
    let env = [("CPPO_FAKE_CUDA_REFUSE_CUBIN", Some("1")), ("CPPO_CUDA_SYNC", Some("1")), ("PYTHONPATH", Some(wheel.to_str().unwrap()))];
    let o = cppo_env(&["selftest", "--device", "cuda", "--seed", "6"], &driver_only, &env);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("as compute_90 PTX (the driver refused the sm_90 cubin"), "{all}");
    assert!(String::from_utf8_lossy(&o.stdout).ends_with(", 0 failed\n"), "{all}");
}

/// The quickstart config (CPPO, G = 8, P = 0.75) for two steps on the tiny model, shrunk for the
/// emulation (one question a step, 2 new tokens), on the fake GPU and on the CPU: the same rollouts
/// (f32 rollout weights on both), the update's products in bf16 on both (the CPU rounds them only with
/// AVX512-BF16; elsewhere it multiplies in f32, within the same tolerance).
#[test]
fn two_quickstart_steps_on_the_fake_gpu_match_the_cpu_within_bf16_rounding() {
    let quickstart = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/quickstart.toml");
    let model = common::tiny_model_dir();
    let run = |device: &str| -> Vec<Value> {
        let out = common::out_dir(&format!("fake-gpu-quickstart-{device}"));
        let sets = [
            format!("model.path=\"{}\"", model.display()),
            format!("model.device=\"{device}\""),
            format!("output_dir=\"{}\"", out.display()),
            "train.steps=2".to_string(),
            "train.eval_before=false".to_string(),
            "data.eval_limit=1".to_string(),
            "generation.weights=\"f32\"".to_string(),
            "optim.matmul_precision=\"bf16\"".to_string(),
            // Small enough for the kernel emulation (about 100 s a step on 2 cores even so): one question
            // of G = 8 per step, 2 new tokens, P = 0.75 as the quickstart's.
            "rollout.questions_per_step=1".to_string(),
            "rollout.allocation=false".to_string(),
            "generation.max_new_tokens=2".to_string(),
            "eval.max_new_tokens=2".to_string(),
        ];
        let mut args = vec!["train", quickstart, "--quiet"];
        for s in &sets {
            args.extend(["--set", s.as_str()]);
        }
        let o = cppo(&args);
        assert!(o.status.success(), "cppo train on {device}: {}", text(&o));
        let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
        metrics.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let (gpu, cpu) = (run("cuda"), run("cpu"));
    assert_eq!(gpu.len(), 2);
    assert_eq!(cpu.len(), 2);
    for (g, c) in gpu.iter().zip(&cpu) {
        for exact in ["completions_generated", "completions_kept", "reward_mean", "loss_tokens"] {
            assert_eq!(g[exact], c[exact], "step {}: {exact}", c["step"]);
        }
        for key in ["loss", "grad_norm", "entropy"] {
            let (x, y) = (g[key].as_f64().unwrap(), c[key].as_f64().unwrap());
            assert!((x - y).abs() <= 2e-2 * (x.abs().max(y.abs()) + 1e-3), "step {}: {key} on the fake GPU {x}, on the CPU {y}", c["step"]);
        }
    }
}

#[test]
fn bench_step_runs_on_the_fake_gpu() {
    let config = std::env::temp_dir().join(format!("cppo-fake-gpu-tiny-{}.json", std::process::id()));
    std::fs::write(
        &config,
        r#"{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 32, "intermediate_size": 48,
 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 96,
 "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": true,
 "bos_token_id": 1, "eos_token_id": 2}"#,
    )
    .unwrap();
    let o = cppo(&["bench", "step", "--device", "cuda", "--random-config", config.to_str().unwrap(), "--max-new-tokens", "4", "--questions", "2", "--group", "8", "--prompt-len", "8"]);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    assert!(all.contains("CPPO / GRPO: policy phase"), "{all}");
    std::fs::remove_file(&config).ok();
}

#[test]
fn gpu_check_dry_run_passes_every_stage_on_the_fake_gpu() {
    let out = common::out_dir("fake-gpu-check");
    std::fs::create_dir_all(&out).unwrap();
    let f = fake();
    let o = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/gpu-check.sh"))
        .arg("--dry-run")
        .env("CPPO_BIN", env!("CARGO_BIN_EXE_cppo"))
        .env("OUT", &out)
        .env("LD_LIBRARY_PATH", &f.libs)
        .env("CPPO_NVRTC_DIR", &f.nvrtc)
        .output()
        .unwrap();
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    for file in ["selftest.txt", "bench.txt", "step.txt", "trainer.txt"] {
        assert!(out.join(file).is_file(), "{file} not written:\n{all}");
    }
    let selftest = std::fs::read_to_string(out.join("selftest.txt")).unwrap();
    assert!(selftest.contains(", 0 failed"), "{selftest}");
    let bench = std::fs::read_to_string(out.join("bench.txt")).unwrap();
    assert!(bench.contains("cppo tape") && bench.contains("cppo generate: {"), "{bench}");
    assert!(all.contains("stages 1 2 3: passed"), "{all}");
}

/// Each library left out in turn: one error naming it and where it was looked for, never a panic.
#[test]
fn each_missing_library_is_one_clear_error_naming_it_and_where_it_was_searched() {
    let f = fake();
    let only = |keep: &[&str], name: &str| -> PathBuf {
        let d = common::out_dir(&format!("fake-gpu-libs-{name}"));
        std::fs::create_dir_all(&d).unwrap();
        for lib in keep {
            std::os::unix::fs::symlink(f.libs.join(lib), d.join(lib)).unwrap();
        }
        d
    };
    let empty_cache = common::out_dir("fake-gpu-empty-cache");
    let cases: [(&str, PathBuf, Vec<(&str, Option<&str>)>, &str); 3] = [
        ("libcuda", only(&["libcublasLt.so", "libcublasLt.so.13"], "no-driver"), vec![], "libcuda.so"),
        ("libcublasLt", only(&["libcuda.so", "libcuda.so.1"], "no-blas"), vec![("CUDA_HOME", Some("/nowhere/cuda"))], "libcublasLt.so"),
        (
            "libnvrtc",
            f.libs.clone(),
            vec![("CPPO_NVRTC_DIR", None), ("CPPO_CACHE_DIR", Some(empty_cache.to_str().unwrap()))],
            "libnvrtc.so",
        ),
    ];
    for (what, libs, env, name) in cases {
        let o = cppo_env(&["selftest", "--device", "cuda", "--seed", "1"], &libs, &env);
        let all = text(&o);
        assert!(!o.status.success(), "without {what}: {all}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "without {what}, a panic: {all}");
        assert!(err.contains(name) && err.contains("LD_LIBRARY_PATH") && err.contains("/usr/local/cuda/lib64"), "without {what}: {all}");
        if what == "libcublasLt" {
            assert!(err.contains("/nowhere/cuda/lib64 (CUDA_HOME)"), "{all}");
        }
        // Nothing was checked: the error comes before the first check.
        assert!(!String::from_utf8_lossy(&o.stdout).contains("passed,"), "without {what}: {all}");
    }
}
