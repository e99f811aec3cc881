//! The training forward pass over packed rows, with the layer activations its backward pass needs kept
//! on a tape, and that backward pass written out by hand: every operation is a call on the backend, so
//! the same code trains on any device.
//!
//! Going through an autograd graph for every op would cost a zero-filled buffer and an extra add per
//! intermediate tensor, and a separate add per residual connection; here gradients flow into
//! preallocated buffers (residual gradients accumulate in place) and only the weight gradients are
//! returned.

use std::sync::{Arc, Mutex};

use candle_core::Result;
use cppo_io::params::LayerParam::*;
use cppo_kernels::attention::{AttnLayout, Attention};
use cppo_kernels::backend::{Backend, Scored};
use cppo_kernels::logprob::Gather;
use cppo_kernels::{Float, Precision};

use super::{adapter, Ctx};

/// What a layer's backward pass needs from its forward pass (the norms and the MLP activation are
/// recomputed instead, being cheap).
struct Saved<B: Backend> {
    x: B::Buf,
    q_raw: Option<B::Buf>,
    k_raw: Option<B::Buf>,
    q: B::Buf,
    k: B::Buf,
    v: B::Buf,
    a: B::Buf,
    x_mid: B::Buf,
    gate: B::Buf,
    up: B::Buf,
}

pub(crate) struct Tape<B: Backend> {
    attn: Attention,
    /// The forward's dropout masks on the adapters' inputs, which the backward recomputes.
    dropout: Option<super::dropout::DropoutKey>,
    /// The forward's products' precision, which the backward's follow.
    precision: Precision,
    /// The temperature the log-probs were taken at (`tempered_norm`).
    temperature: f64,
    tokens: Vec<u32>,
    layers: Vec<Saved<B>>,
    x_final: B::Buf,
    gather: Gather,
    lse: B::Buf,
    /// The output projection's logits, when the forward kept them; the backward pass takes them, so a
    /// second backward recomputes.
    logits: Mutex<Option<Vec<B::Buf>>>,
}

/// `y = x @ w_i^T (+ bias)` as a new buffer of `n` rows, for weight `i`.
#[allow(clippy::too_many_arguments)]
fn linear<B: Backend>(m: &Ctx<B>, x: &B::Buf, i: usize, bias: Option<B::View<'_>>, n: usize, din: usize, dout: usize, p: Precision) -> B::Buf {
    let mut y = m.b.zeros(n * dout);
    m.linear(i, m.b.view(x), bias, din, dout, m.b.view_mut(&mut y), false, p);
    y
}

