//! Group advantages: from the rewards of each question's completions to one advantage per completion.
//!
//! Every estimator that uses a group baseline gives exactly 0 to every completion of a group whose rewards
//! are all equal (a group of one included), and no estimator ever returns NaN for valid rewards. Rewards
//! must be finite with |r| <= [`MAX_ABS_REWARD`]; anything else is an error.

use serde::{Deserialize, Serialize};

use crate::error::{Error, MAX_ABS_REWARD};
use crate::select::{Basis, Kept, KeptGroup};

/// The divisor of a standard deviation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StdKind {
    /// Divide by n.
    Population,
    /// Divide by n - 1 (what `torch.std` does by default, hence what the CPPO and TRL code use).
    #[default]
    Bessel,
}

/// What GRPO divides the group-centred rewards by, under TRL's name for the choice (`scale_rewards`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScaleRewards {
    /// The std of the question's group of rewards (GRPO as published; TRL's `"group"`).
    #[default]
    Group,
    /// The std of the raw rewards of the whole batch, every completion of every group (TRL's
    /// `"batch"`). Unlike the REINFORCE++ baseline, which takes the std of the group-centred rewards,
    /// this is the spread of the rewards themselves.
    Batch,
    /// No division: Dr.GRPO's centring (TRL's `"none"`).
    None,
    /// MaxRL (Tajwar et al. 2026, arXiv 2602.02710): the group-centred reward over the group mean,
    /// A_i = (r_i - mean) / (mean + eps). For success rewards in [0, 1] the gradient is then that of the
    /// log of the success probability (maximum likelihood) rather than of the probability. A group whose
    /// mean is negative would flip every sign, so it is an error.
    Mean,
}

/// How a completion's advantage is computed from the rewards. Deserialises from a table whose `kind` is
/// the kebab-case name, e.g. `{ kind = "grpo", std = "bessel", eps = 1e-4 }`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Estimator {
    /// GRPO: A_i = (r_i - mean) / (std + eps), mean and std over the group; with
    /// `scale_rewards = "batch"` the std is that of every raw reward of the batch, with `"none"` there
    /// is no division, with `"mean"` (MaxRL) the divisor is the group mean + eps.
    Grpo {
        #[serde(default)]
        std: StdKind,
        #[serde(default = "default_grpo_eps")]
        eps: f64,
        #[serde(default)]
        scale_rewards: ScaleRewards,
    },
    /// Dr.GRPO: centring only, A_i = r_i - mean.
    DrGrpo,
    /// RLOO: A_i = r_i - (mean of the other G - 1 rewards); needs G >= 2.
    Rloo,
    /// REINFORCE++ (no group baseline): A_i = (r_i - batch mean) / (batch std + eps), over every completion
    /// of the batch. A group of equal rewards gets 0 only if the whole batch is equal.
    ReinforcePlusPlus {
        #[serde(default = "population")]
        std: StdKind,
        #[serde(default = "default_reinforce_eps")]
        eps: f64,
    },
    /// REINFORCE++-baseline: c_i = r_i - group mean, then A_i = c_i / (std_batch(c) + eps), the std taken
    /// over every centred reward of the batch about their mean, which is exactly 0.
    ReinforcePlusPlusBaseline {
        #[serde(default = "population")]
        std: StdKind,
        #[serde(default = "default_reinforce_eps")]
        eps: f64,
    },
}

/// The CPPO code adds 1e-4 to the group std.
pub const DEFAULT_GRPO_EPS: f64 = 1e-4;
/// OpenRLHF's REINFORCE++ whitening uses 1e-8.
pub const DEFAULT_REINFORCE_EPS: f64 = 1e-8;

fn default_grpo_eps() -> f64 {
    DEFAULT_GRPO_EPS
}
fn default_reinforce_eps() -> f64 {
    DEFAULT_REINFORCE_EPS
}
fn population() -> StdKind {
    StdKind::Population
}

impl Default for Estimator {
    fn default() -> Self {
        Estimator::Grpo {
            std: StdKind::Bessel,
            eps: DEFAULT_GRPO_EPS,
            scale_rewards: ScaleRewards::Group,
        }
    }
}

