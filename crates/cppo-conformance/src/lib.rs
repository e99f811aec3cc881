//! Every operation of a `Backend` against the CPU backend (`cppo_kernels::cpu::Cpu<f32>`) on fresh
//! random inputs and odd shapes, outputs poisoned with NaN first where the operation overwrites
//! them, within bounds suited to the precision (exact for copies, about f32 rounding for f32
//! arithmetic, 1e-2 relative where products round their operands to bf16: those against
//! `Reference::rounding_bf16`, which rounds them on every CPU as the device does), then three policy updates
//! of a small random decoder (two GRPO steps, one CPPO step) on both, and the generation engine on
//! both (`engine.rs`). What every backend must pass, in a crate of its own so that any backend can
//! run it: here the reference backend passes it (and the CPU backend, with AVX512-BF16); the emulated
//! tests run it on the CUDA backend over the CPU emulation; `cppo selftest --device cuda` runs it on
//! a GPU (`selftest`, feature `cuda`). `tape_bench` and `gen_bench` time the decoder's update and the
//! generation engine on a backend (`cppo selftest --bench`).

#![forbid(unsafe_code)]

mod compare;
mod engine;
pub mod gen_bench;
#[cfg(feature = "cuda")]
pub mod selftest;
mod steps;
pub mod tape_bench;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use cppo_kernels::attention::{AttnLayout, Attention};
use cppo_kernels::backend::{AdamWParam, AdamWStep, Backend, CacheLayout, CachedQuery, Product};
use cppo_kernels::cpu::Cpu;
use cppo_kernels::logprob::Gather;
use cppo_kernels::reference::Reference;
use cppo_kernels::rope::RopeTable;
use cppo_kernels::Precision;

pub use compare::{compare, Check, Report, Rng};

/// f32 arithmetic in another order (sums of a few hundred terms).
const F32: f64 = 2e-5;
/// Transcendentals (exp, rsqrt) that may be approximated differently, and softmax chains.
const F32_MATH: f64 = 2e-4;
/// Products of bf16-rounded operands, against a reference that rounds them too.
const BF16: f64 = 1e-2;

type Section<B> = fn(&B, &Cpu<f32>, &mut Rng, &mut Report);

/// Runs every section; a section that panics is one failed check naming it (the others still run).
pub fn run<B: Backend<T = f32>>(b: &B, seed: u64) -> Report {
    run_with(b, seed, &mut |_, _| {})
}

/// `run`, telling `done` each section's name and checks as soon as it finishes (a run cut short by a
/// time-out or a crash keeps what was printed).
pub fn run_with<B: Backend<T = f32>>(b: &B, seed: u64, done: &mut dyn FnMut(&str, &[Check])) -> Report {
    let cpu = Cpu::<f32>::new();
    let mut report = Report { backend: b.name().to_string(), seed, checks: Vec::new(), notes: Vec::new() };
    let mut rng = Rng::new(seed);
    let sections: [(&str, Section<B>); 11] = [
        ("memory", memory::<B>),
        ("embedding", embedding::<B>),
        ("rms_norm", rms_norm::<B>),
        ("linear", linear::<B>),
        ("attention", attention::<B>),
        ("swiglu", swiglu::<B>),
        ("logprobs", logprobs::<B>),
        ("generation", generation::<B>),
        ("generation engine", engine::engine::<B>),
        ("adamw", adamw::<B>),
        ("decoder steps", steps::decoder_steps::<B>),
    ];
    for (name, f) in sections {
        let first = report.checks.len();
        let r = catch_unwind(AssertUnwindSafe(|| f(b, &cpu, &mut rng, &mut report)));
        if let Err(e) = r {
            report.record(name, false, format!("panicked: {}", panic_message(e.as_ref())));
        }
        done(name, &report.checks[first..]);
    }
    report
}

/// The text of a caught panic.
pub fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

/// The number of checks `run` makes when no section panics (a run that skipped some cannot pass).
pub const CHECKS: usize = 88;

/// What bf16 results are compared with: products that round their operands to bf16 and sum in f32 or
/// wider, as the device's do, on every CPU. The CPU backend rounds them only where it has AVX512-BF16
/// and multiplies in f32 elsewhere, so on an AVX2-only machine it would disagree with a correct device
/// by bf16 rounding wherever a sum cancels.
fn bf16_reference() -> Reference<f32> {
    Reference::rounding_bf16()
}

fn down<B: Backend<T = f32>>(b: &B, x: &B::Buf) -> Vec<f32> {
    b.download(b.view(x))
}

fn nan(n: usize) -> Vec<f32> {
    vec![f32::NAN; n]
}

