//! End to end on a tiny random model: each strategy trains, the update sees exactly what the strategy
//! kept (and nothing it pruned), the loss is finite, the policy moves, the reference does not.

use cppo_test_support as common;

use cppo_train::config::TrainConfig;
use cppo_train::trainer::{StepReport, Trainer};

fn weights_of(d: &cppo_model::Decoder) -> Vec<f32> {
    let w = d.to_weights().unwrap();
    w.tensors.values().flat_map(|t| t.flatten_all().unwrap().to_vec1::<f32>().unwrap()).collect()
}

/// Two steps of a strategy; returns each step's report with the trainer's configuration.
fn check_strategy(name: &str, overrides: &[&str], kept_per_question: Option<usize>) -> (Vec<StepReport>, TrainConfig) {
    let cfg = common::tiny_config(name, overrides);
    let cfg_out = cfg.clone();
    let mut reports = Vec::new();
    let mu = cfg.loss.num_iterations;
    let mut t = Trainer::new(cfg, false).unwrap();
    let policy0 = weights_of(t.trained_policy().unwrap());
    let ref0 = weights_of(t.reference.as_ref().unwrap());
    for _ in 0..2 {
        let report = t.train_step(|_| {}).unwrap();
        let m = &report.metrics;
        assert!(m.loss.is_finite(), "{name}: loss {}", m.loss);
        assert_eq!(m.completions_generated, m.questions * 4);
        if let Some(k) = kept_per_question {
            let mut per_q = std::collections::BTreeMap::new();
            for (g, _) in &report.kept {
                *per_q.entry(*g).or_insert(0) += 1;
            }
            assert!(per_q.values().all(|&c| c == k), "{name}: kept per question {per_q:?}, expected {k}");
            assert_eq!(report.kept.len(), m.questions * k);
        }
        assert_eq!(m.completions_kept, report.kept.len());
        // Forward rows: the reference once, the old policy once if mu > 1, the policy mu times, each over
        // the kept completions only.
        let passes = 1 + mu + usize::from(mu > 1);
        assert_eq!(m.forward_rows, passes * m.completions_kept, "{name}: {m:?}");
        assert!(m.completions_kept == 0 || m.loss_tokens > 0);
        reports.push(report);
    }
    assert_ne!(weights_of(t.trained_policy().unwrap()), policy0, "{name}: the policy did not move");
    assert_eq!(weights_of(t.reference.as_ref().unwrap()), ref0, "{name}: the reference moved");
    (reports, cfg_out)
}

/// Per question, every kept completion ranks at least as high by `key` as every pruned one (`keep_high`),
/// or at most as high (`!keep_high`). `key(rewards, i)` scores completion i of a question.
fn check_ranking(name: &str, reports: &[StepReport], keep_high: bool, key: impl Fn(&[f64], usize) -> f64) {
    for r in reports {
        for (g, x) in r.rollouts.iter().enumerate() {
            let kept: Vec<usize> = r.kept.iter().filter(|k| k.0 == g).map(|k| k.1).collect();
            for &i in &kept {
                for j in (0..x.rewards.len()).filter(|j| !kept.contains(j)) {
                    let (ki, kj) = (key(&x.rewards, i), key(&x.rewards, j));
                    let ok = if keep_high { ki >= kj - 1e-12 } else { ki <= kj + 1e-12 };
                    assert!(ok, "{name}: kept {i} ({ki}) against pruned {j} ({kj}) in {:?}", x.rewards);
                }
            }
        }
    }
}

fn reward(r: &[f64], i: usize) -> f64 {
    r[i]
}

/// |r_i - mean|: within a question, |A| of GRPO's estimator grows with it (one std for the group).
fn distance_from_mean(r: &[f64], i: usize) -> f64 {
    (r[i] - r.iter().sum::<f64>() / r.len() as f64).abs()
}

#[test]
fn grpo_keeps_everything() {
    check_strategy("grpo", &[], Some(4));
}

