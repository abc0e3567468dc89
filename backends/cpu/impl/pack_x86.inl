/*
 * pack_x86.inl - the int8 GEMMs' A packers on x86 (AVX2 code, used by the AVX-512 path
 * too): a block of 32 weights goes from the file's bytes to the panel's 32 bytes and float
 * scale in registers, and four rows' blocks are transposed into the panel's quads with
 * eight 16-byte stores (layout: pack.inl). Each pass reads four rows front to back, where
 * the scalar packers read one block of each of 32 rows in turn (32 strided streams) and
 * sent every type but Q8_0 / Q4_0 through a float row and a Q8_0 row first.
 *
 * Every type but Q2_K packs exactly:
 *  - Q8_0, Q4_0, Q5_0 and IQ4_NL are int8 values times one scale per 32;
 *  - Q3_K's level times its 6-bit scale per 16 fits int8 negated (-q*sc in [-128, 124]),
 *    times -d per 32;
 *  - Q4_1, Q5_1, Q4_K and Q5_K (w = a*q - b per 32, q 0..31) keep q as the unsigned byte,
 *    a as the scale and b as the block's min (the min panels of pack.inl);
 *  - Q6_K keeps its levels q - 32 and d * sc of each 16 (the half panels).
 * Q2_K (a min per 16 would need sums of y per 16) is requantized per 32 in registers:
 * scale amax / 127 kept as a float (the panel holds floats), values rounded to nearest.
 */
#if defined(TSR_CPU_HAVE_X86_KERNELS)
namespace {
namespace tcpu {

/* The 32 bytes at p shifted right by `shift` bits and masked, byte by byte: the 2-bit
 * planes of Q2_K / Q3_K, the nibble planes of the K-quants, their high-bit planes. */
TSR_TARGET_AVX2 static inline __m256i bit_plane_avx2(const uint8_t * p, int shift, int mask) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)p);
    return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8((char)mask));
}

/* 16 bytes of nibbles as 32 bytes: the low nibbles first, then the high ones. */
TSR_TARGET_AVX2 static inline __m256i nibbles_lo_hi_avx2(const uint8_t * qs) {
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_blend_epi32(v, _mm256_srli_epi16(v, 4), 0xF0), _mm256_set1_epi8(0x0F));
}

/* Bit i of the 32-bit word at qh as byte i, 16 where set and 0 where clear. */
TSR_TARGET_AVX2 static inline __m256i bit16_bytes_avx2(const uint8_t * qh) {
    uint32_t bits;
    std::memcpy(&bits, qh, 4);
    const __m256i byte_of_bit = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), byte_of_bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16));
}

TSR_TARGET_AVX2 static inline float fp16_avx2(tsr_fp16_t h) { return _cvtsh_ss(h); }

/* ---- exact blocks: 32 signed int8 (Q4_0: its nibbles) and the block's scale ----------- */

TSR_TARGET_AVX2 static inline __m256i q8_0_block_avx2(const char * row, int64_t b, float * scale) {
    const tsr_block_q8_0 & x = ((const tsr_block_q8_0 *)row)[b];
    *scale = fp16_avx2(x.d);
    return _mm256_loadu_si256((const __m256i *)x.qs);
}

TSR_TARGET_AVX2 static inline __m256i q4_0_block_avx2(const char * row, int64_t b, float * scale) {
    const tsr_block_q4_0 & x = ((const tsr_block_q4_0 *)row)[b];
    *scale = fp16_avx2(x.d);
    return nibbles_lo_hi_avx2(x.qs);
}

TSR_TARGET_AVX2 static inline __m256i q5_0_block_avx2(const char * row, int64_t b, float * scale) {
    const tsr_block_q5_0 & x = ((const tsr_block_q5_0 *)row)[b];
    *scale = fp16_avx2(x.d);
    return _mm256_sub_epi8(_mm256_or_si256(nibbles_lo_hi_avx2(x.qs), bit16_bytes_avx2(x.qh)), _mm256_set1_epi8(16));
}

