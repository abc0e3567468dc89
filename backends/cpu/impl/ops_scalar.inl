/*
 * ops_scalar.inl - every op of tessera.h with ggml's semantics: the reference result.
 * Inputs may be non-contiguous (views, permutes); b is broadcast over a where the op
 * allows it. Each op splits its rows across threads (ith of nth). Ops that the in-place
 * contract allows read each element before writing it, so dst may alias the operand.
 * The hot inner loops call the ISA kernel table (dot products, GEMM, axpy).
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

struct unary_fn {
    int kind;  /* TSR_OP_* (SQR, SQRT, LOG, SCALE, CLAMP) or 1000 + tsr_unary_op */
    float a, b;
    inline float operator()(float x) const {
        switch (kind) {
            case TSR_OP_SQR: return x * x;
            case TSR_OP_SQRT: return std::sqrt(x);
            case TSR_OP_LOG: return std::log(x);
            case TSR_OP_SCALE: return x * a + b;
            case TSR_OP_CLAMP: return std::max(a, std::min(b, x));
            case 1000 + TSR_UNARY_OP_ABS: return std::fabs(x);
            case 1000 + TSR_UNARY_OP_NEG: return -x;
            case 1000 + TSR_UNARY_OP_TANH: return std::tanh(x);
            case 1000 + TSR_UNARY_OP_RELU: return x > 0.0f ? x : 0.0f;
            case 1000 + TSR_UNARY_OP_SIGMOID: return 1.0f / (1.0f + std::exp(-x));
            case 1000 + TSR_UNARY_OP_GELU: return gelu_f(x);
            case 1000 + TSR_UNARY_OP_GELU_QUICK: return x / (1.0f + std::exp(-1.702f * x));
            case 1000 + TSR_UNARY_OP_SILU: return silu_f(x);
            case 1000 + TSR_UNARY_OP_EXP: return std::exp(x);
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
    if (dst->op == TSR_OP_SCALE || dst->op == TSR_OP_CLAMP) {
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

static void op_glu(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * g = dst->src[1];
    const bool swapped = tsr_get_op_params_i32(dst, 1) != 0;
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
            if (p.K->act) p.K->act->swiglu(nc, fx, fg, fd);
            else for (int64_t i = 0; i < nc; ++i) fd[i] = silu_f(fx[i]) * fg[i];
        } else {
            for (int64_t i = 0; i < nc; ++i)
                st(dst->type, d + i * dst->nb[0], silu_f(ld(tx, px + i * sx)) * ld(tg, pg + i * sg));
        }
    }
}

/* ---- reductions --------------------------------------------------------------------------- */

static void op_sum(const cparams & p, tsr_tensor * dst) {
    if (p.ith != 0) return;  /* one thread: deterministic order */
    const tsr_tensor * src = dst->src[0];
    double s = 0.0;
    for (int64_t ir = 0; ir < tsr_nrows(src); ++ir) {
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

static void op_pad(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const size_t es = tsr_type_size(dst->type);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        const bool row_in = i1 < src->ne[1] && i2 < src->ne[2] && i3 < src->ne[3];
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            if (row_in && i0 < src->ne[0]) std::memcpy(d + i0 * dst->nb[0], tptr(src, i0, i1, i2, i3), es);
            else std::memset(d + i0 * dst->nb[0], 0, es);
        }
    }
}

/* ---- normalization ------------------------------------------------------------------------- */

static void op_norm(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const float eps = tsr_get_op_params_f32(dst, 0);
    const bool rms = dst->op == TSR_OP_RMS_NORM;
    const int64_t ne0 = src->ne[0];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * s = tptr(src, 0, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        const size_t ss = src->nb[0], ds = dst->nb[0];
        double mean = 0.0;
        if (!rms) {
            for (int64_t i = 0; i < ne0; ++i) mean += *(const float *)(s + i * ss);
            mean /= (double)ne0;
        }
        double var = 0.0;
        for (int64_t i = 0; i < ne0; ++i) {
            const double v = *(const float *)(s + i * ss) - mean;
            var += v * v;
        }
        var /= (double)ne0;
        const float scale = (float)(1.0 / std::sqrt(var + (double)eps));
        const float fmean = (float)mean;
        for (int64_t i = 0; i < ne0; ++i) *(float *)(d + i * ds) = (*(const float *)(s + i * ss) - fmean) * scale;
    }
}

static void op_group_norm(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int n_groups = tsr_get_op_params_i32(dst, 0);
    const float eps = tsr_get_op_params_f32(dst, 1);
    const int64_t C = src->ne[2];
    const int64_t cpg = (C + n_groups - 1) / n_groups;
    const int64_t nitems = (int64_t)n_groups * src->ne[3];
    int64_t r0, r1;
    split_rows(nitems, p.ith, p.nth, r0, r1);
    for (int64_t it = r0; it < r1; ++it) {
        const int64_t g = it % n_groups, i3 = it / n_groups;
        const int64_t c0 = g * cpg, c1 = std::min(C, c0 + cpg);
        if (c0 >= c1) continue;
        double sum = 0.0;
        int64_t cnt = 0;
        for (int64_t i2 = c0; i2 < c1; ++i2)
            for (int64_t i1 = 0; i1 < src->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < src->ne[0]; ++i0) { sum += *(const float *)tptr(src, i0, i1, i2, i3); ++cnt; }
        const double mean = sum / (double)cnt;
        double var = 0.0;
        for (int64_t i2 = c0; i2 < c1; ++i2)
            for (int64_t i1 = 0; i1 < src->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < src->ne[0]; ++i0) {
                    const double v = *(const float *)tptr(src, i0, i1, i2, i3) - mean;
                    var += v * v;
                }
        const float scale = (float)(1.0 / std::sqrt(var / (double)cnt + (double)eps));
        for (int64_t i2 = c0; i2 < c1; ++i2)
            for (int64_t i1 = 0; i1 < src->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < src->ne[0]; ++i0)
                    *(float *)tptr(dst, i0, i1, i2, i3) = (float)(*(const float *)tptr(src, i0, i1, i2, i3) - mean) * scale;
    }
}

/* ---- products ------------------------------------------------------------------------------ */

static void op_out_prod(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];  /* [M, K, A2, A3] */
    const tsr_tensor * b = dst->src[1];  /* [N, K, B2, B3] f32 */
    const int64_t M = a->ne[0], Kd = a->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    float * tmp = thread_floats(p, (size_t)M);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t n, i2, i3;
        row_index(dst, ir, n, i2, i3);
        float * d = (float *)tptr(dst, 0, n, i2, i3);
        for (int64_t m = 0; m < M; ++m) d[m] = 0.0f;
        for (int64_t k = 0; k < Kd; ++k) {
            const float bv = *(const float *)tptr(b, n, k, i2, i3);
            const char * arow = tptr(a, 0, k, i2 / r2, i3 / r3);
            if (row_contig(a)) row_to_f32(a->type, arow, tmp, M);
            else for (int64_t m = 0; m < M; ++m) tmp[m] = ld(a->type, arow + m * a->nb[0]);
            p.K->axpy_f32(M, bv, tmp, d);
        }
    }
}