/// The layers over the embedded rows `x`, returning the last layer's output (before the final norm),
/// with each layer's saved activations when `save`.
fn layers<B: Backend>(m: &Ctx<B>, mut x: B::Buf, attn: &Attention, n: usize, save: bool) -> (B::Buf, Vec<Saved<B>>) {
    let (b, w, ix, cfg, mp) = (m.b, m.w, m.ix, m.cfg, m.mp);
    let (h, inter, eps) = (cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps);
    let (qw, kw) = (cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim);
    let mut saved = Vec::with_capacity(if save { ix.layers() } else { 0 });
    for li in 0..ix.layers() {
        let at = |p| w[ix.at(li, p)];
        let id = |p| ix.at(li, p);
        let opt = |p| ix.get(li, p).map(|i| w[i]);
        let hn = b.rms_norm(b.view(&x), at(InputNorm), eps);
        let mut q = linear(m, &hn, id(Q), opt(QBias), n, h, qw, mp);
        let mut k = linear(m, &hn, id(K), opt(KBias), n, h, kw, mp);
        let mut v = linear(m, &hn, id(V), opt(VBias), n, h, kw, mp);
        adapter::forward(m, li, Q, b.view(&hn), n, h, qw, b.view_mut(&mut q));
        adapter::forward(m, li, K, b.view(&hn), n, h, kw, b.view_mut(&mut k));
        adapter::forward(m, li, V, b.view(&hn), n, h, kw, b.view_mut(&mut v));
        let (mut q_raw, mut k_raw) = (None, None);
        if let (Some(qn), Some(kn)) = (opt(QNorm), opt(KNorm)) {
            let qn_out = b.rms_norm(b.view(&q), qn, eps);
            let kn_out = b.rms_norm(b.view(&k), kn, eps);
            q_raw = Some(std::mem::replace(&mut q, qn_out));
            k_raw = Some(std::mem::replace(&mut k, kn_out));
        }
        let a = b.attention(attn, b.view(&q), b.view(&k), b.view(&v));
        let mut x_mid = b.duplicate(b.view(&x));
        m.linear(id(O), b.view(&a), None, qw, h, b.view_mut(&mut x_mid), true, mp);
        adapter::forward(m, li, O, b.view(&a), n, qw, h, b.view_mut(&mut x_mid));
        let h2 = b.rms_norm(b.view(&x_mid), at(PostNorm), eps);
        let mut gate = linear(m, &h2, id(Gate), None, n, h, inter, mp);
        let mut up = linear(m, &h2, id(Up), None, n, h, inter, mp);
        adapter::forward(m, li, Gate, b.view(&h2), n, h, inter, b.view_mut(&mut gate));
        adapter::forward(m, li, Up, b.view(&h2), n, h, inter, b.view_mut(&mut up));
        let act = b.swiglu(b.view(&gate), b.view(&up));
        let mut x_next = b.duplicate(b.view(&x_mid));
        m.linear(id(Down), b.view(&act), None, inter, h, b.view_mut(&mut x_next), true, mp);
        adapter::forward(m, li, Down, b.view(&act), n, inter, h, b.view_mut(&mut x_next));
        let x_in = std::mem::replace(&mut x, x_next);
        if save {
            saved.push(Saved { x: x_in, q_raw, k_raw, q, k, v, a, x_mid, gate, up });
        }
    }
    (x, saved)
}

fn attention<B: Backend>(m: &Ctx<B>, layout: AttnLayout, n: usize) -> Result<Attention> {
    let cfg = m.cfg;
    let (heads, kvh, hd) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
    let attn = Attention { layout: Arc::new(layout), rope: m.rope.clone(), heads, kv_heads: kvh, head_dim: hd };
    attn.check(&(n, heads * hd).into(), &(n, kvh * hd).into(), &(n, kvh * hd).into())?;
    Ok(attn)
}

/// Log-probs at temperature T are those of `logits / T = (norm(x) / T) @ lm_head^T`, and
/// `norm(x) / T` is the final RMS norm with its weight divided by T. Folding 1/T into that weight (a
/// hidden-size vector) leaves the output projection and the log-prob kernels untouched on every
/// backend, and the backward pass through the norm with the same weight gives the residual stream's
/// gradient; only the norm weight's own gradient needs the extra 1/T (`backward`). None at T = 1, so
/// that nothing is rescaled there.
fn tempered_norm<B: Backend>(m: &Ctx<B>, temperature: f64) -> Option<B::Buf> {
    if temperature == 1.0 {
        return None;
    }
    let t = B::T::of(temperature);
    let w: Vec<B::T> = m.b.download(m.w[m.ix.norm]).into_iter().map(|x| x / t).collect();
    Some(m.b.upload(&w))
}

/// The final norm of the rows `x`, at the tape's temperature (`tempered_norm`).
fn final_norm<B: Backend>(m: &Ctx<B>, x: &B::Buf, tempered: Option<&B::Buf>) -> B::Buf {
    let eps = m.cfg.rms_norm_eps;
    match tempered {
        Some(w) => m.b.rms_norm(m.b.view(x), m.b.view(w), eps),
        None => m.b.rms_norm(m.b.view(x), m.w[m.ix.norm], eps),
    }
}

