/*
 * kernels_amx.inl - the AMX path (TSR_CPU_ISA_AMX): the AVX-512 path's kernel table with its
 * int8 GEMMs (prompt-sized mul_mat of every quantized type) on AMX tiles, and the GEMM of
 * BF16 weights on AMX-BF16.
 *
 * A tile multiply (tdpbssd) is a 16 x 16 int32 tile += 16 x K int8 by K x 16 int8, K up to
 * 64; the quantized types scale every 32 k, so each product runs at K = 32 and its integer
 * tile is stored and scaled into float accumulators with AVX-512, as the VNNI kernel scales
 * its integer registers. The arithmetic after the integer sums is the VNNI kernel's,
 * operation for operation, and the sums are exact in both: the two paths give the same bits
 * (the tests hold them to it). Q6_K is the exception: its scales per 16 are integers, folded
 * into the weights, and its GEMM runs K = 64 products over whole super-blocks against Q8_K
 * activations (its section below).
 *
 * Operands are the existing panels (pack.inl), which happen to be the tile layouts:
 *  - A (weights, 32 rows per panel): per 32 k, 8 quads x 32 rows x 4 bytes is the K x N
 *    operand's layout for two tiles of 16 rows (8 rows of 64 bytes, stride 128), followed by
 *    the rows' scales (min panels: and mins; half panels: d and the int16 scales per 16).
 *    Signed levels (FLIP 0; Q4_0's nibbles minus 8), so no offset and no bias; min panels
 *    keep q unsigned (tdpbsud).
 *  - B (activations, 16 columns per panel): the signed rows panels, 16 rows x 32 bytes in k
 *    order per 32 k: the M x K operand, stride 32, then 16 scales (min panels: d * sum(q)).
 * A kernel call computes a 32-row x 16-column tile as two passes of 16 rows, each over all
 * of kc with 16 float accumulators (two passes re-read B from L1, where one pass over 32
 * rows would need 32 accumulators and no room for the rest).
 */
