//! `cppo grade --explain`: each verdict line says which normalised forms were compared and why they
//! were judged equal or not, so a person can audit a reward.

use cppo_core::Task;
use cppo_reward::grade::{run, run_with, Options};
use cppo_reward::math;
use serde_json::Value;

fn lines(task: Task, explain: bool, input: &str) -> Vec<Value> {
    let mut out = Vec::new();
    run_with(task, Options { explain }, &mut input.as_bytes(), &mut out).expect("in-memory I/O cannot fail");
    String::from_utf8(out).expect("UTF-8").lines().map(|l| serde_json::from_str(l).expect("JSON")).collect()
}

#[test]
fn math_lines_name_the_forms_compared() {
    let input = [
        r#"{"response": "so $\\boxed{x <= 2}$", "answer": "x \\le 3"}"#,
        r#"{"response": "so $\\boxed{5 \\geq x}$", "answer": "(-\\infty, 5]"}"#,
        r#"{"response": "The final answer is 121. I hope it is correct.", "answer": "120"}"#,
        r#"{"response": "no answer here", "answer": "1"}"#,
    ]
    .join("\n");
    let got = lines(Task::Math, true, &input);
    let why: Vec<&str> = got.iter().map(|l| l["explain"].as_str().expect("an explanation")).collect();
    assert_eq!(got[0]["correct"], false);
    assert!(why[0].contains(r"`x\le2` read as (-\infty, 2]") && why[0].contains(r"gold `x\le3` read as (-\infty, 3]"), "{}", why[0]);
    assert!(why[0].contains("not equivalent") && why[0].contains(r"\boxed{}"), "{}", why[0]);
    assert_eq!(got[1]["correct"], true);
    assert!(why[1].contains("equivalent in structure"), "{}", why[1]);
    assert!(why[2].contains("\"answer is\"") && why[2].contains("`121`") && why[2].contains("`120`"), "{}", why[2]);
    assert!(why[3].contains("no answer found"), "{}", why[3]);
}

#[test]
fn several_readings_are_all_shown() {
    let why = math::explain(r"\boxed{1} and \boxed{3}", "1, 2");
    // The last box, then the boxes together: both compared with the gold, neither equal.
    assert!(why.contains("`3` vs gold `1,2` read as list [1; 2]"), "{why}");
    assert!(why.contains("`1,3` read as list [1; 3] vs gold `1,2`"), "{why}");
}

#[test]
fn gsm8k_lines_explain_with_the_reason_and_plain_runs_do_not_explain() {
    let input = "{\"response\": \"<answer>17</answer>\", \"answer\": \"#### 18\"}";
    let got = lines(Task::Gsm8k, true, input);
    assert_eq!(got[0]["explain"], "wrong: 17 from <answer> vs gold 18");
    let mut out = Vec::new();
    run(Task::Gsm8k, &mut input.as_bytes(), &mut out).expect("in-memory I/O cannot fail");
    assert_eq!(String::from_utf8(out).unwrap().trim(), r#"{"correct":false,"extracted":"17","reward":0.0}"#);
}
