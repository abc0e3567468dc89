/*
 * repack.inl - the CPU_REPACK buffer type: host memory holding the weights as set (so
 * tsr_backend_tensor_get, get_rows and the mat-vec kernels read the file's bytes), plus,
 * for each quantized matrix with a packed GEMM on the ISA in use when it was set, its A
 * panels packed once, in the layout that GEMM's micro-kernel streams. The GEMM then skips
 * packing (and, for K-quants, the dequantize / requantize step) on every prompt.
 *
 * Both copies are kept: packed panels hold 36 bytes per 32 weights (9 bits a weight), so a
 * 4-bit file needs about three times its size; converting back on get instead would make
 * the mat-vec path (decode) read the wider panels. Panels are made when the last byte of a
 * tensor is set (loaders write a tensor front to back) and dropped by memset / clear;
 * writes that bypass tsr_backend_tensor_set (through tensor->data) leave them stale.
 * Panels are used only while the GEMM that packed them is the one in use (same ISA).
 */
#include <memory>

namespace {
namespace tcpu {

/* A weight matrix's GEMM A panels: for every mr rows, the whole of K. */
struct packed_panels {
    const gemm_impl * g;            /* the GEMM whose pack_a wrote them */
    const void * data;              /* the tensor they were made from, as it was then */
    enum tsr_type type;
    int64_t ne[4];
    size_t nb[4];
    size_t panel_stride;            /* bytes per mr rows */
    std::vector<uint8_t> mem;       /* 64 bytes of slack: the panels start 64-byte aligned */
    const uint8_t * panels() const { return mem.data() + (64 - (uintptr_t)mem.data() % 64) % 64; }
};

struct repack_buffer_ctx {
    tsr_backend_buffer_t host;      /* plain CPU buffer with the bytes as set */
    std::mutex mutex;
    std::vector<std::unique_ptr<packed_panels>> packed;
};

static bool repack_buffer_set_tensor(tsr_backend_buffer_t buffer, struct tsr_tensor * t, const void * data, size_t offset, size_t size);

static bool is_repack_buffer(const tsr_backend_buffer * b) {
    return b && b->iface.set_tensor == repack_buffer_set_tensor;
}

/* t's panels when they match t as it is now and the GEMM g in use; NULL otherwise. */
static const packed_panels * prepacked_panels(const tsr_tensor * t, const gemm_impl * g) {
    if (!g || !is_repack_buffer(t->buffer) || !t->extra) return nullptr;
    const packed_panels * p = (const packed_panels *)t->extra;
    if (p->g != g || p->data != t->data || p->type != t->type) return nullptr;
    for (int i = 0; i < 4; ++i)
        if (p->ne[i] != t->ne[i] || p->nb[i] != t->nb[i]) return nullptr;
    return p;
}

static bool prepacked_a(const tsr_tensor * s0, const gemm_impl * g, const uint8_t ** panels, size_t * stride) {
    const packed_panels * p = prepacked_panels(s0, g);
    if (!p) return false;
    *panels = p->panels();
    *stride = p->panel_stride;
    return true;
}

/* Panels of a contiguous quantized matrix for the GEMM in use, or NULL when it has none. */
static std::unique_ptr<packed_panels> pack_weight_panels(const tsr_tensor * t) {
    if (!tsr_is_quantized(t->type) || t->ne[2] != 1 || t->ne[3] != 1 || !tsr_is_contiguous(t) || t->ne[0] % 32 != 0)
        return nullptr;
    const gemm_impl * g = gemm_for(get_kernels(), t->type);
    if (!g || !g->b_is_q8) return nullptr;
    const int64_t K = t->ne[0], M = t->ne[1];
    std::unique_ptr<packed_panels> p(new (std::nothrow) packed_panels());
    if (!p) return nullptr;
    p->g = g;
    p->data = t->data;
    p->type = t->type;
    for (int i = 0; i < 4; ++i) { p->ne[i] = t->ne[i]; p->nb[i] = t->nb[i]; }
    p->panel_stride = g->a_bytes_32k * (size_t)(K / 32);
    const size_t npanels = (size_t)((M + g->mr - 1) / g->mr);
    try { p->mem.resize(p->panel_stride * npanels + 64); } catch (...) { return nullptr; }
    uint8_t * dst = const_cast<uint8_t *>(p->panels());
    for (size_t i = 0; i < npanels; ++i) {
        const int64_t r0 = (int64_t)i * g->mr;
        const int rows = (int)std::min<int64_t>(g->mr, M - r0);
        for (int64_t pc = 0; pc < K; pc += g->kc) {
            const int kcp = (int)std::min<int64_t>(g->kc, K - pc);
            g->pack_a((const char *)t->data + (size_t)r0 * t->nb[1], t->nb[1], rows, K, pc, kcp,
                      dst + i * p->panel_stride + (size_t)(pc / 32) * g->a_bytes_32k);
        }
    }
    return p;
}

/* Panels that no longer match their tensor's bytes: their memory goes, the record stays
 * (a tensor copied from t may still point at it) with no GEMM, so it matches nothing. */
static void retire(packed_panels & p) {
    p.g = nullptr;
    std::vector<uint8_t>().swap(p.mem);
}

static void repack_drop(repack_buffer_ctx * c, struct tsr_tensor * t) {
    if (!t->extra) return;
    std::lock_guard<std::mutex> lock(c->mutex);
    for (auto & p : c->packed)
        if (p.get() == t->extra) retire(*p);
    t->extra = nullptr;
}

static bool repack_buffer_set_tensor(tsr_backend_buffer_t buffer, struct tsr_tensor * t, const void * data, size_t offset, size_t size) {
    repack_buffer_ctx * c = (repack_buffer_ctx *)buffer->context;
    if (data != (const char *)t->data + offset) std::memcpy((char *)t->data + offset, data, size);  /* in place: loaded there */
    repack_drop(c, t);
    if (offset + size != tsr_nbytes(t)) return true;
    std::unique_ptr<packed_panels> p = pack_weight_panels(t);
    if (!p) return true;  /* no GEMM panels for this tensor (or no memory): the GEMM packs as usual */
    std::lock_guard<std::mutex> lock(c->mutex);
    try { c->packed.push_back(std::move(p)); } catch (...) { return true; }
    t->extra = c->packed.back().get();
    return true;
}

static void repack_buffer_free(tsr_backend_buffer_t buffer) {
    repack_buffer_ctx * c = (repack_buffer_ctx *)buffer->context;
    tsr_backend_buffer_free(c->host);
    delete c;
}
static void * repack_buffer_get_base(tsr_backend_buffer_t buffer) {
    return tsr_backend_buffer_get_base(((repack_buffer_ctx *)buffer->context)->host);
}
static bool repack_buffer_memset_tensor(tsr_backend_buffer_t buffer, struct tsr_tensor * t, uint8_t value, size_t offset, size_t size) {
    repack_drop((repack_buffer_ctx *)buffer->context, t);
    std::memset((char *)t->data + offset, value, size);
    return true;
}
static void repack_buffer_clear(tsr_backend_buffer_t buffer, uint8_t value) {
    repack_buffer_ctx * c = (repack_buffer_ctx *)buffer->context;
    tsr_backend_buffer_clear(c->host, value);
    std::lock_guard<std::mutex> lock(c->mutex);
    for (auto & p : c->packed) retire(*p);
}

/* the CPU buffer's reads (the bytes as set); its own writes, which keep the panels in step */
static constexpr struct tsr_backend_buffer_i k_repack_buffer_i = [] {
    struct tsr_backend_buffer_i b = tsr_impl::k_cpu_buffer_i;
    b.free_buffer = repack_buffer_free;
    b.get_base = repack_buffer_get_base;
    b.memset_tensor = repack_buffer_memset_tensor;
    b.set_tensor = repack_buffer_set_tensor;
    b.cpy_tensor = nullptr;  /* a copy into a repack tensor goes to set_tensor */
    b.clear = repack_buffer_clear;
    return b;
}();

static const char * repack_buft_name(tsr_backend_buffer_type_t) { return "CPU_REPACK"; }
static tsr_backend_buffer_t repack_buft_alloc(tsr_backend_buffer_type_t buft, size_t size) {
    tsr_backend_buffer_t host = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_buffer_type(), size);
    if (!host) return nullptr;
    repack_buffer_ctx * c = new (std::nothrow) repack_buffer_ctx();
    if (!c) { tsr_backend_buffer_free(host); tsr_set_error("CPU_REPACK buffer type: out of memory"); return nullptr; }
    c->host = host;
    tsr_backend_buffer_t b = tsr_backend_buffer_init(buft, k_repack_buffer_i, c, size);
    if (!b) { tsr_backend_buffer_free(host); delete c; }
    return b;
}
/* the CPU buffer type's alignment and host memory, its own name and buffers */
static constexpr struct tsr_backend_buffer_type_i k_repack_buft_i = [] {
    struct tsr_backend_buffer_type_i t = tsr_impl::k_cpu_buft_i;
    t.get_name = repack_buft_name;
    t.alloc_buffer = repack_buft_alloc;
    return t;
}();

} // namespace tcpu
} // namespace

TSR_API_IMPL tsr_backend_buffer_type_t tsr_backend_cpu_repack_buffer_type(void) {
    static struct tsr_backend_buffer_type buft = [] {
        struct tsr_backend_buffer_type t = {};
        t.iface = tcpu::k_repack_buft_i;
        return t;
    }();
    return &buft;
}