fn precisions() -> [(Precision, f64, &'static str); 2] {
    [(Precision::F32, F32, "f32"), (Precision::Bf16, BF16, "bf16")]
}

fn memory<B: Backend<T = f32>>(b: &B, c: &Cpu<f32>, g: &mut Rng, r: &mut Report) {
    let n = g.range(37, 400);
    let x = g.values(n, 3.0);
    let bx = b.upload(&x);
    r.compare("upload, download", &down(b, &bx), &x, 0.0);
    r.compare("zeros", &down(b, &b.zeros(n)), &vec![0.0; n], 0.0);
    let (s, e) = (g.range(0, n / 3), g.range(n / 2, n));
    let mut dst = b.upload(&nan(n));
    b.copy(b.slice(b.view(&bx), s..e), b.slice_mut(b.view_mut(&mut dst), 1..1 + e - s));
    let mut want = nan(n);
    want[1..1 + e - s].copy_from_slice(&x[s..e]);
    r.compare("slice, copy into a slice", &down(b, &dst)[1..1 + e - s], &want[1..1 + e - s], 0.0);
    r.compare("duplicate", &down(b, &b.duplicate(b.view(&bx))), &x, 0.0);
    let y = g.values(n, 2.0);
    let (mut by, mut cy) = (b.upload(&y), y.clone());
    b.add_into(b.view_mut(&mut by), b.view(&bx));
    c.add_into(&mut cy, &x);
    r.compare("add_into", &down(b, &by), &cy, 0.0);
    let (got, want) = (b.sum_squares(b.view(&bx)), c.sum_squares(&x));
    r.compare("sum_squares", &[got as f32], &[want as f32], 1e-6);
}

fn embedding<B: Backend<T = f32>>(b: &B, c: &Cpu<f32>, g: &mut Rng, r: &mut Report) {
    let (vocab, width, n) = (g.range(11, 60), g.range(5, 90), g.range(3, 40));
    let table = g.values(vocab * width, 1.0);
    // Half the tokens from a few ids, so the backward pass adds several rows into one.
    let tokens: Vec<u32> = (0..n).map(|i| if i % 2 == 0 { g.range(0, 3) } else { g.range(0, vocab) } as u32).collect();
    let bt = b.upload(&table);
    r.compare("embed", &down(b, &b.embed(b.view(&bt), width, &tokens)), &c.embed(&table, width, &tokens), 0.0);
    let dx = g.values(n * width, 1.0);
    let d0 = g.values(vocab * width, 1.0);
    let (mut bd, mut cd) = (b.upload(&d0), d0.clone());
    let bdx = b.upload(&dx);
    b.embed_backward(b.view_mut(&mut bd), width, &tokens, b.view(&bdx));
    c.embed_backward(&mut cd, width, &tokens, &dx);
    r.compare("embed_backward (repeated tokens)", &down(b, &bd), &cd, F32);
}

fn rms_norm<B: Backend<T = f32>>(b: &B, c: &Cpu<f32>, g: &mut Rng, r: &mut Report) {
    let (rows, d) = (g.range(1, 24), g.range(3, 400));
    let x = g.values(rows * d, 2.0);
    let w: Vec<f32> = g.values(d, 0.5).iter().map(|v| v + 1.0).collect();
    let eps = 1e-6;
    let (bx, bw) = (b.upload(&x), b.upload(&w));
    r.compare("rms_norm", &down(b, &b.rms_norm(b.view(&bx), b.view(&bw), eps)), &c.rms_norm(&x, &w, eps), F32_MATH);
    let dy = g.values(rows * d, 1.0);
    let bdy = b.upload(&dy);
    for accumulate in [false, true] {
        let d0 = if accumulate { g.values(rows * d, 1.0) } else { nan(rows * d) };
        let (mut bdx, mut cdx) = (b.upload(&d0), d0.clone());
        let bdw = b.rms_norm_backward(b.view(&bx), b.view(&bw), b.view(&bdy), eps, b.view_mut(&mut bdx), accumulate);
        let cdw = c.rms_norm_backward(&x, &w, &dy, eps, &mut cdx, accumulate);
        let how = if accumulate { "added to" } else { "overwritten" };
        r.compare(&format!("rms_norm_backward dx ({how})"), &down(b, &bdx), &cdx, F32_MATH);
        r.compare(&format!("rms_norm_backward dw (dx {how})"), &down(b, &bdw), &cdw, F32_MATH);
    }
}

fn linear<B: Backend<T = f32>>(b: &B, c: &Cpu<f32>, g: &mut Rng, r: &mut Report) {
    let (n, din, dout) = (g.range(1, 30), g.range(3, 150), g.range(3, 120));
    let x = g.values(n * din, 1.0);
    let w = g.values(dout * din, 0.3);
    let bias = g.values(dout, 1.0);
    let (bx, bw, bb) = (b.upload(&x), b.upload(&w), b.upload(&bias));
    let gy = g.values(n * dout, 1.0);
    let bg = b.upload(&gy);
    let case = LinearCase { n, din, dout, x: &x, w: &w, bias: &bias, gy: &gy, bx: &bx, bw: &bw, bb: &bb, bg: &bg };
    for (p, rel, pn) in precisions() {
        match p {
            Precision::F32 => linear_at(b, c, &case, p, rel, pn, g, r),
            _ => linear_at(b, &bf16_reference(), &case, p, rel, pn, g, r),
        }
    }
    r.compare("linear_grad_bias", &down(b, &b.linear_grad_bias(b.view(&bg), dout)), &c.linear_grad_bias(&gy, dout), F32);
    // The generation path: one weight from its bf16 copy, one with a bias, one added to its output.
    let (d2, d3) = (g.range(3, 60), g.range(3, 60));
    let (w2, w3, b2) = (g.values(d2 * din, 0.3), g.values(d3 * din, 0.3), g.values(d2, 1.0));
    let y3 = g.values(n * d3, 1.0);
    let (bw2, bw3, bb2) = (b.upload(&w2), b.upload(&w3), b.upload(&b2));
    let half = b.to_half(b.view(&bw));
    r.compare("upload_half (bf16 storage from the host)", &down(b, &b.widen(&b.upload_half(&c.to_half(&w)))), &c.widen(&c.to_half(&w)), 0.0);
    let (mut o1, mut o2, mut o3) = (b.upload(&nan(n * dout)), b.upload(&nan(n * d2)), b.upload(&y3));
    {
        let mut outs = [
            Product { w: b.view(&bw), half: Some(&half), bias: None, dout, y: b.view_mut(&mut o1), add: false },
            Product { w: b.view(&bw2), half: None, bias: Some(b.view(&bb2)), dout: d2, y: b.view_mut(&mut o2), add: false },
            Product { w: b.view(&bw3), half: None, bias: None, dout: d3, y: b.view_mut(&mut o3), add: true },
        ];
        b.project(b.view(&bx), n, din, &mut outs);
    }
    // The device rounds the input of a product from a bf16 copy: so does the reference, on every CPU.
    let h = bf16_reference();
    let chalf = h.to_half(&w);
    let (mut c1, mut c2, mut c3) = (nan(n * dout), nan(n * d2), y3.clone());
    {
        let mut outs = [
            Product::<Reference<f32>> { w: &w, half: Some(&chalf), bias: None, dout, y: &mut c1, add: false },
            Product::<Reference<f32>> { w: &w2, half: None, bias: Some(&b2), dout: d2, y: &mut c2, add: false },
            Product::<Reference<f32>> { w: &w3, half: None, bias: None, dout: d3, y: &mut c3, add: true },
        ];
        h.project(&x, n, din, &mut outs);
    }
    r.compare("project from a bf16 copy (to_half)", &down(b, &o1), &c1, BF16);
    r.compare("project with a bias", &down(b, &o2), &c2, F32);
    r.compare("project added to y", &down(b, &o3), &c3, F32);
}

/// One linear layer's inputs, on the host and on the backend.
struct LinearCase<'a, B: Backend<T = f32>> {
    n: usize,
    din: usize,
    dout: usize,
    x: &'a [f32],
    w: &'a [f32],
    bias: &'a [f32],
    gy: &'a [f32],
    bx: &'a B::Buf,
    bw: &'a B::Buf,
    bb: &'a B::Buf,
    bg: &'a B::Buf,
}

