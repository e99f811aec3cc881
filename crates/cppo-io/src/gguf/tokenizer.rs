//! The tokenizer rebuilt from GGUF metadata as the `tokenizer.json` the model was released with:
//! - byte-level BPE (`tokenizer.ggml.model == "gpt2"`: Llama 3, Qwen2, SmolLM2): vocabulary and merges
//!   from the file, the text splitting named by `tokenizer.ggml.pre` (as llama.cpp applies it);
//! - SentencePiece BPE (`"llama"`: Llama 2, TinyLlama, Mistral): `▁` for spaces (and before the text,
//!   unless `tokenizer.ggml.add_space_prefix` is false), byte fallback through the `<0xNN>` pieces, and
//!   merges derived from the pieces' scores, all as transformers 5 rebuilds it from such a file (checked
//!   token for token on a synthetic file written by the `gguf` Python package).
//!
//! Control tokens become special added tokens in both.

use serde_json::{json, Map, Value};

use super::metadata::Metadata;
use crate::chat_template::{ChatTemplate, SpecialTokens};
use crate::error::{ModelIoError, Result};
use crate::tokenizer::ChatTokenizer;

/// llama.cpp's token types.
const UNKNOWN: i64 = 2;
const CONTROL: i64 = 3;
const USER_DEFINED: i64 = 4;

/// SentencePiece's spelling of a space.
const SPACE: char = '\u{2581}';

const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The `tokenizer.ggml.pre` values understood, grouped by the splitting they mean.
pub const SUPPORTED_PRE: &str = "gpt-2, default, smollm, starcoder, refact, command-r, codeshell, \
exaone, minerva, llama3, llama-v3, llama-bpe, falcon3, qwen2, deepseek-r1-qwen, megrez";

/// How text is cut into words before BPE: `(normalizer, pre_tokenizer, ignore_merges)`.
fn splitting(pre: &str) -> Option<(Value, Value, bool)> {
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    let split = |pattern: &str| {
        json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false},
            byte_level(false),
        ]})
    };
    match pre {
        "gpt-2" | "gpt2" | "default" => Some((Value::Null, byte_level(true), false)),
        // llama.cpp splits off each digit before GPT-2's regex, like these models' Digits pre-tokenizer.
        "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva" => {
            Some((
                Value::Null,
                json!({"type": "Sequence", "pretokenizers": [
                    {"type": "Digits", "individual_digits": true},
                    byte_level(true),
                ]}),
                false,
            ))
        }
        // llama.cpp looks whole words up in the vocabulary before merging for Llama 3 (`ignore_merges`).
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" => {
            Some((Value::Null, split(LLAMA3_SPLIT), true))
        }
        "qwen2" | "deepseek-r1-qwen" | "megrez" => {
            Some((json!({"type": "NFC"}), split(QWEN2_SPLIT), false))
        }
        _ => None,
    }
}

/// GPT-2's printable spelling of each byte, as `tokenizer.json` vocabularies use it.
pub fn byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..256u32 {
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        let c = if printable {
            b
        } else {
            let c = next;
            next += 1;
            c
        };
        table[b as usize] = char::from_u32(c).expect("below the surrogate range");
    }
    table
}

pub fn tokenizer_from_metadata(md: &Metadata<'_>) -> Result<ChatTokenizer> {
    let model = md.str("tokenizer.ggml.model")?;
    let tokens = required_tokens(md)?;
    let types = token_types(md, tokens.len())?;
    let tokenizer_json = match model {
        "gpt2" => byte_level_json(md, &tokens, &types)?,
        "llama" => sentencepiece_json(md, &tokens, &types)?,
        model => {
            return Err(ModelIoError::invalid(
                md.path,
                "tokenizer.ggml.model",
                format!("\"{model}\" is not supported (\"gpt2\", byte-level BPE, or \"llama\", SentencePiece BPE)"),
            ))
        }
    };
    let origin = format!("{} (gguf metadata)", md.path.display());
    let tokenizer = ChatTokenizer::parse_tokenizer_json(&tokenizer_json.to_string(), &origin)?;

    let token_of = |key: &str| -> Result<Option<String>> {
        match md.opt_u32(key)? {
            None => Ok(None),
            Some(id) => tokens
                .get(id as usize)
                .map(|t| Some(t.to_string()))
                .ok_or_else(|| {
                    ModelIoError::invalid(md.path, key, format!("{id} is outside the vocabulary"))
                }),
        }
    };
    let special = SpecialTokens {
        bos_token: token_of("tokenizer.ggml.bos_token_id")?,
        eos_token: token_of("tokenizer.ggml.eos_token_id")?,
        pad_token: token_of("tokenizer.ggml.padding_token_id")?,
        unk_token: token_of("tokenizer.ggml.unknown_token_id")?,
    };
    let template = md
        .opt_str("tokenizer.chat_template")?
        .map(|source| ChatTemplate::new(source, &origin))
        .transpose()?;
    ChatTokenizer::new(tokenizer, template, special, &stop_ids(md)?)
}

