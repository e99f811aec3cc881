//! Dataset names round-trip for CLIs and TOML; the data root is looked for in the documented order.

use std::ffi::OsStr;

use cppo_data::{resolve_data_root, resolve_data_root_in, DataError, Dataset, RootOrigin};

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
    // A repository with `shared/data` beside it, and a current directory (nested, so that `../shared/data`
    // from it cannot exist whatever the temp folder's neighbours are) with none.
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join("a").join("b");
    std::fs::create_dir_all(&cwd).unwrap();
    let repo_data = tmp.path().join("elsewhere/shared/data");
    std::fs::create_dir_all(&repo_data).unwrap();
    let root = resolve_data_root_in(None, &cwd, &repo_data).unwrap();
    assert_eq!(root.origin, RootOrigin::Repo);
    assert_eq!(root.path, repo_data);
    // The current directory's still comes first when it exists.
    let near = tmp.path().join("a/shared/data");
    std::fs::create_dir_all(&near).unwrap();
    assert_eq!(resolve_data_root_in(None, &cwd, &repo_data).unwrap().origin, RootOrigin::CurrentDir);
}

#[test]
fn nowhere_to_look_is_an_error_naming_every_place_tried() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join("a").join("b");
    std::fs::create_dir_all(&cwd).unwrap();
    let missing = tmp.path().join("no-repo/shared/data");
    let err = resolve_data_root_in(None, &cwd, &missing).unwrap_err();
    assert!(matches!(err, DataError::NoDataRoot { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("CPPO_DATA_DIR") && text.contains(&missing.display().to_string()), "{text}");
}
