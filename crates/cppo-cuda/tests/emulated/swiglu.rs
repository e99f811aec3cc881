//! Against cppo-model's `ops/swiglu.rs` formulas.

use cppo_cuda::ops::swiglu;
use cppo_cuda::DType::{Bf16, F32};

use crate::check::{as_stored, assert_close, read_f32, rng, store_rel, tunes, uniform, upload};
use crate::emu::Emu;

fn sig(g: f64) -> f64 {
    1.0 / (1.0 + (-g).exp())
}

#[test]
fn forward_and_backward_match_the_cpu_formulas() {
    let mut r = rng("swiglu");
    let n = 1237;
    let g0 = uniform(&mut r, n, -6.0, 6.0);
    let u0 = uniform(&mut r, n, -2.0, 2.0);
    let dy0 = uniform(&mut r, n, -1.0, 1.0);
    for t in tunes() {
        for (xd, yd) in [(F32, F32), (F32, Bf16), (Bf16, Bf16)] {
            let mut emu = Emu::new();
            let (g, u, dy) = (upload(&mut emu, &g0, xd), upload(&mut emu, &u0, xd), emu.upload(&dy0));
            let (gs, us) = (as_stored(&g0, xd), as_stored(&u0, xd));
            let y = emu.alloc(yd, n);
            swiglu::forward(&mut emu, &t, g, u, y, n).unwrap();
            let want: Vec<f64> = (0..n).map(|i| gs[i] as f64 * sig(gs[i] as f64) * us[i] as f64).collect();
            assert_close(&format!("swiglu {xd:?}->{yd:?}"), &read_f32(&emu, y), &want, store_rel(yd) + 1e-6, 1e-6);
            let (dg, du) = (emu.alloc(yd, n), emu.alloc(yd, n));
            swiglu::backward(&mut emu, &t, g, u, dy, dg, du, n).unwrap();
            let wdg: Vec<f64> = (0..n)
                .map(|i| {
                    let (gv, s) = (gs[i] as f64, sig(gs[i] as f64));
                    dy0[i] as f64 * us[i] as f64 * s * (1.0 + gv * (1.0 - s))
                })
                .collect();
            let wdu: Vec<f64> = (0..n).map(|i| dy0[i] as f64 * gs[i] as f64 * sig(gs[i] as f64)).collect();
            assert_close("swiglu dgate", &read_f32(&emu, dg), &wdg, store_rel(yd) + 1e-5, 1e-6);
            assert_close("swiglu dup", &read_f32(&emu, du), &wdu, store_rel(yd) + 1e-5, 1e-6);
        }
    }
}
