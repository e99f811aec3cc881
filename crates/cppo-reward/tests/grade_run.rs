//! `grade::run` on in-memory input: one output line per input line, errors in place, a summary.

use cppo_core::Task;
use cppo_reward::grade::{run, GradeSummary};

fn grade(task: Task, input: &[u8]) -> (Vec<String>, GradeSummary) {
    let mut out = Vec::new();
    let summary = run(task, &mut &input[..], &mut out).expect("in-memory I/O cannot fail");
    let text = String::from_utf8(out).expect("output is UTF-8");
    (text.lines().map(str::to_string).collect(), summary)
}

#[test]
fn gsm8k_lines_in_order_with_errors_in_place() {
    let input = [
        r#"{"response": "<answer>18</answer>", "answer": "so\n#### 18"}"#,
        "{\"response\": \"I think 17\", \"answer\": \"#### 18\"}",
        "not json",
        "",
        r#"{"response": "x"}"#,
        r#"{"response": 5, "answer": "1"}"#,
        r#"{"response": "it is 27", "answer": 27}"#,
        r#"["response", "answer"]"#,
        "{\"response\": \"no digits\", \"answer\": \"#### 3\"}",
    ]
    .join("\n");
    let (lines, summary) = grade(Task::Gsm8k, input.as_bytes());
    assert_eq!(lines.len(), 9, "{lines:#?}");
    assert_eq!(lines[0], r#"{"correct":true,"extracted":"18","reward":1.0}"#);
    assert_eq!(lines[1], r#"{"correct":false,"extracted":"17","reward":0.0}"#);
    assert!(lines[2].starts_with(r#"{"error":"line 3: invalid JSON"#), "{}", lines[2]);
    assert_eq!(lines[3], r#"{"error":"line 4: empty line"}"#);
    assert_eq!(lines[4], r#"{"error":"line 5: missing field `answer`"}"#);
    assert_eq!(lines[5], r#"{"error":"line 6: field `response` must be a string"}"#);
    assert_eq!(lines[6], r#"{"correct":true,"extracted":"27","reward":1.0}"#);
    assert_eq!(lines[7], r#"{"error":"line 8: expected a JSON object"}"#);
    assert_eq!(lines[8], r#"{"correct":false,"extracted":null,"reward":0.0}"#);
    assert_eq!(summary, GradeSummary { lines: 9, correct: 2, errors: 5 });
    assert_eq!(summary.to_string(), "graded 9 lines: 2 correct (22.2%), 5 errors");
}

#[test]
fn math_lines_and_odd_bytes() {
    let mut input = Vec::new();
    input.extend_from_slice(br#"{"response": "so \\boxed{\\frac12}", "answer": "0.5"}"#);
    input.extend_from_slice(b"\r\n");
    input.extend_from_slice(b"\xff\xfe not utf8\n");
    input.extend_from_slice(br#"{"response": "\\boxed{(1,2)}", "answer": "the answer is $\\boxed{[1,2]}$"}"#);
    input.push(b'\n');
    let (lines, summary) = grade(Task::Math, &input);
    assert_eq!(lines[0], r#"{"correct":true,"extracted":"\\frac{1}{2}","reward":1.0}"#);
    assert!(lines[1].starts_with(r#"{"error":"line 2: not UTF-8"#), "{}", lines[1]);
    assert_eq!(lines[2], r#"{"correct":false,"extracted":"(1,2)","reward":0.0}"#);
    assert_eq!(summary.to_string(), "graded 3 lines: 1 correct (33.3%), 1 error");
}

#[test]
fn empty_input_grades_nothing() {
    let (lines, summary) = grade(Task::Gsm8k, b"");
    assert!(lines.is_empty());
    assert_eq!(summary.to_string(), "graded 0 lines: 0 correct (0.0%), 0 errors");
    let (_, one) = grade(Task::Gsm8k, br#"{"response": "1", "answer": "1"}"#);
    assert_eq!(one.to_string(), "graded 1 line: 1 correct (100.0%), 0 errors");
}
