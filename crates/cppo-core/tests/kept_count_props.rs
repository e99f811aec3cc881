//! An independent check of k = floor(G (1 - P)) for decimal pruning rates: for P = p / 1000 (a rate
//! written with up to 3 decimals, as configs do), the count the code keeps equals the integer
//! floor(G * (1000 - p) / 1000), with no float in the reference. The code computes in f64 with a 1e-9
//! slack; the two agree because a true value G (1000 - p) / 1000 is either an integer (which f64 may
//! miss by at most G * 3.3e-16, far under the slack) or at least 0.001 away from one (far over it).

use cppo_core::select::kept_count;
use cppo_core::{plan_pruned, Error, Estimator, Strategy};
use proptest::prelude::*;

/// The reference: integers only.
fn exact_kept(total: usize, p: u32) -> usize {
    total * (1000 - p as usize) / 1000
}

/// P as a config gives it: the decimal literal `0.ppp` parsed to the nearest f64.
fn rate(p: u32) -> f64 {
    let parsed: f64 = format!("0.{p:03}").parse().unwrap();
    assert_eq!(parsed, p as f64 / 1000.0, "p = {p}");
    parsed
}

#[test]
fn kept_count_is_the_integer_floor_for_every_three_digit_rate_and_group_up_to_256() {
    let mut mismatches = Vec::new();
    for p in 0..1000 {
        let rate = rate(p);
        for g in 1..=256 {
            if kept_count(g, rate) != exact_kept(g, p) {
                mismatches.push((g, p, kept_count(g, rate), exact_kept(g, p)));
            }
        }
    }
    assert!(mismatches.is_empty(), "(G, p, code, exact): {mismatches:?}");
}

#[test]
fn documented_cases_keep_what_the_docs_say() {
    // P = 0.875, G = 16 keeps 2 (16 * (1 - 0.875) is exactly 2 in f64, but the rule must not rely on it).
    assert_eq!(kept_count(16, 0.875), 2);
    // 10 * (1 - 0.9) is 0.9999999999999998 in f64: the slack makes it 1.
    assert!(std::hint::black_box(10.0) * (1.0 - 0.9) < 1.0);
    assert_eq!(kept_count(10, 0.9), 1);
    assert_eq!(kept_count(8, 0.875), 1);
    assert_eq!(kept_count(8, 0.5), 4);
    assert_eq!(kept_count(16, 0.8125), 3);
    assert_eq!(kept_count(64, 0.9), 6);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Pooled totals (pool * G completions) up to 2^20 still agree: f64's error there is under 4e-10.
    #[test]
    fn kept_count_matches_integers_for_pool_sized_totals(total in 1usize..=1 << 20, p in 0u32..1000) {
        prop_assert_eq!(kept_count(total, rate(p)), exact_kept(total, p), "total {}, p {}", total, p);
    }

    /// Every path that derives k from P agrees with the integer floor: the planner, and the number of
    /// completions `cppo` keeps per question and `cppo-pooled` per pool; k = 0 is an error, not an
    /// empty selection.
    #[test]
    fn planner_and_selection_keep_the_integer_floor(g in 1usize..=256, p in 0u32..1000, pool in 1usize..=4) {
        let (rate, k) = (rate(p), exact_kept(g, p));
        let plan = plan_pruned(g * 4, g, rate);
        let rewards: Vec<Vec<f64>> = (0..pool).map(|q| (0..g).map(|i| ((i * 7 + q) % 5) as f64).collect()).collect();
        let selection = Strategy::Cppo { pruning_rate: rate }.select(&Estimator::default(), &rewards, 0);
        if k == 0 {
            prop_assert!(matches!(plan, Err(Error::NothingKept { .. })), "{:?}", plan);
            prop_assert!(matches!(selection, Err(Error::NothingKept { .. })), "{:?}", selection);
        } else {
            prop_assert_eq!(plan.unwrap().kept_per_question, Some(k));
            let selection = selection.unwrap();
            prop_assert!(selection.groups.iter().all(|grp| grp.kept.len() == k));
            prop_assert_eq!(selection.kept(), pool * k);
        }
        let pooled_k = exact_kept(pool * g, p);
        let pooled = Strategy::CppoPooled { pruning_rate: rate, pool }.select(&Estimator::default(), &rewards, 0);
        match pooled {
            Ok(s) => prop_assert_eq!(s.kept(), pooled_k),
            Err(e) => prop_assert!(pooled_k == 0 && matches!(e, Error::NothingKept { .. }), "{:?}", e),
        }
    }
}
