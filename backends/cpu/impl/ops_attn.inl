/*
 * ops_attn.inl - fused attention on the CPU (flash_attn_ext): an online softmax over blocks
 * of FA_BLOCK keys, with no n_q x n_kv score buffer (conventions: ops_elementwise.inl).
 *
 * Two ways through, chosen per node (never per thread, so no result depends on the split):
 *  - one query at a time (decode without grouped heads; quantized or strided K/V): a dot
 *    product per query and key; F16 K and V rows (a KV cache), a block of keys per call of
 *    the ISA's fa_dots_h / fa_accum_h, with no F32 copy of the rows;
 *  - tiles (F16/F32 K and V in packed rows, at least FA_TILE_MIN_Q queries per K/V head:
 *    prompts, and decode with grouped-query heads): up to FA_QB queries that read the same
 *    K/V head (consecutive queries of one head, or of the heads sharing it) share each block
 *    of keys. The block's K and V rows are converted to F32 once for all of them,
 *    and its scores come a vector of queries at a time (the queries transposed, each key
 *    element broadcast) instead of one dot product and one horizontal sum per query and key.
 *    A lane computes its own query's sums only, so a query's result does not depend on which
 *    queries share its tile. A node with at most FA_QB_DECODE queries per K/V head (a
 *    grouped-query model's decode step) takes tiles of that many lanes instead.
 */
