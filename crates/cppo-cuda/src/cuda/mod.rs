//! The device side over cudarc (feature `cuda`): the device with its stream and buffers, the module
//! cache that compiles `kernels/` with NVRTC and launches them (the `Launcher` the ops run on), and
//! the cuBLASLt products. Written against cudarc 0.19's API and built in CI, but **never run on a
//! GPU yet**: none of this has executed; the self-test on a GPU is its first run.

pub mod blas;
pub mod device;
pub mod libs;
pub mod module;
pub mod side;

pub use blas::Blas;
pub use device::{Device, DeviceBuffer, Plain};
pub use side::CudaSide;

use crate::error::{Error, Result};

/// The ordinal of `cuda` / `cuda:N`.
pub fn ordinal(device: &str) -> Result<usize> {
    match device.split_once(':') {
        None if device == "cuda" => Ok(0),
        Some(("cuda", n)) => n.parse().map_err(|_| Error::shape("device", format!("device {device:?}: expected cuda or cuda:N"))),
        _ => Err(Error::shape("device", format!("device {device:?}: a GPU is named `cuda` or `cuda:N`"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_named_cuda_or_cuda_n() {
        assert_eq!(ordinal("cuda").unwrap(), 0);
        assert_eq!(ordinal("cuda:3").unwrap(), 3);
        for bad in ["cpu", "cuda:", "cuda:x", "gpu:0"] {
            assert!(ordinal(bad).is_err(), "{bad}");
        }
    }
}
