//! The CPPO family: completions are kept by a key (the full-group |A| or the reward) with
//! k = floor(G (1 - P)) per question, or per pool of questions for `cppo-pooled`. Groups in the output
//! are positions in the rewards given; `ids` name them in errors.

use super::rank::{best, kept_count, Prefer};
use super::Kept;
use crate::error::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    AbsAdvantage,
    Reward,
}

pub(crate) fn keep_all(rewards: &[Vec<f64>]) -> Vec<Kept> {
    rewards
        .iter()
        .enumerate()
        .map(|(group, r)| Kept {
            group,
            kept: (0..r.len()).collect(),
        })
        .collect()
}

pub(crate) fn per_group(
    strategy: &'static str,
    key: Key,
    prefer: Prefer,
    pruning_rate: f64,
    adv: &[Vec<f64>],
    rewards: &[Vec<f64>],
    ids: &[usize],
) -> Result<Vec<Kept>, Error> {
    let Some(g_size) = equal_group_size(strategy, rewards, ids)? else {
        return Ok(Vec::new());
    };
    let k = kept_count(g_size, pruning_rate);
    if k == 0 {
        return Err(Error::NothingKept {
            total: g_size,
            pruning_rate,
            context: " per question".into(),
        });
    }
    Ok(adv
        .iter()
        .zip(rewards)
        .enumerate()
        .map(|(group, (a, r))| {
            let keys: Vec<f64> = match key {
                Key::AbsAdvantage => a.iter().map(|x| x.abs()).collect(),
                Key::Reward => r.clone(),
            };
            Kept {
                group,
                kept: best(&keys, prefer, k),
            }
        })
        .collect())
}

/// Consecutive pools of `pool` questions (the last one may be smaller); in each, the
/// floor(completions * (1 - P)) largest |A| over all its completions are kept.
pub(crate) fn pooled(
    strategy: &'static str,
    pruning_rate: f64,
    pool: usize,
    adv: &[Vec<f64>],
    ids: &[usize],
) -> Result<Vec<Kept>, Error> {
    equal_group_size(strategy, adv, ids)?;
    let mut out = Vec::new();
    for (p, (chunk_adv, chunk_ids)) in adv.chunks(pool).zip(ids.chunks(pool)).enumerate() {
        // Flattened in group-then-index order, so the rank's lower-index tie rule means lower group first.
        let flat: Vec<(usize, usize)> = chunk_adv
            .iter()
            .enumerate()
            .flat_map(|(g, a)| (0..a.len()).map(move |i| (g, i)))
            .collect();
        let keys: Vec<f64> = flat.iter().map(|&(g, i)| chunk_adv[g][i].abs()).collect();
        let k = kept_count(flat.len(), pruning_rate);
        if k == 0 {
            return Err(Error::NothingKept {
                total: flat.len(),
                pruning_rate,
                context: format!(
                    " in pool {p} (questions {}..={})",
                    chunk_ids[0],
                    chunk_ids[chunk_ids.len() - 1]
                ),
            });
        }
        let mut per_group: Vec<Vec<usize>> = vec![Vec::new(); chunk_adv.len()];
        for pos in best(&keys, Prefer::Largest, k) {
            let (g, i) = flat[pos];
            per_group[g].push(i);
        }
        for (g, kept) in per_group.into_iter().enumerate() {
            if !kept.is_empty() {
                out.push(Kept {
                    group: p * pool + g,
                    kept,
                });
            }
        }
    }
    Ok(out)
}

/// The common group size G, or None when there are no groups.
fn equal_group_size(
    strategy: &'static str,
    rewards: &[Vec<f64>],
    ids: &[usize],
) -> Result<Option<usize>, Error> {
    let Some(first) = rewards.first() else {
        return Ok(None);
    };
    let expected = first.len();
    match rewards.iter().position(|g| g.len() != expected) {
        Some(g) => Err(Error::UnequalGroups {
            strategy,
            first: ids[0],
            expected,
            group: ids[g],
            size: rewards[g].len(),
        }),
        None => Ok(Some(expected)),
    }
}
