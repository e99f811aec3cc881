//! `config.json` of the supported families (fixtures shaped like the released models' files) to
//! `ModelConfig` and back, and the errors for configs this crate cannot run.

use std::path::Path;

use candle_core::DType;
use cppo_io::hf::{config_json, parse_config_json};
use cppo_io::{Architecture, ModelConfig, ModelIoError, RopeScaling};

fn parse(text: &str) -> Result<ModelConfig, ModelIoError> {
    parse_config_json(text, Path::new("fixture/config.json"))
}

const SMOLLM2: &str = r#"{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 576,
  "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "is_llama_config": true,
  "max_position_embeddings": 8192, "mlp_bias": false, "model_type": "llama", "num_attention_heads": 9,
  "num_hidden_layers": 30, "num_key_value_heads": 3, "pad_token_id": 2, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05, "rope_interleaved": false, "rope_scaling": null, "rope_theta": 100000,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.42.3",
  "use_cache": true, "vocab_size": 49152
}"#;

const LLAMA32: &str = r#"{
  "architectures": ["LlamaForCausalLM"], "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
  "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "model_type": "llama", "num_attention_heads": 32,
  "num_hidden_layers": 16, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "vocab_size": 128256
}"#;

const QWEN25: &str = r#"{
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "intermediate_size": 4864,
  "max_position_embeddings": 32768, "max_window_layers": 21, "model_type": "qwen2",
  "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936
}"#;

const QWEN3: &str = r#"{
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "bos_token_id": 151643,
  "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
  "intermediate_size": 3072, "max_position_embeddings": 40960, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "tie_word_embeddings": true, "vocab_size": 151936
}"#;

#[test]
fn smollm2_config() {
    let c = parse(SMOLLM2).unwrap();
    assert_eq!(c.architecture, Architecture::Llama);
    assert_eq!(
        (c.hidden_size, c.intermediate_size, c.num_hidden_layers),
        (576, 1536, 30)
    );
    assert_eq!(
        (c.num_attention_heads, c.num_key_value_heads, c.head_dim),
        (9, 3, 64)
    );
    assert_eq!((c.rope_theta, c.rms_norm_eps), (100000.0, 1e-5));
    assert!(c.tie_word_embeddings && !c.attention_bias && !c.qk_norm && c.rope_scaling.is_none());
    assert_eq!(
        (c.bos_token_id, c.eos_token_ids.clone()),
        (Some(1), vec![2])
    );
}

#[test]
fn llama32_config_with_llama3_rope_scaling_and_eos_list() {
    let c = parse(LLAMA32).unwrap();
    assert_eq!(
        c.rope_scaling,
        Some(RopeScaling {
            factor: 32.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192
        })
    );
    assert_eq!(c.eos_token_ids, vec![128001, 128008, 128009]);
    assert_eq!((c.head_dim, c.rope_theta), (64, 500000.0));
}

#[test]
fn transformers5_rope_parameters_are_read() {
    let mut v: serde_json::Value = serde_json::from_str(LLAMA32).unwrap();
    let obj = v.as_object_mut().unwrap();
    let scaling = obj.remove("rope_scaling").unwrap();
    obj.remove("rope_theta");
    let mut params = scaling.as_object().unwrap().clone();
    params.insert("rope_theta".into(), 500000.0.into());
    obj.insert("rope_parameters".into(), params.into());
    assert_eq!(parse(&v.to_string()).unwrap(), parse(LLAMA32).unwrap());
    let default = r#"{"rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}}"#;
    let mut q: serde_json::Value = serde_json::from_str(QWEN3).unwrap();
    q.as_object_mut().unwrap().remove("rope_theta");
    q.as_object_mut().unwrap().remove("rope_scaling");
    q["rope_parameters"] =
        serde_json::from_str::<serde_json::Value>(default).unwrap()["rope_parameters"].clone();
    assert_eq!(parse(&q.to_string()).unwrap(), parse(QWEN3).unwrap());
}

#[test]
fn qwen25_has_biases_and_derives_head_dim() {
    let c = parse(QWEN25).unwrap();
    assert_eq!(c.architecture, Architecture::Qwen2);
    assert!(c.attention_bias && !c.qk_norm && c.tie_word_embeddings);
    assert_eq!(c.head_dim, 64);
    assert_eq!(c.eos_token_ids, vec![151645]);
}

