//! The frozen base of a LoRA decoder held in bf16 (`with_bf16_base`): log-probs, adapter gradients and
//! generation equal those of an f32 decoder whose base matrices were rounded to bf16 beforehand, at
//! f32 and at bf16 products (generation: with its snapshot); the weights take the bytes they should; and the rollout snapshot of a
//! frozen base is taken once and shared (its results unchanged as the adapters move).

mod decoder_support;

use candle_core::{DType, Device, Tensor};
use cppo_io::params::{LayerParam, ParamKind};
use cppo_io::{ModelConfig, Weights};
use cppo_kernels::skinny::{from_bf16, to_bf16};
use cppo_kernels::Precision;
use cppo_model::{Decoder, LoraSpec};
use decoder_support::{families, flat, pg_grads, tokens, values, weights};

const ADV: [f64; 3] = [0.9, -0.6, 0.4];

fn spec() -> LoraSpec {
    LoraSpec { r: 2, alpha: 5.0, use_rslora: false, targets: LayerParam::linear().collect() }
}

fn adapters(cfg: &ModelConfig, seed: u64) -> Weights {
    let s = spec();
    let mut w = Weights::default();
    for (i, p) in cfg.lora_params(s.r, &s.targets).into_iter().enumerate() {
        let n: usize = p.shape.iter().product();
        let v: Vec<f64> = values(n, seed * 100 + i as u64).into_iter().map(|x| 0.3 * x).collect();
        w.insert(p.name, Tensor::from_vec(v, p.shape, &Device::Cpu).unwrap());
    }
    w
}

fn is_layer_linear(name: &str, cfg: &ModelConfig) -> bool {
    cfg.params().iter().any(|p| p.name == name && matches!(p.kind, ParamKind::Layer(_, l) if l.linear_module().is_some()))
}

/// The base's weights with every linear layer's matrix rounded to bf16 (nearest even), kept in f32.
fn rounded(cfg: &ModelConfig, w: &Weights) -> Weights {
    let mut out = Weights::default();
    for (name, t) in &w.tensors {
        let t = t.to_dtype(DType::F32).unwrap();
        let t = if is_layer_linear(name, cfg) {
            let v: Vec<f32> = t.flatten_all().unwrap().to_vec1::<f32>().unwrap().into_iter().map(|x| from_bf16(to_bf16(x))).collect();
            Tensor::from_vec(v, t.dims(), &Device::Cpu).unwrap()
        } else {
            t
        };
        out.insert(name.clone(), t);
    }
    out
}

/// Two LoRA decoders with the same trainable adapters: one on an f32 base rounded to bf16, one on the
/// same base held in bf16.
fn pair(cfg: &ModelConfig, dtype: DType, mp: Precision) -> (Decoder, Decoder) {
    let base = weights(cfg, 7);
    let ad = adapters(cfg, 3);
    let f32_base = Decoder::new_with_dtype(cfg, &rounded(cfg, &base), false, &Device::Cpu, dtype).unwrap();
    let half_base = Decoder::new_with_dtype(cfg, &base, false, &Device::Cpu, dtype).unwrap();
    let a = f32_base.with_lora_weights(spec(), &ad, true).unwrap().with_matmul_precision(mp);
    let b = half_base.with_lora_weights(spec(), &ad, true).unwrap().with_bf16_base().unwrap().with_matmul_precision(mp);
    assert!(b.has_bf16_base() && !a.has_bf16_base());
    (a, b)
}

fn sample(vocab: usize) -> (Vec<u32>, Vec<Vec<u32>>) {
    (tokens(6, vocab, 1), vec![tokens(5, vocab, 2), tokens(2, vocab, 3), tokens(7, vocab, 4)])
}

/// Log-probs and every adapter's gradient of the policy-gradient loss.
fn scored(dec: &Decoder, cfg: &ModelConfig) -> (Vec<f64>, Vec<Vec<f64>>) {
    let (prompt, comps) = sample(cfg.vocab_size);
    let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
    let out = dec.completion_logprobs(&prompt, &refs).unwrap();
    let grads = pg_grads(&out, &ADV);
    (flat(&out.logprobs), dec.vars().iter().map(|(_, v)| flat(grads.get(v).unwrap())).collect())
}

