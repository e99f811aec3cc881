//! The trainer: everything a run holds between steps (policy, reference, optimizer, data cursor,
//! logs), built and checked before any training, resumed from a checkpoint, evaluated and saved. The
//! step itself is `step.rs`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Var};
use cppo_core::Problem;
use cppo_data::{PromptTemplate, Sampler};
use cppo_io::{ChatTokenizer, ModelConfig};
use cppo_kernels::backend::Backend;
use cppo_engine::SamplingParams;
use cppo_model::Decoder;

use crate::checkpoint::{self, TrainerState};
use crate::config::TrainConfig;
use crate::device::{DeviceState, OnDevice};
use crate::eval::{evaluate, EvalSettings, EvalSummary};
use crate::fsutil::write_atomic;
use crate::metrics::JsonlLog;
use crate::optim::AdamW;
use crate::prompt::Prompter;
use crate::rollout::{GenerateOptions, RewardSet, RolloutRequest};
use crate::sources::{load_problems, parse_device, resolve_model_path};
use crate::tensorboard::{scalars_of, EventWriter};

pub use crate::step::StepReport;

/// The keys a resumed run may change: the length of the run, and how reward workers run (their time
/// limit and Python), which change no result: a run stopped by a slow worker goes on with a longer limit.
pub const RESUMABLE_CHANGES: [&str; 3] = ["train.steps", "reward.timeout_s", "reward.python"];

/// A resumed run must keep the configuration it was trained with, except that `train.steps` may be
/// raised (to train a finished run for longer) and the [`RESUMABLE_CHANGES`]. Any other difference is
/// an error naming the keys.
fn check_resumable(saved: &str, cfg: &TrainConfig, dir: &Path) -> Result<()> {
    let saved: TrainConfig = TrainConfig::from_toml(saved, &[])
        .with_context(|| format!("--resume: cannot read the configuration saved in {}", dir.display()))?;
    let diffs = crate::config::config_differences(&saved, cfg)?;
    let others: Vec<String> =
        diffs.iter().filter(|(k, _, _)| !RESUMABLE_CHANGES.contains(&k.as_str())).map(|(k, a, b)| format!("{k} ({a} -> {b})")).collect();
    if !others.is_empty() {
        bail!(
            "--resume: the configuration differs from the one {} was trained with at {}; resume with the same config (only train.steps may be raised)",
            dir.display(),
            others.join(", ")
        );
    }
    if cfg.train.steps < saved.train.steps {
        bail!(
            "--resume: train.steps = {} is smaller than the run's {}: a resumed run can only be made longer",
            cfg.train.steps,
            saved.train.steps
        );
    }
    Ok(())
}

/// A fresh run starts its TensorBoard folder empty, as it starts `metrics.jsonl` anew; other files
/// there are left alone.
fn remove_event_files(dir: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with("events.out.tfevents.") {
            std::fs::remove_file(entry.path()).with_context(|| format!("cannot remove {}", entry.path().display()))?;
        }
    }
    Ok(())
}

pub struct Trainer {
    pub cfg: TrainConfig,
    /// The policy on the host: what the backend's weights were uploaded from and the shapes its calls
    /// read. The trained weights are the backend's; this copy is refreshed only when something on the
    /// host reads it (a save, or `sync_host_weights`), not after every step.
    pub policy: Decoder,
    pub reference: Option<Decoder>,
    pub tokenizer: ChatTokenizer,
    pub model_config: ModelConfig,
    pub prompter: Prompter,
    pub rewards: RewardSet,
    pub sampler: Sampler,
    pub eval_problems: Vec<Problem>,
    pub(crate) vars: Vec<(String, Var)>,
    /// AdamW's settings and, at a save or a resume, its state (the backend holds the live moments).
    pub(crate) optimizer: AdamW,
    /// Training steps completed.
    pub step: u64,
    pub best_eval: Option<(u64, f64)>,
    pub out: PathBuf,
    pub(crate) metrics: JsonlLog,
    evals: JsonlLog,
    /// With `train.tensorboard`: the same lines as TensorBoard scalars.
    pub(crate) tensorboard: Option<EventWriter>,
    /// The backend that generates and trains: the CPU's, a GPU's (`model.device`), or one a test
    /// brings (`with_update_backend`).
    pub(crate) device: Box<dyn DeviceState>,
    /// The backend's weights changed since `policy` last copied them.
    pub(crate) host_stale: bool,
}

