//! What reaches a forward pass, observed at the run's backend: it counts the completions each model's
//! forward passes scored and sums a fingerprint of their tokens (`device::Scored`), so these tests
//! check, without hooks in the trainer, that the policy and the reference score exactly the completions
//! a strategy kept (recomputed here from the step's rewards), as many times as the passes need; that
//! truncated completions never reach them with `loss.mask_truncated`; and that splitting one question
//! over several micro-batches changes nothing.

use cppo_test_support as common;

use cppo_model::Decoder;
use cppo_train::device::{sequence_fingerprint, Scored};
use cppo_train::trainer::{StepReport, Trainer};
use cppo_train::update::build_batch;

fn weights_of(d: &Decoder) -> Vec<f32> {
    let w = d.to_weights().unwrap();
    w.tensors.values().flat_map(|t| t.flatten_all().unwrap().to_vec1::<f32>().unwrap()).collect()
}

/// Rows and fingerprint the policy's and the reference's forward passes scored so far.
fn scored(t: &Trainer) -> ((u64, u64), Option<(u64, u64)>) {
    let pair = |s: Scored| (s.rows, s.fingerprint);
    let (p, r) = t.device_state().scored();
    (pair(p), t.reference.is_some().then_some(pair(r)))
}

struct Observed {
    report: StepReport,
    /// Rows and fingerprint the policy scored during the step.
    policy: (u64, u64),
    /// The same for the reference (None without one).
    reference: Option<(u64, u64)>,
}

fn observed_step(t: &mut Trainer) -> Observed {
    let (p0, r0) = scored(t);
    let report = t.train_step(|_| {}).unwrap();
    let delta = |a: (u64, u64), b: (u64, u64)| (b.0 - a.0, b.1.wrapping_sub(a.1));
    let (p1, r1) = scored(t);
    Observed {
        policy: delta(p0, p1),
        reference: r0.zip(r1).map(|(r0, r1)| delta(r0, r1)),
        report,
    }
}

/// The completions the update should see, recomputed from the step's rewards with the configured
/// selection (independently of the update's batch): kept by the strategy, not empty, and not truncated
/// when `mask_truncated` is on.
fn expected_kept(t: &Trainer, report: &StepReport) -> Vec<(usize, usize)> {
    let rewards: Vec<Vec<f64>> = report.rollouts.iter().map(|r| r.rewards.clone()).collect();
    let selection = t.cfg.rollout.selection.select(&rewards, report.metrics.step - 1).unwrap();
    selection
        .iter_kept()
        .filter(|&(g, i, _)| {
            let c = &report.rollouts[g].completions[i];
            let masked = t.cfg.loss.mask_truncated && c.truncated();
            !c.tokens.is_empty() && !masked
        })
        .map(|(g, i, _)| (g, i))
        .collect()
}

fn fingerprint(report: &StepReport, kept: &[(usize, usize)]) -> u64 {
    kept.iter().fold(0u64, |acc, &(g, i)| acc.wrapping_add(sequence_fingerprint(&report.rollouts[g].completions[i].tokens)))
}

/// One step: the policy scores the kept completions once per pass (plus the old-policy pass when
/// mu > 1), the reference once (beta > 0), and nothing else.
fn check_forward_rows(name: &str, overrides: &[&str], kept_per_question: usize, questions: usize) {
    let cfg = common::tiny_config(name, overrides);
    let mu = cfg.loss.num_iterations as u64;
    let mut t = Trainer::new(cfg, false).unwrap();
    assert!(t.reference.is_some());
    let o = observed_step(&mut t);
    let r = &o.report;
    let expected = expected_kept(&t, r);
    assert_eq!(r.metrics.questions, questions, "{name}");
    assert_eq!(r.kept, expected, "{name}: the update's completions are not the strategy's");
    assert_eq!(expected.len(), questions * kept_per_question, "{name}");
    let generated: usize = r.rollouts.iter().map(|g| g.completions.len()).sum();
    assert!(generated > expected.len(), "{name}: nothing was pruned, the test shows nothing");

    let kept = expected.len() as u64;
    let fp = fingerprint(r, &expected);
    let passes = mu + u64::from(mu > 1);
    assert_eq!(o.policy.0, passes * kept, "{name}: policy rows");
    assert_eq!(o.policy.1, fp.wrapping_mul(passes), "{name}: the policy scored other token sequences than the kept ones");
    assert_eq!(o.reference, Some((kept, fp)), "{name}: the reference must score each kept completion once");
    assert_eq!(r.metrics.forward_rows as u64, (passes + 1) * kept, "{name}: metrics.forward_rows");
    // The fingerprint tells the kept completions from the pruned ones.
    let all: Vec<(usize, usize)> = r.rollouts.iter().enumerate().flat_map(|(g, x)| (0..x.completions.len()).map(move |i| (g, i))).collect();
    assert_ne!(fingerprint(r, &all), fp);
}

