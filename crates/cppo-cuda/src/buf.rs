//! Device memory as the kernels see it: an address, an element type and a length. The GPU backend
//! makes these from its device slices, the tests from host memory; the launch functions check every
//! size against them before a kernel runs, so an index error is a host-side error, not a fault.

use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F32,
    Bf16,
    I32,
    I64,
    F64,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::Bf16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// The dtype's part of a kernel name (`rms_norm_fwd_f32_bf16`).
    pub fn suffix(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::Bf16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F64 => "f64",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buf {
    pub addr: u64,
    pub dtype: DType,
    /// Elements.
    pub len: usize,
}

impl Buf {
    pub fn new(addr: u64, dtype: DType, len: usize) -> Self {
        Buf { addr, dtype, len }
    }

    /// The absent buffer, passed as a null pointer to a kernel's optional output.
    pub fn null(dtype: DType) -> Self {
        Buf { addr: 0, dtype, len: 0 }
    }

    pub fn is_null(&self) -> bool {
        self.addr == 0
    }

    /// Elements `start .. start + len` of this buffer.
    pub fn slice(&self, start: usize, len: usize) -> Result<Buf> {
        if start.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(Error::shape("slice", format!("{start}..+{len} of a buffer of {}", self.len)));
        }
        Ok(Buf { addr: self.addr + (start * self.dtype.size()) as u64, dtype: self.dtype, len })
    }

    /// Checks that this buffer holds at least `len` elements of one of `dtypes`.
    pub(crate) fn need(&self, op: &'static str, what: &str, dtypes: &[DType], len: usize) -> Result<()> {
        if !dtypes.contains(&self.dtype) {
            return Err(Error::shape(op, format!("{what} is {:?}, expected one of {dtypes:?}", self.dtype)));
        }
        if self.is_null() && len > 0 {
            return Err(Error::shape(op, format!("{what} is null")));
        }
        if self.len < len {
            return Err(Error::shape(op, format!("{what} holds {} elements, needs {len}", self.len)));
        }
        Ok(())
    }
}
