/*
 * repack_words.inl - the CPU_REPACK layouts of Q2_K and Q3_K on CPUs with AVX-512 VNNI
 * ("words"; Q3_K's also needs GFNI and VBMI): the file's rows and super-blocks stay where
 * they are; only the bits inside each super-block move, so that 32-bit word s of its level
 * bytes holds the two low bits of the 16 levels of sub-block s: byte 4s + b, bits 2j..2j+1,
 * is the level of weight 16s + 4j + b. Q2_K's scales, d and dmin stay as the file has them;
 * Q3_K's third bits and scales move too (below), its d stays.
 *
 * Why: a vpdpbusd of the levels masked at bit pair j against activations in the same order
 * adds 4 products of one sub-block to word s, so four of them (j = 0..3) leave each word
 * with its whole sub-block's sum, and one vpmaddwd applies the 16 scales. The file's order
 * (a byte holds one weight of 4 different sub-blocks) needs a pack, a word permute and a
 * vpdpwssd per 64 weights for that (k2_rows_avx512). The mat-vec reads the rows as the file
 * kernels do (4 sequential streams a core, rows a quarter of the range apart), which reads
 * DRAM better than the 8-row records on the machines measured (the records' DRAM deficit,
 * repack_r8.inl's policy comment).
 *
 * The activations: Q8_K rows whose qs are reordered the same way once per mat-vec
 * (q8k_qs_to_words: word 16j + s of qs = word 4s + j of the quantizer's), their d and bsums
 * as quantized. The GEMM (prompts) packs its panels from file blocks converted back per
 * panel; get_rows and tsr_backend_tensor_get convert back too.
 */
