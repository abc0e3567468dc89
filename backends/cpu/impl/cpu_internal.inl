/*
 * cpu_internal.inl - shared internals of the CPU backend: includes, element conversions,
 * the per-thread compute parameters and the kernel table every ISA path fills in.
 * Everything here is internal (anonymous namespace): two vendored copies never clash.
 */
#include "tessera/impl/core_internal.h"

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

/* TSR_UNROLL(N) before a kernel's loop over a few rows, groups, registers or lines (N >= its
 * trip count) unrolls it completely under g++: users compile this implementation with their
 * own flags, and g++ -O2 (no -fpeel-loops) leaves such loops rolled, their register arrays
 * on the stack. Before, on a Zen 5 (one core, in cache), g++ -O2 against -O3: the CPU_REPACK
 * mat-vecs Q4_K 33 / 85, Q3_K 38 / 59, Q4_0 67 / 83 GB/s, the int8 GEMMs 0.55-0.75 x; with
 * it -O2 is within the host's noise of -O3. clang unrolls these at -O2 on its own; forcing it
 * at its -O1 (the sanitizer and fuzzer builds) made the implementation's compile 75 -> 119 s,
 * so it is g++'s only. scripts/check-unroll.sh lists the loops g++ -O2 still leaves rolled. */
#define TSR_PRAGMA(x) _Pragma(#x)
#if defined(__GNUC__) && !defined(__clang__)
#define TSR_UNROLL(n) TSR_PRAGMA(GCC unroll n)
#else
#define TSR_UNROLL(n)
#endif

/* ISA-specific functions live in the same TU; each carries its target attribute. */
#if defined(TSR_CPU_X86) && (defined(__GNUC__) || defined(__clang__))
#define TSR_TARGET_AVX2   __attribute__((target("avx2,fma,f16c")))
#define TSR_TARGET_AVX2VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#define TSR_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define TSR_TARGET_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))
#define TSR_TARGET_AVX512VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define TSR_TARGET_AVX512VNNI_GFNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c,gfni")))
#define TSR_TARGET_AVX512VNNI_VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c,avx512vbmi")))
#define TSR_TARGET_AVX512VNNI_GFNI_VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c,gfni,avx512vbmi,bmi2")))
#define TSR_CPU_HAVE_X86_KERNELS 1
#endif

/* GCC 12 warns about the deliberately undefined lanes inside some intrinsics: the x86 kernel
 * sections open with TSR_SIMD_WARNINGS_OFF and close with TSR_SIMD_WARNINGS_ON. */
#if defined(__GNUC__) && !defined(__clang__)
#define TSR_SIMD_WARNINGS_OFF                                                                      \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")          \
        _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define TSR_SIMD_WARNINGS_ON _Pragma("GCC diagnostic pop")
#else
#define TSR_SIMD_WARNINGS_OFF
#define TSR_SIMD_WARNINGS_ON
#endif

