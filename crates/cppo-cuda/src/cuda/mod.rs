//! The device side over cudarc (feature `cuda`): the device with its stream and buffers, the module
//! cache that compiles `kernels/` with NVRTC and launches them (the `Launcher` the ops run on), and
//! the cuBLASLt products. Written against cudarc 0.19's API and built in CI, but **never run on a
//! GPU yet**: none of this has executed; the self-test on a GPU is its first run.

pub mod blas;
pub mod device;
pub mod libs;
pub mod module;
pub mod selftest;
pub mod side;

pub use blas::Blas;
pub use device::{Device, DeviceBuffer, Plain};
pub use side::CudaSide;
