//! LoRA dropout as PEFT applies it: `y = W x + s B (A dropout(x))`, on the adapter's input only (the
//! base product sees `x` itself), a separate mask for every adapted module, and only in a forward pass
//! that trains (one that keeps a tape); rollouts, the reference, old-policy log-probs and evaluation run
//! without it. Kept elements are scaled by `1 / (1 - p)` (inverted dropout, as `nn.Dropout`).
//!
//! The masks are not drawn from a generator's running state but are a hash of (seed, step, the
//! forward pass's index within the step, module, element): the backward pass recomputes its forward's
//! masks, and a resumed run draws the very masks the uninterrupted run drew, as long as the trainer
//! names the step (`Decoder::start_dropout_step`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cppo_io::params::LayerParam;

use super::{Decoder, DecoderError, Result};

/// The masks of one training forward pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct DropoutKey {
    pub p: f64,
    pub key: u64,
}

/// A decoder's dropout settings and where its passes are, shared by its clones.
#[derive(Debug)]
pub(crate) struct DropoutState {
    p: f64,
    seed: u64,
    step: AtomicU64,
    calls: AtomicU64,
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The multiplier of each of `n` elements under dropout rate `p` for `key` at `site`: 0 for a dropped
/// element, `1 / (1 - p)` for a kept one. Element i is dropped when the i-th value of a SplitMix64
/// stream seeded by (key, site), as a uniform number in [0, 1), is below p.
pub fn dropout_multipliers(key: u64, site: u64, n: usize, p: f64) -> impl Iterator<Item = f64> {
    let base = splitmix(key ^ splitmix(site));
    let keep = 1.0 / (1.0 - p);
    (0..n as u64).map(move |i| {
        let u = (splitmix(base.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))) >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        if u < p {
            0.0
        } else {
            keep
        }
    })
}

/// The site of layer `li`'s adapter on `p`: every adapted module has masks of its own.
pub(crate) fn site(li: usize, p: LayerParam) -> u64 {
    (li as u64) << 8 | p as u64
}

impl Decoder {
    /// This LoRA decoder with dropout `p` (in [0, 1)) on its adapters' inputs in training forward
    /// passes, the masks derived from `seed` (`dropout.rs`). `p = 0` is no dropout at all.
    pub fn with_lora_dropout(mut self, p: f64, seed: u64) -> Result<Decoder> {
        if self.lora.is_none() {
            return Err(DecoderError::BadInput("lora dropout: this decoder carries no adapters".into()));
        }
        if !(0.0..1.0).contains(&p) {
            return Err(DecoderError::BadConfig(format!("lora.dropout = {p} must be in [0, 1)")));
        }
        self.dropout = (p > 0.0).then(|| Arc::new(DropoutState { p, seed, step: AtomicU64::new(0), calls: AtomicU64::new(0) }));
        Ok(self)
    }

    /// The dropout rate of the adapters' inputs in training (0 without dropout).
    pub fn lora_dropout(&self) -> f64 {
        self.dropout.as_ref().map_or(0.0, |d| d.p)
    }

    /// Names the training step the next passes belong to, restarting their count: the masks of a
    /// step's k-th training forward pass depend only on the seed, the step and k.
    pub fn start_dropout_step(&self, step: u64) {
        if let Some(d) = &self.dropout {
            d.step.store(step, Ordering::SeqCst);
            d.calls.store(0, Ordering::SeqCst);
        }
    }

    /// The masks of the next training forward pass, when dropout is on and the adapters take part.
    pub(crate) fn next_dropout_key(&self) -> Option<DropoutKey> {
        let d = self.dropout.as_ref().filter(|_| self.lora_scale().is_some())?;
        let call = d.calls.fetch_add(1, Ordering::SeqCst);
        let key = splitmix(d.seed ^ splitmix(d.step.load(Ordering::SeqCst) ^ splitmix(call)));
        Some(DropoutKey { p: d.p, key })
    }
}
