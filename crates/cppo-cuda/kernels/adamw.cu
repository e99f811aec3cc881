// The optimizer step on the device (cppo-train optim.rs): the global gradient norm in f64 from
// per-block partial sums (a fixed order, so deterministic), the clipping coefficient, and one fused
// AdamW pass over a flat buffer that also writes the bf16 copy of the weights the products read.

// partial[blockIdx.x] = sum of g^2 over this block's grid-stride share of g.
extern "C" __global__ void sumsq_partial(const float* g, long long n, double* partial) {
    double acc = 0.0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        acc += (double)g[i] * (double)g[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// stats[0] = norm = sqrt(sum of partials), stats[1] = max_norm / (norm + 1e-6) when clipping applies
// (max_norm > 0 and norm > max_norm), else 1. One block.
extern "C" __global__ void grad_norm_finish(const double* partial, int count, double max_norm, double* stats) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) {
        double norm = sqrt(acc);
        stats[0] = norm;
        stats[1] = max_norm > 0.0 && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
    }
}

// p = p (1 - decay) - lr / bc1 * m / (sqrt(v) / bc2_sqrt + eps), m and v the moments of the clipped
// gradient, in the CPU's operation order. A non-finite norm in stats leaves everything untouched
// (the CPU refuses that step). `p_bf16` may be null.
extern "C" __global__ void adamw(float* p, const float* g, float* m, float* v, bf16* p_bf16, long long n, float lr,
                                 float beta1, float beta2, float eps, float decay, float bc1, float bc2_sqrt,
                                 const double* stats) {
    double norm = stats[0];
    if (!(norm - norm == 0.0)) return;
    float clip = (float)stats[1];
    float step = lr / bc1;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float gi = g[i] * clip;
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        float pi = p[i] * (1.0f - decay) - step * mi / denom;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
        if (p_bf16) p_bf16[i] = f32_to_bf16(pi);
    }
}
