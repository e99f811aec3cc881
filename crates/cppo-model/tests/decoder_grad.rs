//! Gradients of the training path: every variable gets one, they match finite differences (f64) and
//! an independent reference forward pass built from candle's primitive ops; a frozen decoder builds no
//! graph at all.

mod decoder_support;

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use cppo_model::decoder::expected_tensors;
use cppo_model::{Decoder, DecoderError};
use decoder_support::{decoder, families, finite_difference, flat, max_diff, pg_dlogp, pg_grads, pg_loss, reference, scalar, tokens, weights};

const ADV: [f64; 3] = [1.0, -0.5, 0.7];

fn sample(vocab: usize) -> (Vec<u32>, Vec<Vec<u32>>) {
    let prompt = tokens(5, vocab, 1);
    let comps = vec![tokens(4, vocab, 2), tokens(1, vocab, 3), tokens(6, vocab, 4)];
    (prompt, comps)
}

fn loss(dec: &Decoder, prompt: &[u32], comps: &[Vec<u32>]) -> Tensor {
    let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
    let out = dec.completion_logprobs(prompt, &refs).unwrap();
    pg_loss(&out.logprobs, &out.mask, &ADV)
}

/// The gradients of `loss` through the decoder's backward pass.
fn grads(dec: &Decoder, prompt: &[u32], comps: &[Vec<u32>]) -> cppo_model::WeightGrads {
    let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
    pg_grads(&dec.completion_logprobs(prompt, &refs).unwrap(), &ADV)
}

#[test]
fn every_variable_gets_a_nonzero_gradient() {
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 7, DType::F32);
        let vars = dec.vars();
        assert_eq!(vars.len(), expected_tensors(&cfg).len(), "{name}: one variable per tensor");
        let (prompt, comps) = sample(cfg.vocab_size);
        let grads = grads(&dec, &prompt, &comps);
        for (vname, v) in &vars {
            let g = grads.get(v).unwrap_or_else(|| panic!("{name}: {vname} got no gradient"));
            assert_eq!(g.dims(), v.dims(), "{name}: {vname} gradient shape");
            let g = flat(g);
            assert!(g.iter().all(|x| x.is_finite()), "{name}: {vname} gradient is not finite");
            assert!(g.iter().any(|x| x.abs() > 1e-7), "{name}: {vname} gradient is zero");
        }
    }
}

/// Coordinates to probe: the largest gradient entry and a few spread over the tensor.
fn probes(g: &[f64], seed: u64) -> Vec<usize> {
    let top = g.iter().enumerate().fold((0, -1.0), |(bi, bv), (i, &x)| if x.abs() > bv { (i, x.abs()) } else { (bi, bv) }).0;
    let mut p: Vec<usize> = tokens(3, g.len(), seed).into_iter().map(|t| t as usize).collect();
    p.push(top);
    p.sort();
    p.dedup();
    p
}

#[test]
fn gradients_match_finite_differences_in_f64() {
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 11, DType::F64);
        let (prompt, comps) = sample(cfg.vocab_size);
        let grads = grads(&dec, &prompt, &comps);
        for (vi, (vname, v)) in dec.vars().iter().enumerate() {
            let g = flat(grads.get(v).unwrap());
            for i in probes(&g, vi as u64) {
                let fd = finite_difference(v, i, 1e-5, &mut || scalar(&loss(&dec, &prompt, &comps)));
                let err = (g[i] - fd).abs();
                assert!(err < 1e-7 * (1.0 + g[i].abs()), "{name}: {vname}[{i}]: backward {} vs finite difference {fd}", g[i]);
            }
        }
    }
}

fn named(dec: &Decoder) -> HashMap<String, Tensor> {
    dec.vars().into_iter().map(|(n, v)| (n, v.as_tensor().clone())).collect()
}

