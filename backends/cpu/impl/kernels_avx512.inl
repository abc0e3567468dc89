/*
 * kernels_avx512.inl - x86-64 AVX-512 (F/BW/VL/DQ) kernels, with AVX512-BF16 (vdpbf16ps)
 * and AVX512-VNNI (vpdpbusd) variants chosen at run time when the CPU has them.
 */
#if defined(TSR_CPU_HAVE_X86_KERNELS)
TSR_SIMD_WARNINGS_OFF
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

/* F16 row -> F32, 16 a step and the tail masked (flash attention converts rows of 64-128
 * halves: the AVX2 loop's 8 a step and scalar tail took as long as the tile's scores). */
TSR_TARGET_AVX512 static void cvt_f16_f32_avx512(const void * src, float * dst, int64_t n) {
    const uint16_t * s = (const uint16_t *)src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s + i)));
    }
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
 * the activations' side arrays a group of 4 blocks (Q8_0's rows step a block pair of it,
 * the others' the whole group). The block scales are broadcast words (Q8_0) or come out
 * of the vector loaded at the group start with one word permute (Q4_0), never a gather,
 * and yq8's side arrays supply the bias and the y scales already laid out per lane. Every
 * load stays inside the group: no masked loads (slow when streaming) and no reads past
 * the row. Blocks beyond a multiple of 4 go through the one-block kernels above. */
/* Two fp16 scales, each broadcast over 8 words. Q8_0's scales are read as words of their
 * own: a wide load over the block that also covers the qs makes clang rebuild the qs loads
 * from it with scalar shifts. */
TSR_TARGET_AVX512VNNI static inline __m256i fp16_pair_x8(const void * d0, const void * d1) {
    uint16_t h0, h1;
    std::memcpy(&h0, d0, 2);
    std::memcpy(&h1, d1, 2);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)h0)), _mm_set1_epi16((short)h1), 1);
}

/* Q8_0 against the side arrays of 4 blocks (yside_q8), the rows stepping a block pair (68
 * bytes) at a time: the 4 rows take turns every pair, not every 4 blocks. The same loads and
 * sums as 136-byte steps (acc[0] the groups' first pairs, acc[1] their second), but from DRAM, in
 * one process alternating 8 times (cpu_bench --prefetch's low bit choosing the order, 2
 * threads, Zen 5), 0.95-1.05 x the read (paired medians, mean 1.01) against 136-byte steps'
 * 0.83-0.96 (mean 0.91), every run in favour. Tried before and not kept: a CPU_REPACK layout
 * of each row's 32 blocks as their 32 scales then their levels XOR 0x80 (one aligned load and
 * one vpdpbusd a block pair, the scales spread by vpermps): in cache 1.29x, from DRAM no
 * faster (0.82-0.91 x the read); wide non-overlapping loads with word permutes, gathered
 * scales, prefetch distances 1024-6144, T1 / T2 hints, 2 or 3 lines a 136-byte step. */
template <int R>
TSR_TARGET_AVX512VNNI static void gemv_q8_0_rows(int64_t n, const char * x, size_t lda, const yq8 * y, float * out) {
    const int64_t nb = n / 32, ng = nb / 4;
    const yside_q8 * ys = side_after<yside_q8>(y, nb);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const matvec_prefetcher<TSR_TYPE_Q8_0, 2 * sizeof(tsr_block_q8_0)> prefetch;
    __m512 acc[2][R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[0][r] = acc[1][r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; ++g) {
        const yside_q8 & s = ys[g];
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {   /* block pair h of the group */
            const __m512i yq = _mm512_loadu_si512((const void *)(s.qs + 64 * h));
            const __m512i yb = _mm512_loadu_si512((const void *)(s.bias + 16 * h));
            const __m512 dy = _mm512_loadu_ps(s.d + 16 * h);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                const char * xb = x + (size_t)r * lda + (size_t)(4 * g + 2 * h) * sizeof(tsr_block_q8_0);
                prefetch(xb);
                const __m512 sc = _mm512_mul_ps(_mm512_cvtph_ps(fp16_pair_x8(xb, xb + 34)), dy);
                const __m512i q = _mm512_xor_si512(load2x32(xb + 2, xb + 36), flip);
                acc[h][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(yb, q, yq)), sc, acc[h][r]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][r], acc[1][r]));
        if (ng * 4 < nb)
            out[r] += dot_q8_0_avx512vnni(n - ng * 128, (const tsr_block_q8_0 *)(x + (size_t)r * lda) + ng * 4, y + ng * 4);
    }
}

/* Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL against yq8 and its Q4 side arrays (y_side), 4 blocks per
 * step: one 64-byte and one 32-byte load cover the group (the last 32 bytes, so
 * nothing past it is read), word permutes pull out the qs, the fp16 d (and m) and Q5's qh
 * halves; levels are unsigned against signed activations. IQ4_NL's table is read with +128
 * and Q5_0's levels carry +16: the side arrays' -8 * sum bias scaled to match starts the
 * integer sum. Q4_1 / Q5_1's min meets the block sums (bias / -8) in float. GFNI (a CPU
 * with it): the high nibbles in one instruction and Q5's fifth bits by q5_levels_gfni,
 * the same integers in fewer instructions (in cache, one core: Q4_0 33 -> 35 GB/s, Q4_1
 * 29 -> 30, Q5_0 24 -> 25.5, Q5_1 22.5 -> 24.5, IQ4_NL 29 -> 30.5). Q4_0 and IQ4_NL (9
 * words a block) take their qs by one word permute of the two loads. Their two-groups-a-step
 * path (8 blocks from four overlapping loads at bytes 0, 8, 72 and 80 of 144: one float
 * scaling per 8 blocks) was 4-10 % faster in cache but read DRAM at a third of its in-cache
 * rate on Zen 5 (2 threads: Q4_0 0.54-0.57, IQ4_NL 0.53-0.61 x the read against 0.97-1.01
 * and 1.04-1.12 without it, one thread 20 against 46 GB/s): removed. The other types' blocks
 * take their qs and qh by dword permutes (q32_layout::dwords): a word permute of two
 * sources is two uops on the port that also runs the byte shuffles, the conversions and
 * GFNI, and that port was the limit (Q4_1 30 -> 31.5, Q5_0 25.4 -> 29.3, Q5_1 24.4 -> 29.7);
 * with VBMI, by byte permutes straight from the loads (q32_group_vbmi). */
template <tsr_type T> struct q32_layout {
    static constexpr int words = T == TSR_TYPE_Q4_1 ? 10 : T == TSR_TYPE_Q5_0 ? 11 : T == TSR_TYPE_Q5_1 ? 12 : 9;
    static constexpr int qs = T == TSR_TYPE_Q4_1 ? 2 : T == TSR_TYPE_Q5_0 ? 3 : T == TSR_TYPE_Q5_1 ? 4 : 1;  /* first qs word */
    static constexpr bool has_min = T == TSR_TYPE_Q4_1 || T == TSR_TYPE_Q5_1;
    static constexpr bool has_qh = T == TSR_TYPE_Q5_0 || T == TSR_TYPE_Q5_1;
    static constexpr int z1 = 4 * words - 16;  /* first word of the group's last 32 bytes */
    /* word w of the group as an index into (first 64 bytes, last 32 bytes) for vpermt2w */
    static constexpr uint16_t at(int w) { return (uint16_t)(w < 32 ? w : 32 + (w - z1)); }
    /* The dword path: the qs (and Q5's qh) come out of the loads by dword permutes, one uop
     * each where a word permute of two sources is two, on the port the level building also
     * needs. Q4_1 / Q5_1 blocks are whole dwords (a header of d, m (and qh), then 4 qs
     * dwords) in the group's first 64 and last 32 bytes; Q5_0's (22 bytes) are, for the
     * even blocks, in the 64 bytes from byte 2 (taken out of the other two loads by a word
     * permute: a load at byte 2 read DRAM at a third of the rate, Q5_0 0.38-0.70 against
     * 1.02-1.05 x the read on Zen 5) and, for the odd ones, in the last 64. */
    static constexpr bool dwords = T != TSR_TYPE_Q4_0 && T != TSR_TYPE_IQ4_NL;
    static constexpr int hd = has_qh ? 2 : 1;   /* Q4_1 / Q5_1 header dwords */
    static constexpr int qb = T == TSR_TYPE_Q5_0 ? 0 : 4;   /* block j's qh: byte qb of lane j */
    static constexpr int da = T == TSR_TYPE_Q5_0 ? 2 : 0;   /* the dword permutes' sources: 64 bytes from da, */
    static constexpr int db = T == TSR_TYPE_Q5_0 ? 8 * words - 64 : 2 * z1;  /* and 64 (32) from db */
    /* byte `byte` of the group (in block j) as a dword index into those two sources */
    static constexpr uint32_t at_d(int j, int byte) {
        const bool second = T == TSR_TYPE_Q5_0 ? j % 2 == 1 : byte >= 64;
        return second ? 16 + (uint32_t)(byte - db) / 4 : (uint32_t)(byte - da) / 4;
    }
};

/* The word path (Q4_0 / IQ4_NL's odd group, 9-word blocks): vpermt2w indices for lanes
 * 8j.. = block j's 8 qs words, and vpermw indices for d x4 per block (every d in the first
 * 64 bytes). */
template <tsr_type T> struct q32_indices {
    alignas(64) uint16_t qs[32], dm[32];
    constexpr q32_indices() : qs{}, dm{} {
        using L = q32_layout<T>;
        static_assert(L::dwords || 3 * L::words < 32, "block 3's d within the group's first 64 bytes");
        for (int l = 0; l < 32; ++l) {
            qs[l] = L::at(L::words * (l / 8) + L::qs + l % 8);
            dm[l] = (uint16_t)(L::words * (l / 4 % 4));
        }
    }
};
template <tsr_type T> static constexpr q32_indices<T> q32_idx{};

/* vpermt2w indices of the 64 bytes from group byte da (Q5_0's even blocks, dword-aligned
 * there) out of the loads at bytes 0 and db: word w is byte da + 2w of the group. */
template <tsr_type T> struct q32_da_indices {
    alignas(64) uint16_t w[32];
    constexpr q32_da_indices() : w{} {
        using L = q32_layout<T>;
        static_assert(L::da % 2 == 0 && L::db % 2 == 0 && L::db <= 64 && L::da + 62 < L::db + 64, "whole words of the two loads");
        for (int i = 0; i < 32; ++i) {
            const int byte = L::da + 2 * i;
            w[i] = (uint16_t)(byte < 64 ? byte / 2 : 32 + (byte - L::db) / 2);
        }
    }
};
template <tsr_type T> static constexpr q32_da_indices<T> q32_da_idx{};

/* The dword path (q32_layout::dwords): vpermt2d indices that put block j's 4 qs dwords in
 * 128-bit lane j, and its header dwords repeated over lane j (d, m words 8j, 8j + 1; Q5_1's
 * qh bytes 16j + 4.. 7); then one-source word permutes of that header vector: d x4 per block
 * then m x4, and the qh low words of the 4 blocks then their high words. */
template <tsr_type T> struct q32_dword_indices {
    alignas(64) uint32_t qs[16], hdr[16];
    alignas(64) uint16_t dm[32], qh[32];
    constexpr q32_dword_indices() : qs{}, hdr{}, dm{}, qh{} {
        using L = q32_layout<T>;
        const bool q5_0 = T == TSR_TYPE_Q5_0;
        for (int l = 0; l < 16; ++l) {
            const int j = l / 4, block = 2 * L::words * j;
            qs[l] = L::at_d(j, block + 2 * L::qs + 4 * (l % 4));
            hdr[l] = L::at_d(j, block + (q5_0 ? 2 : 4 * (l % L::hd)));  /* Q5_0: its qh */
        }
        for (int l = 0; l < 32; ++l) {
            /* Q5_0's d words from the group's first 64 bytes and the second source (vpermt2w);
             * the others' from the header vector (vpermw) */
            const int d_byte = 2 * L::words * (l / 4 % 4);
            dm[l] = q5_0 ? (uint16_t)(l >= 16 ? 0 : d_byte < 64 ? d_byte / 2 : 32 + (d_byte - L::db) / 2)
                         : (uint16_t)(8 * (l / 4 % 4) + (l < 16 ? 0 : 1));
            qh[l] = (uint16_t)(8 * (l % 4) + L::qb / 2 + l / 4 % 2);
        }
    }
};
template <tsr_type T> static constexpr q32_dword_indices<T> q32_didx{};

