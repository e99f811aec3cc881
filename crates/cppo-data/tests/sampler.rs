//! The sampler's order is a fresh permutation each epoch, and a restored sampler continues exactly.

use std::collections::HashSet;

use cppo_data::{take, take_random, Problem, Sampler, SamplerState, Task};
use proptest::prelude::*;

fn problems(n: usize) -> Vec<Problem> {
    (0..n)
        .map(|i| Problem {
            id: format!("p{i}"),
            prompt: format!("q{i}"),
            answer: i.to_string(),
            task: Task::Gsm8k,
            record: serde_json::Value::Null,
        messages: None,
        prompt_field: None,
        })
        .collect()
}

#[test]
fn each_epoch_is_a_permutation_and_epochs_differ() {
    let mut s = Sampler::new(problems(50), 11).unwrap();
    let first = s.next_indices(50);
    let second = s.next_indices(50);
    assert_eq!(first.iter().copied().collect::<HashSet<_>>().len(), 50);
    assert_eq!(second.iter().copied().collect::<HashSet<_>>().len(), 50);
    assert_ne!(first, second, "epochs must be reshuffled");
    assert_ne!(
        first,
        (0..50).collect::<Vec<_>>(),
        "the first epoch must be shuffled too"
    );
    assert_eq!(
        s.state(),
        SamplerState {
            seed: 11,
            epoch: 1,
            position: 50,
            len: 50
        }
    );
}

#[test]
fn batches_hand_out_the_problems_their_indices_name() {
    let list = problems(7);
    let mut a = Sampler::new(list.clone(), 3).unwrap();
    let mut b = Sampler::new(list.clone(), 3).unwrap();
    for _ in 0..5 {
        let indices = a.next_indices(4);
        let batch = b.next_batch(4);
        assert_eq!(
            batch,
            indices.iter().map(|&i| list[i].clone()).collect::<Vec<_>>()
        );
    }
}

#[test]
fn restore_rejects_mismatched_lists_and_empty_lists() {
    assert!(Sampler::new(vec![], 0).is_err());
    let state = SamplerState {
        seed: 1,
        epoch: 0,
        position: 3,
        len: 10,
    };
    assert!(Sampler::restore(problems(9), state)
        .unwrap_err()
        .to_string()
        .contains("10"));
    assert!(Sampler::restore(
        problems(10),
        SamplerState {
            position: 11,
            ..state
        }
    )
    .is_err());
    assert!(Sampler::restore(problems(10), state).is_ok());
}

#[test]
fn state_round_trips_through_json() {
    let mut s = Sampler::new(problems(13), 5).unwrap();
    s.next_indices(20);
    let json = serde_json::to_string(&s.state()).unwrap();
    let back: SamplerState = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s.state());
}

#[test]
fn take_gives_a_prefix_and_take_random_a_seeded_subset() {
    let list = problems(20);
    assert_eq!(take(&list, 5), list[..5].to_vec());
    assert_eq!(take(&list, 50), list);
    let a = take_random(&list, 8, 42);
    assert_eq!(a, take_random(&list, 8, 42));
    assert_eq!(a.len(), 8);
    assert_eq!(a.iter().map(|p| &p.id).collect::<HashSet<_>>().len(), 8);
    let positions: Vec<usize> = a
        .iter()
        .map(|p| list.iter().position(|q| q.id == p.id).unwrap())
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "original order kept"
    );
    assert_eq!(take_random(&list, 30, 1).len(), 20);
}

proptest! {
    #[test]
    fn a_restored_sampler_continues_like_an_uninterrupted_one(
        seed in any::<u64>(),
        len in 1usize..40,
        b in 1usize..25,
        before in 0usize..8,
        after in 1usize..8,
    ) {
        let mut uninterrupted = Sampler::new(problems(len), seed).unwrap();
        let mut first = Sampler::new(problems(len), seed).unwrap();
        for _ in 0..before {
            prop_assert_eq!(first.next_indices(b), uninterrupted.next_indices(b));
        }
        let saved = serde_json::to_string(&first.state()).unwrap();
        drop(first);
        let mut resumed = Sampler::restore(problems(len), serde_json::from_str(&saved).unwrap()).unwrap();
        for _ in 0..after {
            prop_assert_eq!(resumed.next_batch(b), uninterrupted.next_batch(b));
        }
    }

    #[test]
    fn every_problem_appears_once_per_epoch(seed in any::<u64>(), len in 1usize..40, b in 1usize..25, epochs in 1usize..4) {
        let mut s = Sampler::new(problems(len), seed).unwrap();
        let mut all = Vec::new();
        while all.len() < len * epochs {
            all.extend(s.next_indices(b));
        }
        // Brute force: each consecutive window of `len` draws aligned to epoch starts holds every index once.
        for epoch in all.chunks(len).take(epochs) {
            let mut sorted = epoch.to_vec();
            sorted.sort_unstable();
            prop_assert_eq!(sorted, (0..len).collect::<Vec<_>>());
        }
    }
}
