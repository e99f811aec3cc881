//! Rollouts and the update on a kernel backend, the CPU's (`Cpu<f32>`) or a GPU's: every run takes
//! this one path. The policy's weights, its AdamW moments and its gradients live in the backend's
//! buffers (f32 master weights, one per tensor; the moments and the gradients each in one flat
//! buffer, so one AdamW call updates every tensor; at bf16 products, bf16 copies of the matrices that
//! the same call rewrites), the reference's weights too when beta > 0 (its matrices in bf16 only at
//! bf16 products). The step calls `DeviceState::generate` and `DeviceState::update`. The trained
//! weights are copied back into the decoder's host variables only when a save reads them
//! (`Trainer::sync_host_weights`).

use std::ops::Range;

use anyhow::{bail, Result};
use candle_core::{Tensor, Var};

use cppo_kernels::backend::{AdamWParam, AdamWStep, Backend};
use cppo_kernels::skinny::{from_bf16, to_bf16};
use cppo_model::decoder::BackendWeights;
use cppo_model::Decoder;

use cppo_engine::{Completion, DecoderBackend, EngineOptions, GenerationStats, Precision, Request, SamplingParams};
use cppo_io::ChatTokenizer;

use crate::config::LossSection;
use crate::rollout::{generate_groups, GenerateOptions, Rollout, RolloutRequest};
use crate::optim::{AdamW, AdamWConfig, StepReport};
use crate::update::{update, Batch, GroupScores, Questions, UpdateOutcome};

/// What the trainer holds of a device: object-safe, so a run picks its backend at start.
pub trait DeviceState: Send {
    /// The backend's name, for the run's first lines.
    fn describe(&self) -> String;
    /// Runs mu passes over the batch on the device; `lr(pass)` as for `update::update`.
    fn update(&mut self, policy: &Decoder, reference: Option<&Decoder>, loss: &LossSection, batch: &Batch, lr: &dyn Fn(usize) -> f64) -> Result<UpdateOutcome>;
    /// The rollouts of `req` from the weights on the device (`rollout::generate_groups`).
    #[allow(clippy::too_many_arguments)]
    fn generate(
        &mut self,
        policy: &Decoder,
        tokenizer: &ChatTokenizer,
        req: &RolloutRequest,
        params: &SamplingParams,
        opts: GenerateOptions,
        on_finish: &mut dyn FnMut(usize),
    ) -> Result<(Vec<Rollout>, GenerationStats)>;
    /// Copies the trained weights into the policy's host variables (`Decoder::vars`, in order).
    fn download_weights(&self, vars: &[(String, Var)]) -> Result<()>;
    /// Writes the device's AdamW moments and step count into `optimizer` (before it is saved).
    fn download_moments(&self, optimizer: &mut AdamW) -> Result<()>;
    /// How many of the policy's bf16 copies of f32 weights (kept for bf16 products) hold other values
    /// than the rounding of those weights, out of how many such copies: 0 after every update.
    fn stale_bf16_copies(&self) -> (usize, usize);
    /// What the forward passes of the policy and of the reference have scored so far.
    fn scored(&self) -> (Scored, Scored);
}

/// The completions a model's forward passes scored: one row each, and an order-independent fingerprint
/// of their tokens (the wrapping sum of `sequence_fingerprint`), so that a caller can check which
/// completions reached a forward pass (`forward_rows` in the metrics; the tests, which ones).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scored {
    pub rows: u64,
    pub fingerprint: u64,
}

impl Scored {
    fn add(&mut self, qs: &Questions) {
        for c in qs.iter().flat_map(|(_, completions)| completions.iter()) {
            self.rows += 1;
            self.fingerprint = self.fingerprint.wrapping_add(sequence_fingerprint(c));
        }
    }
}

