//! LoRA adapters on a frozen base: their gradients match finite differences (f64, random non-zero A
//! and B, every family, plain and rsLoRA scaling); only the adapters are variables and only they get
//! gradients; a fresh adapter (B = 0) reproduces the base exactly; the generation path, the merged
//! weights and the adapters-off view all agree with the definition `y = W x + s B (A x)`.

mod decoder_support;

use candle_core::{DType, Device, Tensor};
use cppo_io::params::LayerParam;
use cppo_io::Weights;
use cppo_kernels::cpu::Cpu;
use cppo_model::decoder::expected_tensors;
use cppo_model::{Decoder, LoraSpec};
use decoder_support::{families, finite_difference, flat, max_diff, pg_grads, pg_loss, scalar, tokens, values, weights};

const ADV: [f64; 3] = [1.0, -0.5, 0.7];

fn all_linear(r: usize, alpha: f64, use_rslora: bool) -> LoraSpec {
    LoraSpec { r, alpha, use_rslora, targets: LayerParam::linear().collect() }
}

fn frozen(cfg: &cppo_io::ModelConfig, seed: u64, dtype: DType) -> Decoder {
    Decoder::new_with_dtype(cfg, &weights(cfg, seed), false, &Device::Cpu, dtype).unwrap()
}

/// Random non-zero adapters (both factors), so that every product of the adapter matters.
fn random_adapters(cfg: &cppo_io::ModelConfig, spec: &LoraSpec, seed: u64) -> Weights {
    let mut w = Weights::default();
    for (i, p) in cfg.lora_params(spec.r, &spec.targets).into_iter().enumerate() {
        let n: usize = p.shape.iter().product();
        let v: Vec<f64> = values(n, seed * 1000 + i as u64).into_iter().map(|x| 0.3 * x).collect();
        w.insert(p.name, Tensor::from_vec(v, p.shape, &Device::Cpu).unwrap());
    }
    w
}

fn sample(vocab: usize) -> (Vec<u32>, Vec<Vec<u32>>) {
    (tokens(5, vocab, 1), vec![tokens(4, vocab, 2), tokens(1, vocab, 3), tokens(6, vocab, 4)])
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

fn logprobs(dec: &Decoder, prompt: &[u32], comps: &[Vec<u32>]) -> Vec<f64> {
    let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
    flat(&dec.completion_logprobs_detached(prompt, &refs).unwrap().logprobs)
}

#[test]
fn adapter_gradients_match_finite_differences_in_f64() {
    for (k, (name, cfg)) in families().into_iter().enumerate() {
        let spec = all_linear(2, 3.0, k % 2 == 1);
        let dec = frozen(&cfg, 11, DType::F64).with_lora_weights(spec.clone(), &random_adapters(&cfg, &spec, 5), true).unwrap();
        let (prompt, comps) = sample(cfg.vocab_size);
        let grads = grads(&dec, &prompt, &comps);
        let vars = dec.vars();
        assert_eq!(vars.len(), cfg.num_hidden_layers * 7 * 2, "{name}: A and B of 7 linear layers per layer");
        for (vi, (vname, v)) in vars.iter().enumerate() {
            let g = flat(grads.get(v).unwrap_or_else(|| panic!("{name}: {vname} got no gradient")));
            assert!(g.iter().any(|x| x.abs() > 1e-9), "{name}: {vname} gradient is zero");
            let top = g.iter().enumerate().fold((0, -1.0), |(bi, bv), (i, &x)| if x.abs() > bv { (i, x.abs()) } else { (bi, bv) }).0;
            for i in [top, (vi * 7) % g.len(), g.len() - 1] {
                let fd = finite_difference(v, i, 1e-5, &mut || scalar(&loss(&dec, &prompt, &comps)));
                assert!((g[i] - fd).abs() < 1e-7 * (1.0 + g[i].abs()), "{name}: {vname}[{i}]: backward {} vs finite difference {fd}", g[i]);
            }
        }
    }
}

#[test]
fn only_the_adapters_are_variables_and_only_they_get_gradients() {
    for (name, cfg) in families() {
        let spec = LoraSpec { r: 2, alpha: 4.0, use_rslora: false, targets: vec![LayerParam::Q, LayerParam::V, LayerParam::Down] };
        let dec = frozen(&cfg, 3, DType::F32).with_lora_weights(spec.clone(), &random_adapters(&cfg, &spec, 9), true).unwrap();
        let names: Vec<String> = dec.vars().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names.len(), cfg.num_hidden_layers * 3 * 2, "{name}");
        assert!(names.iter().all(|n| n.contains(".lora_A.") || n.contains(".lora_B.")), "{name}: {names:?}");
        // The backend-level pass returns a gradient for exactly the adapters (the tape itself asserts
        // that it computed no other), and the same values candle's backward pass hands out.
        let (prompt, comps) = sample(cfg.vocab_size);
        let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
        let groups: [(&[u32], &[&[u32]]); 1] = [(&prompt, &refs)];
        let out = dec.grouped_completion_logprobs(&groups).unwrap();
        let dlogp: Vec<f32> = (0..out.logprobs.elem_count()).map(|i| ((i * 5) % 7) as f32 - 3.0).collect();
        let run = dec.tape_on(&Cpu::<f32>::new(), &groups, &dlogp).unwrap();
        let run_names: Vec<&String> = run.grads.iter().map(|(n, _)| n).collect();
        assert_eq!(run_names, names.iter().collect::<Vec<_>>(), "{name}");
        let grads = out.backward.as_ref().unwrap().run(&Tensor::from_vec(dlogp, out.logprobs.shape(), &Device::Cpu).unwrap()).unwrap();
        for ((n, v), (_, g)) in dec.vars().iter().zip(&run.grads) {
            let want = flat(grads.get(v).unwrap());
            let got: Vec<f64> = g.iter().map(|&x| x as f64).collect();
            assert!(max_diff(&got, &want) <= 1e-5 * (1.0 + want.iter().fold(0.0f64, |m, x| m.max(x.abs()))), "{name}: {n}");
        }
        // The base's tensors are plain tensors, so candle's store holds nothing for them either.
        assert_eq!(dec.to_weights().unwrap().tensors.len(), expected_tensors(&cfg).len());
    }
}

