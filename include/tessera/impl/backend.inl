/*
 * backend.inl - buffer types, buffers, generic backend dispatch, the CPU (host) buffer
 * type, multi-buffers and whole contexts into buffers. See backend.h.
 */

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>
#if defined(__linux__)
#include <sys/mman.h>  /* madvise: huge pages for large host blocks */
#endif

TSR_IMPL_NS_BEGIN
namespace {

/* ---- the built-in host allocator: operator new with manual alignment --------------
 * The original pointer is stored just below the aligned block, so free needs no size.
 *
 * Blocks of TSR_HUGE_PAGE_MIN bytes and more are 2 MiB aligned, padded to whole 2 MiB and
 * advised MADV_HUGEPAGE (Linux): a mat-vec streams every weight from DRAM once a token on 4
 * streams a core, and with 4 KiB pages each stream takes a TLB miss and restarts the L2
 * streamer every 4 KiB. Transparent huge pages in "madvise" mode (the default of many
 * distributions) give none without the advice. A/B in one run on a 2-core Sapphire Rapids
 * VM, 4 KiB pages -> 2 MiB: cpu_bench Q4_0 mat-vec from DRAM 31.5-31.8 -> 36.1-37.2 GB/s,
 * Q5_1 30.0 -> 35.0; run_bench LLaMA 1.1B Q4_0 generation 47.4-48.6 -> 50.3-53.3 tok/s.
 * The cost is first touch on VMs that hand free 2 MiB blocks back to the host (README).
 * TSR_HUGE_PAGES=0 in the environment turns it off (read once). The padding costs at most
 * 2 MiB of memory a block. A block freed into malloc's heap (not unmapped) leaves its range
 * advised, which only lets later heap blocks there have huge pages too. */
#if defined(__linux__) && defined(MADV_HUGEPAGE)
#define TSR_HOST_THP 1
static constexpr size_t k_huge_page = (size_t) 2 << 20;
static bool huge_pages_wanted(size_t size) {
    static const bool enabled = [] {
        const char * e = getenv("TSR_HUGE_PAGES");
        return !(e && e[0] == '0' && e[1] == 0);
    }();
    return TSR_HUGE_PAGE_MIN > 0 && size >= (size_t) TSR_HUGE_PAGE_MIN && enabled;
}
#endif

static void * host_default_alloc(size_t size, size_t align, void *) {
    if (align < sizeof(void *)) align = sizeof(void *);
    if ((align & (align - 1)) != 0) return nullptr;
#ifdef TSR_HOST_THP
    const bool huge = huge_pages_wanted(size) && size <= SIZE_MAX - 2 * k_huge_page;
    if (huge) {
        size = (size + k_huge_page - 1) & ~(k_huge_page - 1);
        align = std::max(align, k_huge_page);
    }
#endif
    if (size > SIZE_MAX - align - sizeof(void *)) return nullptr;
    void * raw = ::operator new(size + align + sizeof(void *), std::nothrow);
    if (!raw) return nullptr;
    uintptr_t p = ((uintptr_t) raw + sizeof(void *) + align - 1) & ~(uintptr_t) (align - 1);
    ((void **) p)[-1] = raw;
#ifdef TSR_HOST_THP
    if (huge) (void) madvise((void *) p, size, MADV_HUGEPAGE);  /* advice: no huge page is no error */
#endif
    return (void *) p;
}
static void host_default_free(void * ptr, void *) {
    if (ptr) ::operator delete(((void **) ptr)[-1]);
}

/* The tables below (allocators, buffer and buffer type interfaces) are filled member by
 * member, so each entry names its member; what one leaves unset is NULL. */
static constexpr struct tsr_host_allocator k_host_default = [] {
    struct tsr_host_allocator a = {};
    a.alloc = host_default_alloc;
    a.free = host_default_free;
    return a;
}();
static struct tsr_host_allocator g_host_allocator = k_host_default;

/* ---- CPU buffers ------------------------------------------------------------------- */

struct cpu_buffer_ctx {
    void * ptr;
    bool owned;
    struct tsr_host_allocator alloc;  /* the allocator that made ptr (when owned) */
};

static void cpu_buffer_free(tsr_backend_buffer_t buffer) {
    cpu_buffer_ctx * c = (cpu_buffer_ctx *) buffer->context;
    if (c->owned && c->ptr) c->alloc.free(c->ptr, c->alloc.user);
    delete c;
}
static void * cpu_buffer_get_base(tsr_backend_buffer_t buffer) { return ((cpu_buffer_ctx *) buffer->context)->ptr; }
static bool cpu_buffer_memset_tensor(tsr_backend_buffer_t, struct tsr_tensor * t, uint8_t value, size_t offset, size_t size) {
    memset((char *) t->data + offset, value, size);
    return true;
}
static bool cpu_buffer_set_tensor(tsr_backend_buffer_t, struct tsr_tensor * t, const void * data, size_t offset, size_t size) {
    memcpy((char *) t->data + offset, data, size);
    return true;
}
static bool cpu_buffer_get_tensor(tsr_backend_buffer_t, const struct tsr_tensor * t, void * data, size_t offset, size_t size) {
    memcpy(data, (const char *) t->data + offset, size);
    return true;
}
static bool cpu_buffer_cpy_tensor(tsr_backend_buffer_t, const struct tsr_tensor * src, struct tsr_tensor * dst) {
    if (src->buffer && tsr_backend_buffer_is_host(src->buffer)) {
        memcpy(dst->data, src->data, tsr_nbytes(src));
        return true;
    }
    return false;
}
static void cpu_buffer_clear(tsr_backend_buffer_t buffer, uint8_t value) {
    cpu_buffer_ctx * c = (cpu_buffer_ctx *) buffer->context;
    if (c->ptr) memset(c->ptr, value, buffer->size);
}

static constexpr struct tsr_backend_buffer_i k_cpu_buffer_i = [] {
    struct tsr_backend_buffer_i b = {};
    b.free_buffer = cpu_buffer_free;
    b.get_base = cpu_buffer_get_base;
    b.memset_tensor = cpu_buffer_memset_tensor;
    b.set_tensor = cpu_buffer_set_tensor;
    b.get_tensor = cpu_buffer_get_tensor;
    b.cpy_tensor = cpu_buffer_cpy_tensor;
    b.clear = cpu_buffer_clear;
    return b;
}();

static const char * cpu_buft_name(tsr_backend_buffer_type_t buft) {
    return buft->context ? "CPU (custom allocator)" : "CPU";
}
static tsr_backend_buffer_t cpu_buft_alloc(tsr_backend_buffer_type_t buft, size_t size) {
    const struct tsr_host_allocator a = buft->context ? *(const struct tsr_host_allocator *) buft->context : g_host_allocator;
    void * ptr = a.alloc(size ? size : 1, 64, a.user);
    if (!ptr) {
        tsr_set_error("CPU buffer type: failed to allocate %zu bytes (64-byte aligned)", size);
        return nullptr;
    }
    if (((uintptr_t) ptr % 64) != 0) {
        a.free(ptr, a.user);
        tsr_set_error("CPU buffer type: the host allocator returned %p, not 64-byte aligned", ptr);
        return nullptr;
    }
    cpu_buffer_ctx * c = new (std::nothrow) cpu_buffer_ctx{ptr, true, a};
    if (!c) { a.free(ptr, a.user); tsr_set_error("CPU buffer type: out of memory"); return nullptr; }
    tsr_backend_buffer_t b = tsr_backend_buffer_init(buft, k_cpu_buffer_i, c, size);
    if (!b) { a.free(ptr, a.user); delete c; }
    return b;
}
static size_t cpu_buft_alignment(tsr_backend_buffer_type_t) { return 64; }
static bool cpu_buft_is_host(tsr_backend_buffer_type_t) { return true; }

static constexpr struct tsr_backend_buffer_type_i k_cpu_buft_i = [] {
    struct tsr_backend_buffer_type_i t = {};
    t.get_name = cpu_buft_name;
    t.alloc_buffer = cpu_buft_alloc;
    t.get_alignment = cpu_buft_alignment;
    t.is_host = cpu_buft_is_host;
    return t;
}();
static struct tsr_backend_buffer_type g_cpu_buft = [] {
    struct tsr_backend_buffer_type t = {};
    t.iface = k_cpu_buft_i;
    return t;
}();

/* ---- multi-buffers ----------------------------------------------------------------- */

struct multi_buffer_ctx {
    vec<tsr_backend_buffer_t> bufs;
};
static void multi_buffer_free(tsr_backend_buffer_t buffer) {
    multi_buffer_ctx * c = (multi_buffer_ctx *) buffer->context;
    for (tsr_backend_buffer_t b : c->bufs) tsr_backend_buffer_free(b);
    delete c;
}
static void * multi_buffer_get_base(tsr_backend_buffer_t buffer) {
    multi_buffer_ctx * c = (multi_buffer_ctx *) buffer->context;
    return c->bufs.empty() ? nullptr : tsr_backend_buffer_get_base(c->bufs[0]);
}
static bool multi_buffer_memset_tensor(tsr_backend_buffer_t, struct tsr_tensor * t, uint8_t, size_t, size_t) {
    return tsr_set_error("multi-buffer: tensor '%s' must be placed in one of its parts, not in the multi-buffer", t->name);
}
static bool multi_buffer_set_tensor(tsr_backend_buffer_t, struct tsr_tensor * t, const void *, size_t, size_t) {
    return tsr_set_error("multi-buffer: tensor '%s' must be placed in one of its parts, not in the multi-buffer", t->name);
}
static bool multi_buffer_get_tensor(tsr_backend_buffer_t, const struct tsr_tensor * t, void *, size_t, size_t) {
    return tsr_set_error("multi-buffer: tensor '%s' must be placed in one of its parts, not in the multi-buffer", t->name);
}
static void multi_buffer_clear(tsr_backend_buffer_t buffer, uint8_t value) {
    multi_buffer_ctx * c = (multi_buffer_ctx *) buffer->context;
    for (tsr_backend_buffer_t b : c->bufs) tsr_backend_buffer_clear(b, value);
}
static constexpr struct tsr_backend_buffer_i k_multi_buffer_i = [] {
    struct tsr_backend_buffer_i b = {};
    b.free_buffer = multi_buffer_free;
    b.get_base = multi_buffer_get_base;
    b.memset_tensor = multi_buffer_memset_tensor;
    b.set_tensor = multi_buffer_set_tensor;
    b.get_tensor = multi_buffer_get_tensor;
    b.clear = multi_buffer_clear;
    return b;
}();

/* Range check shared by set/get/memset. */
static bool tensor_range_ok(const struct tsr_tensor * t, size_t offset, size_t size, const char * fn) {
    if (!t) return tsr_set_error("%s: tensor is NULL", fn);
    const size_t nb = tsr_nbytes(t);
    if (offset > nb || size > nb - offset) {
        return tsr_set_error("%s: tensor '%s' range [%zu, %zu) is outside its %zu bytes", fn, t->name, offset,
                             offset + size, nb);
    }
    if (size != 0 && !t->data) return tsr_set_error("%s: tensor '%s' has no data (not placed in a buffer)", fn, t->name);
    return true;
}

} // namespace
TSR_IMPL_NS_END