/* gf2p8affineqb's output bit b of a byte is the parity of the input bits set in byte 7 - b
 * of the matrix qword. The matrix (qs >> 4) & 15 of every byte: output bits 0-3 = input
 * bits 4-7, one instruction for a shift and a mask. */
static constexpr long long gf_high_nibble = 0x1020408000000000ll;

/* Q5_0 / Q5_1's unsigned 5-bit levels of 4 blocks (lane j: block j) with GFNI. The fifth bits
 * move into place as the product of a constant and a matrix made of qh: with byte 3 of a
 * qword (output bit 4's row) = the qh byte of its 8 elements and the data byte i = 1 << i,
 * output byte i is 16 * (bit i of that qh byte). vpshufb builds the matrices of the low
 * nibbles' elements (qh bytes 0, 1 of the lane's block) and the high nibbles' (bytes 2, 3);
 * one ternary-logic op merges them with the nibbles. Same integers as the masked adds. */
TSR_TARGET_AVX512VNNI_GFNI static inline void q5_levels_of_matrices(__m512i qs, __m512i mat_lo, __m512i mat_hi, __m512i & lo, __m512i & hi) {
    const __m512i one_hot = _mm512_set1_epi64(0x8040201008040201ll), m4 = _mm512_set1_epi8(0x0F);
    const __m512i b_lo = _mm512_gf2p8affine_epi64_epi8(one_hot, mat_lo, 0);
    const __m512i b_hi = _mm512_gf2p8affine_epi64_epi8(one_hot, mat_hi, 0);
    lo = _mm512_ternarylogic_epi32(qs, m4, b_lo, 0xEA);  /* (a & b) | c */
    hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(qs, 4), m4, b_hi, 0xEA);
}
template <int QB>  /* the byte of lane j where block j's qh starts */
TSR_TARGET_AVX512VNNI_GFNI static inline void q5_levels_gfni(__m512i qs, __m512i qh_lanes, __m512i & lo, __m512i & hi) {
    const __m512i sel_lo = _mm512_broadcast_i32x4(_mm_setr_epi8(-128, -128, -128, QB, -128, -128, -128, -128, -128, -128, -128, QB + 1, -128, -128, -128, -128));
    const __m512i sel_hi = _mm512_broadcast_i32x4(_mm_setr_epi8(-128, -128, -128, QB + 2, -128, -128, -128, -128, -128, -128, -128, QB + 3, -128, -128, -128, -128));
    q5_levels_of_matrices(qs, _mm512_shuffle_epi8(qh_lanes, sel_lo), _mm512_shuffle_epi8(qh_lanes, sel_hi), lo, hi);
}
TSR_TARGET_AVX512VNNI_GFNI static inline __m512i high_nibbles_gfni(__m512i qs) {
    return _mm512_gf2p8affine_epi64_epi8(qs, _mm512_set1_epi64(gf_high_nibble), 0);
}

/* With VBMI, a Q4_1 / Q5_0 / Q5_1 group (4 blocks: d, (m), (qh), qs) in one byte permute each
 * for the qs (lane j: block j's 16), the d (and m) words (d x4 per block, then m x4, as
 * q32_dword_indices::dm) and Q5's two GF(2) matrices q5_levels_gfni builds (lane j's bytes 3
 * and 11: qh bytes 0, 1 of block j, then 2, 3; the other bytes zeroed by the permute's
 * mask), each straight from the two loads (the group's bytes 0..63 and, from byte sb, the
 * rest), where the dword path takes two dword permutes, a word permute for d (and m), two
 * vpshufb for Q5's matrices and for Q5_0 a word permute first to align its even blocks.
 * On a 2-core Zen 4 VM (zmm ops double-pumped, these kernels compute-bound), in cache, one
 * core: Q4_1 24.0 -> 25.7 GB/s, Q5_0 21.2 -> 24.7, Q5_1 21.7 -> 23.3; one core from DRAM
 * (read 31-33 GB/s), builds alternating twice: Q4_1 22.6-22.8 -> 23.7-23.8, Q5_0 19.1-19.2 ->
 * 21.5-21.7, Q5_1 20.9-21.0 -> 22.0. Not taken: Q4_1 / Q5_1's qs by their dword permute
 * (the same rate), and Q4_0 / IQ4_NL's qs by a byte permute in place of their word permute
 * (in cache 32 -> 28-29 and 27 -> 25-26 GB/s). */
template <tsr_type T> struct q32_vbmi_indices {
    using L = q32_layout<T>;
    /* where the second source starts in the group: Q5_0's 64-byte load at db, the others'
     * 32 bytes at 2 z1 */
    static constexpr int sb = T == TSR_TYPE_Q5_0 ? L::db : 2 * L::z1;
    static constexpr uint8_t at(int byte) { return (uint8_t)(byte < 64 ? byte : 64 + byte - sb); }
    alignas(64) uint8_t qs[64], dm[64], mat_lo[64], mat_hi[64];
    constexpr q32_vbmi_indices() : qs{}, dm{}, mat_lo{}, mat_hi{} {
        const int qh = T == TSR_TYPE_Q5_0 ? 2 : 4;  /* qh's first byte in a block */
        for (int l = 0; l < 64; ++l) {
            const int j = l / 16, i = l % 16, block = 2 * L::words * j;
            qs[l] = at(block + 2 * L::qs + i);
            /* word w < 16: block w / 4's d; 16..31: its m */
            const int w = l / 2;
            dm[l] = w < 16 || L::has_min ? at(2 * L::words * (w % 16 / 4) + 2 * (w >= 16) + l % 2) : 0;
            mat_lo[l] = L::has_qh ? at(block + qh + (i >= 8)) : 0;
            mat_hi[l] = L::has_qh ? at(block + qh + 2 + (i >= 8)) : 0;
        }
    }
};
template <tsr_type T> static constexpr q32_vbmi_indices<T> q32_vbmi_idx{};

/* The group's d (and m) words (dm) and levels (lo, hi) from its loads z0 (bytes 0..63) and
 * zb (from q32_vbmi_indices::sb). */
template <tsr_type T>
TSR_TARGET_AVX512VNNI_GFNI_VBMI static inline void q32_group_vbmi(__m512i z0, __m512i zb, __m512i & dm, __m512i & lo, __m512i & hi) {
    const q32_vbmi_indices<T> & vi = q32_vbmi_idx<T>;
    const __m512i qs = _mm512_permutex2var_epi8(z0, _mm512_load_si512((const void *)vi.qs), zb);
    dm = _mm512_permutex2var_epi8(z0, _mm512_load_si512((const void *)vi.dm), zb);
    if constexpr (q32_layout<T>::has_qh) {
        const __mmask64 matrix_bytes = 0x0808080808080808ull;  /* bytes 3 and 11 of every lane */
        q5_levels_of_matrices(qs, _mm512_maskz_permutex2var_epi8(matrix_bytes, z0, _mm512_load_si512((const void *)vi.mat_lo), zb),
                              _mm512_maskz_permutex2var_epi8(matrix_bytes, z0, _mm512_load_si512((const void *)vi.mat_hi), zb), lo, hi);
    } else {
        lo = _mm512_and_si512(qs, _mm512_set1_epi8(0x0F));
        hi = high_nibbles_gfni(qs);
    }
}

template <tsr_type T, int R, bool GFNI = false, bool VBMI = false>
TSR_TARGET_AVX512VNNI static inline void gemv_q32_rows(int64_t n, const char * x, size_t lda, const yq8 * y, float * out) {
    static_assert(!VBMI || (GFNI && q32_layout<T>::dwords), "the GFNI + VBMI kernels: Q4_1, Q5_0, Q5_1");
    using L = q32_layout<T>;
    const int64_t nb = n / 32, ng = nb / 4;
    const yside_q4 * ys = side_after<yside_q4>(y, nb);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m10 = _mm512_set1_epi8(0x10);
    const __m512i table = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)tsr_impl::iq4nl_values)), _mm512_set1_epi8((char)0x80));
    const auto & di = q32_didx<T>;
    const __m512i iq = _mm512_load_si512(L::dwords ? (const void *)di.qs : (const void *)q32_idx<T>.qs);
    const __m512i idm = _mm512_load_si512(L::dwords ? (const void *)di.dm : (const void *)q32_idx<T>.dm);
    const __m512i ih = _mm512_load_si512((const void *)di.qh), ihd = _mm512_load_si512((const void *)di.hdr);
    const matvec_prefetcher<T, 16 * L::words> prefetch;
    const __m512i ida = _mm512_load_si512((const void *)q32_da_idx<T>.w);
    __m512 acc[R];
    /* Q4_1 / Q5_1's mins over a quad of groups: word 16 + 4j + q of mins[r] holds block j's m
     * of the quad's group q (taken from its dm by a masked word move), and lane 4j + q of
     * ysum_dy4 the matching block sum times the y scale; one conversion and one fma a quad
     * apply them, where each group took an extract, a conversion and an fma a row. */
    __m512i mins[R];
    __m512 ysum_dy4 = _mm512_setzero_ps();
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps(), mins[r] = _mm512_setzero_si512();
    for (int64_t g = 0; g < ng; ++g) {
        const yside_q4 & s = ys[g];
        const __m512i ylo = _mm512_loadu_si512((const void *)s.lo), yhi = _mm512_loadu_si512((const void *)s.hi);
        const __m512i yb8 = _mm512_loadu_si512((const void *)s.bias);  /* -8 * sum in lane 4j */
        const __m512i yb = T == TSR_TYPE_Q4_0 ? yb8 : T == TSR_TYPE_IQ4_NL ? _mm512_slli_epi32(yb8, 4) : T == TSR_TYPE_Q5_0 ? _mm512_slli_epi32(yb8, 1) : _mm512_setzero_si512();
        const __m512 dy = _mm512_loadu_ps(s.d);
        /* the block sums times the y scales, once per group for every row's mins (lane 4j
         * only): one multiply less per row and group, Q4_1 +7 % in-cache */
        const int q = (int)(g & 3);  /* the group's place in its quad */
        if (L::has_min) {
            const __m512 ysum_dy = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(yb8), _mm512_set1_ps(-0.125f)), dy);
            /* lane 4j + q takes lane 4j */
            ysum_dy4 = _mm512_mask_permutexvar_ps(ysum_dy4, (__mmask16)(0x1111u << q), _mm512_sub_epi32(lanes, _mm512_set1_epi32(q)), ysum_dy);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const char * xb = x + (size_t)r * lda + (size_t)g * 8 * L::words;
            prefetch(xb);
            const __m512i z0 = _mm512_loadu_si512((const void *)xb);
            const __m512i z1 = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(xb + 2 * L::z1)));
            /* the rest of the group: Q5_0's 64 bytes from db, the others' last 32 */
            const __m512i zb = L::da ? _mm512_loadu_si512((const void *)(xb + L::db)) : z1;
            __m512i qs, dm, hdr = z0;
            __m512i lo, hi;
            if constexpr (VBMI) {  /* d (and m) and the levels */
                q32_group_vbmi<T>(z0, zb, dm, lo, hi);
            } else if constexpr (L::dwords) {
                /* Q5_0: the 64 bytes from group byte da by a word permute of the two loads; a
                 * third load there, overlapping the first, read DRAM at a third of the rate */
                const __m512i za = L::da ? _mm512_permutex2var_epi16(z0, ida, zb) : z0;
                qs = _mm512_permutex2var_epi32(za, iq, zb);
                hdr = _mm512_permutex2var_epi32(za, ihd, zb);
                dm = L::has_min ? _mm512_permutexvar_epi16(idm, hdr) : _mm512_permutex2var_epi16(z0, idm, zb);
            } else {
                qs = _mm512_permutex2var_epi16(z0, iq, z1);
                dm = _mm512_permutexvar_epi16(idm, z0);
            }
            if constexpr (VBMI) {
                /* the levels came with the permutes */
            } else if constexpr (GFNI && L::has_qh) {
                q5_levels_gfni<L::qb>(qs, hdr, lo, hi);
            } else if constexpr (GFNI) {
                lo = _mm512_and_si512(qs, m4);
                hi = high_nibbles_gfni(qs);
            } else {
                lo = _mm512_and_si512(qs, m4);
                hi = _mm512_and_si512(_mm512_srli_epi16(qs, 4), m4);
            }
            if (T == TSR_TYPE_IQ4_NL) {
                lo = _mm512_shuffle_epi8(table, lo);
                hi = _mm512_shuffle_epi8(table, hi);
            }
            if constexpr (L::has_qh && !GFNI) {
                /* elements 0-15 of each block take qh bits 0-15, elements 16-31 bits 16-31; a
                 * masked byte add of 16 onto levels below 16 sets bit 4 in one op */
                const __m128i h = _mm512_castsi512_si128(_mm512_permutexvar_epi16(ih, hdr));
                lo = _mm512_mask_add_epi8(lo, _cvtu64_mask64((uint64_t)_mm_cvtsi128_si64(h)), lo, m10);
                hi = _mm512_mask_add_epi8(hi, _cvtu64_mask64((uint64_t)_mm_extract_epi64(h, 1)), hi, m10);
            }
            const __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(yb, lo, ylo), hi, yhi);
            const __m512 dx = _mm512_cvtph_ps(_mm512_castsi512_si256(dm));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dx, dy), acc[r]);
            if (L::has_min) mins[r] = _mm512_mask_mov_epi16(mins[r], (__mmask32)(0x11110000u << q), dm);
        }
        if (L::has_min && (q == 3 || g == ng - 1)) {
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r)
                acc[r] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(mins[r], 1)), ysum_dy4, acc[r]);
            /* a last, partial quad leaves the mins of the groups it lacks (a quad before's, already
             * applied) in their words: zeros meet them */
            ysum_dy4 = _mm512_setzero_ps();
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        out[r] = _mm512_reduce_add_ps(acc[r]);
        if (ng * 4 >= nb) continue;
        const char * tail = x + (size_t)r * lda + (size_t)ng * 8 * L::words;
        if constexpr (T == TSR_TYPE_Q4_0) out[r] += dot_q4_0_avx512vnni(n - ng * 128, (const tsr_block_q4_0 *)tail, y + ng * 4);
        else out[r] += row_quant_dots<matvec_avx2>::dot_yq8<T>(n - ng * 128, tail, y + ng * 4);
    }
}

