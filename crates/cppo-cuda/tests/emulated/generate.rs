//! The generation engine on the CUDA backend under the emulation (`cppo_engine::DecoderBackend`:
//! weights, KV cache, every layer's op and the sampling kernel on the backend)
//! against the engine on the CPU decoder: the same tokens and finish reasons, greedily and with seeded
//! temperature / top-p / top-k sampling, several prompts of different lengths with several samples each
//! (one prefill, copied rows), fewer rows than samples (slots refilled), and log-probs within f32
//! rounding; with the device's bf16 copies of the matrices against the CPU's bf16 snapshot too.

use candle_core::Device;
use cppo_cuda::backend::CudaBackend;
use cppo_engine::agreement::engines_agree;
use cppo_engine::{EngineOptions, Request, SamplingParams};
use cppo_io::{Architecture, ModelConfig};
use cppo_kernels::Precision;
use cppo_model::decoder::{random_weights, RandomInit};
use cppo_model::Decoder;

use crate::backend::EmuSide;

/// Odd widths and grouped-query attention (6 heads over 2 kv heads).
fn config(arch: Architecture, tied: bool) -> ModelConfig {
    ModelConfig {
        vocab_size: 67,
        hidden_size: 36,
        intermediate_size: 50,
        num_attention_heads: 6,
        num_key_value_heads: 2,
        head_dim: 6,
        tie_word_embeddings: tied,
        eos_token_ids: vec![2],
        ..ModelConfig::tiny(arch)
    }
}

fn decoder(cfg: &ModelConfig, seed: u64) -> Decoder {
    // Matrices wide enough that next-token distributions are far from uniform (no near-ties).
    let w = random_weights(cfg, seed, &RandomInit { std: 0.25, norm_jitter: 0.3, bias_std: 0.2 }).unwrap();
    Decoder::new(cfg, &w, false, &Device::Cpu).unwrap()
}

/// Three prompts of 3, 6 and 1 tokens, 6 samples decoded 4 rows at a time.
fn requests() -> Vec<Request> {
    vec![Request { prompt: vec![5, 9, 13], n: 3 }, Request { prompt: vec![7, 1, 30, 2, 44, 60], n: 2 }, Request { prompt: vec![3], n: 1 }]
}

fn options() -> EngineOptions {
    EngineOptions { max_batch: 4, eos: vec![2], seed: 3 }
}

/// f32 products on both sides: sums in another order (the emulated products sum in f32 on the host,
/// attention and norms in our kernels' order), differences of a few 1e-6 in log-probs; a wrong row,
/// position or cache entry moves them by 1e-2 and more.
const F32_TOL: f32 = 1e-4;
/// bf16 operands on both sides: the same roundings, but an activation an f32 rounding apart may round to
/// a neighbouring bf16 value (a relative 2^-8) and the difference runs through two layers.
const BF16_TOL: f32 = 5e-2;

