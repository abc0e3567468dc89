/*
 * ops_models.inl - the CPU ops of model families beyond decoder-only LLMs (issue 17 part B):
 * expert-indexed mat-mul, depthwise and transposed convolutions, reflection padding, roll,
 * timestep embeddings, Mamba's ssm_conv / ssm_scan, RWKV 6/7 and gated linear attention
 * (conventions: ops_elementwise.inl).
 */
namespace {
namespace tcpu {

/* ---- mul_mat_id ------------------------------------------------------------------------------ */

/* The (id, token) pairs of a mul_mat_id grouped by expert, so that every expert's rows pass
 * through the cache once for all the tokens that chose it (a decode step reads only the
 * experts it uses, each once). An expert chosen by few pairs uses the dot-product kernels,
 * one chosen by many the GEMM mul_mat would take for the type; each src1 row is prepared as
 * its expert's path reads it (K-quants: Q8_K for the dots, yq8 blocks for most GEMMs; a
 * CPU_REPACK word layout: Q8_K in word order for its dots). Workspace, in order: the map
 * (offsets and pair order), the src1 rows prepared in grouped order, the results in grouped
 * order, per-thread GEMM panels. */
struct mmid_plan {
    mm_plan dot, gemm;         /* how src1 rows are prepared for either path (no GEMM: dot) */
    const gemm_impl * g;       /* the GEMM for experts with many pairs, or NULL */
    int64_t gemm_min_pairs;    /* from how many pairs an expert takes it (gemm_min_cols) */
    bool a_words;              /* the experts in a CPU_REPACK word layout: both paths read it as it is */
    int64_t n_expert, n_pairs;
    size_t y_row;              /* the larger of the two paths' rows */
    size_t map_bytes, y_bytes, c_bytes, thread_bytes;
};

/* src1 rows prepared for weights of type ta (in a word layout: a_words) read by g (NULL: K's
 * dot-product kernels); float weights' rows are F32, copied in grouped order. */
static mm_plan mmid_row_plan(const kernels * K, enum tsr_type ta, bool a_words, const gemm_impl * g, int64_t Kd) {
    mm_plan y{};
    y.ta = ta;
    y.a_words = a_words;
    y.g = g;
    mm_set_y_format(y, K, g, Kd);
    y.y_conv = !y.y_q8 && !y.y_q8k;
    if (y.y_conv) y.y_row = (size_t)Kd * 4;
    return y;
}

static mmid_plan mmid_make_plan(const tsr_tensor * dst, const kernels * K) {
    const tsr_tensor * as = dst->src[0];
    const tsr_tensor * ids = dst->src[2];
    mmid_plan pl{};
    pl.n_expert = as->ne[2];
    pl.n_pairs = ids->ne[0] * ids->ne[1];
    const int64_t Kd = as->ne[0];
    pl.a_words = is_words_repacked(as);
    pl.gemm_min_pairs = gemm_min_cols(as->type, pl.a_words);
    pl.g = pl.n_pairs >= pl.gemm_min_pairs ? gemm_for(K, as->type) : nullptr;  /* else no expert has enough pairs */
    pl.dot = mmid_row_plan(K, as->type, pl.a_words, nullptr, Kd);
    pl.gemm = pl.g ? mmid_row_plan(K, as->type, pl.a_words, pl.g, Kd) : pl.dot;
    pl.y_row = std::max(pl.dot.y_row, pl.gemm.y_row);
    pl.map_bytes = align_up(sizeof(int32_t) * (size_t)(3 * (pl.n_expert + 1) + 2 * pl.n_pairs), 64);
    pl.y_bytes = align_up(pl.y_row * (size_t)pl.n_pairs, 64);
    pl.c_bytes = align_up((size_t)(as->ne[1] * pl.n_pairs) * 4, 64);
    pl.thread_bytes = gemm_thread_bytes(pl.g, pl.n_pairs);
    return pl;
}

/* An expert with cnt pairs goes through the GEMM (else the dot-product kernels). */
static inline bool mmid_uses_gemm(const mmid_plan & pl, int64_t cnt) { return pl.g && cnt >= pl.gemm_min_pairs; }

static size_t mmid_work_size(const tsr_tensor * dst, const kernels * K, int nth) {
    const mmid_plan pl = mmid_make_plan(dst, K);
    return pl.map_bytes + pl.y_bytes + pl.c_bytes + pl.thread_bytes * (size_t)nth;
}

/* The map in the workspace: offs[e]..offs[e+1] index the pairs of expert e in `order`
 * (pair = slot + n_used * token), pos[pair] is where a pair sits in that order (-1: a bad
 * id), used[0..n) lists the n experts with pairs and used[n_expert] holds n. */
struct mmid_map {
    int32_t * offs;    /* n_expert + 1 */
    int32_t * used;    /* n_expert + 1 */
    int32_t * cursor;  /* n_expert + 1: the counting sort's next free place per expert */
    int32_t * order;   /* n_pairs */
    int32_t * pos;     /* n_pairs */
};

static mmid_map mmid_map_at(uint8_t * w, int64_t n_expert, int64_t n_pairs) {
    mmid_map m;
    m.offs = (int32_t *)w;
    m.used = m.offs + n_expert + 1;
    m.cursor = m.used + n_expert + 1;
    m.order = m.cursor + n_expert + 1;
    m.pos = m.order + n_pairs;
    return m;
}

static inline int32_t mmid_id(const tsr_tensor * ids, int64_t pair) {
    return *(const int32_t *)tptr(ids, pair % ids->ne[0], pair / ids->ne[0], 0, 0);
}

/* Thread 0: group the pairs by expert (a counting sort). An id out of range fails the graph
 * with a message naming it (the first one); its pair is left out and its row becomes NaN. */
static void mmid_group(const cparams & p, const tsr_tensor * dst, const mmid_map & m, int64_t n_expert) {
    const tsr_tensor * ids = dst->src[2];
    const int64_t n_pairs = ids->ne[0] * ids->ne[1];
    for (int64_t e = 0; e <= n_expert; ++e) m.offs[e] = 0;
    for (int64_t pair = 0; pair < n_pairs; ++pair) {
        const int32_t id = mmid_id(ids, pair);
        if (id >= 0 && id < n_expert) {
            m.offs[id + 1]++;
        } else if (p.failed && !p.failed->exchange(true)) {
            tsr_set_error("CPU backend: mul_mat_id '%s': expert id %d at ids[%lld, %lld] is outside [0, %lld)", dst->name, id,
                          (long long)(pair % ids->ne[0]), (long long)(pair / ids->ne[0]), (long long)n_expert);
        }
    }
    int32_t n_used_experts = 0;
    for (int64_t e = 0; e < n_expert; ++e) {
        if (m.offs[e + 1] > 0) m.used[n_used_experts++] = (int32_t)e;
        m.offs[e + 1] += m.offs[e];
        m.cursor[e] = m.offs[e];
    }
    m.used[n_expert] = n_used_experts;
    for (int64_t pair = 0; pair < n_pairs; ++pair) {
        const int32_t id = mmid_id(ids, pair);
        const bool ok = id >= 0 && id < n_expert;
        m.pos[pair] = ok ? m.cursor[id]++ : -1;
        if (ok) m.order[m.pos[pair]] = (int32_t)pair;
    }
}

static void op_mul_mat_id(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * as = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    const tsr_tensor * ids = dst->src[2];
    const mmid_plan pl = mmid_make_plan(dst, p.K);
    const int64_t Kd = as->ne[0], M = as->ne[1], n_used = ids->ne[0];
    const mmid_map m = mmid_map_at(p.wdata, pl.n_expert, pl.n_pairs);
    uint8_t * yw = p.wdata + pl.map_bytes;
    float * cw = (float *)(yw + pl.y_bytes);
    uint8_t * tw = (uint8_t *)cw + pl.c_bytes + pl.thread_bytes * (size_t)p.ith;

    /* phase 1: thread 0 groups the pairs */
    if (p.ith == 0) mmid_group(p, dst, m, pl.n_expert);
    barrier(p);
    const int32_t n_used_experts = m.used[pl.n_expert];
    const int64_t n_grouped = m.offs[pl.n_expert];

    /* phase 2: src1 rows prepared in grouped order, each as its expert's path reads it */
    int64_t r0, r1;
    split_rows(n_grouped, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t pair = m.order[r];
        const int32_t e = mmid_id(ids, pair);
        const mm_plan & y = mmid_uses_gemm(pl, m.offs[e + 1] - m.offs[e]) ? pl.gemm : pl.dot;
        mm_prepare_y_row(p.K, y, b, (pair % n_used) % b->ne[1], pair / n_used, 0, yw + (size_t)r * pl.y_row);
    }
    barrier(p);

    /* phase 3: items = (used expert, M chunk), taken from the shared counter; each expert's
     * rows are read once, for all its pairs */
    const int64_t mr = pl.g ? pl.g->mr : 16;
    int64_t mchunks = p.nth == 1 ? 1 : std::max<int64_t>(1, (4 * p.nth + n_used_experts - 1) / std::max(1, n_used_experts));
    mchunks = std::min<int64_t>(mchunks, std::max<int64_t>(1, M / mr));
    int64_t csize = (M + mchunks - 1) / mchunks;
    csize = (csize + mr - 1) / mr * mr;
    mchunks = (M + csize - 1) / csize;
    const int64_t nitems = n_used_experts * mchunks;
    for (int64_t it = p.nth == 1 ? 0 : p.tp->chunk.fetch_add(1, std::memory_order_relaxed); it < nitems;
         it = p.nth == 1 ? it + 1 : p.tp->chunk.fetch_add(1, std::memory_order_relaxed)) {
        const int32_t e = m.used[it / mchunks];
        const int64_t mc = it % mchunks;
        const int64_t g0 = m.offs[e], cnt = m.offs[e + 1] - g0;
        mm_args a;
        a.ta = as->type;
        a.A = (const char *)as->data + e * as->nb[2];
        a.lda = as->nb[1];
        a.B = (const char *)yw + (size_t)g0 * pl.y_row;
        a.ldb = pl.y_row;
        a.M = M; a.N = cnt; a.K = Kd;
        a.C = cw + (size_t)g0 * (size_t)M;
        a.ldc = (size_t)M;
        a.g = mmid_uses_gemm(pl, cnt) ? pl.g : nullptr;
        a.a_words = pl.a_words;
        mm_range(p.K, a, mc * csize, std::min<int64_t>(M, (mc + 1) * csize), tw);
    }
    barrier(p);

    /* phase 4: results to their (slot, token) places */
    split_rows(pl.n_pairs, p.ith, p.nth, r0, r1);
    for (int64_t pair = r0; pair < r1; ++pair) {
        float * d = (float *)tptr(dst, 0, pair % n_used, pair / n_used, 0);
        const int32_t at = m.pos[pair];
        if (at >= 0) std::memcpy(d, cw + (size_t)at * (size_t)M, (size_t)M * 4);
        else for (int64_t i = 0; i < M; ++i) d[i] = NAN;
    }
}

/* ---- depthwise convolution (direct) ----------------------------------------------------------- */

/* A band of output rows of one (channel, image) plane reads a zero-padded copy of the input
 * rows it needs, in the thread's scratch: the tap loops then have no bounds tests, any input
 * type or layout is converted once, and the copy (at most DW_BAND_FLOATS) stays in L1/L2
 * while each input value is read KH*KW times. */
static const int64_t DW_BAND_FLOATS = 16384;
static const int64_t DW_MAX_LANES = 16;   /* widest vector (AVX-512): the last vector of a row may read this far */

struct dw_layout {
    int64_t PW;          /* floats per padded row; padded x = iw + p0 */
    int64_t max_rows;    /* output rows per band, at most */
};

static int64_t dw_band_in_rows(const conv_geom & g, int64_t out_rows) {
    return (out_rows - 1) * g.s1 + (g.KH - 1) * g.d1 + 1;
}

static dw_layout dw_make_layout(const conv_geom & g) {
    dw_layout l;
    const int64_t ow_last = g.s0 == 1 ? (g.OW + DW_MAX_LANES - 1) / DW_MAX_LANES * DW_MAX_LANES - 1 : (g.OW - 1) * g.s0;
    l.PW = ow_last + (g.KW - 1) * g.d0 + 1;
    const int64_t fit = (DW_BAND_FLOATS / l.PW - dw_band_in_rows(g, 1)) / g.s1 + 1;
    l.max_rows = std::max<int64_t>(1, std::min<int64_t>(g.OH, fit));
    return l;
}

static size_t dw_thread_floats(const tsr_tensor * dst) {
    const conv_geom g = conv_geometry(dst, true);
    const dw_layout l = dw_make_layout(g);
    return (size_t)(g.KW * g.KH + dw_band_in_rows(g, l.max_rows) * l.PW);
}

/* input rows ih0 .. ih0 + rows - 1 of plane (c, n), zero outside the image, into pad */
static void dw_fill_band(const tsr_tensor * in, const conv_geom & g, int64_t PW, int64_t ih0, int64_t rows, int64_t c, int64_t n,
                         float * pad) {
    const bool dense_row = in->type == TSR_TYPE_F32 && in->nb[0] == 4;
    const int64_t x0 = std::min<int64_t>(g.p0, PW), x1 = std::min<int64_t>(g.p0 + g.IW, PW);
    for (int64_t y = 0; y < rows; ++y) {
        float * row = pad + y * PW;
        const int64_t ih = ih0 + y;
        if (ih < 0 || ih >= g.IH) {
            std::memset(row, 0, (size_t)PW * 4);
            continue;
        }
        std::memset(row, 0, (size_t)x0 * 4);
        if (dense_row) std::memcpy(row + x0, tptr(in, 0, ih, c, n), (size_t)(x1 - x0) * 4);
        else
            for (int64_t x = x0; x < x1; ++x) row[x] = ld(in->type, tptr(in, x - g.p0, ih, c, n));
        std::memset(row + x1, 0, (size_t)(PW - x1) * 4);
    }
}

/* Output rows with stride 1 along W: L outputs per vector, 4 vectors per step so four FMA
 * chains are in flight; each tap is a shifted unaligned load of a padded row. V is a GCC
 * vector type; the callers compile this body for their ISA. */
template <class V>
static TSR_ALWAYS_INLINE void dw_rows_s1_body(const conv_geom & g, const float * ker, const float * pad, int64_t PW, int64_t rows,
                                              float * out) {
    constexpr int64_t L = (int64_t)(sizeof(V) / sizeof(float));
    for (int64_t r = 0; r < rows; ++r) {
        const float * top = pad + r * g.s1 * PW;
        float * orow = out + r * g.OW;
        int64_t ow = 0;
        for (; ow + 4 * L <= g.OW; ow += 4 * L) {
            V a0 = {}, a1 = {}, a2 = {}, a3 = {};
            for (int64_t kh = 0; kh < g.KH; ++kh)
                for (int64_t kw = 0; kw < g.KW; ++kw) {
                    const V w = V{} + ker[kh * g.KW + kw];
                    const float * s = top + kh * g.d1 * PW + kw * g.d0 + ow;
                    V x0, x1, x2, x3;
                    std::memcpy(&x0, s, sizeof(V)); std::memcpy(&x1, s + L, sizeof(V));
                    std::memcpy(&x2, s + 2 * L, sizeof(V)); std::memcpy(&x3, s + 3 * L, sizeof(V));
                    a0 += w * x0; a1 += w * x1; a2 += w * x2; a3 += w * x3;
                }
            std::memcpy(orow + ow, &a0, sizeof(V)); std::memcpy(orow + ow + L, &a1, sizeof(V));
            std::memcpy(orow + ow + 2 * L, &a2, sizeof(V)); std::memcpy(orow + ow + 3 * L, &a3, sizeof(V));
        }
        /* the rest a vector at a time; the padded row is long enough for the last one's loads */
        for (; ow < g.OW; ow += L) {
            V a = {};
            for (int64_t kh = 0; kh < g.KH; ++kh)
                for (int64_t kw = 0; kw < g.KW; ++kw) {
                    V x;
                    std::memcpy(&x, top + kh * g.d1 * PW + kw * g.d0 + ow, sizeof(V));
                    a += (V{} + ker[kh * g.KW + kw]) * x;
                }
            std::memcpy(orow + ow, &a, (size_t)std::min<int64_t>(L, g.OW - ow) * sizeof(float));
        }
    }
}

typedef void (*dw_rows_fn)(const conv_geom &, const float *, const float *, int64_t, int64_t, float *);

/* any stride along W: the taps are strided loads, left to the compiler */
static TSR_ALWAYS_INLINE void dw_rows_strided_body(const conv_geom & g, const float * ker, const float * pad, int64_t PW, int64_t rows,
                                                   float * out) {
    for (int64_t r = 0; r < rows; ++r) {
        float * orow = out + r * g.OW;
        for (int64_t ow = 0; ow < g.OW; ++ow) orow[ow] = 0.0f;
        for (int64_t kh = 0; kh < g.KH; ++kh)
            for (int64_t kw = 0; kw < g.KW; ++kw) {
                const float w = ker[kh * g.KW + kw];
                const float * s = pad + (r * g.s1 + kh * g.d1) * PW + kw * g.d0;
                for (int64_t ow = 0; ow < g.OW; ++ow) orow[ow] += w * s[ow * g.s0];
            }
    }
}
static void dw_rows_strided(const conv_geom & g, const float * ker, const float * pad, int64_t PW, int64_t rows, float * out) {
    dw_rows_strided_body(g, ker, pad, PW, rows, out);
}
/* 4 lanes: SSE2 on any x86-64, NEON on aarch64 */
static void dw_rows_s1_v4(const conv_geom & g, const float * ker, const float * pad, int64_t PW, int64_t rows, float * out) {
    dw_rows_s1_body<vf32x4>(g, ker, pad, PW, rows, out);
}
#if defined(TSR_CPU_HAVE_X86_KERNELS)
TSR_TARGET_AVX2 static void dw_rows_strided_avx2(const conv_geom & g, const float * ker, const float * pad, int64_t PW, int64_t rows,
                                                 float * out) {
    dw_rows_strided_body(g, ker, pad, PW, rows, out);
}
TSR_TARGET_AVX2 static void dw_rows_s1_avx2(const conv_geom & g, const float * ker, const float * pad, int64_t PW, int64_t rows,
                                            float * out) {
    dw_rows_s1_body<vf32x8>(g, ker, pad, PW, rows, out);
}
TSR_TARGET_AVX512 static void dw_rows_s1_avx512(const conv_geom & g, const float * ker, const float * pad, int64_t PW, int64_t rows,
                                                float * out) {
    dw_rows_s1_body<vf32x16>(g, ker, pad, PW, rows, out);
}
#endif
static dw_rows_fn dw_rows_for(const kernels * K, const conv_geom & g) {
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    if (g.s0 != 1) return K->isa == TSR_CPU_ISA_AVX2 || K->isa == TSR_CPU_ISA_AVX512 ? dw_rows_strided_avx2 : dw_rows_strided;
    if (K->isa == TSR_CPU_ISA_AVX512) return dw_rows_s1_avx512;
    if (K->isa == TSR_CPU_ISA_AVX2) return dw_rows_s1_avx2;
#endif
    (void)K;
    return g.s0 != 1 ? dw_rows_strided : dw_rows_s1_v4;
}

/* items: (channel, image, band of output rows); bands keep the padded copy in cache and,
 * when there are few planes, give every thread work */
static void op_conv_2d_dw(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * k = dst->src[0];
    const tsr_tensor * in = dst->src[1];
    const conv_geom g = conv_geometry(dst, true);
    const dw_layout l = dw_make_layout(g);
    float * ker = thread_floats(p, dw_thread_floats(dst));
    float * pad = ker + g.KW * g.KH;
    const int64_t C = in->ne[2], planes = C * g.N;
    const int64_t for_threads = std::min<int64_t>(g.OH, (2 * p.nth + planes - 1) / planes);
    const int64_t bands = std::max<int64_t>(for_threads, (g.OH + l.max_rows - 1) / l.max_rows);
    const int64_t band_rows = (g.OH + bands - 1) / bands;
    const dw_rows_fn rows_fn = dw_rows_for(p.K, g);
    int64_t r0, r1;
    split_rows(planes * bands, p.ith, p.nth, r0, r1);
    int64_t loaded = -1;
    for (int64_t it = r0; it < r1; ++it) {
        const int64_t plane_id = it / bands, band = it % bands;
        const int64_t c = plane_id % C, n = plane_id / C;
        const int64_t oh0 = band * band_rows, oh1 = std::min<int64_t>(g.OH, oh0 + band_rows);
        if (oh0 >= oh1) continue;
        if (plane_id != loaded) {
            for (int64_t kh = 0; kh < g.KH; ++kh)
                for (int64_t kw = 0; kw < g.KW; ++kw) ker[kh * g.KW + kw] = ld(k->type, tptr(k, kw, kh, 0, c));
            loaded = plane_id;
        }
        dw_fill_band(in, g, l.PW, oh0 * g.s1 - g.p1, dw_band_in_rows(g, oh1 - oh0), c, n, pad);
        rows_fn(g, ker, pad, l.PW, oh1 - oh0, (float *)tptr(dst, 0, oh0, c, n));
    }
}

/* ---- transposed convolutions (GEMM + col2im) ------------------------------------------------- */

/* 1-D is the 2-D case with H = KH = 1. The products of every input pixel with every kernel
 * tap are one GEMM, cols[pixel][(oc, kh, kw)] = sum_ic input[pixel][ic] * kernel[(oc, kh, kw)][ic],
 * in the workspace; col2im then adds the taps landing on each output pixel, a thread per
 * output channel plane, so no two threads write the same output. */
struct tconv_plan {
    bool is2d;
    int s0, s1, p0, p1, d0, d1;
    int64_t KW, KH, OC, IC, W, H, N, OW, OH;
    int64_t M, P;                 /* GEMM rows (OC*KH*KW) and columns (N*H*W input pixels) */
    const gemm_impl * gi;
    size_t kern_bytes, in_bytes, cols_bytes, thread_bytes;
};

static tconv_plan tconv_make_plan(const tsr_tensor * dst, const kernels * K) {
    const tsr_tensor * k = dst->src[0];
    const tsr_tensor * in = dst->src[1];
    tconv_plan c{};
    c.is2d = dst->op == TSR_OP_CONV_TRANSPOSE_2D;
    if (c.is2d) {
        c.s0 = c.s1 = tsr_get_op_params_i32(dst, 0);
        c.d0 = c.d1 = 1;
        c.KW = k->ne[0]; c.KH = k->ne[1]; c.OC = k->ne[2]; c.IC = k->ne[3];
        c.W = in->ne[0]; c.H = in->ne[1]; c.N = in->ne[3];
        c.OW = dst->ne[0]; c.OH = dst->ne[1];
    } else {
        c.s0 = tsr_get_op_params_i32(dst, 0); c.p0 = tsr_get_op_params_i32(dst, 1); c.d0 = tsr_get_op_params_i32(dst, 2);
        c.s1 = c.d1 = 1;
        c.KW = k->ne[0]; c.KH = 1; c.OC = k->ne[1]; c.IC = k->ne[2];
        c.W = in->ne[0]; c.H = 1; c.N = in->ne[2];
        c.OW = dst->ne[0]; c.OH = 1;
    }
    c.M = c.OC * c.KH * c.KW;
    c.P = c.N * c.H * c.W;
    c.gi = c.P >= GEMM_MIN_N ? K->gemm[SLOT_F32] : nullptr;
    c.kern_bytes = align_up((size_t)(c.M * c.IC) * 4, 64);
    c.in_bytes = align_up((size_t)(c.P * c.IC) * 4, 64);
    c.cols_bytes = align_up((size_t)(c.P * c.M) * 4, 64);
    c.thread_bytes = gemm_thread_bytes(c.gi, c.P);
    return c;
}

static size_t tconv_work_size(const tsr_tensor * dst, const kernels * K, int nth) {
    const tconv_plan c = tconv_make_plan(dst, K);
    return c.kern_bytes + c.in_bytes + c.cols_bytes + c.thread_bytes * (size_t)nth;
}

static inline const char * tconv_kernel_at(const tsr_tensor * k, const tconv_plan & c, int64_t kw, int64_t kh, int64_t oc, int64_t ic) {
    return c.is2d ? tptr(k, kw, kh, oc, ic) : tptr(k, kw, oc, ic, 0);
}
static inline const char * tconv_input_at(const tsr_tensor * in, const tconv_plan & c, int64_t w, int64_t h, int64_t ic, int64_t n) {
    return c.is2d ? tptr(in, w, h, ic, n) : tptr(in, w, ic, n, 0);
}

/* Output plane (oc, n): every input pixel's taps added where they land. */
static void tconv_col2im(const tconv_plan & c, const float * cols, int64_t oc, int64_t n, tsr_tensor * dst) {
    float * out = c.is2d ? (float *)tptr(dst, 0, 0, oc, n) : (float *)tptr(dst, 0, oc, n, 0);
    const size_t ros = c.is2d ? dst->nb[1] / 4 : 0;   /* output row stride in floats */
    for (int64_t oh = 0; oh < c.OH; ++oh)
        for (int64_t ow = 0; ow < c.OW; ++ow) out[oh * ros + ow] = 0.0f;
    for (int64_t h = 0; h < c.H; ++h)
        for (int64_t kh = 0; kh < c.KH; ++kh) {
            const int64_t oh = h * c.s1 + kh * c.d1 - c.p1;
            if (oh < 0 || oh >= c.OH) continue;
            for (int64_t w = 0; w < c.W; ++w) {
                const float * col = cols + (size_t)((n * c.H + h) * c.W + w) * (size_t)c.M + (size_t)((oc * c.KH + kh) * c.KW);
                float * orow = out + oh * ros;
                const int64_t ow0 = w * c.s0 - c.p0;
                for (int64_t kw = 0; kw < c.KW; ++kw) {
                    const int64_t ow = ow0 + kw * c.d0;
                    if (ow >= 0 && ow < c.OW) orow[ow] += col[kw];
                }
            }
        }
}

static void op_conv_transpose(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * k = dst->src[0];
    const tsr_tensor * in = dst->src[1];
    const tconv_plan c = tconv_make_plan(dst, p.K);
    float * kern = (float *)p.wdata;
    float * inp = (float *)(p.wdata + c.kern_bytes);
    float * cols = (float *)(p.wdata + c.kern_bytes + c.in_bytes);
    uint8_t * tw = p.wdata + c.kern_bytes + c.in_bytes + c.cols_bytes + c.thread_bytes * (size_t)p.ith;
    /* phase 1: kernel rows (oc, kh, kw) and input pixels (n, h, w) as dense F32 rows over ic */
    int64_t r0, r1;
    split_rows(c.M, p.ith, p.nth, r0, r1);
    for (int64_t m = r0; m < r1; ++m) {
        const int64_t kw = m % c.KW, kh = (m / c.KW) % c.KH, oc = m / (c.KW * c.KH);
        for (int64_t ic = 0; ic < c.IC; ++ic) kern[m * c.IC + ic] = ld(k->type, tconv_kernel_at(k, c, kw, kh, oc, ic));
    }
    split_rows(c.P, p.ith, p.nth, r0, r1);
    for (int64_t px = r0; px < r1; ++px) {
        const int64_t w = px % c.W, h = (px / c.W) % c.H, n = px / (c.W * c.H);
        for (int64_t ic = 0; ic < c.IC; ++ic) inp[px * c.IC + ic] = ld(in->type, tconv_input_at(in, c, w, h, ic, n));
    }
    barrier(p);
    /* phase 2: cols[px][m], the kernel rows split between threads */
    mm_args a;
    a.ta = TSR_TYPE_F32;
    a.A = (const char *)kern; a.lda = (size_t)c.IC * 4;
    a.B = (const char *)inp; a.ldb = (size_t)c.IC * 4;
    a.M = c.M; a.N = c.P; a.K = c.IC;
    a.C = cols; a.ldc = (size_t)c.M;
    a.g = c.gi;
    mm_range_split(p, a, tw);
    barrier(p);
    /* phase 3: col2im per output plane */
    split_rows(c.OC * c.N, p.ith, p.nth, r0, r1);
    for (int64_t pl = r0; pl < r1; ++pl) tconv_col2im(c, cols, pl % c.OC, pl / c.OC, dst);
}

/* ---- padding and rotation ----------------------------------------------------------------------- */

static void op_pad_reflect_1d(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int64_t p0 = tsr_get_op_params_i32(dst, 0), n0 = src->ne[0];
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        float * d = (float *)tptr(dst, 0, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            int64_t j = i0 - p0;                       /* mirrored at 0 and at n0 - 1 */
            if (j < 0) j = -j;
            else if (j >= n0) j = 2 * (n0 - 1) - j;
            d[i0 * (dst->nb[0] / 4)] = *(const float *)tptr(src, j, i1, i2, i3);
        }
    }
}

static inline int64_t wrap_index(int64_t i, int64_t shift, int64_t n) {
    int64_t j = (i - shift) % n;
    return j < 0 ? j + n : j;
}

static void op_roll(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    int64_t sh[4];
    for (int i = 0; i < 4; ++i) sh[i] = tsr_get_op_params_i32(dst, (uint32_t)i);
    const size_t es = tsr_type_size(dst->type);
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const int64_t j1 = wrap_index(i1, sh[1], src->ne[1]), j2 = wrap_index(i2, sh[2], src->ne[2]), j3 = wrap_index(i3, sh[3], src->ne[3]);
        char * d = tptr(dst, 0, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0)
            std::memcpy(d + i0 * dst->nb[0], tptr(src, wrap_index(i0, sh[0], src->ne[0]), j1, j2, j3), es);
    }
}

