//! Advantage estimators against their definitions.

mod common;

use common::*;
use cppo_core::{Estimator, ScaleRewards, StdKind, MAX_ABS_REWARD};
use proptest::prelude::*;

fn group_estimators() -> Vec<Estimator> {
    vec![
        Estimator::default(),
        Estimator::grpo(StdKind::Population, 0.0),
        Estimator::grpo(StdKind::Bessel, 0.0),
        Estimator::Grpo { std: StdKind::Bessel, eps: 1e-4, scale_rewards: ScaleRewards::Batch },
        Estimator::Grpo { std: StdKind::Population, eps: 0.0, scale_rewards: ScaleRewards::Batch },
        Estimator::Grpo { std: StdKind::Bessel, eps: 1e-4, scale_rewards: ScaleRewards::None },
        Estimator::DrGrpo,
        Estimator::Rloo,
        Estimator::ReinforcePlusPlusBaseline {
            std: StdKind::Population,
            eps: 1e-8,
        },
        Estimator::ReinforcePlusPlusBaseline {
            std: StdKind::Bessel,
            eps: 0.0,
        },
    ]
}

fn all_estimators() -> Vec<Estimator> {
    let mut v = group_estimators();
    v.push(Estimator::ReinforcePlusPlus {
        std: StdKind::Population,
        eps: 1e-8,
    });
    v.push(Estimator::ReinforcePlusPlus {
        std: StdKind::Bessel,
        eps: 0.0,
    });
    v
}

