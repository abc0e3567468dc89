/*
 * core_internal.h - internal layouts and helpers of tessera's core (C++17 only).
 *
 * Included by tessera.h's implementation section and by every other impl file that
 * needs to look inside a context or a graph (backends, allocators). Nothing here is API:
 * helpers are `static inline` so TSR_STATIC builds and two vendored copies never clash.
 */
#ifndef TESSERA_CORE_INTERNAL_H
#define TESSERA_CORE_INTERNAL_H

#ifndef __cplusplus
#error "tessera/impl/core_internal.h is C++17 only"
#endif

#include "../tessera.h"

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <unordered_map>
#include <vector>

/* Definitions of public API functions: `TSR_API_IMPL ret name(...) { ... }`. */
#ifdef TSR_STATIC
#define TSR_API_IMPL [[maybe_unused]] static
#else
#define TSR_API_IMPL
#endif

/* Every internal type, function, constant and template instantiation of the implementation
 * lives between TSR_IMPL_NS_BEGIN and TSR_IMPL_NS_END: in tsr_impl::<ABI version>, so two
 * versions never share an internal name, and under TSR_STATIC inside an anonymous
 * namespace as well, so an object file exports no symbol of tessera at all (two vendored
 * copies, even of different versions, link into one binary without sharing a definition).
 * Code outside names them tsr_impl::x either way. */
#define TSR_IMPL_ABI v0_2
#ifdef TSR_STATIC
#define TSR_IMPL_NS_BEGIN namespace { namespace tsr_impl { inline namespace TSR_IMPL_ABI {
#define TSR_IMPL_NS_END } } }
#else
#define TSR_IMPL_NS_BEGIN namespace tsr_impl { inline namespace TSR_IMPL_ABI {
#define TSR_IMPL_NS_END } }
#endif

TSR_IMPL_NS_BEGIN
/* Containers whose element names a public type (vec<tsr_tensor *>) would instantiate the
 * standard templates under a name that mentions tessera, with external linkage, even under
 * TSR_STATIC. Their allocator is an internal type, which makes every such instantiation
 * internal too. Use vec / hash_map for containers of public types. */
template <typename T> struct allocator {
    using value_type = T;
    allocator() noexcept = default;
    template <typename U> allocator(const allocator<U> &) noexcept {}
    T * allocate(size_t n) {
        if (n > std::numeric_limits<size_t>::max() / sizeof(T)) throw std::bad_alloc();
        return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
    }
    void deallocate(T * p, size_t) noexcept { ::operator delete(p, std::align_val_t(alignof(T))); }
};
template <typename T, typename U> bool operator==(const allocator<T> &, const allocator<U> &) { return true; }
template <typename T, typename U> bool operator!=(const allocator<T> &, const allocator<U> &) { return false; }
template <typename T> using vec = std::vector<T, allocator<T>>;
template <typename K, typename V> using hash_map = std::unordered_map<K, V, std::hash<K>, std::equal_to<K>, allocator<std::pair<const K, V>>>;

/* Public opaque handles (struct tsr_gallocr, struct tsr_gguf_context, ...) are never
 * defined: a type at global scope would give its members and the templates it
 * instantiates external names. The implementation defines an internal type and converts
 * at the API boundary: TSR_IMPL_HANDLE(tsr_gallocr, gallocr) declares
 * internal(tsr_gallocr *) -> gallocr * (const too) and handle(gallocr *) -> tsr_gallocr *. */
#define TSR_IMPL_HANDLE(pub, impl)                                                                  \
    struct impl;                                                                                   \
    [[maybe_unused]] static inline impl * internal(struct pub * h) { return reinterpret_cast<impl *>(h); } \
    [[maybe_unused]] static inline const impl * internal(const struct pub * h) { return reinterpret_cast<const impl *>(h); } \
    [[maybe_unused]] static inline struct pub * handle(impl * p) { return reinterpret_cast<struct pub *>(p); }
TSR_IMPL_NS_END

/* The block allocator of contexts that own their block. TSR_MALLOC(size, align) returns
 * memory aligned to `align` (a power of two, TSR_MEM_ALIGN) or NULL; TSR_FREE(ptr) frees
 * it. Define both or neither. */
#if defined(TSR_MALLOC) != defined(TSR_FREE)
#error "define both TSR_MALLOC and TSR_FREE, or neither"
#endif
#ifndef TSR_MALLOC
#define TSR_MALLOC(size, align) ::operator new((size), std::align_val_t(align), std::nothrow)
#define TSR_FREE(ptr) ::operator delete((ptr), std::align_val_t(TSR_MEM_ALIGN))
#endif

