//! The decoder of the Llama family (Llama 2/3, SmolLM2, Qwen2/2.5, Qwen3) with two execution paths over
//! the same weights, both written against the kernels' `Backend` trait: a training path (`tape.rs`:
//! log-probs through a tape with a hand-written backward, run from dL/dlogp by `backward.rs`;
//! `train.rs` is its public face) and a generation path over a
//! preallocated KV cache (`infer.rs`, public face `generate.rs`). The weights are described once, by
//! `cppo_io::params`, and found through `index.rs`.

mod adapter;
mod backward;
mod bf16_base;
mod cache_plan;
mod dropout;
mod error;
mod generate;
mod index;
mod infer;
mod lora;
mod on_backend;
mod on_backend_generate;
mod random;
mod tape;
mod train;

use std::sync::{Arc, OnceLock};

use candle_core::{DType, Device, Tensor, Var};
use cppo_io::params::ParamSpec;

pub use dropout::dropout_multipliers;
pub use error::{DecoderError, Result};
pub use generate::RolloutWeights;
pub use lora::LoraSpec;
pub use on_backend::{BackendWeights, DeviceForward, DeviceTapeRun, TapeRun};
pub use on_backend_generate::DeviceHalves;
pub use random::{random_weights, RandomInit};
pub use backward::{Backward, WeightGrads};
pub use train::CompletionLogProbs;

use cppo_io::config::ModelConfig;
use cppo_io::weights::Weights;
use cppo_kernels::backend::Backend;
use cppo_kernels::rope::RopeTable;
use cppo_kernels::Precision;
use index::Index;

/// One weight: a `Var` when trainable, a plain tensor when frozen, or (a frozen linear layer of a
/// `with_bf16_base` decoder) only its bf16 values, with `t` an empty tensor of the decoder's dtype.
#[derive(Clone, Debug)]
pub(crate) struct Param {
    pub spec: ParamSpec,
    pub t: Tensor,
    pub var: Option<Var>,
    /// The weight's only storage when it is held in bf16, shared with every rollout snapshot.
    pub half: Option<Arc<Vec<u16>>>,
}

impl Param {
    /// The current value with no link to the gradient graph (a bf16-stored weight widened, exactly,
    /// to the decoder's dtype).
    pub fn value(&self) -> Result<Tensor> {
        match &self.half {
            Some(h) => {
                let wide: Vec<f32> = h.iter().map(|&v| cppo_kernels::skinny::from_bf16(v)).collect();
                Ok(Tensor::from_vec(wide, self.spec.shape.clone(), self.t.device())?.to_dtype(self.t.dtype())?)
            }
            None => Ok(self.t.detach()),
        }
    }

    /// A layer's matrix: what the training tape multiplies through `Ctx::linear` (the output
    /// projection is read by the log-prob kernels instead).
    pub fn is_layer_matrix(&self) -> bool {
        self.spec.is_linear() && self.spec.kind != cppo_io::params::ParamKind::LmHead
    }

    /// The bytes this weight holds in memory.
    pub fn bytes(&self) -> usize {
        self.t.elem_count() * self.t.dtype().size_in_bytes() + self.half.as_ref().map_or(0, |h| h.len() * 2)
    }
}

/// Which implementation of the kernels' `Backend` runs the decoder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendKind {
    /// This crate's CPU kernels (`cppo_kernels::cpu`).
    #[default]
    Cpu,
    /// Plain loops summing in f64 (`cppo_kernels::reference`): slow, for checking the others.
    Reference,
}

/// What the generic paths need: the backend, the weights as its views (in parameter order), where
/// each weight is, and the model's shape. Two lifetimes: the weights' memory (`'a`, which a
/// backend's views are invariant in) and the borrow of the slices that list them (`'s`), so a caller
/// can build the list of views locally from buffers it borrows for longer.
pub(crate) struct Ctx<'s, 'a, B: Backend> {
    pub b: &'a B,
    pub w: &'s [B::View<'a>],
    pub ix: &'s Index,
    pub cfg: &'s ModelConfig,
    pub rope: &'s Arc<RopeTable>,
    pub mp: Precision,
    /// The adapters' scale when the decoder's LoRA adapters are in use.
    pub lora: Option<f64>,
    /// Per weight, its bf16 storage when it is held only in bf16 (`w` is then empty for it).
    pub half: &'s [Option<&'a B::Half>],
    /// The adapters' dropout masks in a training forward pass and its backward (`dropout.rs`).
    pub dropout: Option<dropout::DropoutKey>,
}

