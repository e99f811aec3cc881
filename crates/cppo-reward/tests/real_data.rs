//! Gold extraction and self-consistency over the datasets: every reference graded against itself is
//! correct, through every extraction path, and a wrong answer is not. Where `CPPO_DATA_DIR` names the
//! real data folder (`CPPO_DATA_DIR=../shared/data cargo test -p cppo-reward --test real_data`) this
//! covers all 16,862 published references; elsewhere the same checks run on a few references in the
//! published formats that the test writes itself, chosen for the shapes the real ones take (nested
//! braces, several boxes, intervals, text, an empty box). Each test prints which it read.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cppo_reward::math::structure::{self, Ans};
use cppo_reward::{gsm8k, math};
use serde_json::{json, Value};

/// The data folder the checks read, and what it must contain.
struct Source {
    dir: PathBuf,
    /// MATH train + MATH-500 references.
    math_golds: usize,
    /// GSM8K test + train references.
    gsm8k_golds: usize,
    /// Solutions whose only `\boxed{}` is empty: the dataset lost their answers, so they have no gold.
    known_empty_boxes: Vec<&'static str>,
}

fn source() -> &'static Source {
    static SOURCE: OnceLock<Source> = OnceLock::new();
    SOURCE.get_or_init(|| match std::env::var_os("CPPO_DATA_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            assert!(dir.join("README.md").is_file(), "CPPO_DATA_DIR={} is not the data folder (no README.md)", dir.display());
            eprintln!("reading the real data in {}", dir.display());
            Source { dir, math_golds: 8000, gsm8k_golds: 1319 + 7473, known_empty_boxes: vec!["math/train.jsonl:5530", "math/train.jsonl:5532"] }
        }
        None => {
            let dir = std::env::temp_dir().join(format!("cppo-reward-fixture-{}", std::process::id()));
            write_fixture(&dir);
            eprintln!("CPPO_DATA_DIR unset: reading references in the published formats written to {}", dir.display());
            Source { dir, math_golds: MATH_SOLUTIONS.len() + MATH500.len(), gsm8k_golds: 2 * GSM8K.len(), known_empty_boxes: vec!["math/train.jsonl:4"] }
        }
    })
}

/// MATH train solutions in the shapes the real ones take (the fourth has an empty box, as two real ones do).
const MATH_SOLUTIONS: &[&str] = &[
    "The sum is $3 + 4 = \\boxed{7}$.",
    "We get $\\boxed{\\frac{\\sqrt{3}}{2}}$ after simplifying $\\sin 60^\\circ$.",
    "First $\\boxed{2}$ is a guess; in fact the answer is $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$.",
    "The answer is $\\boxed{}$.",
    "So $x \\in \\boxed{[-2, 7)}$.",
    "The solutions are $\\boxed{-1, 4}$.",
    "Hence $\\boxed{10\\sqrt{2}}$ units.",
    "The word is $\\boxed{\\text{(C)}}$.",
    "So the value is $\\boxed{\\dfrac{1}{12}}$.",
    "Nested: $\\boxed{2^{\\frac{1}{2}} + x^{2}}$.",
];

/// MATH-500 (solution, answer) pairs.
const MATH500: &[(&str, &str)] = &[
    ("Converting gives $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$.", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("Thus $p - q = \\boxed{p - q}$.", "p - q"),
    ("The answer is $\\boxed{\\$32,\\!348}$.", "\\$32,\\!348"),
    ("Therefore $\\boxed{\\frac{14}{3}}$.", "\\frac{14}{3}"),
];

/// GSM8K worked solutions (the gold follows `####`).
const GSM8K: &[&str] = &[
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether.\n#### 72",
    "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nShe earned 0.2 x 50 = $<<0.2*50=10>>10.\n#### 10",
    "The total is 1000 + 234 = <<1000+234=1234>>1234.\n#### 1234",
];

fn write_fixture(dir: &Path) {
    let write = |rel: &str, records: Vec<Value>| {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text: String = records.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    };
    write("README.md", vec![]);
    write("math/train.jsonl", MATH_SOLUTIONS.iter().enumerate().map(|(i, s)| json!({"problem": "?", "solution": s, "unique_id": format!("train/{i}.json")})).collect());
    write("math500/test.jsonl", MATH500.iter().map(|(s, a)| json!({"problem": "?", "solution": s, "answer": a})).collect());
    for split in ["test", "train"] {
        write(&format!("gsm8k/{split}.jsonl"), GSM8K.iter().map(|a| json!({"question": "?", "answer": a})).collect());
    }
    write("amc23/test.jsonl", vec![json!({"id": 0, "problem": "?", "answer": 27.0}), json!({"id": 1, "problem": "?", "answer": 5.0})]);
    write("aime24/test.jsonl", vec![json!({"id": 60, "problem": "?", "answer": "204"}), json!({"id": 61, "problem": "?", "answer": "25"})]);
}

fn records(rel: &str) -> Vec<Value> {
    let path = source().dir.join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}:{}: invalid JSON: {e}", path.display(), i + 1)))
        .collect()
}

