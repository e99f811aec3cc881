//! What a key/value cache knows besides its memory: its shape (layers, rows, kv heads, positions per
//! row, head width) and how many positions each row holds. The host cache (`KvCache`) and a
//! backend's (`DeviceCache`) share it, so both validate rows and lengths with the same errors.

use cppo_io::config::ModelConfig;
use cppo_kernels::backend::CacheLayout;

use crate::decoder::{DecoderError, Result};

#[derive(Clone, Debug)]
pub(crate) struct CacheRows {
    pub layers: usize,
    pub rows: usize,
    pub kv_heads: usize,
    pub max_len: usize,
    pub head_dim: usize,
    pub lens: Vec<usize>,
}

impl CacheRows {
    /// Empty rows for models shaped as `cfg`, with the elements one layer's keys (or values) take.
    pub fn new(cfg: &ModelConfig, rows: usize, max_len: usize) -> Result<(CacheRows, usize)> {
        if rows == 0 || max_len == 0 {
            return Err(DecoderError::Cache(format!("rows ({rows}) and max_len ({max_len}) must be positive")));
        }
        let (layers, kv_heads, head_dim) = (cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim);
        let per_layer = rows
            .checked_mul(kv_heads * max_len * head_dim)
            .ok_or_else(|| DecoderError::Cache("cache size overflows".into()))?;
        Ok((CacheRows { layers, rows, kv_heads, max_len, head_dim, lens: vec![0; rows] }, per_layer))
    }

    pub fn check_row(&self, row: usize) -> Result<()> {
        if row >= self.rows {
            return Err(DecoderError::Cache(format!("row {row} out of range for {} rows", self.rows)));
        }
        Ok(())
    }

    pub fn len(&self, row: usize) -> Result<usize> {
        self.check_row(row)?;
        Ok(self.lens[row])
    }

    pub fn truncate_row(&mut self, row: usize, len: usize) -> Result<()> {
        self.check_row(row)?;
        if len > self.lens[row] {
            return Err(DecoderError::Cache(format!("cannot truncate row {row} of length {} to {len}", self.lens[row])));
        }
        self.lens[row] = len;
        Ok(())
    }

    /// Bytes held by the keys and values, at `elem` bytes an element.
    pub fn bytes(&self, elem: usize) -> usize {
        2 * self.layers * self.rows * self.kv_heads * self.max_len * self.head_dim * elem
    }

    pub fn layout(&self) -> CacheLayout {
        CacheLayout { kv_heads: self.kv_heads, max_len: self.max_len, head_dim: self.head_dim }
    }

    pub fn matches(&self, cfg: &ModelConfig) -> Result<()> {
        if self.layers != cfg.num_hidden_layers || self.kv_heads != cfg.num_key_value_heads || self.head_dim != cfg.head_dim {
            return Err(DecoderError::Cache(format!(
                "cache shaped for {} layers x {} kv heads x {} head_dim does not fit a model with {} x {} x {}",
                self.layers, self.kv_heads, self.head_dim, cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim
            )));
        }
        Ok(())
    }
}