#if defined(TSR_CPU_HAVE_X86_KERNELS)
TSR_SIMD_WARNINGS_OFF
namespace {
namespace tcpu {

#define TSR_TARGET_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c,amx-tile,amx-int8")))
#define TSR_TARGET_AMX_BF16 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512bf16,avx2,fma,f16c,amx-tile,amx-int8,amx-bf16")))

/* Tile loads and stores that tell the compiler which memory they touch. GCC's _tile_stored
 * clobbers all memory, which keeps every accumulator array in memory (a load and a store
 * around each FMA), and its _tile_loadd names no memory at all; clang's are builtins it
 * understands. SPAN: the bytes a load reads (rows x stride, less the last row's gap). */
#if defined(__clang__)
#define TSR_TILE_LOADD(t, p, stride, span) _tile_loadd(t, p, stride)
#define TSR_TILE_STORED(t, p) _tile_stored(t, p, 64)
#else
#define TSR_TILE_LOADD(t, p, stride, span)                                                               \
    __asm__ __volatile__("{tileloadd\t(%1,%2,1), %%tmm" #t "|tileloadd\t%%tmm" #t ", [%1+%2*1]}"        \
                         : : "m"(*(const uint8_t(*)[span])(const void *)(p)), "r"((const void *)(p)), "r"((long)(stride)))
#define TSR_TILE_STORED(t, p)                                                                            \
    __asm__ __volatile__("{tilestored\t%%tmm" #t ", (%1,%2,1)|tilestored\t[%1+%2*1], %%tmm" #t "}"      \
                         : "=m"(*(uint8_t(*)[1024])(void *)(p)) : "r"((void *)(p)), "r"((long)64))
#endif

/* Palette 1's tile configuration: bytes per row and rows of each of the 8 tile registers. */
struct alignas(64) amx_tilecfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};
static_assert(sizeof(amx_tilecfg) == 64, "ldtilecfg reads 64 bytes");

/* The kernels' tiles for products of K bytes (int8: 32, or 16 for half panels; BF16: 64):
 * tmm0-1 activations (16 x K bytes), tmm2-3 weights (K/4 rows of 16 x 4 bytes: int8 quads,
 * bf16 pairs), tmm4-7 sums (16 x 16 int32 or float). */
static constexpr amx_tilecfg amx_config(int k_bytes) {
    amx_tilecfg c{};
    c.palette = 1;
    for (int t = 0; t < 2; ++t) {
        c.colsb[t] = (uint16_t)k_bytes;   c.rows[t] = 16;
        c.colsb[2 + t] = 64;              c.rows[2 + t] = (uint8_t)(k_bytes / 4);
    }
    for (int t = 4; t < 8; ++t) { c.colsb[t] = 64; c.rows[t] = 16; }
    return c;
}

/* The 16 columns' accumulators of one 16-row pass (rows `valid` of them, at c) into C. The
 * copy lets the loop index them by a variable: the accumulator arrays stay in registers only
 * while nothing does (indexed in place, GCC kept them in memory, a load and a store around
 * every FMA). */
TSR_TARGET_AMX static inline void amx_store_pass(const __m512 f0[8], const __m512 f1[8], float * c, size_t ldc, int valid, int nr_valid,
                                                 bool accumulate) {
    const __m512 r[16] = {f0[0], f0[1], f0[2], f0[3], f0[4], f0[5], f0[6], f0[7], f1[0], f1[1], f1[2], f1[3], f1[4], f1[5], f1[6], f1[7]};
    for (int j = 0; j < nr_valid; ++j) store_row16(c + (size_t)j * ldc, r[j], valid, accumulate);
}

/* One 32-k block's int32 tile (16 columns x 16 rows, stored at s) scaled into 8 of the float
 * accumulators (columns j0..j0+8): f[j] += cvt(s[j]) * (da * db[j]), less the min's
 * correction mn * dsum[j]. */
template <bool MINS>
TSR_TARGET_AMX static TSR_ALWAYS_INLINE void amx_scale_8(__m512 f[8], int j0, const int32_t * s, __m512 da, const float * db, __m512 mn,
                                                         const float * dsum) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
        const __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512((const void *)(s + 16 * (j0 + j))));
        f[j] = _mm512_fmadd_ps(v, _mm512_mul_ps(da, _mm512_set1_ps(db[j0 + j])), f[j]);
        if constexpr (MINS) f[j] = _mm512_fnmadd_ps(mn, _mm512_set1_ps(dsum[j0 + j]), f[j]);
    }
}

/* Block sums s of one 32-k block into both halves of the accumulators, with the scales of
 * its A block ab (16 rows' scales at 32 * 32, mins at 32 * 36) and B block bb (16 columns'
 * scales at 16 * 32, d * sum(q) at 16 * 36). */
template <bool MINS>
TSR_TARGET_AMX static TSR_ALWAYS_INLINE void amx_scale_block(__m512 f0[8], __m512 f1[8], const int32_t * s, const uint8_t * ab,
                                                             const uint8_t * bb) {
    const __m512 da = _mm512_loadu_ps(ab + 32 * 32), mn = MINS ? _mm512_loadu_ps(ab + 32 * 36) : _mm512_setzero_ps();
    const float * db = (const float *)(bb + 16 * 32), * dsum = (const float *)(bb + 16 * 36);
    amx_scale_8<MINS>(f0, 0, s, da, db, mn, dsum);
    amx_scale_8<MINS>(f1, 8, s, da, db, mn, dsum);
}

/* Int8 panels (KIND PANEL_Q8: signed levels, tdpbssd) and min panels (PANEL_MIN: q unsigned,
 * tdpbsud, then the min's correction): 32 x 16 tile. Block b's tile multiply goes to tiles
 * 0/2/4 or 1/3/5 by parity and its sums to buffer b % 4; its scaling runs two blocks later:
 * a load right after tilestored waits for the store to leave the core (no forwarding from
 * a tile store), which stalled every block when scaling followed its own product. */
