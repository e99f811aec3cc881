//! The generation path: no tape, f32, keys and values in a preallocated `KvCache`. A prefill appends a
//! run of tokens to one row; a decode step appends one token to each of the rows it is given, each at
//! its own position, and computes nothing for the others. Every operation is a call on the backend.

use cppo_io::params::LayerParam::*;
use cppo_kernels::backend::{Backend, CacheLayout, CachedQuery, Product};

use super::{adapter, Ctx};

/// Where the new tokens go and what they see.
pub(crate) struct Step<'a> {
    /// Per new token: its cache row and how many of that row's positions it sees (its own included).
    pub queries: &'a [CachedQuery],
    /// Per new token: its position (the rotary embedding's).
    pub positions: &'a [usize],
}

/// The caches of every layer as the backend sees them.
pub(crate) struct CacheViews<'a, B: Backend + 'a> {
    pub k: Vec<B::ViewMut<'a>>,
    pub v: Vec<B::ViewMut<'a>>,
    pub layout: CacheLayout,
}

/// The bf16 copy of each weight a rollout reads instead (indexed like the parameters), if any.
pub(crate) type Halves<'s, 'a, B> = Option<&'s [Option<&'a <B as Backend>::Half>]>;

/// `y = x @ w^T (+ bias)`, from the bf16 copy where given.
fn product<'w, 'y, B: Backend>(w: B::View<'w>, half: Option<&'w B::Half>, bias: Option<B::View<'w>>, dout: usize, y: B::ViewMut<'y>) -> Product<'w, 'y, B> {
    Product { w, half, bias, dout, y, add: false }
}

/// Runs the layers over the new tokens, writing their keys and values into the cache; returns the
/// last layer's output `(n, hidden)` before the final norm.
pub(crate) fn run<'a, B: Backend>(m: &Ctx<'_, 'a, B>, half: Halves<'_, 'a, B>, tokens: &[u32], step: &Step, cache: &mut CacheViews<'_, B>) -> B::Buf {
    let (b, w, ix, cfg) = (m.b, m.w, m.ix, m.cfg);
    let n = tokens.len();
    let (h, inter, eps) = (cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps);
    let (heads, kv_heads, hd) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
    let (qw, kw) = (heads * hd, kv_heads * hd);
    // A weight held only in bf16 is read from that storage, snapshot or not.
    let hw = |i: usize| half.and_then(|hs| hs[i]).or(m.half[i]);
    let slots: Vec<(usize, usize)> = step.queries.iter().zip(step.positions).map(|(c, &p)| (c.row, p)).collect();
    let mut x = b.embed(w[ix.embed], h, tokens);
    let (mut q, mut k, mut v) = (b.zeros(n * qw), b.zeros(n * kw), b.zeros(n * kw));
    let (mut gate, mut up) = (b.zeros(n * inter), b.zeros(n * inter));
    let mut out = b.zeros(n * qw);
    for li in 0..ix.layers() {
        let at = |p| ix.at(li, p);
        let bias = |p| ix.get(li, p).map(|i| w[i]);
        let hn = b.rms_norm(b.view(&x), w[at(InputNorm)], eps);
        b.project(
            b.view(&hn),
            n,
            h,
            &mut [product(w[at(Q)], hw(at(Q)), bias(QBias), qw, b.view_mut(&mut q)),
                product(w[at(K)], hw(at(K)), bias(KBias), kw, b.view_mut(&mut k)),
                product(w[at(V)], hw(at(V)), bias(VBias), kw, b.view_mut(&mut v)),],
        );
        // LoRA adapters run unmerged, in f32, next to the (possibly bf16) base products.
        adapter::forward(m, li, Q, b.view(&hn), n, h, qw, b.view_mut(&mut q));
        adapter::forward(m, li, K, b.view(&hn), n, h, kw, b.view_mut(&mut k));
        adapter::forward(m, li, V, b.view(&hn), n, h, kw, b.view_mut(&mut v));
        if let (Some(qn), Some(kn)) = (ix.get(li, QNorm), ix.get(li, KNorm)) {
            q = b.rms_norm(b.view(&q), w[qn], eps);
            k = b.rms_norm(b.view(&k), w[kn], eps);
        }
        b.rope(b.view_mut(&mut q), heads, step.positions, &m.rope);
        b.rope(b.view_mut(&mut k), kv_heads, step.positions, &m.rope);
        let (ck, cv) = (&mut cache.k[li], &mut cache.v[li]);
        b.cache_write(b.reborrow(ck), b.reborrow(cv), &cache.layout, b.view(&k), b.view(&v), &slots);
        b.cached_attention(b.view(&q), b.as_view(ck), b.as_view(cv), &cache.layout, heads, step.queries, b.view_mut(&mut out));
        b.project(b.view(&out), n, qw, &mut [Product { w: w[at(O)], half: hw(at(O)), bias: None, dout: h, y: b.view_mut(&mut x), add: true }]);
        adapter::forward(m, li, O, b.view(&out), n, qw, h, b.view_mut(&mut x));
        let h2 = b.rms_norm(b.view(&x), w[at(PostNorm)], eps);
        b.project(b.view(&h2), n, h, &mut [product(w[at(Gate)], hw(at(Gate)), None, inter, b.view_mut(&mut gate)), product(w[at(Up)], hw(at(Up)), None, inter, b.view_mut(&mut up))]);
        adapter::forward(m, li, Gate, b.view(&h2), n, h, inter, b.view_mut(&mut gate));
        adapter::forward(m, li, Up, b.view(&h2), n, h, inter, b.view_mut(&mut up));
        let act = b.swiglu(b.view(&gate), b.view(&up));
        b.project(b.view(&act), n, inter, &mut [Product { w: w[at(Down)], half: hw(at(Down)), bias: None, dout: h, y: b.view_mut(&mut x), add: true }]);
        adapter::forward(m, li, Down, b.view(&act), n, inter, h, b.view_mut(&mut x));
    }
    x
}

/// Logits `(n, vocab)` of hidden rows `(n, hidden)` before the final norm.
pub(crate) fn head_logits<'a, B: Backend>(m: &Ctx<'_, 'a, B>, half: Halves<'_, 'a, B>, hidden: B::View<'_>, n: usize) -> B::Buf {
    let (b, w, ix, cfg) = (m.b, m.w, m.ix, m.cfg);
    let (h, vocab) = (cfg.hidden_size, cfg.vocab_size);
    let hn = b.rms_norm(hidden, w[ix.norm], cfg.rms_norm_eps);
    let mut logits = b.zeros(n * vocab);
    let head_half = half.and_then(|hs| hs[ix.lm_head]).or(m.half[ix.lm_head]);
    b.project(b.view(&hn), n, h, &mut [Product { w: w[ix.lm_head], half: head_half, bias: None, dout: vocab, y: b.view_mut(&mut logits), add: false }]);
    logits
}
