//! The scheduler against a fake model whose logits are a known function of each row's history: prompts are
//! prefilled once and shared, only running rows are decoded, finish reasons are right, and results do not
//! depend on how the work was batched.

use std::cell::RefCell;

use anyhow::Result;
use cppo_engine::sampling::sample_on_host;
use cppo_engine::{generate, Backend, EngineOptions, Finish, Request, SamplingParams};

const VOCAB: usize = 16;
const EOS: u32 = 2;

#[derive(Default)]
struct Counters {
    prefills: usize,
    prefill_tokens: usize,
    copies: usize,
    decoded_rows: usize,
    max_rows_per_decode: usize,
}

struct Fake {
    counters: RefCell<Counters>,
    /// EOS becomes likely once a row holds this many tokens.
    eos_after: usize,
}

fn logits_for(history: &[u32], eos_after: usize) -> Vec<f32> {
    let s: u32 = history.iter().sum();
    let mut l = vec![0f32; VOCAB];
    l[((s as usize) * 7 + history.len()) % VOCAB] += 3.0;
    l[EOS as usize] = if history.len() >= eos_after { 6.0 } else { -30.0 };
    l
}

impl Backend for Fake {
    type Cache = Vec<Vec<u32>>;
    type Logits = Vec<f32>;
    fn vocab_size(&self) -> usize {
        VOCAB
    }
    fn new_cache(&self, rows: usize, _max_len: usize) -> Result<Self::Cache> {
        Ok(vec![Vec::new(); rows])
    }
    fn prefill(&self, cache: &mut Self::Cache, row: usize, tokens: &[u32]) -> Result<Vec<f32>> {
        let mut c = self.counters.borrow_mut();
        c.prefills += 1;
        c.prefill_tokens += tokens.len();
        cache[row] = tokens.to_vec();
        Ok(logits_for(&cache[row], self.eos_after))
    }
    fn copy_row(&self, cache: &mut Self::Cache, from: usize, to: &[usize]) -> Result<()> {
        self.counters.borrow_mut().copies += to.len();
        for &t in to {
            cache[t] = cache[from].clone();
        }
        Ok(())
    }
    fn decode(&self, cache: &mut Self::Cache, rows: &[usize], tokens: &[u32]) -> Result<Vec<f32>> {
        let mut c = self.counters.borrow_mut();
        c.decoded_rows += rows.len();
        c.max_rows_per_decode = c.max_rows_per_decode.max(rows.len());
        let mut out = Vec::new();
        for (&r, &t) in rows.iter().zip(tokens) {
            cache[r].push(t);
            out.extend(logits_for(&cache[r], self.eos_after));
        }
        Ok(out)
    }

    fn sample(&self, at: &[(&Vec<f32>, usize)], draws: &[f64], params: &SamplingParams, seen: &[&[u32]]) -> Result<Vec<(u32, f32)>> {
        sample_on_host(self.vocab_size(), at, draws, params, seen)
    }
}

fn fake(eos_after: usize) -> Fake {
    Fake { counters: RefCell::default(), eos_after }
}

fn no_text(_: &[u32]) -> String {
    String::new()
}

fn requests() -> Vec<Request> {
    vec![
        Request { prompt: vec![1, 5, 7], n: 4 },
        Request { prompt: vec![1, 9], n: 3 },
        Request { prompt: vec![1, 3, 3, 3], n: 5 },
    ]
}

#[test]
fn each_prompt_is_prefilled_once_and_shared_by_its_samples() {
    let f = fake(6);
    let params = SamplingParams { max_new_tokens: 10, ..Default::default() };
    let opts = EngineOptions { max_batch: 16, eos: vec![EOS], seed: 7 };
    let (out, stats) = generate(&f, &requests(), &params, &opts, &no_text, |_| {}).unwrap();
    let c = f.counters.borrow();
    assert_eq!(c.prefills, 3);
    assert_eq!(c.prefill_tokens, 3 + 2 + 4);
    assert_eq!(c.copies, 3 + 2 + 4);
    assert_eq!(out.iter().map(Vec::len).collect::<Vec<_>>(), vec![4, 3, 5]);
    // Each decode call appends the previous token of a still-running row: one per generated token except
    // the last of each completion.
    let generated: usize = out.iter().flatten().map(|c| c.tokens.len()).sum();
    assert_eq!(stats.generated_tokens, generated);
    assert_eq!(c.decoded_rows, generated - 12);
}

#[test]
fn finish_reasons_eos_and_length_are_reported() {
    let f = fake(4);
    let params = SamplingParams { temperature: 0.0, max_new_tokens: 3, ..Default::default() };
    let opts = EngineOptions { max_batch: 4, eos: vec![EOS], seed: 0 };
    let reqs = vec![Request { prompt: vec![1, 1, 1, 1, 1], n: 1 }, Request { prompt: vec![1], n: 1 }];
    let (out, _) = generate(&f, &reqs, &params, &opts, &no_text, |_| {}).unwrap();
    // Prompt of 5 >= eos_after: greedy picks EOS at once, and it is kept as the last token.
    assert_eq!(out[0][0].tokens, vec![EOS]);
    assert_eq!(out[0][0].finish, Finish::Eos);
    // Prompt of 1: three tokens before EOS becomes likely: truncated at the limit.
    assert_eq!(out[1][0].tokens.len(), 3);
    assert_eq!(out[1][0].finish, Finish::Length);
    assert!(out[1][0].truncated());
}

