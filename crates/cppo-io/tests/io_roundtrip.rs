//! Writing a model with `save_hf` and reading it back with `load_model` gives the same model: tensors bit
//! for bit, config, tokenizer and chat template — for each architecture, tied and untied, f32 and bf16,
//! single-file and sharded.

mod io_support;

use std::collections::BTreeMap;

use candle_core::{DType, Device, Tensor};
use cppo_io::{load_model, save_hf, Architecture, ChatMessage, ModelConfig, Weights};
use io_support::{assert_same_weights, tiny_tokenizer, values};

fn configs() -> Vec<(&'static str, ModelConfig)> {
    let llama_untied = ModelConfig {
        tie_word_embeddings: false,
        ..ModelConfig::tiny(Architecture::Llama)
    };
    let llama3 = ModelConfig {
        rope_scaling: Some(cppo_io::RopeScaling {
            factor: 32.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192,
        }),
        eos_token_ids: vec![2, 5, 7],
        ..ModelConfig::tiny(Architecture::Llama)
    };
    let qwen3_tied = ModelConfig {
        tie_word_embeddings: true,
        ..ModelConfig::tiny(Architecture::Qwen3)
    };
    vec![
        ("llama tied", ModelConfig::tiny(Architecture::Llama)),
        ("llama untied", llama_untied),
        ("llama3 rope scaling, several eos", llama3),
        ("qwen2 biases", ModelConfig::tiny(Architecture::Qwen2)),
        ("qwen3 qk norm", ModelConfig::tiny(Architecture::Qwen3)),
        ("qwen3 tied", qwen3_tied),
    ]
}

fn chat() -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("user", "hello world 2 + 2 ="),
        ChatMessage::new("assistant", "w20 w21"),
    ]
}

#[test]
fn every_architecture_round_trips_bit_for_bit() {
    for (label, config) in configs() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("model");
        let weights = Weights::random(&config, 7, &Device::Cpu).unwrap();
        let tokenizer = tiny_tokenizer(config.vocab_size);
        save_hf(&out, &config, &weights, &tokenizer, DType::F32).unwrap();
        let loaded = load_model(&out, DType::F32, &Device::Cpu).unwrap();
        assert_eq!(loaded.config, config, "{label}: config");
        assert_same_weights(&loaded.weights, &weights);
        assert_eq!(
            loaded.weights.get("lm_head.weight").is_some(),
            !config.tie_word_embeddings,
            "{label}: lm_head presence"
        );
        let text = tokenizer.render(&chat(), true).unwrap();
        assert_eq!(
            loaded.tokenizer.render(&chat(), true).unwrap(),
            text,
            "{label}: template"
        );
        assert_eq!(
            loaded.tokenizer.encode(&text).unwrap(),
            tokenizer.encode(&text).unwrap(),
            "{label}: encode"
        );
        assert_eq!(
            loaded.tokenizer.eos_token_ids(),
            tokenizer_eos(&config),
            "{label}: eos ids"
        );
        assert_eq!(
            loaded.tokenizer.special_tokens(),
            tokenizer.special_tokens(),
            "{label}: special tokens"
        );
    }
}

fn tokenizer_eos(config: &ModelConfig) -> Vec<u32> {
    let mut ids = config.eos_token_ids.clone();
    if !ids.contains(&2) {
        ids.push(2);
    }
    ids
}

#[test]
fn tensors_of_each_family_are_the_ones_named_by_hugging_face() {
    let qwen2 = Weights::random(&ModelConfig::tiny(Architecture::Qwen2), 1, &Device::Cpu).unwrap();
    assert!(qwen2.get("model.layers.1.self_attn.k_proj.bias").is_some());
    assert!(qwen2.get("model.layers.1.self_attn.o_proj.bias").is_none());
    let qwen3 = Weights::random(&ModelConfig::tiny(Architecture::Qwen3), 1, &Device::Cpu).unwrap();
    assert_eq!(
        qwen3
            .get("model.layers.0.self_attn.q_norm.weight")
            .unwrap()
            .dims(),
        &[8]
    );
    assert!(qwen3.get("lm_head.weight").is_some());
    let llama = Weights::random(&ModelConfig::tiny(Architecture::Llama), 1, &Device::Cpu).unwrap();
    assert!(
        llama.get("lm_head.weight").is_none(),
        "tiny llama ties its embeddings"
    );
    assert_eq!(llama.len(), 2 + 2 * 9);
}

