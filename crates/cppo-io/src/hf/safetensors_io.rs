//! Reading and writing `.safetensors` files, and the shard index of a sharded checkpoint. The header is
//! checked against the file length first, so a truncated download names the first tensor it cut off.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use candle_core::safetensors::Load;
use candle_core::{DType, Device, Tensor};
use serde_json::Value;

use crate::error::{candle_text, ModelIoError, Result};

/// All tensors of one safetensors file, converted to `dtype` on `device`.
pub fn read_safetensors(
    path: &Path,
    dtype: DType,
    device: &Device,
) -> Result<BTreeMap<String, Tensor>> {
    let bytes = std::fs::read(path).map_err(|e| ModelIoError::io(path, e))?;
    check_layout(&bytes, path)?;
    let st = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| ModelIoError::corrupt(path, format!("invalid safetensors file: {e}")))?;
    let mut out = BTreeMap::new();
    for (name, view) in st.tensors() {
        let tensor = view
            .load(&Device::Cpu)
            .and_then(|t| t.to_dtype(dtype))
            .and_then(|t| t.to_device(device))
            .map_err(|e| {
                ModelIoError::corrupt(path, format!("tensor `{name}`: {}", candle_text(&e)))
            })?;
        out.insert(name, tensor);
    }
    Ok(out)
}

/// The header's promises against the bytes present: header length, JSON, and every tensor's data range.
fn check_layout(bytes: &[u8], path: &Path) -> Result<()> {
    let Some(len_bytes) = bytes.get(..8) else {
        return Err(ModelIoError::corrupt(
            path,
            format!(
                "{} bytes is too short for a safetensors header (truncated?)",
                bytes.len()
            ),
        ));
    };
    let header_len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes"));
    let data_start = 8u64.saturating_add(header_len);
    if data_start > bytes.len() as u64 {
        return Err(ModelIoError::corrupt(
            path,
            format!(
                "header claims {header_len} bytes but the file has only {} (truncated?)",
                bytes.len()
            ),
        ));
    }
    let header: HashMap<String, Value> = serde_json::from_slice(&bytes[8..data_start as usize])
        .map_err(|e| {
            ModelIoError::corrupt(path, format!("invalid safetensors header JSON: {e}"))
        })?;
    let data_len = bytes.len() as u64 - data_start;
    let mut worst: Option<(u64, &str)> = None;
    for (name, info) in &header {
        if name == "__metadata__" {
            continue;
        }
        let end = info
            .get("data_offsets")
            .and_then(|o| o.get(1))
            .and_then(Value::as_u64)
            .ok_or_else(|| {
                ModelIoError::corrupt(path, format!("tensor `{name}` has no data_offsets"))
            })?;
        if end > data_len && worst.is_none_or(|(e, _)| end < e) {
            worst = Some((end, name));
        }
    }
    if let Some((end, name)) = worst {
        return Err(ModelIoError::corrupt(
            path,
            format!(
                "tensor `{name}` needs data up to byte {end} but the file holds only {data_len} data bytes (truncated?)"
            ),
        ));
    }
    Ok(())
}

/// The files of a sharded checkpoint from `model.safetensors.index.json`, each with the tensors the index
/// places there.
pub fn read_index(path: &Path) -> Result<BTreeMap<PathBuf, Vec<String>>> {
    let text = std::fs::read_to_string(path).map_err(|e| ModelIoError::io(path, e))?;
    let value: Value = serde_json::from_str(&text).map_err(|e| ModelIoError::json(path, e))?;
    let map = value
        .get("weight_map")
        .and_then(Value::as_object)
        .ok_or_else(|| ModelIoError::MissingKey {
            path: path.to_path_buf(),
            key: "weight_map".into(),
        })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut files: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for (tensor, file) in map {
        let file = file
            .as_str()
            .filter(|f| !f.is_empty() && Path::new(f).file_name() == Some(std::ffi::OsStr::new(f)))
            .ok_or_else(|| {
                ModelIoError::invalid(
                    path,
                    format!("weight_map.{tensor}"),
                    "expected a file name in this directory",
                )
            })?;
        files
            .entry(dir.join(file))
            .or_default()
            .push(tensor.clone());
    }
    Ok(files)
}

/// Writes `tensors` (already in the wanted dtype) with transformers' `{"format": "pt"}` metadata.
pub fn write_safetensors(path: &Path, tensors: &BTreeMap<String, Tensor>) -> Result<()> {
    let contiguous: Vec<(String, Tensor)> = tensors
        .iter()
        .map(|(n, t)| {
            t.to_device(&Device::Cpu)
                .and_then(|t| t.contiguous())
                .map(|t| (n.clone(), t))
                .map_err(|e| ModelIoError::tensor(n, e))
        })
        .collect::<Result<_>>()?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize_to_file(contiguous, Some(metadata), path)
        .map_err(|e| ModelIoError::corrupt(path, format!("writing safetensors: {e}")))?;
    // The safetensors crate creates the file owner-only; a model directory is meant to be shared.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
            .map_err(|e| ModelIoError::io(path, e))?;
    }
    Ok(())
}
