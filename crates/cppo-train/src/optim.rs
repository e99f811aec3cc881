//! AdamW over flat f32 buffers, updated in place.
//!
//! candle's own AdamW keeps private state that cannot be saved, allocates a new tensor per parameter per
//! step and walks the parameters several times. Here the moments are plain `Vec<f32>` that a checkpoint can
//! write, gradients are accumulated into flat buffers across micro-batches, and the CPU backend's AdamW op
//! (`Backend::adamw`, the one the device path runs as a kernel) applies clipping, decoupled weight decay
//! and the Adam update in one pass directly into the variable's storage.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::backprop::GradStore;
use candle_core::{CpuStorage, DType, Device, InplaceOp1, Layout, Tensor, Var};
use cppo_kernels::backend::{AdamWStep, Backend};
use cppo_kernels::cpu::Cpu;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdamWConfig {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Global gradient-norm clipping; `None` or a non-positive value disables it.
    pub max_grad_norm: Option<f64>,
}

/// The Hugging Face Trainer's defaults, which TRL's GRPOTrainer inherits.
impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, max_grad_norm: Some(1.0) }
    }
}

impl AdamWConfig {
    /// The factor every gradient is multiplied by for global-norm clipping (1 when the norm is within
    /// `max_grad_norm`); a norm that is not finite is refused, so the weights are never updated from it.
    pub fn clip_coefficient(&self, grad_norm: f64) -> Result<f64> {
        if !grad_norm.is_finite() {
            bail!("gradient norm is {grad_norm}: refusing to update the weights");
        }
        Ok(match self.max_grad_norm {
            Some(max) if max > 0.0 && grad_norm > max => max / (grad_norm + 1e-6),
            _ => 1.0,
        })
    }
}

/// Gradients by variable: the decoder's backward pass (`WeightGrads`), or candle's autograd for
/// plain tensors (`GradStore`).
pub trait Gradients {
    fn get(&self, var: &Tensor) -> Option<&Tensor>;
}

impl Gradients for GradStore {
    fn get(&self, var: &Tensor) -> Option<&Tensor> {
        GradStore::get(self, var)
    }
}

impl Gradients for cppo_model::WeightGrads {
    fn get(&self, var: &Tensor) -> Option<&Tensor> {
        cppo_model::WeightGrads::get(self, var)
    }
}

/// Gradients summed over the micro-batches of one step, one flat buffer per trainable variable.
pub struct GradAccumulator {
    bufs: Vec<Vec<f32>>,
}

impl GradAccumulator {
    pub fn new(vars: &[(String, Var)]) -> Self {
        GradAccumulator { bufs: vars.iter().map(|(_, v)| vec![0f32; v.elem_count()]).collect() }
    }

    pub fn zero(&mut self) {
        self.bufs.par_iter_mut().for_each(|b| b.iter_mut().for_each(|x| *x = 0.0));
    }

    /// Adds the gradients of one backward pass. A variable the loss did not reach contributes zero.
    pub fn add(&mut self, vars: &[(String, Var)], grads: &impl Gradients) -> Result<()> {
        for ((name, var), buf) in vars.iter().zip(self.bufs.iter_mut()) {
            let Some(g) = grads.get(var.as_tensor()) else { continue };
            let g = g.to_dtype(DType::F32)?;
            cppo_kernels::host::with_slice(&g, |src: &[f32]| {
                if src.len() != buf.len() {
                    bail!("gradient of {name} has {} elements, expected {}", src.len(), buf.len());
                }
                buf.par_chunks_mut(1 << 16)
                    .zip(src.par_chunks(1 << 16))
                    .for_each(|(d, s)| d.iter_mut().zip(s).for_each(|(d, s)| *d += *s));
                Ok(())
            })
            .map_err(anyhow::Error::from)
            .and_then(|r| r)
            .with_context(|| format!("accumulating the gradient of {name}"))?;
        }
        Ok(())
    }

    pub fn norm(&self) -> f64 {
        self.bufs
            .par_iter()
            .map(|b| b.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>())
            .sum::<f64>()
            .sqrt()
    }

    /// Multiplies every gradient by `s` (used to average over accumulation steps when the loss was not
    /// already normalised over the whole batch).
    pub fn scale(&mut self, s: f32) {
        self.bufs.par_iter_mut().for_each(|b| b.iter_mut().for_each(|x| *x *= s));
    }

    pub fn buffers(&self) -> &[Vec<f32>] {
        &self.bufs
    }
}

#[derive(Clone, Copy, Debug)]
pub struct StepReport {
    /// The global gradient norm before clipping.
    pub grad_norm: f64,
    /// The factor gradients were multiplied by (1.0 when no clipping happened).
    pub clip_coef: f64,
}

pub struct AdamW {
    pub config: AdamWConfig,
    /// Adam steps taken so far (bias correction uses it).
    pub step: u64,
    m: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    names: Vec<String>,
    decay: Vec<bool>,
}

impl AdamW {
    /// Weight decay is applied to matrices only, not to norm weights and biases (the Hugging Face
    /// Trainer's convention, which TRL inherits).
    pub fn new(vars: &[(String, Var)], config: AdamWConfig) -> Self {
        AdamW {
            config,
            step: 0,
            m: vars.iter().map(|(_, v)| vec![0f32; v.elem_count()]).collect(),
            v: vars.iter().map(|(_, v)| vec![0f32; v.elem_count()]).collect(),
            names: vars.iter().map(|(n, _)| n.clone()).collect(),
            decay: vars.iter().map(|(_, v)| v.rank() >= 2).collect(),
        }
    }

