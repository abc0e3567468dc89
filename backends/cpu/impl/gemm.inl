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
        case TSR_CPU_ISA_AMX: {
            static const kernels k = make_kernels_amx();
            return &k;
        }
        case TSR_CPU_ISA_AVX2: {
            static const kernels k = make_kernels_avx2();
            return &k;
        }
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
    bool a_r8 = false;          /* A in CPU_REPACK's interleaved groups of 8 rows (repack_r8.inl) */
    bool a_words = false;       /* A: Q2_K / Q3_K in CPU_REPACK's word layout (repack_words.inl) */
};

static size_t gemm_thread_bytes(const gemm_impl * g, int64_t N) {
    if (!g) return 0;
    const int64_t nc = std::min<int64_t>(N, GEMM_NC);
    const size_t kb = (size_t)g->kc / 32;
    const size_t bp = (size_t)((nc + g->nr - 1) / g->nr) * g->b_bytes_32k * kb;
    const size_t ap = (size_t)((g->mc + g->mr - 1) / g->mr) * g->a_bytes_32k * kb;
    return align_up(bp, 64) + align_up(ap, 64);
}

/* The packed GEMM for weights of type t on this ISA; NULL: dot products only. */
static const gemm_impl * gemm_for(const kernels * K, enum tsr_type t) {
    const int slot = type_slot(t);
    if (slot >= 0) return K->gemm[slot];
    const int xs = requant_slot(t);
    return xs >= 0 ? K->gemm_x[xs] : nullptr;
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

using dot4_fn = void (*)(int64_t n, const char * x, size_t lda, const void * y, float * out);

/* The ISA's 4-row matrix-vector kernel for weights of type t; NULL: one row at a time. */
static dot4_fn dot4_for(const kernels * K, enum tsr_type t) {
    const int slot = type_slot(t), ks = q8k_slot(t), qs = yq8_slot(t);
    return slot >= 0 ? K->dot4[slot] : ks >= 0 ? K->dot4_q8k[ks] : qs >= 0 ? K->dot4_yq8[qs] : nullptr;
}

/* Row x against column y through the one-row build of the 4-row kernel dot4 (the same
 * arithmetic): dot1, or the K-quant / 32-element type's one-row kernel, which equals each
 * row of its dot4 by the table's rule; an ISA with neither runs dot4 on the row four times. */
static float dot_one_row(const kernels * K, enum tsr_type t, dot4_fn dot4, int64_t n, const char * x, const char * y) {
    const int slot = type_slot(t), ks = q8k_slot(t), qs = yq8_slot(t);
    float o[4];
    if (slot >= 0 && K->dot1[slot]) K->dot1[slot](n, x, 0, y, o);
    else if (ks >= 0 && K->dot_q8k[ks]) o[0] = K->dot_q8k[ks](n, x, (const tsr_block_q8_K *)y);
    else if (qs >= 0 && K->dot_yq8[qs]) o[0] = K->dot_yq8[qs](n, x, (const yq8 *)y);
    else dot4(n, x, 0, y, o);
    return o[0];
}

/* Dot products. With a 4-row kernel, the range is cut into 4 equal parts walked side by
 * side: each part is one long sequential stream (rows are contiguous), and four of them
 * keep enough DRAM reads in flight for one core, where 4 adjacent rows would restart the
 * hardware prefetcher at every row. The rows left over go through the one-row build of the
 * same kernel, so a row's result never depends on the split. */
enum { MM_DOT_STREAMS = 4 };  /* the 4 rows of a dot4 kernel, a quarter of the range apart */
template <class ONE_ROW>
static void mm_dot_streams(const mm_args & a, int64_t m0, int64_t m1, dot4_fn dot4, ONE_ROW one_row) {
    const int64_t q = dot4 ? (m1 - m0) / MM_DOT_STREAMS : 0;
    /* columns innermost: the 4 rows stay in cache while every column of src1 passes */
    for (int64_t i = 0; i < q; ++i)
        for (int64_t n = 0; n < a.N; ++n) {
            float o[4];
            dot4(a.K, a.A + (size_t)(m0 + i) * a.lda, (size_t)q * a.lda, a.B + (size_t)n * a.ldb, o);
            float * c = a.C + (size_t)n * a.ldc;
            for (int r = 0; r < 4; ++r) c[m0 + i + r * q] = o[r];
        }
    for (int64_t m = m0 + 4 * q; m < m1; ++m) {
        const char * x = a.A + (size_t)m * a.lda;
        for (int64_t n = 0; n < a.N; ++n) a.C[(size_t)n * a.ldc + m] = one_row(x, a.B + (size_t)n * a.ldb);
    }
}

static void mm_range_dots(const kernels * K, const mm_args & a, int64_t m0, int64_t m1) {
    const dot4_fn dot4 = dot4_for(K, a.ta);
    if (!dot4 && q8k_slot(a.ta) >= 0) return mm_range_q8k(K, a, m0, m1);
    mm_dot_streams(a, m0, m1, dot4, [&](const char * x, const char * y) {
        return dot4 ? dot_one_row(K, a.ta, dot4, a.K, x, y) : dot_any(K, a.ta, a.K, x, y);
    });
}

/* Q2_K / Q3_K in the word layout (repack_words.inl) against word-ordered Q8_K columns: the
 * same streams with the layout's kernels. */
static void mm_range_words(const mm_args & a, int64_t m0, int64_t m1) {
    const words_kernels k = words_kernels_for_isa(a.ta);
    mm_dot_streams(a, m0, m1, k.four, [&](const char * x, const char * y) {
        float o;
        k.one(a.K, x, 0, y, &o);
        return o;
    });
}

static void mm_range(const kernels * K, const mm_args & a, int64_t m0, int64_t m1, uint8_t * tws) {
    if (m0 >= m1) return;
    const gemm_impl * g = a.g;
    if (!g && a.a_words) return mm_range_words(a, m0, m1);
    if (!g && a.a_r8) return r8_gemv(a.ta, r8_gemv_args{(const uint8_t *)a.A, a.lda, a.K, a.B, a.ldb, a.N, a.C, a.ldc}, m0, m1);
    if (!g) return mm_range_dots(K, a, m0, m1);
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
                for (int64_t ir = 0; ir < mc; ir += g->mr) {
                    const int rows = (int)std::min<int64_t>(g->mr, mc - ir);
                    uint8_t * ap = apack + (size_t)(ir / g->mr) * apanel;
                    if (a.a_words) words_pack_a(g, a.ta, (const uint8_t *)a.A, a.lda, ic + ir, rows, a.K, pc, kcp, ap);
                    else if (a.a_r8) r8_pack_a(g, a.ta, (const uint8_t *)a.A, a.lda, ic + ir, rows, a.K, pc, kcp, ap);
                    else g->pack_a(a.A + (size_t)(ic + ir) * a.lda, a.lda, rows, a.K, pc, kcp, ap);
                    if (g->finish_a) g->finish_a(ap, kcp);
                }
                for (int64_t jr = 0; jr < nc; jr += g->nr) {
                    const int nrv = (int)std::min<int64_t>(g->nr, nc - jr);
                    const uint8_t * bp = bpack + (size_t)(jr / g->nr) * bpanel;
                    for (int64_t ir = 0; ir < mc; ir += g->mr) {
                        const int mrv = (int)std::min<int64_t>(g->mr, mc - ir);
                        const uint8_t * ap = apack + (size_t)(ir / g->mr) * apanel;
                        g->kernel(kcp, ap, bp,
                                  a.C + (size_t)(jc + jr) * a.ldc + (ic + ir), a.ldc, mrv, nrv, pc > 0);
                    }
                }
            }
        }
    }
    if (g->done) g->done();
}

