//! The training forward pass over packed rows, run directly on the weights' memory with the layer
//! activations it needs kept on a tape, and the matching backward pass written out by hand.
//!
//! Going through candle's autograd for every op would cost a zero-filled buffer and an extra add per
//! intermediate tensor, and a separate add per residual connection; here gradients flow into
//! preallocated buffers (residual gradients accumulate in place) and only the weight gradients become
//! tensors. `attach.rs` hands those to candle's gradient store.

use std::sync::Arc;

use candle_core::Result;

use super::slices::{index, Locked};
use super::Decoder;
use cppo_kernels::attention::{self, AttnLayout, Attention};
use cppo_kernels::logprob::{self, Gather, Scored};
use cppo_kernels::{linear, rms_norm, swiglu, Float, MatmulPrecision};

/// What a layer's backward pass needs from its forward pass (the norms and the MLP activation are
/// recomputed instead, being cheap).
struct Saved<T> {
    x: Vec<T>,
    q_raw: Option<Vec<T>>,
    k_raw: Option<Vec<T>>,
    q: Vec<T>,
    k: Vec<T>,
    v: Vec<T>,
    a: Vec<T>,
    x_mid: Vec<T>,
    gate: Vec<T>,
    up: Vec<T>,
}

pub(crate) struct Tape<T> {
    attn: Attention,
    /// The forward's products' precision, which the backward's follow.
    precision: MatmulPrecision,
    tokens: Vec<u32>,
    layers: Vec<Saved<T>>,
    x_final: Vec<T>,
    gather: Gather,
    lse: Vec<T>,
    /// The output projection's logits, when the forward kept them (see `logprob`); the backward pass
    /// takes them, so a second backward recomputes.
    logits: std::sync::Mutex<Option<Vec<Vec<T>>>>,
}

fn gather_rows<T: Float>(table: &[T], width: usize, tokens: &[u32]) -> Vec<T> {
    let mut out = Vec::with_capacity(tokens.len() * width);
    for &t in tokens {
        out.extend_from_slice(&table[t as usize * width..(t as usize + 1) * width]);
    }
    out
}

/// Runs the forward pass; keeps the tape when `save` (for a later backward pass).
pub(crate) fn forward<T: Float>(
    dec: &Decoder,
    tokens: &[u32],
    layout: AttnLayout,
    gather: Gather,
    save: bool,
) -> Result<(Scored<T>, Option<Tape<T>>)> {
    let cfg = dec.config();
    let params = dec.params();
    let locks: Vec<Locked> = params.iter().map(|p| Locked::new(p)).collect();
    let w: Vec<&[T]> = locks.iter().map(|l| l.slice::<T>()).collect::<Result<_>>()?;
    let ix = index(dec);
    let (h, inter, eps) = (cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps);
    let (heads, kvh, hd) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
    let (qw, kw) = (heads * hd, kvh * hd);
    let attn = Attention { layout: Arc::new(layout), rope: dec.rope.clone(), heads, kv_heads: kvh, head_dim: hd };
    let mp = dec.matmul_precision();
    let n = tokens.len();
    attn.check(&(n, qw).into(), &(n, kw).into(), &(n, kw).into())?;
    let mut x = gather_rows(w[ix.embed], h, tokens);
    let mut saved = Vec::with_capacity(if save { ix.layers.len() } else { 0 });
    for l in &ix.layers {
        let hn = rms_norm::forward(&x, w[l.input_norm], eps);
        let mut q = linear::forward_slices(&hn, w[l.q], l.q_bias.map(|i| w[i]), h, qw, mp);
        let mut k = linear::forward_slices(&hn, w[l.k], l.k_bias.map(|i| w[i]), h, kw, mp);
        let v = linear::forward_slices(&hn, w[l.v], l.v_bias.map(|i| w[i]), h, kw, mp);
        let (mut q_raw, mut k_raw) = (None, None);
        if let (Some(qn), Some(kn)) = (l.q_norm, l.k_norm) {
            let qn_out = rms_norm::forward(&q, w[qn], eps);
            let kn_out = rms_norm::forward(&k, w[kn], eps);
            q_raw = Some(std::mem::replace(&mut q, qn_out));
            k_raw = Some(std::mem::replace(&mut k, kn_out));
        }
        let a = attention::forward(&attn, &q, &k, &v);
        let mut x_mid = x.clone();
        linear::accumulate(&mut x_mid, &a, w[l.o], qw, h, true, mp);
        let h2 = rms_norm::forward(&x_mid, w[l.post_norm], eps);
        let gate = linear::forward_slices(&h2, w[l.gate], None, h, inter, mp);
        let up = linear::forward_slices(&h2, w[l.up], None, h, inter, mp);
        let m = swiglu::forward(&gate, &up);
        let mut x_next = x_mid.clone();
        linear::accumulate(&mut x_next, &m, w[l.down], inter, h, true, mp);
        let x_in = std::mem::replace(&mut x, x_next);
        if save {
            saved.push(Saved { x: x_in, q_raw, k_raw, q, k, v, a, x_mid, gate, up });
        }
    }
    let hn = rms_norm::forward(&x, w[ix.norm], eps);
    let mut scored = logprob::forward(&gather, &hn, w[ix.lm_head], cfg.vocab_size, h, save, mp);
    let tape = save.then(|| Tape {
        attn,
        precision: mp,
        tokens: tokens.to_vec(),
        layers: saved,
        x_final: x,
        gather,
        lse: scored.lse.clone(),
        logits: std::sync::Mutex::new(scored.logits.take()),
    });
    Ok((scored, tape))
}

