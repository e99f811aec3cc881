//! `cppo selftest --device cuda` (feature `cuda`): every operation of the CUDA backend against the CPU
//! backend on fresh random inputs (this crate's suite, the generation engine included), on a real GPU. Written and built without one: it has never
//! run on a GPU.

use std::path::Path;

use cppo_cuda::backend::CudaBackend;
use cppo_cuda::cuda::{ordinal, CudaSide};
use cppo_cuda::Result;

use crate::gen_bench::{self, GenShape};
use crate::tape_bench::{self, Shape};
use crate::Report;

/// The timed update of `--bench`: one question of G = 8 completions of 256 tokens after a 256-token
/// prompt, two timed updates after a warm-up (within a minute on one H100-class GPU, by estimate).
pub const BENCH_SHAPE: Shape = Shape { group: 8, prompt_len: 256, new_tokens: 256, repeats: 2 };

/// The timed generation of `--bench`: batch 1, 64 and 256 of 64-token prompts and 128 new tokens each,
/// the shapes `scripts/gpu_bench_torch.py` gives transformers `generate`.
pub const GEN_SHAPES: [GenShape; 3] = [
    GenShape { batch: 1, prompt_len: 64, new_tokens: 128 },
    GenShape { batch: 64, prompt_len: 64, new_tokens: 128 },
    GenShape { batch: 256, prompt_len: 64, new_tokens: 128 },
];

/// Seconds the generation runs may start within (a shape reached later is reported as skipped).
pub const GEN_BUDGET_S: f64 = 90.0;

/// The shapes `--bench` times.
pub struct BenchShapes {
    pub update: Shape,
    pub generate: Vec<GenShape>,
}

impl BenchShapes {
    /// `BENCH_SHAPE` and `GEN_SHAPES`: the figures compared with PyTorch's.
    pub fn full() -> Self {
        BenchShapes { update: BENCH_SHAPE, generate: GEN_SHAPES.to_vec() }
    }

    /// A few tokens each: proves the benches' path where timings mean nothing (a dry run, a fake GPU).
    pub fn tiny() -> Self {
        BenchShapes {
            update: Shape { group: 2, prompt_len: 8, new_tokens: 4, repeats: 1 },
            generate: vec![GenShape { batch: 1, prompt_len: 8, new_tokens: 4 }, GenShape { batch: 2, prompt_len: 8, new_tokens: 4 }],
        }
    }
}

/// Runs the suite on `device` with `seed` (fresh when `None`; the report prints it), then, given a
/// model's `config.json`, times the decoder's update (`tape_bench`) and the generation engine
/// (`gen_bench`) on a random model of that shape, figures in the report's notes. Without a CUDA
/// driver, or without that device, an error (not a panic).
///
/// `say` gets every line as soon as it is known: the header, each section's checks as the section
/// finishes, the count before any bench starts, then each bench's line. A bench that fails or panics
/// is one line; the others still run. A time-out or a crash keeps what was said.
pub fn run(device: &str, seed: Option<u64>, bench: Option<(&Path, &BenchShapes)>, say: &mut dyn FnMut(&str)) -> Result<Report> {
    let ordinal = ordinal(device)?;
    let side = CudaSide::new(ordinal)?;
    let label = format!("cuda:{ordinal} ({}, {})", side.device().name, side.device().arch);
    let seed = seed.unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1));
    let backend = CudaBackend::new(side);
    say(&Report { backend: label.clone(), seed, ..Report::default() }.header());
    let mut report = crate::run_with(&backend, seed, &mut |section, checks| {
        say(&format!("-- {section}"));
        for c in checks {
            say(&c.to_string());
        }
    });
    report.backend = label;
    // A fault of an asynchronous launch that no later read waited for shows here.
    let synced = backend.device().synchronize();
    report.record("the stream finishes without a fault", synced.is_ok(), synced.err().map_or_else(String::new, |e| e.to_string()));
    say(&report.checks.last().expect("just recorded").to_string());
    say(&report.count());
    if let Some((config, shapes)) = bench {
        let mut note = |report: &mut Report, line: String| {
            say(&line);
            report.notes.push(line);
        };
        match guarded(|| bench_model(config, seed)) {
            Ok(dec) => {
                let line = match guarded(|| tape_bench::run(&backend, &dec, shapes.update, seed).map_err(|e| e.to_string())) {
                    Ok(r) => format!("{r} (bf16 products; attention in f32)"),
                    Err(e) => format!("cppo tape bench on {}: failed: {e}", config.display()),
                };
                note(&mut report, line);
                match guarded(|| gen_bench::run(&backend, &dec, &shapes.generate, seed, GEN_BUDGET_S).map_err(|e| format!("{e:#}"))) {
                    Ok(runs) => {
                        for r in runs {
                            note(&mut report, match r {
                                Ok(r) => format!("{r} (bf16 weights, KV cache and sampling on the device)"),
                                Err(e) => format!("cppo generate: {e}"),
                            });
                        }
                    }
                    Err(e) => note(&mut report, format!("cppo generate on {}: failed: {e}", config.display())),
                }
            }
            Err(e) => note(&mut report, format!("cppo benches on {}: failed: {e}", config.display())),
        }
    }
    Ok(report)
}

/// `f`'s result, a panic turned into its message.
fn guarded<T>(f: impl FnOnce() -> std::result::Result<T, String>) -> std::result::Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|e| Err(format!("panicked: {}", crate::panic_message(e.as_ref()))))
}

/// A random model with `config`'s shapes, every weight trainable (a full fine-tune: the update bench
/// computes and applies every weight's gradient, as PyTorch's side does), products in bf16 operands
/// and f32 sums (the trainer's default on a GPU and PyTorch's autocast).
fn bench_model(config: &Path, seed: u64) -> std::result::Result<cppo_model::Decoder, String> {
    let text = std::fs::read_to_string(config).map_err(|e| format!("{}: {e}", config.display()))?;
    let cfg = cppo_io::hf::parse_config_json(&text, config).map_err(|e| e.to_string())?;
    let init = cppo_model::decoder::RandomInit::default();
    let w = cppo_model::decoder::random_weights(&cfg, seed, &init).map_err(|e| e.to_string())?;
    let dec = cppo_model::Decoder::new(&cfg, &w, true, &candle_core::Device::Cpu).map_err(|e| e.to_string())?.with_matmul_precision(cppo_kernels::Precision::Bf16);
    Ok(dec)
}
