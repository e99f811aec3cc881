// RMS norm over rows of `d`: y = x * r * w with r = 1 / sqrt(mean(x^2) + eps), and its backward
// dx = r * (g w - xhat * mean(g w xhat)), dw = sum over rows of g xhat, with xhat = x r (the CPU op,
// cppo-model ops/rms_norm.rs). One block per row at a time (grid-stride over rows), threads over `d`.
// The weight gradient is left as one partial row per block (`dw_partial`, gridDim.x x d), summed by
// `sum_rows_f32` afterwards: deterministic, unlike atomics.

template <typename TX> __device__ float row_rstd(const TX* xr, int d, float eps) {
    float ss = 0.0f;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float v = load(xr, c);
        ss += v * v;
    }
    ss = block_sum(ss);
    return 1.0f / sqrtf(ss / (float)d + eps);
}

template <typename TX, typename TY>
__device__ void rms_norm_fwd(const TX* x, const float* w, TY* y, int rows, int d, float eps) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const TX* xr = x + (long long)r * d;
        float rs = row_rstd(xr, d, eps);
        for (int c = threadIdx.x; c < d; c += blockDim.x) store(y, (long long)r * d + c, load(xr, c) * rs * w[c]);
    }
}

#define RMS_NORM_FWD(NAME, TX, TY) \
    extern "C" __global__ void NAME(const TX* x, const float* w, TY* y, int rows, int d, float eps) { \
        rms_norm_fwd(x, w, y, rows, d, eps); \
    }
RMS_NORM_FWD(rms_norm_fwd_f32_f32, float, float)
RMS_NORM_FWD(rms_norm_fwd_f32_bf16, float, bf16)
RMS_NORM_FWD(rms_norm_fwd_bf16_bf16, bf16, bf16)

// `accumulate`: dx += instead of dx = (a residual stream's gradient). `dw_partial` may be null.
template <typename TX>
__device__ void rms_norm_bwd(const TX* x, const float* w, const float* g, float* dx, float* dw_partial, int rows,
                             int d, float eps, int accumulate) {
    for (int c = threadIdx.x; dw_partial && c < d; c += blockDim.x) dw_partial[(long long)blockIdx.x * d + c] = 0.0f;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const TX* xr = x + (long long)r * d;
        const float* gr = g + (long long)r * d;
        float rs = row_rstd(xr, d, eps);
        float dot = 0.0f;
        for (int c = threadIdx.x; c < d; c += blockDim.x) dot += gr[c] * w[c] * load(xr, c) * rs;
        float mean = block_sum(dot) / (float)d;
        for (int c = threadIdx.x; c < d; c += blockDim.x) {
            float xv = load(xr, c);
            float v = rs * (gr[c] * w[c] - xv * rs * mean);
            long long i = (long long)r * d + c;
            dx[i] = accumulate ? dx[i] + v : v;
            if (dw_partial) dw_partial[(long long)blockIdx.x * d + c] += gr[c] * xv * rs;
        }
    }
}

#define RMS_NORM_BWD(NAME, TX) \
    extern "C" __global__ void NAME(const TX* x, const float* w, const float* g, float* dx, float* dw_partial, \
                                    int rows, int d, float eps, int accumulate) { \
        rms_norm_bwd(x, w, g, dx, dw_partial, rows, d, eps, accumulate); \
    }
RMS_NORM_BWD(rms_norm_bwd_f32, float)
RMS_NORM_BWD(rms_norm_bwd_bf16, bf16)
