//! The engine's view of the decoder's inference path.

use anyhow::Result;
use cppo_model::{Decoder, KvCache, RolloutWeights};
use serde::{Deserialize, Serialize};

use crate::backend::Backend;

/// The precision of the matrix products of a generation. `Bf16` reads a bf16 snapshot of the weights
/// (half the bytes per decode step) and, on CPUs with AVX512-BF16, rounds the products' inputs to bf16
/// too (sums stay f32), as RL frameworks sample from a bf16 inference engine while training f32
/// weights; `F32` reproduces the training path's greedy tokens exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightPrecision {
    #[default]
    F32,
    Bf16,
}

impl WeightPrecision {
    /// The name configs and the command line use (as serde spells it).
    pub fn name(self) -> &'static str {
        match self {
            WeightPrecision::F32 => "f32",
            WeightPrecision::Bf16 => "bf16",
        }
    }
}

impl std::str::FromStr for WeightPrecision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [WeightPrecision::F32, WeightPrecision::Bf16]
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| format!("unknown weight precision {s:?} (f32 or bf16)"))
    }
}

pub struct DecoderBackend<'a> {
    decoder: &'a Decoder,
    half: Option<RolloutWeights>,
}

impl<'a> DecoderBackend<'a> {
    /// Generation from the decoder's current weights; a bf16 snapshot is taken now, so weights
    /// updated later are not seen by this backend.
    pub fn new(decoder: &'a Decoder, precision: WeightPrecision) -> Result<Self> {
        let half = match precision {
            WeightPrecision::F32 => None,
            WeightPrecision::Bf16 => Some(decoder.rollout_weights()?),
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
}

#[cfg(test)]
mod tests {
    use super::WeightPrecision;

    /// The command line's names are the config's (serde's) names, and parse back.
    #[test]
    fn names_match_serde_and_parse_back() {
        for w in [WeightPrecision::F32, WeightPrecision::Bf16] {
            assert_eq!(serde_json::to_value(w).unwrap(), serde_json::Value::String(w.name().into()));
            assert_eq!(w.name().parse::<WeightPrecision>(), Ok(w));
        }
        assert!("fp16".parse::<WeightPrecision>().is_err());
    }
}
