//! Bad model files give errors that name the file and the tensor or key at fault.

mod io_support;

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use cppo_io::{load_model, save_hf, Architecture, ModelConfig, ModelIoError, Weights};
use io_support::tiny_tokenizer;

fn saved(config: &ModelConfig) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m");
    let weights = Weights::random(config, 1, &Device::Cpu).unwrap();
    save_hf(
        &out,
        config,
        &weights,
        &tiny_tokenizer(config.vocab_size),
        DType::F32,
    )
    .unwrap();
    (dir, out)
}

fn load_err(path: &Path) -> ModelIoError {
    load_model(path, DType::F32, &Device::Cpu).expect_err("loading should fail")
}

/// Rewrites model.safetensors with `edit` applied to its tensors.
fn rewrite_tensors(dir: &Path, edit: impl FnOnce(&mut std::collections::HashMap<String, Tensor>)) {
    let path = dir.join("model.safetensors");
    let mut tensors = candle_core::safetensors::load(&path, &Device::Cpu).unwrap();
    edit(&mut tensors);
    candle_core::safetensors::save(&tensors, &path).unwrap();
}

#[test]
fn truncated_safetensors_names_the_first_tensor_cut_off() {
    let (_tmp, dir) = saved(&ModelConfig::tiny(Architecture::Llama));
    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    // Cut 100 bytes into the data of the tensor stored last.
    let (last, start) = header
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .map(|(k, v)| (k.clone(), v["data_offsets"][0].as_u64().unwrap() as usize))
        .max_by_key(|(_, s)| *s)
        .unwrap();
    std::fs::write(&path, &bytes[..8 + header_len + start + 100]).unwrap();
    let err = load_err(&dir);
    assert!(matches!(err, ModelIoError::Corrupt { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(&last) && msg.contains("truncated") && msg.contains("model.safetensors"),
        "{msg}"
    );

    // Cut inside the header.
    std::fs::write(&path, &bytes[..20]).unwrap();
    let msg = load_err(&dir).to_string();
    assert!(msg.contains("header") && msg.contains("truncated"), "{msg}");
}

#[test]
fn a_missing_tensor_is_named() {
    let (_tmp, dir) = saved(&ModelConfig::tiny(Architecture::Qwen2));
    rewrite_tensors(&dir, |t| {
        t.remove("model.layers.1.self_attn.v_proj.bias");
    });
    match load_err(&dir) {
        ModelIoError::MissingTensor { name, path } => {
            assert_eq!(name, "model.layers.1.self_attn.v_proj.bias");
            assert!(path.ends_with("model.safetensors"));
        }
        other => panic!("expected a missing tensor, got {other:?}"),
    }
}

#[test]
fn a_wrong_shape_names_the_tensor_and_both_shapes() {
    let (_tmp, dir) = saved(&ModelConfig::tiny(Architecture::Qwen3));
    rewrite_tensors(&dir, |t| {
        t.insert(
            "model.layers.0.mlp.down_proj.weight".into(),
            Tensor::zeros((32, 47), DType::F32, &Device::Cpu).unwrap(),
        );
    });
    let err = load_err(&dir);
    let msg = err.to_string();
    match err {
        ModelIoError::ShapeMismatch {
            name,
            expected,
            found,
            ..
        } => {
            assert_eq!(name, "model.layers.0.mlp.down_proj.weight");
            assert_eq!(expected, vec![32, 48]);
            assert_eq!(found, vec![32, 47]);
            assert!(
                msg.contains("[32, 47]") && msg.contains("[32, 48]"),
                "{msg}"
            );
        }
        other => panic!("expected a shape mismatch, got {other:?}"),
    }
}

#[test]
fn an_unexpected_tensor_is_named() {
    let (_tmp, dir) = saved(&ModelConfig::tiny(Architecture::Llama));
    rewrite_tensors(&dir, |t| {
        t.insert(
            "model.layers.0.self_attn.q_proj.bias".into(),
            Tensor::zeros(32, DType::F32, &Device::Cpu).unwrap(),
        );
    });
    let msg = load_err(&dir).to_string();
    assert!(
        msg.contains("unexpected tensor `model.layers.0.self_attn.q_proj.bias`"),
        "{msg}"
    );
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("config.json");
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut cfg);
    std::fs::write(&path, cfg.to_string()).unwrap();
}

#[test]
fn an_unknown_architecture_is_named() {
    let (_tmp, dir) = saved(&ModelConfig::tiny(Architecture::Llama));
    edit_config(&dir, |c| {
        c["architectures"] = serde_json::json!(["GPT2LMHeadModel"])
    });
    match load_err(&dir) {
        ModelIoError::UnknownArchitecture { found, path, .. } => {
            assert_eq!(found, "GPT2LMHeadModel");
            assert!(path.ends_with("config.json"));
        }
        other => panic!("expected an unknown architecture, got {other:?}"),
    }
}

#[test]
fn a_config_that_disagrees_with_the_tensors_is_reported_as_a_shape_mismatch() {
    let (_tmp, dir) = saved(&ModelConfig::tiny(Architecture::Llama));
    edit_config(&dir, |c| c["intermediate_size"] = serde_json::json!(64));
    let msg = load_err(&dir).to_string();
    assert!(msg.contains("mlp.") && msg.contains("64"), "{msg}");
}

#[test]
fn malformed_json_names_the_file_and_line() {
    let (_tmp, dir) = saved(&ModelConfig::tiny(Architecture::Llama));
    std::fs::write(
        dir.join("config.json"),
        "{\n  \"vocab_size\": 64,\n  oops\n}",
    )
    .unwrap();
    let msg = load_err(&dir).to_string();
    assert!(
        msg.contains("config.json") && msg.contains("line 3"),
        "{msg}"
    );
}

#[test]
fn a_directory_without_weights_or_tokenizer_says_which_file_is_missing() {
    let (_tmp, dir) = saved(&ModelConfig::tiny(Architecture::Llama));
    std::fs::remove_file(dir.join("tokenizer.json")).unwrap();
    let msg = load_err(&dir).to_string();
    assert!(msg.contains("tokenizer.json"), "{msg}");
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let msg = load_err(&dir).to_string();
    assert!(msg.contains("model.safetensors.index.json"), "{msg}");
}

#[test]
fn truncated_gguf_names_the_tensor_cut_off() {
    let (mut md, vocab_size) = io_support::byte_level_metadata("qwen2");
    let config = ModelConfig {
        vocab_size,
        bos_token_id: Some(256),
        eos_token_ids: vec![257],
        ..ModelConfig::tiny(Architecture::Qwen3)
    };
    let weights = Weights::random(&config, 2, &Device::Cpu).unwrap();
    md.extend(io_support::model_metadata(&config));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    io_support::write_gguf(&path, &config, &weights, &md, &[]);
    assert!(load_model(&path, DType::F32, &Device::Cpu).is_ok());
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 64]).unwrap();
    let msg = load_err(&path).to_string();
    assert!(
        msg.contains("m.gguf")
            && msg.contains("tensor `output_norm.weight`")
            && msg.contains("remaining"),
        "{msg}"
    );
    assert!(
        !msg.contains("candle_core::"),
        "no backtrace in the message: {msg}"
    );
    std::fs::write(&path, &bytes[..100]).unwrap();
    let msg = load_err(&path).to_string();
    assert!(msg.contains("invalid GGUF header"), "{msg}");
}

#[test]
fn unsupported_dtypes_are_refused() {
    let (_tmp, dir) = saved(&ModelConfig::tiny(Architecture::Llama));
    let err = load_model(&dir, DType::F16, &Device::Cpu).unwrap_err();
    assert!(
        matches!(err, ModelIoError::UnsupportedDtype(DType::F16)),
        "{err:?}"
    );
}

#[test]
fn a_file_that_is_no_model_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "hello").unwrap();
    let msg = load_err(&path).to_string();
    assert!(msg.contains("notes.txt") && msg.contains("GGUF"), "{msg}");
}
