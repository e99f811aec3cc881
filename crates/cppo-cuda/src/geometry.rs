//! How many blocks of how many threads each kind of kernel gets. Every kernel loops over its work
//! (grid-stride), so any geometry is correct and these only decide speed; the tests run each kernel
//! under small geometries too, so the loops really iterate.

use crate::launch::LaunchConfig;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tune {
    /// Threads per block for row-wise and elementwise kernels (whole warps).
    pub block: u32,
    /// The most blocks a launch gets; the device's SM count times the blocks each SM can hold.
    pub max_blocks: u32,
}

impl Default for Tune {
    /// 256 threads, and enough blocks to fill an H100/H200 (132 SMs) eight times over.
    fn default() -> Self {
        Tune { block: 256, max_blocks: 132 * 8 }
    }
}

impl Tune {
    /// For a device with `sms` multiprocessors.
    pub fn for_device(sms: u32) -> Self {
        Tune { max_blocks: sms.max(1) * 8, ..Tune::default() }
    }

    /// One block per row (grid-stride beyond `max_blocks`), threads across the row, which has
    /// `width` elements: a block no wider than the row needs (in whole warps).
    pub fn rows(&self, rows: usize, width: usize) -> LaunchConfig {
        let block = (width.div_ceil(32) * 32).clamp(32, self.block as usize) as u32;
        LaunchConfig::blocks(clamp_blocks(rows, self.max_blocks), block)
    }

    /// Flat elementwise work of `n` elements.
    pub fn flat(&self, n: usize) -> LaunchConfig {
        LaunchConfig::blocks(clamp_blocks(n.div_ceil(self.block as usize), self.max_blocks), self.block)
    }

    /// One block per row exactly (no grid-stride), for kernels whose block state is per row.
    pub fn row_blocks(&self, rows: usize, block: u32) -> LaunchConfig {
        LaunchConfig::blocks(rows.min(i32::MAX as usize) as u32, block)
    }
}

fn clamp_blocks(n: usize, max: u32) -> u32 {
    n.min(max.max(1) as usize) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_blocks_fit_the_row_in_whole_warps_and_grids_are_capped() {
        let t = Tune::default();
        assert_eq!(t.rows(10, 1536).block, (256, 1, 1));
        assert_eq!(t.rows(10, 40).block, (64, 1, 1));
        assert_eq!(t.rows(10, 1).block, (32, 1, 1));
        assert_eq!(t.rows(10, 40).grid, (10, 1, 1));
        assert_eq!(t.rows(1_000_000, 40).grid, (1056, 1, 1));
        assert_eq!(t.flat(0).grid.0, 0);
        assert_eq!(t.flat(257).grid.0, 2);
        assert_eq!(Tune::for_device(114).max_blocks, 912);
    }
}
