/*
 * repack_r8.inl - the interleaved layouts of CPU_REPACK weights (Q4_0, IQ4_NL, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K; Q2_K and
 * Q3_K below) and the kernels that read them: the GEMM's A-panel packers and the
 * matrix-vector products.
 *
 * Q4_0 and IQ4_NL are blocks of 32 weights {fp16 d; 16 bytes qs} (weight j in the low nibble of
 * qs[j] for j < 16, the high nibble of qs[j - 16] otherwise). A group of R8 = 8 rows keeps,
 * for each block column b, one 144-byte record: the 8 rows' d, then qs as 4 chunks of
 * 32 bytes, chunk c holding rows 0..7's qs[4c..4c+4). A group takes exactly the bytes of
 * its 8 file rows (a permutation of them), so repacking needs no memory.
 *
 * Why this order: a chunk's low nibbles are, per row, weights 4c..4c+3 and its high nibbles
 * weights 16+4c..16+4c+3, so one AND (or shift) gives 8 rows x 4 weights, the unit the int8
 * dots (vpdpbusd / vpmaddubsw with one activation quad broadcast) multiply: the
 * matrix-vector kernel sums 8 rows in the 8 lanes of one register without a shuffle, and
 * the GEMM's A panels ([quad][mr rows][4 bytes], pack.inl) are the chunks with AND / shift,
 * copied whole.
 *
 * Q4_K keeps a record per super-block of 256 (below: "the Q4_K record"): the same chunks of
 * 8 rows x 4 bytes, a chunk's nibbles two sub-blocks of 32, and the scales and mins
 * re-encoded into bytes the kernels decode for 8 rows at once; its mat-vec reads the Q8_K
 * activations the plain Q4_K dots read, its GEMM panels are the min panels of pack.inl.
 * Q5_K's record is the Q4_K record followed by the fifth bits in chunks of the same shape.
 * Q2_K's and Q3_K's records keep the 8 rows' scale bytes side by side and their levels in
 * the same chunks (Q3_K's 3-bit levels regrouped so that most come out of a byte whole).
 */
