//! DAPO dynamic sampling: a group whose rewards are all equal has zero advantage under any group
//! baseline, so it only dilutes the batch; drop it before selection. Refilling the batch with fresh
//! questions is the trainer's job (`rollout.max_sampling_rounds`).

use serde::{Deserialize, Serialize};

use crate::advantage::check_rewards;
use crate::error::Error;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UniformFilter {
    /// Indices of the groups with at least two different rewards, increasing.
    pub survivors: Vec<usize>,
    /// How many groups were dropped (a group of one completion counts as uniform).
    pub dropped: usize,
}

pub fn drop_uniform(rewards: &[Vec<f64>]) -> Result<UniformFilter, Error> {
    check_rewards(rewards)?;
    let survivors: Vec<usize> = (0..rewards.len())
        .filter(|&g| rewards[g].iter().any(|&r| r != rewards[g][0]))
        .collect();
    Ok(UniformFilter {
        dropped: rewards.len() - survivors.len(),
        survivors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_uniform_groups_only() {
        let f = drop_uniform(&[
            vec![1.0, 1.0],
            vec![0.0, 1.0],
            vec![0.0],
            vec![0.5, 0.5, 0.25],
        ])
        .unwrap();
        assert_eq!(
            f,
            UniformFilter {
                survivors: vec![1, 3],
                dropped: 2
            }
        );
        assert_eq!(
            drop_uniform(&[vec![1.0], vec![]]),
            Err(Error::EmptyGroup { group: 1 })
        );
    }
}