namespace {
namespace tcpu {

static_assert(sizeof(tsr_block_q2_K) == 84 && offsetof(tsr_block_q2_K, qs) == 16, "Q2_K super-blocks are {16 scale bytes, 64 qs, d, dmin}");

/* Whether a t set into a CPU_REPACK buffer now takes its word layout (else the records of
 * repack_r8.inl or the file's): the AVX-512 path in use (TSR_CPU_ISA / tsr_cpu_set_isa) on a
 * CPU with the kernels' extensions (Q3_K's moves its third bits with GFNI and reads its
 * scales with VBMI). With the AVX2 path forced on such a CPU, the words' only other kernel
 * is the scalar reference (2 threads from DRAM: Q2_K's mat-vec 2.4 GB/s, Q3_K's 1.1, where
 * the AVX2 path's file kernels read 28 and 25): those tensors take the AVX2 path's layouts.
 * A tensor keeps the layout it was set in (r8_record::words) when the path switches later;
 * other paths read words with the scalar kernels. */
static inline bool words_layout_for_type(enum tsr_type t) {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    const cpu_features & f = features();
    const bool zmm = isa_vector() == TSR_CPU_ISA_AVX512 && f.avx512_vnni;
    if (t == TSR_TYPE_Q2_K) return zmm;
    if (t == TSR_TYPE_Q3_K) return zmm && f.avx512_gfni && f.avx512_vbmi;
#endif
    (void)t;
    return false;
}

/* ---- Q2_K ------------------------------------------------------------------------------ */

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
typedef void (*words_rows_fn)(int64_t n, const char * x, size_t lda, const void * y, float * out);

/* R rows of a word layout by its scalar reference DOT (the kernels' shape, for the other ISA paths). */
template <int R, float (*DOT)(int64_t, const uint8_t *, const tsr_block_q8_K *)>
static void words_rows_scalar(int64_t n, const char * x, size_t lda, const void * y, float * out) {
    for (int r = 0; r < R; ++r) out[r] = DOT(n, (const uint8_t *)x + (size_t)r * lda, (const tsr_block_q8_K *)y);
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
TSR_SIMD_WARNINGS_OFF
/* Row r's sum from the word kernels' accumulators: dwords 2 (r % 2) and 2 (r % 2) + 1 of
 * every lane of acc[r / 2] (row pairs packed together, as vpmaddwd leaves them). */
TSR_TARGET_AVX512VNNI static inline float words_row_sum(const __m512 acc[2], int r) {
    const int c = 2 * (r % 2);
    return hsum256(_mm512_castps512_ps256(
        _mm512_permutexvar_ps(_mm512_setr_epi32(c, c + 1, c + 4, c + 5, c + 8, c + 9, c + 12, c + 13, 0, 0, 0, 0, 0, 0, 0, 0), acc[r / 2])));
}

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
    const size_t ahead = g_matvec_pf_ahead.file[TSR_TYPE_Q2_K];  /* the words stream as the file layout: its distance */
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
            prefetch_l2(row + ahead);
            prefetch_l2(row + ahead + 64);
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
    for (int r = 0; r < R; ++r) out[r] = words_row_sum(acc, r);
}
TSR_SIMD_WARNINGS_ON
#endif

/* ---- Q3_K ------------------------------------------------------------------------------ */

/* Q3_K's word layout: the 64 qs bytes (the levels' two low bits) as Q2_K's; the 32 hmask
 * bytes (third bits) so that byte p, bit j, is the third bit of the level at qs byte p, bit
 * pair j, and bit 4 + j that of qs byte p + 32 (weights 16s + 4j + b and 128 + 16s + 4j + b,
 * p = 4s + b): one 32-byte load broadcast to both halves of a zmm, and GFNI moves bit j (low
 * half) or 4 + j (high half) of every byte above the pair's two bits in one instruction. The
 * 12 scale bytes: the 16 scales as 6-bit two's complement (the format's scale minus 32), scale
 * s at bit 6s (little-endian), so that scales 0-7 fill bits 16..63 of the first qword of the
 * 16 bytes from block byte 94 and 8-15 bits 0..47 of the second, and one vpmultishiftqb
 * takes each into a byte. d stays at byte 108. */
static_assert(sizeof(tsr_block_q3_K) == 110 && offsetof(tsr_block_q3_K, qs) == 32 && offsetof(tsr_block_q3_K, scales) == 96 &&
                  offsetof(tsr_block_q3_K, d) == 108,
              "Q3_K super-blocks are {32 hmask, 64 qs, 12 scale bytes, d}");

/* The file's hmask (third bit of weight e: bit e / 32 of byte e % 32) as the word layout's,
 * and back. Byte 4s + b (s < 8) gathers bits s / 2 and 4 + s / 2 of file bytes
 * 16 (s % 2) + 4j + b, j = 0..3: layout words 2k and 2k + 1 (8 bytes) are 4 shifted masks of
 * the file's 32-bit words j (bytes 4j.. and 16 + 4j.., side by side in 64 bits), and back the
 * same way (the GEMM converts every block back per panel). */
static void q3k_hmask_to_words(const uint8_t * hm, uint8_t * w) {
    uint64_t file[4];
    for (int j = 0; j < 4; ++j) {
        uint32_t a, b;
        std::memcpy(&a, hm + 4 * j, 4);
        std::memcpy(&b, hm + 16 + 4 * j, 4);
        file[j] = a | (uint64_t)b << 32;
    }
    for (int k = 0; k < 4; ++k) {
        uint64_t words = 0;
        for (int j = 0; j < 4; ++j) words |= (file[j] >> k & 0x1111111111111111ull) << j;
        std::memcpy(w + 8 * k, &words, 8);
    }
}

static void q3k_hmask_from_words(const uint8_t * w, uint8_t * hm) {
    uint64_t words[4];
    std::memcpy(words, w, 32);
    for (int j = 0; j < 4; ++j) {
        uint64_t file = 0;
        for (int k = 0; k < 4; ++k) file |= (words[k] >> j & 0x1111111111111111ull) << k;
        const uint32_t a = (uint32_t)file, b = (uint32_t)(file >> 32);
        std::memcpy(hm + 4 * j, &a, 4);
        std::memcpy(hm + 16 + 4 * j, &b, 4);
    }
}

/* Scale s (-32..31) of a super-block in the word layout (scales: its 12 bytes, d after them:
 * an 8-byte load, where a 6-byte copy into a zeroed word made the load wait for two stores). */
static inline int q3kw_scale(const uint8_t * scales, int s) {
    uint64_t half;
    std::memcpy(&half, scales + 6 * (s / 8), 8);
    const int v = (int)(half >> (6 * (s % 8)) & 63);
    return v >= 32 ? v - 64 : v;
}

/* The file's 12 scale bytes as 16 bytes u[h] (byte m: scale 8h + m plus 32, the file's
 * unsigned 6 bits: low 4 in the nibbles of bytes 0..7, high 2 at bits 2 (s / 4) of byte
 * 8 + s % 4), and back. The layout's field is that byte XOR 32, 8 fields to 48 bits: the
 * scalar conversions pack them by loops, the VBMI ones (below) by pext / pdep. */
static inline void q3k_scale_bytes_of_file(const uint8_t * file, uint64_t u[2]) {
    uint64_t nib;
    uint32_t top;
    std::memcpy(&nib, file, 8);
    std::memcpy(&top, file + 8, 4);
    const uint64_t m2 = 0x03030303ull, m4 = 0x0F0F0F0F0F0F0F0Full;
    u[0] = (nib & m4) | ((top & m2) | (uint64_t)(top >> 2 & m2) << 32) << 4;
    u[1] = (nib >> 4 & m4) | ((top >> 4 & m2) | (uint64_t)(top >> 6 & m2) << 32) << 4;
}

static inline void q3k_file_of_scale_bytes(const uint64_t u[2], uint8_t * file) {
    const uint64_t m4 = 0x0F0F0F0F0F0F0F0Full, m2 = 0x0303030303030303ull;
    const uint64_t nib = (u[0] & m4) | (u[1] & m4) << 4;
    const uint64_t t0 = u[0] >> 4 & m2, t1 = u[1] >> 4 & m2;  /* high 2 bits of scales 0..7, 8..15 */
    const uint32_t top = (uint32_t)t0 | (uint32_t)(t0 >> 32) << 2 | (uint32_t)t1 << 4 | (uint32_t)(t1 >> 32) << 6;
    std::memcpy(file, &nib, 8);
    std::memcpy(file + 8, &top, 4);
}

static void q3k_scales_to_words(const uint8_t * file, uint8_t * w) {
    uint64_t u[2];
    q3k_scale_bytes_of_file(file, u);
    for (int h = 0; h < 2; ++h) {
        const uint64_t v = u[h] ^ 0x2020202020202020ull;
        uint64_t fields = 0;
        for (int m = 0; m < 8; ++m) fields |= (v >> (8 * m) & 63) << (6 * m);
        std::memcpy(w + 6 * h, &fields, 6);
    }
}

static void q3k_scales_from_words(const uint8_t * w, uint8_t * file) {
    uint64_t u[2];
    for (int h = 0; h < 2; ++h) {
        uint64_t fields;
        std::memcpy(&fields, w + 6 * h, 8);  /* 8-byte loads: the second ends at d's last byte */
        uint64_t v = 0;
        for (int m = 0; m < 8; ++m) v |= (fields >> (6 * m) & 63) << (8 * m);
        u[h] = v ^ 0x2020202020202020ull;
    }
    q3k_file_of_scale_bytes(u, file);
}

/* One super-block from the word layout (w) to the file's (f, another place). */
static void q3k_block_from_words(const uint8_t * w, uint8_t * f) {
    q3k_hmask_from_words(w, f);
    q2k_qs_from_words(w + 32, f + 32);
    q3k_scales_from_words(w + 96, f + 96);
    std::memcpy(f + 108, w + 108, 2);
}

/* n super-blocks at p rewritten in place: to the word layout, or back to the file's. */
static void q3k_blocks_in_place(uint8_t * p, int64_t n, bool to_words) {
    for (int64_t i = 0; i < n; ++i) {
        uint8_t * b = p + (size_t)i * sizeof(tsr_block_q3_K);
        uint8_t tmp[sizeof(tsr_block_q3_K)];
        std::memcpy(tmp, b, sizeof(tmp));
        if (to_words) {
            q3k_hmask_to_words(tmp, b);
            q2k_qs_to_words(tmp + 32, b + 32);
            q3k_scales_to_words(tmp + 96, b + 96);
        } else {
            q3k_block_from_words(tmp, b);
        }
    }
}

/* One row in the word layout against word-ordered Q8_K: the reference the SIMD kernel
 * matches (the same int32 sums, scaled as the file kernels scale theirs). */
static float q3kw_dot_scalar(int64_t n, const uint8_t * x, const tsr_block_q8_K * y) {
    float sum = 0;
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        const uint8_t * b = x + (size_t)i * sizeof(tsr_block_q3_K);
        int32_t sumi = 0;
        for (int s = 0; s < 16; ++s) {
            int32_t dot = 0;
            for (int j = 0; j < 4; ++j)
                for (int k = 0; k < 4; ++k) {
                    const int p = 4 * s + k;
                    const int third = p < 32 ? b[p] >> j & 1 : b[p - 32] >> (4 + j) & 1;
                    dot += ((b[32 + p] >> (2 * j) & 3) + 4 * third - 4) * y[i].qs[4 * (16 * j + s) + k];
                }
            sumi += q3kw_scale(b + 96, s) * dot;
        }
        tsr_fp16_t d;
        std::memcpy(&d, b + offsetof(tsr_block_q3_K, d), 2);
        sum += h2f(d) * y[i].d * (float)sumi;
    }
    return sum;
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
TSR_SIMD_WARNINGS_OFF
/* R <= 4 rows (lda apart), as q2kw_rows_avx512 with the third bits: per row and super-block
 * one load of the qs bytes, one broadcast load of the hmask bytes, and per bit pair j one
 * GFNI move of the third bits above the pair (bit 2, or 4 where the mask 0x0C keeps the odd
 * pairs' levels times 4) and one ternary logic op that merges them, so the levels enter
 * vpdpbusd unsigned (0..7, the format's plus 4; the 4 comes off through the activations'
 * 16-element sums). The even pairs' and the odd pairs' dots stay apart:
 * each sums to at most 8 * 7 * 127, and 8 * 28 * 127 times 4, both int16, where one sum of all
 * four (times 4) would not be. Per row pair, two vpackssdw and two vpmaddwd against the
 * scales times 4 and times 1. The scales: one vpmultishiftqb per 4 rows puts each (times 4:
 * the field starts 2 bits early, those 2 bits masked off) in a byte, row r's in lane r, and
 * one dword transpose puts sub-blocks 4L..4L + 3 of the 4 rows in lane L. Row a's sums sit in
 * dwords 0-1 of every lane, b's in 2-3, scaled by d y.d / 4. Integer sums are exact and a
 * row's lanes never meet another's: a row's result is the same for every R. */
template <int R>
TSR_TARGET_AVX512VNNI_GFNI_VBMI static void q3kw_rows_avx512(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const tsr_block_q8_K * yrow = (const tsr_block_q8_K *)yv;
    const __m512i m3 = _mm512_set1_epi8(3), m12 = _mm512_set1_epi8(12), z = _mm512_setzero_si512();
    const __m512i transpose = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    /* bit offsets of scale s times 4 in the 16 bytes from block byte 94: 16 + 6s - 2 in the first
     * qword (s < 8), 6 (s - 8) - 2 in the second (s = 8: 62, wrapping to bits 0..5 as 2..7) */
    const __m512i scale_at = _mm512_broadcast_i32x4(_mm_setr_epi8(14, 20, 26, 32, 38, 44, 50, 56, 62, 4, 10, 16, 22, 28, 34, 40));
    const __m512i d_words = _mm512_setr_epi32(7 | 15 << 16, 23 | 31 << 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};  /* rows 0-1, 2-3 */
    const size_t ahead = g_matvec_pf_ahead.file[TSR_TYPE_Q3_K];  /* the words stream as the file layout: its distance */
    __m512 off = _mm512_setzero_ps();  /* row r in lanes 4r..4r+3: sum(scale x 4 * bsums) x d y.d / 4 */
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        const tsr_block_q8_K & y = yrow[i];
        const uint8_t * blk = (const uint8_t *)x + (size_t)i * sizeof(tsr_block_q3_K);
        const __m512i y0 = _mm512_loadu_si512((const void *)y.qs), y1 = _mm512_loadu_si512((const void *)(y.qs + 64));
        const __m512i y2 = _mm512_loadu_si512((const void *)(y.qs + 128)), y3 = _mm512_loadu_si512((const void *)(y.qs + 192));
        __m512i even[4], odd[4];
        TSR_UNROLL(4)
        for (int r = 0; r < R; ++r) {
            const uint8_t * row = blk + (size_t)r * lda;
            prefetch_l2(row + ahead);
            prefetch_l2(row + ahead + 64);
            const __m512i q = _mm512_loadu_si512((const void *)(row + 32)), q4 = _mm512_srli_epi16(q, 4);
            const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)row));
            /* c ? a : b: the pair's two bits from q, the third bit above them */
            const __m512i l0 = _mm512_ternarylogic_epi32(q, gf_move_bits(hm, 0, 4, 2, 1), m3, 0xE4);
            const __m512i l1 = _mm512_ternarylogic_epi32(q, gf_move_bits(hm, 1, 5, 4, 1), m12, 0xE4);
            const __m512i l2 = _mm512_ternarylogic_epi32(q4, gf_move_bits(hm, 2, 6, 2, 1), m3, 0xE4);
            const __m512i l3 = _mm512_ternarylogic_epi32(q4, gf_move_bits(hm, 3, 7, 4, 1), m12, 0xE4);
            even[r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, l0, y0), l2, y2);
            odd[r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, l1, y1), l3, y3);
        }
        TSR_UNROLL(4)
        for (int r = R; r < 4; ++r) even[r] = even[0], odd[r] = odd[0];
        const __m512i h = lanes_of_rows<R>(blk + 94, lda);  /* 2 qs bytes, the 12 scale bytes, d */
        const __m512i sc4 = _mm512_and_si512(_mm512_multishift_epi64_epi8(scale_at, h), _mm512_set1_epi8((char)0xFC));
        const __m512 d = _mm512_castps128_ps512(_mm_mul_ps(_mm_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi16(d_words, h))), _mm_set1_ps(y.d * 0.25f)));
        off = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot16_bsums_zmm(sc4, y)),
                              _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), d), off);
        const __m512i st = _mm512_permutexvar_epi32(transpose, sc4);
        const __m512i lo = _mm512_unpacklo_epi8(z, st), hi = _mm512_unpackhi_epi8(z, st);  /* rows 0-1, 2-3: scale x 4 x 256 */
        TSR_UNROLL(2)
        for (int p = 0; p < (R + 1) / 2; ++p) {
            const __m512i sc = p ? hi : lo;
            const __m512i si = _mm512_add_epi32(_mm512_madd_epi16(_mm512_packs_epi32(even[2 * p], even[2 * p + 1]), _mm512_srai_epi16(sc, 8)),
                                                _mm512_madd_epi16(_mm512_packs_epi32(odd[2 * p], odd[2 * p + 1]), _mm512_srai_epi16(sc, 10)));
            const __m512 dp = _mm512_permutexvar_ps(p ? _mm512_setr_epi32(2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3)
                                                      : _mm512_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1),
                                                    d);
            acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(si), dp, acc[p]);
        }
    }
    TSR_UNROLL(4)
    for (int r = 0; r < R; ++r) out[r] = words_row_sum(acc, r) - 4.0f * hsum128(_mm512_castps512_ps128(_mm512_permutexvar_ps(lane_of_zmm(r), off)));
}
TSR_SIMD_WARNINGS_ON
#endif

