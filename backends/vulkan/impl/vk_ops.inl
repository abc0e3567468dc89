/*
 * vk_ops.inl - what each op becomes: shader variant, push constants, buffer windows and
 * workgroup counts. One encoder per op family; each runs in three modes: CHECK (answer
 * supports_op from shapes and types alone), COUNT (count dispatches for graph_reserve)
 * and RECORD (record into the graph's command buffer).
 *
 * Bindings: 0 = src0, 1 = src1, 2 = src2, 3 = dst, 4 = src3. A binding covers at most
 * maxStorageBufferRange bytes; ops whose operands are larger are split into several
 * dispatches over row ranges (each binding a window of the rows it touches).
 */
namespace {
namespace tsr_vk {

enum mode { M_CHECK, M_COUNT, M_RECORD };

struct bind { VkBuffer buf; size_t off; size_t range; };

struct backend_ctx;
/* Record one dispatch (defined in vk_graph.inl). */
static bool emit(backend_ctx * ctx, int sh, uint32_t spec, const bind * b, const uint32_t * pc,
                 uint32_t gx, uint32_t gy, uint32_t gz);
static device * ctx_device(backend_ctx * ctx);
static mode ctx_mode(backend_ctx * ctx);

enum fit { FIT_OK, FIT_TOO_BIG, FIT_UNSUPPORTED };

/* Bytes of elements of t's storage type addressed by a shader index (1 for quantized). */
static size_t elem_bytes(enum tsr_type t) {
    switch (t) {
    case TSR_TYPE_F32: case TSR_TYPE_I32: return 4;
    case TSR_TYPE_F16: return 2;
    default: return 1;
    }
}

/* Stride i of t in shader elements, or false when it is not a whole number of them. */
static bool stride_el(const tsr_tensor * t, int i, size_t es, uint32_t & out) {
    if (t->nb[i] % es != 0 || t->nb[i] / es > UINT32_MAX) return false;
    out = static_cast<uint32_t>(t->nb[i] / es);
    return true;
}

static int64_t nrows_of(const tsr_tensor * t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

/* Byte offset of flattened row r (dims 1-3) of t. */
static size_t row_off(const tsr_tensor * t, int64_t r) {
    int64_t i1 = r % t->ne[1]; r /= t->ne[1];
    int64_t i2 = r % t->ne[2]; int64_t i3 = r / t->ne[2];
    return static_cast<size_t>(i1) * t->nb[1] + static_cast<size_t>(i2) * t->nb[2] + static_cast<size_t>(i3) * t->nb[3];
}

/* Row offsets never decrease with the flattened row index (not permuted across rows). */
static bool rows_monotonic(const tsr_tensor * t) {
    size_t a = static_cast<size_t>(t->ne[1] - 1) * t->nb[1];
    if (t->ne[2] > 1 && t->nb[2] < a) return false;
    size_t b = a + static_cast<size_t>(t->ne[2] - 1) * t->nb[2];
    if (t->ne[3] > 1 && t->nb[3] < b) return false;
    return true;
}

/* Byte extent of one row of t. */
static size_t row_span(const tsr_tensor * t) {
    return static_cast<size_t>(t->ne[0] / tsr_blck_size(t->type) - 1) * t->nb[0] + tsr_type_size(t->type);
}

/* Bytes [lo, hi) of t's data touched by rows [r0, r1). */
static void rows_window(const tsr_tensor * t, int64_t r0, int64_t r1, size_t & lo, size_t & hi) {
    if (r0 == 0 && r1 >= nrows_of(t)) { lo = 0; hi = tsr_nbytes(t); return; }
    if (!rows_monotonic(t)) { lo = 0; hi = tsr_nbytes(t); return; }
    lo = row_off(t, r0);
    hi = row_off(t, r1 - 1) + row_span(t);
}

/* A binding over bytes [lo, hi) of t's data; eoff = index of t's first element relative
 * to the binding start, in elements of es bytes. */
static fit make_bind(backend_ctx * ctx, const tsr_tensor * t, size_t lo, size_t hi, size_t es, bind & b, int64_t & eoff) {
    device * d = ctx_device(ctx);
    size_t base = 0;
    b.buf = VK_NULL_HANDLE;
    if (ctx_mode(ctx) != M_CHECK) {
        if (!t->data || !t->buffer) return FIT_UNSUPPORTED;
        buffer_ctx * bc = tensor_buf(t);
        if (!bc || !buft_is_vk_impl(t->buffer->buft)) return FIT_UNSUPPORTED;
        if (bc->dev != d) return FIT_UNSUPPORTED;
        b.buf = bc->buf;
        base = tensor_offset(t);
    }
    if (base % es != 0) return FIT_UNSUPPORTED;
    size_t start = align_down(base + lo, d->align);
    size_t end = base + hi;
    if (end - start > d->max_range) return FIT_TOO_BIG;
    b.off = start;
    b.range = std::max<size_t>(end - start, 4);
    eoff = (static_cast<int64_t>(base) - static_cast<int64_t>(start)) / static_cast<int64_t>(es);
    return FIT_OK;
}

static bind dummy_bind(backend_ctx * ctx) {
    device * d = ctx_device(ctx);
    return bind{d->dummy, 0, 256};
}

/* ---- generic row-local ops ----------------------------------------------------------- */

enum okind { K_NONE, K_ROWS, K_FLAT, K_WHOLE };
enum gmode { G_ELEM, G_ROW, G_PAIR };   /* invocations: one per element / workgroup per row / one per pair */

/* Generic push-constant slots (common.glsl). */
enum { PC_OFF0 = 24, PC_OFF1 = 25, PC_OFFD = 26, PC_ROW0 = 27, PC_P0 = 28, PC_P1 = 29, PC_NROWS = 30, PC_U0 = 31 };

struct row_op {
    int sh = 0;
    uint32_t spec = 0;
    const tsr_tensor * src[3] = {nullptr, nullptr, nullptr};
    okind kind[3] = {K_NONE, K_NONE, K_NONE};
    size_t es[3] = {4, 4, 4};
    const tsr_tensor * dst = nullptr;
    size_t esd = 4;
    gmode g = G_ELEM;
    uint32_t pc[32] = {};
    int pc_off[4] = {PC_OFF0, PC_OFF1, -1, PC_OFFD};   /* slot of each binding's offset */
    int pc_row0 = PC_ROW0, pc_nrows = PC_NROWS;
};

/* Put ne/nb (in elements) of t at pc[at..at+7]; false when a stride is fractional. */
static bool put_shape(uint32_t * pc, int at, const tsr_tensor * t, size_t es) {
    for (int i = 0; i < 4; i++) {
        if (t->ne[i] > UINT32_MAX) return false;
        pc[at + i] = static_cast<uint32_t>(t->ne[i]);
        if (!stride_el(t, i, es, pc[at + 4 + i])) return false;
    }
    return true;
}

static const uint64_t GRID_X = 4096;

static bool put_groups(uint64_t groups, uint32_t & gx, uint32_t & gy) {
    if (groups == 0) { gx = gy = 0; return true; }
    gx = static_cast<uint32_t>(std::min<uint64_t>(groups, GRID_X));  /* TSR_GRID_X in common.glsl */
    uint64_t y = (groups + gx - 1) / gx;
    if (y > 65535) return false;
    gy = static_cast<uint32_t>(y);
    return true;
}

static const char * op_label(const tsr_tensor * t) { return t->name[0] ? t->name : tsr_op_desc(t); }

/* Build bindings for dst rows [r0, r1). */
static fit row_op_binds(backend_ctx * ctx, row_op & op, int64_t r0, int64_t r1, bind * b) {
    const tsr_tensor * dst = op.dst;
    for (int s = 0; s < 3; s++) {
        const tsr_tensor * t = op.src[s];
        if (op.kind[s] == K_NONE || !t) { b[s] = dummy_bind(ctx); continue; }
        size_t lo, hi;
        if (op.kind[s] == K_WHOLE) { lo = 0; hi = tsr_nbytes(t); }
        else if (op.kind[s] == K_ROWS) rows_window(t, r0, r1, lo, hi);
        else {
            int64_t e0 = r0 * dst->ne[0], e1 = r1 * dst->ne[0];
            rows_window(t, e0 / t->ne[0], (e1 + t->ne[0] - 1) / t->ne[0], lo, hi);
        }
        int64_t eoff = 0;
        fit f = make_bind(ctx, t, lo, hi, op.es[s], b[s], eoff);
        if (f != FIT_OK) return f;
        if (op.pc_off[s] >= 0) op.pc[op.pc_off[s]] = static_cast<uint32_t>(static_cast<int32_t>(eoff));
    }
    b[4] = dummy_bind(ctx);
    size_t lo, hi;
    rows_window(dst, r0, r1, lo, hi);
    int64_t eoff = 0;
    fit f = make_bind(ctx, dst, lo, hi, op.esd, b[3], eoff);
    if (f != FIT_OK) return f;
    op.pc[op.pc_off[3]] = static_cast<uint32_t>(static_cast<int32_t>(eoff));
    return FIT_OK;
}

static bool run_row_op(backend_ctx * ctx, row_op & op, const tsr_tensor * node) {
    const int64_t R = nrows_of(op.dst);
    if (R == 0 || op.dst->ne[0] == 0) return true;
    int64_t r0 = 0, step = R;
    while (r0 < R) {
        int64_t r1 = std::min(R, r0 + step);
        bind b[5];
        fit f = row_op_binds(ctx, op, r0, r1, b);
        if (f == FIT_UNSUPPORTED)
            return tsr_set_error("Vulkan: node '%s' (%s): an operand's offset or strides are not whole elements, or it is not in a buffer of this device",
                                 op_label(node), tsr_op_desc(node));
        if (f == FIT_TOO_BIG) {
            if (r1 - r0 == 1)
                return tsr_set_error("Vulkan: node '%s' (%s): one row is larger than maxStorageBufferRange (%zu bytes)",
                                     op_label(node), tsr_op_desc(node), ctx_device(ctx)->max_range);
            step = std::max<int64_t>(1, (r1 - r0) / 2);
            continue;
        }
        op.pc[op.pc_row0] = static_cast<uint32_t>(r0);
        op.pc[op.pc_nrows] = static_cast<uint32_t>(r1 - r0);
        uint64_t n = static_cast<uint64_t>(r1 - r0);
        uint64_t groups = op.g == G_ROW ? n
                        : op.g == G_PAIR ? (n * static_cast<uint64_t>((op.dst->ne[0] + 1) / 2) + 255) / 256
                        : (n * static_cast<uint64_t>(op.dst->ne[0]) + 255) / 256;
        uint32_t gx, gy;
        if (!put_groups(groups, gx, gy)) return tsr_set_error("Vulkan: node '%s': too many workgroups (%llu)", op_label(node), (unsigned long long)groups);
        if (r0 > UINT32_MAX || n * static_cast<uint64_t>(op.dst->ne[0]) > UINT32_MAX)
            return tsr_set_error("Vulkan: node '%s': more than 2^32 elements in one dispatch", op_label(node));
        if (!emit(ctx, op.sh, op.spec, b, op.pc, gx, gy, 1)) return false;
        r0 = r1;
    }
    return true;
}

/* Binds t whole (slot b) and puts its element offset within the binding in pc_slot. */
static fit bind_whole(backend_ctx * ctx, const tsr_tensor * t, size_t es, bind & b, uint32_t & pc_slot) {
    int64_t eoff = 0;
    const fit f = make_bind(ctx, t, 0, tsr_nbytes(t), es, b, eoff);
    pc_slot = static_cast<uint32_t>(eoff);
    return f;
}

/* ---- per-op encoders -------------------------------------------------------------------- */

static bool is_f32(const tsr_tensor * t) { return t && t->type == TSR_TYPE_F32; }
static bool is_f32_or_f16(const tsr_tensor * t) { return t && (t->type == TSR_TYPE_F32 || t->type == TSR_TYPE_F16); }

static int unary_code(const tsr_tensor * node) {
    switch (node->op) {
    case TSR_OP_SQR: return 9;
    case TSR_OP_SQRT: return 10;
    case TSR_OP_LOG: return 11;
    case TSR_OP_SCALE: return 12;
    case TSR_OP_CLAMP: return 13;
    case TSR_OP_UNARY:
        switch (tsr_get_unary_op(node)) {
        case TSR_UNARY_OP_RELU: return 0;
        case TSR_UNARY_OP_TANH: return 1;
        case TSR_UNARY_OP_SIGMOID: return 2;
        case TSR_UNARY_OP_GELU: return 3;
        case TSR_UNARY_OP_GELU_QUICK: return 4;
        case TSR_UNARY_OP_SILU: return 5;
        case TSR_UNARY_OP_NEG: return 6;
        case TSR_UNARY_OP_ABS: return 7;
        case TSR_UNARY_OP_EXP: return 8;
        /* issue 17 part A */
        case TSR_UNARY_OP_SGN: return 14;
        case TSR_UNARY_OP_STEP: return 15;
        case TSR_UNARY_OP_ELU: return 16;
        case TSR_UNARY_OP_HARDSWISH: return 17;
        case TSR_UNARY_OP_HARDSIGMOID: return 18;
        case TSR_UNARY_OP_EXPM1: return 19;
        case TSR_UNARY_OP_SOFTPLUS: return 20;
        case TSR_UNARY_OP_GELU_ERF: return 21;
        case TSR_UNARY_OP_FLOOR: return 22;
        case TSR_UNARY_OP_CEIL: return 23;
        case TSR_UNARY_OP_ROUND: return 24;
        case TSR_UNARY_OP_TRUNC: return 25;
        default: return -1;
        }
    /* issue 17 part A */
    case TSR_OP_SIN: return 26;
    case TSR_OP_COS: return 27;
    case TSR_OP_LEAKY_RELU: return 28;
    case TSR_OP_FILL: return 29;
    default: return -1;
    }
}

/* false + error: the node cannot run (CHECK mode: the same answer, the message for supports_op). */
static bool unsupported(const tsr_tensor * node, const char * why) {
    return tsr_set_error("Vulkan: node '%s' (%s, %s): %s", op_label(node), tsr_op_desc(node),
                         tsr_type_name(node->src[0] ? node->src[0]->type : node->type), why);
}

static bool enc_unary(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * a = node->src[0];
    int code = unary_code(node);
    if (code < 0) return unsupported(node, "unary op not implemented");
    if (!is_f32(a) || !is_f32(node) || !tsr_are_same_shape(a, node)) return unsupported(node, "needs F32 of equal shapes");
    row_op op;
    op.sh = SH_UNARY;
    op.spec = static_cast<uint32_t>(code) | ((tsr_is_contiguous(a) && tsr_is_contiguous(node)) ? 32u : 0u);
    op.src[0] = a; op.kind[0] = K_ROWS;
    op.dst = node;
    if (!put_shape(op.pc, 0, a, 4) || !put_shape(op.pc, 16, node, 4)) return unsupported(node, "fractional strides");
    float p0 = 0.0f, p1 = 0.0f;
    if (node->op == TSR_OP_SCALE) { p0 = tsr_get_op_params_f32(node, 0); p1 = tsr_get_op_params_f32(node, 1); }
    if (node->op == TSR_OP_CLAMP) { p0 = tsr_get_op_params_f32(node, 0); p1 = tsr_get_op_params_f32(node, 1); }
    if (node->op == TSR_OP_LEAKY_RELU || node->op == TSR_OP_FILL) p0 = tsr_get_op_params_f32(node, 0);
    memcpy(&op.pc[PC_P0], &p0, 4); memcpy(&op.pc[PC_P1], &p1, 4);
    return run_row_op(ctx, op, node);
}

static bool enc_binary(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * a = node->src[0], * b = node->src[1];
    if (!is_f32(a) || !is_f32(b) || !is_f32(node)) return unsupported(node, "needs F32 operands");
    if (!tsr_are_same_shape(a, node) || !tsr_can_repeat(b, a)) return unsupported(node, "shapes do not broadcast");
    row_op op;
    op.sh = SH_BINARY;
    op.spec = node->op == TSR_OP_ADD ? 0 : node->op == TSR_OP_SUB ? 1 : node->op == TSR_OP_MUL ? 2 : 3;
    if (tsr_is_contiguous(a) && tsr_is_contiguous(node) && tsr_is_contiguous(b)) {
        if (tsr_are_same_shape(a, b)) op.spec |= 1u << 2;
        else if (b->ne[0] == a->ne[0] && tsr_nelements(b) == b->ne[0]) op.spec |= 2u << 2;
    }
    op.src[0] = a; op.kind[0] = K_ROWS;
    op.src[1] = b; op.kind[1] = tsr_are_same_shape(a, b) ? K_ROWS : K_WHOLE;
    op.dst = node;
    if (!put_shape(op.pc, 0, a, 4) || !put_shape(op.pc, 8, b, 4) || !put_shape(op.pc, 16, node, 4)) return unsupported(node, "fractional strides");
    return run_row_op(ctx, op, node);
}

static bool enc_copy(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * a = node->src[0];
    if (!is_f32_or_f16(a) || !is_f32_or_f16(node)) return unsupported(node, "copies among F32 and F16 only");
    if (tsr_nelements(a) != tsr_nelements(node)) return unsupported(node, "element counts differ");
    row_op op;
    bool sf16 = a->type == TSR_TYPE_F16, df16 = node->type == TSR_TYPE_F16;
    op.sh = sf16 ? (df16 ? SH_COPY_F16_F16 : SH_COPY_F16_F32) : (df16 ? SH_COPY_F32_F16 : SH_COPY_F32_F32);
    op.spec = (tsr_is_contiguous(a) && tsr_is_contiguous(node)) ? 1u : 0u;
    op.src[0] = a; op.kind[0] = K_FLAT; op.es[0] = elem_bytes(a->type);
    op.dst = node; op.esd = elem_bytes(node->type);
    if (!put_shape(op.pc, 0, a, op.es[0]) || !put_shape(op.pc, 16, node, op.esd)) return unsupported(node, "fractional strides");
    return run_row_op(ctx, op, node);
}

static bool enc_glu(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * a = node->src[0], * b = node->src[1];
    const int glu_op = tsr_get_op_params_i32(node, 0);
    if (glu_op < 0 || glu_op >= TSR_GLU_OP_COUNT) return unsupported(node, "glu op not implemented");
    if (!is_f32(a) || !is_f32(node) || (b && !is_f32(b))) return unsupported(node, "needs F32");
    if (b ? !tsr_are_same_shape(a, b) || !tsr_are_same_shape(a, node)
          : (a->ne[0] != 2 * node->ne[0] || a->ne[1] != node->ne[1] || a->ne[2] != node->ne[2] || a->ne[3] != node->ne[3]))
        return unsupported(node, "shapes do not match");
    row_op op;
    op.sh = SH_GLU;
    op.src[0] = a; op.kind[0] = K_ROWS;
    if (b) { op.src[1] = b; op.kind[1] = K_ROWS; }
    op.dst = node;
    if (!put_shape(op.pc, 0, a, 4) || (b && !put_shape(op.pc, 8, b, 4)) || !put_shape(op.pc, 16, node, 4)) return unsupported(node, "fractional strides");
    op.pc[PC_U0] = (b ? 1u : 0u) | (tsr_get_op_params_i32(node, 1) ? 2u : 0u) | (static_cast<uint32_t>(glu_op) << 2);
    const float alpha = tsr_get_op_params_f32(node, 2), limit = tsr_get_op_params_f32(node, 3);
    memcpy(&op.pc[PC_P0], &alpha, 4); memcpy(&op.pc[PC_P1], &limit, 4);
    return run_row_op(ctx, op, node);
}

static bool enc_concat(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * a = node->src[0], * b = node->src[1];
    int dim = tsr_get_op_params_i32(node, 0);
    if (!is_f32(a) || !is_f32(b) || !is_f32(node) || dim < 0 || dim > 3) return unsupported(node, "needs F32 and dim in [0, 4)");
    row_op op;
    op.sh = SH_CONCAT;
    op.src[0] = a; op.kind[0] = K_WHOLE;
    op.src[1] = b; op.kind[1] = K_WHOLE;
    op.dst = node;
    if (!put_shape(op.pc, 0, a, 4) || !put_shape(op.pc, 8, b, 4) || !put_shape(op.pc, 16, node, 4)) return unsupported(node, "fractional strides");
    op.pc[PC_U0] = static_cast<uint32_t>(dim);
    return run_row_op(ctx, op, node);
}

static bool enc_diag_mask_inf(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * a = node->src[0];
    if (!is_f32(a) || !is_f32(node) || !tsr_are_same_shape(a, node)) return unsupported(node, "needs F32 of equal shapes");
    row_op op;
    op.sh = SH_DIAG_MASK_INF;
    op.src[0] = a; op.kind[0] = K_ROWS;
    op.dst = node;
    if (!put_shape(op.pc, 0, a, 4) || !put_shape(op.pc, 16, node, 4)) return unsupported(node, "fractional strides");
    op.pc[PC_U0] = static_cast<uint32_t>(tsr_get_op_params_i32(node, 0));
    return run_row_op(ctx, op, node);
}

static bool enc_norm(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * a = node->src[0];
    if (!is_f32(a) || !is_f32(node) || !tsr_are_same_shape(a, node)) return unsupported(node, "needs F32 of equal shapes");
    row_op op;
    op.sh = SH_NORM; op.spec = node->op == TSR_OP_RMS_NORM ? 1 : node->op == TSR_OP_L2_NORM ? 2 : 0;
    op.src[0] = a; op.kind[0] = K_ROWS;
    op.dst = node; op.g = G_ROW;
    if (!put_shape(op.pc, 0, a, 4) || !put_shape(op.pc, 16, node, 4)) return unsupported(node, "fractional strides");
    float eps = tsr_get_op_params_f32(node, 0);
    memcpy(&op.pc[PC_P0], &eps, 4);
    return run_row_op(ctx, op, node);
}

/* issue 17 part A: one workgroup per row (top_k.comp: k picks; cumsum.comp: chunked scan) */
static bool enc_row_scan(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * a = node->src[0];
    const bool top_k = node->op == TSR_OP_TOP_K;
    if (!is_f32(a) || node->type != (top_k ? TSR_TYPE_I32 : TSR_TYPE_F32)) return unsupported(node, "needs F32 rows");
    row_op op;
    op.sh = top_k ? SH_TOP_K : SH_CUMSUM;
    op.src[0] = a; op.kind[0] = K_ROWS;
    op.dst = node; op.g = G_ROW;
    if (!put_shape(op.pc, 0, a, 4) || !put_shape(op.pc, 16, node, 4)) return unsupported(node, "fractional strides");
    return run_row_op(ctx, op, node);
}

static bool enc_soft_max(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * a = node->src[0], * m = node->src[1];
    if (!is_f32(a) || !is_f32(node) || !tsr_are_same_shape(a, node)) return unsupported(node, "needs F32 of equal shapes");
    if (m && (!is_f32_or_f16(m) || m->ne[0] != a->ne[0] || m->ne[1] < a->ne[1] ||
              (m->ne[2] && a->ne[2] % m->ne[2]) || (m->ne[3] && a->ne[3] % m->ne[3])))
        return unsupported(node, "mask must be F32/F16 [ne0, >= ne1] broadcast over dims 2-3");
    row_op op;
    op.sh = (m && m->type == TSR_TYPE_F16) ? SH_SOFT_MAX_F16 : SH_SOFT_MAX_F32;
    op.spec = m ? 1 : 0;
    op.src[0] = a; op.kind[0] = K_ROWS;
    if (m) { op.src[1] = m; op.kind[1] = K_WHOLE; op.es[1] = elem_bytes(m->type); }
    op.dst = node; op.g = G_ROW;
    if (!put_shape(op.pc, 0, a, 4) || (m && !put_shape(op.pc, 8, m, op.es[1])) || !put_shape(op.pc, 16, node, 4)) return unsupported(node, "fractional strides");
    if (!m) for (int i = 8; i < 12; i++) op.pc[i] = 1;
    float scale = tsr_get_op_params_f32(node, 0), max_bias = tsr_get_op_params_f32(node, 1);
    memcpy(&op.pc[PC_P0], &scale, 4); memcpy(&op.pc[PC_P1], &max_bias, 4);
    uint32_t n_head = static_cast<uint32_t>(a->ne[2]);
    uint32_t nhl = 1;
    while (nhl * 2 <= n_head) nhl *= 2;
    op.pc[PC_U0] = nhl;
    return run_row_op(ctx, op, node);
}

static float rope_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * 3.14159265358979323846f)) / (2 * logf(base));
}

