//! The chunked log-softmax over the vocabulary and the gather of the scored tokens, with its backward.
//! The caller runs the products between these launches (one vocabulary chunk of logits at a time)
//! and owns the `Gather` tables: their targets must be below the vocabulary and their output
//! indices below the output's length (cppo-model's `logprob::check`).

use super::{int, name, F32, FLOAT, I32};
use crate::buf::Buf;
use crate::error::{Error, Result};
use crate::geometry::Tune;
use crate::launch::{launch, Arg, Launcher};

/// Vocabulary columns per chunk, as the CPU op picks them: as asked, or about 2M logits at a time.
pub fn chunk_cols(asked: usize, slots: usize, vocab: usize) -> usize {
    if asked > 0 {
        return asked.min(vocab.max(1));
    }
    ((1 << 21) / slots.max(1)).max(256).min(vocab.max(1))
}

fn check_chunk(op: &'static str, slots: usize, n: usize, v0: usize, vocab: usize) -> Result<()> {
    if n == 0 || v0 + n > vocab {
        return Err(Error::shape(op, format!("chunk {v0}..{} of a vocabulary of {vocab}", v0 + n)));
    }
    int(op, "slots", slots).map(|_| ())
}

/// Folds the logits `z (slots x n)` of columns `v0 .. v0 + n` into `state` (4 f32 per slot); the
/// chunk at `v0 = 0` starts it.
#[allow(clippy::too_many_arguments)]
pub fn chunk(l: &mut dyn Launcher, t: &Tune, z: Buf, targets: Buf, state: Buf, slots: usize, n: usize, v0: usize, vocab: usize) -> Result<()> {
    const OP: &str = "logprob_chunk";
    check_chunk(OP, slots, n, v0, vocab)?;
    z.need(OP, "logits", F32, slots * n)?;
    targets.need(OP, "targets", I32, slots)?;
    state.need(OP, "state", F32, 4 * slots)?;
    let args = [z.into(), targets.into(), state.into(), Arg::I32(slots as i32), Arg::I32(n as i32), Arg::I32(v0 as i32)];
    launch(l, OP, t.rows(slots, n), &args)
}

/// Zeros `out (out_len)`, then writes each slot's log-prob at its output index, its log-normaliser
/// into `lse` and its entropy into `entropy` (if given).
#[allow(clippy::too_many_arguments)]
pub fn finish(l: &mut dyn Launcher, t: &Tune, state: Buf, out_index: Buf, out: Buf, out_len: usize, lse: Buf, entropy: Option<Buf>, slots: usize) -> Result<()> {
    const OP: &str = "logprob_finish";
    state.need(OP, "state", F32, 4 * slots)?;
    out_index.need(OP, "output indices", I32, slots)?;
    out.need(OP, "out", F32, out_len)?;
    lse.need(OP, "lse", F32, slots)?;
    let entropy = match entropy {
        Some(e) => {
            e.need(OP, "entropy", F32, slots)?;
            e
        }
        None => Buf::null(crate::buf::DType::F32),
    };
    super::elementwise::fill(l, t, out, 0.0, out_len)?;
    let args = [state.into(), out_index.into(), out.into(), lse.into(), entropy.into(), Arg::I32(int(OP, "slots", slots)?)];
    launch(l, OP, t.flat(slots), &args)
}

/// `dz = g (onehot(target) - exp(z - lse))` for one recomputed chunk, `g = gout[out_index[slot]]`.
#[allow(clippy::too_many_arguments)]
pub fn backward_chunk(l: &mut dyn Launcher, t: &Tune, z: Buf, lse: Buf, gout: Buf, out_len: usize, out_index: Buf, targets: Buf, dz: Buf, slots: usize, n: usize, v0: usize, vocab: usize) -> Result<()> {
    const OP: &str = "logprob_bwd_chunk";
    check_chunk(OP, slots, n, v0, vocab)?;
    z.need(OP, "logits", F32, slots * n)?;
    lse.need(OP, "lse", F32, slots)?;
    gout.need(OP, "output gradient", F32, out_len)?;
    out_index.need(OP, "output indices", I32, slots)?;
    targets.need(OP, "targets", I32, slots)?;
    dz.need(OP, "dz", FLOAT, slots * n)?;
    let args = [z.into(), lse.into(), gout.into(), out_index.into(), targets.into(), dz.into(), Arg::I32(slots as i32), Arg::I32(n as i32), Arg::I32(v0 as i32)];
    launch(l, &name(OP, &[dz]), t.flat(slots * n), &args)
}
