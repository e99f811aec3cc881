// A CUDA driver hosted on the CPU, for tests: the subset of the driver API that cudarc calls for cppo,
// with the SONAME cudarc asks for (libcuda.so.1, found as libcuda.so), so that the unchanged production
// binary runs on it when its folder comes first on LD_LIBRARY_PATH. It is compiled in one translation
// unit after the kernel emulation (emu/cuda_emu.h, every kernel file, emu/exports.h), and runs each
// launch through the emulation's argument-pointer trampoline (`cppo_emu_launch`).
//
// What it checks, as the real driver would fail (or worse, silently corrupt):
// - cuInit first; a context current on the calling thread for every call that needs one.
// - Stream order, as strictly as CUDA allows: work queued on a stream (copies, memsets, launches, frees,
//   cuBLASLt products) runs only when the stream is synchronised. Host memory is treated as pinned (the
//   fully asynchronous case): a copy to the host fills its destination with poison (0xff bytes: NaN) when
//   queued and writes the answer only when it runs; a copy from the host reads its source when it runs.
//   So a read without the synchronisation that orders it sees NaN, not the answer.
// - Memory: new allocations are poisoned (0xff); a free poisons the memory and quarantines its
//   addresses (never handed out again while quarantined), so a later use of a freed buffer is an illegal
//   address; every copy and every pointer argument of a launch must lie in a live allocation.
// - Modules: PTX (the `.entry` names and `.param` sizes are read from it; a `.target` above the device's
//   sm_90 or a `.version` above PTX ISA 9.0 is refused as a driver 13.0 would) and cubins (ELF for
//   EM_CUDA; kernel names from the symbol table). A function's PTX parameters must match the kernel's
//   C++ parameters in the emulation.
// - Launches: at most 1024 threads a block (1024, 1024, 64 per dimension), grid y and z at most 65535,
//   dynamic shared memory above 48 KiB only after cuFuncSetAttribute's opt-in (at most 227 KiB); the
//   parameters are copied at the launch, as the driver does.
// - Faults are sticky, as on a GPU: after an illegal address or a failed kernel every later call of the
//   context fails. Each fault is also printed on stderr with the kernel or copy that caused it.
// Environment: CPPO_FAKE_CUDA_REFUSE_CUBIN=1 refuses cubins (CUDA_ERROR_NO_BINARY_FOR_GPU), as a driver
// older than the device's architecture does, to exercise the PTX fallback.
#include <cinttypes>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <unordered_map>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum : int {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CUDA_ERROR_INVALID_SOURCE = 300,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_SUPPORTED = 801,
};

namespace fake {

constexpr unsigned SM = 90;                        // reported as an H100: compute capability 9.0
constexpr unsigned DEFAULT_SHARED = 48 * 1024;
constexpr unsigned OPTIN_SHARED = 227 * 1024;
constexpr size_t TOTAL_MEMORY = 80ull << 30;
constexpr size_t QUARANTINE_BYTES = 1ull << 30;    // freed memory kept poisoned before it is released

struct Stream {
    std::deque<std::function<void()>> queue;
};

struct Context {
    CUresult sticky = CUDA_SUCCESS;
    Stream null_stream;
};

struct Param {
    unsigned size;
};

struct Function {
    std::string name;
    int emu_index = -1;
    std::string sig;                                  // the kernel's C++ parameters, from the emulation
    std::vector<Param> params;                        // from the PTX (empty list for a cubin: unknown)
    bool params_known = false;
    unsigned max_dynamic_shared = DEFAULT_SHARED;
};

struct Module {
    std::vector<std::unique_ptr<Function>> functions;
};

struct Alloc {
    size_t bytes;
    bool live;
};

std::recursive_mutex mu;
bool initialised = false;
Context primary;
int primary_refs = 0;
thread_local Context* current = nullptr;
std::map<uintptr_t, Alloc> allocs;                    // by start address, live and quarantined
std::deque<uintptr_t> quarantine;
size_t quarantined = 0, live_bytes = 0;
uint64_t release_threshold = 0;
int default_pool = 0;

void say(const std::string& s) { std::fprintf(stderr, "fake libcuda: %s\n", s.c_str()); }

std::string hex(uint64_t v) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%" PRIx64, v);
    return b;
}

