// The optimizer step on the device (cppo-train optim.rs): the global gradient norm in f64 from
// per-block partial sums (a fixed order, so deterministic), the clipping coefficient, and one fused
// AdamW pass over a flat buffer, or over every trainable tensor at once, that also writes the bf16
// copy of the weights the products read.

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

// One element of AdamW: p = p (1 - decay) - lr / bc1 * m / (sqrt(v) / bc2_sqrt + eps), m and v the
// moments of the clipped gradient, in the CPU's operation order.
__device__ __forceinline__ void adamw_elem(float* p, float g, float* m, float* v, bf16* p_bf16, float beta1, float beta2,
                                           float eps, float decay, float step, float bc2_sqrt) {
    float mi = beta1 * *m + (1.0f - beta1) * g;
    float vi = beta2 * *v + (1.0f - beta2) * g * g;
    float denom = sqrtf(vi) / bc2_sqrt + eps;
    float pi = *p * (1.0f - decay) - step * mi / denom;
    *m = mi;
    *v = vi;
    *p = pi;
    if (p_bf16) *p_bf16 = f32_to_bf16(pi);
}

// One flat buffer. A non-finite norm in stats leaves everything untouched (the CPU refuses that
// step). `p_bf16` may be null.
extern "C" __global__ void adamw(float* p, const float* g, float* m, float* v, bf16* p_bf16, long long n, float lr,
                                 float beta1, float beta2, float eps, float decay, float bc1, float bc2_sqrt,
                                 const double* stats) {
    double norm = stats[0];
    if (!(norm - norm == 0.0)) return;
    float clip = (float)stats[1];
    float step = lr / bc1;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        adamw_elem(p + i, g[i] * clip, m + i, v + i, p_bf16 ? p_bf16 + i : 0, beta1, beta2, eps, decay, step, bc2_sqrt);
}

// Every trainable tensor in one launch (as PyTorch's fused multi-tensor AdamW): the gradients and
// moments lie end to end in g, m, v; the weights (and their optional bf16 copies) are separate
// allocations, found by address. `tensors` holds four numbers per tensor: the weights' address, the
// bf16 copy's address (0: none), its offset in g / m / v, its length; `decays` its lr * weight_decay.
// Block b updates chunk b: `chunks[2b]` names the tensor, `chunks[2b + 1]` where in it the chunk
// starts; a chunk is `chunk_len` elements or the tensor's rest, so no block spans two tensors.
extern "C" __global__ void adamw_tensors(const long long* tensors, const float* decays, const long long* chunks,
                                         long long chunk_len, const float* g, float* m, float* v, float lr,
                                         float beta1, float beta2, float eps, float bc1, float bc2_sqrt,
                                         const double* stats) {
    double norm = stats[0];
    if (!(norm - norm == 0.0)) return;
    float clip = (float)stats[1];
    float step = lr / bc1;
    long long t = chunks[2 * (long long)blockIdx.x], start = chunks[2 * (long long)blockIdx.x + 1];
    float* p = (float*)tensors[4 * t];
    bf16* pb = (bf16*)tensors[4 * t + 1];
    long long off = tensors[4 * t + 2], n = tensors[4 * t + 3];
    long long end = start + chunk_len < n ? start + chunk_len : n;
    float decay = decays[t];
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x)
        adamw_elem(p + i, g[off + i] * clip, m + off + i, v + off + i, pb ? pb + i : 0, beta1, beta2, eps, decay, step, bc2_sqrt);
}