/* rope.comp's MODE of a ggml rope mode, -1 when it has none. */
static int rope_shader_mode(int mode) {
    switch (mode) {
    case TSR_ROPE_TYPE_NORMAL: return 0;
    case TSR_ROPE_TYPE_NEOX: return 1;
    case TSR_ROPE_TYPE_MROPE: return 2;
    case TSR_ROPE_TYPE_VISION: return 3;
    case TSR_ROPE_TYPE_IMROPE: return 4;
    default: return -1;
    }
}

static bool enc_rope(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * a = node->src[0], * pos = node->src[1], * ff = node->src[2];
    const int n_dims = tsr_get_op_params_i32(node, 1), mode = tsr_get_op_params_i32(node, 2);
    const int n_ctx_orig = tsr_get_op_params_i32(node, 4);
    if (!is_f32(a) || !is_f32(node) || !tsr_are_same_shape(a, node)) return unsupported(node, "needs F32 of equal shapes");
    if (!pos || pos->type != TSR_TYPE_I32 || pos->ne[0] < a->ne[2]) return unsupported(node, "positions must be I32 [>= ne2]");
    if (a->ne[2] > UINT32_MAX / 4) return unsupported(node, "too many tokens");
    const int shader_mode = rope_shader_mode(mode);
    if (shader_mode < 0) return unsupported(node, "rope mode not implemented");
    if (n_dims <= 0 || n_dims > a->ne[0] || n_dims % 2) return unsupported(node, "n_dims must be even and <= ne0");
    if (ff && (!is_f32(ff) || ff->ne[0] < n_dims / 2)) return unsupported(node, "freq factors must be F32 [>= n_dims/2]");
    float freq_base = tsr_get_op_params_f32(node, 5), freq_scale = tsr_get_op_params_f32(node, 6);
    float ext_factor = tsr_get_op_params_f32(node, 7), attn_factor = tsr_get_op_params_f32(node, 8);
    float beta_fast = tsr_get_op_params_f32(node, 9), beta_slow = tsr_get_op_params_f32(node, 10);
    row_op op;
    op.sh = SH_ROPE; op.spec = static_cast<uint32_t>(shader_mode);
    op.src[0] = a; op.kind[0] = K_ROWS;
    op.src[1] = pos; op.kind[1] = K_WHOLE;
    if (ff) { op.src[2] = ff; op.kind[2] = K_WHOLE; }
    op.dst = node; op.g = G_PAIR;
    op.pc_off[0] = 12; op.pc_off[1] = 13; op.pc_off[2] = 14; op.pc_off[3] = 15;
    op.pc_row0 = 16; op.pc_nrows = 17;
    if (!put_shape(op.pc, 0, a, 4)) return unsupported(node, "fractional strides");
    for (int i = 0; i < 4; i++) if (!stride_el(node, i, 4, op.pc[8 + i])) return unsupported(node, "fractional strides");
    op.pc[18] = static_cast<uint32_t>(n_dims);
    op.pc[19] = ff ? 1u : 0u;
    float corr[2] = {0.0f, 0.0f};
    if (ext_factor != 0.0f) {
        float start = floorf(rope_corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base));
        float end = ceilf(rope_corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base));
        corr[0] = std::max(0.0f, start);
        corr[1] = std::min(static_cast<float>(n_dims - 1), end);
    }
    float theta_scale = powf(freq_base, -2.0f / n_dims);
    float f[6] = {freq_scale, ext_factor, attn_factor, corr[0], corr[1], theta_scale};
    memcpy(&op.pc[20], f, sizeof f);
    if (shader_mode >= 2)
        for (int i = 0; i < TSR_MROPE_SECTIONS; i++) op.pc[26 + i] = static_cast<uint32_t>(tsr_get_op_params_i32(node, 11 + i));
    return run_row_op(ctx, op, node);
}

