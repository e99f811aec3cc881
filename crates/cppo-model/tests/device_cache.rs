//! The generation path on a caller's backend (`prefill_on`, `copy_row_on`, `decode_on` over a
//! `DeviceCache`) is the host path on another cache: on the CPU backend it gives the host path's
//! logits bit for bit, and the same misuse gives the same error on both caches.

mod decoder_support;

use candle_core::DType;
use cppo_kernels::cpu::Cpu;
use cppo_model::{Decoder, DeviceCache, KvCache};
use decoder_support::{decoder, families, tokens};

fn err<T: std::fmt::Debug>(r: cppo_model::decoder::Result<T>) -> String {
    r.expect_err("an error").to_string()
}

#[test]
fn on_the_cpu_backend_the_device_path_gives_the_host_paths_logits_exactly() {
    let b = Cpu::<f32>::new();
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 4, DType::F32);
        let w = dec.upload_weights(&b).unwrap();
        let (mut host, mut dev) = (dec.new_cache(3, 16).unwrap(), dec.new_device_cache(&b, 3, 16).unwrap());
        let prompt = tokens(5, cfg.vocab_size, 2);
        let a = dec.prefill_logits(&prompt, &mut host, 0).unwrap();
        let d = dec.prefill_on(&b, &w, None, &prompt, &mut dev, 0).unwrap();
        assert_eq!(a, d, "{name}: prefill");
        dec.copy_row(&mut host, 0, &[2]).unwrap();
        dec.copy_row_on(&b, &mut dev, 0, &[2]).unwrap();
        dec.prefill_logits(&prompt[..2], &mut host, 1).unwrap();
        dec.prefill_on(&b, &w, None, &prompt[..2], &mut dev, 1).unwrap();
        for step in 0..4u32 {
            let (toks, rows) = ([step + 3, 7, step], [2, 0, 1]);
            let a = dec.decode_step_logits(&toks, &rows, &mut host).unwrap();
            let d = dec.decode_on(&b, &w, None, &toks, &rows, &mut dev).unwrap();
            assert_eq!(a, d, "{name}: decode step {step}");
        }
        assert_eq!(host.lens(), dev.lens());
        assert_eq!(dev.lens(), &[9, 6, 9]);
    }
}

/// A device copy of the bf16 snapshot reads what the host snapshot reads.
#[test]
fn the_backends_bf16_copies_give_the_host_snapshots_logits() {
    let b = Cpu::<f32>::new();
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 6, DType::F32);
        let w = dec.upload_weights(&b).unwrap();
        let half = dec.device_rollout_weights(&b, &w).unwrap();
        let snap = dec.rollout_weights().unwrap();
        let (mut host, mut dev) = (dec.new_cache(1, 8).unwrap(), dec.new_device_cache(&b, 1, 8).unwrap());
        let prompt = tokens(4, cfg.vocab_size, 3);
        let a = dec.prefill_logits_with(&prompt, &mut host, 0, Some(&snap)).unwrap();
        let d = dec.prefill_on(&b, &w, Some(&half), &prompt, &mut dev, 0).unwrap();
        assert_eq!(a, d, "{name}");
        let f = dec.prefill_on(&b, &w, None, &prompt, &mut dec.new_device_cache(&b, 1, 8).unwrap(), 0).unwrap();
        assert_ne!(f, d, "{name}: the bf16 copies were not read");
    }
}