/* ---- rows ---------------------------------------------------------------------------------- */

static void op_get_rows(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    const int64_t nr = tsr_nrows(dst), ne0 = dst->ne[0];
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i10, i11, i12;
        row_index(dst, ir, i10, i11, i12);
        const int64_t row = *(const int32_t *)tptr(b, i10, i11, i12, 0);
        char * d = tptr(dst, 0, i10, i11, i12);
        if (row < 0 || row >= a->ne[1]) {  /* out of range: zeros (validated by no one at run time) */
            for (int64_t i = 0; i < ne0; ++i) std::memset(d + i * dst->nb[0], 0, dst->nb[0]);
            continue;
        }
        const char * s = tptr(a, 0, row, i11, i12);
        if (a->type == TSR_TYPE_I32) {
            for (int64_t i = 0; i < ne0; ++i) *(int32_t *)(d + i * dst->nb[0]) = *(const int32_t *)(s + i * a->nb[0]);
        } else if (row_contig(a) && dst->nb[0] == 4) {
            row_to_f32(a->type, s, (float *)d, ne0);
        } else {
            for (int64_t i = 0; i < ne0; ++i) *(float *)(d + i * dst->nb[0]) = ld(a->type, s + i * a->nb[0]);
        }
    }
}

static void op_set_rows(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * b = dst->src[0];  /* values f32 [n, k, A2, A3] */
    const tsr_tensor * c = dst->src[1];  /* indices I32 [k, C1, C2] */
    const int64_t ne0 = b->ne[0];
    float * tmp = thread_floats(p, (size_t)ne0);
    const int64_t nr = tsr_nrows(b);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i01, i02, i03;
        row_index(b, ir, i01, i02, i03);
        const int64_t row = *(const int32_t *)tptr(c, i01, i02 % c->ne[1], i03 % c->ne[2], 0);
        if (row < 0 || row >= dst->ne[1]) continue;
        const char * s = tptr(b, 0, i01, i02, i03);
        char * d = tptr(dst, 0, row, i02, i03);
        for (int64_t i = 0; i < ne0; ++i) tmp[i] = *(const float *)(s + i * b->nb[0]);
        if (tsr_is_quantized(dst->type) || row_contig(dst)) row_from_f32(dst->type, tmp, d, ne0);
        else for (int64_t i = 0; i < ne0; ++i) st(dst->type, d + i * dst->nb[0], tmp[i]);
    }
}