#[test]
fn cppo_trains_on_exactly_k_per_question() {
    // G = 4, P = 0.5: k = 2.
    let (reports, _) = check_strategy("cppo", &["rollout.strategy={ kind = \"cppo\", pruning_rate = 0.5 }"], Some(2));
    check_ranking("cppo", &reports, true, distance_from_mean);
}

#[test]
fn cppo_with_allocation_samples_more_questions() {
    let cfg = common::tiny_config("cppo-alloc", &["rollout.strategy={ kind = \"cppo\", pruning_rate = 0.75 }", "rollout.allocation=true"]);
    let mut t = Trainer::new(cfg, false).unwrap();
    let m = t.train_step(|_| {}).unwrap().metrics;
    // Capacity 2 x 4 = 8 kept completions, k = 1: 8 questions of 4 completions.
    assert_eq!(m.questions, 8);
    assert_eq!(m.completions_generated, 32);
    assert_eq!(m.completions_kept, 8);
}

#[test]
fn pods_trains_on_m_with_two_passes() {
    check_strategy("pods", &["rollout.strategy={ kind = \"pods-max-variance\", m = 2 }", "loss.num_iterations=2"], Some(2));
}

#[test]
fn dapo_style_run_without_reference() {
    let cfg = common::tiny_config(
        "dapo",
        &["loss.beta=0.0", "loss.epsilon_high=0.28", "loss.aggregation=\"token-mean\"", "rollout.dynamic_sampling=true", "loss.mask_truncated=false"],
    );
    assert!(cfg.rollout.selection.dynamic_sampling);
    let mut t = Trainer::new(cfg, false).unwrap();
    assert!(t.reference.is_none(), "beta = 0 must not build a reference model");
    let m = t.train_step(|_| {}).unwrap().metrics;
    assert!(m.loss.is_finite());
    assert_eq!(m.forward_rows, m.completions_kept);
    assert_eq!(m.kl, 0.0);
}

/// DAPO's soft overlong punishment is added to each completion's task reward (the weighted parts), by
/// its length, before the advantage; the metrics line reports its mean.
#[test]
fn overlong_penalty_is_added_to_the_task_reward() {
    let cfg = common::tiny_config("overlong", &["overlong_penalty={ max_length = 6, cache_length = 4 }"]);
    let p = cfg.overlong_penalty.expect("parsed");
    let mut t = Trainer::new(cfg, false).unwrap();
    let report = t.train_step(|_| {}).unwrap();
    let mut penalties = Vec::new();
    for r in report.rollouts.iter().chain(&report.dropped) {
        for (i, c) in r.completions.iter().enumerate() {
            let task: f64 = r.parts.iter().map(|part| part[i]).sum();
            let len = c.tokens.len();
            let want = if len <= 2 { 0.0 } else if len <= 6 { (2.0 - len as f64) / 4.0 } else { -1.0 };
            assert!((r.rewards[i] - (task + want)).abs() < 1e-12, "length {len}: reward {} vs task {task} + penalty {want}", r.rewards[i]);
            assert_eq!(p.penalty(len), want);
            penalties.push(want);
        }
    }
    assert!(penalties.iter().any(|&x| x < 0.0), "no completion ran long enough to be penalised: {penalties:?}");
    let mean = penalties.iter().sum::<f64>() / penalties.len() as f64;
    assert!((report.metrics.rewards["overlong_penalty"] - mean).abs() < 1e-12);
}

