// Prepended to every kernel file, on the GPU (NVRTC) and under the CPU emulation (emu/cuda_emu.h).
// No CUDA headers: NVRTC ships none, so bf16 is a 16-bit integer converted by integer arithmetic, and
// constants that <math.h> would give are spelled out.

#define CPPO_WARP_FULL 0xffffffffu
#define CPPO_INF __uint_as_float(0x7f800000u)

#ifndef CPPO_EMULATION
// The kernel's dynamic shared memory (the launch's `shared_mem_bytes`), typed as the kernel needs.
template <typename T> __device__ __forceinline__ T* dynamic_shared() {
    extern __shared__ __align__(16) unsigned char cppo_dynamic_smem[];
    return reinterpret_cast<T*>(cppo_dynamic_smem);
}
#endif

// A bfloat16 value: the top half of an f32's bits.
struct bf16 {
    unsigned short bits;
};

__device__ __forceinline__ float bf16_to_f32(bf16 v) { return __uint_as_float(((unsigned)v.bits) << 16); }

// Round to nearest, ties to even; NaN stays a (quiet) NaN instead of rounding into infinity.
__device__ __forceinline__ bf16 f32_to_bf16(float f) {
    unsigned u = __float_as_uint(f);
    bf16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r.bits = (unsigned short)((u >> 16) | 0x40u);
        return r;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    r.bits = (unsigned short)(u >> 16);
    return r;
}

// Kernels read and write f32 or bf16 through these, and compute in f32.
__device__ __forceinline__ float load(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float load(const bf16* p, long long i) { return bf16_to_f32(p[i]); }
__device__ __forceinline__ void store(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void store(bf16* p, long long i, float v) { p[i] = f32_to_bf16(v); }

__device__ __forceinline__ bool is_finite(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }

template <typename T> __device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(CPPO_WARP_FULL, v, o);
    return v;
}

template <typename T> __device__ __forceinline__ T warp_max(T v) {
    for (int o = 16; o > 0; o >>= 1) {
        T w = __shfl_xor_sync(CPPO_WARP_FULL, v, o);
        v = w > v ? w : v;
    }
    return v;
}

// Sum (or max) over the block, returned to every thread. Blocks are whole warps (at most 32 of them);
// every thread of the block must call it. The trailing barrier lets the scratch be reused at once.
template <typename T, bool MAX> __device__ __forceinline__ T block_reduce(T v) {
    __shared__ T scratch[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    T id = MAX ? -CPPO_INF : (T)0;
    v = lane < warps ? scratch[lane] : id;
    v = MAX ? warp_max(v) : warp_sum(v);
    __syncthreads();
    return v;
}
template <typename T> __device__ __forceinline__ T block_sum(T v) { return block_reduce<T, false>(v); }
__device__ __forceinline__ float block_max(float v) { return block_reduce<float, true>(v); }
