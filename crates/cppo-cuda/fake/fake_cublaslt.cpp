// cuBLASLt hosted on the CPU, for tests (SONAME libcublasLt.so.13, found as libcublasLt.so), written
// from NVIDIA's documentation of cublasLtMatmul, not from cppo's own model of it (gemm.rs):
//   D = alpha * op(A) op(B) + beta * C, every matrix column-major (CUBLASLT_ORDER_COL, the default)
//   with its leading dimension (ld >= rows); op(X) = X or X^T per CUBLASLT_MATMUL_DESC_TRANSA/B; A's
//   layout is m x k (k x m transposed), B's k x n (n x k transposed), C's and D's m x n; batched layouts
//   carry CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT (equal for all four) and a per-matrix
//   STRIDED_BATCH_OFFSET in elements. beta == 0: C is not read (it may hold NaN). Scale pointers are host
//   pointers (the default pointer mode). Supported types (compute 32F, scale 32F): A and B both 16BF,
//   16F or 32F; C and D of one type, 16BF/16F (A's type) or 32F; anything else CUBLAS_STATUS_NOT_SUPPORTED,
//   as the library answers. The heuristic assumes the alignments the preference declares (256 bytes when
//   none is declared) and needs a workspace within its declared maximum; the product then refuses
//   pointers less aligned than the algorithm was chosen for (CUBLAS_STATUS_NOT_SUPPORTED) and a smaller
//   workspace (CUBLAS_STATUS_INVALID_VALUE). The product runs in stream order on the fake driver's
//   stream, each operand checked to lie inside a live device allocation when it runs.
#include <dlfcn.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