/* The shader variant of a weight type, in the order of the SH_<OP>_* lists: F32, F16, Q8_0,
 * Q4_0 in the first list of each op, the later types (from 4 on) in the second. */
static int type_variant(enum tsr_type t) {
    switch (t) {
    case TSR_TYPE_F32: return 0;
    case TSR_TYPE_F16: return 1;
    case TSR_TYPE_Q8_0: return 2;
    case TSR_TYPE_Q4_0: return 3;
    case TSR_TYPE_Q4_1: return 4;
    case TSR_TYPE_Q5_0: return 5;
    case TSR_TYPE_Q5_1: return 6;
    case TSR_TYPE_IQ4_NL: return 7;
    case TSR_TYPE_Q2_K: return 8;
    case TSR_TYPE_Q3_K: return 9;
    case TSR_TYPE_Q4_K: return 10;
    case TSR_TYPE_Q5_K: return 11;
    case TSR_TYPE_Q6_K: return 12;
    default: return -1;
    }
}

/* Shader id of variant v of an op whose variants 0..3 start at `first` and 4.. at `later`. */
static int variant_shader(int first, int later, int v) { return v < 4 ? first + v : later + (v - 4); }

/* Strides of a (F32/F16 in elements, quantized in bytes) for rows of contiguous blocks. */
static bool rows_layout_ok(const tsr_tensor * a) {
    return a->nb[0] == tsr_type_size(a->type) && a->ne[0] % tsr_blck_size(a->type) == 0;
}