namespace {
namespace tcpu {

/* One max and one rescale of the accumulator per block of FA_BLOCK keys, and the exps as
 * one vector row. Tiles: FA_QB queries; nodes with fewer than FA_TILE_MIN_Q queries per K/V
 * head (decode of a model without grouped heads) take the one-query path, whose dot
 * products read K as stored. */
enum { FA_BLOCK = 64, FA_QB = 16, FA_QB_DECODE = 8, FA_TILE_MIN_Q = 4, FA_TILE_MAX_D = 512 };

struct fa_args {
    const tsr_tensor * q, * k, * v, * mask;
    float scale, max_bias, softcap;
    int64_t D, Dv, n_kv, H, rk2, rk3;
};

static fa_args fa_args_of(const tsr_tensor * dst) {
    fa_args a;
    a.q = dst->src[0];
    a.k = dst->src[1];
    a.v = dst->src[2];
    a.mask = dst->src[3];
    a.scale = tsr_get_op_params_f32(dst, 0);
    a.max_bias = tsr_get_op_params_f32(dst, 1);
    a.softcap = tsr_get_op_params_f32(dst, 2);
    if (a.softcap != 0.0f) a.scale /= a.softcap;
    a.D = a.q->ne[0];
    a.Dv = a.v->ne[0];
    a.n_kv = a.k->ne[1];
    a.H = a.q->ne[2];
    a.rk2 = a.q->ne[2] / a.k->ne[2];
    a.rk3 = a.q->ne[3] / a.k->ne[3];
    return a;
}

static inline bool fa_f32_rows(const tsr_tensor * t) {
    return (t->type == TSR_TYPE_F16 || t->type == TSR_TYPE_F32) && row_contig(t);
}
/* queries per K/V head: a decode step of a grouped-query model has one per query head */
static int64_t fa_queries_per_kv_head(const tsr_tensor * dst) {
    const tsr_tensor * q = dst->src[0], * k = dst->src[1];
    return q->ne[1] * (q->ne[2] / k->ne[2]);
}
static bool fa_tiled(const tsr_tensor * dst) {
    const tsr_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2];
    const int64_t per_kv_head = fa_queries_per_kv_head(dst);
    return per_kv_head >= FA_TILE_MIN_Q && fa_f32_rows(k) && fa_f32_rows(v) && q->ne[0] <= FA_TILE_MAX_D && v->ne[0] <= FA_TILE_MAX_D;
}

static size_t fa_thread_floats(const tsr_tensor * dst) {
    const int64_t D = dst->src[0]->ne[0], Dv = dst->src[2]->ne[0];
    if (fa_tiled(dst))  /* queries transposed, scores, mask, K and V rows as F32, accumulators, a mask row */
        return (size_t)(D * FA_QB + 2 * FA_BLOCK * FA_QB + FA_BLOCK * (D + Dv) + FA_QB * Dv + FA_BLOCK) + 16;
    return (size_t)(D + 2 * Dv + 2 * FA_BLOCK) + yq8_row_bytes(D) / 4 + 16;
}

/* A query's running softmax state: max, sum of weights, and whether a NaN or +inf score
 * made its row NaN (soft_max's rule). */
struct fa_row {
    float M = -INFINITY, S = 0.0f;
    bool nan = false;
};

/* A score as soft_max sees it: scaled, capped, plus the (ALiBi-scaled) mask. */
static inline float fa_score(const fa_args & a, float dot, float mv) {
    float s = dot * a.scale;
    if (a.softcap != 0.0f) s = a.softcap * std::tanh(s);
    return s + mv;
}

/* Folds a block's scores sc[0..nc) (max bm; -inf where masked) into the row: rescales acc
 * when the max rises and turns sc into the weights exp(s - M). False: the block adds
 * nothing (the row is NaN, or every key of the block is masked). */
static inline bool fa_weights(const cparams & p, fa_row & r, float * sc, int64_t nc, float bm, float * acc, int64_t Dv) {
    if (r.nan || bm == -INFINITY) return false;
    if (bm > r.M) {
        const float ms = std::exp(r.M - bm);  /* 0 for the first block that counts */
        for (int64_t i = 0; i < Dv; ++i) acc[i] *= ms;
        r.S *= ms;
        r.M = bm;
    }
    for (int64_t j = 0; j < nc; ++j) sc[j] -= r.M;
    if (p.K->act) p.K->act->exp(nc, sc, sc);
    else for (int64_t j = 0; j < nc; ++j) sc[j] = std::exp(sc[j]);
    return true;
}

static inline void fa_store(tsr_tensor * dst, const fa_row & r, const float * acc, int64_t Dv, int64_t iq1, int64_t iq2, int64_t iq3) {
    const float inv = r.nan ? NAN : r.S == 0.0f ? 0.0f : 1.0f / r.S;
    float * d = (float *)tptr(dst, 0, iq2, iq1, iq3);
    for (int64_t i = 0; i < Dv; ++i) d[i] = acc[i] * inv;
}

/* ---- one query at a time --------------------------------------------------------------------- */

/* How many keys ahead a walk over K rows of row_bytes each prefetches (prefetch_lines_l2):
 * about 2 KiB.
 * cpu_bench's decode attention rows, 2-core Zen 4 VM: GPT-2 (128-byte rows) 8 / 12 / 16 /
 * 24 keys ahead 19.5 / 22.3 / 23.2 / 23.8 GB/s, LLaMA-2 7B (256-byte rows) 18.6 / 18.3 /
 * 16.6 / 17.6; with T0 at 4 keys ahead 10-13 and 15-16, none 7-9 and 10-15. */
static inline int64_t fa_keys_ahead(int64_t row_bytes) { return std::max<int64_t>(4, std::min<int64_t>(32, 2048 / std::max<int64_t>(1, row_bytes))); }

TSR_SIMD_WARNINGS_OFF
/* ---- vector loads of K / V elements ----------------------------------------------------------- */

/* out = the L halves at p as floats (exact): one conversion instruction where the ISA has
 * it. An out parameter, so no vector crosses a call where one is not inlined (-Wpsabi);
 * not always_inline, which fails in the bodies' own (untargeted) instances: the ISA's
 * kernels below are flatten, which inlines these into them. */
static inline void fa_load_h(vf32x4 & out, const uint16_t * p) {
#if defined(TSR_CPU_ARM64)
    const float32x4_t f = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
    std::memcpy(&out, &f, sizeof out);
#else
    out = vf32x4{h2f(p[0]), h2f(p[1]), h2f(p[2]), h2f(p[3])};
#endif
}
#if defined(TSR_CPU_HAVE_X86_KERNELS)
TSR_TARGET_AVX2 static inline void fa_load_h(vf32x8 & out, const uint16_t * p) {
    const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    std::memcpy(&out, &f, sizeof out);
}
TSR_TARGET_AVX512 static inline void fa_load_h(vf32x16 & out, const uint16_t * p) {
    const __m512 f = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    std::memcpy(&out, &f, sizeof out);
}
#endif

/* out = L elements of a K or V row as floats: F32 as stored, F16 through fa_load_h */
template <class V> static TSR_ALWAYS_INLINE void fa_load(V & out, const float * p) { std::memcpy(&out, p, sizeof(V)); }
template <class V> static TSR_ALWAYS_INLINE void fa_load(V & out, const uint16_t * p) { fa_load_h(out, p); }

/* ---- tiles of FA_QB queries ------------------------------------------------------------------
 * A tile's scores st[j * FA_QB + l] (key j, query lane l) stay in that layout from the dot
 * products to the weights: the max, the NaN test and the exps run a vector of queries at a
 * time, and the V accumulation reads lane l's weights with a stride of FA_QB. */

/* st[j * QB + l] = sum over d of kf[j * D + d] * qt[d * QB + l], for nk keys: KR keys
 * per pass share each load of the queries. Each (key, lane) sum is one chain in d order,
 * whatever KR. The loops over keys and vectors are unrolled so that the accumulators stay in
 * registers (indexed by a loop variable, GCC kept them in memory: a load and a store around
 * every FMA). */
template <class V, int KR, int QB>
static TSR_ALWAYS_INLINE void fa_scores_keys(int64_t D, const float * kf, const float * qt, float * st) {
    constexpr int L = (int)(sizeof(V) / sizeof(float)), NV = QB / L;
    V acc[KR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < KR; ++r)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[r][v] = V{};
    for (int64_t d = 0; d < D; ++d) {
        V qv[NV];
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) std::memcpy(&qv[v], qt + d * QB + v * L, sizeof(V));
#pragma GCC unroll 16
        for (int r = 0; r < KR; ++r) {
            const V kb = V{} + kf[r * D + d];
#pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) acc[r][v] += kb * qv[v];
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < KR; ++r)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) std::memcpy(st + r * QB + v * L, &acc[r][v], sizeof(V));
}
template <class V, int QB>
static TSR_ALWAYS_INLINE void fa_scores_body(int64_t nk, int64_t D, const float * kf, const float * qt, float * st) {
    constexpr int NV = QB / (int)(sizeof(V) / sizeof(float));
    constexpr int KR = NV >= 8 ? 1 : 8 / NV;  /* about 8 accumulators in flight */
    int64_t j = 0;
    for (; j + KR <= nk; j += KR) fa_scores_keys<V, KR, QB>(D, kf + j * D, qt, st + j * QB);
    for (; j < nk; ++j) fa_scores_keys<V, 1, QB>(D, kf + j * D, qt, st + j * QB);
}

