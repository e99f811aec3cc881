//! The CUDA backend (`cppo_cuda::backend::CudaBackend`) on the CPU: its kernels under the emulation,
//! its products on the host as cuBLASLt computes them (`gemm::host_matmul`: bf16 operands widened
//! exactly, f32 sums), every op against the CPU backend through the same suite `cppo selftest
//! --device cuda` runs on a GPU.

use cppo_cuda::backend::{CudaBackend, DeviceSide};
use cppo_cuda::gemm::{host_matmul, Gemm};
use cppo_conformance as conformance;
use cppo_cuda::{Buf, DType, Error, Result, Tune};
use cppo_kernels::backend::Backend;

use crate::check::read_f32;
use crate::emu::Emu;

/// The emulation as a device: allocations live as long as the device (host memory with guard bytes,
/// poisoned with NaN), kernels run under the emulation, products on the host.
pub struct EmuSide {
    emu: Emu,
    tune: Tune,
}

impl EmuSide {
    /// Small blocks and grids, so every grid-stride loop and multi-warp reduction of the backend's
    /// launches iterates (and the emulation's one thread per GPU thread stays cheap).
    pub fn new() -> EmuSide {
        EmuSide { emu: Emu::cpu(), tune: Tune { block: 64, max_blocks: 3 } }
    }
}

impl cppo_cuda::Launcher for EmuSide {
    /// # Safety
    /// `Launcher::launch_raw`'s: arguments matching the kernel's signature, geometry within limits.
    unsafe fn launch_raw(&mut self, k: &'static cppo_cuda::kernels::Kernel, cfg: cppo_cuda::LaunchConfig, args: &[cppo_cuda::Arg]) -> Result<()> {
        // SAFETY: this method's own contract, passed on unchanged.
        unsafe { self.emu.launch_raw(k, cfg, args) }
    }
}

fn widen(emu: &Emu, b: Buf) -> Vec<f32> {
    read_f32(emu, b)
}

impl DeviceSide for EmuSide {
    /// The buffer itself: the memory is the emulated device's until it is dropped.
    type Mem = Buf;

    fn name(&self) -> &'static str {
        "cuda-emulated"
    }
    fn tune(&self) -> Tune {
        self.tune
    }
    fn alloc(&mut self, dtype: DType, len: usize) -> Result<Buf> {
        Ok(self.emu.alloc(dtype, len))
    }
    fn buf_of(m: &Buf) -> Buf {
        *m
    }
    fn write(&mut self, dst: Buf, bytes: &[u8]) -> Result<()> {
        self.emu.write_bytes(dst, bytes);
        Ok(())
    }
    fn read(&mut self, src: Buf) -> Result<Vec<u8>> {
        Ok(self.emu.read_bytes(src))
    }
    fn copy(&mut self, src: Buf, dst: Buf) -> Result<()> {
        if src.dtype != dst.dtype || src.len != dst.len {
            return Err(Error::Shape { op: "copy", detail: format!("{src:?} into {dst:?}") });
        }
        let bytes = self.emu.read_bytes(src);
        self.emu.write_bytes(dst, &bytes);
        Ok(())
    }
    fn matmul(&mut self, g: &Gemm, a: Buf, b: Buf, d: Buf) -> Result<()> {
        let fail = |detail: String| Error::Launch { kernel: "host matmul", detail };
        if a.dtype != b.dtype {
            return Err(fail(format!("operands {:?} and {:?}", a.dtype, b.dtype)));
        }
        let (av, bv) = (widen(&self.emu, a), widen(&self.emu, b));
        let mut dv = widen(&self.emu, d);
        host_matmul(g, &av, &bv, &mut dv).map_err(fail)?;
        let bytes: Vec<u8> = match d.dtype {
            DType::F32 => dv.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            DType::Bf16 => dv.iter().flat_map(|&x| half::bf16::from_f32(x).to_bits().to_ne_bytes()).collect(),
            other => return Err(fail(format!("output {other:?}"))),
        };
        self.emu.write_bytes(d, &bytes);
        Ok(())
    }
}

fn seed() -> u64 {
    let s = std::env::var("CPPO_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    });
    eprintln!("backend: CPPO_TEST_SEED={s}");
    s
}

#[test]
fn every_op_of_the_cuda_backend_under_emulation_matches_the_cpu_backend() {
    let b = CudaBackend::new(EmuSide::new());
    let report = conformance::run(&b, seed());
    eprintln!("{report}");
    assert_eq!(report.checks.len(), conformance::CHECKS, "every check ran:\n{report}");
    assert_eq!(report.failed(), 0, "{report}");
}

#[test]
fn a_refused_shape_panics_with_the_operation_and_reason_and_unwritten_outputs_stay_poisoned() {
    let b = CudaBackend::new(EmuSide::new());
    let x = b.upload(&[1.0; 10]);
    let w = b.upload(&[1.0; 3]);
    let e = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.rms_norm(b.view(&x), b.view(&w), 1e-6))) {
        Ok(_) => panic!("10 elements are not rows of 3, yet rms_norm ran"),
        Err(e) => e,
    };
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("rms_norm") && msg.contains("not rows of 3"), "{msg}");
    // The device's fresh memory is NaN, so an op that skipped part of its output fails the suite.
    let fresh = b.duplicate(b.view(&b.zeros(4)));
    assert_eq!(b.download(b.view(&fresh)), vec![0.0; 4]);
    let mut d = b.device();
    let raw = d.alloc(DType::F32, 3).unwrap();
    let bytes = d.read(raw).unwrap();
    assert!(bytes.chunks_exact(4).all(|c| f32::from_ne_bytes(c.try_into().unwrap()).is_nan()));
}