namespace {
namespace tcpu {

enum { R8 = 8, R8_BLOCK_BYTES = R8 * 18 };

/* CPU_REPACK interleaves only where a SIMD mat-vec reads the layout (decode would
 * otherwise fall from the ISA's dot kernels to r8_group_dot_scalar). */
#if defined(TSR_CPU_HAVE_X86_KERNELS)
static constexpr bool k_r8_layout_used = true;
#else
static constexpr bool k_r8_layout_used = false;
#endif

static_assert(sizeof(tsr_block_q4_0) == 18 && sizeof(tsr_block_iq4_nl) == 18, "r8 blocks are {fp16, 16 bytes}");
static_assert(sizeof(tsr_block_q4_K) == 144, "Q4_K super-blocks are {d, dmin, 12 scale bytes, 128 qs}");

/* Every record keeps its levels in chunks of 32 bytes, 8 rows x 4 bytes (row r's at 4r: the
 * 8 rows x 4 weights of one int8 dot). All but Q3_K's copy the file's bytes into them, chunk
 * c holding rows 0..7's bytes [4c, 4c + 4) (Q3_K regroups its level bits). Row r's byte q sits at
 * r8_chunk_byte(q, r) of the chunks; r8_row_to_chunks / r8_row_from_chunks move a row's n
 * bytes (a multiple of 4) in and out. */
static inline int r8_chunk_byte(int q, int r) { return 32 * (q / 4) + 4 * r + q % 4; }

static inline void r8_row_to_chunks(const uint8_t * bytes, int n, int r, uint8_t * chunks) {
    for (int q = 0; q < n; q += 4) std::memcpy(chunks + r8_chunk_byte(q, r), bytes + q, 4);
}

static inline void r8_row_from_chunks(const uint8_t * chunks, int n, int r, uint8_t * bytes) {
    for (int q = 0; q < n; q += 4) std::memcpy(bytes + q, chunks + r8_chunk_byte(q, r), 4);
}

/* The largest block of a type below (Q5_K's): buffers of one row's block. */
static constexpr size_t R8_MAX_BLOCK_BYTES = sizeof(tsr_block_q5_K);

/* The 32-weight types whose records add mins and / or fifth bits to the Q4_0 record's. */
static inline bool is_r8_q32_type(enum tsr_type t) { return t == TSR_TYPE_Q4_1 || t == TSR_TYPE_Q5_0 || t == TSR_TYPE_Q5_1; }

static inline bool is_r8_type(enum tsr_type t) {
    return t == TSR_TYPE_Q4_0 || t == TSR_TYPE_IQ4_NL || t == TSR_TYPE_Q4_1 || t == TSR_TYPE_Q5_0 || t == TSR_TYPE_Q5_1 || t == TSR_TYPE_Q4_K ||
           t == TSR_TYPE_Q5_K || t == TSR_TYPE_Q3_K || t == TSR_TYPE_Q2_K;
}

/* Q2_K and Q3_K are interleaved on x86 CPUs with AVX2 (AVX2 and AVX-512 VNNI kernels read
 * both records), except Q2_K on AVX-512 VNNI, which keeps its file layout (below). Measured
 * on a 2-core Zen 4 VM without AVX-512 (a noisy machine, its read 31-52 GB/s between runs),
 * where the file layouts' AVX2 kernels are bound by compute: cpu_bench, in cache, one core,
 * the records' mat-vecs are 1.5x the file layout's for Q2_K (17.8-18.4 against 11.8-12.0
 * GB/s) and 1.62x for Q3_K (18.0 against 11.1); from DRAM, 2
 * threads, one run, 0.78 and 0.83 x the read against 0.64 and 0.60. The GEMMs' panels are cut
 * from the records directly (r8_k2_pack_panel; Q2_K's requantized as the file packer does), the
 * GEMMs within noise of the file layouts'. LLaMA 1.1B (run_bench, 2 threads, CPU_REPACK against
 * --no-repack, two alternations): Q2_K generation 63.0 / 65.5 against 52.3 / 52.5 tok/s, prompt
 * 75.8 / 77.6 against 79.0 / 74.5; Q3_K generation 52.5 / 54.6 against 40.3 / 41.8, prompt
 * 88.5 / 89.0 against 82.5 / 86.3. On AVX-512 VNNI (a 2-core Zen 5 VM, 31 GB/s read) both
 * records were 1.3-1.4x in cache and within noise from DRAM, with kernels before this Q3_K
 * record and these Q2_K level masks (Q2_K 0.86 / 0.86, Q3_K 0.96 / 0.92 x the read). */
static inline bool r8_type_has_simd(enum tsr_type t) {
    if (t == TSR_TYPE_Q4_0 || t == TSR_TYPE_IQ4_NL || t == TSR_TYPE_Q4_K) return true;
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    const bool avx2 = features().avx2 && features().fma && features().f16c;
    /* Mat-vec from DRAM on a 2-core Zen 5 (AVX-512 VNNI + GFNI, read 66-72 GB/s; cpu_bench,
     * 2 threads, x the read), file layout's zmm kernel against the record's kernel:
     * Q5_K 0.89-0.92 / 0.71, Q4_1 1.03-1.10 / 0.82, Q5_1 1.00-1.03 / 0.74: AVX-512 CPUs keep
     * their file layouts. A zmm kernel of the Q5_K record (the Q4_K record's with the fifth
     * bits by vptestmb and a masked add, lanes scaled every 8 products) read 59.6-64.9 GB/s in
     * cache against the file kernel's 41.0-42.9, one core, yet from DRAM 1.00 / 0.78 / 0.86 /
     * 0.78 / 0.92 x the read against the file's 0.93 / 0.83 / 0.89 / 0.91 / 0.91 (five runs):
     * not kept. Again after the records' spread prefetch (k4_record_prefetcher), the Q4_K
     * record's zmm kernel made generic (fifth bits by a shift, a mask and vpternlogd, int16
     * sums taken every 4 chunks): in cache 47.8 GB/s against the file kernel's 52.6, from
     * DRAM 0.66 / 0.67 / 0.62 x the read at --prefetch 1408 / 2816 / 4224 (paired medians
     * 0.68-0.73) against the file's 0.90-1.04 in the same run; with the qh loads moved onto
     * the qs lines (wrong sums, the qh tail only prefetched) 0.77: not kept either. Q5_0: its file kernel read 0.35-0.46 x from DRAM while its record read 0.79,
     * until the file kernel's third load (64 bytes at group byte 2, overlapping the one at 0)
     * became a word permute: from DRAM 0.38 / 0.70 -> 1.02 / 1.05 x the read (two alternating
     * runs), one thread 12.5 -> 40 GB/s at its in-cache rate (41.6-41.9), against the record's
     * zmm kernel (r8_q50_groups_dot_avx512gfni, in cache 72-76) at 0.87-0.95 in the same
     * runs; the GEMMs are even (the record's panels 1040-1086 against the file layout's
     * 1055-1063 GFLOPS): AVX-512 CPUs keep Q5_0's file layout too. Q4_0's and IQ4_NL's file
     * kernels had read 0.53-0.61 until their four overlapping loads a step went (0.94-1.12
     * since); their records stay (the issue's default, the GEMMs' panels), at 0.83-0.99. */
    if (t == TSR_TYPE_Q5_K || t == TSR_TYPE_Q4_1 || t == TSR_TYPE_Q5_1 || t == TSR_TYPE_Q5_0) return avx2 && !features().avx512;
    /* Q2_K: 0.86-0.91 in the file layout against 0.80 interleaved (its record's zmm kernel),
     * LLaMA 1.1B generation 111-128 against 111-113 tok/s, the prompt no faster. Its record's
     * faster zmm kernel (r8_q2k_groups_dot_avx512vnni, 1.2x the file layout's in cache) did not
     * change that: 0.72 / 0.72 / 0.71 x the read against the file's 0.84 / 0.87 / 0.90 in
     * three runs, 0.79-0.83 against 0.78-0.82 with twice the prefetched lines; with its
     * arithmetic left out it read 0.99 (the layout streams fine; why the record kernels fall
     * further below their in-cache rate from DRAM than the file kernels was open; for Q4_K's
     * record it was the burst of prefetches, see k4_record_prefetcher, and then its unrolled
     * body, see r8_q4k_groups_dot_avx512vnni: these records' kernels still prefetch a quarter
     * record at once, not re-measured spread, and r8_q2k_groups_dot_avx512vnni's body is as
     * Q4_K's was, 128 vpdpbusd and 82 stack accesses a super-block, not re-measured). Medians of
     * cpu_bench's paired runs: 0.79-0.84 against the file's 0.86-0.89 (15 pairs each, two runs).
     * Not the cause, measured: its scale words (2 KiB a step of 4 groups, spilled to the stack)
     * recomputed at each use instead (0.75-0.76); in the Q3_K record, its 64-byte loads
     * aligned down (the same lines, wrong sums: no change); in the Q3_K and Q4_K records, 1, 2
     * or 6 groups side by side instead of 4 (1 and 2 read 0.71-0.82, 6 no better). Q3_K: its
     * record read by the AVX2 kernel was 0.57 against the file's 0.77-0.85; read by its zmm
     * kernel (r8_q3k_groups_dot_avx512vnni: in cache 57.2-57.6 against the file kernel's
     * 32.8 GB/s, one core, since the levels' offset starts the dots and the scales widen once
     * a record; 40.0-43.9 before) the record reads 0.94 / 0.90 / 0.97 / 0.95 / 0.89 / 0.81 x
     * the read against the file's 0.85 / 0.86 / 0.84 / 0.91 / 0.81 / 0.85 (six runs, 55-65
     * GB/s read), and its prompt is 30-40 % faster (GEMM panels cut from the records).
     * Without VNNI the AVX-512 path runs the AVX2 file kernels, which the records beat.
     * Q2_K on AVX-512 VNNI, Q3_K where GFNI and VBMI are there too: the word layouts of
     * repack_words.inl (the file's order, levels regrouped by sub-block), not these records.
     * Q2_K from DRAM (2 threads, the file kernel, the word kernel and this record's zmm kernel
     * in one binary, medians of 7 paired runs each, 2-core Zen 5): 0.88 / 0.82 / 0.86 / 0.91 x
     * the read for the file kernel, 0.98 / 1.00 / 0.97 / 0.92 for the words, 0.85 / 0.89 /
     * 0.86 / 0.78 for a record kernel as fast in cache as the words' (54 against 45 and the
     * file kernel's 38 GB/s a core). Q3_K (cpu_bench, the record's build against the words',
     * alternating, 5 runs each, read 45-70 GB/s): the record's mat-vec 49.2-56.0 GB/s, the
     * words' 55.1-64.4, though in cache the record reads 56.6 and the words 41.5 GB/s a core
     * (the file kernel 31.5-33.4): the records' DRAM deficit again. */
    if ((t == TSR_TYPE_Q2_K || t == TSR_TYPE_Q3_K) && words_layout_for_type(t)) return true;
    if (t == TSR_TYPE_Q3_K) return avx2;
    return avx2 && !(features().avx512 && features().avx512_vnni);
#else
    return false;
#endif
}

/* A record holds one block column of a group: 8 rows' blocks of 32 (Q4_0, IQ4_NL) or
 * super-blocks of 256 (the K-quants). */
static inline size_t r8_record_bytes(enum tsr_type t) { return R8 * tsr_type_size(t); }

/* Row r's super-block in a scalar record dot (Q4_K, Q2_K): its exact sums scaled by the
 * row's d (fp16 at rec + 2r) and dmin (at rec + dmin_at + 2r). */
static inline float r8_dmin_result(const uint8_t * rec, size_t dmin_at, int r, float yd, int32_t sumi, int32_t summ) {
    uint16_t d, dmin;
    std::memcpy(&d, rec + 2 * r, 2);
    std::memcpy(&dmin, rec + dmin_at + 2 * r, 2);
    return h2f(d) * yd * (float)sumi - h2f(dmin) * yd * (float)summ;
}

/* ---- the Q4_K record ------------------------------------------------------------------------
 * 8 rows' super-blocks (1152 bytes). The file's 12 scale bytes pack 6-bit values in three
 * ways; here a scale's or min's 4 low and 2 high bits sit at fixed places, so that four
 * masks and shifts over 96 bytes give the 8 rows' scales and mins of every sub-block of 32
 * as bytes, 8 rows side by side:
 *   [0, 16)     the 8 rows' d (fp16), [16, 32) their dmin;
 *   [32, 96)    byte 8s + r: low 4 bits of row r's scale of sub-block s, its min's above;
 *   [96, 128)   byte 8s + r (s < 4): the high 2 bits of scale and min of sub-block s (bits
 *               0-1, 2-3), those of sub-block s + 4 (bits 4-5, 6-7);
 *   [128, 1152) chunk 8p + c (32 bytes): rows 0..7's qs[32p + 4c, +4), whose low nibbles are
 *               weights 4c..4c+3 of sub-block 2p, the high ones those of sub-block 2p + 1:
 *               the 8 rows x 4 weights of one int8 dot, as in the Q4_0 record.
 * The scale bytes re-encode the 96 bits of the file's 12 (8 scales, 8 mins), so the record
 * is a bijection of the 8 blocks and takes their bytes. */
enum { Q4K_R8_DMIN = 16, Q4K_R8_LOW = 32, Q4K_R8_HIGH = 96, Q4K_R8_QS = 128, Q4K_R8_BYTES = R8 * 144 };

/* Q4_K's and Q5_K's super-blocks both begin {d, dmin, 12 scale bytes}: hdr, their first 16
 * bytes, and qs, their 128 bytes of nibbles, as row r's in a Q4_K record. */
static void k4_parts_to_record(const uint8_t * hdr, const uint8_t * qs, int r, uint8_t * rec) {
    std::memcpy(rec + 2 * r, hdr, 2);
    std::memcpy(rec + Q4K_R8_DMIN + 2 * r, hdr + 2, 2);
    int sc[8], mn[8];
    for (int s = 0; s < 8; ++s) tsr_impl::k4_scale_min(s, hdr + 4, &sc[s], &mn[s]);
    for (int s = 0; s < 8; ++s) rec[Q4K_R8_LOW + 8 * s + r] = (uint8_t)((sc[s] & 15) | (mn[s] & 15) << 4);
    for (int s = 0; s < 4; ++s)
        rec[Q4K_R8_HIGH + 8 * s + r] = (uint8_t)(sc[s] >> 4 | (mn[s] >> 4) << 2 | (sc[s + 4] >> 4) << 4 | (mn[s + 4] >> 4) << 6);
    r8_row_to_chunks(qs, 128, r, rec + Q4K_R8_QS);
}

static void q4k_block_to_record(const uint8_t * blk, int r, uint8_t * rec) {
    k4_parts_to_record(blk, blk + offsetof(tsr_block_q4_K, qs), r, rec);
}

/* Row r's scale and min of sub-block s in a Q4_K record. */
static inline void q4k_record_scale_min(const uint8_t * rec, int s, int r, int * sc, int * mn) {
    const uint8_t low = rec[Q4K_R8_LOW + 8 * s + r];
    const int high = rec[Q4K_R8_HIGH + 8 * (s % 4) + r] >> (4 * (s / 4));
    *sc = (low & 15) | (high & 3) << 4;
    *mn = low >> 4 | (high >> 2 & 3) << 4;
}

/* The inverse of k4_parts_to_record: row r's 16 header bytes and 128 bytes of nibbles. */
static void k4_parts_from_record(const uint8_t * rec, int r, uint8_t * hdr, uint8_t * qs) {
    std::memcpy(hdr, rec + 2 * r, 2);
    std::memcpy(hdr + 2, rec + Q4K_R8_DMIN + 2 * r, 2);
    std::memset(hdr + 4, 0, 12);
    for (int s = 0; s < 8; ++s) {  /* in order: sub-blocks 4..7 add bits to bytes 0..3 sets */
        int sc, mn;
        q4k_record_scale_min(rec, s, r, &sc, &mn);
        tsr_impl::k4_set_scale_min(s, sc, mn, hdr + 4);
    }
    r8_row_from_chunks(rec + Q4K_R8_QS, 128, r, qs);
}

static void q4k_block_from_record(const uint8_t * rec, int r, uint8_t * blk) {
    k4_parts_from_record(rec, r, blk, blk + offsetof(tsr_block_q4_K, qs));
}

/* ---- the Q5_K record ------------------------------------------------------------------------
 * 8 rows' super-blocks (1408 bytes): the Q4_K record of their d, dmin, scales, mins and the
 * low 4 bits of their levels, then their fifth bits in chunks like the nibbles':
 *   [0, 1152)    the Q4_K record;
 *   [1152, 1408) chunk c: rows 0..7's qh[4c, +4). The file's qh[l] holds the fifth bit of
 *                weight 32s + l (sub-block s) in bit s, so bit s of qh chunk c's byte 4r + j
 *                belongs to the same byte of qs chunk 8 (s / 2) + c (its low nibble for even
 *                s, its high one for odd s): one shift and one mask bring a level's bits in.
 * The record is a bijection of the 8 blocks, as the Q4_K one. */
enum { Q5K_R8_QH = Q4K_R8_BYTES, Q5K_R8_BYTES = R8 * 176 };
static_assert(sizeof(tsr_block_q5_K) == 176 && offsetof(tsr_block_q5_K, qh) == 16, "Q5_K super-blocks are {d, dmin, 12 scale bytes, 32 qh, 128 qs}");
static constexpr size_t k4_record_bytes(bool q5) { return q5 ? (size_t)Q5K_R8_BYTES : (size_t)Q4K_R8_BYTES; }

static void q5k_block_to_record(const uint8_t * blk, int r, uint8_t * rec) {
    k4_parts_to_record(blk, blk + offsetof(tsr_block_q5_K, qs), r, rec);
    r8_row_to_chunks(blk + offsetof(tsr_block_q5_K, qh), 32, r, rec + Q5K_R8_QH);
}

static void q5k_block_from_record(const uint8_t * rec, int r, uint8_t * blk) {
    k4_parts_from_record(rec, r, blk, blk + offsetof(tsr_block_q5_K, qs));
    r8_row_from_chunks(rec + Q5K_R8_QH, 32, r, blk + offsetof(tsr_block_q5_K, qh));
}

/* Row r's level (0..15 Q4_K, 0..31 Q5_K) of weight e in a Q4_K / Q5_K record. */
template <bool Q5>
static inline int k4_record_level(const uint8_t * rec, int e, int r) {
    const int s = e / 32, l = e % 32;
    const int q = rec[Q4K_R8_QS + r8_chunk_byte(32 * (s / 2) + l, r)] >> (4 * (s % 2)) & 15;
    return Q5 ? q | (rec[Q5K_R8_QH + r8_chunk_byte(l, r)] >> s & 1) << 4 : q;
}

/* ---- the Q3_K record ------------------------------------------------------------------------
 * 8 rows' super-blocks (880 bytes). A level is 3 bits (2 in the file's qs, 1 in its hmask,
 * 0..7: the weight plus 4); the record regroups them so that most levels come out of a byte
 * with one mask and at most one shift, and the file's 12 scale bytes stay as they are, 8 rows
 * side by side (their low-nibble and high-bit planes are those the kernels decode for 8 rows
 * at once):
 *   [0, 16)     the 8 rows' d (fp16);
 *   [16, 112)   byte 16 + 8k + r: row r's scale byte k (k < 8: the low 4 bits of scale k and
 *               k + 8; k >= 8: the high 2 bits of scales k - 8, k - 4, k, k + 4);
 *   [112, 880)  8 triples of chunks A, B, C (32 bytes each, 8 rows x 4 bytes), triple j for
 *               weights 32j..32j+31: byte 4r + i of each holds row r's levels of weights
 *               32j + 4q + i, quad q = 0, 1 in A's bits 0-2 and 4-6, q = 2, 3 in B's, q = 4, 5
 *               in C's; quad 6's level is bits 3 of A, B, C (its bits 0, 1, 2), quad 7's bits 7.
 *               Triples 2t and 2t + 1 interleave their chunks (192 bytes from 112 + 192t:
 *               A_2t A_2t+1 B_2t B_2t+1 C_2t C_2t+1), so one zmm load takes a chunk of both.
 * A chunk's quad is then row r's 4 weights of one int8 dot in lane r, and quads 0..3 (4..7)
 * are the 16 weights of sub-block 2j (2j + 1). */
enum { Q3K_R8_SCALES = 16, Q3K_R8_LEVELS = 112, Q3K_R8_BYTES = R8 * 110 };
static_assert(sizeof(tsr_block_q3_K) == 110, "Q3_K super-blocks are {32 hmask, 64 qs, 12 scale bytes, d}");
static_assert(Q3K_R8_LEVELS + 8 * 96 == Q3K_R8_BYTES, "the triples fill the record");

/* Chunk A of triple j in a Q3_K record; its B and C sit Q3K_R8_CHUNK_STRIDE and twice that
 * on (triple j ^ 1's chunks between them). */
enum { Q3K_R8_CHUNK_STRIDE = 64 };
static inline size_t q3k_triple_at(int j) { return Q3K_R8_LEVELS + 192 * (size_t)(j / 2) + 32 * (size_t)(j % 2); }

/* Where row r's level of weight e lives in a Q3_K record: byte 4r + e % 4 of chunk A of its
 * triple. */
static inline size_t q3k_record_at(int e, int r) { return q3k_triple_at(e / 32) + 4 * r + e % 4; }

/* Row r's level (0..7, the weight plus 4) of weight e in a Q3_K record. */
static inline int q3k_record_level(const uint8_t * rec, int e, int r) {
    const uint8_t * abc = rec + q3k_record_at(e, r);
    const int q = e % 32 / 4;
    enum { S = Q3K_R8_CHUNK_STRIDE };
    if (q < 6) return abc[S * (q / 2)] >> (4 * (q % 2)) & 7;
    const int bit = q == 6 ? 3 : 7;
    return (abc[0] >> bit & 1) | (abc[S] >> bit & 1) << 1 | (abc[2 * S] >> bit & 1) << 2;
}

/* The conversions move 4 weights' levels at a time: bytes of a uint32 (memcpy), each byte
 * one lane, so what a shift carries into a neighbouring byte is masked off either way round. */
static inline uint32_t load_u32(const uint8_t * p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
static inline void store_u32(uint8_t * p, uint32_t v) { std::memcpy(p, &v, 4); }
static constexpr uint32_t BYTES_1 = 0x01010101u;

static void q3k_block_to_record(const uint8_t * blk, int r, uint8_t * rec) {
    const tsr_block_q3_K & x = *(const tsr_block_q3_K *)(const void *)blk;
    std::memcpy(rec + 2 * r, &x.d, 2);
    for (int k = 0; k < 12; ++k) rec[Q3K_R8_SCALES + 8 * k + r] = x.scales[k];
    for (int j = 0; j < 8; ++j) {  /* weights 32j + 4q + i: 2 bits of qs[32 (j / 4) + 4q + i], bit j of hmask[4q + i] */
        uint32_t L[8];
        for (int q = 0; q < 8; ++q)
            L[q] = (load_u32(x.qs + 32 * (j / 4) + 4 * q) >> (2 * (j % 4)) & 3 * BYTES_1) | (load_u32(x.hmask + 4 * q) >> j & BYTES_1) << 2;
        uint8_t * abc = rec + q3k_record_at(32 * j, r);
        for (int c = 0; c < 3; ++c)
            store_u32(abc + Q3K_R8_CHUNK_STRIDE * c, L[2 * c] | L[2 * c + 1] << 4 | (L[6] >> c & BYTES_1) << 3 | (L[7] >> c & BYTES_1) << 7);
    }
}

static void q3k_block_from_record(const uint8_t * rec, int r, uint8_t * blk) {
    tsr_block_q3_K x;
    std::memcpy(&x.d, rec + 2 * r, 2);
    for (int k = 0; k < 12; ++k) x.scales[k] = rec[Q3K_R8_SCALES + 8 * k + r];
    std::memset(x.qs, 0, sizeof(x.qs));
    std::memset(x.hmask, 0, sizeof(x.hmask));
    for (int j = 0; j < 8; ++j) {  /* the inverse of q3k_block_to_record */
        const uint8_t * abc = rec + q3k_record_at(32 * j, r);
        const uint32_t a = load_u32(abc), b = load_u32(abc + Q3K_R8_CHUNK_STRIDE), c = load_u32(abc + 2 * Q3K_R8_CHUNK_STRIDE);
        const uint32_t L[8] = {a & 7 * BYTES_1, a >> 4 & 7 * BYTES_1, b & 7 * BYTES_1, b >> 4 & 7 * BYTES_1, c & 7 * BYTES_1, c >> 4 & 7 * BYTES_1,
                               (a >> 3 & BYTES_1) | (b >> 3 & BYTES_1) << 1 | (c >> 3 & BYTES_1) << 2,
                               (a >> 7 & BYTES_1) | (b >> 7 & BYTES_1) << 1 | (c >> 7 & BYTES_1) << 2};
        for (int q = 0; q < 8; ++q) {
            uint8_t * qs = x.qs + 32 * (j / 4) + 4 * q, * hm = x.hmask + 4 * q;
            store_u32(qs, load_u32(qs) | (L[q] & 3 * BYTES_1) << (2 * (j % 4)));
            store_u32(hm, load_u32(hm) | (L[q] >> 2 & BYTES_1) << j);
        }
    }
    std::memcpy(blk, &x, sizeof(x));
}

/* ---- the Q2_K record ------------------------------------------------------------------------
 * 8 rows' super-blocks (672 bytes), as the Q3_K record without the third bits: the scale
 * bytes (scale in the low nibble, min in the high one) are already one byte per sub-block,
 * 8 rows side by side:
 *   [0, 16)     the 8 rows' d (fp16), [16, 32) their dmin;
 *   [32, 160)   byte 32 + 8s + r: row r's scale byte s (sub-block s of 16);
 *   [160, 672)  16 qs chunks of 32 bytes as in the Q3_K record. */
enum { Q2K_R8_DMIN = 16, Q2K_R8_SCALES = 32, Q2K_R8_QS = 160, Q2K_R8_BYTES = R8 * 84 };
static_assert(sizeof(tsr_block_q2_K) == 84, "Q2_K super-blocks are {16 scale bytes, 64 qs, d, dmin}");

/* Row r's level (0..3) of weight e in a Q2_K record. */
static inline int q2k_record_level(const uint8_t * rec, int e, int r) {
    return rec[Q2K_R8_QS + r8_chunk_byte(32 * (e / 128) + e % 32, r)] >> (2 * (e % 128 / 32)) & 3;
}

static void q2k_block_to_record(const uint8_t * blk, int r, uint8_t * rec) {
    const tsr_block_q2_K & x = *(const tsr_block_q2_K *)(const void *)blk;
    std::memcpy(rec + 2 * r, &x.d, 2);
    std::memcpy(rec + Q2K_R8_DMIN + 2 * r, &x.dmin, 2);
    for (int s = 0; s < 16; ++s) rec[Q2K_R8_SCALES + 8 * s + r] = x.scales[s];
    r8_row_to_chunks(x.qs, 64, r, rec + Q2K_R8_QS);
}

static void q2k_block_from_record(const uint8_t * rec, int r, uint8_t * blk) {
    tsr_block_q2_K x;
    std::memcpy(&x.d, rec + 2 * r, 2);
    std::memcpy(&x.dmin, rec + Q2K_R8_DMIN + 2 * r, 2);
    for (int s = 0; s < 16; ++s) x.scales[s] = rec[Q2K_R8_SCALES + 8 * s + r];
    r8_row_from_chunks(rec + Q2K_R8_QS, 64, r, x.qs);
    std::memcpy(blk, &x, sizeof(x));
}

/* ---- the records of Q4_1, Q5_0 and Q5_1 ----------------------------------------------------
 * 8 rows' blocks of 32 ({d, m, 16 qs}, {d, qh, 16 qs}, {d, m, qh, 16 qs}), as the Q4_0 record
 * (r8_q32_layout<Q4_0>, IQ4_NL's too: d, then the qs chunks) with what the format adds:
 *   [0, 16)     the 8 rows' d (fp16);
 *   then        (Q4_1, Q5_1) the 8 rows' m (fp16);
 *   then        (Q5_0, Q5_1) a chunk of fifth bits: bit 2c of its byte 4r + j is that of the
 *               low nibble of byte 4r + j of qs chunk c (row r's weight 4c + j, bit 4c + j of
 *               the file's qh), bit 2c + 1 that of its high nibble (weight 16 + 4c + j): one
 *               shift and one mask bring a chunk's fifth bits to bit 4, as Q5_K's record;
 *   then        the 4 qs chunks of the Q4_0 record.
 * The fifth bits are a permutation of the file's qh bits, so the record is a bijection of
 * the 8 blocks and takes their bytes. */
template <enum tsr_type T>
struct r8_q32_layout {
    static constexpr bool has_min = T == TSR_TYPE_Q4_1 || T == TSR_TYPE_Q5_1;
    static constexpr bool five = T == TSR_TYPE_Q5_0 || T == TSR_TYPE_Q5_1;
    static constexpr size_t min_at = 16, qh_at = has_min ? 32 : 16, qs_at = qh_at + (five ? 32 : 0), bytes = qs_at + 128;
    static constexpr size_t file_qh = has_min ? 4 : 2, file_qs = file_qh + (five ? 4 : 0);  /* in the file's block */
};
static_assert(r8_q32_layout<TSR_TYPE_Q4_0>::bytes == R8_BLOCK_BYTES && r8_q32_layout<TSR_TYPE_Q4_0>::qs_at == 16, "the Q4_0 record");
static_assert(r8_q32_layout<TSR_TYPE_Q4_1>::bytes == R8 * sizeof(tsr_block_q4_1) && offsetof(tsr_block_q4_1, qs) == 4, "Q4_1 blocks are {d, m, 16 qs}");
static_assert(r8_q32_layout<TSR_TYPE_Q5_0>::bytes == R8 * sizeof(tsr_block_q5_0) && offsetof(tsr_block_q5_0, qs) == 6, "Q5_0 blocks are {d, 4 qh, 16 qs}");
static_assert(r8_q32_layout<TSR_TYPE_Q5_1>::bytes == R8 * sizeof(tsr_block_q5_1) && offsetof(tsr_block_q5_1, qs) == 8, "Q5_1 blocks are {d, m, 4 qh, 16 qs}");

template <enum tsr_type T>
static void q32_block_to_record(const uint8_t * blk, int r, uint8_t * rec) {
    using L = r8_q32_layout<T>;
    std::memcpy(rec + 2 * r, blk, 2);
    if (L::has_min) std::memcpy(rec + L::min_at + 2 * r, blk + 2, 2);
    if (L::five) {
        uint32_t qh;
        std::memcpy(&qh, blk + L::file_qh, 4);
        for (int j = 0; j < 4; ++j) {
            uint8_t v = 0;
            for (int c = 0; c < 4; ++c) v = (uint8_t)(v | (qh >> (4 * c + j) & 1) << (2 * c) | (qh >> (16 + 4 * c + j) & 1) << (2 * c + 1));
            rec[L::qh_at + 4 * r + j] = v;
        }
    }
    r8_row_to_chunks(blk + L::file_qs, 16, r, rec + L::qs_at);
}

template <enum tsr_type T>
static void q32_block_from_record(const uint8_t * rec, int r, uint8_t * blk) {
    using L = r8_q32_layout<T>;
    std::memcpy(blk, rec + 2 * r, 2);
    if (L::has_min) std::memcpy(blk + 2, rec + L::min_at + 2 * r, 2);
    if (L::five) {
        uint32_t qh = 0;
        for (int j = 0; j < 4; ++j) {
            const uint32_t v = rec[L::qh_at + 4 * r + j];
            for (int c = 0; c < 4; ++c) qh |= (v >> (2 * c) & 1) << (4 * c + j) | (v >> (2 * c + 1) & 1) << (16 + 4 * c + j);
        }
        std::memcpy(blk + L::file_qh, &qh, 4);
    }
    r8_row_from_chunks(rec + L::qs_at, 16, r, blk + L::file_qs);
}

/* Row r's level (0..15 Q4_1, 0..31 Q5_0 / Q5_1) of weight e in such a record. */
template <enum tsr_type T>
static inline int q32_record_level(const uint8_t * rec, int e, int r) {
    using L = r8_q32_layout<T>;
    const int high = e / 16, c = e % 16 / 4, j = e % 4;
    const int q = rec[L::qs_at + 32 * c + 4 * r + j] >> (4 * high) & 15;
    return L::five ? q | (rec[L::qh_at + 4 * r + j] >> (2 * c + high) & 1) << 4 : q;
}

/* ---- layout: file rows <-> groups -------------------------------------------------------- */

/* Row r's block in the record at rec, as the file's block (of type t) at blk. */
static void r8_block_from_record(enum tsr_type t, const uint8_t * rec, int r, uint8_t * blk) {
    if (t == TSR_TYPE_Q4_K) return q4k_block_from_record(rec, r, blk);
    if (t == TSR_TYPE_Q5_K) return q5k_block_from_record(rec, r, blk);
    if (t == TSR_TYPE_Q4_1) return q32_block_from_record<TSR_TYPE_Q4_1>(rec, r, blk);
    if (t == TSR_TYPE_Q5_0) return q32_block_from_record<TSR_TYPE_Q5_0>(rec, r, blk);
    if (t == TSR_TYPE_Q5_1) return q32_block_from_record<TSR_TYPE_Q5_1>(rec, r, blk);
    if (t == TSR_TYPE_Q3_K) return q3k_block_from_record(rec, r, blk);
    if (t == TSR_TYPE_Q2_K) return q2k_block_from_record(rec, r, blk);
    q32_block_from_record<TSR_TYPE_Q4_0>(rec, r, blk);  /* Q4_0, IQ4_NL: {d, 16 qs} */
}

/* The file's block blk (of type t) as row r's in the record at rec. */
static void r8_block_to_record(enum tsr_type t, const uint8_t * blk, int r, uint8_t * rec) {
    if (t == TSR_TYPE_Q4_K) return q4k_block_to_record(blk, r, rec);
    if (t == TSR_TYPE_Q5_K) return q5k_block_to_record(blk, r, rec);
    if (t == TSR_TYPE_Q4_1) return q32_block_to_record<TSR_TYPE_Q4_1>(blk, r, rec);
    if (t == TSR_TYPE_Q5_0) return q32_block_to_record<TSR_TYPE_Q5_0>(blk, r, rec);
    if (t == TSR_TYPE_Q5_1) return q32_block_to_record<TSR_TYPE_Q5_1>(blk, r, rec);
    if (t == TSR_TYPE_Q3_K) return q3k_block_to_record(blk, r, rec);
    if (t == TSR_TYPE_Q2_K) return q2k_block_to_record(blk, r, rec);
    q32_block_to_record<TSR_TYPE_Q4_0>(blk, r, rec);  /* Q4_0, IQ4_NL: {d, 16 qs} */
}

/* Blocks [b0, b0 + nb) of row r (0..7) of the group at grp, as file blocks. */
static void r8_row_to_file(enum tsr_type t, const uint8_t * grp, int r, int64_t b0, int64_t nb, uint8_t * out) {
    for (int64_t b = 0; b < nb; ++b) r8_block_from_record(t, grp + (size_t)(b0 + b) * r8_record_bytes(t), r, out + (size_t)b * tsr_type_size(t));
}

/* The 8 file rows at rows (row stride row_bytes, nb blocks each) as one group. */
static void r8_group_from_file(enum tsr_type t, const uint8_t * rows, size_t row_bytes, int64_t nb, uint8_t * grp) {
    for (int64_t b = 0; b < nb; ++b)
        for (int r = 0; r < R8; ++r)
            r8_block_to_record(t, rows + (size_t)r * row_bytes + (size_t)b * tsr_type_size(t), r, grp + (size_t)b * r8_record_bytes(t));
}

/* One group (8 rows of nb blocks of type t at grp) rewritten in place: to the interleaved
 * layout, or back to the file's rows; tmp holds a group's bytes. */
static void r8_group_in_place(enum tsr_type t, uint8_t * grp, int64_t nb, bool to_r8, uint8_t * tmp) {
    const size_t row_bytes = (size_t)nb * tsr_type_size(t);
    std::memcpy(tmp, grp, row_bytes * R8);
    if (to_r8) return r8_group_from_file(t, tmp, row_bytes, nb, grp);
    for (int r = 0; r < R8; ++r) r8_row_to_file(t, tmp, r, 0, nb, grp + (size_t)r * row_bytes);
}

/* ---- matrix-vector: rows [m0, m1) of an r8 matrix times N columns ------------------------ */

struct r8_gemv_args {
    const uint8_t * A;   /* the matrix: row m's group starts at A + (m / 8) * 8 * lda */
    size_t lda;          /* bytes of one file row */
    int64_t K;
    const char * B; size_t ldb;   /* yq8 rows (Q4_K: Q8_K rows) */
    int64_t N;
    float * C; size_t ldc;
};

static inline int r8_weight(enum tsr_type t, int nibble) {
    return t == TSR_TYPE_Q4_0 ? nibble - 8 : tsr_impl::iq4nl_values[nibble];
}

/* The reference: exact int32 sums per block, scaled in float as the plain dots do. */
template <enum tsr_type T>
static void r8_group_dot_scalar(const uint8_t * grp, int64_t nb, const yq8 * y, float * out) {
    float acc[R8] = {};
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t * rec = grp + (size_t)b * R8_BLOCK_BYTES;
        for (int r = 0; r < R8; ++r) {
            int32_t s = 0;
            for (int c = 0; c < 4; ++c)
                for (int j = 0; j < 4; ++j) {
                    const uint8_t q = rec[16 + (c * R8 + r) * 4 + j];
                    s += r8_weight(T, q & 0x0F) * y[b].qs[4 * c + j] + r8_weight(T, q >> 4) * y[b].qs[16 + 4 * c + j];
                }
            uint16_t d;
            std::memcpy(&d, rec + 2 * r, 2);
            acc[r] += h2f(d) * y[b].d * (float)s;
        }
    }
    std::memcpy(out, acc, sizeof(acc));
}

/* G groups gstride bytes apart (G streams from memory), nb records each, against the
 * activation blocks Y (yq8 for Q4_0 / IQ4_NL, Q8_K for Q4_K); out gets 8 floats per group. */
template <class Y> using r8_dot_fn_of = void (*)(const uint8_t * grp, size_t gstride, int64_t nb, const Y * y, float * out);
typedef r8_dot_fn_of<yq8> r8_dot_fn;

template <class Y, void (*DOT)(const uint8_t * grp, int64_t nb, const Y * y, float * out), int G>
static void r8_groups_dot_scalar(const uint8_t * grp, size_t gstride, int64_t nb, const Y * y, float * out) {
    for (int g = 0; g < G; ++g) DOT(grp + (size_t)g * gstride, nb, y, out + R8 * g);
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
TSR_SIMD_WARNINGS_OFF
/* 8 rows' int32 sums of one block, a lane per row, against the block's 8 activation quads
 * broadcast (yq[c]: y.qs[4c..4c+4)). Q4_0: the nibbles are unsigned, and all 8 vpmaddubsw
 * results of a block add up in int16 (16 products of at most 15 * 128 = 30720) before one
 * vpmaddwd; the -8 comes back as -8 * sum(y). IQ4_NL: the table's values are signed, so the
 * activations' sign moves onto them (vpmaddubsw takes unsigned x signed; ayq[c] = |yq[c]|,
 * shared by the groups) and each vpmaddubsw (pairs up to 2 * 127 * 127) goes to int32 on its
 * own. */
template <enum tsr_type T>
TSR_TARGET_AVX2 static inline __m256i r8_block_sums_avx2(const uint8_t * rec, const __m256i * yq, const __m256i * ayq, int32_t ysum) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tsr_impl::iq4nl_values));
    __m256i s16 = _mm256_setzero_si256(), s32 = _mm256_setzero_si256();
    TSR_UNROLL(4)
    for (int c = 0; c < 4; ++c) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(rec + 16 + 32 * c));
        const __m256i lo = _mm256_and_si256(q, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if (T == TSR_TYPE_Q4_0) {
            s16 = _mm256_add_epi16(s16, _mm256_add_epi16(_mm256_maddubs_epi16(lo, yq[c]), _mm256_maddubs_epi16(hi, yq[c + 4])));
        } else {
            const __m256i vlo = _mm256_shuffle_epi8(lut, lo), vhi = _mm256_shuffle_epi8(lut, hi);
            s32 = _mm256_add_epi32(s32, _mm256_add_epi32(dot32_s8_absy_avx2(vlo, yq[c], ayq[c]), dot32_s8_absy_avx2(vhi, yq[c + 4], ayq[c + 4])));
        }
    }
    if (T == TSR_TYPE_Q4_0) return _mm256_sub_epi32(_mm256_madd_epi16(s16, ones), _mm256_set1_epi32(8 * ysum));
    return s32;
}