/// TensorBoard's folder inside the output folder.
pub const TENSORBOARD_DIR: &str = "tensorboard";

impl Trainer {
    /// Builds everything a run needs and checks the inputs before any training: the model loads, the
    /// datasets exist, every prompt fits. With `resume`, continues from the newest checkpoint in the
    /// output folder.
    pub fn new(cfg: TrainConfig, resume: bool) -> Result<Self> {
        let device = parse_device(&cfg.model.device)?;
        let dtype = match cfg.model.dtype {
            cppo_kernels::Precision::Bf16 => DType::BF16,
            _ => DType::F32,
        };
        let out = cfg.output_dir.clone();
        if resume {
            checkpoint::remove_leftovers(&out)?;
        }
        let latest = if resume { checkpoint::latest(&out)? } else { None };
        if resume && latest.is_none() {
            // A run killed before its first checkpoint starts over from the configuration it saved
            // (the one it must keep); without that there is no run to resume.
            let saved = out.join("config.toml");
            let text = std::fs::read_to_string(&saved)
                .map_err(|_| anyhow::anyhow!("--resume: {} holds no checkpoint and no config.toml: there is no run to resume", out.display()))?;
            check_resumable(&text, &cfg, &out)?;
        }
        let lora = cfg.lora.as_ref().map(|l| l.spec()).transpose()?;
        // A LoRA checkpoint holds only the adapters: the base always comes from model.path.
        let model_path = match (&latest, &lora) {
            (Some(dir), None) => dir.join(checkpoint::MODEL_DIR),
            _ => resolve_model_path(&cfg.model.path)?,
        };
        let loaded = cppo_io::load_model(&model_path, dtype, &device)
            .with_context(|| format!("model.path: cannot load the model from {}", model_path.display()))?;
        let mp = crate::objectives::update_precision(&cfg);
        // Every log-prob of the loss (policy, old policy, reference) is taken at the sampling temperature.
        let temp = cfg.logprob_temperature();
        let (policy, reference) = match &lora {
            None => {
                let policy = Decoder::new(&loaded.config, &loaded.weights, true, &device)?.with_matmul_precision(mp).with_logprob_temperature(temp)?;
                // The reference is the initial policy, frozen; with beta = 0 it is never built.
                let reference = if cfg.loss.beta > 0.0 {
                    let ref_path = resolve_model_path(&cfg.model.path)?;
                    if latest.is_some() {
                        let initial = cppo_io::load_model(&ref_path, dtype, &device)?;
                        Some(Decoder::new(&initial.config, &initial.weights, false, &device)?.with_matmul_precision(mp).with_logprob_temperature(temp)?)
                    } else {
                        Some(policy.frozen_copy()?)
                    }
                } else {
                    None
                };
                (policy, reference)
            }
            Some(spec) => {
                let base = Decoder::new(&loaded.config, &loaded.weights, false, &device)?.with_matmul_precision(mp).with_logprob_temperature(temp)?;
                let policy = match &latest {
                    Some(dir) => {
                        let adapter_dir = dir.join(checkpoint::MODEL_DIR);
                        let (_, adapters) = cppo_io::peft::load_peft_adapter(&adapter_dir)
                            .with_context(|| format!("--resume: cannot read the adapter in {}", adapter_dir.display()))?;
                        base.with_lora_weights(spec.clone(), &adapters, true)
                            .with_context(|| format!("--resume: the adapter in {}", adapter_dir.display()))?
                    }
                    None => base.with_lora(spec.clone(), cfg.seed)?,
                };
                let policy = match cfg.lora.as_ref().map(|l| l.base_dtype) {
                    Some(cppo_kernels::Precision::Bf16) => policy.with_bf16_base()?,
                    _ => policy,
                };
                // The masks depend on the seed and the step only, so a resumed run draws the same ones.
                let policy = policy.with_lora_dropout(cfg.lora.as_ref().map_or(0.0, |l| l.dropout), cfg.seed ^ 0x6c6f_7261)?;
                // The reference is the base: the policy with its adapters switched off, no second copy.
                let reference = (cfg.loss.beta > 0.0).then(|| policy.without_adapters());
                (policy, reference)
            }
        };
        let template = match cfg.data.template.as_str() {
            "custom" => PromptTemplate::new(cfg.data.system.clone(), cfg.data.user.clone().unwrap_or_else(|| "{question}".into()))
                .map_err(|e| anyhow::anyhow!("data.user: {e}"))?,
            name => PromptTemplate::preset(name).map_err(|e| anyhow::anyhow!("data.template: {e}"))?,
        };
        let prompter = Prompter { template, max_prompt_tokens: cfg.data.max_prompt_tokens };
        let train = load_problems(&cfg.data.train, &cfg.data, cfg.seed).context("data.train")?;
        if train.is_empty() {
            bail!("data.train = {}: no problems", cfg.data.train);
        }
        let mut eval_problems = match &cfg.data.eval {
            Some(name) => load_problems(name, &cfg.data, cfg.seed).context("data.eval")?,
            None => vec![],
        };
        if let Some(limit) = cfg.data.eval_limit {
            eval_problems.truncate(limit);
        }
        for p in train.iter().chain(&eval_problems) {
            prompter.ids(&loaded.tokenizer, p)?;
        }
        if let Some(reader) = cfg.reward.gold_reader() {
            if let Some(p) = train.iter().chain(&eval_problems).find(|p| p.answer.trim().is_empty()) {
                bail!("problem {}: no gold answer, which the built-in reward `{reader}` needs; set data.answer_field, or score with reward functions only", p.id);
            }
        }
        let rewards = RewardSet::from_section(&cfg.reward)?;
        let vars = policy.vars();
        let mut optimizer = AdamW::new(&vars, cfg.optim.adamw());
        let config_text = toml::to_string(&cfg)?;
        let (sampler, step, best_eval) = match &latest {
            Some(dir) => {
                let state = checkpoint::load_state(dir)?;
                if state.config != config_text {
                    check_resumable(&state.config, &cfg, dir)?;
                }
                optimizer.load(&dir.join(checkpoint::OPTIMIZER_FILE))?;
                (Sampler::restore(train, state.sampler)?, state.step, state.best_eval)
            }
            None => (Sampler::new(train, cfg.seed)?, 0, None),
        };
        std::fs::create_dir_all(&out).with_context(|| format!("cannot create output_dir {}", out.display()))?;
        let metrics = JsonlLog::new(out.join("metrics.jsonl"));
        let evals = JsonlLog::new(out.join("eval.jsonl"));
        if latest.is_some() {
            metrics.truncate_after(step)?;
            evals.truncate_after(step)?;
        } else {
            for log in [&metrics, &evals] {
                if log.path.exists() {
                    std::fs::remove_file(&log.path)?;
                }
            }
        }
        let tensorboard = if cfg.train.tensorboard {
            let dir = out.join(TENSORBOARD_DIR);
            if latest.is_none() {
                remove_event_files(&dir)?;
            }
            let mut writer = EventWriter::create(&dir)?;
            if latest.is_some() {
                writer.restart_at(step + 1)?;
            }
            Some(writer)
        } else {
            None
        };
        write_atomic(&out.join("config.toml"), config_text.as_bytes())?;
        let device = crate::device::open(&cfg, &loaded.config, &policy, reference.as_ref(), &optimizer)?;
        Ok(Trainer {
            tensorboard,
            model_config: loaded.config,
            tokenizer: loaded.tokenizer,
            cfg,
            policy,
            reference,
            prompter,
            rewards,
            sampler,
            eval_problems,
            vars,
            optimizer,
            step,
            best_eval,
            out,
            metrics,
            evals,
            device,
            host_stale: false,
        })
    }