#[test]
fn fresh_adapters_reproduce_the_base_exactly_and_turning_them_off_gives_the_base() {
    for (name, cfg) in families() {
        let base = frozen(&cfg, 4, DType::F32);
        let (prompt, comps) = sample(cfg.vocab_size);
        let want = logprobs(&base, &prompt, &comps);
        let fresh = base.clone().with_lora(all_linear(4, 8.0, false), 1).unwrap();
        assert_eq!(logprobs(&fresh, &prompt, &comps), want, "{name}: B = 0 changes nothing");
        // PEFT's initialisation: A uniform in +-1/sqrt(fan_in), not all zero; B zero.
        let ad = fresh.adapter_weights().unwrap();
        for (n, t) in &ad.tensors {
            let v = flat(t);
            if n.contains("lora_B") {
                assert!(v.iter().all(|&x| x == 0.0), "{name}: {n}");
            } else {
                let bound = 1.0 / (t.dims()[1] as f64).sqrt();
                assert!(v.iter().all(|x| x.abs() <= bound) && v.iter().any(|&x| x != 0.0), "{name}: {n}");
            }
        }
        let spec = all_linear(2, 16.0, false);
        let adapted = base.clone().with_lora_weights(spec.clone(), &random_adapters(&cfg, &spec, 2), true).unwrap();
        let moved = logprobs(&adapted, &prompt, &comps);
        assert!(max_diff(&moved, &want) > 1e-3, "{name}: non-zero adapters change the log-probs");
        let off = adapted.without_adapters();
        assert!(!off.is_trainable() && off.vars().is_empty(), "{name}");
        assert_eq!(logprobs(&off, &prompt, &comps), want, "{name}: adapters off is the base");
    }
}

#[test]
fn merged_weights_are_base_plus_scaled_b_a_and_score_like_the_adapted_model() {
    for (name, cfg) in families() {
        for rs in [false, true] {
            let spec = all_linear(3, 6.0, rs);
            let s = if rs { 6.0 / 3f64.sqrt() } else { 2.0 };
            let base = frozen(&cfg, 6, DType::F64);
            let adapters = random_adapters(&cfg, &spec, 3);
            let adapted = base.clone().with_lora_weights(spec.clone(), &adapters, false).unwrap();
            let merged = adapted.merged_weights().unwrap();
            for l in 0..cfg.num_hidden_layers {
                for p in LayerParam::linear() {
                    let w = cppo_io::params::ParamKind::Layer(l, p).name();
                    let module = w.strip_suffix(".weight").unwrap();
                    let (a, b) = (&adapters.tensors[&format!("{module}.lora_A.weight")], &adapters.tensors[&format!("{module}.lora_B.weight")]);
                    let (bm, am) = (flat(b), flat(a));
                    let (out, r, inn) = (b.dims()[0], b.dims()[1], a.dims()[1]);
                    let base_w = flat(&weights(&cfg, 6).tensors[&w]);
                    let want: Vec<f64> = (0..out * inn)
                        .map(|ij| base_w[ij] + s * (0..r).map(|k| bm[(ij / inn) * r + k] * am[k * inn + ij % inn]).sum::<f64>())
                        .collect();
                    assert!(max_diff(&flat(&merged.tensors[&w]), &want) < 1e-6, "{name}: {w}");
                }
            }
            let merged_dec = Decoder::new_with_dtype(&cfg, &merged, false, &Device::Cpu, DType::F64).unwrap();
            let (prompt, comps) = sample(cfg.vocab_size);
            let err = max_diff(&logprobs(&merged_dec, &prompt, &comps), &logprobs(&adapted, &prompt, &comps));
            assert!(err < 1e-5, "{name} rslora {rs}: merged model scores differently by {err}");
        }
    }
}

