//! Which instruction set the kernels may use: what the CPU has, capped by `CPPO_MAX_ISA`.
//!
//! Every kernel asks [`has`] before it takes a vector path, so one switch decides them all. The cap
//! exists so that an AVX-512 machine can test and measure the AVX2 and scalar paths too (`CPPO_MAX_ISA=avx2
//! cargo test -p cppo-model`); it cannot raise the level above what the CPU has. The general GEMM that
//! candle and the f32 products use (the `gemm` crate) dispatches by itself and is not capped.
//!
//! Tests that need a level are gated at build time by the same rule (`build.rs` emits `cppo_isa_avx2`,
//! `cppo_isa_avx512`, `cppo_isa_avx512bf16`), so a test that cannot run here is listed as ignored with
//! its reason instead of passing without checking anything.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

/// The environment variable that caps the level.
pub const MAX_ISA_ENV: &str = "CPPO_MAX_ISA";

/// Instruction-set levels, each including the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// Plain Rust loops (what the compiler vectorises for baseline x86-64, or NEON on aarch64).
    Scalar,
    /// AVX2 with FMA (x86-64-v3: Haswell, Zen 1-3).
    Avx2,
    /// AVX-512 F, VL and BW (x86-64-v4: Skylake-X, Zen 4).
    Avx512,
    /// AVX-512 plus the bf16 dot product `vdpbf16ps` (Cooper Lake, Sapphire Rapids, Zen 4).
    Avx512Bf16,
}

impl Isa {
    pub const ALL: [Isa; 4] = [Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16];

    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Avx512Bf16 => "avx512bf16",
        }
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Isa {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Isa::ALL
            .into_iter()
            .find(|i| i.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| {
                let names: Vec<&str> = Isa::ALL.iter().map(|i| i.name()).collect();
                format!(
                    "{MAX_ISA_ENV}={s:?} is not a level: use one of {}",
                    names.join(", ")
                )
            })
    }
}

/// The highest level this CPU supports, ignoring the cap.
pub fn detected() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        use std::is_x86_feature_detected as has;
        if !(has!("avx2") && has!("fma")) {
            return Isa::Scalar;
        }
        if !(has!("avx512f") && has!("avx512vl") && has!("avx512bw")) {
            return Isa::Avx2;
        }
        if !has!("avx512bf16") {
            return Isa::Avx512;
        }
        Isa::Avx512Bf16
    }
    #[cfg(not(target_arch = "x86_64"))]
    Isa::Scalar
}

/// Who designed the CPU. The same instruction runs at different speeds on different designs, so a
/// default that pays on one can lose on another (see `Precision::for_update`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    Amd,
    Intel,
    /// Any other x86-64 vendor string, or not x86-64.
    Other,
}

impl Vendor {
    /// The vendor of a CPUID vendor string (leaf 0: EBX, EDX, ECX as 12 bytes).
    pub fn from_cpuid_string(id: &[u8]) -> Vendor {
        match id {
            b"AuthenticAMD" => Vendor::Amd,
            b"GenuineIntel" => Vendor::Intel,
            _ => Vendor::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Vendor::Amd => "AMD",
            Vendor::Intel => "Intel",
            Vendor::Other => "other",
        }
    }
}

/// This CPU's vendor, read once.
pub fn vendor() -> Vendor {
    static VENDOR: OnceLock<Vendor> = OnceLock::new();
    *VENDOR.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            #[allow(unused_unsafe)]
            // SAFETY: CPUID leaf 0 exists on every x86-64 CPU and only reads identification registers.
            let r = unsafe { std::arch::x86_64::__cpuid(0) };
            let mut id = [0u8; 12];
            id[..4].copy_from_slice(&r.ebx.to_le_bytes());
            id[4..8].copy_from_slice(&r.edx.to_le_bytes());
            id[8..].copy_from_slice(&r.ecx.to_le_bytes());
            Vendor::from_cpuid_string(&id)
        }
        #[cfg(not(target_arch = "x86_64"))]
        Vendor::Other
    })
}

/// The cap `CPPO_MAX_ISA` sets, if any.
///
/// # Panics
/// When the variable names no level: a mistyped cap must not silently test the wrong paths.
pub fn cap() -> Option<Isa> {
    let value = std::env::var(MAX_ISA_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())?;
    Some(value.parse().unwrap_or_else(|e: String| panic!("{e}")))
}

/// The level the kernels use: [`detected`], lowered to the cap when one is set. Read once per process.
pub fn level() -> Isa {
    static LEVEL: OnceLock<Isa> = OnceLock::new();
    *LEVEL.get_or_init(|| match cap() {
        Some(c) => c.min(detected()),
        None => detected(),
    })
}

/// Whether the kernels may use `isa`.
#[inline]
pub fn has(isa: Isa) -> bool {
    level() >= isa
}

/// One line for logs and benches: the level in use and why, e.g. `avx2 (cpu: avx512bf16, capped by CPPO_MAX_ISA)`.
pub fn describe() -> String {
    let (level, cpu) = (level(), detected());
    if level == cpu {
        level.to_string()
    } else {
        format!("{level} (cpu: {cpu}, capped by {MAX_ISA_ENV})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendor_strings_map_to_vendors() {
        assert_eq!(Vendor::from_cpuid_string(b"AuthenticAMD"), Vendor::Amd);
        assert_eq!(Vendor::from_cpuid_string(b"GenuineIntel"), Vendor::Intel);
        assert_eq!(Vendor::from_cpuid_string(b"HygonGenuine"), Vendor::Other);
        assert_eq!(Vendor::from_cpuid_string(b"Genuine"), Vendor::Other);
    }

    /// The CPUID read agrees with what Linux reports in /proc/cpuinfo.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn the_vendor_read_matches_proc_cpuinfo() {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap();
        let line = info.lines().find(|l| l.starts_with("vendor_id")).expect("vendor_id in /proc/cpuinfo");
        let id = line.split(':').nth(1).unwrap().trim();
        assert_eq!(vendor(), Vendor::from_cpuid_string(id.as_bytes()), "{line}");
    }

    #[test]
    fn names_parse_back_and_order_by_width() {
        for isa in Isa::ALL {
            assert_eq!(isa.name().parse::<Isa>().unwrap(), isa);
            assert_eq!(isa.name().to_uppercase().parse::<Isa>().unwrap(), isa);
        }
        assert!(
            Isa::Scalar < Isa::Avx2 && Isa::Avx2 < Isa::Avx512 && Isa::Avx512 < Isa::Avx512Bf16
        );
        let err = "sse9".parse::<Isa>().unwrap_err();
        assert!(
            err.contains(MAX_ISA_ENV) && err.contains("avx512bf16"),
            "{err}"
        );
    }

    #[test]
    fn the_level_never_exceeds_the_cpu_or_the_cap() {
        assert!(level() <= detected());
        if let Some(c) = cap() {
            assert!(level() <= c);
        }
        assert!(has(Isa::Scalar));
    }

    /// The build-time gate (`build.rs`) and the run-time level agree, so a test that is not ignored
    /// finds its kernel available.
    #[test]
    fn the_build_time_gate_matches_the_run_time_level() {
        assert_eq!(
            cfg!(cppo_isa_avx2),
            has(Isa::Avx2),
            "rebuild: the tests were built for another CPU or cap"
        );
        assert_eq!(
            cfg!(cppo_isa_avx512),
            has(Isa::Avx512),
            "rebuild: the tests were built for another CPU or cap"
        );
        assert_eq!(
            cfg!(cppo_isa_avx512bf16),
            has(Isa::Avx512Bf16),
            "rebuild: the tests were built for another CPU or cap"
        );
    }
}