/* The dot products st (nk keys) become scores as soft_max sees them, in place: times scale,
 * plus the mask mt (same layout; -inf: masked, whatever the dot product); per lane, the max
 * over the keys (bm) and whether a NaN or +inf score came up (bad). */
template <class V, int QB>
static TSR_ALWAYS_INLINE void fa_finish_body(int64_t nk, float scale, const float * mt, float * st, float * bm, int32_t * bad) {
    constexpr int L = (int)(sizeof(V) / sizeof(float)), NV = QB / L;
    typedef decltype(V{} < V{}) M;
    for (int v = 0; v < NV; ++v) {
        V mx = V{} - INFINITY;
        M nan = M{} == 1;  /* all clear */
        for (int64_t j = 0; j < nk; ++j) {
            float * sp = st + j * QB + v * L;
            V s;
            std::memcpy(&s, sp, sizeof(V));
            s *= scale;
            if (mt) {
                V mv;
                std::memcpy(&mv, mt + j * QB + v * L, sizeof(V));
                s = mv == -INFINITY ? V{} - INFINITY : s + mv;
            }
            std::memcpy(sp, &s, sizeof(V));
            mx = mx < s ? s : mx;  /* std::max(mx, s): a NaN score leaves mx */
            nan |= ~(s < INFINITY);
        }
        std::memcpy(bm + v * L, &mx, sizeof(V));
        std::memcpy(bad + v * L, &nan, sizeof(V));
    }
}

/* st[j * QB + l] -= m[l] (sub), and sum[l] += st[j * QB + l] over the keys in order (sum) */
template <class V, int QB>
static TSR_ALWAYS_INLINE void fa_sub_body(int64_t nk, const float * m, float * st) {
    constexpr int L = (int)(sizeof(V) / sizeof(float)), NV = QB / L;
    for (int v = 0; v < NV; ++v) {
        V mv;
        std::memcpy(&mv, m + v * L, sizeof(V));
        for (int64_t j = 0; j < nk; ++j) {
            V s;
            std::memcpy(&s, st + j * QB + v * L, sizeof(V));
            s -= mv;
            std::memcpy(st + j * QB + v * L, &s, sizeof(V));
        }
    }
}
template <class V, int QB>
static TSR_ALWAYS_INLINE void fa_sum_body(int64_t nk, const float * st, float * sum) {
    constexpr int L = (int)(sizeof(V) / sizeof(float)), NV = QB / L;
    for (int v = 0; v < NV; ++v) {
        V a;
        std::memcpy(&a, sum + v * L, sizeof(V));
        for (int64_t j = 0; j < nk; ++j) {
            V s;
            std::memcpy(&s, st + j * QB + v * L, sizeof(V));
            a += s;
        }
        std::memcpy(sum + v * L, &a, sizeof(V));
    }
}

/* acc[c..) += w[j * ws] * row_j[c..] over nk keys in order, row_j = the elements E at rows +
 * j * rb (F32 rows converted from a tile's block, or F16 rows of a KV cache), CH vectors of acc
 * at a time held in registers across the keys; keys of weight 0 skipped (masked, or too small
 * to count: a V row there may hold anything). Returns where it stopped. */
template <class V, int CH, class E>
static TSR_ALWAYS_INLINE int64_t fa_accum_chunks(int64_t nk, int64_t Dv, int64_t c, const float * w, int64_t ws, const char * rows, size_t rb,
                                                 float * acc) {
    constexpr int64_t L = (int64_t)(sizeof(V) / sizeof(float));
    for (; c + CH * L <= Dv; c += CH * L) {
        V a[CH];
        for (int i = 0; i < CH; ++i) std::memcpy(&a[i], acc + c + i * L, sizeof(V));
        for (int64_t j = 0; j < nk; ++j) {
            if (w[j * ws] == 0.0f) continue;
            const V b = V{} + w[j * ws];
            const E * r = (const E *)(rows + (size_t)j * rb) + c;
            for (int i = 0; i < CH; ++i) {
                V x;
                fa_load(x, r + i * L);
                a[i] += b * x;
            }
        }
        for (int i = 0; i < CH; ++i) std::memcpy(acc + c + i * L, &a[i], sizeof(V));
    }
    return c;
}
/* acc[0..Dv) += w[j * QB] * vf[j * Dv ..] over nk keys in order. Each vector of acc is one
 * chain of FMAs over the keys: 8 chains (a head of 64 in ymm) keep two FMA pipes busy where
 * 4 waited on the FMA latency; the same sums in the same order whatever the chunk. */