template <int KIND>
TSR_TARGET_AMX static void gemm_i8_kernel_amx(int kc, const void * ap, const void * bp, float * c, size_t ldc, int mr_valid, int nr_valid,
                                              bool accumulate) {
    constexpr bool MINS = KIND == PANEL_MIN;
    constexpr size_t a_block = 32 * (MINS ? 40 : 36), b_block = 16 * (MINS ? 40 : 36);
    static constexpr amx_tilecfg cfg = amx_config(32);
    _tile_loadconfig(&cfg);
    alignas(64) int32_t sums[4][256];
    const int nb = kc / 32;
    for (int h = 0; h < 2 && 16 * h < mr_valid; ++h) {
        __m512 f0[8], f1[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) f0[j] = f1[j] = _mm512_setzero_ps();
        const uint8_t * a = (const uint8_t *)ap + 64 * h;  /* rows 16h.. of each block's quads and floats */
        const uint8_t * b = (const uint8_t *)bp;
#define TSR_AMX_LOAD(X, W, C, blk)                                                         \
        TSR_TILE_LOADD(X, b + (size_t)(blk) * b_block, 32, 16 * 32);                      \
        TSR_TILE_LOADD(W, a + (size_t)(blk) * a_block, 128, 7 * 128 + 64);                \
        _tile_zero(C);
#define TSR_AMX_DP(X, W, C) if constexpr (MINS) _tile_dpbsud(C, X, W); else _tile_dpbssd(C, X, W);
        /* both products before both stores: a store waits for its product, and the second
         * product then runs meanwhile (6 % in a micro-benchmark) */
        for (int blk = 0; blk < nb + 2; blk += 2) {
            const bool even = blk < nb, odd = blk + 1 < nb;
            if (even) { TSR_AMX_LOAD(0, 2, 4, blk) }
            if (odd) { TSR_AMX_LOAD(1, 3, 5, blk + 1) }
            if (even) { TSR_AMX_DP(0, 2, 4) }
            if (odd) { TSR_AMX_DP(1, 3, 5) }
            if (even) TSR_TILE_STORED(4, sums[blk & 3]);
            if (odd) TSR_TILE_STORED(5, sums[(blk + 1) & 3]);
            if (blk >= 2) amx_scale_block<MINS>(f0, f1, sums[(blk - 2) & 3], a + (size_t)(blk - 2) * a_block, b + (size_t)(blk - 2) * b_block);
            if (blk >= 1 && blk - 1 < nb) amx_scale_block<MINS>(f0, f1, sums[(blk - 1) & 3], a + (size_t)(blk - 1) * a_block, b + (size_t)(blk - 1) * b_block);
        }
#undef TSR_AMX_LOAD
#undef TSR_AMX_DP
        amx_store_pass(f0, f1, c + 16 * h, ldc, mr_valid - 16 * h, nr_valid, accumulate);
    }
}

/* ---- Q6_K: the scale per 16 inside the weights, Q8_K activations, K = 64 products -------
 * Scaled per 32 k, a product leaves half of the tile unit idle (K = 32 of 64) and every block
 * needs a tile store and a float scaling, which on this hardware add to the product instead
 * of overlapping it (Q6_K, with a scale per 16, needed two of each per block). Q6_K's weight
 * is d * v with v = sc * (q - 32) an integer in [-4064, 4096]: 13 bits, past int8, so A holds
 * v as two int8 planes, v = 128 * hi + lo (hi = v >> 7 in [-32, 32], lo = v & 127). Against
 * activations quantized per 256 (Q8_K, as ggml's Q6_K dot product takes them), the integer
 * sum over a super-block, sum v * y = 128 * sum hi * y + sum lo * y, is exact in int32
 * (|v y| <= 4096 * 128, 256 of them: < 2^27), so the tiles accumulate a whole super-block of
 * K = 64 products and one store and one scaling by d * d_y follow per 256 k.
 *
 * A panel (32 rows) per super-block: 4 chunks of 64 k, each the hi plane's quads (16 quads
 * x 32 rows x 4 bytes: the K x N operand of two 16-row tiles, stride 128) and then the lo
 * plane's; then the 32 rows' d as floats. B panel (16 columns) per super-block: 4 chunks of
 * 16 rows x 64 bytes (the M x K operand), then the 16 columns' d. */
enum : size_t { Q6K_AMX_A_SB = 4 * 2 * 16 * 32 * 4 + 32 * 4, Q6K_AMX_B_SB = 4 * 16 * 64 + 16 * 4 };

/* Levels q (32 int8, q - 32 of a Q6_K block) times the block's scales per 16 (low and high
 * int16 of `scales`) as the planes hi and lo of v = 128 * hi + lo. */
