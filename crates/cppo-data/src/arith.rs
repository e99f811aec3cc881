//! Generated arithmetic ("What is 23 + 58 - 7?"): a task small models learn within minutes, so a quickstart
//! run shows reward going up. Problems are drawn from a seeded stream; which split an expression belongs to
//! depends only on its text and `split_seed`, so train and test never share an expression whatever seeds
//! each was drawn with.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use cppo_core::{Problem, Task};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{DataError, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArithSplit {
    Train,
    Test,
}

impl fmt::Display for ArithSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ArithSplit::Train => "train",
            ArithSplit::Test => "test",
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
}

impl ArithOp {
    pub fn symbol(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
        }
    }
}

impl FromStr for ArithOp {
    type Err = DataError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "+" | "add" => Ok(ArithOp::Add),
            "-" | "sub" => Ok(ArithOp::Sub),
            "*" | "mul" => Ok(ArithOp::Mul),
            other => Err(DataError::ArithConfig(format!(
                "unknown operator `{other}` (expected +, - or *)"
            ))),
        }
    }
}

impl Serialize for ArithOp {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.symbol())
    }
}

impl<'de> Deserialize<'de> for ArithOp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// What to generate. Difficulty grows with `max_digits`, `max_terms`, `*` among the operators and
/// `allow_negative`; [`ArithConfig::preset`] offers three settings of those knobs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArithConfig {
    /// How many distinct problems to return.
    pub count: usize,
    pub split: ArithSplit,
    /// Seeds the stream the problems are drawn from.
    pub seed: u64,
    /// Seeds the train/test assignment; keep it equal between a training set and its held-out set.
    pub split_seed: u64,
    /// The share of all expressions that belongs to the test split, in (0, 1).
    pub test_fraction: f64,
    /// Each operand has between `min_digits` and `max_digits` digits (the digit count is drawn first, so
    /// short numbers are as common as long ones); one-digit operands include 0.
    pub min_digits: u32,
    pub max_digits: u32,
    /// Number of operands, drawn uniformly from `min_terms..=max_terms`.
    pub min_terms: usize,
    pub max_terms: usize,
    pub operators: Vec<ArithOp>,
    /// When false, every running total of the expression (evaluated left to right after multiplications)
    /// stays at or above zero, so answers and the steps to them are never negative.
    pub allow_negative: bool,
}

impl Default for ArithConfig {
    fn default() -> Self {
        ArithConfig {
            count: 2000,
            split: ArithSplit::Train,
            seed: 0,
            split_seed: 0,
            test_fraction: 0.1,
            min_digits: 1,
            max_digits: 2,
            min_terms: 2,
            max_terms: 3,
            operators: vec![ArithOp::Add, ArithOp::Sub],
            allow_negative: false,
        }
    }
}

/// The names [`ArithConfig::preset`] knows.
pub const ARITH_PRESETS: [&str; 3] = ["easy", "medium", "hard"];

impl ArithConfig {
    /// `easy`: two operands of up to two digits, `+` only. `medium` (the default): two or three operands of
    /// up to two digits, `+` and `-`. `hard`: three or four operands of two or three digits, `+`, `-`, `*`.
    pub fn preset(name: &str) -> Result<Self> {
        let base = ArithConfig::default();
        match name.trim() {
            "easy" => Ok(ArithConfig {
                max_terms: 2,
                operators: vec![ArithOp::Add],
                ..base
            }),
            "medium" => Ok(base),
            "hard" => Ok(ArithConfig {
                min_digits: 2,
                max_digits: 3,
                min_terms: 3,
                max_terms: 4,
                operators: vec![ArithOp::Add, ArithOp::Sub, ArithOp::Mul],
                ..base
            }),
            other => Err(DataError::ArithConfig(format!(
                "unknown preset `{other}` (expected one of: {})",
                ARITH_PRESETS.join(", ")
            ))),
        }
    }

    pub fn validate(&self) -> Result<()> {
        let fail = |m: String| Err(DataError::ArithConfig(m));
        if !(1..=9).contains(&self.min_digits)
            || !(1..=9).contains(&self.max_digits)
            || self.min_digits > self.max_digits
        {
            return fail(format!(
                "digits must satisfy 1 <= min_digits <= max_digits <= 9, got {}..={}",
                self.min_digits, self.max_digits
            ));
        }
        if !(1..=8).contains(&self.min_terms)
            || !(1..=8).contains(&self.max_terms)
            || self.min_terms > self.max_terms
        {
            return fail(format!(
                "terms must satisfy 1 <= min_terms <= max_terms <= 8, got {}..={}",
                self.min_terms, self.max_terms
            ));
        }
        if self.max_terms > 1 && self.operators.is_empty() {
            return fail("operators is empty but expressions have more than one term".to_owned());
        }
        if !(self.test_fraction > 0.0 && self.test_fraction < 1.0) {
            return fail(format!(
                "test_fraction must lie strictly between 0 and 1, got {}",
                self.test_fraction
            ));
        }
        Ok(())
    }
}

