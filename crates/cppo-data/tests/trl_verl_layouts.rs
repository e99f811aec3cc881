//! Datasets as TRL and verl users have them: TRL's standard (`prompt` a string) and conversational
//! (`prompt` a list of messages) formats with their own columns, and verl's parquet layout
//! (`data_source`, `prompt` as messages, `ability`, `reward_model.ground_truth`, `extra_info`), read with
//! no field names given; every other column kept unchanged for the reward functions.

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder, StructBuilder};
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, StructArray};
use arrow_schema::{DataType, Field, Fields};
use cppo_data::{load_file, task_of_data_source, JsonlSpec, Task};
use parquet::arrow::ArrowWriter;
use serde_json::json;

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn trl_standard_rows_need_no_field_names_and_keep_their_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "countdown.jsonl", concat!(
        r#"{"prompt": "Reach 24 with 3 8", "target": 24, "nums": [3, 8], "meta": {"level": {"n": 2}}}"#, "\n",
        r#"{"prompt": "Reach 5 with 2 3", "target": 5, "nums": [2, 3]}"#, "\n",
    ));
    let problems = load_file(&path, &JsonlSpec::prompt_only("prompt")).unwrap();
    assert_eq!(problems.len(), 2);
    let p = &problems[0];
    assert_eq!((p.prompt.as_str(), p.answer.as_str(), p.messages.is_none()), ("Reach 24 with 3 8", "", true));
    let columns = p.columns();
    assert_eq!(columns.keys().collect::<Vec<_>>(), ["meta", "nums", "target"], "every column but the prompt");
    assert_eq!(columns["meta"], json!({"level": {"n": 2}}));
    assert_eq!(problems[1].columns()["nums"], json!([2, 3]));
}

#[test]
fn trl_conversational_rows_keep_their_messages() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "chat.jsonl", concat!(
        r#"{"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}], "solution": "4"}"#, "\n",
    ));
    let mut spec = JsonlSpec::prompt_only("prompt");
    spec.answer_field = Some("solution".into());
    spec.task = Some(Task::Gsm8k);
    let p = &load_file(&path, &spec).unwrap()[0];
    let messages = p.messages.as_ref().unwrap();
    assert_eq!(messages.iter().map(|m| (m.role.as_str(), m.content.as_str())).collect::<Vec<_>>(), [("system", "Be brief."), ("user", "2+2?")]);
    assert_eq!((p.prompt.as_str(), p.answer.as_str(), p.task), ("2+2?", "4", Task::Gsm8k));
}

#[test]
fn a_malformed_conversation_is_named_by_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    for (text, expected) in [
        (r#"{"prompt": [{"role": "user"}]}"#, "field \"prompt\": message 0: expected an object with string \"role\" and \"content\""),
        (r#"{"prompt": []}"#, "field \"prompt\": expected a non-empty list of chat messages"),
        (r#"{"prompt": 3}"#, "field \"prompt\": expected a string or a list of chat messages, got a number"),
    ] {
        let path = write(dir.path(), "bad.jsonl", &format!("\n{text}\n"));
        let e = load_file(&path, &JsonlSpec::prompt_only("prompt")).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:2: ", path.display())) && e.contains(expected), "{e}");
    }
}

#[test]
fn a_named_answer_path_must_be_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "x.jsonl", r#"{"prompt": "q", "reward_model": {"style": "rule"}}"#);
    let mut spec = JsonlSpec::prompt_only("prompt");
    spec.answer_field = Some("reward_model.ground_truth".into());
    let e = load_file(&path, &spec).unwrap_err().to_string();
    assert!(e.contains(":1: field \"reward_model.ground_truth\": missing"), "{e}");
}

/// A verl-layout parquet file, as verl's data preprocessing scripts write them.
fn write_verl_parquet(path: &Path) {
    let message = Fields::from(vec![Field::new("content", DataType::Utf8, true), Field::new("role", DataType::Utf8, true)]);
    let mut prompt = ListBuilder::new(StructBuilder::from_fields(message, 4));
    for turns in [&[("system", "Think first."), ("user", "Natalia sold 48 clips... How many?")][..], &[("user", "Reach 24 with 3 8 1")][..], &[("user", "Find x: 2x = 6")][..]] {
        for (role, content) in turns {
            let s = prompt.values();
            s.field_builder::<StringBuilder>(0).unwrap().append_value(content);
            s.field_builder::<StringBuilder>(1).unwrap().append_value(role);
            s.append(true);
        }
        prompt.append(true);
    }
    let reward_model = StructArray::from(vec![
        (Arc::new(Field::new("ground_truth", DataType::Utf8, true)), Arc::new(StringArray::from(vec!["72", "24", "3"])) as ArrayRef),
        (Arc::new(Field::new("style", DataType::Utf8, true)), Arc::new(StringArray::from(vec!["rule"; 3])) as ArrayRef),
    ]);
    let extra_info = StructArray::from(vec![
        (Arc::new(Field::new("index", DataType::Int64, true)), Arc::new(Int64Array::from(vec![0, 1, 2])) as ArrayRef),
        (Arc::new(Field::new("split", DataType::Utf8, true)), Arc::new(StringArray::from(vec!["train"; 3])) as ArrayRef),
    ]);
    let batch = RecordBatch::try_from_iter(vec![
        ("data_source", Arc::new(StringArray::from(vec!["openai/gsm8k", "countdown", "lighteval/MATH"])) as ArrayRef),
        ("prompt", Arc::new(prompt.finish()) as ArrayRef),
        ("ability", Arc::new(StringArray::from(vec!["math"; 3])) as ArrayRef),
        ("reward_model", Arc::new(reward_model) as ArrayRef),
        ("extra_info", Arc::new(extra_info) as ArrayRef),
    ])
    .unwrap();
    let mut writer = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

#[test]
fn verl_parquet_reads_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train.parquet");
    write_verl_parquet(&path);
    let problems = load_file(&path, &JsonlSpec::prompt_only("prompt")).unwrap();
    assert_eq!(problems.len(), 3);
    let [gsm, countdown, math] = [&problems[0], &problems[1], &problems[2]];
    assert_eq!(gsm.messages.as_ref().unwrap().len(), 2);
    assert_eq!((gsm.prompt.as_str(), gsm.answer.as_str(), gsm.task), ("Natalia sold 48 clips... How many?", "72", Task::Gsm8k));
    assert_eq!((math.answer.as_str(), math.task), ("3", Task::Math), "data_source picks the built-in grader");
    assert_eq!(countdown.answer, "24");
    let columns = countdown.columns();
    assert_eq!(columns.keys().collect::<Vec<_>>(), ["ability", "data_source", "extra_info", "reward_model"]);
    assert_eq!(columns["reward_model"], json!({"ground_truth": "24", "style": "rule"}));
    assert_eq!(columns["extra_info"], json!({"index": 1, "split": "train"}));
}

#[test]
fn data_sources_name_the_graders_verl_dispatches_them_to() {
    assert_eq!(task_of_data_source("openai/gsm8k"), Some(Task::Gsm8k));
    for s in ["lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500", "math_dapo", "aime2024", "numina_olympiads"] {
        assert_eq!(task_of_data_source(s), Some(Task::Math), "{s}");
    }
    for s in ["countdown", "codecontests", "searchR1_nq", ""] {
        assert_eq!(task_of_data_source(s), None, "{s}");
    }
}