template <class V, int QB>
static TSR_ALWAYS_INLINE void fa_accum_body(int64_t nk, int64_t Dv, const float * w, const float * vf, float * acc) {
    const char * rows = (const char *)vf;
    const size_t rb = (size_t)Dv * sizeof(float);
    int64_t c = fa_accum_chunks<V, 8, float>(nk, Dv, 0, w, QB, rows, rb, acc);
    c = fa_accum_chunks<V, 4, float>(nk, Dv, c, w, QB, rows, rb, acc);
    c = fa_accum_chunks<V, 1, float>(nk, Dv, c, w, QB, rows, rb, acc);
    for (; c < Dv; ++c) {
        float a = acc[c];
        for (int64_t j = 0; j < nk; ++j)
            if (w[j * QB] != 0.0f) a += w[j * QB] * vf[j * Dv + c];
        acc[c] = a;
    }
}

/* ---- one query, F16 K and V rows: a block of keys a call ---------------------------------------
 * Decode without grouped heads (GPT-2, LLaMA-1/2 7B) reads each query's K/V head once per
 * token: at long contexts as many bytes as the weights. Converting each V row into a buffer
 * and calling a dot and an axpy per key cost several times the arithmetic; these read the
 * halves in registers, keep a block's accumulators there across its keys, and prefetch. */

/* out[j] = K_j . q for the nk rows K_j = k + j * ks (D halves, D a multiple of the lanes);
 * -inf where mv[j] is -inf, whose row is not read (an unwritten cache row may hold
 * anything). Each key first prefetches pf + j * pf_stride (pf_bytes; the V row the block
 * reads next), so that its lines arrive while the dots run. */
template <class V>
static TSR_ALWAYS_INLINE void fa_dots_h_body(int64_t nk, int64_t D, const char * k, size_t ks, const float * q, const float * mv, float * out,
                                             const char * pf, size_t pf_stride, size_t pf_bytes) {
    constexpr int64_t L = (int64_t)(sizeof(V) / sizeof(float));
    const int64_t k_ahead = fa_keys_ahead(D * 2);
    for (int64_t j = 0; j < nk; ++j) {
        if (pf) prefetch_lines_l2(pf + (size_t)j * pf_stride, pf_bytes);
        prefetch_lines_l2(k + (size_t)(j + k_ahead) * ks, (size_t)D * 2);
        if (mv && mv[j] == -INFINITY) { out[j] = -INFINITY; continue; }
        const uint16_t * kr = (const uint16_t *)(k + (size_t)j * ks);
        V a0 = V{}, a1 = V{};
        int64_t d = 0;
        for (; d + 2 * L <= D; d += 2 * L) {
            V q0, q1;
            std::memcpy(&q0, q + d, sizeof(V));
            std::memcpy(&q1, q + d + L, sizeof(V));
            V k0, k1;
            fa_load_h(k0, kr + d);
            fa_load_h(k1, kr + d + L);
            a0 += k0 * q0;
            a1 += k1 * q1;
        }
        if (d < D) {
            V q0, k0;
            std::memcpy(&q0, q + d, sizeof(V));
            fa_load_h(k0, kr + d);
            a0 += k0 * q0;
        }
        a0 += a1;
        float sum = 0.0f;
        for (int64_t l = 0; l < L; ++l) sum += a0[l];
        out[j] = sum;
    }
}

/* acc[0..Dv) += w[j] * V_j over the nk F16 rows V_j = v + j * vs (Dv a multiple of the
 * lanes): the tiles' accumulation, read from the cache rows as they are. */
template <class V>
static TSR_ALWAYS_INLINE void fa_accum_h_body(int64_t nk, int64_t Dv, const float * w, const char * v, size_t vs, float * acc) {
    int64_t c = fa_accum_chunks<V, 8, uint16_t>(nk, Dv, 0, w, 1, v, vs, acc);
    c = fa_accum_chunks<V, 4, uint16_t>(nk, Dv, c, w, 1, v, vs, acc);
    fa_accum_chunks<V, 1, uint16_t>(nk, Dv, c, w, 1, v, vs, acc);
}

/* The tile kernels of one ISA (a body template compiled for it), and the one-query F16
 * block kernels (lanes: what D and Dv must be a multiple of). */
