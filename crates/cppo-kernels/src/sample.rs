//! Turning one row of logits into a token, given the row's uniform draw: temperature, top-k, top-p,
//! greedy; and the log-prob of the chosen token under the distribution it was drawn from. This is the
//! host reference of the device's `sample_rows` kernel (cppo-cuda `kernels/sample.cu`), and the
//! sampler of every host backend; the engine draws `u` from each sample's own seeded RNG, so where the
//! logits live does not change which token a seed gives.

use rayon::prelude::*;

/// What the sampler sees of the engine's sampling parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleParams {
    /// 0 means greedy.
    pub temperature: f64,
    /// Nucleus sampling: keep the shortest prefix (by probability) whose mass reaches `top_p` (1 disables).
    pub top_p: f64,
    /// Keep the `top_k` most likely tokens (0 disables).
    pub top_k: usize,
    /// After top-k and top-p, keep the tokens whose probability is at least `min_p` times the largest
    /// (0 disables), as transformers' `MinPLogitsWarper`.
    pub min_p: f64,
    /// transformers' `repetition_penalty` (1 disables): before anything else, each logit of a token
    /// already in the row (prompt or completion) is divided by it when >= 0 and multiplied by it when
    /// < 0 (`penalize`); the log-prob is then that of the penalised distribution.
    pub repetition_penalty: f64,
}

impl Default for SampleParams {
    fn default() -> Self {
        SampleParams { temperature: 1.0, top_p: 1.0, top_k: 0, min_p: 0.0, repetition_penalty: 1.0 }
    }
}

impl SampleParams {
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    /// Whether the rows' earlier tokens change the logits (a penalty other than 1).
    pub fn penalises(&self) -> bool {
        self.repetition_penalty != 1.0
    }
}

/// transformers' `RepetitionPenaltyLogitsProcessor` on one row: every distinct token of `seen` has its
/// logit z replaced by z * penalty if z < 0, else z / penalty (in f32, as torch on f32 logits). A
/// token listed twice is penalised once.
pub fn penalize(row: &mut [f32], seen: &[u32], penalty: f64) {
    let p = penalty as f32;
    let mut done = std::collections::HashSet::with_capacity(seen.len());
    for &t in seen {
        if let Some(z) = row.get_mut(t as usize) {
            if done.insert(t) {
                *z = if *z < 0.0 { *z * p } else { *z / p };
            }
        }
    }
}

/// The token drawn from `logits` with the uniform draw `u` in [0, 1) (unused when greedy) and its
/// log-prob: under softmax(logits / T) restricted and renormalised to the top-k / top-p set; for
/// greedy decoding, the first index of the largest logit under softmax(logits).
pub fn sample_row(logits: &[f32], p: &SampleParams, u: f64) -> (u32, f32) {
    if p.is_greedy() {
        let (best, _) = argmax(logits);
        return (best as u32, log_softmax_at(logits, 1.0, best));
    }
    let inv_t = (1.0 / p.temperature) as f32;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    // Unnormalised probabilities; everything below is relative to the max logit, so it cannot overflow.
    let mut probs: Vec<f32> = logits.iter().map(|&l| ((l - max) * inv_t).exp()).collect();
    let restricted = p.top_k > 0 && p.top_k < logits.len() || p.top_p < 1.0 || p.min_p > 0.0;
    if restricted {
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        let by_prob_desc = |a: &u32, b: &u32| probs[*b as usize].total_cmp(&probs[*a as usize]).then(a.cmp(b));
        let mut keep = logits.len();
        if p.top_k > 0 && p.top_k < keep {
            order.select_nth_unstable_by(p.top_k - 1, by_prob_desc);
            keep = p.top_k;
        }
        order.truncate(keep);
        order.sort_unstable_by(by_prob_desc);
        if p.top_p < 1.0 {
            let total: f64 = order.iter().map(|&i| probs[i as usize] as f64).sum();
            let mut acc = 0.0;
            let mut n = 0;
            for &i in &order {
                acc += probs[i as usize] as f64;
                n += 1;
                if acc >= p.top_p * total {
                    break;
                }
            }
            order.truncate(n.max(1));
        }
        if p.min_p > 0.0 {
            // The largest unnormalised probability is exactly 1 (the max logit's), and it is kept.
            order.retain(|&i| probs[i as usize] as f64 >= p.min_p);
        }
        let mut masked = vec![0f32; probs.len()];
        for &i in &order {
            masked[i as usize] = probs[i as usize];
        }
        probs = masked;
    }
    let total: f64 = probs.iter().map(|&p| p as f64).sum();
    let mut left = u * total;
    let mut chosen = 0;
    for (i, &p) in probs.iter().enumerate() {
        if p > 0.0 {
            chosen = i;
            left -= p as f64;
            if left < 0.0 {
                break;
            }
        }
    }
    let logprob = ((probs[chosen] as f64) / total).ln() as f32;
    (chosen as u32, logprob)
}

/// `sample_row` over every row of `logits (draws.len() x vocab)`, rows in parallel. With a repetition
/// penalty, `seen[r]` holds row r's earlier tokens (prompt and completion so far) and the row is
/// penalised (`penalize`) before it is sampled; without one, `seen` is ignored and may be empty.
pub fn sample_rows(logits: &[f32], vocab: usize, draws: &[f64], p: &SampleParams, seen: &[&[u32]]) -> Vec<(u32, f32)> {
    assert_eq!(logits.len(), draws.len() * vocab, "sample_rows: {} logits for {} rows of {vocab}", logits.len(), draws.len());
    let rows = logits.par_chunks(vocab.max(1)).zip(draws.par_iter()).enumerate();
    if !p.penalises() {
        return rows.map(|(_, (row, &u))| sample_row(row, p, u)).collect();
    }
    assert_eq!(seen.len(), draws.len(), "sample_rows: a repetition penalty needs every row's earlier tokens");
    rows.map(|(r, (row, &u))| sample_row_after(row, seen[r], p, u)).collect()
}

/// `sample_row` on a copy of `logits` penalised on the row's earlier tokens `seen` when `p` has a
/// repetition penalty (the logits themselves are left as they are: they may be shared).
pub fn sample_row_after(logits: &[f32], seen: &[u32], p: &SampleParams, u: f64) -> (u32, f32) {
    if !p.penalises() {
        return sample_row(logits, p, u);
    }
    let mut row = logits.to_vec();
    penalize(&mut row, seen, p.repetition_penalty);
    sample_row(&row, p, u)
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
