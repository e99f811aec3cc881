//! Generated arithmetic: deterministic, disjoint splits, and answers that an independent evaluator agrees with.

use std::collections::HashSet;

use cppo_data::{generate_arith, split_of, ArithConfig, ArithOp, ArithSplit, Task, ARITH_PRESETS};
use proptest::prelude::*;

/// A separate recursive-descent evaluator over the prompt text, so the generator's arithmetic is not
/// checked against itself.
fn eval_prompt(prompt: &str) -> i128 {
    let expr = prompt
        .strip_prefix("What is ")
        .and_then(|s| s.strip_suffix('?'))
        .expect("prompt shape");
    let tokens: Vec<&str> = expr.split(' ').collect();
    let mut i = 0;
    let term = |i: &mut usize| -> i128 {
        let mut v: i128 = tokens[*i].parse().unwrap();
        *i += 1;
        while *i < tokens.len() && tokens[*i] == "*" {
            v *= tokens[*i + 1].parse::<i128>().unwrap();
            *i += 2;
        }
        v
    };
    let mut total = term(&mut i);
    while i < tokens.len() {
        let op = tokens[i];
        i += 1;
        let rhs = term(&mut i);
        match op {
            "+" => total += rhs,
            "-" => total -= rhs,
            other => panic!("unexpected token {other}"),
        }
    }
    total
}

fn config(seed: u64, split: ArithSplit) -> ArithConfig {
    ArithConfig {
        count: 300,
        seed,
        split,
        ..ArithConfig::default()
    }
}

#[test]
fn same_config_same_problems() {
    let a = generate_arith(&config(7, ArithSplit::Train)).unwrap();
    let b = generate_arith(&config(7, ArithSplit::Train)).unwrap();
    assert_eq!(a, b);
    let c = generate_arith(&config(8, ArithSplit::Train)).unwrap();
    assert_ne!(a, c);
}

#[test]
fn a_larger_count_extends_a_smaller_one() {
    let small = generate_arith(&ArithConfig {
        count: 50,
        ..config(3, ArithSplit::Train)
    })
    .unwrap();
    let large = generate_arith(&config(3, ArithSplit::Train)).unwrap();
    assert_eq!(&large[..50], &small[..]);
}

#[test]
fn problems_look_like_gsm8k_tasks_with_bare_numeric_answers() {
    let problems = generate_arith(&config(1, ArithSplit::Test)).unwrap();
    assert_eq!(problems.len(), 300);
    let prompts: HashSet<&str> = problems.iter().map(|p| p.prompt.as_str()).collect();
    assert_eq!(prompts.len(), 300, "problems within a split are distinct");
    for p in &problems {
        assert_eq!(p.task, Task::Gsm8k);
        assert_eq!(
            p.answer.parse::<i128>().unwrap(),
            eval_prompt(&p.prompt),
            "{}",
            p.prompt
        );
        assert_eq!(p.record["split"], "test");
        assert!(p.id.starts_with("arith:test:"));
    }
}

#[test]
fn presets_differ_and_generate() {
    for name in ARITH_PRESETS {
        let cfg = ArithConfig {
            count: 100,
            ..ArithConfig::preset(name).unwrap()
        };
        let problems = generate_arith(&cfg).unwrap();
        assert_eq!(problems.len(), 100, "{name}");
        for p in &problems {
            assert_eq!(
                p.answer.parse::<i128>().unwrap(),
                eval_prompt(&p.prompt),
                "{name}: {}",
                p.prompt
            );
        }
    }
    let hard = generate_arith(&ArithConfig {
        count: 200,
        ..ArithConfig::preset("hard").unwrap()
    })
    .unwrap();
    assert!(hard.iter().any(|p| p.prompt.contains('*')));
    let easy = generate_arith(&ArithConfig {
        count: 200,
        ..ArithConfig::preset("easy").unwrap()
    })
    .unwrap();
    assert!(easy
        .iter()
        .all(|p| !p.prompt.contains('-') && !p.prompt.contains('*')));
    assert!(ArithConfig::preset("insane").is_err());
}

