include!("../cppo-kernels/build_isa.rs");

fn main() {
    // The `cppo_isa_*` cfgs: a test comparing bf16 products with the CPU backend's needs a CPU that
    // rounds their operands (AVX512-BF16).
    isa_cfg();
    // The emulation tests compile the kernels with the `cc` crate at test time (only tests pay for it);
    // cc needs the target triple, which only a build script is told.
    for key in ["TARGET", "HOST"] {
        println!("cargo:rustc-env=CPPO_CUDA_{key}={}", std::env::var(key).expect("cargo sets TARGET and HOST"));
    }
}
