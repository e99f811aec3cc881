//! Against cppo-engine's `sample` (sampling.rs), transcribed below, given the same uniform draw:
//! the same token and log-prob, ties in top-k and top-p broken the same way.

use cppo_cuda::ops::sample::{sample, Params};
use cppo_cuda::DType::{F32, I32};
use rand::Rng;

use crate::check::{rng, tunes};
use crate::emu::Emu;

/// cppo-engine sampling.rs `sample`, with `rng.gen::<f64>()` replaced by `draw`.
fn cpu_sample(logits: &[f32], p: &Params, draw: f64) -> (u32, f32) {
    if p.temperature <= 0.0 {
        let mut best = (0, f32::NEG_INFINITY);
        for (i, &x) in logits.iter().enumerate() {
            if x > best.1 {
                best = (i, x);
            }
        }
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let lse: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum::<f64>().ln();
        return (best.0 as u32, ((logits[best.0] as f64 - max) - lse) as f32);
    }
    let inv_t = (1.0 / p.temperature) as f32;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut probs: Vec<f32> = logits.iter().map(|&l| ((l - max) * inv_t).exp()).collect();
    let restricted = p.top_k > 0 && p.top_k < logits.len() || p.top_p < 1.0;
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
        let mut masked = vec![0f32; probs.len()];
        for &i in &order {
            masked[i as usize] = probs[i as usize];
        }
        probs = masked;
    }
    let total: f64 = probs.iter().map(|&p| p as f64).sum();
    let mut u = draw * total;
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
    (chosen as u32, ((probs[chosen] as f64) / total).ln() as f32)
}

#[test]
fn draws_the_cpu_samplers_token_for_the_same_uniform() {
    let mut r = rng("sample");
    let (rows, vocab) = (5, 333);
    let params = [
        Params { temperature: 0.0, top_p: 1.0, top_k: 0 },
        Params { temperature: 1.0, top_p: 1.0, top_k: 0 },
        Params { temperature: 0.7, top_p: 1.0, top_k: 5 },
        Params { temperature: 1.3, top_p: 1.0, top_k: 40 },
        Params { temperature: 1.0, top_p: 0.9, top_k: 0 },
        Params { temperature: 0.8, top_p: 0.5, top_k: 20 },
        Params { temperature: 1.0, top_p: 0.999, top_k: 0 },
        Params { temperature: 1.0, top_p: 0.3, top_k: 1 },
    ];
    let mut compared = 0;
    for (pi, p) in params.iter().enumerate() {
        for round in 0..4 {
            // Half the rounds quantised logits: many exact ties, so top-k and top-p cut through groups
            // of equal probability and the lower index must win.
            let logits: Vec<f32> = (0..rows * vocab)
                .map(|_| if round % 2 == 0 { r.gen_range(-8..8) as f32 * 0.5 } else { r.gen_range(-6.0..6.0) })
                .collect();
            let draws: Vec<f64> = (0..rows).map(|_| r.gen::<f64>()).collect();
            // The default geometry (256 threads) once per parameter set, small ones otherwise.
            let t = if round == 0 { tunes()[0] } else { tunes()[1 + round % 2] };
            let mut emu = Emu::new();
            let lb = emu.upload(&logits);
            let probs = emu.alloc(F32, rows * vocab);
            let u = emu.upload(&draws);
            let (tok, lp) = (emu.alloc(I32, rows), emu.alloc(F32, rows));
            sample(&mut emu, &t, lb, probs, u, tok, lp, rows, vocab, p).unwrap();
            let (tv, lv) = (emu.read::<i32>(tok), emu.read::<f32>(lp));
            for row in 0..rows {
                let (wt, wl) = cpu_sample(&logits[row * vocab..][..vocab], p, draws[row]);
                assert_eq!(tv[row] as u32, wt, "params {pi} {p:?} round {round} row {row}: token");
                assert!((lv[row] - wl).abs() <= 1e-6 * wl.abs().max(1.0), "params {pi} row {row}: log-prob {} vs {wl}", lv[row]);
                compared += 1;
            }
        }
    }
    assert_eq!(compared, params.len() * 4 * rows);
}

#[test]
fn boundary_draws_pick_the_first_and_last_kept_tokens() {
    // u = 0 takes the first kept index; u just below 1 the last kept one.
    let logits: Vec<f32> = vec![0.0, 3.0, 1.0, 3.0, -1.0, 2.0, 3.0];
    let p = Params { temperature: 1.0, top_p: 1.0, top_k: 4 };
    let mut emu = Emu::new();
    let lb = emu.upload(&[logits.clone(), logits.clone()].concat());
    let probs = emu.alloc(F32, 14);
    let u = emu.upload(&[0.0f64, 1.0 - 1e-12]);
    let (tok, lp) = (emu.alloc(I32, 2), emu.alloc(F32, 2));
    sample(&mut emu, &tunes()[1], lb, probs, u, tok, lp, 2, 7, &p).unwrap();
    // The top 4: the three 3.0s (indices 1, 3, 6) and the 2.0 (index 5).
    assert_eq!(emu.read::<i32>(tok), vec![1, 6]);
}
