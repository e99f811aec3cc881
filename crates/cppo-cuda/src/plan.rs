//! The device memory a training run needs, computed from the model's dimensions and the run's shape
//! before anything is allocated, and printed at start: persistent state (bf16 weights for the
//! products, f32 master weights, AdamW moments, gradient accumulators, the reference model), the
//! rollout phase (bf16 KV cache, sampling scratch) and the update phase (activations a micro-batch
//! keeps for its backward pass, and the largest transient buffers of one layer's backward).

use std::fmt;

/// A decoder's shape (the fields of cppo-io's `ModelConfig` that size memory; the trainer fills them
/// in, `cppo_train::device::model_dims`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelDims {
    pub hidden: usize,
    pub intermediate: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub vocab: usize,
    pub tied_embeddings: bool,
    pub qkv_bias: bool,
    /// Qwen3's per-head q/k norms.
    pub qk_norm: bool,
}

impl ModelDims {
    /// Qwen2.5-1.5B(-Instruct)'s config.json.
    pub fn qwen2_5_1_5b() -> ModelDims {
        ModelDims {
            hidden: 1536,
            intermediate: 8960,
            layers: 28,
            heads: 12,
            kv_heads: 2,
            head_dim: 128,
            vocab: 151936,
            tied_embeddings: true,
            qkv_bias: true,
            qk_norm: false,
        }
    }

    fn q_width(&self) -> usize {
        self.heads * self.head_dim
    }

    fn kv_width(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Parameters of one layer.
    pub fn layer_params(&self) -> u64 {
        let (h, i, q, kv) = (self.hidden as u64, self.intermediate as u64, self.q_width() as u64, self.kv_width() as u64);
        let attn = h * q + 2 * h * kv + q * h;
        let bias = if self.qkv_bias { q + 2 * kv } else { 0 };
        let qk = if self.qk_norm { 2 * self.head_dim as u64 } else { 0 };
        attn + bias + qk + 3 * h * i + 2 * h
    }

    /// Parameters of the layers' matrices (attention and MLP projections, no biases or norms).
    pub fn layer_matrix_params(&self) -> u64 {
        let (h, i, q, kv) = (self.hidden as u64, self.intermediate as u64, self.q_width() as u64, self.kv_width() as u64);
        self.layers as u64 * (h * q + 2 * h * kv + q * h + 3 * h * i)
    }

    pub fn params(&self) -> u64 {
        let emb = self.vocab as u64 * self.hidden as u64;
        let head = if self.tied_embeddings { 0 } else { emb };
        emb + head + self.layers as u64 * self.layer_params() + self.hidden as u64
    }
}

/// The shape of one training step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunShape {
    /// Completions per question (G).
    pub group: usize,
    /// Questions per step.
    pub questions: usize,
    /// The longest prompt, in tokens.
    pub prompt_len: usize,
    pub max_new_tokens: usize,
    /// Sequences decoded together in rollouts.
    pub rollout_rows: usize,
    /// Completions of one question per micro-batch of the update (its prompt is computed once for them).
    pub micro_completions: usize,
    /// beta > 0: a frozen reference model on the device.
    pub reference_model: bool,
    /// Vocabulary columns per chunk of the log-softmax (`ops::logprob::chunk_cols`; 0 picks).
    pub chunk_cols: usize,
}

const GIB: f64 = (1u64 << 30) as f64;
/// cuBLASLt's workspace and what the CUDA context itself takes, in round figures.
const WORKSPACE: u64 = 32 << 20;
const CONTEXT: u64 = 600 << 20;

