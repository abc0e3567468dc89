/*
 * gguf.h - GGUF model files: read, write, load tensor data into backend buffers.
 *
 * Mirrors ggml's gguf.h (replace `gguf_` by `tsr_gguf_`, `GGUF_` by `TSR_GGUF_`).
 * Reads GGUF v3 (and v2, which differs only in being older), writes v3.
 *
 * Reading a model:
 *
 *     struct tsr_context * meta = NULL;
 *     struct tsr_gguf_init_params ip = { true, &meta };     // no_alloc: headers only
 *     struct tsr_gguf_context * g = tsr_gguf_init_from_file("model.gguf", ip);
 *     if (!g) { puts(tsr_last_error()); ... }
 *     tsr_backend_buffer_t w = tsr_backend_alloc_ctx_tensors(meta, backend);
 *     tsr_gguf_load_tensors(g, meta, "model.gguf", NULL, NULL);   // chunked reads
 *
 * Bad input never crashes and never makes tessera allocate more than the file's size
 * justifies: every count and length is checked against the bytes left in the file
 * before anything is allocated, and a parse commits at most 4 x the file's size + 64 MiB
 * of memory (metadata, the context's tensor headers, tensor data), counted the same way
 * in every loading mode: a file is accepted or refused identically by init_from_file and
 * init_from_buffer, with or without a context, no_alloc or not. Only pathological files
 * reach the limit (e.g. over ~100,000 tensors of a few bytes each). Errors name what is wrong and the byte offset where
 * it was found, e.g. "gguf 'x.gguf': byte 24: tensor count 9999999 needs at least ...".
 *
 * Implementation: TSR_IMPLEMENTATION, in one C++17 file, compiles the core and every
 * backend header included in that file, in any include order (README "Using tessera").
 */
#ifndef TESSERA_GGUF_H
#define TESSERA_GGUF_H

#include "tessera.h"
#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_GGUF_MAGIC   "GGUF"
#define TSR_GGUF_VERSION 3
#define TSR_GGUF_DEFAULT_ALIGNMENT 32
#define TSR_GGUF_KEY_GENERAL_ALIGNMENT "general.alignment"

/* Metadata value types (values equal ggml's). */
enum tsr_gguf_type {
    TSR_GGUF_TYPE_UINT8   = 0,
    TSR_GGUF_TYPE_INT8    = 1,
    TSR_GGUF_TYPE_UINT16  = 2,
    TSR_GGUF_TYPE_INT16   = 3,
    TSR_GGUF_TYPE_UINT32  = 4,
    TSR_GGUF_TYPE_INT32   = 5,
    TSR_GGUF_TYPE_FLOAT32 = 6,
    TSR_GGUF_TYPE_BOOL    = 7,
    TSR_GGUF_TYPE_STRING  = 8,
    TSR_GGUF_TYPE_ARRAY   = 9,
    TSR_GGUF_TYPE_UINT64  = 10,
    TSR_GGUF_TYPE_INT64   = 11,
    TSR_GGUF_TYPE_FLOAT64 = 12,
    TSR_GGUF_TYPE_COUNT
};

struct tsr_gguf_context;

struct tsr_gguf_init_params {
    bool no_alloc;               /* true: tensor headers only (data loaded later) */
    struct tsr_context ** ctx;   /* if not NULL: receives a new context holding one tensor
                                    per tensor info (with data read from the file unless
                                    no_alloc); the caller frees it with tsr_free */
};

/* ---- lifetime ----------------------------------------------------------------------- */

/* An empty context for writing (version 3, alignment 32). NULL only when out of memory. */
TSR_API struct tsr_gguf_context * tsr_gguf_init_empty(void);
/* Parse a file's header, metadata and tensor infos. NULL + tsr_last_error on failure. */
TSR_API struct tsr_gguf_context * tsr_gguf_init_from_file(const char * fname, struct tsr_gguf_init_params params);
/* The same from bytes in memory (the data section is read from them if !no_alloc). */
TSR_API struct tsr_gguf_context * tsr_gguf_init_from_buffer(const void * data, size_t size, struct tsr_gguf_init_params params);
TSR_API void tsr_gguf_free(struct tsr_gguf_context * ctx);   /* NULL is fine */

