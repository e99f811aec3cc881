// Shared by the build scripts of cppo-kernels, cppo-cuda and cppo-train (`include!`d): gates tests by
// instruction set, at build time, with the rule `ops::isa::level` applies at run time: the CPU's
// features capped by `CPPO_MAX_ISA`. A test that needs a level this machine lacks is then listed by
// `cargo test` as ignored with its reason, rather than passing without checking anything. Tests run
// on the machine that builds them; a cross build gates every level off.

fn isa_cfg() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=../cppo-kernels/build_isa.rs");
    println!("cargo::rerun-if-env-changed=CPPO_MAX_ISA");
    let levels = ["avx2", "avx512", "avx512bf16"];
    for l in levels {
        println!("cargo::rustc-check-cfg=cfg(cppo_isa_{l})");
    }
    let native = std::env::var("HOST").ok() == std::env::var("TARGET").ok();
    let x86 = std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64");
    if !(native && x86) {
        return;
    }
    let cpu = detected();
    let cap = match std::env::var("CPPO_MAX_ISA") {
        Ok(v) if !v.trim().is_empty() => {
            let v = v.trim().to_ascii_lowercase();
            match v.as_str() {
                "scalar" => 0,
                "avx2" => 1,
                "avx512" => 2,
                "avx512bf16" => 3,
                _ => panic!("CPPO_MAX_ISA={v:?} is not a level: use one of scalar, avx2, avx512, avx512bf16"),
            }
        }
        _ => 3,
    };
    for (i, l) in levels.iter().enumerate() {
        if i < cpu.min(cap) {
            println!("cargo::rustc-cfg=cppo_isa_{l}");
        }
    }
}

/// 0 = scalar, 1 = AVX2 + FMA, 2 = AVX-512 F/VL/BW, 3 = AVX512-BF16 (as `ops::isa::detected`).
#[cfg(target_arch = "x86_64")]
fn detected() -> usize {
    use std::is_x86_feature_detected as has;
    if !(has!("avx2") && has!("fma")) {
        0
    } else if !(has!("avx512f") && has!("avx512vl") && has!("avx512bw")) {
        1
    } else if !has!("avx512bf16") {
        2
    } else {
        3
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detected() -> usize {
    0
}
