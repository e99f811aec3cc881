//! The `cppo` command line: each subcommand parses its arguments and calls one library function.

#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use cppo_core::Task;
use cppo_engine::SamplingParams;
use cppo::commands;
use cppo_train::run::{resume_config, RunOptions, TrainSummary};
use cppo_train::config::TrainConfig;
use cppo_train::eval::EvalSettings;

#[derive(Parser)]
#[command(name = "cppo", version, about = "GRPO-family RL for LLM reasoning, with completion pruning (CPPO) and down-sampling (PODS)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every operation of a device's backend against the CPU backend on fresh random inputs; prints
    /// `N passed, N failed` last and exits non-zero when any check fails. Needs a build with
    /// `--features cuda`.
    Selftest {
        /// `cuda` or `cuda:N`.
        #[arg(long)]
        device: String,
        /// Replays a run's inputs (its report prints the seed); fresh by default.
        #[arg(long)]
        seed: Option<u64>,
        /// Also time the decoder's update on a random model with this config.json's shapes.
        #[arg(long)]
        bench: Option<PathBuf>,
        /// With `--bench`: a few tokens per bench instead of the shapes compared with PyTorch (proves
        /// the path, not the speed: `gpu-check.sh --dry-run`).
        #[arg(long)]
        bench_tiny: bool,
    },
    /// Train SmolLM2-135M-Instruct with CPPO on small additions (about ten minutes on 2 cores) and report
    /// held-out accuracy before and after.
    Quickstart {
        /// Output folder (default runs/quickstart).
        #[arg(long)]
        out: Option<PathBuf>,
        /// A one-minute run over the same path (what CI runs).
        #[arg(long)]
        smoke: bool,
        /// Override any config key, as for `train`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Train with a TOML config (see configs/); `--resume OUT` continues a run from its newest checkpoint
    /// (a run killed before its first one starts over from its saved config).
    Train {
        /// The run's configuration (not needed with --resume, which reads OUT/config.toml).
        config: Option<PathBuf>,
        /// Override any config key: `--set rollout.num_generations=8` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Continue the run in this output folder (with `--set train.steps=N`, for longer); with no
        /// checkpoint there yet, start it over from OUT/config.toml.
        #[arg(long, value_name = "OUT")]
        resume: Option<PathBuf>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Run several arms (grpo, cppo:P, pods:N/M) from the same model, data order and seed and report
    /// time per phase, held-out accuracy and the speedups against GRPO (table, compare.json, PNG plots).
    Compare {
        config: PathBuf,
        /// Comma-separated arms, e.g. grpo,cppo:0.75,cppo:0.875,pods:64/16; `@key=value` after an arm
        /// overrides a config key for that arm alone (cppo:0.75@loss.rollout_correction=none).
        #[arg(long)]
        arms: String,
        #[arg(long, default_value_t = 1)]
        seeds: usize,
        /// GRPO's step count; every other arm trains on the same questions (default: the config's train.steps).
        #[arg(long, conflicts_with = "budget_minutes")]
        budget_steps: Option<u64>,
        /// Training minutes per arm instead: each arm runs the config's schedule (train.steps of GRPO's
        /// questions) and stops when its minutes are spent.
        #[arg(long)]
        budget_minutes: Option<f64>,
        /// Held-out evaluations per run besides the one before training.
        #[arg(long, default_value_t = 4)]
        evals: u64,
        /// Output folder (default: the config's output_dir followed by -compare).
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Speed figures: `bench generate` (tokens/s at batch 1/16/64 with the machine's matmul rate) and
    /// `bench step` (per-phase time of a GRPO step against CPPO on the same batch).
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
    /// Evaluate a model on a benchmark (greedy by default; --samples N for avg@n and pass@k).
    Eval(EvalCli),
    /// Generate completions with the model's chat template.
    Generate(GenerateCli),
    /// Convert a GGUF file into a Hugging Face model directory.
    Convert {
        #[arg(long)]
        gguf: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
    /// Merge a LoRA adapter (PEFT's format) into its base: writes a plain Hugging Face model.
    Merge {
        /// The base model's Hugging Face directory.
        #[arg(long)]
        base: PathBuf,
        /// The adapter directory (adapter_config.json + adapter_model.safetensors).
        #[arg(long)]
        adapter: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
    /// Grade model responses: JSON lines {"response", "answer"} in, one {"correct", "extracted", "reward"} out per line.
    Grade {
        /// Which grader: `gsm8k` (numeric answers) or `math` (LaTeX answers up to equivalence).
        #[arg(long)]
        task: Task,
        /// JSON lines to grade; standard input when absent.
        #[arg(long)]
        input: Option<PathBuf>,
        /// Add "explain" to each line: the normalised forms compared and why they were judged (un)equal.
        #[arg(long)]
        explain: bool,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    Generate {
        #[arg(long, default_value = "smollm2-135m-instruct")]
        model: String,
        #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
        batch: Vec<usize>,
        #[arg(long, default_value_t = 128)]
        new_tokens: usize,
        /// Weight precisions to measure, each at every batch size.
        #[arg(long, value_delimiter = ',', default_value = "f32,bf16", value_parser = str::parse::<cppo_engine::Precision>)]
        weights: Vec<cppo_engine::Precision>,
    },
    Step {
        #[arg(long, default_value = "smollm2-135m-instruct")]
        model: String,
        #[arg(long, default_value_t = 64)]
        max_new_tokens: usize,
        /// Runs of each step; every phase is reported as its median.
        #[arg(long, default_value_t = 3)]
        repeats: usize,
        /// Instead: the same update as LoRA (all linear layers) and as full fine-tuning, side by side.
        #[arg(long)]
        lora: bool,
        /// The rank of `--lora`.
        #[arg(long, default_value_t = 16)]
        lora_r: usize,
        /// With `--lora`: one LoRA step (no full fine-tuning arm) on a random model of this
        /// `config.json`'s shape (e.g. configs/models/qwen2.5-1.5b-instruct.json), `--model` giving
        /// only the tokenizer.
        #[arg(long)]
        random_config: Option<PathBuf>,
        /// With `--random-config`: a whole GRPO step and CPPO P = 0.875 on the same rollouts, rollouts
        /// and update on this device (`cuda`, `cuda:N`; a build with the `cuda` feature), phase by phase
        /// (8 questions x G = 16, prompt 256, `--max-new-tokens` each).
        #[arg(long)]
        device: Option<String>,
        /// With `--device`: questions, completions per question and prompt tokens of the step (smaller
        /// ones prove the path where the timings do not matter: `gpu-check.sh --dry-run`).
        #[arg(long, default_value_t = 8)]
        questions: usize,
        #[arg(long, default_value_t = 16)]
        group: usize,
        #[arg(long, default_value_t = 256)]
        prompt_len: usize,
    },
    /// The overhead of a user's Python reward function: worker start-up and one batch's round trip
    /// with a trivial function, beside the built-in grader on the same batch.
    Rewards {
        #[arg(long, default_value_t = 128)]
        completions: usize,
        /// Tokens per completion (their ids travel in each request).
        #[arg(long, default_value_t = 400)]
        tokens: usize,
        #[arg(long, default_value_t = 20)]
        repeats: usize,
    },
}

#[derive(Args)]
struct EvalCli {
    /// A Hugging Face model directory, a .gguf file, a Hub id (org/name[@revision]), or `smollm2-135m-instruct`.
    #[arg(long)]
    model: String,
    /// A LoRA adapter directory (adapter_config.json + adapter_model.safetensors) to run on the model.
    #[arg(long)]
    adapter: Option<PathBuf>,
    /// gsm8k | math500 | amc23 | aime24 | any dataset name | hub:org/name[:config][:split] | a .jsonl or .parquet file.
    #[arg(long)]
    data: String,
    #[arg(long)]
    limit: Option<usize>,
    /// Prompt template preset: r1-think, r1-math, plain, boxed.
    #[arg(long, default_value = "boxed")]
    template: String,
    #[arg(long, default_value_t = 1)]
    samples: usize,
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    #[arg(long, default_value_t = 1.0)]
    top_p: f64,
    /// k values for pass@k, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pass_k: Vec<usize>,
    #[arg(long, default_value_t = 512)]
    max_new_tokens: usize,
    #[arg(long, default_value_t = 64)]
    max_batch: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where every generation is written with its grade (generations.jsonl), beside summary.json.
    #[arg(long, default_value = "runs/eval")]
    out: PathBuf,
    #[arg(long)]
    prompt_field: Option<String>,
    #[arg(long)]
    answer_field: Option<String>,
    #[arg(long)]
    task: Option<Task>,
}

#[derive(Args)]
struct GenerateCli {
    #[arg(long)]
    model: String,
    /// A LoRA adapter directory (adapter_config.json + adapter_model.safetensors) to run on the model.
    #[arg(long)]
    adapter: Option<PathBuf>,
    #[arg(long, conflicts_with = "input")]
    prompt: Option<String>,
    /// JSON lines with "prompt" (and optional "system") or "messages".
    #[arg(long)]
    input: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    n: usize,
    #[arg(long, default_value_t = 1.0)]
    temperature: f64,
    #[arg(long, default_value_t = 1.0)]
    top_p: f64,
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    #[arg(long, default_value_t = 256)]
    max_new_tokens: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Greedy decoding (same as --temperature 0).
    #[arg(long)]
    greedy: bool,
    /// Stop strings (repeatable).
    #[arg(long)]
    stop: Vec<String>,
    #[arg(long, default_value_t = 64)]
    max_batch: usize,
    /// JSON lines out (text, tokens, log-probs, finish reason).
    #[arg(long)]
    json: bool,
}

fn main() -> anyhow::Result<()> {
    cppo_kernels::alloc::keep_freed_memory();
    let cli = Cli::parse();
    match cli.command {
        Command::Quickstart { out, smoke, set } => {
            let args = commands::quickstart::QuickstartArgs { out, smoke, overrides: set, progress: true };
            let summary = commands::quickstart::quickstart(&args)?;
            report_training(&summary);
        }
        Command::Train { config, set, resume, quiet } => {
            let cfg = match (&config, &resume) {
                (Some(path), _) => TrainConfig::load(path, &set)?,
                // Only train.steps may be changed (raised) on a resumed run; other keys are refused by name.
                (None, Some(out)) => resume_config(out, &set)?,
                (None, None) => bail!("give a config file (see configs/), or --resume OUT"),
            };
            if let (Some(out), Some(_)) = (&resume, &config) {
                if out != &cfg.output_dir {
                    bail!("--resume {} but the config's output_dir is {}", out.display(), cfg.output_dir.display());
                }
            }
            let summary = commands::train::train(cfg, &RunOptions { progress: !quiet, resume: resume.is_some(), ..Default::default() })?;
            report_training(&summary);
        }
        Command::Compare { config, arms, seeds, budget_steps, budget_minutes, evals, out, set } => {
            let base = TrainConfig::load(&config, &set)?;
            let budget = match (budget_steps, budget_minutes) {
                (_, Some(m)) => commands::compare::Budget::Minutes(m),
                (Some(s), None) => commands::compare::Budget::Steps(s),
                (None, None) => commands::compare::Budget::Steps(base.train.steps),
            };
            let out = out.unwrap_or_else(|| PathBuf::from(format!("{}-compare", base.output_dir.display())));
            let args = commands::compare::CompareArgs {
                arms: commands::compare::parse_arms(&arms)?,
                base,
                seeds,
                budget,
                out: out.clone(),
                evals,
                progress: true,
            };
            let report = commands::compare::compare(&args)?;
            println!("{}", commands::compare::table(&report));
            eprintln!("wrote {0}/compare.json, {0}/accuracy_vs_time.png and {0}/time_per_phase.png", out.display());
        }
        Command::Bench { what: BenchCommand::Rewards { completions, tokens, repeats } } => {
            print!("{}", commands::bench_rewards::bench_rewards(completions, tokens, repeats.max(1))?.table());
        }
        Command::Bench { what: BenchCommand::Generate { model, batch, new_tokens, weights } } => {
            print!("{}", commands::bench::bench_generate(&model, &batch, new_tokens, &weights)?.table());
        }
        Command::Bench { what: BenchCommand::Step { max_new_tokens, random_config, device: Some(device), questions, group, prompt_len, .. } } => {
            let cfg = random_config.ok_or_else(|| anyhow::anyhow!("bench step --device {device} needs --random-config CONFIG (e.g. configs/models/qwen2.5-1.5b-instruct.json)"))?;
            let shape = commands::bench_device::DeviceStepShape { questions, group, prompt_len, max_new_tokens, ..Default::default() };
            print!("{}", device_step(&device, &cfg, shape)?.table());
        }
        Command::Bench { what: BenchCommand::Step { model, max_new_tokens, lora: true, lora_r, random_config: Some(cfg), .. } } => {
            print!("{}", commands::bench_lora::bench_step_lora_random(&cfg, &model, max_new_tokens, lora_r)?.table());
        }
        Command::Bench { what: BenchCommand::Step { model, max_new_tokens, repeats, lora: true, lora_r, random_config: None, .. } } => {
            print!("{}", commands::bench_lora::bench_step_lora(&model, max_new_tokens, repeats, lora_r)?.table());
        }
        Command::Bench { what: BenchCommand::Step { model, max_new_tokens, repeats, lora: false, .. } } => {
            print!("{}", commands::bench::bench_step(&model, max_new_tokens, repeats)?.table());
        }
        Command::Eval(a) => {
            let settings = EvalSettings {
                samples: a.samples,
                temperature: a.temperature,
                top_p: a.top_p,
                max_new_tokens: a.max_new_tokens,
                pass_k: a.pass_k,
                max_batch: a.max_batch,
                seed: a.seed,
                stop: vec![],
            };
            let args = commands::eval::EvalArgs {
                model: a.model,
                adapter: a.adapter,
                data: a.data,
                limit: a.limit,
                template: a.template,
                settings,
                out: Some(a.out),
                prompt_field: a.prompt_field,
                answer_field: a.answer_field,
                task: a.task,
            };
            let s = commands::eval::run(&args)?;
            println!("{}", serde_json::to_string_pretty(&s)?);
        }
        Command::Generate(g) => {
            let prompts = match (&g.prompt, &g.input) {
                (Some(p), None) => vec![vec![cppo_io::ChatMessage::new("user", p.clone())]],
                (None, Some(path)) => commands::generate::read_prompts(path)?,
                _ => bail!("give --prompt TEXT or --input FILE.jsonl"),
            };
            let params = SamplingParams {
                temperature: if g.greedy { 0.0 } else { g.temperature },
                top_p: g.top_p,
                top_k: g.top_k,
                max_new_tokens: g.max_new_tokens,
                stop: g.stop,
                ..Default::default()
            };
            let args = commands::generate::GenerateArgs { model: g.model, adapter: g.adapter, prompts, n: g.n, params, seed: g.seed, max_batch: g.max_batch };
            let results = commands::generate::run(&args)?;
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            commands::generate::print(&results, g.json, &mut out)?;
        }
        Command::Selftest { device, seed, bench, bench_tiny } => selftest(&device, seed, bench.as_deref(), bench_tiny)?,
        Command::Convert { gguf, out } => {
            cppo_io::convert_gguf(&gguf, &out).with_context(|| format!("converting {}", gguf.display()))?;
            eprintln!("wrote {}", out.display());
        }
        Command::Merge { base, adapter, out } => {
            cppo_train::lora::merge(&base, &adapter, &out)?;
            eprintln!("wrote {}", out.display());
        }
        Command::Grade { task, input, explain } => {
            let mut reader: Box<dyn BufRead> = match &input {
                Some(path) => Box::new(BufReader::new(
                    std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
                )),
                None => Box::new(BufReader::new(std::io::stdin().lock())),
            };
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let summary = cppo_reward::grade::run_with(task, cppo_reward::grade::Options { explain }, &mut reader, &mut out)?;
            out.flush()?;
            eprintln!("{summary}");
        }
    }
    Ok(())
}

#[cfg(feature = "cuda")]
fn selftest(device: &str, seed: Option<u64>, bench: Option<&std::path::Path>, tiny: bool) -> anyhow::Result<()> {
    use cppo_conformance::selftest::BenchShapes;
    use std::io::Write;
    let shapes = if tiny { BenchShapes::tiny() } else { BenchShapes::full() };
    // Each line as it is known (a time-out keeps them), the count last.
    let report = cppo_conformance::selftest::run(device, seed, bench.map(|b| (b, &shapes)), &mut |line| {
        println!("{line}");
        let _ = std::io::stdout().flush();
    })?;
    println!("{}", report.count());
    if report.failed() > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// `bench step --device D --random-config CONFIG` on that GPU.
#[cfg(feature = "cuda")]
fn device_step(device: &str, config: &std::path::Path, shape: commands::bench_device::DeviceStepShape) -> anyhow::Result<commands::bench_device::DeviceStepBench> {
    use anyhow::Context;
    let cfg = commands::read_random_config(config)?;
    let side = cppo_cuda::cuda::CudaSide::new(cppo_cuda::cuda::ordinal(device)?).with_context(|| format!("--device {device}"))?;
    commands::bench_device::bench_device_step(cppo_cuda::backend::CudaBackend::new(side), &cfg, &shape)
}

#[cfg(not(feature = "cuda"))]
fn device_step(device: &str, _config: &std::path::Path, _shape: commands::bench_device::DeviceStepShape) -> anyhow::Result<commands::bench_device::DeviceStepBench> {
    bail!("bench step --device {device}: this cppo was built without CUDA; build it with `cargo build --release -p cppo --features cuda`")
}

#[cfg(not(feature = "cuda"))]
fn selftest(device: &str, _seed: Option<u64>, _bench: Option<&std::path::Path>, _tiny: bool) -> anyhow::Result<()> {
    bail!("selftest --device {device}: this cppo was built without CUDA; build it with `cargo build --release -p cppo --features cuda`")
}

fn report_training(s: &TrainSummary) {
    let pct = |e: &Option<cppo_train::eval::EvalSummary>| e.as_ref().map_or("n/a".to_string(), |e| format!("{:.1}%", 100.0 * e.accuracy));
    eprintln!("trained {} steps in {:.0} s", s.steps, s.seconds);
    eprintln!("held-out accuracy: before {}, after {}", pct(&s.initial_eval), pct(&s.final_eval));
    let out = s.output_dir.display();
    eprintln!("wrote {out}/metrics.jsonl, {out}/eval.jsonl, {out}/reward.png and the trained model in {out}/model (Hugging Face layout)");
}
