//! Parquet files written by the test itself (the shapes the Hub's dataset repositories have) read into
//! problems: field names from the spec, numbers as answers, ids from a field or the row, shards of one
//! split numbered on, and bad input named by file, row and field.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use cppo_data::{load_file, load_parquet, load_split_files, DataError, Dataset, JsonlSpec, Task};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

/// Writes `columns` as a parquet file, `rows_per_group` rows per row group (several batches to read),
/// snappy-compressed as `datasets` writes them.
fn write_parquet(path: &Path, columns: Vec<(&str, ArrayRef)>, rows_per_group: usize) {
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_size(rows_per_group)
        .build();
    let mut writer = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

fn strings(values: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from(values.to_vec()))
}

#[test]
fn rows_become_problems_with_the_specs_fields() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test-00000-of-00001.parquet");
    write_parquet(
        &path,
        vec![
            ("id", Arc::new(Int64Array::from(vec![7, 8, 9])) as ArrayRef),
            ("question", strings(&["What is 2+2?", "What is 3*9?", "Half of 5?"])),
            ("answer", Arc::new(Float64Array::from(vec![4.0, 27.0, 2.5])) as ArrayRef),
            ("url", strings(&["u1", "u2", "u3"])),
        ],
        2,
    );
    let spec = JsonlSpec::new("question", "answer", Task::Math).with_id_field("id");
    let problems = load_parquet(&path, &spec).unwrap();
    let got: Vec<(&str, &str, &str)> = problems.iter().map(|p| (p.id.as_str(), p.prompt.as_str(), p.answer.as_str())).collect();
    assert_eq!(got, vec![("7", "What is 2+2?", "4"), ("8", "What is 3*9?", "27"), ("9", "Half of 5?", "2.5")]);
    assert_eq!(problems[1].record["url"], "u2", "the whole row is kept");
    assert_eq!(problems[0].task, Task::Math);
    // Without an id field, ids are the file and the row, from 1, as lines are.
    let no_id = load_file(&path, &JsonlSpec::new("question", "answer", Task::Gsm8k)).unwrap();
    assert_eq!(no_id[2].id, format!("{}:3", path.display()));
}

#[test]
fn bad_rows_are_errors_naming_file_row_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.parquet");
    write_parquet(
        &path,
        vec![
            ("problem", strings(&["ok", "also ok", "third"])),
            ("answer", Arc::new(StringArray::from(vec![Some("1"), Some("2"), None])) as ArrayRef),
        ],
        10,
    );
    let err = load_parquet(&path, &JsonlSpec::new("problem", "answer", Task::Math)).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, DataError::Field { line: 3, .. }), "{text}");
    assert!(text.contains("bad.parquet:3") && text.contains("\"answer\"") && text.contains("null"), "{text}");
    let err = load_parquet(&path, &JsonlSpec::new("question", "answer", Task::Math)).unwrap_err();
    assert!(err.to_string().contains("\"question\": missing") && err.to_string().contains("bad.parquet:1"), "{err}");

    let junk = dir.path().join("junk.parquet");
    std::fs::write(&junk, b"this is not parquet at all").unwrap();
    let err = load_parquet(&junk, &JsonlSpec::new("problem", "answer", Task::Math)).unwrap_err();
    assert!(matches!(err, DataError::Parquet { .. }) && err.to_string().contains("junk.parquet"), "{err}");
}

fn gsm8k_shard(dir: &Path, name: &str, first: usize, n: usize) -> PathBuf {
    let path = dir.join(name);
    let questions: Vec<String> = (first..first + n).map(|i| format!("Question {i}?")).collect();
    let answers: Vec<String> = (first..first + n).map(|i| format!("Work.\n#### {i}")).collect();
    write_parquet(
        &path,
        vec![
            ("question", Arc::new(StringArray::from(questions)) as ArrayRef),
            ("answer", Arc::new(StringArray::from(answers)) as ArrayRef),
        ],
        3,
    );
    path
}

#[test]
fn the_shards_of_a_split_read_as_one_set_numbered_on() {
    let dir = tempfile::tempdir().unwrap();
    let files = vec![
        gsm8k_shard(dir.path(), "train-00000-of-00002.parquet", 0, 4),
        gsm8k_shard(dir.path(), "train-00001-of-00002.parquet", 4, 3),
    ];
    let problems = Dataset::Gsm8kTrain.load_hub_files(&files).unwrap();
    assert_eq!(problems.len(), 7);
    let ids: Vec<&str> = problems.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["gsm8k:train:1", "gsm8k:train:2", "gsm8k:train:3", "gsm8k:train:4", "gsm8k:train:5", "gsm8k:train:6", "gsm8k:train:7"]);
    assert_eq!(problems[5].prompt, "Question 5?");
    assert_eq!(problems[5].task, Task::Gsm8k);
    let generic = load_split_files(&files, &JsonlSpec::new("question", "answer", Task::Gsm8k), "mine", "").unwrap();
    assert_eq!(generic[6].id, "mine:7");
}

#[test]
fn built_in_sets_read_their_hub_repositories_fields() {
    let dir = tempfile::tempdir().unwrap();
    // AIME 2024 as HuggingFaceH4/aime_2024 has it: an integer id, answers as strings.
    let aime = dir.path().join("aime.parquet");
    write_parquet(
        &aime,
        vec![
            ("id", Arc::new(Int64Array::from(vec![60, 61])) as ArrayRef),
            ("problem", strings(&["p60", "p61"])),
            ("solution", strings(&["s60", "s61"])),
            ("answer", strings(&["204", "113"])),
            ("url", strings(&["a", "b"])),
            ("year", strings(&["2024", "2024"])),
        ],
        10,
    );
    let got = Dataset::Aime24.load_hub_files(&[aime]).unwrap();
    assert_eq!((got[0].id.as_str(), got[0].prompt.as_str(), got[1].answer.as_str()), ("aime24:60", "p60", "113"));
    // AMC 2023 as math-ai/amc23 has it: the problem in `question`, float answers.
    let amc = dir.path().join("amc.parquet");
    write_parquet(
        &amc,
        vec![("question", strings(&["q0", "q1"])), ("answer", Arc::new(Float64Array::from(vec![27.0, 0.5])) as ArrayRef)],
        10,
    );
    let got = Dataset::Amc23.load_hub_files(&[amc]).unwrap();
    assert_eq!((got[0].id.as_str(), got[0].answer.as_str(), got[1].answer.as_str()), ("amc23:1", "27", "0.5"));
    assert_eq!(got[0].task, Task::Math);
    // MATH-500 is a JSON-lines file in its repository.
    let m500 = dir.path().join("test.jsonl");
    std::fs::write(&m500, "{\"problem\": \"p\", \"solution\": \"s\", \"answer\": \"\\\\frac12\", \"unique_id\": \"test/x/1.json\"}\n").unwrap();
    let got = Dataset::Math500.load_hub_files(&[m500]).unwrap();
    assert_eq!((got[0].id.as_str(), got[0].answer.as_str()), ("test/x/1.json", "\\frac12"));
    for d in Dataset::ALL {
        let source = d.hub_source();
        assert!(source.name.contains('/') && source.name.contains(':'), "{d}: {}", source.name);
    }
}