/* ---- positions ------------------------------------------------------------------------------------ */

static void op_timestep_embedding(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * ts = dst->src[0];
    const int dim = tsr_get_op_params_i32(dst, 0), max_period = tsr_get_op_params_i32(dst, 1);
    const int half = dim / 2;
    int64_t r0, r1;
    split_rows(ts->ne[0], p.ith, p.nth, r0, r1);
    for (int64_t i = r0; i < r1; ++i) {
        const float t = *(const float *)tptr(ts, i, 0, 0, 0);
        float * d = (float *)tptr(dst, 0, i, 0, 0);
        for (int j = 0; j < half; ++j) {
            const float arg = t * std::exp(-std::log((float)max_period) * (float)j / (float)half);
            d[j] = std::cos(arg);
            d[j + half] = std::sin(arg);
        }
        if (dim % 2 != 0) d[2 * half] = 0.0f;
    }
}

/* M-RoPE / vision RoPE: the angle of pair i0/2 comes from the position stream its section
 * names (time, height, width, extra), every stream advancing by theta_scale per pair; vision
 * restarts a stream's angle where its section starts. Then ggml's rope_yarn per pair. */
static inline bool rope_is_multi(const tsr_tensor * t) { return (tsr_get_op_params_i32(t, 2) & TSR_ROPE_TYPE_MROPE) != 0; }