static bool enc_get_rows(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * a = node->src[0], * idx = node->src[1];
    int v = type_variant(a->type);
    if (v < 0) return unsupported(node, "source type not implemented");
    if (!idx || idx->type != TSR_TYPE_I32 || !is_f32(node) || !rows_layout_ok(a)) return unsupported(node, "needs I32 indices, F32 dst, rows of whole blocks");
    if (node->ne[0] != a->ne[0] || node->ne[1] != idx->ne[0] || node->ne[2] != idx->ne[1] || node->ne[3] != idx->ne[2])
        return unsupported(node, "shapes do not match");
    const size_t es = elem_bytes(a->type);
    uint32_t pc[32] = {};
    if (!put_shape(pc, 0, a, es) || !put_shape(pc, 8, idx, 4) || !put_shape(pc, 16, node, 4)) return unsupported(node, "fractional strides");
    /* dst and indices bound whole; the source in windows of rows when it is large */
    bind b[5];
    b[2] = b[4] = dummy_bind(ctx);
    fit f = bind_whole(ctx, idx, 4, b[1], pc[PC_OFF1]);
    if (f == FIT_OK) f = bind_whole(ctx, node, 4, b[3], pc[PC_OFFD]);
    if (f != FIT_OK) return unsupported(node, "indices or result larger than maxStorageBufferRange, or not in a buffer of this device");
    const int64_t R = a->ne[1];
    const bool can_split = a->ne[2] == 1 && a->ne[3] == 1;
    int64_t r0 = 0, step = R;
    uint64_t n = static_cast<uint64_t>(tsr_nelements(node));
    uint32_t gx, gy;
    if (!put_groups((n + 255) / 256, gx, gy) || n > UINT32_MAX) return unsupported(node, "too many elements");
    pc[PC_ROW0] = 0;
    pc[PC_NROWS] = static_cast<uint32_t>(nrows_of(node));
    if (R == 0 || n == 0) return true;
    int64_t eoff = 0;
    while (r0 < R) {
        int64_t r1 = std::min(R, r0 + step);
        size_t lo = can_split ? static_cast<size_t>(r0) * a->nb[1] : 0;
        size_t hi = can_split ? static_cast<size_t>(r1 - 1) * a->nb[1] + row_span(a) : tsr_nbytes(a);
        f = make_bind(ctx, a, lo, hi, es, b[0], eoff);
        if (f == FIT_UNSUPPORTED) return unsupported(node, "source offset is not whole elements or not in a buffer of this device");
        if (f == FIT_TOO_BIG) {
            if (!can_split || r1 - r0 == 1) return unsupported(node, "source larger than maxStorageBufferRange and not splittable");
            step = std::max<int64_t>(1, (r1 - r0) / 2);
            continue;
        }
        pc[PC_OFF0] = static_cast<uint32_t>(eoff);
        pc[PC_U0] = static_cast<uint32_t>(r0);
        uint32_t hi_row = static_cast<uint32_t>(r1);
        memcpy(&pc[PC_P0], &hi_row, 4);
        if (!emit(ctx, variant_shader(SH_GET_ROWS_F32, SH_GET_ROWS_Q4_1, v), 0, b, pc, gx, gy, 1)) return false;
        r0 = r1;
    }
    return true;
}

