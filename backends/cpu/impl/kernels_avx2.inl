/*
 * kernels_avx2.inl - x86-64 AVX2 + FMA + F16C kernels (runtime-dispatched; compiled with
 * target attributes so the rest of the TU stays baseline x86-64).
 */
#if defined(TSR_CPU_HAVE_X86_KERNELS)
TSR_SIMD_WARNINGS_OFF
namespace {
namespace tcpu {

TSR_TARGET_AVX2 static inline float hsum128(__m128 v) {
    const __m128 m = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}
TSR_TARGET_AVX2 static inline float hsum256(__m256 v) { return hsum128(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))); }
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
/* The same with the sign moved onto x, for rows that meet the same y: ay = |y| once for all of
 * them, one vpsignb a row where the sign trick takes two. Neither x nor y may hold -128 (the
 * activations never do; IQ4_NL's table stops at -127). */
TSR_TARGET_AVX2 static inline __m256i dot32_s8_absy_avx2(__m256i x, __m256i y, __m256i ay) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ay, _mm256_sign_epi8(x, y)), _mm256_set1_epi16(1));
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

/* A mat-vec kernel's prefetch of the rows of type T (REPACKED: a CPU_REPACK layout), a step
 * reading STEP_BYTES of a row (g_matvec_pf_ahead). The 32-block types and F16 / BF16 sat at
 * 0.78-0.89 x the read bandwidth without it, with in-cache rates well above it. */
template <enum tsr_type T, size_t STEP_BYTES, bool REPACKED = false> struct matvec_prefetcher {
    static constexpr size_t lines = std::max<size_t>(1, STEP_BYTES / matvec_pf_line_every(T, REPACKED));
    size_t ahead = REPACKED ? g_matvec_pf_ahead.repacked[T] : g_matvec_pf_ahead.file[T];
    /* Into L2 (prefetch_l2) rather than L1 (T0). On a 2-core Zen 4
     * VM (cpu_bench --prefetch, T0 and T1 alternating in one binary, 5 runs, read 31-54 GB/s),
     * paired medians x the read, T0 -> T1 at the default distances: F16 0.89-0.94 -> 0.98-0.99
     * (at 1024), BF16 0.86-0.98 -> 0.96-1.00, Q8_0 0.92 -> 1.01, Q6_K 0.98 -> 1.07, Q4_0 0.98 ->
     * 1.02, Q4_K 1.00 -> 1.02, Q5_K 0.98 -> 1.01, IQ4_NL 0.98 -> 1.01, Q4_1 0.98 -> 1.00, Q5_0
     * 1.00 -> 1.01, Q5_1 0.97 -> 1.02, CPU_REPACK Q4_0 0.96 -> 0.99, IQ4_NL 1.00 -> 1.00; the
     * AVX-512 Q2_K / Q3_K kernels' own prefetch likewise (k2_row, the word kernels): Q3_K 0.92 ->
     * 0.99, Q2_K 0.93 -> 0.92, their words 0.99 -> 1.00 and 0.99 -> 1.02. (Earlier, one run on
     * another machine: Q6_K T1 0.88-0.89 against T0's 0.93; NTA half the rate.) */
    TSR_ALWAYS_INLINE void operator()(const char * p) const {
        TSR_UNROLL(8)
        for (size_t l = 0; l < lines; ++l) prefetch_l2(p + ahead + 64 * l);
    }
};

/* R rows at once (x + r * lda) for matrix-vector: the y loads are shared, and the rows the
 * driver passes are far apart, so each core keeps four sequential DRAM streams going (R = 4).
 * R = 1 is the same arithmetic for the rows left over, so a row's result never depends on
 * the split. */
template <int T>
TSR_TARGET_AVX2 static inline __m256 load8_as_f32_avx2(const char * row, int64_t i) {
    if (T == 0) return _mm256_loadu_ps((const float *)row + i);
    if (T == 1) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)));
    return bf16x8_avx2((const uint16_t *)row + i);
}

template <int T, int R>
TSR_TARGET_AVX2 static void dot_rows_avx2(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const float * y = (const float *)yv;
    const matvec_prefetcher<T == 1 ? TSR_TYPE_F16 : TSR_TYPE_BF16, 2 * 16> prefetch;
    __m256 acc0[R], acc1[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            if (T != 0) prefetch(x + (size_t)r * lda + 2 * i);  /* F32 streams at the read bandwidth without */
            acc0[r] = _mm256_fmadd_ps(load8_as_f32_avx2<T>(x + (size_t)r * lda, i), y0, acc0[r]);
            acc1[r] = _mm256_fmadd_ps(load8_as_f32_avx2<T>(x + (size_t)r * lda, i + 8), y1, acc1[r]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 y0 = _mm256_loadu_ps(y + i);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc0[r] = _mm256_fmadd_ps(load8_as_f32_avx2<T>(x + (size_t)r * lda, i), y0, acc0[r]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        float s = hsum256(_mm256_add_ps(acc0[r], acc1[r]));
        for (int64_t k = i; k < n; ++k) s += elem_as_f32<T>(x + (size_t)r * lda, k) * y[k];
        out[r] = s;
    }
}

/* The first 8 bytes of the two blocks of a pair, block 0's in bytes 0-7 and block 1's in
 * 8-15: d, Q4_1 / Q5_1's m and Q5's qh sit there, so two loads bring what the pair's
 * scales and fifth bits need (a load, insert and shuffle per fp16 scale, as before, held
 * Q4_1 at 21 GB/s on one core in cache; 27 with the heads). */
TSR_TARGET_AVX2 static inline __m128i pair_heads_avx2(const void * b0, const void * b1) {
    return _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)b0), _mm_loadl_epi64((const __m128i *)b1));
}

/* Q8_0 a pair of blocks per step: both scales come from one pair of loads and one
 * conversion (pair_heads_avx2), where a block per step converted each scale alone (the
 * last block of an odd count still does, through the same products). */
template <int R>
TSR_TARGET_AVX2 static void dot_rows_q8_0_avx2(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const yq8 * y = (const yq8 *)yv;
    const int64_t nb = n / 32;
    const matvec_prefetcher<TSR_TYPE_Q8_0, 2 * sizeof(tsr_block_q8_0)> prefetch;
    __m256 acc[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const __m256i y0 = _mm256_loadu_si256((const __m256i *)y[b].qs), y1 = _mm256_loadu_si256((const __m256i *)y[b + 1].qs);
        const __m256 dy = _mm256_setr_m128(_mm_set1_ps(y[b].d), _mm_set1_ps(y[b + 1].d));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const tsr_block_q8_0 * xb = (const tsr_block_q8_0 *)(x + (size_t)r * lda) + b;
            prefetch((const char *)xb);
            /* lane 0: d0 y.d of block 0, lane 4: block 1's */
            const __m256 dd = _mm256_mul_ps(_mm256_cvtph_ps(pair_heads_avx2(xb, xb + 1)), dy);
            const __m256i p0 = dot32_s8s8_avx2(_mm256_loadu_si256((const __m256i *)xb[0].qs), y0);
            const __m256i p1 = dot32_s8s8_avx2(_mm256_loadu_si256((const __m256i *)xb[1].qs), y1);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_permutevar8x32_ps(dd, _mm256_setzero_si256()), acc[r]);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(4)), acc[r]);
        }
    }
    if (b < nb) {
        const __m256i yq = _mm256_loadu_si256((const __m256i *)y[b].qs);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const tsr_block_q8_0 * xb = (const tsr_block_q8_0 *)(x + (size_t)r * lda) + b;
            const __m256i p = dot32_s8s8_avx2(_mm256_loadu_si256((const __m256i *)xb->qs), yq);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f_avx2(xb->d) * y[b].d), acc[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) out[r] = hsum256(acc[r]);
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
/* vcvtps2ph rounds to nearest even as f2h does; a group holding a NaN goes through f2h,
 * whose NaN (sign | 0x7E00) drops the payload vcvtps2ph keeps. */