#[test]
fn cppo_075_scores_only_the_kept_completion_of_each_question() {
    // G = 4, P = 0.75: k = 1 of 2 questions.
    check_forward_rows("rows-cppo", &["rollout.strategy={ kind = \"cppo\", pruning_rate = 0.75 }"], 1, 2);
}

#[test]
fn cppo_075_with_allocation_scores_only_the_kept_completions() {
    // Capacity 2 x 4 = 8 kept, k = 1: 8 questions, 32 generated, 8 scored; two passes and the old policy.
    check_forward_rows(
        "rows-cppo-alloc",
        &["rollout.strategy={ kind = \"cppo\", pruning_rate = 0.75 }", "rollout.allocation=true", "loss.num_iterations=2"],
        1,
        8,
    );
}

#[test]
fn pods_scores_only_the_m_kept_completions() {
    check_forward_rows("rows-pods", &["rollout.strategy={ kind = \"pods-max-variance\", m = 2 }", "loss.num_iterations=2"], 2, 2);
}

#[test]
fn truncated_completions_get_no_loss_and_never_reach_a_forward_pass() {
    // A stop string ends some completions early; the others run to max_new_tokens and are truncated.
    let cfg = common::tiny_config(
        "mask-truncated",
        &["loss.mask_truncated=true", "generation.stop=[\"k\"]", "rollout.questions_per_step=3", "loss.num_iterations=2"],
    );
    let mut t = Trainer::new(cfg, false).unwrap();
    let o = observed_step(&mut t);
    let r = &o.report;
    let completions: Vec<(usize, usize)> = r.rollouts.iter().enumerate().flat_map(|(g, x)| (0..x.completions.len()).map(move |i| (g, i))).collect();
    let truncated = completions.iter().filter(|&&(g, i)| r.rollouts[g].completions[i].truncated()).count();
    assert!(truncated > 0 && truncated < completions.len(), "need a mix of truncated and finished completions, got {truncated} of {}", completions.len());

    // GRPO keeps every completion; the update sees exactly the finished ones.
    let expected = expected_kept(&t, r);
    let finished: Vec<(usize, usize)> = completions.iter().copied().filter(|&(g, i)| !r.rollouts[g].completions[i].truncated()).collect();
    assert_eq!(expected, finished);
    assert_eq!(r.kept, finished);
    assert_eq!(r.metrics.completions_kept, finished.len());
    let tokens: usize = finished.iter().map(|&(g, i)| r.rollouts[g].completions[i].tokens.len()).sum();
    assert_eq!(r.metrics.loss_tokens, tokens, "loss tokens must come from finished completions only");
    let fp = fingerprint(r, &finished);
    let n = finished.len() as u64;
    assert_eq!(o.policy, (3 * n, fp.wrapping_mul(3)), "policy: two passes and the old policy, finished completions only");
    assert_eq!(o.reference, Some((n, fp)), "reference: finished completions only");
    assert!(r.metrics.loss.is_finite());
}

#[test]
fn a_batch_of_only_truncated_completions_updates_nothing() {
    // No stop string and 6 new tokens: a random model never ends a completion, so all are truncated.
    // Weight decay would move the weights if an optimizer step ran at all.
    let cfg = common::tiny_config("all-truncated", &["loss.mask_truncated=true", "optim.weight_decay=0.1"]);
    let mut t = Trainer::new(cfg, false).unwrap();
    let before = weights_of(t.trained_policy().unwrap());
    let o = observed_step(&mut t);
    let r = &o.report;
    assert!(r.rollouts.iter().flat_map(|x| &x.completions).all(|c| c.truncated()));
    assert!(expected_kept(&t, r).is_empty());
    assert!(r.kept.is_empty());
    let m = &r.metrics;
    assert_eq!((m.completions_kept, m.loss_tokens, m.forward_rows), (0, 0, 0));
    assert_eq!(m.completions_generated, 8);
    assert_eq!(m.loss, 0.0);
    assert_eq!(m.grad_norm, 0.0);
    assert_eq!(o.policy, (0, 0), "no policy forward pass");
    assert_eq!(o.reference, Some((0, 0)), "no reference forward pass");
    assert_eq!(weights_of(t.trained_policy().unwrap()), before, "the weights moved");
    assert_eq!(t.step, 1, "the step still counts");
}

