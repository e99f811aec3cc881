//! Generation throughput of SmolLM2-135M-shaped random weights (f32, CPU) on the cached inference
//! path: a 60-token prompt prefilled once and copied into every row, then 128 decode steps over all
//! rows, at batch 1, 16 and 64. `cargo bench -p cppo-model --bench decode`.

use std::time::Instant;

use candle_core::Device;
use cppo_io::{Architecture, ModelConfig};
use cppo_model::Decoder;

fn smollm2_135m() -> ModelConfig {
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

fn main() {
    cppo_kernels::alloc::keep_freed_memory();
    let threads = candle_core::utils::get_num_threads();
    let cfg = smollm2_135m();
    let dec = Decoder::random(&cfg, 0, &Device::Cpu).unwrap().frozen_copy().unwrap();
    println!("SmolLM2-135M shape, f32, random weights, {threads} threads");
    let new_tokens: usize = std::env::var("BENCH_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(128);
    let prompt_len = 60;
    let prompt: Vec<u32> = (0..prompt_len as u32).map(|i| (i * 7919) % cfg.vocab_size as u32).collect();
    let batches: Vec<usize> = std::env::var("BENCH_BATCHES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 16, 64]);
    for batch in batches {
        let mut cache = dec.new_cache(batch, prompt_len + new_tokens).unwrap();
        let t0 = Instant::now();
        dec.prefill(&prompt, &mut cache, 0).unwrap();
        let rows: Vec<usize> = (0..batch).collect();
        dec.copy_row(&mut cache, 0, &rows[1..]).unwrap();
        let prefill = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        for s in 0..new_tokens {
            let toks: Vec<u32> = rows.iter().map(|&r| ((s * 31 + r * 17) % cfg.vocab_size) as u32).collect();
            let logits = dec.decode_step(&toks, &rows, &mut cache).unwrap();
            assert_eq!(logits.dims(), &[batch, cfg.vocab_size]);
        }
        let decode = t1.elapsed().as_secs_f64();
        println!(
            "batch {batch:>2}: prefill {prompt_len} tokens {prefill:.3} s; {new_tokens} steps {decode:.2} s = {:.1} tokens/s ({:.1} ms/step)",
            (batch * new_tokens) as f64 / decode,
            1000.0 * decode / new_tokens as f64
        );
    }
}
