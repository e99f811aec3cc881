//! The pure algorithmic core of cppo. Nothing here depends on a tensor library, so it compiles and tests
//! in seconds and every rule can be checked against brute force.
//!
//! - [`advantage`]: the advantage stage: per-group advantages (GRPO, Dr.GRPO, RLOO, REINFORCE++), and
//!   those the kept completions train with;
//! - [`select`]: which completions reach the update (all, CPPO, PODS, ablations, DAPO filter), indices
//!   only;
//! - [`allocate`]: how many questions to sample so the kept completions fill the update;
//! - [`loss`]: the per-completion weight of each token in the batch loss;
//! - [`passk`]: pass@k and avg@n for evaluation.

#![forbid(unsafe_code)]

pub mod advantage;
pub mod chat;
pub mod allocate;
pub mod error;
pub mod gdpo;
pub mod loss;
pub mod passk;
pub mod problem;
pub mod select;

pub use advantage::{Estimator, ScaleRewards, StdKind};
pub use chat::ChatMessage;
pub use allocate::{capacity_for_base, plan, plan_pruned, Plan};
pub use error::{Error, MAX_ABS_REWARD};
pub use loss::Aggregation;
pub use problem::{Problem, Task};
pub use select::{
    drop_uniform, Basis, Kept, KeptGroup, Selection, SelectionConfig, Strategy, Totals, UniformFilter,
};
