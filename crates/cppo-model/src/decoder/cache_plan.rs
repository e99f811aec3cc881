//! Where a prefill's or a decode step's new tokens go in a cache and what they see, with the checks
//! both caches (host and backend) make before any work: the same inputs give the same errors
//! whichever cache the decoder runs over.

use cppo_kernels::backend::CachedQuery;

use super::{Decoder, DecoderError, Result};
use crate::cache_rows::CacheRows;

/// The new tokens' cache rows, visible lengths and positions.
pub(crate) struct Plan {
    pub queries: Vec<CachedQuery>,
    pub positions: Vec<usize>,
}

impl Plan {
    /// `tokens` appended to `row`.
    pub fn prefill(tokens: &[u32], shape: &CacheRows, row: usize) -> Result<Plan> {
        if tokens.is_empty() {
            return Err(DecoderError::BadInput("prefill: no tokens".into()));
        }
        let start = shape.len(row)?;
        let queries = (0..tokens.len()).map(|i| CachedQuery { row, visible: start + i + 1 }).collect();
        Ok(Plan { queries, positions: (start..start + tokens.len()).collect() })
    }

    /// `tokens[i]` appended to `rows[i]`, each row at most once.
    pub fn decode(tokens: &[u32], rows: &[usize], shape: &CacheRows) -> Result<Plan> {
        if tokens.len() != rows.len() {
            return Err(DecoderError::BadInput(format!("decode_step: {} tokens for {} rows", tokens.len(), rows.len())));
        }
        if rows.is_empty() {
            return Err(DecoderError::BadInput("decode_step: no rows".into()));
        }
        let mut seen = vec![false; shape.rows];
        for &r in rows {
            shape.check_row(r)?;
            if std::mem::replace(&mut seen[r], true) {
                return Err(DecoderError::BadInput(format!("decode_step: row {r} given twice")));
            }
        }
        let positions: Vec<usize> = rows.iter().map(|&r| shape.lens[r]).collect();
        let queries = rows.iter().zip(&positions).map(|(&row, &p)| CachedQuery { row, visible: p + 1 }).collect();
        Ok(Plan { queries, positions })
    }

    /// What a run of the plan on `dec` needs to hold: the cache fits the model, every token is in the
    /// vocabulary, and no row runs past its cache row or the model's positions.
    pub fn check(&self, dec: &Decoder, tokens: &[u32], shape: &CacheRows) -> Result<()> {
        let cfg = dec.config();
        shape.matches(cfg)?;
        dec.check_tokens(tokens)?;
        for (c, &p) in self.queries.iter().zip(&self.positions) {
            if p >= shape.max_len {
                return Err(DecoderError::Cache(format!("row {} is full ({} positions)", c.row, shape.max_len)));
            }
            if p >= cfg.max_position_embeddings {
                return Err(DecoderError::BadInput(format!("row {} reaches position {p}, beyond max_position_embeddings {}", c.row, cfg.max_position_embeddings)));
            }
        }
        Ok(())
    }

    /// Records the new tokens in the rows' lengths (after the run).
    pub fn commit(&self, shape: &mut CacheRows) {
        for (c, &p) in self.queries.iter().zip(&self.positions) {
            shape.lens[c.row] = p + 1;
        }
    }
}
