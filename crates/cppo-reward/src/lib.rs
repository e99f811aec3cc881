//! Verifiable rewards for cppo: GSM8K and MATH answer extraction and equivalence, the CPPO format
//! reward, weighted combinations, and the library side of `cppo grade`.
//!
//! Every grader is total: any string in, a [`Score`] out, in bounded time ([`limits`]).

#![forbid(unsafe_code)]

pub mod brevity;
mod error;
pub mod external;
pub mod factory;
pub mod format;
pub mod grade;
mod grade_line;
pub mod gsm8k;
pub mod limits;
pub mod math;
pub mod number;
pub mod scan;
mod score;
mod weighted;

pub use error::RewardError;
pub use external::{CommandSpec, ExternalError, ExternalRewards, FunctionSpec, Sample, Style, WorkerOptions};
pub use factory::{build_weighted, reward_by_name, AccuracyReward, RewardSpec, REWARD_NAMES};
pub use brevity::BrevityReward;
pub use format::FormatReward;
pub use gsm8k::Gsm8kReward;
pub use math::MathReward;
pub use score::{Reward, Score};
pub use weighted::Weighted;

/// Text shown in a reason: long answers are cut, so a 1 MB completion does not make a 1 MB reason.
pub(crate) fn clip(s: &str) -> std::borrow::Cow<'_, str> {
    const SHOWN: usize = 160;
    match s.char_indices().nth(SHOWN) {
        None => s.into(),
        Some((cut, _)) => format!("{}... ({} bytes)", &s[..cut], s.len()).into(),
    }
}