static void op_diag_mask_inf(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int n_past = tsr_get_op_params_i32(dst, 0);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * s = tptr(src, 0, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            const float v = *(const float *)(s + i0 * src->nb[0]);
            *(float *)(d + i0 * dst->nb[0]) = i0 > n_past + i1 ? -INFINITY : v;
        }
    }
}

/* ALiBi slope of head h (ggml). */
static inline float alibi_slope(float max_bias, int64_t h, int64_t n_head) {
    if (!(max_bias > 0.0f)) return 1.0f;
    const uint32_t n_head_log2 = 1u << (uint32_t)std::floor(std::log2((double)n_head));
    const float m0 = std::pow(2.0f, -(max_bias) / (float)n_head_log2);
    const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / (float)n_head_log2);
    return (uint32_t)h < n_head_log2 ? std::pow(m0, (float)(h + 1)) : std::pow(m1, (float)(2 * (h - n_head_log2) + 1));
}

static void op_soft_max(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const tsr_tensor * mask = dst->src[1];
    const float scale = tsr_get_op_params_f32(dst, 0);
    const float max_bias = tsr_get_op_params_f32(dst, 1);
    const int64_t ne0 = src->ne[0];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const float slope = alibi_slope(max_bias, i2, src->ne[2]);
        const char * s = tptr(src, 0, i1, i2, i3);
        float * d = (float *)tptr(dst, 0, i1, i2, i3);
        const char * mrow = mask ? tptr(mask, 0, i1, i2 % mask->ne[2], i3 % mask->ne[3]) : nullptr;
        float mx = -INFINITY;
        for (int64_t i = 0; i < ne0; ++i) {
            float v = *(const float *)(s + i * src->nb[0]) * scale;
            if (mrow) v += slope * ld(mask->type, mrow + i * mask->nb[0]);
            d[i] = v;
            mx = std::max(mx, v);
        }
        if (p.K->act) {
            p.K->act->soft_max(ne0, d);
            continue;
        }
        if (mx == -INFINITY) {  /* every entry masked: zeros (exp(-inf - -inf) would be NaN) */
            for (int64_t i = 0; i < ne0; ++i) d[i] = 0.0f;
            continue;
        }
        double sum = 0.0;
        for (int64_t i = 0; i < ne0; ++i) {
            const float e = std::exp(d[i] - mx);
            d[i] = e;
            sum += e;
        }
        const float inv = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
        for (int64_t i = 0; i < ne0; ++i) d[i] *= inv;
    }
}

/* ---- RoPE (ggml's rope with YaRN) --------------------------------------------------------- */

