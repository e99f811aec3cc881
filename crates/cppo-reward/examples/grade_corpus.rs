//! Writes 10,000 `{"response", "answer"}` lines for timing `cppo grade` (the README's throughput
//! figures): GSM8K-style lines from the GSM8K splits, MATH-style lines from MATH train and MATH-500,
//! with responses in the formats models write (the reference solution, `<answer>` tags, boxes, the
//! "The final answer is ... I hope it is correct." template), about a third of them wrong.
//!
//! `cargo run --release -p cppo-reward --example grade_corpus -- gsm8k ../shared/data > gsm8k-10k.jsonl`
//! (`math` for the MATH-style lines).

use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

const LINES: usize = 10_000;

fn records(dir: &Path, rel: &str) -> Vec<Value> {
    let path = dir.join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

fn text<'a>(r: &'a Value, field: &str) -> &'a str {
    r.get(field).and_then(Value::as_str).unwrap_or_default()
}

fn gsm8k_lines(dir: &Path) -> Vec<Value> {
    let mut all = records(dir, "gsm8k/train.jsonl");
    all.extend(records(dir, "gsm8k/test.jsonl"));
    (0..LINES)
        .map(|i| {
            let reference = text(&all[i % all.len()], "answer");
            let (work, gold) = reference.rsplit_once("####").unwrap_or((reference, "0"));
            let gold = gold.trim();
            // Every third response is off by one.
            let said = if i % 3 == 2 { gold.parse::<i64>().map_or(gold.to_string(), |g| (g + 1).to_string()) } else { gold.to_string() };
            let response = match i % 4 {
                0 => format!("{work}#### {said}"),
                1 => format!("{work}The answer is {said}."),
                2 => format!("<think>\n{work}</think>\n<answer>{said}</answer>"),
                _ => format!("{work}So the total is $\\boxed{{{said}}}$."),
            };
            json!({ "response": response, "answer": reference })
        })
        .collect()
}

fn math_lines(dir: &Path) -> Vec<Value> {
    let mut all: Vec<(String, String)> =
        records(dir, "math/train.jsonl").iter().map(|r| (text(r, "solution").to_string(), text(r, "solution").to_string())).collect();
    all.extend(records(dir, "math500/test.jsonl").iter().map(|r| (text(r, "solution").to_string(), text(r, "answer").to_string())));
    (0..LINES)
        .map(|i| {
            let (solution, reference) = &all[i % all.len()];
            let gold = cppo_reward::math::gold_answer(reference).unwrap_or("0");
            let response = match i % 3 {
                0 => solution.clone(),
                // Another problem's solution: almost always wrong.
                1 => all[(i * 7 + 13) % all.len()].0.clone(),
                _ => format!("Final Answer: The final answer is ${gold}$. I hope it is correct."),
            };
            json!({ "response": response, "answer": reference })
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(task), Some(dir)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: grade_corpus gsm8k|math DATA_DIR > lines.jsonl");
        std::process::exit(2);
    };
    let lines = match task.as_str() {
        "gsm8k" => gsm8k_lines(Path::new(dir)),
        "math" => math_lines(Path::new(dir)),
        other => {
            eprintln!("unknown task {other:?}: gsm8k or math");
            std::process::exit(2);
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for line in lines {
        writeln!(out, "{line}").expect("writing to stdout");
    }
}