/* ---- both ------------------------------------------------------------------------------ */

/* The level bits between the layouts with VBMI (the GEMM converts every block it packs back,
 * so the scalar conversion cost Q3_K's prompts ~15 %; loading converts every block once): a
 * bit gather, in which field f (WIDTH bits) of output byte o comes from source byte
 * idx[f][o] at bit b, done per field by one vpermb (the source byte to position o) and one
 * vpmultishiftqb (8 bits from bit 8 (o % 8) + b - WIDTH f of its qword: the field lands at
 * bit WIDTH f), merged under its mask by one vpternlogd. The tables come from the layouts'
 * definitions: the qs bytes (64, 4 fields of 2 bits) and Q3_K's hmask bytes (32, 8 fields of
 * 1 bit), both ways. Q3_K's scales: BMI2's pdep / pext between 6-bit fields and bytes. */
#if defined(TSR_CPU_HAVE_X86_KERNELS)
struct bit_gather_table {
    alignas(64) uint8_t idx[8][64];
    alignas(64) uint8_t ctl[8][64];
};

template <int WIDTH>
static bit_gather_table make_bit_gather(int bytes, void (*source)(int o, int f, int * byte, int * bit)) {
    bit_gather_table t = {};
    for (int f = 0; f < 8 / WIDTH; ++f)
        for (int o = 0; o < bytes; ++o) {
            int byte = 0, bit = 0;
            source(o, f, &byte, &bit);
            t.idx[f][o] = (uint8_t)byte;
            t.ctl[f][o] = (uint8_t)((8 * (o % 8) + bit - WIDTH * f) & 63);
        }
    return t;
}

