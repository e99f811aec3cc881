// Elementwise passes over flat buffers: dtype casts, fills, adds, and a bias broadcast. Grid-stride
// loops, so any grid covers any length.

template <typename TI, typename TO> __device__ void cast(const TI* x, TO* y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        store(y, i, load(x, i));
}
extern "C" __global__ void cast_f32_bf16(const float* x, bf16* y, long long n) { cast(x, y, n); }
extern "C" __global__ void cast_bf16_f32(const bf16* x, float* y, long long n) { cast(x, y, n); }

template <typename T> __device__ void fill(T* x, float v, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        store(x, i, v);
}
extern "C" __global__ void fill_f32(float* x, float v, long long n) { fill(x, v, n); }
extern "C" __global__ void fill_bf16(bf16* x, float v, long long n) { fill(x, v, n); }

// y += x
template <typename T> __device__ void add_into(float* y, const T* x, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] += load(x, i);
}
extern "C" __global__ void add_f32_f32(float* y, const float* x, long long n) { add_into(y, x, n); }
extern "C" __global__ void add_f32_bf16(float* y, const bf16* x, long long n) { add_into(y, x, n); }

// y[r, c] += b[c] for `rows` rows of `width`: a product's bias, added after the product.
template <typename T> __device__ void add_bias(T* y, const float* b, int rows, int width) {
    long long n = (long long)rows * width;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        store(y, i, load(y, i) + b[i % width]);
}
extern "C" __global__ void add_bias_f32(float* y, const float* b, int rows, int width) { add_bias(y, b, rows, width); }
extern "C" __global__ void add_bias_bf16(bf16* y, const float* b, int rows, int width) { add_bias(y, b, rows, width); }
