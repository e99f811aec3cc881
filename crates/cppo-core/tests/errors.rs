//! Every invalid parameter or input is an error with a message naming the field, never a panic.

use cppo_core::{Error, Estimator, SelectionConfig, StdKind, Strategy};

fn sel(s: Strategy, rewards: &[Vec<f64>]) -> Result<cppo_core::Selection, Error> {
    s.select(&Estimator::default(), rewards, 0)
}

const RATED: [fn(f64) -> Strategy; 5] = [
    |p| Strategy::Cppo { pruning_rate: p },
    |p| Strategy::CppoPooled {
        pruning_rate: p,
        pool: 2,
    },
    |p| Strategy::CppoPruneLargest { pruning_rate: p },
    |p| Strategy::PruneHighestReward { pruning_rate: p },
    |p| Strategy::PruneLowestReward { pruning_rate: p },
];

#[test]
fn pruning_rate_outside_zero_one() {
    for make in RATED {
        for p in [1.0, 1.5, -0.1, f64::NAN, f64::INFINITY] {
            let e = sel(make(p), &[vec![0.0, 1.0]]).unwrap_err();
            assert!(matches!(e, Error::BadPruningRate(_)), "{e:?}");
            assert!(
                e.to_string().contains("`pruning_rate` must be in [0, 1)"),
                "{e}"
            );
        }
        assert!(sel(make(0.0), &[vec![0.0, 1.0]]).is_ok());
    }
}

#[test]
fn rate_that_keeps_nothing() {
    for make in RATED {
        let e = sel(make(0.75), &[vec![0.0, 1.0]]).unwrap_err();
        assert!(
            matches!(
                e,
                Error::NothingKept {
                    pruning_rate: 0.75,
                    ..
                }
            ),
            "{e:?}"
        );
    }
    // A pool of 2 questions keeps floor(4 * 0.25) = 1, but the last, partial pool keeps floor(2 * 0.25) = 0.
    let e = sel(
        Strategy::CppoPooled {
            pruning_rate: 0.75,
            pool: 2,
        },
        &vec![vec![0.0, 1.0]; 3],
    )
    .unwrap_err();
    assert!(e.to_string().contains("in pool 1 (questions 2..=2)"), "{e}");
}

#[test]
fn m_too_small_or_too_large() {
    assert_eq!(
        sel(Strategy::PodsMaxVariance { m: 1 }, &[vec![0.0, 1.0]]),
        Err(Error::KeepTooFew {
            strategy: "pods-max-variance",
            m: 1,
            min: 2
        })
    );
    assert_eq!(
        sel(Strategy::MaxReward { m: 0 }, &[vec![0.0]]),
        Err(Error::KeepTooFew {
            strategy: "max-reward",
            m: 0,
            min: 1
        })
    );
    assert_eq!(
        sel(Strategy::Random { m: 0, seed: 1 }, &[vec![0.0]]),
        Err(Error::KeepTooFew {
            strategy: "random",
            m: 0,
            min: 1
        })
    );
    for s in [
        Strategy::PodsMaxVariance { m: 3 },
        Strategy::MaxReward { m: 3 },
        Strategy::Random { m: 3, seed: 1 },
    ] {
        assert_eq!(
            sel(s, &[vec![0.0; 4], vec![0.0, 1.0]]),
            Err(Error::KeepTooMany {
                m: 3,
                group: 1,
                size: 2
            })
        );
    }
}

#[test]
fn group_indices_in_errors_are_the_callers_even_after_filtering() {
    let cfg = SelectionConfig {
        strategy: Strategy::PodsMaxVariance { m: 3 },
        dynamic_sampling: true,
        ..SelectionConfig::default()
    };
    // Group 0 is uniform and dropped; group 1 is too small and must be reported as group 1.
    assert_eq!(
        cfg.select(&[vec![1.0; 4], vec![0.0, 1.0]], 0),
        Err(Error::KeepTooMany {
            m: 3,
            group: 1,
            size: 2
        })
    );
    let cfg = SelectionConfig {
        dynamic_sampling: true,
        ..SelectionConfig::default()
    };
    assert!(matches!(
        cfg.select(&[vec![1.0; 4], vec![0.0, f64::NAN]], 0),
        Err(Error::BadReward {
            group: 1,
            index: 1,
            ..
        })
    ));
}

#[test]
fn zero_pool() {
    let e = sel(
        Strategy::CppoPooled {
            pruning_rate: 0.5,
            pool: 0,
        },
        &[vec![0.0, 1.0]],
    )
    .unwrap_err();
    assert_eq!(e, Error::ZeroPool);
    assert!(e.to_string().contains("`pool`"));
}