#[test]
fn bf16_is_written_and_loaded_as_bf16_and_widened_exactly() {
    let config = ModelConfig::tiny(Architecture::Qwen2);
    let weights = Weights::random(&config, 3, &Device::Cpu).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bf16");
    save_hf(
        &out,
        &config,
        &weights,
        &tiny_tokenizer(config.vocab_size),
        DType::BF16,
    )
    .unwrap();
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(cfg["torch_dtype"], "bfloat16");

    let as_bf16 = load_model(&out, DType::BF16, &Device::Cpu).unwrap();
    let expected = weights.to_dtype_device(DType::BF16, &Device::Cpu).unwrap();
    assert_same_weights(&as_bf16.weights, &expected);

    let as_f32 = load_model(&out, DType::F32, &Device::Cpu).unwrap();
    let widened = expected.to_dtype_device(DType::F32, &Device::Cpu).unwrap();
    assert_same_weights(&as_f32.weights, &widened);
    // Rounding to bf16 really happened (the test would pass trivially on f32 files otherwise).
    let name = "model.layers.0.mlp.up_proj.weight";
    assert_ne!(
        values(&weights.tensors[name]),
        values(&as_f32.weights.tensors[name])
    );
}

#[test]
fn sharded_checkpoints_load_through_their_index() {
    let config = ModelConfig::tiny(Architecture::Qwen3);
    let weights = Weights::random(&config, 11, &Device::Cpu).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sharded");
    save_hf(
        &out,
        &config,
        &weights,
        &tiny_tokenizer(config.vocab_size),
        DType::F32,
    )
    .unwrap();
    std::fs::remove_file(out.join("model.safetensors")).unwrap();

    let mut shards: [BTreeMap<String, Tensor>; 2] = Default::default();
    let mut weight_map = serde_json::Map::new();
    for (i, (name, t)) in weights.tensors.iter().enumerate() {
        let shard = i % 2;
        shards[shard].insert(name.clone(), t.clone());
        weight_map.insert(
            name.clone(),
            format!("model-0000{}-of-00002.safetensors", shard + 1).into(),
        );
    }
    for (i, shard) in shards.iter().enumerate() {
        candle_core::safetensors::save(
            &shard
                .clone()
                .into_iter()
                .collect::<std::collections::HashMap<_, _>>(),
            out.join(format!("model-0000{}-of-00002.safetensors", i + 1)),
        )
        .unwrap();
    }
    let index = serde_json::json!({"metadata": {"total_size": 0}, "weight_map": weight_map});
    std::fs::write(out.join("model.safetensors.index.json"), index.to_string()).unwrap();

    let loaded = load_model(&out, DType::F32, &Device::Cpu).unwrap();
    assert_same_weights(&loaded.weights, &weights);

    // A tensor the index places in a shard that lacks it is named (the second name went to shard 2).
    let moved = weights.tensors.keys().nth(1).unwrap().clone();
    let mut bad = index.clone();
    bad["weight_map"][&moved] = "model-00001-of-00002.safetensors".into();
    std::fs::write(out.join("model.safetensors.index.json"), bad.to_string()).unwrap();
    let err = load_model(&out, DType::F32, &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&moved) && err.contains("model-00001-of-00002"),
        "{err}"
    );
}

#[test]
fn saving_replaces_an_old_model_but_never_other_directories() {
    let config = ModelConfig::tiny(Architecture::Llama);
    let tokenizer = tiny_tokenizer(config.vocab_size);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("model");
    let first = Weights::random(&config, 1, &Device::Cpu).unwrap();
    let second = Weights::random(&config, 2, &Device::Cpu).unwrap();
    save_hf(&out, &config, &first, &tokenizer, DType::F32).unwrap();
    save_hf(&out, &config, &second, &tokenizer, DType::F32).unwrap();
    assert_same_weights(
        &load_model(&out, DType::F32, &Device::Cpu).unwrap().weights,
        &second,
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers,
        vec![std::ffi::OsString::from("model")],
        "temporary directories left behind"
    );

    let precious = dir.path().join("notes");
    std::fs::create_dir(&precious).unwrap();
    std::fs::write(precious.join("todo.txt"), "keep me").unwrap();
    let err = save_hf(&precious, &config, &second, &tokenizer, DType::F32)
        .unwrap_err()
        .to_string();
    assert!(err.contains("refusing"), "{err}");
    assert_eq!(
        std::fs::read_to_string(precious.join("todo.txt")).unwrap(),
        "keep me"
    );

    // An inconsistent model is refused before anything is written.
    let mut broken = second.clone();
    broken.tensors.remove("model.norm.weight");
    let err = save_hf(&out, &config, &broken, &tokenizer, DType::F32)
        .unwrap_err()
        .to_string();
    assert!(err.contains("model.norm.weight"), "{err}");
    assert_same_weights(
        &load_model(&out, DType::F32, &Device::Cpu).unwrap().weights,
        &second,
    );
}

