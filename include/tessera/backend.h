/*
 * backend.h - buffer types, buffers, backends, devices and their registry, host
 * allocator hooks.
 *
 * Mirrors ggml-backend.h. A buffer type knows how to allocate buffers on one kind of
 * memory (host RAM, a Vulkan device, a CUDA device); a buffer is one allocation that
 * tensors are placed into; a backend runs graphs whose tensors live in its buffers; a
 * device is what a backend runs on, found through the registry of every backend compiled
 * into the program. Every handle here is opaque: the tables a backend fills in are in
 * tessera/backend_impl.h, for backend writers only (ggml-backend-impl.h).
 *
 * Implementation: TSR_IMPLEMENTATION, in one C++17 file, compiles the core and every
 * backend header included in that file, in any include order (README "Using tessera").
 * The CPU (host) buffer type lives here because every backend and the allocators need it; the CPU backend
 * that computes graphs is in backends/cpu/tessera-cpu.h.
 */
#ifndef TESSERA_BACKEND_H
#define TESSERA_BACKEND_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsr_backend_buffer_type * tsr_backend_buffer_type_t;
typedef struct tsr_backend_buffer      * tsr_backend_buffer_t;
typedef struct tsr_backend             * tsr_backend_t;
typedef struct tsr_backend_reg         * tsr_backend_reg_t;
typedef struct tsr_backend_device      * tsr_backend_dev_t;
typedef struct tsr_backend_event       * tsr_backend_event_t;

/* What a buffer holds: weights (persistent) and compute (activations, planned by
 * gallocr) never share one. */
enum tsr_backend_buffer_usage {
    TSR_BUFFER_USAGE_ANY     = 0,
    TSR_BUFFER_USAGE_WEIGHTS = 1,
    TSR_BUFFER_USAGE_COMPUTE = 2
};

/* ---- host allocator hooks --------------------------------------------------------- */

/* Where CPU buffers and the CPU workspace get their memory: replace it for DMA, NUMA
 * or tracing. alloc returns NULL on failure; align is a power of two. */
struct tsr_host_allocator {
    void * (*alloc)(size_t size, size_t align, void * user);
    void   (*free)(void * ptr, void * user);
    void * user;
};

/* The process-wide default used by tsr_backend_cpu_buffer_type() (operator new, aligned by hand,
 * unless replaced). NULL restores the built-in one. Not thread-safe against
 * concurrent allocations: set it at start-up.
 * The built-in one gives blocks of TSR_HUGE_PAGE_MIN bytes and more (weights) transparent
 * huge pages on Linux: 2 MiB aligned, padded to whole 2 MiB, advised MADV_HUGEPAGE. A
 * mat-vec reads its weights from DRAM 8-15 % faster so (README, "CPU kernel paths"). The
 * environment variable TSR_HUGE_PAGES=0 turns it off at run time. */
#ifndef TSR_HUGE_PAGE_MIN
#define TSR_HUGE_PAGE_MIN (16u << 20)  /* bytes; 0: never (define in the implementation TU) */
#endif
TSR_API void                              tsr_set_host_allocator(const struct tsr_host_allocator * alloc);
TSR_API const struct tsr_host_allocator * tsr_get_host_allocator(void);

/* ---- buffer types ------------------------------------------------------------------ */

/* Buffer type properties; alloc_buffer makes a buffer of size bytes. */
TSR_API const char *         tsr_backend_buft_name(tsr_backend_buffer_type_t buft);
TSR_API tsr_backend_buffer_t tsr_backend_buft_alloc_buffer(tsr_backend_buffer_type_t buft, size_t size); /* NULL + error on failure */
TSR_API size_t               tsr_backend_buft_get_alignment(tsr_backend_buffer_type_t buft);
TSR_API size_t               tsr_backend_buft_get_max_size(tsr_backend_buffer_type_t buft);
TSR_API size_t               tsr_backend_buft_get_alloc_size(tsr_backend_buffer_type_t buft, const struct tsr_tensor * tensor);
TSR_API bool                 tsr_backend_buft_is_host(tsr_backend_buffer_type_t buft);

