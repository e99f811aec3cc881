//! The matrix products through cuBLASLt: bf16 (or f32) operands, f32 accumulation, f32 output where
//! a gradient accumulates (beta = 1) or bf16 where a product feeds another. Row-major products are
//! translated by `gemm::Gemm::lt_call` (tested on the CPU); this file only issues the calls, with
//! every status checked and the chosen algorithm cached per shape. Never run on a GPU yet.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublaslt::{result as lt, sys};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use super::device::Device;
use crate::buf::{Buf, DType};
use crate::error::{Error, Result};
use crate::gemm::{Gemm, Layout, LtCall};

/// Hopper's recommended workspace (cudarc uses the same).
const WORKSPACE_BYTES: usize = 32 << 20;

fn blas_err(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Launch { kernel: "cublasLtMatmul", detail: format!("{what}: {e:?}") }
}

fn data_type(d: DType) -> Result<sys::cudaDataType> {
    match d {
        DType::Bf16 => Ok(sys::cudaDataType::CUDA_R_16BF),
        DType::F32 => Ok(sys::cudaDataType::CUDA_R_32F),
        other => Err(blas_err("operand dtype", other)),
    }
}

/// Destroys a cuBLASLt descriptor when dropped, whatever path leaves the call.
struct Guard<T: Copy>(T, unsafe fn(T) -> std::result::Result<(), lt::CublasError>);
impl<T: Copy> Drop for Guard<T> {
    fn drop(&mut self) {
        // SAFETY: the handle was created by the matching create call and is destroyed only here.
        let _ = unsafe { (self.1)(self.0) };
    }
}

fn layout(dtype: sys::cudaDataType, l: &Layout, batch: i32) -> Result<Guard<sys::cublasLtMatrixLayout_t>> {
    let h = lt::create_matrix_layout(dtype, l.rows, l.cols, l.ld).map_err(|e| blas_err("matrix layout", e))?;
    let g = Guard(h, lt::destroy_matrix_layout as unsafe fn(_) -> _);
    if batch > 1 {
        // SAFETY: attribute buffers of the documented types (int32 count, int64 stride), alive for the call.
        unsafe {
            lt::set_matrix_layout_attribute(h, sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch as *const i32 as *const c_void, 4)
                .map_err(|e| blas_err("batch count", e))?;
            lt::set_matrix_layout_attribute(h, sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &l.batch_stride as *const i64 as *const c_void, 8)
                .map_err(|e| blas_err("batch stride", e))?;
        }
    }
    Ok(g)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    call: [i64; 12],
    types: (u32, u32),
    /// The alignment of cuBLASLt's A (our b), B (our a) and D (our d), which the algorithm was chosen for.
    align: [u32; 3],
}

/// The largest power of two (up to 256, cuBLASLt's default assumption) dividing a device address: the
/// backend passes sub-buffers (a vocabulary chunk of the head, a head's scores), whose alignment the
/// algorithm heuristic must be told or it may pick a kernel needing more.
fn alignment(addr: u64) -> u32 {
    if addr == 0 {
        return 256;
    }
    (1u64 << addr.trailing_zeros().min(8)) as u32
}

impl Key {
    fn new(c: &LtCall, ab: DType, d: DType, align: [u32; 3]) -> Key {
        let l = |x: &Layout| [x.rows as i64, x.cols as i64, x.ld];
        let (x, y, dd) = (l(&c.x), l(&c.y), l(&c.d));
        Key {
            call: [x[0], x[1], x[2], y[0], y[1], y[2], dd[0], dd[1], dd[2], c.batch_count as i64, c.trans_x as i64, c.trans_y as i64],
            types: (ab as u32, d as u32),
            align,
        }
    }
}

pub struct Blas {
    handle: sys::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
    stream: Arc<CudaStream>,
    algos: HashMap<Key, sys::cublasLtMatmulAlgo_t>,
}

impl Blas {
    pub fn new(dev: &Device) -> Result<Blas> {
        // cudarc panics on its first cuBLASLt call where the library is missing: find it first.
        super::libs::ensure(super::libs::Library::BlasLt)?;
        let handle = lt::create_handle().map_err(|e| blas_err("creating the handle", e))?;
        // SAFETY: scratch for cuBLASLt, never read by us.
        let workspace = unsafe { dev.stream.alloc::<u8>(WORKSPACE_BYTES) }.map_err(|e| Error::Driver(format!("cuBLASLt workspace: {e}")))?;
        Ok(Blas { handle, workspace, stream: dev.stream.clone(), algos: HashMap::new() })
    }

