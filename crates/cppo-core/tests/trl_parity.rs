//! Parity with TRL's own loss code: cppo writes fixed inputs (log-probs of the policy, the old policy,
//! the reference and the sampler, entropies, masks, advantages) with its loss and gradient dL/dlogp
//! for every mode, and `tools/trl_parity.sh` runs TRL's `GRPOTrainer._compute_loss` on the same inputs
//! (in a virtual environment with TRL and CPU PyTorch from PyPI) and compares.
//!
//! Needs Python 3 and PyPI, so it is ignored by default:
//! `cargo test -p cppo-core --test trl_parity -- --ignored --nocapture`

use cppo_core::loss::{policy_loss, Aggregation, CorrectionMode, ImportanceSamplingLevel, Objective, PolicyLoss, RolloutCorrection, Rows};
use rand::{Rng, SeedableRng};
use serde_json::json;

/// One mode: TRL's settings by TRL's names and cppo's equivalent.
struct Mode {
    name: &'static str,
    loss_type: &'static str,
    aggregation: Aggregation,
    cfg: PolicyLoss,
}

fn modes() -> Vec<Mode> {
    let base = PolicyLoss { epsilon_low: 0.2, epsilon_high: 0.28, ..PolicyLoss::default() };
    let seq = ImportanceSamplingLevel::Sequence;
    let vespo = Objective::Vespo { k_pos: 2.0, lambda_pos: 3.0, k_neg: 3.0, lambda_neg: 2.0 };
    let rc = |mode, min, max| RolloutCorrection { mode, min, max };
    let m = |name, loss_type, aggregation, cfg| Mode { name, loss_type, aggregation, cfg };
    vec![
        m("grpo", "grpo", Aggregation::SeqMeanTokenMean, base),
        m("dapo", "dapo", Aggregation::TokenMean, base),
        m("bnpo", "bnpo", Aggregation::TokenMean, base),
        m("dr_grpo", "dr_grpo", Aggregation::SeqMeanTokenSumNorm, base),
        m("gspo", "grpo", Aggregation::SeqMeanTokenMean, PolicyLoss { epsilon_low: 3e-2, epsilon_high: 4e-2, importance_sampling_level: seq, ..base }),
        m("cispo", "cispo", Aggregation::TokenMean, PolicyLoss { epsilon_high: 1.1, objective: Objective::Cispo, ..base }),
        m("sapo", "sapo", Aggregation::SeqMeanTokenMean, PolicyLoss { objective: Objective::Sapo { temperature_pos: 1.0, temperature_neg: 1.05 }, ..base }),
        m("sapo_gspo", "sapo", Aggregation::SeqMeanTokenMean, PolicyLoss { objective: Objective::Sapo { temperature_pos: 2.0, temperature_neg: 0.7 }, importance_sampling_level: seq, ..base }),
        m("luspo", "luspo", Aggregation::SeqMeanTokenSum, PolicyLoss { importance_sampling_level: seq, ..base }),
        m("vespo", "vespo", Aggregation::TokenMean, PolicyLoss { objective: vespo, ..base }),
        m("vespo_token_mask", "vespo", Aggregation::TokenMean, PolicyLoss { objective: Objective::Vespo { k_pos: 1.5, lambda_pos: 2.5, k_neg: 2.0, lambda_neg: 1.0 }, rollout_correction: rc(CorrectionMode::TokenMask, Some(0.93), Some(1.07)), ..base }),
        m("vespo_token_truncate_kl", "vespo", Aggregation::TokenMean, PolicyLoss { objective: vespo, beta: 0.04, rollout_correction: rc(CorrectionMode::TokenTruncate, Some(0.95), Some(1.05)), ..base }),
        m("delta", "grpo", Aggregation::SeqMeanTokenMean, PolicyLoss { delta: Some(1.05), ..base }),
        m("off_policy_mask", "dapo", Aggregation::TokenMean, PolicyLoss { off_policy_mask_threshold: Some(0.02), ..base }),
        m("top_entropy", "grpo", Aggregation::SeqMeanTokenMean, PolicyLoss { top_entropy_quantile: 0.3, ..base }),
        m("kl", "grpo", Aggregation::SeqMeanTokenMean, PolicyLoss { beta: 0.04, ..base }),
        m("kl_bias_gspo", "grpo", Aggregation::SeqMeanTokenMean, PolicyLoss { beta: 0.1, use_bias_correction_kl: true, importance_sampling_level: seq, ..base }),
        m("is_token_truncate", "dapo", Aggregation::TokenMean, PolicyLoss { rollout_correction: rc(CorrectionMode::TokenTruncate, Some(0.9), Some(1.1)), ..base }),
        m("is_token_mask", "grpo", Aggregation::SeqMeanTokenMean, PolicyLoss { rollout_correction: rc(CorrectionMode::TokenMask, Some(0.9), Some(1.1)), ..base }),
        m("is_sequence_truncate", "grpo", Aggregation::SeqMeanTokenMean, PolicyLoss { rollout_correction: rc(CorrectionMode::SequenceTruncate, None, Some(1.2)), ..base }),
        m("is_sequence_mask", "grpo", Aggregation::SeqMeanTokenMean, PolicyLoss { beta: 0.04, rollout_correction: RolloutCorrection::TRL_DEFAULT, ..base }),
        m("is_sequence_mask_tight", "dapo", Aggregation::TokenMean, PolicyLoss { rollout_correction: rc(CorrectionMode::SequenceMask, Some(0.8), Some(1.2)), ..base }),
    ]
}