/* ---- buffers ----------------------------------------------------------------------- */

/* Buffer properties and whole-buffer operations (NULL buffer: 0 / NULL / no-op). */
TSR_API const char *                  tsr_backend_buffer_name(tsr_backend_buffer_t buffer);
TSR_API void                          tsr_backend_buffer_free(tsr_backend_buffer_t buffer); /* NULL is fine */
TSR_API void *                        tsr_backend_buffer_get_base(tsr_backend_buffer_t buffer);
TSR_API size_t                        tsr_backend_buffer_get_size(tsr_backend_buffer_t buffer);
TSR_API bool                          tsr_backend_buffer_init_tensor(tsr_backend_buffer_t buffer, struct tsr_tensor * tensor);
TSR_API size_t                        tsr_backend_buffer_get_alignment(tsr_backend_buffer_t buffer);
TSR_API size_t                        tsr_backend_buffer_get_max_size(tsr_backend_buffer_t buffer);
TSR_API size_t                        tsr_backend_buffer_get_alloc_size(tsr_backend_buffer_t buffer, const struct tsr_tensor * tensor);
TSR_API void                          tsr_backend_buffer_clear(tsr_backend_buffer_t buffer, uint8_t value);
TSR_API bool                          tsr_backend_buffer_is_host(tsr_backend_buffer_t buffer);
TSR_API void                          tsr_backend_buffer_set_usage(tsr_backend_buffer_t buffer, enum tsr_backend_buffer_usage usage);
TSR_API enum tsr_backend_buffer_usage tsr_backend_buffer_get_usage(tsr_backend_buffer_t buffer);
TSR_API tsr_backend_buffer_type_t     tsr_backend_buffer_get_type(tsr_backend_buffer_t buffer);

/* Place a tensor at base + offset of a buffer (what tallocr/gallocr do). */
TSR_API bool tsr_backend_tensor_alloc(tsr_backend_buffer_t buffer, struct tsr_tensor * tensor, void * addr);
/* Give a view its data from its view_src (which must already be placed). */
TSR_API bool tsr_backend_view_init(struct tsr_tensor * tensor);

/* Copy bytes [offset, offset+size) of a tensor's data from/to host memory. The tensor
 * must be placed in a buffer; offset+size beyond tsr_nbytes is an error (false). */
TSR_API bool tsr_backend_tensor_set(struct tsr_tensor * tensor, const void * data, size_t offset, size_t size);
TSR_API bool tsr_backend_tensor_get(const struct tsr_tensor * tensor, void * data, size_t offset, size_t size);
TSR_API bool tsr_backend_tensor_memset(struct tsr_tensor * tensor, uint8_t value, size_t offset, size_t size);
/* Copy src's data into dst (same nbytes), across buffers of different backends too. Two
 * devices that cannot copy between themselves go through host memory: a temporary block
 * here, or the caller's `staging` (staging_size bytes, any size > 0: the copy goes in
 * pieces) with tsr_backend_tensor_copy_staged, which allocates nothing. */
TSR_API bool tsr_backend_tensor_copy(struct tsr_tensor * src, struct tsr_tensor * dst);
TSR_API bool tsr_backend_tensor_copy_staged(struct tsr_tensor * src, struct tsr_tensor * dst, void * staging, size_t staging_size);

/* ---- backends ---------------------------------------------------------------------- */

/* Backend name, free, its default buffer type, a buffer of that type, its alignment / max size. */
TSR_API const char *              tsr_backend_name(tsr_backend_t backend);
TSR_API void                      tsr_backend_free(tsr_backend_t backend); /* NULL is fine */
TSR_API tsr_backend_buffer_type_t tsr_backend_get_default_buffer_type(tsr_backend_t backend);
TSR_API tsr_backend_buffer_t      tsr_backend_alloc_buffer(tsr_backend_t backend, size_t size);
TSR_API size_t                    tsr_backend_get_alignment(tsr_backend_t backend);
TSR_API size_t                    tsr_backend_get_max_size(tsr_backend_t backend);

