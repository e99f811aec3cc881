//! The engine on a device decoder against the engine on the CPU decoder, from the same weights,
//! requests, sampling parameters and seed: what `cppo selftest --device cuda` and the device tests
//! check. Each sample draws from its own seeded RNG and samples on the host from downloaded logits,
//! so two backends whose logits agree to rounding give the same tokens and log-probs within their
//! logits' difference, but for near-ties: where the two runs' greedy choices part, the f32 CPU decoder
//! scores both tokens on their common prefix, and the parting is excused when they are within twice
//! the log-prob bound of each other (two sets of logits within `tol` of the truth can rank such a pair
//! either way) and the device's log-prob of its own token is within the bound of the f32 one. What
//! follows the parting is not compared: the two rows no longer share a context.

use std::fmt;

use anyhow::Result;
use cppo_kernels::backend::Backend as Kernels;
use cppo_kernels::cpu::Cpu;
use cppo_kernels::reference::Reference;
use cppo_kernels::skinny::dot_bf16_available;
use cppo_kernels::Precision;
use cppo_model::Decoder;

use crate::engine::{generate, Completion, EngineOptions, Request};
use crate::{DecoderBackend, SamplingParams};

/// How the two runs compare.
#[derive(Clone, Debug, PartialEq)]
pub struct Agreement {
    pub completions: usize,
    /// Tokens the CPU run generated.
    pub tokens: usize,
    /// The first completion (request, sample) whose tokens or finish reason differ, described.
    pub first_difference: Option<String>,
    /// The largest |log-prob difference| over the tokens both runs generated alike (and, at a near-tie,
    /// between the device's log-prob of its token and the f32 decoder's).
    pub max_logprob_diff: f32,
    /// Greedy rows whose tokens parted at a near-tie.
    pub near_ties: usize,
    /// The largest gap between the two tokens of a near-tie under the f32 decoder (0 without one).
    pub max_tie_gap: f32,
}

impl Agreement {
    /// Same tokens and finish reasons everywhere but at near-ties no wider than `2 tol`, in at most half
    /// the rows (a comparison that ties everywhere compared nothing); log-probs within `tol` (NaN fails).
    pub fn holds(&self, tol: f32) -> bool {
        self.first_difference.is_none() && self.max_logprob_diff <= tol && self.max_tie_gap <= 2.0 * tol && 2 * self.near_ties <= self.completions
    }
}

/// At a greedy parting (request, sample, position): the gap between the two runs' tokens under the f32
/// decoder, and the |difference| between the device's log-prob of its token and the f32 decoder's.
pub type TieScore<'a> = dyn Fn(usize, usize, usize) -> Result<(f32, f32)> + 'a;

impl fmt::Display for Agreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} completions, {} tokens: ", self.completions, self.tokens)?;
        match &self.first_difference {
            Some(d) => write!(f, "{d}; ")?,
            None => write!(f, "same tokens and finish reasons; ")?,
        }
        if self.near_ties > 0 {
            write!(f, "{} rows parted at near-ties (widest {:.2e}); ", self.near_ties, self.max_tie_gap)?;
        }
        write!(f, "log-probs within {:.2e}", self.max_logprob_diff)
    }
}

fn fold_max(acc: f32, diff: f32) -> f32 {
    // A NaN stays, so `holds` fails.
    if diff.is_nan() || acc.is_nan() {
        f32::NAN
    } else {
        acc.max(diff)
    }
}

/// Compares two runs' results, `[request][sample]`, token for token.
pub fn compare(device: &[Vec<Completion>], cpu: &[Vec<Completion>]) -> Agreement {
    compare_greedy(device, cpu, None).expect("no tie is scored")
}

