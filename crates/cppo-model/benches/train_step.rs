//! Training forward + backward of SmolLM2-135M-shaped random weights (f32, CPU): 4 sequences of 128
//! tokens, and one prompt of 100 tokens with 8 completions of 64 through `completion_logprobs`, with f32
//! and with bf16 products (`Precision::Bf16`, the trainer's default).
//! `cargo bench -p cppo-model --bench train_step` (set RAYON_NUM_THREADS to pin the thread count,
//! BENCH_ONLY_MIXED=1 to run only the bf16 case, e.g. under a profiler).

use std::time::Instant;

use candle_core::{Device, Tensor};
use cppo_kernels::Precision;
use cppo_io::{Architecture, ModelConfig};
use cppo_model::{CompletionLogProbs, Decoder};

pub fn smollm2_135m() -> ModelConfig {
    let mut c = ModelConfig::tiny(Architecture::Llama);
    c.vocab_size = 49152;
    c.hidden_size = 576;
    c.intermediate_size = 1536;
    c.num_hidden_layers = 30;
    c.num_attention_heads = 9;
    c.num_key_value_heads = 3;
    c.head_dim = 64;
    c.max_position_embeddings = 8192;
    c.rope_theta = 100000.0;
    c.tie_word_embeddings = true;
    c
}

fn tokens(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut s = seed.wrapping_add(0x9E3779B97F4A7C15);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % vocab as u64) as u32
        })
        .collect()
}

/// dL/dlogp of the loss sum_j A_j sum_t mask * logprobs, advantages alternating +1 / -1.
fn dlogp(out: &CompletionLogProbs) -> Tensor {
    let k = out.logprobs.dim(0).unwrap();
    let adv: Vec<f32> = (0..k).map(|j| if j % 2 == 0 { 1.0 } else { -1.0 }).collect();
    let adv = Tensor::from_vec(adv, (k, 1), &Device::Cpu).unwrap();
    out.mask.broadcast_mul(&adv).unwrap()
}

/// CPU seconds used by this process so far (Linux; 0 elsewhere). On a shared machine this moves less
/// with other load than wall time does.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return 0.0 };
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

fn run(label: &str, tokens_per_step: usize, iters: usize, mut step: impl FnMut() -> CompletionLogProbs) {
    let (mut fwd, mut bwd, mut cpu_f, mut cpu_b) = (vec![], vec![], vec![], vec![]);
    for i in 0..iters + 1 {
        let (t0, c0) = (Instant::now(), cpu_seconds());
        let out = step();
        let d = dlogp(&out);
        let (t1, c1) = (Instant::now(), cpu_seconds());
        let grads = out.backward.as_ref().unwrap().run(&d).unwrap();
        let (t2, c2) = (Instant::now(), cpu_seconds());
        drop(grads);
        if i > 0 {
            // The first iteration warms up allocations and thread pools.
            fwd.push((t1 - t0).as_secs_f64());
            bwd.push((t2 - t1).as_secs_f64());
            cpu_f.push(c1 - c0);
            cpu_b.push(c2 - c1);
        }
    }
    let min = |v: &[f64]| v.iter().cloned().fold(f64::INFINITY, f64::min);
    let (f, b) = (min(&fwd), min(&bwd));
    println!(
        "{label}: fwd {f:.3} s, bwd {b:.3} s, fwd+bwd {:.3} s, {:.0} tokens/s (best of {iters}; cpu fwd {:.2} s, bwd {:.2} s)",
        f + b,
        tokens_per_step as f64 / (f + b),
        min(&cpu_f),
        min(&cpu_b)
    );
}

fn main() {
    cppo_kernels::alloc::keep_freed_memory();
    let threads = candle_core::utils::get_num_threads();
    let cfg = smollm2_135m();
    let dec = Decoder::random(&cfg, 0, &Device::Cpu).unwrap();
    println!("SmolLM2-135M shape, f32, random weights, {threads} threads");
    let iters: usize = std::env::var("BENCH_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);

    let only_mixed = std::env::var("BENCH_ONLY_MIXED").is_ok();
    let seqs: Vec<Vec<u32>> = (0..4).map(|j| tokens(129, cfg.vocab_size, j)).collect();
    let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
    if !only_mixed {
        run("4 x 128 tokens (sequence_logprobs)", 4 * 128, iters, || dec.sequence_logprobs(&refs).unwrap());
    }

    let prompt = tokens(100, cfg.vocab_size, 10);
    let comps: Vec<Vec<u32>> = (0..8).map(|j| tokens(64, cfg.vocab_size, 20 + j)).collect();
    let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
    if !only_mixed {
        run("prompt 100 + 8 x 64 completions (completion_logprobs)", 100 + 8 * 64, iters, || {
            dec.completion_logprobs(&prompt, &refs).unwrap()
        });
    }
    let mixed = dec.clone().with_matmul_precision(Precision::Bf16);
    run("the same, bf16 products (mixed precision)", 100 + 8 * 64, iters, || mixed.completion_logprobs(&prompt, &refs).unwrap());
}
