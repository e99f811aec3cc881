//! The CUDA side of cppo's GPU backend, written so that everything but the vendor products can be
//! checked on a CPU:
//!
//! - `kernels/*.cu`: CUDA C for every operation of a training step and of rollouts that is not a
//!   matrix product, header-free (bf16 by integer arithmetic), compiled at run time by NVRTC. The
//!   tests compile the same files as C++ under `emu/cuda_emu.h`, which runs a block as one OS thread
//!   per GPU thread with real barriers and warp exchanges, and compare every kernel with a plain Rust
//!   reference; a second test compiles every file with NVRTC for sm_90.
//! - `ops`: the launch of each operation (checks, kernel choice by dtype, geometry, arguments) against
//!   the `Launcher` trait, which the device implements and so does the emulation.
//! - `plan`: the device memory a training run needs, printed at start.
//! - `cuda` (feature `cuda`): device, stream, module cache and cuBLASLt wrappers over cudarc.
//!
//! Precision: weights for products in bf16, master weights, moments and gradients in f32; kernels
//! compute in f32 (f64 where the CPU op does) and read or write f32 or bf16 as instantiated.

pub mod buf;
pub mod error;
pub mod gemm;
pub mod geometry;
pub mod index;
pub mod kernels;
pub mod launch;
pub mod nvrtc_lib;
pub mod ops;
pub mod plan;

#[cfg(feature = "cuda")]
pub mod cuda;

pub use buf::{Buf, DType};
pub use error::{Error, Result};
pub use geometry::Tune;
pub use launch::{launch, Arg, LaunchConfig, Launcher};