#[test]
fn one_question_over_several_micro_batches_equals_one_micro_batch() {
    // One question, G = 8, every completion kept; a budget of 16 tokens (less than the prompt) puts each completion in its own
    // micro-batch (its own reference, old-policy and policy pass and its own backward).
    let run = |budget: usize| {
        let cfg = common::tiny_config(
            &format!("split-{budget}"),
            &[
                "rollout.questions_per_step=1",
                "rollout.num_generations=8",
                "loss.num_iterations=2",
                &format!("optim.micro_batch_tokens={budget}"),
                // Equal up to f32 summation order; bf16 rounding noise in the first pass's gradient
                // becomes whole lr-sized steps in AdamW's first update, which the second pass sees.
                "optim.matmul_precision=\"f32\"",
                // AdamW moves a weight by lr g / (|g| + eps) on its first step, a map whose slope at
                // g = 0 is lr / eps: with the default eps (1e-8) the f32 reassociation noise of a
                // gradient component that is nearly zero (~1e-9) becomes a step of a good fraction of
                // lr, so the runs' weights would differ by up to 1e-4 (measured) for no fault of the
                // micro-batching. At eps = 1e-4 that slope is 100 and the weights agree to ~2e-7.
                "optim.eps=1e-4",
            ],
        );
        let mut t = Trainer::new(cfg, false).unwrap();
        let o = observed_step(&mut t);
        let r = &o.report;
        let rewards: Vec<Vec<f64>> = r.rollouts.iter().map(|x| x.rewards.clone()).collect();
        let selection = t.cfg.rollout.selection.select(&rewards, 0).unwrap();
        let normaliser = t.cfg.generation.max_new_tokens as f64;
        let batch = build_batch(&r.rollouts, &selection, &t.cfg.loss, normaliser, budget).unwrap();
        let micro = batch.micro.len();
        let tokens: Vec<Vec<u32>> = r.rollouts[0].completions.iter().map(|c| c.tokens.clone()).collect();
        let max_adv = selection.iter_kept().map(|(_, _, a)| a.abs()).fold(0.0, f64::max);
        let longest = tokens.iter().map(Vec::len).max().unwrap_or(0);
        (o.report.metrics, o.policy, o.reference, micro, tokens, weights_of(t.trained_policy().unwrap()), (max_adv, longest, t.cfg.loss.clone()))
    };
    let (a, pa, ra, micro_a, tok_a, wa, (max_adv, longest, loss_cfg)) = run(16);
    let (b, pb, rb, micro_b, tok_b, wb, _) = run(4096);
    assert_eq!(tok_a, tok_b, "both runs must train on the same rollouts");
    assert_eq!(a.completions_kept, 8);
    assert_eq!((micro_a, micro_b), (8, 1), "budget 16 must split the question into one micro-batch per completion");
    assert_eq!((pa, ra), (pb, rb), "both score the same completions the same number of times");
    // Not bit-equal: the runs add the same terms in other orders (eight backward passes accumulated
    // against one; products over 1 and over 8 completions take other kernels and blockings: AVX-512's
    // few-row kernel against GEMM here, GEMM with other row blocks on AVX2), so they agree up to f32
    // reassociation. Reassociating a sum of n terms moves it by at most (n - 1) u sum|x_i|, u = 2^-24.
    // The loss and the KL are weighted sums over the T loss tokens (weights 1 / (N |o_i|), N
    // completions, summing to 1): each loss term is at most (1 + epsilon_high) max|A| plus beta times
    // a k3 term, and a k3 term (>= 0) is at most KL N max|o_i|, since the weighted sum of all is KL.
    // Measured: 6e-8 (loss) on AVX-512 and 1.6e-7 on AVX2 (CPPO_MAX_ISA=avx2), against bounds of ~2e-6.
    let u = f64::from(f32::EPSILON) / 2.0;
    let t_tokens = a.loss_tokens as f64;
    let k3_max = a.kl.abs() * a.completions_kept as f64 * longest as f64;
    let kl_tol = t_tokens * u * k3_max;
    let loss_tol = t_tokens * u * ((1.0 + loss_cfg.epsilon_high) * max_adv + loss_cfg.beta * k3_max);
    eprintln!("loss differs by {:.2e} (bound {loss_tol:.2e}), KL by {:.2e} (bound {kl_tol:.2e})", (a.loss - b.loss).abs(), (a.kl - b.kl).abs());
    assert!((a.loss - b.loss).abs() <= loss_tol, "loss {} vs {} (bound {loss_tol:.2e})", a.loss, b.loss);
    assert!((a.kl - b.kl).abs() <= kl_tol, "kl {} vs {} (bound {kl_tol:.2e})", a.kl, b.kl);
    assert!(a.grad_norm > 0.0);
    assert!((a.grad_norm - b.grad_norm).abs() <= 1e-4 * a.grad_norm, "grad norm {} vs {}", a.grad_norm, b.grad_norm);
    let worst = wa.iter().zip(&wb).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
    assert!(worst < 1e-5, "weights differ by {worst} after the step");
}