/* G groups, gstride bytes apart, sharing the activations' broadcasts. */
template <enum tsr_type T, int G>
TSR_TARGET_AVX2 static void r8_groups_dot_avx2(const uint8_t * grp, size_t gstride, int64_t nb, const yq8 * y, float * out) {
    /* each group's stream prefetched ahead of its records (g_matvec_pf_ahead: the hardware
     * prefetchers alone leave a core's few streams short of DRAM bandwidth) */
    const matvec_prefetcher<T, R8_BLOCK_BYTES, true> prefetch;
    __m256 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        __m256i yq[8], ayq[8];
        TSR_UNROLL(8)
        for (int c = 0; c < 8; ++c) {
            int32_t quad;
            std::memcpy(&quad, y[b].qs + 4 * c, 4);
            yq[c] = _mm256_set1_epi32(quad);
            ayq[c] = T == TSR_TYPE_IQ4_NL ? _mm256_abs_epi8(yq[c]) : yq[c];
        }
        const __m256 yd = _mm256_set1_ps(y[b].d);
        TSR_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            const uint8_t * rec = grp + (size_t)g * gstride + (size_t)b * R8_BLOCK_BYTES;
            prefetch((const char *)rec);
            const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)rec)), yd);
            acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(r8_block_sums_avx2<T>(rec, yq, ayq, y[b].sum)), d, acc[g]);
        }
    }
    for (int g = 0; g < G; ++g) _mm256_storeu_ps(out + 8 * g, acc[g]);
}

/* The zmm kernels' results: a group's row r sits in lanes r and r + 8, added once here and
 * stored as the group's 8 floats. */
template <int G>
TSR_TARGET_AVX512VNNI static inline void r8_store_halves_zmm(const __m512 * acc, float * out) {
    TSR_UNROLL(8)
    for (int g = 0; g < G; ++g)
        _mm256_storeu_ps(out + 8 * g, _mm256_add_ps(_mm512_castps512_ps256(acc[g]), _mm512_extractf32x8_ps(acc[g], 1)));
}

/* The same with vpdpbusd on whole zmm registers (unsigned x signed into int32, no
 * saturation): a load takes two chunks, lanes 0..7 one chunk's 8 rows and lanes 8..15 the
 * next's, against the two matching activation quads (one vpermd each, shared by the G
 * groups). The weights' offset (Q4_0's 8, IQ4_NL's values moved to unsigned by
 * 128) comes back exactly as -offset * sum(y) in lanes 0..7 of the first vpdpbusd's start,
 * so a row's two lanes add up to the exact block sum; each is scaled (d, 8 rows' fp16 scales
 * in one vcvtph2ps, repeated in both halves) and the halves are added once at the end. G
 * groups, gstride bytes apart, are G streams from memory; out gets 8 floats per group. (Q5_0's
 * record had a GFNI instantiation, fifth bits by one gf2p8affineqb a nibble plane, 72-76 GB/s
 * in cache; since Q5_0's file kernel reads at the DRAM's rate, AVX-512 CPUs keep its file
 * layout and the instantiation went.) */
template <enum tsr_type T, int G>
TSR_TARGET_AVX512VNNI static void r8_groups_dot_avx512vnni(const uint8_t * grp, size_t gstride, int64_t nb, const yq8 * y, float * out) {
    static_assert(T == TSR_TYPE_Q4_0 || T == TSR_TYPE_IQ4_NL, "the zmm record kernel reads Q4_0 and IQ4_NL records");
    using L = r8_q32_layout<T>;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i lut = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)tsr_impl::iq4nl_values)),
                                         _mm512_set1_epi8((char)0x80));
    /* the quads of y.qs each chunk pair multiplies: low nibbles of chunks 0,1 and 2,3, high of 0,1 and 2,3 */
    const __m512i sel_lo01 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i sel_lo23 = _mm512_add_epi32(sel_lo01, _mm512_set1_epi32(2));
    const __m512i sel_hi01 = _mm512_add_epi32(sel_lo01, _mm512_set1_epi32(4));
    const __m512i sel_hi23 = _mm512_add_epi32(sel_lo01, _mm512_set1_epi32(6));
    const int32_t offset = T == TSR_TYPE_Q4_0 ? 8 : 128;
    const matvec_prefetcher<T, L::bytes, true> prefetch;
    __m512 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const __m512i yv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y[b].qs));
        const __m512i ylo01 = _mm512_permutexvar_epi32(sel_lo01, yv), ylo23 = _mm512_permutexvar_epi32(sel_lo23, yv);
        const __m512i yhi01 = _mm512_permutexvar_epi32(sel_hi01, yv), yhi23 = _mm512_permutexvar_epi32(sel_hi23, yv);
        const __m512i bias = _mm512_maskz_set1_epi32(0x00FF, -offset * y[b].sum);
        const __m512 yd = _mm512_set1_ps(y[b].d);
        TSR_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            const uint8_t * rec = grp + (size_t)g * gstride + (size_t)b * L::bytes;
            prefetch((const char *)rec);
            const __m512i q01 = _mm512_loadu_si512((const void *)(rec + L::qs_at));
            const __m512i q23 = _mm512_loadu_si512((const void *)(rec + L::qs_at + 64));
            __m512i lo01 = _mm512_and_si512(q01, m4), hi01 = _mm512_and_si512(_mm512_srli_epi16(q01, 4), m4);
            __m512i lo23 = _mm512_and_si512(q23, m4), hi23 = _mm512_and_si512(_mm512_srli_epi16(q23, 4), m4);
            if (T == TSR_TYPE_IQ4_NL) {
                lo01 = _mm512_shuffle_epi8(lut, lo01);
                hi01 = _mm512_shuffle_epi8(lut, hi01);
                lo23 = _mm512_shuffle_epi8(lut, lo23);
                hi23 = _mm512_shuffle_epi8(lut, hi23);
            }
            __m512i s = _mm512_dpbusd_epi32(bias, lo01, ylo01);
            s = _mm512_dpbusd_epi32(s, lo23, ylo23);
            s = _mm512_dpbusd_epi32(s, hi01, yhi01);
            s = _mm512_dpbusd_epi32(s, hi23, yhi23);
            const __m512 d = _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)rec)));
            acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, yd), acc[g]);
        }
    }
    r8_store_halves_zmm<G>(acc, out);
}

TSR_SIMD_WARNINGS_ON
#endif

/* ---- Q4_K and Q5_K: records of 8 rows' super-blocks against Q8_K activations ----------- */

/* The reference: per super-block and row, the exact int32 sums of scale x level x y over
 * the 8 sub-blocks and of min x the activations' sums of 32 (their sums of 16 added), each
 * scaled in float by d * y.d and dmin * y.d, as the plain Q4_K / Q5_K dots do. */
template <bool Q5>
static void r8_k4_group_dot_scalar(const uint8_t * grp, int64_t nb, const tsr_block_q8_K * y, float * out) {
    float acc[R8] = {};
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t * rec = grp + (size_t)i * k4_record_bytes(Q5);
        for (int r = 0; r < R8; ++r) {
            int32_t sumi = 0, summ = 0;
            for (int s = 0; s < 8; ++s) {
                int sc, mn;
                q4k_record_scale_min(rec, s, r, &sc, &mn);
                int32_t dot = 0;
                for (int l = 0; l < 32; ++l) dot += k4_record_level<Q5>(rec, 32 * s + l, r) * y[i].qs[32 * s + l];
                sumi += sc * dot;
                summ += mn * (y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]);
            }
            acc[r] += r8_dmin_result(rec, Q4K_R8_DMIN, r, y[i].d, sumi, summ);
        }
    }
    std::memcpy(out, acc, sizeof(acc));
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
TSR_SIMD_WARNINGS_OFF
/* The 8 rows' scales (sm[8s + r]) and mins (sm[64 + 8s + r]) of a Q4_K record as bytes: the
 * low nibbles' planes and the high bits moved to bits 4-5 (16-bit shifts: what crosses a
 * byte is masked off). */
TSR_TARGET_AVX2 static inline __m256i r8_six_bits_avx2(__m256i low, __m256i top) {
    return _mm256_or_si256(_mm256_and_si256(low, _mm256_set1_epi8(0x0F)), _mm256_and_si256(top, _mm256_set1_epi8(0x30)));
}
TSR_TARGET_AVX2 static inline void q4k_record_scales_avx2(const uint8_t * rec, uint8_t * sm) {
    const __m256i low03 = _mm256_loadu_si256((const __m256i *)(rec + Q4K_R8_LOW));
    const __m256i low47 = _mm256_loadu_si256((const __m256i *)(rec + Q4K_R8_LOW + 32));
    const __m256i high = _mm256_loadu_si256((const __m256i *)(rec + Q4K_R8_HIGH));
    _mm256_storeu_si256((__m256i *)sm, r8_six_bits_avx2(low03, _mm256_slli_epi16(high, 4)));
    _mm256_storeu_si256((__m256i *)(sm + 32), r8_six_bits_avx2(low47, high));
    _mm256_storeu_si256((__m256i *)(sm + 64), r8_six_bits_avx2(_mm256_srli_epi16(low03, 4), _mm256_slli_epi16(high, 2)));
    _mm256_storeu_si256((__m256i *)(sm + 96), r8_six_bits_avx2(_mm256_srli_epi16(low47, 4), _mm256_srli_epi16(high, 2)));
}

