/* tessera single-header amalgamation (core + cpu), generated from scripts/sources.txt
 * by scripts/amalgamate.py: do not edit. */
/* ---- include/tessera/tessera.h ---- */
/*
 * tessera.h - tensors, the context arena, ops (graph construction only), graphs.
 *
 * Header-only, STB style. In exactly one C++17 translation unit write
 *
 *     #define TSR_IMPLEMENTATION
 *     #include "tessera/tessera.h"      (+ backend.h, alloc.h, gguf.h, backend headers)
 *
 * Every other file (C99 or C++) includes the headers without the macro.
 * The rule, the same for every header: TSR_IMPLEMENTATION compiles the core and every
 * backend header included in that translation unit, in any include order, before or
 * after other includes of the same headers. Each header's declarations sit under its
 * include guard; its implementation block sits outside it (guarded by its own
 * TSR_<PART>_IMPLEMENTED) and includes what it needs itself. A part whose header came
 * only before the macro is compiled by the next tessera header's implementation block
 * (impl/implement_included.h). CUDA's kernels need nvcc: see tessera-cuda.h.
 *
 * Config macros (define before including, in every file that includes the header):
 *   TSR_STATIC       make every function `static`, so two engines that each vendor a
 *                    copy of tessera link into one binary without clashing.
 *   TSR_MALLOC(size, align) / TSR_FREE(ptr)   (define both, in the implementation TU)
 *                    override the block allocator the context arena uses when it owns
 *                    its block; TSR_MALLOC must return `align`-aligned memory or NULL
 *                    (default: aligned operator new / delete, nothrow).
 *
 * Names and semantics mirror ggml: replace `ggml_` by `tsr_` and `GGML_` by `TSR_`.
 * Where tessera adds something (a status, an error message) it adds it without
 * changing the ggml-shaped call: every call that can fail returns NULL/false and
 * leaves the reason in tsr_last_error().
 */
#ifndef TESSERA_H
#define TESSERA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef TSR_STATIC
#define TSR_API static
#else
#define TSR_API extern
#endif

/* The C++ wrappers (namespace tsr) are inline classes: under TSR_STATIC they go into an
 * anonymous namespace too, so two vendored copies never share their definitions. */
#ifdef TSR_STATIC
#define TSR_CXX_BEGIN namespace { namespace tsr {
#define TSR_CXX_END } }
#else
#define TSR_CXX_BEGIN namespace tsr {
#define TSR_CXX_END }
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct tsr_tensor;
struct tsr_context;
struct tsr_cgraph;

/* ---- limits and alignment ------------------------------------------------------ */

#define TSR_MAX_DIMS      4
#define TSR_MAX_SRC       10
#define TSR_MAX_OP_PARAMS 64   /* bytes */
#define TSR_MAX_NAME      64
#define TSR_DEFAULT_GRAPH_SIZE 2048

/* Every object and every tensor's data in a context is aligned to TSR_MEM_ALIGN.
 * A caller-provided mem_buffer must be aligned to it too (tsr_init fails otherwise). */
#define TSR_MEM_ALIGN 64

#define TSR_PAD(x, n) (((x) + (n) - 1) / (n) * (n))

/* ---- types ----------------------------------------------------------------------- */

/* Values equal ggml's, so GGUF files name types the same way. */
enum tsr_type {
    TSR_TYPE_F32  = 0,
    TSR_TYPE_F16  = 1,
    TSR_TYPE_Q4_0 = 2,
    TSR_TYPE_Q4_1 = 3,
    TSR_TYPE_Q5_0 = 6,
    TSR_TYPE_Q5_1 = 7,
    TSR_TYPE_Q8_0 = 8,
    TSR_TYPE_Q2_K = 10,
    TSR_TYPE_Q3_K = 11,
    TSR_TYPE_Q4_K = 12,
    TSR_TYPE_Q5_K = 13,
    TSR_TYPE_Q6_K = 14,
    TSR_TYPE_Q8_K = 15,   /* the activation type of K-quant dot products */
    TSR_TYPE_IQ4_NL = 20,
    TSR_TYPE_I32  = 26,
    TSR_TYPE_BF16 = 30,
    TSR_TYPE_COUNT = 39
};

typedef uint16_t tsr_fp16_t;
typedef struct { uint16_t bits; } tsr_bf16_t;

/* 32-element quantized blocks, ggml's layouts: x[i] = d * q[i] (Q8_0),
 * x[i] = d * (nibble - 8) (Q4_0; element j in the low nibbles of qs[j], element
 * j+16 in the high nibbles). */
#define TSR_QK8_0 32
#define TSR_QK4_0 32
typedef struct { tsr_fp16_t d; int8_t  qs[TSR_QK8_0];     } tsr_block_q8_0;
typedef struct { tsr_fp16_t d; uint8_t qs[TSR_QK4_0 / 2]; } tsr_block_q4_0;

/* The other 32-element blocks (ggml's layouts). Element j of a block sits in the low
 * nibble of qs[j] for j < 16 and in the high nibble of qs[j-16] otherwise; Q5's fifth bit
 * of element j is bit j of qh (little-endian). Q4_1/Q5_1: x = d * q + m. Q5_0:
 * x = d * (q - 16). IQ4_NL: x = d * v[q], v = {-127, -104, -83, -65, -49, -35, -22, -10,
 * 1, 13, 25, 38, 53, 69, 89, 113} (ggml's fixed non-linear table). */
#define TSR_QK4_1  32
#define TSR_QK5_0  32
#define TSR_QK5_1  32
#define TSR_QK4_NL 32
typedef struct { tsr_fp16_t d; tsr_fp16_t m; uint8_t qs[TSR_QK4_1 / 2]; }                 tsr_block_q4_1;
typedef struct { tsr_fp16_t d; uint8_t qh[4]; uint8_t qs[TSR_QK5_0 / 2]; }                tsr_block_q5_0;
typedef struct { tsr_fp16_t d; tsr_fp16_t m; uint8_t qh[4]; uint8_t qs[TSR_QK5_1 / 2]; }  tsr_block_q5_1;
typedef struct { tsr_fp16_t d; uint8_t qs[TSR_QK4_NL / 2]; }                              tsr_block_iq4_nl;

/* K-quants: super-blocks of TSR_QK_K elements made of 16 or 32-element sub-blocks, each
 * with its own quantized scale (and min), scaled again by the fp16 d (and dmin).
 * ggml's dequantize_row_q*_K define the formats; Q4_K/Q5_K pack eight 6-bit scales and
 * eight 6-bit mins into TSR_K_SCALE_SIZE bytes. Q8_K is float d, 256 int8, and the sums
 * of each 16 of them (bsums), what the dot products of the others need. */
#define TSR_QK_K 256
#define TSR_K_SCALE_SIZE 12
typedef struct { uint8_t scales[TSR_QK_K / 16]; uint8_t qs[TSR_QK_K / 4]; tsr_fp16_t d; tsr_fp16_t dmin; } tsr_block_q2_K;
typedef struct { uint8_t hmask[TSR_QK_K / 8]; uint8_t qs[TSR_QK_K / 4]; uint8_t scales[12]; tsr_fp16_t d; } tsr_block_q3_K;
typedef struct { tsr_fp16_t d; tsr_fp16_t dmin; uint8_t scales[TSR_K_SCALE_SIZE]; uint8_t qs[TSR_QK_K / 2]; } tsr_block_q4_K;
typedef struct {
    tsr_fp16_t d; tsr_fp16_t dmin; uint8_t scales[TSR_K_SCALE_SIZE]; uint8_t qh[TSR_QK_K / 8]; uint8_t qs[TSR_QK_K / 2];
} tsr_block_q5_K;
typedef struct { uint8_t ql[TSR_QK_K / 2]; uint8_t qh[TSR_QK_K / 4]; int8_t scales[TSR_QK_K / 16]; tsr_fp16_t d; } tsr_block_q6_K;
typedef struct { float d; int8_t qs[TSR_QK_K]; int16_t bsums[TSR_QK_K / 16]; } tsr_block_q8_K;

/* Traits. Unknown types: size 0, name "unknown"; tsr_is_valid_type says which exist. */
TSR_API bool         tsr_is_valid_type(enum tsr_type type);
TSR_API size_t       tsr_type_size(enum tsr_type type);   /* bytes per block */
TSR_API int64_t      tsr_blck_size(enum tsr_type type);   /* elements per block */
TSR_API size_t       tsr_row_size(enum tsr_type type, int64_t ne); /* bytes of ne elements */
TSR_API const char * tsr_type_name(enum tsr_type type);
TSR_API bool         tsr_is_quantized(enum tsr_type type);

/* Scalar and row conversions. fp16/bf16 round to nearest even; bf16 keeps NaN quiet. */
TSR_API float       tsr_fp16_to_fp32(tsr_fp16_t x);
TSR_API tsr_fp16_t  tsr_fp32_to_fp16(float x);
TSR_API float       tsr_bf16_to_fp32(tsr_bf16_t x);
TSR_API tsr_bf16_t  tsr_fp32_to_bf16(float x);
TSR_API void tsr_fp16_to_fp32_row(const tsr_fp16_t * x, float * y, int64_t n);
TSR_API void tsr_fp32_to_fp16_row(const float * x, tsr_fp16_t * y, int64_t n);
TSR_API void tsr_bf16_to_fp32_row(const tsr_bf16_t * x, float * y, int64_t n);
TSR_API void tsr_fp32_to_bf16_row(const float * x, tsr_bf16_t * y, int64_t n);

/* Convert n elements of any type to/from F32. n must be a multiple of the block size.
 * Returns false (with tsr_last_error) for an unknown type or a ragged n. */
TSR_API bool tsr_to_float_row(enum tsr_type type, const void * src, float * dst, int64_t n);
TSR_API bool tsr_from_float_row(enum tsr_type type, const float * src, void * dst, int64_t n);

/* ggml's quantize_chunk: rows [start/n_per_row, +nrows) of src into dst (dst points at
 * the start of the whole tensor). Returns bytes written, 0 on error. imatrix is ignored. */
TSR_API size_t tsr_quantize_chunk(enum tsr_type type, const float * src, void * dst,
                                  int64_t start, int64_t nrows, int64_t n_per_row,
                                  const float * imatrix);

/* ---- errors ----------------------------------------------------------------------- */

enum tsr_status {
    TSR_STATUS_ALLOC_FAILED = -2,
    TSR_STATUS_FAILED       = -1,
    TSR_STATUS_SUCCESS      =  0,
    TSR_STATUS_ABORTED      =  1
};
/* Name of a status ("SUCCESS", "FAILED", ...; "UNKNOWN" otherwise); never NULL. */
TSR_API const char * tsr_status_to_string(enum tsr_status status);

/* Message of the last failed call on this thread ("" when none). Never NULL. */
TSR_API const char * tsr_last_error(void);
TSR_API void         tsr_clear_error(void);

/* Called (on the failing thread) with every error message as it is set: log it, or
 * abort() for ggml's abort-on-misuse behaviour. NULL removes the callback. */
typedef void (*tsr_error_callback)(const char * msg, void * user_data);
TSR_API void tsr_set_error_callback(tsr_error_callback cb, void * user_data);

/* For backends and extensions: set the thread's error (printf-style) and call the
 * callback. Always returns false so `return tsr_set_error(...)` reads naturally. */
TSR_API bool tsr_set_error(const char * fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* ---- ops ------------------------------------------------------------------------ */

enum tsr_op {
    TSR_OP_NONE = 0,

    TSR_OP_DUP,
    TSR_OP_ADD,
    TSR_OP_SUB,
    TSR_OP_MUL,
    TSR_OP_DIV,
    TSR_OP_SQR,
    TSR_OP_SQRT,
    TSR_OP_LOG,
    TSR_OP_SUM,
    TSR_OP_SUM_ROWS,
    TSR_OP_MEAN,
    TSR_OP_ARGMAX,
    TSR_OP_REPEAT,
    TSR_OP_CONCAT,
    TSR_OP_NORM,
    TSR_OP_RMS_NORM,
    TSR_OP_GROUP_NORM,

    TSR_OP_MUL_MAT,
    TSR_OP_OUT_PROD,

    TSR_OP_SCALE,
    TSR_OP_CPY,
    TSR_OP_CONT,
    TSR_OP_RESHAPE,
    TSR_OP_VIEW,
    TSR_OP_PERMUTE,
    TSR_OP_TRANSPOSE,
    TSR_OP_GET_ROWS,
    TSR_OP_SET_ROWS,
    TSR_OP_DIAG_MASK_INF,
    TSR_OP_SOFT_MAX,
    TSR_OP_ROPE,
    TSR_OP_CLAMP,
    TSR_OP_IM2COL,
    TSR_OP_CONV_2D,
    TSR_OP_POOL_2D,
    TSR_OP_UPSCALE,
    TSR_OP_PAD,
    TSR_OP_ARGSORT,
    TSR_OP_FLASH_ATTN_EXT,

    TSR_OP_UNARY,
    TSR_OP_GLU,

    /* issue 17 part B */
    TSR_OP_MUL_MAT_ID,
    TSR_OP_CONV_TRANSPOSE_1D,
    TSR_OP_CONV_2D_DW,
    TSR_OP_CONV_TRANSPOSE_2D,
    TSR_OP_PAD_REFLECT_1D,
    TSR_OP_ROLL,
    TSR_OP_TIMESTEP_EMBEDDING,
    TSR_OP_SSM_CONV,
    TSR_OP_SSM_SCAN,
    TSR_OP_RWKV_WKV6,
    TSR_OP_GATED_LINEAR_ATTN,
    TSR_OP_RWKV_WKV7,
    TSR_OP_WIN_PART,
    TSR_OP_WIN_UNPART,
    TSR_OP_GET_REL_POS,
    TSR_OP_ADD_REL_POS,
    /* issue 17 part A */
    TSR_OP_SIN,
    TSR_OP_COS,
    TSR_OP_LEAKY_RELU,
    TSR_OP_ARANGE,
    TSR_OP_FILL,
    TSR_OP_TRI,
    TSR_OP_CUMSUM,
    TSR_OP_ACC,
    TSR_OP_SET,
    TSR_OP_DIAG,
    TSR_OP_REPEAT_BACK,
    TSR_OP_L2_NORM,
    TSR_OP_TOP_K,
    TSR_OP_MAP_CUSTOM1,
    TSR_OP_MAP_CUSTOM2,
    TSR_OP_MAP_CUSTOM3,
    TSR_OP_CUSTOM,

    TSR_OP_COUNT
};

/* TSR_OP_UNARY: which function, in op_params[0]. */
enum tsr_unary_op {
    TSR_UNARY_OP_ABS,
    TSR_UNARY_OP_NEG,
    TSR_UNARY_OP_TANH,
    TSR_UNARY_OP_RELU,
    TSR_UNARY_OP_SIGMOID,
    TSR_UNARY_OP_GELU,
    TSR_UNARY_OP_GELU_QUICK,
    TSR_UNARY_OP_SILU,
    TSR_UNARY_OP_EXP,
    /* issue 17 part A */
    TSR_UNARY_OP_SGN,
    TSR_UNARY_OP_STEP,
    TSR_UNARY_OP_ELU,
    TSR_UNARY_OP_HARDSWISH,
    TSR_UNARY_OP_HARDSIGMOID,
    TSR_UNARY_OP_EXPM1,
    TSR_UNARY_OP_SOFTPLUS,
    TSR_UNARY_OP_GELU_ERF,
    TSR_UNARY_OP_FLOOR,
    TSR_UNARY_OP_CEIL,
    TSR_UNARY_OP_ROUND,
    TSR_UNARY_OP_TRUNC,
    TSR_UNARY_OP_COUNT
};

/* TSR_OP_GLU: which gate, in op_params[0]; op_params[1] = swapped; SWIGLU_OAI: f32
 * alpha, limit in op_params[2], [3]. */
enum tsr_glu_op {
    TSR_GLU_OP_SWIGLU,
    /* issue 17 part A */
    TSR_GLU_OP_REGLU,
    TSR_GLU_OP_GEGLU,
    TSR_GLU_OP_GEGLU_ERF,
    TSR_GLU_OP_GEGLU_QUICK,
    TSR_GLU_OP_SWIGLU_OAI,
    TSR_GLU_OP_COUNT
};

/* tsr_tri: which triangle of each [ne0, ne1] matrix is kept (element (i0, i1) = column
 * i0, row i1); the rest becomes 0. Values equal ggml's. */
enum tsr_tri_type {
    TSR_TRI_TYPE_UPPER_DIAG = 0,   /* i0 >= i1 */
    TSR_TRI_TYPE_UPPER      = 1,   /* i0 >  i1 */
    TSR_TRI_TYPE_LOWER_DIAG = 2,   /* i0 <= i1 */
    TSR_TRI_TYPE_LOWER      = 3    /* i0 <  i1 */
};

enum tsr_op_pool { TSR_OP_POOL_MAX, TSR_OP_POOL_AVG, TSR_OP_POOL_COUNT };
enum tsr_sort_order { TSR_SORT_ORDER_ASC, TSR_SORT_ORDER_DESC };
enum tsr_scale_mode { TSR_SCALE_MODE_NEAREST = 0, TSR_SCALE_MODE_BILINEAR = 1 };

#define TSR_ROPE_TYPE_NORMAL 0
#define TSR_ROPE_TYPE_NEOX   2

/* issue 17 part B */
/* Multi-section RoPE (tsr_rope_multi): MROPE rotates NEOX pairs with the angle of each pair
 * taken from one of 4 position streams (time, height, width, extra) by section; VISION rotates
 * pairs (i, i + n_dims) over the whole head with the sections restarting their angles. */
#define TSR_ROPE_TYPE_MROPE  8
#define TSR_ROPE_TYPE_VISION 24
#define TSR_MROPE_SECTIONS   4
/* Precision a matrix product asks of its backend (ggml_prec): DEFAULT lets a backend
 * accumulate in f16 where it would, F32 asks for f32 accumulation. */
enum tsr_prec { TSR_PREC_DEFAULT = 0, TSR_PREC_F32 = 10 };

TSR_API const char * tsr_op_name(enum tsr_op op);        /* "ADD" */
TSR_API const char * tsr_op_symbol(enum tsr_op op);      /* "x+y" */
TSR_API const char * tsr_unary_op_name(enum tsr_unary_op op);
TSR_API const char * tsr_glu_op_name(enum tsr_glu_op op);
TSR_API const char * tsr_op_desc(const struct tsr_tensor * t); /* unary/glu name or op name */

/* ---- tensors ---------------------------------------------------------------------- */

enum tsr_tensor_flag {
    TSR_TENSOR_FLAG_INPUT  = 1,  /* set before the graph runs; never overwritten before its last use */
    TSR_TENSOR_FLAG_OUTPUT = 2,  /* read after the graph ran; never reused */
    TSR_TENSOR_FLAG_PARAM  = 4   /* trainable parameter */
};

struct tsr_backend_buffer;

/* ggml's tensor: ne[] in elements (ne[0] innermost), nb[] in bytes. */
struct tsr_tensor {
    enum tsr_type type;
    struct tsr_backend_buffer * buffer;   /* where data lives; NULL: in a context */

    int64_t ne[TSR_MAX_DIMS];
    size_t  nb[TSR_MAX_DIMS];  /* nb[0] = type_size, nb[1] = nb[0]*ne[0]/blck_size, nb[i] = nb[i-1]*ne[i-1] */

    enum tsr_op op;
    int32_t op_params[TSR_MAX_OP_PARAMS / sizeof(int32_t)];
    int32_t flags;

    struct tsr_tensor * src[TSR_MAX_SRC];

    struct tsr_tensor * view_src;   /* tensor whose data this one shares, or NULL */
    size_t              view_offs;  /* byte offset into view_src's data */

    void * data;
    char   name[TSR_MAX_NAME];
    void * extra;                   /* backend-private */
};

/* ---- context arena ---------------------------------------------------------------- */

struct tsr_context;

struct tsr_init_params {
    size_t mem_size;    /* bytes of the arena */
    void * mem_buffer;  /* caller's block (TSR_MEM_ALIGN-aligned, never freed by tessera), or NULL */
    bool   no_alloc;    /* headers only: tensor data is placed later in backend buffers */
};

/* Exact per-object costs: a context of
 *   sum(TSR_PAD(tsr_nbytes(t), TSR_MEM_ALIGN)) + n * tsr_tensor_overhead() + tsr_graph_overhead()
 * bytes holds exactly those n tensors (data included unless no_alloc) and one default
 * graph. tsr_graph_overhead_custom(size, grads) for other graph sizes. */
TSR_API size_t tsr_tensor_overhead(void);
TSR_API size_t tsr_graph_overhead(void);
TSR_API size_t tsr_graph_overhead_custom(size_t size, bool grads);

/* NULL + error when mem_buffer is not TSR_MEM_ALIGN-aligned or the block cannot be
 * allocated. mem_size 0 is allowed: an empty context in which every creation fails.
 * Nothing is ever written outside [mem_buffer, mem_buffer + mem_size). */
TSR_API struct tsr_context * tsr_init(struct tsr_init_params params);
TSR_API void   tsr_free(struct tsr_context * ctx);            /* NULL is fine */
TSR_API void   tsr_reset(struct tsr_context * ctx);           /* drop all objects, keep the block */
TSR_API size_t tsr_used_mem(const struct tsr_context * ctx);
TSR_API size_t tsr_get_mem_size(const struct tsr_context * ctx);
TSR_API void * tsr_get_mem_buffer(const struct tsr_context * ctx);
TSR_API bool   tsr_get_no_alloc(const struct tsr_context * ctx);
TSR_API void   tsr_set_no_alloc(struct tsr_context * ctx, bool no_alloc);

/* Iterate a context's tensors in creation order. */
TSR_API struct tsr_tensor * tsr_get_first_tensor(const struct tsr_context * ctx);
TSR_API struct tsr_tensor * tsr_get_next_tensor(const struct tsr_context * ctx, struct tsr_tensor * t);
TSR_API struct tsr_tensor * tsr_get_tensor(struct tsr_context * ctx, const char * name);
TSR_API size_t              tsr_get_max_tensor_size(const struct tsr_context * ctx);

/* ---- tensor creation and queries --------------------------------------------------- */

/* New tensors in ctx's arena (data too unless no_alloc). NULL + error on a bad type or
 * shape, an ne[0] not a multiple of the block size, overflow, or a full arena. */
TSR_API struct tsr_tensor * tsr_new_tensor(struct tsr_context * ctx, enum tsr_type type, int n_dims, const int64_t * ne);
TSR_API struct tsr_tensor * tsr_new_tensor_1d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0);
TSR_API struct tsr_tensor * tsr_new_tensor_2d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0, int64_t ne1);
TSR_API struct tsr_tensor * tsr_new_tensor_3d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0, int64_t ne1, int64_t ne2);
TSR_API struct tsr_tensor * tsr_new_tensor_4d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
TSR_API struct tsr_tensor * tsr_new_i32(struct tsr_context * ctx, int32_t value);  /* needs data */
TSR_API struct tsr_tensor * tsr_new_f32(struct tsr_context * ctx, float value);    /* needs data */
TSR_API struct tsr_tensor * tsr_dup_tensor(struct tsr_context * ctx, const struct tsr_tensor * src);   /* same shape and type, new data */
TSR_API struct tsr_tensor * tsr_view_tensor(struct tsr_context * ctx, struct tsr_tensor * src);        /* shares src's data; op NONE */

/* Shape queries. A NULL tensor gives 0 / false (tsr_is_empty(NULL) is true). */
TSR_API int64_t tsr_nelements(const struct tsr_tensor * t);
TSR_API int64_t tsr_nrows(const struct tsr_tensor * t);       /* ne1*ne2*ne3 */
TSR_API size_t  tsr_nbytes(const struct tsr_tensor * t);      /* bytes spanned by the strides */
TSR_API size_t  tsr_element_size(const struct tsr_tensor * t);
TSR_API int     tsr_n_dims(const struct tsr_tensor * t);      /* 1 + index of the last ne > 1 */
TSR_API bool    tsr_is_contiguous(const struct tsr_tensor * t);
TSR_API bool    tsr_is_contiguous_rows(const struct tsr_tensor * t); /* each row contiguous */
TSR_API bool    tsr_is_transposed(const struct tsr_tensor * t);
TSR_API bool    tsr_is_permuted(const struct tsr_tensor * t);
TSR_API bool    tsr_is_view(const struct tsr_tensor * t);
TSR_API bool    tsr_is_empty(const struct tsr_tensor * t);
TSR_API bool    tsr_is_scalar(const struct tsr_tensor * t);
TSR_API bool    tsr_are_same_shape(const struct tsr_tensor * a, const struct tsr_tensor * b);
TSR_API bool    tsr_are_same_stride(const struct tsr_tensor * a, const struct tsr_tensor * b);
TSR_API bool    tsr_can_repeat(const struct tsr_tensor * a, const struct tsr_tensor * b); /* b's dims multiples of a's */

/* Names are truncated to TSR_MAX_NAME - 1 bytes; set/format return t. */
TSR_API const char *        tsr_get_name(const struct tsr_tensor * t);
TSR_API struct tsr_tensor * tsr_set_name(struct tsr_tensor * t, const char * name);
TSR_API struct tsr_tensor * tsr_format_name(struct tsr_tensor * t, const char * fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Flag a tensor as a graph input / output / trainable parameter (for the allocators). */
TSR_API void tsr_set_input(struct tsr_tensor * t);
TSR_API void tsr_set_output(struct tsr_tensor * t);
TSR_API void tsr_set_param(struct tsr_tensor * t);

/* Op params, by index of 32-bit slot (false when out of range). */
TSR_API bool    tsr_set_op_params(struct tsr_tensor * t, const void * params, size_t size);
TSR_API int32_t tsr_get_op_params_i32(const struct tsr_tensor * t, uint32_t i);
TSR_API float   tsr_get_op_params_f32(const struct tsr_tensor * t, uint32_t i);
TSR_API void    tsr_set_op_params_i32(struct tsr_tensor * t, uint32_t i, int32_t value);
TSR_API void    tsr_set_op_params_f32(struct tsr_tensor * t, uint32_t i, float value);
TSR_API enum tsr_unary_op tsr_get_unary_op(const struct tsr_tensor * t);
TSR_API enum tsr_glu_op   tsr_get_glu_op(const struct tsr_tensor * t);

/* Element access for tensors whose data is in host memory (contiguous or not). */
TSR_API float   tsr_get_f32_1d(const struct tsr_tensor * t, int64_t i);  /* flat index in logical order */
TSR_API void    tsr_set_f32_1d(struct tsr_tensor * t, int64_t i, float v);
TSR_API float   tsr_get_f32_nd(const struct tsr_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
TSR_API void    tsr_set_f32_nd(struct tsr_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v);

/* ---- views (share data with their source; no copy) -------------------------------- */
/* A view's view_src is the root tensor that owns the data (views of views add their
 * offsets), src[0] the tensor it was made from; view ops are graph nodes (op VIEW,
 * RESHAPE, PERMUTE, TRANSPOSE). A view whose offset + spanned bytes exceed its source's
 * tsr_nbytes is an error (NULL). TSR_OP_VIEW stores its size_t offset in op_params. */

/* Views of a with shape ne*, row strides nb* (bytes) and a byte offset into a. */
TSR_API struct tsr_tensor * tsr_view_1d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, size_t offset);
TSR_API struct tsr_tensor * tsr_view_2d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
TSR_API struct tsr_tensor * tsr_view_3d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset);
TSR_API struct tsr_tensor * tsr_view_4d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);

/* Reshapes need a contiguous source with the same element count. */
TSR_API struct tsr_tensor * tsr_reshape(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b); /* to b's shape */
TSR_API struct tsr_tensor * tsr_reshape_1d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0);
TSR_API struct tsr_tensor * tsr_reshape_2d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1);
TSR_API struct tsr_tensor * tsr_reshape_3d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2);
TSR_API struct tsr_tensor * tsr_reshape_4d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

/* axis_i: where source dim i goes (ggml's convention). */
TSR_API struct tsr_tensor * tsr_permute(struct tsr_context * ctx, struct tsr_tensor * a, int axis0, int axis1, int axis2, int axis3);
TSR_API struct tsr_tensor * tsr_transpose(struct tsr_context * ctx, struct tsr_tensor * a);

/* ---- ops: construction only; each returns NULL with a message on bad input --------- */
/* Inputs are validated before the result is created: a failed op consumes no arena
 * memory. Result shapes, sources and the op_params layout of every op: docs/ops.md. */

/* Copies: dup (same type), cpy/cast (converting), cont (contiguous copy, optionally reshaped). */
TSR_API struct tsr_tensor * tsr_dup(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_cpy(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);   /* a -> b (same nelements, may convert type); returns a view of b */
TSR_API struct tsr_tensor * tsr_cast(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_type type);
TSR_API struct tsr_tensor * tsr_cont(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_cont_2d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1);
TSR_API struct tsr_tensor * tsr_cont_4d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

/* Binary elementwise: b is broadcast over a (each of b's dims divides a's). */
TSR_API struct tsr_tensor * tsr_add(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);
TSR_API struct tsr_tensor * tsr_sub(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);
TSR_API struct tsr_tensor * tsr_mul(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);
TSR_API struct tsr_tensor * tsr_div(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);
TSR_API struct tsr_tensor * tsr_add_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);
TSR_API struct tsr_tensor * tsr_mul_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);

/* Unary elementwise ops (result like a; _inplace: a view of a). */
TSR_API struct tsr_tensor * tsr_scale(struct tsr_context * ctx, struct tsr_tensor * a, float s);
TSR_API struct tsr_tensor * tsr_scale_inplace(struct tsr_context * ctx, struct tsr_tensor * a, float s);
TSR_API struct tsr_tensor * tsr_sqr(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_sqrt(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_log(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_exp(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_neg(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_abs(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_clamp(struct tsr_context * ctx, struct tsr_tensor * a, float min, float max); /* a new tensor (ggml: a view) */
TSR_API struct tsr_tensor * tsr_gelu(struct tsr_context * ctx, struct tsr_tensor * a);        /* tanh approximation, as ggml */
TSR_API struct tsr_tensor * tsr_gelu_quick(struct tsr_context * ctx, struct tsr_tensor * a);  /* x*sigmoid(1.702x) */
TSR_API struct tsr_tensor * tsr_silu(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_relu(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_tanh(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_sigmoid(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_unary(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_unary_op op);

/* swiglu(a): a's rows split in halves [x | g] -> silu(x) * g (ne0/2 wide).
 * swiglu_split(a, b): silu(a) * b, same shapes. */
TSR_API struct tsr_tensor * tsr_swiglu(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_swiglu_split(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);

/* Reductions. */
TSR_API struct tsr_tensor * tsr_sum(struct tsr_context * ctx, struct tsr_tensor * a);       /* -> [1] */
TSR_API struct tsr_tensor * tsr_sum_rows(struct tsr_context * ctx, struct tsr_tensor * a);  /* -> [1, ne1, ne2, ne3] */
TSR_API struct tsr_tensor * tsr_mean(struct tsr_context * ctx, struct tsr_tensor * a);      /* -> [1, ne1, ne2, ne3] */
TSR_API struct tsr_tensor * tsr_argmax(struct tsr_context * ctx, struct tsr_tensor * a);    /* 2-D a -> I32 [ne1] */

TSR_API struct tsr_tensor * tsr_repeat(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b); /* a tiled to b's shape */
TSR_API struct tsr_tensor * tsr_concat(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int dim);

/* Normalizations over rows (ne0). group_norm: over (ne0, ne1, ne2/n_groups channels). */
TSR_API struct tsr_tensor * tsr_norm(struct tsr_context * ctx, struct tsr_tensor * a, float eps);
TSR_API struct tsr_tensor * tsr_rms_norm(struct tsr_context * ctx, struct tsr_tensor * a, float eps);
TSR_API struct tsr_tensor * tsr_group_norm(struct tsr_context * ctx, struct tsr_tensor * a, int n_groups, float eps);

/* mul_mat(a [K, M, ...], b [K, N, ...]) -> F32 [M, N, b.ne2, b.ne3]: rows of a dotted
 * with rows of b; a broadcast over dims 2-3 (b's dims multiples of a's). */
TSR_API struct tsr_tensor * tsr_mul_mat(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);
/* out_prod(a [M, K], b [N, K]) -> [M, N, b.ne2, b.ne3]: sum over k of a[:,k] x b[:,k]. */
TSR_API struct tsr_tensor * tsr_out_prod(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);

/* get_rows(a [n, rows, ne2, ne3], b I32 [k, ne2, ne3]) -> F32 [n, k, ne2, ne3] (a of any type).
 * set_rows(a dst, b src F32, c I32 indices): rows of b into rows c of a; returns a view of a
 * with src[0] = b, src[1] = c, src[2] = a (ggml's order). */
TSR_API struct tsr_tensor * tsr_get_rows(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);
TSR_API struct tsr_tensor * tsr_set_rows(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, struct tsr_tensor * c);

/* Set a[i, j] = -inf where i > n_past + j. */
TSR_API struct tsr_tensor * tsr_diag_mask_inf(struct tsr_context * ctx, struct tsr_tensor * a, int n_past);

/* soft_max over rows; _ext: softmax(a*scale + mask*slope) with ALiBi slopes when
 * max_bias > 0. mask (F32 or F16) is [ne0, >= ne1] broadcast over dims 2-3, or NULL. */
TSR_API struct tsr_tensor * tsr_soft_max(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_soft_max_ext(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * mask, float scale, float max_bias);

/* RoPE on a [head_dim, n_head, n_tokens, 1] with positions b (I32 [n_tokens]).
 * mode TSR_ROPE_TYPE_NORMAL rotates pairs (2i, 2i+1); TSR_ROPE_TYPE_NEOX (i, i+n_dims/2).
 * op_params: n_past(0), n_dims, mode, n_ctx (unused), n_ctx_orig, then f32 freq_base,
 * freq_scale, ext_factor, attn_factor, beta_fast, beta_slow (slots 5..10). */
TSR_API struct tsr_tensor * tsr_rope(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int n_dims, int mode);
TSR_API struct tsr_tensor * tsr_rope_ext(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, struct tsr_tensor * c,
                                         int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale,
                                         float ext_factor, float attn_factor, float beta_fast, float beta_slow);

/* im2col(a kernel [KW, KH, IC, OC], b input [W, H, C, N]) -> [IC*KH*KW, OW, OH, N] (2-D),
 * or [IC*KW, OW, N] (1-D, is_2D false), in dst_type (F32 or F16). */
TSR_API struct tsr_tensor * tsr_im2col(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                       int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D, enum tsr_type dst_type);
/* conv_2d(a kernel [KW, KH, IC, OC], b input [W, H, IC, N]) -> F32 [OW, OH, OC, N].
 * One op: the im2col columns live in the backend's workspace, not the compute buffer. */
TSR_API struct tsr_tensor * tsr_conv_2d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                        int s0, int s1, int p0, int p1, int d0, int d1);
/* pool_2d(a [W, H, C, N]) -> F32 [(W + 2*p0 - k0)/s0 + 1, (H + 2*p1 - k1)/s1 + 1, C, N].
 * op_params: i32 op, k0, k1, s0, s1, then f32 p0, p1 (slots 5, 6). */
TSR_API struct tsr_tensor * tsr_pool_2d(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_op_pool op,
                                        int k0, int k1, int s0, int s1, float p0, float p1);
TSR_API struct tsr_tensor * tsr_upscale(struct tsr_context * ctx, struct tsr_tensor * a, int scale_factor, enum tsr_scale_mode mode);
TSR_API struct tsr_tensor * tsr_upscale_ext(struct tsr_context * ctx, struct tsr_tensor * a, int ne0, int ne1, int ne2, int ne3, enum tsr_scale_mode mode);
/* Zero padding at the end of each dim. */
TSR_API struct tsr_tensor * tsr_pad(struct tsr_context * ctx, struct tsr_tensor * a, int p0, int p1, int p2, int p3);
TSR_API struct tsr_tensor * tsr_argsort(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_sort_order order); /* I32 indices per row */

/* Fused attention: q F32 [D, n_q, n_head, B], k [D, n_kv, n_head_kv, B], v [Dv, n_kv, n_head_kv, B]
 * (n_head a multiple of n_head_kv: grouped-query attention), mask (F16/F32) [n_kv, >= n_q]
 * or NULL. Result F32 [Dv, n_head, n_q, B] (already permuted, as ggml). op_params f32:
 * scale, max_bias, logit_softcap; i32 slot 3 precision (0 = default). No n_q x n_kv
 * scores tensor is ever materialized in a buffer. */
TSR_API struct tsr_tensor * tsr_flash_attn_ext(struct tsr_context * ctx, struct tsr_tensor * q, struct tsr_tensor * k,
                                               struct tsr_tensor * v, struct tsr_tensor * mask,
                                               float scale, float max_bias, float logit_softcap);

/* issue 17 part B */
/* mul_mat_id(as [K, M, n_expert], b [K, n_b, n_tokens], ids I32 [n_used, n_tokens]) -> F32
 * [M, n_used, n_tokens]: out[:, e, t] = as[:, :, ids[e, t]] x b[:, e % n_b, t], n_b being
 * n_used or 1 (ggml's expert-indexed mat-mul). A backend reads each expert that ids names
 * once per graph; an id outside [0, n_expert) fails the graph's compute with a message. */
TSR_API struct tsr_tensor * tsr_mul_mat_id(struct tsr_context * ctx, struct tsr_tensor * as, struct tsr_tensor * b,
                                           struct tsr_tensor * ids);
/* Precision hint of a MUL_MAT or MUL_MAT_ID node (op_params slot 0). false (error) for
 * another node or an unknown precision (ggml returns void and asserts). */
TSR_API bool tsr_mul_mat_set_prec(struct tsr_tensor * a, enum tsr_prec prec);

/* 1-D convolutions: kernel a [K, IC, OC], input b [L, IC, N] -> F32 [OL, OC, N],
 * OL = (L + 2*p0 - d0*(K-1) - 1)/s0 + 1 (a CONV_2D node over views: its columns live in the
 * backend's workspace). _dw: depthwise, a [K, 1, C], b [L, C, N] -> [OL, C, N]. */
TSR_API struct tsr_tensor * tsr_conv_1d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int s0, int p0, int d0);
TSR_API struct tsr_tensor * tsr_conv_1d_dw(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int s0, int p0, int d0);
/* Depthwise 2-D convolution, computed directly: a [KW, KH, 1, C], b [W, H, C, N] -> F32
 * [OW, OH, C, N] (sizes as conv_2d). tsr_conv_2d_dw is the same op. */
TSR_API struct tsr_tensor * tsr_conv_2d_dw_direct(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                  int s0, int s1, int p0, int p1, int d0, int d1);
TSR_API struct tsr_tensor * tsr_conv_2d_dw(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                           int s0, int s1, int p0, int p1, int d0, int d1);
/* Transposed convolutions. 1-D: a [K, OC, IC], b [L, IC, N] -> F32 [(L-1)*s0 - 2*p0 +
 * d0*(K-1) + 1, OC, N]. 2-D (no padding): a [KW, KH, OC, IC], b [W, H, IC, N] -> F32
 * [(W-1)*stride + KW, (H-1)*stride + KH, OC, N]. */
TSR_API struct tsr_tensor * tsr_conv_transpose_1d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                  int s0, int p0, int d0);
TSR_API struct tsr_tensor * tsr_conv_transpose_2d_p0(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int stride);
/* pool_1d(a [L, ...]) -> F32 [(L + 2*p0 - k0)/s0 + 1, ne1, ne2, ne3] (a POOL_2D node). */
TSR_API struct tsr_tensor * tsr_pool_1d(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_op_pool op, int k0, int s0, int p0);
/* Reflection padding of dim 0 (p0, p1 < ne0); zero padding before (lp) and after (rp) each dim. */
TSR_API struct tsr_tensor * tsr_pad_reflect_1d(struct tsr_context * ctx, struct tsr_tensor * a, int p0, int p1);
TSR_API struct tsr_tensor * tsr_pad_ext(struct tsr_context * ctx, struct tsr_tensor * a, int lp0, int rp0, int lp1, int rp1,
                                        int lp2, int rp2, int lp3, int rp3);
/* Every dim rotated by its shift: out[i] = a[(i - shift) mod ne] (torch.roll). */
TSR_API struct tsr_tensor * tsr_roll(struct tsr_context * ctx, struct tsr_tensor * a, int shift0, int shift1, int shift2, int shift3);

/* Sinusoidal embedding of diffusion timesteps (f32 [N]) -> F32 [dim, N]: cos(t f_j) in the first
 * half, sin(t f_j) in the second, f_j = max_period^(-j / (dim/2)); an odd dim ends with 0. */
TSR_API struct tsr_tensor * tsr_timestep_embedding(struct tsr_context * ctx, struct tsr_tensor * timesteps, int dim, int max_period);
/* Mamba. ssm_conv(sx [d_conv - 1 + n_t, d_inner, n_s], c [d_conv, d_inner]) -> [d_inner, n_t, n_s].
 * ssm_scan(s, x, dt, A, B, C, ids) -> F32 1-D: y [head_dim, n_head, n_t, n_seqs] followed by the
 * final states [d_state, head_dim, n_head, n_seqs] (Mamba-1: A [d_state, n_head]; Mamba-2:
 * A [1, n_head], B/C with n_group groups); see docs/ops.md. */
TSR_API struct tsr_tensor * tsr_ssm_conv(struct tsr_context * ctx, struct tsr_tensor * sx, struct tsr_tensor * c);
TSR_API struct tsr_tensor * tsr_ssm_scan(struct tsr_context * ctx, struct tsr_tensor * s, struct tsr_tensor * x, struct tsr_tensor * dt,
                                         struct tsr_tensor * A, struct tsr_tensor * B, struct tsr_tensor * C, struct tsr_tensor * ids);

/* Linear-attention recurrences over tensors [S, H, n_tokens] with a state [S*S*H, n_seqs]
 * (n_tokens a multiple of n_seqs); each returns F32 [S*H, n_tokens + S*n_seqs]: the outputs,
 * then the final states (docs/ops.md has the recurrences). */
TSR_API struct tsr_tensor * tsr_rwkv_wkv6(struct tsr_context * ctx, struct tsr_tensor * k, struct tsr_tensor * v, struct tsr_tensor * r,
                                          struct tsr_tensor * tf, struct tsr_tensor * td, struct tsr_tensor * state);
TSR_API struct tsr_tensor * tsr_gated_linear_attn(struct tsr_context * ctx, struct tsr_tensor * k, struct tsr_tensor * v,
                                                  struct tsr_tensor * q, struct tsr_tensor * g, struct tsr_tensor * state, float scale);
TSR_API struct tsr_tensor * tsr_rwkv_wkv7(struct tsr_context * ctx, struct tsr_tensor * r, struct tsr_tensor * w, struct tsr_tensor * k,
                                          struct tsr_tensor * v, struct tsr_tensor * a, struct tsr_tensor * b, struct tsr_tensor * state);

/* RoPE with 4 positions per token (b I32 [4 * n_tokens]: all time positions, then height,
 * width, extra) and sections[4] pairs per stream (Qwen2-VL's M-RoPE; mode TSR_ROPE_TYPE_MROPE
 * or TSR_ROPE_TYPE_VISION, where n_dims = head_dim / 2). YaRN parameters as tsr_rope_ext. */
TSR_API struct tsr_tensor * tsr_rope_multi(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, struct tsr_tensor * c,
                                           int n_dims, int sections[TSR_MROPE_SECTIONS], int mode, int n_ctx_orig, float freq_base,
                                           float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow);

/* Windows of a [C, W, H] image (zero-padded to whole windows) -> [C, w, w, n_windows], and back. */
TSR_API struct tsr_tensor * tsr_win_part(struct tsr_context * ctx, struct tsr_tensor * a, int w);
TSR_API struct tsr_tensor * tsr_win_unpart(struct tsr_context * ctx, struct tsr_tensor * a, int w0, int h0, int w);
/* Relative positions: get_rel_pos(a [C, 2*qh - 1], qh, kh == qh) -> [C, kh, qh] rows of the
 * table; add_rel_pos(a [W*W, n1*n2, n3], pw, ph [W, n1, n2, n3]) adds ph[y] + pw[x] at x + W*y. */
TSR_API struct tsr_tensor * tsr_get_rel_pos(struct tsr_context * ctx, struct tsr_tensor * a, int qh, int kh);
TSR_API struct tsr_tensor * tsr_add_rel_pos(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * pw, struct tsr_tensor * ph);
TSR_API struct tsr_tensor * tsr_add_rel_pos_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * pw,
                                                    struct tsr_tensor * ph);
/* ---- issue 17 part A: ggml's other unary/GLU functions, fill and shape ops, user ops ---- */

/* Unary functions (TSR_OP_UNARY; result like a, _inplace: a view of a). Formulas and
 * their NaN/inf behaviour: docs/ops.md. round is roundf (halves away from zero, as ggml). */
TSR_API struct tsr_tensor * tsr_unary_inplace(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_unary_op op);
TSR_API struct tsr_tensor * tsr_sgn(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_sgn_inplace(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_step(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_step_inplace(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_elu(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_elu_inplace(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_hardswish(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_hardsigmoid(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_expm1(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_expm1_inplace(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_softplus(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_softplus_inplace(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_gelu_erf(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_gelu_erf_inplace(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_floor(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_floor_inplace(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_ceil(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_ceil_inplace(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_round(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_round_inplace(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_trunc(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_trunc_inplace(struct tsr_context * ctx, struct tsr_tensor * a);
/* sin, cos (their own ops, as ggml) and leaky_relu: x > 0 ? x : negative_slope * x. */
TSR_API struct tsr_tensor * tsr_sin(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_sin_inplace(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_cos(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_cos_inplace(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_leaky_relu(struct tsr_context * ctx, struct tsr_tensor * a, float negative_slope, bool inplace);

/* GLU: fused (a's rows split in halves [x | g], g first when swapped; result ne0/2 wide)
 * and split (x = a, g = b, same shapes): out = act(x) * g, act = relu (reglu), gelu (geglu),
 * gelu_erf, gelu_quick, silu (swiglu). swiglu_oai (b NULL: fused): x = min(x, limit),
 * g = clamp(g, -limit, limit), out = x * sigmoid(alpha * x) * (g + 1). */
TSR_API struct tsr_tensor * tsr_glu(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_glu_op op, bool swapped);
TSR_API struct tsr_tensor * tsr_glu_split(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, enum tsr_glu_op op);
TSR_API struct tsr_tensor * tsr_reglu(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_reglu_swapped(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_reglu_split(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);
TSR_API struct tsr_tensor * tsr_geglu(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_geglu_swapped(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_geglu_split(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);
TSR_API struct tsr_tensor * tsr_geglu_erf(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_geglu_erf_swapped(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_geglu_erf_split(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);
TSR_API struct tsr_tensor * tsr_geglu_quick(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_geglu_quick_swapped(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_geglu_quick_split(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);
TSR_API struct tsr_tensor * tsr_swiglu_swapped(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_swiglu_oai(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, float alpha, float limit);

/* arange: F32 [ceil((stop - start) / step)] = start + i*step. fill: like a, every element c.
 * tri: like a, the `type` triangle of each matrix kept, zeros elsewhere. cumsum: like a,
 * inclusive prefix sums along ne0. */
TSR_API struct tsr_tensor * tsr_arange(struct tsr_context * ctx, float start, float stop, float step);
TSR_API struct tsr_tensor * tsr_fill(struct tsr_context * ctx, struct tsr_tensor * a, float c);
TSR_API struct tsr_tensor * tsr_fill_inplace(struct tsr_context * ctx, struct tsr_tensor * a, float c);
TSR_API struct tsr_tensor * tsr_tri(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_tri_type type);
TSR_API struct tsr_tensor * tsr_cumsum(struct tsr_context * ctx, struct tsr_tensor * a);

/* acc / set: a copy of a (_inplace: a itself, the result a view of it) in which the view
 * of a with b's shape, strides nb1..nb3 and byte offset (ggml_view_4d's) gets a + b (acc)
 * or b (set). _1d: nb1..nb3 of a, _2d: nb2, nb3 of a. */
TSR_API struct tsr_tensor * tsr_acc(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
TSR_API struct tsr_tensor * tsr_acc_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
TSR_API struct tsr_tensor * tsr_set(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
TSR_API struct tsr_tensor * tsr_set_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
TSR_API struct tsr_tensor * tsr_set_1d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t offset);
TSR_API struct tsr_tensor * tsr_set_1d_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t offset);
TSR_API struct tsr_tensor * tsr_set_2d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t nb1, size_t offset);
TSR_API struct tsr_tensor * tsr_set_2d_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t nb1, size_t offset);

/* diag(a [n, 1, ne2, ne3]) -> [n, n, ne2, ne3], a on the diagonal, zeros elsewhere.
 * repeat_back(a, b): a's repetitions of b's shape summed -> b's shape (tsr_can_repeat(b, a)).
 * l2_norm: each row x / max(||x||_2, eps). top_k: I32 [k, ne1, ne2, ne3], per row the
 * indices of the k largest values, largest first (ties: lower index first; NaN largest). */
TSR_API struct tsr_tensor * tsr_diag(struct tsr_context * ctx, struct tsr_tensor * a);
TSR_API struct tsr_tensor * tsr_repeat_back(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b);
TSR_API struct tsr_tensor * tsr_l2_norm(struct tsr_context * ctx, struct tsr_tensor * a, float eps);
TSR_API struct tsr_tensor * tsr_l2_norm_inplace(struct tsr_context * ctx, struct tsr_tensor * a, float eps);
TSR_API struct tsr_tensor * tsr_top_k(struct tsr_context * ctx, struct tsr_tensor * a, int k);

/* User-defined ops, ggml's callbacks: run by the CPU backend's threads, each call with its
 * (ith, nth) to split the work by; a callback must write all of dst between its nth
 * calls, read only its sources and dst, and return. n_tasks: how many threads at most
 * (TSR_N_TASKS_MAX: all). Other backends decline these ops (supports_op false).
 * map_custom1/2/3: result like a (_inplace: a view of a, the callback may read and write
 * dst = a). custom_4d: a new tensor of type/shape, sources args[0..n_args) (n_args <=
 * TSR_MAX_SRC); custom_inplace: a view of a, sources a then args (n_args < TSR_MAX_SRC). */
typedef void (*tsr_custom1_op_t)(struct tsr_tensor * dst, const struct tsr_tensor * a, int ith, int nth, void * userdata);
typedef void (*tsr_custom2_op_t)(struct tsr_tensor * dst, const struct tsr_tensor * a, const struct tsr_tensor * b, int ith, int nth, void * userdata);
typedef void (*tsr_custom3_op_t)(struct tsr_tensor * dst, const struct tsr_tensor * a, const struct tsr_tensor * b, const struct tsr_tensor * c, int ith, int nth, void * userdata);
typedef void (*tsr_custom_op_t)(struct tsr_tensor * dst, int ith, int nth, void * userdata);
#define TSR_N_TASKS_MAX (-1)
TSR_API struct tsr_tensor * tsr_map_custom1(struct tsr_context * ctx, struct tsr_tensor * a, tsr_custom1_op_t fun, int n_tasks, void * userdata);
TSR_API struct tsr_tensor * tsr_map_custom1_inplace(struct tsr_context * ctx, struct tsr_tensor * a, tsr_custom1_op_t fun, int n_tasks, void * userdata);
TSR_API struct tsr_tensor * tsr_map_custom2(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, tsr_custom2_op_t fun, int n_tasks, void * userdata);
TSR_API struct tsr_tensor * tsr_map_custom2_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, tsr_custom2_op_t fun, int n_tasks, void * userdata);
TSR_API struct tsr_tensor * tsr_map_custom3(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, struct tsr_tensor * c, tsr_custom3_op_t fun, int n_tasks, void * userdata);
TSR_API struct tsr_tensor * tsr_map_custom3_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, struct tsr_tensor * c, tsr_custom3_op_t fun, int n_tasks, void * userdata);
TSR_API struct tsr_tensor * tsr_custom_4d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                                          struct tsr_tensor ** args, int n_args, tsr_custom_op_t fun, int n_tasks, void * userdata);
TSR_API struct tsr_tensor * tsr_custom_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor ** args, int n_args,
                                               tsr_custom_op_t fun, int n_tasks, void * userdata);

/* ---- graphs ------------------------------------------------------------------------ */

/* One entry of tsr_build_forward_expand's explicit DFS stack (internal). */
struct tsr_graph_visit {
    struct tsr_tensor * t;
    int next_src;
};

/* ggml's cgraph. The layout is public only because tsr_graph_view returns one by value:
 * use the accessors below. Everything (this struct and its arrays) lives in one context
 * object: nodes[size], leafs[size], visited[visited_size] (open addressing on tensor
 * pointers, a power of two > 2*size so it never fills), grads/grad_accs[size] when made
 * with grads, and a DFS stack of 2*size+1 entries. A graph view points into its
 * parent's nodes and has no leafs, set or stack (visited_size 0). */
struct tsr_cgraph {
    int size;
    int n_nodes;
    int n_leafs;
    struct tsr_tensor ** nodes;
    struct tsr_tensor ** grads;      /* NULL unless made with grads (kept for ggml parity) */
    struct tsr_tensor ** grad_accs;
    struct tsr_tensor ** leafs;
    size_t visited_size;             /* 0 for views */
    struct tsr_tensor ** visited;    /* NULL entry = empty slot */
    struct tsr_graph_visit * stack;  /* NULL for views */
};

TSR_API struct tsr_cgraph * tsr_new_graph(struct tsr_context * ctx);  /* TSR_DEFAULT_GRAPH_SIZE nodes */
TSR_API struct tsr_cgraph * tsr_new_graph_custom(struct tsr_context * ctx, size_t size, bool grads);
/* A view of nodes [i0, i1) sharing the parent's arrays (no leafs), ggml's graph_view. */
TSR_API struct tsr_cgraph   tsr_graph_view(struct tsr_cgraph * cgraph, int i0, int i1);
TSR_API void                tsr_graph_reset(struct tsr_cgraph * cgraph);   /* empty it, keep capacity */
TSR_API bool                tsr_graph_cpy(const struct tsr_cgraph * src, struct tsr_cgraph * dst);

/* Adds t and everything it depends on, in a deduplicated topological order: tensors
 * with an op become nodes, the rest leafs. false (graph unchanged) when over capacity. */
TSR_API bool tsr_build_forward_expand(struct tsr_cgraph * cgraph, struct tsr_tensor * tensor);

/* Graph queries: capacity, nodes and leafs by index (NULL when out of range), append, lookup by name. */
TSR_API int                 tsr_graph_size(const struct tsr_cgraph * cgraph);
TSR_API int                 tsr_graph_n_nodes(const struct tsr_cgraph * cgraph);
TSR_API struct tsr_tensor * tsr_graph_node(const struct tsr_cgraph * cgraph, int i); /* i < 0 counts from the end */
TSR_API struct tsr_tensor ** tsr_graph_nodes(struct tsr_cgraph * cgraph);
TSR_API int                 tsr_graph_n_leafs(const struct tsr_cgraph * cgraph);
TSR_API struct tsr_tensor * tsr_graph_leaf(const struct tsr_cgraph * cgraph, int i);
TSR_API bool                tsr_graph_add_node(struct tsr_cgraph * cgraph, struct tsr_tensor * t);
TSR_API struct tsr_tensor * tsr_graph_get_tensor(const struct tsr_cgraph * cgraph, const char * name);

/* Debug output: a node/leaf table to out; a Graphviz file of gf (gb may be NULL). */
TSR_API void tsr_graph_print(const struct tsr_cgraph * cgraph, FILE * out);
TSR_API bool tsr_graph_dump_dot(const struct tsr_cgraph * gb, const struct tsr_cgraph * gf, const char * filename);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* ---- C++: thin RAII wrappers -------------------------------------------------------- */
#ifdef __cplusplus
TSR_CXX_BEGIN
/* Owns a tsr_context; tsr_free on destruction. Check `ok()` after construction. */
class context {
public:
    explicit context(size_t mem_size, void * mem_buffer = nullptr, bool no_alloc = false)
        : ctx_(tsr_init(tsr_init_params{mem_size, mem_buffer, no_alloc})) {}
    ~context() { tsr_free(ctx_); }
    context(const context &) = delete;
    context & operator=(const context &) = delete;
    context(context && o) noexcept : ctx_(o.ctx_) { o.ctx_ = nullptr; }
    context & operator=(context && o) noexcept { if (this != &o) { tsr_free(ctx_); ctx_ = o.ctx_; o.ctx_ = nullptr; } return *this; }
    bool ok() const { return ctx_ != nullptr; }
    tsr_context * get() const { return ctx_; }
    operator tsr_context *() const { return ctx_; }
private:
    tsr_context * ctx_;
};
TSR_CXX_END /* namespace tsr */
#endif

#define TSR_CORE_DECLARED  /* every declaration above is in: the implementation may follow */
#endif /* TESSERA_H */

/* ---- implementation ----------------------------------------------------------------- */
/* Outside the include guard: a later include in the TU that defines TSR_IMPLEMENTATION
 * compiles it even when this header was included before the macro (see the rule above). */
#if defined(TSR_IMPLEMENTATION) && !defined(TSR_CORE_IMPLEMENTED)
#define TSR_CORE_IMPLEMENTED
#ifndef __cplusplus
#error "TSR_IMPLEMENTATION must be defined in a C++17 translation unit"
#endif
/* ---- include/tessera/impl/core_internal.h ---- */
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
/* ---- include/tessera/impl/error.inl ---- */
/* error.inl - thread-local error messages and the error callback. */

TSR_IMPL_NS_BEGIN
static thread_local char g_error[1024] = {0};
static tsr_error_callback g_error_cb = nullptr;
static void * g_error_cb_user = nullptr;
TSR_IMPL_NS_END

TSR_API_IMPL const char * tsr_status_to_string(enum tsr_status status) {
    switch (status) {
        case TSR_STATUS_ALLOC_FAILED: return "ALLOC_FAILED";
        case TSR_STATUS_FAILED:       return "FAILED";
        case TSR_STATUS_SUCCESS:      return "SUCCESS";
        case TSR_STATUS_ABORTED:      return "ABORTED";
    }
    return "UNKNOWN";
}

TSR_API_IMPL const char * tsr_last_error(void) { return tsr_impl::g_error; }

TSR_API_IMPL void tsr_clear_error(void) { tsr_impl::g_error[0] = '\0'; }

TSR_API_IMPL void tsr_set_error_callback(tsr_error_callback cb, void * user_data) {
    tsr_impl::g_error_cb = cb;
    tsr_impl::g_error_cb_user = user_data;
}

TSR_API_IMPL bool tsr_set_error(const char * fmt, ...) {
    char buf[sizeof(tsr_impl::g_error)];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt ? fmt : "(null)", args);
    va_end(args);
    if (n < 0) {
        snprintf(buf, sizeof(buf), "tessera: error (message could not be formatted)");
    }
    memcpy(tsr_impl::g_error, buf, sizeof(buf));
    if (tsr_impl::g_error_cb) {
        tsr_impl::g_error_cb(tsr_impl::g_error, tsr_impl::g_error_cb_user);
    }
    return false;
}
/* ---- include/tessera/impl/types.inl ---- */
/* types.inl - type traits, fp16/bf16 conversion, Q8_0/Q4_0 quantization (the other
 * quantized types and the row conversions of every type: quants.inl). */

TSR_IMPL_NS_BEGIN

struct type_traits {
    const char * name;
    int64_t blck_size;
    size_t  type_size;
    bool    quantized;
};

static inline const type_traits * get_traits(enum tsr_type type) {
    static const type_traits f32  = {"f32",  1, sizeof(float), false};
    static const type_traits f16  = {"f16",  1, sizeof(tsr_fp16_t), false};
    static const type_traits q4_0 = {"q4_0", TSR_QK4_0, sizeof(tsr_block_q4_0), true};
    static const type_traits q8_0 = {"q8_0", TSR_QK8_0, sizeof(tsr_block_q8_0), true};
    static const type_traits i32  = {"i32",  1, sizeof(int32_t), false};
    static const type_traits bf16 = {"bf16", 1, sizeof(tsr_bf16_t), false};
    static const type_traits q4_1 = {"q4_1", TSR_QK4_1, sizeof(tsr_block_q4_1), true};
    static const type_traits q5_0 = {"q5_0", TSR_QK5_0, sizeof(tsr_block_q5_0), true};
    static const type_traits q5_1 = {"q5_1", TSR_QK5_1, sizeof(tsr_block_q5_1), true};
    static const type_traits q2_k = {"q2_K", TSR_QK_K, sizeof(tsr_block_q2_K), true};
    static const type_traits q3_k = {"q3_K", TSR_QK_K, sizeof(tsr_block_q3_K), true};
    static const type_traits q4_k = {"q4_K", TSR_QK_K, sizeof(tsr_block_q4_K), true};
    static const type_traits q5_k = {"q5_K", TSR_QK_K, sizeof(tsr_block_q5_K), true};
    static const type_traits q6_k = {"q6_K", TSR_QK_K, sizeof(tsr_block_q6_K), true};
    static const type_traits q8_k = {"q8_K", TSR_QK_K, sizeof(tsr_block_q8_K), true};
    static const type_traits iq4_nl = {"iq4_nl", TSR_QK4_NL, sizeof(tsr_block_iq4_nl), true};
    switch (type) {
        case TSR_TYPE_F32:  return &f32;
        case TSR_TYPE_F16:  return &f16;
        case TSR_TYPE_Q4_0: return &q4_0;
        case TSR_TYPE_Q8_0: return &q8_0;
        case TSR_TYPE_I32:  return &i32;
        case TSR_TYPE_BF16: return &bf16;
        case TSR_TYPE_Q4_1: return &q4_1;
        case TSR_TYPE_Q5_0: return &q5_0;
        case TSR_TYPE_Q5_1: return &q5_1;
        case TSR_TYPE_Q2_K: return &q2_k;
        case TSR_TYPE_Q3_K: return &q3_k;
        case TSR_TYPE_Q4_K: return &q4_k;
        case TSR_TYPE_Q5_K: return &q5_k;
        case TSR_TYPE_Q6_K: return &q6_k;
        case TSR_TYPE_Q8_K: return &q8_k;
        case TSR_TYPE_IQ4_NL: return &iq4_nl;
        default:            return nullptr;
    }
}

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float    bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_is_valid_type(enum tsr_type type) { return tsr_impl::get_traits(type) != nullptr; }

TSR_API_IMPL size_t tsr_type_size(enum tsr_type type) {
    const auto * tr = tsr_impl::get_traits(type);
    return tr ? tr->type_size : 0;
}

TSR_API_IMPL int64_t tsr_blck_size(enum tsr_type type) {
    const auto * tr = tsr_impl::get_traits(type);
    return tr ? tr->blck_size : 0;
}

TSR_API_IMPL size_t tsr_row_size(enum tsr_type type, int64_t ne) {
    const auto * tr = tsr_impl::get_traits(type);
    if (!tr || ne < 0) return 0;
    return tr->type_size * (size_t)(ne / tr->blck_size);
}

TSR_API_IMPL const char * tsr_type_name(enum tsr_type type) {
    const auto * tr = tsr_impl::get_traits(type);
    return tr ? tr->name : "unknown";
}

TSR_API_IMPL bool tsr_is_quantized(enum tsr_type type) {
    const auto * tr = tsr_impl::get_traits(type);
    return tr ? tr->quantized : false;
}

/* ---- fp16 / bf16 ------------------------------------------------------------------- */

TSR_API_IMPL float tsr_fp16_to_fp32(tsr_fp16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp  = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) { /* inf / nan */
        return tsr_impl::bits_f32(sign | 0x7f800000u | (mant << 13));
    }
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in float */
        const float v = (float)mant * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    return tsr_impl::bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

TSR_API_IMPL tsr_fp16_t tsr_fp32_to_fp16(float f) {
    /* Round to nearest even (F. Giesen's float_to_half_fast3_rtne). */
    uint32_t u = tsr_impl::f32_bits(f);
    const uint32_t sign = u & 0x80000000u;
    u ^= sign;
    uint32_t o;
    if (u >= (uint32_t)(127 + 16) << 23) {          /* >= 65536, inf or nan */
        o = u > 0x7f800000u ? (0x7e00u | ((u >> 13) & 0x3ffu)) : 0x7c00u;
    } else if (u < (uint32_t)113 << 23) {           /* < 2^-14: subnormal half or zero */
        const uint32_t magic_u = (uint32_t)((127 - 15) + (23 - 10) + 1) << 23;
        const float sum = tsr_impl::bits_f32(u) + tsr_impl::bits_f32(magic_u);
        o = tsr_impl::f32_bits(sum) - magic_u;
    } else {
        const uint32_t mant_odd = (u >> 13) & 1u;
        u += ((uint32_t)(15 - 127) << 23) + 0xfffu;
        u += mant_odd;
        o = u >> 13;
    }
    return (tsr_fp16_t)(o | (sign >> 16));
}

TSR_API_IMPL float tsr_bf16_to_fp32(tsr_bf16_t x) { return tsr_impl::bits_f32((uint32_t)x.bits << 16); }

TSR_API_IMPL tsr_bf16_t tsr_fp32_to_bf16(float f) {
    const uint32_t u = tsr_impl::f32_bits(f);
    tsr_bf16_t r;
    if ((u & 0x7fffffffu) > 0x7f800000u) { /* nan: keep it quiet */
        r.bits = (uint16_t)((u >> 16) | 64u);
        return r;
    }
    r.bits = (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
    return r;
}

TSR_API_IMPL void tsr_fp16_to_fp32_row(const tsr_fp16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = tsr_fp16_to_fp32(x[i]);
}
TSR_API_IMPL void tsr_fp32_to_fp16_row(const float * x, tsr_fp16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = tsr_fp32_to_fp16(x[i]);
}
TSR_API_IMPL void tsr_bf16_to_fp32_row(const tsr_bf16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = tsr_bf16_to_fp32(x[i]);
}
TSR_API_IMPL void tsr_fp32_to_bf16_row(const float * x, tsr_bf16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = tsr_fp32_to_bf16(x[i]);
}

/* ---- quantization (ggml's reference layouts and rounding) ------------------------------ */

TSR_IMPL_NS_BEGIN

static inline void quantize_row_q8_0(const float * x, tsr_block_q8_0 * y, int64_t n) {
    const int64_t nb = n / TSR_QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f;
        for (int j = 0; j < TSR_QK8_0; j++) amax = std::fmax(amax, std::fabs(x[i * TSR_QK8_0 + j]));
        const float d  = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tsr_fp32_to_fp16(d);
        for (int j = 0; j < TSR_QK8_0; j++) {
            y[i].qs[j] = (int8_t)std::lround(x[i * TSR_QK8_0 + j] * id);
        }
    }
}

static inline void dequantize_row_q8_0(const tsr_block_q8_0 * x, float * y, int64_t n) {
    const int64_t nb = n / TSR_QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        const float d = tsr_fp16_to_fp32(x[i].d);
        for (int j = 0; j < TSR_QK8_0; j++) y[i * TSR_QK8_0 + j] = (float)x[i].qs[j] * d;
    }
}

static inline void quantize_row_q4_0(const float * x, tsr_block_q4_0 * y, int64_t n) {
    const int64_t nb = n / TSR_QK4_0;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f, max = 0.0f; /* max: the value of largest magnitude, with its sign */
        for (int j = 0; j < TSR_QK4_0; j++) {
            const float v = x[i * TSR_QK4_0 + j];
            if (amax < std::fabs(v)) { amax = std::fabs(v); max = v; }
        }
        const float d  = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tsr_fp32_to_fp16(d);
        for (int j = 0; j < TSR_QK4_0 / 2; j++) {
            const float x0 = x[i * TSR_QK4_0 + j] * id;
            const float x1 = x[i * TSR_QK4_0 + TSR_QK4_0 / 2 + j] * id;
            int q0 = (int)(int8_t)(x0 + 8.5f);
            int q1 = (int)(int8_t)(x1 + 8.5f);
            q0 = q0 < 15 ? q0 : 15;
            q1 = q1 < 15 ? q1 : 15;
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static inline void dequantize_row_q4_0(const tsr_block_q4_0 * x, float * y, int64_t n) {
    const int64_t nb = n / TSR_QK4_0;
    for (int64_t i = 0; i < nb; i++) {
        const float d = tsr_fp16_to_fp32(x[i].d);
        for (int j = 0; j < TSR_QK4_0 / 2; j++) {
            y[i * TSR_QK4_0 + j]                 = (float)((x[i].qs[j] & 0x0f) - 8) * d;
            y[i * TSR_QK4_0 + TSR_QK4_0 / 2 + j] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static inline bool check_row(const char * fn, enum tsr_type type, int64_t n) {
    const auto * tr = get_traits(type);
    if (!tr) return tsr_set_error("%s: unknown type %d", fn, (int)type);
    if (n < 0 || n % tr->blck_size != 0) {
        return tsr_set_error("%s: %lld elements is not a multiple of %s's block size %lld", fn,
                             (long long)n, tr->name, (long long)tr->blck_size);
    }
    return true;
}

TSR_IMPL_NS_END
/* ---- include/tessera/impl/quants.inl ---- */
/* quants.inl - Q4_1, Q5_0, Q5_1, IQ4_NL and the K-quants (Q2_K..Q6_K, Q8_K): ggml's
 * layouts, dequantization in ggml's order of float operations (the formats are defined
 * by ggml's dequantize_row_*, so files decode to the same floats), and quantizers after
 * ggml's published reference algorithms. */

TSR_IMPL_NS_BEGIN

static_assert(sizeof(tsr_block_q4_1) == 20, "q4_1 block layout");
static_assert(sizeof(tsr_block_q5_0) == 22, "q5_0 block layout");
static_assert(sizeof(tsr_block_q5_1) == 24, "q5_1 block layout");
static_assert(sizeof(tsr_block_iq4_nl) == 18, "iq4_nl block layout");
static_assert(sizeof(tsr_block_q2_K) == 84, "q2_K block layout");
static_assert(sizeof(tsr_block_q3_K) == 110, "q3_K block layout");
static_assert(sizeof(tsr_block_q4_K) == 144, "q4_K block layout");
static_assert(sizeof(tsr_block_q5_K) == 176, "q5_K block layout");
static_assert(sizeof(tsr_block_q6_K) == 210, "q6_K block layout");
static_assert(sizeof(tsr_block_q8_K) == 292, "q8_K block layout");

static constexpr int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* ---- shared pieces ------------------------------------------------------------------- */

/* Round to nearest (ties to even) through the float adder, as ggml's quantizers do: the
 * same rounding as theirs, and no undefined float-to-int conversion for NaN input. */
static inline int nearest_int(float v) {
    const float biased = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &biased, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* floor(v) clamped to [lo, hi], clamped as a float first: a NaN or an infinity (a block
 * holding one) would make the float-to-int conversion undefined. NaN gives lo. */
static inline int floor_clamped(float v, int lo, int hi) {
    if (!(v >= (float)lo)) return lo;
    if (v > (float)hi) return hi;
    return (int)std::floor(v);
}

/* The 5-bit (or, with qh = 0, 4-bit) values of a 32-element block. */
static inline void unpack_q32(const uint8_t * qs, uint32_t qh, int * q) {
    for (int j = 0; j < 16; j++) {
        q[j]      = (qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
        q[j + 16] = (qs[j] >> 4)   | (int)(((qh >> (j + 16)) & 1u) << 4);
    }
}

/* The inverse: low nibbles into qs, fifth bits into *qh (when qh is not NULL). */
static inline void pack_q32(const int * q, uint8_t * qs, uint32_t * qh) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
        h |= (uint32_t)((q[j] >> 4) & 1) << j;
        h |= (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
    }
    if (qh) *qh = h;
}

static inline uint32_t load_u32(const uint8_t * p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline void     store_u32(uint8_t * p, uint32_t v) { memcpy(p, &v, 4); }

/* The value of largest magnitude, with its sign (0 for an all-zero block). */
static inline float signed_amax(const float * x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < std::fabs(x[j])) { amax = std::fabs(x[j]); max = x[j]; }
    }
    return max;
}

static inline void min_max(const float * x, int n, float * mn, float * mx) {
    float lo = std::numeric_limits<float>::max(), hi = -std::numeric_limits<float>::max();
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

/* Scale j (0..7) and min j of a Q4_K/Q5_K block: 6 bits each in 12 bytes. */
static inline void k4_scale_min(int j, const uint8_t * s, int * sc, int * mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static inline void k4_set_scale_min(int j, int sc, int mn, uint8_t * s) {
    if (j < 4) {
        s[j] = (uint8_t)sc;
        s[j + 4] = (uint8_t)mn;
    } else {
        s[j + 4] = (uint8_t)((sc & 0x0f) | ((mn & 0x0f) << 4));
        s[j - 4] |= (uint8_t)((sc >> 4) << 6);
        s[j] |= (uint8_t)((mn >> 4) << 6);
    }
}

/* Scale j (0..15) of a Q3_K block, -32..31: 4 low bits, then 2 high bits in bytes 8..11. */
static inline int q3k_scale(int j, const uint8_t * s) {
    const int lo = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

static inline void q3k_set_scale(int j, int biased, uint8_t * s) {
    if (j < 8) s[j] |= (uint8_t)(biased & 0x0f);
    else       s[j - 8] |= (uint8_t)((biased & 0x0f) << 4);
    s[8 + j % 4] |= (uint8_t)((biased >> 4) << (2 * (j / 4)));
}

/* 2-bit values of a 256-element super-block: element 128h + 32s + l at bits 2s of
 * qs[32h + l] (Q2_K and the low bits of Q3_K). */
static inline int q2_value(const uint8_t * qs, int e) {
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

static inline void pack_q2(const uint8_t * L, uint8_t * qs) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t * b = L + 128 * h + l;
            qs[32 * h + l] = (uint8_t)(b[0] | (b[32] << 2) | (b[64] << 4) | (b[96] << 6));
        }
}

/* ---- 32-element blocks: dequantization ------------------------------------------------- */

/* Q4_1 and Q5_1 (x = d * q + m) differ only in Q5_1's fifth bits. */
static inline uint32_t fifth_bits(const tsr_block_q4_1 &) { return 0; }
static inline uint32_t fifth_bits(const tsr_block_q5_1 & b) { return load_u32(b.qh); }
static inline void set_fifth_bits(tsr_block_q4_1 &, uint32_t) {}
static inline void set_fifth_bits(tsr_block_q5_1 & b, uint32_t qh) { store_u32(b.qh, qh); }

template <typename B> static void dequantize_row_min32(const B * x, float * y, int64_t n) {
    int q[32];
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = tsr_fp16_to_fp32(x[i].d), m = tsr_fp16_to_fp32(x[i].m);
        unpack_q32(x[i].qs, fifth_bits(x[i]), q);
        for (int j = 0; j < 32; j++) y[j] = (float)q[j] * d + m;
    }
}

static void dequantize_row_q4_1(const tsr_block_q4_1 * x, float * y, int64_t n) { dequantize_row_min32(x, y, n); }
static void dequantize_row_q5_1(const tsr_block_q5_1 * x, float * y, int64_t n) { dequantize_row_min32(x, y, n); }

static void dequantize_row_q5_0(const tsr_block_q5_0 * x, float * y, int64_t n) {
    int q[32];
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = tsr_fp16_to_fp32(x[i].d);
        unpack_q32(x[i].qs, load_u32(x[i].qh), q);
        for (int j = 0; j < 32; j++) y[j] = (float)(q[j] - 16) * d;
    }
}

static void dequantize_row_iq4_nl(const tsr_block_iq4_nl * x, float * y, int64_t n) {
    int q[32];
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = tsr_fp16_to_fp32(x[i].d);
        unpack_q32(x[i].qs, 0, q);
        for (int j = 0; j < 32; j++) y[j] = d * (float)iq4nl_values[q[j]];
    }
}

/* ---- 32-element blocks: quantization (ggml's reference rounding) ---------------------- */

/* Q4_1 / Q5_1: levels 0..nmax from the block's min to its max (ggml rounds half up). */
template <typename B> static void quantize_row_min32(const float * x, B * y, int64_t n, int nmax) {
    int q[32];
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float mn, mx;
        min_max(x, 32, &mn, &mx);
        const float d = (mx - mn) / (float)nmax;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tsr_fp32_to_fp16(d);
        y[i].m = tsr_fp32_to_fp16(mn);
        for (int j = 0; j < 32; j++) q[j] = floor_clamped((x[j] - mn) * id + 0.5f, 0, nmax);
        uint32_t qh;
        pack_q32(q, y[i].qs, &qh);
        set_fifth_bits(y[i], qh);
    }
}

static void quantize_row_q4_1(const float * x, tsr_block_q4_1 * y, int64_t n) { quantize_row_min32(x, y, n, 15); }
static void quantize_row_q5_1(const float * x, tsr_block_q5_1 * y, int64_t n) { quantize_row_min32(x, y, n, 31); }

static void quantize_row_q5_0(const float * x, tsr_block_q5_0 * y, int64_t n) {
    int q[32];
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        const float d = signed_amax(x, 32) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tsr_fp32_to_fp16(d);
        /* ggml truncates x/d + 16.5 (never negative here): rounding half up, not to even */
        for (int j = 0; j < 32; j++) q[j] = floor_clamped(x[j] * id + 16.5f, 0, 31);
        uint32_t qh;
        pack_q32(q, y[i].qs, &qh);
        store_u32(y[i].qh, qh);
    }
}

/* Index of the table value nearest to v (the table is increasing). */
static inline int iq4nl_index(float v) {
    if (v <= iq4nl_values[0]) return 0;
    if (v >= iq4nl_values[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < iq4nl_values[mid]) hi = mid; else lo = mid;
    }
    return v - iq4nl_values[hi - 1] < iq4nl_values[hi] - v ? hi - 1 : hi;
}

/* sum w*q*x and sum w*q*q of a block quantized with inverse scale id. */
static inline void iq4nl_fit(const float * x, const float * w, float id, float * sqx, float * sq2) {
    float a = 0.0f, b = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float q = iq4nl_values[iq4nl_index(id * x[j])];
        a += w[j] * q * x[j];
        b += w[j] * q * q;
    }
    *sqx = a;
    *sq2 = b;
}

/* ggml's IQ4_NL search: start from the scale that maps the largest value onto the table's
 * end, then try 15 nearby inverse scales and keep the best weighted least-squares fit. */
static void quantize_row_iq4_nl(const float * x, tsr_block_iq4_nl * y, int64_t n) {
    const int ntry = 7;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float w[32];
        for (int j = 0; j < 32; j++) w[j] = x[j] * x[j];
        const float max = signed_amax(x, 32);
        int q[32];
        float d = 0.0f;
        if (std::fabs(max) < 1e-15f) {
            for (int j = 0; j < 32; j++) q[j] = iq4nl_index(0.0f);  /* ggml's bytes for a zero block */
        } else {
            float sqx, sq2;
            iq4nl_fit(x, w, 1.0f / (-max / iq4nl_values[0]), &sqx, &sq2);
            d = sq2 > 0 ? sqx / sq2 : 0.0f;
            float best = d * sqx;
            for (int t = -ntry; t <= ntry; t++) {
                iq4nl_fit(x, w, ((float)t + iq4nl_values[0]) / max, &sqx, &sq2);
                if (sq2 > 0 && sqx * sqx > best * sq2) {
                    d = sqx / sq2;
                    best = d * sqx;
                }
            }
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int j = 0; j < 32; j++) q[j] = iq4nl_index(id * x[j]);
        }
        y[i].d = tsr_fp32_to_fp16(d);
        pack_q32(q, y[i].qs, nullptr);
    }
}

/* ---- K-quants: dequantization ---------------------------------------------------------- */

static void dequantize_row_q2_K(const tsr_block_q2_K * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, y += TSR_QK_K) {
        const float d = tsr_fp16_to_fp32(x[i].d), dmin = tsr_fp16_to_fp32(x[i].dmin);
        for (int s = 0; s < 16; s++) {
            const uint8_t sc = x[i].scales[s];
            const float dl = d * (float)(sc & 0x0f), ml = dmin * (float)(sc >> 4);
            for (int l = 0; l < 16; l++) y[16 * s + l] = dl * (float)q2_value(x[i].qs, 16 * s + l) - ml;
        }
    }
}

static void dequantize_row_q3_K(const tsr_block_q3_K * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, y += TSR_QK_K) {
        const float d = tsr_fp16_to_fp32(x[i].d);
        for (int s = 0; s < 16; s++) {
            const float dl = d * (float)q3k_scale(s, x[i].scales);
            for (int l = 0; l < 16; l++) {
                const int e = 16 * s + l;
                /* the high bit of element e: bit e / 32 of hmask[e % 32]; clear means minus 4 */
                const bool high = (x[i].hmask[e % 32] >> (e / 32)) & 1;
                y[e] = dl * (float)(q2_value(x[i].qs, e) - (high ? 0 : 4));
            }
        }
    }
}

/* Q4_K and Q5_K: 8 sub-blocks of 32; sub-block 2c in the low nibbles of qs[32c..], 2c+1
 * in the high ones; Q5_K's fifth bit of element l of sub-block s is bit s of qh[l]. */
static void dequantize_k4(const uint8_t * scales, const uint8_t * qs, const uint8_t * qh,
                          float d, float dmin, float * y) {
    for (int s = 0; s < 8; s++) {
        int sc, mn;
        k4_scale_min(s, scales, &sc, &mn);
        const float ds = d * (float)sc, ms = dmin * (float)mn;
        const uint8_t * q = qs + 32 * (s / 2);
        for (int l = 0; l < 32; l++) {
            int v = (s % 2) ? (q[l] >> 4) : (q[l] & 0x0f);
            if (qh && ((qh[l] >> s) & 1)) v += 16;
            y[32 * s + l] = ds * (float)v - ms;
        }
    }
}

static void dequantize_row_q4_K(const tsr_block_q4_K * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++)
        dequantize_k4(x[i].scales, x[i].qs, nullptr, tsr_fp16_to_fp32(x[i].d), tsr_fp16_to_fp32(x[i].dmin), y + i * TSR_QK_K);
}

static void dequantize_row_q5_K(const tsr_block_q5_K * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++)
        dequantize_k4(x[i].scales, x[i].qs, x[i].qh, tsr_fp16_to_fp32(x[i].d), tsr_fp16_to_fp32(x[i].dmin), y + i * TSR_QK_K);
}

/* Q6_K: element 128h + 32k + l: low 4 bits in nibble k/2 of ql[64h + 32(k%2) + l], high 2
 * bits at bits 2k of qh[32h + l]; scale 8h + 2k + l/16; x = d * scale * (q - 32). */
static inline int q6k_value(const tsr_block_q6_K & b, int e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const int lo = (b.ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0x0f;
    const int hi = (b.qh[32 * h + l] >> (2 * k)) & 3;
    return (lo | (hi << 4)) - 32;
}

static void dequantize_row_q6_K(const tsr_block_q6_K * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, y += TSR_QK_K) {
        const float d = tsr_fp16_to_fp32(x[i].d);
        for (int e = 0; e < TSR_QK_K; e++)
            y[e] = d * (float)x[i].scales[e / 16] * (float)q6k_value(x[i], e);
    }
}

static void dequantize_row_q8_K(const tsr_block_q8_K * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, y += TSR_QK_K)
        for (int j = 0; j < TSR_QK_K; j++) y[j] = x[i].d * (float)x[i].qs[j];
}

/* ---- K-quants: the scale searches (ggml's make_qx_quants / make_q3_quants /
 * make_qkx2_quants) ---------------------------------------------------------------------- */

/* Symmetric levels -nmax..nmax-1 with weights x^2: the least-squares scale over 19
 * candidate inverse scales around nmax / max. L gets the levels plus nmax. */
static float make_qx_quants(int n, int nmax, const float * x, int8_t * L) {
    const float max = signed_amax(x, n);
    if (std::fabs(max) < 1e-15f) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    auto fit = [&](float iscale, float * slx, float * sl2, bool store) {
        float a = 0.0f, b = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            if (store) L[i] = (int8_t)(l + nmax);
            const float w = x[i] * x[i];
            a += w * x[i] * (float)l;
            b += w * (float)(l * l);
        }
        *slx = a;
        *sl2 = b;
    };
    float sumlx, suml2;
    fit(-(float)nmax / max, &sumlx, &suml2, true);
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        const float iscale = -((float)nmax + 0.1f * (float)is) / max;
        fit(iscale, &sumlx, &suml2, false);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            fit(iscale, &sumlx, &suml2, true);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's search: levels -nmax..nmax-1, then up to 5 passes moving single levels while the
 * weighted fit improves. L gets the levels plus nmax. */
static float make_q3_quants(int n, int nmax, const float * x, int8_t * L) {
    const float max = signed_amax(x, n);
    if (std::fabs(max) < 1e-15f) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    const float iscale = -(float)nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)(l * l);
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx <= 0) continue;
            float sl2 = suml2 - w * (float)(L[i] * L[i]);
            const int nl = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (nl == L[i]) continue;
            slx += w * x[i] * (float)nl;
            sl2 += w * (float)(nl * nl);
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                ++changed;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Weighted sums of a level assignment: sum w*l, sum w*l^2, sum w*l*x. */
struct level_sums {
    float l, l2, xl;
};

/* The level of x on the grid min + k / iscale, k = 0..nmax. */
static inline int grid_level(float x, float iscale, float min, int nmax) {
    return clamp_int(nearest_int(iscale * (x - min)), 0, nmax);
}

/* The weighted sums of the grid's levels (n a multiple of 4: four partial sums per quantity,
 * so the loop vectorizes without reassociating a float reduction; the levels themselves are
 * stored only for the winning grid). */
static inline level_sums grid_sums(int n, int nmax, const float * x, const float * w, float iscale, float min) {
    float sl[4] = {0}, sl2[4] = {0}, sxl[4] = {0};
    for (int i = 0; i < n; i += 4)
        for (int k = 0; k < 4; k++) {
            const float l = (float)grid_level(x[i + k], iscale, min, nmax);
            const float wl = w[i + k] * l;
            sl[k] += wl;
            sl2[k] += wl * l;
            sxl[k] += wl * x[i + k];
        }
    level_sums s{0.0f, 0.0f, 0.0f};
    for (int k = 0; k < 4; k++) {
        s.l += sl[k];
        s.l2 += sl2[k];
        s.xl += sxl[k];
    }
    return s;
}

/* Weighted sums of the values themselves: sum w, sum w*x, sum w*x^2. */
struct value_sums {
    float w, x, xx;
};

/* sum w * (sc * l + mn - x)^2 expanded over the sums, so a candidate costs no second pass
 * over its levels (in double: the terms are far larger than the error they leave). */
static inline float squared_error(const value_sums & v, const level_sums & s, float sc, float mn) {
    const double e = (double)sc * sc * s.l2 + 2.0 * sc * mn * s.l - 2.0 * sc * s.xl + (double)mn * mn * v.w - 2.0 * mn * v.x + v.xx;
    return (float)e;
}

/* sum w * |sc * l + mn - x| over the grid's levels. */
static float absolute_error(int n, int nmax, const float * x, const float * w, float iscale, float min, float sc, float mn) {
    float e = 0.0f;
    for (int i = 0; i < n; i++) e += w[i] * std::fabs(sc * (float)grid_level(x[i], iscale, min, nmax) + mn - x[i]);
    return e;
}

/* Asymmetric levels 0..nmax: x ~ scale * L - min. Tries nstep + 1 inverse scales and, for
 * each, the weighted least-squares scale and min; keeps the one of least error (absolute
 * error when use_mad). Returns the scale; *the_min gets min (>= 0). n: a multiple of 4. */
static float make_qkx2_quants(int n, int nmax, const float * x, const float * w, uint8_t * L, float * the_min,
                              float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    value_sums v{0.0f, 0.0f, 0.0f};
    for (int i = 0; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        v.w += w[i];
        v.x += w[i] * x[i];
        v.xx += w[i] * x[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -min;
        return 0.0f;
    }
    /* as ggml: each grid starts at the min of the best fit so far */
    const auto error_of = [&](float iscale, float gmin, const level_sums & s, float sc, float mn) {
        return use_mad ? absolute_error(n, nmax, x, w, iscale, gmin, sc, mn) : squared_error(v, s, sc, mn);
    };
    float best_iscale = (float)nmax / (max - min), best_grid_min = min;
    float scale = 1.0f / best_iscale;
    float best_error = error_of(best_iscale, min, grid_sums(n, nmax, x, w, best_iscale, min), scale, min);
    for (int is = 0; is <= nstep; is++) {
        const float iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min), grid_min = min;
        const level_sums s = grid_sums(n, nmax, x, w, iscale, grid_min);
        const float D = v.w * s.l2 - s.l * s.l;
        if (D <= 0) continue;
        float this_scale = (v.w * s.xl - v.x * s.l) / D;
        float this_min = (s.l2 * v.x - s.l * s.xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = s.xl / s.l2;
        }
        const float err = error_of(iscale, grid_min, s, this_scale, this_min);
        if (err < best_error) {
            best_iscale = iscale;
            best_grid_min = grid_min;
            best_error = err;
            scale = this_scale;
            min = this_min;
        }
    }
    for (int i = 0; i < n; i++) L[i] = (uint8_t)grid_level(x[i], best_iscale, best_grid_min, nmax);
    *the_min = -min;
    return scale;
}

/* ---- K-quants: quantization -------------------------------------------------------------- */

/* Sub-block scales and mins (nsub of them, non-negative) quantized to 'levels' steps of
 * the largest: returns the super-block factors d and dmin through *d / *dmin and the
 * integer scales / mins through ls / lm. */
static void quantize_scales(const float * scales, const float * mins, int nsub, int levels,
                            int * ls, int * lm, float * d, float * dmin) {
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < nsub; j++) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? (float)levels / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? (float)levels / max_min : 0.0f;
    for (int j = 0; j < nsub; j++) {
        ls[j] = std::min(levels, nearest_int(inv_scale * scales[j]));
        lm[j] = std::min(levels, nearest_int(inv_min * mins[j]));
    }
    *d = max_scale / (float)levels;
    *dmin = max_min / (float)levels;
}

/* Requantize sub-block values to 0..nmax with the stored (rounded) scale and min. */
static void requantize_asym(const float * x, int n, float d, float dm, int nmax, uint8_t * L) {
    if (d == 0.0f) return;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)clamp_int(nearest_int((x[i] + dm) / d), 0, nmax);
}

/* The 16 sub-blocks of 16 of a super-block fitted by 'fit' (symmetric levels); returns
 * the signed scale of largest magnitude. */
static float fit_sub_blocks(const float * x, float (*fit)(int, int, const float *, int8_t *), int nmax,
                            int8_t * L, float * scales) {
    float max_scale = 0.0f, amax = 0.0f;
    for (int j = 0; j < 16; j++) {
        scales[j] = fit(16, nmax, x + 16 * j, L + 16 * j);
        if (std::fabs(scales[j]) > amax) { amax = std::fabs(scales[j]); max_scale = scales[j]; }
    }
    return max_scale;
}

static void quantize_row_q2_K(const float * x, tsr_block_q2_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, x += TSR_QK_K) {
        uint8_t L[TSR_QK_K];
        float scales[16], mins[16], w[16];
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = std::fabs(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
        }
        int ls[16], lm[16];
        float d, dmin;
        quantize_scales(scales, mins, 16, 15, ls, lm, &d, &dmin);
        y[i].d = tsr_fp32_to_fp16(d);
        y[i].dmin = tsr_fp32_to_fp16(dmin);
        for (int j = 0; j < 16; j++) y[i].scales[j] = (uint8_t)(ls[j] | (lm[j] << 4));
        const float dq = tsr_fp16_to_fp32(y[i].d), mq = tsr_fp16_to_fp32(y[i].dmin);
        for (int j = 0; j < 16; j++)
            requantize_asym(x + 16 * j, 16, dq * (float)ls[j], mq * (float)lm[j], 3, L + 16 * j);
        pack_q2(L, y[i].qs);
    }
}

static void quantize_row_q3_K(const float * x, tsr_block_q3_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, x += TSR_QK_K) {
        int8_t L[TSR_QK_K];
        float scales[16];
        const float max_scale = fit_sub_blocks(x, make_q3_quants, 4, L, scales);
        memset(y[i].scales, 0, sizeof(y[i].scales));
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) q3k_set_scale(j, clamp_int(nearest_int(iscale * scales[j]), -32, 31) + 32, y[i].scales);
            y[i].d = tsr_fp32_to_fp16(1.0f / iscale);
        } else {
            y[i].d = tsr_fp32_to_fp16(0.0f);
        }
        const float dq = tsr_fp16_to_fp32(y[i].d);
        for (int j = 0; j < 16; j++) {
            const float d = dq * (float)q3k_scale(j, y[i].scales);
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; l++) L[16 * j + l] = (int8_t)(clamp_int(nearest_int(x[16 * j + l] / d), -4, 3) + 4);
        }
        /* bit 2 of element e goes to bit e / 32 of hmask[e % 32]; the low 2 bits to qs */
        memset(y[i].hmask, 0, sizeof(y[i].hmask));
        uint8_t low[TSR_QK_K];
        for (int e = 0; e < TSR_QK_K; e++) {
            if (L[e] > 3) y[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
            low[e] = (uint8_t)(L[e] & 3);
        }
        pack_q2(low, y[i].qs);
    }
}

/* Q4_K and Q5_K: 8 sub-blocks of 32 with levels 0..nmax, weights |x| + rms(x). */
static void quantize_k4_levels(const float * x, int nmax, float rmin, int nstep, uint8_t * scales12,
                               tsr_fp16_t * d16, tsr_fp16_t * dmin16, uint8_t * L) {
    float scales[8], mins[8], w[32];
    for (int j = 0; j < 8; j++) {
        const float * xs = x + 32 * j;
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float av_x = std::sqrt(sum_x2 / 32.0f);
        for (int l = 0; l < 32; l++) w[l] = av_x + std::fabs(xs[l]);
        scales[j] = make_qkx2_quants(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, false);
    }
    int ls[8], lm[8];
    float d, dmin;
    quantize_scales(scales, mins, 8, 63, ls, lm, &d, &dmin);
    memset(scales12, 0, TSR_K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) k4_set_scale_min(j, ls[j], lm[j], scales12);
    *d16 = tsr_fp32_to_fp16(d);
    *dmin16 = tsr_fp32_to_fp16(dmin);
    const float dq = tsr_fp16_to_fp32(*d16), mq = tsr_fp16_to_fp32(*dmin16);
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        k4_scale_min(j, scales12, &sc, &mn);
        requantize_asym(x + 32 * j, 32, dq * (float)sc, mq * (float)mn, nmax, L + 32 * j);
    }
}

static void quantize_row_q4_K(const float * x, tsr_block_q4_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, x += TSR_QK_K) {
        uint8_t L[TSR_QK_K];
        quantize_k4_levels(x, 15, -1.0f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) y[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

static void quantize_row_q5_K(const float * x, tsr_block_q5_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, x += TSR_QK_K) {
        uint8_t L[TSR_QK_K];
        quantize_k4_levels(x, 31, -0.5f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        memset(y[i].qh, 0, sizeof(y[i].qh));
        for (int s = 0; s < 8; s++)
            for (int l = 0; l < 32; l++) {
                const int v = L[32 * s + l];
                if (v > 15) y[i].qh[l] |= (uint8_t)(1u << s);
                uint8_t & q = y[i].qs[32 * (s / 2) + l];
                q = (s % 2) ? (uint8_t)(q | ((v & 0x0f) << 4)) : (uint8_t)(v & 0x0f);
            }
    }
}

static void quantize_row_q6_K(const float * x, tsr_block_q6_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, x += TSR_QK_K) {
        int8_t L[TSR_QK_K];
        float scales[16];
        const float max_scale = fit_sub_blocks(x, make_qx_quants, 32, L, scales);
        memset(&y[i], 0, sizeof(y[i]));
        if (std::fabs(max_scale) < 1e-15f) continue;
        const float iscale = -128.0f / max_scale;
        y[i].d = tsr_fp32_to_fp16(1.0f / iscale);
        for (int j = 0; j < 16; j++) y[i].scales[j] = (int8_t)std::min(127, nearest_int(iscale * scales[j]));
        const float dq = tsr_fp16_to_fp32(y[i].d);
        for (int j = 0; j < 16; j++) {
            const float d = dq * (float)y[i].scales[j];
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; l++) L[16 * j + l] = (int8_t)(clamp_int(nearest_int(x[16 * j + l] / d), -32, 31) + 32);
        }
        for (int e = 0; e < TSR_QK_K; e++) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            y[i].ql[64 * h + 32 * (k % 2) + l] |= (uint8_t)((L[e] & 0x0f) << (4 * (k / 2)));
            y[i].qh[32 * h + l] |= (uint8_t)((L[e] >> 4) << (2 * k));
        }
    }
}

static void quantize_row_q8_K(const float * x, tsr_block_q8_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, x += TSR_QK_K) {
        const float max = signed_amax(x, TSR_QK_K);
        memset(&y[i], 0, sizeof(y[i]));
        if (max == 0.0f) continue;
        const float iscale = -127.0f / max;
        for (int j = 0; j < TSR_QK_K; j++) {
            y[i].qs[j] = (int8_t)std::min(127, nearest_int(iscale * x[j]));
            y[i].bsums[j / 16] = (int16_t)(y[i].bsums[j / 16] + y[i].qs[j]);
        }
        y[i].d = 1.0f / iscale;
    }
}

TSR_IMPL_NS_END

/* ---- row conversions of every type (the public API) ----------------------------------- */

TSR_API_IMPL bool tsr_to_float_row(enum tsr_type type, const void * src, float * dst, int64_t n) {
    if (!tsr_impl::check_row("tsr_to_float_row", type, n)) return false;
    if (n == 0) return true; /* an empty row: src and dst may be NULL (memcpy may not get NULL) */
    if (!src || !dst) return tsr_set_error("tsr_to_float_row: NULL src or dst");
    switch (type) {
        case TSR_TYPE_F32:  memcpy(dst, src, (size_t)n * sizeof(float)); break;
        case TSR_TYPE_F16:  tsr_fp16_to_fp32_row((const tsr_fp16_t *)src, dst, n); break;
        case TSR_TYPE_BF16: tsr_bf16_to_fp32_row((const tsr_bf16_t *)src, dst, n); break;
        case TSR_TYPE_I32:
            for (int64_t i = 0; i < n; i++) dst[i] = (float)((const int32_t *)src)[i];
            break;
        case TSR_TYPE_Q8_0: tsr_impl::dequantize_row_q8_0((const tsr_block_q8_0 *)src, dst, n); break;
        case TSR_TYPE_Q4_0: tsr_impl::dequantize_row_q4_0((const tsr_block_q4_0 *)src, dst, n); break;
        case TSR_TYPE_Q4_1: tsr_impl::dequantize_row_q4_1((const tsr_block_q4_1 *)src, dst, n); break;
        case TSR_TYPE_Q5_0: tsr_impl::dequantize_row_q5_0((const tsr_block_q5_0 *)src, dst, n); break;
        case TSR_TYPE_Q5_1: tsr_impl::dequantize_row_q5_1((const tsr_block_q5_1 *)src, dst, n); break;
        case TSR_TYPE_Q2_K: tsr_impl::dequantize_row_q2_K((const tsr_block_q2_K *)src, dst, n); break;
        case TSR_TYPE_Q3_K: tsr_impl::dequantize_row_q3_K((const tsr_block_q3_K *)src, dst, n); break;
        case TSR_TYPE_Q4_K: tsr_impl::dequantize_row_q4_K((const tsr_block_q4_K *)src, dst, n); break;
        case TSR_TYPE_Q5_K: tsr_impl::dequantize_row_q5_K((const tsr_block_q5_K *)src, dst, n); break;
        case TSR_TYPE_Q6_K: tsr_impl::dequantize_row_q6_K((const tsr_block_q6_K *)src, dst, n); break;
        case TSR_TYPE_Q8_K: tsr_impl::dequantize_row_q8_K((const tsr_block_q8_K *)src, dst, n); break;
        case TSR_TYPE_IQ4_NL: tsr_impl::dequantize_row_iq4_nl((const tsr_block_iq4_nl *)src, dst, n); break;
        default: return tsr_set_error("tsr_to_float_row: unsupported type %s", tsr_type_name(type));
    }
    return true;
}

TSR_API_IMPL bool tsr_from_float_row(enum tsr_type type, const float * src, void * dst, int64_t n) {
    if (!tsr_impl::check_row("tsr_from_float_row", type, n)) return false;
    if (n == 0) return true; /* an empty row: src and dst may be NULL (memcpy may not get NULL) */
    if (!src || !dst) return tsr_set_error("tsr_from_float_row: NULL src or dst");
    switch (type) {
        case TSR_TYPE_F32:  memcpy(dst, src, (size_t)n * sizeof(float)); break;
        case TSR_TYPE_F16:  tsr_fp32_to_fp16_row(src, (tsr_fp16_t *)dst, n); break;
        case TSR_TYPE_BF16: tsr_fp32_to_bf16_row(src, (tsr_bf16_t *)dst, n); break;
        case TSR_TYPE_I32:
            for (int64_t i = 0; i < n; i++) ((int32_t *)dst)[i] = (int32_t)std::lround(src[i]);
            break;
        case TSR_TYPE_Q8_0: tsr_impl::quantize_row_q8_0(src, (tsr_block_q8_0 *)dst, n); break;
        case TSR_TYPE_Q4_0: tsr_impl::quantize_row_q4_0(src, (tsr_block_q4_0 *)dst, n); break;
        case TSR_TYPE_Q4_1: tsr_impl::quantize_row_q4_1(src, (tsr_block_q4_1 *)dst, n); break;
        case TSR_TYPE_Q5_0: tsr_impl::quantize_row_q5_0(src, (tsr_block_q5_0 *)dst, n); break;
        case TSR_TYPE_Q5_1: tsr_impl::quantize_row_q5_1(src, (tsr_block_q5_1 *)dst, n); break;
        case TSR_TYPE_Q2_K: tsr_impl::quantize_row_q2_K(src, (tsr_block_q2_K *)dst, n); break;
        case TSR_TYPE_Q3_K: tsr_impl::quantize_row_q3_K(src, (tsr_block_q3_K *)dst, n); break;
        case TSR_TYPE_Q4_K: tsr_impl::quantize_row_q4_K(src, (tsr_block_q4_K *)dst, n); break;
        case TSR_TYPE_Q5_K: tsr_impl::quantize_row_q5_K(src, (tsr_block_q5_K *)dst, n); break;
        case TSR_TYPE_Q6_K: tsr_impl::quantize_row_q6_K(src, (tsr_block_q6_K *)dst, n); break;
        case TSR_TYPE_Q8_K: tsr_impl::quantize_row_q8_K(src, (tsr_block_q8_K *)dst, n); break;
        case TSR_TYPE_IQ4_NL: tsr_impl::quantize_row_iq4_nl(src, (tsr_block_iq4_nl *)dst, n); break;
        default: return tsr_set_error("tsr_from_float_row: unsupported type %s", tsr_type_name(type));
    }
    return true;
}

TSR_API_IMPL size_t tsr_quantize_chunk(enum tsr_type type, const float * src, void * dst,
                                       int64_t start, int64_t nrows, int64_t n_per_row,
                                       const float * imatrix) {
    (void)imatrix;
    if (!tsr_impl::check_row("tsr_quantize_chunk", type, n_per_row)) return 0;
    if (type == TSR_TYPE_I32) {
        tsr_set_error("tsr_quantize_chunk: cannot quantize to i32");
        return 0;
    }
    if (n_per_row <= 0 || nrows < 0 || start < 0 || start % n_per_row != 0) {
        tsr_set_error("tsr_quantize_chunk: start %lld must be a multiple of n_per_row %lld (nrows %lld)",
                      (long long)start, (long long)n_per_row, (long long)nrows);
        return 0;
    }
    if (nrows > 0 && (!src || !dst)) {
        tsr_set_error("tsr_quantize_chunk: NULL src or dst");
        return 0;
    }
    const size_t row_size = tsr_row_size(type, n_per_row);
    const int64_t start_row = start / n_per_row;
    for (int64_t r = 0; r < nrows; r++) {
        tsr_from_float_row(type, src + start + r * n_per_row,
                           (char *)dst + (size_t)(start_row + r) * row_size, n_per_row);
    }
    return (size_t)nrows * row_size;
}
/* ---- include/tessera/impl/context.inl ---- */
/* context.inl - the context arena: one block, objects bump-allocated in it. */

TSR_IMPL_NS_BEGIN

/* Bytes of the graph object's payload (unpadded), see struct tsr_cgraph. */
static inline size_t graph_hash_size(size_t size) {
    size_t h = 1;
    while (h <= 2 * size) h <<= 1;  /* power of two strictly above 2*size: never full */
    return h;
}

static inline size_t graph_nbytes(size_t size, bool grads) {
    size_t n = TSR_PAD(sizeof(struct tsr_cgraph), sizeof(void *));
    n += 2 * size * sizeof(struct tsr_tensor *);                      /* nodes, leafs */
    n += graph_hash_size(size) * sizeof(struct tsr_tensor *);         /* visited set */
    if (grads) n += 2 * size * sizeof(struct tsr_tensor *);           /* grads, grad_accs */
    n += (2 * size + 1) * sizeof(struct tsr_graph_visit);              /* DFS stack */
    return n;
}

/* Allocate an object with `size` payload bytes (padded). NULL + error naming the
 * context size, the bytes used and the bytes requested when it does not fit; the
 * context is unchanged then. */
static inline struct tsr_object * new_object(struct tsr_context * ctx, enum tsr_object_type type, size_t size,
                                             const char * what) {
    const size_t cur_end = ctx->objects_end ? ctx->objects_end->offs + ctx->objects_end->size : 0;
    if (size > SIZE_MAX / 2) {
        tsr_set_error("tsr context: out of memory for %s: %zu bytes requested (context size %zu, %zu used)",
                      what, size, ctx->mem_size, cur_end);
        return nullptr;
    }
    const size_t size_needed = TSR_PAD(size, TSR_MEM_ALIGN);
    const size_t need = TSR_OBJECT_SIZE + size_needed;
    if (need > ctx->mem_size || cur_end > ctx->mem_size - need) {
        tsr_set_error("tsr context: out of memory for %s: context size %zu bytes, %zu used, %zu requested "
                      "(%zu free)", what, ctx->mem_size, cur_end, need, ctx->mem_size - cur_end);
        return nullptr;
    }
    char * base = (char *)ctx->mem_buffer;
    struct tsr_object * obj = (struct tsr_object *)(base + cur_end);
    obj->offs = cur_end + TSR_OBJECT_SIZE;
    obj->size = size_needed;
    obj->next = nullptr;
    obj->type = type;
    if (ctx->objects_end) {
        ctx->objects_end->next = obj;
    } else {
        ctx->objects_begin = obj;
    }
    ctx->objects_end = obj;
    ctx->n_objects++;
    return obj;
}

static inline struct tsr_object * object_of(const struct tsr_tensor * t) {
    return (struct tsr_object *)((char *)const_cast<struct tsr_tensor *>(t) - TSR_OBJECT_SIZE);
}

TSR_IMPL_NS_END

TSR_API_IMPL size_t tsr_tensor_overhead(void) { return TSR_OBJECT_SIZE + TSR_TENSOR_SIZE; }

TSR_API_IMPL size_t tsr_graph_overhead_custom(size_t size, bool grads) {
    return TSR_OBJECT_SIZE + TSR_PAD(tsr_impl::graph_nbytes(size, grads), TSR_MEM_ALIGN);
}

TSR_API_IMPL size_t tsr_graph_overhead(void) { return tsr_graph_overhead_custom(TSR_DEFAULT_GRAPH_SIZE, false); }

TSR_API_IMPL struct tsr_context * tsr_init(struct tsr_init_params params) {
    if (params.mem_buffer && ((uintptr_t)params.mem_buffer % TSR_MEM_ALIGN) != 0) {
        tsr_set_error("tsr_init: mem_buffer %p is not aligned to TSR_MEM_ALIGN (%d bytes)",
                      params.mem_buffer, TSR_MEM_ALIGN);
        return nullptr;
    }
    if (params.mem_size > SIZE_MAX / 2) {
        tsr_set_error("tsr_init: mem_size %zu is too large", params.mem_size);
        return nullptr;
    }
    struct tsr_context * ctx = new (std::nothrow) tsr_context();
    if (!ctx) {
        tsr_set_error("tsr_init: out of host memory for the context struct");
        return nullptr;
    }
    ctx->mem_size = params.mem_size;
    ctx->no_alloc = params.no_alloc;
    ctx->n_objects = 0;
    ctx->objects_begin = nullptr;
    ctx->objects_end = nullptr;
    if (params.mem_buffer) {
        ctx->mem_buffer = params.mem_buffer;
        ctx->mem_buffer_owned = false;
    } else if (params.mem_size > 0) {
        ctx->mem_buffer = TSR_MALLOC(TSR_PAD(params.mem_size, TSR_MEM_ALIGN), TSR_MEM_ALIGN);
        if (!ctx->mem_buffer) {
            tsr_set_error("tsr_init: could not allocate a block of %zu bytes", params.mem_size);
            delete ctx;
            return nullptr;
        }
        if (((uintptr_t)ctx->mem_buffer % TSR_MEM_ALIGN) != 0) {
            TSR_FREE(ctx->mem_buffer);
            delete ctx;
            tsr_set_error("tsr_init: TSR_MALLOC returned memory not aligned to %d bytes", TSR_MEM_ALIGN);
            return nullptr;
        }
        ctx->mem_buffer_owned = true;
    } else {
        ctx->mem_buffer = nullptr;  /* an empty context: every creation fails with an error */
        ctx->mem_buffer_owned = false;
    }
    return ctx;
}

TSR_API_IMPL void tsr_free(struct tsr_context * ctx) {
    if (!ctx) return;
    if (ctx->mem_buffer_owned) TSR_FREE(ctx->mem_buffer);
    delete ctx;
}

TSR_API_IMPL void tsr_reset(struct tsr_context * ctx) {
    if (!ctx) return;
    ctx->n_objects = 0;
    ctx->objects_begin = nullptr;
    ctx->objects_end = nullptr;
}

TSR_API_IMPL size_t tsr_used_mem(const struct tsr_context * ctx) {
    if (!ctx || !ctx->objects_end) return 0;
    return ctx->objects_end->offs + ctx->objects_end->size;
}

TSR_API_IMPL size_t tsr_get_mem_size(const struct tsr_context * ctx) { return ctx ? ctx->mem_size : 0; }
TSR_API_IMPL void * tsr_get_mem_buffer(const struct tsr_context * ctx) { return ctx ? ctx->mem_buffer : nullptr; }
TSR_API_IMPL bool tsr_get_no_alloc(const struct tsr_context * ctx) { return ctx ? ctx->no_alloc : false; }
TSR_API_IMPL void tsr_set_no_alloc(struct tsr_context * ctx, bool no_alloc) {
    if (ctx) ctx->no_alloc = no_alloc;
}

TSR_API_IMPL struct tsr_tensor * tsr_get_first_tensor(const struct tsr_context * ctx) {
    if (!ctx) return nullptr;
    for (struct tsr_object * obj = ctx->objects_begin; obj; obj = obj->next) {
        if (obj->type == TSR_OBJECT_TYPE_TENSOR) return (struct tsr_tensor *)((char *)ctx->mem_buffer + obj->offs);
    }
    return nullptr;
}

TSR_API_IMPL struct tsr_tensor * tsr_get_next_tensor(const struct tsr_context * ctx, struct tsr_tensor * t) {
    if (!ctx || !t) return nullptr;
    for (struct tsr_object * obj = tsr_impl::object_of(t)->next; obj; obj = obj->next) {
        if (obj->type == TSR_OBJECT_TYPE_TENSOR) return (struct tsr_tensor *)((char *)ctx->mem_buffer + obj->offs);
    }
    return nullptr;
}

TSR_API_IMPL struct tsr_tensor * tsr_get_tensor(struct tsr_context * ctx, const char * name) {
    if (!ctx || !name) return nullptr;
    for (struct tsr_tensor * t = tsr_get_first_tensor(ctx); t; t = tsr_get_next_tensor(ctx, t)) {
        if (strcmp(t->name, name) == 0) return t;
    }
    return nullptr;
}

TSR_API_IMPL size_t tsr_get_max_tensor_size(const struct tsr_context * ctx) {
    size_t m = 0;
    for (struct tsr_tensor * t = tsr_get_first_tensor(ctx); t; t = tsr_get_next_tensor(ctx, t)) {
        const size_t n = tsr_nbytes(t);
        if (n > m) m = n;
    }
    return m;
}
/* ---- include/tessera/impl/tensor.inl ---- */
/* tensor.inl - tensor creation, queries, names, flags, op params, element access, views. */

static inline size_t tsr_impl_nbytes(enum tsr_type type, const int64_t * ne, const size_t * nb) {
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (ne[i] <= 0) return 0;
    }
    const int64_t blck = tsr_blck_size(type);
    size_t n;
    if (blck == 1) {
        n = tsr_type_size(type);
        for (int i = 0; i < TSR_MAX_DIMS; i++) n += (size_t)(ne[i] - 1) * nb[i];
    } else {
        n = (size_t)(ne[0] / blck) * nb[0];
        for (int i = 1; i < TSR_MAX_DIMS; i++) n += (size_t)(ne[i] - 1) * nb[i];
    }
    return n;
}

/* tsr_impl_nbytes for user-given ne (>= 0) and strides: false when the extent overflows size_t. */
static inline bool tsr_impl_nbytes_checked(enum tsr_type type, const int64_t * ne, const size_t * nb, size_t * out) {
    *out = 0;
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (ne[i] <= 0) return true;
    }
    const int64_t blck = tsr_blck_size(type);
    size_t n = blck == 1 ? tsr_type_size(type) : 0;
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        const uint64_t k = (i == 0 && blck != 1) ? (uint64_t)(ne[0] / blck) : (uint64_t)(ne[i] - 1);
        if (k != 0 && nb[i] != 0 && k > SIZE_MAX / nb[i]) return false;
        const size_t term = (size_t)k * nb[i];
        if (term > SIZE_MAX - n) return false;
        n += term;
    }
    *out = n;
    return true;
}

/* Elements of a user-given shape of non-negative dims: false when there are more than
 * INT64_MAX (a shape with a 0 dim holds 0 elements, however large the others). */
static inline bool tsr_impl_count_elements(int n_dims, const int64_t * ne, int64_t * out) {
    *out = 0;
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] == 0) return true;
    }
    int64_t n = 1;
    for (int i = 0; i < n_dims; i++) {
        if (n > INT64_MAX / ne[i]) return false;
        n *= ne[i];
    }
    *out = n;
    return true;
}

static inline void tsr_impl_contiguous_nb(enum tsr_type type, const int64_t * ne, size_t * nb) {
    nb[0] = tsr_type_size(type);
    nb[1] = nb[0] * (size_t)(ne[0] / tsr_blck_size(type));
    for (int i = 2; i < TSR_MAX_DIMS; i++) nb[i] = nb[i - 1] * (size_t)ne[i - 1];
}

static inline tsr_impl_desc tsr_impl_describe(const struct tsr_tensor * t) {
    tsr_impl_desc d;
    if (!t) {
        snprintf(d.s, sizeof(d.s), "(null)");
    } else {
        snprintf(d.s, sizeof(d.s), "'%s' %s [%lld, %lld, %lld, %lld]", t->name, tsr_type_name(t->type),
                 (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    }
    return d;
}

static inline struct tsr_tensor * tsr_impl_new_tensor_nb(struct tsr_context * ctx, enum tsr_type type, int n_dims,
                                                         const int64_t * ne_in, const size_t * nb_in,
                                                         struct tsr_tensor * view_src, size_t view_offs) {
    if (!ctx) {
        tsr_set_error("tsr_new_tensor: NULL context");
        return nullptr;
    }
    if (!tsr_is_valid_type(type)) {
        tsr_set_error("tsr_new_tensor: unknown type %d", (int)type);
        return nullptr;
    }
    if (n_dims < 1 || n_dims > TSR_MAX_DIMS || !ne_in) {
        tsr_set_error("tsr_new_tensor: n_dims %d out of range [1, %d] (or NULL ne)", n_dims, TSR_MAX_DIMS);
        return nullptr;
    }
    int64_t ne[TSR_MAX_DIMS] = {1, 1, 1, 1};
    /* a 0 dim counts as 1 here: with it the tensor is empty, but tsr_nelements and
     * tsr_nrows still multiply the other dims, which must not overflow int64 */
    double extent = 1.0;
    for (int i = 0; i < n_dims; i++) {
        ne[i] = ne_in[i];
        if (ne[i] < 0 || ne[i] > TSR_IMPL_MAX_NE) {
            tsr_set_error("tsr_new_tensor: ne[%d] = %lld out of range", i, (long long)ne[i]);
            return nullptr;
        }
        extent *= (double)(ne[i] > 0 ? ne[i] : 1);
    }
    if (extent * (double)tsr_type_size(type) > 4.0e18) {
        tsr_set_error("tsr_new_tensor: shape [%lld, %lld, %lld, %lld] is too large (%.0f elements without its 0 dims)",
                      (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3], extent);
        return nullptr;
    }
    const int64_t blck = tsr_blck_size(type);
    if (!nb_in && ne[0] % blck != 0) {
        tsr_set_error("tsr_new_tensor: ne[0] = %lld is not a multiple of %s's block size %lld",
                      (long long)ne[0], tsr_type_name(type), (long long)blck);
        return nullptr;
    }
    size_t nb[TSR_MAX_DIMS];
    if (nb_in) {
        for (int i = 0; i < TSR_MAX_DIMS; i++) nb[i] = nb_in[i];
    } else {
        tsr_impl_contiguous_nb(type, ne, nb);
    }
    const size_t data_size = tsr_impl_nbytes(type, ne, nb);

    if (view_src) {
        if (view_src->view_src) { /* views of views point at the root source */
            view_offs += view_src->view_offs;
            view_src = view_src->view_src;
        }
        const size_t src_size = tsr_nbytes(view_src);
        if (data_size > 0 && (view_offs > src_size || data_size > src_size - view_offs)) {
            tsr_set_error("tsr view: view of %zu bytes at offset %zu lies outside its source %s (%zu bytes)",
                          data_size, view_offs, tsr_impl_describe(view_src).s, src_size);
            return nullptr;
        }
    }

    size_t obj_size = TSR_TENSOR_SIZE;
    const bool own_data = view_src == nullptr && !ctx->no_alloc;
    if (own_data) obj_size += TSR_PAD(data_size, TSR_MEM_ALIGN);

    struct tsr_object * obj = tsr_impl::new_object(ctx, TSR_OBJECT_TYPE_TENSOR, obj_size, "a tensor");
    if (!obj) return nullptr;

    struct tsr_tensor * t = (struct tsr_tensor *)((char *)ctx->mem_buffer + obj->offs);
    memset(t, 0, sizeof(*t));
    t->type = type;
    t->buffer = view_src ? view_src->buffer : nullptr;
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        t->ne[i] = ne[i];
        t->nb[i] = nb[i];
    }
    t->op = TSR_OP_NONE;
    t->view_src = view_src;
    t->view_offs = view_offs;
    if (view_src) {
        t->data = view_src->data ? (char *)view_src->data + view_offs : nullptr;
    } else if (own_data) {
        t->data = (char *)t + TSR_TENSOR_SIZE;
    }
    return t;
}

static inline struct tsr_tensor * tsr_impl_new_tensor_impl(struct tsr_context * ctx, enum tsr_type type, int n_dims,
                                                           const int64_t * ne, struct tsr_tensor * view_src, size_t view_offs) {
    return tsr_impl_new_tensor_nb(ctx, type, n_dims, ne, nullptr, view_src, view_offs);
}

static inline void tsr_impl_set_op(struct tsr_tensor * t, enum tsr_op op, struct tsr_tensor * s0,
                                   struct tsr_tensor * s1, struct tsr_tensor * s2, struct tsr_tensor * s3) {
    t->op = op;
    t->src[0] = s0;
    t->src[1] = s1;
    t->src[2] = s2;
    t->src[3] = s3;
}

TSR_API_IMPL struct tsr_tensor * tsr_new_tensor(struct tsr_context * ctx, enum tsr_type type, int n_dims, const int64_t * ne) {
    return tsr_impl_new_tensor_impl(ctx, type, n_dims, ne, nullptr, 0);
}
TSR_API_IMPL struct tsr_tensor * tsr_new_tensor_1d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0) {
    return tsr_new_tensor(ctx, type, 1, &ne0);
}
TSR_API_IMPL struct tsr_tensor * tsr_new_tensor_2d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return tsr_new_tensor(ctx, type, 2, ne);
}
TSR_API_IMPL struct tsr_tensor * tsr_new_tensor_3d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return tsr_new_tensor(ctx, type, 3, ne);
}
TSR_API_IMPL struct tsr_tensor * tsr_new_tensor_4d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return tsr_new_tensor(ctx, type, 4, ne);
}

TSR_API_IMPL struct tsr_tensor * tsr_new_i32(struct tsr_context * ctx, int32_t value) {
    if (ctx && ctx->no_alloc) {
        tsr_set_error("tsr_new_i32: the context is no_alloc, a scalar needs data");
        return nullptr;
    }
    struct tsr_tensor * t = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 1);
    if (t) memcpy(t->data, &value, sizeof(value));
    return t;
}

TSR_API_IMPL struct tsr_tensor * tsr_new_f32(struct tsr_context * ctx, float value) {
    if (ctx && ctx->no_alloc) {
        tsr_set_error("tsr_new_f32: the context is no_alloc, a scalar needs data");
        return nullptr;
    }
    struct tsr_tensor * t = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 1);
    if (t) memcpy(t->data, &value, sizeof(value));
    return t;
}

TSR_API_IMPL struct tsr_tensor * tsr_dup_tensor(struct tsr_context * ctx, const struct tsr_tensor * src) {
    if (!src) {
        tsr_set_error("tsr_dup_tensor: NULL source");
        return nullptr;
    }
    return tsr_new_tensor(ctx, src->type, TSR_MAX_DIMS, src->ne);
}

/* ---- queries ---------------------------------------------------------------------------- */

TSR_API_IMPL int64_t tsr_nelements(const struct tsr_tensor * t) {
    return t ? t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] : 0;
}
TSR_API_IMPL int64_t tsr_nrows(const struct tsr_tensor * t) { return t ? t->ne[1] * t->ne[2] * t->ne[3] : 0; }
TSR_API_IMPL size_t tsr_nbytes(const struct tsr_tensor * t) { return t ? tsr_impl_nbytes(t->type, t->ne, t->nb) : 0; }
TSR_API_IMPL size_t tsr_element_size(const struct tsr_tensor * t) { return t ? tsr_type_size(t->type) : 0; }

TSR_API_IMPL int tsr_n_dims(const struct tsr_tensor * t) {
    if (!t) return 0;
    for (int i = TSR_MAX_DIMS - 1; i >= 1; --i) {
        if (t->ne[i] > 1) return i + 1;
    }
    return 1;
}

TSR_IMPL_NS_BEGIN
/* ggml_is_contiguous_n: dims <= n need not be contiguous with the next. */
static inline bool is_contiguous_n(const struct tsr_tensor * t, int n) {
    size_t next_nb = tsr_type_size(t->type);
    if (t->ne[0] != tsr_blck_size(t->type) && t->nb[0] != next_nb) return false;
    next_nb *= (size_t)(t->ne[0] / tsr_blck_size(t->type));
    for (int i = 1; i < TSR_MAX_DIMS; i++) {
        if (t->ne[i] != 1) {
            if (i > n) {
                if (t->nb[i] != next_nb) return false;
                next_nb *= (size_t)t->ne[i];
            } else {
                next_nb = (size_t)t->ne[i] * t->nb[i];
            }
        }
    }
    return true;
}
TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_is_contiguous(const struct tsr_tensor * t) { return t && tsr_impl::is_contiguous_n(t, 0); }
TSR_API_IMPL bool tsr_is_contiguous_rows(const struct tsr_tensor * t) {
    return t && (t->ne[0] == tsr_blck_size(t->type) || t->nb[0] == tsr_type_size(t->type));
}
TSR_API_IMPL bool tsr_is_transposed(const struct tsr_tensor * t) { return t && t->nb[0] > t->nb[1]; }
TSR_API_IMPL bool tsr_is_permuted(const struct tsr_tensor * t) {
    return t && (t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3]);
}
TSR_API_IMPL bool tsr_is_view(const struct tsr_tensor * t) { return t && t->view_src != nullptr; }
TSR_API_IMPL bool tsr_is_empty(const struct tsr_tensor * t) {
    if (!t) return true;
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (t->ne[i] == 0) return true;
    }
    return false;
}
TSR_API_IMPL bool tsr_is_scalar(const struct tsr_tensor * t) {
    return t && t->ne[0] == 1 && t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1;
}
TSR_API_IMPL bool tsr_are_same_shape(const struct tsr_tensor * a, const struct tsr_tensor * b) {
    if (!a || !b) return false;
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (a->ne[i] != b->ne[i]) return false;
    }
    return true;
}
TSR_API_IMPL bool tsr_are_same_stride(const struct tsr_tensor * a, const struct tsr_tensor * b) {
    if (!a || !b) return false;
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (a->nb[i] != b->nb[i]) return false;
    }
    return true;
}
TSR_API_IMPL bool tsr_can_repeat(const struct tsr_tensor * a, const struct tsr_tensor * b) {
    if (!a || !b) return false;
    if (tsr_is_empty(a)) return tsr_is_empty(b);
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (b->ne[i] % a->ne[i] != 0) return false;
    }
    return true;
}

/* ---- names, flags, op params ------------------------------------------------------------ */

TSR_API_IMPL const char * tsr_get_name(const struct tsr_tensor * t) { return t ? t->name : ""; }

TSR_API_IMPL struct tsr_tensor * tsr_set_name(struct tsr_tensor * t, const char * name) {
    if (!t) return nullptr;
    if (!name) name = "";
    size_t n = strlen(name);
    if (n >= sizeof(t->name)) n = sizeof(t->name) - 1;
    memmove(t->name, name, n);
    t->name[n] = '\0';
    return t;
}

TSR_API_IMPL struct tsr_tensor * tsr_format_name(struct tsr_tensor * t, const char * fmt, ...) {
    if (!t) return nullptr;
    if (!fmt) return tsr_set_name(t, "");
    char buf[TSR_MAX_NAME * 2];
    va_list args;
    va_start(args, fmt);
    const int n = vsnprintf(buf, sizeof(buf), fmt, args);
    va_end(args);
    if (n < 0) buf[0] = '\0';
    return tsr_set_name(t, buf);
}

TSR_API_IMPL void tsr_set_input(struct tsr_tensor * t) { if (t) t->flags |= TSR_TENSOR_FLAG_INPUT; }
TSR_API_IMPL void tsr_set_output(struct tsr_tensor * t) { if (t) t->flags |= TSR_TENSOR_FLAG_OUTPUT; }
TSR_API_IMPL void tsr_set_param(struct tsr_tensor * t) { if (t) t->flags |= TSR_TENSOR_FLAG_PARAM; }

TSR_API_IMPL bool tsr_set_op_params(struct tsr_tensor * t, const void * params, size_t size) {
    if (!t || (!params && size > 0)) return tsr_set_error("tsr_set_op_params: NULL tensor or params");
    if (size > TSR_MAX_OP_PARAMS) {
        return tsr_set_error("tsr_set_op_params: %zu bytes exceed TSR_MAX_OP_PARAMS (%d)", size, TSR_MAX_OP_PARAMS);
    }
    if (size > 0) memcpy(t->op_params, params, size);
    return true;
}

#define TSR_IMPL_N_OP_PARAMS ((uint32_t)(TSR_MAX_OP_PARAMS / sizeof(int32_t)))

TSR_API_IMPL int32_t tsr_get_op_params_i32(const struct tsr_tensor * t, uint32_t i) {
    return (t && i < TSR_IMPL_N_OP_PARAMS) ? t->op_params[i] : 0;
}
TSR_API_IMPL float tsr_get_op_params_f32(const struct tsr_tensor * t, uint32_t i) {
    if (!t || i >= TSR_IMPL_N_OP_PARAMS) return 0.0f;
    float f;
    memcpy(&f, &t->op_params[i], sizeof(f));
    return f;
}
TSR_API_IMPL void tsr_set_op_params_i32(struct tsr_tensor * t, uint32_t i, int32_t value) {
    if (t && i < TSR_IMPL_N_OP_PARAMS) t->op_params[i] = value;
}
TSR_API_IMPL void tsr_set_op_params_f32(struct tsr_tensor * t, uint32_t i, float value) {
    if (t && i < TSR_IMPL_N_OP_PARAMS) memcpy(&t->op_params[i], &value, sizeof(value));
}
TSR_API_IMPL enum tsr_unary_op tsr_get_unary_op(const struct tsr_tensor * t) {
    return (enum tsr_unary_op)tsr_get_op_params_i32(t, 0);
}
TSR_API_IMPL enum tsr_glu_op tsr_get_glu_op(const struct tsr_tensor * t) {
    return (enum tsr_glu_op)tsr_get_op_params_i32(t, 0);
}

/* ---- element access ----------------------------------------------------------------------- */

TSR_IMPL_NS_BEGIN
static inline bool elem_ptr(const struct tsr_tensor * t, const int64_t * idx, const char * fn, char ** out) {
    if (!t) return tsr_set_error("%s: NULL tensor", fn);
    if (!t->data) return tsr_set_error("%s: tensor %s has no host data", fn, tsr_impl_describe(t).s);
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (idx[i] < 0 || idx[i] >= t->ne[i]) {
            return tsr_set_error("%s: index %lld out of range [0, %lld) in dim %d of %s", fn, (long long)idx[i],
                                 (long long)t->ne[i], i, tsr_impl_describe(t).s);
        }
    }
    const int64_t blck = tsr_blck_size(t->type);
    char * p = (char *)t->data + (size_t)(idx[0] / blck) * t->nb[0];
    for (int i = 1; i < TSR_MAX_DIMS; i++) p += (size_t)idx[i] * t->nb[i];
    *out = p;
    return true;
}
static inline void unravel(const struct tsr_tensor * t, int64_t i, int64_t * idx) {
    idx[0] = i % t->ne[0]; i /= t->ne[0];
    idx[1] = i % t->ne[1]; i /= t->ne[1];
    idx[2] = i % t->ne[2]; i /= t->ne[2];
    idx[3] = i;
}
TSR_IMPL_NS_END

TSR_API_IMPL float tsr_get_f32_nd(const struct tsr_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t idx[4] = {i0, i1, i2, i3};
    char * p = nullptr;
    if (!tsr_impl::elem_ptr(t, idx, "tsr_get_f32_nd", &p)) return NAN;
    switch (t->type) {
        case TSR_TYPE_F32: { float v; memcpy(&v, p, 4); return v; }
        case TSR_TYPE_F16: { tsr_fp16_t v; memcpy(&v, p, 2); return tsr_fp16_to_fp32(v); }
        case TSR_TYPE_BF16: { tsr_bf16_t v; memcpy(&v, p, 2); return tsr_bf16_to_fp32(v); }
        case TSR_TYPE_I32: { int32_t v; memcpy(&v, p, 4); return (float)v; }
        default: break;
    }
    if (tsr_is_quantized(t->type)) {
        const int64_t blck = tsr_blck_size(t->type);
        float blk[TSR_QK_K];  /* the largest block */
        tsr_to_float_row(t->type, p, blk, blck);
        return blk[i0 % blck];
    }
    tsr_set_error("tsr_get_f32_nd: unsupported type %s", tsr_type_name(t->type));
    return NAN;
}

TSR_API_IMPL void tsr_set_f32_nd(struct tsr_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
    const int64_t idx[4] = {i0, i1, i2, i3};
    char * p = nullptr;
    if (!tsr_impl::elem_ptr(t, idx, "tsr_set_f32_nd", &p)) return;
    switch (t->type) {
        case TSR_TYPE_F32: memcpy(p, &v, 4); return;
        case TSR_TYPE_F16: { tsr_fp16_t h = tsr_fp32_to_fp16(v); memcpy(p, &h, 2); return; }
        case TSR_TYPE_BF16: { tsr_bf16_t h = tsr_fp32_to_bf16(v); memcpy(p, &h, 2); return; }
        case TSR_TYPE_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); return; }
        default: break;
    }
    tsr_set_error("tsr_set_f32_nd: cannot set single elements of type %s", tsr_type_name(t->type));
}

TSR_API_IMPL float tsr_get_f32_1d(const struct tsr_tensor * t, int64_t i) {
    if (!t) { tsr_set_error("tsr_get_f32_1d: NULL tensor"); return NAN; }
    if (i < 0 || i >= tsr_nelements(t)) {
        tsr_set_error("tsr_get_f32_1d: index %lld out of range for %s", (long long)i, tsr_impl_describe(t).s);
        return NAN;
    }
    int64_t idx[4];
    tsr_impl::unravel(t, i, idx);
    return tsr_get_f32_nd(t, idx[0], idx[1], idx[2], idx[3]);
}

TSR_API_IMPL void tsr_set_f32_1d(struct tsr_tensor * t, int64_t i, float v) {
    if (!t) { tsr_set_error("tsr_set_f32_1d: NULL tensor"); return; }
    if (i < 0 || i >= tsr_nelements(t)) {
        tsr_set_error("tsr_set_f32_1d: index %lld out of range for %s", (long long)i, tsr_impl_describe(t).s);
        return;
    }
    int64_t idx[4];
    tsr_impl::unravel(t, i, idx);
    tsr_set_f32_nd(t, idx[0], idx[1], idx[2], idx[3], v);
}

/* ---- views ---------------------------------------------------------------------------------- */

TSR_API_IMPL struct tsr_tensor * tsr_view_tensor(struct tsr_context * ctx, struct tsr_tensor * src) {
    if (!src) {
        tsr_set_error("tsr_view_tensor: NULL source");
        return nullptr;
    }
    struct tsr_tensor * r = tsr_impl_new_tensor_nb(ctx, src->type, TSR_MAX_DIMS, src->ne, src->nb, src, 0);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (view)", src->name);
    return r;
}

TSR_IMPL_NS_BEGIN
/* ggml_view_impl: n_dims dims of ne at byte offset; nb1..3 given (0 for dims >= n_dims). */
static inline struct tsr_tensor * view_impl(struct tsr_context * ctx, struct tsr_tensor * a, int n_dims,
                                            const int64_t * ne_in, const size_t * nb_in, size_t offset) {
    if (!a) {
        tsr_set_error("tsr_view_%dd: NULL source", n_dims);
        return nullptr;
    }
    int64_t ne[TSR_MAX_DIMS] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++) ne[i] = ne_in[i];
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 0) {
            tsr_set_error("tsr_view_%dd: ne[%d] = %lld is negative", n_dims, i, (long long)ne[i]);
            return nullptr;
        }
    }
    if (ne[0] % tsr_blck_size(a->type) != 0) {
        tsr_set_error("tsr_view_%dd: ne0 %lld is not a multiple of the block size of %s", n_dims,
                      (long long)ne[0], tsr_impl_describe(a).s);
        return nullptr;
    }
    size_t nb[TSR_MAX_DIMS];
    nb[0] = tsr_type_size(a->type);
    for (int i = 1; i < TSR_MAX_DIMS; i++) {
        nb[i] = i < n_dims ? nb_in[i - 1] : nb[i - 1] * (size_t)ne[i - 1];
    }
    if (n_dims == 1) nb[1] = nb[0] * (size_t)(ne[0] / tsr_blck_size(a->type));
    for (int i = 2; i < TSR_MAX_DIMS; i++) {
        if (i >= n_dims) nb[i] = nb[i - 1] * (size_t)ne[i - 1];
    }
    /* kernels load whole elements (blocks), aligned to their size */
    const size_t esz = tsr_type_size(a->type);
    if (offset % esz != 0 || nb[1] % esz != 0 || nb[2] % esz != 0 || nb[3] % esz != 0) {
        tsr_set_error("tsr_view_%dd: offset %zu and strides [%zu, %zu, %zu] of a view of %s must be multiples of its "
                      "element size %zu", n_dims, offset, nb[1], nb[2], nb[3], tsr_impl_describe(a).s, esz);
        return nullptr;
    }
    size_t extent = 0;
    if (!tsr_impl_nbytes_checked(a->type, ne, nb, &extent)) {
        tsr_set_error("tsr_view_%dd: view [%lld, %lld, %lld, %lld] with strides [%zu, %zu, %zu, %zu] of %s overflows size_t",
                      n_dims, (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3], nb[0], nb[1], nb[2],
                      nb[3], tsr_impl_describe(a).s);
        return nullptr;
    }
    const size_t a_size = tsr_nbytes(a);
    if (extent > 0 && (offset > a_size || extent > a_size - offset)) {
        tsr_set_error("tsr_view_%dd: view [%lld, %lld, %lld, %lld] spanning %zu bytes at offset %zu lies outside "
                      "its source %s (%zu bytes)", n_dims, (long long)ne[0], (long long)ne[1], (long long)ne[2],
                      (long long)ne[3], extent, offset, tsr_impl_describe(a).s, a_size);
        return nullptr;
    }
    struct tsr_tensor * r = tsr_impl_new_tensor_nb(ctx, a->type, n_dims, ne, nb, a, offset);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (view)", a->name);
    tsr_set_op_params(r, &offset, sizeof(offset));
    tsr_impl_set_op(r, TSR_OP_VIEW, a);
    return r;
}
TSR_IMPL_NS_END

/* TSR_OP_VIEW op_params: size_t offset (bytes, relative to the viewed tensor a = src[0]). */
TSR_API_IMPL struct tsr_tensor * tsr_view_1d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, size_t offset) {
    const int64_t ne[1] = {ne0};
    return tsr_impl::view_impl(ctx, a, 1, ne, nullptr, offset);
}
TSR_API_IMPL struct tsr_tensor * tsr_view_2d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1,
                                             size_t nb1, size_t offset) {
    const int64_t ne[2] = {ne0, ne1};
    const size_t nb[1] = {nb1};
    return tsr_impl::view_impl(ctx, a, 2, ne, nb, offset);
}
TSR_API_IMPL struct tsr_tensor * tsr_view_3d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1,
                                             int64_t ne2, size_t nb1, size_t nb2, size_t offset) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    const size_t nb[2] = {nb1, nb2};
    return tsr_impl::view_impl(ctx, a, 3, ne, nb, offset);
}
TSR_API_IMPL struct tsr_tensor * tsr_view_4d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1,
                                             int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    const size_t nb[3] = {nb1, nb2, nb3};
    return tsr_impl::view_impl(ctx, a, 4, ne, nb, offset);
}

TSR_IMPL_NS_BEGIN
/* TSR_OP_RESHAPE: no op_params. */
static inline struct tsr_tensor * reshape_impl(struct tsr_context * ctx, struct tsr_tensor * a, int n_dims, const int64_t * ne) {
    if (!a) {
        tsr_set_error("tsr_reshape: NULL source");
        return nullptr;
    }
    if (!tsr_is_contiguous(a)) {
        tsr_set_error("tsr_reshape: source %s is not contiguous", tsr_impl_describe(a).s);
        return nullptr;
    }
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 0) {
            tsr_set_error("tsr_reshape: ne[%d] = %lld is negative", i, (long long)ne[i]);
            return nullptr;
        }
    }
    int64_t n = 0;
    if (!tsr_impl_count_elements(n_dims, ne, &n)) {
        tsr_set_error("tsr_reshape: shape [%lld, ...] of %d dims has more than INT64_MAX elements", (long long)ne[0], n_dims);
        return nullptr;
    }
    if (n != tsr_nelements(a)) {
        tsr_set_error("tsr_reshape: %lld elements requested, source %s has %lld", (long long)n,
                      tsr_impl_describe(a).s, (long long)tsr_nelements(a));
        return nullptr;
    }
    struct tsr_tensor * r = tsr_impl_new_tensor_impl(ctx, a->type, n_dims, ne, a, 0);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (reshaped)", a->name);
    tsr_impl_set_op(r, TSR_OP_RESHAPE, a);
    return r;
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_reshape(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!b) {
        tsr_set_error("tsr_reshape: NULL shape tensor");
        return nullptr;
    }
    return tsr_impl::reshape_impl(ctx, a, TSR_MAX_DIMS, b->ne);
}
TSR_API_IMPL struct tsr_tensor * tsr_reshape_1d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0) {
    return tsr_impl::reshape_impl(ctx, a, 1, &ne0);
}
TSR_API_IMPL struct tsr_tensor * tsr_reshape_2d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return tsr_impl::reshape_impl(ctx, a, 2, ne);
}
TSR_API_IMPL struct tsr_tensor * tsr_reshape_3d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return tsr_impl::reshape_impl(ctx, a, 3, ne);
}
TSR_API_IMPL struct tsr_tensor * tsr_reshape_4d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1,
                                                int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return tsr_impl::reshape_impl(ctx, a, 4, ne);
}

/* TSR_OP_PERMUTE op_params: i32 axis0, axis1, axis2, axis3. */
TSR_API_IMPL struct tsr_tensor * tsr_permute(struct tsr_context * ctx, struct tsr_tensor * a, int axis0, int axis1, int axis2, int axis3) {
    if (!a) {
        tsr_set_error("tsr_permute: NULL source");
        return nullptr;
    }
    const int axes[4] = {axis0, axis1, axis2, axis3};
    for (int i = 0; i < 4; i++) {
        if (axes[i] < 0 || axes[i] >= TSR_MAX_DIMS) {
            tsr_set_error("tsr_permute: axis%d = %d out of range [0, 4)", i, axes[i]);
            return nullptr;
        }
        for (int j = 0; j < i; j++) {
            if (axes[i] == axes[j]) {
                tsr_set_error("tsr_permute: axes (%d, %d, %d, %d) repeat axis %d", axis0, axis1, axis2, axis3, axes[i]);
                return nullptr;
            }
        }
    }
    int64_t ne[4];
    size_t nb[4];
    for (int i = 0; i < 4; i++) {
        ne[axes[i]] = a->ne[i];
        nb[axes[i]] = a->nb[i];
    }
    struct tsr_tensor * r = tsr_impl_new_tensor_nb(ctx, a->type, TSR_MAX_DIMS, ne, nb, a, 0);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (permuted)", a->name);
    tsr_impl_set_op(r, TSR_OP_PERMUTE, a);
    tsr_set_op_params(r, axes, sizeof(axes));
    return r;
}

/* TSR_OP_TRANSPOSE: no op_params (swaps dims 0 and 1). */
TSR_API_IMPL struct tsr_tensor * tsr_transpose(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!a) {
        tsr_set_error("tsr_transpose: NULL source");
        return nullptr;
    }
    const int64_t ne[4] = {a->ne[1], a->ne[0], a->ne[2], a->ne[3]};
    const size_t nb[4] = {a->nb[1], a->nb[0], a->nb[2], a->nb[3]};
    struct tsr_tensor * r = tsr_impl_new_tensor_nb(ctx, a->type, TSR_MAX_DIMS, ne, nb, a, 0);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (transposed)", a->name);
    tsr_impl_set_op(r, TSR_OP_TRANSPOSE, a);
    return r;
}
/* ---- include/tessera/impl/ops.inl ---- */
/* ops.inl - op construction: validation, result-shape inference and op_params.
 *
 * Every op validates all its inputs BEFORE it creates its result, so a failed op returns
 * NULL with a message and consumes no arena memory. Shapes and op_params follow ggml; the
 * op_params layout of every op is written next to it (slot = 32-bit index) and collected
 * in docs/ops.md. */

#define TSR_IMPL_FAIL(...)                 \
    do {                                   \
        tsr_set_error(__VA_ARGS__);        \
        return nullptr;                    \
    } while (0)
#define TSR_IMPL_REQUIRE(cond, ...)        \
    do {                                   \
        if (!(cond)) TSR_IMPL_FAIL(__VA_ARGS__); \
    } while (0)
#define TSR_IMPL_D(t) tsr_impl_describe(t).s

/* Each op's name and symbol, by enumerator: a new op without them does not build (-Wswitch),
 * and none can shift the others. false: not an op. */
static bool tsr_impl_op_text(enum tsr_op op, const char ** name, const char ** symbol) {
    switch (op) {
        case TSR_OP_NONE:           *name = "NONE";           *symbol = "none"; return true;
        case TSR_OP_DUP:            *name = "DUP";            *symbol = "x"; return true;
        case TSR_OP_ADD:            *name = "ADD";            *symbol = "x+y"; return true;
        case TSR_OP_SUB:            *name = "SUB";            *symbol = "x-y"; return true;
        case TSR_OP_MUL:            *name = "MUL";            *symbol = "x*y"; return true;
        case TSR_OP_DIV:            *name = "DIV";            *symbol = "x/y"; return true;
        case TSR_OP_SQR:            *name = "SQR";            *symbol = "x^2"; return true;
        case TSR_OP_SQRT:           *name = "SQRT";           *symbol = "sqrt(x)"; return true;
        case TSR_OP_LOG:            *name = "LOG";            *symbol = "log(x)"; return true;
        case TSR_OP_SUM:            *name = "SUM";            *symbol = "sum(x)"; return true;
        case TSR_OP_SUM_ROWS:       *name = "SUM_ROWS";       *symbol = "sum_rows(x)"; return true;
        case TSR_OP_MEAN:           *name = "MEAN";           *symbol = "mean(x)"; return true;
        case TSR_OP_ARGMAX:         *name = "ARGMAX";         *symbol = "argmax(x)"; return true;
        case TSR_OP_REPEAT:         *name = "REPEAT";         *symbol = "repeat(x)"; return true;
        case TSR_OP_CONCAT:         *name = "CONCAT";         *symbol = "concat(x, y)"; return true;
        case TSR_OP_NORM:           *name = "NORM";           *symbol = "norm(x)"; return true;
        case TSR_OP_RMS_NORM:       *name = "RMS_NORM";       *symbol = "rms_norm(x)"; return true;
        case TSR_OP_GROUP_NORM:     *name = "GROUP_NORM";     *symbol = "group_norm(x)"; return true;
        case TSR_OP_MUL_MAT:        *name = "MUL_MAT";        *symbol = "X*Y"; return true;
        case TSR_OP_OUT_PROD:       *name = "OUT_PROD";       *symbol = "X*Y"; return true;
        case TSR_OP_SCALE:          *name = "SCALE";          *symbol = "x*v"; return true;
        case TSR_OP_CPY:            *name = "CPY";            *symbol = "x-\\>y"; return true;
        case TSR_OP_CONT:           *name = "CONT";           *symbol = "cont(x)"; return true;
        case TSR_OP_RESHAPE:        *name = "RESHAPE";        *symbol = "reshape(x)"; return true;
        case TSR_OP_VIEW:           *name = "VIEW";           *symbol = "view(x)"; return true;
        case TSR_OP_PERMUTE:        *name = "PERMUTE";        *symbol = "permute(x)"; return true;
        case TSR_OP_TRANSPOSE:      *name = "TRANSPOSE";      *symbol = "transpose(x)"; return true;
        case TSR_OP_GET_ROWS:       *name = "GET_ROWS";       *symbol = "get_rows(x)"; return true;
        case TSR_OP_SET_ROWS:       *name = "SET_ROWS";       *symbol = "set_rows(x)"; return true;
        case TSR_OP_DIAG_MASK_INF:  *name = "DIAG_MASK_INF";  *symbol = "diag_mask_inf(x)"; return true;
        case TSR_OP_SOFT_MAX:       *name = "SOFT_MAX";       *symbol = "soft_max(x)"; return true;
        case TSR_OP_ROPE:           *name = "ROPE";           *symbol = "rope(x)"; return true;
        case TSR_OP_CLAMP:          *name = "CLAMP";          *symbol = "clamp(x)"; return true;
        case TSR_OP_IM2COL:         *name = "IM2COL";         *symbol = "im2col(x)"; return true;
        case TSR_OP_CONV_2D:        *name = "CONV_2D";        *symbol = "conv_2d(x)"; return true;
        case TSR_OP_POOL_2D:        *name = "POOL_2D";        *symbol = "pool_2d(x)"; return true;
        case TSR_OP_UPSCALE:        *name = "UPSCALE";        *symbol = "upscale(x)"; return true;
        case TSR_OP_PAD:            *name = "PAD";            *symbol = "pad(x)"; return true;
        case TSR_OP_ARGSORT:        *name = "ARGSORT";        *symbol = "argsort(x)"; return true;
        case TSR_OP_FLASH_ATTN_EXT: *name = "FLASH_ATTN_EXT"; *symbol = "flash_attn_ext(x)"; return true;
        case TSR_OP_UNARY:          *name = "UNARY";          *symbol = "unary(x)"; return true;
        case TSR_OP_GLU:            *name = "GLU";            *symbol = "glu(x)"; return true;
        /* issue 17 part B */
        case TSR_OP_MUL_MAT_ID:     *name = "MUL_MAT_ID";     *symbol = "X[i]*Y"; return true;
        case TSR_OP_CONV_TRANSPOSE_1D: *name = "CONV_TRANSPOSE_1D"; *symbol = "conv_transpose_1d(x)"; return true;
        case TSR_OP_CONV_2D_DW:     *name = "CONV_2D_DW";     *symbol = "conv_2d_dw(x)"; return true;
        case TSR_OP_CONV_TRANSPOSE_2D: *name = "CONV_TRANSPOSE_2D"; *symbol = "conv_transpose_2d(x)"; return true;
        case TSR_OP_PAD_REFLECT_1D: *name = "PAD_REFLECT_1D"; *symbol = "pad_reflect_1d(x)"; return true;
        case TSR_OP_ROLL:           *name = "ROLL";           *symbol = "roll(x)"; return true;
        case TSR_OP_TIMESTEP_EMBEDDING: *name = "TIMESTEP_EMBEDDING"; *symbol = "timestep_embedding(x)"; return true;
        case TSR_OP_SSM_CONV:       *name = "SSM_CONV";       *symbol = "ssm_conv(x)"; return true;
        case TSR_OP_SSM_SCAN:       *name = "SSM_SCAN";       *symbol = "ssm_scan(x)"; return true;
        case TSR_OP_RWKV_WKV6:      *name = "RWKV_WKV6";      *symbol = "rwkv_wkv6(k, v, r, tf, td, s)"; return true;
        case TSR_OP_GATED_LINEAR_ATTN: *name = "GATED_LINEAR_ATTN"; *symbol = "gated_linear_attn(k, v, q, gate, s)"; return true;
        case TSR_OP_RWKV_WKV7:      *name = "RWKV_WKV7";      *symbol = "rwkv_wkv7(r, w, k, v, a, b, s)"; return true;
        case TSR_OP_WIN_PART:       *name = "WIN_PART";       *symbol = "win_part(x)"; return true;
        case TSR_OP_WIN_UNPART:     *name = "WIN_UNPART";     *symbol = "win_unpart(x)"; return true;
        case TSR_OP_GET_REL_POS:    *name = "GET_REL_POS";    *symbol = "get_rel_pos(x)"; return true;
        case TSR_OP_ADD_REL_POS:    *name = "ADD_REL_POS";    *symbol = "add_rel_pos(x)"; return true;
        /* issue 17 part A */
        case TSR_OP_SIN:            *name = "SIN";            *symbol = "sin(x)"; return true;
        case TSR_OP_COS:            *name = "COS";            *symbol = "cos(x)"; return true;
        case TSR_OP_LEAKY_RELU:     *name = "LEAKY_RELU";     *symbol = "leaky_relu(x)"; return true;
        case TSR_OP_ARANGE:         *name = "ARANGE";         *symbol = "arange(start, stop, step)"; return true;
        case TSR_OP_FILL:           *name = "FILL";           *symbol = "fill(x, c)"; return true;
        case TSR_OP_TRI:            *name = "TRI";            *symbol = "tri(x)"; return true;
        case TSR_OP_CUMSUM:         *name = "CUMSUM";         *symbol = "cumsum(x)"; return true;
        case TSR_OP_ACC:            *name = "ACC";            *symbol = "x[view]+=y"; return true;
        case TSR_OP_SET:            *name = "SET";            *symbol = "x[view]=y"; return true;
        case TSR_OP_DIAG:           *name = "DIAG";           *symbol = "diag(x)"; return true;
        case TSR_OP_REPEAT_BACK:    *name = "REPEAT_BACK";    *symbol = "repeat_back(x)"; return true;
        case TSR_OP_L2_NORM:        *name = "L2_NORM";        *symbol = "l2_norm(x)"; return true;
        case TSR_OP_TOP_K:          *name = "TOP_K";          *symbol = "top_k(x)"; return true;
        case TSR_OP_MAP_CUSTOM1:    *name = "MAP_CUSTOM1";    *symbol = "f(x)"; return true;
        case TSR_OP_MAP_CUSTOM2:    *name = "MAP_CUSTOM2";    *symbol = "f(x,y)"; return true;
        case TSR_OP_MAP_CUSTOM3:    *name = "MAP_CUSTOM3";    *symbol = "f(x,y,z)"; return true;
        case TSR_OP_CUSTOM:         *name = "CUSTOM";         *symbol = "custom"; return true;
        case TSR_OP_COUNT: break;
    }
    return false;
}

TSR_API_IMPL const char * tsr_op_name(enum tsr_op op) {
    const char * name = nullptr, * symbol = nullptr;
    return tsr_impl_op_text(op, &name, &symbol) ? name : "UNKNOWN";
}
TSR_API_IMPL const char * tsr_op_symbol(enum tsr_op op) {
    const char * name = nullptr, * symbol = nullptr;
    return tsr_impl_op_text(op, &name, &symbol) ? symbol : "?";
}
TSR_API_IMPL const char * tsr_unary_op_name(enum tsr_unary_op op) {
    switch (op) {
        case TSR_UNARY_OP_ABS:        return "ABS";
        case TSR_UNARY_OP_NEG:        return "NEG";
        case TSR_UNARY_OP_TANH:       return "TANH";
        case TSR_UNARY_OP_RELU:       return "RELU";
        case TSR_UNARY_OP_SIGMOID:    return "SIGMOID";
        case TSR_UNARY_OP_GELU:       return "GELU";
        case TSR_UNARY_OP_GELU_QUICK: return "GELU_QUICK";
        case TSR_UNARY_OP_SILU:       return "SILU";
        case TSR_UNARY_OP_EXP:        return "EXP";
        /* issue 17 part A */
        case TSR_UNARY_OP_SGN:         return "SGN";
        case TSR_UNARY_OP_STEP:        return "STEP";
        case TSR_UNARY_OP_ELU:         return "ELU";
        case TSR_UNARY_OP_HARDSWISH:   return "HARDSWISH";
        case TSR_UNARY_OP_HARDSIGMOID: return "HARDSIGMOID";
        case TSR_UNARY_OP_EXPM1:       return "EXPM1";
        case TSR_UNARY_OP_SOFTPLUS:    return "SOFTPLUS";
        case TSR_UNARY_OP_GELU_ERF:    return "GELU_ERF";
        case TSR_UNARY_OP_FLOOR:       return "FLOOR";
        case TSR_UNARY_OP_CEIL:        return "CEIL";
        case TSR_UNARY_OP_ROUND:       return "ROUND";
        case TSR_UNARY_OP_TRUNC:       return "TRUNC";
        case TSR_UNARY_OP_COUNT: break;
    }
    return "UNKNOWN";
}
TSR_API_IMPL const char * tsr_glu_op_name(enum tsr_glu_op op) {
    switch (op) {
        case TSR_GLU_OP_SWIGLU: return "SWIGLU";
        /* issue 17 part A */
        case TSR_GLU_OP_REGLU:       return "REGLU";
        case TSR_GLU_OP_GEGLU:       return "GEGLU";
        case TSR_GLU_OP_GEGLU_ERF:   return "GEGLU_ERF";
        case TSR_GLU_OP_GEGLU_QUICK: return "GEGLU_QUICK";
        case TSR_GLU_OP_SWIGLU_OAI:  return "SWIGLU_OAI";
        case TSR_GLU_OP_COUNT: break;
    }
    return "UNKNOWN";
}
TSR_API_IMPL const char * tsr_op_desc(const struct tsr_tensor * t) {
    if (!t) return "NULL";
    if (t->op == TSR_OP_UNARY) return tsr_unary_op_name(tsr_get_unary_op(t));
    if (t->op == TSR_OP_GLU) return tsr_glu_op_name(tsr_get_glu_op(t));
    return tsr_op_name(t->op);
}

TSR_IMPL_NS_BEGIN

static inline bool is_float_type(enum tsr_type t) {
    return t == TSR_TYPE_F32 || t == TSR_TYPE_F16 || t == TSR_TYPE_BF16;
}

/* ctx and n tensors non-NULL, else false with "<fn>: NULL ...". */
static inline bool check_args(const char * fn, const struct tsr_context * ctx, const struct tsr_tensor * a,
                              const struct tsr_tensor * b = reinterpret_cast<const struct tsr_tensor *>(1),
                              const struct tsr_tensor * c = reinterpret_cast<const struct tsr_tensor *>(1)) {
    if (!ctx) return tsr_set_error("%s: NULL context", fn);
    if (!a) return tsr_set_error("%s: NULL first operand", fn);
    if (!b) return tsr_set_error("%s: NULL second operand", fn);
    if (!c) return tsr_set_error("%s: NULL third operand", fn);
    return true;
}

static inline bool check_float(const char * fn, const struct tsr_tensor * t, const char * which) {
    if (!is_float_type(t->type)) {
        return tsr_set_error("%s: %s %s must be f32, f16 or bf16", fn, which, TSR_IMPL_D(t));
    }
    return true;
}

/* The result of an elementwise op: a new tensor like a, or (inplace) a view of a. */
static inline struct tsr_tensor * like(struct tsr_context * ctx, struct tsr_tensor * a, bool inplace) {
    return inplace ? tsr_view_tensor(ctx, a) : tsr_dup_tensor(ctx, a);
}

static inline struct tsr_tensor * op_result(struct tsr_tensor * r, enum tsr_op op, struct tsr_tensor * s0,
                                            struct tsr_tensor * s1 = nullptr, struct tsr_tensor * s2 = nullptr,
                                            struct tsr_tensor * s3 = nullptr) {
    if (r) tsr_impl_set_op(r, op, s0, s1, s2, s3);
    return r;
}

TSR_IMPL_NS_END

/* ---- copies ------------------------------------------------------------------------------ */

/* TSR_OP_DUP: no op_params. Result: new tensor like a. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_dup(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!tsr_impl::check_args("tsr_dup", ctx, a)) return nullptr;
    return tsr_impl::op_result(tsr_dup_tensor(ctx, a), TSR_OP_DUP, a);
}

/* TSR_OP_CPY: no op_params. Result: a view of b; src0 = a (source), src1 = b (destination).
 * Same element count; the types may differ (a conversion). */
TSR_API_IMPL struct tsr_tensor * tsr_cpy(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!tsr_impl::check_args("tsr_cpy", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(tsr_nelements(a) == tsr_nelements(b), "tsr_cpy: %s and %s differ in element count (%lld vs %lld)",
                     TSR_IMPL_D(a), TSR_IMPL_D(b), (long long)tsr_nelements(a), (long long)tsr_nelements(b));
    TSR_IMPL_REQUIRE(a->type == b->type || (tsr_impl::is_float_type(a->type) || tsr_impl::is_float_type(b->type)),
                     "tsr_cpy: cannot convert %s to %s", TSR_IMPL_D(a), TSR_IMPL_D(b));
    struct tsr_tensor * r = tsr_view_tensor(ctx, b);
    if (!r) return nullptr;
    if (b->name[0] != '\0') {
        tsr_format_name(r, "%s (copy of %s)", b->name, a->name);
    } else {
        tsr_format_name(r, "%s (copy)", a->name);
    }
    return tsr_impl::op_result(r, TSR_OP_CPY, a, b);
}

/* tsr_cast is a TSR_OP_CPY into a new tensor of `type` (src1 = the result itself, as ggml). */
TSR_API_IMPL struct tsr_tensor * tsr_cast(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_type type) {
    if (!tsr_impl::check_args("tsr_cast", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(tsr_is_valid_type(type), "tsr_cast: unknown type %d", (int)type);
    TSR_IMPL_REQUIRE(a->ne[0] % tsr_blck_size(type) == 0, "tsr_cast: ne0 of %s is not a multiple of %s's block size",
                     TSR_IMPL_D(a), tsr_type_name(type));
    struct tsr_tensor * r = tsr_new_tensor(ctx, type, TSR_MAX_DIMS, a->ne);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (copy)", a->name);
    return tsr_impl::op_result(r, TSR_OP_CPY, a, r);
}

/* TSR_OP_CONT: no op_params. Result: contiguous [ne0, ne1, ne2, ne3] of a's type, src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_cont_4d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1,
                                             int64_t ne2, int64_t ne3) {
    if (!tsr_impl::check_args("tsr_cont", ctx, a)) return nullptr;
    const int64_t ne[TSR_MAX_DIMS] = {ne0, ne1, ne2, ne3};
    int64_t n = -1;
    const bool counted = ne0 >= 0 && ne1 >= 0 && ne2 >= 0 && ne3 >= 0 && tsr_impl_count_elements(TSR_MAX_DIMS, ne, &n);
    TSR_IMPL_REQUIRE(counted && n == tsr_nelements(a),
                     "tsr_cont: shape [%lld, %lld, %lld, %lld] does not hold the %lld elements of %s", (long long)ne0,
                     (long long)ne1, (long long)ne2, (long long)ne3, (long long)tsr_nelements(a), TSR_IMPL_D(a));
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, a->type, ne0, ne1, ne2, ne3);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (cont)", a->name);
    return tsr_impl::op_result(r, TSR_OP_CONT, a);
}
TSR_API_IMPL struct tsr_tensor * tsr_cont(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!a) TSR_IMPL_FAIL("tsr_cont: NULL first operand");
    return tsr_cont_4d(ctx, a, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}
TSR_API_IMPL struct tsr_tensor * tsr_cont_2d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1) {
    return tsr_cont_4d(ctx, a, ne0, ne1, 1, 1);
}

/* ---- binary elementwise ------------------------------------------------------------------ */

TSR_IMPL_NS_BEGIN
/* TSR_OP_ADD/SUB/MUL/DIV: no op_params. Result like a (a's type), src0 = a, src1 = b;
 * b is broadcast over a (tsr_can_repeat(b, a)). a: f32/f16/bf16 (ADD: also quantized);
 * b: f32/f16/bf16. Inplace: a view of a. */
static inline struct tsr_tensor * binary(const char * fn, enum tsr_op op, struct tsr_context * ctx, struct tsr_tensor * a,
                                         struct tsr_tensor * b, bool inplace) {
    if (!check_args(fn, ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(tsr_can_repeat(b, a), "%s: %s cannot be broadcast to %s (each dim of a must be a multiple of b's)",
                     fn, TSR_IMPL_D(b), TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(is_float_type(a->type) || (op == TSR_OP_ADD && tsr_is_quantized(a->type)),
                     "%s: unsupported type of a %s", fn, TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(is_float_type(b->type), "%s: unsupported type of b %s", fn, TSR_IMPL_D(b));
    return op_result(like(ctx, a, inplace), op, a, b);
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_add(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::binary("tsr_add", TSR_OP_ADD, ctx, a, b, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_sub(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::binary("tsr_sub", TSR_OP_SUB, ctx, a, b, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_mul(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::binary("tsr_mul", TSR_OP_MUL, ctx, a, b, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_div(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::binary("tsr_div", TSR_OP_DIV, ctx, a, b, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_add_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::binary("tsr_add_inplace", TSR_OP_ADD, ctx, a, b, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_mul_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::binary("tsr_mul_inplace", TSR_OP_MUL, ctx, a, b, true);
}

/* ---- unary elementwise ------------------------------------------------------------------- */

TSR_IMPL_NS_BEGIN
static inline struct tsr_tensor * unary_like(const char * fn, enum tsr_op op, struct tsr_context * ctx,
                                             struct tsr_tensor * a, bool inplace) {
    if (!check_args(fn, ctx, a) || !check_float(fn, a, "a")) return nullptr;
    return op_result(like(ctx, a, inplace), op, a);
}

/* TSR_OP_SCALE: f32 s (slot 0), f32 bias (slot 1, always 0): x*s + bias. Result like a. */
static inline struct tsr_tensor * scale_impl(struct tsr_context * ctx, struct tsr_tensor * a, float s, bool inplace) {
    struct tsr_tensor * r = unary_like(inplace ? "tsr_scale_inplace" : "tsr_scale", TSR_OP_SCALE, ctx, a, inplace);
    if (r) {
        tsr_set_op_params_f32(r, 0, s);
        tsr_set_op_params_f32(r, 1, 0.0f);
    }
    return r;
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_scale(struct tsr_context * ctx, struct tsr_tensor * a, float s) {
    return tsr_impl::scale_impl(ctx, a, s, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_scale_inplace(struct tsr_context * ctx, struct tsr_tensor * a, float s) {
    return tsr_impl::scale_impl(ctx, a, s, true);
}

/* TSR_OP_SQR / SQRT / LOG: no op_params. Result like a (f32/f16/bf16). */
TSR_API_IMPL struct tsr_tensor * tsr_sqr(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_sqr", TSR_OP_SQR, ctx, a, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_sqrt(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_sqrt", TSR_OP_SQRT, ctx, a, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_log(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_log", TSR_OP_LOG, ctx, a, false);
}

/* TSR_OP_UNARY: i32 op (slot 0, enum tsr_unary_op). Result like a (f32/f16/bf16; inplace:
 * a view of a), src0 = a. */
TSR_IMPL_NS_BEGIN
static inline struct tsr_tensor * unary_op(const char * fn, struct tsr_context * ctx, struct tsr_tensor * a,
                                           enum tsr_unary_op op, bool inplace) {
    TSR_IMPL_REQUIRE((int)op >= 0 && op < TSR_UNARY_OP_COUNT, "%s: unknown unary op %d", fn, (int)op);
    struct tsr_tensor * r = unary_like(fn, TSR_OP_UNARY, ctx, a, inplace);
    if (r) tsr_set_op_params_i32(r, 0, (int32_t)op);
    return r;
}
TSR_IMPL_NS_END
TSR_API_IMPL struct tsr_tensor * tsr_unary(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_unary_op op) {
    return tsr_impl::unary_op("tsr_unary", ctx, a, op, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_unary_inplace(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_unary_op op) {
    return tsr_impl::unary_op("tsr_unary_inplace", ctx, a, op, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_exp(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_EXP); }
TSR_API_IMPL struct tsr_tensor * tsr_neg(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_NEG); }
TSR_API_IMPL struct tsr_tensor * tsr_abs(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_ABS); }
TSR_API_IMPL struct tsr_tensor * tsr_gelu(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_GELU); }
TSR_API_IMPL struct tsr_tensor * tsr_gelu_quick(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_GELU_QUICK); }
TSR_API_IMPL struct tsr_tensor * tsr_silu(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_SILU); }
TSR_API_IMPL struct tsr_tensor * tsr_relu(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_RELU); }
TSR_API_IMPL struct tsr_tensor * tsr_tanh(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_TANH); }
TSR_API_IMPL struct tsr_tensor * tsr_sigmoid(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_SIGMOID); }

/* TSR_OP_CLAMP: f32 min (slot 0), f32 max (slot 1). Result like a (a new tensor; ggml
 * returns a view of a here, tessera does not alias). */
TSR_API_IMPL struct tsr_tensor * tsr_clamp(struct tsr_context * ctx, struct tsr_tensor * a, float min, float max) {
    TSR_IMPL_REQUIRE(!(min > max), "tsr_clamp: min %g > max %g", (double)min, (double)max);
    struct tsr_tensor * r = tsr_impl::unary_like("tsr_clamp", TSR_OP_CLAMP, ctx, a, false);
    if (r) {
        tsr_set_op_params_f32(r, 0, min);
        tsr_set_op_params_f32(r, 1, max);
    }
    return r;
}

/* TSR_OP_GLU: i32 op (slot 0, enum tsr_glu_op), i32 swapped (slot 1, 0 or 1); SWIGLU_OAI:
 * f32 alpha (slot 2), f32 limit (slot 3). Fused (src1 NULL): a's rows [x | g] (swapped:
 * [g | x]), ne0 even, result [ne0/2, ne1, ne2, ne3] of a's type. Split: src0 = a (x),
 * src1 = b (g), same shape and type, result like a. */
TSR_IMPL_NS_BEGIN
static inline struct tsr_tensor * glu_op(const char * fn, struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                         bool split, enum tsr_glu_op op, bool swapped) {
    if (!check_args(fn, ctx, a, split ? b : a) || !check_float(fn, a, "a")) return nullptr;
    TSR_IMPL_REQUIRE((int)op >= 0 && op < TSR_GLU_OP_COUNT, "%s: unknown glu op %d", fn, (int)op);
    struct tsr_tensor * r = nullptr;
    if (split) {
        TSR_IMPL_REQUIRE(tsr_are_same_shape(a, b) && a->type == b->type, "%s: %s and %s differ in shape or type", fn,
                         TSR_IMPL_D(a), TSR_IMPL_D(b));
        r = tsr_dup_tensor(ctx, a);
    } else {
        TSR_IMPL_REQUIRE(a->ne[0] % 2 == 0, "%s: ne0 of %s must be even", fn, TSR_IMPL_D(a));
        TSR_IMPL_REQUIRE(tsr_is_contiguous_rows(a), "%s: rows of %s must be contiguous", fn, TSR_IMPL_D(a));
        const int64_t ne[4] = {a->ne[0] / 2, a->ne[1], a->ne[2], a->ne[3]};
        r = tsr_new_tensor(ctx, a->type, 4, ne);
    }
    if (!r) return nullptr;
    tsr_set_op_params_i32(r, 0, (int32_t)op);
    tsr_set_op_params_i32(r, 1, swapped ? 1 : 0);
    return op_result(r, TSR_OP_GLU, a, split ? b : nullptr);
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_swiglu(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::glu_op("tsr_swiglu", ctx, a, nullptr, false, TSR_GLU_OP_SWIGLU, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_swiglu_split(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::glu_op("tsr_swiglu_split", ctx, a, b, true, TSR_GLU_OP_SWIGLU, false);
}

/* ---- reductions -------------------------------------------------------------------------- */

/* TSR_OP_SUM: no op_params. a f32/f16/bf16 -> [1] of a's type. */
TSR_API_IMPL struct tsr_tensor * tsr_sum(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!tsr_impl::check_args("tsr_sum", ctx, a) || !tsr_impl::check_float("tsr_sum", a, "a")) return nullptr;
    return tsr_impl::op_result(tsr_new_tensor_1d(ctx, a->type, 1), TSR_OP_SUM, a);
}
/* TSR_OP_SUM_ROWS: no op_params. -> [1, ne1, ne2, ne3] of a's type. */
TSR_API_IMPL struct tsr_tensor * tsr_sum_rows(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!tsr_impl::check_args("tsr_sum_rows", ctx, a) || !tsr_impl::check_float("tsr_sum_rows", a, "a")) return nullptr;
    return tsr_impl::op_result(tsr_new_tensor_4d(ctx, a->type, 1, a->ne[1], a->ne[2], a->ne[3]), TSR_OP_SUM_ROWS, a);
}
/* TSR_OP_MEAN: no op_params. -> F32 [1, ne1, ne2, ne3]. */
TSR_API_IMPL struct tsr_tensor * tsr_mean(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!tsr_impl::check_args("tsr_mean", ctx, a) || !tsr_impl::check_float("tsr_mean", a, "a")) return nullptr;
    return tsr_impl::op_result(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 1, a->ne[1], a->ne[2], a->ne[3]), TSR_OP_MEAN, a);
}
/* TSR_OP_ARGMAX: no op_params. a 2-D (ne2 = ne3 = 1) f32 -> I32 [ne1]. */
TSR_API_IMPL struct tsr_tensor * tsr_argmax(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!tsr_impl::check_args("tsr_argmax", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "tsr_argmax: %s must be f32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->ne[2] == 1 && a->ne[3] == 1, "tsr_argmax: %s must be a matrix", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->ne[0] <= INT32_MAX, "tsr_argmax: rows of %s are too long for i32 indices", TSR_IMPL_D(a));
    return tsr_impl::op_result(tsr_new_tensor_1d(ctx, TSR_TYPE_I32, a->ne[1]), TSR_OP_ARGMAX, a);
}

/* ---- shape ops ----------------------------------------------------------------------------- */

/* TSR_OP_REPEAT: no op_params. a tiled to b's shape (each of b's dims a multiple of a's);
 * result of a's type, src0 = a only (b just gives the shape). */
TSR_API_IMPL struct tsr_tensor * tsr_repeat(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!tsr_impl::check_args("tsr_repeat", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(tsr_can_repeat(a, b), "tsr_repeat: %s cannot be tiled to %s", TSR_IMPL_D(a), TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(!tsr_is_quantized(a->type), "tsr_repeat: quantized %s", TSR_IMPL_D(a));
    return tsr_impl::op_result(tsr_new_tensor(ctx, a->type, TSR_MAX_DIMS, b->ne), TSR_OP_REPEAT, a);
}

/* TSR_OP_CONCAT: i32 dim (slot 0). a, b same type, equal in every dim but dim;
 * result ne[dim] = a.ne[dim] + b.ne[dim]. src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_concat(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int dim) {
    if (!tsr_impl::check_args("tsr_concat", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(dim >= 0 && dim < TSR_MAX_DIMS, "tsr_concat: dim %d out of range [0, 4)", dim);
    TSR_IMPL_REQUIRE(a->type == b->type && !tsr_is_quantized(a->type), "tsr_concat: types of %s and %s differ (or are quantized)",
                     TSR_IMPL_D(a), TSR_IMPL_D(b));
    int64_t ne[4];
    for (int d = 0; d < 4; d++) {
        if (d == dim) {
            ne[d] = a->ne[d] + b->ne[d];
        } else {
            TSR_IMPL_REQUIRE(a->ne[d] == b->ne[d], "tsr_concat: %s and %s differ in dim %d (concatenating along %d)",
                             TSR_IMPL_D(a), TSR_IMPL_D(b), d, dim);
            ne[d] = a->ne[d];
        }
    }
    struct tsr_tensor * r = tsr_new_tensor(ctx, a->type, 4, ne);
    if (r) tsr_set_op_params_i32(r, 0, dim);
    return tsr_impl::op_result(r, TSR_OP_CONCAT, a, b);
}

/* ---- normalization ------------------------------------------------------------------------- */

TSR_IMPL_NS_BEGIN
/* TSR_OP_NORM / TSR_OP_RMS_NORM: f32 eps (slot 0). a f32, result like a. */
static inline struct tsr_tensor * norm_impl(const char * fn, enum tsr_op op, struct tsr_context * ctx,
                                            struct tsr_tensor * a, float eps) {
    if (!check_args(fn, ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "%s: %s must be f32", fn, TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(eps >= 0.0f, "%s: eps %g must be >= 0", fn, (double)eps);
    struct tsr_tensor * r = tsr_dup_tensor(ctx, a);
    if (r) tsr_set_op_params_f32(r, 0, eps);
    return op_result(r, op, a);
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_norm(struct tsr_context * ctx, struct tsr_tensor * a, float eps) {
    return tsr_impl::norm_impl("tsr_norm", TSR_OP_NORM, ctx, a, eps);
}
TSR_API_IMPL struct tsr_tensor * tsr_rms_norm(struct tsr_context * ctx, struct tsr_tensor * a, float eps) {
    return tsr_impl::norm_impl("tsr_rms_norm", TSR_OP_RMS_NORM, ctx, a, eps);
}

/* TSR_OP_GROUP_NORM: i32 n_groups (slot 0), f32 eps (slot 1). a f32 [W, H, C, N],
 * 1 <= n_groups <= C; result like a. */
TSR_API_IMPL struct tsr_tensor * tsr_group_norm(struct tsr_context * ctx, struct tsr_tensor * a, int n_groups, float eps) {
    if (!tsr_impl::check_args("tsr_group_norm", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "tsr_group_norm: %s must be f32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(n_groups >= 1 && n_groups <= a->ne[2], "tsr_group_norm: n_groups %d out of range [1, %lld] for %s",
                     n_groups, (long long)a->ne[2], TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(eps >= 0.0f, "tsr_group_norm: eps %g must be >= 0", (double)eps);
    struct tsr_tensor * r = tsr_dup_tensor(ctx, a);
    if (r) {
        tsr_set_op_params_i32(r, 0, n_groups);
        tsr_set_op_params_f32(r, 1, eps);
    }
    return tsr_impl::op_result(r, TSR_OP_GROUP_NORM, a);
}

/* ---- matrix products ----------------------------------------------------------------------- */

/* TSR_OP_MUL_MAT: no op_params. a [K, M, A2, A3] any type (not transposed), b [K, N, B2, B3]
 * f32 (or a's type when a is not quantized), B2 % A2 == 0, B3 % A3 == 0.
 * Result F32 [M, N, B2, B3]; src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_mul_mat(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!tsr_impl::check_args("tsr_mul_mat", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(a->ne[0] == b->ne[0] && a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 &&
                         b->ne[3] % a->ne[3] == 0,
                     "tsr_mul_mat: cannot multiply %s by %s (need a.ne0 == b.ne0 and b.ne2, b.ne3 multiples of a's)",
                     TSR_IMPL_D(a), TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(!tsr_is_transposed(a), "tsr_mul_mat: a %s must not be transposed", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->type != TSR_TYPE_I32, "tsr_mul_mat: a %s must not be i32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(b->type == TSR_TYPE_F32 || (b->type == a->type && tsr_impl::is_float_type(b->type)),
                     "tsr_mul_mat: b %s must be f32 (or a's float type %s)", TSR_IMPL_D(b), tsr_type_name(a->type));
    return tsr_impl::op_result(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, a->ne[1], b->ne[1], b->ne[2], b->ne[3]),
                               TSR_OP_MUL_MAT, a, b);
}

/* TSR_OP_OUT_PROD: no op_params. a [M, K, A2, A3], b [N, K, B2, B3] f32, B2 % A2 == 0,
 * B3 % A3 == 0 -> F32 [M, N, B2, B3]; src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_out_prod(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!tsr_impl::check_args("tsr_out_prod", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(a->ne[1] == b->ne[1] && a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 &&
                         b->ne[3] % a->ne[3] == 0,
                     "tsr_out_prod: cannot multiply %s by %s (need a.ne1 == b.ne1 and b.ne2, b.ne3 multiples of a's)",
                     TSR_IMPL_D(a), TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(!tsr_is_transposed(a), "tsr_out_prod: a %s must not be transposed", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->type != TSR_TYPE_I32 && b->type == TSR_TYPE_F32, "tsr_out_prod: unsupported types %s, %s",
                     TSR_IMPL_D(a), TSR_IMPL_D(b));
    return tsr_impl::op_result(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, a->ne[0], b->ne[0], b->ne[2], b->ne[3]),
                               TSR_OP_OUT_PROD, a, b);
}

/* ---- rows ------------------------------------------------------------------------------------ */

/* TSR_OP_GET_ROWS: no op_params. a [n, rows, A2, A3] any type, b I32 [k, A2, A3, 1] row
 * indices -> [n, k, A2, A3], F32 (I32 when a is I32). src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_get_rows(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!tsr_impl::check_args("tsr_get_rows", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(b->type == TSR_TYPE_I32, "tsr_get_rows: indices %s must be i32", TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(a->ne[2] == b->ne[1] && a->ne[3] == b->ne[2] && b->ne[3] == 1,
                     "tsr_get_rows: indices %s do not match %s (need b.ne1 == a.ne2, b.ne2 == a.ne3, b.ne3 == 1)",
                     TSR_IMPL_D(b), TSR_IMPL_D(a));
    const enum tsr_type type = a->type == TSR_TYPE_I32 ? TSR_TYPE_I32 : TSR_TYPE_F32;
    return tsr_impl::op_result(tsr_new_tensor_4d(ctx, type, a->ne[0], b->ne[0], b->ne[1], b->ne[2]), TSR_OP_GET_ROWS, a, b);
}

/* TSR_OP_SET_ROWS: no op_params. a dst [n, rows, A2, A3] (f32/f16/bf16/q8_0/q4_0), b src
 * F32 [n, k, A2, A3], c I32 [k, C1, C2, 1] with A2 % C1 == 0 and A3 % C2 == 0: row i of
 * b goes to row c[i] of a. Result: a view of a; src0 = b, src1 = c, src2 = a (ggml's
 * order: the source first). */
TSR_API_IMPL struct tsr_tensor * tsr_set_rows(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                              struct tsr_tensor * c) {
    if (!tsr_impl::check_args("tsr_set_rows", ctx, a, b, c)) return nullptr;
    TSR_IMPL_REQUIRE(b->type == TSR_TYPE_F32, "tsr_set_rows: source rows %s must be f32", TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(c->type == TSR_TYPE_I32, "tsr_set_rows: indices %s must be i32", TSR_IMPL_D(c));
    TSR_IMPL_REQUIRE(a->type != TSR_TYPE_I32, "tsr_set_rows: destination %s must not be i32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->ne[0] == b->ne[0] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3],
                     "tsr_set_rows: source %s does not match destination %s", TSR_IMPL_D(b), TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(b->ne[1] == c->ne[0] && c->ne[1] > 0 && c->ne[2] > 0 && b->ne[2] % c->ne[1] == 0 &&
                         b->ne[3] % c->ne[2] == 0 && c->ne[3] == 1,
                     "tsr_set_rows: indices %s do not match source %s", TSR_IMPL_D(c), TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(tsr_is_contiguous_rows(a) && tsr_is_contiguous_rows(b), "tsr_set_rows: rows must be contiguous");
    return tsr_impl::op_result(tsr_view_tensor(ctx, a), TSR_OP_SET_ROWS, b, c, a);
}

/* TSR_OP_DIAG_MASK_INF: i32 n_past (slot 0). a f32, result like a: a[i, j] = -inf where
 * i > n_past + j. */
TSR_API_IMPL struct tsr_tensor * tsr_diag_mask_inf(struct tsr_context * ctx, struct tsr_tensor * a, int n_past) {
    if (!tsr_impl::check_args("tsr_diag_mask_inf", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "tsr_diag_mask_inf: %s must be f32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(n_past >= 0, "tsr_diag_mask_inf: n_past %d < 0", n_past);
    struct tsr_tensor * r = tsr_dup_tensor(ctx, a);
    if (r) tsr_set_op_params_i32(r, 0, n_past);
    return tsr_impl::op_result(r, TSR_OP_DIAG_MASK_INF, a);
}

/* TSR_OP_SOFT_MAX: f32 scale (slot 0), f32 max_bias (slot 1). a f32 contiguous; mask
 * (src1, may be NULL) f32/f16 contiguous [a.ne0, >= a.ne1, M2, M3] with a.ne2 % M2 == 0
 * and a.ne3 % M3 == 0; max_bias > 0 needs a mask. Result like a; src0 = a, src1 = mask. */
TSR_API_IMPL struct tsr_tensor * tsr_soft_max_ext(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * mask,
                                                  float scale, float max_bias) {
    if (!tsr_impl::check_args("tsr_soft_max_ext", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "tsr_soft_max_ext: %s must be f32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(tsr_is_contiguous(a), "tsr_soft_max_ext: %s must be contiguous", TSR_IMPL_D(a));
    if (mask) {
        TSR_IMPL_REQUIRE(mask->type == TSR_TYPE_F32 || mask->type == TSR_TYPE_F16,
                         "tsr_soft_max_ext: mask %s must be f32 or f16", TSR_IMPL_D(mask));
        TSR_IMPL_REQUIRE(tsr_is_contiguous(mask), "tsr_soft_max_ext: mask %s must be contiguous", TSR_IMPL_D(mask));
        TSR_IMPL_REQUIRE(mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1] && mask->ne[2] > 0 && mask->ne[3] > 0 &&
                             a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0,
                         "tsr_soft_max_ext: mask %s does not fit %s (need ne0 equal, ne1 >= a's, a.ne2/ne3 multiples)",
                         TSR_IMPL_D(mask), TSR_IMPL_D(a));
    }
    TSR_IMPL_REQUIRE(!(max_bias > 0.0f) || mask, "tsr_soft_max_ext: max_bias %g > 0 needs a mask", (double)max_bias);
    struct tsr_tensor * r = tsr_dup_tensor(ctx, a);
    if (r) {
        tsr_set_op_params_f32(r, 0, scale);
        tsr_set_op_params_f32(r, 1, max_bias);
    }
    return tsr_impl::op_result(r, TSR_OP_SOFT_MAX, a, mask);
}
TSR_API_IMPL struct tsr_tensor * tsr_soft_max(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_soft_max_ext(ctx, a, nullptr, 1.0f, 0.0f);
}

/* TSR_OP_ROPE: i32 n_past (slot 0, always 0), n_dims (1), mode (2), n_ctx (3, 0),
 * n_ctx_orig (4); f32 freq_base (5), freq_scale (6), ext_factor (7), attn_factor (8),
 * beta_fast (9), beta_slow (10). a f32/f16 [head_dim, n_head, n_tokens, 1+], b I32
 * positions [n_tokens], c (may be NULL) f32 frequency factors [>= n_dims/2].
 * 0 < n_dims <= head_dim, n_dims even. Result like a; src0 = a, src1 = b, src2 = c. */
TSR_API_IMPL struct tsr_tensor * tsr_rope_ext(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                              struct tsr_tensor * c, int n_dims, int mode, int n_ctx_orig,
                                              float freq_base, float freq_scale, float ext_factor, float attn_factor,
                                              float beta_fast, float beta_slow) {
    if (!tsr_impl::check_args("tsr_rope_ext", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16, "tsr_rope_ext: %s must be f32 or f16", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(b->type == TSR_TYPE_I32 && b->ne[1] == 1 && b->ne[2] == 1 && b->ne[3] == 1,
                     "tsr_rope_ext: positions %s must be an i32 vector", TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(b->ne[0] == a->ne[2], "tsr_rope_ext: %lld positions for %s (need one per token, a.ne2)",
                     (long long)b->ne[0], TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(mode == TSR_ROPE_TYPE_NORMAL || mode == TSR_ROPE_TYPE_NEOX, "tsr_rope_ext: unknown mode %d", mode);
    TSR_IMPL_REQUIRE(n_dims > 0 && n_dims % 2 == 0 && n_dims <= a->ne[0],
                     "tsr_rope_ext: n_dims %d must be even and in (0, %lld]", n_dims, (long long)a->ne[0]);
    if (c) {
        TSR_IMPL_REQUIRE(c->type == TSR_TYPE_F32 && c->ne[0] >= n_dims / 2,
                         "tsr_rope_ext: frequency factors %s must be f32 with >= %d elements", TSR_IMPL_D(c), n_dims / 2);
    }
    struct tsr_tensor * r = tsr_dup_tensor(ctx, a);
    if (!r) return nullptr;
    int32_t params[11] = {0, n_dims, mode, 0, n_ctx_orig};
    memcpy(params + 5, &freq_base, sizeof(float));
    memcpy(params + 6, &freq_scale, sizeof(float));
    memcpy(params + 7, &ext_factor, sizeof(float));
    memcpy(params + 8, &attn_factor, sizeof(float));
    memcpy(params + 9, &beta_fast, sizeof(float));
    memcpy(params + 10, &beta_slow, sizeof(float));
    tsr_set_op_params(r, params, sizeof(params));
    return tsr_impl::op_result(r, TSR_OP_ROPE, a, b, c);
}
/* ggml_rope: freq_base 10000, freq_scale 1, ext_factor 0, attn_factor 1, beta 0/0, n_ctx_orig 0. */
TSR_API_IMPL struct tsr_tensor * tsr_rope(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int n_dims, int mode) {
    return tsr_rope_ext(ctx, a, b, nullptr, n_dims, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
}

/* ---- convolution and friends --------------------------------------------------------------- */

TSR_IMPL_NS_BEGIN
static inline int64_t conv_out_size(int64_t ins, int64_t ks, int s, int p, int d) {
    return (ins + 2 * p - (int64_t)d * (ks - 1) - 1) / s + 1;
}
static inline bool check_conv_params(const char * fn, int s0, int s1, int p0, int p1, int d0, int d1) {
    if (s0 <= 0 || s1 <= 0 || d0 <= 0 || d1 <= 0 || p0 < 0 || p1 < 0) {
        return tsr_set_error("%s: need strides and dilations > 0, paddings >= 0 (s %d %d, p %d %d, d %d %d)", fn, s0, s1,
                             p0, p1, d0, d1);
    }
    return true;
}
TSR_IMPL_NS_END

/* TSR_OP_IM2COL: i32 s0, s1, p0, p1, d0, d1, is_2D (slots 0..6). a kernel [KW, KH, IC, OC]
 * (only its shape is used), b input [W, H, IC, N] (2-D) or [W, IC, N] (1-D, a [KW, IC, OC]).
 * Result dst_type (f32/f16) [IC*KH*KW, OW, OH, N] (2-D) or [IC*KW, OW, N, 1] (1-D);
 * src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_im2col(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int s0,
                                            int s1, int p0, int p1, int d0, int d1, bool is_2D, enum tsr_type dst_type) {
    if (!tsr_impl::check_args("tsr_im2col", ctx, a, b)) return nullptr;
    if (!tsr_impl::check_conv_params("tsr_im2col", s0, is_2D ? s1 : 1, p0, is_2D ? p1 : 0, d0, is_2D ? d1 : 1)) return nullptr;
    TSR_IMPL_REQUIRE(dst_type == TSR_TYPE_F32 || dst_type == TSR_TYPE_F16, "tsr_im2col: dst_type %s must be f32 or f16",
                     tsr_type_name(dst_type));
    TSR_IMPL_REQUIRE(tsr_impl::is_float_type(b->type), "tsr_im2col: input %s must be f32, f16 or bf16", TSR_IMPL_D(b));
    if (is_2D) {
        TSR_IMPL_REQUIRE(a->ne[2] == b->ne[2], "tsr_im2col: kernel %s and input %s differ in channels", TSR_IMPL_D(a), TSR_IMPL_D(b));
    } else {
        TSR_IMPL_REQUIRE(a->ne[1] == b->ne[1] && b->ne[3] == 1, "tsr_im2col: kernel %s and input %s differ in channels",
                         TSR_IMPL_D(a), TSR_IMPL_D(b));
    }
    const int64_t OH = is_2D ? tsr_impl::conv_out_size(b->ne[1], a->ne[1], s1, p1, d1) : 1;
    const int64_t OW = tsr_impl::conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    TSR_IMPL_REQUIRE(OW > 0 && OH > 0, "tsr_im2col: input %s is too small for kernel %s (output %lld x %lld)", TSR_IMPL_D(b),
                     TSR_IMPL_D(a), (long long)OW, (long long)OH);
    const int64_t ne[4] = {
        is_2D ? a->ne[2] * a->ne[1] * a->ne[0] : a->ne[1] * a->ne[0],
        OW,
        is_2D ? OH : b->ne[2],
        is_2D ? b->ne[3] : 1,
    };
    struct tsr_tensor * r = tsr_new_tensor(ctx, dst_type, 4, ne);
    if (!r) return nullptr;
    const int32_t params[7] = {s0, s1, p0, p1, d0, d1, is_2D ? 1 : 0};
    tsr_set_op_params(r, params, sizeof(params));
    return tsr_impl::op_result(r, TSR_OP_IM2COL, a, b);
}

/* TSR_OP_CONV_2D: i32 s0, s1, p0, p1, d0, d1 (slots 0..5). a kernel [KW, KH, IC, OC]
 * (f32/f16), b input [W, H, IC, N] (f32) -> F32 [OW, OH, OC, N], OW = (W + 2*p0 -
 * d0*(KW-1) - 1)/s0 + 1 (OH likewise). src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_conv_2d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int s0,
                                             int s1, int p0, int p1, int d0, int d1) {
    if (!tsr_impl::check_args("tsr_conv_2d", ctx, a, b)) return nullptr;
    if (!tsr_impl::check_conv_params("tsr_conv_2d", s0, s1, p0, p1, d0, d1)) return nullptr;
    TSR_IMPL_REQUIRE(tsr_impl::is_float_type(a->type) && tsr_impl::is_float_type(b->type),
                     "tsr_conv_2d: kernel %s and input %s must be float types", TSR_IMPL_D(a), TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(a->ne[2] == b->ne[2], "tsr_conv_2d: kernel %s has %lld input channels, input %s has %lld", TSR_IMPL_D(a),
                     (long long)a->ne[2], TSR_IMPL_D(b), (long long)b->ne[2]);
    const int64_t OW = tsr_impl::conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    const int64_t OH = tsr_impl::conv_out_size(b->ne[1], a->ne[1], s1, p1, d1);
    TSR_IMPL_REQUIRE(OW > 0 && OH > 0, "tsr_conv_2d: input %s is too small for kernel %s (output %lld x %lld)", TSR_IMPL_D(b),
                     TSR_IMPL_D(a), (long long)OW, (long long)OH);
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, OW, OH, a->ne[3], b->ne[3]);
    if (!r) return nullptr;
    const int32_t params[6] = {s0, s1, p0, p1, d0, d1};
    tsr_set_op_params(r, params, sizeof(params));
    return tsr_impl::op_result(r, TSR_OP_CONV_2D, a, b);
}

/* TSR_OP_POOL_2D: i32 op (slot 0, enum tsr_op_pool), k0, k1, s0, s1 (1..4), f32 p0, p1
 * (5, 6). a [W, H, C, N] f32/f16 -> F32 [OW, OH, C, N], OW = (W + 2*p0 - k0)/s0 + 1
 * (computed in float and truncated, as ggml). src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_pool_2d(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_op_pool op, int k0,
                                             int k1, int s0, int s1, float p0, float p1) {
    if (!tsr_impl::check_args("tsr_pool_2d", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE((int)op >= 0 && op < TSR_OP_POOL_COUNT, "tsr_pool_2d: unknown pool op %d", (int)op);
    TSR_IMPL_REQUIRE(k0 > 0 && k1 > 0 && s0 > 0 && s1 > 0 && p0 >= 0.0f && p1 >= 0.0f,
                     "tsr_pool_2d: need kernel and stride > 0, padding >= 0 (k %d %d, s %d %d, p %g %g)", k0, k1, s0, s1,
                     (double)p0, (double)p1);
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16, "tsr_pool_2d: %s must be f32 or f16", TSR_IMPL_D(a));
    const float fw = ((float)a->ne[0] + 2.0f * p0 - (float)k0) / (float)s0 + 1.0f;
    const float fh = ((float)a->ne[1] + 2.0f * p1 - (float)k1) / (float)s1 + 1.0f;
    TSR_IMPL_REQUIRE(fw >= 1.0f && fh >= 1.0f, "tsr_pool_2d: input %s is smaller than the %dx%d window", TSR_IMPL_D(a), k0, k1);
    /* an infinite or huge padding: the float size would not convert to int64 */
    const float max_side = (float)((int64_t)1 << 56);
    TSR_IMPL_REQUIRE(fw <= max_side && fh <= max_side, "tsr_pool_2d: padding %g %g makes the output of %s too large (%g x %g)",
                     (double)p0, (double)p1, TSR_IMPL_D(a), (double)fw, (double)fh);
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, (int64_t)fw, (int64_t)fh, a->ne[2], a->ne[3]);
    if (!r) return nullptr;
    const int32_t params[5] = {(int32_t)op, k0, k1, s0, s1};
    tsr_set_op_params(r, params, sizeof(params));
    tsr_set_op_params_f32(r, 5, p0);
    tsr_set_op_params_f32(r, 6, p1);
    return tsr_impl::op_result(r, TSR_OP_POOL_2D, a);
}

/* TSR_OP_UPSCALE: i32 mode (slot 0, enum tsr_scale_mode). a f32/f16 -> [ne0, ne1, ne2, ne3]
 * of a's type (each > 0; downscaling allowed). src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_upscale_ext(struct tsr_context * ctx, struct tsr_tensor * a, int ne0, int ne1, int ne2,
                                                 int ne3, enum tsr_scale_mode mode) {
    if (!tsr_impl::check_args("tsr_upscale", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(mode == TSR_SCALE_MODE_NEAREST || mode == TSR_SCALE_MODE_BILINEAR, "tsr_upscale: unknown mode %d", (int)mode);
    TSR_IMPL_REQUIRE(ne0 > 0 && ne1 > 0 && ne2 > 0 && ne3 > 0, "tsr_upscale: target shape [%d, %d, %d, %d] must be positive",
                     ne0, ne1, ne2, ne3);
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16, "tsr_upscale: %s must be f32 or f16", TSR_IMPL_D(a));
    /* every result element samples the source: an empty one has nothing to give */
    TSR_IMPL_REQUIRE(tsr_nelements(a) > 0, "tsr_upscale: %s has no elements to scale to [%d, %d, %d, %d]", TSR_IMPL_D(a),
                     ne0, ne1, ne2, ne3);
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, a->type, ne0, ne1, ne2, ne3);
    if (r) tsr_set_op_params_i32(r, 0, (int32_t)mode);
    return tsr_impl::op_result(r, TSR_OP_UPSCALE, a);
}
TSR_API_IMPL struct tsr_tensor * tsr_upscale(struct tsr_context * ctx, struct tsr_tensor * a, int scale_factor,
                                             enum tsr_scale_mode mode) {
    if (!a) TSR_IMPL_FAIL("tsr_upscale: NULL first operand");
    TSR_IMPL_REQUIRE(scale_factor >= 1 && a->ne[0] * scale_factor <= INT32_MAX && a->ne[1] * scale_factor <= INT32_MAX,
                     "tsr_upscale: scale factor %d out of range for %s", scale_factor, TSR_IMPL_D(a));
    return tsr_upscale_ext(ctx, a, (int)(a->ne[0] * scale_factor), (int)(a->ne[1] * scale_factor), (int)a->ne[2],
                           (int)a->ne[3], mode);
}

/* TSR_OP_PAD: i32 p0, p1, p2, p3 (slots 0..3), zeros appended at the end of each dim.
 * a f32/f16 -> [ne0+p0, ne1+p1, ne2+p2, ne3+p3] of a's type. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_pad(struct tsr_context * ctx, struct tsr_tensor * a, int p0, int p1, int p2, int p3) {
    if (!tsr_impl::check_args("tsr_pad", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(p0 >= 0 && p1 >= 0 && p2 >= 0 && p3 >= 0, "tsr_pad: paddings (%d, %d, %d, %d) must be >= 0", p0, p1, p2, p3);
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16, "tsr_pad: %s must be f32 or f16", TSR_IMPL_D(a));
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, a->type, a->ne[0] + p0, a->ne[1] + p1, a->ne[2] + p2, a->ne[3] + p3);
    if (r) {
        const int32_t params[4] = {p0, p1, p2, p3};
        tsr_set_op_params(r, params, sizeof(params));
    }
    return tsr_impl::op_result(r, TSR_OP_PAD, a);
}

/* TSR_OP_ARGSORT: i32 order (slot 0, enum tsr_sort_order). a f32 -> I32 of a's shape:
 * per row, the indices that sort it. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_argsort(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_sort_order order) {
    if (!tsr_impl::check_args("tsr_argsort", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(order == TSR_SORT_ORDER_ASC || order == TSR_SORT_ORDER_DESC, "tsr_argsort: unknown order %d", (int)order);
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "tsr_argsort: %s must be f32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->ne[0] <= INT32_MAX, "tsr_argsort: rows of %s are too long for i32 indices", TSR_IMPL_D(a));
    struct tsr_tensor * r = tsr_new_tensor(ctx, TSR_TYPE_I32, TSR_MAX_DIMS, a->ne);
    if (r) tsr_set_op_params_i32(r, 0, (int32_t)order);
    return tsr_impl::op_result(r, TSR_OP_ARGSORT, a);
}

/* TSR_OP_FLASH_ATTN_EXT: f32 scale (slot 0), f32 max_bias (1), f32 logit_softcap (2),
 * i32 precision (3, 0 = default). q f32 [D, n_q, H, B]; k [D, n_kv, H_kv, B] and
 * v [Dv, n_kv, H_kv, B] f32/f16/bf16/q8_0/q4_0 with H % H_kv == 0 (as ggml: same B);
 * mask (may be NULL) f16/f32 contiguous [n_kv, >= n_q, M2, M3], H % M2 == 0, B % M3 == 0;
 * max_bias > 0 needs a mask. Result F32 [Dv, H, n_q, B]; src0 = q, src1 = k, src2 = v,
 * src3 = mask. */
TSR_API_IMPL struct tsr_tensor * tsr_flash_attn_ext(struct tsr_context * ctx, struct tsr_tensor * q, struct tsr_tensor * k,
                                                    struct tsr_tensor * v, struct tsr_tensor * mask, float scale,
                                                    float max_bias, float logit_softcap) {
    if (!tsr_impl::check_args("tsr_flash_attn_ext", ctx, q, k, v)) return nullptr;
    TSR_IMPL_REQUIRE(q->type == TSR_TYPE_F32, "tsr_flash_attn_ext: q %s must be f32", TSR_IMPL_D(q));
    TSR_IMPL_REQUIRE(k->type != TSR_TYPE_I32 && v->type != TSR_TYPE_I32, "tsr_flash_attn_ext: k %s / v %s must not be i32",
                     TSR_IMPL_D(k), TSR_IMPL_D(v));
    TSR_IMPL_REQUIRE(k->ne[0] == q->ne[0] && k->ne[2] > 0 && q->ne[2] % k->ne[2] == 0 && q->ne[3] == k->ne[3],
                     "tsr_flash_attn_ext: k %s does not fit q %s (need same head size, q heads a multiple of k heads)",
                     TSR_IMPL_D(k), TSR_IMPL_D(q));
    TSR_IMPL_REQUIRE(v->ne[1] == k->ne[1] && v->ne[2] == k->ne[2] && v->ne[3] == k->ne[3],
                     "tsr_flash_attn_ext: v %s does not match k %s in n_kv and heads", TSR_IMPL_D(v), TSR_IMPL_D(k));
    if (mask) {
        TSR_IMPL_REQUIRE(mask->type == TSR_TYPE_F16 || mask->type == TSR_TYPE_F32,
                         "tsr_flash_attn_ext: mask %s must be f16 or f32", TSR_IMPL_D(mask));
        TSR_IMPL_REQUIRE(tsr_is_contiguous(mask), "tsr_flash_attn_ext: mask %s must be contiguous", TSR_IMPL_D(mask));
        TSR_IMPL_REQUIRE(mask->ne[0] == k->ne[1] && mask->ne[1] >= q->ne[1] && mask->ne[2] > 0 && mask->ne[3] > 0 &&
                             q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0,
                         "tsr_flash_attn_ext: mask %s does not fit q %s and k %s (need [n_kv, >= n_q, ...])",
                         TSR_IMPL_D(mask), TSR_IMPL_D(q), TSR_IMPL_D(k));
    }
    TSR_IMPL_REQUIRE(!(max_bias > 0.0f) || mask, "tsr_flash_attn_ext: max_bias %g > 0 needs a mask", (double)max_bias);
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, v->ne[0], q->ne[2], q->ne[1], q->ne[3]);
    if (!r) return nullptr;
    tsr_set_op_params_f32(r, 0, scale);
    tsr_set_op_params_f32(r, 1, max_bias);
    tsr_set_op_params_f32(r, 2, logit_softcap);
    tsr_set_op_params_i32(r, 3, 0);
    return tsr_impl::op_result(r, TSR_OP_FLASH_ATTN_EXT, q, k, v, mask);
}

/* issue 17 part A */
/* ---- include/tessera/impl/ops_unary_shape.inl ---- */
/* ops_unary_shape.inl - construction of ggml's other unary and GLU functions, and of the
 * fill and shape ops (issue 17 part A): arange, fill, tri, cumsum, acc/set, diag,
 * repeat_back, l2_norm, top_k. Included by ops.inl (its helpers and TSR_IMPL_* macros);
 * the same rules: every input validated before the result is made, op_params layout
 * written next to each op and collected in docs/ops.md. */

/* ---- unary functions ------------------------------------------------------------------------ */

#define TSR_IMPL_UNARY_FNS(name, OP)                                                                        \
    TSR_API_IMPL struct tsr_tensor * tsr_##name(struct tsr_context * ctx, struct tsr_tensor * a) {            \
        return tsr_impl::unary_op("tsr_" #name, ctx, a, OP, false);                                         \
    }                                                                                                       \
    TSR_API_IMPL struct tsr_tensor * tsr_##name##_inplace(struct tsr_context * ctx, struct tsr_tensor * a) { \
        return tsr_impl::unary_op("tsr_" #name "_inplace", ctx, a, OP, true);                               \
    }
TSR_IMPL_UNARY_FNS(sgn, TSR_UNARY_OP_SGN)
TSR_IMPL_UNARY_FNS(step, TSR_UNARY_OP_STEP)
TSR_IMPL_UNARY_FNS(elu, TSR_UNARY_OP_ELU)
TSR_IMPL_UNARY_FNS(expm1, TSR_UNARY_OP_EXPM1)
TSR_IMPL_UNARY_FNS(softplus, TSR_UNARY_OP_SOFTPLUS)
TSR_IMPL_UNARY_FNS(gelu_erf, TSR_UNARY_OP_GELU_ERF)
TSR_IMPL_UNARY_FNS(floor, TSR_UNARY_OP_FLOOR)
TSR_IMPL_UNARY_FNS(ceil, TSR_UNARY_OP_CEIL)
TSR_IMPL_UNARY_FNS(round, TSR_UNARY_OP_ROUND)
TSR_IMPL_UNARY_FNS(trunc, TSR_UNARY_OP_TRUNC)
#undef TSR_IMPL_UNARY_FNS
/* ggml has no _inplace for these two */
TSR_API_IMPL struct tsr_tensor * tsr_hardswish(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_op("tsr_hardswish", ctx, a, TSR_UNARY_OP_HARDSWISH, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_hardsigmoid(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_op("tsr_hardsigmoid", ctx, a, TSR_UNARY_OP_HARDSIGMOID, false);
}

/* TSR_OP_SIN / TSR_OP_COS: no op_params. Result like a (inplace: a view of a). */
TSR_API_IMPL struct tsr_tensor * tsr_sin(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_sin", TSR_OP_SIN, ctx, a, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_sin_inplace(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_sin_inplace", TSR_OP_SIN, ctx, a, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_cos(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_cos", TSR_OP_COS, ctx, a, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_cos_inplace(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_cos_inplace", TSR_OP_COS, ctx, a, true);
}

/* TSR_OP_LEAKY_RELU: f32 negative_slope (slot 0). Result like a (inplace: a view of a). */
TSR_API_IMPL struct tsr_tensor * tsr_leaky_relu(struct tsr_context * ctx, struct tsr_tensor * a, float negative_slope,
                                                bool inplace) {
    struct tsr_tensor * r = tsr_impl::unary_like("tsr_leaky_relu", TSR_OP_LEAKY_RELU, ctx, a, inplace);
    if (r) tsr_set_op_params_f32(r, 0, negative_slope);
    return r;
}

/* ---- GLU ------------------------------------------------------------------------------------- */

TSR_API_IMPL struct tsr_tensor * tsr_glu(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_glu_op op, bool swapped) {
    return tsr_impl::glu_op("tsr_glu", ctx, a, nullptr, false, op, swapped);
}
TSR_API_IMPL struct tsr_tensor * tsr_glu_split(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                               enum tsr_glu_op op) {
    return tsr_impl::glu_op("tsr_glu_split", ctx, a, b, true, op, false);
}
#define TSR_IMPL_GLU_FNS(name, OP)                                                                            \
    TSR_API_IMPL struct tsr_tensor * tsr_##name(struct tsr_context * ctx, struct tsr_tensor * a) {              \
        return tsr_impl::glu_op("tsr_" #name, ctx, a, nullptr, false, OP, false);                             \
    }                                                                                                         \
    TSR_API_IMPL struct tsr_tensor * tsr_##name##_swapped(struct tsr_context * ctx, struct tsr_tensor * a) {    \
        return tsr_impl::glu_op("tsr_" #name "_swapped", ctx, a, nullptr, false, OP, true);                   \
    }                                                                                                         \
    TSR_API_IMPL struct tsr_tensor * tsr_##name##_split(struct tsr_context * ctx, struct tsr_tensor * a,        \
                                                        struct tsr_tensor * b) {                                \
        return tsr_impl::glu_op("tsr_" #name "_split", ctx, a, b, true, OP, false);                           \
    }
TSR_IMPL_GLU_FNS(reglu, TSR_GLU_OP_REGLU)
TSR_IMPL_GLU_FNS(geglu, TSR_GLU_OP_GEGLU)
TSR_IMPL_GLU_FNS(geglu_erf, TSR_GLU_OP_GEGLU_ERF)
TSR_IMPL_GLU_FNS(geglu_quick, TSR_GLU_OP_GEGLU_QUICK)
#undef TSR_IMPL_GLU_FNS
TSR_API_IMPL struct tsr_tensor * tsr_swiglu_swapped(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::glu_op("tsr_swiglu_swapped", ctx, a, nullptr, false, TSR_GLU_OP_SWIGLU, true);
}
/* b NULL: the fused form (ggml's). */
TSR_API_IMPL struct tsr_tensor * tsr_swiglu_oai(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                float alpha, float limit) {
    TSR_IMPL_REQUIRE(limit >= 0.0f, "tsr_swiglu_oai: limit %g must be >= 0", (double)limit);
    struct tsr_tensor * r = tsr_impl::glu_op("tsr_swiglu_oai", ctx, a, b, b != nullptr, TSR_GLU_OP_SWIGLU_OAI, false);
    if (r) {
        tsr_set_op_params_f32(r, 2, alpha);
        tsr_set_op_params_f32(r, 3, limit);
    }
    return r;
}

/* ---- fill and shape ops ------------------------------------------------------------------------ */

/* TSR_OP_ARANGE: f32 start (slot 0), stop (1), step (2). No sources. Result F32
 * [ceil((stop - start) / step)], element i = start + i*step (in float, as ggml). */
TSR_API_IMPL struct tsr_tensor * tsr_arange(struct tsr_context * ctx, float start, float stop, float step) {
    TSR_IMPL_REQUIRE(ctx, "tsr_arange: NULL context");
    const double n = std::ceil(((double)stop - (double)start) / (double)step);
    TSR_IMPL_REQUIRE(step != 0.0f && n >= 1.0 && n <= (double)INT32_MAX,
                     "tsr_arange: [%g, %g) in steps of %g holds no elements (or too many: %g)", (double)start,
                     (double)stop, (double)step, n);
    struct tsr_tensor * r = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, (int64_t)n);
    if (!r) return nullptr;
    tsr_set_op_params_f32(r, 0, start);
    tsr_set_op_params_f32(r, 1, stop);
    tsr_set_op_params_f32(r, 2, step);
    return tsr_impl::op_result(r, TSR_OP_ARANGE, nullptr);
}

/* TSR_OP_FILL: f32 c (slot 0). Result like a (f32/f16/bf16; inplace: a view of a), every
 * element c; src0 = a. */
TSR_IMPL_NS_BEGIN
static inline struct tsr_tensor * fill_op(const char * fn, struct tsr_context * ctx, struct tsr_tensor * a, float c,
                                          bool inplace) {
    struct tsr_tensor * r = unary_like(fn, TSR_OP_FILL, ctx, a, inplace);
    if (r) tsr_set_op_params_f32(r, 0, c);
    return r;
}
TSR_IMPL_NS_END
TSR_API_IMPL struct tsr_tensor * tsr_fill(struct tsr_context * ctx, struct tsr_tensor * a, float c) {
    return tsr_impl::fill_op("tsr_fill", ctx, a, c, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_fill_inplace(struct tsr_context * ctx, struct tsr_tensor * a, float c) {
    return tsr_impl::fill_op("tsr_fill_inplace", ctx, a, c, true);
}

/* TSR_OP_TRI: i32 type (slot 0, enum tsr_tri_type). Result like a (f32/f16/bf16): element
 * (i0, i1) kept where the type's predicate holds, 0 elsewhere; src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_tri(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_tri_type type) {
    TSR_IMPL_REQUIRE((int)type >= TSR_TRI_TYPE_UPPER_DIAG && (int)type <= TSR_TRI_TYPE_LOWER, "tsr_tri: unknown tri type %d",
                     (int)type);
    struct tsr_tensor * r = tsr_impl::unary_like("tsr_tri", TSR_OP_TRI, ctx, a, false);
    if (r) tsr_set_op_params_i32(r, 0, (int32_t)type);
    return r;
}

/* TSR_OP_CUMSUM: no op_params. Result like a (f32/f16/bf16): inclusive prefix sums of each
 * row (along ne0); src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_cumsum(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_cumsum", TSR_OP_CUMSUM, ctx, a, false);
}

/* TSR_OP_ACC / TSR_OP_SET: i64 nb1 (slots 0-1), nb2 (2-3), nb3 (4-5), offset (6-7), bytes;
 * i32 inplace (slot 8). a contiguous f32/f16/bf16, b f32/f16/bf16 of any layout; the view
 * of a with b's shape, strides (a's element size, nb1, nb2, nb3) and byte offset must lie
 * inside a, element-aligned. Result like a (inplace: a view of a): a, with that view
 * replaced by view + b (ACC) or b (SET). src0 = a, src1 = b. */
TSR_IMPL_NS_BEGIN
static inline bool check_acc_view(const char * fn, const struct tsr_tensor * a, const struct tsr_tensor * b, size_t nb1,
                                  size_t nb2, size_t nb3, size_t offset) {
    const size_t es = tsr_type_size(a->type);
    if (offset % es != 0 || nb1 % es != 0 || nb2 % es != 0 || nb3 % es != 0) {
        return tsr_set_error("%s: offset %zu and strides (%zu, %zu, %zu) must be multiples of %s's element size %zu", fn,
                             offset, nb1, nb2, nb3, TSR_IMPL_D(a), es);
    }
    if (tsr_nelements(b) == 0) return true;
    const size_t nb[4] = {es, nb1, nb2, nb3};
    /* the last element's byte: each term below is at most the sum, so overflow shows as wrap */
    double last = (double)offset;
    for (int d = 0; d < 4; ++d) last += (double)(b->ne[d] - 1) * (double)nb[d];
    if (last + (double)es > (double)tsr_nbytes(a)) {
        return tsr_set_error("%s: the view of %s at offset %zu with strides (%zu, %zu, %zu) for %s ends past its %zu bytes",
                             fn, TSR_IMPL_D(a), offset, nb1, nb2, nb3, TSR_IMPL_D(b), tsr_nbytes(a));
    }
    return true;
}

static inline struct tsr_tensor * acc_set_op(const char * fn, enum tsr_op op, struct tsr_context * ctx, struct tsr_tensor * a,
                                             struct tsr_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset,
                                             bool inplace) {
    if (!check_args(fn, ctx, a, b) || !check_float(fn, a, "a") || !check_float(fn, b, "b")) return nullptr;
    TSR_IMPL_REQUIRE(tsr_is_contiguous(a), "%s: %s must be contiguous", fn, TSR_IMPL_D(a));
    if (!check_acc_view(fn, a, b, nb1, nb2, nb3, offset)) return nullptr;
    struct tsr_tensor * r = like(ctx, a, inplace);
    if (!r) return nullptr;
    const int64_t params[4] = {(int64_t)nb1, (int64_t)nb2, (int64_t)nb3, (int64_t)offset};
    std::memcpy(r->op_params, params, sizeof(params));
    tsr_set_op_params_i32(r, 8, inplace ? 1 : 0);
    return op_result(r, op, a, b);
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_acc(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t nb1,
                                         size_t nb2, size_t nb3, size_t offset) {
    return tsr_impl::acc_set_op("tsr_acc", TSR_OP_ACC, ctx, a, b, nb1, nb2, nb3, offset, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_acc_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                 size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return tsr_impl::acc_set_op("tsr_acc_inplace", TSR_OP_ACC, ctx, a, b, nb1, nb2, nb3, offset, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_set(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t nb1,
                                         size_t nb2, size_t nb3, size_t offset) {
    return tsr_impl::acc_set_op("tsr_set", TSR_OP_SET, ctx, a, b, nb1, nb2, nb3, offset, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_set_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                 size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return tsr_impl::acc_set_op("tsr_set_inplace", TSR_OP_SET, ctx, a, b, nb1, nb2, nb3, offset, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_set_1d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t offset) {
    if (!tsr_impl::check_args("tsr_set_1d", ctx, a, b)) return nullptr;
    return tsr_impl::acc_set_op("tsr_set_1d", TSR_OP_SET, ctx, a, b, a->nb[1], a->nb[2], a->nb[3], offset, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_set_1d_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                    size_t offset) {
    if (!tsr_impl::check_args("tsr_set_1d_inplace", ctx, a, b)) return nullptr;
    return tsr_impl::acc_set_op("tsr_set_1d_inplace", TSR_OP_SET, ctx, a, b, a->nb[1], a->nb[2], a->nb[3], offset, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_set_2d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t nb1,
                                            size_t offset) {
    if (!tsr_impl::check_args("tsr_set_2d", ctx, a, b)) return nullptr;
    return tsr_impl::acc_set_op("tsr_set_2d", TSR_OP_SET, ctx, a, b, nb1, a->nb[2], a->nb[3], offset, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_set_2d_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                    size_t nb1, size_t offset) {
    if (!tsr_impl::check_args("tsr_set_2d_inplace", ctx, a, b)) return nullptr;
    return tsr_impl::acc_set_op("tsr_set_2d_inplace", TSR_OP_SET, ctx, a, b, nb1, a->nb[2], a->nb[3], offset, true);
}

/* TSR_OP_DIAG: no op_params. a f32/f16/bf16 [n, 1, ne2, ne3] -> a's type [n, n, ne2, ne3]:
 * a's row on the diagonal, zeros elsewhere. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_diag(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!tsr_impl::check_args("tsr_diag", ctx, a) || !tsr_impl::check_float("tsr_diag", a, "a")) return nullptr;
    TSR_IMPL_REQUIRE(a->ne[1] == 1, "tsr_diag: %s must be one row per matrix (ne1 == 1)", TSR_IMPL_D(a));
    return tsr_impl::op_result(tsr_new_tensor_4d(ctx, a->type, a->ne[0], a->ne[0], a->ne[2], a->ne[3]), TSR_OP_DIAG, a);
}

/* TSR_OP_REPEAT_BACK: no op_params. a f32/f16/bf16, b gives the shape (tsr_can_repeat(b, a)):
 * result of a's type and b's shape, element i = the sum of a's elements that
 * tsr_repeat(result, a) would copy from i. src0 = a only. */
TSR_API_IMPL struct tsr_tensor * tsr_repeat_back(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!tsr_impl::check_args("tsr_repeat_back", ctx, a, b) || !tsr_impl::check_float("tsr_repeat_back", a, "a")) return nullptr;
    TSR_IMPL_REQUIRE(tsr_can_repeat(b, a), "tsr_repeat_back: %s is not a repetition of %s's shape", TSR_IMPL_D(a),
                     TSR_IMPL_D(b));
    return tsr_impl::op_result(tsr_new_tensor(ctx, a->type, TSR_MAX_DIMS, b->ne), TSR_OP_REPEAT_BACK, a);
}

/* TSR_OP_L2_NORM: f32 eps (slot 0). a f32, result like a (inplace: a view of a): each row
 * x / max(||x||_2, eps). src0 = a. */
TSR_IMPL_NS_BEGIN
static inline struct tsr_tensor * l2_norm_op(const char * fn, struct tsr_context * ctx, struct tsr_tensor * a, float eps,
                                             bool inplace) {
    if (!check_args(fn, ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "%s: %s must be f32", fn, TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(eps >= 0.0f, "%s: eps %g must be >= 0", fn, (double)eps);
    struct tsr_tensor * r = like(ctx, a, inplace);
    if (r) tsr_set_op_params_f32(r, 0, eps);
    return op_result(r, TSR_OP_L2_NORM, a);
}
TSR_IMPL_NS_END
TSR_API_IMPL struct tsr_tensor * tsr_l2_norm(struct tsr_context * ctx, struct tsr_tensor * a, float eps) {
    return tsr_impl::l2_norm_op("tsr_l2_norm", ctx, a, eps, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_l2_norm_inplace(struct tsr_context * ctx, struct tsr_tensor * a, float eps) {
    return tsr_impl::l2_norm_op("tsr_l2_norm_inplace", ctx, a, eps, true);
}

/* TSR_OP_TOP_K: i32 k (slot 0). a f32 -> I32 [k, ne1, ne2, ne3], 1 <= k <= ne0: per row the
 * indices of the k largest values, largest first (argsort's order: ties by index, NaN
 * largest). src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_top_k(struct tsr_context * ctx, struct tsr_tensor * a, int k) {
    if (!tsr_impl::check_args("tsr_top_k", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "tsr_top_k: %s must be f32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(k >= 1 && k <= a->ne[0], "tsr_top_k: k %d out of range [1, %lld] for %s", k, (long long)a->ne[0],
                     TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->ne[0] <= INT32_MAX, "tsr_top_k: rows of %s are too long for i32 indices", TSR_IMPL_D(a));
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_I32, k, a->ne[1], a->ne[2], a->ne[3]);
    if (r) tsr_set_op_params_i32(r, 0, k);
    return tsr_impl::op_result(r, TSR_OP_TOP_K, a);
}
/* ---- include/tessera/impl/ops_custom.inl ---- */
/* ops_custom.inl - construction of user-defined ops (issue 17 part A): map_custom1/2/3 and
 * custom (ggml's callbacks). op_params hold tsr_impl::custom_params (core_internal.h):
 * the callback, n_tasks and userdata. Only the CPU backend runs them. Included by ops.inl. */

TSR_IMPL_NS_BEGIN
static inline bool check_custom(const char * fn, void (*fun)(void), int n_tasks) {
    if (!fun) return tsr_set_error("%s: NULL callback", fn);
    if (n_tasks != TSR_N_TASKS_MAX && n_tasks < 1) {
        return tsr_set_error("%s: n_tasks %d must be >= 1 or TSR_N_TASKS_MAX (%d)", fn, n_tasks, TSR_N_TASKS_MAX);
    }
    return true;
}

static inline struct tsr_tensor * with_custom_params(struct tsr_tensor * r, void (*fun)(void), int n_tasks, void * userdata) {
    if (!r) return nullptr;
    const custom_params cp = {fun, n_tasks, userdata};
    std::memcpy(r->op_params, &cp, sizeof(cp));
    return r;
}

/* MAP_CUSTOM1/2/3: result like a (inplace: a view of a); src0 = a, src1 = b, src2 = c. */
static inline struct tsr_tensor * map_custom(const char * fn, enum tsr_op op, struct tsr_context * ctx, struct tsr_tensor * a,
                                             struct tsr_tensor * b, struct tsr_tensor * c, void (*fun)(void), int n_tasks,
                                             void * userdata, bool inplace) {
    const int n_src = op == TSR_OP_MAP_CUSTOM1 ? 1 : op == TSR_OP_MAP_CUSTOM2 ? 2 : 3;
    if (!check_args(fn, ctx, a, n_src >= 2 ? b : a, n_src >= 3 ? c : a)) return nullptr;
    if (!check_custom(fn, fun, n_tasks)) return nullptr;
    struct tsr_tensor * r = with_custom_params(like(ctx, a, inplace), fun, n_tasks, userdata);
    return op_result(r, op, a, n_src >= 2 ? b : nullptr, n_src >= 3 ? c : nullptr);
}
TSR_IMPL_NS_END

#define TSR_IMPL_FN(f) reinterpret_cast<void (*)(void)>(f)
TSR_API_IMPL struct tsr_tensor * tsr_map_custom1(struct tsr_context * ctx, struct tsr_tensor * a, tsr_custom1_op_t fun,
                                                 int n_tasks, void * userdata) {
    return tsr_impl::map_custom("tsr_map_custom1", TSR_OP_MAP_CUSTOM1, ctx, a, nullptr, nullptr, TSR_IMPL_FN(fun), n_tasks,
                                userdata, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_map_custom1_inplace(struct tsr_context * ctx, struct tsr_tensor * a, tsr_custom1_op_t fun,
                                                         int n_tasks, void * userdata) {
    return tsr_impl::map_custom("tsr_map_custom1_inplace", TSR_OP_MAP_CUSTOM1, ctx, a, nullptr, nullptr, TSR_IMPL_FN(fun),
                                n_tasks, userdata, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_map_custom2(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                 tsr_custom2_op_t fun, int n_tasks, void * userdata) {
    return tsr_impl::map_custom("tsr_map_custom2", TSR_OP_MAP_CUSTOM2, ctx, a, b, nullptr, TSR_IMPL_FN(fun), n_tasks, userdata,
                                false);
}
TSR_API_IMPL struct tsr_tensor * tsr_map_custom2_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                         tsr_custom2_op_t fun, int n_tasks, void * userdata) {
    return tsr_impl::map_custom("tsr_map_custom2_inplace", TSR_OP_MAP_CUSTOM2, ctx, a, b, nullptr, TSR_IMPL_FN(fun), n_tasks,
                                userdata, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_map_custom3(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                 struct tsr_tensor * c, tsr_custom3_op_t fun, int n_tasks, void * userdata) {
    return tsr_impl::map_custom("tsr_map_custom3", TSR_OP_MAP_CUSTOM3, ctx, a, b, c, TSR_IMPL_FN(fun), n_tasks, userdata, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_map_custom3_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                         struct tsr_tensor * c, tsr_custom3_op_t fun, int n_tasks,
                                                         void * userdata) {
    return tsr_impl::map_custom("tsr_map_custom3_inplace", TSR_OP_MAP_CUSTOM3, ctx, a, b, c, TSR_IMPL_FN(fun), n_tasks,
                                userdata, true);
}

TSR_IMPL_NS_BEGIN
/* CUSTOM's extra sources: n_args of them, none NULL. */
static inline bool check_custom_args(const char * fn, struct tsr_tensor ** args, int n_args, int max_args) {
    if (n_args < 0 || n_args > max_args) return tsr_set_error("%s: n_args %d out of range [0, %d]", fn, n_args, max_args);
    if (n_args > 0 && !args) return tsr_set_error("%s: NULL args with n_args %d", fn, n_args);
    for (int i = 0; i < n_args; ++i) {
        if (!args[i]) return tsr_set_error("%s: args[%d] is NULL", fn, i);
    }
    return true;
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_custom_4d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0, int64_t ne1,
                                               int64_t ne2, int64_t ne3, struct tsr_tensor ** args, int n_args,
                                               tsr_custom_op_t fun, int n_tasks, void * userdata) {
    TSR_IMPL_REQUIRE(ctx, "tsr_custom_4d: NULL context");
    if (!tsr_impl::check_custom_args("tsr_custom_4d", args, n_args, TSR_MAX_SRC)) return nullptr;
    if (!tsr_impl::check_custom("tsr_custom_4d", TSR_IMPL_FN(fun), n_tasks)) return nullptr;
    struct tsr_tensor * r = tsr_impl::with_custom_params(tsr_new_tensor_4d(ctx, type, ne0, ne1, ne2, ne3), TSR_IMPL_FN(fun),
                                                         n_tasks, userdata);
    if (!r) return nullptr;
    tsr_impl_set_op(r, TSR_OP_CUSTOM);
    for (int i = 0; i < n_args; ++i) r->src[i] = args[i];
    return r;
}
TSR_API_IMPL struct tsr_tensor * tsr_custom_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor ** args,
                                                    int n_args, tsr_custom_op_t fun, int n_tasks, void * userdata) {
    if (!tsr_impl::check_args("tsr_custom_inplace", ctx, a)) return nullptr;
    if (!tsr_impl::check_custom_args("tsr_custom_inplace", args, n_args, TSR_MAX_SRC - 1)) return nullptr;
    if (!tsr_impl::check_custom("tsr_custom_inplace", TSR_IMPL_FN(fun), n_tasks)) return nullptr;
    struct tsr_tensor * r = tsr_impl::with_custom_params(tsr_view_tensor(ctx, a), TSR_IMPL_FN(fun), n_tasks, userdata);
    if (!r) return nullptr;
    tsr_impl_set_op(r, TSR_OP_CUSTOM, a);
    for (int i = 0; i < n_args; ++i) r->src[i + 1] = args[i];
    return r;
}
#undef TSR_IMPL_FN

#undef TSR_IMPL_D
#undef TSR_IMPL_REQUIRE
#undef TSR_IMPL_FAIL
/* ---- include/tessera/impl/ops_models.inl ---- */
/* ops_models.inl - construction of the ops that model families beyond decoder-only LLMs
 * need (issue 17 part B): expert-indexed mat-mul (MoE), 1-D and transposed / depthwise
 * convolutions, positions, sequence models. The rules of ops.inl hold: every input is
 * validated before the result is created (a failed op consumes no arena memory), shapes
 * and op_params follow ggml, and each op's op_params layout is written next to it and in
 * docs/ops.md. */

#define TSR_MODELS_FAIL(...)          \
    do {                              \
        tsr_set_error(__VA_ARGS__);   \
        return nullptr;               \
    } while (0)
#define TSR_MODELS_REQUIRE(cond, ...)              \
    do {                                           \
        if (!(cond)) TSR_MODELS_FAIL(__VA_ARGS__); \
    } while (0)
#define TSR_MODELS_D(t) tsr_impl_describe(t).s

/* ---- expert-indexed mat-mul ------------------------------------------------------------------ */

/* TSR_OP_MUL_MAT_ID: i32 precision (slot 0, enum tsr_prec). as [K, M, n_expert] (any mul_mat
 * weight type, rows not transposed), b f32 [K, n_b, n_tokens], ids I32 [n_used, n_tokens] with
 * n_used % n_b == 0. Result F32 [M, n_used, n_tokens]; src0 = as, src1 = b, src2 = ids. */
TSR_API_IMPL struct tsr_tensor * tsr_mul_mat_id(struct tsr_context * ctx, struct tsr_tensor * as, struct tsr_tensor * b,
                                                struct tsr_tensor * ids) {
    if (!tsr_impl::check_args("tsr_mul_mat_id", ctx, as, b, ids)) return nullptr;
    TSR_MODELS_REQUIRE(ids->type == TSR_TYPE_I32 && ids->ne[2] == 1 && ids->ne[3] == 1,
                       "tsr_mul_mat_id: ids %s must be an i32 matrix [n_used, n_tokens]", TSR_MODELS_D(ids));
    TSR_MODELS_REQUIRE(as->ne[3] == 1 && as->ne[2] > 0, "tsr_mul_mat_id: experts %s must be [K, M, n_expert] (3-D)",
                       TSR_MODELS_D(as));
    TSR_MODELS_REQUIRE(as->nb[0] == tsr_type_size(as->type) && as->nb[1] >= as->nb[0],
                       "tsr_mul_mat_id: experts %s must not be transposed", TSR_MODELS_D(as));
    TSR_MODELS_REQUIRE(b->ne[3] == 1 && b->ne[0] == as->ne[0],
                       "tsr_mul_mat_id: b %s must be [K, n_b, n_tokens] with the K of experts %s", TSR_MODELS_D(b),
                       TSR_MODELS_D(as));
    TSR_MODELS_REQUIRE(ids->ne[1] == b->ne[2], "tsr_mul_mat_id: ids %s and b %s differ in tokens (ids.ne1 vs b.ne2)",
                       TSR_MODELS_D(ids), TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(b->ne[1] > 0 && ids->ne[0] % b->ne[1] == 0,
                       "tsr_mul_mat_id: b %s has %lld rows per token, which do not divide the %lld ids per token of %s",
                       TSR_MODELS_D(b), (long long)b->ne[1], (long long)ids->ne[0], TSR_MODELS_D(ids));
    TSR_MODELS_REQUIRE(tsr_impl::is_float_type(b->type), "tsr_mul_mat_id: b %s must be f32, f16 or bf16", TSR_MODELS_D(b));
    struct tsr_tensor * r = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, as->ne[1], ids->ne[0], b->ne[2]);
    if (r) tsr_set_op_params_i32(r, 0, TSR_PREC_DEFAULT);
    return tsr_impl::op_result(r, TSR_OP_MUL_MAT_ID, as, b, ids);
}

TSR_API_IMPL bool tsr_mul_mat_set_prec(struct tsr_tensor * a, enum tsr_prec prec) {
    if (!a) return tsr_set_error("tsr_mul_mat_set_prec: NULL tensor");
    if (a->op != TSR_OP_MUL_MAT && a->op != TSR_OP_MUL_MAT_ID) {
        return tsr_set_error("tsr_mul_mat_set_prec: %s is a %s node, not MUL_MAT or MUL_MAT_ID", TSR_MODELS_D(a),
                             tsr_op_name(a->op));
    }
    if (prec != TSR_PREC_DEFAULT && prec != TSR_PREC_F32) {
        return tsr_set_error("tsr_mul_mat_set_prec: unknown precision %d for %s", (int)prec, TSR_MODELS_D(a));
    }
    tsr_set_op_params_i32(a, 0, (int32_t)prec);
    return true;
}

/* ---- convolutions and pooling ------------------------------------------------------------------ */

TSR_IMPL_NS_BEGIN
/* (ins - 1) * s - 2 * p + d * (ks - 1) + 1: ggml's transposed-convolution output size. */
static inline int64_t conv_transpose_out_size(int64_t ins, int64_t ks, int s, int p, int d) {
    return (ins - 1) * s - 2 * (int64_t)p + (int64_t)d * (ks - 1) + 1;
}
/* 3-D a seen as 4-D with a dim of size 1 inserted at `at` (a view: a's strides kept). */
static inline struct tsr_tensor * with_unit_dim(struct tsr_context * ctx, struct tsr_tensor * a, int at) {
    int64_t ne[4];
    size_t nb[4];
    for (int i = 0, j = 0; i < 4; ++i) {
        if (i == at) {
            ne[i] = 1;
            nb[i] = i > 0 ? nb[i - 1] * (size_t)ne[i - 1] : a->nb[0];
            continue;
        }
        ne[i] = a->ne[j];
        nb[i] = a->nb[j];
        ++j;
    }
    return tsr_view_4d(ctx, a, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], 0);
}
/* The 1-D convolutions view their operands as 2-D ones: rows must be dense for a view. */
static inline bool check_dense_rows(const char * fn, const struct tsr_tensor * a, const struct tsr_tensor * b) {
    if (a->nb[0] != tsr_type_size(a->type) || b->nb[0] != tsr_type_size(b->type)) {
        return tsr_set_error("%s: kernel %s and input %s need dense rows (nb0 = element size; tsr_cont a transposed one)", fn,
                             tsr_impl_describe(a).s, tsr_impl_describe(b).s);
    }
    return true;
}
TSR_IMPL_NS_END

/* conv_1d(a kernel [K, IC, OC], b input [L, IC, N]) -> F32 [OL, OC, N], OL = (L + 2*p0 -
 * d0*(K-1) - 1)/s0 + 1: a CONV_2D node (height 1) over views of a and b, so the columns live
 * in the backend's workspace as conv_2d's do; the result is its 3-D reshape. */
TSR_API_IMPL struct tsr_tensor * tsr_conv_1d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int s0,
                                             int p0, int d0) {
    if (!tsr_impl::check_args("tsr_conv_1d", ctx, a, b)) return nullptr;
    if (!tsr_impl::check_conv_params("tsr_conv_1d", s0, 1, p0, 0, d0, 1)) return nullptr;
    TSR_MODELS_REQUIRE(a->ne[3] == 1 && b->ne[3] == 1, "tsr_conv_1d: kernel %s and input %s must be 3-D", TSR_MODELS_D(a),
                       TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(a->ne[1] == b->ne[1], "tsr_conv_1d: kernel %s has %lld input channels, input %s has %lld",
                       TSR_MODELS_D(a), (long long)a->ne[1], TSR_MODELS_D(b), (long long)b->ne[1]);
    TSR_MODELS_REQUIRE(tsr_impl::is_float_type(a->type) && tsr_impl::is_float_type(b->type),
                       "tsr_conv_1d: kernel %s and input %s must be float types", TSR_MODELS_D(a), TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(tsr_impl::conv_out_size(b->ne[0], a->ne[0], s0, p0, d0) > 0,
                       "tsr_conv_1d: input %s is too short for kernel %s", TSR_MODELS_D(b), TSR_MODELS_D(a));
    if (!tsr_impl::check_dense_rows("tsr_conv_1d", a, b)) return nullptr;
    struct tsr_tensor * a4 = tsr_impl::with_unit_dim(ctx, a, 1);
    struct tsr_tensor * b4 = a4 ? tsr_impl::with_unit_dim(ctx, b, 1) : nullptr;
    struct tsr_tensor * r = b4 ? tsr_conv_2d(ctx, a4, b4, s0, 1, p0, 0, d0, 1) : nullptr;
    return r ? tsr_reshape_3d(ctx, r, r->ne[0], r->ne[2], r->ne[3]) : nullptr;
}

/* TSR_OP_CONV_2D_DW: i32 s0, s1, p0, p1, d0, d1 (slots 0..5). a kernel [KW, KH, 1, C] (f32/f16),
 * b input [W, H, C, N] (f32/f16) -> F32 [OW, OH, C, N] (sizes as conv_2d): channel c of the
 * input convolved with kernel c alone (depthwise), computed directly. src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_conv_2d_dw_direct(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                       int s0, int s1, int p0, int p1, int d0, int d1) {
    if (!tsr_impl::check_args("tsr_conv_2d_dw", ctx, a, b)) return nullptr;
    if (!tsr_impl::check_conv_params("tsr_conv_2d_dw", s0, s1, p0, p1, d0, d1)) return nullptr;
    TSR_MODELS_REQUIRE((a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && (b->type == TSR_TYPE_F32 || b->type == TSR_TYPE_F16),
                       "tsr_conv_2d_dw: kernel %s and input %s must be f32 or f16", TSR_MODELS_D(a), TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(a->ne[2] == 1 && a->ne[3] == b->ne[2],
                       "tsr_conv_2d_dw: kernel %s must be [KW, KH, 1, C] with the C = %lld channels of input %s",
                       TSR_MODELS_D(a), (long long)b->ne[2], TSR_MODELS_D(b));
    const int64_t OW = tsr_impl::conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    const int64_t OH = tsr_impl::conv_out_size(b->ne[1], a->ne[1], s1, p1, d1);
    TSR_MODELS_REQUIRE(OW > 0 && OH > 0, "tsr_conv_2d_dw: input %s is too small for kernel %s (output %lld x %lld)",
                       TSR_MODELS_D(b), TSR_MODELS_D(a), (long long)OW, (long long)OH);
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, OW, OH, b->ne[2], b->ne[3]);
    if (!r) return nullptr;
    const int32_t params[6] = {s0, s1, p0, p1, d0, d1};
    tsr_set_op_params(r, params, sizeof(params));
    return tsr_impl::op_result(r, TSR_OP_CONV_2D_DW, a, b);
}
TSR_API_IMPL struct tsr_tensor * tsr_conv_2d_dw(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int s0,
                                                int s1, int p0, int p1, int d0, int d1) {
    return tsr_conv_2d_dw_direct(ctx, a, b, s0, s1, p0, p1, d0, d1);
}

/* conv_1d_dw(a kernel [K, 1, C], b input [L, C, N]) -> F32 [OL, C, N]: a CONV_2D_DW node
 * (height 1) over views of a and b, reshaped to 3-D. */
TSR_API_IMPL struct tsr_tensor * tsr_conv_1d_dw(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int s0,
                                                int p0, int d0) {
    if (!tsr_impl::check_args("tsr_conv_1d_dw", ctx, a, b)) return nullptr;
    if (!tsr_impl::check_conv_params("tsr_conv_1d_dw", s0, 1, p0, 0, d0, 1)) return nullptr;
    TSR_MODELS_REQUIRE(a->ne[1] == 1 && a->ne[3] == 1 && b->ne[3] == 1 && a->ne[2] == b->ne[1],
                       "tsr_conv_1d_dw: kernel %s must be [K, 1, C] with the C = %lld channels of input %s [L, C, N]",
                       TSR_MODELS_D(a), (long long)b->ne[1], TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE((a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && (b->type == TSR_TYPE_F32 || b->type == TSR_TYPE_F16),
                       "tsr_conv_1d_dw: kernel %s and input %s must be f32 or f16", TSR_MODELS_D(a), TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(tsr_impl::conv_out_size(b->ne[0], a->ne[0], s0, p0, d0) > 0,
                       "tsr_conv_1d_dw: input %s is too short for kernel %s", TSR_MODELS_D(b), TSR_MODELS_D(a));
    if (!tsr_impl::check_dense_rows("tsr_conv_1d_dw", a, b)) return nullptr;
    /* kernel [K, 1, C] -> [K, 1, 1, C]; input [L, C, N] -> [L, 1, C, N] */
    struct tsr_tensor * a4 = tsr_view_4d(ctx, a, a->ne[0], 1, 1, a->ne[2], a->nb[1], a->nb[1], a->nb[2], 0);
    struct tsr_tensor * b4 = a4 ? tsr_impl::with_unit_dim(ctx, b, 1) : nullptr;
    struct tsr_tensor * r = b4 ? tsr_conv_2d_dw_direct(ctx, a4, b4, s0, 1, p0, 0, d0, 1) : nullptr;
    return r ? tsr_reshape_3d(ctx, r, r->ne[0], r->ne[2], r->ne[3]) : nullptr;
}

/* TSR_OP_CONV_TRANSPOSE_1D: i32 s0, p0, d0 (slots 0..2). a kernel [K, OC, IC] (f32/f16),
 * b input [L, IC, N] (f32/f16) -> F32 [OL, OC, N], OL = (L-1)*s0 - 2*p0 + d0*(K-1) + 1:
 * out[l*s0 + k*d0 - p0, oc, n] += a[k, oc, ic] * b[l, ic, n] (ggml takes only p0 = 0,
 * d0 = 1 and N = 1; tessera any). src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_conv_transpose_1d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                       int s0, int p0, int d0) {
    if (!tsr_impl::check_args("tsr_conv_transpose_1d", ctx, a, b)) return nullptr;
    if (!tsr_impl::check_conv_params("tsr_conv_transpose_1d", s0, 1, p0, 0, d0, 1)) return nullptr;
    TSR_MODELS_REQUIRE((a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && (b->type == TSR_TYPE_F32 || b->type == TSR_TYPE_F16),
                       "tsr_conv_transpose_1d: kernel %s and input %s must be f32 or f16", TSR_MODELS_D(a), TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(a->ne[3] == 1 && b->ne[3] == 1 && a->ne[2] == b->ne[1],
                       "tsr_conv_transpose_1d: kernel %s must be [K, OC, IC] with the IC = %lld channels of input %s [L, IC, N]",
                       TSR_MODELS_D(a), (long long)b->ne[1], TSR_MODELS_D(b));
    const int64_t OL = tsr_impl::conv_transpose_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    TSR_MODELS_REQUIRE(OL > 0, "tsr_conv_transpose_1d: padding %d leaves no output of input %s and kernel %s", p0,
                       TSR_MODELS_D(b), TSR_MODELS_D(a));
    struct tsr_tensor * r = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, OL, a->ne[1], b->ne[2]);
    if (!r) return nullptr;
    const int32_t params[3] = {s0, p0, d0};
    tsr_set_op_params(r, params, sizeof(params));
    return tsr_impl::op_result(r, TSR_OP_CONV_TRANSPOSE_1D, a, b);
}

/* TSR_OP_CONV_TRANSPOSE_2D: i32 stride (slot 0). a kernel [KW, KH, OC, IC] (f32/f16), b input
 * [W, H, IC, N] (f32/f16) -> F32 [(W-1)*stride + KW, (H-1)*stride + KH, OC, N] (no padding).
 * src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_conv_transpose_2d_p0(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                          int stride) {
    if (!tsr_impl::check_args("tsr_conv_transpose_2d_p0", ctx, a, b)) return nullptr;
    TSR_MODELS_REQUIRE(stride > 0, "tsr_conv_transpose_2d_p0: stride %d must be > 0", stride);
    TSR_MODELS_REQUIRE((a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && (b->type == TSR_TYPE_F32 || b->type == TSR_TYPE_F16),
                       "tsr_conv_transpose_2d_p0: kernel %s and input %s must be f32 or f16", TSR_MODELS_D(a), TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(a->ne[3] == b->ne[2],
                       "tsr_conv_transpose_2d_p0: kernel %s must be [KW, KH, OC, IC] with the IC = %lld channels of input %s",
                       TSR_MODELS_D(a), (long long)b->ne[2], TSR_MODELS_D(b));
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, tsr_impl::conv_transpose_out_size(b->ne[0], a->ne[0], stride, 0, 1),
                                              tsr_impl::conv_transpose_out_size(b->ne[1], a->ne[1], stride, 0, 1), a->ne[2], b->ne[3]);
    if (r) tsr_set_op_params_i32(r, 0, stride);
    return tsr_impl::op_result(r, TSR_OP_CONV_TRANSPOSE_2D, a, b);
}

/* pool_1d(a [L, ...]) -> F32 [(L + 2*p0 - k0)/s0 + 1, ne1, ne2, ne3]: a POOL_2D node with a
 * window of height 1 (ggml has an op of its own; the arithmetic is the same). */
TSR_API_IMPL struct tsr_tensor * tsr_pool_1d(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_op_pool op, int k0, int s0,
                                             int p0) {
    return tsr_pool_2d(ctx, a, op, k0, 1, s0, 1, (float)p0, 0.0f);
}

/* TSR_OP_PAD_REFLECT_1D: i32 p0, p1 (slots 0, 1). a f32 -> [p0 + ne0 + p1, ne1, ne2, ne3]:
 * dim 0 mirrored at both ends without repeating the edge (PyTorch's ReflectionPad1d), so
 * p0, p1 < ne0. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_pad_reflect_1d(struct tsr_context * ctx, struct tsr_tensor * a, int p0, int p1) {
    if (!tsr_impl::check_args("tsr_pad_reflect_1d", ctx, a)) return nullptr;
    TSR_MODELS_REQUIRE(a->type == TSR_TYPE_F32, "tsr_pad_reflect_1d: %s must be f32", TSR_MODELS_D(a));
    TSR_MODELS_REQUIRE(p0 >= 0 && p1 >= 0 && p0 < a->ne[0] && p1 < a->ne[0],
                       "tsr_pad_reflect_1d: paddings %d, %d must be in [0, ne0 = %lld) for %s", p0, p1, (long long)a->ne[0],
                       TSR_MODELS_D(a));
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, a->type, a->ne[0] + p0 + p1, a->ne[1], a->ne[2], a->ne[3]);
    if (r) {
        const int32_t params[2] = {p0, p1};
        tsr_set_op_params(r, params, sizeof(params));
    }
    return tsr_impl::op_result(r, TSR_OP_PAD_REFLECT_1D, a);
}

/* pad_ext: a PAD node with zeros before (lp*) and after (rp*) each dim: trailing pads in slots
 * 0..3 as tsr_pad, leading pads in slots 4..7. */
TSR_API_IMPL struct tsr_tensor * tsr_pad_ext(struct tsr_context * ctx, struct tsr_tensor * a, int lp0, int rp0, int lp1, int rp1,
                                             int lp2, int rp2, int lp3, int rp3) {
    if (!tsr_impl::check_args("tsr_pad_ext", ctx, a)) return nullptr;
    TSR_MODELS_REQUIRE(lp0 >= 0 && lp1 >= 0 && lp2 >= 0 && lp3 >= 0 && rp0 >= 0 && rp1 >= 0 && rp2 >= 0 && rp3 >= 0,
                       "tsr_pad_ext: paddings (%d, %d, %d, %d, %d, %d, %d, %d) of %s must be >= 0", lp0, rp0, lp1, rp1, lp2, rp2,
                       lp3, rp3, TSR_MODELS_D(a));
    struct tsr_tensor * r = tsr_pad(ctx, a, lp0 + rp0, lp1 + rp1, lp2 + rp2, lp3 + rp3);
    if (!r) return nullptr;
    const int32_t lead[4] = {lp0, lp1, lp2, lp3};
    for (int i = 0; i < 4; ++i) tsr_set_op_params_i32(r, 4 + (uint32_t)i, lead[i]);
    return r;
}

/* TSR_OP_ROLL: i32 shift0..shift3 (slots 0..3). a (f32/f16/bf16/i32) -> like a, every dim
 * rotated: out[i] = a[(i - shift) mod ne] (torch.roll); |shift_i| <= ne_i. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_roll(struct tsr_context * ctx, struct tsr_tensor * a, int shift0, int shift1, int shift2,
                                          int shift3) {
    if (!tsr_impl::check_args("tsr_roll", ctx, a)) return nullptr;
    TSR_MODELS_REQUIRE(!tsr_is_quantized(a->type), "tsr_roll: %s must not be quantized", TSR_MODELS_D(a));
    const int32_t shifts[4] = {shift0, shift1, shift2, shift3};
    for (int i = 0; i < 4; ++i) {
        TSR_MODELS_REQUIRE(shifts[i] <= a->ne[i] && -shifts[i] <= a->ne[i], "tsr_roll: shift %d of dim %d exceeds ne%d = %lld of %s",
                           shifts[i], i, i, (long long)a->ne[i], TSR_MODELS_D(a));
    }
    struct tsr_tensor * r = tsr_new_tensor(ctx, a->type, TSR_MAX_DIMS, a->ne);
    if (r) tsr_set_op_params(r, shifts, sizeof(shifts));
    return tsr_impl::op_result(r, TSR_OP_ROLL, a);
}

/* ---- positions ------------------------------------------------------------------------------------ */

/* TSR_OP_TIMESTEP_EMBEDDING: i32 dim (slot 0), max_period (slot 1). timesteps f32 [N] -> F32
 * [dim, N]: out[j, i] = cos(t_i * f_j), out[j + dim/2, i] = sin(t_i * f_j), f_j =
 * exp(-ln(max_period) * j / (dim/2)), j < dim/2; an odd dim's last element is 0. src0 = t. */
TSR_API_IMPL struct tsr_tensor * tsr_timestep_embedding(struct tsr_context * ctx, struct tsr_tensor * timesteps, int dim,
                                                        int max_period) {
    if (!tsr_impl::check_args("tsr_timestep_embedding", ctx, timesteps)) return nullptr;
    TSR_MODELS_REQUIRE(timesteps->type == TSR_TYPE_F32 && timesteps->ne[1] == 1 && timesteps->ne[2] == 1 && timesteps->ne[3] == 1,
                       "tsr_timestep_embedding: timesteps %s must be an f32 vector", TSR_MODELS_D(timesteps));
    TSR_MODELS_REQUIRE(dim > 0 && max_period > 0, "tsr_timestep_embedding: dim %d and max_period %d must be > 0", dim, max_period);
    struct tsr_tensor * r = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, dim, timesteps->ne[0]);
    if (r) {
        const int32_t params[2] = {dim, max_period};
        tsr_set_op_params(r, params, sizeof(params));
    }
    return tsr_impl::op_result(r, TSR_OP_TIMESTEP_EMBEDDING, timesteps);
}

/* TSR_OP_ROPE with mode TSR_ROPE_TYPE_MROPE or _VISION: the ROPE slots 0..10, then i32
 * sections[4] in slots 11..14. a f32/f16 [head_dim, n_head, n_tokens] -> like a. b I32
 * [4 * n_tokens]; c freq factors f32 [>= head_dim / 2] or NULL. src0 = a, src1 = b, src2 = c. */
TSR_API_IMPL struct tsr_tensor * tsr_rope_multi(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                struct tsr_tensor * c, int n_dims, int sections[TSR_MROPE_SECTIONS], int mode,
                                                int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                                float attn_factor, float beta_fast, float beta_slow) {
    if (!tsr_impl::check_args("tsr_rope_multi", ctx, a, b)) return nullptr;
    TSR_MODELS_REQUIRE(sections != nullptr, "tsr_rope_multi: NULL sections");
    TSR_MODELS_REQUIRE((a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && a->ne[3] == 1,
                       "tsr_rope_multi: %s must be f32 or f16 [head_dim, n_head, n_tokens]", TSR_MODELS_D(a));
    TSR_MODELS_REQUIRE(b->type == TSR_TYPE_I32 && b->ne[1] == 1 && b->ne[2] == 1 && b->ne[3] == 1 && b->ne[0] == 4 * a->ne[2],
                       "tsr_rope_multi: positions %s must be i32 [4 * n_tokens = %lld]", TSR_MODELS_D(b), (long long)(4 * a->ne[2]));
    TSR_MODELS_REQUIRE(mode == TSR_ROPE_TYPE_MROPE || mode == TSR_ROPE_TYPE_VISION,
                       "tsr_rope_multi: mode %d must be TSR_ROPE_TYPE_MROPE (8) or TSR_ROPE_TYPE_VISION (24)", mode);
    TSR_MODELS_REQUIRE(n_dims > 0 && n_dims % 2 == 0 && n_dims <= a->ne[0] && (mode != TSR_ROPE_TYPE_VISION || 2 * n_dims == a->ne[0]),
                       "tsr_rope_multi: n_dims %d must be even and in (0, %lld] (vision: half of it)", n_dims, (long long)a->ne[0]);
    const int sect_dims = sections[0] + sections[1] + sections[2] + sections[3];
    TSR_MODELS_REQUIRE(sections[0] >= 0 && sections[1] >= 0 && sections[2] >= 0 && sections[3] >= 0 && sect_dims > 0 &&
                           sect_dims <= a->ne[0],
                       "tsr_rope_multi: sections (%d, %d, %d, %d) must be >= 0 with a sum in (0, %lld]", sections[0], sections[1],
                       sections[2], sections[3], (long long)a->ne[0]);
    if (c) {
        TSR_MODELS_REQUIRE(c->type == TSR_TYPE_F32 && c->ne[0] >= a->ne[0] / 2,
                           "tsr_rope_multi: frequency factors %s must be f32 with >= %lld elements", TSR_MODELS_D(c),
                           (long long)(a->ne[0] / 2));
    }
    struct tsr_tensor * r = tsr_dup_tensor(ctx, a);
    if (!r) return nullptr;
    int32_t params[15] = {0, n_dims, mode, 0, n_ctx_orig};
    const float fp[6] = {freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow};
    memcpy(params + 5, fp, sizeof(fp));
    memcpy(params + 11, sections, sizeof(int32_t) * TSR_MROPE_SECTIONS);
    tsr_set_op_params(r, params, sizeof(params));
    return tsr_impl::op_result(r, TSR_OP_ROPE, a, b, c);
}

/* ---- windows and relative positions (SAM-style vision transformers) ---------------------------------- */

/* TSR_OP_WIN_PART: i32 npx, npy, w (slots 0..2). a f32 [C, W, H] -> F32 [C, w, w, npx*npy],
 * npx = ceil(W / w), npy = ceil(H / w): window (px, py) is number py*npx + px, zero past the
 * image. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_win_part(struct tsr_context * ctx, struct tsr_tensor * a, int w) {
    if (!tsr_impl::check_args("tsr_win_part", ctx, a)) return nullptr;
    TSR_MODELS_REQUIRE(a->type == TSR_TYPE_F32 && a->ne[3] == 1, "tsr_win_part: %s must be f32 [C, W, H]", TSR_MODELS_D(a));
    TSR_MODELS_REQUIRE(w > 0, "tsr_win_part: window %d must be > 0", w);
    const int64_t npx = (a->ne[1] + w - 1) / w, npy = (a->ne[2] + w - 1) / w;
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, a->ne[0], w, w, npx * npy);
    if (r) {
        const int32_t params[3] = {(int32_t)npx, (int32_t)npy, w};
        tsr_set_op_params(r, params, sizeof(params));
    }
    return tsr_impl::op_result(r, TSR_OP_WIN_PART, a);
}

/* TSR_OP_WIN_UNPART: i32 w (slot 0). a f32 [C, w, w, n_windows] -> F32 [C, w0, h0]: the inverse
 * of win_part for an image of w0 x h0 (n_windows = ceil(w0/w) * ceil(h0/w)). src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_win_unpart(struct tsr_context * ctx, struct tsr_tensor * a, int w0, int h0, int w) {
    if (!tsr_impl::check_args("tsr_win_unpart", ctx, a)) return nullptr;
    TSR_MODELS_REQUIRE(w > 0 && w0 > 0 && h0 > 0, "tsr_win_unpart: window %d and image %d x %d must be > 0", w, w0, h0);
    const int64_t nw = (int64_t)((w0 + w - 1) / w) * ((h0 + w - 1) / w);
    TSR_MODELS_REQUIRE(a->type == TSR_TYPE_F32 && a->ne[1] == w && a->ne[2] == w && a->ne[3] == nw,
                       "tsr_win_unpart: %s must be f32 [C, %d, %d, %lld windows of a %d x %d image]", TSR_MODELS_D(a), w, w,
                       (long long)nw, w0, h0);
    struct tsr_tensor * r = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, a->ne[0], w0, h0);
    if (r) tsr_set_op_params_i32(r, 0, w);
    return tsr_impl::op_result(r, TSR_OP_WIN_UNPART, a);
}

/* TSR_OP_GET_REL_POS: no op_params. a f32/f16 [C, 2*qh - 1] (a table of relative positions) ->
 * a's type [C, kh, qh], qh == kh: out[:, k, q] = a[:, (kh - 1 - k) + q] (ggml: f16 only).
 * src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_get_rel_pos(struct tsr_context * ctx, struct tsr_tensor * a, int qh, int kh) {
    if (!tsr_impl::check_args("tsr_get_rel_pos", ctx, a)) return nullptr;
    TSR_MODELS_REQUIRE(qh > 0 && qh == kh, "tsr_get_rel_pos: qh %d and kh %d must be equal and > 0", qh, kh);
    TSR_MODELS_REQUIRE((a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && a->ne[1] == 2 * (int64_t)qh - 1 && a->ne[2] == 1 &&
                           a->ne[3] == 1,
                       "tsr_get_rel_pos: %s must be f32 or f16 [C, 2*%d - 1]", TSR_MODELS_D(a), qh);
    struct tsr_tensor * r = tsr_new_tensor_3d(ctx, a->type, a->ne[0], kh, qh);
    return tsr_impl::op_result(r, TSR_OP_GET_REL_POS, a);
}

TSR_IMPL_NS_BEGIN
/* TSR_OP_ADD_REL_POS: i32 inplace (slot 0). a f32 contiguous [W*W, ne11*ne12, ne13], pw and ph
 * f32 contiguous [W, ne11, ne12, ne13] -> like a (inplace: a view of a): out[x + W*y, i11 +
 * ne11*i12, i13] = a[...] + ph[y, i11, i12, i13] + pw[x, i11, i12, i13]. src0..2 = a, pw, ph. */
static inline struct tsr_tensor * add_rel_pos(const char * fn, struct tsr_context * ctx, struct tsr_tensor * a,
                                              struct tsr_tensor * pw, struct tsr_tensor * ph, bool inplace) {
    if (!check_args(fn, ctx, a, pw, ph)) return nullptr;
    TSR_MODELS_REQUIRE(a->type == TSR_TYPE_F32 && pw->type == TSR_TYPE_F32 && ph->type == TSR_TYPE_F32 && tsr_is_contiguous(a) &&
                           tsr_is_contiguous(pw) && tsr_is_contiguous(ph),
                       "%s: a %s, pw %s and ph %s must be contiguous f32", fn, TSR_MODELS_D(a), TSR_MODELS_D(pw), TSR_MODELS_D(ph));
    TSR_MODELS_REQUIRE(tsr_are_same_shape(pw, ph) && pw->ne[0] * pw->ne[0] == a->ne[0] && pw->ne[1] * pw->ne[2] == a->ne[1] &&
                           pw->ne[3] == a->ne[2] && a->ne[3] == 1,
                       "%s: pw %s and ph %s must be [W, n1, n2, n3] for a %s [W*W, n1*n2, n3]", fn, TSR_MODELS_D(pw),
                       TSR_MODELS_D(ph), TSR_MODELS_D(a));
    struct tsr_tensor * r = like(ctx, a, inplace);
    if (r) tsr_set_op_params_i32(r, 0, inplace ? 1 : 0);
    return op_result(r, TSR_OP_ADD_REL_POS, a, pw, ph);
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_add_rel_pos(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * pw,
                                                 struct tsr_tensor * ph) {
    return tsr_impl::add_rel_pos("tsr_add_rel_pos", ctx, a, pw, ph, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_add_rel_pos_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * pw,
                                                         struct tsr_tensor * ph) {
    return tsr_impl::add_rel_pos("tsr_add_rel_pos_inplace", ctx, a, pw, ph, true);
}

/* ---- sequence models ---------------------------------------------------------------------------- */

/* TSR_OP_SSM_CONV: no op_params. sx f32 [d_conv - 1 + n_t, d_inner, n_s] (dense rows), c f32
 * [d_conv, d_inner] -> F32 [d_inner, n_t, n_s]: out[i, t, s] = sum_k sx[t + k, i, s] * c[k, i]
 * (Mamba's causal depthwise convolution over a window that carries the previous state).
 * src0 = sx, src1 = c. */
TSR_API_IMPL struct tsr_tensor * tsr_ssm_conv(struct tsr_context * ctx, struct tsr_tensor * sx, struct tsr_tensor * c) {
    if (!tsr_impl::check_args("tsr_ssm_conv", ctx, sx, c)) return nullptr;
    TSR_MODELS_REQUIRE(sx->type == TSR_TYPE_F32 && c->type == TSR_TYPE_F32, "tsr_ssm_conv: sx %s and c %s must be f32",
                       TSR_MODELS_D(sx), TSR_MODELS_D(c));
    TSR_MODELS_REQUIRE(sx->ne[3] == 1 && c->ne[2] == 1 && c->ne[3] == 1 && sx->ne[1] == c->ne[1],
                       "tsr_ssm_conv: sx %s must be [d_conv - 1 + n_t, d_inner, n_s] and c %s [d_conv, d_inner]",
                       TSR_MODELS_D(sx), TSR_MODELS_D(c));
    TSR_MODELS_REQUIRE(c->ne[0] > 0 && sx->ne[0] >= c->ne[0], "tsr_ssm_conv: sx %s is shorter than the window of c %s",
                       TSR_MODELS_D(sx), TSR_MODELS_D(c));
    TSR_MODELS_REQUIRE(sx->nb[0] == 4 && c->nb[0] == 4, "tsr_ssm_conv: sx %s and c %s need dense rows", TSR_MODELS_D(sx),
                       TSR_MODELS_D(c));
    struct tsr_tensor * r = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, sx->ne[1], sx->ne[0] - c->ne[0] + 1, sx->ne[2]);
    return tsr_impl::op_result(r, TSR_OP_SSM_CONV, sx, c);
}

/* TSR_OP_SSM_SCAN: no op_params. s f32 [d_state, head_dim, n_head, >= n_seqs] (the state pool),
 * x f32 [head_dim, n_head, n_t, n_seqs], dt f32 [n_head, n_t, n_seqs], A f32 [d_state, n_head]
 * (Mamba-1) or [1, n_head] (Mamba-2), B and C f32 [d_state, n_group, n_t, n_seqs] (n_head %
 * n_group == 0), ids I32 [n_seqs] (the state of sequence q is s[..., ids[q]]). Result F32 1-D:
 * y [head_dim, n_head, n_t, n_seqs] then the final states [d_state, head_dim, n_head, n_seqs].
 * Per token: dt' = softplus(dt), state = state * exp(dt' A) + B x dt', y = state . C.
 * src0..6 = s, x, dt, A, B, C, ids. */
TSR_API_IMPL struct tsr_tensor * tsr_ssm_scan(struct tsr_context * ctx, struct tsr_tensor * s, struct tsr_tensor * x,
                                              struct tsr_tensor * dt, struct tsr_tensor * A, struct tsr_tensor * B,
                                              struct tsr_tensor * C, struct tsr_tensor * ids) {
    if (!tsr_impl::check_args("tsr_ssm_scan", ctx, s, x, dt) || !tsr_impl::check_args("tsr_ssm_scan", ctx, A, B, C) ||
        !tsr_impl::check_args("tsr_ssm_scan", ctx, ids)) {
        return nullptr;
    }
    const struct tsr_tensor * fs[6] = {s, x, dt, A, B, C};
    for (const struct tsr_tensor * t : fs) {
        TSR_MODELS_REQUIRE(t->type == TSR_TYPE_F32 && tsr_is_contiguous(t), "tsr_ssm_scan: %s must be contiguous f32", TSR_MODELS_D(t));
    }
    const int64_t d_state = s->ne[0], head_dim = x->ne[0], n_head = x->ne[1], n_t = x->ne[2], n_seqs = x->ne[3];
    TSR_MODELS_REQUIRE(s->ne[1] == head_dim && s->ne[2] == n_head && s->ne[3] >= n_seqs,
                       "tsr_ssm_scan: states %s must be [d_state, %lld, %lld, >= %lld] for x %s", TSR_MODELS_D(s),
                       (long long)head_dim, (long long)n_head, (long long)n_seqs, TSR_MODELS_D(x));
    TSR_MODELS_REQUIRE(dt->ne[0] == n_head && dt->ne[1] == n_t && dt->ne[2] == n_seqs && dt->ne[3] == 1,
                       "tsr_ssm_scan: dt %s must be [n_head, n_t, n_seqs] of x %s", TSR_MODELS_D(dt), TSR_MODELS_D(x));
    TSR_MODELS_REQUIRE((A->ne[0] == 1 || A->ne[0] == d_state) && A->ne[1] == n_head && A->ne[2] == 1 && A->ne[3] == 1,
                       "tsr_ssm_scan: A %s must be [d_state or 1, n_head = %lld]", TSR_MODELS_D(A), (long long)n_head);
    TSR_MODELS_REQUIRE(tsr_are_same_shape(B, C) && B->ne[0] == d_state && B->ne[1] > 0 && n_head % B->ne[1] == 0 &&
                           B->ne[2] == n_t && B->ne[3] == n_seqs,
                       "tsr_ssm_scan: B %s and C %s must be [d_state, n_group, n_t, n_seqs] with n_head %% n_group == 0",
                       TSR_MODELS_D(B), TSR_MODELS_D(C));
    TSR_MODELS_REQUIRE(ids->type == TSR_TYPE_I32 && ids->ne[0] == n_seqs && ids->ne[1] == 1 && ids->ne[2] == 1 && ids->ne[3] == 1,
                       "tsr_ssm_scan: ids %s must be an i32 vector of %lld sequences", TSR_MODELS_D(ids), (long long)n_seqs);
    struct tsr_tensor * r = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, tsr_nelements(x) + d_state * head_dim * n_head * n_seqs);
    if (!r) return nullptr;
    tsr_impl_set_op(r, TSR_OP_SSM_SCAN, s, x, dt, A);
    r->src[4] = B;
    r->src[5] = C;
    r->src[6] = ids;
    return r;
}

/* ---- linear attention (RWKV 6/7, gated linear attention) ------------------------------------------ */

TSR_IMPL_NS_BEGIN
/* The shared contract of the linear-attention recurrences: every token tensor f32 contiguous
 * [S, H, n_tokens], the state f32 contiguous with S*S*H*n_seqs elements ([S*S*H, n_seqs]),
 * n_tokens a multiple of n_seqs (each sequence's tokens consecutive). */
static inline bool check_linear_attn(const char * fn, struct tsr_tensor * const * toks, int n, const struct tsr_tensor * state) {
    const struct tsr_tensor * k = toks[0];
    for (int i = 0; i < n; ++i) {
        const struct tsr_tensor * t = toks[i];
        if (t->type != TSR_TYPE_F32 || !tsr_is_contiguous(t) || t->ne[0] != k->ne[0] || t->ne[1] != k->ne[1] ||
            t->ne[2] != k->ne[2] || t->ne[3] != 1) {
            return tsr_set_error("%s: %s must be contiguous f32 [S, H, n_tokens] like %s", fn, tsr_impl_describe(t).s,
                                 tsr_impl_describe(k).s);
        }
    }
    const int64_t S = k->ne[0], H = k->ne[1];
    if (state->type != TSR_TYPE_F32 || !tsr_is_contiguous(state) || state->ne[0] != S * S * H || state->ne[2] != 1 ||
        state->ne[3] != 1 || state->ne[1] <= 0 || k->ne[2] % state->ne[1] != 0) {
        return tsr_set_error("%s: state %s must be contiguous f32 [S*S*H = %lld, n_seqs] with n_seqs dividing the %lld tokens",
                             fn, tsr_impl_describe(state).s, (long long)(S * S * H), (long long)k->ne[2]);
    }
    return true;
}
/* [S*H, n_tokens + S*n_seqs]: the outputs, then the final states. */
static inline struct tsr_tensor * linear_attn_result(struct tsr_context * ctx, const struct tsr_tensor * k, const struct tsr_tensor * state) {
    return tsr_new_tensor_2d(ctx, TSR_TYPE_F32, k->ne[0] * k->ne[1], k->ne[2] + k->ne[0] * state->ne[1]);
}
TSR_IMPL_NS_END

/* TSR_OP_RWKV_WKV6: no op_params. k, v, r, td f32 [S, H, n_tokens], tf f32 [S, H], state f32
 * [S*S*H, n_seqs] -> F32 [S*H, n_tokens + S*n_seqs] (outputs, then final states). Per head,
 * with kv = k[i] v[j]: y[j] += r[i] (tf[i] kv + st[i][j]), st[i][j] = st[i][j] td[i] + kv.
 * src0..5 = k, v, r, tf, td, state. */
TSR_API_IMPL struct tsr_tensor * tsr_rwkv_wkv6(struct tsr_context * ctx, struct tsr_tensor * k, struct tsr_tensor * v,
                                               struct tsr_tensor * r, struct tsr_tensor * tf, struct tsr_tensor * td,
                                               struct tsr_tensor * state) {
    if (!tsr_impl::check_args("tsr_rwkv_wkv6", ctx, k, v, r) || !tsr_impl::check_args("tsr_rwkv_wkv6", ctx, tf, td, state)) return nullptr;
    struct tsr_tensor * toks[4] = {k, v, r, td};
    if (!tsr_impl::check_linear_attn("tsr_rwkv_wkv6", toks, 4, state)) return nullptr;
    TSR_MODELS_REQUIRE(tf->type == TSR_TYPE_F32 && tsr_is_contiguous(tf) && tsr_nelements(tf) == k->ne[0] * k->ne[1],
                       "tsr_rwkv_wkv6: time_first %s must be contiguous f32 [S, H] of k %s", TSR_MODELS_D(tf), TSR_MODELS_D(k));
    struct tsr_tensor * res = tsr_impl::linear_attn_result(ctx, k, state);
    if (!res) return nullptr;
    tsr_impl_set_op(res, TSR_OP_RWKV_WKV6, k, v, r, tf);
    res->src[4] = td;
    res->src[5] = state;
    return res;
}

/* TSR_OP_GATED_LINEAR_ATTN: f32 scale (slot 0). k, v, q, g f32 [S, H, n_tokens], state f32
 * [S*S*H, n_seqs] -> F32 [S*H, n_tokens + S*n_seqs]. Per head: st[i][j] = st[i][j] g[i] +
 * k[i] v[j], y[j] = scale sum_i q[i] st[i][j]. src0..4 = k, v, q, g, state. */
TSR_API_IMPL struct tsr_tensor * tsr_gated_linear_attn(struct tsr_context * ctx, struct tsr_tensor * k, struct tsr_tensor * v,
                                                       struct tsr_tensor * q, struct tsr_tensor * g, struct tsr_tensor * state,
                                                       float scale) {
    if (!tsr_impl::check_args("tsr_gated_linear_attn", ctx, k, v, q) || !tsr_impl::check_args("tsr_gated_linear_attn", ctx, g, state))
        return nullptr;
    struct tsr_tensor * toks[4] = {k, v, q, g};
    if (!tsr_impl::check_linear_attn("tsr_gated_linear_attn", toks, 4, state)) return nullptr;
    struct tsr_tensor * res = tsr_impl::linear_attn_result(ctx, k, state);
    if (!res) return nullptr;
    tsr_set_op_params_f32(res, 0, scale);
    tsr_impl_set_op(res, TSR_OP_GATED_LINEAR_ATTN, k, v, q, g);
    res->src[4] = state;
    return res;
}

/* TSR_OP_RWKV_WKV7: no op_params. r, w, k, v, a, b f32 [S, H, n_tokens], state f32 [S*S*H,
 * n_seqs] -> F32 [S*H, n_tokens + S*n_seqs]. Per head, state row i (value index):
 * sa = a . st[i], st[i][j] = st[i][j] w[j] + v[i] k[j] + sa b[j], y[i] = r . st[i].
 * src0..6 = r, w, k, v, a, b, state. */
TSR_API_IMPL struct tsr_tensor * tsr_rwkv_wkv7(struct tsr_context * ctx, struct tsr_tensor * r, struct tsr_tensor * w,
                                               struct tsr_tensor * k, struct tsr_tensor * v, struct tsr_tensor * a,
                                               struct tsr_tensor * b, struct tsr_tensor * state) {
    if (!tsr_impl::check_args("tsr_rwkv_wkv7", ctx, r, w, k) || !tsr_impl::check_args("tsr_rwkv_wkv7", ctx, v, a, b) ||
        !tsr_impl::check_args("tsr_rwkv_wkv7", ctx, state)) {
        return nullptr;
    }
    struct tsr_tensor * toks[6] = {r, w, k, v, a, b};
    if (!tsr_impl::check_linear_attn("tsr_rwkv_wkv7", toks, 6, state)) return nullptr;
    struct tsr_tensor * res = tsr_impl::linear_attn_result(ctx, r, state);
    if (!res) return nullptr;
    tsr_impl_set_op(res, TSR_OP_RWKV_WKV7, r, w, k, v);
    res->src[4] = a;
    res->src[5] = b;
    res->src[6] = state;
    return res;
}

#undef TSR_MODELS_D
#undef TSR_MODELS_REQUIRE
#undef TSR_MODELS_FAIL
/* ---- include/tessera/impl/graph.inl ---- */
/* graph.inl - computation graphs: build (deduplicated topological order), query, print. */

TSR_IMPL_NS_BEGIN

static inline size_t ptr_hash(const struct tsr_tensor * t) {
    uint64_t x = (uint64_t)(uintptr_t)t;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

/* Slot holding t, or the empty slot where it would go. visited_size > 0. */
static inline size_t visited_slot(const struct tsr_cgraph * g, const struct tsr_tensor * t) {
    const size_t mask = g->visited_size - 1;
    size_t i = ptr_hash(t) & mask;
    while (g->visited[i] && g->visited[i] != t) i = (i + 1) & mask;
    return i;
}

static inline void visited_insert(struct tsr_cgraph * g, struct tsr_tensor * t) {
    g->visited[visited_slot(g, t)] = t;
}

static inline void visited_rebuild(struct tsr_cgraph * g) {
    memset(g->visited, 0, g->visited_size * sizeof(*g->visited));
    for (int i = 0; i < g->n_nodes; i++) visited_insert(g, g->nodes[i]);
    for (int i = 0; i < g->n_leafs; i++) visited_insert(g, g->leafs[i]);
}

static inline bool is_leaf(const struct tsr_tensor * t) {
    return t->op == TSR_OP_NONE && !(t->flags & TSR_TENSOR_FLAG_PARAM);
}

TSR_IMPL_NS_END

static inline bool tsr_impl_graph_visited(const struct tsr_cgraph * g, const struct tsr_tensor * t) {
    if (!g || !t || g->visited_size == 0) return false;
    return g->visited[tsr_impl::visited_slot(g, t)] == t;
}

TSR_API_IMPL struct tsr_cgraph * tsr_new_graph_custom(struct tsr_context * ctx, size_t size, bool grads) {
    if (!ctx) {
        tsr_set_error("tsr_new_graph_custom: NULL context");
        return nullptr;
    }
    if (size > (size_t)(INT32_MAX / 4)) {
        tsr_set_error("tsr_new_graph_custom: size %zu is too large", size);
        return nullptr;
    }
    struct tsr_object * obj = tsr_impl::new_object(ctx, TSR_OBJECT_TYPE_GRAPH, tsr_impl::graph_nbytes(size, grads), "a graph");
    if (!obj) return nullptr;
    char * p = (char *)ctx->mem_buffer + obj->offs;
    struct tsr_cgraph * g = (struct tsr_cgraph *)p;
    p += TSR_PAD(sizeof(struct tsr_cgraph), sizeof(void *));
    const size_t hsize = tsr_impl::graph_hash_size(size);
    g->size = (int)size;
    g->n_nodes = 0;
    g->n_leafs = 0;
    g->nodes = (struct tsr_tensor **)p;       p += size * sizeof(struct tsr_tensor *);
    g->leafs = (struct tsr_tensor **)p;       p += size * sizeof(struct tsr_tensor *);
    g->visited = (struct tsr_tensor **)p;     p += hsize * sizeof(struct tsr_tensor *);
    g->visited_size = hsize;
    if (grads) {
        g->grads = (struct tsr_tensor **)p;     p += size * sizeof(struct tsr_tensor *);
        g->grad_accs = (struct tsr_tensor **)p; p += size * sizeof(struct tsr_tensor *);
        memset(g->grads, 0, size * sizeof(struct tsr_tensor *));
        memset(g->grad_accs, 0, size * sizeof(struct tsr_tensor *));
    } else {
        g->grads = nullptr;
        g->grad_accs = nullptr;
    }
    g->stack = (struct tsr_graph_visit *)p;
    memset(g->visited, 0, hsize * sizeof(struct tsr_tensor *));
    return g;
}

TSR_API_IMPL struct tsr_cgraph * tsr_new_graph(struct tsr_context * ctx) {
    return tsr_new_graph_custom(ctx, TSR_DEFAULT_GRAPH_SIZE, false);
}

TSR_API_IMPL struct tsr_cgraph tsr_graph_view(struct tsr_cgraph * cgraph, int i0, int i1) {
    struct tsr_cgraph v;
    memset(&v, 0, sizeof(v));
    if (!cgraph) {
        tsr_set_error("tsr_graph_view: NULL graph");
        return v;
    }
    if (i0 < 0 || i1 < i0 || i1 > cgraph->n_nodes) {
        tsr_set_error("tsr_graph_view: range [%d, %d) is not inside the graph's %d nodes", i0, i1, cgraph->n_nodes);
        return v;
    }
    v.size = i1 - i0;
    v.n_nodes = i1 - i0;
    v.n_leafs = 0;
    v.nodes = cgraph->nodes + i0;
    v.grads = nullptr;
    v.grad_accs = nullptr;
    v.leafs = nullptr;
    v.visited_size = 0;
    v.visited = nullptr;
    v.stack = nullptr;
    return v;
}

TSR_API_IMPL void tsr_graph_reset(struct tsr_cgraph * cgraph) {
    if (!cgraph) return;
    if (cgraph->visited_size == 0) { /* a view: it does not own its arrays */
        cgraph->n_nodes = 0;
        cgraph->size = 0;
        return;
    }
    cgraph->n_nodes = 0;
    cgraph->n_leafs = 0;
    memset(cgraph->visited, 0, cgraph->visited_size * sizeof(*cgraph->visited));
    if (cgraph->grads) {
        memset(cgraph->grads, 0, (size_t)cgraph->size * sizeof(*cgraph->grads));
        memset(cgraph->grad_accs, 0, (size_t)cgraph->size * sizeof(*cgraph->grad_accs));
    }
}

TSR_API_IMPL bool tsr_graph_cpy(const struct tsr_cgraph * src, struct tsr_cgraph * dst) {
    if (!src || !dst) return tsr_set_error("tsr_graph_cpy: NULL graph");
    if (dst->visited_size == 0) return tsr_set_error("tsr_graph_cpy: the destination is a graph view");
    if (src->n_nodes > dst->size || src->n_leafs > dst->size) {
        return tsr_set_error("tsr_graph_cpy: destination of size %d cannot hold %d nodes and %d leafs", dst->size,
                             src->n_nodes, src->n_leafs);
    }
    if (src == dst) return true;
    dst->n_nodes = src->n_nodes;
    dst->n_leafs = src->n_leafs;
    if (src->n_nodes > 0) memmove(dst->nodes, src->nodes, (size_t)src->n_nodes * sizeof(*src->nodes));
    if (src->n_leafs > 0) memmove(dst->leafs, src->leafs, (size_t)src->n_leafs * sizeof(*src->leafs));
    if (dst->grads) {
        for (int i = 0; i < dst->size; i++) {
            dst->grads[i] = (src->grads && i < src->size) ? src->grads[i] : nullptr;
            dst->grad_accs[i] = (src->grad_accs && i < src->size) ? src->grad_accs[i] : nullptr;
        }
    }
    tsr_impl::visited_rebuild(dst);
    return true;
}

TSR_API_IMPL bool tsr_build_forward_expand(struct tsr_cgraph * g, struct tsr_tensor * tensor) {
    if (!g || !tensor) return tsr_set_error("tsr_build_forward_expand: NULL %s", g ? "tensor" : "graph");
    if (g->visited_size == 0) return tsr_set_error("tsr_build_forward_expand: cannot expand a graph view");
    if (tsr_impl_graph_visited(g, tensor)) return true;

    const int n_nodes0 = g->n_nodes;
    const int n_leafs0 = g->n_leafs;
    const size_t stack_cap = 2 * (size_t)g->size + 1;
    size_t sp = 0;
    struct tsr_tensor * failed = nullptr;
    /* Every tensor in the visited set is placed (a node or a leaf) or waits on the stack to
     * be, and each needs one of the graph's 2 * size places: more than that and the graph
     * is full. Checking it before each insert also keeps the set (> 2 * size slots) from
     * ever filling up, so its probing always finds an empty slot. */
    auto has_room = [&]() { return (size_t)g->n_nodes + (size_t)g->n_leafs + sp < 2 * (size_t)g->size; };

    if (!has_room()) failed = tensor;
    else {
        tsr_impl::visited_insert(g, tensor);
        g->stack[sp++] = {tensor, 0};
    }
    while (sp > 0) {
        struct tsr_graph_visit * top = &g->stack[sp - 1];
        if (top->next_src < TSR_MAX_SRC) {
            struct tsr_tensor * s = top->t->src[top->next_src++];
            if (s && !tsr_impl_graph_visited(g, s)) {
                if (sp >= stack_cap || !has_room()) {
                    failed = s;
                    break;
                }
                tsr_impl::visited_insert(g, s);
                g->stack[sp++] = {s, 0};
            }
            continue;
        }
        struct tsr_tensor * t = top->t;
        --sp;
        if (tsr_impl::is_leaf(t)) {
            if (g->n_leafs >= g->size) {
                failed = t;
                break;
            }
            g->leafs[g->n_leafs++] = t;
        } else {
            if (g->n_nodes >= g->size) {
                failed = t;
                break;
            }
            g->nodes[g->n_nodes++] = t;
        }
    }
    if (failed) {
        const int nn = g->n_nodes, nl = g->n_leafs;
        g->n_nodes = n_nodes0;
        g->n_leafs = n_leafs0;
        tsr_impl::visited_rebuild(g);
        return tsr_set_error("tsr_build_forward_expand: graph of size %d is full (%d nodes, %d leafs) while adding %s "
                             "(op %s) for %s; the graph is unchanged (use tsr_new_graph_custom with a larger size)",
                             g->size, nn, nl, tsr_impl_describe(failed).s, tsr_op_desc(failed),
                             tsr_impl_describe(tensor).s);
    }
    return true;
}

TSR_API_IMPL int tsr_graph_size(const struct tsr_cgraph * cgraph) { return cgraph ? cgraph->size : 0; }
TSR_API_IMPL int tsr_graph_n_nodes(const struct tsr_cgraph * cgraph) { return cgraph ? cgraph->n_nodes : 0; }
TSR_API_IMPL int tsr_graph_n_leafs(const struct tsr_cgraph * cgraph) { return cgraph ? cgraph->n_leafs : 0; }

TSR_API_IMPL struct tsr_tensor * tsr_graph_node(const struct tsr_cgraph * cgraph, int i) {
    if (!cgraph) return nullptr;
    if (i < 0) i += cgraph->n_nodes;
    if (i < 0 || i >= cgraph->n_nodes) {
        tsr_set_error("tsr_graph_node: index %d out of range for %d nodes", i, cgraph->n_nodes);
        return nullptr;
    }
    return cgraph->nodes[i];
}

TSR_API_IMPL struct tsr_tensor ** tsr_graph_nodes(struct tsr_cgraph * cgraph) { return cgraph ? cgraph->nodes : nullptr; }

TSR_API_IMPL struct tsr_tensor * tsr_graph_leaf(const struct tsr_cgraph * cgraph, int i) {
    if (!cgraph) return nullptr;
    if (i < 0) i += cgraph->n_leafs;
    if (i < 0 || i >= cgraph->n_leafs) {
        tsr_set_error("tsr_graph_leaf: index %d out of range for %d leafs", i, cgraph->n_leafs);
        return nullptr;
    }
    return cgraph->leafs[i];
}

TSR_API_IMPL bool tsr_graph_add_node(struct tsr_cgraph * cgraph, struct tsr_tensor * t) {
    if (!cgraph || !t) return tsr_set_error("tsr_graph_add_node: NULL %s", cgraph ? "tensor" : "graph");
    if (cgraph->visited_size == 0) return tsr_set_error("tsr_graph_add_node: cannot add to a graph view");
    if (cgraph->n_nodes >= cgraph->size) {
        return tsr_set_error("tsr_graph_add_node: graph of size %d is full, cannot add %s", cgraph->size,
                             tsr_impl_describe(t).s);
    }
    cgraph->nodes[cgraph->n_nodes++] = t;
    tsr_impl::visited_insert(cgraph, t);
    return true;
}

TSR_API_IMPL struct tsr_tensor * tsr_graph_get_tensor(const struct tsr_cgraph * cgraph, const char * name) {
    if (!cgraph || !name) return nullptr;
    for (int i = 0; i < cgraph->n_leafs; i++) {
        if (strcmp(cgraph->leafs[i]->name, name) == 0) return cgraph->leafs[i];
    }
    for (int i = 0; i < cgraph->n_nodes; i++) {
        if (strcmp(cgraph->nodes[i]->name, name) == 0) return cgraph->nodes[i];
    }
    return nullptr;
}

TSR_API_IMPL void tsr_graph_print(const struct tsr_cgraph * cgraph, FILE * out) {
    if (!out) out = stdout;
    if (!cgraph) {
        fprintf(out, "(null graph)\n");
        return;
    }
    fprintf(out, "=== GRAPH ===\n");
    fprintf(out, "n_nodes = %d\n", cgraph->n_nodes);
    for (int i = 0; i < cgraph->n_nodes; i++) {
        const struct tsr_tensor * t = cgraph->nodes[i];
        fprintf(out, " - %3d: [ %5lld, %5lld, %5lld, %5lld] %-5s %16s %s", i, (long long)t->ne[0], (long long)t->ne[1],
                (long long)t->ne[2], (long long)t->ne[3], tsr_type_name(t->type), tsr_op_desc(t), t->name);
        for (int j = 0; j < TSR_MAX_SRC; j++) {
            if (t->src[j]) fprintf(out, "%s%s", j == 0 ? " <- " : ", ", t->src[j]->name[0] ? t->src[j]->name : "?");
        }
        fprintf(out, "\n");
    }
    fprintf(out, "n_leafs = %d\n", cgraph->n_leafs);
    for (int i = 0; i < cgraph->n_leafs; i++) {
        const struct tsr_tensor * t = cgraph->leafs[i];
        fprintf(out, " - %3d: [ %5lld, %5lld, %5lld, %5lld] %-5s %16s %s\n", i, (long long)t->ne[0], (long long)t->ne[1],
                (long long)t->ne[2], (long long)t->ne[3], tsr_type_name(t->type), tsr_op_name(t->op), t->name);
    }
    fprintf(out, "========================================\n");
}

TSR_IMPL_NS_BEGIN
/* Write s escaped for a Graphviz record label. */
static inline void dot_escape(FILE * f, const char * s) {
    for (; *s; ++s) {
        if (strchr("{}|<>\"\\", *s)) fputc('\\', f);
        fputc(*s, f);
    }
}
static inline void dot_shape(FILE * f, const struct tsr_tensor * t) {
    fprintf(f, "%s [%lld, %lld, %lld, %lld]", tsr_type_name(t->type), (long long)t->ne[0], (long long)t->ne[1],
            (long long)t->ne[2], (long long)t->ne[3]);
}
TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_graph_dump_dot(const struct tsr_cgraph * gb, const struct tsr_cgraph * gf, const char * filename) {
    (void)gf; /* ggml colours gradients found via gf; tessera builds no backward graphs */
    if (!gb || !filename) return tsr_set_error("tsr_graph_dump_dot: NULL %s", gb ? "filename" : "graph");
    FILE * f = fopen(filename, "w");
    if (!f) return tsr_set_error("tsr_graph_dump_dot: cannot open '%s' for writing", filename);
    fprintf(f, "digraph G {\n  newrank = true;\n  rankdir = TB;\n");
    for (int i = 0; i < gb->n_nodes; i++) {
        const struct tsr_tensor * t = gb->nodes[i];
        fprintf(f, "  \"%p\" [style = filled; fillcolor = %s; shape = record; label=\"", (const void *)t,
                (t->flags & TSR_TENSOR_FLAG_OUTPUT) ? "lightblue" : "white");
        tsr_impl::dot_escape(f, t->name[0] ? t->name : "(unnamed)");
        fprintf(f, " (");
        tsr_impl::dot_shape(f, t);
        fprintf(f, ")|%d|", i);
        tsr_impl::dot_escape(f, tsr_op_desc(t));
        fprintf(f, "\"; ];\n");
    }
    for (int i = 0; i < gb->n_leafs; i++) {
        const struct tsr_tensor * t = gb->leafs[i];
        fprintf(f, "  \"%p\" [style = filled; fillcolor = %s; shape = record; label=\"<x>", (const void *)t,
                (t->flags & TSR_TENSOR_FLAG_INPUT) ? "yellow" : "pink");
        tsr_impl::dot_escape(f, t->name[0] ? t->name : "(unnamed)");
        fprintf(f, " (");
        tsr_impl::dot_shape(f, t);
        fprintf(f, ")\"; ];\n");
    }
    const struct tsr_cgraph * g = gb;
    for (int pass = 0; pass < 2; pass++) {
        const int n = pass == 0 ? g->n_nodes : g->n_leafs;
        struct tsr_tensor * const * arr = pass == 0 ? g->nodes : g->leafs;
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < TSR_MAX_SRC; j++) {
                const struct tsr_tensor * s = arr[i]->src[j];
                if (s && s != arr[i]) {
                    fprintf(f, "  \"%p\" -> \"%p\" [ arrowhead = %s; label = \"%d\"; ];\n", (const void *)s,
                            (const void *)arr[i], j == 1 ? "empty" : "vee", j);
                }
            }
        }
    }
    fprintf(f, "}\n");
    const bool ok = !ferror(f);
    if (fclose(f) != 0 || !ok) return tsr_set_error("tsr_graph_dump_dot: write error on '%s'", filename);
    return true;
}
#endif
/* ---- include/tessera/backend.h ---- */
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


#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsr_backend_buffer_type * tsr_backend_buffer_type_t;
typedef struct tsr_backend_buffer      * tsr_backend_buffer_t;
typedef struct tsr_backend             * tsr_backend_t;
typedef struct tsr_backend_reg         * tsr_backend_reg_t;
typedef struct tsr_backend_device      * tsr_backend_dev_t;

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
 * concurrent allocations: set it at start-up. */
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
/* Copy src's data into dst (same nbytes), across buffers of different backends too. */
TSR_API bool tsr_backend_tensor_copy(struct tsr_tensor * src, struct tsr_tensor * dst);

/* ---- backends ---------------------------------------------------------------------- */

/* Backend name, free, its default buffer type, a buffer of that type, its alignment / max size. */
TSR_API const char *              tsr_backend_name(tsr_backend_t backend);
TSR_API void                      tsr_backend_free(tsr_backend_t backend); /* NULL is fine */
TSR_API tsr_backend_buffer_type_t tsr_backend_get_default_buffer_type(tsr_backend_t backend);
TSR_API tsr_backend_buffer_t      tsr_backend_alloc_buffer(tsr_backend_t backend, size_t size);
TSR_API size_t                    tsr_backend_get_alignment(tsr_backend_t backend);
TSR_API size_t                    tsr_backend_get_max_size(tsr_backend_t backend);

/* Asynchronous on backends that queue work (finished by synchronize); immediate elsewhere. */
TSR_API bool tsr_backend_tensor_set_async(tsr_backend_t backend, struct tsr_tensor * tensor, const void * data, size_t offset, size_t size);
TSR_API bool tsr_backend_tensor_get_async(tsr_backend_t backend, const struct tsr_tensor * tensor, void * data, size_t offset, size_t size);
TSR_API void tsr_backend_synchronize(tsr_backend_t backend);

/* Size the backend's per-op workspace (and any other per-graph state) for gf ahead of
 * time, so graph_compute on it or on a smaller graph allocates nothing. Optional: a
 * compute without reserve grows the workspace on first use. */
TSR_API bool                tsr_backend_graph_reserve(tsr_backend_t backend, struct tsr_cgraph * cgraph);
TSR_API enum tsr_status     tsr_backend_graph_compute(tsr_backend_t backend, struct tsr_cgraph * cgraph);
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
    bool async;                 /* tensor_set_async / get_async queue work */
    bool host_buffer;           /* it has a pinned host buffer type (host_buffer_type) */
    bool buffer_from_host_ptr;  /* it can wrap caller memory */
    bool events;                /* it has events (none ship today) */
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
 * takes "n_threads=N". NULL + an error naming the device (and a bad params string). */
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
/* ---- include/tessera/backend_impl.h ---- */
/*
 * backend_impl.h - for backend writers only (ggml-backend-impl.h): the tables a backend
 * fills in and the bodies of the handles that backend.h keeps opaque. A program that
 * uses backends includes backend.h; a backend (tessera's CPU, Vulkan and CUDA, or your
 * own) includes this header as well.
 *
 * TSR_BACKEND_API_VERSION is bumped whenever a table below changes. A backend puts the
 * version it was written against into its tsr_backend_reg; tsr_backend_register refuses
 * a registration of another version, so a backend built against old tables is reported
 * instead of being called through the wrong slots.
 */
#ifndef TESSERA_BACKEND_IMPL_H
#define TESSERA_BACKEND_IMPL_H


#define TSR_BACKEND_API_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

struct tsr_backend_buffer_type_i {
    const char *         (*get_name)      (tsr_backend_buffer_type_t buft);
    tsr_backend_buffer_t (*alloc_buffer)  (tsr_backend_buffer_type_t buft, size_t size);  /* NULL + tsr_set_error on failure */
    size_t               (*get_alignment) (tsr_backend_buffer_type_t buft);
    size_t               (*get_max_size)  (tsr_backend_buffer_type_t buft);               /* optional: SIZE_MAX */
    size_t               (*get_alloc_size)(tsr_backend_buffer_type_t buft, const struct tsr_tensor * tensor); /* optional: nbytes */
    bool                 (*is_host)       (tsr_backend_buffer_type_t buft);               /* optional: false */
};

struct tsr_backend_buffer_type {
    struct tsr_backend_buffer_type_i iface;
    void * context;
};

struct tsr_backend_buffer_i {
    void   (*free_buffer)  (tsr_backend_buffer_t buffer);                                 /* optional */
    void * (*get_base)     (tsr_backend_buffer_t buffer);  /* an address, possibly opaque (device) */
    bool   (*init_tensor)  (tsr_backend_buffer_t buffer, struct tsr_tensor * tensor);     /* optional */
    bool   (*memset_tensor)(tsr_backend_buffer_t buffer, struct tsr_tensor * tensor, uint8_t value, size_t offset, size_t size);
    bool   (*set_tensor)   (tsr_backend_buffer_t buffer, struct tsr_tensor * tensor, const void * data, size_t offset, size_t size);
    bool   (*get_tensor)   (tsr_backend_buffer_t buffer, const struct tsr_tensor * tensor, void * data, size_t offset, size_t size);
    bool   (*cpy_tensor)   (tsr_backend_buffer_t buffer, const struct tsr_tensor * src, struct tsr_tensor * dst); /* optional: false = not handled */
    void   (*clear)        (tsr_backend_buffer_t buffer, uint8_t value);
};

struct tsr_backend_buffer {
    struct tsr_backend_buffer_i   iface;
    tsr_backend_buffer_type_t     buft;
    void *                        context;
    size_t                        size;
    enum tsr_backend_buffer_usage usage;
};

/* Create a buffer object (the caller's context is freed by iface.free_buffer). */
TSR_API tsr_backend_buffer_t tsr_backend_buffer_init(tsr_backend_buffer_type_t buft, struct tsr_backend_buffer_i iface,
                                                     void * context, size_t size);

struct tsr_backend_i {
    const char * (*get_name)(tsr_backend_t backend);
    void         (*free)(tsr_backend_t backend);
    tsr_backend_buffer_type_t (*get_default_buffer_type)(tsr_backend_t backend);

    /* optional async copies; NULL: the buffer's synchronous set/get is used */
    bool (*set_tensor_async)(tsr_backend_t backend, struct tsr_tensor * tensor, const void * data, size_t offset, size_t size);
    bool (*get_tensor_async)(tsr_backend_t backend, const struct tsr_tensor * tensor, void * data, size_t offset, size_t size);
    void (*synchronize)(tsr_backend_t backend);                                          /* optional */

    bool            (*graph_reserve)(tsr_backend_t backend, struct tsr_cgraph * cgraph); /* optional */
    enum tsr_status (*graph_compute)(tsr_backend_t backend, struct tsr_cgraph * cgraph);
    bool            (*supports_op)(tsr_backend_t backend, const struct tsr_tensor * op);
    bool            (*supports_buft)(tsr_backend_t backend, tsr_backend_buffer_type_t buft); /* optional: default type only */
    size_t          (*get_workspace_size)(tsr_backend_t backend);                        /* optional */
};

struct tsr_backend {
    struct tsr_backend_i iface;
    tsr_backend_dev_t    device;   /* what tsr_backend_get_device answers (NULL: none) */
    void *               context;
};

/* ---- devices and backend kinds ------------------------------------------------------- */

struct tsr_backend_device_i {
    const char *              (*get_name)(tsr_backend_dev_t dev);
    const char *              (*get_description)(tsr_backend_dev_t dev);
    void                      (*get_memory)(tsr_backend_dev_t dev, size_t * free, size_t * total);
    enum tsr_backend_dev_type (*get_type)(tsr_backend_dev_t dev);
    void                      (*get_props)(tsr_backend_dev_t dev, struct tsr_backend_dev_props * props); /* optional: from the above */
    tsr_backend_t             (*init_backend)(tsr_backend_dev_t dev, const char * params);  /* NULL + tsr_set_error on failure */
    tsr_backend_buffer_type_t (*get_buffer_type)(tsr_backend_dev_t dev);
    tsr_backend_buffer_type_t (*get_host_buffer_type)(tsr_backend_dev_t dev);                /* optional: none */
    bool                      (*supports_op)(tsr_backend_dev_t dev, const struct tsr_tensor * op);
    bool                      (*supports_buft)(tsr_backend_dev_t dev, tsr_backend_buffer_type_t buft);
    bool                      (*offload_op)(tsr_backend_dev_t dev, const struct tsr_tensor * op);  /* optional: false */
};

struct tsr_backend_device {
    struct tsr_backend_device_i iface;
    tsr_backend_reg_t           reg;
    void *                      context;
};

struct tsr_backend_reg_i {
    const char *      (*get_name)(tsr_backend_reg_t reg);
    size_t            (*get_device_count)(tsr_backend_reg_t reg);
    tsr_backend_dev_t (*get_device)(tsr_backend_reg_t reg, size_t index);  /* index < get_device_count */
};

struct tsr_backend_reg {
    int                      api_version;  /* TSR_BACKEND_API_VERSION of the tables it fills */
    struct tsr_backend_reg_i iface;
    void *                   context;
};

/* Add a backend kind to the registry (the same reg twice is added once). false + error
 * for NULL, an api_version other than TSR_BACKEND_API_VERSION, a nameless reg or a
 * full registry (TSR_BACKEND_MAX_REGS); the registry is then unchanged. */
#define TSR_BACKEND_MAX_REGS 16
TSR_API bool tsr_backend_register(tsr_backend_reg_t reg);

/* ggml's rule for offload_op: moving an op's host-resident weights to a device pays off
 * only from a batch of 32 rows on; GET_ROWS reads a few rows, so it never does. */
static inline bool tsr_backend_offload_by_batch(const struct tsr_tensor * op) {
    const int64_t min_batch = 32;
    return op != NULL && op->op != TSR_OP_GET_ROWS && op->ne[1] >= min_batch;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TESSERA_BACKEND_IMPL_H */
/* ---- include/tessera/impl/backend.inl ---- */
/*
 * backend.inl - buffer types, buffers, generic backend dispatch, the CPU (host) buffer
 * type, multi-buffers and whole contexts into buffers. See backend.h.
 */

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

TSR_IMPL_NS_BEGIN
namespace {

/* ---- the built-in host allocator: operator new with manual alignment --------------
 * The original pointer is stored just below the aligned block, so free needs no size. */
static void * host_default_alloc(size_t size, size_t align, void *) {
    if (align < sizeof(void *)) align = sizeof(void *);
    if ((align & (align - 1)) != 0) return nullptr;
    if (size > SIZE_MAX - align - sizeof(void *)) return nullptr;
    void * raw = ::operator new(size + align + sizeof(void *), std::nothrow);
    if (!raw) return nullptr;
    uintptr_t p = ((uintptr_t) raw + sizeof(void *) + align - 1) & ~(uintptr_t) (align - 1);
    ((void **) p)[-1] = raw;
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
TSR_API_IMPL bool tsr_backend_tensor_copy(struct tsr_tensor * src, struct tsr_tensor * dst) {
    if (!src || !dst) return tsr_set_error("tsr_backend_tensor_copy: NULL tensor");
    const size_t n = tsr_nbytes(src);
    if (n != tsr_nbytes(dst)) {
        return tsr_set_error("tsr_backend_tensor_copy: '%s' has %zu bytes, '%s' has %zu", src->name, n, dst->name, tsr_nbytes(dst));
    }
    if (src == dst || n == 0) return true;
    if (!src->data || !dst->data) return tsr_set_error("tsr_backend_tensor_copy: '%s' or '%s' has no data", src->name, dst->name);
    const bool src_host = !src->buffer || tsr_backend_buffer_is_host(src->buffer);
    const bool dst_host = !dst->buffer || tsr_backend_buffer_is_host(dst->buffer);
    /* a plain CPU destination is written directly; another host buffer (a read-only file
     * mapping) decides through its own set_tensor */
    const bool dst_plain = !dst->buffer || dst->buffer->iface.set_tensor == tsr_impl::cpu_buffer_set_tensor;
    if (src_host && dst_host && dst_plain) { memmove(dst->data, src->data, n); return true; }
    if (dst->buffer && dst->buffer->iface.cpy_tensor && dst->buffer->iface.cpy_tensor(dst->buffer, src, dst)) return true;
    if (src_host) return tsr_backend_tensor_set(dst, src->data, 0, n);
    if (dst_host) return tsr_backend_tensor_get(src, dst->data, 0, n);
    /* device to device through host memory (not on a graph's hot path) */
    std::vector<char> tmp;
    try { tmp.resize(n); } catch (...) { return tsr_set_error("tsr_backend_tensor_copy: out of memory for %zu bytes of staging", n); }
    return tsr_backend_tensor_get(src, tmp.data(), 0, n) && tsr_backend_tensor_set(dst, tmp.data(), 0, n);
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
/* ---- include/tessera/impl/host_allocators.inl ---- */
/*
 * host_allocators.inl - the shipped host allocators: a pool that keeps blocks between
 * runs (ncnn's pool allocator idea) and a tracing allocator (counts, current/peak).
 * Both are tsr_host_allocator implementations stacked on an upstream allocator.
 */

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

TSR_IMPL_NS_BEGIN
TSR_IMPL_HANDLE(tsr_pool_allocator, pool_allocator)
TSR_IMPL_HANDLE(tsr_tracing_allocator, tracing_allocator)

struct pool_allocator {
    struct tsr_host_allocator host;      /* what users plug in: points back here */
    struct tsr_host_allocator upstream;
    size_t budget;
    double max_waste_ratio;
    bool thread_safe;
    std::mutex mutex;
    struct block { void * ptr; size_t size; size_t align; uint64_t stamp; };
    std::vector<block> cached;           /* freed blocks kept for reuse */
    std::unordered_map<void *, block> live;
    uint64_t clock = 0;
    struct tsr_pool_allocator_stats stats = {0, 0, 0, 0, 0, 0};
};

struct tracing_allocator {
    struct tsr_host_allocator host;
    struct tsr_host_allocator upstream;
    std::mutex mutex;                    /* guards sizes */
    std::unordered_map<void *, size_t> sizes;
    std::atomic<size_t> current{0}, peak{0}, n_allocs{0}, n_frees{0}, total{0};
};

namespace {

/* cached bytes above `budget` go back upstream, oldest first (caller holds the lock) */
static void pool_trim_locked(pool_allocator * p, size_t budget) {
    while (p->stats.cached_bytes > budget && !p->cached.empty()) {
        size_t oldest = 0;
        for (size_t i = 1; i < p->cached.size(); i++) {
            if (p->cached[i].stamp < p->cached[oldest].stamp) oldest = i;
        }
        pool_allocator::block b = p->cached[oldest];
        p->cached.erase(p->cached.begin() + (ptrdiff_t) oldest);
        p->stats.cached_bytes -= b.size;
        p->stats.cached_blocks--;
        p->upstream.free(b.ptr, p->upstream.user);
        p->stats.upstream_frees++;
    }
}

static void * pool_alloc(size_t size, size_t align, void * user) {
    pool_allocator * p = (pool_allocator *) user;
    std::unique_lock<std::mutex> lock(p->mutex, std::defer_lock);
    if (p->thread_safe) lock.lock();
    /* the smallest cached block that is large enough, suitably aligned and not wastefully larger */
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < p->cached.size(); i++) {
        const pool_allocator::block & b = p->cached[i];
        if (b.size < size || ((uintptr_t) b.ptr % align) != 0) continue;
        if ((double) b.size > (double) size * p->max_waste_ratio && b.size > size) continue;
        if (best == SIZE_MAX || b.size < p->cached[best].size) best = i;
    }
    if (best != SIZE_MAX) {
        pool_allocator::block b = p->cached[best];
        p->cached.erase(p->cached.begin() + (ptrdiff_t) best);
        p->stats.cached_bytes -= b.size;
        p->stats.cached_blocks--;
        p->stats.hits++;
        try { p->live.emplace(b.ptr, b); } catch (...) {
            p->cached.push_back(b);
            p->stats.cached_bytes += b.size;
            p->stats.cached_blocks++;
            return nullptr;
        }
        return b.ptr;
    }
    p->stats.misses++;
    void * ptr = p->upstream.alloc(size, align, p->upstream.user);
    if (!ptr) {
        /* give the cache back and try once more */
        pool_trim_locked(p, 0);
        ptr = p->upstream.alloc(size, align, p->upstream.user);
        if (!ptr) return nullptr;
    }
    p->stats.upstream_allocs++;
    try { p->live.emplace(ptr, pool_allocator::block{ptr, size, align, 0}); } catch (...) {
        p->upstream.free(ptr, p->upstream.user);
        p->stats.upstream_frees++;
        return nullptr;
    }
    return ptr;
}

static void pool_free(void * ptr, void * user) {
    if (!ptr) return;
    pool_allocator * p = (pool_allocator *) user;
    std::unique_lock<std::mutex> lock(p->mutex, std::defer_lock);
    if (p->thread_safe) lock.lock();
    auto it = p->live.find(ptr);
    if (it == p->live.end()) {
        tsr_set_error("tsr_pool_allocator: free of %p, which this pool did not allocate", ptr);
        return;
    }
    pool_allocator::block b = it->second;
    p->live.erase(it);
    b.stamp = ++p->clock;
    try { p->cached.push_back(b); } catch (...) {
        p->upstream.free(b.ptr, p->upstream.user);
        p->stats.upstream_frees++;
        return;
    }
    p->stats.cached_bytes += b.size;
    p->stats.cached_blocks++;
    pool_trim_locked(p, p->budget);
}

static void * tracing_alloc(size_t size, size_t align, void * user) {
    tracing_allocator * t = (tracing_allocator *) user;
    void * ptr = t->upstream.alloc(size, align, t->upstream.user);
    if (!ptr) return nullptr;
    {
        std::lock_guard<std::mutex> lock(t->mutex);
        try { t->sizes[ptr] = size; } catch (...) { t->upstream.free(ptr, t->upstream.user); return nullptr; }
    }
    t->n_allocs++;
    t->total += size;
    const size_t cur = (t->current += size);
    size_t pk = t->peak.load();
    while (cur > pk && !t->peak.compare_exchange_weak(pk, cur)) {}
    return ptr;
}

static void tracing_free(void * ptr, void * user) {
    if (!ptr) return;
    tracing_allocator * t = (tracing_allocator *) user;
    size_t size = 0;
    {
        std::lock_guard<std::mutex> lock(t->mutex);
        auto it = t->sizes.find(ptr);
        if (it == t->sizes.end()) {
            tsr_set_error("tsr_tracing_allocator: free of %p, which was not allocated through it", ptr);
            return;
        }
        size = it->second;
        t->sizes.erase(it);
    }
    t->current -= size;
    t->n_frees++;
    t->upstream.free(ptr, t->upstream.user);
}

} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_pool_allocator * tsr_pool_allocator_new(const struct tsr_host_allocator * upstream, size_t budget,
                                                                double max_waste_ratio, bool thread_safe) {
    tsr_impl::pool_allocator * p = new (std::nothrow) tsr_impl::pool_allocator;
    if (!p) { tsr_set_error("tsr_pool_allocator_new: out of memory"); return nullptr; }
    p->upstream = (upstream && upstream->alloc && upstream->free) ? *upstream : tsr_impl::k_host_default;
    p->budget = budget;
    p->max_waste_ratio = max_waste_ratio < 1.0 ? 1.0 : max_waste_ratio;
    p->thread_safe = thread_safe;
    p->host.alloc = tsr_impl::pool_alloc;
    p->host.free = tsr_impl::pool_free;
    p->host.user = p;
    return tsr_impl::handle(p);
}
TSR_API_IMPL void tsr_pool_allocator_free(struct tsr_pool_allocator * pool_h) {
    auto * pool = tsr_impl::internal(pool_h);
    if (!pool) return;
    tsr_impl::pool_trim_locked(pool, 0);
    delete pool;
}
TSR_API_IMPL const struct tsr_host_allocator * tsr_pool_allocator_host(struct tsr_pool_allocator * pool_h) {
    auto * pool = tsr_impl::internal(pool_h);
    return pool ? &pool->host : nullptr;
}
TSR_API_IMPL void tsr_pool_allocator_trim(struct tsr_pool_allocator * pool_h, size_t budget) {
    auto * pool = tsr_impl::internal(pool_h);
    if (!pool) return;
    std::unique_lock<std::mutex> lock(pool->mutex, std::defer_lock);
    if (pool->thread_safe) lock.lock();
    pool->budget = budget;
    tsr_impl::pool_trim_locked(pool, budget);
}
TSR_API_IMPL struct tsr_pool_allocator_stats tsr_pool_allocator_get_stats(struct tsr_pool_allocator * pool_h) {
    auto * pool = tsr_impl::internal(pool_h);
    struct tsr_pool_allocator_stats s = {0, 0, 0, 0, 0, 0};
    if (!pool) return s;
    std::unique_lock<std::mutex> lock(pool->mutex, std::defer_lock);
    if (pool->thread_safe) lock.lock();
    return pool->stats;
}

TSR_API_IMPL struct tsr_tracing_allocator * tsr_tracing_allocator_new(const struct tsr_host_allocator * upstream) {
    tsr_impl::tracing_allocator * t = new (std::nothrow) tsr_impl::tracing_allocator;
    if (!t) { tsr_set_error("tsr_tracing_allocator_new: out of memory"); return nullptr; }
    t->upstream = (upstream && upstream->alloc && upstream->free) ? *upstream : tsr_impl::k_host_default;
    t->host.alloc = tsr_impl::tracing_alloc;
    t->host.free = tsr_impl::tracing_free;
    t->host.user = t;
    return tsr_impl::handle(t);
}
TSR_API_IMPL void tsr_tracing_allocator_free(struct tsr_tracing_allocator * tr_h) { auto * tr = tsr_impl::internal(tr_h); delete tr; }
TSR_API_IMPL const struct tsr_host_allocator * tsr_tracing_allocator_host(struct tsr_tracing_allocator * tr_h) {
    auto * tr = tsr_impl::internal(tr_h);
    return tr ? &tr->host : nullptr;
}
TSR_API_IMPL struct tsr_tracing_stats tsr_tracing_allocator_get_stats(struct tsr_tracing_allocator * tr_h) {
    auto * tr = tsr_impl::internal(tr_h);
    struct tsr_tracing_stats s = {0, 0, 0, 0, 0};
    if (!tr) return s;
    s.current_bytes = tr->current.load();
    s.peak_bytes = tr->peak.load();
    s.n_allocs = tr->n_allocs.load();
    s.n_frees = tr->n_frees.load();
    s.total_bytes = tr->total.load();
    return s;
}
TSR_API_IMPL void tsr_tracing_allocator_reset_peak(struct tsr_tracing_allocator * tr_h) {
    auto * tr = tsr_impl::internal(tr_h);
    if (tr) tr->peak.store(tr->current.load());
}
/* ---- include/tessera/impl/registry.inl ---- */
/*
 * registry.inl - devices, backend kinds and the registry of every backend compiled into
 * the program (ggml-backend-reg.cpp). See backend.h and backend_impl.h.
 *
 * How backends get in without static-initialization-order trouble: the registry is a
 * function-local static, built on first use, so it exists whenever a backend registers.
 * The CPU and Vulkan parts register from a static of their own implementation block (a
 * header-only part cannot be called by name from a core compiled before it); the CUDA
 * library, a separate object that nothing might otherwise pull in, is asked by name on
 * first use when the build says it is linked (TSR_HAVE_CUDA).
 */

#include <cctype>
#include <mutex>
#include <string>

#if defined(TSR_HAVE_CUDA) && !defined(TSR_STATIC) && !defined(TSR_CUDA_DECLARED)
extern "C" tsr_backend_reg_t tsr_backend_cuda_reg(void);  /* tessera-cuda.h, in the CUDA library */
#endif

TSR_IMPL_NS_BEGIN
namespace {

struct backend_registry {
    std::mutex mutex;
    tsr_backend_reg_t regs[TSR_BACKEND_MAX_REGS] = {};
    size_t n_regs = 0;
    backend_registry();
};

static bool names_equal(const char * a, const char * b) {
    if (!a || !b) return false;
    for (; *a && *b; ++a, ++b)
        if (std::tolower((unsigned char) *a) != std::tolower((unsigned char) *b)) return false;
    return *a == *b;
}

static bool is_cpu_reg(tsr_backend_reg_t reg) { return names_equal(reg->iface.get_name(reg), "CPU"); }

/* The caller holds the mutex (or is building the registry). The CPU backend's kind goes
 * first, so the CPU backend is the first device of type CPU even when a Vulkan
 * implementation on the CPU registered before it. */
static bool add_reg(backend_registry & r, tsr_backend_reg_t reg) {
    if (!reg) return tsr_set_error("tsr_backend_register: reg is NULL");
    if (reg->api_version != TSR_BACKEND_API_VERSION)
        return tsr_set_error("tsr_backend_register: backend API version %d, this tessera has version %d (rebuild the backend against this backend_impl.h)",
                             reg->api_version, TSR_BACKEND_API_VERSION);
    if (!reg->iface.get_name || !reg->iface.get_device_count || !reg->iface.get_device)
        return tsr_set_error("tsr_backend_register: reg lacks get_name, get_device_count or get_device");
    for (size_t i = 0; i < r.n_regs; ++i)
        if (r.regs[i] == reg) return true;
    if (r.n_regs == TSR_BACKEND_MAX_REGS)
        return tsr_set_error("tsr_backend_register: '%s' does not fit: the registry holds %d backend kinds",
                             reg->iface.get_name(reg), TSR_BACKEND_MAX_REGS);
    size_t at = is_cpu_reg(reg) ? 0 : r.n_regs;
    for (size_t i = r.n_regs; i > at; --i) r.regs[i] = r.regs[i - 1];
    r.regs[at] = reg;
    r.n_regs++;
    return true;
}

/* The CUDA library is asked here rather than registering from a static of its own: a
 * static library's object that the program never names is not linked at all. */
backend_registry::backend_registry() {
#if defined(TSR_HAVE_CUDA) && !defined(TSR_STATIC)
    add_reg(*this, tsr_backend_cuda_reg());
#endif
}

static backend_registry & registry() {
    static backend_registry r;
    return r;
}

/* A snapshot of the registered kinds, so no lock is held while a backend answers. */
struct reg_snapshot {
    tsr_backend_reg_t regs[TSR_BACKEND_MAX_REGS];
    size_t n = 0;
};
static reg_snapshot snapshot() {
    backend_registry & r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    reg_snapshot s;
    for (size_t i = 0; i < r.n_regs; ++i) s.regs[i] = r.regs[i];
    s.n = r.n_regs;
    return s;
}

/* "CPU, Vulkan0" - what there is, for error messages. */

/* The first device (in registry order) that `match` accepts, or NULL. */
template <typename Match> static tsr_backend_dev_t first_device(Match match) {
    const reg_snapshot s = snapshot();
    for (size_t i = 0; i < s.n; ++i) {
        const size_t n_dev = s.regs[i]->iface.get_device_count(s.regs[i]);
        for (size_t d = 0; d < n_dev; ++d) {
            tsr_backend_dev_t dev = s.regs[i]->iface.get_device(s.regs[i], d);
            if (match(dev)) return dev;
        }
    }
    return nullptr;
}
static tsr_backend_dev_t device_named(const char * name) {
    return first_device([name](tsr_backend_dev_t dev) { return names_equal(dev->iface.get_name(dev), name); });
}
static tsr_backend_dev_t device_of_type(enum tsr_backend_dev_type type) {
    return first_device([type](tsr_backend_dev_t dev) { return dev->iface.get_type(dev) == type; });
}

/* "CPU, Vulkan0" - what there is, for error messages. */
static std::string device_names() {
    std::string names;
    first_device([&names](tsr_backend_dev_t dev) {
        if (!names.empty()) names += ", ";
        names += dev->iface.get_name(dev);
        return false;
    });
    return names.empty() ? std::string("none") : names;
}

static const char * type_name(enum tsr_backend_dev_type type) {
    switch (type) {
    case TSR_BACKEND_DEVICE_TYPE_CPU: return "CPU";
    case TSR_BACKEND_DEVICE_TYPE_GPU: return "GPU";
    case TSR_BACKEND_DEVICE_TYPE_ACCEL: return "ACCEL";
    }
    return "unknown";
}

} // namespace
TSR_IMPL_NS_END

/* ---- writer side ------------------------------------------------------------------------- */

TSR_API_IMPL bool tsr_backend_register(tsr_backend_reg_t reg) {
    tsr_impl::backend_registry & r = tsr_impl::registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    return tsr_impl::add_reg(r, reg);
}

/* ---- devices ------------------------------------------------------------------------------- */

TSR_API_IMPL const char * tsr_backend_dev_name(tsr_backend_dev_t device) {
    return device ? device->iface.get_name(device) : "(null)";
}
TSR_API_IMPL const char * tsr_backend_dev_description(tsr_backend_dev_t device) {
    return device ? device->iface.get_description(device) : "(null)";
}
TSR_API_IMPL void tsr_backend_dev_memory(tsr_backend_dev_t device, size_t * free, size_t * total) {
    size_t f = 0, t = 0;
    if (device) device->iface.get_memory(device, &f, &t);
    if (free) *free = f;
    if (total) *total = t;
}
TSR_API_IMPL enum tsr_backend_dev_type tsr_backend_dev_type(tsr_backend_dev_t device) {
    return device ? device->iface.get_type(device) : TSR_BACKEND_DEVICE_TYPE_CPU;
}
TSR_API_IMPL void tsr_backend_dev_get_props(tsr_backend_dev_t device, struct tsr_backend_dev_props * props) {
    if (!props) return;
    *props = tsr_backend_dev_props{};
    if (!device) return;
    if (device->iface.get_props) { device->iface.get_props(device, props); return; }
    props->name = tsr_backend_dev_name(device);
    props->description = tsr_backend_dev_description(device);
    tsr_backend_dev_memory(device, &props->memory_free, &props->memory_total);
    props->type = tsr_backend_dev_type(device);
    props->caps.host_buffer = device->iface.get_host_buffer_type != nullptr;
}
TSR_API_IMPL tsr_backend_reg_t tsr_backend_dev_backend_reg(tsr_backend_dev_t device) { return device ? device->reg : nullptr; }
TSR_API_IMPL tsr_backend_t tsr_backend_dev_init(tsr_backend_dev_t device, const char * params) {
    if (!device) { tsr_set_error("tsr_backend_dev_init: device is NULL"); return nullptr; }
    tsr_backend_t backend = device->iface.init_backend(device, params);
    if (backend && !backend->device) backend->device = device;
    return backend;
}
TSR_API_IMPL tsr_backend_buffer_type_t tsr_backend_dev_buffer_type(tsr_backend_dev_t device) {
    return device ? device->iface.get_buffer_type(device) : nullptr;
}
TSR_API_IMPL tsr_backend_buffer_type_t tsr_backend_dev_host_buffer_type(tsr_backend_dev_t device) {
    return device && device->iface.get_host_buffer_type ? device->iface.get_host_buffer_type(device) : nullptr;
}
TSR_API_IMPL bool tsr_backend_dev_supports_op(tsr_backend_dev_t device, const struct tsr_tensor * op) {
    return device && op && device->iface.supports_op(device, op);
}
TSR_API_IMPL bool tsr_backend_dev_supports_buft(tsr_backend_dev_t device, tsr_backend_buffer_type_t buft) {
    return device && buft && device->iface.supports_buft(device, buft);
}
TSR_API_IMPL bool tsr_backend_dev_offload_op(tsr_backend_dev_t device, const struct tsr_tensor * op) {
    return device && op && device->iface.offload_op && device->iface.offload_op(device, op);
}

/* ---- backend kinds ------------------------------------------------------------------------- */

TSR_API_IMPL const char * tsr_backend_reg_name(tsr_backend_reg_t reg) { return reg ? reg->iface.get_name(reg) : "(null)"; }
TSR_API_IMPL size_t tsr_backend_reg_dev_count(tsr_backend_reg_t reg) { return reg ? reg->iface.get_device_count(reg) : 0; }
TSR_API_IMPL tsr_backend_dev_t tsr_backend_reg_dev_get(tsr_backend_reg_t reg, size_t index) {
    const size_t n = tsr_backend_reg_dev_count(reg);
    if (index >= n) {
        tsr_set_error("tsr_backend_reg_dev_get: device %zu of '%s', which has %zu", index, tsr_backend_reg_name(reg), n);
        return nullptr;
    }
    return reg->iface.get_device(reg, index);
}

/* ---- the registry -------------------------------------------------------------------------- */

TSR_API_IMPL size_t tsr_backend_reg_count(void) { return tsr_impl::snapshot().n; }
TSR_API_IMPL tsr_backend_reg_t tsr_backend_reg_get(size_t index) {
    const tsr_impl::reg_snapshot s = tsr_impl::snapshot();
    if (index >= s.n) {
        tsr_set_error("tsr_backend_reg_get: backend kind %zu, the registry holds %zu", index, s.n);
        return nullptr;
    }
    return s.regs[index];
}
TSR_API_IMPL tsr_backend_reg_t tsr_backend_reg_by_name(const char * name) {
    const tsr_impl::reg_snapshot s = tsr_impl::snapshot();
    for (size_t i = 0; i < s.n; ++i)
        if (tsr_impl::names_equal(s.regs[i]->iface.get_name(s.regs[i]), name)) return s.regs[i];
    tsr_set_error("tsr_backend_reg_by_name: no backend kind named '%s'", name ? name : "(null)");
    return nullptr;
}
TSR_API_IMPL size_t tsr_backend_dev_count(void) {
    size_t n = 0;
    tsr_impl::first_device([&n](tsr_backend_dev_t) { ++n; return false; });
    return n;
}
TSR_API_IMPL tsr_backend_dev_t tsr_backend_dev_get(size_t index) {
    size_t seen = 0;
    tsr_backend_dev_t dev = tsr_impl::first_device([&seen, index](tsr_backend_dev_t) { return seen++ == index; });
    if (!dev) tsr_set_error("tsr_backend_dev_get: device %zu, the registry holds %zu", index, seen);
    return dev;
}
TSR_API_IMPL tsr_backend_dev_t tsr_backend_dev_by_name(const char * name) {
    tsr_backend_dev_t dev = tsr_impl::device_named(name);
    if (!dev)
        tsr_set_error("tsr_backend_dev_by_name: no device named '%s' (devices: %s)", name ? name : "(null)",
                      tsr_impl::device_names().c_str());
    return dev;
}
TSR_API_IMPL tsr_backend_dev_t tsr_backend_dev_by_type(enum tsr_backend_dev_type type) {
    tsr_backend_dev_t dev = tsr_impl::device_of_type(type);
    if (!dev)
        tsr_set_error("tsr_backend_dev_by_type: no device of type %s (devices: %s)", tsr_impl::type_name(type),
                      tsr_impl::device_names().c_str());
    return dev;
}
/* A device's name first ("Vulkan1"), then a backend kind's ("vulkan": its first device). */
TSR_API_IMPL tsr_backend_t tsr_backend_init_by_name(const char * name, const char * params) {
    tsr_backend_dev_t dev = tsr_impl::device_named(name);
    if (dev) return tsr_backend_dev_init(dev, params);
    const tsr_impl::reg_snapshot s = tsr_impl::snapshot();
    for (size_t i = 0; i < s.n; ++i) {
        if (!tsr_impl::names_equal(tsr_backend_reg_name(s.regs[i]), name)) continue;
        if (tsr_backend_reg_dev_count(s.regs[i]) == 0) {
            tsr_set_error("tsr_backend_init_by_name: the %s backend has no device", tsr_backend_reg_name(s.regs[i]));
            return nullptr;
        }
        return tsr_backend_dev_init(tsr_backend_reg_dev_get(s.regs[i], 0), params);
    }
    tsr_set_error("tsr_backend_init_by_name: no device or backend named '%s' (devices: %s)", name ? name : "(null)",
                  tsr_impl::device_names().c_str());
    return nullptr;
}
TSR_API_IMPL tsr_backend_t tsr_backend_init_by_type(enum tsr_backend_dev_type type, const char * params) {
    tsr_backend_dev_t dev = tsr_backend_dev_by_type(type);
    return dev ? tsr_backend_dev_init(dev, params) : nullptr;
}
TSR_API_IMPL tsr_backend_t tsr_backend_init_best(void) {
    tsr_backend_dev_t dev = tsr_impl::device_of_type(TSR_BACKEND_DEVICE_TYPE_GPU);
    if (!dev) dev = tsr_impl::device_of_type(TSR_BACKEND_DEVICE_TYPE_CPU);
    if (dev) return tsr_backend_dev_init(dev, nullptr);
    tsr_set_error("tsr_backend_init_best: no GPU or CPU device (devices: %s)", tsr_impl::device_names().c_str());
    return nullptr;
}
TSR_API_IMPL tsr_backend_dev_t tsr_backend_get_device(tsr_backend_t backend) { return backend ? backend->device : nullptr; }
#endif
/* ---- include/tessera/alloc.h ---- */
/*
 * alloc.h - tallocr (one tensor at a time) and gallocr (a whole graph, planned offline).
 *
 * Mirrors ggml-alloc.h. gallocr differs from ggml's in how it plans: it computes every
 * tensor's live range over the graph's execution order, then packs the ranges into as
 * few bytes as it can (an offline packing algorithm, see impl/packing.inl), so the
 * compute buffer lands at or near the lower bound (the most bytes live at one step).
 * The plan is an object you can read, check and export.
 *
 * Implementation: TSR_IMPLEMENTATION, in one C++17 file, compiles the core and every
 * backend header included in that file, in any include order (README "Using tessera").
 */
#ifndef TESSERA_ALLOC_H
#define TESSERA_ALLOC_H


#ifdef __cplusplus
extern "C" {
#endif

/* ---- tallocr: place tensors one after another in a buffer ---------------------------- */

struct tsr_tallocr {
    tsr_backend_buffer_t buffer;
    void *               base;
    size_t               alignment;
    size_t               offset;
};

/* A bump allocator over buffer (offsets aligned to the buffer's alignment). */
TSR_API struct tsr_tallocr tsr_tallocr_new(tsr_backend_buffer_t buffer);
/* false + error naming the sizes when the tensor does not fit (nothing changes). */
TSR_API bool               tsr_tallocr_alloc(struct tsr_tallocr * talloc, struct tsr_tensor * tensor);

/* ---- gallocr: plan and place a whole graph's activations ----------------------------- */

typedef struct tsr_gallocr * tsr_gallocr_t;

/* A graph allocator with one buffer type (or n_bufs, indexed by the buffer ids of
 * reserve_n). NULL + error on bad arguments or out of memory. */
TSR_API tsr_gallocr_t tsr_gallocr_new(tsr_backend_buffer_type_t buft);
TSR_API tsr_gallocr_t tsr_gallocr_new_n(tsr_backend_buffer_type_t * bufts, int n_bufs);
TSR_API void          tsr_gallocr_free(tsr_gallocr_t galloc);  /* NULL is fine */

/* How long reserve's packing may search for a smaller buffer when its heuristics did
 * not reach the lower bound (default 10 ms; 0: heuristics only). alloc_graph on a graph
 * that differs from the cached plan replans with the heuristics only, so graphs that
 * change every call stay cheap. */
TSR_API void tsr_gallocr_set_time_budget(tsr_gallocr_t galloc, double ms);

/* Plan the graph and size the buffer(s) for it (grow only). Call it with the largest
 * graph; later alloc_graph calls on it or smaller graphs do not reallocate.
 * node_buffer_ids / leaf_buffer_ids (may be NULL) choose each tensor's buffer. */
TSR_API bool tsr_gallocr_reserve(tsr_gallocr_t galloc, struct tsr_cgraph * graph);
TSR_API bool tsr_gallocr_reserve_n(tsr_gallocr_t galloc, struct tsr_cgraph * graph,
                                   const int * node_buffer_ids, const int * leaf_buffer_ids);

/* Place every tensor of the graph that has no data yet. A graph with the same topology
 * and sizes as the last planned one re-applies the cached plan; another graph is
 * replanned, and the buffer is reallocated only if it must grow.
 *
 * Planning rules (what a plan guarantees):
 *  - tensors that already have data or a buffer (weights, user memory) are left alone;
 *  - a view (view_src != NULL) gets no memory: it aliases its source, which stays live
 *    until the view's last use;
 *  - leafs without data and INPUT tensors are live from step 0 to their last use, so
 *    nothing overwrites them before that (they are never taken over in place);
 *  - OUTPUT tensors, and nodes that no other node consumes (the graph's results, its
 *    final node included), are live to the last step and never reused;
 *  - in place: a node for which tsr_op_can_inplace(node, i) holds writes into the
 *    memory of src[i] when that src (or the whole source behind a contiguous view of it)
 *    is a node that dies at this step, is not INPUT/OUTPUT, has the same aligned size
 *    and lives in the same buffer;
 *  - each buffer id gets its own buffer (node_buffer_ids / leaf_buffer_ids; all 0 when
 *    NULL); alloc_graph on a graph that was not reserved reuses the ids of the last
 *    reserve_n when the node and leaf counts match. */
TSR_API bool   tsr_gallocr_alloc_graph(tsr_gallocr_t galloc, struct tsr_cgraph * graph);
TSR_API size_t tsr_gallocr_get_buffer_size(tsr_gallocr_t galloc, int buffer_id);
TSR_API tsr_backend_buffer_t tsr_gallocr_get_buffer(tsr_gallocr_t galloc, int buffer_id);
/* How many times a buffer was (re)allocated: for tests and diagnostics. */
TSR_API int    tsr_gallocr_get_n_reallocs(tsr_gallocr_t galloc);

/* ---- execution order: lower the lower bound itself ------------------------------------
 * The lower bound gallocr packs against is the most bytes live at one step of the
 * graph's order. Any topological order computes the same results (bit for bit: every
 * node still reads exactly its operands), but on branchy graphs (U-Net skips,
 * Inception/NASNet cells, attention with concatenated skips) some orders keep far fewer
 * tensors alive at once. tsr_graph_optimize_order reorders graph->nodes, within the
 * dependencies, to the order with the smallest lower bound it finds under gallocr's
 * rules (in place, views, INPUT/OUTPUT, results), and never to a worse one than the
 * builder's: when nothing strictly better is found the graph is left as it was.
 * A view node with a computing op (an *_inplace op's result, a copy into a view) writes
 * into its source, so it keeps its place relative to every other user of that source. */
struct tsr_order_report {
    size_t builder_lower_bound;    /* bytes, the order the graph had */
    size_t optimized_lower_bound;  /* bytes, the order it has now (<= builder_lower_bound) */
    size_t any_order_lower_bound;  /* bytes no order can go under (the order-independent floor:
                                      at some node's step, what is live in every order) */
    bool   optimal;                /* no order is lower: exact search finished on every piece at
                                      the peak, or optimized_lower_bound meets any_order_lower_bound */
    bool   reordered;              /* the graph's order changed */
    int    n_pieces;               /* independent pieces between single-node cuts */
    double ms;                     /* wall time spent */
};

struct tsr_order_params {
    double time_budget_ms;    /* wall time for the whole call (default 20): floor, greedy orders
                                 and searches all count; only each piece's first greedy order
                                 always completes. For a 2,000-node random DAG (thread CPU): the
                                 floor 3 ms, one greedy order 0.4 ms; the whole call with the
                                 default 9-12 ms CPU, 21-25 ms wall on a loaded machine */
    int    exact_max_nodes;   /* pieces up to this many nodes try exact search first (default 200) */
    int    exact_max_states;  /* exact search gives up on a piece after this many memoised states
                                 (default 200000, about 20 MB) and falls back to the heuristics */
    tsr_backend_buffer_type_t buft;   /* sizes and alignment as this type allocates; NULL: CPU */
    struct tsr_order_report * report; /* filled when not NULL */
};

TSR_API struct tsr_order_params tsr_order_default_params(void);
/* Reorders graph (params NULL: defaults). The graph must not be a tsr_graph_view of a
 * larger one. false + error on bad params or out of memory (graph unchanged). */
TSR_API bool tsr_graph_optimize_order(struct tsr_cgraph * graph, const struct tsr_order_params * params);
/* Opt-in: reserve reorders the graph before planning it, with these params (copied; buft
 * is the gallocr's; report, if set, is filled at each reserve and must outlive them;
 * NULL: off). With node buffer ids (reserve_n), nodes move only within each run of
 * consecutive nodes with the same id, so the caller's ids still name each node's buffer
 * and a scheduler's splits keep their nodes; the new order is kept only when no
 * buffer's lower bound grows and their sum drops (the report gives the sums).
 * alloc_graph on a graph rebuilt in the builder's order re-applies the reserved order
 * before it re-applies the cached plan. */
TSR_API bool tsr_gallocr_set_optimize_order(tsr_gallocr_t galloc, const struct tsr_order_params * params);

/* ---- plans: what gallocr decided, readable and checkable ----------------------------- */

struct tsr_plan_tensor {
    const struct tsr_tensor * tensor;
    const char * name;
    int    buffer_id;
    size_t offset;    /* within its buffer */
    size_t size;      /* aligned bytes reserved */
    int    first;     /* first step (node index) it is live */
    int    last;      /* last step it is live (inclusive) */
    bool   inplace;   /* reuses the memory of a dying operand */
    int    inplace_of;/* index (in tensors) of the tensor whose memory it took over, or -1 */
};

struct tsr_plan_buffer {
    size_t planned_size;   /* bytes of the buffer the plan needs */
    size_t lower_bound;    /* max over steps of the aligned bytes live at that step */
    size_t no_reuse_size;  /* sum of aligned sizes: every tensor in its own slot */
    size_t alignment;
};

struct tsr_plan {
    int n_tensors;
    const struct tsr_plan_tensor * tensors;
    int n_buffers;
    const struct tsr_plan_buffer * buffers;
    int n_steps;
};

/* The plan of the last reserve/alloc_graph; valid until the next one or free. Its tensor
 * pointers refer to the graph of the last reserve/alloc_graph (valid while it lives). */
TSR_API const struct tsr_plan * tsr_gallocr_get_plan(tsr_gallocr_t galloc);

/* true when no two tensors live at one step overlap in one buffer, every offset is
 * aligned and everything lies inside its buffer (capacities[i] = buffer i's bytes, or
 * NULL to use planned_size); otherwise false with the first violation in the error. */
TSR_API bool tsr_plan_check(const struct tsr_plan * plan, const size_t * capacities);

/* Export: JSON (every tensor and the totals) and an SVG picture of one buffer: steps on
 * x and offsets on y (numbered ticks, bytes in B/KiB/MiB/GiB), one rectangle per tensor
 * coloured by the kind of op that made it (a legend says which), labelled with its name
 * (or op and shape when unnamed) where the label fits and on hover always, at least a
 * few pixels high however small; the lower bound and the planned size are lines with
 * their captions beside the plot. false + error on a bad buffer id or I/O failure. */
TSR_API bool tsr_plan_write_json(const struct tsr_plan * plan, FILE * out);
TSR_API bool tsr_plan_write_svg(const struct tsr_plan * plan, int buffer_id, FILE * out);

/* Several plans in one picture, one panel each, top to bottom, on one offset scale so
 * their sizes compare at a glance: e.g. the builder's order and the optimised order of a
 * graph (tsr_graph_optimize_order). caption (may be NULL) heads its panel. */
struct tsr_plan_panel {
    const struct tsr_plan * plan;
    const char * caption;
};
TSR_API bool tsr_plan_write_svg_panels(const struct tsr_plan_panel * panels, int n_panels, int buffer_id, FILE * out);

/* ---- the packing core, exposed for external workloads --------------------------------
 * n buffers, each live on the half-open step range [lower, upper) with a size; assigns
 * offsets (aligned to `alignment`) so that no two buffers live at one step overlap.
 * Returns the peak (max offset + size), or SIZE_MAX with an error. time_budget_ms is
 * wall time from the call: the first greedy packing always completes (and every greedy
 * order when n <= 1000), then orders and searches start only while time is left
 * (0: heuristics only). It stops early at the lower bound. Deterministic for a given
 * input unless the budget cuts it short. */
struct tsr_pack_item { int64_t lower, upper; size_t size; size_t offset; };
TSR_API size_t tsr_pack(struct tsr_pack_item * items, size_t n, size_t alignment, double time_budget_ms);
TSR_API size_t tsr_pack_lower_bound(const struct tsr_pack_item * items, size_t n, size_t alignment);

/* In-place contract every backend honours: may node write its result into the memory
 * of src[src_index], exactly aliased? Always requires: node is not a view, src has the
 * same type and shape as node, and both are contiguous. Then, by op:
 *   ADD, SUB, MUL, DIV                              src 0 or 1 (same shape: no broadcast)
 *   GLU with a separate gate (swiglu_split)         src 0 or 1
 *   SCALE, SQR, SQRT, LOG, UNARY (every unary op), CLAMP,
 *   NORM, RMS_NORM, SOFT_MAX (not the mask), ROPE (not the positions),
 *   DIAG_MASK_INF, DUP, CONT                        src 0
 * and no other op. Backends must compute these ops correctly when dst->data ==
 * src[i]->data (row-wise ops: read the whole row before writing it). */
TSR_API bool tsr_op_can_inplace(const struct tsr_tensor * node, int src_index);

#ifdef __cplusplus
} /* extern "C" */
#endif

#ifdef __cplusplus
TSR_CXX_BEGIN
/* Owns a gallocr; tsr_gallocr_free on destruction. */
class gallocr {
public:
    explicit gallocr(tsr_backend_buffer_type_t buft) : g_(tsr_gallocr_new(buft)) {}
    ~gallocr() { tsr_gallocr_free(g_); }
    gallocr(const gallocr &) = delete;
    gallocr & operator=(const gallocr &) = delete;
    tsr_gallocr_t get() const { return g_; }
    operator tsr_gallocr_t() const { return g_; }
private:
    tsr_gallocr_t g_;
};
TSR_CXX_END /* namespace tsr */
#endif

#define TSR_ALLOC_DECLARED  /* every declaration above is in: the implementation may follow */
#endif /* TESSERA_ALLOC_H */

/* ---- implementation (outside the include guard: see tessera.h) ---------------------- */
#if defined(TSR_IMPLEMENTATION) && !defined(TSR_ALLOC_IMPLEMENTED)
#define TSR_ALLOC_IMPLEMENTED
/* ---- include/tessera/impl/packing.inl ---- */
/*
 * packing.inl - the offline packing core behind gallocr (tsr_pack, tsr_pack_lower_bound).
 *
 * The problem (dynamic storage allocation with known lifetimes): n buffers, each live on
 * a half-open step range [lower, upper) with a size; choose offsets so that no two
 * buffers live at one step overlap in memory; minimise the peak (max offset + size).
 *
 * How tessera solves it:
 *  1. Steps are compressed to "sections": the ranges between consecutive distinct
 *     endpoints, or above 1,000 buffers one per distinct start time (two buffers
 *     overlap iff one starts while the other is live, and the load peaks at a start).
 *     The lower bound is the largest sum of sizes live in one section.
 *  2. Greedy placement in several orders (size; size then start; breadth - the
 *     heaviest step a buffer spans; area; duration; start; "peak first" - the buffers
 *     live in the heaviest section, longest first, then the others by size), each
 *     buffer going to the lowest gap that fits among the buffers already placed that
 *     are live at the same time (first fit; it beat best fit on the real traces), or on
 *     top. Large instances (> 1,000 buffers) start with peak first: the buffers of the
 *     heaviest section then sit without a hole there (each one's first fit is the top
 *     of the stack, so the placer is not even asked), which is what the bound needs.
 *     The conflicting buffers are never enumerated one by one: a segment tree over the
 *     sections keeps, per node, the union of the offset ranges of the buffers stored
 *     there as coalesced runs, so a query merges O(log T) short run lists (a cursor per
 *     list that only moves forward and caches its current run; a blocked list is
 *     climbed while it blocks). An insertion stops climbing the tree at the first
 *     subtree union that already covers it. One order on Y_1 (62,185 buffers) takes
 *     ~90 ms of CPU on a busy 2-core machine.
 *  3. If the best greedy result is above the lower bound and time is left:
 *     - small instances (<= 1,000 buffers): a branch-and-bound search in the spirit of
 *       MiniMalloc (Moffitt, ASPLOS'23): buffers are stacked section by section, always
 *       on the lowest floor, at "canonical" offsets (the floor of every section they
 *       span); the search runs against a target peak, and a branch dies as soon as a
 *       section's floor plus the bytes still to place in it exceeds the target. Where
 *       no unplaced buffer crosses from one section to the next, the two sides are
 *       solved apart (one failing fails the node without retrying the other's choices),
 *       and at the lower bound (no slack) a section's floor counts as the lowest level
 *       any of its unplaced buffers can still take. The lower bound is tried first,
 *       then targets descend from the best packing found (each attempt: a few candidate
 *       orders, fixed and randomised, with a node limit that doubles when the targets
 *       run out).
 *     - large instances: (a) the window around the peak (the buffers live within 30,
 *       100, 300 or 10 sections of it, clipped to the window, at most 1,000) is packed
 *       exactly at the lower bound by that same branch and bound; those offsets are
 *       kept and every other buffer is placed around them by the greedy (the holes a
 *       greedy leaves at the peak are what costs on the real traces: PanGu 1.0076 ->
 *       1.0000, ResNet-50 1.0064 -> 1.0000); (b) the remaining greedy orders;
 *       (c) iterated greedy - the buffers that end above a level H move to the front of
 *       the best order and the greedy runs again (H starts at the lower bound and drops
 *       while that does not help); (d) a random walk on the best order (a few buffers
 *       move a short way; kept when the peak does not grow).
 *  The search never returns anything worse than the best greedy packing, and always
 *  stops at the lower bound (nothing can beat it). Define TSR_PACK_DEBUG to trace it on
 *  stderr.
 */

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

TSR_IMPL_NS_BEGIN
namespace {

typedef uint64_t pk_u64;
static const pk_u64 PK_INF = ~(pk_u64) 0;

struct pk_timer {
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    double ms() const {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
};

/* A packing problem over compressed time: buffer i spans sections [l[i], r[i]) with
 * aligned size sz[i] (only buffers with a non-empty range and a non-zero size). */
struct pk_problem {
    int n = 0;
    int T = 0;                 /* number of sections */
    std::vector<int> l, r;
    std::vector<pk_u64> sz;
    std::vector<pk_u64> section_load; /* bytes live in each section */
    std::vector<pk_u64> load;         /* the largest section load over each buffer's range (lazy) */
    pk_u64 lb = 0;
    int peak = 0;                     /* the first section whose load is lb */
};

/* Sorted, disjoint, coalesced [start, end) runs of offsets. Most tree nodes hold one or
 * two runs, so they live inline (no heap allocation); larger sets spill to the heap. */
struct pk_run { pk_u64 first, second; };
struct pk_runs {
    static const uint32_t INL = 2;
    uint32_t n = 0, cap = INL;
    pk_run * heap = nullptr;
    pk_run inl[INL];

    pk_runs() {}
    pk_runs(const pk_runs & o) { *this = o; }
    pk_runs & operator=(const pk_runs & o) {
        if (this == &o) return *this;
        clear();
        reserve(o.n);
        std::copy(o.data(), o.data() + o.n, data());
        n = o.n;
        return *this;
    }
    ~pk_runs() { delete[] heap; }
    pk_run * data() { return heap ? heap : inl; }
    const pk_run * data() const { return heap ? heap : inl; }
    bool empty() const { return n == 0; }
    void clear() { n = 0; }
    void reserve(uint32_t want) {
        if (want <= cap) return;
        uint32_t nc = cap;
        while (nc < want) nc *= 2;
        pk_run * h = new pk_run[nc];
        std::copy(data(), data() + n, h);
        delete[] heap;
        heap = h;
        cap = nc;
    }

    /* index of the first run whose end is > o (n if none) */
    uint32_t first_end_after(pk_u64 o) const {
        const pk_run * v = data();
        uint32_t lo = 0, hi = n;
        while (lo < hi) {
            const uint32_t mid = (lo + hi) / 2;
            if (v[mid].second > o) hi = mid; else lo = mid + 1;
        }
        return lo;
    }
    /* adds [s, e); true when it was already covered (nothing changed) */
    bool insert(pk_u64 s, pk_u64 e) {
        /* runs that touch or overlap [s, e) merge with it */
        uint32_t i = first_end_after(s == 0 ? 0 : s - 1);  /* first run with end >= s */
        pk_run * v = data();
        if (i < n && v[i].first <= s && v[i].second >= e) return true;
        uint32_t j = i;
        pk_u64 ns = s, ne = e;
        while (j < n && v[j].first <= e) {
            ns = std::min(ns, v[j].first);
            ne = std::max(ne, v[j].second);
            j++;
        }
        if (j == i) {
            reserve(n + 1);
            v = data();
            std::copy_backward(v + i, v + n, v + n + 1);
            v[i] = pk_run{s, e};
            n++;
        } else {
            v[i] = pk_run{ns, ne};
            std::copy(v + j, v + n, v + i + 1);
            n -= (j - i - 1);
        }
        return false;
    }
};

/* Greedy placer: buffers are placed one by one (in a given order) at the lowest offset
 * that is free over their whole live range (first fit among the already placed buffers
 * that share a section with them). */
struct pk_placer {
    int P = 1;                       /* leaves (power of two >= T) */
    struct node { pk_runs c, s; };   /* per tree node: canonical cover / subtree union (together: one cache line pair) */
    std::vector<node> N;
    std::vector<int> touched;        /* nodes with non-empty sets (for a fast reset) */
    struct cursor_t { const pk_run * v; uint32_t n, c; pk_u64 s, e; };
    std::vector<cursor_t> cur;

    void reset(int T) {
        int p = 1;
        while (p < T) p <<= 1;
        if (p != P || N.empty()) {
            P = p;
            N.assign((size_t) 2 * P, node());
            touched.clear();
            cur.resize(128);  /* at most two canonical nodes and two ancestors per level */
        } else {
            for (int nd : touched) { N[(size_t) nd].c.clear(); N[(size_t) nd].s.clear(); }
            touched.clear();
        }
    }

    /* the strict ancestors of the canonical nodes of [l, r): nodes on the two boundary
     * paths whose range is not inside [l, r), each once */
    template <class F> void for_ancestors(int l, int r, F f) const {
        int a = l + P, b = r - 1 + P, k = 0;
        while (a >= 1) {
            const int lo_a = (a - (P >> k)) << k, lo_b = (b - (P >> k)) << k, w = 1 << k;
            if (lo_a < l || lo_a + w > r) f(a);
            if (b != a && (lo_b < l || lo_b + w > r)) f(b);
            a >>= 1; b >>= 1; k++;
        }
    }

    /* the run lists that constrain [l, r): the subtree unions of its canonical nodes and
     * the canonical covers of their ancestors, as cursors (first run, cached) in cur[0, m) */
    size_t gather(int l, int r) {
        size_t m = 0;
        auto push = [&](const pk_runs & q) {
            if (q.empty()) return;
            const pk_run * v = q.data();
            cur[m++] = cursor_t{v, q.n, 0, v[0].first, v[0].second};
        };
        for (int a = l + P, b = r + P; a < b; a >>= 1, b >>= 1) {
            if (a & 1) { push(N[(size_t) a].s); a++; }
            if (b & 1) { --b; push(N[(size_t) b].s); }
        }
        for_ancestors(l, r, [&](int nd) { push(N[(size_t) nd].c); });
        return m;
    }

    /* lowest offset where [o, o + size) is free of every gathered run (first fit). Each
     * cursor keeps the first run of its list whose end is > o (o only grows) and a copy of
     * it, so a list that does not block costs no access to its runs. */
    pk_u64 find(int l, int r, pk_u64 size) {
        const size_t m = gather(l, r);
        pk_u64 o = 0;
        size_t k = 0, since = 0;
        while (since < m) {
            cursor_t & q = cur[k];
            if (q.e <= o) {
                /* the cached run ends at or below o: gallop forward, then bisect */
                const uint32_t c = q.c;
                uint32_t step = 1, lo = c + 1, hi = c + 1;
                while (hi < q.n && q.v[hi].second <= o) { lo = hi + 1; hi = c + (step <<= 1); }
                if (hi > q.n) hi = q.n;
                while (lo < hi) {
                    const uint32_t mid = (lo + hi) / 2;
                    if (q.v[mid].second > o) hi = mid; else lo = mid + 1;
                }
                q.c = lo;
                if (lo < q.n) { q.s = q.v[lo].first; q.e = q.v[lo].second; } else q.s = q.e = PK_INF;
            }
            if (q.s < o + size) {
                /* blocked: climb this list while its next run blocks too (cheap, in cache) */
                o = q.e;
                uint32_t c = q.c;
                while (++c < q.n && q.v[c].first < o + size) o = q.v[c].second;
                q.c = c;
                if (c < q.n) { q.s = q.v[c].first; q.e = q.v[c].second; } else q.s = q.e = PK_INF;
                since = 1;
            } else since++;
            if (++k == m) k = 0;
        }
        return o;
    }

    void add(int l, int r, pk_u64 o, pk_u64 size) {
        const pk_u64 e = o + size;
        auto touch = [&](int nd) {
            if (N[(size_t) nd].c.empty() && N[(size_t) nd].s.empty()) touched.push_back(nd);
        };
        for (int a = l + P, b = r + P; a < b; a >>= 1, b >>= 1) {
            if (a & 1) { touch(a); N[(size_t) a].c.insert(o, e); N[(size_t) a].s.insert(o, e); a++; }
            if (b & 1) { --b; touch(b); N[(size_t) b].c.insert(o, e); N[(size_t) b].s.insert(o, e); }
        }
        /* the strict ancestors (as in for_ancestors), path by path: a subtree union holds
         * its children's, so once one already covers [o, e) every node above it does too */
        int a = l + P, b = r - 1 + P, k = 0;
        bool done_a = false, done_b = false;
        while (a >= 1 && !(done_a && done_b)) {
            const int lo_a = (a - (P >> k)) << k, lo_b = (b - (P >> k)) << k, w = 1 << k;
            if (b == a) done_a = done_b = done_a || done_b;
            if (!done_a && (lo_a < l || lo_a + w > r)) { touch(a); done_a = N[(size_t) a].s.insert(o, e); }
            if (b != a && !done_b && (lo_b < l || lo_b + w > r)) { touch(b); done_b = N[(size_t) b].s.insert(o, e); }
            if (b == a) done_b = done_a;
            a >>= 1; b >>= 1; k++;
        }
    }
};

/* Place buffers in `order` (a permutation of all of them); returns the peak and fills
 * off. The first `fixed` buffers of the order keep the offsets already in off. */
static inline pk_u64 pk_greedy(const pk_problem & P, const std::vector<int> & order, std::vector<pk_u64> & off,
                               pk_placer & pl, size_t fixed = 0) {
    pl.reset(P.T);
    off.resize((size_t) P.n);
    pk_u64 peak = 0;
    bool stacking = fixed == 0;  /* every buffer so far is live in the peak section: they sit contiguously from 0 */
    for (size_t k = 0; k < order.size(); k++) {
        const size_t i = (size_t) order[k];
        pk_u64 o = off[i];
        if (k >= fixed) {
            stacking = stacking && P.l[i] <= P.peak && P.peak < P.r[i];
            /* while stacking, the first fit is the top of the stack (every placed buffer overlaps this one) */
            o = stacking ? peak : pl.find(P.l[i], P.r[i], P.sz[i]);
            off[i] = o;
        }
        pl.add(P.l[i], P.r[i], o, P.sz[i]);
        peak = std::max(peak, o + P.sz[i]);
    }
    return peak;
}

/* ---- branch and bound over canonical section-by-section packings ---------------------- */

struct pk_search {
    const pk_problem & P;
    pk_u64 cap = 0;
    std::vector<pk_u64> floor_, rem;
    std::vector<std::vector<int>> by_sec;   /* unplaced candidates per section, preference order */
    std::vector<char> placed;
    std::vector<pk_u64> off;
    double deadline_ms = 0;
    long node_limit = 0, nodes = 0;
    bool stop = false;
    const pk_timer & timer;

    pk_search(const pk_problem & p, const pk_timer & t) : P(p), timer(t) {}

    void init(pk_u64 capacity, int variant) {
        cap = capacity;
        floor_.assign((size_t) P.T, 0);
        rem.assign((size_t) P.T, 0);
        by_sec.assign((size_t) P.T, std::vector<int>());
        placed.assign((size_t) P.n, 0);
        off.assign((size_t) P.n, 0);
        std::vector<int> ord((size_t) P.n);
        std::iota(ord.begin(), ord.end(), 0);
        if (variant >= 3) {
            /* a random perturbation of size (even variants) or duration x size (odd), seeded by variant */
            uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t) (variant + 1);
            std::vector<double> key((size_t) P.n);
            for (int i = 0; i < P.n; i++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                const double u = (double) (x >> 11) / 9007199254740992.0;
                const double dur = (double) (P.r[(size_t) i] - P.l[(size_t) i]);
                key[(size_t) i] = (variant & 1 ? dur : 1.0) * (double) P.sz[(size_t) i] * (0.5 + u);
            }
            std::stable_sort(ord.begin(), ord.end(), [&](int a, int b) { return key[(size_t) a] > key[(size_t) b]; });
        } else {
            std::stable_sort(ord.begin(), ord.end(), [&](int a, int b) {
                const int da = P.r[(size_t) a] - P.l[(size_t) a], db = P.r[(size_t) b] - P.l[(size_t) b];
                const pk_u64 sa = P.sz[(size_t) a], sb = P.sz[(size_t) b];
                switch (variant % 3) {
                    case 0:  if (da != db) return da > db; return sa > sb;
                    case 1:  if (sa != sb) return sa > sb; return da > db;
                    default: { const double aa = (double) sa * da, ab = (double) sb * db; if (aa != ab) return aa > ab; return sa > sb; }
                }
            });
        }
        for (int i : ord) {
            for (int s = P.l[(size_t) i]; s < P.r[(size_t) i]; s++) {
                by_sec[(size_t) s].push_back(i);
                rem[(size_t) s] += P.sz[(size_t) i];
            }
        }
        cross.assign((size_t) P.T, 0);
        for (int i = 0; i < P.n; i++) for (int s = P.l[(size_t) i]; s + 1 < P.r[(size_t) i]; s++) cross[(size_t) s]++;
        nodes = 0;
        stop = false;
    }

    /* ---- the state changes, undone in reverse from a trail ---- */
    struct change { int what; pk_u64 old; };   /* what >= 0: a section's floor; -1 - i: buffer i placed */
    std::vector<change> trail;
    std::vector<int> cross;                    /* per section s: unplaced buffers live in s and s + 1 */

    void set_floor(int s, pk_u64 v) {
        trail.push_back(change{s, floor_[(size_t) s]});
        floor_[(size_t) s] = v;
    }
    void place(int i, pk_u64 f) {
        const pk_u64 top = f + P.sz[(size_t) i];
        for (int s = P.l[(size_t) i]; s < P.r[(size_t) i]; s++) {
            set_floor(s, top);
            rem[(size_t) s] -= P.sz[(size_t) i];
        }
        for (int s = P.l[(size_t) i]; s + 1 < P.r[(size_t) i]; s++) cross[(size_t) s]--;
        placed[(size_t) i] = 1;
        off[(size_t) i] = f;
        trail.push_back(change{-1 - i, 0});
    }
    void undo(size_t mark) {
        while (trail.size() > mark) {
            const change c = trail.back();
            trail.pop_back();
            if (c.what >= 0) { floor_[(size_t) c.what] = c.old; continue; }
            const int i = -1 - c.what;
            placed[(size_t) i] = 0;
            for (int s = P.l[(size_t) i]; s < P.r[(size_t) i]; s++) rem[(size_t) s] += P.sz[(size_t) i];
            for (int s = P.l[(size_t) i]; s + 1 < P.r[(size_t) i]; s++) cross[(size_t) s]++;
        }
    }

    /* Inference (MiniMalloc's section bound, sharpened): floors only rise and a buffer sits
     * on the floor of every section it spans, so unplaced buffer i goes no lower than the
     * highest floor over its range, and a section's bytes still to place stack no lower
     * than the least of those among its buffers. Costs a pass over every unplaced
     * buffer's range per node: worth it when the target leaves no slack (the lower bound). */
    bool infer = false;
    std::vector<pk_u64> lowest;                /* scratch of split(): per section of the part, that least level */
    void note_lowest(int i, int lo) {
        pk_u64 m = 0;
        for (int s = P.l[(size_t) i]; s < P.r[(size_t) i]; s++) m = std::max(m, floor_[(size_t) s]);
        for (int s = P.l[(size_t) i]; s < P.r[(size_t) i]; s++) lowest[(size_t) (s - lo)] = std::min(lowest[(size_t) (s - lo)], m);
    }

    /* Independent parts of sections [lo, hi): runs of sections with bytes still to place,
     * cut where no unplaced buffer crosses from one section to the next. What is placed in
     * one part cannot change what fits in another, so a part that fails fails them all:
     * no other choice made in the others is tried again for it (MiniMalloc's dynamic
     * decomposition). Returns the number of parts (their ranges in parts, the first `max`),
     * or -1 when the inference bound shows no packing under cap. */
    int split(int lo, int hi, std::pair<int, int> * parts, int max) {
        if (infer) {
            lowest.assign((size_t) (hi - lo), PK_INF);
            for (int i = 0; i < P.n; i++) {
                if (!placed[(size_t) i] && P.l[(size_t) i] >= lo && P.r[(size_t) i] <= hi) note_lowest(i, lo);
            }
            for (int s = lo; s < hi; s++) {
                if (rem[(size_t) s] != 0 && lowest[(size_t) (s - lo)] + rem[(size_t) s] > cap) return -1;
            }
        }
        int np = 0, open = -1;
        for (int s = lo; s < hi; s++) {
            if (open < 0 && rem[(size_t) s] != 0) open = s;
            if (open >= 0 && (s + 1 == hi || cross[(size_t) s] == 0)) { if (np < max) parts[np] = {open, s + 1}; np++; open = -1; }
        }
        return np;
    }

    /* the largest floor + bytes still to place over sections [a, b): the tightest part */
    pk_u64 fullest(int a, int b) const {
        pk_u64 m = 0;
        for (int s = a; s < b; s++) if (rem[(size_t) s] != 0) m = std::max(m, floor_[(size_t) s] + rem[(size_t) s]);
        return m;
    }

    /* Place every unplaced buffer within sections [lo, hi) under cap; true when done
     * (the placements stay), false with the state as it was. */
    bool rec(int lo, int hi) {
        if ((++nodes & 255) == 0 && (timer.ms() > deadline_ms || nodes > node_limit)) stop = true;
        if (stop) return false;
        std::pair<int, int> parts[16];
        const int np = split(lo, hi, parts, 16);
        if (np < 0) return false;  /* the inference bound */
        if (np == 0) return true;
        if (np > 1 && np <= 16) {
            /* the tightest part first: it is the likeliest to fail */
            std::sort(parts, parts + np, [&](const std::pair<int, int> & x, const std::pair<int, int> & y) {
                return fullest(x.first, x.second) > fullest(y.first, y.second);
            });
            const size_t mark = trail.size();
            for (int k = 0; k < np; k++) {
                if (!rec(parts[k].first, parts[k].second)) { undo(mark); return false; }
            }
            return true;
        }
        if (np == 1) { lo = parts[0].first; hi = parts[0].second; }
        int sb = -1;
        pk_u64 f = PK_INF;
        for (int s = lo; s < hi; s++) {
            if (rem[(size_t) s] != 0 && floor_[(size_t) s] < f) { f = floor_[(size_t) s]; sb = s; }
        }
        if (sb < 0) return true;
        /* the run of sections around sb whose floor is exactly f: a buffer can sit on f
         * iff its whole range lies inside it */
        int ra = sb, rb = sb + 1;
        while (ra > 0 && floor_[(size_t) ra - 1] == f) ra--;
        while (rb < P.T && floor_[(size_t) rb] == f) rb++;
        int cand[64];
        int nc = 0;
        for (int i : by_sec[(size_t) sb]) {
            if (placed[(size_t) i] || P.l[(size_t) i] < ra || P.r[(size_t) i] > rb) continue;
            bool dup = false;
            for (int k = 0; k < nc; k++) {
                const int c = cand[k];
                if (P.l[(size_t) c] == P.l[(size_t) i] && P.r[(size_t) c] == P.r[(size_t) i] && P.sz[(size_t) c] == P.sz[(size_t) i]) { dup = true; break; }
            }
            if (!dup && nc < 64) cand[nc++] = i;
        }
        const size_t mark = trail.size();
        for (int k = 0; k < nc; k++) {
            place(cand[k], f);
            if (rec(lo, hi)) return true;
            undo(mark);
            if (stop) return false;
        }
        /* leave a hole: nothing of this section sits on its current floor; it rises to
         * the lowest level another of its buffers can sit on */
        pk_u64 next_level = PK_INF;
        for (int i : by_sec[(size_t) sb]) {
            if (placed[(size_t) i] || (P.l[(size_t) i] >= ra && P.r[(size_t) i] <= rb)) continue;
            pk_u64 m = 0;
            for (int s2 = P.l[(size_t) i]; s2 < P.r[(size_t) i] && m < next_level; s2++) m = std::max(m, floor_[(size_t) s2]);
            next_level = std::min(next_level, m);
        }
        if (next_level != PK_INF && next_level + rem[(size_t) sb] <= cap) {
            set_floor(sb, next_level);
            if (rec(lo, hi)) return true;
            undo(mark);
        }
        return false;
    }

    /* true when a packing with peak <= capacity was found (in off) */
    bool run(pk_u64 capacity, int variant, double deadline, long limit) {
        init(capacity, variant);
        for (int s = 0; s < P.T; s++) if (rem[(size_t) s] > cap) return false;
        deadline_ms = deadline;
        node_limit = limit;
        trail.clear();
        return rec(0, P.T);
    }
};

static inline pk_u64 pk_align_up(pk_u64 x, pk_u64 a) { return (x + a - 1) / a * a; }

/* The window around the peak: the buffers live in sections [peak - half, peak + half],
 * clipped to it, packed exactly at the lower bound by the branch and bound (the peak is
 * where a greedy leaves the holes that cost; the window is small enough to solve). On
 * success `win` lists them and win_off their offsets. */
static inline bool pk_window(const pk_problem & P, int half, const pk_timer & timer, double deadline,
                             std::vector<int> & win, std::vector<pk_u64> & win_off) {
    const int wa = std::max(0, P.peak - half), wb = std::min(P.T, P.peak + half + 1);
    pk_problem W;
    win.clear();
    for (int i = 0; i < P.n; i++) {
        if (P.l[(size_t) i] >= wb || P.r[(size_t) i] <= wa) continue;
        win.push_back(i);
        W.l.push_back(std::max(P.l[(size_t) i], wa) - wa);
        W.r.push_back(std::min(P.r[(size_t) i], wb) - wa);
        W.sz.push_back(P.sz[(size_t) i]);
        if (win.size() > 1000) return false;  /* the search recurses once per buffer */
    }
    W.n = (int) win.size();
    W.T = wb - wa;
    W.lb = P.lb;
    pk_search srch(W, timer);
    for (int v = 0; v < 6 && timer.ms() < deadline; v++) {
        const bool ok = srch.run(P.lb, v, deadline, 20000);
#ifdef TSR_PACK_DEBUG
        fprintf(stderr, "  window +-%d (%d buffers, %d sections) variant %d: %s after %ld nodes, %.1f ms\n", half, W.n, W.T, v, ok ? "packed" : "no", srch.nodes, timer.ms());
#endif
        if (ok) { win_off = srch.off; return true; }
    }
    return false;
}



/* The heaviest section each buffer spans (a sparse table of range maxima), for the
 * breadth orders; computed on first use. */
static inline void pk_compute_load(pk_problem & P) {
    if (!P.load.empty() || P.n == 0) return;
    std::vector<std::vector<pk_u64>> st(1, P.section_load);
    for (int k = 1; (1 << k) <= P.T; k++) {
        const std::vector<pk_u64> & prev = st.back();
        std::vector<pk_u64> nx((size_t) (P.T - (1 << k) + 1));
        for (size_t i = 0; i < nx.size(); i++) nx[i] = std::max(prev[i], prev[i + ((size_t) 1 << (k - 1))]);
        st.push_back(std::move(nx));
    }
    P.load.resize((size_t) P.n);
    for (int i = 0; i < P.n; i++) {
        const int a = P.l[(size_t) i], b = P.r[(size_t) i];
        int k = 0;
        while ((2 << k) <= b - a) k++;
        P.load[(size_t) i] = std::max(st[(size_t) k][(size_t) a], st[(size_t) k][(size_t) (b - (1 << k))]);
    }
}

/* The orders the greedy tries, as sort keys (ascending; ~x sorts x descending; ties go
 * by index, so the order is deterministic). Orders 4 and 5 need pk_compute_load. */
struct pk_key { pk_u64 k[4]; int i; };
static inline pk_key pk_order_key(const pk_problem & P, int variant, int i) {
    const size_t u = (size_t) i;
    const pk_u64 sz = P.sz[u], l = (pk_u64) P.l[u], d = (pk_u64) (P.r[u] - P.l[u]);
    switch (variant) {
        case 0: return pk_key{{~sz, ~d, l, 0}, i};                  /* size, then duration, then start */
        case 1: return pk_key{{~sz, l, ~d, 0}, i};                  /* size, then start */
        case 2: {                                                   /* area */
            const double area = (double) sz * (double) d;
            pk_u64 bits;
            std::memcpy(&bits, &area, sizeof bits);  /* positive doubles order like their bits */
            return pk_key{{~bits, ~sz, 0, 0}, i};
        }
        case 3: return pk_key{{~d, ~sz, 0, 0}, i};                  /* duration */
        case 4: return pk_key{{~P.load[u], ~d, ~sz, 0}, i};         /* the heaviest step it spans (breadth), then duration */
        case 5: return pk_key{{~P.load[u], ~sz, ~d, 0}, i};         /* breadth, then size */
        case 7: {
            /* peak first: the buffers live in the heaviest section, longest first (they stack
             * there without a hole, long-lived ones at the bottom), then the others by size,
             * then start */
            if (P.l[u] <= P.peak && P.peak < P.r[u]) return pk_key{{0, ~d, ~sz, l}, i};
            return pk_key{{1, ~sz, l, ~d}, i};
        }
        default: return pk_key{{l, ~sz, 0, 0}, i};                  /* start */
    }
}
static inline void pk_sort_order(const pk_problem & P, int variant, std::vector<int> & order, std::vector<pk_key> & keys) {
    keys.resize((size_t) P.n);
    for (int i = 0; i < P.n; i++) keys[(size_t) i] = pk_order_key(P, variant, i);
    std::sort(keys.begin(), keys.end(), [](const pk_key & a, const pk_key & b) {
        for (int t = 0; t < 4; t++) if (a.k[t] != b.k[t]) return a.k[t] < b.k[t];
        return a.i < b.i;
    });
    order.resize((size_t) P.n);
    for (int i = 0; i < P.n; i++) order[(size_t) i] = keys[(size_t) i].i;
}
static const int PK_N_ORDERS = 8;

/* Sorts (time, code) events by time (the order among equal times does not matter): a
 * radix sort on (time - min) << 32 | code when the times span less than 2^32 steps, else
 * a comparison sort. */
static inline void pk_sort_events(std::vector<std::pair<int64_t, uint32_t>> & ev) {
    if (ev.empty()) return;
    int64_t lo = ev[0].first, hi = ev[0].first;
    for (const auto & e : ev) { lo = std::min(lo, e.first); hi = std::max(hi, e.first); }
    const uint64_t span = (uint64_t) hi - (uint64_t) lo;
    if (span >= ((uint64_t) 1 << 32) || ev.size() < 256) { std::sort(ev.begin(), ev.end()); return; }
    std::vector<pk_u64> a(ev.size()), b(ev.size());
    for (size_t k = 0; k < ev.size(); k++) a[k] = (((pk_u64) ev[k].first - (pk_u64) lo) << 32) | ev[k].second;
    int bits = 0;
    while (bits < 32 && (span >> bits) != 0) bits++;
    for (int sh = 32; sh < 32 + bits; sh += 11) {
        size_t cnt[2049] = {0};
        for (pk_u64 x : a) cnt[((x >> sh) & 2047) + 1]++;
        for (int d = 0; d < 2048; d++) cnt[d + 1] += cnt[d];
        for (pk_u64 x : a) b[cnt[(x >> sh) & 2047]++] = x;
        a.swap(b);
    }
    for (size_t k = 0; k < ev.size(); k++) ev[k] = std::make_pair((int64_t) ((pk_u64) lo + (a[k] >> 32)), (uint32_t) a[k]);
}



} // namespace
TSR_IMPL_NS_END

TSR_IMPL_NS_BEGIN
namespace {
/* The bodies of tsr_pack_lower_bound / tsr_pack; they may throw std::bad_alloc, which the
 * API wrappers below turn into an error. */
static size_t pk_lower_bound_body(const struct tsr_pack_item * items, size_t n, size_t alignment) {
    if (alignment == 0) alignment = 1;
    if (n == 0) return 0;
    if (!items) { tsr_set_error("tsr_pack_lower_bound: items is NULL with n = %zu", n); return SIZE_MAX; }
    std::vector<std::pair<int64_t, int64_t>> ev;  /* (time, +size / -size) */
    ev.reserve(2 * n);
    for (size_t i = 0; i < n; i++) {
        if (items[i].upper <= items[i].lower || items[i].size == 0) continue;
        const int64_t s = (int64_t) pk_align_up(items[i].size, alignment);
        ev.emplace_back(items[i].lower, s);
        ev.emplace_back(items[i].upper, -s);
    }
    std::sort(ev.begin(), ev.end(), [](const std::pair<int64_t, int64_t> & a, const std::pair<int64_t, int64_t> & b) {
        if (a.first != b.first) return a.first < b.first;
        return a.second < b.second;  /* frees before allocations at the same time */
    });
    int64_t cur = 0, best = 0;
    for (auto & e : ev) { cur += e.second; best = std::max(best, cur); }
    return (size_t) best;
}

/* tsr_pack, setup: sections from the sorted (time, 2 * problem index + is_upper) events.
 * Two buffers overlap iff one starts while the other is live, so for large instances
 * the sections are the distinct start times only (a buffer covers the starts in
 * [lower, upper)): fewer sections, a faster greedy. Small ones keep every endpoint
 * (the branch and bound's floors work better on the finer grid). */
static void pk_rank_sections(const std::vector<std::pair<int64_t, uint32_t>> & ev, pk_problem & P) {
    const bool starts_only = P.l.size() > 1000;  /* more than 1,000 buffers */
    int rank = 0;  /* distinct (start) times before the current time */
    for (size_t e = 0; e < ev.size();) {
        size_t g = e;
        bool any_start = false;
        for (; g < ev.size() && ev[g].first == ev[e].first; g++) {
            (ev[g].second & 1 ? P.r : P.l)[ev[g].second >> 1] = rank;
            any_start |= (ev[g].second & 1) == 0;
        }
        if (any_start || !starts_only) rank++;
        e = g;
    }
    P.T = starts_only ? rank : std::max(0, rank - 1);
}

/* tsr_pack, setup: the bytes live in each section, the lower bound (the most) and the
 * first section that reaches it. */
static void pk_section_loads(pk_problem & P) {
    std::vector<pk_u64> d((size_t) P.T + 1, 0);
    for (int i = 0; i < P.n; i++) { d[(size_t) P.l[(size_t) i]] += P.sz[(size_t) i]; d[(size_t) P.r[(size_t) i]] -= P.sz[(size_t) i]; }
    pk_u64 cur = 0;
    for (int s = 0; s < P.T; s++) {
        cur += d[(size_t) s];
        if (cur > P.lb) { P.lb = cur; P.peak = s; }
        d[(size_t) s] = cur;
    }
    P.section_load.assign(d.begin(), d.begin() + P.T);
}

/* tsr_pack, setup: checks the items, zeroes their offsets and builds the problem over
 * compressed time from those with a non-empty range and a non-zero size (idx: problem
 * index -> item index). false: an error was set. */
static bool pk_make_problem(struct tsr_pack_item * items, size_t n, size_t alignment, pk_problem & P,
                            std::vector<size_t> & idx) {
    /* compress time to sections: sort the endpoints once and rank them */
    std::vector<std::pair<int64_t, uint32_t>> ev;  /* (time, 2 * problem index + is_upper) */
    ev.reserve(2 * n);
    for (size_t i = 0; i < n; i++) {
        if (items[i].upper < items[i].lower) {
            return tsr_set_error("tsr_pack: item %zu has lower %lld > upper %lld", i, (long long) items[i].lower, (long long) items[i].upper);
        }
        if (items[i].size > SIZE_MAX / 4) return tsr_set_error("tsr_pack: item %zu has size %zu, too large", i, items[i].size);
        items[i].offset = 0;
        if (items[i].upper == items[i].lower || items[i].size == 0) continue;
        const uint32_t k = (uint32_t) idx.size();
        idx.push_back(i);
        ev.emplace_back(items[i].lower, 2 * k);
        ev.emplace_back(items[i].upper, 2 * k + 1);
        P.sz.push_back(pk_align_up(items[i].size, alignment));
    }
    pk_sort_events(ev);
    P.l.resize(idx.size());
    P.r.resize(idx.size());
    pk_rank_sections(ev, P);
    P.n = (int) idx.size();
    if (P.n == 0) return true;
    pk_u64 total = 0;
    for (pk_u64 x : P.sz) {
        total += x;
        if (total > (pk_u64) (SIZE_MAX / 2)) {
            return tsr_set_error("tsr_pack: the sizes of the %d items add up to more than %zu bytes", P.n, (size_t) (SIZE_MAX / 2));
        }
    }
    pk_section_loads(P);
    return true;
}

/* What tsr_pack's phases share: the problem, the clock and the budget, the greedy's
 * scratch, and the best packing so far (peak, offsets, and the order that gave them). */
struct pk_packer {
    pk_problem & P;
    const pk_timer & timer;
    const double budget_ms;
    pk_placer pl;
    std::vector<pk_u64> off, best_off;
    pk_u64 best = PK_INF;
    std::vector<int> order, best_order;
    std::vector<pk_key> keys;
    double last_ms = 0;        /* how long the last greedy took: another starts only if it fits the budget */
    const int * try_order;     /* the greedy orders, in the order they are tried */
    int n_orders;

    pk_packer(pk_problem & p, const pk_timer & t, double budget) : P(p), timer(t), budget_ms(budget), order((size_t) p.n) {
        /* large instances (> 1,000 buffers) keep their time for the improvement phase: peak
         * first here, the other orders after the window search (above 5,000 buffers only the
         * first three) */
        static const int try_order_small[PK_N_ORDERS] = {0, 1, 4, 2, 3, 5, 6, 7};
        static const int try_order_large[PK_N_ORDERS] = {7, 1, 0, 4, 2, 3, 5, 6};
        try_order = P.n <= 1000 ? try_order_small : try_order_large;
        n_orders = P.n <= 5000 ? PK_N_ORDERS : 3;
    }

    /* time for one more greedy */
    bool time_left() const { return timer.ms() + last_ms < budget_ms; }

    /* the greedy in order `variant` (pk_order_key) */
    void run_order(int variant) {
        const double t_start = timer.ms();
        if (variant == 4 || variant == 5) pk_compute_load(P);
        pk_sort_order(P, variant, order, keys);
        const pk_u64 peak = pk_greedy(P, order, off, pl);
#ifdef TSR_PACK_DEBUG
        fprintf(stderr, "  variant %d peak %.5f  %.1f ms\n", variant, (double) peak / (double) P.lb, timer.ms());
#endif
        if (peak < best) { best = peak; best_off = off; best_order = order; }
        last_ms = timer.ms() - t_start;
    }

    /* 2, small instances: the branch and bound at the lower bound, then against targets
     * that descend from the best peak found (align: the step's granularity) */
    void search(pk_u64 align) {
        pk_search srch(P, timer);
        pk_u64 hi = best;  /* a packing with this peak is known */
        pk_u64 floor_target = P.lb;  /* no packing below it: the lower bound, or above a target proven impossible */
        long limit = 3000;
        int nrand = 0;
        /* a few orders against target under the node limit until `until` ms: true when one
         * packs; a search that ends without hitting a limit has tried every canonical
         * packing, so the target is impossible and no other order is tried */
        auto attempt = [&](pk_u64 target, bool infer, long lim, double until) {
            for (int k = 0; k < 6 && timer.ms() < until; k++) {
                static const int fixed[6] = {-1, 1, -1, 0, -1, -1};  /* -1: a random order */
                const int v = fixed[k] >= 0 ? fixed[k] : 3 + (nrand++);
                srch.infer = infer;
                const bool okr = srch.run(target, v, until, lim);
#ifdef TSR_PACK_DEBUG
                fprintf(stderr, "  search target %.4f%s variant %d limit %ld: %s after %ld nodes, %.1f ms\n", (double) target / (double) P.lb,
                        infer ? " (inference)" : "", v, lim, okr ? "found" : srch.stop ? "no" : "impossible", srch.nodes, timer.ms());
#endif
                if (okr) {
                    pk_u64 peak = 0;
                    for (int i = 0; i < P.n; i++) peak = std::max(peak, srch.off[(size_t) i] + P.sz[(size_t) i]);
                    if (peak < best) { best = peak; best_off = srch.off; }
                    hi = std::min(hi, peak);
                    return true;
                }
                if (!srch.stop) { floor_target = std::max(floor_target, target + align); return false; }
            }
            return false;
        };
        /* targets descending from the best packing (easy ones first) until `until` ms, or
         * until one is found when `first_only` */
        pk_u64 step = (hi - P.lb) / 8;
        auto descend = [&](double until, bool first_only) {
            while (hi > floor_target && timer.ms() < until) {
                step = std::max(step, align);
                pk_u64 target = hi - step;
                target -= target % align;
                if (target < floor_target) target = floor_target;
                if (attempt(target, target == P.lb, limit, until)) {
                    if (first_only) return;
                } else {
                    step /= 2;
                    if (step < align || step * 64 < hi - P.lb) { step = (hi - P.lb) / 8; limit *= 2; }
                }
            }
        };
        /* the lower bound cheaply; a first packing below the greedy's (at most half the
         * budget: some instances need many orders for it); then the bound with the
         * inference bound and growing node limits for a quarter of what is left (on the
         * challenging traces the bound is the known fit, found there or not at all); then
         * the descent goes on */
        if (attempt(P.lb, false, limit, budget_ms)) return;
        descend(timer.ms() + 0.5 * (budget_ms - timer.ms()), true);
        if (hi == P.lb) return;
        const double lb_until = timer.ms() + 0.25 * (budget_ms - timer.ms());
        for (long lim = 3000; floor_target == P.lb && timer.ms() < lb_until; lim *= 2) {
            if (attempt(P.lb, true, lim, lb_until)) return;
        }
        descend(budget_ms, false);
    }

    /* 2a, large instances: the window around the peak packed exactly, then the others
     * around it, in a few orders */
    void window() {
        std::vector<int> win, rest;
        std::vector<pk_u64> win_off;
        std::vector<char> in_win((size_t) P.n);
        static const int halves[4] = {30, 100, 300, 10};
        for (int h = 0; h < 4 && best > P.lb && time_left(); h++) {
            if (!pk_window(P, halves[h], timer, budget_ms, win, win_off)) continue;
            std::fill(in_win.begin(), in_win.end(), 0);
            for (int i : win) in_win[(size_t) i] = 1;
            static const int rest_orders[3] = {1, 0, 7};
            for (int ro = 0; ro < 3 && best > P.lb && time_left(); ro++) {
                const double t_start = timer.ms();
                pk_sort_order(P, rest_orders[ro], rest, keys);
                order = win;
                for (int i : rest) if (!in_win[(size_t) i]) order.push_back(i);
                for (size_t k = 0; k < win.size(); k++) off[(size_t) win[k]] = win_off[k];
                const pk_u64 peak = pk_greedy(P, order, off, pl, win.size());
#ifdef TSR_PACK_DEBUG
                fprintf(stderr, "  window +-%d, the others in order %d: peak %.5f  %.1f ms\n", halves[h], rest_orders[ro], (double) peak / (double) P.lb, timer.ms());
#endif
                if (peak < best) { best = peak; best_off = off; best_order = order; }
                last_ms = timer.ms() - t_start;
            }
        }
    }

    /* 2c: promote the overflow: the buffers that end above a level H (at first the
     * lower bound) move to the front of the best order, keeping their relative
     * order, and the greedy runs again (small long-lived buffers piled on top
     * go to the bottom this way). H drops while it does not help. */
    void promote_overflow() {
        std::vector<int> ord = best_order;
        std::vector<char> hot((size_t) P.n);
        double f = 1.0;
        for (int it = 0; it < 64 && best > P.lb && f > 0.05; it++) {
            if (timer.ms() + last_ms > budget_ms) break;
            const double t_start = timer.ms();
            const pk_u64 H = (pk_u64) ((double) P.lb * f);
            for (int i = 0; i < P.n; i++) hot[(size_t) i] = best_off[(size_t) i] + P.sz[(size_t) i] > H;
            std::stable_partition(ord.begin(), ord.end(), [&](int i) { return hot[(size_t) i] != 0; });
            const pk_u64 peak = pk_greedy(P, ord, off, pl);
#ifdef TSR_PACK_DEBUG
            fprintf(stderr, "  promote f %.3f: peak %.5f  %.1f ms\n", f, (double) peak / (double) P.lb, timer.ms());
#endif
            if (peak < best) { best = peak; best_off = off; best_order = ord; }
            else { ord = best_order; f -= 0.1; }
            last_ms = timer.ms() - t_start;
        }
    }

    /* 2d: a random walk on orders: a few buffers each move a short way in the best
     * order; kept when the peak does not grow (plateaus are crossed this way) */
    void random_walk() {
        std::vector<int> ord;
        uint64_t x = 0x9E3779B97F4A7C15ull;
        auto rnd = [&](uint64_t m) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return m ? x % m : 0; };
        for (int it = 0; best > P.lb; it++) {
            if (timer.ms() + last_ms > budget_ms) break;
            const double t_start = timer.ms();
            ord = best_order;
            const int moves = 1 + (int) rnd((uint64_t) std::max(1, P.n / 256));
            for (int k = 0; k < moves; k++) {
                const size_t a = (size_t) rnd((uint64_t) P.n);
                const size_t b = std::min((size_t) P.n - 1, a + 1 + (size_t) rnd(64));
                std::rotate(ord.begin() + (ptrdiff_t) a, ord.begin() + (ptrdiff_t) a + 1, ord.begin() + (ptrdiff_t) b + 1);
            }
            const pk_u64 peak = pk_greedy(P, ord, off, pl);
#ifdef TSR_PACK_DEBUG
            fprintf(stderr, "  walk %d (%d moves): peak %.5f  %.1f ms\n", it, moves, (double) peak / (double) P.lb, timer.ms());
#endif
            if (peak <= best) { best = peak; best_off = off; best_order = ord; }
            last_ms = timer.ms() - t_start;
        }
    }
};

static size_t pk_pack_body(struct tsr_pack_item * items, size_t n, size_t alignment, double time_budget_ms) {
    const pk_timer timer;
    if (alignment == 0) alignment = 1;
    if ((alignment & (alignment - 1)) != 0) {
        tsr_set_error("tsr_pack: alignment %zu is not a power of two", alignment);
        return SIZE_MAX;
    }
    if (n == 0) return 0;
    if (!items) { tsr_set_error("tsr_pack: items is NULL with n = %zu", n); return SIZE_MAX; }
    if (n > (size_t) INT32_MAX / 2) { tsr_set_error("tsr_pack: %zu items is too many", n); return SIZE_MAX; }

    pk_problem P;
    std::vector<size_t> idx;  /* problem index -> item index */
    if (!pk_make_problem(items, n, alignment, P, idx)) return SIZE_MAX;
    if (P.n == 0) return 0;

#ifdef TSR_PACK_DEBUG
    fprintf(stderr, "  %d buffers, %d sections, setup %.1f ms\n", P.n, P.T, timer.ms());
#endif
    /* 1. greedy first fit in several orders: small instances try every order (each takes
     * well under a millisecond), large ones only the first */
    pk_packer pk(P, timer, time_budget_ms);
    const int n_first = P.n <= 1000 ? pk.n_orders : 1;
    for (int vi = 0; vi < n_first && pk.best > P.lb; vi++) pk.run_order(pk.try_order[vi]);

    /* 2. improvement while time is left */
    if (pk.best > P.lb && time_budget_ms > 0 && timer.ms() < time_budget_ms) {
        if (P.n <= 1000) {
            pk.search((pk_u64) alignment);
        } else {
            pk.window();
            /* 2b: the other orders */
            for (int vi = 1; vi < pk.n_orders && pk.best > P.lb && pk.time_left(); vi++) pk.run_order(pk.try_order[vi]);
            pk.promote_overflow();
            pk.random_walk();
        }
    }

    for (int i = 0; i < P.n; i++) items[idx[(size_t) i]].offset = (size_t) pk.best_off[(size_t) i];
    return (size_t) pk.best;
}
} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL size_t tsr_pack_lower_bound(const struct tsr_pack_item * items, size_t n, size_t alignment) {
    try {
        return tsr_impl::pk_lower_bound_body(items, n, alignment);
    } catch (...) {
        tsr_set_error("tsr_pack_lower_bound: out of memory for %zu items", n);
        return SIZE_MAX;
    }
}

TSR_API_IMPL size_t tsr_pack(struct tsr_pack_item * items, size_t n, size_t alignment, double time_budget_ms) {
    try {
        return tsr_impl::pk_pack_body(items, n, alignment, time_budget_ms);
    } catch (...) {
        for (size_t i = 0; items && i < n; i++) items[i].offset = 0;
        tsr_set_error("tsr_pack: out of memory for %zu items", n);
        return SIZE_MAX;
    }
}
/* ---- include/tessera/impl/alloc.inl ---- */
/*
 * alloc.inl - tallocr and gallocr (see alloc.h). gallocr plans a whole graph:
 *
 *  1. Which tensors it owns: every node and leaf without data, buffer or view_src.
 *     Views own nothing: they alias their root source and extend its live range.
 *  2. Live ranges in execution order (step i = node i): a node is live from its step to
 *     its last consumer (through views too); leafs and INPUT tensors from step 0;
 *     OUTPUT tensors and nodes nobody consumes (the graph's results, e.g. its final
 *     node) to the last step, and they are never reused.
 *  3. In place: a node whose op allows it (tsr_op_can_inplace) takes over the memory of
 *     a src that dies at this step (directly, or through a contiguous view covering the
 *     whole source, e.g. rope(reshape(x))), if that src is a node, not INPUT/OUTPUT, in
 *     the same buffer and of the same aligned size. The two share one slot.
 *  4. Slots are packed per buffer with tsr_pack (packing.inl).
 *  5. The result is cached as a flat list of (tensor index, buffer, offset) together
 *     with a key of the graph (topology, shapes, flags, buffer ids): alloc_graph on a
 *     graph with the same key only re-applies the offsets.
 */

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

/* ---- tallocr ------------------------------------------------------------------------- */

TSR_API_IMPL struct tsr_tallocr tsr_tallocr_new(tsr_backend_buffer_t buffer) {
    struct tsr_tallocr t;
    t.buffer = buffer;
    t.base = tsr_backend_buffer_get_base(buffer);
    t.alignment = tsr_backend_buffer_get_alignment(buffer);
    t.offset = 0;
    if (t.alignment == 0) t.alignment = 1;
    /* the first tensor starts aligned even when the base is not */
    const size_t mis = (size_t) ((uintptr_t) t.base % t.alignment);
    if (mis) t.offset = t.alignment - mis;
    return t;
}

TSR_API_IMPL bool tsr_tallocr_alloc(struct tsr_tallocr * talloc, struct tsr_tensor * tensor) {
    if (!talloc || !talloc->buffer || !tensor) return tsr_set_error("tsr_tallocr_alloc: NULL allocator, buffer or tensor");
    const size_t size = tsr_backend_buffer_get_alloc_size(talloc->buffer, tensor);
    const size_t cap = tsr_backend_buffer_get_size(talloc->buffer);
    const size_t padded = TSR_PAD(size, talloc->alignment);
    if (talloc->offset > cap || padded > cap - talloc->offset) {
        return tsr_set_error("tsr_tallocr_alloc: not enough space in buffer '%s' for tensor '%s': needed %zu bytes, "
                             "%zu of %zu used, %zu free",
                             tsr_backend_buffer_name(talloc->buffer), tensor->name, padded, talloc->offset, cap,
                             talloc->offset > cap ? (size_t) 0 : cap - talloc->offset);
    }
    if (!tsr_backend_tensor_alloc(talloc->buffer, tensor, (char *) talloc->base + talloc->offset)) return false;
    talloc->offset += padded;
    return true;
}

/* ---- in-place contract ----------------------------------------------------------------- */

TSR_API_IMPL bool tsr_op_can_inplace(const struct tsr_tensor * node, int src_index) {
    if (!node || src_index < 0 || src_index >= TSR_MAX_SRC) return false;
    const struct tsr_tensor * s = node->src[src_index];
    if (!s || node->view_src) return false;
    if (s->type != node->type || !tsr_are_same_shape(s, node)) return false;
    if (!tsr_is_contiguous(s) || !tsr_is_contiguous(node)) return false;
    switch (node->op) {
        case TSR_OP_ADD:
        case TSR_OP_SUB:
        case TSR_OP_MUL:
        case TSR_OP_DIV:
            return src_index <= 1;
        case TSR_OP_GLU:
            return node->src[1] != nullptr && src_index <= 1;  /* split gate only */
        case TSR_OP_SCALE:
        case TSR_OP_SQR:
        case TSR_OP_SQRT:
        case TSR_OP_LOG:
        case TSR_OP_UNARY:
        case TSR_OP_CLAMP:
        case TSR_OP_NORM:
        case TSR_OP_RMS_NORM:
        case TSR_OP_SOFT_MAX:
        case TSR_OP_ROPE:
        case TSR_OP_DIAG_MASK_INF:
        case TSR_OP_DUP:
        case TSR_OP_CONT:
        /* issue 17 part B */
        case TSR_OP_ADD_REL_POS:   /* each element reads only its own a */
        /* issue 17 part A: elementwise, or a row read whole before it is written (cumsum,
         * l2_norm), or a copy of a into which b's view is written afterwards (acc, set) */
        case TSR_OP_SIN:
        case TSR_OP_COS:
        case TSR_OP_LEAKY_RELU:
        case TSR_OP_FILL:
        case TSR_OP_TRI:
        case TSR_OP_CUMSUM:
        case TSR_OP_L2_NORM:
        case TSR_OP_ACC:
        case TSR_OP_SET:
            return src_index == 0;
        default:
            return false;
    }
}

/* ---- gallocr ----------------------------------------------------------------------------- */

TSR_IMPL_NS_BEGIN
TSR_IMPL_HANDLE(tsr_gallocr, gallocr)

struct gallocr {
    vec<tsr_backend_buffer_type_t> bufts;
    vec<tsr_backend_buffer_t> buffers;
    int n_reallocs = 0;
    double time_budget_ms = 10.0;

    /* the cached plan: owned tensors first, then views, in graph order */
    struct entry { int idx; int buffer_id; size_t offset; };  /* idx >= 0: node, < 0: leaf -1-idx */
    std::vector<entry> owned, views;
    std::vector<uint64_t> key;
    bool have_plan = false;
    std::vector<int> last_node_ids, last_leaf_ids;

    /* execution order (order.inl): reserve reorders the graph when enabled; order_perm is
     * the order it applied (empty: none), order_key the key of the graph before it */
    bool order_enabled = false;
    struct tsr_order_params order_params = {};
    std::vector<int> order_perm;
    std::vector<uint64_t> order_key;

    /* the readable plan */
    vec<struct tsr_plan_tensor> ptensors;
    std::vector<int> ptensor_idx;            /* graph index of each plan tensor (as entry::idx) */
    std::vector<std::string> pnames;
    vec<struct tsr_plan_buffer> pbuffers;
    struct tsr_plan plan = {0, nullptr, 0, nullptr, 0};
};

namespace {

static inline struct tsr_tensor * ga_tensor(struct tsr_cgraph * g, int idx) {
    return idx >= 0 ? g->nodes[idx] : g->leafs[-1 - idx];
}

static inline bool ga_is_ours(const gallocr * ga, const struct tsr_tensor * t) {
    if (!t->buffer) return false;
    for (tsr_backend_buffer_t b : ga->buffers) if (b && t->buffer == b) return true;
    return false;
}

/* Is t already placed by someone else (weights, user memory)? Our own earlier placements do
 * not count, so a graph re-run through alloc_graph keeps its plan. */
static inline bool ga_external(const gallocr * ga, const struct tsr_tensor * t) {
    const struct tsr_tensor * r = t->view_src ? t->view_src : t;
    if (ga_is_ours(ga, r)) return false;
    return r->data != nullptr || r->buffer != nullptr;
}

/* The key of a graph: everything the plan depends on. Pointers are kept relative to the
 * first node, so a graph rebuilt the same way in a reset context has the same key. */
struct ga_keyer {
    std::vector<uint64_t> * out;     /* build mode */
    const std::vector<uint64_t> * cmp;  /* compare mode */
    size_t pos = 0;
    bool equal = true;
    inline void put(uint64_t w) {
        if (out) { out->push_back(w); return; }
        if (equal && (pos >= cmp->size() || (*cmp)[pos] != w)) equal = false;
        pos++;
    }
};

static inline void ga_key_tensor(ga_keyer & k, const gallocr * ga, const struct tsr_tensor * t, intptr_t base) {
    k.put((uint64_t) (intptr_t) ((intptr_t) t - base));
    const bool ext = ga_external(ga, t);
    k.put((uint64_t) t->op | ((uint64_t) t->type << 8) | ((uint64_t) (uint32_t) t->flags << 16) | ((uint64_t) ext << 48));
    if (ext && t->data) return;  /* placed by someone else (weights): only its identity matters */
    for (int d = 0; d < TSR_MAX_DIMS; d++) { k.put((uint64_t) t->ne[d]); k.put((uint64_t) t->nb[d]); }
    k.put((uint64_t) (uint32_t) t->op_params[0] | ((uint64_t) (uint32_t) t->op_params[1] << 32));
    k.put(t->view_src ? (uint64_t) ((intptr_t) t->view_src - base) : ~(uint64_t) 0);
    k.put((uint64_t) t->view_offs);
    int ns = TSR_MAX_SRC;
    while (ns > 0 && !t->src[ns - 1]) ns--;
    k.put((uint64_t) ns);
    for (int s = 0; s < ns; s++) k.put(t->src[s] ? (uint64_t) ((intptr_t) t->src[s] - base) : ~(uint64_t) 0);
}

static inline void ga_key_graph(ga_keyer & k, const gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids) {
    const intptr_t base = g->n_nodes > 0 ? (intptr_t) g->nodes[0] : (g->n_leafs > 0 ? (intptr_t) g->leafs[0] : 0);
    k.put((uint64_t) g->n_nodes | ((uint64_t) g->n_leafs << 32));
    for (int i = 0; i < g->n_nodes; i++) { ga_key_tensor(k, ga, g->nodes[i], base); k.put((uint64_t) (node_ids ? node_ids[i] : 0)); }
    for (int i = 0; i < g->n_leafs; i++) { ga_key_tensor(k, ga, g->leafs[i], base); k.put((uint64_t) (leaf_ids ? leaf_ids[i] : 0)); }
}

/* Put t at base + offset of buffer b, bypassing the checks of tsr_backend_tensor_alloc
 * (the plan was checked against the buffer size when it was made). */
static inline bool ga_place(tsr_backend_buffer_t b, struct tsr_tensor * t, size_t offset) {
    t->buffer = b;
    t->data = (char *) tsr_backend_buffer_get_base(b) + offset;
    return b->iface.init_tensor ? b->iface.init_tensor(b, t) : true;
}

static inline bool ga_apply(gallocr * ga, struct tsr_cgraph * g) {
    for (const gallocr::entry & e : ga->owned) {
        struct tsr_tensor * t = ga_tensor(g, e.idx);
        if (t->data && !ga_is_ours(ga, t)) continue;
        if (!ga_place(ga->buffers[(size_t) e.buffer_id], t, e.offset)) return false;
    }
    for (const gallocr::entry & e : ga->views) {
        struct tsr_tensor * t = ga_tensor(g, e.idx);
        struct tsr_tensor * r = t->view_src;
        if (t->data && !ga_is_ours(ga, t)) continue;
        if (!r->data) return tsr_set_error("gallocr: view '%s' of '%s': the source has no data", t->name, r->name);
        t->buffer = r->buffer;
        t->data = (char *) r->data + t->view_offs;
        if (t->buffer && t->buffer->iface.init_tensor && !t->buffer->iface.init_tensor(t->buffer, t)) return false;
    }
    return true;
}

struct ga_info {
    int idx;          /* graph index (entry::idx encoding) */
    int buffer_id;
    int first, last;
    bool owned;
    bool consumed;
    int slot;         /* slot index */
    int inplace_of;   /* info index of the tensor whose memory it took, or -1 */
    size_t size;      /* aligned */
};

/* What ga_plan's steps share: one ga_info per graph tensor (leafs, then nodes) and where
 * each tensor's is. */
struct ga_tensors {
    std::vector<ga_info> info;
    hash_map<const struct tsr_tensor *, int> where;  /* tensor -> info index */

    /* the info index of t's root (t itself, or its view source); -1: not in the graph */
    int root_of(const struct tsr_tensor * t) const {
        const struct tsr_tensor * r = t->view_src ? t->view_src : t;
        auto it = where.find(r);
        return it == where.end() ? -1 : it->second;
    }
};

/* A piece of memory to pack: one owned tensor, or several in place of one another. */
struct ga_slot { int buffer_id; int first, last; size_t size; };

/* ga_plan, step 1: every buffer id names one of ga's buffer types. */
static bool ga_check_ids(const gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids) {
    const int n_bufs = (int) ga->bufts.size();
    for (int i = 0; i < g->n_nodes; i++) {
        if (node_ids && (node_ids[i] < 0 || node_ids[i] >= n_bufs)) {
            return tsr_set_error("gallocr: node %d ('%s') has buffer id %d, but the gallocr has %d buffer type(s)", i,
                                 g->nodes[i]->name, node_ids[i], n_bufs);
        }
    }
    for (int i = 0; i < g->n_leafs; i++) {
        if (leaf_ids && (leaf_ids[i] < 0 || leaf_ids[i] >= n_bufs)) {
            return tsr_set_error("gallocr: leaf %d ('%s') has buffer id %d, but the gallocr has %d buffer type(s)", i,
                                 g->leafs[i]->name, leaf_ids[i], n_bufs);
        }
    }
    return true;
}

/* ga_plan, step 2: the info of every leaf and node (owned?, aligned size, live from its step). */
static void ga_collect(const gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids, ga_tensors & ts) {
    ts.where.reserve((size_t) (g->n_nodes + g->n_leafs) * 2);
    ts.info.reserve((size_t) (g->n_nodes + g->n_leafs));
    auto add = [&](struct tsr_tensor * t, int idx, int bid) {
        ga_info in;
        in.idx = idx;
        in.buffer_id = bid;
        in.first = idx >= 0 ? idx : 0;
        in.last = in.first;
        in.owned = !t->view_src && !ga_external(ga, t);
        in.consumed = false;
        in.slot = -1;
        in.inplace_of = -1;
        const tsr_backend_buffer_type_t bt = ga->bufts[(size_t) bid];
        const size_t al = std::max<size_t>(1, tsr_backend_buft_get_alignment(bt));
        in.size = TSR_PAD(tsr_backend_buft_get_alloc_size(bt, t), al);
        if ((t->flags & TSR_TENSOR_FLAG_INPUT) != 0) in.first = 0;
        ts.where[t] = (int) ts.info.size();
        ts.info.push_back(in);
    };
    for (int i = 0; i < g->n_leafs; i++) add(g->leafs[i], -1 - i, leaf_ids ? leaf_ids[i] : 0);
    for (int i = 0; i < g->n_nodes; i++) add(g->nodes[i], i, node_ids ? node_ids[i] : 0);
}

/* ga_plan, step 3: live ranges: each root lives to its last consumer (through views);
 * outputs and results to the end. n_steps: "the end". */
static bool ga_live_ranges(const gallocr * ga, struct tsr_cgraph * g, int n_steps, ga_tensors & ts) {
    std::vector<ga_info> & info = ts.info;
    for (int i = 0; i < g->n_nodes; i++) {
        struct tsr_tensor * t = g->nodes[i];
        for (int s = 0; s < TSR_MAX_SRC; s++) {
            if (!t->src[s]) continue;
            const int r = ts.root_of(t->src[s]);
            if (r < 0) {
                if (!ga_external(ga, t->src[s])) {
                    return tsr_set_error("gallocr: node %d ('%s') uses '%s', which is not in the graph and has no data", i,
                                         t->name, t->src[s]->name);
                }
                continue;
            }
            info[(size_t) r].last = std::max(info[(size_t) r].last, i);
            info[(size_t) r].consumed = true;
            auto d = ts.where.find(t->src[s]);
            if (d != ts.where.end()) info[(size_t) d->second].consumed = true;
        }
        if (t->view_src) {
            const int r = ts.root_of(t);
            if (r >= 0) {
                info[(size_t) r].last = std::max(info[(size_t) r].last, i);
                if (t->flags & TSR_TENSOR_FLAG_OUTPUT) info[(size_t) r].last = n_steps;
            } else if (!ga_external(ga, t)) {
                return tsr_set_error("gallocr: view '%s' has a source '%s' that is not in the graph and has no data", t->name,
                                     t->view_src->name);
            }
        }
    }
    for (ga_info & in : info) {
        struct tsr_tensor * t = ga_tensor(g, in.idx);
        if ((t->flags & TSR_TENSOR_FLAG_OUTPUT) || (in.idx >= 0 && !in.consumed)) in.last = n_steps;
    }
    /* a view that is a result keeps its root alive to the end. "The end" is n_steps, one
     * past the last step, so that even the last node cannot take a result over in place
     * (the plan reports it as n_steps - 1). */
    for (const ga_info & in : info) {
        struct tsr_tensor * t = ga_tensor(g, in.idx);
        if (t->view_src && in.idx >= 0 && in.last == n_steps) {
            const int r = ts.root_of(t);
            if (r >= 0) info[(size_t) r].last = n_steps;
        }
    }
    return true;
}

/* May node i take over the memory of its src s in place, should that src die at step i?
 * (tsr_op_can_inplace; a root of the same buffer and size, not INPUT/OUTPUT, directly or
 * through a contiguous view of all of it.) The info index of that root, or -1. The order
 * optimiser (order.inl) asks the same question for orders other than the graph's. */
static int ga_inplace_candidate(struct tsr_cgraph * g, int i, int s, const ga_tensors & ts, const ga_info & in) {
    struct tsr_tensor * t = g->nodes[i];
    struct tsr_tensor * src = t->src[s];
    if (!src || !tsr_op_can_inplace(t, s)) return -1;
    const int r = ts.root_of(src);
    if (r < 0) return -1;
    const ga_info & rin = ts.info[(size_t) r];
    struct tsr_tensor * rt = ga_tensor(g, rin.idx);
    if (!rin.owned || rin.idx < 0) return -1;
    if (rt->flags & (TSR_TENSOR_FLAG_INPUT | TSR_TENSOR_FLAG_OUTPUT)) return -1;
    if (rin.buffer_id != in.buffer_id || rin.size != in.size) return -1;
    if (src->view_src && (src->view_offs != 0 || tsr_nbytes(src) != tsr_nbytes(rt) || !tsr_is_contiguous(rt) ||
                          rt->type != t->type)) return -1;
    return r;
}

/* ga_plan, step 4, for node i: the slot of a src that dies here and that this node may take
 * over in place (ga_inplace_candidate). Sets in.slot / in.inplace_of. */
static void ga_take_inplace(struct tsr_cgraph * g, int i, ga_tensors & ts, std::vector<ga_slot> & slots, ga_info & in) {
    for (int s = 0; s < TSR_MAX_SRC && in.slot < 0; s++) {
        const int r = ga_inplace_candidate(g, i, s, ts, in);
        if (r < 0) continue;
        const ga_info & rin = ts.info[(size_t) r];
        if (rin.slot < 0 || rin.last != i) continue;
        if (slots[(size_t) rin.slot].last != i) continue;  /* slot still needed later */
        in.slot = rin.slot;
        in.inplace_of = r;
        slots[(size_t) rin.slot].last = std::max(slots[(size_t) rin.slot].last, in.last);
    }
}

/* ga_plan, step 4: a slot for every owned tensor (leafs first: they live from step 0),
 * shared where a node works in place. */
static void ga_assign_slots(struct tsr_cgraph * g, ga_tensors & ts, std::vector<ga_slot> & slots) {
    for (ga_info & in : ts.info) {
        if (!in.owned || in.idx >= 0) continue;
        in.slot = (int) slots.size();
        slots.push_back(ga_slot{in.buffer_id, in.first, in.last, in.size});
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const int ii = ts.where[g->nodes[i]];
        ga_info & in = ts.info[(size_t) ii];
        if (!in.owned) continue;
        if (!(g->nodes[i]->flags & TSR_TENSOR_FLAG_INPUT)) ga_take_inplace(g, i, ts, slots, in);
        if (in.slot < 0) {
            in.slot = (int) slots.size();
            slots.push_back(ga_slot{in.buffer_id, in.first, in.last, in.size});
        }
    }
}

/* ga_plan, step 5: pack each buffer's slots (slot_off: each slot's offset; ga->pbuffers:
 * each buffer's alignment, planned size and lower bound). */
static bool ga_pack_buffers(gallocr * ga, const std::vector<ga_slot> & slots, double budget_ms, std::vector<size_t> & slot_off) {
    const int n_bufs = (int) ga->bufts.size();
    slot_off.assign(slots.size(), 0);
    ga->pbuffers.assign((size_t) n_bufs, tsr_plan_buffer{0, 0, 0, 1});
    for (int b = 0; b < n_bufs; b++) {
        vec<struct tsr_pack_item> items;
        std::vector<int> which;
        for (size_t s = 0; s < slots.size(); s++) {
            if (slots[s].buffer_id != b) continue;
            items.push_back(tsr_pack_item{slots[s].first, (int64_t) slots[s].last + 1, slots[s].size, 0});
            which.push_back((int) s);
        }
        const size_t al = std::max<size_t>(1, tsr_backend_buft_get_alignment(ga->bufts[(size_t) b]));
        struct tsr_plan_buffer & pb = ga->pbuffers[(size_t) b];
        pb.alignment = al;
        if (items.empty()) continue;
        const size_t peak = tsr_pack(items.data(), items.size(), al, budget_ms);
        if (peak == SIZE_MAX) return false;
        for (size_t k = 0; k < items.size(); k++) slot_off[(size_t) which[k]] = items[k].offset;
        pb.planned_size = peak;
        pb.lower_bound = tsr_pack_lower_bound(items.data(), items.size(), al);
        const size_t max = tsr_backend_buft_get_max_size(ga->bufts[(size_t) b]);
        if (peak > max) {
            return tsr_set_error("gallocr: buffer %d (%s) needs %zu bytes, more than its max size %zu", b,
                                 tsr_backend_buft_name(ga->bufts[(size_t) b]), peak, max);
        }
    }
    return true;
}

/* ga_plan, step 6: the cache (owned tensors with their offsets, then views) and the
 * readable plan. */
static void ga_store_plan(gallocr * ga, struct tsr_cgraph * g, const std::vector<ga_info> & info,
                          const std::vector<size_t> & slot_off, int n_steps) {
    ga->owned.clear();
    ga->views.clear();
    ga->ptensors.clear();
    ga->ptensor_idx.clear();
    ga->pnames.clear();
    std::vector<int> plan_pos(info.size(), -1);
    for (size_t ii = 0; ii < info.size(); ii++) {
        const ga_info & in = info[ii];
        struct tsr_tensor * t = ga_tensor(g, in.idx);
        if (in.owned) {
            const size_t off = slot_off[(size_t) in.slot];
            ga->owned.push_back(gallocr::entry{in.idx, in.buffer_id, off});
            plan_pos[ii] = (int) ga->ptensors.size();
            struct tsr_plan_tensor pt;
            pt.tensor = t;
            pt.name = nullptr;
            pt.buffer_id = in.buffer_id;
            pt.offset = off;
            pt.size = in.size;
            pt.first = in.first;
            pt.last = std::min(in.last, n_steps - 1);
            pt.inplace = in.inplace_of >= 0;
            pt.inplace_of = -1;
            ga->ptensors.push_back(pt);
            ga->ptensor_idx.push_back(in.idx);
            ga->pnames.push_back(t->name);
            ga->pbuffers[(size_t) in.buffer_id].no_reuse_size += in.size;
        } else if (t->view_src && (!ga_external(ga, t) || !t->data)) {
            ga->views.push_back(gallocr::entry{in.idx, in.buffer_id, 0});
        }
    }
    for (size_t ii = 0; ii < info.size(); ii++) {
        if (plan_pos[ii] >= 0 && info[ii].inplace_of >= 0) ga->ptensors[(size_t) plan_pos[ii]].inplace_of = plan_pos[(size_t) info[ii].inplace_of];
    }
    /* views in node order (a view of a view-node needs that node first: nodes are topological) */
    std::stable_sort(ga->views.begin(), ga->views.end(), [](const gallocr::entry & a, const gallocr::entry & b) {
        const int ka = a.idx >= 0 ? a.idx : -1, kb = b.idx >= 0 ? b.idx : -1;
        return ka < kb;
    });
    for (size_t i = 0; i < ga->ptensors.size(); i++) ga->ptensors[i].name = ga->pnames[i].c_str();
    ga->plan.n_tensors = (int) ga->ptensors.size();
    ga->plan.tensors = ga->ptensors.data();
    ga->plan.n_buffers = (int) ga->bufts.size();
    ga->plan.buffers = ga->pbuffers.data();
    ga->plan.n_steps = n_steps;
}

/* Plan g: fills ga's cache and readable plan (ga_size_buffers then grows the buffers to it). */
static bool ga_plan(gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids, double budget_ms) {
    const int n_steps = std::max(1, g->n_nodes);
    if (!ga_check_ids(ga, g, node_ids, leaf_ids)) return false;
    ga_tensors ts;
    ga_collect(ga, g, node_ids, leaf_ids, ts);
    if (!ga_live_ranges(ga, g, n_steps, ts)) return false;
    std::vector<ga_slot> slots;
    ga_assign_slots(g, ts, slots);
    std::vector<size_t> slot_off;
    if (!ga_pack_buffers(ga, slots, budget_ms, slot_off)) return false;
    ga_store_plan(ga, g, ts.info, slot_off, n_steps);

    ga->key.clear();
    ga_keyer k;
    k.out = &ga->key;
    k.cmp = nullptr;
    ga_key_graph(k, ga, g, node_ids, leaf_ids);
    ga->have_plan = true;
    return true;
}

/* Grow buffers to the plan (never shrink). */
static bool ga_size_buffers(gallocr * ga) {
    for (size_t b = 0; b < ga->bufts.size(); b++) {
        /* A plan of 0 bytes whose tensors all have 0 elements still needs a buffer to place
         * them in (an address nothing reads or writes): the smallest one the type makes. A
         * buffer no tensor uses gets none. */
        bool used = false;
        for (const gallocr::entry & e : ga->owned) used = used || e.buffer_id == (int) b;
        const size_t planned = ga->pbuffers[b].planned_size;
        const size_t need = planned ? planned : used ? tsr_backend_buft_get_alignment(ga->bufts[b]) : 0;
        const size_t cur = ga->buffers[b] ? tsr_backend_buffer_get_size(ga->buffers[b]) : 0;
        if (need == 0 || (ga->buffers[b] && cur >= need)) continue;
        tsr_backend_buffer_free(ga->buffers[b]);
        ga->buffers[b] = nullptr;
        tsr_backend_buffer_t nb = tsr_backend_buft_alloc_buffer(ga->bufts[b], need);
        if (!nb) {
            ga->have_plan = false;
            return false;
        }
        tsr_backend_buffer_set_usage(nb, TSR_BUFFER_USAGE_COMPUTE);
        ga->buffers[b] = nb;
        ga->n_reallocs++;
    }
    return true;
}

} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL tsr_gallocr_t tsr_gallocr_new_n(tsr_backend_buffer_type_t * bufts, int n_bufs) {
    if (!bufts || n_bufs <= 0) { tsr_set_error("tsr_gallocr_new_n: need at least one buffer type (got %d)", n_bufs); return nullptr; }
    for (int i = 0; i < n_bufs; i++) {
        if (!bufts[i]) { tsr_set_error("tsr_gallocr_new_n: buffer type %d is NULL", i); return nullptr; }
    }
    tsr_impl::gallocr * ga = new (std::nothrow) tsr_impl::gallocr;
    if (!ga) { tsr_set_error("tsr_gallocr_new: out of memory"); return nullptr; }
    try {
        ga->bufts.assign(bufts, bufts + n_bufs);
        ga->buffers.assign((size_t) n_bufs, nullptr);
        ga->pbuffers.assign((size_t) n_bufs, tsr_plan_buffer{0, 0, 0, 1});
    } catch (...) {
        delete ga;
        tsr_set_error("tsr_gallocr_new_n: out of memory for %d buffer types", n_bufs);
        return nullptr;
    }
    return tsr_impl::handle(ga);
}
TSR_API_IMPL tsr_gallocr_t tsr_gallocr_new(tsr_backend_buffer_type_t buft) { return tsr_gallocr_new_n(&buft, 1); }

TSR_API_IMPL void tsr_gallocr_free(tsr_gallocr_t galloc_h) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (!galloc) return;
    for (tsr_backend_buffer_t b : galloc->buffers) tsr_backend_buffer_free(b);
    delete galloc;
}

TSR_API_IMPL void tsr_gallocr_set_time_budget(tsr_gallocr_t galloc_h, double ms) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (galloc) galloc->time_budget_ms = ms < 0 ? 0 : ms;
}

TSR_IMPL_NS_BEGIN
namespace {
/* order.inl */
static bool ga_reorder_for_reserve(gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids);
static void ord_apply(struct tsr_cgraph * g, const std::vector<int> & order);

static bool ga_reserve(gallocr * galloc, struct tsr_cgraph * graph, const int * node_buffer_ids, const int * leaf_buffer_ids,
                       double budget_ms, bool reorder) {
    if (!galloc || !graph) return tsr_set_error("tsr_gallocr_reserve: NULL gallocr or graph");
    bool ok;
    try {
        if (!reorder) { galloc->order_perm.clear(); galloc->order_key.clear(); }
        ok = (!reorder || tsr_impl::ga_reorder_for_reserve(galloc, graph, node_buffer_ids, leaf_buffer_ids)) &&
             tsr_impl::ga_plan(galloc, graph, node_buffer_ids, leaf_buffer_ids, budget_ms);
        if (ok) {
            galloc->last_node_ids.assign(node_buffer_ids ? node_buffer_ids : nullptr,
                                         node_buffer_ids ? node_buffer_ids + graph->n_nodes : nullptr);
            galloc->last_leaf_ids.assign(leaf_buffer_ids ? leaf_buffer_ids : nullptr,
                                         leaf_buffer_ids ? leaf_buffer_ids + graph->n_leafs : nullptr);
        }
    } catch (...) {
        galloc->have_plan = false;
        return tsr_set_error("tsr_gallocr_reserve: out of memory while planning %d nodes", graph->n_nodes);
    }
    if (!ok) { galloc->have_plan = false; return false; }
    return tsr_impl::ga_size_buffers(galloc);
}
} // namespace
TSR_IMPL_NS_END

TSR_IMPL_NS_BEGIN
namespace {
static bool ga_matches_key(const gallocr * ga, struct tsr_cgraph * g, const std::vector<uint64_t> & key, const int * nids,
                           const int * lids) {
    ga_keyer k;
    k.out = nullptr;
    k.cmp = &key;
    ga_key_graph(k, ga, g, nids, lids);
    return k.equal && k.pos == key.size();
}

/* alloc_graph on the graph of the cached plan: the offsets again, if the buffers hold them */
static bool ga_reapply(gallocr * ga, struct tsr_cgraph * g, const int * nids, const int * lids) {
    for (size_t b = 0; b < ga->bufts.size(); b++) {
        if (ga->pbuffers[b].planned_size > tsr_backend_buffer_get_size(ga->buffers[b])) {
            return ga_reserve(ga, g, nids, lids, 0.0, false) && ga_apply(ga, g);
        }
    }
    for (size_t i = 0; i < ga->ptensors.size(); i++) ga->ptensors[i].tensor = ga_tensor(g, ga->ptensor_idx[i]);
    return ga_apply(ga, g);
}

/* Place g with these buffer ids: the cached plan again when g matches it (also the order
 * reserve applied, for a graph rebuilt in the builder's order), otherwise a new plan with
 * the heuristics only (no search): graphs that change every call must stay cheap; reserve
 * is where the search time goes. The scheduler calls it with the ids of each graph. */
static bool ga_alloc_graph_ids(gallocr * ga, struct tsr_cgraph * g, const int * nids, const int * lids) {
    if (ga->have_plan && ga_matches_key(ga, g, ga->key, nids, lids)) return ga_reapply(ga, g, nids, lids);
    if (ga->have_plan && !ga->order_perm.empty() && (int) ga->order_perm.size() == g->n_nodes &&
        ga_matches_key(ga, g, ga->order_key, nids, lids)) {
        ord_apply(g, ga->order_perm);
        if (ga_matches_key(ga, g, ga->key, nids, lids)) return ga_reapply(ga, g, nids, lids);
    }
    return ga_reserve(ga, g, nids, lids, 0.0, false) && ga_apply(ga, g);
}
} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_gallocr_reserve_n(tsr_gallocr_t galloc_h, struct tsr_cgraph * graph, const int * node_buffer_ids,
                                        const int * leaf_buffer_ids) {
    auto * galloc = tsr_impl::internal(galloc_h);
    return tsr_impl::ga_reserve(galloc, graph, node_buffer_ids, leaf_buffer_ids, galloc ? galloc->time_budget_ms : 0.0, true);
}
TSR_API_IMPL bool tsr_gallocr_reserve(tsr_gallocr_t galloc_h, struct tsr_cgraph * graph) {
    return tsr_gallocr_reserve_n(galloc_h, graph, nullptr, nullptr);
}

TSR_API_IMPL bool tsr_gallocr_alloc_graph(tsr_gallocr_t galloc_h, struct tsr_cgraph * graph) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (!galloc || !graph) return tsr_set_error("tsr_gallocr_alloc_graph: NULL gallocr or graph");
    const int * nids = nullptr;
    const int * lids = nullptr;
    if (!galloc->last_node_ids.empty() || !galloc->last_leaf_ids.empty()) {
        /* ids passed as NULL (stored empty) fit any count */
        const bool nodes_fit = galloc->last_node_ids.empty() || (int) galloc->last_node_ids.size() == graph->n_nodes;
        const bool leafs_fit = galloc->last_leaf_ids.empty() || (int) galloc->last_leaf_ids.size() == graph->n_leafs;
        if (nodes_fit && leafs_fit) {
            nids = galloc->last_node_ids.empty() ? nullptr : galloc->last_node_ids.data();
            lids = galloc->last_leaf_ids.empty() ? nullptr : galloc->last_leaf_ids.data();
        } else if (galloc->bufts.size() > 1) {
            return tsr_set_error("tsr_gallocr_alloc_graph: the graph (%d nodes, %d leafs) differs from the one reserved with "
                                 "buffer ids (%zu nodes): call tsr_gallocr_reserve_n for it first",
                                 graph->n_nodes, graph->n_leafs, galloc->last_node_ids.size());
        }
    }
    return tsr_impl::ga_alloc_graph_ids(galloc, graph, nids, lids);
}

TSR_API_IMPL size_t tsr_gallocr_get_buffer_size(tsr_gallocr_t galloc_h, int buffer_id) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (!galloc || buffer_id < 0 || buffer_id >= (int) galloc->buffers.size()) return 0;
    return tsr_backend_buffer_get_size(galloc->buffers[(size_t) buffer_id]);
}
TSR_API_IMPL tsr_backend_buffer_t tsr_gallocr_get_buffer(tsr_gallocr_t galloc_h, int buffer_id) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (!galloc || buffer_id < 0 || buffer_id >= (int) galloc->buffers.size()) return nullptr;
    return galloc->buffers[(size_t) buffer_id];
}
TSR_API_IMPL int tsr_gallocr_get_n_reallocs(tsr_gallocr_t galloc_h) { auto * galloc = tsr_impl::internal(galloc_h); return galloc ? galloc->n_reallocs : 0; }

TSR_API_IMPL const struct tsr_plan * tsr_gallocr_get_plan(tsr_gallocr_t galloc_h) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (!galloc || !galloc->have_plan) { tsr_set_error("tsr_gallocr_get_plan: no plan yet (reserve or alloc_graph first)"); return nullptr; }
    return &galloc->plan;
}

/* ---- plan check ------------------------------------------------------------------------- */

TSR_API_IMPL bool tsr_plan_check(const struct tsr_plan * plan, const size_t * capacities) {
    if (!plan) return tsr_set_error("tsr_plan_check: plan is NULL");
    const int n = plan->n_tensors;
    if (n < 0 || (n > 0 && !plan->tensors)) return tsr_set_error("tsr_plan_check: plan has %d tensors and tensors = %p", n, (const void *) plan->tensors);
    for (int i = 0; i < n; i++) {
        const struct tsr_plan_tensor & a = plan->tensors[i];
        if (a.buffer_id < 0 || a.buffer_id >= plan->n_buffers) {
            return tsr_set_error("tsr_plan_check: tensor '%s' is in buffer %d of %d", a.name, a.buffer_id, plan->n_buffers);
        }
        const struct tsr_plan_buffer & pb = plan->buffers[a.buffer_id];
        const size_t cap = capacities ? capacities[a.buffer_id] : pb.planned_size;
        if (pb.alignment && a.offset % pb.alignment != 0) {
            return tsr_set_error("tsr_plan_check: tensor '%s' offset %zu is not aligned to %zu", a.name, a.offset, pb.alignment);
        }
        if (a.offset > cap || a.size > cap - a.offset) {
            return tsr_set_error("tsr_plan_check: tensor '%s' [%zu, %zu) is outside buffer %d of %zu bytes", a.name, a.offset,
                                 a.offset + a.size, a.buffer_id, cap);
        }
        if (a.first > a.last || a.first < 0 || a.last >= plan->n_steps) {
            return tsr_set_error("tsr_plan_check: tensor '%s' has live range [%d, %d] outside [0, %d)", a.name, a.first, a.last,
                                 plan->n_steps);
        }
    }
    /* sweep by first step; pairs that share a step and a buffer must not overlap */
    std::vector<int> ord;
    try { ord.resize((size_t) n); } catch (...) { return tsr_set_error("tsr_plan_check: out of memory for %d tensors", n); }
    for (int i = 0; i < n; i++) ord[(size_t) i] = i;
    std::sort(ord.begin(), ord.end(), [&](int x, int y) { return plan->tensors[x].first < plan->tensors[y].first; });
    for (int p = 0; p < n; p++) {
        const int i = ord[(size_t) p];
        const struct tsr_plan_tensor & a = plan->tensors[i];
        for (int q = p + 1; q < n; q++) {
            const int j = ord[(size_t) q];
            const struct tsr_plan_tensor & b = plan->tensors[j];
            if (b.first > a.last) break;
            if (a.buffer_id != b.buffer_id || a.size == 0 || b.size == 0) continue;
            if (a.offset >= b.offset + b.size || b.offset >= a.offset + a.size) continue;
            /* in place: exactly aliased, and the later one starts where the earlier dies */
            const bool ok_ab = b.inplace_of == i && b.offset == a.offset && b.size == a.size && b.first == a.last;
            const bool ok_ba = a.inplace_of == j && a.offset == b.offset && a.size == b.size && a.first == b.last;
            if (ok_ab || ok_ba) continue;
            return tsr_set_error("tsr_plan_check: '%s' [%zu, %zu) steps %d-%d and '%s' [%zu, %zu) steps %d-%d overlap in buffer %d",
                                 a.name, a.offset, a.offset + a.size, a.first, a.last, b.name, b.offset, b.offset + b.size,
                                 b.first, b.last, a.buffer_id);
        }
    }
    return true;
}
/* ---- include/tessera/impl/order.inl ---- */
/*
 * order.inl - tsr_graph_optimize_order (see alloc.h): choose the graph's execution order
 * (a topological order of its nodes) with the smallest lower bound gallocr can plan for.
 *
 * The model is gallocr's own (alloc.inl): ga_collect says which tensors own memory and
 * how many bytes, ga_live_ranges which ones live to the end, ga_inplace_candidate which
 * dying operand a node may take over. What changes with the order is only when each
 * tensor dies and whether its last user can take it over, and both depend on nothing
 * but the set of nodes already run. So the bytes live before a step are a function of
 * that set, and the problem is a shortest-bottleneck path over the graph's down-sets:
 *
 *  1. Cuts: a node every other node is an ancestor or a descendant of splits the graph;
 *     the pieces between cuts are independent (the set run at a cut is fixed).
 *  2. Each piece: greedy orders (several rules) give a first bound; exact search then
 *     asks "is there an order whose every step is under the bound?" (a depth-first
 *     search over the down-sets, remembering the ones that fail) and tightens the
 *     bound until the answer is no, while it stays under a state limit; otherwise a
 *     local search that moves one node within its dependencies, until the piece's
 *     share of the time budget is spent.
 *  3. A piece keeps the builder's order unless something strictly better was found.
 *
 * Order-independent rule used by both searches: a ready node whose step adds nothing
 * (a view, a tensor placed elsewhere, or a node that can take over a dying operand now:
 * its operand's bytes become its result's) runs at once. Running it earlier adds no
 * bytes, frees its operands sooner and only makes a later in-place takeover more likely
 * (a takeover open now stays open: no other user of that operand is left).
 *
 * The floor (ord_floor) is what every order holds at some step; a piece stops searching
 * when it meets it, and an order that meets the graph's floor is optimal.
 */

#include <chrono>
#include <numeric>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>

TSR_IMPL_NS_BEGIN
namespace {

/* The memory side of a graph, indexed by node (builder position) and by root (the
 * info index of ga_tensors: leafs, then nodes). */
struct ord_problem {
    int n = 0;
    std::vector<int> pred_off, pred, succ_off, succ;  /* dependencies (CSR) */
    std::vector<size_t> alloc;                        /* bytes a node's step adds: 0 for views, placed, INPUT */
    std::vector<int> touch_off, touch;                /* roots the node uses (it counts down their users) */
    std::vector<int> inpl_off, inpl;                  /* roots it may take over if it is their last user */
    std::vector<int> users;                           /* per root: how many nodes use it */
    std::vector<size_t> root_size;                    /* per root: bytes it owns (0: none) */
    std::vector<char> immortal;                       /* per root: lives to the end (results, OUTPUT) */
    std::vector<int> maker;                           /* per root: the node whose step allocates it, or -1 */
    std::vector<int> made;                            /* per node: the root its step allocates, or -1 */
    size_t mem0 = 0;                                  /* bytes live before the first step */
    /* several buffers (node buffer ids): which buffer each root and each node's result
     * is in, the bytes each holds before the first step, and the caller's id per node;
     * pieces never cross from one run of equal ids to the next */
    int n_buffers = 1;
    std::vector<int> root_buffer, node_buffer;
    std::vector<size_t> mem0_buffer;
    std::vector<int> run_id;                          /* empty: one buffer, no runs */
};

static bool ord_pure_view_op(enum tsr_op op) {
    return op == TSR_OP_NONE || op == TSR_OP_VIEW || op == TSR_OP_RESHAPE || op == TSR_OP_PERMUTE || op == TSR_OP_TRANSPOSE;
}

static void ord_sorted_unique(std::vector<int> & v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
}

static void ord_flatten(const std::vector<std::vector<int>> & lists, std::vector<int> & off, std::vector<int> & flat) {
    off.assign(lists.size() + 1, 0);
    flat.clear();
    for (size_t i = 0; i < lists.size(); i++) {
        flat.insert(flat.end(), lists[i].begin(), lists[i].end());
        off[i + 1] = (int) flat.size();
    }
}

/* Dependencies: each node after the nodes among its sources (and its view source). A
 * view node with a computing op (an in-place op's result, a copy into a view) writes
 * into its root, so it also stays ordered against every other node using that root. */
static void ord_dependencies(struct tsr_cgraph * g, const ga_tensors & ts, const std::vector<std::vector<int>> & touch,
                             ord_problem & p) {
    const int nl = g->n_leafs, n = g->n_nodes;
    std::vector<std::vector<int>> preds((size_t) n), succs((size_t) n);
    auto node_of = [&](const struct tsr_tensor * t) {
        auto it = ts.where.find(t);
        return it == ts.where.end() || it->second < nl ? -1 : it->second - nl;
    };
    for (int i = 0; i < n; i++) {
        struct tsr_tensor * t = g->nodes[i];
        for (int s = 0; s < TSR_MAX_SRC; s++) {
            const int u = t->src[s] ? node_of(t->src[s]) : -1;
            if (u >= 0 && u != i) preds[(size_t) i].push_back(u);
        }
        const int u = t->view_src ? node_of(t->view_src) : -1;
        if (u >= 0 && u != i) preds[(size_t) i].push_back(u);
    }
    std::unordered_map<int, std::vector<int>> users_of_root;  /* only roots someone writes into */
    for (int i = 0; i < n; i++) {
        struct tsr_tensor * t = g->nodes[i];
        if (t->view_src && !ord_pure_view_op(t->op)) {
            const int r = ts.root_of(t);
            if (r >= 0) users_of_root[r];
        }
    }
    if (!users_of_root.empty()) {
        for (int i = 0; i < n; i++) {
            for (int r : touch[(size_t) i]) {
                auto it = users_of_root.find(r);
                if (it != users_of_root.end()) it->second.push_back(i);
            }
        }
        for (auto & ru : users_of_root) {
            const std::vector<int> & us = ru.second;
            for (size_t k = 0; k < us.size(); k++) {
                const struct tsr_tensor * w = g->nodes[us[k]];
                if (!w->view_src || ord_pure_view_op(w->op)) continue;
                for (size_t j = 0; j < k; j++) preds[(size_t) us[k]].push_back(us[j]);
                for (size_t j = k + 1; j < us.size(); j++) preds[(size_t) us[j]].push_back(us[k]);
            }
        }
    }
    for (int i = 0; i < n; i++) {
        ord_sorted_unique(preds[(size_t) i]);
        for (int u : preds[(size_t) i]) succs[(size_t) u].push_back(i);
    }
    ord_flatten(preds, p.pred_off, p.pred);
    ord_flatten(succs, p.succ_off, p.succ);
}

/* The problem of graph g as gallocr ga would plan it (node_ids / leaf_ids: each tensor's
 * buffer, as reserve_n takes them; NULL: all in buffer 0). */
static bool ord_build(const gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids, ord_problem & p) {
    const int n = g->n_nodes, nl = g->n_leafs;
    ga_tensors ts;
    ga_collect(ga, g, node_ids, leaf_ids, ts);
    if (!ga_live_ranges(ga, g, std::max(1, n), ts)) return false;
    const int n_steps = std::max(1, n);
    p.n = n;
    p.users.assign(ts.info.size(), 0);
    p.root_size.assign(ts.info.size(), 0);
    p.immortal.assign(ts.info.size(), 0);
    p.alloc.assign((size_t) n, 0);
    p.mem0 = 0;
    p.n_buffers = (int) ga->bufts.size();
    p.mem0_buffer.assign((size_t) p.n_buffers, 0);
    p.root_buffer.assign(ts.info.size(), 0);
    p.node_buffer.assign((size_t) n, 0);
    for (size_t r = 0; r < ts.info.size(); r++) {
        const ga_info & in = ts.info[r];
        p.immortal[r] = in.last == n_steps;
        p.root_buffer[r] = in.buffer_id;
        if (in.owned) p.root_size[r] = in.size;
        if (in.owned && in.first == 0 && (in.idx < 0 || (ga_tensor(g, in.idx)->flags & TSR_TENSOR_FLAG_INPUT))) {
            p.mem0 += in.size;
            p.mem0_buffer[(size_t) in.buffer_id] += in.size;
        }
    }
    for (int i = 0; i < n; i++) p.node_buffer[(size_t) i] = ts.info[(size_t) (nl + i)].buffer_id;
    p.maker.assign(ts.info.size(), -1);
    p.made.assign((size_t) n, -1);
    if (node_ids) p.run_id.assign(node_ids, node_ids + n);
    std::vector<std::vector<int>> touch((size_t) n), inpl((size_t) n);
    for (int i = 0; i < n; i++) {
        struct tsr_tensor * t = g->nodes[i];
        const ga_info & in = ts.info[(size_t) (nl + i)];
        const bool input = (t->flags & TSR_TENSOR_FLAG_INPUT) != 0;
        if (in.owned && !input && in.size > 0) {
            p.alloc[(size_t) i] = in.size;
            p.made[(size_t) i] = nl + i;
            p.maker[(size_t) (nl + i)] = i;
        }
        for (int s = 0; s < TSR_MAX_SRC; s++) {
            if (!t->src[s]) continue;
            const int r = ts.root_of(t->src[s]);
            if (r >= 0) touch[(size_t) i].push_back(r);
            const int c = input ? -1 : ga_inplace_candidate(g, i, s, ts, in);
            if (c >= 0 && !p.immortal[(size_t) c]) inpl[(size_t) i].push_back(c);
        }
        if (t->view_src) {
            const int r = ts.root_of(t);
            if (r >= 0) touch[(size_t) i].push_back(r);
        }
        ord_sorted_unique(touch[(size_t) i]);
        for (int r : touch[(size_t) i]) p.users[(size_t) r]++;
    }
    ord_dependencies(g, ts, touch, p);
    ord_flatten(touch, p.touch_off, p.touch);
    ord_flatten(inpl, p.inpl_off, p.inpl);
    return true;
}

/* Running nodes one at a time: the bytes live now, and what each step would need. */
struct ord_sim {
    const ord_problem * p = nullptr;
    std::vector<int> left;     /* per root: users not yet run */
    std::vector<int> waiting;  /* per node: predecessors not yet run */
    size_t mem = 0;

    void reset(const ord_problem & prob) {
        p = &prob;
        left = prob.users;
        waiting.assign((size_t) prob.n, 0);
        for (int v = 0; v < prob.n; v++) waiting[(size_t) v] = prob.pred_off[(size_t) v + 1] - prob.pred_off[(size_t) v];
        mem = prob.mem0;
    }
    bool takes_over(int v) const {
        for (int k = p->inpl_off[(size_t) v]; k < p->inpl_off[(size_t) v + 1]; k++) {
            if (left[(size_t) p->inpl[(size_t) k]] == 1) return true;
        }
        return false;
    }
    /* bytes live while v runs */
    size_t step_bytes(int v) const {
        const size_t a = p->alloc[(size_t) v];
        return a && !takes_over(v) ? mem + a : mem;
    }
    /* runs v; returns the bytes live while it ran */
    size_t run(int v) {
        const size_t peak = step_bytes(v);
        mem += p->alloc[(size_t) v];
        for (int k = p->touch_off[(size_t) v]; k < p->touch_off[(size_t) v + 1]; k++) {
            const int r = p->touch[(size_t) k];
            if (--left[(size_t) r] == 0 && !p->immortal[(size_t) r]) mem -= p->root_size[(size_t) r];
        }
        for (int k = p->succ_off[(size_t) v]; k < p->succ_off[(size_t) v + 1]; k++) waiting[(size_t) p->succ[(size_t) k]]--;
        return peak;
    }
    void undo(int v) {
        for (int k = p->succ_off[(size_t) v]; k < p->succ_off[(size_t) v + 1]; k++) waiting[(size_t) p->succ[(size_t) k]]++;
        for (int k = p->touch_off[(size_t) v]; k < p->touch_off[(size_t) v + 1]; k++) {
            const int r = p->touch[(size_t) k];
            if (left[(size_t) r]++ == 0 && !p->immortal[(size_t) r]) mem += p->root_size[(size_t) r];
        }
        mem -= p->alloc[(size_t) v];
    }
    /* the largest step of running order[0..n) from here; the state is left as it was.
     * area (if not NULL): the sum of all steps, which tells two orders of one peak apart */
    size_t peak_of(const std::vector<int> & order, uint64_t * area = nullptr) {
        size_t peak = 0;
        uint64_t sum = 0;
        for (int v : order) {
            const size_t step = run(v);
            peak = std::max(peak, step);
            sum += step;
        }
        for (size_t k = order.size(); k-- > 0;) undo(order[k]);
        if (area) *area = sum;
        return peak;
    }
};

/* A piece of the graph between two cuts, solved from the state the cut leaves. */
struct ord_piece {
    ord_sim * sim;
    std::vector<int> nodes;       /* builder order */
    std::vector<int> local;       /* node -> index in nodes, or -1 (size n) */
    std::chrono::steady_clock::time_point deadline;
    size_t floor = 0;   /* no order of the piece goes under this (ord_floor) */
    size_t enough = 0;  /* a peak at or under this ends the search: the graph's floor is higher */
};

/* Which nodes are cuts (every other node an ancestor or a descendant of it). In the
 * builder's order that is: no dependency jumps over it, no sink lies before it and no
 * source after it. */
static std::vector<char> ord_cuts(const ord_problem & p) {
    const int n = p.n;
    std::vector<int> cover((size_t) n + 1, 0);
    for (int w = 0; w < n; w++) {
        for (int k = p.pred_off[(size_t) w]; k < p.pred_off[(size_t) w + 1]; k++) {
            const int u = p.pred[(size_t) k];
            if (w - u > 1) { cover[(size_t) u + 1]++; cover[(size_t) w]--; }
        }
    }
    std::vector<char> cut((size_t) n, 0);
    std::vector<int> sources_after((size_t) n + 1, 0);
    for (int v = n - 1; v >= 0; v--) {
        const bool source = p.pred_off[(size_t) v + 1] == p.pred_off[(size_t) v];
        sources_after[(size_t) v] = sources_after[(size_t) v + 1] + (source ? 1 : 0);
    }
    int covered = 0, sinks_before = 0;
    for (int v = 0; v < n; v++) {
        covered += cover[(size_t) v];
        cut[(size_t) v] = covered == 0 && sinks_before == 0 && sources_after[(size_t) v + 1] == 0;
        if (p.succ_off[(size_t) v + 1] == p.succ_off[(size_t) v]) sinks_before++;
    }
    return cut;
}

/* Bit rows over a piece's nodes (by local index). */
struct ord_rows {
    size_t words = 0;
    std::vector<uint64_t> bits;
    uint64_t * row(size_t k) { return bits.data() + k * words; }
    const uint64_t * row(size_t k) const { return bits.data() + k * words; }
    bool has(size_t k, size_t j) const { return (row(k)[j / 64] >> (j % 64)) & 1; }
};

/* The largest piece whose floor uses ancestor sets (two m x m bit matrices: 4 MiB here);
 * a larger one gets the floor from each node's own operands only. */
static const size_t ORD_FLOOR_MAX_NODES = 4096;

/* Each piece node's ancestors in the piece, or (desc) its descendants. The builder's
 * order is topological, so one pass in it (or against it) sees every relative first. */
static ord_rows ord_relatives(const ord_piece & pc, bool desc) {
    const ord_problem & p = *pc.sim->p;
    const std::vector<int> & off = desc ? p.succ_off : p.pred_off;
    const std::vector<int> & adj = desc ? p.succ : p.pred;
    const size_t m = pc.nodes.size();
    ord_rows r;
    r.words = (m + 63) / 64;
    r.bits.assign(m * r.words, 0);
    for (size_t i = 0; i < m; i++) {
        const size_t k = desc ? m - 1 - i : i;
        const int v = pc.nodes[k];
        uint64_t * dst = r.row(k);
        for (int e = off[(size_t) v]; e < off[(size_t) v + 1]; e++) {
            const int u = pc.local[(size_t) adj[(size_t) e]];
            if (u < 0) continue;
            const uint64_t * src = r.row((size_t) u);
            for (size_t w = 0; w < r.words; w++) dst[w] |= src[w];
            dst[(size_t) u / 64] |= 1ull << ((size_t) u % 64);
        }
    }
    return r;
}

/* The floor of a piece, from the state its first cut leaves: the most bytes that are live
 * at one node's step in EVERY order of the piece, so no order goes under it. At v's step
 * a root is surely live when it surely exists (live now, or made by an ancestor of v) and
 * is surely not freed yet (it outlives the piece, or v or a descendant of v uses it); v's
 * own result counts unless some order lets v take over a dying operand (no user of that
 * operand is a descendant of v). */
struct ord_floor {
    const ord_piece & pc;
    const ord_sim & sim;
    const ord_problem & p;
    bool rows;
    ord_rows anc, desc;
    std::unordered_map<int, std::vector<int>> users;  /* root -> its users in the piece (local) */
    std::vector<size_t> extra;                         /* per piece node: bytes over the base */
    size_t base;                                       /* bytes live at every step of the piece */
    /* per piece node u that makes a root: the steps at which that root is surely live once
     * u has run, but not counted before (they are not descendants of u); by ord_exact */
    std::vector<std::vector<uint64_t>> late;

    explicit ord_floor(const ord_piece & piece)
        : pc(piece), sim(*piece.sim), p(*piece.sim->p), rows(piece.nodes.size() <= ORD_FLOOR_MAX_NODES),
          extra(piece.nodes.size(), 0), base(piece.sim->mem) {
        if (rows) {
            anc = ord_relatives(pc, false);
            desc = ord_relatives(pc, true);
        }
        for (size_t k = 0; k < pc.nodes.size(); k++) {
            const int v = pc.nodes[k];
            for (int e = p.touch_off[(size_t) v]; e < p.touch_off[(size_t) v + 1]; e++) users[p.touch[(size_t) e]].push_back((int) k);
        }
    }

    /* freed after the piece, if ever */
    bool outlives(int r) const {
        if (p.immortal[(size_t) r] || p.users[(size_t) r] == 0) return true;
        auto it = users.find(r);
        return sim.left[(size_t) r] > (it == users.end() ? 0 : (int) it->second.size());
    }

    /* the steps at which r is surely not freed yet: its users' and their ancestors' */
    std::vector<uint64_t> before_last_use(const std::vector<int> & us) const {
        std::vector<uint64_t> set(anc.words, 0);
        for (int w : us) {
            const uint64_t * a = anc.row((size_t) w);
            for (size_t i = 0; i < set.size(); i++) set[i] |= a[i];
            set[(size_t) w / 64] |= 1ull << ((size_t) w % 64);
        }
        return set;
    }

    void add_at(const std::vector<uint64_t> & set, size_t bytes) {
        for (size_t i = 0; i < set.size(); i++) {
            for (uint64_t b = set[i]; b; b &= b - 1) extra[i * 64 + (size_t) __builtin_ctzll(b)] += bytes;
        }
    }
    void add_at_users(const std::vector<int> & us, size_t bytes) {
        for (int w : us) extra[(size_t) w] += bytes;
    }

    /* a root the piece uses: live now, or made by a piece node */
    void count_used_root(int r, const std::vector<int> & us) {
        const size_t bytes = p.root_size[(size_t) r];
        const int mk = p.maker[(size_t) r] >= 0 ? pc.local[(size_t) p.maker[(size_t) r]] : -1;
        if (bytes == 0 || (mk < 0 && outlives(r))) return;  /* nothing, or in the base */
        if (mk < 0) base -= bytes;
        if (!rows) { add_at_users(us, bytes); return; }
        if (mk >= 0) count_made((size_t) mk, outlives(r) ? every_node() : before_last_use(us));
        else add_at(before_last_use(us), bytes);
    }

    std::vector<uint64_t> every_node() const {
        std::vector<uint64_t> set(anc.words, ~0ull);
        if (pc.nodes.size() % 64) set.back() = (1ull << (pc.nodes.size() % 64)) - 1;
        return set;
    }

    /* the root node k makes, live at `live` once made: surely made at k's descendants */
    void count_made(size_t k, std::vector<uint64_t> live) {
        const uint64_t * d = desc.row(k);
        if (late.empty()) late.resize(pc.nodes.size());
        std::vector<uint64_t> & lt = late[k];
        lt.resize(live.size());
        for (size_t i = 0; i < live.size(); i++) {
            lt[i] = live[i] & ~d[i];
            live[i] &= d[i];
        }
        add_at(live, p.alloc[(size_t) pc.nodes[k]]);
    }

    /* v's result, unless some order lets v work in place */
    void count_own(size_t k) {
        const int v = pc.nodes[k];
        if (p.alloc[(size_t) v] == 0) return;
        for (int e = p.inpl_off[(size_t) v]; e < p.inpl_off[(size_t) v + 1]; e++) {
            const int c = p.inpl[(size_t) e];
            if (outlives(c)) continue;
            if (!rows) return;
            bool used_later = false;
            for (int w : users.at(c)) used_later = used_later || desc.has(k, (size_t) w);
            if (!used_later) return;
        }
        extra[k] += p.alloc[(size_t) v];
    }

    size_t compute() {
        for (const auto & ru : users) count_used_root(ru.first, ru.second);
        for (size_t k = 0; k < pc.nodes.size(); k++) {
            const int r = p.made[(size_t) pc.nodes[k]];
            if (r >= 0 && !users.count(r) && rows) count_made(k, every_node());
            count_own(k);
        }
        size_t top = 0;
        for (size_t e : extra) top = std::max(top, e);
        return base + top;
    }
};

/* Exact search: is there an order of the rest of the piece whose every step stays under
 * `bound`? A depth-first search over the down-sets (the sets of nodes already run),
 * cheapest step first, remembering the sets from which none exists. Such a set fails
 * for every lower bound too, so the memory is kept as the bound tightens (ord_exact_solve).
 * Gives up past max_states remembered sets or the deadline. */
struct ord_exact {
    ord_piece & pc;
    size_t max_states;
    std::unordered_set<std::string> dead;
    std::string key;
    std::vector<int> path;  /* the order found, last node first */
    size_t bound = 0;
    bool aborted = false;
    size_t calls = 0;
    /* per piece node: bytes surely live at its step from the current set on (ord_floor's
     * count, kept current as nodes run); a set where one left is at the bound fails */
    std::vector<size_t> surely;
    const std::vector<std::vector<uint64_t>> * late = nullptr;

    ord_exact(ord_piece & piece, size_t states, const ord_floor * fl)
        : pc(piece), max_states(states), key((pc.nodes.size() + 7) / 8, '\0') {
        if (!fl || !fl->rows) return;
        surely = fl->extra;
        for (size_t & b : surely) b += fl->base;
        if (!fl->late.empty()) late = &fl->late;
    }

    /* v (local k) made its root: it is now surely live where its ancestors could not say */
    void made(size_t k, bool undo) {
        if (!late || (*late)[k].empty()) return;
        const size_t bytes = pc.sim->p->alloc[(size_t) pc.nodes[k]];
        const std::vector<uint64_t> & set = (*late)[k];
        for (size_t i = 0; i < set.size(); i++) {
            for (uint64_t b = set[i]; b; b &= b - 1) {
                size_t & s = surely[i * 64 + (size_t) __builtin_ctzll(b)];
                s = undo ? s - bytes : s + bytes;
            }
        }
    }

    bool doomed() const {
        for (size_t k = 0; k < surely.size(); k++) if (!done(k) && surely[k] >= bound) return true;
        return false;
    }

    bool done(size_t k) const { return (key[k / 8] >> (k % 8)) & 1; }
    void flip(size_t k) { key[k / 8] = (char) (key[k / 8] ^ (1 << (k % 8))); }

    /* the ready nodes under the bound, cheapest step first; a lone one that adds nothing if any */
    void ready(std::vector<std::pair<size_t, int>> & out) const {
        out.clear();
        for (size_t k = 0; k < pc.nodes.size(); k++) {
            const int v = pc.nodes[k];
            if (done(k) || pc.sim->waiting[(size_t) v] != 0) continue;
            const size_t step = pc.sim->step_bytes(v);
            if (step >= bound) continue;
            if (step == pc.sim->mem) { out.assign(1, {step, v}); return; }
            out.push_back({step, v});
        }
        std::sort(out.begin(), out.end());
    }

    bool reach(size_t n_left) {
        if (n_left == 0) return true;
        if (dead.count(key)) return false;
        if (dead.size() >= max_states || ((++calls & 255) == 0 && std::chrono::steady_clock::now() > pc.deadline)) {
            aborted = true;
            return false;
        }
        std::vector<std::pair<size_t, int>> cand;
        if (!doomed()) ready(cand);
        for (const auto & c : cand) {
            const int v = c.second;
            const size_t k = (size_t) pc.local[(size_t) v];
            pc.sim->run(v);
            flip(k);
            made(k, false);
            const bool ok = reach(n_left - 1);
            made(k, true);
            flip(k);
            pc.sim->undo(v);
            if (ok) { path.push_back(v); return true; }
            if (aborted) return false;
        }
        dead.insert(key);
        return false;
    }
};

/* Tightens `peak` (the piece's best so far, `order` its order) until no order is lower;
 * false when the search gave up first (order and peak keep the best found). */
static bool ord_exact_solve(ord_piece & pc, size_t max_states, std::vector<int> & order, size_t & peak) {
    ord_floor fl(pc);
    fl.compute();
    ord_exact ex(pc, max_states, &fl);
    for (;;) {
        if (peak <= pc.enough) return peak <= pc.floor;
        ex.bound = peak;
        ex.path.clear();
        if (!ex.reach(pc.nodes.size())) return !ex.aborted;
        order.assign(ex.path.rbegin(), ex.path.rend());
        peak = pc.sim->peak_of(order);
    }
}

/* How a greedy order ranks the ready nodes (smaller first). */
enum ord_rule { ORD_RULE_PEAK_THEN_NET, ORD_RULE_NET_THEN_STEP, ORD_RULE_STEP_THEN_NET, ORD_RULE_RANDOM_NET };

static std::vector<int> ord_greedy(ord_piece & pc, ord_rule rule, std::mt19937 & rng) {
    ord_sim & sim = *pc.sim;
    std::vector<int> out, ready;
    for (int v : pc.nodes) if (sim.waiting[(size_t) v] == 0) ready.push_back(v);
    size_t peak = 0;
    while (!ready.empty()) {
        size_t pick = 0;
        uint64_t best_a = UINT64_MAX, best_b = UINT64_MAX, best_c = UINT64_MAX;
        for (size_t k = 0; k < ready.size(); k++) {
            const int v = ready[k];
            if (sim.step_bytes(v) == sim.mem) { pick = k; break; }
            const size_t before = sim.mem;
            const size_t step = sim.run(v);
            const size_t after = sim.mem;
            sim.undo(v);
            /* net change, biased so that freeing sorts first and stays unsigned */
            const uint64_t net = (uint64_t) after + (UINT64_MAX / 2) - (uint64_t) before;
            uint64_t a = 0, b = 0;
            switch (rule) {
                case ORD_RULE_PEAK_THEN_NET: a = std::max(peak, step); b = net; break;
                case ORD_RULE_NET_THEN_STEP: a = net; b = step; break;
                case ORD_RULE_STEP_THEN_NET: a = step; b = net; break;
                case ORD_RULE_RANDOM_NET:    a = std::max(peak, step); b = net / 4096 * 4096 + (rng() & 4095); break;
            }
            const uint64_t c = (uint64_t) pc.local[(size_t) v];
            if (a < best_a || (a == best_a && (b < best_b || (b == best_b && c < best_c)))) {
                best_a = a; best_b = b; best_c = c; pick = k;
            }
        }
        const int v = ready[pick];
        ready[pick] = ready.back();
        ready.pop_back();
        peak = std::max(peak, sim.run(v));
        out.push_back(v);
        for (int k = sim.p->succ_off[(size_t) v]; k < sim.p->succ_off[(size_t) v + 1]; k++) {
            const int s = sim.p->succ[(size_t) k];
            if (sim.waiting[(size_t) s] == 0 && pc.local[(size_t) s] >= 0) ready.push_back(s);
        }
    }
    for (size_t k = out.size(); k-- > 0;) sim.undo(out[k]);
    return out;
}

/* A move for the local search that one-node moves cannot make step by step: v with its
 * feeders (ancestors that feed nothing but v and each other: its producer chain) or its
 * dependants (descendants fed by nothing but v and each other) goes elsewhere as a block,
 * so a producer chain runs just before its consumer, or a consumer right after v. */
struct ord_block_move {
    const ord_piece & pc;
    const ord_problem & p;
    std::vector<char> in;    /* per node: in the block */
    std::vector<int> block;  /* in the current order */
    std::vector<int> rest;

    explicit ord_block_move(const ord_piece & piece) : pc(piece), p(*piece.sim->p), in((size_t) piece.sim->p->n, 0) {}

    void gather(int v, bool feeders) {
        const std::vector<int> & off = feeders ? p.pred_off : p.succ_off, & adj = feeders ? p.pred : p.succ;
        const std::vector<int> & back_off = feeders ? p.succ_off : p.pred_off, & back = feeders ? p.succ : p.pred;
        block.assign(1, v);
        in[(size_t) v] = 1;
        for (size_t i = 0; i < block.size() && block.size() < 64; i++) {
            const int b = block[i];
            for (int e = off[(size_t) b]; e < off[(size_t) b + 1]; e++) {
                const int u = adj[(size_t) e];
                if (pc.local[(size_t) u] < 0 || in[(size_t) u]) continue;
                bool only_block = true;
                for (int f = back_off[(size_t) u]; f < back_off[(size_t) u + 1] && only_block; f++) only_block = in[(size_t) back[(size_t) f]];
                if (!only_block) continue;
                block.push_back(u);
                in[(size_t) u] = 1;
            }
        }
    }

    /* the block's place in `rest` if node u (not in it) keeps its place */
    int rest_index(const std::vector<int> & pos, int u) const {
        int before = 0;
        for (int b : block) before += pos[(size_t) b] < pos[(size_t) u];
        return pos[(size_t) u] - before;
    }

    /* out: order with the block of v moved to a random place within its dependencies;
     * false when there is no other place */
    bool propose(int v, bool feeders, const std::vector<int> & order, const std::vector<int> & pos, std::mt19937 & rng,
                 std::vector<int> & out) {
        gather(v, feeders);
        std::sort(block.begin(), block.end(), [&](int a, int b) { return pos[(size_t) a] < pos[(size_t) b]; });
        rest.clear();
        for (int u : order) if (!in[(size_t) u]) rest.push_back(u);
        int lo = 0, hi = (int) rest.size(), now = -1;
        for (int b : block) {
            for (int e = p.pred_off[(size_t) b]; e < p.pred_off[(size_t) b + 1]; e++) {
                const int u = p.pred[(size_t) e];
                if (pc.local[(size_t) u] >= 0 && !in[(size_t) u]) lo = std::max(lo, rest_index(pos, u) + 1);
            }
            for (int e = p.succ_off[(size_t) b]; e < p.succ_off[(size_t) b + 1]; e++) {
                const int u = p.succ[(size_t) e];
                if (pc.local[(size_t) u] >= 0 && !in[(size_t) u]) hi = std::min(hi, rest_index(pos, u));
            }
        }
        const size_t first = (size_t) pos[(size_t) block[0]];
        if (block.size() > 1 && first + block.size() <= order.size()) {
            bool contiguous = true;
            for (size_t k = 0; k < block.size(); k++) contiguous = contiguous && order[first + k] == block[k];
            if (contiguous) now = (int) first;
        }
        for (int b : block) in[(size_t) b] = 0;
        if (block.size() < 2 || hi < lo || (hi == lo && lo == now)) return false;
        const int at = lo + (int) (rng() % (unsigned) (hi - lo + 1));
        if (at == now) return false;
        out.assign(rest.begin(), rest.begin() + at);
        out.insert(out.end(), block.begin(), block.end());
        out.insert(out.end(), rest.begin() + at, rest.end());
        return true;
    }
};

/* Move one node at a time to another place between its predecessors and successors, or a
 * node's block (ord_block_move); keep moves that lower the peak, or keep it and do not
 * raise the sum of all steps (a slope towards orders that hold less, where the peak alone
 * is flat), until the deadline. */
static size_t ord_local_search(ord_piece & pc, std::vector<int> & order, size_t peak, std::mt19937 & rng) {
    const ord_problem & p = *pc.sim->p;
    const size_t m = order.size();
    if (m < 3) return peak;
    uint64_t area = 0;
    pc.sim->peak_of(order, &area);
    std::vector<int> pos((size_t) p.n, -1), moved;
    for (size_t k = 0; k < m; k++) pos[(size_t) order[k]] = (int) k;
    ord_block_move blocks(pc);
    for (int iter = 0;; iter++) {
        if (peak <= pc.enough || ((iter & 15) == 0 && std::chrono::steady_clock::now() > pc.deadline)) break;
        const int from = (int) (rng() % m);
        const int v = order[(size_t) from];
        if (iter & 1) {
            if (!blocks.propose(v, (iter & 2) != 0, order, pos, rng, moved)) continue;
            uint64_t na = 0;
            const size_t np = pc.sim->peak_of(moved, &na);
            if (np < peak || (np == peak && na <= area)) {
                peak = np;
                area = na;
                order.swap(moved);
                for (size_t k = 0; k < m; k++) pos[(size_t) order[k]] = (int) k;
            }
            continue;
        }
        int lo = 0, hi = (int) m - 1;
        for (int k = p.pred_off[(size_t) v]; k < p.pred_off[(size_t) v + 1]; k++) {
            const int q = pos[(size_t) p.pred[(size_t) k]];
            if (q >= 0) lo = std::max(lo, q + 1);
        }
        for (int k = p.succ_off[(size_t) v]; k < p.succ_off[(size_t) v + 1]; k++) {
            const int q = pos[(size_t) p.succ[(size_t) k]];
            if (q >= 0) hi = std::min(hi, q - 1);
        }
        if (hi <= lo) continue;
        int to = lo + (int) (rng() % (unsigned) (hi - lo + 1));
        if (to == from) continue;
        auto shift = [&](int a, int b) {  /* move the element at a to b */
            if (a < b) std::rotate(order.begin() + a, order.begin() + a + 1, order.begin() + b + 1);
            else std::rotate(order.begin() + b, order.begin() + a, order.begin() + a + 1);
        };
        shift(from, to);
        uint64_t na = 0;
        const size_t np = pc.sim->peak_of(order, &na);
        if (np < peak || (np == peak && na <= area)) {
            peak = np;
            area = na;
            const int a = std::min(from, to), b = std::max(from, to);
            for (int k = a; k <= b; k++) pos[(size_t) order[(size_t) k]] = k;
        } else {
            shift(to, from);
        }
    }
    return peak;
}

struct ord_piece_result { std::vector<int> order; size_t builder_peak, peak; bool exact; };

static ord_piece_result ord_solve_piece(ord_piece & pc, const struct tsr_order_params & prm) {
    ord_piece_result res;
    res.order = pc.nodes;
    res.builder_peak = res.peak = pc.sim->peak_of(pc.nodes);
    res.exact = pc.nodes.size() <= 1 || res.peak <= pc.floor;
    if (res.exact || res.peak <= pc.enough) return res;
    std::mt19937 rng(0x7e55e7a);
    bool first = true;
    for (ord_rule rule : {ORD_RULE_PEAK_THEN_NET, ORD_RULE_NET_THEN_STEP, ORD_RULE_STEP_THEN_NET}) {
        /* the first greedy order always completes (it alone gains most on large graphs);
         * the others count against the budget like the searches, so that a slow floor or
         * a loaded machine does not push the whole call far past it */
        if (!first && std::chrono::steady_clock::now() > pc.deadline) break;
        first = false;
        std::vector<int> o = ord_greedy(pc, rule, rng);
        const size_t pk = pc.sim->peak_of(o);
        if (pk < res.peak) { res.peak = pk; res.order = std::move(o); }
    }
    res.exact = res.peak <= pc.floor;
    if (res.exact || res.peak <= pc.enough) return res;
    if ((int) pc.nodes.size() <= prm.exact_max_nodes && prm.exact_max_states > 0) {
        /* half the piece's time at most: what is left goes to the local search */
        const auto end = pc.deadline, now = std::chrono::steady_clock::now();
        if (end > now) pc.deadline = now + (end - now) / 2;
        res.exact = ord_exact_solve(pc, (size_t) prm.exact_max_states, res.order, res.peak);
        pc.deadline = end;
        if (res.exact) return res;
    }
    if (std::chrono::steady_clock::now() > pc.deadline) return res;
    std::vector<int> o = res.order;
    const size_t pk = ord_local_search(pc, o, res.peak, rng);
    if (pk < res.peak) { res.peak = pk; res.order = std::move(o); }
    return res;
}

/* A stretch of the builder's order solved on its own: a cut (one node), or the nodes
 * between cuts within one run of node buffer ids. */
struct ord_segment { int begin, end; bool cut; };

static std::vector<ord_segment> ord_segments(const ord_problem & p) {
    const std::vector<char> cut = ord_cuts(p);
    std::vector<ord_segment> segs;
    for (int v = 0; v < p.n; v++) {
        const bool new_run = !p.run_id.empty() && v > 0 && p.run_id[(size_t) v] != p.run_id[(size_t) v - 1];
        if (cut[(size_t) v]) segs.push_back({v, v + 1, true});
        else if (segs.empty() || segs.back().cut || new_run) segs.push_back({v, v + 1, false});
        else segs.back().end = v + 1;
    }
    return segs;
}

static void ord_enter(ord_piece & pc, const ord_segment & sg) {
    pc.nodes.clear();
    for (int v = sg.begin; v < sg.end; v++) {
        pc.local[(size_t) v] = (int) pc.nodes.size();
        pc.nodes.push_back(v);
    }
}

static void ord_leave(ord_piece & pc) {
    for (int u : pc.nodes) pc.local[(size_t) u] = -1;
    pc.nodes.clear();
}

/* Each segment's floor (a cut's is its step): the set run before a segment is the same in
 * every order, so the builder's order gives every segment its starting state. */
static std::vector<size_t> ord_segment_floors(const std::vector<ord_segment> & segs, ord_piece & pc) {
    ord_sim & sim = *pc.sim;
    std::vector<size_t> floors;
    for (const ord_segment & sg : segs) {
        if (sg.cut) { floors.push_back(sim.run(sg.begin)); continue; }
        ord_enter(pc, sg);
        floors.push_back(ord_floor(pc).compute());
        for (int v : pc.nodes) sim.run(v);
        ord_leave(pc);
    }
    return floors;
}

/* The best order found for p (node indices in execution order) and its figures. */
static std::vector<int> ord_optimize(const ord_problem & p, const struct tsr_order_params & prm, struct tsr_order_report & rep) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const auto end = t0 + std::chrono::microseconds((int64_t) (std::max(0.0, prm.time_budget_ms) * 1000.0));
    ord_sim sim;
    sim.reset(p);
    ord_piece pc;
    pc.sim = &sim;
    pc.local.assign((size_t) p.n, -1);
    const std::vector<ord_segment> segs = ord_segments(p);
    const std::vector<size_t> floors = ord_segment_floors(segs, pc);
    const size_t floor = floors.empty() ? 0 : *std::max_element(floors.begin(), floors.end());
    sim.reset(p);
    std::vector<int> order;
    order.reserve((size_t) p.n);
    size_t builder = 0, best = 0, inexact_peak = 0;  /* the largest peak of a piece not solved exactly */
    int done = 0;
    rep.n_pieces = 0;
    for (size_t s = 0; s < segs.size(); s++) {
        const ord_segment & sg = segs[s];
        if (sg.cut) {
            const size_t step = sim.run(sg.begin);
            builder = std::max(builder, step);
            best = std::max(best, step);
            order.push_back(sg.begin);
            done++;
            continue;
        }
        ord_enter(pc, sg);
        /* this piece's share of the time left, by size */
        const auto now = clock::now();
        const double share = (double) pc.nodes.size() / (double) std::max(1, p.n - done);
        pc.deadline = now + std::chrono::duration_cast<clock::duration>((end > now ? end - now : clock::duration(0)) * share);
        pc.floor = floors[s];
        pc.enough = std::max(floor, floors[s]);
        ord_piece_result r = ord_solve_piece(pc, prm);
        builder = std::max(builder, r.builder_peak);
        best = std::max(best, r.peak);
        if (!r.exact) inexact_peak = std::max(inexact_peak, r.peak);
        for (int u : r.order) { sim.run(u); order.push_back(u); }
        done += (int) pc.nodes.size();
        ord_leave(pc);
        rep.n_pieces++;
    }
    rep.builder_lower_bound = builder;
    rep.optimized_lower_bound = best;
    rep.any_order_lower_bound = floor;
    /* the pieces at the peak decide it: the others may stop short of their optimum */
    rep.optimal = inexact_peak < best || best <= floor;
    rep.reordered = false;
    for (int k = 0; k < p.n; k++) rep.reordered = rep.reordered || order[(size_t) k] != k;
    rep.ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    return order;
}

/* Puts g's nodes (and their gradients, when it has any) in the given order. */
static void ord_apply(struct tsr_cgraph * g, const std::vector<int> & order) {
    std::vector<struct tsr_tensor *> tmp((size_t) g->n_nodes);
    for (struct tsr_tensor ** arr : {g->nodes, g->grads, g->grad_accs}) {
        if (!arr) continue;
        for (int k = 0; k < g->n_nodes; k++) tmp[(size_t) k] = arr[order[(size_t) k]];
        std::copy(tmp.begin(), tmp.end(), arr);
    }
}

/* Each buffer's lower bound for the nodes run in `order`: the searches count the bytes of
 * all buffers together, but each buffer is sized on its own. */
static std::vector<size_t> ord_buffer_peaks(const ord_problem & p, const std::vector<int> & order) {
    ord_sim sim;
    sim.reset(p);
    std::vector<size_t> mem = p.mem0_buffer, peak = p.mem0_buffer;
    for (int v : order) {
        const size_t a = p.alloc[(size_t) v];
        const size_t b = (size_t) p.node_buffer[(size_t) v];
        if (a && !sim.takes_over(v)) peak[b] = std::max(peak[b], mem[b] + a);
        mem[b] += a;
        for (int k = p.touch_off[(size_t) v]; k < p.touch_off[(size_t) v + 1]; k++) {
            const int r = p.touch[(size_t) k];
            if (sim.left[(size_t) r] == 1 && !p.immortal[(size_t) r]) mem[(size_t) p.root_buffer[(size_t) r]] -= p.root_size[(size_t) r];
        }
        sim.run(v);
    }
    return peak;
}

/* Several buffers: keep the new order only if no buffer's lower bound grows and their
 * sum drops; the report then gives the sums. */
static void ord_check_buffers(const ord_problem & p, std::vector<int> & order, struct tsr_order_report & rep) {
    std::vector<int> builder((size_t) p.n);
    std::iota(builder.begin(), builder.end(), 0);
    const std::vector<size_t> before = ord_buffer_peaks(p, builder), after = ord_buffer_peaks(p, order);
    size_t sum_before = 0, sum_after = 0;
    bool none_grows = true;
    for (int b = 0; b < p.n_buffers; b++) {
        sum_before += before[(size_t) b];
        sum_after += after[(size_t) b];
        none_grows = none_grows && after[(size_t) b] <= before[(size_t) b];
    }
    rep.builder_lower_bound = sum_before;
    if (rep.reordered && none_grows && sum_after < sum_before) {
        rep.optimized_lower_bound = sum_after;
        return;
    }
    rep.reordered = false;
    rep.optimized_lower_bound = sum_before;
    order = builder;
}

/* Reorders g as ga would plan it (node_ids / leaf_ids as reserve_n takes them, or NULL);
 * order receives the permutation applied (empty: none). */
static bool ord_reorder(const gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids,
                        const struct tsr_order_params & prm, std::vector<int> & order) {
    struct tsr_order_report local_rep;
    struct tsr_order_report & rep = prm.report ? *prm.report : local_rep;
    order.clear();
    ord_problem p;
    if (!ord_build(ga, g, node_ids, leaf_ids, p)) return false;
    std::vector<int> o = ord_optimize(p, prm, rep);
    if (node_ids || leaf_ids || p.n_buffers > 1) ord_check_buffers(p, o, rep);
    if (!rep.reordered) return true;
    ord_apply(g, o);
    order = std::move(o);
    return true;
}

/* gallocr at reserve (ga_reserve): reorder when asked to. With node buffer ids only
 * within each run of equal ids, so the caller's ids still name each node's buffer and a
 * scheduler's splits keep their nodes. */
static bool ga_reorder_for_reserve(gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids) {
    ga->order_perm.clear();
    ga->order_key.clear();
    if (!ga->order_enabled) return true;
    ga_keyer k;
    k.out = &ga->order_key;
    k.cmp = nullptr;
    ga_key_graph(k, ga, g, node_ids, leaf_ids);
    if (!ord_reorder(ga, g, node_ids, leaf_ids, ga->order_params, ga->order_perm)) return false;
    if (ga->order_perm.empty()) ga->order_key.clear();
    return true;
}

} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_order_params tsr_order_default_params(void) {
    struct tsr_order_params p;
    p.time_budget_ms = 20.0;
    p.exact_max_nodes = 200;
    p.exact_max_states = 200000;
    p.buft = nullptr;
    p.report = nullptr;
    return p;
}

TSR_API_IMPL bool tsr_graph_optimize_order(struct tsr_cgraph * graph, const struct tsr_order_params * params) {
    if (!graph) return tsr_set_error("tsr_graph_optimize_order: graph is NULL");
    if (graph->n_nodes < 0) return tsr_set_error("tsr_graph_optimize_order: graph has %d nodes", graph->n_nodes);
    const struct tsr_order_params prm = params ? *params : tsr_order_default_params();
    if (prm.exact_max_nodes < 0 || prm.exact_max_states < 0 || !(prm.time_budget_ms >= 0)) {
        return tsr_set_error("tsr_graph_optimize_order: bad params: time_budget_ms %g, exact_max_nodes %d, exact_max_states %d "
                             "(none may be negative)", prm.time_budget_ms, prm.exact_max_nodes, prm.exact_max_states);
    }
    try {
        tsr_impl::gallocr ga;
        ga.bufts.assign(1, prm.buft ? prm.buft : tsr_backend_cpu_buffer_type());
        ga.buffers.assign(1, nullptr);
        std::vector<int> order;
        return tsr_impl::ord_reorder(&ga, graph, nullptr, nullptr, prm, order);
    } catch (...) {
        return tsr_set_error("tsr_graph_optimize_order: out of memory for a graph of %d nodes", graph->n_nodes);
    }
}

TSR_API_IMPL bool tsr_gallocr_set_optimize_order(tsr_gallocr_t galloc_h, const struct tsr_order_params * params) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (!galloc) return tsr_set_error("tsr_gallocr_set_optimize_order: gallocr is NULL");
    if (params && (params->exact_max_nodes < 0 || params->exact_max_states < 0 || !(params->time_budget_ms >= 0))) {
        return tsr_set_error("tsr_gallocr_set_optimize_order: bad params: time_budget_ms %g, exact_max_nodes %d, "
                             "exact_max_states %d (none may be negative)",
                             params->time_budget_ms, params->exact_max_nodes, params->exact_max_states);
    }
    galloc->order_enabled = params != nullptr;
    if (params) {
        galloc->order_params = *params;
        galloc->order_params.buft = nullptr;  /* gallocr's own buffer type decides the sizes */
    }
    return true;
}
/* ---- include/tessera/impl/plan_export.inl ---- */
/*
 * plan_export.inl - a plan as JSON (every tensor and the totals) and as an SVG picture a
 * person can read: steps on x and offsets on y with numbered ticks, one rectangle per
 * tensor coloured by the kind of op that made it and labelled where the label fits (a
 * hover title always), the lower bound and the planned size marked and captioned, and
 * several plans of one graph (builder order, optimised order) as panels on one scale.
 */

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

TSR_IMPL_NS_BEGIN
namespace {

static void px_escape(FILE * f, const char * s, bool xml) {
    for (; s && *s; s++) {
        const unsigned char c = (unsigned char) *s;
        if (xml) {
            if (c == '<') fputs("&lt;", f);
            else if (c == '>') fputs("&gt;", f);
            else if (c == '&') fputs("&amp;", f);
            else if (c == '"') fputs("&quot;", f);
            else if (c < 0x20) fputc(' ', f);
            else fputc(c, f);
        } else {
            if (c == '"' || c == '\\') { fputc('\\', f); fputc(c, f); }
            else if (c < 0x20) fprintf(f, "\\u%04x", c);
            else fputc(c, f);
        }
    }
}

/* ---- the picture's vocabulary: op kinds and their colours ---- */

enum px_kind { PX_INPUT, PX_MATMUL, PX_CONV, PX_NORM, PX_ATTENTION, PX_ELEMENTWISE, PX_LAYOUT, PX_OTHER, PX_BUFFER, PX_N_KINDS };

struct px_kind_style { const char * name; const char * fill; };

/* Light fills, so the dark labels stay readable on every kind. */
static const px_kind_style px_kind_styles[PX_N_KINDS] = {
    {"input / leaf", "#d0d0d0"},          {"matrix multiply", "#8db4e2"},  {"conv / pool / resize", "#f7b267"},
    {"normalisation", "#a8d5a2"},         {"softmax / attention / rope", "#f29e9e"},
    {"element-wise", "#ffe08a"},          {"copy / concat / layout", "#c3b1e1"},
    {"other op", "#e3b5cf"},              {"trace buffer", "#9fd3d9"},
};

static px_kind px_kind_of(const struct tsr_tensor * t) {
    if (!t) return PX_BUFFER;
    switch (t->op) {
        case TSR_OP_NONE: return PX_INPUT;
        case TSR_OP_MUL_MAT: case TSR_OP_OUT_PROD: return PX_MATMUL;
        case TSR_OP_CONV_2D: case TSR_OP_IM2COL: case TSR_OP_POOL_2D: case TSR_OP_UPSCALE: case TSR_OP_PAD: return PX_CONV;
        case TSR_OP_NORM: case TSR_OP_RMS_NORM: case TSR_OP_GROUP_NORM: return PX_NORM;
        case TSR_OP_SOFT_MAX: case TSR_OP_FLASH_ATTN_EXT: case TSR_OP_DIAG_MASK_INF: case TSR_OP_ROPE: return PX_ATTENTION;
        case TSR_OP_ADD: case TSR_OP_SUB: case TSR_OP_MUL: case TSR_OP_DIV: case TSR_OP_SQR: case TSR_OP_SQRT: case TSR_OP_LOG:
        case TSR_OP_SCALE: case TSR_OP_CLAMP: case TSR_OP_UNARY: case TSR_OP_GLU: return PX_ELEMENTWISE;
        case TSR_OP_DUP: case TSR_OP_CPY: case TSR_OP_CONT: case TSR_OP_CONCAT: case TSR_OP_REPEAT: case TSR_OP_GET_ROWS:
        case TSR_OP_SET_ROWS: case TSR_OP_RESHAPE: case TSR_OP_VIEW: case TSR_OP_PERMUTE: case TSR_OP_TRANSPOSE: return PX_LAYOUT;
        default: return PX_OTHER;
    }
}

/* What a rectangle says: the tensor's name, or its op and shape when it has none. */
static std::string px_label(const struct tsr_plan_tensor & t) {
    if (t.name && *t.name) return t.name;
    if (!t.tensor) return "unnamed";
    std::string s = tsr_op_desc(t.tensor);
    std::transform(s.begin(), s.end(), s.begin(), [](char c) { return (char) tolower((unsigned char) c); });
    int dims = TSR_MAX_DIMS;
    while (dims > 1 && t.tensor->ne[dims - 1] == 1) dims--;
    for (int d = 0; d < dims; d++) s += (d ? "x" : " ") + std::to_string((long long) t.tensor->ne[d]);
    return s;
}

/* ---- axes: round tick steps and byte units ---- */

/* The 1, 2 or 5 times a power of ten nearest above span / target. */
static double px_nice_step(double span, int target) {
    const double raw = span / (double) std::max(1, target);
    const double p = std::pow(10.0, std::floor(std::log10(raw > 0 ? raw : 1.0)));
    for (double m : {1.0, 2.0, 5.0}) if (m * p >= raw) return m * p;
    return 10.0 * p;
}

struct px_unit { double bytes; const char * name; };

/* The largest of B, KiB, MiB, GiB that `bytes` holds at least once. */
static px_unit px_unit_for(double bytes) {
    static const px_unit units[4] = {{1073741824.0, "GiB"}, {1048576.0, "MiB"}, {1024.0, "KiB"}, {1.0, "B"}};
    for (const px_unit & u : units) if (bytes >= u.bytes) return u;
    return units[3];
}

static std::string px_number(double v, int decimals) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.*f", std::max(0, decimals), v);
    return buf;
}

/* "1.50 MiB": three significant digits in the largest unit that fits. */
static std::string px_bytes(double bytes) {
    const px_unit u = px_unit_for(bytes);
    const double v = bytes / u.bytes;
    return px_number(v, u.bytes == 1.0 ? 0 : v >= 100 ? 0 : v >= 10 ? 1 : 2) + " " + u.name;
}

static int px_decimals(double step) { return step >= 1.0 ? 0 : (int) std::ceil(-std::log10(step) - 1e-9); }

/* ---- layout ---- */

struct px_layout {
    double left = 86, plot_w = 1000, right = 170;  /* right: the captions of the bound lines */
    double legend_h = 0, panel_top = 34, plot_h = 330, panel_bottom = 52;
    double y_top_bytes = 1;                          /* bytes at the top of every panel's offset axis */
    double tick_bytes = 1;
    px_unit unit = {1.0, "B"};
    double width() const { return left + plot_w + right; }
    double panel_h() const { return panel_top + plot_h + panel_bottom; }
    double plot_y(int panel) const { return legend_h + panel * panel_h() + panel_top; }
    double y_of(int panel, double bytes) const { return plot_y(panel) + plot_h - plot_h * bytes / y_top_bytes; }
};

static const double px_char_w = 5.9;     /* width of one character of the 10 px labels */
static const double px_min_h = 2.5;      /* tiny tensors stay visible */

static void px_text(FILE * f, double x, double y, const char * cls, const char * anchor, int size, const std::string & s) {
    fprintf(f, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\">", cls, x, y, size, anchor);
    px_escape(f, s.c_str(), true);
    fputs("</text>\n", f);
}

/* The kinds present, left to right, then the two bound lines. */
static void px_write_legend(FILE * f, const px_layout & L, const bool (&present)[PX_N_KINDS]) {
    fputs("<g class=\"legend\">\n", f);
    double x = L.left, y = 20;
    auto advance = [&](double w) {
        if (x + w > L.width() - 10) { x = L.left; y += 18; }
        const double at = x;
        x += w;
        return at;
    };
    for (int k = 0; k < PX_N_KINDS; k++) {
        if (!present[k]) continue;
        const std::string name = px_kind_styles[k].name;
        const double at = advance(24 + px_char_w * 1.1 * (double) name.size() + 18);
        fprintf(f, "<rect class=\"legend-swatch\" x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"11\" fill=\"%s\" stroke=\"#555\" stroke-width=\"0.5\"/>\n",
                at, y - 9, px_kind_styles[k].fill);
        px_text(f, at + 21, y, "legend-label", "start", 11, name);
    }
    double at = advance(150);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>\n", at, y - 4, at + 18, y - 4);
    px_text(f, at + 23, y, "legend-label", "start", 11, "lower bound");
    at = advance(150);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1f3a93\" stroke-width=\"1.5\"/>\n", at, y - 4, at + 18, y - 4);
    px_text(f, at + 23, y, "legend-label", "start", 11, "planned size");
    fputs("</g>\n", f);
}

static void px_write_axes(FILE * f, const px_layout & L, int panel, int n_steps) {
    const double x0 = L.left, y0 = L.plot_y(panel), w = L.plot_w, h = L.plot_h;
    fprintf(f, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"#888\" stroke-width=\"0.8\"/>\n", x0, y0, w, h);
    /* offsets: one unit for every panel, ticks on round numbers of it */
    fputs("<g class=\"axis-y\">\n", f);
    const int ydec = px_decimals(L.tick_bytes / L.unit.bytes);
    for (double b = 0; b <= L.y_top_bytes * (1 + 1e-9); b += L.tick_bytes) {
        const double y = L.y_of(panel, b);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\" stroke-width=\"0.6\"/>\n", x0, y, x0 + w, y);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\"/>\n", x0 - 5, y, x0, y);
        px_text(f, x0 - 8, y + 3.5, "tick-y", "end", 10, px_number(b / L.unit.bytes, ydec) + " " + L.unit.name);
    }
    fprintf(f, "<text class=\"axis-label\" x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">offset in the buffer</text>\n",
            x0 - 64, y0 + h / 2, x0 - 64, y0 + h / 2);
    fputs("</g>\n<g class=\"axis-x\">\n", f);
    /* steps: a column per step, ticks at its middle */
    const double sw = w / (double) std::max(1, n_steps);
    const int every = std::max(1, (int) px_nice_step((double) n_steps, 20));
    for (int s = 0; s < n_steps; s += every) {
        const double x = x0 + sw * ((double) s + 0.5);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\"/>\n", x, y0 + h, x, y0 + h + 5);
        px_text(f, x, y0 + h + 17, "tick-x", "middle", 10, std::to_string(s));
    }
    px_text(f, x0 + w / 2, y0 + h + 36, "axis-label", "middle", 11, "step (node in execution order)");
    fputs("</g>\n", f);
}

/* The longest prefix of label (with "..") that fits width, or "" when too little does. */
static std::string px_fit(const std::string & label, double width) {
    const size_t chars = (size_t) std::max(0.0, (width - 4) / px_char_w);
    if (label.size() <= chars) return label;
    if (chars < 5) return "";
    return label.substr(0, chars - 2) + "..";
}

/* One tensor: a group with its hover title, its rectangle and its label where it fits.
 * A tensor taken over in place ends, and its successor starts, in the middle of the
 * step they share, so neither hides the other. */
static void px_write_tensor(FILE * f, const px_layout & L, int panel, const struct tsr_plan & plan, int i, bool taken_over) {
    const struct tsr_plan_tensor & t = plan.tensors[i];
    const double sw = L.plot_w / (double) std::max(1, plan.n_steps);
    const double x1 = L.left + sw * ((double) t.first + (t.inplace ? 0.5 : 0.0));
    const double x2 = L.left + sw * ((double) t.last + (taken_over ? 0.5 : 1.0));
    const double ybot = L.y_of(panel, (double) t.offset);
    const double h = std::max(px_min_h, ybot - L.y_of(panel, (double) (t.offset + t.size)));
    const double w = std::max(1.0, x2 - x1);
    const std::string label = px_label(t);
    const px_kind kind = px_kind_of(t.tensor);
    fprintf(f, "<g class=\"tensor\" data-index=\"%d\"><title>", i);
    px_escape(f, label.c_str(), true);
    if (t.tensor && t.name && *t.name) fprintf(f, " (%s)", tsr_op_desc(t.tensor));
    fprintf(f, ": %s at offset %zu, %zu bytes, live at steps %d-%d%s</title>\n", px_bytes((double) t.size).c_str(), t.offset, t.size,
            t.first, t.last, t.inplace ? ", in place of a dying operand" : "");
    fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"0.6\"/>\n", x1,
            ybot - h, w, h, px_kind_styles[kind].fill);
    const std::string shown = h >= 12 ? px_fit(label, w) : "";
    if (!shown.empty()) px_text(f, x1 + 2, ybot - h / 2 + 3.5, "label", "start", 10, shown);
    fputs("</g>\n", f);
}

/* A horizontal line across the plot with its caption in the right margin. */
static void px_write_bound(FILE * f, const px_layout & L, int panel, const char * cls, const char * stroke, const char * dash,
                           size_t bytes, const std::string & caption, double caption_dy) {
    const double y = L.y_of(panel, (double) bytes);
    fprintf(f, "<g class=\"%s\"><line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"1.5\"%s/>\n", cls,
            L.left, y, L.left + L.plot_w + 6, y, stroke, dash);
    fprintf(f, "<text x=\"%.1f\" y=\"%.2f\" font-size=\"11\" fill=\"%s\">", L.left + L.plot_w + 9, y + caption_dy, stroke);
    px_escape(f, caption.c_str(), true);
    fputs("</text></g>\n", f);
}

static void px_write_panel(FILE * f, const px_layout & L, int panel, const struct tsr_plan_panel & pp, int buffer_id) {
    const struct tsr_plan & plan = *pp.plan;
    const struct tsr_plan_buffer & pb = plan.buffers[buffer_id];
    fprintf(f, "<g class=\"panel\" id=\"panel-%d\">\n", panel);
    std::string caption = pp.caption && *pp.caption ? std::string(pp.caption) + ": " : std::string();
    caption += "planned " + px_bytes((double) pb.planned_size) + ", lower bound " + px_bytes((double) pb.lower_bound) + ", " +
               std::to_string(plan.n_steps) + " steps";
    if (plan.n_buffers > 1) caption += " (buffer " + std::to_string(buffer_id) + ")";
    fprintf(f, "<text class=\"panel-caption\" x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\">", L.left, L.plot_y(panel) - 12);
    px_escape(f, caption.c_str(), true);
    fputs("</text>\n", f);
    px_write_axes(f, L, panel, plan.n_steps);
    std::vector<char> taken_over((size_t) plan.n_tensors, 0);
    for (int i = 0; i < plan.n_tensors; i++) {
        const int of = plan.tensors[i].inplace_of;
        if (of >= 0 && of < plan.n_tensors) taken_over[(size_t) of] = 1;
    }
    for (int i = 0; i < plan.n_tensors; i++) {
        if (plan.tensors[i].buffer_id == buffer_id) px_write_tensor(f, L, panel, plan, i, taken_over[(size_t) i] != 0);
    }
    /* both captions stay readable when the lines (nearly) coincide */
    const double gap = L.y_of(panel, (double) pb.lower_bound) - L.y_of(panel, (double) pb.planned_size);
    const bool close = gap < 13;
    px_write_bound(f, L, panel, "planned", "#1f3a93", "", pb.planned_size, "planned " + px_bytes((double) pb.planned_size),
                   close ? -4.0 : 4.0);
    px_write_bound(f, L, panel, "lower-bound", "#c00", " stroke-dasharray=\"5 3\"", pb.lower_bound,
                   "lower bound " + px_bytes((double) pb.lower_bound), close ? 12.0 + gap : 4.0);
    fputs("</g>\n", f);
}

/* One scale for every panel: room above the largest planned size, so no line sits on
 * the frame. */
static px_layout px_layout_for(const struct tsr_plan_panel * panels, int n, int buffer_id, bool (&present)[PX_N_KINDS]) {
    px_layout L;
    double top = 1;
    for (int p = 0; p < n; p++) {
        const struct tsr_plan & plan = *panels[p].plan;
        top = std::max(top, (double) std::max(plan.buffers[buffer_id].planned_size, plan.buffers[buffer_id].lower_bound));
        for (int i = 0; i < plan.n_tensors; i++) {
            if (plan.tensors[i].buffer_id == buffer_id) present[px_kind_of(plan.tensors[i].tensor)] = true;
        }
    }
    L.unit = px_unit_for(top);
    L.tick_bytes = px_nice_step(top * 1.08 / L.unit.bytes, 6) * L.unit.bytes;  /* round in the unit shown */
    if (L.unit.bytes == 1.0) L.tick_bytes = std::max(1.0, std::round(L.tick_bytes));
    L.y_top_bytes = std::ceil(top * 1.08 / L.tick_bytes) * L.tick_bytes;
    int kinds = 0;
    for (bool k : present) kinds += k;
    L.legend_h = 36 + 18 * (double) ((kinds + 2) / 6);
    return L;
}

static bool px_check_panels(const struct tsr_plan_panel * panels, int n, int buffer_id) {
    if (!panels || n < 1) return tsr_set_error("tsr_plan_write_svg_panels: no panels (panels %p, n_panels %d)", (const void *) panels, n);
    for (int p = 0; p < n; p++) {
        const struct tsr_plan * plan = panels[p].plan;
        if (!plan) return tsr_set_error("tsr_plan_write_svg_panels: panel %d has no plan", p);
        if (buffer_id < 0 || buffer_id >= plan->n_buffers) {
            return tsr_set_error("tsr_plan_write_svg: buffer %d does not exist (plan of panel %d has %d)", buffer_id, p, plan->n_buffers);
        }
    }
    return true;
}

} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_plan_write_json(const struct tsr_plan * plan, FILE * out) {
    if (!plan || !out) return tsr_set_error("tsr_plan_write_json: NULL plan or file");
    fprintf(out, "{\n  \"n_steps\": %d,\n  \"buffers\": [", plan->n_steps);
    for (int b = 0; b < plan->n_buffers; b++) {
        const struct tsr_plan_buffer & pb = plan->buffers[b];
        fprintf(out, "%s\n    {\"id\": %d, \"planned_size\": %zu, \"lower_bound\": %zu, \"no_reuse_size\": %zu, \"alignment\": %zu}",
                b ? "," : "", b, pb.planned_size, pb.lower_bound, pb.no_reuse_size, pb.alignment);
    }
    fprintf(out, "\n  ],\n  \"tensors\": [");
    for (int i = 0; i < plan->n_tensors; i++) {
        const struct tsr_plan_tensor & t = plan->tensors[i];
        fprintf(out, "%s\n    {\"name\": \"", i ? "," : "");
        tsr_impl::px_escape(out, t.name, false);
        fprintf(out, "\", \"buffer\": %d, \"offset\": %zu, \"size\": %zu, \"first\": %d, \"last\": %d, \"inplace_of\": %d}",
                t.buffer_id, t.offset, t.size, t.first, t.last, t.inplace_of);
    }
    fprintf(out, "\n  ]\n}\n");
    if (ferror(out)) return tsr_set_error("tsr_plan_write_json: write error");
    return true;
}

TSR_API_IMPL bool tsr_plan_write_svg_panels(const struct tsr_plan_panel * panels, int n_panels, int buffer_id, FILE * out) {
    if (!out) return tsr_set_error("tsr_plan_write_svg_panels: NULL file");
    if (!tsr_impl::px_check_panels(panels, n_panels, buffer_id)) return false;
    try {
        bool present[tsr_impl::PX_N_KINDS] = {};
        const tsr_impl::px_layout L = tsr_impl::px_layout_for(panels, n_panels, buffer_id, present);
        const double H = L.legend_h + n_panels * L.panel_h();
        fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n",
                L.width(), H, L.width(), H);
        fprintf(out, "<rect width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n", L.width(), H);
        tsr_impl::px_write_legend(out, L, present);
        for (int p = 0; p < n_panels; p++) tsr_impl::px_write_panel(out, L, p, panels[p], buffer_id);
        fputs("</svg>\n", out);
    } catch (...) {
        return tsr_set_error("tsr_plan_write_svg_panels: out of memory");
    }
    if (ferror(out)) return tsr_set_error("tsr_plan_write_svg: write error");
    return true;
}

TSR_API_IMPL bool tsr_plan_write_svg(const struct tsr_plan * plan, int buffer_id, FILE * out) {
    if (!plan || !out) return tsr_set_error("tsr_plan_write_svg: NULL plan or file");
    const struct tsr_plan_panel panel = {plan, nullptr};
    return tsr_plan_write_svg_panels(&panel, 1, buffer_id, out);
}
#endif
/* ---- include/tessera/gguf.h ---- */
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
/* ---- include/tessera/impl/gguf.inl ---- */
/*
 * impl/gguf.inl - GGUF reader, writer and chunked tensor loader (C++17).
 * Pulled in by gguf.h under TSR_IMPLEMENTATION. See gguf.h for the API.
 *
 * Format (little-endian):
 *   "GGUF" u32 version u64 n_tensors u64 n_kv
 *   n_kv x  { str key, u32 type, value }          str = u64 len + bytes
 *   n_tensors x { str name, u32 n_dims, i64 ne[n_dims], u32 type, u64 offset }
 *   zero padding to `general.alignment` (default 32), then the data section;
 *   each tensor's offset is relative to the data section and aligned.
 *
 * Every count and length read from the file is checked against the bytes left before
 * anything is allocated, and everything a parse keeps (metadata, tensor headers of the
 * context, tensor data) is charged against a budget of 4 x the file size + 64 MiB first,
 * in every loading mode, so every mode accepts and rejects the same files.
 */
#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#define TSR_GGUF_POSIX_IO 1  /* pread for loading, mmap for mapping */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif


TSR_IMPL_NS_BEGIN
namespace gguf_detail {

struct kv {
    std::string key;
    tsr_gguf_type type = TSR_GGUF_TYPE_UINT8;
    tsr_gguf_type arr_type = TSR_GGUF_TYPE_UINT8;   /* for arrays */
    size_t n = 0;                                   /* array elements (1 for scalars) */
    std::vector<uint8_t> data;                      /* scalar or array of scalars, raw */
    std::vector<std::string> strs;                  /* string value (1) or string array */
};

struct tinfo {
    std::string name;
    tsr_type type = TSR_TYPE_F32;
    int n_dims = 1;
    int64_t ne[TSR_MAX_DIMS] = {1, 1, 1, 1};
    uint64_t offset = 0;   /* relative to the data section */
    size_t size = 0;       /* bytes (unpadded) */
    const tsr_tensor * src = nullptr;  /* writer: tensor to read data from */
    const void * data = nullptr;       /* host data, when known */
};

static inline size_t type_size(tsr_gguf_type t) {
    switch (t) {
        case TSR_GGUF_TYPE_UINT8: case TSR_GGUF_TYPE_INT8: case TSR_GGUF_TYPE_BOOL: return 1;
        case TSR_GGUF_TYPE_UINT16: case TSR_GGUF_TYPE_INT16: return 2;
        case TSR_GGUF_TYPE_UINT32: case TSR_GGUF_TYPE_INT32: case TSR_GGUF_TYPE_FLOAT32: return 4;
        case TSR_GGUF_TYPE_UINT64: case TSR_GGUF_TYPE_INT64: case TSR_GGUF_TYPE_FLOAT64: return 8;
        default: return 0;  /* STRING, ARRAY, unknown */
    }
}

static inline bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* n * per, or UINT64_MAX when it does not fit */
static inline uint64_t sat_mul(uint64_t n, uint64_t per) { return per != 0 && n > UINT64_MAX / per ? UINT64_MAX : n * per; }

/* Memory per key/value or tensor info beyond its struct (rounded up, so the budget holds
 * what the allocator really hands out): the duplicate check's hash set node and buckets,
 * the value's heap block with the allocator's header. */
static constexpr uint64_t k_entry_overhead = 128;
/* a string's heap block beyond its characters: the terminator, rounding, the allocator's header */
static constexpr uint64_t k_string_overhead = 32;
static constexpr uint64_t k_budget_slack = (uint64_t) 64 << 20;

/* A bounded little-endian reader over a FILE or a memory block. */
struct reader {
    const char * name = "";
    FILE * f = nullptr;
    const uint8_t * mem = nullptr;
    uint64_t size = 0;
    uint64_t pos = 0;
    uint64_t budget_left = 0;   /* bytes of memory the parse may still commit (set by parse) */

    uint64_t remaining() const { return pos <= size ? size - pos : 0; }

    bool fail(uint64_t at, const char * fmt, ...) const
#if defined(__GNUC__) || defined(__clang__)
        __attribute__((format(printf, 3, 4)))
#endif
    {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        return tsr_set_error("gguf '%s': byte %llu: %s", name, (unsigned long long) at, msg);
    }

    bool raw(void * dst, uint64_t n, const char * what) {
        if (n > remaining()) {
            return fail(pos, "truncated file: %s needs %llu bytes, only %llu left (file size %llu)", what,
                        (unsigned long long) n, (unsigned long long) remaining(), (unsigned long long) size);
        }
        if (n == 0) return true;
        if (mem) {
            memcpy(dst, mem + pos, (size_t) n);
        } else if (fread(dst, 1, (size_t) n, f) != (size_t) n) {
            return fail(pos, "read error while reading %s (%s)", what, strerror(errno));
        }
        pos += n;
        return true;
    }
    template <typename T> bool get(T & v, const char * what) { return raw(&v, sizeof v, what); }

    /* Take `bytes` of memory from the budget before allocating them. */
    bool charge(uint64_t at, uint64_t bytes, const char * what) {
        if (bytes > budget_left) {
            return fail(at, "%s needs %llu bytes of memory, more than the %llu left of this file's parsing budget "
                        "(4 x its size of %llu + 64 MiB)", what, (unsigned long long) bytes,
                        (unsigned long long) budget_left, (unsigned long long) size);
        }
        budget_left -= bytes;
        return true;
    }

    bool str(std::string & s, const char * what) {
        uint64_t at = pos, len = 0;
        if (!get(len, what)) return false;
        if (len > remaining()) {
            return fail(at, "%s: string length %llu exceeds the %llu bytes left in the file", what,
                        (unsigned long long) len, (unsigned long long) remaining());
        }
        if (!charge(at, len + k_string_overhead, what)) return false;
        try { s.resize((size_t) len); } catch (...) { return fail(at, "%s: out of memory for %llu bytes", what, (unsigned long long) len); }
        return raw(len ? &s[0] : nullptr, len, what);
    }
};

static inline const char * type_name(tsr_gguf_type t) {
    static const char * names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"};
    return (unsigned) t < TSR_GGUF_TYPE_COUNT ? names[t] : "unknown";
}

/* Names of ggml tensor types tessera does not implement (for error messages). */
static inline const char * ggml_type_name(uint32_t t) {
    switch (t) {
        case 3: return "Q4_1"; case 6: return "Q5_0"; case 7: return "Q5_1"; case 9: return "Q8_1";
        case 10: return "Q2_K"; case 11: return "Q3_K"; case 12: return "Q4_K"; case 13: return "Q5_K";
        case 14: return "Q6_K"; case 15: return "Q8_K"; case 16: return "IQ2_XXS"; case 17: return "IQ2_XS";
        case 18: return "IQ3_XXS"; case 19: return "IQ1_S"; case 20: return "IQ4_NL"; case 21: return "IQ3_S";
        case 22: return "IQ2_S"; case 23: return "IQ4_XS"; case 24: return "I8"; case 25: return "I16";
        case 27: return "I64"; case 28: return "F64"; case 29: return "IQ1_M"; case 34: return "TQ1_0";
        case 35: return "TQ2_0"; case 39: return "MXFP4";
        default: return nullptr;
    }
}

/* Read one value (or array) of `type` into kv. */
static inline bool read_value(reader & r, kv & e, tsr_gguf_type type, const char * key) {
    char what[160];
    snprintf(what, sizeof what, "value of key '%.100s'", key);
    if (type == TSR_GGUF_TYPE_STRING) {
        e.n = 1;
        e.strs.resize(1);
        return r.str(e.strs[0], what);
    }
    if (type == TSR_GGUF_TYPE_ARRAY) {
        uint64_t at = r.pos;
        uint32_t at_type = 0;
        uint64_t n = 0;
        if (!r.get(at_type, what)) return false;
        if (at_type == TSR_GGUF_TYPE_ARRAY) return r.fail(at, "key '%s': arrays of arrays are not supported", key);
        if (at_type >= TSR_GGUF_TYPE_COUNT) return r.fail(at, "key '%s': unknown array element type %u", key, at_type);
        e.arr_type = (tsr_gguf_type) at_type;
        at = r.pos;
        if (!r.get(n, what)) return false;
        const uint64_t min_elem = at_type == TSR_GGUF_TYPE_STRING ? 8 : type_size(e.arr_type);
        if (n > r.remaining() / min_elem) {
            return r.fail(at, "key '%s': array of %llu %s elements needs at least %llu bytes per element, only %llu bytes left",
                          key, (unsigned long long) n, type_name(e.arr_type), (unsigned long long) min_elem,
                          (unsigned long long) r.remaining());
        }
        e.n = (size_t) n;
        const uint64_t elem_mem = at_type == TSR_GGUF_TYPE_STRING ? sizeof(std::string) : min_elem;
        if (!r.charge(at, sat_mul(n, elem_mem), what)) return false;
        if (at_type == TSR_GGUF_TYPE_STRING) {
            e.strs.resize(e.n);
            for (size_t i = 0; i < e.n; ++i) {
                if (!r.str(e.strs[i], what)) return false;
            }
            return true;
        }
        e.data.resize(e.n * min_elem);
        return r.raw(e.data.data(), e.data.size(), what);
    }
    const size_t sz = type_size(type);
    e.n = 1;
    e.data.resize(sz);
    return r.raw(e.data.data(), sz, what);
}

/* bytes of a tensor with this type and shape; false on a ragged row or when its size or a
 * stride of its contiguous layout overflows (a dimension of 0 empties the tensor but does
 * not shorten the strides tsr_new_tensor computes from the others) */
static inline bool tensor_bytes(tsr_type type, const int64_t * ne, size_t & out) {
    const int64_t bs = tsr_blck_size(type);
    const size_t ts = tsr_type_size(type);
    if (bs <= 0 || ts == 0 || ne[0] % bs != 0) return false;
    uint64_t extent = ts;  /* the product with every dimension counted as at least 1 */
    bool empty = false;
    for (int i = 0; i < TSR_MAX_DIMS; ++i) {
        const uint64_t n = (uint64_t) (i == 0 ? ne[0] / bs : ne[i]);
        empty = empty || n == 0;
        if (n > 1 && extent > (uint64_t) SIZE_MAX / n) return false;
        extent *= n > 1 ? n : 1;
    }
    out = empty ? 0 : (size_t) extent;
    return true;
}

static inline bool seek(FILE * f, uint64_t off) {
#ifdef _WIN32
    return _fseeki64(f, (long long) off, SEEK_SET) == 0;
#else
    return fseeko(f, (off_t) off, SEEK_SET) == 0;
#endif
}

static inline bool file_size(FILE * f, uint64_t & size) {
#ifdef _WIN32
    if (_fseeki64(f, 0, SEEK_END) != 0) return false;
    long long s = _ftelli64(f);
#else
    if (fseeko(f, 0, SEEK_END) != 0) return false;
    off_t s = ftello(f);
#endif
    if (s < 0) return false;
    size = (uint64_t) s;
    return seek(f, 0);
}

} // namespace gguf_detail

TSR_IMPL_HANDLE(tsr_gguf_context, gguf_ctx)

struct gguf_ctx {
    uint32_t version = TSR_GGUF_VERSION;
    size_t alignment = TSR_GGUF_DEFAULT_ALIGNMENT;
    size_t data_offset = 0;   /* read: where the data section starts in the file */
    bool from_file = false;
    std::vector<gguf_detail::kv> kvs;
    std::vector<gguf_detail::tinfo> infos;
};

namespace gguf_detail {

static inline size_t pad(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* writer: lay tensors out back to back, each padded to the alignment */
static inline void relayout(gguf_ctx * ctx) {
    size_t off = 0;
    for (auto & ti : ctx->infos) {
        ti.offset = off;
        off += pad(ti.size, ctx->alignment);
    }
}

static inline size_t data_size(const gguf_ctx * ctx) {
    size_t end = 0;
    for (auto & ti : ctx->infos) end = std::max(end, (size_t) ti.offset + pad(ti.size, ctx->alignment));
    return end;
}

/* "n * per" for a message, without wrapping: the product, or "more than 2^64". */
struct num_str { char s[32]; };
static inline num_str product_str(uint64_t n, uint64_t per) {
    num_str o;
    if (per != 0 && n > UINT64_MAX / per) snprintf(o.s, sizeof o.s, "more than 2^64");
    else snprintf(o.s, sizeof o.s, "%llu", (unsigned long long) (n * per));
    return o;
}

/* parse, step 1: magic, version and the two counts (each checked against the bytes left). */
static inline bool parse_header(reader & r, gguf_ctx * ctx, uint64_t & n_tensors, uint64_t & n_kv) {
    char magic[4];
    if (!r.raw(magic, 4, "magic")) return false;
    if (memcmp(magic, TSR_GGUF_MAGIC, 4) != 0) {
        return r.fail(0, "bad magic %02x %02x %02x %02x (expected \"GGUF\"): not a GGUF file",
                      (uint8_t) magic[0], (uint8_t) magic[1], (uint8_t) magic[2], (uint8_t) magic[3]);
    }
    uint32_t version = 0;
    if (!r.get(version, "version")) return false;
    if ((version & 0xFFFFu) == 0 && version != 0) {
        return r.fail(4, "version 0x%08x looks byte-swapped: big-endian GGUF files are not supported", version);
    }
    if (version == 1) return r.fail(4, "GGUF version 1 is not supported (only 2 and 3)");
    if (version < 2 || version > TSR_GGUF_VERSION) {
        return r.fail(4, "unsupported GGUF version %u (supported: 2 and 3)", version);
    }
    ctx->version = version;

    const uint64_t at_nt = r.pos;
    if (!r.get(n_tensors, "tensor count")) return false;
    const uint64_t at_nkv = r.pos;
    if (!r.get(n_kv, "key/value count")) return false;
    /* smallest possible kv: key len(8) + 1 byte key + type(4) + 1 byte value */
    if (n_kv > r.remaining() / 14) {
        return r.fail(at_nkv, "key/value count %llu needs at least %s bytes (14 each), only %llu left in the file",
                      (unsigned long long) n_kv, product_str(n_kv, 14).s, (unsigned long long) r.remaining());
    }
    /* smallest possible tensor info: name(8+1) n_dims(4) ne(8) type(4) offset(8) */
    if (n_tensors > r.remaining() / 33) {
        return r.fail(at_nt, "tensor count %llu needs at least %s bytes (33 each), only %llu left in the file",
                      (unsigned long long) n_tensors, product_str(n_tensors, 33).s, (unsigned long long) r.remaining());
    }
    return true;
}

/* parse, step 2: the n_kv key/value pairs (unique, non-empty keys; general.alignment checked). */
static inline bool parse_kvs(reader & r, gguf_ctx * ctx, uint64_t n_kv) {
    if (!r.charge(r.pos, sat_mul(n_kv, sizeof(kv) + k_entry_overhead), "the key/value table")) return false;
    ctx->kvs.reserve((size_t) n_kv);  /* no reallocation below: `seen` may point into the elements */
    std::unordered_set<std::string_view> seen;  /* duplicate check in O(1), not O(n) per key */
    for (uint64_t i = 0; i < n_kv; ++i) {
        kv e;
        const uint64_t at = r.pos;
        if (!r.str(e.key, "key")) return false;
        if (e.key.empty()) return r.fail(at, "key %llu is empty", (unsigned long long) i);
        if (memchr(e.key.data(), 0, e.key.size())) return r.fail(at, "key %llu contains a NUL byte", (unsigned long long) i);
        if (seen.count(std::string_view(e.key))) {
            return r.fail(at, "duplicate key '%s' (key %llu)", e.key.c_str(), (unsigned long long) i);
        }
        uint32_t type = 0;
        const uint64_t at_t = r.pos;
        if (!r.get(type, "value type")) return false;
        if (type >= TSR_GGUF_TYPE_COUNT) return r.fail(at_t, "key '%s': unknown value type %u", e.key.c_str(), type);
        e.type = (tsr_gguf_type) type;
        if (!read_value(r, e, e.type, e.key.c_str())) return false;
        if (e.key == TSR_GGUF_KEY_GENERAL_ALIGNMENT) {
            if (e.type != TSR_GGUF_TYPE_UINT32) return r.fail(at, "general.alignment has type %s, expected u32", type_name(e.type));
            uint32_t a = 0;
            memcpy(&a, e.data.data(), 4);
            if (!is_pow2(a)) return r.fail(at, "general.alignment %u is not a power of two", a);
            ctx->alignment = a;
        }
        ctx->kvs.push_back(std::move(e));
        seen.insert(std::string_view(ctx->kvs.back().key));
    }
    return true;
}

/* parse, step 3 (one tensor): the info of tensor i (name not in seen, shape, type, aligned offset). */
static inline bool parse_tensor_info(reader & r, const gguf_ctx * ctx, uint64_t i,
                                     const std::unordered_set<std::string_view> & seen, tinfo & ti) {
    const uint64_t at = r.pos;
    if (!r.str(ti.name, "tensor name")) return false;
    if (ti.name.empty()) return r.fail(at, "tensor %llu has an empty name", (unsigned long long) i);
    if (ti.name.size() >= TSR_MAX_NAME || memchr(ti.name.data(), 0, ti.name.size())) {
        return r.fail(at, "tensor %llu: name of %zu bytes is longer than %d or contains NUL", (unsigned long long) i,
                      ti.name.size(), TSR_MAX_NAME - 1);
    }
    if (seen.count(std::string_view(ti.name))) {
        return r.fail(at, "duplicate tensor name '%s' (tensor %llu)", ti.name.c_str(), (unsigned long long) i);
    }
    uint32_t n_dims = 0;
    const uint64_t at_nd = r.pos;
    if (!r.get(n_dims, "tensor n_dims")) return false;
    if (n_dims < 1 || n_dims > TSR_MAX_DIMS) {
        return r.fail(at_nd, "tensor '%s': n_dims %u out of range [1, %d]", ti.name.c_str(), n_dims, TSR_MAX_DIMS);
    }
    ti.n_dims = (int) n_dims;
    for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t at_ne = r.pos;
        if (!r.get(ti.ne[d], "tensor dimension")) return false;
        if (ti.ne[d] < 0) return r.fail(at_ne, "tensor '%s': ne[%u] = %lld is negative", ti.name.c_str(), d, (long long) ti.ne[d]);
        if (ti.ne[d] > TSR_IMPL_MAX_NE) {
            return r.fail(at_ne, "tensor '%s': ne[%u] = %lld exceeds the largest dimension %lld (2^56)", ti.name.c_str(), d,
                          (long long) ti.ne[d], (long long) TSR_IMPL_MAX_NE);
        }
    }
    uint32_t type = 0;
    const uint64_t at_ty = r.pos;
    if (!r.get(type, "tensor type")) return false;
    if (type >= (uint32_t) TSR_TYPE_COUNT || !tsr_is_valid_type((tsr_type) type)) {  /* range first: an out-of-range enum value is UB */
        const char * gn = ggml_type_name(type);
        if (gn) {
            return r.fail(at_ty, "tensor '%s': ggml type %u (%s) is not supported by tessera (F32, F16, BF16, I32, Q4_0, Q4_1, Q5_0, Q5_1,"
                          " Q8_0, Q2_K..Q6_K and IQ4_NL are; e.g. re-quantize with llama-quantize to Q4_K_M or Q8_0): unknown tensor type %u", ti.name.c_str(), type, gn, type);
        }
        return r.fail(at_ty, "tensor '%s': unknown tensor type %u", ti.name.c_str(), type);
    }
    ti.type = (tsr_type) type;
    if (!tensor_bytes(ti.type, ti.ne, ti.size)) {
        return r.fail(at_nd, "tensor '%s': shape [%lld, %lld, %lld, %lld] of type %s overflows or has a row not a multiple of the block size %lld",
                      ti.name.c_str(), (long long) ti.ne[0], (long long) ti.ne[1], (long long) ti.ne[2], (long long) ti.ne[3],
                      tsr_type_name(ti.type), (long long) tsr_blck_size(ti.type));
    }
    const uint64_t at_off = r.pos;
    if (!r.get(ti.offset, "tensor offset")) return false;
    if (ti.offset % ctx->alignment != 0) {
        return r.fail(at_off, "tensor '%s': data offset %llu is not a multiple of the alignment %zu", ti.name.c_str(),
                      (unsigned long long) ti.offset, ctx->alignment);
    }
    return true;
}

/* parse, step 3: the n_tensors tensor infos, names unique. */
static inline bool parse_tensor_infos(reader & r, gguf_ctx * ctx, uint64_t n_tensors) {
    /* the headers of the tensors a context would hold are charged in every mode, so a file
     * that loads in one mode loads in all */
    const uint64_t per_tensor = sizeof(tinfo) + k_entry_overhead + tsr_tensor_overhead() + TSR_MEM_ALIGN;
    if (!r.charge(r.pos, sat_mul(n_tensors, per_tensor), "the tensor table")) return false;
    ctx->infos.reserve((size_t) n_tensors);  /* no reallocation below: `seen` points into the elements */
    std::unordered_set<std::string_view> seen;
    for (uint64_t i = 0; i < n_tensors; ++i) {
        tinfo ti;
        if (!parse_tensor_info(r, ctx, i, seen, ti)) return false;
        ctx->infos.push_back(std::move(ti));
        seen.insert(std::string_view(ctx->infos.back().name));
    }
    return true;
}

/* parse, step 4: where the data section starts; every tensor's data inside the file, no two overlapping. */
static inline bool check_data_section(reader & r, gguf_ctx * ctx) {
    ctx->data_offset = (size_t) pad((size_t) r.pos, ctx->alignment);
    if (!ctx->infos.empty() && ctx->data_offset > r.size) {
        return r.fail(r.pos, "the data section of %zu tensors starts at byte %zu (the metadata's end padded to the alignment %zu), "
                      "past the end of the file (size %llu)", ctx->infos.size(), ctx->data_offset, ctx->alignment,
                      (unsigned long long) r.size);
    }
    const uint64_t data_avail = r.size > ctx->data_offset ? r.size - ctx->data_offset : 0;
    for (size_t i = 0; i < ctx->infos.size(); ++i) {
        const tinfo & ti = ctx->infos[i];
        if (ti.offset > data_avail || ti.size > data_avail - ti.offset) {
            /* the offset may be near 2^64: name the size, not an end that would wrap */
            return r.fail(ctx->data_offset > UINT64_MAX - ti.offset ? ctx->data_offset : ctx->data_offset + ti.offset,
                          "tensor '%s': %llu bytes of data at offset %llu (relative to the data section at byte %zu) "
                          "run past the end of the file (size %llu)",
                          ti.name.c_str(), (unsigned long long) ti.size, (unsigned long long) ti.offset,
                          ctx->data_offset, (unsigned long long) r.size);
        }
    }
    /* No two tensors' data may overlap: sweep all ranges in offset order against the
     * furthest end seen so far (not only neighbours: a zero-size tensor between two
     * overlapping ones must not hide them). Every end is inside the file here. */
    std::vector<size_t> order(ctx->infos.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ctx->infos[a].offset < ctx->infos[b].offset; });
    const tinfo * furthest = nullptr;
    for (size_t k : order) {
        const tinfo & b = ctx->infos[k];
        if (b.size == 0) continue;
        if (furthest && b.offset < furthest->offset + furthest->size) {
            const tinfo & a = *furthest;
            return r.fail(ctx->data_offset + b.offset, "tensor '%s' data [%llu, %llu) overlaps tensor '%s' data [%llu, %llu)",
                          b.name.c_str(), (unsigned long long) b.offset, (unsigned long long) (b.offset + b.size),
                          a.name.c_str(), (unsigned long long) a.offset, (unsigned long long) (a.offset + a.size));
        }
        if (!furthest || b.offset + b.size > furthest->offset + furthest->size) furthest = &b;
    }
    /* disjoint and inside the file: the sum cannot overflow */
    uint64_t data_bytes = 0;
    for (const tinfo & ti : ctx->infos) data_bytes += ti.size;
    return r.charge(ctx->data_offset, data_bytes, "the tensor data");
}

/* parse, step 5 (params.ctx): a tsr_context with one tensor per info, holding its data unless
 * no_alloc. tctx is set as soon as it exists (the caller frees it on failure). meta_end: where
 * the metadata ended (the byte errors name). */
static inline bool load_context(reader & r, gguf_ctx * ctx, tsr_gguf_init_params params, uint64_t meta_end,
                                tsr_context *& tctx) {
    size_t mem = (ctx->infos.size() + 1) * tsr_tensor_overhead();
    if (!params.no_alloc) {
        for (auto & ti : ctx->infos) mem += pad(ti.size, TSR_MEM_ALIGN);
    }
    tctx = tsr_init(tsr_init_params{mem, nullptr, params.no_alloc});
    char why[sizeof tsr_impl::g_error];  /* a copy (the next error overwrites it); no std::string: nothing may throw */
    if (!tctx) {
        snprintf(why, sizeof why, "%s", tsr_last_error());
        return r.fail(meta_end, "cannot create a context of %zu bytes for %zu tensors: %s", mem, ctx->infos.size(), why);
    }
    for (auto & ti : ctx->infos) {
        tsr_tensor * t = tsr_new_tensor(tctx, ti.type, TSR_MAX_DIMS, ti.ne);
        if (!t) {
            snprintf(why, sizeof why, "%s", tsr_last_error());
            return r.fail(meta_end, "cannot create tensor '%s': %s", ti.name.c_str(), why);
        }
        tsr_set_name(t, ti.name.c_str());
        if (params.no_alloc) continue;
        if (r.mem) {
            memcpy(t->data, r.mem + ctx->data_offset + ti.offset, ti.size);
        } else {
            r.pos = ctx->data_offset + ti.offset;
            if (!seek(r.f, r.pos)) return r.fail(r.pos, "seek failed");
            char what[128];
            snprintf(what, sizeof what, "data of tensor '%s'", ti.name.c_str());
            if (!r.raw(t->data, ti.size, what)) return false;
        }
        ti.data = t->data;
    }
    return true;
}

static inline gguf_ctx * parse(reader & r, tsr_gguf_init_params params) {
    if (params.ctx) *params.ctx = nullptr;
    gguf_ctx * ctx = nullptr;
    tsr_context * tctx = nullptr;
    try {
        r.budget_left = r.size > (UINT64_MAX - k_budget_slack) / 4 ? UINT64_MAX : 4 * r.size + k_budget_slack;
        ctx = new gguf_ctx();
        ctx->from_file = true;
        uint64_t n_tensors = 0, n_kv = 0;
        bool ok = parse_header(r, ctx, n_tensors, n_kv) && parse_kvs(r, ctx, n_kv) &&
                  parse_tensor_infos(r, ctx, n_tensors);
        const uint64_t meta_end = r.pos;
        ok = ok && check_data_section(r, ctx);
        if (ok && params.ctx) {
            ok = load_context(r, ctx, params, meta_end, tctx);
            if (ok) *params.ctx = tctx;
        } else if (ok && !params.no_alloc && r.mem) {
            for (auto & ti : ctx->infos) ti.data = r.mem + ctx->data_offset + ti.offset;  /* caller's memory */
        }
        if (ok) return ctx;
        delete ctx;
        tsr_free(tctx);
        return nullptr;
    } catch (const std::bad_alloc &) {
        delete ctx;
        tsr_free(tctx);
        if (params.ctx) *params.ctx = nullptr;
        r.fail(r.pos, "out of memory");
        return nullptr;
    } catch (...) {
        delete ctx;
        tsr_free(tctx);
        if (params.ctx) *params.ctx = nullptr;
        r.fail(r.pos, "unexpected error");
        return nullptr;
    }
}

static inline bool check_kv(const gguf_ctx * ctx, int64_t id, tsr_gguf_type want, const char * fn) {
    if (!ctx) return tsr_set_error("%s: NULL gguf context", fn);
    if (id < 0 || id >= (int64_t) ctx->kvs.size()) {
        return tsr_set_error("%s: key id %lld out of range [0, %zu)", fn, (long long) id, ctx->kvs.size());
    }
    const kv & e = ctx->kvs[(size_t) id];
    if (want != TSR_GGUF_TYPE_COUNT && e.type != want) {
        return tsr_set_error("%s: key '%s' has type %s, not %s", fn, e.key.c_str(), type_name(e.type), type_name(want));
    }
    return true;
}

template <typename T>
static inline T get_scalar(const gguf_ctx * ctx, int64_t id, tsr_gguf_type want, const char * fn) {
    T v{};
    if (!check_kv(ctx, id, want, fn)) return v;
    memcpy(&v, ctx->kvs[(size_t) id].data.data(), sizeof v);
    return v;
}

static inline bool check_tensor(const gguf_ctx * ctx, int64_t id, const char * fn) {
    if (!ctx) return tsr_set_error("%s: NULL gguf context", fn);
    if (id < 0 || id >= (int64_t) ctx->infos.size()) {
        return tsr_set_error("%s: tensor id %lld out of range [0, %zu)", fn, (long long) id, ctx->infos.size());
    }
    return true;
}

/* find or append the key's entry (cleared) */
static inline kv * put(gguf_ctx * ctx, const char * key, const char * fn) {
    if (!ctx) { tsr_set_error("%s: NULL gguf context", fn); return nullptr; }
    if (!key || !*key) { tsr_set_error("%s: NULL or empty key", fn); return nullptr; }
    try {
        for (auto & e : ctx->kvs) {
            if (e.key == key) {
                e.data.clear();
                e.strs.clear();
                e.n = 0;
                return &e;
            }
        }
        ctx->kvs.emplace_back();
        try { ctx->kvs.back().key = key; } catch (...) { ctx->kvs.pop_back(); throw; }
        return &ctx->kvs.back();
    } catch (...) {
        tsr_set_error("%s: out of memory", fn);
        return nullptr;
    }
}

/* Remove an entry that put() returned and that could not be filled (out of memory): a
 * half-written value (e.g. a string key with no string) must not stay readable. */
static inline void drop_kv(gguf_ctx * ctx, kv * e) {
    const bool was_align = e->key == TSR_GGUF_KEY_GENERAL_ALIGNMENT;
    ctx->kvs.erase(ctx->kvs.begin() + (e - ctx->kvs.data()));
    if (was_align) {
        ctx->alignment = TSR_GGUF_DEFAULT_ALIGNMENT;
        relayout(ctx);
    }
}

static inline bool set_scalar(gguf_ctx * ctx, const char * key, tsr_gguf_type type, const void * v, const char * fn) {
    const bool is_align = key && strcmp(key, TSR_GGUF_KEY_GENERAL_ALIGNMENT) == 0;
    uint32_t align = 0;
    if (is_align) {
        if (type != TSR_GGUF_TYPE_UINT32) return tsr_set_error("%s: general.alignment must be u32, not %s", fn, type_name(type));
        memcpy(&align, v, 4);
        if (!is_pow2(align)) return tsr_set_error("%s: general.alignment %u is not a power of two", fn, align);
    }
    kv * e = put(ctx, key, fn);
    if (!e) return false;
    try {
        e->type = type;
        e->n = 1;
        e->data.assign((const uint8_t *) v, (const uint8_t *) v + type_size(type));
    } catch (...) { drop_kv(ctx, e); return tsr_set_error("%s: out of memory", fn); }
    if (is_align) {
        ctx->alignment = align;
        relayout(ctx);
    }
    return true;
}

/* buffered writer with sticky error */
/* writes to a FILE or to memory, with a sticky error and a byte count */
struct writer {
    FILE * f = nullptr;
    uint8_t * mem = nullptr;
    size_t pos = 0;
    bool ok = true;
    void raw(const void * p, size_t n) {
        if (!ok || !n) return;
        if (mem) memcpy(mem + pos, p, n);
        else if (fwrite(p, 1, n, f) != n) ok = false;
        pos += n;
    }
    template <typename T> void put(T v) { raw(&v, sizeof v); }
    void str(const std::string & s) { put((uint64_t) s.size()); raw(s.data(), s.size()); }
    void zeros(size_t n) {
        static const uint8_t z[64] = {0};
        while (n) { size_t k = n < 64 ? n : 64; raw(z, k); n -= k; }
    }
};

/* header, metadata, tensor infos, padding to the alignment (= meta_size bytes) */
static inline void write_meta(const gguf_ctx * ctx, writer & w) {
    w.raw(TSR_GGUF_MAGIC, 4);
    w.put((uint32_t) TSR_GGUF_VERSION);
    w.put((uint64_t) ctx->infos.size());
    w.put((uint64_t) ctx->kvs.size());
    for (auto & e : ctx->kvs) {
        w.str(e.key);
        w.put((uint32_t) e.type);
        if (e.type == TSR_GGUF_TYPE_STRING) {
            w.str(e.strs[0]);
        } else if (e.type == TSR_GGUF_TYPE_ARRAY) {
            w.put((uint32_t) e.arr_type);
            w.put((uint64_t) e.n);
            if (e.arr_type == TSR_GGUF_TYPE_STRING) {
                for (auto & s : e.strs) w.str(s);
            } else {
                w.raw(e.data.data(), e.data.size());
            }
        } else {
            w.raw(e.data.data(), e.data.size());
        }
    }
    for (auto & ti : ctx->infos) {
        w.str(ti.name);
        w.put((uint32_t) ti.n_dims);
        for (int d = 0; d < ti.n_dims; ++d) w.put((int64_t) ti.ne[d]);
        w.put((uint32_t) ti.type);
        w.put((uint64_t) ti.offset);
    }
    w.zeros(pad(w.pos, ctx->alignment) - w.pos);
}

static inline size_t meta_size(const gguf_ctx * ctx) {
    size_t s = 4 + 4 + 8 + 8;
    for (auto & e : ctx->kvs) {
        s += 8 + e.key.size() + 4;
        if (e.type == TSR_GGUF_TYPE_ARRAY) s += 4 + 8;
        if (e.type == TSR_GGUF_TYPE_STRING || (e.type == TSR_GGUF_TYPE_ARRAY && e.arr_type == TSR_GGUF_TYPE_STRING)) {
            for (auto & str : e.strs) s += 8 + str.size();
        } else {
            s += e.data.size();
        }
    }
    for (auto & ti : ctx->infos) s += 8 + ti.name.size() + 4 + 8 * (size_t) ti.n_dims + 4 + 8;
    return pad(s, ctx->alignment);
}

static inline bool host_readable(const tsr_tensor * t) {
    return t->data && (!t->buffer || tsr_backend_buffer_is_host(t->buffer));
}

} // namespace gguf_detail
TSR_IMPL_NS_END

/* ---- API ---------------------------------------------------------------------------- */

TSR_API_IMPL struct tsr_gguf_context * tsr_gguf_init_empty(void) {
    tsr_impl::gguf_ctx * ctx = new (std::nothrow) tsr_impl::gguf_ctx();
    if (!ctx) tsr_set_error("tsr_gguf_init_empty: out of memory");
    return tsr_impl::handle(ctx);
}

TSR_API_IMPL struct tsr_gguf_context * tsr_gguf_init_from_file(const char * fname, struct tsr_gguf_init_params params) {
    using namespace tsr_impl::gguf_detail;
    if (params.ctx) *params.ctx = nullptr;
    if (!fname) { tsr_set_error("tsr_gguf_init_from_file: NULL file name"); return nullptr; }
    FILE * f = fopen(fname, "rb");
    if (!f) { tsr_set_error("gguf '%s': cannot open: %s", fname, strerror(errno)); return nullptr; }
    reader r;
    r.name = fname;
    r.f = f;
    if (!file_size(f, r.size)) {
        tsr_set_error("gguf '%s': cannot determine the file size: %s", fname, strerror(errno));
        fclose(f);
        return nullptr;
    }
    tsr_impl::gguf_ctx * ctx = parse(r, params);
    fclose(f);
    return tsr_impl::handle(ctx);
}

TSR_API_IMPL struct tsr_gguf_context * tsr_gguf_init_from_buffer(const void * data, size_t size, struct tsr_gguf_init_params params) {
    using namespace tsr_impl::gguf_detail;
    if (params.ctx) *params.ctx = nullptr;
    if (!data && size) { tsr_set_error("tsr_gguf_init_from_buffer: NULL data of %zu bytes", size); return nullptr; }
    static const uint8_t empty = 0;
    reader r;
    r.name = "<memory>";
    r.mem = data ? (const uint8_t *) data : &empty;
    r.size = size;
    return tsr_impl::handle(parse(r, params));
}

TSR_API_IMPL void tsr_gguf_free(struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); delete ctx; }

TSR_API_IMPL const char * tsr_gguf_type_name(enum tsr_gguf_type type) { return tsr_impl::gguf_detail::type_name(type); }
TSR_API_IMPL uint32_t tsr_gguf_get_version(const struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); return ctx ? ctx->version : 0; }
TSR_API_IMPL size_t tsr_gguf_get_alignment(const struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); return ctx ? ctx->alignment : 0; }
TSR_API_IMPL size_t tsr_gguf_get_data_offset(const struct tsr_gguf_context * ctx_h) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!ctx) return 0;
    return ctx->from_file ? ctx->data_offset : tsr_impl::gguf_detail::meta_size(ctx);
}
TSR_API_IMPL size_t tsr_gguf_get_data_size(const struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); return ctx ? tsr_impl::gguf_detail::data_size(ctx) : 0; }
TSR_API_IMPL size_t tsr_gguf_get_meta_size(const struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); return ctx ? tsr_impl::gguf_detail::meta_size(ctx) : 0; }
TSR_API_IMPL void tsr_gguf_get_meta_data(const struct tsr_gguf_context * ctx_h, void * data) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!ctx || !data) return;
    tsr_impl::gguf_detail::writer w;
    w.mem = (uint8_t *) data;
    tsr_impl::gguf_detail::write_meta(ctx, w);
}

TSR_API_IMPL int64_t tsr_gguf_get_n_kv(const struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); return ctx ? (int64_t) ctx->kvs.size() : 0; }
TSR_API_IMPL int64_t tsr_gguf_find_key(const struct tsr_gguf_context * ctx_h, const char * key) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!ctx || !key) return -1;
    for (size_t i = 0; i < ctx->kvs.size(); ++i) {
        if (ctx->kvs[i].key == key) return (int64_t) i;
    }
    return -1;
}
TSR_API_IMPL const char * tsr_gguf_get_key(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_kv(ctx, key_id, TSR_GGUF_TYPE_COUNT, "tsr_gguf_get_key")) return nullptr;
    return ctx->kvs[(size_t) key_id].key.c_str();
}
TSR_API_IMPL enum tsr_gguf_type tsr_gguf_get_kv_type(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_kv(ctx, key_id, TSR_GGUF_TYPE_COUNT, "tsr_gguf_get_kv_type")) return TSR_GGUF_TYPE_COUNT;
    return ctx->kvs[(size_t) key_id].type;
}
TSR_API_IMPL enum tsr_gguf_type tsr_gguf_get_arr_type(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_kv(ctx, key_id, TSR_GGUF_TYPE_ARRAY, "tsr_gguf_get_arr_type")) return TSR_GGUF_TYPE_COUNT;
    return ctx->kvs[(size_t) key_id].arr_type;
}

#define TSR_GGUF_GETTER(suffix, T, TYPE) \
    TSR_API_IMPL T tsr_gguf_get_val_##suffix(const struct tsr_gguf_context * ctx_h, int64_t key_id) { auto * ctx = tsr_impl::internal(ctx_h); \
        return tsr_impl::gguf_detail::get_scalar<T>(ctx, key_id, TYPE, "tsr_gguf_get_val_" #suffix); \
    }
TSR_GGUF_GETTER(u8, uint8_t, TSR_GGUF_TYPE_UINT8)
TSR_GGUF_GETTER(i8, int8_t, TSR_GGUF_TYPE_INT8)
TSR_GGUF_GETTER(u16, uint16_t, TSR_GGUF_TYPE_UINT16)
TSR_GGUF_GETTER(i16, int16_t, TSR_GGUF_TYPE_INT16)
TSR_GGUF_GETTER(u32, uint32_t, TSR_GGUF_TYPE_UINT32)
TSR_GGUF_GETTER(i32, int32_t, TSR_GGUF_TYPE_INT32)
TSR_GGUF_GETTER(f32, float, TSR_GGUF_TYPE_FLOAT32)
TSR_GGUF_GETTER(u64, uint64_t, TSR_GGUF_TYPE_UINT64)
TSR_GGUF_GETTER(i64, int64_t, TSR_GGUF_TYPE_INT64)
TSR_GGUF_GETTER(f64, double, TSR_GGUF_TYPE_FLOAT64)
#undef TSR_GGUF_GETTER

TSR_API_IMPL bool tsr_gguf_get_val_bool(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    return tsr_impl::gguf_detail::get_scalar<uint8_t>(ctx, key_id, TSR_GGUF_TYPE_BOOL, "tsr_gguf_get_val_bool") != 0;
}
TSR_API_IMPL const char * tsr_gguf_get_val_str(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_kv(ctx, key_id, TSR_GGUF_TYPE_STRING, "tsr_gguf_get_val_str")) return nullptr;
    return ctx->kvs[(size_t) key_id].strs[0].c_str();
}
TSR_API_IMPL const void * tsr_gguf_get_val_data(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    if (!check_kv(ctx, key_id, TSR_GGUF_TYPE_COUNT, "tsr_gguf_get_val_data")) return nullptr;
    const kv & e = ctx->kvs[(size_t) key_id];
    if (e.type == TSR_GGUF_TYPE_STRING || e.type == TSR_GGUF_TYPE_ARRAY) {
        tsr_set_error("tsr_gguf_get_val_data: key '%s' is a %s, not a scalar", e.key.c_str(), type_name(e.type));
        return nullptr;
    }
    return e.data.data();
}
TSR_API_IMPL size_t tsr_gguf_get_arr_n(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_kv(ctx, key_id, TSR_GGUF_TYPE_ARRAY, "tsr_gguf_get_arr_n")) return 0;
    return ctx->kvs[(size_t) key_id].n;
}
TSR_API_IMPL const void * tsr_gguf_get_arr_data(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    if (!check_kv(ctx, key_id, TSR_GGUF_TYPE_ARRAY, "tsr_gguf_get_arr_data")) return nullptr;
    const kv & e = ctx->kvs[(size_t) key_id];
    if (e.arr_type == TSR_GGUF_TYPE_STRING) {
        tsr_set_error("tsr_gguf_get_arr_data: key '%s' is an array of strings (use tsr_gguf_get_arr_str)", e.key.c_str());
        return nullptr;
    }
    return e.data.data();
}
TSR_API_IMPL const char * tsr_gguf_get_arr_str(const struct tsr_gguf_context * ctx_h, int64_t key_id, size_t i) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    if (!check_kv(ctx, key_id, TSR_GGUF_TYPE_ARRAY, "tsr_gguf_get_arr_str")) return nullptr;
    const kv & e = ctx->kvs[(size_t) key_id];
    if (e.arr_type != TSR_GGUF_TYPE_STRING) {
        tsr_set_error("tsr_gguf_get_arr_str: key '%s' is an array of %s, not of strings", e.key.c_str(), type_name(e.arr_type));
        return nullptr;
    }
    if (i >= e.n) {
        tsr_set_error("tsr_gguf_get_arr_str: index %zu out of range for key '%s' (%zu elements)", i, e.key.c_str(), e.n);
        return nullptr;
    }
    return e.strs[i].c_str();
}

TSR_API_IMPL int64_t tsr_gguf_get_n_tensors(const struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); return ctx ? (int64_t) ctx->infos.size() : 0; }
TSR_API_IMPL int64_t tsr_gguf_find_tensor(const struct tsr_gguf_context * ctx_h, const char * name) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!ctx || !name) return -1;
    for (size_t i = 0; i < ctx->infos.size(); ++i) {
        if (ctx->infos[i].name == name) return (int64_t) i;
    }
    return -1;
}
TSR_API_IMPL size_t tsr_gguf_get_tensor_offset(const struct tsr_gguf_context * ctx_h, int64_t id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_tensor(ctx, id, "tsr_gguf_get_tensor_offset")) return 0;
    return (size_t) ctx->infos[(size_t) id].offset;
}
TSR_API_IMPL const char * tsr_gguf_get_tensor_name(const struct tsr_gguf_context * ctx_h, int64_t id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_tensor(ctx, id, "tsr_gguf_get_tensor_name")) return nullptr;
    return ctx->infos[(size_t) id].name.c_str();
}
TSR_API_IMPL enum tsr_type tsr_gguf_get_tensor_type(const struct tsr_gguf_context * ctx_h, int64_t id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_tensor(ctx, id, "tsr_gguf_get_tensor_type")) return TSR_TYPE_COUNT;
    return ctx->infos[(size_t) id].type;
}
TSR_API_IMPL size_t tsr_gguf_get_tensor_size(const struct tsr_gguf_context * ctx_h, int64_t id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_tensor(ctx, id, "tsr_gguf_get_tensor_size")) return 0;
    return ctx->infos[(size_t) id].size;
}
TSR_API_IMPL int tsr_gguf_get_tensor_n_dims(const struct tsr_gguf_context * ctx_h, int64_t id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_tensor(ctx, id, "tsr_gguf_get_tensor_n_dims")) return 0;
    return ctx->infos[(size_t) id].n_dims;
}
TSR_API_IMPL int64_t tsr_gguf_get_tensor_ne(const struct tsr_gguf_context * ctx_h, int64_t id, int dim) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_tensor(ctx, id, "tsr_gguf_get_tensor_ne")) return 0;
    if (dim < 0 || dim >= TSR_MAX_DIMS) { tsr_set_error("tsr_gguf_get_tensor_ne: dim %d out of range", dim); return 0; }
    return ctx->infos[(size_t) id].ne[dim];
}

#define TSR_GGUF_SETTER(suffix, T, TYPE) \
    TSR_API_IMPL bool tsr_gguf_set_val_##suffix(struct tsr_gguf_context * ctx_h, const char * key, T val) { auto * ctx = tsr_impl::internal(ctx_h); \
        return tsr_impl::gguf_detail::set_scalar(ctx, key, TYPE, &val, "tsr_gguf_set_val_" #suffix); \
    }
TSR_GGUF_SETTER(u8, uint8_t, TSR_GGUF_TYPE_UINT8)
TSR_GGUF_SETTER(i8, int8_t, TSR_GGUF_TYPE_INT8)
TSR_GGUF_SETTER(u16, uint16_t, TSR_GGUF_TYPE_UINT16)
TSR_GGUF_SETTER(i16, int16_t, TSR_GGUF_TYPE_INT16)
TSR_GGUF_SETTER(u32, uint32_t, TSR_GGUF_TYPE_UINT32)
TSR_GGUF_SETTER(i32, int32_t, TSR_GGUF_TYPE_INT32)
TSR_GGUF_SETTER(f32, float, TSR_GGUF_TYPE_FLOAT32)
TSR_GGUF_SETTER(u64, uint64_t, TSR_GGUF_TYPE_UINT64)
TSR_GGUF_SETTER(i64, int64_t, TSR_GGUF_TYPE_INT64)
TSR_GGUF_SETTER(f64, double, TSR_GGUF_TYPE_FLOAT64)
#undef TSR_GGUF_SETTER

TSR_API_IMPL bool tsr_gguf_set_val_bool(struct tsr_gguf_context * ctx_h, const char * key, bool val) {
    auto * ctx = tsr_impl::internal(ctx_h);
    const uint8_t v = val ? 1 : 0;
    return tsr_impl::gguf_detail::set_scalar(ctx, key, TSR_GGUF_TYPE_BOOL, &v, "tsr_gguf_set_val_bool");
}
TSR_API_IMPL bool tsr_gguf_set_val_str(struct tsr_gguf_context * ctx_h, const char * key, const char * val) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!val) return tsr_set_error("tsr_gguf_set_val_str: NULL value for key '%s'", key ? key : "(null)");
    if (key && strcmp(key, TSR_GGUF_KEY_GENERAL_ALIGNMENT) == 0) return tsr_set_error("tsr_gguf_set_val_str: general.alignment must be u32");
    tsr_impl::gguf_detail::kv * e = tsr_impl::gguf_detail::put(ctx, key, "tsr_gguf_set_val_str");
    if (!e) return false;
    try {
        e->type = TSR_GGUF_TYPE_STRING;
        e->n = 1;
        e->strs.assign(1, std::string(val));
    } catch (...) { tsr_impl::gguf_detail::drop_kv(ctx, e); return tsr_set_error("tsr_gguf_set_val_str: out of memory"); }
    return true;
}
TSR_API_IMPL bool tsr_gguf_set_arr_data(struct tsr_gguf_context * ctx_h, const char * key, enum tsr_gguf_type type, const void * data, size_t n) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    const size_t es = type_size(type);
    if (es == 0) return tsr_set_error("tsr_gguf_set_arr_data: key '%s': element type %s is not a scalar type", key ? key : "(null)", type_name(type));
    if (!data && n) return tsr_set_error("tsr_gguf_set_arr_data: key '%s': NULL data for %zu elements", key ? key : "(null)", n);
    if (n > SIZE_MAX / es) return tsr_set_error("tsr_gguf_set_arr_data: key '%s': %zu elements of %zu bytes overflow size_t", key ? key : "(null)", n, es);
    if (key && strcmp(key, TSR_GGUF_KEY_GENERAL_ALIGNMENT) == 0) return tsr_set_error("tsr_gguf_set_arr_data: general.alignment must be u32");
    kv * e = put(ctx, key, "tsr_gguf_set_arr_data");
    if (!e) return false;
    try {
        e->type = TSR_GGUF_TYPE_ARRAY;
        e->arr_type = type;
        e->n = n;
        e->data.assign((const uint8_t *) data, (const uint8_t *) data + n * es);
    } catch (...) { drop_kv(ctx, e); return tsr_set_error("tsr_gguf_set_arr_data: out of memory for %zu elements", n); }
    return true;
}
TSR_API_IMPL bool tsr_gguf_set_arr_str(struct tsr_gguf_context * ctx_h, const char * key, const char ** data, size_t n) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    if (!data && n) return tsr_set_error("tsr_gguf_set_arr_str: key '%s': NULL data for %zu strings", key ? key : "(null)", n);
    for (size_t i = 0; i < n; ++i) {
        if (!data[i]) return tsr_set_error("tsr_gguf_set_arr_str: key '%s': string %zu is NULL", key ? key : "(null)", i);
    }
    if (key && strcmp(key, TSR_GGUF_KEY_GENERAL_ALIGNMENT) == 0) return tsr_set_error("tsr_gguf_set_arr_str: general.alignment must be u32");
    kv * e = put(ctx, key, "tsr_gguf_set_arr_str");
    if (!e) return false;
    try {
        e->type = TSR_GGUF_TYPE_ARRAY;
        e->arr_type = TSR_GGUF_TYPE_STRING;
        e->n = n;
        e->strs.assign(data, data + n);
    } catch (...) { drop_kv(ctx, e); return tsr_set_error("tsr_gguf_set_arr_str: out of memory for %zu strings", n); }
    return true;
}
TSR_API_IMPL int64_t tsr_gguf_remove_key(struct tsr_gguf_context * ctx_h, const char * key) {
    auto * ctx = tsr_impl::internal(ctx_h);
    const int64_t id = tsr_gguf_find_key(ctx_h, key);
    if (id >= 0) {
        ctx->kvs.erase(ctx->kvs.begin() + id);
        if (strcmp(key, TSR_GGUF_KEY_GENERAL_ALIGNMENT) == 0) {
            ctx->alignment = TSR_GGUF_DEFAULT_ALIGNMENT;
            tsr_impl::gguf_detail::relayout(ctx);
        }
    }
    return id;
}
TSR_API_IMPL bool tsr_gguf_set_kv(struct tsr_gguf_context * ctx_h, const struct tsr_gguf_context * src_h) {
    auto * ctx = tsr_impl::internal(ctx_h);
    auto * src = tsr_impl::internal(src_h);
    if (!ctx || !src) return tsr_set_error("tsr_gguf_set_kv: NULL context");
    for (auto & e : src->kvs) {
        tsr_impl::gguf_detail::kv * d = tsr_impl::gguf_detail::put(ctx, e.key.c_str(), "tsr_gguf_set_kv");
        if (!d) return false;
        try { *d = e; } catch (...) { tsr_impl::gguf_detail::drop_kv(ctx, d); return tsr_set_error("tsr_gguf_set_kv: out of memory"); }
        if (e.key == TSR_GGUF_KEY_GENERAL_ALIGNMENT) {
            uint32_t a = 0;
            memcpy(&a, e.data.data(), 4);
            ctx->alignment = a;
            tsr_impl::gguf_detail::relayout(ctx);
        }
    }
    return true;
}

TSR_API_IMPL bool tsr_gguf_add_tensor(struct tsr_gguf_context * ctx_h, const struct tsr_tensor * tensor) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    if (!ctx || !tensor) return tsr_set_error("tsr_gguf_add_tensor: NULL argument");
    if (!tensor->name[0]) return tsr_set_error("tsr_gguf_add_tensor: tensor has no name");
    if (tsr_gguf_find_tensor(ctx_h, tensor->name) >= 0) return tsr_set_error("tsr_gguf_add_tensor: duplicate tensor name '%s'", tensor->name);
    if (!tsr_is_contiguous(tensor)) return tsr_set_error("tsr_gguf_add_tensor: tensor '%s' is not contiguous", tensor->name);
    try {
        tinfo ti;
        ti.name = tensor->name;
        ti.type = tensor->type;
        ti.n_dims = std::max(1, tsr_n_dims(tensor));
        for (int d = 0; d < TSR_MAX_DIMS; ++d) ti.ne[d] = tensor->ne[d];
        ti.size = tsr_nbytes(tensor);
        ti.src = tensor;
        ctx->infos.push_back(ti);
    } catch (...) { return tsr_set_error("tsr_gguf_add_tensor: out of memory"); }
    relayout(ctx);
    return true;
}

TSR_API_IMPL bool tsr_gguf_set_tensor_data(struct tsr_gguf_context * ctx_h, const char * name, const void * data) {
    auto * ctx = tsr_impl::internal(ctx_h);
    const int64_t id = tsr_gguf_find_tensor(ctx_h, name);
    if (id < 0) return tsr_set_error("tsr_gguf_set_tensor_data: no tensor named '%s'", name ? name : "(null)");
    ctx->infos[(size_t) id].data = data;
    return true;
}

TSR_API_IMPL bool tsr_gguf_write_to_file(const struct tsr_gguf_context * ctx_h, const char * fname, bool only_meta) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    if (!ctx || !fname) return tsr_set_error("tsr_gguf_write_to_file: NULL argument");
    /* every tensor must have a data source before anything is written */
    if (!only_meta) {
        for (auto & ti : ctx->infos) {
            if (!ti.data && !(ti.src && (ti.src->data || ti.src->buffer))) {
                return tsr_set_error("tsr_gguf_write_to_file: tensor '%s' has no data to write", ti.name.c_str());
            }
        }
    }
    std::string tmp;
    try { tmp = std::string(fname) + ".tmp"; } catch (...) { return tsr_set_error("tsr_gguf_write_to_file: out of memory"); }
    FILE * f = fopen(tmp.c_str(), "wb");
    if (!f) return tsr_set_error("gguf '%s': cannot create: %s", tmp.c_str(), strerror(errno));
    writer w;
    w.f = f;
    write_meta(ctx, w);
    bool data_ok = true;
    if (!only_meta && w.ok) {
        std::vector<uint8_t> stage;
        for (auto & ti : ctx->infos) {
            if (ti.data) {
                w.raw(ti.data, ti.size);
            } else if (host_readable(ti.src)) {
                w.raw(ti.src->data, ti.size);
            } else {
                const size_t chunk = std::min<size_t>(ti.size, TSR_GGUF_LOAD_CHUNK);
                try { stage.resize(chunk); } catch (...) { data_ok = tsr_set_error("tsr_gguf_write_to_file: out of memory"); break; }
                for (size_t done = 0; done < ti.size && w.ok; done += chunk) {
                    const size_t k = std::min(chunk, ti.size - done);
                    if (!tsr_backend_tensor_get(ti.src, stage.data(), done, k)) { data_ok = false; break; }
                    w.raw(stage.data(), k);
                }
                if (!data_ok) break;
            }
            w.zeros(pad(ti.size, ctx->alignment) - ti.size);
        }
    }
    if (fclose(f) != 0) w.ok = false;
    if (!w.ok || !data_ok) {
        char why[sizeof tsr_impl::g_error];
        snprintf(why, sizeof why, "%s", data_ok ? strerror(errno) : tsr_last_error());
        remove(tmp.c_str());
        return tsr_set_error("gguf '%s': write failed: %s", fname, why);
    }
#ifdef _WIN32
    remove(fname);  /* rename over an existing file fails on Windows */
#endif
    if (rename(tmp.c_str(), fname) != 0) {
        const int e = errno;
        remove(tmp.c_str());
        return tsr_set_error("gguf '%s': cannot rename '%s' to it: %s", fname, tmp.c_str(), strerror(e));
    }
    return true;
}

TSR_IMPL_NS_BEGIN
namespace gguf_detail {

struct load_job { tsr_tensor * t; const tinfo * ti; };

/* Every tensor of ctx matched by name, type and shape to the file's, in file order (so the
 * reads run forward through the file); each one's data range checked against the file's size. */
static bool match_tensors(const gguf_ctx * gguf, const tsr_gguf_context * gguf_h, tsr_context * ctx, const char * path,
                          uint64_t fsize, std::vector<load_job> & jobs, size_t & total) {
    total = 0;
    for (tsr_tensor * t = tsr_get_first_tensor(ctx); t; t = tsr_get_next_tensor(ctx, t)) {
        const int64_t id = tsr_gguf_find_tensor(gguf_h, t->name);
        if (id < 0) return tsr_set_error("gguf '%s': tensor '%s' is not in the file", path, t->name);
        const tinfo & ti = gguf->infos[(size_t) id];
        bool same = ti.type == t->type;
        for (int d = 0; d < TSR_MAX_DIMS; ++d) same = same && ti.ne[d] == t->ne[d];
        if (!same) {
            return tsr_set_error("gguf '%s': tensor '%s' is %s [%lld, %lld, %lld, %lld] in the file but %s [%lld, %lld, %lld, %lld] in the context",
                                 path, t->name, tsr_type_name(ti.type), (long long) ti.ne[0], (long long) ti.ne[1],
                                 (long long) ti.ne[2], (long long) ti.ne[3], tsr_type_name(t->type), (long long) t->ne[0],
                                 (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3]);
        }
        const uint64_t off = (uint64_t) gguf->data_offset + ti.offset;
        if (off > fsize || ti.size > fsize - off) {
            return tsr_set_error("gguf '%s': byte %llu: tensor '%s' data of %zu bytes runs past the end of the file (size %llu)",
                                 path, (unsigned long long) off, ti.name.c_str(), ti.size, (unsigned long long) fsize);
        }
        jobs.push_back(load_job{t, &ti});
        total += ti.size;
    }
    std::sort(jobs.begin(), jobs.end(), [](const load_job & a, const load_job & b) { return a.ti->offset < b.ti->offset; });
    return true;
}

/* A read-only file handle that reads at absolute offsets: pread on POSIX (no seeks, no stdio
 * buffer between the page cache and the destination), stdio elsewhere. */
struct input_file {
#ifdef TSR_GGUF_POSIX_IO
    int fd = -1;
    bool open(const char * path) { fd = ::open(path, O_RDONLY | O_CLOEXEC); return fd >= 0; }
    bool size(uint64_t & out) const {
        struct stat st;
        if (fstat(fd, &st) != 0) return false;
        out = (uint64_t) st.st_size;
        return true;
    }
    void sequential(uint64_t off, uint64_t len) const {
#ifdef POSIX_FADV_SEQUENTIAL
        (void) posix_fadvise(fd, (off_t) off, (off_t) len, POSIX_FADV_SEQUENTIAL);
#else
        (void) off; (void) len;
#endif
    }
    bool read_at(void * dst, size_t n, uint64_t off) const {
        char * p = (char *) dst;
        while (n > 0) {
            const ssize_t k = pread(fd, p, n, (off_t) off);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) return false;
            p += k;
            n -= (size_t) k;
            off += (uint64_t) k;
        }
        return true;
    }
    ~input_file() { if (fd >= 0) ::close(fd); }
#else
    FILE * f = nullptr;
    bool open(const char * path) { f = fopen(path, "rb"); return f != nullptr; }
    bool size(uint64_t & out) const { return file_size(f, out); }
    void sequential(uint64_t, uint64_t) const {}
    bool read_at(void * dst, size_t n, uint64_t off) const { return seek(f, off) && fread(dst, 1, n, f) == n; }
    ~input_file() { if (f) fclose(f); }
#endif
};

/* Progress after each chunk: one call per 64 MiB read in place (8 MiB staged), nothing
 * next to the reads. */
struct progress_meter {
    tsr_gguf_progress_cb cb;
    void * user;
    size_t total, done = 0;
    bool add(size_t n) {
        done += n;
        return !cb || cb(done, total, user);
    }
};

/* Copy one tensor's bytes from the file: host memory is read into in place (large reads,
 * no copy), a device tensor through `stage` (bounded) and tsr_backend_tensor_set. */
static bool load_one(const input_file & in, const load_job & j, uint64_t off, std::vector<uint8_t> & stage, progress_meter & pm,
                     const char * path) {
    const bool host = host_readable(j.t);
    const size_t chunk = host ? (size_t) TSR_GGUF_LOAD_CHUNK * 8 : stage.size();
    for (size_t done = 0; done < j.ti->size;) {
        const size_t k = std::min<size_t>(j.ti->size - done, chunk);
        void * dst = host ? (void *) ((uint8_t *) j.t->data + done) : (void *) stage.data();
        if (!in.read_at(dst, k, off + done)) {
            return tsr_set_error("gguf '%s': byte %llu: short read for tensor '%s'", path, (unsigned long long) (off + done),
                                 j.ti->name.c_str());
        }
        if (!host && !tsr_backend_tensor_set(j.t, dst, done, k)) {
            char why[sizeof tsr_impl::g_error];  /* a copy (the next error overwrites it); no std::string: nothing may throw */
            snprintf(why, sizeof why, "%s", tsr_last_error());
            return tsr_set_error("gguf '%s': uploading tensor '%s' failed: %s", path, j.ti->name.c_str(), why);
        }
        done += k;
        if (!pm.add(k)) return tsr_set_error("gguf '%s': load cancelled after %zu of %zu bytes", path, pm.done, pm.total);
    }
    return true;
}

} // namespace gguf_detail
TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_gguf_load_tensors(const struct tsr_gguf_context * gguf_h, struct tsr_context * ctx, const char * path,
                                        tsr_gguf_progress_cb progress, void * user) {
    using namespace tsr_impl::gguf_detail;
    auto * gguf = tsr_impl::internal(gguf_h);
    if (!gguf || !ctx || !path) return tsr_set_error("tsr_gguf_load_tensors: NULL argument");
    input_file in;
    if (!in.open(path)) return tsr_set_error("gguf '%s': cannot open: %s", path, strerror(errno));
    uint64_t fsize = 0;
    if (!in.size(fsize)) return tsr_set_error("gguf '%s': cannot determine the file size", path);
    std::vector<load_job> jobs;
    std::vector<uint8_t> stage;
    size_t total = 0, max_dev = 0;
    try {
        if (!match_tensors(gguf, gguf_h, ctx, path, fsize, jobs, total)) return false;
        for (const load_job & j : jobs) {
            if (!j.t->data) return tsr_set_error("gguf '%s': tensor '%s' has no memory yet (allocate the context's tensors in a buffer first)", path, j.t->name);
            if (!host_readable(j.t)) max_dev = std::max(max_dev, j.ti->size);
        }
        if (max_dev) stage.resize(std::min<size_t>(max_dev, TSR_GGUF_LOAD_CHUNK));
    } catch (...) {
        return tsr_set_error("tsr_gguf_load_tensors: out of memory");
    }
    in.sequential(gguf->data_offset, fsize - gguf->data_offset);
    progress_meter pm{progress, user, total};
    if (progress && !progress(0, total, user)) return tsr_set_error("gguf '%s': load cancelled", path);
    for (const load_job & j : jobs) {
        if (!load_one(in, j, (uint64_t) gguf->data_offset + j.ti->offset, stage, pm, path)) return false;
    }
    return true;
}

/* ---- mapping tensor data in place ---------------------------------------------------- */

TSR_IMPL_NS_BEGIN
namespace gguf_detail {

#ifdef TSR_GGUF_POSIX_IO
/* A buffer over a read-only mapping of a whole model file: CPU memory for the backends (its
 * type is the CPU buffer type), whose writes are refused instead of faulting, and which
 * unmaps the file when freed. */
struct file_mapping { void * addr; size_t size; };

static void mapped_free(tsr_backend_buffer_t b) {
    file_mapping * m = (file_mapping *) b->context;
    munmap(m->addr, m->size);
    delete m;
}
static void * mapped_base(tsr_backend_buffer_t b) { return ((file_mapping *) b->context)->addr; }
static bool refuse_write(const tsr_tensor * t) {
    return tsr_set_error("tensor '%s' is read-only: it lies in a read-only mapping of its model file (load without mmap to modify weights)",
                         t->name);
}
static bool mapped_set(tsr_backend_buffer_t, struct tsr_tensor * t, const void *, size_t, size_t) { return refuse_write(t); }
static bool mapped_memset(tsr_backend_buffer_t, struct tsr_tensor * t, uint8_t, size_t, size_t) { return refuse_write(t); }
static void mapped_clear(tsr_backend_buffer_t b, uint8_t) {
    tsr_set_error("buffer '%s' maps a model file read-only: not cleared", tsr_backend_buffer_name(b));
}
/* the CPU buffer's reads; its own free, base and refusals (gguf.h includes backend.h, so
 * backend.inl is compiled before this file in every include order) */
static constexpr struct tsr_backend_buffer_i k_mapped_buffer_i = [] {
    struct tsr_backend_buffer_i b = k_cpu_buffer_i;
    b.free_buffer = mapped_free;
    b.get_base = mapped_base;
    b.memset_tensor = mapped_memset;
    b.set_tensor = mapped_set;
    b.cpy_tensor = nullptr;  /* a copy into a mapped tensor goes to set_tensor: refused */
    b.clear = mapped_clear;
    return b;
}();

/* Map the whole file read-only; the kernel starts reading it ahead (without waiting). */
static tsr_backend_buffer_t map_file(const char * path, uint64_t & fsize) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { tsr_set_error("gguf '%s': cannot open: %s", path, strerror(errno)); return nullptr; }
    struct stat st;
    void * addr = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size > 0) addr = mmap(nullptr, (size_t) st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    const int map_errno = errno;
    ::close(fd);  /* the mapping keeps the file */
    if (addr == MAP_FAILED) { tsr_set_error("gguf '%s': cannot map the file: %s", path, strerror(map_errno)); return nullptr; }
    fsize = (uint64_t) st.st_size;
#ifdef POSIX_MADV_WILLNEED
    (void) posix_madvise(addr, (size_t) fsize, POSIX_MADV_WILLNEED);
#endif
    file_mapping * m = new (std::nothrow) file_mapping{addr, (size_t) fsize};
    tsr_backend_buffer_t b = m ? tsr_backend_buffer_init(tsr_backend_cpu_buffer_type(), k_mapped_buffer_i, m, (size_t) fsize) : nullptr;
    if (!b) {
        munmap(addr, (size_t) fsize);
        delete m;
        tsr_set_error("gguf '%s': out of memory", path);
        return nullptr;
    }
    tsr_backend_buffer_set_usage(b, TSR_BUFFER_USAGE_WEIGHTS);
    return b;
}
#endif

} // namespace gguf_detail
TSR_IMPL_NS_END

TSR_API_IMPL tsr_backend_buffer_t tsr_gguf_map_tensors(const struct tsr_gguf_context * gguf_h, struct tsr_context * ctx, const char * path) {
    using namespace tsr_impl::gguf_detail;
    auto * gguf = tsr_impl::internal(gguf_h);
    if (!gguf || !ctx || !path) { tsr_set_error("tsr_gguf_map_tensors: NULL argument"); return nullptr; }
#ifdef TSR_GGUF_POSIX_IO
    for (const tinfo & ti : gguf->infos) {  /* checked before mapping: a refusal costs nothing */
        const uint64_t off = (uint64_t) gguf->data_offset + ti.offset;
        if (off % TSR_GGUF_MMAP_ALIGN != 0) {
            tsr_set_error("gguf '%s': tensor '%s' starts at byte %llu, not a multiple of %d: cannot be used in place (read the file instead)",
                          path, ti.name.c_str(), (unsigned long long) off, TSR_GGUF_MMAP_ALIGN);
            return nullptr;
        }
    }
    uint64_t fsize = 0;
    tsr_backend_buffer_t b = map_file(path, fsize);
    if (!b) return nullptr;
    std::vector<load_job> jobs;
    size_t total = 0;
    bool ok = false;
    try { ok = match_tensors(gguf, gguf_h, ctx, path, fsize, jobs, total); } catch (...) { ok = tsr_set_error("tsr_gguf_map_tensors: out of memory"); }
    char * base = (char *) mapped_base(b);
    for (size_t i = 0; ok && i < jobs.size(); ++i) {
        ok = tsr_backend_tensor_alloc(b, jobs[i].t, base + gguf->data_offset + jobs[i].ti->offset);
    }
    if (ok) return b;
    for (const load_job & j : jobs) {  /* leave the context as it was: no tensor points into the freed mapping */
        if (j.t->buffer == b) { j.t->buffer = nullptr; j.t->data = nullptr; }
    }
    tsr_backend_buffer_free(b);
    return nullptr;
#else
    (void) gguf;
    tsr_set_error("gguf '%s': mapping files is not supported on this platform (read the file instead)", path);
    return nullptr;
#endif
}
#endif
/* ---- include/tessera/sched.h ---- */
/*
 * sched.h - the backend scheduler: one graph split across several backends.
 *
 * Mirrors ggml_backend_sched (ggml-backend.h; replace `ggml_` by `tsr_`). Give it the
 * backends in priority order (the CPU last: it runs every op), and it
 *  - assigns every node to a backend: an op runs where its weights live when that backend
 *    supports it, user overrides (set_tensor_backend) win, neighbours join their
 *    neighbours' backend where it supports them, and an op the chosen backend lacks falls
 *    back to the next backend in priority order that has it;
 *  - cuts the graph into splits, runs of consecutive nodes on one backend;
 *  - copies each split's inputs that live on another backend, once per graph and backend
 *    (a tensor two splits of one backend read is copied once), into tensors planned in
 *    that backend's compute buffer;
 *  - plans every backend's compute buffer with one gallocr (one buffer type per backend,
 *    input copies included), so each lands at its own lower bound. reserve sizes the
 *    buffers once for the largest graph; alloc_graph and graph_compute on it or smaller
 *    graphs then allocate no buffer.
 *
 *     tsr_backend_t backends[2] = { vulkan, cpu };
 *     tsr_backend_sched_t s = tsr_backend_sched_new(backends, NULL, 2, TSR_DEFAULT_GRAPH_SIZE, false);
 *     if (!tsr_backend_sched_reserve(s, worst_graph)) puts(tsr_last_error());  // names the op no backend runs
 *     tsr_backend_sched_alloc_graph(s, gf);       // places every tensor without data
 *     tsr_backend_tensor_set(input, ...);         // graph inputs live on the last backend (the CPU)
 *     tsr_backend_sched_graph_compute(s, gf);
 *
 * Graph inputs (leafs flagged TSR_TENSOR_FLAG_INPUT without data) are placed on the last
 * backend, so the program writes them in host memory; a split on another backend gets a
 * copy. Between alloc_graph and the end of graph_compute (or reset), the graph's nodes read
 * foreign inputs through the scheduler's copies (their src pointers are redirected, as in
 * ggml); graph_compute and reset put the original sources back, so call one of them
 * before freeing a graph you allocated (the next alloc_graph writes into the last one).
 *
 * Implementation: TSR_IMPLEMENTATION, in one C++17 file, compiles the core and every
 * backend header included in that file, in any include order (README "Using tessera").
 */
#ifndef TESSERA_SCHED_H
#define TESSERA_SCHED_H


#ifdef __cplusplus
extern "C" {
#endif

/* How many copies of the split inputs `parallel` keeps (ggml's GGML_SCHED_MAX_COPIES). */
#define TSR_SCHED_MAX_COPIES 4
/* The most backends one scheduler takes (ggml's GGML_SCHED_MAX_BACKENDS). */
#define TSR_SCHED_MAX_BACKENDS 16

typedef struct tsr_backend_sched * tsr_backend_sched_t;

/* Called per node with ask = true: "do you want to see this node's result?" Nodes up to
 * the first one answered true are computed together, then it is called again with
 * ask = false and the computed node: return true to go on, false to stop the graph
 * (graph_compute then returns TSR_STATUS_ABORTED). */
typedef bool (*tsr_backend_sched_eval_callback)(struct tsr_tensor * t, bool ask, void * user_data);

/* Would `backend` rather run op itself even though its weights live in another backend's
 * (host) buffer? ggml asks the device (offload_op); tessera asks the backend, and the
 * device layer will forward to it: true when the backend computes away from host memory,
 * supports op, and op is a batch of at least 32 rows (prompt processing), where copying
 * the weight costs less than computing on the CPU. GET_ROWS never: it reads a few rows. */
TSR_API bool tsr_backend_offload_op(tsr_backend_t backend, const struct tsr_tensor * op);

/* A scheduler over n_backends backends in priority order (at most TSR_SCHED_MAX_BACKENDS;
 * the last is the fallback that must run every op the others lack: the CPU). bufts: the
 * compute buffer type of each backend (NULL: each backend's default). graph_size: the
 * most nodes + leafs a graph may have. parallel: keep TSR_SCHED_MAX_COPIES copies of the
 * split inputs, rotated per graph, so a backend that works asynchronously could fill the
 * next graph's inputs while the previous graph runs (no backend does yet: every split
 * still waits for the one before). NULL + error on bad arguments. */
TSR_API tsr_backend_sched_t tsr_backend_sched_new(tsr_backend_t * backends, tsr_backend_buffer_type_t * bufts, int n_backends,
                                                  size_t graph_size, bool parallel);
/* NULL is fine; the backends stay. A graph allocated and not computed keeps reading the
 * freed copies: reset first. */
TSR_API void                tsr_backend_sched_free(tsr_backend_sched_t sched);

/* Split the graph and size every backend's compute buffer (and workspace) for it: call
 * it with the largest graph. false + error when an op runs on no backend (the error names
 * the node, its op and types), a tensor lives in a buffer no backend can use, or memory
 * runs out. The graph is left as it was (no tensor placed). */
TSR_API bool tsr_backend_sched_reserve(tsr_backend_sched_t sched, struct tsr_cgraph * measure_graph);

TSR_API int           tsr_backend_sched_get_n_backends(tsr_backend_sched_t sched);
TSR_API tsr_backend_t tsr_backend_sched_get_backend(tsr_backend_sched_t sched, int i);  /* NULL when out of range */

/* Of the last split (reserve, alloc_graph or compute): the number of splits, and of input
 * copies made per graph (each a tensor copied once from another backend). */
TSR_API int tsr_backend_sched_get_n_splits(tsr_backend_sched_t sched);
TSR_API int tsr_backend_sched_get_n_split_inputs(tsr_backend_sched_t sched);
/* Split i's backend and the number of inputs copied for it (NULL / -1 out of range). */
TSR_API tsr_backend_t tsr_backend_sched_get_split_backend(tsr_backend_sched_t sched, int i);
TSR_API int           tsr_backend_sched_get_split_n_inputs(tsr_backend_sched_t sched, int i);
/* How many copies of the split inputs are kept (1, or TSR_SCHED_MAX_COPIES when parallel). */
TSR_API int tsr_backend_sched_get_n_copies(tsr_backend_sched_t sched);

/* Bytes of backend's compute buffer (0 for a backend not in the scheduler). */
TSR_API size_t tsr_backend_sched_get_buffer_size(tsr_backend_sched_t sched, tsr_backend_t backend);

/* What the last plan decided for one backend's compute buffer. */
struct tsr_backend_sched_buffer_info {
    size_t buffer_size;   /* bytes allocated (grows only) */
    size_t planned_size;  /* bytes the last plan needs */
    size_t lower_bound;   /* the most aligned bytes live at one step on this backend */
    size_t input_bytes;   /* of them, the aligned bytes of input copies (all n_copies) */
    int    n_inputs;      /* input copies on this backend per graph */
};
/* false + error for a backend not in the scheduler or before the first reserve/alloc. */
TSR_API bool tsr_backend_sched_get_buffer_info(tsr_backend_sched_t sched, tsr_backend_t backend,
                                               struct tsr_backend_sched_buffer_info * info);

/* Run node on backend whatever the rules say (until reset). Checked at the next split:
 * false + error there when backend cannot run the node. */
TSR_API void          tsr_backend_sched_set_tensor_backend(tsr_backend_sched_t sched, struct tsr_tensor * node, tsr_backend_t backend);
/* The backend a tensor of the last split graph was given (or its override); NULL if none. */
TSR_API tsr_backend_t tsr_backend_sched_get_tensor_backend(tsr_backend_sched_t sched, struct tsr_tensor * node);

/* Split the graph and place every tensor without data in the backends' compute buffers
 * (the buffers grow only when the graph needs more than reserve sized). false + error as
 * reserve. */
TSR_API bool            tsr_backend_sched_alloc_graph(tsr_backend_sched_t sched, struct tsr_cgraph * graph);
/* alloc_graph when the graph was not allocated, then run the splits in order (copying
 * each split's inputs first) and wait for every backend. */
TSR_API enum tsr_status tsr_backend_sched_graph_compute(tsr_backend_sched_t sched, struct tsr_cgraph * graph);
/* The same without the final wait: results are ready after synchronize. */
TSR_API enum tsr_status tsr_backend_sched_graph_compute_async(tsr_backend_sched_t sched, struct tsr_cgraph * graph);
TSR_API void            tsr_backend_sched_synchronize(tsr_backend_sched_t sched);

/* Forget the last graph's assignments, overrides and copies (the buffers stay): call it
 * before building a different graph whose overrides you set. */
TSR_API void tsr_backend_sched_reset(tsr_backend_sched_t sched);

/* Observe (or stop at) nodes while a graph computes; NULL callback: off. */
TSR_API void tsr_backend_sched_set_eval_callback(tsr_backend_sched_t sched, tsr_backend_sched_eval_callback callback,
                                                 void * user_data);

#ifdef __cplusplus
} /* extern "C" */
#endif

#ifdef __cplusplus
TSR_CXX_BEGIN
/* Owns a scheduler; tsr_backend_sched_free on destruction. */
class backend_sched {
public:
    explicit backend_sched(tsr_backend_sched_t s = nullptr) : s_(s) {}
    ~backend_sched() { tsr_backend_sched_free(s_); }
    backend_sched(const backend_sched &) = delete;
    backend_sched & operator=(const backend_sched &) = delete;
    backend_sched(backend_sched && o) noexcept : s_(o.s_) { o.s_ = nullptr; }
    tsr_backend_sched_t get() const { return s_; }
    operator tsr_backend_sched_t() const { return s_; }
private:
    tsr_backend_sched_t s_;
};
TSR_CXX_END /* namespace tsr */
#endif

#define TSR_SCHED_DECLARED  /* every declaration above is in: the implementation may follow */
#endif /* TESSERA_SCHED_H */

/* ---- implementation (outside the include guard: see tessera.h) ---------------------- */
#if defined(TSR_IMPLEMENTATION) && !defined(TSR_SCHED_IMPLEMENTED)
#define TSR_SCHED_IMPLEMENTED
/* ---- include/tessera/impl/sched.inl ---- */
/*
 * sched.inl - the backend scheduler (sched.h): assign, split, copy inputs, plan, run.
 *
 * A graph goes through split_graph (passes below), which builds graph_copy: per split, the
 * split's input copies (DUP nodes reading the foreign tensor, so the planner keeps that
 * tensor alive up to the copy) and then the split's own nodes. One gallocr with a buffer
 * type per backend plans graph_copy with each tensor's backend as its buffer id, so every
 * backend's compute buffer is packed against its own lower bound, copies included. Each
 * split runs as a graph view of graph_copy that starts after its copies.
 */
#include <string>

TSR_IMPL_NS_BEGIN
TSR_IMPL_HANDLE(tsr_backend_sched, sched)

struct sched_split {
    int backend_id;
    int i_start, i_end;        /* the split's own nodes in graph_copy */
    int inputs_begin, n_inputs;  /* in sched::inputs */
};

/* A node whose src the scheduler redirected to a copy, to put back afterwards. */
struct sched_rewire {
    struct tsr_tensor * node;
    int src_index;
    struct tsr_tensor * original;
};

struct sched {
    vec<tsr_backend_t> backends;
    vec<tsr_backend_buffer_type_t> bufts;
    int n_backends = 0;
    int n_copies = 1;
    int cur_copy = 0;
    size_t graph_size = 0;
    tsr_gallocr_t galloc = nullptr;

    /* the copies and graph_copy live here; re-made per graph in the same block */
    struct tsr_context * ctx = nullptr;
    size_t ctx_size = 0;
    struct tsr_cgraph * graph_copy = nullptr;

    hash_map<const struct tsr_tensor *, int> ids;       /* backend of each tensor of the graph */
    hash_map<const struct tsr_tensor *, int> user_ids;  /* set_tensor_backend */
    hash_map<const struct tsr_tensor *, int> copy_base; /* tensor -> first of its n_backends * n_copies slots */
    vec<struct tsr_tensor *> copy_slots;
    vec<struct tsr_tensor *> inputs;                    /* originals, per split */
    std::vector<sched_split> splits;
    vec<sched_rewire> rewires;
    std::vector<int> node_ids, leaf_ids;
    std::vector<size_t> input_bytes;
    std::vector<int> n_inputs_per_backend;

    struct tsr_cgraph * allocated = nullptr;  /* the graph alloc_graph placed, until compute or reset */
    bool planned = false;

    tsr_backend_sched_eval_callback eval_cb = nullptr;
    void * eval_user = nullptr;
};

namespace {

static inline bool sched_is_view_op(enum tsr_op op) {
    return op == TSR_OP_NONE || op == TSR_OP_RESHAPE || op == TSR_OP_VIEW || op == TSR_OP_PERMUTE || op == TSR_OP_TRANSPOSE;
}

static inline int sched_id(const sched * s, const struct tsr_tensor * t) {
    auto it = s->ids.find(t);
    return it == s->ids.end() ? -1 : it->second;
}

/* The buffer a tensor's data lives in when someone else placed it (weights, KV cache). */
static inline tsr_backend_buffer_t sched_prealloc_buffer(const struct tsr_tensor * t) {
    const struct tsr_tensor * r = t->view_src ? t->view_src : t;
    return r->buffer;
}

static inline bool sched_is_weight(const struct tsr_tensor * t) {
    tsr_backend_buffer_t b = sched_prealloc_buffer(t);
    return b && tsr_backend_buffer_get_usage(b) == TSR_BUFFER_USAGE_WEIGHTS;
}

/* The first backend (priority order) that can use buffer b, and run op when op is given. */
static int sched_backend_for_buffer(const sched * s, tsr_backend_buffer_t b, const struct tsr_tensor * op) {
    const tsr_backend_buffer_type_t bt = tsr_backend_buffer_get_type(b);
    for (int i = 0; i < s->n_backends; i++) {
        if (!tsr_backend_supports_buft(s->backends[(size_t) i], bt)) continue;
        if (!op || tsr_backend_supports_op(s->backends[(size_t) i], op)) return i;
    }
    return -1;
}

static bool sched_no_backend_error(const sched * s, int i, const struct tsr_tensor * node, const char * why) {
    std::string tried;
    for (int b = 0; b < s->n_backends; b++) tried += (b ? ", " : "") + std::string(tsr_backend_name(s->backends[(size_t) b]));
    return tsr_set_error("tsr_backend_sched: node %d '%s' (%s, %s <- %s%s%s): %s (backends: %s)", i, node->name, tsr_op_desc(node),
                         tsr_type_name(node->type), node->src[0] ? tsr_type_name(node->src[0]->type) : "-",
                         node->src[1] ? ", " : "", node->src[1] ? tsr_type_name(node->src[1]->type) : "", why, tried.c_str());
}

/* Pass 1: overrides, tensors placed by someone else, graph inputs, ops beside their weights. */
static bool sched_assign_fixed(sched * s, struct tsr_cgraph * g) {
    const int last = s->n_backends - 1;
    for (int i = 0; i < g->n_leafs; i++) {
        struct tsr_tensor * t = g->leafs[i];
        auto u = s->user_ids.find(t);
        if (u != s->user_ids.end()) { s->ids[t] = u->second; continue; }
        if (tsr_backend_buffer_t b = sched_prealloc_buffer(t)) {
            const int id = sched_backend_for_buffer(s, b, nullptr);
            if (id < 0) return tsr_set_error("tsr_backend_sched: leaf '%s' lives in a %s buffer no backend can use", t->name, tsr_backend_buffer_name(b));
            s->ids[t] = id;
        } else if (t->flags & TSR_TENSOR_FLAG_INPUT) {
            s->ids[t] = last;  /* the program writes graph inputs in host memory */
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct tsr_tensor * t = g->nodes[i];
        auto u = s->user_ids.find(t);
        if (u != s->user_ids.end()) { s->ids[t] = u->second; continue; }
        if (tsr_backend_buffer_t b = sched_prealloc_buffer(t)) {
            /* a view computes nothing: any backend that can use the buffer */
            const int id = sched_backend_for_buffer(s, b, sched_is_view_op(t->op) ? nullptr : t);
            if (id < 0) return sched_no_backend_error(s, i, t, "writes into a buffer no backend that runs it can use");
            s->ids[t] = id;
            continue;
        }
        if (sched_is_view_op(t->op)) continue;
        for (int j = 0; j < TSR_MAX_SRC; j++) {
            const struct tsr_tensor * src = t->src[j];
            if (!src || !sched_is_weight(src)) continue;
            int id = sched_backend_for_buffer(s, sched_prealloc_buffer(src), t);
            if (id < 0) break;  /* the weight's backend lacks the op: a neighbour or fallback decides */
            if (id == last) {
                for (int b = 0; b < last; b++) {
                    if (tsr_backend_offload_op(s->backends[(size_t) b], t)) { id = b; break; }
                }
            }
            s->ids[t] = id;
            break;
        }
    }
    return true;
}

/* Pass 2, one sweep: unassigned nodes take the backend of the last assigned node before
 * them (in the sweep's direction) when it supports them. The lowest-priority backend
 * spreads only when with_last: the others grow first. */
static void sched_expand(sched * s, struct tsr_cgraph * g, bool down, bool with_last) {
    int cur = -1;
    for (int k = 0; k < g->n_nodes; k++) {
        struct tsr_tensor * t = g->nodes[down ? k : g->n_nodes - 1 - k];
        if (sched_is_view_op(t->op)) continue;
        const int id = sched_id(s, t);
        if (id >= 0) {
            cur = (id == s->n_backends - 1 && !with_last) ? -1 : id;
        } else if (cur >= 0 && tsr_backend_supports_op(s->backends[(size_t) cur], t)) {
            s->ids[t] = cur;
        }
    }
}

/* Pass 3: a node no neighbour could take goes to the backend that supports it and already
 * holds most of its inputs (ties: priority order). None supports it: the graph is refused. */
static bool sched_assign_fallbacks(sched * s, struct tsr_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        struct tsr_tensor * t = g->nodes[i];
        if (sched_is_view_op(t->op) || sched_id(s, t) >= 0) continue;
        int best = -1, best_inputs = -1;
        for (int b = 0; b < s->n_backends; b++) {
            if (!tsr_backend_supports_op(s->backends[(size_t) b], t)) continue;
            int n = 0;
            for (int j = 0; j < TSR_MAX_SRC; j++) n += t->src[j] && sched_id(s, t->src[j]) == b;
            if (n > best_inputs) { best = b; best_inputs = n; }
        }
        if (best < 0) return sched_no_backend_error(s, i, t, "no backend supports this op");
        s->ids[t] = best;
    }
    return true;
}

/* Pass 4: views run where their source is (they compute nothing, or write into it);
 * remaining leafs go where their first consumer runs; then every node is checked. */
static bool sched_assign_rest(sched * s, struct tsr_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        struct tsr_tensor * t = g->nodes[i];
        if (t->view_src && !sched_prealloc_buffer(t) && s->user_ids.find(t) == s->user_ids.end()) {
            const int id = sched_id(s, t->view_src);
            if (id >= 0) s->ids[t] = id;
        }
        const int id = sched_id(s, t);
        for (int j = 0; j < TSR_MAX_SRC; j++) {
            if (t->src[j] && id >= 0 && sched_id(s, t->src[j]) < 0) s->ids[t->src[j]] = id;
        }
    }
    for (int i = 0; i < g->n_leafs; i++) {
        if (sched_id(s, g->leafs[i]) < 0) s->ids[g->leafs[i]] = s->n_backends - 1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct tsr_tensor * t = g->nodes[i];
        int id = sched_id(s, t);
        if (id < 0) { id = s->n_backends - 1; s->ids[t] = id; }  /* a view of nothing assigned */
        if (!sched_is_view_op(t->op) && !tsr_backend_supports_op(s->backends[(size_t) id], t)) {
            std::string why = std::string("assigned to ") + tsr_backend_name(s->backends[(size_t) id]) + ", which does not support it";
            return sched_no_backend_error(s, i, t, why.c_str());
        }
    }
    return true;
}

/* Can backend b read t where it lives, without a copy? */
static bool sched_can_read(const sched * s, const struct tsr_tensor * t, int b) {
    tsr_backend_buffer_t buf = sched_prealloc_buffer(t);
    const tsr_backend_buffer_type_t bt = buf ? tsr_backend_buffer_get_type(buf) : s->bufts[(size_t) sched_id(s, t)];
    return tsr_backend_supports_buft(s->backends[(size_t) b], bt);
}

/* The copy slot of t on backend b (copy c), made with t's layout when new. */
static struct tsr_tensor * sched_copy_of(sched * s, struct tsr_tensor * t, int b, int c, bool * created) {
    auto it = s->copy_base.find(t);
    size_t base;
    if (it == s->copy_base.end()) {
        base = s->copy_slots.size();
        s->copy_base[t] = (int) base;
        s->copy_slots.resize(base + (size_t) (s->n_backends * s->n_copies), nullptr);
    } else {
        base = (size_t) it->second;
    }
    struct tsr_tensor ** slot = &s->copy_slots[base + (size_t) (b * s->n_copies)];
    *created = slot[0] == nullptr;
    if (*created) {
        for (int k = 0; k < s->n_copies; k++) {
            struct tsr_tensor * cp = tsr_impl_new_tensor_nb(s->ctx, t->type, TSR_MAX_DIMS, t->ne, t->nb, nullptr, 0);
            if (!cp) return nullptr;
            tsr_impl_set_op(cp, TSR_OP_DUP, t);  /* the planner keeps t alive until the copy */
            tsr_format_name(cp, "%s#%s#%d", tsr_backend_name(s->backends[(size_t) b]), t->name, k);
            slot[k] = cp;
        }
    }
    return slot[c];
}

/* Pass 5: cut the nodes into splits and give each split copies of its foreign inputs. */
static bool sched_cut_splits(sched * s, struct tsr_cgraph * g) {
    s->splits.clear();
    s->inputs.clear();
    s->copy_base.clear();
    s->copy_slots.clear();
    for (int i = 0; i < g->n_nodes; i++) {
        struct tsr_tensor * t = g->nodes[i];
        const int id = sched_id(s, t);
        const bool view = sched_is_view_op(t->op);
        if (s->splits.empty() || (!view && id != s->splits.back().backend_id)) {
            if (!s->splits.empty()) s->splits.back().i_end = i;
            s->splits.push_back(sched_split{id, i, g->n_nodes, (int) s->inputs.size(), 0});
        }
        if (view) continue;
        sched_split & sp = s->splits.back();
        for (int j = 0; j < TSR_MAX_SRC; j++) {
            struct tsr_tensor * src = t->src[j];
            if (!src || sched_id(s, src) == sp.backend_id || sched_can_read(s, src, sp.backend_id)) continue;
            bool created = false;
            struct tsr_tensor * cp = sched_copy_of(s, src, sp.backend_id, s->cur_copy, &created);
            if (!cp) return false;
            if (created) { s->inputs.push_back(src); sp.n_inputs++; }
            s->rewires.push_back(sched_rewire{t, j, src});
            t->src[j] = cp;
        }
    }
    return true;
}

static void sched_restore_sources(sched * s) {
    for (size_t k = s->rewires.size(); k-- > 0;) s->rewires[k].node->src[s->rewires[k].src_index] = s->rewires[k].original;
    s->rewires.clear();
}

/* Bytes the copies and graph_copy of g need at most: every tensor copied to every other
 * backend, n_copies times. */
static size_t sched_ctx_need(const sched * s, const struct tsr_cgraph * g) {
    const size_t n = (size_t) (g->n_nodes + g->n_leafs);
    const size_t n_cp = n * (size_t) ((s->n_backends - 1) * s->n_copies);
    return n_cp * tsr_tensor_overhead() + tsr_graph_overhead_custom(n + n_cp, false);
}

static bool sched_ensure_ctx(sched * s, const struct tsr_cgraph * g) {
    const size_t need = sched_ctx_need(s, g);
    if (s->ctx && s->ctx_size >= need) { tsr_reset(s->ctx); return true; }
    tsr_free(s->ctx);
    struct tsr_init_params p = {need, nullptr, true};
    s->ctx = tsr_init(p);
    s->ctx_size = s->ctx ? need : 0;
    return s->ctx != nullptr;
}

/* graph_copy: per split its current input copies, then its nodes; the other copies (when
 * parallel) as leafs that live through the whole graph. Buffer ids: each tensor's backend. */
static bool sched_build_graph_copy(sched * s, struct tsr_cgraph * g) {
    const int n_cp = (int) s->inputs.size();
    s->graph_copy = tsr_new_graph_custom(s->ctx, (size_t) (g->n_nodes + g->n_leafs + n_cp * s->n_copies), false);
    if (!s->graph_copy) return false;
    struct tsr_cgraph * gc = s->graph_copy;
    s->node_ids.clear();
    s->leaf_ids.clear();
    s->input_bytes.assign((size_t) s->n_backends, 0);
    s->n_inputs_per_backend.assign((size_t) s->n_backends, 0);
    for (sched_split & sp : s->splits) {
        const size_t al = tsr_backend_buft_get_alignment(s->bufts[(size_t) sp.backend_id]);
        for (int k = 0; k < sp.n_inputs; k++) {
            struct tsr_tensor * in = s->inputs[(size_t) (sp.inputs_begin + k)];
            bool created = false;
            for (int c = 0; c < s->n_copies; c++) {
                struct tsr_tensor * cp = sched_copy_of(s, in, sp.backend_id, c, &created);
                s->input_bytes[(size_t) sp.backend_id] += TSR_PAD(tsr_backend_buft_get_alloc_size(s->bufts[(size_t) sp.backend_id], cp), al);
                if (c == s->cur_copy) {
                    gc->nodes[gc->n_nodes++] = cp;
                    s->node_ids.push_back(sp.backend_id);
                } else {
                    cp->flags |= TSR_TENSOR_FLAG_INPUT | TSR_TENSOR_FLAG_OUTPUT;
                    gc->leafs[gc->n_leafs++] = cp;
                    s->leaf_ids.push_back(sp.backend_id);
                }
            }
            s->n_inputs_per_backend[(size_t) sp.backend_id]++;
        }
        const int start = gc->n_nodes;
        for (int i = sp.i_start; i < sp.i_end; i++) {
            gc->nodes[gc->n_nodes++] = g->nodes[i];
            s->node_ids.push_back(sched_id(s, g->nodes[i]));
        }
        sp.i_start = start;
        sp.i_end = gc->n_nodes;
    }
    for (int i = 0; i < g->n_leafs; i++) {
        gc->leafs[gc->n_leafs++] = g->leafs[i];
        s->leaf_ids.push_back(sched_id(s, g->leafs[i]));
    }
    return true;
}

/* Every pass, from a graph to graph_copy. false + error; the graph's sources are restored. */
static bool sched_split_graph(sched * s, struct tsr_cgraph * g) {
    sched_restore_sources(s);
    s->allocated = nullptr;
    s->ids.clear();
    s->splits.clear();
    s->graph_copy = nullptr;
    s->planned = false;
    if (!g) return tsr_set_error("tsr_backend_sched: NULL graph");
    if ((size_t) (g->n_nodes + g->n_leafs) > s->graph_size) {
        return tsr_set_error("tsr_backend_sched: the graph has %d nodes and %d leafs, more than the graph_size %zu the scheduler was made for",
                             g->n_nodes, g->n_leafs, s->graph_size);
    }
    bool ok;
    try {
        ok = sched_ensure_ctx(s, g) && sched_assign_fixed(s, g);
        if (ok) {
            sched_expand(s, g, true, false);
            sched_expand(s, g, false, false);
            sched_expand(s, g, true, true);
            sched_expand(s, g, false, true);
            ok = sched_assign_fallbacks(s, g) && sched_assign_rest(s, g) && sched_cut_splits(s, g) &&
                 sched_build_graph_copy(s, g);
        }
    } catch (...) {
        ok = tsr_set_error("tsr_backend_sched: out of memory splitting a graph of %d nodes", g->n_nodes);
    }
    if (!ok) { sched_restore_sources(s); s->splits.clear(); s->graph_copy = nullptr; }
    return ok;
}

/* Fill split k's input copies; the producer (and the split's backend) must be done with them. */
static bool sched_copy_inputs(sched * s, const sched_split & sp) {
    tsr_backend_t be = s->backends[(size_t) sp.backend_id];
    for (int k = 0; k < sp.n_inputs; k++) {
        struct tsr_tensor * in = s->inputs[(size_t) (sp.inputs_begin + k)];
        bool created = false;
        struct tsr_tensor * cp = sched_copy_of(s, in, sp.backend_id, s->cur_copy, &created);
        tsr_backend_synchronize(s->backends[(size_t) sched_id(s, in)]);
        tsr_backend_synchronize(be);
        if (!tsr_backend_tensor_copy(in, cp)) return false;
    }
    return true;
}

/* Run one split, in pieces ending at each node the eval callback asks to see. */
static enum tsr_status sched_run_split(sched * s, const sched_split & sp) {
    tsr_backend_t be = s->backends[(size_t) sp.backend_id];
    if (!s->eval_cb) {
        tsr_cgraph v = tsr_graph_view(s->graph_copy, sp.i_start, sp.i_end);
        return tsr_backend_graph_compute(be, &v);
    }
    for (int j0 = sp.i_start; j0 < sp.i_end;) {
        int j1 = j0;
        bool wanted = false;
        for (; j1 < sp.i_end && !wanted; j1++) wanted = s->eval_cb(s->graph_copy->nodes[j1], true, s->eval_user);
        j1--;  /* the node asked for, or the split's last */
        tsr_cgraph v = tsr_graph_view(s->graph_copy, j0, j1 + 1);
        const enum tsr_status st = tsr_backend_graph_compute(be, &v);
        if (st != TSR_STATUS_SUCCESS) return st;
        tsr_backend_synchronize(be);
        if (wanted && !s->eval_cb(s->graph_copy->nodes[j1], false, s->eval_user)) return TSR_STATUS_ABORTED;
        j0 = j1 + 1;
    }
    return TSR_STATUS_SUCCESS;
}

static enum tsr_status sched_compute_splits(sched * s) {
    enum tsr_status st = TSR_STATUS_SUCCESS;
    for (const sched_split & sp : s->splits) {
        if (!sched_copy_inputs(s, sp)) { st = TSR_STATUS_FAILED; break; }
        st = sched_run_split(s, sp);
        if (st != TSR_STATUS_SUCCESS) break;
    }
    s->cur_copy = (s->cur_copy + 1) % s->n_copies;
    sched_restore_sources(s);
    s->allocated = nullptr;
    return st;
}

static int sched_backend_index(const sched * s, tsr_backend_t backend) {
    for (int i = 0; i < s->n_backends; i++) if (s->backends[(size_t) i] == backend) return i;
    return -1;
}

} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_backend_offload_op(tsr_backend_t backend, const struct tsr_tensor * op) {
    if (!backend || !op) return false;
    // a registered device decides (its offload_op); a backend without one (a test wrapper) gets
    // the same rule the GPU devices use
    if (tsr_backend_dev_t dev = tsr_backend_get_device(backend)) return tsr_backend_dev_offload_op(dev, op);
    if (tsr_backend_buft_is_host(tsr_backend_get_default_buffer_type(backend))) return false;
    return tsr_backend_offload_by_batch(op) && tsr_backend_supports_op(backend, op);
}

TSR_API_IMPL tsr_backend_sched_t tsr_backend_sched_new(tsr_backend_t * backends, tsr_backend_buffer_type_t * bufts, int n_backends,
                                                       size_t graph_size, bool parallel) {
    if (!backends || n_backends <= 0 || n_backends > TSR_SCHED_MAX_BACKENDS) {
        tsr_set_error("tsr_backend_sched_new: need 1 to %d backends (got %d)", TSR_SCHED_MAX_BACKENDS, n_backends);
        return nullptr;
    }
    if (graph_size == 0) { tsr_set_error("tsr_backend_sched_new: graph_size is 0"); return nullptr; }
    for (int i = 0; i < n_backends; i++) {
        if (!backends[i]) { tsr_set_error("tsr_backend_sched_new: backend %d is NULL", i); return nullptr; }
        for (int j = 0; j < i; j++) {
            if (backends[j] == backends[i]) { tsr_set_error("tsr_backend_sched_new: backend %d (%s) is also backend %d", i, tsr_backend_name(backends[i]), j); return nullptr; }
        }
        tsr_backend_buffer_type_t bt = bufts && bufts[i] ? bufts[i] : tsr_backend_get_default_buffer_type(backends[i]);
        if (!tsr_backend_supports_buft(backends[i], bt)) {
            tsr_set_error("tsr_backend_sched_new: backend %d (%s) cannot use buffer type %s", i, tsr_backend_name(backends[i]), tsr_backend_buft_name(bt));
            return nullptr;
        }
    }
    tsr_impl::sched * s = new (std::nothrow) tsr_impl::sched;
    if (!s) { tsr_set_error("tsr_backend_sched_new: out of memory"); return nullptr; }
    try {
        s->backends.assign(backends, backends + n_backends);
        for (int i = 0; i < n_backends; i++) s->bufts.push_back(bufts && bufts[i] ? bufts[i] : tsr_backend_get_default_buffer_type(backends[i]));
        s->n_backends = n_backends;
        s->n_copies = parallel ? TSR_SCHED_MAX_COPIES : 1;
        s->graph_size = graph_size;
        s->ids.reserve(graph_size);
    } catch (...) {
        delete s;
        tsr_set_error("tsr_backend_sched_new: out of memory for a graph of %zu tensors", graph_size);
        return nullptr;
    }
    s->galloc = tsr_gallocr_new_n(s->bufts.data(), n_backends);
    if (!s->galloc) { delete s; return nullptr; }
    tsr_gallocr_set_time_budget(s->galloc, 10.0);
    return tsr_impl::handle(s);
}

TSR_API_IMPL void tsr_backend_sched_free(tsr_backend_sched_t sched_h) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s) return;
    /* the last graph's sources are not put back: that graph may be gone already */
    tsr_gallocr_free(s->galloc);
    tsr_free(s->ctx);
    delete s;
}

TSR_API_IMPL bool tsr_backend_sched_reserve(tsr_backend_sched_t sched_h, struct tsr_cgraph * measure_graph) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s) return tsr_set_error("tsr_backend_sched_reserve: NULL scheduler");
    tsr_backend_sched_synchronize(sched_h);
    if (!tsr_impl::sched_split_graph(s, measure_graph)) return false;
    bool ok = tsr_gallocr_reserve_n(s->galloc, s->graph_copy, s->node_ids.data(), s->leaf_ids.data());
    for (size_t k = 0; ok && k < s->splits.size(); k++) {
        const tsr_impl::sched_split & sp = s->splits[k];
        tsr_cgraph v = tsr_graph_view(s->graph_copy, sp.i_start, sp.i_end);
        ok = tsr_backend_graph_reserve(s->backends[(size_t) sp.backend_id], &v);
    }
    s->planned = ok;
    tsr_impl::sched_restore_sources(s);
    return ok;
}

TSR_API_IMPL int tsr_backend_sched_get_n_backends(tsr_backend_sched_t sched_h) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s ? s->n_backends : 0;
}
TSR_API_IMPL tsr_backend_t tsr_backend_sched_get_backend(tsr_backend_sched_t sched_h, int i) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s && i >= 0 && i < s->n_backends ? s->backends[(size_t) i] : nullptr;
}
TSR_API_IMPL int tsr_backend_sched_get_n_splits(tsr_backend_sched_t sched_h) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s ? (int) s->splits.size() : 0;
}
TSR_API_IMPL int tsr_backend_sched_get_n_split_inputs(tsr_backend_sched_t sched_h) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s ? (int) s->inputs.size() : 0;
}
TSR_API_IMPL tsr_backend_t tsr_backend_sched_get_split_backend(tsr_backend_sched_t sched_h, int i) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s && i >= 0 && i < (int) s->splits.size() ? s->backends[(size_t) s->splits[(size_t) i].backend_id] : nullptr;
}
TSR_API_IMPL int tsr_backend_sched_get_split_n_inputs(tsr_backend_sched_t sched_h, int i) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s && i >= 0 && i < (int) s->splits.size() ? s->splits[(size_t) i].n_inputs : -1;
}
TSR_API_IMPL int tsr_backend_sched_get_n_copies(tsr_backend_sched_t sched_h) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s ? s->n_copies : 0;
}

TSR_API_IMPL size_t tsr_backend_sched_get_buffer_size(tsr_backend_sched_t sched_h, tsr_backend_t backend) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    const int b = s ? tsr_impl::sched_backend_index(s, backend) : -1;
    return b < 0 ? 0 : tsr_gallocr_get_buffer_size(s->galloc, b);
}

TSR_API_IMPL bool tsr_backend_sched_get_buffer_info(tsr_backend_sched_t sched_h, tsr_backend_t backend,
                                                    struct tsr_backend_sched_buffer_info * info) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s || !info) return tsr_set_error("tsr_backend_sched_get_buffer_info: NULL scheduler or info");
    const int b = tsr_impl::sched_backend_index(s, backend);
    if (b < 0) return tsr_set_error("tsr_backend_sched_get_buffer_info: backend %s is not in the scheduler", tsr_backend_name(backend));
    const struct tsr_plan * plan = tsr_gallocr_get_plan(s->galloc);
    if (!plan || s->input_bytes.empty()) return tsr_set_error("tsr_backend_sched_get_buffer_info: no plan yet (reserve or alloc_graph first)");
    info->buffer_size = tsr_gallocr_get_buffer_size(s->galloc, b);
    info->planned_size = plan->buffers[b].planned_size;
    info->lower_bound = plan->buffers[b].lower_bound;
    info->input_bytes = s->input_bytes[(size_t) b];
    info->n_inputs = s->n_inputs_per_backend[(size_t) b];
    return true;
}

TSR_API_IMPL void tsr_backend_sched_set_tensor_backend(tsr_backend_sched_t sched_h, struct tsr_tensor * node, tsr_backend_t backend) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s || !node) return;
    const int b = tsr_impl::sched_backend_index(s, backend);
    if (b < 0) { tsr_set_error("tsr_backend_sched_set_tensor_backend: backend %s is not in the scheduler", tsr_backend_name(backend)); return; }
    try { s->user_ids[node] = b; } catch (...) { tsr_set_error("tsr_backend_sched_set_tensor_backend: out of memory"); }
}

TSR_API_IMPL tsr_backend_t tsr_backend_sched_get_tensor_backend(tsr_backend_sched_t sched_h, struct tsr_tensor * node) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s || !node) return nullptr;
    int b = tsr_impl::sched_id(s, node);
    if (b < 0) {
        auto u = s->user_ids.find(node);
        if (u != s->user_ids.end()) b = u->second;
    }
    return b < 0 ? nullptr : s->backends[(size_t) b];
}

TSR_API_IMPL bool tsr_backend_sched_alloc_graph(tsr_backend_sched_t sched_h, struct tsr_cgraph * graph) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s) return tsr_set_error("tsr_backend_sched_alloc_graph: NULL scheduler");
    if (!tsr_impl::sched_split_graph(s, graph)) return false;
    if (!tsr_impl::ga_alloc_graph_ids(tsr_impl::internal(s->galloc), s->graph_copy, s->node_ids.data(), s->leaf_ids.data())) {
        tsr_impl::sched_restore_sources(s);
        return false;
    }
    s->planned = true;
    s->allocated = graph;
    return true;
}

TSR_API_IMPL enum tsr_status tsr_backend_sched_graph_compute_async(tsr_backend_sched_t sched_h, struct tsr_cgraph * graph) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s || !graph) { tsr_set_error("tsr_backend_sched_graph_compute: NULL scheduler or graph"); return TSR_STATUS_FAILED; }
    if (s->allocated != graph && !tsr_backend_sched_alloc_graph(sched_h, graph)) return TSR_STATUS_ALLOC_FAILED;
    return tsr_impl::sched_compute_splits(s);
}

TSR_API_IMPL enum tsr_status tsr_backend_sched_graph_compute(tsr_backend_sched_t sched_h, struct tsr_cgraph * graph) {
    const enum tsr_status st = tsr_backend_sched_graph_compute_async(sched_h, graph);
    tsr_backend_sched_synchronize(sched_h);
    return st;
}

TSR_API_IMPL void tsr_backend_sched_synchronize(tsr_backend_sched_t sched_h) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s) return;
    for (tsr_backend_t b : s->backends) tsr_backend_synchronize(b);
}

TSR_API_IMPL void tsr_backend_sched_reset(tsr_backend_sched_t sched_h) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s) return;
    tsr_impl::sched_restore_sources(s);
    s->allocated = nullptr;
    s->ids.clear();
    s->user_ids.clear();
}

TSR_API_IMPL void tsr_backend_sched_set_eval_callback(tsr_backend_sched_t sched_h, tsr_backend_sched_eval_callback callback,
                                                      void * user_data) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s) return;
    s->eval_cb = callback;
    s->eval_user = user_data;
}
#endif
/* ---- backends/cpu/tessera-cpu.h ---- */
/*
 * tessera-cpu.h - the CPU backend: computes graphs on host memory with a persistent
 * thread pool, SIMD kernels chosen at run time (scalar, AVX2+FMA, AVX-512, NEON) and
 * one reused workspace for per-op scratch.
 *
 * Header-only like the core: TSR_IMPLEMENTATION, in one C++17 file, compiles the core
 * and every backend header included in that file, in any include order (see
 * tessera/tessera.h and README "Using tessera").
 *
 * Environment: TSR_CPU_ISA=scalar|avx2|avx512|neon forces a kernel path (a path the CPU
 * lacks is ignored with a message on stderr).
 */
#ifndef TESSERA_CPU_H
#define TESSERA_CPU_H


#ifdef __cplusplus
extern "C" {
#endif

/* Kernel paths. The best the CPU supports is used unless forced. */
enum tsr_cpu_isa {
    TSR_CPU_ISA_SCALAR = 0,  /* portable C++: the reference every other path is tested against */
    TSR_CPU_ISA_AVX2   = 1,  /* x86-64 AVX2 + FMA + F16C */
    TSR_CPU_ISA_AVX512 = 2,  /* x86-64 AVX-512 F/BW/VL/DQ (+ BF16 and VNNI where present) */
    TSR_CPU_ISA_NEON   = 3   /* aarch64 Advanced SIMD */
};

/* A new CPU backend (threads: hardware concurrency, at most 64). NULL + error on failure. */
TSR_API tsr_backend_t tsr_backend_cpu_init(void);
/* The CPU backend's kind in the registry (backend.h): one device, "CPU", of type CPU,
 * whose init_backend takes "n_threads=N". */
TSR_API tsr_backend_reg_t tsr_backend_cpu_reg(void);
/* true when backend was made by tsr_backend_cpu_init. */
TSR_API bool tsr_backend_is_cpu(tsr_backend_t backend);
/* Threads used by graph_compute (the caller's thread counts as one); n < 1 is 1.
 * The pool is rebuilt here, never while a graph runs. */
TSR_API void tsr_backend_cpu_set_n_threads(tsr_backend_t backend, int n_threads);
TSR_API int  tsr_backend_cpu_get_n_threads(tsr_backend_t backend);
/* Called between nodes; returning true stops the graph (TSR_STATUS_ABORTED). NULL removes it. */
TSR_API void tsr_backend_cpu_set_abort_callback(tsr_backend_t backend, bool (*abort_callback)(void * data), void * data);
/* Where the workspace memory comes from (copied; alloc->user must outlive the backend).
 * NULL: the process default (tsr_get_host_allocator() at the time of the call). The
 * current workspace is freed and regrown on the next reserve/compute. */
TSR_API void tsr_backend_cpu_set_host_allocator(tsr_backend_t backend, const struct tsr_host_allocator * alloc);

/* ISA query and control (process-wide). */
TSR_API const char *     tsr_cpu_isa_name(enum tsr_cpu_isa isa);             /* "scalar", "avx2", ... */
TSR_API bool             tsr_cpu_isa_supported(enum tsr_cpu_isa isa);        /* this CPU (and build) can run it */
TSR_API enum tsr_cpu_isa tsr_cpu_isa_best(void);                             /* best supported */
TSR_API enum tsr_cpu_isa tsr_cpu_get_isa(void);                              /* in use now */
/* Force a path for every CPU backend (tests, benchmarks). false + error when the CPU
 * lacks it (nothing changes). Do not call while a graph runs. */
TSR_API bool             tsr_cpu_set_isa(enum tsr_cpu_isa isa);
/* Optional x86 extensions used inside the AVX-512 path. */
TSR_API bool             tsr_cpu_has_avx512_bf16(void);
TSR_API bool             tsr_cpu_has_avx512_vnni(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#define TSR_CPU_DECLARED  /* every declaration above is in: the implementation may follow */
#endif /* TESSERA_CPU_H */

/* ---- implementation (outside the include guard: see tessera/tessera.h) -------------- */
#if defined(TSR_IMPLEMENTATION) && !defined(TSR_CPU_IMPLEMENTED)
#define TSR_CPU_IMPLEMENTED
#ifndef __cplusplus
#error "TSR_IMPLEMENTATION must be defined in a C++17 translation unit"
#endif
/* ---- backends/cpu/impl/cpu_internal.inl ---- */
/*
 * cpu_internal.inl - shared internals of the CPU backend: includes, element conversions,
 * the per-thread compute parameters and the kernel table every ISA path fills in.
 * Everything here is internal (anonymous namespace): two vendored copies never clash.
 */

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#define TSR_CPU_X86 1
#include <immintrin.h>
#include <cpuid.h>
#endif
#if defined(__aarch64__)
#define TSR_CPU_ARM64 1
#include <arm_neon.h>
#endif

/* ISA-specific functions live in the same TU; each carries its target attribute. */
#if defined(TSR_CPU_X86) && (defined(__GNUC__) || defined(__clang__))
#define TSR_TARGET_AVX2   __attribute__((target("avx2,fma,f16c")))
#define TSR_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define TSR_TARGET_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))
#define TSR_TARGET_AVX512VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define TSR_CPU_HAVE_X86_KERNELS 1
#endif

namespace {
namespace tcpu {

/* ---- scalar element conversions (exact, round to nearest even) ------------------------ */

static inline float bits_f32(uint32_t w) { float f; std::memcpy(&f, &w, 4); return f; }
static inline uint32_t f32_bits(float f) { uint32_t w; std::memcpy(&w, &f, 4); return w; }

static inline float h2f(uint16_t h) {
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const float normalized = bits_f32((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float denormalized = bits_f32((two_w >> 17) | (126u << 23)) - 0.5f;
    const uint32_t result = sign | (two_w < (1u << 27) ? f32_bits(denormalized) : f32_bits(normalized));
    return bits_f32(result);
}

static inline uint16_t f2h(float f) {
    float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
    const uint32_t w = f32_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = bits_f32((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = f32_bits(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissa_bits = bits & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

static inline float bf2f(uint16_t h) { return bits_f32((uint32_t)h << 16); }
static inline uint16_t f2bf(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

/* float -> int32, truncating, defined for every input (a plain cast is undefined for
 * NaN and out-of-range values): those give INT32_MIN, what x86's cvttss2si / cvttps2dq
 * return, so the scalar path agrees with the SIMD ones and x86 builds keep their results. */
static inline int32_t trunc_to_i32(float v) {
    return (v >= -2147483648.0f && v < 2147483648.0f) ? (int32_t)v : INT32_MIN;
}

/* Load/store one element of a (non-quantized) type as float. */
static inline float ld(enum tsr_type t, const void * p) {
    switch (t) {
        case TSR_TYPE_F32:  return *(const float *)p;
        case TSR_TYPE_F16:  return h2f(*(const uint16_t *)p);
        case TSR_TYPE_BF16: return bf2f(*(const uint16_t *)p);
        case TSR_TYPE_I32:  return (float)*(const int32_t *)p;
        default: return 0.0f;
    }
}
static inline void st(enum tsr_type t, void * p, float v) {
    switch (t) {
        case TSR_TYPE_F32:  *(float *)p = v; break;
        case TSR_TYPE_F16:  *(uint16_t *)p = f2h(v); break;
        case TSR_TYPE_BF16: *(uint16_t *)p = f2bf(v); break;
        case TSR_TYPE_I32:  *(int32_t *)p = trunc_to_i32(v); break;
        default: break;
    }
}

/* Activations quantized for integer dot products with Q8_0/Q4_0 weights (workspace only):
 * x[i] ~= d * qs[i]; sum = sum(qs) (used for the unsigned-offset trick). */
struct yq8 {
    float   d;
    int32_t sum;
    int8_t  qs[32];
};
static_assert(sizeof(yq8) == 40, "yq8 layout");

/* A quantized activation row of nb blocks is followed (at a 64-byte offset) by side arrays
 * the matrix-vector kernels load as whole vectors, one group per 4 blocks (written by
 * y_side). The integer bias (-offset * sum(qs)) sits in the first lane of each block's lane
 * group, so vpdpbusd starting from it undoes the weights' unsigned offset exactly, and the
 * scales are already spread over the lanes each block's dot product lands in. */
struct yside_q8 {           /* Q8_0 weights: one zmm per pair of blocks, 8 int32 lanes per block */
    int8_t  qs[128];        /* blocks 4g..4g+3 back to back */
    int32_t bias[32];       /* lane 8j: -128 * sum(block j) */
    float   d[32];          /* lanes 8j..8j+7: d(block j) */
};
struct yside_q4 {           /* Q4_0 weights: one zmm per 4 blocks, 4 int32 lanes per block */
    int8_t  lo[64];         /* qs 0..15 of blocks 4g..4g+3 (the low nibbles' elements) */
    int8_t  hi[64];         /* qs 16..31 (the high nibbles') */
    int32_t bias[16];       /* lane 4j: -8 * sum(block j) */
    float   d[16];          /* lanes 4j..4j+3: d(block j) */
};
static_assert(sizeof(yside_q8) == 384 && sizeof(yside_q4) == 256, "y side layout");
static inline size_t yq8_side_offset(int64_t nb) { return ((size_t)nb * sizeof(yq8) + 63) / 64 * 64; }
/* Room for either side layout: y_side writes only the one the weight type reads. */
static inline size_t yq8_row_bytes(int64_t n) {
    return yq8_side_offset(n / 32) + (size_t)(n / 128) * std::max(sizeof(yside_q8), sizeof(yside_q4));
}
static inline const yside_q8 * y_side_q8(const yq8 * y, int64_t nb) {
    return (const yside_q8 *)((const char *)y + yq8_side_offset(nb));
}
static inline const yside_q4 * y_side_q4(const yq8 * y, int64_t nb) {
    return (const yside_q4 *)((const char *)y + yq8_side_offset(nb));
}
/* The side arrays for weights of type wt (Q8_0 or Q4_0) after the nb blocks of y. */
static inline void y_side(yq8 * y, int64_t nb, enum tsr_type wt) {
    char * side = (char *)y + yq8_side_offset(nb);
    for (int64_t g = 0; g < nb / 4; ++g) {
        for (int j = 0; j < 4; ++j) {
            const yq8 & b = y[g * 4 + j];
            if (wt == TSR_TYPE_Q8_0) {
                yside_q8 & s8 = ((yside_q8 *)side)[g];
                std::memcpy(s8.qs + 32 * j, b.qs, 32);
                for (int l = 0; l < 8; ++l) {
                    s8.bias[8 * j + l] = l == 0 ? -128 * b.sum : 0;
                    s8.d[8 * j + l] = b.d;
                }
            } else {
                yside_q4 & s4 = ((yside_q4 *)side)[g];
                std::memcpy(s4.lo + 16 * j, b.qs, 16);
                std::memcpy(s4.hi + 16 * j, b.qs + 16, 16);
                for (int l = 0; l < 4; ++l) {
                    s4.bias[4 * j + l] = l == 0 ? -8 * b.sum : 0;
                    s4.d[4 * j + l] = b.d;
                }
            }
        }
    }
}

/* Element k of a float-type row (T: 0 f32, 1 f16, 2 bf16): the scalar tails of the SIMD dots. */
template <int T>
static inline float elem_as_f32(const char * row, int64_t k) {
    if (T == 0) return ((const float *)row)[k];
    const uint16_t h = ((const uint16_t *)row)[k];
    return T == 1 ? h2f(h) : bf2f(h);
}

/* ---- the kernel table one ISA path fills ------------------------------------------------ */

/* A packed-panel GEMM: C[n*ldc + m] (+)= sum_k A[m][k] * B[n][k] over one k block.
 * pack_a packs up to mr rows of src0 (row stride lda bytes, `rows` valid rows, the rest
 * zero) for k in [k0, k0+kc); pack_b packs up to nr rows of the B operand (F32 rows, or
 * yq8 rows for integer kernels). kc is a multiple of 32; k beyond K packs as zero. */
struct gemm_impl {
    int mr, nr, kc, mc;
    size_t a_bytes_32k;   /* packed bytes per 32 k of one mr panel */
    size_t b_bytes_32k;   /* packed bytes per 32 k of one nr panel */
    bool   b_is_q8;       /* B operand is yq8 rows (else F32 rows) */
    void (*pack_a)(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst);
    void (*pack_b)(const char * b, size_t ldb, int rows, int64_t K, int64_t k0, int kc, void * dst);
    void (*kernel)(int kc, const void * ap, const void * bp, float * c, size_t ldc, int mr_valid, int nr_valid, bool accumulate);
};

/* Every ISA fills its tables (gemm_impl, act_kernels, kernels) member by member, on a
 * value-initialized struct, so each entry names its member and slot: a new member or slot
 * cannot shift the others, and what a path leaves unset is NULL. constexpr keeps them
 * constant-initialized. */

/* GEMM g with its A rows packed by pack_a (the F16 / BF16 variants of an F32 GEMM). */
static constexpr gemm_impl gemm_with_pack_a(gemm_impl g, decltype(gemm_impl::pack_a) pack_a) {
    g.pack_a = pack_a;
    return g;
}

enum { SLOT_F32 = 0, SLOT_F16, SLOT_BF16, SLOT_Q8_0, SLOT_Q4_0, SLOT_COUNT };

static inline int type_slot(enum tsr_type t) {
    switch (t) {
        case TSR_TYPE_F32:  return SLOT_F32;
        case TSR_TYPE_F16:  return SLOT_F16;
        case TSR_TYPE_BF16: return SLOT_BF16;
        case TSR_TYPE_Q8_0: return SLOT_Q8_0;
        case TSR_TYPE_Q4_0: return SLOT_Q4_0;
        default: return -1;
    }
}

/* Weight types with integer dot products against activations quantized to Q8_K. */
enum { KSLOT_Q2_K = 0, KSLOT_Q3_K, KSLOT_Q4_K, KSLOT_Q5_K, KSLOT_Q6_K, KSLOT_COUNT };

static inline int q8k_slot(enum tsr_type t) {
    switch (t) {
        case TSR_TYPE_Q2_K: return KSLOT_Q2_K;
        case TSR_TYPE_Q3_K: return KSLOT_Q3_K;
        case TSR_TYPE_Q4_K: return KSLOT_Q4_K;
        case TSR_TYPE_Q5_K: return KSLOT_Q5_K;
        case TSR_TYPE_Q6_K: return KSLOT_Q6_K;
        default: return -1;
    }
}

/* 32-element weight types with integer dot products against yq8 activations (besides
 * Q8_0 / Q4_0, which have GEMM and 4-row kernels of their own). */
enum { QSLOT_Q4_1 = 0, QSLOT_Q5_0, QSLOT_Q5_1, QSLOT_IQ4_NL, QSLOT_COUNT };

static inline int yq8_slot(enum tsr_type t) {
    switch (t) {
        case TSR_TYPE_Q4_1: return QSLOT_Q4_1;
        case TSR_TYPE_Q5_0: return QSLOT_Q5_0;
        case TSR_TYPE_Q5_1: return QSLOT_Q5_1;
        case TSR_TYPE_IQ4_NL: return QSLOT_IQ4_NL;
        default: return -1;
    }
}

#if defined(__GNUC__)
#define TSR_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define TSR_ALWAYS_INLINE inline
#endif

/* Weight types beyond Q8_0 / Q4_0: ops read them a row at a time through the core's
 * dequantization (get_rows, cpy, ...); mul_mat through their Q8_K or yq8 dot products. */
static inline bool is_row_quant(enum tsr_type t) {
    switch (t) {
        case TSR_TYPE_Q4_1: case TSR_TYPE_Q5_0: case TSR_TYPE_Q5_1: case TSR_TYPE_IQ4_NL:
        case TSR_TYPE_Q2_K: case TSR_TYPE_Q3_K: case TSR_TYPE_Q4_K: case TSR_TYPE_Q5_K: case TSR_TYPE_Q6_K:
            return true;
        default:
            return false;
    }
}

/* Constants of the vector expf/tanhf every SIMD path implements the same way.
 * e^x = 2^n e^r: n = round(x log2 e), r = (x - n ln2_hi) - n ln2_lo (Cody-Waite: ln2_hi
 * has 15 significant bits, so n ln2_hi is exact for |n| < 512 and the first step loses
 * nothing); e^r on |r| <= ln2/2 as 1 + r + r^2 q(r), q of degree 4 interpolated at
 * Chebyshev nodes (0.18 ulp before rounding). x is clamped to [lo, hi] first: below lo
 * the result is 0, above hi +inf, and 2^n (|n| <= 159) still splits into two normal
 * factors 2^(n>>1) * 2^(n - (n>>1)), so denormal results round once and nothing shifts
 * out of range. tanh: |x| < tanh_small uses x + x^3 P(x^2) (P: degree 5, 0.07 ulp), where
 * 1 - 2 / (e^2|x| + 1) would cancel. */
namespace vexp {
constexpr float lo = -110.0f, hi = 100.0f;
constexpr float log2e = 1.44269504088896341f;
constexpr float ln2_hi = 0.693145751953125f;     /* 0x3f317200 */
constexpr float ln2_lo = 1.42860682030941723e-6f; /* ln2 - ln2_hi */
constexpr float c2 = 0.5f, c3 = 1.666657627e-01f, c4 = 4.166655615e-02f, c5 = 8.363178931e-03f, c6 = 1.392618404e-03f;
constexpr float tanh_small = 0.625f;
constexpr float t3 = -3.333333433e-01f, t5 = 1.333330423e-01f, t7 = -5.395925790e-02f, t9 = 2.176891826e-02f,
                t11 = -8.343945257e-03f, t13 = 2.292744815e-03f;
constexpr float gelu_k1 = -2.0f * 0.7978845608028654f;            /* -2 sqrt(2/pi) */
constexpr float gelu_k3 = -2.0f * 0.7978845608028654f * 0.044715f;
constexpr float gelu_quick_k = -1.702f;
} // namespace vexp

/* The soft_max rows whose result does not depend on the path's exp, given the row's max mx
 * (NaN when any entry is NaN): a NaN or +inf entry makes the whole row NaN, as in PyTorch;
 * a row of only -inf (fully masked) becomes zeros (tessera's choice: PyTorch gives NaN
 * there, docs/ops.md). Returns false for an ordinary row, which has a finite max. */
static inline bool soft_max_special_row(float mx, int64_t n, float * x) {
    if (mx != mx || mx == INFINITY) {
        for (int64_t i = 0; i < n; ++i) x[i] = NAN;
        return true;
    }
    if (mx == -INFINITY) {
        for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
        return true;
    }
    return false;
}

/* The activations as row kernels compute them (tanh-form gelu as x sigmoid(2u), the
 * same function without the cancellation of 1 + tanh(u) for negative x). */
enum { ACT_EXP, ACT_SILU, ACT_SIGMOID, ACT_GELU, ACT_GELU_QUICK, ACT_TANH };

/* Row kernels for the transcendental ops, built on a vectorized expf (y may alias x;
 * any n). Each matches its libm formula in the ops_*.inl files to a few ulp. */
struct act_kernels {
    void (*exp)(int64_t n, const float * x, float * y);
    void (*silu)(int64_t n, const float * x, float * y);
    void (*sigmoid)(int64_t n, const float * x, float * y);
    void (*gelu)(int64_t n, const float * x, float * y);        /* tanh approximation */
    void (*gelu_quick)(int64_t n, const float * x, float * y);
    void (*tanh)(int64_t n, const float * x, float * y);
    void (*swiglu)(int64_t n, const float * x, const float * g, float * y);  /* silu(x) * g */
    /* in place: x = exp(x - max) / sum; a row with a NaN, +inf or only -inf as soft_max_special_row */
    void (*soft_max)(int64_t n, float * x);
};

struct kernels {
    enum tsr_cpu_isa isa;
    /* dot products of n elements: x (src0 row) with an F32 row, or with yq8 blocks */
    float (*dot_f32)(int64_t n, const float * x, const float * y);
    float (*dot_f16)(int64_t n, const uint16_t * x, const float * y);
    float (*dot_bf16)(int64_t n, const uint16_t * x, const float * y);
    float (*dot_q8_0)(int64_t n, const tsr_block_q8_0 * x, const yq8 * y);
    float (*dot_q4_0)(int64_t n, const tsr_block_q4_0 * x, const yq8 * y);
    /* 4 rows at once, by slot: out[r] = dot(x + r * lda, y), y an F32 row or a yq8 row with
     * its side arrays. Matrix-vector passes rows far apart, so each thread keeps four long
     * sequential DRAM streams in flight. NULL: one row at a time. */
    void (*dot4[SLOT_COUNT])(int64_t n, const char * x, size_t lda, const void * y, float * out);
    /* x (src0 row of the slot's K-quant type) with y quantized to Q8_K; NULL: the scalar path's */
    float (*dot_q8k[KSLOT_COUNT])(int64_t n, const void * x, const tsr_block_q8_K * y);
    /* x (src0 row of the slot's 32-element type) with yq8 blocks; NULL: the scalar path's */
    float (*dot_yq8[QSLOT_COUNT])(int64_t n, const void * x, const yq8 * y);
    /* F32 row -> Q8_K blocks (n a multiple of 256) */
    void (*quantize_q8k)(const float * x, tsr_block_q8_K * y, int64_t n);
    /* F32 row -> yq8 blocks (n a multiple of 32) */
    void (*quantize_y)(const float * x, yq8 * y, int64_t n);
    /* y[i] += a * x[i] (flash attention V accumulation) */
    void (*axpy_f32)(int64_t n, float a, const float * x, float * y);
    /* F16 row -> F32 (flash attention V rows) */
    void (*f16_to_f32)(const void * x, float * y, int64_t n);
    /* packed GEMM per src0 type slot; NULL: dot products only */
    const gemm_impl * gemm[SLOT_COUNT];
    /* transcendental row kernels; NULL: the libm loops of the ops_*.inl files */
    const act_kernels * act;
};

/* ---- what a thread sees while it computes one node -------------------------------------- */

struct pool;

struct cparams {
    int ith, nth;
    uint8_t * wdata;      /* the workspace (shared by all threads of this node) */
    size_t    wsize;
    pool *    tp;
    const kernels * K;
    /* set (once, by thread 0, with tsr_set_error on the caller's thread) when a node finds
     * its input data bad, e.g. an expert id out of range: the graph's compute fails */
    std::atomic<bool> * failed = nullptr;
};

static void barrier(const cparams & p);

/* Activations quantized for integer dot products (yq8 blocks of 32, Q8_K super-blocks of
 * 256) give every block holding a NaN or an infinity the scale NaN: quantizing counts those
 * as 0, so the dots would drop them, where float arithmetic (PyTorch, the float paths, the
 * GPU backends) gives NaN (or +-inf). x * 0 is NaN exactly for those values, and the sum
 * vectorizes. One pass after the ISA's quantizer, so every path marks the same blocks. */
template <int QK, class Block> static inline void mark_nonfinite_blocks(const float * x, Block * y, int64_t n) {
    for (int64_t b = 0; b < n / QK; ++b) {
        float probe = 0.0f;
        for (int j = 0; j < QK; ++j) probe += x[b * QK + j] * 0.0f;
        if (probe != probe) y[b].d = NAN;
    }
}

static inline void quantize_y_nonfinite_nan(const kernels * K, const float * x, yq8 * y, int64_t n) {
    K->quantize_y(x, y, n);
    mark_nonfinite_blocks<32>(x, y, n);
}

/* Rows [r0, r1) of nr for thread ith of nth. */
static inline void split_rows(int64_t nr, int ith, int nth, int64_t & r0, int64_t & r1) {
    const int64_t dr = (nr + nth - 1) / nth;
    r0 = std::min<int64_t>(dr * ith, nr);
    r1 = std::min<int64_t>(r0 + dr, nr);
}

static inline char * tptr(const tsr_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

static inline size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

} // namespace tcpu
} // namespace
/* ---- backends/cpu/impl/threadpool.inl ---- */
/*
 * threadpool.inl - a persistent pool: n-1 workers plus the calling thread.
 *
 * One job (a whole graph) is posted per run; workers spin briefly on the job counter,
 * then block on a condition variable, so an idle pool costs nothing and a 2-core machine
 * shared with other work is not starved. Nodes are separated by a spin-then-yield
 * barrier. No thread is created per graph.
 */
namespace {
namespace tcpu {

static inline void cpu_relax() {
#if defined(TSR_CPU_X86)
    _mm_pause();
#elif defined(TSR_CPU_ARM64)
    __asm__ __volatile__("yield");
#endif
}

struct pool {
    typedef void (*job_fn)(void * arg, int ith, int nth);

    int n_threads = 1;
    std::vector<std::thread> workers;
    std::mutex mtx;
    std::condition_variable cv;
    std::atomic<uint64_t> gen{0};
    std::atomic<bool> stop{false};
    std::atomic<int> n_done{0};
    job_fn job = nullptr;
    void * job_arg = nullptr;

    /* barrier state: arrivals and a phase counter */
    alignas(64) std::atomic<int> bar_count{0};
    alignas(64) std::atomic<int> bar_phase{0};
    /* dynamic work distribution inside a node: reset to 0 by every barrier */
    alignas(64) std::atomic<int64_t> chunk{0};

    static constexpr int SPIN_IDLE = 1 << 14;   /* ~50-100 us of pauses before blocking */
    static constexpr int SPIN_BARRIER = 1 << 12;

    explicit pool(int n) : n_threads(n < 1 ? 1 : n) {
        workers.reserve((size_t)(n_threads - 1));
        try {
            for (int i = 1; i < n_threads; ++i) workers.emplace_back([this, i] { worker_main(i); });
        } catch (...) {
            /* a thread failed to start: stop and join the ones running, so no joinable
             * std::thread is destroyed (std::terminate), then let make_pool report it */
            shutdown();
            throw;
        }
    }
    ~pool() { shutdown(); }
    void shutdown() {
        {
            std::lock_guard<std::mutex> lk(mtx);
            stop.store(true, std::memory_order_release);
            gen.fetch_add(1, std::memory_order_acq_rel);
        }
        cv.notify_all();
        for (auto & t : workers) t.join();
        workers.clear();
    }
    pool(const pool &) = delete;
    pool & operator=(const pool &) = delete;

    void worker_main(int ith) {
        uint64_t seen = 0;
        for (;;) {
            int spins = 0;
            uint64_t g = gen.load(std::memory_order_acquire);
            while (g == seen && spins < SPIN_IDLE) {
                cpu_relax();
                ++spins;
                g = gen.load(std::memory_order_acquire);
            }
            if (g == seen) {
                std::unique_lock<std::mutex> lk(mtx);
                cv.wait(lk, [&] { return gen.load(std::memory_order_acquire) != seen; });
                g = gen.load(std::memory_order_acquire);
            }
            seen = g;
            if (stop.load(std::memory_order_acquire)) return;
            job(job_arg, ith, n_threads);
            n_done.fetch_add(1, std::memory_order_acq_rel);
        }
    }

    /* Runs fn(arg, ith, nth) on every thread (the caller is thread 0); returns when all
     * have finished. */
    void run(job_fn fn, void * arg) {
        if (n_threads == 1) { fn(arg, 0, 1); return; }
        n_done.store(0, std::memory_order_relaxed);
        chunk.store(0, std::memory_order_relaxed);   /* the last node of a graph ends without a barrier */
        {
            std::lock_guard<std::mutex> lk(mtx);
            job = fn;
            job_arg = arg;
            gen.fetch_add(1, std::memory_order_acq_rel);
        }
        cv.notify_all();
        fn(arg, 0, n_threads);
        int spins = 0;
        while (n_done.load(std::memory_order_acquire) != n_threads - 1) {
            if (++spins < SPIN_BARRIER) cpu_relax(); else std::this_thread::yield();
        }
    }

    void barrier() {
        if (n_threads == 1) return;
        const int phase = bar_phase.load(std::memory_order_acquire);
        if (bar_count.fetch_add(1, std::memory_order_acq_rel) == n_threads - 1) {
            bar_count.store(0, std::memory_order_relaxed);
            chunk.store(0, std::memory_order_relaxed);
            bar_phase.fetch_add(1, std::memory_order_acq_rel);
            return;
        }
        int spins = 0;
        while (bar_phase.load(std::memory_order_acquire) == phase) {
            if (++spins < SPIN_BARRIER) cpu_relax(); else std::this_thread::yield();
        }
    }
};

static void barrier(const cparams & p) {
    if (p.nth > 1) p.tp->barrier();
}

} // namespace tcpu
} // namespace
/* ---- backends/cpu/impl/workspace.inl ---- */
/*
 * workspace.inl - the CPU backend's one scratch block (ncnn's workspace allocator).
 *
 * Each op states the scratch it needs (op_work_size in backend_cpu.inl); reserve/compute
 * take the maximum over the graph and grow this block only when a graph needs more.
 * Memory comes from the backend's host allocator.
 */
namespace {
namespace tcpu {

struct workspace {
    tsr_host_allocator alloc{};
    bool   has_alloc = false;   /* false: use tsr_get_host_allocator() at allocation time */
    void * ptr = nullptr;
    size_t size = 0;
    tsr_host_allocator used{};  /* the allocator ptr came from */

    static constexpr size_t ALIGN = 64;

    void release() {
        if (ptr && used.free) used.free(ptr, used.user);
        ptr = nullptr;
        size = 0;
    }
    /* Grow to at least `need` bytes (never shrinks). false + error on failure. */
    bool reserve(size_t need) {
        if (need <= size) return true;
        release();
        const tsr_host_allocator * a = has_alloc ? &alloc : tsr_get_host_allocator();
        if (!a || !a->alloc) return tsr_set_error("CPU backend: no host allocator for a %zu-byte workspace", need);
        const size_t sz = align_up(need, 4096);
        void * p = a->alloc(sz, ALIGN, a->user);
        if (!p) return tsr_set_error("CPU backend: workspace allocation of %zu bytes failed", sz);
        ptr = p;
        size = sz;
        used = *a;
        return true;
    }
    ~workspace() { release(); }
};

} // namespace tcpu
} // namespace
/* ---- backends/cpu/impl/isa.inl ---- */
/*
 * isa.inl - what the CPU can run (CPUID on x86-64, always NEON on aarch64) and which
 * kernel path is in use (best available, TSR_CPU_ISA, or tsr_cpu_set_isa).
 */
namespace {
namespace tcpu {

struct cpu_features {
    bool avx2 = false, fma = false, f16c = false;
    bool avx512 = false;            /* F + BW + VL + DQ with OS support */
    bool avx512_bf16 = false, avx512_vnni = false;
    bool neon = false;
};

static cpu_features detect_features() {
    cpu_features f;
#if defined(TSR_CPU_X86)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = (c >> 27) & 1;
    f.fma = (c >> 12) & 1;
    f.f16c = (c >> 29) & 1;
    const bool avx = (c >> 28) & 1;
    uint64_t xcr0 = 0;
    if (osxsave) {
        unsigned lo = 0, hi = 0;
        __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((uint64_t)hi << 32) | lo;
    }
    const bool os_avx = (xcr0 & 0x6) == 0x6;
    const bool os_avx512 = (xcr0 & 0xE6) == 0xE6;
    unsigned maxleaf = __get_cpuid_max(0, nullptr);
    if (maxleaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f.avx2 = avx && os_avx && ((b >> 5) & 1) && f.fma && f.f16c;
        const bool f512 = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
        f.avx512 = f.avx2 && os_avx512 && f512 && dq && bw && vl;
        f.avx512_vnni = f.avx512 && ((c >> 11) & 1);
        unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
        __cpuid_count(7, 1, a1, b1, c1, d1);
        f.avx512_bf16 = f.avx512 && ((a1 >> 5) & 1);
    }
#elif defined(TSR_CPU_ARM64)
    f.neon = true;
#endif
    return f;
}

static const cpu_features & features() {
    static const cpu_features f = detect_features();
    return f;
}

static bool isa_supported(enum tsr_cpu_isa isa) {
    const cpu_features & f = features();
    switch (isa) {
        case TSR_CPU_ISA_SCALAR: return true;
#if defined(TSR_CPU_HAVE_X86_KERNELS)
        case TSR_CPU_ISA_AVX2:   return f.avx2;
        case TSR_CPU_ISA_AVX512: return f.avx512;
#endif
#if defined(TSR_CPU_ARM64)
        case TSR_CPU_ISA_NEON:   return f.neon;
#endif
        default: return false;
    }
}

static enum tsr_cpu_isa isa_best() {
    if (isa_supported(TSR_CPU_ISA_AVX512)) return TSR_CPU_ISA_AVX512;
    if (isa_supported(TSR_CPU_ISA_AVX2)) return TSR_CPU_ISA_AVX2;
    if (isa_supported(TSR_CPU_ISA_NEON)) return TSR_CPU_ISA_NEON;
    return TSR_CPU_ISA_SCALAR;
}

static const char * isa_name(enum tsr_cpu_isa isa) {
    switch (isa) {
        case TSR_CPU_ISA_SCALAR: return "scalar";
        case TSR_CPU_ISA_AVX2:   return "avx2";
        case TSR_CPU_ISA_AVX512: return "avx512";
        case TSR_CPU_ISA_NEON:   return "neon";
    }
    return "unknown";
}

static enum tsr_cpu_isa isa_initial() {
    enum tsr_cpu_isa best = isa_best();
    const char * env = std::getenv("TSR_CPU_ISA");
    if (!env || !*env) return best;
    for (int i = 0; i <= (int)TSR_CPU_ISA_NEON; ++i) {
        if (std::strcmp(env, isa_name((enum tsr_cpu_isa)i)) == 0) {
            if (isa_supported((enum tsr_cpu_isa)i)) return (enum tsr_cpu_isa)i;
            std::fprintf(stderr, "tessera: TSR_CPU_ISA=%s is not supported by this CPU; using %s\n", env, isa_name(best));
            return best;
        }
    }
    std::fprintf(stderr, "tessera: unknown TSR_CPU_ISA=%s (scalar|avx2|avx512|neon); using %s\n", env, isa_name(best));
    return best;
}

static std::atomic<int> & isa_current() {
    static std::atomic<int> cur{(int)isa_initial()};
    return cur;
}

} // namespace tcpu
} // namespace
/* ---- backends/cpu/impl/quant.inl ---- */
/*
 * quant.inl - Q8_0 / Q4_0 quantization and the scalar dot products (the reference the
 * SIMD paths are tested against), plus row conversions to and from F32 for every type.
 */
namespace {
namespace tcpu {

/* ---- quantization (ggml's reference rounding) ------------------------------------------ */

static void quantize_row_q8_0_ref(const float * x, tsr_block_q8_0 * y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float * xb = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        for (int j = 0; j < 32; ++j) y[b].qs[j] = (int8_t)std::lround(xb[j] * id);
    }
}

static void quantize_row_q4_0_ref(const float * x, tsr_block_q4_0 * y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float * xb = x + b * 32;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; ++j) {
            if (amax < std::fabs(xb[j])) { amax = std::fabs(xb[j]); max = xb[j]; }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        for (int j = 0; j < 16; ++j) {
            const int xi0 = std::min(15, (int)(int8_t)trunc_to_i32(xb[j] * id + 8.5f));
            const int xi1 = std::min(15, (int)(int8_t)trunc_to_i32(xb[16 + j] * id + 8.5f));
            y[b].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

static void quantize_y_scalar(const float * x, yq8 * y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float * xb = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < 32; ++j) {
            /* clamped, and NaN (from NaN or inf inputs) as 0: casting NaN to int is undefined */
            const float v = xb[j] * id;
            const int q = v == v ? (int)std::nearbyint(std::min(127.0f, std::max(-127.0f, v))) : 0;
            y[b].qs[j] = (int8_t)q;
            sum += q;
        }
        y[b].d = d;
        y[b].sum = sum;
    }
}

static void dequantize_row_q8_0(const tsr_block_q8_0 * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < 32; ++j) y[b * 32 + j] = d * x[b].qs[j];
    }
}

static void dequantize_row_q4_0(const tsr_block_q4_0 * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < 16; ++j) {
            y[b * 32 + j] = d * (float)((x[b].qs[j] & 0x0F) - 8);
            y[b * 32 + j + 16] = d * (float)((x[b].qs[j] >> 4) - 8);
        }
    }
}

/* Row conversions for any supported type (n a multiple of the block size). */
static void row_to_f32(enum tsr_type t, const void * src, float * dst, int64_t n) {
    switch (t) {
        case TSR_TYPE_F32: std::memcpy(dst, src, (size_t)n * 4); break;
        case TSR_TYPE_F16: for (int64_t i = 0; i < n; ++i) dst[i] = h2f(((const uint16_t *)src)[i]); break;
        case TSR_TYPE_BF16: for (int64_t i = 0; i < n; ++i) dst[i] = bf2f(((const uint16_t *)src)[i]); break;
        case TSR_TYPE_I32: for (int64_t i = 0; i < n; ++i) dst[i] = (float)((const int32_t *)src)[i]; break;
        case TSR_TYPE_Q8_0: dequantize_row_q8_0((const tsr_block_q8_0 *)src, dst, n); break;
        case TSR_TYPE_Q4_0: dequantize_row_q4_0((const tsr_block_q4_0 *)src, dst, n); break;
        default: tsr_to_float_row(t, src, dst, n); break;  /* the other quantized types */
    }
}

static void row_from_f32(enum tsr_type t, const float * src, void * dst, int64_t n) {
    switch (t) {
        case TSR_TYPE_F32: std::memmove(dst, src, (size_t)n * 4); break;
        case TSR_TYPE_F16: for (int64_t i = 0; i < n; ++i) ((uint16_t *)dst)[i] = f2h(src[i]); break;
        case TSR_TYPE_BF16: for (int64_t i = 0; i < n; ++i) ((uint16_t *)dst)[i] = f2bf(src[i]); break;
        case TSR_TYPE_I32: for (int64_t i = 0; i < n; ++i) ((int32_t *)dst)[i] = trunc_to_i32(src[i]); break;
        case TSR_TYPE_Q8_0: quantize_row_q8_0_ref(src, (tsr_block_q8_0 *)dst, n); break;
        case TSR_TYPE_Q4_0: quantize_row_q4_0_ref(src, (tsr_block_q4_0 *)dst, n); break;
        default: tsr_from_float_row(t, src, dst, n); break;  /* the other quantized types */
    }
}

/* ---- scalar dot products -------------------------------------------------------------- */

static float dot_f32_scalar(int64_t n, const float * x, const float * y) {
    float s[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; ++j) s[j] += x[i + j] * y[i + j];
    for (; i < n; ++i) s[0] += x[i] * y[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

static float dot_f16_scalar(int64_t n, const uint16_t * x, const float * y) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += h2f(x[i]) * y[i];
    return s;
}

static float dot_bf16_scalar(int64_t n, const uint16_t * x, const float * y) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += bf2f(x[i]) * y[i];
    return s;
}

static float dot_q8_0_scalar(int64_t n, const tsr_block_q8_0 * x, const yq8 * y) {
    float s = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        int32_t acc = 0;
        for (int j = 0; j < 32; ++j) acc += (int32_t)x[b].qs[j] * y[b].qs[j];
        s += h2f(x[b].d) * y[b].d * (float)acc;
    }
    return s;
}

static float dot_q4_0_scalar(int64_t n, const tsr_block_q4_0 * x, const yq8 * y) {
    float s = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        int32_t acc = 0;
        for (int j = 0; j < 16; ++j) {
            acc += (int32_t)(x[b].qs[j] & 0x0F) * y[b].qs[j];
            acc += (int32_t)(x[b].qs[j] >> 4) * y[b].qs[j + 16];
        }
        acc -= 8 * y[b].sum;
        s += h2f(x[b].d) * y[b].d * (float)acc;
    }
    return s;
}

/* K-quants against Q8_K (ggml's vec_dot_q*_K_q8_K): a super-block's levels are unpacked to
 * bytes, multiplied with the activations in exact int32 sums per sub-block, scaled by the
 * sub-block scales in int32 and by d once per super-block; mins meet the sums of 16
 * activations (bsums). Plain loops over bytes: the ISA wrappers inline them into AVX2 code,
 * where the compiler vectorizes them. */
static TSR_ALWAYS_INLINE int32_t dot_i8(const int8_t * q, const int8_t * y, int n) {
    int32_t s = 0;
    for (int l = 0; l < n; ++l) s += (int32_t)q[l] * y[l];
    return s;
}

/* sum over sub-blocks of len elements of scale[s] * (q . y) */
static TSR_ALWAYS_INLINE int32_t scaled_dot(const int8_t * q, const int8_t * y, const int * scale, int nsub, int len) {
    int32_t s = 0;
    for (int b = 0; b < nsub; ++b) s += scale[b] * dot_i8(q + len * b, y + len * b, len);
    return s;
}

/* Q4_K (HIGH false) / Q5_K (HIGH true): levels 0..15 / 0..31, 8 sub-blocks of 32. */
template <bool HIGH>
static TSR_ALWAYS_INLINE float dot_k4_q8_K(int64_t n, const uint8_t * base, size_t bsize, const tsr_block_q8_K * y) {
    float s = 0.0f;
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        const uint8_t * b = base + (size_t)i * bsize;
        const uint8_t * scales = b + 4;
        const uint8_t * qh = b + 16;
        const uint8_t * qs = HIGH ? b + 48 : b + 16;
        int8_t q[TSR_QK_K];
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l) {
                int lo = qs[32 * c + l] & 0x0F, hi = qs[32 * c + l] >> 4;
                if (HIGH) {
                    lo |= ((qh[l] >> (2 * c)) & 1) << 4;
                    hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
                }
                q[64 * c + l] = (int8_t)lo;
                q[64 * c + 32 + l] = (int8_t)hi;
            }
        int sc[8], mn[8];
        int32_t summ = 0;
        for (int sb = 0; sb < 8; ++sb) {
            tsr_impl::k4_scale_min(sb, scales, &sc[sb], &mn[sb]);
            summ += mn[sb] * (y[i].bsums[2 * sb] + y[i].bsums[2 * sb + 1]);
        }
        uint16_t d16, dmin16;
        std::memcpy(&d16, b, 2);
        std::memcpy(&dmin16, b + 2, 2);
        s += y[i].d * h2f(d16) * (float)scaled_dot(q, y[i].qs, sc, 8, 32) - y[i].d * h2f(dmin16) * (float)summ;
    }
    return s;
}

/* Q2_K (levels 0..3, 4-bit scale and min per 16) and Q3_K (levels -4..3, 6-bit signed
 * scale per 16): the low two bits of element 128h + 32j + l sit at bits 2j of qs[32h + l]. */
template <bool Q3>
static TSR_ALWAYS_INLINE float dot_k2_q8_K(int64_t n, const void * vx, const tsr_block_q8_K * y) {
    float s = 0.0f;
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        const uint8_t * qs = Q3 ? ((const tsr_block_q3_K *)vx)[i].qs : ((const tsr_block_q2_K *)vx)[i].qs;
        int8_t q[TSR_QK_K];
        for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 4; ++j)
                for (int l = 0; l < 32; ++l) {
                    int v = (qs[32 * h + l] >> (2 * j)) & 3;
                    if (Q3) v -= ((((const tsr_block_q3_K *)vx)[i].hmask[l] >> (4 * h + j)) & 1) ? 0 : 4;
                    q[128 * h + 32 * j + l] = (int8_t)v;
                }
        int sc[16];
        int32_t summ = 0;
        float d, dmin = 0.0f;
        if (Q3) {
            const tsr_block_q3_K & b = ((const tsr_block_q3_K *)vx)[i];
            for (int g = 0; g < 16; ++g) sc[g] = tsr_impl::q3k_scale(g, b.scales);
            d = h2f(b.d);
        } else {
            const tsr_block_q2_K & b = ((const tsr_block_q2_K *)vx)[i];
            for (int g = 0; g < 16; ++g) {
                sc[g] = b.scales[g] & 0x0F;
                summ += (b.scales[g] >> 4) * y[i].bsums[g];
            }
            d = h2f(b.d);
            dmin = h2f(b.dmin);
        }
        s += y[i].d * d * (float)scaled_dot(q, y[i].qs, sc, 16, 16) - y[i].d * dmin * (float)summ;
    }
    return s;
}

static float dot_q2_K_q8_K_scalar(int64_t n, const void * x, const tsr_block_q8_K * y) { return dot_k2_q8_K<false>(n, x, y); }
static float dot_q3_K_q8_K_scalar(int64_t n, const void * x, const tsr_block_q8_K * y) { return dot_k2_q8_K<true>(n, x, y); }
static float dot_q4_K_q8_K_scalar(int64_t n, const void * x, const tsr_block_q8_K * y) {
    return dot_k4_q8_K<false>(n, (const uint8_t *)x, sizeof(tsr_block_q4_K), y);
}
static float dot_q5_K_q8_K_scalar(int64_t n, const void * x, const tsr_block_q8_K * y) {
    return dot_k4_q8_K<true>(n, (const uint8_t *)x, sizeof(tsr_block_q5_K), y);
}

static float dot_q6_K_q8_K_scalar(int64_t n, const void * vx, const tsr_block_q8_K * y) {
    const tsr_block_q6_K * x = (const tsr_block_q6_K *)vx;
    float s = 0.0f;
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        int32_t sumi = 0;
        for (int g = 0; g < 16; ++g) {
            int32_t acc = 0;
            for (int e = 16 * g; e < 16 * g + 16; ++e) acc += tsr_impl::q6k_value(x[i], e) * y[i].qs[e];
            sumi += x[i].scales[g] * acc;
        }
        s += h2f(x[i].d) * y[i].d * (float)sumi;
    }
    return s;
}

/* Q4_1, Q5_0, Q5_1, IQ4_NL against yq8: a block's levels unpacked, one exact int32 sum
 * per block; Q4_1 / Q5_1's min meets the activations' block sum, Q5_0's offset of 16 too. */
template <tsr_type T>
static TSR_ALWAYS_INLINE float dot_q32_yq8(int64_t n, const void * vx, const yq8 * y) {
    float s = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        int q[32];
        float d, m = 0.0f;
        if (T == TSR_TYPE_Q4_1 || T == TSR_TYPE_Q5_1) {
            using block = std::conditional_t<T == TSR_TYPE_Q4_1, tsr_block_q4_1, tsr_block_q5_1>;
            const block & x = ((const block *)vx)[b];
            tsr_impl::unpack_q32(x.qs, tsr_impl::fifth_bits(x), q);
            d = h2f(x.d);
            m = h2f(x.m);
        } else if (T == TSR_TYPE_Q5_0) {
            const tsr_block_q5_0 & x = ((const tsr_block_q5_0 *)vx)[b];
            tsr_impl::unpack_q32(x.qs, tsr_impl::load_u32(x.qh), q);
            d = h2f(x.d);
        } else {
            const tsr_block_iq4_nl & x = ((const tsr_block_iq4_nl *)vx)[b];
            tsr_impl::unpack_q32(x.qs, 0, q);
            for (int j = 0; j < 32; ++j) q[j] = tsr_impl::iq4nl_values[q[j]];
            d = h2f(x.d);
        }
        int32_t acc = 0;
        for (int j = 0; j < 32; ++j) acc += q[j] * y[b].qs[j];
        if (T == TSR_TYPE_Q5_0) acc -= 16 * y[b].sum;
        s += d * y[b].d * (float)acc + m * y[b].d * (float)y[b].sum;
    }
    return s;
}

static float dot_q4_1_yq8_scalar(int64_t n, const void * x, const yq8 * y) { return dot_q32_yq8<TSR_TYPE_Q4_1>(n, x, y); }
static float dot_q5_0_yq8_scalar(int64_t n, const void * x, const yq8 * y) { return dot_q32_yq8<TSR_TYPE_Q5_0>(n, x, y); }
static float dot_q5_1_yq8_scalar(int64_t n, const void * x, const yq8 * y) { return dot_q32_yq8<TSR_TYPE_Q5_1>(n, x, y); }
static float dot_iq4_nl_yq8_scalar(int64_t n, const void * x, const yq8 * y) { return dot_q32_yq8<TSR_TYPE_IQ4_NL>(n, x, y); }

static void quantize_q8k_scalar(const float * x, tsr_block_q8_K * y, int64_t n) { tsr_from_float_row(TSR_TYPE_Q8_K, x, y, n); }

static void axpy_f32_scalar(int64_t n, float a, const float * x, float * y) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

static void f16_to_f32_scalar(const void * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = h2f(((const uint16_t *)x)[i]);
}

/* The reference path: dot products one row at a time, no GEMM, libm activations (NULL). */
static constexpr kernels kernels_scalar = [] {
    kernels k{};
    k.isa = TSR_CPU_ISA_SCALAR;
    k.dot_f32 = dot_f32_scalar;
    k.dot_f16 = dot_f16_scalar;
    k.dot_bf16 = dot_bf16_scalar;
    k.dot_q8_0 = dot_q8_0_scalar;
    k.dot_q4_0 = dot_q4_0_scalar;
    k.dot_q8k[KSLOT_Q2_K] = dot_q2_K_q8_K_scalar;
    k.dot_q8k[KSLOT_Q3_K] = dot_q3_K_q8_K_scalar;
    k.dot_q8k[KSLOT_Q4_K] = dot_q4_K_q8_K_scalar;
    k.dot_q8k[KSLOT_Q5_K] = dot_q5_K_q8_K_scalar;
    k.dot_q8k[KSLOT_Q6_K] = dot_q6_K_q8_K_scalar;
    k.dot_yq8[QSLOT_Q4_1] = dot_q4_1_yq8_scalar;
    k.dot_yq8[QSLOT_Q5_0] = dot_q5_0_yq8_scalar;
    k.dot_yq8[QSLOT_Q5_1] = dot_q5_1_yq8_scalar;
    k.dot_yq8[QSLOT_IQ4_NL] = dot_iq4_nl_yq8_scalar;
    k.quantize_q8k = quantize_q8k_scalar;
    k.quantize_y = quantize_y_scalar;
    k.axpy_f32 = axpy_f32_scalar;
    k.f16_to_f32 = f16_to_f32_scalar;
    return k;
}();

} // namespace tcpu
} // namespace
/* ---- backends/cpu/impl/pack.inl ---- */
/*
 * pack.inl - operand packing for the GEMM kernels (ISA-independent layouts; the row
 * converters passed in are the ISA's fast ones).
 *
 * F32 panels:  for k in [0, kc): R floats (one per row), zero beyond K and beyond `rows`.
 * BF16 panels: for each k pair p: R uint32 (two bf16 of one row), zero padded.
 * Int8 panels (A, from Q8_0/Q4_0): per 32 k: 8 quads x R rows x 4 unsigned bytes, then R
 *              float scales (Q8_0 may instead keep its bytes signed, for kernels that
 *              move the sign onto B themselves). B (from yq8): per 32 k: 8 quads x R x 4 signed bytes, R float
 *              scales, R int32 biases (-offset * sum(q)) that undo the unsigned offset.
 * Signed int8 panels (A from Q8_0/Q4_0, B from yq8; for kernels that multiply signed by
 *              signed, so no offset or bias): per 32 k: R rows x 32 signed bytes in k
 *              order, then R float scales; zero beyond `rows` and beyond K.
 */
namespace {
namespace tcpu {

typedef void (*row_cvt_fn)(const void * src, float * dst, int64_t n);

static void cvt_f32_copy(const void * src, float * dst, int64_t n) { std::memcpy(dst, src, (size_t)n * 4); }

/* F32 panel of R rows from rows of any float type (element size ES, converter CVT). */
template <int R, int ES, row_cvt_fn CVT>
static void pack_panel_f32(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    float * d = (float *)dst;
    const int kv = (int)std::max<int64_t>(0, std::min<int64_t>(kc, K - k0));
    if (CVT == cvt_f32_copy) {  /* F32 rows: transpose directly, k outer (contiguous writes) */
        const float * rp[R];
        for (int r = 0; r < R; ++r) rp[r] = r < rows ? (const float *)(a + (size_t)r * lda) + k0 : nullptr;
        for (int k = 0; k < kv; ++k)
            for (int r = 0; r < R; ++r) d[(size_t)k * R + r] = rp[r] ? rp[r][k] : 0.0f;
        for (int k = kv; k < kc; ++k)
            for (int r = 0; r < R; ++r) d[(size_t)k * R + r] = 0.0f;
        return;
    }
    alignas(64) float tmp[1024];
    for (int r = 0; r < R; ++r) {
        if (r < rows && kv > 0) {
            CVT(a + (size_t)r * lda + (size_t)k0 * ES, tmp, kv);
            for (int k = 0; k < kv; ++k) d[(size_t)k * R + r] = tmp[k];
            for (int k = kv; k < kc; ++k) d[(size_t)k * R + r] = 0.0f;
        } else {
            for (int k = 0; k < kc; ++k) d[(size_t)k * R + r] = 0.0f;
        }
    }
}

/* BF16 pair panel of R rows from BF16 rows. */
template <int R>
static void pack_panel_bf16_from_bf16(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    uint32_t * d = (uint32_t *)dst;
    const int kv = (int)std::max<int64_t>(0, std::min<int64_t>(kc, K - k0));
    const int np = kc / 2;
    for (int r = 0; r < R; ++r) {
        const uint16_t * row = r < rows ? (const uint16_t *)(a + (size_t)r * lda) + k0 : nullptr;
        for (int p = 0; p < np; ++p) {
            uint32_t lo = 0, hi = 0;
            if (row && 2 * p < kv) lo = row[2 * p];
            if (row && 2 * p + 1 < kv) hi = row[2 * p + 1];
            d[(size_t)p * R + r] = lo | (hi << 16);
        }
    }
}

/* BF16 pair panel of R rows from F32 rows (rounded to nearest even). */
template <int R>
static void pack_panel_bf16_from_f32(const char * b, size_t ldb, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    uint32_t * d = (uint32_t *)dst;
    const int kv = (int)std::max<int64_t>(0, std::min<int64_t>(kc, K - k0));
    const int np = kc / 2;
    for (int r = 0; r < R; ++r) {
        const float * row = r < rows ? (const float *)(b + (size_t)r * ldb) + k0 : nullptr;
        for (int p = 0; p < np; ++p) {
            uint32_t lo = 0, hi = 0;
            if (row && 2 * p < kv) lo = f2bf(row[2 * p]);
            if (row && 2 * p + 1 < kv) hi = f2bf(row[2 * p + 1]);
            d[(size_t)p * R + r] = lo | (hi << 16);
        }
    }
}

/* Int8 A panel from Q8_0 (OFF = 128: bytes made unsigned, unless SIGNED) or Q4_0 (nibbles
 * 0..15). SIGNED exists for AVX2: u8 x s8 pairs of an offset Q8_0 overflow vpmaddubsw. */
template <int R, enum tsr_type T, bool SIGNED = false>
static void pack_panel_i8_a(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    (void)K;
    uint8_t * d = (uint8_t *)dst;
    const int nb = kc / 32;
    const int64_t b0 = k0 / 32;
    const int64_t nbk = K / 32;
    for (int b = 0; b < nb; ++b) {
        uint8_t * q = d + (size_t)b * R * 36;
        float * sc = (float *)(q + R * 32);
        for (int r = 0; r < R; ++r) {
            uint8_t vals[32];
            float scale = 0.0f;
            if (r < rows && b0 + b < nbk) {
                if (T == TSR_TYPE_Q8_0) {
                    const tsr_block_q8_0 * blk = (const tsr_block_q8_0 *)(a + (size_t)r * lda) + b0 + b;
                    for (int j = 0; j < 32; ++j) vals[j] = (uint8_t)(blk->qs[j] ^ (SIGNED ? 0 : 0x80));
                    scale = h2f(blk->d);
                } else {
                    const tsr_block_q4_0 * blk = (const tsr_block_q4_0 *)(a + (size_t)r * lda) + b0 + b;
                    for (int j = 0; j < 16; ++j) {
                        vals[j] = blk->qs[j] & 0x0F;
                        vals[j + 16] = blk->qs[j] >> 4;
                    }
                    scale = h2f(blk->d);
                }
            } else {
                std::memset(vals, T == TSR_TYPE_Q8_0 ? (SIGNED ? 0 : 0x80) : 8, 32);
            }
            for (int qd = 0; qd < 8; ++qd) std::memcpy(q + ((size_t)qd * R + r) * 4, vals + qd * 4, 4);
            sc[r] = scale;
        }
    }
}

/* Int8 B panel from yq8 rows; OFF is the A operand's unsigned offset (128 or 8; 0 for a
 * signed A). */
template <int R, int OFF>
static void pack_panel_i8_b(const char * b, size_t ldb, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    uint8_t * d = (uint8_t *)dst;
    const int nb = kc / 32;
    const int64_t b0 = k0 / 32;
    const int64_t nbk = K / 32;
    for (int bb = 0; bb < nb; ++bb) {
        uint8_t * q = d + (size_t)bb * R * 40;
        float * sc = (float *)(q + R * 32);
        int32_t * bias = (int32_t *)(q + R * 36);
        for (int r = 0; r < R; ++r) {
            if (r < rows && b0 + bb < nbk) {
                const yq8 * blk = (const yq8 *)(b + (size_t)r * ldb) + b0 + bb;
                for (int qd = 0; qd < 8; ++qd) std::memcpy(q + ((size_t)qd * R + r) * 4, blk->qs + qd * 4, 4);
                sc[r] = blk->d;
                bias[r] = -OFF * blk->sum;
            } else {
                for (int qd = 0; qd < 8; ++qd) std::memset(q + ((size_t)qd * R + r) * 4, 0, 4);
                sc[r] = 0.0f;
                bias[r] = 0;
            }
        }
    }
}

/* Signed int8 A panel from Q8_0 (bytes as stored) or Q4_0 (nibbles - 8). */
template <int R, enum tsr_type T>
static void pack_panel_s8_a(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    uint8_t * d = (uint8_t *)dst;
    const int64_t b0 = k0 / 32, nbk = K / 32;
    for (int b = 0; b < kc / 32; ++b) {
        int8_t * q = (int8_t *)(d + (size_t)b * R * 36);
        float * sc = (float *)(d + (size_t)b * R * 36 + R * 32);
        for (int r = 0; r < R; ++r) {
            int8_t * qr = q + r * 32;
            if (r >= rows || b0 + b >= nbk) {
                std::memset(qr, 0, 32);
                sc[r] = 0.0f;
            } else if (T == TSR_TYPE_Q8_0) {
                const tsr_block_q8_0 * blk = (const tsr_block_q8_0 *)(a + (size_t)r * lda) + b0 + b;
                std::memcpy(qr, blk->qs, 32);
                sc[r] = h2f(blk->d);
            } else {
                const tsr_block_q4_0 * blk = (const tsr_block_q4_0 *)(a + (size_t)r * lda) + b0 + b;
                for (int j = 0; j < 16; ++j) {
                    qr[j] = (int8_t)((blk->qs[j] & 0x0F) - 8);
                    qr[j + 16] = (int8_t)((blk->qs[j] >> 4) - 8);
                }
                sc[r] = h2f(blk->d);
            }
        }
    }
}

/* Signed int8 B panel from yq8 rows. */
template <int R>
static void pack_panel_s8_b(const char * b, size_t ldb, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    uint8_t * d = (uint8_t *)dst;
    const int64_t b0 = k0 / 32, nbk = K / 32;
    for (int bb = 0; bb < kc / 32; ++bb) {
        int8_t * q = (int8_t *)(d + (size_t)bb * R * 36);
        float * sc = (float *)(d + (size_t)bb * R * 36 + R * 32);
        for (int r = 0; r < R; ++r) {
            if (r < rows && b0 + bb < nbk) {
                const yq8 * blk = (const yq8 *)(b + (size_t)r * ldb) + b0 + bb;
                std::memcpy(q + r * 32, blk->qs, 32);
                sc[r] = blk->d;
            } else {
                std::memset(q + r * 32, 0, 32);
                sc[r] = 0.0f;
            }
        }
    }
}

} // namespace tcpu
} // namespace
/* ---- backends/cpu/impl/kernels_avx2.inl ---- */
/*
 * kernels_avx2.inl - x86-64 AVX2 + FMA + F16C kernels (runtime-dispatched; compiled with
 * target attributes so the rest of the TU stays baseline x86-64).
 */
#if defined(TSR_CPU_HAVE_X86_KERNELS)
/* GCC 12 warns about the deliberately undefined lanes inside some intrinsics. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {
namespace tcpu {

TSR_TARGET_AVX2 static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

TSR_TARGET_AVX2 static inline float h2f_avx2(uint16_t h) { return _cvtsh_ss(h); }

TSR_TARGET_AVX2 static float dot_f32_avx2(int64_t n, const float * x, const float * y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    float s = hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; ++i) s += x[i] * y[i];
    return s;
}

TSR_TARGET_AVX2 static float dot_f16_avx2(int64_t n, const uint16_t * x, const float * y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + 8))), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + 16))), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + 24))), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))), _mm256_loadu_ps(y + i), a0);
    float s = hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; ++i) s += h2f(x[i]) * y[i];
    return s;
}

TSR_TARGET_AVX2 static inline __m256 bf16x8_avx2(const uint16_t * p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

TSR_TARGET_AVX2 static float dot_bf16_avx2(int64_t n, const uint16_t * x, const float * y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(bf16x8_avx2(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(bf16x8_avx2(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(bf16x8_avx2(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(bf16x8_avx2(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(bf16x8_avx2(x + i), _mm256_loadu_ps(y + i), a0);
    float s = hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; ++i) s += bf2f(x[i]) * y[i];
    return s;
}

/* sum over 32 int8 products as 8 int32 lanes: x signed, y signed (sign trick). */
TSR_TARGET_AVX2 static inline __m256i dot32_s8s8_avx2(__m256i x, __m256i y) {
    const __m256i ax = _mm256_sign_epi8(x, x);
    const __m256i sy = _mm256_sign_epi8(y, x);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
}
/* x unsigned (0..15), y signed */
TSR_TARGET_AVX2 static inline __m256i dot32_u4s8_avx2(__m256i x, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1));
}

TSR_TARGET_AVX2 static inline __m256i unpack_q4_avx2(const uint8_t * qs) {
    const __m128i v = _mm_loadu_si128((const __m128i *)qs);
    const __m128i m = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(v, m);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

TSR_TARGET_AVX2 static float dot_q8_0_avx2(int64_t n, const tsr_block_q8_0 * x, const yq8 * y) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const int64_t nb = n / 32;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const __m256i p0 = dot32_s8s8_avx2(_mm256_loadu_si256((const __m256i *)x[b].qs), _mm256_loadu_si256((const __m256i *)y[b].qs));
        const __m256i p1 = dot32_s8s8_avx2(_mm256_loadu_si256((const __m256i *)x[b + 1].qs), _mm256_loadu_si256((const __m256i *)y[b + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(h2f_avx2(x[b].d) * y[b].d), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(h2f_avx2(x[b + 1].d) * y[b + 1].d), acc1);
    }
    for (; b < nb; ++b) {
        const __m256i p0 = dot32_s8s8_avx2(_mm256_loadu_si256((const __m256i *)x[b].qs), _mm256_loadu_si256((const __m256i *)y[b].qs));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(h2f_avx2(x[b].d) * y[b].d), acc0);
    }
    return hsum256(_mm256_add_ps(acc0, acc1));
}

TSR_TARGET_AVX2 static float dot_q4_0_avx2(int64_t n, const tsr_block_q4_0 * x, const yq8 * y) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float corr = 0.0f;
    const int64_t nb = n / 32;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const __m256i p0 = dot32_u4s8_avx2(unpack_q4_avx2(x[b].qs), _mm256_loadu_si256((const __m256i *)y[b].qs));
        const __m256i p1 = dot32_u4s8_avx2(unpack_q4_avx2(x[b + 1].qs), _mm256_loadu_si256((const __m256i *)y[b + 1].qs));
        const float d0 = h2f_avx2(x[b].d) * y[b].d, d1 = h2f_avx2(x[b + 1].d) * y[b + 1].d;
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(d0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(d1), acc1);
        corr += d0 * (float)y[b].sum + d1 * (float)y[b + 1].sum;
    }
    for (; b < nb; ++b) {
        const __m256i p0 = dot32_u4s8_avx2(unpack_q4_avx2(x[b].qs), _mm256_loadu_si256((const __m256i *)y[b].qs));
        const float d0 = h2f_avx2(x[b].d) * y[b].d;
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(d0), acc0);
        corr += d0 * (float)y[b].sum;
    }
    return hsum256(_mm256_add_ps(acc0, acc1)) - 8.0f * corr;
}

/* 4 rows at once (x + r * lda) for matrix-vector: the y loads are shared, and the rows the
 * driver passes are far apart, so each core keeps four sequential DRAM streams going. */
template <int T>
TSR_TARGET_AVX2 static inline __m256 load8_as_f32_avx2(const char * row, int64_t i) {
    if (T == 0) return _mm256_loadu_ps((const float *)row + i);
    if (T == 1) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)));
    return bf16x8_avx2((const uint16_t *)row + i);
}

template <int T>
TSR_TARGET_AVX2 static void dot4_avx2(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const float * y = (const float *)yv;
    __m256 acc0[4], acc1[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8);
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
            acc0[r] = _mm256_fmadd_ps(load8_as_f32_avx2<T>(x + (size_t)r * lda, i), y0, acc0[r]);
            acc1[r] = _mm256_fmadd_ps(load8_as_f32_avx2<T>(x + (size_t)r * lda, i + 8), y1, acc1[r]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 y0 = _mm256_loadu_ps(y + i);
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) acc0[r] = _mm256_fmadd_ps(load8_as_f32_avx2<T>(x + (size_t)r * lda, i), y0, acc0[r]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
        float s = hsum256(_mm256_add_ps(acc0[r], acc1[r]));
        for (int64_t k = i; k < n; ++k) s += elem_as_f32<T>(x + (size_t)r * lda, k) * y[k];
        out[r] = s;
    }
}

TSR_TARGET_AVX2 static void dot4_q8_0_avx2(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const yq8 * y = (const yq8 *)yv;
    __m256 acc[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 32; ++b) {
        const __m256i yq = _mm256_loadu_si256((const __m256i *)y[b].qs);
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
            const tsr_block_q8_0 * xb = (const tsr_block_q8_0 *)(x + (size_t)r * lda) + b;
            const __m256i p = dot32_s8s8_avx2(_mm256_loadu_si256((const __m256i *)xb->qs), yq);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f_avx2(xb->d) * y[b].d), acc[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) out[r] = hsum256(acc[r]);
}

/* Q4_0: a pair of blocks per ymm against yq8's Q4 side arrays (y elements in nibble order,
 * the -8 * sum bias and the y scales per lane), so no scalar work per block remains. */
TSR_TARGET_AVX2 static void dot4_q4_0_avx2(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const yq8 * y = (const yq8 *)yv;
    const int64_t nb = n / 32, ng = nb / 4;
    const yside_q4 * ys = y_side_q4(y, nb);
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m128i rep = _mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3);  /* [d0 x4, d1 x4] */
    __m256 acc[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < ng * 4; b += 2) {
        const yside_q4 & s = ys[b / 4];
        const int h = (int)(b & 2);  /* which pair of the group */
        const __m256i ylo = _mm256_loadu_si256((const __m256i *)(s.lo + 16 * h));
        const __m256i yhi = _mm256_loadu_si256((const __m256i *)(s.hi + 16 * h));
        const __m256i yb = _mm256_loadu_si256((const __m256i *)(s.bias + 4 * h));
        const __m256 dy = _mm256_loadu_ps(s.d + 4 * h);
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
            const tsr_block_q4_0 * xb = (const tsr_block_q4_0 *)(x + (size_t)r * lda) + b;
            const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)xb[0].qs)),
                                                      _mm_loadu_si128((const __m128i *)xb[1].qs), 1);
            const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            /* nibble x int8 pairs are at most 2 * 15 * 127 = 3810: two of them add up in int16 */
            const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_maddubs_epi16(hi, yhi));
            const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(p16, ones), yb);
            const __m128i d2 = _mm_insert_epi16(_mm_cvtsi32_si128(xb[0].d), xb[1].d, 1);
            const __m256 dx = _mm256_cvtph_ps(_mm_shuffle_epi8(d2, rep));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dx, dy), acc[r]);
        }
    }
    float corr[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t b = ng * 4; b < nb; ++b) {  /* blocks past the last group of 4 */
        const __m256i yq = _mm256_loadu_si256((const __m256i *)y[b].qs);
        for (int r = 0; r < 4; ++r) {
            const tsr_block_q4_0 * xb = (const tsr_block_q4_0 *)(x + (size_t)r * lda) + b;
            const float d = h2f_avx2(xb->d) * y[b].d;
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot32_u4s8_avx2(unpack_q4_avx2(xb->qs), yq)), _mm256_set1_ps(d), acc[r]);
            corr[r] += d * (float)y[b].sum;
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) out[r] = hsum256(acc[r]) - 8.0f * corr[r];
}

/* NaN lanes as +0 (maxps would pass a NaN on; the scalar reference skips them). */
TSR_TARGET_AVX2 static inline __m256 nan_to_zero_avx2(__m256 v) { return _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q)); }

/* x * id rounded to int32, NaN as 0 and clamped to [-127, 127] as quantize_y_scalar does: the
 * integer kernels rely on activations never being -128. */
TSR_TARGET_AVX2 static inline __m256i quantize8_avx2(__m256 v, __m256 vid) {
    const __m256 q = nan_to_zero_avx2(_mm256_mul_ps(v, vid));
    return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(q, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f)));
}

TSR_TARGET_AVX2 static void quantize_y_avx2(const float * x, yq8 * y, int64_t n) {
    const __m256 signbit = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / 32; ++b) {
        const float * xb = x + b * 32;
        const __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8), v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(signbit, nan_to_zero_avx2(v0)), _mm256_andnot_ps(signbit, nan_to_zero_avx2(v1))),
                                 _mm256_max_ps(_mm256_andnot_ps(signbit, nan_to_zero_avx2(v2)), _mm256_andnot_ps(signbit, nan_to_zero_avx2(v3))));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i i0 = quantize8_avx2(v0, vid);
        __m256i i1 = quantize8_avx2(v1, vid);
        __m256i i2 = quantize8_avx2(v2, vid);
        __m256i i3 = quantize8_avx2(v3, vid);
        __m256i s = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_hadd_epi32(s4, s4);
        s4 = _mm_hadd_epi32(s4, s4);
        i0 = _mm256_packs_epi32(i0, i1);
        i2 = _mm256_packs_epi32(i2, i3);
        i0 = _mm256_packs_epi16(i0, i2);
        i0 = _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[b].qs, i0);
        y[b].d = d;
        y[b].sum = _mm_cvtsi128_si32(s4);
    }
}

TSR_TARGET_AVX2 static void axpy_f32_avx2(int64_t n, float a, const float * x, float * y) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; ++i) y[i] += a * x[i];
}

TSR_TARGET_AVX2 static void cvt_f16_f32_avx2(const void * src, float * dst, int64_t n) {
    const uint16_t * s = (const uint16_t *)src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; ++i) dst[i] = h2f(s[i]);
}
TSR_TARGET_AVX2 static void cvt_bf16_f32_avx2(const void * src, float * dst, int64_t n) {
    const uint16_t * s = (const uint16_t *)src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, bf16x8_avx2(s + i));
    for (; i < n; ++i) dst[i] = bf2f(s[i]);
}

/* F32 GEMM micro-kernel: 16 x 6 tile (2 ymm x 6 columns). */
TSR_TARGET_AVX2 static void gemm_f32_kernel_avx2(int kc, const void * ap, const void * bp, float * c, size_t ldc,
                                                 int mr_valid, int nr_valid, bool accumulate) {
    const float * a = (const float *)ap;
    const float * b = (const float *)bp;
    __m256 acc[6][2];
    for (int j = 0; j < 6; ++j) { acc[j][0] = _mm256_setzero_ps(); acc[j][1] = _mm256_setzero_ps(); }
    for (int k = 0; k < kc; ++k) {
        const __m256 a0 = _mm256_loadu_ps(a + (size_t)k * 16);
        const __m256 a1 = _mm256_loadu_ps(a + (size_t)k * 16 + 8);
        const float * bk = b + (size_t)k * 6;
#define TSR_AVX2_STEP(j) { const __m256 bb = _mm256_broadcast_ss(bk + j); acc[j][0] = _mm256_fmadd_ps(a0, bb, acc[j][0]); acc[j][1] = _mm256_fmadd_ps(a1, bb, acc[j][1]); }
        TSR_AVX2_STEP(0) TSR_AVX2_STEP(1) TSR_AVX2_STEP(2) TSR_AVX2_STEP(3) TSR_AVX2_STEP(4) TSR_AVX2_STEP(5)
#undef TSR_AVX2_STEP
    }
    for (int j = 0; j < nr_valid; ++j) {
        float * cj = c + (size_t)j * ldc;
        if (mr_valid == 16) {
            if (accumulate) {
                _mm256_storeu_ps(cj, _mm256_add_ps(_mm256_loadu_ps(cj), acc[j][0]));
                _mm256_storeu_ps(cj + 8, _mm256_add_ps(_mm256_loadu_ps(cj + 8), acc[j][1]));
            } else {
                _mm256_storeu_ps(cj, acc[j][0]);
                _mm256_storeu_ps(cj + 8, acc[j][1]);
            }
        } else {
            alignas(32) float tmp[16];
            _mm256_store_ps(tmp, acc[j][0]);
            _mm256_store_ps(tmp + 8, acc[j][1]);
            for (int i = 0; i < mr_valid; ++i) cj[i] = accumulate ? cj[i] + tmp[i] : tmp[i];
        }
    }
}

/* Int8 GEMM micro-kernel: 8 x 8 tile on the int8 panels of pack.inl. Per 32-k block an
 * integer tile is built with vpmaddubsw (u8 x s8, adjacent products summed into int16
 * WITH saturation), then scaled into float accumulators. What keeps the int16 sums exact:
 *  - Q8_0 (A bytes signed, -128..127): the sign trick. |a| is the unsigned operand and
 *    a's sign moves onto b (yq8 is -127..127, so negating it cannot wrap); a pair is then
 *    at most 2 * 128 * 127 = 32512. An offset A (0..255) would reach 64770. Two quads
 *    could still overflow together, so each is widened to int32 (vpmaddwd by ones).
 *  - Q4_0 (nibbles 0..15): a pair is at most 2 * 15 * 128 = 3840, so the 8 quads of a
 *    block add up in int16 (at most 30720) and are widened once per block; the B bias
 *    (-8 * sum) then undoes the nibble offset.
 * 8 x 8 beat 16 x 4 here (one A quad per ymm leaves more registers for the tiles; A is
 * read once per 8 columns). The quad loop stays rolled: unrolled, GCC reassociates the
 * int16 sums into trees of temporaries and spills most of them. */
template <bool Q8>
TSR_TARGET_AVX2 static void gemm_i8_kernel_avx2(int kc, const void * ap, const void * bp, float * c, size_t ldc,
                                                int mr_valid, int nr_valid, bool accumulate) {
    const uint8_t * a = (const uint8_t *)ap;
    const uint8_t * b = (const uint8_t *)bp;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 f[8];
    for (int j = 0; j < 8; ++j) f[j] = _mm256_setzero_ps();
    for (int blk = 0; blk < kc / 32; ++blk) {
        const int32_t * bq = (const int32_t *)b;
        const float * bs = (const float *)(b + 8 * 32);
        const int32_t * bias = (const int32_t *)(b + 8 * 36);
        __m256i t[8];
        for (int j = 0; j < 8; ++j) t[j] = _mm256_setzero_si256();
#pragma GCC unroll 1
        for (int q = 0; q < 8; ++q) {
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)(a + q * 32));
            const int32_t * bqq = bq + q * 8;
            if constexpr (Q8) {
                const __m256i u0 = _mm256_abs_epi8(a0);  /* -128 -> 0x80 = 128 unsigned */
                for (int j = 0; j < 8; ++j)
                    t[j] = _mm256_add_epi32(t[j], _mm256_madd_epi16(_mm256_maddubs_epi16(u0, _mm256_sign_epi8(_mm256_set1_epi32(bqq[j]), a0)), ones));
            } else {
                for (int j = 0; j < 8; ++j)
                    t[j] = _mm256_add_epi16(t[j], _mm256_maddubs_epi16(a0, _mm256_set1_epi32(bqq[j])));
            }
        }
        const __m256 da = _mm256_loadu_ps((const float *)(a + 8 * 32));
        for (int j = 0; j < 8; ++j) {
            __m256i i0 = t[j];
            if constexpr (!Q8) i0 = _mm256_add_epi32(_mm256_madd_epi16(i0, ones), _mm256_set1_epi32(bias[j]));
            f[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_mul_ps(da, _mm256_set1_ps(bs[j])), f[j]);
        }
        a += 8 * 36;
        b += 8 * 40;
    }
    for (int j = 0; j < nr_valid; ++j) {
        float * cj = c + (size_t)j * ldc;
        if (mr_valid == 8) {
            _mm256_storeu_ps(cj, accumulate ? _mm256_add_ps(_mm256_loadu_ps(cj), f[j]) : f[j]);
        } else {
            alignas(32) float tmp[8];
            _mm256_store_ps(tmp, f[j]);
            for (int i = 0; i < mr_valid; ++i) cj[i] = accumulate ? cj[i] + tmp[i] : tmp[i];
        }
    }
}

static constexpr gemm_impl gemm_f32_avx2 = [] {
    gemm_impl g{};
    g.mr = 16; g.nr = 6; g.kc = 256; g.mc = 128;
    g.a_bytes_32k = 16 * 128; g.b_bytes_32k = 6 * 128; g.b_is_q8 = false;
    g.pack_a = pack_panel_f32<16, 4, cvt_f32_copy>;
    g.pack_b = pack_panel_f32<6, 4, cvt_f32_copy>;
    g.kernel = gemm_f32_kernel_avx2;
    return g;
}();
static constexpr gemm_impl gemm_f16_avx2 = gemm_with_pack_a(gemm_f32_avx2, pack_panel_f32<16, 2, cvt_f16_f32_avx2>);
static constexpr gemm_impl gemm_bf16_avx2 = gemm_with_pack_a(gemm_f32_avx2, pack_panel_f32<16, 2, cvt_bf16_f32_avx2>);
/* Q8_0 keeps A signed for the sign trick, so its B carries no offset bias. */
static constexpr gemm_impl gemm_q8_0_avx2 = [] {
    gemm_impl g{};
    g.mr = 8; g.nr = 8; g.kc = 1024; g.mc = 128;
    g.a_bytes_32k = 8 * 36; g.b_bytes_32k = 8 * 40; g.b_is_q8 = true;
    g.pack_a = pack_panel_i8_a<8, TSR_TYPE_Q8_0, true>;
    g.pack_b = pack_panel_i8_b<8, 0>;
    g.kernel = gemm_i8_kernel_avx2<true>;
    return g;
}();
static constexpr gemm_impl gemm_q4_0_avx2 = [] {
    gemm_impl g = gemm_q8_0_avx2;
    g.pack_a = pack_panel_i8_a<8, TSR_TYPE_Q4_0>;
    g.pack_b = pack_panel_i8_b<8, 8>;
    g.kernel = gemm_i8_kernel_avx2<false>;
    return g;
}();

/* ---- expf and the activations on it (constants and method: vexp in cpu_internal.inl) ---- */

TSR_TARGET_AVX2 static inline __m256 exp_avx2(__m256 x) {
    /* max/min return their second operand when either is NaN: NaN passes the clamp */
    x = _mm256_min_ps(_mm256_set1_ps(vexp::hi), _mm256_max_ps(_mm256_set1_ps(vexp::lo), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(vexp::log2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(vexp::ln2_hi), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(vexp::ln2_lo), r);
    __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(vexp::c6), r, _mm256_set1_ps(vexp::c5));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(vexp::c4));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(vexp::c3));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(vexp::c2));
    const __m256 p = _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(q, _mm256_mul_ps(r, r), r));
    /* n in [-159, 145] here (a NaN lane converts to INT_MIN: wraps harmlessly, p is NaN) */
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, n1), bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

TSR_TARGET_AVX2 static inline __m256 tanh_avx2(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    const __m256 ax = _mm256_andnot_ps(sign, x);
    const __m256 e = exp_avx2(_mm256_add_ps(ax, ax));
    const __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
    const __m256 z = _mm256_mul_ps(ax, ax);
    __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(vexp::t13), z, _mm256_set1_ps(vexp::t11));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(vexp::t9));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(vexp::t7));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(vexp::t5));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(vexp::t3));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(ax, z), q, ax);
    /* NaN compares false and takes the exp branch, which keeps it NaN */
    const __m256 r = _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(vexp::tanh_small), _CMP_LT_OQ));
    return _mm256_or_ps(r, _mm256_and_ps(sign, x));
}

template <int OP> TSR_TARGET_AVX2 static inline __m256 act_avx2(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    switch (OP) {
        case ACT_EXP: return exp_avx2(x);
        case ACT_SILU: return _mm256_div_ps(x, _mm256_add_ps(one, exp_avx2(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)))));
        case ACT_SIGMOID: return _mm256_div_ps(one, _mm256_add_ps(one, exp_avx2(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)))));
        case ACT_GELU: {
            const __m256 m2u = _mm256_mul_ps(x, _mm256_fmadd_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(vexp::gelu_k3), _mm256_set1_ps(vexp::gelu_k1)));
            return _mm256_div_ps(x, _mm256_add_ps(one, exp_avx2(m2u)));
        }
        case ACT_GELU_QUICK: return _mm256_div_ps(x, _mm256_add_ps(one, exp_avx2(_mm256_mul_ps(x, _mm256_set1_ps(vexp::gelu_quick_k)))));
        default: return tanh_avx2(x);
    }
}

/* lanes [0, k) set */
TSR_TARGET_AVX2 static inline __m256i tail_mask_avx2(int64_t k) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <int OP> TSR_TARGET_AVX2 static void act_row_avx2(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, act_avx2<OP>(_mm256_loadu_ps(x + i)));
    if (i < n) {
        const __m256i m = tail_mask_avx2(n - i);
        _mm256_maskstore_ps(y + i, m, act_avx2<OP>(_mm256_maskload_ps(x + i, m)));
    }
}

TSR_TARGET_AVX2 static void swiglu_avx2(int64_t n, const float * x, const float * g, float * y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(act_avx2<ACT_SILU>(_mm256_loadu_ps(x + i)), _mm256_loadu_ps(g + i)));
    if (i < n) {
        const __m256i m = tail_mask_avx2(n - i);
        _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(act_avx2<ACT_SILU>(_mm256_maskload_ps(x + i, m)), _mm256_maskload_ps(g + i, m)));
    }
}

TSR_TARGET_AVX2 static void soft_max_avx2(int64_t n, float * x) {
    /* max_ps keeps or drops a NaN by operand order: NaN lanes are tracked apart */
    __m256 vm = _mm256_set1_ps(-INFINITY), vnan = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        vm = _mm256_max_ps(vm, v);
        vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float mx = _mm_cvtss_f32(m4);
    bool nan = _mm256_movemask_ps(vnan) != 0;
    for (; i < n; ++i) {
        mx = std::max(mx, x[i]);
        nan |= x[i] != x[i];
    }
    if (soft_max_special_row(nan ? NAN : mx, n, x)) return;
    /* the sum in double, as the scalar reference keeps it */
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmx));
        _mm256_storeu_ps(x + i, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    if (i < n) {
        const __m256i m = tail_mask_avx2(n - i);
        const __m256 e = _mm256_and_ps(_mm256_castsi256_ps(m), exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vmx)));
        _mm256_maskstore_ps(x + i, m, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    alignas(32) double s4[4];
    _mm256_store_pd(s4, _mm256_add_pd(s0, s1));
    const double sum = (s4[0] + s4[1]) + (s4[2] + s4[3]);
    const __m256 inv = _mm256_set1_ps((float)(1.0 / sum));   /* sum >= 1: the max's own term */
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (; i < n; ++i) x[i] *= _mm256_cvtss_f32(inv);
}

static constexpr act_kernels act_table_avx2 = [] {
    act_kernels a{};
    a.exp = act_row_avx2<ACT_EXP>;
    a.silu = act_row_avx2<ACT_SILU>;
    a.sigmoid = act_row_avx2<ACT_SIGMOID>;
    a.gelu = act_row_avx2<ACT_GELU>;
    a.gelu_quick = act_row_avx2<ACT_GELU_QUICK>;
    a.tanh = act_row_avx2<ACT_TANH>;
    a.swiglu = swiglu_avx2;
    a.soft_max = soft_max_avx2;
    return a;
}();

/* Q4_K's eight 6-bit scales then eight 6-bit mins as 16 bytes (the 12-byte packing undone
 * with 32-bit masks: sub-blocks 4..7 keep their low 4 bits in bytes 8..11 and their high 2
 * bits in bits 6-7 of bytes 0..7). */
static inline __m128i q4k_scales_mins(const uint8_t * packed) {
    uint32_t u[4];
    std::memcpy(u, packed, 12);
    const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
    u[3] = ((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4);  /* mins 4..7 */
    const uint32_t mins03 = u[1] & low6;
    u[1] = (u[2] & low4) | (((u[0] >> 6) & low2) << 4);         /* scales 4..7 */
    u[2] = mins03;
    u[0] &= low6;                                                /* scales 0..3 */
    /* from registers: a 16-byte load of four 4-byte stores would stall store forwarding */
    return _mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]);
}

/* Q3_K's sixteen signed 6-bit scales as 16 int8 in order, four at a time with 32-bit masks
 * (decoding them one by one cost a fifth of the mat-vec time): scales 0-7 keep their low 4
 * bits in the low nibbles of bytes 0..7, 8-15 in the high nibbles, and the high 2 bits of
 * scale j sit at bits 2(j / 4) of byte 8 + j % 4. */
static inline __m128i q3k_scales(const uint8_t * packed) {
    uint32_t u[4], hi;
    std::memcpy(u, packed, 8);
    std::memcpy(&hi, packed + 8, 4);
    const uint32_t low4 = 0x0f0f0f0f, low2 = 0x03030303;
    u[2] = ((u[0] >> 4) & low4) | (((hi >> 4) & low2) << 4);
    u[3] = ((u[1] >> 4) & low4) | (((hi >> 6) & low2) << 4);
    u[0] = (u[0] & low4) | ((hi & low2) << 4);
    u[1] = (u[1] & low4) | (((hi >> 2) & low2) << 4);
    return _mm_sub_epi8(_mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]), _mm_set1_epi8(32));
}

/* Q4_K (HIGH false) / Q5_K (HIGH true) against Q8_K: one ymm of nibbles per 64 elements (low
 * nibbles sub-block 2c, high 2c+1), Q5_K's fifth bits from bits 2c / 2c+1 of the 32 qh bytes.
 * A level x int8 pair is at most 2 * 31 * 127 in int16; times a 6-bit scale, int32. The mins
 * meet the activations' 16-element sums (bsums) once per super-block. */
template <bool HIGH>
TSR_TARGET_AVX2 static float dot_k4_q8_K_avx2(int64_t n, const uint8_t * base, size_t bsize, const tsr_block_q8_K * y) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(0x01);
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        const uint8_t * blk = base + (size_t)i * bsize;
        const uint8_t * qs = blk + (HIGH ? 48 : 16);
        const __m128i sm = q4k_scales_mins(blk + 4);
        /* mins x (pairs of 16-element activation sums): 8 products in 4 int32 lanes */
        const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[i].bsums), _mm_loadu_si128((const __m128i *)y[i].bsums + 1));
        const __m128i pm = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), bs);
        uint16_t d16, dmin16;
        std::memcpy(&d16, blk, 2);
        std::memcpy(&dmin16, blk + 2, 2);
        acc_m = _mm_fmadd_ps(_mm_cvtepi32_ps(pm), _mm_set1_ps(y[i].d * h2f_avx2(dmin16)), acc_m);
        const __m256i qh = HIGH ? _mm256_loadu_si256((const __m256i *)(blk + 16)) : _mm256_setzero_si256();
        /* the 8 scales as int16 in both halves: one byte shuffle per sub-block spreads a scale */
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (HIGH) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), m1), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), m1), 4));
            }
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * c));
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * c + 32));
            const __m256i s0 = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(((4 * c + 1) << 8) | (4 * c))));
            const __m256i s1 = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(((4 * c + 3) << 8) | (4 * c + 2))));
            const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), s0);
            const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), s1);
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(y[i].d * h2f_avx2(d16)), acc);
    }
    __m128 m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return hsum256(acc) - _mm_cvtss_f32(m);
}

TSR_TARGET_AVX2 static float dot_q4_K_q8_K_avx2(int64_t n, const void * x, const tsr_block_q8_K * y) {
    return dot_k4_q8_K_avx2<false>(n, (const uint8_t *)x, sizeof(tsr_block_q4_K), y);
}
TSR_TARGET_AVX2 static float dot_q5_K_q8_K_avx2(int64_t n, const void * x, const tsr_block_q8_K * y) {
    return dot_k4_q8_K_avx2<true>(n, (const uint8_t *)x, sizeof(tsr_block_q5_K), y);
}

/* The int16 pair sums of 32 elements spanning scale groups g and g + 1 (int16 lanes 0-7 and
 * 8-15) times those groups' scales (int8 scales sc8). */
TSR_TARGET_AVX2 static inline __m256i scale_pairs_avx2(__m256i pairs, __m128i sc8, int g) {
    const __m128i pick = _mm_set_epi64x((long long)(0x0101010101010101ull * (unsigned)(g + 1)), (long long)(0x0101010101010101ull * (unsigned)g));
    return _mm256_madd_epi16(pairs, _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, pick)));
}

/* Q6_K against Q8_K: the 6-bit levels 0..63 stay unsigned for vpmaddubsw (a pair is at most
 * 2 * 63 * 127 in int16) and the -32 offset is taken off once per super-block through the
 * activations' 16-element sums. Each 32 elements hold two scale groups: int16 lanes 0-7 and
 * 8-15 of the pair sums, which one shuffle of the scales and a sign extension match. */
TSR_TARGET_AVX2 static float dot_q6_K_q8_K_avx2(int64_t n, const void * vx, const tsr_block_q8_K * y) {
    const tsr_block_q6_K * x = (const tsr_block_q6_K *)vx;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        /* 32 * sum(scale * bsums): the offset of the unsigned levels, in the same int32 sum */
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        __m256i sumi = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y[i].bsums)), 5);
        sumi = _mm256_sub_epi32(_mm256_setzero_si256(), sumi);
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4)),
                _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4)),
            };
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {
                const __m256i yk = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * k));
                sumi = _mm256_add_epi32(sumi, scale_pairs_avx2(_mm256_maddubs_epi16(q[k], yk), sc8, 8 * h + 2 * k));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(h2f_avx2(x[i].d) * y[i].d), acc);
    }
    return hsum256(acc);
}

/* F32 -> Q8_K as the core's quantizer: the signed value of largest magnitude maps to -127
 * (the largest positive one when a positive and a negative value tie), levels rounded to
 * nearest even, and the sums of every 16 levels. */
TSR_TARGET_AVX2 static void quantize_q8k_avx2(const float * x, tsr_block_q8_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; ++i, x += TSR_QK_K) {
        __m256 vmax = _mm256_set1_ps(-INFINITY), vmin = _mm256_set1_ps(INFINITY);
        for (int j = 0; j < TSR_QK_K; j += 8) {
            const __m256 v = _mm256_loadu_ps(x + j);
            vmax = _mm256_max_ps(vmax, v);
            vmin = _mm256_min_ps(vmin, v);
        }
        float mx[8], mn[8];
        _mm256_storeu_ps(mx, vmax);
        _mm256_storeu_ps(mn, vmin);
        float hi = mx[0], lo = mn[0];
        for (int l = 1; l < 8; ++l) { hi = std::max(hi, mx[l]); lo = std::min(lo, mn[l]); }
        const float max = hi >= -lo ? hi : lo;
        std::memset(&y[i], 0, sizeof(y[i]));
        if (max == 0.0f || max != max) continue;
        const float iscale = -127.0f / max;
        const __m256 vis = _mm256_set1_ps(iscale);
        for (int j = 0; j < TSR_QK_K; j += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; ++k)
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), vis)), _mm256_set1_epi32(127));
            /* int32 -> int16 -> int8 packs interleave 128-bit lanes: put them back in order */
            const __m256i w01 = _mm256_packs_epi32(q[0], q[1]), w23 = _mm256_packs_epi32(q[2], q[3]);
            const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), b);
            /* sums of 16: int16 pair sums, then pairs of those */
            const __m256i s = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(b)), _mm256_set1_epi16(1));
            const __m256i t = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(b, 1)), _mm256_set1_epi16(1));
            const __m256i h = _mm256_hadd_epi32(s, t);  /* lanes: s01 s23 t01 t23 | s45 s67 t45 t67 */
            const __m256i h2 = _mm256_hadd_epi32(h, h);  /* s0-3 t0-3 . . | s4-7 t4-7 . . */
            y[i].bsums[j / 16] = (int16_t)(_mm256_extract_epi32(h2, 0) + _mm256_extract_epi32(h2, 4));
            y[i].bsums[j / 16 + 1] = (int16_t)(_mm256_extract_epi32(h2, 1) + _mm256_extract_epi32(h2, 5));
        }
        y[i].d = 1.0f / iscale;
    }
}

/* Q2_K (levels 0..3, 4-bit scales and mins) / Q3_K (levels 0..7 made unsigned by + 4,
 * signed 6-bit scales) against Q8_K: element 128h + 32j + l has its two low bits at bits 2j
 * of qs[32h + l] (Q3_K: its third bit at bit 4h + j of hmask[l]). The mins (Q2_K) and the
 * offset 4 (Q3_K) meet the activations' 16-element sums once per super-block. */
template <bool Q3>
TSR_TARGET_AVX2 static float dot_k2_q8_K_avx2(int64_t n, const void * vx, const tsr_block_q8_K * y) {
    const __m256i m3 = _mm256_set1_epi8(0x03), m1 = _mm256_set1_epi8(0x01);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        const uint8_t * qs;
        __m128i sc8;
        __m256i hm = _mm256_setzero_si256(), sumi;
        float d, dmin = 0.0f;
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        if (Q3) {
            const tsr_block_q3_K & b = ((const tsr_block_q3_K *)vx)[i];
            sc8 = q3k_scales(b.scales);
            qs = b.qs;
            hm = _mm256_loadu_si256((const __m256i *)b.hmask);
            d = h2f_avx2(b.d);
            sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), bsums), 2));
        } else {
            const tsr_block_q2_K & b = ((const tsr_block_q2_K *)vx)[i];
            const __m128i raw = _mm_loadu_si128((const __m128i *)b.scales);
            sc8 = _mm_and_si128(raw, _mm_set1_epi8(0x0F));
            qs = b.qs;
            d = h2f_avx2(b.d);
            dmin = h2f_avx2(b.dmin);
            const __m256i pm = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F))), bsums);
            acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(pm), _mm256_set1_ps(y[i].d * dmin), acc);
            sumi = _mm256_setzero_si256();
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            const __m256i qv = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j), m3);
                if (Q3) q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), m1), 2));
                const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * j));
                sumi = _mm256_add_epi32(sumi, scale_pairs_avx2(_mm256_maddubs_epi16(q, yv), sc8, 8 * h + 2 * j));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(y[i].d * d), acc);
    }
    return hsum256(acc);
}

TSR_TARGET_AVX2 static float dot_q2_K_q8_K_avx2(int64_t n, const void * x, const tsr_block_q8_K * y) { return dot_k2_q8_K_avx2<false>(n, x, y); }
TSR_TARGET_AVX2 static float dot_q3_K_q8_K_avx2(int64_t n, const void * x, const tsr_block_q8_K * y) { return dot_k2_q8_K_avx2<true>(n, x, y); }

/* Bits 0..31 of qh as bytes 0x10 (set) or 0 (clear), in element order: each byte gets the
 * qh byte holding its bit, and all ones after OR-ing every other bit in (ggml's trick). */
TSR_TARGET_AVX2 static inline __m256i fifth_bits_avx2(const uint8_t * qh) {
    uint32_t bits;
    std::memcpy(&bits, qh, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits),
                                               _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)), _mm256_set1_epi64x(-1));
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

/* Q4_1, Q5_0, Q5_1, IQ4_NL against yq8, a block per step: levels 0..31 unsigned times int8
 * (IQ4_NL: the table's values, signed), Q4_1 / Q5_1's min and Q5_0's offset of 16 through
 * the activations' block sums. */
template <tsr_type T>
TSR_TARGET_AVX2 static float dot_q32_yq8_avx2(int64_t n, const void * vx, const yq8 * y) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tsr_impl::iq4nl_values));
    __m256 acc = _mm256_setzero_ps();
    float corr = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        const __m256i yv = _mm256_loadu_si256((const __m256i *)y[b].qs);
        __m256i p;
        float d;
        if (T == TSR_TYPE_IQ4_NL) {
            const tsr_block_iq4_nl & x = ((const tsr_block_iq4_nl *)vx)[b];
            p = dot32_s8s8_avx2(_mm256_shuffle_epi8(table, unpack_q4_avx2(x.qs)), yv);
            d = h2f_avx2(x.d);
        } else if (T == TSR_TYPE_Q5_0) {
            const tsr_block_q5_0 & x = ((const tsr_block_q5_0 *)vx)[b];
            p = dot32_u4s8_avx2(_mm256_or_si256(unpack_q4_avx2(x.qs), fifth_bits_avx2(x.qh)), yv);
            d = h2f_avx2(x.d);
            corr += 16.0f * d * y[b].d * (float)y[b].sum;
        } else {
            using block = std::conditional_t<T == TSR_TYPE_Q4_1, tsr_block_q4_1, tsr_block_q5_1>;
            const block & x = ((const block *)vx)[b];
            __m256i q = unpack_q4_avx2(x.qs);
            if (T == TSR_TYPE_Q5_1) q = _mm256_or_si256(q, fifth_bits_avx2(((const tsr_block_q5_1 &)x).qh));
            p = dot32_u4s8_avx2(q, yv);
            d = h2f_avx2(x.d);
            corr -= h2f_avx2(x.m) * y[b].d * (float)y[b].sum;
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * y[b].d), acc);
    }
    return hsum256(acc) - corr;
}

TSR_TARGET_AVX2 static float dot_q4_1_yq8_avx2(int64_t n, const void * x, const yq8 * y) { return dot_q32_yq8_avx2<TSR_TYPE_Q4_1>(n, x, y); }
TSR_TARGET_AVX2 static float dot_q5_0_yq8_avx2(int64_t n, const void * x, const yq8 * y) { return dot_q32_yq8_avx2<TSR_TYPE_Q5_0>(n, x, y); }
TSR_TARGET_AVX2 static float dot_q5_1_yq8_avx2(int64_t n, const void * x, const yq8 * y) { return dot_q32_yq8_avx2<TSR_TYPE_Q5_1>(n, x, y); }
TSR_TARGET_AVX2 static float dot_iq4_nl_yq8_avx2(int64_t n, const void * x, const yq8 * y) { return dot_q32_yq8_avx2<TSR_TYPE_IQ4_NL>(n, x, y); }

static constexpr kernels kernels_avx2 = [] {
    kernels k{};
    k.isa = TSR_CPU_ISA_AVX2;
    k.dot_f32 = dot_f32_avx2;
    k.dot_f16 = dot_f16_avx2;
    k.dot_bf16 = dot_bf16_avx2;
    k.dot_q8_0 = dot_q8_0_avx2;
    k.dot_q4_0 = dot_q4_0_avx2;
    k.dot4[SLOT_F32] = dot4_avx2<0>;
    k.dot4[SLOT_F16] = dot4_avx2<1>;
    k.dot4[SLOT_BF16] = dot4_avx2<2>;
    k.dot4[SLOT_Q8_0] = dot4_q8_0_avx2;
    k.dot4[SLOT_Q4_0] = dot4_q4_0_avx2;
    k.dot_q8k[KSLOT_Q2_K] = dot_q2_K_q8_K_avx2;
    k.dot_q8k[KSLOT_Q3_K] = dot_q3_K_q8_K_avx2;
    k.dot_q8k[KSLOT_Q4_K] = dot_q4_K_q8_K_avx2;
    k.dot_q8k[KSLOT_Q5_K] = dot_q5_K_q8_K_avx2;
    k.dot_q8k[KSLOT_Q6_K] = dot_q6_K_q8_K_avx2;
    k.dot_yq8[QSLOT_Q4_1] = dot_q4_1_yq8_avx2;
    k.dot_yq8[QSLOT_Q5_0] = dot_q5_0_yq8_avx2;
    k.dot_yq8[QSLOT_Q5_1] = dot_q5_1_yq8_avx2;
    k.dot_yq8[QSLOT_IQ4_NL] = dot_iq4_nl_yq8_avx2;
    k.quantize_q8k = quantize_q8k_avx2;
    k.quantize_y = quantize_y_avx2;
    k.axpy_f32 = axpy_f32_avx2;
    k.f16_to_f32 = cvt_f16_f32_avx2;
    k.gemm[SLOT_F32] = &gemm_f32_avx2;
    k.gemm[SLOT_F16] = &gemm_f16_avx2;
    k.gemm[SLOT_BF16] = &gemm_bf16_avx2;
    k.gemm[SLOT_Q8_0] = &gemm_q8_0_avx2;
    k.gemm[SLOT_Q4_0] = &gemm_q4_0_avx2;
    k.act = &act_table_avx2;
    return k;
}();

} // namespace tcpu
} // namespace
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif /* TSR_CPU_HAVE_X86_KERNELS */
/* ---- backends/cpu/impl/kernels_avx512.inl ---- */
/*
 * kernels_avx512.inl - x86-64 AVX-512 (F/BW/VL/DQ) kernels, with AVX512-BF16 (vdpbf16ps)
 * and AVX512-VNNI (vpdpbusd) variants chosen at run time when the CPU has them.
 */
#if defined(TSR_CPU_HAVE_X86_KERNELS)
/* GCC 12 warns about the deliberately undefined lanes inside some intrinsics. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {
namespace tcpu {

TSR_TARGET_AVX512 static float dot_f32_avx512(int64_t n, const float * x, const float * y) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

TSR_TARGET_AVX512 static float dot_f16_avx512(int64_t n, const uint16_t * x, const float * y) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i + 16))), _mm512_loadu_ps(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i + 32))), _mm512_loadu_ps(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i + 48))), _mm512_loadu_ps(y + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))), _mm512_loadu_ps(y + i), a0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        a1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)), _mm512_maskz_loadu_ps(m, y + i), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

TSR_TARGET_AVX512 static inline __m512 bf16x16_avx512(__m256i v) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

TSR_TARGET_AVX512 static float dot_bf16_avx512(int64_t n, const uint16_t * x, const float * y) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(bf16x16_avx512(_mm256_loadu_si256((const __m256i *)(x + i))), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(bf16x16_avx512(_mm256_loadu_si256((const __m256i *)(x + i + 16))), _mm512_loadu_ps(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(bf16x16_avx512(_mm256_loadu_si256((const __m256i *)(x + i + 32))), _mm512_loadu_ps(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(bf16x16_avx512(_mm256_loadu_si256((const __m256i *)(x + i + 48))), _mm512_loadu_ps(y + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(bf16x16_avx512(_mm256_loadu_si256((const __m256i *)(x + i))), _mm512_loadu_ps(y + i), a0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        a1 = _mm512_fmadd_ps(bf16x16_avx512(_mm256_maskz_loadu_epi16(m, x + i)), _mm512_maskz_loadu_ps(m, y + i), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

/* Two 32-byte rows of int8 into one zmm. */
TSR_TARGET_AVX512 static inline __m512i load2x32(const void * p0, const void * p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)),
                              _mm256_loadu_si256((const __m256i *)p1), 1);
}
TSR_TARGET_AVX512 static inline __m512 scale2(float d0, float d1) {
    return _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
}

/* Q8_0 x yq8 with VNNI: (x ^ 0x80) unsigned times y signed, minus 128 * sum(y). */
TSR_TARGET_AVX512VNNI static float dot_q8_0_avx512vnni(int64_t n, const tsr_block_q8_0 * x, const yq8 * y) {
    const int64_t nb = n / 32;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    float corr = 0.0f;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        const __m512i x0 = _mm512_xor_si512(load2x32(x[b].qs, x[b + 1].qs), flip);
        const __m512i x1 = _mm512_xor_si512(load2x32(x[b + 2].qs, x[b + 3].qs), flip);
        const __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x0, load2x32(y[b].qs, y[b + 1].qs));
        const __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x1, load2x32(y[b + 2].qs, y[b + 3].qs));
        const float d0 = _cvtsh_ss(x[b].d) * y[b].d, d1 = _cvtsh_ss(x[b + 1].d) * y[b + 1].d;
        const float d2 = _cvtsh_ss(x[b + 2].d) * y[b + 2].d, d3 = _cvtsh_ss(x[b + 3].d) * y[b + 3].d;
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), scale2(d0, d1), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), scale2(d2, d3), acc1);
        corr += (d0 * (float)y[b].sum + d1 * (float)y[b + 1].sum) + (d2 * (float)y[b + 2].sum + d3 * (float)y[b + 3].sum);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) - 128.0f * corr;
    for (; b < nb; ++b) {
        int32_t acc = 0;
        for (int j = 0; j < 32; ++j) acc += (int32_t)x[b].qs[j] * y[b].qs[j];
        s += _cvtsh_ss(x[b].d) * y[b].d * (float)acc;
    }
    return s;
}

TSR_TARGET_AVX512VNNI static inline __m512i unpack2_q4_avx512(const uint8_t * q0, const uint8_t * q1) {
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q0)),
                                              _mm_loadu_si128((const __m128i *)q1), 1);
    const __m256i m = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(v, m);                          /* [b0 lo | b1 lo] */
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);   /* [b0 hi | b1 hi] */
    /* want [b0 lo, b0 hi, b1 lo, b1 hi] (16 bytes each) */
    const __m512i lo5 = _mm512_castsi256_si512(lo);
    const __m512i hi5 = _mm512_castsi256_si512(hi);
    return _mm512_permutex2var_epi64(lo5, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), hi5);
}

TSR_TARGET_AVX512VNNI static float dot_q4_0_avx512vnni(int64_t n, const tsr_block_q4_0 * x, const yq8 * y) {
    const int64_t nb = n / 32;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    float corr = 0.0f;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        const __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), unpack2_q4_avx512(x[b].qs, x[b + 1].qs), load2x32(y[b].qs, y[b + 1].qs));
        const __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), unpack2_q4_avx512(x[b + 2].qs, x[b + 3].qs), load2x32(y[b + 2].qs, y[b + 3].qs));
        const float d0 = _cvtsh_ss(x[b].d) * y[b].d, d1 = _cvtsh_ss(x[b + 1].d) * y[b + 1].d;
        const float d2 = _cvtsh_ss(x[b + 2].d) * y[b + 2].d, d3 = _cvtsh_ss(x[b + 3].d) * y[b + 3].d;
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), scale2(d0, d1), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), scale2(d2, d3), acc1);
        corr += (d0 * (float)y[b].sum + d1 * (float)y[b + 1].sum) + (d2 * (float)y[b + 2].sum + d3 * (float)y[b + 3].sum);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) - 8.0f * corr;
    for (; b < nb; ++b) {
        int32_t acc = 0;
        for (int j = 0; j < 16; ++j) {
            acc += (int32_t)(x[b].qs[j] & 0x0F) * y[b].qs[j];
            acc += (int32_t)(x[b].qs[j] >> 4) * y[b].qs[j + 16];
        }
        acc -= 8 * y[b].sum;
        s += _cvtsh_ss(x[b].d) * y[b].d * (float)acc;
    }
    return s;
}

/* Matrix-vector kernels for R rows (x + r * lda) against one quantized activation row,
 * 4 blocks per step. The block scales are broadcast words (Q8_0) or come out of the vector
 * loaded at the group start with one word permute (Q4_0), never a gather, and yq8's side
 * arrays supply the bias and the y
 * scales already laid out per lane. Every load stays inside the group: no masked loads
 * (slow when streaming) and no reads past the row. Blocks beyond a multiple of 4 go
 * through the one-block kernels above. */
/* Two fp16 scales, each broadcast over 8 words. Q8_0's scales are read as words of their
 * own: a wide load over the block that also covers the qs makes clang rebuild the qs loads
 * from it with scalar shifts. */
TSR_TARGET_AVX512VNNI static inline __m256i fp16_pair_x8(const void * d0, const void * d1) {
    uint16_t h0, h1;
    std::memcpy(&h0, d0, 2);
    std::memcpy(&h1, d1, 2);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)h0)), _mm_set1_epi16((short)h1), 1);
}

template <int R>
TSR_TARGET_AVX512VNNI static void gemv_q8_0_rows(int64_t n, const char * x, size_t lda, const yq8 * y, float * out) {
    const int64_t nb = n / 32, ng = nb / 4;
    const yside_q8 * ys = y_side_q8(y, nb);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc0[R], acc1[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; ++g) {
        const yside_q8 & s = ys[g];
        const __m512i yq01 = _mm512_loadu_si512((const void *)s.qs), yq23 = _mm512_loadu_si512((const void *)(s.qs + 64));
        const __m512i yb01 = _mm512_loadu_si512((const void *)s.bias), yb23 = _mm512_loadu_si512((const void *)(s.bias + 16));
        const __m512 dy01 = _mm512_loadu_ps(s.d), dy23 = _mm512_loadu_ps(s.d + 16);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const char * xb = x + (size_t)r * lda + (size_t)g * 4 * sizeof(tsr_block_q8_0);
            const __m512 s01 = _mm512_mul_ps(_mm512_cvtph_ps(fp16_pair_x8(xb, xb + 34)), dy01);
            const __m512 s23 = _mm512_mul_ps(_mm512_cvtph_ps(fp16_pair_x8(xb + 68, xb + 102)), dy23);
            const __m512i q01 = _mm512_xor_si512(load2x32(xb + 2, xb + 36), flip);
            const __m512i q23 = _mm512_xor_si512(load2x32(xb + 70, xb + 104), flip);
            acc0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(yb01, q01, yq01)), s01, acc0[r]);
            acc1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(yb23, q23, yq23)), s23, acc1[r]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
        if (ng * 4 < nb)
            out[r] += dot_q8_0_avx512vnni(n - ng * 128, (const tsr_block_q8_0 *)(x + (size_t)r * lda) + ng * 4, y + ng * 4);
    }
}

template <int R>
TSR_TARGET_AVX512VNNI static void gemv_q4_0_rows(int64_t n, const char * x, size_t lda, const yq8 * y, float * out) {
    const int64_t nb = n / 32, ng = nb / 4;
    const yside_q4 * ys = y_side_q4(y, nb);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* the 16 qs bytes of each of the 4 blocks (words 1..8 of each 9-word block), and the fp16
     * scales (words 0, 9, 18, 27) spread over 4 lanes each */
    alignas(64) static const uint16_t idx_q[32] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17,
                                                   19, 20, 21, 22, 23, 24, 25, 26, 28, 29, 30, 31, 32, 33, 34, 35};
    alignas(64) static const uint16_t idx_d[32] = {0, 0, 0, 0, 9, 9, 9, 9, 18, 18, 18, 18, 27, 27, 27, 27};
    const __m512i iq = _mm512_load_si512((const void *)idx_q), id = _mm512_load_si512((const void *)idx_d);
    __m512 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; ++g) {
        const yside_q4 & s = ys[g];
        const __m512i ylo = _mm512_loadu_si512((const void *)s.lo), yhi = _mm512_loadu_si512((const void *)s.hi);
        const __m512i yb = _mm512_loadu_si512((const void *)s.bias);
        const __m512 dy = _mm512_loadu_ps(s.d);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const char * xb = x + (size_t)r * lda + (size_t)g * 4 * sizeof(tsr_block_q4_0);
            const __m512i z0 = _mm512_loadu_si512((const void *)xb);
            const __m512i z1 = _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)(xb + 64)));  /* the group's last 8 bytes */
            const __m512i qs = _mm512_permutex2var_epi16(z0, iq, z1);
            const __m512 sc = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(id, z0))), dy);
            const __m512i lo = _mm512_and_si512(qs, m4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(qs, 4), m4);
            const __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(yb, lo, ylo), hi, yhi);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), sc, acc[r]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        out[r] = _mm512_reduce_add_ps(acc[r]);
        if (ng * 4 < nb)
            out[r] += dot_q4_0_avx512vnni(n - ng * 128, (const tsr_block_q4_0 *)(x + (size_t)r * lda) + ng * 4, y + ng * 4);
    }
}

TSR_TARGET_AVX512VNNI static float gemv_q8_0_avx512vnni(int64_t n, const tsr_block_q8_0 * x, const yq8 * y) {
    float o;
    gemv_q8_0_rows<1>(n, (const char *)x, 0, y, &o);
    return o;
}
TSR_TARGET_AVX512VNNI static float gemv_q4_0_avx512vnni(int64_t n, const tsr_block_q4_0 * x, const yq8 * y) {
    float o;
    gemv_q4_0_rows<1>(n, (const char *)x, 0, y, &o);
    return o;
}
TSR_TARGET_AVX512VNNI static void dot4_q8_0_avx512vnni(int64_t n, const char * x, size_t lda, const void * y, float * out) {
    gemv_q8_0_rows<4>(n, x, lda, (const yq8 *)y, out);
}
TSR_TARGET_AVX512VNNI static void dot4_q4_0_avx512vnni(int64_t n, const char * x, size_t lda, const void * y, float * out) {
    gemv_q4_0_rows<4>(n, x, lda, (const yq8 *)y, out);
}

TSR_TARGET_AVX512 static void axpy_f32_avx512(int64_t n, float a, const float * x, float * y) {
    const __m512 va = _mm512_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
    }
}

/* Load 16 consecutive elements of a row as floats (T: 0 f32, 1 f16, 2 bf16), zero past n. */
template <int T>
TSR_TARGET_AVX512 static inline __m512 load16_as_f32(const char * row, int64_t k, int64_t n) {
    const __mmask16 m = n - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - k)) - 1);
    if (T == 0) return _mm512_maskz_loadu_ps(m, (const float *)row + k);
    const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)row + k);
    if (T == 1) return _mm512_cvtph_ps(h);
    return bf16x16_avx512(h);
}

/* 16 consecutive elements as floats, no bounds (T: 0 f32, 1 f16, 2 bf16). */
template <int T>
TSR_TARGET_AVX512 static inline __m512 load16_full(const char * row, int64_t k) {
    if (T == 0) return _mm512_loadu_ps((const float *)row + k);
    const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + k));
    if (T == 1) return _mm512_cvtph_ps(h);
    return bf16x16_avx512(h);
}

/* 16x16 transpose of r[0..15] in registers. */
TSR_TARGET_AVX512 static inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
        r[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2])));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2])));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
    }
    /* r[4i+j] now holds rows 4i..4i+3 interleaved for column group j; finish with 128-bit shuffles */
    for (int j = 0; j < 4; ++j) {
        const __m512 a0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
        const __m512 a1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
        const __m512 b0 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
        const __m512 b1 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
        t[j] = _mm512_shuffle_f32x4(a0, b0, 0x88);
        t[j + 8] = _mm512_shuffle_f32x4(a0, b0, 0xDD);
        t[j + 4] = _mm512_shuffle_f32x4(a1, b1, 0x88);
        t[j + 12] = _mm512_shuffle_f32x4(a1, b1, 0xDD);
    }
    for (int i = 0; i < 16; ++i) r[i] = t[i];
}

/* F32 A panel of 32 rows through 16x16 register transposes. */
template <int T>
TSR_TARGET_AVX512 static void pack_a32_avx512(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    float * d = (float *)dst;
    const int64_t kend = std::min<int64_t>(K, k0 + kc);
    for (int half = 0; half < 2; ++half) {
        for (int k = 0; k < kc; k += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; ++i) {
                const int row = half * 16 + i;
                r[i] = (row < rows && k0 + k < kend) ? load16_as_f32<T>(a + (size_t)row * lda, k0 + k, kend) : _mm512_setzero_ps();
            }
            transpose16(r);
            for (int i = 0; i < 16; ++i) _mm512_store_ps(d + (size_t)(k + i) * 32 + half * 16, r[i]);
        }
    }
}

/* BF16 pair panel of 32 rows (k pairs as 32-bit lanes) through 16x16 transposes. Even K
 * only: an odd K's last pair would read past the row (the scalar packer handles it). */
TSR_TARGET_AVX512 static void pack_a32_bf16_avx512(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    if (K % 2 != 0) { pack_panel_bf16_from_bf16<32>(a, lda, rows, K, k0, kc, dst); return; }
    float * d = (float *)dst;
    const int64_t pend = std::min<int64_t>(K, k0 + kc) / 2;   /* pairs of the row */
    const int64_t p0 = k0 / 2;
    for (int half = 0; half < 2; ++half) {
        for (int p = 0; p < kc / 2; p += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; ++i) {
                const int row = half * 16 + i;
                r[i] = (row < rows && p0 + p < pend) ? load16_as_f32<0>(a + (size_t)row * lda, p0 + p, pend) : _mm512_setzero_ps();
            }
            transpose16(r);
            for (int i = 0; i < 16; ++i) _mm512_store_ps(d + (size_t)(p + i) * 32 + half * 16, r[i]);
        }
    }
}

/* BF16 pair panel of 12 rows from F32 rows, converted with vcvtne2ps2bf16. */
TSR_TARGET_AVX512BF16 static void pack_b12_bf16_avx512(const char * b, size_t ldb, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    uint32_t * d = (uint32_t *)dst;
    const int64_t kend = std::min<int64_t>(K, k0 + kc);
    alignas(64) uint32_t tmp[512];
    for (int r = 0; r < 12; ++r) {
        if (r >= rows || k0 >= kend) {
            for (int p = 0; p < kc / 2; ++p) d[(size_t)p * 12 + r] = 0;
            continue;
        }
        const float * row = (const float *)(b + (size_t)r * ldb);
        for (int k = 0; k < kc; k += 32) {
            const int64_t g = k0 + k;
            const int64_t n0 = std::max<int64_t>(0, std::min<int64_t>(16, kend - g));
            const int64_t n1 = std::max<int64_t>(0, std::min<int64_t>(16, kend - g - 16));
            const __m512 lo = _mm512_maskz_loadu_ps((__mmask16)((1u << n0) - 1), row + g);
            const __m512 hi = n1 > 0 ? _mm512_maskz_loadu_ps((__mmask16)((1u << n1) - 1), row + g + 16) : _mm512_setzero_ps();
            _mm512_store_si512((void *)(tmp + k / 2), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
        }
        for (int p = 0; p < kc / 2; ++p) d[(size_t)p * 12 + r] = tmp[p];
    }
}

/* 4 rows x 32 elements per step: 8 accumulators. The unroll pragmas keep the accumulators
 * in registers at -O2 too (a header-only library runs at the user's optimization level). */
template <int T>
TSR_TARGET_AVX512 static void dot4_avx512(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const float * y = (const float *)yv;
    __m512 acc0[4], acc1[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16);
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
            const char * row = x + (size_t)r * lda;
            acc0[r] = _mm512_fmadd_ps(load16_full<T>(row, i), y0, acc0[r]);
            acc1[r] = _mm512_fmadd_ps(load16_full<T>(row, i + 16), y1, acc1[r]);
        }
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 y0 = _mm512_maskz_loadu_ps(m, y + i);
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) acc0[r] = _mm512_fmadd_ps(load16_as_f32<T>(x + (size_t)r * lda, i, n), y0, acc0[r]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
}

/* Store/accumulate a 32-wide row pair of results with a lane mask for the M edge. */
TSR_TARGET_AVX512 static inline void store_row32(float * c, __m512 v0, __m512 v1, int mr_valid, bool accumulate) {
    if (mr_valid == 32) {
        if (accumulate) {
            v0 = _mm512_add_ps(v0, _mm512_loadu_ps(c));
            v1 = _mm512_add_ps(v1, _mm512_loadu_ps(c + 16));
        }
        _mm512_storeu_ps(c, v0);
        _mm512_storeu_ps(c + 16, v1);
        return;
    }
    const __mmask16 m0 = (__mmask16)(mr_valid >= 16 ? 0xFFFF : ((1u << mr_valid) - 1));
    const __mmask16 m1 = (__mmask16)(mr_valid <= 16 ? 0 : ((1u << (mr_valid - 16)) - 1));
    if (accumulate) {
        v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, c));
        v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, c + 16));
    }
    _mm512_mask_storeu_ps(c, m0, v0);
    _mm512_mask_storeu_ps(c + 16, m1, v1);
}

/* F32 GEMM micro-kernel: 32 x 12 tile (2 zmm x 12 columns = 24 accumulators). */
TSR_TARGET_AVX512 static void gemm_f32_kernel_avx512(int kc, const void * ap, const void * bp, float * c, size_t ldc,
                                                     int mr_valid, int nr_valid, bool accumulate) {
    const float * a = (const float *)ap;
    const float * b = (const float *)bp;
    __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(), c11 = _mm512_setzero_ps();
    __m512 c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps(), c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps();
    __m512 c40 = _mm512_setzero_ps(), c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps();
    __m512 c60 = _mm512_setzero_ps(), c61 = _mm512_setzero_ps(), c70 = _mm512_setzero_ps(), c71 = _mm512_setzero_ps();
    __m512 c80 = _mm512_setzero_ps(), c81 = _mm512_setzero_ps(), c90 = _mm512_setzero_ps(), c91 = _mm512_setzero_ps();
    __m512 ca0 = _mm512_setzero_ps(), ca1 = _mm512_setzero_ps(), cb0 = _mm512_setzero_ps(), cb1 = _mm512_setzero_ps();
    for (int k = 0; k < kc; ++k) {
        const __m512 a0 = _mm512_load_ps(a);
        const __m512 a1 = _mm512_load_ps(a + 16);
        __m512 bb;
#define TSR_ZSTEP(j, x0, x1) bb = _mm512_set1_ps(b[j]); x0 = _mm512_fmadd_ps(a0, bb, x0); x1 = _mm512_fmadd_ps(a1, bb, x1);
        TSR_ZSTEP(0, c00, c01) TSR_ZSTEP(1, c10, c11) TSR_ZSTEP(2, c20, c21) TSR_ZSTEP(3, c30, c31)
        TSR_ZSTEP(4, c40, c41) TSR_ZSTEP(5, c50, c51) TSR_ZSTEP(6, c60, c61) TSR_ZSTEP(7, c70, c71)
        TSR_ZSTEP(8, c80, c81) TSR_ZSTEP(9, c90, c91) TSR_ZSTEP(10, ca0, ca1) TSR_ZSTEP(11, cb0, cb1)
#undef TSR_ZSTEP
        a += 32;
        b += 12;
    }
    const __m512 r[12][2] = { {c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51},
                              {c60, c61}, {c70, c71}, {c80, c81}, {c90, c91}, {ca0, ca1}, {cb0, cb1} };
    for (int j = 0; j < nr_valid; ++j) store_row32(c + (size_t)j * ldc, r[j][0], r[j][1], mr_valid, accumulate);
}

/* BF16 GEMM micro-kernel (vdpbf16ps): 32 x 12 tile, k in pairs. */
TSR_TARGET_AVX512BF16 static void gemm_bf16_kernel_avx512(int kc, const void * ap, const void * bp, float * c, size_t ldc,
                                                          int mr_valid, int nr_valid, bool accumulate) {
    const uint32_t * a = (const uint32_t *)ap;
    const uint32_t * b = (const uint32_t *)bp;
    __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(), c11 = _mm512_setzero_ps();
    __m512 c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps(), c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps();
    __m512 c40 = _mm512_setzero_ps(), c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps();
    __m512 c60 = _mm512_setzero_ps(), c61 = _mm512_setzero_ps(), c70 = _mm512_setzero_ps(), c71 = _mm512_setzero_ps();
    __m512 c80 = _mm512_setzero_ps(), c81 = _mm512_setzero_ps(), c90 = _mm512_setzero_ps(), c91 = _mm512_setzero_ps();
    __m512 ca0 = _mm512_setzero_ps(), ca1 = _mm512_setzero_ps(), cb0 = _mm512_setzero_ps(), cb1 = _mm512_setzero_ps();
    for (int p = 0; p < kc / 2; ++p) {
        const __m512bh a0 = (__m512bh)_mm512_load_si512((const void *)a);
        const __m512bh a1 = (__m512bh)_mm512_load_si512((const void *)(a + 16));
        __m512bh bb;
#define TSR_BSTEP(j, x0, x1) bb = (__m512bh)_mm512_set1_epi32((int)b[j]); x0 = _mm512_dpbf16_ps(x0, a0, bb); x1 = _mm512_dpbf16_ps(x1, a1, bb);
        TSR_BSTEP(0, c00, c01) TSR_BSTEP(1, c10, c11) TSR_BSTEP(2, c20, c21) TSR_BSTEP(3, c30, c31)
        TSR_BSTEP(4, c40, c41) TSR_BSTEP(5, c50, c51) TSR_BSTEP(6, c60, c61) TSR_BSTEP(7, c70, c71)
        TSR_BSTEP(8, c80, c81) TSR_BSTEP(9, c90, c91) TSR_BSTEP(10, ca0, ca1) TSR_BSTEP(11, cb0, cb1)
#undef TSR_BSTEP
        a += 32;
        b += 12;
    }
    const __m512 r[12][2] = { {c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51},
                              {c60, c61}, {c70, c71}, {c80, c81}, {c90, c91}, {ca0, ca1}, {cb0, cb1} };
    for (int j = 0; j < nr_valid; ++j) store_row32(c + (size_t)j * ldc, r[j][0], r[j][1], mr_valid, accumulate);
}

/* Int8 GEMM micro-kernel (vpdpbusd): 32 x 6 tile; per 32-k block an integer tile is
 * started at the B bias (undoing A's unsigned offset), then scaled into float. */
TSR_TARGET_AVX512VNNI static void gemm_i8_kernel_avx512(int kc, const void * ap, const void * bp, float * c, size_t ldc,
                                                        int mr_valid, int nr_valid, bool accumulate) {
    const uint8_t * a = (const uint8_t *)ap;
    const uint8_t * b = (const uint8_t *)bp;
    __m512 f[6][2];
    for (int j = 0; j < 6; ++j) { f[j][0] = _mm512_setzero_ps(); f[j][1] = _mm512_setzero_ps(); }
    for (int blk = 0; blk < kc / 32; ++blk) {
        const float * bs = (const float *)(b + 6 * 32);
        const int32_t * bias = (const int32_t *)(b + 6 * 36);
        __m512i i00 = _mm512_set1_epi32(bias[0]), i01 = i00;
        __m512i i10 = _mm512_set1_epi32(bias[1]), i11 = i10;
        __m512i i20 = _mm512_set1_epi32(bias[2]), i21 = i20;
        __m512i i30 = _mm512_set1_epi32(bias[3]), i31 = i30;
        __m512i i40 = _mm512_set1_epi32(bias[4]), i41 = i40;
        __m512i i50 = _mm512_set1_epi32(bias[5]), i51 = i50;
        const int32_t * bq = (const int32_t *)b;
        for (int q = 0; q < 8; ++q) {
            const __m512i a0 = _mm512_load_si512((const void *)(a + q * 128));
            const __m512i a1 = _mm512_load_si512((const void *)(a + q * 128 + 64));
            __m512i bb;
#define TSR_ISTEP(j, x0, x1) bb = _mm512_set1_epi32(bq[q * 6 + j]); x0 = _mm512_dpbusd_epi32(x0, a0, bb); x1 = _mm512_dpbusd_epi32(x1, a1, bb);
            TSR_ISTEP(0, i00, i01) TSR_ISTEP(1, i10, i11) TSR_ISTEP(2, i20, i21)
            TSR_ISTEP(3, i30, i31) TSR_ISTEP(4, i40, i41) TSR_ISTEP(5, i50, i51)
#undef TSR_ISTEP
        }
        const __m512 da0 = _mm512_load_ps(a + 32 * 32);
        const __m512 da1 = _mm512_load_ps(a + 32 * 32 + 64);
#define TSR_FSTEP(j, x0, x1) { const __m512 db = _mm512_set1_ps(bs[j]); \
        f[j][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(x0), _mm512_mul_ps(da0, db), f[j][0]); \
        f[j][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(x1), _mm512_mul_ps(da1, db), f[j][1]); }
        TSR_FSTEP(0, i00, i01) TSR_FSTEP(1, i10, i11) TSR_FSTEP(2, i20, i21)
        TSR_FSTEP(3, i30, i31) TSR_FSTEP(4, i40, i41) TSR_FSTEP(5, i50, i51)
#undef TSR_FSTEP
        a += 32 * 36;
        b += 6 * 40;
    }
    for (int j = 0; j < nr_valid; ++j) store_row32(c + (size_t)j * ldc, f[j][0], f[j][1], mr_valid, accumulate);
}

static constexpr gemm_impl gemm_f32_avx512 = [] {
    gemm_impl g{};
    g.mr = 32; g.nr = 12; g.kc = 256; g.mc = 128;
    g.a_bytes_32k = 32 * 128; g.b_bytes_32k = 12 * 128; g.b_is_q8 = false;
    g.pack_a = pack_a32_avx512<0>;
    g.pack_b = pack_panel_f32<12, 4, cvt_f32_copy>;
    g.kernel = gemm_f32_kernel_avx512;
    return g;
}();
static constexpr gemm_impl gemm_f16_avx512 = gemm_with_pack_a(gemm_f32_avx512, pack_a32_avx512<1>);
static constexpr gemm_impl gemm_bf16cvt_avx512 = gemm_with_pack_a(gemm_f32_avx512, pack_a32_avx512<2>);
static constexpr gemm_impl gemm_bf16_avx512 = [] {
    gemm_impl g = gemm_f32_avx512;
    g.kc = 512;
    g.a_bytes_32k = 32 * 64; g.b_bytes_32k = 12 * 64;
    g.pack_a = pack_a32_bf16_avx512;
    g.pack_b = pack_b12_bf16_avx512;
    g.kernel = gemm_bf16_kernel_avx512;
    return g;
}();
static constexpr gemm_impl gemm_q8_0_avx512 = [] {
    gemm_impl g{};
    g.mr = 32; g.nr = 6; g.kc = 1024; g.mc = 128;
    g.a_bytes_32k = 32 * 36; g.b_bytes_32k = 6 * 40; g.b_is_q8 = true;
    g.pack_a = pack_panel_i8_a<32, TSR_TYPE_Q8_0>;
    g.pack_b = pack_panel_i8_b<6, 128>;
    g.kernel = gemm_i8_kernel_avx512;
    return g;
}();
static constexpr gemm_impl gemm_q4_0_avx512 = [] {
    gemm_impl g = gemm_q8_0_avx512;
    g.pack_a = pack_panel_i8_a<32, TSR_TYPE_Q4_0>;
    g.pack_b = pack_panel_i8_b<6, 8>;
    return g;
}();

/* ---- expf and the activations on it (constants and method: vexp in cpu_internal.inl) ---- */

TSR_TARGET_AVX512 static inline __m512 exp_avx512(__m512 x) {
    /* max/min return their second operand when either is NaN: NaN passes the clamp */
    x = _mm512_min_ps(_mm512_set1_ps(vexp::hi), _mm512_max_ps(_mm512_set1_ps(vexp::lo), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(vexp::log2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(vexp::ln2_hi), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(vexp::ln2_lo), r);
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(vexp::c6), r, _mm512_set1_ps(vexp::c5));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(vexp::c4));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(vexp::c3));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(vexp::c2));
    const __m512 p = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(q, _mm512_mul_ps(r, r), r));
    /* vscalefps rounds p * 2^n once, to +inf or through the denormals as needed */
    return _mm512_scalef_ps(p, n);
}

TSR_TARGET_AVX512 static inline __m512 tanh_avx512(__m512 x) {
    const __m512 sign = _mm512_set1_ps(-0.0f), one = _mm512_set1_ps(1.0f);
    const __m512 ax = _mm512_andnot_ps(sign, x);
    const __m512 e = exp_avx512(_mm512_add_ps(ax, ax));
    const __m512 big = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
    const __m512 z = _mm512_mul_ps(ax, ax);
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(vexp::t13), z, _mm512_set1_ps(vexp::t11));
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(vexp::t9));
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(vexp::t7));
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(vexp::t5));
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(vexp::t3));
    const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(ax, z), q, ax);
    /* NaN compares false and takes the exp branch, which keeps it NaN */
    const __m512 r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(vexp::tanh_small), _CMP_LT_OQ), big, small);
    return _mm512_or_ps(r, _mm512_and_ps(sign, x));
}

template <int OP> TSR_TARGET_AVX512 static inline __m512 act_avx512(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    switch (OP) {
        case ACT_EXP: return exp_avx512(x);
        case ACT_SILU: return _mm512_div_ps(x, _mm512_add_ps(one, exp_avx512(_mm512_xor_ps(x, _mm512_set1_ps(-0.0f)))));
        case ACT_SIGMOID: return _mm512_div_ps(one, _mm512_add_ps(one, exp_avx512(_mm512_xor_ps(x, _mm512_set1_ps(-0.0f)))));
        case ACT_GELU: {
            const __m512 m2u = _mm512_mul_ps(x, _mm512_fmadd_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(vexp::gelu_k3), _mm512_set1_ps(vexp::gelu_k1)));
            return _mm512_div_ps(x, _mm512_add_ps(one, exp_avx512(m2u)));
        }
        case ACT_GELU_QUICK: return _mm512_div_ps(x, _mm512_add_ps(one, exp_avx512(_mm512_mul_ps(x, _mm512_set1_ps(vexp::gelu_quick_k)))));
        default: return tanh_avx512(x);
    }
}

static inline __mmask16 tail_mask16(int64_t k) { return (__mmask16)((1u << k) - 1); }

template <int OP> TSR_TARGET_AVX512 static void act_row_avx512(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, act_avx512<OP>(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = tail_mask16(n - i);
        _mm512_mask_storeu_ps(y + i, m, act_avx512<OP>(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

TSR_TARGET_AVX512 static void swiglu_avx512(int64_t n, const float * x, const float * g, float * y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(act_avx512<ACT_SILU>(_mm512_loadu_ps(x + i)), _mm512_loadu_ps(g + i)));
    if (i < n) {
        const __mmask16 m = tail_mask16(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(act_avx512<ACT_SILU>(_mm512_maskz_loadu_ps(m, x + i)), _mm512_maskz_loadu_ps(m, g + i)));
    }
}

TSR_TARGET_AVX512 static void soft_max_avx512(int64_t n, float * x) {
    /* max_ps keeps or drops a NaN by operand order: NaN lanes are tracked apart */
    __m512 vm = _mm512_set1_ps(-INFINITY);
    __mmask16 nan = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        vm = _mm512_max_ps(vm, v);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    if (i < n) {
        const __mmask16 m = tail_mask16(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        vm = _mm512_mask_max_ps(vm, m, vm, v);
        nan |= _mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q);
    }
    const float mx = _mm512_reduce_max_ps(vm);
    if (soft_max_special_row(nan ? NAN : mx, n, x)) return;
    /* the sum in double, as the scalar reference keeps it */
    const __m512 vmx = _mm512_set1_ps(mx);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : tail_mask16(n - i);
        const __m512 e = _mm512_maskz_mov_ps(m, exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vmx)));
        _mm512_mask_storeu_ps(x + i, m, e);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    const double sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));   /* sum >= 1: the max's own term */
    for (i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : tail_mask16(n - i);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
    }
}

static constexpr act_kernels act_table_avx512 = [] {
    act_kernels a{};
    a.exp = act_row_avx512<ACT_EXP>;
    a.silu = act_row_avx512<ACT_SILU>;
    a.sigmoid = act_row_avx512<ACT_SIGMOID>;
    a.gelu = act_row_avx512<ACT_GELU>;
    a.gelu_quick = act_row_avx512<ACT_GELU_QUICK>;
    a.tanh = act_row_avx512<ACT_TANH>;
    a.swiglu = swiglu_avx512;
    a.soft_max = soft_max_avx512;
    return a;
}();

/* Q8_0 / Q4_0 use the AVX2 kernels unless the CPU has VNNI; no GEMM for them without it. */
static kernels make_kernels_avx512() {
    const cpu_features & f = features();
    kernels k{};
    k.isa = TSR_CPU_ISA_AVX512;
    k.dot_f32 = dot_f32_avx512;
    k.dot_f16 = dot_f16_avx512;
    k.dot_bf16 = dot_bf16_avx512;
    k.dot_q8_0 = dot_q8_0_avx2;
    k.dot_q4_0 = dot_q4_0_avx2;
    k.dot4[SLOT_F32] = dot4_avx512<0>;
    k.dot4[SLOT_F16] = dot4_avx512<1>;
    k.dot4[SLOT_BF16] = dot4_avx512<2>;
    k.dot4[SLOT_Q8_0] = dot4_q8_0_avx2;
    k.dot4[SLOT_Q4_0] = dot4_q4_0_avx2;
    k.dot_q8k[KSLOT_Q2_K] = dot_q2_K_q8_K_avx2;
    k.dot_q8k[KSLOT_Q3_K] = dot_q3_K_q8_K_avx2;
    k.dot_q8k[KSLOT_Q4_K] = dot_q4_K_q8_K_avx2;
    k.dot_q8k[KSLOT_Q5_K] = dot_q5_K_q8_K_avx2;
    k.dot_q8k[KSLOT_Q6_K] = dot_q6_K_q8_K_avx2;
    k.dot_yq8[QSLOT_Q4_1] = dot_q4_1_yq8_avx2;
    k.dot_yq8[QSLOT_Q5_0] = dot_q5_0_yq8_avx2;
    k.dot_yq8[QSLOT_Q5_1] = dot_q5_1_yq8_avx2;
    k.dot_yq8[QSLOT_IQ4_NL] = dot_iq4_nl_yq8_avx2;
    k.quantize_q8k = quantize_q8k_avx2;
    k.quantize_y = quantize_y_avx2;
    k.axpy_f32 = axpy_f32_avx512;
    k.f16_to_f32 = cvt_f16_f32_avx2;
    k.gemm[SLOT_F32] = &gemm_f32_avx512;
    k.gemm[SLOT_F16] = &gemm_f16_avx512;
    k.gemm[SLOT_BF16] = &gemm_bf16cvt_avx512;
    k.act = &act_table_avx512;
    if (f.avx512_bf16) k.gemm[SLOT_BF16] = &gemm_bf16_avx512;
    if (f.avx512_vnni) {
        k.dot_q8_0 = gemv_q8_0_avx512vnni;
        k.dot_q4_0 = gemv_q4_0_avx512vnni;
        k.dot4[SLOT_Q8_0] = dot4_q8_0_avx512vnni;
        k.dot4[SLOT_Q4_0] = dot4_q4_0_avx512vnni;
        k.gemm[SLOT_Q8_0] = &gemm_q8_0_avx512;
        k.gemm[SLOT_Q4_0] = &gemm_q4_0_avx512;
    }
    return k;
}

} // namespace tcpu
} // namespace
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif /* TSR_CPU_HAVE_X86_KERNELS */
/* ---- backends/cpu/impl/kernels_neon.inl ---- */
/*
 * kernels_neon.inl - aarch64 Advanced SIMD kernels (baseline ARMv8.0: no dotprod, no
 * fp16 arithmetic needed). Tested under qemu-user by scripts/test-aarch64.sh.
 */
#if defined(TSR_CPU_ARM64)
namespace {
namespace tcpu {

static float dot_f32_neon(int64_t n, const float * x, const float * y) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0), a2 = vdupq_n_f32(0), a3 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
        a2 = vfmaq_f32(a2, vld1q_f32(x + i + 8), vld1q_f32(y + i + 8));
        a3 = vfmaq_f32(a3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
    }
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; ++i) s += x[i] * y[i];
    return s;
}

static float dot_f16_neon(int64_t n, const uint16_t * x, const float * y) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(x + i));
        a0 = vfmaq_f32(a0, vcvt_f32_f16(vget_low_f16(h)), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vcvt_high_f32_f16(h), vld1q_f32(y + i + 4));
    }
    float s = vaddvq_f32(vaddq_f32(a0, a1));
    for (; i < n; ++i) s += h2f(x[i]) * y[i];
    return s;
}

static float dot_bf16_neon(int64_t n, const uint16_t * x, const float * y) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t h = vld1q_u16(x + i);
        a0 = vfmaq_f32(a0, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16)), vld1q_f32(y + i + 4));
    }
    float s = vaddvq_f32(vaddq_f32(a0, a1));
    for (; i < n; ++i) s += bf2f(x[i]) * y[i];
    return s;
}

static inline int32_t dot16_s8_neon(int8x16_t a, int8x16_t b) {
    const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t hi = vmull_s8(vget_high_s8(a), vget_high_s8(b));
    return vaddvq_s32(vaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
}

static float dot_q8_0_neon(int64_t n, const tsr_block_q8_0 * x, const yq8 * y) {
    float s = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        const int32_t acc = dot16_s8_neon(vld1q_s8(x[b].qs), vld1q_s8(y[b].qs)) + dot16_s8_neon(vld1q_s8(x[b].qs + 16), vld1q_s8(y[b].qs + 16));
        s += h2f(x[b].d) * y[b].d * (float)acc;
    }
    return s;
}

static float dot_q4_0_neon(int64_t n, const tsr_block_q4_0 * x, const yq8 * y) {
    float s = 0.0f;
    const uint8x16_t m = vdupq_n_u8(0x0F);
    const int8x16_t eight = vdupq_n_s8(8);
    for (int64_t b = 0; b < n / 32; ++b) {
        const uint8x16_t v = vld1q_u8(x[b].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, m)), eight);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);
        const int32_t acc = dot16_s8_neon(lo, vld1q_s8(y[b].qs)) + dot16_s8_neon(hi, vld1q_s8(y[b].qs + 16));
        s += h2f(x[b].d) * y[b].d * (float)acc;
    }
    return s;
}

static void axpy_f32_neon(int64_t n, float a, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
    for (; i < n; ++i) y[i] += a * x[i];
}

static void f16_to_f32_neon(const void * x, float * y, int64_t n) {
    const uint16_t * s = (const uint16_t *)x;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(s + i))));
    for (; i < n; ++i) y[i] = h2f(s[i]);
}

static void cvt_bf16_f32_neon(const void * src, float * dst, int64_t n) {
    const uint16_t * s = (const uint16_t *)src;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(s + i), 16)));
    for (; i < n; ++i) dst[i] = bf2f(s[i]);
}

/* Elements k..k+3 of a src0 row as floats (T: 0 f32, 1 f16, 2 bf16). */
template <int T>
static inline float32x4_t load4_as_f32(const char * row, int64_t k) {
    if (T == 0) return vld1q_f32((const float *)row + k);
    const uint16x4_t h = vld1_u16((const uint16_t *)row + k);
    if (T == 1) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

/* 4 rows x 8 elements per step: 8 accumulators, 4 row streams in flight, y loaded once. */
template <int T>
static void dot4_neon(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const float * y = (const float *)yv;
    float32x4_t acc[4][2];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t y0 = vld1q_f32(y + i), y1 = vld1q_f32(y + i + 4);
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
            const char * row = x + (size_t)r * lda;
            acc[r][0] = vfmaq_f32(acc[r][0], load4_as_f32<T>(row, i), y0);
            acc[r][1] = vfmaq_f32(acc[r][1], load4_as_f32<T>(row, i + 4), y1);
        }
    }
    for (; i + 4 <= n; i += 4) {
        const float32x4_t y0 = vld1q_f32(y + i);
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) acc[r][0] = vfmaq_f32(acc[r][0], load4_as_f32<T>(x + (size_t)r * lda, i), y0);
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
        const char * row = x + (size_t)r * lda;
        float s = vaddvq_f32(vaddq_f32(acc[r][0], acc[r][1]));
        for (int64_t j = i; j < n; ++j) s += elem_as_f32<T>(row, j) * y[j];
        out[r] = s;
    }
}

/* Q8_0 / Q4_0 against yq8 blocks, 4 rows per block step: the y block is loaded once, each
 * row's 32 products reduce to 4 exact int32 lanes, and the 4 rows' lanes fold pairwise
 * (vpaddq_s32) into one vector whose lane r is row r's block sum, so one convert and one
 * fma per block serve all 4 rows. The plain yq8 blocks suffice here: 16-byte vectors
 * already take a block's two halves as stored, and Q4_0's offset of 8 is the same for
 * every row (-8 * sum(y), added once after the fold), so no group of 4 blocks is needed
 * and a row of any n / 32 blocks takes the same loop. */
static inline int32x4_t fold4_s32_neon(int32x4_t p0, int32x4_t p1, int32x4_t p2, int32x4_t p3) {
    return vpaddq_s32(vpaddq_s32(p0, p1), vpaddq_s32(p2, p3));
}

/* The fp16 scales of block b of the 4 rows, as floats (Q8_0 and Q4_0 both start with d). */
template <typename B>
static inline float32x4_t load_d4_neon(const char * x, size_t lda, int64_t b) {
    uint16x4_t h = vdup_n_u16(0);
    h = vld1_lane_u16(&((const B *)x + b)->d, h, 0);
    h = vld1_lane_u16(&((const B *)(x + lda) + b)->d, h, 1);
    h = vld1_lane_u16(&((const B *)(x + 2 * lda) + b)->d, h, 2);
    h = vld1_lane_u16(&((const B *)(x + 3 * lda) + b)->d, h, 3);
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

/* One Q8_0 block against y: 4 lanes of exact int32 partial sums. Two products share an
 * int16 lane (vmlal_high_s8): yq8 bytes are in [-127, 127], so a pair stays within
 * 2 * 128 * 127 < 2^15 even against Q8_0's -128. */
static inline int32x4_t q8_block_neon(const tsr_block_q8_0 * xb, int8x16_t y0, int8x16_t y1) {
    const int8x16_t x0 = vld1q_s8(xb->qs), x1 = vld1q_s8(xb->qs + 16);
    const int16x8_t p0 = vmlal_high_s8(vmull_s8(vget_low_s8(x0), vget_low_s8(y0)), x0, y0);
    const int16x8_t p1 = vmlal_high_s8(vmull_s8(vget_low_s8(x1), vget_low_s8(y1)), x1, y1);
    return vpadalq_s16(vpaddlq_s16(p0), p1);
}

static void dot4_q8_0_neon(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const yq8 * y = (const yq8 *)yv;
    const tsr_block_q8_0 * x0 = (const tsr_block_q8_0 *)x;
    const tsr_block_q8_0 * x1 = (const tsr_block_q8_0 *)(x + lda);
    const tsr_block_q8_0 * x2 = (const tsr_block_q8_0 *)(x + 2 * lda);
    const tsr_block_q8_0 * x3 = (const tsr_block_q8_0 *)(x + 3 * lda);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t b = 0; b < n / 32; ++b) {
        const int8x16_t y0 = vld1q_s8(y[b].qs), y1 = vld1q_s8(y[b].qs + 16);
        const int32x4_t s = fold4_s32_neon(q8_block_neon(x0 + b, y0, y1), q8_block_neon(x1 + b, y0, y1),
                                           q8_block_neon(x2 + b, y0, y1), q8_block_neon(x3 + b, y0, y1));
        const float32x4_t d = vmulq_n_f32(load_d4_neon<tsr_block_q8_0>(x, lda, b), y[b].d);
        acc = vfmaq_f32(acc, vcvtq_f32_s32(s), d);
    }
    vst1q_f32(out, acc);
}

/* One Q4_0 block against y with the nibbles left unsigned (0..15): 4 products per int16
 * lane stay within 4 * 15 * 127 < 2^15. The offset of 8 is taken out after the fold. */
static inline int32x4_t q4_block_neon(const tsr_block_q4_0 * xb, int8x16_t y0, int8x16_t y1) {
    const uint8x16_t v = vld1q_u8(xb->qs);
    const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F)));
    const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
    int16x8_t p = vmull_s8(vget_low_s8(lo), vget_low_s8(y0));
    p = vmlal_high_s8(p, lo, y0);
    p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(y1));
    p = vmlal_high_s8(p, hi, y1);
    return vpaddlq_s16(p);
}

static void dot4_q4_0_neon(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const yq8 * y = (const yq8 *)yv;
    const tsr_block_q4_0 * x0 = (const tsr_block_q4_0 *)x;
    const tsr_block_q4_0 * x1 = (const tsr_block_q4_0 *)(x + lda);
    const tsr_block_q4_0 * x2 = (const tsr_block_q4_0 *)(x + 2 * lda);
    const tsr_block_q4_0 * x3 = (const tsr_block_q4_0 *)(x + 3 * lda);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t b = 0; b < n / 32; ++b) {
        const int8x16_t y0 = vld1q_s8(y[b].qs), y1 = vld1q_s8(y[b].qs + 16);
        int32x4_t s = fold4_s32_neon(q4_block_neon(x0 + b, y0, y1), q4_block_neon(x1 + b, y0, y1),
                                     q4_block_neon(x2 + b, y0, y1), q4_block_neon(x3 + b, y0, y1));
        s = vaddq_s32(s, vdupq_n_s32(-8 * y[b].sum));
        const float32x4_t d = vmulq_n_f32(load_d4_neon<tsr_block_q4_0>(x, lda, b), y[b].d);
        acc = vfmaq_f32(acc, vcvtq_f32_s32(s), d);
    }
    vst1q_f32(out, acc);
}

/* F32 row -> yq8 blocks, byte for byte what quantize_y_scalar writes: the same amax (NaN
 * lanes masked to 0 first, as std::max skips them; vmaxq_f32 would propagate them), the
 * same scalar d and id, the same product, clamp and round half to even (vcvtnq_s32_f32).
 * A NaN product (NaN input, or inf * 0 when amax is inf) passes the clamp as NaN, and
 * FCVTNS turns NaN into 0, which is the scalar code's explicit choice. */
static void quantize_y_neon(const float * x, yq8 * y, int64_t n) {
    const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
    for (int64_t b = 0; b < n / 32; ++b) {
        const float * xb = x + b * 32;
        float32x4_t v[8];
        float32x4_t m = vdupq_n_f32(0);
        for (int j = 0; j < 8; ++j) {
            v[j] = vld1q_f32(xb + 4 * j);
            const uint32x4_t ok = vceqq_f32(v[j], v[j]);
            m = vmaxq_f32(m, vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(vabsq_f32(v[j])), ok)));
        }
        const float amax = vmaxvq_f32(m);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int32x4_t q[8];
        int32x4_t sum = vdupq_n_s32(0);
        for (int j = 0; j < 8; ++j) {
            q[j] = vcvtnq_s32_f32(vminq_f32(hi, vmaxq_f32(lo, vmulq_n_f32(v[j], id))));
            sum = vaddq_s32(sum, q[j]);
        }
        /* |q| <= 127: the narrowing moves are exact */
        const int16x8_t h0 = vmovn_high_s32(vmovn_s32(q[0]), q[1]), h1 = vmovn_high_s32(vmovn_s32(q[2]), q[3]);
        const int16x8_t h2 = vmovn_high_s32(vmovn_s32(q[4]), q[5]), h3 = vmovn_high_s32(vmovn_s32(q[6]), q[7]);
        vst1q_s8(y[b].qs, vmovn_high_s16(vmovn_s16(h0), h1));
        vst1q_s8(y[b].qs + 16, vmovn_high_s16(vmovn_s16(h2), h3));
        y[b].d = d;
        y[b].sum = vaddvq_s32(sum);
    }
}

/* Store (or add) one C column of 8 m values; the M edge goes through a buffer. */
static inline void store_col8_neon(float * c, float32x4_t v0, float32x4_t v1, int mr_valid, bool accumulate) {
    if (mr_valid == 8) {
        if (accumulate) {
            v0 = vaddq_f32(v0, vld1q_f32(c));
            v1 = vaddq_f32(v1, vld1q_f32(c + 4));
        }
        vst1q_f32(c, v0);
        vst1q_f32(c + 4, v1);
        return;
    }
    float tmp[8];
    vst1q_f32(tmp, v0);
    vst1q_f32(tmp + 4, v1);
    for (int i = 0; i < mr_valid; ++i) c[i] = accumulate ? c[i] + tmp[i] : tmp[i];
}

/* F32 GEMM micro-kernel: 8 x 12 tile. 24 accumulators + 2 A + 3 B quads = 29 of the 32
 * vector registers; B is used by lane (vfmaq_laneq_f32), so no broadcasts are needed. */
static void gemm_f32_kernel_neon(int kc, const void * ap, const void * bp, float * c, size_t ldc,
                                 int mr_valid, int nr_valid, bool accumulate) {
    const float * a = (const float *)ap;
    const float * b = (const float *)bp;
    float32x4_t c00 = vdupq_n_f32(0), c01 = vdupq_n_f32(0), c10 = vdupq_n_f32(0), c11 = vdupq_n_f32(0);
    float32x4_t c20 = vdupq_n_f32(0), c21 = vdupq_n_f32(0), c30 = vdupq_n_f32(0), c31 = vdupq_n_f32(0);
    float32x4_t c40 = vdupq_n_f32(0), c41 = vdupq_n_f32(0), c50 = vdupq_n_f32(0), c51 = vdupq_n_f32(0);
    float32x4_t c60 = vdupq_n_f32(0), c61 = vdupq_n_f32(0), c70 = vdupq_n_f32(0), c71 = vdupq_n_f32(0);
    float32x4_t c80 = vdupq_n_f32(0), c81 = vdupq_n_f32(0), c90 = vdupq_n_f32(0), c91 = vdupq_n_f32(0);
    float32x4_t ca0 = vdupq_n_f32(0), ca1 = vdupq_n_f32(0), cb0 = vdupq_n_f32(0), cb1 = vdupq_n_f32(0);
    for (int k = 0; k < kc; ++k) {
        const float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4);
        const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8);
#define TSR_NSTEP(bq, l, x0, x1) x0 = vfmaq_laneq_f32(x0, a0, bq, l); x1 = vfmaq_laneq_f32(x1, a1, bq, l);
        TSR_NSTEP(b0, 0, c00, c01) TSR_NSTEP(b0, 1, c10, c11) TSR_NSTEP(b0, 2, c20, c21) TSR_NSTEP(b0, 3, c30, c31)
        TSR_NSTEP(b1, 0, c40, c41) TSR_NSTEP(b1, 1, c50, c51) TSR_NSTEP(b1, 2, c60, c61) TSR_NSTEP(b1, 3, c70, c71)
        TSR_NSTEP(b2, 0, c80, c81) TSR_NSTEP(b2, 1, c90, c91) TSR_NSTEP(b2, 2, ca0, ca1) TSR_NSTEP(b2, 3, cb0, cb1)
#undef TSR_NSTEP
        a += 8;
        b += 12;
    }
    const float32x4_t r[12][2] = { {c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51},
                                   {c60, c61}, {c70, c71}, {c80, c81}, {c90, c91}, {ca0, ca1}, {cb0, cb1} };
    for (int j = 0; j < nr_valid; ++j) store_col8_neon(c + (size_t)j * ldc, r[j][0], r[j][1], mr_valid, accumulate);
}

/* mc = 128 rows x kc = 256 keeps the packed A block (128 KiB) in L2 and one B panel
 * (12 KiB) in L1 on common cores. */
static constexpr gemm_impl gemm_f32_neon = [] {
    gemm_impl g{};
    g.mr = 8; g.nr = 12; g.kc = 256; g.mc = 128;
    g.a_bytes_32k = 8 * 128; g.b_bytes_32k = 12 * 128; g.b_is_q8 = false;
    g.pack_a = pack_panel_f32<8, 4, cvt_f32_copy>;
    g.pack_b = pack_panel_f32<12, 4, cvt_f32_copy>;
    g.kernel = gemm_f32_kernel_neon;
    return g;
}();
static constexpr gemm_impl gemm_f16_neon = gemm_with_pack_a(gemm_f32_neon, pack_panel_f32<8, 2, f16_to_f32_neon>);
static constexpr gemm_impl gemm_bf16_neon = gemm_with_pack_a(gemm_f32_neon, pack_panel_f32<8, 2, cvt_bf16_f32_neon>);

/* Sum over 32 signed byte products, as 4 int32 partial sums. Two products share an int16
 * lane before widening (vmlal_s8): yq8 bytes are in [-127, 127] (quantize_y), so a pair is
 * at most 2 * 128 * 127 even against Q8_0's -128. */
static inline int32x4_t dot32_s8_partial(const int8_t * x, const int8_t * y) {
    const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
    const int8x16_t y0 = vld1q_s8(y), y1 = vld1q_s8(y + 16);
    const int32x4_t s = vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(x0), vget_low_s8(y0)), x0, y0));
    return vpadalq_s16(s, vmlal_high_s8(vmull_s8(vget_low_s8(x1), vget_low_s8(y1)), x1, y1));
}

/* Store (or add) one C column of 4 m values. */
static inline void store_col4_neon(float * c, float32x4_t v, int mr_valid, bool accumulate) {
    if (mr_valid == 4) {
        vst1q_f32(c, accumulate ? vaddq_f32(v, vld1q_f32(c)) : v);
        return;
    }
    float tmp[4];
    vst1q_f32(tmp, v);
    for (int i = 0; i < mr_valid; ++i) c[i] = accumulate ? c[i] + tmp[i] : tmp[i];
}

/* Integer GEMM micro-kernel over signed int8 panels (pack_panel_s8_a/b): 4 x 4 tile. Per 32 k
 * block and column n, the 4 partial-sum vectors of the 4 rows reduce pairwise (vpaddq_s32)
 * into one vector over m, which is scaled by d_a[m] * d_b[n] like the dot-product path. */
static void gemm_s8_kernel_neon(int kc, const void * ap, const void * bp, float * c, size_t ldc,
                                int mr_valid, int nr_valid, bool accumulate) {
    const uint8_t * a = (const uint8_t *)ap;
    const uint8_t * b = (const uint8_t *)bp;
    float32x4_t acc[4];
    for (int n = 0; n < 4; ++n) acc[n] = vdupq_n_f32(0);
    for (int blk = 0; blk < kc / 32; ++blk) {
        const int8_t * aq = (const int8_t *)a;
        const int8_t * bq = (const int8_t *)b;
        const float32x4_t da = vld1q_f32((const float *)(a + 4 * 32));
        const float * db = (const float *)(b + 4 * 32);
        for (int n = 0; n < 4; ++n) {
            const int8_t * yn = bq + n * 32;
            const int32x4_t s01 = vpaddq_s32(dot32_s8_partial(aq, yn), dot32_s8_partial(aq + 32, yn));
            const int32x4_t s23 = vpaddq_s32(dot32_s8_partial(aq + 64, yn), dot32_s8_partial(aq + 96, yn));
            acc[n] = vfmaq_f32(acc[n], vcvtq_f32_s32(vpaddq_s32(s01, s23)), vmulq_n_f32(da, db[n]));
        }
        a += 4 * 36;
        b += 4 * 36;
    }
    for (int n = 0; n < nr_valid; ++n) store_col4_neon(c + (size_t)n * ldc, acc[n], mr_valid, accumulate);
}

/* kc = 512: 16 blocks; the packed A block is 128 rows x 16 x 36 bytes (72 KiB). */
static constexpr gemm_impl gemm_q8_0_neon = [] {
    gemm_impl g{};
    g.mr = 4; g.nr = 4; g.kc = 512; g.mc = 128;
    g.a_bytes_32k = 4 * 36; g.b_bytes_32k = 4 * 36; g.b_is_q8 = true;
    g.pack_a = pack_panel_s8_a<4, TSR_TYPE_Q8_0>;
    g.pack_b = pack_panel_s8_b<4>;
    g.kernel = gemm_s8_kernel_neon;
    return g;
}();
static constexpr gemm_impl gemm_q4_0_neon = gemm_with_pack_a(gemm_q8_0_neon, pack_panel_s8_a<4, TSR_TYPE_Q4_0>);
/* ---- expf and the activations on it (constants and method: vexp in cpu_internal.inl) ---- */

static inline float32x4_t exp_neon(float32x4_t x) {
    /* fmax/fmin return NaN when either operand is NaN: NaN passes the clamp */
    x = vminq_f32(vdupq_n_f32(vexp::hi), vmaxq_f32(vdupq_n_f32(vexp::lo), x));
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, vexp::log2e));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(vexp::ln2_hi));
    r = vfmsq_f32(r, n, vdupq_n_f32(vexp::ln2_lo));
    float32x4_t q = vfmaq_f32(vdupq_n_f32(vexp::c5), vdupq_n_f32(vexp::c6), r);
    q = vfmaq_f32(vdupq_n_f32(vexp::c4), q, r);
    q = vfmaq_f32(vdupq_n_f32(vexp::c3), q, r);
    q = vfmaq_f32(vdupq_n_f32(vexp::c2), q, r);
    const float32x4_t p = vaddq_f32(vdupq_n_f32(1.0f), vfmaq_f32(r, q, vmulq_f32(r, r)));
    /* n in [-159, 145] here (a NaN lane converts to 0, p is NaN) */
    const int32x4_t ni = vcvtq_s32_f32(n);
    const int32x4_t n1 = vshrq_n_s32(ni, 1);
    const int32x4_t bias = vdupq_n_s32(127);
    const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vsubq_s32(ni, n1), bias), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
}

static inline float32x4_t tanh_neon(float32x4_t x) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    const float32x4_t ax = vabsq_f32(x);
    const float32x4_t e = exp_neon(vaddq_f32(ax, ax));
    const float32x4_t big = vsubq_f32(one, vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, one)));
    const float32x4_t z = vmulq_f32(ax, ax);
    float32x4_t q = vfmaq_f32(vdupq_n_f32(vexp::t11), vdupq_n_f32(vexp::t13), z);
    q = vfmaq_f32(vdupq_n_f32(vexp::t9), q, z);
    q = vfmaq_f32(vdupq_n_f32(vexp::t7), q, z);
    q = vfmaq_f32(vdupq_n_f32(vexp::t5), q, z);
    q = vfmaq_f32(vdupq_n_f32(vexp::t3), q, z);
    const float32x4_t small = vfmaq_f32(ax, vmulq_f32(ax, z), q);
    /* NaN compares false and takes the exp branch, which keeps it NaN */
    const float32x4_t r = vbslq_f32(vcltq_f32(ax, vdupq_n_f32(vexp::tanh_small)), small, big);
    const uint32x4_t sign = vdupq_n_u32(0x80000000u);
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(r), vandq_u32(sign, vreinterpretq_u32_f32(x))));
}

template <int OP> static inline float32x4_t act_neon(float32x4_t x) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    switch (OP) {
        case ACT_EXP: return exp_neon(x);
        case ACT_SILU: return vdivq_f32(x, vaddq_f32(one, exp_neon(vnegq_f32(x))));
        case ACT_SIGMOID: return vdivq_f32(one, vaddq_f32(one, exp_neon(vnegq_f32(x))));
        case ACT_GELU: {
            const float32x4_t m2u = vmulq_f32(x, vfmaq_f32(vdupq_n_f32(vexp::gelu_k1), vmulq_f32(x, x), vdupq_n_f32(vexp::gelu_k3)));
            return vdivq_f32(x, vaddq_f32(one, exp_neon(m2u)));
        }
        case ACT_GELU_QUICK: return vdivq_f32(x, vaddq_f32(one, exp_neon(vmulq_n_f32(x, vexp::gelu_quick_k))));
        default: return tanh_neon(x);
    }
}

/* The last n % 4 elements go through a zero-padded copy (no masked loads on NEON). */
template <int OP> static void act_row_neon(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, act_neon<OP>(vld1q_f32(x + i)));
    if (i < n) {
        float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        std::memcpy(t, x + i, (size_t)(n - i) * 4);
        vst1q_f32(t, act_neon<OP>(vld1q_f32(t)));
        std::memcpy(y + i, t, (size_t)(n - i) * 4);
    }
}

static void swiglu_neon(int64_t n, const float * x, const float * g, float * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(act_neon<ACT_SILU>(vld1q_f32(x + i)), vld1q_f32(g + i)));
    if (i < n) {
        float t[4] = {0.0f, 0.0f, 0.0f, 0.0f}, u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        std::memcpy(t, x + i, (size_t)(n - i) * 4);
        std::memcpy(u, g + i, (size_t)(n - i) * 4);
        vst1q_f32(t, vmulq_f32(act_neon<ACT_SILU>(vld1q_f32(t)), vld1q_f32(u)));
        std::memcpy(y + i, t, (size_t)(n - i) * 4);
    }
}

static void soft_max_neon(int64_t n, float * x) {
    /* NaN lanes are tracked apart (v == v fails for them), whatever the max does with them */
    float32x4_t vm = vdupq_n_f32(-INFINITY);
    uint32x4_t ok = vdupq_n_u32(0xffffffffu);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        vm = vmaxq_f32(vm, v);
        ok = vandq_u32(ok, vceqq_f32(v, v));
    }
    float mx = vmaxvq_f32(vm);
    bool nan = vminvq_u32(ok) == 0;
    for (; i < n; ++i) {
        mx = std::max(mx, x[i]);
        nan |= x[i] != x[i];
    }
    if (soft_max_special_row(nan ? NAN : mx, n, x)) return;
    /* the sum in double, as the scalar reference keeps it; the tail pads with -inf (e = 0) */
    const float32x4_t vmx = vdupq_n_f32(mx);
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = vdupq_n_f64(0.0);
    for (i = 0; i < n; i += 4) {
        const int64_t k = std::min<int64_t>(4, n - i);
        float t[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        std::memcpy(t, x + i, (size_t)k * 4);
        const float32x4_t e = exp_neon(vsubq_f32(vld1q_f32(t), vmx));
        vst1q_f32(t, e);
        std::memcpy(x + i, t, (size_t)k * 4);
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(e)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(e));
    }
    const double sum = vaddvq_f64(vaddq_f64(s0, s1));
    const float inv = (float)(1.0 / sum);   /* sum >= 1: the max's own term */
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inv));
    for (; i < n; ++i) x[i] *= inv;
}

static constexpr act_kernels act_table_neon = [] {
    act_kernels a{};
    a.exp = act_row_neon<ACT_EXP>;
    a.silu = act_row_neon<ACT_SILU>;
    a.sigmoid = act_row_neon<ACT_SIGMOID>;
    a.gelu = act_row_neon<ACT_GELU>;
    a.gelu_quick = act_row_neon<ACT_GELU_QUICK>;
    a.tanh = act_row_neon<ACT_TANH>;
    a.swiglu = swiglu_neon;
    a.soft_max = soft_max_neon;
    return a;
}();

static constexpr kernels kernels_neon = [] {
    kernels k{};
    k.isa = TSR_CPU_ISA_NEON;
    k.dot_f32 = dot_f32_neon;
    k.dot_f16 = dot_f16_neon;
    k.dot_bf16 = dot_bf16_neon;
    k.dot_q8_0 = dot_q8_0_neon;
    k.dot_q4_0 = dot_q4_0_neon;
    k.dot4[SLOT_F32] = dot4_neon<0>;
    k.dot4[SLOT_F16] = dot4_neon<1>;
    k.dot4[SLOT_BF16] = dot4_neon<2>;
    k.dot4[SLOT_Q8_0] = dot4_q8_0_neon;
    k.dot4[SLOT_Q4_0] = dot4_q4_0_neon;
    k.quantize_y = quantize_y_neon;
    k.axpy_f32 = axpy_f32_neon;
    k.f16_to_f32 = f16_to_f32_neon;
    k.gemm[SLOT_F32] = &gemm_f32_neon;
    k.gemm[SLOT_F16] = &gemm_f16_neon;
    k.gemm[SLOT_BF16] = &gemm_bf16_neon;
    k.gemm[SLOT_Q8_0] = &gemm_q8_0_neon;
    k.gemm[SLOT_Q4_0] = &gemm_q4_0_neon;
    k.act = &act_table_neon;
    return k;
}();

} // namespace tcpu
} // namespace
#endif /* TSR_CPU_ARM64 */
/* ---- backends/cpu/impl/gemm.inl ---- */
/*
 * gemm.inl - matrix multiplication: the kernel table in use, the blocked/packed GEMM
 * driver (operands packed into the workspace), the dot-product path for matrix-vector
 * and small N, and mul_mat itself (src1 converted or quantized into the workspace).
 */
namespace {
namespace tcpu {

static const kernels * get_kernels() {
    switch ((enum tsr_cpu_isa)isa_current().load(std::memory_order_relaxed)) {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
        case TSR_CPU_ISA_AVX512: {
            static const kernels k = make_kernels_avx512();
            return &k;
        }
        case TSR_CPU_ISA_AVX2: return &kernels_avx2;
#endif
#if defined(TSR_CPU_ARM64)
        case TSR_CPU_ISA_NEON: return &kernels_neon;
#endif
        default: return &kernels_scalar;
    }
}

enum { GEMM_NC = 528, GEMM_MIN_N = 6 };

/* C[n*ldc + m] = sum_k A[m][k] * B[n][k] for m in [m0, m1), all n. */
struct mm_args {
    enum tsr_type ta;           /* type of A rows (after any conversion) */
    const char * A; size_t lda;
    const char * B; size_t ldb; /* F32 rows, or yq8 rows when A is quantized */
    int64_t M, N, K;
    float * C; size_t ldc;      /* in floats */
    const gemm_impl * g;        /* NULL: dot products */
};

static size_t gemm_thread_bytes(const gemm_impl * g, int64_t N) {
    if (!g) return 0;
    const int64_t nc = std::min<int64_t>(N, GEMM_NC);
    const size_t kb = (size_t)g->kc / 32;
    const size_t bp = (size_t)((nc + g->nr - 1) / g->nr) * g->b_bytes_32k * kb;
    const size_t ap = (size_t)((g->mc + g->mr - 1) / g->mr) * g->a_bytes_32k * kb;
    return align_up(bp, 64) + align_up(ap, 64);
}

static inline float dot_any(const kernels * K, enum tsr_type ta, int64_t n, const char * x, const char * y) {
    switch (ta) {
        case TSR_TYPE_F32:  return K->dot_f32(n, (const float *)x, (const float *)y);
        case TSR_TYPE_F16:  return K->dot_f16(n, (const uint16_t *)x, (const float *)y);
        case TSR_TYPE_BF16: return K->dot_bf16(n, (const uint16_t *)x, (const float *)y);
        case TSR_TYPE_Q8_0: return K->dot_q8_0(n, (const tsr_block_q8_0 *)x, (const yq8 *)y);
        case TSR_TYPE_Q4_0: return K->dot_q4_0(n, (const tsr_block_q4_0 *)x, (const yq8 *)y);
        default: {
            const int qs = yq8_slot(ta);
            if (qs < 0) return 0.0f;
            const auto dot = K->dot_yq8[qs] ? K->dot_yq8[qs] : kernels_scalar.dot_yq8[qs];
            return dot(n, x, (const yq8 *)y);
        }
    }
}

/* K-quant rows against Q8_K columns (the ISA's dot, else the scalar path's). */
static void mm_range_q8k(const kernels * K, const mm_args & a, int64_t m0, int64_t m1) {
    const int ks = q8k_slot(a.ta);
    const auto dot = K->dot_q8k[ks] ? K->dot_q8k[ks] : kernels_scalar.dot_q8k[ks];
    for (int64_t m = m0; m < m1; ++m) {
        const char * x = a.A + (size_t)m * a.lda;
        for (int64_t n = 0; n < a.N; ++n)
            a.C[(size_t)n * a.ldc + m] = dot(a.K, x, (const tsr_block_q8_K *)(a.B + (size_t)n * a.ldb));
    }
}

static void mm_range(const kernels * K, const mm_args & a, int64_t m0, int64_t m1, uint8_t * tws) {
    if (m0 >= m1) return;
    if (q8k_slot(a.ta) >= 0) return mm_range_q8k(K, a, m0, m1);
    const gemm_impl * g = a.g;
    if (!g) {
        /* Dot products. With a 4-row kernel, the range is cut into 4 equal parts walked side by
         * side: each part is one long sequential stream (rows are contiguous), and four of
         * them keep enough DRAM reads in flight for one core, where 4 adjacent rows would
         * restart the hardware prefetcher at every row. The rows left over go through the
         * same kernel (one row four times), so a row's result never depends on the split. */
        const int slot = type_slot(a.ta);
        const bool four = slot >= 0 && K->dot4[slot];
        const int64_t q = four ? (m1 - m0) / 4 : 0;
        /* columns innermost: the 4 rows stay in cache while every column of src1 passes */
        for (int64_t i = 0; i < q; ++i)
            for (int64_t n = 0; n < a.N; ++n) {
                float o[4];
                K->dot4[slot](a.K, a.A + (size_t)(m0 + i) * a.lda, (size_t)q * a.lda, a.B + (size_t)n * a.ldb, o);
                float * c = a.C + (size_t)n * a.ldc;
                for (int r = 0; r < 4; ++r) c[m0 + i + r * q] = o[r];
            }
        for (int64_t m = m0 + 4 * q; m < m1; ++m) {
            const char * x = a.A + (size_t)m * a.lda;
            for (int64_t n = 0; n < a.N; ++n) {
                const char * y = a.B + (size_t)n * a.ldb;
                float o[4];
                if (four) K->dot4[slot](a.K, x, 0, y, o);
                else o[0] = dot_any(K, a.ta, a.K, x, y);
                a.C[(size_t)n * a.ldc + m] = o[0];
            }
        }
        return;
    }
    const int64_t nc_max = std::min<int64_t>(a.N, GEMM_NC);
    const size_t kb_max = (size_t)g->kc / 32;
    uint8_t * bpack = tws;
    uint8_t * apack = tws + align_up((size_t)((nc_max + g->nr - 1) / g->nr) * g->b_bytes_32k * kb_max, 64);
    for (int64_t jc = 0; jc < a.N; jc += GEMM_NC) {
        const int64_t nc = std::min<int64_t>(GEMM_NC, a.N - jc);
        for (int64_t pc = 0; pc < a.K; pc += g->kc) {
            const int kcp = (int)std::min<int64_t>(g->kc, (a.K - pc + 31) / 32 * 32);
            const size_t bpanel = g->b_bytes_32k * (size_t)(kcp / 32);
            const size_t apanel = g->a_bytes_32k * (size_t)(kcp / 32);
            for (int64_t jr = 0; jr < nc; jr += g->nr)
                g->pack_b(a.B + (size_t)(jc + jr) * a.ldb, a.ldb, (int)std::min<int64_t>(g->nr, nc - jr), a.K, pc, kcp,
                          bpack + (size_t)(jr / g->nr) * bpanel);
            for (int64_t ic = m0; ic < m1; ic += g->mc) {
                const int64_t mc = std::min<int64_t>(g->mc, m1 - ic);
                for (int64_t ir = 0; ir < mc; ir += g->mr)
                    g->pack_a(a.A + (size_t)(ic + ir) * a.lda, a.lda, (int)std::min<int64_t>(g->mr, mc - ir), a.K, pc, kcp,
                              apack + (size_t)(ir / g->mr) * apanel);
                for (int64_t jr = 0; jr < nc; jr += g->nr) {
                    const int nrv = (int)std::min<int64_t>(g->nr, nc - jr);
                    const uint8_t * bp = bpack + (size_t)(jr / g->nr) * bpanel;
                    for (int64_t ir = 0; ir < mc; ir += g->mr) {
                        const int mrv = (int)std::min<int64_t>(g->mr, mc - ir);
                        g->kernel(kcp, apack + (size_t)(ir / g->mr) * apanel, bp,
                                  a.C + (size_t)(jc + jr) * a.ldc + (ic + ir), a.ldc, mrv, nrv, pc > 0);
                    }
                }
            }
        }
    }
}

/* Thread ith's share of a's rows, in whole mr-row panels of the GEMM (static split: the
 * convolutions call it between barriers). */
static void mm_range_split(const cparams & p, const mm_args & a, uint8_t * tws) {
    const int64_t mr = a.g ? a.g->mr : 1;
    int64_t csz = (a.M + p.nth - 1) / p.nth;
    csz = (csz + mr - 1) / mr * mr;
    mm_range(p.K, a, std::min<int64_t>(a.M, csz * p.ith), std::min<int64_t>(a.M, csz * (p.ith + 1)), tws);
}

/* ---- mul_mat ------------------------------------------------------------------------------ */

struct mm_plan {
    enum tsr_type ta;         /* A type as computed */
    bool x_conv;              /* src0 rows not contiguous: convert to dense F32 */
    bool y_q8;                /* src1 quantized to yq8 */
    bool y_q8k;               /* src1 quantized to Q8_K (K-quant weights) */
    bool y_conv;              /* src1 converted to dense F32 */
    bool y_private;           /* few src1 rows: every thread converts them into its own
                               * scratch, so no barrier separates the phases */
    const gemm_impl * g;
    size_t x_bytes, y_bytes, y_row;
    size_t y_shared;          /* y_bytes in the shared area (0 when y_private) */
    size_t thread_bytes;
    bool y_prepared() const { return y_q8 || y_q8k || y_conv; }
};

static mm_plan mm_make_plan(const tsr_tensor * dst, const kernels * K, int nth) {
    const tsr_tensor * s0 = dst->src[0];
    const tsr_tensor * s1 = dst->src[1];
    mm_plan pl{};
    const int64_t Kd = s0->ne[0];
    pl.ta = s0->type;
    pl.x_conv = !tsr_is_quantized(s0->type) && s0->nb[0] != tsr_type_size(s0->type);
    if (pl.x_conv) {
        pl.ta = TSR_TYPE_F32;
        pl.x_bytes = align_up((size_t)(Kd * s0->ne[1] * s0->ne[2] * s0->ne[3]) * 4, 64);
    }
    const int64_t ny = s1->ne[1] * s1->ne[2] * s1->ne[3];
    pl.y_q8k = q8k_slot(pl.ta) >= 0;
    pl.y_q8 = tsr_is_quantized(pl.ta) && !pl.y_q8k;
    pl.y_conv = !pl.y_q8 && !pl.y_q8k && (s1->type != TSR_TYPE_F32 || s1->nb[0] != 4);
    const int slot = type_slot(pl.ta);
    pl.g = (slot >= 0 && s1->ne[1] >= GEMM_MIN_N) ? K->gemm[slot] : nullptr;
    /* only the dot-product kernels read yq8's side arrays; GEMM packs the blocks */
    if (pl.y_q8) pl.y_row = pl.g ? (size_t)(Kd / 32) * sizeof(yq8) : yq8_row_bytes(Kd);
    else if (pl.y_q8k) pl.y_row = (size_t)(Kd / TSR_QK_K) * sizeof(tsr_block_q8_K);
    else if (pl.y_conv) pl.y_row = (size_t)Kd * 4;
    pl.y_bytes = align_up(pl.y_row * (size_t)ny, 64);
    pl.thread_bytes = gemm_thread_bytes(pl.g, s1->ne[1]);
    pl.y_private = pl.y_prepared() && !pl.x_conv && ny <= 4 && nth > 1;
    pl.y_shared = pl.y_private ? 0 : pl.y_bytes;
    if (pl.y_private) pl.thread_bytes += pl.y_bytes;
    return pl;
}

static size_t mm_work_size(const tsr_tensor * dst, const kernels * K, int nth) {
    const mm_plan pl = mm_make_plan(dst, K, nth);
    return pl.x_bytes + pl.y_shared + pl.thread_bytes * (size_t)nth;
}

/* Row (i1, i2, i3) of src1 quantized to Q8_K, a super-block at a time when it is not
 * a contiguous F32 row. */
static void quantize_row_q8k(const kernels * K, const tsr_tensor * s1, int64_t i1, int64_t i2, int64_t i3, tsr_block_q8_K * d) {
    const int64_t Kd = s1->ne[0];
    const auto quantize = K->quantize_q8k ? K->quantize_q8k : kernels_scalar.quantize_q8k;
    if (s1->type == TSR_TYPE_F32 && s1->nb[0] == 4) {
        quantize((const float *)tptr(s1, 0, i1, i2, i3), d, Kd);
        mark_nonfinite_blocks<TSR_QK_K>((const float *)tptr(s1, 0, i1, i2, i3), d, Kd);
        return;
    }
    float tmp[TSR_QK_K];
    for (int64_t b = 0; b < Kd / TSR_QK_K; ++b) {
        for (int j = 0; j < TSR_QK_K; ++j) tmp[j] = ld(s1->type, tptr(s1, b * TSR_QK_K + j, i1, i2, i3));
        quantize(tmp, d + b, TSR_QK_K);
        mark_nonfinite_blocks<TSR_QK_K>(tmp, d + b, TSR_QK_K);
    }
}

/* Row (i1, i2, i3) of src1 converted or quantized into d, as the plan says (the yq8 side
 * arrays too when the dot-product kernels read them). */
static void mm_prepare_y_row(const kernels * K, const mm_plan & pl, const tsr_tensor * s1, int64_t i1, int64_t i2, int64_t i3,
                             uint8_t * d) {
    const int64_t Kd = s1->ne[0];
    if (pl.y_q8k) {
        quantize_row_q8k(K, s1, i1, i2, i3, (tsr_block_q8_K *)d);
        return;
    }
    if (pl.y_q8 && s1->type == TSR_TYPE_F32 && s1->nb[0] == 4) {
        quantize_y_nonfinite_nan(K, (const float *)tptr(s1, 0, i1, i2, i3), (yq8 *)d, Kd);
    } else if (pl.y_conv) {
        /* non-contiguous or non-F32 src1: convert */
        float * df = (float *)d;
        for (int64_t i0 = 0; i0 < Kd; ++i0) df[i0] = ld(s1->type, tptr(s1, i0, i1, i2, i3));
    } else {
        /* quantized from a non-contiguous or non-F32 row, 32 elements at a time */
        float tmp[32];
        for (int64_t b = 0; b < Kd / 32; ++b) {
            for (int j = 0; j < 32; ++j) tmp[j] = ld(s1->type, tptr(s1, b * 32 + j, i1, i2, i3));
            quantize_y_nonfinite_nan(K, tmp, (yq8 *)d + b, 32);
        }
    }
    if (pl.y_q8 && !pl.g) y_side((yq8 *)d, Kd / 32, pl.ta);
}

/* op_mul_mat, phase 1: src0 rows converted to dense F32 (xw) and src1 rows converted or
 * quantized (yw), as the plan says; a barrier after, unless every thread made its own. */
static void mm_prepare_operands(const cparams & p, const mm_plan & pl, const tsr_tensor * s0, const tsr_tensor * s1,
                                uint8_t * xw, uint8_t * yw) {
    const int64_t Kd = s0->ne[0];
    if (pl.x_conv) {
        const int64_t nr = s0->ne[1] * s0->ne[2] * s0->ne[3];
        int64_t r0, r1;
        split_rows(nr, p.ith, p.nth, r0, r1);
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % s0->ne[1], i2 = (r / s0->ne[1]) % s0->ne[2], i3 = r / (s0->ne[1] * s0->ne[2]);
            float * d = (float *)xw + (size_t)r * Kd;
            for (int64_t i0 = 0; i0 < Kd; ++i0) d[i0] = ld(s0->type, tptr(s0, i0, i1, i2, i3));
        }
    }
    if (pl.y_prepared()) {
        const int64_t nr = s1->ne[1] * s1->ne[2] * s1->ne[3];
        int64_t r0 = 0, r1 = nr;
        if (!pl.y_private) split_rows(nr, p.ith, p.nth, r0, r1);
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % s1->ne[1], i2 = (r / s1->ne[1]) % s1->ne[2], i3 = r / (s1->ne[1] * s1->ne[2]);
            mm_prepare_y_row(p.K, pl, s1, i1, i2, i3, yw + (size_t)r * pl.y_row);
        }
    }
    if (!pl.y_private) barrier(p);
}

static void op_mul_mat(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * s0 = dst->src[0];
    const tsr_tensor * s1 = dst->src[1];
    const mm_plan pl = mm_make_plan(dst, p.K, p.nth);
    const int64_t Kd = s0->ne[0], M = s0->ne[1], N = s1->ne[1];
    const int64_t ne12 = s1->ne[2], ne13 = s1->ne[3];
    const int64_t r2 = ne12 / s0->ne[2], r3 = ne13 / s0->ne[3];
    uint8_t * xw = p.wdata;
    uint8_t * tw = p.wdata + pl.x_bytes + pl.y_shared + pl.thread_bytes * (size_t)p.ith;
    uint8_t * yw = pl.y_private ? tw + (pl.thread_bytes - pl.y_bytes) : p.wdata + pl.x_bytes;

    /* phase 1: convert src0 / convert or quantize src1 into the workspace */
    if (pl.x_conv || pl.y_prepared()) mm_prepare_operands(p, pl, s0, s1, xw, yw);

    /* phase 2: items = (batch, M chunk), taken dynamically from a shared counter so a
     * thread slowed down by other work on its core takes fewer (the counter is reset by
     * the barrier that ends the previous node or phase 1, and at the start of a graph) */
    const int64_t nbatch = ne12 * ne13;
    const int64_t mr = pl.g ? pl.g->mr : 16;
    const int64_t min_rows = pl.g ? std::max<int64_t>(512, mr) : 64;  /* GEMM chunks repack B: keep them large */
    int64_t mchunks = p.nth == 1 ? 1 : std::max<int64_t>(1, (8 * p.nth + nbatch - 1) / nbatch);
    /* at most M/min_rows chunks, but at least enough for every thread when M allows */
    const int64_t floor_chunks = std::min<int64_t>((p.nth + nbatch - 1) / nbatch, std::max<int64_t>(1, M / mr));
    mchunks = std::max<int64_t>(floor_chunks, std::min<int64_t>(mchunks, M / min_rows));
    int64_t csize = (M + mchunks - 1) / mchunks;
    csize = (csize + mr - 1) / mr * mr;
    mchunks = (M + csize - 1) / csize;
    const int64_t nitems = nbatch * mchunks;
    for (int64_t it = p.nth == 1 ? 0 : p.tp->chunk.fetch_add(1, std::memory_order_relaxed); it < nitems;
         it = p.nth == 1 ? it + 1 : p.tp->chunk.fetch_add(1, std::memory_order_relaxed)) {
        const int64_t b = it / mchunks, mc = it % mchunks;
        const int64_t i12 = b % ne12, i13 = b / ne12;
        const int64_t i02 = i12 / r2, i03 = i13 / r3;
        mm_args a;
        a.ta = pl.ta;
        if (pl.x_conv) {
            a.A = (const char *)xw + (size_t)((i03 * s0->ne[2] + i02) * M) * (size_t)Kd * 4;
            a.lda = (size_t)Kd * 4;
        } else {
            a.A = (const char *)s0->data + i02 * s0->nb[2] + i03 * s0->nb[3];
            a.lda = s0->nb[1];
        }
        if (pl.y_prepared()) {
            a.B = (const char *)yw + (size_t)((i13 * ne12 + i12) * N) * pl.y_row;
            a.ldb = pl.y_row;
        } else {
            a.B = (const char *)s1->data + i12 * s1->nb[2] + i13 * s1->nb[3];
            a.ldb = s1->nb[1];
        }
        a.M = M; a.N = N; a.K = Kd;
        a.C = (float *)((char *)dst->data + i12 * dst->nb[2] + i13 * dst->nb[3]);
        a.ldc = dst->nb[1] / 4;
        a.g = pl.g;
        mm_range(p.K, a, mc * csize, std::min<int64_t>(M, (mc + 1) * csize), tw);
    }
}

} // namespace tcpu
} // namespace
/* ---- backends/cpu/impl/ops_elementwise.inl ---- */
/*
 * ops_elementwise.inl - the CPU ops that go element by element: copies and conversions,
 * binary ops with broadcasting, unary ops and GLU, reductions, and the shape ops (repeat,
 * concat, pad); with the helpers every ops_*.inl file uses.
 * Every op has ggml's semantics. Inputs may be non-contiguous (views, permutes); b is
 * broadcast over a where the op allows it. Each op splits its rows across threads (ith of
 * nth). Ops that the in-place contract allows read each element before writing it, so dst
 * may alias the operand. The hot inner loops call the ISA kernel table (dot products, GEMM,
 * axpy, the activation row kernels).
 */
namespace {
namespace tcpu {

static inline void row_index(const tsr_tensor * t, int64_t ir, int64_t & i1, int64_t & i2, int64_t & i3) {
    i1 = ir % t->ne[1];
    i2 = (ir / t->ne[1]) % t->ne[2];
    i3 = ir / (t->ne[1] * t->ne[2]);
}

static inline bool row_contig(const tsr_tensor * t) { return t->nb[0] == tsr_type_size(t->type); }

static inline float * thread_floats(const cparams & p, size_t per_thread_floats, size_t offset_bytes = 0) {
    return (float *)(p.wdata + offset_bytes + align_up(per_thread_floats * 4, 64) * (size_t)p.ith);
}

/* ---- copies and conversions ----------------------------------------------------------- */

static void op_cpy(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const enum tsr_type ts = src->type, td = dst->type;
    if (ts == td && tsr_is_contiguous(src) && tsr_is_contiguous(dst) && tsr_nbytes(src) == tsr_nbytes(dst)) {
        /* same bytes in the same order (any type, quantized too): split the byte range */
        const int64_t nbytes = (int64_t)tsr_nbytes(dst);
        int64_t b0, b1;
        split_rows(nbytes, p.ith, p.nth, b0, b1);
        if (b1 > b0 && dst->data != src->data) std::memmove((char *)dst->data + b0, (const char *)src->data + b0, (size_t)(b1 - b0));
        return;
    }
    if (tsr_are_same_shape(src, dst)) {
        const int64_t nr = tsr_nrows(dst), ne0 = dst->ne[0];
        int64_t r0, r1;
        split_rows(nr, p.ith, p.nth, r0, r1);
        float * tmp = thread_floats(p, (size_t)ne0);
        for (int64_t ir = r0; ir < r1; ++ir) {
            int64_t i1, i2, i3;
            row_index(dst, ir, i1, i2, i3);
            const char * s = tptr(src, 0, i1, i2, i3);
            char * d = tptr(dst, 0, i1, i2, i3);
            if (ts == td && row_contig(src) && row_contig(dst)) {
                std::memmove(d, s, tsr_row_size(ts, ne0));
            } else if (tsr_is_quantized(ts) || tsr_is_quantized(td)) {
                if (tsr_is_quantized(ts)) row_to_f32(ts, s, tmp, ne0);
                else for (int64_t i0 = 0; i0 < ne0; ++i0) tmp[i0] = ld(ts, s + i0 * src->nb[0]);
                if (tsr_is_quantized(td)) row_from_f32(td, tmp, d, ne0);
                else for (int64_t i0 = 0; i0 < ne0; ++i0) st(td, d + i0 * dst->nb[0], tmp[i0]);
            } else if (ts == TSR_TYPE_F32 && td == TSR_TYPE_F32) {
                for (int64_t i0 = 0; i0 < ne0; ++i0) *(float *)(d + i0 * dst->nb[0]) = *(const float *)(s + i0 * src->nb[0]);
            } else if (ts == td) {
                const size_t es = tsr_type_size(ts);
                for (int64_t i0 = 0; i0 < ne0; ++i0) std::memcpy(d + i0 * dst->nb[0], s + i0 * src->nb[0], es);
            } else {
                for (int64_t i0 = 0; i0 < ne0; ++i0) st(td, d + i0 * dst->nb[0], ld(ts, s + i0 * src->nb[0]));
            }
        }
        return;
    }
    /* different shapes, same element count: flat logical order (non-quantized) */
    const int64_t n = tsr_nelements(dst);
    int64_t e0, e1;
    split_rows(n, p.ith, p.nth, e0, e1);
    for (int64_t e = e0; e < e1; ++e) {
        int64_t r = e;
        const int64_t s0 = r % src->ne[0]; r /= src->ne[0];
        const int64_t s1 = r % src->ne[1]; r /= src->ne[1];
        const int64_t s2 = r % src->ne[2]; r /= src->ne[2];
        const int64_t s3 = r;
        r = e;
        const int64_t d0 = r % dst->ne[0]; r /= dst->ne[0];
        const int64_t d1 = r % dst->ne[1]; r /= dst->ne[1];
        const int64_t d2 = r % dst->ne[2]; r /= dst->ne[2];
        const int64_t d3 = r;
        const char * s = tptr(src, s0, s1, s2, s3);
        char * d = tptr(dst, d0, d1, d2, d3);
        if (ts == td) std::memcpy(d, s, tsr_type_size(ts));
        else st(td, d, ld(ts, s));
    }
}

/* ---- binary elementwise with broadcasting ----------------------------------------------- */

template <int OP> static inline float bin_f(float a, float b) {
    return OP == TSR_OP_ADD ? a + b : OP == TSR_OP_SUB ? a - b : OP == TSR_OP_MUL ? a * b : a / b;
}

template <int OP>
static void op_binary_t(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    const int64_t ne0 = dst->ne[0], ne10 = b->ne[0];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    const bool fast = a->type == TSR_TYPE_F32 && b->type == TSR_TYPE_F32 && dst->type == TSR_TYPE_F32 &&
                      a->nb[0] == 4 && b->nb[0] == 4 && dst->nb[0] == 4;
    const bool qa = tsr_is_quantized(a->type);
    float * tmp = qa ? thread_floats(p, (size_t)ne0) : nullptr;
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * pa = tptr(a, 0, i1, i2, i3);
        const char * pb = tptr(b, 0, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
        char * pd = tptr(dst, 0, i1, i2, i3);
        if (qa) {  /* quantized a (ADD): dequantize, add, requantize the row */
            row_to_f32(a->type, pa, tmp, ne0);
            for (int64_t i = 0; i < ne0; ++i) tmp[i] = bin_f<OP>(tmp[i], ld(b->type, pb + (i % ne10) * b->nb[0]));
            row_from_f32(dst->type, tmp, pd, ne0);
        } else if (fast) {
            const float * fa = (const float *)pa;
            const float * fb = (const float *)pb;
            float * fd = (float *)pd;
            if (ne10 == ne0) {
                for (int64_t i = 0; i < ne0; ++i) fd[i] = bin_f<OP>(fa[i], fb[i]);
            } else {
                for (int64_t j = 0; j < ne0; j += ne10)
                    for (int64_t i = 0; i < ne10; ++i) fd[j + i] = bin_f<OP>(fa[j + i], fb[i]);
            }
        } else {
            for (int64_t i = 0; i < ne0; ++i)
                st(dst->type, pd + i * dst->nb[0],
                   bin_f<OP>(ld(a->type, pa + i * a->nb[0]), ld(b->type, pb + (i % ne10) * b->nb[0])));
        }
    }
}

/* ---- unary elementwise ---------------------------------------------------------------- */

static inline float gelu_f(float x) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + std::tanh(c * x * (1.0f + 0.044715f * x * x)));
}
static inline float silu_f(float x) { return x / (1.0f + std::exp(-x)); }
/* NaN stays NaN (as in PyTorch), where std::min/std::max would pick a bound */
static inline float clamp_f(float x, float lo, float hi) { return x != x ? x : std::max(lo, std::min(hi, x)); }
static inline float relu_f(float x) { return x <= 0.0f ? 0.0f : x; }   /* NaN stays NaN */
static inline float gelu_quick_f(float x) { return x / (1.0f + std::exp(-1.702f * x)); }
static inline float gelu_erf_f(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
/* sgn and step keep a NaN (PyTorch's sign and heaviside do); ggml gives 0 */
static inline float sgn_f(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == 0.0f ? 0.0f : x; }
static inline float step_f(float x) { return x > 0.0f ? 1.0f : x <= 0.0f ? 0.0f : x; }
/* relu6(x + 3) / 6 with the NaN kept */
static inline float hardsigmoid_f(float x) { return clamp_f((x + 3.0f) / 6.0f, 0.0f, 1.0f); }
/* ggml's (and PyTorch's) threshold: past 20, log1p(e^x) rounds to x */
static inline float softplus_f(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

struct unary_fn {
    int kind;  /* TSR_OP_* (SQR, SQRT, LOG, SCALE, CLAMP, SIN, COS, LEAKY_RELU) or 1000 + tsr_unary_op */
    float a, b;
    inline float operator()(float x) const {
        switch (kind) {
            case TSR_OP_SQR: return x * x;
            case TSR_OP_SQRT: return std::sqrt(x);
            case TSR_OP_LOG: return std::log(x);
            case TSR_OP_SCALE: return x * a + b;
            case TSR_OP_CLAMP: return clamp_f(x, a, b);
            case TSR_OP_SIN: return std::sin(x);
            case TSR_OP_COS: return std::cos(x);
            case TSR_OP_LEAKY_RELU: return x > 0.0f ? x : a * x;
            case 1000 + TSR_UNARY_OP_ABS: return std::fabs(x);
            case 1000 + TSR_UNARY_OP_NEG: return -x;
            case 1000 + TSR_UNARY_OP_TANH: return std::tanh(x);
            case 1000 + TSR_UNARY_OP_RELU: return relu_f(x);
            case 1000 + TSR_UNARY_OP_SIGMOID: return 1.0f / (1.0f + std::exp(-x));
            case 1000 + TSR_UNARY_OP_GELU: return gelu_f(x);
            case 1000 + TSR_UNARY_OP_GELU_QUICK: return gelu_quick_f(x);
            case 1000 + TSR_UNARY_OP_SILU: return silu_f(x);
            case 1000 + TSR_UNARY_OP_EXP: return std::exp(x);
            case 1000 + TSR_UNARY_OP_SGN: return sgn_f(x);
            case 1000 + TSR_UNARY_OP_STEP: return step_f(x);
            case 1000 + TSR_UNARY_OP_ELU: return x > 0.0f ? x : std::expm1(x);
            case 1000 + TSR_UNARY_OP_HARDSWISH: return x * hardsigmoid_f(x);
            case 1000 + TSR_UNARY_OP_HARDSIGMOID: return hardsigmoid_f(x);
            case 1000 + TSR_UNARY_OP_EXPM1: return std::expm1(x);
            case 1000 + TSR_UNARY_OP_SOFTPLUS: return softplus_f(x);
            case 1000 + TSR_UNARY_OP_GELU_ERF: return gelu_erf_f(x);
            case 1000 + TSR_UNARY_OP_FLOOR: return std::floor(x);
            case 1000 + TSR_UNARY_OP_CEIL: return std::ceil(x);
            case 1000 + TSR_UNARY_OP_ROUND: return std::round(x);
            case 1000 + TSR_UNARY_OP_TRUNC: return std::trunc(x);
            default: return x;
        }
    }
};

template <int KIND>
static inline void unary_row_f32(float * d, const float * s, int64_t n, float a, float b) {
    const unary_fn f{KIND, a, b};
    for (int64_t i = 0; i < n; ++i) d[i] = f(s[i]);
}

static void unary_row_dispatch(int kind, float * d, const float * s, int64_t n, float a, float b) {
    switch (kind) {
#define TSR_UCASE(k) case k: unary_row_f32<k>(d, s, n, a, b); break;
        TSR_UCASE(TSR_OP_SQR) TSR_UCASE(TSR_OP_SQRT) TSR_UCASE(TSR_OP_LOG) TSR_UCASE(TSR_OP_SCALE) TSR_UCASE(TSR_OP_CLAMP)
        TSR_UCASE(1000 + TSR_UNARY_OP_ABS) TSR_UCASE(1000 + TSR_UNARY_OP_NEG) TSR_UCASE(1000 + TSR_UNARY_OP_TANH)
        TSR_UCASE(1000 + TSR_UNARY_OP_RELU) TSR_UCASE(1000 + TSR_UNARY_OP_SIGMOID) TSR_UCASE(1000 + TSR_UNARY_OP_GELU)
        TSR_UCASE(1000 + TSR_UNARY_OP_GELU_QUICK) TSR_UCASE(1000 + TSR_UNARY_OP_SILU) TSR_UCASE(1000 + TSR_UNARY_OP_EXP)
        /* issue 17 part A */
        TSR_UCASE(TSR_OP_SIN) TSR_UCASE(TSR_OP_COS) TSR_UCASE(TSR_OP_LEAKY_RELU)
        TSR_UCASE(1000 + TSR_UNARY_OP_SGN) TSR_UCASE(1000 + TSR_UNARY_OP_STEP) TSR_UCASE(1000 + TSR_UNARY_OP_ELU)
        TSR_UCASE(1000 + TSR_UNARY_OP_HARDSWISH) TSR_UCASE(1000 + TSR_UNARY_OP_HARDSIGMOID)
        TSR_UCASE(1000 + TSR_UNARY_OP_EXPM1) TSR_UCASE(1000 + TSR_UNARY_OP_SOFTPLUS) TSR_UCASE(1000 + TSR_UNARY_OP_GELU_ERF)
        TSR_UCASE(1000 + TSR_UNARY_OP_FLOOR) TSR_UCASE(1000 + TSR_UNARY_OP_CEIL) TSR_UCASE(1000 + TSR_UNARY_OP_ROUND)
        TSR_UCASE(1000 + TSR_UNARY_OP_TRUNC)
#undef TSR_UCASE
        default: for (int64_t i = 0; i < n; ++i) d[i] = s[i];
    }
}

/* The ISA's vector row kernel for a transcendental unary op; NULL: the libm loop. */
typedef void (*act_row_fn)(int64_t n, const float * x, float * y);
static act_row_fn act_row(const act_kernels * A, int kind) {
    if (!A) return nullptr;
    switch (kind) {
        case 1000 + TSR_UNARY_OP_EXP: return A->exp;
        case 1000 + TSR_UNARY_OP_SILU: return A->silu;
        case 1000 + TSR_UNARY_OP_SIGMOID: return A->sigmoid;
        case 1000 + TSR_UNARY_OP_GELU: return A->gelu;
        case 1000 + TSR_UNARY_OP_GELU_QUICK: return A->gelu_quick;
        case 1000 + TSR_UNARY_OP_TANH: return A->tanh;
        default: return nullptr;
    }
}

static void op_unary(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    int kind = dst->op;
    float a = 0.0f, b = 0.0f;
    if (dst->op == TSR_OP_UNARY) kind = 1000 + tsr_get_op_params_i32(dst, 0);
    if (dst->op == TSR_OP_SCALE || dst->op == TSR_OP_CLAMP || dst->op == TSR_OP_LEAKY_RELU) {
        a = tsr_get_op_params_f32(dst, 0);
        b = tsr_get_op_params_f32(dst, 1);
    }
    const unary_fn f{kind, a, b};
    const int64_t nr = tsr_nrows(dst), ne0 = dst->ne[0];
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    const bool fast = src->type == TSR_TYPE_F32 && dst->type == TSR_TYPE_F32 && src->nb[0] == 4 && dst->nb[0] == 4;
    const act_row_fn vf = fast ? act_row(p.K->act, kind) : nullptr;
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * s = tptr(src, 0, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        if (vf) vf(ne0, (const float *)s, (float *)d);
        else if (fast) unary_row_dispatch(kind, (float *)d, (const float *)s, ne0, a, b);
        else for (int64_t i = 0; i < ne0; ++i) st(dst->type, d + i * dst->nb[0], f(ld(src->type, s + i * src->nb[0])));
    }
}

/* One GLU: act(x) * g, or swiglu_oai's clamped form. */
struct glu_fn {
    int op;   /* enum tsr_glu_op */
    float alpha, limit;
    inline float operator()(float x, float g) const {
        switch (op) {
            case TSR_GLU_OP_REGLU: return relu_f(x) * g;
            case TSR_GLU_OP_GEGLU: return gelu_f(x) * g;
            case TSR_GLU_OP_GEGLU_ERF: return gelu_erf_f(x) * g;
            case TSR_GLU_OP_GEGLU_QUICK: return gelu_quick_f(x) * g;
            case TSR_GLU_OP_SWIGLU_OAI: {
                /* NaN kept, as clamp_f does */
                const float xc = x > limit ? limit : x;
                const float gc = clamp_f(g, -limit, limit);
                return xc / (1.0f + std::exp(-alpha * xc)) * (gc + 1.0f);
            }
            default: return silu_f(x) * g;
        }
    }
};

/* act(x) -> d with the ISA's vector kernel, then d *= g (d may alias x, never g); false:
 * no vector kernel for this GLU. */
static bool glu_row_vector(const act_kernels * A, int op, int64_t n, const float * x, const float * g, float * d) {
    if (!A) return false;
    if (op == TSR_GLU_OP_SWIGLU) {
        A->swiglu(n, x, g, d);
        return true;
    }
    act_row_fn act = op == TSR_GLU_OP_GEGLU ? A->gelu : op == TSR_GLU_OP_GEGLU_QUICK ? A->gelu_quick : nullptr;
    if (!act || d == g) return false;
    act(n, x, d);
    for (int64_t i = 0; i < n; ++i) d[i] *= g[i];
    return true;
}

static void op_glu(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * g = dst->src[1];
    const bool swapped = tsr_get_op_params_i32(dst, 1) != 0;
    const glu_fn f{tsr_get_op_params_i32(dst, 0), tsr_get_op_params_f32(dst, 2), tsr_get_op_params_f32(dst, 3)};
    const int64_t nc = dst->ne[0];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * px;
        const char * pg;
        size_t sx, sg;
        enum tsr_type tx, tg;
        if (g) {
            px = tptr(a, 0, i1, i2, i3); sx = a->nb[0]; tx = a->type;
            pg = tptr(g, 0, i1, i2, i3); sg = g->nb[0]; tg = g->type;
            if (swapped) { std::swap(px, pg); std::swap(sx, sg); std::swap(tx, tg); }
        } else {
            const char * row = tptr(a, 0, i1, i2, i3);
            px = row + (swapped ? nc : 0) * a->nb[0];
            pg = row + (swapped ? 0 : nc) * a->nb[0];
            sx = sg = a->nb[0];
            tx = tg = a->type;
        }
        char * d = tptr(dst, 0, i1, i2, i3);
        if (tx == TSR_TYPE_F32 && tg == TSR_TYPE_F32 && dst->type == TSR_TYPE_F32 && sx == 4 && sg == 4 && dst->nb[0] == 4) {
            const float * fx = (const float *)px;
            const float * fg = (const float *)pg;
            float * fd = (float *)d;
            if (!glu_row_vector(p.K->act, f.op, nc, fx, fg, fd))
                for (int64_t i = 0; i < nc; ++i) fd[i] = f(fx[i], fg[i]);
        } else {
            for (int64_t i = 0; i < nc; ++i) st(dst->type, d + i * dst->nb[0], f(ld(tx, px + i * sx), ld(tg, pg + i * sg)));
        }
    }
}

/* ---- reductions --------------------------------------------------------------------------- */

static void op_sum(const cparams & p, tsr_tensor * dst) {
    if (p.ith != 0) return;  /* one thread: deterministic order */
    const tsr_tensor * src = dst->src[0];
    double s = 0.0;
    /* an empty source may still have 2^50 (empty) rows: do not walk them */
    const int64_t nr = tsr_nelements(src) > 0 ? tsr_nrows(src) : 0;
    for (int64_t ir = 0; ir < nr; ++ir) {
        int64_t i1, i2, i3;
        row_index(src, ir, i1, i2, i3);
        const char * r = tptr(src, 0, i1, i2, i3);
        for (int64_t i = 0; i < src->ne[0]; ++i) s += ld(src->type, r + i * src->nb[0]);
    }
    st(dst->type, dst->data, (float)s);
}

static void op_sum_rows(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const bool mean = dst->op == TSR_OP_MEAN;
    const int64_t nr = tsr_nrows(src);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(src, ir, i1, i2, i3);
        const char * r = tptr(src, 0, i1, i2, i3);
        double s = 0.0;
        for (int64_t i = 0; i < src->ne[0]; ++i) s += ld(src->type, r + i * src->nb[0]);
        if (mean) s /= (double)src->ne[0];
        st(dst->type, tptr(dst, 0, i1, i2, i3), (float)s);
    }
}

static void op_argmax(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    int64_t r0, r1;
    split_rows(src->ne[1], p.ith, p.nth, r0, r1);
    for (int64_t i1 = r0; i1 < r1; ++i1) {
        const char * r = tptr(src, 0, i1, 0, 0);
        float best = -INFINITY;
        int32_t idx = 0;
        for (int64_t i = 0; i < src->ne[0]; ++i) {
            const float v = *(const float *)(r + i * src->nb[0]);
            if (v != v) { idx = (int32_t)i; break; }   /* the first NaN is the max, as in PyTorch */
            if (v > best) { best = v; idx = (int32_t)i; }
        }
        *(int32_t *)tptr(dst, i1, 0, 0, 0) = idx;
    }
}

/* ---- shape ops ---------------------------------------------------------------------------- */

static void op_repeat(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const size_t es = tsr_type_size(dst->type);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * s = tptr(src, 0, i1 % src->ne[1], i2 % src->ne[2], i3 % src->ne[3]);
        char * d = tptr(dst, 0, i1, i2, i3);
        for (int64_t i = 0; i < dst->ne[0]; ++i) std::memcpy(d + i * dst->nb[0], s + (i % src->ne[0]) * src->nb[0], es);
    }
}

static void op_concat(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    const int dim = tsr_get_op_params_i32(dst, 0);
    const size_t es = tsr_type_size(dst->type);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            int64_t idx[4] = {i0, i1, i2, i3};
            const tsr_tensor * s = a;
            if (idx[dim] >= a->ne[dim]) { idx[dim] -= a->ne[dim]; s = b; }
            std::memcpy(d + i0 * dst->nb[0], tptr(s, idx[0], idx[1], idx[2], idx[3]), es);
        }
    }
}

/* PAD: zeros before (slots 4..7) and after (slots 0..3, the total minus those) each dim. */
static void op_pad(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const size_t es = tsr_type_size(dst->type);
    int64_t lp[4];
    for (int i = 0; i < 4; ++i) lp[i] = tsr_get_op_params_i32(dst, 4 + (uint32_t)i);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        const int64_t j1 = i1 - lp[1], j2 = i2 - lp[2], j3 = i3 - lp[3];
        const bool row_in = j1 >= 0 && j1 < src->ne[1] && j2 >= 0 && j2 < src->ne[2] && j3 >= 0 && j3 < src->ne[3];
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            const int64_t j0 = i0 - lp[0];
            if (row_in && j0 >= 0 && j0 < src->ne[0]) std::memcpy(d + i0 * dst->nb[0], tptr(src, j0, j1, j2, j3), es);
            else std::memset(d + i0 * dst->nb[0], 0, es);
        }
    }
}

} // namespace tcpu
} // namespace
/* ---- backends/cpu/impl/ops_rows.inl ---- */
/*
 * ops_rows.inl - the CPU ops that work a row at a time: normalization, the outer product,
 * get/set rows, masking and soft_max, RoPE, argsort (conventions: ops_elementwise.inl).
 */
namespace {
namespace tcpu {

/* ---- normalization ------------------------------------------------------------------------- */

static void op_norm(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const float eps = tsr_get_op_params_f32(dst, 0);
    const bool rms = dst->op == TSR_OP_RMS_NORM;
    const int64_t ne0 = src->ne[0];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * s = tptr(src, 0, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        const size_t ss = src->nb[0], ds = dst->nb[0];
        double mean = 0.0;
        if (!rms) {
            for (int64_t i = 0; i < ne0; ++i) mean += *(const float *)(s + i * ss);
            mean /= (double)ne0;
        }
        double var = 0.0;
        for (int64_t i = 0; i < ne0; ++i) {
            const double v = *(const float *)(s + i * ss) - mean;
            var += v * v;
        }
        var /= (double)ne0;
        const float scale = (float)(1.0 / std::sqrt(var + (double)eps));
        const float fmean = (float)mean;
        for (int64_t i = 0; i < ne0; ++i) *(float *)(d + i * ds) = (*(const float *)(s + i * ss) - fmean) * scale;
    }
}

static void op_group_norm(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int n_groups = tsr_get_op_params_i32(dst, 0);
    const float eps = tsr_get_op_params_f32(dst, 1);
    const int64_t C = src->ne[2];
    const int64_t cpg = (C + n_groups - 1) / n_groups;
    const int64_t nitems = (int64_t)n_groups * src->ne[3];
    int64_t r0, r1;
    split_rows(nitems, p.ith, p.nth, r0, r1);
    for (int64_t it = r0; it < r1; ++it) {
        const int64_t g = it % n_groups, i3 = it / n_groups;
        const int64_t c0 = g * cpg, c1 = std::min(C, c0 + cpg);
        if (c0 >= c1) continue;
        double sum = 0.0;
        int64_t cnt = 0;
        for (int64_t i2 = c0; i2 < c1; ++i2)
            for (int64_t i1 = 0; i1 < src->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < src->ne[0]; ++i0) { sum += *(const float *)tptr(src, i0, i1, i2, i3); ++cnt; }
        const double mean = sum / (double)cnt;
        double var = 0.0;
        for (int64_t i2 = c0; i2 < c1; ++i2)
            for (int64_t i1 = 0; i1 < src->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < src->ne[0]; ++i0) {
                    const double v = *(const float *)tptr(src, i0, i1, i2, i3) - mean;
                    var += v * v;
                }
        const float scale = (float)(1.0 / std::sqrt(var / (double)cnt + (double)eps));
        for (int64_t i2 = c0; i2 < c1; ++i2)
            for (int64_t i1 = 0; i1 < src->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < src->ne[0]; ++i0)
                    *(float *)tptr(dst, i0, i1, i2, i3) = (float)(*(const float *)tptr(src, i0, i1, i2, i3) - mean) * scale;
    }
}

/* ---- products ------------------------------------------------------------------------------ */

static void op_out_prod(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];  /* [M, K, A2, A3] */
    const tsr_tensor * b = dst->src[1];  /* [N, K, B2, B3] f32 */
    const int64_t M = a->ne[0], Kd = a->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    float * tmp = thread_floats(p, (size_t)M);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t n, i2, i3;
        row_index(dst, ir, n, i2, i3);
        float * d = (float *)tptr(dst, 0, n, i2, i3);
        for (int64_t m = 0; m < M; ++m) d[m] = 0.0f;
        for (int64_t k = 0; k < Kd; ++k) {
            const float bv = *(const float *)tptr(b, n, k, i2, i3);
            const char * arow = tptr(a, 0, k, i2 / r2, i3 / r3);
            if (row_contig(a)) row_to_f32(a->type, arow, tmp, M);
            else for (int64_t m = 0; m < M; ++m) tmp[m] = ld(a->type, arow + m * a->nb[0]);
            p.K->axpy_f32(M, bv, tmp, d);
        }
    }
}

/* ---- rows ---------------------------------------------------------------------------------- */

static void op_get_rows(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    const int64_t nr = tsr_nrows(dst), ne0 = dst->ne[0];
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i10, i11, i12;
        row_index(dst, ir, i10, i11, i12);
        const int64_t row = *(const int32_t *)tptr(b, i10, i11, i12, 0);
        char * d = tptr(dst, 0, i10, i11, i12);
        if (row < 0 || row >= a->ne[1]) {  /* out of range: zeros (validated by no one at run time) */
            for (int64_t i = 0; i < ne0; ++i) std::memset(d + i * dst->nb[0], 0, dst->nb[0]);
            continue;
        }
        const char * s = tptr(a, 0, row, i11, i12);
        if (a->type == TSR_TYPE_I32) {
            for (int64_t i = 0; i < ne0; ++i) *(int32_t *)(d + i * dst->nb[0]) = *(const int32_t *)(s + i * a->nb[0]);
        } else if (row_contig(a) && dst->nb[0] == 4) {
            row_to_f32(a->type, s, (float *)d, ne0);
        } else {
            for (int64_t i = 0; i < ne0; ++i) *(float *)(d + i * dst->nb[0]) = ld(a->type, s + i * a->nb[0]);
        }
    }
}

static void op_set_rows(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * b = dst->src[0];  /* values f32 [n, k, A2, A3] */
    const tsr_tensor * c = dst->src[1];  /* indices I32 [k, C1, C2] */
    const int64_t ne0 = b->ne[0];
    float * tmp = thread_floats(p, (size_t)ne0);
    const int64_t nr = tsr_nrows(b);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i01, i02, i03;
        row_index(b, ir, i01, i02, i03);
        const int64_t row = *(const int32_t *)tptr(c, i01, i02 % c->ne[1], i03 % c->ne[2], 0);
        if (row < 0 || row >= dst->ne[1]) continue;
        const char * s = tptr(b, 0, i01, i02, i03);
        char * d = tptr(dst, 0, row, i02, i03);
        for (int64_t i = 0; i < ne0; ++i) tmp[i] = *(const float *)(s + i * b->nb[0]);
        if (tsr_is_quantized(dst->type) || row_contig(dst)) row_from_f32(dst->type, tmp, d, ne0);
        else for (int64_t i = 0; i < ne0; ++i) st(dst->type, d + i * dst->nb[0], tmp[i]);
    }
}

static void op_diag_mask_inf(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int n_past = tsr_get_op_params_i32(dst, 0);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * s = tptr(src, 0, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            const float v = *(const float *)(s + i0 * src->nb[0]);
            *(float *)(d + i0 * dst->nb[0]) = i0 > n_past + i1 ? -INFINITY : v;
        }
    }
}

/* ALiBi slope of head h (ggml). */
static inline float alibi_slope(float max_bias, int64_t h, int64_t n_head) {
    if (!(max_bias > 0.0f)) return 1.0f;
    const uint32_t n_head_log2 = 1u << (uint32_t)std::floor(std::log2((double)n_head));
    const float m0 = std::pow(2.0f, -(max_bias) / (float)n_head_log2);
    const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / (float)n_head_log2);
    return (uint32_t)h < n_head_log2 ? std::pow(m0, (float)(h + 1)) : std::pow(m1, (float)(2 * (h - n_head_log2) + 1));
}

/* The max of x[0, n) for the scalar path, NaN when any x is NaN (std::max drops a NaN). */
static float row_max_keep_nan(const float * x, int64_t n) {
    float mx = -INFINITY;
    bool nan = false;
    for (int64_t i = 0; i < n; ++i) {
        mx = std::max(mx, x[i]);
        nan |= x[i] != x[i];
    }
    return nan ? NAN : mx;
}

static void op_soft_max(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const tsr_tensor * mask = dst->src[1];
    const float scale = tsr_get_op_params_f32(dst, 0);
    const float max_bias = tsr_get_op_params_f32(dst, 1);
    const int64_t ne0 = src->ne[0];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const float slope = alibi_slope(max_bias, i2, src->ne[2]);
        const char * s = tptr(src, 0, i1, i2, i3);
        float * d = (float *)tptr(dst, 0, i1, i2, i3);
        const char * mrow = mask ? tptr(mask, 0, i1, i2 % mask->ne[2], i3 % mask->ne[3]) : nullptr;
        for (int64_t i = 0; i < ne0; ++i) {
            float v = *(const float *)(s + i * src->nb[0]) * scale;
            if (mrow) v += slope * ld(mask->type, mrow + i * mask->nb[0]);
            d[i] = v;
        }
        if (p.K->act) {
            p.K->act->soft_max(ne0, d);
            continue;
        }
        const float mx = row_max_keep_nan(d, ne0);
        if (soft_max_special_row(mx, ne0, d)) continue;
        double sum = 0.0;
        for (int64_t i = 0; i < ne0; ++i) {
            const float e = std::exp(d[i] - mx);
            d[i] = e;
            sum += e;
        }
        const float inv = (float)(1.0 / sum);   /* sum >= 1: the max's own term */
        for (int64_t i = 0; i < ne0; ++i) d[i] *= inv;
    }
}

/* ---- RoPE (ggml's rope with YaRN) --------------------------------------------------------- */

static inline float rope_yarn_ramp(float low, float high, int64_t i0) {
    const float y = ((float)(i0 / 2) - low) / std::max(0.001f, high - low);
    return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

static void rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]) {
    auto corr_dim = [&](float n_rot) {
        return (float)n_dims * std::log((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * std::log(freq_base));
    };
    const float start = std::floor(corr_dim(beta_fast));
    const float end = std::ceil(corr_dim(beta_slow));
    dims[0] = std::max(0.0f, start);
    dims[1] = std::min((float)(n_dims - 1), end);
}

/* ggml's rope_yarn: cos and sin of the angle theta_extrap (interpolated by freq_scale, ramped
 * back toward extrapolation by ext_factor in the YaRN band), each times mscale. */
static inline void rope_yarn(float theta_extrap, float freq_scale, const float corr[2], int64_t i0, float ext_factor, float mscale,
                             float * cos_sin) {
    const float theta_interp = freq_scale * theta_extrap;
    float th = theta_interp;
    if (ext_factor != 0.0f) {
        const float ramp_mix = rope_yarn_ramp(corr[0], corr[1], i0) * ext_factor;
        th = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0f + 0.1f * std::log(1.0f / freq_scale);
    }
    cos_sin[0] = std::cos(th) * mscale;
    cos_sin[1] = std::sin(th) * mscale;
}

static void op_rope(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const tsr_tensor * pos = dst->src[1];
    const tsr_tensor * ff = dst->src[2];
    const int n_dims = tsr_get_op_params_i32(dst, 1);
    const int mode = tsr_get_op_params_i32(dst, 2);
    const int n_ctx_orig = tsr_get_op_params_i32(dst, 4);
    const float freq_base = tsr_get_op_params_f32(dst, 5);
    const float freq_scale = tsr_get_op_params_f32(dst, 6);
    const float ext_factor = tsr_get_op_params_f32(dst, 7);
    const float attn_factor = tsr_get_op_params_f32(dst, 8);
    const float beta_fast = tsr_get_op_params_f32(dst, 9);
    const float beta_slow = tsr_get_op_params_f32(dst, 10);
    float corr[2];
    rope_yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow, corr);
    const float theta_scale = std::pow(freq_base, -2.0f / (float)n_dims);
    const bool neox = (mode & TSR_ROPE_TYPE_NEOX) != 0;
    float * cache = thread_floats(p, (size_t)n_dims);
    const int64_t ne0 = dst->ne[0];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    int64_t cached = -1;
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        if (cached != i2) {
            const float ppos = (float)*(const int32_t *)tptr(pos, i2, 0, 0, 0);
            float theta = ppos;
            for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
                const float f = ff ? *(const float *)tptr(ff, i0 / 2, 0, 0, 0) : 1.0f;
                rope_yarn(theta / f, freq_scale, corr, i0, ext_factor, attn_factor, cache + i0);
                theta *= theta_scale;
            }
            cached = i2;
        }
        const char * s = tptr(src, 0, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        const size_t ss = src->nb[0], ds = dst->nb[0];
        const enum tsr_type ts = src->type, td = dst->type;
        for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
            const int64_t ia = neox ? i0 / 2 : i0;
            const int64_t ib = neox ? i0 / 2 + n_dims / 2 : i0 + 1;
            const float c = cache[i0], sn = cache[i0 + 1];
            const float x0 = ld(ts, s + ia * ss), x1 = ld(ts, s + ib * ss);
            st(td, d + ia * ds, x0 * c - x1 * sn);
            st(td, d + ib * ds, x0 * sn + x1 * c);
        }
        for (int64_t i0 = n_dims; i0 < ne0; ++i0) st(td, d + i0 * ds, ld(ts, s + i0 * ss));
    }
}

/* ---- sorting ------------------------------------------------------------------------------ */

static void op_argsort(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const bool asc = tsr_get_op_params_i32(dst, 0) == TSR_SORT_ORDER_ASC;
    const int64_t ne0 = src->ne[0];
    int32_t * idx = (int32_t *)thread_floats(p, (size_t)ne0);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * s = tptr(src, 0, i1, i2, i3);
        const size_t ss = src->nb[0];
        for (int64_t i = 0; i < ne0; ++i) idx[i] = (int32_t)i;
        auto val = [&](int32_t i) { return *(const float *)(s + (size_t)i * ss); };
        /* NaN sorts as the largest value (as in PyTorch); without a rule for it the
         * comparison is no strict weak order and std::sort's result is undefined */
        auto before = [&](int32_t x, int32_t y) {
            const float a = asc ? val(x) : val(y), b = asc ? val(y) : val(x);
            if (a != a || b != b) return (b != b) != (a != a) ? b != b : x < y;
            return a < b || (a == b && x < y);
        };
        std::sort(idx, idx + ne0, before);
        char * d = tptr(dst, 0, i1, i2, i3);
        for (int64_t i = 0; i < ne0; ++i) *(int32_t *)(d + i * dst->nb[0]) = idx[i];
    }
}

} // namespace tcpu
} // namespace
/* ---- backends/cpu/impl/ops_conv_attn.inl ---- */
/*
 * ops_conv_attn.inl - the CPU ops on images and attention: im2col, conv_2d (im2col + GEMM),
 * pool_2d, upscale, and fused flash attention (conventions: ops_elementwise.inl).
 */
namespace {
namespace tcpu {

/* ---- convolution and friends ---------------------------------------------------------------- */

struct conv_geom {
    int s0, s1, p0, p1, d0, d1;
    int64_t KW, KH, IC, IW, IH, OW, OH, N;
    bool is2d;
};

/* One im2col row (output pixel ow, oh of image n): IC*KH*KW values as F32. */
static inline void im2col_row(const tsr_tensor * in, const conv_geom & g, int64_t ow, int64_t oh, int64_t n, float * out) {
    for (int64_t ic = 0; ic < g.IC; ++ic)
        for (int64_t kh = 0; kh < g.KH; ++kh) {
            const int64_t ih = oh * g.s1 + kh * g.d1 - g.p1;
            for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t iw = ow * g.s0 + kw * g.d0 - g.p0;
                float v = 0.0f;
                if (ih >= 0 && ih < g.IH && iw >= 0 && iw < g.IW) {
                    const char * ptr = g.is2d ? tptr(in, iw, ih, ic, n) : tptr(in, iw, ic, n, 0);
                    v = ld(in->type, ptr);
                }
                out[(ic * g.KH + kh) * g.KW + kw] = v;
            }
        }
}

static conv_geom conv_geometry(const tsr_tensor * dst, bool is_2d) {
    const tsr_tensor * k = dst->src[0];
    const tsr_tensor * in = dst->src[1];
    conv_geom g;
    g.is2d = is_2d;
    g.s0 = tsr_get_op_params_i32(dst, 0); g.s1 = tsr_get_op_params_i32(dst, 1);
    g.p0 = tsr_get_op_params_i32(dst, 2); g.p1 = tsr_get_op_params_i32(dst, 3);
    g.d0 = tsr_get_op_params_i32(dst, 4); g.d1 = tsr_get_op_params_i32(dst, 5);
    if (is_2d) {
        g.KW = k->ne[0]; g.KH = k->ne[1]; g.IC = in->ne[2]; g.IW = in->ne[0]; g.IH = in->ne[1]; g.N = in->ne[3];
        g.OW = (g.IW + 2 * g.p0 - (int64_t)g.d0 * (g.KW - 1) - 1) / g.s0 + 1;
        g.OH = (g.IH + 2 * g.p1 - (int64_t)g.d1 * (g.KH - 1) - 1) / g.s1 + 1;
    } else {
        g.KW = k->ne[0]; g.KH = 1; g.IC = in->ne[1]; g.IW = in->ne[0]; g.IH = 1; g.N = in->ne[2];
        g.OW = (g.IW + 2 * g.p0 - (int64_t)g.d0 * (g.KW - 1) - 1) / g.s0 + 1;
        g.OH = 1;
        g.p1 = 0;
    }
    return g;
}

static void op_im2col(const cparams & p, tsr_tensor * dst) {
    const bool is_2d = tsr_get_op_params_i32(dst, 6) != 0;
    const conv_geom g = conv_geometry(dst, is_2d);
    const tsr_tensor * in = dst->src[1];
    const int64_t Kd = g.IC * g.KH * g.KW;
    float * tmp = thread_floats(p, (size_t)Kd);
    const int64_t nr = g.OW * g.OH * g.N;
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        const int64_t ow = ir % g.OW, oh = (ir / g.OW) % g.OH, n = ir / (g.OW * g.OH);
        im2col_row(in, g, ow, oh, n, tmp);
        char * d = is_2d ? tptr(dst, 0, ow, oh, n) : tptr(dst, 0, ow, n, 0);
        for (int64_t i = 0; i < Kd; ++i) st(dst->type, d + i * dst->nb[0], tmp[i]);
    }
}

struct conv_plan {
    conv_geom g;
    int64_t Kd, P;
    bool kconv;
    const gemm_impl * gi;
    size_t cols_bytes, kern_bytes, thread_bytes;
};

static conv_plan conv_make_plan(const tsr_tensor * dst, const kernels * K) {
    conv_plan c;
    c.g = conv_geometry(dst, true);
    c.Kd = c.g.IC * c.g.KH * c.g.KW;
    c.P = c.g.OW * c.g.OH;
    const tsr_tensor * k = dst->src[0];
    c.kconv = !(k->type == TSR_TYPE_F32 && tsr_is_contiguous(k));
    const int64_t OC = k->ne[3];
    c.gi = OC >= GEMM_MIN_N ? K->gemm[SLOT_F32] : nullptr;
    c.cols_bytes = align_up((size_t)(c.P * c.Kd) * 4, 64);
    c.kern_bytes = c.kconv ? align_up((size_t)(OC * c.Kd) * 4, 64) : 0;
    c.thread_bytes = gemm_thread_bytes(c.gi, OC);
    return c;
}

static void op_conv_2d(const cparams & p, tsr_tensor * dst) {
    const conv_plan c = conv_make_plan(dst, p.K);
    const tsr_tensor * k = dst->src[0];
    const tsr_tensor * in = dst->src[1];
    const int64_t OC = k->ne[3];
    float * cols = (float *)p.wdata;
    float * kern = (float *)(p.wdata + c.cols_bytes);
    uint8_t * tw = p.wdata + c.cols_bytes + c.kern_bytes + c.thread_bytes * (size_t)p.ith;
    if (c.kconv) {
        int64_t r0, r1;
        split_rows(OC, p.ith, p.nth, r0, r1);
        for (int64_t oc = r0; oc < r1; ++oc)
            for (int64_t ic = 0; ic < c.g.IC; ++ic)
                for (int64_t kh = 0; kh < c.g.KH; ++kh)
                    for (int64_t kw = 0; kw < c.g.KW; ++kw)
                        kern[oc * c.Kd + (ic * c.g.KH + kh) * c.g.KW + kw] = ld(k->type, tptr(k, kw, kh, ic, oc));
    }
    for (int64_t n = 0; n < c.g.N; ++n) {
        int64_t r0, r1;
        split_rows(c.P, p.ith, p.nth, r0, r1);
        for (int64_t pi = r0; pi < r1; ++pi) im2col_row(in, c.g, pi % c.g.OW, pi / c.g.OW, n, cols + pi * c.Kd);
        barrier(p);
        mm_args a;
        a.ta = TSR_TYPE_F32;
        a.A = (const char *)cols; a.lda = (size_t)c.Kd * 4;
        a.B = c.kconv ? (const char *)kern : (const char *)k->data; a.ldb = (size_t)c.Kd * 4;
        a.M = c.P; a.N = OC; a.K = c.Kd;
        a.C = (float *)tptr(dst, 0, 0, 0, n);
        a.ldc = dst->nb[2] / 4;
        a.g = c.gi;
        mm_range_split(p, a, tw);
        barrier(p);
    }
}

static void op_pool_2d(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int op = tsr_get_op_params_i32(dst, 0);
    const int k0 = tsr_get_op_params_i32(dst, 1), k1 = tsr_get_op_params_i32(dst, 2);
    const int s0 = tsr_get_op_params_i32(dst, 3), s1 = tsr_get_op_params_i32(dst, 4);
    const int p0 = (int)tsr_get_op_params_f32(dst, 5), p1 = (int)tsr_get_op_params_f32(dst, 6);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t oy, c, n;
        row_index(dst, ir, oy, c, n);
        float * d = (float *)tptr(dst, 0, oy, c, n);
        for (int64_t ox = 0; ox < dst->ne[0]; ++ox) {
            float out = op == TSR_OP_POOL_AVG ? 0.0f : -FLT_MAX;   /* -FLT_MAX: ggml's value for a window in the padding */
            const int64_t ix = ox * s0 - p0, iy = oy * s1 - p1;
            for (int ky = 0; ky < k1; ++ky) {
                if (iy + ky < 0 || iy + ky >= src->ne[1]) continue;
                for (int kx = 0; kx < k0; ++kx) {
                    if (ix + kx < 0 || ix + kx >= src->ne[0]) continue;
                    const float v = ld(src->type, tptr(src, ix + kx, iy + ky, c, n));
                    if (op == TSR_OP_POOL_AVG) out += v;
                    else if (v > out || v != v) out = v;   /* a NaN stays (PyTorch's max_pool2d) */
                }
            }
            if (op == TSR_OP_POOL_AVG) out /= (float)(k0 * k1);
            d[ox * (dst->nb[0] / 4)] = out;
        }
    }
}

static void op_upscale(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int mode = tsr_get_op_params_i32(dst, 0);
    const float sf0 = (float)dst->ne[0] / (float)src->ne[0], sf1 = (float)dst->ne[1] / (float)src->ne[1];
    const float sf2 = (float)dst->ne[2] / (float)src->ne[2], sf3 = (float)dst->ne[3] / (float)src->ne[3];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const int64_t i02 = std::min<int64_t>(src->ne[2] - 1, (int64_t)((float)i2 / sf2));
        const int64_t i03 = std::min<int64_t>(src->ne[3] - 1, (int64_t)((float)i3 / sf3));
        char * d = tptr(dst, 0, i1, i2, i3);
        if (mode == TSR_SCALE_MODE_NEAREST) {
            const int64_t i01 = std::min<int64_t>(src->ne[1] - 1, (int64_t)((float)i1 / sf1));
            for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
                const int64_t i00 = std::min<int64_t>(src->ne[0] - 1, (int64_t)((float)i0 / sf0));
                st(dst->type, d + i0 * dst->nb[0], ld(src->type, tptr(src, i00, i01, i02, i03)));
            }
        } else {
            const float pix = 0.5f;
            const float y = ((float)i1 + pix) / sf1 - pix;
            int64_t y0 = (int64_t)std::floor(y), y1 = y0 + 1;
            y0 = std::max<int64_t>(0, std::min<int64_t>(y0, src->ne[1] - 1));
            y1 = std::max<int64_t>(0, std::min<int64_t>(y1, src->ne[1] - 1));
            const float dy = std::max(0.0f, std::min(y - std::floor(y), 1.0f));
            for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
                const float x = ((float)i0 + pix) / sf0 - pix;
                int64_t x0 = (int64_t)std::floor(x), x1 = x0 + 1;
                x0 = std::max<int64_t>(0, std::min<int64_t>(x0, src->ne[0] - 1));
                x1 = std::max<int64_t>(0, std::min<int64_t>(x1, src->ne[0] - 1));
                const float dx = std::max(0.0f, std::min(x - std::floor(x), 1.0f));
                const float va = ld(src->type, tptr(src, x0, y0, i02, i03)), vb = ld(src->type, tptr(src, x1, y0, i02, i03));
                const float vc = ld(src->type, tptr(src, x0, y1, i02, i03)), vd = ld(src->type, tptr(src, x1, y1, i02, i03));
                const float v = va * (1 - dx) * (1 - dy) + vb * dx * (1 - dy) + vc * (1 - dx) * dy + vd * dx * dy;
                st(dst->type, d + i0 * dst->nb[0], v);
            }
        }
    }
}

/* ---- fused attention (online softmax, no n_q x n_kv buffer) ------------------------------- */

/* Scores are taken FA_BLOCK keys at a time: one max and one rescale of the accumulator
 * per block, and the exps as one vector row. */
enum { FA_BLOCK = 64 };

static size_t fa_thread_floats(const tsr_tensor * dst) {
    const int64_t D = dst->src[0]->ne[0], Dv = dst->src[2]->ne[0];
    return (size_t)(D + 2 * Dv + FA_BLOCK) + yq8_row_bytes(D) / 4 + 16;
}

static void op_flash_attn_ext(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * q = dst->src[0];
    const tsr_tensor * k = dst->src[1];
    const tsr_tensor * v = dst->src[2];
    const tsr_tensor * mask = dst->src[3];
    float scale = tsr_get_op_params_f32(dst, 0);
    const float max_bias = tsr_get_op_params_f32(dst, 1);
    const float softcap = tsr_get_op_params_f32(dst, 2);
    if (softcap != 0.0f) scale /= softcap;
    const int64_t D = q->ne[0], Dv = v->ne[0], n_kv = k->ne[1];
    const int64_t H = q->ne[2];
    const int64_t rk2 = q->ne[2] / k->ne[2], rk3 = q->ne[3] / k->ne[3];
    float * buf = thread_floats(p, fa_thread_floats(dst));
    float * qf = buf;
    float * acc = qf + D;
    float * vrow = acc + Dv;
    float * sc = vrow + Dv;
    yq8 * qq = (yq8 *)(sc + FA_BLOCK);
    const bool kq = tsr_is_quantized(k->type);
    const bool k_contig = row_contig(k), v_f32 = v->type == TSR_TYPE_F32 && v->nb[0] == 4;
    const int64_t nr = q->ne[1] * q->ne[2] * q->ne[3];
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        const int64_t iq1 = ir % q->ne[1], iq2 = (ir / q->ne[1]) % q->ne[2], iq3 = ir / (q->ne[1] * q->ne[2]);
        const int64_t ik2 = iq2 / rk2, ik3 = iq3 / rk3;
        const float slope = alibi_slope(max_bias, iq2, H);
        const char * qrow = tptr(q, 0, iq1, iq2, iq3);
        for (int64_t i = 0; i < D; ++i) qf[i] = *(const float *)(qrow + i * q->nb[0]);
        if (kq) {
            quantize_y_nonfinite_nan(p.K, qf, qq, D);
            y_side(qq, D / 32, k->type);
        }
        const char * mrow = mask ? tptr(mask, 0, iq1, iq2 % mask->ne[2], iq3 % mask->ne[3]) : nullptr;
        for (int64_t i = 0; i < Dv; ++i) acc[i] = 0.0f;
        float S = 0.0f, M = -INFINITY;
        bool nan_row = false;   /* a NaN or +inf score: the row is NaN (soft_max's rule) */
        for (int64_t c0 = 0; c0 < n_kv && !nan_row; c0 += FA_BLOCK) {
            const int64_t nc = std::min<int64_t>(FA_BLOCK, n_kv - c0);
            float bm = -INFINITY;
            for (int64_t j = 0; j < nc; ++j) {
                const int64_t ic = c0 + j;
                const float mv = mrow ? slope * ld(mask->type, mrow + ic * mask->nb[0]) : 0.0f;
                if (mv == -INFINITY) { sc[j] = -INFINITY; continue; }
                const char * krow = tptr(k, 0, ic, ik2, ik3);
                float s;
                if (kq) s = dot_any(p.K, k->type, D, krow, (const char *)qq);
                else if (k_contig) s = dot_any(p.K, k->type, D, krow, (const char *)qf);
                else {
                    s = 0.0f;
                    for (int64_t i = 0; i < D; ++i) s += ld(k->type, krow + i * k->nb[0]) * qf[i];
                }
                s *= scale;
                if (softcap != 0.0f) s = softcap * std::tanh(s);
                s += mv;
                sc[j] = s;
                bm = std::max(bm, s);
                nan_row |= !(s < INFINITY);
            }
            if (nan_row || bm == -INFINITY) continue;  /* the row's result is known, or the whole block masked */
            if (bm > M) {
                const float ms = std::exp(M - bm);  /* 0 for the first block that counts */
                for (int64_t i = 0; i < Dv; ++i) acc[i] *= ms;
                S *= ms;
                M = bm;
            }
            for (int64_t j = 0; j < nc; ++j) sc[j] -= M;
            if (p.K->act) p.K->act->exp(nc, sc, sc);
            else for (int64_t j = 0; j < nc; ++j) sc[j] = std::exp(sc[j]);
            for (int64_t j = 0; j < nc; ++j) {
                const float vs = sc[j];
                if (vs == 0.0f) continue;  /* masked, or too small to count */
                const char * vr = tptr(v, 0, c0 + j, ik2, ik3);
                const float * vf;
                if (v_f32) vf = (const float *)vr;
                else if (v->type == TSR_TYPE_F16 && row_contig(v)) { p.K->f16_to_f32(vr, vrow, Dv); vf = vrow; }
                else if (row_contig(v)) { row_to_f32(v->type, vr, vrow, Dv); vf = vrow; }
                else { for (int64_t i = 0; i < Dv; ++i) vrow[i] = ld(v->type, vr + i * v->nb[0]); vf = vrow; }
                p.K->axpy_f32(Dv, vs, vf, acc);
                S += vs;
            }
        }
        const float inv = nan_row ? NAN : S == 0.0f ? 0.0f : 1.0f / S;
        float * d = (float *)tptr(dst, 0, iq2, iq1, iq3);
        for (int64_t i = 0; i < Dv; ++i) d[i] = acc[i] * inv;
    }
}

} // namespace tcpu
} // namespace
/* ---- backends/cpu/impl/ops_models.inl ---- */
/*
 * ops_models.inl - the CPU ops of model families beyond decoder-only LLMs (issue 17 part B):
 * expert-indexed mat-mul, depthwise and transposed convolutions, reflection padding, roll,
 * timestep embeddings, Mamba's ssm_conv / ssm_scan, RWKV 6/7 and gated linear attention
 * (conventions: ops_elementwise.inl).
 */
namespace {
namespace tcpu {

/* ---- mul_mat_id ------------------------------------------------------------------------------ */

/* The (id, token) pairs of a mul_mat_id grouped by expert, so that every expert's rows pass
 * through the cache once for all the tokens that chose it (a decode step reads only the
 * experts it uses, each once). Workspace, in order: the map (offsets and pair order), the
 * src1 rows prepared in grouped order, the results in grouped order, per-thread GEMM panels. */
struct mmid_plan {
    mm_plan y;                 /* how src1 rows are prepared (no GEMM: the side arrays too) */
    const gemm_impl * g;       /* the GEMM for experts with many pairs, or NULL */
    int64_t n_expert, n_pairs;
    size_t map_bytes, y_bytes, c_bytes, thread_bytes;
};

static mmid_plan mmid_make_plan(const tsr_tensor * dst, const kernels * K) {
    const tsr_tensor * as = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    const tsr_tensor * ids = dst->src[2];
    mmid_plan pl{};
    pl.n_expert = as->ne[2];
    pl.n_pairs = ids->ne[0] * ids->ne[1];
    const int64_t Kd = as->ne[0];
    mm_plan & y = pl.y;
    y.ta = as->type;
    y.y_q8k = q8k_slot(y.ta) >= 0;
    y.y_q8 = tsr_is_quantized(y.ta) && !y.y_q8k;
    y.y_conv = !y.y_q8 && !y.y_q8k;
    /* rows keep the yq8 side arrays: an expert chosen by few tokens uses the dot-product
     * kernels, one chosen by many the GEMM (which reads the blocks through ldb) */
    if (y.y_q8) y.y_row = yq8_row_bytes(Kd);
    else if (y.y_q8k) y.y_row = (size_t)(Kd / TSR_QK_K) * sizeof(tsr_block_q8_K);
    else y.y_row = (size_t)Kd * 4;
    const int slot = type_slot(y.ta);
    pl.g = slot >= 0 ? K->gemm[slot] : nullptr;
    pl.map_bytes = align_up(sizeof(int32_t) * (size_t)(3 * (pl.n_expert + 1) + 2 * pl.n_pairs), 64);
    pl.y_bytes = align_up(y.y_row * (size_t)pl.n_pairs, 64);
    pl.c_bytes = align_up((size_t)(as->ne[1] * pl.n_pairs) * 4, 64);
    pl.thread_bytes = gemm_thread_bytes(pl.g, pl.n_pairs);
    (void)b;
    return pl;
}

static size_t mmid_work_size(const tsr_tensor * dst, const kernels * K, int nth) {
    const mmid_plan pl = mmid_make_plan(dst, K);
    return pl.map_bytes + pl.y_bytes + pl.c_bytes + pl.thread_bytes * (size_t)nth;
}

/* The map in the workspace: offs[e]..offs[e+1] index the pairs of expert e in `order`
 * (pair = slot + n_used * token), pos[pair] is where a pair sits in that order (-1: a bad
 * id), used[0..n) lists the n experts with pairs and used[n_expert] holds n. */
struct mmid_map {
    int32_t * offs;    /* n_expert + 1 */
    int32_t * used;    /* n_expert + 1 */
    int32_t * cursor;  /* n_expert + 1: the counting sort's next free place per expert */
    int32_t * order;   /* n_pairs */
    int32_t * pos;     /* n_pairs */
};

static mmid_map mmid_map_at(uint8_t * w, int64_t n_expert, int64_t n_pairs) {
    mmid_map m;
    m.offs = (int32_t *)w;
    m.used = m.offs + n_expert + 1;
    m.cursor = m.used + n_expert + 1;
    m.order = m.cursor + n_expert + 1;
    m.pos = m.order + n_pairs;
    return m;
}

static inline int32_t mmid_id(const tsr_tensor * ids, int64_t pair) {
    return *(const int32_t *)tptr(ids, pair % ids->ne[0], pair / ids->ne[0], 0, 0);
}

/* Thread 0: group the pairs by expert (a counting sort). An id out of range fails the graph
 * with a message naming it (the first one); its pair is left out and its row becomes NaN. */
static void mmid_group(const cparams & p, const tsr_tensor * dst, const mmid_map & m, int64_t n_expert) {
    const tsr_tensor * ids = dst->src[2];
    const int64_t n_pairs = ids->ne[0] * ids->ne[1];
    for (int64_t e = 0; e <= n_expert; ++e) m.offs[e] = 0;
    for (int64_t pair = 0; pair < n_pairs; ++pair) {
        const int32_t id = mmid_id(ids, pair);
        if (id >= 0 && id < n_expert) {
            m.offs[id + 1]++;
        } else if (p.failed && !p.failed->exchange(true)) {
            tsr_set_error("CPU backend: mul_mat_id '%s': expert id %d at ids[%lld, %lld] is outside [0, %lld)", dst->name, id,
                          (long long)(pair % ids->ne[0]), (long long)(pair / ids->ne[0]), (long long)n_expert);
        }
    }
    int32_t n_used_experts = 0;
    for (int64_t e = 0; e < n_expert; ++e) {
        if (m.offs[e + 1] > 0) m.used[n_used_experts++] = (int32_t)e;
        m.offs[e + 1] += m.offs[e];
        m.cursor[e] = m.offs[e];
    }
    m.used[n_expert] = n_used_experts;
    for (int64_t pair = 0; pair < n_pairs; ++pair) {
        const int32_t id = mmid_id(ids, pair);
        const bool ok = id >= 0 && id < n_expert;
        m.pos[pair] = ok ? m.cursor[id]++ : -1;
        if (ok) m.order[m.pos[pair]] = (int32_t)pair;
    }
}

static void op_mul_mat_id(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * as = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    const tsr_tensor * ids = dst->src[2];
    const mmid_plan pl = mmid_make_plan(dst, p.K);
    const int64_t Kd = as->ne[0], M = as->ne[1], n_used = ids->ne[0];
    const mmid_map m = mmid_map_at(p.wdata, pl.n_expert, pl.n_pairs);
    uint8_t * yw = p.wdata + pl.map_bytes;
    float * cw = (float *)(yw + pl.y_bytes);
    uint8_t * tw = (uint8_t *)cw + pl.c_bytes + pl.thread_bytes * (size_t)p.ith;

    /* phase 1: thread 0 groups the pairs */
    if (p.ith == 0) mmid_group(p, dst, m, pl.n_expert);
    barrier(p);
    const int32_t n_used_experts = m.used[pl.n_expert];
    const int64_t n_grouped = m.offs[pl.n_expert];

    /* phase 2: src1 rows prepared in grouped order */
    int64_t r0, r1;
    split_rows(n_grouped, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t pair = m.order[r];
        mm_prepare_y_row(p.K, pl.y, b, (pair % n_used) % b->ne[1], pair / n_used, 0, yw + (size_t)r * pl.y.y_row);
    }
    barrier(p);

    /* phase 3: items = (used expert, M chunk), taken from the shared counter; each expert's
     * rows are read once, for all its pairs */
    const int64_t mr = pl.g ? pl.g->mr : 16;
    int64_t mchunks = p.nth == 1 ? 1 : std::max<int64_t>(1, (4 * p.nth + n_used_experts - 1) / std::max(1, n_used_experts));
    mchunks = std::min<int64_t>(mchunks, std::max<int64_t>(1, M / mr));
    int64_t csize = (M + mchunks - 1) / mchunks;
    csize = (csize + mr - 1) / mr * mr;
    mchunks = (M + csize - 1) / csize;
    const int64_t nitems = n_used_experts * mchunks;
    for (int64_t it = p.nth == 1 ? 0 : p.tp->chunk.fetch_add(1, std::memory_order_relaxed); it < nitems;
         it = p.nth == 1 ? it + 1 : p.tp->chunk.fetch_add(1, std::memory_order_relaxed)) {
        const int32_t e = m.used[it / mchunks];
        const int64_t mc = it % mchunks;
        const int64_t g0 = m.offs[e], cnt = m.offs[e + 1] - g0;
        mm_args a;
        a.ta = pl.y.ta;
        a.A = (const char *)as->data + e * as->nb[2];
        a.lda = as->nb[1];
        a.B = (const char *)yw + (size_t)g0 * pl.y.y_row;
        a.ldb = pl.y.y_row;
        a.M = M; a.N = cnt; a.K = Kd;
        a.C = cw + (size_t)g0 * (size_t)M;
        a.ldc = (size_t)M;
        a.g = cnt >= GEMM_MIN_N ? pl.g : nullptr;
        mm_range(p.K, a, mc * csize, std::min<int64_t>(M, (mc + 1) * csize), tw);
    }
    barrier(p);

    /* phase 4: results to their (slot, token) places */
    split_rows(pl.n_pairs, p.ith, p.nth, r0, r1);
    for (int64_t pair = r0; pair < r1; ++pair) {
        float * d = (float *)tptr(dst, 0, pair % n_used, pair / n_used, 0);
        const int32_t at = m.pos[pair];
        if (at >= 0) std::memcpy(d, cw + (size_t)at * (size_t)M, (size_t)M * 4);
        else for (int64_t i = 0; i < M; ++i) d[i] = NAN;
    }
}

/* ---- depthwise convolution (direct) ----------------------------------------------------------- */

/* One output row (oh, channel c, image n): for each kernel tap, the output pixels whose input
 * lies inside the image get tap * input, so the inner loop has no bounds test and runs over
 * consecutive outputs (contiguous input too when s0 == 1: vectorized). */
static TSR_ALWAYS_INLINE void dw_row_body(const conv_geom & g, const float * ker, const float * in_ch, int64_t oh, float * out) {
    for (int64_t ow = 0; ow < g.OW; ++ow) out[ow] = 0.0f;
    for (int64_t kh = 0; kh < g.KH; ++kh) {
        const int64_t ih = oh * g.s1 + kh * g.d1 - g.p1;
        if (ih < 0 || ih >= g.IH) continue;
        const float * irow = in_ch + ih * g.IW;
        for (int64_t kw = 0; kw < g.KW; ++kw) {
            const float w = ker[kh * g.KW + kw];
            const int64_t off = kw * g.d0 - g.p0;   /* iw = ow * s0 + off */
            const int64_t ow0 = off >= 0 ? 0 : (-off + g.s0 - 1) / g.s0;
            const int64_t ow1 = std::min<int64_t>(g.OW, off >= g.IW ? 0 : (g.IW - 1 - off) / g.s0 + 1);
            if (g.s0 == 1) {
                const float * src = irow + off;
                for (int64_t ow = ow0; ow < ow1; ++ow) out[ow] += w * src[ow];
            } else {
                for (int64_t ow = ow0; ow < ow1; ++ow) out[ow] += w * irow[ow * g.s0 + off];
            }
        }
    }
}

typedef void (*dw_row_fn)(const conv_geom &, const float *, const float *, int64_t, float *);
static void dw_row(const conv_geom & g, const float * ker, const float * in_ch, int64_t oh, float * out) {
    dw_row_body(g, ker, in_ch, oh, out);
}
#if defined(TSR_CPU_HAVE_X86_KERNELS)
/* the same loops compiled for AVX2 + FMA: the compiler vectorizes them 8 wide */
TSR_TARGET_AVX2 static void dw_row_avx2(const conv_geom & g, const float * ker, const float * in_ch, int64_t oh, float * out) {
    dw_row_body(g, ker, in_ch, oh, out);
}
#endif
static dw_row_fn dw_row_for(const kernels * K) {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    if (K->isa == TSR_CPU_ISA_AVX2 || K->isa == TSR_CPU_ISA_AVX512) return dw_row_avx2;
#endif
    (void)K;
    return dw_row;
}

static size_t dw_thread_floats(const tsr_tensor * dst) {
    const tsr_tensor * k = dst->src[0];
    const tsr_tensor * in = dst->src[1];
    return (size_t)(k->ne[0] * k->ne[1] + in->ne[0] * in->ne[1] + dst->ne[0]);
}

static void op_conv_2d_dw(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * k = dst->src[0];
    const tsr_tensor * in = dst->src[1];
    const conv_geom g = conv_geometry(dst, true);
    float * ker = thread_floats(p, dw_thread_floats(dst));
    float * plane = ker + g.KW * g.KH;
    float * orow = plane + g.IW * g.IH;
    const int64_t C = in->ne[2];
    /* an F32 input with dense planes is read in place; any other is converted a plane at a time */
    const bool dense_in = in->type == TSR_TYPE_F32 && in->nb[0] == 4 && in->nb[1] == (size_t)g.IW * 4;
    const dw_row_fn row_fn = dw_row_for(p.K);
    /* items: (channel, image) planes, split in output-row bands when there are few planes */
    const int64_t bands = std::max<int64_t>(1, std::min<int64_t>(g.OH, (2 * p.nth + C * g.N - 1) / (C * g.N)));
    const int64_t band_rows = (g.OH + bands - 1) / bands;
    int64_t r0, r1;
    split_rows(C * g.N * bands, p.ith, p.nth, r0, r1);
    int64_t loaded = -1;
    for (int64_t it = r0; it < r1; ++it) {
        const int64_t plane_id = it / bands, band = it % bands;
        const int64_t c = plane_id % C, n = plane_id / C;
        if (plane_id != loaded) {
            for (int64_t kh = 0; kh < g.KH; ++kh)
                for (int64_t kw = 0; kw < g.KW; ++kw) ker[kh * g.KW + kw] = ld(k->type, tptr(k, kw, kh, 0, c));
            if (!dense_in)
                for (int64_t ih = 0; ih < g.IH; ++ih)
                    for (int64_t iw = 0; iw < g.IW; ++iw) plane[ih * g.IW + iw] = ld(in->type, tptr(in, iw, ih, c, n));
            loaded = plane_id;
        }
        const float * src = dense_in ? (const float *)tptr(in, 0, 0, c, n) : plane;
        const int64_t oh1 = std::min<int64_t>(g.OH, (band + 1) * band_rows);
        for (int64_t oh = band * band_rows; oh < oh1; ++oh) {
            row_fn(g, ker, src, oh, orow);
            float * d = (float *)tptr(dst, 0, oh, c, n);
            for (int64_t ow = 0; ow < g.OW; ++ow) d[ow * (dst->nb[0] / 4)] = orow[ow];
        }
    }
}

/* ---- transposed convolutions (GEMM + col2im) ------------------------------------------------- */

/* 1-D is the 2-D case with H = KH = 1. The products of every input pixel with every kernel
 * tap are one GEMM, cols[pixel][(oc, kh, kw)] = sum_ic input[pixel][ic] * kernel[(oc, kh, kw)][ic],
 * in the workspace; col2im then adds the taps landing on each output pixel, a thread per
 * output channel plane, so no two threads write the same output. */
struct tconv_plan {
    bool is2d;
    int s0, s1, p0, p1, d0, d1;
    int64_t KW, KH, OC, IC, W, H, N, OW, OH;
    int64_t M, P;                 /* GEMM rows (OC*KH*KW) and columns (N*H*W input pixels) */
    const gemm_impl * gi;
    size_t kern_bytes, in_bytes, cols_bytes, thread_bytes;
};

static tconv_plan tconv_make_plan(const tsr_tensor * dst, const kernels * K) {
    const tsr_tensor * k = dst->src[0];
    const tsr_tensor * in = dst->src[1];
    tconv_plan c{};
    c.is2d = dst->op == TSR_OP_CONV_TRANSPOSE_2D;
    if (c.is2d) {
        c.s0 = c.s1 = tsr_get_op_params_i32(dst, 0);
        c.d0 = c.d1 = 1;
        c.KW = k->ne[0]; c.KH = k->ne[1]; c.OC = k->ne[2]; c.IC = k->ne[3];
        c.W = in->ne[0]; c.H = in->ne[1]; c.N = in->ne[3];
        c.OW = dst->ne[0]; c.OH = dst->ne[1];
    } else {
        c.s0 = tsr_get_op_params_i32(dst, 0); c.p0 = tsr_get_op_params_i32(dst, 1); c.d0 = tsr_get_op_params_i32(dst, 2);
        c.s1 = c.d1 = 1;
        c.KW = k->ne[0]; c.KH = 1; c.OC = k->ne[1]; c.IC = k->ne[2];
        c.W = in->ne[0]; c.H = 1; c.N = in->ne[2];
        c.OW = dst->ne[0]; c.OH = 1;
    }
    c.M = c.OC * c.KH * c.KW;
    c.P = c.N * c.H * c.W;
    c.gi = c.P >= GEMM_MIN_N ? K->gemm[SLOT_F32] : nullptr;
    c.kern_bytes = align_up((size_t)(c.M * c.IC) * 4, 64);
    c.in_bytes = align_up((size_t)(c.P * c.IC) * 4, 64);
    c.cols_bytes = align_up((size_t)(c.P * c.M) * 4, 64);
    c.thread_bytes = gemm_thread_bytes(c.gi, c.P);
    return c;
}

static size_t tconv_work_size(const tsr_tensor * dst, const kernels * K, int nth) {
    const tconv_plan c = tconv_make_plan(dst, K);
    return c.kern_bytes + c.in_bytes + c.cols_bytes + c.thread_bytes * (size_t)nth;
}

static inline const char * tconv_kernel_at(const tsr_tensor * k, const tconv_plan & c, int64_t kw, int64_t kh, int64_t oc, int64_t ic) {
    return c.is2d ? tptr(k, kw, kh, oc, ic) : tptr(k, kw, oc, ic, 0);
}
static inline const char * tconv_input_at(const tsr_tensor * in, const tconv_plan & c, int64_t w, int64_t h, int64_t ic, int64_t n) {
    return c.is2d ? tptr(in, w, h, ic, n) : tptr(in, w, ic, n, 0);
}

/* Output plane (oc, n): every input pixel's taps added where they land. */
static void tconv_col2im(const tconv_plan & c, const float * cols, int64_t oc, int64_t n, tsr_tensor * dst) {
    float * out = c.is2d ? (float *)tptr(dst, 0, 0, oc, n) : (float *)tptr(dst, 0, oc, n, 0);
    const size_t ros = c.is2d ? dst->nb[1] / 4 : 0;   /* output row stride in floats */
    for (int64_t oh = 0; oh < c.OH; ++oh)
        for (int64_t ow = 0; ow < c.OW; ++ow) out[oh * ros + ow] = 0.0f;
    for (int64_t h = 0; h < c.H; ++h)
        for (int64_t kh = 0; kh < c.KH; ++kh) {
            const int64_t oh = h * c.s1 + kh * c.d1 - c.p1;
            if (oh < 0 || oh >= c.OH) continue;
            for (int64_t w = 0; w < c.W; ++w) {
                const float * col = cols + (size_t)((n * c.H + h) * c.W + w) * (size_t)c.M + (size_t)((oc * c.KH + kh) * c.KW);
                float * orow = out + oh * ros;
                const int64_t ow0 = w * c.s0 - c.p0;
                for (int64_t kw = 0; kw < c.KW; ++kw) {
                    const int64_t ow = ow0 + kw * c.d0;
                    if (ow >= 0 && ow < c.OW) orow[ow] += col[kw];
                }
            }
        }
}

static void op_conv_transpose(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * k = dst->src[0];
    const tsr_tensor * in = dst->src[1];
    const tconv_plan c = tconv_make_plan(dst, p.K);
    float * kern = (float *)p.wdata;
    float * inp = (float *)(p.wdata + c.kern_bytes);
    float * cols = (float *)(p.wdata + c.kern_bytes + c.in_bytes);
    uint8_t * tw = p.wdata + c.kern_bytes + c.in_bytes + c.cols_bytes + c.thread_bytes * (size_t)p.ith;
    /* phase 1: kernel rows (oc, kh, kw) and input pixels (n, h, w) as dense F32 rows over ic */
    int64_t r0, r1;
    split_rows(c.M, p.ith, p.nth, r0, r1);
    for (int64_t m = r0; m < r1; ++m) {
        const int64_t kw = m % c.KW, kh = (m / c.KW) % c.KH, oc = m / (c.KW * c.KH);
        for (int64_t ic = 0; ic < c.IC; ++ic) kern[m * c.IC + ic] = ld(k->type, tconv_kernel_at(k, c, kw, kh, oc, ic));
    }
    split_rows(c.P, p.ith, p.nth, r0, r1);
    for (int64_t px = r0; px < r1; ++px) {
        const int64_t w = px % c.W, h = (px / c.W) % c.H, n = px / (c.W * c.H);
        for (int64_t ic = 0; ic < c.IC; ++ic) inp[px * c.IC + ic] = ld(in->type, tconv_input_at(in, c, w, h, ic, n));
    }
    barrier(p);
    /* phase 2: cols[px][m], the kernel rows split between threads */
    mm_args a;
    a.ta = TSR_TYPE_F32;
    a.A = (const char *)kern; a.lda = (size_t)c.IC * 4;
    a.B = (const char *)inp; a.ldb = (size_t)c.IC * 4;
    a.M = c.M; a.N = c.P; a.K = c.IC;
    a.C = cols; a.ldc = (size_t)c.M;
    a.g = c.gi;
    mm_range_split(p, a, tw);
    barrier(p);
    /* phase 3: col2im per output plane */
    split_rows(c.OC * c.N, p.ith, p.nth, r0, r1);
    for (int64_t pl = r0; pl < r1; ++pl) tconv_col2im(c, cols, pl % c.OC, pl / c.OC, dst);
}

/* ---- padding and rotation ----------------------------------------------------------------------- */

static void op_pad_reflect_1d(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int64_t p0 = tsr_get_op_params_i32(dst, 0), n0 = src->ne[0];
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        float * d = (float *)tptr(dst, 0, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            int64_t j = i0 - p0;                       /* mirrored at 0 and at n0 - 1 */
            if (j < 0) j = -j;
            else if (j >= n0) j = 2 * (n0 - 1) - j;
            d[i0 * (dst->nb[0] / 4)] = *(const float *)tptr(src, j, i1, i2, i3);
        }
    }
}

static inline int64_t wrap_index(int64_t i, int64_t shift, int64_t n) {
    int64_t j = (i - shift) % n;
    return j < 0 ? j + n : j;
}

static void op_roll(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    int64_t sh[4];
    for (int i = 0; i < 4; ++i) sh[i] = tsr_get_op_params_i32(dst, (uint32_t)i);
    const size_t es = tsr_type_size(dst->type);
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const int64_t j1 = wrap_index(i1, sh[1], src->ne[1]), j2 = wrap_index(i2, sh[2], src->ne[2]), j3 = wrap_index(i3, sh[3], src->ne[3]);
        char * d = tptr(dst, 0, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0)
            std::memcpy(d + i0 * dst->nb[0], tptr(src, wrap_index(i0, sh[0], src->ne[0]), j1, j2, j3), es);
    }
}

/* ---- positions ------------------------------------------------------------------------------------ */

static void op_timestep_embedding(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * ts = dst->src[0];
    const int dim = tsr_get_op_params_i32(dst, 0), max_period = tsr_get_op_params_i32(dst, 1);
    const int half = dim / 2;
    int64_t r0, r1;
    split_rows(ts->ne[0], p.ith, p.nth, r0, r1);
    for (int64_t i = r0; i < r1; ++i) {
        const float t = *(const float *)tptr(ts, i, 0, 0, 0);
        float * d = (float *)tptr(dst, 0, i, 0, 0);
        for (int j = 0; j < half; ++j) {
            const float arg = t * std::exp(-std::log((float)max_period) * (float)j / (float)half);
            d[j] = std::cos(arg);
            d[j + half] = std::sin(arg);
        }
        if (dim % 2 != 0) d[2 * half] = 0.0f;
    }
}

/* M-RoPE / vision RoPE: the angle of pair i0/2 comes from the position stream its section
 * names (time, height, width, extra), every stream advancing by theta_scale per pair; vision
 * restarts a stream's angle where its section starts. Then ggml's rope_yarn per pair. */
static inline bool rope_is_multi(const tsr_tensor * t) { return (tsr_get_op_params_i32(t, 2) & TSR_ROPE_TYPE_MROPE) != 0; }

static void mrope_cache(const tsr_tensor * dst, const float pos[4], float * cache) {
    const tsr_tensor * ff = dst->src[2];
    const int n_dims = tsr_get_op_params_i32(dst, 1);
    const bool vision = tsr_get_op_params_i32(dst, 2) == TSR_ROPE_TYPE_VISION;
    const float freq_base = tsr_get_op_params_f32(dst, 5), freq_scale = tsr_get_op_params_f32(dst, 6);
    const float ext_factor = tsr_get_op_params_f32(dst, 7), attn_factor = tsr_get_op_params_f32(dst, 8);
    int sec[4];
    for (int i = 0; i < 4; ++i) sec[i] = tsr_get_op_params_i32(dst, 11 + (uint32_t)i);
    const int sect_dims = sec[0] + sec[1] + sec[2] + sec[3];
    const int start[4] = {0, sec[0], sec[0] + sec[1], sec[0] + sec[1] + sec[2]};
    float corr[2];
    rope_yarn_corr_dims(n_dims, tsr_get_op_params_i32(dst, 4), freq_base, tsr_get_op_params_f32(dst, 9), tsr_get_op_params_f32(dst, 10), corr);
    const float theta_scale = std::pow(freq_base, -2.0f / (float)n_dims);
    float theta[4] = {pos[0], pos[1], pos[2], pos[3]};
    for (int64_t i0 = 0; i0 < dst->ne[0]; i0 += 2) {
        const int sector = (int)((i0 / 2) % sect_dims);
        int stream = 3;
        for (int s = 0; s < 3; ++s)
            if (sector >= start[s] && sector < start[s + 1]) stream = s;
        if (vision && sector == start[stream]) theta[stream] = pos[stream];
        const float f = ff ? *(const float *)tptr(ff, i0 / 2, 0, 0, 0) : 1.0f;
        rope_yarn(theta[stream] / f, freq_scale, corr, i0, ext_factor, attn_factor, cache + i0);
        for (float & t : theta) t *= theta_scale;
    }
}

static void op_rope_multi(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const tsr_tensor * pos = dst->src[1];
    const int n_dims = tsr_get_op_params_i32(dst, 1);
    const bool vision = tsr_get_op_params_i32(dst, 2) == TSR_ROPE_TYPE_VISION;
    /* NEOX pairs (i, i + n_dims/2) over n_dims; vision: (i, i + n_dims) over the whole row */
    const int64_t n_rot = vision ? dst->ne[0] : n_dims, offset = vision ? n_dims : n_dims / 2;
    float * cache = thread_floats(p, (size_t)dst->ne[0] + 2);
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    int64_t cached = -1;
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        if (cached != i2) {
            float ps[4];
            for (int s = 0; s < 4; ++s) ps[s] = (float)*(const int32_t *)tptr(pos, i2 + s * src->ne[2], 0, 0, 0);
            mrope_cache(dst, ps, cache);
            cached = i2;
        }
        const char * s = tptr(src, 0, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        const size_t ss = src->nb[0], ds = dst->nb[0];
        for (int64_t i0 = 0; i0 < n_rot; i0 += 2) {
            const int64_t ia = i0 / 2, ib = ia + offset;
            const float x0 = ld(src->type, s + ia * ss), x1 = ld(src->type, s + ib * ss);
            st(dst->type, d + ia * ds, x0 * cache[i0] - x1 * cache[i0 + 1]);
            st(dst->type, d + ib * ds, x0 * cache[i0 + 1] + x1 * cache[i0]);
        }
        if (!vision)
            for (int64_t i0 = n_dims; i0 < dst->ne[0]; ++i0) st(dst->type, d + i0 * ds, ld(src->type, s + i0 * ss));
    }
}

/* ---- windows and relative positions ---------------------------------------------------------------- */

static void op_win_part(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int64_t npx = tsr_get_op_params_i32(dst, 0), w = tsr_get_op_params_i32(dst, 2);
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;   /* x and y in window i3 */
        row_index(dst, ir, i1, i2, i3);
        const int64_t x = (i3 % npx) * w + i1, y = (i3 / npx) * w + i2;
        float * d = (float *)tptr(dst, 0, i1, i2, i3);
        const bool inside = x < src->ne[1] && y < src->ne[2];
        for (int64_t c = 0; c < dst->ne[0]; ++c) d[c] = inside ? *(const float *)tptr(src, c, x, y, 0) : 0.0f;
    }
}

static void op_win_unpart(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int64_t w = tsr_get_op_params_i32(dst, 0), npx = (dst->ne[1] + w - 1) / w;
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t x, y, i3;
        row_index(dst, ir, x, y, i3);
        const float * s = (const float *)tptr(src, 0, x % w, y % w, (y / w) * npx + x / w);
        float * d = (float *)tptr(dst, 0, x, y, i3);
        for (int64_t c = 0; c < dst->ne[0]; ++c) d[c] = s[c];
    }
}

static void op_get_rel_pos(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int64_t kh = dst->ne[1];
    const size_t row = tsr_row_size(dst->type, dst->ne[0]);
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t k, q, i3;
        row_index(dst, ir, k, q, i3);
        std::memcpy(tptr(dst, 0, k, q, 0), tptr(src, 0, kh - 1 - k + q, 0, 0), row);
    }
}

static void op_add_rel_pos(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0], * pw = dst->src[1], * ph = dst->src[2];
    const int64_t W = pw->ne[0], n1 = pw->ne[1];
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const float * s = (const float *)tptr(a, 0, i1, i2, 0);
        const float * pwr = (const float *)tptr(pw, 0, i1 % n1, i1 / n1, i2);
        const float * phr = (const float *)tptr(ph, 0, i1 % n1, i1 / n1, i2);
        float * d = (float *)tptr(dst, 0, i1, i2, 0);
        for (int64_t y = 0; y < W; ++y)
            for (int64_t x = 0; x < W; ++x) d[x + W * y] = s[x + W * y] + phr[y] + pwr[x];
        (void)i3;
    }
}

/* ---- Mamba ---------------------------------------------------------------------------------------- */

static void op_ssm_conv(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * sx = dst->src[0];
    const tsr_tensor * c = dst->src[1];
    const int64_t d_conv = c->ne[0], d_inner = sx->ne[1], n_t = dst->ne[1], n_s = dst->ne[2];
    int64_t r0, r1;
    split_rows(d_inner, p.ith, p.nth, r0, r1);
    for (int64_t s = 0; s < n_s; ++s)
        for (int64_t t = 0; t < n_t; ++t) {
            float * out = (float *)tptr(dst, 0, t, s, 0);
            for (int64_t i = r0; i < r1; ++i) {
                const float * win = (const float *)tptr(sx, t, i, s, 0);
                const float * w = (const float *)tptr(c, 0, i, 0, 0);
                float sum = 0.0f;
                for (int64_t k = 0; k < d_conv; ++k) sum += win[k] * w[k];
                out[i] = sum;
            }
        }
}

/* ggml's softplus: log(1 + e^x), x itself past 20 where they agree in float. */
static inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

/* One state row of d_state: st = st_in * decay + b * x_dt (decay per element for Mamba-1,
 * one value for Mamba-2), returns st . c. Eight partial sums keep the loop vectorizable. */
static inline float ssm_state_row(int64_t n, const float * st_in, const float * decay, float decay1, const float * b, float x_dt,
                                  const float * c, float * st) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) {
            const float v = st_in[i + j] * (decay ? decay[i + j] : decay1) + b[i + j] * x_dt;
            st[i + j] = v;
            acc[j] += v * c[i + j];
        }
    float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; ++i) {
        const float v = st_in[i] * (decay ? decay[i] : decay1) + b[i] * x_dt;
        st[i] = v;
        sum += v * c[i];
    }
    return sum;
}

static size_t ssm_scan_thread_floats(const tsr_tensor * dst) { return (size_t)dst->src[0]->ne[0]; }

static void op_ssm_scan(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * s = dst->src[0], * x = dst->src[1], * dt = dst->src[2], * A = dst->src[3];
    const tsr_tensor * B = dst->src[4], * C = dst->src[5], * ids = dst->src[6];
    const int64_t ds = s->ne[0], hd = x->ne[0], nh = x->ne[1], nt = x->ne[2], nq = x->ne[3];
    const int64_t heads_per_group = nh / B->ne[1];
    const bool mamba1 = A->ne[0] != 1;
    float * decay = mamba1 ? thread_floats(p, ssm_scan_thread_floats(dst)) : nullptr;
    float * y_all = (float *)dst->data;
    float * st_all = y_all + tsr_nelements(x);
    const int64_t state_size = ds * hd * nh;
    int64_t h0, h1;
    split_rows(nh, p.ith, p.nth, h0, h1);
    for (int64_t q = 0; q < nq; ++q) {
        const int32_t id = *(const int32_t *)tptr(ids, q, 0, 0, 0);
        /* a bad id fails the graph; its sequence starts from zeros (ggml would read out of bounds) */
        const bool id_ok = id >= 0 && id < s->ne[3];
        if (!id_ok && p.ith == 0 && p.failed && !p.failed->exchange(true))
            tsr_set_error("CPU backend: ssm_scan '%s': state id %d of sequence %lld is outside [0, %lld)", dst->name, id,
                          (long long)q, (long long)s->ne[3]);
        float * st = st_all + q * state_size;
        for (int64_t h = h0; h < h1; ++h) {
            const float * st_in = id_ok ? (const float *)tptr(s, 0, 0, h, id) : nullptr;
            const int64_t g = h / heads_per_group;
            for (int64_t t = 0; t < nt; ++t) {
                const float dsp = softplus(*(const float *)tptr(dt, h, t, q, 0));
                const float * a = (const float *)tptr(A, 0, h, 0, 0);
                if (mamba1) for (int64_t i = 0; i < ds; ++i) decay[i] = std::exp(dsp * a[i]);
                const float decay1 = mamba1 ? 0.0f : std::exp(dsp * a[0]);
                const float * b = (const float *)tptr(B, 0, g, t, q);
                const float * c = (const float *)tptr(C, 0, g, t, q);
                const float * xr = (const float *)tptr(x, 0, h, t, q);
                float * y = y_all + ((q * nt + t) * nh + h) * hd;
                for (int64_t r = 0; r < hd; ++r) {
                    float * row = st + (h * hd + r) * ds;
                    const float * in = t == 0 ? (st_in ? st_in + r * ds : nullptr) : row;
                    if (!in) { for (int64_t i = 0; i < ds; ++i) row[i] = 0.0f; in = row; }
                    y[r] = ssm_state_row(ds, in, decay, decay1, b, xr[r] * dsp, c, row);
                }
            }
        }
    }
}

/* ---- linear attention: RWKV 6/7, gated linear attention ---------------------------------------------- */

/* Where a recurrence reads and writes: token rows [S, H] (head h at h*S), outputs y[t] of S*H,
 * states [S*S*H, n_seqs] after the outputs. The first token of a sequence reads the input
 * state, every later one the state the previous token wrote. Heads are independent: a
 * thread takes whole heads, for every token. */
struct lin_attn {
    int64_t S, H, T, per_seq;
    const float * state_in;
    float * y, * state_out;
    int64_t h0, h1;

    lin_attn(const cparams & p, tsr_tensor * dst, const tsr_tensor * tok, const tsr_tensor * state) {
        S = tok->ne[0]; H = tok->ne[1]; T = tok->ne[2];
        per_seq = T / state->ne[1];
        state_in = (const float *)state->data;
        y = (float *)dst->data;
        state_out = y + S * H * T;
        split_rows(H, p.ith, p.nth, h0, h1);
    }
    const float * prev(int64_t t, int64_t h) const {
        const int64_t off = (t / per_seq) * S * S * H + h * S * S;
        return t % per_seq == 0 ? state_in + off : state_out + off;
    }
    float * cur(int64_t t, int64_t h) const { return state_out + (t / per_seq) * S * S * H + h * S * S; }
    float * out(int64_t t, int64_t h) const { return y + (t * H + h) * S; }
};

static inline const float * tok_row(const tsr_tensor * x, int64_t t, int64_t h) { return (const float *)tptr(x, 0, h, t, 0); }

static void op_rwkv_wkv6(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * k = dst->src[0], * v = dst->src[1], * r = dst->src[2], * tf = dst->src[3], * td = dst->src[4];
    const lin_attn L(p, dst, k, dst->src[5]);
    for (int64_t t = 0; t < L.T; ++t)
        for (int64_t h = L.h0; h < L.h1; ++h) {
            const float * kt = tok_row(k, t, h), * vt = tok_row(v, t, h), * rt = tok_row(r, t, h), * dt = tok_row(td, t, h);
            const float * first = (const float *)tf->data + h * L.S;
            const float * prev = L.prev(t, h);
            float * cur = L.cur(t, h);
            float * y = L.out(t, h);
            for (int64_t j = 0; j < L.S; ++j) y[j] = 0.0f;
            for (int64_t i = 0; i < L.S; ++i) {
                const float ki = kt[i], ri = rt[i], fi = first[i], di = dt[i];
                const float * sp = prev + i * L.S;
                float * sc = cur + i * L.S;
                for (int64_t j = 0; j < L.S; ++j) {
                    const float kv = ki * vt[j];
                    const float old = sp[j];
                    y[j] += (kv * fi + old) * ri;
                    sc[j] = old * di + kv;
                }
            }
        }
}

static void op_gated_linear_attn(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * k = dst->src[0], * v = dst->src[1], * q = dst->src[2], * g = dst->src[3];
    const float scale = tsr_get_op_params_f32(dst, 0);
    const lin_attn L(p, dst, k, dst->src[4]);
    for (int64_t t = 0; t < L.T; ++t)
        for (int64_t h = L.h0; h < L.h1; ++h) {
            const float * kt = tok_row(k, t, h), * vt = tok_row(v, t, h), * qt = tok_row(q, t, h), * gt = tok_row(g, t, h);
            const float * prev = L.prev(t, h);
            float * cur = L.cur(t, h);
            float * y = L.out(t, h);
            for (int64_t j = 0; j < L.S; ++j) y[j] = 0.0f;
            for (int64_t i = 0; i < L.S; ++i) {
                const float ki = kt[i], qi = qt[i] * scale, gi = gt[i];
                const float * sp = prev + i * L.S;
                float * sc = cur + i * L.S;
                for (int64_t j = 0; j < L.S; ++j) {
                    const float st = sp[j] * gi + ki * vt[j];
                    y[j] += st * qi;
                    sc[j] = st;
                }
            }
        }
}

static void op_rwkv_wkv7(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * r = dst->src[0], * w = dst->src[1], * k = dst->src[2], * v = dst->src[3], * a = dst->src[4], * b = dst->src[5];
    const lin_attn L(p, dst, r, dst->src[6]);
    for (int64_t t = 0; t < L.T; ++t)
        for (int64_t h = L.h0; h < L.h1; ++h) {
            const float * rt = tok_row(r, t, h), * wt = tok_row(w, t, h), * kt = tok_row(k, t, h), * vt = tok_row(v, t, h);
            const float * at = tok_row(a, t, h), * bt = tok_row(b, t, h);
            const float * prev = L.prev(t, h);
            float * cur = L.cur(t, h);
            float * y = L.out(t, h);
            for (int64_t i = 0; i < L.S; ++i) {
                const float * sp = prev + i * L.S;
                float * sc = cur + i * L.S;
                const float sa = p.K->dot_f32(L.S, at, sp);
                const float vi = vt[i];
                for (int64_t j = 0; j < L.S; ++j) sc[j] = sp[j] * wt[j] + vi * kt[j] + sa * bt[j];
                y[i] = p.K->dot_f32(L.S, rt, sc);
            }
        }
}

} // namespace tcpu
} // namespace
/* ---- backends/cpu/impl/ops_shape.inl ---- */
/*
 * ops_shape.inl - the CPU's fill and shape ops of issue 17 part A: arange, fill, tri, cumsum,
 * acc/set, diag, repeat_back, l2_norm, top_k (conventions: ops_elementwise.inl). Scalar
 * loops, threaded over rows; sums in double.
 */
namespace {
namespace tcpu {

static void op_arange(const cparams & p, tsr_tensor * dst) {
    const float start = tsr_get_op_params_f32(dst, 0), step = tsr_get_op_params_f32(dst, 2);
    int64_t i0, i1;
    split_rows(dst->ne[0], p.ith, p.nth, i0, i1);
    for (int64_t i = i0; i < i1; ++i) *(float *)tptr(dst, i, 0, 0, 0) = start + step * (float)i;
}

/* The rows of dst this thread writes, with their (i1, i2, i3). */
template <class F> static inline void for_my_rows(const cparams & p, const tsr_tensor * dst, F && row) {
    // an empty row (ne[0] == 0) may still come with 2^50 rows: nothing to write, no loop
    if (tsr_nelements(dst) == 0) return;
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        row(i1, i2, i3);
    }
}

static void op_fill(const cparams & p, tsr_tensor * dst) {
    const float c = tsr_get_op_params_f32(dst, 0);
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) st(dst->type, tptr(dst, i0, i1, i2, i3), c);
    });
}

static inline bool tri_keeps(int type, int64_t i0, int64_t i1) {
    switch (type) {
        case TSR_TRI_TYPE_UPPER_DIAG: return i0 >= i1;
        case TSR_TRI_TYPE_UPPER: return i0 > i1;
        case TSR_TRI_TYPE_LOWER_DIAG: return i0 <= i1;
        default: return i0 < i1;
    }
}

static void op_tri(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int type = tsr_get_op_params_i32(dst, 0);
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0)
            st(dst->type, tptr(dst, i0, i1, i2, i3), tri_keeps(type, i0, i1) ? ld(src->type, tptr(src, i0, i1, i2, i3)) : 0.0f);
    });
}

static void op_cumsum(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        double s = 0.0;
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            s += ld(src->type, tptr(src, i0, i1, i2, i3));
            st(dst->type, tptr(dst, i0, i1, i2, i3), (float)s);
        }
    });
}

/* acc / set: dst = a (skipped when dst is a), a barrier, then the view of dst that b covers
 * (b's shape, strides nb1..nb3 and byte offset from op_params) gets view + b or b. */
static void op_acc_set(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    if (dst->data != a->data) {
        int64_t b0, b1;
        split_rows((int64_t)tsr_nbytes(dst), p.ith, p.nth, b0, b1);
        if (b1 > b0) std::memcpy((char *)dst->data + b0, (const char *)a->data + b0, (size_t)(b1 - b0));
        barrier(p);
    }
    int64_t prm[4];
    std::memcpy(prm, dst->op_params, sizeof(prm));
    tsr_tensor view = *dst;   /* dst seen through b's window: the same element type */
    view.data = (char *)dst->data + prm[3];
    view.nb[0] = tsr_type_size(dst->type);
    for (int d = 0; d < 4; ++d) view.ne[d] = b->ne[d];
    for (int d = 1; d < 4; ++d) view.nb[d] = (size_t)prm[d - 1];
    const bool acc = dst->op == TSR_OP_ACC;
    for_my_rows(p, b, [&](int64_t i1, int64_t i2, int64_t i3) {
        for (int64_t i0 = 0; i0 < b->ne[0]; ++i0) {
            char * v = tptr(&view, i0, i1, i2, i3);
            const float x = ld(b->type, tptr(b, i0, i1, i2, i3));
            st(dst->type, v, acc ? ld(dst->type, v) + x : x);
        }
    });
}

static void op_diag(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0)
            st(dst->type, tptr(dst, i0, i1, i2, i3), i0 == i1 ? ld(src->type, tptr(src, i0, 0, i2, i3)) : 0.0f);
    });
}

/* Each dst row sums the source rows that repeat it (r1..r3 repetitions of dims 1..3),
 * and within a row the r0 repetitions of each element. */
static void op_repeat_back(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    int64_t reps[4];
    for (int d = 0; d < 4; ++d) reps[d] = dst->ne[d] > 0 ? src->ne[d] / dst->ne[d] : 0;
    const bool src_empty = tsr_nelements(src) == 0;
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            double s = 0.0;
            // an empty source (some ne 0) sums nothing: never walk its other, maybe huge, dims
            for (int64_t k3 = 0; !src_empty && k3 < reps[3]; ++k3)
                for (int64_t k2 = 0; k2 < reps[2]; ++k2)
                    for (int64_t k1 = 0; k1 < reps[1]; ++k1)
                        for (int64_t k0 = 0; k0 < reps[0]; ++k0)
                            s += ld(src->type, tptr(src, i0 + k0 * dst->ne[0], i1 + k1 * dst->ne[1], i2 + k2 * dst->ne[2],
                                                    i3 + k3 * dst->ne[3]));
            st(dst->type, tptr(dst, i0, i1, i2, i3), (float)s);
        }
    });
}

static void op_l2_norm(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const double eps = tsr_get_op_params_f32(dst, 0);
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        double ss = 0.0;
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            const double v = *(const float *)tptr(src, i0, i1, i2, i3);
            ss += v * v;
        }
        const double norm = std::sqrt(ss);
        /* NaN-keeping max: a row with a NaN stays NaN (std::max(norm, eps) would not) */
        const float scale = (float)(1.0 / (norm < eps ? eps : norm));
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            float * d = (float *)tptr(dst, i0, i1, i2, i3);
            *d = *(const float *)tptr(src, i0, i1, i2, i3) * scale;
        }
    });
}

/* The k largest of each row, largest first: argsort's descending order (ties by index,
 * NaN largest), of which only the first k are sorted. */
static void op_top_k(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int64_t ne0 = src->ne[0], k = dst->ne[0];
    int32_t * idx = (int32_t *)thread_floats(p, (size_t)ne0);
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char * s = tptr(src, 0, i1, i2, i3);
        const size_t ss = src->nb[0];
        auto val = [&](int32_t i) { return *(const float *)(s + (size_t)i * ss); };
        auto before = [&](int32_t x, int32_t y) {
            const float vx = val(x), vy = val(y);
            if (vx != vx || vy != vy) return (vx != vx) != (vy != vy) ? vx != vx : x < y;
            return vx > vy || (vx == vy && x < y);
        };
        for (int64_t i = 0; i < ne0; ++i) idx[i] = (int32_t)i;
        std::partial_sort(idx, idx + k, idx + ne0, before);
        for (int64_t i = 0; i < k; ++i) *(int32_t *)tptr(dst, i, i1, i2, i3) = idx[i];
    });
}

} // namespace tcpu
} // namespace
/* ---- backends/cpu/impl/ops_custom.inl ---- */
/*
 * ops_custom.inl - user-defined ops on the CPU (issue 17 part A): the callback stored in
 * op_params, called by the first min(n_tasks, nth) threads of the node with their (ith,
 * nth), as ggml's CPU backend does.
 */
namespace {
namespace tcpu {

static void op_custom(const cparams & p, tsr_tensor * dst) {
    const tsr_impl::custom_params cp = tsr_impl::get_custom_params(dst);
    const int nth = cp.n_tasks == TSR_N_TASKS_MAX ? p.nth : std::min(cp.n_tasks, p.nth);
    if (p.ith >= nth) return;
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    const tsr_tensor * c = dst->src[2];
    switch (dst->op) {
        case TSR_OP_MAP_CUSTOM1: reinterpret_cast<tsr_custom1_op_t>(cp.fun)(dst, a, p.ith, nth, cp.userdata); break;
        case TSR_OP_MAP_CUSTOM2: reinterpret_cast<tsr_custom2_op_t>(cp.fun)(dst, a, b, p.ith, nth, cp.userdata); break;
        case TSR_OP_MAP_CUSTOM3: reinterpret_cast<tsr_custom3_op_t>(cp.fun)(dst, a, b, c, p.ith, nth, cp.userdata); break;
        default: reinterpret_cast<tsr_custom_op_t>(cp.fun)(dst, p.ith, nth, cp.userdata); break;
    }
}

} // namespace tcpu
} // namespace
/* ---- backends/cpu/impl/backend_cpu.inl ---- */
/*
 * backend_cpu.inl - the CPU backend object: supports_op, per-op workspace sizes, graph
 * reserve and compute (nodes split across the pool, a barrier between nodes, the abort
 * callback checked between nodes), and the public API of tessera-cpu.h.
 */
namespace {
namespace tcpu {

struct backend_ctx {
    int n_threads = 1;
    pool * tp = nullptr;
    workspace ws;
    bool (*abort_cb)(void *) = nullptr;
    void * abort_data = nullptr;
    /* nodes with at most this many elements (dst and every src) run on one thread;
     * TSR_CPU_SMALL_NODE=N overrides it at init, 0 splits every node */
    int64_t small_max = 8192;
    ~backend_ctx() { delete tp; }
};

static inline bool is_float(enum tsr_type t) { return t == TSR_TYPE_F32 || t == TSR_TYPE_F16 || t == TSR_TYPE_BF16; }
static inline bool is_mm_type(enum tsr_type t) { return is_float(t) || t == TSR_TYPE_Q8_0 || t == TSR_TYPE_Q4_0; }
/* Types an op may read or write by whole rows (mul_mat, get_rows, cpy, set_rows, ...). */
static inline bool is_row_type(enum tsr_type t) { return is_mm_type(t) || is_row_quant(t); }
/* A quantized tensor's rows are whole blocks, stored contiguously. */
static inline bool whole_blocks(const tsr_tensor * t) {
    return !tsr_is_quantized(t->type) || (t->nb[0] == tsr_type_size(t->type) && t->ne[0] % tsr_blck_size(t->type) == 0);
}
static inline bool is_view_op(enum tsr_op op) {
    return op == TSR_OP_NONE || op == TSR_OP_RESHAPE || op == TSR_OP_VIEW || op == TSR_OP_PERMUTE || op == TSR_OP_TRANSPOSE;
}

static bool supports(const tsr_tensor * t) {
    const tsr_tensor * a = t->src[0];
    const tsr_tensor * b = t->src[1];
    switch (t->op) {
        case TSR_OP_NONE: case TSR_OP_RESHAPE: case TSR_OP_VIEW: case TSR_OP_PERMUTE: case TSR_OP_TRANSPOSE:
            return true;
        case TSR_OP_DUP: case TSR_OP_CONT: case TSR_OP_CPY: {
            if (!(is_row_type(a->type) || a->type == TSR_TYPE_I32) || !(is_row_type(t->type) || t->type == TSR_TYPE_I32)) return false;
            if ((a->type == TSR_TYPE_I32) != (t->type == TSR_TYPE_I32)) return false;
            const bool q = tsr_is_quantized(a->type) || tsr_is_quantized(t->type);
            if (!q) return true;
            if (!tsr_are_same_shape(a, t)) return a->type == t->type && tsr_is_contiguous(a) && tsr_is_contiguous(t);
            return whole_blocks(a) && whole_blocks(t);
        }
        case TSR_OP_ADD: case TSR_OP_SUB: case TSR_OP_MUL: case TSR_OP_DIV:
            if (t->op == TSR_OP_ADD && tsr_is_quantized(a->type))  /* dequantize + requantize per row */
                return is_float(b->type) && t->type == a->type && tsr_is_contiguous(a) && tsr_is_contiguous(t) && whole_blocks(t);
            return is_float(a->type) && is_float(b->type) && is_float(t->type);
        case TSR_OP_SQR: case TSR_OP_SQRT: case TSR_OP_LOG: case TSR_OP_SCALE: case TSR_OP_CLAMP:
            return is_float(a->type) && is_float(t->type);
        case TSR_OP_UNARY:
            return is_float(a->type) && is_float(t->type) && tsr_get_op_params_i32(t, 0) >= 0 &&
                   tsr_get_op_params_i32(t, 0) < TSR_UNARY_OP_COUNT;
        case TSR_OP_GLU:
            return tsr_get_op_params_i32(t, 0) >= 0 && tsr_get_op_params_i32(t, 0) < TSR_GLU_OP_COUNT && is_float(a->type) &&
                   (!b || is_float(b->type)) && is_float(t->type);
        case TSR_OP_SUM: case TSR_OP_SUM_ROWS: case TSR_OP_MEAN:
            return is_float(a->type) && is_float(t->type);
        case TSR_OP_ARGMAX: case TSR_OP_ARGSORT:
            return a->type == TSR_TYPE_F32;
        case TSR_OP_REPEAT: case TSR_OP_CONCAT: case TSR_OP_PAD:
            return !tsr_is_quantized(a->type) && a->type == t->type;
        case TSR_OP_NORM: case TSR_OP_RMS_NORM: case TSR_OP_GROUP_NORM: case TSR_OP_DIAG_MASK_INF:
            return a->type == TSR_TYPE_F32 && t->type == TSR_TYPE_F32;
        case TSR_OP_MUL_MAT:
            if (!is_row_type(a->type) || !is_float(b->type) || t->type != TSR_TYPE_F32 || t->nb[0] != 4) return false;
            return whole_blocks(a);
        case TSR_OP_OUT_PROD:
            if (!is_row_type(a->type) || b->type != TSR_TYPE_F32 || t->type != TSR_TYPE_F32 || t->nb[0] != 4) return false;
            return whole_blocks(a);
        case TSR_OP_GET_ROWS:
            if (!(is_row_type(a->type) || a->type == TSR_TYPE_I32) || b->type != TSR_TYPE_I32) return false;
            return whole_blocks(a) && (!tsr_is_quantized(a->type) || t->nb[0] == 4);
        case TSR_OP_SET_ROWS:
            if (!is_row_type(t->type) || a->type != TSR_TYPE_F32 || b->type != TSR_TYPE_I32) return false;
            return whole_blocks(t);
        case TSR_OP_SOFT_MAX:
            return a->type == TSR_TYPE_F32 && t->type == TSR_TYPE_F32 && t->nb[0] == 4 &&
                   (!b || b->type == TSR_TYPE_F32 || b->type == TSR_TYPE_F16);
        case TSR_OP_ROPE:
            return (a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && t->type == a->type && b && b->type == TSR_TYPE_I32 &&
                   (!t->src[2] || t->src[2]->type == TSR_TYPE_F32);
        case TSR_OP_IM2COL:
            return is_float(b->type) && (t->type == TSR_TYPE_F32 || t->type == TSR_TYPE_F16);
        case TSR_OP_CONV_2D:
            return is_float(a->type) && is_float(b->type) && t->type == TSR_TYPE_F32 && t->nb[0] == 4;
        case TSR_OP_POOL_2D:
            return is_float(a->type) && t->type == TSR_TYPE_F32;
        case TSR_OP_UPSCALE:
            return is_float(a->type) && is_float(t->type);
        /* issue 17 part B */
        case TSR_OP_MUL_MAT_ID:
            return is_row_type(a->type) && whole_blocks(a) && a->nb[0] == tsr_type_size(a->type) && is_float(b->type) &&
                   t->src[2]->type == TSR_TYPE_I32 && t->type == TSR_TYPE_F32 && tsr_is_contiguous(t);
        case TSR_OP_CONV_2D_DW: case TSR_OP_CONV_TRANSPOSE_1D: case TSR_OP_CONV_TRANSPOSE_2D:
            return is_float(a->type) && is_float(b->type) && t->type == TSR_TYPE_F32;
        case TSR_OP_PAD_REFLECT_1D:
            return a->type == TSR_TYPE_F32 && t->type == TSR_TYPE_F32;
        case TSR_OP_GET_REL_POS:
            return (a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && t->type == a->type && tsr_is_contiguous(a) &&
                   tsr_is_contiguous(t);
        case TSR_OP_ROLL:
            return !tsr_is_quantized(a->type) && a->type == t->type;
        case TSR_OP_TIMESTEP_EMBEDDING: case TSR_OP_SSM_CONV: case TSR_OP_SSM_SCAN:
        case TSR_OP_RWKV_WKV6: case TSR_OP_GATED_LINEAR_ATTN: case TSR_OP_RWKV_WKV7:
        case TSR_OP_WIN_PART: case TSR_OP_WIN_UNPART: case TSR_OP_ADD_REL_POS:
            return a->type == TSR_TYPE_F32 && t->type == TSR_TYPE_F32 && tsr_is_contiguous(t);
        /* issue 17 part A */
        case TSR_OP_SIN: case TSR_OP_COS: case TSR_OP_LEAKY_RELU: case TSR_OP_FILL: case TSR_OP_TRI: case TSR_OP_CUMSUM:
        case TSR_OP_DIAG: case TSR_OP_REPEAT_BACK:
            return is_float(a->type) && is_float(t->type);
        case TSR_OP_ACC: case TSR_OP_SET:
            return is_float(a->type) && is_float(b->type) && t->type == a->type && tsr_is_contiguous(t);
        case TSR_OP_ARANGE:
            return t->type == TSR_TYPE_F32;
        case TSR_OP_L2_NORM:
            return a->type == TSR_TYPE_F32 && t->type == TSR_TYPE_F32;
        case TSR_OP_TOP_K:
            return a->type == TSR_TYPE_F32 && t->type == TSR_TYPE_I32;
        case TSR_OP_MAP_CUSTOM1: case TSR_OP_MAP_CUSTOM2: case TSR_OP_MAP_CUSTOM3: case TSR_OP_CUSTOM:
            return tsr_impl::get_custom_params(t).fun != nullptr;
        case TSR_OP_FLASH_ATTN_EXT: {
            const tsr_tensor * v = t->src[2];
            const tsr_tensor * m = t->src[3];
            if (a->type != TSR_TYPE_F32 || !is_mm_type(b->type) || !v || !is_mm_type(v->type)) return false;
            if (t->type != TSR_TYPE_F32 || t->nb[0] != 4) return false;
            if (m && m->type != TSR_TYPE_F32 && m->type != TSR_TYPE_F16) return false;
            if (!whole_blocks(b)) return false;
            if (tsr_is_quantized(v->type) && v->nb[0] != tsr_type_size(v->type)) return false;
            return true;
        }
        default:
            return false;
    }
}

/* Scratch bytes a node needs from the workspace with nth threads. */
static size_t op_work_size(const tsr_tensor * t, const kernels * K, int nth) {
    auto per_thread = [&](size_t floats) { return align_up(floats * 4, 64) * (size_t)nth; };
    switch (t->op) {
        case TSR_OP_DUP: case TSR_OP_CONT: case TSR_OP_CPY: case TSR_OP_ADD:
            return per_thread((size_t)t->ne[0]);
        case TSR_OP_MUL_MAT: return mm_work_size(t, K, nth);
        case TSR_OP_OUT_PROD: return per_thread((size_t)t->src[0]->ne[0]);
        case TSR_OP_SET_ROWS: return per_thread((size_t)t->src[0]->ne[0]);
        case TSR_OP_ROPE: return per_thread((size_t)std::max<int64_t>(tsr_get_op_params_i32(t, 1), t->ne[0]) + 2);
        case TSR_OP_ARGSORT: return per_thread((size_t)t->ne[0]);
        case TSR_OP_IM2COL: return per_thread((size_t)t->ne[0]);
        case TSR_OP_CONV_2D: {
            const conv_plan c = conv_make_plan(t, K);
            return c.cols_bytes + c.kern_bytes + c.thread_bytes * (size_t)nth;
        }
        case TSR_OP_FLASH_ATTN_EXT: return per_thread(fa_thread_floats(t));
        /* issue 17 part B */
        case TSR_OP_MUL_MAT_ID: return mmid_work_size(t, K, nth);
        case TSR_OP_CONV_2D_DW: return per_thread(dw_thread_floats(t));
        case TSR_OP_CONV_TRANSPOSE_1D: case TSR_OP_CONV_TRANSPOSE_2D: return tconv_work_size(t, K, nth);
        case TSR_OP_SSM_SCAN: return per_thread(ssm_scan_thread_floats(t));
        case TSR_OP_TOP_K: return per_thread((size_t)t->src[0]->ne[0]);   /* issue 17 part A */
        default: return 0;
    }
}

static void compute_node(const cparams & p, tsr_tensor * t) {
    switch (t->op) {
        case TSR_OP_DUP: case TSR_OP_CONT: case TSR_OP_CPY: op_cpy(p, t); break;
        case TSR_OP_ADD: op_binary_t<TSR_OP_ADD>(p, t); break;
        case TSR_OP_SUB: op_binary_t<TSR_OP_SUB>(p, t); break;
        case TSR_OP_MUL: op_binary_t<TSR_OP_MUL>(p, t); break;
        case TSR_OP_DIV: op_binary_t<TSR_OP_DIV>(p, t); break;
        case TSR_OP_SQR: case TSR_OP_SQRT: case TSR_OP_LOG: case TSR_OP_SCALE: case TSR_OP_CLAMP: case TSR_OP_UNARY:
            op_unary(p, t); break;
        case TSR_OP_GLU: op_glu(p, t); break;
        case TSR_OP_SUM: op_sum(p, t); break;
        case TSR_OP_SUM_ROWS: case TSR_OP_MEAN: op_sum_rows(p, t); break;
        case TSR_OP_ARGMAX: op_argmax(p, t); break;
        case TSR_OP_REPEAT: op_repeat(p, t); break;
        case TSR_OP_CONCAT: op_concat(p, t); break;
        case TSR_OP_PAD: op_pad(p, t); break;
        case TSR_OP_NORM: case TSR_OP_RMS_NORM: op_norm(p, t); break;
        case TSR_OP_GROUP_NORM: op_group_norm(p, t); break;
        case TSR_OP_MUL_MAT: op_mul_mat(p, t); break;
        case TSR_OP_OUT_PROD: op_out_prod(p, t); break;
        case TSR_OP_GET_ROWS: op_get_rows(p, t); break;
        case TSR_OP_SET_ROWS: op_set_rows(p, t); break;
        case TSR_OP_DIAG_MASK_INF: op_diag_mask_inf(p, t); break;
        case TSR_OP_SOFT_MAX: op_soft_max(p, t); break;
        case TSR_OP_ROPE: if (rope_is_multi(t)) op_rope_multi(p, t); else op_rope(p, t); break;
        case TSR_OP_IM2COL: op_im2col(p, t); break;
        case TSR_OP_CONV_2D: op_conv_2d(p, t); break;
        case TSR_OP_POOL_2D: op_pool_2d(p, t); break;
        case TSR_OP_UPSCALE: op_upscale(p, t); break;
        case TSR_OP_ARGSORT: op_argsort(p, t); break;
        case TSR_OP_FLASH_ATTN_EXT: op_flash_attn_ext(p, t); break;
        /* issue 17 part B */
        case TSR_OP_MUL_MAT_ID: op_mul_mat_id(p, t); break;
        case TSR_OP_CONV_2D_DW: op_conv_2d_dw(p, t); break;
        case TSR_OP_CONV_TRANSPOSE_1D: case TSR_OP_CONV_TRANSPOSE_2D: op_conv_transpose(p, t); break;
        case TSR_OP_PAD_REFLECT_1D: op_pad_reflect_1d(p, t); break;
        case TSR_OP_ROLL: op_roll(p, t); break;
        case TSR_OP_TIMESTEP_EMBEDDING: op_timestep_embedding(p, t); break;
        case TSR_OP_SSM_CONV: op_ssm_conv(p, t); break;
        case TSR_OP_SSM_SCAN: op_ssm_scan(p, t); break;
        case TSR_OP_RWKV_WKV6: op_rwkv_wkv6(p, t); break;
        case TSR_OP_GATED_LINEAR_ATTN: op_gated_linear_attn(p, t); break;
        case TSR_OP_RWKV_WKV7: op_rwkv_wkv7(p, t); break;
        case TSR_OP_WIN_PART: op_win_part(p, t); break;
        case TSR_OP_WIN_UNPART: op_win_unpart(p, t); break;
        case TSR_OP_GET_REL_POS: op_get_rel_pos(p, t); break;
        case TSR_OP_ADD_REL_POS: op_add_rel_pos(p, t); break;
        /* issue 17 part A */
        case TSR_OP_SIN: case TSR_OP_COS: case TSR_OP_LEAKY_RELU: op_unary(p, t); break;
        case TSR_OP_ARANGE: op_arange(p, t); break;
        case TSR_OP_FILL: op_fill(p, t); break;
        case TSR_OP_TRI: op_tri(p, t); break;
        case TSR_OP_CUMSUM: op_cumsum(p, t); break;
        case TSR_OP_ACC: case TSR_OP_SET: op_acc_set(p, t); break;
        case TSR_OP_DIAG: op_diag(p, t); break;
        case TSR_OP_REPEAT_BACK: op_repeat_back(p, t); break;
        case TSR_OP_L2_NORM: op_l2_norm(p, t); break;
        case TSR_OP_TOP_K: op_top_k(p, t); break;
        case TSR_OP_MAP_CUSTOM1: case TSR_OP_MAP_CUSTOM2: case TSR_OP_MAP_CUSTOM3: case TSR_OP_CUSTOM: op_custom(p, t); break;
        default: break;
    }
}

static inline bool node_runs(const tsr_tensor * t) { return !is_view_op(t->op) && tsr_nelements(t) > 0; }

/* Nodes too small to split: a barrier between cores (~0.3-1 us, much more when a core is
 * shared with other work) costs more than computing them on one thread. */
static inline bool node_is_small(const tsr_tensor * t, int64_t small_max) {
    int64_t work = tsr_nelements(t);
    switch (t->op) {
        case TSR_OP_MUL_MAT: case TSR_OP_OUT_PROD: case TSR_OP_FLASH_ATTN_EXT: case TSR_OP_CONV_2D:
        case TSR_OP_MUL_MAT_ID: case TSR_OP_CONV_2D_DW: case TSR_OP_CONV_TRANSPOSE_1D: case TSR_OP_CONV_TRANSPOSE_2D:
        /* issue 17 part A: a user's op may be heavy on small tensors; it gets the threads it asks for */
        case TSR_OP_MAP_CUSTOM1: case TSR_OP_MAP_CUSTOM2: case TSR_OP_MAP_CUSTOM3: case TSR_OP_CUSTOM:
            return false;
        default: break;
    }
    for (int s = 0; s < TSR_MAX_SRC; ++s)
        if (t->src[s]) work = std::max<int64_t>(work, tsr_nelements(t->src[s]));
    return work <= small_max;
}

static size_t graph_work_size(tsr_cgraph * g, const kernels * K, int nth) {
    size_t need = 0;
    const int n = tsr_graph_n_nodes(g);
    for (int i = 0; i < n; ++i) {
        const tsr_tensor * t = tsr_graph_node(g, i);
        if (node_runs(t)) need = std::max(need, op_work_size(t, K, nth));
    }
    return need;
}

struct graph_job {
    backend_ctx * ctx;
    tsr_cgraph * g;
    const kernels * K;
    std::atomic<int> abort_at{INT_MAX};  /* node index after which the graph stops */
    std::atomic<bool> failed{false};      /* a node found bad input data (cparams::failed) */
};

static void graph_job_fn(void * arg, int ith, int nth) {
    graph_job * job = (graph_job *)arg;
    backend_ctx * ctx = job->ctx;
    cparams p;
    p.ith = ith;
    p.nth = nth;
    p.wdata = (uint8_t *)ctx->ws.ptr;
    p.wsize = ctx->ws.size;
    p.tp = ctx->tp;
    p.K = job->K;
    p.failed = &job->failed;
    const int n = tsr_graph_n_nodes(job->g);
    int last = -1;
    for (int i = 0; i < n; ++i)
        if (node_runs(tsr_graph_node(job->g, i))) last = i;
    cparams solo = p;   /* small nodes: thread 0 alone, no barrier between consecutive ones */
    solo.nth = 1;
    for (int i = 0; i <= last; ++i) {
        tsr_tensor * t = tsr_graph_node(job->g, i);
        if (!node_runs(t)) continue;
        const bool cur_solo = nth > 1 && node_is_small(t, ctx->small_max);
        int next = i + 1;
        while (next <= last && !node_runs(tsr_graph_node(job->g, next))) ++next;
        const bool next_solo = next <= last && nth > 1 && node_is_small(tsr_graph_node(job->g, next), ctx->small_max);
        /* thread 0 aborted inside a run of small nodes: it skips the rest of the run and
         * stops at the barrier that closes it, where the other threads wait */
        const bool stopping = ith == 0 && job->abort_at.load(std::memory_order_relaxed) < i;
        if (!cur_solo) compute_node(p, t);
        else if (ith == 0 && !stopping) compute_node(solo, t);
        if (ith == 0 && !stopping && i < last && ctx->abort_cb && ctx->abort_cb(ctx->abort_data))
            job->abort_at.store(i, std::memory_order_release);
        if (cur_solo && next_solo) continue;   /* only thread 0 touched data: no barrier */
        if (i == last) break;                  /* pool::run waits for every thread */
        barrier(p);
        /* compare with i: thread 0 may already be past this barrier and flag a later node */
        if (job->abort_at.load(std::memory_order_acquire) <= i) break;
    }
}

static const char * be_get_name(tsr_backend_t) { return "CPU"; }

static void be_free(tsr_backend_t backend) {
    if (!backend) return;
    delete (backend_ctx *)backend->context;
    delete backend;
}

static tsr_backend_buffer_type_t be_get_default_buffer_type(tsr_backend_t) { return tsr_backend_cpu_buffer_type(); }

static bool be_graph_reserve(tsr_backend_t backend, tsr_cgraph * g) {
    backend_ctx * ctx = (backend_ctx *)backend->context;
    if (!g) return tsr_set_error("CPU backend: graph_reserve with a NULL graph");
    return ctx->ws.reserve(graph_work_size(g, get_kernels(), ctx->n_threads));
}

static enum tsr_status be_graph_compute(tsr_backend_t backend, tsr_cgraph * g) {
    backend_ctx * ctx = (backend_ctx *)backend->context;
    if (!g) { tsr_set_error("CPU backend: graph_compute with a NULL graph"); return TSR_STATUS_FAILED; }
    const int n = tsr_graph_n_nodes(g);
    bool all_small = true;
    for (int i = 0; i < n; ++i) {
        const tsr_tensor * t = tsr_graph_node(g, i);
        if (!node_runs(t)) continue;
        all_small = all_small && node_is_small(t, ctx->small_max);
        if (!supports(t)) {
            tsr_set_error("CPU backend: node %d '%s' (%s, type %s) is not supported", i, t->name, tsr_op_desc(t), tsr_type_name(t->type));
            return TSR_STATUS_FAILED;
        }
        if (!t->data) {
            tsr_set_error("CPU backend: node %d '%s' (%s) has no data (allocate the graph first)", i, t->name, tsr_op_desc(t));
            return TSR_STATUS_FAILED;
        }
        for (int s = 0; s < TSR_MAX_SRC; ++s) {
            const tsr_tensor * src = t->src[s];
            if (src && !src->data && tsr_nelements(src) > 0) {
                tsr_set_error("CPU backend: input %d '%s' of node %d '%s' has no data", s, src->name, i, t->name);
                return TSR_STATUS_FAILED;
            }
        }
    }
    const kernels * K = get_kernels();
    if (!ctx->ws.reserve(graph_work_size(g, K, ctx->n_threads))) return TSR_STATUS_ALLOC_FAILED;
    graph_job job;
    job.ctx = ctx;
    job.g = g;
    job.K = K;
    /* a graph of small nodes only runs on this thread: waking the pool costs more */
    if (ctx->tp && !all_small) ctx->tp->run(graph_job_fn, &job);
    else graph_job_fn(&job, 0, 1);
    if (job.failed.load()) return TSR_STATUS_FAILED;   /* the node's message is in tsr_last_error */
    return job.abort_at.load() != INT_MAX ? TSR_STATUS_ABORTED : TSR_STATUS_SUCCESS;
}

static bool be_supports_op(tsr_backend_t, const tsr_tensor * op) { return op && supports(op); }
static bool be_supports_buft(tsr_backend_t, tsr_backend_buffer_type_t buft) { return buft && tsr_backend_buft_is_host(buft); }
static size_t be_get_workspace_size(tsr_backend_t backend) { return ((backend_ctx *)backend->context)->ws.size; }

/* The CPU device (device_cpu.inl), which every CPU backend runs on. */
static tsr_backend_dev_t the_device();

static bool make_pool(backend_ctx * ctx, int n) {
    delete ctx->tp;
    ctx->tp = nullptr;
    ctx->n_threads = 1;
    if (n <= 1) return true;
    try {
        ctx->tp = new pool(n);
        ctx->n_threads = n;
        return true;
    } catch (...) {
        return tsr_set_error("CPU backend: could not start %d threads; running single-threaded", n);
    }
}

} // namespace tcpu
} // namespace

/* ---- public API ---------------------------------------------------------------------------- */

TSR_API_IMPL tsr_backend_t tsr_backend_cpu_init(void) {
    using namespace tcpu;
    backend_ctx * ctx = new (std::nothrow) backend_ctx();
    tsr_backend * be = new (std::nothrow) tsr_backend();
    if (!ctx || !be) {
        delete ctx;
        delete be;
        tsr_set_error("tsr_backend_cpu_init: out of memory");
        return nullptr;
    }
    unsigned hc = std::thread::hardware_concurrency();
    int n = hc == 0 ? 1 : (int)std::min(hc, 64u);
    make_pool(ctx, n);
    if (const char * env = std::getenv("TSR_CPU_SMALL_NODE")) ctx->small_max = std::max<long long>(0, std::atoll(env));
    std::memset(&be->iface, 0, sizeof(be->iface));
    be->iface.get_name = be_get_name;
    be->iface.free = be_free;
    be->iface.get_default_buffer_type = be_get_default_buffer_type;
    be->iface.graph_reserve = be_graph_reserve;
    be->iface.graph_compute = be_graph_compute;
    be->iface.supports_op = be_supports_op;
    be->iface.supports_buft = be_supports_buft;
    be->iface.get_workspace_size = be_get_workspace_size;
    be->device = the_device();
    be->context = ctx;
    return be;
}

TSR_API_IMPL bool tsr_backend_is_cpu(tsr_backend_t backend) {
    return backend && backend->iface.get_name == tcpu::be_get_name;
}

TSR_API_IMPL void tsr_backend_cpu_set_n_threads(tsr_backend_t backend, int n_threads) {
    if (!tsr_backend_is_cpu(backend)) { tsr_set_error("tsr_backend_cpu_set_n_threads: not a CPU backend"); return; }
    tcpu::backend_ctx * ctx = (tcpu::backend_ctx *)backend->context;
    n_threads = std::max(1, std::min(n_threads, 512));
    if (n_threads == ctx->n_threads) return;
    tcpu::make_pool(ctx, n_threads);
}

TSR_API_IMPL int tsr_backend_cpu_get_n_threads(tsr_backend_t backend) {
    if (!tsr_backend_is_cpu(backend)) return 0;
    return ((tcpu::backend_ctx *)backend->context)->n_threads;
}

TSR_API_IMPL void tsr_backend_cpu_set_abort_callback(tsr_backend_t backend, bool (*abort_callback)(void *), void * data) {
    if (!tsr_backend_is_cpu(backend)) { tsr_set_error("tsr_backend_cpu_set_abort_callback: not a CPU backend"); return; }
    tcpu::backend_ctx * ctx = (tcpu::backend_ctx *)backend->context;
    ctx->abort_cb = abort_callback;
    ctx->abort_data = data;
}

TSR_API_IMPL void tsr_backend_cpu_set_host_allocator(tsr_backend_t backend, const struct tsr_host_allocator * alloc) {
    if (!tsr_backend_is_cpu(backend)) { tsr_set_error("tsr_backend_cpu_set_host_allocator: not a CPU backend"); return; }
    tcpu::backend_ctx * ctx = (tcpu::backend_ctx *)backend->context;
    ctx->ws.release();
    if (alloc) {
        ctx->ws.alloc = *alloc;
        ctx->ws.has_alloc = true;
    } else {
        const tsr_host_allocator * d = tsr_get_host_allocator();
        ctx->ws.has_alloc = d != nullptr;
        if (d) ctx->ws.alloc = *d;
    }
}

TSR_API_IMPL const char * tsr_cpu_isa_name(enum tsr_cpu_isa isa) { return tcpu::isa_name(isa); }
TSR_API_IMPL bool tsr_cpu_isa_supported(enum tsr_cpu_isa isa) { return tcpu::isa_supported(isa); }
TSR_API_IMPL enum tsr_cpu_isa tsr_cpu_isa_best(void) { return tcpu::isa_best(); }
TSR_API_IMPL enum tsr_cpu_isa tsr_cpu_get_isa(void) { return (enum tsr_cpu_isa)tcpu::isa_current().load(); }
TSR_API_IMPL bool tsr_cpu_set_isa(enum tsr_cpu_isa isa) {
    if (!tcpu::isa_supported(isa)) return tsr_set_error("tsr_cpu_set_isa: %s is not supported by this CPU/build", tcpu::isa_name(isa));
    tcpu::isa_current().store((int)isa);
    return true;
}
TSR_API_IMPL bool tsr_cpu_has_avx512_bf16(void) { return tcpu::features().avx512_bf16; }
TSR_API_IMPL bool tsr_cpu_has_avx512_vnni(void) { return tcpu::features().avx512_vnni; }
/* ---- backends/cpu/impl/device_cpu.inl ---- */
/*
 * device_cpu.inl - the CPU device and its backend kind in the registry (backend.h):
 * host memory from /proc/meminfo, the processor's name from /proc/cpuinfo.
 */
#include <cstdio>
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace {
namespace tcpu {

/* The value in kB of one /proc/meminfo line ("MemTotal:  16318412 kB"), in bytes; 0 when absent. */
static size_t meminfo_bytes(const char * key) {
    FILE * f = std::fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t bytes = 0;
    const size_t key_len = std::strlen(key);
    while (std::fgets(line, sizeof line, f)) {
        unsigned long long kb = 0;
        if (std::strncmp(line, key, key_len) == 0 && line[key_len] == ':' && std::sscanf(line + key_len + 1, "%llu", &kb) == 1) {
            bytes = (size_t) kb * 1024;
            break;
        }
    }
    std::fclose(f);
    return bytes;
}

/* Host memory: MemTotal / MemAvailable where /proc/meminfo exists, else the physical
 * pages (free unknown: reported as total). */
static void host_memory(size_t * free, size_t * total) {
    size_t t = meminfo_bytes("MemTotal");
    size_t f = meminfo_bytes("MemAvailable");
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    if (t == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0) t = (size_t) pages * (size_t) page;
    }
#endif
    *total = t;
    *free = f ? f : t;
}

/* The processor's name ("model name" of /proc/cpuinfo), else "CPU". Read once. */
static const char * processor_name() {
    static const std::string name = [] {
        std::string found = "CPU";
        FILE * f = std::fopen("/proc/cpuinfo", "r");
        if (!f) return found;
        char line[512];
        while (std::fgets(line, sizeof line, f)) {
            if (std::strncmp(line, "model name", 10) != 0) continue;
            const char * colon = std::strchr(line, ':');
            if (!colon) continue;
            std::string v = colon + 1;
            const size_t b = v.find_first_not_of(" \t"), e = v.find_last_not_of(" \t\r\n");
            if (b != std::string::npos) found = v.substr(b, e - b + 1);
            break;
        }
        std::fclose(f);
        return found;
    }();
    return name.c_str();
}

/* NULL or "" (defaults) or "n_threads=N" with N in [1, 512]. false + error naming the string. */
static bool parse_params(const char * params, int & n_threads) {
    n_threads = 0;
    if (!params || !*params) return true;
    int n = 0, used = 0;
    if (std::sscanf(params, "n_threads=%d%n", &n, &used) == 1 && params[used] == '\0' && n >= 1 && n <= 512) {
        n_threads = n;
        return true;
    }
    return tsr_set_error("CPU device: params '%s' not understood (NULL, \"\" or \"n_threads=N\" with N in 1..512)", params);
}

static const char * dev_get_name(tsr_backend_dev_t) { return "CPU"; }
static const char * dev_get_description(tsr_backend_dev_t) { return processor_name(); }
static void dev_get_memory(tsr_backend_dev_t, size_t * free, size_t * total) { host_memory(free, total); }
static enum tsr_backend_dev_type dev_get_type(tsr_backend_dev_t) { return TSR_BACKEND_DEVICE_TYPE_CPU; }
static tsr_backend_t dev_init_backend(tsr_backend_dev_t, const char * params) {
    int n_threads = 0;
    if (!parse_params(params, n_threads)) return nullptr;
    tsr_backend_t be = tsr_backend_cpu_init();
    if (be && n_threads > 0) tsr_backend_cpu_set_n_threads(be, n_threads);
    return be;
}
static tsr_backend_buffer_type_t dev_get_buffer_type(tsr_backend_dev_t) { return tsr_backend_cpu_buffer_type(); }
static bool dev_supports_op(tsr_backend_dev_t, const tsr_tensor * op) { return be_supports_op(nullptr, op); }
static bool dev_supports_buft(tsr_backend_dev_t, tsr_backend_buffer_type_t buft) { return be_supports_buft(nullptr, buft); }

static const char * reg_get_name(tsr_backend_reg_t) { return "CPU"; }
static size_t reg_get_device_count(tsr_backend_reg_t) { return 1; }
static tsr_backend_dev_t reg_get_device(tsr_backend_reg_t, size_t) { return the_device(); }

/* Filled member by member (each entry names its member); what is left out is NULL. */
static struct tsr_backend_reg g_reg = [] {
    struct tsr_backend_reg r = {};
    r.api_version = TSR_BACKEND_API_VERSION;
    r.iface.get_name = reg_get_name;
    r.iface.get_device_count = reg_get_device_count;
    r.iface.get_device = reg_get_device;
    return r;
}();

static constexpr struct tsr_backend_device_i device_iface = [] {
    struct tsr_backend_device_i i = {};
    i.get_name = dev_get_name;
    i.get_description = dev_get_description;
    i.get_memory = dev_get_memory;
    i.get_type = dev_get_type;
    i.init_backend = dev_init_backend;
    i.get_buffer_type = dev_get_buffer_type;
    i.supports_op = dev_supports_op;
    i.supports_buft = dev_supports_buft;
    return i;
}();
static struct tsr_backend_device g_device = {device_iface, &g_reg, nullptr};

static tsr_backend_dev_t the_device() { return &g_device; }

/* Registered while this file's statics are initialized: see registry.inl for why. */
[[maybe_unused]] static const bool g_registered = tsr_backend_register(&g_reg);

} // namespace tcpu
} // namespace

TSR_API_IMPL tsr_backend_reg_t tsr_backend_cpu_reg(void) { return &tcpu::g_reg; }
#endif
/* ---- parts included before TSR_IMPLEMENTATION (see tessera/impl/implement_included.h) ---- */
#if defined(TSR_IMPLEMENTATION) && defined(TSR_VULKAN_DECLARED) && !defined(TSR_VULKAN_IMPLEMENTED)
#include "tessera-vulkan.h"
#endif
