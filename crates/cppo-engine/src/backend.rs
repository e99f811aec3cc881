//! What the engine needs from a model: a batch of KV-cache rows it can fill, copy and extend, and a
//! sampler over the logits it returns. The decoder implements it (on the CPU, and on a kernel backend
//! that keeps weights, cache and logits in its own memory); tests implement it with a tiny fake whose
//! next-token logits are known.

use anyhow::Result;

use crate::sampling::SamplingParams;

pub trait Backend {
    type Cache;
    /// Rows of next-token logits as the backend keeps them: on the host (`Vec<f32>`, row-major), or in a
    /// device's memory until they are sampled there.
    type Logits;

    fn vocab_size(&self) -> usize;

    /// A cache of `rows` rows, each holding up to `max_len` positions.
    fn new_cache(&self, rows: usize, max_len: usize) -> Result<Self::Cache>;

    /// Empties `row` and runs `tokens` through it; returns the logits after the last token (one row).
    fn prefill(&self, cache: &mut Self::Cache, row: usize, tokens: &[u32]) -> Result<Self::Logits>;

    /// Makes each row of `to` hold the same contents as `from` (a shared prompt computed once).
    fn copy_row(&self, cache: &mut Self::Cache, from: usize, to: &[usize]) -> Result<()>;

    /// Appends `tokens[i]` to row `rows[i]` and returns the next-token logits of every given row, in
    /// that order (`rows.len()` rows). Rows not given cost nothing.
    fn decode(&self, cache: &mut Self::Cache, rows: &[usize], tokens: &[u32]) -> Result<Self::Logits>;

    /// One token and its log-prob for each `(logits, row)` of `at`, drawing with `draws[i]` after the
    /// repetition penalty on that row's earlier tokens `seen[i]` (`cppo_kernels::sample::sample_rows`'
    /// semantics; `seen` is empty without a penalty). Host backends call `sampling::sample_on_host`.
    fn sample(&self, at: &[(&Self::Logits, usize)], draws: &[f64], params: &SamplingParams, seen: &[&[u32]]) -> Result<Vec<(u32, f32)>>;
}
