//! The generation path's public face: a prefill appends a run of tokens to one cache row; a decode step
//! appends one token to each row it is given, each at its own position. Both run `infer.rs` on the
//! decoder's backend, in f32, optionally reading a bf16 snapshot of the matrix weights.

use std::sync::Arc;

use candle_core::{DType, Tensor};
use cppo_kernels::backend::Backend;

use super::cache_plan::Plan;
use super::infer::{self, CacheViews, Step};
use super::{with_ctx, Decoder, DecoderError, Result};
use crate::kv_cache::KvCache;

/// A bf16 copy of the decoder's matrix weights for the generation path: a decode step streams every
/// weight from memory, so half the bytes make a step at a few rows faster, and on CPUs with
/// AVX512-BF16 the products' inputs are rounded to bf16 too, which doubles the products per
/// instruction at many rows (`cppo bench generate`). Sums stay f32, and so do norms, embeddings
/// looked up, attention and the KV cache. A snapshot: weights updated afterwards are not seen, so take
/// one per generation (the frozen base of a LoRA decoder is the exception: `rollout_weights` takes its
/// snapshot once and hands out that one, its adapters running unmerged beside it). Cloning shares the
/// bf16 matrices.
#[derive(Clone, Debug)]
pub struct RolloutWeights {
    /// Indexed like the decoder's parameters; `None` for weights the generation path reads in f32.
    half: Vec<Option<Arc<Vec<u16>>>>,
}

impl RolloutWeights {
    /// Whether two snapshots hold the very same bf16 matrices (not copies of them).
    pub fn shares_storage_with(&self, other: &RolloutWeights) -> bool {
        self.half.len() == other.half.len()
            && self.half.iter().any(Option::is_some)
            && self.half.iter().zip(&other.half).all(|(a, b)| match (a, b) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            })
    }

    /// The bytes of the bf16 matrices it holds.
    pub fn bytes(&self) -> usize {
        self.half.iter().flatten().map(|h| h.len() * 2).sum()
    }
}

impl Decoder {
    pub(super) fn check_f32(&self) -> Result<()> {
        if self.dtype() != DType::F32 {
            return Err(DecoderError::BadInput(format!("the inference path computes in f32, this decoder in {:?}", self.dtype())));
        }
        Ok(())
    }

    /// The bf16 snapshot of this decoder's current linear weights (q, k, v, o, gate, up, down and the
    /// output projection) for `prefill_logits_with` / `decode_step_logits_with`. A weight already held
    /// in bf16 (`with_bf16_base`) is shared, not copied. A decoder carrying LoRA adapters has a frozen
    /// base, so its snapshot is taken on the first call and shared by every later one (and by clones).
    pub fn rollout_weights(&self) -> Result<RolloutWeights> {
        self.check_f32()?;
        if self.lora.is_none() {
            return self.take_rollout_weights();
        }
        if let Some(s) = self.frozen_snapshot.get() {
            return Ok(s.clone());
        }
        let s = self.take_rollout_weights()?;
        // Another thread may have set it meanwhile; either snapshot holds the same values.
        Ok(self.frozen_snapshot.get_or_init(|| s).clone())
    }

    fn take_rollout_weights(&self) -> Result<RolloutWeights> {
        let half = with_ctx!(self, f32, |m| {
            // The output projection is the embedding matrix when the two are tied (SmolLM2, Qwen2.5's
            // small sizes): it is read whole every step, so it is in the snapshot either way.
            self.params
                .iter()
                .enumerate()
                .map(|(i, p)| match &p.half {
                    Some(h) => Some(h.clone()),
                    None => (p.spec.is_linear() || i == m.ix.lm_head).then(|| Arc::new(m.b.to_half(m.w[i]))),
                })
                .collect()
        });
        Ok(RolloutWeights { half })
    }

    /// A cache for this model with `rows` rows of up to `max_len` positions.
    pub fn new_cache(&self, rows: usize, max_len: usize) -> Result<KvCache> {
        KvCache::new(self.config(), rows, max_len)
    }

    /// Copies a prefilled row (its filled positions) into other rows, e.g. a prompt prefilled once
    /// into the rows of its samples.
    pub fn copy_row(&self, cache: &mut KvCache, from_row: usize, to_rows: &[usize]) -> Result<()> {
        cache.check_row(from_row)?;
        for &t in to_rows {
            cache.check_row(t)?;
        }
        let len = cache.lens()[from_row];
        let layout = cache.layout();
        with_ctx!(self, f32, |m| {
            for l in 0..cache.layers() {
                m.b.cache_copy_row(&mut cache.k[l], &layout, from_row, len, to_rows);
                m.b.cache_copy_row(&mut cache.v[l], &layout, from_row, len, to_rows);
            }
        });
        for &t in to_rows {
            cache.set_len(t, len);
        }
        Ok(())
    }