// The allocation holding [p, p + n): nullptr when none does (or it is freed: *freed says so).
Alloc* find(uintptr_t p, size_t n, bool* freed = nullptr) {
    auto it = allocs.upper_bound(p);
    if (it == allocs.begin()) return nullptr;
    --it;
    if (p + n > it->first + it->second.bytes || p < it->first) return nullptr;
    if (!it->second.live) {
        if (freed) *freed = true;
        return nullptr;
    }
    return &it->second;
}

// A device range a queued operation touches, checked when it runs.
bool device_range_ok(Context* c, uintptr_t p, size_t n, const std::string& what) {
    if (n == 0) return true;
    bool freed = false;
    if (find(p, n, &freed)) return true;
    say(what + ": " + hex(p) + " + " + std::to_string(n) + " bytes " + (freed ? "is freed memory (use after free)" : "is not inside one live allocation") + ": CUDA_ERROR_ILLEGAL_ADDRESS");
    c->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
    return false;
}

Context* ctx_of_call(CUresult* err) {
    if (!initialised) {
        *err = CUDA_ERROR_NOT_INITIALIZED;
        return nullptr;
    }
    if (!current) {
        *err = CUDA_ERROR_INVALID_CONTEXT;
        return nullptr;
    }
    if (current->sticky) {
        *err = current->sticky;
        return nullptr;
    }
    return current;
}

Stream* stream_of(Context* c, void* s) {
    // 0, CU_STREAM_LEGACY (0x1) and CU_STREAM_PER_THREAD (0x2) are the null stream.
    if ((uintptr_t)s <= 2) return &c->null_stream;
    return static_cast<Stream*>(s);
}

// Runs the stream's queue in order; a fault stops it and stays (sticky).
CUresult drain(Context* c, Stream* s) {
    while (!s->queue.empty() && !c->sticky) {
        auto op = std::move(s->queue.front());
        s->queue.pop_front();
        op();
    }
    s->queue.clear();
    return c->sticky;
}

std::vector<Stream*> streams;

CUresult drain_all(Context* c) {
    drain(c, &c->null_stream);
    for (Stream* s : streams) drain(c, s);
    return c->sticky;
}

void release(uintptr_t p) {
    auto it = allocs.find(p);
    std::memset(reinterpret_cast<void*>(p), 0xff, it->second.bytes);
    it->second.live = false;
    live_bytes -= it->second.bytes;
    quarantine.push_back(p);
    quarantined += it->second.bytes;
    while (quarantined > QUARANTINE_BYTES && quarantine.size() > 1) {
        uintptr_t old = quarantine.front();
        quarantine.pop_front();
        auto o = allocs.find(old);
        quarantined -= o->second.bytes;
        std::free(reinterpret_cast<void*>(old));
        allocs.erase(o);
    }
}