static inline float rope_yarn_ramp(float low, float high, int64_t i0) {
    const float y = ((float)(i0 / 2) - low) / std::max(0.001f, high - low);
    return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

static void rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]) {
    auto corr_dim = [&](float n_rot) {
        return (float)n_dims * std::log((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * std::log(freq_base));
    };
    const float start = std::floor(corr_dim(beta_fast));
    const float end = std::ceil(corr_dim(beta_slow));
    dims[0] = std::max(0.0f, start);
    dims[1] = std::min((float)(n_dims - 1), end);
}

static void op_rope(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const tsr_tensor * pos = dst->src[1];
    const tsr_tensor * ff = dst->src[2];
    const int n_dims = tsr_get_op_params_i32(dst, 1);
    const int mode = tsr_get_op_params_i32(dst, 2);
    const int n_ctx_orig = tsr_get_op_params_i32(dst, 4);
    const float freq_base = tsr_get_op_params_f32(dst, 5);
    const float freq_scale = tsr_get_op_params_f32(dst, 6);
    const float ext_factor = tsr_get_op_params_f32(dst, 7);
    const float attn_factor = tsr_get_op_params_f32(dst, 8);
    const float beta_fast = tsr_get_op_params_f32(dst, 9);
    const float beta_slow = tsr_get_op_params_f32(dst, 10);
    float corr[2];
    rope_yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow, corr);
    const float theta_scale = std::pow(freq_base, -2.0f / (float)n_dims);
    const bool neox = (mode & TSR_ROPE_TYPE_NEOX) != 0;
    float * cache = thread_floats(p, (size_t)n_dims);
    const int64_t ne0 = dst->ne[0];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    int64_t cached = -1;
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        if (cached != i2) {
            const float ppos = (float)*(const int32_t *)tptr(pos, i2, 0, 0, 0);
            float theta = ppos;
            for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
                const float f = ff ? *(const float *)tptr(ff, i0 / 2, 0, 0, 0) : 1.0f;
                const float theta_extrap = theta / f;
                const float theta_interp = freq_scale * theta_extrap;
                float th = theta_interp, mscale = attn_factor;
                if (ext_factor != 0.0f) {
                    const float ramp_mix = rope_yarn_ramp(corr[0], corr[1], i0) * ext_factor;
                    th = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
                    mscale *= 1.0f + 0.1f * std::log(1.0f / freq_scale);
                }
                cache[i0] = std::cos(th) * mscale;
                cache[i0 + 1] = std::sin(th) * mscale;
                theta *= theta_scale;
            }
            cached = i2;
        }
        const char * s = tptr(src, 0, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        const size_t ss = src->nb[0], ds = dst->nb[0];
        const enum tsr_type ts = src->type, td = dst->type;
        for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
            const int64_t ia = neox ? i0 / 2 : i0;
            const int64_t ib = neox ? i0 / 2 + n_dims / 2 : i0 + 1;
            const float c = cache[i0], sn = cache[i0 + 1];
            const float x0 = ld(ts, s + ia * ss), x1 = ld(ts, s + ib * ss);
            st(td, d + ia * ds, x0 * c - x1 * sn);
            st(td, d + ib * ds, x0 * sn + x1 * c);
        }
        for (int64_t i0 = n_dims; i0 < ne0; ++i0) st(td, d + i0 * ds, ld(ts, s + i0 * ss));
    }
}

/* ---- convolution and friends ---------------------------------------------------------------- */

struct conv_geom {
    int s0, s1, p0, p1, d0, d1;
    int64_t KW, KH, IC, IW, IH, OW, OH, N;
    bool is2d;
};

/* One im2col row (output pixel ow, oh of image n): IC*KH*KW values as F32. */
static inline void im2col_row(const tsr_tensor * in, const conv_geom & g, int64_t ow, int64_t oh, int64_t n, float * out) {
    for (int64_t ic = 0; ic < g.IC; ++ic)
        for (int64_t kh = 0; kh < g.KH; ++kh) {
            const int64_t ih = oh * g.s1 + kh * g.d1 - g.p1;
            for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t iw = ow * g.s0 + kw * g.d0 - g.p0;
                float v = 0.0f;
                if (ih >= 0 && ih < g.IH && iw >= 0 && iw < g.IW) {
                    const char * ptr = g.is2d ? tptr(in, iw, ih, ic, n) : tptr(in, iw, ic, n, 0);
                    v = ld(in->type, ptr);
                }
                out[(ic * g.KH + kh) * g.KW + kw] = v;
            }
        }
}