TSR_TARGET_AVX512VNNI static float gemv_q8_0_avx512vnni(int64_t n, const tsr_block_q8_0 * x, const yq8 * y) {
    float o;
    gemv_q8_0_rows<1>(n, (const char *)x, 0, y, &o);
    return o;
}
TSR_TARGET_AVX512VNNI static void dot4_q8_0_avx512vnni(int64_t n, const char * x, size_t lda, const void * y, float * out) {
    gemv_q8_0_rows<4>(n, x, lda, (const yq8 *)y, out);
}
TSR_TARGET_AVX512VNNI static void dot1_q8_0_avx512vnni(int64_t n, const char * x, size_t lda, const void * y, float * out) {
    gemv_q8_0_rows<1>(n, x, lda, (const yq8 *)y, out);
}

/* quantize_y_scalar's bytes, 16 blocks at a time: every mat-vec of a quantized type
 * quantizes its activation row first, and the ymm kernel's 1.35 us per 4096 elements was
 * most of the 2.1 us each such node spends before its weights stream. The same arithmetic
 * as quantize_y_avx2 (NaN as 0 before the max and after the scaling, clamp to +-127, round
 * to nearest even; max and integer sums exact in any order), but the 16 blocks' d and 1 / d
 * in one vector division each: the scalar divisions per block were its latency. */
TSR_TARGET_AVX512 static inline __m512 nan_to_zero_avx512(__m512 v) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v); }
TSR_TARGET_AVX512 static inline __m512i quantize16_avx512(__m512 v, __m512 vid) {
    const __m512 q = nan_to_zero_avx512(_mm512_mul_ps(v, vid));
    return _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(q, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f)));
}
TSR_TARGET_AVX512 static void quantize_y_avx512(const float * x, yq8 * y, int64_t n) {
    const int64_t nb = n / 32;
    for (int64_t b0 = 0; b0 < nb; b0 += 16) {
        const int m = (int)std::min<int64_t>(16, nb - b0);
        alignas(64) float amax[16] = {}, d[16], id[16];
        for (int j = 0; j < m; ++j) {
            const float * xb = x + (b0 + j) * 32;
            amax[j] = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(nan_to_zero_avx512(_mm512_loadu_ps(xb))),
                                                         _mm512_abs_ps(nan_to_zero_avx512(_mm512_loadu_ps(xb + 16)))));
        }
        const __m512 vd = _mm512_div_ps(_mm512_load_ps(amax), _mm512_set1_ps(127.0f));
        _mm512_store_ps(d, vd);
        _mm512_store_ps(id, _mm512_maskz_div_ps(_mm512_cmp_ps_mask(vd, _mm512_setzero_ps(), _CMP_NEQ_UQ), _mm512_set1_ps(1.0f), vd));
        for (int j = 0; j < m; ++j) {
            const float * xb = x + (b0 + j) * 32;
            const __m512 vid = _mm512_set1_ps(id[j]);
            const __m512i q0 = quantize16_avx512(_mm512_loadu_ps(xb), vid), q1 = quantize16_avx512(_mm512_loadu_ps(xb + 16), vid);
            /* the levels are within [-127, 127]: the saturating narrow is exact */
            _mm_storeu_si128((__m128i *)y[b0 + j].qs, _mm512_cvtsepi32_epi8(q0));
            _mm_storeu_si128((__m128i *)(y[b0 + j].qs + 16), _mm512_cvtsepi32_epi8(q1));
            y[b0 + j].d = d[j];
            y[b0 + j].sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        }
    }
}

/* quantize_q8k_avx2's bytes with zmm: the signed largest magnitude by q8k_signed_max (max and
 * min of finite values are exact in any order), levels rounded to nearest even and capped at
 * 127, and each zmm's 16 levels, narrowed with saturation as the ymm kernel's packs do, are
 * one sum of 16. The K-quants' mat-vec quantizes its activation row first: 1.0 us of the
 * 1.6 us each such 4096-element node spends before its weights stream. */
TSR_TARGET_AVX512 static void quantize_q8k_avx512(const float * x, tsr_block_q8_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; ++i, x += TSR_QK_K) {
        __m512 vmax = _mm512_set1_ps(-INFINITY), vmin = _mm512_set1_ps(INFINITY);
        TSR_UNROLL(16)
        for (int j = 0; j < TSR_QK_K; j += 16) {
            const __m512 v = _mm512_loadu_ps(x + j);
            vmax = _mm512_max_ps(vmax, v);
            vmin = _mm512_min_ps(vmin, v);
        }
        const float max = q8k_signed_max(_mm512_reduce_max_ps(vmax), _mm512_reduce_min_ps(vmin), x);
        std::memset(&y[i], 0, sizeof(y[i]));
        if (max == 0.0f || max != max) continue;
        const float iscale = -127.0f / max;
        const __m512 vis = _mm512_set1_ps(iscale);
        for (int j = 0; j < TSR_QK_K; j += 16) {
            const __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + j), vis)), _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(y[i].qs + j), _mm512_cvtsepi32_epi8(q));
            y[i].bsums[j / 16] = (int16_t)_mm512_reduce_add_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(-128)));
        }
        y[i].d = 1.0f / iscale;
    }
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
    TSR_UNROLL(8)
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    TSR_UNROLL(4)
    for (int i = 0; i < 4; ++i) {
        r[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2])));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2])));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
    }
    /* r[4i+j] now holds rows 4i..4i+3 interleaved for column group j; finish with 128-bit shuffles */
    TSR_UNROLL(4)
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
            TSR_UNROLL(16)
            for (int i = 0; i < 16; ++i) {
                const int row = half * 16 + i;
                r[i] = (row < rows && k0 + k < kend) ? load16_as_f32<T>(a + (size_t)row * lda, k0 + k, kend) : _mm512_setzero_ps();
            }
            transpose16(r);
            TSR_UNROLL(16)
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
            TSR_UNROLL(16)
            for (int i = 0; i < 16; ++i) {
                const int row = half * 16 + i;
                r[i] = (row < rows && p0 + p < pend) ? load16_as_f32<0>(a + (size_t)row * lda, p0 + p, pend) : _mm512_setzero_ps();
            }
            transpose16(r);
            TSR_UNROLL(16)
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

/* R rows x 32 elements per step: 2R accumulators (R = 1: the rows left over, the same
 * arithmetic). The unroll pragmas keep the accumulators in registers at -O2 too (a
 * header-only library runs at the user's optimization level). */
template <int T, int R>
TSR_TARGET_AVX512 static void dot_rows_avx512(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const float * y = (const float *)yv;
    const matvec_prefetcher<T == 1 ? TSR_TYPE_F16 : TSR_TYPE_BF16, 2 * 32> prefetch;
    __m512 acc0[R], acc1[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const char * row = x + (size_t)r * lda;
            if (T != 0) prefetch(row + 2 * i);  /* F32 streams at the read bandwidth without */
            acc0[r] = _mm512_fmadd_ps(load16_full<T>(row, i), y0, acc0[r]);
            acc1[r] = _mm512_fmadd_ps(load16_full<T>(row, i + 16), y1, acc1[r]);
        }
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 y0 = _mm512_maskz_loadu_ps(m, y + i);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc0[r] = _mm512_fmadd_ps(load16_as_f32<T>(x + (size_t)r * lda, i, n), y0, acc0[r]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
}

/* 16 floats into c (the first `valid` of them, none when valid <= 0), added to what is
 * there when accumulate. */
TSR_TARGET_AVX512 static inline void store_row16(float * c, __m512 v, int valid, bool accumulate) {
    const __mmask16 m = (__mmask16)(valid >= 16 ? 0xFFFF : valid <= 0 ? 0 : ((1u << valid) - 1));
    if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, c));
    _mm512_mask_storeu_ps(c, m, v);
}