#[test]
fn too_small_a_space_is_an_error_not_a_hang() {
    // One-digit sums a + b: 100 expressions, about 10 of them held out.
    let cfg = ArithConfig {
        count: 50,
        split: ArithSplit::Test,
        max_digits: 1,
        max_terms: 2,
        operators: vec![ArithOp::Add],
        ..ArithConfig::default()
    };
    let err = generate_arith(&cfg).unwrap_err().to_string();
    assert!(err.contains("distinct test problems"), "{err}");
}

#[test]
fn invalid_configs_are_rejected() {
    let base = ArithConfig::default();
    for bad in [
        ArithConfig {
            min_digits: 0,
            ..base.clone()
        },
        ArithConfig {
            max_digits: 10,
            ..base.clone()
        },
        ArithConfig {
            min_digits: 3,
            max_digits: 2,
            ..base.clone()
        },
        ArithConfig {
            min_terms: 0,
            ..base.clone()
        },
        ArithConfig {
            operators: vec![],
            ..base.clone()
        },
        ArithConfig {
            test_fraction: 0.0,
            ..base.clone()
        },
        ArithConfig {
            test_fraction: f64::NAN,
            ..base.clone()
        },
    ] {
        assert!(generate_arith(&bad).is_err(), "{bad:?}");
    }
}

#[test]
fn config_reads_from_toml_like_json_with_defaults() {
    let cfg: ArithConfig =
        serde_json::from_str(r#"{"count": 10, "operators": ["+", "*"], "max_digits": 3}"#).unwrap();
    assert_eq!(cfg.count, 10);
    assert_eq!(cfg.operators, vec![ArithOp::Add, ArithOp::Mul]);
    assert_eq!(cfg.max_digits, 3);
    assert_eq!(cfg.min_terms, ArithConfig::default().min_terms);
    assert!(serde_json::from_str::<ArithConfig>(r#"{"operators": ["/"]}"#).is_err());
    assert!(serde_json::from_str::<ArithConfig>(r#"{"cout": 3}"#).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn splits_never_share_an_expression(
        train_seed in any::<u64>(),
        test_seed in any::<u64>(),
        split_seed in any::<u64>(),
        max_digits in 2u32..=3,
        max_terms in 2usize..=4,
        allow_negative in any::<bool>(),
        with_mul in any::<bool>(),
    ) {
        let mut operators = vec![ArithOp::Add, ArithOp::Sub];
        if with_mul { operators.push(ArithOp::Mul); }
        let base = ArithConfig { count: 40, split_seed, max_digits, max_terms, operators, allow_negative, ..ArithConfig::default() };
        let train = generate_arith(&ArithConfig { seed: train_seed, split: ArithSplit::Train, ..base.clone() }).unwrap();
        let test = generate_arith(&ArithConfig { seed: test_seed, split: ArithSplit::Test, ..base.clone() }).unwrap();
        let train_prompts: HashSet<&str> = train.iter().map(|p| p.prompt.as_str()).collect();
        for p in &test {
            prop_assert!(!train_prompts.contains(p.prompt.as_str()), "{} in both splits", p.prompt);
        }
        for p in train.iter().chain(&test) {
            let value = eval_prompt(&p.prompt);
            prop_assert_eq!(p.answer.parse::<i128>().unwrap(), value);
            if !allow_negative { prop_assert!(value >= 0); }
            let expr = p.record["expression"].as_str().unwrap();
            let want = if p.id.contains(":test:") { ArithSplit::Test } else { ArithSplit::Train };
            prop_assert_eq!(split_of(expr, split_seed, base.test_fraction), want);
        }
    }

    #[test]
    fn held_out_share_is_near_test_fraction(split_seed in any::<u64>(), fraction in 0.05f64..0.5) {
        let held_out = (0..4000).filter(|i| split_of(&format!("{} + {}", i / 64, i % 64), split_seed, fraction) == ArithSplit::Test).count();
        let share = held_out as f64 / 4000.0;
        prop_assert!((share - fraction).abs() < 0.05, "share {share} vs fraction {fraction}");
    }
}
