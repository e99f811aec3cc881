//! The engine's sampling parameters, and the draw each sampled token takes from its sample's RNG. The
//! sampler itself (one row of logits and a draw to a token and its log-prob) is `cppo_kernels::sample`,
//! the host reference of the device kernel.

use anyhow::{bail, Result};
pub use cppo_kernels::sample::{log_softmax_at, penalize, sample_row, sample_row_after, SampleParams};
use rand::Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f64,
    /// Nucleus sampling: keep the smallest set of tokens whose probability reaches `top_p` (1 disables it).
    pub top_p: f64,
    /// Keep the `top_k` most likely tokens (0 disables it).
    pub top_k: usize,
    /// Keep the tokens whose probability is at least `min_p` times the most likely one's (0 disables
    /// it; TRL's and transformers' `min_p`, applied after top-k and top-p).
    pub min_p: f64,
    /// transformers' `repetition_penalty` (1 disables it): the logit of every token already in the row,
    /// prompt included, is divided by it (multiplied when negative) before the temperature.
    pub repetition_penalty: f64,
    pub max_new_tokens: usize,
    /// Stop when the decoded completion contains one of these; the completion is cut before it.
    pub stop: Vec<String>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams { temperature: 1.0, top_p: 1.0, top_k: 0, min_p: 0.0, repetition_penalty: 1.0, max_new_tokens: 256, stop: vec![] }
    }
}

impl SamplingParams {
    pub fn greedy(max_new_tokens: usize) -> Self {
        SamplingParams { temperature: 0.0, max_new_tokens, ..Default::default() }
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(format!("temperature = {} must be a finite number >= 0", self.temperature));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(format!("top_p = {} must be in (0, 1]", self.top_p));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return Err(format!("min_p = {} must be in [0, 1]", self.min_p));
        }
        if !(self.repetition_penalty > 0.0 && self.repetition_penalty.is_finite()) {
            return Err(format!("repetition_penalty = {} must be a finite number > 0 (1 disables it)", self.repetition_penalty));
        }
        if self.max_new_tokens == 0 {
            return Err("max_new_tokens must be at least 1".into());
        }
        if self.stop.iter().any(|s| s.is_empty()) {
            return Err("stop strings must not be empty".into());
        }
        Ok(())
    }

    /// What the sampler (host or device) sees of these parameters.
    pub fn sampler(&self) -> SampleParams {
        SampleParams {
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
            min_p: self.min_p,
            repetition_penalty: self.repetition_penalty,
        }
    }

    /// The uniform draw a sample's next token takes from its RNG: one `gen::<f64>()` per sampled token,
    /// none when greedy. The draw is made on the host whichever backend samples, so a seed gives the
    /// same completions wherever the logits live.
    pub fn draw(&self, rng: &mut impl Rng) -> f64 {
        if self.is_greedy() {
            0.0
        } else {
            rng.gen::<f64>()
        }
    }
}

/// Picks a token from `logits`. The log-prob returned is that of the token under the distribution actually
/// sampled from: softmax(logits / T) restricted and renormalised to the top-k / top-p set; for greedy
/// decoding, under softmax(logits). (No repetition penalty: it needs the row's earlier tokens.)
pub fn sample(logits: &[f32], params: &SamplingParams, rng: &mut impl Rng) -> (u32, f32) {
    sample_row(logits, &params.sampler(), params.draw(rng))
}

