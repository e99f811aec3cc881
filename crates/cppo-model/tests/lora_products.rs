//! Under LoRA the frozen base gets no weight-gradient product at all: a backend that records every
//! weight-gradient product it is asked for (and whether the output projection's gradient is wanted)
//! sees only rank-wide products for the adapters, while full fine-tuning asks for every matrix.

use std::sync::Mutex;

use candle_core::Device;
use cppo_io::params::LayerParam;
use cppo_kernels::attention::Attention;
use cppo_kernels::backend::{AdamWStep, Backend, CacheLayout, CachedQuery, Product, Scored};
use cppo_kernels::cpu::Cpu;
use cppo_kernels::logprob::Gather;
use cppo_kernels::rope::RopeTable;
use cppo_kernels::Precision;
use cppo_model::decoder::{random_weights, RandomInit};
use cppo_model::{Decoder, LoraSpec};

/// The CPU backend, recording `(din, dout)` of each weight-gradient product and each request for the
/// output projection's gradient.
struct Recording {
    cpu: Cpu<f32>,
    weight_grads: Mutex<Vec<(usize, usize)>>,
    head_grads: Mutex<usize>,
}

fn cast<'w, 'y>(p: &mut Product<'w, 'y, Recording>) -> Product<'w, 'y, Cpu<f32>> {
    Product { w: p.w, half: p.half, bias: p.bias, dout: p.dout, y: std::mem::take(&mut p.y), add: p.add }
}

impl Backend for Recording {
    type T = f32;
    type Buf = Vec<f32>;
    type Half = Vec<u16>;
    type View<'a> = &'a [f32];
    type ViewMut<'a> = &'a mut [f32];

    fn name(&self) -> &'static str {
        "recording"
    }
    fn zeros(&self, n: usize) -> Vec<f32> {
        self.cpu.zeros(n)
    }
    fn upload(&self, host: &[f32]) -> Vec<f32> {
        self.cpu.upload(host)
    }
    fn download(&self, x: &[f32]) -> Vec<f32> {
        self.cpu.download(x)
    }
    fn len(&self, x: &[f32]) -> usize {
        x.len()
    }
    fn view<'a>(&self, b: &'a Vec<f32>) -> &'a [f32] {
        b
    }
    fn view_mut<'a>(&self, b: &'a mut Vec<f32>) -> &'a mut [f32] {
        b
    }
    fn as_view<'a>(&self, x: &'a &mut [f32]) -> &'a [f32] {
        x
    }
    fn reborrow<'a>(&self, x: &'a mut &mut [f32]) -> &'a mut [f32] {
        x
    }
    fn slice<'a>(&self, x: &'a [f32], r: std::ops::Range<usize>) -> &'a [f32]
    where
        Self: 'a,
    {
        &x[r]
    }
    fn slice_mut<'a>(&self, x: &'a mut [f32], r: std::ops::Range<usize>) -> &'a mut [f32]
    where
        Self: 'a,
    {
        &mut x[r]
    }
    fn copy(&self, src: &[f32], dst: &mut [f32]) {
        self.cpu.copy(src, dst)
    }
    fn duplicate(&self, x: &[f32]) -> Vec<f32> {
        self.cpu.duplicate(x)
    }
    fn to_half(&self, w: &[f32]) -> Vec<u16> {
        self.cpu.to_half(w)
    }
    fn widen(&self, h: &Vec<u16>) -> Vec<f32> {
        self.cpu.widen(h)
    }
    fn embed(&self, table: &[f32], width: usize, tokens: &[u32]) -> Vec<f32> {
        self.cpu.embed(table, width, tokens)
    }
    fn embed_backward(&self, dtable: &mut [f32], width: usize, tokens: &[u32], dx: &[f32]) {
        self.cpu.embed_backward(dtable, width, tokens, dx)
    }
    fn rms_norm(&self, x: &[f32], w: &[f32], eps: f64) -> Vec<f32> {
        self.cpu.rms_norm(x, w, eps)
    }
    fn rms_norm_backward(&self, x: &[f32], w: &[f32], dy: &[f32], eps: f64, dx: &mut [f32], accumulate: bool) -> Vec<f32> {
        self.cpu.rms_norm_backward(x, w, dy, eps, dx, accumulate)
    }
    fn linear(&self, x: &[f32], w: &[f32], bias: Option<&[f32]>, din: usize, dout: usize, y: &mut [f32], add: bool, p: Precision) {
        self.cpu.linear(x, w, bias, din, dout, y, add, p)
    }
    fn project(&self, x: &[f32], n: usize, din: usize, outs: &mut [Product<'_, '_, Self>]) {
        let mut cpu: Vec<Product<'_, '_, Cpu<f32>>> = outs.iter_mut().map(cast).collect();
        self.cpu.project(x, n, din, &mut cpu)
    }
    fn linear_grad_input(&self, dx: &mut [f32], g: &[f32], w: &[f32], din: usize, dout: usize, add: bool, p: Precision) {
        self.cpu.linear_grad_input(dx, g, w, din, dout, add, p)
    }
    fn linear_grad_weight(&self, g: &[f32], x: &[f32], din: usize, dout: usize, p: Precision) -> Vec<f32> {
        self.weight_grads.lock().unwrap().push((din, dout));
        self.cpu.linear_grad_weight(g, x, din, dout, p)
    }
    fn linear_grad_bias(&self, g: &[f32], dout: usize) -> Vec<f32> {
        self.cpu.linear_grad_bias(g, dout)
    }
    fn attention(&self, a: &Attention, q: &[f32], k: &[f32], v: &[f32]) -> Vec<f32> {
        self.cpu.attention(a, q, k, v)
    }
    fn attention_backward(&self, a: &Attention, q: &[f32], k: &[f32], v: &[f32], dout: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        self.cpu.attention_backward(a, q, k, v, dout)
    }
    fn swiglu(&self, gate: &[f32], up: &[f32]) -> Vec<f32> {
        self.cpu.swiglu(gate, up)
    }
    fn swiglu_backward(&self, gate: &[f32], up: &[f32], dy: &[f32]) -> (Vec<f32>, Vec<f32>) {
        self.cpu.swiglu_backward(gate, up, dy)
    }
    fn logprobs(&self, g: &Gather, h: &[f32], head: &[f32], vocab: usize, width: usize, keep: bool, p: Precision) -> Scored<Self> {
        let s = self.cpu.logprobs(g, h, head, vocab, width, keep, p);
        Scored { out: s.out, entropy: s.entropy, lse: s.lse, logits: s.logits }
    }
    fn logprobs_backward(
        &self,
        g: &Gather,
        kept: Option<Vec<Vec<f32>>>,
        lse: &[f32],
        h: &[f32],
        head: &[f32],
        dlogp: &[f32],
        vocab: usize,
        width: usize,
        dh: &mut [f32],
        dhead: Option<&mut [f32]>,
        p: Precision,
    ) {
        if dhead.is_some() {
            *self.head_grads.lock().unwrap() += 1;
        }
        self.cpu.logprobs_backward(g, kept, lse, h, head, dlogp, vocab, width, dh, dhead, p)
    }
    fn rope(&self, x: &mut [f32], heads: usize, positions: &[usize], table: &RopeTable) {
        self.cpu.rope(x, heads, positions, table)
    }
    fn cache_write(&self, cache_k: &mut [f32], cache_v: &mut [f32], layout: &CacheLayout, k: &[f32], v: &[f32], slots: &[(usize, usize)]) {
        self.cpu.cache_write(cache_k, cache_v, layout, k, v, slots)
    }
    fn cache_copy_row(&self, cache: &mut [f32], layout: &CacheLayout, from: usize, len: usize, to: &[usize]) {
        self.cpu.cache_copy_row(cache, layout, from, len, to)
    }
    fn cached_attention(&self, q: &[f32], cache_k: &[f32], cache_v: &[f32], layout: &CacheLayout, heads: usize, queries: &[CachedQuery], out: &mut [f32]) {
        self.cpu.cached_attention(q, cache_k, cache_v, layout, heads, queries, out)
    }
    fn adamw(&self, w: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], s: &AdamWStep) {
        self.cpu.adamw(w, g, m, v, s)
    }
    fn sum_squares(&self, x: &[f32]) -> f64 {
        self.cpu.sum_squares(x)
    }
    fn add_into(&self, dst: &mut [f32], src: &[f32]) {
        self.cpu.add_into(dst, src)
    }
}