#[test]
fn generation_runs_the_adapters_like_the_training_path() {
    for (name, cfg) in families() {
        let spec = all_linear(2, 4.0, false);
        let adapted = frozen(&cfg, 8, DType::F32).with_lora_weights(spec.clone(), &random_adapters(&cfg, &spec, 4), false).unwrap();
        let merged = Decoder::new(&cfg, &adapted.merged_weights().unwrap(), false, &Device::Cpu).unwrap();
        let prompt = tokens(7, cfg.vocab_size, 3);
        let mut c1 = adapted.new_cache(1, 16).unwrap();
        let mut c2 = merged.new_cache(1, 16).unwrap();
        let a = adapted.prefill_logits(&prompt, &mut c1, 0).unwrap();
        let b = merged.prefill_logits(&prompt, &mut c2, 0).unwrap();
        let d = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        assert!(d < 1e-4, "{name}: prefill differs from the merged model by {d}");
        let a = adapted.decode_step_logits(&[5], &[0], &mut c1).unwrap();
        let b = merged.decode_step_logits(&[5], &[0], &mut c2).unwrap();
        let d = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        assert!(d < 1e-4, "{name}: decode step differs from the merged model by {d}");
        // The training path's logits over the same tokens agree with the cached path's.
        let ids = Tensor::from_vec(prompt.clone(), (1, prompt.len()), &Device::Cpu).unwrap();
        let full = flat(&adapted.forward_logits(&ids).unwrap());
        let last = &full[(prompt.len() - 1) * cfg.vocab_size..];
        let mut c3 = adapted.new_cache(1, 16).unwrap();
        let p = adapted.prefill_logits(&prompt, &mut c3, 0).unwrap();
        let d = last.iter().zip(&p).map(|(x, y)| (x - *y as f64).abs()).fold(0f64, f64::max);
        assert!(d < 1e-4, "{name}: forward_logits and prefill differ by {d}");
    }
}

#[test]
fn bad_adapters_are_errors_naming_the_key_or_tensor() {
    let cfg = cppo_io::ModelConfig::tiny(cppo_io::Architecture::Llama);
    let base = frozen(&cfg, 1, DType::F32);
    let err = base.clone().with_lora(LoraSpec { r: 0, ..all_linear(1, 1.0, false) }, 0).unwrap_err().to_string();
    assert!(err.contains("lora.r = 0"), "{err}");
    let kv = cfg.num_key_value_heads * cfg.head_dim;
    let too_big = kv.min(cfg.hidden_size) + 1;
    let err = base.clone().with_lora(LoraSpec { r: too_big, alpha: 1.0, use_rslora: false, targets: vec![LayerParam::K] }, 0).unwrap_err().to_string();
    assert!(err.contains("lora.r") && err.contains("k_proj"), "{err}");
    let spec = all_linear(2, 1.0, false);
    let mut ad = random_adapters(&cfg, &spec, 1);
    let victim = "model.layers.0.mlp.up_proj.lora_B.weight";
    ad.insert(victim, Tensor::zeros((3, 3), DType::F64, &Device::Cpu).unwrap());
    let err = base.clone().with_lora_weights(spec.clone(), &ad, false).unwrap_err().to_string();
    assert!(err.contains(victim), "{err}");
    let mut ad = random_adapters(&cfg, &spec, 1);
    ad.tensors.remove(victim);
    let err = base.clone().with_lora_weights(spec.clone(), &ad, false).unwrap_err().to_string();
    assert!(err.contains(victim), "{err}");
    let mut ad = random_adapters(&cfg, &spec, 1);
    ad.insert("model.layers.9.mlp.up_proj.lora_B.weight", Tensor::zeros((3, 3), DType::F64, &Device::Cpu).unwrap());
    let err = base.with_lora_weights(spec, &ad, false).unwrap_err().to_string();
    assert!(err.contains("model.layers.9.mlp.up_proj.lora_B.weight"), "{err}");
}
