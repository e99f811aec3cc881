//! Against cppo-model's `rope_rows` (rotate-half, f32 table from f32 inverse frequencies).

use cppo_cuda::ops::rope::{self, Table};
use cppo_cuda::DType::{Bf16, F32};
use rand::Rng;

use crate::check::{as_stored, assert_close, read_f32, rng, store_rel, tunes, uniform, upload};
use crate::emu::Emu;

/// cos and sin as cppo-model's `RopeTable::new` computes them (no scaling).
fn table(half: usize, positions: usize, theta: f64) -> (Vec<f32>, Vec<f32>) {
    let d = 2 * half;
    let inv: Vec<f32> = (0..half).map(|i| (1.0 / theta.powf((2 * i) as f64 / d as f64)) as f32).collect();
    let mut cos = Vec::new();
    let mut sin = Vec::new();
    for p in 0..positions {
        for &f in &inv {
            let a = (p as f32 * f) as f64;
            cos.push(a.cos() as f32);
            sin.push(a.sin() as f32);
        }
    }
    (cos, sin)
}

fn reference(x: &[f32], heads: usize, half: usize, pos: &[i32], cos: &[f32], sin: &[f32], inverse: bool) -> Vec<f64> {
    let d = 2 * half;
    let mut y: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    for (r, &p) in pos.iter().enumerate() {
        for h in 0..heads {
            let base = (r * heads + h) * d;
            for i in 0..half {
                let (x1, x2) = (x[base + i] as f64, x[base + half + i] as f64);
                let (c, s) = (cos[p as usize * half + i] as f64, sin[p as usize * half + i] as f64);
                let (a, b) = if inverse { (x1 * c + x2 * s, x2 * c - x1 * s) } else { (x1 * c - x2 * s, x2 * c + x1 * s) };
                y[base + i] = a;
                y[base + half + i] = b;
            }
        }
    }
    y
}

#[test]
fn rotates_each_head_by_its_rows_position_and_back() {
    let mut r = rng("rope");
    let (rows, heads, half, positions) = (11, 3, 7, 40);
    let (cos0, sin0) = table(half, positions, 10000.0);
    let x0 = uniform(&mut r, rows * heads * 2 * half, -2.0, 2.0);
    let pos0: Vec<i32> = (0..rows).map(|_| r.gen_range(0..positions as i32)).collect();
    for t in tunes() {
        for (xd, yd) in [(F32, F32), (F32, Bf16), (Bf16, Bf16)] {
            for inverse in [false, true] {
                let mut emu = Emu::new();
                let tab = Table { cos: emu.upload(&cos0), sin: emu.upload(&sin0), half, positions };
                let x = upload(&mut emu, &x0, xd);
                let pos = emu.upload(&pos0);
                let y = emu.alloc(yd, x0.len());
                rope::apply(&mut emu, &t, &tab, x, y, pos, positions, rows, heads, inverse).unwrap();
                let want = reference(&as_stored(&x0, xd), heads, half, &pos0, &cos0, &sin0, inverse);
                assert_close(&format!("rope {xd:?}->{yd:?} inverse={inverse}"), &read_f32(&emu, y), &want, store_rel(yd), 1e-6);
            }
        }
        // In place, forward then inverse: the identity (the backward of a rotation is its transpose).
        let mut emu = Emu::new();
        let tab = Table { cos: emu.upload(&cos0), sin: emu.upload(&sin0), half, positions };
        let x = emu.upload(&x0);
        let pos = emu.upload(&pos0);
        rope::apply(&mut emu, &t, &tab, x, x, pos, positions, rows, heads, false).unwrap();
        rope::apply(&mut emu, &t, &tab, x, x, pos, positions, rows, heads, true).unwrap();
        let want: Vec<f64> = x0.iter().map(|&v| v as f64).collect();
        assert_close("rope round trip", &emu.read::<f32>(x), &want, 1e-6, 1e-6);
    }
    let mut emu = Emu::new();
    let tab = Table { cos: emu.upload(&cos0), sin: emu.upload(&sin0), half, positions };
    let x = emu.upload(&x0);
    let pos = emu.upload(&pos0);
    assert!(rope::apply(&mut emu, &tunes()[0], &tab, x, x, pos, positions + 1, rows, heads, false).is_err(), "positions beyond the table");
}