/// The fingerprint of one token sequence (FNV-1a over its tokens, then a final mix); the fingerprint
/// of a multiset of sequences is the wrapping sum of theirs.
pub fn sequence_fingerprint(tokens: &[u32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &t in tokens {
        for b in t.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h ^= tokens.len() as u64;
    h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// A backend holding one run's trainable state.
pub struct OnDevice<B: Backend<T = f32>> {
    b: B,
    policy: BackendWeights<B>,
    /// The reference's weights when it is a model of its own; `None` for a LoRA run's, which is the
    /// policy's frozen base read with the adapters off (`Decoder::is_base_of`) from `policy`.
    reference: Option<BackendWeights<B>>,
    /// Per decoder parameter: its index among the trainable variables, `None` when frozen.
    var_of: Vec<Option<usize>>,
    /// Per trainable variable: where its gradient and moments lie in the flat buffers below (end to
    /// end, in variable order), so one AdamW launch updates them all.
    spans: Vec<Range<usize>>,
    /// The gradients summed over a pass, and whether each variable's has been written in this pass.
    grads: B::Buf,
    written: Vec<bool>,
    m: B::Buf,
    v: B::Buf,
    decay: Vec<bool>,
    config: AdamWConfig,
    step: u64,
    /// What the policy's and the reference's forward passes scored.
    scored: (Scored, Scored),
}

impl<B: Backend<T = f32>> OnDevice<B> {
    /// Uploads the policy (and the reference) and the host optimizer's moments and step count (fresh,
    /// or restored from a checkpoint).
    pub fn new(b: B, policy: &Decoder, reference: Option<&Decoder>, optimizer: &AdamW) -> Result<Self> {
        let (m_host, v_host) = optimizer.moments();
        let var_of = trainable_index(policy);
        let vars = policy.vars();
        if vars.len() != m_host.len() {
            bail!("the optimizer holds state for {} variables, the policy has {}", m_host.len(), vars.len());
        }
        let mut pw = policy.upload_weights(&b)?;
        let mut rw = reference.filter(|r| !r.is_base_of(policy)).map(|r| r.upload_weights(&b)).transpose()?;
        // On a device, bf16 products read bf16 copies kept beside the f32 weights (AdamW rewrites the
        // policy's as it updates them) rather than rounding every matrix at every product, and the
        // frozen reference keeps its matrices in bf16 only; the CPU rounds as it multiplies, so it
        // keeps none (`bf16_copies_pay`). A LoRA policy's base is frozen, so on a device the copies
        // its bf16 rollouts read (the output projection's among them) are made once, here.
        let copies = b.bf16_copies_pay();
        if copies && (policy.matmul_precision() != Precision::F32 || policy.lora().is_some()) {
            policy.keep_bf16_copies(&b, &mut pw, true)?;
        }
        if let (Some(r), Some(w)) = (reference, rw.as_mut()) {
            if copies && r.matmul_precision() != Precision::F32 {
                r.keep_bf16_copies(&b, w, false)?;
            }
        }
        let spans: Vec<Range<usize>> = m_host.iter().scan(0, |at, x| Some(std::mem::replace(at, *at + x.len())..*at)).collect();
        let total = spans.last().map_or(0, |s| s.end);
        let m = b.upload(&m_host.concat());
        let v = b.upload(&v_host.concat());
        Ok(OnDevice {
            policy: pw,
            reference: rw,
            var_of,
            grads: b.zeros(total),
            written: vec![false; spans.len()],
            spans,
            m,
            v,
            decay: optimizer.decays().to_vec(),
            config: optimizer.config.clone(),
            step: optimizer.step,
            scored: Default::default(),
            b,
        })
    }

    /// The engine over the weights being trained, on token prompts, no text (a benchmark's rollouts;
    /// the step's go through `DeviceState::generate`).
    pub fn generate_tokens(&mut self, policy: &Decoder, requests: &[Request], params: &SamplingParams, options: &EngineOptions, precision: Precision) -> Result<(Vec<Vec<Completion>>, GenerationStats)> {
        self.with_engine(policy, precision, |backend| cppo_engine::generate(backend, requests, params, options, &|_| String::new(), |_| {}))
    }

    /// Runs `f` with the engine's backend over the policy's buffers: it holds them while it generates
    /// and hands them back after, so rollouts read the buffers the update trains (no copy).
    fn with_engine<R>(&mut self, policy: &Decoder, precision: Precision, f: impl FnOnce(&DecoderBackend<'_, B>) -> Result<R>) -> Result<R> {
        let weights = std::mem::replace(&mut self.policy, BackendWeights { bufs: Vec::new(), halves: None });
        let backend = DecoderBackend::with_weights(policy, &self.b, weights, precision)?;
        let out = f(&backend);
        self.policy = backend.into_weights();
        out
    }
}

/// Per decoder parameter, its index among `Decoder::vars` (the trainable ones, in parameter order).
fn trainable_index(policy: &Decoder) -> Vec<Option<usize>> {
    let mut next = 0;
    policy
        .trainable_mask()
        .into_iter()
        .map(|t| {
            t.then(|| {
                next += 1;
                next - 1
            })
        })
        .collect()
}

impl<B: Backend<T = f32> + 'static> DeviceState for OnDevice<B> {
    fn describe(&self) -> String {
        self.b.name().to_string()
    }

    fn update(&mut self, policy: &Decoder, reference: Option<&Decoder>, loss: &LossSection, batch: &Batch, lr: &dyn Fn(usize) -> f64) -> Result<UpdateOutcome> {
        update(&mut Models { dev: self, policy, reference }, loss, batch, lr)
    }

    fn generate(
        &mut self,
        policy: &Decoder,
        tokenizer: &ChatTokenizer,
        req: &RolloutRequest,
        params: &SamplingParams,
        opts: GenerateOptions,
        on_finish: &mut dyn FnMut(usize),
    ) -> Result<(Vec<Rollout>, GenerationStats)> {
        self.with_engine(policy, opts.precision, |backend| generate_groups(backend, tokenizer, req, params, opts, on_finish))
    }

    fn download_weights(&self, vars: &[(String, Var)]) -> Result<()> {
        for (p, var_index) in self.var_of.iter().enumerate() {
            let Some(i) = *var_index else { continue };
            let (name, var) = &vars[i];
            let host = self.b.download(self.b.view(&self.policy.bufs[p]));
            if host.len() != var.elem_count() {
                bail!("{name}: {} values on the device, {} on the host", host.len(), var.elem_count());
            }
            var.set(&Tensor::from_vec(host, var.shape(), var.device())?.to_dtype(var.dtype())?)?;
        }
        Ok(())
    }

    fn stale_bf16_copies(&self) -> (usize, usize) {
        let Some(halves) = &self.policy.halves else { return (0, 0) };
        let b = &self.b;
        // A weight held only in bf16 (a LoRA run's base) has no f32 value to follow.
        let copies: Vec<(usize, &B::Half)> =
            (0..self.policy.bufs.len()).filter(|&i| self.policy.stored_in_bf16(b, i).is_none()).filter_map(|i| halves.get(i).map(|h| (i, h))).collect();
        let stale = copies
            .iter()
            .filter(|(i, h)| {
                let (w, h) = (b.download(b.view(&self.policy.bufs[*i])), b.download(b.view(&b.widen(h))));
                let rounded = |x: f32| from_bf16(to_bf16(x));
                w.len() != h.len() || w.iter().zip(&h).any(|(&x, &y)| rounded(x) != y)
            })
            .count();
        (stale, copies.len())
    }

    fn scored(&self) -> (Scored, Scored) {
        self.scored
    }

    fn download_moments(&self, optimizer: &mut AdamW) -> Result<()> {
        let split = |x: &B::Buf| {
            let flat = self.b.download(self.b.view(x));
            self.spans.iter().map(|s| flat[s.clone()].to_vec()).collect()
        };
        optimizer.set_moments(self.step, split(&self.m), split(&self.v))
    }
}

/// The device state with the decoders that describe its weights (shapes, inputs, row counters): what
/// the update's passes (`update::update`) run on.
pub(crate) struct Models<'a, B: Backend<T = f32>> {
    dev: &'a mut OnDevice<B>,
    policy: &'a Decoder,
    reference: Option<&'a Decoder>,
}

/// Cuts a grouped call's host output into its questions, each to its own longest completion.
fn per_question(qs: &Questions, logprobs: &[f32], mask: &[f32], entropy: &[f64], width: usize) -> Vec<GroupScores> {
    let mut row = 0;
    qs.iter()
        .map(|(_, completions)| {
            let (k, w) = (completions.len(), completions.iter().map(|c| c.len()).max().unwrap_or(0));
            let cut = |x: &[f32]| (0..k).flat_map(|j| x[(row + j) * width..][..w].to_vec()).collect::<Vec<f32>>();
            let g = GroupScores {
                k,
                width: w,
                logprobs: cut(logprobs),
                mask: cut(mask),
                entropy: (0..k).flat_map(|j| entropy[(row + j) * width..][..w].to_vec()).collect(),
            };
            row += k;
            g
        })
        .collect()
}

impl<B: Backend<T = f32>> Models<'_, B> {
    /// The frozen reference's log-probs, per question.
    pub(crate) fn reference(&mut self, qs: &Questions) -> Result<Vec<GroupScores>> {
        let Some(model) = self.reference else {
            bail!("beta > 0 but no reference model was built");
        };
        let w = match &self.dev.reference {
            Some(w) => w,
            None if model.is_base_of(self.policy) => &self.dev.policy,
            None => bail!("the reference model's weights are not on the backend"),
        };
        let f = model.forward_on_weights(&self.dev.b, w, qs, false)?;
        self.dev.scored.1.add(qs);
        Ok(per_question(qs, &f.logprobs, &f.mask, &f.entropy, f.shape.1))
    }

    /// The policy's log-probs without a gradient (the old policy when mu > 1), per question.
    pub(crate) fn old_policy(&mut self, qs: &Questions) -> Result<Vec<GroupScores>> {
        let f = self.policy.forward_on_weights(&self.dev.b, &self.dev.policy, qs, false)?;
        self.dev.scored.0.add(qs);
        Ok(per_question(qs, &f.logprobs, &f.mask, &f.entropy, f.shape.1))
    }

    /// Starts a pass: every gradient is written afresh by the pass's first backward.
    pub(crate) fn zero_grads(&mut self) -> Result<()> {
        self.dev.written.fill(false);
        Ok(())
    }

    /// One forward pass of the policy over `qs`, with its gradient: `loss` gets the per-question scores
    /// and returns dL/dlogp of the whole call (`(rows, width)` row-major, rows the questions'
    /// completions in order, width the longest), whose backward pass is summed into the gradients.
    pub(crate) fn forward_backward(&mut self, qs: &Questions, loss: &mut dyn FnMut(&[GroupScores], usize, usize) -> Result<Vec<f32>>) -> Result<()> {
        let dev = &mut *self.dev;
        let f = self.policy.forward_on_weights(&dev.b, &dev.policy, qs, true)?;
        dev.scored.0.add(qs);
        let (rows, width) = f.shape;
        let dlogp = loss(&per_question(qs, &f.logprobs, &f.mask, &f.entropy, width), rows, width)?;
        // Each weight's gradient is summed into the flat buffer as soon as its layer is done.
        let (b, var_of, spans) = (&dev.b, &dev.var_of, &dev.spans);
        let (sums, written) = (&mut dev.grads, &mut dev.written);
        f.backward_into(&dlogp, &mut |p, g| {
            let Some(i) = var_of[p] else { return };
            let sum = b.slice_mut(b.view_mut(sums), spans[i].clone());
            if std::mem::replace(&mut written[i], true) {
                b.add_into(sum, b.view(&g));
            } else {
                b.copy(b.view(&g), sum);
            }
        })?;
        Ok(())
    }

    /// One AdamW step with learning rate `lr` from the summed gradients.
    pub(crate) fn optimizer_step(&mut self, lr: f64) -> Result<StepReport> {
        let dev = &mut *self.dev;
        let b = &dev.b;
        // A variable no loss reached has a zero gradient (its moments still decay, as on the CPU).
        for (i, span) in dev.spans.iter().enumerate() {
            if !dev.written[i] {
                b.copy(b.view(&b.zeros(span.len())), b.slice_mut(b.view_mut(&mut dev.grads), span.clone()));
            }
        }
        dev.written.fill(false);
        let grad_norm = b.sum_squares(b.view(&dev.grads)).sqrt();
        let c = &dev.config;
        let clip_coef = c.clip_coefficient(grad_norm)?;
        dev.step += 1;
        let s = AdamWStep { lr, beta1: c.beta1, beta2: c.beta2, eps: c.eps, weight_decay: c.weight_decay, step: dev.step, grad_scale: clip_coef };
        let (spans, decay) = (&dev.spans, &dev.decay);
        let policy = &mut dev.policy;
        let halves: Vec<Option<&mut B::Half>> = match policy.halves.as_mut() {
            Some(h) => h.slots_mut().collect(),
            None => policy.bufs.iter().map(|_| None).collect(),
        };
        let params = policy
            .bufs
            .iter_mut()
            .zip(halves)
            .zip(&dev.var_of)
            .filter_map(|((w, half), i)| i.map(|i| AdamWParam { w: b.view_mut(w), half, offset: spans[i].start, decay: decay[i] }))
            .collect();
        b.adamw_all(params, b.view(&dev.grads), b.view_mut(&mut dev.m), b.view_mut(&mut dev.v), &s);
        Ok(StepReport { grad_norm, clip_coef })
    }

    /// Completions that reached a forward pass of either model so far.
    pub(crate) fn scored_rows(&self) -> u64 {
        self.dev.scored.0.rows + self.dev.scored.1.rows
    }
}

/// The backend a new run's rollouts and update take (`model.device`): `cpu` is this crate's CPU
/// kernels; `cuda` / `cuda:N` opens that GPU (a build with the `cuda` feature), prints the memory plan
/// and uploads the run's state there.
pub fn open(cfg: &crate::config::TrainConfig, model: &cppo_io::ModelConfig, policy: &Decoder, reference: Option<&Decoder>, optimizer: &AdamW) -> Result<Box<dyn DeviceState>> {
    match cfg.model.device.as_str() {
        "cpu" => Ok(Box::new(OnDevice::new(cppo_kernels::cpu::Cpu::<f32>::new(), policy, reference, optimizer)?)),
        #[cfg(feature = "cuda")]
        device => cuda::open(cfg, model, policy, reference, optimizer, device),
        #[cfg(not(feature = "cuda"))]
        device => {
            let _ = model;
            crate::sources::check_device(device)?;
            bail!("model.device = \"{device}\": this cppo was built without CUDA")
        }
    }
}

/// The dimensions the CUDA backend's memory plan sizes a run from, of a parsed `config.json`.
pub fn model_dims(c: &cppo_io::ModelConfig) -> cppo_cuda::plan::ModelDims {
    cppo_cuda::plan::ModelDims {
        hidden: c.hidden_size,
        intermediate: c.intermediate_size,
        layers: c.num_hidden_layers,
        heads: c.num_attention_heads,
        kv_heads: c.num_key_value_heads,
        head_dim: c.head_dim,
        vocab: c.vocab_size,
        tied_embeddings: c.tie_word_embeddings,
        qkv_bias: c.attention_bias,
        qk_norm: c.qk_norm,
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use anyhow::{Context, Result};
    use cppo_cuda::backend::CudaBackend;
    use cppo_cuda::cuda::ordinal;
    use cppo_cuda::cuda::CudaSide;
    use cppo_cuda::plan::{MemoryPlan, RunShape};
    use cppo_io::ModelConfig;
    use cppo_model::Decoder;

    use super::{DeviceState, OnDevice};
    use crate::config::TrainConfig;
    use crate::optim::AdamW;

    pub fn open(cfg: &TrainConfig, model: &ModelConfig, policy: &Decoder, reference: Option<&Decoder>, optimizer: &AdamW, device: &str) -> Result<Box<dyn DeviceState>> {
        let side = CudaSide::new(ordinal(device)?).with_context(|| format!("model.device = \"{device}\""))?;
        for line in plan(cfg, model).to_string().lines() {
            eprintln!("{line}");
        }
        Ok(Box::new(OnDevice::new(CudaBackend::new(side), policy, reference, optimizer)?))
    }

    /// The device memory this run's shape needs (cppo-cuda's plan, from the model's dimensions).
    fn plan(cfg: &TrainConfig, model: &ModelConfig) -> MemoryPlan {
        let dims = super::model_dims(model);
        let shape = RunShape {
            group: cfg.rollout.num_generations,
            questions: cfg.rollout.questions_per_step,
            prompt_len: cfg.data.max_prompt_tokens,
            max_new_tokens: cfg.generation.max_new_tokens,
            rollout_rows: cfg.generation.max_batch,
            micro_completions: (cfg.optim.micro_batch_tokens / cfg.generation.max_new_tokens.max(1)).clamp(1, cfg.rollout.num_generations),
            reference_model: cfg.loss.beta > 0.0,
            chunk_cols: 0,
        };
        MemoryPlan::new(&dims, &shape)
    }
}
