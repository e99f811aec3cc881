//! A few policy updates of a small random decoder on both backends, from the same weights: two GRPO
//! steps over a question's G completions and a CPPO step over the k kept ones, against the reference
//! backend that rounds bf16 products' operands as the device does, each scored by the
//! decoder's tape (bf16 products), its loss's gradient (`seq-mean-token-mean` of `-A logp`), the
//! global gradient norm with clipping, and AdamW. Each step compares the log-probs, the loss, the
//! gradient norm and the weights' update, then both backends continue from their own weights.

use candle_core::Device;
use cppo_io::{Architecture, ModelConfig};
use cppo_kernels::backend::{AdamWStep, Backend};
use cppo_kernels::cpu::Cpu;
use cppo_kernels::Precision;
use cppo_model::decoder::{random_weights, BackendWeights, RandomInit};
use cppo_model::Decoder;

use super::{bf16_reference, Report, Rng, BF16};

/// The loss's gradient through products of bf16 operands: a few roundings deep.
const STEP: f64 = 5e-2;

struct Side<'b, B: Backend<T = f32>> {
    b: &'b B,
    w: BackendWeights<B>,
    m: Vec<B::Buf>,
    v: Vec<B::Buf>,
}

impl<'b, B: Backend<T = f32>> Side<'b, B> {
    fn new(b: &'b B, dec: &Decoder) -> Side<'b, B> {
        let w = dec.upload_weights(b).expect("f32 weights");
        let zeros = |w: &BackendWeights<B>| w.bufs.iter().map(|x| b.zeros(b.len(b.view(x)))).collect::<Vec<_>>();
        let (m, v) = (zeros(&w), zeros(&w));
        Side { b, w, m, v }
    }

    fn weights(&self) -> Vec<f32> {
        self.w.bufs.iter().flat_map(|x| self.b.download(self.b.view(x))).collect()
    }

    /// One update: (log-probs, loss, the sum of its terms' magnitudes, gradient norm).
    fn step(&mut self, dec: &Decoder, groups: &[(&[u32], &[&[u32]])], adv: &[f32], lmax: usize, step: u64) -> (Vec<f32>, f64, f64, f64) {
        let b = self.b;
        let k = adv.len();
        let lens: Vec<usize> = groups.iter().flat_map(|(_, c)| c.iter().map(|c| c.len())).collect();
        // loss = -(1/k) sum_j (1/len_j) sum_t A_j logp[j, t]
        let mut dlogp = vec![0f32; k * lmax];
        for j in 0..k {
            for t in 0..lens[j] {
                dlogp[j * lmax + t] = -adv[j] / (k * lens[j]) as f32;
            }
        }
        let run = dec.tape_on_weights(b, &self.w, groups, &dlogp).expect("the tape runs");
        let loss: f64 = run.logprobs.iter().zip(&dlogp).map(|(&l, &d)| l as f64 * d as f64).sum();
        let magnitude: f64 = run.logprobs.iter().zip(&dlogp).map(|(&l, &d)| (l as f64 * d as f64).abs()).sum();
        let norm = run.grads.iter().flatten().map(|g| b.sum_squares(b.view(g))).sum::<f64>().sqrt();
        let max_norm = 1.0;
        let clip = if norm > max_norm { max_norm / (norm + 1e-6) } else { 1.0 };
        // eps = 1: the step is nearly linear in the gradient (|g| << 1), so updates inherit the
        // gradients' bf16 bound instead of Adam's first-step sign(g).
        let s = AdamWStep { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1.0, weight_decay: 0.01, step, grad_scale: clip };
        for (((w, m), v), g) in self.w.bufs.iter_mut().zip(&mut self.m).zip(&mut self.v).zip(&run.grads) {
            let Some(g) = g else { continue };
            b.adamw(b.view_mut(w), b.view(g), b.view_mut(m), b.view_mut(v), &s);
        }
        (run.logprobs, loss, magnitude, norm)
    }
}

pub(super) fn decoder_steps<B: Backend<T = f32>>(b: &B, _c: &Cpu<f32>, g: &mut Rng, r: &mut Report) {
    let cfg = ModelConfig::tiny(Architecture::Qwen2);
    let init = RandomInit { std: 0.15, norm_jitter: 0.3, bias_std: 0.2 };
    let w = random_weights(&cfg, g.next_u64(), &init).expect("random weights");
    let dec = Decoder::new(&cfg, &w, false, &Device::Cpu).expect("a decoder").with_matmul_precision(Precision::Bf16);
    // bf16 products: the reference rounds their operands as the device does, on every CPU.
    let reference = bf16_reference();
    let (mut sb, mut sc) = (Side::new(b, &dec), Side::new(&reference, &dec));
    let vocab = cfg.vocab_size;
    let toks = |g: &mut Rng, lo: usize, hi: usize| -> Vec<u32> {
        let n = g.range(lo, hi);
        (0..n).map(|_| g.range(0, vocab) as u32).collect()
    };
    let group = 4;
    for step in 1..=3u64 {
        let prompt = toks(g, 2, 8);
        let completions: Vec<Vec<u32>> = (0..group).map(|_| toks(g, 1, 9)).collect();
        let rewards: Vec<f32> = (0..group).map(|_| g.range(0, 2) as f32 + g.values(1, 0.1)[0]).collect();
        let mean = rewards.iter().sum::<f32>() / group as f32;
        let std = (rewards.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / group as f32).sqrt();
        let adv: Vec<f32> = rewards.iter().map(|x| (x - mean) / (std + 1e-4)).collect();
        // GRPO trains on all G; CPPO (step 3) on the k = 2 with the largest |A|.
        let (kept, what): (Vec<usize>, &str) = if step < 3 {
            ((0..group).collect(), "GRPO")
        } else {
            let mut order: Vec<usize> = (0..group).collect();
            order.sort_by(|&i, &j| adv[j].abs().total_cmp(&adv[i].abs()));
            (order[..2].to_vec(), "CPPO P = 0.5")
        };
        let refs: Vec<&[u32]> = kept.iter().map(|&i| completions[i].as_slice()).collect();
        let kadv: Vec<f32> = kept.iter().map(|&i| adv[i]).collect();
        let lmax = refs.iter().map(|c| c.len()).max().unwrap_or(0);
        let groups: [(&[u32], &[&[u32]]); 1] = [(&prompt, &refs)];
        let (before_b, before_c) = (sb.weights(), sc.weights());
        let (lb, loss_b, _, norm_b) = sb.step(&dec, &groups, &kadv, lmax, step);
        let (lc, loss_c, magnitude, norm_c) = sc.step(&dec, &groups, &kadv, lmax, step);
        let name = format!("step {step} ({what}, {} completions)", refs.len());
        r.compare(&format!("{name}: log-probs"), &lb, &lc, BF16);
        // The advantages sum to zero, so the loss may cancel to near zero: bound its error by its
        // terms' magnitudes instead of its value. NaN fails.
        let err = (loss_b - loss_c).abs();
        let ok = err <= BF16 * magnitude;
        r.record(&format!("{name}: loss"), ok, format!("{loss_b:.6} against {loss_c:.6} (bound {:.2e})", BF16 * magnitude));
        r.compare(&format!("{name}: gradient norm"), &[norm_b as f32], &[norm_c as f32], STEP);
        let delta = |after: Vec<f32>, before: &[f32]| after.iter().zip(before).map(|(a, b)| a - b).collect::<Vec<f32>>();
        // AdamW turns each gradient element into about lr times its sign in the first steps, so an
        // element whose gradient is within bf16 rounding of zero may move either way on both backends:
        // one in a thousand may (seen: 2 of 19,744 with a clock seed); a wrong update moves far more.
        let (ub, uc) = (delta(sb.weights(), &before_b), delta(sc.weights(), &before_c));
        r.compare_allowing(&format!("{name}: weight update"), &ub, &uc, STEP, uc.len() / 1000);
    }
}