fn field<'a>(r: &'a Value, name: &str, file: &str, i: usize) -> &'a str {
    r.get(name).and_then(Value::as_str).unwrap_or_else(|| panic!("{file}:{}: no string field `{name}`", i + 1))
}

/// Collects failures so one run reports all of them (the first few in full).
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    fn assert_none(&self, label: &str, total: usize) {
        eprintln!("{label}: {} of {total} checks failed", self.0.len());
        for f in self.0.iter().take(25) {
            eprintln!("  {f}");
        }
        assert!(self.0.is_empty(), "{label}: {} failures (first: {})", self.0.len(), self.0[0]);
    }
}

fn all_values_parse(a: &Ans) -> bool {
    match a {
        Ans::Value { expr, .. } => expr.is_some(),
        Ans::Tuple { items, .. } | Ans::Set(items) | Ans::List(items) | Ans::Union(items) => items.iter().all(all_values_parse),
        Ans::Matrix(rows) => rows.iter().flatten().all(all_values_parse),
        Ans::Equation(l, r) | Ans::Approx(l, r) => all_values_parse(l) && all_values_parse(r),
    }
}

/// Grades a MATH reference against itself through each extraction path, and wrong answers against it.
fn check_math_reference(reference: &str, label: &str, fails: &mut Failures, parsed: &mut usize, no_gold: &mut Vec<String>) -> usize {
    let Some(gold) = math::gold_answer(reference) else {
        fails.check(reference.contains("\\boxed{}"), || format!("{label}: no gold answer extracted"));
        no_gold.push(label.to_string());
        let s = math::grade("\\boxed{0}", reference);
        fails.check(s.correct == Some(false), || format!("{label}: graded correct without a gold answer"));
        return 2;
    };
    if let Ok(n) = math::normalize(gold) {
        if all_values_parse(&structure::build(&n)) {
            *parsed += 1;
        }
    }
    let s = math::grade(reference, reference);
    fails.check(s.correct == Some(true), || format!("{label}: solution vs itself: {}", s.reason));
    for completion in [
        format!("<think>...</think>\n<answer>{gold}</answer>"),
        format!("So the final answer is ${gold}$."),
        format!("We conclude that the value is ${gold}$"),
    ] {
        let s = math::grade(&completion, reference);
        fails.check(s.correct == Some(true), || format!("{label}: {completion:?}: {}", s.reason));
    }
    for wrong in [format!("\\boxed{{{gold}+1}}"), format!("\\boxed{{1+{gold}}}")] {
        let s = math::grade(&wrong, reference);
        fails.check(s.correct == Some(false), || format!("{label}: wrong answer {wrong:?} graded correct: {}", s.reason));
    }
    6
}