/// The linear layer's products at precision `p` on `b` against the host backend `h`, which multiplies
/// as `b` should at that precision.
#[allow(clippy::too_many_arguments)]
fn linear_at<B: Backend<T = f32>, H: Backend<T = f32, Buf = Vec<f32>>>(b: &B, h: &H, case: &LinearCase<'_, B>, p: Precision, rel: f64, pn: &str, g: &mut Rng, r: &mut Report) {
    let LinearCase { n, din, dout, x, w, bias, gy, bx, bw, bb, bg } = *case;
    let up = |v: &[f32]| h.upload(v);
    let (hx, hw, hbias, hgy) = (up(x), up(w), up(bias), up(gy));
    let (mut by, mut cy) = (b.upload(&nan(n * dout)), nan(n * dout));
    b.linear(b.view(bx), b.view(bw), Some(b.view(bb)), din, dout, b.view_mut(&mut by), false, p);
    h.linear(h.view(&hx), h.view(&hw), Some(h.view(&hbias)), din, dout, h.view_mut(&mut cy), false, p);
    r.compare(&format!("linear {pn}, bias"), &down(b, &by), &cy, rel);
    let y0 = g.values(n * dout, 1.0);
    let (mut by, mut cy) = (b.upload(&y0), y0.clone());
    b.linear(b.view(bx), b.view(bw), None, din, dout, b.view_mut(&mut by), true, p);
    h.linear(h.view(&hx), h.view(&hw), None, din, dout, h.view_mut(&mut cy), true, p);
    r.compare(&format!("linear {pn}, added to y"), &down(b, &by), &cy, rel);
    for add in [false, true] {
        let d0 = if add { g.values(n * din, 1.0) } else { nan(n * din) };
        let (mut bdx, mut cdx) = (b.upload(&d0), d0.clone());
        b.linear_grad_input(b.view_mut(&mut bdx), b.view(bg), b.view(bw), din, dout, add, p);
        h.linear_grad_input(h.view_mut(&mut cdx), h.view(&hgy), h.view(&hw), din, dout, add, p);
        r.compare(&format!("linear_grad_input {pn}{}", if add { ", added to" } else { "" }), &down(b, &bdx), &cdx, rel);
    }
    // From a weight's bf16 copy (a frozen bf16 base, or the update's copy of a trained weight):
    // as from the weight rounded to bf16, at every precision.
    let (bh, ch) = (b.to_half(b.view(bw)), h.to_half(h.view(&hw)));
    let (mut by, mut cy) = (b.upload(&nan(n * dout)), nan(n * dout));
    b.linear_half(b.view(bx), &bh, Some(b.view(bb)), din, dout, b.view_mut(&mut by), false, p);
    h.linear_half(h.view(&hx), &ch, Some(h.view(&hbias)), din, dout, h.view_mut(&mut cy), false, p);
    r.compare(&format!("linear_half {pn}"), &down(b, &by), &cy, rel);
    let (mut bdx, mut cdx) = (b.upload(&nan(n * din)), nan(n * din));
    b.linear_grad_input_half(b.view_mut(&mut bdx), b.view(bg), &bh, din, dout, false, p);
    h.linear_grad_input_half(h.view_mut(&mut cdx), h.view(&hgy), &ch, din, dout, false, p);
    r.compare(&format!("linear_grad_input_half {pn}"), &down(b, &bdx), &cdx, rel);
    let bgw = b.linear_grad_weight(b.view(bg), b.view(bx), din, dout, p);
    r.compare(&format!("linear_grad_weight {pn}"), &down(b, &bgw), &h.linear_grad_weight(h.view(&hgy), h.view(&hx), din, dout, p), rel);
}