/* Where the file's qs byte o, bit pair f (weight 128 (o / 32) + 32f + o % 32) is in the word
 * layout, and where the layout's byte o, pair f (weight 16 (o / 4) + 4f + o % 4) is in the file. */
static void qs_in_words(int o, int f, int * byte, int * bit) {
    const int e = 128 * (o / 32) + 32 * f + o % 32;
    *byte = 4 * (e / 16) + e % 4;
    *bit = 2 * (e % 16 / 4);
}
static void qs_in_file(int o, int f, int * byte, int * bit) {
    const int e = 16 * (o / 4) + 4 * f + o % 4;
    *byte = 32 * (e / 128) + e % 32;
    *bit = 2 * (e % 128 / 32);
}

/* The same for Q3_K's hmask: the file's byte o, bit f (weight 32f + o), and the layout's byte
 * o, bit f (weight 16 (o / 4 + 8 (f / 4)) + 4 (f % 4) + o % 4). */
static void hmask_in_words(int o, int f, int * byte, int * bit) {
    const int e = 32 * f + o, s = e / 16;
    *byte = 4 * (s % 8) + e % 4;
    *bit = e % 16 / 4 + 4 * (s / 8);
}
static void hmask_in_file(int o, int f, int * byte, int * bit) {
    const int e = 16 * (o / 4 + 8 * (f / 4)) + 4 * (f % 4) + o % 4;
    *byte = e % 32;
    *bit = e / 32;
}

