//! The objectives beyond PPO's token clip (GSPO's sequence ratio, CISPO, SAPO, the two-sided clip
//! delta, the off-policy sequence mask, the top-entropy token mask, and the rollout correction's four
//! modes) against the loss written straight from TRL's definition in f64, and the hand-written
//! gradient against central finite differences of that definition.

use cppo_core::loss::{policy_loss, CorrectionMode, ImportanceSamplingLevel, Objective, PolicyLoss, RolloutCorrection, Rows};
use proptest::prelude::*;

/// One micro-batch's inputs, in f64 for the definition.
#[derive(Clone, Debug)]
struct Batch {
    width: usize,
    lp: Vec<f32>,
    old: Option<Vec<f32>>,
    reference: Vec<f32>,
    rollout: Vec<f32>,
    entropy: Vec<f32>,
    mask: Vec<f32>,
    adv: Vec<f32>,
    w: Vec<f32>,
}

/// The quantile `q` of `v` by torch.quantile's linear rule (in f32, as torch computes it on f32).
fn quantile(mut v: Vec<f32>, q: f64) -> f32 {
    v.sort_by(f32::total_cmp);
    let pos = q * (v.len() - 1) as f64;
    let (i, f) = (pos.floor() as usize, (pos - pos.floor()) as f32);
    v[i] + (v[(i + 1).min(v.len() - 1)] - v[i]) * f
}

