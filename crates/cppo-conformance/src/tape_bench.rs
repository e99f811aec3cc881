//! cppo's side of `scripts/gpu-check.sh`'s comparison with PyTorch: the decoder's training tape
//! (forward and backward of the log-probs of one question's G completions sharing its prompt) and an
//! AdamW step over every weight, on a backend, timed with the weights already in its memory. Generic
//! over the backend, so its logic is tested under the emulation; on a GPU it has never run.

use std::fmt;
use std::time::Instant;

use cppo_kernels::backend::{AdamWParam, AdamWStep, Backend};
use cppo_model::Decoder;

use crate::Rng;

/// The run's shape: one question, its prompt, `group` completions of `new_tokens` each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub group: usize,
    pub prompt_len: usize,
    pub new_tokens: usize,
    pub repeats: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TapeBench {
    pub shape: Shape,
    pub params: usize,
    /// Parameters that got a gradient and an AdamW update (all of them, for a trainable decoder).
    pub trained: usize,
    /// Rows the tape runs (the prompt once, each completion but its last token).
    pub rows: usize,
    /// Completion tokens scored per pass.
    pub scored: usize,
    /// Seconds per pass: the tape forward and backward, then AdamW over every weight.
    pub tape_s: f64,
    pub adamw_s: f64,
}

impl TapeBench {
    /// Scored tokens per second of a whole update (tape and optimizer).
    pub fn update_tokens_per_s(&self) -> f64 {
        self.scored as f64 / (self.tape_s + self.adamw_s)
    }

    /// Rows (tokens through the model) per second of a whole update: the figure comparable with a
    /// PyTorch update's tokens/s over its batch.
    pub fn update_rows_per_s(&self) -> f64 {
        self.rows as f64 / (self.tape_s + self.adamw_s)
    }

    /// The products' rate: 6 x parameters x rows FLOPs per pass (attention left out, as the PyTorch
    /// baseline counts).
    pub fn tflops(&self) -> f64 {
        6.0 * self.params as f64 * self.rows as f64 / self.tape_s / 1e12
    }
}

impl fmt::Display for TapeBench {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.shape;
        write!(
            f,
            "cppo tape: G = {}, prompt {}, {} new tokens ({} rows, {} scored), {:.3} B parameters: tape {:.3} s, AdamW {:.3} s per update; {:.0} tokens/s through the model, {:.0} scored tokens/s; products {:.1} TFLOP/s",
            s.group,
            s.prompt_len,
            s.new_tokens,
            self.rows,
            self.scored,
            self.params as f64 / 1e9,
            self.tape_s,
            self.adamw_s,
            self.update_rows_per_s(),
            self.update_tokens_per_s(),
            self.tflops()
        )
    }
}

/// Times `shape.repeats` updates of `dec` (a trainable decoder: a frozen one has no weight
/// gradients to compute or apply) after one warm-up. Each timed section ends with a read of a value
/// its last operation wrote, so queued device work is inside the timing.
pub fn run<B: Backend<T = f32>>(b: &B, dec: &Decoder, shape: Shape, seed: u64) -> cppo_model::decoder::Result<TapeBench> {
    let vocab = dec.config().vocab_size;
    let mut g = Rng::new(seed);
    let mut toks = |n: usize| -> Vec<u32> { (0..n).map(|_| g.range(0, vocab) as u32).collect() };
    let prompt = toks(shape.prompt_len.max(1));
    let completions: Vec<Vec<u32>> = (0..shape.group).map(|_| toks(shape.new_tokens.max(1))).collect();
    let refs: Vec<&[u32]> = completions.iter().map(|c| c.as_slice()).collect();
    let groups: [(&[u32], &[&[u32]]); 1] = [(&prompt, &refs)];
    let scored = shape.group * shape.new_tokens.max(1);
    let dlogp = vec![1.0 / scored as f32; scored];
    // As the trainer keeps them: bf16 copies of the matrices beside the f32 weights (at bf16
    // products), gradients and moments in flat buffers, one AdamW launch over every tensor.
    let mut w = dec.upload_weights(b)?;
    if dec.matmul_precision() != cppo_kernels::Precision::F32 {
        dec.keep_bf16_copies(b, &mut w, true)?;
    }
    let lens: Vec<usize> = w.bufs.iter().map(|x| b.len(b.view(x))).collect();
    let offsets: Vec<usize> = lens.iter().scan(0, |at, &n| Some(std::mem::replace(at, *at + n))).collect();
    let total = lens.iter().sum();
    let (mut flat_g, mut m, mut v) = (b.zeros(total), b.zeros(total), b.zeros(total));
    let sync = |x: &B::Buf| b.sum_squares(b.slice(b.view(x), 0..1.min(b.len(b.view(x)))));
    let (mut tape_s, mut adamw_s, mut trained_params) = (0.0, 0.0, 0);
    for i in 0..=shape.repeats {
        let step = i as u64 + 1;
        let t0 = Instant::now();
        let run = dec.tape_on_weights(b, &w, &groups, &dlogp)?;
        if let Some(last) = run.grads.iter().flatten().last() {
            sync(last);
        }
        let t1 = Instant::now();
        let s = AdamWStep { lr: 1e-6, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, step, grad_scale: 1.0 };
        let mut trained = Vec::new();
        for (p, gr) in run.grads.iter().enumerate() {
            if let Some(gr) = gr {
                b.copy(b.view(gr), b.slice_mut(b.view_mut(&mut flat_g), offsets[p]..offsets[p] + lens[p]));
                trained.push(p);
            }
        }
        let norm = b.sum_squares(b.view(&flat_g)).sqrt();
        let s = AdamWStep { grad_scale: if norm > 1.0 { 1.0 / (norm + 1e-6) } else { 1.0 }, ..s };
        let mut halves: Vec<Option<&mut B::Half>> = match w.halves.as_mut() {
            Some(h) => h.slots_mut().collect(),
            None => lens.iter().map(|_| None).collect(),
        };
        let params = w
            .bufs
            .iter_mut()
            .zip(halves.iter_mut())
            .enumerate()
            .filter(|(p, _)| trained.contains(p))
            .map(|(p, (x, h))| AdamWParam { w: b.view_mut(x), half: h.take(), offset: offsets[p], decay: true })
            .collect();
        b.adamw_all(params, b.view(&flat_g), b.view_mut(&mut m), b.view_mut(&mut v), &s);
        trained_params = trained.iter().map(|&p| lens[p]).sum();
        if let Some(last) = w.bufs.last() {
            sync(last);
        }
        // The first pass compiles kernels and warms caches: not timed.
        if i > 0 {
            tape_s += t1.duration_since(t0).as_secs_f64();
            adamw_s += t1.elapsed().as_secs_f64();
        }
    }
    let n = shape.repeats.max(1) as f64;
    let rows = shape.prompt_len.max(1) + shape.group * (shape.new_tokens.max(1) - 1);
    let params = total;
    Ok(TapeBench { shape, params, trained: trained_params, rows, scored, tape_s: tape_s / n, adamw_s: adamw_s / n })
}
