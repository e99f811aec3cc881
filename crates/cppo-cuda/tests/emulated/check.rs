//! Inputs and comparisons: fresh random inputs every run (the seed is printed, and `CPPO_TEST_SEED`
//! replays it), outputs poisoned with NaN by the allocator, NaN never passing a comparison.

use half::bf16;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use cppo_cuda::{Tune, DType};

pub fn rng(test: &str) -> ChaCha8Rng {
    let seed = std::env::var("CPPO_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    });
    eprintln!("{test}: CPPO_TEST_SEED={seed}");
    ChaCha8Rng::seed_from_u64(seed)
}

pub fn uniform(r: &mut impl Rng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| r.gen_range(lo..hi)).collect()
}

/// Values as a buffer of `dtype` holds them (bf16 rounds), so references see exactly the kernel's inputs.
pub fn as_stored(v: &[f32], dtype: DType) -> Vec<f32> {
    match dtype {
        DType::Bf16 => v.iter().map(|&x| bf16::from_f32(x).to_f32()).collect(),
        _ => v.to_vec(),
    }
}

pub fn to_bf16(v: &[f32]) -> Vec<bf16> {
    v.iter().map(|&x| bf16::from_f32(x)).collect()
}

/// Relative error one output of `dtype` may carry on top of f32 arithmetic: a bf16 store rounds to
/// 8 significant bits (half an ulp is 2^-9 relative), doubled for the f32 work before it.
pub fn store_rel(dtype: DType) -> f64 {
    match dtype {
        DType::Bf16 => 1.0 / 256.0,
        _ => 2e-6,
    }
}

/// |got - want| <= abs + rel |want| everywhere, NaN failing; reports the worst element.
#[track_caller]
pub fn assert_close(what: &str, got: &[f32], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{what}: {} values, expected {}", got.len(), want.len());
    // NaN compares false, so it is never within bounds.
    let within = |err: f64, bound: f64| matches!(err.partial_cmp(&bound), Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal));
    let mut worst: Option<(usize, f64)> = None;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        let bound = abs + rel * w.abs();
        if !within(err, bound) {
            let excess = if err.is_nan() { f64::INFINITY } else { err / bound };
            if worst.is_none_or(|(_, e)| excess > e) {
                worst = Some((i, excess));
            }
        }
    }
    if let Some((i, _)) = worst {
        let bad = got.iter().zip(want).filter(|(&g, &w)| !within((g as f64 - w).abs(), abs + rel * w.abs())).count();
        panic!("{what}: {bad} of {} values out of bounds; worst at {i}: got {}, want {} (rel {rel:e}, abs {abs:e})", got.len(), got[i], want[i]);
    }
}

/// The geometries each kernel runs under: the default, and small ones so every grid-stride loop and
/// every reduction over several warps and several passes really iterates.
pub fn tunes() -> [Tune; 3] {
    [Tune::default(), Tune { block: 32, max_blocks: 3 }, Tune { block: 64, max_blocks: 2 }]
}

pub fn read_f32(emu: &crate::emu::Emu, b: cppo_cuda::Buf) -> Vec<f32> {
    match b.dtype {
        DType::Bf16 => emu.read::<bf16>(b).iter().map(|v| v.to_f32()).collect(),
        DType::F32 => emu.read::<f32>(b),
        other => panic!("read_f32 of {other:?}"),
    }
}

/// Uploads `v` as `dtype` (bf16 rounding).
pub fn upload(emu: &mut crate::emu::Emu, v: &[f32], dtype: DType) -> cppo_cuda::Buf {
    match dtype {
        DType::Bf16 => emu.upload(&to_bf16(v)),
        DType::F32 => emu.upload(v),
        other => panic!("upload as {other:?}"),
    }
}