/* The position stream of a sector: IMROPE deals sectors to time, height, width in turn while
 * each still has pairs (3 * sections[s] bounds stream s), the rest to extra; the other modes
 * take the sections one after another. */
static inline int mrope_stream(int sector, const int sec[4], bool imrope) {
    if (imrope) {
        const int s = sector % 3;
        return sector < 3 * sec[s] ? s : 3;
    }
    int stream = 0;
    for (int edge = sec[0]; stream < 3 && sector >= edge; edge += sec[stream]) ++stream;
    return stream;
}

static void mrope_cache(const tsr_tensor * dst, const float pos[4], float * cache) {
    const tsr_tensor * ff = dst->src[2];
    const int n_dims = tsr_get_op_params_i32(dst, 1);
    const bool vision = tsr_get_op_params_i32(dst, 2) == TSR_ROPE_TYPE_VISION;
    const bool imrope = tsr_get_op_params_i32(dst, 2) == TSR_ROPE_TYPE_IMROPE;
    const float freq_base = tsr_get_op_params_f32(dst, 5), freq_scale = tsr_get_op_params_f32(dst, 6);
    const float ext_factor = tsr_get_op_params_f32(dst, 7), attn_factor = tsr_get_op_params_f32(dst, 8);
    int sec[4];
    for (int i = 0; i < 4; ++i) sec[i] = tsr_get_op_params_i32(dst, 11 + (uint32_t)i);
    const int sect_dims = sec[0] + sec[1] + sec[2] + sec[3];
    const int start[4] = {0, sec[0], sec[0] + sec[1], sec[0] + sec[1] + sec[2]};
    float corr[2];
    rope_yarn_corr_dims(n_dims, tsr_get_op_params_i32(dst, 4), freq_base, tsr_get_op_params_f32(dst, 9), tsr_get_op_params_f32(dst, 10), corr);
    const float theta_scale = std::pow(freq_base, -2.0f / (float)n_dims);
    float theta[4] = {pos[0], pos[1], pos[2], pos[3]};
    for (int64_t i0 = 0; i0 < dst->ne[0]; i0 += 2) {
        const int sector = (int)((i0 / 2) % sect_dims);
        const int stream = mrope_stream(sector, sec, imrope);
        if (vision && sector == start[stream]) theta[stream] = pos[stream];
        const float f = ff ? *(const float *)tptr(ff, i0 / 2, 0, 0, 0) : 1.0f;
        rope_yarn(theta[stream] / f, freq_scale, corr, i0, ext_factor, attn_factor, cache + i0);
        for (float & t : theta) t *= theta_scale;
    }
}

