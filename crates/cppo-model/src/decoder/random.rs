//! Deterministic random weights, for tests and benchmarks that must not depend on downloads.

use candle_core::{Device, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{expected_tensors, Result};
use cppo_io::config::ModelConfig;
use cppo_io::weights::Weights;

/// How to draw random weights.
#[derive(Clone, Debug, PartialEq)]
pub struct RandomInit {
    /// Standard deviation of every matrix (Hugging Face's `initializer_range`).
    pub std: f64,
    /// Norm weights are `1 + norm_jitter * uniform(-1, 1)`.
    pub norm_jitter: f64,
    /// Standard deviation of the q/k/v biases.
    pub bias_std: f64,
}

impl Default for RandomInit {
    fn default() -> Self {
        RandomInit { std: 0.02, norm_jitter: 0.0, bias_std: 0.0 }
    }
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    // Box-Muller; 1 - u keeps the logarithm finite.
    let u: f64 = 1.0 - rng.gen::<f64>();
    let v: f64 = rng.gen::<f64>();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// f32 weights for every tensor `cfg` needs, drawn from a generator seeded with `seed`.
pub fn random_weights(cfg: &ModelConfig, seed: u64, init: &RandomInit) -> Result<Weights> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut w = Weights::default();
    for (name, shape) in expected_tensors(cfg) {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = if name.ends_with("norm.weight") {
            (0..n).map(|_| (1.0 + init.norm_jitter * (2.0 * rng.gen::<f64>() - 1.0)) as f32).collect()
        } else if name.ends_with(".bias") {
            (0..n).map(|_| (init.bias_std * normal(&mut rng)) as f32).collect()
        } else {
            (0..n).map(|_| (init.std * normal(&mut rng)) as f32).collect()
        };
        w.insert(name, Tensor::from_vec(data, shape, &Device::Cpu)?);
    }
    Ok(w)
}
