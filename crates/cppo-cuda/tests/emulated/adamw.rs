//! Against cppo-train's `AdamW::step`: the f64 gradient norm, the clipping coefficient, and the
//! update in its f32 operation order, over several flat buffers.

use cppo_cuda::ops::adamw::{self, Hyper};
use cppo_cuda::DType::{Bf16, F64};
use half::bf16;

use crate::check::{assert_close, rng, tunes, uniform};
use crate::emu::Emu;

struct Cpu {
    p: Vec<f32>,
    m: Vec<f32>,
    v: Vec<f32>,
}

/// cppo-train optim.rs `AdamUpdate::apply`, transcribed.
#[allow(clippy::too_many_arguments)]
fn cpu_update(s: &mut Cpu, g: &[f32], h: &Hyper, decay: bool, clip: f32) {
    let bc1 = (1.0 - h.beta1.powi(h.step as i32)) as f32;
    let bc2_sqrt = (1.0 - h.beta2.powi(h.step as i32)).sqrt() as f32;
    let (b1, b2, eps, lr) = (h.beta1 as f32, h.beta2 as f32, h.eps as f32, h.lr as f32);
    let decay = if decay { (h.lr * h.weight_decay) as f32 } else { 0.0 };
    let step = lr / bc1;
    for j in 0..s.p.len() {
        let g = g[j] * clip;
        s.m[j] = b1 * s.m[j] + (1.0 - b1) * g;
        s.v[j] = b2 * s.v[j] + (1.0 - b2) * g * g;
        let denom = s.v[j].sqrt() / bc2_sqrt + eps;
        s.p[j] = s.p[j] * (1.0 - decay) - step * s.m[j] / denom;
    }
}

#[test]
fn norm_clip_and_update_match_the_cpu_optimizer() {
    let mut r = rng("adamw");
    let lens = [1000, 37, 3];
    for t in tunes() {
        for (scale, max_norm) in [(1.0f32, Some(1.0)), (0.001, Some(1.0)), (1.0, None)] {
            let grads: Vec<Vec<f32>> = lens.iter().map(|&n| uniform(&mut r, n, -scale, scale)).collect();
            let norm = grads.iter().flatten().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
            let clip = match max_norm {
                Some(m) if norm > m => m / (norm + 1e-6),
                _ => 1.0,
            };
            let mut emu = Emu::new();
            let gb: Vec<_> = grads.iter().map(|g| emu.upload(g)).collect();
            let list: Vec<_> = gb.iter().zip(&lens).map(|(&b, &n)| (b, n)).collect();
            let partial = emu.alloc(F64, adamw::norm_scratch(&t, &lens));
            let stats = emu.alloc(F64, 2);
            adamw::grad_norm(&mut emu, &t, &list, partial, stats, max_norm).unwrap();
            let st = emu.read::<f64>(stats);
            assert!((st[0] - norm).abs() <= 1e-12 * norm, "norm {} vs {norm}", st[0]);
            assert!((st[1] - clip).abs() <= 1e-12, "clip {} vs {clip}", st[1]);
            for (i, (g, &n)) in grads.iter().zip(&lens).enumerate() {
                let h = Hyper { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.1, step: 3 + i as u64 };
                let decay = i == 0;
                let mut cpu = Cpu { p: uniform(&mut r, n, -1.0, 1.0), m: uniform(&mut r, n, -0.01, 0.01), v: uniform(&mut r, n, 0.0, 1e-4) };
                let (p, m, v) = (emu.upload(&cpu.p), emu.upload(&cpu.m), emu.upload(&cpu.v));
                let pb = emu.alloc(Bf16, n);
                adamw::update(&mut emu, &t, p, gb[i], m, v, Some(pb), n, &h, decay, stats).unwrap();
                cpu_update(&mut cpu, g, &h, decay, st[1] as f32);
                let f = |x: &Vec<f32>| x.iter().map(|&v| v as f64).collect::<Vec<f64>>();
                // The same f32 operations in the same order: equal up to the last bit or two.
                assert_close("p", &emu.read::<f32>(p), &f(&cpu.p), 2e-7, 1e-9);
                assert_close("m", &emu.read::<f32>(m), &f(&cpu.m), 2e-7, 1e-12);
                assert_close("v", &emu.read::<f32>(v), &f(&cpu.v), 2e-7, 1e-15);
                let bf: Vec<u16> = emu.read::<bf16>(pb).iter().map(|x| x.to_bits()).collect();
                let want: Vec<u16> = emu.read::<f32>(p).iter().map(|&x| bf16::from_f32(x).to_bits()).collect();
                assert_eq!(bf, want, "the bf16 copy is the rounded master weight");
            }
        }
    }
}

