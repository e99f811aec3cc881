//! How the `[loss]` section's TRL-named options (`loss_type`, `importance_sampling_level`, `delta`,
//! SAPO's temperatures, the off-policy and entropy masks, the rollout correction) become the loss
//! `cppo_core::loss::policy_loss` computes, which combinations are refused, and when the rollout
//! correction is on by default.

use anyhow::{bail, Result};
use cppo_core::loss::{Aggregation, CorrectionMode, ImportanceSamplingLevel, Objective, PolicyLoss, RolloutCorrection};
use cppo_engine::Precision;
use serde::{Deserialize, Serialize};

use crate::config::{LossSection, TrainConfig};
use crate::rollout::{RewardSet, Rollout};

/// TRL's `multi_objective_aggregation`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MultiObjectiveAggregation {
    #[default]
    SumThenNormalize,
    /// GDPO (`cppo_core::gdpo`).
    NormalizeThenSum,
}

/// The rewards the advantage is computed from, one per completion per group, and the estimator that
/// computes it: the weighted rewards and `rollout.estimator`, or GDPO's normalised sums and its batch
/// whitening.
pub fn advantage_inputs(cfg: &TrainConfig, rewards: &RewardSet, rollouts: &[Rollout]) -> (Vec<Vec<f64>>, cppo_core::Estimator) {
    match cfg.rollout.multi_objective_aggregation {
        MultiObjectiveAggregation::SumThenNormalize => (rollouts.iter().map(|r| r.rewards.clone()).collect(), *cfg.estimator()),
        MultiObjectiveAggregation::NormalizeThenSum => {
            let weights: Vec<f64> = rewards.parts.iter().map(|(_, w, _)| *w).collect();
            let parts: Vec<Vec<Vec<f64>>> = rollouts.iter().map(|r| r.parts.clone()).collect();
            (cppo_core::gdpo::normalize_then_sum(&parts, &weights), cppo_core::gdpo::gdpo_estimator())
        }
    }
}

/// GDPO's checks: it replaces the estimator and sums the reward parts only.
pub fn validate_multi_objective(cfg: &TrainConfig) -> Result<()> {
    if cfg.rollout.multi_objective_aggregation == MultiObjectiveAggregation::NormalizeThenSum {
        if !matches!(cfg.estimator(), cppo_core::Estimator::Grpo { .. }) {
            bail!("rollout.multi_objective_aggregation = \"normalize_then_sum\" whitens GDPO's rewards over the batch itself; rollout.estimator = {} would be ignored: leave it at grpo", cfg.estimator().name());
        }
        if cfg.overlong_penalty.is_some() {
            bail!("rollout.multi_objective_aggregation = \"normalize_then_sum\" sums the normalised reward parts; [overlong_penalty] is added to the weighted sum only: use one of the two");
        }
    }
    Ok(())
}

/// TRL's `loss_type`: an objective and an aggregation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossType {
    Grpo,
    Bnpo,
    DrGrpo,
    Dapo,
    Cispo,
    Sapo,
    Luspo,
    Vespo,
}

impl LossType {
    pub fn name(self) -> &'static str {
        match self {
            LossType::Grpo => "grpo",
            LossType::Bnpo => "bnpo",
            LossType::DrGrpo => "dr_grpo",
            LossType::Dapo => "dapo",
            LossType::Cispo => "cispo",
            LossType::Sapo => "sapo",
            LossType::Luspo => "luspo",
            LossType::Vespo => "vespo",
        }
    }

    /// TRL's normalisation of each loss type as cppo's aggregation rule. bnpo's local-batch token mean
    /// is the step's token mean here (cppo's weights are over the whole step).
    pub fn aggregation(self) -> Aggregation {
        match self {
            LossType::Grpo | LossType::Sapo => Aggregation::SeqMeanTokenMean,
            LossType::Bnpo | LossType::Dapo | LossType::Cispo | LossType::Vespo => Aggregation::TokenMean,
            LossType::DrGrpo => Aggregation::SeqMeanTokenSumNorm,
            LossType::Luspo => Aggregation::SeqMeanTokenSum,
        }
    }
}

impl LossSection {
    /// The aggregation in force: `aggregation` if set, else `loss_type`'s, else GRPO's.
    pub fn aggregation(&self) -> Aggregation {
        self.aggregation.or(self.loss_type.map(LossType::aggregation)).unwrap_or_default()
    }

    pub fn objective(&self) -> Objective {
        match self.loss_type {
            Some(LossType::Cispo) => Objective::Cispo,
            Some(LossType::Sapo) => Objective::Sapo { temperature_pos: self.sapo_temperature_pos, temperature_neg: self.sapo_temperature_neg },
            Some(LossType::Vespo) => Objective::Vespo {
                k_pos: self.vespo_k_pos,
                lambda_pos: self.vespo_lambda_pos,
                k_neg: self.vespo_k_neg,
                lambda_neg: self.vespo_lambda_neg,
            },
            _ => Objective::Clip,
        }
    }

    /// The rollout correction: `rollout_correction` if set; unset, TRL's `sequence_mask` when
    /// `precisions_differ` (rollouts sampled at another precision than the update's products) and
    /// none otherwise. VESPO takes token ratios only (TRL refuses a sequence mode with it), so its
    /// default is `token_truncate`.
    pub fn rollout_correction(&self, precisions_differ: bool) -> RolloutCorrection {
        let default = if self.loss_type == Some(LossType::Vespo) { CorrectionMode::TokenTruncate } else { CorrectionMode::SequenceMask };
        let mode = self.rollout_correction.unwrap_or(if precisions_differ { default } else { CorrectionMode::None });
        let max = self.rollout_correction_cap.is_finite().then_some(self.rollout_correction_cap);
        RolloutCorrection { mode, min: self.rollout_correction_min, max }
    }

