//! Every published set in the shared data folder loads with the row counts its README states.

use std::collections::HashSet;
use std::path::Path;

use cppo_data::{DataRoot, Dataset, Task};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data");

fn root() -> DataRoot {
    assert!(
        Path::new(DATA).join("README.md").is_file(),
        "the shared data folder is missing: expected {DATA} (with README.md) to exist"
    );
    DataRoot::given(DATA)
}

#[test]
fn every_set_has_the_readme_row_count_and_nothing_empty() {
    let root = root();
    let expected = [
        (Dataset::Gsm8kTrain, 7473),
        (Dataset::Gsm8kTest, 1319),
        (Dataset::MathTrain, 7500),
        (Dataset::Math500, 500),
        (Dataset::Amc23, 40),
        (Dataset::Aime24, 30),
    ];
    for (dataset, rows) in expected {
        let problems = dataset
            .load_from(&root)
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
    let root = root();
    for dataset in [Dataset::Gsm8kTrain, Dataset::Gsm8kTest] {
        for p in dataset.load_from(&root).unwrap() {
            assert_eq!(p.task, Task::Gsm8k);
            assert!(p.answer.contains("####"), "{}: {}", p.id, p.answer);
            assert_eq!(p.prompt, p.record["question"].as_str().unwrap());
        }
    }
    let math = Dataset::MathTrain.load_from(&root).unwrap();
    for p in &math {
        assert!(p.answer.contains("\\boxed"), "{}", p.id);
        assert_eq!(p.id, p.record["unique_id"].as_str().unwrap());
        assert_eq!(p.answer, p.record["solution"].as_str().unwrap());
    }
}

#[test]
fn evaluation_sets_give_the_bare_gold_answer() {
    let root = root();
    let math500 = Dataset::Math500.load_from(&root).unwrap();
    for p in &math500 {
        assert_eq!(p.answer, p.record["answer"].as_str().unwrap());
        assert!(!p.answer.contains("\\boxed"));
    }
    // AMC stores answers as JSON floats (27.0); they must come out as the integers the problems ask for.
    for p in Dataset::Amc23.load_from(&root).unwrap() {
        let stored = p.record["answer"].as_f64().unwrap();
        assert_eq!(p.answer.parse::<f64>().unwrap(), stored, "{}", p.id);
        assert!(!p.answer.contains('.'), "{}: {}", p.id, p.answer);
        assert!(p.id.starts_with("amc23:"));
        assert_eq!(p.prompt, p.record["problem"].as_str().unwrap());
    }
    for p in Dataset::Aime24.load_from(&root).unwrap() {
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