/* Store/accumulate a 32-wide row pair of results with a lane mask for the M edge. */
TSR_TARGET_AVX512 static inline void store_row32(float * c, __m512 v0, __m512 v1, int mr_valid, bool accumulate) {
    store_row16(c, v0, mr_valid, accumulate);
    store_row16(c + 16, v1, mr_valid - 16, accumulate);
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
 * started at the B bias (undoing A's unsigned offset), then scaled into float. MINS: min
 * panels (pack.inl) keep A's q unsigned as is, start the tile at 0 and subtract A's min
 * times B's d * sum(q) per block (one more FMA per accumulator). */
template <bool MINS>
TSR_TARGET_AVX512VNNI static void gemm_i8_kernel_avx512(int kc, const void * ap, const void * bp, float * c, size_t ldc,
                                                        int mr_valid, int nr_valid, bool accumulate) {
    const uint8_t * a = (const uint8_t *)ap;
    const uint8_t * b = (const uint8_t *)bp;
    __m512 f[6][2];
    TSR_UNROLL(6)
    for (int j = 0; j < 6; ++j) { f[j][0] = _mm512_setzero_ps(); f[j][1] = _mm512_setzero_ps(); }
    for (int blk = 0; blk < kc / 32; ++blk) {
        const float * bs = (const float *)(b + 6 * 32);
        const int32_t * bq = (const int32_t *)b;
        const int32_t * bias = (const int32_t *)(b + 6 * 36);
#define TSR_IBIAS(j) (MINS ? _mm512_setzero_si512() : _mm512_set1_epi32(bias[j]))
        __m512i i00 = TSR_IBIAS(0), i01 = i00;
        __m512i i10 = TSR_IBIAS(1), i11 = i10;
        __m512i i20 = TSR_IBIAS(2), i21 = i20;
        __m512i i30 = TSR_IBIAS(3), i31 = i30;
        __m512i i40 = TSR_IBIAS(4), i41 = i40;
        __m512i i50 = TSR_IBIAS(5), i51 = i50;
#undef TSR_IBIAS
        TSR_UNROLL(8)
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
        if constexpr (MINS) {
            const float * bsum = (const float *)(b + 6 * 36);
            const __m512 m0 = _mm512_load_ps(a + 32 * 36), m1 = _mm512_load_ps(a + 32 * 36 + 64);
            TSR_UNROLL(6)
            for (int j = 0; j < 6; ++j) {
                const __m512 s = _mm512_set1_ps(bsum[j]);
                f[j][0] = _mm512_fnmadd_ps(m0, s, f[j][0]);
                f[j][1] = _mm512_fnmadd_ps(m1, s, f[j][1]);
            }
        }
        a += 32 * (MINS ? 40 : 36);
        b += 6 * 40;
    }
    for (int j = 0; j < nr_valid; ++j) store_row32(c + (size_t)j * ldc, f[j][0], f[j][1], mr_valid, accumulate);
}

/* Q6_K's GEMM micro-kernel: A the half panels (levels offset by 128 as Q8_0's, d * sc of
 * each 16 as floats), B Q8_K columns in the half panels' B layout (pack_panel_q8k_halves_b:
 * the super-block's d, a bias per 16 from its bsums); 32 x 4 tile. Per 32 k each half gets
 * its own integer tile (started at its bias), converted and scaled by its rows' d * sc into
 * a per-super-block float sum; the column's d meets that sum once per 256 k. With one scale
 * per 32 activations (yq8) every block needed the column's scale too, 6 vector ops per 16
 * rows and block where this takes 4 (Q6_K ran at 0.77-0.83 x the Q8_0 GEMM). Exact sums:
 * |q - 32| <= 32 and |y| <= 128 keep a half's sum below 2^17, exact in float. */
static constexpr int halves_nr_avx512 = 4;
TSR_TARGET_AVX512VNNI static void gemm_q6_K_kernel_avx512(int kc, const void * ap, const void * bp, float * c, size_t ldc,
                                                          int mr_valid, int nr_valid, bool accumulate) {
    constexpr int NR = halves_nr_avx512;
    const uint8_t * a = (const uint8_t *)ap;
    const uint8_t * b = (const uint8_t *)bp;
    alignas(64) float f[NR][32] = {};  /* the super-blocks' sums times d_y, in L1 (the registers hold the rest) */
    __m512 s[NR][2];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) s[j][0] = s[j][1] = _mm512_setzero_ps();
    for (int blk = 0; blk < kc / 32; ++blk) {
        const int32_t * bq = (const int32_t *)b;
        const int32_t * bias = (const int32_t *)(b + NR * 36);  /* NR of the first half, then NR of the second */
        /* one half after the other: 8 independent integer tiles each, and the registers
         * left for the float sums (both halves at once spilled those) */
#pragma GCC unroll 2
        for (int half = 0; half < 2; ++half) {
            __m512i t[NR][2];
#pragma GCC unroll 4
            for (int j = 0; j < NR; ++j) t[j][0] = t[j][1] = _mm512_set1_epi32(bias[half * NR + j]);
#pragma GCC unroll 4
            for (int q = 4 * half; q < 4 * half + 4; ++q) {
                const __m512i a0 = _mm512_load_si512((const void *)(a + q * 128)), a1 = _mm512_load_si512((const void *)(a + q * 128 + 64));
#pragma GCC unroll 4
                for (int j = 0; j < NR; ++j) {
                    const __m512i bj = _mm512_set1_epi32(bq[q * NR + j]);
                    t[j][0] = _mm512_dpbusd_epi32(t[j][0], a0, bj);
                    t[j][1] = _mm512_dpbusd_epi32(t[j][1], a1, bj);
                }
            }
            /* the half's d * sc: 32 floats after the levels, the second half's 32 after those */
            const __m512 sc0 = _mm512_load_ps(a + 32 * 32 + 128 * half), sc1 = _mm512_load_ps(a + 32 * 32 + 128 * half + 64);
#pragma GCC unroll 4
            for (int j = 0; j < NR; ++j) {
                s[j][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[j][0]), sc0, s[j][0]);
                s[j][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[j][1]), sc1, s[j][1]);
            }
        }
        if ((blk & 7) == 7) {  /* a super-block done (kc and k0 are multiples of 256) */
            const float * dy = (const float *)(b + NR * 32);
#pragma GCC unroll 4
            for (int j = 0; j < NR; ++j) {
                const __m512 d = _mm512_set1_ps(dy[j]);
                _mm512_store_ps(f[j], _mm512_fmadd_ps(s[j][0], d, _mm512_load_ps(f[j])));
                _mm512_store_ps(f[j] + 16, _mm512_fmadd_ps(s[j][1], d, _mm512_load_ps(f[j] + 16)));
                s[j][0] = s[j][1] = _mm512_setzero_ps();
            }
        }
        a += 32 * 40;
        b += NR * 44;
    }
    for (int j = 0; j < nr_valid; ++j) store_row32(c + (size_t)j * ldc, _mm512_load_ps(f[j]), _mm512_load_ps(f[j] + 16), mr_valid, accumulate);
}

static constexpr gemm_impl gemm_f32_avx512 = [] {
    gemm_impl g{};
    g.mr = 32; g.nr = 12; g.kc = 256; g.mc = 128;
    g.a_bytes_32k = 32 * 128; g.b_bytes_32k = 12 * 128;
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
    g.a_bytes_32k = 32 * 36; g.b_bytes_32k = 6 * 40;
    g.pack_a = pack_panel_i8_avx2<32, TSR_TYPE_Q8_0, 0x80, 0x80>;
    g.pack_b = pack_panel_i8_b<6, 128>;
    g.kernel = gemm_i8_kernel_avx512<false>;
    return g;
}();
/* The min panels' GEMM (Q4_1, Q5_1, Q4_K, Q5_K; their packers: pack_x86.inl). */
static constexpr gemm_impl gemm_min_avx512 =
    gemm_panel_variant(gemm_q8_0_avx512, gemm_i8_kernel_avx512<true>, pack_panel_i8_b<6, 0, PANEL_MIN>);
/* Q6_K's GEMM: half panels against Q8_K columns (b_is_q8k: src1 quantized per 256). */
static constexpr gemm_impl gemm_q6_K_avx512 = [] {
    gemm_impl g = gemm_panel_variant(gemm_q8_0_avx512, gemm_q6_K_kernel_avx512, pack_panel_q8k_halves_b<halves_nr_avx512, 128>,
                                     halves_nr_avx512 * 44);
    g.nr = halves_nr_avx512;
   
    g.b_is_q8k = true;
    return g;
}();
static constexpr gemm_impl gemm_q4_0_avx512 = [] {
    gemm_impl g = gemm_q8_0_avx512;
    g.pack_a = pack_panel_i8_avx2<32, TSR_TYPE_Q4_0, 0, 8>;
    g.pack_b = pack_panel_i8_b<6, 8>;
    return g;
}();

/* ---- expf and the activations on it (constants and method: vexp in cpu_internal.inl) ---- */

TSR_TARGET_AVX512 static inline __m512 exp_avx512(__m512 x) {
    const __mmask16 zero = _mm512_cmp_ps_mask(x, _mm512_set1_ps(vexp::zero_below), _CMP_LT_OQ);
    x = _mm512_mask_mov_ps(x, zero, _mm512_setzero_ps());
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
    return _mm512_maskz_mov_ps((__mmask16)~zero, _mm512_scalef_ps(p, n));
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

/* ---- K-quants and the 32-element types against quantized activations, zmm + VNNI ---------
 * The AVX2 kernels' arithmetic at twice the width: one zmm holds 64 consecutive elements of
 * a super-block, so the activations load straight (no shuffles on the shared side), and
 * vpdpwssd / vpmaddwd apply the int16 scales. Mat-vec streams the weights once; with ymm the
 * per-element work, not DRAM, set the pace. */

/* 16 bytes at p of each of rows 0..3 (lda apart; rows past R repeat row 0), a 128-bit lane
 * per row: the K-quant mat-vec decodes the rows' scales, mins and factors at once, so the
 * per-row work is only the levels' dot products. */
template <int R> TSR_TARGET_AVX512VNNI static inline __m512i lanes_of_rows(const uint8_t * blk, size_t lda) {
    const __m128i row0 = _mm_loadu_si128((const __m128i *)blk);
    if (R == 1) return _mm512_broadcast_i32x4(row0);
    __m512i h = _mm512_castsi128_si512(row0);
    h = _mm512_inserti32x4(h, _mm_loadu_si128((const __m128i *)(blk + (R > 1) * lda)), 1);
    h = _mm512_inserti32x4(h, _mm_loadu_si128((const __m128i *)(blk + (R > 2) * 2 * lda)), 2);
    return _mm512_inserti32x4(h, _mm_loadu_si128((const __m128i *)(blk + (R > 3) * 3 * lda)), 3);
}

/* permutexvar indices that copy 128-bit lane r into every lane */
TSR_TARGET_AVX512VNNI static inline __m512i lane_of_zmm(int r) {
    return _mm512_add_epi32(_mm512_set1_epi32(4 * r), _mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3));
}

/* Rows 0..3's int32 sums (16 lanes each) in one vector, row r's in lanes 4r..4r+3: the
 * rows share one conversion and one multiply by their factors. */
TSR_TARGET_AVX512VNNI static inline __m512i sum_rows_by_lane(__m512i a, __m512i b, __m512i c, __m512i d) {
    const __m512i ab = _mm512_add_epi32(_mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512i cd = _mm512_add_epi32(_mm512_shuffle_i32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_i32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_i32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* 16 bytes in every 128-bit lane. */
TSR_TARGET_AVX512VNNI static inline __m512i every_lane(const void * bytes16) { return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)bytes16)); }

/* Each lane's 8 6-bit scales (bytes 0-7) and 8 mins (bytes 8-15) from its header (scale
 * bytes at 4..15), by the AVX2 kernel's byte shuffles. */
TSR_TARGET_AVX512VNNI static inline __m512i k4_scales_mins_zmm(__m512i h) {
    const __m512i low = _mm512_or_si512(_mm512_shuffle_epi8(h, every_lane(k4_shuffles.low)), _mm512_shuffle_epi8(_mm512_srli_epi16(h, 4), every_lane(k4_shuffles.high_nibbles)));
    const __m512i top = _mm512_shuffle_epi8(h, every_lane(k4_shuffles.top));
    return _mm512_ternarylogic_epi32(_mm512_and_si512(low, every_lane(k4_shuffles.low_mask)), _mm512_srli_epi16(top, 2), _mm512_set1_epi8(0x30), 0xF8);  /* a | (b & c) */
}

/* 32 bytes at p0 and 32 at p1 as one zmm. */
TSR_TARGET_AVX512VNNI static inline __m512i join32_zmm(const void * p0, const void * p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)), _mm256_loadu_si256((const __m256i *)p1), 1);
}

/* vpermw indices that spread row r's int16 scales (words 8r..8r + 7 of a vector holding row
 * r's in 128-bit lane r) into the words of vpackssdw of two dot vectors: every 128-bit lane L
 * gets scale a_L in words 0-3 (the first vector's dwords) and b_L in words 4-7. */
TSR_TARGET_AVX512VNNI static inline __m512i pair_words_index(int r, int a0, int b0, int a1, int b1, int a2, int b2, int a3, int b3) {
    auto four = [r](int i) { return (long long)((uint64_t)(8 * r + i) * 0x0001000100010001ull); };
    return _mm512_setr_epi64(four(a0), four(b0), four(a1), four(b1), four(a2), four(b2), four(a3), four(b3));
}

/* gf2p8affineqb that moves `count` adjacent bits of every byte, from bit src_lo (the zmm's
 * low 256 bits) or src_hi (its high 256 bits) to bit dst, clearing every other bit: output
 * bit b of a byte is the parity of the input bits set in byte 7 - b of its qword's matrix.
 * Q3_K's third bits, Q5_K's fifth and Q6_K's high pairs come out of their bit planes so, the
 * planes' bit differing between the halves. */
TSR_TARGET_AVX512VNNI_GFNI static inline __m512i gf_move_bits(__m512i v, int src_lo, int src_hi, int dst, int count) {
    auto matrix = [dst, count](int src) {
        uint64_t m = 0;
        for (int i = 0; i < count; ++i) m |= (uint64_t)(1u << (src + i)) << (8 * (7 - dst - i));
        return (long long)m;
    };
    const long long lo = matrix(src_lo), hi = matrix(src_hi);
    return _mm512_gf2p8affine_epi64_epi8(v, _mm512_setr_epi64(lo, lo, lo, lo, hi, hi, hi, hi), 0);
}

/* Q4_K (HIGH false) / Q5_K (HIGH true) over R <= 4 rows: the 32 qs bytes of chunk c hold
 * elements 64c..64c+31 in their low nibbles and 64c+32..64c+63 in their high ones, so a
 * 64-byte load covers chunks 2k and 2k+1: its low nibbles are sub-blocks 4k and 4k+2, its
 * high ones 4k+1 and 4k+3, one per 256-bit half, against the Q8_K row gathered to match
 * once per super-block. Q5_K's fifth bit of sub-block s's element l is bit s of qh[l]
 * (GFNI: moved to bit 4 by one affine op, merged by one ternary logic op; else a test and a
 * masked add: 40-43 against 48-52 GB/s one core in cache). vpdpbusd sums each 4 elements,
 * the sums of two vectors pack into one of int16 (vpackssdw), and one vpmaddwd applies their
 * four scales, picked by one vpermw from the rows' scale words: one scale pick per 128
 * elements where a lane broadcast, vpmaddubsw, two scale shuffles and two vpdpwssd took
 * more (Q4_K 41-45 -> 49-55, Q5_K 40-41 -> 48-53 GB/s in cache). The headers of all rows
 * decode together (lanes_of_rows): scales, d and dmin, and the mins times the activations'
 * 16-element sums, row r in float lanes 4r..4r+3. Lanes never mix, so a row's result is the
 * same for every R. */