#[test]
fn unequal_groups_where_the_rule_derives_k_from_g() {
    for make in RATED {
        let e = sel(
            make(0.5),
            &[vec![0.0, 1.0], vec![0.0, 1.0], vec![1.0, 0.0, 1.0]],
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                Error::UnequalGroups {
                    first: 0,
                    expected: 2,
                    group: 2,
                    size: 3,
                    ..
                }
            ),
            "{e:?}"
        );
    }
    // Rules with an explicit m, and `all`, accept groups of different sizes.
    assert!(sel(
        Strategy::PodsMaxVariance { m: 2 },
        &[vec![0.0, 1.0], vec![1.0, 0.0, 1.0]]
    )
    .is_ok());
    assert!(sel(Strategy::All, &[vec![0.0, 1.0], vec![1.0, 0.0, 1.0]]).is_ok());
}

#[test]
fn bad_rewards_and_groups() {
    for s in [
        Strategy::All,
        Strategy::Cppo { pruning_rate: 0.5 },
        Strategy::PodsMaxVariance { m: 2 },
    ] {
        assert_eq!(
            sel(s.clone(), &[vec![0.0, 1.0], vec![]]),
            Err(Error::EmptyGroup { group: 1 })
        );
        assert!(matches!(
            sel(s.clone(), &[vec![0.0, f64::NEG_INFINITY]]),
            Err(Error::BadReward {
                group: 0,
                index: 1,
                ..
            })
        ));
    }
    let rloo = Strategy::MaxReward { m: 1 }.select(&Estimator::Rloo, &[vec![0.0, 1.0]], 0);
    assert_eq!(
        rloo,
        Err(Error::GroupTooSmall {
            estimator: "rloo",
            group: 0,
            size: 1,
            min: 2
        })
    );
    let bad_eps = Strategy::All.select(
        &Estimator::grpo(StdKind::Bessel, -1.0),
        &[vec![0.0, 1.0]],
        0,
    );
    assert_eq!(bad_eps, Err(Error::BadEps(-1.0)));
}

#[test]
fn empty_batch_selects_nothing() {
    for s in [
        Strategy::All,
        Strategy::Cppo { pruning_rate: 0.5 },
        Strategy::PodsMaxVariance { m: 2 },
    ] {
        let out = sel(s, &[]).unwrap();
        assert_eq!((out.kept(), out.questions, out.generated), (0, 0, 0));
    }
}

#[test]
fn strategies_deserialise_by_kebab_case_kind() {
    let cases = [
        (r#"{"kind": "all"}"#, Strategy::All),
        (
            r#"{"kind": "cppo", "pruning_rate": 0.875}"#,
            Strategy::Cppo {
                pruning_rate: 0.875,
            },
        ),
        (
            r#"{"kind": "cppo-pooled", "pruning_rate": 0.5, "pool": 4}"#,
            Strategy::CppoPooled {
                pruning_rate: 0.5,
                pool: 4,
            },
        ),
        (
            r#"{"kind": "pods-max-variance", "m": 4}"#,
            Strategy::PodsMaxVariance { m: 4 },
        ),
        (
            r#"{"kind": "max-reward", "m": 4}"#,
            Strategy::MaxReward { m: 4 },
        ),
        (
            r#"{"kind": "random", "m": 4, "seed": 9}"#,
            Strategy::Random { m: 4, seed: 9 },
        ),
        (
            r#"{"kind": "cppo-prune-largest", "pruning_rate": 0.5}"#,
            Strategy::CppoPruneLargest { pruning_rate: 0.5 },
        ),
        (
            r#"{"kind": "prune-highest-reward", "pruning_rate": 0.5}"#,
            Strategy::PruneHighestReward { pruning_rate: 0.5 },
        ),
        (
            r#"{"kind": "prune-lowest-reward", "pruning_rate": 0.5}"#,
            Strategy::PruneLowestReward { pruning_rate: 0.5 },
        ),
    ];
    for (json, want) in cases {
        let got: Strategy = serde_json::from_str(json).unwrap();
        assert_eq!(got, want);
        assert_eq!(
            serde_json::from_str::<Strategy>(&serde_json::to_string(&got).unwrap()).unwrap(),
            want
        );
    }
    for bad in [
        r#"{"kind": "cppo"}"#,
        r#"{"kind": "cppo", "pruning-rate": 0.5}"#,
        r#"{"kind": "cppo", "pruning_rate": 0.5, "k": 2}"#,
        r#"{"kind": "pods"}"#,
    ] {
        assert!(serde_json::from_str::<Strategy>(bad).is_err(), "{bad}");
    }
    let cfg: SelectionConfig = serde_json::from_str(
        r#"{"strategy": {"kind": "cppo", "pruning_rate": 0.5}, "estimator": {"kind": "rloo"}, "dynamic_sampling": true}"#,
    )
    .unwrap();
    assert_eq!(cfg.estimator, Estimator::Rloo);
    assert!(cfg.dynamic_sampling);
    assert_eq!(
        serde_json::from_str::<SelectionConfig>("{}").unwrap(),
        SelectionConfig::default()
    );
}
