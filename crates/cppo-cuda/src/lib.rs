//! The CUDA side of cppo's GPU backend, written so that everything but the vendor products can be
//! checked on a CPU:
//!
//! - `kernels/*.cu`: CUDA C for every operation of a training step and of rollouts that is not a
//!   matrix product, header-free (bf16 by integer arithmetic), compiled at run time by NVRTC. The
//!   tests compile the same files as C++ under `emu/cuda_emu.h`, which runs a block as one OS thread
//!   per GPU thread with real barriers and warp exchanges, and compare every kernel with a plain Rust
//!   reference of the CPU op (`tests/emulated`); `tests/nvrtc.rs` compiles every file with NVRTC 13
//!   for compute_90 and sm_90.
//! - `kernels` lists every entry point with its parameter signature; `ops` launches each operation
//!   (buffer checks, kernel choice by dtype, geometry, arguments) against the `Launcher` trait, which
//!   the device implements and so does the emulation. `index` and `ops::attention::ScoreTable` are
//!   the host-built tables some kernels read.
//! - `gemm`: row-major products as cuBLASLt's column-major calls. `plan`: the device memory a run
//!   needs, printed at start. `nvrtc_lib`: NVRTC from the PyPI wheel where no toolkit is installed.
//! - `backend`: `cppo_kernels::Backend` built from those launches and products, generic over the
//!   device side (`backend::DeviceSide`), so the same code runs on a GPU and, in `cargo test`, under
//!   the emulation with host products. The crate depends on the kernels' trait alone: what every
//!   backend must pass, the self-test and the benches are `cppo-conformance`'s (the emulated tests run
//!   its suite here).
//! - `cuda` (feature `cuda`): device, stream, module cache and cuBLASLt products over cudarc 0.19 and
//!   the backend's device side (`cuda::CudaSide`) (dynamic loading: builds with no CUDA present).
//!   Never run on a GPU yet.
//!
//! Precision: weights for products in bf16, master weights, moments and gradients in f32; kernels
//! compute in f32 (f64 where the CPU op does) and read or write f32 or bf16 as instantiated.

pub mod backend;
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