/// The step loss sum_i w_i sum_t mask (policy_t * masks_t * is_t + beta kl_t), as TRL's
/// `_compute_loss` writes it, with `x` the log-probs that carry the gradient and `b.lp` their
/// detached values (what TRL's `.detach()` and the no-grad old / sampling log-probs see).
fn definition(x: &[f64], b: &Batch, cfg: &PolicyLoss) -> f64 {
    let width = b.width;
    let detached: Vec<f64> = b.lp.iter().map(|&v| v as f64).collect();
    let old: Vec<f64> = b.old.as_ref().map_or(detached.clone(), |o| o.iter().map(|&v| v as f64).collect());
    let m = |i: usize| b.mask[i] as f64;
    let entropy_threshold = {
        let v: Vec<f32> = b.entropy.iter().zip(&b.mask).filter(|(_, &m)| m > 0.0).map(|(&e, _)| e).collect();
        (!v.is_empty()).then(|| quantile(v, 1.0 - cfg.top_entropy_quantile))
    };
    let mut total = 0.0;
    for j in 0..b.adv.len() {
        let a = b.adv[j] as f64;
        let row = j * width..(j + 1) * width;
        let tokens: f64 = row.clone().map(m).sum();
        let seq_lw = row.clone().map(|i| (x[i] - old[i]) * m(i)).sum::<f64>() / tokens.max(1.0);
        // The rollout correction from the sampling weights' trainer log-probs (no gradient).
        let diffs: Vec<f64> = row.clone().map(|i| (old[i] - b.rollout[i] as f64) * m(i)).collect();
        let c = &cfg.rollout_correction;
        let bound = |r: f64| {
            let (lo, hi) = (c.min.unwrap_or(f64::NEG_INFINITY), c.max.unwrap_or(f64::INFINITY));
            match c.mode {
                CorrectionMode::None => 1.0,
                CorrectionMode::TokenTruncate | CorrectionMode::SequenceTruncate => r.clamp(lo, hi),
                _ if r < lo || r > hi => 0.0,
                _ => r,
            }
        };
        let seq_is = bound(diffs.iter().sum::<f64>().exp());
        // VESPO's gamma weight from the detached log-ratios and the token correction's log-ratios.
        let phi = if let Objective::Vespo { k_pos, lambda_pos, k_neg, lambda_neg } = cfg.objective {
            let lower = 1e-8f64.ln();
            let token_is = |t: usize| match c.mode {
                CorrectionMode::TokenTruncate | CorrectionMode::TokenMask => bound(diffs[t].exp()),
                _ => 1.0,
            };
            let log_w: f64 = row.clone().enumerate().map(|(t, k)| ((detached[k] - old[k]).clamp(-20.0, 20.0) + token_is(t).ln().clamp(lower, 20.0)) * m(k)).sum();
            let log_w = log_w.clamp(lower, 20.0);
            let (kk, lambda) = if a >= 0.0 { (k_pos, lambda_pos) } else { (k_neg, lambda_neg) };
            let lambda = lambda.max(1e-4);
            let phi = (lambda + kk * log_w - lambda * log_w.exp()).exp();
            if phi.is_finite() { phi } else { 0.0 }
        } else {
            1.0
        };
        // DeepSeek-V3.2: drop a negative-advantage sequence that drifted past the threshold.
        let keep = match cfg.off_policy_mask_threshold {
            Some(d) => {
                let kl = row.clone().map(|i| (b.rollout[i] as f64 - detached[i]) * m(i)).sum::<f64>() / tokens.max(1.0);
                if a >= 0.0 || kl <= d {
                    1.0
                } else {
                    0.0
                }
            }
            None => 1.0,
        };
        for (t, i) in row.clone().enumerate() {
            // GSPO-token: sg(sequence log weight) + x - sg(x).
            let seq_lw_detached = row.clone().map(|k| (detached[k] - old[k]) * m(k)).sum::<f64>() / tokens.max(1.0);
            let lw = match cfg.importance_sampling_level {
                ImportanceSamplingLevel::Token => x[i] - old[i],
                ImportanceSamplingLevel::Sequence => seq_lw,
                ImportanceSamplingLevel::SequenceToken => seq_lw_detached + x[i] - detached[i],
            };
            let coef = lw.exp();
            let policy = match cfg.objective {
                Objective::Clip => {
                    let c2 = coef.clamp(1.0 - cfg.epsilon_low, 1.0 + cfg.epsilon_high);
                    let c1 = cfg.delta.map_or(coef, |d| coef.min(d));
                    let mut l = -(c1 * a).min(c2 * a);
                    if let (Some(c), true) = (cfg.dual_clip, a < 0.0) {
                        l = l.min(-c * a);
                    }
                    l
                }
                Objective::Cispo => {
                    // The clamped ratio is detached: its value from the detached log-probs.
                    let detached_lw = match cfg.importance_sampling_level {
                        ImportanceSamplingLevel::Token => detached[i] - old[i],
                        ImportanceSamplingLevel::Sequence | ImportanceSamplingLevel::SequenceToken => seq_lw_detached,
                    };
                    -detached_lw.exp().min(cfg.epsilon_high) * a * x[i]
                }
                Objective::Sapo { temperature_pos, temperature_neg } => {
                    let tau = if a > 0.0 { temperature_pos } else { temperature_neg };
                    -(1.0 / (1.0 + (-tau * (coef - 1.0)).exp())) * 4.0 / tau * a
                }
                Objective::Vespo { .. } => -phi * a * x[i],
            };
            let ent = match (cfg.top_entropy_quantile < 1.0, entropy_threshold) {
                (false, _) => 1.0,
                (true, None) => 0.0,
                (true, Some(th)) => ((b.entropy[i] * b.mask[i] >= th) && b.mask[i] > 0.0) as u8 as f64,
            };
            let is = match c.mode {
                // VESPO took the correction into phi.
                _ if matches!(cfg.objective, Objective::Vespo { .. }) => 1.0,
                CorrectionMode::None => 1.0,
                CorrectionMode::TokenTruncate | CorrectionMode::TokenMask => bound(diffs[t].exp()),
                _ => seq_is,
            };
            let mut l = policy * keep * ent * is;
            if cfg.beta > 0.0 {
                let d = b.reference[i] as f64 - x[i];
                let mut k3 = d.exp() - d - 1.0;
                if let Some(c) = cfg.kl_clamp {
                    k3 = k3.clamp(-c, c);
                }
                if cfg.use_bias_correction_kl {
                    k3 *= coef;
                }
                l += cfg.beta * k3;
            }
            total += (b.w[j] * b.mask[i]) as f64 * l;
        }
    }
    total
}

