//! Names as users write them, the environment's settings, and the choice of a split's files: pure rules,
//! no server.

use cppo_hub::dataset::shards_complete;
use cppo_hub::{select_files, DataSelector, DatasetRef, HubError, HubSettings, RepoId, RepoKind};

#[test]
fn model_ids_with_and_without_revision() {
    let r = RepoId::parse(RepoKind::Model, "Qwen/Qwen2.5-1.5B-Instruct").unwrap();
    assert_eq!((r.id.as_str(), r.revision.as_str()), ("Qwen/Qwen2.5-1.5B-Instruct", "main"));
    assert_eq!(r.folder_name(), "models--Qwen--Qwen2.5-1.5B-Instruct");
    let r = RepoId::parse(RepoKind::Model, "org/name@refs/pr/1").unwrap();
    assert_eq!(r.revision, "refs/pr/1");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    assert!(RepoId::parse(RepoKind::Model, &format!("org/name@{commit}")).unwrap().revision_is_commit());
    for bad in ["name", "a/b/c", "org/", "/name", "org/na me", "org/-x", "org/x@", "org/a..b"] {
        let err = RepoId::parse(RepoKind::Model, bad).unwrap_err();
        assert!(matches!(err, HubError::BadName { .. }), "{bad}: {err}");
        assert!(err.to_string().contains(bad.split('@').next().unwrap()), "{bad}: {err}");
        assert!(!RepoId::looks_like_id(bad) || bad.ends_with('@'), "{bad}");
    }
    assert!(RepoId::looks_like_id("org/name@v1"));
    assert!(!RepoId::looks_like_id("runs/x/model"));
}

#[test]
fn dataset_names_split_config_and_file() {
    let d = DatasetRef::parse("openai/gsm8k:main:test").unwrap();
    assert_eq!(d.repo.id, "openai/gsm8k");
    assert_eq!(d.repo.kind, RepoKind::Dataset);
    assert_eq!(d.repo.folder_name(), "datasets--openai--gsm8k");
    assert_eq!(d.select, DataSelector::Split { config: Some("main".into()), split: "test".into() });
    let d = DatasetRef::parse("HuggingFaceH4/MATH-500:test").unwrap();
    assert_eq!(d.select, DataSelector::Split { config: None, split: "test".into() });
    let d = DatasetRef::parse("org/ds").unwrap();
    assert_eq!(d.select, DataSelector::Split { config: None, split: "train".into() });
    let d = DatasetRef::parse("org/ds/data/part.parquet").unwrap();
    assert_eq!((d.repo.revision.as_str(), d.select), ("main", DataSelector::File("data/part.parquet".into())));
    let d = DatasetRef::parse("org/ds@refs%2Fconvert%2Fparquet:default:train").unwrap();
    assert_eq!(d.repo.revision, "refs/convert/parquet");
    let d = DatasetRef::parse("org/ds@v2/x.jsonl").unwrap();
    assert_eq!((d.repo.revision.as_str(), d.select), ("v2", DataSelector::File("x.jsonl".into())));
    for bad in ["org/ds:a:b:c", "org/ds::train", "org/ds/x.parquet:train", "ds", "org/ds@:train"] {
        assert!(matches!(DatasetRef::parse(bad), Err(HubError::BadName { .. })), "{bad}");
    }
}