static void op_rope_multi(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const tsr_tensor * pos = dst->src[1];
    const int n_dims = tsr_get_op_params_i32(dst, 1);
    const bool vision = tsr_get_op_params_i32(dst, 2) == TSR_ROPE_TYPE_VISION;
    /* NEOX pairs (i, i + n_dims/2) over n_dims; vision: (i, i + n_dims) over the whole row */
    const int64_t n_rot = vision ? dst->ne[0] : n_dims, offset = vision ? n_dims : n_dims / 2;
    float * cache = thread_floats(p, (size_t)dst->ne[0] + 2);
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    int64_t cached = -1;
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        if (cached != i2) {
            float ps[4];
            for (int s = 0; s < 4; ++s) ps[s] = (float)*(const int32_t *)tptr(pos, i2 + s * src->ne[2], 0, 0, 0);
            mrope_cache(dst, ps, cache);
            cached = i2;
        }
        const char * s = tptr(src, 0, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        const size_t ss = src->nb[0], ds = dst->nb[0];
        for (int64_t i0 = 0; i0 < n_rot; i0 += 2) {
            const int64_t ia = i0 / 2, ib = ia + offset;
            const float x0 = ld(src->type, s + ia * ss), x1 = ld(src->type, s + ib * ss);
            st(dst->type, d + ia * ds, x0 * cache[i0] - x1 * cache[i0 + 1]);
            st(dst->type, d + ib * ds, x0 * cache[i0 + 1] + x1 * cache[i0]);
        }
        if (!vision)
            for (int64_t i0 = n_dims; i0 < dst->ne[0]; ++i0) st(dst->type, d + i0 * ds, ld(src->type, s + i0 * ss));
    }
}

