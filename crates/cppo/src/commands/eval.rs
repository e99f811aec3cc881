//! `cppo eval`: stand-alone evaluation of a model on a benchmark, every generation written with its grade.

use std::path::PathBuf;

use anyhow::{Context, Result};
use candle_core::{DType, Device};
use cppo_data::PromptTemplate;
use cppo_model::Decoder;

use cppo_train::config::DataSection;
use cppo_train::eval::{evaluate, EvalSettings, EvalSummary};
use cppo_train::fsutil::write_atomic;
use cppo_engine::SamplingParams;
use cppo_train::prompt::Prompter;
use cppo_train::rollout::{generate_from, GenerateOptions, RolloutRequest};
use cppo_train::sources::{load_problems, resolve_model_path};

#[derive(Clone, Debug)]
pub struct EvalArgs {
    pub model: String,
    /// A LoRA adapter (PEFT's format) to run on the model.
    pub adapter: Option<PathBuf>,
    /// `gsm8k` (its test split), `math500`, `amc23`, `aime24`, any dataset name, or a JSON-lines file.
    pub data: String,
    pub limit: Option<usize>,
    pub template: String,
    pub settings: EvalSettings,
    pub out: Option<PathBuf>,
    /// For JSON-lines files.
    pub prompt_field: Option<String>,
    pub answer_field: Option<String>,
    pub task: Option<cppo_core::Task>,
}

pub fn dataset_name(short: &str) -> &str {
    match short {
        "gsm8k" => "gsm8k:test",
        "math" => "math500",
        other => other,
    }
}

pub fn run(args: &EvalArgs) -> Result<EvalSummary> {
    let data = DataSection {
        train: String::new(),
        eval: None,
        eval_limit: None,
        template: args.template.clone(),
        system: None,
        user: None,
        max_prompt_tokens: usize::MAX,
        prompt_field: args.prompt_field.clone(),
        answer_field: args.answer_field.clone(),
        id_field: None,
        task: args.task,
    };
    let mut problems = load_problems(dataset_name(&args.data), &data, 0).with_context(|| format!("--data {}", args.data))?;
    if let Some(n) = args.limit {
        problems.truncate(n);
    }
    let path = resolve_model_path(&args.model)?;
    let loaded = cppo_io::load_model(&path, DType::F32, &Device::Cpu)?;
    let decoder = match &args.adapter {
        Some(dir) => cppo_train::lora::load_adapted(&loaded.config, &loaded.weights, dir, &Device::Cpu)?,
        None => Decoder::new(&loaded.config, &loaded.weights, false, &Device::Cpu)?,
    };
    let template = PromptTemplate::preset(&args.template).map_err(|e| anyhow::anyhow!("--template: {e}"))?;
    let prompter = Prompter { template, max_prompt_tokens: usize::MAX };
    // `cppo eval` grades with the task's built-in grader, as the accuracy it reports.
    let rewards = cppo_train::rollout::RewardSet::from_config(&[("accuracy".to_string(), 1.0)].into_iter().collect())?;
    let cpu = cppo_kernels::cpu::Cpu::<f32>::new();
    let tok = &loaded.tokenizer;
    let mut generate = |req: &RolloutRequest, params: &SamplingParams, opts: GenerateOptions| Ok(generate_from(&decoder, &cpu, tok, req, params, opts, |_| {})?.0);
    let (summary, records) = evaluate(&mut generate, tok, &prompter, &rewards, &problems, &args.settings, 0)?;
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
        let mut text = String::new();
        for r in &records {
            text.push_str(&serde_json::to_string(r)?);
            text.push('\n');
        }
        write_atomic(&out.join("generations.jsonl"), text.as_bytes())?;
        write_atomic(&out.join("summary.json"), serde_json::to_string_pretty(&summary)?.as_bytes())?;
    }
    Ok(summary)
}
