//! The training tape on a backend the caller brings, over the weights uploaded to it: the scored
//! log-probs and entropies of grouped completions and, from the output's gradient, every weight's
//! gradient. The trainer's own paths choose their backend by `BackendKind`; this entry point lets a
//! device crate (cppo-cuda) run the real decoder on its backend, check it against the CPU backend and
//! time it, without cppo-model depending on it.

use cppo_kernels::backend::Backend;
use cppo_kernels::Precision;

use super::{tape, Ctx, Decoder, DecoderError, DeviceHalves, Result};

/// What one forward and backward pass of the tape gave, on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct TapeRun {
    /// The scored output, `(completions, longest completion)` flattened, zeros where masked.
    pub logprobs: Vec<f32>,
    /// Per slot of the scored output, the entropy of the distribution that predicted it (0 where masked).
    pub entropy: Vec<f64>,
    /// Every trainable weight's gradient by Hugging Face name, in parameter order.
    pub grads: Vec<(String, Vec<f32>)>,
}

/// The decoder's weights in a backend's memory, in parameter order.
pub struct BackendWeights<B: Backend> {
    pub bufs: Vec<B::Buf>,
    /// bf16 copies of the matrices (`Decoder::keep_bf16_copies`), kept current by whoever updates
    /// `bufs` (the trainer's AdamW rewrites both in one launch). bf16 products read them instead of
    /// rounding the f32 weights at every call; a matrix whose buffer is empty is held only here.
    pub halves: Option<super::DeviceHalves<B>>,
}

impl<B: Backend> BackendWeights<B> {
    /// Weight `i`'s bf16 storage when it is held only in bf16 (its f32 buffer empty).
    pub fn stored_in_bf16(&self, b: &B, i: usize) -> Option<&B::Half> {
        let empty = self.bufs.get(i).is_some_and(|x| b.len(b.view(x)) == 0);
        self.halves.as_ref().and_then(|h| h.get(i)).filter(|_| empty)
    }
}

/// One pass on the device: the scored output and entropies (host), every weight's gradient (device).
pub struct DeviceTapeRun<B: Backend> {
    pub logprobs: Vec<f32>,
    pub entropy: Vec<f64>,
    /// Indexed like the weights; `None` for a frozen one (the base of a LoRA decoder).
    pub grads: Vec<Option<B::Buf>>,
}

impl Decoder {
    /// A copy of the weights in `b`'s memory (f32 decoders only).
    pub fn upload_weights<B: Backend<T = f32>>(&self, b: &B) -> Result<BackendWeights<B>> {
        if self.dtype() != candle_core::DType::F32 {
            return Err(DecoderError::BadInput(format!("upload_weights: an f32 decoder, not {:?}", self.dtype())));
        }
        let guards = self.weight_guards();
        let host: Vec<&[f32]> = guards.iter().map(|g| g.get::<f32>()).collect::<candle_core::Result<_>>()?;
        // A weight held in bf16 (a frozen LoRA base) stays so on the device, its f32 buffer empty.
        let bufs = host.iter().zip(&self.params).map(|(w, p)| if p.half.is_some() { b.zeros(0) } else { b.upload(w) }).collect();
        let stored = self.params.iter().any(|p| p.half.is_some());
        let halves = stored.then(|| DeviceHalves { half: self.params.iter().map(|p| p.half.as_ref().map(|h| b.upload_half(h))).collect() });
        Ok(BackendWeights { bufs, halves })
    }

    /// Runs the tape forward over `groups` (as `grouped_completion_logprobs`) on `b` with the weights
    /// `w` (from `upload_weights`, kept current by the caller), then backward from `dlogp` (the
    /// gradient of the scored output, in its layout).
    pub fn tape_on_weights<B: Backend<T = f32>>(&self, b: &B, w: &BackendWeights<B>, groups: &[(&[u32], &[&[u32]])], dlogp: &[f32]) -> Result<DeviceTapeRun<B>> {
        let fwd = self.forward_on_weights(b, w, groups, true)?;
        let (logprobs, entropy) = (fwd.logprobs.clone(), fwd.entropy.clone());
        let grads = fwd.backward(dlogp)?;
        Ok(DeviceTapeRun { logprobs, entropy, grads })
    }