CUresult allocate(CUdeviceptr* out, size_t bytes) {
    if (!out || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    if (live_bytes + bytes > TOTAL_MEMORY) return CUDA_ERROR_OUT_OF_MEMORY;
    void* p = nullptr;
    if (posix_memalign(&p, 256, bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    std::memset(p, 0xff, bytes);
    allocs[reinterpret_cast<uintptr_t>(p)] = Alloc{bytes, true};
    live_bytes += bytes;
    *out = reinterpret_cast<uintptr_t>(p);
    return CUDA_SUCCESS;
}

// ---- PTX and cubin images -------------------------------------------------------------------------

unsigned ptx_type_size(const std::string& t) {
    static const std::pair<const char*, unsigned> sizes[] = {
        {".u8", 1}, {".s8", 1}, {".b8", 1}, {".u16", 2}, {".s16", 2}, {".b16", 2}, {".f16", 2},
        {".u32", 4}, {".s32", 4}, {".b32", 4}, {".f32", 4}, {".u64", 8}, {".s64", 8}, {".b64", 8}, {".f64", 8}};
    for (auto& s : sizes)
        if (t == s.first) return s.second;
    return 0;
}

// The `.entry` functions of a PTX module with their parameter sizes; "" or the refusal.
CUresult parse_ptx(const std::string& ptx, Module& m, std::string& why) {
    size_t v = ptx.find(".version ");
    if (v != std::string::npos) {
        int major = 0, minor = 0;
        std::sscanf(ptx.c_str() + v + 9, "%d.%d", &major, &minor);
        if (major * 10 + minor > 90) {
            why = "PTX ISA " + std::to_string(major) + "." + std::to_string(minor) + " is newer than this driver's 9.0";
            return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
        }
    }
    size_t t = ptx.find(".target sm_");
    if (t == std::string::npos) {
        why = "no .target";
        return CUDA_ERROR_INVALID_PTX;
    }
    if ((unsigned)std::atoi(ptx.c_str() + t + 11) > SM) {
        why = "PTX for a newer architecture than sm_90";
        return CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    size_t pos = 0;
    while ((pos = ptx.find(".entry ", pos)) != std::string::npos) {
        pos += 7;
        size_t open = ptx.find('(', pos), close = ptx.find(')', pos);
        if (open == std::string::npos || close == std::string::npos || close < open) {
            why = "an .entry without its parameter list";
            return CUDA_ERROR_INVALID_PTX;
        }
        auto f = std::make_unique<Function>();
        f->name = ptx.substr(pos, open - pos);
        while (!f->name.empty() && std::isspace((unsigned char)f->name.back())) f->name.pop_back();
        f->params_known = true;
        std::string list = ptx.substr(open + 1, close - open - 1);
        size_t p = 0;
        while ((p = list.find(".param", p)) != std::string::npos) {
            size_t end = list.find(',', p);
            std::string decl = list.substr(p, end == std::string::npos ? std::string::npos : end - p);
            p += 6;
            unsigned size = 0, count = 1;
            size_t q = 0;
            while (q < decl.size()) {
                size_t s = decl.find_first_not_of(" \t\r\n", q);
                if (s == std::string::npos) break;
                size_t e = decl.find_first_of(" \t\r\n", s);
                std::string tok = decl.substr(s, e == std::string::npos ? std::string::npos : e - s);
                if (!size) size = ptx_type_size(tok);
                size_t br = tok.find('[');
                if (br != std::string::npos) count = (unsigned)std::atoi(tok.c_str() + br + 1);
                q = e == std::string::npos ? decl.size() : e;
            }
            if (!size) {
                why = f->name + ": a parameter of unknown type: " + decl;
                return CUDA_ERROR_INVALID_PTX;
            }
            f->params.push_back(Param{size * count});
        }
        pos = close;
        m.functions.push_back(std::move(f));
    }
    return CUDA_SUCCESS;
}

// A cubin: ELF64 for EM_CUDA (190); its global function symbols are the kernels.
CUresult parse_cubin(const unsigned char* img, Module& m, std::string& why) {
    if (std::getenv("CPPO_FAKE_CUDA_REFUSE_CUBIN")) {
        why = "cubins refused (CPPO_FAKE_CUDA_REFUSE_CUBIN)";
        return CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    auto u16 = [&](size_t o) { uint16_t v; std::memcpy(&v, img + o, 2); return v; };
    auto u32 = [&](size_t o) { uint32_t v; std::memcpy(&v, img + o, 4); return v; };
    auto u64 = [&](size_t o) { uint64_t v; std::memcpy(&v, img + o, 8); return v; };
    if (img[4] != 2 || u16(18) != 190) {
        why = "not a 64-bit ELF for EM_CUDA";
        return CUDA_ERROR_INVALID_IMAGE;
    }
    uint64_t shoff = u64(40);
    unsigned shentsize = u16(58), shnum = u16(60);
    for (unsigned i = 0; i < shnum; i++) {
        size_t sh = shoff + (size_t)i * shentsize;
        if (u32(sh + 4) != 2) continue;  // SHT_SYMTAB
        uint64_t off = u64(sh + 24), size = u64(sh + 32), entsize = u64(sh + 56);
        size_t strtab = shoff + (size_t)u32(sh + 40) * shentsize;
        uint64_t stroff = u64(strtab + 24);
        for (uint64_t s = off; entsize && s + entsize <= off + size; s += entsize) {
            unsigned char info = img[s + 4];
            if ((info & 0xf) != 2 || (info >> 4) != 1) continue;  // STT_FUNC, STB_GLOBAL
            auto f = std::make_unique<Function>();
            f->name = reinterpret_cast<const char*>(img + stroff + u32(s));
            m.functions.push_back(std::move(f));
        }
    }
    if (m.functions.empty()) {
        why = "no kernels in the cubin's symbol table";
        return CUDA_ERROR_INVALID_IMAGE;
    }
    return CUDA_SUCCESS;
}

unsigned sig_size(char c) { return c == 'i' || c == 'f' ? 4 : 8; }

}  // namespace fake

using namespace fake;

#define LOCK std::lock_guard<std::recursive_mutex> lock_(mu)
#define NEED_CTX                                    \
    CUresult err_ = CUDA_SUCCESS;                   \
    Context* c = ctx_of_call(&err_);                \
    if (!c) return err_

extern "C" {

CUresult cuInit(unsigned flags) {
    LOCK;
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    initialised = true;
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* v) {
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult e, const char** s);
CUresult cuGetErrorString(CUresult e, const char** s) {
    static const std::pair<int, const char*> text[] = {
        {CUDA_SUCCESS, "no error"}, {CUDA_ERROR_INVALID_VALUE, "invalid argument"}, {CUDA_ERROR_OUT_OF_MEMORY, "out of memory"},
        {CUDA_ERROR_NOT_INITIALIZED, "initialization error"}, {CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"},
        {CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"}, {CUDA_ERROR_INVALID_CONTEXT, "invalid device context"},
        {CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device"},
        {CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"}, {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "the provided PTX was compiled with an unsupported toolchain."},
        {CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid"}, {CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"},
        {CUDA_ERROR_NOT_FOUND, "named symbol not found"}, {CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"},
        {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"}, {CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"},
        {CUDA_ERROR_NOT_SUPPORTED, "operation not supported"}};
    for (auto& t : text)
        if (t.first == e) {
            *s = t.second;
            return CUDA_SUCCESS;
        }
    *s = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
}
CUresult cuGetErrorName(CUresult e, const char** s) {
    static const std::pair<int, const char*> names[] = {
        {CUDA_SUCCESS, "CUDA_SUCCESS"}, {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"}, {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
        {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"}, {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
        {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"}, {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
        {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU"}, {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX"},
        {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"}, {CUDA_ERROR_INVALID_SOURCE, "CUDA_ERROR_INVALID_SOURCE"},
        {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"}, {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
        {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"}, {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
        {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"}, {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"}};
    for (auto& t : names)
        if (t.first == e) {
            *s = t.second;
            return CUDA_SUCCESS;
        }
    *s = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
}

// NVRTC opens libcuda.so.1 when it is loaded and asks it for its private export tables; the fake has
// none, as a driver that offers them nothing, and NVRTC then compiles on its own.
CUresult cuGetExportTable(const void** table, const void* id) {
    (void)id;
    if (table) *table = nullptr;
    return CUDA_ERROR_NOT_FOUND;
}

CUresult cuDeviceGetCount(int* n) {
    LOCK;
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    *n = 1;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* d, int ordinal) {
    LOCK;
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    std::snprintf(name, len, "cppo fake GPU (CPU-hosted driver)");
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice d) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    switch (attr) {
        case 1: *v = 1024; return CUDA_SUCCESS;                // max threads per block
        case 8: *v = DEFAULT_SHARED; return CUDA_SUCCESS;      // shared memory per block
        case 10: *v = 32; return CUDA_SUCCESS;                 // warp size
        case 16: *v = 132; return CUDA_SUCCESS;                // multiprocessors
        case 75: *v = SM / 10; return CUDA_SUCCESS;            // compute capability
        case 76: *v = SM % 10; return CUDA_SUCCESS;
        case 97: *v = OPTIN_SHARED; return CUDA_SUCCESS;       // shared memory per block, opted in
        case 115: *v = 1; return CUDA_SUCCESS;                 // memory pools supported
    }
    say("cuDeviceGetAttribute: attribute " + std::to_string(attr) + " is not in the fake");
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuDevicePrimaryCtxRetain(Context** out, CUdevice d) {
    LOCK;
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    primary_refs++;
    *out = &primary;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    LOCK;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    if (primary_refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
    primary_refs--;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(Context* c) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (c && c != &primary) return CUDA_ERROR_INVALID_CONTEXT;
    current = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(Context** c) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    *c = current;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize() {
    LOCK;
    NEED_CTX;
    return drain_all(c);
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
    LOCK;
    NEED_CTX;
    *free_bytes = TOTAL_MEMORY - live_bytes;
    *total = TOTAL_MEMORY;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(void** pool, CUdevice d) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    *pool = &default_pool;
    return CUDA_SUCCESS;
}

CUresult cuMemPoolSetAttribute(void* pool, int attr, void* value) {
    LOCK;
    if (pool != &default_pool || !value) return CUDA_ERROR_INVALID_VALUE;
    if (attr != 4) return CUDA_ERROR_NOT_SUPPORTED;  // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD (a cuuint64_t)
    std::memcpy(&release_threshold, value, 8);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolGetAttribute(void* pool, int attr, void* value) {
    LOCK;
    if (pool != &default_pool || !value) return CUDA_ERROR_INVALID_VALUE;
    if (attr != 4) return CUDA_ERROR_NOT_SUPPORTED;
    std::memcpy(value, &release_threshold, 8);
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(Stream** out, unsigned flags) {
    LOCK;
    NEED_CTX;
    (void)flags;
    *out = new Stream;
    streams.push_back(*out);
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(Stream* s) {
    LOCK;
    NEED_CTX;
    auto it = std::find(streams.begin(), streams.end(), s);
    if (it == streams.end()) return CUDA_ERROR_INVALID_HANDLE;
    // The driver finishes the stream's work, then frees it.
    drain(c, s);
    streams.erase(it);
    delete s;
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(Stream* s) {
    LOCK;
    NEED_CTX;
    return drain(c, stream_of(c, s));
}

CUresult cuMemAllocAsync(CUdeviceptr* out, size_t bytes, Stream* s) {
    LOCK;
    NEED_CTX;
    (void)s;
    return allocate(out, bytes);
}

CUresult cuMemAlloc_v2(CUdeviceptr* out, size_t bytes) {
    LOCK;
    NEED_CTX;
    return allocate(out, bytes);
}

CUresult cuMemFreeAsync(CUdeviceptr p, Stream* s) {
    LOCK;
    NEED_CTX;
    auto it = allocs.find(p);
    if (it == allocs.end() || !it->second.live) {
        say("cuMemFreeAsync of " + hex(p) + ", which is not a live allocation's start");
        return CUDA_ERROR_INVALID_VALUE;
    }
    stream_of(c, s)->queue.push_back([p] { release(p); });
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
    LOCK;
    NEED_CTX;
    auto it = allocs.find(p);
    if (it == allocs.end() || !it->second.live) return CUDA_ERROR_INVALID_VALUE;
    drain_all(c);
    release(p);
    return c->sticky;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, Stream* s) {
    LOCK;
    NEED_CTX;
    stream_of(c, s)->queue.push_back([c, dst, src, n] {
        if (device_range_ok(c, dst, n, "cuMemcpyHtoDAsync")) std::memcpy(reinterpret_cast<void*>(dst), src, n);
    });
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, Stream* s) {
    LOCK;
    NEED_CTX;
    // Until the copy runs, the host buffer holds no answer.
    std::memset(dst, 0xff, n);
    stream_of(c, s)->queue.push_back([c, dst, src, n] {
        if (device_range_ok(c, src, n, "cuMemcpyDtoHAsync")) std::memcpy(dst, reinterpret_cast<void*>(src), n);
    });
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, Stream* s) {
    LOCK;
    NEED_CTX;
    stream_of(c, s)->queue.push_back([c, dst, src, n] {
        if (device_range_ok(c, src, n, "cuMemcpyDtoDAsync (source)") && device_range_ok(c, dst, n, "cuMemcpyDtoDAsync (destination)"))
            std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), n);
    });
    return CUDA_SUCCESS;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, Stream* s) {
    LOCK;
    NEED_CTX;
    stream_of(c, s)->queue.push_back([c, dst, v, n] {
        if (device_range_ok(c, dst, n, "cuMemsetD8Async")) std::memset(reinterpret_cast<void*>(dst), v, n);
    });
    return CUDA_SUCCESS;
}

// The synchronous copies wait for every stream first (the legacy default stream's rule).
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
    LOCK;
    NEED_CTX;
    if (drain_all(c)) return c->sticky;
    if (device_range_ok(c, dst, n, "cuMemcpyHtoD")) std::memcpy(reinterpret_cast<void*>(dst), src, n);
    return c->sticky;
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
    LOCK;
    NEED_CTX;
    if (drain_all(c)) return c->sticky;
    if (device_range_ok(c, src, n, "cuMemcpyDtoH")) std::memcpy(dst, reinterpret_cast<void*>(src), n);
    return c->sticky;
}

CUresult cuModuleLoadData(Module** out, const void* image) {
    LOCK;
    NEED_CTX;
    if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
    auto m = std::make_unique<Module>();
    std::string why;
    const unsigned char* img = static_cast<const unsigned char*>(image);
    CUresult r = std::memcmp(img, "\x7f" "ELF", 4) == 0 ? parse_cubin(img, *m, why) : parse_ptx(static_cast<const char*>(image), *m, why);
    if (r) {
        say("cuModuleLoadData: " + why);
        return r;
    }
    int count = cppo_emu_count();
    for (auto& f : m->functions) {
        for (int i = 0; i < count; i++)
            if (f->name == cppo_emu_name(i)) f->emu_index = i;
        if (f->emu_index < 0) continue;  // a kernel the emulation lacks fails at its lookup
        f->sig = cppo_emu_sig(f->emu_index);
        if (!f->params_known) continue;
        bool same = f->params.size() == f->sig.size();
        for (size_t i = 0; same && i < f->params.size(); i++) same = f->params[i].size == sig_size(f->sig[i]);
        if (!same) {
            std::string sizes;
            for (auto& p : f->params) sizes += std::to_string(p.size) + " ";
            say("cuModuleLoadData: " + f->name + ": the PTX's parameters (" + sizes + "bytes) are not the kernel's C++ parameters `" + f->sig + "`");
            return CUDA_ERROR_INVALID_IMAGE;
        }
    }
    *out = m.release();
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(Module* m) {
    LOCK;
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    delete m;
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(Function** out, Module* m, const char* name) {
    LOCK;
    NEED_CTX;
    if (!m || !name) return CUDA_ERROR_INVALID_HANDLE;
    for (auto& f : m->functions)
        if (f->name == name) {
            if (f->emu_index < 0) {
                say(std::string("cuModuleGetFunction: ") + name + " is in the module but not in the emulation");
                return CUDA_ERROR_NOT_FOUND;
            }
            *out = f.get();
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}

CUresult cuFuncSetAttribute(Function* f, int attr, int value) {
    LOCK;
    NEED_CTX;
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    if (attr != 8) return CUDA_ERROR_NOT_SUPPORTED;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    if (value < 0 || (unsigned)value > OPTIN_SHARED) return CUDA_ERROR_INVALID_VALUE;
    f->max_dynamic_shared = (unsigned)value;
    return CUDA_SUCCESS;
}

CUresult cuFuncGetAttribute(int* v, int attr, Function* f) {
    LOCK;
    NEED_CTX;
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    switch (attr) {
        case 0: *v = 1024; return CUDA_SUCCESS;
        case 8: *v = (int)f->max_dynamic_shared; return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuLaunchKernel(Function* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
                        Stream* s, void** params, void** extra) {
    LOCK;
    NEED_CTX;
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    auto refuse = [&](CUresult r, const std::string& why) {
        say("cuLaunchKernel " + f->name + ": " + why);
        return r;
    };
    if (extra) return refuse(CUDA_ERROR_NOT_SUPPORTED, "`extra` parameter buffers are not in the fake");
    if (!gx || !gy || !gz || !bx || !by || !bz) return refuse(CUDA_ERROR_INVALID_VALUE, "a zero grid or block dimension");
    if (bx > 1024 || by > 1024 || bz > 64 || (uint64_t)bx * by * bz > 1024)
        return refuse(CUDA_ERROR_INVALID_VALUE, "block (" + std::to_string(bx) + "," + std::to_string(by) + "," + std::to_string(bz) + ") exceeds 1024 threads");
    if (gy > 65535 || gz > 65535) return refuse(CUDA_ERROR_INVALID_VALUE, "grid y or z above 65535");
    if (shared > f->max_dynamic_shared)
        return refuse(CUDA_ERROR_INVALID_VALUE, std::to_string(shared) + " bytes of dynamic shared memory, " + std::to_string(f->max_dynamic_shared) +
                                                    " allowed (above 48 KiB needs CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    size_t n = f->sig.size();
    if (n && !params) return refuse(CUDA_ERROR_INVALID_VALUE, "no kernelParams for " + std::to_string(n) + " parameters");
    // The driver copies the parameters at the launch: later changes to the host's values do not count.
    std::vector<std::array<unsigned char, 8>> copy(n);
    for (size_t i = 0; i < n; i++) {
        if (!params[i]) return refuse(CUDA_ERROR_INVALID_VALUE, "kernelParams[" + std::to_string(i) + "] is null");
        copy[i].fill(0);
        std::memcpy(copy[i].data(), params[i], sig_size(f->sig[i]));
    }
    Function* fn = f;
    stream_of(c, s)->queue.push_back([c, fn, copy, gx, gy, gz, bx, by, bz, shared]() mutable {
        for (size_t i = 0; i < copy.size(); i++) {
            if (fn->sig[i] != 'p') continue;
            uint64_t p;
            std::memcpy(&p, copy[i].data(), 8);
            bool freed = false;
            if (p != 0 && !find(p, 1, &freed)) {
                say(fn->name + ": pointer argument " + std::to_string(i) + " = " + hex(p) + (freed ? " is freed memory (use after free)" : " is not device memory") + ": CUDA_ERROR_ILLEGAL_ADDRESS");
                c->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
                return;
            }
        }
        std::vector<void*> args(copy.size());
        for (size_t i = 0; i < copy.size(); i++) args[i] = copy[i].data();
        unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
        char err[512] = {0};
        if (cppo_emu_launch(fn->emu_index, grid, block, shared, args.data(), err, sizeof err)) {
            say(fn->name + " failed while running: " + err + ": CUDA_ERROR_LAUNCH_FAILED");
            c->sticky = CUDA_ERROR_LAUNCH_FAILED;
        }
    });
    return CUDA_SUCCESS;
}

// For the fake cuBLASLt (same process): stream-ordered work and the live-allocation check.
int cppo_fake_cuda_enqueue(void* stream, void (*run)(void*), void* arg) {
    LOCK;
    NEED_CTX;
    stream_of(c, stream)->queue.push_back([run, arg] { run(arg); });
    return CUDA_SUCCESS;
}

// Whether [p, p + n) lies in one live allocation; if not, the context faults (called while running).
int cppo_fake_cuda_check(CUdeviceptr p, size_t n, const char* what) {
    LOCK;
    return current && device_range_ok(current, p, n, what) ? 1 : 0;
}

// A fault found by the fake cuBLASLt while running its product.
void cppo_fake_cuda_fault(const char* what) {
    LOCK;
    say(what);
    if (current) current->sticky = CUDA_ERROR_LAUNCH_FAILED;
}

}  // extern "C"