/* Thread ith's share of a's rows, in whole mr-row panels of the GEMM (static split: the
 * convolutions call it between barriers). */
static void mm_range_split(const cparams & p, const mm_args & a, uint8_t * tws) {
    const int64_t mr = a.g ? a.g->mr : 1;
    int64_t csz = (a.M + p.nth - 1) / p.nth;
    csz = (csz + mr - 1) / mr * mr;
    mm_range(p.K, a, std::min<int64_t>(a.M, csz * p.ith), std::min<int64_t>(a.M, csz * (p.ith + 1)), tws);
}

/* true when t's bytes are in the 4-bit interleaved layout of a CPU_REPACK buffer (repack.inl),
 * or (is_words_repacked) in Q2_K's or Q3_K's word layout there. */
static bool is_r8_repacked(const tsr_tensor * t);
static bool is_words_repacked(const tsr_tensor * t);

/* ---- mul_mat ------------------------------------------------------------------------------ */

struct mm_plan {
    enum tsr_type ta;         /* A type as computed */
    bool x_conv;              /* src0 rows not contiguous: convert to dense F32 */
    bool y_q8;                /* src1 quantized to yq8 */
    bool y_q8k;               /* src1 quantized to Q8_K (K-quant weights) */
    bool a_words;             /* src0 read as it is in a CPU_REPACK word layout (repack_words.inl) */
    bool a_r8;                /* src0 in CPU_REPACK's interleaved groups of 8 rows (repack_r8.inl) */
    bool y_q8k_words;         /* and its qs in the word order (src0 in a word layout, mat-vec) */
    bool y_q8k_side;          /* or followed by the side blocks the file layouts' dot kernels read (y_side_q8k) */
    bool y_conv;              /* src1 converted to dense F32 */
    bool y_private;           /* few src1 rows: every thread converts them into its own
                               * scratch, so no barrier separates the phases */
    const gemm_impl * g;
    size_t x_bytes, y_bytes, y_row;
    size_t y_shared;          /* y_bytes in the shared area (0 when y_private) */
    size_t thread_bytes;
    bool y_prepared() const { return y_q8 || y_q8k || y_conv; }
};

