//! The seam between the decoder and the kernels: every operation the training tape, the generation
//! path and the optimizer run, on buffers of one device. The decoder's files are written against this
//! trait only; a device is one implementation (`cpu::Cpu`, today's kernels; `reference::Reference`,
//! plain loops that check it; a GPU backend next).
//!
//! Buffers are the backend's own (`Buf`, owned; `View` / `ViewMut`, borrowed), so a device keeps its
//! memory; what crosses to the host is small and explicit (token ids, positions, gathered log-probs).
//! Matrices are row-major; a linear layer's weight is `(out, in)` as Hugging Face stores it.

use std::ops::Range;

use crate::attention::Attention;
use crate::logprob::Gather;
use crate::rope::RopeTable;
use crate::sample::SampleParams;
use crate::{Float, Precision};
use num_traits::ToPrimitive;

/// One weight of a projection and where its product goes: `y (+)= x @ w^T (+ bias)`. The weight's
/// borrow (`'w`) and the output's (`'y`) are separate: weights are read for a whole pass, outputs
/// written for one product.
pub struct Product<'w, 'y, B: Backend + ?Sized + 'w + 'y> {
    pub w: B::View<'w>,
    /// A bf16 copy of `w` that the product reads instead (a rollout snapshot), where given.
    pub half: Option<&'w B::Half>,
    pub bias: Option<B::View<'w>>,
    /// Output width (rows of `w`).
    pub dout: usize,
    pub y: B::ViewMut<'y>,
    /// Add to what `y` holds (the residual stream) instead of overwriting it.
    pub add: bool,
}

/// The log-probs of a gather's targets, in the gather's output layout (host memory: they are few), with
/// what the backward pass needs.
pub struct Scored<B: Backend + ?Sized> {
    /// `g.out_shape` flattened: the log-prob of each target at its slot, 0 elsewhere.
    pub out: Vec<B::T>,
    /// Per gathered row, the entropy of its predicted distribution.
    pub entropy: Vec<f64>,
    /// Per gathered row, the log-normaliser of its logits.
    pub lse: B::Buf,
    /// The output projection's logits chunk by chunk, when the forward was asked to keep them and they fit.
    pub logits: Option<Vec<B::Buf>>,
}

/// Where keys and values sit in one layer's cache buffer: `(row, kv head, position, dim)`, row-major.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLayout {
    pub kv_heads: usize,
    pub max_len: usize,
    pub head_dim: usize,
}

impl CacheLayout {
    /// Offset of (row, kv head, position 0).
    #[inline]
    pub fn offset(&self, row: usize, kv_head: usize) -> usize {
        (row * self.kv_heads + kv_head) * self.max_len * self.head_dim
    }
}

/// One query row of a generation step: the cache row it reads and how many of that row's positions it
/// sees (its own included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedQuery {
    pub row: usize,
    pub visible: usize,
}

/// The hyper-parameters of one AdamW step over one parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWStep {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// Decoupled weight decay (0 for parameters that take none).
    pub weight_decay: f64,
    /// Adam steps taken including this one (for bias correction).
    pub step: u64,
    /// The factor the gradient is multiplied by first (global-norm clipping).
    pub grad_scale: f64,
}

/// One parameter of `Backend::adamw_all`.
pub struct AdamWParam<'a, B: Backend + ?Sized + 'a> {
    pub w: B::ViewMut<'a>,
    /// Its bf16 copy, rewritten as the rounding of the updated weight (the copy the products read).
    pub half: Option<&'a mut B::Half>,
    /// Where its gradient and moments start in the flat buffers.
    pub offset: usize,
    /// Whether it takes weight decay (the matrices do; norms and biases do not).
    pub decay: bool,
}

/// The operations the decoder runs, on one device's buffers.
pub trait Backend: Send + Sync {
    /// The element type of activations, weights and gradients (f32; f64 for gradient checks on the CPU).
    type T: Float;
    /// An owned buffer of `T` in the device's memory.
    type Buf: Send + Sync;
    /// A weight's bf16 copy in the device's memory.
    type Half: Send + Sync;
    type View<'a>: Copy + Send + Sync
    where
        Self: 'a;
    type ViewMut<'a>: Send
    where
        Self: 'a;

    fn name(&self) -> &'static str;

    /// What `Auto` means for the weights rollouts read on this backend: bf16 by default (a device
    /// multiplies bf16 natively); the CPU decides by its instruction set (`Precision::for_rollouts`).
    fn rollout_precision(&self, p: Precision) -> Precision {
        match p {
            Precision::Auto => Precision::Bf16,
            p => p,
        }
    }