TSR_TARGET_AVX2 static inline void q6_K_scaled_planes_avx2(__m256i q, uint32_t scales, __m256i * hi, __m256i * lo) {
    const __m256i v0 = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)), _mm256_set1_epi16((short)(scales & 0xFFFF)));
    const __m256i v1 = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)), _mm256_set1_epi16((short)(scales >> 16)));
    const __m256i m = _mm256_set1_epi16(127);
    /* packs works per 128-bit lane: the permute puts the four 8-byte groups back in order */
    *hi = _mm256_permute4x64_epi64(_mm256_packs_epi16(_mm256_srai_epi16(v0, 7), _mm256_srai_epi16(v1, 7)), 0xD8);
    *lo = _mm256_permute4x64_epi64(_mm256_packs_epi16(_mm256_and_si256(v0, m), _mm256_and_si256(v1, m)), 0xD8);
}

/* A Q6_K panel of 32 rows in that layout (zero past `rows` and past K): four rows at a
 * time, each block of 32 decoded (q6_K_half_block_avx2), scaled and split, and the four
 * rows' planes transposed into quads as the other x86 packers do. */
TSR_TARGET_AVX2 static void pack_panel_q6_K_amx(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    constexpr int R = 32;
    uint8_t * d = (uint8_t *)dst;
    const int ns = kc / 256;
    const int64_t s0 = k0 / 256;
    const int nsv = (int)std::max<int64_t>(0, std::min<int64_t>(ns, K / 256 - s0));
    for (int r0 = 0; r0 < R; r0 += 4) {
        const int live = std::max(0, std::min(4, rows - r0));
        for (int s = 0; s < ns; ++s) {
            uint8_t * sb = d + (size_t)s * Q6K_AMX_A_SB;
            const char * ahead = a + (size_t)(r0 + 4) * lda + (size_t)(s0 + s) * sizeof(tsr_block_q6_K);
            TSR_UNROLL(4)
            for (int i = 0; i < 4; ++i)
                TSR_UNROLL(8)
                for (size_t l = 0; l < sizeof(tsr_block_q6_K); l += 64) _mm_prefetch(ahead + (size_t)i * lda + l, _MM_HINT_T0);
            float dd[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int b = 0; b < 8; ++b) {
                __m256i hi[4], lo[4];
                TSR_UNROLL(4)
                for (int i = 0; i < 4; ++i) {
                    hi[i] = lo[i] = _mm256_setzero_si256();
                    if (i >= live || s >= nsv) continue;
                    uint32_t scales;
                    const __m256i q = q6_K_half_block_avx2(a + (size_t)(r0 + i) * lda, (s0 + s) * 8 + b, &dd[i], &scales);
                    q6_K_scaled_planes_avx2(q, scales, &hi[i], &lo[i]);
                }
                uint8_t * chunk = sb + (size_t)(b / 2) * 2 * 16 * R * 4 + (size_t)(b % 2) * 8 * R * 4 + (size_t)r0 * 4;
                store_quads4_avx2<R>(chunk, hi);
                store_quads4_avx2<R>(chunk + 16 * R * 4, lo);
            }
            _mm_storeu_ps((float *)(sb + 16 * 2 * 16 * R) + r0, _mm_loadu_ps(dd));
        }
    }
}

/* 16 columns of Q8_K rows in the B layout above (zero past `rows` and past K). */
TSR_TARGET_AVX512 static void pack_b_q8_K_amx(const char * b, size_t ldb, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    uint8_t * d = (uint8_t *)dst;
    const int64_t s0 = k0 / 256, nsk = K / 256;
    for (int s = 0; s < kc / 256; ++s) {
        uint8_t * sb = d + (size_t)s * Q6K_AMX_B_SB;
        float * dy = (float *)(sb + 4 * 16 * 64);
        for (int r = 0; r < 16; ++r) {
            const bool live = r < rows && s0 + s < nsk;
            const tsr_block_q8_K * y = live ? (const tsr_block_q8_K *)(b + (size_t)r * ldb) + s0 + s : nullptr;
            TSR_UNROLL(4)
            for (int c = 0; c < 4; ++c)
                _mm512_store_si512((void *)(sb + (size_t)c * 1024 + (size_t)r * 64),
                                   live ? _mm512_loadu_si512((const void *)(y->qs + 64 * c)) : _mm512_setzero_si512());
            dy[r] = live ? y->d : 0.0f;
        }
    }
}