/// Inverse frequencies as Qwen's (theta 10^6) for a head of `d`.
fn rope_table(d: usize, positions: usize) -> RopeTable {
    let inv: Vec<f32> = (0..d / 2).map(|i| 1e6f64.powf(-(2.0 * i as f64) / d as f64) as f32).collect();
    RopeTable::new(&inv, positions).expect("a rope table")
}

fn attention<B: Backend<T = f32>>(b: &B, c: &Cpu<f32>, g: &mut Rng, r: &mut Report) {
    let (kv_heads, group, d) = (g.range(1, 3), g.range(1, 4), 2 * g.range(2, 9));
    let heads = kv_heads * group;
    // Two questions: a prompt and its completions (one of them empty), then a question of one.
    let (p1, p2) = (g.range(1, 9), g.range(1, 6));
    let l1 = [g.range(1, 8), 0, g.range(1, 5), g.range(1, 9)];
    let l2 = [g.range(1, 7)];
    let layout = AttnLayout::shared_prefixes(&[(p1, &l1), (p2, &l2)]);
    let rows = layout.rows;
    let max_pos = layout.positions.iter().max().map_or(1, |p| p + 1);
    let a = Attention { layout: Arc::new(layout), rope: Arc::new(rope_table(d, max_pos + 3)), heads, kv_heads, head_dim: d };
    let q = g.values(rows * heads * d, 1.5);
    let k = g.values(rows * kv_heads * d, 1.5);
    let v = g.values(rows * kv_heads * d, 1.0);
    let dout = g.values(rows * heads * d, 1.0);
    let (bq, bk, bv, bo) = (b.upload(&q), b.upload(&k), b.upload(&v), b.upload(&dout));
    let shape = format!("{rows} rows, {heads} heads over {kv_heads}, d {d}");
    r.compare(&format!("attention ({shape})"), &down(b, &b.attention(&a, b.view(&bq), b.view(&bk), b.view(&bv))), &c.attention(&a, &q, &k, &v), F32_MATH);
    let (dq, dk, dv) = b.attention_backward(&a, b.view(&bq), b.view(&bk), b.view(&bv), b.view(&bo));
    let (cq, ck, cv) = c.attention_backward(&a, &q, &k, &v, &dout);
    r.compare("attention_backward dq", &down(b, &dq), &cq, F32_MATH);
    r.compare("attention_backward dk", &down(b, &dk), &ck, F32_MATH);
    r.compare("attention_backward dv", &down(b, &dv), &cv, F32_MATH);
}

