//! A preallocated key/value cache for generation: per layer, keys and values laid out
//! (rows, kv_heads, max_len, head_dim) in f32, and a length per row. Rows are independent slots that a
//! generation engine fills, copies (a prompt prefilled once, shared by its samples), truncates and
//! reuses; a decode step touches only the rows it is given.

use cppo_io::config::ModelConfig;
use crate::cache_rows::CacheRows;
use crate::decoder::Result;
use cppo_kernels::backend::CacheLayout;

#[derive(Clone, Debug)]
pub struct KvCache {
    pub(crate) shape: CacheRows,
    pub(crate) k: Vec<Vec<f32>>,
    pub(crate) v: Vec<Vec<f32>>,
}

impl KvCache {
    /// An empty cache of `rows` rows holding up to `max_len` positions each, for models shaped as `cfg`.
    pub fn new(cfg: &ModelConfig, rows: usize, max_len: usize) -> Result<KvCache> {
        let (shape, per_layer) = CacheRows::new(cfg, rows, max_len)?;
        let layers = shape.layers;
        Ok(KvCache { shape, k: (0..layers).map(|_| vec![0f32; per_layer]).collect(), v: (0..layers).map(|_| vec![0f32; per_layer]).collect() })
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

    pub fn kv_heads(&self) -> usize {
        self.shape.kv_heads
    }

    pub fn head_dim(&self) -> usize {
        self.shape.head_dim
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
        self.shape.bytes(4)
    }

    pub(crate) fn check_row(&self, row: usize) -> Result<()> {
        self.shape.check_row(row)
    }

    /// Empties a row for reuse (its old contents are simply overwritten later).
    pub fn reset_row(&mut self, row: usize) -> Result<()> {
        self.truncate_row(row, 0)
    }

    /// Empties every row.
    pub fn reset(&mut self) {
        self.shape.lens.iter_mut().for_each(|l| *l = 0);
    }

    /// Keeps the first `len` positions of a row (e.g. back to its prompt, to sample again).
    pub fn truncate_row(&mut self, row: usize, len: usize) -> Result<()> {
        self.shape.truncate_row(row, len)
    }

    /// Copies row `from` (its filled positions) into every row of `to`, e.g. a prompt prefilled once
    /// into the rows of its samples.
    pub fn copy_row(&mut self, from: usize, to: &[usize]) -> Result<()> {
        self.check_row(from)?;
        for &t in to {
            self.check_row(t)?;
        }
        let s = &mut self.shape;
        let n = s.lens[from] * s.head_dim;
        let block = s.max_len * s.head_dim;
        for &t in to.iter().filter(|&&t| t != from) {
            for l in 0..s.layers {
                for h in 0..s.kv_heads {
                    let src = (from * s.kv_heads + h) * block;
                    let dst = (t * s.kv_heads + h) * block;
                    self.k[l].copy_within(src..src + n, dst);
                    self.v[l].copy_within(src..src + n, dst);
                }
            }
            s.lens[t] = s.lens[from];
        }
        Ok(())
    }

    /// Where keys and values sit in each layer's buffer, as the kernels read it.
    pub(crate) fn layout(&self) -> CacheLayout {
        self.shape.layout()
    }

    pub(crate) fn set_len(&mut self, row: usize, len: usize) {
        self.shape.lens[row] = len;
    }
}
