//! Names of Hub repositories as users write them: `org/name`, optionally `@revision`, and for datasets
//! a config and split or a file inside the repository.

use std::fmt;

use crate::error::{HubError, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RepoKind {
    Model,
    Dataset,
}

impl RepoKind {
    /// The prefix of the cache folder and of the API paths (`models`, `datasets`).
    pub fn plural(self) -> &'static str {
        match self {
            RepoKind::Model => "models",
            RepoKind::Dataset => "datasets",
        }
    }

    pub(crate) fn hf(self) -> hf_hub::RepoType {
        match self {
            RepoKind::Model => hf_hub::RepoType::Model,
            RepoKind::Dataset => hf_hub::RepoType::Dataset,
        }
    }
}

/// One repository at one revision (a branch, a tag or a commit).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RepoId {
    pub kind: RepoKind,
    /// `org/name`.
    pub id: String,
    /// `main` unless the name says `@revision`.
    pub revision: String,
}

pub const DEFAULT_REVISION: &str = "main";

impl RepoId {
    pub fn new(kind: RepoKind, id: impl Into<String>, revision: impl Into<String>) -> Self {
        RepoId {
            kind,
            id: id.into(),
            revision: revision.into(),
        }
    }

    /// `org/name` or `org/name@revision` (the revision may contain `/`, as `refs/pr/1` does).
    pub fn parse(kind: RepoKind, name: &str) -> Result<Self> {
        let (id, revision) = match name.split_once('@') {
            Some((id, rev)) => (id, rev),
            None => (name, DEFAULT_REVISION),
        };
        check_id(name, id)?;
        if revision.is_empty() {
            return Err(bad(name, "nothing after `@`: give a branch, tag or commit, or leave `@` out"));
        }
        Ok(RepoId::new(kind, id, revision))
    }

    /// Whether `name` reads as a Hub id (`org/name` with the Hub's characters, optionally `@revision`),
    /// so a caller can tell it from a local path that does not exist.
    pub fn looks_like_id(name: &str) -> bool {
        let id = name.split_once('@').map_or(name, |(id, _)| id);
        check_id(name, id).is_ok()
    }

    /// The folder inside the hub cache: `models--org--name`, as `huggingface_hub` names it.
    pub fn folder_name(&self) -> String {
        format!("{}--{}", self.kind.plural(), self.id.replace('/', "--"))
    }

    /// The repository's page, for messages.
    pub fn page(&self, endpoint: &str) -> String {
        match self.kind {
            RepoKind::Model => format!("{endpoint}/{}", self.id),
            RepoKind::Dataset => format!("{endpoint}/datasets/{}", self.id),
        }
    }

    /// Whether the revision is a full commit hash (then the cache needs no `refs/` entry to find it).
    pub fn revision_is_commit(&self) -> bool {
        is_commit_hash(&self.revision)
    }

    pub(crate) fn at(&self, revision: &str) -> hf_hub::Repo {
        hf_hub::Repo::with_revision(self.id.clone(), self.kind.hf(), revision.to_owned())
    }
}

impl fmt::Display for RepoId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            RepoKind::Model => "model",
            RepoKind::Dataset => "dataset",
        };
        if self.revision == DEFAULT_REVISION {
            write!(f, "{kind} {}", self.id)
        } else {
            write!(f, "{kind} {}@{}", self.id, self.revision)
        }
    }
}

pub(crate) fn is_commit_hash(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn bad(name: &str, problem: &str) -> HubError {
    HubError::BadName {
        name: name.to_owned(),
        problem: problem.to_owned(),
    }
}

/// The Hub's rule for repository ids: two parts of letters, digits, `-`, `_`, `.`, neither starting
/// or ending with `-` or `.`, and no `--` or `..`.
fn check_id(name: &str, id: &str) -> Result<()> {
    let parts: Vec<&str> = id.split('/').collect();
    if parts.len() != 2 {
        return Err(bad(name, "a Hub id is `org/name`"));
    }
    for part in parts {
        let ok = !part.is_empty()
            && part.len() <= 96
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && !part.starts_with(['-', '.'])
            && !part.ends_with(['-', '.'])
            && !part.contains("--")
            && !part.contains("..");
        if !ok {
            return Err(bad(
                name,
                &format!("`{part}` is not a valid part of a Hub id (letters, digits, `-`, `_`, `.`)"),
            ));
        }
    }
    Ok(())
}

/// Which files of a dataset repository to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataSelector {
    /// The files of a split, optionally within a config (the folder of that name, as `openai/gsm8k`'s
    /// `main/` and the Hub's parquet conversion `default/train/` lay them out).
    Split {
        config: Option<String>,
        split: String,
    },
    /// One file by its path inside the repository.
    File(String),
}

/// A dataset on the Hub and what to read of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatasetRef {
    pub repo: RepoId,
    pub select: DataSelector,
}

pub const DEFAULT_SPLIT: &str = "train";

impl DatasetRef {
    /// Parses what follows `hub:` in a dataset name:
    /// - `org/name[@revision][:split]` or `org/name[@revision]:config:split` (split `train` when absent);
    /// - `org/name[@revision]/path/in/repo.parquet` (a revision holding `/` is written with `%2F`, as in
    ///   `hf://` paths: `@refs%2Fconvert%2Fparquet`).
    pub fn parse(name: &str) -> Result<Self> {
        let mut parts = name.split(':');
        let head = parts.next().unwrap_or_default();
        let rest: Vec<&str> = parts.collect();
        let (id, revision, path) = match head.split_once('@') {
            Some((id, rev_path)) => {
                let (rev, path) = match rev_path.split_once('/') {
                    Some((rev, path)) => (rev, Some(path)),
                    None => (rev_path, None),
                };
                (id.to_owned(), rev.replace("%2F", "/").replace("%2f", "/"), path)
            }
            None => {
                let mut segments = head.splitn(3, '/');
                let org = segments.next().unwrap_or_default();
                let repo = segments.next().unwrap_or_default();
                (format!("{org}/{repo}"), DEFAULT_REVISION.to_owned(), segments.next())
            }
        };
        check_id(name, &id)?;
        if revision.is_empty() {
            return Err(bad(name, "nothing after `@`: give a branch, tag or commit"));
        }
        let repo = RepoId::new(RepoKind::Dataset, id, revision);
        let select = match (path, rest.as_slice()) {
            (Some(path), []) if !path.is_empty() => DataSelector::File(path.to_owned()),
            (Some(_), _) => {
                return Err(bad(
                    name,
                    "give either a file inside the repository or `:config:split`, not both",
                ))
            }
            (None, []) => DataSelector::Split {
                config: None,
                split: DEFAULT_SPLIT.to_owned(),
            },
            (None, [split]) => DataSelector::Split {
                config: None,
                split: non_empty(name, split, "split")?,
            },
            (None, [config, split]) => DataSelector::Split {
                config: Some(non_empty(name, config, "config")?),
                split: non_empty(name, split, "split")?,
            },
            (None, _) => {
                return Err(bad(
                    name,
                    "too many `:` parts: write org/name, org/name:split or org/name:config:split",
                ))
            }
        };
        Ok(DatasetRef { repo, select })
    }
}

fn non_empty(name: &str, value: &str, what: &str) -> Result<String> {
    if value.trim().is_empty() {
        return Err(bad(name, &format!("the {what} is empty")));
    }
    Ok(value.to_owned())
}
