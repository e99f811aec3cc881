//! LoRA: trainable low-rank adapters `y = W x + s B (A x)` on a frozen base. The adapters are extra
//! parameters appended after the base's (`ModelConfig::lora_params`), found through the index like any
//! other; the base's weights lose their `Var`s, so the tape computes no weight gradient for them and
//! the optimizer never sees them. The products themselves are in `adapter.rs`.

use std::sync::Arc;

use candle_core::{DType, Tensor, Var};
use cppo_io::config::ModelConfig;
use cppo_io::params::{LayerParam, LoraFactor, ParamKind, ParamSpec};
use cppo_io::weights::Weights;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::index::Index;
use super::{Decoder, DecoderError, Param, Result};

/// What adapters a decoder carries.
#[derive(Clone, Debug, PartialEq)]
pub struct LoraSpec {
    /// The rank r.
    pub r: usize,
    /// PEFT's `lora_alpha`.
    pub alpha: f64,
    /// Scale by `alpha / sqrt(r)` (rsLoRA) instead of `alpha / r`.
    pub use_rslora: bool,
    /// The adapted linear layers of every decoder layer.
    pub targets: Vec<LayerParam>,
}

impl LoraSpec {
    /// The factor `s` of `y = W x + s B (A x)`, as PEFT computes it.
    pub fn scale(&self) -> f64 {
        if self.use_rslora {
            self.alpha / (self.r as f64).sqrt()
        } else {
            self.alpha / self.r as f64
        }
    }

    /// The adapter tensors this spec implies for `cfg`, after checking that it fits: a positive rank
    /// no larger than any adapted matrix's smaller side, and at least one linear target.
    pub fn params(&self, cfg: &ModelConfig) -> Result<Vec<ParamSpec>> {
        if self.r == 0 {
            return Err(DecoderError::BadConfig("lora.r = 0: the rank must be at least 1".into()));
        }
        if !self.alpha.is_finite() {
            return Err(DecoderError::BadConfig(format!("lora.alpha = {} must be finite", self.alpha)));
        }
        if self.targets.is_empty() {
            return Err(DecoderError::BadConfig("lora.target_modules names no module".into()));
        }
        if let Some(p) = self.targets.iter().find(|p| p.linear_module().is_none()) {
            return Err(DecoderError::BadConfig(format!("lora.target_modules: {p:?} is not a linear layer")));
        }
        for p in &self.targets {
            let shape = p.shape(cfg);
            let side = shape[0].min(shape[1]);
            if self.r > side {
                return Err(DecoderError::BadConfig(format!(
                    "lora.r = {} is larger than {} (shape {shape:?}): the rank can be at most {side} for {}",
                    self.r,
                    ParamKind::Layer(0, *p).name().replacen(".0.", ".N.", 1),
                    p.linear_module().unwrap_or("?"),
                )));
            }
        }
        Ok(cfg.lora_params(self.r, &self.targets))
    }
}

/// PEFT's default initialisation of one factor: A as `nn.Linear`'s Kaiming-uniform with a = sqrt(5)
/// (bound `1 / sqrt(fan_in)`), B zero, so that a fresh adapter changes nothing.
fn peft_init(spec: &ParamSpec, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let n: usize = spec.shape.iter().product();
    match spec.kind {
        ParamKind::Lora(_, _, LoraFactor::A) => {
            let bound = 1.0 / (spec.shape[1] as f64).sqrt();
            (0..n).map(|_| bound * (2.0 * rng.gen::<f64>() - 1.0)).collect()
        }
        _ => vec![0.0; n],
    }
}

impl Decoder {
    /// This decoder as a frozen base carrying fresh trainable adapters (PEFT's initialisation, drawn
    /// from `seed`): only the adapters are variables.
    pub fn with_lora(self, spec: LoraSpec, seed: u64) -> Result<Decoder> {
        let specs = spec.params(&self.cfg)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let values = specs
            .iter()
            .map(|s| Ok(Tensor::from_vec(peft_init(s, &mut rng), s.shape.clone(), self.device())?.to_dtype(self.dtype())?))
            .collect::<Result<Vec<_>>>()?;
        self.attach_adapters(spec, specs, values, true)
    }

