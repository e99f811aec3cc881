// Rollouts: the key/value cache and the attention of one new query row per sequence over it.
// Cache layout per layer (as cppo-model kv_cache.rs): (cache rows, kv_heads, max_len, d); key (row,
// kv head, position) at ((row * kv_heads + kh) * max_len + pos) * d. The cache is bf16 for rollouts
// on the device, or f32 where the backend's buffers are (the `Backend` trait's cache is its `T`).

// Token t's keys and values (n rows of kv_heads * d) go to cache row rows[t], position pos[t].
template <typename T, typename TC>
__device__ void kv_append(const T* k, const T* v, TC* kc, TC* vc, const int* rows, const int* pos, int n,
                          int kv_heads, int d, int max_len) {
    long long width = (long long)kv_heads * d, total = n * width;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
        int t = (int)(e / width);
        long long rem = e % width;
        int kh = (int)(rem / d), c = (int)(rem % d);
        long long dst = (((long long)rows[t] * kv_heads + kh) * max_len + pos[t]) * d + c;
        store(kc, dst, load(k, e));
        store(vc, dst, load(v, e));
    }
}
#define KV_APPEND(NAME, T, TC) \
    extern "C" __global__ void NAME(const T* k, const T* v, TC* kc, TC* vc, const int* rows, const int* pos, \
                                    int n, int kv_heads, int d, int max_len) { \
        kv_append(k, v, kc, vc, rows, pos, n, kv_heads, d, max_len); \
    }
KV_APPEND(kv_append_f32_bf16, float, bf16)
KV_APPEND(kv_append_bf16_bf16, bf16, bf16)
KV_APPEND(kv_append_f32_f32, float, float)

// out[i, h] = softmax(scale q[i, h] . keys) values, over the keys of two segments of the cache:
// segs[6 i ..] = (row, first position, count) twice. The first is a shared prompt's row (count 0 when
// there is none), the second the sequence's own positions. One block per (i, h), grid-stride; the
// scores live in dynamic shared memory: d + max_keys floats.
template <typename TQ, typename TC, typename TO>
__device__ void decode_attention(const TQ* q, const TC* kc, const TC* vc, TO* out, const int* segs, int n, int heads,
                                 int kv_heads, int d, int max_len, int max_keys, float scale) {
    float* qs = dynamic_shared<float>();
    float* sc = qs + d;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const int group = heads / kv_heads;
    for (int pair = blockIdx.x; pair < n * heads; pair += gridDim.x) {
        int i = pair / heads, h = pair % heads, kh = h / group;
        const int* sg = segs + 6LL * i;
        int keys = sg[2] + sg[5];
        if (keys > max_keys) keys = max_keys;  // the host checks; never read past the scratch
        for (int c = threadIdx.x; c < d; c += blockDim.x) qs[c] = load(q, ((long long)i * heads + h) * d + c);
        __syncthreads();
        for (int j = warp; j < keys; j += warps) {
            int row = j < sg[2] ? sg[0] : sg[3];
            int p = j < sg[2] ? sg[1] + j : sg[4] + (j - sg[2]);
            const TC* kp = kc + (((long long)row * kv_heads + kh) * max_len + p) * d;
            float dot = 0.0f;
            for (int c = lane; c < d; c += 32) dot += qs[c] * load(kp, c);
            dot = warp_sum(dot);
            if (lane == 0) sc[j] = dot * scale;
        }
        __syncthreads();
        float mx = -CPPO_INF;
        for (int j = threadIdx.x; j < keys; j += blockDim.x) mx = fmaxf(mx, sc[j]);
        mx = block_max(mx);
        float sum = 0.0f;
        for (int j = threadIdx.x; j < keys; j += blockDim.x) {
            float e = expf(sc[j] - mx);
            sc[j] = e;
            sum += e;
        }
        float inv = 1.0f / block_sum(sum);
        for (int c = threadIdx.x; c < d; c += blockDim.x) {
            float acc = 0.0f;
            for (int j = 0; j < keys; j++) {
                int row = j < sg[2] ? sg[0] : sg[3];
                int p = j < sg[2] ? sg[1] + j : sg[4] + (j - sg[2]);
                acc += sc[j] * inv * load(vc, (((long long)row * kv_heads + kh) * max_len + p) * d + c);
            }
            store(out, ((long long)i * heads + h) * d + c, acc);
        }
        __syncthreads();
    }
}
#define DECODE_ATTENTION(NAME, TQ, TC, TO) \
    extern "C" __global__ void NAME(const TQ* q, const TC* kc, const TC* vc, TO* out, const int* segs, int n, \
                                    int heads, int kv_heads, int d, int max_len, int max_keys, float scale) { \
        decode_attention(q, kc, vc, out, segs, n, heads, kv_heads, d, max_len, max_keys, scale); \
    }
DECODE_ATTENTION(decode_attention_f32_bf16_f32, float, bf16, float)
DECODE_ATTENTION(decode_attention_f32_bf16_bf16, float, bf16, bf16)
DECODE_ATTENTION(decode_attention_bf16_bf16_bf16, bf16, bf16, bf16)
DECODE_ATTENTION(decode_attention_f32_f32_f32, float, float, float)