TSR_SIMD_WARNINGS_OFF
template <int WIDTH>
TSR_TARGET_AVX512VNNI_GFNI_VBMI static inline __m512i bit_gather_zmm(__m512i v, const bit_gather_table & t) {
    __m512i out = _mm512_setzero_si512();
    TSR_UNROLL(8)
    for (int f = 0; f < 8 / WIDTH; ++f) {
        const __m512i g = _mm512_multishift_epi64_epi8(_mm512_load_si512((const void *)t.ctl[f]),
                                                       _mm512_permutexvar_epi8(_mm512_load_si512((const void *)t.idx[f]), v));
        out = _mm512_ternarylogic_epi32(out, g, _mm512_set1_epi8((char)(((1 << WIDTH) - 1) << (WIDTH * f))), 0xF8);  /* a | (b & c) */
    }
    return out;
}

/* q3k_scales_to_words / q3k_scales_from_words with pext / pdep. */
TSR_TARGET_AVX512VNNI_GFNI_VBMI static inline void q3k_scales_to_words_bmi2(const uint8_t * file, uint8_t * w) {
    uint64_t u[2];
    q3k_scale_bytes_of_file(file, u);
    for (int h = 0; h < 2; ++h) {
        const uint64_t fields = _pext_u64(u[h] ^ 0x2020202020202020ull, 0x3F3F3F3F3F3F3F3Full);
        std::memcpy(w + 6 * h, &fields, 6);
    }
}