TSR_TARGET_AVX2 static void cvt_f32_f16_avx2(const float * src, void * dst, int64_t n) {
    uint16_t * d = (uint16_t *)dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(src + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) {
            for (int j = 0; j < 8; ++j) d[i + j] = f2h(src[i + j]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; ++i) d[i] = f2h(src[i]);
}
TSR_TARGET_AVX2 static void cvt_bf16_f32_avx2(const void * src, float * dst, int64_t n) {
    const uint16_t * s = (const uint16_t *)src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, bf16x8_avx2(s + i));
    for (; i < n; ++i) dst[i] = bf2f(s[i]);
}

/* One column's 8 results of a GEMM tile into C: the first `valid` rows, added to what C
 * holds when accumulating (a k step past the first). */
TSR_TARGET_AVX2 static inline void store_col8_avx2(float * c, __m256 v, int valid, bool accumulate) {
    if (valid >= 8) {
        _mm256_storeu_ps(c, accumulate ? _mm256_add_ps(_mm256_loadu_ps(c), v) : v);
        return;
    }
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, v);
    for (int i = 0; i < valid; ++i) c[i] = accumulate ? c[i] + tmp[i] : tmp[i];
}

/* F32 GEMM micro-kernel: 16 x 6 tile (2 ymm x 6 columns). The twelve accumulators are named
 * registers (as the NEON kernel's), gathered into an array only after the k loop: declared
 * as an array and indexed by the run-time column count in the stores, GCC kept it in memory
 * and wrote all twelve back every k (12 stores a step where the FMAs need 6 cycles: 35
 * GFLOPS a core on Zen 4, 0.43 x OpenBLAS). */
TSR_TARGET_AVX2 static void gemm_f32_kernel_avx2(int kc, const void * ap, const void * bp, float * c, size_t ldc,
                                                 int mr_valid, int nr_valid, bool accumulate) {
    const float * a = (const float *)ap;
    const float * b = (const float *)bp;
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int k = 0; k < kc; ++k) {
        const __m256 a0 = _mm256_loadu_ps(a + (size_t)k * 16);
        const __m256 a1 = _mm256_loadu_ps(a + (size_t)k * 16 + 8);
        const float * bk = b + (size_t)k * 6;
#define TSR_AVX2_STEP(j) { const __m256 bb = _mm256_broadcast_ss(bk + j); c##j##0 = _mm256_fmadd_ps(a0, bb, c##j##0); c##j##1 = _mm256_fmadd_ps(a1, bb, c##j##1); }
        TSR_AVX2_STEP(0) TSR_AVX2_STEP(1) TSR_AVX2_STEP(2) TSR_AVX2_STEP(3) TSR_AVX2_STEP(4) TSR_AVX2_STEP(5)
#undef TSR_AVX2_STEP
    }
    const __m256 r[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int j = 0; j < nr_valid; ++j) {
        float * cj = c + (size_t)j * ldc;
        store_col8_avx2(cj, r[j][0], mr_valid, accumulate);
        if (mr_valid > 8) store_col8_avx2(cj + 8, r[j][1], mr_valid - 8, accumulate);
    }
}

/* Int8 GEMM micro-kernel: 8 x 8 tile on the int8 panels of pack.inl. Per 32-k block an
 * integer tile is built with vpmaddubsw (u8 x s8, adjacent products summed into int16
 * WITH saturation), then scaled into float accumulators. What keeps the int16 sums exact:
 *  - Q8_0-style signed A (-128..127), on AVX-VNNI only: the sign trick. |a| is the
 *    unsigned operand and a's sign moves onto b (yq8 is -127..127, so negating it cannot
 *    wrap), into vpdpbusd. An offset A (0..255) would pass int16 in vpmaddubsw (2 * 255 *
 *    127), and the sign trick without VNNI costs three multiplies a quad and column
 *    (vpsignb, vpmaddubsw, vpmaddwd by ones): signed panels take gemm_pairs_kernel_avx2
 *    there instead.
 *  - Q4_0 (nibbles 0..15): a pair is at most 2 * 15 * 128 = 3840, so the 8 quads of a
 *    block add up in int16 (at most 30720) and are widened once per block; the B bias
 *    (-8 * sum) then undoes the nibble offset.
 *  - min panels (KIND, pack.inl: q 0..31): a pair is at most 2 * 31 * 127, but eight
 *    quads would pass int16, so each quad is widened as Q8_0's; the tile starts at 0 and
 *    each block subtracts A's min times B's d * sum(q).
 *  - half panels (Q6_K's levels -32..31, Q8 set; VNNI only, as Q8_0): one tile per 16 k,
 *    each scaled by d times its own scale (B as Q8_0's: no bias). The AVX-512 kernel's
 *    int32 combine of the two tiles would need 24 registers, and AVX2 has 16.
 * 8 x 8 beat 16 x 4 here (one A quad per ymm leaves more registers for the tiles; A is
 * read once per 8 columns). The quad loop stays rolled: unrolled, GCC reassociates the
 * int16 sums into trees of temporaries and spills most of them. */
/* vpdpbusd on ymm (AVX-VNNI): u8 x s8 in groups of 4 summed into int32, no int16 step. Only
 * gemm_i8_kernel_avx2vnni's inlined body calls it. */
TSR_TARGET_AVX2VNNI static inline __m256i dpbusd_avx2vnni(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }

/* VNNI: each quad's products by one vpdpbusd into int32 (AVX-VNNI, through
 * gemm_i8_kernel_avx2vnni) instead of vpmaddubsw + vpmaddwd. Without saturation the sums
 * are the same integers (the operand bounds above keep vpmaddubsw from saturating), so
 * the two give the same bits. */