/* How src1 rows are quantized for pl.ta's weights (in a word layout: pl.a_words) read by g,
 * and their bytes: for a GEMM what it says it reads (yq8 blocks, or Q8_K); for the dot-product
 * kernels (g NULL) Q8_K for K-quants (its qs in the word order for a word layout's kernels, or
 * with the side blocks where K's file-layout kernels of the type read them), yq8 with the side
 * arrays only they read for the 32-weight types. Neither (float weights): y_row left to the
 * caller. */
static void mm_set_y_format(mm_plan & pl, const kernels * K, const gemm_impl * g, int64_t Kd) {
    pl.y_q8k = g ? g->b_is_q8k : q8k_slot(pl.ta) >= 0;
    pl.y_q8 = tsr_is_quantized(pl.ta) && !pl.y_q8k;
    const bool q8k_dots = pl.y_q8k && !g;
    pl.y_q8k_words = q8k_dots && pl.a_words;
    pl.y_q8k_side = q8k_dots && !pl.a_words && K->q8k_side[q8k_slot(pl.ta)];
    if (pl.y_q8) pl.y_row = g ? (size_t)(Kd / 32) * sizeof(yq8) : yq8_row_bytes(Kd);
    else if (pl.y_q8k) pl.y_row = pl.y_q8k_side ? q8k_row_bytes(Kd, pl.ta) : (size_t)(Kd / TSR_QK_K) * sizeof(tsr_block_q8_K);
}