struct fa_tile_kernels {
    void (*scores)(int64_t nk, int64_t D, const float * kf, const float * qt, float * st);
    void (*finish)(int64_t nk, float scale, const float * mt, float * st, float * bm, int32_t * bad);
    void (*sub)(int64_t nk, const float * m, float * st);
    void (*sum)(int64_t nk, const float * st, float * sum);
    void (*accum)(int64_t nk, int64_t Dv, const float * w, const float * vf, float * acc);
    void (*dots_h)(int64_t nk, int64_t D, const char * k, size_t ks, const float * q, const float * mv, float * out, const char * pf,
                   size_t pf_stride, size_t pf_bytes);
    void (*accum_h)(int64_t nk, int64_t Dv, const float * w, const char * v, size_t vs, float * acc);
    int64_t lanes;
};
#define TSR_FA_TILE_KERNELS(TARGET, V, NAME)                                                                                      \
    struct NAME {                                                                                                                 \
        template <int QB> TARGET static void scores(int64_t nk, int64_t D, const float * kf, const float * qt, float * st) {                        \
            fa_scores_body<V, QB>(nk, D, kf, qt, st);                                                                                 \
        }                                                                                                                         \
        template <int QB> TARGET static void finish(int64_t nk, float scale, const float * mt, float * st, float * bm, int32_t * bad) {             \
            fa_finish_body<V, QB>(nk, scale, mt, st, bm, bad);                                                                        \
        }                                                                                                                         \
        template <int QB> TARGET static void sub(int64_t nk, const float * m, float * st) { fa_sub_body<V, QB>(nk, m, st); }                            \
        template <int QB> TARGET static void sum(int64_t nk, const float * st, float * s) { fa_sum_body<V, QB>(nk, st, s); }                            \
        template <int QB> TARGET static void accum(int64_t nk, int64_t Dv, const float * w, const float * vf, float * acc) {                        \
            fa_accum_body<V, QB>(nk, Dv, w, vf, acc);                                                                                 \
        }                                                                                                                         \
        __attribute__((flatten)) TARGET static void dots_h(int64_t nk, int64_t D, const char * k, size_t ks, const float * q, const float * mv, float * out, \
                                  const char * pf, size_t pf_stride, size_t pf_bytes) {                                           \
            fa_dots_h_body<V>(nk, D, k, ks, q, mv, out, pf, pf_stride, pf_bytes);                                                 \
        }                                                                                                                         \
        __attribute__((flatten)) TARGET static void accum_h(int64_t nk, int64_t Dv, const float * w, const char * v, size_t vs, float * acc) {             \
            fa_accum_h_body<V>(nk, Dv, w, v, vs, acc);                                                                            \
        }                                                                                                                         \
        static constexpr int64_t lanes = (int64_t)(sizeof(V) / sizeof(float));                                                   \
    };
TSR_FA_TILE_KERNELS(, vf32x4, fa_tiles_v4)
#if defined(TSR_CPU_HAVE_X86_KERNELS)
TSR_FA_TILE_KERNELS(TSR_TARGET_AVX2, vf32x8, fa_tiles_avx2)
TSR_FA_TILE_KERNELS(TSR_TARGET_AVX512, vf32x16, fa_tiles_avx512)
#endif
#undef TSR_FA_TILE_KERNELS
TSR_SIMD_WARNINGS_ON

/* The tile kernels for QB lanes (the one-query kernels come along) */
template <class T, int QB> static constexpr fa_tile_kernels fa_tile_table() {
    fa_tile_kernels k{};
    k.scores = T::template scores<QB>;
    k.finish = T::template finish<QB>;
    k.sub = T::template sub<QB>;
    k.sum = T::template sum<QB>;
    k.accum = T::template accum<QB>;
    k.dots_h = T::dots_h;
    k.accum_h = T::accum_h;
    k.lanes = T::lanes;
    return k;
}
static fa_tile_kernels fa_tile_kernels_for(const kernels * K) {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    if (K->isa == TSR_CPU_ISA_AVX512) return fa_tile_table<fa_tiles_avx512, FA_QB>();
    if (K->isa == TSR_CPU_ISA_AVX2) return fa_tile_table<fa_tiles_avx2, FA_QB>();
#endif
    (void)K;
    return fa_tile_table<fa_tiles_v4, FA_QB>();
}
/* Tiles of FA_QB_DECODE lanes: a decode step's heads that share a K/V head (4-8 in Llama-3,
 * Mistral, Qwen) filled half of FA_QB's 16 and paid for all 16 in every pass. 8 lanes are
 * one ymm vector: AVX-512 CPUs take the AVX2 kernels (on Zen 4, two ymm FMAs a cycle
 * against one zmm). */
static fa_tile_kernels fa_tile_kernels_decode(const kernels * K) {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    if (K->isa == TSR_CPU_ISA_AVX512 || K->isa == TSR_CPU_ISA_AVX2) return fa_tile_table<fa_tiles_avx2, FA_QB_DECODE>();
#endif
    (void)K;
    return fa_tile_table<fa_tiles_v4, FA_QB_DECODE>();
}

/* F16 K and V rows, D and Dv a multiple of the block kernels' lanes: fa_dots_h / fa_accum_h */
static bool fa_one_query_blocks(const fa_tile_kernels & tk, const fa_args & a) {
    return a.k->type == TSR_TYPE_F16 && a.v->type == TSR_TYPE_F16 && row_contig(a.k) && row_contig(a.v) && a.D % tk.lanes == 0 &&
           a.Dv % tk.lanes == 0;
}

/* sc[j] = K_j . q for keys c0 + j of head (ik2, ik3), the way the block kernels' K cannot go
 * (quantized against qq, other types or strides against qf): a dot product a key; -inf where
 * mv[j] is -inf, whose row is not read. A head's rows of a KV cache lie a whole cache row
 * apart, which the hardware prefetcher follows poorly: each key asks for its V row (read
 * after the block's scores) and the K row k_ahead keys on. */
