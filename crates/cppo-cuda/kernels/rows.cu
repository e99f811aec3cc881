// Row gathers and scatters: the embedding lookup and its gradient, the gather of the scored rows
// before the output projection and the scatter of their gradient, and column sums.

// out[i] = table[ids[i]] for rows of `width`; one block per row at a time.
template <typename TI, typename TO>
__device__ void gather_rows(const TI* table, const int* ids, TO* out, int n, int width) {
    for (int i = blockIdx.x; i < n; i += gridDim.x) {
        const TI* src = table + (long long)ids[i] * width;
        for (int c = threadIdx.x; c < width; c += blockDim.x) store(out, (long long)i * width + c, load(src, c));
    }
}
#define GATHER_ROWS(NAME, TI, TO) \
    extern "C" __global__ void NAME(const TI* table, const int* ids, TO* out, int n, int width) { \
        gather_rows(table, ids, out, n, width); \
    }
GATHER_ROWS(gather_rows_f32_f32, float, float)
GATHER_ROWS(gather_rows_bf16_f32, bf16, float)
GATHER_ROWS(gather_rows_f32_bf16, float, bf16)
GATHER_ROWS(gather_rows_bf16_bf16, bf16, bf16)

// dst[dst_rows[u]] += sum of src[src_rows[k]] for k in seg[u] .. seg[u + 1]: every destination row
// owned by one block, its sources added in a fixed order (deterministic; repeated ids need no atomics).
// The host builds the segments (`index::Segments`).
template <typename T>
__device__ void index_add_rows(float* dst, const T* src, const int* dst_rows, const int* seg, const int* src_rows,
                               int n_dst, int width) {
    for (int u = blockIdx.x; u < n_dst; u += gridDim.x) {
        float* d = dst + (long long)dst_rows[u] * width;
        for (int c = threadIdx.x; c < width; c += blockDim.x) {
            float acc = d[c];
            for (int k = seg[u]; k < seg[u + 1]; k++) acc += load(src, (long long)src_rows[k] * width + c);
            d[c] = acc;
        }
    }
}
#define INDEX_ADD_ROWS(NAME, T) \
    extern "C" __global__ void NAME(float* dst, const T* src, const int* dst_rows, const int* seg, \
                                    const int* src_rows, int n_dst, int width) { \
        index_add_rows(dst, src, dst_rows, seg, src_rows, n_dst, width); \
    }
INDEX_ADD_ROWS(index_add_rows_f32, float)
INDEX_ADD_ROWS(index_add_rows_bf16, bf16)

// out[c] (+)= sum over r of x[r, c]: the partial rows of a weight gradient, or a bias gradient.
// Threads own columns and walk the rows in order, so the sum is deterministic.
template <typename T> __device__ void sum_rows(const T* x, float* out, int rows, int cols, int accumulate) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int r = 0; r < rows; r++) acc += load(x, (long long)r * cols + c);
        out[c] = accumulate ? out[c] + acc : acc;
    }
}
extern "C" __global__ void sum_rows_f32(const float* x, float* out, int rows, int cols, int accumulate) {
    sum_rows(x, out, rows, cols, accumulate);
}
extern "C" __global__ void sum_rows_bf16(const bf16* x, float* out, int rows, int cols, int accumulate) {
    sum_rows(x, out, rows, cols, accumulate);
}
