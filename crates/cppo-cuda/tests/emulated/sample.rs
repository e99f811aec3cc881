//! Against the host sampler (`cppo_kernels::sample::sample_row`, which the engine uses), given the
//! same uniform draw: the same token and log-prob, ties in top-k and top-p broken the same way.

use cppo_cuda::ops::sample::{repetition_penalty, sample};
use cppo_kernels::sample::{penalize, sample_row as cpu_sample, SampleParams};
use cppo_cuda::DType::{F32, I32};
use rand::Rng;

use crate::check::{rng, tunes};
use crate::emu::Emu;

#[test]
fn draws_the_cpu_samplers_token_for_the_same_uniform() {
    let mut r = rng("sample");
    let (rows, vocab) = (5, 333);
    let params = [
        SampleParams { temperature: 0.0, top_p: 1.0, top_k: 0, ..Default::default() },
        SampleParams { temperature: 1.0, top_p: 1.0, top_k: 0, ..Default::default() },
        SampleParams { temperature: 0.7, top_p: 1.0, top_k: 5, ..Default::default() },
        SampleParams { temperature: 1.3, top_p: 1.0, top_k: 40, ..Default::default() },
        SampleParams { temperature: 1.0, top_p: 0.9, top_k: 0, ..Default::default() },
        SampleParams { temperature: 0.8, top_p: 0.5, top_k: 20, ..Default::default() },
        SampleParams { temperature: 1.0, top_p: 0.999, top_k: 0, ..Default::default() },
        SampleParams { temperature: 1.0, top_p: 0.3, top_k: 1, ..Default::default() },
        SampleParams { temperature: 1.0, min_p: 0.1, ..Default::default() },
        SampleParams { temperature: 0.6, top_k: 30, min_p: 0.02, ..Default::default() },
        SampleParams { temperature: 1.2, top_p: 0.8, min_p: 0.3, ..Default::default() },
        SampleParams { temperature: 0.0, min_p: 0.5, ..Default::default() },
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
    let p = SampleParams { temperature: 1.0, top_p: 1.0, top_k: 4, ..Default::default() };
    let mut emu = Emu::new();
    let lb = emu.upload(&[logits.clone(), logits.clone()].concat());
    let probs = emu.alloc(F32, 14);
    let u = emu.upload(&[0.0f64, 1.0 - 1e-12]);
    let (tok, lp) = (emu.alloc(I32, 2), emu.alloc(F32, 2));
    sample(&mut emu, &tunes()[1], lb, probs, u, tok, lp, 2, 7, &p).unwrap();
    // The top 4: the three 3.0s (indices 1, 3, 6) and the 2.0 (index 5).
    assert_eq!(emu.read::<i32>(tok), vec![1, 6]);
}

/// The penalty kernel against the host's `penalize` on fresh logits of both signs: each listed flat
/// index changed once by transformers' rule, every other logit untouched, bit for bit.
#[test]
fn repetition_penalty_matches_the_host_rule() {
    let mut r = rng("repetition-penalty");
    let (rows, vocab) = (4, 257);
    for round in 0..4 {
        let logits: Vec<f32> = (0..rows * vocab).map(|_| r.gen_range(-6.0f32..6.0)).collect();
        let penalty = [1.3, 0.7, 2.0, 1.05][round];
        let seen: Vec<Vec<u32>> = (0..rows).map(|_| (0..r.gen_range(0..40)).map(|_| r.gen_range(0..vocab as u32)).collect()).collect();
        let mut want = logits.clone();
        let mut at: Vec<i32> = Vec::new();
        for (row, tokens) in seen.iter().enumerate() {
            penalize(&mut want[row * vocab..(row + 1) * vocab], tokens, penalty);
            let mut distinct = tokens.clone();
            distinct.sort_unstable();
            distinct.dedup();
            at.extend(distinct.iter().map(|&t| (row * vocab + t as usize) as i32));
        }
        let mut emu = Emu::new();
        let lb = emu.upload(&logits);
        let ab = emu.upload(&at);
        repetition_penalty(&mut emu, &tunes()[round % 3], lb, ab, at.len(), rows, vocab, penalty as f32).unwrap();
        let got = emu.read::<f32>(lb);
        for i in 0..rows * vocab {
            assert_eq!(got[i].to_bits(), want[i].to_bits(), "round {round} index {i}: {} vs {}", got[i], want[i]);
        }
    }
}