TSR_TARGET_AVX512VNNI_GFNI_VBMI static inline void q3k_scales_from_words_bmi2(const uint8_t * w, uint8_t * file) {
    /* 8-byte loads (the second ends at d's last byte): 6-byte copies into a zeroed word were
     * two stores and a load that waited for them (14.3 -> 5.4 ns a block) */
    uint64_t u[2];
    for (int h = 0; h < 2; ++h) {
        uint64_t fields;
        std::memcpy(&fields, w + 6 * h, 8);
        u[h] = _pdep_u64(fields, 0x3F3F3F3F3F3F3F3Full) ^ 0x2020202020202020ull;
    }
    q3k_file_of_scale_bytes(u, file);
}

/* n blocks of t from src to dst (src itself allowed), to the word layout or back. */
TSR_TARGET_AVX512VNNI_GFNI_VBMI static void words_blocks_convert_vbmi(enum tsr_type t, const uint8_t * src, uint8_t * dst, int64_t n, bool to_words) {
    static const bit_gather_table qs_back = make_bit_gather<2>(64, qs_in_words), hm_back = make_bit_gather<1>(32, hmask_in_words);
    static const bit_gather_table qs_to = make_bit_gather<2>(64, qs_in_file), hm_to = make_bit_gather<1>(32, hmask_in_file);
    const bit_gather_table & qs = to_words ? qs_to : qs_back;
    const bit_gather_table & hm = to_words ? hm_to : hm_back;
    const bool q3 = t == TSR_TYPE_Q3_K;
    const size_t bb = tsr_type_size(t), qs_at = q3 ? 32 : 16;
    for (int64_t i = 0; i < n; ++i) {
        const uint8_t * a = src + (size_t)i * bb;
        uint8_t * b = dst + (size_t)i * bb;
        _mm512_storeu_si512((void *)(b + qs_at), bit_gather_zmm<2>(_mm512_loadu_si512((const void *)(a + qs_at)), qs));
        if (q3) {
            const __m512i h = bit_gather_zmm<1>(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)), hm);
            _mm256_storeu_si256((__m256i *)b, _mm512_castsi512_si256(h));
            if (to_words) q3k_scales_to_words_bmi2(a + 96, b + 96);
            else q3k_scales_from_words_bmi2(a + 96, b + 96);
        }
        if (a != b) {  /* what stays where it is */
            if (q3) std::memcpy(b + 108, a + 108, 2);
            else std::memcpy(b, a, 16), std::memcpy(b + 80, a + 80, 4);
        }
    }
}
TSR_SIMD_WARNINGS_ON
#endif

#if defined(TSR_CPU_HAVE_X86_KERNELS)
/* The prompts' GEMM packs every block of A once per panel. From the word layout through the
 * file's bytes that took 35 ns a super-block and row (the file packer alone 26, the Q3_K
 * record's direct packer 10), and LLaMA 1.1B Q3_K prompts ran 15-20 % below the record's.
 * q3kw_pack_panel makes the file packer's panels (pack_panel_i8_avx2<R, Q3_K, FLIP, FLIP>:
 * levels -4..3 times minus their scale, scale -d; the same bytes, so the same GEMM results)
 * straight from the layout, 8 rows at a time: per 32-weight block, gathers of the 8 rows'
 * level words (8 bytes: two sub-blocks), third bits (8 bytes), scale fields (8 bytes) and d;
 * then per 2 chunks of 4 weights (a zmm: chunk c's 8 rows x 4 bytes, then chunk c + 1's), one
 * vpermb puts each row's source byte under each output byte and one vpmultishiftqb takes
 * the weight's bits from it (the third bit likewise, 2 bits early to land at bit 2). The
 * tables: output byte o of the zmm for chunks 2k, 2k + 1 is row r = o % 32 / 4's weight
 * i = 4c + o % 4 (c = 2k + o / 32), which sits in source byte 4 (c / 4) + o % 4 of the row's 8,
 * at bit pair c % 4 (its third bit: bit c % 4, 4 higher for blocks j >= 4). */
