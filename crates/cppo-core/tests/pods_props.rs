//! The PODS family against brute force over every m-subset (n <= 10).

mod common;

use common::*;
use cppo_core::{Estimator, Strategy as Rule};
use proptest::prelude::*;

/// The subset `pods-max-variance` keeps from one group.
fn max_variance_subset(r: &[f64], m: usize) -> Vec<usize> {
    let sel = Rule::PodsMaxVariance { m }
        .select(&Estimator::DrGrpo, &[r.to_vec()], 0)
        .unwrap();
    sel.groups[0].kept.clone()
}

/// The subset `random` keeps from group `group` of a step whose groups all have `n` completions.
fn random_subset(n: usize, m: usize, seed: u64, salt: u64, group: usize) -> Vec<usize> {
    let rewards = vec![vec![0.0; n]; group + 1];
    let sel = Rule::Random { m, seed }
        .select(&Estimator::DrGrpo, &rewards, salt)
        .unwrap();
    sel.groups[group].kept.clone()
}

fn group_and_m(min_m: usize) -> impl Strategy<Value = (Vec<f64>, usize)> {
    (min_m.max(1)..=10usize).prop_flat_map(move |n| (group(n), min_m..=n))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn max_variance_matches_brute_force((r, m) in group_and_m(2)) {
        let kept = max_variance_subset(&r, m);
        prop_assert_eq!(kept.len(), m);
        assert_increasing_distinct(&kept, r.len());
        let got = variance(&pick(&r, &kept));
        let best = subsets(r.len(), m).iter().map(|s| variance(&pick(&r, s))).fold(f64::MIN, f64::max);
        prop_assert!((got - best).abs() <= 1e-9 * (1.0 + best), "got {} best {} for {:?} m {}", got, best, r, m);
    }

    /// With c correct of n, the best m-subset holds as close to m/2 correct ones as the counts allow.
    #[test]
    fn binary_closed_form(
        (r, c, m) in (2usize..=10, 0usize..=10, 2usize..=10)
            .prop_filter("c, m <= n", |&(n, c, m)| c <= n && m <= n)
            .prop_flat_map(|(n, c, m)| {
                let v: Vec<f64> = (0..n).map(|i| if i < c { 1.0 } else { 0.0 }).collect();
                (Just(v).prop_shuffle(), Just(c), Just(m))
            }),
    ) {
        let n = r.len();
        let kept = max_variance_subset(&r, m);
        let correct = kept.iter().filter(|&&i| r[i] == 1.0).count();
        let (lo, hi) = (m.saturating_sub(n - c), c.min(m));
        let half = m as f64 / 2.0;
        let closest = (lo..=hi).map(|k| (k as f64 - half).abs()).fold(f64::MAX, f64::min);
        prop_assert_eq!((correct as f64 - half).abs(), closest, "c {} of n {}, m {}: kept {} correct", c, n, m, correct);
        // And that is the brute-force maximum, k (m - k) / m^2.
        let best = subsets(n, m).iter().map(|s| variance(&pick(&r, s))).fold(f64::MIN, f64::max);
        let k = correct as f64;
        let closed = k * (m as f64 - k) / (m * m) as f64;
        prop_assert!((closed - best).abs() < 1e-12, "closed form {} vs brute force {}", closed, best);
    }

    /// Among equal rewards the lowest indices are kept.
    #[test]
    fn max_variance_ties_keep_lower_indices((r, m) in group_and_m(2)) {
        let kept = max_variance_subset(&r, m);
        for &k in &kept {
            for p in complement(r.len(), &kept) {
                prop_assert!(!(r[k] == r[p] && p < k), "pruned {} before kept {} with equal reward in {:?}", p, k, r);
            }
        }
    }

    /// The strategy keeps the rule's subset and recomputes advantages on it, for every estimator.
    #[test]
    fn pods_recomputes_advantages_on_the_kept_subset(
        (rewards, m) in (2usize..=10).prop_flat_map(|n| (prop::collection::vec(group(n), 1..4), 2..=n)),
        which in 0usize..4,
    ) {
        let est = [
            Estimator::default(),
            Estimator::DrGrpo,
            Estimator::Rloo,
            Estimator::ReinforcePlusPlus { std: cppo_core::StdKind::Population, eps: 1e-8 },
        ][which];
        let sel = Rule::PodsMaxVariance { m }.select(&est, &rewards, 0).unwrap();
        prop_assert_eq!(sel.groups.len(), rewards.len());
        let kept_rewards: Vec<Vec<f64>> = sel.groups.iter().map(|g| pick(&rewards[g.group], &g.kept)).collect();
        let want = est.advantages(&kept_rewards).unwrap();
        for (g, w) in sel.groups.iter().zip(&want) {
            prop_assert_eq!(&g.kept, &max_variance_subset(&rewards[g.group], m));
            prop_assert_eq!(&g.advantages, w);
        }
        prop_assert_eq!(sel.kept(), m * rewards.len());
    }

    #[test]
    fn max_reward_keeps_the_m_highest((r, m) in group_and_m(1)) {
        let sel = Rule::MaxReward { m }.select(&Estimator::default(), std::slice::from_ref(&r), 0).unwrap();
        let kept = &sel.groups[0].kept;
        prop_assert_eq!(kept.len(), m);
        assert_increasing_distinct(kept, r.len());
        assert_ordered(&r, kept, true);
        let got: f64 = pick(&r, kept).iter().sum();
        let best = subsets(r.len(), m).iter().map(|s| pick(&r, s).iter().sum::<f64>()).fold(f64::MIN, f64::max);
        prop_assert!((got - best).abs() <= 1e-9 * (1.0 + best.abs()));
        prop_assert_eq!(&sel.groups[0].advantages, &Estimator::default().advantages(&[pick(&r, kept)]).unwrap()[0]);
    }

    #[test]
    fn random_is_a_reproducible_m_subset(
        (r, m) in group_and_m(1), seed in any::<u64>(), salt in any::<u64>(),
    ) {
        let s = Rule::Random { m, seed };
        let a = s.select(&Estimator::DrGrpo, &[r.clone(), r.clone()], salt).unwrap();
        let b = s.select(&Estimator::DrGrpo, &[r.clone(), r.clone()], salt).unwrap();
        prop_assert_eq!(&a, &b);
        for g in &a.groups {
            prop_assert_eq!(g.kept.len(), m);
            assert_increasing_distinct(&g.kept, r.len());
            prop_assert_eq!(&g.advantages, &Estimator::DrGrpo.advantages(&[pick(&r, &g.kept)]).unwrap()[0]);
        }
    }
}

#[test]
fn random_differs_between_steps_and_groups() {
    let draws: Vec<Vec<usize>> = (0..50)
        .map(|salt| random_subset(10, 3, 42, salt, 0))
        .collect();
    assert!(
        draws.iter().any(|d| d != &draws[0]),
        "every salt drew the same subset"
    );
    let groups: Vec<Vec<usize>> = (0..50).map(|g| random_subset(10, 3, 42, 0, g)).collect();
    assert!(
        groups.iter().any(|d| d != &groups[0]),
        "every group drew the same subset"
    );
}

/// Each of the 6 two-subsets of 4 should come up about 1/6 of the time.
#[test]
fn random_is_uniform_over_subsets() {
    let mut counts = std::collections::HashMap::new();
    let draws = 12_000;
    for salt in 0..draws {
        *counts
            .entry(random_subset(4, 2, 7, salt, 0))
            .or_insert(0usize) += 1;
    }
    assert_eq!(counts.len(), 6, "{counts:?}");
    for (subset, &c) in &counts {
        // Expected 2000, sd ~ 41: 10% is about five sd.
        assert!(
            (1800..=2200).contains(&c),
            "{subset:?} drawn {c} times of {draws}"
        );
    }
}