/* Asynchronous on backends that queue work (finished by synchronize); immediate elsewhere.
 * Host memory passed to an async call must stay untouched until the backend synchronizes. */
TSR_API bool tsr_backend_tensor_set_async(tsr_backend_t backend, struct tsr_tensor * tensor, const void * data, size_t offset, size_t size);
TSR_API bool tsr_backend_tensor_get_async(tsr_backend_t backend, const struct tsr_tensor * tensor, void * data, size_t offset, size_t size);
/* Copy src (written by backend_src's work) into dst (read by backend_dst's), ordered
 * after the work both have queued. Queued when backend_dst can (Vulkan, one device);
 * otherwise both backends are synchronized and the copy is made at once. */
TSR_API bool tsr_backend_tensor_copy_async(tsr_backend_t backend_src, tsr_backend_t backend_dst, struct tsr_tensor * src, struct tsr_tensor * dst);
TSR_API void tsr_backend_synchronize(tsr_backend_t backend);

/* Size the backend's per-op workspace (and any other per-graph state) for gf ahead of
 * time, so graph_compute on it or on a smaller graph allocates nothing. Optional: a
 * compute without reserve grows the workspace on first use. */
TSR_API bool                tsr_backend_graph_reserve(tsr_backend_t backend, struct tsr_cgraph * cgraph);
TSR_API enum tsr_status     tsr_backend_graph_compute(tsr_backend_t backend, struct tsr_cgraph * cgraph);
/* Queue the graph and return; its results are ready after tsr_backend_synchronize (or an
 * event recorded after it). A backend without async work computes it before returning. */
TSR_API enum tsr_status     tsr_backend_graph_compute_async(tsr_backend_t backend, struct tsr_cgraph * cgraph);
TSR_API bool                tsr_backend_supports_op(tsr_backend_t backend, const struct tsr_tensor * op);
TSR_API bool                tsr_backend_supports_buft(tsr_backend_t backend, tsr_backend_buffer_type_t buft);
/* Bytes of workspace the last reserve/compute sized (0 if none). */
TSR_API size_t              tsr_backend_get_workspace_size(tsr_backend_t backend);

/* ---- devices and the registry (ggml's device layer) -------------------------------- */

/* CPU: host memory (the CPU backend, and Vulkan implementations that run on the CPU,
 * such as Mesa's lavapipe); GPU: a GPU with its own memory or an integrated one; ACCEL:
 * an accelerator that complements the CPU (none ships today). */
enum tsr_backend_dev_type {
    TSR_BACKEND_DEVICE_TYPE_CPU   = 0,
    TSR_BACKEND_DEVICE_TYPE_GPU   = 1,
    TSR_BACKEND_DEVICE_TYPE_ACCEL = 2
};

/* What a device's backend can do besides computing graphs. */
struct tsr_backend_dev_caps {
    bool async;                 /* graph_compute_async and the async copies queue work */
    bool host_buffer;           /* it has a pinned host buffer type (host_buffer_type) */
    bool buffer_from_host_ptr;  /* it can wrap caller memory (tsr_backend_dev_buffer_from_host_ptr) */
    bool events;                /* it has events (tsr_backend_event_new) */
};

struct tsr_backend_dev_props {
    const char *              name;          /* "CPU", "Vulkan0", "CUDA1" */
    const char *              description;   /* the hardware: "AMD EPYC 7B13", "llvmpipe (LLVM 15.0.6, 256 bits) [cpu]" */
    size_t                    memory_free;   /* bytes */
    size_t                    memory_total;  /* bytes */
    enum tsr_backend_dev_type type;
    const char *              device_id;     /* a stable id (PCI bus id) when known, else NULL */
    struct tsr_backend_dev_caps caps;
};

