//! The one way to read a candle tensor's memory as a slice: the decoder keeps its weights in candle
//! tensors (trainable ones as `Var`s) and hands the kernels slices of them.

use candle_core::{bail, Layout, Result, Storage, StorageRef, Tensor, WithDType};

/// A read lock on one tensor's storage, for as long as its slice is in use.
pub struct HostSlice<'a> {
    guard: StorageRef<'a>,
    layout: &'a Layout,
    name: &'a str,
}

impl<'a> HostSlice<'a> {
    /// `name` labels errors.
    pub fn new(t: &'a Tensor, name: &'a str) -> Self {
        let (guard, layout) = t.storage_and_layout();
        HostSlice {
            guard,
            layout,
            name,
        }
    }

    /// The tensor's elements, which must be contiguous, in host memory, of type `T`.
    pub fn get<T: WithDType>(&self) -> Result<&[T]> {
        match &*self.guard {
            Storage::Cpu(c) => {
                let d = c.as_slice::<T>()?;
                match self.layout.contiguous_offsets() {
                    Some((a, b)) => Ok(&d[a..b]),
                    None => bail!("{} is not contiguous", self.name),
                }
            }
            _ => bail!("{} is not in host memory", self.name),
        }
    }
}

/// Runs `f` on the elements of `t` (made contiguous first if it is strided).
pub fn with_slice<T: WithDType, R>(t: &Tensor, f: impl FnOnce(&[T]) -> R) -> Result<R> {
    let t = t.contiguous()?;
    let s = HostSlice::new(&t, "tensor");
    Ok(f(s.get::<T>()?))
}
