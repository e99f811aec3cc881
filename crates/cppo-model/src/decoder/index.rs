//! Where each parameter sits in the decoder's list (the order of `ModelConfig::params()`), looked up by
//! what it is rather than by counting, so no second list of the layer's tensors exists to fall out of
//! step with the first.

use cppo_io::params::{LayerParam, LoraFactor, ParamKind, ParamSpec};

#[derive(Clone, Debug)]
pub(crate) struct Index {
    pub embed: usize,
    pub norm: usize,
    /// Equal to `embed` when the output projection is tied to the embedding.
    pub lm_head: usize,
    layers: Vec<[Option<usize>; LayerParam::ALL.len()]>,
    /// Per layer and linear weight: the positions of its LoRA factors (A, B), if adapted.
    lora: Vec<[(Option<usize>, Option<usize>); LayerParam::ALL.len()]>,
}

impl Index {
    pub fn new(specs: &[ParamSpec]) -> Index {
        let (mut embed, mut norm, mut lm_head) = (None, None, None);
        let mut layers: Vec<[Option<usize>; LayerParam::ALL.len()]> = Vec::new();
        let mut lora: Vec<[(Option<usize>, Option<usize>); LayerParam::ALL.len()]> = Vec::new();
        for (i, s) in specs.iter().enumerate() {
            match s.kind {
                ParamKind::Embed => embed = Some(i),
                ParamKind::Norm => norm = Some(i),
                ParamKind::LmHead => lm_head = Some(i),
                ParamKind::Layer(l, p) => {
                    if layers.len() <= l {
                        layers.resize(l + 1, [None; LayerParam::ALL.len()]);
                    }
                    layers[l][p as usize] = Some(i);
                }
                ParamKind::Lora(l, p, f) => {
                    if lora.len() <= l {
                        lora.resize(l + 1, [(None, None); LayerParam::ALL.len()]);
                    }
                    let slot = &mut lora[l][p as usize];
                    match f {
                        LoraFactor::A => slot.0 = Some(i),
                        LoraFactor::B => slot.1 = Some(i),
                    }
                }
            }
        }
        let embed = embed.expect("every configuration has an embedding");
        Index { embed, norm: norm.expect("every configuration has a final norm"), lm_head: lm_head.unwrap_or(embed), layers, lora }
    }

    pub fn layers(&self) -> usize {
        self.layers.len()
    }

    /// The position of a tensor every layer has.
    ///
    /// # Panics
    /// When this configuration's layers lack it (a caller's bug: optional tensors go through `get`).
    pub fn at(&self, layer: usize, p: LayerParam) -> usize {
        self.get(layer, p).unwrap_or_else(|| panic!("layer {layer} has no {p:?}"))
    }

    /// The position of a tensor, if this configuration has it (biases, q/k norms).
    pub fn get(&self, layer: usize, p: LayerParam) -> Option<usize> {
        self.layers[layer][p as usize]
    }

    /// The positions of the LoRA factors (A, B) of a layer's linear weight, if it is adapted.
    pub fn lora(&self, layer: usize, p: LayerParam) -> Option<(usize, usize)> {
        match self.lora.get(layer).map(|l| l[p as usize]) {
            Some((Some(a), Some(b))) => Some((a, b)),
            _ => None,
        }
    }
}