#[test]
fn forward_and_gradients_match_the_reference_implementation() {
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 13, DType::F64);
        let batch = vec![tokens(9, cfg.vocab_size, 5), tokens(9, cfg.vocab_size, 6)];
        let flat_ids: Vec<u32> = batch.iter().flatten().copied().collect();
        let input = Tensor::from_vec(flat_ids, (2, 9), &Device::Cpu).unwrap();
        let ours = dec.forward_logits(&input).unwrap();
        let theirs = reference::logits(&cfg, &named(&dec), &batch);
        assert_eq!(ours.dims(), theirs.dims());
        let err = max_diff(&flat(&ours), &flat(&theirs));
        assert!(err < 1e-10, "{name}: logits differ from the reference by {err}");
        // The tape's gradients (a shared prompt, its completions packed after it) against autograd
        // through the reference, each completion run as its own whole sequence.
        let (prompt, comps) = sample(cfg.vocab_size);
        let g1 = grads(&dec, &prompt, &comps);
        let named = named(&dec);
        let mut total: Option<Tensor> = None;
        for (c, &a) in comps.iter().zip(&ADV) {
            let seq: Vec<u32> = prompt.iter().chain(c).copied().collect();
            let lp = decoder_support::log_softmax(&reference::logits(&cfg, &named, &[seq]).squeeze(0).unwrap());
            for (t, &tok) in c.iter().enumerate() {
                let term = (lp.get(prompt.len() - 1 + t).unwrap().get(tok as usize).unwrap() * a).unwrap();
                total = Some(match total {
                    None => term,
                    Some(s) => (s + term).unwrap(),
                });
            }
        }
        let g2 = total.unwrap().backward().unwrap();
        for (vname, v) in dec.vars() {
            let a = flat(g1.get(&v).unwrap());
            let b = flat(g2.get(named.get(&vname).unwrap()).unwrap());
            let err = max_diff(&a, &b);
            assert!(err < 1e-9, "{name}: {vname} gradient differs from the reference by {err}");
        }
    }
}

#[test]
fn a_frozen_decoder_builds_no_graph() {
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 17, DType::F32);
        let (prompt, comps) = sample(cfg.vocab_size);
        let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
        let trained = dec.completion_logprobs(&prompt, &refs).unwrap();
        assert!(trained.backward.is_some(), "{name}: the trainable decoder must keep its backward pass");
        assert!(!trained.logprobs.track_op(), "{name}: the log-probs are plain values, no autograd graph");
        assert!(!trained.entropy.track_op() && !trained.mask.track_op());
        for frozen in [dec.frozen_copy().unwrap(), Decoder::new(&cfg, &weights(&cfg, 17), false, &Device::Cpu).unwrap()] {
            assert!(frozen.vars().is_empty() && !frozen.is_trainable());
            let out = frozen.completion_logprobs(&prompt, &refs).unwrap();
            assert!(out.backward.is_none() && !out.logprobs.track_op(), "{name}: a frozen decoder kept a backward pass");
            let ids = Tensor::from_slice(&prompt, (1, prompt.len()), &Device::Cpu).unwrap();
            assert!(!frozen.forward_logits(&ids).unwrap().track_op());
            assert!(max_diff(&flat(&out.logprobs), &flat(&trained.logprobs)) < 1e-6, "{name}: frozen copy differs");
        }
    }
}

#[test]
fn a_frozen_copy_does_not_follow_later_updates() {
    let (_, cfg) = &families()[0];
    let dec = decoder(cfg, 19, DType::F32);
    let frozen = dec.frozen_copy().unwrap();
    let (prompt, comps) = sample(cfg.vocab_size);
    let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
    let before = flat(&frozen.completion_logprobs(&prompt, &refs).unwrap().logprobs);
    for (_, v) in dec.vars() {
        v.set(&(v.as_tensor() * 1.5).unwrap()).unwrap();
    }
    let after = flat(&frozen.completion_logprobs(&prompt, &refs).unwrap().logprobs);
    let moved = flat(&dec.completion_logprobs(&prompt, &refs).unwrap().logprobs);
    assert_eq!(before, after, "the frozen copy changed when the policy's variables did");
    assert!(max_diff(&before, &moved) > 1e-3, "updating the variables did not change the policy");
}

#[test]
fn weights_round_trip_under_hugging_face_names() {
    for (name, cfg) in families() {
        let w = weights(&cfg, 23);
        let dec = Decoder::new(&cfg, &w, true, &Device::Cpu).unwrap();
        let names: Vec<String> = dec.vars().into_iter().map(|(n, _)| n).collect();
        let expected: Vec<String> = expected_tensors(&cfg).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, expected, "{name}: variable order");
        let out = dec.to_weights().unwrap();
        assert_eq!(out.tensors.contains_key("lm_head.weight"), !cfg.tie_word_embeddings, "{name}: lm_head presence");
        for (n, t) in &w.tensors {
            assert_eq!(flat(t), flat(out.get(n).unwrap()), "{name}: {n} changed in the round trip");
        }
        // Later updates of the variables must not leak into weights already handed out.
        let (_, v0) = &dec.vars()[0];
        v0.set(&v0.zeros_like().unwrap()).unwrap();
        assert_eq!(flat(&w.tensors["model.embed_tokens.weight"]), flat(out.get("model.embed_tokens.weight").unwrap()));
    }
}