    /// Whether bf16 products read a kept bf16 copy of a weight more cheaply than its f32 value: a
    /// device multiplies bf16 operands natively (the default); the CPU rounds f32 operands as it
    /// multiplies and would widen a bf16 one first, so a copy only costs it.
    fn bf16_copies_pay(&self) -> bool {
        true
    }

    // Memory.
    fn zeros(&self, n: usize) -> Self::Buf;
    fn upload(&self, host: &[Self::T]) -> Self::Buf;
    fn download(&self, x: Self::View<'_>) -> Vec<Self::T>;
    fn len(&self, x: Self::View<'_>) -> usize;
    fn view<'a>(&self, b: &'a Self::Buf) -> Self::View<'a>;
    fn view_mut<'a>(&self, b: &'a mut Self::Buf) -> Self::ViewMut<'a>;
    /// A mutable view read through for a while.
    fn as_view<'a>(&self, x: &'a Self::ViewMut<'_>) -> Self::View<'a>;
    /// A mutable view lent out for a while.
    fn reborrow<'a>(&self, x: &'a mut Self::ViewMut<'_>) -> Self::ViewMut<'a>;
    fn slice<'a>(&self, x: Self::View<'a>, r: Range<usize>) -> Self::View<'a>
    where
        Self: 'a;
    fn slice_mut<'a>(&self, x: Self::ViewMut<'a>, r: Range<usize>) -> Self::ViewMut<'a>
    where
        Self: 'a;
    fn copy(&self, src: Self::View<'_>, dst: Self::ViewMut<'_>);
    fn duplicate(&self, x: Self::View<'_>) -> Self::Buf;
    /// The bf16 copy of a weight (round to nearest even).
    fn to_half(&self, w: Self::View<'_>) -> Self::Half;
    /// bf16 values (`to_half`'s format) into a bf16 buffer. The default widens them on the host,
    /// exactly, and rounds them back on the device.
    fn upload_half(&self, h: &[u16]) -> Self::Half {
        let wide: Vec<Self::T> = h.iter().map(|&v| <Self::T as crate::Float>::of(crate::skinny::from_bf16(v) as f64)).collect();
        self.to_half(self.view(&self.upload(&wide)))
    }
    /// A bf16 weight widened to `T` (exact).
    fn widen(&self, h: &Self::Half) -> Self::Buf;

    // Embedding.
    /// The rows of `table (vocab, width)` that `tokens` look up.
    fn embed(&self, table: Self::View<'_>, width: usize, tokens: &[u32]) -> Self::Buf;
    /// `dtable[t] += dx[r]` for every row r and its token t.
    fn embed_backward(
        &self,
        dtable: Self::ViewMut<'_>,
        width: usize,
        tokens: &[u32],
        dx: Self::View<'_>,
    );

    // RMSNorm over rows of `w.len()`.
    fn rms_norm(&self, x: Self::View<'_>, w: Self::View<'_>, eps: f64) -> Self::Buf;
    /// `dx` overwritten, or added to when `accumulate`; returns the gradient of `w`.
    fn rms_norm_backward(
        &self,
        x: Self::View<'_>,
        w: Self::View<'_>,
        dy: Self::View<'_>,
        eps: f64,
        dx: Self::ViewMut<'_>,
        accumulate: bool,
    ) -> Self::Buf;

    // Linear layers.
    /// The training path's `y (+)= x (n x din) @ w (dout x din)^T (+ bias)`, products at `p`.
    #[allow(clippy::too_many_arguments)]
    fn linear(
        &self,
        x: Self::View<'_>,
        w: Self::View<'_>,
        bias: Option<Self::View<'_>>,
        din: usize,
        dout: usize,
        y: Self::ViewMut<'_>,
        add: bool,
        p: Precision,
    );
    /// The generation path's products: several weights sharing one input `x (n x din)`, each from its
    /// bf16 copy where one is given, with its bias.
    fn project(&self, x: Self::View<'_>, n: usize, din: usize, outs: &mut [Product<'_, '_, Self>]);
    /// `dx (n x din) (+)= g (n x dout) @ w (dout x din)`.
    fn linear_grad_input(
        &self,
        dx: Self::ViewMut<'_>,
        g: Self::View<'_>,
        w: Self::View<'_>,
        din: usize,
        dout: usize,
        add: bool,
        p: Precision,
    );
    /// `g (n x dout)^T @ x (n x din)`.
    fn linear_grad_weight(
        &self,
        g: Self::View<'_>,
        x: Self::View<'_>,
        din: usize,
        dout: usize,
        p: Precision,
    ) -> Self::Buf;
    /// The column sums of `g (n x dout)`.
    fn linear_grad_bias(&self, g: Self::View<'_>, dout: usize) -> Self::Buf;
    /// `linear` for a weight held only in bf16 (a frozen LoRA base): the same result as `linear`
    /// with the weight widened to `T`, which is what this default does, one matrix at a time.
    #[allow(clippy::too_many_arguments)]
    fn linear_half(
        &self,
        x: Self::View<'_>,
        w: &Self::Half,
        bias: Option<Self::View<'_>>,
        din: usize,
        dout: usize,
        y: Self::ViewMut<'_>,
        add: bool,
        p: Precision,
    ) {
        let wide = self.widen(w);
        self.linear(x, self.view(&wide), bias, din, dout, y, add, p);
    }
    /// `linear_grad_input` for a weight held only in bf16, as `linear_half`.
    #[allow(clippy::too_many_arguments)]
    fn linear_grad_input_half(
        &self,
        dx: Self::ViewMut<'_>,
        g: Self::View<'_>,
        w: &Self::Half,
        din: usize,
        dout: usize,
        add: bool,
        p: Precision,
    ) {
        let wide = self.widen(w);
        self.linear_grad_input(dx, g, self.view(&wide), din, dout, add, p);
    }

    // Attention of the training path over a layout (the rotary embedding is applied inside).
    fn attention(
        &self,
        a: &Attention,
        q: Self::View<'_>,
        k: Self::View<'_>,
        v: Self::View<'_>,
    ) -> Self::Buf;
    /// `(dq, dk, dv)` before the rotary embedding.
    fn attention_backward(
        &self,
        a: &Attention,
        q: Self::View<'_>,
        k: Self::View<'_>,
        v: Self::View<'_>,
        dout: Self::View<'_>,
    ) -> (Self::Buf, Self::Buf, Self::Buf);

    // SwiGLU: `silu(gate) * up`.
    fn swiglu(&self, gate: Self::View<'_>, up: Self::View<'_>) -> Self::Buf;
    fn swiglu_backward(
        &self,
        gate: Self::View<'_>,
        up: Self::View<'_>,
        dy: Self::View<'_>,
    ) -> (Self::Buf, Self::Buf);

    // Log-probs of gathered targets through the output projection `head (vocab x width)`, over vocabulary
    // chunks (never all rows' logits at once unless asked to keep them and they fit).
    #[allow(clippy::too_many_arguments)]
    fn logprobs(
        &self,
        g: &Gather,
        h: Self::View<'_>,
        head: Self::View<'_>,
        vocab: usize,
        width: usize,
        keep: bool,
        p: Precision,
    ) -> Scored<Self>;
    /// Given `dlogp` (host, in the gather's output layout): `dh (+)=` into the hidden rows and `dhead`
    /// overwritten; with no `dhead` (a frozen output projection) its product is never computed.
    #[allow(clippy::too_many_arguments)]
    fn logprobs_backward(
        &self,
        g: &Gather,
        kept: Option<Vec<Self::Buf>>,
        lse: Self::View<'_>,
        h: Self::View<'_>,
        head: Self::View<'_>,
        dlogp: &[Self::T],
        vocab: usize,
        width: usize,
        dh: Self::ViewMut<'_>,
        dhead: Option<Self::ViewMut<'_>>,
        p: Precision,
    );
    /// `logprobs` given also `head_half`, a bf16 copy of `head` (its rounding, kept by the caller),
    /// which a backend may read instead of rounding `head` at bf16 products. The default ignores it:
    /// bf16 products round `head` to the same values.
    #[allow(clippy::too_many_arguments)]
    fn logprobs_half(&self, g: &Gather, h: Self::View<'_>, head: Self::View<'_>, head_half: &Self::Half, vocab: usize, width: usize, keep: bool, p: Precision) -> Scored<Self> {
        let _ = head_half;
        self.logprobs(g, h, head, vocab, width, keep, p)
    }
    /// `logprobs_backward` given also `head`'s bf16 copy, as `logprobs_half`.
    #[allow(clippy::too_many_arguments)]
    fn logprobs_backward_half(
        &self,
        g: &Gather,
        kept: Option<Vec<Self::Buf>>,
        lse: Self::View<'_>,
        h: Self::View<'_>,
        head: Self::View<'_>,
        head_half: &Self::Half,
        dlogp: &[Self::T],
        vocab: usize,
        width: usize,
        dh: Self::ViewMut<'_>,
        dhead: Option<Self::ViewMut<'_>>,
        p: Precision,
    ) {
        let _ = head_half;
        self.logprobs_backward(g, kept, lse, h, head, dlogp, vocab, width, dh, dhead, p)
    }

    // Generation.
    /// Rotates each head of each row of `x (rows, heads * head_dim)` by its row's position.
    fn rope(&self, x: Self::ViewMut<'_>, heads: usize, positions: &[usize], table: &RopeTable);
    /// Writes row i of `k` and `v (n, kv_heads * head_dim)` at `(slots[i].0 = cache row, slots[i].1 = position)`.
    #[allow(clippy::too_many_arguments)]
    fn cache_write(
        &self,
        cache_k: Self::ViewMut<'_>,
        cache_v: Self::ViewMut<'_>,
        layout: &CacheLayout,
        k: Self::View<'_>,
        v: Self::View<'_>,
        slots: &[(usize, usize)],
    );
    /// Copies positions `0..len` of cache row `from` into each row of `to`.
    fn cache_copy_row(
        &self,
        cache: Self::ViewMut<'_>,
        layout: &CacheLayout,
        from: usize,
        len: usize,
        to: &[usize],
    );
    /// `out (n, heads * head_dim)`: each query row attends to the first `visible` positions of its
    /// cache row, query heads grouped over the kv heads.
    #[allow(clippy::too_many_arguments)]
    fn cached_attention(
        &self,
        q: Self::View<'_>,
        cache_k: Self::View<'_>,
        cache_v: Self::View<'_>,
        layout: &CacheLayout,
        heads: usize,
        queries: &[CachedQuery],
        out: Self::ViewMut<'_>,
    );

    /// A zeroed key/value cache buffer of `n` elements in bf16, where this backend keeps rollout caches
    /// in bf16 (half the memory, and half the bytes each decode step's attention reads, as inference
    /// engines keep theirs; `cache_write` rounds to nearest even); `None`, the default, where its
    /// caches are in `T` only.
    fn bf16_cache_zeros(&self, _n: usize) -> Option<Self::Buf> {
        None
    }

    // Optimizer.
    /// One AdamW step in place: `w`, its moments `m`, `v`, from the gradient `g` (times `s.grad_scale`).
    fn adamw(
        &self,
        w: Self::ViewMut<'_>,
        g: Self::View<'_>,
        m: Self::ViewMut<'_>,
        v: Self::ViewMut<'_>,
        s: &AdamWStep,
    );
    /// One AdamW step over every parameter of `params`, whose gradients and moments lie end to end
    /// in the flat buffers `g`, `m`, `v`; `s.weight_decay` applies where a parameter decays. A device
    /// backend does it in one launch; this default steps one parameter at a time.
    fn adamw_all(&self, params: Vec<AdamWParam<'_, Self>>, g: Self::View<'_>, mut m: Self::ViewMut<'_>, mut v: Self::ViewMut<'_>, s: &AdamWStep) {
        for mut p in params {
            let n = self.len(self.as_view(&p.w));
            let span = p.offset..p.offset + n;
            let step = AdamWStep { weight_decay: if p.decay { s.weight_decay } else { 0.0 }, ..*s };
            let (pm, pv) = (self.slice_mut(self.reborrow(&mut m), span.clone()), self.slice_mut(self.reborrow(&mut v), span.clone()));
            self.adamw(self.reborrow(&mut p.w), self.slice(g, span), pm, pv, &step);
            if let Some(h) = p.half {
                *h = self.to_half(self.as_view(&p.w));
            }
        }
    }
    /// `sum x_i^2`, in f64.
    fn sum_squares(&self, x: Self::View<'_>) -> f64;
    /// `dst += src`.
    fn add_into(&self, dst: Self::ViewMut<'_>, src: Self::View<'_>);
    // Sampling.
    /// One token and its log-prob for each row of `logits (draws.len() x vocab)`, row `r` drawing with
    /// `draws[r]` after the repetition penalty on its earlier tokens `seen[r]` (`sample::sample_rows`).
    /// The default downloads the logits and samples on the host; a device backend samples where the
    /// logits are and brings back two numbers a row.
    fn sample_rows(&self, logits: Self::View<'_>, vocab: usize, draws: &[f64], p: &SampleParams, seen: &[&[u32]]) -> Vec<(u32, f32)> {
        let host: Vec<f32> = self.download(logits).into_iter().map(|x| x.to_f32().unwrap_or(f32::NAN)).collect();
        crate::sample::sample_rows(&host, vocab, draws, p, seen)
    }

    /// `s * x` as a new buffer (a LoRA adapter's scaling, on its rank-wide activations). The default
    /// goes through the host, which is free for host backends; a device backend may override it.
    fn scaled(&self, x: Self::View<'_>, s: f64) -> Self::Buf {
        let mut h = self.download(x);
        let s = <Self::T as crate::Float>::of(s);
        for v in h.iter_mut() {
            *v = *v * s;
        }
        self.upload(&h)
    }
}
