//! CPPO's dynamic completion allocation: choose how many questions b to sample per step so that the kept
//! completions fill the update's capacity C. With k kept per question, b = floor(C / k). The planner never
//! rounds up (that would overfill the update) and never changes the group size G: when k does not divide
//! C, the remainder is reported as `unused_capacity`. In the paper's terms a base of B questions at G
//! each has capacity B * G (see [`capacity_for_base`]), so b = B * G / k.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::select::{kept_count, SelectionConfig, Strategy};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// G, unchanged from the input.
    pub group_size: usize,
    /// b, the questions to sample per step.
    pub questions_per_step: usize,
    /// k (m for the PODS family, G for `all`); `None` for `cppo-pooled`, whose count varies by question.
    pub kept_per_question: Option<usize>,
    /// b * G.
    pub completions_generated: usize,
    /// Completions the update receives, <= the capacity.
    pub completions_kept: usize,
    /// Capacity minus kept completions.
    pub unused_capacity: usize,
}

/// Plans b = floor(capacity / kept_per_question) questions of `group_size` completions each.
pub fn plan(capacity: usize, group_size: usize, kept_per_question: usize) -> Result<Plan, Error> {
    check_sizes(capacity, group_size)?;
    if kept_per_question == 0 {
        return Err(Error::ZeroKept);
    }
    if kept_per_question > group_size {
        return Err(Error::KeptExceedsGroup {
            kept: kept_per_question,
            group_size,
        });
    }
    plan_units(capacity, group_size, 1, kept_per_question).map(|p| Plan {
        kept_per_question: Some(kept_per_question),
        ..p
    })
}

/// Plans for a pruning rate: k = floor(G (1 - P)).
pub fn plan_pruned(capacity: usize, group_size: usize, pruning_rate: f64) -> Result<Plan, Error> {
    Strategy::Cppo { pruning_rate }.plan(capacity, group_size)
}

/// The capacity of a GRPO baseline with `base_questions` questions of G completions: B * G.
pub fn capacity_for_base(base_questions: usize, group_size: usize) -> Result<usize, Error> {
    base_questions
        .checked_mul(group_size)
        .ok_or(Error::Overflow {
            what: "base questions * G",
        })
}

impl Strategy {
    /// The allocation plan for this strategy at `capacity` kept completions per step.
    pub fn plan(&self, capacity: usize, group_size: usize) -> Result<Plan, Error> {
        self.validate()?;
        check_sizes(capacity, group_size)?;
        match *self {
            Strategy::All => plan(capacity, group_size, group_size),
            Strategy::Cppo { pruning_rate }
            | Strategy::CppoPruneLargest { pruning_rate }
            | Strategy::PruneHighestReward { pruning_rate }
            | Strategy::PruneLowestReward { pruning_rate } => {
                let k = kept_count(group_size, pruning_rate);
                if k == 0 {
                    return Err(Error::NothingKept {
                        total: group_size,
                        pruning_rate,
                        context: " per question".into(),
                    });
                }
                plan(capacity, group_size, k)
            }
            Strategy::PodsMaxVariance { m }
            | Strategy::MaxReward { m }
            | Strategy::Random { m, .. } => plan(capacity, group_size, m),
            Strategy::CppoPooled { pruning_rate, pool } => {
                // Plan in whole pools, each keeping floor(pool * G * (1 - P)) completions, so that the
                // selection never meets a partial pool.
                let pool_completions = pool
                    .checked_mul(group_size)
                    .ok_or(Error::Overflow { what: "pool * G" })?;
                let per_pool = kept_count(pool_completions, pruning_rate);
                if per_pool == 0 {
                    return Err(Error::NothingKept {
                        total: pool_completions,
                        pruning_rate,
                        context: format!(" per pool of {pool} questions"),
                    });
                }
                plan_units(capacity, group_size, pool, per_pool)
            }
        }
    }
}

impl SelectionConfig {
    /// The allocation plan of the configured strategy; the dynamic-sampling filter can only lower the
    /// kept count below the plan's.
    pub fn plan(&self, capacity: usize, group_size: usize) -> Result<Plan, Error> {
        self.strategy.plan(capacity, group_size)
    }
}

