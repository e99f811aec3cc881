//! The format reward, weighted combinations and the by-name factory.

use cppo_core::{Problem, Task};
use cppo_reward::{build_weighted, reward_by_name, AccuracyReward, FormatReward, Reward, RewardError, RewardSpec, Weighted};

fn problem(task: Task, answer: &str) -> Problem {
    Problem { id: "p".into(), prompt: "q".into(), answer: answer.into(), task, record: serde_json::Value::Null, messages: None, prompt_field: None }
}

const GOOD: &str = "<think>\n9 * 2 = 18\n</think>\n<answer>\n18\n</answer>";
const UNFORMATTED: &str = "9 * 2 = 18, so the answer is 18";

#[test]
fn format_scores_one_or_zero_and_judges_no_answer() {
    let p = problem(Task::Gsm8k, "#### 18");
    let s = FormatReward.score(GOOD, &p);
    assert_eq!((s.value, s.correct), (1.0, None));
    let s = FormatReward.score(UNFORMATTED, &p);
    assert_eq!((s.value, s.correct), (0.0, None));
    assert!(s.reason.contains("<think>"), "{}", s.reason);
}

#[test]
fn accuracy_follows_the_task() {
    let gsm = problem(Task::Gsm8k, "#### 1,000");
    let math = problem(Task::Math, r"\frac{1}{2}");
    assert_eq!(AccuracyReward.score("<answer>1000</answer>", &gsm).value, 1.0);
    assert_eq!(AccuracyReward.score(r"\boxed{0.5}", &math).value, 1.0);
    // Both graders read a box's content as the answer: `\frac{1}{2}` is 0.5, not its last number 2, so it
    // is wrong against a gold of 2 (picking "the last number inside" would have graded it correct) and
    // right against 0.5.
    assert_eq!(AccuracyReward.score(r"\boxed{\frac{1}{2}}", &problem(Task::Gsm8k, "#### 2")).value, 0.0);
    assert_eq!(AccuracyReward.score(r"\boxed{\frac{1}{2}}", &problem(Task::Gsm8k, "#### 0.5")).value, 1.0);
    assert_eq!(AccuracyReward.score(r"\boxed{\frac{1}{2}}", &problem(Task::Math, "2")).value, 0.0);
}

#[test]
fn weighted_sums_parts_and_lists_them() {
    let w = Weighted::new(vec![(1.0, Box::new(AccuracyReward)), (0.5, Box::new(FormatReward))]);
    let p = problem(Task::Gsm8k, "#### 18");
    let s = w.score(GOOD, &p);
    assert_eq!((s.value, s.correct, s.extracted.as_deref()), (1.5, Some(true), Some("18")));
    assert!(s.reason.contains("1*accuracy=1") && s.reason.contains("0.5*format=1"), "{}", s.reason);
    let s = w.score(UNFORMATTED, &p);
    assert_eq!((s.value, s.correct), (1.0, Some(true)));
    let s = w.score("<think>x</think>\n<answer>17</answer>", &p);
    assert_eq!((s.value, s.correct), (0.5, Some(false)));
    let only_format = Weighted::new(vec![(2.0, Box::new(FormatReward))]);
    let s = only_format.score(GOOD, &p);
    assert_eq!((s.value, s.correct), (2.0, None));
    // Negative weights penalise.
    let penalty = Weighted::new(vec![(-1.0, Box::new(FormatReward))]);
    assert_eq!(penalty.score(GOOD, &p).value, -1.0);
}

#[test]
fn the_factory_builds_known_names_and_rejects_others() {
    for name in ["accuracy", "gsm8k", "math", "format", "brevity"] {
        assert_eq!(reward_by_name(name).map(|r| r.name().to_string()), Ok(name.to_string()));
    }
    let err = reward_by_name("acuracy").err().expect("unknown name");
    assert_eq!(err, RewardError::UnknownReward { name: "acuracy".into(), known: "accuracy, gsm8k, math, format, brevity".into() });
    assert!(err.to_string().contains("unknown reward `acuracy`") && err.to_string().contains("format"));

    let specs: Vec<RewardSpec> = serde_json::from_str(r#"[{"name": "accuracy"}, {"name": "format", "weight": 0.25}]"#).unwrap();
    assert_eq!(specs[0].weight, 1.0);
    let w = build_weighted(&specs).unwrap();
    assert_eq!(w.parts.len(), 2);
    assert_eq!(w.score(GOOD, &problem(Task::Gsm8k, "#### 18")).value, 1.25);
    let bad = [RewardSpec { name: "format".into(), weight: f64::NAN }];
    assert!(matches!(build_weighted(&bad), Err(RewardError::BadWeight { .. })));
    assert_eq!(build_weighted(&[]).err(), Some(RewardError::NoParts));
    let unknown = [RewardSpec { name: "length".into(), weight: 1.0 }];
    assert!(matches!(build_weighted(&unknown), Err(RewardError::UnknownReward { .. })));
}