fn batches() -> impl Strategy<Value = Batch> {
    (1usize..4, 1usize..6, any::<bool>()).prop_flat_map(|(k, l, mu_one)| {
        let n = k * l;
        (
            prop::collection::vec(-4.0f32..-0.05, n),
            prop::collection::vec(-0.5f32..0.5, n),
            prop::collection::vec(-1.0f32..1.0, n),
            prop::collection::vec(-0.6f32..0.6, n),
            prop::collection::vec(0.0f32..5.0, n),
            prop::collection::vec(prop_oneof![3 => Just(1.0f32), 1 => Just(0.0f32)], n),
            prop::collection::vec(-2.0f32..2.0, k),
            prop::collection::vec(0.0f32..0.5, k),
        )
            .prop_map(move |(lp, shift, ref_shift, roll_shift, entropy, mask, adv, w)| {
                let old: Vec<f32> = lp.iter().zip(&shift).map(|(a, s)| a - s).collect();
                let sampled_with = if mu_one { &lp } else { &old };
                Batch {
                    width: l,
                    reference: lp.iter().zip(&ref_shift).map(|(a, s)| a + s).collect(),
                    rollout: sampled_with.iter().zip(&roll_shift).map(|(a, s)| a + s).collect(),
                    old: (!mu_one).then_some(old),
                    lp,
                    entropy,
                    mask,
                    adv,
                    w,
                }
            })
    })
}

fn corrections() -> impl Strategy<Value = RolloutCorrection> {
    (
        prop_oneof![
            Just(CorrectionMode::None),
            Just(CorrectionMode::TokenTruncate),
            Just(CorrectionMode::TokenMask),
            Just(CorrectionMode::SequenceTruncate),
            Just(CorrectionMode::SequenceMask)
        ],
        prop::option::of(0.2f64..0.9),
        prop::option::of(1.1f64..3.0),
    )
        .prop_map(|(mode, min, max)| RolloutCorrection { mode, min, max })
}

fn configs() -> impl Strategy<Value = PolicyLoss> {
    let objective = prop_oneof![
        2 => Just(Objective::Clip),
        1 => (0.5f64..6.0).prop_map(|_| Objective::Cispo),
        1 => (0.5f64..3.0, 0.5f64..3.0).prop_map(|(p, n)| Objective::Sapo { temperature_pos: p, temperature_neg: n }),
        1 => (0.5f64..4.0, 0.5f64..4.0, 0.5f64..4.0, 0.0f64..4.0).prop_map(|(k_pos, lambda_pos, k_neg, lambda_neg)| Objective::Vespo { k_pos, lambda_pos, k_neg, lambda_neg }),
    ];
    (
        (objective, prop_oneof![Just(ImportanceSamplingLevel::Token), Just(ImportanceSamplingLevel::Sequence), Just(ImportanceSamplingLevel::SequenceToken)]),
        (0.05f64..0.4, 0.05f64..0.4, prop::option::of(1.3f64..3.0), prop::option::of(1.5f64..4.0)),
        (prop_oneof![Just(0.0), 0.01f64..0.5], prop::option::of(0.05f64..2.0), any::<bool>()),
        (prop::option::of(-0.2f64..0.3), prop_oneof![Just(1.0), 0.0f64..1.0]),
        corrections(),
    )
        .prop_map(|((objective, level), (lo, hi, delta, dual), (beta, clamp, bias), (off, rho), mut rc)| {
            let clip = objective == Objective::Clip;
            // VESPO refuses a sequence-level correction (its own test below).
            if matches!(objective, Objective::Vespo { .. }) && matches!(rc.mode, CorrectionMode::SequenceMask | CorrectionMode::SequenceTruncate) {
                rc.mode = CorrectionMode::TokenMask;
            }
            PolicyLoss {
                epsilon_low: lo,
                // CISPO reads epsilon_high as the ratio's cap (TRL recommends 5).
                epsilon_high: if objective == Objective::Cispo { hi * 10.0 } else { hi },
                dual_clip: dual.filter(|_| clip),
                beta,
                kl_clamp: clamp,
                use_bias_correction_kl: bias,
                objective,
                importance_sampling_level: level,
                delta: delta.filter(|_| clip),
                off_policy_mask_threshold: off,
                top_entropy_quantile: rho,
                rollout_correction: rc,
            }
        })
}