/* A device's properties. Every call takes NULL (name "(null)", 0 memory, false, NULL). */
TSR_API const char *              tsr_backend_dev_name(tsr_backend_dev_t device);
TSR_API const char *              tsr_backend_dev_description(tsr_backend_dev_t device);
TSR_API void                      tsr_backend_dev_memory(tsr_backend_dev_t device, size_t * free, size_t * total);
TSR_API enum tsr_backend_dev_type tsr_backend_dev_type(tsr_backend_dev_t device);
TSR_API void                      tsr_backend_dev_get_props(tsr_backend_dev_t device, struct tsr_backend_dev_props * props);
TSR_API tsr_backend_reg_t         tsr_backend_dev_backend_reg(tsr_backend_dev_t device);
/* A new backend on the device. params: NULL or "" for the defaults; the CPU device also
 * takes "n_threads=N", a CUDA device "graph_capture=0|1". NULL + an error naming the device
 * (and a bad params string). */
TSR_API tsr_backend_t             tsr_backend_dev_init(tsr_backend_dev_t device, const char * params);
/* The device's own buffer type (device memory), and its pinned host buffer type (NULL
 * when it has none). */
TSR_API tsr_backend_buffer_type_t tsr_backend_dev_buffer_type(tsr_backend_dev_t device);
TSR_API tsr_backend_buffer_type_t tsr_backend_dev_host_buffer_type(tsr_backend_dev_t device);
/* Whether the device's backends run op (answered without creating a backend), use a
 * buffer type, and want an op whose weights live in host memory brought over to run
 * there (worth it for large batches only). */
TSR_API bool                      tsr_backend_dev_supports_op(tsr_backend_dev_t device, const struct tsr_tensor * op);
TSR_API bool                      tsr_backend_dev_supports_buft(tsr_backend_dev_t device, tsr_backend_buffer_type_t buft);
TSR_API bool                      tsr_backend_dev_offload_op(tsr_backend_dev_t device, const struct tsr_tensor * op);
/* A buffer over size bytes of caller memory at ptr that the device's backends compute on
 * in place, without a copy (caps.buffer_from_host_ptr). The memory must outlive the
 * buffer and is never freed by tessera; max_tensor_size: the largest tensor to be placed
 * in it (0: size). NULL + an error naming the device and the value it refuses (a device
 * without it, a misaligned ptr or size). */
TSR_API tsr_backend_buffer_t      tsr_backend_dev_buffer_from_host_ptr(tsr_backend_dev_t device, void * ptr, size_t size, size_t max_tensor_size);

/* ---- events (ggml's names) ----------------------------------------------------------- */

/* An event marks the point a backend's queued work had reached when it was recorded.
 * event_new: NULL + error for a device without events (caps.events; the CPU has none:
 * its work is done when a call returns). record: the backend must run on the event's
 * device (false + error otherwise). synchronize: the host waits until the recorded work is
 * done (at once for an event never recorded). wait: the backend's later work waits for
 * the event (the host waits where the backend cannot). */
TSR_API tsr_backend_event_t tsr_backend_event_new(tsr_backend_dev_t device);
TSR_API void                tsr_backend_event_free(tsr_backend_event_t event);  /* NULL is fine */
TSR_API bool                tsr_backend_event_record(tsr_backend_event_t event, tsr_backend_t backend);
TSR_API void                tsr_backend_event_synchronize(tsr_backend_event_t event);
TSR_API bool                tsr_backend_event_wait(tsr_backend_t backend, tsr_backend_event_t event);

/* One backend kind ("CPU", "Vulkan", "CUDA") and its devices. */
TSR_API const char *              tsr_backend_reg_name(tsr_backend_reg_t reg);
TSR_API size_t                    tsr_backend_reg_dev_count(tsr_backend_reg_t reg);
TSR_API tsr_backend_dev_t         tsr_backend_reg_dev_get(tsr_backend_reg_t reg, size_t index); /* NULL + error past the end */

/* The registry: every backend compiled into the program registers itself (the CPU and
 * Vulkan parts of the implementation file, the CUDA library), CPU first, the others in
 * the order they registered. Query it from main() or later, not from a static
 * initializer of another file (its backends register while the implementation file's
 * statics are initialized). Names compare without case. */