template <bool Q8, int KIND = PANEL_Q8, bool VNNI = false>
TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE void gemm_i8_kernel_avx2(int kc, const void * ap, const void * bp, float * c, size_t ldc,
                                                                  int mr_valid, int nr_valid, bool accumulate) {
    static_assert(VNNI || !Q8, "signed A panels without VNNI: gemm_pairs_kernel_avx2");
    constexpr bool MINS = KIND == PANEL_MIN;
    constexpr int PARTS = KIND == PANEL_HALVES ? 2 : 1;  /* tiles per 32 k */
    const uint8_t * a = (const uint8_t *)ap;
    const uint8_t * b = (const uint8_t *)bp;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 f[8];
    for (int j = 0; j < 8; ++j) f[j] = _mm256_setzero_ps();
    for (int blk = 0; blk < kc / 32; ++blk) {
        const int32_t * bq = (const int32_t *)b;
        const float * bs = (const float *)(b + 8 * 32);
        const int32_t * bias = (const int32_t *)(b + 8 * 36);
        for (int part = 0; part < PARTS; ++part) {
            __m256i t[8];
            for (int j = 0; j < 8; ++j) t[j] = _mm256_setzero_si256();
            /* bounds computed first: with them in the loop header, g++ -fsanitize=undefined's
             * division checks leave the unroll pragma nothing to annotate (a warning) */
            const int q_begin = part * 8 / PARTS, q_end = (part + 1) * 8 / PARTS;
#pragma GCC unroll 1
            for (int q = q_begin; q < q_end; ++q) {
                const __m256i a0 = _mm256_loadu_si256((const __m256i *)(a + q * 32));
                const int32_t * bqq = bq + q * 8;
                if constexpr (VNNI) {
                    const __m256i u0 = Q8 ? _mm256_abs_epi8(a0) : a0;
                    TSR_UNROLL(8)
                    for (int j = 0; j < 8; ++j) {
                        const __m256i bj = _mm256_set1_epi32(bqq[j]);
                        t[j] = dpbusd_avx2vnni(t[j], u0, Q8 ? _mm256_sign_epi8(bj, a0) : bj);
                    }
                } else if constexpr (MINS) {
                    TSR_UNROLL(8)
                    for (int j = 0; j < 8; ++j)
                        t[j] = _mm256_add_epi32(t[j], _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_set1_epi32(bqq[j])), ones));
                } else {
                    TSR_UNROLL(8)
                    for (int j = 0; j < 8; ++j)
                        t[j] = _mm256_add_epi16(t[j], _mm256_maddubs_epi16(a0, _mm256_set1_epi32(bqq[j])));
                }
            }
            /* half panels: 8 floats d * sc of the first 16 k, then 8 of the second */
            const __m256 da = _mm256_loadu_ps((const float *)(a + 8 * 32 + (KIND == PANEL_HALVES ? 32 * part : 0)));
            TSR_UNROLL(8)
            for (int j = 0; j < 8; ++j) {
                __m256i i0 = t[j];
                if constexpr (!Q8 && !MINS) i0 = _mm256_add_epi32(VNNI ? i0 : _mm256_madd_epi16(i0, ones), _mm256_set1_epi32(bias[j]));
                f[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_mul_ps(da, _mm256_set1_ps(bs[j])), f[j]);
            }
        }
        if constexpr (MINS) {
            const __m256 mins = _mm256_loadu_ps((const float *)(a + 8 * 36));
            const float * bsum = (const float *)(b + 8 * 36);
            TSR_UNROLL(8)
            for (int j = 0; j < 8; ++j) f[j] = _mm256_fnmadd_ps(mins, _mm256_set1_ps(bsum[j]), f[j]);
        }
        a += 8 * (KIND == PANEL_Q8 ? 36 : 40);
        b += 8 * 40;
    }
    for (int j = 0; j < nr_valid; ++j) store_col8_avx2(c + (size_t)j * ldc, f[j], mr_valid, accumulate);
}

/* The AVX-VNNI build of gemm_i8_kernel_avx2 (the body inlined under this target). */
template <bool Q8, int KIND = PANEL_Q8>
TSR_TARGET_AVX2VNNI static void gemm_i8_kernel_avx2vnni(int kc, const void * ap, const void * bp, float * c, size_t ldc, int mr_valid,
                                                        int nr_valid, bool accumulate) {
    gemm_i8_kernel_avx2<Q8, KIND, true>(kc, ap, bp, c, ldc, mr_valid, nr_valid, accumulate);
}

/* Pair GEMM micro-kernel (AVX2 without VNNI, signed A: Q8_0-style levels, KIND PANEL_Q8,
 * and half panels): 8 x 8 tile on pair panels (pack.inl). Each quad's A is sign-extended to
 * int16 once for the 8 columns (the 8 rows' k0 k1 in one register, their k2 k3 in another),
 * and a column takes two vpmaddwd against its broadcast int16 pairs. The int8 kernel's sign
 * trick costs a vpsignb, a vpmaddubsw and a vpmaddwd a quad and column, three operations on
 * the two ports that multiply; this is two. No saturation anywhere: the tiles are the same
 * int32 sums as the int8 kernel's, then scaled by the same float operations (the same bits:
 * test). Measured on the 2-core Zen 4 VM without AVX-512: see gemm_q8_0_pairs_avx2. */
template <int KIND>
TSR_TARGET_AVX2 static void gemm_pairs_kernel_avx2(int kc, const void * ap, const void * bp, float * c, size_t ldc, int mr_valid,
                                                   int nr_valid, bool accumulate) {
    static_assert(KIND == PANEL_Q8 || KIND == PANEL_HALVES, "signed A panels only");
    constexpr int PARTS = KIND == PANEL_HALVES ? 2 : 1;  /* tiles per 32 k */
    const uint8_t * a = (const uint8_t *)ap;
    const uint8_t * b = (const uint8_t *)bp;
    __m256 f[8];
    for (int j = 0; j < 8; ++j) f[j] = _mm256_setzero_ps();
    for (int blk = 0; blk < kc / 32; ++blk) {
        const float * bs = (const float *)(b + 8 * 64);
        for (int part = 0; part < PARTS; ++part) {
            __m256i t[8];
            for (int j = 0; j < 8; ++j) t[j] = _mm256_setzero_si256();
            const int q_begin = part * 8 / PARTS, q_end = (part + 1) * 8 / PARTS;
#pragma GCC unroll 1
            for (int q = q_begin; q < q_end; ++q) {
                const __m256i a01 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(a + q * 32)));
                const __m256i a23 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(a + q * 32 + 16)));
                const int32_t * bq = (const int32_t *)(b + q * 64);
                TSR_UNROLL(8)
                for (int j = 0; j < 8; ++j) {
                    const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(a01, _mm256_set1_epi32(bq[2 * j])),
                                                       _mm256_madd_epi16(a23, _mm256_set1_epi32(bq[2 * j + 1])));
                    t[j] = _mm256_add_epi32(t[j], p);
                    /* an empty asm ties the next columns' loads to this tile: without it GCC
                     * hoists all 16 broadcasts ahead and spills three tiles to the stack */
                    if (j % 2 == 1) __asm__("" : "+r"(bq), "+x"(t[j]));
                }
            }
            const __m256 da = _mm256_loadu_ps((const float *)(a + 8 * 32 + (KIND == PANEL_HALVES ? 32 * part : 0)));
            TSR_UNROLL(8)
            for (int j = 0; j < 8; ++j) f[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t[j]), _mm256_mul_ps(da, _mm256_set1_ps(bs[j])), f[j]);
        }
        a += 8 * (KIND == PANEL_Q8 ? 36 : 40);
        b += 8 * 68;
    }
    for (int j = 0; j < nr_valid; ++j) store_col8_avx2(c + (size_t)j * ldc, f[j], mr_valid, accumulate);
}

