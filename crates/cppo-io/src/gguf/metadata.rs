//! Typed access to GGUF metadata with errors that name the key. GGUF writers differ in the integer width
//! they use for the same key, so every integer type is accepted where a count is expected.

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::Value;

use crate::error::{ModelIoError, Result};

pub struct Metadata<'a> {
    pub values: &'a HashMap<String, Value>,
    pub path: &'a Path,
}

fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::U8(x) => Some(u64::from(*x)),
        Value::U16(x) => Some(u64::from(*x)),
        Value::U32(x) => Some(u64::from(*x)),
        Value::U64(x) => Some(*x),
        Value::I8(x) => u64::try_from(*x).ok(),
        Value::I16(x) => u64::try_from(*x).ok(),
        Value::I32(x) => u64::try_from(*x).ok(),
        Value::I64(x) => u64::try_from(*x).ok(),
        _ => None,
    }
}

fn as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::I8(x) => Some(i64::from(*x)),
        Value::I16(x) => Some(i64::from(*x)),
        Value::I32(x) => Some(i64::from(*x)),
        Value::I64(x) => Some(*x),
        other => as_u64(other).and_then(|x| i64::try_from(x).ok()),
    }
}

impl Metadata<'_> {
    pub fn has(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    fn missing(&self, key: &str) -> ModelIoError {
        ModelIoError::MissingKey {
            path: self.path.to_path_buf(),
            key: key.to_string(),
        }
    }

    fn invalid(&self, key: &str, expected: &str, found: &Value) -> ModelIoError {
        ModelIoError::invalid(
            self.path,
            key,
            format!("expected {expected}, found {:?}", found.value_type()),
        )
    }

    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>> {
        self.values
            .get(key)
            .map(|v| as_u64(v).ok_or_else(|| self.invalid(key, "a non-negative integer", v)))
            .transpose()
    }

    pub fn usize(&self, key: &str) -> Result<usize> {
        let n = self.opt_u64(key)?.ok_or_else(|| self.missing(key))?;
        usize::try_from(n)
            .map_err(|_| ModelIoError::invalid(self.path, key, format!("{n} is too large")))
    }

    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        self.opt_u64(key)?
            .map(|n| {
                usize::try_from(n)
                    .map_err(|_| ModelIoError::invalid(self.path, key, format!("{n} is too large")))
            })
            .transpose()
    }

    pub fn opt_u32(&self, key: &str) -> Result<Option<u32>> {
        self.opt_u64(key)?
            .map(|n| {
                u32::try_from(n).map_err(|_| {
                    ModelIoError::invalid(self.path, key, format!("{n} is not a token id"))
                })
            })
            .transpose()
    }

    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        self.values
            .get(key)
            .map(|v| match v {
                Value::F32(x) => Ok(f64::from(*x)),
                Value::F64(x) => Ok(*x),
                other => as_i64(other)
                    .map(|x| x as f64)
                    .ok_or_else(|| self.invalid(key, "a number", other)),
            })
            .transpose()
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        self.values
            .get(key)
            .map(|v| match v {
                Value::Bool(b) => Ok(*b),
                other => Err(self.invalid(key, "a bool", other)),
            })
            .transpose()
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&str>> {
        self.values
            .get(key)
            .map(|v| match v {
                Value::String(s) => Ok(s.as_str()),
                other => Err(self.invalid(key, "a string", other)),
            })
            .transpose()
    }

    pub fn str(&self, key: &str) -> Result<&str> {
        self.opt_str(key)?.ok_or_else(|| self.missing(key))
    }

    fn array(&self, key: &str) -> Result<Option<&Vec<Value>>> {
        self.values
            .get(key)
            .map(|v| match v {
                Value::Array(items) => Ok(items),
                other => Err(self.invalid(key, "an array", other)),
            })
            .transpose()
    }

    pub fn opt_str_array(&self, key: &str) -> Result<Option<Vec<&str>>> {
        let Some(items) = self.array(key)? else {
            return Ok(None);
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.as_str()),
                other => Err(self.invalid(&format!("{key}[{i}]"), "a string", other)),
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// An array whose every item `read` converts; an item it refuses is named with its index.
    fn typed_array<T>(&self, key: &str, expected: &str, read: impl Fn(&Value) -> Option<T>) -> Result<Option<Vec<T>>> {
        let Some(items) = self.array(key)? else {
            return Ok(None);
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| read(v).ok_or_else(|| self.invalid(&format!("{key}[{i}]"), expected, v)))
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    pub fn opt_i64_array(&self, key: &str) -> Result<Option<Vec<i64>>> {
        self.typed_array(key, "an integer", as_i64)
    }

    pub fn opt_f64_array(&self, key: &str) -> Result<Option<Vec<f64>>> {
        self.typed_array(key, "a number", |v| match v {
            Value::F32(x) => Some(f64::from(*x)),
            Value::F64(x) => Some(*x),
            other => as_i64(other).map(|x| x as f64),
        })
    }
}
