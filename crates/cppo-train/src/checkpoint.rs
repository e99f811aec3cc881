//! Checkpoints: `OUT/checkpoints/step-NNNNNN/` holds the model in the Hugging Face layout, the optimizer
//! state and the trainer state (step, data cursor, seed); `OUT/checkpoints/latest` names the newest one.
//! Each is built in a temporary directory and renamed into place, so a crash never leaves a partial one,
//! and `latest` is only updated after its checkpoint is complete. With a retention limit
//! (`train.save_total_limit`), the oldest checkpoints are deleted only after that, and never the one
//! `latest` names.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cppo_data::SamplerState;
use serde::{Deserialize, Serialize};

use crate::fsutil::{write_atomic, write_dir_atomic};

/// Everything besides the weights and the optimizer moments that a resumed run needs to continue exactly.
/// There is no RNG state to save: every random draw of step s is seeded from (seed, s).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainerState {
    /// Training steps completed.
    pub step: u64,
    pub seed: u64,
    pub sampler: SamplerState,
    /// The run's configuration as TOML, so a resume can refuse a changed one.
    pub config: String,
    /// Best held-out accuracy so far and its step.
    pub best_eval: Option<(u64, f64)>,
}

pub const MODEL_DIR: &str = "model";
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
pub const STATE_FILE: &str = "trainer_state.json";

pub fn checkpoints_dir(out: &Path) -> PathBuf {
    out.join("checkpoints")
}

/// Writes a checkpoint. `save_model` writes the Hugging Face directory into the path it is given;
/// `save_optimizer` writes the optimizer file. With `keep_total`, once the new checkpoint is complete and
/// `latest` names it, the oldest checkpoints beyond that many are deleted (see [`prune`]); a save that
/// fails deletes nothing.
pub fn save(
    out: &Path,
    state: &TrainerState,
    save_model: impl FnOnce(&Path) -> Result<()>,
    save_optimizer: impl FnOnce(&Path) -> Result<()>,
    keep_total: Option<usize>,
) -> Result<PathBuf> {
    let root = checkpoints_dir(out);
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    remove_leftovers(out)?;
    let name = format!("step-{:06}", state.step);
    let dir = root.join(&name);
    write_dir_atomic(&dir, |tmp| {
        save_model(&tmp.join(MODEL_DIR))?;
        save_optimizer(&tmp.join(OPTIMIZER_FILE))?;
        write_atomic(&tmp.join(STATE_FILE), serde_json::to_string_pretty(state)?.as_bytes())
    })?;
    write_atomic(&root.join("latest"), name.as_bytes())?;
    if let Some(keep) = keep_total {
        prune(out, keep)?;
    }
    Ok(dir)
}

/// The `step-N` checkpoint folders of a run, oldest first, as (step, path). Other entries (the `latest`
/// pointer, temporary folders of a save in progress, anything else) are not listed.
pub fn list(out: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let root = checkpoints_dir(out);
    if !root.exists() {
        return Ok(vec![]);
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&root).with_context(|| format!("cannot list {}", root.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(digits) = name.strip_prefix("step-") else { continue };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || !entry.file_type()?.is_dir() {
            continue;
        }
        if let Ok(step) = digits.parse::<u64>() {
            found.push((step, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// Deletes the oldest checkpoints so that at most `keep` remain (the newest by step), never the one
/// `latest` names, which is kept in addition if it is not among the newest. Each folder is first renamed
/// to a hidden name and then removed, so a crash midway never leaves a partial `step-N` folder behind.
/// Returns the deleted folders.
pub fn prune(out: &Path, keep: usize) -> Result<Vec<PathBuf>> {
    let keep = keep.max(1);
    let protected = latest(out)?;
    let all = list(out)?;
    let excess = all.len().saturating_sub(keep);
    let mut deleted = Vec::new();
    for (_, dir) in all.into_iter().take(excess) {
        if protected.as_deref() == Some(dir.as_path()) {
            continue;
        }
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let doomed = dir.with_file_name(format!(".{name}.deleting-{}", std::process::id()));
        std::fs::rename(&dir, &doomed).with_context(|| format!("cannot move the old checkpoint {} aside", dir.display()))?;
        std::fs::remove_dir_all(&doomed).with_context(|| format!("cannot delete the old checkpoint {}", doomed.display()))?;
        deleted.push(dir);
    }
    Ok(deleted)
}

/// What a save or a prune killed midway leaves in `checkpoints/`: the temporary folder of a save
/// (`.step-N.tmp-PID`), a previous copy moved aside (`.step-N.old-PID`), a folder being deleted
/// (`.step-N.deleting-PID`), the `latest` pointer's temporary file (`.latest.tmp-PID`).
enum Leftover {
    /// Never a complete checkpoint, or one already on its way out: deleted.
    Remove,
    /// The previous copy of `step-N`, complete: deleted if `step-N` is in place, else moved back (the
    /// kill came between the two renames that replace a checkpoint).
    Old(String),
}

fn leftover(name: &str) -> Option<Leftover> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(pid) = name.strip_prefix(".latest.tmp-") {
        return digits(pid).then_some(Leftover::Remove);
    }
    let rest = name.strip_prefix(".step-")?;
    let (step, tail) = rest.split_once('.')?;
    let (kind, pid) = tail.split_once('-')?;
    if !digits(step) || !digits(pid) {
        return None;
    }
    match kind {
        "tmp" | "deleting" => Some(Leftover::Remove),
        "old" => Some(Leftover::Old(format!("step-{step}"))),
        _ => None,
    }
}

/// Removes the leftovers of an interrupted save or prune (see `Leftover`) from `checkpoints/`, returning
/// what it removed or restored. Complete `step-N` folders and anything it does not recognise are left
/// alone. Run by every save and on resume, so a run killed while saving leaves nothing behind for long.
pub fn remove_leftovers(out: &Path) -> Result<Vec<PathBuf>> {
    let root = checkpoints_dir(out);
    let Ok(entries) = std::fs::read_dir(&root) else { return Ok(vec![]) };
    let mut touched = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", root.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let remove = |p: &Path| -> Result<()> {
            let r = if p.is_dir() { std::fs::remove_dir_all(p) } else { std::fs::remove_file(p) };
            r.with_context(|| format!("cannot remove the leftover {}", p.display()))
        };
        match leftover(&name) {
            None => continue,
            Some(Leftover::Remove) => remove(&path)?,
            Some(Leftover::Old(step)) => {
                let target = root.join(step);
                if target.exists() {
                    remove(&path)?;
                } else {
                    std::fs::rename(&path, &target).with_context(|| format!("cannot move {} back to {}", path.display(), target.display()))?;
                }
            }
        }
        touched.push(path);
    }
    Ok(touched)
}

/// The newest complete checkpoint of a run, if any.
pub fn latest(out: &Path) -> Result<Option<PathBuf>> {
    let root = checkpoints_dir(out);
    let pointer = root.join("latest");
    if !pointer.exists() {
        return Ok(None);
    }
    let name = std::fs::read_to_string(&pointer).with_context(|| format!("cannot read {}", pointer.display()))?;
    let dir = root.join(name.trim());
    if !dir.join(STATE_FILE).exists() {
        bail!("{} names {}, which holds no {STATE_FILE}", pointer.display(), dir.display());
    }
    Ok(Some(dir))
}

pub fn load_state(dir: &Path) -> Result<TrainerState> {
    let path = dir.join(STATE_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a valid trainer state", path.display()))
}
