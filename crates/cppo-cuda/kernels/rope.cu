// Rotary position embedding, Hugging Face's rotate-half layout (cppo-model ops/rope.rs): in each head
// of 2 * half values, (x[i], x[i + half]) rotate by the angle of (position, i). `inverse` rotates
// back, which is the backward pass. One thread per pair; y may be x (each thread reads its pair
// before writing it).

template <typename TI, typename TO>
__device__ void rope(const TI* x, TO* y, const int* pos, const float* cos_t, const float* sin_t, int rows, int heads,
                     int half, int inverse) {
    long long n = (long long)rows * heads * half;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
        int i = (int)(e % half);
        long long rh = e / half;
        int r = (int)(rh / heads);
        long long base = rh * 2 * half;
        float x1 = load(x, base + i), x2 = load(x, base + half + i);
        long long at = (long long)pos[r] * half + i;
        float c = cos_t[at], s = sin_t[at];
        float a = inverse ? x1 * c + x2 * s : x1 * c - x2 * s;
        float b = inverse ? x2 * c - x1 * s : x2 * c + x1 * s;
        store(y, base + i, a);
        store(y, base + half + i, b);
    }
}

#define ROPE(NAME, TI, TO) \
    extern "C" __global__ void NAME(const TI* x, TO* y, const int* pos, const float* cos_t, const float* sin_t, \
                                    int rows, int heads, int half, int inverse) { \
        rope(x, y, pos, cos_t, sin_t, rows, heads, half, inverse); \
    }
ROPE(rope_f32_f32, float, float)
ROPE(rope_f32_bf16, float, bf16)
ROPE(rope_bf16_bf16, bf16, bf16)
