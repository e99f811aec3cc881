//! Prompt presets render the messages the CPPO recipes send, and user templates are checked strictly.

use cppo_data::{
    ChatMessage, DataError, Problem, PromptTemplate, Task, PRESET_NAMES, R1_THINK_SYSTEM,
};

fn problem(prompt: &str) -> Problem {
    Problem {
        id: "t".into(),
        prompt: prompt.into(),
        answer: "1".into(),
        task: Task::Gsm8k,
        record: serde_json::Value::Null,
        messages: None,
        prompt_field: None,
    }
}

#[test]
fn r1_think_is_cppos_gsm8k_system_prompt_then_the_bare_question() {
    let messages = PromptTemplate::preset("r1-think")
        .unwrap()
        .messages(&problem("What is 2 + 2?"));
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].role, "system");
    assert_eq!(messages[0].content, R1_THINK_SYSTEM);
    assert!(R1_THINK_SYSTEM.starts_with("A conversation between User and Assistant. The user asks a question, and the Assistant solves it."));
    assert!(R1_THINK_SYSTEM
        .ends_with("<think> reasoning process here </think>\n<answer> answer here </answer>."));
    assert_eq!(messages[1], ChatMessage::user("What is 2 + 2?"));
}

#[test]
fn r1_math_keeps_the_published_wording() {
    let t = PromptTemplate::preset("r1-math").unwrap();
    let system = t.system().unwrap();
    assert!(system
        .contains("'Therefore, the final answer is: $\\boxed{{ANSWER}}$. I hope it is correct'"));
    assert_eq!(t.render_user("Q"), "Q");
}

#[test]
fn plain_is_the_question_alone() {
    let messages = PromptTemplate::preset("plain")
        .unwrap()
        .messages(&problem("Solve x."));
    assert_eq!(messages, vec![ChatMessage::user("Solve x.")]);
}

#[test]
fn boxed_asks_for_a_boxed_answer_after_the_question() {
    let messages = PromptTemplate::preset("boxed")
        .unwrap()
        .messages(&problem("Solve x."));
    assert_eq!(
        messages,
        vec![ChatMessage::user(
            "Solve x.\nPlease reason step by step, and put your final answer within \\boxed{}."
        )]
    );
}

#[test]
fn every_preset_name_resolves_and_unknown_ones_are_listed() {
    for name in PRESET_NAMES {
        let t: PromptTemplate = name.parse().unwrap();
        assert!(t.render_user("QQ").contains("QQ"), "{name}");
    }
    let err = PromptTemplate::preset("r2").unwrap_err();
    assert!(matches!(err, DataError::UnknownPreset(..)));
    assert!(err.to_string().contains("r1-think"));
}

#[test]
fn user_template_substitutes_every_question_and_unescapes_braces() {
    let t = PromptTemplate::new(
        Some("sys {x}".into()),
        "Q: {question}\n{{note}} {question}!",
    )
    .unwrap();
    // The system prompt is verbatim: its braces are not placeholders.
    let messages = t.messages(&problem("2+2"));
    assert_eq!(messages[0], ChatMessage::system("sys {x}"));
    assert_eq!(messages[1].content, "Q: 2+2\n{note} 2+2!");
}

#[test]
fn questions_containing_braces_are_inserted_verbatim() {
    let t = PromptTemplate::new(None, "{question}").unwrap();
    assert_eq!(
        t.render_user("\\frac{1}{2} {question}"),
        "\\frac{1}{2} {question}"
    );
}

#[test]
fn unknown_placeholder_is_an_error_naming_it() {
    let err = PromptTemplate::new(None, "{questoin}")
        .unwrap_err()
        .to_string();
    assert!(err.contains("{questoin}"), "{err}");
    let err = PromptTemplate::new(None, "{question} {answer}")
        .unwrap_err()
        .to_string();
    assert!(err.contains("{answer}"), "{err}");
}

#[test]
fn lone_braces_and_missing_question_are_errors() {
    for bad in [
        "{question} \\boxed{}",
        "{question} }",
        "{question} {",
        "no placeholder",
        "{{question}}",
    ] {
        assert!(
            PromptTemplate::new(None, bad).is_err(),
            "{bad:?} should be rejected"
        );
    }
}

#[test]
fn templates_deserialise_with_validation() {
    let t: PromptTemplate = serde_json::from_str(r#"{"user": "Question: {question}"}"#).unwrap();
    assert_eq!(t.system(), None);
    assert_eq!(t.render_user("x"), "Question: x");
    assert!(serde_json::from_str::<PromptTemplate>(r#"{"user": "{q}"}"#).is_err());
    let back: PromptTemplate = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
    assert_eq!(back, t);
}
