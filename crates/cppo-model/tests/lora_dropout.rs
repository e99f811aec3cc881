//! Dropout on the LoRA adapters' inputs (PEFT's `lora_dropout`): the adapters' gradients match finite
//! differences under a fixed mask; p = 0 is exactly no dropout; only training passes drop (detached
//! log-probs, the reference, generation and exact logits do not); the masks follow the seed and the
//! step; and the masks drop elements at rate p and scale the kept ones by 1 / (1 - p).

mod decoder_support;

use candle_core::{DType, Device, Tensor};
use cppo_io::params::LayerParam;
use cppo_io::{ModelConfig, Weights};
use cppo_model::decoder::dropout_multipliers;
use cppo_model::{Decoder, LoraSpec};
use decoder_support::{families, finite_difference, flat, max_diff, pg_grads, pg_loss, scalar, tokens, values, weights};
use proptest::prelude::*;

const ADV: [f64; 3] = [1.0, -0.5, 0.7];

fn spec() -> LoraSpec {
    LoraSpec { r: 2, alpha: 3.0, use_rslora: false, targets: LayerParam::linear().collect() }
}

fn adapters(cfg: &ModelConfig, seed: u64) -> Weights {
    let s = spec();
    let mut w = Weights::default();
    for (i, p) in cfg.lora_params(s.r, &s.targets).into_iter().enumerate() {
        let n: usize = p.shape.iter().product();
        let v: Vec<f64> = values(n, seed * 1000 + i as u64).into_iter().map(|x| 0.4 * x).collect();
        w.insert(p.name, Tensor::from_vec(v, p.shape, &Device::Cpu).unwrap());
    }
    w
}

fn adapted(cfg: &ModelConfig, dtype: DType, trainable: bool) -> Decoder {
    Decoder::new_with_dtype(cfg, &weights(cfg, 5), false, &Device::Cpu, dtype).unwrap().with_lora_weights(spec(), &adapters(cfg, 2), trainable).unwrap()
}

fn sample(vocab: usize) -> (Vec<u32>, Vec<Vec<u32>>) {
    (tokens(5, vocab, 1), vec![tokens(4, vocab, 2), tokens(2, vocab, 3), tokens(6, vocab, 4)])
}

fn loss(dec: &Decoder, cfg: &ModelConfig) -> Tensor {
    let (prompt, comps) = sample(cfg.vocab_size);
    let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
    let out = dec.completion_logprobs(&prompt, &refs).unwrap();
    pg_loss(&out.logprobs, &out.mask, &ADV)
}

/// The gradients of `loss` through the decoder's backward pass (the same forward, then dL/dlogp).
fn grads(dec: &Decoder, cfg: &ModelConfig) -> cppo_model::WeightGrads {
    let (prompt, comps) = sample(cfg.vocab_size);
    let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
    pg_grads(&dec.completion_logprobs(&prompt, &refs).unwrap(), &ADV)
}

fn detached(dec: &Decoder, cfg: &ModelConfig) -> Vec<f64> {
    let (prompt, comps) = sample(cfg.vocab_size);
    let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
    flat(&dec.completion_logprobs_detached(&prompt, &refs).unwrap().logprobs)
}

#[test]
fn adapter_gradients_match_finite_differences_under_a_fixed_mask() {
    for (name, cfg) in families().into_iter().take(3) {
        let plain = adapted(&cfg, DType::F64, true);
        let dec = adapted(&cfg, DType::F64, true).with_lora_dropout(0.3, 17).unwrap();
        // The mask is a function of (seed, step, pass within the step): naming the step fixes it.
        let at_step = || {
            dec.start_dropout_step(4);
            scalar(&loss(&dec, &cfg))
        };
        let l0 = at_step();
        assert_eq!(l0, at_step(), "{name}: the same step gives the same masks");
        assert!((l0 - scalar(&loss(&plain, &cfg))).abs() > 1e-6, "{name}: dropout changes the training loss");
        dec.start_dropout_step(4);
        let grads = grads(&dec, &cfg);
        for (vi, (vname, v)) in dec.vars().iter().enumerate() {
            let g = flat(grads.get(v).unwrap());
            let top = g.iter().enumerate().fold((0, -1.0), |(bi, bv), (i, &x)| if x.abs() > bv { (i, x.abs()) } else { (bi, bv) }).0;
            for i in [top, (vi * 5) % g.len()] {
                let fd = finite_difference(v, i, 1e-5, &mut || {
                    dec.start_dropout_step(4);
                    scalar(&loss(&dec, &cfg))
                });
                assert!((g[i] - fd).abs() < 1e-7 * (1.0 + g[i].abs()), "{name}: {vname}[{i}]: backward {} vs finite difference {fd}", g[i]);
            }
        }
    }
}