impl Estimator {
    /// The kebab-case name used in configs and error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Estimator::Grpo { .. } => "grpo",
            Estimator::DrGrpo => "dr-grpo",
            Estimator::Rloo => "rloo",
            Estimator::ReinforcePlusPlus { .. } => "reinforce-plus-plus",
            Estimator::ReinforcePlusPlusBaseline { .. } => "reinforce-plus-plus-baseline",
        }
    }

    /// Checks the parameters alone (no rewards needed).
    pub fn validate(&self) -> Result<(), Error> {
        match *self {
            Estimator::Grpo { eps, .. }
            | Estimator::ReinforcePlusPlus { eps, .. }
            | Estimator::ReinforcePlusPlusBaseline { eps, .. } => {
                if eps.is_finite() && eps >= 0.0 {
                    Ok(())
                } else {
                    Err(Error::BadEps(eps))
                }
            }
            Estimator::DrGrpo | Estimator::Rloo => Ok(()),
        }
    }

    /// GRPO scaled by the group std (`scale_rewards = "group"`), with this std and eps.
    pub fn grpo(std: StdKind, eps: f64) -> Self {
        Estimator::Grpo { std, eps, scale_rewards: ScaleRewards::Group }
    }

    /// One advantage per reward, shaped like `groups`. Batch-level estimators (the REINFORCE++ pair, GRPO
    /// with `scale_rewards = "batch"`) treat `groups` as the whole batch.
    pub fn advantages(&self, groups: &[Vec<f64>]) -> Result<Vec<Vec<f64>>, Error> {
        self.validate()?;
        check_rewards(groups)?;
        Ok(match *self {
            Estimator::Grpo { std, eps, scale_rewards: ScaleRewards::Group } => groups
                .iter()
                .map(|g| {
                    let mut a = centred(g, mean(g));
                    standardise(&mut a, divisor(g.len(), std), eps);
                    a
                })
                .collect(),
            Estimator::Grpo { std, eps, scale_rewards: ScaleRewards::Batch } => {
                let flat: Vec<f64> = groups.iter().flatten().copied().collect();
                let spread = centred(&flat, mean(&flat));
                let centred: Vec<Vec<f64>> = groups.iter().map(|g| centred(g, mean(g))).collect();
                scale_by_std_of(centred, &spread, divisor(flat.len(), std), eps)
            }
            Estimator::Grpo { scale_rewards: ScaleRewards::None, .. } | Estimator::DrGrpo => {
                groups.iter().map(|g| centred(g, mean(g))).collect()
            }
            Estimator::Grpo { eps, scale_rewards: ScaleRewards::Mean, .. } => groups
                .iter()
                .enumerate()
                .map(|(group, g)| {
                    let m = mean(g);
                    if m < 0.0 {
                        return Err(Error::NegativeMeanReward { group, mean: m });
                    }
                    // A mean of exactly 0 is a group of zeros for success rewards; with mixed signs it
                    // has no maximum-likelihood reading, so it carries no signal either way.
                    if m == 0.0 {
                        return Ok(vec![0.0; g.len()]);
                    }
                    Ok(centred(g, m).into_iter().map(|c| c / (m + eps)).collect())
                })
                .collect::<Result<_, _>>()?,
            Estimator::Rloo => {
                if let Some((group, g)) = groups.iter().enumerate().find(|(_, g)| g.len() < 2) {
                    return Err(Error::GroupTooSmall {
                        estimator: self.name(),
                        group,
                        size: g.len(),
                        min: 2,
                    });
                }
                groups.iter().map(|g| leave_one_out(g)).collect()
            }
            Estimator::ReinforcePlusPlus { std, eps } => {
                let flat: Vec<f64> = groups.iter().flatten().copied().collect();
                let mut a = centred(&flat, mean(&flat));
                standardise(&mut a, divisor(flat.len(), std), eps);
                reshape(&a, groups)
            }
            Estimator::ReinforcePlusPlusBaseline { std, eps } => {
                let mut a: Vec<f64> = groups.iter().flat_map(|g| centred(g, mean(g))).collect();
                let d = divisor(a.len(), std);
                standardise(&mut a, d, eps);
                reshape(&a, groups)
            }
        })
    }
}

/// The advantage stage's second half: the advantage each kept completion trains with, from the
/// strategy's `basis`. `FullGroup` takes the full-group `advantages` at the kept indices; `KeptSubset`
/// runs the estimator again on each group's kept rewards only (PODS). `kept[i].group` indexes
/// `rewards` and `advantages`, and errors name that index.
pub fn of_kept(
    estimator: &Estimator,
    basis: Basis,
    rewards: &[Vec<f64>],
    advantages: &[Vec<f64>],
    kept: Vec<Kept>,
) -> Result<Vec<KeptGroup>, Error> {
    let advantages: Vec<Vec<f64>> = match basis {
        Basis::FullGroup => kept
            .iter()
            .map(|k| k.kept.iter().map(|&i| advantages[k.group][i]).collect())
            .collect(),
        Basis::KeptSubset => {
            let subsets: Vec<Vec<f64>> = kept
                .iter()
                .map(|k| k.kept.iter().map(|&i| rewards[k.group][i]).collect())
                .collect();
            let ids: Vec<usize> = kept.iter().map(|k| k.group).collect();
            estimator
                .advantages(&subsets)
                .map_err(|e| crate::select::remap(e, &ids))?
        }
    };
    Ok(kept
        .into_iter()
        .zip(advantages)
        .map(|(k, advantages)| KeptGroup {
            group: k.group,
            kept: k.kept,
            advantages,
        })
        .collect())
}