template <bool HIGH, int R, bool GFNI = false>
TSR_TARGET_AVX512VNNI static void k4_rows_avx512(int64_t n, const char * x, size_t lda, const tsr_block_q8_K * yrow, float * out) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m10 = _mm512_set1_epi8(0x10);
    constexpr size_t bbytes = HIGH ? sizeof(tsr_block_q5_K) : sizeof(tsr_block_q4_K);
    const matvec_prefetcher<HIGH ? TSR_TYPE_Q5_K : TSR_TYPE_Q4_K, bbytes / 2> prefetch;  /* per half */
    __m512 acc = _mm512_setzero_ps(), mins = _mm512_setzero_ps();  /* row r in lanes 4r..4r+3 */
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        const tsr_block_q8_K & y = yrow[i];
        const uint8_t * blk = (const uint8_t *)x + (size_t)i * bbytes;
        const __m512i h = lanes_of_rows<R>(blk, lda);
        const __m512i sm = k4_scales_mins_zmm(h);
        const __m512i sw = _mm512_unpacklo_epi8(sm, _mm512_setzero_si512());  /* each lane's scales as int16 */
        /* d y.d, dmin y.d of rows 0..3: floats 2r, 2r + 1 */
        const __m512 dm = _mm512_castps256_ps512(_mm256_mul_ps(
            _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), h))),
            _mm256_set1_ps(y.d)));
        /* the mins times the pairs of 16-element activation sums they cover */
        const __m512i bs = _mm512_broadcast_i32x4(_mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y.bsums), _mm_loadu_si128((const __m128i *)y.bsums + 1)));
        mins = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(_mm512_unpackhi_epi8(sm, _mm512_setzero_si512()), bs)),
                               _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7), dm), mins);
        const __m512i yv[4] = {join32_zmm(y.qs, y.qs + 64), join32_zmm(y.qs + 32, y.qs + 96),
                               join32_zmm(y.qs + 128, y.qs + 192), join32_zmm(y.qs + 160, y.qs + 224)};
        /* the rows take turns every half super-block (k), not every super-block: from DRAM
         * (2 threads, Zen 5, cpu_bench's --prefetch low bit choosing the loop order in one
         * process, both orders, 4 runs) Q4_K 1.05-1.08 x the read (paired medians
         * 1.00-1.09) against 0.90-1.04 (0.98-0.99), Q5_K 0.96-1.08 (0.98-1.06) against
         * 0.90-0.98 (0.91-0.99), every run in favour, as Q8_0's pair steps; in cache Q4_K
         * 3 % slower, Q5_K the same. The sums are the same integers. */
        __m512i sumi[4];
#pragma GCC unroll 2
        for (int k = 0; k < 2; ++k) {
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const uint8_t * row = blk + (size_t)r * lda;
                /* the hardware prefetchers alone kept one core at ~31 GB/s on 4 streams from DRAM;
                 * 2 KiB ahead measured ~39-42 (512 and 1024: no gain); lines: matvec_pf_line_every */
                prefetch((const char *)row + bbytes / 2 * k);
                const __m512i qh = HIGH ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(row + 16))) : _mm512_setzero_si512();
                const uint8_t * qs = row + (HIGH ? 48 : 16);
                const __m512i z = _mm512_loadu_si512((const void *)(qs + 64 * k));
                __m512i lo, hi;  /* sub-blocks 4k, 4k + 2 (lo) and 4k + 1, 4k + 3 (hi), one per 256-bit half */
                if constexpr (HIGH && GFNI) {
                    lo = _mm512_ternarylogic_epi32(z, gf_move_bits(qh, 4 * k, 4 * k + 2, 4, 1), m4, 0xEC);  /* (a & c) | b */
                    hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(z, 4), gf_move_bits(qh, 4 * k + 1, 4 * k + 3, 4, 1), m4, 0xEC);
                } else {
                    lo = _mm512_and_si512(z, m4);
                    hi = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
                    if (HIGH) {
                        const __m512i bit_lo = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * k))), _mm256_set1_epi8((char)(1 << (4 * k + 2))), 1);
                        lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh, bit_lo), lo, m10);
                        hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(qh, _mm512_slli_epi16(bit_lo, 1)), hi, m10);
                    }
                }
                /* the 4-element dots of both fit int16 (31 * 128 * 4): packed, one vpmaddwd applies four scales */
                const int s = 4 * k;
                const __m512i dots = _mm512_packs_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, yv[2 * k]),
                                                        _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, yv[2 * k + 1]));
                const __m512i part = _mm512_madd_epi16(dots, _mm512_permutexvar_epi16(pair_words_index(r, s, s + 1, s, s + 1, s + 2, s + 3, s + 2, s + 3), sw));
                sumi[r] = k ? _mm512_add_epi32(sumi[r], part) : part;
            }
        }
#pragma GCC unroll 4
        for (int r = R; r < 4; ++r) sumi[r] = sumi[0];
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum_rows_by_lane(sumi[0], sumi[1], sumi[2], sumi[3])),
                              _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6), dm), acc);
    }
    const __m512 net = _mm512_sub_ps(acc, mins);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) out[r] = hsum128(_mm512_castps512_ps128(_mm512_permutexvar_ps(lane_of_zmm(r), net)));
}

/* Q3_K's sixteen signed 6-bit scales of each lane (scale bytes at 2..13 of lanes_of_rows at
 * the block's byte 94) as int8 in order: scales 0-7 keep their low 4 bits in the low nibbles
 * of scale bytes 0..7, 8-15 in the high nibbles, and the high 2 bits of scale j sit at bits
 * 2(j / 4) of scale byte 8 + j % 4 (the shift per 16-bit word: both its bytes share j / 4). */
TSR_TARGET_AVX512VNNI static inline __m512i q3k_scales_zmm(__m512i h) {
    __m512i lo = _mm512_shuffle_epi8(h, _mm512_broadcast_i32x4(_mm_setr_epi8(2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9)));
    lo = _mm512_mask_mov_epi8(lo, (__mmask64)0xFF00FF00FF00FF00ull, _mm512_srli_epi16(lo, 4));
    const __m512i top = _mm512_srlv_epi16(_mm512_shuffle_epi8(h, _mm512_broadcast_i32x4(_mm_setr_epi8(10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13))),
                                          _mm512_broadcast_i32x4(_mm_setr_epi16(0, 0, 2, 2, 4, 4, 6, 6)));
    const __m512i u = _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi8(0x0F)), _mm512_and_si512(_mm512_slli_epi16(top, 4), _mm512_set1_epi8(0x30)));
    return _mm512_sub_epi8(u, _mm512_set1_epi8(32));
}

/* sum(v[k] * bsums[k]) of each lane's 16 signed int8 v, 4 int32 per lane. */
TSR_TARGET_AVX512VNNI static inline __m512i dot16_bsums_zmm(__m512i v, const tsr_block_q8_K & y) {
    const __m512i z = _mm512_setzero_si512();
    const __m512i lo = _mm512_srai_epi16(_mm512_unpacklo_epi8(z, v), 8);
    const __m512i hi = _mm512_srai_epi16(_mm512_unpackhi_epi8(z, v), 8);
    return _mm512_add_epi32(_mm512_madd_epi16(lo, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)y.bsums))),
                            _mm512_madd_epi16(hi, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)y.bsums + 1))));
}

/* The fp16 pairs at p of rows 0..3 (as lanes_of_rows) as 8 floats: row r's at 2r, 2r + 1. */
template <int R> TSR_TARGET_AVX512VNNI static inline __m256 fp16_pairs_of_rows(const uint8_t * p, size_t lda) {
    auto at = [p](size_t off) { uint32_t v; std::memcpy(&v, p + off, 4); return (int)v; };
    return _mm256_cvtph_ps(_mm_setr_epi32(at(0), at((R > 1) * lda), at((R > 2) * 2 * lda), at((R > 3) * 3 * lda)));
}

/* vpermw indices of k2_rows_avx512's scales: 128-bit lane L (half h = L / 2, e = L % 2) of the
 * packed dots j of rows a (words 0-3) and b (words 4-7) holds their sums of group
 * 8h + 2j + e, whose scales are int16 words g (row a) and 16 + g (row b) of the pair's
 * vector. */
TSR_TARGET_AVX512VNNI static inline __m512i k2_scale_index(int j) {
    alignas(64) static const int16_t groups[32] = {0, 0, 0, 0, 16, 16, 16, 16, 1, 1, 1, 1, 17, 17, 17, 17,
                                                   8, 8, 8, 8, 24, 24, 24, 24, 9, 9, 9, 9, 25, 25, 25, 25};
    return _mm512_add_epi16(_mm512_load_si512((const void *)groups), _mm512_set1_epi16((short)(2 * j)));
}


/* Where Q3_K's scale g sits in its row's lane after q3k_scales_vbmi (below). */
static constexpr int q3k_vbmi_pos(int g) { return (g & 3) | ((g >> 2) & 1) << 3 | ((g >> 3) & 1) << 2; }

/* vpermt2b indices of k2_rows_avx512's scale words with VBMI: the same words as
 * k2_scale_index picks (pair p, dots j), each from its scale byte among the rows' 64 (row r's
 * 16 in lane r; Q3_K's scale g at q3k_vbmi_pos(g) of the lane), even j's from the second
 * table (the scales times 4). Q2_K's (0..15) fill each word's low byte, the high one zeroed;
 * Q3_K's (signed) the high byte, the low one zeroed: the word is 256 times the scale, its
 * sign kept. */
struct k2_vbmi_index {
    alignas(64) int8_t b[2][4][64];
};
static constexpr k2_vbmi_index make_k2_vbmi_index(bool q3) {
    k2_vbmi_index t{};
    for (int p = 0; p < 2; ++p)
        for (int j = 0; j < 4; ++j)
            for (int w = 0; w < 32; ++w) {
                const int lane = w / 8, row = 2 * p + (w % 8 >= 4), g = 8 * (lane / 2) + 2 * j + lane % 2;
                t.b[p][j][2 * w + q3] = (int8_t)(16 * row + (q3 ? q3k_vbmi_pos(g) : g) + (j % 2 ? 0 : 64));
            }
    return t;
}
static constexpr k2_vbmi_index k2_vbmi_idx[2] = {make_k2_vbmi_index(false), make_k2_vbmi_index(true)};
/* The scale words of k2_rows_avx512's pair p and dots j from the rows' 16 scales each (row
 * r's in lane r) and those times 4, by one vpermt2b, where the path without VBMI widens each
 * pair's scales to words, shifts them and spreads them with a vpermw per j. Only callers
 * under its target (matvec_avx512_vbmi, matvec_avx512_gfni_vbmi) instantiate it. */
template <bool Q3>
TSR_TARGET_AVX512VNNI_VBMI static inline __m512i k2_scales_vbmi(__m512i sc8, __m512i sc8_times4, int p, int j) {
    return _mm512_maskz_permutex2var_epi8(Q3 ? 0xAAAAAAAAAAAAAAAAull : 0x5555555555555555ull, sc8,
                                          _mm512_load_si512((const void *)k2_vbmi_idx[Q3].b[p][j]), sc8_times4);
}

/* Q3_K's scales with VBMI and GFNI: row r's 16 scales s (-32..31) as bytes in lane r (s) and
 * times 4 (t, -128..124 still a byte), from the lanes_of_rows bytes h as q3k_scales_zmm takes
 * them. A vpshufb gathers each lane's scale bytes so that every qword holds what its 8 scales
 * need (qword 0: bytes 0-3 and 8-11 for scales 0-3 and 8-11, qword 1: bytes 4-7 and 8-11 for
 * 4-7 and 12-15), two vpmultishiftqb move each scale's low nibble to bits 0-3 and its high 2
 * bits to 4-5 of its byte, one ternary op joins them (the format's 6 bits, u = s + 32), and
 * one GF(2) affine map each turns u into s (bits 5-7 the complement of u's bit 5) and into
 * 4s (u's bits 0-4 at 2-6, the complement of bit 5 at 7): 6 instructions for 4 rows where
 * q3k_scales_zmm takes 10 and each row pair's widening 3 more. Scale g sits at byte
 * q3k_vbmi_pos(g) of its lane (k2_vbmi_idx). */