/// A host backend's `Backend::sample`: row `at[i].1` of the host logits `at[i].0` (rows of `vocab`)
/// with the draw `draws[i]`, after the repetition penalty on its earlier tokens `seen[i]` (ignored
/// without a penalty), rows in parallel.
pub fn sample_on_host(vocab: usize, at: &[(&Vec<f32>, usize)], draws: &[f64], params: &SamplingParams, seen: &[&[u32]]) -> Result<Vec<(u32, f32)>> {
    if at.len() != draws.len() {
        bail!("{} rows to sample with {} draws", at.len(), draws.len());
    }
    let p = params.sampler();
    if p.penalises() && seen.len() != at.len() {
        bail!("a repetition penalty with the earlier tokens of {} rows for {}", seen.len(), at.len());
    }
    for (logits, row) in at {
        if logits.len() < (row + 1) * vocab || logits.len() % vocab.max(1) != 0 {
            bail!("backend returned {} logits, read as row {row} of rows of {vocab}", logits.len());
        }
    }
    Ok(at
        .par_iter()
        .zip(draws.par_iter())
        .enumerate()
        .map(|(i, ((logits, row), &u))| sample_row_after(&logits[row * vocab..(row + 1) * vocab], seen.get(i).copied().unwrap_or_default(), &p, u))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn greedy_takes_the_argmax_with_its_log_prob() {
        let logits = [0.0f32, 3.0, 1.0];
        let (t, lp) = sample(&logits, &SamplingParams::greedy(1), &mut ChaCha8Rng::seed_from_u64(0));
        assert_eq!(t, 1);
        let z: f64 = logits.iter().map(|&l| (l as f64).exp()).sum();
        assert!((lp as f64 - (3.0f64.exp() / z).ln()).abs() < 1e-6);
    }

    /// transformers' rule, by hand: a seen logit >= 0 is divided by the penalty, a negative one
    /// multiplied; a token seen twice is penalised once; unseen tokens and ids past the row are left.
    #[test]
    fn the_repetition_penalty_divides_positive_and_multiplies_negative_seen_logits() {
        let mut row = vec![2.0f32, -2.0, 1.0, 0.0, -0.5];
        penalize(&mut row, &[1, 0, 1, 3, 99], 2.0);
        assert_eq!(row, vec![1.0, -4.0, 1.0, 0.0, -0.5]);
        let mut row = vec![2.0f32, -2.0];
        penalize(&mut row, &[0, 1], 0.5);
        assert_eq!(row, vec![4.0, -1.0]);
    }

    /// With a penalty, each host row is sampled as `sample_row` samples that row penalised on its own
    /// earlier tokens (the draw, top-k, top-p and min_p after it); shared logits are not changed.
    #[test]
    fn host_sampling_with_a_penalty_is_sampling_the_penalised_row() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let vocab = 40;
        for round in 0..50 {
            let logits: Vec<f32> = (0..2 * vocab).map(|_| rng.gen_range(-4.0f32..4.0)).collect();
            let keep = logits.clone();
            let params = SamplingParams {
                temperature: if round % 5 == 0 { 0.0 } else { rng.gen_range(0.5..1.5) },
                top_k: [0, 5][round % 2],
                min_p: [0.0, 0.05][(round / 2) % 2],
                repetition_penalty: rng.gen_range(0.5..3.0),
                ..Default::default()
            };
            let seen: Vec<Vec<u32>> = (0..3).map(|_| (0..rng.gen_range(0..30)).map(|_| rng.gen_range(0..vocab as u32)).collect()).collect();
            let at = [(&logits, 1), (&logits, 0), (&logits, 1)];
            let draws: Vec<f64> = (0..3).map(|_| rng.gen()).collect();
            let seen_refs: Vec<&[u32]> = seen.iter().map(Vec::as_slice).collect();
            let got = sample_on_host(vocab, &at, &draws, &params, &seen_refs).unwrap();
            for (i, (l, row)) in at.iter().enumerate() {
                let mut penalised = l[row * vocab..(row + 1) * vocab].to_vec();
                penalize(&mut penalised, &seen[i], params.repetition_penalty);
                assert_eq!(got[i], sample_row(&penalised, &params.sampler(), draws[i]), "round {round} row {i}");
            }
            assert_eq!(logits, keep);
        }
        let one = vec![0f32; vocab];
        let p = SamplingParams { repetition_penalty: 1.2, ..Default::default() };
        assert!(sample_on_host(vocab, &[(&one, 0)], &[0.5], &p, &[]).is_err(), "a penalty needs the rows' tokens");
    }

    #[test]
    fn frequencies_follow_the_tempered_distribution() {
        let logits = [0.0f32, 1.0, 2.0];
        let params = SamplingParams { temperature: 2.0, ..Default::default() };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut counts = [0usize; 3];
        let n = 30_000;
        for _ in 0..n {
            counts[sample(&logits, &params, &mut rng).0 as usize] += 1;
        }
        let w: Vec<f64> = logits.iter().map(|&l| (l as f64 / 2.0).exp()).collect();
        let z: f64 = w.iter().sum();
        for i in 0..3 {
            let expected = w[i] / z;
            let got = counts[i] as f64 / n as f64;
            assert!((got - expected).abs() < 0.015, "token {i}: {got} vs {expected}");
        }
    }

    #[test]
    fn top_k_and_top_p_never_pick_outside_their_set_and_renormalise() {
        let logits = [5.0f32, 4.0, 3.0, -10.0, 2.0];
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let k2 = SamplingParams { top_k: 2, ..Default::default() };
        let p = SamplingParams { top_p: 0.7, ..Default::default() };
        for _ in 0..2000 {
            let (t, lp) = sample(&logits, &k2, &mut rng);
            assert!(t == 0 || t == 1);
            let z = 5f64.exp() + 4f64.exp();
            let expected = (logits[t as usize] as f64).exp() / z;
            assert!((lp as f64 - expected.ln()).abs() < 1e-5);
            // softmax: p0 = 0.64, p0 + p1 = 0.88 >= 0.7, so the nucleus is {0, 1}.
            let (t, _) = sample(&logits, &p, &mut rng);
            assert!(t == 0 || t == 1, "picked {t}");
        }
    }

    /// min_p keeps exactly the tokens with p >= min_p * p_max under softmax(logits / T), each drawn
    /// with its renormalised probability, over random rows.
    #[test]
    fn min_p_keeps_the_tokens_above_its_share_of_the_most_likely() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for case in 0..200 {
            let logits: Vec<f32> = (0..12).map(|_| rng.gen_range(-4.0f32..4.0)).collect();
            let (t, min_p) = (rng.gen_range(0.5f64..1.5), rng.gen_range(0.01f64..0.9));
            let params = SamplingParams { temperature: t, min_p, ..Default::default() };
            let w: Vec<f64> = logits.iter().map(|&l| (l as f64 / t).exp()).collect();
            let top = w.iter().cloned().fold(0.0, f64::max);
            let kept: Vec<usize> = (0..w.len()).filter(|&i| w[i] >= min_p * top).collect();
            let z: f64 = kept.iter().map(|&i| w[i]).sum();
            for _ in 0..20 {
                let (tok, lp) = sample(&logits, &params, &mut rng);
                assert!(kept.contains(&(tok as usize)), "case {case}: token {tok} outside {kept:?}");
                assert!((lp as f64 - (w[tok as usize] / z).ln()).abs() < 1e-4, "case {case}: {lp}");
            }
        }
        assert!(SamplingParams { min_p: 1.5, ..Default::default() }.validate().is_err());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(SamplingParams { repetition_penalty: bad, ..Default::default() }.validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn invalid_parameters_are_reported() {
        assert!(SamplingParams { top_p: 0.0, ..Default::default() }.validate().is_err());
        assert!(SamplingParams { temperature: -1.0, ..Default::default() }.validate().is_err());
        assert!(SamplingParams { max_new_tokens: 0, ..Default::default() }.validate().is_err());
        assert!(SamplingParams { stop: vec![String::new()], ..Default::default() }.validate().is_err());
        assert!(SamplingParams::default().validate().is_ok());
    }
}
