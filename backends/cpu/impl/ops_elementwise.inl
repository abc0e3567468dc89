/*
 * ops_elementwise.inl - the CPU ops that go element by element: copies and conversions,
 * binary ops with broadcasting, unary ops and GLU, reductions, and the shape ops (repeat,
 * concat, pad); with the helpers every ops_*.inl file uses.
 * Every op has ggml's semantics. Inputs may be non-contiguous (views, permutes); b is
 * broadcast over a where the op allows it. Each op splits its rows across threads (ith of
 * nth). Ops that the in-place contract allows read each element before writing it, so dst
 * may alias the operand. The hot inner loops call the ISA kernel table (dot products, GEMM,
 * axpy, the activation row kernels).
 */
namespace {
namespace tcpu {

static inline void row_index(const tsr_tensor * t, int64_t ir, int64_t & i1, int64_t & i2, int64_t & i3) {
    i1 = ir % t->ne[1];
    i2 = (ir / t->ne[1]) % t->ne[2];
    i3 = ir / (t->ne[1] * t->ne[2]);
}

static inline bool row_contig(const tsr_tensor * t) { return t->nb[0] == tsr_type_size(t->type); }

static inline float * thread_floats(const cparams & p, size_t per_thread_floats, size_t offset_bytes = 0) {
    return (float *)(p.wdata + offset_bytes + align_up(per_thread_floats * 4, 64) * (size_t)p.ith);
}

/* ---- copies and conversions ----------------------------------------------------------- */

static inline bool is_half_float(enum tsr_type t) { return t == TSR_TYPE_F16 || t == TSR_TYPE_BF16; }

/* The pairs convert_packed handles. */
static inline bool f32_half_pair(enum tsr_type ts, enum tsr_type td) {
    return (ts == TSR_TYPE_F32 && is_half_float(td)) || (is_half_float(ts) && td == TSR_TYPE_F32);
}

/* F32 to or from F16/BF16 over n packed elements through the row converters: one type
 * switch per run instead of one per element. */
static void convert_packed(const kernels * K, enum tsr_type ts, const char * s, enum tsr_type td, char * d, int64_t n) {
    if (ts == TSR_TYPE_F32 && td == TSR_TYPE_F16) K->f32_to_f16((const float *)s, d, n);
    else if (ts == TSR_TYPE_F32) row_from_f32(td, (const float *)s, d, n);
    else if (ts == TSR_TYPE_F16) K->f16_to_f32(s, (float *)d, n);
    else row_to_f32(ts, s, (float *)d, n);
}

/* n packed elements from s (type ts) to d (type td), neither quantized. */
static void copy_row(const kernels * K, enum tsr_type ts, const char * s, enum tsr_type td, char * d, int64_t n) {
    if (ts == td) std::memmove(d, s, (size_t)n * tsr_type_size(ts));
    else if (f32_half_pair(ts, td)) convert_packed(K, ts, s, td, d, n);
    else for (int64_t i = 0; i < n; ++i) st(td, d + i * (int64_t)tsr_type_size(td), ld(ts, s + i * (int64_t)tsr_type_size(ts)));
}

static void op_cpy(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const enum tsr_type ts = src->type, td = dst->type;
    if (ts == td && tsr_is_contiguous(src) && tsr_is_contiguous(dst) && tsr_nbytes(src) == tsr_nbytes(dst)) {
        /* same bytes in the same order (any type, quantized too): split the byte range */
        const int64_t nbytes = (int64_t)tsr_nbytes(dst);
        int64_t b0, b1;
        split_rows(nbytes, p.ith, p.nth, b0, b1);
        if (b1 > b0 && dst->data != src->data) std::memmove((char *)dst->data + b0, (const char *)src->data + b0, (size_t)(b1 - b0));
        return;
    }
    if (tsr_is_contiguous(src) && tsr_is_contiguous(dst) && f32_half_pair(ts, td)) {
        /* both packed: the flat logical order is the memory order whatever the shapes (a
         * model's K/V rows stored into a 1-D view of its F16 cache) */
        int64_t e0, e1;
        split_rows(tsr_nelements(dst), p.ith, p.nth, e0, e1);
        convert_packed(p.K, ts, (const char *)src->data + e0 * (int64_t)tsr_type_size(ts), td,
                       (char *)dst->data + e0 * (int64_t)tsr_type_size(td), e1 - e0);
        return;
    }
    if (tsr_are_same_shape(src, dst)) {
        const int64_t nr = tsr_nrows(dst), ne0 = dst->ne[0];
        int64_t r0, r1;
        split_rows(nr, p.ith, p.nth, r0, r1);
        float * tmp = thread_floats(p, (size_t)ne0);
        for (int64_t ir = r0; ir < r1; ++ir) {
            int64_t i1, i2, i3;
            row_index(dst, ir, i1, i2, i3);
            const char * s = tptr(src, 0, i1, i2, i3);
            char * d = tptr(dst, 0, i1, i2, i3);
            if (ts == td && row_contig(src) && row_contig(dst)) {
                std::memmove(d, s, tsr_row_size(ts, ne0));
            } else if (row_contig(src) && row_contig(dst) && f32_half_pair(ts, td)) {
                convert_packed(p.K, ts, s, td, d, ne0);
            } else if (tsr_is_quantized(ts) || tsr_is_quantized(td)) {
                if (tsr_is_quantized(ts)) row_to_f32(ts, s, tmp, ne0);
                else for (int64_t i0 = 0; i0 < ne0; ++i0) tmp[i0] = ld(ts, s + i0 * src->nb[0]);
                if (tsr_is_quantized(td)) row_from_f32(td, tmp, d, ne0);
                else for (int64_t i0 = 0; i0 < ne0; ++i0) st(td, d + i0 * dst->nb[0], tmp[i0]);
            } else if (ts == TSR_TYPE_F32 && td == TSR_TYPE_F32) {
                for (int64_t i0 = 0; i0 < ne0; ++i0) *(float *)(d + i0 * dst->nb[0]) = *(const float *)(s + i0 * src->nb[0]);
            } else if (ts == td) {
                const size_t es = tsr_type_size(ts);
                for (int64_t i0 = 0; i0 < ne0; ++i0) std::memcpy(d + i0 * dst->nb[0], s + i0 * src->nb[0], es);
            } else {
                for (int64_t i0 = 0; i0 < ne0; ++i0) st(td, d + i0 * dst->nb[0], ld(ts, s + i0 * src->nb[0]));
            }
        }
        return;
    }
    if (tsr_is_contiguous(dst) && row_contig(src) && !tsr_is_quantized(ts) && !tsr_is_quantized(td)) {
        /* dst packed: src row r lands at flat element r * ne00, so whole rows are copied or
         * converted (a permuted attention output merged back into [n_embd, T]) */
        const int64_t ne00 = src->ne[0];
        int64_t r0, r1;
        split_rows(tsr_nrows(src), p.ith, p.nth, r0, r1);
        for (int64_t ir = r0; ir < r1; ++ir) {
            int64_t i1, i2, i3;
            row_index(src, ir, i1, i2, i3);
            copy_row(p.K, ts, tptr(src, 0, i1, i2, i3), td, (char *)dst->data + ir * ne00 * (int64_t)tsr_type_size(td), ne00);
        }
        return;
    }
    /* different shapes, same element count: flat logical order (non-quantized) */
    const int64_t n = tsr_nelements(dst);
    int64_t e0, e1;
    split_rows(n, p.ith, p.nth, e0, e1);
    for (int64_t e = e0; e < e1; ++e) {
        int64_t r = e;
        const int64_t s0 = r % src->ne[0]; r /= src->ne[0];
        const int64_t s1 = r % src->ne[1]; r /= src->ne[1];
        const int64_t s2 = r % src->ne[2]; r /= src->ne[2];
        const int64_t s3 = r;
        r = e;
        const int64_t d0 = r % dst->ne[0]; r /= dst->ne[0];
        const int64_t d1 = r % dst->ne[1]; r /= dst->ne[1];
        const int64_t d2 = r % dst->ne[2]; r /= dst->ne[2];
        const int64_t d3 = r;
        const char * s = tptr(src, s0, s1, s2, s3);
        char * d = tptr(dst, d0, d1, d2, d3);
        if (ts == td) std::memcpy(d, s, tsr_type_size(ts));
        else st(td, d, ld(ts, s));
    }
}

/* ---- binary elementwise with broadcasting ----------------------------------------------- */

template <int OP> static inline float bin_f(float a, float b) {
    return OP == TSR_OP_ADD ? a + b : OP == TSR_OP_SUB ? a - b : OP == TSR_OP_MUL ? a * b : a / b;
}

template <int OP>
static void op_binary_t(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    const int64_t ne0 = dst->ne[0], ne10 = b->ne[0];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    const bool fast = a->type == TSR_TYPE_F32 && b->type == TSR_TYPE_F32 && dst->type == TSR_TYPE_F32 &&
                      a->nb[0] == 4 && b->nb[0] == 4 && dst->nb[0] == 4;
    const bool qa = tsr_is_quantized(a->type);
    float * tmp = qa ? thread_floats(p, (size_t)ne0) : nullptr;
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * pa = tptr(a, 0, i1, i2, i3);
        const char * pb = tptr(b, 0, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
        char * pd = tptr(dst, 0, i1, i2, i3);
        if (qa) {  /* quantized a (ADD): dequantize, add, requantize the row */
            row_to_f32(a->type, pa, tmp, ne0);
            for (int64_t i = 0; i < ne0; ++i) tmp[i] = bin_f<OP>(tmp[i], ld(b->type, pb + (i % ne10) * b->nb[0]));
            row_from_f32(dst->type, tmp, pd, ne0);
        } else if (fast) {
            const float * fa = (const float *)pa;
            const float * fb = (const float *)pb;
            float * fd = (float *)pd;
            if (ne10 == ne0) {
                for (int64_t i = 0; i < ne0; ++i) fd[i] = bin_f<OP>(fa[i], fb[i]);
            } else {
                for (int64_t j = 0; j < ne0; j += ne10)
                    for (int64_t i = 0; i < ne10; ++i) fd[j + i] = bin_f<OP>(fa[j + i], fb[i]);
            }
        } else {
            for (int64_t i = 0; i < ne0; ++i)
                st(dst->type, pd + i * dst->nb[0],
                   bin_f<OP>(ld(a->type, pa + i * a->nb[0]), ld(b->type, pb + (i % ne10) * b->nb[0])));
        }
    }
}

/* ---- unary elementwise ---------------------------------------------------------------- */

static inline float gelu_f(float x) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + std::tanh(c * x * (1.0f + 0.044715f * x * x)));
}
static inline float silu_f(float x) { return x / (1.0f + std::exp(-x)); }
/* NaN stays NaN (as in PyTorch), where std::min/std::max would pick a bound */
static inline float clamp_f(float x, float lo, float hi) { return x != x ? x : std::max(lo, std::min(hi, x)); }
static inline float relu_f(float x) { return x <= 0.0f ? 0.0f : x; }   /* NaN stays NaN */
static inline float gelu_quick_f(float x) { return x / (1.0f + std::exp(-1.702f * x)); }
static inline float gelu_erf_f(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
/* sgn and step keep a NaN (PyTorch's sign and heaviside do); ggml gives 0 */
static inline float sgn_f(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == 0.0f ? 0.0f : x; }
static inline float step_f(float x) { return x > 0.0f ? 1.0f : x <= 0.0f ? 0.0f : x; }
/* relu6(x + 3) / 6 with the NaN kept */
static inline float hardsigmoid_f(float x) { return clamp_f((x + 3.0f) / 6.0f, 0.0f, 1.0f); }
/* ggml's (and PyTorch's) threshold: past 20, log1p(e^x) rounds to x */
static inline float softplus_f(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

struct unary_fn {
    int kind;  /* TSR_OP_* (SQR, SQRT, LOG, SCALE, CLAMP, SIN, COS, LEAKY_RELU) or 1000 + tsr_unary_op */
    float a, b;
    inline float operator()(float x) const {
        switch (kind) {
            case TSR_OP_SQR: return x * x;
            case TSR_OP_SQRT: return std::sqrt(x);
            case TSR_OP_LOG: return std::log(x);
            case TSR_OP_SCALE: return x * a + b;
            case TSR_OP_CLAMP: return clamp_f(x, a, b);
            case TSR_OP_SIN: return std::sin(x);
            case TSR_OP_COS: return std::cos(x);
            case TSR_OP_LEAKY_RELU: return x > 0.0f ? x : a * x;
            case 1000 + TSR_UNARY_OP_ABS: return std::fabs(x);
            case 1000 + TSR_UNARY_OP_NEG: return -x;
            case 1000 + TSR_UNARY_OP_TANH: return std::tanh(x);
            case 1000 + TSR_UNARY_OP_RELU: return relu_f(x);
            case 1000 + TSR_UNARY_OP_SIGMOID: return 1.0f / (1.0f + std::exp(-x));
            case 1000 + TSR_UNARY_OP_GELU: return gelu_f(x);
            case 1000 + TSR_UNARY_OP_GELU_QUICK: return gelu_quick_f(x);
            case 1000 + TSR_UNARY_OP_SILU: return silu_f(x);
            case 1000 + TSR_UNARY_OP_EXP: return std::exp(x);
            case 1000 + TSR_UNARY_OP_SGN: return sgn_f(x);
            case 1000 + TSR_UNARY_OP_STEP: return step_f(x);
            case 1000 + TSR_UNARY_OP_ELU: return x > 0.0f ? x : std::expm1(x);
            case 1000 + TSR_UNARY_OP_HARDSWISH: return x * hardsigmoid_f(x);
            case 1000 + TSR_UNARY_OP_HARDSIGMOID: return hardsigmoid_f(x);
            case 1000 + TSR_UNARY_OP_EXPM1: return std::expm1(x);
            case 1000 + TSR_UNARY_OP_SOFTPLUS: return softplus_f(x);
            case 1000 + TSR_UNARY_OP_GELU_ERF: return gelu_erf_f(x);
            case 1000 + TSR_UNARY_OP_FLOOR: return std::floor(x);
            case 1000 + TSR_UNARY_OP_CEIL: return std::ceil(x);
            case 1000 + TSR_UNARY_OP_ROUND: return std::round(x);
            case 1000 + TSR_UNARY_OP_TRUNC: return std::trunc(x);
            default: return x;
        }
    }
};

template <int KIND>
static inline void unary_row_f32(float * d, const float * s, int64_t n, float a, float b) {
    const unary_fn f{KIND, a, b};
    for (int64_t i = 0; i < n; ++i) d[i] = f(s[i]);
}

static void unary_row_dispatch(int kind, float * d, const float * s, int64_t n, float a, float b) {
    switch (kind) {
#define TSR_UCASE(k) case k: unary_row_f32<k>(d, s, n, a, b); break;
        TSR_UCASE(TSR_OP_SQR) TSR_UCASE(TSR_OP_SQRT) TSR_UCASE(TSR_OP_LOG) TSR_UCASE(TSR_OP_SCALE) TSR_UCASE(TSR_OP_CLAMP)
        TSR_UCASE(1000 + TSR_UNARY_OP_ABS) TSR_UCASE(1000 + TSR_UNARY_OP_NEG) TSR_UCASE(1000 + TSR_UNARY_OP_TANH)
        TSR_UCASE(1000 + TSR_UNARY_OP_RELU) TSR_UCASE(1000 + TSR_UNARY_OP_SIGMOID) TSR_UCASE(1000 + TSR_UNARY_OP_GELU)
        TSR_UCASE(1000 + TSR_UNARY_OP_GELU_QUICK) TSR_UCASE(1000 + TSR_UNARY_OP_SILU) TSR_UCASE(1000 + TSR_UNARY_OP_EXP)
        /* issue 17 part A */
        TSR_UCASE(TSR_OP_SIN) TSR_UCASE(TSR_OP_COS) TSR_UCASE(TSR_OP_LEAKY_RELU)
        TSR_UCASE(1000 + TSR_UNARY_OP_SGN) TSR_UCASE(1000 + TSR_UNARY_OP_STEP) TSR_UCASE(1000 + TSR_UNARY_OP_ELU)
        TSR_UCASE(1000 + TSR_UNARY_OP_HARDSWISH) TSR_UCASE(1000 + TSR_UNARY_OP_HARDSIGMOID)
        TSR_UCASE(1000 + TSR_UNARY_OP_EXPM1) TSR_UCASE(1000 + TSR_UNARY_OP_SOFTPLUS) TSR_UCASE(1000 + TSR_UNARY_OP_GELU_ERF)
        TSR_UCASE(1000 + TSR_UNARY_OP_FLOOR) TSR_UCASE(1000 + TSR_UNARY_OP_CEIL) TSR_UCASE(1000 + TSR_UNARY_OP_ROUND)
        TSR_UCASE(1000 + TSR_UNARY_OP_TRUNC)
#undef TSR_UCASE
        default: for (int64_t i = 0; i < n; ++i) d[i] = s[i];
    }
}

/* The ISA's vector row kernel for a transcendental unary op; NULL: the libm loop. */
typedef void (*act_row_fn)(int64_t n, const float * x, float * y);
static act_row_fn act_row(const act_kernels * A, int kind) {
    if (!A) return nullptr;
    switch (kind) {
        case 1000 + TSR_UNARY_OP_EXP: return A->exp;
        case 1000 + TSR_UNARY_OP_SILU: return A->silu;
        case 1000 + TSR_UNARY_OP_SIGMOID: return A->sigmoid;
        case 1000 + TSR_UNARY_OP_GELU: return A->gelu;
        case 1000 + TSR_UNARY_OP_GELU_QUICK: return A->gelu_quick;
        case 1000 + TSR_UNARY_OP_TANH: return A->tanh;
        default: return nullptr;
    }
}

static void op_unary(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    int kind = dst->op;
    float a = 0.0f, b = 0.0f;
    if (dst->op == TSR_OP_UNARY) kind = 1000 + tsr_get_op_params_i32(dst, 0);
    if (dst->op == TSR_OP_SCALE || dst->op == TSR_OP_CLAMP || dst->op == TSR_OP_LEAKY_RELU) {
        a = tsr_get_op_params_f32(dst, 0);
        b = tsr_get_op_params_f32(dst, 1);
    }
    const unary_fn f{kind, a, b};
    const int64_t nr = tsr_nrows(dst), ne0 = dst->ne[0];
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    const bool fast = src->type == TSR_TYPE_F32 && dst->type == TSR_TYPE_F32 && src->nb[0] == 4 && dst->nb[0] == 4;
    const act_row_fn vf = fast ? act_row(p.K->act, kind) : nullptr;
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * s = tptr(src, 0, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        if (vf) vf(ne0, (const float *)s, (float *)d);
        else if (fast) unary_row_dispatch(kind, (float *)d, (const float *)s, ne0, a, b);
        else for (int64_t i = 0; i < ne0; ++i) st(dst->type, d + i * dst->nb[0], f(ld(src->type, s + i * src->nb[0])));
    }
}

/* One GLU: act(x) * g, or swiglu_oai's clamped form. */
struct glu_fn {
    int op;   /* enum tsr_glu_op */
    float alpha, limit;
    inline float operator()(float x, float g) const {
        switch (op) {
            case TSR_GLU_OP_REGLU: return relu_f(x) * g;
            case TSR_GLU_OP_GEGLU: return gelu_f(x) * g;
            case TSR_GLU_OP_GEGLU_ERF: return gelu_erf_f(x) * g;
            case TSR_GLU_OP_GEGLU_QUICK: return gelu_quick_f(x) * g;
            case TSR_GLU_OP_SWIGLU_OAI: {
                /* NaN kept, as clamp_f does */
                const float xc = x > limit ? limit : x;
                const float gc = clamp_f(g, -limit, limit);
                return xc / (1.0f + std::exp(-alpha * xc)) * (gc + 1.0f);
            }
            default: return silu_f(x) * g;
        }
    }
};

/* act(x) -> d with the ISA's vector kernel, then d *= g (d may alias x, never g); false:
 * no vector kernel for this GLU. */
static bool glu_row_vector(const act_kernels * A, int op, int64_t n, const float * x, const float * g, float * d) {
    if (!A) return false;
    if (op == TSR_GLU_OP_SWIGLU) {
        A->swiglu(n, x, g, d);
        return true;
    }
    act_row_fn act = op == TSR_GLU_OP_GEGLU ? A->gelu : op == TSR_GLU_OP_GEGLU_QUICK ? A->gelu_quick : nullptr;
    if (!act || d == g) return false;
    act(n, x, d);
    for (int64_t i = 0; i < n; ++i) d[i] *= g[i];
    return true;
}

static void op_glu(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * g = dst->src[1];
    const bool swapped = tsr_get_op_params_i32(dst, 1) != 0;
    const glu_fn f{tsr_get_op_params_i32(dst, 0), tsr_get_op_params_f32(dst, 2), tsr_get_op_params_f32(dst, 3)};
    const int64_t nc = dst->ne[0];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * px;
        const char * pg;
        size_t sx, sg;
        enum tsr_type tx, tg;
        if (g) {
            px = tptr(a, 0, i1, i2, i3); sx = a->nb[0]; tx = a->type;
            pg = tptr(g, 0, i1, i2, i3); sg = g->nb[0]; tg = g->type;
            if (swapped) { std::swap(px, pg); std::swap(sx, sg); std::swap(tx, tg); }
        } else {
            const char * row = tptr(a, 0, i1, i2, i3);
            px = row + (swapped ? nc : 0) * a->nb[0];
            pg = row + (swapped ? 0 : nc) * a->nb[0];
            sx = sg = a->nb[0];
            tx = tg = a->type;
        }
        char * d = tptr(dst, 0, i1, i2, i3);
        if (tx == TSR_TYPE_F32 && tg == TSR_TYPE_F32 && dst->type == TSR_TYPE_F32 && sx == 4 && sg == 4 && dst->nb[0] == 4) {
            const float * fx = (const float *)px;
            const float * fg = (const float *)pg;
            float * fd = (float *)d;
            if (!glu_row_vector(p.K->act, f.op, nc, fx, fg, fd))
                for (int64_t i = 0; i < nc; ++i) fd[i] = f(fx[i], fg[i]);
        } else {
            for (int64_t i = 0; i < nc; ++i) st(dst->type, d + i * dst->nb[0], f(ld(tx, px + i * sx), ld(tg, pg + i * sg)));
        }
    }
}

/* ---- reductions --------------------------------------------------------------------------- */

static void op_sum(const cparams & p, tsr_tensor * dst) {
    if (p.ith != 0) return;  /* one thread: deterministic order */
    const tsr_tensor * src = dst->src[0];
    double s = 0.0;
    /* an empty source may still have 2^50 (empty) rows: do not walk them */
    const int64_t nr = tsr_nelements(src) > 0 ? tsr_nrows(src) : 0;
    for (int64_t ir = 0; ir < nr; ++ir) {
        int64_t i1, i2, i3;
        row_index(src, ir, i1, i2, i3);
        const char * r = tptr(src, 0, i1, i2, i3);
        for (int64_t i = 0; i < src->ne[0]; ++i) s += ld(src->type, r + i * src->nb[0]);
    }
    st(dst->type, dst->data, (float)s);
}

static void op_sum_rows(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const bool mean = dst->op == TSR_OP_MEAN;
    const int64_t nr = tsr_nrows(src);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(src, ir, i1, i2, i3);
        const char * r = tptr(src, 0, i1, i2, i3);
        double s = 0.0;
        for (int64_t i = 0; i < src->ne[0]; ++i) s += ld(src->type, r + i * src->nb[0]);
        if (mean) s /= (double)src->ne[0];
        st(dst->type, tptr(dst, 0, i1, i2, i3), (float)s);
    }
}

