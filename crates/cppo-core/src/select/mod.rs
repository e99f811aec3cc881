//! Rollout selection: which completions of each question reach the policy update. See
//! `docs/strategies.md` for a worked example of every rule.
//!
//! A strategy only selects ([`Strategy::keep`]): it is given the rewards and the full-group advantages of
//! the advantage stage and returns indices. The advantages the kept completions train with come from
//! that stage too ([`crate::advantage::of_kept`]); the two families differ in which ones, the strategy's
//! [`Basis`]:
//! - the CPPO family (`all`, `cppo`, `cppo-pooled` and the CPPO paper's ablations) keeps the full-group
//!   advantages unchanged;
//! - the PODS family (`pods-max-variance`, `max-reward`, `random`) re-runs the estimator on the kept
//!   subset only, as PODS does.
//!
//! Ties are always broken towards the lower completion index (for `cppo-pooled`, the lower group, then
//! the lower index). Kept indices are reported in increasing order.

mod cppo;
mod dynamic;
mod pods;
mod rank;

use serde::{Deserialize, Serialize};

use crate::advantage::{check_rewards, of_kept, Estimator};
use crate::error::Error;

pub use dynamic::{drop_uniform, UniformFilter};
pub use rank::kept_count;

/// A selection rule. Deserialises from a table whose `kind` is the kebab-case name, e.g.
/// `{ kind = "cppo", pruning_rate = 0.875 }`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Strategy {
    /// Plain GRPO: every completion is kept.
    #[default]
    All,
    /// Per question keep k = floor(G (1 - P)) completions with the largest |A|.
    Cppo { pruning_rate: f64 },
    /// Like `cppo`, but the top-|A| runs over consecutive pools of `pool` questions, keeping
    /// floor(completions in the pool * (1 - P)) per pool (what the official CPPO code does per device).
    CppoPooled { pruning_rate: f64, pool: usize },
    /// PODS: per question keep the m completions whose rewards have the largest variance.
    PodsMaxVariance { m: usize },
    /// Per question keep the m highest rewards.
    MaxReward { m: usize },
    /// Per question keep m completions drawn uniformly, reproducibly from `seed` and the caller's salt.
    Random { m: usize, seed: u64 },
    /// Ablation: prune the largest |A|, i.e. keep the k smallest.
    CppoPruneLargest { pruning_rate: f64 },
    /// Ablation: prune the highest rewards, i.e. keep the k lowest.
    PruneHighestReward { pruning_rate: f64 },
    /// Ablation: prune the lowest rewards, i.e. keep the k highest.
    PruneLowestReward { pruning_rate: f64 },
}

/// What a strategy keeps of one question: indices only, no advantages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    /// Index of the question in the rewards given to `keep`.
    pub group: usize,
    /// Indices of the kept completions within the group, increasing.
    pub kept: Vec<usize>,
}

/// Where the advantages of the kept completions come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// The full group's advantages, unchanged (the CPPO family).
    FullGroup,
    /// The estimator re-run on each group's kept rewards only (the PODS family).
    KeptSubset,
}

/// The completions of one question that go to the update.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeptGroup {
    /// Index of the question in the rewards given to `select`.
    pub group: usize,
    /// Indices of the kept completions within the group, increasing.
    pub kept: Vec<usize>,
    /// The advantage to train each kept completion with, aligned with `kept`.
    pub advantages: Vec<f64>,
}

/// What a strategy keeps for one step. Groups with nothing kept (dropped by the dynamic-sampling filter, or
/// left empty by `cppo-pooled`) do not appear in `groups`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub groups: Vec<KeptGroup>,
    /// Groups dropped by the dynamic-sampling filter because all their rewards were equal.
    pub dropped_uniform: usize,
    /// Questions given to `select`.
    pub questions: usize,
    /// Completions given to `select`.
    pub generated: usize,
}

/// Counts for a metrics line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub questions: usize,
    pub generated: usize,
    pub kept: usize,
    pub groups_kept: usize,
    pub dropped_uniform: usize,
}

impl Selection {
    pub fn kept(&self) -> usize {
        self.groups.iter().map(|g| g.kept.len()).sum()
    }

    pub fn totals(&self) -> Totals {
        Totals {
            questions: self.questions,
            generated: self.generated,
            kept: self.kept(),
            groups_kept: self.groups.len(),
            dropped_uniform: self.dropped_uniform,
        }
    }