static conv_geom conv_geometry(const tsr_tensor * dst, bool is_2d) {
    const tsr_tensor * k = dst->src[0];
    const tsr_tensor * in = dst->src[1];
    conv_geom g;
    g.is2d = is_2d;
    g.s0 = tsr_get_op_params_i32(dst, 0); g.s1 = tsr_get_op_params_i32(dst, 1);
    g.p0 = tsr_get_op_params_i32(dst, 2); g.p1 = tsr_get_op_params_i32(dst, 3);
    g.d0 = tsr_get_op_params_i32(dst, 4); g.d1 = tsr_get_op_params_i32(dst, 5);
    if (is_2d) {
        g.KW = k->ne[0]; g.KH = k->ne[1]; g.IC = in->ne[2]; g.IW = in->ne[0]; g.IH = in->ne[1]; g.N = in->ne[3];
        g.OW = (g.IW + 2 * g.p0 - (int64_t)g.d0 * (g.KW - 1) - 1) / g.s0 + 1;
        g.OH = (g.IH + 2 * g.p1 - (int64_t)g.d1 * (g.KH - 1) - 1) / g.s1 + 1;
    } else {
        g.KW = k->ne[0]; g.KH = 1; g.IC = in->ne[1]; g.IW = in->ne[0]; g.IH = 1; g.N = in->ne[2];
        g.OW = (g.IW + 2 * g.p0 - (int64_t)g.d0 * (g.KW - 1) - 1) / g.s0 + 1;
        g.OH = 1;
        g.p1 = 0;
    }
    return g;
}

static void op_im2col(const cparams & p, tsr_tensor * dst) {
    const bool is_2d = tsr_get_op_params_i32(dst, 6) != 0;
    const conv_geom g = conv_geometry(dst, is_2d);
    const tsr_tensor * in = dst->src[1];
    const int64_t Kd = g.IC * g.KH * g.KW;
    float * tmp = thread_floats(p, (size_t)Kd);
    const int64_t nr = g.OW * g.OH * g.N;
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        const int64_t ow = ir % g.OW, oh = (ir / g.OW) % g.OH, n = ir / (g.OW * g.OH);
        im2col_row(in, g, ow, oh, n, tmp);
        char * d = is_2d ? tptr(dst, 0, ow, oh, n) : tptr(dst, 0, ow, n, 0);
        for (int64_t i = 0; i < Kd; ++i) st(dst->type, d + i * dst->nb[0], tmp[i]);
    }
}

struct conv_plan {
    conv_geom g;
    int64_t Kd, P;
    bool kconv;
    const gemm_impl * gi;
    size_t cols_bytes, kern_bytes, thread_bytes;
};

static conv_plan conv_make_plan(const tsr_tensor * dst, const kernels * K) {
    conv_plan c;
    c.g = conv_geometry(dst, true);
    c.Kd = c.g.IC * c.g.KH * c.g.KW;
    c.P = c.g.OW * c.g.OH;
    const tsr_tensor * k = dst->src[0];
    c.kconv = !(k->type == TSR_TYPE_F32 && tsr_is_contiguous(k));
    const int64_t OC = k->ne[3];
    c.gi = OC >= GEMM_MIN_N ? K->gemm[SLOT_F32] : nullptr;
    c.cols_bytes = align_up((size_t)(c.P * c.Kd) * 4, 64);
    c.kern_bytes = c.kconv ? align_up((size_t)(OC * c.Kd) * 4, 64) : 0;
    c.thread_bytes = gemm_thread_bytes(c.gi, OC);
    return c;
}

