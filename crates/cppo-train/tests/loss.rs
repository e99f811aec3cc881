//! The policy loss (`cppo_core::loss::policy_loss`, configured by the `[loss]` section) against
//! hand-derived values and gradients dL/dlogp.

use cppo_core::loss::{policy_loss, LossStats};
use cppo_train::config::LossSection;

/// Per-token inputs of one completion; each token goes in as its own row of width 1, so that every
/// token can carry its own weight.
struct LossInputs<'a> {
    logprobs: &'a [f32],
    old_logprobs: Option<&'a [f32]>,
    ref_logprobs: Option<&'a [f32]>,
    advantage: f32,
    weights: &'a [f32],
    mask: &'a [f32],
}

/// (dL/dlogp per token, statistics).
fn loss_of(i: &LossInputs, cfg: &LossSection) -> Result<(Vec<f32>, LossStats), cppo_core::Error> {
    let n = i.logprobs.len();
    let advantages = vec![i.advantage; n];
    let rows = cppo_core::loss::Rows {
        width: 1,
        logprobs: i.logprobs,
        old: i.old_logprobs,
        reference: i.ref_logprobs,
        mask: i.mask,
        advantages: &advantages,
        weights: i.weights,
        rollout: None,
        entropy: None,
    };
    policy_loss(&rows, &cfg.policy())
}

fn t(v: &[f32]) -> Vec<f32> {
    v.to_vec()
}

fn cfg() -> LossSection {
    LossSection { beta: 0.0, epsilon_low: 0.2, epsilon_high: 0.28, ..Default::default() }
}

#[test]
fn on_policy_gradient_is_minus_advantage_times_weight() {
    // mu = 1: ratio = 1, d loss / d lp_t = -A * w_t.
    let lp: &[f32] = &([-1.0, -2.0, -0.5]);
    let w = t(&[0.5, 0.25, 0.0]);
    let mask = t(&[1.0, 1.0, 0.0]);
    let adv = 2.0f32;
    let inputs = LossInputs { logprobs: lp, old_logprobs: None, ref_logprobs: None, advantage: adv, weights: &w, mask: &mask };
    let (g_loss, stats) = loss_of(&inputs, &cfg()).unwrap();
    assert!((stats.loss + 2.0 * 0.75).abs() < 1e-6, "loss {}", stats.loss);
    assert_eq!(stats.tokens, 2.0);
    let g = g_loss.clone();
    assert!((g[0] + 1.0).abs() < 1e-6 && (g[1] + 0.5).abs() < 1e-6 && g[2] == 0.0, "{g:?}");
}

#[test]
fn clipped_tokens_get_no_gradient_and_are_counted_low_and_high() {
    // old = 0; token 0 ratio e^0.5 = 1.65 > 1.28 with A > 0: clipped (high).
    // token 1 ratio e^-0.5 = 0.61 < 0.8 with A > 0: not clipped (min picks r A).
    let lp: &[f32] = &([0.5, -0.5]);
    let old = t(&[0.0, 0.0]);
    let w = t(&[1.0, 1.0]);
    let adv = 1.0f32;
    let inputs = LossInputs { logprobs: lp, old_logprobs: Some(&old), ref_logprobs: None, advantage: adv, weights: &w, mask: &w };
    let (g_loss, stats) = loss_of(&inputs, &cfg()).unwrap();
    let g = g_loss.clone();
    assert_eq!(g[0], 0.0);
    assert!((g[1] + (-0.5f32).exp()).abs() < 1e-6);
    assert_eq!((stats.clipped_high, stats.clipped_low), (1.0, 0.0));
    // With A < 0 the roles swap: token 1 (ratio 0.61 < 0.8) is clipped low.
    let adv = -1.0f32;
    let inputs = LossInputs { advantage: adv, ..inputs };
    let (g_loss, stats) = loss_of(&inputs, &cfg()).unwrap();
    let g = g_loss.clone();
    assert_eq!(g[1], 0.0);
    assert!((g[0] - 0.5f32.exp()).abs() < 1e-5);
    assert_eq!((stats.clipped_high, stats.clipped_low), (0.0, 1.0));
}

#[test]
fn dual_clip_bounds_negative_advantage_losses() {
    // ratio e^2 = 7.39, A = -1: PPO loss 7.39, dual clip c = 3 bounds it at 3 with zero gradient.
    let lp: &[f32] = &([2.0]);
    let old = t(&[0.0]);
    let w = t(&[1.0]);
    let adv = -1.0f32;
    let inputs = LossInputs { logprobs: lp, old_logprobs: Some(&old), ref_logprobs: None, advantage: adv, weights: &w, mask: &w };
    let (_, plain) = loss_of(&inputs, &cfg()).unwrap();
    assert!((plain.loss - 2f64.exp()).abs() < 1e-4);
    let dual = LossSection { dual_clip: Some(3.0), ..cfg() };
    let (g_loss, stats) = loss_of(&inputs, &dual).unwrap();
    assert!((stats.loss - 3.0).abs() < 1e-6);
    assert_eq!(stats.dual_clipped, 1.0);
    assert_eq!(g_loss.clone()[0], 0.0);
}

