//! A model's tensors by their Hugging Face names (`model.layers.0.self_attn.q_proj.weight`, ...): the one
//! currency between loaders, the decoder and the writer.

use std::collections::BTreeMap;

use candle_core::Tensor;

#[derive(Clone, Debug, Default)]
pub struct Weights {
    pub tensors: BTreeMap<String, Tensor>,
}

impl Weights {
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors.get(name)
    }

    pub fn insert(&mut self, name: impl Into<String>, tensor: Tensor) {
        self.tensors.insert(name.into(), tensor);
    }
}

use std::path::Path;

use candle_core::{DType, Device};
use rand::{Rng, SeedableRng};

use crate::config::ModelConfig;
use crate::error::{ModelIoError, Result};

impl Weights {
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// Checks that these are exactly the tensors `config` implies, with its shapes; `path` names the source
    /// in errors. A missing tensor is reported before a wrong shape, which is reported before an extra tensor.
    pub fn check_against(&self, config: &ModelConfig, path: &Path) -> Result<()> {
        let expected = config.expected_tensor_shapes();
        if let Some(name) = expected.keys().find(|n| !self.tensors.contains_key(*n)) {
            return Err(ModelIoError::MissingTensor {
                path: path.to_path_buf(),
                name: name.clone(),
            });
        }
        for (name, shape) in &expected {
            let found = self.tensors[name].dims();
            if found != shape.as_slice() {
                return Err(ModelIoError::ShapeMismatch {
                    path: path.to_path_buf(),
                    name: name.clone(),
                    expected: shape.clone(),
                    found: found.to_vec(),
                });
            }
        }
        if let Some(name) = self.tensors.keys().find(|n| !expected.contains_key(*n)) {
            return Err(ModelIoError::UnexpectedTensor {
                path: path.to_path_buf(),
                name: name.clone(),
                architecture: config.architecture.model_type().to_string(),
            });
        }
        Ok(())
    }

    /// A deterministic random model for `config` in f32 on `device`: projections uniform with the scale of
    /// a trained model's (std ~ 1/sqrt(fan_in)), norm weights near 1 and distinct from each other, so that a
    /// test confusing two tensors fails.
    pub fn random(config: &ModelConfig, seed: u64, device: &Device) -> Result<Weights> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut weights = Weights::default();
        for (name, shape) in config.expected_tensor_shapes() {
            let n: usize = shape.iter().product();
            let values: Vec<f32> = if name.ends_with("norm.weight") {
                (0..n).map(|_| 1.0 + rng.gen_range(-0.1f32..0.1)).collect()
            } else {
                let fan_in = *shape.last().unwrap_or(&1) as f32;
                let bound = (3.0 / fan_in).sqrt();
                (0..n).map(|_| rng.gen_range(-bound..bound)).collect()
            };
            let tensor = Tensor::from_vec(values, shape.as_slice(), device)
                .map_err(|e| ModelIoError::tensor(&name, e))?;
            weights.insert(name, tensor);
        }
        Ok(weights)
    }

    /// Every tensor converted to `dtype` (f32 or bf16) on `device`.
    pub fn to_dtype_device(&self, dtype: DType, device: &Device) -> Result<Weights> {
        check_dtype(dtype)?;
        let mut out = Weights::default();
        for (name, t) in &self.tensors {
            let t = t
                .to_dtype(dtype)
                .and_then(|t| t.to_device(device))
                .map_err(|e| ModelIoError::tensor(name, e))?;
            out.insert(name.clone(), t);
        }
        Ok(out)
    }
}

pub(crate) fn check_dtype(dtype: DType) -> Result<()> {
    match dtype {
        DType::F32 | DType::BF16 => Ok(()),
        other => Err(ModelIoError::UnsupportedDtype(other)),
    }
}
