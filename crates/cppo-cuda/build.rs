// The emulation tests compile the kernels with the `cc` crate at test time (only tests pay for it);
// cc needs the target triple, which only a build script is told.
fn main() {
    for key in ["TARGET", "HOST"] {
        println!("cargo:rustc-env=CPPO_CUDA_{key}={}", std::env::var(key).expect("cargo sets TARGET and HOST"));
    }
    println!("cargo:rerun-if-changed=build.rs");
}