fn required_tokens<'a>(md: &'a Metadata<'_>) -> Result<Vec<&'a str>> {
    md.opt_str_array("tokenizer.ggml.tokens")?.ok_or_else(|| ModelIoError::MissingKey {
        path: md.path.to_path_buf(),
        key: "tokenizer.ggml.tokens".into(),
    })
}

/// `tokenizer.json`'s added tokens: those `special(type, token)` names, special or not.
fn added_tokens(tokens: &[&str], types: &[i64], special: impl Fn(i64, &str) -> Option<bool>) -> Vec<Value> {
    tokens
        .iter()
        .zip(types)
        .enumerate()
        .filter_map(|(id, (token, &kind))| {
            let special = special(kind, token)?;
            Some(json!({
                "id": id, "content": token, "single_word": false, "lstrip": false, "rstrip": false,
                "normalized": false, "special": special,
            }))
        })
        .collect()
}

/// The token types, one per token (empty when the file has none).
fn token_types(md: &Metadata<'_>, count: usize) -> Result<Vec<i64>> {
    let types = md.opt_i64_array("tokenizer.ggml.token_type")?.unwrap_or_default();
    if !types.is_empty() && types.len() != count {
        return Err(ModelIoError::invalid(
            md.path,
            "tokenizer.ggml.token_type",
            format!("{} entries for {} tokens", types.len(), count),
        ));
    }
    Ok(types)
}

/// SentencePiece BPE as transformers rebuilds it from a GGUF file (its `GGUFLlamaConverter`): every
/// split of a piece into two pieces is a merge, ranked by the whole piece's score.
fn sentencepiece_json(md: &Metadata<'_>, tokens: &[&str], types: &[i64]) -> Result<Value> {
    let scores = md.opt_f64_array("tokenizer.ggml.scores")?.ok_or_else(|| ModelIoError::MissingKey {
        path: md.path.to_path_buf(),
        key: "tokenizer.ggml.scores".into(),
    })?;
    if scores.len() != tokens.len() {
        return Err(ModelIoError::invalid(md.path, "tokenizer.ggml.scores", format!("{} entries for {} tokens", scores.len(), tokens.len())));
    }
    let prefix_space = md.opt_bool("tokenizer.ggml.add_space_prefix")?.unwrap_or(true);
    let mut vocab = Map::new();
    let mut ids = std::collections::HashMap::new();
    for (id, &t) in tokens.iter().enumerate() {
        vocab.insert(t.to_string(), json!(id));
        ids.entry(t).or_insert(id);
    }
    let merges: Vec<Value> = sentencepiece_merges(tokens, &scores, &ids).into_iter().map(|(a, b)| json!([a, b])).collect();
    let unk = md
        .opt_u32("tokenizer.ggml.unknown_token_id")?
        .and_then(|id| tokens.get(id as usize).copied())
        .or_else(|| types.iter().position(|&t| t == UNKNOWN).map(|i| tokens[i]));
    let added = added_tokens(tokens, types, |kind, _| match kind {
        CONTROL | UNKNOWN => Some(true),
        USER_DEFINED => Some(false),
        _ => None,
    });
    // Spaces become ▁ and one is put before the text (not after a special token, and not when the text
    // already starts with a space), as transformers' Metaspace does with prepend_scheme "first".
    let scheme = if prefix_space { "first" } else { "never" };
    let mut decoders = vec![
        json!({"type": "Replace", "pattern": {"String": SPACE.to_string()}, "content": " "}),
        json!({"type": "ByteFallback"}),
        json!({"type": "Fuse"}),
    ];
    if prefix_space {
        decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
    }
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "Metaspace", "replacement": SPACE.to_string(), "prepend_scheme": scheme, "split": false},
        "post_processor": null,
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": unk, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
            "ignore_merges": false, "vocab": vocab, "merges": merges,
        },
    }))
}