#[test]
fn the_same_misuse_gives_the_same_error_on_both_caches() {
    let b = Cpu::<f32>::new();
    let (_, cfg) = families().into_iter().next().unwrap();
    let dec: Decoder = decoder(&cfg, 1, DType::F32);
    let w = dec.upload_weights(&b).unwrap();
    let fresh = || -> (KvCache, DeviceCache<Cpu<f32>>) { (dec.new_cache(2, 4).unwrap(), dec.new_device_cache(&b, 2, 4).unwrap()) };
    // A row full after 4 positions.
    let (mut h, mut d) = fresh();
    dec.prefill_logits(&[1, 2, 3, 4], &mut h, 0).unwrap();
    dec.prefill_on(&b, &w, None, &[1, 2, 3, 4], &mut d, 0).unwrap();
    let (eh, ed) = (err(dec.decode_step_logits(&[5], &[0], &mut h)), err(dec.decode_on(&b, &w, None, &[5], &[0], &mut d)));
    assert!(eh.contains("row 0 is full (4 positions)"), "{eh}");
    assert_eq!(eh, ed);
    let (eh, ed) = (err(dec.prefill_logits(&[1, 2, 3, 4, 5], &mut h, 1)), err(dec.prefill_on(&b, &w, None, &[1, 2, 3, 4, 5], &mut d, 1)));
    assert!(eh.contains("row 1 is full"), "{eh}");
    assert_eq!(eh, ed);
    // A row given twice, a row out of range, tokens and rows that do not pair, an empty prompt, a token
    // outside the vocabulary, a bad copy.
    let (mut h, mut d) = fresh();
    dec.prefill_logits(&[1], &mut h, 0).unwrap();
    dec.prefill_on(&b, &w, None, &[1], &mut d, 0).unwrap();
    let cases: Vec<(String, String)> = vec![
        (err(dec.decode_step_logits(&[1, 2], &[0, 0], &mut h)), err(dec.decode_on(&b, &w, None, &[1, 2], &[0, 0], &mut d))),
        (err(dec.decode_step_logits(&[1], &[2], &mut h)), err(dec.decode_on(&b, &w, None, &[1], &[2], &mut d))),
        (err(dec.decode_step_logits(&[1, 2], &[0], &mut h)), err(dec.decode_on(&b, &w, None, &[1, 2], &[0], &mut d))),
        (err(dec.prefill_logits(&[], &mut h, 1)), err(dec.prefill_on(&b, &w, None, &[], &mut d, 1))),
        (err(dec.prefill_logits(&[cfg.vocab_size as u32], &mut h, 1)), err(dec.prefill_on(&b, &w, None, &[cfg.vocab_size as u32], &mut d, 1))),
        (err(dec.copy_row(&mut h, 0, &[5])), err(dec.copy_row_on(&b, &mut d, 0, &[5]))),
    ];
    assert!(cases[0].0.contains("row 0 given twice"), "{}", cases[0].0);
    assert!(cases[1].0.contains("row 2 out of range for 2 rows"), "{}", cases[1].0);
    for (eh, ed) in &cases {
        assert_eq!(eh, ed);
    }
    // Nothing failed half-way: the lengths are as before the misuse.
    assert_eq!(h.lens(), &[1, 0]);
    assert_eq!(d.lens(), &[1, 0]);
    // Weights of another model.
    let other = decoder(&cppo_io::ModelConfig { num_hidden_layers: 1, ..cfg.clone() }, 1, DType::F32);
    let ow = other.upload_weights(&b).unwrap();
    assert!(err(dec.decode_on(&b, &ow, None, &[1], &[0], &mut d)).contains("backend weights for a model of"));
}

/// A backend that keeps caches only in its `T` (the CPU's) gives an f32 cache when a bf16 one is asked for.
#[test]
fn a_bf16_cache_falls_back_to_the_backends_own_type() {
    let b = Cpu::<f32>::new();
    let (_, cfg) = families().remove(0);
    let dec = decoder(&cfg, 4, DType::F32);
    let (half, full) = (dec.new_device_cache_bf16(&b, 2, 8).unwrap(), dec.new_device_cache(&b, 2, 8).unwrap());
    assert!(!half.is_bf16() && !full.is_bf16());
    assert_eq!(half.bytes(), full.bytes());
    assert_eq!(full.bytes(), 2 * cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * 8 * cfg.head_dim * 4);
}