/// Runs the forward pass and scores the gathered targets under `softmax(logits / temperature)`; keeps
/// the tape when `save` (for a later backward pass).
pub(crate) fn forward<B: Backend>(
    m: &Ctx<B>,
    tokens: &[u32],
    layout: AttnLayout,
    gather: Gather,
    save: bool,
    temperature: f64,
) -> Result<(Scored<B>, Option<Tape<B>>)> {
    let (b, w, ix, cfg) = (m.b, m.w, m.ix, m.cfg);
    let h = cfg.hidden_size;
    let n = tokens.len();
    let attn = attention(m, layout, n)?;
    let x = b.embed(w[ix.embed], h, tokens);
    let (x, saved) = layers(m, x, &attn, n, save);
    let hn = final_norm(m, &x, tempered_norm(m, temperature).as_ref());
    let mut scored = match m.half[ix.lm_head] {
        Some(hh) => b.logprobs_half(&gather, b.view(&hn), w[ix.lm_head], hh, cfg.vocab_size, h, save, m.mp),
        None => b.logprobs(&gather, b.view(&hn), w[ix.lm_head], cfg.vocab_size, h, save, m.mp),
    };
    let tape = save.then(|| Tape {
        attn,
        dropout: m.dropout,
        precision: m.mp,
        temperature,
        tokens: tokens.to_vec(),
        layers: saved,
        x_final: x,
        gather,
        lse: b.duplicate(b.view(&scored.lse)),
        logits: Mutex::new(scored.logits.take()),
    });
    Ok((scored, tape))
}

/// Logits `(rows, vocab)` of every row, with exact products whatever the decoder's precision (no tape).
pub(crate) fn logits<B: Backend>(m: &Ctx<B>, tokens: &[u32], layout: AttnLayout) -> Result<B::Buf> {
    let m = &Ctx { mp: Precision::F32, ..*m };
    let (b, w, ix, cfg) = (m.b, m.w, m.ix, m.cfg);
    let (h, vocab, n) = (cfg.hidden_size, cfg.vocab_size, tokens.len());
    let attn = attention(m, layout, n)?;
    let (x, _) = layers(m, b.embed(w[ix.embed], h, tokens), &attn, n, false);
    let hn = b.rms_norm(b.view(&x), w[ix.norm], cfg.rms_norm_eps);
    Ok(linear(m, &hn, ix.lm_head, None, n, h, vocab, Precision::F32))
}

/// The gradient of every weight `need` asks for (indexed like the parameters; `None` for the others)
/// given `dlogp`, the gradient of the scored output (in the gather's output layout). A weight not
/// asked for costs no weight-gradient product (a frozen base under LoRA): only the gradients of the
/// activations flow through it.
pub(crate) fn backward<B: Backend>(m: &Ctx<B>, tape: &Tape<B>, dlogp: &[B::T], need: &[bool]) -> Vec<Option<B::Buf>> {
    let mut grads: Vec<Option<B::Buf>> = (0..m.w.len()).map(|_| None).collect();
    backward_with(m, tape, dlogp, need, &mut |i, g| grads[i] = Some(g));
    grads
}