fn run(dec: &Decoder) -> (Vec<(usize, usize)>, usize, usize) {
    let b = Recording { cpu: Cpu::<f32>::new(), weight_grads: Mutex::default(), head_grads: Mutex::default() };
    let (p, c1, c2): (Vec<u32>, Vec<u32>, Vec<u32>) = (vec![5, 9, 13], vec![7, 1, 30, 2], vec![44, 3]);
    let groups: [(&[u32], &[&[u32]]); 1] = [(&p, &[&c1, &c2])];
    let dlogp = vec![0.5f32; 2 * 4];
    let out = dec.tape_on(&b, &groups, &dlogp).unwrap();
    let grads = out.grads.len();
    let wg = b.weight_grads.lock().unwrap().clone();
    let heads = *b.head_grads.lock().unwrap();
    (wg, heads, grads)
}

#[test]
fn the_frozen_base_gets_no_weight_gradient_product() {
    let mut cfg = cppo_io::ModelConfig::tiny(cppo_io::Architecture::Qwen2);
    cfg.tie_word_embeddings = false;
    let w = random_weights(&cfg, 2, &RandomInit { std: 0.1, norm_jitter: 0.1, bias_std: 0.1 }).unwrap();
    let layers = cfg.num_hidden_layers;

    let full = Decoder::new(&cfg, &w, true, &Device::Cpu).unwrap();
    let (products, head, grads) = run(&full);
    assert_eq!(products.len(), layers * 7, "full fine-tuning: one product per linear weight");
    assert_eq!(head, 1, "and the output projection's");
    assert_eq!(grads, full.vars().len());

    let r = 3;
    let spec = LoraSpec { r, alpha: 6.0, use_rslora: false, targets: LayerParam::linear().collect() };
    let lora = Decoder::new(&cfg, &w, false, &Device::Cpu).unwrap().with_lora(spec, 5).unwrap();
    let (products, head, grads) = run(&lora);
    assert_eq!(head, 0, "LoRA: no gradient product for the frozen output projection");
    assert_eq!(products.len(), layers * 7 * 2, "LoRA: one product per adapter factor, none for the base");
    assert!(products.iter().all(|&(din, dout)| din == r || dout == r), "a base-sized product ran: {products:?}");
    assert_eq!(grads, layers * 7 * 2);
}