    /// The settings the loss takes, with the rollout correction resolved by the caller.
    pub fn policy_with(&self, rollout_correction: RolloutCorrection) -> PolicyLoss {
        PolicyLoss {
            epsilon_low: self.epsilon_low,
            epsilon_high: self.epsilon_high,
            dual_clip: self.dual_clip,
            beta: self.beta,
            kl_clamp: self.kl_clamp,
            use_bias_correction_kl: self.use_bias_correction_kl,
            objective: self.objective(),
            importance_sampling_level: self.importance_sampling_level,
            delta: self.delta,
            off_policy_mask_threshold: self.off_policy_mask_threshold,
            top_entropy_quantile: self.top_entropy_quantile,
            rollout_correction,
        }
    }

    /// The loss settings without a rollout correction unless one is configured explicitly.
    pub fn policy(&self) -> PolicyLoss {
        self.policy_with(self.rollout_correction(false))
    }

    /// The checks of these options; each error names the keys involved.
    pub fn validate_objectives(&self) -> Result<()> {
        let lt = self.loss_type;
        let name = lt.map_or("", LossType::name);
        if lt == Some(LossType::Luspo) && self.importance_sampling_level != ImportanceSamplingLevel::Sequence {
            bail!("loss.loss_type = \"luspo\" needs loss.importance_sampling_level = \"sequence\" (LUSPO scales GSPO's sequence loss by its length)");
        }
        if let (Some(lt), Some(agg)) = (lt, self.aggregation) {
            if agg != lt.aggregation() {
                bail!("loss.aggregation = {:?} contradicts loss.loss_type = \"{name}\", which sums tokens as {:?}: set one of the two", agg, lt.aggregation());
            }
        }
        if lt == Some(LossType::Vespo) {
            if self.importance_sampling_level != ImportanceSamplingLevel::Token {
                bail!("loss.loss_type = \"vespo\" weighs each sequence by its own ratio; loss.importance_sampling_level must stay \"token\" (TRL warns that it should)");
            }
            if matches!(self.rollout_correction, Some(CorrectionMode::SequenceMask | CorrectionMode::SequenceTruncate)) {
                bail!("loss.loss_type = \"vespo\" needs loss.rollout_correction = \"token_truncate\" or \"token_mask\" (or \"none\"): VESPO takes the token ratios into its sequence weight, and TRL refuses a sequence mode with it");
            }
            for (key, v) in [("vespo_k_pos", self.vespo_k_pos), ("vespo_lambda_pos", self.vespo_lambda_pos), ("vespo_k_neg", self.vespo_k_neg), ("vespo_lambda_neg", self.vespo_lambda_neg)] {
                if !(v >= 0.0 && v.is_finite()) {
                    bail!("loss.{key} = {v} must be a finite number >= 0");
                }
            }
        }
        let soft = matches!(lt, Some(LossType::Cispo | LossType::Sapo | LossType::Vespo));
        if soft && self.dual_clip.is_some() {
            bail!("loss.dual_clip bounds the clipped surrogate; loss.loss_type = \"{name}\" has none: unset one of the two");
        }
        if soft && self.delta.is_some() {
            bail!("loss.delta caps the clipped surrogate's ratio; loss.loss_type = \"{name}\" has none (TRL ignores it): unset one of the two");
        }
        if let Some(d) = self.delta {
            if !(d > 1.0 && d.is_finite()) {
                bail!("loss.delta = {d} must be a number > 1 (INTELLECT-2 recommends more than 1 + loss.epsilon_high)");
            }
        }
        for (key, t) in [("sapo_temperature_pos", self.sapo_temperature_pos), ("sapo_temperature_neg", self.sapo_temperature_neg)] {
            if !(t > 0.0 && t.is_finite()) {
                bail!("loss.{key} = {t} must be > 0");
            }
        }
        if let Some(t) = self.off_policy_mask_threshold {
            if !t.is_finite() {
                bail!("loss.off_policy_mask_threshold = {t} must be finite");
            }
        }
        if !(0.0..=1.0).contains(&self.top_entropy_quantile) {
            bail!("loss.top_entropy_quantile = {} must be in [0, 1]", self.top_entropy_quantile);
        }
        if !(self.rollout_correction_cap > 0.0) {
            bail!("loss.rollout_correction_cap = {} must be > 0 (inf for no cap)", self.rollout_correction_cap);
        }
        if let Some(m) = self.rollout_correction_min {
            if !(m >= 0.0 && m < self.rollout_correction_cap) {
                bail!("loss.rollout_correction_min = {m} must be >= 0 and below loss.rollout_correction_cap = {}", self.rollout_correction_cap);
            }
        }
        Ok(())
    }
}

/// The precision of the update's matrix products: on the CPU the configured one resolved for this
/// CPU; a GPU multiplies bf16 natively, so there `auto` means bf16, whatever the host CPU has.
pub fn update_precision(cfg: &TrainConfig) -> Precision {
    match (cfg.model.device.as_str(), cfg.optim.matmul_precision) {
        ("cpu", p) => p.for_update(),
        (_, Precision::Auto) => Precision::Bf16,
        (_, p) => p,
    }
}

/// The rollout correction a run applies (see `LossSection::rollout_correction`): the default turns on
/// when the rollouts' weights are at another precision than the update's products.
pub fn run_rollout_correction(cfg: &TrainConfig) -> RolloutCorrection {
    cfg.loss.rollout_correction(cfg.generation.weights.for_rollouts() != update_precision(cfg))
}
