//! Sampling the next token of every row on the device (see `kernels/sample.cu` for the semantics and
//! where they can differ from the CPU sampler's).

use super::{int, F32, I32};
use cppo_kernels::sample::SampleParams;

use crate::buf::{Buf, DType};
use crate::error::{Error, Result};
use crate::geometry::Tune;
use crate::launch::{launch, Arg, Launcher};

/// `token[r]` and `logprob[r]` for each of `rows` rows of `logits (rows x vocab)`, row `r` drawing
/// with `u[r]` (f64 in [0, 1): the row's RNG's next `gen::<f64>()`; unused when greedy). `probs` is
/// scratch of `rows x vocab` f32.
#[allow(clippy::too_many_arguments)]
pub fn sample(l: &mut dyn Launcher, t: &Tune, logits: Buf, probs: Buf, u: Buf, token: Buf, logprob: Buf, rows: usize, vocab: usize, p: &SampleParams) -> Result<()> {
    const OP: &str = "sample_rows";
    logits.need(OP, "logits", F32, rows * vocab)?;
    probs.need(OP, "scratch", F32, rows * vocab)?;
    u.need(OP, "draws", &[DType::F64], rows)?;
    token.need(OP, "tokens", I32, rows)?;
    logprob.need(OP, "log-probs", F32, rows)?;
    if !(p.temperature >= 0.0 && p.temperature.is_finite() && p.top_p > 0.0 && p.top_p <= 1.0 && (0.0..=1.0).contains(&p.min_p)) {
        return Err(Error::shape(OP, format!("{p:?}")));
    }
    let greedy = p.temperature <= 0.0;
    let inv_t = if greedy { 1.0 } else { (1.0 / p.temperature) as f32 };
    let args = [
        logits.into(),
        probs.into(),
        u.into(),
        token.into(),
        logprob.into(),
        Arg::I32(int(OP, "rows", rows)?),
        Arg::I32(int(OP, "vocab", vocab)?),
        Arg::F32(inv_t),
        Arg::F64(p.top_p),
        Arg::I32(int(OP, "top_k", p.top_k)?),
        Arg::I32(greedy as i32),
        Arg::F64(if greedy { 0.0 } else { p.min_p }),
    ];
    // One block per row, as wide as the machine allows: the row is scanned about a dozen times.
    let cfg = crate::launch::LaunchConfig::blocks(rows.min(t.max_blocks as usize) as u32, t.block);
    launch(l, OP, cfg, &args)
}

/// transformers' repetition penalty on `logits (rows x vocab)`, in place, at the flat indices `at`
/// (`row * vocab + token`, i32, each at most once): `z < 0 ? z * penalty : z / penalty`.
pub fn repetition_penalty(l: &mut dyn Launcher, t: &Tune, logits: Buf, at: Buf, n: usize, rows: usize, vocab: usize, penalty: f32) -> Result<()> {
    const OP: &str = "repetition_penalty";
    logits.need(OP, "logits", F32, rows * vocab)?;
    at.need(OP, "indices", I32, n)?;
    int(OP, "logits", rows * vocab)?;
    if !(penalty.is_finite() && penalty > 0.0) {
        return Err(Error::shape(OP, format!("penalty {penalty}")));
    }
    launch(l, OP, t.flat(n), &[logits.into(), at.into(), Arg::I32(int(OP, "indices", n)?), Arg::F32(penalty)])
}