/* finish_a of the pair GEMMs: each quad of an 8-row int8 panel (row r's k0..k3 at 4r) to the
 * rows' (k0, k1) pairs, then their (k2, k3), in place; BLOCK_BYTES per 32 k. */
template <size_t BLOCK_BYTES>
TSR_TARGET_AVX2 static void a_panel_to_pairs_avx2(void * panel, int kc) {
    const __m256i pairs = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                           0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    for (int blk = 0; blk < kc / 32; ++blk) {
        uint8_t * p = (uint8_t *)panel + (size_t)blk * BLOCK_BYTES;
        TSR_UNROLL(8)
        for (int q = 0; q < 8; ++q) {
            /* per lane: 4 rows' k0 k1, then their k2 k3; qwords 0 2 1 3 put the 8 rows together */
            const __m256i v = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(p + q * 32)), pairs);
            _mm256_storeu_si256((__m256i *)(p + q * 32), _mm256_permute4x64_epi64(v, 0xD8));
        }
    }
}

static constexpr gemm_impl gemm_f32_avx2 = [] {
    gemm_impl g{};
    g.mr = 16; g.nr = 6; g.kc = 256; g.mc = 128;
    g.a_bytes_32k = 16 * 128; g.b_bytes_32k = 6 * 128;
    g.pack_a = pack_panel_f32<16, 4, cvt_f32_copy>;
    g.pack_b = pack_panel_f32<6, 4, cvt_f32_copy>;
    g.kernel = gemm_f32_kernel_avx2;
    return g;
}();
static constexpr gemm_impl gemm_f16_avx2 = gemm_with_pack_a(gemm_f32_avx2, pack_panel_f32<16, 2, cvt_f16_f32_avx2>);
static constexpr gemm_impl gemm_bf16_avx2 = gemm_with_pack_a(gemm_f32_avx2, pack_panel_f32<16, 2, cvt_bf16_f32_avx2>);
/* Q8_0 keeps A signed for the sign trick, so its B carries no offset bias. */
/* The int8 panels' shape on AVX2: 8 x 8 tiles, Q8_0's A packer, yq8 B. A description, not a
 * GEMM (no kernel): each GEMM below starts from it. */
static constexpr gemm_impl gemm_i8_panels_avx2 = [] {
    gemm_impl g{};
    g.mr = 8; g.nr = 8; g.kc = 1024; g.mc = 128;
    g.a_bytes_32k = 8 * 36; g.b_bytes_32k = 8 * 40;
    g.pack_a = pack_panel_i8_avx2<8, TSR_TYPE_Q8_0, 0, 0>;
    g.pack_b = pack_panel_i8_b<8, 0>;
    return g;
}();
/* The pair GEMMs (signed A panels, without VNNI): the int8 panels' A packers (per type:
 * packed_gemms), then a_panel_to_pairs_avx2 (A_BYTES per 32 k), and int16 B. */
static constexpr gemm_impl gemm_pairs_variant_avx2(gemm_impl g, decltype(gemm_impl::kernel) kernel,
                                                   decltype(gemm_impl::finish_a) finish_a) {
    g.kernel = kernel;
    g.finish_a = finish_a;
    g.pack_b = pack_panel_pairs_b<8>;
    g.b_bytes_32k = 8 * 68;
    return g;
}
/* Q8_0 and every type packed as Q8_0-style levels. LLaMA-sized 4096 x 4096 x 512 (cpu_bench
 * --gemm-only, 2-core Zen 4 VM without AVX-512, against the int8 kernel's sign trick, three
 * alternations): one thread Q8_0 99.9-101.3 -> 106.5-107.5 GFLOPS, CPU_REPACK IQ4_NL
 * 91.7-100.9 -> 102.8-108.1; two threads, best of three, Q8_0 199 -> 212, CPU_REPACK IQ4_NL
 * 198 -> 213, CPU_REPACK Q3_K 200 -> 213, Q6_K (halves) 183 -> 189. */
static constexpr gemm_impl gemm_q8_0_avx2 =
    gemm_pairs_variant_avx2(gemm_i8_panels_avx2, gemm_pairs_kernel_avx2<PANEL_Q8>, a_panel_to_pairs_avx2<8 * 36>);
static constexpr gemm_impl gemm_q4_0_avx2 = [] {
    gemm_impl g = gemm_i8_panels_avx2;
    g.pack_a = pack_panel_i8_avx2<8, TSR_TYPE_Q4_0, 0, 8>;
    g.pack_b = pack_panel_i8_b<8, 8>;
    g.kernel = gemm_i8_kernel_avx2<false>;
    return g;
}();
/* The min panels' GEMM (Q4_1, Q5_1, Q4_K, Q5_K; their packers: pack_x86.inl). Unsigned levels:
 * no sign trick to save, so the int8 kernel. */
static constexpr gemm_impl gemm_min_avx2 =
    gemm_panel_variant(gemm_i8_panels_avx2, gemm_i8_kernel_avx2<false, PANEL_MIN>, pack_panel_i8_b<8, 0, PANEL_MIN>);
/* The half panels' GEMM (Q6_K: signed levels as Q8_0's, a scale per 16). */
static constexpr gemm_impl gemm_halves_avx2 = gemm_pairs_variant_avx2(gemm_panel_variant(gemm_i8_panels_avx2, nullptr),
                                                                      gemm_pairs_kernel_avx2<PANEL_HALVES>, a_panel_to_pairs_avx2<8 * 40>);

/* With AVX-VNNI: one vpdpbusd a quad and column on the int8 panels (signed A through the
 * sign trick, which costs VNNI one vpsignb where it cost the int8 kernel two more multiplies). */
static constexpr gemm_impl gemm_q8_0_avx2vnni = gemm_with_kernel(gemm_i8_panels_avx2, gemm_i8_kernel_avx2vnni<true>);
static constexpr gemm_impl gemm_q4_0_avx2vnni = gemm_with_kernel(gemm_q4_0_avx2, gemm_i8_kernel_avx2vnni<false>);
static constexpr gemm_impl gemm_min_avx2vnni = gemm_with_kernel(gemm_min_avx2, gemm_i8_kernel_avx2vnni<false, PANEL_MIN>);
static constexpr gemm_impl gemm_halves_avx2vnni = gemm_panel_variant(gemm_i8_panels_avx2, gemm_i8_kernel_avx2vnni<true, PANEL_HALVES>);

/* ---- expf and the activations on it (constants and method: vexp in cpu_internal.inl) ---- */

