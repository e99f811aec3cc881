//! A model repository as a local directory cppo loads: the configuration, the tokenizer files and the
//! safetensors weights (one file, or the shards its index lists). A snapshot in the cache that already
//! has them all is used without the network.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::client::{Hub, Listing};
use crate::error::{HubError, Result};
use crate::repo::RepoId;

const REQUIRED: [&str; 2] = ["config.json", "tokenizer.json"];
/// Read when present (end-of-turn ids, special tokens, the chat template).
const OPTIONAL: [&str; 4] = [
    "generation_config.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
];
const SINGLE: &str = "model.safetensors";
const INDEX: &str = "model.safetensors.index.json";

impl Hub {
    /// The snapshot directory of a model repository with everything cppo loads, downloading what the
    /// cache lacks (nothing when it has it all).
    pub fn model_dir(&self, repo: &RepoId) -> Result<PathBuf> {
        let cached = self.cached(repo);
        if let Some(snapshot) = cached.snapshot() {
            if missing_model_files(&snapshot).is_empty() {
                return Ok(snapshot);
            }
        }
        if self.settings().offline {
            let what = match cached.snapshot() {
                Some(s) => format!("the model's {}", missing_model_files(&s).join(", ")),
                None => "the model".to_owned(),
            };
            return Err(self.offline_error(repo, what));
        }
        let listing = self.listing(repo)?;
        for name in REQUIRED {
            if !listing.has(name) {
                return Err(HubError::Content {
                    repo: repo.to_string(),
                    message: format!("has no {name} at commit {}; cppo needs {} and safetensors weights", listing.commit, REQUIRED.join(" and ")),
                });
            }
        }
        let mut names: Vec<String> = REQUIRED.iter().chain(&OPTIONAL).filter(|n| listing.has(n)).map(|n| n.to_string()).collect();
        names.extend(self.weight_files(repo, &listing)?);
        for name in &names {
            let file = listing.get(name).expect("listed");
            self.fetch(repo, &listing.commit, file)?;
        }
        let snapshot = cached.snapshot_dir(&listing.commit);
        cached.set_ref(&listing.commit)?;
        let missing = missing_model_files(&snapshot);
        if !missing.is_empty() {
            return Err(HubError::Content {
                repo: repo.to_string(),
                message: format!("after the download {} still lacks {}", snapshot.display(), missing.join(", ")),
            });
        }
        Ok(snapshot)
    }

    /// `model.safetensors`, or the index and every shard it names (the index is fetched first to learn
    /// them).
    fn weight_files(&self, repo: &RepoId, listing: &Listing) -> Result<Vec<String>> {
        if listing.has(SINGLE) {
            return Ok(vec![SINGLE.to_owned()]);
        }
        let Some(index) = listing.get(INDEX) else {
            let others: Vec<&str> = listing
                .files
                .iter()
                .map(|f| f.path.as_str())
                .filter(|p| p.ends_with(".bin") || p.ends_with(".gguf") || p.ends_with(".pt") || p.ends_with(".safetensors"))
                .collect();
            let found = if others.is_empty() { "no weight files".to_owned() } else { format!("only {}", others.join(", ")) };
            return Err(HubError::Content {
                repo: repo.to_string(),
                message: format!("has neither {SINGLE} nor {INDEX} ({found}); cppo reads safetensors weights, which transformers writes with `save_pretrained`"),
            });
        };
        let index_path = self.fetch(repo, &listing.commit, index)?;
        let shards = shard_names(&index_path)?;
        if let Some(absent) = shards.iter().find(|s| !listing.has(s)) {
            return Err(HubError::Content {
                repo: repo.to_string(),
                message: format!("{INDEX} names the shard {absent}, which the repository does not have"),
            });
        }
        Ok(std::iter::once(INDEX.to_owned()).chain(shards).collect())
    }
}

/// The shard files an index's `weight_map` names, each once.
fn shard_names(index: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(index).map_err(|e| HubError::io(index, e))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| HubError::io(index, std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not valid JSON: {e}"))))?;
    let map = value.get("weight_map").and_then(|m| m.as_object()).ok_or_else(|| {
        HubError::io(index, std::io::Error::new(std::io::ErrorKind::InvalidData, "no `weight_map` object"))
    })?;
    let mut shards = BTreeSet::new();
    for (tensor, file) in map {
        let file = file.as_str().ok_or_else(|| {
            HubError::io(index, std::io::Error::new(std::io::ErrorKind::InvalidData, format!("weight_map.{tensor}: expected a file name")))
        })?;
        shards.insert(file.to_owned());
    }
    Ok(shards.into_iter().collect())
}

/// What a snapshot lacks for cppo to load it (empty when complete). Links whose blob is gone count as
/// missing.
pub fn missing_model_files(snapshot: &Path) -> Vec<String> {
    let mut missing: Vec<String> = REQUIRED.iter().filter(|n| !snapshot.join(n).is_file()).map(|n| n.to_string()).collect();
    if snapshot.join(SINGLE).is_file() {
        return missing;
    }
    let index = snapshot.join(INDEX);
    if !index.is_file() {
        missing.push(format!("{SINGLE} (or {INDEX} and its shards)"));
        return missing;
    }
    match shard_names(&index) {
        Ok(shards) => missing.extend(shards.into_iter().filter(|s| !snapshot.join(s).is_file())),
        Err(_) => missing.push(format!("a readable {INDEX}")),
    }
    missing
}