/// Any finite reward within the accepted range, extremes and subnormals included.
fn wild_reward() -> impl Strategy<Value = f64> {
    prop_oneof![
        -1.0f64..1.0,
        prop::num::f64::NORMAL.prop_filter("in range", |x| x.abs() <= MAX_ABS_REWARD),
        prop::num::f64::SUBNORMAL,
        Just(MAX_ABS_REWARD),
        Just(-MAX_ABS_REWARD),
        Just(0.0),
        Just(-0.0),
    ]
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn identical_rewards_give_exactly_zero(
        v in wild_reward(),
        n in 2usize..=16,
        other in (0usize..4, 2usize..=10).prop_flat_map(|(b, n)| batch(b, n)),
    ) {
        let mut groups = other;
        groups.push(vec![v; n]);
        for est in group_estimators() {
            let a = est.advantages(&groups).unwrap();
            prop_assert!(a.last().unwrap().iter().all(|&x| x == 0.0), "{:?}: {:?}", est, a.last());
        }
        // REINFORCE++ has no group baseline: only an all-equal batch is zero.
        for est in all_estimators() {
            let a = est.advantages(&[vec![v; n], vec![v; 3]]).unwrap();
            prop_assert!(a.iter().flatten().all(|&x| x == 0.0), "{:?}", est);
        }
    }

    #[test]
    fn never_nan_for_valid_rewards(groups in prop::collection::vec(prop::collection::vec(wild_reward(), 2..8), 1..4)) {
        for est in all_estimators() {
            let a = est.advantages(&groups).unwrap();
            prop_assert!(a.iter().flatten().all(|x| !x.is_nan()), "{:?} on {:?}: {:?}", est, groups, a);
            // Only Dr.GRPO and RLOO are unnormalised; the rest are bounded by the group or batch size.
            if !matches!(est, Estimator::DrGrpo | Estimator::Rloo) {
                prop_assert!(a.iter().flatten().all(|x| x.is_finite()), "{:?} on {:?}: {:?}", est, groups, a);
            }
        }
    }

    #[test]
    fn grpo_matches_the_formula(g in (2usize..=10).prop_flat_map(group), eps in 0.0f64..0.1, bessel in any::<bool>()) {
        let std_kind = if bessel { StdKind::Bessel } else { StdKind::Population };
        let a = Estimator::grpo(std_kind, eps).advantages(std::slice::from_ref(&g)).unwrap();
        let mu = mean(&g);
        let d = if bessel { g.len() - 1 } else { g.len() } as f64;
        let sd = (g.iter().map(|r| (r - mu) * (r - mu)).sum::<f64>() / d).sqrt();
        for (x, r) in a[0].iter().zip(&g) {
            let want = if sd == 0.0 { 0.0 } else { (r - mu) / (sd + eps) };
            prop_assert!(close(*x, want), "{} vs {} for {:?}", x, want, g);
        }
    }

    /// TRL's `scale_rewards = "batch"`: A = (r - group mean) / (std of every raw reward of the batch +
    /// eps), groups of any sizes.
    #[test]
    fn grpo_batch_scaling_matches_the_formula(
        groups in prop::collection::vec((1usize..=8).prop_flat_map(group), 1..5),
        eps in 0.0f64..0.1,
        bessel in any::<bool>(),
    ) {
        let std_kind = if bessel { StdKind::Bessel } else { StdKind::Population };
        let a = Estimator::Grpo { std: std_kind, eps, scale_rewards: ScaleRewards::Batch }.advantages(&groups).unwrap();
        let flat: Vec<f64> = groups.iter().flatten().copied().collect();
        let mu = mean(&flat);
        let d = if bessel { flat.len() - 1 } else { flat.len() } as f64;
        let sd = if d > 0.0 { (flat.iter().map(|r| (r - mu) * (r - mu)).sum::<f64>() / d).sqrt() } else { 0.0 };
        for (g, ag) in groups.iter().zip(&a) {
            let gm = mean(g);
            for (x, r) in ag.iter().zip(g) {
                let want = if sd == 0.0 || g.iter().all(|&v| v == g[0]) { 0.0 } else { (r - gm) / (sd + eps) };
                prop_assert!(close(*x, want), "{} vs {} for {:?}", x, want, groups);
            }
        }
    }

    /// `scale_rewards = "none"` is Dr.GRPO, and `"group"` the default GRPO.
    /// MaxRL (`scale_rewards = "mean"`) on non-negative rewards: (r - mean) / (mean + eps) per group,
    /// finite, exact zeros for a uniform group, and the same sign as Dr.GRPO's centring.
    #[test]
    fn maxrl_matches_the_formula(
        groups in prop::collection::vec(prop::collection::vec(prop_oneof![0.0f64..10.0, Just(0.0), Just(1.0)], 1..10), 1..5),
        eps in 0.0f64..0.1,
    ) {
        let a = Estimator::Grpo { std: StdKind::Bessel, eps, scale_rewards: ScaleRewards::Mean }.advantages(&groups).unwrap();
        let centred = Estimator::DrGrpo.advantages(&groups).unwrap();
        for (gi, g) in groups.iter().enumerate() {
            let m = mean(g);
            for (i, &r) in g.iter().enumerate() {
                let x = a[gi][i];
                prop_assert!(x.is_finite());
                if g.iter().all(|&v| v == g[0]) {
                    prop_assert_eq!(x, 0.0);
                } else {
                    prop_assert!(close(x, (r - m) / (m + eps)), "{} vs {}", x, (r - m) / (m + eps));
                    prop_assert!(x.signum() == centred[gi][i].signum() || centred[gi][i] == 0.0);
                }
            }
        }
    }

    #[test]
    fn scale_rewards_none_is_dr_grpo_and_group_is_grpo(groups in equal_batch(), eps in 0.0f64..0.1) {
        let none = Estimator::Grpo { std: StdKind::Bessel, eps, scale_rewards: ScaleRewards::None }.advantages(&groups).unwrap();
        prop_assert_eq!(none, Estimator::DrGrpo.advantages(&groups).unwrap());
        let group = Estimator::Grpo { std: StdKind::Bessel, eps, scale_rewards: ScaleRewards::Group }.advantages(&groups).unwrap();
        prop_assert_eq!(group, Estimator::grpo(StdKind::Bessel, eps).advantages(&groups).unwrap());
    }

    #[test]
    fn dr_grpo_centres_and_rloo_is_its_g_over_g_minus_1_multiple(groups in equal_batch()) {
        prop_assume!(groups[0].len() >= 2);
        let dr = Estimator::DrGrpo.advantages(&groups).unwrap();
        let rloo = Estimator::Rloo.advantages(&groups).unwrap();
        for ((g, d), l) in groups.iter().zip(&dr).zip(&rloo) {
            let n = g.len() as f64;
            prop_assert!(d.iter().sum::<f64>().abs() < 1e-9 * (1.0 + g.iter().map(|x| x.abs()).sum::<f64>()));
            for i in 0..g.len() {
                prop_assert!(close(d[i], g[i] - mean(g)));
                let others = (g.iter().sum::<f64>() - g[i]) / (n - 1.0);
                prop_assert!(close(l[i], g[i] - others), "RLOO definition");
                prop_assert!(close(l[i], n / (n - 1.0) * d[i]), "RLOO = G/(G-1) Dr.GRPO");
            }
        }
    }

    #[test]
    fn reinforce_plus_plus_whitens_the_batch(groups in equal_batch()) {
        let flat: Vec<f64> = groups.iter().flatten().copied().collect();
        prop_assume!(flat.iter().any(|&r| r != flat[0]));
        let a = Estimator::ReinforcePlusPlus { std: StdKind::Population, eps: 0.0 }.advantages(&groups).unwrap();
        let a: Vec<f64> = a.into_iter().flatten().collect();
        prop_assert!(mean(&a).abs() < 1e-9);
        prop_assert!(close(variance(&a), 1.0), "variance {}", variance(&a));
    }

    #[test]
    fn reinforce_baseline_is_dr_grpo_over_the_batch_std(groups in equal_batch()) {
        let dr: Vec<f64> = Estimator::DrGrpo.advantages(&groups).unwrap().into_iter().flatten().collect();
        prop_assume!(dr.iter().any(|&x| x != 0.0));
        let a = Estimator::ReinforcePlusPlusBaseline { std: StdKind::Bessel, eps: 0.0 }.advantages(&groups).unwrap();
        let sd = (dr.iter().map(|x| x * x).sum::<f64>() / (dr.len() - 1) as f64).sqrt();
        for (x, d) in a.into_iter().flatten().zip(&dr) {
            prop_assert!(close(x, d / sd));
        }
    }

    /// The output has the shape of the input, for every estimator.
    #[test]
    fn shape_is_preserved(groups in prop::collection::vec((2usize..6).prop_flat_map(group), 0..5)) {
        for est in all_estimators() {
            let a = est.advantages(&groups).unwrap();
            prop_assert_eq!(a.iter().map(Vec::len).collect::<Vec<_>>(), groups.iter().map(Vec::len).collect::<Vec<_>>());
        }
    }
}