#[test]
fn settings_follow_huggingface_hub_variables() {
    let env = |pairs: &'static [(&'static str, &'static str)]| move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
    let s = HubSettings::from_lookup(env(&[("HOME", "/home/u")]));
    assert_eq!(s.cache_dir, std::path::Path::new("/home/u/.cache/huggingface/hub"));
    assert_eq!(s.endpoint, "https://huggingface.co");
    assert!(!s.offline);
    let s = HubSettings::from_lookup(env(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/x")]));
    assert_eq!(s.cache_dir, std::path::Path::new("/x/huggingface/hub"));
    let s = HubSettings::from_lookup(env(&[("HF_HOME", "/hf"), ("HF_ENDPOINT", "http://mirror/"), ("HF_HUB_OFFLINE", "1"), ("HF_TOKEN", " hf_abc \n")]));
    assert_eq!(s.cache_dir, std::path::Path::new("/hf/hub"));
    assert_eq!(s.endpoint, "http://mirror");
    assert!(s.offline);
    assert_eq!(s.token.as_deref(), Some("hf_abc"));
    let s = HubSettings::from_lookup(env(&[("HF_HOME", "/hf"), ("HF_HUB_CACHE", "/c"), ("HF_HUB_OFFLINE", "0")]));
    assert_eq!(s.cache_dir, std::path::Path::new("/c"));
    assert!(!s.offline);
    for on in ["true", "YES", "on"] {
        let s = HubSettings::from_lookup(move |k| (k == "HF_HUB_OFFLINE").then(|| on.to_string()));
        assert!(s.offline, "{on}");
    }
    // The token file `huggingface-cli login` writes.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "hf_saved\n").unwrap();
    let home = dir.path().to_str().unwrap().to_owned();
    let s = HubSettings::from_lookup(move |k| (k == "HF_HOME").then(|| home.clone()));
    assert_eq!(s.token.as_deref(), Some("hf_saved"));
}

fn paths(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn split_files_as_the_datasets_library_finds_them() {
    let gsm8k = paths(&[
        ".gitattributes",
        "README.md",
        "main/test-00000-of-00001.parquet",
        "main/train-00000-of-00002.parquet",
        "main/train-00001-of-00002.parquet",
        "socratic/train-00000-of-00001.parquet",
    ]);
    let pick = |config: Option<&str>, split: &str| {
        select_files(&gsm8k, &DataSelector::Split { config: config.map(String::from), split: split.into() })
    };
    assert_eq!(pick(Some("main"), "train").unwrap(), paths(&["main/train-00000-of-00002.parquet", "main/train-00001-of-00002.parquet"]));
    assert_eq!(pick(Some("main"), "test").unwrap(), paths(&["main/test-00000-of-00001.parquet"]));
    let err = pick(None, "train").unwrap_err();
    assert!(err.contains("main/") && err.contains("socratic/"), "{err}");
    let err = pick(Some("nope"), "train").unwrap_err();
    assert!(err.contains("nope") && err.contains("main"), "{err}");
    let err = pick(Some("main"), "validation").unwrap_err();
    assert!(err.contains("validation"), "{err}");

    let math500 = paths(&["README.md", "test.jsonl", "training.jsonl"]);
    let one = |split: &str| select_files(&math500, &DataSelector::Split { config: None, split: split.into() });
    assert_eq!(one("test").unwrap(), paths(&["test.jsonl"]));
    assert!(one("train").is_err(), "`train` must not take training.jsonl");

    let converted = paths(&["default/test/0000.parquet", "default/train/0000.parquet", "default/train/0001.parquet"]);
    let got = select_files(&converted, &DataSelector::Split { config: Some("default".into()), split: "train".into() }).unwrap();
    assert_eq!(got, paths(&["default/train/0000.parquet", "default/train/0001.parquet"]));
    let got = select_files(&paths(&["data/train-00000-of-00001.parquet"]), &DataSelector::Split { config: Some("default".into()), split: "train".into() }).unwrap();
    assert_eq!(got, paths(&["data/train-00000-of-00001.parquet"]));
    assert!(select_files(&converted, &DataSelector::File("default/x.parquet".into())).is_err());
}

#[test]
fn shard_counts_tell_a_partial_split() {
    assert!(shards_complete(&paths(&["a/train-00000-of-00002.parquet", "a/train-00001-of-00002.parquet"])));
    assert!(!shards_complete(&paths(&["a/train-00001-of-00002.parquet"])));
    assert!(shards_complete(&paths(&["test.jsonl"])));
    assert!(shards_complete(&paths(&["default/train/0000.parquet"])));
}
