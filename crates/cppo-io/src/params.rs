//! The model's parameters, described once: every tensor a configuration implies, in one stable order,
//! with its Hugging Face name, shape and role. Loading, checking, writing, the decoder's parameter list
//! and its index, the frozen copy, the rollout snapshot and the GGUF names all follow from this table,
//! so adding a tensor (a bias, a norm, an adapter) is a change here, and an order mismatch between two
//! lists of weights cannot exist.

use crate::config::ModelConfig;

/// A tensor of one decoder layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LayerParam {
    InputNorm,
    Q,
    QBias,
    K,
    KBias,
    V,
    VBias,
    QNorm,
    KNorm,
    O,
    PostNorm,
    Gate,
    Up,
    Down,
}

/// What a parameter is, wherever it sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    Embed,
    Layer(usize, LayerParam),
    Norm,
    /// The output projection (absent when tied to the embedding).
    LmHead,
    /// One factor of a LoRA adapter on a linear layer's weight (`ModelConfig::lora_params`).
    Lora(usize, LayerParam, LoraFactor),
}

/// The two factors of a LoRA adapter on `W (out, in)`: `y = W x + s B (A x)` with `A (r, in)` and
/// `B (out, r)`, as PEFT stores them (`lora_A.weight`, `lora_B.weight`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoraFactor {
    A,
    B,
}

impl LoraFactor {
    pub fn peft_name(self) -> &'static str {
        match self {
            LoraFactor::A => "lora_A",
            LoraFactor::B => "lora_B",
        }
    }

    /// The factor's shape for rank `r` on a weight shaped `[out, in]`.
    pub fn shape(self, r: usize, weight: &[usize]) -> Vec<usize> {
        match self {
            LoraFactor::A => vec![r, weight[1]],
            LoraFactor::B => vec![weight[0], r],
        }
    }
}

impl LayerParam {
    /// A layer's tensors in the decoder's order.
    pub const ALL: [LayerParam; 14] = [
        LayerParam::InputNorm,
        LayerParam::Q,
        LayerParam::QBias,
        LayerParam::K,
        LayerParam::KBias,
        LayerParam::V,
        LayerParam::VBias,
        LayerParam::QNorm,
        LayerParam::KNorm,
        LayerParam::O,
        LayerParam::PostNorm,
        LayerParam::Gate,
        LayerParam::Up,
        LayerParam::Down,
    ];

