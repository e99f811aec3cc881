//! Batched generation for RL rollouts.
//!
//! Each request is a prompt and a number of samples n. The prompt is prefilled once into one cache row and
//! copied to the rows of its other samples; all running rows then decode together, one token per step.
//! A finished row leaves the batch at once and its slot is refilled with waiting work (continuous
//! batching), so finished rows cost nothing. Every sample draws from its own RNG, seeded from the run's
//! seed and the sample's (request, index), so a run is reproducible.

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Instant;

use anyhow::{bail, Result};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::backend::Backend;
use crate::sampling::SamplingParams;
use crate::stop::{find_stop, tail_tokens};

#[derive(Clone, Debug)]
pub struct Request {
    pub prompt: Vec<u32>,
    pub n: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Finish {
    /// An end-of-sequence token was sampled (it is the last token of the completion).
    Eos,
    /// A stop string appeared; the completion's tokens end with the token that completed it.
    Stop,
    /// `max_new_tokens` were generated without an end: the completion is truncated.
    Length,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub tokens: Vec<u32>,
    /// Log-prob of each token under the distribution it was sampled from.
    pub logprobs: Vec<f32>,
    pub finish: Finish,
}

impl Completion {
    pub fn truncated(&self) -> bool {
        self.finish == Finish::Length
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GenerationStats {
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub decode_steps: usize,
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
    pub sampling_seconds: f64,
}

pub struct EngineOptions {
    /// Rows decoded together.
    pub max_batch: usize,
    pub eos: Vec<u32>,
    pub seed: u64,
}

struct Running {
    request: usize,
    sample: usize,
    row: usize,
    tokens: Vec<u32>,
    logprobs: Vec<f32>,
    rng: ChaCha8Rng,
    /// The prompt and the tokens so far, kept only for a repetition penalty.
    seen: Vec<u32>,
}

/// A seed for sample `j` of request `i` that does not depend on how the work was batched.
fn sample_seed(seed: u64, request: usize, sample: usize) -> u64 {
    let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
    for v in [request as u64, sample as u64] {
        x = (x ^ v).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 31;
    }
    x
}

/// Generates `requests[i].n` completions for every request. `detokenize` turns token ids into text; it is
/// only called when stop strings are set. Results are indexed `[request][sample]`.
pub fn generate<B: Backend>(
    backend: &B,
    requests: &[Request],
    params: &SamplingParams,
    options: &EngineOptions,
    detokenize: &dyn Fn(&[u32]) -> String,
    mut on_finish: impl FnMut(usize),
) -> Result<(Vec<Vec<Completion>>, GenerationStats)> {
    params.validate().map_err(|e| anyhow::anyhow!("sampling: {e}"))?;
    if options.max_batch == 0 {
        bail!("max_batch must be at least 1");
    }
    let vocab = backend.vocab_size();
    let max_prompt = requests.iter().map(|r| r.prompt.len()).max().unwrap_or(0);
    if requests.iter().any(|r| r.prompt.is_empty()) {
        bail!("a request has an empty prompt");
    }
    let max_len = max_prompt + params.max_new_tokens;
    let rows = options.max_batch.min(requests.iter().map(|r| r.n).sum::<usize>().max(1));
    let mut cache = backend.new_cache(rows, max_len)?;
    let mut stats = GenerationStats::default();

    // Work units: (request, first sample, count), split so no unit needs more rows than exist.
    let mut waiting: VecDeque<(usize, usize, usize)> = VecDeque::new();
    for (i, r) in requests.iter().enumerate() {
        let mut start = 0;
        while start < r.n {
            let count = (r.n - start).min(rows);
            waiting.push_back((i, start, count));
            start += count;
        }
    }
    let mut results: Vec<Vec<Option<Completion>>> = requests.iter().map(|r| vec![None; r.n]).collect();
    let mut free: Vec<usize> = (0..rows).rev().collect();
    let mut running: Vec<Running> = Vec::new();
    let tail = tail_tokens(&params.stop);
    let penalises = params.sampler().penalises();
    // Where each running row's next-token logits are (aligned with `running`): the logits shared by the
    // samples of one prefill or by the rows of one decode step, and the row's index in them.
    let mut pending: Vec<(Rc<B::Logits>, usize)> = Vec::new();

    loop {
        // Admit waiting work while its rows are free.
        while let Some(&(req, first, count)) = waiting.front() {
            if free.len() < count {
                break;
            }
            waiting.pop_front();
            let my_rows: Vec<usize> = (0..count).map(|_| free.pop().expect("checked")).collect();
            let t = Instant::now();
            let logits = Rc::new(backend.prefill(&mut cache, my_rows[0], &requests[req].prompt)?);
            if count > 1 {
                backend.copy_row(&mut cache, my_rows[0], &my_rows[1..])?;
            }
            stats.prefill_seconds += t.elapsed().as_secs_f64();
            stats.prompt_tokens += requests[req].prompt.len();
            for (j, &row) in my_rows.iter().enumerate() {
                running.push(Running {
                    request: req,
                    sample: first + j,
                    row,
                    tokens: Vec::new(),
                    logprobs: Vec::new(),
                    rng: ChaCha8Rng::seed_from_u64(sample_seed(options.seed, req, first + j)),
                    seen: if penalises { requests[req].prompt.clone() } else { Vec::new() },
                });
                pending.push((logits.clone(), 0));
            }
        }
        if running.is_empty() {
            break;
        }

        // Sample one token for every running row, each with a draw from its own RNG (so the result does
        // not depend on the batching, nor on where the backend keeps its logits); retire the rows that finish.
        let t = Instant::now();
        let draws: Vec<f64> = running.iter_mut().map(|r| params.draw(&mut r.rng)).collect();
        let at: Vec<(&B::Logits, usize)> = pending.iter().map(|(l, row)| (&**l, *row)).collect();
        let seen: Vec<&[u32]> = if penalises { running.iter().map(|r| r.seen.as_slice()).collect() } else { Vec::new() };
        let drawn = backend.sample(&at, &draws, params, &seen)?;
        drop(seen);
        if drawn.len() != running.len() {
            bail!("backend sampled {} tokens for {} rows", drawn.len(), running.len());
        }
        if let Some(&(token, _)) = drawn.iter().find(|(token, _)| *token as usize >= vocab) {
            bail!("backend sampled token {token} of a vocabulary of {vocab}");
        }
        drop(at);
        pending.clear();
        let mut keep_running = Vec::with_capacity(running.len());
        let mut next_tokens = Vec::with_capacity(running.len());
        for (mut r, (token, logprob)) in running.drain(..).zip(drawn) {
            r.tokens.push(token);
            r.logprobs.push(logprob);
            if penalises {
                r.seen.push(token);
            }
            stats.generated_tokens += 1;
            let finish = if options.eos.contains(&token) {
                Some(Finish::Eos)
            } else if !params.stop.is_empty() && {
                let from = r.tokens.len().saturating_sub(tail);
                find_stop(&detokenize(&r.tokens[from..]), &params.stop).is_some()
            } {
                Some(Finish::Stop)
            } else if r.tokens.len() >= params.max_new_tokens {
                Some(Finish::Length)
            } else {
                None
            };
            match finish {
                Some(finish) => {
                    free.push(r.row);
                    results[r.request][r.sample] =
                        Some(Completion { tokens: r.tokens, logprobs: r.logprobs, finish });
                    on_finish(1);
                }
                None => {
                    next_tokens.push(token);
                    keep_running.push(r);
                }
            }
        }
        stats.sampling_seconds += t.elapsed().as_secs_f64();
        running = keep_running;
        if running.is_empty() {
            continue;
        }

        let t = Instant::now();
        let rows_now: Vec<usize> = running.iter().map(|r| r.row).collect();
        let logits = Rc::new(backend.decode(&mut cache, &rows_now, &next_tokens)?);
        stats.decode_seconds += t.elapsed().as_secs_f64();
        stats.decode_steps += 1;
        pending = (0..rows_now.len()).map(|i| (logits.clone(), i)).collect();
    }

    let results = results
        .into_iter()
        .map(|samples| samples.into_iter().map(|c| c.expect("every sample finishes")).collect())
        .collect();
    Ok((results, stats))
}
