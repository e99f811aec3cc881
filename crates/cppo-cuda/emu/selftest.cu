// Kernels that exercise the emulation itself (compiled only into the emulation library): what it
// must compute (warp exchanges, shared memory) and the misuse it must report instead of hanging.

extern "C" __global__ void emu_divergent_barrier(int* out, int n) {
    if ((int)threadIdx.x < n) __syncthreads();
    out[threadIdx.x] = 1;
}

extern "C" __global__ void emu_two_barriers(int* out, int n) {
    if (threadIdx.x % 2) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = n;
}

extern "C" __global__ void emu_partial_mask(int* out, int n) { out[threadIdx.x] = __shfl_sync(0xffffu, n, 0); }

// out[8 t ..]: xor, down, up, broadcast, ballot, any, all, and the block sum.
extern "C" __global__ void emu_warp_ops(int* out, int n) {
    int t = threadIdx.x, lane = t % 32;
    int* o = out + 8 * t;
    o[0] = __shfl_xor_sync(CPPO_WARP_FULL, t, 5);
    o[1] = __shfl_down_sync(CPPO_WARP_FULL, t, 3);
    o[2] = __shfl_up_sync(CPPO_WARP_FULL, t, 3);
    o[3] = __shfl_sync(CPPO_WARP_FULL, t, 7);
    o[4] = (int)__ballot_sync(CPPO_WARP_FULL, lane % 3 == 0);
    o[5] = __any_sync(CPPO_WARP_FULL, t == n);
    o[6] = __all_sync(CPPO_WARP_FULL, lane < 31);
    o[7] = block_sum(t);
}

// Static shared memory is the block's: each block fills it and reads a neighbour's entry after the
// barrier. Dynamic shared memory starts as 0xff bytes in every block.
extern "C" __global__ void emu_shared(int* out, int n) {
    __shared__ int s[64];
    unsigned* dyn = dynamic_shared<unsigned>();
    int t = threadIdx.x;
    int fresh = dyn[t] == 0xffffffffu;
    __syncthreads();
    dyn[t] = 0;
    s[t] = (int)blockIdx.x * 1000 + t;
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = s[(t + 1) % blockDim.x] * fresh + n;
}

extern "C" __global__ void emu_write_past(int* out, int n) {
    if (threadIdx.x == 0) out[n] = 1;
}