TSR_TARGET_AVX2 static inline __m256i iq4_nl_block_avx2(const char * row, int64_t b, float * scale) {
    const tsr_block_iq4_nl & x = ((const tsr_block_iq4_nl *)row)[b];
    *scale = fp16_avx2(x.d);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tsr_impl::iq4nl_values));
    return _mm256_shuffle_epi8(table, nibbles_lo_hi_avx2(x.qs));
}

/* Q3_K's levels of sub-block j of 32 (q - 4, a clear high bit meaning minus 4). */
TSR_TARGET_AVX2 static inline __m256i q3_K_levels_avx2(const tsr_block_q3_K & x, int j) {
    const __m256i high = _mm256_slli_epi16(bit_plane_avx2(x.hmask, j, 1), 2);
    return _mm256_sub_epi8(_mm256_or_si256(bit_plane_avx2(x.qs + 32 * (j / 4), 2 * (j % 4), 3), high), _mm256_set1_epi8(4));
}

/* Bytes of v times the 16-bit lanes of s, modulo 256 (x86 has no byte multiply: the even
 * and odd bytes of each lane are multiplied apart). */
TSR_TARGET_AVX2 static inline __m256i mul_bytes_avx2(__m256i v, __m256i s) {
    const __m256i even = _mm256_and_si256(_mm256_mullo_epi16(v, s), _mm256_set1_epi16(0x00FF));
    const __m256i odd = _mm256_slli_epi16(_mm256_mullo_epi16(_mm256_srli_epi16(v, 8), s), 8);
    return _mm256_or_si256(even, odd);
}

/* Q3_K: a super-block's 16 scales (q3k_scale: 4 low bits from the nibbles of bytes 0..7,
 * 2 high bits from bytes 8..11 at bit 2 (j / 4) of byte 8 + j % 4, minus 32) negated as
 * int16, and -d, decoded together for the packer's header cache (as k4_header8), where each
 * block of 32 decoded its two scales field by field. */
struct q3k_header16 {
    int16_t neg_sc[16] = {};
    float neg_d = 0.0f;
    int64_t sb = -1;  /* the super-block decoded; -1: none yet */
};
TSR_TARGET_AVX2 static inline void q3k_header16_avx2(const char * row, int64_t sb, q3k_header16 & h) {
    const tsr_block_q3_K & x = ((const tsr_block_q3_K *)row)[sb];
    const __m128i nib = _mm_loadl_epi64((const __m128i *)x.scales);
    const __m128i low = _mm_and_si128(_mm_unpacklo_epi64(nib, _mm_srli_epi16(nib, 4)), _mm_set1_epi8(0x0F));  /* scale j at byte j */
    uint32_t top;
    std::memcpy(&top, x.scales + 8, 4);
    /* dword k: bits 2k.. of bytes 8..11, so byte m holds the high bits of scale 4k + m */
    const __m128i high = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)top), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(0x03));
    const __m128i sc = _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
    const __m256i neg = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_cvtepi8_epi16(sc));
    _mm256_storeu_si256((__m256i *)h.neg_sc, neg);
    h.neg_d = -fp16_avx2(x.d);
    h.sb = sb;
}

/* Q3_K: level q (-4..3) times its scale per 16 (-32..31) spans -124..128; negated it fits
 * int8, and the block's scale is -d: exactly the format's d * sc * q. Block j (of 32) of
 * super-block x with the negated scales of its two halves. */
TSR_TARGET_AVX2 static inline __m256i q3_K_scaled_levels_avx2(const tsr_block_q3_K & x, int j, int neg_sc0, int neg_sc1) {
    return mul_bytes_avx2(q3_K_levels_avx2(x, j), _mm256_setr_m128i(_mm_set1_epi16((short)neg_sc0), _mm_set1_epi16((short)neg_sc1)));
}

/* Block b (of 32) of a Q3_K row decoded on its own (the packer uses q3k_header16's scales). */
TSR_TARGET_AVX2 static inline __m256i q3_K_block_avx2(const char * row, int64_t b, float * scale) {
    const tsr_block_q3_K & x = ((const tsr_block_q3_K *)row)[b / 8];
    const int j = (int)(b % 8);
    *scale = -fp16_avx2(x.d);
    return q3_K_scaled_levels_avx2(x, j, -tsr_impl::q3k_scale(2 * j, x.scales), -tsr_impl::q3k_scale(2 * j + 1, x.scales));
}