fn swiglu<B: Backend<T = f32>>(b: &B, c: &Cpu<f32>, g: &mut Rng, r: &mut Report) {
    let n = g.range(33, 700);
    let (gate, up, dy) = (g.values(n, 4.0), g.values(n, 2.0), g.values(n, 1.0));
    let (bg, bu, bd) = (b.upload(&gate), b.upload(&up), b.upload(&dy));
    r.compare("swiglu", &down(b, &b.swiglu(b.view(&bg), b.view(&bu))), &c.swiglu(&gate, &up), F32_MATH);
    let (dg, du) = b.swiglu_backward(b.view(&bg), b.view(&bu), b.view(&bd));
    let (cg, cu) = c.swiglu_backward(&gate, &up, &dy);
    r.compare("swiglu_backward dgate", &down(b, &dg), &cg, F32_MATH);
    r.compare("swiglu_backward dup", &down(b, &du), &cu, F32_MATH);
}

fn logprobs<B: Backend<T = f32>>(b: &B, c: &Cpu<f32>, g: &mut Rng, r: &mut Report) {
    let (rows, width, vocab) = (g.range(4, 12), g.range(5, 48), g.range(60, 260));
    let h = g.values(rows * width, 1.0);
    let head = g.values(vocab * width, 0.5);
    // A row scored twice, output slots out of order with gaps (zeros there).
    let slots = g.range(3, rows + 1);
    let mut grows: Vec<usize> = (0..slots).map(|_| g.range(0, rows)).collect();
    grows[0] = grows[slots - 1];
    let out_len = slots + 3;
    let out_index: Vec<usize> = (0..slots).map(|s| (s * 5 + 2) % out_len).collect::<Vec<_>>();
    let mut seen = vec![false; out_len];
    let out_index: Vec<usize> = out_index
        .into_iter()
        .map(|mut o| {
            while seen[o] {
                o = (o + 1) % out_len;
            }
            seen[o] = true;
            o
        })
        .collect();
    let gather = Gather {
        rows: grows,
        targets: (0..slots).map(|_| g.range(0, vocab) as u32).collect(),
        out_index,
        out_shape: vec![out_len],
        chunk_cols: g.range(9, 50),
    };
    let (bh, bhead) = (b.upload(&h), b.upload(&head));
    let dlogp = g.values(out_len, 1.0);
    for ((p, rel, pn), keep) in precisions().into_iter().zip([true, false]) {
        let case = LogprobCase { gather: &gather, h: &h, head: &head, bh: &bh, bhead: &bhead, dlogp: &dlogp, rows, width, vocab, keep };
        match p {
            Precision::F32 => logprobs_at(b, c, &case, p, rel, pn, g, r),
            _ => logprobs_at(b, &bf16_reference(), &case, p, rel, pn, g, r),
        }
    }
}

/// One output projection's inputs, on the host and on the backend.
struct LogprobCase<'a, B: Backend<T = f32>> {
    gather: &'a Gather,
    h: &'a [f32],
    head: &'a [f32],
    bh: &'a B::Buf,
    bhead: &'a B::Buf,
    dlogp: &'a [f32],
    rows: usize,
    width: usize,
    vocab: usize,
    keep: bool,
}

