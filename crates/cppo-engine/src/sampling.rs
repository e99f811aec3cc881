//! Turning one row of logits into a token: temperature, top-k, top-p, greedy; and the log-prob of the
//! chosen token under the distribution it was drawn from.

use rand::Rng;
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
    pub max_new_tokens: usize,
    /// Stop when the decoded completion contains one of these; the completion is cut before it.
    pub stop: Vec<String>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams { temperature: 1.0, top_p: 1.0, top_k: 0, max_new_tokens: 256, stop: vec![] }
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
        if self.max_new_tokens == 0 {
            return Err("max_new_tokens must be at least 1".into());
        }
        if self.stop.iter().any(|s| s.is_empty()) {
            return Err("stop strings must not be empty".into());
        }
        Ok(())
    }
}

/// Picks a token from `logits`. The log-prob returned is that of the token under the distribution actually
/// sampled from: softmax(logits / T) restricted and renormalised to the top-k / top-p set; for greedy
/// decoding, under softmax(logits).
pub fn sample(logits: &[f32], params: &SamplingParams, rng: &mut impl Rng) -> (u32, f32) {
    if params.is_greedy() {
        let (best, _) = argmax(logits);
        return (best as u32, log_softmax_at(logits, 1.0, best));
    }
    let inv_t = (1.0 / params.temperature) as f32;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    // Unnormalised probabilities; everything below is relative to the max logit, so it cannot overflow.
    let mut probs: Vec<f32> = logits.iter().map(|&l| ((l - max) * inv_t).exp()).collect();
    let restricted = params.top_k > 0 && params.top_k < logits.len() || params.top_p < 1.0;
    if restricted {
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        let by_prob_desc = |a: &u32, b: &u32| probs[*b as usize].total_cmp(&probs[*a as usize]).then(a.cmp(b));
        let mut keep = logits.len();
        if params.top_k > 0 && params.top_k < keep {
            order.select_nth_unstable_by(params.top_k - 1, by_prob_desc);
            keep = params.top_k;
        }
        order.truncate(keep);
        order.sort_unstable_by(by_prob_desc);
        if params.top_p < 1.0 {
            let total: f64 = order.iter().map(|&i| probs[i as usize] as f64).sum();
            let mut acc = 0.0;
            let mut n = 0;
            for &i in &order {
                acc += probs[i as usize] as f64;
                n += 1;
                if acc >= params.top_p * total {
                    break;
                }
            }
            order.truncate(n.max(1));
        }
        let mut masked = vec![0f32; probs.len()];
        for &i in &order {
            masked[i as usize] = probs[i as usize];
        }
        probs = masked;
    }
    let total: f64 = probs.iter().map(|&p| p as f64).sum();
    let mut u = rng.gen::<f64>() * total;
    let mut chosen = 0;
    for (i, &p) in probs.iter().enumerate() {
        if p > 0.0 {
            chosen = i;
            u -= p as f64;
            if u < 0.0 {
                break;
            }
        }
    }
    let logprob = ((probs[chosen] as f64) / total).ln() as f32;
    (chosen as u32, logprob)
}

fn argmax(xs: &[f32]) -> (usize, f32) {
    let mut best = (0, f32::NEG_INFINITY);
    for (i, &x) in xs.iter().enumerate() {
        if x > best.1 {
            best = (i, x);
        }
    }
    best
}

/// log softmax(logits * inv_t)[at], computed stably in f64.
pub fn log_softmax_at(logits: &[f32], inv_t: f64, at: usize) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let lse: f64 = logits.iter().map(|&l| ((l as f64 - max) * inv_t).exp()).sum::<f64>().ln();
    ((logits[at] as f64 - max) * inv_t - lse) as f32
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

    #[test]
    fn invalid_parameters_are_reported() {
        assert!(SamplingParams { top_p: 0.0, ..Default::default() }.validate().is_err());
        assert!(SamplingParams { temperature: -1.0, ..Default::default() }.validate().is_err());
        assert!(SamplingParams { max_new_tokens: 0, ..Default::default() }.validate().is_err());
        assert!(SamplingParams { stop: vec![String::new()], ..Default::default() }.validate().is_err());
        assert!(SamplingParams::default().validate().is_ok());
    }
}
