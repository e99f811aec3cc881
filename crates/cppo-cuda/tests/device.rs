//! The device wrappers themselves (feature `cuda`). Without a GPU (this CI) only the refusal is
//! checked: a machine without libcuda gets a clear error, not cudarc's panic. With a GPU, a kernel
//! launch, the copies and a cuBLASLt product run against host references; that half has never run.
//! The kernels' own checks on a GPU: `CPPO_TEST_DEVICE=cuda cargo test -p cppo-cuda --features cuda
//! --test emulated`.
#![cfg(feature = "cuda")]

use cppo_cuda::cuda::device::driver_present;
use cppo_cuda::cuda::{Blas, Device};
use cppo_cuda::gemm::{Gemm, Operand};
use cppo_cuda::ops::elementwise;
use cppo_cuda::DType;

#[test]
fn a_device_runs_kernels_and_products_or_its_absence_is_a_clear_error() {
    if !driver_present() {
        let e = Device::new(0).err().expect("no driver, no device").to_string();
        assert!(e.contains("no CUDA driver"), "{e}");
        eprintln!("no CUDA driver here: the GPU half of this test did not run");
        return;
    }
    let mut dev = Device::new(0).expect("the GPU");
    eprintln!("{} ({}), {:?}", dev.name, dev.arch, dev.memory());
    let x: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) / 7.0).collect();
    let xb = dev.upload(DType::F32, &x).unwrap();
    let yb = dev.alloc(DType::Bf16, x.len()).unwrap();
    let tune = dev.tune;
    elementwise::cast(&mut dev, &tune, xb.buf(), yb.buf(), x.len()).unwrap();
    let y: Vec<u16> = dev.download(&yb).unwrap();
    let want: Vec<u16> = x.iter().map(|v| (v.to_bits().wrapping_add(0x7fff + ((v.to_bits() >> 16) & 1)) >> 16) as u16).collect();
    assert_eq!(y, want);
    // d (3 x 4) = a (3 x 5) b^T with b (4 x 5), f32 operands and output: exact on small integers.
    let a: Vec<f32> = (0..15).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..20).map(|i| (i % 5) as f32 - 2.0).collect();
    let (ab, bb, db) = (dev.upload(DType::F32, &a).unwrap(), dev.upload(DType::F32, &b).unwrap(), dev.zeros(DType::F32, 12).unwrap());
    let mut blas = Blas::new(&dev).unwrap();
    let g = Gemm { m: 3, n: 4, k: 5, a: Operand { trans: false, ld: 5 }, b: Operand { trans: true, ld: 5 }, ld_d: 4, alpha: 1.0, beta: 0.0, batch: None };
    blas.matmul(&g, ab.buf(), bb.buf(), db.buf()).unwrap();
    let d: Vec<f32> = dev.download(&db).unwrap();
    let want: Vec<f32> = (0..12).map(|o| (0..5).map(|l| a[(o / 4) * 5 + l] * b[(o % 4) * 5 + l]).sum()).collect();
    assert_eq!(d, want);
}
