//! The two execution paths agree: the cached inference path (prefill, copied rows, batched decode
//! steps over rows of different lengths) gives the training path's logits and log-probs, and the
//! shared-prompt training forward gives the plain repeated-prompt batch's log-probs and gradients.

mod decoder_support;

use candle_core::{DType, Device, IndexOp, Tensor};
use cppo_model::{Decoder, DecoderError};
use decoder_support::{decoder, families, flat, log_softmax, max_diff, pg_dlogp, pg_grads, tokens};

/// Training-path logits (t, vocab) of one sequence.
fn train_logits(dec: &Decoder, seq: &[u32]) -> Vec<Vec<f64>> {
    let ids = Tensor::from_slice(seq, (1, seq.len()), &Device::Cpu).unwrap();
    let l = dec.forward_logits(&ids).unwrap().squeeze(0).unwrap();
    (0..seq.len()).map(|i| flat(&l.i(i).unwrap())).collect()
}

#[test]
fn prefill_then_decode_steps_give_the_training_logits() {
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 3, DType::F32);
        let seq = tokens(14, cfg.vocab_size, 9);
        let want = train_logits(&dec, &seq);
        let mut cache = dec.new_cache(3, 20).unwrap();
        let row = 1;
        let got = flat(&dec.prefill(&seq[..6], &mut cache, row).unwrap());
        assert!(max_diff(&got, &want[5]) < 1e-4, "{name}: prefill logits");
        for i in 6..14 {
            let got = flat(&dec.decode_step(&[seq[i]], &[row], &mut cache).unwrap());
            let err = max_diff(&got, &want[i]);
            assert!(err < 1e-4, "{name}: decode step at position {i} differs by {err}");
        }
        assert_eq!(cache.lens(), &[0, 14, 0]);
    }
}

#[test]
fn batched_decode_over_rows_of_different_lengths() {
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 5, DType::F32);
        let v = cfg.vocab_size;
        let mut cache = dec.new_cache(5, 16).unwrap();
        // Row 0: a 3-token prompt; row 2: a 6-token prompt, copied into rows 3 and 4.
        let mut seqs: Vec<Vec<u32>> = vec![tokens(3, v, 1), vec![], tokens(6, v, 2), vec![], vec![]];
        dec.prefill(&seqs[0].clone(), &mut cache, 0).unwrap();
        dec.prefill(&seqs[2].clone(), &mut cache, 2).unwrap();
        dec.copy_row(&mut cache, 2, &[3, 4]).unwrap();
        seqs[3] = seqs[2].clone();
        seqs[4] = seqs[2].clone();
        let steps: Vec<Vec<usize>> = vec![vec![0, 2, 3, 4], vec![4, 0, 3], vec![3], vec![0, 2, 3, 4]];
        for (s, rows) in steps.iter().enumerate() {
            let toks: Vec<u32> = rows.iter().map(|&r| tokens(1, v, (100 * s + r) as u64)[0]).collect();
            let out = dec.decode_step(&toks, rows, &mut cache).unwrap();
            assert_eq!(out.dims(), &[rows.len(), v]);
            for (i, (&r, &t)) in rows.iter().zip(&toks).enumerate() {
                seqs[r].push(t);
                let want = train_logits(&dec, &seqs[r]);
                let err = max_diff(&flat(&out.i(i).unwrap()), want.last().unwrap());
                assert!(err < 1e-4, "{name}: step {s}, row {r} differs by {err}");
            }
        }
        let lens: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
        assert_eq!(cache.lens(), lens.as_slice());
        // A finished row is reused for a new prompt.
        cache.reset_row(3).unwrap();
        let fresh = tokens(4, v, 77);
        let got = flat(&dec.prefill(&fresh, &mut cache, 3).unwrap());
        assert!(max_diff(&got, train_logits(&dec, &fresh).last().unwrap()) < 1e-4, "{name}: reused row");
        // Truncating back to the prompt and sampling again.
        cache.truncate_row(4, 6).unwrap();
        let alt = tokens(1, v, 555)[0];
        let got = flat(&dec.decode_step(&[alt], &[4], &mut cache).unwrap());
        let mut seq = seqs[2][..6].to_vec();
        seq.push(alt);
        assert!(max_diff(&got, train_logits(&dec, &seq).last().unwrap()) < 1e-4, "{name}: truncated row");
    }
}

