//! Every worked example of README.md's "Selection strategies" section and of docs/strategies.md,
//! reproduced exactly: kept indices, and advantages (and variances, weights) to the 4 decimals printed
//! there. A change to a rule that alters a documented number fails here, naming the example.

mod common;

use common::variance;
use cppo_core::{
    capacity_for_base, plan_pruned, Aggregation, Estimator, Plan, SelectionConfig, StdKind,
    Strategy,
};

/// The running example: one question, G = 8, two correct answers.
const RUNNING: [f64; 8] = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0];
/// The PODS-family example.
const GRADED: [f64; 6] = [0.5, 1.0, 0.0, 0.25, 1.0, 0.5];

fn fixed(xs: &[f64]) -> Vec<String> {
    xs.iter().map(|x| format!("{x:.4}")).collect()
}

/// Selects with the default estimator (GRPO, Bessel std, eps 1e-4) and returns, per kept question,
/// (question, kept indices, advantages to 4 decimals).
fn select(strategy: Strategy, rewards: &[Vec<f64>], salt: u64) -> Vec<(usize, Vec<usize>, Vec<String>)> {
    let config = SelectionConfig { strategy, ..SelectionConfig::default() };
    select_with(&config, rewards, salt)
}

fn select_with(config: &SelectionConfig, rewards: &[Vec<f64>], salt: u64) -> Vec<(usize, Vec<usize>, Vec<String>)> {
    let selection = config.select(rewards, salt).unwrap_or_else(|e| panic!("{config:?}: {e}"));
    selection.groups.iter().map(|g| (g.group, g.kept.clone(), fixed(&g.advantages))).collect()
}

fn one(strategy: Strategy, rewards: &[f64], salt: u64) -> (Vec<usize>, Vec<String>) {
    let mut groups = select(strategy.clone(), &[rewards.to_vec()], salt);
    assert_eq!(groups.len(), 1, "{strategy:?}");
    let (_, kept, adv) = groups.remove(0);
    (kept, adv)
}

