//! The SmolLM2 GGUF's tokenizer and chat template against transformers' output
//! (testdata/golden/smollm2-135m-instruct.json, see its README.md).

use cppo_io::{fetch, gguf, ChatMessage};
use serde::Deserialize;

const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../testdata/golden/smollm2-135m-instruct.json"
);

#[derive(Deserialize)]
struct Golden {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    messages: Vec<ChatMessage>,
    prompt_text: String,
    prompt_ids: Vec<u32>,
    greedy_32: Vec<u32>,
    greedy_32_text: String,
    completion_text: String,
    completion_ids: Vec<u32>,
}

fn golden() -> Golden {
    let text = std::fs::read_to_string(GOLDEN)
        .unwrap_or_else(|e| panic!("golden file {GOLDEN} is missing ({e}); see testdata/golden/README.md"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{GOLDEN}: {e}"))
}

#[test]
fn chat_template_tokens_and_decoding_match_transformers() {
    let path = fetch::smollm2_135m_instruct_gguf().expect("fetch the SmolLM2 GGUF");
    let tok = gguf::load_gguf_tokenizer(&path).expect("tokenizer from GGUF metadata");
    let golden = golden();
    assert!(
        golden.cases.len() >= 3,
        "expected at least three golden cases"
    );
    for (i, case) in golden.cases.iter().enumerate() {
        let text = tok.render(&case.messages, true).expect("render");
        assert_eq!(text, case.prompt_text, "case {i}: rendered prompt");
        assert_eq!(
            tok.encode(&text).expect("encode"),
            case.prompt_ids,
            "case {i}: prompt ids"
        );
        assert_eq!(
            tok.decode(&case.greedy_32, false).expect("decode"),
            case.greedy_32_text,
            "case {i}: greedy text"
        );
        assert_eq!(
            tok.encode(&case.completion_text).expect("encode"),
            case.completion_ids,
            "case {i}: completion ids"
        );
        // Decoding the prompt gives back the text (byte-level BPE is lossless).
        assert_eq!(
            tok.decode(&case.prompt_ids, false).expect("decode"),
            case.prompt_text,
            "case {i}: round trip"
        );
    }
}

#[test]
fn special_tokens_and_stop_ids_come_from_the_gguf() {
    let path = fetch::smollm2_135m_instruct_gguf().expect("fetch the SmolLM2 GGUF");
    let tok = gguf::load_gguf_tokenizer(&path).expect("tokenizer from GGUF metadata");
    assert_eq!(tok.token_to_id("<|im_start|>"), Some(1));
    assert_eq!(tok.token_to_id("<|im_end|>"), Some(2));
    assert_eq!(tok.id_to_token(2).as_deref(), Some("<|im_end|>"));
    assert_eq!(tok.eos_token_ids(), &[2]);
    assert_eq!(tok.bos_token_id(), Some(1));
    assert!(tok.is_special(2) && !tok.is_special(198));
    assert_eq!(tok.vocab_size(), 49152);
    // Special tokens in text are single ids; skip_special drops them when decoding.
    let ids = tok
        .encode("<|im_start|>user\nhi<|im_end|>")
        .expect("encode");
    assert_eq!(ids.first(), Some(&1));
    assert_eq!(ids.last(), Some(&2));
    assert_eq!(tok.decode(&ids, true).expect("decode"), "user\nhi");
    // SmolLM2 was trained with every digit a token of its own.
    let digits = tok.encode("2024").expect("encode");
    assert_eq!(digits.len(), 4);
}
