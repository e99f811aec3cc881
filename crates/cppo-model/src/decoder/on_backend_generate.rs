//! The generation path on a backend the caller brings: a prefill and a decode step over the weights
//! uploaded to it (`BackendWeights`) and a key/value cache in its memory (`DeviceCache`), running the
//! same layer code as the host path (`infer.rs`) and leaving the logits in the backend's memory (the
//! engine samples them there). A device
//! crate (cppo-cuda) drives the engine through it without cppo-model depending on that crate.
//!
//! Rollouts may read a bf16 copy of the matrix weights made on the backend itself
//! (`DeviceHalves`, the device's counterpart of the host's `RolloutWeights`), as an inference engine
//! samples from bf16 weights.

use cppo_kernels::backend::Backend;

use super::cache_plan::Plan;
use super::infer::{self, CacheViews, Step};
use super::on_backend::DeviceCtx;
use super::{BackendWeights, Decoder, DecoderError, Result};
use crate::device_cache::DeviceCache;

/// bf16 copies, in a backend's memory, of the weights a decode step reads whole (every linear
/// layer's and the output projection's), indexed like the parameters. A snapshot, unless whoever
/// updates the weights rewrites it too (`BackendWeights::halves`).
pub struct DeviceHalves<B: Backend> {
    pub(super) half: Vec<Option<B::Half>>,
}

impl<B: Backend> DeviceHalves<B> {
    /// How many weights have a bf16 copy.
    pub fn count(&self) -> usize {
        self.half.iter().flatten().count()
    }

    /// Weight `i`'s copy.
    pub fn get(&self, i: usize) -> Option<&B::Half> {
        self.half.get(i).and_then(Option::as_ref)
    }

    /// Every weight's copy, in parameter order, to rewrite after an update.
    pub fn slots_mut(&mut self) -> impl Iterator<Item = Option<&mut B::Half>> {
        self.half.iter_mut().map(Option::as_mut)
    }
}

impl Decoder {
    /// An empty cache in `b`'s memory for this model (`rows` rows of up to `max_len` positions), in
    /// `b`'s `T`.
    pub fn new_device_cache<B: Backend>(&self, b: &B, rows: usize, max_len: usize) -> Result<DeviceCache<B>> {
        DeviceCache::new(b, self.config(), rows, max_len)
    }

    /// As `new_device_cache`, in bf16 where `b` keeps caches so (rollouts from bf16 weights).
    pub fn new_device_cache_bf16<B: Backend>(&self, b: &B, rows: usize, max_len: usize) -> Result<DeviceCache<B>> {
        DeviceCache::new_bf16(b, self.config(), rows, max_len)
    }

    /// The bf16 copies of `w`'s matrices (those `rollout_weights` snapshots on the host), made by `b`.
    pub fn device_rollout_weights<B: Backend<T = f32>>(&self, b: &B, w: &BackendWeights<B>) -> Result<DeviceHalves<B>> {
        self.check_weights(b, w)?;
        let half = (0..self.params.len())
            .map(|i| {
                let wanted = self.params[i].spec.is_linear() || i == self.index.lm_head;
                wanted.then(|| match w.stored_in_bf16(b, i) {
                    // Exact: the widened copy rounds back to itself.
                    Some(h) => b.to_half(b.view(&b.widen(h))),
                    None => b.to_half(b.view(&w.bufs[i])),
                })
            })
            .collect();
        Ok(DeviceHalves { half })
    }

    /// Gives `w` bf16 copies of its matrices (`BackendWeights::halves`), made from its f32 weights
    /// where it has no bf16 storage for them already; with `f32_too` false, a frozen model's f32
    /// layer matrices are then freed (a reference model, which only runs forward at bf16 products),
    /// halving what they take.
    pub fn keep_bf16_copies<B: Backend<T = f32>>(&self, b: &B, w: &mut BackendWeights<B>, f32_too: bool) -> Result<()> {
        self.check_weights(b, w)?;
        if !f32_too && self.matmul == cppo_kernels::Precision::F32 {
            return Err(DecoderError::BadInput("keep_bf16_copies: f32 products need the f32 matrices".into()));
        }
        let mut half = w.halves.take().map_or_else(|| (0..self.params.len()).map(|_| None).collect(), |h| h.half);
        for (i, (p, slot)) in self.params.iter().zip(half.iter_mut()).enumerate() {
            if slot.is_none() && (p.spec.is_linear() || i == self.index.lm_head) {
                *slot = Some(b.to_half(b.view(&w.bufs[i])));
            }
        }
        if !f32_too {
            for (p, buf) in self.params.iter().zip(w.bufs.iter_mut()) {
                if p.is_layer_matrix() {
                    *buf = b.zeros(0);
                }
            }
        }
        w.halves = Some(DeviceHalves { half });
        Ok(())
    }

