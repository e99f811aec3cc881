// Sampling one token per row of logits on the device, with the CPU sampler's semantics
// (cppo-engine sampling.rs) given the same uniform draw `u[row]` in [0, 1) (the host draws it from
// the row's own seeded RNG, exactly as the CPU sampler would: one `gen::<f64>()` per non-greedy step):
// - greedy: the first index of the largest logit, log-prob under softmax(logits) in f64;
// - else p = exp((logit - max) / T) (f32, unnormalised); top-k keeps the k largest, ties broken by the
//   lower index; top-p keeps the shortest prefix of that order whose mass reaches top_p of the kept
//   mass; min_p > 0 then keeps, of those, the p >= min_p (the largest p is exactly 1); the token is
//   the first index whose running kept mass (index order) exceeds u * total, and its log-prob is
//   ln(p / total).
// The kept set is always a prefix of the order (p descending, index ascending), so it is found as
// "every p above a threshold T, plus the first m indices whose p equals T" by radix selection over
// the bits of p (non-negative floats order as their bits), 8 bits a pass. Masses are f64, as on the
// CPU, but summed in another order (and through shared-memory atomics): a draw can differ from the
// CPU's only when u * total lies within rounding (~1e-16 relative) of a boundary between tokens, or
// top_p * total within rounding of a prefix mass.
// One block per row (whole warps); `probs` is scratch of rows x vocab floats.

struct Select {
    unsigned key;  // threshold bits T
    int ties;      // how many indices with p == T are kept (from the lowest)
    double above;  // mass strictly above T (within the candidate set)
};

__device__ __forceinline__ unsigned key_of(float p) { return __float_as_uint(p); }

// Finds the threshold at which a descending walk over the candidates reaches `want` elements
// (by_mass = 0) or mass >= `want` (by_mass = 1). Candidates: every index of `p`, or, when
// `limit.ties >= 0`, those above `limit.key` plus `limit.ties` of those equal to it. Sets *found to 0
// when the mass never reaches `want` (rounding at top_p near 1).
__device__ Select radix_select(const float* p, int vocab, int by_mass, double want, Select limit, int* found) {
    __shared__ unsigned cnt[256];
    __shared__ double mass[256];
    __shared__ unsigned s_prefix;
    __shared__ double s_above, s_need;
    __shared__ int s_found, s_ties;
    if (threadIdx.x == 0) {
        s_prefix = 0;
        s_above = 0.0;
        s_need = want;
        s_found = 1;
    }
    __syncthreads();
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x) {
            cnt[b] = 0;
            mass[b] = 0.0;
        }
        __syncthreads();
        unsigned hi_mask = shift == 24 ? 0u : 0xffffffffu << (shift + 8);
        unsigned prefix = s_prefix;
        for (int c = threadIdx.x; c < vocab; c += blockDim.x) {
            unsigned k = key_of(p[c]);
            bool cand = limit.ties < 0 || k > limit.key;
            if (cand && (k & hi_mask) == (prefix & hi_mask)) {
                unsigned b = (k >> shift) & 255u;
                atomicAdd(&cnt[b], 1u);
                if (by_mass) atomicAdd(&mass[b], (double)p[c]);
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            // The kept ties at the limit count as candidates of the limit's bin.
            if (limit.ties > 0 && (limit.key & hi_mask) == (prefix & hi_mask)) {
                unsigned b = (limit.key >> shift) & 255u;
                cnt[b] += (unsigned)limit.ties;
                mass[b] += (double)limit.ties * (double)__uint_as_float(limit.key);
            }
            double acc = 0.0;
            int b = 255;
            for (; b >= 0; b--) {
                double w = by_mass ? mass[b] : (double)cnt[b];
                if (cnt[b] > 0 && acc + w >= s_need) break;
                acc += w;
            }
            if (b < 0) {
                s_found = 0;
                b = 0;
            }
            s_need -= acc;
            s_above += by_mass ? acc : 0.0;
            s_prefix = prefix | ((unsigned)b << shift);
            s_ties = (int)cnt[b];
        }
        __syncthreads();
    }
    Select r;
    r.key = s_prefix;
    r.above = s_above;
    // Elements at the threshold that are needed: `need` of them by count; by mass, the first m with
    // above + m p >= want, adding one at a time as the CPU does.
    double need = s_need;
    int ties = s_ties;
    *found = s_found;
    __syncthreads();
    if (!by_mass) {
        r.ties = (int)need;
    } else {
        double t = (double)__uint_as_float(r.key), acc = r.above;
        int m = 0;
        do {
            acc += t;
            m++;
        } while (m < ties && acc < want);
        r.ties = m;
    }
    return r;
}

// Inclusive scan over the block; `*total` gets the block's sum. Every thread must call it.
template <typename T> __device__ T block_scan(T v, T* total) {
    __shared__ T warp_totals[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int o = 1; o < 32; o <<= 1) {
        T n = __shfl_up_sync(CPPO_WARP_FULL, v, o);
        if (lane >= o) v += n;
    }
    if (lane == 31) warp_totals[warp] = v;
    __syncthreads();
    T before = 0, all = 0;
    for (int w = 0; w < warps; w++) {
        if (w < warp) before += warp_totals[w];
        all += warp_totals[w];
    }
    __syncthreads();
    *total = all;
    return before + v;
}