TSR_TARGET_AVX2 static inline __m256 exp_avx2(__m256 x) {
    const __m256 zero = _mm256_cmp_ps(x, _mm256_set1_ps(vexp::zero_below), _CMP_LT_OQ);
    x = _mm256_andnot_ps(zero, x);
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
    return _mm256_andnot_ps(zero, _mm256_mul_ps(_mm256_mul_ps(p, s1), s2));
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

/* The byte shuffles that undo Q4_K's 12-byte packing of eight 6-bit scales and eight 6-bit
 * mins, on the super-block's first 16 bytes (d, dmin, the 12 scale bytes at 4..15): scales
 * 0-3 and mins 0-3 are the low 6 bits of scale bytes 0-3 and 4-7; scales / mins 4-7 have
 * their low 4 bits in the low / high nibbles of scale bytes 8-11 and their high 2 bits in
 * bits 6-7 of scale bytes 0-3 / 4-7. Indices per 128-bit lane, shared by the AVX-512 kernel. */
struct k4_scale_shuffles {
    int8_t low[16], high_nibbles[16], top[16];
    uint32_t low_mask[4];
};
static constexpr k4_scale_shuffles k4_shuffles = {
    {4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, -1, -1, -1, -1},
    {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 12, 13, 14, 15},
    {-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11},  /* bits 6-7, moved to 4-5 by >> 2 */
    {0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f},
};

/* Q4_K's 8 scales (bytes 0-7) and 8 mins (bytes 8-15) from the super-block's first 16 bytes
 * (a third of the instructions of 32-bit integer work). */
TSR_TARGET_AVX2 static inline __m128i q4k_scales_mins(const uint8_t * blk) {
    auto idx = [](const int8_t * v) { return _mm_loadu_si128((const __m128i *)v); };
    const __m128i h = _mm_loadu_si128((const __m128i *)blk);
    const __m128i low = _mm_or_si128(_mm_shuffle_epi8(h, idx(k4_shuffles.low)), _mm_shuffle_epi8(_mm_srli_epi16(h, 4), idx(k4_shuffles.high_nibbles)));
    const __m128i top = _mm_shuffle_epi8(h, idx(k4_shuffles.top));
    return _mm_or_si128(_mm_and_si128(low, _mm_loadu_si128((const __m128i *)k4_shuffles.low_mask)),
                        _mm_and_si128(_mm_srli_epi16(top, 2), _mm_set1_epi8(0x30)));
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

/* A Q4_K / Q5_K super-block's d and dmin (its first 4 bytes) times y.d, in lanes 0 and 1. */
TSR_TARGET_AVX2 static inline __m128 k4_d_dmin_avx2(const uint8_t * blk, const tsr_block_q8_K & y) {
    uint32_t words;
    std::memcpy(&words, blk, 4);
    return _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)words)), _mm_set1_ps(y.d));
}

/* acc + Q4_K / Q5_K's mins (bytes 8..15 of sm) times the pairs of 16-element activation
 * sums they cover, times dmin * y.d (lane 1 of d_dmin): 8 products in 4 float lanes. */
TSR_TARGET_AVX2 static inline __m128 k4_mins_acc(__m128 d_dmin, __m128i sm, const tsr_block_q8_K & y, __m128 acc) {
    const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y.bsums), _mm_loadu_si128((const __m128i *)y.bsums + 1));
    const __m128i pm = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), bs);
    return _mm_fmadd_ps(_mm_cvtepi32_ps(pm), _mm_permute_ps(d_dmin, 0x55), acc);
}

/* Q4_K (HIGH false) / Q5_K (HIGH true) against Q8_K: one ymm of nibbles per 64 elements (low
 * nibbles sub-block 2c, high 2c+1), Q5_K's fifth bits from bits 2c / 2c+1 of the 32 qh bytes.
 * A level x int8 pair is at most 2 * 31 * 127 in int16; times a 6-bit scale, int32. The mins
 * meet the activations' 16-element sums (bsums) once per super-block. */
/* One row's running sums in the K-quant mat-vec: acc the scaled integer block sums, mins
 * what comes off at the end (Q4_K / Q5_K's mins times the activations' sums). */
struct q8k_acc_avx2 {
    __m256 acc;
    __m128 mins;
};

template <bool HIGH>
TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE void k4_step_avx2(q8k_acc_avx2 & a, const uint8_t * blk, const tsr_block_q8_K & y) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(0x01);
    const uint8_t * qs = blk + (HIGH ? 48 : 16);
    const __m128i sm = q4k_scales_mins(blk);
    const __m128 d_dmin = k4_d_dmin_avx2(blk, y);
    a.mins = k4_mins_acc(d_dmin, sm, y, a.mins);
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
        const __m256i y0 = _mm256_loadu_si256((const __m256i *)(y.qs + 64 * c));
        const __m256i y1 = _mm256_loadu_si256((const __m256i *)(y.qs + 64 * c + 32));
        const __m256i s0 = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(((4 * c + 1) << 8) | (4 * c))));
        const __m256i s1 = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(((4 * c + 3) << 8) | (4 * c + 2))));
        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), s0);
        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), s1);
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
    }
    a.acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_broadcastss_ps(d_dmin), a.acc);
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
 * 8-15 of the pair sums. The scales are sign-extended to int16 once per super-block; each
 * half's eight then sit in both 128-bit lanes, so one in-lane shuffle per 32 elements
 * matches them (a per-32 sign extension crossed lanes). The two high bits of level j (bits
 * 2j of qh) reach bits 4-5 by one 16-bit shift: bits it moves across a byte are masked. */
TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE void q6k_step_avx2(q8k_acc_avx2 & a, const uint8_t * blk, const tsr_block_q8_K & y) {
    const tsr_block_q6_K & x = *(const tsr_block_q6_K *)blk;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x.scales));
    /* 32 * sum(scale * bsums): the offset of the unsigned levels, in the same int32 sum */
    __m256i sumi = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y.bsums)), 5);
    sumi = _mm256_sub_epi32(_mm256_setzero_si256(), sumi);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x.ql + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x.ql + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(x.qh + 32 * h));
        const __m256i q[4] = {
            _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
            _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
        };
        const __m256i sc_half = h ? _mm256_permute4x64_epi64(sc16, 0xEE) : _mm256_permute4x64_epi64(sc16, 0x44);  /* scales 8h..8h+7 in both lanes */
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
            const __m256i yk = _mm256_loadu_si256((const __m256i *)(y.qs + 128 * h + 32 * k));
            /* int16 word 2k in the low lane, 2k + 1 in the high one */
            const __m256i pick = _mm256_setr_m128i(_mm_set1_epi16((short)((4 * k) | (4 * k + 1) << 8)), _mm_set1_epi16((short)((4 * k + 2) | (4 * k + 3) << 8)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], yk), _mm256_shuffle_epi8(sc_half, pick)));
        }
    }
    a.acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(h2f_avx2(x.d) * y.d), a.acc);
}