    /// This decoder as a frozen base carrying the given adapters (by the names of
    /// `ModelConfig::lora_params`), trainable or not. A missing, misshapen or unexpected tensor is an
    /// error naming it.
    pub fn with_lora_weights(self, spec: LoraSpec, adapters: &Weights, trainable: bool) -> Result<Decoder> {
        let specs = spec.params(&self.cfg)?;
        if let Some(extra) = adapters.tensors.keys().find(|k| !specs.iter().any(|s| &s.name == *k)) {
            return Err(DecoderError::BadInput(format!(
                "adapter tensor `{extra}` does not belong to this base with r = {} on {:?}",
                spec.r,
                spec.targets.iter().filter_map(|p| p.linear_module()).collect::<Vec<_>>()
            )));
        }
        let mut values = Vec::with_capacity(specs.len());
        for s in &specs {
            let t = adapters.get(&s.name).ok_or_else(|| DecoderError::MissingTensor { name: s.name.clone() })?;
            if t.dims() != s.shape.as_slice() {
                return Err(DecoderError::BadShape { name: s.name.clone(), expected: s.shape.clone(), got: t.dims().to_vec() });
            }
            values.push(t.to_device(self.device())?.to_dtype(self.dtype())?);
        }
        self.attach_adapters(spec, specs, values, trainable)
    }

    fn attach_adapters(mut self, spec: LoraSpec, specs: Vec<ParamSpec>, values: Vec<Tensor>, trainable: bool) -> Result<Decoder> {
        if self.lora.is_some() {
            return Err(DecoderError::BadInput("this decoder already carries adapters".into()));
        }
        for p in self.params.iter_mut() {
            if p.var.take().is_some() {
                p.t = p.t.detach();
            }
        }
        for (s, t) in specs.into_iter().zip(values) {
            let (t, var) = if trainable {
                let var = Var::from_tensor(&t)?;
                (var.as_tensor().clone(), Some(var))
            } else {
                (t.copy()?.contiguous()?, None)
            };
            self.params.push(Param { spec: s, t, var, half: None });
        }
        let all: Vec<ParamSpec> = self.params.iter().map(|p| p.spec.clone()).collect();
        self.index = Arc::new(Index::new(&all));
        self.trainable = trainable;
        self.lora = Some(Arc::new(spec));
        self.adapters_on = true;
        self.frozen_snapshot = Arc::default();
        Ok(self)
    }

    /// The adapters this decoder carries, if any.
    pub fn lora(&self) -> Option<&LoraSpec> {
        self.lora.as_deref()
    }

    /// The scale of the adapters when they are in use.
    pub(crate) fn lora_scale(&self) -> Option<f64> {
        self.lora.as_ref().filter(|_| self.adapters_on).map(|s| s.scale())
    }

    /// Whether this decoder is `policy.without_adapters()` (or a clone of it): the same weights, read
    /// with the adapters off, so a backend holding `policy`'s weights needs no second copy for it.
    pub fn is_base_of(&self, policy: &Decoder) -> bool {
        self.lora.is_some() && !self.adapters_on && policy.adapters_on && Arc::ptr_eq(&self.frozen_snapshot, &policy.frozen_snapshot)
    }

    /// The frozen base alone, sharing this decoder's weights (no copy): the reference model of a LoRA
    /// run. No gradient graph.
    pub fn without_adapters(&self) -> Decoder {
        let mut d = self.clone();
        for p in d.params.iter_mut() {
            if p.var.take().is_some() {
                p.t = p.t.detach();
            }
        }
        d.adapters_on = false;
        d.trainable = false;
        d
    }

    /// The adapters' current values by name (`model.layers.N.self_attn.q_proj.lora_A.weight`).
    pub fn adapter_weights(&self) -> Result<Weights> {
        let mut w = Weights::default();
        for p in self.params.iter().filter(|p| matches!(p.spec.kind, ParamKind::Lora(..))) {
            w.insert(p.spec.name.clone(), p.value()?.copy()?);
        }
        Ok(w)
    }

    /// The base's weights with every adapter merged in, `W + s B A`, in f32: a plain model.
    pub fn merged_weights(&self) -> Result<Weights> {
        let mut w = self.to_weights()?;
        if let Some(spec) = &self.lora {
            for l in 0..self.index.layers() {
                for p in LayerParam::linear() {
                    let Some((ia, ib)) = self.index.lora(l, p) else { continue };
                    let (a, b) = (self.params[ia].value()?.to_dtype(DType::F64)?, self.params[ib].value()?.to_dtype(DType::F64)?);
                    let name = ParamKind::Layer(l, p).name();
                    let base = w.get(&name).ok_or_else(|| DecoderError::MissingTensor { name: name.clone() })?;
                    let merged = (base.to_dtype(DType::F64)? + (b.matmul(&a)? * spec.scale())?)?.to_dtype(DType::F32)?;
                    w.insert(name, merged);
                }
            }
        }
        Ok(w)
    }
}
