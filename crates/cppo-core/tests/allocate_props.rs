//! Allocation invariants, and agreement between a plan and what the selection then keeps.

use cppo_core::select::kept_count;
use cppo_core::{plan, Error, Estimator, Strategy as Rule};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn plan_fills_capacity_without_exceeding_it(
        (g, k) in (1usize..64).prop_flat_map(|g| (Just(g), 1..=g)),
        extra in 0usize..5000,
    ) {
        let capacity = k + extra;
        let p = plan(capacity, g, k).unwrap();
        prop_assert_eq!(p.group_size, g);
        prop_assert_eq!(p.kept_per_question, Some(k));
        prop_assert_eq!(p.completions_kept, p.questions_per_step * k);
        prop_assert_eq!(p.completions_generated, p.questions_per_step * g);
        prop_assert!(p.completions_kept <= capacity);
        prop_assert!((p.questions_per_step + 1) * k > capacity, "one more question would still fit");
        prop_assert_eq!(p.unused_capacity, capacity - p.completions_kept);
        prop_assert!(p.unused_capacity < k);
        if capacity % k == 0 {
            prop_assert_eq!(p.unused_capacity, 0);
            prop_assert_eq!(p.questions_per_step, capacity / k);
        }
    }

    /// B questions at G with pruning rate P: b * k fills the base capacity B * G whenever k divides it.
    #[test]
    fn paper_form(base in 1usize..64, g in 1usize..33, p in 0.0f64..0.95) {
        let k = kept_count(g, p);
        prop_assume!(k >= 1);
        let c = base * g;
        let plan = Rule::Cppo { pruning_rate: p }.plan(c, g).unwrap();
        prop_assert_eq!(plan.kept_per_question, Some(k));
        prop_assert_eq!(plan.questions_per_step, c / k);
        prop_assert_eq!(plan.group_size, g);
        if c % k == 0 {
            prop_assert_eq!(plan.completions_kept, c);
        }
    }

    /// Selecting over the planned questions keeps exactly the planned count, never above capacity.
    #[test]
    fn selection_keeps_what_the_plan_says(
        capacity in 1usize..60,
        g in 2usize..=8,
        which in 0usize..6,
        p in prop_oneof![Just(0.5), Just(0.75), 0.0f64..0.9],
        pool in 1usize..=3,
        seed in any::<u64>(),
    ) {
        let m = (g / 2).max(2);
        let rule = match which {
            0 => Rule::All,
            1 => Rule::Cppo { pruning_rate: p },
            2 => Rule::CppoPooled { pruning_rate: p, pool },
            3 => Rule::PodsMaxVariance { m },
            4 => Rule::Random { m, seed },
            _ => Rule::PruneLowestReward { pruning_rate: p },
        };
        let plan = match rule.plan(capacity, g) {
            Ok(plan) => plan,
            Err(Error::CapacityTooSmall { .. } | Error::NothingKept { .. }) => return Ok(()),
            Err(e) => panic!("{rule:?}: {e}"),
        };
        let rewards: Vec<Vec<f64>> =
            (0..plan.questions_per_step).map(|q| (0..g).map(|i| ((q * 7 + i * 3) % 5) as f64 / 4.0).collect()).collect();
        let sel = rule.select(&Estimator::default(), &rewards, 1).unwrap();
        prop_assert_eq!(sel.kept(), plan.completions_kept, "{:?} {:?}", rule, plan);
        prop_assert!(sel.kept() <= capacity);
        prop_assert_eq!(sel.generated, plan.completions_generated);
        prop_assert!(rewards.iter().all(|r| r.len() == g));
    }
}
