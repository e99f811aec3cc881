//! The training path's backward pass, called with dL/dlogp: the caller's loss gives the gradient of
//! the scored log-probs, and the tape (`tape.rs`) turns it into every trainable weight's gradient. No
//! autograd graph is involved: the log-probs a forward pass returns are plain values, and this handle
//! is what a backward pass needs from it.

use std::sync::Arc;

use candle_core::{bail, DType, Result, Tensor};
use cppo_kernels::backend::Backend;
use cppo_kernels::cpu::Cpu;
use cppo_kernels::host::with_slice;
use cppo_kernels::reference::Reference;

use super::tape::{self, Tape};
use super::{Ctx, Decoder};

/// A forward pass's tape, on whichever backend recorded it.
pub(crate) trait TapeBackward<T>: Send + Sync {
    /// The gradient of every trainable weight (indexed like the parameters, `None` for frozen ones)
    /// given the gradient of the scored output.
    fn backward(&self, dec: &Decoder, dlogp: &[T]) -> Result<Vec<Option<Vec<T>>>>;
}

pub(crate) struct Held<B: Backend> {
    tape: Tape<B>,
}

pub(crate) fn held<B: Backend>(tape: Tape<B>) -> Box<dyn TapeBackward<B::T>>
where
    Held<B>: TapeBackward<B::T> + 'static,
{
    Box::new(Held { tape })
}

/// The backward pass of a tape recorded on backend `$B` (computing in `$T`), over the decoder's
/// current weights, which the forward pass read too.
macro_rules! held_backward {
    ($B:ty, $T:ty) => {
        impl TapeBackward<$T> for Held<$B> {
            fn backward(&self, dec: &Decoder, dlogp: &[$T]) -> Result<Vec<Option<Vec<$T>>>> {
                let guards = dec.weight_guards();
                let w: Vec<&[$T]> = guards.iter().map(|g| g.get::<$T>()).collect::<Result<_>>()?;
                let half = dec.stored_halves();
                let b = <$B>::new();
                let m = Ctx { b: &b, w: &w, ix: &dec.index, cfg: &dec.cfg, rope: &dec.rope, mp: dec.matmul, lora: dec.lora_scale(), half: &half, dropout: None };
                Ok(tape::backward(&m, &self.tape, dlogp, &dec.trainable_mask()))
            }
        }
    };
}
held_backward!(Cpu<f32>, f32);
held_backward!(Cpu<f64>, f64);
held_backward!(Reference<f32>, f32);
held_backward!(Reference<f64>, f64);

pub(crate) enum AnyTape {
    F32(Box<dyn TapeBackward<f32>>),
    F64(Box<dyn TapeBackward<f64>>),
}

/// What a forward pass with a gradient kept for its backward pass: call `run` with dL/dlogp, as
/// often as needed (each call is one backward pass over the decoder's current weights).
#[derive(Clone)]
pub struct Backward {
    dec: Decoder,
    tape: Arc<AnyTape>,
    /// The shape of the scored output, which `dlogp` must have.
    shape: Vec<usize>,
}

impl std::fmt::Debug for Backward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backward {{ output: {:?} }}", self.shape)
    }
}

impl Backward {
    pub(crate) fn new(dec: &Decoder, tape: AnyTape, shape: Vec<usize>) -> Self {
        Backward { dec: dec.clone(), tape: Arc::new(tape), shape }
    }

    /// The gradient of every trainable weight given `dlogp`, the loss's gradient with respect to the
    /// scored log-probs (shaped like them, in the decoder's dtype; padding entries are ignored).
    pub fn run(&self, dlogp: &Tensor) -> Result<WeightGrads> {
        if dlogp.dims() != self.shape.as_slice() {
            bail!("decoder backward: dlogp has shape {:?}, the log-probs {:?}", dlogp.dims(), self.shape);
        }
        let params = &self.dec.params;
        let per_param: Vec<Option<Tensor>> = match (&*self.tape, dlogp.dtype()) {
            (AnyTape::F32(t), DType::F32) => {
                let g = with_slice::<f32, _>(dlogp, |g| t.backward(&self.dec, g))??;
                g.into_iter().zip(params).map(|(g, p)| g.map(|g| Tensor::from_vec(g, p.t.shape(), p.t.device())).transpose()).collect::<Result<_>>()?
            }
            (AnyTape::F64(t), DType::F64) => {
                let g = with_slice::<f64, _>(dlogp, |g| t.backward(&self.dec, g))??;
                g.into_iter().zip(params).map(|(g, p)| g.map(|g| Tensor::from_vec(g, p.t.shape(), p.t.device())).transpose()).collect::<Result<_>>()?
            }
            (_, dt) => bail!("decoder backward: dlogp is {dt:?}, not the decoder's dtype"),
        };
        Ok(WeightGrads {
            grads: params
                .iter()
                .zip(per_param)
                .filter_map(|(p, g)| Some((p.spec.name.clone(), p.var.clone()?, g?)))
                .collect(),
        })
    }
}

/// The gradient of each trainable weight, in `Decoder::vars()` order.
#[derive(Clone, Debug)]
pub struct WeightGrads {
    /// (Hugging Face name, the variable, its gradient).
    pub grads: Vec<(String, candle_core::Var, Tensor)>,
}

impl WeightGrads {
    /// The gradient of the variable `var` (as `Var::as_tensor` gives it), if it is one of these.
    pub fn get(&self, var: &Tensor) -> Option<&Tensor> {
        self.grads.iter().find(|(_, v, _)| v.as_tensor().id() == var.id()).map(|(_, _, g)| g)
    }
}
