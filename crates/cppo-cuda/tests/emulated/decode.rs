//! The cache (bf16, and f32 as the `Backend` trait keeps it) and the decode-time attention against a
//! plain softmax attention over the same (stored) keys and values, with prompts shared between rows
//! and without.

use cppo_cuda::ops::decode::{self, CacheShape, Keys, Segment};
use cppo_cuda::DType::{Bf16, F32};
use half::bf16;
use rand::Rng;

use crate::check::{as_stored, assert_close, read_f32, rng, store_rel, tunes, uniform, upload};
use crate::emu::Emu;

#[test]
fn appended_keys_land_where_the_cpu_cache_keeps_them() {
    let mut r = rng("kv_append");
    let c = CacheShape { rows: 3, kv_heads: 2, max_len: 9, head_dim: 20 };
    let slots = [(2usize, 0usize), (0, 8), (1, 3), (2, 1), (0, 0)];
    let width = c.kv_heads * c.head_dim;
    let k0 = uniform(&mut r, slots.len() * width, -1.0, 1.0);
    let v0 = uniform(&mut r, slots.len() * width, -1.0, 1.0);
    for t in tunes() {
        for (kd, cd) in [(F32, Bf16), (Bf16, Bf16), (F32, F32)] {
            let mut emu = Emu::new();
            let (k, v) = (upload(&mut emu, &k0, kd), upload(&mut emu, &v0, kd));
            let kc = upload(&mut emu, &vec![0.0; c.elements()], cd);
            let vc = upload(&mut emu, &vec![0.0; c.elements()], cd);
            let rows = emu.upload(&slots.iter().map(|s| s.0 as i32).collect::<Vec<_>>());
            let pos = emu.upload(&slots.iter().map(|s| s.1 as i32).collect::<Vec<_>>());
            decode::append(&mut emu, &t, &c, k, v, kc, vc, rows, pos, &slots).unwrap();
            let mut wk = vec![0f32; c.elements()];
            let mut wv = vec![0f32; c.elements()];
            for (ti, &(row, p)) in slots.iter().enumerate() {
                for kh in 0..c.kv_heads {
                    for e in 0..c.head_dim {
                        let dst = ((row * c.kv_heads + kh) * c.max_len + p) * c.head_dim + e;
                        // A bf16 input or a bf16 cache rounds once; f32 into f32 is exact.
                        let round = |x: f32| if kd == Bf16 || cd == Bf16 { bf16::from_f32(x).to_f32() } else { x };
                        wk[dst] = round(k0[ti * width + kh * c.head_dim + e]);
                        wv[dst] = round(v0[ti * width + kh * c.head_dim + e]);
                    }
                }
            }
            assert_eq!(read_f32(&emu, kc), wk);
            assert_eq!(read_f32(&emu, vc), wv);
            assert!(decode::append(&mut emu, &t, &c, k, v, kc, vc, rows, pos, &[(3, 0); 5]).is_err(), "row beyond the cache");
        }
    }
}

#[test]
fn decode_attention_matches_softmax_attention_over_shared_and_own_keys() {
    let mut r = rng("decode_attention");
    let c = CacheShape { rows: 4, kv_heads: 2, max_len: 13, head_dim: 20 };
    let heads = 6;
    let d = c.head_dim;
    let scale = 1.0 / (d as f32).sqrt();
    let kc_raw = uniform(&mut r, c.elements(), -1.5, 1.5);
    let vc_raw = uniform(&mut r, c.elements(), -1.0, 1.0);
    // Row 0 holds a prompt of 7 positions shared by rows 1 and 2 (their own keys from position 0);
    // row 3 is a sequence of its own, whole in its row.
    let keys = [
        Keys { prompt: Some(Segment { row: 0, start: 0, len: 7 }), own: Segment { row: 1, start: 0, len: 3 } },
        Keys { prompt: Some(Segment { row: 0, start: 0, len: 7 }), own: Segment { row: 2, start: 0, len: 1 } },
        Keys { prompt: None, own: Segment { row: 3, start: 0, len: 13 } },
        Keys { prompt: Some(Segment { row: 0, start: 0, len: 5 }), own: Segment { row: 1, start: 2, len: r.gen_range(1..5) } },
    ];
    let n = keys.len();
    let q0 = uniform(&mut r, n * heads * d, -1.5, 1.5);
    let at = |row: usize, kh: usize, p: usize| ((row * c.kv_heads + kh) * c.max_len + p) * d;
    for t in tunes() {
        for (qd, cd, od) in [(F32, Bf16, F32), (F32, Bf16, Bf16), (Bf16, Bf16, Bf16), (F32, F32, F32)] {
            let qs = as_stored(&q0, qd);
            let (kc0, vc0) = (as_stored(&kc_raw, cd), as_stored(&vc_raw, cd));
            let mut want = vec![0f64; n * heads * d];
            for (i, k) in keys.iter().enumerate() {
                for h in 0..heads {
                    let kh = h / (heads / c.kv_heads);
                    let pos: Vec<usize> = k.prompt.iter().chain([&k.own]).flat_map(|s| (s.start..s.start + s.len).map(move |p| at(s.row, kh, p))).collect();
                    let qv = &qs[(i * heads + h) * d..][..d];
                    let sc: Vec<f64> = pos.iter().map(|&o| (0..d).map(|e| qv[e] as f64 * kc0[o + e] as f64).sum::<f64>() * scale as f64).collect();
                    let mx = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let z: f64 = sc.iter().map(|x| (x - mx).exp()).sum();
                    for (j, &o) in pos.iter().enumerate() {
                        for e in 0..d {
                            want[(i * heads + h) * d + e] += (sc[j] - mx).exp() / z * vc0[o + e] as f64;
                        }
                    }
                }
            }
            let mut emu = Emu::new();
            let q = upload(&mut emu, &q0, qd);
            let kc = upload(&mut emu, &kc0, cd);
            let vc = upload(&mut emu, &vc0, cd);
            let segs = emu.upload(&decode::segment_table(&keys));
            let out = emu.alloc(od, n * heads * d);
            decode::attention(&mut emu, &t, &c, heads, q, kc, vc, out, segs, &keys, scale).unwrap();
            assert_close(&format!("decode attention {qd:?} over {cd:?} -> {od:?} {t:?}"), &read_f32(&emu, out), &want, store_rel(od), 2e-6);
        }
    }
}