#[test]
fn a_bf16_base_scores_and_trains_like_an_f32_base_rounded_to_bf16() {
    for (name, cfg) in families() {
        for (dtype, mp) in [(DType::F32, Precision::F32), (DType::F32, Precision::Bf16), (DType::F64, Precision::F32)] {
            let (a, b) = pair(&cfg, dtype, mp);
            let (la, ga) = scored(&a, &cfg);
            let (lb, gb) = scored(&b, &cfg);
            // The products read the very same values in the same order: equal to the bit.
            assert_eq!(la, lb, "{name} {dtype:?} {mp:?}: log-probs");
            assert_eq!(ga.len(), cfg.num_hidden_layers * 14, "{name}");
            assert!(ga.iter().any(|g| g.iter().any(|&x| x != 0.0)), "{name}: some adapter gradient is non-zero");
            assert_eq!(ga, gb, "{name} {dtype:?} {mp:?}: adapter gradients");
            // The reference (adapters off) and the exact-product logits too.
            let ids = Tensor::from_vec(tokens(8, cfg.vocab_size, 5), (2, 4), &Device::Cpu).unwrap();
            assert_eq!(flat(&a.without_adapters().forward_logits(&ids).unwrap()), flat(&b.without_adapters().forward_logits(&ids).unwrap()), "{name}");
            // The base read back is the rounded base.
            let (wa, wb) = (a.to_weights().unwrap(), b.to_weights().unwrap());
            for (n, t) in &wa.tensors {
                assert_eq!(flat(t), flat(&wb.tensors[n]), "{name}: {n}");
            }
        }
    }
}

fn generate(dec: &Decoder, cfg: &ModelConfig, snapshot: bool) -> Vec<f32> {
    let half = snapshot.then(|| dec.rollout_weights().unwrap());
    let mut cache = dec.new_cache(3, 24).unwrap();
    let mut out = dec.prefill_logits_with(&tokens(9, cfg.vocab_size, 1), &mut cache, 0, half.as_ref()).unwrap();
    dec.copy_row(&mut cache, 0, &[1, 2]).unwrap();
    for s in 0..3u64 {
        out.extend(dec.decode_step_logits_with(&tokens(3, cfg.vocab_size, 10 + s), &[0, 1, 2], &mut cache, half.as_ref()).unwrap());
    }
    out
}

#[test]
fn a_bf16_base_generates_like_the_rounded_base_with_its_snapshot() {
    for (name, cfg) in families() {
        let (a, b) = pair(&cfg, DType::F32, Precision::F32);
        // The bf16 base is read in bf16 with or without a snapshot; with one, the output projection
        // (kept in f32 by the decoder, tied or not) is read in bf16 too, as the rounded base's is.
        let want = generate(&a, &cfg, true);
        assert!(generate(&b, &cfg, true) == want, "{name}: with a snapshot");
        // The snapshot of a bf16 base is that storage: its only bytes of its own are the output
        // projection's.
        let snap = b.rollout_weights().unwrap();
        let head = cfg.vocab_size * cfg.hidden_size * 2;
        let layer_linear: usize = cfg.params().iter().filter(|p| is_layer_linear(&p.name, &cfg)).map(|p| p.shape.iter().product::<usize>()).sum();
        assert_eq!(snap.bytes(), layer_linear * 2 + head, "{name}");
    }
}

#[test]
fn a_bf16_base_holds_half_the_bytes_of_its_matrices() {
    for (name, cfg) in families() {
        let (a, b) = pair(&cfg, DType::F32, Precision::F32);
        let layer_linear: usize = cfg.params().iter().filter(|p| is_layer_linear(&p.name, &cfg)).map(|p| p.shape.iter().product::<usize>()).sum();
        let all: usize = cfg.param_count();
        let adapters: usize = cfg.lora_params(2, &spec().targets).iter().map(|p| p.shape.iter().product::<usize>()).sum();
        assert_eq!(a.weight_bytes(), 4 * (all + adapters), "{name}: f32 base");
        assert_eq!(b.weight_bytes(), 4 * (all + adapters) - 2 * layer_linear, "{name}: bf16 base");
    }
    // A trainable matrix cannot be held in bf16.
    let cfg = ModelConfig::tiny(cppo_io::Architecture::Llama);
    let err = Decoder::new(&cfg, &weights(&cfg, 1), true, &Device::Cpu).unwrap().with_bf16_base().unwrap_err().to_string();
    assert!(err.contains("model.layers.0.self_attn.q_proj.weight") && err.contains("trainable"), "{err}");
}

