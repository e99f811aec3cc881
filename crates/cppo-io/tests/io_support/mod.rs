//! Shared fixtures of the io_* tests: a tiny word-level tokenizer with a ChatML template, comparisons of
//! weights bit for bit, and tiny GGUF files written with candle's GGUF writer.
#![allow(dead_code)]

use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use cppo_io::{ChatTemplate, ChatTokenizer, ModelConfig, SpecialTokens, Weights};

pub const CHATML: &str = "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// A word-level tokenizer of exactly `vocab` ids: 0 `<unk>`, 1 `<|im_start|>` (bos), 2 `<|im_end|>` (eos),
/// then words `w3`, `w4`, ... and a few real words.
pub fn tiny_tokenizer(vocab: usize) -> ChatTokenizer {
    let mut words: Vec<String> = vec!["<unk>".into(), "<|im_start|>".into(), "<|im_end|>".into()];
    for w in [
        "user",
        "assistant",
        "system",
        "hello",
        "world",
        "2",
        "+",
        "=",
    ] {
        words.push(w.into());
    }
    while words.len() < vocab {
        words.push(format!("w{}", words.len()));
    }
    let vocab_json: serde_json::Map<String, serde_json::Value> = words
        .iter()
        .enumerate()
        .map(|(i, w)| (w.clone(), serde_json::json!(i)))
        .collect();
    let added: Vec<serde_json::Value> = (0..3)
        .map(|i| {
            serde_json::json!({"id": i, "content": words[i], "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let json = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": added,
        "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab_json, "unk_token": "<unk>"},
    });
    let tokenizer =
        ChatTokenizer::parse_tokenizer_json(&json.to_string(), "tiny").expect("tiny tokenizer");
    let special = SpecialTokens {
        bos_token: Some("<|im_start|>".into()),
        eos_token: Some("<|im_end|>".into()),
        pad_token: Some("<|im_end|>".into()),
        unk_token: Some("<unk>".into()),
    };
    let template = ChatTemplate::new(CHATML, "tiny").expect("template");
    ChatTokenizer::new(tokenizer, Some(template), special, &[2]).expect("tiny chat tokenizer")
}

pub fn values(t: &Tensor) -> Vec<f32> {
    t.to_dtype(DType::F32)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
}

/// Same names, shapes, dtypes and bit patterns.
pub fn assert_same_weights(a: &Weights, b: &Weights) {
    let names_a: Vec<&String> = a.tensors.keys().collect();
    let names_b: Vec<&String> = b.tensors.keys().collect();
    assert_eq!(names_a, names_b, "tensor names differ");
    for (name, ta) in &a.tensors {
        let tb = &b.tensors[name];
        assert_eq!(ta.dims(), tb.dims(), "{name}: shape");
        assert_eq!(ta.dtype(), tb.dtype(), "{name}: dtype");
        let bits = |t: &Tensor| -> Vec<u32> { values(t).iter().map(|v| v.to_bits()).collect() };
        assert!(bits(ta) == bits(tb), "{name}: values differ");
    }
}

/// llama.cpp's converter permutation, written independently of the crate as index arithmetic: within
/// each head, HF row `j * half + i` goes to GGUF row `2 * i + j`.
pub fn llama_cpp_permute(t: &Tensor, n_head: usize) -> Tensor {
    let dims = t.dims().to_vec();
    let rows = dims[0];
    let cols: usize = dims[1..].iter().product();
    let half = rows / n_head / 2;
    let v = values(t);
    let mut out = vec![0f32; v.len()];
    for h in 0..n_head {
        for j in 0..2 {
            for i in 0..half {
                let hf_row = h * 2 * half + j * half + i;
                let gguf_row = h * 2 * half + 2 * i + j;
                out[gguf_row * cols..(gguf_row + 1) * cols]
                    .copy_from_slice(&v[hf_row * cols..(hf_row + 1) * cols]);
            }
        }
    }
    Tensor::from_vec(out, dims, &Device::Cpu).unwrap()
}

/// The llama.cpp name of a Hugging Face tensor name.
pub fn gguf_name(hf: &str) -> String {
    match hf {
        "model.embed_tokens.weight" => return "token_embd.weight".into(),
        "model.norm.weight" => return "output_norm.weight".into(),
        "lm_head.weight" => return "output.weight".into(),
        _ => {}
    }
    let rest = hf.strip_prefix("model.layers.").expect("a layer tensor");
    let (layer, rest) = rest.split_once('.').unwrap();
    let (part, suffix) = rest.rsplit_once('.').unwrap();
    let g = match part {
        "input_layernorm" => "attn_norm",
        "post_attention_layernorm" => "ffn_norm",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "self_attn.q_norm" => "attn_q_norm",
        "self_attn.k_norm" => "attn_k_norm",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        other => panic!("unknown part {other}"),
    };
    format!("blk.{layer}.{g}.{suffix}")
}

/// GPT-2's byte alphabet, written out independently of the crate.
pub fn byte_alphabet() -> Vec<String> {
    let printable: Vec<u32> = (33..=126).chain(161..=172).chain(174..=255).collect();
    let mut out = vec![String::new(); 256];
    for &b in &printable {
        out[b as usize] = char::from_u32(b).unwrap().to_string();
    }
    let mut n = 0;
    for b in 0..256u32 {
        if !printable.contains(&b) {
            out[b as usize] = char::from_u32(256 + n).unwrap().to_string();
            n += 1;
        }
    }
    out
}

/// Tokenizer metadata of a byte-level BPE: the 256 byte tokens, then `<|im_start|>`, `<|im_end|>` (control)
/// and merges `h e`, `he l`, ... making "hello", "Ġworld" and "12" tokens; returns `(metadata, vocab size)`.
pub fn byte_level_metadata(pre: &str) -> (Vec<(String, Value)>, usize) {
    let mut tokens = byte_alphabet();
    let mut types = vec![1i32; 256];
    for special in ["<|im_start|>", "<|im_end|>"] {
        tokens.push(special.into());
        types.push(3);
    }
    let merges = [
        "h e", "he l", "hel l", "hell o", "Ġ w", "Ġw o", "Ġwo r", "Ġwor l", "Ġworl d", "1 2",
    ];
    for m in merges {
        tokens.push(m.replace(' ', ""));
        types.push(1);
    }
    let n = tokens.len();
    let strings = |v: Vec<String>| Value::Array(v.into_iter().map(Value::String).collect());
    let md = vec![
        ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
        ("tokenizer.ggml.pre".into(), Value::String(pre.into())),
        ("tokenizer.ggml.tokens".into(), strings(tokens)),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(types.into_iter().map(Value::I32).collect()),
        ),
        (
            "tokenizer.ggml.merges".into(),
            strings(merges.iter().map(|m| m.to_string()).collect()),
        ),
        ("tokenizer.ggml.bos_token_id".into(), Value::U32(256)),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(257)),
        (
            "tokenizer.chat_template".into(),
            Value::String(CHATML.into()),
        ),
    ];
    (md, n)
}