impl<B: Backend> Ctx<'_, '_, B> {
    /// `y (+)= x @ w^T (+ bias)` for weight `i`, read from its bf16 storage when it has one.
    #[allow(clippy::too_many_arguments)]
    pub fn linear(&self, i: usize, x: B::View<'_>, bias: Option<B::View<'_>>, din: usize, dout: usize, y: B::ViewMut<'_>, add: bool, p: Precision) {
        match self.half[i] {
            Some(h) => self.b.linear_half(x, h, bias, din, dout, y, add, p),
            None => self.b.linear(x, self.w[i], bias, din, dout, y, add, p),
        }
    }

    /// `dx (+)= g @ w` for weight `i`, read from its bf16 storage when it has one.
    #[allow(clippy::too_many_arguments)]
    pub fn grad_input(&self, i: usize, dx: B::ViewMut<'_>, g: B::View<'_>, din: usize, dout: usize, add: bool, p: Precision) {
        match self.half[i] {
            Some(h) => self.b.linear_grad_input_half(dx, g, h, din, dout, add, p),
            None => self.b.linear_grad_input(dx, g, self.w[i], din, dout, add, p),
        }
    }
}

/// Runs `$body` with `$m: Ctx` over this decoder's weights (read-locked for its duration) on the
/// decoder's backend computing in `$T`. The weights live in host memory, which both backends read.
macro_rules! with_ctx {
    ($dec:expr, $T:ty, |$m:ident| $body:expr) => {{
        let dec = &$dec;
        let guards = dec.weight_guards();
        let w: Vec<&[$T]> = guards.iter().map(|g| g.get::<$T>()).collect::<candle_core::Result<_>>()?;
        let half = dec.stored_halves();
        match dec.backend {
            $crate::decoder::BackendKind::Cpu => {
                let b = cppo_kernels::cpu::Cpu::<$T>::new();
                let $m = $crate::decoder::Ctx { b: &b, w: &w, ix: &dec.index, cfg: &dec.cfg, rope: &dec.rope, mp: dec.matmul, lora: dec.lora_scale(), half: &half, dropout: None };
                $body
            }
            $crate::decoder::BackendKind::Reference => {
                let b = cppo_kernels::reference::Reference::<$T>::new();
                let $m = $crate::decoder::Ctx { b: &b, w: &w, ix: &dec.index, cfg: &dec.cfg, rope: &dec.rope, mp: dec.matmul, lora: dec.lora_scale(), half: &half, dropout: None };
                $body
            }
        }
    }};
}
pub(crate) use with_ctx;

/// A Llama-family decoder. Weights are `Var`s when trainable; computation is in `dtype` (f32 by
/// default; f64 for gradient checks).
#[derive(Clone, Debug)]
pub struct Decoder {
    cfg: ModelConfig,
    device: Device,
    dtype: DType,
    trainable: bool,
    /// Every weight, in the order of `ModelConfig::params()`.
    pub(crate) params: Vec<Param>,
    pub(crate) index: Arc<Index>,
    pub(crate) rope: Arc<RopeTable>,
    backend: BackendKind,
    /// How the training path's large products multiply (`with_matmul_precision`).
    matmul: Precision,
    /// The sampling temperature the training path's log-probs are taken at (`with_logprob_temperature`).
    temperature: f64,
    /// The LoRA adapters' settings when the decoder carries adapters (`with_lora`).
    lora: Option<Arc<LoraSpec>>,
    /// Whether the adapters take part (false in `without_adapters`, the reference of a LoRA run).
    adapters_on: bool,
    /// The bf16 rollout snapshot of a frozen base (a LoRA decoder), taken once and shared by clones:
    /// only the adapters change during training, and they run unmerged beside it.
    frozen_snapshot: Arc<OnceLock<RolloutWeights>>,
    /// Dropout on the adapters' inputs in training (`with_lora_dropout`), shared by clones.
    dropout: Option<Arc<dropout::DropoutState>>,
}

/// Every tensor a configuration needs, with its shape, in the decoder's order (`ModelConfig::params()`).
pub fn expected_tensors(cfg: &ModelConfig) -> Vec<(String, Vec<usize>)> {
    cfg.params().into_iter().map(|p| (p.name, p.shape)).collect()
}

