//! The engine's view of the decoder's inference path.

use anyhow::Result;
use cppo_model::{Decoder, KvCache, RolloutWeights};
use cppo_kernels::Precision;

use crate::backend::Backend;
use crate::sampling::{sample_on_host, SamplingParams};

pub struct DecoderBackend<'a> {
    decoder: &'a Decoder,
    half: Option<RolloutWeights>,
}

impl<'a> DecoderBackend<'a> {
    /// Generation from the decoder's current weights; a bf16 snapshot is taken now, so weights
    /// updated later are not seen by this backend.
    pub fn new(decoder: &'a Decoder, precision: Precision) -> Result<Self> {
        // `Auto` chooses per CPU: see `Precision::for_rollouts`.
        let half = match precision.for_rollouts() {
            Precision::Bf16 => Some(decoder.rollout_weights()?),
            _ => None,
        };
        Ok(DecoderBackend { decoder, half })
    }

    /// f32 weights (no snapshot to take, so it cannot fail).
    pub fn f32(decoder: &'a Decoder) -> Self {
        DecoderBackend { decoder, half: None }
    }
}

impl Backend for DecoderBackend<'_> {
    type Cache = KvCache;
    type Logits = Vec<f32>;

    fn vocab_size(&self) -> usize {
        self.decoder.config().vocab_size
    }

    fn new_cache(&self, rows: usize, max_len: usize) -> Result<KvCache> {
        Ok(self.decoder.new_cache(rows, max_len)?)
    }

    fn prefill(&self, cache: &mut KvCache, row: usize, tokens: &[u32]) -> Result<Vec<f32>> {
        cache.reset_row(row)?;
        Ok(self.decoder.prefill_logits_with(tokens, cache, row, self.half.as_ref())?)
    }

    fn copy_row(&self, cache: &mut KvCache, from: usize, to: &[usize]) -> Result<()> {
        Ok(self.decoder.copy_row(cache, from, to)?)
    }

    fn decode(&self, cache: &mut KvCache, rows: &[usize], tokens: &[u32]) -> Result<Vec<f32>> {
        Ok(self.decoder.decode_step_logits_with(tokens, rows, cache, self.half.as_ref())?)
    }

    fn sample(&self, at: &[(&Vec<f32>, usize)], draws: &[f64], params: &SamplingParams, seen: &[&[u32]]) -> Result<Vec<(u32, f32)>> {
        sample_on_host(self.vocab_size(), at, draws, params, seen)
    }
}