/* One super-block's sums (hi tile at s, lo at s + 256) into 8 of the accumulators (columns
 * j0..j0+8): f[j] += cvt(128 * hi + lo) * (d * d_y[j]). */
TSR_TARGET_AMX static TSR_ALWAYS_INLINE void amx_q6_K_scale_8(__m512 f[8], int j0, const int32_t * s, __m512 d, const float * dy) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
        const __m512i hi = _mm512_load_si512((const void *)(s + 16 * (j0 + j)));
        const __m512i lo = _mm512_load_si512((const void *)(s + 256 + 16 * (j0 + j)));
        const __m512 v = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(hi, 7), lo));
        f[j] = _mm512_fmadd_ps(v, _mm512_mul_ps(d, _mm512_set1_ps(dy[j0 + j])), f[j]);
    }
}

/* Both halves of the accumulators from one super-block's sums s, with the d of its A
 * super-block as (rows 16h..: as points there) and of its B super-block bs. */
TSR_TARGET_AMX static TSR_ALWAYS_INLINE void amx_q6_K_scale_sb(__m512 f0[8], __m512 f1[8], const int32_t * s, const uint8_t * as,
                                                               const uint8_t * bs) {
    const __m512 d = _mm512_loadu_ps(as + 16 * 2 * 16 * 32);
    const float * dy = (const float *)(bs + 4 * 16 * 64);
    amx_q6_K_scale_8(f0, 0, s, d, dy);
    amx_q6_K_scale_8(f1, 8, s, d, dy);
}

/* 32 x 16 tile as two passes of 16 rows. Per super-block: 4 chunks of 64 k, each a B tile
 * and the two planes' A tiles (tiles 0/2/3 for even chunks, 1/6/7 for odd ones, so a
 * chunk's loads need not wait for the previous chunk's products), the hi products into
 * tile 4, the lo ones into tile 5; both stored after the fourth chunk and scaled after the
 * next super-block's products (a load right after tilestored waits for the store). */
TSR_TARGET_AMX static void gemm_q6_K_kernel_amx(int kc, const void * ap, const void * bp, float * c, size_t ldc, int mr_valid, int nr_valid,
                                                bool accumulate) {
    static constexpr amx_tilecfg cfg = amx_config(64);
    _tile_loadconfig(&cfg);
    alignas(64) int32_t sums[2][512];
    const int ns = kc / 256;
    for (int h = 0; h < 2 && 16 * h < mr_valid; ++h) {
        __m512 f0[8], f1[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) f0[j] = f1[j] = _mm512_setzero_ps();
        const uint8_t * a = (const uint8_t *)ap + 64 * h;  /* rows 16h.. of every quad row and of the d floats */
        const uint8_t * b = (const uint8_t *)bp;
        for (int s = 0; s < ns; ++s) {
            const uint8_t * as = a + (size_t)s * Q6K_AMX_A_SB, * bs = b + (size_t)s * Q6K_AMX_B_SB;
            _tile_zero(4);
            _tile_zero(5);
#define TSR_AMX_Q6K_CHUNK(X, WH, WL, ch)                                                     \
            TSR_TILE_LOADD(X, bs + (ch) * 1024, 64, 16 * 64);                               \
            TSR_TILE_LOADD(WH, as + (ch) * 4096, 128, 15 * 128 + 64);                        \
            TSR_TILE_LOADD(WL, as + (ch) * 4096 + 2048, 128, 15 * 128 + 64);                 \
            _tile_dpbssd(4, X, WH);                                                          \
            _tile_dpbssd(5, X, WL);
            TSR_AMX_Q6K_CHUNK(0, 2, 3, 0)
            TSR_AMX_Q6K_CHUNK(1, 6, 7, 1)
            TSR_AMX_Q6K_CHUNK(0, 2, 3, 2)
            TSR_AMX_Q6K_CHUNK(1, 6, 7, 3)
#undef TSR_AMX_Q6K_CHUNK
            TSR_TILE_STORED(4, sums[s & 1]);
            TSR_TILE_STORED(5, sums[s & 1] + 256);
            if (s >= 1) amx_q6_K_scale_sb(f0, f1, sums[(s - 1) & 1], a + (size_t)(s - 1) * Q6K_AMX_A_SB, b + (size_t)(s - 1) * Q6K_AMX_B_SB);
        }
        if (ns >= 1) amx_q6_K_scale_sb(f0, f1, sums[(ns - 1) & 1], a + (size_t)(ns - 1) * Q6K_AMX_A_SB, b + (size_t)(ns - 1) * Q6K_AMX_B_SB);
        amx_store_pass(f0, f1, c + 16 * h, ldc, mr_valid - 16 * h, nr_valid, accumulate);
    }
}

