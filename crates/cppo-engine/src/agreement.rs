//! The engine on a device decoder against the engine on the CPU decoder, from the same weights,
//! requests, sampling parameters and seed: what `cppo selftest --device cuda` and the device tests
//! check. Each sample draws from its own seeded RNG and samples on the host from downloaded logits,
//! so two backends whose logits agree to rounding give the same tokens (a near-tie aside) and
//! log-probs within their logits' difference.

use std::fmt;

use anyhow::Result;
use cppo_kernels::backend::Backend as Kernels;
use cppo_kernels::Precision;
use cppo_model::Decoder;

use crate::engine::{generate, Completion, EngineOptions, Request};
use crate::{DecoderBackend, DeviceDecoderBackend, SamplingParams};

/// How the two runs compare.
#[derive(Clone, Debug, PartialEq)]
pub struct Agreement {
    pub completions: usize,
    /// Tokens the CPU run generated.
    pub tokens: usize,
    /// The first completion (request, sample) whose tokens or finish reason differ, described.
    pub first_difference: Option<String>,
    /// The largest |log-prob difference| over the tokens both runs generated alike.
    pub max_logprob_diff: f32,
}

impl Agreement {
    /// Same tokens and finish reasons everywhere, log-probs within `tol` (NaN fails).
    pub fn holds(&self, tol: f32) -> bool {
        self.first_difference.is_none() && self.max_logprob_diff <= tol
    }
}

impl fmt::Display for Agreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} completions, {} tokens: ", self.completions, self.tokens)?;
        match &self.first_difference {
            Some(d) => write!(f, "{d}; ")?,
            None => write!(f, "same tokens and finish reasons; ")?,
        }
        write!(f, "log-probs within {:.2e}", self.max_logprob_diff)
    }
}

/// Compares two runs' results, `[request][sample]`.
pub fn compare(device: &[Vec<Completion>], cpu: &[Vec<Completion>]) -> Agreement {
    let mut a = Agreement { completions: 0, tokens: 0, first_difference: None, max_logprob_diff: 0.0 };
    for (i, (ds, cs)) in device.iter().zip(cpu).enumerate() {
        for (j, (d, c)) in ds.iter().zip(cs).enumerate() {
            a.completions += 1;
            a.tokens += c.tokens.len();
            let same = d.tokens.iter().zip(&c.tokens).take_while(|(x, y)| x == y).count();
            for (x, y) in d.logprobs[..same].iter().zip(&c.logprobs[..same]) {
                let diff = (x - y).abs();
                // A NaN stays, so `holds` fails.
                a.max_logprob_diff = if diff.is_nan() || a.max_logprob_diff.is_nan() { f32::NAN } else { a.max_logprob_diff.max(diff) };
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
    a
}

/// Runs the engine on `b` (weights uploaded now, products at `precision`) and on the CPU decoder at
/// the same precision, and compares them.
pub fn engines_agree<B: Kernels<T = f32>>(dec: &Decoder, b: &B, precision: Precision, requests: &[Request], params: &SamplingParams, options: &EngineOptions) -> Result<Agreement> {
    let text = |_: &[u32]| String::new();
    let device = DeviceDecoderBackend::new(dec, b, precision)?;
    let (on_device, _) = generate(&device, requests, params, options, &text, |_| {})?;
    let cpu = match precision {
        Precision::F32 => DecoderBackend::f32(dec),
        // The device reads bf16 copies: so does the CPU (`Auto` would choose per CPU).
        _ => DecoderBackend::new(dec, Precision::Bf16)?,
    };
    let (on_cpu, _) = generate(&cpu, requests, params, options, &text, |_| {})?;
    Ok(compare(&on_device, &on_cpu))
}