    /// The name inside `model.layers.N.`, as Hugging Face writes it.
    pub fn hf_suffix(self) -> &'static str {
        match self {
            LayerParam::InputNorm => "input_layernorm.weight",
            LayerParam::Q => "self_attn.q_proj.weight",
            LayerParam::QBias => "self_attn.q_proj.bias",
            LayerParam::K => "self_attn.k_proj.weight",
            LayerParam::KBias => "self_attn.k_proj.bias",
            LayerParam::V => "self_attn.v_proj.weight",
            LayerParam::VBias => "self_attn.v_proj.bias",
            LayerParam::QNorm => "self_attn.q_norm.weight",
            LayerParam::KNorm => "self_attn.k_norm.weight",
            LayerParam::O => "self_attn.o_proj.weight",
            LayerParam::PostNorm => "post_attention_layernorm.weight",
            LayerParam::Gate => "mlp.gate_proj.weight",
            LayerParam::Up => "mlp.up_proj.weight",
            LayerParam::Down => "mlp.down_proj.weight",
        }
    }

    /// The name inside `blk.N.`, as llama.cpp writes it.
    pub fn gguf_suffix(self) -> &'static str {
        match self {
            LayerParam::InputNorm => "attn_norm.weight",
            LayerParam::Q => "attn_q.weight",
            LayerParam::QBias => "attn_q.bias",
            LayerParam::K => "attn_k.weight",
            LayerParam::KBias => "attn_k.bias",
            LayerParam::V => "attn_v.weight",
            LayerParam::VBias => "attn_v.bias",
            LayerParam::QNorm => "attn_q_norm.weight",
            LayerParam::KNorm => "attn_k_norm.weight",
            LayerParam::O => "attn_output.weight",
            LayerParam::PostNorm => "ffn_norm.weight",
            LayerParam::Gate => "ffn_gate.weight",
            LayerParam::Up => "ffn_up.weight",
            LayerParam::Down => "ffn_down.weight",
        }
    }

    /// Whether a configuration has this tensor (biases: Qwen2; q/k norms: Qwen3).
    pub fn present(self, cfg: &ModelConfig) -> bool {
        match self {
            LayerParam::QBias | LayerParam::KBias | LayerParam::VBias => cfg.attention_bias,
            LayerParam::QNorm | LayerParam::KNorm => cfg.qk_norm,
            _ => true,
        }
    }

    pub fn shape(self, cfg: &ModelConfig) -> Vec<usize> {
        let (h, hd, i) = (cfg.hidden_size, cfg.head_dim, cfg.intermediate_size);
        let (q, kv) = (cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd);
        match self {
            LayerParam::InputNorm | LayerParam::PostNorm => vec![h],
            LayerParam::Q => vec![q, h],
            LayerParam::QBias => vec![q],
            LayerParam::K | LayerParam::V => vec![kv, h],
            LayerParam::KBias | LayerParam::VBias => vec![kv],
            LayerParam::QNorm | LayerParam::KNorm => vec![hd],
            LayerParam::O => vec![h, q],
            LayerParam::Gate | LayerParam::Up => vec![i, h],
            LayerParam::Down => vec![h, i],
        }
    }

    /// The linear layers' weights: what a bf16 rollout snapshot copies and what LoRA may adapt, under
    /// PEFT's module name.
    pub fn linear_module(self) -> Option<&'static str> {
        match self {
            LayerParam::Q => Some("q_proj"),
            LayerParam::K => Some("k_proj"),
            LayerParam::V => Some("v_proj"),
            LayerParam::O => Some("o_proj"),
            LayerParam::Gate => Some("gate_proj"),
            LayerParam::Up => Some("up_proj"),
            LayerParam::Down => Some("down_proj"),
            _ => None,
        }
    }

    /// The linear layer PEFT calls `module` (`q_proj`, ..., `down_proj`).
    pub fn of_module(module: &str) -> Option<LayerParam> {
        LayerParam::ALL.into_iter().find(|p| p.linear_module() == Some(module))
    }

    /// The linear layers LoRA may adapt, in the decoder's order.
    pub fn linear() -> impl Iterator<Item = LayerParam> {
        LayerParam::ALL.into_iter().filter(|p| p.linear_module().is_some())
    }

    /// The module's path inside `model.layers.N.` (`self_attn.q_proj`).
    fn module_path(self) -> &'static str {
        self.hf_suffix().strip_suffix(".weight").unwrap_or(self.hf_suffix())
    }
}

pub const EMBED: &str = "model.embed_tokens.weight";
pub const NORM: &str = "model.norm.weight";
pub const LM_HEAD: &str = "lm_head.weight";

/// The Hugging Face name of a tensor of layer `i`.
pub fn layer_name(i: usize, p: LayerParam) -> String {
    format!("model.layers.{i}.{}", p.hf_suffix())
}

/// One tensor of a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    pub name: String,
    pub kind: ParamKind,
    pub shape: Vec<usize>,
}

impl ParamSpec {
    /// The weight of a product (`y = x W^T`), rather than a norm's scale, a bias or the embedding table.
    pub fn is_linear(&self) -> bool {
        matches!(self.kind, ParamKind::Layer(_, p) if p.linear_module().is_some()) || self.kind == ParamKind::LmHead
    }
}