/* set_rows: the node is a view of the destination (src2), written in place; the source rows,
 * the indices and the destination are bound whole (a destination past maxStorageBufferRange,
 * a large KV cache on lavapipe, is refused and the scheduler runs the node on the CPU). */
static bool enc_set_rows(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * src = node->src[0], * idx = node->src[1];
    if (!is_f32(src) || !idx || idx->type != TSR_TYPE_I32 || !is_f32_or_f16(node))
        return unsupported(node, "needs F32 source rows, I32 indices and an F32 or F16 destination");
    const size_t esd = node->type == TSR_TYPE_F16 ? 2 : 4;
    uint32_t pc[32] = {};
    if (!put_shape(pc, 0, src, 4) || !put_shape(pc, 8, idx, 4) || !put_shape(pc, 16, node, esd)) return unsupported(node, "fractional strides");
    const uint64_t n = static_cast<uint64_t>(tsr_nelements(src));
    uint32_t gx, gy;
    if (n > UINT32_MAX || !put_groups((n + 255) / 256, gx, gy)) return unsupported(node, "too many elements");
    pc[PC_ROW0] = 0;
    pc[PC_NROWS] = static_cast<uint32_t>(nrows_of(src));
    bind b[5];
    b[2] = b[4] = dummy_bind(ctx);
    fit f = bind_whole(ctx, src, 4, b[0], pc[PC_OFF0]);
    if (f == FIT_OK) f = bind_whole(ctx, idx, 4, b[1], pc[PC_OFF1]);
    if (f == FIT_OK) f = bind_whole(ctx, node, esd, b[3], pc[PC_OFFD]);
    if (f != FIT_OK) return unsupported(node, "an operand is larger than maxStorageBufferRange, not whole elements or not in a buffer of this device");
    if (n == 0) return true;
    return emit(ctx, node->type == TSR_TYPE_F16 ? SH_SET_ROWS_F16 : SH_SET_ROWS_F32, 0, b, pc, gx, gy, 1);
}

