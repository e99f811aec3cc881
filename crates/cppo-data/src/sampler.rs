//! Batches of problems in a fresh seeded order each epoch, with a cursor small enough to checkpoint: each
//! epoch's order is recomputed from `(seed, epoch)`, so no RNG state has to be saved.

use cppo_core::Problem;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};

/// Where a [`Sampler`] stands; save it with a checkpoint and pass it to [`Sampler::restore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SamplerState {
    pub seed: u64,
    /// Completed passes over the list.
    pub epoch: u64,
    /// How many problems of the current epoch's order have been handed out.
    pub position: usize,
    /// The list's length, checked on restore so a state is never applied to a different list.
    pub len: usize,
}

#[derive(Clone, Debug)]
pub struct Sampler {
    problems: Vec<Problem>,
    order: Vec<usize>,
    state: SamplerState,
}

impl Sampler {
    pub fn new(problems: Vec<Problem>, seed: u64) -> Result<Self> {
        let len = problems.len();
        Self::restore(
            problems,
            SamplerState {
                seed,
                epoch: 0,
                position: 0,
                len,
            },
        )
    }

    /// A sampler that continues exactly where the one that produced `state` stopped.
    pub fn restore(problems: Vec<Problem>, state: SamplerState) -> Result<Self> {
        if problems.is_empty() {
            return Err(DataError::Sampler(
                "cannot sample from an empty problem list".to_owned(),
            ));
        }
        if state.len != problems.len() {
            return Err(DataError::Sampler(format!(
                "saved state is for a list of {} problems, but this list has {}",
                state.len,
                problems.len()
            )));
        }
        if state.position > state.len {
            return Err(DataError::Sampler(format!(
                "saved position {} is past the end of a list of {}",
                state.position, state.len
            )));
        }
        let order = epoch_order(state.seed, state.epoch, state.len);
        Ok(Sampler {
            problems,
            order,
            state,
        })
    }

    pub fn state(&self) -> SamplerState {
        self.state
    }

    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    pub fn len(&self) -> usize {
        self.problems.len()
    }

    /// Always false: an empty list is refused at construction.
    pub fn is_empty(&self) -> bool {
        self.problems.is_empty()
    }

    /// The indices of the next `b` problems. A batch that runs past the end of an epoch continues in the
    /// next epoch's order, so every batch has exactly `b` entries.
    pub fn next_indices(&mut self, b: usize) -> Vec<usize> {
        let mut batch = Vec::with_capacity(b);
        while batch.len() < b {
            if self.state.position == self.state.len {
                self.state.epoch += 1;
                self.state.position = 0;
                self.order = epoch_order(self.state.seed, self.state.epoch, self.state.len);
            }
            let take = (b - batch.len()).min(self.state.len - self.state.position);
            batch.extend_from_slice(&self.order[self.state.position..self.state.position + take]);
            self.state.position += take;
        }
        batch
    }

    pub fn next_batch(&mut self, b: usize) -> Vec<Problem> {
        self.next_indices(b)
            .into_iter()
            .map(|i| self.problems[i].clone())
            .collect()
    }
}

/// A permutation of `0..len` that depends only on `(seed, epoch)`.
fn epoch_order(seed: u64, epoch: u64, len: usize) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(epoch);
    let mut order: Vec<usize> = (0..len).collect();
    order.shuffle(&mut rng);
    order
}

/// The first `n` problems (all of them when there are fewer), the usual fixed evaluation subset.
pub fn take(problems: &[Problem], n: usize) -> Vec<Problem> {
    problems[..n.min(problems.len())].to_vec()
}

/// `n` problems chosen at random by `seed`, kept in their original order.
pub fn take_random(problems: &[Problem], n: usize, seed: u64) -> Vec<Problem> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut chosen =
        rand::seq::index::sample(&mut rng, problems.len(), n.min(problems.len())).into_vec();
    chosen.sort_unstable();
    chosen.into_iter().map(|i| problems[i].clone()).collect()
}