namespace {
namespace tcpu {

/* GCC vector types for kernels written once as a body template over V and compiled per ISA
 * by callers that carry the ISA's target attribute (ops_models.inl's depthwise rows,
 * ops_attn.inl's attention tiles). 4 lanes: SSE2 on any x86-64, NEON on aarch64. */
typedef float vf32x4 __attribute__((vector_size(16)));
#if defined(TSR_CPU_HAVE_X86_KERNELS)
typedef float vf32x8 __attribute__((vector_size(32)));
typedef float vf32x16 __attribute__((vector_size(64)));
#endif

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
/* Where the side arrays of an activation row of nb blocks of type B (yq8, or Q8_K below)
 * start, and those arrays as S: the first 64-byte offset past the blocks. */
template <class B> static inline size_t side_offset(int64_t nb) { return ((size_t)nb * sizeof(B) + 63) / 64 * 64; }
template <class S, class B> static inline const S * side_after(const B * y, int64_t nb) {
    return (const S *)(const void *)((const char *)y + side_offset<B>(nb));
}
template <class S, class B> static inline S * side_after(B * y, int64_t nb) {
    return (S *)(void *)((char *)y + side_offset<B>(nb));
}
/* Room for either side layout: y_side writes only the one the weight type reads. */
static inline size_t yq8_row_bytes(int64_t n) {
    return side_offset<yq8>(n / 32) + (size_t)(n / 128) * std::max(sizeof(yside_q8), sizeof(yside_q4));
}
/* The side arrays for weights of type wt (Q8_0 or Q4_0) after the nb blocks of y. */
static inline void y_side(yq8 * y, int64_t nb, enum tsr_type wt) {
    yside_q8 * side8 = side_after<yside_q8>(y, nb);
    yside_q4 * side4 = side_after<yside_q4>(y, nb);
    for (int64_t g = 0; g < nb / 4; ++g) {
        for (int j = 0; j < 4; ++j) {
            const yq8 & b = y[g * 4 + j];
            if (wt == TSR_TYPE_Q8_0) {
                yside_q8 & s8 = side8[g];
                std::memcpy(s8.qs + 32 * j, b.qs, 32);
                for (int l = 0; l < 8; ++l) {
                    s8.bias[8 * j + l] = l == 0 ? -128 * b.sum : 0;
                    s8.d[8 * j + l] = b.d;
                }
            } else {
                yside_q4 & s4 = side4[g];
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

/* A Q8_K activation row for Q2_K's and Q3_K's dot-product kernels is followed (at a 64-byte
 * offset) by one side block per super-block, written by y_side_q8k once per activation row,
 * for work the AVX-512 kernel (k2_rows_avx512) did once per 4 weight rows before. The other
 * ISAs' kernels do not read them, and mul_mat writes them only for a kernel table that says
 * it does (kernels::q8k_side). The kernel finds them from its n: a row is read with the
 * element count it was prepared for (y_side_q8k's nb), never a prefix of it. cpu_bench
 * --matvec-only, 2 threads from DRAM, builds alternating 5 times each, x the read
 * bandwidth: Q3_K 0.90-0.92 (mean 0.91) against 0.78-0.91 (mean 0.86), Q2_K 0.88-0.96
 * (mean 0.92) against 0.78-0.93 (mean 0.88).
 *
 * Q3_K: where the kernel's vpdpbusd sums start, so that its levels stay unsigned (0..7: the
 * - 4 comes off at the start). Dword k of start[j] belongs to the 4 activations of zmm j as
 * the kernel joins them (qs 32j.. in dwords 0-7, qs 128 + 32j.. in dwords 8-15), whose
 * levels are times 4 for odd j: - 4 (odd j: - 16) times their sum; and the activations in
 * the kernel's order, as Q2_K's.
 *
 * Q2_K: the 16-element sums split as bsums[g] = 16 hi[g] + lo[g] (lo 0..15, hi -128..127),
 * so that two vpdpbusd of the mins (times 16, as the scale byte's high nibble already is, and
 * times 1) against them give sum(min * bsum) with no widening to int16; the activations in
 * the kernel's order, so that each of its 4 vectors is one load where two loads and a
 * vinserti64x4 joined them, and d as the kernel's pair of multipliers (see k2_rows_avx512). */
struct yside_q3k {
    int32_t start[4][16];
    int8_t  qs[4][64];            /* as yside_q2k's */
};
struct yside_q2k {
    int8_t qs[4][64];             /* zmm j of the kernel: qs 32j.. then qs 128 + 32j.. (64-byte offsets in the row) */
    int8_t bsum_hi[16], bsum_lo[16];
    float  d_pair[2];             /* d / 4 and d: the kernel's scale sums are times 4, its mins' are not */
    float  unused[6];             /* keeps each block's qs at a 64-byte offset; never written or read */
};
static_assert(sizeof(yside_q3k) == 512 && sizeof(yside_q2k) == 320, "Q8_K side layouts");
/* Bytes of a Q8_K activation row of n elements for the dot-product kernels of weight type wt. */
static inline size_t q8k_row_bytes(int64_t n, enum tsr_type wt) {
    const int64_t nb = n / TSR_QK_K;
    const size_t side = wt == TSR_TYPE_Q3_K ? sizeof(yside_q3k) : wt == TSR_TYPE_Q2_K ? sizeof(yside_q2k) : 0;
    return side ? side_offset<tsr_block_q8_K>(nb) + (size_t)nb * side : (size_t)nb * sizeof(tsr_block_q8_K);
}
/* The activations of b as the kernel's zmm j take them: qs 32j.. then qs 128 + 32j.. */
static inline void side_qs_in_kernel_order(const tsr_block_q8_K & b, int8_t (*qs)[64]) {
    for (int j = 0; j < 4; ++j) {
        std::memcpy(qs[j], b.qs + 32 * j, 32);
        std::memcpy(qs[j] + 32, b.qs + 128 + 32 * j, 32);
    }
}
/* The side blocks for weights of type wt after the nb Q8_K blocks of y (Q2_K's or Q3_K's;
 * other types have none). */
static inline void y_side_q8k(tsr_block_q8_K * y, int64_t nb, enum tsr_type wt) {
    if (wt == TSR_TYPE_Q3_K) {
        yside_q3k * side = side_after<yside_q3k>(y, nb);
        for (int64_t i = 0; i < nb; ++i) {
            /* the sums of each 4 activations in order, then dwords 0-7 of start[j] from qs 32j..,
             * 8-15 from qs 128 + 32j.. (two plain loops: the compiler vectorizes them at -O2 too) */
            int32_t quad[64];
            for (int k = 0; k < 64; ++k) quad[k] = y[i].qs[4 * k] + y[i].qs[4 * k + 1] + y[i].qs[4 * k + 2] + y[i].qs[4 * k + 3];
            for (int j = 0; j < 4; ++j)
                for (int k = 0; k < 8; ++k) {
                    side[i].start[j][k] = -(j & 1 ? 16 : 4) * quad[8 * j + k];
                    side[i].start[j][8 + k] = -(j & 1 ? 16 : 4) * quad[32 + 8 * j + k];
                }
            side_qs_in_kernel_order(y[i], side[i].qs);
        }
    } else if (wt == TSR_TYPE_Q2_K) {
        yside_q2k * side = side_after<yside_q2k>(y, nb);
        for (int64_t i = 0; i < nb; ++i) {
            for (int g = 0; g < 16; ++g) {
                const int b = y[i].bsums[g];  /* -2048..2032: b >> 4 (arithmetic) is -128..127 */
                side[i].bsum_lo[g] = (int8_t)(b & 15);
                side[i].bsum_hi[g] = (int8_t)(b >> 4);
            }
            side_qs_in_kernel_order(y[i], side[i].qs);
            side[i].d_pair[0] = y[i].d * 0.25f;
            side[i].d_pair[1] = y[i].d;
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
    /* B operand: Q8_K rows when set (src1 quantized per 256 for this GEMM; kc a multiple of
     * 256); else yq8 rows for quantized weights, F32 rows for float ones (mm_make_plan) */
    bool   b_is_q8k = false;
    void (*pack_a)(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst);
    void (*pack_b)(const char * b, size_t ldb, int rows, int64_t K, int64_t k0, int kc, void * dst);
    void (*kernel)(int kc, const void * ap, const void * bp, float * c, size_t ldc, int mr_valid, int nr_valid, bool accumulate);
    /* when not NULL, run over each A panel after its packer (whichever packed it: pack_a or a
     * CPU_REPACK direct packer), kc weights: a kernel that wants the bytes in another order
     * than the packers' shared layout (AVX2's pair kernel: pack.inl) */
    void (*finish_a)(void * panel, int kc) = nullptr;
    /* after a thread's last kernel call of a range, when not NULL (AMX: the tiles back to
     * their initial state, so the thread's context switches and idle states stay cheap) */
    void (*done)() = nullptr;
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

/* GEMM g with another micro-kernel on the same panels (the AVX-VNNI builds of AVX2's). */
static constexpr gemm_impl gemm_with_kernel(gemm_impl g, decltype(gemm_impl::kernel) kernel) {
    g.kernel = kernel;
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

/* Bytes of one super-block of K-quant slot ks. */
static constexpr size_t q8k_block_bytes(int ks) {
    return ks == KSLOT_Q2_K ? sizeof(tsr_block_q2_K) : ks == KSLOT_Q3_K ? sizeof(tsr_block_q3_K)
         : ks == KSLOT_Q4_K ? sizeof(tsr_block_q4_K) : ks == KSLOT_Q5_K ? sizeof(tsr_block_q5_K) : sizeof(tsr_block_q6_K);
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

/* Weight types whose GEMM packs them into the ISA's Q8_0 panels (gemm_kquant.inl). */
enum { XSLOT_Q4_1 = 0, XSLOT_Q5_0, XSLOT_Q5_1, XSLOT_IQ4_NL, XSLOT_Q2_K, XSLOT_Q3_K, XSLOT_Q4_K, XSLOT_Q5_K, XSLOT_Q6_K,
       XSLOT_COUNT };

static inline int requant_slot(enum tsr_type t) {
    switch (t) {
        case TSR_TYPE_Q4_1: return XSLOT_Q4_1;
        case TSR_TYPE_Q5_0: return XSLOT_Q5_0;
        case TSR_TYPE_Q5_1: return XSLOT_Q5_1;
        case TSR_TYPE_IQ4_NL: return XSLOT_IQ4_NL;
        case TSR_TYPE_Q2_K: return XSLOT_Q2_K;
        case TSR_TYPE_Q3_K: return XSLOT_Q3_K;
        case TSR_TYPE_Q4_K: return XSLOT_Q4_K;
        case TSR_TYPE_Q5_K: return XSLOT_Q5_K;
        case TSR_TYPE_Q6_K: return XSLOT_Q6_K;
        default: return -1;
    }
}

/* The mat-vec kernel body over R rows (x + r * lda) against one activation row y: the rows'
 * running sums (Acc, zeroed), a block of every row per step (step(acc, block bytes, y block)),
 * then out[r] = finish(acc of row r). Written once, expanded inside each ISA's kernels, whose
 * target attributes the inlined steps need. With R = 4 and rows far apart, four DRAM streams
 * per core (mm_range_dots); a row's arithmetic is the same for every R, so its result never
 * depends on how the rows were split. */
#define TSR_MATVEC_ROWS(R, Acc, nblocks, block_bytes, step, finish)                                    \
    Acc acc_[R] = {};                                                                                     \
    for (int64_t blk_ = 0; blk_ < (nblocks); ++blk_) {                                                   \
        _Pragma("GCC unroll 4") for (int row_ = 0; row_ < (R); ++row_)                                   \
            step(acc_[row_], (const uint8_t *)x + (size_t)row_ * lda + (size_t)blk_ * (block_bytes), y[blk_]); \
    }                                                                                                     \
    _Pragma("GCC unroll 4") for (int row_ = 0; row_ < (R); ++row_) out[row_] = finish(acc_[row_]);

#if defined(__GNUC__)
#define TSR_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define TSR_ALWAYS_INLINE inline
#endif

/* ---- software prefetch of what is read once from DRAM ---------------------------------------
 * Into L2 (x86 prefetcht1; aarch64 prfm pldl2keep): the mat-vec's weights, the KV rows of a
 * decode step, the next node's first lines while a thread waits. A prefetch into L1 (T0)
 * holds one of the core's few L1 miss buffers for the whole trip from DRAM; T1's lines wait
 * in L2 and the loads find them there (measured: matvec_prefetcher, fa_keys_ahead). The
 * packers of GEMM panels prefetch into L1 instead (they read what they prefetch at once). */
static TSR_ALWAYS_INLINE void prefetch_l2(const void * p) {
#if defined(__GNUC__)
    __builtin_prefetch(p, 0, 2);  /* what _mm_prefetch(p, _MM_HINT_T1) expands to */
#elif defined(TSR_CPU_X86)
    _mm_prefetch((const char *)p, _MM_HINT_T1);
#else
    (void)p;
#endif
}
/* The lines of bytes [p, p + n) into L2. Addresses as integers: a prefetch never faults,
 * and past a tensor no pointer is formed. always_inline, as every prefetch helper must be:
 * g++ counts a prefetch as no side effect, so a helper left out of line is a "const"
 * function whose calls it deletes (this one, merely inline, vanished from the attention
 * kernels: object code checked, prefetcht1 852 -> 846). */
static TSR_ALWAYS_INLINE void prefetch_lines_l2(const void * p, size_t n) {
    const uintptr_t a0 = (uintptr_t)p;
    for (uintptr_t a = a0 & ~(uintptr_t)63; a < a0 + n; a += 64) prefetch_l2((const void *)a);
}

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
 * out of range. x86: lanes below zero_below (e^-104 < 2^-150: the result rounds to 0) are
 * computed on 0 and set to 0, the same bits as computing them: an underflowing multiply
 * takes a microcode assist there (~150 cycles a vector), and masked attention scores (-inf)
 * are most of some rows. tanh: |x| < tanh_small uses x + x^3 P(x^2) (P: degree 5, 0.07
 * ulp), where 1 - 2 / (e^2|x| + 1) would cancel. */
namespace vexp {
constexpr float lo = -110.0f, hi = 100.0f, zero_below = -104.0f;
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
    /* one row (lda unused) through the same arithmetic as dot4[slot], for the rows mm_range_dots
     * has left over after its groups of 4: a row's result must not depend on the split.
     * NULL: dot4 on the row four times. */
    void (*dot1[SLOT_COUNT])(int64_t n, const char * x, size_t lda, const void * y, float * out);
    /* x (src0 row of the slot's K-quant type) with y quantized to Q8_K; NULL: the scalar path's */
    float (*dot_q8k[KSLOT_COUNT])(int64_t n, const void * x, const tsr_block_q8_K * y);
    /* x (src0 row of the slot's 32-element type) with yq8 blocks followed by their Q4 side
     * arrays (y_side; the AVX-512 kernels read them); NULL: the scalar path's */
    float (*dot_yq8[QSLOT_COUNT])(int64_t n, const void * x, const yq8 * y);
    /* 4 rows at once as dot4 for those types (y Q8_K blocks, or yq8 blocks with their side
     * arrays); each row's result equals the one-row kernel's bit for bit. NULL: one row at a time. */
    void (*dot4_q8k[KSLOT_COUNT])(int64_t n, const char * x, size_t lda, const void * y, float * out);
    /* dot_q8k[slot] / dot4_q8k[slot] read y_side_q8k's side blocks after the Q8_K row (the
     * AVX-512 VNNI kernels of Q2_K and Q3_K): mul_mat writes them only for such a table */
    bool q8k_side[KSLOT_COUNT];
    void (*dot4_yq8[QSLOT_COUNT])(int64_t n, const char * x, size_t lda, const void * y, float * out);
    /* F32 row -> Q8_K blocks (n a multiple of 256) */
    void (*quantize_q8k)(const float * x, tsr_block_q8_K * y, int64_t n);
    /* F32 row -> yq8 blocks (n a multiple of 32) */
    void (*quantize_y)(const float * x, yq8 * y, int64_t n);
    /* y[i] += a * x[i] (flash attention V accumulation) */
    void (*axpy_f32)(int64_t n, float a, const float * x, float * y);
    /* F16 row -> F32 (flash attention V rows) */
    void (*f16_to_f32)(const void * x, float * y, int64_t n);
    /* F32 row -> F16, f2h's bits (the KV cache's writes) */
    void (*f32_to_f16)(const float * x, void * y, int64_t n);
    /* packed GEMM per src0 type slot; NULL: dot products only */
    const gemm_impl * gemm[SLOT_COUNT];
    /* packed GEMM of the other quantized types against yq8 (their A repacked as Q8_0);
     * NULL: their dot products */
    const gemm_impl * gemm_x[XSLOT_COUNT];
    /* transcendental row kernels; NULL: the libm loops of the ops_*.inl files */
    const act_kernels * act;
};

/* The mat-vec kernels' software prefetch of one weight type's rows (x86): each step of a
 * row that reads S bytes prefetches max(1, S / matvec_pf_line_every) lines 64 bytes apart,
 * `ahead` bytes past the step (0: the lines the step reads, no prefetch in effect). Rows are
 * read once from DRAM on 4 streams per core (4 row groups with CPU_REPACK), and the hardware
 * prefetchers alone keep too few lines in flight. Per type because the best setting differs
 * with bytes per step and compute per byte. The distance is mutable, so that cpu_bench
 * --prefetch compares distances in alternation in one run (tsr_cpu_set_matvec_prefetch):
 * an index register, free; the lines per step are constants (a loop over a run-time count
 * cost Q4_K 10 % in cache). */
struct matvec_pf_table {
    uint32_t file[TSR_TYPE_COUNT], repacked[TSR_TYPE_COUNT];
    /* cpu_bench --prefetch, 2 threads from DRAM, 3 rounds alternating on the same weights
     * (this VM: ~28 GB/s read, rounds spread ~5 %): 1152 to 3072 bytes within noise of each
     * other for every type, 576 2-6 % lower, none (0) 15-22 % lower. CPU_REPACK Q4_K: one
     * record (1152) 0.96-0.97 x the read in two runs, two records 0.93-0.96. */
    constexpr matvec_pf_table() : file{}, repacked{} {
        for (uint32_t & a : file) a = 2048;
        /* F16 / BF16 (32 bytes a row a step, 4 rows a core): --prefetch 256 / 512 / 768 / 2048 in
         * two runs on this Zen 4 VM (read 36 GB/s): F16 0.96-0.97 / 0.95 / 0.92 / 0.91 x the read,
         * BF16 0.95-0.98 / 0.95-0.98 / 0.92-0.93 / 0.89-0.90; 0 (no lines ahead) 0.95-0.96. On a
         * Zen 5 VM reading 54-62 GB/s, --prefetch 512 / 768 / 1024 / 1536 in two runs: F16 0.91-0.93
         * / 1.00 / 1.01-1.02 / 1.04, BF16 0.99 / 0.99 / 1.02 / 1.04 (a faster memory wants more
         * bytes in flight); 1024 takes most of that and costs the slower one least. */
        file[TSR_TYPE_F16] = file[TSR_TYPE_BF16] = 1024;
        /* Q2_K / Q3_K (the AVX-512 file kernels, and their word layouts, which read this
         * setting: 2 lines a row and super-block): --prefetch 2048 / 1024 / 3072 on a 2-core
         * Zen 4 VM (read 32-33 GB/s), paired medians Q3_K 0.94 / 0.95 / 0.91 x the read, Q2_K
         * 1.04 / 1.00 / 0.95, the words 1.03 / 1.01 / 1.00 and 0.99 / 0.99 / 0.94: 2048 kept
         * (the constant they had). */
        /* CPU_REPACK IQ4_NL: after mul_mat's items grew (3 a thread), --prefetch 1024 / 2048
         * / 3072 in three runs: 0.94-0.95 / 0.96-0.97 / 0.96 x the read, and LLaMA 1.1B
         * generation 48.7-48.8 -> 48.7-50.0 tok/s (3 pairs); Q4_0 the same in cpu_bench (0.94-0.98 /
         * 0.96-0.98 / 0.98-0.99) but not faster in generation: kept at 1024. On huge pages
         * (the host allocator's) Q4_0 too: LLaMA 1.1B generation, builds alternating 6 times,
         * 1024 42.1-49.0 (mean 45.1) -> 2048 46.2-49.0 (mean 47.2) tok/s; 3072 45.5-50.2 */
        repacked[TSR_TYPE_Q4_0] = 2048;
        repacked[TSR_TYPE_IQ4_NL] = 2048;
        repacked[TSR_TYPE_Q4_1] = repacked[TSR_TYPE_Q5_0] = repacked[TSR_TYPE_Q5_1] = 2048;  /* as Q4_0 */
        /* Q4_K records, prefetched spread over each record (k4_record_prefetcher), cpu_bench
         * --prefetch 1152 / 1728 / 2304 / 2880: 0.85 / 0.96 / 0.96 / 0.95 x the read; 1728 also
         * ahead (by 1-2 %) in two runs before */
        repacked[TSR_TYPE_Q4_K] = 1728;
        repacked[TSR_TYPE_Q5_K] = 1408;  /* a record ahead (AVX2 only: not measured spread) */
        /* Q3_K / Q2_K records: two records ahead, a quarter record per four chunks (AVX-512
         * VNNI: 0.96 / 0.86 x the read against 0.93 / 0.84 one record ahead) */
        repacked[TSR_TYPE_Q3_K] = 2 * 880;
        repacked[TSR_TYPE_Q2_K] = 2 * 672;
    }
};
static matvec_pf_table g_matvec_pf_ahead;
/* Lines per step, measured as separate builds alternating (cpu_bench --types, 3 rounds): the
 * K-quants' every line about twice (Q4_K 4 lines a 144-byte step, Q5_K 5 a 176, Q6_K 6 a
 * 210) beat every line once or twice (3, 3, 4) by 3-10 % best of rounds, Q6_K 0.99 x the
 * read against 0.94, no cost in cache; a line per 64 bytes lost Q6_K 6 %. (CPU_REPACK Q4_K /
 * Q5_K records: k4_record_prefetcher's two lines a step instead. The AVX-512 file-layout
 * Q4_K / Q5_K kernels step half a super-block, 2 lines each: Q5_K 4 a super-block.) */
static constexpr size_t matvec_pf_line_every(enum tsr_type t, bool repacked) {
    if (repacked) return 48;  /* Q4_0 / IQ4_NL: a 144-byte record's 3; Q3_K / Q2_K records: a quarter's */
    switch (t) {
        case TSR_TYPE_Q4_K: case TSR_TYPE_Q5_K: case TSR_TYPE_Q6_K: return 32;
        /* Q5_1's 96-byte groups: 2 lines a group (one left a third of the lines to the
         * hardware). After its kernel took dword permutes, builds alternating 3 times: 0.95,
         * 0.95, 0.95 x the read against 0.92, 0.95, 0.93; with the slower kernel no gain. */
        case TSR_TYPE_Q5_1: return 48;
        /* Q8_0's 68-byte steps (2 blocks; the AVX-512 kernel's steps were 136 bytes, 4 lines,
         * when this was measured): 2 lines a step, every line about twice, as the K-quants;
         * 2 lines a 136-byte step left every 17th line to the hardware. Builds alternating 6 times on 2 MiB
         * pages: 34.5-35.9 GB/s (0.92-0.95 x the read) against 32.6-33.8 (0.91-0.93); LLaMA
         * 1.1B Q8_0 generation 27.4-27.9 against 26.7-27.8 tok/s (3 alternations). The same
         * for Q4_0 / IQ4_NL, and 32 or 48 for Q5_0, was within noise. The AVX2 kernel's
         * 68-byte steps (2 lines, was 1): 33.6-34.3 against 31.5-33.1 GB/s (3 alternations). */
        case TSR_TYPE_Q8_0: return 32;
        default: return 64;  /* one per whole 64 bytes */
    }
}

/* The kernel table entries of the K-quant and 32-element types, one row and four, over an
 * ISA's R-row kernels M::q8k<KS, R> and M::q32<T, R> (a row's result the same for every R). */
template <class M> struct row_quant_dots {
    template <class Y> using rows_fn = void (*)(int64_t n, const char * x, size_t lda, const Y * y, float * out);
    template <class Y> static float one_row(rows_fn<Y> rows, int64_t n, const void * x, const Y * y) {
        float o;
        rows(n, (const char *)x, 0, y, &o);
        return o;
    }
    template <int KS> static float dot_q8k(int64_t n, const void * x, const tsr_block_q8_K * y) { return one_row(M::template q8k<KS, 1>, n, x, y); }
    template <tsr_type T> static float dot_yq8(int64_t n, const void * x, const yq8 * y) { return one_row(M::template q32<T, 1>, n, x, y); }
    template <int KS> static void dot4_q8k(int64_t n, const char * x, size_t lda, const void * y, float * out) {
        M::template q8k<KS, 4>(n, x, lda, (const tsr_block_q8_K *)y, out);
    }
    template <tsr_type T> static void dot4_yq8(int64_t n, const char * x, size_t lda, const void * y, float * out) {
        M::template q32<T, 4>(n, x, lda, (const yq8 *)y, out);
    }
    static constexpr void fill(kernels & k) {
        k.dot_q8k[KSLOT_Q2_K] = dot_q8k<KSLOT_Q2_K>;
        k.dot_q8k[KSLOT_Q3_K] = dot_q8k<KSLOT_Q3_K>;
        k.dot_q8k[KSLOT_Q4_K] = dot_q8k<KSLOT_Q4_K>;
        k.dot_q8k[KSLOT_Q5_K] = dot_q8k<KSLOT_Q5_K>;
        k.dot_q8k[KSLOT_Q6_K] = dot_q8k<KSLOT_Q6_K>;
        k.dot4_q8k[KSLOT_Q2_K] = dot4_q8k<KSLOT_Q2_K>;
        k.dot4_q8k[KSLOT_Q3_K] = dot4_q8k<KSLOT_Q3_K>;
        k.dot4_q8k[KSLOT_Q4_K] = dot4_q8k<KSLOT_Q4_K>;
        k.dot4_q8k[KSLOT_Q5_K] = dot4_q8k<KSLOT_Q5_K>;
        k.dot4_q8k[KSLOT_Q6_K] = dot4_q8k<KSLOT_Q6_K>;
        k.dot_yq8[QSLOT_Q4_1] = dot_yq8<TSR_TYPE_Q4_1>;
        k.dot_yq8[QSLOT_Q5_0] = dot_yq8<TSR_TYPE_Q5_0>;
        k.dot_yq8[QSLOT_Q5_1] = dot_yq8<TSR_TYPE_Q5_1>;
        k.dot_yq8[QSLOT_IQ4_NL] = dot_yq8<TSR_TYPE_IQ4_NL>;
        k.dot4_yq8[QSLOT_Q4_1] = dot4_yq8<TSR_TYPE_Q4_1>;
        k.dot4_yq8[QSLOT_Q5_0] = dot4_yq8<TSR_TYPE_Q5_0>;
        k.dot4_yq8[QSLOT_Q5_1] = dot4_yq8<TSR_TYPE_Q5_1>;
        k.dot4_yq8[QSLOT_IQ4_NL] = dot4_yq8<TSR_TYPE_IQ4_NL>;
    }
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

/* The value the core's Q8_K quantizer takes its scale from (the first one of largest
 * magnitude, NaN skipped), from a super-block's max hi and min lo as SIMD code finds them:
 * only when +m and -m both occur does their order decide, and a scan settles it. */
static inline float q8k_signed_max(float hi, float lo, const float * x) {
    if (hi > -lo) return hi;
    if (-lo > hi) return lo;
    return hi == 0.0f ? 0.0f : tsr_impl::signed_amax(x, TSR_QK_K);
}

/* Activations quantized for integer dot products (yq8 blocks of 32, Q8_K super-blocks of
 * 256) give every block holding a NaN or an infinity the scale NaN: quantizing counts those
 * as 0, so the dots would drop them, where float arithmetic (PyTorch, the float paths, the
 * GPU backends) gives NaN (or +-inf). Those values are the ones with an exponent of all
 * ones: an OR over the bits vectorizes, where a float probe (sum of x * 0) is one dependent
 * add per element (3.5 us per 4096-element row). One pass after the ISA's quantizer, so
 * every path marks the same blocks. */
template <int QK, class Block> static inline void mark_nonfinite_blocks(const float * x, Block * y, int64_t n) {
    for (int64_t b = 0; b < n / QK; ++b) {
        uint32_t nonfinite = 0;
        for (int j = 0; j < QK; ++j) {
            uint32_t u;
            std::memcpy(&u, x + b * QK + j, 4);
            nonfinite |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
        }
        if (nonfinite) y[b].d = NAN;
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
