/*
 * repack_k2w.inl - Q2_K's CPU_REPACK layout on CPUs with AVX-512 VNNI ("words"): the file's
 * rows and super-blocks stay where they are (the scales, d and dmin untouched); only each
 * super-block's 64 level bytes are reordered, so that 32-bit word s holds the 16 levels of
 * sub-block s: byte 4s + b, bits 2j..2j+1, is the level of weight 16s + 4j + b.
 *
 * Why: a vpdpbusd of the levels masked at bit pair j against activations in the same order
 * adds 4 products of one sub-block to word s, so four of them (j = 0..3) leave each word
 * with its whole sub-block's sum, and one vpmaddwd applies the 16 scales as the file stores
 * them. The file's order (a byte holds one weight of 4 different sub-blocks) needs a pack, a
 * word permute and a vpdpwssd per 64 weights for that (k2_rows_avx512). The mat-vec reads
 * the rows as the file kernels do (4 sequential streams a core, rows a quarter of the range
 * apart), which reads DRAM better than the 8-row records on the machines measured (the
 * records' DRAM deficit, repack_r8.inl's policy comment).
 *
 * The activations: Q8_K rows whose qs are reordered the same way once per mat-vec
 * (q8k_qs_to_words: word 16j + s of qs = word 4s + j of the quantizer's), their d and bsums
 * as quantized. The GEMM (prompts) packs its panels from file blocks converted back per
 * panel; get_rows and tsr_backend_tensor_get convert back too.
 */
namespace {
namespace tcpu {

static_assert(sizeof(tsr_block_q2_K) == 84 && offsetof(tsr_block_q2_K, qs) == 16, "Q2_K super-blocks are {16 scale bytes, 64 qs, d, dmin}");

/* Q2_K's CPU_REPACK layout is the word layout on this CPU (else the records of repack_r8.inl
 * or the file's). A CPU property, not the selected ISA's: a tensor keeps its layout when
 * tsr_backend_cpu_set_isa switches paths (other paths read it with q2kw_rows_scalar). */
static inline bool q2k_words_layout() {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    return features().avx512 && features().avx512_vnni;
#else
    return false;
#endif
}

/* The file's 64 level bytes of a super-block as the word layout's, and back. Sub-block s's
 * levels are bit pair p = s % 8 / 2 of the 16 file bytes from 32 (s / 8) + 16 (s % 2), so
 * two 8-byte lanes shifted and masked give its 16 levels, one a byte, and the word is them
 * OR-ed at bit pairs 0..3 (the lanes' bytes hold 0..3: no carries). */
static void q2k_qs_to_words(const uint8_t * qs, uint8_t * w) {
    const uint64_t m = 0x0303030303030303ull;
    for (int s = 0; s < 16; ++s) {
        uint64_t lo, hi;
        std::memcpy(&lo, qs + 32 * (s / 8) + 16 * (s % 2), 8);
        std::memcpy(&hi, qs + 32 * (s / 8) + 16 * (s % 2) + 8, 8);
        const int p = 2 * (s % 8 / 2);
        lo = lo >> p & m;  /* bytes 0-3: levels 0..3 (j = 0), 4-7: levels 4..7 (j = 1) */
        hi = hi >> p & m;  /* levels 8..15 (j = 2, 3) */
        const uint32_t word = (uint32_t)lo | (uint32_t)(lo >> 32) << 2 | (uint32_t)hi << 4 | (uint32_t)(hi >> 32) << 6;
        std::memcpy(w + 4 * s, &word, 4);
    }
}

static void q2k_qs_from_words(const uint8_t * w, uint8_t * qs) {
    const uint64_t m = 0x03030303ull;
    for (int run = 0; run < 4; ++run) {  /* file bytes 16 run..: sub-blocks 8 (run / 2) + 2p + run % 2 at bit pair p */
        uint64_t lo = 0, hi = 0;
        for (int p = 0; p < 4; ++p) {
            uint32_t word;
            std::memcpy(&word, w + 4 * (8 * (run / 2) + 2 * p + run % 2), 4);
            lo |= ((word & m) | (uint64_t)(word >> 2 & m) << 32) << (2 * p);
            hi |= ((word >> 4 & m) | (uint64_t)(word >> 6 & m) << 32) << (2 * p);
        }
        std::memcpy(qs + 16 * run, &lo, 8);
        std::memcpy(qs + 16 * run + 8, &hi, 8);
    }
}

/* n super-blocks at p rewritten in place: to the word layout, or back to the file's. */
static void q2k_blocks_in_place(uint8_t * p, int64_t n, bool to_words) {
    for (int64_t i = 0; i < n; ++i) {
        uint8_t * qs = p + (size_t)i * sizeof(tsr_block_q2_K) + offsetof(tsr_block_q2_K, qs);
        uint8_t tmp[64];
        std::memcpy(tmp, qs, 64);
        if (to_words) q2k_qs_to_words(tmp, qs);
        else q2k_qs_from_words(tmp, qs);
    }
}

/* The activations' qs in the word order (word 16j + s = word 4s + j), nb blocks in place. */
static void q8k_qs_to_words(tsr_block_q8_K * y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        uint32_t in[64], out[64];
        std::memcpy(in, y[i].qs, sizeof(in));
        for (int j = 0; j < 4; ++j)
            for (int s = 0; s < 16; ++s) out[16 * j + s] = in[4 * s + j];
        std::memcpy(y[i].qs, out, sizeof(out));
    }
}

/* One row in the word layout against word-ordered Q8_K: the reference the SIMD kernel
 * matches (the same int32 sums, scaled as the file kernels scale theirs). */
static float q2kw_dot_scalar(int64_t n, const uint8_t * x, const tsr_block_q8_K * y) {
    float sum = 0;
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        const tsr_block_q2_K & b = *(const tsr_block_q2_K *)(const void *)(x + (size_t)i * sizeof(tsr_block_q2_K));
        int32_t sumi = 0, summ = 0;
        for (int s = 0; s < 16; ++s) {
            int32_t dot = 0;
            for (int j = 0; j < 4; ++j)
                for (int k = 0; k < 4; ++k) dot += (b.qs[4 * s + k] >> (2 * j) & 3) * y[i].qs[4 * (16 * j + s) + k];
            sumi += (b.scales[s] & 15) * dot;
            summ += (b.scales[s] >> 4) * y[i].bsums[s];
        }
        sum += h2f(b.d) * y[i].d * (float)sumi - h2f(b.dmin) * y[i].d * (float)summ;
    }
    return sum;
}

