//! The training tape on a backend the caller brings, over the weights uploaded to it: the scored
//! log-probs and entropies of grouped completions and, from the output's gradient, every weight's
//! gradient. The trainer's own paths choose their backend by `BackendKind`; this entry point lets a
//! device crate (cppo-cuda) run the real decoder on its backend, check it against the CPU backend and
//! time it, without cppo-model depending on it.

use cppo_kernels::backend::Backend;

use super::{tape, Ctx, Decoder, DecoderError, Result};

/// What one forward and backward pass of the tape gave, on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct TapeRun {
    /// The scored output, `(completions, longest completion)` flattened, zeros where masked.
    pub logprobs: Vec<f32>,
    /// Per scored token, its predicted distribution's entropy.
    pub entropy: Vec<f64>,
    /// Every trainable weight's gradient by Hugging Face name, in parameter order.
    pub grads: Vec<(String, Vec<f32>)>,
}

/// The decoder's weights in a backend's memory, in parameter order.
pub struct BackendWeights<B: Backend> {
    pub bufs: Vec<B::Buf>,
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
        // A weight held in bf16 goes to the device widened (exactly) to f32.
        let bufs = host
            .iter()
            .zip(&self.params)
            .map(|(w, p)| match &p.half {
                Some(h) => b.upload(&h.iter().map(|&v| cppo_kernels::skinny::from_bf16(v)).collect::<Vec<f32>>()),
                None => b.upload(w),
            })
            .collect();
        Ok(BackendWeights { bufs })
    }

    /// Runs the tape forward over `groups` (as `grouped_completion_logprobs`) on `b` with the weights
    /// `w` (from `upload_weights`, kept current by the caller), then backward from `dlogp` (the
    /// gradient of the scored output, in its layout).
    pub fn tape_on_weights<B: Backend<T = f32>>(&self, b: &B, w: &BackendWeights<B>, groups: &[(&[u32], &[&[u32]])], dlogp: &[f32]) -> Result<DeviceTapeRun<B>> {
        let (tokens, layout, gather, _mask) = self.grouped_inputs(groups)?;
        let out_len: usize = gather.out_shape.iter().product();
        if dlogp.len() != out_len || w.bufs.len() != self.params.len() {
            return Err(DecoderError::BadInput(format!(
                "tape_on: {} output gradients for an output of {out_len}, {} weights for {}",
                dlogp.len(),
                w.bufs.len(),
                self.params.len()
            )));
        }
        if let Some(&p) = layout.positions.iter().max() {
            if p >= self.config().max_position_embeddings {
                return Err(DecoderError::BadInput(format!("tape_on: position {p} beyond max_position_embeddings")));
            }
        }
        let views: Vec<B::View<'_>> = w.bufs.iter().map(|x| b.view(x)).collect();
        // Every weight is on the device in f32 (`upload_weights`).
        let half: Vec<Option<&B::Half>> = vec![None; self.params.len()];
        let m = Ctx { b, w: &views, ix: &self.index, cfg: &self.cfg, rope: &self.rope, mp: self.matmul, lora: self.lora_scale(), half: &half, dropout: self.next_dropout_key() };
        let (scored, tape) = tape::forward(&m, &tokens, layout, gather, true, self.temperature)?;
        let tape = tape.ok_or_else(|| DecoderError::BadInput("tape_on: the forward kept no tape".into()))?;
        let grads = tape::backward(&m, &tape, dlogp, &self.trainable_mask());
        Ok(DeviceTapeRun { logprobs: scored.out, entropy: scored.entropy, grads })
    }

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