static bool enc_mul_mat(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * a = node->src[0], * b = node->src[1];
    int v = type_variant(a->type);
    if (v < 0) return unsupported(node, "weight type not implemented");
    if (!is_f32(b) || !is_f32(node)) return unsupported(node, "needs F32 src1 and dst");
    if (!rows_layout_ok(a) || b->nb[0] != 4 || node->nb[0] != 4) return unsupported(node, "rows of src0, src1 and dst must be contiguous");
    if (a->ne[0] != b->ne[0] || node->ne[0] != a->ne[1] || node->ne[1] != b->ne[1] || node->ne[2] != b->ne[2] || node->ne[3] != b->ne[3] ||
        b->ne[2] % a->ne[2] || b->ne[3] % a->ne[3])
        return unsupported(node, "shapes do not match");
    const size_t es = elem_bytes(a->type);
    uint32_t pc[32] = {};
    const int64_t M = a->ne[1], N = b->ne[1], K = a->ne[0];
    const int64_t batch = b->ne[2] * b->ne[3];
    if (M == 0 || N == 0 || batch == 0) return true;
    if (batch > 65535 || M > UINT32_MAX || N > UINT32_MAX || K > UINT32_MAX) return unsupported(node, "too large");
    pc[1] = static_cast<uint32_t>(N); pc[2] = static_cast<uint32_t>(K);
    bool ok = stride_el(a, 1, es, pc[4]) && stride_el(a, 2, es, pc[5]) && stride_el(a, 3, es, pc[6]) &&
              stride_el(b, 1, 4, pc[7]) && stride_el(b, 2, 4, pc[8]) && stride_el(b, 3, 4, pc[9]) &&
              stride_el(node, 1, 4, pc[10]) && stride_el(node, 2, 4, pc[11]) && stride_el(node, 3, 4, pc[12]);
    if (!ok) return unsupported(node, "fractional strides");
    pc[13] = static_cast<uint32_t>(b->ne[2]);
    pc[14] = static_cast<uint32_t>(b->ne[2] / a->ne[2]);
    pc[15] = static_cast<uint32_t>(b->ne[3] / a->ne[3]);
    bind bd[5];
    bd[2] = bd[4] = dummy_bind(ctx);
    fit f = bind_whole(ctx, b, 4, bd[1], pc[17]);
    if (f == FIT_OK) f = bind_whole(ctx, node, 4, bd[3], pc[18]);
    int64_t eoff = 0;
    if (f != FIT_OK) return unsupported(node, "src1 or result larger than maxStorageBufferRange, or not in a buffer of this device");
    const bool vec = N <= 4;
    const bool can_split = a->ne[2] == 1 && a->ne[3] == 1;
    int64_t m0 = 0, step = M;
    while (m0 < M) {
        int64_t m1 = std::min(M, m0 + step);
        size_t lo = can_split ? static_cast<size_t>(m0) * a->nb[1] : 0;
        size_t hi = can_split ? static_cast<size_t>(m1 - 1) * a->nb[1] + row_span(a) : tsr_nbytes(a);
        f = make_bind(ctx, a, lo, hi, es, bd[0], eoff);
        if (f == FIT_UNSUPPORTED) return unsupported(node, "src0 offset is not whole elements or not in a buffer of this device");
        if (f == FIT_TOO_BIG) {
            if (!can_split || m1 - m0 == 1) return unsupported(node, "src0 larger than maxStorageBufferRange and not splittable");
            step = std::max<int64_t>(1, (m1 - m0) / 2);
            continue;
        }
        /* off0 points at row m0 (the shader indexes rows relative to the chunk) */
        pc[16] = static_cast<uint32_t>(static_cast<int32_t>(eoff + m0 * static_cast<int64_t>(pc[4])));
        pc[0] = static_cast<uint32_t>(m1 - m0);
        pc[3] = static_cast<uint32_t>(m0);
        uint32_t gx, gy, gz = static_cast<uint32_t>(batch);
        if (vec) {
            if (!put_groups(static_cast<uint64_t>(m1 - m0), gx, gy)) return unsupported(node, "too many rows");
            if (!emit(ctx, variant_shader(SH_MUL_MAT_VEC_F32, SH_MUL_MAT_VEC_Q4_1, v), 0, bd, pc, gx, gy, gz)) return false;
        } else {
            /* 128x128 tiles (8x8 per invocation) for large products, else 64x64 */
            const uint32_t tm = (m1 - m0 >= 512 && N >= 256) ? 8 : 4;
            const int64_t tile = 16 * tm;
            gx = static_cast<uint32_t>((m1 - m0 + tile - 1) / tile);
            gy = static_cast<uint32_t>((N + tile - 1) / tile);
            if (gx > 65535 || gy > 65535) return unsupported(node, "too many tiles");
            if (!emit(ctx, variant_shader(SH_MUL_MAT_F32, SH_MUL_MAT_Q4_1, v), tm, bd, pc, gx, gy, gz)) return false;
        }
        m0 = m1;
    }
    return true;
}

/* issue 17 part B: mul_mat_id as one mat-vec per (slot, token) pair (mul_mat_vec.comp's IDS):
 * each pair reads only the expert its id names, as decode needs. */