#[test]
fn tiny_spreads_do_not_divide_by_zero() {
    // Squared deviations of 1e-300 underflow to 0; the std must not.
    let g = vec![1e-300, -1e-300, 0.0];
    let a = Estimator::grpo(StdKind::Population, 0.0)
    .advantages(&[g])
    .unwrap();
    let want = (1.5f64).sqrt();
    assert!(
        (a[0][0] - want).abs() < 1e-12 && (a[0][1] + want).abs() < 1e-12,
        "{a:?}"
    );
}

/// Batch scaling divides by the raw rewards' std, not the group-centred rewards' (the REINFORCE++
/// baseline's): two groups {0, 1} and {10, 11} have raw std far above their centred std.
#[test]
fn batch_scaling_uses_the_raw_rewards_spread() {
    let groups = [vec![0.0, 1.0], vec![10.0, 11.0]];
    let a = Estimator::Grpo { std: StdKind::Bessel, eps: 0.0, scale_rewards: ScaleRewards::Batch }.advantages(&groups).unwrap();
    let flat = [0.0f64, 1.0, 10.0, 11.0];
    let sd = (flat.iter().map(|r| (r - 5.5) * (r - 5.5)).sum::<f64>() / 3.0).sqrt();
    assert!((a[0][1] - 0.5 / sd).abs() < 1e-12 && (a[1][0] + 0.5 / sd).abs() < 1e-12, "{a:?}");
    let baseline = Estimator::ReinforcePlusPlusBaseline { std: StdKind::Bessel, eps: 0.0 }.advantages(&groups).unwrap();
    assert!(baseline[0][1] > 5.0 * a[0][1], "{baseline:?} vs {a:?}");
}
