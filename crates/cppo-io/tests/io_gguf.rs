//! GGUF loading: tiny files written with candle's GGUF writer (Llama q/k rows permuted as llama.cpp's
//! converter does), and the real SmolLM2 GGUF converted to a Hugging Face directory and read back.

mod io_support;

use candle_core::quantized::gguf_file::Value;
use candle_core::{DType, Device, Tensor};
use cppo_io::gguf::config::llama3_rope_divisors;
use cppo_io::{convert_gguf, fetch, gguf, load_model, Architecture, ChatMessage, ModelConfig, RopeScaling, Weights};
use io_support::{assert_same_weights, byte_level_metadata, model_metadata, write_gguf};

/// `config` with the byte-level test vocabulary's size and special ids.
fn with_test_vocab(config: ModelConfig) -> ModelConfig {
    ModelConfig {
        vocab_size: byte_level_metadata("gpt-2").1,
        bos_token_id: Some(256),
        eos_token_ids: vec![257],
        ..config
    }
}

fn gguf_of(
    config: &ModelConfig,
    weights: &Weights,
    pre: &str,
    extra: &[(&str, Tensor)],
) -> (tempfile::TempDir, std::path::PathBuf) {
    let (mut md, _) = byte_level_metadata(pre);
    md.extend(model_metadata(config));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    write_gguf(&path, config, weights, &md, extra);
    (dir, path)
}

#[test]
fn each_architecture_loads_with_hugging_face_names_and_row_order() {
    let untied_llama = ModelConfig {
        tie_word_embeddings: false,
        ..ModelConfig::tiny(Architecture::Llama)
    };
    for config in [
        ModelConfig::tiny(Architecture::Llama),
        untied_llama,
        ModelConfig::tiny(Architecture::Qwen2),
        ModelConfig::tiny(Architecture::Qwen3),
    ] {
        let config = with_test_vocab(config);
        let weights = Weights::random(&config, 9, &Device::Cpu).unwrap();
        let (_dir, path) = gguf_of(&config, &weights, "gpt-2", &[]);
        let loaded = load_model(&path, DType::F32, &Device::Cpu).unwrap();
        let mut expected = config.clone();
        expected.rms_norm_eps = f64::from(config.rms_norm_eps as f32);
        assert_eq!(loaded.config, expected);
        // For Llama this holds only if the loader undid llama.cpp's q/k permutation.
        assert_same_weights(&loaded.weights, &weights);
    }
}

#[test]
fn the_permutation_is_undone_for_k_with_its_own_head_count() {
    // 4 query heads and 2 kv heads: undoing k's permutation with the query head count would scramble it.
    let config = with_test_vocab(ModelConfig::tiny(Architecture::Llama));
    assert_ne!(config.num_attention_heads, config.num_key_value_heads);
    let weights = Weights::random(&config, 4, &Device::Cpu).unwrap();
    let (_dir, path) = gguf_of(&config, &weights, "gpt-2", &[]);
    let loaded = load_model(&path, DType::BF16, &Device::Cpu).unwrap();
    let name = "model.layers.1.self_attn.k_proj.weight";
    let want = io_support::values(&weights.tensors[name].to_dtype(DType::BF16).unwrap());
    assert_eq!(io_support::values(&loaded.weights.tensors[name]), want);
    assert_eq!(loaded.weights.tensors[name].dtype(), DType::BF16);
}

#[test]
fn llama3_rope_scaling_is_recovered_from_rope_freqs() {
    let config = with_test_vocab(ModelConfig {
        head_dim: 64,
        num_attention_heads: 2,
        num_key_value_heads: 1,
        hidden_size: 32,
        rope_theta: 500000.0,
        ..ModelConfig::tiny(Architecture::Llama)
    });
    let scaling = RopeScaling {
        factor: 32.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
    };
    let divisors: Vec<f32> = llama3_rope_divisors(&scaling, config.rope_theta, config.head_dim)
        .iter()
        .map(|d| *d as f32)
        .collect();
    assert!(
        divisors.iter().any(|d| *d > 1.0 && *d < 32.0),
        "the test needs smoothly scaled frequencies"
    );
    let weights = Weights::random(&config, 4, &Device::Cpu).unwrap();
    let freqs = Tensor::new(divisors.as_slice(), &Device::Cpu).unwrap();
    let (_dir, path) = gguf_of(&config, &weights, "gpt-2", &[("rope_freqs.weight", freqs)]);
    let loaded = load_model(&path, DType::F32, &Device::Cpu).unwrap();
    assert_eq!(loaded.config.rope_scaling, Some(scaling));
    assert!(loaded.weights.get("rope_freqs.weight").is_none());

    let other = Tensor::new(vec![2f32; 32].as_slice(), &Device::Cpu).unwrap();
    let (_dir, path) = gguf_of(&config, &weights, "gpt-2", &[("rope_freqs.weight", other)]);
    let msg = load_model(&path, DType::F32, &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("rope_freqs.weight"), "{msg}");
}

