//! The engine over a decoder on a kernel backend brought by the caller (`DecoderBackend`: the
//! weights and the KV cache in that backend's memory) gives the completions of the engine over the
//! CPU decoder. Checked here on the reference backend (plain loops summing in f64); the CUDA backend
//! runs the same comparison under its emulation (cppo-cuda's emulated tests) and in `cppo selftest`.

use candle_core::Device;
use cppo_engine::agreement::{compare, engines_agree};
use cppo_engine::{generate, Completion, DecoderBackend, EngineOptions, Finish, Request, SamplingParams};
use cppo_io::{Architecture, ModelConfig};
use cppo_kernels::reference::Reference;
use cppo_kernels::Precision;
use cppo_model::decoder::{random_weights, RandomInit};
use cppo_model::Decoder;

/// Odd widths, grouped-query attention (6 heads over 2 kv heads), tied or untied output projection.
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
    // Matrices wide enough that the next-token distribution is far from uniform (no near-ties).
    let w = random_weights(cfg, seed, &RandomInit { std: 0.25, norm_jitter: 0.3, bias_std: 0.2 }).unwrap();
    Decoder::new(cfg, &w, false, &Device::Cpu).unwrap()
}

/// Four prompts of different lengths, 10 samples in all, decoded 4 rows at a time, so prompts are
/// shared by their samples (copy_row) and finished rows' slots are refilled.
fn requests() -> Vec<Request> {
    vec![
        Request { prompt: vec![5, 9, 13], n: 3 },
        Request { prompt: vec![7, 1, 30, 2, 44, 60, 11], n: 2 },
        Request { prompt: vec![3], n: 1 },
        Request { prompt: vec![12, 50, 8, 8, 21], n: 4 },
    ]
}

fn options() -> EngineOptions {
    EngineOptions { max_batch: 4, eos: vec![2], seed: 11 }
}

fn sampled() -> Vec<SamplingParams> {
    vec![
        SamplingParams::greedy(9),
        SamplingParams { temperature: 0.9, top_p: 0.85, top_k: 0, max_new_tokens: 9, ..Default::default() },
        SamplingParams { temperature: 1.3, top_p: 1.0, top_k: 5, max_new_tokens: 7, ..Default::default() },
        // min_p and the repetition penalty (the prompts repeat tokens, so the penalty bites).
        SamplingParams { temperature: 1.1, min_p: 0.08, repetition_penalty: 1.4, max_new_tokens: 8, ..Default::default() },
        SamplingParams { repetition_penalty: 0.7, ..SamplingParams::greedy(8) },
    ]
}

/// f32 log-probs: the reference sums in f64, the CPU in f32 in another order, through two layers
/// and a log-softmax over 67 logits of magnitude a few units: differences of a few 1e-6; 1e-4 leaves
/// room and still fails any wrong position, row or cache entry (those move log-probs by 1e-2 and more).
const TOL: f32 = 1e-4;

#[test]
fn the_engine_on_the_reference_backend_gives_the_cpu_decoders_completions() {
    let b = Reference::<f32>::new();
    for (arch, tied) in [(Architecture::Qwen2, false), (Architecture::Llama, true), (Architecture::Qwen3, false)] {
        let dec = decoder(&config(arch, tied), 21);
        for params in sampled() {
            let a = engines_agree(&dec, &b, Precision::F32, &requests(), &params, &options()).unwrap();
            assert_eq!(a.completions, 10);
            assert!(a.holds(TOL), "{arch:?} tied = {tied}, {params:?}: {a}");
        }
    }
}

/// The engine's scheduling reached every path the test means to cover: several samples per prompt,
/// more samples than rows, completions of different lengths (an early EOS frees a slot).
#[test]
fn the_comparison_covers_shared_prompts_refilled_slots_and_early_ends() {
    let b = Reference::<f32>::new();
    let dec = decoder(&config(Architecture::Qwen2, false), 21);
    let dev = DecoderBackend::new(&dec, &b, Precision::F32).unwrap();
    let mut lens = std::collections::BTreeSet::new();
    let mut finishes = std::collections::BTreeSet::new();
    for params in sampled() {
        let (out, stats) = generate(&dev, &requests(), &params, &options(), &|_: &[u32]| String::new(), |_| {}).unwrap();
        assert_eq!(stats.prompt_tokens, 3 + 7 + 1 + 5, "one prefill per prompt");
        for c in out.iter().flatten() {
            lens.insert(c.tokens.len());
            finishes.insert(format!("{:?}", c.finish));
        }
    }
    assert!(lens.len() > 1 && finishes.contains("Eos") && finishes.contains("Length"), "{lens:?} {finishes:?}");
}

/// A bf16 copy of the matrices made on the backend gives what the CPU's bf16 snapshot gives: the same
/// tokens greedily, log-probs within bf16 rounding (operands rounded to 8 bits of mantissa: 1e-2).
#[test]
fn with_bf16_rollout_weights_the_reference_backend_follows_the_cpu_snapshot() {
    // Rounding bf16 products' inputs as a device does (and as the CPU's snapshot does where it can).
    let b = Reference::<f32>::rounding_bf16();
    let dec = decoder(&config(Architecture::Qwen2, true), 5);
    let a = engines_agree(&dec, &b, Precision::Bf16, &requests(), &SamplingParams::greedy(8), &options()).unwrap();
    assert!(a.holds(5e-2), "{a}");
    // And it did read the bf16 copies: against the f32 CPU run the log-probs move by more than f32 rounding.
    let dev = DecoderBackend::new(&dec, &b, Precision::Bf16).unwrap();
    let host = cppo_kernels::cpu::Cpu::<f32>::new();
    let cpu = DecoderBackend::new(&dec, &host, Precision::F32).unwrap();
    let text = |_: &[u32]| String::new();
    let (x, _) = generate(&dev, &requests(), &SamplingParams::greedy(8), &options(), &text, |_| {}).unwrap();
    let (y, _) = generate(&cpu, &requests(), &SamplingParams::greedy(8), &options(), &text, |_| {}).unwrap();
    assert!(compare(&x, &y).max_logprob_diff > TOL, "{}", compare(&x, &y));
}

