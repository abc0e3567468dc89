/*
 * pack.inl - operand packing for the GEMM kernels (ISA-independent layouts; the row
 * converters passed in are the ISA's fast ones).
 *
 * F32 panels:  for k in [0, kc): R floats (one per row), zero beyond K and beyond `rows`.
 * BF16 panels: for each k pair p: R uint32 (two bf16 of one row), zero padded.
 * Int8 panels (A, from any quantized type: pack_x86.inl packs them): per 32 k: 8 quads x
 *              R rows x 4 unsigned bytes, then R float scales (Q8_0-style levels may
 *              instead keep their bytes signed, for kernels that move the sign onto B
 *              themselves). B (from yq8): per 32 k: 8 quads x R x 4 signed bytes, R float
 *              scales, R int32 biases (-offset * sum(q)) that undo the unsigned offset.
 * Pair panels (AVX2 without VNNI, for signed A: Q8_0-style levels and half panels; the
 *              pair kernel of kernels_avx2.inl): A is packed as an int8 panel, then each
 *              quad's 32 bytes regrouped as the 8 rows' (k0, k1) and then their (k2, k3)
 *              (finish_a). B (pack_panel_pairs_b): per 32 k: 8 quads x R x 4 int16 levels,
 *              then R float scales (no bias: A has no offset).
 * Signed int8 panels (A from Q8_0/Q4_0, B from yq8; for kernels that multiply signed by
 *              signed, so no offset or bias): per 32 k: R rows x 32 signed bytes in k
 *              order, then R float scales; zero beyond `rows` and beyond K.
 * Min panels (A of the types with w = a * q - b per 32: gemm_kquant.inl): either layout
 *              with q as is (0..31, no offset), R scales a, then R float mins b. Their B
 *              panels hold d * sum(q) per row as a float (x86: in the bias slot; rows
 *              layout: after the scales), the factor of the min's correction.
 * Half panels (A of Q6_K: an int8 scale per 16, d per 256): either layout with Q8_0-style
 *              levels q - 32, then R float scales d * sc of the first 16 k and R of the
 *              second (exact: an fp16 times an int8). Their x86 B panels hold two biases
 *              per row, one per half (R of the first 16 k, then R of the second), from yq8
 *              rows or, for the AVX-512 GEMM, from Q8_K rows (pack_panel_q8k_halves_b).
 */
