//! The decoder's training tape (cppo-model: embedding, every layer, the chunked log-softmax, and the
//! whole hand-written backward) on the CUDA backend under the emulation, against the same tape on the
//! CPU backend: log-probs, entropies and every weight's gradient, for each architecture the decoder
//! knows (Qwen2's biases, Qwen3's q/k norms, Llama's tied embedding), on grouped completions sharing
//! their prompts.

use candle_core::Device;
use cppo_cuda::backend::CudaBackend;
use cppo_conformance::{compare, Rng};
use cppo_io::{Architecture, ModelConfig};
use cppo_kernels::cpu::Cpu;
use cppo_kernels::Precision;
use cppo_model::decoder::{random_weights, RandomInit};
use cppo_model::Decoder;

use crate::backend::EmuSide;

fn seed() -> u64 {
    let s = std::env::var("CPPO_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    });
    eprintln!("decoder: CPPO_TEST_SEED={s}");
    s
}

#[test]
fn the_decoder_tape_on_the_emulated_cuda_backend_matches_the_cpu_backend() {
    tapes_agree(&[(Architecture::Qwen2, Precision::F32), (Architecture::Qwen3, Precision::F32), (Architecture::Llama, Precision::F32)]);
}

/// At bf16 products the CUDA backend rounds every product's operands; the CPU backend does so only
/// where it multiplies in bf16 (elsewhere a bf16 request multiplies in f32, `Precision::bf16_available`).
#[test]
#[cfg_attr(not(cppo_isa_avx512bf16), ignore = "the CPU side rounds bf16 products only with AVX512-BF16, which this CPU lacks or CPPO_MAX_ISA caps")]
fn at_bf16_products_the_decoder_tape_on_the_emulated_cuda_backend_matches_the_cpu_backend_with_avx512bf16() {
    tapes_agree(&[(Architecture::Qwen2, Precision::Bf16)]);
}

fn tapes_agree(cases: &[(Architecture, Precision)]) {
    let seed = seed();
    let mut g = Rng::new(seed);
    let mut failures = Vec::new();
    for &(arch, mp) in cases {
        let cfg = ModelConfig::tiny(arch);
        let init = RandomInit { std: 0.15, norm_jitter: 0.3, bias_std: 0.2 };
        let w = random_weights(&cfg, g.next_u64(), &init).unwrap();
        let dec = Decoder::new(&cfg, &w, true, &Device::Cpu).unwrap().with_matmul_precision(mp);
        let vocab = cfg.vocab_size;
        let toks = |g: &mut Rng, lo: usize, hi: usize| -> Vec<u32> {
            let n = g.range(lo, hi);
            (0..n).map(|_| g.range(0, vocab) as u32).collect()
        };
        let (p1, p2) = (toks(&mut g, 2, 7), toks(&mut g, 1, 5));
        let (c1, c2, c3, c4) = (toks(&mut g, 1, 6), toks(&mut g, 2, 8), toks(&mut g, 1, 2), toks(&mut g, 1, 5));
        let groups: [(&[u32], &[&[u32]]); 2] = [(&p1, &[&c1, &c2, &c3]), (&p2, &[&c4])];
        let lmax = [&c1, &c2, &c3, &c4].iter().map(|c| c.len()).max().unwrap();
        let dlogp = g.values(4 * lmax, 1.0);
        let cpu = dec.tape_on(&Cpu::<f32>::new(), &groups, &dlogp).unwrap();
        let cuda = dec.tape_on(&CudaBackend::new(EmuSide::new()), &groups, &dlogp).unwrap();
        // f32: sums in another order through two layers; bf16: both round the same operands, but a
        // product's input may round to a neighbouring bf16 value after an f32 difference upstream.
        let (rel_out, rel_grad) = if mp == Precision::F32 { (1e-4, 1e-3) } else { (2e-2, 5e-2) };
        let what = format!("{arch:?} {}", mp.name());
        let mut checks = vec![compare(&format!("{what} logprobs"), &cuda.logprobs, &cpu.logprobs, rel_out)];
        let ent = |e: &[f64]| e.iter().map(|&x| x as f32).collect::<Vec<_>>();
        checks.push(compare(&format!("{what} entropy"), &ent(&cuda.entropy), &ent(&cpu.entropy), rel_out));
        assert_eq!(cuda.grads.len(), cpu.grads.len());
        for ((name, gg), (cname, cg)) in cuda.grads.iter().zip(&cpu.grads) {
            assert_eq!(name, cname);
            assert!(cg.iter().any(|&x| x != 0.0), "{what}: the CPU's gradient of {name} is all zeros");
            checks.push(compare(&format!("{what} d {name}"), gg, cg, rel_grad));
        }
        for c in checks {
            eprintln!("{} {}: {}", if c.passed { "ok  " } else { "FAIL" }, c.name, c.detail);
            if !c.passed {
                failures.push(c.name);
            }
        }
    }
    assert!(failures.is_empty(), "seed {seed}: {failures:?}");
}

#[test]
fn the_tape_bench_times_whole_updates_on_the_emulated_backend() {
    let cfg = ModelConfig::tiny(Architecture::Qwen2);
    let w = random_weights(&cfg, 9, &RandomInit::default()).unwrap();
    let dec = Decoder::new(&cfg, &w, true, &Device::Cpu).unwrap().with_matmul_precision(cppo_kernels::Precision::Bf16);
    let shape = cppo_conformance::tape_bench::Shape { group: 2, prompt_len: 3, new_tokens: 4, repeats: 1 };
    let r = cppo_conformance::tape_bench::run(&CudaBackend::new(EmuSide::new()), &dec, shape, 5).unwrap();
    let params: usize = cppo_model::decoder::expected_tensors(&cfg).iter().map(|(_, s)| s.iter().product::<usize>()).sum();
    assert_eq!((r.rows, r.scored, r.params, r.trained), (3 + 2 * 3, 8, params, params), "every weight trained");
    assert!(r.tape_s > 0.0 && r.adamw_s > 0.0 && r.update_tokens_per_s().is_finite() && r.tflops() > 0.0, "{r:?}");
    assert!(r.to_string().contains("scored tokens/s"), "{r}");
}