/* The activations' sums of the 8 sub-blocks of 32, in pairs: word p holds those of
 * sub-blocks 2p and 2p + 1 as int16 (at most 32 * 128). */
TSR_TARGET_AVX2 static inline void q4k_bsum_pairs(const tsr_block_q8_K & y, int32_t * words) {
    _mm_storeu_si128((__m128i *)words, _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y.bsums), _mm_loadu_si128((const __m128i *)y.bsums + 1)));
}

/* The 8 rows' int32 sums over 2 PAIRS sub-blocks of an unsigned byte per sub-block and row
 * (v[8s + r]: Q4_K's and Q2_K's mins) times the activations' sums of those sub-blocks: each
 * vpmaddwd takes a row's two bytes of a pair against the pair's two sums (bsum_pairs[p],
 * int16 each). */
template <int PAIRS>
TSR_TARGET_AVX2 static inline __m256i r8_byte_sums_avx2(const uint8_t * v, const int32_t * bsum_pairs) {
    __m256i s = _mm256_setzero_si256();
    TSR_UNROLL(8)
    for (int p = 0; p < PAIRS; ++p) {
        const __m128i pair = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(v + 16 * p)), _mm_loadl_epi64((const __m128i *)(v + 16 * p + 8)));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_cvtepu8_epi16(pair), _mm256_set1_epi32(bsum_pairs[p])));
    }
    return s;
}

/* Row r's byte of the 8 at v (8-byte aligned) in both int16 halves of int32 lane r, for the
 * vpmaddwd that scales a lane's two int16 sums: one vpshufb of a broadcast load (the byte
 * into the high half of each word and an arithmetic shift when SIGNED). */
template <bool SIGNED>
TSR_TARGET_AVX2 static inline __m256i r8_scale_pairs_avx2(const uint8_t * v) {
    const __m256i bytes = _mm256_castpd_si256(_mm256_broadcast_sd((const double *)(const void *)v));
    if (!SIGNED)
        return _mm256_shuffle_epi8(bytes, _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,
                                                           4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1));
    return _mm256_srai_epi16(_mm256_shuffle_epi8(bytes, _mm256_setr_epi8(-1, 0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3,
                                                                         -1, 4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7)), 8);
}

/* A group's stream of Q4_K / Q5_K records prefetched g_matvec_pf_ahead bytes ahead, spread over
 * the record's 16 steps (a step: the kernel's loads of 64 bytes of nibbles): step s asks for
 * lines s * L / 16 and the next of the L the record spans, so every line is asked for once or
 * twice, each just before a load. Before, a quarter record per sub-block pair (6 lines, 24 in
 * a burst over 4 groups), which the file layout's kernel, run over the same records, outran by
 * 1.07-1.20x from DRAM (5 runs alternating them, 2 threads): spread, the mat-vec is 1.07-1.11x
 * the burst's (4 runs), 0.87-1.07x the read since (paired medians 0.99-1.20). (All 18 lines
 * of a record at once, 72 in a burst, had read 0.81x; no prefetch 0.75x.) Into L2 (T1), as
 * matvec_prefetcher: T0 and T1 alternating in one binary on a 2-core Zen 4 VM, two runs,
 * paired medians 0.99 -> 1.02 and 0.94 -> 1.07 x the read. */
template <size_t RECORD_BYTES>
struct k4_record_prefetcher {
    static constexpr int lines = (int)((RECORD_BYTES + 63) / 64);
    static_assert(lines <= 32, "two lines a step reach every line of at most 32");
    size_t ahead;
    /* step's first line of the record; it and the next are asked for */
    static constexpr int first_line(int step) { return step * lines / 16; }
    TSR_ALWAYS_INLINE void operator()(const uint8_t * rec, int step) const {
        const char * p = (const char *)rec + ahead + 64 * first_line(step);
        prefetch_l2(p);
        prefetch_l2(p + 64);
    }
};
template <bool Q5>
static k4_record_prefetcher<k4_record_bytes(Q5)> k4_record_prefetch() {
    return {g_matvec_pf_ahead.repacked[Q5 ? TSR_TYPE_Q5_K : TSR_TYPE_Q4_K]};
}

/* Bit S of each byte of h at bit 4, the others 0 (one 16-bit shift: what crosses a byte is
 * masked off). */
template <int S>
TSR_TARGET_AVX2 static inline __m256i r8_bit_at_4_avx2(__m256i h) {
    __m256i v = h;
    if constexpr (S < 4) v = _mm256_slli_epi16(h, 4 - S);
    if constexpr (S > 4) v = _mm256_srli_epi16(h, S - 4);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* The same for s known at run time (the panel packers): a shift right by s puts bit s of
 * both bytes of a word at their bit 0, one left by 4 moves it to bit 4. */
TSR_TARGET_AVX2 static inline __m256i r8_bit_at_4_avx2(__m256i h, int s) {
    return _mm256_and_si256(_mm256_slli_epi16(_mm256_srl_epi16(h, _mm_cvtsi32_si128(s)), 4), _mm256_set1_epi8(0x10));
}

/* Sub-blocks 2p and 2p + 1 of G groups' Q4_K or Q5_K (Q5) records into sumi. A chunk is 8
 * rows x 4 weights of both (low and high nibbles, Q5_K's fifth bits from its qh chunk, by
 * shifts of P = p known at compile time), vpmaddubsw against one activation quad broadcast;
 * a sub-block's products add up in int16 over 8 chunks (Q4_K: 16 products of at most
 * 15 * 128 = 30720) or 4 (Q5_K: 8 of at most 31 * 128, 31744) before a vpmaddwd with the
 * rows' scales. */
template <bool Q5, int P, int G, class PREFETCH>
TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE void k4_record_pair_avx2(int p, const uint8_t * const * rec, const uint8_t (*sm)[128], const tsr_block_q8_K & yb,
                                                                  const PREFETCH & prefetch, __m256i * sumi) {
    static_assert(!Q5 || P >= 0, "Q5_K's shifts need the pair at compile time");
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    constexpr int span = Q5 ? 4 : 8;
    TSR_UNROLL(8)
    for (int c0 = 0; c0 < 8; c0 += span) {
        __m256i lo[G], hi[G];
        for (int g = 0; g < G; ++g) lo[g] = hi[g] = _mm256_setzero_si256();
        TSR_UNROLL(8)
        for (int c = c0; c < c0 + span; ++c) {
            int32_t qlo, qhi;
            std::memcpy(&qlo, yb.qs + 64 * p + 4 * c, 4);
            std::memcpy(&qhi, yb.qs + 64 * p + 32 + 4 * c, 4);
            const __m256i ylo = _mm256_set1_epi32(qlo), yhi = _mm256_set1_epi32(qhi);
            for (int g = 0; g < G; ++g) {
                if (c % 2 == 0) prefetch(rec[g], 4 * p + c / 2);
                const __m256i q = _mm256_loadu_si256((const __m256i *)(rec[g] + Q4K_R8_QS + 32 * (8 * p + c)));
                __m256i l = _mm256_and_si256(q, m4), h = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                if constexpr (Q5) {
                    const __m256i fifth = _mm256_loadu_si256((const __m256i *)(rec[g] + Q5K_R8_QH + 32 * c));
                    l = _mm256_or_si256(l, r8_bit_at_4_avx2<2 * P>(fifth));
                    h = _mm256_or_si256(h, r8_bit_at_4_avx2<2 * P + 1>(fifth));
                }
                lo[g] = _mm256_add_epi16(lo[g], _mm256_maddubs_epi16(l, ylo));
                hi[g] = _mm256_add_epi16(hi[g], _mm256_maddubs_epi16(h, yhi));
            }
        }
        for (int g = 0; g < G; ++g)
            sumi[g] = _mm256_add_epi32(sumi[g], _mm256_add_epi32(_mm256_madd_epi16(lo[g], r8_scale_pairs_avx2<false>(sm[g] + 16 * p)),
                                                                 _mm256_madd_epi16(hi[g], r8_scale_pairs_avx2<false>(sm[g] + 16 * p + 8))));
    }
}

/* G groups' 8 rows of Q4_K or Q5_K (Q5) against Q8_K, a lane per row: the 4 sub-block pairs
 * above (a k4_record_prefetcher step every two chunks), the mins against the activations' sums
 * once per record. Q5_K's pairs are unrolled (its shifts immediates: 24.4-25.0 GB/s in cache
 * against 22.6-22.8 with a shift by a register), Q4_K's a loop (unrolled 3-5 % slower). */
template <bool Q5, int G>
TSR_TARGET_AVX2 static void r8_k4_groups_dot_avx2(const uint8_t * grp, size_t gstride, int64_t nb, const tsr_block_q8_K * y, float * out) {
    constexpr size_t rbytes = k4_record_bytes(Q5);
    const auto prefetch = k4_record_prefetch<Q5>();
    __m256 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const tsr_block_q8_K & yb = y[i];
        int32_t bsum_pairs[4];
        q4k_bsum_pairs(yb, bsum_pairs);
        const uint8_t * rec[G];
        alignas(32) uint8_t sm[G][128];
        __m256i sumi[G];
        for (int g = 0; g < G; ++g) {
            rec[g] = grp + (size_t)g * gstride + (size_t)i * rbytes;
            q4k_record_scales_avx2(rec[g], sm[g]);
            sumi[g] = _mm256_setzero_si256();
        }
        if constexpr (Q5) {
            k4_record_pair_avx2<Q5, 0, G>(0, rec, sm, yb, prefetch, sumi);
            k4_record_pair_avx2<Q5, 1, G>(1, rec, sm, yb, prefetch, sumi);
            k4_record_pair_avx2<Q5, 2, G>(2, rec, sm, yb, prefetch, sumi);
            k4_record_pair_avx2<Q5, 3, G>(3, rec, sm, yb, prefetch, sumi);
        } else {
            for (int p = 0; p < 4; ++p) k4_record_pair_avx2<Q5, -1, G>(p, rec, sm, yb, prefetch, sumi);
        }
        const __m256 yd = _mm256_set1_ps(yb.d);
        TSR_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)rec[g])), yd);
            const __m256 dmin = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(rec[g] + Q4K_R8_DMIN))), yd);
            acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[g]), d, acc[g]);
            acc[g] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(r8_byte_sums_avx2<4>(sm[g] + 64, bsum_pairs)), dmin, acc[g]);
        }
    }
    for (int g = 0; g < G; ++g) _mm256_storeu_ps(out + 8 * g, acc[g]);
}

/* The same with vpdpbusd on zmm registers: a load takes two chunks (lanes 0..7 the first's
 * 8 rows, 8..15 the next's) against their two activation quads (one vpermd each from the
 * sub-block pair's 64 activations, shared by the G groups). A lane's sum over a sub-block
 * (16 products of at most 15 * 128) fits int16, so one vpdpwssd with the scale in the low
 * half of each lane (row r's in lanes r and r + 8) scales and accumulates it exactly; the
 * halves are added once at the end. The mins meet the activations' sums the same way: a
 * row's mins of sub-blocks 2p and 2p + 1 in its two lanes, against those sub-blocks' sums. */
/* Row r's byte of the 8 at v in int32 lanes r and r + 8. */
TSR_TARGET_AVX512VNNI static inline __m512i q4k_scales_twice_zmm(const uint8_t * v) {
    uint64_t bytes;
    std::memcpy(&bytes, v, 8);
    return _mm512_cvtepu8_epi32(_mm_set1_epi64x((long long)bytes));
}

template <int G>
TSR_TARGET_AVX512VNNI static void r8_q4k_groups_dot_avx512vnni(const uint8_t * grp, size_t gstride, int64_t nb, const tsr_block_q8_K * y, float * out) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i two_quads = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const auto prefetch = k4_record_prefetch<false>();
    __m512 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const tsr_block_q8_K & yb = y[i];
        int32_t bsum_pairs[4];
        q4k_bsum_pairs(yb, bsum_pairs);
        __m512i bsums[4];  /* sub-block 2p's sum in the low half of lanes 0..7, 2p + 1's in lanes 8..15 */
        TSR_UNROLL(4)
        for (int p = 0; p < 4; ++p) {
            const __m512i v = _mm512_set1_epi32(bsum_pairs[p]);
            bsums[p] = _mm512_mask_srli_epi32(v, 0xFF00, v, 16);
        }
        const uint8_t * rec[G];
        alignas(32) uint8_t sm[G][128];
        __m512i sumi[G], summ[G];
        TSR_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            rec[g] = grp + (size_t)g * gstride + (size_t)i * Q4K_R8_BYTES;
            q4k_record_scales_avx2(rec[g], sm[g]);
            sumi[g] = summ[g] = _mm512_setzero_si512();
            TSR_UNROLL(4)
            for (int p = 0; p < 4; ++p)
                summ[g] = _mm512_dpwssd_epi32(summ[g], _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sm[g] + 64 + 16 * p))), bsums[p]);
        }
        /* A loop, not unrolled: g++ unrolled it by the pragma that stood here (one body of 128
         * vpdpbusd for the 4 groups, scheduled across the sub-block pairs: 82 stack accesses
         * a super-block against 31, prefetches bunched). 2-core Zen 5, builds alternating:
         * in cache, one core, 1.15-1.41 -> 1.53-1.61 x the file layout's kernel (57-70 ->
         * 78-81 GB/s); cpu_bench from DRAM, 2 threads, 0.80 / 0.88 / 0.83 -> 1.25 / 1.00 / 1.02
         * x the read (paired medians 0.89-0.90 -> 1.01-1.25): what earlier notes had called the
         * records' DRAM deficit was, for Q4_K, this body. */
        TSR_UNROLL(1)
        for (int p = 0; p < 4; ++p) {
            /* quads 0..7: sub-block 2p's activations (low nibbles), 8..15: 2p + 1's */
            const __m512i yv = _mm512_loadu_si512((const void *)(yb.qs + 64 * p));
            __m512i lo[G], hi[G];
            for (int g = 0; g < G; ++g) lo[g] = hi[g] = _mm512_setzero_si512();
            TSR_UNROLL(8)
            for (int c = 0; c < 8; c += 2) {
                const __m512i ylo = _mm512_permutexvar_epi32(_mm512_add_epi32(two_quads, _mm512_set1_epi32(c)), yv);
                const __m512i yhi = _mm512_permutexvar_epi32(_mm512_add_epi32(two_quads, _mm512_set1_epi32(8 + c)), yv);
                TSR_UNROLL(8)
                for (int g = 0; g < G; ++g) {
                    prefetch(rec[g], 4 * p + c / 2);
                    const __m512i q = _mm512_loadu_si512((const void *)(rec[g] + Q4K_R8_QS + 32 * (8 * p + c)));
                    lo[g] = _mm512_dpbusd_epi32(lo[g], _mm512_and_si512(q, m4), ylo);
                    hi[g] = _mm512_dpbusd_epi32(hi[g], _mm512_and_si512(_mm512_srli_epi16(q, 4), m4), yhi);
                }
            }
            TSR_UNROLL(8)
            for (int g = 0; g < G; ++g) {
                sumi[g] = _mm512_dpwssd_epi32(sumi[g], lo[g], q4k_scales_twice_zmm(sm[g] + 16 * p));
                sumi[g] = _mm512_dpwssd_epi32(sumi[g], hi[g], q4k_scales_twice_zmm(sm[g] + 16 * p + 8));
            }
        }
        const __m512 yd = _mm512_set1_ps(yb.d);
        TSR_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)rec[g]))), yd);
            const __m512 dmin = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(rec[g] + Q4K_R8_DMIN)))), yd);
            acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[g]), d, acc[g]);
            acc[g] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ[g]), dmin, acc[g]);
        }
    }
    r8_store_halves_zmm<G>(acc, out);
}
TSR_SIMD_WARNINGS_ON
#endif

/* ---- Q4_1, Q5_0, Q5_1: records of 8 rows' blocks of 32 against yq8 activations ---------- */

/* The reference: per block and row, the exact int32 sum of level x y; Q5_0's weights are
 * (level - 16) x d, Q4_1's and Q5_1's level x d + m (m against the activations' sum). */
template <enum tsr_type T>
static void r8_q32_group_dot_scalar(const uint8_t * grp, int64_t nb, const yq8 * y, float * out) {
    using L = r8_q32_layout<T>;
    float acc[R8] = {};
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t * rec = grp + (size_t)b * L::bytes;
        for (int r = 0; r < R8; ++r) {
            int32_t s = 0;
            for (int e = 0; e < 32; ++e) s += q32_record_level<T>(rec, e, r) * y[b].qs[e];
            uint16_t d;
            std::memcpy(&d, rec + 2 * r, 2);
            if (L::has_min) {
                uint16_t m;
                std::memcpy(&m, rec + L::min_at + 2 * r, 2);
                acc[r] += h2f(d) * y[b].d * (float)s + h2f(m) * y[b].d * (float)y[b].sum;
            } else {
                acc[r] += h2f(d) * y[b].d * (float)(s - 16 * y[b].sum);
            }
        }
    }
    std::memcpy(out, acc, sizeof(acc));
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
TSR_SIMD_WARNINGS_OFF
/* Chunk C of a record (8 rows x 4 weights, low nibbles against quad C, high against C + 4)
 * into the int16 sums s16; fifth: the record's fifth-bit chunk (Q5_0 / Q5_1). */