static void op_conv_2d(const cparams & p, tsr_tensor * dst) {
    const conv_plan c = conv_make_plan(dst, p.K);
    const tsr_tensor * k = dst->src[0];
    const tsr_tensor * in = dst->src[1];
    const int64_t OC = k->ne[3];
    float * cols = (float *)p.wdata;
    float * kern = (float *)(p.wdata + c.cols_bytes);
    uint8_t * tw = p.wdata + c.cols_bytes + c.kern_bytes + c.thread_bytes * (size_t)p.ith;
    if (c.kconv) {
        int64_t r0, r1;
        split_rows(OC, p.ith, p.nth, r0, r1);
        for (int64_t oc = r0; oc < r1; ++oc)
            for (int64_t ic = 0; ic < c.g.IC; ++ic)
                for (int64_t kh = 0; kh < c.g.KH; ++kh)
                    for (int64_t kw = 0; kw < c.g.KW; ++kw)
                        kern[oc * c.Kd + (ic * c.g.KH + kh) * c.g.KW + kw] = ld(k->type, tptr(k, kw, kh, ic, oc));
    }
    for (int64_t n = 0; n < c.g.N; ++n) {
        int64_t r0, r1;
        split_rows(c.P, p.ith, p.nth, r0, r1);
        for (int64_t pi = r0; pi < r1; ++pi) im2col_row(in, c.g, pi % c.g.OW, pi / c.g.OW, n, cols + pi * c.Kd);
        barrier(p);
        mm_args a;
        a.ta = TSR_TYPE_F32;
        a.A = (const char *)cols; a.lda = (size_t)c.Kd * 4;
        a.B = c.kconv ? (const char *)kern : (const char *)k->data; a.ldb = (size_t)c.Kd * 4;
        a.M = c.P; a.N = OC; a.K = c.Kd;
        a.C = (float *)tptr(dst, 0, 0, 0, n);
        a.ldc = dst->nb[2] / 4;
        a.g = c.gi;
        const int64_t mr = c.gi ? c.gi->mr : 1;
        int64_t csz = (c.P + p.nth - 1) / p.nth;
        csz = (csz + mr - 1) / mr * mr;
        mm_range(p.K, a, std::min<int64_t>(c.P, csz * p.ith), std::min<int64_t>(c.P, csz * (p.ith + 1)), tw);
        barrier(p);
    }
}

static void op_pool_2d(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int op = tsr_get_op_params_i32(dst, 0);
    const int k0 = tsr_get_op_params_i32(dst, 1), k1 = tsr_get_op_params_i32(dst, 2);
    const int s0 = tsr_get_op_params_i32(dst, 3), s1 = tsr_get_op_params_i32(dst, 4);
    const int p0 = (int)tsr_get_op_params_f32(dst, 5), p1 = (int)tsr_get_op_params_f32(dst, 6);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t oy, c, n;
        row_index(dst, ir, oy, c, n);
        float * d = (float *)tptr(dst, 0, oy, c, n);
        for (int64_t ox = 0; ox < dst->ne[0]; ++ox) {
            float out = op == TSR_OP_POOL_AVG ? 0.0f : -FLT_MAX;
            const int64_t ix = ox * s0 - p0, iy = oy * s1 - p1;
            for (int ky = 0; ky < k1; ++ky) {
                if (iy + ky < 0 || iy + ky >= src->ne[1]) continue;
                for (int kx = 0; kx < k0; ++kx) {
                    if (ix + kx < 0 || ix + kx >= src->ne[0]) continue;
                    const float v = ld(src->type, tptr(src, ix + kx, iy + ky, c, n));
                    if (op == TSR_OP_POOL_AVG) out += v;
                    else if (v > out) out = v;
                }
            }
            if (op == TSR_OP_POOL_AVG) out /= (float)(k0 * k1);
            d[ox * (dst->nb[0] / 4)] = out;
        }
    }
}

