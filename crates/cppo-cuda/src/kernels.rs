//! The kernel sources (CUDA C in `kernels/`) and every entry point the host launches, with its
//! parameter signature. One letter per parameter: `p` pointer, `i` int, `l` long long, `f` float,
//! `d` double. The emulation tests check each signature against the C++ parameter types and the NVRTC
//! test checks that every entry is in its file's PTX, so a launch here cannot pass arguments that do
//! not match the kernel.

/// Device helpers prepended to every file: bf16, loads and stores, reductions.
pub const COMMON: &str = include_str!("../kernels/common.cuh");

pub struct Source {
    pub name: &'static str,
    pub code: &'static str,
}

pub struct Kernel {
    pub name: &'static str,
    pub sig: &'static str,
    /// The `Source` it is defined in.
    pub file: &'static str,
}

macro_rules! sources {
    ($($file:literal => { $($name:ident : $sig:literal),* $(,)? })*) => {
        pub const SOURCES: &[Source] = &[
            $(Source { name: $file, code: include_str!(concat!("../kernels/", $file)) },)*
        ];
        pub const KERNELS: &[Kernel] = &[
            $($(Kernel { name: stringify!($name), sig: $sig, file: $file },)*)*
        ];
    };
}

sources! {
    "elementwise.cu" => {
        cast_f32_bf16: "ppl",
        cast_bf16_f32: "ppl",
        fill_f32: "pfl",
        fill_bf16: "pfl",
        add_f32_f32: "ppl",
        add_f32_bf16: "ppl",
        add_bias_f32: "ppii",
        add_bias_bf16: "ppii",
    }
    "rms_norm.cu" => {
        rms_norm_fwd_f32_f32: "pppiif",
        rms_norm_fwd_f32_bf16: "pppiif",
        rms_norm_fwd_bf16_bf16: "pppiif",
        rms_norm_bwd_f32: "pppppiifi",
        rms_norm_bwd_bf16: "pppppiifi",
    }
    "rows.cu" => {
        gather_rows_f32_f32: "pppii",
        gather_rows_bf16_f32: "pppii",
        gather_rows_f32_bf16: "pppii",
        gather_rows_bf16_bf16: "pppii",
        index_add_rows_f32: "pppppii",
        index_add_rows_bf16: "pppppii",
        sum_rows_f32: "ppiii",
        sum_rows_bf16: "ppiii",
    }
    "rope.cu" => {
        rope_f32_f32: "pppppiiii",
        rope_f32_bf16: "pppppiiii",
        rope_bf16_bf16: "pppppiiii",
    }
    "swiglu.cu" => {
        swiglu_fwd_f32_f32: "pppl",
        swiglu_fwd_f32_bf16: "pppl",
        swiglu_fwd_bf16_bf16: "pppl",
        swiglu_bwd_f32_f32: "pppppl",
        swiglu_bwd_f32_bf16: "pppppl",
        swiglu_bwd_bf16_bf16: "pppppl",
    }
    "attention.cu" => {
        attn_softmax_fwd_f32: "ppppppiif",
        attn_softmax_fwd_bf16: "ppppppiif",
        attn_softmax_bwd_f32: "ppppppppiif",
        attn_softmax_bwd_bf16: "ppppppppiif",
    }
    "logprob.cu" => {
        logprob_chunk: "pppiii",
        logprob_finish: "pppppi",
        logprob_bwd_chunk_f32: "ppppppiii",
        logprob_bwd_chunk_bf16: "ppppppiii",
    }
    "adamw.cu" => {
        sumsq_partial: "plp",
        grad_norm_finish: "pidp",
        adamw: "ppppplfffffffp",
        adamw_tensors: "ppplpppffffffp",
    }
    "decode.cu" => {
        kv_append_f32_bf16: "ppppppiiii",
        kv_append_bf16_bf16: "ppppppiiii",
        kv_append_f32_f32: "ppppppiiii",
        decode_attention_f32_bf16_f32: "pppppiiiiiif",
        decode_attention_f32_bf16_bf16: "pppppiiiiiif",
        decode_attention_bf16_bf16_bf16: "pppppiiiiiif",
        decode_attention_f32_f32_f32: "pppppiiiiiif",
    }
    "sample.cu" => {
        sample_rows: "pppppiifdiid",
        repetition_penalty: "ppif",
    }
}

pub fn kernel(name: &str) -> Option<&'static Kernel> {
    KERNELS.iter().find(|k| k.name == name)
}

pub fn source(name: &str) -> Option<&'static Source> {
    SOURCES.iter().find(|s| s.name == name)
}

/// What NVRTC compiles for `file`: the common helpers, then the file, with `#line` so errors point
/// into the right file.
pub fn program(file: &Source) -> String {
    format!("#line 1 \"common.cuh\"\n{COMMON}\n#line 1 \"{}\"\n{}", file.name, file.code)
}

/// NVRTC's options for `arch` (`compute_90` gives PTX the driver finishes, `sm_90` a cubin). The
/// maths stays IEEE (no fast-math) and multiply-adds are not fused (`--fmad=false`): the CPU ops are
/// the reference to rounding, and neither they nor the emulation fuse (the emulated AdamW test's
/// 2e-7 bounds hold only so). The kernels are memory-bound, so the separate roundings cost nothing
/// that shows.
pub fn nvrtc_options(arch: &str) -> Vec<String> {
    vec![format!("--gpu-architecture={arch}"), "--std=c++17".into(), "-lineinfo".into(), "--fmad=false".into()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How often `name` is defined in `code`: written out, through an instantiation macro that takes
    /// the name, or pasted from a prefix (`swiglu_fwd_##SUFFIX`) and an instantiation's suffix.
    fn definitions(code: &str, name: &str) -> usize {
        let direct = code.matches(&format!("void {name}(")).count() + code.matches(&format!("({name},")).count();
        let pasted = (1..name.len())
            .filter(|&i| name.as_bytes()[i] == b'_')
            .filter(|&i| code.contains(&format!("void {}_##", &name[..i])) && code.contains(&format!("({},", &name[i + 1..])))
            .count();
        direct + pasted
    }

    #[test]
    fn every_kernel_is_defined_once_in_its_file_and_signatures_are_well_formed() {
        for k in KERNELS {
            let src = source(k.file).expect("the file exists");
            assert_eq!(definitions(src.code, k.name), 1, "{} in {}", k.name, k.file);
            assert!(!k.sig.is_empty() && k.sig.chars().all(|c| "pilfd".contains(c)), "{}: {}", k.name, k.sig);
            assert_eq!(KERNELS.iter().filter(|o| o.name == k.name).count(), 1, "{} listed twice", k.name);
        }
        assert_eq!(definitions("SWIGLU(f32_bf16, float, bf16)", "swiglu_fwd_f32_bf16"), 0);
    }
}
