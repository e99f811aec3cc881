//! The chunked log-softmax composed with stand-in products (one vocabulary chunk of logits at a time)
//! against cppo-model's `token_logprobs` semantics in f64: log-probs, entropies, and the gradients of
//! the hidden rows (scattered back through the gather, repeated rows adding up) and of lm_head.

use cppo_cuda::index::Segments;
use cppo_cuda::ops::{logprob, rows};
use cppo_cuda::DType::{Bf16, F32};
use rand::Rng;

use crate::check::{assert_close, read_f32, rng, tunes, uniform};
use crate::emu::Emu;

/// `z (slots x n) = hs (slots x width) @ w[v0 .. v0 + n]^T`, in f32 as the product writes it.
fn logits(hs: &[f32], w: &[f32], width: usize, v0: usize, n: usize) -> Vec<f32> {
    let slots = hs.len() / width;
    let mut z = vec![0f32; slots * n];
    for s in 0..slots {
        for c in 0..n {
            z[s * n + c] = hs[s * width..][..width].iter().zip(&w[(v0 + c) * width..][..width]).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() as f32;
        }
    }
    z
}

#[test]
fn chunked_log_softmax_matches_the_whole_softmax_forward_and_backward() {
    let mut r = rng("logprob");
    let (hrows, width, vocab, chunk) = (9, 12, 50, 16);
    let h0 = uniform(&mut r, hrows * width, -1.0, 1.0);
    let w0 = uniform(&mut r, vocab * width, -1.0, 1.0);
    // Slots: hidden rows (one repeated), targets (the first and last column among them), output slots.
    let srows: Vec<usize> = vec![0, 2, 3, 6, 6, 8, 1];
    let slots = srows.len();
    let targets: Vec<i32> = vec![4, 49, 0, 17, 33, 16, r.gen_range(0..vocab as i32)];
    let out_len = 10;
    let out_index: Vec<i32> = vec![9, 0, 2, 3, 4, 7, 5];
    let gout0 = uniform(&mut r, out_len, -1.0, 1.0);
    // Reference, in f64 over whole rows of logits.
    let (mut w_out, mut w_lse, mut w_ent) = (vec![0.0; out_len], vec![0.0; slots], vec![0.0; slots]);
    let (mut w_dh, mut w_dw) = (vec![0.0; hrows * width], vec![0.0; vocab * width]);
    for s in 0..slots {
        let hs = &h0[srows[s] * width..][..width];
        let z: Vec<f64> = (0..vocab).map(|v| hs.iter().zip(&w0[v * width..][..width]).map(|(&a, &b)| a as f64 * b as f64).sum()).collect();
        let mx = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lse = mx + z.iter().map(|x| (x - mx).exp()).sum::<f64>().ln();
        let p: Vec<f64> = z.iter().map(|x| (x - lse).exp()).collect();
        w_out[out_index[s] as usize] = z[targets[s] as usize] - lse;
        w_lse[s] = lse;
        w_ent[s] = -p.iter().zip(&z).map(|(pi, zi)| pi * (zi - lse)).sum::<f64>();
        let g = gout0[out_index[s] as usize] as f64;
        for v in 0..vocab {
            let dz = g * ((v == targets[s] as usize) as u8 as f64 - p[v]);
            for c in 0..width {
                w_dh[srows[s] * width + c] += dz * w0[v * width + c] as f64;
                w_dw[v * width + c] += dz * hs[c] as f64;
            }
        }
    }
    let seg = Segments::by_target(&srows.iter().map(|&x| x as u32).collect::<Vec<_>>());
    for t in tunes() {
        for dzd in [F32, Bf16] {
            let mut emu = Emu::new();
            let h = emu.upload(&h0);
            let ids = emu.upload(&srows.iter().map(|&x| x as i32).collect::<Vec<_>>());
            let hs_b = emu.alloc(F32, slots * width);
            rows::gather(&mut emu, &t, h, hrows, ids, hs_b, slots, width).unwrap();
            let hs = emu.read::<f32>(hs_b);
            let (tg, oi) = (emu.upload(&targets), emu.upload(&out_index));
            let state = emu.alloc(F32, 4 * slots);
            let mut v0 = 0;
            while v0 < vocab {
                let n = chunk.min(vocab - v0);
                let z = emu.upload(&logits(&hs, &w0, width, v0, n));
                logprob::chunk(&mut emu, &t, z, tg, state, slots, n, v0, vocab).unwrap();
                v0 += n;
            }
            let (out, lse, ent) = (emu.alloc(F32, out_len), emu.alloc(F32, slots), emu.alloc(F32, slots));
            logprob::finish(&mut emu, &t, state, oi, out, out_len, lse, Some(ent), slots).unwrap();
            assert_close("log-probs", &emu.read::<f32>(out), &w_out, 1e-5, 1e-5);
            assert_close("lse", &emu.read::<f32>(lse), &w_lse, 1e-5, 1e-5);
            assert_close("entropy", &emu.read::<f32>(ent), &w_ent, 1e-4, 1e-5);
            // Backward: per chunk dz, then dhs += dz w_chunk and dw_chunk = dz^T hs (stand-in products).
            let gout = emu.upload(&gout0);
            let mut dhs = vec![0f32; slots * width];
            let mut dw = vec![0f32; vocab * width];
            let mut v0 = 0;
            while v0 < vocab {
                let n = chunk.min(vocab - v0);
                let z = emu.upload(&logits(&hs, &w0, width, v0, n));
                let dz_b = emu.alloc(dzd, slots * n);
                logprob::backward_chunk(&mut emu, &t, z, lse, gout, out_len, oi, tg, dz_b, slots, n, v0, vocab).unwrap();
                let dz = read_f32(&emu, dz_b);
                for s in 0..slots {
                    for c in 0..n {
                        for e in 0..width {
                            dhs[s * width + e] += dz[s * n + c] * w0[(v0 + c) * width + e];
                            dw[(v0 + c) * width + e] += dz[s * n + c] * hs[s * width + e];
                        }
                    }
                }
                v0 += n;
            }
            let dh = emu.upload(&vec![0f32; hrows * width]);
            let dhs_b = emu.upload(&dhs);
            let dev = [emu.upload(&seg.dst), emu.upload(&seg.seg), emu.upload(&seg.src)];
            rows::index_add(&mut emu, &t, dh, hrows, dhs_b, &seg, dev, width).unwrap();
            // bf16 dz: each term of the products rounded by up to 2^-9, sums of ~50 terms of ~0.1.
            let tol = if dzd == Bf16 { 5e-3 } else { 2e-5 };
            assert_close(&format!("dh {dzd:?}"), &emu.read::<f32>(dh), &w_dh, 0.0, tol);
            assert_close(&format!("dw {dzd:?}"), &dw, &w_dw, 0.0, tol);
        }
    }
}

#[test]
fn the_cpu_chunk_rule_is_kept() {
    assert_eq!(logprob::chunk_cols(16, 5, 50), 16);
    assert_eq!(logprob::chunk_cols(0, 5, 50), 50);
    assert_eq!(logprob::chunk_cols(0, 16384, 151936), 256);
    assert_eq!(logprob::chunk_cols(0, 100, 151936), 20971);
}