static void op_upscale(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int mode = tsr_get_op_params_i32(dst, 0);
    const float sf0 = (float)dst->ne[0] / (float)src->ne[0], sf1 = (float)dst->ne[1] / (float)src->ne[1];
    const float sf2 = (float)dst->ne[2] / (float)src->ne[2], sf3 = (float)dst->ne[3] / (float)src->ne[3];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const int64_t i02 = std::min<int64_t>(src->ne[2] - 1, (int64_t)((float)i2 / sf2));
        const int64_t i03 = std::min<int64_t>(src->ne[3] - 1, (int64_t)((float)i3 / sf3));
        char * d = tptr(dst, 0, i1, i2, i3);
        if (mode == TSR_SCALE_MODE_NEAREST) {
            const int64_t i01 = std::min<int64_t>(src->ne[1] - 1, (int64_t)((float)i1 / sf1));
            for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
                const int64_t i00 = std::min<int64_t>(src->ne[0] - 1, (int64_t)((float)i0 / sf0));
                st(dst->type, d + i0 * dst->nb[0], ld(src->type, tptr(src, i00, i01, i02, i03)));
            }
        } else {
            const float pix = 0.5f;
            const float y = ((float)i1 + pix) / sf1 - pix;
            int64_t y0 = (int64_t)std::floor(y), y1 = y0 + 1;
            y0 = std::max<int64_t>(0, std::min<int64_t>(y0, src->ne[1] - 1));
            y1 = std::max<int64_t>(0, std::min<int64_t>(y1, src->ne[1] - 1));
            const float dy = std::max(0.0f, std::min(y - std::floor(y), 1.0f));
            for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
                const float x = ((float)i0 + pix) / sf0 - pix;
                int64_t x0 = (int64_t)std::floor(x), x1 = x0 + 1;
                x0 = std::max<int64_t>(0, std::min<int64_t>(x0, src->ne[0] - 1));
                x1 = std::max<int64_t>(0, std::min<int64_t>(x1, src->ne[0] - 1));
                const float dx = std::max(0.0f, std::min(x - std::floor(x), 1.0f));
                const float va = ld(src->type, tptr(src, x0, y0, i02, i03)), vb = ld(src->type, tptr(src, x1, y0, i02, i03));
                const float vc = ld(src->type, tptr(src, x0, y1, i02, i03)), vd = ld(src->type, tptr(src, x1, y1, i02, i03));
                const float v = va * (1 - dx) * (1 - dy) + vb * dx * (1 - dy) + vc * (1 - dx) * dy + vd * dx * dy;
                st(dst->type, d + i0 * dst->nb[0], v);
            }
        }
    }
}

static void op_argsort(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const bool asc = tsr_get_op_params_i32(dst, 0) == TSR_SORT_ORDER_ASC;
    const int64_t ne0 = src->ne[0];
    int32_t * idx = (int32_t *)thread_floats(p, (size_t)ne0);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * s = tptr(src, 0, i1, i2, i3);
        const size_t ss = src->nb[0];
        for (int64_t i = 0; i < ne0; ++i) idx[i] = (int32_t)i;
        auto val = [&](int32_t i) { return *(const float *)(s + (size_t)i * ss); };
        if (asc) std::sort(idx, idx + ne0, [&](int32_t x, int32_t y) { return val(x) < val(y) || (val(x) == val(y) && x < y); });
        else std::sort(idx, idx + ne0, [&](int32_t x, int32_t y) { return val(x) > val(y) || (val(x) == val(y) && x < y); });
        char * d = tptr(dst, 0, i1, i2, i3);
        for (int64_t i = 0; i < ne0; ++i) *(int32_t *)(d + i * dst->nb[0]) = idx[i];
    }
}

/* ---- fused attention (online softmax, no n_q x n_kv buffer) ------------------------------- */

/* Scores are taken FA_BLOCK keys at a time: one max and one rescale of the accumulator
 * per block, and the exps as one vector row. */
enum { FA_BLOCK = 64 };

static size_t fa_thread_floats(const tsr_tensor * dst) {
    const int64_t D = dst->src[0]->ne[0], Dv = dst->src[2]->ne[0];
    return (size_t)(D + 2 * Dv + FA_BLOCK) + yq8_row_bytes(D) / 4 + 16;
}