/* ---- blocks with a min: w = a * q - b, q unsigned (0..31) ------------------------------- */

/* Q4_K / Q5_K: the levels (0..31) of block b (of 32) of a row. */
template <enum tsr_type T>
TSR_TARGET_AVX2 static inline __m256i k4_levels_avx2(const char * row, int64_t b) {
    using block = std::conditional_t<T == TSR_TYPE_Q4_K, tsr_block_q4_K, tsr_block_q5_K>;
    const block & x = ((const block *)row)[b / 8];
    const int j = (int)(b % 8);
    const __m256i q = bit_plane_avx2(x.qs + 32 * (j / 2), 4 * (j % 2), 15);
    if constexpr (T == TSR_TYPE_Q5_K) return _mm256_or_si256(q, _mm256_slli_epi16(bit_plane_avx2(x.qh, j, 1), 4));
    return q;
}

/* Block b (of 32) of a row of Q4_1, Q5_1, Q4_K or Q5_K: q as bytes, a in *scale, b in *min
 * (min_block_header_of, gemm_kquant.inl). */
template <enum tsr_type T>
TSR_TARGET_AVX2 static inline __m256i min_block_avx2(const char * row, int64_t b, float * scale, float * min) {
    const min_block_header h = min_block_header_of<T>(row, b);
    *scale = fp16_avx2(h.d) * (float)h.sc;
    *min = fp16_avx2(h.m) * (float)h.mn;
    if constexpr (T == TSR_TYPE_Q4_1 || T == TSR_TYPE_Q5_1) {
        using block = std::conditional_t<T == TSR_TYPE_Q4_1, tsr_block_q4_1, tsr_block_q5_1>;
        const block & x = ((const block *)row)[b];
        if constexpr (T == TSR_TYPE_Q5_1) return _mm256_or_si256(nibbles_lo_hi_avx2(x.qs), bit16_bytes_avx2(x.qh));
        return nibbles_lo_hi_avx2(x.qs);
    } else {
        return k4_levels_avx2<T>(row, b);
    }
}

/* Q4_K / Q5_K: a super-block's 8 scales times d (a) and 8 mins times dmin (b), decoded
 * together from the 12 scale bytes (k4_scale_min's fields: the low 6 bits of bytes 0..3
 * and 4..7, then the nibbles of bytes 8..11 with the top 2 bits of bytes 0..7 above them).
 * The products are min_block_avx2's, float times float. Decoded one pair per block of 32
 * (the fields, two fp16 conversions and two products, 8 times a super-block), the headers
 * were about half of the packing time, and packing half of a 16-column GEMM's: 4096 x 4096
 * Q4_K at 16 columns 402-416 -> 490-502 GFLOPS, Q5_K 389-398 -> 457-469 (2 threads). */
struct k4_header8 {
    float a[8] = {}, b[8] = {};
    int64_t sb = -1;  /* the super-block decoded; -1: none yet */
};
template <enum tsr_type T>
TSR_TARGET_AVX2 static inline void k4_header8_avx2(const char * row, int64_t sb, k4_header8 & h) {
    using block = std::conditional_t<T == TSR_TYPE_Q4_K, tsr_block_q4_K, tsr_block_q5_K>;
    const block & x = ((const block *)row)[sb];
    uint32_t u[3];
    std::memcpy(u, x.scales, 12);
    const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
    const __m128i sc = _mm_setr_epi32((int)(u[0] & low6), (int)((u[2] & low4) | ((u[0] >> 6) & low2) << 4), 0, 0);
    const __m128i mn = _mm_setr_epi32((int)(u[1] & low6), (int)(((u[2] >> 4) & low4) | ((u[1] >> 6) & low2) << 4), 0, 0);
    _mm256_storeu_ps(h.a, _mm256_mul_ps(_mm256_set1_ps(fp16_avx2(x.d)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc))));
    _mm256_storeu_ps(h.b, _mm256_mul_ps(_mm256_set1_ps(fp16_avx2(x.dmin)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn))));
    h.sb = sb;
}

