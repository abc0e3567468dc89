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
 * pairs (i, i + n_dims) over the whole head with the sections restarting their angles; IMROPE
 * (Qwen3-VL) is MROPE with the time, height and width streams interleaved pair by pair. */
#define TSR_ROPE_TYPE_MROPE  8
#define TSR_ROPE_TYPE_VISION 24
#define TSR_ROPE_TYPE_IMROPE 40
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
 * width, extra) and sections[4] pairs per stream (Qwen2-VL's M-RoPE; mode TSR_ROPE_TYPE_MROPE,
 * TSR_ROPE_TYPE_IMROPE or TSR_ROPE_TYPE_VISION, where n_dims = head_dim / 2). YaRN parameters as
 * tsr_rope_ext. */
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
#include "impl/core_internal.h"
#include "impl/error.inl"
#include "impl/types.inl"
#include "impl/quants.inl"
#include "impl/context.inl"
#include "impl/tensor.inl"
#include "impl/ops.inl"
#include "impl/ops_models.inl"
#include "impl/graph.inl"
#include "impl/implement_included.h"
#endif
