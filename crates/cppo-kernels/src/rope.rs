//! Rotary position embedding in the Hugging Face ("neox", rotate_half) layout: the first and second
//! halves of each head are the two coordinates of each rotated pair.

use candle_core::{bail, Result};
use rayon::prelude::*;

use super::Float;

/// cos and sin of every (position, frequency) pair, position-major.
#[derive(Debug)]
pub struct RopeTable {
    pub half: usize,
    pub max_positions: usize,
    pub cos32: Vec<f32>,
    pub sin32: Vec<f32>,
    pub cos64: Vec<f64>,
    pub sin64: Vec<f64>,
}

impl RopeTable {
    /// The table of `max_positions` positions for the inverse frequencies `inv` (one per rotated pair:
    /// half the head dimension).
    pub fn new(inv: &[f32], max_positions: usize) -> Result<Self> {
        if inv.is_empty() {
            bail!("rotary embedding needs an even, positive head_dim");
        }
        let half = inv.len();
        let n = max_positions * half;
        let (mut cos32, mut sin32) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut cos64, mut sin64) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for p in 0..max_positions {
            for &f in inv {
                // The angle is an f32 product in Hugging Face; its cos/sin are then taken in f32.
                let angle = (p as f32 * f) as f64;
                let (s, c) = angle.sin_cos();
                cos32.push(c as f32);
                sin32.push(s as f32);
                cos64.push(c);
                sin64.push(s);
            }
        }
        Ok(RopeTable {
            half,
            max_positions,
            cos32,
            sin32,
            cos64,
            sin64,
        })
    }

    pub fn check(&self, position: usize) -> Result<()> {
        if position >= self.max_positions {
            bail!(
                "position {position} is beyond max_position_embeddings {}",
                self.max_positions
            );
        }
        Ok(())
    }
}

/// Rotates every head of every row of `x (rows, heads * 2 * half)` by its row's position; `inverse`
/// applies the transposed rotation (the backward pass of the forward one).
pub fn rope_rows<T: Float>(
    x: &mut [T],
    heads: usize,
    positions: &[usize],
    table: &RopeTable,
    inverse: bool,
) {
    let half = table.half;
    let d = 2 * half;
    let width = heads * d;
    let (cos, sin) = T::rope_table(table);
    let rows_per_task = (8192 / width.max(1)).max(1);
    x.par_chunks_mut(width * rows_per_task)
        .zip(positions.par_chunks(rows_per_task))
        .for_each(|(xb, pb)| {
            for (row, &p) in xb.chunks_exact_mut(width).zip(pb) {
                let c = &cos[p * half..(p + 1) * half];
                let s = &sin[p * half..(p + 1) * half];
                for head in row.chunks_exact_mut(d) {
                    let (a, b) = head.split_at_mut(half);
                    for i in 0..half {
                        let (x1, x2) = (a[i], b[i]);
                        if inverse {
                            a[i] = x1 * c[i] + x2 * s[i];
                            b[i] = x2 * c[i] - x1 * s[i];
                        } else {
                            a[i] = x1 * c[i] - x2 * s[i];
                            b[i] = x2 * c[i] + x1 * s[i];
                        }
                    }
                }
            }
        });
}