/// Model metadata of `config` under llama.cpp's keys.
pub fn model_metadata(config: &ModelConfig) -> Vec<(String, Value)> {
    let arch = config.architecture.model_type();
    let k = |s: &str| format!("{arch}.{s}");
    vec![
        ("general.architecture".into(), Value::String(arch.into())),
        (
            k("block_count"),
            Value::U32(config.num_hidden_layers as u32),
        ),
        (
            k("context_length"),
            Value::U32(config.max_position_embeddings as u32),
        ),
        (k("embedding_length"), Value::U32(config.hidden_size as u32)),
        (
            k("feed_forward_length"),
            Value::U32(config.intermediate_size as u32),
        ),
        (
            k("attention.head_count"),
            Value::U32(config.num_attention_heads as u32),
        ),
        (
            k("attention.head_count_kv"),
            Value::U32(config.num_key_value_heads as u32),
        ),
        (
            k("attention.key_length"),
            Value::U32(config.head_dim as u32),
        ),
        (k("rope.freq_base"), Value::F32(config.rope_theta as f32)),
        (
            k("attention.layer_norm_rms_epsilon"),
            Value::F32(config.rms_norm_eps as f32),
        ),
        (k("vocab_size"), Value::U32(config.vocab_size as u32)),
    ]
}

/// Writes a GGUF file: `tensors` by HF name are stored (f32) under llama.cpp names, Llama's q/k rows
/// permuted as llama.cpp's converter does.
pub fn write_gguf(
    path: &Path,
    config: &ModelConfig,
    weights: &Weights,
    metadata: &[(String, Value)],
    extra: &[(&str, Tensor)],
) {
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    for (name, t) in &weights.tensors {
        let mut t = t.clone();
        if config.architecture == cppo_io::Architecture::Llama {
            if name.contains("q_proj") {
                t = llama_cpp_permute(&t, config.num_attention_heads);
            } else if name.contains("k_proj") {
                t = llama_cpp_permute(&t, config.num_key_value_heads);
            }
        }
        tensors.push((
            gguf_name(name),
            QTensor::quantize(&t, GgmlDType::F32).unwrap(),
        ));
    }
    for (name, t) in extra {
        tensors.push((
            name.to_string(),
            QTensor::quantize(t, GgmlDType::F32).unwrap(),
        ));
    }
    let md: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut file = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut file, &md, &ts).unwrap();
}