/// Which split an expression (as written in the prompt, e.g. `23 + 58 - 7`) belongs to.
pub fn split_of(expression: &str, split_seed: u64, test_fraction: f64) -> ArithSplit {
    let unit =
        (mix(fnv1a(expression.as_bytes()) ^ mix(split_seed)) >> 11) as f64 / (1u64 << 53) as f64;
    if unit < test_fraction {
        ArithSplit::Test
    } else {
        ArithSplit::Train
    }
}

/// Fixed hashes rather than std's, whose output may change between Rust releases and would move the split.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Generates `config.count` distinct problems of `config.split`, the same ones for the same config; a larger
/// count extends a smaller one's list. Fails when the expression space is too small to supply them.
pub fn generate(config: &ArithConfig) -> Result<Vec<Problem>> {
    config.validate()?;
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let mut seen = HashSet::new();
    let mut problems = Vec::with_capacity(config.count);
    let budget = config.count.saturating_mul(100).max(100_000);
    let mut draws = 0usize;
    while problems.len() < config.count {
        if draws == budget {
            return Err(DataError::ArithExhausted(format!(
                "found only {} distinct {} problems in {budget} draws (count {}); raise max_digits or max_terms, \
                 add operators, or lower count",
                problems.len(),
                config.split,
                config.count
            )));
        }
        draws += 1;
        let Some((expression, value)) = draw(&mut rng, config) else {
            continue;
        };
        if split_of(&expression, config.split_seed, config.test_fraction) != config.split
            || !seen.insert(expression.clone())
        {
            continue;
        }
        let id = format!("arith:{}:{}", config.split, problems.len());
        let record =
            serde_json::json!({ "expression": expression, "answer": value, "split": config.split });
        problems.push(Problem {
            id,
            prompt: format!("What is {expression}?"),
            answer: value.to_string(),
            task: Task::Gsm8k,
            record,
            messages: None,
            prompt_field: None,
        });
    }
    Ok(problems)
}

/// One random expression and its value, or None when it overflows or (unless allowed) goes negative.
fn draw(rng: &mut ChaCha8Rng, config: &ArithConfig) -> Option<(String, i64)> {
    let terms = rng.gen_range(config.min_terms..=config.max_terms);
    let operands: Vec<i64> = (0..terms).map(|_| operand(rng, config)).collect();
    let ops: Vec<ArithOp> = (1..terms)
        .map(|_| config.operators[rng.gen_range(0..config.operators.len())])
        .collect();
    let value = evaluate(&operands, &ops, config.allow_negative)?;
    let mut text = operands[0].to_string();
    for (op, x) in ops.iter().zip(&operands[1..]) {
        text.push_str(&format!(" {} {x}", op.symbol()));
    }
    Some((text, value))
}

fn operand(rng: &mut ChaCha8Rng, config: &ArithConfig) -> i64 {
    let digits = rng.gen_range(config.min_digits..=config.max_digits);
    let low = if digits == 1 {
        0
    } else {
        10i64.pow(digits - 1)
    };
    rng.gen_range(low..10i64.pow(digits))
}

/// Multiplications first, then sums left to right; with `allow_negative` false any negative running total
/// rejects the expression.
fn evaluate(operands: &[i64], ops: &[ArithOp], allow_negative: bool) -> Option<i64> {
    let mut total: i64 = 0;
    let mut sign = 1i64;
    let mut product = operands[0];
    for (op, &x) in ops.iter().zip(&operands[1..]) {
        match op {
            ArithOp::Mul => product = product.checked_mul(x)?,
            ArithOp::Add | ArithOp::Sub => {
                total = total.checked_add(sign.checked_mul(product)?)?;
                if !allow_negative && total < 0 {
                    return None;
                }
                sign = if *op == ArithOp::Add { 1 } else { -1 };
                product = x;
            }
        }
    }
    total = total.checked_add(sign.checked_mul(product)?)?;
    if !allow_negative && total < 0 {
        return None;
    }
    Some(total)
}
