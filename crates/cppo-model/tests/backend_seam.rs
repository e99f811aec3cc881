//! The decoder run by the reference backend (plain loops summing in f64) agrees with the CPU backend on
//! every path: the training tape's log-probs and weight gradients (grouped questions, shared prompts,
//! exact and bf16 products), plain logits, and the generation path's prefill, cache copies and decode
//! steps, from f32 weights and from a bf16 rollout snapshot. The seam is proven by two implementations.

mod decoder_support;

use candle_core::{DType, Device, Tensor};
use cppo_kernels::Precision;
use cppo_model::decoder::BackendKind;
use cppo_model::Decoder;
use decoder_support::{decoder, families, flat, max_diff, pg_grads, tokens};

fn both(dec: &Decoder) -> (Decoder, Decoder) {
    (dec.clone().with_backend(BackendKind::Cpu), dec.clone().with_backend(BackendKind::Reference))
}

/// Largest difference relative to the larger of `b`'s scale and 1.
fn rel(a: &[f64], b: &[f64]) -> f64 {
    max_diff(a, b) / b.iter().fold(1.0f64, |m, x| m.max(x.abs()))
}

#[test]
fn the_training_path_agrees_in_log_probs_and_gradients() {
    for (name, cfg) in families() {
        for (dtype, mp, tol) in [(DType::F64, Precision::F32, 1e-10), (DType::F32, Precision::F32, 1e-5), (DType::F32, Precision::Bf16, 1e-4)] {
            let dec = decoder(&cfg, 5, dtype).with_matmul_precision(mp);
            let (cpu, rf) = both(&dec);
            assert_eq!((cpu.backend(), rf.backend()), (BackendKind::Cpu, BackendKind::Reference));
            let (p1, p2) = (tokens(6, cfg.vocab_size, 1), tokens(3, cfg.vocab_size, 2));
            let c1 = [tokens(4, cfg.vocab_size, 3), tokens(1, cfg.vocab_size, 4), tokens(7, cfg.vocab_size, 5)];
            let c2 = [tokens(2, cfg.vocab_size, 6)];
            let r1: Vec<&[u32]> = c1.iter().map(|c| c.as_slice()).collect();
            let r2: Vec<&[u32]> = c2.iter().map(|c| c.as_slice()).collect();
            let groups = [(p1.as_slice(), r1.as_slice()), (p2.as_slice(), r2.as_slice())];
            let (a, b) = (cpu.grouped_completion_logprobs(&groups).unwrap(), rf.grouped_completion_logprobs(&groups).unwrap());
            let err = rel(&flat(&a.logprobs), &flat(&b.logprobs));
            assert!(err < tol, "{name} {dtype:?} {mp:?}: log-probs differ by {err}");
            assert!(rel(&flat(&a.entropy), &flat(&b.entropy)) < tol, "{name} {dtype:?} {mp:?}: entropies differ");
            let adv = [0.7, -1.1, 0.4, 0.9];
            let (ga, gb) = (pg_grads(&a, &adv), pg_grads(&b, &adv));
            for (vname, v) in dec.vars() {
                let (x, y) = (flat(ga.get(&v).unwrap()), flat(gb.get(&v).unwrap()));
                // bf16 products: the two backends round the same operands, but sum them in other orders.
                let err = rel(&x, &y);
                assert!(err < 10.0 * tol, "{name} {dtype:?} {mp:?}: {vname} gradients differ by {err}");
            }
            let ids = Tensor::from_vec(tokens(10, cfg.vocab_size, 9), (2, 5), &Device::Cpu).unwrap();
            let err = rel(&flat(&cpu.forward_logits(&ids).unwrap()), &flat(&rf.forward_logits(&ids).unwrap()));
            assert!(err < tol, "{name} {dtype:?} {mp:?}: logits differ by {err}");
        }
    }
}

#[test]
fn the_generation_path_agrees_with_and_without_a_bf16_snapshot() {
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 8, DType::F32);
        let (cpu, rf) = both(&dec);
        let half = dec.rollout_weights().unwrap();
        for snapshot in [None, Some(&half)] {
            let run = |d: &Decoder| {
                let mut cache = d.new_cache(4, 24).unwrap();
                let mut out = d.prefill_logits_with(&tokens(9, cfg.vocab_size, 1), &mut cache, 0, snapshot).unwrap();
                d.copy_row(&mut cache, 0, &[1, 3]).unwrap();
                out.extend(d.prefill_logits_with(&tokens(2, cfg.vocab_size, 2), &mut cache, 2, snapshot).unwrap());
                for s in 0..4u64 {
                    let rows = [0, 1, 2, 3];
                    let toks = tokens(4, cfg.vocab_size, 10 + s);
                    out.extend(d.decode_step_logits_with(&toks, &rows, &mut cache, snapshot).unwrap());
                }
                out.into_iter().map(f64::from).collect::<Vec<f64>>()
            };
            let (a, b) = (run(&cpu), run(&rf));
            let err = rel(&a, &b);
            // Where the CPU has AVX512-BF16, a snapshot's products round their inputs to bf16 too, and an
            // input whose f32 value differs in its last bit between the backends can round to the
            // neighbouring bf16: one product term then moves by 2^-8 of itself (measured: up to 1.4e-4
            // of the logits' scale on these large random weights; 1e-7 otherwise).
            let tol = if snapshot.is_some() && cppo_kernels::skinny::dot_bf16_available() { 1e-3 } else { 1e-5 };
            assert!(err < tol, "{name} snapshot {}: logits differ by {err}", snapshot.is_some());
        }
    }
}

/// A forward pass on uploaded weights (the path every run's update takes) hands back log-probs, mask and
/// entropies in the output's `(completions, longest)` layout, as the host call does: completions of
/// unequal lengths leave slots without a token, where every one of them is 0.
#[test]
fn a_forward_on_backend_weights_lays_entropies_out_as_the_scored_output() {
    let cfg = &families()[0].1;
    let dec = decoder(cfg, 3, DType::F32);
    let cpu = cppo_kernels::cpu::Cpu::<f32>::new();
    let w = dec.upload_weights(&cpu).unwrap();
    let p = tokens(5, cfg.vocab_size, 1);
    let c = [tokens(6, cfg.vocab_size, 2), tokens(1, cfg.vocab_size, 3), tokens(3, cfg.vocab_size, 4)];
    let r: Vec<&[u32]> = c.iter().map(|c| c.as_slice()).collect();
    let groups = [(p.as_slice(), r.as_slice())];
    let host = dec.grouped_completion_logprobs_detached(&groups).unwrap();
    let on = dec.forward_on_weights(&cpu, &w, &groups, false).unwrap();
    assert_eq!(on.shape, (3, 6));
    assert_eq!(on.entropy.len(), 18, "one entropy per slot of the output");
    assert!(max_diff(&on.entropy, &flat(&host.entropy)) < 1e-5, "{:?} vs {:?}", on.entropy, flat(&host.entropy));
    let mask: Vec<f64> = on.mask.iter().map(|&x| x as f64).collect();
    assert_eq!(mask, flat(&host.mask));
    for (e, m) in on.entropy.iter().zip(&mask) {
        assert_eq!(*e > 0.0, *m > 0.0, "an entropy where there is no token, or none where there is");
    }
}