/// `compare`, where `tie` (greedy runs) scores a parting of tokens as a possible near-tie.
pub fn compare_greedy(device: &[Vec<Completion>], cpu: &[Vec<Completion>], tie: Option<&TieScore<'_>>) -> Result<Agreement> {
    let mut a = Agreement { completions: 0, tokens: 0, first_difference: None, max_logprob_diff: 0.0, near_ties: 0, max_tie_gap: 0.0 };
    for (i, (ds, cs)) in device.iter().zip(cpu).enumerate() {
        for (j, (d, c)) in ds.iter().zip(cs).enumerate() {
            a.completions += 1;
            a.tokens += c.tokens.len();
            let same = d.tokens.iter().zip(&c.tokens).take_while(|(x, y)| x == y).count();
            for (x, y) in d.logprobs[..same].iter().zip(&c.logprobs[..same]) {
                a.max_logprob_diff = fold_max(a.max_logprob_diff, (x - y).abs());
            }
            let parted = same < d.tokens.len() && same < c.tokens.len();
            if let (true, Some(tie)) = (parted, tie) {
                let (gap, diff) = tie(i, j, same)?;
                a.near_ties += 1;
                a.max_tie_gap = fold_max(a.max_tie_gap, gap);
                a.max_logprob_diff = fold_max(a.max_logprob_diff, diff);
                continue;
            }
            if a.first_difference.is_none() && (d.tokens != c.tokens || d.finish != c.finish) {
                a.first_difference = Some(format!(
                    "request {i} sample {j}: {} tokens alike, then {:?} ({:?}) on the device against {:?} ({:?}) on the CPU",
                    same,
                    d.tokens.get(same),
                    d.finish,
                    c.tokens.get(same),
                    c.finish
                ));
            }
        }
        if ds.len() != cs.len() && a.first_difference.is_none() {
            a.first_difference = Some(format!("request {i}: {} samples against {}", ds.len(), cs.len()));
        }
    }
    if device.len() != cpu.len() && a.first_difference.is_none() {
        a.first_difference = Some(format!("{} requests against {}", device.len(), cpu.len()));
    }
    Ok(a)
}

/// Runs the engine on `b` (weights uploaded now, products at `precision`) and on the CPU decoder at
/// the same precision (at bf16 on a CPU without bf16 dot products, on the reference backend rounding
/// as a device rounds), and compares them.
pub fn engines_agree<B: Kernels<T = f32>>(dec: &Decoder, b: &B, precision: Precision, requests: &[Request], params: &SamplingParams, options: &EngineOptions) -> Result<Agreement> {
    let text = |_: &[u32]| String::new();
    let device = DecoderBackend::new(dec, b, precision)?;
    let (on_device, _) = generate(&device, requests, params, options, &text, |_| {})?;
    let on_cpu = match precision {
        Precision::F32 => generate(&DecoderBackend::new(dec, &Cpu::<f32>::new(), Precision::F32)?, requests, params, options, &text, |_| {})?.0,
        // The device reads bf16 copies and rounds the inputs they meet: so does the CPU's bf16 snapshot
        // where it has bf16 dot products (`Auto` would choose per CPU).
        _ if dot_bf16_available() => generate(&DecoderBackend::new(dec, &Cpu::<f32>::new(), Precision::Bf16)?, requests, params, options, &text, |_| {})?.0,
        // Elsewhere the snapshot multiplies unrounded inputs, a difference of bf16 rounding at every
        // layer: the engine over the reference backend rounding them as the device does instead.
        _ => {
            let reference = Reference::<f32>::rounding_bf16();
            generate(&DecoderBackend::new(dec, &reference, Precision::Bf16)?, requests, params, options, &text, |_| {})?.0
        }
    };
    if !params.is_greedy() {
        return Ok(compare(&on_device, &on_cpu));
    }
    let scorer = dec.clone().with_matmul_precision(Precision::F32);
    let tie = |i: usize, j: usize, at: usize| -> Result<(f32, f32)> {
        let (d, c) = (&on_device[i][j], &on_cpu[i][j]);
        let scored = scorer.completion_logprobs_detached(&requests[i].prompt, &[&d.tokens[..=at], &c.tokens[..=at]])?;
        let rows: Vec<Vec<f32>> = scored.logprobs.to_dtype(candle_core::DType::F32)?.to_vec2()?;
        let (ld, lc) = (rows[0][at], rows[1][at]);
        Ok(((lc - ld).abs(), (d.logprobs[at] - ld).abs()))
    };
    compare_greedy(&on_device, &on_cpu, Some(&tie))
}