TSR_TARGET_AVX512VNNI_GFNI_VBMI static inline void q3k_scales_vbmi(__m512i h, __m512i & s, __m512i & t) {
    /* lanes_of_rows puts scale byte k at byte 2 + k of its row's lane */
    const __m512i p = _mm512_shuffle_epi8(h, _mm512_broadcast_i32x4(_mm_setr_epi8(2, 3, 4, 5, 10, 11, 12, 13, 6, 7, 8, 9, 10, 11, 12, 13)));
    /* low nibble of scale m (byte m) and 8 + m (byte 4 + m): qword bit 8m and 8m + 4 */
    const __m512i lo = _mm512_multishift_epi64_epi8(_mm512_broadcast_i32x4(_mm_setr_epi8(0, 8, 16, 24, 4, 12, 20, 28, 0, 8, 16, 24, 4, 12, 20, 28)), p);
    /* high 2 bits of scale m, 8 + m (qword 0) and 4 + m, 12 + m (qword 1): bits 0-1, 4-5, 2-3
     * and 6-7 of the qword's byte 4 + m, each read from 4 bits lower to land at bits 4-5 */
    const __m512i hi = _mm512_multishift_epi64_epi8(_mm512_broadcast_i32x4(_mm_setr_epi8(28, 36, 44, 52, 32, 40, 48, 56, 30, 38, 46, 54, 34, 42, 50, 58)), p);
    const __m512i u = _mm512_ternarylogic_epi32(lo, hi, _mm512_set1_epi8(0x0F), 0xE4);  /* c ? a : b */
    /* output bit i: the parity of the input bits in the matrix's byte 7 - i, XOR the immediate's bit i */
    s = _mm512_gf2p8affine_epi64_epi8(u, _mm512_set1_epi64(0x0102040810202020ll), 0xE0);
    t = _mm512_gf2p8affine_epi64_epi8(u, _mm512_set1_epi64(0x0000010204081020ll), 0x80);
}

/* Q3_K's unsigned levels j (odd j: times 4) with GFNI: the third bit (hmask bit j of the
 * low 256 bits' elements 32j.., 4 + j of the high 256 bits' 128 + 32j..) moved to the bit
 * above the level's two low bits as k2_row::dot masks them (bit 2 for even j, 4 for odd j)
 * in one instruction and merged with the two low bits of q (masked by low_bits) in another,
 * where test and masked add take two and a mask register. */
TSR_TARGET_AVX512VNNI_GFNI static inline __m512i q3k_levels_gfni(__m512i q, __m512i hm, __m512i low_bits, int j) {
    /* the moved bits first: vpternlogd overwrites its first operand, which q (read 4 times) is not */
    return _mm512_ternarylogic_epi32(gf_move_bits(hm, j, 4 + j, j & 1 ? 4 : 2, 1), q, low_bits, 0xD8);  /* c ? b : a */
}

/* One Q2_K / Q3_K row's super-block as k2_rows_avx512 reads it: its 64 qs bytes, those
 * shifted by 4, and (Q3_K) its 32 hmask bytes in both halves. */
template <bool Q3, bool GFNI> struct k2_row {
    __m512i q, q4, hm;
    /* ahead: g_matvec_pf_ahead's distance for the type, read once a call */
    TSR_TARGET_AVX512VNNI TSR_ALWAYS_INLINE k2_row(const uint8_t * row, size_t ahead) {
        /* no prefetch kept one core's Q2_K / Q3_K below its share of DRAM, as it did Q4_K's */
        prefetch_l2(row + ahead);
        prefetch_l2(row + ahead + 64);
        q = _mm512_loadu_si512((const void *)(row + (Q3 ? 32 : 16)));
        /* one load: the compiler otherwise folds it into each of q's users, 3 loads of a zmm
         * that crosses a cache line (a row's 64 qs bytes are rarely aligned), each costing two
         * of the core's loads (Q2_K in cache +2-3 %, +7 % with the scales below by VBMI;
         * Q3_K unchanged) */
        __asm__("" : "+v"(q));
        q4 = _mm512_srli_epi16(q, 4);
        hm = Q3 ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)row)) : _mm512_setzero_si512();
    }
    /* The levels of elements 32j.. and 128 + 32j.. (odd j: times 4) against yv, added to base. */
    TSR_TARGET_AVX512VNNI TSR_ALWAYS_INLINE __m512i dot(int j, __m512i yv, __m512i base) const {
        const __m512i low_bits = _mm512_set1_epi8(j & 1 ? 0x0C : 0x03);
        __m512i lv;
        if constexpr (Q3 && GFNI) {
            lv = q3k_levels_gfni(j < 2 ? q : q4, hm, low_bits, j);
        } else {
            lv = _mm512_and_si512(j < 2 ? q : q4, low_bits);
            if (Q3) {
                const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << j)), _mm256_set1_epi8((char)(1 << (j + 4))), 1);
                lv = _mm512_mask_add_epi8(lv, _mm512_test_epi8_mask(hm, bit), lv, _mm512_set1_epi8(j & 1 ? 0x10 : 0x04));
            }
        }
        return _mm512_dpbusd_epi32(base, lv, yv);
    }
};

/* Q2_K / Q3_K over R <= 4 rows. Qs byte 32h + l holds elements 128h + 32j + l at bits 2j,
 * so of the 64 qs bytes as one zmm (h = 0 and 1 in its 256-bit halves), the masks 0x03 and
 * 0x0C of the bytes and of the bytes shifted by 4 are the levels of elements 32j.. and
 * 128 + 32j.. (j = 0..3), those of odd j times 4: no shift per level, and one vpdpbusd per
 * 64 elements against the activations in the same order (each zmm j one load from the side
 * blocks, y_side_q8k, where two loads and a vinserti64x4 joined it). Q3_K's third bit
 * (bit 4h + j of hmask[l]) adds 4 (16 for odd j) to levels kept unsigned, and the - 4 comes
 * off where each vpdpbusd starts: - 4 (- 16) times the 4 activations a dword meets, one
 * vector per j and super-block, computed once per activation row (yside_q3k). The dots j
 * of a pair of rows pack to int16 (a sum of 4 is at most 4 * 16 * 128 in magnitude) and
 * meet their scales, those of even j times 4 to match (the whole sum is times 4), in one
 * vpdpwssd: the pair's sums are dwords 0-1 (row 2p) and 2-3 (row 2p + 1) of each lane,
 * converted and scaled by d as they are.
 * The rows' headers decode together (lanes_of_rows): scales as int16 words of row pairs
 * (with VBMI: k2_scales_vbmi), d (and dmin), and Q2_K's mins against the activations'
 * sums split in bytes (yside_q2k), row r in lanes 4r..4r+3.
 * Integer sums are exact and a row's lanes never meet another's, so its result is the same
 * for every R. GFNI: Q3_K's levels by q3k_levels_gfni (the same integers); only callers
 * under its target (matvec_avx512_gfni) instantiate it. VBMI with GFNI: Q3_K's scales by
 * q3k_scales_vbmi and k2_scales_vbmi (matvec_avx512_gfni_vbmi), words 256 times the scale
 * and d / 256 (exact: the same floats). In cache, one core, 3 runs alternating: 37.2-37.7
 * -> 40.2-40.8 GB/s, level with the word layout's 39.7-40.3 in the same runs; a loop
 * calling the kernels directly (4 row streams, 1 MiB): 39.3 -> 42.6-42.8 (word layout
 * 43.5-43.7), and one core from DRAM (230 MiB) 34.3-34.7 -> 36.0-37.8 (word layout
 * 36.9-38.5); cpu_bench from DRAM on 2 threads (5 alternations on a VM whose read varied
 * 52-71 GB/s) 0.86-1.00 x the read (mean 0.92) against 0.88-0.97 (mean 0.92): the noise
 * hides it there. The side blocks' 64-byte placement matters as much: read from a row
 * aligned to 16 bytes only (its zmm loads crossing lines), this kernel lost 10 % in cache.
 *
 * Q3_K in cache, one core, kernels alternating in one process: taking the - 4 off through
 * the bsums (a scale-weighted sum per row and a float accumulator, as Q2_K's mins), with
 * q reloaded and the pairs' dots spilled, read 31.9-35.5 GB/s where this reads 34.9-37.7
 * (4 runs, 6-11 %). The starts computed once per 4 rows (a vpdpbusd and a subtraction per
 * j and super-block) instead of read from the side blocks: in cache +2-5 %, but from DRAM
 * (cpu_bench --matvec-only, 2 threads, builds alternating 5 times) 0.78-0.91 x the read
 * (mean 0.86) against 0.90-0.92 (mean 0.91); the side blocks also holding the activations
 * in the joined order (no vinserti64x4 per j): 0.86-0.93 (mean 0.88), dropped then, taken
 * since with Q2_K's (measured below). Not worth
 * their cost, measured in cache: the scales spread by one vpermw per pair and an in-lane
 * vpshufb per j instead of a vpermw per j (no change). Q2_K / Q3_K in cache the same way
 * (64 rows of 4096, 3 rounds): the levels times their scales looked up in a 16-entry
 * vpshufb table per row and 128-bit lane (level m of j at entry 4j + m, built by a vpermb of
 * the scales and two masked byte adds), all four j into one vpdpbusd sum a row, no pack,
 * vpermw or vpdpwssd:
 * Q2_K 26.9-32.2 GB/s against 33.3-38.4 (36.7-38.7 with a constant table: the lookups cost
 * what they save); 8 rows a call sharing the activations, Q3_K's starts and the constants:
 * Q2_K 36.7-36.9 against 37.4-39.3, Q3_K 38.0-38.8 against 37.7-38.5; Q3_K's third bits by
 * a shift and a mask instead of GFNI: 32.1-32.4 against 34.5-35.5; each pair's vpdpwssd
 * chain split in two (a latency test): Q2_K 35.0-35.5 against 35.4-37.8, Q3_K 35.6-38.1
 * against 35.5-38.6, no change. Issue rates on that Zen 5 (loops of independent zmm ops):
 * multiplies (vpdpbusd, vpmaddwd) 2 a cycle, shuffles (vpshufb, vpermw, vpackssdw,
 * vgf2p8affineqb, vshufi32x4) 2, the two together 3; shifts 2 (4 with the multiplies, 3
 * with the shuffles), vprolvd 2 on the multiplies' ports, AND / add / unpack 4. Per 4 rows
 * and super-block this kernel issues ~29 multiplies and 30 (Q2_K) to 55 (Q3_K) shuffles, yet
 * neither moving work off the shuffle ports nor shorter chains made it faster.
 * What the headers cost (Q2_K in cache, variants alternating in one process; the numbers
 * wrong, the time not): constant scales, d and mins 37 -> 53 GB/s; constant scales alone
 * (the widening, shifts and vpermw folded away) +10 %, +17 % with q loaded once; constant d
 * +5 %, no mins +7 %; the header of the next super-block computed a loop ahead (its latency
 * hidden) no change, and the levels by vpmaddubsw and the scales by one vpmaddwd per j and
 * row (no pack) 31 against 37. So the scales' path and the loads are what this kernel pays
 * for beyond its dots: the three changes above (q once, side-block activations, VBMI
 * scales) took Q2_K in cache from 35-37 to 39-41 GB/s, Q3_K (side-block activations) from
 * 36-37 to 37-38. A zmm load that crosses a cache line issues at half the rate of one that
 * does not (0.9 against 1.9 a cycle on that Zen 5). */
