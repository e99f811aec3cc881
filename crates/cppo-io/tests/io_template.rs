//! Chat templates render as transformers renders them (jinja2 with trim_blocks and lstrip_blocks, its
//! `tojson`, `raise_exception`, `strftime_now`, Python string methods). Expected strings were checked
//! against Python jinja2 3.1 with transformers' environment.

use cppo_io::chat_template::strftime;
use cppo_io::{ChatMessage, ChatTemplate, ChatTokenizer, SpecialTokens};

fn special() -> SpecialTokens {
    SpecialTokens {
        bos_token: Some("<s>".into()),
        eos_token: Some("</s>".into()),
        ..SpecialTokens::default()
    }
}

fn render(source: &str, messages: &[ChatMessage], add_generation_prompt: bool) -> String {
    ChatTemplate::new(source, "test")
        .unwrap()
        .render(messages, add_generation_prompt, &special())
        .unwrap()
}

fn msgs() -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", "  Be brief.  "),
        ChatMessage::new("user", "Hi <think>x</think>there"),
    ]
}

#[test]
fn block_tags_trim_their_newline_and_leading_indent() {
    let source = "{{ bos_token }}\n{% for m in messages %}\n    {% if m.role == 'user' %}\n[{{ m.role }}]{{ m.content }}\n    {% endif %}\n{% endfor %}\n{% if add_generation_prompt %}\nA:{% endif %}";
    assert_eq!(
        render(source, &msgs(), true),
        "<s>\n[user]Hi <think>x</think>there\nA:"
    );
    assert_eq!(
        render(source, &msgs(), false),
        "<s>\n[user]Hi <think>x</think>there\n"
    );
}

#[test]
fn python_string_methods_work() {
    let source = "{% for m in messages %}{{ m.content.strip() | upper }}|{{ m.content.split('</think>')[-1].lstrip() }}|{{ m.content.startswith('Hi') }}{% endfor %}";
    assert_eq!(
        render(source, &msgs(), false),
        "BE BRIEF.|Be brief.  |FalseHI <THINK>X</THINK>THERE|there|True"
    );
}

#[test]
fn namespace_loop_controls_and_reverse_iteration() {
    let source = "{% set ns = namespace(last_user=-1) %}{% for m in messages[::-1] %}{% if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% break %}{% endif %}{% endfor %}{{ ns.last_user }}{% for m in messages %}{% if loop.first %}{% continue %}{% endif %}{{ loop.index }}{% endfor %}";
    assert_eq!(render(source, &msgs(), false), "02");
}

#[test]
fn tojson_writes_python_json() {
    let source = "{{ {'name': 'f', 'params': {'x': 1, 'y': [1.5, 1e-05, none, true]}, 'text': 'é\"\n'} | tojson }}\n{{ {'b': 1, 'a': [1, 2]} | tojson(indent=2, sort_keys=true) }}";
    assert_eq!(
        render(source, &msgs(), false),
        "{\"name\": \"f\", \"params\": {\"x\": 1, \"y\": [1.5, 1e-05, null, true]}, \"text\": \"é\\\"\\n\"}\n{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": 1\n}"
    );
    let ascii = "{{ 'é🙂' | tojson(ensure_ascii=true) }}";
    assert_eq!(render(ascii, &msgs(), false), "\"\\u00e9\\ud83d\\ude42\"");
}

#[test]
fn raise_exception_fails_the_render_with_its_message() {
    let source = "{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with user') }}{% endif %}ok";
    let template = ChatTemplate::new(source, "test").unwrap();
    let err = template
        .render(&msgs(), false, &special())
        .unwrap_err()
        .to_string();
    assert!(err.contains("Conversation must start with user"), "{err}");
    assert_eq!(
        template.render(&msgs()[1..], false, &special()).unwrap(),
        "ok"
    );
}

#[test]
fn strftime_now_formats_todays_date() {
    let source = "{{ strftime_now('%d %b %Y') }}";
    let before = strftime::format(&strftime::now(), "%d %b %Y");
    let got = render(source, &msgs(), false);
    let after = strftime::format(&strftime::now(), "%d %b %Y");
    assert!(got == before || got == after, "{got}");
    // 2024-07-26 12:34:56 UTC was a Friday.
    let t = strftime::civil_time(1_721_997_296);
    assert_eq!(
        strftime::format(&t, "%d %b %Y|%A %B %j|%H:%M:%S %p %I|%y %e %%"),
        "26 Jul 2024|Friday July 208|12:34:56 PM 12|24 26 %"
    );
}

