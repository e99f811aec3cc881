use cppo_cuda::ops::elementwise;
use cppo_cuda::DType::{Bf16, F32};
use half::bf16;

use crate::check::{assert_close, rng, tunes, uniform, upload, read_f32};
use crate::emu::Emu;

/// bf16 rounding by integer arithmetic agrees with the `half` crate bit for bit, ties and NaN included.
#[test]
fn f32_to_bf16_rounds_to_nearest_even_as_half_does() {
    let mut r = rng("cast");
    let mut x = uniform(&mut r, 1001, -1e3, 1e3);
    // Exact ties (an even and an odd last kept bit), subnormals, infinities, the largest finite, NaN.
    x.extend([
        f32::from_bits(0x3f80_8000),
        f32::from_bits(0x3f81_8000),
        f32::from_bits(0x0000_8001),
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        -0.0,
    ]);
    for t in tunes() {
        let mut emu = Emu::new();
        let xb = emu.upload(&x);
        let y = emu.alloc(Bf16, x.len());
        elementwise::cast(&mut emu, &t, xb, y, x.len()).unwrap();
        let got: Vec<u16> = emu.read::<bf16>(y).iter().map(|v| v.to_bits()).collect();
        let want: Vec<u16> = x.iter().map(|&v| bf16::from_f32(v).to_bits()).collect();
        assert_eq!(got, want);
        let back = emu.alloc(F32, x.len());
        elementwise::cast(&mut emu, &t, y, back, x.len()).unwrap();
        let want: Vec<f32> = x.iter().map(|&v| bf16::from_f32(v).to_f32()).collect();
        assert_eq!(emu.read::<f32>(back).iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }
    let mut emu = Emu::new();
    let nan = emu.upload(&[f32::NAN, f32::from_bits(0x7f80_0001)]);
    let y = emu.alloc(Bf16, 2);
    elementwise::cast(&mut emu, &tunes()[0], nan, y, 2).unwrap();
    assert!(emu.read::<bf16>(y).iter().all(|v| v.is_nan()), "NaN must stay NaN, not round to infinity");
}

#[test]
fn fill_add_and_bias_cover_every_element_once() {
    let mut r = rng("add");
    let (rows, width) = (37, 29);
    let n = rows * width;
    let y0 = uniform(&mut r, n, -1.0, 1.0);
    let x0 = uniform(&mut r, n, -1.0, 1.0);
    let b0 = uniform(&mut r, width, -1.0, 1.0);
    for t in tunes() {
        for xd in [F32, Bf16] {
            let mut emu = Emu::new();
            let y = emu.upload(&y0);
            let x = upload(&mut emu, &x0, xd);
            let xs = crate::check::as_stored(&x0, xd);
            elementwise::add(&mut emu, &t, y, x, n).unwrap();
            let want: Vec<f64> = y0.iter().zip(&xs).map(|(&a, &b)| (a + b) as f64).collect();
            assert_close("add", &emu.read::<f32>(y), &want, 0.0, 0.0);
            let yb = upload(&mut emu, &y0, xd);
            let b = emu.upload(&b0);
            elementwise::add_bias(&mut emu, &t, yb, b, rows, width).unwrap();
            let ys = crate::check::as_stored(&y0, xd);
            let want: Vec<f64> = (0..n).map(|i| (ys[i] + b0[i % width]) as f64).collect();
            assert_close("add_bias", &read_f32(&emu, yb), &want, crate::check::store_rel(xd), 0.0);
        }
        let mut emu = Emu::new();
        let f = emu.alloc(F32, n);
        elementwise::fill(&mut emu, &t, f, 0.25, n).unwrap();
        assert!(emu.read::<f32>(f).iter().all(|&v| v == 0.25));
        // bf16 (a rollout KV cache is made so): 0.25 and 0 are exact in bf16.
        let h = emu.alloc(Bf16, n);
        elementwise::fill(&mut emu, &t, h, 0.25, n).unwrap();
        assert!(read_f32(&emu, h).iter().all(|&v| v == 0.25));
        elementwise::fill(&mut emu, &t, h, 0.0, n).unwrap();
        assert!(emu.read_bytes(h).iter().all(|&v| v == 0));
    }
}
