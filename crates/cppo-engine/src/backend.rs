//! What the engine needs from a model: a batch of KV-cache rows it can fill, copy and extend.
//! The decoder implements it; tests implement it with a tiny fake whose next-token logits are known.

use anyhow::Result;

pub trait Backend {
    type Cache;

    fn vocab_size(&self) -> usize;

    /// A cache of `rows` rows, each holding up to `max_len` positions.
    fn new_cache(&self, rows: usize, max_len: usize) -> Result<Self::Cache>;

    /// Empties `row` and runs `tokens` through it; returns the logits after the last token.
    fn prefill(&self, cache: &mut Self::Cache, row: usize, tokens: &[u32]) -> Result<Vec<f32>>;

    /// Makes each row of `to` hold the same contents as `from` (a shared prompt computed once).
    fn copy_row(&self, cache: &mut Self::Cache, from: usize, to: &[usize]) -> Result<()>;

    /// Appends `tokens[i]` to row `rows[i]` and returns the next-token logits of every given row,
    /// row-major (`rows.len() * vocab_size`). Rows not given cost nothing.
    fn decode(&self, cache: &mut Self::Cache, rows: &[usize], tokens: &[u32]) -> Result<Vec<f32>>;
}