/// `backward`, handing each weight's gradient to `sink` as soon as its layer is done (with its
/// index), so a caller that sums them elsewhere (a device trainer's flat buffer) never holds more
/// than one layer's.
pub(crate) fn backward_with<B: Backend>(m: &Ctx<B>, tape: &Tape<B>, dlogp: &[B::T], need: &[bool], sink: &mut dyn FnMut(usize, B::Buf)) {
    let m = &Ctx { dropout: tape.dropout, ..*m };
    let (b, w, ix, cfg) = (m.b, m.w, m.ix, m.cfg);
    let (h, inter, eps, vocab) = (cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps, cfg.vocab_size);
    let (qw, kw) = (cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim);
    let n = tape.tokens.len();
    let mp = tape.precision;
    assert_eq!(need.len(), w.len(), "one flag per weight");
    let mut grads: Vec<Option<B::Buf>> = (0..m.w.len()).map(|_| None).collect();
    let mut given = vec![false; m.w.len()];
    let mut flush = |grads: &mut [Option<B::Buf>]| {
        for (i, g) in grads.iter_mut().enumerate() {
            if let Some(g) = g.take() {
                assert!(!given[i], "parameter {i}: two gradients");
                given[i] = true;
                sink(i, g);
            }
        }
    };
    // A weight-gradient product, run only for a weight that wants it.
    let wgrad = |i: usize, g: &B::Buf, x: &B::Buf, din: usize, dout: usize| need[i].then(|| b.linear_grad_weight(b.view(g), b.view(x), din, dout, mp));
    let keep = |i: usize, g: B::Buf| need[i].then_some(g);

    let tempered = tempered_norm(m, tape.temperature);
    let hn = final_norm(m, &tape.x_final, tempered.as_ref());
    let mut dhn = b.zeros(n * h);
    let head_grad = need[ix.lm_head] || need[ix.embed];
    let mut dhead = b.zeros(if head_grad { vocab * h } else { 0 });
    let kept = tape.logits.lock().ok().and_then(|mut l| l.take());
    let dhead_view = if head_grad { Some(b.view_mut(&mut dhead)) } else { None };
    match m.half[ix.lm_head] {
        Some(hh) => b.logprobs_backward_half(&tape.gather, kept, b.view(&tape.lse), b.view(&hn), w[ix.lm_head], hh, dlogp, vocab, h, b.view_mut(&mut dhn), dhead_view, mp),
        None => b.logprobs_backward(&tape.gather, kept, b.view(&tape.lse), b.view(&hn), w[ix.lm_head], dlogp, vocab, h, b.view_mut(&mut dhn), dhead_view, mp),
    }
    drop(hn);
    // dx: the gradient of the residual stream, walked back through the layers in place.
    let mut dx = b.zeros(n * h);
    let g_norm = match &tempered {
        // The gradient of the tempered weight w / T; the weight's own is 1/T of it.
        Some(wt) => {
            let g = b.rms_norm_backward(b.view(&tape.x_final), b.view(wt), b.view(&dhn), eps, b.view_mut(&mut dx), false);
            let t = B::T::of(tape.temperature);
            b.upload(&b.download(b.view(&g)).into_iter().map(|x| x / t).collect::<Vec<_>>())
        }
        None => b.rms_norm_backward(b.view(&tape.x_final), w[ix.norm], b.view(&dhn), eps, b.view_mut(&mut dx), false),
    };
    grads[ix.norm] = keep(ix.norm, g_norm);
    drop(dhn);

    for (li, s) in tape.layers.iter().enumerate().rev() {
        let at = |p| w[ix.at(li, p)];
        let id = |p| ix.at(li, p);
        // MLP: x_next = x_mid + down(swiglu(gate(h2), up(h2))), h2 = norm(x_mid).
        let h2 = b.rms_norm(b.view(&s.x_mid), at(PostNorm), eps);
        let act = b.swiglu(b.view(&s.gate), b.view(&s.up));
        grads[id(Down)] = wgrad(id(Down), &dx, &act, inter, h);
        let mut dm = b.zeros(n * inter);
        m.grad_input(id(Down), b.view_mut(&mut dm), b.view(&dx), inter, h, false, mp);
        adapter::backward(m, li, Down, b.view(&act), b.view(&dx), n, inter, h, b.view_mut(&mut dm), need, &mut grads);
        drop(act);
        let (dgate, dup) = b.swiglu_backward(b.view(&s.gate), b.view(&s.up), b.view(&dm));
        drop(dm);
        grads[id(Gate)] = wgrad(id(Gate), &dgate, &h2, h, inter);
        grads[id(Up)] = wgrad(id(Up), &dup, &h2, h, inter);
        let mut dh2 = b.zeros(n * h);
        m.grad_input(id(Gate), b.view_mut(&mut dh2), b.view(&dgate), h, inter, false, mp);
        m.grad_input(id(Up), b.view_mut(&mut dh2), b.view(&dup), h, inter, true, mp);
        adapter::backward(m, li, Gate, b.view(&h2), b.view(&dgate), n, h, inter, b.view_mut(&mut dh2), need, &mut grads);
        adapter::backward(m, li, Up, b.view(&h2), b.view(&dup), n, h, inter, b.view_mut(&mut dh2), need, &mut grads);
        drop((dgate, dup, h2));
        grads[id(PostNorm)] = keep(id(PostNorm), b.rms_norm_backward(b.view(&s.x_mid), at(PostNorm), b.view(&dh2), eps, b.view_mut(&mut dx), true));
        drop(dh2);

        // Attention: x_mid = x + o(attention(q, k, v)), with q, k, v projections of norm(x).
        grads[id(O)] = wgrad(id(O), &dx, &s.a, qw, h);
        let mut da = b.zeros(n * qw);
        m.grad_input(id(O), b.view_mut(&mut da), b.view(&dx), qw, h, false, mp);
        adapter::backward(m, li, O, b.view(&s.a), b.view(&dx), n, qw, h, b.view_mut(&mut da), need, &mut grads);
        let (mut dq, mut dk, dv) = b.attention_backward(&tape.attn, b.view(&s.q), b.view(&s.k), b.view(&s.v), b.view(&da));
        drop(da);
        if let (Some(qn), Some(kn), Some(q_raw), Some(k_raw)) = (ix.get(li, QNorm), ix.get(li, KNorm), &s.q_raw, &s.k_raw) {
            let mut dq_raw = b.zeros(n * qw);
            let mut dk_raw = b.zeros(n * kw);
            grads[qn] = keep(qn, b.rms_norm_backward(b.view(q_raw), w[qn], b.view(&dq), eps, b.view_mut(&mut dq_raw), false));
            grads[kn] = keep(kn, b.rms_norm_backward(b.view(k_raw), w[kn], b.view(&dk), eps, b.view_mut(&mut dk_raw), false));
            dq = dq_raw;
            dk = dk_raw;
        }
        let hn = b.rms_norm(b.view(&s.x), at(InputNorm), eps);
        grads[id(Q)] = wgrad(id(Q), &dq, &hn, h, qw);
        grads[id(K)] = wgrad(id(K), &dk, &hn, h, kw);
        grads[id(V)] = wgrad(id(V), &dv, &hn, h, kw);
        for (p, g, width) in [(QBias, &dq, qw), (KBias, &dk, kw), (VBias, &dv, kw)] {
            if let Some(bi) = ix.get(li, p).filter(|&bi| need[bi]) {
                grads[bi] = Some(b.linear_grad_bias(b.view(g), width));
            }
        }
        let mut dh = b.zeros(n * h);
        m.grad_input(id(Q), b.view_mut(&mut dh), b.view(&dq), h, qw, false, mp);
        m.grad_input(id(K), b.view_mut(&mut dh), b.view(&dk), h, kw, true, mp);
        m.grad_input(id(V), b.view_mut(&mut dh), b.view(&dv), h, kw, true, mp);
        adapter::backward(m, li, Q, b.view(&hn), b.view(&dq), n, h, qw, b.view_mut(&mut dh), need, &mut grads);
        adapter::backward(m, li, K, b.view(&hn), b.view(&dk), n, h, kw, b.view_mut(&mut dh), need, &mut grads);
        adapter::backward(m, li, V, b.view(&hn), b.view(&dv), n, h, kw, b.view_mut(&mut dh), need, &mut grads);
        drop((dq, dk, dv, hn));
        grads[id(InputNorm)] = keep(id(InputNorm), b.rms_norm_backward(b.view(&s.x), at(InputNorm), b.view(&dh), eps, b.view_mut(&mut dx), true));
        flush(&mut grads);
    }

    // The embedding's rows collect the gradient of the tokens that looked them up; a tied embedding
    // adds this to its gradient as the output projection.
    if need[ix.embed] {
        let mut dembed = if ix.lm_head == ix.embed {
            dhead
        } else {
            grads[ix.lm_head] = keep(ix.lm_head, dhead);
            b.zeros(vocab * h)
        };
        b.embed_backward(b.view_mut(&mut dembed), h, &tape.tokens, b.view(&dx));
        grads[ix.embed] = Some(dembed);
    } else if ix.lm_head != ix.embed {
        grads[ix.lm_head] = keep(ix.lm_head, dhead);
    }
    flush(&mut grads);
    for (i, (&g, &n)) in given.iter().zip(need).enumerate() {
        assert!(g == n, "parameter {i}: gradient wanted {n} but the tape gave {g}");
    }
}
