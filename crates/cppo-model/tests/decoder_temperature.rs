//! Log-probs at a sampling temperature T: the training path's log-probs and entropies are those of
//! `softmax(logits / T)` (checked against the full logits of the no-tape path, divided by T and
//! log-softmaxed by hand in f64), their gradients match finite differences, and T = 1 is bit for bit
//! the untempered decoder.

mod decoder_support;

use candle_core::{DType, Device, Tensor};
use cppo_model::decoder::BackendKind;
use cppo_model::Decoder;
use decoder_support::{decoder, families, finite_difference, flat, pg_grads, pg_loss, scalar, tokens};

const ADV: [f64; 3] = [0.8, -1.1, 0.4];

fn sample(vocab: usize) -> (Vec<u32>, Vec<Vec<u32>>) {
    (tokens(4, vocab, 21), vec![tokens(5, vocab, 22), tokens(2, vocab, 23), tokens(7, vocab, 24)])
}

fn refs(comps: &[Vec<u32>]) -> Vec<&[u32]> {
    comps.iter().map(|c| c.as_slice()).collect()
}

/// Per completion token: (log p, entropy) of `softmax(logits / t)` from the whole sequence's logits.
fn brute_force(dec: &Decoder, prompt: &[u32], comp: &[u32], t: f64) -> Vec<(f64, f64)> {
    let seq: Vec<u32> = prompt.iter().chain(comp).copied().collect();
    let n = seq.len();
    let logits = dec.forward_logits(&Tensor::from_vec(seq, (1, n), &Device::Cpu).unwrap()).unwrap();
    let vocab = dec.config().vocab_size;
    let all = flat(&logits);
    comp.iter()
        .enumerate()
        .map(|(i, &tok)| {
            let row = prompt.len() - 1 + i;
            let z: Vec<f64> = all[row * vocab..(row + 1) * vocab].iter().map(|x| x / t).collect();
            let m = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let lse = m + z.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
            let entropy = -z.iter().map(|x| (x - lse).exp() * (x - lse)).sum::<f64>();
            (z[tok as usize] - lse, entropy)
        })
        .collect()
}

#[test]
fn tempered_logprobs_and_entropies_match_a_hand_log_softmax() {
    for (name, cfg) in families() {
        for backend in [BackendKind::Cpu, BackendKind::Reference] {
            for t in [0.3, 0.7, 1.0, 1.6] {
                let dec = decoder(&cfg, 31, DType::F64).with_backend(backend).with_logprob_temperature(t).unwrap();
                let (prompt, comps) = sample(cfg.vocab_size);
                let out = dec.completion_logprobs(&prompt, &refs(&comps)).unwrap();
                let (lp, ent) = (flat(&out.logprobs), flat(&out.entropy));
                let width = out.logprobs.dims()[1];
                for (j, c) in comps.iter().enumerate() {
                    for (i, (want_lp, want_ent)) in brute_force(&dec, &prompt, c, t).into_iter().enumerate() {
                        let (got_lp, got_ent) = (lp[j * width + i], ent[j * width + i]);
                        assert!((got_lp - want_lp).abs() < 1e-10, "{name} {backend:?} T={t}: logp[{j}][{i}] {got_lp} vs {want_lp}");
                        assert!((got_ent - want_ent).abs() < 1e-10, "{name} {backend:?} T={t}: entropy[{j}][{i}] {got_ent} vs {want_ent}");
                    }
                }
            }
        }
    }
}

/// The check above is not vacuous: a temperature changes the log-probs, by more than rounding.
#[test]
fn a_temperature_changes_the_logprobs() {
    let (name, cfg) = families().remove(0);
    let (prompt, comps) = sample(cfg.vocab_size);
    let plain = flat(&decoder(&cfg, 31, DType::F64).completion_logprobs(&prompt, &refs(&comps)).unwrap().logprobs);
    let hot = decoder(&cfg, 31, DType::F64).with_logprob_temperature(0.7).unwrap();
    let hot = flat(&hot.completion_logprobs(&prompt, &refs(&comps)).unwrap().logprobs);
    let moved = plain.iter().zip(&hot).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(moved > 1e-4, "{name}: T = 0.7 moved the log-probs by only {moved}");
}

fn loss(dec: &Decoder, prompt: &[u32], comps: &[Vec<u32>]) -> Tensor {
    let out = dec.completion_logprobs(prompt, &refs(comps)).unwrap();
    pg_loss(&out.logprobs, &out.mask, &ADV)
}

/// The gradients of `loss` through the decoder's backward pass.
fn grads(dec: &Decoder, prompt: &[u32], comps: &[Vec<u32>]) -> cppo_model::WeightGrads {
    pg_grads(&dec.completion_logprobs(prompt, &refs(comps)).unwrap(), &ADV)
}

#[test]
fn tempered_gradients_match_finite_differences_in_f64() {
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 37, DType::F64).with_logprob_temperature(0.6).unwrap();
        let (prompt, comps) = sample(cfg.vocab_size);
        let grads = grads(&dec, &prompt, &comps);
        for (vi, (vname, v)) in dec.vars().iter().enumerate() {
            let g = flat(grads.get(v).unwrap());
            let top = g.iter().enumerate().fold((0, -1.0), |(bi, bv), (i, &x)| if x.abs() > bv { (i, x.abs()) } else { (bi, bv) }).0;
            let mut probes: Vec<usize> = tokens(2, g.len(), 100 + vi as u64).into_iter().map(|t| t as usize).collect();
            probes.push(top);
            for i in probes {
                let fd = finite_difference(v, i, 1e-5, &mut || scalar(&loss(&dec, &prompt, &comps)));
                let err = (g[i] - fd).abs();
                assert!(err < 1e-7 * (1.0 + g[i].abs()), "{name}: {vname}[{i}]: backward {} vs finite difference {fd}", g[i]);
            }
        }
    }
}

#[test]
fn temperature_one_is_bit_identical_to_an_untempered_decoder() {
    for (name, cfg) in families() {
        let (prompt, comps) = sample(cfg.vocab_size);
        let plain = decoder(&cfg, 41, DType::F32);
        let one = decoder(&cfg, 41, DType::F32).with_logprob_temperature(1.0).unwrap();
        let (a, b) = (plain.completion_logprobs(&prompt, &refs(&comps)).unwrap(), one.completion_logprobs(&prompt, &refs(&comps)).unwrap());
        assert_eq!(flat(&a.logprobs), flat(&b.logprobs), "{name}: log-probs");
        assert_eq!(flat(&a.entropy), flat(&b.entropy), "{name}: entropies");
        let (ga, gb) = (pg_grads(&a, &ADV), pg_grads(&b, &ADV));
        for ((vname, va), (_, vb)) in plain.vars().iter().zip(one.vars().iter()) {
            assert_eq!(flat(ga.get(va).unwrap()), flat(gb.get(vb).unwrap()), "{name}: {vname} gradient");
        }
    }
}

#[test]
fn a_bad_temperature_is_refused() {
    let (_, cfg) = families().remove(0);
    for t in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let err = decoder(&cfg, 1, DType::F32).with_logprob_temperature(t).unwrap_err().to_string();
        assert!(err.contains("temperature"), "{t}: {err}");
    }
}