/* ---- host allocator hooks ------------------------------------------------------------ */

TSR_API_IMPL void tsr_set_host_allocator(const struct tsr_host_allocator * alloc) {
    tsr_impl::g_host_allocator = (alloc && alloc->alloc && alloc->free) ? *alloc : tsr_impl::k_host_default;
}
TSR_API_IMPL const struct tsr_host_allocator * tsr_get_host_allocator(void) { return &tsr_impl::g_host_allocator; }

/* ---- buffer types -------------------------------------------------------------------- */

TSR_API_IMPL const char * tsr_backend_buft_name(tsr_backend_buffer_type_t buft) {
    return buft ? buft->iface.get_name(buft) : "(null)";
}
TSR_API_IMPL tsr_backend_buffer_t tsr_backend_buft_alloc_buffer(tsr_backend_buffer_type_t buft, size_t size) {
    if (!buft) { tsr_set_error("tsr_backend_buft_alloc_buffer: buffer type is NULL"); return nullptr; }
    const size_t max = tsr_backend_buft_get_max_size(buft);
    if (size > max) {
        tsr_set_error("tsr_backend_buft_alloc_buffer: %zu bytes exceed the max size %zu of buffer type %s", size, max,
                      tsr_backend_buft_name(buft));
        return nullptr;
    }
    return buft->iface.alloc_buffer(buft, size);
}
TSR_API_IMPL size_t tsr_backend_buft_get_alignment(tsr_backend_buffer_type_t buft) {
    return buft ? buft->iface.get_alignment(buft) : 1;
}
TSR_API_IMPL size_t tsr_backend_buft_get_max_size(tsr_backend_buffer_type_t buft) {
    return (buft && buft->iface.get_max_size) ? buft->iface.get_max_size(buft) : SIZE_MAX;
}
TSR_API_IMPL size_t tsr_backend_buft_get_alloc_size(tsr_backend_buffer_type_t buft, const struct tsr_tensor * tensor) {
    return (buft && buft->iface.get_alloc_size) ? buft->iface.get_alloc_size(buft, tensor) : tsr_nbytes(tensor);
}
TSR_API_IMPL bool tsr_backend_buft_is_host(tsr_backend_buffer_type_t buft) {
    return buft && buft->iface.is_host && buft->iface.is_host(buft);
}