/* ---- windows and relative positions ---------------------------------------------------------------- */

static void op_win_part(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int64_t npx = tsr_get_op_params_i32(dst, 0), w = tsr_get_op_params_i32(dst, 2);
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;   /* x and y in window i3 */
        row_index(dst, ir, i1, i2, i3);
        const int64_t x = (i3 % npx) * w + i1, y = (i3 / npx) * w + i2;
        float * d = (float *)tptr(dst, 0, i1, i2, i3);
        const bool inside = x < src->ne[1] && y < src->ne[2];
        for (int64_t c = 0; c < dst->ne[0]; ++c) d[c] = inside ? *(const float *)tptr(src, c, x, y, 0) : 0.0f;
    }
}

static void op_win_unpart(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int64_t w = tsr_get_op_params_i32(dst, 0), npx = (dst->ne[1] + w - 1) / w;
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t x, y, i3;
        row_index(dst, ir, x, y, i3);
        const float * s = (const float *)tptr(src, 0, x % w, y % w, (y / w) * npx + x / w);
        float * d = (float *)tptr(dst, 0, x, y, i3);
        for (int64_t c = 0; c < dst->ne[0]; ++c) d[c] = s[c];
    }
}

static void op_get_rel_pos(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int64_t kh = dst->ne[1];
    const size_t row = tsr_row_size(dst->type, dst->ne[0]);
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t k, q, i3;
        row_index(dst, ir, k, q, i3);
        std::memcpy(tptr(dst, 0, k, q, 0), tptr(src, 0, kh - 1 - k + q, 0, 0), row);
    }
}

