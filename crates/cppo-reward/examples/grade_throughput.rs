//! Times `cppo grade`'s library side ([`cppo_reward::grade::run`]) on a file of `{"response", "answer"}`
//! lines (such as the 10,000-line corpora `grade_corpus` writes), without the CLI's process start or
//! output file: the file is read once into memory, graded `runs` times into a sink, and the best and
//! median lines per second are printed.
//!
//! `cargo run --release -p cppo-reward --example grade_throughput -- math math-10k.jsonl 15`
//!
//! To compare two versions of the grader side by side, build this example at each, copy the binaries,
//! and run them alternately (`taskset -c 0`), so that other load on the machine falls on both.

use std::time::Instant;

use cppo_core::Task;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(task), Some(path)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: grade_throughput gsm8k|math LINES.jsonl [RUNS]");
        std::process::exit(2);
    };
    let task = match task.as_str() {
        "gsm8k" => Task::Gsm8k,
        "math" => Task::Math,
        other => {
            eprintln!("unknown task {other:?}: gsm8k or math");
            std::process::exit(2);
        }
    };
    let runs: usize = match args.get(3).map(|r| r.parse()) {
        None => 5,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("RUNS must be a positive integer, got {:?}", args[3]);
            std::process::exit(2);
        }
    };
    let input = std::fs::read(path).unwrap_or_else(|e| {
        eprintln!("cannot read {path}: {e}");
        std::process::exit(1);
    });
    let mut rates = Vec::with_capacity(runs);
    let mut summary = None;
    for _ in 0..runs {
        let start = Instant::now();
        let s = cppo_reward::grade::run(task, &mut input.as_slice(), &mut std::io::sink()).expect("a sink never fails");
        rates.push(s.lines as f64 / start.elapsed().as_secs_f64());
        summary = Some(s);
    }
    rates.sort_by(f64::total_cmp);
    let (best, median) = (rates[rates.len() - 1], rates[rates.len() / 2]);
    if let Some(s) = summary {
        println!("{path}: {s}; best {:.0} lines/s, median {:.0} lines/s over {runs} runs", best, median);
    }
}