#[test]
fn math_train_and_math500_references_grade_themselves() {
    let mut fails = Failures::default();
    let (mut checks, mut golds, mut parsed) = (0, 0, 0);
    let mut no_gold = Vec::new();
    for (i, r) in records("math/train.jsonl").iter().enumerate() {
        let solution = field(r, "solution", "math/train.jsonl", i);
        checks += check_math_reference(solution, &format!("math/train.jsonl:{}", i + 1), &mut fails, &mut parsed, &mut no_gold);
        golds += 1;
    }
    for (i, r) in records("math500/test.jsonl").iter().enumerate() {
        let file = "math500/test.jsonl";
        let (solution, answer) = (field(r, "solution", file, i), field(r, "answer", file, i));
        let label = format!("{file}:{}", i + 1);
        checks += check_math_reference(solution, &label, &mut fails, &mut parsed, &mut no_gold);
        golds += 1;
        // The bare `answer` field as the reference, and as the answer to the solution.
        let s = math::grade(solution, answer);
        fails.check(s.correct == Some(true), || format!("{label}: solution vs `answer` field: {}", s.reason));
        let from_solution = math::gold_answer(solution).unwrap_or("");
        fails.check(math::is_equiv(answer, from_solution), || format!("{label}: `answer` {answer:?} vs boxed {from_solution:?}"));
        checks += 2;
    }
    eprintln!("MATH references: {golds}; without a gold answer: {no_gold:?}; golds whose values all parse as expressions: {parsed}");
    assert_eq!(no_gold, source().known_empty_boxes, "references without a gold answer");
    assert_eq!(golds, source().math_golds, "MATH train + MATH-500 records");
    fails.assert_none("MATH references", checks);
}

#[test]
fn gsm8k_references_grade_themselves() {
    let mut fails = Failures::default();
    let mut checks = 0;
    let mut golds = 0;
    for file in ["gsm8k/test.jsonl", "gsm8k/train.jsonl"] {
        for (i, r) in records(file).iter().enumerate() {
            let reference = field(r, "answer", file, i);
            let label = format!("{file}:{}", i + 1);
            golds += 1;
            let gold = match gsm8k::gold_answer(reference) {
                gsm8k::Gold::Number(d) => d,
                other => {
                    fails.check(false, || format!("{label}: gold is not a number: {other}"));
                    continue;
                }
            };
            let g: i128 = gold.to_string().parse().unwrap_or_else(|_| panic!("{label}: gold {gold} is not an integer"));
            let s = gsm8k::grade(reference, reference);
            fails.check(s.correct == Some(true), || format!("{label}: solution vs itself: {}", s.reason));
            let with_commas = gold.to_string().parse::<i128>().map(group_thousands).unwrap_or_default();
            for completion in [
                format!("<think>...</think>\n<answer>{gold}</answer>"),
                format!("<answer>The answer is ${with_commas}.</answer>"),
                format!("The total is \\boxed{{{gold}}}."),
                format!("so she pays {with_commas} dollars."),
            ] {
                let s = gsm8k::grade(&completion, reference);
                fails.check(s.correct == Some(true), || format!("{label}: {completion:?}: {}", s.reason));
            }
            for wrong in [format!("#### {}", g + 1), format!("<answer>{}</answer>", g - 1)] {
                let s = gsm8k::grade(&wrong, reference);
                fails.check(s.correct == Some(false), || format!("{label}: wrong {wrong:?} graded correct: {}", s.reason));
            }
            checks += 7;
        }
    }
    assert_eq!(golds, source().gsm8k_golds, "GSM8K test + train records");
    fails.assert_none("GSM8K references", checks);
}

fn group_thousands(n: i128) -> String {
    let digits: Vec<char> = n.unsigned_abs().to_string().chars().rev().collect();
    let groups: Vec<String> = digits.chunks(3).map(|c| c.iter().rev().collect()).rev().collect();
    let sign = if n < 0 { "-" } else { "" };
    format!("{sign}{}", groups.join(","))
}

#[test]
fn amc_and_aime_numeric_answers_match_plain_boxes() {
    let mut fails = Failures::default();
    let mut checks = 0;
    for file in ["amc23/test.jsonl", "aime24/test.jsonl"] {
        for (i, r) in records(file).iter().enumerate() {
            let answer = match r.get("answer") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => panic!("{file}:{}: no `answer`", i + 1),
            };
            let value: f64 = answer.parse().unwrap_or_else(|_| panic!("{file}:{}: answer {answer:?} is not a number", i + 1));
            let plain = format!("\\boxed{{{}}}", value as i64);
            let s = math::grade(&plain, &answer);
            fails.check(s.correct == Some(true), || format!("{file}:{}: {plain} vs {answer}: {}", i + 1, s.reason));
            let off = format!("\\boxed{{{}}}", value as i64 + 1);
            let s = math::grade(&off, &answer);
            fails.check(s.correct == Some(false), || format!("{file}:{}: {off} vs {answer} graded correct", i + 1));
            checks += 2;
        }
    }
    fails.assert_none("AMC/AIME answers", checks);
}