    /// Copies a prefilled row (its filled positions) into other rows of a backend's cache.
    pub fn copy_row_on<B: Backend>(&self, b: &B, cache: &mut DeviceCache<B>, from_row: usize, to_rows: &[usize]) -> Result<()> {
        cache.shape.check_row(from_row)?;
        for &t in to_rows {
            cache.shape.check_row(t)?;
        }
        let len = cache.shape.lens[from_row];
        let layout = cache.shape.layout();
        for (k, v) in cache.k.iter_mut().zip(cache.v.iter_mut()) {
            b.cache_copy_row(b.view_mut(k), &layout, from_row, len, to_rows);
            b.cache_copy_row(b.view_mut(v), &layout, from_row, len, to_rows);
        }
        for &t in to_rows {
            cache.shape.lens[t] = len;
        }
        Ok(())
    }

    /// `prefill_logits_with` on `b`: appends `tokens` to `row` of `cache` and returns the logits
    /// `(vocab)` after the last of them, in `b`'s memory; matrices from `half` where given.
    pub fn prefill_on<B: Backend<T = f32>>(&self, b: &B, w: &BackendWeights<B>, half: Option<&DeviceHalves<B>>, tokens: &[u32], cache: &mut DeviceCache<B>, row: usize) -> Result<B::Buf> {
        let plan = Plan::prefill(tokens, &cache.shape, row)?;
        self.run_on(b, w, half, tokens, &plan, cache, true)
    }

    /// `decode_step_logits_with` on `b`: appends `tokens[i]` to `rows[i]` and returns the next-token
    /// logits `(rows.len(), vocab)` in the order of `rows`, in `b`'s memory.
    pub fn decode_on<B: Backend<T = f32>>(&self, b: &B, w: &BackendWeights<B>, half: Option<&DeviceHalves<B>>, tokens: &[u32], rows: &[usize], cache: &mut DeviceCache<B>) -> Result<B::Buf> {
        let plan = Plan::decode(tokens, rows, &cache.shape)?;
        self.run_on(b, w, half, tokens, &plan, cache, false)
    }

    pub(super) fn check_weights<B: Backend>(&self, b: &B, w: &BackendWeights<B>) -> Result<()> {
        if w.bufs.len() != self.params.len() {
            return Err(DecoderError::BadInput(format!("{} backend weights for a model of {}", w.bufs.len(), self.params.len())));
        }
        for (i, p) in self.params.iter().enumerate() {
            let n = b.len(b.view(&w.bufs[i]));
            if n != p.spec.shape.iter().product::<usize>() && w.stored_in_bf16(b, i).is_none() {
                return Err(DecoderError::BadInput(format!("backend weight {}: {n} values", p.spec.name)));
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn run_on<B: Backend<T = f32>>(&self, b: &B, w: &BackendWeights<B>, half: Option<&DeviceHalves<B>>, tokens: &[u32], plan: &Plan, cache: &mut DeviceCache<B>, last_only: bool) -> Result<B::Buf> {
        self.check_f32()?;
        plan.check(self, tokens, &cache.shape)?;
        self.check_weights(b, w)?;
        if half.is_some_and(|h| h.half.len() != self.params.len()) {
            return Err(DecoderError::BadInput("rollout weights of another model".into()));
        }
        // Every weight is on the backend in f32 (`upload_weights`); the bf16 copies come as `half`.
        // Generation reads the copies only as `half` (bf16 rollouts), and bf16 storage always.
        let ctx = DeviceCtx::new(self, b, w, false);
        let m = ctx.get(self, None);
        let halves: Option<Vec<Option<&B::Half>>> = half.map(|h| h.half.iter().map(Option::as_ref).collect());
        let step = Step { queries: &plan.queries, positions: &plan.positions };
        let (h, n) = (self.config().hidden_size, tokens.len());
        let layout = cache.shape.layout();
        let logits = {
            let mut views = CacheViews::<'_, B> { k: cache.k.iter_mut().map(|x| b.view_mut(x)).collect(), v: cache.v.iter_mut().map(|x| b.view_mut(x)).collect(), layout };
            let hidden = infer::run(&m, halves.as_deref(), tokens, &step, &mut views);
            if last_only {
                infer::head_logits(&m, halves.as_deref(), b.slice(b.view(&hidden), (n - 1) * h..n * h), 1)
            } else {
                infer::head_logits(&m, halves.as_deref(), b.view(&hidden), n)
            }
        };
        plan.commit(&mut cache.shape);
        Ok(logits)
    }
}
