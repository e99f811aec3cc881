//! The advantage stage and the selection stage apart: a strategy only selects, from the rewards and the
//! advantages it is handed; the kept completions' advantages come from `advantage::of_kept`. Checked
//! against brute force over every subset and against the estimator run by hand.

mod common;

use common::*;
use cppo_core::advantage::of_kept;
use cppo_core::select::kept_count;
use cppo_core::{Basis, Estimator, Strategy as Rule};
use proptest::prelude::*;

fn estimator(which: usize) -> Estimator {
    [
        Estimator::default(),
        Estimator::DrGrpo,
        Estimator::Rloo,
        Estimator::ReinforcePlusPlus { std: cppo_core::StdKind::Population, eps: 1e-8 },
    ][which]
}

/// Any advantages shaped like `rewards` (not those of an estimator): what `keep` does with them is its
/// own rule, whoever computed them.
fn shaped_like(rewards: &[Vec<f64>]) -> impl Strategy<Value = Vec<Vec<f64>>> {
    rewards.iter().map(|g| prop::collection::vec(-4.0f64..4.0, g.len())).collect::<Vec<_>>()
}

fn rules(g: usize, p: f64) -> Vec<Rule> {
    let m = g.clamp(2, 3).min(g);
    let mut r = vec![
        Rule::All,
        Rule::Cppo { pruning_rate: p },
        Rule::CppoPooled { pruning_rate: p, pool: 2 },
        Rule::CppoPruneLargest { pruning_rate: p },
        Rule::PruneHighestReward { pruning_rate: p },
        Rule::PruneLowestReward { pruning_rate: p },
        Rule::MaxReward { m: 1 },
        Rule::Random { m: 1, seed: 9 },
    ];
    if m >= 2 {
        r.push(Rule::PodsMaxVariance { m });
    }
    r
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `cppo` keeps, per question, the k indices of largest |A| of the advantages it is handed: brute
    /// force over every k-subset, ties to the lower index.
    #[test]
    fn cppo_keeps_the_largest_of_the_advantages_it_is_given(
        (rewards, adv) in equal_batch().prop_flat_map(|r| { let a = shaped_like(&r); (Just(r), a) }),
        p in prop_oneof![Just(0.5), Just(0.75), 0.0f64..0.9],
    ) {
        let k = kept_count(rewards[0].len(), p);
        prop_assume!(k >= 1);
        let kept = Rule::Cppo { pruning_rate: p }.keep(&rewards, &adv, 0).unwrap();
        prop_assert_eq!(kept.len(), rewards.len());
        for (g, kg) in kept.iter().enumerate() {
            prop_assert_eq!(kg.group, g);
            prop_assert_eq!(kg.kept.len(), k);
            assert_increasing_distinct(&kg.kept, rewards[g].len());
            let keys: Vec<f64> = adv[g].iter().map(|a| a.abs()).collect();
            assert_ordered(&keys, &kg.kept, true);
            let sum = |s: &[usize]| s.iter().map(|&i| keys[i]).sum::<f64>();
            let best = subsets(keys.len(), k).iter().map(|s| sum(s)).fold(f64::MIN, f64::max);
            prop_assert!((sum(&kg.kept) - best).abs() <= 1e-9 * (1.0 + best));
        }
    }

    /// The PODS family ranks rewards only: the advantages handed to it change nothing.
    #[test]
    fn pods_family_ignores_the_advantages(
        (rewards, a1, a2) in equal_batch().prop_flat_map(|r| { let (a, b) = (shaped_like(&r), shaped_like(&r)); (Just(r), a, b) }),
        salt in any::<u64>(),
    ) {
        let g = rewards[0].len();
        for rule in rules(g, 0.5).into_iter().filter(|r| r.basis() == Basis::KeptSubset) {
            prop_assert_eq!(rule.keep(&rewards, &a1, salt).unwrap(), rule.keep(&rewards, &a2, salt).unwrap(), "{:?}", rule);
        }
    }

    /// `select` is exactly the stages in order (advantages, keep, of_kept), and `of_kept` is the
    /// full-group advantages at the kept indices (CPPO family) or the estimator run by hand on each
    /// kept subset (PODS family).
    #[test]
    fn select_is_the_stages_in_order(rewards in equal_batch(), which in 0usize..4, salt in any::<u64>()) {
        let est = estimator(which);
        let g = rewards[0].len();
        prop_assume!(g >= 2 || est != Estimator::Rloo);
        for rule in rules(g, 0.5) {
            let full = est.advantages(&rewards).unwrap();
            let whole = rule.select(&est, &rewards, salt);
            // A rule that keeps nothing (k = 0) fails alike either way.
            let kept = match rule.keep(&rewards, &full, salt) {
                Ok(k) => k,
                Err(e) => {
                    prop_assert_eq!(Err(e), whole.map(|_| ()), "{:?}", rule);
                    continue;
                }
            };
            let staged = of_kept(&est, rule.basis(), &rewards, &full, kept.clone());
            match (&staged, &whole) {
                (Ok(s), Ok(w)) => prop_assert_eq!(s, &w.groups, "{:?}", rule),
                (Err(a), Err(b)) => prop_assert_eq!(a, b, "{:?}", rule),
                _ => prop_assert!(false, "{:?}: staged {:?} but select {:?}", rule, staged, whole),
            }
            let Ok(staged) = staged else { continue };
            for (k, s) in kept.iter().zip(&staged) {
                prop_assert_eq!(&s.kept, &k.kept);
                let want = match rule.basis() {
                    Basis::FullGroup => pick(&full[k.group], &k.kept),
                    Basis::KeptSubset => est.advantages(&[pick(&rewards[k.group], &k.kept)]).unwrap().remove(0),
                };
                // A batch-level estimator (REINFORCE++) re-run on the kept subsets sees them all at once.
                if rule.basis() == Basis::FullGroup || !matches!(est, Estimator::ReinforcePlusPlus { .. }) {
                    prop_assert_eq!(&s.advantages, &want, "{:?}", rule);
                }
            }
        }
    }
}

#[test]
fn advantages_not_shaped_like_the_rewards_are_an_error() {
    let rewards = vec![vec![0.0, 1.0], vec![1.0, 1.0]];
    for adv in [vec![vec![0.5, -0.5]], vec![vec![0.5, -0.5], vec![0.0]]] {
        assert_eq!(Rule::All.keep(&rewards, &adv, 0), Err(cppo_core::Error::AdvantageShape));
    }
}