impl ParamKind {
    pub fn name(self) -> String {
        match self {
            ParamKind::Embed => EMBED.into(),
            ParamKind::Layer(i, p) => layer_name(i, p),
            ParamKind::Norm => NORM.into(),
            ParamKind::LmHead => LM_HEAD.into(),
            ParamKind::Lora(i, p, f) => format!("model.layers.{i}.{}.{}.weight", p.module_path(), f.peft_name()),
        }
    }

    /// The llama.cpp name.
    pub fn gguf_name(self) -> String {
        match self {
            ParamKind::Embed => "token_embd.weight".into(),
            ParamKind::Layer(i, p) => format!("blk.{i}.{}", p.gguf_suffix()),
            ParamKind::Norm => "output_norm.weight".into(),
            ParamKind::LmHead => "output.weight".into(),
            ParamKind::Lora(i, p, f) => format!("blk.{i}.{}.{}", p.gguf_suffix(), if f == LoraFactor::A { "lora_a" } else { "lora_b" }),
        }
    }
}

impl ModelConfig {
    /// How many numbers `params` holds in all.
    pub fn param_count(&self) -> usize {
        self.params().iter().map(|p| p.shape.iter().product::<usize>()).sum()
    }

    /// Every tensor this configuration implies, in the decoder's order: the embedding, each layer's in
    /// `LayerParam::ALL` order, the final norm, then the output projection unless it is tied.
    pub fn params(&self) -> Vec<ParamSpec> {
        let (h, v) = (self.hidden_size, self.vocab_size);
        let spec = |kind: ParamKind, shape: Vec<usize>| ParamSpec { name: kind.name(), kind, shape };
        let mut out = vec![spec(ParamKind::Embed, vec![v, h])];
        for i in 0..self.num_hidden_layers {
            for p in LayerParam::ALL.into_iter().filter(|p| p.present(self)) {
                out.push(spec(ParamKind::Layer(i, p), p.shape(self)));
            }
        }
        out.push(spec(ParamKind::Norm, vec![h]));
        if !self.tie_word_embeddings {
            out.push(spec(ParamKind::LmHead, vec![v, h]));
        }
        out
    }

    /// The adapter factors of LoRA with rank `r` on the linear layers `targets` of every layer, in the
    /// decoder's order after `params()`: per layer, per target in `LayerParam::ALL` order, A then B.
    pub fn lora_params(&self, r: usize, targets: &[LayerParam]) -> Vec<ParamSpec> {
        let mut out = Vec::new();
        for i in 0..self.num_hidden_layers {
            for p in LayerParam::linear().filter(|p| targets.contains(p)) {
                for f in [LoraFactor::A, LoraFactor::B] {
                    let kind = ParamKind::Lora(i, p, f);
                    out.push(ParamSpec { name: kind.name(), kind, shape: f.shape(r, &p.shape(self)) });
                }
            }
        }
        out
    }

    /// `params()` by name.
    pub fn expected_tensor_shapes(&self) -> std::collections::BTreeMap<String, Vec<usize>> {
        self.params().into_iter().map(|p| (p.name, p.shape)).collect()
    }
}

/// The parameter a Hugging Face name stands for, if any (for any configuration).
pub fn kind_of_name(name: &str) -> Option<ParamKind> {
    match name {
        EMBED => return Some(ParamKind::Embed),
        NORM => return Some(ParamKind::Norm),
        LM_HEAD => return Some(ParamKind::LmHead),
        _ => {}
    }
    let rest = name.strip_prefix("model.layers.")?;
    let (layer, suffix) = rest.split_once('.')?;
    let layer = layer.parse().ok()?;
    if let Some(kind) = LayerParam::ALL.into_iter().find(|p| p.hf_suffix() == suffix).map(|p| ParamKind::Layer(layer, p)) {
        return Some(kind);
    }
    let module = suffix.strip_suffix(".weight")?;
    for f in [LoraFactor::A, LoraFactor::B] {
        if let Some(path) = module.strip_suffix(f.peft_name()).and_then(|m| m.strip_suffix('.')) {
            return LayerParam::linear().find(|p| p.module_path() == path).map(|p| ParamKind::Lora(layer, p, f));
        }
    }
    None
}