/* ---- buffers ------------------------------------------------------------------------- */

TSR_API_IMPL tsr_backend_buffer_t tsr_backend_buffer_init(tsr_backend_buffer_type_t buft, struct tsr_backend_buffer_i iface,
                                                          void * context, size_t size) {
    tsr_backend_buffer_t b = new (std::nothrow) tsr_backend_buffer;
    if (!b) { tsr_set_error("tsr_backend_buffer_init: out of memory"); return nullptr; }
    b->iface = iface;
    b->buft = buft;
    b->context = context;
    b->size = size;
    b->usage = TSR_BUFFER_USAGE_ANY;
    return b;
}
TSR_API_IMPL const char * tsr_backend_buffer_name(tsr_backend_buffer_t buffer) {
    if (!buffer) return "(null)";
    if (buffer->iface.free_buffer == tsr_impl::multi_buffer_free) return "multi-buffer";
    return tsr_backend_buft_name(buffer->buft);
}
TSR_API_IMPL void tsr_backend_buffer_free(tsr_backend_buffer_t buffer) {
    if (!buffer) return;
    if (buffer->iface.free_buffer) buffer->iface.free_buffer(buffer);
    delete buffer;
}
TSR_API_IMPL void * tsr_backend_buffer_get_base(tsr_backend_buffer_t buffer) {
    return buffer ? buffer->iface.get_base(buffer) : nullptr;
}
TSR_API_IMPL size_t tsr_backend_buffer_get_size(tsr_backend_buffer_t buffer) { return buffer ? buffer->size : 0; }
TSR_API_IMPL bool tsr_backend_buffer_init_tensor(tsr_backend_buffer_t buffer, struct tsr_tensor * tensor) {
    if (!buffer || !tensor) return tsr_set_error("tsr_backend_buffer_init_tensor: NULL buffer or tensor");
    return buffer->iface.init_tensor ? buffer->iface.init_tensor(buffer, tensor) : true;
}
TSR_API_IMPL size_t tsr_backend_buffer_get_alignment(tsr_backend_buffer_t buffer) {
    return buffer ? tsr_backend_buft_get_alignment(buffer->buft) : 1;
}
TSR_API_IMPL size_t tsr_backend_buffer_get_max_size(tsr_backend_buffer_t buffer) {
    return buffer ? tsr_backend_buft_get_max_size(buffer->buft) : SIZE_MAX;
}
TSR_API_IMPL size_t tsr_backend_buffer_get_alloc_size(tsr_backend_buffer_t buffer, const struct tsr_tensor * tensor) {
    return tsr_backend_buft_get_alloc_size(buffer ? buffer->buft : nullptr, tensor);
}
TSR_API_IMPL void tsr_backend_buffer_clear(tsr_backend_buffer_t buffer, uint8_t value) {
    if (buffer && buffer->iface.clear) buffer->iface.clear(buffer, value);
}
TSR_API_IMPL bool tsr_backend_buffer_is_host(tsr_backend_buffer_t buffer) {
    return buffer && buffer->iface.free_buffer != tsr_impl::multi_buffer_free && tsr_backend_buft_is_host(buffer->buft);
}
TSR_API_IMPL void tsr_backend_buffer_set_usage(tsr_backend_buffer_t buffer, enum tsr_backend_buffer_usage usage) {
    if (!buffer) return;
    buffer->usage = usage;
    if (tsr_backend_buffer_is_multi_buffer(buffer)) {
        for (tsr_backend_buffer_t b : ((tsr_impl::multi_buffer_ctx *) buffer->context)->bufs) tsr_backend_buffer_set_usage(b, usage);
    }
}
TSR_API_IMPL enum tsr_backend_buffer_usage tsr_backend_buffer_get_usage(tsr_backend_buffer_t buffer) {
    return buffer ? buffer->usage : TSR_BUFFER_USAGE_ANY;
}
TSR_API_IMPL tsr_backend_buffer_type_t tsr_backend_buffer_get_type(tsr_backend_buffer_t buffer) {
    return buffer ? buffer->buft : nullptr;
}

