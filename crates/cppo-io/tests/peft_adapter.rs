//! LoRA adapters in PEFT's format: what cppo writes has PEFT's file names, tensor names, shapes and
//! config fields, reads back exactly, and what cppo cannot run is refused naming the key or tensor.

use candle_core::{DType, Device, Tensor};
use cppo_io::params::LayerParam;
use cppo_io::peft::{load_peft_adapter, read_adapter_config, save_peft_adapter, PeftLora, ADAPTER_CONFIG, ADAPTER_WEIGHTS};
use cppo_io::{Architecture, ModelConfig, Weights};

fn settings() -> PeftLora {
    PeftLora { r: 2, alpha: 16.0, dropout: 0.0, target_modules: vec!["q_proj".into(), "down_proj".into()], use_rslora: true, base_model: Some("org/base".into()) }
}

fn adapters(cfg: &ModelConfig) -> Weights {
    let mut w = Weights::default();
    for (i, p) in cfg.lora_params(2, &[LayerParam::Q, LayerParam::Down]).into_iter().enumerate() {
        let n: usize = p.shape.iter().product();
        let v: Vec<f32> = (0..n).map(|j| ((i * 31 + j * 7) % 13) as f32 / 13.0 - 0.5).collect();
        w.insert(p.name, Tensor::from_vec(v, p.shape, &Device::Cpu).unwrap());
    }
    w
}

fn temp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("cppo-peft-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_saved_adapter_has_peft_names_and_reads_back_exactly() {
    let cfg = ModelConfig::tiny(Architecture::Llama);
    let dir = temp("roundtrip");
    let w = adapters(&cfg);
    save_peft_adapter(&dir, &settings(), &w).unwrap();
    // The file's own names and shapes, as PEFT writes them.
    let raw = candle_core::safetensors::load(dir.join(ADAPTER_WEIGHTS), &Device::Cpu).unwrap();
    let (h, q) = (cfg.hidden_size, cfg.num_attention_heads * cfg.head_dim);
    assert_eq!(raw["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"].dims(), &[2, h]);
    assert_eq!(raw["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"].dims(), &[q, 2]);
    assert_eq!(raw["base_model.model.model.layers.1.mlp.down_proj.lora_A.weight"].dims(), &[2, cfg.intermediate_size]);
    assert_eq!(raw.len(), cfg.num_hidden_layers * 4);
    let config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join(ADAPTER_CONFIG)).unwrap()).unwrap();
    assert_eq!(config["peft_type"], "LORA");
    assert_eq!(config["task_type"], "CAUSAL_LM");
    assert_eq!(config["r"], 2);
    assert_eq!(config["lora_alpha"], 16, "an integer, as PEFT's int field");
    assert_eq!(config["target_modules"], serde_json::json!(["q_proj", "down_proj"]));
    assert_eq!(config["use_rslora"], true);
    assert_eq!(config["bias"], "none");
    assert_eq!(config["base_model_name_or_path"], "org/base");
    let (back, wb) = load_peft_adapter(&dir).unwrap();
    assert_eq!(back, settings());
    assert_eq!(wb.tensors.len(), w.tensors.len());
    for (n, t) in &w.tensors {
        let a = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let b = wb.tensors[n].to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(a, b, "{n}");
    }
    // Saving again replaces the adapter directory.
    save_peft_adapter(&dir, &PeftLora { alpha: 3.5, ..settings() }, &w).unwrap();
    assert_eq!(read_adapter_config(&dir).unwrap().alpha, 3.5);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn with_config(name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> std::path::PathBuf {
    let cfg = ModelConfig::tiny(Architecture::Llama);
    let dir = temp(name);
    save_peft_adapter(&dir, &settings(), &adapters(&cfg)).unwrap();
    let path = dir.join(ADAPTER_CONFIG);
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, v.to_string()).unwrap();
    dir
}

#[test]
fn what_cppo_cannot_run_is_refused_by_key() {
    let cases: [(&str, &str, serde_json::Value); 6] = [
        ("dora", "use_dora", serde_json::json!(true)),
        ("pattern", "rank_pattern", serde_json::json!({"q_proj": 4})),
        ("module", "target_modules", serde_json::json!(["q_proj", "lm_head"])),
        ("regex", "target_modules", serde_json::json!(".*proj")),
        ("rank", "r", serde_json::json!(0)),
        ("type", "peft_type", serde_json::json!("IA3")),
    ];
    for (name, key, value) in cases {
        let dir = with_config(name, |v| v[key] = value.clone());
        let err = load_peft_adapter(&dir).unwrap_err().to_string();
        assert!(err.contains(&format!("`{key}`")), "{name}: {err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
    // "all-linear" and PEFT's defaults for keys left out are read.
    let dir = with_config("all-linear", |v| {
        v["target_modules"] = serde_json::json!("all-linear");
        v.as_object_mut().unwrap().remove("lora_alpha");
        v.as_object_mut().unwrap().remove("use_rslora");
    });
    let back = read_adapter_config(&dir).unwrap();
    assert_eq!(back.target_modules.len(), 7);
    assert_eq!((back.alpha, back.use_rslora), (8.0, false));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tensors_under_the_adapter_name_are_read_and_strangers_are_refused() {
    let cfg = ModelConfig::tiny(Architecture::Llama);
    let dir = temp("names");
    save_peft_adapter(&dir, &settings(), &adapters(&cfg)).unwrap();
    let path = dir.join(ADAPTER_WEIGHTS);
    let raw = candle_core::safetensors::load(&path, &Device::Cpu).unwrap();
    let renamed: std::collections::HashMap<String, Tensor> =
        raw.iter().map(|(k, t)| (k.replace(".lora_A.weight", ".lora_A.default.weight"), t.clone())).collect();
    candle_core::safetensors::save(&renamed, &path).unwrap();
    let (_, w) = load_peft_adapter(&dir).unwrap();
    assert!(w.tensors.contains_key("model.layers.0.self_attn.q_proj.lora_A.weight"));
    let mut strange = renamed.clone();
    strange.insert("base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector".into(), Tensor::zeros(4, DType::F32, &Device::Cpu).unwrap());
    candle_core::safetensors::save(&strange, &path).unwrap();
    let err = load_peft_adapter(&dir).unwrap_err().to_string();
    assert!(err.contains("lora_magnitude_vector"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