/* ---- requantized blocks ---------------------------------------------------------------- */

/* 32 weights as s * q + m: q signed bytes, (s0, m0) for the first 16, (s1, m1) the rest. */
struct affine32 {
    __m256i q;
    float s0, m0, s1, m1;
};

/* 32 Q2_K levels (bytes 0..3) as affine32 with their super-block's d, dmin and the scale
 * bytes of their two sub-blocks of 16: the core's dequantization formulas. */
TSR_TARGET_AVX2 static inline affine32 q2_K_affine_avx2(__m256i levels, tsr_fp16_t d16, tsr_fp16_t dmin16, uint8_t sc0, uint8_t sc1) {
    affine32 r{};
    const float d = fp16_avx2(d16), dmin = fp16_avx2(dmin16);
    r.q = levels;
    r.s0 = d * (float)(sc0 & 15); r.m0 = -dmin * (float)(sc0 >> 4);
    r.s1 = d * (float)(sc1 & 15); r.m1 = -dmin * (float)(sc1 >> 4);
    return r;
}

/* Block b (of 32) of a Q2_K row as affine32. */
TSR_TARGET_AVX2 static inline affine32 q2_K_affine_block_avx2(const char * row, int64_t b) {
    const int j = (int)(b % 8), h = j / 4, t = j % 4;  /* sub-block of 32, half, quarter */
    const tsr_block_q2_K & x = ((const tsr_block_q2_K *)row)[b / 8];
    return q2_K_affine_avx2(bit_plane_avx2(x.qs + 32 * h, 2 * t, 3), x.d, x.dmin, x.scales[2 * j], x.scales[2 * j + 1]);
}

/* Q6_K: a super-block's d times each of its 16 int8 scales, converted together (d * sc is
 * exact in float: an fp16 times an int8 has at most 19 significant bits), where one pair
 * per block of 32 cost an fp16 conversion and two int conversions each time (the packer's
 * header cache, as k4_header8): 4096 x 4096 at 16 columns 414 -> 460 GFLOPS. */
struct q6k_header16 {
    float ds[16] = {};
    int64_t sb = -1;  /* the super-block decoded; -1: none yet */
};
TSR_TARGET_AVX2 static inline void q6k_header16_avx2(const char * row, int64_t sb, q6k_header16 & h) {
    const tsr_block_q6_K & x = ((const tsr_block_q6_K *)row)[sb];
    const __m128i sc = _mm_loadu_si128((const __m128i *)x.scales);
    const __m256 d = _mm256_set1_ps(fp16_avx2(x.d));
    _mm256_storeu_ps(h.ds, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc))));
    _mm256_storeu_ps(h.ds + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sc, sc)))));
    h.sb = sb;
}

/* Block b (of 32) of a Q6_K row exactly: its levels q - 32. */
TSR_TARGET_AVX2 static inline __m256i q6_K_half_levels_avx2(const char * row, int64_t b) {
    const int j = (int)(b % 8), h = j / 4, t = j % 4;  /* sub-block of 32, half, quarter */
    const tsr_block_q6_K & x = ((const tsr_block_q6_K *)row)[b / 8];
    const __m256i lo = bit_plane_avx2(x.ql + 64 * h + 32 * (t % 2), 4 * (t / 2), 15);
    const __m256i hi = _mm256_slli_epi16(bit_plane_avx2(x.qh + 32 * h, 2 * t, 3), 4);
    return _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
}

/* Bytes 8i..8i+7 of q as floats. */
template <int I> TSR_TARGET_AVX2 static inline __m256 bytes8_f32_avx2(__m256i q) {
    const __m128i half = I < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(I % 2 ? _mm_unpackhi_epi64(half, half) : half));
}

/* The 32 weights of w as int8 with the scale amax / 127 (NaN when a weight is not finite,
 * so the block's products are NaN as in float arithmetic). */