fn rows(b: &Batch) -> Rows<'_> {
    Rows {
        width: b.width,
        logprobs: &b.lp,
        old: b.old.as_deref(),
        reference: Some(&b.reference),
        mask: &b.mask,
        advantages: &b.adv,
        weights: &b.w,
        rollout: Some(&b.rollout),
        entropy: Some(&b.entropy),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn every_objective_matches_its_definition(b in batches(), cfg in configs()) {
        let (g, stats) = policy_loss(&rows(&b), &cfg).unwrap();
        let x: Vec<f64> = b.lp.iter().map(|&v| v as f64).collect();
        let want = definition(&x, &b, &cfg);
        prop_assert!((stats.loss - want).abs() <= 1e-4 * (1.0 + want.abs()), "loss {} vs definition {} ({:?})", stats.loss, want, cfg);
        let h = 1e-4;
        for i in 0..x.len() {
            let f = |d: f64| {
                let mut y = x.clone();
                y[i] += d;
                definition(&y, &b, &cfg)
            };
            // A kink (clip bound, min, mask threshold) within h: the difference says nothing there.
            let second = (f(h) - 2.0 * f(0.0) + f(-h)).abs();
            let around = (f(2.0 * h) - 2.0 * f(h) + f(0.0)).abs().max((f(0.0) - 2.0 * f(-h) + f(-2.0 * h)).abs());
            if second > 1e-6 || around > 1e-6 {
                continue;
            }
            let fd = (f(h) - f(-h)) / (2.0 * h);
            prop_assert!((g[i] as f64 - fd).abs() <= 1e-3 * (1.0 + fd.abs()), "token {}: {} vs finite difference {} ({:?})", i, g[i], fd, cfg);
        }
    }

    /// The mismatch statistics are the gap between the sampling weights' trainer log-probs and the
    /// sampler's, whatever the mode, and the ratios are those the definition applies.
    #[test]
    fn mismatch_statistics_measure_the_gap(b in batches(), rc in corrections()) {
        let cfg = PolicyLoss { rollout_correction: rc, ..PolicyLoss::default() };
        let (_, stats) = policy_loss(&Rows { entropy: None, ..rows(&b) }, &cfg).unwrap();
        let trainer = b.old.as_ref().unwrap_or(&b.lp);
        let on: Vec<usize> = (0..b.lp.len()).filter(|&i| b.mask[i] > 0.0).collect();
        let mm = &stats.mismatch;
        prop_assert_eq!(mm.tokens, on.len() as f64);
        let gap: f64 = on.iter().map(|&i| (trainer[i] - b.rollout[i]).abs() as f64).sum();
        prop_assert!((mm.token_abs_diff - gap).abs() < 1e-5 * (1.0 + gap));
        prop_assert_eq!(mm.sequences, b.adv.len() as f64);
        let want_ratios = match rc.mode {
            CorrectionMode::None => 0,
            CorrectionMode::TokenTruncate | CorrectionMode::TokenMask => on.len(),
            _ => b.adv.len(),
        };
        prop_assert_eq!(mm.ratios, want_ratios as f64);
        if want_ratios > 0 {
            prop_assert!(mm.ratio_min <= mm.ratio_sum / mm.ratios + 1e-6 && mm.ratio_sum / mm.ratios <= mm.ratio_max + 1e-6);
            if let Some(hi) = rc.max {
                prop_assert!(mm.ratio_max <= hi + 1e-6);
            }
        }
    }
}

