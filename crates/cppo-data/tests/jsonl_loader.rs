//! The generic JSON-lines loader: field names, ids, blank lines, and errors that say file, line and field.

use std::io::Write;
use std::path::PathBuf;

use cppo_data::{load_jsonl, JsonlSpec, Task};
use tempfile::TempDir;

fn write(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    path
}

fn spec() -> JsonlSpec {
    JsonlSpec::new("q", "a", Task::Math)
}

fn error_of(text: &str, spec: &JsonlSpec) -> (String, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "x.jsonl", text);
    let err = load_jsonl(&path, spec)
        .expect_err("expected the file to be rejected")
        .to_string();
    (err, path)
}

#[test]
fn reads_configured_fields_and_skips_blank_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "mine.jsonl",
        "{\"q\": \"one?\", \"a\": \"1\"}\n\n   \n{\"q\": \"two?\", \"a\": 2, \"x\": true}\r\n",
    );
    let problems = load_jsonl(&path, &spec()).unwrap();
    assert_eq!(problems.len(), 2);
    assert_eq!(problems[0].prompt, "one?");
    assert_eq!(problems[0].answer, "1");
    assert_eq!(problems[1].prompt, "two?");
    assert_eq!(problems[1].answer, "2");
    assert_eq!(problems[1].record["x"], serde_json::json!(true));
    assert!(problems.iter().all(|p| p.task == Task::Math));
    // Without an id field the id is path:line, counting blank lines.
    assert_eq!(problems[0].id, format!("{}:1", path.display()));
    assert_eq!(problems[1].id, format!("{}:4", path.display()));
}

#[test]
fn id_field_accepts_strings_and_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "ids.jsonl",
        "{\"q\": \"a\", \"a\": \"1\", \"k\": \"p-1\"}\n{\"q\": \"b\", \"a\": 1.5, \"k\": 7}\n",
    );
    let problems = load_jsonl(&path, &spec().with_id_field("k")).unwrap();
    assert_eq!(problems[0].id, "p-1");
    assert_eq!(problems[1].id, "7");
    assert_eq!(problems[1].answer, "1.5");
}

#[test]
fn whole_float_answers_lose_the_fraction() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "f.jsonl",
        "{\"q\": \"a\", \"a\": 27.0}\n{\"q\": \"b\", \"a\": -3.0}\n{\"q\": \"c\", \"a\": 1e3}\n",
    );
    let answers: Vec<String> = load_jsonl(&path, &spec())
        .unwrap()
        .into_iter()
        .map(|p| p.answer)
        .collect();
    assert_eq!(answers, ["27", "-3", "1000"]);
}

#[test]
fn wrong_type_names_file_line_and_field() {
    let (err, path) = error_of(
        "{\"q\": \"fine\", \"a\": \"1\"}\n\n{\"q\": null, \"a\": \"1\"}\n",
        &spec(),
    );
    assert_eq!(
        err,
        format!(
            "{}:3: field \"q\": expected a string or a list of chat messages, got null",
            path.display()
        )
    );
}

#[test]
fn missing_field_names_file_line_and_field() {
    let (err, path) = error_of("{\"q\": \"fine\"}\n", &spec());
    assert_eq!(err, format!("{}:1: field \"a\": missing", path.display()));
}

#[test]
fn answer_of_wrong_type_says_what_is_allowed() {
    let (err, path) = error_of("{\"q\": \"x\", \"a\": [1]}\n", &spec());
    assert_eq!(
        err,
        format!(
            "{}:1: field \"a\": expected a string or a number, got an array",
            path.display()
        )
    );
}

#[test]
fn empty_prompt_is_rejected() {
    let (err, path) = error_of("{\"q\": \"  \", \"a\": \"1\"}\n", &spec());
    assert!(
        err.starts_with(&format!("{}:1: field \"q\": ", path.display())),
        "{err}"
    );
    assert!(err.contains("empty"), "{err}");
}

#[test]
fn missing_id_field_is_an_error_when_asked_for() {
    let (err, path) = error_of(
        "{\"q\": \"x\", \"a\": \"1\"}\n",
        &spec().with_id_field("id"),
    );
    assert_eq!(err, format!("{}:1: field \"id\": missing", path.display()));
}

#[test]
fn invalid_json_names_file_and_line() {
    let (err, path) = error_of(
        "{\"q\": \"a\", \"a\": \"1\"}\n{\"q\": \"a\", \"a\": \n",
        &spec(),
    );
    let prefix = format!("{}:2: not valid JSON: ", path.display());
    assert!(err.starts_with(&prefix), "{err}");
    assert!(
        !err.contains("line 1"),
        "the position inside the line must not look like a file line: {err}"
    );
}

#[test]
fn non_object_line_is_rejected() {
    let (err, path) = error_of("[1, 2]\n", &spec());
    assert_eq!(
        err,
        format!("{}:1: expected a JSON object, got an array", path.display())
    );
}

#[test]
fn invalid_utf8_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(
        &path,
        b"{\"q\": \"a\", \"a\": \"1\"}\n{\"q\": \"\xff\", \"a\": \"1\"}\n",
    )
    .unwrap();
    let err = load_jsonl(&path, &spec()).unwrap_err().to_string();
    assert_eq!(err, format!("{}:2: not valid UTF-8", path.display()));
}

#[test]
fn missing_file_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.jsonl");
    let err = load_jsonl(&path, &spec()).unwrap_err().to_string();
    assert!(err.starts_with(&path.display().to_string()), "{err}");
}

#[test]
fn spec_reads_from_toml_like_json_and_rejects_unknown_keys() {
    let spec: JsonlSpec = serde_json::from_str(
        r#"{"prompt_field": "question", "answer_field": "answer", "task": "gsm8k"}"#,
    )
    .unwrap();
    assert_eq!(spec, JsonlSpec::new("question", "answer", Task::Gsm8k));
    let bad = serde_json::from_str::<JsonlSpec>(
        r#"{"prompt_field": "q", "answer_field": "a", "task": "math", "idfield": "x"}"#,
    );
    assert!(bad.unwrap_err().to_string().contains("idfield"));
}
