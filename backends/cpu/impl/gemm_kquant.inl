/*
 * gemm_kquant.inl - the packed int8 GEMM for the weight types without a GEMM of their own
 * (Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K..Q6_K): their A panels are packed into the ISA's Q8_0
 * panel layout, or its min panels, so the Q8_0 micro-kernel (or its min variant) streams
 * them at its rate against yq8 activations. x86 packs them in registers (pack_x86.inl);
 * this file has the table filler and the portable packers (NEON's).
 *
 * Exact panels: Q5_0 and IQ4_NL are int8 times one fp16 scale per 32 already (q - 16, the
 * IQ4_NL table value); Q3_K's level times its scale per 16 fits int8 negated (scale -d).
 * Q4_1, Q5_1, Q4_K and Q5_K are w = a*q - b per 32 with q 0..31: their min panels hold q,
 * a and b, and the kernel subtracts b * (d_y * sum(y)) per block, so the GEMM is the
 * format's weights against the 8-bit activations with no rounding of its own. Q6_K
 * (levels q - 32 times d * sc per 16, the product past int8) packs its levels with a scale
 * per 16 (half panels: one integer tile per 16 k). Q2_K's level times scale fits, but its
 * min per 16 would need sums of y per 16: its 32 dequantized values are requantized to
 * Q8_0 (scale amax / 127), an error of at most half a step of 1/254 of the block's largest
 * weight.
 */