template <enum tsr_type T, int C>
TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE __m256i q32_chunk_avx2(const uint8_t * rec, __m256i fifth, const __m256i * yq, __m256i s16) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i q = _mm256_loadu_si256((const __m256i *)(rec + r8_q32_layout<T>::qs_at + 32 * C));
    __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if constexpr (r8_q32_layout<T>::five) {
        lo = _mm256_or_si256(lo, r8_bit_at_4_avx2<2 * C>(fifth));
        hi = _mm256_or_si256(hi, r8_bit_at_4_avx2<2 * C + 1>(fifth));
    }
    return _mm256_add_epi16(s16, _mm256_add_epi16(_mm256_maddubs_epi16(lo, yq[C]), _mm256_maddubs_epi16(hi, yq[C + 4])));
}

/* G groups' 8 rows, a lane per row: a block's int16 sums go to int32 after all 4 chunks
 * (Q4_1: 16 products of at most 15 * 128 = 30720) or every 2 (5 bits: 8 of at most 31 * 128,
 * 31744); Q5_0's -16 comes back as -16 * sum(y), the mins as m * d_y * sum(y). */
template <enum tsr_type T, int G>
TSR_TARGET_AVX2 static void r8_q32_groups_dot_avx2(const uint8_t * grp, size_t gstride, int64_t nb, const yq8 * y, float * out) {
    using L = r8_q32_layout<T>;
    const __m256i ones = _mm256_set1_epi16(1);
    const matvec_prefetcher<T, L::bytes, true> prefetch;
    __m256 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        __m256i yq[8];
        TSR_UNROLL(8)
        for (int c = 0; c < 8; ++c) {
            int32_t quad;
            std::memcpy(&quad, y[b].qs + 4 * c, 4);
            yq[c] = _mm256_set1_epi32(quad);
        }
        const __m256 yd = _mm256_set1_ps(y[b].d);
        TSR_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            const uint8_t * rec = grp + (size_t)g * gstride + (size_t)b * L::bytes;
            prefetch((const char *)rec);
            const __m256i fifth = L::five ? _mm256_loadu_si256((const __m256i *)(rec + L::qh_at)) : _mm256_setzero_si256();
            __m256i s;
            if constexpr (L::five) {
                const __m256i s01 = q32_chunk_avx2<T, 1>(rec, fifth, yq, q32_chunk_avx2<T, 0>(rec, fifth, yq, _mm256_setzero_si256()));
                const __m256i s23 = q32_chunk_avx2<T, 3>(rec, fifth, yq, q32_chunk_avx2<T, 2>(rec, fifth, yq, _mm256_setzero_si256()));
                s = _mm256_add_epi32(_mm256_madd_epi16(s01, ones), _mm256_madd_epi16(s23, ones));
            } else {
                __m256i s16 = q32_chunk_avx2<T, 1>(rec, fifth, yq, q32_chunk_avx2<T, 0>(rec, fifth, yq, _mm256_setzero_si256()));
                s16 = q32_chunk_avx2<T, 3>(rec, fifth, yq, q32_chunk_avx2<T, 2>(rec, fifth, yq, s16));
                s = _mm256_madd_epi16(s16, ones);
            }
            const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)rec)), yd);
            if constexpr (L::has_min) {
                acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc[g]);
                const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(rec + L::min_at)));
                acc[g] = _mm256_fmadd_ps(m, _mm256_set1_ps(y[b].d * (float)y[b].sum), acc[g]);
            } else {
                acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s, _mm256_set1_epi32(16 * y[b].sum))), d, acc[g]);
            }
        }
    }
    for (int g = 0; g < G; ++g) _mm256_storeu_ps(out + 8 * g, acc[g]);
}
TSR_SIMD_WARNINGS_ON
#endif

/* ---- Q3_K: records of 8 rows' super-blocks against Q8_K activations --------------------- */

/* The reference: per super-block and row, the exact int32 sum over the 16 sub-blocks of
 * (scale - 32) x sum((level - 4) x activation), scaled in float by d * y.d as the plain
 * Q3_K dots do. */
static void r8_q3k_group_dot_scalar(const uint8_t * grp, int64_t nb, const tsr_block_q8_K * y, float * out) {
    float acc[R8] = {};
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t * rec = grp + (size_t)i * Q3K_R8_BYTES;
        for (int r = 0; r < R8; ++r) {
            uint8_t scales[12];
            for (int k = 0; k < 12; ++k) scales[k] = rec[Q3K_R8_SCALES + 8 * k + r];
            int32_t sumi = 0;
            for (int s = 0; s < 16; ++s) {
                int32_t dot = 0;
                for (int e = 16 * s; e < 16 * s + 16; ++e) dot += (q3k_record_level(rec, e, r) - 4) * y[i].qs[e];
                sumi += tsr_impl::q3k_scale(s, scales) * dot;
            }
            uint16_t d;
            std::memcpy(&d, rec + 2 * r, 2);
            acc[r] += h2f(d) * y[i].d * (float)sumi;
        }
    }
    std::memcpy(out, acc, sizeof(acc));
}

/* Q2_K's reference: per super-block and row, the exact int32 sums of scale x level x y over
 * the 16 sub-blocks and of min x the activations' sums of 16, scaled in float by d * y.d
 * and dmin * y.d as the plain Q2_K dots do. */
static void r8_q2k_group_dot_scalar(const uint8_t * grp, int64_t nb, const tsr_block_q8_K * y, float * out) {
    float acc[R8] = {};
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t * rec = grp + (size_t)i * Q2K_R8_BYTES;
        for (int r = 0; r < R8; ++r) {
            int32_t sumi = 0, summ = 0;
            for (int s = 0; s < 16; ++s) {
                const int sc = rec[Q2K_R8_SCALES + 8 * s + r];
                int32_t dot = 0;
                for (int e = 16 * s; e < 16 * s + 16; ++e) dot += q2k_record_level(rec, e, r) * y[i].qs[e];
                sumi += (sc & 15) * dot;
                summ += (sc >> 4) * y[i].bsums[s];
            }
            acc[r] += r8_dmin_result(rec, Q2K_R8_DMIN, r, y[i].d, sumi, summ);
        }
    }
    std::memcpy(out, acc, sizeof(acc));
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
TSR_SIMD_WARNINGS_OFF

/* The 8 rows' 16 scales of a Q3_K record as unsigned 6-bit bytes (the format's scale plus
 * 32), scales 4q..4q + 3 in v[q] at byte 8 (s - 4q) + r: the low-nibble plane (scale bytes
 * 0..7: scales s and s + 8) with the high-bit plane (bytes 8..11) moved to bits 4-5 by
 * 16-bit shifts (what crosses a byte is masked off). */
TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE void q3k_record_scale_bytes_avx2(const uint8_t * rec, __m256i v[4]) {
    const __m256i low03 = _mm256_loadu_si256((const __m256i *)(rec + Q3K_R8_SCALES));
    const __m256i low47 = _mm256_loadu_si256((const __m256i *)(rec + Q3K_R8_SCALES + 32));
    const __m256i high = _mm256_loadu_si256((const __m256i *)(rec + Q3K_R8_SCALES + 64));
    /* scales 0..3 take bits 0-1 of the high bytes, 4..7 bits 2-3, 8..11 bits 4-5, 12..15 bits 6-7 */
    v[0] = r8_six_bits_avx2(low03, _mm256_slli_epi16(high, 4));
    v[1] = r8_six_bits_avx2(low47, _mm256_slli_epi16(high, 2));
    v[2] = r8_six_bits_avx2(_mm256_srli_epi16(low03, 4), high);
    v[3] = r8_six_bits_avx2(_mm256_srli_epi16(low47, 4), _mm256_srli_epi16(high, 2));
}

/* The 8 rows' 16 scales of a Q3_K record, minus 32, as int8 sc[8s + r]. */
TSR_TARGET_AVX2 static inline void q3k_record_scales_avx2(const uint8_t * rec, int8_t * sc) {
    __m256i v[4];
    q3k_record_scale_bytes_avx2(rec, v);
    TSR_UNROLL(4)
    for (int q = 0; q < 4; ++q) _mm256_store_si256((__m256i *)(sc + 32 * q), _mm256_sub_epi8(v[q], _mm256_set1_epi8(32)));
}

/* Row r's 8 levels per lane of a Q3_K record's chunk triple abc: v[q] holds quad q's (lane r
 * row r's 4 weights 4q..4q+3 of the triple's 32), as unsigned bytes 0..7. Quads 0..5 take a
 * mask and at most a shift; quads 6 and 7 gather bits 3 and 7 of A, B, C into one byte's
 * nibbles (16-bit shifts: what crosses a byte is masked off). */
TSR_TARGET_AVX2 static TSR_ALWAYS_INLINE void q3k_triple_levels_avx2(const uint8_t * abc, __m256i v[8]) {
    const __m256i m7 = _mm256_set1_epi8(7);
    const __m256i a = _mm256_loadu_si256((const __m256i *)abc), b = _mm256_loadu_si256((const __m256i *)(abc + Q3K_R8_CHUNK_STRIDE)),
                  c = _mm256_loadu_si256((const __m256i *)(abc + 2 * Q3K_R8_CHUNK_STRIDE));
    v[0] = _mm256_and_si256(a, m7);
    v[1] = _mm256_and_si256(_mm256_srli_epi16(a, 4), m7);
    v[2] = _mm256_and_si256(b, m7);
    v[3] = _mm256_and_si256(_mm256_srli_epi16(b, 4), m7);
    v[4] = _mm256_and_si256(c, m7);
    v[5] = _mm256_and_si256(_mm256_srli_epi16(c, 4), m7);
    const __m256i top = _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 3), _mm256_set1_epi8(0x11)),
                                                        _mm256_and_si256(_mm256_srli_epi16(b, 2), _mm256_set1_epi8(0x22))),
                                        _mm256_and_si256(_mm256_srli_epi16(c, 1), _mm256_set1_epi8(0x44)));
    v[6] = _mm256_and_si256(top, m7);
    v[7] = _mm256_srli_epi16(_mm256_andnot_si256(m7, top), 4);
}

/* G groups' 8 rows of Q3_K against Q8_K on ymm registers, a lane per row. Triple j's quads
 * 0..3 (4..7) against the activation quads y.qs[32j + 4q) are sub-block 2j (2j + 1): four
 * vpmaddubsw (unsigned levels; pairs at most 2 * 7 * 127) add up in int16, and one vpmaddwd
 * with the rows' scales (row r's in both halves of lane r, spread by one shuffle from a
 * broadcast load) takes the sub-block to int32. The levels are the weights plus 4, so the
 * int16 sums start at -4 x the activations' sum of the sub-block (in the low word of each
 * lane, shared by the groups): at most 4 * 16 * 128 + 4 * 2 * 7 * 128 = 15360 on the way. */
template <int G>
TSR_TARGET_AVX2 static void r8_q3k_groups_dot_avx2(const uint8_t * grp, size_t gstride, int64_t nb, const tsr_block_q8_K * y, float * out) {
    const matvec_prefetcher<TSR_TYPE_Q3_K, Q3K_R8_BYTES / 4, true> prefetch;
    __m256 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const tsr_block_q8_K & yb = y[i];
        const uint8_t * rec[G];
        alignas(32) uint8_t sc[G][128];
        __m256i sumi[G];
        TSR_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            rec[g] = grp + (size_t)g * gstride + (size_t)i * Q3K_R8_BYTES;
            q3k_record_scales_avx2(rec[g], (int8_t *)sc[g]);
            sumi[g] = _mm256_setzero_si256();
        }
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
            if (j % 2 == 0)
                for (int g = 0; g < G; ++g) prefetch((const char *)rec[g] + Q3K_R8_BYTES / 4 * (j / 2));
            __m256i yq[8];  /* vbroadcastss: a load, where a move and vpbroadcastd took a shuffle too */
            TSR_UNROLL(8)
            for (int q = 0; q < 8; ++q) yq[q] = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(const void *)(yb.qs + 32 * j + 4 * q)));
            const __m256i off_lo = _mm256_set1_epi32((uint16_t)(-4 * yb.bsums[2 * j])), off_hi = _mm256_set1_epi32((uint16_t)(-4 * yb.bsums[2 * j + 1]));
            TSR_UNROLL(8)
            for (int g = 0; g < G; ++g) {
                __m256i v[8];
                q3k_triple_levels_avx2(rec[g] + q3k_triple_at(j), v);
                __m256i lo = off_lo, hi = off_hi;
                TSR_UNROLL(4)
                for (int q = 0; q < 4; ++q) {
                    lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(v[q], yq[q]));
                    hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(v[q + 4], yq[q + 4]));
                }
                sumi[g] = _mm256_add_epi32(sumi[g], _mm256_add_epi32(_mm256_madd_epi16(lo, r8_scale_pairs_avx2<true>(sc[g] + 16 * j)),
                                                                     _mm256_madd_epi16(hi, r8_scale_pairs_avx2<true>(sc[g] + 16 * j + 8))));
            }
        }
        const __m256 yd = _mm256_set1_ps(yb.d);
        for (int g = 0; g < G; ++g)
            acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[g]), _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)rec[g])), yd), acc[g]);
    }
    for (int g = 0; g < G; ++g) _mm256_storeu_ps(out + 8 * g, acc[g]);
}

/* G groups' 8 rows of Q2_K against Q8_K on ymm registers, a lane per row. The record's qs
 * chunks are 32 bytes apart, and chunks 4u..4u+3 at level j (bits 2j) are the 8 rows' 16
 * weights of one sub-block, s = 8 (u / 2) + 2j + u % 2, against activation quads
 * y.qs[128 (u / 2) + 32j + 16 (u % 2) + 4k): four vpmaddubsw add up in int16, and one
 * vpmaddwd with the rows' scales (row r's in both halves of lane r) takes the sub-block to
 * int32. Levels 1 and 2 are not shifted down: masked in place they are 4 and 16 times the
 * level (pairs at most 2 * 12 * 128 and 2 * 48 * 128), so their sub-blocks are 4 and 16 times
 * the exact sums (level 2's four products added two by two: four would pass int16), kept in
 * their own int32 sums and shifted down once per record, exactly. The mins meet the
 * activations' sums of 16 once per record, times dmin. */
template <int G>
TSR_TARGET_AVX2 static void r8_q2k_groups_dot_avx2(const uint8_t * grp, size_t gstride, int64_t nb, const tsr_block_q8_K * y, float * out) {
    const __m256i m0f = _mm256_set1_epi8(0x0F);
    const matvec_prefetcher<TSR_TYPE_Q2_K, Q2K_R8_BYTES / 4, true> prefetch;
    __m256 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const tsr_block_q8_K & yb = y[i];
        int32_t bsum_pairs[8];  /* word p: the sums of sub-blocks 2p and 2p + 1 */
        std::memcpy(bsum_pairs, yb.bsums, sizeof(bsum_pairs));
        const uint8_t * rec[G];
        alignas(32) uint8_t sc[G][128];
        __m256i sumi[G], summ[G], sum4[G], sum16[G];  /* sumi: levels 0 and 3; sum4 / sum16: 4 / 16 x levels 1 / 2 */
        TSR_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            sum4[g] = sum16[g] = _mm256_setzero_si256();
            rec[g] = grp + (size_t)g * gstride + (size_t)i * Q2K_R8_BYTES;
            alignas(32) uint8_t mn[128];
            TSR_UNROLL(4)
            for (int q = 0; q < 4; ++q) {
                const __m256i raw = _mm256_loadu_si256((const __m256i *)(rec[g] + Q2K_R8_SCALES + 32 * q));
                _mm256_store_si256((__m256i *)(sc[g] + 32 * q), _mm256_and_si256(raw, m0f));
                _mm256_store_si256((__m256i *)(mn + 32 * q), _mm256_and_si256(_mm256_srli_epi16(raw, 4), m0f));
            }
            summ[g] = r8_byte_sums_avx2<8>(mn, bsum_pairs);
            sumi[g] = _mm256_setzero_si256();
        }
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) {
            for (int g = 0; g < G; ++g) prefetch((const char *)rec[g] + Q2K_R8_BYTES / 4 * u);
            const int8_t * yu = yb.qs + 128 * (u / 2) + 16 * (u % 2);
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                const __m256i mask = _mm256_set1_epi8((char)(j == 3 ? 3 : 3 << (2 * j)));
                const int s = 8 * (u / 2) + 2 * j + u % 2;
                for (int half = 0; half < (j == 2 ? 2 : 1); ++half) {
                    __m256i sub[G];  /* sub-block s (level 2: half of it) */
                    for (int g = 0; g < G; ++g) sub[g] = _mm256_setzero_si256();
                    const int k_begin = j == 2 ? 2 * half : 0, k_end = j == 2 ? 2 * half + 2 : 4;
#pragma GCC unroll 4
                    for (int k = k_begin; k < k_end; ++k) {
                        /* vbroadcastss: a load, where a move and vpbroadcastd took a shuffle too */
                        const __m256i yq = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(const void *)(yu + 32 * j + 4 * k)));
                        for (int g = 0; g < G; ++g) {
                            const __m256i q = _mm256_loadu_si256((const __m256i *)(rec[g] + Q2K_R8_QS + 32 * (4 * u + k)));
                            const __m256i l = _mm256_and_si256(j == 3 ? _mm256_srli_epi16(q, 6) : q, mask);
                            sub[g] = _mm256_add_epi16(sub[g], _mm256_maddubs_epi16(l, yq));
                        }
                    }
                    for (int g = 0; g < G; ++g) {
                        const __m256i part = _mm256_madd_epi16(sub[g], r8_scale_pairs_avx2<false>(sc[g] + 8 * s));
                        if (j == 1) sum4[g] = _mm256_add_epi32(sum4[g], part);
                        else if (j == 2) sum16[g] = _mm256_add_epi32(sum16[g], part);
                        else sumi[g] = _mm256_add_epi32(sumi[g], part);
                    }
                }
            }
        }
        const __m256 yd = _mm256_set1_ps(yb.d);
        for (int g = 0; g < G; ++g) {
            sumi[g] = _mm256_add_epi32(sumi[g], _mm256_add_epi32(_mm256_srai_epi32(sum4[g], 2), _mm256_srai_epi32(sum16[g], 4)));
            const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)rec[g])), yd);
            acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[g]), d, acc[g]);
            const __m256 dmin = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(rec[g] + Q2K_R8_DMIN))), yd);
            acc[g] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(summ[g]), dmin, acc[g]);
        }
    }
    for (int g = 0; g < G; ++g) _mm256_storeu_ps(out + 8 * g, acc[g]);
}