#[test]
fn qwen3_has_qk_norm_and_an_explicit_head_dim() {
    let c = parse(QWEN3).unwrap();
    assert_eq!(c.architecture, Architecture::Qwen3);
    assert!(c.qk_norm && !c.attention_bias);
    assert_eq!(
        c.head_dim, 128,
        "Qwen3's head_dim is not hidden_size / heads (64)"
    );
    let shapes = c.expected_tensor_shapes();
    assert_eq!(
        shapes["model.layers.0.self_attn.q_proj.weight"],
        vec![2048, 1024]
    );
    assert_eq!(
        shapes["model.layers.0.self_attn.o_proj.weight"],
        vec![1024, 2048]
    );
    assert_eq!(shapes["model.layers.27.self_attn.k_norm.weight"], vec![128]);
    assert!(!shapes.contains_key("lm_head.weight"));
}

#[test]
fn written_configs_parse_back_to_the_same_config() {
    for fixture in [SMOLLM2, LLAMA32, QWEN25, QWEN3] {
        let c = parse(fixture).unwrap();
        for dtype in [DType::F32, DType::BF16] {
            let written = config_json(&c, dtype).unwrap().to_string();
            assert_eq!(parse(&written).unwrap(), c);
        }
    }
    for arch in [
        Architecture::Llama,
        Architecture::Qwen2,
        Architecture::Qwen3,
    ] {
        let c = ModelConfig::tiny(arch);
        assert_eq!(
            parse(&config_json(&c, DType::F32).unwrap().to_string()).unwrap(),
            c
        );
    }
}

fn with(fixture: &str, key: &str, value: serde_json::Value) -> String {
    let mut v: serde_json::Value = serde_json::from_str(fixture).unwrap();
    if value.is_null() {
        v.as_object_mut().unwrap().remove(key);
    } else {
        v[key] = value;
    }
    v.to_string()
}

fn key_of(err: ModelIoError) -> String {
    match err {
        ModelIoError::MissingKey { key, .. } | ModelIoError::InvalidValue { key, .. } => key,
        other => panic!("expected an error naming a key, got {other:?}"),
    }
}

#[test]
fn bad_configs_name_the_key() {
    assert_eq!(
        key_of(parse(&with(SMOLLM2, "intermediate_size", serde_json::Value::Null)).unwrap_err()),
        "intermediate_size"
    );
    assert_eq!(
        key_of(parse(&with(SMOLLM2, "hidden_size", "576".into())).unwrap_err()),
        "hidden_size"
    );
    assert_eq!(
        key_of(parse(&with(SMOLLM2, "hidden_act", "gelu".into())).unwrap_err()),
        "hidden_act"
    );
    assert_eq!(
        key_of(parse(&with(SMOLLM2, "num_key_value_heads", 4.into())).unwrap_err()),
        "num_key_value_heads"
    );
    assert_eq!(
        key_of(parse(&with(SMOLLM2, "eos_token_id", serde_json::json!([2, "x"]))).unwrap_err()),
        "eos_token_id"
    );
    assert_eq!(
        key_of(parse(&with(SMOLLM2, "eos_token_id", 50000.into())).unwrap_err()),
        "eos_token_id"
    );
    assert_eq!(
        key_of(parse(&with(SMOLLM2, "attention_bias", true.into())).unwrap_err()),
        "attention_bias"
    );
    assert_eq!(
        key_of(parse(&with(QWEN25, "use_sliding_window", true.into())).unwrap_err()),
        "use_sliding_window"
    );
    let yarn = serde_json::json!({"rope_type": "yarn", "factor": 4.0});
    assert_eq!(
        key_of(parse(&with(SMOLLM2, "rope_scaling", yarn)).unwrap_err()),
        "rope_scaling.rope_type"
    );
    let partial = serde_json::json!({"rope_type": "llama3", "factor": 8.0});
    assert!(
        key_of(parse(&with(SMOLLM2, "rope_scaling", partial)).unwrap_err())
            .starts_with("rope_scaling.")
    );
    let err = parse(&with(
        SMOLLM2,
        "architectures",
        serde_json::json!(["MistralForCausalLM"]),
    ))
    .unwrap_err();
    assert!(
        err.to_string().contains("MistralForCausalLM")
            && err.to_string().contains("fixture/config.json"),
        "{err}"
    );
    let no_arch = with(
        &with(SMOLLM2, "architectures", serde_json::Value::Null),
        "model_type",
        serde_json::Value::Null,
    );
    assert_eq!(key_of(parse(&no_arch).unwrap_err()), "architectures");
}

#[test]
fn model_type_alone_identifies_the_architecture() {
    let c = parse(&with(QWEN3, "architectures", serde_json::Value::Null)).unwrap();
    assert_eq!(c.architecture, Architecture::Qwen3);
}
