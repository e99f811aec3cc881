//! The one error type of the core: every invalid parameter or input is reported here, never as a panic.

/// Rewards beyond this magnitude are rejected: sums and differences of rewards must stay finite, and no
/// real reward comes anywhere near it.
pub const MAX_ABS_REWARD: f64 = 1e100;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("group {group} has no completions")]
    EmptyGroup { group: usize },

    #[error(
        "reward {index} of group {group} is {value}: rewards must be finite with |r| <= {MAX_ABS_REWARD:e}"
    )]
    BadReward {
        group: usize,
        index: usize,
        value: f64,
    },

    #[error(
        "group {group} has mean reward {mean}: scale_rewards = \"mean\" (MaxRL) divides by the group mean, \
         so rewards must not average below 0 (it is meant for success rewards in [0, 1])"
    )]
    NegativeMeanReward { group: usize, mean: f64 },

    #[error("VESPO takes the rollout correction's token ratios into its sequence weight: a sequence-level correction mode cannot be used with it")]
    VespoSequenceCorrection,

    #[error("`eps` must be finite and >= 0, got {0}")]
    BadEps(f64),

    #[error("estimator `{estimator}` needs at least {min} completions per group, but group {group} has {size}")]
    GroupTooSmall {
        estimator: &'static str,
        group: usize,
        size: usize,
        min: usize,
    },

    #[error("`pruning_rate` must be in [0, 1), got {0}")]
    BadPruningRate(f64),

    #[error(
        "pruning rate {pruning_rate} keeps floor({total} * (1 - {pruning_rate})) = 0 of {total} completions{context}; \
         lower the rate or generate more completions"
    )]
    NothingKept {
        total: usize,
        pruning_rate: f64,
        context: String,
    },

    #[error("`m` = {m} is too small for `{strategy}`: it needs m >= {min}")]
    KeepTooFew {
        strategy: &'static str,
        m: usize,
        min: usize,
    },

    #[error("`m` = {m} exceeds the {size} completions of group {group}")]
    KeepTooMany { m: usize, group: usize, size: usize },

    #[error("`pool` must be at least 1 question")]
    ZeroPool,

    #[error(
        "group {group} has {size} completions but group {first} has {expected}: `{strategy}` derives its keep \
         count from the group size G, so all groups must have the same size"
    )]
    UnequalGroups {
        strategy: &'static str,
        first: usize,
        expected: usize,
        group: usize,
        size: usize,
    },

    #[error("`capacity` must be at least 1 completion")]
    ZeroCapacity,

    #[error("the group size G must be at least 1")]
    ZeroGroupSize,

    #[error("the kept completions per question must be at least 1")]
    ZeroKept,

    #[error("{kept} kept completions per question exceed the group size G = {group_size}")]
    KeptExceedsGroup { kept: usize, group_size: usize },

    #[error("capacity {capacity} cannot hold even one question's {kept} kept completions")]
    CapacityTooSmall { capacity: usize, kept: usize },

    #[error("{what} overflows")]
    Overflow { what: &'static str },

    #[error(
        "the Dr.GRPO normaliser must be finite and > 0 (e.g. the max completion length), got {0}"
    )]
    BadNormaliser(f64),

    #[error("the advantages given to a strategy must be shaped like the rewards (one per completion)")]
    AdvantageShape,

    #[error("the loss of {rows} completions of width {width}: a per-token slice has the wrong length")]
    LossShape { rows: usize, width: usize },

    #[error("beta > 0 but no reference log-probs")]
    NoReference,

    #[error("a rollout correction is configured but the completions carry no sampler log-probs")]
    NoRolloutLogprobs,

    #[error("top_entropy_quantile < 1 but no per-token entropies were given")]
    NoEntropy,
}
