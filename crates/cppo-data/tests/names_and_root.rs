//! Dataset names round-trip for CLIs and TOML; the data root is looked for in the documented order.

use std::ffi::OsStr;

use cppo_data::{resolve_data_root, DataError, Dataset, RootOrigin};

#[test]
fn names_round_trip_and_aliases_parse() {
    for dataset in Dataset::ALL {
        assert_eq!(dataset.name().parse::<Dataset>().unwrap(), dataset);
        let json = serde_json::to_string(&dataset).unwrap();
        assert_eq!(json, format!("\"{}\"", dataset.name()));
        assert_eq!(serde_json::from_str::<Dataset>(&json).unwrap(), dataset);
    }
    assert_eq!("math500:test".parse::<Dataset>().unwrap(), Dataset::Math500);
    assert_eq!("amc23:test".parse::<Dataset>().unwrap(), Dataset::Amc23);
    assert_eq!("aime24:test".parse::<Dataset>().unwrap(), Dataset::Aime24);
}

#[test]
fn unknown_name_lists_the_known_ones() {
    let err = "gsm8k".parse::<Dataset>().unwrap_err();
    assert!(matches!(err, DataError::UnknownDataset(..)));
    let text = err.to_string();
    for dataset in Dataset::ALL {
        assert!(text.contains(dataset.name()), "{text}");
    }
    assert!(serde_json::from_str::<Dataset>("\"gsm9k\"").is_err());
}

#[test]
fn env_variable_wins_over_everything() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let root = resolve_data_root(Some(dir.path().as_os_str()), cwd.path()).unwrap();
    assert_eq!(root.path, dir.path());
    assert_eq!(root.origin, RootOrigin::Env);
}

#[test]
fn env_variable_pointing_nowhere_is_an_error_not_skipped() {
    let cwd = tempfile::tempdir().unwrap();
    let err = resolve_data_root(Some(OsStr::new("/definitely/not/here")), cwd.path())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/definitely/not/here") && err.contains("CPPO_DATA_DIR"),
        "{err}"
    );
}

#[test]
fn current_directory_comes_before_the_repository() {
    let base = tempfile::tempdir().unwrap();
    let data = base.path().join("shared/data");
    std::fs::create_dir_all(&data).unwrap();
    let cwd = base.path().join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    let root = resolve_data_root(None, &cwd).unwrap();
    assert_eq!(root.origin, RootOrigin::CurrentDir);
    assert_eq!(
        std::fs::canonicalize(&root.path).unwrap(),
        std::fs::canonicalize(&data).unwrap()
    );
    // An empty variable counts as unset.
    assert_eq!(
        resolve_data_root(Some(OsStr::new("")), &cwd)
            .unwrap()
            .origin,
        RootOrigin::CurrentDir
    );
}

#[test]
fn repository_is_the_last_resort() {
    // Nested, so that `../shared/data` from it cannot exist whatever the temp folder's neighbours are.
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join("a").join("b");
    std::fs::create_dir_all(&cwd).unwrap();
    let repo_data = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data");
    match resolve_data_root(None, &cwd) {
        Ok(root) => {
            assert_eq!(root.origin, RootOrigin::Repo);
            assert_eq!(
                std::fs::canonicalize(root.path).unwrap(),
                std::fs::canonicalize(repo_data).unwrap()
            );
        }
        Err(e) => {
            panic!("the shared data folder {repo_data} should exist beside the repository: {e}")
        }
    }
}
