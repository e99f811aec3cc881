//! Every kernel run on the CPU under the CUDA emulation and compared with a plain Rust reference of
//! the CPU op it stands for, on fresh random inputs, odd sizes and several geometries.

mod check;
mod emu;
mod emulator;

mod elementwise;
mod rms_norm;
mod rows;
mod rope;
mod swiglu;
mod attention;
mod logprob;
mod adamw;
mod decode;
mod sample;
mod backend;
mod decoder;
mod generate;
mod trainer;
