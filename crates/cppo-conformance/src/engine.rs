//! The generation engine on the backend (`cppo_engine::DecoderBackend`: weights and KV cache in
//! its memory, every layer's op and the sampler on it) against the engine on the CPU
//! decoder, on a small random model with grouped-query attention: the same tokens and finish reasons
//! (greedy, and seeded top-p / top-k sampling), with several samples per prompt (one prefill, copied
//! rows) and fewer rows than samples (slots refilled); log-probs within f32 rounding with f32
//! products, within bf16 rounding with the device's bf16 copies against the CPU's bf16 snapshot.

use candle_core::Device;
use cppo_engine::agreement::engines_agree;
use cppo_engine::{EngineOptions, Request, SamplingParams};
use cppo_io::{Architecture, ModelConfig};
use cppo_kernels::backend::Backend;
use cppo_kernels::cpu::Cpu;
use cppo_kernels::Precision;
use cppo_model::decoder::{random_weights, RandomInit};
use cppo_model::Decoder;

use super::{Report, Rng};

/// f32 products on both sides: sums in another order, a few 1e-6 in log-probs (seen: 2e-6 under the
/// emulation); a wrong row, position or cache entry moves them by 1e-2 and more.
const F32_LOGPROB: f32 = 1e-4;
/// bf16 operands on both sides: an activation an f32 rounding apart may round to a neighbouring bf16
/// value (2^-8 relative) and that runs through the layers.
const BF16_LOGPROB: f32 = 5e-2;

pub(super) fn engine<B: Backend<T = f32>>(b: &B, _c: &Cpu<f32>, g: &mut Rng, r: &mut Report) {
    let cfg = ModelConfig { vocab_size: 61, intermediate_size: 45, eos_token_ids: vec![2], ..ModelConfig::tiny(Architecture::Qwen2) };
    // Wide matrices: next-token distributions far from uniform, so no near-tie decides a token.
    let w = random_weights(&cfg, g.next_u64(), &RandomInit { std: 0.25, norm_jitter: 0.3, bias_std: 0.2 }).expect("random weights");
    let dec = Decoder::new(&cfg, &w, false, &Device::Cpu).expect("a decoder");
    let prompt = |g: &mut Rng, lo: usize, hi: usize| -> Vec<u32> { (0..g.range(lo, hi)).map(|_| g.range(3, cfg.vocab_size) as u32).collect() };
    let requests = vec![Request { prompt: prompt(g, 2, 8), n: 2 }, Request { prompt: prompt(g, 1, 4), n: 2 }];
    let options = EngineOptions { max_batch: 3, eos: vec![2], seed: g.next_u64() };
    let sampled = SamplingParams { temperature: 0.9, top_p: 0.9, top_k: 7, max_new_tokens: 5, ..Default::default() };
    let penalised = SamplingParams { temperature: 1.1, min_p: 0.05, repetition_penalty: 1.3, max_new_tokens: 5, ..Default::default() };
    let cases = [
        ("engine: greedy, f32 products", Precision::F32, SamplingParams::greedy(5), F32_LOGPROB),
        ("engine: seeded top-p / top-k sampling, f32 products", Precision::F32, sampled, F32_LOGPROB),
        ("engine: seeded min_p sampling with a repetition penalty, f32 products", Precision::F32, penalised, F32_LOGPROB),
        ("engine: greedy, bf16 rollout weights", Precision::Bf16, SamplingParams::greedy(5), BF16_LOGPROB),
    ];
    for (name, precision, params, tol) in cases {
        match engines_agree(&dec, b, precision, &requests, &params, &options) {
            Ok(a) => r.record(name, a.holds(tol), format!("{a} (bound {tol:.0e})")),
            Err(e) => r.record(name, false, format!("failed: {e:#}")),
        }
    }
}