/* The largest extent of one tensor dimension tsr_new_tensor accepts. The GGUF parser refuses
 * larger ones too, so a file parses the same whether or not it creates tensors. */
#define TSR_IMPL_MAX_NE ((int64_t)1 << 56)

/* ---- context arena ------------------------------------------------------------------ */

enum tsr_object_type {
    TSR_OBJECT_TYPE_TENSOR = 0,
    TSR_OBJECT_TYPE_GRAPH  = 1
};

/* Header in front of every object in a context's block (ggml's ggml_object). The header
 * occupies TSR_OBJECT_SIZE bytes; the object's payload follows at `offs`. */
struct tsr_object {
    size_t offs;               /* payload offset from the block start */
    size_t size;               /* payload bytes (a multiple of TSR_MEM_ALIGN) */
    struct tsr_object * next;  /* next object in creation order, or NULL */
    enum tsr_object_type type;
};

#define TSR_OBJECT_SIZE TSR_PAD(sizeof(struct tsr_object), TSR_MEM_ALIGN)
#define TSR_TENSOR_SIZE TSR_PAD(sizeof(struct tsr_tensor), TSR_MEM_ALIGN)

struct tsr_context {
    size_t mem_size;           /* usable bytes of the block (as the caller asked) */
    void * mem_buffer;         /* the block (TSR_MEM_ALIGN aligned), may be NULL when mem_size is 0 */
    bool   mem_buffer_owned;   /* allocated by tsr_init, freed by tsr_free */
    bool   no_alloc;
    int    n_objects;
    struct tsr_object * objects_begin;
    struct tsr_object * objects_end;
};

/* ---- graphs --------------------------------------------------------------------------- */

/* struct tsr_cgraph and struct tsr_graph_visit are defined in tessera.h. */

/* ---- helpers for impl files (defined in the core .inl files) ------------------------- */

/* Create a tensor of `type` with n_dims dims (ne[i] = 1 beyond). With view_src it shares
 * view_src's data at view_offs (view_src is replaced by its root source and offsets add
 * up; the contiguous extent must lie inside the source). Validates everything before it
 * allocates: on failure NULL + error and the context is unchanged. */
static inline struct tsr_tensor * tsr_impl_new_tensor_impl(struct tsr_context * ctx, enum tsr_type type, int n_dims,
                                                           const int64_t * ne, struct tsr_tensor * view_src, size_t view_offs);
/* Same with explicit strides nb (NULL: contiguous); the extent check uses them. */
static inline struct tsr_tensor * tsr_impl_new_tensor_nb(struct tsr_context * ctx, enum tsr_type type, int n_dims,
                                                         const int64_t * ne, const size_t * nb,
                                                         struct tsr_tensor * view_src, size_t view_offs);
/* Set op and sources of a freshly made result. */
static inline void tsr_impl_set_op(struct tsr_tensor * t, enum tsr_op op, struct tsr_tensor * s0 = nullptr,
                                   struct tsr_tensor * s1 = nullptr, struct tsr_tensor * s2 = nullptr,
                                   struct tsr_tensor * s3 = nullptr);
/* Bytes spanned by ne/nb of a type (tsr_nbytes for raw arrays). */
static inline size_t tsr_impl_nbytes(enum tsr_type type, const int64_t * ne, const size_t * nb);
/* Contiguous strides of ne for type. */
static inline void tsr_impl_contiguous_nb(enum tsr_type type, const int64_t * ne, size_t * nb);

/* "f32 [4, 3, 1, 1] 'name'" - for error messages. */
struct tsr_impl_desc { char s[160]; };
static inline tsr_impl_desc tsr_impl_describe(const struct tsr_tensor * t);

/* Visited-set helpers of a graph (for graph.inl and the allocators). */
static inline bool tsr_impl_graph_visited(const struct tsr_cgraph * g, const struct tsr_tensor * t);

/* issue 17 part A: what a user-defined op (MAP_CUSTOM1/2/3, CUSTOM) keeps in op_params, as
 * ggml does: the callback (cast back to the op's signature before the call), n_tasks and
 * userdata. */
TSR_IMPL_NS_BEGIN
struct custom_params {
    void (*fun)(void);
    int n_tasks;
    void * userdata;
};
static_assert(sizeof(custom_params) <= TSR_MAX_OP_PARAMS, "custom op params must fit op_params");
static inline custom_params get_custom_params(const struct tsr_tensor * t) {
    custom_params p;
    std::memcpy(&p, t->op_params, sizeof(p));
    return p;
}
TSR_IMPL_NS_END

#endif /* TESSERA_CORE_INTERNAL_H */
