//! `cppo generate`: completions for prompts with the model's chat template.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device};
use cppo_engine::{generate, EngineOptions, Finish, Request, SamplingParams};
use cppo_io::ChatMessage;
use cppo_model::Decoder;
use serde::{Deserialize, Serialize};

use cppo_train::sources::resolve_model_path;

#[derive(Clone, Debug)]
pub struct GenerateArgs {
    pub model: String,
    /// A LoRA adapter (PEFT's format) to run on the model.
    pub adapter: Option<std::path::PathBuf>,
    pub prompts: Vec<Vec<ChatMessage>>,
    pub n: usize,
    pub params: SamplingParams,
    pub seed: u64,
    pub max_batch: usize,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GeneratedText {
    pub prompt: usize,
    pub sample: usize,
    pub text: String,
    pub tokens: Vec<u32>,
    pub logprobs: Vec<f32>,
    pub finish: Finish,
    /// The completion reached `max_new_tokens` without an end (`finish` is `length`).
    #[serde(default)]
    pub truncated: bool,
}

/// Reads prompts from JSON lines: `{"prompt": "..."}` (one user turn, optional `"system"`) or
/// `{"messages": [{"role": ..., "content": ...}, ...]}`.
pub fn read_prompts(path: &Path) -> Result<Vec<Vec<ChatMessage>>> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("{}:{}", path.display(), i + 1);
        let v: serde_json::Value = serde_json::from_str(&line).with_context(|| format!("{at}: not valid JSON"))?;
        if let Some(m) = v.get("messages") {
            let messages: Vec<ChatMessage> =
                serde_json::from_value(m.clone()).with_context(|| format!("{at}: field \"messages\": expected a list of {{role, content}}"))?;
            out.push(messages);
        } else if let Some(p) = v.get("prompt") {
            let Some(p) = p.as_str() else { bail!("{at}: field \"prompt\": expected a string") };
            let mut messages = Vec::new();
            if let Some(s) = v.get("system").and_then(|s| s.as_str()) {
                messages.push(ChatMessage::new("system", s));
            }
            messages.push(ChatMessage::new("user", p));
            out.push(messages);
        } else {
            bail!("{at}: expected a field \"prompt\" or \"messages\"");
        }
    }
    Ok(out)
}

/// Generates `n` completions per prompt; results in prompt then sample order.
pub fn run(args: &GenerateArgs) -> Result<Vec<GeneratedText>> {
    let path = resolve_model_path(&args.model)?;
    let loaded = cppo_io::load_model(&path, DType::F32, &Device::Cpu)?;
    let decoder = match &args.adapter {
        Some(dir) => cppo_train::lora::load_adapted(&loaded.config, &loaded.weights, dir, &Device::Cpu)?,
        None => Decoder::new(&loaded.config, &loaded.weights, false, &Device::Cpu)?,
    };
    let tok = &loaded.tokenizer;
    let requests = args
        .prompts
        .iter()
        .map(|m| Ok(Request { prompt: tok.encode(&tok.render(m, true)?)?, n: args.n }))
        .collect::<Result<Vec<_>>>()?;
    let options = EngineOptions { max_batch: args.max_batch, eos: tok.eos_token_ids().to_vec(), seed: args.seed };
    let detok = |ids: &[u32]| tok.decode(ids, true).unwrap_or_default();
    let cpu = cppo_kernels::cpu::Cpu::<f32>::new();
    let (groups, _) = generate(&cppo_engine::DecoderBackend::new(&decoder, &cpu, cppo_engine::Precision::F32)?, &requests, &args.params, &options, &detok, |_| {})?;
    let mut out = Vec::new();
    for (p, group) in groups.into_iter().enumerate() {
        for (s, c) in group.into_iter().enumerate() {
            let mut text = tok.decode(&c.tokens, true)?;
            if c.finish == Finish::Stop {
                if let Some((at, _)) = cppo_engine::stop::find_stop(&text, &args.params.stop) {
                    text.truncate(at);
                }
            }
            out.push(GeneratedText { prompt: p, sample: s, text, tokens: c.tokens, logprobs: c.logprobs, finish: c.finish, truncated: c.finish == Finish::Length });
        }
    }
    Ok(out)
}

pub fn print(results: &[GeneratedText], json: bool, out: &mut dyn Write) -> Result<()> {
    for r in results {
        if json {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
        } else {
            writeln!(out, "--- prompt {} sample {} ({:?}, {} tokens)", r.prompt, r.sample, r.finish, r.tokens.len())?;
            writeln!(out, "{}", r.text)?;
        }
    }
    Ok(())
}