static void op_flash_attn_ext(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * q = dst->src[0];
    const tsr_tensor * k = dst->src[1];
    const tsr_tensor * v = dst->src[2];
    const tsr_tensor * mask = dst->src[3];
    float scale = tsr_get_op_params_f32(dst, 0);
    const float max_bias = tsr_get_op_params_f32(dst, 1);
    const float softcap = tsr_get_op_params_f32(dst, 2);
    if (softcap != 0.0f) scale /= softcap;
    const int64_t D = q->ne[0], Dv = v->ne[0], n_kv = k->ne[1];
    const int64_t H = q->ne[2];
    const int64_t rk2 = q->ne[2] / k->ne[2], rk3 = q->ne[3] / k->ne[3];
    float * buf = thread_floats(p, fa_thread_floats(dst));
    float * qf = buf;
    float * acc = qf + D;
    float * vrow = acc + Dv;
    float * sc = vrow + Dv;
    yq8 * qq = (yq8 *)(sc + FA_BLOCK);
    const bool kq = tsr_is_quantized(k->type);
    const bool k_contig = row_contig(k), v_f32 = v->type == TSR_TYPE_F32 && v->nb[0] == 4;
    const int64_t nr = q->ne[1] * q->ne[2] * q->ne[3];
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        const int64_t iq1 = ir % q->ne[1], iq2 = (ir / q->ne[1]) % q->ne[2], iq3 = ir / (q->ne[1] * q->ne[2]);
        const int64_t ik2 = iq2 / rk2, ik3 = iq3 / rk3;
        const float slope = alibi_slope(max_bias, iq2, H);
        const char * qrow = tptr(q, 0, iq1, iq2, iq3);
        for (int64_t i = 0; i < D; ++i) qf[i] = *(const float *)(qrow + i * q->nb[0]);
        if (kq) {
            p.K->quantize_y(qf, qq, D);
            y_side(qq, D / 32, k->type);
        }
        const char * mrow = mask ? tptr(mask, 0, iq1, iq2 % mask->ne[2], iq3 % mask->ne[3]) : nullptr;
        for (int64_t i = 0; i < Dv; ++i) acc[i] = 0.0f;
        float S = 0.0f, M = -INFINITY;
        for (int64_t c0 = 0; c0 < n_kv; c0 += FA_BLOCK) {
            const int64_t nc = std::min<int64_t>(FA_BLOCK, n_kv - c0);
            float bm = -INFINITY;
            for (int64_t j = 0; j < nc; ++j) {
                const int64_t ic = c0 + j;
                const float mv = mrow ? slope * ld(mask->type, mrow + ic * mask->nb[0]) : 0.0f;
                if (mv == -INFINITY) { sc[j] = -INFINITY; continue; }
                const char * krow = tptr(k, 0, ic, ik2, ik3);
                float s;
                if (kq) s = dot_any(p.K, k->type, D, krow, (const char *)qq);
                else if (k_contig) s = dot_any(p.K, k->type, D, krow, (const char *)qf);
                else {
                    s = 0.0f;
                    for (int64_t i = 0; i < D; ++i) s += ld(k->type, krow + i * k->nb[0]) * qf[i];
                }
                s *= scale;
                if (softcap != 0.0f) s = softcap * std::tanh(s);
                s += mv;
                sc[j] = s;
                bm = std::max(bm, s);
            }
            if (bm == -INFINITY) continue;  /* the whole block masked */
            if (bm > M) {
                const float ms = std::exp(M - bm);  /* 0 for the first block that counts */
                for (int64_t i = 0; i < Dv; ++i) acc[i] *= ms;
                S *= ms;
                M = bm;
            }
            for (int64_t j = 0; j < nc; ++j) sc[j] -= M;
            if (p.K->act) p.K->act->exp(nc, sc, sc);
            else for (int64_t j = 0; j < nc; ++j) sc[j] = std::exp(sc[j]);
            for (int64_t j = 0; j < nc; ++j) {
                const float vs = sc[j];
                if (vs == 0.0f) continue;  /* masked, or too small to count */
                const char * vr = tptr(v, 0, c0 + j, ik2, ik3);
                const float * vf;
                if (v_f32) vf = (const float *)vr;
                else if (v->type == TSR_TYPE_F16 && row_contig(v)) { p.K->f16_to_f32(vr, vrow, Dv); vf = vrow; }
                else if (row_contig(v)) { row_to_f32(v->type, vr, vrow, Dv); vf = vrow; }
                else { for (int64_t i = 0; i < Dv; ++i) vrow[i] = ld(v->type, vr + i * v->nb[0]); vf = vrow; }
                p.K->axpy_f32(Dv, vs, vf, acc);
                S += vs;
            }
        }
        const float inv = S == 0.0f ? 0.0f : 1.0f / S;
        float * d = (float *)tptr(dst, 0, iq2, iq1, iq3);
        for (int64_t i = 0; i < Dv; ++i) d[i] = acc[i] * inv;
    }
}

} // namespace tcpu
} // namespace
