/*
 * ops_models.inl - the CPU ops of model families beyond decoder-only LLMs (issue 17 part B):
 * expert-indexed mat-mul, ... (conventions: ops_elementwise.inl).
 */
namespace {
namespace tcpu {

/* ---- mul_mat_id ------------------------------------------------------------------------------ */

/* The (id, token) pairs of a mul_mat_id grouped by expert, so that every expert's rows pass
 * through the cache once for all the tokens that chose it (a decode step reads only the
 * experts it uses, each once). Workspace, in order: the map (offsets and pair order), the
 * src1 rows prepared in grouped order, the results in grouped order, per-thread GEMM panels. */
struct mmid_plan {
    mm_plan y;                 /* how src1 rows are prepared (no GEMM: the side arrays too) */
    const gemm_impl * g;       /* the GEMM for experts with many pairs, or NULL */
    int64_t n_expert, n_pairs;
    size_t map_bytes, y_bytes, c_bytes, thread_bytes;
};

static mmid_plan mmid_make_plan(const tsr_tensor * dst, const kernels * K) {
    const tsr_tensor * as = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    const tsr_tensor * ids = dst->src[2];
    mmid_plan pl{};
    pl.n_expert = as->ne[2];
    pl.n_pairs = ids->ne[0] * ids->ne[1];
    const int64_t Kd = as->ne[0];
    mm_plan & y = pl.y;
    y.ta = as->type;
    y.y_q8k = q8k_slot(y.ta) >= 0;
    y.y_q8 = tsr_is_quantized(y.ta) && !y.y_q8k;
    y.y_conv = !y.y_q8 && !y.y_q8k;
    /* rows keep the yq8 side arrays: an expert chosen by few tokens uses the dot-product
     * kernels, one chosen by many the GEMM (which reads the blocks through ldb) */
    if (y.y_q8) y.y_row = yq8_row_bytes(Kd);
    else if (y.y_q8k) y.y_row = (size_t)(Kd / TSR_QK_K) * sizeof(tsr_block_q8_K);
    else y.y_row = (size_t)Kd * 4;
    const int slot = type_slot(y.ta);
    pl.g = slot >= 0 ? K->gemm[slot] : nullptr;
    pl.map_bytes = align_up(sizeof(int32_t) * (size_t)(3 * (pl.n_expert + 1) + 2 * pl.n_pairs), 64);
    pl.y_bytes = align_up(y.y_row * (size_t)pl.n_pairs, 64);
    pl.c_bytes = align_up((size_t)(as->ne[1] * pl.n_pairs) * 4, 64);
    pl.thread_bytes = gemm_thread_bytes(pl.g, pl.n_pairs);
    (void)b;
    return pl;
}

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

    /* phase 2: src1 rows prepared in grouped order */
    int64_t r0, r1;
    split_rows(n_grouped, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t pair = m.order[r];
        mm_prepare_y_row(p.K, pl.y, b, (pair % n_used) % b->ne[1], pair / n_used, 0, yw + (size_t)r * pl.y.y_row);
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
        a.ta = pl.y.ta;
        a.A = (const char *)as->data + e * as->nb[2];
        a.lda = as->nb[1];
        a.B = (const char *)yw + (size_t)g0 * pl.y.y_row;
        a.ldb = pl.y.y_row;
        a.M = M; a.N = cnt; a.K = Kd;
        a.C = cw + (size_t)g0 * (size_t)M;
        a.ldc = (size_t)M;
        a.g = cnt >= GEMM_MIN_N ? pl.g : nullptr;
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

} // namespace tcpu
} // namespace