/* words[32t + 16h + 8k + r]: row r's scale (minus 32) of sub-block 4t + h + 2k in a Q3_K
 * record, from q3k_record_scale_bytes_avx2 (scales 4t..4t + 3 in its v[t], whose middle two
 * qwords swap): the sub-blocks 2j, 2j + 2 (h = 0) and 2j + 1, 2j + 3 (h = 1) of the
 * triple pair j = 2t, 16 words each. */
TSR_TARGET_AVX512VNNI static inline void q3k_record_scale_words_zmm(const uint8_t * rec, int16_t * words) {
    __m256i v[4];
    q3k_record_scale_bytes_avx2(rec, v);
    TSR_UNROLL(4)
    for (int t = 0; t < 4; ++t)
        _mm512_store_si512((void *)(words + 32 * t),
                           _mm512_sub_epi16(_mm512_cvtepu8_epi16(_mm256_permute4x64_epi64(v[t], 0xD8)), _mm512_set1_epi16(32)));
}

/* The 16 words at w as the low halves of int32 lanes (the high halves 0). */
TSR_TARGET_AVX512VNNI static inline __m512i q3k_scale_lanes_zmm(const int16_t * w) {
    return _mm512_cvtepu16_epi32(_mm256_load_si256((const __m256i *)w));
}

/* G groups' 8 rows of Q3_K against Q8_K on zmm registers: triples j and j + 1 side by side
 * (lanes 0..7 triple j's chunk, 8..15 triple j + 1's: the record interleaves them, one load a
 * chunk pair), their levels decoded as q3k_triple_levels_avx2 does (quads 6 and 7 gathered by
 * two vpternlogd), vpdpbusd against the activation quads (one vpermd each, shared by the
 * groups). The levels are the weights plus 4, so each lane's sum over a sub-block starts at
 * -4 x the activations' sum of 16 (a vector shared by the groups), and ends as the sum of the
 * weights' products: at most 16 * 4 * 128, an int16. One vpdpwssd with the signed scale in
 * the low half of each lane (the high half 0) scales it exactly: the scales widen to words
 * once a record (q3k_record_scale_words_zmm), and a vpmovzxwd from them gives a pair of
 * sub-blocks' lanes. */
template <int G>
TSR_TARGET_AVX512VNNI static void r8_q3k_groups_dot_avx512vnni(const uint8_t * grp, size_t gstride, int64_t nb, const tsr_block_q8_K * y, float * out) {
    const matvec_prefetcher<TSR_TYPE_Q3_K, Q3K_R8_BYTES / 4, true> prefetch;
    const __m512i m7 = _mm512_set1_epi8(7), m11 = _mm512_set1_epi8(0x11), m33 = _mm512_set1_epi8(0x33);
    const __m512i two_quads = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8);
    const __m512i two_subs = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    __m512 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const tsr_block_q8_K & yb = y[i];
        /* -4 x the activations' sums of 16, int32 s */
        const __m512i off4 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)yb.bsums)), 2));
        const uint8_t * rec[G];
        alignas(64) int16_t scw[G][128];
        __m512i sumi[G];
        TSR_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            rec[g] = grp + (size_t)g * gstride + (size_t)i * Q3K_R8_BYTES;
            q3k_record_scale_words_zmm(rec[g], scw[g]);
            sumi[g] = _mm512_setzero_si512();
        }
        /* left rolled: fully unrolled (TSR_UNROLL), the record read 0.57-0.70 x the read from DRAM
         * at g++ -O3 against 0.93-1.00 rolled (cpu_bench paired medians, 2-core Zen 5) */
        for (int j = 0; j < 8; j += 2) {
            TSR_UNROLL(8)
            for (int g = 0; g < G; ++g) prefetch((const char *)rec[g] + Q3K_R8_BYTES / 4 * (j / 2));
            const __m512i yv = _mm512_loadu_si512((const void *)(yb.qs + 32 * j));  /* triples j, j + 1's activations */
            __m512i yq[8];
            TSR_UNROLL(8)
            for (int q = 0; q < 8; ++q) yq[q] = _mm512_permutexvar_epi32(_mm512_add_epi32(two_quads, _mm512_set1_epi32(q)), yv);
            /* the offsets of sub-blocks 2j, 2j + 2 (lanes 0..7, 8..15) and 2j + 1, 2j + 3 */
            const __m512i off_lo = _mm512_permutexvar_epi32(_mm512_add_epi32(two_subs, _mm512_set1_epi32(2 * j)), off4);
            const __m512i off_hi = _mm512_permutexvar_epi32(_mm512_add_epi32(two_subs, _mm512_set1_epi32(2 * j + 1)), off4);
            TSR_UNROLL(8)
            for (int g = 0; g < G; ++g) {
                const uint8_t * abc = rec[g] + q3k_triple_at(j);
                const __m512i a = _mm512_loadu_si512((const void *)abc), b = _mm512_loadu_si512((const void *)(abc + Q3K_R8_CHUNK_STRIDE)),
                              c = _mm512_loadu_si512((const void *)(abc + 2 * Q3K_R8_CHUNK_STRIDE));
                /* quads 6 and 7: bits 3 and 7 of A, B, C into bits 0-2 and 4-6 (vpternlogd 0xE4: c ? a : b) */
                const __m512i ab = _mm512_ternarylogic_epi32(_mm512_srli_epi16(a, 3), _mm512_srli_epi16(b, 2), m11, 0xE4);
                const __m512i top = _mm512_ternarylogic_epi32(ab, _mm512_srli_epi16(c, 1), m33, 0xE4);
                __m512i lo = _mm512_dpbusd_epi32(off_lo, _mm512_and_si512(a, m7), yq[0]);
                __m512i hi = _mm512_dpbusd_epi32(off_hi, _mm512_and_si512(c, m7), yq[4]);
                lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(_mm512_srli_epi16(a, 4), m7), yq[1]);
                hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(_mm512_srli_epi16(c, 4), m7), yq[5]);
                lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(b, m7), yq[2]);
                hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(top, m7), yq[6]);
                lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(_mm512_srli_epi16(b, 4), m7), yq[3]);
                hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(_mm512_srli_epi16(top, 4), m7), yq[7]);
                /* lo: sub-blocks 2j (lanes 0..7) and 2j + 2; hi: 2j + 1 and 2j + 3 */
                sumi[g] = _mm512_dpwssd_epi32(sumi[g], lo, q3k_scale_lanes_zmm(scw[g] + 16 * j));
                sumi[g] = _mm512_dpwssd_epi32(sumi[g], hi, q3k_scale_lanes_zmm(scw[g] + 16 * j + 16));
            }
        }
        const __m512 yd = _mm512_set1_ps(yb.d);
        TSR_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)rec[g]))), yd);
            acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[g]), d, acc[g]);
        }
    }
    r8_store_halves_zmm<G>(acc, out);
}

/* Word permutes of a Q2_K record's scale and min words: the 32 bytes of sub-blocks 4k..4k + 3
 * of a half (byte 8s' + r) widened to words, word 8s' + r. q2k_scale_word_index(t): for
 * level pair 2k, 2k + 1 of chunk quad u (t = u % 2), int32 lane q (row r = q % 8) takes 4 x
 * the scale of level 2k (sub-block t; its levels are not times 4: from the first source,
 * the scales times 4) in its low word and the scale of level 2k + 1 (sub-block 2 + t, from
 * the second source) in its high word. q2k_min_word_index: lane r takes row r's mins of
 * sub-blocks 0 and 1, lane 8 + r those of 2 and 3, as its two words. */
TSR_TARGET_AVX512VNNI static inline __m512i q2k_scale_word_index(int t) {
    alignas(64) int16_t idx[32];
    for (int q = 0; q < 16; ++q) {
        idx[2 * q] = (int16_t)(8 * t + q % 8);
        idx[2 * q + 1] = (int16_t)(32 + 8 * (2 + t) + q % 8);
    }
    return _mm512_load_si512((const void *)idx);
}

TSR_TARGET_AVX512VNNI static inline __m512i q2k_min_word_index() {
    alignas(64) int16_t idx[32];
    for (int q = 0; q < 16; ++q) {
        idx[2 * q] = (int16_t)(8 * (2 * (q / 8)) + q % 8);
        idx[2 * q + 1] = (int16_t)(8 * (2 * (q / 8) + 1) + q % 8);
    }
    return _mm512_load_si512((const void *)idx);
}

/* G groups' 8 rows of Q2_K against Q8_K on zmm registers. A load takes two chunks (lanes
 * 0..7 the first chunk's 8 rows, 8..15 the next's); chunks 4u..4u + 3 at level j are the 16
 * weights of one sub-block per row (s = 8 (u / 2) + 2j + u % 2), so two vpdpbusd (against
 * activation quads broadcast by masked dword loads, shared by the G groups) sum a lane's
 * 8 of them: at most 8 * 12 * 128, an int16. Levels j = 1, 3 are masked in place (0x0C:
 * times 4), so the sums of j = 0 and 1 (2 and 3) meet in one int32 lane (j = 0's in the low
 * word, one shift and a blend) and one vpdpwssd multiplies both by their scales (4 x the
 * scale of j = 0, the scale of j = 1: vpermt2w of the record's scale words and the same
 * times 4, once a record). Everything is times 4 and d y.d / 4 takes it off. The mins meet
 * the activations' 16-element sums the same way: a row's mins of two sub-blocks as the two
 * words of a lane, four vpdpwssd a record. Row r sits in lanes r and r + 8, added at the
 * end. Levels by shift and mask: gf2p8affineqb runs on the ports of vpdpbusd (2 a cycle on
 * Zen 5, where the mask takes any of 4), which the per-level scales (a vpdpwssd and a
 * widening per level and chunk quad) also loaded. One core, in cache (cpu_bench, 2-core
 * Zen 5): 40.1-43.1 GB/s against 34.6 for that kernel and 34.4 for the file layout's
 * (k2_rows_avx512). */
template <int G>
TSR_TARGET_AVX512VNNI static void r8_q2k_groups_dot_avx512vnni(const uint8_t * grp, size_t gstride, int64_t nb, const tsr_block_q8_K * y, float * out) {
    const __m512i m3 = _mm512_set1_epi8(3), m12 = _mm512_set1_epi8(12), low4 = _mm512_set1_epi16(0x0F);
    const __m512i sc_idx[2] = {q2k_scale_word_index(0), q2k_scale_word_index(1)}, mn_idx = q2k_min_word_index();
    const matvec_prefetcher<TSR_TYPE_Q2_K, Q2K_R8_BYTES / 4, true> prefetch;
    __m512 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const tsr_block_q8_K & yb = y[i];
        const auto quad = [&yb](int k) { int32_t v; std::memcpy(&v, yb.qs + 4 * k, 4); return v; };  /* activation quad k */
        int32_t bs[8];  /* sub-blocks 2p and 2p + 1's sums as the two int16 words of bs[p] */
        std::memcpy(bs, yb.bsums, sizeof(bs));
        __m512i bsv[4];  /* sub-blocks 4hk, 4hk + 1 (lanes 0..7) and 4hk + 2, 4hk + 3 (8..15) */
        for (int hk = 0; hk < 4; ++hk) bsv[hk] = _mm512_mask_set1_epi32(_mm512_set1_epi32(bs[2 * hk]), 0xFF00, bs[2 * hk + 1]);
        const uint8_t * rec[G];
        __m512i sw[G][8];  /* scale words of chunk quad u, level pair jp: sw[g][2u + jp] */
        __m512i sumi[G], summ[G];
        TSR_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            rec[g] = grp + (size_t)g * gstride + (size_t)i * Q2K_R8_BYTES;
            sumi[g] = summ[g] = _mm512_setzero_si512();
            TSR_UNROLL(4)
            for (int hk = 0; hk < 4; ++hk) {  /* sub-blocks 4hk..4hk + 3: half h = hk / 2, level pair k = hk % 2 */
                const int h = hk / 2, k = hk % 2;
                const __m512i w = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(rec[g] + Q2K_R8_SCALES + 32 * hk)));
                const __m512i sc = _mm512_and_si512(w, low4), sc4 = _mm512_slli_epi16(sc, 2);
                for (int t = 0; t < 2; ++t) sw[g][2 * (2 * h + t) + k] = _mm512_permutex2var_epi16(sc4, sc_idx[t], sc);
                summ[g] = _mm512_dpwssd_epi32(summ[g], _mm512_permutexvar_epi16(mn_idx, _mm512_srli_epi16(w, 4)), bsv[hk]);
            }
        }
        /* unrolled: constant activation offsets (the loop's index arithmetic took ~40 scalar instructions a step) */
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) {
            /* a quarter record per chunk quad (g_matvec_pf_ahead), as Q4_K's record */
            TSR_UNROLL(8)
            for (int g = 0; g < G; ++g) prefetch((const char *)rec[g] + Q2K_R8_BYTES / 4 * u);
            const int h = u / 2, t = u % 2;
            __m512i ya[4], yc[4];  /* level j's activation quads of chunks 4u, 4u + 1 and 4u + 2, 4u + 3 */
            TSR_UNROLL(4)
            for (int j = 0; j < 4; ++j) {
                const int k = 32 * h + 8 * j + 4 * t;
                ya[j] = _mm512_mask_set1_epi32(_mm512_set1_epi32(quad(k)), 0xFF00, quad(k + 1));
                yc[j] = _mm512_mask_set1_epi32(_mm512_set1_epi32(quad(k + 2)), 0xFF00, quad(k + 3));
            }
            TSR_UNROLL(8)
            for (int g = 0; g < G; ++g) {
                const uint8_t * qa = rec[g] + Q2K_R8_QS + 32 * (4 * u);
                const __m512i va = _mm512_loadu_si512((const void *)qa), vc = _mm512_loadu_si512((const void *)(qa + 64));
                const __m512i a[2] = {va, _mm512_srli_epi16(va, 4)}, c[2] = {vc, _mm512_srli_epi16(vc, 4)};
                __m512i dot[4];  /* level j: bits 2j, 2j + 1 of the bytes (odd j: masked in place, times 4) */
#pragma GCC unroll 4
                for (int j = 0; j < 4; ++j) {
                    const __m512i mask = j % 2 ? m12 : m3;
                    dot[j] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(a[j / 2], mask), ya[j]),
                                                 _mm512_and_si512(c[j / 2], mask), yc[j]);
                }
                for (int jp = 0; jp < 2; ++jp) {
                    const __m512i both = _mm512_mask_blend_epi16(0xAAAAAAAAu, dot[2 * jp], _mm512_slli_epi32(dot[2 * jp + 1], 16));
                    sumi[g] = _mm512_dpwssd_epi32(sumi[g], both, sw[g][2 * u + jp]);
                }
            }
        }
        const __m512 yd = _mm512_set1_ps(yb.d), yd4 = _mm512_set1_ps(0.25f * yb.d);  /* the level sums are times 4 */
        TSR_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)rec[g]))), yd4);
            const __m512 dmin = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(rec[g] + Q2K_R8_DMIN)))), yd);
            acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[g]), d, acc[g]);
            acc[g] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ[g]), dmin, acc[g]);
        }
    }
    r8_store_halves_zmm<G>(acc, out);
}
TSR_SIMD_WARNINGS_ON
#endif

/* The ISA's mat-vec kernels for an r8 matrix: one group, and `streams` groups at once,
 * walked side by side by r8_gemv: a few sequential streams keep enough DRAM reads in flight
 * for one core (as the plain dots' four rows), and share the activations. */
template <class Y>
struct r8_dots_of {
    r8_dot_fn_of<Y> one;
    r8_dot_fn_of<Y> multi;
    int streams;
};
typedef r8_dots_of<yq8> r8_dots;
enum { R8_MAX_STREAMS = 4 };

template <enum tsr_type T>
static r8_dots r8_dots_of_type() {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    const int isa = isa_vector();
    if (isa == TSR_CPU_ISA_AVX512 && features().avx512_vnni) return {r8_groups_dot_avx512vnni<T, 1>, r8_groups_dot_avx512vnni<T, 4>, 4};
    /* 16 ymm registers: the 8 activation quads and 2 groups' work fit, 4 groups' spill */
    if (isa == TSR_CPU_ISA_AVX2 || isa == TSR_CPU_ISA_AVX512) return {r8_groups_dot_avx2<T, 1>, r8_groups_dot_avx2<T, 2>, 2};
#endif
    return {r8_groups_dot_scalar<yq8, r8_group_dot_scalar<T>, 1>, r8_groups_dot_scalar<yq8, r8_group_dot_scalar<T>, 4>, 4};
}

