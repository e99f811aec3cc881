//! The paper's model, Qwen2.5-1.5B-Instruct, as the repository keeps its `config.json`
//! (`configs/models/qwen2.5-1.5b-instruct.json`): read by cppo-io's parser, and its memory plan for
//! the paper's run shape (G = 16, 1024 new tokens) within one 80 GB GPU.

use std::path::Path;

use cppo_cuda::plan::{MemoryPlan, ModelDims, RunShape};
use cppo_train::device::model_dims;
use cppo_io::hf::parse_config_json;
use cppo_io::{Architecture, ModelConfig};

fn qwen() -> ModelConfig {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/models/qwen2.5-1.5b-instruct.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_config_json(&text, &path).expect("the config parses")
}

#[test]
fn the_qwen2_5_1_5b_instruct_config_parses_with_its_published_shape() {
    let c = qwen();
    assert_eq!(c.architecture, Architecture::Qwen2);
    let shape = (c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.vocab_size);
    assert_eq!(shape, (1536, 8960, 28, 12, 2, 128, 151936));
    assert_eq!((c.rope_theta, c.rms_norm_eps, c.max_position_embeddings), (1e6, 1e-6, 32768));
    assert!(c.tie_word_embeddings && c.attention_bias && !c.qk_norm && c.rope_scaling.is_none());
    assert_eq!(c.eos_token_ids, vec![151645]);
    assert_eq!(c.inconsistency(), None);
    // The plan's built-in figures are this file's.
    assert_eq!(model_dims(&c), ModelDims::qwen2_5_1_5b());
    assert_eq!(model_dims(&c).params(), 1_543_714_304);
}

#[test]
fn its_memory_plan_for_g16_and_1024_new_tokens_fits_80_gb_with_micro_batches() {
    let m = model_dims(&qwen());
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
    const GB80: u64 = 80_000_000_000;
    let mb = MemoryPlan::largest_micro_batch(&m, &r, GB80).expect("some micro-batch fits 80 GB");
    let plan = MemoryPlan::new(&m, &RunShape { micro_completions: mb, ..r });
    eprintln!("Qwen2.5-1.5B-Instruct, G = 16, 1024 new tokens, {mb} completions per micro-batch:\n{plan}");
    assert!(plan.peak_bytes() <= GB80, "{plan}");
    assert!(mb >= 1);
    // Larger micro-batches than the chosen one do not fit (the search is not trivially "1").
    if mb < 16 {
        assert!(MemoryPlan::new(&m, &RunShape { micro_completions: mb + 1, ..r }).peak_bytes() > GB80);
    }
    // Persistent state: 16 bytes per parameter (f32 master, moments, gradients), bf16 copies of the
    // matrices and the head (2 bytes each), the reference (matrices bf16, the rest f32, a bf16 head
    // copy), plus the context: about 32 GB for 1.54 B parameters.
    let (p, mat, head) = (m.params(), m.layer_matrix_params(), (m.vocab * m.hidden) as u64);
    let want = 16 * p + 2 * (mat + head) + 2 * mat + 4 * (p - mat) + 2 * head;
    assert!(plan.persistent_bytes() > want && plan.persistent_bytes() < want + (1 << 30), "{plan}");
}
