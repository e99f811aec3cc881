//! Against cppo-model's `ops/rms_norm.rs` formulas, in f64.

use cppo_cuda::ops::rms_norm::{self, Grads};
use cppo_cuda::DType::{self, Bf16, F32};

use crate::check::{as_stored, assert_close, read_f32, rng, store_rel, tunes, uniform, upload};
use crate::emu::Emu;

fn reference_forward(x: &[f32], w: &[f32], eps: f64) -> Vec<f64> {
    let d = w.len();
    x.chunks(d)
        .flat_map(|r| {
            let ss: f64 = r.iter().map(|&v| v as f64 * v as f64).sum();
            let rs = 1.0 / (ss / d as f64 + eps).sqrt();
            r.iter().zip(w).map(move |(&v, &wv)| v as f64 * rs * wv as f64).collect::<Vec<_>>()
        })
        .collect()
}

/// (dx, dw) of the CPU op's backward.
fn reference_backward(x: &[f32], w: &[f32], g: &[f32], eps: f64) -> (Vec<f64>, Vec<f64>) {
    let d = w.len();
    let mut dx = Vec::with_capacity(x.len());
    let mut dw = vec![0f64; d];
    for (xr, gr) in x.chunks(d).zip(g.chunks(d)) {
        let ss: f64 = xr.iter().map(|&v| v as f64 * v as f64).sum();
        let rs = 1.0 / (ss / d as f64 + eps).sqrt();
        let mean = (0..d).map(|c| gr[c] as f64 * w[c] as f64 * xr[c] as f64 * rs).sum::<f64>() / d as f64;
        for c in 0..d {
            dx.push(rs * (gr[c] as f64 * w[c] as f64 - xr[c] as f64 * rs * mean));
            dw[c] += gr[c] as f64 * xr[c] as f64 * rs;
        }
    }
    (dx, dw)
}

#[test]
fn forward_matches_the_cpu_formula() {
    let mut r = rng("rms_norm_fwd");
    let eps = 1e-6;
    for (rows, d) in [(7, 67), (5, 300), (1, 1)] {
        let x0 = uniform(&mut r, rows * d, -2.0, 2.0);
        let w0 = uniform(&mut r, d, 0.5, 1.5);
        for t in tunes() {
            for (xd, yd) in [(F32, F32), (F32, Bf16), (Bf16, Bf16)] {
                let mut emu = Emu::new();
                let x = upload(&mut emu, &x0, xd);
                let w = emu.upload(&w0);
                let y = emu.alloc(yd, rows * d);
                rms_norm::forward(&mut emu, &t, x, w, y, rows, d, eps as f32).unwrap();
                let want = reference_forward(&as_stored(&x0, xd), &w0, eps);
                assert_close(&format!("rms_norm {rows}x{d} {xd:?}->{yd:?} {t:?}"), &read_f32(&emu, y), &want, store_rel(yd) + 1e-5, 1e-6);
            }
        }
    }
}

#[test]
fn backward_matches_the_cpu_formula_with_and_without_accumulation() {
    let mut r = rng("rms_norm_bwd");
    let eps = 1e-5;
    for (rows, d) in [(9, 67), (3, 260)] {
        let x0 = uniform(&mut r, rows * d, -2.0, 2.0);
        let w0 = uniform(&mut r, d, 0.5, 1.5);
        let g0 = uniform(&mut r, rows * d, -1.0, 1.0);
        let dx0 = uniform(&mut r, rows * d, -1.0, 1.0);
        let dw0 = uniform(&mut r, d, -1.0, 1.0);
        for t in tunes() {
            for xd in [F32, Bf16] {
                for acc in [false, true] {
                    let mut emu = Emu::new();
                    let x = upload(&mut emu, &x0, xd);
                    let w = emu.upload(&w0);
                    let g = emu.upload(&g0);
                    let dx = if acc { emu.upload(&dx0) } else { emu.alloc(F32, rows * d) };
                    let dw = if acc { emu.upload(&dw0) } else { emu.alloc(F32, d) };
                    let scratch = emu.alloc(F32, rms_norm::backward_scratch(&t, rows, d));
                    let out = Grads { dx, accumulate_dx: acc, dw: Some((dw, scratch)), accumulate_dw: acc };
                    rms_norm::backward(&mut emu, &t, x, w, g, &out, rows, d, eps as f32).unwrap();
                    let (wdx, wdw) = reference_backward(&as_stored(&x0, xd), &w0, &g0, eps);
                    let wdx: Vec<f64> = wdx.iter().zip(&dx0).map(|(&v, &a)| if acc { v + a as f64 } else { v }).collect();
                    let wdw: Vec<f64> = wdw.iter().zip(&dw0).map(|(&v, &a)| if acc { v + a as f64 } else { v }).collect();
                    let what = format!("rms_norm_bwd {rows}x{d} {xd:?} acc={acc} {t:?}");
                    // Sums of `d` (dx) and `rows` (dw) terms of size ~1 in f32.
                    assert_close(&format!("{what} dx"), &emu.read::<f32>(dx), &wdx, 1e-5, 1e-5);
                    assert_close(&format!("{what} dw"), &emu.read::<f32>(dw), &wdw, 1e-5, 1e-5);
                }
            }
        }
    }
}

#[test]
fn a_frozen_weight_gets_no_gradient_and_shapes_are_checked_before_launch() {
    let t = tunes()[1];
    let mut emu = Emu::new();
    let (rows, d) = (4, 40);
    let x = emu.upload(&vec![1f32; rows * d]);
    let w = emu.upload(&vec![1f32; d]);
    let g = emu.upload(&vec![1f32; rows * d]);
    let dx = emu.alloc(F32, rows * d);
    let out = Grads { dx, accumulate_dx: false, dw: None, accumulate_dw: false };
    rms_norm::backward(&mut emu, &t, x, w, g, &out, rows, d, 1e-6).unwrap();
    assert_eq!(emu.launches, ["rms_norm_bwd_f32"]);
    // Constant rows normalise to constants, whose gradient along g = 1 vanishes.
    assert_close("dx", &emu.read::<f32>(dx), &vec![0.0; rows * d], 0.0, 1e-6);
    let short = emu.alloc(F32, rows * d - 1);
    let y = emu.alloc(DType::I32, rows * d);
    assert!(rms_norm::forward(&mut emu, &t, short, w, dx, rows, d, 1e-6).is_err());
    assert!(rms_norm::forward(&mut emu, &t, x, w, y, rows, d, 1e-6).is_err());
    assert_eq!(emu.launches.len(), 1);
}