static void op_add_rel_pos(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0], * pw = dst->src[1], * ph = dst->src[2];
    const int64_t W = pw->ne[0], n1 = pw->ne[1];
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const float * s = (const float *)tptr(a, 0, i1, i2, 0);
        const float * pwr = (const float *)tptr(pw, 0, i1 % n1, i1 / n1, i2);
        const float * phr = (const float *)tptr(ph, 0, i1 % n1, i1 / n1, i2);
        float * d = (float *)tptr(dst, 0, i1, i2, 0);
        for (int64_t y = 0; y < W; ++y)
            for (int64_t x = 0; x < W; ++x) d[x + W * y] = s[x + W * y] + phr[y] + pwr[x];
        (void)i3;
    }
}

/* ---- Mamba ---------------------------------------------------------------------------------------- */

static void op_ssm_conv(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * sx = dst->src[0];
    const tsr_tensor * c = dst->src[1];
    const int64_t d_conv = c->ne[0], d_inner = sx->ne[1], n_t = dst->ne[1], n_s = dst->ne[2];
    int64_t r0, r1;
    split_rows(d_inner, p.ith, p.nth, r0, r1);
    for (int64_t s = 0; s < n_s; ++s)
        for (int64_t t = 0; t < n_t; ++t) {
            float * out = (float *)tptr(dst, 0, t, s, 0);
            for (int64_t i = r0; i < r1; ++i) {
                const float * win = (const float *)tptr(sx, t, i, s, 0);
                const float * w = (const float *)tptr(c, 0, i, 0, 0);
                float sum = 0.0f;
                for (int64_t k = 0; k < d_conv; ++k) sum += win[k] * w[k];
                out[i] = sum;
            }
        }
}

