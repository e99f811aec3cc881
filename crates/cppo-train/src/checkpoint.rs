//! Checkpoints: `OUT/checkpoints/step-NNNNNN/` holds the model in the Hugging Face layout, the optimizer
//! state and the trainer state (step, data cursor, seed); `OUT/checkpoints/latest` names the newest one.
//! Each is built in a temporary directory and renamed into place, so a crash never leaves a partial one,
//! and `latest` is only updated after its checkpoint is complete.

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
/// `save_optimizer` writes the optimizer file.
pub fn save(
    out: &Path,
    state: &TrainerState,
    save_model: impl FnOnce(&Path) -> Result<()>,
    save_optimizer: impl FnOnce(&Path) -> Result<()>,
) -> Result<PathBuf> {
    let root = checkpoints_dir(out);
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    let name = format!("step-{:06}", state.step);
    let dir = root.join(&name);
    write_dir_atomic(&dir, |tmp| {
        save_model(&tmp.join(MODEL_DIR))?;
        save_optimizer(&tmp.join(OPTIMIZER_FILE))?;
        write_atomic(&tmp.join(STATE_FILE), serde_json::to_string_pretty(state)?.as_bytes())
    })?;
    write_atomic(&root.join("latest"), name.as_bytes())?;
    Ok(dir)
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