TSR_API size_t            tsr_backend_reg_count(void);
TSR_API tsr_backend_reg_t tsr_backend_reg_get(size_t index);              /* NULL + error past the end */
TSR_API tsr_backend_reg_t tsr_backend_reg_by_name(const char * name);     /* NULL + error naming it */
TSR_API size_t            tsr_backend_dev_count(void);                    /* devices of every backend */
TSR_API tsr_backend_dev_t tsr_backend_dev_get(size_t index);              /* NULL + error past the end */
TSR_API tsr_backend_dev_t tsr_backend_dev_by_name(const char * name);     /* "CPU", "Vulkan0": NULL + error naming it */
TSR_API tsr_backend_dev_t tsr_backend_dev_by_type(enum tsr_backend_dev_type type); /* the first; NULL + error */
/* A backend on the device of that name, or on the first device of that type. A backend
 * kind's name ("vulkan") picks its first device (for Vulkan the default one, see
 * tessera-vulkan.h). NULL + error naming what was asked for. */
TSR_API tsr_backend_t     tsr_backend_init_by_name(const char * name, const char * params);
TSR_API tsr_backend_t     tsr_backend_init_by_type(enum tsr_backend_dev_type type, const char * params);
/* A GPU device's backend if there is one, else the first CPU device's. */
TSR_API tsr_backend_t     tsr_backend_init_best(void);
/* The device a backend runs on (NULL for NULL or a backend made outside the registry's backends). */
TSR_API tsr_backend_dev_t tsr_backend_get_device(tsr_backend_t backend);

/* ---- CPU (host) buffers ------------------------------------------------------------ */

/* 64-byte aligned host memory from the current host allocator. */
TSR_API tsr_backend_buffer_type_t tsr_backend_cpu_buffer_type(void);
/* A host buffer type whose memory comes from `alloc` (copied; alloc->user must outlive
 * it). Free it with tsr_backend_cpu_buffer_type_free once its buffers are freed. */
TSR_API tsr_backend_buffer_type_t tsr_backend_cpu_buffer_type_with_allocator(const struct tsr_host_allocator * alloc);
TSR_API void                      tsr_backend_cpu_buffer_type_free(tsr_backend_buffer_type_t buft);
/* Wrap caller memory (never freed by tessera); ptr must be 64-byte aligned. */
TSR_API tsr_backend_buffer_t      tsr_backend_cpu_buffer_from_ptr(void * ptr, size_t size);

/* Shipped host allocators. A pool keeps freed blocks and hands back a cached block that
 * is large enough but at most `max_waste_ratio` times the request (e.g. 1.5); cached
 * bytes above `budget` are trimmed (oldest first). thread_safe picks a locked variant. */
struct tsr_pool_allocator;
TSR_API struct tsr_pool_allocator *       tsr_pool_allocator_new(const struct tsr_host_allocator * upstream /* NULL: default */,
                                                                 size_t budget, double max_waste_ratio, bool thread_safe);
TSR_API void                              tsr_pool_allocator_free(struct tsr_pool_allocator * pool); /* frees cached blocks */
TSR_API const struct tsr_host_allocator * tsr_pool_allocator_host(struct tsr_pool_allocator * pool);
TSR_API void                              tsr_pool_allocator_trim(struct tsr_pool_allocator * pool, size_t budget);
struct tsr_pool_allocator_stats { size_t cached_bytes, cached_blocks, hits, misses, upstream_allocs, upstream_frees; };
TSR_API struct tsr_pool_allocator_stats   tsr_pool_allocator_get_stats(struct tsr_pool_allocator * pool);