fn sample(vocab: usize) -> (Vec<u32>, Vec<Vec<u32>>) {
    (tokens(6, vocab, 41), vec![tokens(5, vocab, 42), tokens(2, vocab, 43), tokens(7, vocab, 44), tokens(1, vocab, 45)])
}

#[test]
fn training_log_probs_equal_inference_log_probs() {
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 7, DType::F32);
        let (prompt, comps) = sample(cfg.vocab_size);
        let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
        let out = dec.completion_logprobs(&prompt, &refs).unwrap();
        let lmax = 7;
        assert_eq!(out.logprobs.dims(), &[4, lmax]);
        let lp = flat(&out.logprobs);
        let mask = flat(&out.mask);
        let ent = flat(&out.entropy);
        let mut cache = dec.new_cache(comps.len() + 1, 16).unwrap();
        let first = dec.prefill(&prompt, &mut cache, 0).unwrap();
        let rows: Vec<usize> = (1..=comps.len()).collect();
        dec.copy_row(&mut cache, 0, &rows).unwrap();
        for (j, c) in comps.iter().enumerate() {
            let mut logits = first.clone();
            for t in 0..lmax {
                let at = j * lmax + t;
                if t >= c.len() {
                    assert_eq!((mask[at], lp[at], ent[at]), (0.0, 0.0, 0.0), "{name}: padding must be zero");
                    continue;
                }
                assert_eq!(mask[at], 1.0);
                let ls = flat(&log_softmax(&logits));
                assert!((ls[c[t] as usize] - lp[at]).abs() < 1e-4, "{name}: completion {j} token {t}: {} vs {}", ls[c[t] as usize], lp[at]);
                let h: f64 = -ls.iter().map(|l| l.exp() * l).sum::<f64>();
                assert!((h - ent[at]).abs() < 1e-4, "{name}: completion {j} token {t}: entropy {h} vs {}", ent[at]);
                logits = dec.decode_step(&[c[t]], &[j + 1], &mut cache).unwrap().squeeze(0).unwrap();
            }
        }
    }
}

/// The same log-probs from independent sequences: the prompt repeated before each completion, each
/// sequence its own causal span (`sequence_logprobs`, differentiable), cut to the completions' slots.
fn repeated_prompt_logprobs(dec: &Decoder, prompt: &[u32], comps: &[Vec<u32>]) -> (Tensor, Tensor) {
    let lmax = comps.iter().map(|c| c.len()).max().unwrap();
    let lp = prompt.len();
    let seqs: Vec<Vec<u32>> = comps.iter().map(|c| prompt.iter().chain(c).copied().collect()).collect();
    let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
    let out = dec.sequence_logprobs(&refs).unwrap();
    let cut = |t: &Tensor| t.narrow(1, lp - 1, lmax).unwrap();
    (cut(&out.logprobs), cut(&out.mask))
}

/// The gradients of `pg_loss` over `repeated_prompt_logprobs`: dL/dlogp = mask * A on the completion
/// columns of each whole sequence, 0 on its prompt.
fn repeated_prompt_grads(dec: &Decoder, prompt: &[u32], comps: &[Vec<u32>], adv: &[f64]) -> cppo_model::WeightGrads {
    let lmax = comps.iter().map(|c| c.len()).max().unwrap();
    let seqs: Vec<Vec<u32>> = comps.iter().map(|c| prompt.iter().chain(c).copied().collect()).collect();
    let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
    let out = dec.sequence_logprobs(&refs).unwrap();
    let width = out.logprobs.dim(1).unwrap();
    let cut = pg_dlogp(&out.mask.narrow(1, prompt.len() - 1, lmax).unwrap(), adv);
    let dlogp = cut.pad_with_zeros(1, prompt.len() - 1, width - (prompt.len() - 1) - lmax).unwrap();
    out.backward.as_ref().unwrap().run(&dlogp).unwrap()
}

