//! The weights' memory as plain slices, for kernels that run on it directly (the training tape and
//! the generation path), and where each weight sits in `Decoder::params()` order.

use candle_core::{bail, Layout, Result, Storage, StorageRef, WithDType};

use super::{Decoder, Param};

/// A read lock on one weight's storage.
pub(crate) struct Locked<'a> {
    guard: StorageRef<'a>,
    layout: &'a Layout,
    name: &'a str,
}

impl<'a> Locked<'a> {
    pub(crate) fn new(p: &'a Param) -> Self {
        let (guard, layout) = p.t.storage_and_layout();
        Locked { guard, layout, name: &p.name }
    }

    pub(crate) fn slice<T: WithDType>(&self) -> Result<&[T]> {
        match &*self.guard {
            Storage::Cpu(c) => {
                let d = c.as_slice::<T>()?;
                match self.layout.contiguous_offsets() {
                    Some((a, b)) => Ok(&d[a..b]),
                    None => bail!("weight {} is not contiguous", self.name),
                }
            }
            _ => bail!("the decoder's kernels run on the CPU only ({} is elsewhere)", self.name),
        }
    }
}

/// Positions of one layer's weights in `Decoder::params()` order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LayerIdx {
    pub(crate) input_norm: usize,
    pub(crate) q: usize,
    pub(crate) q_bias: Option<usize>,
    pub(crate) k: usize,
    pub(crate) k_bias: Option<usize>,
    pub(crate) v: usize,
    pub(crate) v_bias: Option<usize>,
    pub(crate) q_norm: Option<usize>,
    pub(crate) k_norm: Option<usize>,
    pub(crate) o: usize,
    pub(crate) post_norm: usize,
    pub(crate) gate: usize,
    pub(crate) up: usize,
    pub(crate) down: usize,
}

/// Where every weight sits in `Decoder::params()` (the same order as `vars()`).
pub(crate) struct Index {
    pub(crate) embed: usize,
    pub(crate) layers: Vec<LayerIdx>,
    pub(crate) norm: usize,
    /// Equal to `embed` when tied.
    pub(crate) lm_head: usize,
    pub(crate) count: usize,
}

pub(crate) fn index(dec: &Decoder) -> Index {
    let cfg = dec.config();
    let mut next = 0;
    let mut take = || {
        next += 1;
        next - 1
    };
    let embed = take();
    let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
    for _ in 0..cfg.num_hidden_layers {
        let input_norm = take();
        let q = take();
        let q_bias = cfg.attention_bias.then(&mut take);
        let k = take();
        let k_bias = cfg.attention_bias.then(&mut take);
        let v = take();
        let v_bias = cfg.attention_bias.then(&mut take);
        let q_norm = cfg.qk_norm.then(&mut take);
        let k_norm = cfg.qk_norm.then(&mut take);
        let (o, post_norm, gate, up, down) = (take(), take(), take(), take(), take());
        layers.push(LayerIdx { input_norm, q, q_bias, k, k_bias, v, v_bias, q_norm, k_norm, o, post_norm, gate, up, down });
    }
    let norm = take();
    let lm_head = if cfg.tie_word_embeddings { embed } else { take() };
    Index { embed, layers, norm, lm_head, count: next }
}