TSR_TARGET_AVX2 static inline __m256i requantize32_avx2(const affine32 & w, float * scale) {
    const __m256 s0 = _mm256_set1_ps(w.s0), m0 = _mm256_set1_ps(w.m0);
    const __m256 s1 = _mm256_set1_ps(w.s1), m1 = _mm256_set1_ps(w.m1);
    const __m256 v0 = _mm256_fmadd_ps(bytes8_f32_avx2<0>(w.q), s0, m0), v1 = _mm256_fmadd_ps(bytes8_f32_avx2<1>(w.q), s0, m0);
    const __m256 v2 = _mm256_fmadd_ps(bytes8_f32_avx2<2>(w.q), s1, m1), v3 = _mm256_fmadd_ps(bytes8_f32_avx2<3>(w.q), s1, m1);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 amax8 = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v0, absmask), _mm256_and_ps(v1, absmask)),
                                       _mm256_max_ps(_mm256_and_ps(v2, absmask), _mm256_and_ps(v3, absmask)));
    /* scales and mins come from finite fp16 or not: only they can make a weight non-finite,
     * and then the maximum is inf or NaN (maxps passes a NaN in its second operand on) */
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const bool nonfinite = !(std::fabs(w.s0) <= FLT_MAX && std::fabs(w.m0) <= FLT_MAX && std::fabs(w.s1) <= FLT_MAX &&
                             std::fabs(w.m1) <= FLT_MAX && amax <= FLT_MAX);
    const float d = amax / 127.0f;
    *scale = nonfinite ? NAN : d;
    const __m256 id = _mm256_set1_ps(d != 0.0f && !nonfinite ? 1.0f / d : 0.0f);
    const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
    const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Block b (of 32) of a row of type T in int8 with its scale: exact where T allows. */
template <enum tsr_type T>
TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE __m256i block_i8_avx2(const char * row, int64_t b, float * scale) {
    switch (T) {
        case TSR_TYPE_Q8_0: return q8_0_block_avx2(row, b, scale);
        case TSR_TYPE_Q4_0: return q4_0_block_avx2(row, b, scale);
        case TSR_TYPE_Q5_0: return q5_0_block_avx2(row, b, scale);
        case TSR_TYPE_IQ4_NL: return iq4_nl_block_avx2(row, b, scale);
        case TSR_TYPE_Q3_K: return q3_K_block_avx2(row, b, scale);
        default: return requantize32_avx2(q2_K_affine_block_avx2(row, b), scale);  /* Q2_K, the one type requantized */
    }
}

/* Block b (of 32) of a Q6_K row exactly: its levels q - 32, the super-block's d in *d and
 * the int8 scales of the two halves as the int16 halves of *scales (first half low): the
 * AMX packer's form (kernels_amx.inl). */
TSR_TARGET_AVX2 static inline __m256i q6_K_half_block_avx2(const char * row, int64_t b, float * d, uint32_t * scales) {
    const int j = (int)(b % 8);
    const tsr_block_q6_K & x = ((const tsr_block_q6_K *)row)[b / 8];
    *d = fp16_avx2(x.d);
    *scales = (uint16_t)(int16_t)x.scales[2 * j] | (uint32_t)(uint16_t)(int16_t)x.scales[2 * j + 1] << 16;
    return q6_K_half_levels_avx2(row, b);
}

/* ---- the packer ------------------------------------------------------------------------ */

/* Bytes of 256 weights of type T (the prefetcher's step per block). */
template <enum tsr_type T> static constexpr size_t bytes_per_256() {
    switch (T) {
        case TSR_TYPE_Q8_0: return 8 * sizeof(tsr_block_q8_0);
        case TSR_TYPE_Q4_0: return 8 * sizeof(tsr_block_q4_0);
        case TSR_TYPE_Q4_1: return 8 * sizeof(tsr_block_q4_1);
        case TSR_TYPE_Q5_0: return 8 * sizeof(tsr_block_q5_0);
        case TSR_TYPE_Q5_1: return 8 * sizeof(tsr_block_q5_1);
        case TSR_TYPE_IQ4_NL: return 8 * sizeof(tsr_block_iq4_nl);
        case TSR_TYPE_Q2_K: return sizeof(tsr_block_q2_K);
        case TSR_TYPE_Q3_K: return sizeof(tsr_block_q3_K);
        case TSR_TYPE_Q4_K: return sizeof(tsr_block_q4_K);
        case TSR_TYPE_Q5_K: return sizeof(tsr_block_q5_K);
        case TSR_TYPE_Q6_K: return sizeof(tsr_block_q6_K);
        default: return 0;
    }
}