static bool enc_mul_mat_id(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * as = node->src[0], * b = node->src[1], * ids = node->src[2];
    const int v = type_variant(as->type);
    if (v < 0) return unsupported(node, "weight type not implemented");
    if (!is_f32(b) || !is_f32(node) || !rows_layout_ok(as) || b->nb[0] != 4 || node->nb[0] != 4 || ids->nb[0] != 4)
        return unsupported(node, "needs F32 b and dst, contiguous rows and ids");
    const int64_t M = as->ne[1], n_used = ids->ne[0], n_tok = ids->ne[1];
    const uint64_t pairs = static_cast<uint64_t>(n_used) * static_cast<uint64_t>(n_tok);
    if (pairs > UINT32_MAX || M > UINT32_MAX || as->ne[0] > UINT32_MAX || as->ne[2] > UINT32_MAX) return unsupported(node, "too large");
    const size_t es = elem_bytes(as->type);
    uint32_t pc[32] = {};
    pc[0] = static_cast<uint32_t>(M); pc[1] = 1; pc[2] = static_cast<uint32_t>(as->ne[0]);
    const bool ok = stride_el(as, 1, es, pc[4]) && stride_el(as, 2, es, pc[5]) && stride_el(b, 1, 4, pc[7]) &&
                    stride_el(b, 2, 4, pc[8]) && stride_el(node, 1, 4, pc[10]) && stride_el(node, 2, 4, pc[11]) &&
                    stride_el(ids, 1, 4, pc[22]);
    if (!ok) return unsupported(node, "fractional strides");
    pc[13] = pc[14] = pc[15] = 1;
    pc[20] = static_cast<uint32_t>(n_used); pc[21] = static_cast<uint32_t>(b->ne[1]); pc[23] = static_cast<uint32_t>(as->ne[2]);
    bind bd[5];
    bd[4] = dummy_bind(ctx);
    const tsr_tensor * ts[4] = {as, b, ids, node};
    const size_t ess[4] = {es, 4, 4, 4};
    const int off_slot[4] = {16, 17, 24, 18};
    for (int i = 0; i < 4; i++)
        if (bind_whole(ctx, ts[i], ess[i], bd[i], pc[off_slot[i]]) != FIT_OK)
            return unsupported(node, "an operand is larger than maxStorageBufferRange or not in a buffer of this device");
    uint32_t gx, gy;
    if (!put_groups(static_cast<uint64_t>(M), gx, gy)) return unsupported(node, "too many rows");
    /* at most 65535 workgroups in z: one dispatch per run of pairs */
    for (uint64_t pair0 = 0; pair0 < pairs; pair0 += 65535) {
        pc[19] = static_cast<uint32_t>(pair0);
        const uint32_t gz = static_cast<uint32_t>(std::min<uint64_t>(pairs - pair0, 65535));
        if (!emit(ctx, variant_shader(SH_MUL_MAT_VEC_F32, SH_MUL_MAT_VEC_Q4_1, v), 1, bd, pc, gx, gy, gz)) return false;
    }
    return true;
}

/* issue 17 part B: models.comp's OP of a node, -1 when it has none */
enum models_op { MO_TIMESTEP_EMBEDDING, MO_CONV_2D_DW, MO_CONV_TRANSPOSE_1D, MO_PAD, MO_PAD_REFLECT_1D, MO_ROLL, MO_SSM_CONV };

static int models_op_of(const tsr_tensor * node) {
    switch (node->op) {
    case TSR_OP_TIMESTEP_EMBEDDING: return MO_TIMESTEP_EMBEDDING;
    case TSR_OP_CONV_2D_DW: return MO_CONV_2D_DW;
    case TSR_OP_CONV_TRANSPOSE_1D: return MO_CONV_TRANSPOSE_1D;
    case TSR_OP_PAD: return MO_PAD;
    case TSR_OP_PAD_REFLECT_1D: return MO_PAD_REFLECT_1D;
    case TSR_OP_ROLL: return MO_ROLL;
    case TSR_OP_SSM_CONV: return MO_SSM_CONV;
    default: return -1;
    }
}

/* (x, y) as one push-constant word (models.comp's unpack_pair); false when either is outside [0, 65535]. */
static bool pack_pair(int32_t x, int32_t y, uint32_t & out) {
    if (x < 0 || y < 0 || x > 0xffff || y > 0xffff) return false;
    out = static_cast<uint32_t>(x) | static_cast<uint32_t>(y) << 16;
    return true;
}

/* Shift of a roll as the equivalent one in [0, ne) (models.comp adds ne - shift). */
static uint32_t roll_shift(int32_t shift, int64_t ne) {
    return static_cast<uint32_t>(((shift % ne) + ne) % ne);
}

/* The op's parameters in models.comp's slots; false when one does not fit. */
static bool models_params(const tsr_tensor * node, int mo, uint32_t * pc) {
    auto p = [node](int i) { return tsr_get_op_params_i32(node, static_cast<uint32_t>(i)); };
    switch (mo) {
    case MO_TIMESTEP_EMBEDDING: pc[PC_P0] = static_cast<uint32_t>(p(1)); return true;
    case MO_CONV_2D_DW: return pack_pair(p(0), p(1), pc[PC_P0]) && pack_pair(p(2), p(3), pc[PC_P1]) && pack_pair(p(4), p(5), pc[PC_U0]);
    case MO_CONV_TRANSPOSE_1D: return pack_pair(p(0), 1, pc[PC_P0]) && pack_pair(p(1), 0, pc[PC_P1]) && pack_pair(p(2), 1, pc[PC_U0]);
    case MO_PAD: for (int i = 0; i < 4; i++) pc[8 + i] = static_cast<uint32_t>(p(4 + i)); return true;
    case MO_PAD_REFLECT_1D: pc[PC_U0] = static_cast<uint32_t>(p(0)); return true;
    case MO_ROLL: for (int i = 0; i < 4; i++) pc[8 + i] = roll_shift(p(i), node->src[0]->ne[i]); return true;
    default: return true;
    }
}

/* issue 17 part B: gathers of one output element each (models.comp) */
static bool enc_models(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * a = node->src[0], * b = node->src[1];
    const int mo = models_op_of(node);
    const bool conv = mo == MO_CONV_2D_DW || mo == MO_CONV_TRANSPOSE_1D;
    const bool two_sources = conv || mo == MO_SSM_CONV;
    if (!is_f32(node) || !(conv ? is_f32_or_f16(a) : is_f32(a)) || (two_sources && !is_f32(b)))
        return unsupported(node, conv ? "needs an F32/F16 kernel and F32 input" : "needs F32");
    row_op op;
    op.sh = a->type == TSR_TYPE_F16 ? SH_MODELS_K16 : SH_MODELS;
    op.spec = static_cast<uint32_t>(mo);
    op.src[0] = a; op.kind[0] = K_WHOLE; op.es[0] = elem_bytes(a->type);
    if (two_sources) { op.src[1] = b; op.kind[1] = K_WHOLE; }
    op.dst = node;
    if (!put_shape(op.pc, 0, a, op.es[0]) || (two_sources && !put_shape(op.pc, 8, b, 4)) || !put_shape(op.pc, 16, node, 4))
        return unsupported(node, "fractional strides");
    if (!models_params(node, mo, op.pc)) return unsupported(node, "a stride, padding or dilation above 65535");
    return run_row_op(ctx, op, node);
}

