//! Hands the tape's weight gradients to candle's autograd. The scored output is passed through a chain
//! of identity ops that each take two of the decoder's variables as extra arguments; when candle's
//! backward pass reaches the outermost link (it is processed first, after every use of the output has
//! contributed to the output's gradient) that link runs the whole tape backward once and every link
//! then returns its two variables' gradients. A plain `loss.backward()` thus fills in every variable.

use std::sync::{Arc, Mutex};

use candle_core::{bail, CpuStorage, CustomOp2, CustomOp3, DType, Layout, Result, Shape, Tensor};
use cppo_kernels::backend::Backend;
use cppo_kernels::cpu::Cpu;
use cppo_kernels::host::with_slice;
use cppo_kernels::reference::Reference;

use super::tape::{self, Tape};
use super::{Ctx, Decoder};

/// A forward pass's tape, held until candle's backward pass asks for the weight gradients.
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

struct Chain {
    dec: Decoder,
    tape: AnyTape,
    /// The current backward pass's weight gradients, taken by the links as they return them.
    grads: Mutex<Vec<Option<Tensor>>>,
}

impl Chain {
    fn run_backward(&self, gout: &Tensor) -> Result<()> {
        let params = &self.dec.params;
        let grads: Vec<Option<Tensor>> = match &self.tape {
            AnyTape::F32(t) => {
                let g = with_slice::<f32, _>(gout, |g| t.backward(&self.dec, g))??;
                g.into_iter().zip(params).map(|(g, p)| g.map(|g| Tensor::from_vec(g, p.t.shape(), p.t.device())).transpose()).collect::<Result<_>>()?
            }
            AnyTape::F64(t) => {
                let g = with_slice::<f64, _>(gout, |g| t.backward(&self.dec, g))??;
                g.into_iter().zip(params).map(|(g, p)| g.map(|g| Tensor::from_vec(g, p.t.shape(), p.t.device())).transpose()).collect::<Result<_>>()?
            }
        };
        let mut slot = self.grads.lock().map_err(|_| candle_core::Error::Msg("decoder backward: poisoned".into()))?;
        *slot = grads;
        Ok(())
    }

    fn take(&self, i: usize) -> Result<Tensor> {
        let mut slot = self.grads.lock().map_err(|_| candle_core::Error::Msg("decoder backward: poisoned".into()))?;
        match slot.get_mut(i).and_then(Option::take) {
            Some(g) => Ok(g),
            None => bail!("decoder backward: gradient {i} requested before the tape ran backward"),
        }
    }
}

struct Link {
    chain: Arc<Chain>,
    /// Indices (into `Decoder::params()`) of the variables this link carries.
    first: usize,
    second: Option<usize>,
    outermost: bool,
    /// The innermost link's input is the untracked raw output, which needs no gradient.
    innermost: bool,
}

impl Link {
    fn grads(&self, g: &Tensor) -> Result<(Option<Tensor>, Tensor, Option<Tensor>)> {
        if self.outermost {
            self.chain.run_backward(g)?;
        }
        let pass = if self.innermost { None } else { Some(g.clone()) };
        let a = self.chain.take(self.first)?;
        let b = match self.second {
            Some(i) => Some(self.chain.take(i)?),
            None => None,
        };
        Ok((pass, a, b))
    }
}

fn identity(s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
    match l.contiguous_offsets() {
        Some((a, b)) => {
            let st = match s {
                CpuStorage::F32(v) => CpuStorage::F32(v[a..b].to_vec()),
                CpuStorage::F64(v) => CpuStorage::F64(v[a..b].to_vec()),
                _ => bail!("decoder link: unsupported dtype"),
            };
            Ok((st, l.shape().clone()))
        }
        None => bail!("decoder link: input must be contiguous"),
    }
}

impl CustomOp2 for Link {
    fn name(&self) -> &'static str {
        "cppo-decoder-link"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, _: &CpuStorage, _: &Layout) -> Result<(CpuStorage, Shape)> {
        identity(s1, l1)
    }
    fn bwd(&self, _: &Tensor, _: &Tensor, _: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (pass, a, _) = self.grads(g)?;
        Ok((pass, Some(a)))
    }
}

impl CustomOp3 for Link {
    fn name(&self) -> &'static str {
        "cppo-decoder-link"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, _: &CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout) -> Result<(CpuStorage, Shape)> {
        identity(s1, l1)
    }
    fn bwd(&self, _: &Tensor, _: &Tensor, _: &Tensor, _: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (pass, a, b) = self.grads(g)?;
        Ok((pass, Some(a), b))
    }
}

/// `raw` (untracked) made differentiable with respect to every variable of `dec` through `tape`
/// (frozen weights are not linked: nothing computes or carries a gradient for them).
pub(crate) fn attach(dec: &Decoder, tape: AnyTape, raw: Tensor) -> Result<Tensor> {
    // (position among the parameters, tensor) of each variable.
    let vars: Vec<(usize, Tensor)> = dec.params.iter().enumerate().filter(|(_, p)| p.var.is_some()).map(|(i, p)| (i, p.t.clone())).collect();
    if vars.is_empty() || !vars.iter().all(|(_, v)| v.is_variable()) {
        bail!("decoder link: no trainable weight to link");
    }
    match (&tape, raw.dtype()) {
        (AnyTape::F32(_), DType::F32) | (AnyTape::F64(_), DType::F64) => {}
        _ => bail!("decoder link: tape and output dtypes differ"),
    }
    let chain = Arc::new(Chain { dec: dec.clone(), tape, grads: Mutex::new(Vec::new()) });
    let links = vars.len().div_ceil(2);
    let mut out = raw;
    for j in 0..links {
        let second = vars.get(2 * j + 1);
        let link = Link {
            chain: chain.clone(),
            first: vars[2 * j].0,
            second: second.map(|v| v.0),
            outermost: j + 1 == links,
            innermost: j == 0,
        };
        out = match second {
            Some((_, t)) => out.apply_op3(&vars[2 * j].1, t, link)?,
            None => out.apply_op2(&vars[2 * j].1, link)?,
        };
    }
    Ok(out)
}