#[test]
fn stop_strings_end_a_completion() {
    let f = fake(100);
    let text = |ids: &[u32]| ids.iter().map(|i| format!("<{i}>")).collect::<String>();
    let (plain, _) = generate(
        &f,
        &[Request { prompt: vec![1], n: 1 }],
        &SamplingParams::greedy(8),
        &EngineOptions { max_batch: 1, eos: vec![EOS], seed: 0 },
        &text,
        |_| {},
    )
    .unwrap();
    let toks = &plain[0][0].tokens;
    // Stop on the text of tokens 3 and 4 together: the completion ends at token 4.
    let stop = format!("<{}><{}>", toks[2], toks[3]);
    let params = SamplingParams { stop: vec![stop], ..SamplingParams::greedy(8) };
    let (out, _) = generate(
        &f,
        &[Request { prompt: vec![1], n: 1 }],
        &params,
        &EngineOptions { max_batch: 1, eos: vec![EOS], seed: 0 },
        &text,
        |_| {},
    )
    .unwrap();
    assert_eq!(out[0][0].finish, Finish::Stop);
    assert_eq!(out[0][0].tokens, toks[..4].to_vec());
}

#[test]
fn results_do_not_depend_on_batching_and_follow_the_seed() {
    let params = SamplingParams { temperature: 1.0, max_new_tokens: 12, ..Default::default() };
    let run = |max_batch: usize, seed: u64| {
        let f = fake(5);
        let opts = EngineOptions { max_batch, eos: vec![EOS], seed };
        let (out, _) = generate(&f, &requests(), &params, &opts, &no_text, |_| {}).unwrap();
        let max_rows = f.counters.borrow().max_rows_per_decode;
        (out, max_rows)
    };
    let (a, rows_a) = run(12, 3);
    let (b, rows_b) = run(3, 3);
    let (c, _) = run(12, 4);
    assert_eq!(a, b);
    assert_ne!(a, c, "a different seed should give different samples");
    assert!(rows_a > 3 && rows_b <= 3, "batch sizes {rows_a} / {rows_b}");
    // Samples of one request differ from each other (each has its own RNG).
    assert!(a[2].windows(2).any(|w| w[0].tokens != w[1].tokens));
}

#[test]
fn finished_rows_are_refilled_with_waiting_work() {
    // 12 samples through 4 rows: more than one wave, never more than 4 rows at a time.
    let f = fake(3);
    let params = SamplingParams { max_new_tokens: 8, ..Default::default() };
    let opts = EngineOptions { max_batch: 4, eos: vec![EOS], seed: 1 };
    let (out, _) = generate(&f, &requests(), &params, &opts, &no_text, |_| {}).unwrap();
    assert_eq!(out.iter().map(Vec::len).sum::<usize>(), 12);
    assert!(f.counters.borrow().max_rows_per_decode <= 4);
    // A request wider than the batch is split, and each piece prefills its prompt once.
    assert_eq!(f.counters.borrow().prefills, 1 + 1 + 2);
}

/// The repetition penalty sees each row's own history, prompt included, at every step: greedy
/// completions and their log-probs equal a step-by-step loop that penalises the fake's logits on the
/// row's history (transformers' rule) and takes the argmax, and the penalty changes the log-probs.
#[test]
fn the_repetition_penalty_sees_each_rows_prompt_and_completion() {
    let eos_after = 7;
    let opts = EngineOptions { max_batch: 3, eos: vec![EOS], seed: 5 };
    let plain = generate(&fake(eos_after), &requests(), &SamplingParams::greedy(9), &opts, &no_text, |_| {}).unwrap().0;
    for penalty in [0.6, 2.0, 7.5] {
        let params = SamplingParams { repetition_penalty: penalty, ..SamplingParams::greedy(9) };
        let (out, _) = generate(&fake(eos_after), &requests(), &params, &opts, &no_text, |_| {}).unwrap();
        let mut changed = 0;
        for (r, req) in requests().iter().enumerate() {
            // Greedy: every sample of a request is the same loop.
            let mut history = req.prompt.clone();
            let (mut tokens, mut logprobs) = (Vec::new(), Vec::new());
            while tokens.len() < 9 {
                let mut l = logits_for(&history, eos_after);
                for t in 0..VOCAB as u32 {
                    if history.contains(&t) {
                        let z = &mut l[t as usize];
                        *z = if *z < 0.0 { *z * penalty as f32 } else { *z / penalty as f32 };
                    }
                }
                let best = (0..VOCAB).fold(0, |b, i| if l[i] > l[b] { i } else { b });
                let lse = l.iter().map(|&x| (x as f64).exp()).sum::<f64>().ln();
                tokens.push(best as u32);
                logprobs.push((l[best] as f64 - lse) as f32);
                history.push(best as u32);
                if best as u32 == EOS {
                    break;
                }
            }
            for (s, c) in out[r].iter().enumerate() {
                assert_eq!(c.tokens, tokens, "penalty {penalty} request {r} sample {s}");
                for (got, want) in c.logprobs.iter().zip(&logprobs) {
                    assert!((got - want).abs() < 1e-5, "penalty {penalty} request {r}: {got} vs {want}");
                }
                changed += c.logprobs.iter().zip(&plain[r][s].logprobs).filter(|(a, b)| (*a - *b).abs() > 1e-3).count();
            }
        }
        assert!(changed > 0, "penalty {penalty} changed no log-prob");
    }
}