/* Columns of src1 (mul_mat_id: pairs of an expert) from which the GEMM beats the dot-product
 * kernels over the same weights: the GEMM packs every A panel it uses (the K-quants
 * re-encoded to int8 panels, Q2_K dequantized and requantized to Q8_0), a cost its columns
 * share, where the dot kernels read the weights as they are. Measured on a 2-core Zen 5
 * (cpu_bench's mul_mat at M = K = 4096 and its Mixtral-shaped mul_mat_id prompt, GEMM
 * against dots, 8 to 64 columns): Q8_0 / Q4_0 / IQ4_NL / Q4_1 / Q5_0 / Q5_1 0.7-1.4 x at 8
 * columns, 1.0-2.6 x from 16; Q4_K / Q5_K / Q6_K 0.65-0.9 x at 8, 1.0-1.6 x at 12, 0.85-1.5 x
 * at 16; Q3_K 0.55-0.75 x at 8, 0.75-0.95 x at 12 and 16, 1.1-1.8 x from 24; Q2_K 0.15-0.5 x
 * up to 32, at 64 1.3 x in the file layout but 0.8 x against the word layout's dots (0.95 x
 * at 128). The AVX2 path's kernels on the same machine agree: at 12 columns Q4_K / Q5_K 1.2-1.3
 * x, Q6_K 0.9 x, Q3_K 1.0 x, Q2_K 0.4 x; at 24 all but Q2_K 1.1-2.3 x; Q2_K 1.3 x at 64.
 * Since the x86 packers decode each super-block's header once (pack_x86.inl), measured again
 * at M = K = 4096 (3 runs each, alternating): Q4_K 0.75-0.8 x at 8, 1.0 x at 10 (CPU_REPACK's
 * records too), 1.2 x at 12; Q5_K 0.9 x at 8, 1.15 x at 10; Q6_K 0.95 x at 8, 1.07 x at 10;
 * Q3_K 1.04 x at 12, 1.0-1.2 x at 16 (its word layout 1.15-1.35 x), 1.35 x at 20: Q4_K..Q6_K
 * from 10 (was 12), Q3_K from 16 (was 24). The portable packers (NEON's, gemm_kquant.inl)
 * still decode per block of 32 and were never timed on an ARM core: that path keeps the
 * earlier 12 and 24. */
static int64_t gemm_min_cols(enum tsr_type t, bool words) {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    constexpr int64_t q3_k = 16, q4_q6_k = 10;
#else
    constexpr int64_t q3_k = 24, q4_q6_k = 12;
#endif
    switch (t) {
        case TSR_TYPE_Q2_K: return words ? 128 : 64;
        case TSR_TYPE_Q3_K: return q3_k;
        case TSR_TYPE_Q4_K: case TSR_TYPE_Q5_K: case TSR_TYPE_Q6_K: return q4_q6_k;
        default: return GEMM_MIN_N;
    }
}

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
    pl.a_words = !pl.x_conv && is_words_repacked(s0);
    pl.a_r8 = !pl.x_conv && !pl.a_words && is_r8_repacked(s0);
    pl.g = s1->ne[1] >= gemm_min_cols(pl.ta, pl.a_words) ? gemm_for(K, pl.ta) : nullptr;
    mm_set_y_format(pl, K, pl.g, Kd);
    pl.y_conv = !pl.y_q8 && !pl.y_q8k && (s1->type != TSR_TYPE_F32 || s1->nb[0] != 4);
    if (pl.y_conv) pl.y_row = (size_t)Kd * 4;
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
        if (pl.y_q8k_words) q8k_qs_to_words((tsr_block_q8_K *)d, Kd / TSR_QK_K);
        else if (pl.y_q8k_side) y_side_q8k((tsr_block_q8_K *)d, Kd / TSR_QK_K, pl.ta);
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

/* op_mul_mat's dynamic items per thread. run_bench, LLaMA 1.1B Q4_0 on 2 threads, builds
 * alternating, 3 rounds: 8 (before) prompt 505-510 / generation 53.3-54.5 tok/s, 4: 521-525
 * / 53.8-54.6, 3: 524-527 / 54.5-55.9, 2: 524-527 / 53.2-53.8; 16: generation 49.5-51.0.
 * cpu_bench's mat-vec from DRAM (x its weights' read, two alternating runs): 8 -> 3 items,
 * Q8_0 0.94-0.95 -> 0.99, Q4_0 0.94-0.96 -> 1.02, IQ4_NL 0.94-0.95 -> 1.00-1.03, Q2_K
 * 0.87-0.88 -> 0.95-0.96, Q3_K 0.91 -> 0.94; 1 or 2 items no better than 3. */
static constexpr int64_t mm_items_per_thread = 3;