struct q3kw_panel_tables {
    alignas(64) uint8_t idx[4][64];
    alignas(64) uint8_t ctl_low[4][64];
    alignas(64) uint8_t ctl_third[4][64];
    alignas(64) int16_t scale_lanes[2][32];  /* int16 lane L of sub-block e: row (L % 16) / 2's scale, lane 4r + e of the decoded scales */
};

static q3kw_panel_tables make_q3kw_panel_tables() {
    q3kw_panel_tables t = {};
    for (int k = 0; k < 4; ++k)
        for (int o = 0; o < 64; ++o) {
            const int c = 2 * k + o / 32, r = o % 32 / 4;
            t.idx[k][o] = (uint8_t)(8 * r + 4 * (c / 4) + o % 4);
            t.ctl_low[k][o] = (uint8_t)(8 * (o % 8) + 2 * (c % 4));
            t.ctl_third[k][o] = (uint8_t)((8 * (o % 8) + c % 4 - 2) & 63);
        }
    for (int e = 0; e < 2; ++e)
        for (int l = 0; l < 32; ++l) t.scale_lanes[e][l] = (int16_t)(4 * (l % 16 / 2) + e);
    return t;
}

TSR_SIMD_WARNINGS_OFF
/* R rows from row0 of A (rows a multiple of 8; rows past `rows` and blocks past K padded as
 * the file packer pads them): the shape of the r8 direct packers (r8_pack_fn). */
template <int R, int FLIP>
TSR_TARGET_AVX512VNNI_GFNI_VBMI static void q3kw_pack_panel(const uint8_t * A, size_t lda, int64_t row0, int rows, int64_t K, int64_t k0, int kc,
                                                            void * dst) {
    static const q3kw_panel_tables T = make_q3kw_panel_tables();
    A += (size_t)row0 * lda;
    const int nb = kc / 32;
    const int64_t b0 = k0 / 32;
    const int nbv = (int)std::max<int64_t>(0, std::min<int64_t>(nb, K / 32 - b0));
    const __m512i row_at = _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64((long long)lda));
    const __m512i m3 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi8(4), low_bytes = _mm512_set1_epi16(0x00FF), flip = _mm512_set1_epi8((char)FLIP);
    for (int r0 = 0; r0 < R; r0 += 8) {
        for (int b = 0; b < nb; ++b) {
            uint8_t * q = (uint8_t *)dst + (size_t)b * R * 36;
            float * scale = (float *)(q + R * 32) + r0;
            if (r0 >= rows || b >= nbv) {
                for (int c = 0; c < 8; ++c) std::memset(q + ((size_t)c * R + r0) * 4, FLIP, 32);
                std::memset(scale, 0, 8 * sizeof(float));
                continue;
            }
            const int64_t kb = b0 + b;
            const int j = (int)(kb % 8);
            const uint8_t * blk = A + (size_t)r0 * lda + (size_t)(kb / 8) * sizeof(tsr_block_q3_K);
            if (j == 0 || b == 0) {
                /* the next 8 rows' super-block, as the file packer prefetches its next rows: the
                 * gathers wait on DRAM otherwise (past the panel: the next panel's rows; prefetches
                 * never fault) */
                TSR_UNROLL(8)
                for (int r = 0; r < 8; ++r) {
                    const char * next = (const char *)blk + (size_t)(8 + r) * lda;
                    _mm_prefetch(next, _MM_HINT_T0);
                    _mm_prefetch(next + 64, _MM_HINT_T0);
                    _mm_prefetch(next + sizeof(tsr_block_q3_K) - 1, _MM_HINT_T0);
                }
            }
            const __m512i low = _mm512_i64gather_epi64(row_at, (const void *)(blk + 32 + 8 * j), 1);
            const __m512i third = _mm512_i64gather_epi64(row_at, (const void *)(blk + 8 * (j % 4)), 1);
            const __m512i fields = _mm512_i64gather_epi64(row_at, (const void *)(blk + 96 + 6 * (j / 4)), 1);
            const __m256i d = _mm512_i64gather_epi32(row_at, (const void *)(blk + 106), 1);  /* d: the high half, inside the block */
            _mm256_storeu_ps(scale, _mm256_xor_ps(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(d, 16))), _mm256_set1_ps(-0.0f)));
            /* scales 2j and 2j + 1 (fields f, f + 1 of the 8 bytes) at the top of int16 lanes 4r and 4r + 1, then shifted down signed */
            const int f = 2 * j % 8;
            const uint64_t at = (uint64_t)((6 * f - 2) & 63) << 8 | (uint64_t)((6 * f + 4) & 63) << 24;
            const __m512i sc = _mm512_srai_epi16(_mm512_multishift_epi64_epi8(_mm512_set1_epi64((long long)at), fields), 10);
            const __m512i sc_of[2] = {_mm512_permutexvar_epi16(_mm512_load_si512((const void *)T.scale_lanes[0]), sc),
                                      _mm512_permutexvar_epi16(_mm512_load_si512((const void *)T.scale_lanes[1]), sc)};
            const __m512i third_at = _mm512_set1_epi8((char)(j >= 4 ? 4 : 0));
            TSR_UNROLL(4)
            for (int k = 0; k < 4; ++k) {
                const __m512i idx = _mm512_load_si512((const void *)T.idx[k]);
                const __m512i lo = _mm512_multishift_epi64_epi8(_mm512_load_si512((const void *)T.ctl_low[k]), _mm512_permutexvar_epi8(idx, low));
                const __m512i hi = _mm512_multishift_epi64_epi8(_mm512_add_epi8(_mm512_load_si512((const void *)T.ctl_third[k]), third_at),
                                                                _mm512_permutexvar_epi8(idx, third));
                /* 4 - level (the level plus 4: 0..7) times the scale: the file packer's (level - 4) x -scale */
                const __m512i v = _mm512_sub_epi8(m4, _mm512_ternarylogic_epi32(lo, _mm512_and_si512(hi, m4), m3, 0xE4));  /* c ? a : b */
                const __m512i s = sc_of[k / 2];
                const __m512i even = _mm512_and_si512(_mm512_mullo_epi16(v, s), low_bytes);
                const __m512i odd = _mm512_slli_epi16(_mm512_mullo_epi16(_mm512_srli_epi16(v, 8), s), 8);
                const __m512i w = _mm512_xor_si512(_mm512_or_si512(even, odd), flip);
                _mm256_storeu_si256((__m256i *)(q + ((size_t)(2 * k) * R + r0) * 4), _mm512_castsi512_si256(w));
                _mm256_storeu_si256((__m256i *)(q + ((size_t)(2 * k + 1) * R + r0) * 4), _mm512_extracti64x4_epi64(w, 1));
            }
        }
    }
}
TSR_SIMD_WARNINGS_ON
#endif