/* Four rows' 32 bytes into the quads of one panel block: quad q of row r at q * R * 4 +
 * r * 4 (q points at row r0's first quad). A 4 x 8 transpose of 32-bit words. */
template <int R>
TSR_TARGET_AVX2 static inline void store_quads4_avx2(uint8_t * q, const __m256i v[4]) {
    const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    const __m256i u[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),   /* quads 0 1 | 4 5 */
                          _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};  /* quads 2 3 | 6 7 */
    TSR_UNROLL(4)
    for (int i = 0; i < 4; ++i) {
        _mm_storeu_si128((__m128i *)(q + (size_t)i * R * 4), _mm256_castsi256_si128(u[i]));
        _mm_storeu_si128((__m128i *)(q + (size_t)(i + 4) * R * 4), _mm256_extracti128_si256(u[i], 1));
    }
}

/* A block of 32 as panel bytes and the 32-bit words that follow them: the float scale
 * (half panels: the first 16's d * sc); for min panels then the float min, for half panels
 * the second 16's d * sc. */
struct panel_block {
    __m256i q;
    float f[2];
};

/* A row's decoded super-block header, kept while the packer walks the row's blocks of 32:
 * the fields converted once instead of once per block, for the types whose headers cost
 * that (Q4_K / Q5_K min panels, Q6_K half panels, Q3_K); the others' headers are per block
 * or, Q2_K's, part of its requantization, and their cache is empty. */
struct no_header_cache {};
template <enum tsr_type T, int KIND> struct header_cache_of { using type = no_header_cache; };
template <> struct header_cache_of<TSR_TYPE_Q4_K, PANEL_MIN> { using type = k4_header8; };
template <> struct header_cache_of<TSR_TYPE_Q5_K, PANEL_MIN> { using type = k4_header8; };
template <> struct header_cache_of<TSR_TYPE_Q6_K, PANEL_HALVES> { using type = q6k_header16; };
template <> struct header_cache_of<TSR_TYPE_Q3_K, PANEL_Q8> { using type = q3k_header16; };
template <enum tsr_type T, int KIND> using header_cache = typename header_cache_of<T, KIND>::type;

/* Block b (of 32) of a row of type T in the panel layout KIND (panel_kind); h: that row's
 * header cache. */
template <enum tsr_type T, int KIND>
TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE panel_block panel_block_avx2(const char * row, int64_t b, header_cache<T, KIND> & h) {
    panel_block p{};
    if constexpr (std::is_same_v<header_cache<T, KIND>, k4_header8>) {
        if (b / 8 != h.sb) k4_header8_avx2<T>(row, b / 8, h);
        p.q = k4_levels_avx2<T>(row, b);
        p.f[0] = h.a[b % 8];
        p.f[1] = h.b[b % 8];
    } else if constexpr (KIND == PANEL_MIN) {
        p.q = min_block_avx2<T>(row, b, &p.f[0], &p.f[1]);
    } else if constexpr (KIND == PANEL_HALVES) {
        static_assert(T == TSR_TYPE_Q6_K, "Q6_K's are the only half panels");
        if (b / 8 != h.sb) q6k_header16_avx2(row, b / 8, h);
        p.q = q6_K_half_levels_avx2(row, b);
        p.f[0] = h.ds[2 * (b % 8)];
        p.f[1] = h.ds[2 * (b % 8) + 1];
    } else if constexpr (T == TSR_TYPE_Q3_K) {
        if (b / 8 != h.sb) q3k_header16_avx2(row, b / 8, h);
        const int j = (int)(b % 8);
        p.q = q3_K_scaled_levels_avx2(((const tsr_block_q3_K *)row)[b / 8], j, h.neg_sc[2 * j], h.neg_sc[2 * j + 1]);
        p.f[0] = h.neg_d;
    } else {
        p.q = block_i8_avx2<T>(row, b, &p.f[0]);
    }
    return p;
}