/* The rows a mat-vec item is a multiple of: 16, or for CPU_REPACK's interleaved groups of 8
 * rows as many groups as r8_gemv walks side by side at most, so that every group of an item
 * is in one of its streams (4096 rows in 688-row items, 86 groups, had left 2 to be read
 * alone) and, 4 streams a call (AVX-512), they start where matvec_first_streams aims (a
 * quarter of the item; AVX2's 2 streams meet 2 of its 4).
 * cpu_bench's Q4_K CPU_REPACK mat-vec from DRAM, builds alternating 5 times: 0.93-1.18 x
 * the read (mean 1.01) against 0.89-1.16 (1.03): within the host's noise. */
static int64_t matvec_row_unit(bool a_r8) { return a_r8 ? (int64_t)R8 * R8_MAX_STREAMS : 16; }

/* op_mul_mat's items of one batch: mchunks chunks of csize rows (a multiple of mr). */
struct mm_items {
    int64_t mchunks, csize;
};
static mm_items mm_split(const mm_plan & pl, int64_t M, int64_t nbatch, int nth) {
    const int64_t mr = pl.g ? pl.g->mr : matvec_row_unit(pl.a_r8);
    const int64_t min_rows = pl.g ? std::max<int64_t>(512, mr) : 64;  /* GEMM chunks repack B: keep them large */
    /* about mm_items_per_thread items a thread: each mat-vec item starts new DRAM streams whose
     * prefetch ramps up again, and each GEMM item packs its B panels again */
    int64_t mchunks = nth == 1 ? 1 : std::max<int64_t>(1, (mm_items_per_thread * nth + nbatch - 1) / nbatch);
    /* at most M/min_rows chunks, but at least enough for every thread when M allows */
    const int64_t floor_chunks = std::min<int64_t>((nth + nbatch - 1) / nbatch, std::max<int64_t>(1, M / mr));
    mchunks = std::max<int64_t>(floor_chunks, std::min<int64_t>(mchunks, M / min_rows));
    /* one matrix cut short by M / min_rows: a whole number of items a thread (LLaMA's 5632-row
     * GEMMs were 11 items on 2 threads) */
    if (nbatch == 1 && mchunks > nth) mchunks -= mchunks % nth;
    int64_t csize = (M + mchunks - 1) / mchunks;
    csize = (csize + mr - 1) / mr * mr;
    return {(M + csize - 1) / csize, csize};
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
    const mm_items items = mm_split(pl, M, nbatch, p.nth);
    const int64_t mchunks = items.mchunks, csize = items.csize;
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
        a.a_r8 = pl.a_r8;
        a.a_words = pl.a_words;
        mm_range(p.K, a, mc * csize, std::min<int64_t>(M, (mc + 1) * csize), tw);
    }
}

/* Where thread ith starts reading node t when it takes item ith as op_mul_mat cuts it (an
 * activation column against weights used in place, one batch): the MM_DOT_STREAMS streams
 * mm_range_dots / r8_gemv walk side by side (r8 groups of 8 rows are contiguous, so the same
 * bytes within a group's rounding). false: another kind of node, or no item for ith. */
static bool matvec_first_streams(const tsr_tensor * t, const kernels * K, int ith, int nth, const char * start[MM_DOT_STREAMS], size_t & stream_bytes) {
    if (t->op != TSR_OP_MUL_MAT) return false;
    const tsr_tensor * s0 = t->src[0], * s1 = t->src[1];
    if (!s0->data || tsr_nrows(s1) != 1 || s0->ne[2] != 1 || s0->ne[3] != 1) return false;
    const mm_plan pl = mm_make_plan(t, K, nth);
    if (pl.x_conv || pl.g) return false;
    const int64_t M = s0->ne[1];
    const mm_items items = mm_split(pl, M, 1, nth);
    if (ith >= items.mchunks) return false;
    const int64_t m0 = ith * items.csize, q = (std::min<int64_t>(M, m0 + items.csize) - m0) / MM_DOT_STREAMS;
    if (q <= 0) return false;
    for (int s = 0; s < MM_DOT_STREAMS; ++s) start[s] = (const char *)s0->data + (size_t)(m0 + s * q) * s0->nb[1];
    stream_bytes = (size_t)q * s0->nb[1];
    return true;
}

} // namespace tcpu
} // namespace