namespace {
namespace tcpu {

/* Types whose blocks of 32 are w = a * q - b (q unsigned): packed as min panels. */
static constexpr bool has_block_min(enum tsr_type t) {
    return t == TSR_TYPE_Q4_1 || t == TSR_TYPE_Q5_1 || t == TSR_TYPE_Q4_K || t == TSR_TYPE_Q5_K;
}

enum panel_kind { PANEL_Q8 = 0, PANEL_MIN, PANEL_HALVES };

static constexpr int panel_kind_of(enum tsr_type t) {
    return has_block_min(t) ? PANEL_MIN : t == TSR_TYPE_Q6_K ? PANEL_HALVES : PANEL_Q8;
}

/* An ISA's GEMM of min or half panels: its Q8_0 GEMM's tiles over panels of mr x 40 bytes
 * per 32 k (levels, then two floats a row), with the kind's kernel and Q8_0's B packer, or
 * the kind's own (B bytes b_bytes_32k; 0: Q8_0's count). The A packer comes per type
 * (packed_gemms). Two overloads, not a null default: g++ refuses a function pointer's
 * comparison with null in a constant expression under -fsanitize=undefined. */
static constexpr gemm_impl gemm_panel_variant(gemm_impl q8, decltype(gemm_impl::kernel) kernel) {
    q8.a_bytes_32k = (size_t)q8.mr * 40;
    q8.pack_a = nullptr;
    q8.kernel = kernel;
    return q8;
}
static constexpr gemm_impl gemm_panel_variant(gemm_impl q8, decltype(gemm_impl::kernel) kernel,
                                              decltype(gemm_impl::pack_b) pack_b, size_t b_bytes_32k = 0) {
    q8 = gemm_panel_variant(q8, kernel);
    q8.pack_b = pack_b;
    if (b_bytes_32k) q8.b_bytes_32k = b_bytes_32k;
    return q8;
}

typedef void (*row_cvt_fn)(const void * src, float * dst, int64_t n);

static void cvt_f32_copy(const void * src, float * dst, int64_t n) { std::memcpy(dst, src, (size_t)n * 4); }

/* F32 panel of R rows from rows of any float type (element size ES, converter CVT). */
template <int R, int ES, row_cvt_fn CVT>
static void pack_panel_f32(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    float * d = (float *)dst;
    const int kv = (int)std::max<int64_t>(0, std::min<int64_t>(kc, K - k0));
    if (CVT == cvt_f32_copy) {  /* F32 rows: transpose directly, k outer (contiguous writes) */
        const float * rp[R];
        TSR_UNROLL(16)
        for (int r = 0; r < R; ++r) rp[r] = r < rows ? (const float *)(a + (size_t)r * lda) + k0 : nullptr;
        for (int k = 0; k < kv; ++k)
            TSR_UNROLL(16)
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

/* Int8 B panel from yq8 rows; OFF is the A operand's unsigned offset (128 or 8; 0 for a
 * signed A). KIND (panel_kind) of the A panels: min panels get d * sum(q) in the bias slot
 * instead, half panels a bias per 16. */
template <int R, int OFF, int KIND = PANEL_Q8>
static void pack_panel_i8_b(const char * b, size_t ldb, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    uint8_t * d = (uint8_t *)dst;
    const int nb = kc / 32;
    const int64_t b0 = k0 / 32;
    const int64_t nbk = K / 32;
    const size_t block_bytes = (size_t)R * (KIND == PANEL_HALVES ? 44 : 40);
    for (int bb = 0; bb < nb; ++bb) {
        uint8_t * q = d + (size_t)bb * block_bytes;
        float * sc = (float *)(q + R * 32);
        int32_t * bias = (int32_t *)(q + R * 36);
        for (int r = 0; r < R; ++r) {
            const bool live = r < rows && b0 + bb < nbk;
            const yq8 * blk = live ? (const yq8 *)(b + (size_t)r * ldb) + b0 + bb : nullptr;
            TSR_UNROLL(8)
            for (int qd = 0; qd < 8; ++qd) {
                if (live) std::memcpy(q + ((size_t)qd * R + r) * 4, blk->qs + qd * 4, 4);
                else std::memset(q + ((size_t)qd * R + r) * 4, 0, 4);
            }
            sc[r] = live ? blk->d : 0.0f;
            if (KIND == PANEL_MIN) {
                const float dsum = live ? blk->d * (float)blk->sum : 0.0f;
                std::memcpy(&bias[r], &dsum, 4);
            } else if (KIND == PANEL_HALVES) {
                int32_t lo = 0;
                for (int j = 0; live && j < 16; ++j) lo += blk->qs[j];
                bias[r] = live ? -OFF * lo : 0;
                bias[R + r] = live ? -OFF * (blk->sum - lo) : 0;
            } else {
                bias[r] = live ? -OFF * blk->sum : 0;
            }
        }
    }
}

/* Pair B panel from yq8 rows (the int8 panel's quads as int16; the pair kernel sign-extends
 * A itself, once for all its columns). Zero past `rows` and past K. */
template <int R>
static void pack_panel_pairs_b(const char * b, size_t ldb, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    const int64_t b0 = k0 / 32, nbk = K / 32;
    for (int bb = 0; bb < kc / 32; ++bb) {
        int16_t * q = (int16_t *)((uint8_t *)dst + (size_t)bb * R * 68);
        float * sc = (float *)(q + R * 32);
        for (int r = 0; r < R; ++r) {
            const bool live = r < rows && b0 + bb < nbk;
            const yq8 * blk = live ? (const yq8 *)(b + (size_t)r * ldb) + b0 + bb : nullptr;
            TSR_UNROLL(8)
            for (int qd = 0; qd < 8; ++qd)
                TSR_UNROLL(4)
                for (int i = 0; i < 4; ++i) q[((size_t)qd * R + r) * 4 + i] = live ? blk->qs[qd * 4 + i] : 0;
            sc[r] = live ? blk->d : 0.0f;
        }
    }
}

/* The half panels' B (pack_panel_i8_b's layout, KIND PANEL_HALVES) from Q8_K rows, for the
 * GEMMs that take Q8_K activations: per 32 k the quads, the super-block's d (the same in
 * its 8 blocks), and -OFF times the bsums of the block's two halves. */
template <int R, int OFF>
static void pack_panel_q8k_halves_b(const char * b, size_t ldb, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    uint8_t * d = (uint8_t *)dst;
    const int64_t nbk = K / 32;
    for (int bb = 0; bb < kc / 32; ++bb) {
        uint8_t * q = d + (size_t)bb * R * 44;
        float * sc = (float *)(q + R * 32);
        int32_t * bias = (int32_t *)(q + R * 36);
        const int64_t kb = k0 / 32 + bb;
        const int part = (int)(kb % 8);
        for (int r = 0; r < R; ++r) {
            const bool live = r < rows && kb < nbk;
            const tsr_block_q8_K * y = live ? (const tsr_block_q8_K *)(b + (size_t)r * ldb) + kb / 8 : nullptr;
            TSR_UNROLL(8)
            for (int qd = 0; qd < 8; ++qd) {
                if (live) std::memcpy(q + ((size_t)qd * R + r) * 4, y->qs + 32 * part + qd * 4, 4);
                else std::memset(q + ((size_t)qd * R + r) * 4, 0, 4);
            }
            sc[r] = live ? y->d : 0.0f;
            bias[r] = live ? -OFF * y->bsums[2 * part] : 0;
            bias[R + r] = live ? -OFF * y->bsums[2 * part + 1] : 0;
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
                TSR_UNROLL(16)
                for (int j = 0; j < 16; ++j) {
                    qr[j] = (int8_t)((blk->qs[j] & 0x0F) - 8);
                    qr[j + 16] = (int8_t)((blk->qs[j] >> 4) - 8);
                }
                sc[r] = h2f(blk->d);
            }
        }
    }
}

/* Signed int8 B panel from yq8 rows; SUMS: R floats d * sum(q) after the scales (min panels). */
template <int R, bool SUMS = false>
static void pack_panel_s8_b(const char * b, size_t ldb, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    uint8_t * d = (uint8_t *)dst;
    const int64_t b0 = k0 / 32, nbk = K / 32;
    const size_t block_bytes = (size_t)R * (SUMS ? 40 : 36);
    for (int bb = 0; bb < kc / 32; ++bb) {
        int8_t * q = (int8_t *)(d + (size_t)bb * block_bytes);
        float * sc = (float *)(d + (size_t)bb * block_bytes + R * 32);
        float * dsum = (float *)(d + (size_t)bb * block_bytes + R * 36);
        for (int r = 0; r < R; ++r) {
            const bool live = r < rows && b0 + bb < nbk;
            const yq8 * blk = live ? (const yq8 *)(b + (size_t)r * ldb) + b0 + bb : nullptr;
            if (live) std::memcpy(q + r * 32, blk->qs, 32);
            else std::memset(q + r * 32, 0, 32);
            sc[r] = live ? blk->d : 0.0f;
            if (SUMS) dsum[r] = live ? blk->d * (float)blk->sum : 0.0f;
        }
    }
}

} // namespace tcpu
} // namespace