TSR_API_IMPL bool tsr_backend_tensor_alloc(tsr_backend_buffer_t buffer, struct tsr_tensor * tensor, void * addr) {
    if (!buffer || !tensor) return tsr_set_error("tsr_backend_tensor_alloc: NULL buffer or tensor");
    if (tensor->data || tensor->buffer) {
        return tsr_set_error("tsr_backend_tensor_alloc: tensor '%s' already has data", tensor->name);
    }
    if (tensor->view_src) {
        return tsr_set_error("tsr_backend_tensor_alloc: tensor '%s' is a view (use tsr_backend_view_init)", tensor->name);
    }
    char * base = (char *) tsr_backend_buffer_get_base(buffer);
    const size_t size = tsr_backend_buffer_get_alloc_size(buffer, tensor);
    const size_t off = (size_t) ((char *) addr - base);
    if ((char *) addr < base || off > buffer->size || size > buffer->size - off) {
        return tsr_set_error("tsr_backend_tensor_alloc: tensor '%s' (%zu bytes) at offset %lld does not fit in buffer '%s' of %zu bytes",
                             tensor->name, size, (long long) ((char *) addr - base), tsr_backend_buffer_name(buffer), buffer->size);
    }
    tensor->buffer = buffer;
    tensor->data = addr;
    if (!tsr_backend_buffer_init_tensor(buffer, tensor)) {
        tensor->buffer = nullptr;
        tensor->data = nullptr;
        return false;
    }
    return true;
}

TSR_API_IMPL bool tsr_backend_view_init(struct tsr_tensor * tensor) {
    if (!tensor || !tensor->view_src) return tsr_set_error("tsr_backend_view_init: tensor is NULL or not a view");
    struct tsr_tensor * src = tensor->view_src;
    if (!src->buffer || !src->data) {
        return tsr_set_error("tsr_backend_view_init: view '%s' of '%s': the source is not placed in a buffer", tensor->name, src->name);
    }
    tensor->buffer = src->buffer;
    tensor->data = (char *) src->data + tensor->view_offs;
    return tsr_backend_buffer_init_tensor(src->buffer, tensor);
}

