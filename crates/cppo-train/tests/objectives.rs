//! TRL's objectives and the rollout correction in the trainer: the sampler's log-probs agree with the
//! trainer's when both use the same f32 weights, the gap at bf16 rollouts is measured and corrected
//! by default, every loss type trains composed with CPPO, PODS with mu = 2 and LoRA, and the
//! combinations TRL does not allow are errors naming both keys.

use cppo_test_support as common;

use cppo_core::loss::{Aggregation, CorrectionMode, Objective};
use cppo_train::objectives::{run_rollout_correction, LossType};
use cppo_train::trainer::Trainer;

fn err_of(overrides: &[&str]) -> String {
    let text = toml::to_string(&common::tiny_config("objectives-err", &[])).unwrap();
    let ov: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    format!("{:#}", cppo_train::config::TrainConfig::from_toml(&text, &ov).unwrap_err())
}

/// With f32 rollout weights and f32 update products the sampler's log-prob of each token is the
/// trainer's (same weights, same temperature), so the measured gap is rounding; with bf16 rollout
/// weights it is larger, and the default correction (sequence_mask, cap 3) is on.
#[test]
fn the_sampler_gap_is_measured_and_corrected_by_default_only_across_precisions() {
    let same = common::tiny_config("gap-f32", &["generation.weights=\"f32\"", "optim.matmul_precision=\"f32\"", "generation.temperature=0.8"]);
    assert_eq!(run_rollout_correction(&same).mode, CorrectionMode::None);
    let m = Trainer::new(same, false).unwrap().train_step(|_| {}).unwrap().metrics;
    assert!(m.loss_tokens > 0);
    assert!(m.mismatch.logp_diff_mean < 1e-4 && m.mismatch.logp_diff_max < 1e-3, "f32 sampler vs f32 trainer: {:?}", m.mismatch);
    assert_eq!(m.mismatch.ratio_mean, 0.0, "no correction, no ratios");

    let bf16 = common::tiny_config("gap-bf16", &["generation.weights=\"bf16\"", "optim.matmul_precision=\"f32\"", "generation.temperature=0.8"]);
    let c = run_rollout_correction(&bf16);
    assert_eq!((c.mode, c.min, c.max), (CorrectionMode::SequenceMask, None, Some(3.0)));
    let m2 = Trainer::new(bf16, false).unwrap().train_step(|_| {}).unwrap().metrics;
    assert!(m2.mismatch.logp_diff_mean > m.mismatch.logp_diff_mean, "bf16 {:?} against f32 {:?}", m2.mismatch, m.mismatch);
    assert!(m2.mismatch.ratio_mean > 0.0 && m2.mismatch.ratio_max <= 3.0, "{:?}", m2.mismatch);

    let off = common::tiny_config("gap-off", &["generation.weights=\"bf16\"", "optim.matmul_precision=\"f32\"", "loss.rollout_correction=\"none\""]);
    assert_eq!(run_rollout_correction(&off).mode, CorrectionMode::None);
}

#[test]
fn loss_types_imply_their_objective_and_aggregation() {
    let cases = [
        ("grpo", Aggregation::SeqMeanTokenMean, Objective::Clip),
        ("dapo", Aggregation::TokenMean, Objective::Clip),
        ("bnpo", Aggregation::TokenMean, Objective::Clip),
        ("dr_grpo", Aggregation::SeqMeanTokenSumNorm, Objective::Clip),
        ("cispo", Aggregation::TokenMean, Objective::Cispo),
        ("sapo", Aggregation::SeqMeanTokenMean, Objective::Sapo { temperature_pos: 1.0, temperature_neg: 1.05 }),
        ("vespo", Aggregation::TokenMean, Objective::Vespo { k_pos: 2.0, lambda_pos: 3.0, k_neg: 3.0, lambda_neg: 2.0 }),
    ];
    for (name, agg, obj) in cases {
        let cfg = common::tiny_config(&format!("lt-{name}"), &[&format!("loss.loss_type=\"{name}\"")]);
        assert_eq!((cfg.loss.aggregation(), cfg.loss.objective()), (agg, obj), "{name}");
    }
    let luspo = common::tiny_config("lt-luspo", &["loss.loss_type=\"luspo\"", "loss.importance_sampling_level=\"sequence\""]);
    assert_eq!(luspo.loss.loss_type, Some(LossType::Luspo));
    assert_eq!(luspo.loss.aggregation(), Aggregation::SeqMeanTokenSum);
}