#[test]
fn shared_prompt_equals_repeated_prompt_in_log_probs_and_gradients() {
    let adv = [0.9, -1.2, 0.4, -0.3];
    for (name, cfg) in families() {
        for dtype in [DType::F32, DType::F64] {
            let dec = decoder(&cfg, 9, dtype);
            let (prompt, comps) = sample(cfg.vocab_size);
            let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
            let shared = dec.completion_logprobs(&prompt, &refs).unwrap();
            let (rep, rep_mask) = repeated_prompt_logprobs(&dec, &prompt, &comps);
            assert_eq!(flat(&shared.mask), flat(&rep_mask), "{name}: masks");
            let err = max_diff(&flat(&shared.logprobs), &flat(&rep));
            let tol = if dtype == DType::F64 { 1e-12 } else { 1e-5 };
            assert!(err < tol, "{name} {dtype:?}: log-probs differ by {err}");
            let g1 = pg_grads(&shared, &adv);
            let g2 = repeated_prompt_grads(&dec, &prompt, &comps, &adv);
            for (vname, v) in dec.vars() {
                let (a, b) = (flat(g1.get(&v).unwrap()), flat(g2.get(&v).unwrap()));
                let err = max_diff(&a, &b);
                // f64 agrees to rounding; f32 to 1e-5 relative to the gradient's scale.
                let scale = a.iter().fold(1.0f64, |m, x| m.max(x.abs()));
                let tol = if dtype == DType::F64 { 1e-10 } else { 1e-5 * scale };
                assert!(err < tol, "{name} {dtype:?}: {vname} gradients differ by {err} (scale {scale})");
            }
        }
    }
}

#[test]
fn empty_and_single_token_completions() {
    let (_, cfg) = &families()[0];
    let dec = decoder(cfg, 2, DType::F32);
    let prompt = tokens(3, cfg.vocab_size, 1);
    let out = dec.completion_logprobs(&prompt, &[&[], &[5]]).unwrap();
    assert_eq!(out.logprobs.dims(), &[2, 1]);
    assert_eq!(flat(&out.mask), vec![0.0, 1.0]);
    let none = dec.completion_logprobs(&prompt, &[&[]]).unwrap();
    assert_eq!(none.logprobs.dims(), &[1, 0]);
    assert!(matches!(dec.completion_logprobs(&[], &[&[1]]), Err(DecoderError::BadInput(_))));
    assert!(matches!(dec.completion_logprobs(&prompt, &[&[999]]), Err(DecoderError::TokenOutOfRange { token: 999, .. })));
}

#[test]
fn cache_misuse_is_an_error() {
    let (_, cfg) = &families()[0];
    let dec = decoder(cfg, 2, DType::F32);
    let mut cache = dec.new_cache(2, 4).unwrap();
    assert!(matches!(dec.prefill(&[1, 2], &mut cache, 2), Err(DecoderError::Cache(_))));
    assert!(matches!(dec.prefill(&[1, 2, 3, 4, 5], &mut cache, 0), Err(DecoderError::Cache(_))));
    assert_eq!(cache.lens(), &[0, 0], "a failed prefill must leave the row empty");
    dec.prefill(&[1, 2, 3, 4], &mut cache, 0).unwrap();
    assert!(matches!(dec.decode_step(&[1], &[0], &mut cache), Err(DecoderError::Cache(_))), "a full row");
    assert!(matches!(dec.decode_step(&[1, 2], &[1, 1], &mut cache), Err(DecoderError::BadInput(_))), "a repeated row");
    assert!(matches!(dec.decode_step(&[1], &[0, 1], &mut cache), Err(DecoderError::BadInput(_))));
    assert!(cache.truncate_row(1, 3).is_err());
    assert!(cache.copy_row(0, &[5]).is_err());
    let mut wider = cfg.clone();
    wider.num_key_value_heads = 4;
    let mut mismatched = cppo_model::KvCache::new(&wider, 1, 4).unwrap();
    assert!(matches!(dec.prefill(&[1], &mut mismatched, 0), Err(DecoderError::Cache(_))), "a cache for another shape");
    let f64dec = decoder(cfg, 2, DType::F64);
    assert!(matches!(f64dec.prefill(&[1], &mut cache, 1), Err(DecoderError::BadInput(_))));
}

