//! A reward worker that is not Python, as the README shows one: `length-worker N` scores 1.0 for a
//! completion of at most N characters and 0.0 for a longer one, speaking cppo's JSON-lines protocol
//! (`[[reward.command]] name = "short", argv = ["length-worker", "200"]`).

#![forbid(unsafe_code)]

use std::io::{BufRead, Write};

use serde_json::{json, Value};

fn main() {
    let limit: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", json!({ "ready": true })).unwrap();
    out.flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        let request: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let rewards: Vec<f64> = request["completions"]
            .as_array()
            .unwrap()
            .iter()
            // A completion is a string, or (conversational data) a list of messages.
            .map(|c| c.as_str().or_else(|| c[0]["content"].as_str()).unwrap_or(""))
            .map(|text| if text.chars().count() <= limit { 1.0 } else { 0.0 })
            .collect();
        writeln!(out, "{}", json!({ "rewards": rewards })).unwrap();
        out.flush().unwrap();
    }
}
