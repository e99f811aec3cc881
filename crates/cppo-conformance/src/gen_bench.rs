//! cppo's side of `scripts/gpu-check.sh`'s generation comparison with transformers `generate`: the
//! engine on a backend (weights, KV cache and logits in its memory, sampled there at temperature 1:
//! a token and a log-prob per row come back each step), `batch` prompts of `prompt_len` random tokens, every row made to
//! run `new_tokens` (no end-of-sequence token), as the PyTorch baseline forces `min_new_tokens`.
//! Generic over the backend, so its logic is tested under the emulation; on a GPU it has never run.

use std::fmt;
use std::time::Instant;

use cppo_engine::{generate, DecoderBackend, EngineOptions, Request, SamplingParams};
use cppo_kernels::backend::Backend;
use cppo_model::Decoder;

use crate::Rng;

/// One run's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenShape {
    pub batch: usize,
    pub prompt_len: usize,
    pub new_tokens: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GenBench {
    pub shape: GenShape,
    /// Tokens generated (batch x new tokens).
    pub tokens: usize,
    /// Wall seconds of the whole run, and of its prefills, decode steps and host sampling.
    pub seconds: f64,
    pub prefill_s: f64,
    pub decode_s: f64,
    pub sampling_s: f64,
}

impl GenBench {
    /// Generated tokens per second of the whole run (prefill included), as the baseline counts.
    pub fn tokens_per_s(&self) -> f64 {
        self.tokens as f64 / self.seconds
    }

    /// One JSON object, for the script's side-by-side table.
    pub fn json(&self) -> String {
        let s = self.shape;
        format!(
            "{{\"batch\": {}, \"prompt_len\": {}, \"new_tokens\": {}, \"seconds\": {:.4}, \"prefill_s\": {:.4}, \"decode_s\": {:.4}, \"sampling_s\": {:.4}, \"tokens_per_s\": {:.1}}}",
            s.batch, s.prompt_len, s.new_tokens, self.seconds, self.prefill_s, self.decode_s, self.sampling_s, self.tokens_per_s()
        )
    }
}

impl fmt::Display for GenBench {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cppo generate: {}", self.json())
    }
}

/// Runs each shape once after a warm-up run of 4 tokens at the first shape's batch (kernels compile,
/// caches fill), on `dec`'s weights uploaded to `b` once, matrices read from the device's bf16 copies.
/// A shape reached after `budget_s` seconds is left out (`Err` in its place).
pub fn run<B: Backend<T = f32>>(b: &B, dec: &Decoder, shapes: &[GenShape], seed: u64, budget_s: f64) -> anyhow::Result<Vec<Result<GenBench, String>>> {
    let start = Instant::now();
    let device = DecoderBackend::new(dec, b, cppo_kernels::Precision::Bf16)?;
    let vocab = dec.config().vocab_size;
    let mut g = Rng::new(seed);
    let mut requests = |shape: &GenShape| -> Vec<Request> {
        (0..shape.batch).map(|_| Request { prompt: (0..shape.prompt_len.max(1)).map(|_| g.range(0, vocab) as u32).collect(), n: 1 }).collect()
    };
    let text = |_: &[u32]| String::new();
    let params = |n: usize| SamplingParams { temperature: 1.0, max_new_tokens: n, ..Default::default() };
    if let Some(first) = shapes.first() {
        let options = EngineOptions { max_batch: first.batch.max(1), eos: vec![], seed };
        generate(&device, &requests(first), &params(4), &options, &text, |_| {})?;
    }
    let mut out = Vec::new();
    for shape in shapes {
        if start.elapsed().as_secs_f64() > budget_s {
            out.push(Err(format!("batch {}: skipped, the time budget of {budget_s} s is spent", shape.batch)));
            continue;
        }
        let reqs = requests(shape);
        let options = EngineOptions { max_batch: shape.batch.max(1), eos: vec![], seed };
        let t = Instant::now();
        let (done, stats) = generate(&device, &reqs, &params(shape.new_tokens.max(1)), &options, &text, |_| {})?;
        let seconds = t.elapsed().as_secs_f64();
        let tokens = done.iter().flatten().map(|c| c.tokens.len()).sum();
        out.push(Ok(GenBench { shape: *shape, tokens, seconds, prefill_s: stats.prefill_seconds, decode_s: stats.decode_seconds, sampling_s: stats.sampling_seconds }));
    }
    Ok(out)
}