/// The log-probs and their backward at precision `p` on `b` against the host backend `hb`, which
/// multiplies as `b` should at that precision.
#[allow(clippy::too_many_arguments)]
fn logprobs_at<B: Backend<T = f32>, H: Backend<T = f32, Buf = Vec<f32>>>(b: &B, hb: &H, case: &LogprobCase<'_, B>, p: Precision, rel: f64, pn: &str, g: &mut Rng, r: &mut Report) {
    let LogprobCase { gather, h, head, bh, bhead, dlogp, rows, width, vocab, keep } = *case;
    let (hh, hhead) = (hb.upload(h), hb.upload(head));
    let rel = rel.max(F32_MATH);
    let what = format!("{pn}, {} chunks{}", vocab.div_ceil(gather.chunk_cols), if keep { ", logits kept" } else { "" });
    let bs = b.logprobs(gather, b.view(bh), b.view(bhead), vocab, width, keep, p);
    let cs = hb.logprobs(gather, hb.view(&hh), hb.view(&hhead), vocab, width, keep, p);
    r.compare(&format!("logprobs ({what})"), &bs.out, &cs.out, rel);
    let (be, ce): (Vec<f32>, Vec<f32>) = (bs.entropy.iter().map(|&e| e as f32).collect(), cs.entropy.iter().map(|&e| e as f32).collect());
    r.compare(&format!("logprobs entropy ({what})"), &be, &ce, rel);
    r.compare(&format!("logprobs lse ({what})"), &down(b, &bs.lse), &cs.lse, rel);
    let dh0 = g.values(rows * width, 1.0);
    let (mut bdh, mut cdh) = (b.upload(&dh0), dh0.clone());
    let (mut bdw, mut cdw) = (b.upload(&nan(vocab * width)), nan(vocab * width));
    b.logprobs_backward(gather, bs.logits, b.view(&bs.lse), b.view(bh), b.view(bhead), dlogp, vocab, width, b.view_mut(&mut bdh), Some(b.view_mut(&mut bdw)), p);
    hb.logprobs_backward(gather, cs.logits, hb.view(&cs.lse), hb.view(&hh), hb.view(&hhead), dlogp, vocab, width, hb.view_mut(&mut cdh), Some(hb.view_mut(&mut cdw)), p);
    r.compare(&format!("logprobs_backward dh ({what})"), &down(b, &bdh), &cdh, rel);
    r.compare(&format!("logprobs_backward dhead ({what})"), &down(b, &bdw), &cdw, rel);
    // With the head's bf16 copy (the trainer's, at bf16 products): the same results, logits
    // recomputed in the backward.
    let half = b.to_half(b.view(bhead));
    let bs = b.logprobs_half(gather, b.view(bh), b.view(bhead), &half, vocab, width, false, p);
    let cs = hb.logprobs(gather, hb.view(&hh), hb.view(&hhead), vocab, width, false, p);
    r.compare(&format!("logprobs_half ({pn})"), &bs.out, &cs.out, rel);
    let (mut bdh, mut cdh) = (b.upload(&dh0), dh0.clone());
    let (mut bdw, mut cdw) = (b.upload(&nan(vocab * width)), nan(vocab * width));
    b.logprobs_backward_half(gather, None, b.view(&bs.lse), b.view(bh), b.view(bhead), &half, dlogp, vocab, width, b.view_mut(&mut bdh), Some(b.view_mut(&mut bdw)), p);
    hb.logprobs_backward(gather, None, hb.view(&cs.lse), hb.view(&hh), hb.view(&hhead), dlogp, vocab, width, hb.view_mut(&mut cdh), Some(hb.view_mut(&mut cdw)), p);
    r.compare(&format!("logprobs_backward_half dh ({pn})"), &down(b, &bdh), &cdh, rel);
    r.compare(&format!("logprobs_backward_half dhead ({pn})"), &down(b, &bdw), &cdw, rel);
}

