//! The engine's view of the decoder's inference path.

use anyhow::Result;
use cppo_model::{Decoder, KvCache};

use crate::backend::Backend;

pub struct DecoderBackend<'a>(pub &'a Decoder);

impl Backend for DecoderBackend<'_> {
    type Cache = KvCache;

    fn vocab_size(&self) -> usize {
        self.0.config().vocab_size
    }

    fn new_cache(&self, rows: usize, max_len: usize) -> Result<KvCache> {
        Ok(self.0.new_cache(rows, max_len)?)
    }

    fn prefill(&self, cache: &mut KvCache, row: usize, tokens: &[u32]) -> Result<Vec<f32>> {
        cache.reset_row(row)?;
        Ok(self.0.prefill_logits(tokens, cache, row)?)
    }

    fn copy_row(&self, cache: &mut KvCache, from: usize, to: &[usize]) -> Result<()> {
        Ok(self.0.copy_row(cache, from, to)?)
    }

    fn decode(&self, cache: &mut KvCache, rows: &[usize], tokens: &[u32]) -> Result<Vec<f32>> {
        Ok(self.0.decode_step_logits(tokens, rows, cache)?)
    }
}