#[test]
fn sequence_log_probs_match_log_softmax_of_the_logits() {
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 4, DType::F32);
        let seqs = [tokens(6, cfg.vocab_size, 1), tokens(3, cfg.vocab_size, 2), tokens(1, cfg.vocab_size, 3)];
        let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
        let out = dec.sequence_logprobs(&refs).unwrap();
        assert_eq!(out.logprobs.dims(), &[3, 5]);
        let (lp, mask) = (flat(&out.logprobs), flat(&out.mask));
        for (j, s) in seqs.iter().enumerate() {
            let logits = train_logits(&dec, s);
            for t in 0..5 {
                let at = j * 5 + t;
                if t + 1 >= s.len() {
                    assert_eq!((lp[at], mask[at]), (0.0, 0.0), "{name}: padding");
                    continue;
                }
                let l = Tensor::new(logits[t].as_slice(), &Device::Cpu).unwrap();
                let want = flat(&log_softmax(&l))[s[t + 1] as usize];
                assert!((want - lp[at]).abs() < 1e-5, "{name}: sequence {j} token {t}: {} vs {want}", lp[at]);
                assert_eq!(mask[at], 1.0);
            }
        }
    }
}

/// Every size class of the generation path's products: a prompt over 128 tokens (the general multiply),
/// 100 decode rows (two chunks of the few-row kernel) and 200 decode rows (the general multiply again),
/// each row checked against the training path; and the bf16 rollout snapshot close to f32 at 100 rows.
#[test]
fn wide_decode_steps_and_long_prompts_take_every_product_path() {
    let (_, mut cfg) = families().into_iter().next().unwrap();
    cfg.max_position_embeddings = 512;
    let dec = decoder(&cfg, 11, DType::F32);
    let v = cfg.vocab_size;
    let prompt = tokens(300, v, 5);
    let mut cache = dec.new_cache(200, 304).unwrap();
    let got = flat(&dec.prefill(&prompt, &mut cache, 0).unwrap());
    assert!(max_diff(&got, train_logits(&dec, &prompt).last().unwrap()) < 1e-4, "300-token prefill");
    dec.copy_row(&mut cache, 0, &(1..200).collect::<Vec<_>>()).unwrap();
    let half = dec.rollout_weights().unwrap();
    let mut bf_cache = cache.clone();
    let mut seqs: Vec<Vec<u32>> = vec![prompt.clone(); 200];
    for (s, n) in [100usize, 200].into_iter().enumerate() {
        let rows: Vec<usize> = (0..n).rev().collect();
        let toks: Vec<u32> = rows.iter().map(|&r| tokens(1, v, (1000 * s + r) as u64)[0]).collect();
        let out = dec.decode_step_logits(&toks, &rows, &mut cache).unwrap();
        if n == 100 {
            let bf = dec.decode_step_logits_with(&toks, &rows, &mut bf_cache, Some(&half)).unwrap();
            let worst = out.iter().zip(&bf).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            let scale = out.iter().map(|a| a.abs()).fold(0f32, f32::max);
            assert!(worst <= 0.05 * scale.max(1.0), "bf16 rollout logits differ by {worst} (scale {scale})");
        }
        for (i, (&r, &t)) in rows.iter().zip(&toks).enumerate() {
            seqs[r].push(t);
            if i % 33 == 0 || i + 1 == n {
                let want = train_logits(&dec, &seqs[r]);
                let got: Vec<f64> = out[i * v..(i + 1) * v].iter().map(|&x| x as f64).collect();
                let err = max_diff(&got, want.last().unwrap());
                assert!(err < 1e-4, "{n} rows: row {r} differs by {err}");
            }
        }
    }
}