fn generation<B: Backend<T = f32>>(b: &B, c: &Cpu<f32>, g: &mut Rng, r: &mut Report) {
    let (kv_heads, group, d) = (g.range(1, 3), g.range(1, 4), 2 * g.range(2, 12));
    let heads = kv_heads * group;
    let max_len = g.range(9, 20);
    let table = rope_table(d, max_len);
    // rope over rows at scattered positions.
    let n = g.range(2, 9);
    let positions: Vec<usize> = (0..n).map(|_| g.range(0, max_len)).collect();
    let x = g.values(n * heads * d, 2.0);
    let (mut bx, mut cx) = (b.upload(&x), x.clone());
    b.rope(b.view_mut(&mut bx), heads, &positions, &table);
    c.rope(&mut cx, heads, &positions, &table);
    r.compare("rope", &down(b, &bx), &cx, F32);
    // A cache of 4 rows: a prompt written into row 0, copied into rows 1..3, then one decode step.
    let l = CacheLayout { kv_heads, max_len, head_dim: d };
    let cache_rows = 4;
    let size = cache_rows * kv_heads * max_len * d;
    let (k0, v0) = (g.values(size, 1.0), g.values(size, 1.0));
    let (mut bk, mut bv, mut ck, mut cv) = (b.upload(&k0), b.upload(&v0), k0.clone(), v0.clone());
    let prompt = g.range(2, max_len - 3);
    let kw = kv_heads * d;
    let (pk, pv) = (g.values(prompt * kw, 1.5), g.values(prompt * kw, 1.0));
    let slots: Vec<(usize, usize)> = (0..prompt).map(|p| (0, p)).collect();
    let (bpk, bpv) = (b.upload(&pk), b.upload(&pv));
    b.cache_write(b.view_mut(&mut bk), b.view_mut(&mut bv), &l, b.view(&bpk), b.view(&bpv), &slots);
    c.cache_write(&mut ck, &mut cv, &l, &pk, &pv, &slots);
    r.compare("cache_write keys (a prompt)", &down(b, &bk), &ck, 0.0);
    r.compare("cache_write values (a prompt)", &down(b, &bv), &cv, 0.0);
    // The prompt's queries, causally over the cache (a prefill on row 0).
    let pq = g.values(prompt * heads * d, 1.5);
    let prefill: Vec<CachedQuery> = (0..prompt).map(|p| CachedQuery { row: 0, visible: p + 1 }).collect();
    let bpq = b.upload(&pq);
    let (mut bo, mut co) = (b.upload(&nan(prompt * heads * d)), nan(prompt * heads * d));
    b.cached_attention(b.view(&bpq), b.view(&bk), b.view(&bv), &l, heads, &prefill, b.view_mut(&mut bo));
    c.cached_attention(&pq, &ck, &cv, &l, heads, &prefill, &mut co);
    r.compare("cached_attention (a prefill)", &down(b, &bo), &co, F32_MATH);
    for (bc, cc, what) in [(&mut bk, &mut ck, "keys"), (&mut bv, &mut cv, "values")] {
        b.cache_copy_row(b.view_mut(bc), &l, 0, prompt, &[1, 2, 0, 3]);
        c.cache_copy_row(cc, &l, 0, prompt, &[1, 2, 0, 3]);
        r.compare(&format!("cache_copy_row {what}"), &down(b, bc), cc, 0.0);
    }
    // One decode step: rows 1..3 each write a token at `prompt` and attend to what they see.
    let step: Vec<(usize, usize)> = (1..cache_rows).map(|row| (row, prompt)).collect();
    let (sk, sv) = (g.values(step.len() * kw, 1.5), g.values(step.len() * kw, 1.0));
    let (bsk, bsv) = (b.upload(&sk), b.upload(&sv));
    b.cache_write(b.view_mut(&mut bk), b.view_mut(&mut bv), &l, b.view(&bsk), b.view(&bsv), &step);
    c.cache_write(&mut ck, &mut cv, &l, &sk, &sv, &step);
    let queries: Vec<CachedQuery> = step.iter().map(|&(row, p)| CachedQuery { row, visible: p + 1 - (row == 3) as usize }).collect();
    let sq = g.values(queries.len() * heads * d, 1.5);
    let bsq = b.upload(&sq);
    let (mut bo, mut co) = (b.upload(&nan(sq.len())), nan(sq.len()));
    b.cached_attention(b.view(&bsq), b.view(&bk), b.view(&bv), &l, heads, &queries, b.view_mut(&mut bo));
    c.cached_attention(&sq, &ck, &cv, &l, heads, &queries, &mut co);
    r.compare("cached_attention (a decode step)", &down(b, &bo), &co, F32_MATH);
}