    /// Moves the run to backend `b` (a test's reference or emulated backend): the current weights and
    /// the optimizer's moments go from the backend that held them to `b`, which generates, trains and
    /// evaluates from then on.
    pub fn with_update_backend<B: Backend<T = f32> + 'static>(mut self, b: B) -> Result<Self> {
        self.sync_host_weights()?;
        self.device.download_moments(&mut self.optimizer)?;
        self.device = Box::new(OnDevice::new(b, &self.policy, self.reference.as_ref(), &self.optimizer)?);
        Ok(self)
    }

    /// Copies the backend's trained weights into `policy` if they changed since the last copy: a 1.5B
    /// model is 6 GB of f32 to bring back from a GPU, so it is done when the host reads the policy (a
    /// save), not after every step; evaluation runs on the backend.
    pub fn sync_host_weights(&mut self) -> Result<()> {
        if self.host_stale {
            self.device.download_weights(&self.vars)?;
        }
        self.host_stale = false;
        Ok(())
    }

    /// The policy with the trained weights (the backend's, copied to the host first if they changed).
    pub fn trained_policy(&mut self) -> Result<&Decoder> {
        self.sync_host_weights()?;
        Ok(&self.policy)
    }

    /// The backend the run takes.
    pub fn device_state(&self) -> &dyn DeviceState {
        self.device.as_ref()
    }

    /// The backend the run takes, by name: `cpu`, or the device backend's name.
    pub fn update_backend(&self) -> String {
        self.device.describe()
    }

    pub fn eval_settings(&self) -> EvalSettings {
        let e = &self.cfg.eval;
        EvalSettings {
            samples: e.samples,
            temperature: e.temperature,
            top_p: e.top_p,
            max_new_tokens: e.max_new_tokens.unwrap_or(self.cfg.generation.max_new_tokens),
            pass_k: e.pass_k.clone(),
            max_batch: self.cfg.generation.max_batch,
            seed: self.cfg.seed ^ 0xE7A1,
            stop: self.cfg.generation.stop.clone(),
        }
    }

    /// Evaluates the current policy on the held-out problems, appends the summary to `eval.jsonl` and
    /// writes every generation to `evals/step-NNNNNN.jsonl`.
    pub fn evaluate(&mut self) -> Result<Option<EvalSummary>> {
        if self.eval_problems.is_empty() {
            return Ok(None);
        }
        let settings = self.eval_settings();
        // On the backend, from the weights it trains: nothing comes back but text.
        let (device, policy, tokenizer) = (&mut self.device, &self.policy, &self.tokenizer);
        let mut generate = |req: &RolloutRequest, params: &SamplingParams, opts: GenerateOptions| Ok(device.generate(policy, tokenizer, req, params, opts, &mut |_| {})?.0);
        let (summary, records) = evaluate(&mut generate, &self.tokenizer, &self.prompter, &self.rewards, &self.eval_problems, &settings, self.step)?;
        self.evals.append(&summary)?;
        if let Some(tb) = &mut self.tensorboard {
            tb.scalars(self.step, &scalars_of("eval", &serde_json::to_value(&summary)?))?;
        }
        let dir = self.out.join("evals");
        std::fs::create_dir_all(&dir)?;
        let mut text = String::new();
        for r in &records {
            text.push_str(&serde_json::to_string(r)?);
            text.push('\n');
        }
        write_atomic(&dir.join(format!("step-{:06}.jsonl", self.step)), text.as_bytes())?;
        if self.best_eval.is_none_or(|(_, b)| summary.accuracy > b) {
            self.best_eval = Some((self.step, summary.accuracy));
        }
        Ok(Some(summary))
    }

    pub fn save_checkpoint(&mut self) -> Result<PathBuf> {
        self.sync_host_weights()?;
        self.device.download_moments(&mut self.optimizer)?;
        let state = TrainerState {
            step: self.step,
            seed: self.cfg.seed,
            sampler: self.sampler.state(),
            config: toml::to_string(&self.cfg)?,
            best_eval: self.best_eval,
        };
        checkpoint::save(
            &self.out,
            &state,
            |dir| self.write_model(dir),
            |path| self.optimizer.save(path),
            self.cfg.train.save_total_limit,
        )
    }

    /// Writes the current policy as a Hugging Face directory (f32); with LoRA, its adapters in PEFT's
    /// format (`adapter_config.json`, `adapter_model.safetensors`).
    pub fn save_model(&mut self, dir: &Path) -> Result<()> {
        self.sync_host_weights()?;
        self.write_model(dir)
    }

    /// `save_model` once the host copy is current.
    fn write_model(&self, dir: &Path) -> Result<()> {
        if let Some(lora) = &self.cfg.lora {
            let settings = crate::lora::peft_settings(lora, &self.cfg.model.path)?;
            cppo_io::peft::save_peft_adapter(dir, &settings, &self.policy.adapter_weights()?)?;
            return Ok(());
        }
        let weights = self.policy.to_weights()?;
        cppo_io::save_hf(dir, &self.model_config, &weights, &self.tokenizer, DType::F32)?;
        Ok(())
    }

    /// Where `cppo train` writes the final model: `OUT/model`, or `OUT/adapter` for LoRA.
    pub fn final_model_dir(&self) -> PathBuf {
        self.out.join(if self.cfg.lora.is_some() { "adapter" } else { "model" })
    }

    pub fn device(&self) -> &Device {
        self.policy.device()
    }

    pub fn metrics_path(&self) -> &Path {
        &self.metrics.path
    }
}