    /// Every kept completion as (group, completion index, advantage), in group then index order.
    pub fn iter_kept(&self) -> impl Iterator<Item = (usize, usize, f64)> + '_ {
        self.groups.iter().flat_map(|g| {
            g.kept
                .iter()
                .zip(&g.advantages)
                .map(move |(&i, &a)| (g.group, i, a))
        })
    }
}

/// Strategy, estimator and the optional DAPO filter, as they come from a config file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectionConfig {
    #[serde(default)]
    pub strategy: Strategy,
    #[serde(default)]
    pub estimator: Estimator,
    /// DAPO dynamic sampling: drop groups whose rewards are all equal before the strategy runs.
    #[serde(default)]
    pub dynamic_sampling: bool,
}

impl SelectionConfig {
    /// Selects for one step. `salt` varies the `random` strategy between steps (pass the step number).
    pub fn select(&self, rewards: &[Vec<f64>], salt: u64) -> Result<Selection, Error> {
        if !self.dynamic_sampling {
            return self.strategy.select(&self.estimator, rewards, salt);
        }
        let filter = drop_uniform(rewards)?;
        let survivors: Vec<Vec<f64>> = filter
            .survivors
            .iter()
            .map(|&g| rewards[g].clone())
            .collect();
        let mut selection =
            self.strategy
                .select_among(&self.estimator, &survivors, &filter.survivors, salt)?;
        selection.dropped_uniform = filter.dropped;
        selection.questions = rewards.len();
        selection.generated = rewards.iter().map(Vec::len).sum();
        Ok(selection)
    }
}