/// The comparison itself fails on a different token, a different finish and a NaN log-prob.
#[test]
fn the_comparison_catches_a_different_token_finish_or_nan() {
    let c = |tokens: Vec<u32>, logprobs: Vec<f32>, finish| Completion { tokens, logprobs, finish };
    let base = vec![vec![c(vec![4, 5, 2], vec![-0.5, -1.0, -0.1], Finish::Eos)]];
    assert!(compare(&base, &base).holds(0.0));
    let other = vec![vec![c(vec![4, 6, 2], vec![-0.5, -1.0, -0.1], Finish::Eos)]];
    let a = compare(&other, &base);
    assert!(!a.holds(1.0) && a.first_difference.as_deref().unwrap().contains("1 tokens alike"), "{a}");
    let finish = vec![vec![c(vec![4, 5, 2], vec![-0.5, -1.0, -0.1], Finish::Length)]];
    assert!(!compare(&finish, &base).holds(1.0));
    let nan = vec![vec![c(vec![4, 5, 2], vec![-0.5, f32::NAN, -0.1], Finish::Eos)]];
    assert!(!compare(&nan, &base).holds(1.0));
    let off = vec![vec![c(vec![4, 5, 2], vec![-0.5, -1.01, -0.1], Finish::Eos)]];
    assert!(!compare(&off, &base).holds(1e-3) && compare(&off, &base).holds(2e-2));
}

/// A greedy parting is excused only as a near-tie: both tokens within `2 tol` of each other under the
/// f32 decoder, the device's log-prob of its token within `tol` of the f32 one, in at most half the
/// rows; what follows the parting is not compared, and without a tie scorer a parting fails.
#[test]
fn a_greedy_parting_passes_only_as_a_near_tie_within_the_bound() {
    use cppo_engine::agreement::compare_greedy;
    let c = |tokens: Vec<u32>, logprobs: Vec<f32>| Completion { tokens, logprobs, finish: Finish::Length };
    let cpu = vec![vec![c(vec![4, 5, 9], vec![-0.5, -0.70, -0.1]), c(vec![3, 3, 3], vec![-0.2, -0.2, -0.2])]];
    // Row 0 parts at position 1 (6 against 5); the rows after it differ everywhere.
    let dev = vec![vec![c(vec![4, 6, 1], vec![-0.5, -0.69, -3.0]), c(vec![3, 3, 3], vec![-0.2, -0.2, -0.2])]];
    let at = std::cell::Cell::new(None);
    let score = |gap: f32, diff: f32| move |_: usize, _: usize, _: usize| -> anyhow::Result<(f32, f32)> { Ok((gap, diff)) };
    let tie = |i: usize, j: usize, p: usize| -> anyhow::Result<(f32, f32)> {
        at.set(Some((i, j, p)));
        Ok((0.015, 0.004))
    };
    let a = compare_greedy(&dev, &cpu, Some(&tie)).unwrap();
    assert_eq!(at.get(), Some((0, 0, 1)), "scored where the tokens part");
    assert!(a.holds(1e-2) && a.near_ties == 1 && a.first_difference.is_none(), "{a}");
    assert!(a.to_string().contains("1 rows parted at near-ties"), "{a}");
    // A gap wider than twice the bound is a real difference of ranking.
    assert!(!compare_greedy(&dev, &cpu, Some(&score(0.03, 0.004))).unwrap().holds(1e-2));
    // The device's own log-prob of its token must still agree with the f32 decoder's.
    assert!(!compare_greedy(&dev, &cpu, Some(&score(0.0, 0.02))).unwrap().holds(1e-2));
    // NaN from the scorer fails.
    assert!(!compare_greedy(&dev, &cpu, Some(&score(f32::NAN, 0.0))).unwrap().holds(1.0));
    // Ties in more than half the rows: nothing was compared.
    let both = vec![vec![c(vec![4, 6, 1], vec![-0.5, -0.69, -3.0]), c(vec![3, 4, 3], vec![-0.2, -0.2, -0.2])]];
    assert!(!compare_greedy(&both, &cpu, Some(&score(0.0, 0.0))).unwrap().holds(1.0));
    // Without a scorer (sampled runs) the same parting is a difference.
    assert!(!compare(&dev, &cpu).holds(1.0));
}

/// A greedy run on the reference backend (rounding as a device) against the CPU side with bf16 rollout
/// weights, over several random models: agreement within the bound, near-ties never more than half.
#[test]
fn greedy_agreement_with_bf16_rollout_weights_holds_over_many_random_models() {
    let b = Reference::<f32>::rounding_bf16();
    for seed in 0..6 {
        let dec = decoder(&config(Architecture::Qwen2, seed % 2 == 0), 100 + seed);
        let a = engines_agree(&dec, &b, Precision::Bf16, &requests(), &SamplingParams::greedy(8), &options()).unwrap();
        assert!(a.holds(5e-2), "seed {seed}: {a}");
    }
}