fn check_config(cfg: &ModelConfig) -> Result<()> {
    let bad = |m: String| Err(DecoderError::BadConfig(m));
    if cfg.vocab_size == 0 || cfg.hidden_size == 0 || cfg.intermediate_size == 0 {
        return bad("vocab_size, hidden_size and intermediate_size must be positive".into());
    }
    if cfg.num_attention_heads == 0 || cfg.num_key_value_heads == 0 {
        return bad("num_attention_heads and num_key_value_heads must be positive".into());
    }
    if cfg.num_attention_heads % cfg.num_key_value_heads != 0 {
        return bad(format!(
            "num_attention_heads {} is not a multiple of num_key_value_heads {}",
            cfg.num_attention_heads, cfg.num_key_value_heads
        ));
    }
    if cfg.head_dim == 0 || cfg.head_dim % 2 != 0 {
        return bad(format!("head_dim must be even and positive, got {}", cfg.head_dim));
    }
    if cfg.max_position_embeddings == 0 {
        return bad("max_position_embeddings must be positive".into());
    }
    if cfg.rms_norm_eps.is_nan() || cfg.rms_norm_eps < 0.0 || cfg.rope_theta.is_nan() || cfg.rope_theta <= 0.0 {
        return bad(format!("bad rms_norm_eps {} or rope_theta {}", cfg.rms_norm_eps, cfg.rope_theta));
    }
    Ok(())
}

impl Decoder {
    /// Builds a decoder computing in f32 from `weights` (any float dtype, converted), as `Var`s when
    /// `trainable`.
    pub fn new(cfg: &ModelConfig, weights: &Weights, trainable: bool, device: &Device) -> Result<Decoder> {
        Self::new_with_dtype(cfg, weights, trainable, device, DType::F32)
    }

    /// As `new`, computing in `dtype` (f32 or f64; the inference path needs f32).
    pub fn new_with_dtype(
        cfg: &ModelConfig,
        weights: &Weights,
        trainable: bool,
        device: &Device,
        dtype: DType,
    ) -> Result<Decoder> {
        check_config(cfg)?;
        if !matches!(dtype, DType::F32 | DType::F64) {
            return Err(DecoderError::BadInput(format!("decoder: unsupported compute dtype {dtype:?} (f32 or f64)")));
        }
        let mut params = Vec::new();
        for spec in cfg.params() {
            let name = &spec.name;
            let t = weights.get(name).ok_or_else(|| DecoderError::MissingTensor { name: name.clone() })?;
            if t.dims() != spec.shape.as_slice() {
                return Err(DecoderError::BadShape { name: name.clone(), expected: spec.shape.clone(), got: t.dims().to_vec() });
            }
            // A deep copy, so that training never writes into the caller's tensors.
            let t = t.detach().to_device(device)?.to_dtype(dtype)?;
            let (t, var) = if trainable {
                // `from_tensor` copies a plain tensor into fresh, contiguous storage.
                let var = Var::from_tensor(&t)?;
                (var.as_tensor().clone(), Some(var))
            } else {
                (t.copy()?.contiguous()?, None)
            };
            params.push(Param { spec, t, var, half: None });
        }
        let specs: Vec<ParamSpec> = params.iter().map(|p| p.spec.clone()).collect();
        let inv = cppo_io::config::inverse_frequencies(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling.as_ref());
        let rope = RopeTable::new(&inv, cfg.max_position_embeddings)?;
        Ok(Decoder {
            cfg: cfg.clone(),
            device: device.clone(),
            dtype,
            trainable,
            index: Arc::new(Index::new(&specs)),
            params,
            rope: Arc::new(rope),
            backend: BackendKind::Cpu,
            matmul: Precision::F32,
            temperature: 1.0,
            lora: None,
            adapters_on: false,
            frozen_snapshot: Arc::default(),
            dropout: None,
        })
    }

    /// A trainable decoder with Hugging Face's default initialisation (normal(0, 0.02) matrices, unit
    /// norms, zero biases), deterministic in `seed`.
    pub fn random(cfg: &ModelConfig, seed: u64, device: &Device) -> Result<Decoder> {
        let w = random_weights(cfg, seed, &RandomInit::default())?;
        Self::new(cfg, &w, true, device)
    }

    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn is_trainable(&self) -> bool {
        self.trainable
    }

