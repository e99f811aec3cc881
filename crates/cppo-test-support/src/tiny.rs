//! A tiny random model with a small byte-level tokenizer built here (no download), saved once per test
//! binary as a Hugging Face directory, and a config that trains it on generated arithmetic.

use std::path::PathBuf;
use std::sync::OnceLock;

use candle_core::{DType, Device};
use cppo_io::{Architecture, ChatTemplate, ChatTokenizer, ModelConfig, SpecialTokens};
use cppo_model::Decoder;
use cppo_train::config::TrainConfig;

const CHATML: &str = "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// GPT-2's byte alphabet: printable bytes stand for themselves, the others for 256 + n.
fn byte_alphabet() -> Vec<char> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut n = 0;
    (0..256u32)
        .map(|b| {
            if printable(b) {
                char::from_u32(b).unwrap()
            } else {
                n += 1;
                char::from_u32(255 + n).unwrap()
            }
        })
        .collect()
}

/// A byte-level BPE like SmolLM2's, small: the 256 byte tokens, every pair of lowercase letters,
/// digits and the space marker `Ġ` merged into one token (so a random model's text holds words and
/// numbers, and stop strings occur), then `<|im_start|>` (bos), `<|im_end|>` (eos), `<|endoftext|>`;
/// a ChatML template.
pub fn tiny_tokenizer() -> ChatTokenizer {
    let bytes = byte_alphabet();
    let mut vocab: Vec<String> = bytes.iter().map(|c| c.to_string()).collect();
    let pieces: Vec<char> = "abcdefghijklmnopqrstuvwxyz0123456789".chars().chain(['\u{120}']).collect();
    let mut merges = Vec::new();
    for &a in &pieces {
        for &b in &pieces {
            merges.push(format!("{a} {b}"));
            vocab.push(format!("{a}{b}"));
        }
    }
    let specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"];
    let first_special = vocab.len();
    vocab.extend(specials.iter().map(|s| s.to_string()));
    let vocab_json: serde_json::Map<String, serde_json::Value> = vocab.iter().enumerate().map(|(i, w)| (w.clone(), serde_json::json!(i))).collect();
    let added: Vec<serde_json::Value> = specials
        .iter()
        .enumerate()
        .map(|(i, t)| serde_json::json!({"id": first_special + i, "content": t, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}))
        .collect();
    let json = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": added, "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": false, "byte_fallback": false, "vocab": vocab_json, "merges": merges},
    });
    let tokenizer = ChatTokenizer::parse_tokenizer_json(&json.to_string(), "tiny byte-level").expect("tiny tokenizer");
    let special = SpecialTokens {
        bos_token: Some("<|im_start|>".into()),
        eos_token: Some("<|im_end|>".into()),
        pad_token: Some("<|im_end|>".into()),
        unk_token: None,
    };
    let template = ChatTemplate::new(CHATML, "tiny").expect("template");
    ChatTokenizer::new(tokenizer, Some(template), special, &[]).expect("tiny chat tokenizer")
}

pub fn tiny_model_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let tokenizer = tiny_tokenizer();
        let mut cfg = ModelConfig::tiny(Architecture::Llama);
        cfg.vocab_size = tokenizer.vocab_size();
        cfg.eos_token_ids = tokenizer.eos_token_ids().to_vec();
        cfg.bos_token_id = tokenizer.bos_token_id();
        cfg.max_position_embeddings = 512;
        let decoder = Decoder::random(&cfg, 7, &Device::Cpu).unwrap();
        let dir = std::env::temp_dir().join(format!("cppo-tiny-model-{}", std::process::id()));
        cppo_io::save_hf(&dir, &cfg, &decoder.to_weights().unwrap(), &tokenizer, DType::F32).unwrap();
        dir
    })
    .clone()
}

pub fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cppo-train-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A short run on the tiny model; `extra` is appended TOML and `overrides` are `--set` lines.
pub fn tiny_config(name: &str, overrides: &[&str]) -> TrainConfig {
    let text = format!(
        r#"
seed = 3
output_dir = "{out}"
[model]
path = "{model}"
[data]
train = "arith:train"
eval = "arith:test"
eval_limit = 3
template = "plain"
[reward]
accuracy = 1.0
brevity = 1.0
[rollout]
num_generations = 4
questions_per_step = 2
[generation]
max_new_tokens = 6
max_batch = 8
[loss]
beta = 0.04
[optim]
lr = 1e-2
micro_batch_tokens = 64
[train]
steps = 2
eval_before = false
[eval]
max_new_tokens = 4
"#,
        out = out_dir(name).display(),
        model = tiny_model_dir().display()
    );
    let ov: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    TrainConfig::from_toml(&text, &ov).unwrap()
}
