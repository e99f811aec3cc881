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