TSR_API_IMPL bool tsr_backend_tensor_set(struct tsr_tensor * tensor, const void * data, size_t offset, size_t size) {
    if (!tsr_impl::tensor_range_ok(tensor, offset, size, "tsr_backend_tensor_set")) return false;
    if (size == 0) return true;
    if (!data) return tsr_set_error("tsr_backend_tensor_set: data is NULL for tensor '%s'", tensor->name);
    if (!tensor->buffer) { memcpy((char *) tensor->data + offset, data, size); return true; }  /* context memory */
    return tensor->buffer->iface.set_tensor(tensor->buffer, tensor, data, offset, size);
}
TSR_API_IMPL bool tsr_backend_tensor_get(const struct tsr_tensor * tensor, void * data, size_t offset, size_t size) {
    if (!tsr_impl::tensor_range_ok(tensor, offset, size, "tsr_backend_tensor_get")) return false;
    if (size == 0) return true;
    if (!data) return tsr_set_error("tsr_backend_tensor_get: data is NULL for tensor '%s'", tensor->name);
    if (!tensor->buffer) { memcpy(data, (const char *) tensor->data + offset, size); return true; }
    return tensor->buffer->iface.get_tensor(tensor->buffer, tensor, data, offset, size);
}
TSR_API_IMPL bool tsr_backend_tensor_memset(struct tsr_tensor * tensor, uint8_t value, size_t offset, size_t size) {
    if (!tsr_impl::tensor_range_ok(tensor, offset, size, "tsr_backend_tensor_memset")) return false;
    if (size == 0) return true;
    if (!tensor->buffer) { memset((char *) tensor->data + offset, value, size); return true; }
    if (!tensor->buffer->iface.memset_tensor) return tsr_set_error("tsr_backend_tensor_memset: buffer '%s' cannot memset", tsr_backend_buffer_name(tensor->buffer));
    return tensor->buffer->iface.memset_tensor(tensor->buffer, tensor, value, offset, size);
}
TSR_IMPL_NS_BEGIN
namespace {
enum class copy_route { done, direct, through_host };

/* Copies that need no staging; through_host: two devices, src -> host -> dst is left. */
static copy_route copy_without_staging(struct tsr_tensor * src, struct tsr_tensor * dst, const char * fn, bool * ok) {
    *ok = true;
    if (!src || !dst) { *ok = tsr_set_error("%s: NULL tensor", fn); return copy_route::done; }
    const size_t n = tsr_nbytes(src);
    if (n != tsr_nbytes(dst)) {
        *ok = tsr_set_error("%s: '%s' has %zu bytes, '%s' has %zu", fn, src->name, n, dst->name, tsr_nbytes(dst));
        return copy_route::done;
    }
    if (src == dst || n == 0) return copy_route::done;
    if (!src->data || !dst->data) { *ok = tsr_set_error("%s: '%s' or '%s' has no data", fn, src->name, dst->name); return copy_route::done; }
    const bool src_host = !src->buffer || tsr_backend_buffer_is_host(src->buffer);
    const bool dst_host = !dst->buffer || tsr_backend_buffer_is_host(dst->buffer);
    /* a plain CPU destination is written directly; another host buffer (a read-only file
     * mapping) decides through its own set_tensor */
    const bool dst_plain = !dst->buffer || dst->buffer->iface.set_tensor == cpu_buffer_set_tensor;
    if (src_host && dst_host && dst_plain) { memmove(dst->data, src->data, n); return copy_route::done; }
    if (dst->buffer && dst->buffer->iface.cpy_tensor && dst->buffer->iface.cpy_tensor(dst->buffer, src, dst)) return copy_route::done;
    if (src_host) { *ok = tsr_backend_tensor_set(dst, src->data, 0, n); return copy_route::done; }
    if (dst_host) { *ok = tsr_backend_tensor_get(src, dst->data, 0, n); return copy_route::done; }
    return copy_route::through_host;
}

/* src -> staging -> dst in pieces of at most staging_size bytes. */
static bool copy_through(struct tsr_tensor * src, struct tsr_tensor * dst, char * staging, size_t staging_size) {
    const size_t n = tsr_nbytes(src);
    for (size_t done = 0; done < n; done += staging_size) {
        const size_t piece = std::min(staging_size, n - done);
        if (!tsr_backend_tensor_get(src, staging, done, piece) || !tsr_backend_tensor_set(dst, staging, done, piece)) return false;
    }
    return true;
}
} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_backend_tensor_copy(struct tsr_tensor * src, struct tsr_tensor * dst) {
    bool ok;
    if (tsr_impl::copy_without_staging(src, dst, "tsr_backend_tensor_copy", &ok) != tsr_impl::copy_route::through_host) return ok;
    /* a program's one-off copy; the scheduler brings its own staging */
    const size_t n = tsr_nbytes(src);
    std::vector<char> tmp;
    try { tmp.resize(n); } catch (...) { return tsr_set_error("tsr_backend_tensor_copy: out of memory for %zu bytes of staging", n); }
    return tsr_impl::copy_through(src, dst, tmp.data(), n);
}

