//! The Hub client against the fake Hub on 127.0.0.1: a sharded model and a dataset downloaded into the
//! cache in `huggingface_hub`'s layout, cache hits without a request, offline mode, a transfer cut
//! short (resumed), a leftover partial file (resumed), corrupted transfers (refetched, or an error with
//! nothing kept), 404, 401 for a gated repository, a renamed repository.

use std::path::{Path, PathBuf};

use cppo_hub::fake_hub::FakeHub;
use cppo_hub::verify::{git_blob_sha1, sha256_hex};
use cppo_hub::{DatasetRef, Hub, HubError, HubSettings, RepoId, RepoKind};

const MODEL: &str = "org/tiny-model";

/// Bytes that differ at every position, so a resumed download from a wrong offset is caught.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8).collect()
}

fn model_files() -> Vec<(&'static str, Vec<u8>)> {
    let index = serde_json::json!({
        "metadata": { "total_size": 12000 },
        "weight_map": {
            "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
            "model.norm.weight": "model-00002-of-00002.safetensors",
            "lm_head.weight": "model-00002-of-00002.safetensors"
        }
    });
    vec![
        (".gitattributes", b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n".to_vec()),
        ("README.md", b"# tiny\n".to_vec()),
        ("config.json", br#"{"architectures": ["LlamaForCausalLM"]}"#.to_vec()),
        ("tokenizer.json", br#"{"model": {}}"#.to_vec()),
        ("tokenizer_config.json", br#"{"eos_token": "</s>"}"#.to_vec()),
        ("model.safetensors.index.json", index.to_string().into_bytes()),
        ("model-00001-of-00002.safetensors", pattern(7000, 1)),
        ("model-00002-of-00002.safetensors", pattern(5000, 2)),
        ("pytorch_model.bin", pattern(300, 3)),
    ]
}

fn settings(hub: &FakeHub, cache: &Path) -> HubSettings {
    HubSettings::new(hub.endpoint(), cache)
}

fn client(s: HubSettings) -> Hub {
    Hub::new(s).expect("client")
}

fn model() -> RepoId {
    RepoId::parse(RepoKind::Model, MODEL).unwrap()
}

fn cache_dir(cache: &Path) -> PathBuf {
    cache.join("models--org--tiny-model")
}

#[test]
fn sharded_model_downloads_into_the_hf_layout_then_hits_the_cache() {
    let hub = FakeHub::start();
    let commit = hub.add_repo(RepoKind::Model, MODEL, &model_files());
    let cache = tempfile::tempdir().unwrap();
    let dir = client(settings(&hub, cache.path())).model_dir(&model()).unwrap();

    let repo_dir = cache_dir(cache.path());
    assert_eq!(dir, repo_dir.join("snapshots").join(&commit));
    assert_eq!(std::fs::read_to_string(repo_dir.join("refs/main")).unwrap().trim(), commit);
    for (name, bytes) in model_files() {
        let path = dir.join(name);
        let wanted = ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors.index.json"].contains(&name)
            || name.ends_with(".safetensors");
        assert_eq!(path.exists(), wanted, "{name}: only what cppo loads is fetched");
        if !wanted {
            continue;
        }
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name}");
        // As huggingface_hub writes it: a relative link to blobs/<etag>, the etag being the SHA-256 of an
        // LFS file and the git blob id of the others.
        let link = std::fs::read_link(&path).unwrap();
        assert!(link.is_relative(), "{name}: {}", link.display());
        let etag = if name.ends_with(".safetensors") { sha256_hex(&bytes) } else { git_blob_sha1(&bytes) };
        assert_eq!(link, Path::new("../../blobs").join(&etag), "{name}");
        assert!(repo_dir.join("blobs").join(&etag).is_file());
    }

    // Asked again (a new process, say): the cache answers, no request is made.
    let before = hub.requests().len();
    let again = client(settings(&hub, cache.path())).model_dir(&model()).unwrap();
    assert_eq!(again, dir);
    assert_eq!(hub.requests().len(), before, "a complete snapshot is used without the network");
    // The same by commit, which needs no ref.
    let pinned = RepoId::parse(RepoKind::Model, &format!("{MODEL}@{commit}")).unwrap();
    assert_eq!(client(settings(&hub, cache.path())).model_dir(&pinned).unwrap(), dir);
    assert_eq!(hub.requests().len(), before);
}

#[test]
fn offline_uses_the_cache_and_names_the_repo_and_variable_when_it_cannot() {
    let hub = FakeHub::start();
    hub.add_repo(RepoKind::Model, MODEL, &model_files());
    let cache = tempfile::tempdir().unwrap();
    let mut offline = settings(&hub, cache.path());
    offline.offline = true;
    let err = client(offline.clone()).model_dir(&model()).unwrap_err();
    assert!(matches!(err, HubError::Offline { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains(MODEL) && text.contains("HF_HUB_OFFLINE") && text.contains("models--org--tiny-model"), "{text}");
    assert!(hub.requests().is_empty(), "offline mode made a request");

    let dir = client(settings(&hub, cache.path())).model_dir(&model()).unwrap();
    let before = hub.requests().len();
    assert_eq!(client(offline.clone()).model_dir(&model()).unwrap(), dir);
    // A shard missing from the snapshot: offline cannot complete it, and says which file.
    std::fs::remove_file(dir.join("model-00002-of-00002.safetensors")).unwrap();
    let text = client(offline).model_dir(&model()).unwrap_err().to_string();
    assert!(text.contains("model-00002-of-00002.safetensors") && text.contains("HF_HUB_OFFLINE"), "{text}");
    assert_eq!(hub.requests().len(), before);
}

/// A snapshot laid out by hand as transformers leaves one (blobs, relative links, refs/main) is used as
/// it is: no request reaches the server.
#[test]
fn a_model_transformers_downloaded_is_used_as_is() {
    let hub = FakeHub::start();
    let cache = tempfile::tempdir().unwrap();
    let repo_dir = cache_dir(cache.path());
    let commit = "1111111111111111111111111111111111111111";
    let snapshot = repo_dir.join("snapshots").join(commit);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo_dir.join("blobs")).unwrap();
    std::fs::create_dir_all(repo_dir.join("refs")).unwrap();
    std::fs::write(repo_dir.join("refs/main"), commit).unwrap();
    for (name, bytes) in [("config.json", b"{}".to_vec()), ("tokenizer.json", b"{}".to_vec()), ("model.safetensors", pattern(100, 9))] {
        let etag = sha256_hex(&bytes);
        std::fs::write(repo_dir.join("blobs").join(&etag), &bytes).unwrap();
        std::os::unix::fs::symlink(Path::new("../../blobs").join(&etag), snapshot.join(name)).unwrap();
    }
    let dir = client(settings(&hub, cache.path())).model_dir(&model()).unwrap();
    assert_eq!(dir, snapshot);
    assert!(hub.requests().is_empty());
}

#[test]
fn a_transfer_cut_short_is_resumed_from_where_it_stopped() {
    let hub = FakeHub::start();
    hub.add_repo(RepoKind::Model, MODEL, &model_files());
    hub.cut_next("model-00001-of-00002.safetensors", 3000);
    let cache = tempfile::tempdir().unwrap();
    let dir = client(settings(&hub, cache.path())).model_dir(&model()).unwrap();
    assert_eq!(std::fs::read(dir.join("model-00001-of-00002.safetensors")).unwrap(), pattern(7000, 1));
    let ranges: Vec<String> = hub.requests().iter().filter_map(|r| r.range.clone()).collect();
    assert!(ranges.iter().any(|r| r == "bytes=3000-"), "no resumed request: {ranges:?}");
}

#[test]
fn a_partial_file_left_by_an_earlier_run_is_resumed() {
    let hub = FakeHub::start();
    hub.add_repo(RepoKind::Model, MODEL, &model_files());
    let cache = tempfile::tempdir().unwrap();
    let shard = pattern(5000, 2);
    let blobs = cache_dir(cache.path()).join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::write(blobs.join(format!("{}.part", sha256_hex(&shard))), &shard[..1234]).unwrap();
    let dir = client(settings(&hub, cache.path())).model_dir(&model()).unwrap();
    assert_eq!(std::fs::read(dir.join("model-00002-of-00002.safetensors")).unwrap(), shard);
    // The resumed request reaches the file's storage (past the resolve redirect) with its range.
    let resumed = hub.requests().into_iter().any(|r| r.path.starts_with("/cdn/") && r.range.as_deref() == Some("bytes=1234-"));
    assert!(resumed, "{:?}", hub.requests());
}

#[test]
fn a_corrupted_transfer_is_detected_and_fetched_again() {
    let hub = FakeHub::start();
    hub.add_repo(RepoKind::Model, MODEL, &model_files());
    hub.corrupt_next("model-00002-of-00002.safetensors", 1);
    hub.corrupt_next("config.json", 1);
    let cache = tempfile::tempdir().unwrap();
    let dir = client(settings(&hub, cache.path())).model_dir(&model()).unwrap();
    assert_eq!(std::fs::read(dir.join("model-00002-of-00002.safetensors")).unwrap(), pattern(5000, 2));
    assert_eq!(std::fs::read(dir.join("config.json")).unwrap(), model_files()[2].1);
}

#[test]
fn a_file_corrupted_every_time_is_an_error_and_never_kept() {
    let hub = FakeHub::start();
    hub.add_repo(RepoKind::Model, MODEL, &model_files());
    hub.corrupt_next("model-00001-of-00002.safetensors", 10);
    let cache = tempfile::tempdir().unwrap();
    let err = client(settings(&hub, cache.path())).model_dir(&model()).unwrap_err();
    assert!(matches!(err, HubError::Corrupt { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("model-00001-of-00002.safetensors") && text.contains("SHA-256"), "{text}");
    let repo_dir = cache_dir(cache.path());
    let leftovers: Vec<String> = std::fs::read_dir(repo_dir.join("blobs")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    assert!(!leftovers.contains(&sha256_hex(&pattern(7000, 1))), "the bad blob stayed: {leftovers:?}");
    assert!(!repo_dir.join("refs/main").exists(), "an incomplete snapshot must not be the revision's");
    for snapshot in std::fs::read_dir(repo_dir.join("snapshots")).unwrap().flatten() {
        assert!(!snapshot.path().join("model-00001-of-00002.safetensors").exists());
    }
}

#[test]
fn a_cached_file_of_the_wrong_size_is_replaced() {
    let hub = FakeHub::start();
    hub.add_repo(RepoKind::Model, MODEL, &model_files());
    let cache = tempfile::tempdir().unwrap();
    let dir = client(settings(&hub, cache.path())).model_dir(&model()).unwrap();
    // A blob cut short behind the cache's back, and a shard gone, so the next run goes online.
    let blob = std::fs::canonicalize(dir.join("model-00001-of-00002.safetensors")).unwrap();
    std::fs::write(&blob, &pattern(7000, 1)[..10]).unwrap();
    std::fs::remove_file(dir.join("model-00002-of-00002.safetensors")).unwrap();
    let again = client(settings(&hub, cache.path())).model_dir(&model()).unwrap();
    assert_eq!(std::fs::read(again.join("model-00001-of-00002.safetensors")).unwrap(), pattern(7000, 1));
    assert_eq!(std::fs::read(again.join("model-00002-of-00002.safetensors")).unwrap(), pattern(5000, 2));
}

#[test]
fn not_found_says_what_was_not_found() {
    let hub = FakeHub::start();
    hub.add_repo(RepoKind::Model, MODEL, &model_files());
    let cache = tempfile::tempdir().unwrap();
    let hubc = client(settings(&hub, cache.path()));
    let err = hubc.model_dir(&RepoId::parse(RepoKind::Model, "org/missing").unwrap()).unwrap_err();
    assert!(matches!(err, HubError::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("org/missing") && err.to_string().contains("404"), "{err}");
    let err = hubc.model_dir(&RepoId::parse(RepoKind::Model, &format!("{MODEL}@v9")).unwrap()).unwrap_err();
    assert!(err.to_string().contains("v9"), "{err}");
    hub.add_repo(RepoKind::Dataset, "org/data", &[("data/train-00000-of-00001.parquet", vec![1, 2, 3])]);
    let err = hubc.dataset_files(&DatasetRef::parse("org/data/nope.parquet").unwrap()).unwrap_err();
    assert!(err.to_string().contains("org/data") && err.to_string().contains("nope.parquet"), "{err}");
    let err = hubc.dataset_files(&DatasetRef::parse("org/data:validation").unwrap()).unwrap_err();
    assert!(err.to_string().contains("`validation`") && err.to_string().contains("data/train-00000-of-00001.parquet"), "{err}");
    // A model repository without safetensors weights says what it has instead.
    hub.add_repo(RepoKind::Model, "org/bin-only", &[("config.json", b"{}".to_vec()), ("tokenizer.json", b"{}".to_vec()), ("pytorch_model.bin", vec![0; 10])]);
    let err = hubc.model_dir(&RepoId::parse(RepoKind::Model, "org/bin-only").unwrap()).unwrap_err();
    assert!(err.to_string().contains("pytorch_model.bin") && err.to_string().contains("safetensors"), "{err}");
}

#[test]
fn a_gated_repository_needs_a_token_and_says_so() {
    let hub = FakeHub::start();
    hub.add_repo(RepoKind::Model, MODEL, &model_files());
    hub.gate(RepoKind::Model, MODEL, "hf_secret");
    let cache = tempfile::tempdir().unwrap();
    let err = client(settings(&hub, cache.path())).model_dir(&model()).unwrap_err();
    assert!(matches!(err, HubError::Gated { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains(MODEL) && text.contains("HF_TOKEN") && text.contains("gated"), "{text}");

    let mut wrong = settings(&hub, cache.path());
    wrong.token = Some("hf_other".into());
    let text = client(wrong).model_dir(&model()).unwrap_err().to_string();
    assert!(text.contains("no access"), "{text}");

    let mut with_token = settings(&hub, cache.path());
    with_token.token = Some("hf_secret".into());
    let dir = client(with_token).model_dir(&model()).unwrap();
    assert!(dir.join("config.json").is_file());
    assert!(hub.requests().iter().any(|r| r.authorization.as_deref() == Some("Bearer hf_secret")));
}

#[test]
fn a_renamed_repository_is_followed_through_its_redirect() {
    let hub = FakeHub::start();
    let commit = hub.add_repo(RepoKind::Model, MODEL, &model_files());
    hub.rename(RepoKind::Model, "old-org/old-name", MODEL);
    let cache = tempfile::tempdir().unwrap();
    let dir = client(settings(&hub, cache.path())).model_dir(&RepoId::parse(RepoKind::Model, "old-org/old-name").unwrap()).unwrap();
    assert!(dir.ends_with(Path::new("models--old-org--old-name/snapshots").join(&commit)), "{}", dir.display());
    assert_eq!(std::fs::read(dir.join("model-00002-of-00002.safetensors")).unwrap(), pattern(5000, 2));
}

fn dataset_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("README.md", b"---\nconfigs: []\n---\n".to_vec()),
        ("main/train-00000-of-00002.parquet", pattern(900, 4)),
        ("main/train-00001-of-00002.parquet", pattern(800, 5)),
        ("main/test-00000-of-00001.parquet", pattern(700, 6)),
        ("socratic/train-00000-of-00001.parquet", pattern(600, 7)),
    ]
}

#[test]
fn a_dataset_split_downloads_then_hits_the_cache() {
    let hub = FakeHub::start();
    let commit = hub.add_repo(RepoKind::Dataset, "openai/gsm8k", &dataset_files());
    let cache = tempfile::tempdir().unwrap();
    let hubc = client(settings(&hub, cache.path()));
    // No config named, two configs with a train split: the error names both and the way out.
    let text = hubc.dataset_files(&DatasetRef::parse("openai/gsm8k").unwrap()).unwrap_err().to_string();
    assert!(text.contains("main/") && text.contains("socratic/") && text.contains(":main:train"), "{text}");

    let train = DatasetRef::parse("openai/gsm8k:main:train").unwrap();
    let files = hubc.dataset_files(&train).unwrap();
    let snapshot = cache.path().join("datasets--openai--gsm8k/snapshots").join(&commit);
    assert_eq!(files, vec![snapshot.join("main/train-00000-of-00002.parquet"), snapshot.join("main/train-00001-of-00002.parquet")]);
    assert_eq!(std::fs::read(&files[1]).unwrap(), pattern(800, 5));
    assert!(!snapshot.join("main/test-00000-of-00001.parquet").exists(), "only the split asked for");

    let before = hub.requests().len();
    assert_eq!(hubc.dataset_files(&train).unwrap(), files);
    assert_eq!(hub.requests().len(), before, "cache hit made a request");
    let mut offline = settings(&hub, cache.path());
    offline.offline = true;
    assert_eq!(client(offline.clone()).dataset_files(&train).unwrap(), files);
    // The test split was never fetched: offline says so, naming the repository.
    let text = client(offline.clone()).dataset_files(&DatasetRef::parse("openai/gsm8k:main:test").unwrap()).unwrap_err().to_string();
    assert!(text.contains("openai/gsm8k") && text.contains("`test`") && text.contains("HF_HUB_OFFLINE"), "{text}");
    // One shard of two gone: the cached split is incomplete, so it is not used short.
    std::fs::remove_file(&files[0]).unwrap();
    assert!(client(offline).dataset_files(&train).is_err());
    assert_eq!(hubc.dataset_files(&train).unwrap(), files);
}