#if defined(TSR_CPU_HAVE_X86_KERNELS)
/* Whether the VBMI conversions run here (vbmi false: the scalar ones, for tests). */
static inline bool words_convert_vbmi(bool vbmi) {
    return vbmi && features().avx512 && features().avx512_vbmi && features().avx512_vnni && features().avx512_gfni;
}
#endif

/* n super-blocks of type t (Q2_K or Q3_K) at p, in place: to its word layout, or back. */
static void words_blocks_in_place(enum tsr_type t, uint8_t * p, int64_t n, bool to_words, bool vbmi = true) {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    if (words_convert_vbmi(vbmi)) return words_blocks_convert_vbmi(t, p, p, n, to_words);
#else
    (void)vbmi;
#endif
    if (t == TSR_TYPE_Q3_K) q3k_blocks_in_place(p, n, to_words);
    else q2k_blocks_in_place(p, n, to_words);
}

/* n super-blocks of type t from its word layout at src to the file's at dst (not src). */
static void words_blocks_to_file(enum tsr_type t, const uint8_t * src, uint8_t * dst, int64_t n, bool vbmi = true) {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    if (words_convert_vbmi(vbmi)) return words_blocks_convert_vbmi(t, src, dst, n, false);
#else
    (void)vbmi;
#endif
    const size_t bb = tsr_type_size(t);
    for (int64_t i = 0; i < n; ++i) {
        const uint8_t * w = src + (size_t)i * bb;
        uint8_t * f = dst + (size_t)i * bb;
        if (t == TSR_TYPE_Q3_K) {
            q3k_block_from_words(w, f);
        } else {
            std::memcpy(f, w, 16);
            q2k_qs_from_words(w + 16, f + 16);
            std::memcpy(f + 80, w + 80, 4);
        }
    }
}

/* The 4-row and 1-row kernels of the selected ISA path for type t's word layout. */
struct words_kernels {
    words_rows_fn four, one;
};

static words_kernels words_kernels_for_isa(enum tsr_type t) {
    const bool q3 = t == TSR_TYPE_Q3_K;
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    if (words_layout_for_type(t))  /* the AVX-512 path in use, with the kernels' extensions */
        return q3 ? words_kernels{q3kw_rows_avx512<4>, q3kw_rows_avx512<1>} : words_kernels{q2kw_rows_avx512<4>, q2kw_rows_avx512<1>};
#endif
    return q3 ? words_kernels{words_rows_scalar<4, q3kw_dot_scalar>, words_rows_scalar<1, q3kw_dot_scalar>}
              : words_kernels{words_rows_scalar<4, q2kw_dot_scalar>, words_rows_scalar<1, q2kw_dot_scalar>};
}

} // namespace tcpu
} // namespace