/// The parameter a llama.cpp name stands for, if any.
pub fn kind_of_gguf_name(name: &str) -> Option<ParamKind> {
    match name {
        "token_embd.weight" => return Some(ParamKind::Embed),
        "output_norm.weight" => return Some(ParamKind::Norm),
        "output.weight" => return Some(ParamKind::LmHead),
        _ => {}
    }
    let rest = name.strip_prefix("blk.")?;
    let (layer, suffix) = rest.split_once('.')?;
    let layer = layer.parse().ok()?;
    if let Some(kind) = LayerParam::ALL.into_iter().find(|p| p.gguf_suffix() == suffix).map(|p| ParamKind::Layer(layer, p)) {
        return Some(kind);
    }
    let (weight, factor) = suffix.rsplit_once('.')?;
    let f = match factor {
        "lora_a" => LoraFactor::A,
        "lora_b" => LoraFactor::B,
        _ => return None,
    };
    LayerParam::linear().find(|p| p.gguf_suffix() == weight).map(|p| ParamKind::Lora(layer, p, f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Architecture;

    #[test]
    fn names_map_back_to_their_kinds_in_both_namings() {
        for arch in [Architecture::Llama, Architecture::Qwen2, Architecture::Qwen3] {
            let mut cfg = ModelConfig::tiny(arch);
            cfg.tie_word_embeddings = false;
            let params = cfg.params();
            for p in &params {
                assert_eq!(kind_of_name(&p.name), Some(p.kind), "{}", p.name);
                assert_eq!(kind_of_gguf_name(&p.kind.gguf_name()), Some(p.kind), "{}", p.name);
            }
            let names: std::collections::HashSet<&str> = params.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(names.len(), params.len(), "names are unique");
        }
        assert_eq!(kind_of_name("model.layers.x.mlp.up_proj.weight"), None);
        let all: Vec<LayerParam> = LayerParam::linear().collect();
        let lora = ModelConfig::tiny(Architecture::Llama).lora_params(2, &all);
        assert_eq!(lora.len(), ModelConfig::tiny(Architecture::Llama).num_hidden_layers * 7 * 2);
        for p in &lora {
            assert_eq!(kind_of_name(&p.name), Some(p.kind), "{}", p.name);
            assert_eq!(kind_of_gguf_name(&p.kind.gguf_name()), Some(p.kind), "{}", p.name);
        }
        assert_eq!(lora[0].name, "model.layers.0.self_attn.q_proj.lora_A.weight");
        assert_eq!(kind_of_name("model.layers.0.self_attn.q_norm.lora_A.weight"), None);
        assert_eq!(kind_of_gguf_name("blk.0.attn_qkv.weight"), None);
    }

    #[test]
    fn optional_tensors_follow_the_configuration() {
        let count = |cfg: &ModelConfig| cfg.params().len();
        let mut cfg = ModelConfig::tiny(Architecture::Llama);
        (cfg.attention_bias, cfg.qk_norm, cfg.tie_word_embeddings) = (false, false, true);
        let base = count(&cfg);
        assert_eq!(base, 1 + cfg.num_hidden_layers * 9 + 1);
        cfg.attention_bias = true;
        assert_eq!(count(&cfg), base + 3 * cfg.num_hidden_layers);
        cfg.qk_norm = true;
        assert_eq!(count(&cfg), base + 5 * cfg.num_hidden_layers);
        cfg.tie_word_embeddings = false;
        assert_eq!(count(&cfg), base + 5 * cfg.num_hidden_layers + 1);
        assert_eq!(cfg.params().last().unwrap().kind, ParamKind::LmHead);
    }
}