/* ---- queries ------------------------------------------------------------------------ */

TSR_API const char * tsr_gguf_type_name(enum tsr_gguf_type type);   /* "u32", ...; "unknown" */
TSR_API uint32_t     tsr_gguf_get_version(const struct tsr_gguf_context * ctx);
TSR_API size_t       tsr_gguf_get_alignment(const struct tsr_gguf_context * ctx);
/* Byte offset of the data section in the file (valid after reading, or for a writer
 * context the offset the next write_to_file will use). */
TSR_API size_t       tsr_gguf_get_data_offset(const struct tsr_gguf_context * ctx);
/* Bytes of the data section (sum of padded tensor sizes). */
TSR_API size_t       tsr_gguf_get_data_size(const struct tsr_gguf_context * ctx);

/* Keys: count, index of a key, key name, value type, element type of an array value. */
TSR_API int64_t      tsr_gguf_get_n_kv(const struct tsr_gguf_context * ctx);
TSR_API int64_t      tsr_gguf_find_key(const struct tsr_gguf_context * ctx, const char * key); /* -1: absent */
TSR_API const char * tsr_gguf_get_key(const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API enum tsr_gguf_type tsr_gguf_get_kv_type(const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API enum tsr_gguf_type tsr_gguf_get_arr_type(const struct tsr_gguf_context * ctx, int64_t key_id);

/* Typed getters. A wrong key_id or type returns 0 / NULL / false and sets an error
 * (ggml aborts there). */
TSR_API uint8_t      tsr_gguf_get_val_u8  (const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API int8_t       tsr_gguf_get_val_i8  (const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API uint16_t     tsr_gguf_get_val_u16 (const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API int16_t      tsr_gguf_get_val_i16 (const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API uint32_t     tsr_gguf_get_val_u32 (const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API int32_t      tsr_gguf_get_val_i32 (const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API float        tsr_gguf_get_val_f32 (const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API uint64_t     tsr_gguf_get_val_u64 (const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API int64_t      tsr_gguf_get_val_i64 (const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API double       tsr_gguf_get_val_f64 (const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API bool         tsr_gguf_get_val_bool(const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API const char * tsr_gguf_get_val_str (const struct tsr_gguf_context * ctx, int64_t key_id);
/* Pointer to a scalar (non-string, non-array) value. */
TSR_API const void * tsr_gguf_get_val_data(const struct tsr_gguf_context * ctx, int64_t key_id);
/* Arrays: element count; raw elements (not for string arrays); i-th string. */
TSR_API size_t       tsr_gguf_get_arr_n   (const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API const void * tsr_gguf_get_arr_data(const struct tsr_gguf_context * ctx, int64_t key_id);
TSR_API const char * tsr_gguf_get_arr_str (const struct tsr_gguf_context * ctx, int64_t key_id, size_t i);

/* Tensor infos: count and index by name. */
TSR_API int64_t       tsr_gguf_get_n_tensors(const struct tsr_gguf_context * ctx);
TSR_API int64_t       tsr_gguf_find_tensor(const struct tsr_gguf_context * ctx, const char * name); /* -1: absent */
/* Offset of a tensor's data relative to the data section. */
TSR_API size_t        tsr_gguf_get_tensor_offset(const struct tsr_gguf_context * ctx, int64_t tensor_id);
TSR_API const char *  tsr_gguf_get_tensor_name(const struct tsr_gguf_context * ctx, int64_t tensor_id);
TSR_API enum tsr_type tsr_gguf_get_tensor_type(const struct tsr_gguf_context * ctx, int64_t tensor_id);
TSR_API size_t        tsr_gguf_get_tensor_size(const struct tsr_gguf_context * ctx, int64_t tensor_id);
/* n_dims and ne[0..3] of a tensor info (ne padded with 1). */
TSR_API int           tsr_gguf_get_tensor_n_dims(const struct tsr_gguf_context * ctx, int64_t tensor_id);
TSR_API int64_t       tsr_gguf_get_tensor_ne(const struct tsr_gguf_context * ctx, int64_t tensor_id, int dim);

/* ---- writing ------------------------------------------------------------------------ */

/* Setters add a key or replace its value (and type). They return false (+ error) on a
 * NULL/empty key or, for general.alignment, a value that is not a power of two. */
TSR_API bool tsr_gguf_set_val_u8  (struct tsr_gguf_context * ctx, const char * key, uint8_t  val);
TSR_API bool tsr_gguf_set_val_i8  (struct tsr_gguf_context * ctx, const char * key, int8_t   val);
TSR_API bool tsr_gguf_set_val_u16 (struct tsr_gguf_context * ctx, const char * key, uint16_t val);
TSR_API bool tsr_gguf_set_val_i16 (struct tsr_gguf_context * ctx, const char * key, int16_t  val);
TSR_API bool tsr_gguf_set_val_u32 (struct tsr_gguf_context * ctx, const char * key, uint32_t val);
TSR_API bool tsr_gguf_set_val_i32 (struct tsr_gguf_context * ctx, const char * key, int32_t  val);
TSR_API bool tsr_gguf_set_val_f32 (struct tsr_gguf_context * ctx, const char * key, float    val);
TSR_API bool tsr_gguf_set_val_u64 (struct tsr_gguf_context * ctx, const char * key, uint64_t val);
TSR_API bool tsr_gguf_set_val_i64 (struct tsr_gguf_context * ctx, const char * key, int64_t  val);
TSR_API bool tsr_gguf_set_val_f64 (struct tsr_gguf_context * ctx, const char * key, double   val);
TSR_API bool tsr_gguf_set_val_bool(struct tsr_gguf_context * ctx, const char * key, bool     val);
TSR_API bool tsr_gguf_set_val_str (struct tsr_gguf_context * ctx, const char * key, const char * val);
/* An array of n scalars of `type` (not STRING/ARRAY), copied. */
TSR_API bool tsr_gguf_set_arr_data(struct tsr_gguf_context * ctx, const char * key, enum tsr_gguf_type type, const void * data, size_t n);
/* An array of n strings, copied. */
TSR_API bool tsr_gguf_set_arr_str (struct tsr_gguf_context * ctx, const char * key, const char ** data, size_t n);
/* Remove a key; returns its former id or -1. */
TSR_API int64_t tsr_gguf_remove_key(struct tsr_gguf_context * ctx, const char * key);
/* Copy every key/value of src into ctx (replacing same-named keys). */
TSR_API bool tsr_gguf_set_kv(struct tsr_gguf_context * ctx, const struct tsr_gguf_context * src);

/* Add a tensor info for `tensor` (name, type, shape). Its data is read from the tensor
 * at write time (host data, or from its backend buffer), so the tensor must outlive
 * the writes. false + error on a duplicate or empty name, or a non-contiguous tensor. */
TSR_API bool tsr_gguf_add_tensor(struct tsr_gguf_context * ctx, const struct tsr_tensor * tensor);
/* Write data from `data` (host memory, tsr_gguf_get_tensor_size bytes) for a tensor instead. */
TSR_API bool tsr_gguf_set_tensor_data(struct tsr_gguf_context * ctx, const char * name, const void * data);

/* Write header, metadata, tensor infos and (unless only_meta) padded tensor data.
 * The file is written to a temporary name and renamed, so a failure leaves no
 * half-written file at fname. */
TSR_API bool tsr_gguf_write_to_file(const struct tsr_gguf_context * ctx, const char * fname, bool only_meta);
/* Size of header + metadata + tensor infos + padding (= the data offset). */
TSR_API size_t tsr_gguf_get_meta_size(const struct tsr_gguf_context * ctx);
/* Write those tsr_gguf_get_meta_size bytes to `data` (ggml's gguf_get_meta_data). */
TSR_API void   tsr_gguf_get_meta_data(const struct tsr_gguf_context * ctx, void * data);

/* ---- loading tensor data into backend buffers -------------------------------------- */

/* Progress: bytes done of total. Return false to cancel the load. */
typedef bool (*tsr_gguf_progress_cb)(size_t done, size_t total, void * user);

/* Read every tensor of `ctx` that is named in the GGUF file (same name, type, shape)
 * from `path` into its data. Each tensor must already be placed in a buffer (e.g. by
 * tsr_backend_alloc_ctx_tensors). Host buffers are read into in place (POSIX pread of
 * 8 x TSR_GGUF_LOAD_CHUNK bytes at a time: no stdio buffer, no copy); device buffers
 * through one bounded staging chunk (TSR_GGUF_LOAD_CHUNK bytes) and
 * tsr_backend_tensor_set. The file is never read whole into RAM. progress is called
 * after each read. Tensors of ctx that the file lacks are an error. false + error
 * (naming the tensor and offsets). */
#define TSR_GGUF_LOAD_CHUNK (8u << 20)
TSR_API bool tsr_gguf_load_tensors(const struct tsr_gguf_context * gguf, struct tsr_context * ctx, const char * path,
                                   tsr_gguf_progress_cb progress, void * user);

/* Use the tensors in place from a read-only mapping of the file (POSIX mmap): every tensor
 * of `ctx` (same name, type and shape as in the file, not yet placed in a buffer) points at
 * its bytes in the mapping. Nothing is read or copied here: the page cache supplies pages
 * as the tensors are first used, and they count as file-backed, not anonymous, memory.
 * Returns a host buffer of the CPU buffer type (usage WEIGHTS) that owns the mapping:
 * tsr_backend_buffer_free unmaps it. Its tensors stay read-only: tsr_backend_tensor_set,
 * tsr_backend_tensor_memset and tsr_backend_tensor_copy into them fail with an error
 * (tsr_backend_buffer_clear leaves them and sets the error).
 * NULL + error, leaving ctx's tensors unplaced, when the platform cannot map files, when a
 * tensor's data does not start at a multiple of TSR_GGUF_MMAP_ALIGN bytes in the file (the
 * alignment tessera's kernels may assume; GGUF's default alignment is 32), or as
 * tsr_gguf_load_tensors would fail; then load with tsr_gguf_load_tensors instead. */
#define TSR_GGUF_MMAP_ALIGN 32
TSR_API tsr_backend_buffer_t tsr_gguf_map_tensors(const struct tsr_gguf_context * gguf, struct tsr_context * ctx, const char * path);

#ifdef __cplusplus
} /* extern "C" */
#endif

#ifdef __cplusplus
TSR_CXX_BEGIN
/* Owns a tsr_gguf_context; tsr_gguf_free on destruction. */
class gguf {
public:
    explicit gguf(tsr_gguf_context * g = nullptr) : g_(g) {}
    ~gguf() { tsr_gguf_free(g_); }
    gguf(const gguf &) = delete;
    gguf & operator=(const gguf &) = delete;
    gguf(gguf && o) noexcept : g_(o.g_) { o.g_ = nullptr; }
    gguf & operator=(gguf && o) noexcept { if (this != &o) { tsr_gguf_free(g_); g_ = o.g_; o.g_ = nullptr; } return *this; }
    tsr_gguf_context * get() const { return g_; }
    operator tsr_gguf_context *() const { return g_; }
private:
    tsr_gguf_context * g_;
};
TSR_CXX_END /* namespace tsr */
#endif

#define TSR_GGUF_DECLARED  /* every declaration above is in: the implementation may follow */
#endif /* TESSERA_GGUF_H */

/* ---- implementation (outside the include guard: see tessera.h) ---------------------- */
#if defined(TSR_IMPLEMENTATION) && !defined(TSR_GGUF_IMPLEMENTED)
#define TSR_GGUF_IMPLEMENTED
#include "tessera.h"
#include "backend.h"
#include "impl/gguf.inl"
#include "impl/implement_included.h"
#endif