#[test]
fn a_non_finite_gradient_norm_updates_nothing() {
    let t = tunes()[1];
    let mut emu = Emu::new();
    let n = 100;
    let mut g0 = vec![0.5f32; n];
    g0[77] = f32::INFINITY;
    let g = emu.upload(&g0);
    let partial = emu.alloc(F64, adamw::norm_scratch(&t, &[n]));
    let stats = emu.alloc(F64, 2);
    adamw::grad_norm(&mut emu, &t, &[(g, n)], partial, stats, Some(1.0)).unwrap();
    assert!(!emu.read::<f64>(stats)[0].is_finite());
    let p0 = vec![0.25f32; n];
    let (p, m, v) = (emu.upload(&p0), emu.upload(&vec![0f32; n]), emu.upload(&vec![0f32; n]));
    let h = Hyper { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, step: 1 };
    adamw::update(&mut emu, &t, p, g, m, v, None, n, &h, true, stats).unwrap();
    assert_eq!(emu.read::<f32>(p), p0);
    assert_eq!(emu.read::<f32>(m), vec![0f32; n]);
}

#[test]
fn one_launch_over_many_tensors_matches_the_cpu_optimizer_per_tensor() {
    let mut r = rng("adamw_tensors");
    // Lengths around the chunk (one short, one exact, several chunks with a tail, an empty tensor),
    // placed in the flat buffers out of order and with a gap, so offsets are really used.
    let lens = [70usize, 64, 3, 200, 0];
    let offsets = [300usize, 0, 64, 67, 290];
    let total = 400;
    let h = Hyper { lr: 2e-3, beta1: 0.9, beta2: 0.99, eps: 1e-8, weight_decay: 0.1, step: 4 };
    for t in tunes() {
        let mut emu = Emu::new();
        let g = uniform(&mut r, total, -1.0, 1.0);
        let (m0, v0) = (uniform(&mut r, total, -0.01, 0.01), uniform(&mut r, total, 0.0, 1e-4));
        let (gb, mb, vb) = (emu.upload(&g), emu.upload(&m0), emu.upload(&v0));
        let mut cpu = Vec::new();
        let mut list = Vec::new();
        for (i, (&n, &off)) in lens.iter().zip(&offsets).enumerate() {
            let p = uniform(&mut r, n, -1.0, 1.0);
            let pb = (i % 2 == 0).then(|| emu.alloc(Bf16, n));
            list.push(adamw::Tensor { p: emu.upload(&p), p_bf16: pb, offset: off, decay: i != 1 });
            cpu.push(Cpu { p, m: m0[off..off + n].to_vec(), v: v0[off..off + n].to_vec() });
        }
        let table = adamw::TensorTable::new(&list, total, 64, &h).unwrap();
        assert_eq!(table.blocks(), 2 + 1 + 1 + 4);
        let up = [emu.upload(&table.tensors), emu.upload(&table.decays), emu.upload(&table.chunks)];
        let clip = 0.75;
        let stats = emu.upload(&[1.0f64, clip]);
        adamw::update_tensors(&mut emu, &t, &table, up, gb, mb, vb, &h, stats).unwrap();
        let (m1, v1) = (emu.read::<f32>(mb), emu.read::<f32>(vb));
        for (i, (c, x)) in cpu.iter_mut().zip(&list).enumerate() {
            let off = offsets[i];
            cpu_update(c, &g[off..off + lens[i]], &h, x.decay, clip as f32);
            let f = |x: &[f32]| x.iter().map(|&v| v as f64).collect::<Vec<f64>>();
            assert_close("p", &emu.read::<f32>(x.p), &f(&c.p), 2e-7, 1e-9);
            assert_close("m", &m1[off..off + lens[i]], &f(&c.m), 2e-7, 1e-12);
            assert_close("v", &v1[off..off + lens[i]], &f(&c.v), 2e-7, 1e-15);
            if let Some(pb) = x.p_bf16 {
                let bf: Vec<u16> = emu.read::<bf16>(pb).iter().map(|x| x.to_bits()).collect();
                let want: Vec<u16> = c.p.iter().map(|&x| bf16::from_f32(x).to_bits()).collect();
                assert_eq!(bf, want, "tensor {i}: the bf16 copy is the rounded master weight");
            }
        }
        // The gap between tensors (260..290 and 290..300 hold the empty tensor) is left alone.
        assert_eq!(&m1[267..300], &m0[267..300], "moments outside every tensor changed");
    }
}

#[test]
fn a_tensor_table_refuses_overlaps_and_tensors_past_the_flat_buffers() {
    let mut emu = Emu::cpu();
    let h = Hyper { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, step: 1 };
    let (a, b) = (emu.alloc(cppo_cuda::DType::F32, 10), emu.alloc(cppo_cuda::DType::F32, 10));
    let t = |p, offset| adamw::Tensor { p, p_bf16: None, offset, decay: true };
    assert!(adamw::TensorTable::new(&[t(a, 0), t(b, 10)], 20, 4, &h).is_ok());
    let overlap = adamw::TensorTable::new(&[t(a, 0), t(b, 9)], 20, 4, &h).unwrap_err().to_string();
    assert!(overlap.contains("overlap"), "{overlap}");
    let past = adamw::TensorTable::new(&[t(a, 0), t(b, 11)], 20, 4, &h).unwrap_err().to_string();
    assert!(past.contains("tensor 1"), "{past}");
    assert!(adamw::TensorTable::new(&[t(a, 0)], 20, 0, &h).is_err());
}
