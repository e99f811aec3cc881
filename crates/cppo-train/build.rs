//! The `cppo_isa_*` cfgs (cppo-kernels/build_isa.rs): the tests comparing a device's bf16 products
//! with the CPU trainer's need a CPU that rounds them (AVX512-BF16).

include!("../cppo-kernels/build_isa.rs");

fn main() {
    isa_cfg();
}