/* ggml's softplus: log(1 + e^x), x itself past 20 where they agree in float. */
static inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

/* One state row of d_state: st = st_in * decay + b * x_dt (decay per element for Mamba-1,
 * one value for Mamba-2), returns st . c. Eight partial sums keep the loop vectorizable. */
static inline float ssm_state_row(int64_t n, const float * st_in, const float * decay, float decay1, const float * b, float x_dt,
                                  const float * c, float * st) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) {
            const float v = st_in[i + j] * (decay ? decay[i + j] : decay1) + b[i + j] * x_dt;
            st[i + j] = v;
            acc[j] += v * c[i + j];
        }
    float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; ++i) {
        const float v = st_in[i] * (decay ? decay[i] : decay1) + b[i] * x_dt;
        st[i] = v;
        sum += v * c[i];
    }
    return sum;
}

static size_t ssm_scan_thread_floats(const tsr_tensor * dst) { return (size_t)dst->src[0]->ne[0]; }

static void op_ssm_scan(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * s = dst->src[0], * x = dst->src[1], * dt = dst->src[2], * A = dst->src[3];
    const tsr_tensor * B = dst->src[4], * C = dst->src[5], * ids = dst->src[6];
    const int64_t ds = s->ne[0], hd = x->ne[0], nh = x->ne[1], nt = x->ne[2], nq = x->ne[3];
    const int64_t heads_per_group = nh / B->ne[1];
    const bool mamba1 = A->ne[0] != 1;
    float * decay = mamba1 ? thread_floats(p, ssm_scan_thread_floats(dst)) : nullptr;
    float * y_all = (float *)dst->data;
    float * st_all = y_all + tsr_nelements(x);
    const int64_t state_size = ds * hd * nh;
    int64_t h0, h1;
    split_rows(nh, p.ith, p.nth, h0, h1);
    for (int64_t q = 0; q < nq; ++q) {
        const int32_t id = *(const int32_t *)tptr(ids, q, 0, 0, 0);
        /* a bad id fails the graph; its sequence starts from zeros (ggml would read out of bounds) */
        const bool id_ok = id >= 0 && id < s->ne[3];
        if (!id_ok && p.ith == 0 && p.failed && !p.failed->exchange(true))
            tsr_set_error("CPU backend: ssm_scan '%s': state id %d of sequence %lld is outside [0, %lld)", dst->name, id,
                          (long long)q, (long long)s->ne[3]);
        float * st = st_all + q * state_size;
        for (int64_t h = h0; h < h1; ++h) {
            const float * st_in = id_ok ? (const float *)tptr(s, 0, 0, h, id) : nullptr;
            const int64_t g = h / heads_per_group;
            for (int64_t t = 0; t < nt; ++t) {
                const float dsp = softplus(*(const float *)tptr(dt, h, t, q, 0));
                const float * a = (const float *)tptr(A, 0, h, 0, 0);
                if (mamba1) for (int64_t i = 0; i < ds; ++i) decay[i] = std::exp(dsp * a[i]);
                const float decay1 = mamba1 ? 0.0f : std::exp(dsp * a[0]);
                const float * b = (const float *)tptr(B, 0, g, t, q);
                const float * c = (const float *)tptr(C, 0, g, t, q);
                const float * xr = (const float *)tptr(x, 0, h, t, q);
                float * y = y_all + ((q * nt + t) * nh + h) * hd;
                for (int64_t r = 0; r < hd; ++r) {
                    float * row = st + (h * hd + r) * ds;
                    const float * in = t == 0 ? (st_in ? st_in + r * ds : nullptr) : row;
                    if (!in) { for (int64_t i = 0; i < ds; ++i) row[i] = 0.0f; in = row; }
                    y[r] = ssm_state_row(ds, in, decay, decay1, b, xr[r] * dsp, c, row);
                }
            }
        }
    }
}