    /// Appends `tokens` to row `row` of the cache (normally empty: a prompt) and returns the logits
    /// `(vocab)` that follow the last of them.
    pub fn prefill(&self, tokens: &[u32], cache: &mut KvCache, row: usize) -> Result<Tensor> {
        let logits = self.prefill_logits(tokens, cache, row)?;
        Ok(Tensor::from_vec(logits, self.config().vocab_size, self.device())?)
    }

    /// As `prefill`, with the logits as a plain vector.
    pub fn prefill_logits(&self, tokens: &[u32], cache: &mut KvCache, row: usize) -> Result<Vec<f32>> {
        self.prefill_logits_with(tokens, cache, row, None)
    }

    /// As `prefill_logits`, reading the matrix weights from `half` where given.
    pub fn prefill_logits_with(&self, tokens: &[u32], cache: &mut KvCache, row: usize, half: Option<&RolloutWeights>) -> Result<Vec<f32>> {
        let plan = Plan::prefill(tokens, &cache.shape, row)?;
        self.run_cached(tokens, &plan, cache, half, true)
    }

    /// Appends `tokens[i]` to row `rows[i]` for every i and returns the next-token logits
    /// `(rows.len(), vocab)`, in the order of `rows`. Rows not listed cost nothing.
    pub fn decode_step(&self, tokens: &[u32], rows: &[usize], cache: &mut KvCache) -> Result<Tensor> {
        let logits = self.decode_step_logits(tokens, rows, cache)?;
        Ok(Tensor::from_vec(logits, (rows.len(), self.config().vocab_size), self.device())?)
    }

    /// As `decode_step`, with the logits as a plain row-major vector.
    pub fn decode_step_logits(&self, tokens: &[u32], rows: &[usize], cache: &mut KvCache) -> Result<Vec<f32>> {
        self.decode_step_logits_with(tokens, rows, cache, None)
    }

    /// As `decode_step_logits`, reading the matrix weights from `half` where given.
    pub fn decode_step_logits_with(&self, tokens: &[u32], rows: &[usize], cache: &mut KvCache, half: Option<&RolloutWeights>) -> Result<Vec<f32>> {
        let plan = Plan::decode(tokens, rows, &cache.shape)?;
        self.run_cached(tokens, &plan, cache, half, false)
    }

    /// Runs the new tokens through the layers into the cache and returns the logits of every row
    /// (`last_only`: of the last one).
    fn run_cached(&self, tokens: &[u32], plan: &Plan, cache: &mut KvCache, half: Option<&RolloutWeights>, last_only: bool) -> Result<Vec<f32>> {
        self.check_f32()?;
        plan.check(self, tokens, &cache.shape)?;
        if half.is_some_and(|r| r.half.len() != self.params.len()) {
            return Err(DecoderError::BadInput("rollout weights of another model".into()));
        }
        let (h, n) = (self.config().hidden_size, tokens.len());
        let layout = cache.layout();
        let step = Step { queries: &plan.queries, positions: &plan.positions };
        let logits = with_ctx!(self, f32, |m| {
            let snapshot: Option<Vec<Option<&Vec<u16>>>> = half.map(|r| r.half.iter().map(|h| h.as_deref()).collect());
            let halves = snapshot.as_deref();
            let mut views = CacheViews::<'_, _> { k: cache.k.iter_mut().map(|v| v.as_mut_slice()).collect(), v: cache.v.iter_mut().map(|v| v.as_mut_slice()).collect(), layout };
            let hidden = infer::run(&m, halves, tokens, &step, &mut views);
            if last_only {
                infer::head_logits(&m, halves, m.b.slice(m.b.view(&hidden), (n - 1) * h..n * h), 1)
            } else {
                infer::head_logits(&m, halves, m.b.view(&hidden), n)
            }
        });
        plan.commit(&mut cache.shape);
        Ok(logits)
    }
}

#[cfg(test)]
mod tests {
    use crate::decoder::random::{random_weights, RandomInit};
    use crate::decoder::Decoder;
    use candle_core::Device;
    use cppo_io::{Architecture, ModelConfig};

    /// Every matrix a decode step reads whole is in the snapshot, the output projection too, whether
    /// it is its own tensor or the tied embedding (a tied head left in f32 read twice its bytes per step).
    #[test]
    fn the_snapshot_holds_every_matrix_and_the_head_tied_or_not() {
        for tied in [true, false] {
            let cfg = ModelConfig { tie_word_embeddings: tied, ..ModelConfig::tiny(Architecture::Llama) };
            let weights = random_weights(&cfg, 7, &RandomInit::default()).unwrap();
            let dec = Decoder::new(&cfg, &weights, false, &Device::Cpu).unwrap();
            let snap = dec.rollout_weights().unwrap();
            let ix = &dec.index;
            assert!(snap.half[ix.lm_head].is_some(), "tied = {tied}: the head is not in the snapshot");
            for (i, p) in dec.params.iter().enumerate() {
                let expected = p.spec.is_linear() || i == ix.lm_head;
                assert_eq!(snap.half[i].is_some(), expected, "tied = {tied}: {}", p.spec.kind.name());
            }
            assert_eq!(ix.lm_head == ix.embed, tied);
        }
    }
}