/* R rows lda apart against word-ordered Q8_K (y): the shape of mul_mat's dot4 kernels. */
typedef void (*q2kw_rows_fn)(int64_t n, const char * x, size_t lda, const void * y, float * out);

template <int R>
static void q2kw_rows_scalar(int64_t n, const char * x, size_t lda, const void * y, float * out) {
    for (int r = 0; r < R; ++r) out[r] = q2kw_dot_scalar(n, (const uint8_t *)x + (size_t)r * lda, (const tsr_block_q8_K *)y);
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
TSR_SIMD_WARNINGS_OFF
/* R <= 4 rows (lda apart). Per row and super-block: the 64 level bytes as one zmm, masks
 * 0x03 / 0x0C of them and of them shifted by 4 are bit pairs 0, 1 (times 4), 2, 3 (times 4);
 * pairs 0 and 2 summed first and shifted by 2 to match, every word ends as 4 x its
 * sub-block's sum (at most 4 * 16 * 3 * 128: an int16). Two rows' words pack to int16 and
 * one vpmaddwd applies their scales (row a's in words 0-3 of each 128-bit lane, b's in 4-7:
 * sub-blocks 4L..4L + 3 of lane L), the mins meet the activations' 16-element sums the same
 * way; the rows' scale bytes come in as lanes (lanes_of_rows) and one dword transpose puts
 * sub-blocks 4L..4L + 3 of the 4 rows in lane L. Row a's sums sit in dwords 0-1 of every
 * lane, b's in 2-3, scaled there by d / 4 and dmin (converted together for the 4 rows).
 * Integer sums are exact and a row's lanes never meet another's: a row's result is the same
 * for every R. */
template <int R>
TSR_TARGET_AVX512VNNI static void q2kw_rows_avx512(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const tsr_block_q8_K * yrow = (const tsr_block_q8_K *)yv;
    const __m512i m3 = _mm512_set1_epi8(3), m12 = _mm512_set1_epi8(12), m15 = _mm512_set1_epi8(15), z = _mm512_setzero_si512();
    const __m512i transpose = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i bsum_lanes = _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3);  /* lane L: words 4L..4L + 3, twice */
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};  /* rows 0-1, 2-3 */
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        const tsr_block_q8_K & y = yrow[i];
        const uint8_t * blk = (const uint8_t *)x + (size_t)i * sizeof(tsr_block_q2_K);
        const __m512i y0 = _mm512_loadu_si512((const void *)y.qs), y1 = _mm512_loadu_si512((const void *)(y.qs + 64));
        const __m512i y2 = _mm512_loadu_si512((const void *)(y.qs + 128)), y3 = _mm512_loadu_si512((const void *)(y.qs + 192));
        __m512i sums[4];
        TSR_UNROLL(4)
        for (int r = 0; r < R; ++r) {
            const uint8_t * row = blk + (size_t)r * lda;
            /* as k2_rows_avx512: without, one core's Q2_K read stayed below its share of DRAM */
            _mm_prefetch((const char *)row + k2_prefetch_ahead, _MM_HINT_T0);
            _mm_prefetch((const char *)row + k2_prefetch_ahead + 64, _MM_HINT_T0);
            const __m512i q = _mm512_loadu_si512((const void *)(row + offsetof(tsr_block_q2_K, qs))), q4 = _mm512_srli_epi16(q, 4);
            __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(q, m3), y0);
            s = _mm512_slli_epi32(_mm512_dpbusd_epi32(s, _mm512_and_si512(q4, m3), y2), 2);
            s = _mm512_dpbusd_epi32(s, _mm512_and_si512(q, m12), y1);
            sums[r] = _mm512_dpbusd_epi32(s, _mm512_and_si512(q4, m12), y3);
        }
        TSR_UNROLL(4)
        for (int r = R; r < 4; ++r) sums[r] = sums[0];
        const __m512i h = _mm512_permutexvar_epi32(transpose, lanes_of_rows<R>(blk, lda));
        const __m512i sc = _mm512_and_si512(h, m15), mn = _mm512_and_si512(_mm512_srli_epi16(h, 4), m15);
        const __m512i bs = _mm512_permutexvar_epi64(bsum_lanes, _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y.bsums)));
        const __m512i si[2] = {_mm512_madd_epi16(_mm512_packs_epi32(sums[0], sums[1]), _mm512_unpacklo_epi8(sc, z)),
                               _mm512_madd_epi16(_mm512_packs_epi32(sums[2], sums[3]), _mm512_unpackhi_epi8(sc, z))};
        const __m512i sm[2] = {_mm512_madd_epi16(_mm512_unpacklo_epi8(mn, z), bs), _mm512_madd_epi16(_mm512_unpackhi_epi8(mn, z), bs)};
        /* d y.d / 4 (the sums are times 4) and dmin y.d of rows 0..3: floats 2r, 2r + 1 */
        const __m512 dm = _mm512_castps256_ps512(_mm256_mul_ps(fp16_pairs_of_rows<R>(blk + offsetof(tsr_block_q2_K, d), lda),
                                                               _mm256_mul_ps(_mm256_set1_ps(y.d), _mm256_setr_ps(0.25f, 1, 0.25f, 1, 0.25f, 1, 0.25f, 1))));
        TSR_UNROLL(2)
        for (int p = 0; p < 2; ++p) {
            const int a = 4 * p, b = 4 * p + 2;  /* d of rows 2p and 2p + 1; dmin one float after */
            const __m512 d = _mm512_permutexvar_ps(_mm512_setr_epi32(a, a, b, b, a, a, b, b, a, a, b, b, a, a, b, b), dm);
            const __m512 dmin = _mm512_permutexvar_ps(_mm512_setr_epi32(a + 1, a + 1, b + 1, b + 1, a + 1, a + 1, b + 1, b + 1, a + 1, a + 1, b + 1, b + 1,
                                                                        a + 1, a + 1, b + 1, b + 1),
                                                      dm);
            acc[p] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(sm[p]), dmin, _mm512_fmadd_ps(_mm512_cvtepi32_ps(si[p]), d, acc[p]));
        }
    }
    TSR_UNROLL(4)
    for (int r = 0; r < R; ++r) {
        /* row r: dwords 2 (r % 2) and 2 (r % 2) + 1 of every lane of acc[r / 2] */
        const int c = 2 * (r % 2);
        const __m512 mine = _mm512_permutexvar_ps(_mm512_setr_epi32(c, c + 1, c + 4, c + 5, c + 8, c + 9, c + 12, c + 13, 0, 0, 0, 0, 0, 0, 0, 0), acc[r / 2]);
        out[r] = hsum256(_mm512_castps512_ps256(mine));
    }
}
TSR_SIMD_WARNINGS_ON
#endif

/* The 4-row and 1-row kernels of the selected ISA path for the word layout. */
struct q2kw_kernels {
    q2kw_rows_fn four, one;
};

static q2kw_kernels q2kw_kernels_for_isa() {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    if (isa_vector() == TSR_CPU_ISA_AVX512 && features().avx512_vnni) return {q2kw_rows_avx512<4>, q2kw_rows_avx512<1>};
#endif
    return {q2kw_rows_scalar<4>, q2kw_rows_scalar<1>};
}

} // namespace tcpu
} // namespace