/* Q4_1, Q5_0, Q5_1: the AVX2 kernel wherever AVX2 is (CPUs with AVX-512 keep their file
 * layouts; the AVX-512 path reads a record only when a test asks for it). */
template <enum tsr_type T>
static r8_dots r8_q32_dots() {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    const int isa = isa_vector();
    if (isa == TSR_CPU_ISA_AVX2 || isa == TSR_CPU_ISA_AVX512) return {r8_q32_groups_dot_avx2<T, 1>, r8_q32_groups_dot_avx2<T, 2>, 2};
#endif
    return {r8_groups_dot_scalar<yq8, r8_q32_group_dot_scalar<T>, 1>, r8_groups_dot_scalar<yq8, r8_q32_group_dot_scalar<T>, 4>, 4};
}

static r8_dots r8_dots_for(enum tsr_type t) {
    switch (t) {
        case TSR_TYPE_Q4_0: return r8_dots_of_type<TSR_TYPE_Q4_0>();
        case TSR_TYPE_Q4_1: return r8_q32_dots<TSR_TYPE_Q4_1>();
        case TSR_TYPE_Q5_0: return r8_q32_dots<TSR_TYPE_Q5_0>();
        case TSR_TYPE_Q5_1: return r8_q32_dots<TSR_TYPE_Q5_1>();
        default: return r8_dots_of_type<TSR_TYPE_IQ4_NL>();
    }
}

static r8_dots_of<tsr_block_q8_K> r8_q4k_dots() {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    const int isa = isa_vector();
    if (isa == TSR_CPU_ISA_AVX512 && features().avx512_vnni) return {r8_q4k_groups_dot_avx512vnni<1>, r8_q4k_groups_dot_avx512vnni<4>, 4};
    if (isa == TSR_CPU_ISA_AVX2 || isa == TSR_CPU_ISA_AVX512) return {r8_k4_groups_dot_avx2<false, 1>, r8_k4_groups_dot_avx2<false, 2>, 2};
#endif
    return {r8_groups_dot_scalar<tsr_block_q8_K, r8_k4_group_dot_scalar<false>, 1>, r8_groups_dot_scalar<tsr_block_q8_K, r8_k4_group_dot_scalar<false>, 4>, 4};
}

/* Q5_K: the AVX2 kernel wherever AVX2 is (CPUs with AVX-512 keep Q5_K in the file layout). */
static r8_dots_of<tsr_block_q8_K> r8_q5k_dots() {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    const int isa = isa_vector();
    if (isa == TSR_CPU_ISA_AVX2 || isa == TSR_CPU_ISA_AVX512) return {r8_k4_groups_dot_avx2<true, 1>, r8_k4_groups_dot_avx2<true, 2>, 2};
#endif
    return {r8_groups_dot_scalar<tsr_block_q8_K, r8_k4_group_dot_scalar<true>, 1>, r8_groups_dot_scalar<tsr_block_q8_K, r8_k4_group_dot_scalar<true>, 4>, 4};
}

/* Q3_K (Q3) or Q2_K (also on AVX2). f: the CPU's features (tests pass fewer, to reach the
 * kernel a CPU without GFNI runs). */
template <bool Q3>
static r8_dots_of<tsr_block_q8_K> r8_k2_dots(const cpu_features & f = features()) {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    const int isa = isa_vector();
    if (!Q3 && isa == TSR_CPU_ISA_AVX512 && f.avx512_vnni) {
        return {r8_q2k_groups_dot_avx512vnni<1>, r8_q2k_groups_dot_avx512vnni<4>, 4};
    }
    if (Q3 && isa == TSR_CPU_ISA_AVX512 && f.avx512_vnni) return {r8_q3k_groups_dot_avx512vnni<1>, r8_q3k_groups_dot_avx512vnni<4>, 4};
    if (Q3 && (isa == TSR_CPU_ISA_AVX2 || isa == TSR_CPU_ISA_AVX512)) return {r8_q3k_groups_dot_avx2<1>, r8_q3k_groups_dot_avx2<2>, 2};
    if (isa == TSR_CPU_ISA_AVX2 || isa == TSR_CPU_ISA_AVX512) return {r8_q2k_groups_dot_avx2<1>, r8_q2k_groups_dot_avx2<2>, 2};
#endif
    (void)f;
    constexpr auto dot = Q3 ? r8_q3k_group_dot_scalar : r8_q2k_group_dot_scalar;
    return {r8_groups_dot_scalar<tsr_block_q8_K, dot, 1>, r8_groups_dot_scalar<tsr_block_q8_K, dot, 4>, 4};
}

/* Results o of the group at row g0 stored for the rows of [m0, m1) in column n. */
static void r8_store_group(const r8_gemv_args & a, int64_t n, int64_t g0, int64_t m0, int64_t m1, const float * o) {
    float * c = a.C + (size_t)n * a.ldc;
    TSR_UNROLL(8)
    for (int r = 0; r < R8; ++r)
        if (g0 + r >= m0 && g0 + r < m1) c[g0 + r] = o[r];
}

/* Rows [m0, m1) (whole groups but for the ends), nb records a group, columns innermost so
 * the groups stay in cache while every column passes. The groups are cut into dots.streams
 * equal parts walked side by side; those left over go one at a time (the same arithmetic
 * per group). */
template <class Y>
static void r8_gemv_with(const r8_dots_of<Y> & dots, int64_t nb, const r8_gemv_args & a, int64_t m0, int64_t m1) {
    const int64_t first = m0 / R8 * R8, ngroups = (m1 - first + R8 - 1) / R8;
    const int64_t part = ngroups / dots.streams;
    const size_t pstride = (size_t)(part * R8) * a.lda;
    for (int64_t i = 0; i < part; ++i) {
        const int64_t g0 = first + i * R8;
        for (int64_t n = 0; n < a.N; ++n) {
            float o[R8_MAX_STREAMS * R8];
            dots.multi(a.A + (size_t)g0 * a.lda, pstride, nb, (const Y *)(a.B + (size_t)n * a.ldb), o);
            for (int s = 0; s < dots.streams; ++s) r8_store_group(a, n, g0 + s * part * R8, m0, m1, o + s * R8);
        }
    }
    for (int64_t g0 = first + dots.streams * part * R8; g0 < m1; g0 += R8) {
        for (int64_t n = 0; n < a.N; ++n) {
            float o[R8];
            dots.one(a.A + (size_t)g0 * a.lda, 0, nb, (const Y *)(a.B + (size_t)n * a.ldb), o);
            r8_store_group(a, n, g0, m0, m1, o);
        }
    }
}

/* The 32-weight types against yq8 columns, the K-quants against Q8_K (the activations mul_mat
 * quantizes for each type's dots). */
static void r8_gemv(enum tsr_type t, const r8_gemv_args & a, int64_t m0, int64_t m1) {
    if (t == TSR_TYPE_Q4_K) return r8_gemv_with(r8_q4k_dots(), a.K / TSR_QK_K, a, m0, m1);
    if (t == TSR_TYPE_Q5_K) return r8_gemv_with(r8_q5k_dots(), a.K / TSR_QK_K, a, m0, m1);
    if (t == TSR_TYPE_Q3_K) return r8_gemv_with(r8_k2_dots<true>(), a.K / TSR_QK_K, a, m0, m1);
    if (t == TSR_TYPE_Q2_K) return r8_gemv_with(r8_k2_dots<false>(), a.K / TSR_QK_K, a, m0, m1);
    r8_gemv_with(r8_dots_for(t), a.K / 32, a, m0, m1);
}

/* ---- GEMM A panels from groups ----------------------------------------------------------- */

/* The lines of bytes [at, at + n) of the next group's records (the group lda x 8 bytes past
 * rec), prefetched while a packer reads this group's: a panel reads only kc weights of each
 * group, too few for the hardware prefetcher to follow (as pack_panel_i8_avx2's prefetch of
 * the rows ahead). Addresses as integers: past the matrix no pointer is formed, and a
 * prefetch never faults. */
static TSR_ALWAYS_INLINE void r8_prefetch_next_group(const uint8_t * rec, size_t lda, size_t at, size_t n) {
    const uintptr_t p = (uintptr_t)rec + (uintptr_t)R8 * lda + at;
    for (uintptr_t a = p & ~(uintptr_t)63; a < p + n; a += 64) __builtin_prefetch((const void *)a, 0, 3);
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
/* One record (8 rows x 32 weights of a group) into rows r0..r0+8 of an R-row panel: the 8
 * scales as floats (one vcvtph2ps, exact as h2f), each chunk's low and high nibbles to the
 * panel's quads c and c + 4 (Q4_0: minus x, 0 or 8; IQ4_NL: the table's values XOR-ed with x).
 * Only the x86 GEMMs (AVX2 and up) take their panels from the layout. */
template <enum tsr_type T>
TSR_TARGET_AVX2 static void r8_record_to_panel_avx2(const uint8_t * rec, uint8_t x, int R, uint8_t * q, float * sc) {
    _mm256_storeu_ps(sc, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)rec)));
    const __m256i lut = _mm256_xor_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tsr_impl::iq4nl_values)),
                                         _mm256_set1_epi8((char)x));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    TSR_UNROLL(4)
    for (int c = 0; c < 4; ++c) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(rec + 16 + 32 * c));
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if (T == TSR_TYPE_IQ4_NL) {
            lo = _mm256_shuffle_epi8(lut, lo);
            hi = _mm256_shuffle_epi8(lut, hi);
        } else {
            lo = _mm256_sub_epi8(lo, _mm256_set1_epi8((char)x));
            hi = _mm256_sub_epi8(hi, _mm256_set1_epi8((char)x));
        }
        _mm256_storeu_si256((__m256i *)(q + (size_t)c * R * 4), lo);
        _mm256_storeu_si256((__m256i *)(q + (size_t)(c + 4) * R * 4), hi);
    }
}
#endif

/* The same in any build (a byte at a time where there is no AVX2). */
template <enum tsr_type T>
static void r8_record_to_panel(const uint8_t * rec, uint8_t x, int R, uint8_t * q, float * sc) {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    r8_record_to_panel_avx2<T>(rec, x, R, q, sc);
#else
    for (int r = 0; r < R8; ++r) {
        uint16_t h;
        std::memcpy(&h, rec + 2 * r, 2);
        sc[r] = h2f(h);
    }
    for (int c = 0; c < 4; ++c)
        for (int j = 0; j < 32; ++j) {
            const uint8_t v = rec[16 + 32 * c + j];
            uint8_t * lo = q + (size_t)c * R * 4, * hi = q + (size_t)(c + 4) * R * 4;
            lo[j] = T == TSR_TYPE_Q4_0 ? (uint8_t)((v & 0x0F) - x) : (uint8_t)tsr_impl::iq4nl_values[v & 0x0F] ^ x;
            hi[j] = T == TSR_TYPE_Q4_0 ? (uint8_t)((v >> 4) - x) : (uint8_t)tsr_impl::iq4nl_values[v >> 4] ^ x;
        }
#endif
}

/* The panel layout of pack_panel_i8_avx2 (pack_x86.inl) for R rows from whole groups (row0 a
 * multiple of 8, rows whole groups): Q4_0's nibbles minus XOR (0: as they are, 8: signed
 * levels, as that packer's SUB); IQ4_NL's table values, XOR-ed with XOR (0x80 where the GEMM
 * takes them offset to unsigned). Pads as that packer. */
template <int R, enum tsr_type T, uint8_t XOR>
static void r8_pack_panel(const uint8_t * A, size_t lda, int64_t row0, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    static_assert(R % R8 == 0, "panels of whole groups");
    uint8_t * d = (uint8_t *)dst;
    const int nb = kc / 32;
    const int64_t b0 = k0 / 32, nbk = K / 32;
    const uint8_t pad = T == TSR_TYPE_Q4_0 ? (uint8_t)(8 - XOR) : XOR;
    for (int b = 0; b < nb; ++b) {
        uint8_t * q = d + (size_t)b * R * 36;
        float * sc = (float *)(q + R * 32);
        for (int r0 = 0; r0 < R; r0 += R8) {
            if (r0 < rows && b0 + b < nbk) {
                const uint8_t * rec = A + (size_t)(row0 + r0) * lda + (size_t)(b0 + b) * R8_BLOCK_BYTES;
                r8_prefetch_next_group(rec, lda, 0, R8_BLOCK_BYTES);
                r8_record_to_panel<T>(rec, XOR, R, q + r0 * 4, sc + r0);
                continue;
            }
            std::fill(sc + r0, sc + r0 + R8, 0.0f);
            for (int c = 0; c < 8; ++c) std::memset(q + ((size_t)c * R + r0) * 4, pad, 32);
        }
    }
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
/* Sub-block s of a Q4_K / Q5_K (Q5) record into rows r0..r0+8 of an R-row min panel (pack.inl:
 * the quads, R scales d * sc, R mins dmin * mn): its pair's 8 chunks, low or high nibbles
 * (Q5_K: with bit s of the qh chunks at bit 4), stored whole as quads 0..7; scales and mins
 * rounded once from the fp16 and the integer, as the file packer (min_block_avx2) rounds
 * them. */
/* 8 fp16 times 8 unsigned bytes as floats, one rounding each. */
TSR_TARGET_AVX2 static inline __m256 fp16_times_bytes_avx2(const uint8_t * fp16, const uint8_t * bytes) {
    return _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)fp16)),
                         _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)bytes))));
}

template <int R, bool Q5>
TSR_TARGET_AVX2 static void k4_record_to_min_panel_avx2(const uint8_t * rec, int s, uint8_t * q, float * sc, float * mn) {
    alignas(32) uint8_t sm[128];
    q4k_record_scales_avx2(rec, sm);
    _mm256_storeu_ps(sc, fp16_times_bytes_avx2(rec, sm + 8 * s));
    _mm256_storeu_ps(mn, fp16_times_bytes_avx2(rec + Q4K_R8_DMIN, sm + 64 + 8 * s));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const uint8_t * chunks = rec + Q4K_R8_QS + 32 * 8 * (s / 2);
    TSR_UNROLL(8)
    for (int c = 0; c < 8; ++c) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(chunks + 32 * c));
        __m256i level = _mm256_and_si256(s % 2 ? _mm256_srli_epi16(v, 4) : v, m4);
        if (Q5) level = _mm256_or_si256(level, r8_bit_at_4_avx2(_mm256_loadu_si256((const __m256i *)(rec + Q5K_R8_QH + 32 * c)), s));
        _mm256_storeu_si256((__m256i *)(q + (size_t)c * R * 4), level);
    }
}

/* The min panel layout of pack_panel_i8_avx2 for R Q4_K / Q5_K (Q5) rows from whole groups
 * (row0 a multiple of 8, rows whole groups); zero past `rows` and past K, as that packer. */
template <int R, bool Q5>
static void r8_k4_pack_panel(const uint8_t * A, size_t lda, int64_t row0, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    static_assert(R % R8 == 0, "panels of whole groups");
    const int64_t b0 = k0 / 32, nbk = K / 32;
    for (int b = 0; b < kc / 32; ++b) {
        uint8_t * q = (uint8_t *)dst + (size_t)b * R * 40;
        float * sc = (float *)(q + R * 32);
        float * mn = (float *)(q + R * 36);
        for (int r0 = 0; r0 < R; r0 += R8) {
            const int64_t kb = b0 + b;
            if (r0 < rows && kb < nbk) {
                const uint8_t * rec = A + (size_t)(row0 + r0) * lda + (size_t)(kb / 8) * k4_record_bytes(Q5);
                r8_prefetch_next_group(rec, lda, (size_t)(kb % 8) * k4_record_bytes(Q5) / 8, k4_record_bytes(Q5) / 8);
                k4_record_to_min_panel_avx2<R, Q5>(rec, (int)(kb % 8), q + r0 * 4, sc + r0, mn + r0);
                continue;
            }
            std::fill(sc + r0, sc + r0 + R8, 0.0f);
            std::fill(mn + r0, mn + r0 + R8, 0.0f);
            for (int c = 0; c < 8; ++c) std::memset(q + ((size_t)c * R + r0) * 4, 0, 32);
        }
    }
}
#endif

#if defined(TSR_CPU_HAVE_X86_KERNELS)
/* Block j (of 32) of a Q3_K record into rows r0..r0+8 of an R-row panel, as the file packer
 * (q3_K_block_avx2) makes it: the levels minus 4 times minus their scale per 16 (exact in
 * int8, mul_bytes_avx2), XOR-ed with XOR, and the scales -d. */
template <int R, uint8_t XOR>
TSR_TARGET_AVX2 static void q3k_record_to_panel_avx2(const uint8_t * rec, int j, uint8_t * q, float * sc) {
    _mm256_storeu_ps(sc, _mm256_xor_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)rec)), _mm256_set1_ps(-0.0f)));
    alignas(32) int8_t scales[128];
    q3k_record_scales_avx2(rec, scales);
    const __m256i neg_sc[2] = {_mm256_sub_epi16(_mm256_setzero_si256(), r8_scale_pairs_avx2<true>((const uint8_t *)scales + 16 * j)),
                               _mm256_sub_epi16(_mm256_setzero_si256(), r8_scale_pairs_avx2<true>((const uint8_t *)scales + 16 * j + 8))};
    __m256i v[8];
    q3k_triple_levels_avx2(rec + q3k_triple_at(j), v);
    TSR_UNROLL(8)
    for (int c = 0; c < 8; ++c) {
        const __m256i w = mul_bytes_avx2(_mm256_sub_epi8(v[c], _mm256_set1_epi8(4)), neg_sc[c / 4]);
        _mm256_storeu_si256((__m256i *)(q + (size_t)c * R * 4), _mm256_xor_si256(w, _mm256_set1_epi8((char)XOR)));
    }
}