fn adamw<B: Backend<T = f32>>(b: &B, c: &Cpu<f32>, g: &mut Rng, r: &mut Report) {
    let n = g.range(33, 900);
    let (w, grad, m) = (g.values(n, 1.0), g.values(n, 0.1), g.values(n, 0.01));
    let v: Vec<f32> = g.values(n, 1e-3).iter().map(|x| x.abs()).collect();
    let s = AdamWStep { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.1, step: g.range(1, 50) as u64, grad_scale: 0.7 };
    let (mut bw, bg, mut bm, mut bv) = (b.upload(&w), b.upload(&grad), b.upload(&m), b.upload(&v));
    let (mut cw, mut cm, mut cv) = (w.clone(), m.clone(), v.clone());
    b.adamw(b.view_mut(&mut bw), b.view(&bg), b.view_mut(&mut bm), b.view_mut(&mut bv), &s);
    c.adamw(&mut cw, &grad, &mut cm, &mut cv, &s);
    r.compare("adamw weights", &down(b, &bw), &cw, F32);
    r.compare("adamw first moment", &down(b, &bm), &cm, F32);
    r.compare("adamw second moment", &down(b, &bv), &cv, F32);

    // Every parameter at once over flat gradients and moments, two of three keeping a bf16 copy.
    let lens = [g.range(1, 300), g.range(300, 700), g.range(1, 40)];
    let total: usize = lens.iter().sum();
    let (grad, m) = (g.values(total, 0.1), g.values(total, 0.01));
    let v: Vec<f32> = g.values(total, 1e-3).iter().map(|x| x.abs()).collect();
    let ws: Vec<Vec<f32>> = lens.iter().map(|&n| g.values(n, 1.0)).collect();
    let (bg, mut bm, mut bv) = (b.upload(&grad), b.upload(&m), b.upload(&v));
    let mut bws: Vec<B::Buf> = ws.iter().map(|w| b.upload(w)).collect();
    let mut bhs: Vec<B::Half> = ws.iter().map(|w| b.to_half(b.view(&b.upload(&nan(w.len()))))).collect();
    let (mut cws, mut chs) = (ws.clone(), ws.iter().map(|w| c.to_half(w)).collect::<Vec<_>>());
    let (mut cm, mut cv) = (m.clone(), v.clone());
    let offsets: Vec<usize> = lens.iter().scan(0, |at, &n| Some(std::mem::replace(at, *at + n))).collect();
    let params = |n: usize| (n != 1, n != 2);
    let bp = bws.iter_mut().zip(bhs.iter_mut()).enumerate().map(|(i, (w, h))| AdamWParam { w: b.view_mut(w), half: params(i).0.then_some(h), offset: offsets[i], decay: params(i).1 }).collect();
    b.adamw_all(bp, b.view(&bg), b.view_mut(&mut bm), b.view_mut(&mut bv), &s);
    let cp = cws.iter_mut().zip(chs.iter_mut()).enumerate().map(|(i, (w, h))| AdamWParam { w: &mut w[..], half: params(i).0.then_some(h), offset: offsets[i], decay: params(i).1 }).collect();
    c.adamw_all(cp, &grad, &mut cm, &mut cv, &s);
    for i in 0..lens.len() {
        r.compare(&format!("adamw_all weights of parameter {i}"), &down(b, &bws[i]), &cws[i], F32);
        if params(i).0 {
            // One bf16 step apart at most where the f32 results straddle a rounding tie (FMA on a GPU).
            r.compare(&format!("adamw_all bf16 copy of parameter {i}"), &down(b, &b.widen(&bhs[i])), &c.widen(&chs[i]), BF16);
        }
    }
    r.compare("adamw_all first moments", &down(b, &bm), &cm, F32);
    r.compare("adamw_all second moments", &down(b, &bv), &cv, F32);
}

#[cfg(test)]
mod tests {
    use super::*;
    use cppo_kernels::reference::Reference;

    /// The suite accepts an independent correct backend (the plain-loop reference, f64 sums, bf16
    /// products rounded as a device rounds them), with every check made; so a failure on another
    /// backend is that backend's.
    #[test]
    fn the_reference_backend_passes_every_check() {
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
        let report = run(&Reference::<f32>::rounding_bf16(), seed);
        assert_eq!((report.failed(), report.checks.len()), (0, CHECKS), "{report}");
    }

    /// On every CPU the CPU backend passes every check but those of bf16 products, which it multiplies
    /// unrounded without AVX512-BF16 (`bf16_reference`); the suite runs it whole, so a check that
    /// panics or goes missing fails here too.
    #[test]
    fn the_cpu_backend_passes_every_check_but_bf16_products_on_any_cpu() {
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
        let report = run(&Cpu::<f32>::new(), seed);
        assert_eq!(report.checks.len(), CHECKS, "{report}");
        let failed: Vec<&Check> = report.checks.iter().filter(|c| !c.passed).collect();
        for c in &failed {
            eprintln!("{c}");
        }
        assert!(failed.iter().all(|c| c.name.contains("bf16")), "a check other than a bf16 product's failed:\n{report}");
    }

    /// The CPU backend rounds bf16 products' operands where it has AVX512-BF16: there its bf16 path, an
    /// implementation independent of the reference's, passes the bf16 checks too.
    #[test]
    #[cfg_attr(not(cppo_isa_avx512bf16), ignore = "the CPU backend rounds bf16 products only with AVX512-BF16, which this CPU lacks or CPPO_MAX_ISA caps")]
    fn the_cpu_backend_passes_every_check_with_avx512bf16() {
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
        let report = run(&Cpu::<f32>::new(), seed);
        assert_eq!((report.failed(), report.checks.len()), (0, CHECKS), "{report}");
    }
}