    /// The forward pass over `groups` on `b` with the weights `w`: the scored log-probs (host, in
    /// `grouped_completion_logprobs`' layout), their mask and entropies, and with `keep_tape` what the
    /// backward pass needs, so a caller can compute its loss's dL/dlogp from these log-probs first.
    pub fn forward_on_weights<'a, B: Backend<T = f32>>(
        &'a self,
        b: &'a B,
        w: &'a BackendWeights<B>,
        groups: &[(&[u32], &[&[u32]])],
        keep_tape: bool,
    ) -> Result<DeviceForward<'a, B>> {
        let (tokens, layout, gather, mask) = self.grouped_inputs(groups)?;
        let shape = (gather.out_shape[0], gather.out_shape[1]);
        self.check_weights(b, w)?;
        if let Some(&p) = layout.positions.iter().max() {
            if p >= self.config().max_position_embeddings {
                return Err(DecoderError::BadInput(format!("forward_on: position {p} beyond max_position_embeddings")));
            }
        }
        let ctx = DeviceCtx::new(self, b, w, self.matmul != Precision::F32);
        let dropout = if keep_tape { self.next_dropout_key() } else { None };
        let m = ctx.get(self, dropout);
        let out_index = gather.out_index.clone();
        let (scored, tape) = tape::forward(&m, &tokens, layout, gather, keep_tape, self.temperature)?;
        // The kernels give one entropy per gathered token; the caller reads them in the output's layout.
        let mut entropy = vec![0f64; shape.0 * shape.1];
        for (&o, &e) in out_index.iter().zip(&scored.entropy) {
            entropy[o] = e;
        }
        Ok(DeviceForward {
            logprobs: scored.out,
            entropy,
            mask: mask.iter().map(|&x| x as f32).collect(),
            shape,
            tape,
            ctx,
            dec: self,
        })
    }
}

/// What `Ctx` borrows on a caller's backend: the views of the uploaded weights.
pub(super) struct DeviceCtx<'a, B: Backend> {
    b: &'a B,
    views: Vec<B::View<'a>>,
    /// The matrices' bf16 copies where the decoder's products are bf16 (`BackendWeights::halves`).
    half: Vec<Option<&'a B::Half>>,
}

impl<'a, B: Backend> DeviceCtx<'a, B> {
    /// Products read a weight's bf16 storage where it has only that, and with `copies` (the
    /// training tape at bf16 products) the copies of the layer matrices and the output projection.
    pub(super) fn new(dec: &Decoder, b: &'a B, w: &'a BackendWeights<B>, copies: bool) -> Self {
        let read = |i: usize| w.stored_in_bf16(b, i).is_some() || copies && (dec.params[i].is_layer_matrix() || i == dec.index.lm_head);
        let half = (0..dec.params.len()).map(|i| w.halves.as_ref().and_then(|h| h.get(i)).filter(|_| read(i))).collect();
        DeviceCtx { b, views: w.bufs.iter().map(|x| b.view(x)).collect(), half }
    }

    pub(super) fn get<'s>(&'s self, dec: &'s Decoder, dropout: Option<super::dropout::DropoutKey>) -> Ctx<'s, 'a, B> {
        Ctx { b: self.b, w: &self.views, ix: &dec.index, cfg: &dec.cfg, rope: &dec.rope, mp: dec.matmul, lora: dec.lora_scale(), half: &self.half, dropout }
    }
}

/// One forward pass on a caller's backend (`forward_on_weights`): its scored output on the host and,
/// when kept, the tape for one backward pass.
pub struct DeviceForward<'a, B: Backend> {
    /// `(completions, longest completion)` flattened, zeros where masked.
    pub logprobs: Vec<f32>,
    /// Per scored token, its predicted distribution's entropy (0 where masked).
    pub entropy: Vec<f64>,
    /// 1 for a real token, 0 for padding.
    pub mask: Vec<f32>,
    /// `(completions, longest completion)`.
    pub shape: (usize, usize),
    tape: Option<tape::Tape<B>>,
    ctx: DeviceCtx<'a, B>,
    dec: &'a Decoder,
}

