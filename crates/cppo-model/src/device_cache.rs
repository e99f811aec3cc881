//! The key/value cache in a backend's memory: per layer, keys and values laid out as the host
//! `KvCache` (rows, kv_heads, max_len, head_dim) in the backend's buffers, and a length per row on
//! the host. Its rows are filled, copied and extended by the decoder's `*_on` entry points
//! (`decoder/on_backend_generate.rs`). Rollouts keep it in bf16 where the backend can (`new_bf16`).

use cppo_io::config::ModelConfig;
use cppo_kernels::backend::Backend;

use crate::cache_rows::CacheRows;
use crate::decoder::Result;

pub struct DeviceCache<B: Backend> {
    pub(crate) shape: CacheRows,
    pub(crate) k: Vec<B::Buf>,
    pub(crate) v: Vec<B::Buf>,
    /// Bytes per element: `T`'s, or 2 for a bf16 cache.
    element_bytes: usize,
}

impl<B: Backend> DeviceCache<B> {
    /// An empty cache in `b`'s memory of `rows` rows holding up to `max_len` positions each, for models
    /// shaped as `cfg`, in `b`'s `T`; the same checks and errors as `KvCache::new`.
    pub fn new(b: &B, cfg: &ModelConfig, rows: usize, max_len: usize) -> Result<DeviceCache<B>> {
        let (shape, per_layer) = CacheRows::new(cfg, rows, max_len)?;
        let layers = shape.layers;
        let zeros = |_| b.zeros(per_layer);
        Ok(DeviceCache { shape, k: (0..layers).map(zeros).collect(), v: (0..layers).map(zeros).collect(), element_bytes: std::mem::size_of::<B::T>() })
    }

    /// As `new`, in bf16 where `b` keeps caches in bf16 (`Backend::bf16_cache_zeros`), else in `T`.
    pub fn new_bf16(b: &B, cfg: &ModelConfig, rows: usize, max_len: usize) -> Result<DeviceCache<B>> {
        let (shape, per_layer) = CacheRows::new(cfg, rows, max_len)?;
        let mut bufs = Vec::with_capacity(2 * shape.layers);
        for _ in 0..2 * shape.layers {
            match b.bf16_cache_zeros(per_layer) {
                Some(buf) => bufs.push(buf),
                None => return Self::new(b, cfg, rows, max_len),
            }
        }
        let v = bufs.split_off(shape.layers);
        Ok(DeviceCache { shape, k: bufs, v, element_bytes: 2 })
    }

    pub fn rows(&self) -> usize {
        self.shape.rows
    }

    pub fn max_len(&self) -> usize {
        self.shape.max_len
    }

    pub fn layers(&self) -> usize {
        self.shape.layers
    }

    /// Positions filled in every row.
    pub fn lens(&self) -> &[usize] {
        &self.shape.lens
    }

    pub fn len(&self, row: usize) -> Result<usize> {
        self.shape.len(row)
    }

    /// Bytes held by the keys and values.
    pub fn bytes(&self) -> usize {
        self.shape.bytes(self.element_bytes)
    }

    /// Whether the keys and values are held in bf16.
    pub fn is_bf16(&self) -> bool {
        self.element_bytes == 2
    }

    /// Empties a row for reuse (its old contents are simply overwritten later).
    pub fn reset_row(&mut self, row: usize) -> Result<()> {
        self.shape.truncate_row(row, 0)
    }
}