/// With dynamic sampling, DAPO's filter judges the task rewards (its accuracy), not the shaped ones: a
/// group is dropped as uniform exactly when its task rewards are all equal, whatever its lengths.
#[test]
fn dynamic_sampling_filters_on_the_task_reward_before_shaping() {
    let cfg = common::tiny_config(
        "overlong-dapo",
        &["overlong_penalty={ max_length = 6, cache_length = 5 }", "rollout.dynamic_sampling=true", "reward={ accuracy = 1.0 }", "loss.beta=0.0", "generation.stop=[\"k\", \"e\", \"a\", \" \", \"1\", \"0\"]"],
    );
    let mut t = Trainer::new(cfg, false).unwrap();
    let (mut uniform_seen, mut trained_seen, mut shaped_apart) = (0, 0, 0);
    for _ in 0..2 {
        let report = t.train_step(|_| {}).unwrap();
        let task = |r: &cppo_train::rollout::Rollout| -> Vec<f64> { (0..r.rewards.len()).map(|i| r.parts.iter().map(|p| p[i]).sum()).collect() };
        let uniform = |v: &[f64]| v.iter().all(|&x| x == v[0]);
        for r in &report.rollouts {
            assert!(!uniform(&task(r)), "a group with equal task rewards {:?} was trained on", task(r));
            trained_seen += 1;
        }
        let dropped_uniform = report.dropped.iter().filter(|r| uniform(&task(r))).count();
        assert_eq!(dropped_uniform, report.metrics.groups_dropped);
        assert_eq!(report.dropped.len() - dropped_uniform, report.metrics.groups_surplus);
        uniform_seen += dropped_uniform;
        // Dropped groups whose shaped rewards differ (their lengths differ): filtering after shaping
        // would have trained on them.
        shaped_apart += report.dropped.iter().filter(|r| uniform(&task(r)) && !uniform(&r.rewards)).count();
    }
    assert!(uniform_seen > 0 && shaped_apart > 0, "no dropped group with differing shaped rewards: the test says nothing ({uniform_seen} dropped, {trained_seen} trained)");
}

#[test]
fn bad_overlong_lengths_name_the_field() {
    let cfg = cppo_train::config::TrainConfig::from_toml(
        "output_dir = \"x\"\n[model]\npath = \"m\"\n[data]\ntrain = \"arith:train\"\n[overlong_penalty]\nmax_length = 4\ncache_length = 8\n",
        &[],
    );
    let err = format!("{:#}", cfg.unwrap_err());
    assert!(err.contains("overlong_penalty.cache_length"), "{err}");
}

/// Every log-prob of the loss is taken at the sampling temperature (greedy sampling: at 1), the
/// policy's and the reference's alike.
#[test]
fn the_loss_logprobs_follow_the_sampling_temperature() {
    for (temp, want) in [("0.7", 0.7), ("1.0", 1.0), ("0.0", 1.0)] {
        let t = Trainer::new(common::tiny_config(&format!("temp-{temp}"), &[&format!("generation.temperature={temp}")]), false).unwrap();
        assert_eq!(t.policy.logprob_temperature(), want, "policy at generation.temperature = {temp}");
        assert_eq!(t.reference.as_ref().unwrap().logprob_temperature(), want, "reference at generation.temperature = {temp}");
    }
}