template <bool Q3, int R, bool GFNI = false, bool VBMI = false>
TSR_TARGET_AVX512VNNI static inline void k2_rows_avx512(int64_t n, const char * x, size_t lda, const tsr_block_q8_K * yrow, float * out) {
    constexpr size_t bbytes = Q3 ? sizeof(tsr_block_q3_K) : sizeof(tsr_block_q2_K);
    const size_t ahead = g_matvec_pf_ahead.file[Q3 ? TSR_TYPE_Q3_K : TSR_TYPE_Q2_K];
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};  /* rows 2p and 2p + 1 */
    __m512 off = _mm512_setzero_ps();  /* Q2_K's mins times the sums: row r in lanes 4r..4r+3 */
    const int64_t nb = n / TSR_QK_K;
    const yside_q3k * side3 = side_after<yside_q3k>(yrow, nb);  /* Q3_K's starts */
    const yside_q2k * side2 = side_after<yside_q2k>(yrow, nb);  /* Q2_K's split sums */
    /* row 0's super-block b, and its header (lanes_of_rows reads the 4 rows'): Q3_K's bytes
     * 94..109 (the last 2 qs bytes, the 12 scale bytes, d: stays inside the block), Q2_K's
     * 0..15 (scales and mins) */
    const auto block = [x](int64_t b) { return (const uint8_t *)x + (size_t)b * bbytes; };
    const auto header = [&block](int64_t b) { return block(b) + (Q3 ? 94 : 0); };
    /* Q2_K's headers (scales and mins, bytes 0..15 of the 4 rows' blocks) are loaded a
     * super-block ahead, so that a late line delays the next scale decode, not this one's
     * dots. From DRAM (cpu_bench, both ways in one binary alternating on the same weights):
     * one thread 1.00 -> 1.03 x the read (paired medians 0.99 -> 1.02, 15 pairs), 2 threads
     * 0.95 -> 0.97, 0.95 -> 1.03 and 1.01 -> 1.03 in three runs (medians 0.94 -> 0.94,
     * 0.96 -> 0.98, 0.96 -> 0.98); d and dmin a super-block ahead too: no further gain.
     * Q3_K's headers (bytes 94..109) the same way: no gain (one thread 0.92 -> 0.91, 2
     * threads 0.91 -> 0.90), nor its 4 rows' level loads moved before its header (0.95 ->
     * 0.96, one thread). */
    __m512i h2_next = Q3 ? _mm512_setzero_si512() : lanes_of_rows<R>(header(0), lda);
    for (int64_t i = 0; i < nb; ++i) {
        const tsr_block_q8_K & y = yrow[i];
        const uint8_t * blk = block(i);
        __m512i sc8, sc8_times4;  /* row r's 16 scales as int8 in lane r (VBMI: and times 4) */
        __m512 d_pair[2];
        if (Q3) {
            const __m512i h = lanes_of_rows<R>(header(i), lda);
            if constexpr (VBMI) q3k_scales_vbmi(h, sc8, sc8_times4);
            else sc8 = q3k_scales_zmm(h);
            /* VBMI: the scale words are times 256 (exact: the float sums and products match) */
            const __m512 d = _mm512_castps128_ps512(_mm_mul_ps(_mm_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi16(
                                                                   _mm512_setr_epi32(7 | 15 << 16, 23 | 31 << 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), h))),
                                                               _mm_set1_ps(y.d * (VBMI ? 0.25f / 256 : 0.25f))));
            d_pair[0] = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1), d);
            d_pair[1] = _mm512_permutexvar_ps(_mm512_setr_epi32(2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3), d);
        } else {
            const __m512i h = h2_next;
            h2_next = lanes_of_rows<R>(header(i + 1 < nb ? i + 1 : i), lda);  /* the last: its own again */
            sc8 = _mm512_and_si512(h, _mm512_set1_epi8(0x0F));
            sc8_times4 = VBMI ? _mm512_slli_epi16(sc8, 2) : sc8;  /* Q2_K's scales are 0..15 */
            /* d y.d / 4 (the sums are times 4) and dmin y.d of rows 0..3: floats 2r, 2r + 1 */
            const __m512 dm = _mm512_castps256_ps512(_mm256_mul_ps(fp16_pairs_of_rows<R>(blk + 80, lda),
                                                                   _mm256_castpd_ps(_mm256_broadcast_sd((const double *)side2[i].d_pair))));
            d_pair[0] = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 2, 2, 0, 0, 2, 2, 0, 0, 2, 2, 0, 0, 2, 2), dm);
            d_pair[1] = _mm512_permutexvar_ps(_mm512_setr_epi32(4, 4, 6, 6, 4, 4, 6, 6, 4, 4, 6, 6, 4, 4, 6, 6), dm);
            /* sum(min * bsum) = sum(16 min * hi) + sum(min * lo): 16 min is the byte's high nibble as it is */
            const __m512i hi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)side2[i].bsum_hi));
            const __m512i lo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)side2[i].bsum_lo));
            const __m512i mins16 = _mm512_and_si512(h, _mm512_set1_epi8((char)0xF0));
            const __m512i mins = _mm512_and_si512(_mm512_srli_epi16(h, 4), _mm512_set1_epi8(0x0F));
            const __m512i msum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), mins16, hi), mins, lo);
            off = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum),
                                  _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7), dm), off);
        }
        /* the activations as the side blocks hold them: qs 32j.. then qs 128 + 32j.. */
        const int8_t (*ys)[64] = Q3 ? side3[i].qs : side2[i].qs;
        __m512i yv[4] = {_mm512_loadu_si512((const void *)ys[0]), _mm512_loadu_si512((const void *)ys[1]),
                         _mm512_loadu_si512((const void *)ys[2]), _mm512_loadu_si512((const void *)ys[3])};
        /* Q3_K with VBMI: held in registers, where the compiler folded them into each row's
         * vpdpbusd (16 loads a super-block, not 4). From DRAM, one thread, 115 MB of Q3_K in
         * 688-row items of 4 streams, both ways alternating in one process (3 runs, medians of
         * 11-15): 35.8 -> 37.6, 37.1 -> 38.5, 37.7 -> 39.1 GB/s; cpu_bench, 2 threads, alternating
         * in one binary: 0.94 -> 0.96 x the read (medians 0.89 -> 0.91). In L1 no change (43-45
         * GB/s both): fewer loads queued behind the misses, not fewer cycles. Pinning also the
         * scale indices, or one prefetch a row and step instead of two: slower. */
        if constexpr (Q3 && VBMI) __asm__("" : "+v"(yv[0]), "+v"(yv[1]), "+v"(yv[2]), "+v"(yv[3]));
        /* where the dots start: Q3_K's - 4 (odd j: - 16) times the 4 activations each dword meets */
        __m512i base[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) base[j] = Q3 ? _mm512_loadu_si512((const void *)side3[i].start[j]) : _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int p = 0; p < (R + 1) / 2; ++p) {
            /* else the scales of rows 2p and 2p + 1 as int16 words, times 4 where the levels are not */
            __m512i sc = sc8;
            if constexpr (!VBMI) {
                const __m256i sc_pair = p ? _mm512_extracti64x4_epi64(sc8, 1) : _mm512_castsi512_si256(sc8);
                const __m512i times4_even_j = _mm512_set1_epi64(0x0000000000020002ll);  /* words g % 4 < 2 (even j): << 2 */
                sc = _mm512_sllv_epi16(Q3 ? _mm512_cvtepi8_epi16(sc_pair) : _mm512_cvtepu8_epi16(sc_pair), times4_even_j);
            }
            const k2_row<Q3, GFNI> a(blk + (size_t)(2 * p) * lda, ahead);
            const k2_row<Q3, GFNI> b = 2 * p + 1 < R ? k2_row<Q3, GFNI>(blk + (size_t)(2 * p + 1) * lda, ahead) : a;  /* R odd: not read */
            __m512i sumi = _mm512_setzero_si512();
            /* row a's dots first; row b's with them for Q2_K, but one j at a time into the sums
             * for Q3_K, whose levels take more registers (all 8 live spilled to the stack; Q2_K
             * measured 2-3 % slower the other way) */
            __m512i da[4], db[4];
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                da[j] = a.dot(j, yv[j], base[j]);
                if constexpr (!Q3) db[j] = 2 * p + 1 < R ? b.dot(j, yv[j], base[j]) : da[j];
            }
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                if constexpr (Q3) db[j] = 2 * p + 1 < R ? b.dot(j, yv[j], base[j]) : da[j];
                __m512i sc_j;
                if constexpr (VBMI) sc_j = k2_scales_vbmi<Q3>(sc8, sc8_times4, p, j);
                else sc_j = _mm512_permutexvar_epi16(k2_scale_index(j), sc);
                sumi = _mm512_dpwssd_epi32(sumi, _mm512_packs_epi32(da[j], db[j]), sc_j);
            }
            acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), d_pair[p], acc[p]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        const __m512i mine = (r & 1) ? _mm512_setr_epi32(2, 3, 6, 7, 10, 11, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0)
                                     : _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 0, 0, 0, 0, 0, 0, 0, 0);
        const float sum = hsum256(_mm512_castps512_ps256(_mm512_permutexvar_ps(mine, acc[r / 2])));
        out[r] = Q3 ? sum : sum - hsum128(_mm512_castps512_ps128(_mm512_permutexvar_ps(lane_of_zmm(r), off)));
    }
}

/* Q6_K over R <= 4 rows: elements 128h..128h+63 are ql[64h..64h+63]'s low nibbles with
 * qh[32h..]'s bits 0-1 (first 32) and 2-3 (next 32); elements 128h+64.. the high nibbles
 * with bits 4-5 and 6-7: one zmm of 64 consecutive elements each, against the Q8_K row
 * as stored. Levels stay unsigned (0..63, vpdpbusd) and the -32 comes off through the
 * bsums: 32 * sum(scale * bsum) per row, no per-element subtraction. The rows' 16 int8
 * scales decode together (lanes_of_rows), sign-extended to int16 once for all rows; per
 * row, one vpermw per 128 elements picks them for the two vectors' 4-element sums packed to
 * int16, as k4_rows_avx512 (in cache 55-58 -> 64-66 GB/s with GFNI's high bits). The
 * two high bits: GFNI moves them to bits 4-5 in one affine op, one ternary logic op merges
 * them with the nibbles; else a shift and two masks. d of the rows share one conversion,
 * row r's sums sit in lanes 4r..4r+3 and integer sums are exact, so a row's result is the
 * same for every R. Prefetch as k4_rows_avx512. */
template <int R, bool GFNI = false>
TSR_TARGET_AVX512VNNI static void k6_rows_avx512(int64_t n, const char * x, size_t lda, const tsr_block_q8_K * yrow, float * out) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30), z = _mm512_setzero_si512();
    /* qh bits to bits 4-5 of each byte: << 4 and << 2 for the low nibbles' halves, >> 0 and >> 2 for the high */
    const __m512i shl_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shr_hi = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    const matvec_prefetcher<TSR_TYPE_Q6_K, sizeof(tsr_block_q6_K)> prefetch;
    __m512 acc = _mm512_setzero_ps();  /* row r in lanes 4r..4r+3 */
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        const tsr_block_q8_K & y = yrow[i];
        const uint8_t * blk = (const uint8_t *)x + (size_t)i * sizeof(tsr_block_q6_K);
        const __m512i sc = lanes_of_rows<R>(blk + offsetof(tsr_block_q6_K, scales), lda);
        const __m512i offset = _mm512_slli_epi32(dot16_bsums_zmm(sc, y), 5);
        const __m512i sc_lo = _mm512_srai_epi16(_mm512_unpacklo_epi8(z, sc), 8);  /* scales 0..7 of each lane as int16 */
        const __m512i sc_hi = _mm512_srai_epi16(_mm512_unpackhi_epi8(z, sc), 8);  /* scales 8..15 */
        auto d_of = [&](int r) { tsr_fp16_t h; std::memcpy(&h, blk + (size_t)(r < R ? r : 0) * lda + offsetof(tsr_block_q6_K, d), 2); return (short)h; };
        const __m128 d = _mm_mul_ps(_mm_cvtph_ps(_mm_setr_epi16(d_of(0), d_of(1), d_of(2), d_of(3), 0, 0, 0, 0)), _mm_set1_ps(y.d));
        const __m512 d4 = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), _mm512_castps128_ps512(d));
        __m512i sumi[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const uint8_t * row = blk + (size_t)r * lda;
            prefetch((const char *)row);
            __m512i part[2];  /* h = 0 and 1 */
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
                const __m512i ql = _mm512_loadu_si512((const void *)(row + 64 * h));
                const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(row + offsetof(tsr_block_q6_K, qh) + 32 * h)));
                __m512i v0, v1;
                if constexpr (GFNI) {
                    v0 = _mm512_ternarylogic_epi32(ql, gf_move_bits(qh, 0, 2, 4, 2), m4, 0xEC);  /* (a & c) | b */
                    v1 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), gf_move_bits(qh, 4, 6, 4, 2), m4, 0xEC);
                } else {
                    v0 = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl_lo), m30));
                    v1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(_mm512_srlv_epi16(qh, shr_hi), m30));
                }
                /* 128-bit lane k of v0 takes scale 8h + k, of v1 scale 8h + 4 + k; the 4-element
                 * dots of both fit int16 (63 * 128 * 4): packed, one vpmaddwd applies the scales */
                const __m512i dots = _mm512_packs_epi32(_mm512_dpbusd_epi32(z, v0, _mm512_loadu_si512((const void *)(y.qs + 128 * h))),
                                                        _mm512_dpbusd_epi32(z, v1, _mm512_loadu_si512((const void *)(y.qs + 128 * h + 64))));
                part[h] = _mm512_madd_epi16(dots, _mm512_permutexvar_epi16(pair_words_index(r, 0, 4, 1, 5, 2, 6, 3, 7), h ? sc_hi : sc_lo));
            }
            sumi[r] = _mm512_add_epi32(part[0], part[1]);
        }
