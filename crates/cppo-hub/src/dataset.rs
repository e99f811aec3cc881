//! A dataset repository's split as local files. The files of a split are found as the `datasets`
//! library finds them without a config card: data files (`.parquet`, `.jsonl`) inside the config's
//! folder when a config is named, whose name starts with the split (`train-00000-of-00002.parquet`,
//! `test.jsonl`) or that sit in a folder named after it (`default/train/0000.parquet`). A cached
//! snapshot that holds every shard (`-NNNNN-of-MMMMM` counted) is used without the network.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::cache::snapshot_files;
use crate::client::Hub;
use crate::error::{HubError, Result};
use crate::repo::{DataSelector, DatasetRef};

/// The extensions cppo reads.
pub const DATA_EXTENSIONS: [&str; 2] = [".parquet", ".jsonl"];

impl Hub {
    /// The local files of a dataset's split (or of one named file), in path order.
    pub fn dataset_files(&self, dataset: &DatasetRef) -> Result<Vec<PathBuf>> {
        let repo = &dataset.repo;
        let cached = self.cached(repo);
        // The cache may hold only part of the repository (what earlier names asked for), so a name
        // without a config can pick the one config that was fetched; with the Hub it would be ambiguous.
        // Names that give the config and split (as the built-in sets do) read the same either way.
        if let Some(snapshot) = cached.snapshot() {
            let present = snapshot_files(&snapshot);
            if let Ok(chosen) = select_files(&present, &dataset.select) {
                if shards_complete(&chosen) {
                    return Ok(chosen.iter().map(|p| snapshot.join(p)).collect());
                }
            }
        }
        if self.settings().offline {
            return Err(self.offline_error(repo, describe(&dataset.select)));
        }
        let listing = self.listing(repo)?;
        let paths: Vec<String> = listing.files.iter().map(|f| f.path.clone()).collect();
        let chosen = select_files(&paths, &dataset.select).map_err(|message| HubError::Content {
            repo: repo.to_string(),
            message,
        })?;
        let mut local = Vec::with_capacity(chosen.len());
        for path in &chosen {
            let file = listing.get(path).expect("chosen from the listing");
            local.push(self.fetch(repo, &listing.commit, file)?);
        }
        cached.set_ref(&listing.commit)?;
        Ok(local)
    }
}

fn describe(select: &DataSelector) -> String {
    match select {
        DataSelector::File(path) => format!("the file {path}"),
        DataSelector::Split { config: Some(c), split } => format!("split `{split}` of config `{c}`"),
        DataSelector::Split { config: None, split } => format!("split `{split}`"),
    }
}

fn is_data_file(path: &str) -> bool {
    DATA_EXTENSIONS.iter().any(|ext| path.ends_with(ext))
}

/// Whether `path` belongs to `split`: a folder of that name, or a file name that is the split followed
/// by `-`, `_`, `.` or a digit: `train` takes `train-00000-of-00001.parquet` and `train.jsonl`, not
/// `training.jsonl`.
fn in_split(path: &str, split: &str) -> bool {
    let mut parts: Vec<&str> = path.split('/').collect();
    let file = parts.pop().unwrap_or_default();
    if parts.contains(&split) {
        return true;
    }
    file.strip_prefix(split).is_some_and(|rest| {
        rest.starts_with(['-', '_', '.']) || rest.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// The data files `select` names among `paths` (a repository's files), or why there are none or the
/// choice is ambiguous.
pub fn select_files(paths: &[String], select: &DataSelector) -> Result<Vec<String>, String> {
    let (config, split) = match select {
        DataSelector::File(path) => {
            return if paths.iter().any(|p| p == path) {
                Ok(vec![path.clone()])
            } else {
                Err(format!("has no file {path}"))
            };
        }
        DataSelector::Split { config, split } => (config.as_deref(), split.as_str()),
    };
    let data: Vec<&String> = paths.iter().filter(|p| is_data_file(p)).collect();
    let in_config: Vec<&String> = match config {
        Some(c) => {
            let prefix = format!("{c}/");
            let inside: Vec<&String> = data.iter().copied().filter(|p| p.starts_with(&prefix)).collect();
            if inside.is_empty() && c != "default" {
                return Err(format!("has no folder `{c}/` with data files (configs here: {})", folders(&data)));
            }
            if inside.is_empty() { data.clone() } else { inside }
        }
        None => data.clone(),
    };
    let chosen: Vec<String> = in_config.iter().filter(|p| in_split(p, split)).map(|p| p.to_string()).collect();
    if chosen.is_empty() {
        let listed: Vec<&str> = data.iter().take(12).map(|p| p.as_str()).collect();
        return Err(format!(
            "has no .parquet or .jsonl file for split `{split}`{} (data files: {}); name the split or config (hub:org/name:config:split) or one file (hub:org/name/path/file.parquet)",
            config.map(|c| format!(" in config `{c}`")).unwrap_or_default(),
            if listed.is_empty() { "none".to_owned() } else { listed.join(", ") }
        ));
    }
    let dirs: BTreeSet<&str> = chosen.iter().map(|p| p.rsplit_once('/').map_or("", |(d, _)| d)).collect();
    if dirs.len() > 1 {
        let shown: Vec<String> = dirs.iter().map(|d| if d.is_empty() { "(top level)".to_owned() } else { format!("{d}/") }).collect();
        return Err(format!(
            "split `{split}` has files in several folders ({}): name the config, e.g. hub:org/name:{}:{split}",
            shown.join(", "),
            dirs.iter().find(|d| !d.is_empty()).map(|d| d.split('/').next().unwrap_or(d)).unwrap_or("CONFIG")
        ));
    }
    Ok(chosen)
}

fn folders(data: &[&String]) -> String {
    let set: BTreeSet<&str> = data.iter().filter_map(|p| p.split_once('/').map(|(d, _)| d)).collect();
    if set.is_empty() {
        "none".to_owned()
    } else {
        set.into_iter().collect::<Vec<_>>().join(", ")
    }
}

/// Files named `…-00001-of-00004.…` must all be there; a cached snapshot missing one is incomplete
/// (an interrupted download) and is completed from the Hub rather than read short.
pub fn shards_complete(files: &[String]) -> bool {
    let mut expected: Option<usize> = None;
    let mut seen = 0usize;
    for f in files {
        if let Some(total) = shard_total(f) {
            if expected.is_some_and(|e| e != total) {
                return false;
            }
            expected = Some(total);
            seen += 1;
        }
    }
    expected.is_none_or(|total| seen == total)
}

/// The M of a `-NNNNN-of-MMMMM` file name.
fn shard_total(path: &str) -> Option<usize> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let (_, after) = name.rsplit_once("-of-")?;
    let digits: String = after.chars().take_while(|c| c.is_ascii_digit()).collect();
    let before = &name[..name.len() - after.len() - "-of-".len()];
    let index_digits = before.rsplit('-').next().unwrap_or_default();
    if digits.is_empty() || index_digits.is_empty() || !index_digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}
