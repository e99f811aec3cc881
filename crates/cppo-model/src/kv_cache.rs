//! A preallocated key/value cache for generation: per layer, keys and values laid out
//! (rows, kv_heads, max_len, head_dim) in f32, and a length per row. Rows are independent slots that a
//! generation engine fills, copies (a prompt prefilled once, shared by its samples), truncates and
//! reuses; a decode step touches only the rows it is given.

use cppo_io::config::ModelConfig;
use crate::decoder::{DecoderError, Result};
use cppo_kernels::backend::CacheLayout;

#[derive(Clone, Debug)]
pub struct KvCache {
    layers: usize,
    rows: usize,
    kv_heads: usize,
    max_len: usize,
    head_dim: usize,
    pub(crate) k: Vec<Vec<f32>>,
    pub(crate) v: Vec<Vec<f32>>,
    lens: Vec<usize>,
}

impl KvCache {
    /// An empty cache of `rows` rows holding up to `max_len` positions each, for models shaped as `cfg`.
    pub fn new(cfg: &ModelConfig, rows: usize, max_len: usize) -> Result<KvCache> {
        if rows == 0 || max_len == 0 {
            return Err(DecoderError::Cache(format!("rows ({rows}) and max_len ({max_len}) must be positive")));
        }
        let (layers, kv_heads, head_dim) = (cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim);
        let per_layer = rows
            .checked_mul(kv_heads * max_len * head_dim)
            .ok_or_else(|| DecoderError::Cache("cache size overflows".into()))?;
        Ok(KvCache {
            layers,
            rows,
            kv_heads,
            max_len,
            head_dim,
            k: (0..layers).map(|_| vec![0f32; per_layer]).collect(),
            v: (0..layers).map(|_| vec![0f32; per_layer]).collect(),
            lens: vec![0; rows],
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn max_len(&self) -> usize {
        self.max_len
    }

    pub fn layers(&self) -> usize {
        self.layers
    }

    pub fn kv_heads(&self) -> usize {
        self.kv_heads
    }

    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// Positions filled in every row.
    pub fn lens(&self) -> &[usize] {
        &self.lens
    }

    pub fn len(&self, row: usize) -> Result<usize> {
        self.check_row(row)?;
        Ok(self.lens[row])
    }

    /// Bytes held by the keys and values.
    pub fn bytes(&self) -> usize {
        2 * self.layers * self.rows * self.kv_heads * self.max_len * self.head_dim * 4
    }

    pub(crate) fn check_row(&self, row: usize) -> Result<()> {
        if row >= self.rows {
            return Err(DecoderError::Cache(format!("row {row} out of range for {} rows", self.rows)));
        }
        Ok(())
    }

    /// Empties a row for reuse (its old contents are simply overwritten later).
    pub fn reset_row(&mut self, row: usize) -> Result<()> {
        self.truncate_row(row, 0)
    }

    /// Empties every row.
    pub fn reset(&mut self) {
        self.lens.iter_mut().for_each(|l| *l = 0);
    }

    /// Keeps the first `len` positions of a row (e.g. back to its prompt, to sample again).
    pub fn truncate_row(&mut self, row: usize, len: usize) -> Result<()> {
        self.check_row(row)?;
        if len > self.lens[row] {
            return Err(DecoderError::Cache(format!("cannot truncate row {row} of length {} to {len}", self.lens[row])));
        }
        self.lens[row] = len;
        Ok(())
    }

    /// Copies row `from` (its filled positions) into every row of `to`, e.g. a prompt prefilled once
    /// into the rows of its samples.
    pub fn copy_row(&mut self, from: usize, to: &[usize]) -> Result<()> {
        self.check_row(from)?;
        for &t in to {
            self.check_row(t)?;
        }
        let n = self.lens[from] * self.head_dim;
        let block = self.max_len * self.head_dim;
        for &t in to.iter().filter(|&&t| t != from) {
            for l in 0..self.layers {
                for h in 0..self.kv_heads {
                    let src = (from * self.kv_heads + h) * block;
                    let dst = (t * self.kv_heads + h) * block;
                    self.k[l].copy_within(src..src + n, dst);
                    self.v[l].copy_within(src..src + n, dst);
                }
            }
            self.lens[t] = self.lens[from];
        }
        Ok(())
    }

    /// Where keys and values sit in each layer's buffer, as the kernels read it.
    pub(crate) fn layout(&self) -> CacheLayout {
        CacheLayout { kv_heads: self.kv_heads, max_len: self.max_len, head_dim: self.head_dim }
    }

    pub(crate) fn set_len(&mut self, row: usize, len: usize) {
        self.lens[row] = len;
    }

    pub(crate) fn matches(&self, cfg: &ModelConfig) -> Result<()> {
        if self.layers != cfg.num_hidden_layers || self.kv_heads != cfg.num_key_value_heads || self.head_dim != cfg.head_dim {
            return Err(DecoderError::Cache(format!(
                "cache shaped for {} layers x {} kv heads x {} head_dim does not fit a model with {} x {} x {}",
                self.layers, self.kv_heads, self.head_dim, cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim
            )));
        }
        Ok(())
    }
}