/* gemm_impl::done of every AMX GEMM: tilerelease (a thread that keeps tile data in use saves
 * and restores 8 KiB more at each context switch). */
TSR_TARGET_AMX static void amx_release() { _tile_release(); }

/* ---- BF16 weights: tdpbf16ps, float sums kept in the tiles over all of kc ------------------
 * A: the AVX-512 BF16 GEMM's pair panels (per k pair 32 rows x two bf16: the K x N operand's
 * layout, two tiles of 16 rows at stride 128). B: 32 columns per panel, per 32 k the rows
 * layout (row r: 32 bf16, 64 bytes), rounded from F32 by vcvtne2ps2bf16 as the AVX-512 BF16
 * GEMM rounds them, so both compute bf16 products of the same operands (tdpbf16ps sums its
 * pairs in its own order: results agree to float rounding, not to the bit). No per-block
 * scaling: one tile store per 32 x 32 outputs at the end. */
TSR_TARGET_AMX_BF16 static void pack_b32_rows_bf16_amx(const char * b, size_t ldb, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    uint8_t * d = (uint8_t *)dst;
    const int64_t kend = std::min<int64_t>(K, k0 + kc);
    for (int k = 0; k < kc; k += 32) {
        uint8_t * blk = d + (size_t)(k / 32) * 32 * 64;
        const int64_t g = k0 + k;
        const int64_t n0 = std::max<int64_t>(0, std::min<int64_t>(16, kend - g));
        const int64_t n1 = std::max<int64_t>(0, std::min<int64_t>(16, kend - g - 16));
        for (int r = 0; r < 32; ++r) {
            __m512i v = _mm512_setzero_si512();
            if (r < rows && n0 > 0) {
                const float * row = (const float *)(b + (size_t)r * ldb);
                const __m512 lo = _mm512_maskz_loadu_ps((__mmask16)((1u << n0) - 1), row + g);
                const __m512 hi = n1 > 0 ? _mm512_maskz_loadu_ps((__mmask16)((1u << n1) - 1), row + g + 16) : _mm512_setzero_ps();
                v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
            }
            _mm512_store_si512((void *)(blk + (size_t)r * 64), v);
        }
    }
}

/* 32 rows x 32 columns: tiles 0-1 the columns' rows (16 each), 2-3 the rows' pairs, 4-7 the
 * four 16 x 16 float sums. */
TSR_TARGET_AMX_BF16 static void gemm_bf16_kernel_amx(int kc, const void * ap, const void * bp, float * c, size_t ldc, int mr_valid,
                                                     int nr_valid, bool accumulate) {
    static constexpr amx_tilecfg cfg = amx_config(64);
    _tile_loadconfig(&cfg);
    const uint8_t * a = (const uint8_t *)ap, * b = (const uint8_t *)bp;
    _tile_zero(4); _tile_zero(5); _tile_zero(6); _tile_zero(7);
    for (int k = 0; k < kc; k += 32, a += 16 * 128, b += 32 * 64) {  /* 16 pairs of 32 rows; 32 columns of 32 */
        TSR_TILE_LOADD(0, b, 64, 16 * 64);
        TSR_TILE_LOADD(1, b + 16 * 64, 64, 16 * 64);
        TSR_TILE_LOADD(2, a, 128, 15 * 128 + 64);
        TSR_TILE_LOADD(3, a + 64, 128, 15 * 128 + 64);
        _tile_dpbf16ps(4, 0, 2);
        _tile_dpbf16ps(5, 0, 3);
        _tile_dpbf16ps(6, 1, 2);
        _tile_dpbf16ps(7, 1, 3);
    }
    alignas(64) float out[4][256];
    TSR_TILE_STORED(4, out[0]);
    TSR_TILE_STORED(5, out[1]);
    TSR_TILE_STORED(6, out[2]);
    TSR_TILE_STORED(7, out[3]);
    for (int j = 0; j < nr_valid; ++j) {
        const float * rows = out[(j / 16) * 2] + 16 * (j % 16);  /* rows 0-15; 16-31 one tile (256 floats) on */
        store_row32(c + (size_t)j * ldc, _mm512_load_ps(rows), _mm512_load_ps(rows + 256), mr_valid, accumulate);
    }
}