#[test]
fn the_engine_on_the_emulated_cuda_backend_gives_the_cpu_decoders_completions() {
    let b = CudaBackend::new(EmuSide::new());
    let sampled = SamplingParams { temperature: 0.9, top_p: 0.85, top_k: 5, max_new_tokens: 5, ..Default::default() };
    // Each case is a few seconds under the emulation (one OS thread per GPU thread of every launch).
    let cases = [
        (Architecture::Qwen2, false, Precision::F32, SamplingParams::greedy(5)),
        (Architecture::Llama, true, Precision::F32, sampled),
        (Architecture::Qwen3, false, Precision::Bf16, SamplingParams::greedy(5)),
    ];
    let mut failures = Vec::new();
    for (arch, tied, precision, params) in cases {
        let t = std::time::Instant::now();
        let dec = decoder(&config(arch, tied), 17);
        let a = engines_agree(&dec, &b, precision, &requests(), &params, &options()).unwrap();
        let tol = if precision == Precision::F32 { F32_TOL } else { BF16_TOL };
        let what = format!("{arch:?} tied = {tied}, {} products, temperature {}", precision.name(), params.temperature);
        eprintln!("{} {what}: {a} ({:.1} s)", if a.holds(tol) { "ok  " } else { "FAIL" }, t.elapsed().as_secs_f64());
        assert_eq!(a.completions, 6);
        if !a.holds(tol) {
            failures.push(what);
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

#[test]
fn the_generation_bench_runs_every_row_to_its_length_and_skips_what_the_budget_leaves_out() {
    use cppo_conformance::gen_bench::{run, GenShape};
    let cfg = ModelConfig::tiny(Architecture::Qwen2);
    let dec = Decoder::new(&cfg, &random_weights(&cfg, 9, &RandomInit::default()).unwrap(), false, &Device::Cpu).unwrap();
    let b = CudaBackend::new(EmuSide::new());
    let shapes = [GenShape { batch: 1, prompt_len: 3, new_tokens: 4 }, GenShape { batch: 3, prompt_len: 2, new_tokens: 3 }];
    let runs = run(&b, &dec, &shapes, 5, 1e9).unwrap();
    assert_eq!(runs.len(), 2);
    for (r, s) in runs.iter().zip(&shapes) {
        let r = r.as_ref().unwrap();
        // The random model's end-of-sequence token does not end a bench row.
        assert_eq!(r.tokens, s.batch * s.new_tokens, "{r}");
        assert!(r.seconds > 0.0 && r.decode_s > 0.0 && r.prefill_s > 0.0 && r.seconds >= r.decode_s, "{r}");
        assert!(r.to_string().starts_with("cppo generate: {\"batch\": ") && r.json().contains("\"tokens_per_s\": "), "{r}");
    }
    let none = run(&b, &dec, &shapes, 5, 0.0).unwrap();
    assert!(none.iter().all(|r| r.as_ref().is_err_and(|e| e.contains("skipped"))), "{none:?}");
}

/// Rollouts from bf16 weights keep their keys and values in bf16 on the device: half the bytes, and
/// logits (prefill, then decode steps of copied rows) that differ from an f32 cache's by the rounding
/// of keys and values to bf16: not at all would mean the f32 path ran, a lot a wrong entry.
#[test]
fn rollouts_keep_a_bf16_kv_cache_that_reads_what_was_written_rounded() {
    use cppo_kernels::backend::Backend as _;
    let b = CudaBackend::new(EmuSide::new());
    let dec = decoder(&config(Architecture::Qwen2, false), 5);
    let w = dec.upload_weights(&b).unwrap();
    let (mut c16, mut c32) = (dec.new_device_cache_bf16(&b, 3, 10).unwrap(), dec.new_device_cache(&b, 3, 10).unwrap());
    assert!(c16.is_bf16() && !c32.is_bf16());
    assert_eq!(2 * c16.bytes(), c32.bytes());
    let prompt = [5u32, 9, 13, 40, 22];
    let mut pairs = vec![(dec.prefill_on(&b, &w, None, &prompt, &mut c16, 0).unwrap(), dec.prefill_on(&b, &w, None, &prompt, &mut c32, 0).unwrap())];
    dec.copy_row_on(&b, &mut c16, 0, &[2]).unwrap();
    dec.copy_row_on(&b, &mut c32, 0, &[2]).unwrap();
    for step in 0..3u32 {
        let (toks, rows) = ([7 + step, 30 - step], [2, 0]);
        pairs.push((dec.decode_on(&b, &w, None, &toks, &rows, &mut c16).unwrap(), dec.decode_on(&b, &w, None, &toks, &rows, &mut c32).unwrap()));
    }
    assert_eq!(c16.lens(), c32.lens());
    for (i, (h, f)) in pairs.iter().enumerate() {
        let (h, f) = (b.download(b.view(h)), b.download(b.view(f)));
        let scale = f.iter().fold(0f32, |m, x| m.max(x.abs()));
        let diff = h.iter().zip(&f).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(diff > 0.0 && diff <= 2e-2 * scale, "call {i}: |bf16 cache - f32 cache| = {diff} of logits up to {scale}");
    }
}