TSR_API_IMPL bool tsr_backend_tensor_copy_staged(struct tsr_tensor * src, struct tsr_tensor * dst, void * staging, size_t staging_size) {
    bool ok;
    if (tsr_impl::copy_without_staging(src, dst, "tsr_backend_tensor_copy_staged", &ok) != tsr_impl::copy_route::through_host) return ok;
    if (!staging || staging_size == 0)
        return tsr_set_error("tsr_backend_tensor_copy_staged: '%s' -> '%s' goes through host memory and the staging is %s", src->name,
                             dst->name, staging ? "0 bytes" : "NULL");
    return tsr_impl::copy_through(src, dst, (char *) staging, staging_size);
}

TSR_API_IMPL bool tsr_backend_tensor_copy_async(tsr_backend_t backend_src, tsr_backend_t backend_dst, struct tsr_tensor * src,
                                                struct tsr_tensor * dst) {
    if (!backend_src || !backend_dst) return tsr_set_error("tsr_backend_tensor_copy_async: NULL backend");
    if (src && dst && backend_dst->iface.cpy_tensor_async && tsr_nbytes(src) == tsr_nbytes(dst) &&
        backend_dst->iface.cpy_tensor_async(backend_src, backend_dst, src, dst)) return true;
    tsr_backend_synchronize(backend_src);
    tsr_backend_synchronize(backend_dst);
    return tsr_backend_tensor_copy(src, dst);
}

/* ---- backends ------------------------------------------------------------------------ */

TSR_API_IMPL const char * tsr_backend_name(tsr_backend_t backend) { return backend ? backend->iface.get_name(backend) : "(null)"; }
TSR_API_IMPL void tsr_backend_free(tsr_backend_t backend) { if (backend) backend->iface.free(backend); }
TSR_API_IMPL tsr_backend_buffer_type_t tsr_backend_get_default_buffer_type(tsr_backend_t backend) {
    return backend ? backend->iface.get_default_buffer_type(backend) : nullptr;
}
TSR_API_IMPL tsr_backend_buffer_t tsr_backend_alloc_buffer(tsr_backend_t backend, size_t size) {
    if (!backend) { tsr_set_error("tsr_backend_alloc_buffer: backend is NULL"); return nullptr; }
    return tsr_backend_buft_alloc_buffer(tsr_backend_get_default_buffer_type(backend), size);
}
TSR_API_IMPL size_t tsr_backend_get_alignment(tsr_backend_t backend) {
    return tsr_backend_buft_get_alignment(tsr_backend_get_default_buffer_type(backend));
}
TSR_API_IMPL size_t tsr_backend_get_max_size(tsr_backend_t backend) {
    return tsr_backend_buft_get_max_size(tsr_backend_get_default_buffer_type(backend));
}
TSR_API_IMPL bool tsr_backend_tensor_set_async(tsr_backend_t backend, struct tsr_tensor * tensor, const void * data, size_t offset, size_t size) {
    if (backend && backend->iface.set_tensor_async) {
        if (!tsr_impl::tensor_range_ok(tensor, offset, size, "tsr_backend_tensor_set_async")) return false;
        return backend->iface.set_tensor_async(backend, tensor, data, offset, size);
    }
    return tsr_backend_tensor_set(tensor, data, offset, size);
}
TSR_API_IMPL bool tsr_backend_tensor_get_async(tsr_backend_t backend, const struct tsr_tensor * tensor, void * data, size_t offset, size_t size) {
    if (backend && backend->iface.get_tensor_async) {
        if (!tsr_impl::tensor_range_ok(tensor, offset, size, "tsr_backend_tensor_get_async")) return false;
        return backend->iface.get_tensor_async(backend, tensor, data, offset, size);
    }
    return tsr_backend_tensor_get(tensor, data, offset, size);
}
TSR_API_IMPL void tsr_backend_synchronize(tsr_backend_t backend) {
    if (backend && backend->iface.synchronize) backend->iface.synchronize(backend);
}
TSR_API_IMPL bool tsr_backend_graph_reserve(tsr_backend_t backend, struct tsr_cgraph * cgraph) {
    if (!backend || !cgraph) return tsr_set_error("tsr_backend_graph_reserve: NULL backend or graph");
    return backend->iface.graph_reserve ? backend->iface.graph_reserve(backend, cgraph) : true;
}
TSR_API_IMPL enum tsr_status tsr_backend_graph_compute(tsr_backend_t backend, struct tsr_cgraph * cgraph) {
    if (!backend || !cgraph) { tsr_set_error("tsr_backend_graph_compute: NULL backend or graph"); return TSR_STATUS_FAILED; }
    return backend->iface.graph_compute(backend, cgraph);
}
TSR_API_IMPL enum tsr_status tsr_backend_graph_compute_async(tsr_backend_t backend, struct tsr_cgraph * cgraph) {
    if (!backend || !cgraph) { tsr_set_error("tsr_backend_graph_compute_async: NULL backend or graph"); return TSR_STATUS_FAILED; }
    if (backend->iface.graph_compute_async) return backend->iface.graph_compute_async(backend, cgraph);
    return backend->iface.graph_compute(backend, cgraph);
}
TSR_API_IMPL bool tsr_backend_supports_op(tsr_backend_t backend, const struct tsr_tensor * op) {
    return backend && op && backend->iface.supports_op(backend, op);
}
TSR_API_IMPL bool tsr_backend_supports_buft(tsr_backend_t backend, tsr_backend_buffer_type_t buft) {
    if (!backend) return false;
    if (backend->iface.supports_buft) return backend->iface.supports_buft(backend, buft);
    return buft == tsr_backend_get_default_buffer_type(backend);
}
TSR_API_IMPL size_t tsr_backend_get_workspace_size(tsr_backend_t backend) {
    return (backend && backend->iface.get_workspace_size) ? backend->iface.get_workspace_size(backend) : 0;
}