/* An int8 A panel of R rows (R a multiple of 4) of type T in the layout KIND; SUB is
 * subtracted from every level (8: Q4_0's nibbles as signed levels, for the AMX kernels),
 * then FLIP is XOR-ed into every byte (0x80: signed values made unsigned for the offset
 * kernels), PAD fills rows past `rows` and blocks past K (a zero weight in the panel's
 * encoding, scales and min 0). Each pass prefetches the next four rows' blocks: a pass
 * reads only kc weights of each row, too few for the hardware prefetcher to follow, and
 * DRAM latency was most of the time. */
template <int R, enum tsr_type T, int FLIP, int PAD, int KIND = PANEL_Q8, int SUB = 0>
TSR_TARGET_AVX2 static void pack_panel_i8_avx2(const char * a, size_t lda, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    constexpr int NF = KIND == PANEL_Q8 ? 1 : 2;  /* floats per row after the quads */
    uint8_t * d = (uint8_t *)dst;
    const int nb = kc / 32;
    const int64_t b0 = k0 / 32;
    const int nbv = (int)std::max<int64_t>(0, std::min<int64_t>(nb, K / 32 - b0));
    const __m256i flip = _mm256_set1_epi8((char)FLIP);
    const size_t block_bytes = (size_t)R * (32 + 4 * NF);
    for (int r0 = 0; r0 < R; r0 += 4) {
        const int live = std::max(0, std::min(4, rows - r0));
        header_cache<T, KIND> hdr[4];  /* rows r0..r0 + 3 */
        for (int b = 0; b < nb; ++b) {
            /* past the panel this is the next panel's rows; prefetches never fault */
            const char * ahead = a + (size_t)(r0 + 4) * lda + (size_t)(b0 + b) * bytes_per_256<T>() / 8;
            TSR_UNROLL(4)
            for (int i = 0; i < 4; ++i) _mm_prefetch(ahead + (size_t)i * lda, _MM_HINT_T0);
            panel_block p[4];
            if (live == 4 && b < nbv) {  /* the common case unrolled: four independent blocks in flight */
#pragma GCC unroll 4
                for (int i = 0; i < 4; ++i) p[i] = panel_block_avx2<T, KIND>(a + (size_t)(r0 + i) * lda, b0 + b, hdr[i]);
            } else {
                TSR_UNROLL(4)
                for (int i = 0; i < 4; ++i) {
                    if (i < live && b < nbv) p[i] = panel_block_avx2<T, KIND>(a + (size_t)(r0 + i) * lda, b0 + b, hdr[i]);
                    else p[i] = panel_block{_mm256_set1_epi8((char)((PAD ^ FLIP) + SUB)), {0.0f, 0.0f}};
                }
            }
            if constexpr (SUB != 0)
                TSR_UNROLL(4)
                for (int i = 0; i < 4; ++i) p[i].q = _mm256_sub_epi8(p[i].q, _mm256_set1_epi8((char)SUB));
            const __m256i v[4] = {_mm256_xor_si256(p[0].q, flip), _mm256_xor_si256(p[1].q, flip), _mm256_xor_si256(p[2].q, flip),
                                  _mm256_xor_si256(p[3].q, flip)};
            uint8_t * q = d + (size_t)b * block_bytes;
            store_quads4_avx2<R>(q + r0 * 4, v);
            for (int k = 0; k < NF; ++k)
                _mm_storeu_ps((float *)(q + R * (32 + 4 * k)) + r0, _mm_setr_ps(p[0].f[k], p[1].f[k], p[2].f[k], p[3].f[k]));
        }
    }
}

/* pack_panel_i8_avx2 as the packer family packed_gemms takes; FLIP as the ISA's Q8_0
 * panels (0x80 when its kernel offsets A), which also pads; the min panels are neither
 * flipped nor padded (their q is unsigned already, 0 is a zero weight). */
template <int R, int FLIP>
struct x86_packers {
    template <enum tsr_type T> struct of {
        static constexpr int flip = has_block_min(T) ? 0 : FLIP;
        static constexpr pack_panel_fn pack = pack_panel_i8_avx2<R, T, flip, flip, panel_kind_of(T)>;
    };
};

} // namespace tcpu
} // namespace
#endif /* TSR_CPU_HAVE_X86_KERNELS */