/// GSPO by hand: one sequence of two loss tokens with log-ratios 0.1 and 0.3 has the weight
/// exp(0.2); with A = 1 and the bound 1.28 not reached, the loss is 2 w (-exp(0.2)) and each
/// token's gradient is that times d(mean log-ratio)/d logp_t = 1/2: -exp(0.2) w.
#[test]
fn gspo_by_hand() {
    let (lp, old, mask) = ([-1.0f32, -2.0], [-1.1f32, -2.3], [1.0f32, 1.0]);
    let cfg = PolicyLoss { epsilon_high: 0.28, importance_sampling_level: ImportanceSamplingLevel::Sequence, ..PolicyLoss::default() };
    let r = Rows { width: 2, logprobs: &lp, old: Some(&old), reference: None, mask: &mask, advantages: &[1.0], weights: &[0.5], rollout: None, entropy: None };
    let (g, st) = policy_loss(&r, &cfg).unwrap();
    let s = 0.2f64.exp();
    assert!((st.loss - (-s)).abs() < 1e-5, "{}", st.loss);
    for gi in g {
        assert!((gi as f64 - (-s * 0.5)).abs() < 1e-5, "{gi}");
    }
}

/// GSPO-token by hand: the same sequence with the entropy mask keeping its first token only. The value
/// is GSPO's (each token weighs exp(0.2)), but where GSPO spreads the kept token's gradient over both
/// tokens (-exp(0.2) w / 2 each), GSPO-token gives it to the kept token alone.
#[test]
fn gspo_token_gives_each_token_its_own_gradient() {
    let (lp, old, mask, entropy) = ([-1.0f32, -2.0], [-1.1f32, -2.3], [1.0f32, 1.0], [2.0f32, 0.5]);
    let r = Rows { width: 2, logprobs: &lp, old: Some(&old), reference: None, mask: &mask, advantages: &[1.0], weights: &[0.5], rollout: None, entropy: Some(&entropy) };
    let s = 0.2f64.exp();
    let at = |level| {
        let cfg = PolicyLoss { epsilon_high: 0.28, importance_sampling_level: level, top_entropy_quantile: 0.5, ..PolicyLoss::default() };
        policy_loss(&r, &cfg).unwrap()
    };
    let (g_seq, st_seq) = at(ImportanceSamplingLevel::Sequence);
    let (g_tok, st_tok) = at(ImportanceSamplingLevel::SequenceToken);
    assert!((st_seq.loss - (-s * 0.5)).abs() < 1e-5 && (st_tok.loss - st_seq.loss).abs() < 1e-7, "{} {}", st_seq.loss, st_tok.loss);
    for gi in &g_seq {
        assert!((*gi as f64 - (-s * 0.25)).abs() < 1e-5, "{g_seq:?}");
    }
    assert!((g_tok[0] as f64 - (-s * 0.5)).abs() < 1e-5 && g_tok[1] == 0.0, "{g_tok:?}");
}

/// CISPO by hand: ratio exp(0.5) = 1.65 above the cap 1.2 still passes a gradient, -1.2 A w.
#[test]
fn cispo_keeps_the_gradient_of_a_capped_token() {
    let cfg = PolicyLoss { epsilon_high: 1.2, objective: Objective::Cispo, ..PolicyLoss::default() };
    let r = Rows { width: 1, logprobs: &[-1.0], old: Some(&[-1.5]), reference: None, mask: &[1.0], advantages: &[2.0], weights: &[0.5], rollout: None, entropy: None };
    let (g, st) = policy_loss(&r, &cfg).unwrap();
    assert!((g[0] - (-1.2 * 2.0 * 0.5)).abs() < 1e-6);
    assert!((st.loss - (-1.2 * 2.0 * -1.0 * 0.5)).abs() < 1e-6);
    assert_eq!(st.clipped_high, 1.0);
}

