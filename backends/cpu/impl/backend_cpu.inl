/*
 * backend_cpu.inl - the CPU backend object: supports_op, per-op workspace sizes, graph
 * reserve and compute (nodes split across the pool, a barrier between nodes, the abort
 * callback checked between nodes), and the public API of tessera-cpu.h.
 */
namespace {
namespace tcpu {

struct backend_ctx {
    int n_threads = 1;
    pool * tp = nullptr;
    workspace ws;
    bool (*abort_cb)(void *) = nullptr;
    void * abort_data = nullptr;
    /* nodes with at most this many elements (dst and every src) run on one thread;
     * TSR_CPU_SMALL_NODE=N overrides it at init, 0 splits every node */
    int64_t small_max = 8192;
    ~backend_ctx() { delete tp; }
};

static inline bool is_float(enum tsr_type t) { return t == TSR_TYPE_F32 || t == TSR_TYPE_F16 || t == TSR_TYPE_BF16; }
static inline bool is_mm_type(enum tsr_type t) { return is_float(t) || t == TSR_TYPE_Q8_0 || t == TSR_TYPE_Q4_0; }
/* Types an op may read or write by whole rows (mul_mat, get_rows, cpy, set_rows, ...). */
static inline bool is_row_type(enum tsr_type t) { return is_mm_type(t) || is_row_quant(t); }
/* A quantized tensor's rows are whole blocks, stored contiguously. */
static inline bool whole_blocks(const tsr_tensor * t) {
    return !tsr_is_quantized(t->type) || (t->nb[0] == tsr_type_size(t->type) && t->ne[0] % tsr_blck_size(t->type) == 0);
}
static inline bool is_view_op(enum tsr_op op) {
    return op == TSR_OP_NONE || op == TSR_OP_RESHAPE || op == TSR_OP_VIEW || op == TSR_OP_PERMUTE || op == TSR_OP_TRANSPOSE;
}

/* A CPU_REPACK matrix's interleaved bytes (repack.inl) are read by mul_mat as src0 and by
 * get_rows, on the tensor itself, and the word layouts (MoE experts) by mul_mat_id as src0;
 * views of one only pass it on. */
static bool reads_r8_right(const tsr_tensor * t) {
    for (int i = 0; i < TSR_MAX_SRC; ++i) {
        if (!reads_r8_bytes(t->src[i])) continue;
        if (is_view_op(t->op)) continue;
        if (i != 0 || t->src[0]->view_src) return false;
        const bool reader = t->op == TSR_OP_MUL_MAT || t->op == TSR_OP_GET_ROWS || (t->op == TSR_OP_MUL_MAT_ID && is_words_repacked(t->src[0]));
        if (!reader) return false;
    }
    return true;
}

static bool supports(const tsr_tensor * t) {
    const tsr_tensor * a = t->src[0];
    const tsr_tensor * b = t->src[1];
    if (!reads_r8_right(t)) return false;
    switch (t->op) {
        case TSR_OP_NONE: case TSR_OP_RESHAPE: case TSR_OP_VIEW: case TSR_OP_PERMUTE: case TSR_OP_TRANSPOSE:
            return true;
        case TSR_OP_DUP: case TSR_OP_CONT: case TSR_OP_CPY: {
            if (!(is_row_type(a->type) || a->type == TSR_TYPE_I32) || !(is_row_type(t->type) || t->type == TSR_TYPE_I32)) return false;
            if ((a->type == TSR_TYPE_I32) != (t->type == TSR_TYPE_I32)) return false;
            const bool q = tsr_is_quantized(a->type) || tsr_is_quantized(t->type);
            if (!q) return true;
            if (!tsr_are_same_shape(a, t)) return a->type == t->type && tsr_is_contiguous(a) && tsr_is_contiguous(t);
            return whole_blocks(a) && whole_blocks(t);
        }
        case TSR_OP_ADD: case TSR_OP_SUB: case TSR_OP_MUL: case TSR_OP_DIV:
            if (t->op == TSR_OP_ADD && tsr_is_quantized(a->type))  /* dequantize + requantize per row */
                return is_float(b->type) && t->type == a->type && tsr_is_contiguous(a) && tsr_is_contiguous(t) && whole_blocks(t);
            return is_float(a->type) && is_float(b->type) && is_float(t->type);
        case TSR_OP_SQR: case TSR_OP_SQRT: case TSR_OP_LOG: case TSR_OP_SCALE: case TSR_OP_CLAMP:
            return is_float(a->type) && is_float(t->type);
        case TSR_OP_UNARY:
            return is_float(a->type) && is_float(t->type) && tsr_get_op_params_i32(t, 0) >= 0 &&
                   tsr_get_op_params_i32(t, 0) < TSR_UNARY_OP_COUNT;
        case TSR_OP_GLU:
            return tsr_get_op_params_i32(t, 0) >= 0 && tsr_get_op_params_i32(t, 0) < TSR_GLU_OP_COUNT && is_float(a->type) &&
                   (!b || is_float(b->type)) && is_float(t->type);
        case TSR_OP_SUM: case TSR_OP_SUM_ROWS: case TSR_OP_MEAN:
            return is_float(a->type) && is_float(t->type);
        case TSR_OP_ARGMAX: case TSR_OP_ARGSORT:
            return a->type == TSR_TYPE_F32;
        case TSR_OP_REPEAT: case TSR_OP_CONCAT: case TSR_OP_PAD:
            return !tsr_is_quantized(a->type) && a->type == t->type;
        case TSR_OP_NORM: case TSR_OP_RMS_NORM: case TSR_OP_GROUP_NORM: case TSR_OP_DIAG_MASK_INF:
            return a->type == TSR_TYPE_F32 && t->type == TSR_TYPE_F32;
        case TSR_OP_MUL_MAT:
            if (!is_row_type(a->type) || !is_float(b->type) || t->type != TSR_TYPE_F32 || t->nb[0] != 4) return false;
            return whole_blocks(a);
        case TSR_OP_OUT_PROD:
            if (!is_row_type(a->type) || b->type != TSR_TYPE_F32 || t->type != TSR_TYPE_F32 || t->nb[0] != 4) return false;
            return whole_blocks(a);
        case TSR_OP_GET_ROWS:
            if (!(is_row_type(a->type) || a->type == TSR_TYPE_I32) || b->type != TSR_TYPE_I32) return false;
            return whole_blocks(a) && (!tsr_is_quantized(a->type) || t->nb[0] == 4);
        case TSR_OP_SET_ROWS:
            if (!is_row_type(t->type) || a->type != TSR_TYPE_F32 || b->type != TSR_TYPE_I32) return false;
            return whole_blocks(t);
        case TSR_OP_SOFT_MAX:
            return a->type == TSR_TYPE_F32 && t->type == TSR_TYPE_F32 && t->nb[0] == 4 &&
                   (!b || b->type == TSR_TYPE_F32 || b->type == TSR_TYPE_F16);
        case TSR_OP_ROPE:
            return (a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && t->type == a->type && b && b->type == TSR_TYPE_I32 &&
                   (!t->src[2] || t->src[2]->type == TSR_TYPE_F32);
        case TSR_OP_IM2COL:
            return is_float(b->type) && (t->type == TSR_TYPE_F32 || t->type == TSR_TYPE_F16);
        case TSR_OP_CONV_2D:
            return is_float(a->type) && is_float(b->type) && t->type == TSR_TYPE_F32 && t->nb[0] == 4;
        case TSR_OP_POOL_2D:
            return is_float(a->type) && t->type == TSR_TYPE_F32;
        case TSR_OP_UPSCALE:
            return is_float(a->type) && is_float(t->type);
        /* issue 17 part B */
        case TSR_OP_MUL_MAT_ID:
            return is_row_type(a->type) && whole_blocks(a) && a->nb[0] == tsr_type_size(a->type) && is_float(b->type) &&
                   t->src[2]->type == TSR_TYPE_I32 && t->type == TSR_TYPE_F32 && tsr_is_contiguous(t);
        case TSR_OP_CONV_2D_DW: case TSR_OP_CONV_TRANSPOSE_1D: case TSR_OP_CONV_TRANSPOSE_2D:
            return is_float(a->type) && is_float(b->type) && t->type == TSR_TYPE_F32;
        case TSR_OP_PAD_REFLECT_1D:
            return a->type == TSR_TYPE_F32 && t->type == TSR_TYPE_F32;
        case TSR_OP_GET_REL_POS:
            return (a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && t->type == a->type && tsr_is_contiguous(a) &&
                   tsr_is_contiguous(t);
        case TSR_OP_ROLL:
            return !tsr_is_quantized(a->type) && a->type == t->type;
        case TSR_OP_TIMESTEP_EMBEDDING: case TSR_OP_SSM_CONV: case TSR_OP_SSM_SCAN:
        case TSR_OP_RWKV_WKV6: case TSR_OP_GATED_LINEAR_ATTN: case TSR_OP_RWKV_WKV7:
        case TSR_OP_WIN_PART: case TSR_OP_WIN_UNPART: case TSR_OP_ADD_REL_POS:
            return a->type == TSR_TYPE_F32 && t->type == TSR_TYPE_F32 && tsr_is_contiguous(t);
        /* issue 17 part A */
        case TSR_OP_SIN: case TSR_OP_COS: case TSR_OP_LEAKY_RELU: case TSR_OP_FILL: case TSR_OP_TRI: case TSR_OP_CUMSUM:
        case TSR_OP_DIAG: case TSR_OP_REPEAT_BACK:
            return is_float(a->type) && is_float(t->type);
        case TSR_OP_ACC: case TSR_OP_SET:
            return is_float(a->type) && is_float(b->type) && t->type == a->type && tsr_is_contiguous(t);
        case TSR_OP_ARANGE:
            return t->type == TSR_TYPE_F32;
        case TSR_OP_L2_NORM:
            return a->type == TSR_TYPE_F32 && t->type == TSR_TYPE_F32;
        case TSR_OP_TOP_K:
            return a->type == TSR_TYPE_F32 && t->type == TSR_TYPE_I32;
        case TSR_OP_MAP_CUSTOM1: case TSR_OP_MAP_CUSTOM2: case TSR_OP_MAP_CUSTOM3: case TSR_OP_CUSTOM:
            return tsr_impl::get_custom_params(t).fun != nullptr;
        case TSR_OP_FLASH_ATTN_EXT: {
            const tsr_tensor * v = t->src[2];
            const tsr_tensor * m = t->src[3];
            if (a->type != TSR_TYPE_F32 || !is_mm_type(b->type) || !v || !is_mm_type(v->type)) return false;
            if (t->type != TSR_TYPE_F32 || t->nb[0] != 4) return false;
            if (m && m->type != TSR_TYPE_F32 && m->type != TSR_TYPE_F16) return false;
            if (!whole_blocks(b)) return false;
            if (tsr_is_quantized(v->type) && v->nb[0] != tsr_type_size(v->type)) return false;
            return true;
        }
        default:
            return false;
    }
}

/* Scratch bytes a node needs from the workspace with nth threads. */
static size_t op_work_size(const tsr_tensor * t, const kernels * K, int nth) {
    auto per_thread = [&](size_t floats) { return align_up(floats * 4, 64) * (size_t)nth; };
    switch (t->op) {
        case TSR_OP_DUP: case TSR_OP_CONT: case TSR_OP_CPY: case TSR_OP_ADD:
            return per_thread((size_t)t->ne[0]);
        case TSR_OP_MUL_MAT: return mm_work_size(t, K, nth);
        case TSR_OP_OUT_PROD: return per_thread((size_t)t->src[0]->ne[0]);
        case TSR_OP_SET_ROWS: return per_thread((size_t)t->src[0]->ne[0]);
        case TSR_OP_ROPE: return per_thread((size_t)std::max<int64_t>(tsr_get_op_params_i32(t, 1), t->ne[0]) + 2);
        case TSR_OP_ARGSORT: return per_thread((size_t)t->ne[0]);
        case TSR_OP_IM2COL: return per_thread((size_t)t->ne[0]);
        case TSR_OP_CONV_2D: {
            const conv_plan c = conv_make_plan(t, K);
            return c.cols_bytes + c.kern_bytes + c.thread_bytes * (size_t)nth;
        }
        case TSR_OP_FLASH_ATTN_EXT: return per_thread(fa_thread_floats(t));
        /* issue 17 part B */
        case TSR_OP_MUL_MAT_ID: return mmid_work_size(t, K, nth);
        case TSR_OP_CONV_2D_DW: return per_thread(dw_thread_floats(t));
        case TSR_OP_CONV_TRANSPOSE_1D: case TSR_OP_CONV_TRANSPOSE_2D: return tconv_work_size(t, K, nth);
        case TSR_OP_SSM_SCAN: return per_thread(ssm_scan_thread_floats(t));
        case TSR_OP_TOP_K: return per_thread((size_t)t->src[0]->ne[0]);   /* issue 17 part A */
        default: return 0;
    }
}

static void compute_node(const cparams & p, tsr_tensor * t) {
    switch (t->op) {
        case TSR_OP_DUP: case TSR_OP_CONT: case TSR_OP_CPY: op_cpy(p, t); break;
        case TSR_OP_ADD: op_binary_t<TSR_OP_ADD>(p, t); break;
        case TSR_OP_SUB: op_binary_t<TSR_OP_SUB>(p, t); break;
        case TSR_OP_MUL: op_binary_t<TSR_OP_MUL>(p, t); break;
        case TSR_OP_DIV: op_binary_t<TSR_OP_DIV>(p, t); break;
        case TSR_OP_SQR: case TSR_OP_SQRT: case TSR_OP_LOG: case TSR_OP_SCALE: case TSR_OP_CLAMP: case TSR_OP_UNARY:
            op_unary(p, t); break;
        case TSR_OP_GLU: op_glu(p, t); break;
        case TSR_OP_SUM: op_sum(p, t); break;
        case TSR_OP_SUM_ROWS: case TSR_OP_MEAN: op_sum_rows(p, t); break;
        case TSR_OP_ARGMAX: op_argmax(p, t); break;
        case TSR_OP_REPEAT: op_repeat(p, t); break;
        case TSR_OP_CONCAT: op_concat(p, t); break;
        case TSR_OP_PAD: op_pad(p, t); break;
        case TSR_OP_NORM: case TSR_OP_RMS_NORM: op_norm(p, t); break;
        case TSR_OP_GROUP_NORM: op_group_norm(p, t); break;
        case TSR_OP_MUL_MAT: op_mul_mat(p, t); break;
        case TSR_OP_OUT_PROD: op_out_prod(p, t); break;
        case TSR_OP_GET_ROWS: op_get_rows(p, t); break;
        case TSR_OP_SET_ROWS: op_set_rows(p, t); break;
        case TSR_OP_DIAG_MASK_INF: op_diag_mask_inf(p, t); break;
        case TSR_OP_SOFT_MAX: op_soft_max(p, t); break;
        case TSR_OP_ROPE: if (rope_is_multi(t)) op_rope_multi(p, t); else op_rope(p, t); break;
        case TSR_OP_IM2COL: op_im2col(p, t); break;
        case TSR_OP_CONV_2D: op_conv_2d(p, t); break;
        case TSR_OP_POOL_2D: op_pool_2d(p, t); break;
        case TSR_OP_UPSCALE: op_upscale(p, t); break;
        case TSR_OP_ARGSORT: op_argsort(p, t); break;
        case TSR_OP_FLASH_ATTN_EXT: op_flash_attn_ext(p, t); break;
        /* issue 17 part B */
        case TSR_OP_MUL_MAT_ID: op_mul_mat_id(p, t); break;
        case TSR_OP_CONV_2D_DW: op_conv_2d_dw(p, t); break;
        case TSR_OP_CONV_TRANSPOSE_1D: case TSR_OP_CONV_TRANSPOSE_2D: op_conv_transpose(p, t); break;
        case TSR_OP_PAD_REFLECT_1D: op_pad_reflect_1d(p, t); break;
        case TSR_OP_ROLL: op_roll(p, t); break;
        case TSR_OP_TIMESTEP_EMBEDDING: op_timestep_embedding(p, t); break;
        case TSR_OP_SSM_CONV: op_ssm_conv(p, t); break;
        case TSR_OP_SSM_SCAN: op_ssm_scan(p, t); break;
        case TSR_OP_RWKV_WKV6: op_rwkv_wkv6(p, t); break;
        case TSR_OP_GATED_LINEAR_ATTN: op_gated_linear_attn(p, t); break;
        case TSR_OP_RWKV_WKV7: op_rwkv_wkv7(p, t); break;
        case TSR_OP_WIN_PART: op_win_part(p, t); break;
        case TSR_OP_WIN_UNPART: op_win_unpart(p, t); break;
        case TSR_OP_GET_REL_POS: op_get_rel_pos(p, t); break;
        case TSR_OP_ADD_REL_POS: op_add_rel_pos(p, t); break;
        /* issue 17 part A */
        case TSR_OP_SIN: case TSR_OP_COS: case TSR_OP_LEAKY_RELU: op_unary(p, t); break;
        case TSR_OP_ARANGE: op_arange(p, t); break;
        case TSR_OP_FILL: op_fill(p, t); break;
        case TSR_OP_TRI: op_tri(p, t); break;
        case TSR_OP_CUMSUM: op_cumsum(p, t); break;
        case TSR_OP_ACC: case TSR_OP_SET: op_acc_set(p, t); break;
        case TSR_OP_DIAG: op_diag(p, t); break;
        case TSR_OP_REPEAT_BACK: op_repeat_back(p, t); break;
        case TSR_OP_L2_NORM: op_l2_norm(p, t); break;
        case TSR_OP_TOP_K: op_top_k(p, t); break;
        case TSR_OP_MAP_CUSTOM1: case TSR_OP_MAP_CUSTOM2: case TSR_OP_MAP_CUSTOM3: case TSR_OP_CUSTOM: op_custom(p, t); break;
        default: break;
    }
}

static inline bool node_runs(const tsr_tensor * t) { return !is_view_op(t->op) && tsr_nelements(t) > 0; }

/* Nodes too small to split: a barrier between cores (~0.3-1 us, much more when a core is
 * shared with other work) costs more than computing them on one thread. */
static inline bool node_is_small(const tsr_tensor * t, int64_t small_max) {
    int64_t work = tsr_nelements(t);
    switch (t->op) {
        case TSR_OP_MUL_MAT: case TSR_OP_OUT_PROD: case TSR_OP_FLASH_ATTN_EXT: case TSR_OP_CONV_2D:
        case TSR_OP_MUL_MAT_ID: case TSR_OP_CONV_2D_DW: case TSR_OP_CONV_TRANSPOSE_1D: case TSR_OP_CONV_TRANSPOSE_2D:
        /* issue 17 part A: a user's op may be heavy on small tensors; it gets the threads it asks for */
        case TSR_OP_MAP_CUSTOM1: case TSR_OP_MAP_CUSTOM2: case TSR_OP_MAP_CUSTOM3: case TSR_OP_CUSTOM:
            return false;
        default: break;
    }
    for (int s = 0; s < TSR_MAX_SRC; ++s)
        if (t->src[s]) work = std::max<int64_t>(work, tsr_nelements(t->src[s]));
    return work <= small_max;
}

static size_t graph_work_size(tsr_cgraph * g, const kernels * K, int nth) {
    size_t need = 0;
    const int n = tsr_graph_n_nodes(g);
    for (int i = 0; i < n; ++i) {
        const tsr_tensor * t = tsr_graph_node(g, i);
        if (node_runs(t)) need = std::max(need, op_work_size(t, K, nth));
    }
    return need;
}

struct graph_job {
    backend_ctx * ctx;
    tsr_cgraph * g;
    const kernels * K;
    std::atomic<int> abort_at{INT_MAX};  /* node index after which the graph stops */
    std::atomic<bool> failed{false};      /* a node found bad input data (cparams::failed) */
};

/* A thread waiting at a barrier (another core still on a node, or thread 0 alone on small
 * nodes) has nothing to compute, and DRAM idles: it prefetches the start of its first item
 * of the next mat-vec into its L2, up to wait_prefetch::budget bytes a stream (512 KiB a
 * thread at most: half a Zen 5 L2). run_bench, LLaMA 1.1B, 2 threads, builds alternating 4
 * times (best of 4 rounds each): Q4_0 generation 45.8-46.9 -> 46.1-48.7 tok/s (mean +2.7 %),
 * Q4_K_M 43.1-46.2 -> 43.9-45.6 (no change); 16 and 64 KiB a stream fell between. */
struct wait_prefetch {
    static constexpr size_t budget = 128 * 1024;
    const tsr_tensor * target = nullptr;
    const char * at[MM_DOT_STREAMS] = {};
    size_t done = 0, end = 0;
    void aim(const tsr_tensor * t, const kernels * K, int ith, int nth) {
        if (t == target) return;
        target = t;
        done = end = 0;
        size_t bytes = 0;
        if (t && matvec_first_streams(t, K, ith, nth, at, bytes)) end = std::min(bytes, budget);
    }
    /* one line of each stream; false when there is nothing left */
    bool step() {
        if (done >= end) return false;
        for (const char * a : at) prefetch_l2(a + done);
        done += 64;
        return true;
    }
};

/* The next mul_mat within a few nodes after i (a mat-vec: what a thread waiting after node i
 * prefetches; wait_prefetch::aim tells). */
static const tsr_tensor * next_mul_mat(tsr_cgraph * g, int i, int last) {
    for (int j = i + 1; j <= last && j <= i + 16; ++j) {
        const tsr_tensor * t = tsr_graph_node(g, j);
        if (t->op == TSR_OP_MUL_MAT && node_runs(t)) return t;
    }
    return nullptr;
}

static void graph_job_fn(void * arg, int ith, int nth) {
    graph_job * job = (graph_job *)arg;
    backend_ctx * ctx = job->ctx;
    cparams p;
    p.ith = ith;
    p.nth = nth;
    p.wdata = (uint8_t *)ctx->ws.ptr;
    p.wsize = ctx->ws.size;
    p.tp = ctx->tp;
    p.K = job->K;
    p.failed = &job->failed;
    const int n = tsr_graph_n_nodes(job->g);
    int last = -1;
    for (int i = 0; i < n; ++i)
        if (node_runs(tsr_graph_node(job->g, i))) last = i;
    cparams solo = p;   /* small nodes: thread 0 alone, no barrier between consecutive ones */
    solo.nth = 1;
    wait_prefetch pf;
    for (int i = 0; i <= last; ++i) {
        tsr_tensor * t = tsr_graph_node(job->g, i);
        if (!node_runs(t)) continue;
        const bool cur_solo = nth > 1 && node_is_small(t, ctx->small_max);
        int next = i + 1;
        while (next <= last && !node_runs(tsr_graph_node(job->g, next))) ++next;
        const bool next_solo = next <= last && nth > 1 && node_is_small(tsr_graph_node(job->g, next), ctx->small_max);
        /* thread 0 aborted inside a run of small nodes: it skips the rest of the run and
         * stops at the barrier that closes it, where the other threads wait */
        const bool stopping = ith == 0 && job->abort_at.load(std::memory_order_relaxed) < i;
        if (!cur_solo) compute_node(p, t);
        else if (ith == 0 && !stopping) compute_node(solo, t);
        if (ith == 0 && !stopping && i < last && ctx->abort_cb && ctx->abort_cb(ctx->abort_data))
            job->abort_at.store(i, std::memory_order_release);
        if (cur_solo && next_solo) continue;   /* only thread 0 touched data: no barrier */
        if (i == last) break;                  /* pool::run waits for every thread */
        if (nth > 1) pf.aim(next_mul_mat(job->g, i, last), job->K, ith, nth);
        barrier(p, [&pf] { return pf.step(); });
        /* compare with i: thread 0 may already be past this barrier and flag a later node */
        if (job->abort_at.load(std::memory_order_acquire) <= i) break;
    }
}

static const char * be_get_name(tsr_backend_t) { return "CPU"; }

static void be_free(tsr_backend_t backend) {
    if (!backend) return;
    delete (backend_ctx *)backend->context;
    delete backend;
}

static tsr_backend_buffer_type_t be_get_default_buffer_type(tsr_backend_t) { return tsr_backend_cpu_buffer_type(); }

static bool be_graph_reserve(tsr_backend_t backend, tsr_cgraph * g) {
    backend_ctx * ctx = (backend_ctx *)backend->context;
    if (!g) return tsr_set_error("CPU backend: graph_reserve with a NULL graph");
    return ctx->ws.reserve(graph_work_size(g, get_kernels(), ctx->n_threads));
}

static enum tsr_status be_graph_compute(tsr_backend_t backend, tsr_cgraph * g) {
    backend_ctx * ctx = (backend_ctx *)backend->context;
    if (!g) { tsr_set_error("CPU backend: graph_compute with a NULL graph"); return TSR_STATUS_FAILED; }
    const int n = tsr_graph_n_nodes(g);
    bool all_small = true;
    for (int i = 0; i < n; ++i) {
        const tsr_tensor * t = tsr_graph_node(g, i);
        if (!node_runs(t)) continue;
        all_small = all_small && node_is_small(t, ctx->small_max);
        if (!supports(t)) {
            tsr_set_error("CPU backend: node %d '%s' (%s, type %s) is not supported", i, t->name, tsr_op_desc(t), tsr_type_name(t->type));
            return TSR_STATUS_FAILED;
        }
        if (!t->data) {
            tsr_set_error("CPU backend: node %d '%s' (%s) has no data (allocate the graph first)", i, t->name, tsr_op_desc(t));
            return TSR_STATUS_FAILED;
        }
        for (int s = 0; s < TSR_MAX_SRC; ++s) {
            const tsr_tensor * src = t->src[s];
            if (src && !src->data && tsr_nelements(src) > 0) {
                tsr_set_error("CPU backend: input %d '%s' of node %d '%s' has no data", s, src->name, i, t->name);
                return TSR_STATUS_FAILED;
            }
        }
    }
    const kernels * K = get_kernels();
    if (!ctx->ws.reserve(graph_work_size(g, K, ctx->n_threads))) return TSR_STATUS_ALLOC_FAILED;
    graph_job job;
    job.ctx = ctx;
    job.g = g;
    job.K = K;
    /* a graph of small nodes only runs on this thread: waking the pool costs more */
    if (ctx->tp && !all_small) ctx->tp->run(graph_job_fn, &job);
    else graph_job_fn(&job, 0, 1);
    if (job.failed.load()) return TSR_STATUS_FAILED;   /* the node's message is in tsr_last_error */
    return job.abort_at.load() != INT_MAX ? TSR_STATUS_ABORTED : TSR_STATUS_SUCCESS;
}

static bool be_supports_op(tsr_backend_t, const tsr_tensor * op) { return op && supports(op); }
static bool be_supports_buft(tsr_backend_t, tsr_backend_buffer_type_t buft) { return buft && tsr_backend_buft_is_host(buft); }
static size_t be_get_workspace_size(tsr_backend_t backend) { return ((backend_ctx *)backend->context)->ws.size; }

/* The CPU device (device_cpu.inl), which every CPU backend runs on. */
static tsr_backend_dev_t the_device();

static bool make_pool(backend_ctx * ctx, int n) {
    delete ctx->tp;
    ctx->tp = nullptr;
    ctx->n_threads = 1;
    if (n <= 1) return true;
    try {
        ctx->tp = new pool(n);
        ctx->n_threads = n;
        return true;
    } catch (...) {
        return tsr_set_error("CPU backend: could not start %d threads; running single-threaded", n);
    }
}

} // namespace tcpu
} // namespace

/* ---- public API ---------------------------------------------------------------------------- */

TSR_API_IMPL tsr_backend_t tsr_backend_cpu_init(void) {
    using namespace tcpu;
    backend_ctx * ctx = new (std::nothrow) backend_ctx();
    tsr_backend * be = new (std::nothrow) tsr_backend();
    if (!ctx || !be) {
        delete ctx;
        delete be;
        tsr_set_error("tsr_backend_cpu_init: out of memory");
        return nullptr;
    }
    unsigned hc = std::thread::hardware_concurrency();
    int n = hc == 0 ? 1 : (int)std::min(hc, 64u);
    make_pool(ctx, n);
    if (const char * env = std::getenv("TSR_CPU_SMALL_NODE")) ctx->small_max = std::max<long long>(0, std::atoll(env));
    std::memset(&be->iface, 0, sizeof(be->iface));
    be->iface.get_name = be_get_name;
    be->iface.free = be_free;
    be->iface.get_default_buffer_type = be_get_default_buffer_type;
    be->iface.graph_reserve = be_graph_reserve;
    be->iface.graph_compute = be_graph_compute;
    be->iface.supports_op = be_supports_op;
    be->iface.supports_buft = be_supports_buft;
    be->iface.get_workspace_size = be_get_workspace_size;
    be->device = the_device();
    be->context = ctx;
    return be;
}

TSR_API_IMPL bool tsr_backend_is_cpu(tsr_backend_t backend) {
    return backend && backend->iface.get_name == tcpu::be_get_name;
}

TSR_API_IMPL void tsr_backend_cpu_set_n_threads(tsr_backend_t backend, int n_threads) {
    if (!tsr_backend_is_cpu(backend)) { tsr_set_error("tsr_backend_cpu_set_n_threads: not a CPU backend"); return; }
    tcpu::backend_ctx * ctx = (tcpu::backend_ctx *)backend->context;
    n_threads = std::max(1, std::min(n_threads, 512));
    if (n_threads == ctx->n_threads) return;
    tcpu::make_pool(ctx, n_threads);
}

TSR_API_IMPL int tsr_backend_cpu_get_n_threads(tsr_backend_t backend) {
    if (!tsr_backend_is_cpu(backend)) return 0;
    return ((tcpu::backend_ctx *)backend->context)->n_threads;
}

TSR_API_IMPL void tsr_backend_cpu_set_abort_callback(tsr_backend_t backend, bool (*abort_callback)(void *), void * data) {
    if (!tsr_backend_is_cpu(backend)) { tsr_set_error("tsr_backend_cpu_set_abort_callback: not a CPU backend"); return; }
    tcpu::backend_ctx * ctx = (tcpu::backend_ctx *)backend->context;
    ctx->abort_cb = abort_callback;
    ctx->abort_data = data;
}

TSR_API_IMPL void tsr_backend_cpu_set_host_allocator(tsr_backend_t backend, const struct tsr_host_allocator * alloc) {
    if (!tsr_backend_is_cpu(backend)) { tsr_set_error("tsr_backend_cpu_set_host_allocator: not a CPU backend"); return; }
    tcpu::backend_ctx * ctx = (tcpu::backend_ctx *)backend->context;
    ctx->ws.release();
    if (alloc) {
        ctx->ws.alloc = *alloc;
        ctx->ws.has_alloc = true;
    } else {
        const tsr_host_allocator * d = tsr_get_host_allocator();
        ctx->ws.has_alloc = d != nullptr;
        if (d) ctx->ws.alloc = *d;
    }
}

TSR_API_IMPL const char * tsr_cpu_isa_name(enum tsr_cpu_isa isa) { return tcpu::isa_name(isa); }
TSR_API_IMPL bool tsr_cpu_isa_supported(enum tsr_cpu_isa isa) { return tcpu::isa_supported(isa); }
TSR_API_IMPL enum tsr_cpu_isa tsr_cpu_isa_best(void) { return tcpu::isa_best(); }
TSR_API_IMPL enum tsr_cpu_isa tsr_cpu_get_isa(void) { return (enum tsr_cpu_isa)tcpu::isa_current().load(); }
TSR_API_IMPL bool tsr_cpu_set_isa(enum tsr_cpu_isa isa) {
    if (!tcpu::isa_supported(isa)) return tsr_set_error("tsr_cpu_set_isa: %s is not supported by this CPU/build", tcpu::isa_name(isa));
    tcpu::isa_current().store((int)isa);
    return true;
}
static uint32_t * matvec_prefetch_of(enum tsr_type type, bool repacked, const char * fn) {
    static const enum tsr_type file_types[] = {TSR_TYPE_F16, TSR_TYPE_BF16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0,
                                               TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL, TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K,
                                               TSR_TYPE_Q5_K, TSR_TYPE_Q6_K};
    static const enum tsr_type repacked_types[] = {TSR_TYPE_Q4_0, TSR_TYPE_IQ4_NL, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q3_K, TSR_TYPE_Q2_K};
    const enum tsr_type * b = repacked ? repacked_types : file_types;
    const enum tsr_type * e = repacked ? std::end(repacked_types) : std::end(file_types);
    if (std::find(b, e, type) == e) {
        tsr_set_error("%s: no mat-vec prefetch setting for %s%s", fn, tsr_type_name(type), repacked ? " (CPU_REPACK)" : "");
        return nullptr;
    }
    /* Q2_K / Q3_K in their word layouts (this CPU and path) read the file setting */
    if (repacked && tcpu::words_layout_for_type(type)) repacked = false;
    return repacked ? &tcpu::g_matvec_pf_ahead.repacked[type] : &tcpu::g_matvec_pf_ahead.file[type];
}
TSR_API_IMPL bool tsr_cpu_set_matvec_prefetch(enum tsr_type type, bool repacked, size_t ahead) {
    uint32_t * a = matvec_prefetch_of(type, repacked, "tsr_cpu_set_matvec_prefetch");
    if (!a) return false;
    if (ahead > ((size_t)1 << 20)) return tsr_set_error("tsr_cpu_set_matvec_prefetch: %zu bytes ahead (at most 1 MiB)", ahead);
    *a = (uint32_t)ahead;
    return true;
}
TSR_API_IMPL bool tsr_cpu_get_matvec_prefetch(enum tsr_type type, bool repacked, size_t * ahead) {
    const uint32_t * a = matvec_prefetch_of(type, repacked, "tsr_cpu_get_matvec_prefetch");
    if (a && ahead) *ahead = *a;
    return a != nullptr;
}
TSR_API_IMPL bool tsr_cpu_has_avx512_bf16(void) { return tcpu::features().avx512_bf16; }
TSR_API_IMPL bool tsr_cpu_has_avx512_vnni(void) { return tcpu::features().avx512_vnni; }
