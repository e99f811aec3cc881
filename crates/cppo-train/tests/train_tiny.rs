//! End to end on a tiny random model: each strategy trains, the update sees exactly what the strategy
//! kept (and nothing it pruned), the loss is finite, the policy moves, the reference does not.

mod common;

use cppo_train::trainer::Trainer;

fn weights_of(d: &cppo_model::Decoder) -> Vec<f32> {
    let w = d.to_weights().unwrap();
    w.tensors.values().flat_map(|t| t.flatten_all().unwrap().to_vec1::<f32>().unwrap()).collect()
}

fn check_strategy(name: &str, overrides: &[&str], kept_per_question: Option<usize>) {
    let cfg = common::tiny_config(name, overrides);
    let mu = cfg.loss.num_iterations;
    let mut t = Trainer::new(cfg, false).unwrap();
    let policy0 = weights_of(&t.policy);
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
    }
    assert_ne!(weights_of(&t.policy), policy0, "{name}: the policy did not move");
    assert_eq!(weights_of(t.reference.as_ref().unwrap()), ref0, "{name}: the reference moved");
}

#[test]
fn grpo_keeps_everything() {
    check_strategy("grpo", &[], Some(4));
}

#[test]
fn cppo_trains_on_exactly_k_per_question() {
    // G = 4, P = 0.5: k = 2.
    check_strategy("cppo", &["rollout.strategy={ kind = \"cppo\", pruning_rate = 0.5 }"], Some(2));
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
    let run = |budget: &str| {
        let cfg = common::tiny_config(&format!("budget-{budget}"), &[&format!("optim.micro_batch_tokens={budget}"), "rollout.questions_per_step=3"]);
        let mut t = Trainer::new(cfg, false).unwrap();
        let m = t.train_step(|_| {}).unwrap().metrics;
        (m, weights_of(&t.policy))
    };
    let (a, wa) = run("64");
    let (b, wb) = run("4096");
    assert_eq!(a.completions_kept, b.completions_kept);
    assert!((a.loss - b.loss).abs() < 1e-6 * a.loss.abs().max(1.0), "{} vs {}", a.loss, b.loss);
    assert!((a.grad_norm - b.grad_norm).abs() < 1e-4 * a.grad_norm.max(1e-6), "{} vs {}", a.grad_norm, b.grad_norm);
    let worst = wa.iter().zip(&wb).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
    assert!(worst < 1e-5, "weights differ by {worst}");
}
