//! A frozen base held in bf16: the linear layers' matrices of a LoRA run's base (q, k, v, o, gate,
//! up, down of every layer) are never written, so they need no f32 master copy. Held as bf16 only,
//! they take half the memory, and the rollout snapshot is that same storage. The training path's
//! products widen a matrix to f32 for the product that reads it (exact: a bf16 value is an f32 value),
//! so every result equals that of a decoder whose matrices were rounded to bf16 beforehand, whichever
//! precision the products take (bf16 products round their operands to bf16, which leaves these
//! unchanged). The embedding, the norms and the output projection stay in the decoder's dtype.

use std::sync::Arc;

use candle_core::Tensor;
use cppo_io::params::ParamKind;
use cppo_kernels::backend::Backend;
use cppo_kernels::cpu::Cpu;
use cppo_kernels::host::HostSlice;

use super::{Decoder, DecoderError, Result};

impl Decoder {
    /// This decoder with every linear layer's matrix held only in bf16 (rounded to nearest even).
    /// They must be frozen (a LoRA base, or a frozen decoder): a trainable matrix is an error.
    pub fn with_bf16_base(mut self) -> Result<Decoder> {
        let empty = Tensor::zeros(0, self.dtype(), self.device())?;
        for p in self.params.iter_mut() {
            let linear = matches!(p.spec.kind, ParamKind::Layer(_, l) if l.linear_module().is_some());
            if !linear || p.half.is_some() {
                continue;
            }
            if p.var.is_some() {
                return Err(DecoderError::BadInput(format!(
                    "{} is trainable: only a frozen base (LoRA) can be held in bf16",
                    p.spec.name
                )));
            }
            let slice = HostSlice::new(&p.t, &p.spec.name);
            let half = match self.dtype {
                candle_core::DType::F32 => Cpu::<f32>::new().to_half(slice.get::<f32>()?),
                _ => Cpu::<f64>::new().to_half(slice.get::<f64>()?),
            };
            drop(slice);
            p.half = Some(Arc::new(half));
            p.t = empty.clone();
        }
        self.frozen_snapshot = Arc::default();
        Ok(self)
    }

    /// Whether any weight is held only in bf16 (`with_bf16_base`).
    pub fn has_bf16_base(&self) -> bool {
        self.params.iter().any(|p| p.half.is_some())
    }
}