static void op_argmax(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    int64_t r0, r1;
    split_rows(src->ne[1], p.ith, p.nth, r0, r1);
    for (int64_t i1 = r0; i1 < r1; ++i1) {
        const char * r = tptr(src, 0, i1, 0, 0);
        float best = -INFINITY;
        int32_t idx = 0;
        for (int64_t i = 0; i < src->ne[0]; ++i) {
            const float v = *(const float *)(r + i * src->nb[0]);
            if (v != v) { idx = (int32_t)i; break; }   /* the first NaN is the max, as in PyTorch */
            if (v > best) { best = v; idx = (int32_t)i; }
        }
        *(int32_t *)tptr(dst, i1, 0, 0, 0) = idx;
    }
}

/* ---- shape ops ---------------------------------------------------------------------------- */

static void op_repeat(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const size_t es = tsr_type_size(dst->type);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * s = tptr(src, 0, i1 % src->ne[1], i2 % src->ne[2], i3 % src->ne[3]);
        char * d = tptr(dst, 0, i1, i2, i3);
        for (int64_t i = 0; i < dst->ne[0]; ++i) std::memcpy(d + i * dst->nb[0], s + (i % src->ne[0]) * src->nb[0], es);
    }
}

static void op_concat(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    const int dim = tsr_get_op_params_i32(dst, 0);
    const size_t es = tsr_type_size(dst->type);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            int64_t idx[4] = {i0, i1, i2, i3};
            const tsr_tensor * s = a;
            if (idx[dim] >= a->ne[dim]) { idx[dim] -= a->ne[dim]; s = b; }
            std::memcpy(d + i0 * dst->nb[0], tptr(s, idx[0], idx[1], idx[2], idx[3]), es);
        }
    }
}

/* PAD: zeros before (slots 4..7) and after (slots 0..3, the total minus those) each dim. */
static void op_pad(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const size_t es = tsr_type_size(dst->type);
    int64_t lp[4];
    for (int i = 0; i < 4; ++i) lp[i] = tsr_get_op_params_i32(dst, 4 + (uint32_t)i);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        const int64_t j1 = i1 - lp[1], j2 = i2 - lp[2], j3 = i3 - lp[3];
        const bool row_in = j1 >= 0 && j1 < src->ne[1] && j2 >= 0 && j2 < src->ne[2] && j3 >= 0 && j3 < src->ne[3];
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            const int64_t j0 = i0 - lp[0];
            if (row_in && j0 >= 0 && j0 < src->ne[0]) std::memcpy(d + i0 * dst->nb[0], tptr(src, j0, j1, j2, j3), es);
            else std::memset(d + i0 * dst->nb[0], 0, es);
        }
    }
}

} // namespace tcpu
} // namespace