#[test]
fn evaluation_writes_its_summary_and_generations() {
    let cfg = common::tiny_config("eval", &[]);
    let out = cfg.output_dir.clone();
    let mut t = Trainer::new(cfg, false).unwrap();
    let s = t.evaluate().unwrap().unwrap();
    assert_eq!(s.problems, 3);
    assert!((0.0..=1.0).contains(&s.accuracy));
    let lines = std::fs::read_to_string(out.join("eval.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 1);
    let gens = std::fs::read_to_string(out.join("evals/step-000000.jsonl")).unwrap();
    assert_eq!(gens.lines().count(), 3);
}

#[test]
fn one_backward_per_token_budget_equals_one_per_question() {
    // Budget 64 rows: every question's micro-batch is back-propagated alone; budget 4096: all together.
    // In f32: equal up to summation order; bf16 rounding would become whole learning-rate steps on
    // near-zero gradients in AdamW's first step (lr * g / |g|).
    let run = |budget: &str| {
        let cfg = common::tiny_config(
            &format!("budget-{budget}"),
            &[&format!("optim.micro_batch_tokens={budget}"), "rollout.questions_per_step=3", "optim.matmul_precision=f32"],
        );
        let mut t = Trainer::new(cfg, false).unwrap();
        let m = t.train_step(|_| {}).unwrap().metrics;
        (m, weights_of(t.trained_policy().unwrap()))
    };
    let (a, wa) = run("64");
    let (b, wb) = run("4096");
    assert_eq!(a.completions_kept, b.completions_kept);
    assert!((a.loss - b.loss).abs() < 1e-6 * a.loss.abs().max(1.0), "{} vs {}", a.loss, b.loss);
    assert!((a.grad_norm - b.grad_norm).abs() < 1e-4 * a.grad_norm.max(1e-6), "{} vs {}", a.grad_norm, b.grad_norm);
    // AdamW's first step moves each weight by lr * g / (|g| + eps): for gradients near eps (1e-8) an
    // f32 rounding difference in g (1e-10 here) moves that weight by a visible fraction of lr (1e-2).
    let worst = wa.iter().zip(&wb).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
    assert!(worst < 1e-4, "weights differ by {worst} (lr 1e-2)");
}

#[test]
fn cppo_pooled_keeps_the_pool_fraction_by_advantage() {
    // One pool of both questions: 8 completions, P = 0.5 keeps the 4 largest |A| of the pool, however
    // they fall between the questions.
    let (reports, cfg) = check_strategy("cppo-pooled", &["rollout.strategy={ kind = \"cppo-pooled\", pruning_rate = 0.5, pool = 2 }"], None);
    for r in &reports {
        assert_eq!(r.kept.len(), 4);
        let rewards: Vec<Vec<f64>> = r.rollouts.iter().map(|x| x.rewards.clone()).collect();
        let adv = cfg.estimator().advantages(&rewards).unwrap();
        let all: Vec<(usize, usize)> = (0..adv.len()).flat_map(|g| (0..adv[g].len()).map(move |i| (g, i))).collect();
        let smallest_kept = r.kept.iter().map(|&(g, i)| adv[g][i].abs()).fold(f64::INFINITY, f64::min);
        let largest_pruned = all.iter().filter(|k| !r.kept.contains(k)).map(|&(g, i)| adv[g][i].abs()).fold(0.0, f64::max);
        assert!(smallest_kept >= largest_pruned - 1e-12, "kept |A| {smallest_kept} < pruned |A| {largest_pruned}");
    }
}

#[test]
fn max_reward_keeps_the_m_highest_rewards() {
    let (reports, _) = check_strategy("max-reward", &["rollout.strategy={ kind = \"max-reward\", m = 2 }"], Some(2));
    check_ranking("max-reward", &reports, true, reward);
}

#[test]
fn random_keeps_m_per_question() {
    let (reports, _) = check_strategy("random", &["rollout.strategy={ kind = \"random\", m = 3, seed = 11 }"], Some(3));
    // Drawn per (seed, step, question): over two steps of two questions, not always the same indices.
    let sets: std::collections::BTreeSet<Vec<usize>> = reports
        .iter()
        .flat_map(|r| (0..r.rollouts.len()).map(move |g| r.kept.iter().filter(|k| k.0 == g).map(|k| k.1).collect::<Vec<_>>()))
        .collect();
    assert!(sets.len() > 1, "random drew the same completions for every question: {sets:?}");
}

#[test]
fn ablation_cppo_prune_largest_keeps_the_smallest_advantages() {
    let (reports, _) = check_strategy("prune-largest", &["rollout.strategy={ kind = \"cppo-prune-largest\", pruning_rate = 0.5 }"], Some(2));
    check_ranking("cppo-prune-largest", &reports, false, distance_from_mean);
}

#[test]
fn ablation_prune_highest_reward_keeps_the_lowest() {
    let (reports, _) = check_strategy("prune-highest", &["rollout.strategy={ kind = \"prune-highest-reward\", pruning_rate = 0.5 }"], Some(2));
    check_ranking("prune-highest-reward", &reports, false, reward);
}

#[test]
fn ablation_prune_lowest_reward_keeps_the_highest() {
    let (reports, _) = check_strategy("prune-lowest", &["rollout.strategy={ kind = \"prune-lowest-reward\", pruning_rate = 0.5 }"], Some(2));
    check_ranking("prune-lowest-reward", &reports, true, reward);
}

#[test]
fn dr_grpo_sums_tokens_over_the_constant_normaliser() {
    // Dr.GRPO: centred advantages, token sums over L = 10, averaged over sequences; no KL. With mu = 1
    // the ratio is exactly 1, so the loss is -sum_i A_i T_i / (N L). A stop string varies the lengths,
    // so the token-mean rules would give another value (0 for centred advantages and seq-mean-token-mean).
    let cfg = common::tiny_config(
        "dr-grpo",
        &[
            "rollout.estimator={ kind = \"dr-grpo\" }",
            "loss.aggregation=\"seq-mean-token-sum-norm\"",
            "loss.normaliser=10",
            "loss.beta=0.0",
            "generation.stop=[\"k\", \"e\"]",
            // Where rollouts and update differ in precision the rollout correction is on by default
            // and weighs each completion by its sampler / trainer ratio; this checks the aggregation.
            "loss.rollout_correction=\"none\"",
        ],
    );
    let mut t = Trainer::new(cfg, false).unwrap();
    let w0 = weights_of(t.trained_policy().unwrap());
    for _ in 0..2 {
        let r = t.train_step(|_| {}).unwrap();
        let m = &r.metrics;
        assert_eq!(r.kept.len(), 8);
        assert_eq!(m.forward_rows, 8);
        let mut expected = 0.0;
        for x in &r.rollouts {
            let mean = x.rewards.iter().sum::<f64>() / x.rewards.len() as f64;
            for (rw, c) in x.rewards.iter().zip(&x.completions) {
                expected -= (rw - mean) * c.tokens.len() as f64 / (8.0 * 10.0);
            }
        }
        assert!(expected.abs() > 1e-6, "lengths or rewards do not vary: the check would be empty");
        assert!((m.loss - expected).abs() <= 1e-5 * expected.abs().max(1e-3), "loss {} expected {expected}", m.loss);
    }
    assert_ne!(weights_of(t.trained_policy().unwrap()), w0);
}

#[test]
fn update_products_follow_the_config() {
    use cppo_kernels::Precision;
    let t = Trainer::new(common::tiny_config("mp-default", &[]), false).unwrap();
    // The default is `auto`: what this CPU was measured faster with (bf16 only on AMD with AVX512-BF16).
    let auto = Precision::Auto.for_update();
    assert_ne!(auto, Precision::Auto);
    assert_eq!(auto == Precision::Bf16, Precision::bf16_update_pays());
    assert_eq!(t.policy.matmul_precision(), auto, "auto is the default");
    for p in [Precision::F32, Precision::Bf16] {
        assert_eq!(serde_json::to_value(p).unwrap(), serde_json::Value::String(p.name().into()), "names are the config's");
    }
    assert_eq!(t.reference.as_ref().unwrap().matmul_precision(), auto, "the reference follows the policy");
    let t = Trainer::new(common::tiny_config("mp-bf16", &["optim.matmul_precision=\"bf16\""]), false).unwrap();
    assert_eq!(t.policy.matmul_precision(), Precision::Bf16);
    assert_eq!(t.reference.as_ref().unwrap().matmul_precision(), Precision::Bf16);
    let t = Trainer::new(common::tiny_config("mp-f32", &["optim.matmul_precision=\"f32\""]), false).unwrap();
    assert_eq!(t.policy.matmul_precision(), Precision::F32);
    assert_eq!(t.reference.as_ref().unwrap().matmul_precision(), Precision::F32);
    let err = TrainConfig::from_toml("output_dir = \"x\"\n[model]\npath = \"m\"\n[data]\ntrain = \"gsm8k\"\n", &["optim.matmul_precision=\"fp8\"".to_string()])
        .err()
        .map(|e| format!("{e:#}"));
    assert!(err.as_deref().is_some_and(|e| e.contains("optim.matmul_precision") && e.contains("bf16")), "{err:?}");
}