/// The rollout correction with sequence_mask and cap 3: a sequence whose summed gap is ln 4 loses
/// its policy term, one whose gap is ln 2 is weighted by 2.
#[test]
fn sequence_mask_drops_a_sequence_above_the_cap() {
    let lp = [-1.0f32, -1.0, -1.0, -1.0];
    let rollout = [-1.0 - 2f32.ln(), -1.0 - 2f32.ln(), -1.0 - 2f32.ln(), -1.0];
    let cfg = PolicyLoss { rollout_correction: RolloutCorrection::TRL_DEFAULT, ..PolicyLoss::default() };
    let r = Rows { width: 2, logprobs: &lp, old: None, reference: None, mask: &[1.0; 4], advantages: &[1.0, 1.0], weights: &[0.25, 0.25], rollout: Some(&rollout), entropy: None };
    let (g, st) = policy_loss(&r, &cfg).unwrap();
    assert_eq!(&g[..2], &[0.0, 0.0]);
    assert!((g[2] + 0.5).abs() < 1e-5 && (g[3] + 0.5).abs() < 1e-5, "{g:?}");
    assert_eq!((st.mismatch.masked, st.mismatch.ratios, st.policy_masked), (1.0, 2.0, 2.0));
    assert!((st.mismatch.ratio_max - 2.0).abs() < 1e-5 && st.mismatch.ratio_min == 0.0);
}

/// VESPO by hand: one sequence of two loss tokens with log-ratios 0.1 and 0.3 (w = e^0.4), A = 1,
/// (k, lambda) = (2, 3): phi = e^(3 + 2 * 0.4 - 3 e^0.4), each token's gradient -phi w_row, whatever
/// its own ratio; the weight is 1 at w = 1 (mu = 1); a sequence correction mode is refused.
#[test]
fn vespo_by_hand() {
    let (lp, old, mask) = ([-1.0f32, -2.0], [-1.1f32, -2.3], [1.0f32, 1.0]);
    let cfg = PolicyLoss { objective: Objective::Vespo { k_pos: 2.0, lambda_pos: 3.0, k_neg: 3.0, lambda_neg: 2.0 }, ..PolicyLoss::default() };
    let r = Rows { width: 2, logprobs: &lp, old: Some(&old), reference: None, mask: &mask, advantages: &[1.0], weights: &[0.5], rollout: None, entropy: None };
    let (g, st) = policy_loss(&r, &cfg).unwrap();
    let phi = (3.0 + 2.0 * 0.4 - 3.0 * 0.4f64.exp()).exp();
    assert!((st.loss - (-phi * 0.5 * (-3.0))).abs() < 1e-5, "{} vs {}", st.loss, -phi * 0.5 * -3.0);
    for gi in &g {
        assert!((*gi as f64 - (-phi * 0.5)).abs() < 1e-5, "{g:?}");
    }
    let (g, _) = policy_loss(&Rows { old: None, ..r }, &cfg).unwrap();
    assert!(g.iter().all(|&x| (x + 0.5).abs() < 1e-6), "phi(1) = 1: {g:?}");
    let rollout = [-1.0f32, -2.0];
    let with_seq = PolicyLoss { rollout_correction: RolloutCorrection::TRL_DEFAULT, ..cfg };
    assert_eq!(policy_loss(&Rows { rollout: Some(&rollout), ..r }, &with_seq).unwrap_err(), cppo_core::Error::VespoSequenceCorrection);
}

#[test]
fn a_correction_without_rollout_log_probs_or_a_quantile_without_entropies_is_an_error() {
    let r = Rows { width: 1, logprobs: &[-1.0], old: None, reference: None, mask: &[1.0], advantages: &[1.0], weights: &[1.0], rollout: None, entropy: None };
    let cfg = PolicyLoss { rollout_correction: RolloutCorrection::TRL_DEFAULT, ..PolicyLoss::default() };
    assert_eq!(policy_loss(&r, &cfg).unwrap_err(), cppo_core::Error::NoRolloutLogprobs);
    let cfg = PolicyLoss { top_entropy_quantile: 0.2, ..PolicyLoss::default() };
    assert_eq!(policy_loss(&r, &cfg).unwrap_err(), cppo_core::Error::NoEntropy);
}