#[test]
fn written_files_are_what_transformers_reads() {
    let config = ModelConfig {
        eos_token_ids: vec![2, 9],
        ..ModelConfig::tiny(Architecture::Qwen3)
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m");
    let weights = Weights::random(&config, 5, &Device::Cpu).unwrap();
    save_hf(
        &out,
        &config,
        &weights,
        &tiny_tokenizer(config.vocab_size),
        DType::F32,
    )
    .unwrap();
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.join(f)).unwrap()).unwrap()
    };
    let cfg = read("config.json");
    assert_eq!(
        cfg["architectures"],
        serde_json::json!(["Qwen3ForCausalLM"])
    );
    assert_eq!(cfg["model_type"], "qwen3");
    assert_eq!(cfg["head_dim"], 8);
    assert_eq!(cfg["eos_token_id"], serde_json::json!([2, 9]));
    assert_eq!(cfg["torch_dtype"], "float32");
    let gen = read("generation_config.json");
    assert_eq!(gen["eos_token_id"], serde_json::json!([2, 9]));
    assert_eq!(gen["pad_token_id"], 2);
    let tc = read("tokenizer_config.json");
    assert_eq!(tc["chat_template"], io_support::CHATML);
    assert_eq!(tc["eos_token"], "<|im_end|>");
    assert_eq!(tc["bos_token"], "<|im_start|>");
    // safetensors metadata carries transformers' format marker.
    let bytes = std::fs::read(out.join("model.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    assert_eq!(header["__metadata__"]["format"], "pt");
    assert_eq!(
        header["model.layers.1.self_attn.k_norm.weight"]["dtype"],
        "F32"
    );
}

#[test]
fn chat_template_jinja_and_generation_config_are_read() {
    let config = ModelConfig::tiny(Architecture::Llama);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m");
    let weights = Weights::random(&config, 5, &Device::Cpu).unwrap();
    save_hf(
        &out,
        &config,
        &weights,
        &tiny_tokenizer(config.vocab_size),
        DType::F32,
    )
    .unwrap();
    // transformers 5 keeps the template in chat_template.jinja, which wins over tokenizer_config.json.
    std::fs::write(
        out.join("chat_template.jinja"),
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}",
    )
    .unwrap();
    std::fs::write(
        out.join("generation_config.json"),
        r#"{"eos_token_id": [2, 12]}"#,
    )
    .unwrap();
    let loaded = load_model(&out, DType::F32, &Device::Cpu).unwrap();
    assert_eq!(
        loaded.tokenizer.render(&chat()[..1], false).unwrap(),
        "[user]hello world 2 + 2 ="
    );
    assert_eq!(loaded.config.eos_token_ids, vec![2, 12]);
    assert_eq!(loaded.tokenizer.eos_token_ids(), &[2, 12]);

    // A list of named templates picks "default".
    std::fs::remove_file(out.join("chat_template.jinja")).unwrap();
    let tc_path = out.join("tokenizer_config.json");
    let mut tc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&tc_path).unwrap()).unwrap();
    tc["chat_template"] = serde_json::json!([
        {"name": "tool_use", "template": "TOOLS"},
        {"name": "default", "template": "DEFAULT{{ messages | length }}"},
    ]);
    std::fs::write(&tc_path, tc.to_string()).unwrap();
    let loaded = load_model(&out, DType::F32, &Device::Cpu).unwrap();
    assert_eq!(loaded.tokenizer.render(&chat(), false).unwrap(), "DEFAULT2");
}