static void fa_dots_any(const cparams & p, const fa_args & a, int64_t c0, int64_t nc, int64_t ik2, int64_t ik3, const float * qf, const yq8 * qq,
                        const float * mv, float * sc) {
    const tsr_tensor * k = a.k, * v = a.v;
    const bool kq = tsr_is_quantized(k->type), k_contig = row_contig(k);
    const size_t k_row_bytes = k_contig ? tsr_row_size(k->type, a.D) : 64, v_row_bytes = row_contig(v) ? tsr_row_size(v->type, a.Dv) : 64;
    const int64_t k_ahead = fa_keys_ahead((int64_t)k_row_bytes);
    for (int64_t j = 0; j < nc; ++j) {
        const int64_t ic = c0 + j;
        if (mv && mv[j] == -INFINITY) { sc[j] = -INFINITY; continue; }
        prefetch_lines_l2(tptr(v, 0, ic, ik2, ik3), v_row_bytes);
        if (ic + k_ahead < a.n_kv) prefetch_lines_l2(tptr(k, 0, ic + k_ahead, ik2, ik3), k_row_bytes);
        const char * krow = tptr(k, 0, ic, ik2, ik3);
        if (kq) sc[j] = dot_any(p.K, k->type, a.D, krow, (const char *)qq);
        else if (k_contig) sc[j] = dot_any(p.K, k->type, a.D, krow, (const char *)qf);
        else {
            float s = 0.0f;
            for (int64_t i = 0; i < a.D; ++i) s += ld(k->type, krow + i * k->nb[0]) * qf[i];
            sc[j] = s;
        }
    }
}

/* acc += w[j] V_j for keys c0 + j (weights 0 skipped) the way fa_accum_h cannot: each V row
 * as F32 (through vrow unless it is F32 already), then an axpy. */
static void fa_accum_any(const cparams & p, const fa_args & a, int64_t c0, int64_t nc, int64_t ik2, int64_t ik3, const float * w, float * vrow,
                         float * acc) {
    const tsr_tensor * v = a.v;
    const int64_t Dv = a.Dv;
    const bool v_f32 = v->type == TSR_TYPE_F32 && v->nb[0] == 4;
    for (int64_t j = 0; j < nc; ++j) {
        if (w[j] == 0.0f) continue;  /* masked, or too small to count */
        const char * vr = tptr(v, 0, c0 + j, ik2, ik3);
        const float * vf = vrow;
        if (v_f32) vf = (const float *)vr;
        else if (v->type == TSR_TYPE_F16 && row_contig(v)) p.K->f16_to_f32(vr, vrow, Dv);
        else if (row_contig(v)) row_to_f32(v->type, vr, vrow, Dv);
        else for (int64_t i = 0; i < Dv; ++i) vrow[i] = ld(v->type, vr + i * v->nb[0]);
        p.K->axpy_f32(Dv, w[j], vf, acc);
    }
}

/* Queries r0..r1 one at a time, FA_BLOCK keys a step: the block's mask values (keys past the
 * last unmasked one, a causal mask's padding, left out), its scores, the running softmax,
 * its weighted V rows. F16 K and V rows go through the ISA's block kernels. */
static void fa_one_query_at_a_time(const cparams & p, tsr_tensor * dst, const fa_args & a, int64_t r0, int64_t r1) {
    const tsr_tensor * q = a.q, * k = a.k, * v = a.v, * mask = a.mask;
    const int64_t D = a.D, Dv = a.Dv;
    const fa_tile_kernels tk = fa_tile_kernels_for(p.K);
    const bool blocks = fa_one_query_blocks(tk, a);
    float * buf = thread_floats(p, fa_thread_floats(dst));
    float * qf = buf;
    float * acc = qf + D;
    float * vrow = acc + Dv;
    float * sc = vrow + Dv;
    float * mvb = sc + FA_BLOCK;
    yq8 * qq = (yq8 *)(mvb + FA_BLOCK);
    const size_t v_row_bytes = row_contig(v) ? tsr_row_size(v->type, Dv) : 64;
    for (int64_t ir = r0; ir < r1; ++ir) {
        const int64_t iq1 = ir % q->ne[1], iq2 = (ir / q->ne[1]) % q->ne[2], iq3 = ir / (q->ne[1] * q->ne[2]);
        const int64_t ik2 = iq2 / a.rk2, ik3 = iq3 / a.rk3;
        const float slope = alibi_slope(a.max_bias, iq2, a.H);
        const char * qrow = tptr(q, 0, iq1, iq2, iq3);
        for (int64_t i = 0; i < D; ++i) qf[i] = *(const float *)(qrow + i * q->nb[0]);
        if (tsr_is_quantized(k->type)) {
            quantize_y_nonfinite_nan(p.K, qf, qq, D);
            y_side(qq, D / 32, k->type);
        }
        const char * mrow = mask ? tptr(mask, 0, iq1, iq2 % mask->ne[2], iq3 % mask->ne[3]) : nullptr;
        const float * mv = mrow ? mvb : nullptr;
        for (int64_t i = 0; i < Dv; ++i) acc[i] = 0.0f;
        fa_row r;
        for (int64_t c0 = 0; c0 < a.n_kv && !r.nan; c0 += FA_BLOCK) {
            int64_t nc = std::min<int64_t>(FA_BLOCK, a.n_kv - c0);
            if (mrow) {
                int64_t n_live = 0;
                for (int64_t j = 0; j < nc; ++j) {
                    mvb[j] = slope * ld(mask->type, mrow + (c0 + j) * mask->nb[0]);
                    if (mvb[j] != -INFINITY) n_live = j + 1;
                }
                nc = n_live;
                if (nc == 0) continue;
            }
            if (blocks) tk.dots_h(nc, D, tptr(k, 0, c0, ik2, ik3), k->nb[1], qf, mv, sc, tptr(v, 0, c0, ik2, ik3), v->nb[1], v_row_bytes);
            else fa_dots_any(p, a, c0, nc, ik2, ik3, qf, qq, mv, sc);
            float bm = -INFINITY;
            for (int64_t j = 0; j < nc; ++j) {
                if (mv && mv[j] == -INFINITY) continue;  /* sc[j] is -inf */
                const float s = fa_score(a, sc[j], mv ? mv[j] : 0.0f);
                sc[j] = s;
                bm = std::max(bm, s);
                r.nan |= !(s < INFINITY);
            }
            if (!fa_weights(p, r, sc, nc, bm, acc, Dv)) continue;
            if (blocks) tk.accum_h(nc, Dv, sc, tptr(v, 0, c0, ik2, ik3), v->nb[1], acc);
            else fa_accum_any(p, a, c0, nc, ik2, ik3, sc, vrow, acc);
            for (int64_t j = 0; j < nc; ++j) r.S += sc[j];
        }
        fa_store(dst, r, acc, Dv, iq1, iq2, iq3);
    }
}