/* ---- linear attention: RWKV 6/7, gated linear attention ---------------------------------------------- */

/* Where a recurrence reads and writes: token rows [S, H] (head h at h*S), outputs y[t] of S*H,
 * states [S*S*H, n_seqs] after the outputs. The first token of a sequence reads the input
 * state, every later one the state the previous token wrote. Heads are independent: a
 * thread takes whole heads, for every token. */
struct lin_attn {
    int64_t S, H, T, per_seq;
    const float * state_in;
    float * y, * state_out;
    int64_t h0, h1;

    lin_attn(const cparams & p, tsr_tensor * dst, const tsr_tensor * tok, const tsr_tensor * state) {
        S = tok->ne[0]; H = tok->ne[1]; T = tok->ne[2];
        per_seq = T / state->ne[1];
        state_in = (const float *)state->data;
        y = (float *)dst->data;
        state_out = y + S * H * T;
        split_rows(H, p.ith, p.nth, h0, h1);
    }
    const float * prev(int64_t t, int64_t h) const {
        const int64_t off = (t / per_seq) * S * S * H + h * S * S;
        return t % per_seq == 0 ? state_in + off : state_out + off;
    }
    float * cur(int64_t t, int64_t h) const { return state_out + (t / per_seq) * S * S * H + h * S * S; }
    float * out(int64_t t, int64_t h) const { return y + (t * H + h) * S; }
};

static inline const float * tok_row(const tsr_tensor * x, int64_t t, int64_t h) { return (const float *)tptr(x, 0, h, t, 0); }

static void op_rwkv_wkv6(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * k = dst->src[0], * v = dst->src[1], * r = dst->src[2], * tf = dst->src[3], * td = dst->src[4];
    const lin_attn L(p, dst, k, dst->src[5]);
    for (int64_t t = 0; t < L.T; ++t)
        for (int64_t h = L.h0; h < L.h1; ++h) {
            const float * kt = tok_row(k, t, h), * vt = tok_row(v, t, h), * rt = tok_row(r, t, h), * dt = tok_row(td, t, h);
            const float * first = (const float *)tf->data + h * L.S;
            const float * prev = L.prev(t, h);
            float * cur = L.cur(t, h);
            float * y = L.out(t, h);
            for (int64_t j = 0; j < L.S; ++j) y[j] = 0.0f;
            for (int64_t i = 0; i < L.S; ++i) {
                const float ki = kt[i], ri = rt[i], fi = first[i], di = dt[i];
                const float * sp = prev + i * L.S;
                float * sc = cur + i * L.S;
                for (int64_t j = 0; j < L.S; ++j) {
                    const float kv = ki * vt[j];
                    const float old = sp[j];
                    y[j] += (kv * fi + old) * ri;
                    sc[j] = old * di + kv;
                }
            }
        }
}

static void op_gated_linear_attn(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * k = dst->src[0], * v = dst->src[1], * q = dst->src[2], * g = dst->src[3];
    const float scale = tsr_get_op_params_f32(dst, 0);
    const lin_attn L(p, dst, k, dst->src[4]);
    for (int64_t t = 0; t < L.T; ++t)
        for (int64_t h = L.h0; h < L.h1; ++h) {
            const float * kt = tok_row(k, t, h), * vt = tok_row(v, t, h), * qt = tok_row(q, t, h), * gt = tok_row(g, t, h);
            const float * prev = L.prev(t, h);
            float * cur = L.cur(t, h);
            float * y = L.out(t, h);
            for (int64_t j = 0; j < L.S; ++j) y[j] = 0.0f;
            for (int64_t i = 0; i < L.S; ++i) {
                const float ki = kt[i], qi = qt[i] * scale, gi = gt[i];
                const float * sp = prev + i * L.S;
                float * sc = cur + i * L.S;
                for (int64_t j = 0; j < L.S; ++j) {
                    const float st = sp[j] * gi + ki * vt[j];
                    y[j] += st * qi;
                    sc[j] = st;
                }
            }
        }
}

static void op_rwkv_wkv7(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * r = dst->src[0], * w = dst->src[1], * k = dst->src[2], * v = dst->src[3], * a = dst->src[4], * b = dst->src[5];
    const lin_attn L(p, dst, r, dst->src[6]);
    for (int64_t t = 0; t < L.T; ++t)
        for (int64_t h = L.h0; h < L.h1; ++h) {
            const float * rt = tok_row(r, t, h), * wt = tok_row(w, t, h), * kt = tok_row(k, t, h), * vt = tok_row(v, t, h);
            const float * at = tok_row(a, t, h), * bt = tok_row(b, t, h);
            const float * prev = L.prev(t, h);
            float * cur = L.cur(t, h);
            float * y = L.out(t, h);
            for (int64_t i = 0; i < L.S; ++i) {
                const float * sp = prev + i * L.S;
                float * sc = cur + i * L.S;
                const float sa = p.K->dot_f32(L.S, at, sp);
                const float vi = vt[i];
                for (int64_t j = 0; j < L.S; ++j) sc[j] = sp[j] * wt[j] + vi * kt[j] + sa * bt[j];
                y[i] = p.K->dot_f32(L.S, rt, sc);
            }
        }
}

} // namespace tcpu
} // namespace
