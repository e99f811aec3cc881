//! `cppo bench rewards`: what a user's Python reward function costs beyond its own work: the worker's
//! start-up, and per batch the round trip (a request with every completion, its ids and columns, and
//! the reply), with a trivial function; beside the built-in GSM8K grader on the same batch.

use std::time::Instant;

use anyhow::Result;
use cppo_core::{Problem, Task};
use cppo_train::rewards::{FunctionSpec, RewardSection, RewardSet};

pub struct RewardBench {
    pub completions: usize,
    pub completion_tokens: usize,
    pub repeats: usize,
    pub python: String,
    /// Seconds from starting the worker to its `ready`.
    pub startup: f64,
    /// Median seconds of one batch through the worker (request, call, reply, checks).
    pub batch: f64,
    /// Median seconds of the built-in `gsm8k` grader over the same batch.
    pub builtin: f64,
}

impl RewardBench {
    pub fn table(&self) -> String {
        format!(
            "{} completions of {} tokens, {} columns per row; median of {} batches; python: {}\n\
             | what | seconds | per completion |\n|---|---|---|\n\
             | worker start-up (once per run) | {:.4} | |\n\
             | trivial Python function, one batch | {:.5} | {:.1} us |\n\
             | built-in gsm8k grader, one batch | {:.5} | {:.1} us |\n",
            self.completions,
            self.completion_tokens,
            3,
            self.repeats,
            self.python,
            self.startup,
            self.batch,
            1e6 * self.batch / self.completions as f64,
            self.builtin,
            1e6 * self.builtin / self.completions as f64,
        )
    }
}

const TRIVIAL: &str = "def trivial(completions, **kwargs):\n    return [1.0] * len(completions)\n";

/// Times `repeats` batches of `completions` GSM8K-like completions of about `tokens` tokens each.
pub fn bench_rewards(completions: usize, tokens: usize, repeats: usize) -> Result<RewardBench> {
    let dir = std::env::temp_dir().join(format!("cppo-bench-rewards-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("trivial.py");
    std::fs::write(&file, TRIVIAL)?;
    let function = FunctionSpec { path: file, name: "trivial".into(), weight: 1.0, style: Default::default() };
    let section = RewardSection { functions: vec![function], weights: Default::default(), ..Default::default() };
    let t = Instant::now();
    let external = RewardSet::from_section(&section)?;
    let startup = t.elapsed().as_secs_f64();
    let builtin = RewardSet::from_config(&[("gsm8k".to_string(), 1.0)].into_iter().collect())?;

    let problem = Problem {
        id: "bench".into(),
        prompt: "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?".into(),
        answer: "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April and May.\n#### 72".into(),
        task: Task::Gsm8k,
        record: serde_json::json!({ "question": "...", "answer": "#### 72", "meta": { "source": "gsm8k", "level": 1 } }),
        messages: None,
        prompt_field: Some("question".into()),
    };
    // About 4 characters per token, as English text tokenizes.
    let text = "Natalia sold 48 clips in April and half as many, 24, in May, so 48 + 24 = 72. ".repeat(tokens * 4 / 78 + 1);
    let ids: Vec<u32> = (0..tokens as u32).collect();
    let batch: Vec<(&Problem, &str, &[u32])> = (0..completions).map(|_| (&problem, text.as_str(), ids.as_slice())).collect();
    let time = |set: &RewardSet| -> Result<f64> {
        let mut runs = Vec::with_capacity(repeats);
        for step in 0..repeats {
            let t = Instant::now();
            set.score_batch(step as u64, &batch)?;
            runs.push(t.elapsed());
        }
        runs.sort();
        Ok(runs[runs.len() / 2].as_secs_f64())
    };
    let (batch_s, builtin_s) = (time(&external)?, time(&builtin)?);
    drop(external);
    std::fs::remove_dir_all(&dir).ok();
    Ok(RewardBench {
        completions,
        completion_tokens: tokens,
        repeats,
        python: cppo_reward::WorkerOptions::resolve_python(None),
        startup,
        batch: batch_s,
        builtin: builtin_s,
    })
}