fn check_sizes(capacity: usize, group_size: usize) -> Result<(), Error> {
    if capacity == 0 {
        return Err(Error::ZeroCapacity);
    }
    if group_size == 0 {
        return Err(Error::ZeroGroupSize);
    }
    Ok(())
}

/// As many units of `questions` questions keeping `kept` each as fit in `capacity`.
fn plan_units(
    capacity: usize,
    group_size: usize,
    questions: usize,
    kept: usize,
) -> Result<Plan, Error> {
    if capacity < kept {
        return Err(Error::CapacityTooSmall { capacity, kept });
    }
    let units = capacity / kept;
    let b = units.checked_mul(questions).ok_or(Error::Overflow {
        what: "questions per step",
    })?;
    let completions_generated = b.checked_mul(group_size).ok_or(Error::Overflow {
        what: "questions per step * G",
    })?;
    Ok(Plan {
        group_size,
        questions_per_step: b,
        kept_per_question: None,
        completions_generated,
        completions_kept: units * kept,
        unused_capacity: capacity - units * kept,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_example() {
        // B = 16 questions at G = 16; P = 0.875 keeps k = 2, so 128 questions fill the same update.
        let c = capacity_for_base(16, 16).unwrap();
        let p = plan_pruned(c, 16, 0.875).unwrap();
        assert_eq!(
            p,
            Plan {
                group_size: 16,
                questions_per_step: 128,
                kept_per_question: Some(2),
                completions_generated: 2048,
                completions_kept: 256,
                unused_capacity: 0
            }
        );
    }

    #[test]
    fn remainder_is_reported_not_rounded_up() {
        let p = plan(10, 8, 3).unwrap();
        assert_eq!(
            (p.questions_per_step, p.completions_kept, p.unused_capacity),
            (3, 9, 1)
        );
    }

    #[test]
    fn pooled_plans_whole_pools() {
        // pool of 4 questions at G = 16, P = 0.9: floor(64 * 0.1) = 6 kept per pool.
        let p = Strategy::CppoPooled {
            pruning_rate: 0.9,
            pool: 4,
        }
        .plan(20, 16)
        .unwrap();
        assert_eq!(
            (p.questions_per_step, p.completions_kept, p.unused_capacity),
            (12, 18, 2)
        );
        assert_eq!(p.kept_per_question, None);
    }

    #[test]
    fn errors() {
        assert_eq!(plan(0, 8, 2), Err(Error::ZeroCapacity));
        assert_eq!(plan(8, 0, 2), Err(Error::ZeroGroupSize));
        assert_eq!(plan(8, 8, 0), Err(Error::ZeroKept));
        assert_eq!(
            plan(8, 8, 9),
            Err(Error::KeptExceedsGroup {
                kept: 9,
                group_size: 8
            })
        );
        assert_eq!(
            plan(3, 8, 4),
            Err(Error::CapacityTooSmall {
                capacity: 3,
                kept: 4
            })
        );
        assert_eq!(plan_pruned(8, 8, 1.0), Err(Error::BadPruningRate(1.0)));
        assert!(matches!(
            plan_pruned(8, 8, 0.95),
            Err(Error::NothingKept { total: 8, .. })
        ));
        assert_eq!(
            Strategy::PodsMaxVariance { m: 1 }.plan(8, 8),
            Err(Error::KeepTooFew {
                strategy: "pods-max-variance",
                m: 1,
                min: 2
            })
        );
        assert_eq!(
            Strategy::CppoPooled {
                pruning_rate: 0.5,
                pool: 0
            }
            .plan(8, 8),
            Err(Error::ZeroPool)
        );
        assert_eq!(
            capacity_for_base(usize::MAX, 2),
            Err(Error::Overflow {
                what: "base questions * G"
            })
        );
        assert_eq!(
            plan(usize::MAX, usize::MAX, 1),
            Err(Error::Overflow {
                what: "questions per step * G"
            })
        );
    }
}