#[test]
fn refused_combinations_name_both_keys() {
    let cases: [(&[&str], [&str; 2]); 8] = [
        (&["loss.loss_type=\"vespo\"", "loss.importance_sampling_level=\"sequence\""], ["loss.loss_type", "loss.importance_sampling_level"]),
        (&["loss.loss_type=\"vespo\"", "loss.rollout_correction=\"sequence_mask\""], ["loss.loss_type", "loss.rollout_correction"]),
        (&["loss.loss_type=\"vespo\"", "loss.delta=1.5"], ["loss.delta", "loss.loss_type"]),
        (&["loss.loss_type=\"luspo\""], ["loss.loss_type", "loss.importance_sampling_level"]),
        (&["loss.loss_type=\"dapo\"", "loss.aggregation=\"seq-mean-token-mean\""], ["loss.aggregation", "loss.loss_type"]),
        (&["loss.loss_type=\"cispo\"", "loss.dual_clip=3.0"], ["loss.dual_clip", "loss.loss_type"]),
        (&["loss.loss_type=\"sapo\"", "loss.delta=1.5"], ["loss.delta", "loss.loss_type"]),
        (&["loss.rollout_correction_min=5.0"], ["loss.rollout_correction_min", "loss.rollout_correction_cap"]),
    ];
    for (ov, keys) in cases {
        let e = err_of(ov);
        for k in keys {
            assert!(e.contains(k), "{ov:?}: {e}");
        }
    }
    assert!(err_of(&["loss.loss_type=\"vespo\"", "loss.vespo_k_neg=-1.0"]).contains("loss.vespo_k_neg"));
    assert!(err_of(&["loss.loss_type=\"ppo\""]).contains("loss.loss_type"));
    let gdpo = err_of(&["rollout.multi_objective_aggregation=\"normalize_then_sum\"", "rollout.estimator={ kind = \"rloo\" }"]);
    assert!(gdpo.contains("rollout.multi_objective_aggregation") && gdpo.contains("rollout.estimator"), "{gdpo}");
    assert!(err_of(&["loss.top_entropy_quantile=1.5"]).contains("loss.top_entropy_quantile"));
    assert!(err_of(&["loss.rollout_correction=\"sequence\""]).contains("loss.rollout_correction"));
}

/// Two steps of each objective, composed with a selection and mu: finite loss, the policy moves,
/// the sampler gap is reported.
fn trains(name: &str, overrides: &[&str]) {
    let mut ov = vec!["generation.weights=\"bf16\"", "optim.matmul_precision=\"f32\""];
    ov.extend_from_slice(overrides);
    let mut t = Trainer::new(common::tiny_config(name, &ov), false).unwrap();
    for _ in 0..2 {
        let m = t.train_step(|_| {}).unwrap().metrics;
        assert!(m.loss.is_finite(), "{name}: {m:?}");
        assert!(m.completions_kept == 0 || m.mismatch.logp_diff_mean > 0.0, "{name}: {:?}", m.mismatch);
    }
}

#[test]
fn gspo_with_cppo_pruning_and_two_passes() {
    trains("gspo-cppo", &["loss.importance_sampling_level=\"sequence\"", "loss.epsilon_low=3e-4", "loss.epsilon_high=4e-4", "rollout.strategy={ kind = \"cppo\", pruning_rate = 0.5 }", "loss.num_iterations=2"]);
}

#[test]
fn cispo_and_sapo_with_pods() {
    trains("cispo-pods", &["loss.loss_type=\"cispo\"", "loss.epsilon_high=5.0", "rollout.strategy={ kind = \"pods-max-variance\", m = 2 }", "loss.num_iterations=2"]);
    trains("sapo-pods", &["loss.loss_type=\"sapo\"", "rollout.strategy={ kind = \"pods-max-variance\", m = 2 }"]);
}