/* Rows c0..c0+nc of K or V (head ik2, ik3) as F32, one after another. Each row first
 * prefetches row pc0 + j of pf (head ik2, ik3; none past its pn rows): the rows this tile
 * reads next (a decode step's K/V rows lie a cache row apart, which the hardware prefetcher
 * follows poorly). */
static void fa_rows_f32(const kernels * K, const tsr_tensor * t, int64_t c0, int64_t nc, int64_t ik2, int64_t ik3, float * out,
                        const tsr_tensor * pf = nullptr, int64_t pc0 = 0, int64_t pn = 0) {
    const int64_t n = t->ne[0];
    const size_t pf_bytes = pf && row_contig(pf) ? tsr_row_size(pf->type, pf->ne[0]) : 64;
    for (int64_t j = 0; j < nc; ++j) {
        if (pf && pc0 + j < pn) prefetch_lines_l2(tptr(pf, 0, pc0 + j, ik2, ik3), pf_bytes);
        const char * row = tptr(t, 0, c0 + j, ik2, ik3);
        if (t->type == TSR_TYPE_F32) std::memcpy(out + j * n, row, (size_t)n * 4);
        else K->f16_to_f32(row, out + j * n, n);
    }
}

/* The tile's mask, keys c0..c0+nc, lanes 0..nq in the scores' layout (times each lane's
 * ALiBi slope; lanes past nq hold -inf, written once a tile by fa_tiles). Returns whether
 * it masks out every key for every query (causal prompts: about half the tiles), when the
 * tile is skipped. A decode step's heads share one mask row: it is converted once. */
template <int QB>
static bool fa_tile_mask(const kernels * K, const fa_args & a, const char * const * mrows, int64_t nq, const float * slopes, int64_t c0,
                         int64_t nc, float * row, float * mt) {
    int live = 0;
    const char * converted = nullptr;
    for (int64_t l = 0; l < nq; ++l) {
        const char * m = mrows[l] + c0 * a.mask->nb[0];
        if (m != converted) {
            if (a.mask->type == TSR_TYPE_F16 && row_contig(a.mask)) K->f16_to_f32(m, row, nc);
            else
                for (int64_t j = 0; j < nc; ++j) row[j] = ld(a.mask->type, m + j * a.mask->nb[0]);
            converted = m;
        }
        const float slope = slopes[l];
        int lane_live = 0;  /* an int in a register: a bool &= kept in memory made a chain through the stack */
        for (int64_t j = 0; j < nc; ++j) {
            const float mv = slope * row[j];
            mt[j * QB + l] = mv;
            lane_live |= mv != -INFINITY;
        }
        live |= lane_live;
    }
    return !live;
}