/* ---- CPU (host) buffers -------------------------------------------------------------- */

TSR_API_IMPL tsr_backend_buffer_type_t tsr_backend_cpu_buffer_type(void) { return &tsr_impl::g_cpu_buft; }

TSR_API_IMPL tsr_backend_buffer_type_t tsr_backend_cpu_buffer_type_with_allocator(const struct tsr_host_allocator * alloc) {
    if (!alloc || !alloc->alloc || !alloc->free) {
        tsr_set_error("tsr_backend_cpu_buffer_type_with_allocator: allocator or its alloc/free is NULL");
        return nullptr;
    }
    struct tsr_host_allocator * a = new (std::nothrow) tsr_host_allocator(*alloc);
    tsr_backend_buffer_type_t buft = a ? new (std::nothrow) tsr_backend_buffer_type() : nullptr;
    if (!buft) { delete a; tsr_set_error("tsr_backend_cpu_buffer_type_with_allocator: out of memory"); return nullptr; }
    buft->iface = tsr_impl::k_cpu_buft_i;
    buft->context = a;
    return buft;
}
TSR_API_IMPL void tsr_backend_cpu_buffer_type_free(tsr_backend_buffer_type_t buft) {
    if (!buft || buft == &tsr_impl::g_cpu_buft) return;
    delete (struct tsr_host_allocator *) buft->context;
    delete buft;
}
TSR_API_IMPL tsr_backend_buffer_t tsr_backend_cpu_buffer_from_ptr(void * ptr, size_t size) {
    if (!ptr && size) { tsr_set_error("tsr_backend_cpu_buffer_from_ptr: ptr is NULL for %zu bytes", size); return nullptr; }
    if (((uintptr_t) ptr % 64) != 0) {
        tsr_set_error("tsr_backend_cpu_buffer_from_ptr: %p is not 64-byte aligned", ptr);
        return nullptr;
    }
    tsr_impl::cpu_buffer_ctx * c = new (std::nothrow) tsr_impl::cpu_buffer_ctx{ptr, false, tsr_impl::k_host_default};
    if (!c) { tsr_set_error("tsr_backend_cpu_buffer_from_ptr: out of memory"); return nullptr; }
    tsr_backend_buffer_t b = tsr_backend_buffer_init(&tsr_impl::g_cpu_buft, tsr_impl::k_cpu_buffer_i, c, size);
    if (!b) delete c;
    return b;
}

/* ---- multi-buffers and whole contexts ------------------------------------------------ */

TSR_API_IMPL tsr_backend_buffer_t tsr_backend_multi_buffer_alloc_buffer(tsr_backend_buffer_t * buffers, size_t n_buffers) {
    if (!buffers && n_buffers) { tsr_set_error("tsr_backend_multi_buffer_alloc_buffer: buffers is NULL"); return nullptr; }
    tsr_impl::multi_buffer_ctx * c = new (std::nothrow) tsr_impl::multi_buffer_ctx;
    if (!c) { tsr_set_error("tsr_backend_multi_buffer_alloc_buffer: out of memory"); return nullptr; }
    size_t total = 0;
    try { c->bufs.assign(buffers, buffers + n_buffers); } catch (...) {
        delete c;
        tsr_set_error("tsr_backend_multi_buffer_alloc_buffer: out of memory");
        return nullptr;
    }
    for (size_t i = 0; i < n_buffers; i++) total += tsr_backend_buffer_get_size(buffers[i]);
    tsr_backend_buffer_t b = tsr_backend_buffer_init(n_buffers ? buffers[0]->buft : nullptr, tsr_impl::k_multi_buffer_i, c, total);
    if (!b) delete c;
    return b;
}
TSR_API_IMPL bool tsr_backend_buffer_is_multi_buffer(tsr_backend_buffer_t buffer) {
    return buffer && buffer->iface.free_buffer == tsr_impl::multi_buffer_free;
}