#pragma GCC unroll 4
        for (int r = R; r < 4; ++r) sumi[r] = sumi[0];
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum_rows_by_lane(sumi[0], sumi[1], sumi[2], sumi[3]), offset)), d4, acc);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) out[r] = hsum128(_mm512_castps512_ps128(_mm512_permutexvar_ps(lane_of_zmm(r), acc)));
}

/* The R-row mat-vec kernels: the K-quants against Q8_K (TSR_MATVEC_ROWS), the other
 * 32-element types against yq8 (gemv_q32_rows). */
struct matvec_avx512 {
    template <tsr_type T, int R>
    TSR_TARGET_AVX512VNNI static void q32(int64_t n, const char * x, size_t lda, const yq8 * y, float * out) { gemv_q32_rows<T, R>(n, x, lda, y, out); }
    template <int KS, int R>
    TSR_TARGET_AVX512VNNI static void q8k(int64_t n, const char * x, size_t lda, const tsr_block_q8_K * y, float * out) {
        if constexpr (KS == KSLOT_Q4_K || KS == KSLOT_Q5_K) k4_rows_avx512<KS == KSLOT_Q5_K, R>(n, x, lda, y, out);
        else if constexpr (KS == KSLOT_Q2_K || KS == KSLOT_Q3_K) k2_rows_avx512<KS == KSLOT_Q3_K, R>(n, x, lda, y, out);
        else k6_rows_avx512<R>(n, x, lda, y, out);
    }
};

/* The kernels that use GFNI, on a CPU that has it: the R-row kernels of Q3_K, Q5_K and
 * Q6_K and the 32-element types' (gemv_q32_rows<T, R, true>). flatten inlines the bodies
 * and, under this target, their GFNI helpers into them (the bodies' own target has no
 * GFNI, so that no other instantiation can hold GFNI instructions). */
struct matvec_avx512_gfni {
    template <tsr_type T, int R>
    __attribute__((flatten)) TSR_TARGET_AVX512VNNI_GFNI static void q32(int64_t n, const char * x, size_t lda, const yq8 * y, float * out) {
        gemv_q32_rows<T, R, true>(n, x, lda, y, out);
    }
    template <int KS, int R>
    __attribute__((flatten)) TSR_TARGET_AVX512VNNI_GFNI static void q8k(int64_t n, const char * x, size_t lda, const tsr_block_q8_K * y, float * out) {
        static_assert(KS == KSLOT_Q3_K || KS == KSLOT_Q5_K || KS == KSLOT_Q6_K, "only Q3_K, Q5_K and Q6_K have GFNI kernels");
        if constexpr (KS == KSLOT_Q5_K) k4_rows_avx512<true, R, true>(n, x, lda, y, out);
        else if constexpr (KS == KSLOT_Q6_K) k6_rows_avx512<R, true>(n, x, lda, y, out);
        else k2_rows_avx512<true, R, true>(n, x, lda, y, out);
    }
};

/* Q2_K's R-row kernel with VBMI's scales (k2_scales_vbmi), on a CPU that has it; flatten
 * as matvec_avx512_gfni. Cpu_bench's Q2_K mat-vec in cache, one core, variants alternating
 * (before the side-block activations): with q loaded once, 38.3-38.9 GB/s against 36.4-37.9
 * with the vpermw scales; with q folded into its users, +1-3 %. */
struct matvec_avx512_vbmi {
    template <int KS, int R>
    __attribute__((flatten)) TSR_TARGET_AVX512VNNI_VBMI static void q8k(int64_t n, const char * x, size_t lda, const tsr_block_q8_K * y, float * out) {
        static_assert(KS == KSLOT_Q2_K, "only Q2_K has a VBMI kernel");
        k2_rows_avx512<false, R, false, true>(n, x, lda, y, out);
    }
};

/* Q3_K's R-row kernel with GFNI's levels and VBMI's scales (q3k_scales_vbmi,
 * k2_scales_vbmi), and Q4_1 / Q5_0 / Q5_1's with GFNI's levels from VBMI's byte permutes
 * (q32_group_vbmi); flatten as matvec_avx512_gfni. */
struct matvec_avx512_gfni_vbmi {
    template <tsr_type T, int R>
    __attribute__((flatten)) TSR_TARGET_AVX512VNNI_GFNI_VBMI static void q32(int64_t n, const char * x, size_t lda, const yq8 * y, float * out) {
        gemv_q32_rows<T, R, true, true>(n, x, lda, y, out);
    }
    template <int KS, int R>
    __attribute__((flatten)) TSR_TARGET_AVX512VNNI_GFNI_VBMI static void q8k(int64_t n, const char * x, size_t lda, const tsr_block_q8_K * y, float * out) {
        static_assert(KS == KSLOT_Q3_K, "only Q3_K has a GFNI + VBMI kernel");
        k2_rows_avx512<true, R, true, true>(n, x, lda, y, out);
    }
};

/* Q4_0's table entries (its own slots: dot_q4_0, dot4, dot1) over an R-row kernel set M. */
template <class M> struct q4_0_entries {
    static float dot(int64_t n, const tsr_block_q4_0 * x, const yq8 * y) { return row_quant_dots<M>::template dot_yq8<TSR_TYPE_Q4_0>(n, x, y); }
    template <int R> static void rows(int64_t n, const char * x, size_t lda, const void * y, float * out) {
        M::template q32<TSR_TYPE_Q4_0, R>(n, x, lda, (const yq8 *)y, out);
    }
    static void fill(kernels & k) {
        k.dot_q4_0 = dot;
        k.dot4[SLOT_Q4_0] = rows<4>;
        k.dot1[SLOT_Q4_0] = rows<1>;
    }
};

/* Q8_0 / Q4_0 and the K-quant / 32-element dots use the AVX2 kernels unless the CPU has
 * VNNI; no Q8_0 / Q4_0 GEMM without it. f: the CPU's features (tests pass fewer, to reach
 * the kernels a CPU without them would run). */
static kernels make_kernels_avx512(const cpu_features & f = features()) {
    kernels k{};
    k.isa = TSR_CPU_ISA_AVX512;
    k.dot_f32 = dot_f32_avx512;
    k.dot_f16 = dot_f16_avx512;
    k.dot_bf16 = dot_bf16_avx512;
    k.dot_q8_0 = dot_q8_0_avx2;
    k.dot_q4_0 = dot_q4_0_avx2;
    fill_dot_rows_avx2(k);
    k.dot4[SLOT_F32] = dot_rows_avx512<0, 4>;
    k.dot4[SLOT_F16] = dot_rows_avx512<1, 4>;
    k.dot4[SLOT_BF16] = dot_rows_avx512<2, 4>;
    k.dot1[SLOT_F32] = dot_rows_avx512<0, 1>;
    k.dot1[SLOT_F16] = dot_rows_avx512<1, 1>;
    k.dot1[SLOT_BF16] = dot_rows_avx512<2, 1>;
    row_quant_dots<matvec_avx2>::fill(k);
    k.quantize_q8k = quantize_q8k_avx512;
    k.quantize_y = quantize_y_avx512;
    k.axpy_f32 = axpy_f32_avx512;
    k.f16_to_f32 = cvt_f16_f32_avx512;
    k.f32_to_f16 = cvt_f32_f16_avx2;
    k.gemm[SLOT_F32] = &gemm_f32_avx512;
    k.gemm[SLOT_F16] = &gemm_f16_avx512;
    k.gemm[SLOT_BF16] = &gemm_bf16cvt_avx512;
    k.act = &act_table_avx512;
    if (f.avx512_bf16) k.gemm[SLOT_BF16] = &gemm_bf16_avx512;
    if (f.avx512_vnni) {
        k.dot_q8_0 = gemv_q8_0_avx512vnni;
        k.dot4[SLOT_Q8_0] = dot4_q8_0_avx512vnni;
        k.dot1[SLOT_Q8_0] = dot1_q8_0_avx512vnni;
        k.gemm[SLOT_Q8_0] = &gemm_q8_0_avx512;
        k.gemm[SLOT_Q4_0] = &gemm_q4_0_avx512;
        row_quant_dots<matvec_avx512>::fill(k);
        q4_0_entries<matvec_avx512>::fill(k);
        k.q8k_side[KSLOT_Q2_K] = k.q8k_side[KSLOT_Q3_K] = true;  /* k2_rows_avx512, every variant below */
        if (f.avx512_vbmi) {
            k.dot_q8k[KSLOT_Q2_K] = row_quant_dots<matvec_avx512_vbmi>::dot_q8k<KSLOT_Q2_K>;
            k.dot4_q8k[KSLOT_Q2_K] = row_quant_dots<matvec_avx512_vbmi>::dot4_q8k<KSLOT_Q2_K>;
        }
        if (f.avx512_gfni) {
            k.dot_q8k[KSLOT_Q3_K] = row_quant_dots<matvec_avx512_gfni>::dot_q8k<KSLOT_Q3_K>;
            k.dot4_q8k[KSLOT_Q3_K] = row_quant_dots<matvec_avx512_gfni>::dot4_q8k<KSLOT_Q3_K>;
            k.dot_q8k[KSLOT_Q5_K] = row_quant_dots<matvec_avx512_gfni>::dot_q8k<KSLOT_Q5_K>;
            k.dot4_q8k[KSLOT_Q5_K] = row_quant_dots<matvec_avx512_gfni>::dot4_q8k<KSLOT_Q5_K>;
            k.dot_q8k[KSLOT_Q6_K] = row_quant_dots<matvec_avx512_gfni>::dot_q8k<KSLOT_Q6_K>;
            k.dot4_q8k[KSLOT_Q6_K] = row_quant_dots<matvec_avx512_gfni>::dot4_q8k<KSLOT_Q6_K>;
            using G = row_quant_dots<matvec_avx512_gfni>;
            q4_0_entries<matvec_avx512_gfni>::fill(k);
            k.dot_yq8[QSLOT_Q4_1] = G::dot_yq8<TSR_TYPE_Q4_1>;
            k.dot_yq8[QSLOT_Q5_0] = G::dot_yq8<TSR_TYPE_Q5_0>;
            k.dot_yq8[QSLOT_Q5_1] = G::dot_yq8<TSR_TYPE_Q5_1>;
            k.dot_yq8[QSLOT_IQ4_NL] = G::dot_yq8<TSR_TYPE_IQ4_NL>;
            k.dot4_yq8[QSLOT_Q4_1] = G::dot4_yq8<TSR_TYPE_Q4_1>;
            k.dot4_yq8[QSLOT_Q5_0] = G::dot4_yq8<TSR_TYPE_Q5_0>;
            k.dot4_yq8[QSLOT_Q5_1] = G::dot4_yq8<TSR_TYPE_Q5_1>;
            k.dot4_yq8[QSLOT_IQ4_NL] = G::dot4_yq8<TSR_TYPE_IQ4_NL>;
            if (f.avx512_vbmi) {  /* Q3_K: GFNI levels, VBMI scales; Q4_1 / Q5_0 / Q5_1: VBMI permutes */
                using GV = row_quant_dots<matvec_avx512_gfni_vbmi>;
                k.dot_q8k[KSLOT_Q3_K] = GV::dot_q8k<KSLOT_Q3_K>;
                k.dot4_q8k[KSLOT_Q3_K] = GV::dot4_q8k<KSLOT_Q3_K>;
                k.dot_yq8[QSLOT_Q4_1] = GV::dot_yq8<TSR_TYPE_Q4_1>;
                k.dot_yq8[QSLOT_Q5_0] = GV::dot_yq8<TSR_TYPE_Q5_0>;
                k.dot_yq8[QSLOT_Q5_1] = GV::dot_yq8<TSR_TYPE_Q5_1>;
                k.dot4_yq8[QSLOT_Q4_1] = GV::dot4_yq8<TSR_TYPE_Q4_1>;
                k.dot4_yq8[QSLOT_Q5_0] = GV::dot4_yq8<TSR_TYPE_Q5_0>;
                k.dot4_yq8[QSLOT_Q5_1] = GV::dot4_yq8<TSR_TYPE_Q5_1>;
            }
        }
        /* the half panels' GEMM is Q6_K's (against Q8_K, with the x86 half-panel packer) */
        packed_gemms<gemm_q8_0_avx512, gemm_min_avx512, gemm_q6_K_avx512, x86_packers<32, 0x80>::of>::fill(k);
    }
    return k;
}

} // namespace tcpu
} // namespace
TSR_SIMD_WARNINGS_ON
#endif /* TSR_CPU_HAVE_X86_KERNELS */