static bool enc_flash_attn(backend_ctx * ctx, const tsr_tensor * node) {
    const tsr_tensor * q = node->src[0], * k = node->src[1], * v = node->src[2], * m = node->src[3];
    if (!is_f32(q) || !is_f32(node) || !k || !v || k->type != v->type || !is_f32_or_f16(k))
        return unsupported(node, "needs F32 q and F32/F16 k, v of one type");
    if (m && !is_f32_or_f16(m)) return unsupported(node, "mask must be F32 or F16");
    const int64_t D = q->ne[0], Dv = v->ne[0], n_q = q->ne[1], n_head = q->ne[2], B = q->ne[3], n_kv = k->ne[1];
    if (D > 256 || Dv > 512 || k->ne[0] != D || n_head % k->ne[2] || q->nb[0] != 4 || k->nb[0] != tsr_type_size(k->type) ||
        v->nb[0] != tsr_type_size(v->type) || !tsr_is_contiguous(node))
        return unsupported(node, "head size above 256 (or Dv above 512), or rows not contiguous");
    const size_t ek = elem_bytes(k->type), em = m ? elem_bytes(m->type) : 4;
    uint32_t pc[32] = {};
    pc[0] = static_cast<uint32_t>(D); pc[1] = static_cast<uint32_t>(Dv);
    pc[2] = static_cast<uint32_t>(n_q); pc[3] = static_cast<uint32_t>(n_kv);
    pc[4] = static_cast<uint32_t>(n_head); pc[5] = static_cast<uint32_t>(n_head / k->ne[2]);
    uint32_t nhl = 1;
    while (nhl * 2 <= pc[4]) nhl *= 2;
    pc[6] = nhl;
    bool ok = stride_el(q, 1, 4, pc[8]) && stride_el(q, 2, 4, pc[9]) && stride_el(q, 3, 4, pc[10]) &&
              stride_el(k, 1, ek, pc[11]) && stride_el(k, 2, ek, pc[12]) && stride_el(k, 3, ek, pc[13]) &&
              stride_el(v, 1, ek, pc[14]) && stride_el(v, 2, ek, pc[15]) && stride_el(v, 3, ek, pc[16]);
    if (m) {
        ok = ok && stride_el(m, 1, em, pc[17]) && stride_el(m, 2, em, pc[18]) && stride_el(m, 3, em, pc[19]);
        pc[20] = static_cast<uint32_t>(m->ne[2]); pc[21] = static_cast<uint32_t>(m->ne[3]);
    } else {
        pc[20] = pc[21] = 1;
    }
    if (!ok) return unsupported(node, "fractional strides");
    float scale = tsr_get_op_params_f32(node, 0), max_bias = tsr_get_op_params_f32(node, 1), softcap = tsr_get_op_params_f32(node, 2);
    if (softcap != 0.0f) scale /= softcap;
    memcpy(&pc[27], &scale, 4); memcpy(&pc[28], &max_bias, 4); memcpy(&pc[29], &softcap, 4);
    bind b[5];
    const tsr_tensor * ts[5] = {q, k, v, node, m};
    const size_t es[5] = {4, ek, ek, 4, em};
    const int off_slot[5] = {22, 23, 24, 26, 25};  /* q, k, v, dst, mask */
    for (int i = 0; i < 5; i++) {
        if (!ts[i]) { b[i] = dummy_bind(ctx); pc[off_slot[i]] = 0; continue; }  /* only the mask is optional */
        if (bind_whole(ctx, ts[i], es[i], b[i], pc[off_slot[i]]) != FIT_OK)
            return unsupported(node, "an operand is larger than maxStorageBufferRange or not in a buffer of this device");
    }
    uint32_t gx, gy;
    if (!put_groups(static_cast<uint64_t>(n_q * n_head * B), gx, gy)) return unsupported(node, "too many query rows");
    int sh = k->type == TSR_TYPE_F16 ? (m && m->type == TSR_TYPE_F16 ? SH_FLASH_ATTN_F16_M16 : SH_FLASH_ATTN_F16_M32)
                                     : (m && m->type == TSR_TYPE_F16 ? SH_FLASH_ATTN_F32_M16 : SH_FLASH_ATTN_F32_M32);
    return emit(ctx, sh, m ? 1u : 0u, b, pc, gx, gy, 1);
}

static bool is_noop(enum tsr_op op) {
    return op == TSR_OP_NONE || op == TSR_OP_VIEW || op == TSR_OP_RESHAPE || op == TSR_OP_PERMUTE || op == TSR_OP_TRANSPOSE;
}

/* Encode one node in the context's mode. */
static bool encode_node(backend_ctx * ctx, const tsr_tensor * node) {
    if (is_noop(node->op)) return true;
    if (tsr_is_empty(node)) return true;
    switch (node->op) {
    case TSR_OP_UNARY: case TSR_OP_SQR: case TSR_OP_SQRT: case TSR_OP_LOG: case TSR_OP_SCALE: case TSR_OP_CLAMP:
    case TSR_OP_SIN: case TSR_OP_COS: case TSR_OP_LEAKY_RELU: case TSR_OP_FILL:   /* issue 17 part A */
        return enc_unary(ctx, node);
    case TSR_OP_ADD: case TSR_OP_SUB: case TSR_OP_MUL: case TSR_OP_DIV:
        return enc_binary(ctx, node);
    case TSR_OP_CPY: case TSR_OP_CONT: case TSR_OP_DUP:
        return enc_copy(ctx, node);
    case TSR_OP_GLU: return enc_glu(ctx, node);
    case TSR_OP_CONCAT: return enc_concat(ctx, node);
    case TSR_OP_DIAG_MASK_INF: return enc_diag_mask_inf(ctx, node);
    case TSR_OP_NORM: case TSR_OP_RMS_NORM: return enc_norm(ctx, node);
    /* issue 17 part A */
    case TSR_OP_L2_NORM: return enc_norm(ctx, node);
    case TSR_OP_TOP_K: case TSR_OP_CUMSUM: return enc_row_scan(ctx, node);
    case TSR_OP_SOFT_MAX: return enc_soft_max(ctx, node);
    case TSR_OP_ROPE: return enc_rope(ctx, node);
    case TSR_OP_GET_ROWS: return enc_get_rows(ctx, node);
    case TSR_OP_SET_ROWS: return enc_set_rows(ctx, node);
    case TSR_OP_MUL_MAT: return enc_mul_mat(ctx, node);
    case TSR_OP_FLASH_ATTN_EXT: return enc_flash_attn(ctx, node);
    /* issue 17 part B */
    case TSR_OP_MUL_MAT_ID: return enc_mul_mat_id(ctx, node);
    case TSR_OP_TIMESTEP_EMBEDDING: case TSR_OP_CONV_2D_DW: case TSR_OP_CONV_TRANSPOSE_1D: case TSR_OP_PAD:
    case TSR_OP_PAD_REFLECT_1D: case TSR_OP_ROLL: case TSR_OP_SSM_CONV:
        return enc_models(ctx, node);
    default:
        return tsr_set_error("Vulkan: node '%s': op %s is not supported by the Vulkan backend", op_label(node), tsr_op_desc(node));
    }
}

} // namespace tsr_vk
} // namespace