#[test]
fn bf16_products_stay_close_to_f32_in_log_probs_and_gradients() {
    use cppo_kernels::Precision;
    let adv = [0.9, -1.2, 0.4, -0.3];
    for (name, cfg) in families() {
        for dtype in [DType::F32, DType::F64] {
            let dec = decoder(&cfg, 9, dtype);
            let mixed = dec.clone().with_matmul_precision(Precision::Bf16);
            let (prompt, comps) = sample(cfg.vocab_size);
            let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
            let full = dec.completion_logprobs(&prompt, &refs).unwrap();
            let half = mixed.completion_logprobs(&prompt, &refs).unwrap();
            let err = max_diff(&flat(&full.logprobs), &flat(&half.logprobs));
            // Rounded where the machine has AVX512-BF16 (only f32 decoders), exact otherwise.
            let rounds = dtype == DType::F32 && Precision::bf16_available();
            if rounds {
                let scale = flat(&full.logprobs).iter().fold(0.0f64, |m, x| m.max(x.abs()));
                // bf16 keeps 8 significant bits (0.4%); through the layers the log-probs move by ~1%.
                assert!(err > 0.0 && err < 0.02 * scale, "{name}: bf16 log-probs differ from f32 by {err} (scale {scale})");
            } else {
                assert_eq!(err, 0.0, "{name} {dtype:?}: no rounding expected");
            }
            let g1 = pg_grads(&full, &adv);
            let g2 = pg_grads(&half, &adv);
            for (vname, v) in dec.vars() {
                let (a, b) = (flat(g1.get(&v).unwrap()), flat(g2.get(&v).unwrap()));
                let norm = a.iter().map(|x| x * x).sum::<f64>().sqrt();
                let diff = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt();
                assert!(norm > 0.0, "{name} {dtype:?}: {vname} got no gradient");
                assert!(diff <= 0.05 * norm, "{name} {dtype:?}: {vname} bf16 gradient off by {diff} (norm {norm})");
            }
        }
    }
}

#[test]
fn grouped_questions_equal_one_call_per_question() {
    // Three questions with prompts of different lengths, one with an empty and a one-token completion:
    // one grouped pass gives each question's own log-probs and the sum of their gradients.
    for (name, cfg) in families() {
        for dtype in [DType::F32, DType::F64] {
            let dec = decoder(&cfg, 5, dtype);
            let v = cfg.vocab_size;
            let prompts = [tokens(7, v, 1), tokens(3, v, 2), tokens(11, v, 3)];
            let comps = [vec![tokens(5, v, 4), tokens(2, v, 5)], vec![tokens(6, v, 6)], vec![tokens(4, v, 7), vec![], tokens(1, v, 8)]];
            let refs: Vec<Vec<&[u32]>> = comps.iter().map(|g| g.iter().map(|c| c.as_slice()).collect()).collect();
            let groups: Vec<(&[u32], &[&[u32]])> = prompts.iter().zip(&refs).map(|(p, c)| (p.as_slice(), c.as_slice())).collect();
            let all = dec.grouped_completion_logprobs(&groups).unwrap();
            assert_eq!(all.logprobs.dims(), &[6, 6], "{name}: rows are all completions, padded to the longest");
            let adv = [0.9, -1.2, 0.4, -0.3, 1.1, -0.7];
            let tol = if dtype == DType::F64 { 1e-10 } else { 1e-5 };
            let mut row = 0;
            let mut separate = Vec::new();
            for (g, ((p, c), part)) in groups.iter().zip(all.per_group(&groups).unwrap()).enumerate() {
                let one = dec.completion_logprobs(p, c).unwrap();
                let (k, l) = one.logprobs.dims2().unwrap();
                assert_eq!(part.logprobs.dims2().unwrap(), (k, l), "{name}: per_group cuts each question to its own shape");
                let err = max_diff(&flat(&part.logprobs), &flat(&one.logprobs));
                assert!(err < tol, "{name} {dtype:?}: question {g} log-probs differ by {err}");
                assert_eq!(flat(&part.mask), flat(&one.mask));
                assert!(max_diff(&flat(&part.entropy), &flat(&one.entropy)) < tol, "{name}: question {g} entropies");
                let rest = all.mask.narrow(0, row, k).unwrap().narrow(1, l, 6 - l).unwrap();
                assert!(flat(&rest).iter().all(|&m| m == 0.0), "{name}: padding past a question's longest completion");
                separate.push(pg_grads(&one, &adv[row..row + k]));
                row += k;
            }
            let grads = pg_grads(&all, &adv);
            for (vname, var) in dec.vars() {
                let got = flat(grads.get(&var).unwrap());
                let mut want = vec![0f64; got.len()];
                for s in &separate {
                    for (w, x) in want.iter_mut().zip(flat(s.get(&var).unwrap())) {
                        *w += x;
                    }
                }
                let scale = want.iter().fold(1.0f64, |m, x| m.max(x.abs()));
                let err = max_diff(&got, &want);
                assert!(err < tol * scale, "{name} {dtype:?}: {vname} gradients differ by {err}");
            }
        }
    }
}