template <int QB>
static void fa_tiles(const cparams & p, tsr_tensor * dst, const fa_args & a, int64_t r0, int64_t r1) {
    const fa_tile_kernels tk = QB == FA_QB ? fa_tile_kernels_for(p.K) : fa_tile_kernels_decode(p.K);
    const int64_t D = a.D, Dv = a.Dv, n1 = a.q->ne[1];
    float * qt = thread_floats(p, fa_thread_floats(dst));
    float * st = qt + D * FA_QB;  /* the buffers sized for FA_QB lanes, the most */
    float * mt = st + FA_BLOCK * FA_QB;
    float * kf = mt + FA_BLOCK * FA_QB;
    float * vf = kf + FA_BLOCK * D;
    float * acc = vf + FA_BLOCK * Dv;
    float * row = acc + FA_QB * Dv;
    fa_row rows[QB];
    const char * mrows[QB] = {};
    float bm[QB], m_sub[QB], sum[QB], slopes[QB];
    int64_t lane_q1[QB], lane_q2[QB];
    int32_t bad[QB];
    const int64_t H = a.q->ne[2];
    for (int64_t ir = r0; ir < r1;) {
        /* the tile: rows ir .. ir + nq - 1 (query iq1 of head iq2, iq1 fastest), within this
         * thread's rows and reading one K/V head: the rk2 heads that share it are adjacent */
        const int64_t iq2_0 = (ir / n1) % H, iq3 = ir / (n1 * H);
        const int64_t ik2 = iq2_0 / a.rk2, ik3 = iq3 / a.rk3;
        const int64_t run_end = n1 * (std::min<int64_t>(H, (ik2 + 1) * a.rk2) + H * iq3);
        const int64_t nq = std::min<int64_t>(std::min<int64_t>(QB, r1 - ir), run_end - ir);
        for (int64_t l = 0; l < QB; ++l) {  /* lanes past nq compute zeros, never read */
            const int64_t iq1 = (ir + l) % n1, iq2 = ((ir + l) / n1) % H;
            lane_q1[l] = iq1;
            lane_q2[l] = iq2;
            slopes[l] = alibi_slope(a.max_bias, iq2, a.H);
            const char * qrow = l < nq ? tptr(a.q, 0, iq1, iq2, iq3) : nullptr;
            for (int64_t i = 0; i < D; ++i) qt[i * QB + l] = qrow ? *(const float *)(qrow + i * a.q->nb[0]) : 0.0f;
            if (l < nq && a.mask) mrows[l] = tptr(a.mask, 0, iq1, iq2 % a.mask->ne[2], iq3 % a.mask->ne[3]);
            rows[l] = fa_row();
        }
        std::fill(acc, acc + nq * Dv, 0.0f);
        for (int64_t j = 0; a.mask && nq < QB && j < FA_BLOCK; ++j)
            for (int64_t l = nq; l < QB; ++l) mt[j * QB + l] = -INFINITY;
        for (int64_t c0 = 0; c0 < a.n_kv; c0 += FA_BLOCK) {
            const int64_t nc = std::min<int64_t>(FA_BLOCK, a.n_kv - c0);
            if (a.mask && fa_tile_mask<QB>(p.K, a, mrows, nq, slopes, c0, nc, row, mt)) continue;
            fa_rows_f32(p.K, a.k, c0, nc, ik2, ik3, kf, a.v, c0, c0 + nc);  /* and this block's V rows */
            tk.scores(nc, D, kf, qt, st);
            float scale = a.scale;
            if (a.softcap != 0.0f) {  /* s = softcap tanh(dot scale), then the mask */
                for (int64_t j = 0; j < nc * QB; ++j) st[j] = a.softcap * std::tanh(st[j] * a.scale);
                scale = 1.0f;
            }
            tk.finish(nc, scale, a.mask ? mt : nullptr, st, bm, bad);
            /* per query: fold the tile in (fa_weights' steps, its exps below for all lanes) */
            bool any = false;
            for (int64_t l = 0; l < QB; ++l) {
                fa_row & r = rows[l];
                m_sub[l] = 0.0f;
                sum[l] = 0.0f;
                if (l >= nq) continue;
                r.nan |= bad[l] != 0;
                if (r.nan || bm[l] == -INFINITY) continue;
                if (bm[l] > r.M) {
                    const float ms = std::exp(r.M - bm[l]);
                    for (int64_t i = 0; i < Dv; ++i) acc[l * Dv + i] *= ms;
                    r.S *= ms;
                    r.M = bm[l];
                }
                m_sub[l] = r.M;
                sum[l] = r.S;
                any = true;
            }
            if (!any) continue;
            tk.sub(nc, m_sub, st);
            if (p.K->act) p.K->act->exp(nc * QB, st, st);
            else for (int64_t j = 0; j < nc * QB; ++j) st[j] = std::exp(st[j]);
            tk.sum(nc, st, sum);
            fa_rows_f32(p.K, a.v, c0, nc, ik2, ik3, vf, a.k, c0 + FA_BLOCK, a.n_kv);  /* and the next block's K rows */
            for (int64_t l = 0; l < nq; ++l) {
                fa_row & r = rows[l];
                if (r.nan || bm[l] == -INFINITY) continue;
                tk.accum(nc, Dv, st + l, vf, acc + l * Dv);
                r.S = sum[l];
            }
        }
        for (int64_t l = 0; l < nq; ++l) fa_store(dst, rows[l], acc + l * Dv, Dv, lane_q1[l], lane_q2[l], iq3);
        ir += nq;
    }
}

static void op_flash_attn_ext(const cparams & p, tsr_tensor * dst) {
    const fa_args a = fa_args_of(dst);
    int64_t r0, r1;
    split_rows(a.q->ne[1] * a.q->ne[2] * a.q->ne[3], p.ith, p.nth, r0, r1);
    if (fa_tiled(dst) && fa_queries_per_kv_head(dst) <= FA_QB_DECODE) fa_tiles<FA_QB_DECODE>(p, dst, a, r0, r1);
    else if (fa_tiled(dst)) fa_tiles<FA_QB>(p, dst, a, r0, r1);
    else fa_one_query_at_a_time(p, dst, a, r0, r1);
}

} // namespace tcpu
} // namespace