/* Block j (of 32) of a Q2_K record into rows r0..r0+8 of an R-row panel, as the file packer
 * makes it: each row's 32 levels (a 4-byte run from each of 8 chunks) and its d, dmin and
 * scale bytes through the same q2_K_affine_avx2 and requantize32_avx2 (the one type whose
 * panels are requantized), XOR-ed with XOR. */
template <int R, uint8_t XOR>
TSR_TARGET_AVX2 static void q2k_record_to_panel_avx2(const uint8_t * rec, int j, uint8_t * q, float * sc) {
    const uint8_t * chunks = rec + Q2K_R8_QS + 32 * 8 * (j / 4);  /* qs[32 (j / 4) + l]: chunk 8 (j / 4) + l / 4 */
    for (int r0 = 0; r0 < R8; r0 += 4) {
        __m256i v[4];
        alignas(16) float scale[4];
        for (int i = 0; i < 4; ++i) {
            const int r = r0 + i;
            int32_t run[8];
            TSR_UNROLL(8)
            for (int k = 0; k < 8; ++k) std::memcpy(&run[k], chunks + 32 * k + 4 * r, 4);
            const __m256i levels = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)run), 2 * (j % 4)), _mm256_set1_epi8(3));
            tsr_fp16_t d, dmin;
            std::memcpy(&d, rec + 2 * r, 2);
            std::memcpy(&dmin, rec + Q2K_R8_DMIN + 2 * r, 2);
            const affine32 w = q2_K_affine_avx2(levels, d, dmin, rec[Q2K_R8_SCALES + 8 * (2 * j) + r], rec[Q2K_R8_SCALES + 8 * (2 * j + 1) + r]);
            v[i] = _mm256_xor_si256(requantize32_avx2(w, &scale[i]), _mm256_set1_epi8((char)XOR));
        }
        store_quads4_avx2<R>(q + r0 * 4, v);
        _mm_storeu_ps(sc + r0, _mm_load_ps(scale));
    }
}

/* The panel layout of pack_panel_i8_avx2 for R Q3_K or Q2_K rows from whole groups (row0 a
 * multiple of 8, rows whole groups); past `rows` and past K the zero weights that packer pads
 * with (XOR, scale 0). */
template <int R, enum tsr_type T, uint8_t XOR>
static void r8_k2_pack_panel(const uint8_t * A, size_t lda, int64_t row0, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    static_assert(R % R8 == 0, "panels of whole groups");
    static_assert(T == TSR_TYPE_Q3_K || T == TSR_TYPE_Q2_K, "the records of 2- and 3-bit levels");
    constexpr size_t record = T == TSR_TYPE_Q3_K ? (size_t)Q3K_R8_BYTES : (size_t)Q2K_R8_BYTES;
    const int64_t b0 = k0 / 32, nbk = K / 32;
    for (int b = 0; b < kc / 32; ++b) {
        uint8_t * q = (uint8_t *)dst + (size_t)b * R * 36;
        float * sc = (float *)(q + R * 32);
        for (int r0 = 0; r0 < R; r0 += R8) {
            const int64_t kb = b0 + b;
            if (r0 < rows && kb < nbk) {
                const uint8_t * rec = A + (size_t)(row0 + r0) * lda + (size_t)(kb / 8) * record;
                r8_prefetch_next_group(rec, lda, (size_t)(kb % 8) * record / 8, record / 8);
                if constexpr (T == TSR_TYPE_Q3_K) q3k_record_to_panel_avx2<R, XOR>(rec, (int)(kb % 8), q + r0 * 4, sc + r0);
                else q2k_record_to_panel_avx2<R, XOR>(rec, (int)(kb % 8), q + r0 * 4, sc + r0);
                continue;
            }
            std::fill(sc + r0, sc + r0 + R8, 0.0f);
            for (int c = 0; c < 8; ++c) std::memset(q + ((size_t)c * R + r0) * 4, XOR, 32);
        }
    }
}
#endif

#if defined(TSR_CPU_HAVE_X86_KERNELS)
/* One Q4_1 / Q5_0 / Q5_1 record into rows r0..r0+8 of an R-row panel, as the file packer
 * (pack_panel_i8_avx2) makes it: Q5_0's levels minus 16, XOR-ed with XOR, and its scales d
 * (the panels of pack.inl); Q4_1's / Q5_1's levels unsigned, scales d and mins -m (the min
 * panels, w = a * q - b). */
template <enum tsr_type T, uint8_t XOR>
TSR_TARGET_AVX2 static void q32_record_to_panel_avx2(const uint8_t * rec, int R, uint8_t * q, float * sc, float * mn) {
    using L = r8_q32_layout<T>;
    _mm256_storeu_ps(sc, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)rec)));
    if (L::has_min) _mm256_storeu_ps(mn, _mm256_xor_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(rec + L::min_at))), _mm256_set1_ps(-0.0f)));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i fifth = L::five ? _mm256_loadu_si256((const __m256i *)(rec + L::qh_at)) : _mm256_setzero_si256();
    TSR_UNROLL(4)
    for (int c = 0; c < 4; ++c) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(rec + L::qs_at + 32 * c));
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if (L::five) {
            lo = _mm256_or_si256(lo, r8_bit_at_4_avx2(fifth, 2 * c));
            hi = _mm256_or_si256(hi, r8_bit_at_4_avx2(fifth, 2 * c + 1));
        }
        if (!L::has_min) {
            lo = _mm256_xor_si256(_mm256_sub_epi8(lo, _mm256_set1_epi8(16)), _mm256_set1_epi8((char)XOR));
            hi = _mm256_xor_si256(_mm256_sub_epi8(hi, _mm256_set1_epi8(16)), _mm256_set1_epi8((char)XOR));
        }
        _mm256_storeu_si256((__m256i *)(q + (size_t)c * R * 4), lo);
        _mm256_storeu_si256((__m256i *)(q + (size_t)(c + 4) * R * 4), hi);
    }
}

/* The panel (Q5_0) or min panel (Q4_1, Q5_1) layout of pack_panel_i8_avx2 for R rows from
 * whole groups (row0 a multiple of 8, rows whole groups); past `rows` and past K the zero
 * weights that packer pads with (XOR; a min panel's 0 levels and scales). */
template <int R, enum tsr_type T, uint8_t XOR>
static void r8_q32_pack_panel(const uint8_t * A, size_t lda, int64_t row0, int rows, int64_t K, int64_t k0, int kc, void * dst) {
    static_assert(R % R8 == 0, "panels of whole groups");
    using L = r8_q32_layout<T>;
    const size_t block_bytes = (size_t)R * (L::has_min ? 40 : 36);
    const int64_t b0 = k0 / 32, nbk = K / 32;
    for (int b = 0; b < kc / 32; ++b) {
        uint8_t * q = (uint8_t *)dst + (size_t)b * block_bytes;
        float * sc = (float *)(q + R * 32);
        float * mn = (float *)(q + R * 36);
        for (int r0 = 0; r0 < R; r0 += R8) {
            if (r0 < rows && b0 + b < nbk) {
                const uint8_t * rec = A + (size_t)(row0 + r0) * lda + (size_t)(b0 + b) * L::bytes;
                r8_prefetch_next_group(rec, lda, 0, L::bytes);
                q32_record_to_panel_avx2<T, XOR>(rec, R, q + r0 * 4, sc + r0, mn + r0);
                continue;
            }
            std::fill(sc + r0, sc + r0 + R8, 0.0f);
            if (L::has_min) std::fill(mn + r0, mn + r0 + R8, 0.0f);
            for (int c = 0; c < 8; ++c) std::memset(q + ((size_t)c * R + r0) * 4, L::has_min ? 0 : XOR, 32);
        }
    }
}
#endif

typedef void (*r8_pack_fn)(const uint8_t * A, size_t lda, int64_t row0, int rows, int64_t K, int64_t k0, int kc, void * dst);

/* The direct packer for GEMM g's A panels of type t, when g packs them with pack_panel_i8_avx2
 * (x86); NULL: go through file blocks (r8_pack_via_file). */
static r8_pack_fn r8_direct_packer(const gemm_impl * g, enum tsr_type t) {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    if (t == TSR_TYPE_Q4_0) {
        if (g->pack_a == pack_panel_i8_avx2<8, TSR_TYPE_Q4_0, 0, 8>) return r8_pack_panel<8, TSR_TYPE_Q4_0, 0>;
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_Q4_0, 0, 8>) return r8_pack_panel<32, TSR_TYPE_Q4_0, 0>;
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_Q4_0, 0, 0, PANEL_Q8, 8>) return r8_pack_panel<32, TSR_TYPE_Q4_0, 8>;
    } else if (t == TSR_TYPE_IQ4_NL) {
        if (g->pack_a == pack_panel_i8_avx2<8, TSR_TYPE_IQ4_NL, 0, 0>) return r8_pack_panel<8, TSR_TYPE_IQ4_NL, 0>;
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_IQ4_NL, 0x80, 0x80>) return r8_pack_panel<32, TSR_TYPE_IQ4_NL, 0x80>;
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_IQ4_NL, 0, 0>) return r8_pack_panel<32, TSR_TYPE_IQ4_NL, 0>;
    } else if (t == TSR_TYPE_Q4_K) {
        if (g->pack_a == pack_panel_i8_avx2<8, TSR_TYPE_Q4_K, 0, 0, PANEL_MIN>) return r8_k4_pack_panel<8, false>;
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_Q4_K, 0, 0, PANEL_MIN>) return r8_k4_pack_panel<32, false>;
    } else if (t == TSR_TYPE_Q5_0) {
        if (g->pack_a == pack_panel_i8_avx2<8, TSR_TYPE_Q5_0, 0, 0, PANEL_Q8>) return r8_q32_pack_panel<8, TSR_TYPE_Q5_0, 0>;
        /* AVX-512 (its Q8_0-style panels offset by 0x80) and AMX: Q5_0 is interleaved there too */
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_Q5_0, 0x80, 0x80, PANEL_Q8>) return r8_q32_pack_panel<32, TSR_TYPE_Q5_0, 0x80>;
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_Q5_0, 0, 0, PANEL_Q8>) return r8_q32_pack_panel<32, TSR_TYPE_Q5_0, 0>;
    } else if (t == TSR_TYPE_Q4_1) {
        if (g->pack_a == pack_panel_i8_avx2<8, TSR_TYPE_Q4_1, 0, 0, PANEL_MIN>) return r8_q32_pack_panel<8, TSR_TYPE_Q4_1, 0>;
    } else if (t == TSR_TYPE_Q5_1) {
        if (g->pack_a == pack_panel_i8_avx2<8, TSR_TYPE_Q5_1, 0, 0, PANEL_MIN>) return r8_q32_pack_panel<8, TSR_TYPE_Q5_1, 0>;
    } else if (t == TSR_TYPE_Q5_K) {
        if (g->pack_a == pack_panel_i8_avx2<8, TSR_TYPE_Q5_K, 0, 0, PANEL_MIN>) return r8_k4_pack_panel<8, true>;
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_Q5_K, 0, 0, PANEL_MIN>) return r8_k4_pack_panel<32, true>;
    } else if (t == TSR_TYPE_Q3_K) {
        if (g->pack_a == pack_panel_i8_avx2<8, TSR_TYPE_Q3_K, 0, 0, PANEL_Q8>) return r8_k2_pack_panel<8, TSR_TYPE_Q3_K, 0>;
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_Q3_K, 0, 0, PANEL_Q8>) return r8_k2_pack_panel<32, TSR_TYPE_Q3_K, 0>;
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_Q3_K, 0x80, 0x80, PANEL_Q8>) return r8_k2_pack_panel<32, TSR_TYPE_Q3_K, 0x80>;
    } else if (t == TSR_TYPE_Q2_K) {
        if (g->pack_a == pack_panel_i8_avx2<8, TSR_TYPE_Q2_K, 0, 0, PANEL_Q8>) return r8_k2_pack_panel<8, TSR_TYPE_Q2_K, 0>;
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_Q2_K, 0, 0, PANEL_Q8>) return r8_k2_pack_panel<32, TSR_TYPE_Q2_K, 0>;
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_Q2_K, 0x80, 0x80, PANEL_Q8>) return r8_k2_pack_panel<32, TSR_TYPE_Q2_K, 0x80>;
    }
#endif
    (void)g; (void)t;
    return nullptr;
}

/* A panel's rows as file blocks: kc weights (at most GEMM_I8_KC_MAX) from k0, which for the
 * K-quants may start inside a super-block, so one more of them. */
enum { R8_VIA_FILE_ROWS = 32, R8_VIA_FILE_ROW_BYTES = (GEMM_I8_KC_MAX / TSR_QK_K + 1) * R8_MAX_BLOCK_BYTES };
static_assert(GEMM_I8_KC_MAX / 32 * sizeof(tsr_block_q4_0) <= R8_VIA_FILE_ROW_BYTES, "a panel's Q4_0 blocks fit");

/* Any GEMM's panel from file blocks: file_blocks(m, first, nb, out) writes row m's blocks
 * [first, first + nb) (those holding [k0, k0 + kc) within K), then g's own packer reads them
 * from its offset in the first. */
template <class FILE_BLOCKS>
static void pack_panel_via_file(const gemm_impl * g, enum tsr_type t, int64_t row0, int rows, int64_t K, int64_t k0, int kc, void * dst,
                                FILE_BLOCKS file_blocks) {
    uint8_t tmp[R8_VIA_FILE_ROWS * R8_VIA_FILE_ROW_BYTES];
    const int64_t bs = tsr_blck_size(t), first = k0 / bs;
    const int64_t nb = std::max<int64_t>(0, std::min<int64_t>((k0 + kc + bs - 1) / bs, K / bs) - first);
    const size_t row_bytes = (size_t)nb * tsr_type_size(t);
    for (int r = 0; r < rows; ++r) file_blocks(row0 + r, first, nb, tmp + (size_t)r * row_bytes);
    g->pack_a((const char *)tmp, row_bytes, rows, nb * bs, k0 - first * bs, kc, dst);
}

/* Any GEMM's panel of an r8 matrix, through the file's blocks. */
static void r8_pack_via_file(const gemm_impl * g, enum tsr_type t, const uint8_t * A, size_t lda, int64_t row0, int rows, int64_t K,
                             int64_t k0, int kc, void * dst) {
    pack_panel_via_file(g, t, row0, rows, K, k0, kc, dst, [&](int64_t m, int64_t first, int64_t nb, uint8_t * out) {
        r8_row_to_file(t, A + (size_t)(m / R8 * R8) * lda, (int)(m % R8), first, nb, out);
    });
}

/* The direct packer for GEMM g's A panels of type t in its word layout (repack_words.inl):
 * Q3_K's, for the file packer's panels, where the VBMI conversions run; NULL: through the
 * file's blocks (Q2_K's panels are requantized: no direct packer). */
static r8_pack_fn words_direct_packer(const gemm_impl * g, enum tsr_type t) {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    if (t == TSR_TYPE_Q3_K && words_convert_vbmi(true)) {
        if (g->pack_a == pack_panel_i8_avx2<8, TSR_TYPE_Q3_K, 0, 0, PANEL_Q8>) return q3kw_pack_panel<8, 0>;
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_Q3_K, 0, 0, PANEL_Q8>) return q3kw_pack_panel<32, 0>;
        if (g->pack_a == pack_panel_i8_avx2<32, TSR_TYPE_Q3_K, 0x80, 0x80, PANEL_Q8>) return q3kw_pack_panel<32, 0x80>;
    }
#endif
    (void)g; (void)t;
    return nullptr;
}

/* GEMM g's A panel of `rows` rows from row0 of a Q2_K or Q3_K matrix (t) in its word layout:
 * straight from the layout for whole 8-row groups, else through the file's blocks. */
static void words_pack_a(const gemm_impl * g, enum tsr_type t, const uint8_t * A, size_t lda, int64_t row0, int rows, int64_t K, int64_t k0,
                         int kc, void * dst) {
    const r8_pack_fn direct = words_direct_packer(g, t);
    if (direct && rows % 8 == 0) return direct(A, lda, row0, rows, K, k0, kc, dst);
    const size_t bb = tsr_type_size(t);
    pack_panel_via_file(g, t, row0, rows, K, k0, kc, dst, [&](int64_t m, int64_t first, int64_t nb, uint8_t * out) {
        words_blocks_to_file(t, A + (size_t)m * lda + (size_t)first * bb, out, nb);
    });
}

/* GEMM g's A panel of `rows` rows from row0 of an r8 matrix of type t. */
static void r8_pack_a(const gemm_impl * g, enum tsr_type t, const uint8_t * A, size_t lda, int64_t row0, int rows, int64_t K, int64_t k0,
                      int kc, void * dst) {
    const r8_pack_fn direct = r8_direct_packer(g, t);
    if (direct && row0 % R8 == 0 && rows % R8 == 0) return direct(A, lda, row0, rows, K, k0, kc, dst);
    r8_pack_via_file(g, t, A, lda, row0, rows, K, k0, kc, dst);
}

} // namespace tcpu
} // namespace