/// Rejects empty groups and non-finite or absurdly large rewards, naming the first offender.
pub fn check_rewards(groups: &[Vec<f64>]) -> Result<(), Error> {
    for (group, g) in groups.iter().enumerate() {
        if g.is_empty() {
            return Err(Error::EmptyGroup { group });
        }
        if let Some((index, &value)) = g
            .iter()
            .enumerate()
            .find(|(_, r)| !(r.is_finite() && r.abs() <= MAX_ABS_REWARD))
        {
            return Err(Error::BadReward {
                group,
                index,
                value,
            });
        }
    }
    Ok(())
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn all_equal(xs: &[f64]) -> bool {
    xs.iter().all(|&x| x == xs[0])
}

/// `x - centre`, except that equal values give exact zeros: the rounded mean of equal values can differ
/// from them by an ulp, and a uniform group must carry no signal at all.
fn centred(xs: &[f64], centre: f64) -> Vec<f64> {
    if xs.is_empty() || all_equal(xs) {
        return vec![0.0; xs.len()];
    }
    xs.iter().map(|&x| x - centre).collect()
}

fn divisor(n: usize, std: StdKind) -> f64 {
    match std {
        StdKind::Population => n as f64,
        StdKind::Bessel => n.saturating_sub(1) as f64,
    }
}

/// Divides values already centred on 0 by (std + eps). The std is computed on values scaled by their
/// largest magnitude so that tiny spreads cannot underflow to a zero std (and a division by zero).
fn standardise(c: &mut [f64], divisor: f64, eps: f64) {
    let scale = c.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if scale == 0.0 || divisor <= 0.0 {
        c.iter_mut().for_each(|x| *x = 0.0);
        return;
    }
    c.iter_mut().for_each(|x| *x /= scale);
    let std = (c.iter().map(|x| x * x).sum::<f64>() / divisor).sqrt();
    let denom = std + eps / scale;
    c.iter_mut().for_each(|x| *x /= denom);
}

/// Divides every value of `values` by (std + eps), the std that of `spread` (values centred on 0 about
/// their mean), computed on values scaled by their largest magnitude as `standardise` does. No spread
/// at all gives zeros.
fn scale_by_std_of(values: Vec<Vec<f64>>, spread: &[f64], divisor: f64, eps: f64) -> Vec<Vec<f64>> {
    let scale = spread.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if scale == 0.0 || divisor <= 0.0 {
        return values.iter().map(|g| vec![0.0; g.len()]).collect();
    }
    let std = (spread.iter().map(|x| (x / scale) * (x / scale)).sum::<f64>() / divisor).sqrt();
    let denom = std + eps / scale;
    values.into_iter().map(|g| g.into_iter().map(|x| x / scale / denom).collect()).collect()
}

fn leave_one_out(g: &[f64]) -> Vec<f64> {
    if all_equal(g) {
        return vec![0.0; g.len()];
    }
    let total: f64 = g.iter().sum();
    let others = (g.len() - 1) as f64;
    g.iter().map(|&r| r - (total - r) / others).collect()
}

fn reshape(flat: &[f64], like: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let mut rest = flat;
    like.iter()
        .map(|g| {
            let (head, tail) = rest.split_at(g.len());
            rest = tail;
            head.to_vec()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpo_by_hand() {
        // mean 0.5, Bessel std sqrt(1/3).
        let a = Estimator::default()
            .advantages(&[vec![1.0, 0.0, 0.0, 1.0]])
            .unwrap();
        let want = 0.5 / ((1.0f64 / 3.0).sqrt() + 1e-4);
        assert!(
            (a[0][0] - want).abs() < 1e-12 && (a[0][1] + want).abs() < 1e-12,
            "{a:?}"
        );
    }

    /// MaxRL on success rewards: with k of n right, a success gets (1 - k/n) / (k/n + eps) and a failure
    /// -(k/n) / (k/n + eps); the advantages of a group sum to 0, and the rarer the success the larger its
    /// weight (1/p - 1 with eps = 0), unlike the std scaling, which is symmetric in p and 1 - p.
    #[test]
    fn maxrl_divides_by_the_group_mean() {
        let est = |eps| Estimator::Grpo { std: StdKind::Bessel, eps, scale_rewards: ScaleRewards::Mean };
        for n in 2..9usize {
            for k in 0..=n {
                let g: Vec<f64> = (0..n).map(|i| if i < k { 1.0 } else { 0.0 }).collect();
                for eps in [0.0, 1e-4] {
                    let a = est(eps).advantages(std::slice::from_ref(&g)).unwrap();
                    let p = k as f64 / n as f64;
                    for (i, &ai) in a[0].iter().enumerate() {
                        let want = if k == 0 || k == n { 0.0 } else if i < k { (1.0 - p) / (p + eps) } else { -p / (p + eps) };
                        assert!((ai - want).abs() < 1e-12, "n {n} k {k} eps {eps}: {ai} vs {want}");
                    }
                    assert!(a[0].iter().sum::<f64>().abs() < 1e-9);
                }
            }
        }
        // Scaling every reward leaves MaxRL's advantages unchanged (up to eps).
        let a = est(0.0).advantages(&[vec![0.2, 0.5, 0.9]]).unwrap();
        let b = est(0.0).advantages(&[vec![2.0, 5.0, 9.0]]).unwrap();
        for (x, y) in a[0].iter().zip(&b[0]) {
            assert!((x - y).abs() < 1e-12);
        }
        assert_eq!(est(0.0).advantages(&[vec![-1.0, 1.0]]).unwrap(), vec![vec![0.0, 0.0]]);
        let e = est(1e-4).advantages(&[vec![1.0, 0.0], vec![-1.0, 0.5]]).unwrap_err();
        assert_eq!(e, Error::NegativeMeanReward { group: 1, mean: -0.25 });
        assert!(e.to_string().contains("scale_rewards = \"mean\""), "{e}");
    }

    #[test]
    fn uniform_and_singleton_groups_are_exactly_zero() {
        for est in [
            Estimator::default(),
            Estimator::DrGrpo,
            Estimator::grpo(StdKind::Population, 0.0),
            Estimator::ReinforcePlusPlusBaseline {
                std: StdKind::Bessel,
                eps: 0.0,
            },
        ] {
            let a = est
                .advantages(&[vec![0.1; 3], vec![7.0], vec![0.0, 1.0]])
                .unwrap();
            assert_eq!(a[0], vec![0.0; 3], "{est:?}");
            assert_eq!(a[1], vec![0.0], "{est:?}");
            assert!(a[2][0] < 0.0 && a[2][1] > 0.0, "{est:?}");
        }
    }

    #[test]
    fn errors() {
        let e = Estimator::default();
        assert_eq!(
            e.advantages(&[vec![1.0], vec![]]),
            Err(Error::EmptyGroup { group: 1 })
        );
        assert!(matches!(
            e.advantages(&[vec![1.0, f64::NAN]]),
            Err(Error::BadReward {
                group: 0,
                index: 1,
                ..
            })
        ));
        assert!(matches!(
            e.advantages(&[vec![f64::INFINITY]]),
            Err(Error::BadReward { .. })
        ));
        assert!(matches!(
            e.advantages(&[vec![1e101]]),
            Err(Error::BadReward { .. })
        ));
        assert_eq!(
            Estimator::Rloo.advantages(&[vec![1.0, 0.0], vec![1.0]]),
            Err(Error::GroupTooSmall {
                estimator: "rloo",
                group: 1,
                size: 1,
                min: 2
            })
        );
        for eps in [-1e-4, f64::NAN, f64::INFINITY] {
            let bad = Estimator::grpo(StdKind::Bessel, eps);
            assert!(matches!(
                bad.advantages(&[vec![1.0]]),
                Err(Error::BadEps(_))
            ));
        }
        let msg = e
            .advantages(&[vec![1.0, f64::NAN]])
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("reward 1 of group 0") && msg.contains("NaN"),
            "{msg}"
        );
    }

    #[test]
    fn deserialises_from_config_tables() {
        let e: Estimator = serde_json::from_str(r#"{"kind": "grpo"}"#).unwrap();
        assert_eq!(e, Estimator::default());
        let e: Estimator =
            serde_json::from_str(r#"{"kind": "grpo", "std": "population", "eps": 0}"#).unwrap();
        assert_eq!(
            e,
            Estimator::grpo(StdKind::Population, 0.0)
        );
        let e: Estimator =
            serde_json::from_str(r#"{"kind": "reinforce-plus-plus-baseline"}"#).unwrap();
        assert_eq!(
            e,
            Estimator::ReinforcePlusPlusBaseline {
                std: StdKind::Population,
                eps: 1e-8
            }
        );
        let e: Estimator = serde_json::from_str(r#"{"kind": "grpo", "scale_rewards": "batch"}"#).unwrap();
        assert_eq!(
            e,
            Estimator::Grpo {
                std: StdKind::Bessel,
                eps: DEFAULT_GRPO_EPS,
                scale_rewards: ScaleRewards::Batch
            }
        );
        assert!(serde_json::from_str::<Estimator>(r#"{"kind": "grpo", "scale_rewards": "global"}"#).is_err());
        assert!(serde_json::from_str::<Estimator>(r#"{"kind": "grpo", "epsilon": 1}"#).is_err());
        assert!(serde_json::from_str::<Estimator>(r#"{"kind": "ppo"}"#).is_err());
    }
}