TSR_API_IMPL tsr_backend_buffer_t tsr_backend_alloc_ctx_tensors_from_buft_size(struct tsr_context * ctx, tsr_backend_buffer_type_t buft,
                                                                               size_t max_size) {
    if (!ctx || !buft) { tsr_set_error("tsr_backend_alloc_ctx_tensors: NULL context or buffer type"); return nullptr; }
    const size_t align = std::max<size_t>(1, tsr_backend_buft_get_alignment(buft));  /* 0 would divide by zero in TSR_PAD */
    if (max_size == 0) max_size = tsr_backend_buft_get_max_size(buft);
    /* plan the chunks first: nothing is touched until every buffer exists */
    tsr_impl::vec<struct tsr_tensor *> ts;
    std::vector<size_t> chunk_of, offs, chunk_size;
    size_t cur = 0;
    tsr_impl::vec<tsr_backend_buffer_t> bufs;
    try {
        for (struct tsr_tensor * t = tsr_get_first_tensor(ctx); t; t = tsr_get_next_tensor(ctx, t)) {
            if (t->data || t->buffer || t->view_src) continue;
            const size_t raw = tsr_backend_buft_get_alloc_size(buft, t);
            const size_t sz = raw > SIZE_MAX - align ? SIZE_MAX : TSR_PAD(raw, align);
            if (sz > max_size) {
                tsr_set_error("tsr_backend_alloc_ctx_tensors: tensor '%s' needs %zu bytes, more than the max buffer size %zu of %s",
                              t->name, raw, max_size, tsr_backend_buft_name(buft));
                return nullptr;
            }
            if (chunk_size.empty() || sz > max_size - cur) { chunk_size.push_back(0); cur = 0; }
            ts.push_back(t);
            chunk_of.push_back(chunk_size.size() - 1);
            offs.push_back(cur);
            cur += sz;
            chunk_size.back() = cur;
        }
        bufs.reserve(chunk_size.size());  /* so the push_backs below cannot throw */
    } catch (...) {
        tsr_set_error("tsr_backend_alloc_ctx_tensors: out of memory while planning %zu tensors", ts.size());
        return nullptr;
    }
    if (ts.empty()) {
        tsr_set_error("tsr_backend_alloc_ctx_tensors: the context has no tensor without data");
        return nullptr;
    }
    for (size_t c = 0; c < chunk_size.size(); c++) {
        tsr_backend_buffer_t b = tsr_backend_buft_alloc_buffer(buft, chunk_size[c]);
        if (!b) {
            for (tsr_backend_buffer_t x : bufs) tsr_backend_buffer_free(x);
            return nullptr;
        }
        tsr_backend_buffer_set_usage(b, TSR_BUFFER_USAGE_WEIGHTS);
        bufs.push_back(b);
    }
    auto undo = [&]() {
        for (struct tsr_tensor * t = tsr_get_first_tensor(ctx); t; t = tsr_get_next_tensor(ctx, t)) {
            for (tsr_backend_buffer_t b : bufs) {
                if (t->buffer == b) { t->buffer = nullptr; t->data = nullptr; }
            }
        }
        for (tsr_backend_buffer_t x : bufs) tsr_backend_buffer_free(x);
    };
    for (size_t i = 0; i < ts.size(); i++) {
        tsr_backend_buffer_t b = bufs[chunk_of[i]];
        if (!tsr_backend_tensor_alloc(b, ts[i], (char *) tsr_backend_buffer_get_base(b) + offs[i])) { undo(); return nullptr; }
    }
    for (struct tsr_tensor * t = tsr_get_first_tensor(ctx); t; t = tsr_get_next_tensor(ctx, t)) {
        if (t->view_src && !t->data && t->view_src->data) {
            if (!tsr_backend_view_init(t)) { undo(); return nullptr; }
        }
    }
    if (bufs.size() == 1) return bufs[0];
    tsr_backend_buffer_t mb = tsr_backend_multi_buffer_alloc_buffer(bufs.data(), bufs.size());
    if (!mb) { undo(); return nullptr; }
    mb->usage = TSR_BUFFER_USAGE_WEIGHTS;
    return mb;
}
TSR_API_IMPL tsr_backend_buffer_t tsr_backend_alloc_ctx_tensors_from_buft(struct tsr_context * ctx, tsr_backend_buffer_type_t buft) {
    return tsr_backend_alloc_ctx_tensors_from_buft_size(ctx, buft, 0);
}
TSR_API_IMPL tsr_backend_buffer_t tsr_backend_alloc_ctx_tensors(struct tsr_context * ctx, tsr_backend_t backend) {
    if (!backend) { tsr_set_error("tsr_backend_alloc_ctx_tensors: backend is NULL"); return nullptr; }
    return tsr_backend_alloc_ctx_tensors_from_buft(ctx, tsr_backend_get_default_buffer_type(backend));
}