impl<B: Backend<T = f32>> DeviceForward<'_, B> {
    /// The backward pass from `dlogp` (the gradient of `logprobs`, same layout): every weight's
    /// gradient on the device, `None` for a frozen one.
    pub fn backward(self, dlogp: &[f32]) -> Result<Vec<Option<B::Buf>>> {
        let tape = self.tape.as_ref().ok_or_else(|| DecoderError::BadInput("backward: the forward pass kept no tape".into()))?;
        if dlogp.len() != self.logprobs.len() {
            return Err(DecoderError::BadInput(format!("backward: {} output gradients for an output of {}", dlogp.len(), self.logprobs.len())));
        }
        // The backward takes the dropout masks from the tape.
        let m = self.ctx.get(self.dec, None);
        Ok(tape::backward(&m, tape, dlogp, &self.dec.trainable_mask()))
    }

    /// `backward`, handing each trainable weight's gradient to `sink` (with the weight's index) as
    /// soon as its layer is done, so the caller can sum it into its own buffer and free it: at most
    /// one layer's gradients are held besides the caller's.
    pub fn backward_into(self, dlogp: &[f32], sink: &mut dyn FnMut(usize, B::Buf)) -> Result<()> {
        let tape = self.tape.as_ref().ok_or_else(|| DecoderError::BadInput("backward: the forward pass kept no tape".into()))?;
        if dlogp.len() != self.logprobs.len() {
            return Err(DecoderError::BadInput(format!("backward: {} output gradients for an output of {}", dlogp.len(), self.logprobs.len())));
        }
        let m = self.ctx.get(self.dec, None);
        tape::backward_with(&m, tape, dlogp, &self.dec.trainable_mask(), sink);
        Ok(())
    }
}

impl Decoder {
    /// `tape_on_weights` with the weights uploaded for this call and the gradients downloaded.
    pub fn tape_on<B: Backend<T = f32>>(&self, b: &B, groups: &[(&[u32], &[&[u32]])], dlogp: &[f32]) -> Result<TapeRun> {
        let w = self.upload_weights(b)?;
        let run = self.tape_on_weights(b, &w, groups, dlogp)?;
        Ok(TapeRun {
            logprobs: run.logprobs,
            entropy: run.entropy,
            grads: self.params.iter().zip(&run.grads).filter_map(|(p, g)| g.as_ref().map(|g| (p.spec.name.clone(), b.download(b.view(g))))).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};
    use cppo_io::config::{Architecture, ModelConfig};
    use cppo_kernels::cpu::Cpu;

    use super::super::{random_weights, Decoder, RandomInit};

    /// On the CPU backend it is the trainer's path: the same log-probs, and the gradients the
    /// decoder's own backward pass gives for the same dL/dlogp.
    #[test]
    fn on_the_cpu_backend_it_gives_the_trainers_logprobs_and_gradients() {
        let cfg = ModelConfig::tiny(Architecture::Qwen2);
        let w = random_weights(&cfg, 3, &RandomInit { std: 0.1, norm_jitter: 0.2, bias_std: 0.1 }).unwrap();
        let dec = Decoder::new(&cfg, &w, true, &Device::Cpu).unwrap();
        let (p, c1, c2, c3): (Vec<u32>, Vec<u32>, Vec<u32>, Vec<u32>) = (vec![5, 9, 13], vec![7, 1, 30, 2], vec![44], vec![3, 3]);
        let groups: [(&[u32], &[&[u32]]); 2] = [(&p, &[&c1, &c2]), (&c3, &[&c1])];
        let out = dec.grouped_completion_logprobs(&groups).unwrap();
        let n = out.logprobs.elem_count();
        let dlogp: Vec<f32> = (0..n).map(|i| ((i * 7) % 5) as f32 - 2.0).collect();
        let grads = out.backward.as_ref().unwrap().run(&Tensor::from_vec(dlogp.clone(), out.logprobs.shape(), &Device::Cpu).unwrap()).unwrap();
        let run = dec.tape_on(&Cpu::<f32>::new(), &groups, &dlogp).unwrap();
        assert_eq!(run.logprobs, out.logprobs.flatten_all().unwrap().to_vec1::<f32>().unwrap());
        let vars = dec.vars();
        assert_eq!(vars.len(), run.grads.len());
        for ((name, var), (rname, g)) in vars.iter().zip(&run.grads) {
            assert_eq!(name, rname);
            let want = grads.get(var.as_tensor()).expect("a gradient").flatten_all().unwrap().to_vec1::<f32>().unwrap();
            assert!(want.iter().any(|&x| x != 0.0), "{name}");
            for (a, b) in g.iter().zip(&want) {
                assert!((a - b).abs() <= 1e-6 * (1.0 + b.abs()), "{name}: {a} vs {b}");
            }
        }
    }
}
