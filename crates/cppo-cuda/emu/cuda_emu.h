// Runs CUDA kernels on the CPU, for tests: one OS thread per GPU thread of a block, the blocks of a
// launch one after another (so a function-local `static` is exactly a block's `__shared__`), launches
// one at a time. Barriers and warp operations are real rendezvous of those threads; misuse that a GPU
// would turn into a hang or silent garbage (a barrier in divergent code, a warp operation with a
// partial mask or in a partial warp, threads that exit while others wait) becomes an error naming
// the source line. Dynamic shared memory (`dynamic_shared<T>()`) and every block's start fill it with
// 0xff bytes (NaN), so a read of what was not written shows.
// Limits: no timing; lanes of a warp run independently (code that relies on implicit lockstep fails,
// as it may on Volta and later); only full-mask, full-warp shuffles, ballot/any/all and
// __syncwarp; atomics are add, min and max; blocks never run concurrently, so a kernel that waits on
// another block hangs; no grid sync, __threadfence, volatile semantics, inline PTX, mma/wgmma, TMA or
// cp.async; at most 1024 threads of 1 MiB stack each.
#pragma once
#include <math.h>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <string>
#include <type_traits>
#include <vector>

#define CPPO_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
typedef dim3 uint3;
inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;
constexpr int warpSize = 32;

inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline int __float_as_int(float f) { int u; std::memcpy(&u, &f, 4); return u; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

namespace emu {

struct Fault {};

// The running block; launches are serialised, so one exists at a time. Barriers synchronise through
// their own mutex only (a warp's rounds through the warp's), so ThreadSanitizer sees exactly the
// ordering a GPU guarantees and reports a missing barrier as a race. The counters that detect
// deadlocks are relaxed atomics for the same reason: they must not order anything.
struct Warp {
    std::mutex mu;
    std::condition_variable cv;
    unsigned arrived = 0;
    unsigned long gen = 0;
    const char* site = "";
    unsigned long long slot[32], out[32];
};
struct Block {
    std::mutex mu;
    std::condition_variable cv, done_cv;
    unsigned n = 0, arrived = 0, done = 0;
    unsigned long gen = 0, block_gen = 0;
    const char* site = "";
    std::atomic<unsigned> waiting{0}, exited{0};
    std::atomic<bool> failed{false};
    std::mutex err_mu;
    std::string error;
    unsigned nwarps = 0;
    std::unique_ptr<Warp[]> warps;
    std::vector<unsigned char> dyn;
};
inline Block* g_block = nullptr;
inline thread_local unsigned t_tid = 0;

inline std::string here() {
    char b[96];
    std::snprintf(b, sizeof b, "block (%u,%u,%u) thread %u", blockIdx.x, blockIdx.y, blockIdx.z, t_tid);
    return b;
}

// Records the first error and wakes every waiter (they rethrow). Call with no lock held.
inline void mark_failed(const std::string& msg) {
    Block& b = *g_block;
    {
        std::lock_guard<std::mutex> g(b.err_mu);
        if (b.error.empty()) b.error = msg;
    }
    b.failed.store(true);
    {
        std::lock_guard<std::mutex> g(b.mu);
        b.cv.notify_all();
        b.done_cv.notify_all();
    }
    for (unsigned i = 0; i < b.nwarps; i++) {
        std::lock_guard<std::mutex> g(b.warps[i].mu);
        b.warps[i].cv.notify_all();
    }
}
[[noreturn]] inline void fail(const std::string& msg) {
    mark_failed(msg);
    throw Fault{};
}

// Every live thread waits and none of the waits can end: a GPU would hang here.
inline bool deadlocked(const Block& b) {
    unsigned w = b.waiting.load(std::memory_order_relaxed), e = b.exited.load(std::memory_order_relaxed);
    return w > 0 && w + e == b.n;
}
// Where the stuck threads wait. Called with no lock held (nothing moves any more).
inline std::string deadlock_message(Block& b, const std::string& what) {
    std::string sites;
    {
        std::lock_guard<std::mutex> g(b.mu);
        if (b.arrived > 0) sites += std::string(" __syncthreads at ") + b.site + " (" + std::to_string(b.arrived) + " threads);";
    }
    for (unsigned i = 0; i < b.nwarps; i++) {
        std::lock_guard<std::mutex> g(b.warps[i].mu);
        if (b.warps[i].arrived > 0) sites += std::string(" warp ") + std::to_string(i) + " at " + b.warps[i].site + ";";
    }
    return "deadlock (" + what + "): " + std::to_string(b.exited.load()) + " of " + std::to_string(b.n) +
           " threads exited, the rest wait:" + sites + " a barrier or warp operation in divergent code";
}

inline void syncthreads(const char* line) {
    Block& b = *g_block;
    std::unique_lock<std::mutex> lk(b.mu);
    if (b.failed.load()) throw Fault{};
    if (b.arrived == 0) b.site = line;
    else if (std::strcmp(b.site, line) != 0) {
        std::string msg = std::string("__syncthreads at ") + b.site + " and " + line + " met (" + here() + "): a barrier in divergent code";
        lk.unlock();
        fail(msg);
    }
    if (++b.arrived == b.n) {
        b.arrived = 0;
        b.waiting.fetch_sub(b.n - 1, std::memory_order_relaxed);
        b.gen++;
        b.cv.notify_all();
        return;
    }
    b.waiting.fetch_add(1, std::memory_order_relaxed);
    if (deadlocked(b)) {
        lk.unlock();
        fail(deadlock_message(b, here()));
    }
    unsigned long g = b.gen;
    b.cv.wait(lk, [&] { return b.gen != g || b.failed.load(); });
    if (b.failed.load()) throw Fault{};
}

// All 32 lanes deposit a value; each gets the snapshot of the round.
inline const unsigned long long* warp_round(unsigned mask, unsigned long long v, const char* line) {
    Block& b = *g_block;
    if (b.failed.load()) throw Fault{};
    if (mask != 0xffffffffu) fail(std::string("warp operation with a partial mask at ") + line);
    if (b.n % 32 != 0) fail(std::string("warp operation at ") + line + " in a block of " + std::to_string(b.n) + " threads (not whole warps)");
    Warp& w = b.warps[t_tid / 32];
    std::unique_lock<std::mutex> lk(w.mu);
    if (w.arrived == 0) w.site = line;
    else if (std::strcmp(w.site, line) != 0) {
        std::string msg = std::string("warp operations at ") + w.site + " and " + line + " met (" + here() + "): divergent lanes";
        lk.unlock();
        fail(msg);
    }
    w.slot[t_tid % 32] = v;
    if (++w.arrived == 32) {
        std::memcpy(w.out, w.slot, sizeof w.out);
        w.arrived = 0;
        b.waiting.fetch_sub(31, std::memory_order_relaxed);
        w.gen++;
        w.cv.notify_all();
        return w.out;
    }
    b.waiting.fetch_add(1, std::memory_order_relaxed);
    if (deadlocked(b)) {
        lk.unlock();
        fail(deadlock_message(b, here()));
    }
    unsigned long g = w.gen;
    w.cv.wait(lk, [&] { return w.gen != g || b.failed.load(); });
    if (b.failed.load()) throw Fault{};
    // `out` is only rewritten when the next round completes, which needs this lane.
    return w.out;
}

template <typename T> unsigned long long bits(T v) {
    static_assert(sizeof(T) <= 8, "warp values are at most 8 bytes");
    unsigned long long u = 0;
    std::memcpy(&u, &v, sizeof(T));
    return u;
}
template <typename T> T unbits(unsigned long long u) { T v; std::memcpy(&v, &u, sizeof(T)); return v; }
inline unsigned lane() { return t_tid % 32; }
inline void full_width(int width, const char* line) {
    if (width != 32) fail("warp operation of width " + std::to_string(width) + " at " + line);
}

template <typename T> T shfl(const char* line, unsigned mask, T v, int src, int width = 32) {
    full_width(width, line);
    return unbits<T>(warp_round(mask, bits(v), line)[src & 31]);
}
template <typename T> T shfl_xor(const char* line, unsigned mask, T v, int m, int width = 32) {
    full_width(width, line);
    return unbits<T>(warp_round(mask, bits(v), line)[(lane() ^ m) & 31]);
}
template <typename T> T shfl_down(const char* line, unsigned mask, T v, unsigned d, int width = 32) {
    full_width(width, line);
    unsigned s = lane() + d;
    return unbits<T>(warp_round(mask, bits(v), line)[s < 32 ? s : lane()]);
}
template <typename T> T shfl_up(const char* line, unsigned mask, T v, unsigned d, int width = 32) {
    full_width(width, line);
    return unbits<T>(warp_round(mask, bits(v), line)[lane() >= d ? lane() - d : lane()]);
}
inline unsigned ballot(const char* line, unsigned mask, int p) {
    const unsigned long long* o = warp_round(mask, p ? 1 : 0, line);
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= (o[i] ? 1u : 0u) << i;
    return r;
}

// Plain RMW atomics; float and double through compare-and-swap on their bits.
template <typename T> T atomic_add(T* p, T v) {
    if constexpr (sizeof(T) == 4 && !std::is_integral<T>::value) {
        unsigned* u = reinterpret_cast<unsigned*>(p);
        unsigned old = __atomic_load_n(u, __ATOMIC_RELAXED), nv;
        do { nv = __float_as_uint(__uint_as_float(old) + v); } while (!__atomic_compare_exchange_n(u, &old, nv, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
        return __uint_as_float(old);
    } else if constexpr (sizeof(T) == 8 && !std::is_integral<T>::value) {
        unsigned long long* u = reinterpret_cast<unsigned long long*>(p);
        unsigned long long old = __atomic_load_n(u, __ATOMIC_RELAXED), nv;
        do { nv = bits(unbits<T>(old) + v); } while (!__atomic_compare_exchange_n(u, &old, nv, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
        return unbits<T>(old);
    } else {
        return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
    }
}

template <bool MAX, typename T> T atomic_extreme(T* p, T v) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while ((MAX ? v > old : v < old) && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
    return old;
}

struct Launch {
    dim3 grid, block;
    void (*body)(void*);
    void* ctx;
};

inline void* thread_main(void* arg) {
    const Launch& l = *static_cast<Launch*>(arg);
    Block& b = *g_block;
    blockDim = l.block;
    gridDim = l.grid;
    threadIdx.x = t_tid % l.block.x;
    threadIdx.y = t_tid / l.block.x % l.block.y;
    threadIdx.z = t_tid / (l.block.x * l.block.y);
    for (unsigned z = 0; z < l.grid.z; z++)
        for (unsigned y = 0; y < l.grid.y; y++)
            for (unsigned x = 0; x < l.grid.x; x++) {
                blockIdx.x = x; blockIdx.y = y; blockIdx.z = z;
                try {
                    l.body(l.ctx);
                } catch (const Fault&) {
                    return nullptr;
                } catch (...) {
                    mark_failed("C++ exception in a kernel (" + here() + ")");
                    return nullptr;
                }
                if (b.failed.load()) return nullptr;
                b.exited.fetch_add(1, std::memory_order_relaxed);
                if (deadlocked(b)) {
                    mark_failed(deadlock_message(b, here() + " exited last"));
                    return nullptr;
                }
                // The block ends when its last thread does; the next one starts with fresh shared memory.
                std::unique_lock<std::mutex> lk(b.mu);
                if (++b.done == b.n) {
                    b.done = 0;
                    b.exited.store(0, std::memory_order_relaxed);
                    std::memset(b.dyn.data(), 0xff, b.dyn.size());
                    b.block_gen++;
                    b.done_cv.notify_all();
                } else {
                    unsigned long g = b.block_gen;
                    b.done_cv.wait(lk, [&] { return b.block_gen != g || b.failed.load(); });
                    if (b.failed.load()) return nullptr;
                }
            }
    return nullptr;
}

// Runs `body` as a kernel over `grid` x `block`; returns an empty string or the first error.
inline std::string launch(dim3 grid, dim3 block, size_t dyn_bytes, void (*body)(void*), void* ctx) {
    static std::mutex serial;
    std::lock_guard<std::mutex> one_at_a_time(serial);
    unsigned n = block.x * block.y * block.z;
    if (n == 0 || n > 1024) return "block of " + std::to_string(n) + " threads (1 to 1024)";
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return "empty grid";
    Block b;
    b.n = n;
    b.nwarps = (n + 31) / 32;
    b.warps.reset(new Warp[b.nwarps]);
    // Shared memory starts as NaN bytes: a kernel that reads what it did not write sees garbage.
    b.dyn.assign(dyn_bytes, 0xff);
    g_block = &b;
    Launch l{grid, block, body, ctx};
    std::vector<pthread_t> threads(n);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    struct Start { Launch* l; unsigned tid; };
    std::vector<Start> starts(n);
    unsigned started = 0;
    for (unsigned t = 0; t < n; t++) {
        starts[t] = Start{&l, t};
        auto entry = [](void* a) -> void* {
            Start* s = static_cast<Start*>(a);
            t_tid = s->tid;
            return thread_main(s->l);
        };
        if (pthread_create(&threads[t], &attr, entry, &starts[t]) != 0) {
            mark_failed("cannot start thread " + std::to_string(t));
            break;
        }
        started++;
    }
    pthread_attr_destroy(&attr);
    for (unsigned t = 0; t < started; t++) pthread_join(threads[t], nullptr);
    g_block = nullptr;
    return b.failed.load() ? b.error : std::string();
}

}  // namespace emu

#define EMU_STR2(x) #x
#define EMU_STR(x) EMU_STR2(x)
#define EMU_SITE (__FILE__ ":" EMU_STR(__LINE__))
#define __syncthreads() emu::syncthreads(EMU_SITE)
#define __syncwarp(...) ((void)emu::warp_round(0xffffffffu, 0, EMU_SITE))
#define __shfl_sync(...) emu::shfl(EMU_SITE, __VA_ARGS__)
#define __shfl_xor_sync(...) emu::shfl_xor(EMU_SITE, __VA_ARGS__)
#define __shfl_down_sync(...) emu::shfl_down(EMU_SITE, __VA_ARGS__)
#define __shfl_up_sync(...) emu::shfl_up(EMU_SITE, __VA_ARGS__)
#define __ballot_sync(m, p) emu::ballot(EMU_SITE, (m), (p))
#define __any_sync(m, p) (emu::ballot(EMU_SITE, (m), (p)) != 0)
#define __all_sync(m, p) (emu::ballot(EMU_SITE, (m), (p)) == 0xffffffffu)
#define atomicAdd(p, v) emu::atomic_add((p), (v))
#define atomicMax(p, v) emu::atomic_extreme<true>((p), (v))
#define atomicMin(p, v) emu::atomic_extreme<false>((p), (v))

// The one way kernels reach dynamic shared memory (on the GPU: `extern __shared__`, see common.cuh).
template <typename T> T* dynamic_shared() { return reinterpret_cast<T*>(emu::g_block->dyn.data()); }
