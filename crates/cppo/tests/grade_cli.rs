//! `cppo grade` end to end: the built binary on the example files and on standard input.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn example(name: &str) -> String {
    format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn cppo(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cppo"))
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the cppo binary starts");
    if let Some(text) = stdin {
        child.stdin.take().expect("piped stdin").write_all(text.as_bytes()).expect("stdin accepts the input");
    }
    child.wait_with_output().expect("the cppo binary finishes")
}

fn lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

#[test]
fn grades_the_gsm8k_example() {
    let out = cppo(&["grade", "--task", "gsm8k", "--input", &example("grade-gsm8k.jsonl")], None);
    assert!(out.status.success(), "exit {:?}: {}", out.status, stderr(&out));
    let got = lines(&out);
    let expected = [
        r#"{"correct":true,"extracted":"18","reward":1.0}"#,
        r#"{"correct":true,"extracted":"1000","reward":1.0}"#,
        r#"{"correct":false,"extracted":"17","reward":0.0}"#,
        r#"{"correct":true,"extracted":"70000","reward":1.0}"#,
        r#"{"correct":true,"extracted":"3","reward":1.0}"#,
        r#"{"error":"line 6: invalid JSON: EOF while parsing a string at line 1 column 26"}"#,
        r#"{"correct":true,"extracted":"-5","reward":1.0}"#,
        r#"{"correct":false,"extracted":null,"reward":0.0}"#,
        r#"{"correct":true,"extracted":"2.5","reward":1.0}"#,
    ];
    assert_eq!(got, expected);
    assert_eq!(stderr(&out), "graded 9 lines: 6 correct (66.7%), 1 error");
}

#[test]
fn grades_the_math_example() {
    let out = cppo(&["grade", "--task", "math", "--input", &example("grade-math.jsonl")], None);
    assert!(out.status.success(), "exit {:?}: {}", out.status, stderr(&out));
    let got = lines(&out);
    let expected = [
        r#"{"correct":true,"extracted":"\\frac{1}{2}","reward":1.0}"#,
        r#"{"correct":true,"extracted":"(3,\\frac{\\pi}{2})","reward":1.0}"#,
        r#"{"correct":true,"extracted":"2\\sqrt{2}","reward":1.0}"#,
        r#"{"correct":true,"extracted":"x=5","reward":1.0}"#,
        r#"{"correct":false,"extracted":"[0,\\infty)","reward":0.0}"#,
        r#"{"correct":true,"extracted":"2,1","reward":1.0}"#,
        r#"{"correct":true,"extracted":"5","reward":1.0}"#,
        r#"{"correct":false,"extracted":"\\frac{1}{3}","reward":0.0}"#,
        r#"{"correct":true,"extracted":"(x+1)^2","reward":1.0}"#,
        r#"{"correct":true,"extracted":"(B)","reward":1.0}"#,
        r#"{"correct":true,"extracted":"\\begin{pmatrix}1&0\\\\0&1\\end{pmatrix}","reward":1.0}"#,
        r#"{"correct":true,"extracted":"30","reward":1.0}"#,
    ];
    assert_eq!(got, expected);
    assert_eq!(stderr(&out), "graded 12 lines: 10 correct (83.3%), 0 errors");
}

#[test]
fn grades_standard_input() {
    let input = concat!(
        "{\"response\": \"<answer>1,000</answer>\", \"answer\": \"#### 1000\"}\n",
        "\n",
        "{\"response\": \"so 41\", \"answer\": 42}\n",
    );
    let out = cppo(&["grade", "--task", "gsm8k"], Some(input));
    assert!(out.status.success(), "exit {:?}: {}", out.status, stderr(&out));
    assert_eq!(
        lines(&out),
        [
            r#"{"correct":true,"extracted":"1000","reward":1.0}"#,
            r#"{"error":"line 2: empty line"}"#,
            r#"{"correct":false,"extracted":"41","reward":0.0}"#,
        ]
    );
    assert_eq!(stderr(&out), "graded 3 lines: 1 correct (33.3%), 1 error");

    let out = cppo(&["grade", "--task", "math"], Some("{\"response\": \"\\\\boxed{\\\\sqrt2}\", \"answer\": \"\\\\sqrt{2}\"}"));
    assert!(out.status.success(), "exit {:?}: {}", out.status, stderr(&out));
    assert_eq!(lines(&out), [r#"{"correct":true,"extracted":"\\sqrt{2}","reward":1.0}"#]);
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let out = cppo(&["grade", "--task", "gsm8k", "--input", &example("no-such-file.jsonl")], None);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("cannot open") && stderr(&out).contains("no-such-file.jsonl"), "{}", stderr(&out));
    let out = cppo(&["grade", "--task", "algebra"], Some(""));
    assert!(!out.status.success());
    assert!(stderr(&out).contains("unknown task `algebra`"), "{}", stderr(&out));
}