/// The gradient of every weight (in `Decoder::params()` order) given the gradient `gout` of the
/// scored output.
pub(crate) fn backward<T: Float>(dec: &Decoder, tape: &Tape<T>, gout: &[T]) -> Result<Vec<Vec<T>>> {
    let cfg = dec.config();
    let params = dec.params();
    let locks: Vec<Locked> = params.iter().map(|p| Locked::new(p)).collect();
    let w: Vec<&[T]> = locks.iter().map(|l| l.slice::<T>()).collect::<Result<_>>()?;
    let ix = index(dec);
    let (h, inter, eps, vocab) = (cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps, cfg.vocab_size);
    let (heads, kvh, hd) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
    let (qw, kw) = (heads * hd, kvh * hd);
    let n = tape.tokens.len();
    let mp = tape.precision;
    let mut grads: Vec<Vec<T>> = vec![Vec::new(); ix.count];

    let hn = rms_norm::forward(&tape.x_final, w[ix.norm], eps);
    let mut dhn = vec![T::zero(); n * h];
    let mut dhead = vec![T::zero(); vocab * h];
    let kept = tape.logits.lock().ok().and_then(|mut l| l.take());
    logprob::backward_into(&tape.gather, kept, &tape.lse, &hn, w[ix.lm_head], gout, vocab, h, Some(&mut dhn), Some(&mut dhead), mp);
    drop(hn);
    // dx: the gradient of the residual stream, walked back through the layers in place.
    let mut dx = vec![T::zero(); n * h];
    grads[ix.norm] = rms_norm::backward_into(&tape.x_final, w[ix.norm], &dhn, eps, &mut dx, false, true);
    drop(dhn);

    for (l, s) in ix.layers.iter().zip(&tape.layers).rev() {
        // MLP: x_next = x_mid + down(swiglu(gate(h2), up(h2))), h2 = norm(x_mid).
        let h2 = rms_norm::forward(&s.x_mid, w[l.post_norm], eps);
        let m = swiglu::forward(&s.gate, &s.up);
        grads[l.down] = linear::grad_weight(&dx, &m, inter, h, mp);
        drop(m);
        let mut dm = vec![T::zero(); n * inter];
        linear::grad_input(&mut dm, &dx, w[l.down], inter, h, false, mp);
        let (dgate, dup) = swiglu::backward(&s.gate, &s.up, &dm);
        drop(dm);
        grads[l.gate] = linear::grad_weight(&dgate, &h2, h, inter, mp);
        grads[l.up] = linear::grad_weight(&dup, &h2, h, inter, mp);
        let mut dh2 = vec![T::zero(); n * h];
        linear::grad_input(&mut dh2, &dgate, w[l.gate], h, inter, false, mp);
        linear::grad_input(&mut dh2, &dup, w[l.up], h, inter, true, mp);
        drop((dgate, dup, h2));
        grads[l.post_norm] = rms_norm::backward_into(&s.x_mid, w[l.post_norm], &dh2, eps, &mut dx, true, true);
        drop(dh2);

        // Attention: x_mid = x + o(attention(q, k, v)), with q, k, v projections of norm(x).
        grads[l.o] = linear::grad_weight(&dx, &s.a, qw, h, mp);
        let mut da = vec![T::zero(); n * qw];
        linear::grad_input(&mut da, &dx, w[l.o], qw, h, false, mp);
        let (mut dq, mut dk, dv) = attention::backward(&tape.attn, &s.q, &s.k, &s.v, &da);
        drop(da);
        if let (Some(qn), Some(kn), Some(q_raw), Some(k_raw)) = (l.q_norm, l.k_norm, &s.q_raw, &s.k_raw) {
            let mut dq_raw = vec![T::zero(); dq.len()];
            let mut dk_raw = vec![T::zero(); dk.len()];
            grads[qn] = rms_norm::backward_into(q_raw, w[qn], &dq, eps, &mut dq_raw, false, true);
            grads[kn] = rms_norm::backward_into(k_raw, w[kn], &dk, eps, &mut dk_raw, false, true);
            dq = dq_raw;
            dk = dk_raw;
        }
        let hn = rms_norm::forward(&s.x, w[l.input_norm], eps);
        grads[l.q] = linear::grad_weight(&dq, &hn, h, qw, mp);
        grads[l.k] = linear::grad_weight(&dk, &hn, h, kw, mp);
        grads[l.v] = linear::grad_weight(&dv, &hn, h, kw, mp);
        for (bi, g, width) in [(l.q_bias, &dq, qw), (l.k_bias, &dk, kw), (l.v_bias, &dv, kw)] {
            if let Some(bi) = bi {
                grads[bi] = linear::grad_bias(g, width);
            }
        }
        let mut dh = vec![T::zero(); n * h];
        linear::grad_input(&mut dh, &dq, w[l.q], h, qw, false, mp);
        linear::grad_input(&mut dh, &dk, w[l.k], h, kw, true, mp);
        linear::grad_input(&mut dh, &dv, w[l.v], h, kw, true, mp);
        drop((dq, dk, dv, hn));
        grads[l.input_norm] = rms_norm::backward_into(&s.x, w[l.input_norm], &dh, eps, &mut dx, true, true);
    }

    // The embedding's rows collect the gradient of the tokens that looked them up; a tied embedding
    // adds this to its gradient as the output projection.
    let mut dembed = if ix.lm_head == ix.embed {
        dhead
    } else {
        grads[ix.lm_head] = dhead;
        vec![T::zero(); vocab * h]
    };
    for (r, &t) in tape.tokens.iter().enumerate() {
        let t = t as usize;
        for (a, &b) in dembed[t * h..(t + 1) * h].iter_mut().zip(&dx[r * h..(r + 1) * h]) {
            *a += b;
        }
    }
    grads[ix.embed] = dembed;
    Ok(grads)
}