/* F32 -> Q8_K as the core's quantizer: the signed value of largest magnitude maps to -127
 * (the first of them when a positive and a negative value tie), levels rounded to nearest
 * even, and the sums of every 16 levels. */
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
        TSR_UNROLL(8)
        for (int l = 1; l < 8; ++l) { hi = std::max(hi, mx[l]); lo = std::min(lo, mn[l]); }
        const float max = q8k_signed_max(hi, lo, x);
        std::memset(&y[i], 0, sizeof(y[i]));
        if (max == 0.0f || max != max) continue;
        const float iscale = -127.0f / max;
        const __m256 vis = _mm256_set1_ps(iscale);
        for (int j = 0; j < TSR_QK_K; j += 32) {
            __m256i q[4];
            TSR_UNROLL(4)
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

/* What the Q2_K / Q3_K dot kernels take from super-block i: int8 scales, the 2-bit qs, Q3_K's
 * hmask, d, the integer offset the sum starts from (Q3_K: -4 * sum(scale * bsums), the
 * levels being unsigned) and Q2_K's mins times the bsums times dmin * y.d (8 float lanes). */
struct k2_parts {
    __m128i sc8;
    const uint8_t * qs;
    const uint8_t * hmask;
    float d;
    __m256i offset;
    __m256 mins;
};
template <bool Q3> TSR_TARGET_AVX2 static inline k2_parts k2_block(const void * vx, int64_t i, const tsr_block_q8_K & y) {
    const __m256i bsums = _mm256_loadu_si256((const __m256i *)y.bsums);
    k2_parts p;
    if (Q3) {
        const tsr_block_q3_K & b = ((const tsr_block_q3_K *)vx)[i];
        p.sc8 = q3k_scales(b.scales);
        p.qs = b.qs;
        p.hmask = b.hmask;
        p.d = h2f_avx2(b.d);
        p.offset = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(p.sc8), bsums), 2));
        p.mins = _mm256_setzero_ps();
    } else {
        const tsr_block_q2_K & b = ((const tsr_block_q2_K *)vx)[i];
        const __m128i raw = _mm_loadu_si128((const __m128i *)b.scales);
        p.sc8 = _mm_and_si128(raw, _mm_set1_epi8(0x0F));
        p.qs = b.qs;
        p.hmask = nullptr;
        p.d = h2f_avx2(b.d);
        p.offset = _mm256_setzero_si256();
        const __m256i pm = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F))), bsums);
        p.mins = _mm256_mul_ps(_mm256_cvtepi32_ps(pm), _mm256_set1_ps(y.d * h2f_avx2(b.dmin)));
    }
    return p;
}

/* Q2_K (levels 0..3, 4-bit scales and mins) / Q3_K (levels 0..7 made unsigned by + 4,
 * signed 6-bit scales) against Q8_K: element 128h + 32j + l has its two low bits at bits 2j
 * of qs[32h + l] (Q3_K: its third bit at bit 4h + j of hmask[l], shifted straight to bit 2).
 * The scales are int16 once per super-block, and one in-lane byte shuffle spreads the two of
 * each 32 elements. The mins (Q2_K) and the offset 4 (Q3_K) meet the activations' 16-element
 * sums once per super-block. */
static constexpr size_t k2_prefetch_ahead_avx2 = 2048;  /* bytes past the current super-block of a row */
template <bool Q3>
TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE void k2_step_avx2(q8k_acc_avx2 & a, const uint8_t * blk, const tsr_block_q8_K & y) {
    const __m256i m3 = _mm256_set1_epi8(0x03), m4 = _mm256_set1_epi8(0x04);
    /* no prefetch kept one core's Q2_K / Q3_K below its share of DRAM */
    _mm_prefetch((const char *)blk + k2_prefetch_ahead_avx2, _MM_HINT_T0);
    _mm_prefetch((const char *)blk + k2_prefetch_ahead_avx2 + 64, _MM_HINT_T0);
    const k2_parts b = k2_block<Q3>(blk, 0, y);
    const __m256i hm = Q3 ? _mm256_loadu_si256((const __m256i *)b.hmask) : _mm256_setzero_si256();
    const __m256i sc16 = _mm256_cvtepi8_epi16(b.sc8);
    __m256i sumi = b.offset;
    a.acc = _mm256_sub_ps(a.acc, b.mins);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
        const __m256i qv = _mm256_loadu_si256((const __m256i *)(b.qs + 32 * h));
        /* scales 8h..8h+7 in both lanes */
        const __m256i sch = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11) : _mm256_permute2x128_si256(sc16, sc16, 0x00);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            __m256i q = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j), m3);
            if (Q3) {
                const int at = 4 * h + j;  /* the bit to bring to bit 2 */
                const __m256i hb = at >= 2 ? _mm256_srli_epi16(hm, at - 2) : _mm256_slli_epi16(hm, 2 - at);
                q = _mm256_or_si256(q, _mm256_and_si256(hb, m4));
            }
            const __m256i yv = _mm256_loadu_si256((const __m256i *)(y.qs + 128 * h + 32 * j));
            /* int16 lanes 0-7 (group 8h + 2j) and 8-15 (8h + 2j + 1) */
            const __m256i s = _mm256_shuffle_epi8(sch, _mm256_setr_m128i(_mm_set1_epi16((short)((4 * j + 1) << 8 | 4 * j)),
                                                                         _mm_set1_epi16((short)((4 * j + 3) << 8 | (4 * j + 2)))));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q, yv), s));
        }
    }
    a.acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(y.d * b.d), a.acc);
}

template <int KS>
TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE void q8k_step_avx2(q8k_acc_avx2 & a, const uint8_t * blk, const tsr_block_q8_K & y) {
    if constexpr (KS <= KSLOT_Q3_K) k2_step_avx2<KS == KSLOT_Q3_K>(a, blk, y);
    else if constexpr (KS == KSLOT_Q6_K) q6k_step_avx2(a, blk, y);
    else k4_step_avx2<KS == KSLOT_Q5_K>(a, blk, y);
}
TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE float q8k_sum_avx2(const q8k_acc_avx2 & a) { return hsum256(a.acc) - hsum128(a.mins); }

/* The R-row mat-vec kernels (TSR_MATVEC_ROWS) of the K-quants against Q8_K and the other
 * 32-element types against yq8 (q32, below). */
struct matvec_avx2 {
    template <int KS, int R>
    TSR_TARGET_AVX2 static void q8k(int64_t n, const char * x, size_t lda, const tsr_block_q8_K * y, float * out) {
        TSR_MATVEC_ROWS(R, q8k_acc_avx2, n / TSR_QK_K, q8k_block_bytes(KS), q8k_step_avx2<KS>, q8k_sum_avx2)
    }
    template <tsr_type T, int R> TSR_TARGET_AVX2 static void q32(int64_t n, const char * x, size_t lda, const yq8 * y, float * out);
};

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

/* One row's running sums: acc the scaled block sums (Q4_0 / Q5_0's offsets already taken
 * off in their integer sums), corr what Q4_1 / Q5_1's mins add through the activations'
 * sums (4 float lanes, lane 0 used). */
