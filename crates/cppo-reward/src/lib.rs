//! Verifiable rewards for cppo: GSM8K and MATH answer extraction and equivalence, the CPPO format
//! reward, weighted combinations, and the library side of `cppo grade`.
//!
//! Every grader is total: any string in, a [`Score`] out, in bounded time ([`limits`]).

mod error;
pub mod factory;
pub mod format;
pub mod grade;
pub mod gsm8k;
pub mod limits;
pub mod math;
pub mod number;
pub mod scan;
mod score;
mod weighted;

pub use error::RewardError;
pub use factory::{build_weighted, reward_by_name, AccuracyReward, RewardSpec, REWARD_NAMES};
pub use format::FormatReward;
pub use gsm8k::Gsm8kReward;
pub use math::MathReward;
pub use score::{Reward, Score};
pub use weighted::Weighted;