#[test]
fn the_tokenizer_is_byte_level_bpe_with_the_named_splitting() {
    let config = with_test_vocab(ModelConfig::tiny(Architecture::Qwen3));
    let weights = Weights::random(&config, 1, &Device::Cpu).unwrap();
    let (_dir, path) = gguf_of(&config, &weights, "smollm", &[]);
    let tok = gguf::load_gguf_tokenizer(&path).unwrap();
    let id = |t: &str| tok.token_to_id(t).unwrap();
    // Merges build "hello" and "Ġworld"; control tokens are single special ids.
    assert_eq!(
        tok.encode("hello world").unwrap(),
        vec![id("hello"), id("Ġworld")]
    );
    assert_eq!(
        tok.encode("<|im_start|>hello<|im_end|>").unwrap(),
        vec![256, id("hello"), 257]
    );
    assert!(tok.is_special(257) && !tok.is_special(id("hello")));
    // Bytes outside ASCII go through the byte alphabet and come back intact.
    let text = "héllo → 東京 🙂\n\t";
    assert_eq!(tok.decode(&tok.encode(text).unwrap(), false).unwrap(), text);
    assert_eq!(tok.decode(&[256, id("hello"), 257], true).unwrap(), "hello");
    assert_eq!(tok.eos_token_ids(), &[257]);
    assert_eq!(tok.bos_token_id(), Some(256));
    let chat = [ChatMessage::new("user", "hello")];
    assert_eq!(
        tok.render(&chat, true).unwrap(),
        "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    );
    // smollm splits every digit off before BPE (as llama.cpp does and SmolLM2 was trained), so the "12"
    // merge never applies; GPT-2's splitting keeps "12" whole.
    assert_eq!(
        tok.encode("x 12").unwrap(),
        vec![id("x"), id("Ġ"), id("1"), id("2")]
    );
    let (_dir, gpt2) = gguf_of(&config, &weights, "gpt-2", &[]);
    let gpt2 = gguf::load_gguf_tokenizer(&gpt2).unwrap();
    assert_eq!(
        gpt2.encode("x 12").unwrap(),
        vec![id("x"), id("Ġ"), id("12")]
    );
}

#[test]
fn unsupported_tokenizers_name_the_key() {
    let config = with_test_vocab(ModelConfig::tiny(Architecture::Qwen2));
    let weights = Weights::random(&config, 1, &Device::Cpu).unwrap();
    let (_dir, path) = gguf_of(&config, &weights, "no-such-pre", &[]);
    let msg = gguf::load_gguf_tokenizer(&path).unwrap_err().to_string();
    assert!(
        msg.contains("tokenizer.ggml.pre") && msg.contains("no-such-pre"),
        "{msg}"
    );

    let (mut md, _) = byte_level_metadata("gpt-2");
    md.retain(|(k, _)| k != "tokenizer.ggml.model");
    md.push(("tokenizer.ggml.model".into(), Value::String("t5".into())));
    md.extend(model_metadata(&config));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spm.gguf");
    write_gguf(&path, &config, &weights, &md, &[]);
    let msg = gguf::load_gguf_tokenizer(&path).unwrap_err().to_string();
    assert!(msg.contains("tokenizer.ggml.model"), "{msg}");
}

#[test]
fn unknown_architectures_and_tensors_are_named() {
    let config = with_test_vocab(ModelConfig::tiny(Architecture::Llama));
    let weights = Weights::random(&config, 1, &Device::Cpu).unwrap();
    let (mut md, _) = byte_level_metadata("gpt-2");
    md.extend(model_metadata(&config));
    for (k, v) in md.iter_mut() {
        if k == "general.architecture" {
            *v = Value::String("phi3".into());
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("phi.gguf");
    write_gguf(&path, &config, &weights, &md, &[]);
    let msg = load_model(&path, DType::F32, &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("phi3"), "{msg}");

    let stray = Tensor::zeros(4, DType::F32, &Device::Cpu).unwrap();
    let (_dir, path) = gguf_of(
        &config,
        &weights,
        "gpt-2",
        &[("blk.0.attn_sinks.weight", stray)],
    );
    let msg = load_model(&path, DType::F32, &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("blk.0.attn_sinks.weight"), "{msg}");

    let mut md = model_metadata(&config);
    md.retain(|(k, _)| k != "llama.feed_forward_length");
    md.extend(byte_level_metadata("gpt-2").0);
    let path = dir.path().join("nokey.gguf");
    write_gguf(&path, &config, &weights, &md, &[]);
    let msg = load_model(&path, DType::F32, &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("llama.feed_forward_length"), "{msg}");
}

#[test]
fn smollm2_gguf_converts_to_a_hugging_face_directory_and_back_bit_for_bit() {
    let path = fetch::smollm2_135m_instruct_gguf().expect("fetch the SmolLM2 GGUF");
    let from_gguf = load_model(&path, DType::F32, &Device::Cpu).unwrap();
    let c = &from_gguf.config;
    assert_eq!(c.architecture, Architecture::Llama);
    assert_eq!(
        (c.vocab_size, c.hidden_size, c.intermediate_size),
        (49152, 576, 1536)
    );
    assert_eq!(
        (
            c.num_hidden_layers,
            c.num_attention_heads,
            c.num_key_value_heads,
            c.head_dim
        ),
        (30, 9, 3, 64)
    );
    assert_eq!((c.max_position_embeddings, c.rope_theta), (8192, 100000.0));
    assert!(c.tie_word_embeddings && c.rope_scaling.is_none());
    assert_eq!(
        (c.bos_token_id, c.eos_token_ids.clone()),
        (Some(1), vec![2])
    );
    assert_eq!(from_gguf.weights.len(), 2 + 30 * 9);

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("smollm2");
    convert_gguf(&path, &out).unwrap();
    let from_dir = load_model(&out, DType::F32, &Device::Cpu).unwrap();
    assert_eq!(&from_dir.config, c);
    assert_same_weights(&from_dir.weights, &from_gguf.weights);
    let chats = [
        vec![ChatMessage::new("user", "What is 12 + 35?")],
        vec![
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", "Déjà vu 🙂  123"),
        ],
    ];
    for chat in chats {
        let text = from_gguf.tokenizer.render(&chat, true).unwrap();
        assert_eq!(from_dir.tokenizer.render(&chat, true).unwrap(), text);
        let ids = from_gguf.tokenizer.encode(&text).unwrap();
        assert_eq!(from_dir.tokenizer.encode(&text).unwrap(), ids);
        assert_eq!(
            from_dir.tokenizer.decode(&ids, true).unwrap(),
            from_gguf.tokenizer.decode(&ids, true).unwrap()
        );
    }
    assert_eq!(
        from_dir.tokenizer.eos_token_ids(),
        from_gguf.tokenizer.eos_token_ids()
    );
}

/// SentencePiece metadata (Llama 2 style): `<unk>`, `<s>`, `</s>`, the 256 byte pieces, then pieces
/// whose scores rank the merges that spell "▁hello" and "▁world".
fn sentencepiece_metadata() -> Vec<(String, Value)> {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2i32, 3, 3];
    let mut scores = vec![0f32; 3];
    for b in 0..256 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    let pieces = [
        ("\u{2581}h", -1.0), ("\u{2581}he", -2.0), ("ll", -3.0), ("\u{2581}hell", -4.0), ("\u{2581}hello", -5.0),
        ("\u{2581}w", -6.0), ("or", -7.0), ("\u{2581}wor", -8.0), ("\u{2581}worl", -9.0), ("\u{2581}world", -10.0),
        ("\u{2581}", -100.0), ("h", -101.0), ("e", -102.0), ("l", -103.0), ("o", -104.0), ("w", -105.0), ("r", -106.0), ("d", -107.0),
    ];
    for (p, sc) in pieces {
        tokens.push(p.to_string());
        types.push(1);
        scores.push(sc);
    }
    vec![
        ("tokenizer.ggml.model".into(), Value::String("llama".into())),
        ("tokenizer.ggml.tokens".into(), Value::Array(tokens.into_iter().map(Value::String).collect())),
        ("tokenizer.ggml.scores".into(), Value::Array(scores.into_iter().map(Value::F32).collect())),
        ("tokenizer.ggml.token_type".into(), Value::Array(types.into_iter().map(Value::I32).collect())),
        ("tokenizer.ggml.bos_token_id".into(), Value::U32(1)),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(2)),
        ("tokenizer.ggml.unknown_token_id".into(), Value::U32(0)),
        ("tokenizer.chat_template".into(), Value::String("{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}".into())),
    ]
}

#[test]
fn sentencepiece_tokenizers_load_from_llama2_style_metadata() {
    let md = sentencepiece_metadata();
    let n = match &md[1].1 {
        Value::Array(a) => a.len(),
        _ => unreachable!(),
    };
    let config = ModelConfig { vocab_size: n, bos_token_id: Some(1), eos_token_ids: vec![2], ..ModelConfig::tiny(Architecture::Llama) };
    let weights = Weights::random(&config, 1, &Device::Cpu).unwrap();
    let mut all = md.clone();
    all.extend(model_metadata(&config));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spm.gguf");
    write_gguf(&path, &config, &weights, &all, &[]);
    let tok = gguf::load_gguf_tokenizer(&path).unwrap();
    let id = |piece: &str| 3 + 256 + ["\u{2581}h", "\u{2581}he", "ll", "\u{2581}hell", "\u{2581}hello", "\u{2581}w", "or", "\u{2581}wor", "\u{2581}worl", "\u{2581}world", "\u{2581}"].iter().position(|p| *p == piece).unwrap() as u32;
    // Merges by score: a space before the text, and at every space.
    assert_eq!(tok.encode("hello world").unwrap(), vec![id("\u{2581}hello"), id("\u{2581}world")]);
    // A character outside the vocabulary falls back to its UTF-8 bytes (the euro sign is E2 82 AC).
    let euro = tok.encode("hello \u{20ac}").unwrap();
    assert_eq!(euro, vec![id("\u{2581}hello"), id("\u{2581}"), 3 + 0xE2, 3 + 0x82, 3 + 0xAC]);
    assert_eq!(tok.decode(&euro, true).unwrap(), "hello \u{20ac}");
    // Control tokens written in the text are their ids, and no ▁ is put after them (transformers'
    // prepend_scheme "first"); decoding can skip them.
    let with_bos = tok.encode("<s>hello world</s>").unwrap();
    let (h, e, o) = (id("\u{2581}") + 1, id("\u{2581}") + 2, id("\u{2581}") + 4);
    assert_eq!(with_bos, vec![1, h, e, id("ll"), o, id("\u{2581}world"), 2]);
    assert_eq!(tok.decode(&with_bos, true).unwrap(), "hello world");
    // Text that starts with a space gets no second ▁.
    assert_eq!(tok.encode(" hello").unwrap(), vec![id("\u{2581}hello")]);
    // The chat template from the metadata, with the bos token it names.
    let text = tok.render(&[cppo_io::ChatMessage::new("user", "hello")], true).unwrap();
    assert_eq!(text, "<s>[INST] hello [/INST]");
    assert_eq!(tok.eos_token_ids(), &[2]);
}

#[test]
fn sentencepiece_metadata_without_scores_is_named() {
    let mut md = sentencepiece_metadata();
    md.retain(|(k, _)| k != "tokenizer.ggml.scores");
    let config = ModelConfig { vocab_size: 277, ..ModelConfig::tiny(Architecture::Llama) };
    let weights = Weights::random(&config, 1, &Device::Cpu).unwrap();
    md.extend(model_metadata(&config));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spm.gguf");
    write_gguf(&path, &config, &weights, &md, &[]);
    let msg = gguf::load_gguf_tokenizer(&path).unwrap_err().to_string();
    assert!(msg.contains("tokenizer.ggml.scores"), "{msg}");
}