typedef int cublasStatus_t;
enum : int {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum : int { R_32F = 0, R_16F = 2, R_16BF = 14 };
enum : int { COMPUTE_32F = 68 };

namespace lt {

struct Handle {
    int (*enqueue)(void*, void (*)(void*), void*);
    int (*check)(unsigned long long, size_t, const char*);
    void (*fault)(const char*);
};

struct Desc {
    int compute, scale;
    int transa = 0, transb = 0, pointer_mode = 0, epilogue = 1;
};

struct Layout {
    int type;
    uint64_t rows, cols;
    int64_t ld;
    int order = 0;
    int32_t batch = 1;
    int64_t stride = 0;
};

struct Pref {
    uint64_t max_workspace = 0;
    uint32_t align[4] = {256, 256, 256, 256};
};

// What the heuristic hands out in cublasLtMatmulAlgo_t's 64 opaque bytes.
struct Algo {
    uint32_t magic;
    uint32_t align[4];
    uint64_t workspace;
};
constexpr uint32_t MAGIC = 0x1f2e3d4c;

size_t elem(int t) { return t == R_32F ? 4 : 2; }

float load(int t, const void* base, size_t i) {
    if (t == R_32F) return static_cast<const float*>(base)[i];
    uint16_t h = static_cast<const uint16_t*>(base)[i];
    if (t == R_16BF) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    // IEEE half.
    uint32_t sign = (h >> 15) & 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? std::ldexp((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp((float)(m | 0x400), (int)e - 25);
    return sign ? -v : v;
}

void store(int t, void* base, size_t i, float v) {
    if (t == R_32F) {
        static_cast<float*>(base)[i] = v;
        return;
    }
    if (t == R_16BF) {
        uint32_t u;
        std::memcpy(&u, &v, 4);
        uint16_t h = std::isnan(v) ? 0x7fc0 : (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);  // nearest, ties to even
        static_cast<uint16_t*>(base)[i] = h;
        return;
    }
    // IEEE half via the compiler's conversion.
    _Float16 h = (_Float16)v;
    std::memcpy(static_cast<uint16_t*>(base) + i, &h, 2);
}

// Whether (a, b, c) with compute 32F / scale 32F is in the documented table.
bool supported(int a, int b, int c) {
    if (a != b) return false;
    if (a == R_32F) return c == R_32F;
    if (a == R_16BF || a == R_16F) return c == a || c == R_32F;
    return false;
}

struct Call {
    Handle* h;
    Desc desc;
    Layout la, lb, lc, ld;
    float alpha, beta;
    const void *a, *b, *c;
    void* d;
    uint64_t m, n, k;
};

// The extent in bytes a layout spans (last column's last row of the last batch, inclusive).
size_t extent(const Layout& l) {
    if (l.rows == 0 || l.cols == 0) return 0;
    size_t last = (size_t)(l.batch - 1) * (size_t)l.stride + (l.cols - 1) * (size_t)l.ld + (l.rows - 1);
    return (last + 1) * elem(l.type);
}

void run(void* p) {
    Call* c = static_cast<Call*>(p);
    bool ok = c->h->check((uintptr_t)c->a, extent(c->la), "cublasLtMatmul A") && c->h->check((uintptr_t)c->b, extent(c->lb), "cublasLtMatmul B") &&
              (c->beta == 0.0f || c->h->check((uintptr_t)c->c, extent(c->lc), "cublasLtMatmul C")) && c->h->check((uintptr_t)c->d, extent(c->ld), "cublasLtMatmul D");
    if (ok) {
        for (int32_t bt = 0; bt < c->ld.batch; bt++) {
            size_t oa = (size_t)bt * c->la.stride, ob = (size_t)bt * c->lb.stride, oc = (size_t)bt * c->lc.stride, od = (size_t)bt * c->ld.stride;
            for (uint64_t j = 0; j < c->n; j++)
                for (uint64_t i = 0; i < c->m; i++) {
                    double sum = 0;
                    for (uint64_t l = 0; l < c->k; l++) {
                        // op(A)(i, l): A(i, l) or A(l, i); column-major: element (r, col) at r + col * ld.
                        size_t ia = c->desc.transa ? l + i * c->la.ld : i + l * c->la.ld;
                        size_t ib = c->desc.transb ? j + l * c->lb.ld : l + j * c->lb.ld;
                        sum += (double)load(c->la.type, c->a, oa + ia) * (double)load(c->lb.type, c->b, ob + ib);
                    }
                    float v = c->alpha * (float)sum;
                    if (c->beta != 0.0f) v += c->beta * load(c->lc.type, c->c, oc + i + j * c->lc.ld);
                    store(c->ld.type, c->d, od + i + j * c->ld.ld, v);
                }
        }
    }
    delete c;
}

// The shapes the four layouts and the transposes imply, or why they do not fit.
bool shapes(const Desc& d, const Layout& a, const Layout& b, const Layout& c, const Layout& dl, uint64_t& m, uint64_t& n, uint64_t& k, std::string& why) {
    m = dl.rows;
    n = dl.cols;
    uint64_t am = d.transa ? a.cols : a.rows, ak = d.transa ? a.rows : a.cols;
    uint64_t bk = d.transb ? b.cols : b.rows, bn = d.transb ? b.rows : b.cols;
    k = ak;
    if (am != m || bn != n || bk != k || c.rows != m || c.cols != n) {
        why = "op(A) " + std::to_string(am) + "x" + std::to_string(ak) + ", op(B) " + std::to_string(bk) + "x" + std::to_string(bn) + ", C " +
              std::to_string(c.rows) + "x" + std::to_string(c.cols) + ", D " + std::to_string(m) + "x" + std::to_string(n) + " do not fit";
        return false;
    }
    for (const Layout* l : {&a, &b, &c, &dl}) {
        if (l->order != 0) {
            why = "only column-major layouts";
            return false;
        }
        if (l->ld < (int64_t)std::max<uint64_t>(l->rows, 1)) {
            why = "a leading dimension " + std::to_string(l->ld) + " below its " + std::to_string(l->rows) + " rows";
            return false;
        }
        if (l->batch != dl.batch) {
            why = "batch counts differ";
            return false;
        }
    }
    return true;
}

void say(const std::string& s) { std::fprintf(stderr, "fake libcublasLt: %s\n", s.c_str()); }

}  // namespace lt

using namespace lt;

extern "C" {

cublasStatus_t cublasLtCreate(Handle** out) {
    void* drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!drv) drv = dlopen("libcuda.so", RTLD_NOW | RTLD_NOLOAD);
    if (!drv) return CUBLAS_STATUS_NOT_INITIALIZED;
    auto h = new Handle;
    h->enqueue = reinterpret_cast<int (*)(void*, void (*)(void*), void*)>(dlsym(drv, "cppo_fake_cuda_enqueue"));
    h->check = reinterpret_cast<int (*)(unsigned long long, size_t, const char*)>(dlsym(drv, "cppo_fake_cuda_check"));
    h->fault = reinterpret_cast<void (*)(const char*)>(dlsym(drv, "cppo_fake_cuda_fault"));
    if (!h->enqueue || !h->check || !h->fault) {
        delete h;
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    *out = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(Handle* h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(Desc** out, int compute, int scale) {
    if (compute != COMPUTE_32F || scale != R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    *out = new Desc{compute, scale};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(Desc* d) {
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(Desc* d, int attr, const void* buf, size_t size) {
    if (!d || !buf || size != 4) return CUBLAS_STATUS_INVALID_VALUE;
    int32_t v;
    std::memcpy(&v, buf, 4);
    switch (attr) {
        case 3: // TRANSA: CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 (conjugate-transpose only for complex)
        case 4:
            if (v != 0 && v != 1) return CUBLAS_STATUS_INVALID_VALUE;
            (attr == 3 ? d->transa : d->transb) = v;
            return CUBLAS_STATUS_SUCCESS;
        case 2: d->pointer_mode = v; return v == 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
        case 7: d->epilogue = v; return v == 1 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatrixLayoutCreate(Layout** out, int type, uint64_t rows, uint64_t cols, int64_t ld) {
    if (type != R_32F && type != R_16F && type != R_16BF) return CUBLAS_STATUS_NOT_SUPPORTED;
    *out = new Layout{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(Layout* l) {
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(Layout* l, int attr, const void* buf, size_t size) {
    if (!l || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
        case 5: // BATCH_COUNT: int32
            if (size != 4) return CUBLAS_STATUS_INVALID_VALUE;
            std::memcpy(&l->batch, buf, 4);
            return l->batch >= 1 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
        case 6: // STRIDED_BATCH_OFFSET: int64, in elements
            if (size != 8) return CUBLAS_STATUS_INVALID_VALUE;
            std::memcpy(&l->stride, buf, 8);
            return CUBLAS_STATUS_SUCCESS;
        case 1: // ORDER: int32
            if (size != 4) return CUBLAS_STATUS_INVALID_VALUE;
            std::memcpy(&l->order, buf, 4);
            return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(Pref** out) {
    *out = new Pref;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(Pref* p) {
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(Pref* p, int attr, const void* buf, size_t size) {
    if (!p || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    if (attr == 1) { // MAX_WORKSPACE_BYTES: uint64
        if (size != 8) return CUBLAS_STATUS_INVALID_VALUE;
        std::memcpy(&p->max_workspace, buf, 8);
        return CUBLAS_STATUS_SUCCESS;
    }
    if (attr >= 5 && attr <= 8) { // MIN_ALIGNMENT_{A,B,C,D}_BYTES: uint32
        if (size != 4) return CUBLAS_STATUS_INVALID_VALUE;
        std::memcpy(&p->align[attr - 5], buf, 4);
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

struct HeuristicResult {
    uint64_t algo[8];
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
};

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(Handle* h, Desc* d, Layout* a, Layout* b, Layout* c, Layout* dl, Pref* p, int requested,
                                              HeuristicResult* out, int* count) {
    if (!h || !d || !a || !b || !c || !dl || !p || requested < 1 || !out || !count) return CUBLAS_STATUS_INVALID_VALUE;
    *count = 0;
    uint64_t m, n, k;
    std::string why;
    if (!shapes(*d, *a, *b, *c, *dl, m, n, k, why)) {
        say("cublasLtMatmulAlgoGetHeuristic: " + why);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!supported(a->type, b->type, c->type) || c->type != dl->type) return CUBLAS_STATUS_NOT_SUPPORTED;
    const Layout* ls[4] = {a, b, c, dl};
    for (int i = 0; i < 4; i++)
        if (p->align[i] < elem(ls[i]->type) || (p->align[i] & (p->align[i] - 1))) return CUBLAS_STATUS_NOT_SUPPORTED;
    // This "algorithm" splits k and wants 1 MiB of workspace where it may have it, none otherwise.
    uint64_t ws = p->max_workspace >= (1u << 20) ? (1u << 20) : 0;
    Algo algo{MAGIC, {p->align[0], p->align[1], p->align[2], p->align[3]}, ws};
    std::memset(out, 0, sizeof *out);
    std::memcpy(out->algo, &algo, sizeof algo);
    out->workspaceSize = ws;
    out->state = CUBLAS_STATUS_SUCCESS;
    out->wavesCount = 1.0f;
    *count = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(Handle* h, Desc* d, const void* alpha, const void* A, Layout* la, const void* B, Layout* lb, const void* beta,
                              const void* C, Layout* lc, void* D, Layout* ld, const uint64_t* algo_bytes, void* workspace, size_t ws_size,
                              void* stream) {
    if (!h || !d || !alpha || !beta || !la || !lb || !lc || !ld || !A || !B || !D) return CUBLAS_STATUS_INVALID_VALUE;
    uint64_t m, n, k;
    std::string why;
    if (!shapes(*d, *la, *lb, *lc, *ld, m, n, k, why)) {
        say("cublasLtMatmul: " + why);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!supported(la->type, lb->type, lc->type) || lc->type != ld->type) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!algo_bytes) return CUBLAS_STATUS_INVALID_VALUE;  // the fake has no algorithm of its own choosing
    Algo algo;
    std::memcpy(&algo, algo_bytes, sizeof algo);
    if (algo.magic != MAGIC) return CUBLAS_STATUS_INVALID_VALUE;
    const void* ptrs[4] = {A, B, C, D};
    const char* names[4] = {"A", "B", "C", "D"};
    for (int i = 0; i < 4; i++)
        if ((uintptr_t)ptrs[i] % algo.align[i]) {
            say(std::string("cublasLtMatmul: ") + names[i] + " at " + std::to_string((uintptr_t)ptrs[i]) + " is less aligned than the " +
                std::to_string(algo.align[i]) + " bytes the algorithm was chosen for");
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
    if (ws_size < algo.workspace || (algo.workspace && !workspace)) {
        say("cublasLtMatmul: a workspace of " + std::to_string(ws_size) + " bytes, the algorithm needs " + std::to_string(algo.workspace));
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    float a, b;
    std::memcpy(&a, alpha, 4);
    std::memcpy(&b, beta, 4);
    auto call = new Call{h, *d, *la, *lb, *lc, *ld, a, b, A, B, C, D, m, n, k};
    if (algo.workspace && !h->check((uintptr_t)workspace, algo.workspace, "cublasLtMatmul workspace")) {
        delete call;
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (h->enqueue(stream, run, call)) {
        delete call;
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