#[test]
fn zero_dropout_is_no_dropout_and_only_training_passes_drop() {
    for (name, cfg) in families() {
        let plain = adapted(&cfg, DType::F32, true);
        let zero = adapted(&cfg, DType::F32, true).with_lora_dropout(0.0, 3).unwrap();
        assert_eq!(zero.lora_dropout(), 0.0);
        let (gp, gz) = (grads(&plain, &cfg), grads(&zero, &cfg));
        assert_eq!(scalar(&loss(&plain, &cfg)), scalar(&loss(&zero, &cfg)), "{name}");
        for ((_, a), (_, b)) in plain.vars().iter().zip(zero.vars().iter()) {
            assert_eq!(flat(gp.get(a).unwrap()), flat(gz.get(b).unwrap()), "{name}: p = 0 gradients");
        }
        let half = adapted(&cfg, DType::F32, true).with_lora_dropout(0.5, 3).unwrap();
        assert!(max_diff(&flat(&loss(&half, &cfg)), &flat(&loss(&plain, &cfg))) > 1e-6, "{name}: p = 0.5 drops in training");
        // Detached log-probs (old policy), the reference, exact logits and generation see no dropout.
        assert_eq!(detached(&half, &cfg), detached(&plain, &cfg), "{name}: detached");
        assert_eq!(detached(&half.without_adapters(), &cfg), detached(&plain.without_adapters(), &cfg), "{name}: reference");
        let ids = Tensor::from_vec(tokens(6, cfg.vocab_size, 8), (1, 6), &Device::Cpu).unwrap();
        assert_eq!(flat(&half.forward_logits(&ids).unwrap()), flat(&plain.forward_logits(&ids).unwrap()), "{name}: logits");
        let gen = |d: &Decoder| {
            let mut c = d.new_cache(1, 12).unwrap();
            let mut out = d.prefill_logits(&tokens(5, cfg.vocab_size, 2), &mut c, 0).unwrap();
            out.extend(d.decode_step_logits(&[3], &[0], &mut c).unwrap());
            out
        };
        assert!(gen(&half) == gen(&plain), "{name}: generation");
    }
    let cfg = ModelConfig::tiny(cppo_io::Architecture::Llama);
    let err = adapted(&cfg, DType::F32, true).with_lora_dropout(1.0, 0).unwrap_err().to_string();
    assert!(err.contains("lora.dropout"), "{err}");
    let err = Decoder::new(&cfg, &weights(&cfg, 1), true, &Device::Cpu).unwrap().with_lora_dropout(0.1, 0).unwrap_err().to_string();
    assert!(err.contains("no adapters"), "{err}");
}

#[test]
fn the_masks_follow_the_seed_the_step_and_the_pass() {
    let cfg = ModelConfig::tiny(cppo_io::Architecture::Qwen2);
    let run = |seed: u64, step: u64| {
        let dec = adapted(&cfg, DType::F32, true).with_lora_dropout(0.2, seed).unwrap();
        dec.start_dropout_step(step);
        let a = flat(&loss(&dec, &cfg));
        let b = flat(&loss(&dec, &cfg));
        (a, b)
    };
    let (a, b) = run(1, 7);
    assert_eq!(run(1, 7), (a.clone(), b.clone()), "the same seed and step: the same masks");
    assert_ne!(a, b, "the step's second pass has masks of its own");
    assert_ne!(run(1, 8).0, a, "another step");
    assert_ne!(run(2, 7).0, a, "another seed");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn masks_drop_at_rate_p_and_scale_the_kept(key in any::<u64>(), site in 0u64..4096, p in 0.0f64..0.9) {
        let n = 20_000;
        let m: Vec<f64> = dropout_multipliers(key, site, n, p).collect();
        let dropped = m.iter().filter(|&&x| x == 0.0).count() as f64;
        let keep = 1.0 / (1.0 - p);
        prop_assert!(m.iter().all(|&x| x == 0.0 || x == keep));
        // Binomial(n, p): within 5 standard deviations.
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        prop_assert!((dropped - n as f64 * p).abs() <= 5.0 * sd + 1.0, "dropped {} of {} at p {}", dropped, n, p);
        // Deterministic in (key, site), and another site draws another mask.
        prop_assert_eq!(&m, &dropout_multipliers(key, site, n, p).collect::<Vec<_>>());
        if p > 0.05 {
            prop_assert_ne!(&m, &dropout_multipliers(key, site + 1, n, p).collect::<Vec<_>>());
        }
    }
}
