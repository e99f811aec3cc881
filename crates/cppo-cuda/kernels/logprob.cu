// The log-probability of chosen tokens under softmax(hidden @ lm_head^T), a vocabulary chunk at a time
// (cppo-model ops/logprob.rs): the product writes one chunk of logits `z` (slots x n, vocabulary
// columns v0 .. v0 + n) and `logprob_chunk` folds it into each slot's online state (running max m,
// s = sum exp(z - m), t = sum exp(z - m) z, and the target's logit), so no (tokens x vocab) tensor
// ever exists. `logprob_finish` turns the state into log-probs, log-normalisers and entropies; the
// backward recomputes each chunk's logits and turns them into dz for the two products.

// state: 4 floats per slot (m, s, t, target logit); the chunk with v0 == 0 starts it afresh.
extern "C" __global__ void logprob_chunk(const float* z, const int* targets, float* state, int slots, int n, int v0) {
    for (int slot = blockIdx.x; slot < slots; slot += gridDim.x) {
        const float* row = z + (long long)slot * n;
        float* st = state + 4LL * slot;
        float m = v0 == 0 ? -CPPO_INF : st[0], s = v0 == 0 ? 0.0f : st[1], t = v0 == 0 ? 0.0f : st[2];
        float zt = v0 == 0 ? 0.0f : st[3];
        float cm = -CPPO_INF;
        for (int c = threadIdx.x; c < n; c += blockDim.x) cm = fmaxf(cm, row[c]);
        cm = block_max(cm);
        if (cm > m) {
            float f = expf(m - cm);
            s *= f;
            t *= f;
            m = cm;
        }
        float ds = 0.0f, dt = 0.0f;
        for (int c = threadIdx.x; c < n; c += blockDim.x) {
            float e = expf(row[c] - m);
            ds += e;
            dt += e * row[c];
        }
        ds = block_sum(ds);
        dt = block_sum(dt);
        int tgt = targets[slot];
        if (threadIdx.x == 0) {
            st[0] = m;
            st[1] = s + ds;
            st[2] = t + dt;
            st[3] = tgt >= v0 && tgt < v0 + n ? row[tgt - v0] : zt;
        }
    }
}

// out[out_index[k]] = target logit - lse; lse[k] = m + log s; entropy[k] = lse - t / s (may be null).
extern "C" __global__ void logprob_finish(const float* state, const int* out_index, float* out, float* lse,
                                          float* entropy, int slots) {
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < slots; k += gridDim.x * blockDim.x) {
        const float* st = state + 4LL * k;
        float l = st[0] + logf(st[1]);
        out[out_index[k]] = st[3] - l;
        lse[k] = l;
        if (entropy) entropy[k] = l - st[2] / st[1];
    }
}

// dz = g * (onehot(target) - softmax(z)) for one recomputed chunk, g the slot's output gradient.
template <typename TO>
__device__ void logprob_bwd_chunk(const float* z, const float* lse, const float* gout, const int* out_index,
                                  const int* targets, TO* dz, int slots, int n, int v0) {
    long long total = (long long)slots * n;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
        int slot = (int)(e / n), c = (int)(e % n);
        float g = gout[out_index[slot]];
        float v = -g * expf(z[e] - lse[slot]);
        if (targets[slot] == v0 + c) v += g;
        store(dz, e, v);
    }
}

#define LOGPROB_BWD(SUFFIX, TO) \
    extern "C" __global__ void logprob_bwd_chunk_##SUFFIX(const float* z, const float* lse, const float* gout, \
                                                          const int* out_index, const int* targets, TO* dz, int slots, \
                                                          int n, int v0) { \
        logprob_bwd_chunk(z, lse, gout, out_index, targets, dz, slots, n, v0); \
    }
LOGPROB_BWD(f32, float)
LOGPROB_BWD(bf16, bf16)