#[derive(Clone, Debug, PartialEq)]
pub struct MemoryPlan {
    pub persistent: Vec<(&'static str, u64)>,
    pub rollout: Vec<(&'static str, u64)>,
    pub update: Vec<(&'static str, u64)>,
}

fn sum(items: &[(&'static str, u64)]) -> u64 {
    items.iter().map(|i| i.1).sum()
}

impl MemoryPlan {
    pub fn new(m: &ModelDims, r: &RunShape) -> MemoryPlan {
        let p = m.params();
        let (h, inter, qw, kw) = (m.hidden as u64, m.intermediate as u64, m.q_width() as u64, m.kv_width() as u64);
        let (layers, heads) = (m.layers as u64, m.heads as u64);
        // bf16 copies of what the products read whole: the layers' matrices and the output
        // projection (the embedding, when tied); cppo-model's `keep_bf16_copies`.
        let (matrices, head) = (m.layer_matrix_params(), m.vocab as u64 * h);
        let mut persistent = vec![
            ("bf16 copies of the matrices (the products' operands)", 2 * (matrices + head)),
            ("master weights, f32", 4 * p),
            ("AdamW moments, f32 x 2", 8 * p),
            ("gradient accumulators, f32 (one flat buffer)", 4 * p),
        ];
        if r.reference_model {
            // Its layer matrices in bf16 only; the embedding, norms and biases in f32, and a bf16
            // copy of the output projection.
            persistent.push(("reference model (matrices bf16, the rest f32)", 2 * matrices + 4 * (p - matrices) + 2 * head));
        }
        persistent.push(("CUDA context and cuBLASLt workspace", CONTEXT + WORKSPACE));

        let rows = r.rollout_rows as u64;
        let max_len = (r.prompt_len + r.max_new_tokens) as u64;
        let rollout = vec![
            ("KV cache, bf16 (rows x prompt + new tokens)", 2 * layers * rows * max_len * kw * 2),
            ("logits and sampling scratch, f32", 2 * rows * m.vocab as u64 * 4),
            ("decode activations, f32", rows * (4 * h + 2 * inter + qw + 2 * kw) * 4),
        ];

        let (pl, len, g) = (r.prompt_len as u64, r.max_new_tokens as u64, r.micro_completions as u64);
        let tokens = pl + g * len;
        // Kept per layer for the backward pass (cppo-model's tape): the residual stream before and
        // after attention in f32, q, k, v, the attention output, gate and up in bf16.
        let raw = if m.qk_norm { qw + kw } else { 0 };
        let per_token_layer = 2 * h * 4 + (qw + 2 * kw + qw + 2 * inter + raw) * 2;
        // One layer's backward at a time: the scores, their gradient, ds and p of every span (the
        // prompt's causal block and each completion's prefix + own block), and the activation
        // gradients (f32 where they accumulate, bf16 where they feed a product).
        let score_elems = heads * (pl * pl + g * len * (pl + len));
        let grads_per_token = 3 * h * 4 + inter * 4 + 2 * inter * 2 + qw * 4 + (qw + 2 * kw) * 2 + (h + inter) * 2;
        let slots = g * len;
        let chunk = crate::ops::logprob::chunk_cols(r.chunk_cols, slots as usize, m.vocab) as u64;
        let update = vec![
            ("activations kept for backward (all layers)", layers * tokens * per_token_layer),
            ("attention scores of one layer (s, dp f32; p, ds bf16)", score_elems * 12),
            ("activation gradients of one layer", tokens * grads_per_token),
            ("log-softmax chunk (logits f32, dz bf16) and scored rows", slots * chunk * 6 + slots * h * 6),
        ];
        MemoryPlan { persistent, rollout, update }
    }

    pub fn persistent_bytes(&self) -> u64 {
        sum(&self.persistent)
    }

    /// The larger of the two phases on top of the persistent state: the device's peak.
    pub fn peak_bytes(&self) -> u64 {
        self.persistent_bytes() + sum(&self.rollout).max(sum(&self.update))
    }

    /// The most completions per micro-batch (up to the group) whose plan fits `budget` bytes.
    pub fn largest_micro_batch(m: &ModelDims, r: &RunShape, budget: u64) -> Option<usize> {
        (1..=r.group).rev().find(|&g| MemoryPlan::new(m, &RunShape { micro_completions: g, ..*r }).peak_bytes() <= budget)
    }
}

impl fmt::Display for MemoryPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (title, items) in [("persistent", &self.persistent), ("rollouts", &self.rollout), ("update, per micro-batch", &self.update)] {
            writeln!(f, "{title}: {:.2} GiB", sum(items) as f64 / GIB)?;
            for (what, bytes) in items.iter() {
                writeln!(f, "  {:>8.2} GiB  {what}", *bytes as f64 / GIB)?;
            }
        }
        write!(f, "peak: {:.2} GiB", self.peak_bytes() as f64 / GIB)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB80: u64 = 80_000_000_000;

    #[test]
    fn qwen2_5_1_5b_has_its_published_parameter_count() {
        // 1,543,714,304: the sum of the checkpoint's tensor sizes (embedding tied to the output).
        assert_eq!(ModelDims::qwen2_5_1_5b().params(), 1_543_714_304);
    }

    #[test]
    fn the_papers_setting_fits_one_80_gb_gpu_with_micro_batches() {
        let m = ModelDims::qwen2_5_1_5b();
        let r = RunShape {
            group: 16,
            questions: 8,
            prompt_len: 512,
            max_new_tokens: 1024,
            rollout_rows: 128,
            micro_completions: 16,
            reference_model: true,
            chunk_cols: 0,
        };
        let whole = MemoryPlan::new(&m, &r);
        let mb = MemoryPlan::largest_micro_batch(&m, &r, GB80).expect("some micro-batch fits 80 GB");
        let plan = MemoryPlan::new(&m, &RunShape { micro_completions: mb, ..r });
        let text = plan.to_string();
        assert!(plan.peak_bytes() <= GB80 && mb >= 2, "micro-batch {mb}:\n{text}");
        assert!(whole.peak_bytes() > plan.peak_bytes() || mb == 16);
        // Persistent: 16 bytes per parameter to train (f32 master, two f32 moments, f32 gradient), 2
        // per matrix and output-projection weight for their bf16 copies; the reference's matrices
        // in bf16, its embedding (tied to the head) in f32 plus a bf16 copy; and the context.
        let p = m.params();
        let (matrices, embedding) = (m.layer_matrix_params(), 151_936 * 1536);
        assert_eq!(matrices + embedding + 28 * (2 * 1536 + 1536 + 2 * 256) + 1536, p, "matrices, embedding, norms and biases");
        let reference = 2 * matrices + 6 * embedding + 4 * (p - matrices - embedding);
        assert_eq!(plan.persistent_bytes(), 16 * p + 2 * (matrices + embedding) + reference + CONTEXT + WORKSPACE);
        eprintln!("micro-batch of {mb} completions:\n{text}");
        assert!(text.contains("master weights") && text.lines().last().expect("a line").starts_with("peak:"), "{text}");
    }

    #[test]
    fn activations_grow_with_the_micro_batch() {
        let m = ModelDims::qwen2_5_1_5b();
        let r = RunShape { group: 16, questions: 1, prompt_len: 100, max_new_tokens: 200, rollout_rows: 16, micro_completions: 1, reference_model: false, chunk_cols: 0 };
        let a = MemoryPlan::new(&m, &r);
        let b = MemoryPlan::new(&m, &RunShape { micro_completions: 2, ..r });
        assert!(sum(&b.update) > sum(&a.update));
        assert_eq!(a.persistent, b.persistent);
    }
}