#[test]
fn generation_tags_render_their_body() {
    let source =
        "{% for m in messages %}{% generation %}{{ m.role }}{% endgeneration %};{% endfor %}";
    assert_eq!(render(source, &msgs(), false), "system;user;");
}

#[test]
fn syntax_errors_name_the_origin() {
    let err = ChatTemplate::new("{% for m in messages %}", "tokenizer_config.json")
        .unwrap_err()
        .to_string();
    assert!(err.contains("tokenizer_config.json"), "{err}");
}

#[test]
fn undefined_special_tokens_render_empty_and_missing_templates_are_an_error() {
    let source = "[{{ pad_token }}]{{ eos_token }}";
    assert_eq!(render(source, &msgs(), false), "[]</s>");
    let json = r#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,
        "pre_tokenizer":{"type":"WhitespaceSplit"},"post_processor":null,"decoder":null,
        "model":{"type":"WordLevel","vocab":{"<unk>":0,"a":1},"unk_token":"<unk>"}}"#;
    let tok = ChatTokenizer::parse_tokenizer_json(json, "t").unwrap();
    let tok = ChatTokenizer::new(tok, None, SpecialTokens::default(), &[]).unwrap();
    let err = tok.render(&msgs(), true).unwrap_err().to_string();
    assert!(err.contains("no chat template"), "{err}");
    assert_eq!(tok.encode("a b a").unwrap(), vec![1, 0, 1]);
}

#[test]
fn a_chat_tokenizer_can_be_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ChatTokenizer>();
    assert_send_sync::<cppo_io::LoadedModel>();
}

#[test]
fn special_tokens_must_exist() {
    let json = r#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,
        "pre_tokenizer":null,"post_processor":null,"decoder":null,
        "model":{"type":"WordLevel","vocab":{"<unk>":0},"unk_token":"<unk>"}}"#;
    let tok = ChatTokenizer::parse_tokenizer_json(json, "t").unwrap();
    let err = ChatTokenizer::new(tok, None, special(), &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("bos_token") && err.contains("<s>"), "{err}");
}

/// A Qwen3-style template (reasoning split out of `<think>`, tool turns merged, reverse scan with a
/// namespace) rendered for two conversations; the expected text was rendered by transformers.
#[test]
fn a_qwen3_style_template_renders_like_transformers() {
    let source = include_str!("io_fixtures/qwen3_style.jinja");
    let expected: serde_json::Value =
        serde_json::from_str(include_str!("io_fixtures/qwen3_style_expected.json")).unwrap();
    let m = ChatMessage::new;
    let convs = [
        vec![
            m("system", "You are terse."),
            m("user", "2+2?"),
            m("assistant", "<think>\nadd them\n</think>\n\n4"),
            m("user", "and 3+3?"),
        ],
        vec![
            m("user", "q"),
            m("assistant", "<think>r1</think>a1"),
            m("tool", "t1"),
            m("tool", "t2"),
            m("assistant", "final"),
        ],
    ];
    let mut i = 0;
    for conv in &convs {
        for add_generation_prompt in [true, false] {
            assert_eq!(
                render(source, conv, add_generation_prompt),
                expected["renders"][i].as_str().unwrap(),
                "render {i}"
            );
            i += 1;
        }
    }
}

#[test]
fn extra_template_variables_reach_the_template() {
    let source = include_str!("io_fixtures/qwen3_style.jinja");
    let template = ChatTemplate::new(source, "test").unwrap();
    let chat = [ChatMessage::new("user", "hi")];
    let mut extra = serde_json::Map::new();
    extra.insert("enable_thinking".into(), false.into());
    let off = template
        .render_with(&chat, true, &special(), &extra)
        .unwrap();
    assert_eq!(
        off,
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    );
    extra.insert("enable_thinking".into(), true.into());
    let on = template
        .render_with(&chat, true, &special(), &extra)
        .unwrap();
    assert_eq!(
        on,
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
}