    /// `d = alpha op(a) op(b) + beta d` as `g` describes (row-major), on the device's stream. `a` and
    /// `b` of one dtype (bf16 or f32), `d` f32 or bf16; accumulation in f32.
    pub fn matmul(&mut self, g: &Gemm, a: Buf, b: Buf, d: Buf) -> Result<()> {
        g.validate().map_err(|e| blas_err("shape", e))?;
        let (ea, eb, ed) = g.extents();
        if a.dtype != b.dtype || a.len < ea || b.len < eb || d.len < ed {
            return Err(Error::Shape { op: "matmul", detail: format!("{g:?} with a {a:?}, b {b:?}, d {d:?}") });
        }
        let (tab, td) = (data_type(a.dtype)?, data_type(d.dtype)?);
        let c = g.lt_call();
        let desc = lt::create_matmul_desc(sys::cublasComputeType_t::CUBLAS_COMPUTE_32F, sys::cudaDataType::CUDA_R_32F).map_err(|e| blas_err("descriptor", e))?;
        let desc = Guard(desc, lt::destroy_matmul_desc as unsafe fn(_) -> _);
        let (tx, ty) = (c.trans_x as i32, c.trans_y as i32);
        // SAFETY: int32 operation flags, alive for the call.
        unsafe {
            lt::set_matmul_desc_attribute(desc.0, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA, &tx as *const i32 as *const c_void, 4).map_err(|e| blas_err("transa", e))?;
            lt::set_matmul_desc_attribute(desc.0, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB, &ty as *const i32 as *const c_void, 4).map_err(|e| blas_err("transb", e))?;
        }
        let (xl, yl, dl) = (layout(tab, &c.x, c.batch_count)?, layout(tab, &c.y, c.batch_count)?, layout(td, &c.d, c.batch_count)?);
        let align = [alignment(b.addr), alignment(a.addr), alignment(d.addr)];
        let key = Key::new(&c, a.dtype, d.dtype, align);
        let algo = match self.algos.get(&key) {
            Some(a) => *a,
            None => {
                let pref = lt::create_matmul_pref().map_err(|e| blas_err("preference", e))?;
                let pref = Guard(pref, lt::destroy_matmul_pref as unsafe fn(_) -> _);
                let ws = WORKSPACE_BYTES;
                // SAFETY: a size_t attribute and uint32 alignments, alive for the call; every handle
                // is live (guards).
                let h = unsafe {
                    lt::set_matmul_pref_attribute(pref.0, sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws as *const usize as *const c_void, std::mem::size_of::<usize>())
                        .map_err(|e| blas_err("workspace preference", e))?;
                    use sys::cublasLtMatmulPreferenceAttributes_t as P;
                    let (ca, cb, cd) = (align[0], align[1], align[2]);
                    for (attr, v) in [(P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &ca), (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &cb), (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &cd), (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &cd)] {
                        lt::set_matmul_pref_attribute(pref.0, attr, v as *const u32 as *const c_void, 4).map_err(|e| blas_err("alignment preference", e))?;
                    }
                    lt::get_matmul_algo_heuristic(self.handle, desc.0, xl.0, yl.0, dl.0, dl.0, pref.0).map_err(|e| blas_err(&format!("no algorithm for {g:?}"), e))?
                };
                self.algos.insert(key, h.algo);
                h.algo
            }
        };
        let (wp, _w) = self.workspace.device_ptr(&self.stream);
        // SAFETY: the buffers span the extents checked above, on this device; alpha and beta are
        // host f32 (the default pointer mode with an f32 scale type); the algorithm was chosen
        // for exactly these descriptors; D is also C (in place, as beta asks).
        unsafe {
            lt::matmul(
                self.handle,
                desc.0,
                &c.alpha as *const f32 as *const c_void,
                &c.beta as *const f32 as *const c_void,
                b.addr as *const c_void,
                xl.0,
                a.addr as *const c_void,
                yl.0,
                d.addr as *const c_void,
                dl.0,
                d.addr as *mut c_void,
                dl.0,
                &algo,
                wp as *mut c_void,
                WORKSPACE_BYTES,
                self.stream.cu_stream() as _,
            )
        }
        .map_err(|e| blas_err(&format!("{g:?}"), e))
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and destroyed once; queued work finishes first.
        let _ = self.stream.synchronize();
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}

#[cfg(test)]
mod tests {
    use super::alignment;

    #[test]
    fn alignments_are_the_largest_power_of_two_dividing_the_address_up_to_256() {
        assert_eq!(alignment(0x7f00_0000_0000), 256);
        assert_eq!(alignment(0x7f00_0000_0004), 4);
        assert_eq!(alignment(0x7f00_0000_0010), 16);
        assert_eq!(alignment(0x7f00_0000_0102), 2);
    }
}