namespace {
namespace tcpu {

enum { GEMM_I8_KC_MAX = 1024 };


typedef void (*quantize_y_fn)(const float * x, yq8 * y, int64_t n);

/* Weights as Q8_0 blocks through the ISA's activation quantizer (the same rounding as
 * ggml's Q8_0: scale amax / 127 kept as fp16); a block holding a NaN or an infinity gets
 * the scale NaN, so its products are NaN as in float arithmetic. */
template <quantize_y_fn QY>
static void requantize_q8_0(const float * x, tsr_block_q8_0 * y, int64_t n) {
    yq8 tmp[GEMM_I8_KC_MAX / 32];
    QY(x, tmp, n);
    mark_nonfinite_blocks<32>(x, tmp, n);
    for (int64_t b = 0; b < n / 32; ++b) {
        y[b].d = f2h(tmp[b].d);
        std::memcpy(y[b].qs, tmp[b].qs, 32);
    }
}

/* Q5_0 / IQ4_NL blocks as Q8_0 blocks with the same scale (exact). */
template <enum tsr_type T, class B>
static void exact_blocks_to_q8_0(const B * x, tsr_block_q8_0 * y, int64_t nb) {
    int q[32];
    for (int64_t b = 0; b < nb; ++b) {
        uint32_t qh = 0;
        if (T == TSR_TYPE_Q5_0) std::memcpy(&qh, ((const tsr_block_q5_0 *)(const void *)(x + b))->qh, 4);
        tsr_impl::unpack_q32(x[b].qs, qh, q);
        y[b].d = x[b].d;
        for (int j = 0; j < 32; ++j)
            y[b].qs[j] = (int8_t)(T == TSR_TYPE_Q5_0 ? q[j] - 16 : tsr_impl::iq4nl_values[q[j]]);
    }
}

/* Q3_K super-blocks as Q8_0 blocks: levels -q * sc (-128..124), scale -d (exact). */
static inline void q3_K_to_q8_0(const tsr_block_q3_K * x, tsr_block_q8_0 * y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b) {
        const tsr_block_q3_K & s = x[b / 8];
        y[b].d = (tsr_fp16_t)(s.d ^ 0x8000);
        for (int l = 0; l < 32; ++l) {
            const int e = (int)(b % 8) * 32 + l;
            const bool high = (s.hmask[e % 32] >> (e / 32)) & 1;
            y[b].qs[l] = (int8_t)(-(tsr_impl::q2_value(s.qs, e) - (high ? 0 : 4)) * tsr_impl::q3k_scale(e / 16, s.scales));
        }
    }
}

/* Elements [k0, k0 + kv) of a row of type T (k0 and kv whole blocks of T) as Q8_0 blocks. */
template <enum tsr_type T, quantize_y_fn QY>
static void row_chunk_to_q8_0(const char * row, int64_t k0, int64_t kv, tsr_block_q8_0 * y) {
    const char * src = row + (size_t)(k0 / tsr_blck_size(T)) * tsr_type_size(T);
    if constexpr (T == TSR_TYPE_Q5_0) {
        exact_blocks_to_q8_0<T>((const tsr_block_q5_0 *)src, y, kv / 32);
    } else if constexpr (T == TSR_TYPE_IQ4_NL) {
        exact_blocks_to_q8_0<T>((const tsr_block_iq4_nl *)src, y, kv / 32);
    } else if constexpr (T == TSR_TYPE_Q3_K) {
        q3_K_to_q8_0((const tsr_block_q3_K *)src, y, kv / 32);
    } else {
        /* the one type left that requantizes: Q2_K's mins are per 16 (through the core's
         * decoding, the format's definition) */
        static_assert(T == TSR_TYPE_Q2_K, "only Q2_K's Q8_0 panels are requantized");
        alignas(64) float tmp[GEMM_I8_KC_MAX];
        tsr_impl::dequantize_row_q2_K((const tsr_block_q2_K *)src, tmp, kv);
        requantize_q8_0<QY>(tmp, y, kv);
    }
}

typedef void (*pack_panel_fn)(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst);

/* An A panel of R rows of type T in the layout Q8PACK (the ISA's Q8_0 packer) writes. */
template <int R, enum tsr_type T, pack_panel_fn Q8PACK, quantize_y_fn QY>
static void pack_panel_requant_a(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    tsr_block_q8_0 blocks[R * (GEMM_I8_KC_MAX / 32)];
    const int nb = kc / 32;
    const int64_t kv = std::max<int64_t>(0, std::min<int64_t>(kc, K - k0));
    for (int r = 0; r < rows; ++r) row_chunk_to_q8_0<T, QY>(a + (size_t)r * lda, k0, kv, blocks + (size_t)r * nb);
    Q8PACK((const char *)blocks, (size_t)nb * sizeof(tsr_block_q8_0), rows, kv, 0, kc, dst);
}

/* Block b (of 32) of a row of Q4_1, Q5_1, Q4_K or Q5_K is w = a * q - b with a = d * sc,
 * b = m * mn (the core's dequantization: Q4_1 / Q5_1 d * q + m, the K-quants
 * d*sc * q - dmin*m): its fp16 d and m and integer sc and mn, each packer converting the
 * fp16 its own way. */
struct min_block_header {
    tsr_fp16_t d, m;
    int sc, mn;
};
template <enum tsr_type T>
static inline min_block_header min_block_header_of(const char * row, int64_t b) {
    if constexpr (T == TSR_TYPE_Q4_1 || T == TSR_TYPE_Q5_1) {
        using block = std::conditional_t<T == TSR_TYPE_Q4_1, tsr_block_q4_1, tsr_block_q5_1>;
        const block & x = ((const block *)row)[b];
        return {x.d, x.m, 1, -1};
    } else {
        using block = std::conditional_t<T == TSR_TYPE_Q4_K, tsr_block_q4_K, tsr_block_q5_K>;
        const block & x = ((const block *)row)[b / 8];
        min_block_header h{x.d, x.dmin, 0, 0};
        tsr_impl::k4_scale_min((int)(b % 8), x.scales, &h.sc, &h.mn);
        return h;
    }
}

/* Block b of such a row: levels q (0..31), a in *scale, b in *min. */
template <enum tsr_type T>
static void min_block_levels(const char * row, int64_t b, int8_t * q, float * scale, float * min) {
    const min_block_header h = min_block_header_of<T>(row, b);
    *scale = h2f(h.d) * (float)h.sc;
    *min = h2f(h.m) * (float)h.mn;
    int v[32];
    if constexpr (T == TSR_TYPE_Q4_1 || T == TSR_TYPE_Q5_1) {
        using block = std::conditional_t<T == TSR_TYPE_Q4_1, tsr_block_q4_1, tsr_block_q5_1>;
        const block & x = ((const block *)row)[b];
        uint32_t qh = 0;
        if constexpr (T == TSR_TYPE_Q5_1) std::memcpy(&qh, x.qh, 4);
        tsr_impl::unpack_q32(x.qs, qh, v);
    } else {
        using block = std::conditional_t<T == TSR_TYPE_Q4_K, tsr_block_q4_K, tsr_block_q5_K>;
        const block & x = ((const block *)row)[b / 8];
        const int j = (int)(b % 8);
        for (int l = 0; l < 32; ++l) {
            v[l] = (x.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
            if constexpr (T == TSR_TYPE_Q5_K) v[l] |= ((x.qh[l] >> j) & 1) << 4;
        }
    }
    for (int l = 0; l < 32; ++l) q[l] = (int8_t)v[l];
}

/* A min panel of R rows of type T in the rows layout (pack.inl: per 32 k R x 32 levels, R
 * scales, R mins; zero past `rows` and past K). */
template <int R, enum tsr_type T>
static void pack_panel_min_a(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    const int64_t b0 = k0 / 32, nbk = K / 32;
    for (int b = 0; b < kc / 32; ++b) {
        uint8_t * blk = (uint8_t *)dst + (size_t)b * R * 40;
        float * sc = (float *)(blk + R * 32);
        float * mn = (float *)(blk + R * 36);
        for (int r = 0; r < R; ++r) {
            int8_t * q = (int8_t *)blk + r * 32;
            if (r < rows && b0 + b < nbk) {
                min_block_levels<T>(a + (size_t)r * lda, b0 + b, q, &sc[r], &mn[r]);
            } else {
                std::memset(q, 0, 32);
                sc[r] = mn[r] = 0.0f;
            }
        }
    }
}

/* A Q6_K half panel of R rows in the rows layout (pack.inl: per 32 k R x 32 levels q - 32,
 * R scales d * sc of the first 16 k, R of the second; zero past `rows` and past K). */
template <int R>
static void pack_panel_q6_K_halves(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    const int64_t b0 = k0 / 32, nbk = K / 32;
    for (int b = 0; b < kc / 32; ++b) {
        uint8_t * blk = (uint8_t *)dst + (size_t)b * R * 40;
        float * sc = (float *)(blk + R * 32);
        for (int r = 0; r < R; ++r) {
            int8_t * q = (int8_t *)blk + r * 32;
            sc[r] = sc[R + r] = 0.0f;
            std::memset(q, 0, 32);
            if (r >= rows || b0 + b >= nbk) continue;
            const int64_t kb = b0 + b;
            const tsr_block_q6_K & x = ((const tsr_block_q6_K *)(a + (size_t)r * lda))[kb / 8];
            for (int l = 0; l < 32; ++l) q[l] = (int8_t)tsr_impl::q6k_value(x, (int)(kb % 8) * 32 + l);
            sc[r] = h2f(x.d) * (float)x.scales[(kb % 8) * 2];
            sc[R + r] = h2f(x.d) * (float)x.scales[(kb % 8) * 2 + 1];
        }
    }
}

/* The portable packer of type T in its panel layout (panel_kind_of). */
template <int R, enum tsr_type T, pack_panel_fn Q8PACK, quantize_y_fn QY, int KIND = panel_kind_of(T)>
struct portable_packer {
    static constexpr pack_panel_fn pack = pack_panel_requant_a<R, T, Q8PACK, QY>;
};
template <int R, enum tsr_type T, pack_panel_fn Q8PACK, quantize_y_fn QY>
struct portable_packer<R, T, Q8PACK, QY, PANEL_MIN> {
    static constexpr pack_panel_fn pack = pack_panel_min_a<R, T>;
};
template <int R, enum tsr_type T, pack_panel_fn Q8PACK, quantize_y_fn QY>
struct portable_packer<R, T, Q8PACK, QY, PANEL_HALVES> {
    static constexpr pack_panel_fn pack = pack_panel_q6_K_halves<R>;
};

/* portable_packer as the packer family packed_gemms takes (Q8_0's kc must not exceed
 * GEMM_I8_KC_MAX, the packers' stack buffer). */
template <int R, pack_panel_fn Q8PACK, quantize_y_fn QY>
struct portable_packers {
    template <enum tsr_type T> struct of : portable_packer<R, T, Q8PACK, QY> {};
};

/* The GEMMs of every type without one of its own on one ISA: its Q8_0 GEMM (MIN and
 * HALVES: its variants for min and half panels) with the A packer PACKERS<T>::pack of each. */
template <const gemm_impl & Q8, const gemm_impl & MIN, const gemm_impl & HALVES, template <enum tsr_type> class PACKERS>
struct packed_gemms {
    template <enum tsr_type T>
    static constexpr gemm_impl of =
        gemm_with_pack_a(panel_kind_of(T) == PANEL_MIN ? MIN : panel_kind_of(T) == PANEL_HALVES ? HALVES : Q8, PACKERS<T>::pack);
    static constexpr void fill(kernels & k) {
        k.gemm_x[XSLOT_Q4_1] = &of<TSR_TYPE_Q4_1>;
        k.gemm_x[XSLOT_Q5_0] = &of<TSR_TYPE_Q5_0>;
        k.gemm_x[XSLOT_Q5_1] = &of<TSR_TYPE_Q5_1>;
        k.gemm_x[XSLOT_IQ4_NL] = &of<TSR_TYPE_IQ4_NL>;
        k.gemm_x[XSLOT_Q2_K] = &of<TSR_TYPE_Q2_K>;
        k.gemm_x[XSLOT_Q3_K] = &of<TSR_TYPE_Q3_K>;
        k.gemm_x[XSLOT_Q4_K] = &of<TSR_TYPE_Q4_K>;
        k.gemm_x[XSLOT_Q5_K] = &of<TSR_TYPE_Q5_K>;
        k.gemm_x[XSLOT_Q6_K] = &of<TSR_TYPE_Q6_K>;
    }
};

} // namespace tcpu
} // namespace
