//! Every published set loads with the row count it should have. Where `CPPO_DATA_DIR` names the real
//! data folder (e.g. `CPPO_DATA_DIR=../shared/data cargo test -p cppo-data`), these are the real files
//! and the row counts their README states; elsewhere the same checks run on small files in the same
//! published formats that the test writes itself (each test prints which it read).

use std::collections::HashSet;
use std::path::Path;

use cppo_data::{DataRoot, Dataset, Task};

/// The folder the checks read, with the row count each set must have there.
struct Source {
    root: DataRoot,
    rows: Vec<(Dataset, usize)>,
    _fixture: Option<tempfile::TempDir>,
}

fn source() -> Source {
    if let Some(dir) = std::env::var_os("CPPO_DATA_DIR").filter(|v| !v.is_empty()) {
        let root = DataRoot::given(&dir);
        assert!(
            Path::new(&dir).join("README.md").is_file(),
            "CPPO_DATA_DIR={} is not the data folder (no README.md)",
            root.path.display()
        );
        eprintln!("reading the real data in {}", root.path.display());
        let rows = vec![
            (Dataset::Gsm8kTrain, 7473),
            (Dataset::Gsm8kTest, 1319),
            (Dataset::MathTrain, 7500),
            (Dataset::Math500, 500),
            (Dataset::Amc23, 40),
            (Dataset::Aime24, 30),
        ];
        return Source { root, rows, _fixture: None };
    }
    let dir = tempfile::tempdir().unwrap();
    let rows = Dataset::ALL.iter().map(|&d| (d, write_fixture(dir.path(), d))).collect();
    eprintln!("CPPO_DATA_DIR unset: reading small files in the published formats written to {}", dir.path().display());
    Source { root: DataRoot::given(dir.path()), rows, _fixture: Some(dir) }
}

/// Writes a few records of `dataset` with exactly the fields and value types its published file has;
/// returns how many.
fn write_fixture(root: &Path, dataset: Dataset) -> usize {
    let lines: Vec<String> = match dataset {
        Dataset::Gsm8kTrain | Dataset::Gsm8kTest => (0..3)
            .map(|i| {
                serde_json::json!({
                    "question": format!("Tom has {i} apples and buys 1,00{i} more. How many does he have?"),
                    "answer": format!("He has {i} + 100{i} = <<{i}+100{i}={}>>{} apples.\n#### {}", 1000 + 2 * i, 1000 + 2 * i, 1000 + 2 * i),
                })
                .to_string()
            })
            .collect(),
        Dataset::MathTrain => (0..3)
            .map(|i| {
                serde_json::json!({
                    "problem": format!("Compute $\\frac{{{i}}}{{2}} + 1$."),
                    "solution": format!("We add: $\\frac{{{i}}}{{2}} + 1 = \\boxed{{\\frac{{{}}}{{2}}}}$.", i + 2),
                    "level": "Level 1",
                    "type": "Algebra",
                    "unique_id": format!("train/algebra/{i}.json"),
                })
                .to_string()
            })
            .collect(),
        Dataset::Math500 => (0..2)
            .map(|i| {
                serde_json::json!({
                    "problem": format!("What is ${i}^2$?"),
                    "solution": format!("${i}^2 = \\boxed{{{}}}$.", i * i),
                    "answer": format!("{}", i * i),
                    "subject": "Prealgebra",
                    "level": 1,
                    "unique_id": format!("test/prealgebra/{i}.json"),
                })
                .to_string()
            })
            .collect(),
        // AMC answers are JSON floats in the published file.
        Dataset::Amc23 => (0..2)
            .map(|i| serde_json::json!({"id": i, "problem": format!("Find {i} + 27."), "answer": 27.0 + i as f64, "url": "https://example.org", "question": format!("Find {i} + 27.")}).to_string())
            .collect(),
        Dataset::Aime24 => (0..2)
            .map(|i| serde_json::json!({"id": 60 + i, "problem": format!("Find {i}33."), "solution": "By inspection.", "answer": format!("{i}33"), "url": "https://example.org", "question": format!("Find {i}33.")}).to_string())
            .collect(),
    };
    let path = dataset.path_in(root);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    lines.len()
}

#[test]
fn every_set_has_the_readme_row_count_and_nothing_empty() {
    let src = source();
    let root = &src.root;
    assert_eq!(src.rows.len(), Dataset::ALL.len());
    for &(dataset, rows) in &src.rows {
        let problems = dataset
            .load_from(root)
            .unwrap_or_else(|e| panic!("{dataset}: {e}"));
        assert_eq!(problems.len(), rows, "{dataset}");
        let ids: HashSet<&str> = problems.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), rows, "{dataset}: ids are not unique");
        for p in &problems {
            assert!(
                !p.prompt.trim().is_empty(),
                "{dataset} {}: empty prompt",
                p.id
            );
            assert!(
                !p.answer.trim().is_empty(),
                "{dataset} {}: empty answer",
                p.id
            );
            assert_eq!(p.task, dataset.task());
            assert!(p.record.is_object());
        }
    }
}

#[test]
fn gsm8k_keeps_the_worked_solution_and_math_train_the_boxed_solution() {
    let src = source();
    let root = &src.root;
    for dataset in [Dataset::Gsm8kTrain, Dataset::Gsm8kTest] {
        for p in dataset.load_from(root).unwrap() {
            assert_eq!(p.task, Task::Gsm8k);
            assert!(p.answer.contains("####"), "{}: {}", p.id, p.answer);
            assert_eq!(p.prompt, p.record["question"].as_str().unwrap());
        }
    }
    let math = Dataset::MathTrain.load_from(root).unwrap();
    for p in &math {
        assert!(p.answer.contains("\\boxed"), "{}", p.id);
        assert_eq!(p.id, p.record["unique_id"].as_str().unwrap());
        assert_eq!(p.answer, p.record["solution"].as_str().unwrap());
    }
}

#[test]
fn evaluation_sets_give_the_bare_gold_answer() {
    let src = source();
    let root = &src.root;
    let math500 = Dataset::Math500.load_from(root).unwrap();
    for p in &math500 {
        assert_eq!(p.answer, p.record["answer"].as_str().unwrap());
        assert!(!p.answer.contains("\\boxed"));
    }
    // AMC stores answers as JSON floats (27.0); they must come out as the integers the problems ask for.
    for p in Dataset::Amc23.load_from(root).unwrap() {
        let stored = p.record["answer"].as_f64().unwrap();
        assert_eq!(p.answer.parse::<f64>().unwrap(), stored, "{}", p.id);
        assert!(!p.answer.contains('.'), "{}: {}", p.id, p.answer);
        assert!(p.id.starts_with("amc23:"));
        assert_eq!(p.prompt, p.record["problem"].as_str().unwrap());
    }
    for p in Dataset::Aime24.load_from(root).unwrap() {
        assert_eq!(p.answer, p.record["answer"].as_str().unwrap());
        assert!(p.id.starts_with("aime24:"));
    }
}

#[test]
fn a_missing_file_names_the_path_and_the_variable_to_set() {
    let empty = tempfile::tempdir().unwrap();
    let err = Dataset::Aime24
        .load_from(&DataRoot::given(empty.path()))
        .unwrap_err()
        .to_string();
    let expected_path = empty.path().join("aime24/test.jsonl");
    assert!(err.contains(&expected_path.display().to_string()), "{err}");
    assert!(err.contains("CPPO_DATA_DIR"), "{err}");
    assert!(err.contains("aime24"), "{err}");
}