/* A tracing allocator: forwards to upstream and counts (thread-safe counters). */
struct tsr_tracing_allocator;
struct tsr_tracing_stats { size_t current_bytes, peak_bytes, n_allocs, n_frees, total_bytes; };
TSR_API struct tsr_tracing_allocator *    tsr_tracing_allocator_new(const struct tsr_host_allocator * upstream /* NULL: default */);
TSR_API void                              tsr_tracing_allocator_free(struct tsr_tracing_allocator * tr);
TSR_API const struct tsr_host_allocator * tsr_tracing_allocator_host(struct tsr_tracing_allocator * tr);
TSR_API struct tsr_tracing_stats          tsr_tracing_allocator_get_stats(struct tsr_tracing_allocator * tr);
TSR_API void                              tsr_tracing_allocator_reset_peak(struct tsr_tracing_allocator * tr);

/* ---- whole contexts into buffers --------------------------------------------------- */

/* Every tensor of a no_alloc context without data into WEIGHTS buffer(s) of buft, split
 * into several buffers when larger than buft's max size (or max_size when given). The
 * returned buffer owns the pieces (a multi-buffer). NULL + error on failure, with no
 * tensor left half-placed. */
TSR_API tsr_backend_buffer_t tsr_backend_alloc_ctx_tensors_from_buft(struct tsr_context * ctx, tsr_backend_buffer_type_t buft);
TSR_API tsr_backend_buffer_t tsr_backend_alloc_ctx_tensors_from_buft_size(struct tsr_context * ctx, tsr_backend_buffer_type_t buft, size_t max_size);
TSR_API tsr_backend_buffer_t tsr_backend_alloc_ctx_tensors(struct tsr_context * ctx, tsr_backend_t backend);
/* A multi-buffer wrapping several buffers (owned); tsr_backend_buffer_free frees them. */
TSR_API tsr_backend_buffer_t tsr_backend_multi_buffer_alloc_buffer(tsr_backend_buffer_t * buffers, size_t n_buffers);
TSR_API bool                 tsr_backend_buffer_is_multi_buffer(tsr_backend_buffer_t buffer);

#ifdef __cplusplus
} /* extern "C" */
#endif

#ifdef __cplusplus
TSR_CXX_BEGIN
/* Owns a backend buffer; tsr_backend_buffer_free on destruction. */
class backend_buffer {
public:
    explicit backend_buffer(tsr_backend_buffer_t b = nullptr) : b_(b) {}
    ~backend_buffer() { tsr_backend_buffer_free(b_); }
    backend_buffer(const backend_buffer &) = delete;
    backend_buffer & operator=(const backend_buffer &) = delete;
    backend_buffer(backend_buffer && o) noexcept : b_(o.b_) { o.b_ = nullptr; }
    backend_buffer & operator=(backend_buffer && o) noexcept { if (this != &o) { tsr_backend_buffer_free(b_); b_ = o.b_; o.b_ = nullptr; } return *this; }
    tsr_backend_buffer_t get() const { return b_; }
    operator tsr_backend_buffer_t() const { return b_; }
private:
    tsr_backend_buffer_t b_;
};
/* Owns a backend; tsr_backend_free on destruction. */
class backend {
public:
    explicit backend(tsr_backend_t b = nullptr) : b_(b) {}
    ~backend() { tsr_backend_free(b_); }
    backend(const backend &) = delete;
    backend & operator=(const backend &) = delete;
    backend(backend && o) noexcept : b_(o.b_) { o.b_ = nullptr; }
    tsr_backend_t get() const { return b_; }
    operator tsr_backend_t() const { return b_; }
private:
    tsr_backend_t b_;
};
TSR_CXX_END /* namespace tsr */
#endif

#define TSR_BACKEND_DECLARED  /* every declaration above is in: the implementation may follow */
#endif /* TESSERA_BACKEND_H */

/* ---- implementation (outside the include guard: see tessera.h) ---------------------- */
#if defined(TSR_IMPLEMENTATION) && !defined(TSR_BACKEND_IMPLEMENTED)
#define TSR_BACKEND_IMPLEMENTED
#include "tessera.h"
#include "backend_impl.h"
#include "impl/backend.inl"
#include "impl/host_allocators.inl"
#include "impl/registry.inl"
#include "impl/implement_included.h"
#endif