struct yq8_acc_avx2 {
    __m256 acc;
    __m128 corr;
};

/* The 32-element types against yq8, a block per step: levels 0..31 unsigned times int8
 * (IQ4_NL: the table's values, signed), Q4_1 / Q5_1's min and the offsets of Q4_0 (8) and
 * Q5_0 (16) through the activations' block sums. */
template <tsr_type T>
using q32_block_avx2 = std::conditional_t<T == TSR_TYPE_Q4_0, tsr_block_q4_0, std::conditional_t<T == TSR_TYPE_Q4_1, tsr_block_q4_1,
                       std::conditional_t<T == TSR_TYPE_Q5_0, tsr_block_q5_0, std::conditional_t<T == TSR_TYPE_Q5_1, tsr_block_q5_1, tsr_block_iq4_nl>>>>;

template <tsr_type T>
TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE void q32_step_avx2(yq8_acc_avx2 & a, const uint8_t * blk, const yq8 & y) {
    const __m256i yv = _mm256_loadu_si256((const __m256i *)y.qs);
    __m256i p;
    float d;
    if (T == TSR_TYPE_IQ4_NL) {
        const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tsr_impl::iq4nl_values));
        const tsr_block_iq4_nl & x = *(const tsr_block_iq4_nl *)blk;
        p = dot32_s8s8_avx2(_mm256_shuffle_epi8(table, unpack_q4_avx2(x.qs)), yv);
        d = h2f_avx2(x.d);
    } else if (T == TSR_TYPE_Q4_0 || T == TSR_TYPE_Q5_0) {
        constexpr int32_t offset = T == TSR_TYPE_Q5_0 ? 16 : 8;
        const q32_block_avx2<T> & x = *(const q32_block_avx2<T> *)blk;
        __m256i q = unpack_q4_avx2(x.qs);
        if constexpr (T == TSR_TYPE_Q5_0) q = _mm256_or_si256(q, fifth_bits_avx2(x.qh));
        /* - offset * sum in lane 0: the levels' offset leaves the block's integer sum exact (in
         * float, apart, the two halves cancel and the block loses bits the scalar sum keeps) */
        p = _mm256_add_epi32(dot32_u4s8_avx2(q, yv), _mm256_setr_epi32(-offset * y.sum, 0, 0, 0, 0, 0, 0, 0));
        d = h2f_avx2(x.d);
    } else {
        using block = std::conditional_t<T == TSR_TYPE_Q4_1, tsr_block_q4_1, tsr_block_q5_1>;
        const block & x = *(const block *)blk;
        __m256i q = unpack_q4_avx2(x.qs);
        if (T == TSR_TYPE_Q5_1) q = _mm256_or_si256(q, fifth_bits_avx2(((const tsr_block_q5_1 &)x).qh));
        p = dot32_u4s8_avx2(q, yv);
        d = h2f_avx2(x.d);
        /* + m y.d sum: the block's min */
        a.corr = _mm_fmadd_ss(_mm_set_ss(h2f_avx2(x.m) * y.d), _mm_set_ss((float)y.sum), a.corr);
    }
    a.acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * y.d), a.acc);
}

TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE float q32_sum_avx2(const yq8_acc_avx2 & a) { return hsum256(a.acc) + _mm_cvtss_f32(a.corr); }

/* A block per step: the blocks past the last group of 4 of q32_pairs_avx2. */
template <tsr_type T, int R>
TSR_TARGET_AVX2 static void q32_blocks_avx2(int64_t n, const char * x, size_t lda, const yq8 * y, float * out) {
    TSR_MATVEC_ROWS(R, yq8_acc_avx2, n / 32, sizeof(q32_block_avx2<T>), q32_step_avx2<T>, q32_sum_avx2)
}

/* The fp16 word at byte `at` of each block of a pair (pair_heads_avx2, as floats) spread as
 * [4 x block 0's, 4 x block 1's], the lanes of the pair's dot products. */
TSR_TARGET_AVX2 static inline __m256 pair_scales_avx2(__m256 heads, int at) {
    const int w = at / 2;
    return _mm256_permutevar8x32_ps(heads, _mm256_setr_epi32(w, w, w, w, w + 4, w + 4, w + 4, w + 4));
}

/* The fifth bits of elements 16 half .. 16 half + 15 of a pair of Q5 blocks as 0x10 bytes,
 * block 0 in the low lane, from the pair's heads (qh at byte `at` of each): each byte takes
 * the qh byte its bit sits in, and ggml's OR-and-compare spreads the bits. */
TSR_TARGET_AVX2 static inline __m256i fifth_bits_pair_avx2(__m256i heads2, int at, int half) {
    const long long byte = 0x0101010101010101ll;
    const int q = at + 2 * half;
    const __m256i pick = _mm256_setr_epi64x(byte * q, byte * (q + 1), byte * (q + 8), byte * (q + 9));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_or_si256(_mm256_shuffle_epi8(heads2, pick), _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)),
                                          _mm256_set1_epi64x(-1));
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

/* The 32-element types against yq8's Q4 side arrays, a pair of blocks per ymm (the
 * one-block steps ran at half the rate): levels unsigned (Q5: 0..31, at most 2 * 31 * 127
 * per int16 pair, two of them still fit) against the activations in nibble order, so no
 * shuffle of y per block; the offsets of Q4_0 (8) and Q5_0 (16) through the side arrays'
 * -8 * sum (doubled for Q5_0), Q4_1 / Q5_1's min through the block sums in float (the sum
 * sits in lane 4j only, so each block counts once). IQ4_NL's table values are signed: the
 * activations' sign moves onto them (|y| once per pair for all R rows), and each half goes to
 * int32 apart (two products of up to 2 * 127 * 127 would pass int16). */