#[test]
fn a_frozen_base_is_snapshotted_once_and_its_rollouts_follow_the_adapters() {
    for (name, cfg) in families() {
        for bf16_base in [false, true] {
            let base = Decoder::new(&cfg, &weights(&cfg, 2), false, &Device::Cpu).unwrap();
            let base = if bf16_base { base.with_bf16_base().unwrap() } else { base };
            let dec = base.with_lora_weights(spec(), &adapters(&cfg, 6), true).unwrap();
            let first = dec.rollout_weights().unwrap();
            // An optimizer step moves the adapters only.
            for (_, v) in dec.vars() {
                let t = (v.as_tensor() * 1.5).unwrap();
                v.set(&t).unwrap();
            }
            let again = dec.rollout_weights().unwrap();
            assert!(first.shares_storage_with(&again), "{name}: the snapshot is taken once");
            assert!(first.shares_storage_with(&dec.without_adapters().rollout_weights().unwrap()), "{name}: the reference shares it");
            // A decoder built afresh with the moved adapters takes its own snapshot; the same logits.
            let fresh = Decoder::new(&cfg, &weights(&cfg, 2), false, &Device::Cpu).unwrap();
            let fresh = if bf16_base { fresh.with_bf16_base().unwrap() } else { fresh };
            let fresh = fresh.with_lora_weights(spec(), &dec.adapter_weights().unwrap(), false).unwrap();
            assert!(!fresh.rollout_weights().unwrap().shares_storage_with(&again) || bf16_base, "{name}");
            assert_eq!(generate(&dec, &cfg, true), generate(&fresh, &cfg, true), "{name} bf16 base {bf16_base}");
        }
        // A trainable base is snapshotted anew each time (its weights move).
        let full = Decoder::new(&cfg, &weights(&cfg, 2), true, &Device::Cpu).unwrap();
        assert!(!full.rollout_weights().unwrap().shares_storage_with(&full.rollout_weights().unwrap()), "{name}");
    }
}

/// On a backend (a device), the base stays in bf16: `upload_weights` gives its matrices no f32
/// buffer, only their bf16 storage, and the tape there scores and trains as over the rounded base's
/// f32 matrices, at f32 and at bf16 products.
#[test]
fn on_a_backend_a_bf16_base_is_uploaded_in_bf16_and_trains_like_the_rounded_base() {
    use cppo_kernels::backend::Backend;
    use cppo_kernels::cpu::Cpu;
    let b = Cpu::<f32>::new();
    for (name, cfg) in families() {
        for mp in [Precision::F32, Precision::Bf16] {
            let (rounded_base, half_base) = pair(&cfg, DType::F32, mp);
            let w = half_base.upload_weights(&b).unwrap();
            let layer_linear = cfg.params().iter().filter(|p| is_layer_linear(&p.name, &cfg)).count();
            assert_eq!(w.bufs.iter().filter(|x| b.len(b.view(x)) == 0).count(), layer_linear, "{name}: f32 buffers of the base");
            assert_eq!(w.halves.as_ref().map(|h| h.count()), Some(layer_linear), "{name}: bf16 storage of the base");
            let (prompt, comps) = sample(cfg.vocab_size);
            let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
            let groups: [(&[u32], &[&[u32]]); 1] = [(&prompt, &refs)];
            let n = comps.len() * comps.iter().map(Vec::len).max().unwrap();
            let dlogp: Vec<f32> = (0..n).map(|i| ((i * 3) % 5) as f32 - 2.0).collect();
            let (ra, rb) = (rounded_base.tape_on(&b, &groups, &dlogp).unwrap(), half_base.tape_on(&b, &groups, &dlogp).unwrap());
            assert_eq!(ra.logprobs, rb.logprobs, "{name} {mp:?}: log-probs");
            assert!(ra.grads.iter().any(|(_, g)| g.iter().any(|&x| x != 0.0)), "{name}");
            assert_eq!(ra.grads, rb.grads, "{name} {mp:?}: adapter gradients");
        }
    }
}
