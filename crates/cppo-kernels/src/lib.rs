//! The decoder's kernels behind one trait (`backend::Backend`): the CPU backend (`cpu`, the kernels of
//! this crate), and a reference backend of plain loops (`reference`) that checks it.
//!
//! candle 0.11's own fused kernels (softmax, rms_norm, rope, flash attention) record no backward, so a
//! model built from them trains nothing; and a model built from primitive ops pays for every
//! intermediate twice in the backward pass. Each operation here does its whole job forward, and its
//! backward is written by hand, on contiguous row-major data, in f32 or f64 (f64 is there so gradients
//! can be checked against finite differences tightly). All the `unsafe` of the decoder lives here.

pub mod alloc;
pub mod attention;
pub mod backend;
pub mod cpu;
pub mod few_queries;
pub mod gemm;
pub mod gemm_bf16;
pub mod host;
pub mod isa;
pub mod linear;
pub mod logprob;
pub mod reference;
pub mod rms_norm;
pub mod rope;
pub mod sample;
pub mod simd;
pub mod skinny;
pub mod swiglu;

use candle_core::WithDType;

/// The precision of matrix products, the one type every place that chooses one uses (the update's
/// products, the rollout weights, the stored model). `F32` multiplies exactly (f64 for f64 decoders).
/// `Bf16` rounds the operands to bf16 and sums in f32, as `torch.autocast` and a bf16 inference engine
/// do; a product without a bf16 path on this CPU multiplies in full precision instead. `Auto` is the
/// right one for this CPU, different per use: see [`Precision::for_update`] and
/// [`Precision::for_rollouts`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    Auto,
    F32,
    Bf16,
}

impl Precision {
    /// The name configs and the command line use (as serde spells it).
    pub fn name(self) -> &'static str {
        match self {
            Precision::Auto => "auto",
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
        }
    }

    /// Whether bf16 products can run here with bf16 dot instructions (AVX512-BF16's `vdpbf16ps`). An
    /// explicit `Bf16` rounds its operands only then; without it a product multiplies in full precision.
    pub fn bf16_available() -> bool {
        gemm_bf16::available()
    }

    /// Whether `Auto` picks bf16 for the update's products here: see [`bf16_products_pay`].
    pub fn bf16_update_pays() -> bool {
        bf16_products_pay(isa::level(), isa::vendor())
    }

    /// The update's products: `Auto` is bf16 where [`Precision::bf16_update_pays`], f32 elsewhere.
    pub fn for_update(self) -> Precision {
        match self {
            Precision::Auto if Precision::bf16_update_pays() => Precision::Bf16,
            Precision::Auto => Precision::F32,
            p => p,
        }
    }

    /// The rollouts' weights: `Auto` is a bf16 snapshot where the skinny products read bf16 weights
    /// (AVX2 and up: a decode step is memory-bound, and half the bytes outweigh the widening), f32
    /// elsewhere.
    pub fn for_rollouts(self) -> Precision {
        match self {
            Precision::Auto if skinny::available() => Precision::Bf16,
            Precision::Auto => Precision::F32,
            p => p,
        }
    }

    /// Whether a product asked for this precision rounds its operands to bf16 (where it can).
    pub fn is_bf16(self) -> bool {
        self.for_update() == Precision::Bf16
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [Precision::Auto, Precision::F32, Precision::Bf16]
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| format!("unknown precision {s:?} (auto, f32 or bf16)"))
    }
}

/// Whether bf16 update products beat f32 ones on a CPU of this level and vendor, as measured: only with
/// AVX512-BF16, and only on AMD. On Zen 4 the bf16 dot products ran the update 1.4-1.8x faster; on an
/// Intel Xeon with AVX512-BF16 (Sapphire Rapids class) the same update ran slower than f32 (`cppo bench
/// step`, policy phase 3.9 s against 3.0 s at G = 8): there `vdpbf16ps` does no more products per cycle
/// than two FMA ports do in f32, and the packing to bf16 comes on top. Without the instruction a bf16
/// product would widen and multiply in f32, paying the rounding for no speed.
pub fn bf16_products_pay(level: isa::Isa, vendor: isa::Vendor) -> bool {
    level >= isa::Isa::Avx512Bf16 && vendor == isa::Vendor::Amd
}

