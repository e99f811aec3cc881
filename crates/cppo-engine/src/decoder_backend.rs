//! The engine's view of the decoder's generation path on a kernel backend: the CPU's (`Cpu<f32>`), a
//! GPU's, or the reference backend that checks them. Weights and KV cache are in that backend's
//! memory; logits stay there and are sampled there (`Kernels::sample_rows`), so a decode step on a
//! device brings back a token and a log-prob per row, not rows x vocab logits.

use anyhow::{bail, Result};
use cppo_kernels::backend::Backend as Kernels;
use cppo_kernels::Precision;
use cppo_model::decoder::{BackendWeights, DeviceHalves};
use cppo_model::{Decoder, DeviceCache};

use crate::backend::Backend;
use crate::sampling::SamplingParams;

pub struct DecoderBackend<'a, B: Kernels<T = f32>> {
    decoder: &'a Decoder,
    b: &'a B,
    weights: BackendWeights<B>,
    /// Whether rollouts read bf16 matrices: the weights' own copies (`BackendWeights::halves`) when
    /// they keep some, else `snapshot`.
    bf16: bool,
    /// A bf16 copy of the matrices made for these rollouts, when the weights keep none of their own.
    snapshot: Option<DeviceHalves<B>>,
}

impl<'a, B: Kernels<T = f32>> DecoderBackend<'a, B> {
    /// Generation from the decoder's current weights, uploaded to `b` now (later updates are not
    /// seen). `Bf16` reads a bf16 copy of the matrices made on the backend and keeps a bf16 KV cache
    /// where the backend can; `F32` reads the f32 weights and keeps an f32 cache; `Auto` is what the
    /// backend says (`rollout_precision`: bf16 on a GPU, by instruction set on the CPU).
    pub fn new(decoder: &'a Decoder, b: &'a B, precision: Precision) -> Result<Self> {
        let weights = decoder.upload_weights(b)?;
        Self::with_weights(decoder, b, weights, precision)
    }

    /// Over weights already in `b`'s memory (`Decoder::upload_weights`, kept current by the caller).
    /// At bf16 it reads the weights' own bf16 copies when they keep some (`BackendWeights::halves`,
    /// which a trainer's AdamW keeps current), else a snapshot it makes now.
    pub fn with_weights(decoder: &'a Decoder, b: &'a B, weights: BackendWeights<B>, precision: Precision) -> Result<Self> {
        let bf16 = b.rollout_precision(precision) != Precision::F32;
        let snapshot = match bf16 && weights.halves.is_none() {
            true => Some(decoder.device_rollout_weights(b, &weights)?),
            false => None,
        };
        Ok(DecoderBackend { decoder, b, weights, bf16, snapshot })
    }

    /// The weights it generates from, with their own bf16 copies, to hand back to the caller (a
    /// trainer's update).
    pub fn into_weights(self) -> BackendWeights<B> {
        self.weights
    }

    /// The bf16 matrices rollouts read, if any.
    fn half(&self) -> Option<&DeviceHalves<B>> {
        self.bf16.then(|| self.snapshot.as_ref().or(self.weights.halves.as_ref())).flatten()
    }
}

impl<B: Kernels<T = f32>> Backend for DecoderBackend<'_, B> {
    type Cache = DeviceCache<B>;
    type Logits = B::Buf;

    fn vocab_size(&self) -> usize {
        self.decoder.config().vocab_size
    }

    fn new_cache(&self, rows: usize, max_len: usize) -> Result<DeviceCache<B>> {
        // Generation from bf16 weights keeps its keys and values in bf16 too, where the backend can,
        // as inference engines do; from f32 weights, in f32.
        Ok(match self.half() {
            Some(_) => self.decoder.new_device_cache_bf16(self.b, rows, max_len)?,
            None => self.decoder.new_device_cache(self.b, rows, max_len)?,
        })
    }

    fn prefill(&self, cache: &mut DeviceCache<B>, row: usize, tokens: &[u32]) -> Result<B::Buf> {
        cache.reset_row(row)?;
        Ok(self.decoder.prefill_on(self.b, &self.weights, self.half(), tokens, cache, row)?)
    }

    fn copy_row(&self, cache: &mut DeviceCache<B>, from: usize, to: &[usize]) -> Result<()> {
        Ok(self.decoder.copy_row_on(self.b, cache, from, to)?)
    }

    fn decode(&self, cache: &mut DeviceCache<B>, rows: &[usize], tokens: &[u32]) -> Result<B::Buf> {
        Ok(self.decoder.decode_on(self.b, &self.weights, self.half(), tokens, rows, cache)?)
    }

    fn sample(&self, at: &[(&B::Buf, usize)], draws: &[f64], params: &SamplingParams, seen: &[&[u32]]) -> Result<Vec<(u32, f32)>> {
        let vocab = self.vocab_size();
        let b = self.b;
        for (logits, row) in at {
            let len = b.len(b.view(logits));
            if len < (row + 1) * vocab {
                bail!("row {row} of {len} logits, rows of {vocab}");
            }
        }
        if at.len() != draws.len() {
            bail!("{} rows to sample with {} draws", at.len(), draws.len());
        }
        // A decode step's rows are sampled where they lie; rows from several buffers (prompts just
        // prefilled beside rows decoding) are first gathered on the device.
        let in_place = at.first().is_some_and(|(first, _)| {
            at.iter().enumerate().all(|(i, (l, row))| std::ptr::eq(*l, *first) && *row == i)
                && b.len(b.view(first)) == at.len() * vocab
        });
        let gathered;
        let logits = if in_place {
            b.view(at[0].0)
        } else {
            let mut g = b.zeros(at.len() * vocab);
            for (i, (l, row)) in at.iter().enumerate() {
                let src = b.slice(b.view(l), row * vocab..(row + 1) * vocab);
                b.copy(src, b.slice_mut(b.view_mut(&mut g), i * vocab..(i + 1) * vocab));
            }
            gathered = g;
            b.view(&gathered)
        };
        Ok(b.sample_rows(logits, vocab, draws, &params.sampler(), seen))
    }
}
