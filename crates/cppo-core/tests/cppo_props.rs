//! The CPPO family against brute force: counts, orderings, tie rule and unchanged full-group advantages.

mod common;

use common::*;
use cppo_core::select::kept_count;
use cppo_core::{Estimator, SelectionConfig, Strategy as Rule};
use proptest::prelude::*;

fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(0.5),
        Just(0.75),
        Just(0.875),
        Just(0.9),
        0.0f64..0.95
    ]
}

/// A batch and a rate keeping at least one completion per question.
fn batch_and_rate() -> impl Strategy<Value = (Vec<Vec<f64>>, f64)> {
    (equal_batch(), rate()).prop_filter("k >= 1", |(b, p)| kept_count(b[0].len(), *p) >= 1)
}

/// Runs a per-question rule and checks count, order (by `key` of reward and full-group advantage),
/// brute-force optimality of the key sum, and that advantages are the full-group ones.
fn check_per_question(
    rule: &Rule,
    rewards: &[Vec<f64>],
    p: f64,
    key: fn(f64, f64) -> f64,
    largest: bool,
) {
    let est = Estimator::default();
    let sel = rule.select(&est, rewards, 0).unwrap();
    let full = est.advantages(rewards).unwrap();
    let k = kept_count(rewards[0].len(), p);
    assert_eq!(sel.groups.len(), rewards.len());
    for g in &sel.groups {
        let (r, a) = (&rewards[g.group], &full[g.group]);
        assert_eq!(g.kept.len(), k, "{rule:?} on {r:?}");
        assert_increasing_distinct(&g.kept, r.len());
        let keys: Vec<f64> = r.iter().zip(a).map(|(&r, &a)| key(r, a)).collect();
        assert_ordered(&keys, &g.kept, largest);
        let sum = |s: &[usize]| s.iter().map(|&i| keys[i]).sum::<f64>();
        let got = sum(&g.kept);
        let bestsum = subsets(r.len(), k).iter().map(|s| sum(s)).fold(
            if largest { f64::MIN } else { f64::MAX },
            |x, y| if largest { x.max(y) } else { x.min(y) },
        );
        assert!(
            (got - bestsum).abs() <= 1e-9 * (1.0 + bestsum.abs()),
            "{rule:?}: {got} vs {bestsum}"
        );
        assert_eq!(g.advantages, pick(a, &g.kept));
    }
    assert_eq!(sel.kept(), k * rewards.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn cppo_keeps_the_k_largest_abs_advantages((rewards, p) in batch_and_rate()) {
        check_per_question(&Rule::Cppo { pruning_rate: p }, &rewards, p, |_, a| a.abs(), true);
    }

    #[test]
    fn prune_largest_keeps_the_k_smallest_abs_advantages((rewards, p) in batch_and_rate()) {
        check_per_question(&Rule::CppoPruneLargest { pruning_rate: p }, &rewards, p, |_, a| a.abs(), false);
    }

    #[test]
    fn prune_highest_reward_keeps_the_k_lowest_rewards((rewards, p) in batch_and_rate()) {
        check_per_question(&Rule::PruneHighestReward { pruning_rate: p }, &rewards, p, |r, _| r, false);
    }

    #[test]
    fn prune_lowest_reward_keeps_the_k_highest_rewards((rewards, p) in batch_and_rate()) {
        check_per_question(&Rule::PruneLowestReward { pruning_rate: p }, &rewards, p, |r, _| r, true);
    }

    #[test]
    fn all_keeps_everything_with_full_group_advantages(rewards in equal_batch()) {
        let est = Estimator::default();
        let sel = Rule::All.select(&est, &rewards, 0).unwrap();
        let full = est.advantages(&rewards).unwrap();
        prop_assert_eq!(sel.kept(), rewards.iter().map(Vec::len).sum::<usize>());
        for g in &sel.groups {
            prop_assert_eq!(&g.kept, &(0..rewards[g.group].len()).collect::<Vec<_>>());
            prop_assert_eq!(&g.advantages, &full[g.group]);
        }
    }

    /// Over each pool of questions: the pool's count, the |A| order across all its completions (ties to
    /// the lower group, then the lower index) and the full-group advantages.
    #[test]
    fn pooled_keeps_the_largest_abs_advantages_of_each_pool(
        rewards in (1usize..=5, 1usize..=4).prop_flat_map(|(b, n)| batch(b, n)),
        p in rate(),
        pool in 1usize..=3,
    ) {
        let n = rewards[0].len();
        let pools_ok = rewards.chunks(pool).all(|c| kept_count(c.len() * n, p) >= 1);
        prop_assume!(pools_ok);
        let est = Estimator::default();
        let sel = Rule::CppoPooled { pruning_rate: p, pool }.select(&est, &rewards, 0).unwrap();
        let full = est.advantages(&rewards).unwrap();
        let mut total = 0;
        for (c, chunk) in rewards.chunks(pool).enumerate() {
            let first = c * pool;
            let flat: Vec<(usize, usize)> =
                (first..first + chunk.len()).flat_map(|g| (0..n).map(move |i| (g, i))).collect();
            let keys: Vec<f64> = flat.iter().map(|&(g, i)| full[g][i].abs()).collect();
            let kept: Vec<usize> = sel
                .groups
                .iter()
                .filter(|g| g.group >= first && g.group < first + chunk.len())
                .flat_map(|g| g.kept.iter().map(move |&i| (g.group - first) * n + i))
                .collect();
            prop_assert_eq!(kept.len(), kept_count(flat.len(), p));
            assert_ordered(&keys, &kept, true);
            total += kept.len();
        }
        prop_assert_eq!(sel.kept(), total);
        for g in &sel.groups {
            prop_assert!(!g.kept.is_empty());
            assert_increasing_distinct(&g.kept, n);
            prop_assert_eq!(&g.advantages, &pick(&full[g.group], &g.kept));
        }
    }

    /// With one question per pool, pooling is plain CPPO.
    #[test]
    fn pool_of_one_is_cppo((rewards, p) in batch_and_rate()) {
        let est = Estimator::default();
        let pooled = Rule::CppoPooled { pruning_rate: p, pool: 1 }.select(&est, &rewards, 0).unwrap();
        let plain = Rule::Cppo { pruning_rate: p }.select(&est, &rewards, 0).unwrap();
        prop_assert_eq!(pooled, plain);
    }

    #[test]
    fn dynamic_sampling_drops_exactly_the_uniform_groups((rewards, p) in batch_and_rate()) {
        let cfg = SelectionConfig {
            strategy: Rule::Cppo { pruning_rate: p },
            estimator: Estimator::default(),
            dynamic_sampling: true,
        };
        let sel = cfg.select(&rewards, 3).unwrap();
        let uniform: Vec<usize> =
            (0..rewards.len()).filter(|&g| rewards[g].iter().all(|&r| r == rewards[g][0])).collect();
        prop_assert_eq!(sel.dropped_uniform, uniform.len());
        let kept_groups: Vec<usize> = sel.groups.iter().map(|g| g.group).collect();
        let survivors: Vec<usize> = (0..rewards.len()).filter(|g| !uniform.contains(g)).collect();
        prop_assert_eq!(&kept_groups, &survivors);
        // Without the filter, the survivors are selected exactly as they are with it.
        let plain = cfg.strategy.select(&cfg.estimator, &rewards, 3).unwrap();
        for g in &sel.groups {
            prop_assert_eq!(Some(g), plain.groups.iter().find(|h| h.group == g.group));
        }
        let t = sel.totals();
        prop_assert_eq!(t.questions, rewards.len());
        prop_assert_eq!(t.generated, rewards.iter().map(Vec::len).sum::<usize>());
        prop_assert_eq!(t.kept, survivors.len() * kept_count(rewards[0].len(), p));
        prop_assert_eq!(t.groups_kept, survivors.len());
    }
}

#[test]
fn cppo_worked_example() {
    // mean 0.25, Bessel std 0.5: A = (-0.25, 0.75, -0.25, -0.25) / (0.5 + 1e-4). P = 0.5 keeps 2: the
    // 0.75, then of the three tied |A| the lowest index, 0.
    let sel = Rule::Cppo { pruning_rate: 0.5 }
        .select(&Estimator::default(), &[vec![0.0, 1.0, 0.0, 0.0]], 0)
        .unwrap();
    assert_eq!(sel.groups[0].kept, vec![0, 1]);
    let a = &sel.groups[0].advantages;
    assert!(
        (a[0] + 0.25 / 0.5001).abs() < 1e-12 && (a[1] - 0.75 / 0.5001).abs() < 1e-12,
        "{a:?}"
    );
    let flat: Vec<(usize, usize, f64)> = sel.iter_kept().collect();
    assert_eq!(flat.len(), 2);
    assert_eq!((flat[1].0, flat[1].1), (0, 1));
}