/// One line for logs: what `auto` picks for the update's products here, and why.
pub fn describe_auto_update() -> String {
    let (level, vendor) = (isa::level(), isa::vendor());
    let why = if bf16_products_pay(level, vendor) {
        "AMD with AVX512-BF16"
    } else if level >= isa::Isa::Avx512Bf16 {
        "AVX512-BF16 measured slower than f32 on this vendor"
    } else {
        "no AVX512-BF16"
    };
    format!("{} ({why})", Precision::Auto.for_update().name())
}

/// The float types the kernels are written for.
pub trait Float:
    num_traits::Float
    + WithDType
    + std::ops::AddAssign
    + std::ops::SubAssign
    + std::ops::MulAssign
    + std::iter::Sum
    + Send
    + Sync
    + 'static
{
    fn of(v: f64) -> Self;
    fn rope_table(t: &rope::RopeTable) -> (&[Self], &[Self]);

    fn dot(a: &[Self], b: &[Self]) -> Self {
        simd::dot_generic(a, b)
    }
    /// `y += alpha x`
    fn axpy(alpha: Self, x: &[Self], y: &mut [Self]) {
        for (o, &v) in y.iter_mut().zip(x) {
            *o += alpha * v;
        }
    }
    /// `(sum exp(z - shift), sum exp(z - shift) z)`
    fn exp_stats(z: &[Self], shift: Self) -> (Self, Self) {
        let (mut s, mut t) = (Self::zero(), Self::zero());
        for &x in z {
            let e = (x - shift).exp();
            s += e;
            t += e * x;
        }
        (s, t)
    }
    /// `z = scale * exp(z - shift)`
    fn exp_scale(z: &mut [Self], shift: Self, scale: Self) {
        for x in z.iter_mut() {
            *x = scale * (*x - shift).exp();
        }
    }
    /// `y (n x dout) (+)= x (n x din) @ w (dout x din)^T` by the few-rows kernel (`skinny`); false when
    /// it does not apply, with nothing done.
    fn skinny(
        _y: &mut [Self],
        _x: &[Self],
        _w: &[Self],
        _din: usize,
        _dout: usize,
        _add: bool,
    ) -> bool {
        false
    }
    /// `gemm::matmul` in bf16 (`gemm_bf16`); false when it does not apply, with nothing done.
    ///
    /// # Safety
    /// As `gemm::matmul`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn matmul_bf16(
        _m: usize,
        _n: usize,
        _k: usize,
        _dst: gemm::ViewMut<Self>,
        _acc: bool,
        _a: gemm::View<Self>,
        _b: gemm::View<Self>,
        _scale: Self,
        _parallel: bool,
    ) -> bool {
        false
    }
    /// The generation path's products (`linear::project`); exact products in the element type
    /// unless overridden.
    fn project(x: &[Self], _n: usize, din: usize, outs: &mut [linear::ProjectOut<Self>]) {
        for o in outs.iter_mut() {
            linear::accumulate(o.y, x, o.w, din, o.n, o.add, Precision::F32);
        }
    }
    /// The few-queries attention kernel (`few_queries::attend`); false when it does not apply.
    ///
    /// # Safety
    /// As `few_queries::attend`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn few_queries(
        _nq: usize,
        _d: usize,
        _q: *const Self,
        _k: *const Self,
        _v: *const Self,
        _rs: usize,
        _len: usize,
        _scale: Self,
        _out: *mut Self,
        _p: &mut Vec<Self>,
    ) -> bool {
        false
    }
}