/// transformers' `generate_merges`: for each piece in vocabulary order, its splits into two pieces
/// (ordered by the two ids), then all of them by score, longer left and right parts first, stably.
pub fn sentencepiece_merges<'a>(tokens: &[&'a str], scores: &[f64], ids: &std::collections::HashMap<&str, usize>) -> Vec<(&'a str, &'a str)> {
    let mut merges: Vec<(&str, &str, f64, usize, usize)> = Vec::new();
    for (&piece, &score) in tokens.iter().zip(scores) {
        let mut local = Vec::new();
        for (at, _) in piece.char_indices().skip(1) {
            let (l, r) = piece.split_at(at);
            if let (Some(&li), Some(&ri)) = (ids.get(l), ids.get(r)) {
                local.push((li, ri, l, r));
            }
        }
        local.sort_by_key(|&(li, ri, _, _)| (li, ri));
        merges.extend(local.into_iter().map(|(_, _, l, r)| (l, r, score, l.chars().count(), r.chars().count())));
    }
    // Python's sorted(..., reverse=True) is stable: equal keys keep their order.
    merges.sort_by(|a, b| b.2.total_cmp(&a.2).then(b.3.cmp(&a.3)).then(b.4.cmp(&a.4)));
    merges.into_iter().map(|(l, r, ..)| (l, r)).collect()
}

fn byte_level_json(md: &Metadata<'_>, tokens: &[&str], types: &[i64]) -> Result<Value> {
    let pre = md.opt_str("tokenizer.ggml.pre")?.unwrap_or("default");
    let (normalizer, pre_tokenizer, ignore_merges) = splitting(pre).ok_or_else(|| {
        ModelIoError::invalid(
            md.path,
            "tokenizer.ggml.pre",
            format!("\"{pre}\" is not supported (supported: {SUPPORTED_PRE})"),
        )
    })?;
    let merges =
        md.opt_str_array("tokenizer.ggml.merges")?
            .ok_or_else(|| ModelIoError::MissingKey {
                path: md.path.to_path_buf(),
                key: "tokenizer.ggml.merges".into(),
            })?;

    let spelling = byte_to_char();
    let in_alphabet = |t: &str| t.chars().all(|c| spelling.contains(&c));
    let mut vocab = Map::new();
    for (id, token) in tokens.iter().enumerate() {
        // A token written in plain text (not in the byte alphabet) is respelled byte by byte.
        let spelled = if in_alphabet(token) {
            token.to_string()
        } else {
            token.bytes().map(|b| spelling[b as usize]).collect()
        };
        vocab.insert(spelled, json!(id));
    }
    let merges: Vec<Value> = merges
        .iter()
        .enumerate()
        .map(|(i, m)| match m.split_once(' ') {
            Some((a, b)) => Ok(json!([a, b])),
            None => Err(ModelIoError::invalid(
                md.path,
                format!("tokenizer.ggml.merges[{i}]"),
                format!("`{m}` is not two tokens separated by a space"),
            )),
        })
        .collect::<Result<_>>()?;
    let added = added_tokens(tokens, types, |kind, token| match kind {
        // A "control" token outside the byte alphabet is a converter mislabel (transformers skips it too).
        CONTROL if in_alphabet(token) => Some(true),
        USER_DEFINED => Some(false),
        _ => None,
    });

    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges,
        },
    }))
}

/// End-of-generation ids: eos, then end-of-turn / end-of-message where the file names them.
pub fn stop_ids(md: &Metadata<'_>) -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    for key in [
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id",
    ] {
        if let Some(id) = md.opt_u32(key)? {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    Ok(ids)
}