fn json_of(name: &str, mode: &Mode, mu_one: bool, seed: u64) -> serde_json::Value {
    let (k, width, max_completion_length) = (4usize, 6usize, 8usize);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let n = k * width;
    let lp: Vec<f32> = (0..n).map(|_| rng.gen_range(-3.0f32..-0.05)).collect();
    let old: Vec<f32> = lp.iter().map(|&x| x - rng.gen_range(-0.15f32..0.15)).collect();
    let trainer_sampling = if mu_one { &lp } else { &old };
    let rollout: Vec<f32> = trainer_sampling.iter().map(|&x| x + rng.gen_range(-0.1f32..0.1)).collect();
    let reference: Vec<f32> = lp.iter().map(|&x| x + rng.gen_range(-0.5f32..0.5)).collect();
    let entropy: Vec<f32> = (0..n).map(|_| rng.gen_range(0.0f32..4.0)).collect();
    // Every row has at least one loss token (TRL's means count every row).
    let mask: Vec<f32> = (0..n).map(|i| if i % width == 0 || rng.gen_bool(0.75) { 1.0 } else { 0.0 }).collect();
    let adv: Vec<f32> = (0..k).map(|_| rng.gen_range(-1.5f32..1.5)).collect();
    let counts: Vec<usize> = mask.chunks(width).map(|r| r.iter().filter(|&&m| m > 0.0).count()).collect();
    let weights: Vec<f32> = mode.aggregation.weights(&counts, max_completion_length as f64).unwrap().iter().map(|&w| w as f32).collect();
    let rows = Rows {
        width,
        logprobs: &lp,
        old: (!mu_one).then_some(&old[..]),
        reference: Some(&reference),
        mask: &mask,
        advantages: &adv,
        weights: &weights,
        rollout: Some(&rollout),
        entropy: Some(&entropy),
    };
    let (grad, stats) = policy_loss(&rows, &mode.cfg).unwrap();
    let c = &mode.cfg;
    let (temperature_pos, temperature_neg) = match c.objective {
        Objective::Sapo { temperature_pos, temperature_neg } => (temperature_pos, temperature_neg),
        _ => (1.0, 1.05),
    };
    let vespo = match c.objective {
        Objective::Vespo { k_pos, lambda_pos, k_neg, lambda_neg } => [k_pos, lambda_pos, k_neg, lambda_neg],
        _ => [2.0, 3.0, 3.0, 2.0],
    };
    let rc = &c.rollout_correction;
    json!({
        "name": name,
        "trl": {
            "loss_type": mode.loss_type,
            "importance_sampling_level": if c.importance_sampling_level == ImportanceSamplingLevel::Sequence { "sequence" } else { "token" },
            "epsilon": c.epsilon_low, "epsilon_high": c.epsilon_high, "delta": c.delta, "beta": c.beta,
            "use_bias_correction_kl": c.use_bias_correction_kl,
            "sapo_temperature_pos": temperature_pos, "sapo_temperature_neg": temperature_neg,
            "vespo_k_pos": vespo[0], "vespo_lambda_pos": vespo[1], "vespo_k_neg": vespo[2], "vespo_lambda_neg": vespo[3],
            "off_policy_mask_threshold": c.off_policy_mask_threshold,
            "top_entropy_quantile": c.top_entropy_quantile,
            "max_completion_length": max_completion_length,
            "vllm_importance_sampling_correction": rc.mode != CorrectionMode::None,
            "vllm_importance_sampling_mode": serde_json::to_value(rc.mode).unwrap(),
            "vllm_importance_sampling_clip_min": rc.min, "vllm_importance_sampling_clip_max": rc.max,
        },
        "rows": k, "width": width,
        "logprobs": lp, "old": (!mu_one).then_some(old), "reference": reference, "sampling": rollout,
        "entropy": entropy, "mask": mask, "advantages": adv,
        "cppo": { "loss": stats.loss, "grad": grad },
    })
}

#[test]
#[ignore = "needs Python 3 and PyPI (TRL, PyTorch): cargo test -p cppo-core --test trl_parity -- --ignored"]
fn loss_and_gradient_match_trl() {
    let mut cases = Vec::new();
    for (i, mode) in modes().iter().enumerate() {
        for mu_one in [false, true] {
            cases.push(json_of(&format!("{}{}", mode.name, if mu_one { "/mu=1" } else { "/mu>1" }), mode, mu_one, 100 + i as u64));
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::env::temp_dir().join(format!("cppo-trl-parity-{}.json", std::process::id()));
    std::fs::write(&out, serde_json::to_string_pretty(&json!({ "cases": cases })).unwrap()).unwrap();
    let status = std::process::Command::new("bash").arg(root.join("tools/trl_parity.sh")).arg(&out).status().expect("bash runs");
    assert!(status.success(), "tools/trl_parity.sh {} failed: TRL's loss differs (see its output above)", out.display());
}
