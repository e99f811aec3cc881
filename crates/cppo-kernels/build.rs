//! The `cppo_isa_*` cfgs that gate the kernel tests by instruction set (build_isa.rs says how).

include!("build_isa.rs");

fn main() {
    isa_cfg();
}