impl Strategy {
    /// The kebab-case name used in configs and error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Strategy::All => "all",
            Strategy::Cppo { .. } => "cppo",
            Strategy::CppoPooled { .. } => "cppo-pooled",
            Strategy::PodsMaxVariance { .. } => "pods-max-variance",
            Strategy::MaxReward { .. } => "max-reward",
            Strategy::Random { .. } => "random",
            Strategy::CppoPruneLargest { .. } => "cppo-prune-largest",
            Strategy::PruneHighestReward { .. } => "prune-highest-reward",
            Strategy::PruneLowestReward { .. } => "prune-lowest-reward",
        }
    }

    /// For the strategies that rank each question's completions by one key and keep k of them: the key
    /// and which end of the ranking is kept.
    fn ranking(&self) -> Option<(cppo::Key, rank::Prefer)> {
        match self {
            Strategy::Cppo { .. } => Some((cppo::Key::AbsAdvantage, rank::Prefer::Largest)),
            Strategy::CppoPruneLargest { .. } => Some((cppo::Key::AbsAdvantage, rank::Prefer::Smallest)),
            Strategy::PruneHighestReward { .. } => Some((cppo::Key::Reward, rank::Prefer::Smallest)),
            Strategy::PruneLowestReward { .. } => Some((cppo::Key::Reward, rank::Prefer::Largest)),
            _ => None,
        }
    }

    /// Checks the parameters alone; what depends on the group sizes is checked by `select`.
    pub fn validate(&self) -> Result<(), Error> {
        match *self {
            Strategy::All => Ok(()),
            Strategy::Cppo { pruning_rate }
            | Strategy::CppoPruneLargest { pruning_rate }
            | Strategy::PruneHighestReward { pruning_rate }
            | Strategy::PruneLowestReward { pruning_rate } => rank::check_rate(pruning_rate),
            Strategy::CppoPooled { pruning_rate, pool } => {
                rank::check_rate(pruning_rate)?;
                if pool == 0 {
                    return Err(Error::ZeroPool);
                }
                Ok(())
            }
            Strategy::PodsMaxVariance { m } => check_m(self.name(), m, 2),
            Strategy::MaxReward { m } | Strategy::Random { m, .. } => check_m(self.name(), m, 1),
        }
    }

    /// Where the kept completions' advantages come from (see the module's documentation).
    pub fn basis(&self) -> Basis {
        match self {
            Strategy::PodsMaxVariance { .. } | Strategy::MaxReward { .. } | Strategy::Random { .. } => {
                Basis::KeptSubset
            }
            _ => Basis::FullGroup,
        }
    }

    /// The selection stage alone: which completions of each question go on, given the step's rewards
    /// (one Vec per question) and their full-group `advantages` from the advantage stage (the CPPO
    /// family ranks by them; the PODS family ranks rewards only). `salt` varies the `random` strategy
    /// between steps (pass the step number); other strategies ignore it.
    pub fn keep(
        &self,
        rewards: &[Vec<f64>],
        advantages: &[Vec<f64>],
        salt: u64,
    ) -> Result<Vec<Kept>, Error> {
        let ids: Vec<usize> = (0..rewards.len()).collect();
        self.keep_among(rewards, advantages, &ids, salt)
    }

    /// `keep` over a subset of the step's questions: `ids[i]` is the original index of `rewards[i]`,
    /// used in error messages and to seed `random`; the returned groups are positions in `rewards`.
    fn keep_among(
        &self,
        rewards: &[Vec<f64>],
        advantages: &[Vec<f64>],
        ids: &[usize],
        salt: u64,
    ) -> Result<Vec<Kept>, Error> {
        self.validate()?;
        check_rewards(rewards).map_err(|e| remap(e, ids))?;
        if advantages.len() != rewards.len()
            || advantages.iter().zip(rewards).any(|(a, r)| a.len() != r.len())
        {
            return Err(Error::AdvantageShape);
        }
        match *self {
            Strategy::All => Ok(cppo::keep_all(rewards)),
            Strategy::Cppo { pruning_rate }
            | Strategy::CppoPruneLargest { pruning_rate }
            | Strategy::PruneHighestReward { pruning_rate }
            | Strategy::PruneLowestReward { pruning_rate } => {
                let (key, prefer) = self.ranking().expect("a per-question ranked strategy");
                cppo::per_group(self.name(), key, prefer, pruning_rate, advantages, rewards, ids)
            }
            Strategy::CppoPooled { pruning_rate, pool } => {
                cppo::pooled(self.name(), pruning_rate, pool, advantages, ids)
            }
            Strategy::PodsMaxVariance { m } => pods::keep(pods::Rule::MaxVariance, m, rewards, ids),
            Strategy::MaxReward { m } => pods::keep(pods::Rule::MaxReward, m, rewards, ids),
            Strategy::Random { m, seed } => {
                pods::keep(pods::Rule::Random { seed, salt }, m, rewards, ids)
            }
        }
    }

    /// The three stages a step runs, in order, for callers that want only their result: the advantage
    /// stage over the full groups, this strategy's selection, and the kept completions' advantages
    /// (`advantage::of_kept`). `salt` as for `keep`.
    pub fn select(
        &self,
        estimator: &Estimator,
        rewards: &[Vec<f64>],
        salt: u64,
    ) -> Result<Selection, Error> {
        let ids: Vec<usize> = (0..rewards.len()).collect();
        self.select_among(estimator, rewards, &ids, salt)
    }

    /// `select` over a subset of the step's questions: `ids[i]` is the original index of `rewards[i]`,
    /// used in the output and in error messages.
    fn select_among(
        &self,
        estimator: &Estimator,
        rewards: &[Vec<f64>],
        ids: &[usize],
        salt: u64,
    ) -> Result<Selection, Error> {
        self.validate()?;
        estimator.validate()?;
        check_rewards(rewards).map_err(|e| remap(e, ids))?;
        let full = estimator.advantages(rewards).map_err(|e| remap(e, ids))?;
        let kept = self.keep_among(rewards, &full, ids, salt)?;
        let mut groups = of_kept(estimator, self.basis(), rewards, &full, kept).map_err(|e| remap(e, ids))?;
        for g in &mut groups {
            g.group = ids[g.group];
        }
        Ok(Selection {
            groups,
            dropped_uniform: 0,
            questions: rewards.len(),
            generated: rewards.iter().map(Vec::len).sum(),
        })
    }
}

fn check_m(strategy: &'static str, m: usize, min: usize) -> Result<(), Error> {
    if m < min {
        return Err(Error::KeepTooFew { strategy, m, min });
    }
    Ok(())
}

/// Rewrites the group index of an error raised on a subset of the step's groups to the original index.
pub(crate) fn remap(e: Error, ids: &[usize]) -> Error {
    let orig = |g: usize| ids.get(g).copied().unwrap_or(g);
    match e {
        Error::EmptyGroup { group } => Error::EmptyGroup { group: orig(group) },
        Error::BadReward {
            group,
            index,
            value,
        } => Error::BadReward {
            group: orig(group),
            index,
            value,
        },
        Error::GroupTooSmall {
            estimator,
            group,
            size,
            min,
        } => Error::GroupTooSmall {
            estimator,
            group: orig(group),
            size,
            min,
        },
        other => other,
    }
}
