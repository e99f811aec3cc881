// The attention pieces around the batched products, over the packed rows of an `AttnLayout`
// (cppo-model ops/attention.rs). The products write the scores of every span into one buffer: span
// `sp` owns `heads * len` rows of `pl + len` columns at `off[sp]` (row `head * len + i` for query i),
// the first `pl` columns its shared prefix (all visible), the next `len` its own rows (causal: query
// i sees own columns 0..=i). `pair_start[sp]` counts the rows of the spans before it. One block per
// score row (grid-stride); masked entries are written as exact zeros, as the CPU does.

__device__ __forceinline__ int find_span(const int* pair_start, int spans, int pair) {
    int lo = 0, hi = spans - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (pair_start[mid] <= pair) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

struct ScoreRow {
    long long at;  // first element of the row
    int total;     // columns
    int visible;   // leading columns that are not masked
};

__device__ __forceinline__ ScoreRow score_row(const long long* off, const int* pair_start, const int* len, const int* pl,
                                              int spans, int pair) {
    int sp = find_span(pair_start, spans, pair);
    int local = pair - pair_start[sp];
    int L = len[sp], P = pl[sp];
    ScoreRow r;
    r.total = P + L;
    r.at = off[sp] + (long long)local * r.total;
    r.visible = P + local % L + 1;
    return r;
}

// max and 1 / sum of exp(scale s - max) over the visible columns.
__device__ __forceinline__ void row_softmax_stats(const float* s, int visible, float scale, float* m, float* inv) {
    float mx = -CPPO_INF;
    for (int c = threadIdx.x; c < visible; c += blockDim.x) mx = fmaxf(mx, s[c] * scale);
    mx = block_max(mx);
    float sum = 0.0f;
    for (int c = threadIdx.x; c < visible; c += blockDim.x) sum += expf(s[c] * scale - mx);
    *m = mx;
    *inv = 1.0f / block_sum(sum);
}

// p = softmax(scale * s) per row, zeros where masked.
template <typename TO>
__device__ void attn_softmax_fwd(const float* s, TO* p, const long long* off, const int* pair_start, const int* len,
                                 const int* pl, int pairs, int spans, float scale) {
    for (int pair = blockIdx.x; pair < pairs; pair += gridDim.x) {
        ScoreRow r = score_row(off, pair_start, len, pl, spans, pair);
        const float* sr = s + r.at;
        float m, inv;
        row_softmax_stats(sr, r.visible, scale, &m, &inv);
        for (int c = threadIdx.x; c < r.total; c += blockDim.x)
            store(p, r.at + c, c < r.visible ? expf(sr[c] * scale - m) * inv : 0.0f);
    }
}

// The softmax backward from the recomputed probabilities: ds = p * (dp - sum_j p_j dp_j), zero where
// masked (the scale is applied by the products that use ds, as on the CPU). `p_out`, if not null,
// receives p (for the dV product).
template <typename TO>
__device__ void attn_softmax_bwd(const float* s, const float* dp, TO* ds, TO* p_out, const long long* off,
                                 const int* pair_start, const int* len, const int* pl, int pairs, int spans, float scale) {
    for (int pair = blockIdx.x; pair < pairs; pair += gridDim.x) {
        ScoreRow r = score_row(off, pair_start, len, pl, spans, pair);
        const float* sr = s + r.at;
        const float* dr = dp + r.at;
        float m, inv;
        row_softmax_stats(sr, r.visible, scale, &m, &inv);
        float dot = 0.0f;
        for (int c = threadIdx.x; c < r.visible; c += blockDim.x) dot += expf(sr[c] * scale - m) * inv * dr[c];
        dot = block_sum(dot);
        for (int c = threadIdx.x; c < r.total; c += blockDim.x) {
            float pv = c < r.visible ? expf(sr[c] * scale - m) * inv : 0.0f;
            store(ds, r.at + c, pv * (dr[c] - dot));
            if (p_out) store(p_out, r.at + c, pv);
        }
    }
}

#define ATTN_SOFTMAX(SUFFIX, TO) \
    extern "C" __global__ void attn_softmax_fwd_##SUFFIX(const float* s, TO* p, const long long* off, \
                                                         const int* pair_start, const int* len, const int* pl, \
                                                         int pairs, int spans, float scale) { \
        attn_softmax_fwd(s, p, off, pair_start, len, pl, pairs, spans, scale); \
    } \
    extern "C" __global__ void attn_softmax_bwd_##SUFFIX(const float* s, const float* dp, TO* ds, TO* p_out, \
                                                         const long long* off, const int* pair_start, const int* len, \
                                                         const int* pl, int pairs, int spans, float scale) { \
        attn_softmax_bwd(s, dp, ds, p_out, off, pair_start, len, pl, pairs, spans, scale); \
    }
ATTN_SOFTMAX(f32, float)
ATTN_SOFTMAX(bf16, bf16)