#[test]
fn luspo_delta_masks_and_every_correction_mode() {
    trains("luspo", &["loss.loss_type=\"luspo\"", "loss.importance_sampling_level=\"sequence\"", "loss.rollout_correction=\"token_truncate\""]);
    trains("delta", &["loss.delta=1.5", "loss.off_policy_mask_threshold=0.1", "loss.num_iterations=2", "loss.rollout_correction=\"token_mask\""]);
    trains("entropy", &["loss.top_entropy_quantile=0.2", "loss.rollout_correction=\"sequence_truncate\"", "rollout.dynamic_sampling=true"]);
}

#[test]
fn gspo_token_maxrl_and_sampling_penalties_with_cppo_and_pods() {
    trains("gspo-token", &["loss.importance_sampling_level=\"sequence_token\"", "loss.num_iterations=2", "rollout.strategy={ kind = \"cppo\", pruning_rate = 0.5 }"]);
    trains("maxrl", &["rollout.estimator={ kind = \"grpo\", scale_rewards = \"mean\" }", "rollout.strategy={ kind = \"pods-max-variance\", m = 2 }", "rollout.dynamic_sampling=true"]);
    trains("vespo", &["loss.loss_type=\"vespo\"", "loss.num_iterations=2", "rollout.strategy={ kind = \"cppo\", pruning_rate = 0.5 }"]);
    trains("penalised-sampling", &["generation.repetition_penalty=1.3", "generation.min_p=0.05", "loss.num_iterations=2"]);
}

#[test]
fn objectives_train_lora_adapters() {
    trains("lora-gspo", &["lora={ r = 2, target_modules = \"all-linear\" }", "loss.importance_sampling_level=\"sequence\"", "loss.loss_type=\"sapo\""]);
}

/// GDPO: the advantages come from the per-group normalised reward parts, whitened over the batch.
#[test]
fn gdpo_normalises_each_reward_part_before_the_sum() {
    let cfg = common::tiny_config("gdpo", &["rollout.multi_objective_aggregation=\"normalize_then_sum\""]);
    let mut t = Trainer::new(cfg.clone(), false).unwrap();
    let report = t.train_step(|_| {}).unwrap();
    assert!(report.metrics.loss.is_finite());
    let rs = cppo_train::rollout::RewardSet::from_section(&cfg.reward).unwrap();
    let (rewards, est) = cppo_train::objectives::advantage_inputs(&cfg, &rs, &report.rollouts);
    let weights: Vec<f64> = rs.parts.iter().map(|p| p.1).collect();
    for (g, r) in report.rollouts.iter().enumerate() {
        let n = r.rewards.len() as f64;
        for (i, &x) in rewards[g].iter().enumerate() {
            // Straight from the definition: sum_p w_p (s_p,i - mean_p) / (std_p + 1e-4), std with n - 1.
            let want: f64 = r.parts.iter().zip(&weights).map(|(s, w)| {
                let mean = s.iter().sum::<f64>() / n;
                let std = (s.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
                w * (s[i] - mean) / (std + 1e-4)
            }).sum();
            assert!((x - want).abs() < 1e-9, "group {g} completion {i}: {x} vs {want}");
        }
    }
    assert_eq!(est, cppo_core::Estimator::ReinforcePlusPlus { std: cppo_core::StdKind::Bessel, eps: 1e-4 });
}

/// VESPO's default rollout correction is token-level (TRL refuses a sequence mode with it), and a
/// sequence-level default elsewhere.
#[test]
fn vespo_defaults_to_a_token_correction() {
    let vespo = common::tiny_config("vespo-default", &["loss.loss_type=\"vespo\""]);
    assert_eq!(vespo.loss.rollout_correction(true).mode, CorrectionMode::TokenTruncate);
    assert_eq!(vespo.loss.rollout_correction(false).mode, CorrectionMode::None);
    let grpo = common::tiny_config("grpo-default", &[]);
    assert_eq!(grpo.loss.rollout_correction(true).mode, CorrectionMode::SequenceMask);
}