#[test]
fn bad_weights_are_reported_by_name() {
    let (_, cfg) = &families()[2];
    let mut w = weights(cfg, 29);
    w.tensors.remove("model.layers.1.self_attn.k_proj.bias");
    match Decoder::new(cfg, &w, false, &Device::Cpu) {
        Err(DecoderError::MissingTensor { name }) => assert_eq!(name, "model.layers.1.self_attn.k_proj.bias"),
        other => panic!("expected a missing-tensor error, got {other:?}"),
    }
    let mut w = weights(cfg, 29);
    w.insert("model.layers.0.mlp.up_proj.weight", Tensor::zeros((3, 3), DType::F32, &Device::Cpu).unwrap());
    let err = Decoder::new(cfg, &w, false, &Device::Cpu).unwrap_err();
    assert!(err.to_string().contains("model.layers.0.mlp.up_proj.weight"), "{err}");
    let mut bad = cfg.clone();
    bad.num_key_value_heads = 3;
    assert!(matches!(Decoder::new(&bad, &weights(cfg, 29), false, &Device::Cpu), Err(DecoderError::BadConfig(_))));
}

#[test]
fn bf16_weights_load_and_compute_in_f32() {
    let (_, cfg) = &families()[0];
    let mut w = weights(cfg, 31);
    for t in w.tensors.values_mut() {
        *t = t.to_dtype(DType::BF16).unwrap();
    }
    let dec = Decoder::new(cfg, &w, true, &Device::Cpu).unwrap();
    assert_eq!(dec.dtype(), DType::F32);
    let ids = Tensor::from_slice(&tokens(4, cfg.vocab_size, 1), (1, 4), &Device::Cpu).unwrap();
    let logits = dec.forward_logits(&ids).unwrap();
    assert_eq!(logits.dtype(), DType::F32);
    assert!(flat(&logits).iter().all(|x| x.is_finite()));
}

#[test]
fn gradients_accumulate_over_questions_and_repeat_over_backward_calls() {
    let (_, cfg) = &families()[2];
    let dec = decoder(cfg, 37, DType::F64);
    let (p1, c1) = sample(cfg.vocab_size);
    let p2 = tokens(3, cfg.vocab_size, 99);
    let c2 = vec![tokens(2, cfg.vocab_size, 98)];
    let r1: Vec<&[u32]> = c1.iter().map(|c| c.as_slice()).collect();
    let r2: Vec<&[u32]> = c2.iter().map(|c| c.as_slice()).collect();
    let (o1, o2) = (dec.completion_logprobs(&p1, &r1).unwrap(), dec.completion_logprobs(&p2, &r2).unwrap());
    let (b1, b2) = (o1.backward.as_ref().unwrap(), o2.backward.as_ref().unwrap());
    let (d1, d2) = (pg_dlogp(&o1.mask, &ADV[..c1.len()]), pg_dlogp(&o2.mask, &ADV[..c2.len()]));
    // Two uses of the same output (dL/dlogp 1 + 0.5) and two questions in one loss, a tape run twice.
    let d1_both = d1.affine(1.5, 0.0).unwrap();
    let both = |b1: &cppo_model::Backward, b2: &cppo_model::Backward| -> Vec<(String, Vec<f64>)> {
        let (g1, g2) = (b1.run(&d1_both).unwrap(), b2.run(&d2).unwrap());
        dec.vars().iter().map(|(n, v)| (n.clone(), flat(g1.get(v).unwrap()).iter().zip(flat(g2.get(v).unwrap())).map(|(a, b)| a + b).collect())).collect()
    };
    let g = both(b1, b2);
    let g_again = both(b1, b2);
    let (g1, g2) = (b1.run(&d1).unwrap(), b2.run(&d2).unwrap());
    for (((vname, v), (_, g)), (_, g_again)) in dec.vars().into_iter().zip(&g).zip(&g_again) {
        let want: Vec<f64> = flat(g1.get(&v).unwrap()).iter().zip(flat(g2.get(&v).unwrap())).map(|(a, b)| 1.5 * a + b).collect();
        assert!(max_diff(g, &want) < 1e-12, "{vname}: gradients do not add up");
        assert_eq!(g, g_again, "{vname}: a second backward differs");
    }
}

#[test]
fn detached_log_probs_match_and_build_no_graph() {
    let (_, cfg) = &families()[3];
    let dec = decoder(cfg, 41, DType::F32);
    let (prompt, comps) = sample(cfg.vocab_size);
    let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
    let a = dec.completion_logprobs(&prompt, &refs).unwrap();
    let b = dec.completion_logprobs_detached(&prompt, &refs).unwrap();
    assert!(a.backward.is_some() && b.backward.is_none());
    assert_eq!(flat(&a.logprobs), flat(&b.logprobs));
    assert_eq!(flat(&a.entropy), flat(&b.entropy));
}