#[test]
fn k3_kl_term_matches_its_formula_and_gradient() {
    let lp: &[f32] = &([-1.0, -2.0]);
    let reference = t(&[-1.5, -1.0]);
    let w = t(&[0.5, 0.5]);
    let adv = 0.0f32;
    let c = LossSection { beta: 0.1, ..cfg() };
    let ones = t(&[1.0, 1.0]);
    let inputs = LossInputs { logprobs: lp, old_logprobs: None, ref_logprobs: Some(&reference), advantage: adv, weights: &w, mask: &ones };
    let (g_loss, stats) = loss_of(&inputs, &c).unwrap();
    let k3 = |lp: f64, r: f64| (r - lp).exp() - (r - lp) - 1.0;
    let expected = k3(-1.0, -1.5) + k3(-2.0, -1.0);
    assert!((stats.kl_sum - expected).abs() < 1e-5);
    assert!((stats.loss - 0.1 * 0.5 * expected).abs() < 1e-6);
    // d k3 / d lp = 1 - exp(ref - lp).
    let g = g_loss.clone();
    for (i, (l, r)) in [(-1.0f64, -1.5f64), (-2.0, -1.0)].iter().enumerate() {
        let want = 0.1 * 0.5 * (1.0 - (r - l).exp());
        assert!((g[i] as f64 - want).abs() < 1e-5, "{} vs {want}", g[i]);
    }
    // A clamp bounds the estimate.
    let clamped = LossSection { kl_clamp: Some(0.1), ..c };
    let (_, stats) = loss_of(&inputs, &clamped).unwrap();
    assert!(stats.kl_sum <= 0.2 + 1e-6);
}

/// TRL's `use_bias_correction_kl`: each token's k3 times the importance ratio pi_theta / pi_old, the
/// ratio carrying its gradient: d (k3 r) / d lp = (1 - exp(ref - lp)) r + k3 r.
#[test]
fn bias_corrected_kl_is_k3_times_the_ratio_with_its_gradient() {
    let (lps, olds, refs, ws) = ([-1.0f64, -2.0, -0.3], [-1.2f64, -1.7, -0.3], [-1.5f64, -1.0, -0.9], [0.5f64, 0.25, 0.25]);
    let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
    let lp: &[f32] = &f(&lps);
    let (old, reference, w) = (f(&olds), f(&refs), f(&ws));
    let ones = t(&[1.0, 1.0, 1.0]);
    let adv = 0.0f32;
    let beta = 0.1;
    let inputs = LossInputs { logprobs: lp, old_logprobs: Some(&old), ref_logprobs: Some(&reference), advantage: adv, weights: &w, mask: &ones };
    let on = LossSection { beta, use_bias_correction_kl: true, ..cfg() };
    let (g_loss, stats) = loss_of(&inputs, &on).unwrap();
    let k3 = |lp: f64, r: f64| (r - lp).exp() - (r - lp) - 1.0;
    let mut kl_sum = 0.0;
    let mut want_loss = 0.0;
    for i in 0..3 {
        let r = (lps[i] - olds[i]).exp();
        kl_sum += k3(lps[i], refs[i]) * r;
        want_loss += beta * ws[i] * k3(lps[i], refs[i]) * r;
    }
    assert!((stats.kl_sum - kl_sum).abs() < 1e-5, "{} vs {kl_sum}", stats.kl_sum);
    assert!((stats.loss - want_loss).abs() < 1e-6, "{} vs {want_loss}", stats.loss);
    let g = g_loss.clone();
    for i in 0..3 {
        let r = (lps[i] - olds[i]).exp();
        let want = beta * ws[i] * ((1.0 - (refs[i] - lps[i]).exp()) * r + k3(lps[i], refs[i]) * r);
        assert!((g[i] as f64 - want).abs() < 1e-5, "token {i}: {} vs {want}", g[i]);
    }
    // Off (the default), the ratio leaves the KL term alone: the corrected and plain terms differ
    // wherever the ratio is not 1.
    let (_, plain) = loss_of(&inputs, &LossSection { beta, ..cfg() }).unwrap();
    let plain_sum: f64 = (0..3).map(|i| k3(lps[i], refs[i])).sum();
    assert!((plain.kl_sum - plain_sum).abs() < 1e-5 && (plain.kl_sum - stats.kl_sum).abs() > 1e-3);
}

#[test]
fn beta_without_reference_is_an_error() {
    let lp = t(&[-1.0]);
    let lp = &lp[..];
    let adv = 1.0f32;
    let inputs = LossInputs { logprobs: lp, old_logprobs: None, ref_logprobs: None, advantage: adv, weights: lp, mask: lp };
    assert!(loss_of(&inputs, &LossSection { beta: 0.1, ..cfg() }).is_err());
}
