//! One launch function per device operation: it checks every buffer against the sizes it is given,
//! picks the kernel instantiation for the buffers' dtypes, its geometry, and its argument order.
//! Nothing here touches CUDA; `Launcher` runs the kernels (the device, or the CPU emulation in tests).

pub mod adamw;
pub mod attention;
pub mod attention_plan;
pub mod decode;
pub mod elementwise;
pub mod logprob;
pub mod rms_norm;
pub mod rope;
pub mod rows;
pub mod sample;
pub mod swiglu;

use crate::buf::{Buf, DType};
use crate::error::{Error, Result};

pub(crate) const FLOAT: &[DType] = &[DType::F32, DType::Bf16];
pub(crate) const F32: &[DType] = &[DType::F32];
pub(crate) const I32: &[DType] = &[DType::I32];

/// `n` as a kernel's `int`, or a shape error.
pub(crate) fn int(op: &'static str, what: &str, n: usize) -> Result<i32> {
    i32::try_from(n).map_err(|_| Error::shape(op, format!("{what} = {n} does not fit an int")))
}

/// `prefix_a_b` for the dtypes of the buffers.
pub(crate) fn name(prefix: &str, bufs: &[Buf]) -> String {
    let mut s = prefix.to_string();
    for b in bufs {
        s.push('_');
        s.push_str(b.dtype.suffix());
    }
    s
}
