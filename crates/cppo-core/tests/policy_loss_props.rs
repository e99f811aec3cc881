//! The policy loss and its hand-written gradient dL/dlogp against brute force: the loss written
//! straight from its definition in f64, and its derivative by central finite differences.

use cppo_core::loss::{policy_loss, PolicyLoss, Rows};
use proptest::prelude::*;

/// One token's loss from the definitions: -min(r A, clip(r) A) (bounded by -c A for A < 0 with dual
/// clip c), plus beta times k3 (clamped, times r with bias correction).
fn token_loss(lp: f64, old: f64, reference: f64, a: f64, cfg: &PolicyLoss) -> f64 {
    let r = (lp - old).exp();
    let clip = r.clamp(1.0 - cfg.epsilon_low, 1.0 + cfg.epsilon_high);
    let mut l = -(r * a).min(clip * a);
    if let (Some(c), true) = (cfg.dual_clip, a < 0.0) {
        l = l.min(-c * a);
    }
    if cfg.beta > 0.0 {
        let d = reference - lp;
        let mut k3 = d.exp() - d - 1.0;
        if let Some(c) = cfg.kl_clamp {
            k3 = k3.clamp(-c, c);
        }
        if cfg.use_bias_correction_kl {
            k3 *= r;
        }
        l += cfg.beta * k3;
    }
    l
}

/// Whether lp sits within `h` of a kink of the loss, where a finite difference says nothing.
fn near_kink(lp: f64, old: f64, reference: f64, a: f64, cfg: &PolicyLoss, h: f64) -> bool {
    let f = |x| token_loss(x, old, reference, a, cfg);
    // A kink shows as a second difference far above the smooth curvature.
    let second = (f(lp + h) - 2.0 * f(lp) + f(lp - h)).abs();
    let bound = (f(lp + 2.0 * h) - 2.0 * f(lp + h) + f(lp)).abs().max((f(lp) - 2.0 * f(lp - h) + f(lp - 2.0 * h)).abs());
    second > 1e-6 || bound > 1e-6 || (a == 0.0 && cfg.beta == 0.0)
}

fn configs() -> impl Strategy<Value = PolicyLoss> {
    (
        0.05f64..0.4,
        0.05f64..0.4,
        prop::option::of(1.5f64..4.0),
        prop_oneof![Just(0.0), 0.01f64..0.5],
        prop::option::of(0.05f64..2.0),
        any::<bool>(),
    )
        .prop_map(|(lo, hi, dual, beta, clamp, bias)| PolicyLoss {
            epsilon_low: lo,
            epsilon_high: hi,
            dual_clip: dual,
            beta,
            kl_clamp: clamp,
            use_bias_correction_kl: bias,
            ..PolicyLoss::default()
        })
}

/// k completions of width L with per-token log-probs, old and reference log-probs, masks, and
/// per-completion advantages and weights.
#[allow(clippy::type_complexity)]
fn batch() -> impl Strategy<Value = (usize, Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>)> {
    (1usize..4, 1usize..6).prop_flat_map(|(k, l)| {
        let n = k * l;
        (
            Just(l),
            prop::collection::vec(-4.0f32..-0.05, n),
            prop::collection::vec(-0.6f32..0.6, n),
            prop::collection::vec(-1.0f32..1.0, n),
            prop::collection::vec(prop_oneof![3 => Just(1.0f32), 1 => Just(0.0f32)], n),
            prop::collection::vec(-2.0f32..2.0, k),
            prop::collection::vec(0.0f32..0.5, k),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn loss_and_gradient_match_the_definition(
        (width, lp, shift, ref_shift, mask, adv, w) in batch(),
        cfg in configs(),
        mu_one in any::<bool>(),
    ) {
        let old: Vec<f32> = lp.iter().zip(&shift).map(|(a, s)| a - s).collect();
        let reference: Vec<f32> = lp.iter().zip(&ref_shift).map(|(a, s)| a + s).collect();
        let rows = Rows {
            width,
            logprobs: &lp,
            old: (!mu_one).then_some(&old[..]),
            reference: Some(&reference),
            mask: &mask,
            advantages: &adv,
            weights: &w,
            rollout: None,
            entropy: None,
        };
        let (g, stats) = policy_loss(&rows, &cfg).unwrap();
        let mut want_loss = 0.0;
        for (i, &lpi) in lp.iter().enumerate() {
            let j = i / width;
            let (lp64, a, wt) = (lpi as f64, adv[j] as f64, (w[j] * mask[i]) as f64);
            let old64 = if mu_one { lp64 } else { old[i] as f64 };
            let r64 = reference[i] as f64;
            want_loss += wt * token_loss(lp64, old64, r64, a, &cfg);
            // With mu = 1 the old log-probs are the current ones, detached: they do not move with lp.
            let f = |x: f64| wt * token_loss(x, old64, r64, a, &cfg);
            let h = 1e-4;
            if near_kink(lp64, old64, r64, a, &cfg, h) {
                continue;
            }
            let fd = (f(lp64 + h) - f(lp64 - h)) / (2.0 * h);
            prop_assert!((g[i] as f64 - fd).abs() <= 1e-3 * (1.0 + fd.abs()), "token {}: {} vs finite difference {} ({:?})", i, g[i], fd, cfg);
        }
        prop_assert!((stats.loss - want_loss).abs() <= 1e-4 * (1.0 + want_loss.abs()), "loss {} vs {}", stats.loss, want_loss);
        prop_assert_eq!(stats.tokens, mask.iter().map(|&m| m as f64).sum::<f64>());
    }

    /// The first pass of a step (ratio 1, no KL): dL/dlogp is exactly -A w on every loss token, the
    /// value the update has always back-propagated.
    #[test]
    fn on_policy_gradient_is_exactly_minus_advantage_times_weight(
        (width, lp, _s, _r, mask, adv, w) in batch(),
        lo in 0.05f64..0.4, hi in 0.05f64..0.4,
    ) {
        let cfg = PolicyLoss { epsilon_low: lo, epsilon_high: hi, dual_clip: None, beta: 0.0, kl_clamp: None, use_bias_correction_kl: false, ..PolicyLoss::default() };
        let rows = Rows { width, logprobs: &lp, old: None, reference: None, mask: &mask, advantages: &adv, weights: &w, rollout: None, entropy: None };
        let (g, stats) = policy_loss(&rows, &cfg).unwrap();
        for (i, &gi) in g.iter().enumerate() {
            let j = i / width;
            prop_assert_eq!(gi, -(mask[i] * w[j] * adv[j]) + 0.0);
        }
        prop_assert_eq!((stats.clipped_low, stats.clipped_high), (0.0, 0.0));
    }
}

#[test]
fn wrong_lengths_and_a_missing_reference_are_errors() {
    let cfg = PolicyLoss { epsilon_low: 0.2, epsilon_high: 0.2, dual_clip: None, beta: 0.1, kl_clamp: None, use_bias_correction_kl: false, ..PolicyLoss::default() };
    let (lp, mask) = ([-1.0f32, -2.0], [1.0f32, 1.0]);
    let rows = Rows { width: 2, logprobs: &lp, old: None, reference: None, mask: &mask, advantages: &[1.0], weights: &[0.5], rollout: None, entropy: None };
    assert_eq!(policy_loss(&rows, &cfg).unwrap_err(), cppo_core::Error::NoReference);
    let short = Rows { width: 3, ..rows };
    assert!(matches!(policy_loss(&short, &cfg), Err(cppo_core::Error::LossShape { rows: 1, width: 3 })));
}