fn strs(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

#[test]
fn running_example_grpo_advantages() {
    let a = Estimator::default().advantages(&[RUNNING.to_vec()]).unwrap();
    assert_eq!(fixed(&a[0]), strs(&["1.6198", "-0.5399", "-0.5399", "1.6198", "-0.5399", "-0.5399", "-0.5399", "-0.5399"]));
}

#[test]
fn all_keeps_every_completion_with_the_grpo_advantages() {
    let (kept, adv) = one(Strategy::All, &RUNNING, 0);
    assert_eq!(kept, (0..8).collect::<Vec<_>>());
    assert_eq!(adv, strs(&["1.6198", "-0.5399", "-0.5399", "1.6198", "-0.5399", "-0.5399", "-0.5399", "-0.5399"]));
}

#[test]
fn cppo_keeps_the_largest_advantages() {
    let (kept, adv) = one(Strategy::Cppo { pruning_rate: 0.5 }, &RUNNING, 0);
    assert_eq!((kept, adv), (vec![0, 1, 2, 3], strs(&["1.6198", "-0.5399", "-0.5399", "1.6198"])));
    // P = 0.875, k = floor(8 * 0.125) = 1: the tie between 0 and 3 goes to the lower index.
    let (kept, adv) = one(Strategy::Cppo { pruning_rate: 0.875 }, &RUNNING, 0);
    assert_eq!((kept, adv), (vec![0], strs(&["1.6198"])));
}

#[test]
fn cppo_pooled_prunes_over_the_pool() {
    let rewards = vec![vec![1.0, 0.0, 0.0, 0.0], vec![1.0, 1.0, 0.0, 1.0]];
    // docs/strategies.md: the GRPO advantages of the two questions.
    let a = Estimator::default().advantages(&rewards).unwrap();
    assert_eq!(fixed(&a[0]), strs(&["1.4997", "-0.4999", "-0.4999", "-0.4999"]));
    assert_eq!(fixed(&a[1]), strs(&["0.4999", "0.4999", "-1.4997", "0.4999"]));
    let pooled = select(Strategy::CppoPooled { pruning_rate: 0.5, pool: 2 }, &rewards, 0);
    assert_eq!(
        pooled,
        vec![(0, vec![0, 1, 2], strs(&["1.4997", "-0.4999", "-0.4999"])), (1, vec![2], strs(&["-1.4997"]))]
    );
    let per_question = select(Strategy::Cppo { pruning_rate: 0.5 }, &rewards, 0);
    let kept: Vec<(usize, Vec<usize>)> = per_question.into_iter().map(|(g, k, _)| (g, k)).collect();
    assert_eq!(kept, vec![(0, vec![0, 1]), (1, vec![0, 2])]);
}

#[test]
fn pods_max_variance_scans_the_candidates() {
    let m = 4;
    let mut sorted = GRADED.to_vec();
    sorted.sort_by(f64::total_cmp);
    assert_eq!(sorted, [0.0, 0.25, 0.5, 0.5, 1.0, 1.0]);
    // Candidate i: the i lowest plus the m - i highest rewards, population variance.
    let candidates: Vec<Vec<f64>> = (0..=m)
        .map(|i| sorted[..i].iter().chain(&sorted[sorted.len() - (m - i)..]).copied().collect())
        .collect();
    assert_eq!(candidates[1], [0.0, 0.5, 1.0, 1.0]);
    assert_eq!(candidates[2], [0.0, 0.25, 1.0, 1.0]);
    assert_eq!(candidates[3], [0.0, 0.25, 0.5, 1.0]);
    assert_eq!(candidates[0], [0.5, 0.5, 1.0, 1.0]);
    assert_eq!(candidates[4], [0.0, 0.25, 0.5, 0.5]);
    let variances: Vec<f64> = candidates.iter().map(|c| variance(c)).collect();
    // README.md and docs/strategies.md print 0.0352 for i = 4; the variance of {0, 0.25, 0.5, 0.5} is
    // 0.171875 / 4 = 0.04296875 (mean 0.3125), so 0.0430. It does not change the winner.
    assert_eq!(fixed(&variances), strs(&["0.0625", "0.1719", "0.1992", "0.1367", "0.0430"]));
    assert_eq!(variances[4], 0.04296875);
    let (kept, adv) = one(Strategy::PodsMaxVariance { m }, &GRADED, 0);
    assert_eq!(kept, vec![1, 2, 3, 4]);
    let mut kept_rewards: Vec<f64> = kept.iter().map(|&i| GRADED[i]).collect();
    assert_eq!(kept_rewards, [1.0, 0.0, 0.25, 1.0]);
    kept_rewards.sort_by(f64::total_cmp);
    assert_eq!(kept_rewards, candidates[2], "i = 2 wins");
    assert_eq!(adv, strs(&["0.8487", "-1.0912", "-0.6062", "0.8487"]));
}

#[test]
fn max_reward_keeps_the_highest_rewards() {
    let (kept, adv) = one(Strategy::MaxReward { m: 4 }, &GRADED, 0);
    assert_eq!((kept, adv), (vec![0, 1, 4, 5], strs(&["-0.8657", "0.8657", "0.8657", "-0.8657"])));
}

#[test]
fn random_draws_depend_on_seed_and_step() {
    let (kept, _) = one(Strategy::Random { m: 4, seed: 7 }, &GRADED, 0);
    assert_eq!(kept, vec![0, 2, 3, 4], "seed 7, step 0");
    let (kept, _) = one(Strategy::Random { m: 4, seed: 7 }, &GRADED, 1);
    assert_eq!(kept, vec![1, 2, 4, 5], "seed 7, step 1");
}

#[test]
fn cppo_ablations_on_the_running_example() {
    let (kept, adv) = one(Strategy::CppoPruneLargest { pruning_rate: 0.5 }, &RUNNING, 0);
    assert_eq!((kept, adv), (vec![1, 2, 4, 5], strs(&["-0.5399"; 4])), "cppo-prune-largest");
    let (kept, _) = one(Strategy::PruneHighestReward { pruning_rate: 0.5 }, &RUNNING, 0);
    assert_eq!(kept, vec![1, 2, 4, 5], "prune-highest-reward");
    let (kept, adv) = one(Strategy::PruneLowestReward { pruning_rate: 0.5 }, &RUNNING, 0);
    assert_eq!((kept, adv), (vec![0, 1, 2, 3], strs(&["1.6198", "-0.5399", "-0.5399", "1.6198"])), "prune-lowest-reward");
}

#[test]
fn dynamic_sampling_drops_uniform_questions() {
    let rewards = vec![vec![1.0; 4], vec![0.0, 1.0, 0.0, 0.0], vec![0.0; 4]];
    let config = SelectionConfig { strategy: Strategy::Cppo { pruning_rate: 0.5 }, dynamic_sampling: true, ..SelectionConfig::default() };
    assert_eq!(select_with(&config, &rewards, 0), vec![(1, vec![0, 1], strs(&["-0.4999", "1.4997"]))]);
    let totals = config.select(&rewards, 0).unwrap().totals();
    assert_eq!((totals.dropped_uniform, totals.questions, totals.generated, totals.kept), (2, 3, 12, 2));
}

#[test]
fn allocation_fills_the_capacity() {
    // README: G = 16, 16 base questions, P = 0.875: C = 256, k = 2, b = 128.
    let capacity = capacity_for_base(16, 16).unwrap();
    assert_eq!(capacity, 256);
    let p = plan_pruned(capacity, 16, 0.875).unwrap();
    assert_eq!((p.kept_per_question, p.questions_per_step, p.group_size), (Some(2), 128, 16));
    // docs/strategies.md's table: C, G, rule -> k, b, generated, kept, unused.
    let row = |p: Plan| (p.kept_per_question, p.questions_per_step, p.completions_generated, p.completions_kept, p.unused_capacity);
    assert_eq!(row(p), (Some(2), 128, 2048, 256, 0), "paper: B = 16");
    let p = Strategy::Cppo { pruning_rate: 0.8125 }.plan(100, 16).unwrap();
    assert_eq!(row(p), (Some(3), 33, 528, 99, 1), "not dividing");
    let p = Strategy::PodsMaxVariance { m: 4 }.plan(64, 16).unwrap();
    assert_eq!(row(p), (Some(4), 16, 256, 64, 0), "PODS");
    let p = Strategy::CppoPooled { pruning_rate: 0.9, pool: 4 }.plan(20, 16).unwrap();
    assert_eq!(row(p), (None, 12, 192, 18, 2), "pooled: 6 per pool of 4");
}

#[test]
fn the_estimator_table() {
    // docs/strategies.md: A for a correct / a wrong answer of the running example.
    let correct_wrong = |e: Estimator| {
        let a = e.advantages(&[RUNNING.to_vec()]).unwrap();
        (format!("{:.4}", a[0][0]), format!("{:.4}", a[0][1]))
    };
    let pair = |c: &str, w: &str| (c.to_string(), w.to_string());
    assert_eq!(correct_wrong(Estimator::default()), pair("1.6198", "-0.5399"), "grpo");
    assert_eq!(correct_wrong(Estimator::DrGrpo), pair("0.7500", "-0.2500"), "dr-grpo");
    assert_eq!(correct_wrong(Estimator::Rloo), pair("0.8571", "-0.2857"), "rloo");
    let rpp = Estimator::ReinforcePlusPlus { std: StdKind::Population, eps: 1e-8 };
    let rppb = Estimator::ReinforcePlusPlusBaseline { std: StdKind::Population, eps: 1e-8 };
    assert_eq!(serde_json::to_value(rpp).unwrap(), serde_json::json!({"kind": "reinforce-plus-plus", "std": "population", "eps": 1e-8}));
    let defaults: Estimator = serde_json::from_str(r#"{"kind": "reinforce-plus-plus"}"#).unwrap();
    assert_eq!(defaults, rpp, "population std and eps 1e-8 by default");
    let defaults: Estimator = serde_json::from_str(r#"{"kind": "reinforce-plus-plus-baseline"}"#).unwrap();
    assert_eq!(defaults, rppb);
    assert_eq!(correct_wrong(rpp), pair("1.7321", "-0.5774"), "reinforce-plus-plus");
    assert_eq!(correct_wrong(rppb), pair("1.7321", "-0.5774"), "reinforce-plus-plus-baseline");
    // With several questions the two REINFORCE++ variants differ.
    let batch = vec![vec![1.0, 0.0, 0.0, 0.0], vec![1.0, 1.0, 0.0, 1.0]];
    let a = rpp.advantages(&batch).unwrap();
    assert_eq!((fixed(&a[0]), fixed(&a[1])), (strs(&["1.0000", "-1.0000", "-1.0000", "-1.0000"]), strs(&["1.0000", "1.0000", "-1.0000", "1.0000"])));
    let a = rppb.advantages(&batch).unwrap();
    assert_eq!((fixed(&a[0])[0].as_str(), fixed(&a[1])[2].as_str()), ("1.7321", "-1.7321"));
    // "A group of equal rewards gets A = 0 exactly, never NaN" (for REINFORCE++ without a group
    // baseline: when the whole batch is equal), a group of one included.
    for e in [Estimator::default(), Estimator::DrGrpo, Estimator::Rloo, rpp, rppb] {
        for batch in [vec![vec![0.5; 4], vec![1.0, 0.0]], vec![vec![0.7; 3], vec![0.7; 3]], vec![vec![0.5], vec![1.0, 0.0]]] {
            if e == Estimator::Rloo && batch[0].len() < 2 {
                continue;
            }
            let uniform_batch = batch.iter().flatten().all(|&r| r == batch[0][0]);
            if matches!(e, Estimator::ReinforcePlusPlus { .. }) && !uniform_batch {
                continue;
            }
            let a = e.advantages(&batch).unwrap();
            assert!(a[0].iter().all(|&x| x == 0.0), "{e:?} on {batch:?}: {a:?}");
        }
    }
}

#[test]
fn the_loss_weight_table() {
    // docs/strategies.md: T = [2, 0, 4], L = 8.
    let t = [2, 0, 4];
    let w = |agg: Aggregation| fixed(&agg.weights(&t, 8.0).unwrap());
    assert_eq!(w(Aggregation::SeqMeanTokenMean), fixed(&[0.25, 0.0, 0.125]));
    assert_eq!(w(Aggregation::TokenMean), fixed(&[1.0 / 6.0, 0.0, 1.0 / 6.0]));
    assert_eq!(w(Aggregation::SeqMeanTokenSumNorm), fixed(&[1.0 / 16.0, 0.0, 1.0 / 16.0]));
}
