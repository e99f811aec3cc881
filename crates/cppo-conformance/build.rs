//! The `cppo_isa_*` cfgs (cppo-kernels/build_isa.rs): the CPU backend rounds bf16 products' operands,
//! and so passes the suite's bf16 checks, only with AVX512-BF16.

include!("../cppo-kernels/build_isa.rs");

fn main() {
    isa_cfg();
}