impl Float for f32 {
    #[inline]
    fn of(v: f64) -> Self {
        v as f32
    }
    fn rope_table(t: &rope::RopeTable) -> (&[f32], &[f32]) {
        (&t.cos32, &t.sin32)
    }
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        simd::dot_f32(a, b)
    }
    fn axpy(alpha: f32, x: &[f32], y: &mut [f32]) {
        simd::axpy_f32(alpha, x, y)
    }
    fn exp_stats(z: &[f32], shift: f32) -> (f32, f32) {
        simd::exp_stats_f32(z, shift)
    }
    fn exp_scale(z: &mut [f32], shift: f32, scale: f32) {
        simd::exp_scale_f32(z, shift, scale)
    }
    fn skinny(y: &mut [f32], x: &[f32], w: &[f32], din: usize, dout: usize, add: bool) -> bool {
        let n = x.len() / din.max(1);
        n <= skinny::MAX_ROWS
            && skinny::matmul_many(
                x,
                n,
                din,
                &mut [skinny::Out {
                    w: skinny::Weight::F32(w),
                    n: dout,
                    y,
                    ys: dout,
                    add,
                }],
                gemm::threads(),
            )
    }
    /// # Safety
    /// As [`Float::matmul_bf16`]: that of `gemm::matmul` (`gemm_bf16::matmul` checks the CPU itself).
    unsafe fn matmul_bf16(
        m: usize,
        n: usize,
        k: usize,
        dst: gemm::ViewMut<f32>,
        acc: bool,
        a: gemm::View<f32>,
        b: gemm::View<f32>,
        scale: f32,
        parallel: bool,
    ) -> bool {
        gemm_bf16::matmul(m, n, k, dst, acc, a, b, scale, parallel)
    }
    fn project(x: &[f32], n: usize, din: usize, outs: &mut [linear::ProjectOut<f32>]) {
        linear::project_f32(x, n, din, outs)
    }
    /// # Safety
    /// As [`Float::few_queries`]: that of `few_queries::attend` (which checks the CPU itself).
    unsafe fn few_queries(
        nq: usize,
        d: usize,
        q: *const f32,
        k: *const f32,
        v: *const f32,
        rs: usize,
        len: usize,
        scale: f32,
        out: *mut f32,
        p: &mut Vec<f32>,
    ) -> bool {
        few_queries::attend(nq, d, q, k, v, rs, len, scale, out, p)
    }
}

impl Float for f64 {
    #[inline]
    fn of(v: f64) -> Self {
        v
    }
    fn rope_table(t: &rope::RopeTable) -> (&[f64], &[f64]) {
        (&t.cos64, &t.sin64)
    }
}

/// A raw pointer that rayon tasks may share because each writes a disjoint region.
#[derive(Clone, Copy)]
pub struct SendPtr<T>(pub *mut T);
// SAFETY: a `SendPtr` is only made for buffers that outlive the parallel section using it, and every
// task reads shared inputs or writes a region no other task touches (each use says which).
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as for `Send`.
unsafe impl<T> Sync for SendPtr<T> {}
impl<T> SendPtr<T> {
    #[inline]
    pub fn get(self) -> *mut T {
        self.0
    }
}

/// Deterministic values in [-1, 1] for the kernels' unit tests.
#[cfg(test)]
pub fn test_values(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            ((i.wrapping_mul(2654435761) ^ seed.wrapping_mul(40503)) % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::isa::{Isa, Vendor};
    use super::{bf16_products_pay, Precision};

    /// The measured rule: bf16 update products only on AMD with AVX512-BF16; every other level or
    /// vendor keeps f32.
    #[test]
    fn bf16_update_products_are_picked_only_on_amd_with_avx512_bf16() {
        for level in Isa::ALL {
            for vendor in [Vendor::Amd, Vendor::Intel, Vendor::Other] {
                let expected = vendor == Vendor::Amd && level == Isa::Avx512Bf16;
                assert_eq!(bf16_products_pay(level, vendor), expected, "{level} {vendor:?}");
            }
        }
    }

    /// The command line's names are the config's (serde's) names, and parse back; `Auto` resolves to
    /// a concrete precision for both uses, and the concrete ones stay what they are.
    #[test]
    fn precision_names_match_serde_and_auto_resolves() {
        for p in [Precision::Auto, Precision::F32, Precision::Bf16] {
            assert_eq!(serde_json::to_value(p).unwrap(), serde_json::Value::String(p.name().into()));
            assert_eq!(p.name().parse::<Precision>(), Ok(p));
        }
        assert!("fp16".parse::<Precision>().is_err());
        for p in [Precision::F32, Precision::Bf16] {
            assert_eq!(p.for_update(), p);
            assert_eq!(p.for_rollouts(), p);
        }
        assert_ne!(Precision::Auto.for_update(), Precision::Auto);
        assert_eq!(Precision::Auto.for_update() == Precision::Bf16, Precision::bf16_update_pays());
        assert!(!Precision::bf16_update_pays() || Precision::bf16_available());
        assert_eq!(Precision::Auto.for_rollouts() == Precision::Bf16, crate::skinny::available());
    }
}