static constexpr gemm_impl gemm_bf16_amx = [] {
    gemm_impl g{};
    g.mr = 32; g.nr = 32; g.kc = 512; g.mc = 128;
    g.a_bytes_32k = 32 * 64; g.b_bytes_32k = 32 * 64;
    g.pack_a = pack_a32_bf16_avx512;
    g.pack_b = pack_b32_rows_bf16_amx;
    g.kernel = gemm_bf16_kernel_amx;
    g.done = amx_release;
    return g;
}();

static constexpr gemm_impl gemm_q8_0_amx = [] {
    gemm_impl g{};
    g.mr = 32; g.nr = 16; g.kc = GEMM_I8_KC_MAX; g.mc = 128;
    g.a_bytes_32k = 32 * 36; g.b_bytes_32k = 16 * 36;
    g.pack_a = pack_panel_i8_avx2<32, TSR_TYPE_Q8_0, 0, 0>;
    g.pack_b = pack_panel_s8_b<16>;
    g.kernel = gemm_i8_kernel_amx<PANEL_Q8>;
    g.done = amx_release;
    return g;
}();
static constexpr gemm_impl gemm_q4_0_amx = gemm_with_pack_a(gemm_q8_0_amx, pack_panel_i8_avx2<32, TSR_TYPE_Q4_0, 0, 0, PANEL_Q8, 8>);
static constexpr gemm_impl gemm_min_amx =
    gemm_panel_variant(gemm_q8_0_amx, gemm_i8_kernel_amx<PANEL_MIN>, pack_panel_s8_b<16, true>, 16 * 40);
/* Q6_K: B is Q8_K rows (b_is_q8k: src1 quantized per 256 for this GEMM). */
static constexpr gemm_impl gemm_q6_K_amx = [] {
    gemm_impl g = gemm_q8_0_amx;
    g.a_bytes_32k = Q6K_AMX_A_SB / 8; g.b_bytes_32k = Q6K_AMX_B_SB / 8; g.b_is_q8k = true;
    g.pack_a = pack_panel_q6_K_amx;
    g.pack_b = pack_b_q8_K_amx;
    g.kernel = gemm_q6_K_kernel_amx;
    return g;
}();

/* The AMX path's table: the AVX-512 path's (isa AVX-512: every kernel but the GEMMs is that
 * path's) with the GEMMs of every quantized type, and of BF16, on tiles. */
static kernels make_kernels_amx(const cpu_features & f = features()) {
    kernels k = make_kernels_avx512(f);
    k.gemm[SLOT_Q8_0] = &gemm_q8_0_amx;
    k.gemm[SLOT_Q4_0] = &gemm_q4_0_amx;
    /* Q6_K has a GEMM of its own here (no half panels): its entry is replaced */
    packed_gemms<gemm_q8_0_amx, gemm_min_amx, gemm_q8_0_amx, x86_packers<32, 0>::of>::fill(k);
    k.gemm_x[XSLOT_Q6_K] = &gemm_q6_K_amx;
    if (f.amx_bf16 && f.avx512_bf16) k.gemm[SLOT_BF16] = &gemm_bf16_amx;
    return k;
}

} // namespace tcpu
} // namespace
TSR_SIMD_WARNINGS_ON
#endif /* TSR_CPU_HAVE_X86_KERNELS */