    /// One update with learning rate `lr` from the accumulated gradients.
    pub fn step(&mut self, vars: &[(String, Var)], grads: &GradAccumulator, lr: f64) -> Result<StepReport> {
        if vars.len() != self.m.len() {
            bail!("optimizer holds state for {} variables, got {}", self.m.len(), vars.len());
        }
        let grad_norm = grads.norm();
        let clip_coef = self.config.clip_coefficient(grad_norm)?;
        self.step += 1;
        let c = &self.config;
        for (i, (name, var)) in vars.iter().enumerate() {
            let op = AdamUpdate {
                grad: &grads.bufs[i],
                m: RefCell::new(&mut self.m[i]),
                v: RefCell::new(&mut self.v[i]),
                step: AdamWStep {
                    lr,
                    beta1: c.beta1,
                    beta2: c.beta2,
                    eps: c.eps,
                    weight_decay: if self.decay[i] { c.weight_decay } else { 0.0 },
                    step: self.step,
                    grad_scale: clip_coef,
                },
            };
            if var.device().is_cpu() {
                var.as_tensor().inplace_op1(&op).with_context(|| format!("updating {name}"))?;
            } else {
                let mut p = var.as_tensor().flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
                op.apply(&mut p);
                let t = Tensor::from_vec(p, var.shape(), var.device())?.to_dtype(var.dtype())?;
                var.set(&t)?;
            }
        }
        Ok(StepReport { grad_norm, clip_coef })
    }

    /// Per variable, whether weight decay applies to it (matrices only).
    pub fn decays(&self) -> &[bool] {
        &self.decay
    }

    /// The first and second moments, one buffer per variable.
    pub fn moments(&self) -> (&[Vec<f32>], &[Vec<f32>]) {
        (&self.m, &self.v)
    }

    /// Replaces the moments and the step count (with a device's, before a checkpoint is written).
    pub fn set_moments(&mut self, step: u64, m: Vec<Vec<f32>>, v: Vec<Vec<f32>>) -> Result<()> {
        let lens = |x: &[Vec<f32>]| x.iter().map(Vec::len).collect::<Vec<_>>();
        if lens(&m) != lens(&self.m) || lens(&v) != lens(&self.v) {
            bail!("set_moments: the moments do not match the variables' shapes");
        }
        (self.step, self.m, self.v) = (step, m, v);
        Ok(())
    }

    /// Writes the moments and the step counter (safetensors + JSON), atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut tensors = HashMap::new();
        for (i, name) in self.names.iter().enumerate() {
            tensors.insert(format!("m.{name}"), Tensor::from_slice(&self.m[i], self.m[i].len(), &Device::Cpu)?);
            tensors.insert(format!("v.{name}"), Tensor::from_slice(&self.v[i], self.v[i].len(), &Device::Cpu)?);
        }
        tensors.insert("step".to_string(), Tensor::new(&[self.step as f64], &Device::Cpu)?);
        let tmp = path.with_extension("tmp");
        candle_core::safetensors::save(&tensors, &tmp)?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming {} into place", tmp.display()))?;
        Ok(())
    }

    /// Restores what [`AdamW::save`] wrote; the variables must be the same ones, in the same order.
    pub fn load(&mut self, path: &Path) -> Result<()> {
        let tensors = candle_core::safetensors::load(path, &Device::Cpu)
            .with_context(|| format!("reading optimizer state {}", path.display()))?;
        let get = |key: &str, len: usize| -> Result<Vec<f32>> {
            let t = tensors.get(key).with_context(|| format!("{}: missing tensor `{key}`", path.display()))?;
            let v = t.to_vec1::<f32>()?;
            if v.len() != len {
                bail!("{}: `{key}` has {} elements, the model has {len}", path.display(), v.len());
            }
            Ok(v)
        };
        for i in 0..self.names.len() {
            let len = self.m[i].len();
            self.m[i] = get(&format!("m.{}", self.names[i]), len)?;
            self.v[i] = get(&format!("v.{}", self.names[i]), len)?;
        }
        let step = tensors.get("step").with_context(|| format!("{}: missing `step`", path.display()))?;
        self.step = step.to_vec1::<f64>()?[0] as u64;
        Ok(())
    }
}

/// One parameter's update as a candle in-place op, so it runs on the variable's own storage.
struct AdamUpdate<'a> {
    grad: &'a [f32],
    m: RefCell<&'a mut Vec<f32>>,
    v: RefCell<&'a mut Vec<f32>>,
    step: AdamWStep,
}

impl AdamUpdate<'_> {
    fn apply(&self, p: &mut [f32]) {
        let mut m = self.m.borrow_mut();
        let mut v = self.v.borrow_mut();
        Cpu::<f32>::new().adamw(p, self.grad, &mut m[..], &mut v[..], &self.step);
    }
}

impl InplaceOp1 for AdamUpdate<'_> {
    fn name(&self) -> &'static str {
        "adamw-update"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("adamw: parameters must be f32 on CPU");
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("adamw: parameter is not contiguous");
        };
        let p = &mut data[start..end];
        if p.len() != self.grad.len() {
            candle_core::bail!("adamw: {} parameters but {} gradients", p.len(), self.grad.len());
        }
        self.apply(p);
        Ok(())
    }
}