// transformers' RepetitionPenaltyLogitsProcessor on the flat indices `at` (row * vocab + token, each
// at most once): a logit below 0 is multiplied by the penalty, any other divided by it.
extern "C" __global__ void repetition_penalty(float* logits, const int* at, int n, float penalty) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float z = logits[at[i]];
        logits[at[i]] = z < 0.0f ? z * penalty : z / penalty;
    }
}

extern "C" __global__ void sample_rows(const float* logits, float* probs, const double* u, int* token, float* logprob,
                                       int rows, int vocab, float inv_t, double top_p, int top_k, int greedy,
                                       double min_p) {
    __shared__ float s_best_v[32];
    __shared__ int s_best_i[32];
    __shared__ int s_chosen, s_last;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* z = logits + (long long)r * vocab;
        float* p = probs + (long long)r * vocab;
        float mx = -CPPO_INF;
        for (int c = threadIdx.x; c < vocab; c += blockDim.x) mx = fmaxf(mx, z[c]);
        mx = block_max(mx);
        if (greedy) {
            // First index of the largest logit (a value must beat -inf to count, as on the CPU).
            float bv = -CPPO_INF;
            int bi = 0x7fffffff;
            for (int c = threadIdx.x; c < vocab; c += blockDim.x)
                if (z[c] > bv) {
                    bv = z[c];
                    bi = c;
                }
            for (int o = 16; o > 0; o >>= 1) {
                float ov = __shfl_xor_sync(CPPO_WARP_FULL, bv, o);
                int oi = __shfl_xor_sync(CPPO_WARP_FULL, bi, o);
                if (ov > bv || (ov == bv && oi < bi)) {
                    bv = ov;
                    bi = oi;
                }
            }
            if (lane == 0) {
                s_best_v[warp] = bv;
                s_best_i[warp] = bi;
            }
            double sum = 0.0;
            for (int c = threadIdx.x; c < vocab; c += blockDim.x) sum += exp((double)z[c] - (double)mx);
            sum = block_sum(sum);  // its barriers publish s_best_*
            if (threadIdx.x == 0) {
                for (int w = 1; w < warps; w++)
                    if (s_best_v[w] > bv || (s_best_v[w] == bv && s_best_i[w] < bi)) {
                        bv = s_best_v[w];
                        bi = s_best_i[w];
                    }
                if (bi == 0x7fffffff) bi = 0;
                token[r] = bi;
                logprob[r] = (float)(((double)z[bi] - (double)mx) - log(sum));
            }
            __syncthreads();
            continue;
        }
        for (int c = threadIdx.x; c < vocab; c += blockDim.x) p[c] = expf((z[c] - mx) * inv_t);
        __syncthreads();
        // The kept set as (threshold, ties kept, mass above); ties = -1: everything.
        Select keep;
        keep.key = 0;
        keep.ties = -1;
        keep.above = 0.0;
        int found = 1;
        if (top_k > 0 && top_k < vocab) keep = radix_select(p, vocab, 0, (double)top_k, keep, &found);
        if (top_p < 1.0) {
            double above = 0.0;
            for (int c = threadIdx.x; c < vocab; c += blockDim.x)
                if (keep.ties < 0 || key_of(p[c]) > keep.key) above += (double)p[c];
            above = block_sum(above);
            double kept = keep.ties < 0 ? above : above + (double)keep.ties * (double)__uint_as_float(keep.key);
            Select nucleus = radix_select(p, vocab, 1, top_p * kept, keep, &found);
            if (found) keep = nucleus;
        }
        // min_p cuts the kept prefix further at p >= min_p (a floor of 0 keeps everything).
        const double floor_p = min_p;
        const int ties_pass = (double)__uint_as_float(keep.key) >= floor_p;
        // Kept mass, then the first kept index whose running mass (index order) exceeds u * total.
        double total = 0.0;
        for (int c = threadIdx.x; c < vocab; c += blockDim.x)
            if ((keep.ties < 0 || key_of(p[c]) > keep.key) && (double)p[c] >= floor_p) total += (double)p[c];
        total = block_sum(total);
        if (keep.ties > 0 && ties_pass) total += (double)keep.ties * (double)__uint_as_float(keep.key);
        double target = u[r] * total;
        if (threadIdx.x == 0) {
            s_chosen = 0x7fffffff;
            s_last = 0;
        }
        __syncthreads();
        double run = 0.0;
        int tie_run = 0;
        for (int base = 0; base < vocab; base += blockDim.x) {
            int c = base + threadIdx.x;
            float pc = c < vocab ? p[c] : 0.0f;
            unsigned k = key_of(pc);
            int is_tie = c < vocab && keep.ties >= 0 && k == keep.key;
            int ties_here;
            int tie_rank = tie_run + block_scan(is_tie, &ties_here) - is_tie;
            bool kept = c < vocab && (keep.ties < 0 || k > keep.key || (is_tie && tie_rank < keep.ties))
                        && (double)pc >= floor_p;
            double w = kept ? (double)pc : 0.0;
            double chunk;
            double incl = run + block_scan(w, &chunk);
            if (kept && pc > 0.0f) {
                atomicMax(&s_last, c);
                if (incl > target) atomicMin(&s_chosen, c);
            }
            run += chunk;
            tie_run += ties_here;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int chosen = s_chosen == 0x7fffffff ? s_last : s_chosen;
            token[r] = chosen;
            logprob[r] = (float)log((double)p[chosen] / total);
        }
        __syncthreads();
    }
}
