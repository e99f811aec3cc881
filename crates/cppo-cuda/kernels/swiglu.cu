// The gated MLP's activation y = silu(gate) * up and its backward (cppo-model ops/swiglu.rs):
// with s = sigmoid(gate), d gate = dy * up * s * (1 + gate * (1 - s)), d up = dy * gate * s.

__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

template <typename TI, typename TO> __device__ void swiglu_fwd(const TI* g, const TI* u, TO* y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float gv = load(g, i);
        store(y, i, gv * sigmoid(gv) * load(u, i));
    }
}

template <typename TI, typename TO>
__device__ void swiglu_bwd(const TI* g, const TI* u, const float* dy, TO* dg, TO* du, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float gv = load(g, i), uv = load(u, i), d = dy[i];
        float s = sigmoid(gv);
        store(dg, i, d * uv * s * (1.0f + gv * (1.0f - s)));
        store(du, i, d * (gv * s));
    }
}

#define SWIGLU(SUFFIX, TI, TO) \
    extern "C" __global__ void swiglu_fwd_##SUFFIX(const TI* g, const TI* u, TO* y, long long n) { swiglu_fwd(g, u, y, n); } \
    extern "C" __global__ void swiglu_bwd_##SUFFIX(const TI* g, const TI* u, const float* dy, TO* dg, TO* du, long long n) { \
        swiglu_bwd(g, u, dy, dg, du, n); \
    }
SWIGLU(f32_f32, float, float)
SWIGLU(f32_bf16, float, bf16)
SWIGLU(bf16_bf16, bf16, bf16)