template <tsr_type T, int R>
TSR_TARGET_AVX2 static void q32_pairs_avx2(int64_t n, const char * x, size_t lda, const yq8 * y, float * out) {
    using block = q32_block_avx2<T>;
    constexpr bool has_min = T == TSR_TYPE_Q4_1 || T == TSR_TYPE_Q5_1, has_qh = T == TSR_TYPE_Q5_0 || T == TSR_TYPE_Q5_1;
    constexpr int qh_at = T == TSR_TYPE_Q5_1 ? 4 : 2, m_at = 2;  /* byte offsets in a block (static_asserts below) */
    const int64_t nb = n / 32, ng = nb / 4;
    const yside_q4 * ys = side_after<yside_q4>(y, nb);
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tsr_impl::iq4nl_values));
    const matvec_prefetcher<T, 2 * sizeof(block)> prefetch;
    __m256 acc[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < ng * 4; b += 2) {
        const yside_q4 & s = ys[b / 4];
        const int h = (int)(b & 2);  /* which pair of the group */
        const __m256i ylo = _mm256_loadu_si256((const __m256i *)(s.lo + 16 * h));
        const __m256i yhi = _mm256_loadu_si256((const __m256i *)(s.hi + 16 * h));
        const __m256i aylo = _mm256_abs_epi8(ylo), ayhi = _mm256_abs_epi8(yhi);  /* IQ4_NL, for every row */
        const __m256i yb8 = _mm256_loadu_si256((const __m256i *)(s.bias + 4 * h));  /* -8 * sum in lane 4j */
        const __m256i yb = T == TSR_TYPE_Q5_0 ? _mm256_slli_epi32(yb8, 1) : T == TSR_TYPE_Q4_0 ? yb8 : _mm256_setzero_si256();
        const __m256 dy = _mm256_loadu_ps(s.d + 4 * h);
        /* the block sums (lane 4j), once per pair for every row's mins */
        const __m256 ysum = has_min ? _mm256_mul_ps(_mm256_cvtepi32_ps(yb8), _mm256_set1_ps(-0.125f)) : _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const block * xb = (const block *)(x + (size_t)r * lda) + b;
            prefetch((const char *)xb);
            const __m128i heads = pair_heads_avx2(xb, xb + 1);
            /* d (and m) times y.d in the heads' lanes of the two blocks: lanes 0-3 block 0 */
            const __m256 heads_dy = _mm256_mul_ps(_mm256_cvtph_ps(heads), dy);
            const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)xb[0].qs)),
                                                      _mm_loadu_si128((const __m128i *)xb[1].qs), 1);
            __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            __m256i p;
            if constexpr (T == TSR_TYPE_IQ4_NL) {
                p = _mm256_add_epi32(dot32_s8_absy_avx2(_mm256_shuffle_epi8(table, lo), ylo, aylo),
                                     dot32_s8_absy_avx2(_mm256_shuffle_epi8(table, hi), yhi, ayhi));
            } else {
                if constexpr (has_qh) {
                    const __m256i heads2 = _mm256_broadcastsi128_si256(heads);
                    lo = _mm256_or_si256(lo, fifth_bits_pair_avx2(heads2, qh_at, 0));
                    hi = _mm256_or_si256(hi, fifth_bits_pair_avx2(heads2, qh_at, 1));
                }
                p = _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_maddubs_epi16(hi, yhi)), ones), yb);
            }
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), pair_scales_avx2(heads_dy, 0), acc[r]);
            if constexpr (has_min) acc[r] = _mm256_fmadd_ps(pair_scales_avx2(heads_dy, m_at), ysum, acc[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        out[r] = hsum256(acc[r]);
        if (ng * 4 >= nb) continue;
        float tail;
        q32_blocks_avx2<T, 1>(n - ng * 128, x + (size_t)r * lda + (size_t)ng * 4 * sizeof(block), 0, y + ng * 4, &tail);
        out[r] += tail;
    }
}
static_assert(offsetof(tsr_block_q4_1, m) == 2 && offsetof(tsr_block_q5_1, m) == 2 && offsetof(tsr_block_q5_0, qh) == 2 &&
              offsetof(tsr_block_q5_1, qh) == 4, "the pair heads' layout");

/* Q4_0's slot entries (dot4 / dot1, y untyped): the pair kernel. */
template <int R>
TSR_TARGET_AVX2 static void dot_rows_q4_0_avx2(int64_t n, const char * x, size_t lda, const void * y, float * out) {
    q32_pairs_avx2<TSR_TYPE_Q4_0, R>(n, x, lda, (const yq8 *)y, out);
}

template <tsr_type T, int R>
TSR_TARGET_AVX2 void matvec_avx2::q32(int64_t n, const char * x, size_t lda, const yq8 * y, float * out) {
    q32_pairs_avx2<T, R>(n, x, lda, y, out);
}

/* dot4 / dot1 of the plain-float types and Q8_0 / Q4_0 (the AVX-512 table starts from them) */
static constexpr void fill_dot_rows_avx2(kernels & k) {
    k.dot4[SLOT_F32] = dot_rows_avx2<0, 4>;
    k.dot4[SLOT_F16] = dot_rows_avx2<1, 4>;
    k.dot4[SLOT_BF16] = dot_rows_avx2<2, 4>;
    k.dot4[SLOT_Q8_0] = dot_rows_q8_0_avx2<4>;
    k.dot4[SLOT_Q4_0] = dot_rows_q4_0_avx2<4>;
    k.dot1[SLOT_F32] = dot_rows_avx2<0, 1>;
    k.dot1[SLOT_F16] = dot_rows_avx2<1, 1>;
    k.dot1[SLOT_BF16] = dot_rows_avx2<2, 1>;
    k.dot1[SLOT_Q8_0] = dot_rows_q8_0_avx2<1>;
    k.dot1[SLOT_Q4_0] = dot_rows_q4_0_avx2<1>;
}

static constexpr kernels kernels_avx2 = [] {
    kernels k{};
    k.isa = TSR_CPU_ISA_AVX2;
    k.dot_f32 = dot_f32_avx2;
    k.dot_f16 = dot_f16_avx2;
    k.dot_bf16 = dot_bf16_avx2;
    k.dot_q8_0 = dot_q8_0_avx2;
    k.dot_q4_0 = dot_q4_0_avx2;
    fill_dot_rows_avx2(k);
    row_quant_dots<matvec_avx2>::fill(k);
    k.quantize_q8k = quantize_q8k_avx2;
    k.quantize_y = quantize_y_avx2;
    k.axpy_f32 = axpy_f32_avx2;
    k.f16_to_f32 = cvt_f16_f32_avx2;
    k.f32_to_f16 = cvt_f32_f16_avx2;
    k.gemm[SLOT_F32] = &gemm_f32_avx2;
    k.gemm[SLOT_F16] = &gemm_f16_avx2;
    k.gemm[SLOT_BF16] = &gemm_bf16_avx2;
    k.gemm[SLOT_Q8_0] = &gemm_q8_0_avx2;
    k.gemm[SLOT_Q4_0] = &gemm_q4_0_avx2;
    packed_gemms<gemm_q8_0_avx2, gemm_min_avx2, gemm_halves_avx2, x86_packers<8, 0>::of>::fill(k);
    k.act = &act_table_avx2;
    return k;
}();

/* The AVX2 path's table for this CPU: with AVX-VNNI, its int8 GEMMs on vpdpbusd. f: the CPU's
 * features (tests pass fewer, to reach the kernels a CPU without them runs). */
static kernels make_kernels_avx2(const cpu_features & f = features()) {
    kernels k = kernels_avx2;
    if (f.avx_vnni) {
        k.gemm[SLOT_Q8_0] = &gemm_q8_0_avx2vnni;
        k.gemm[SLOT_Q4_0] = &gemm_q4_0_avx2vnni;
        packed_gemms<gemm_q8_0_avx2vnni, gemm_min_avx2vnni, gemm_halves_avx2vnni, x86_packers<8, 0>::of>::fill(k);
    }
    return k;
}

} // namespace tcpu
} // namespace
TSR_SIMD_WARNINGS_ON
#endif /* TSR_CPU_HAVE_X86_KERNELS */