    /// The same decoder (sharing its weights) whose log-prob forward and backward passes multiply at
    /// `precision`: `Bf16` is mixed precision as in `torch.autocast`, with the weights, their gradients
    /// and everything but the linear layers' and output projection's products in the decoder's dtype.
    /// Generation (`infer.rs`) and `forward_logits` are unaffected.
    pub fn with_matmul_precision(mut self, precision: Precision) -> Self {
        self.matmul = precision;
        self
    }

    pub fn matmul_precision(&self) -> Precision {
        self.matmul
    }

    /// The same decoder (sharing its weights) whose log-probs (`completion_logprobs*`,
    /// `sequence_logprobs`) and entropies are those of `softmax(logits / temperature)`, forward and
    /// backward: the distribution completions sampled at that temperature were drawn from, which is
    /// what the policy-gradient ratio and KL must be taken under (as TRL and verl do). At 1 (the
    /// default) nothing is rescaled and the results are bit for bit those of an unscaled decoder.
    /// Generation and `forward_logits` are unaffected. `temperature` must be finite and > 0.
    pub fn with_logprob_temperature(mut self, temperature: f64) -> Result<Self> {
        if !(temperature.is_finite() && temperature > 0.0) {
            return Err(DecoderError::BadInput(format!("log-prob temperature {temperature} must be finite and > 0")));
        }
        self.temperature = temperature;
        Ok(self)
    }

    pub fn logprob_temperature(&self) -> f64 {
        self.temperature
    }

    /// The same decoder (sharing its weights) run by another backend: the reference backend, to check
    /// the CPU kernels on every path.
    pub fn with_backend(mut self, backend: BackendKind) -> Self {
        self.backend = backend;
        self
    }

    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    /// The trainable variables by Hugging Face name, in a stable order (embedding, layers in order,
    /// final norm, untied lm_head; with LoRA, only the adapters); empty when frozen.
    pub fn vars(&self) -> Vec<(String, Var)> {
        self.params.iter().filter_map(|p| p.var.clone().map(|v| (p.spec.name.clone(), v))).collect()
    }

    /// A copy of the current values under their Hugging Face names (a tied embedding appears once, as
    /// `model.embed_tokens.weight`): the model's own tensors, without any LoRA adapter
    /// (`adapter_weights`, `merged_weights`).
    pub fn to_weights(&self) -> Result<Weights> {
        let mut w = Weights::default();
        for p in self.params.iter().filter(|p| !matches!(p.spec.kind, cppo_io::params::ParamKind::Lora(..))) {
            w.insert(p.spec.name.clone(), p.value()?.copy()?);
        }
        Ok(w)
    }

    /// A deep copy as plain tensors (no graph, no gradients), e.g. for the reference model.
    pub fn frozen_copy(&self) -> Result<Decoder> {
        let mut d = self.clone();
        for p in d.params.iter_mut() {
            // A bf16-stored weight is never written, so the copy may share it.
            if p.half.is_none() {
                p.t = p.value()?.copy()?;
            }
            p.var = None;
        }
        d.trainable = false;
        Ok(d)
    }

    /// Per parameter, whether it is trainable (a variable): the weights whose gradients the tape computes.
    pub fn trainable_mask(&self) -> Vec<bool> {
        self.params.iter().map(|p| p.var.is_some()).collect()
    }

    /// Per weight, its bf16 storage when it is held only in bf16.
    pub(crate) fn stored_halves(&self) -> Vec<Option<&Vec<u16>>> {
        self.params.iter().map(|p| p.half.as_deref()).collect()
    }

    /// The bytes the decoder's weights hold in memory (adapters included; the rollout snapshot of a
    /// base held in f32 not).
    pub fn weight_bytes(&self) -> usize {
        self.params.iter().map(Param::bytes).sum()
    }

    /// Read locks on every weight's memory, in parameter order, for the kernels to read as slices.
    pub(crate) fn weight_guards(&self) -> Vec<cppo_kernels::host::HostSlice<'_>> {
        self.params.iter().map(|p| cppo_kernels::host::HostSlice::new(&p.t, &p.spec.name)).collect()
    }

    pub(crate) fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= self.cfg.vocab_size) {
            return Err(DecoderError::TokenOutOfRange { token: t, vocab: self.cfg.vocab_size });
        }
        Ok(())
    }
}
