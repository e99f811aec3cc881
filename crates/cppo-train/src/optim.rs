//! AdamW's settings and its state as a checkpoint holds it: the moments as plain `Vec<f32>` per
//! variable and the step count. The update itself is the backend's AdamW op (`Backend::adamw_all`,
//! one call over flat buffers, in `device.rs`), which applies clipping, decoupled weight decay and the
//! Adam update in one pass; the run's backend holds the live moments and hands them back here before
//! a save (`set_moments`).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor, Var};
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
