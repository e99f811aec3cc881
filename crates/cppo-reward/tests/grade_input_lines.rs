//! `grade::run` reads each line's two fields without a JSON tree: the verdicts and the error messages
//! are those of reading the line as a JSON value.

use cppo_core::Task;
use cppo_reward::grade::run;

fn grade(input: &str) -> Vec<String> {
    let mut out = Vec::new();
    run(Task::Gsm8k, &mut input.as_bytes(), &mut out).expect("in-memory I/O cannot fail");
    String::from_utf8(out).expect("UTF-8").lines().map(str::to_string).collect()
}

#[test]
fn fields_in_any_order_and_form() {
    let lines = grade(
        &[
            r#"{"answer": 2.5, "id": [1, {"x": null}], "response": "so 2.5"}"#,
            r#"{"response": "it is \u0031\u0038", "answer": "18", "extra": {"answer": 3}}"#,
            r#"{"response": "7", "answer": "1", "answer": "7"}"#,
            r#"  {"response": "-3", "answer": -3}  "#,
        ]
        .join("\n"),
    );
    assert_eq!(lines[0], r#"{"correct":true,"extracted":"2.5","reward":1.0}"#);
    assert_eq!(lines[1], r#"{"correct":true,"extracted":"18","reward":1.0}"#);
    // A repeated key keeps its last value, as a JSON map does.
    assert_eq!(lines[2], r#"{"correct":true,"extracted":"7","reward":1.0}"#);
    assert_eq!(lines[3], r#"{"correct":true,"extracted":"-3","reward":1.0}"#);
}

#[test]
fn values_that_are_not_objects_and_fields_of_the_wrong_kind() {
    let lines = grade(&["5", "\"text\"", "null", "[1, 2]", "{\"response\": \"1\", \"answer\": 1} trailing", r#"{"response": null, "answer": "1"}"#, r#"{"response": "1", "answer": [1]}"#, r#"{"response": "1", "answer": {"a": 1}}"#, "{\"response\": \"1\""].join("\n"));
    for (i, line) in lines.iter().enumerate().take(4) {
        assert_eq!(*line, format!(r#"{{"error":"line {}: expected a JSON object"}}"#, i + 1));
    }
    assert!(lines[4].starts_with(r#"{"error":"line 5: invalid JSON: trailing characters"#), "{}", lines[4]);
    assert_eq!(lines[5], r#"{"error":"line 6: field `response` must be a string"}"#);
    assert_eq!(lines[6], r#"{"error":"line 7: field `answer` must be a string or a number"}"#);
    assert_eq!(lines[7], r#"{"error":"line 8: field `answer` must be a string or a number"}"#);
    assert!(lines[8].starts_with(r#"{"error":"line 9: invalid JSON: EOF while parsing"#), "{}", lines[8]);
}
