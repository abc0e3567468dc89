/*
 * ops_shape.inl - the CPU's fill and shape ops of issue 17 part A: arange, fill, tri, cumsum,
 * acc/set, diag, repeat_back, l2_norm, top_k (conventions: ops_elementwise.inl). Scalar
 * loops, threaded over rows; sums in double.
 */
namespace {
namespace tcpu {

static void op_arange(const cparams & p, tsr_tensor * dst) {
    const float start = tsr_get_op_params_f32(dst, 0), step = tsr_get_op_params_f32(dst, 2);
    int64_t i0, i1;
    split_rows(dst->ne[0], p.ith, p.nth, i0, i1);
    for (int64_t i = i0; i < i1; ++i) *(float *)tptr(dst, i, 0, 0, 0) = start + step * (float)i;
}

/* The rows of dst this thread writes, with their (i1, i2, i3). */
template <class F> static inline void for_my_rows(const cparams & p, const tsr_tensor * dst, F && row) {
    // an empty row (ne[0] == 0) may still come with 2^50 rows: nothing to write, no loop
    if (tsr_nelements(dst) == 0) return;
    int64_t r0, r1;
    split_rows(tsr_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        row(i1, i2, i3);
    }
}

static void op_fill(const cparams & p, tsr_tensor * dst) {
    const float c = tsr_get_op_params_f32(dst, 0);
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) st(dst->type, tptr(dst, i0, i1, i2, i3), c);
    });
}

static inline bool tri_keeps(int type, int64_t i0, int64_t i1) {
    switch (type) {
        case TSR_TRI_TYPE_UPPER_DIAG: return i0 >= i1;
        case TSR_TRI_TYPE_UPPER: return i0 > i1;
        case TSR_TRI_TYPE_LOWER_DIAG: return i0 <= i1;
        default: return i0 < i1;
    }
}

static void op_tri(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int type = tsr_get_op_params_i32(dst, 0);
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0)
            st(dst->type, tptr(dst, i0, i1, i2, i3), tri_keeps(type, i0, i1) ? ld(src->type, tptr(src, i0, i1, i2, i3)) : 0.0f);
    });
}

static void op_cumsum(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        double s = 0.0;
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            s += ld(src->type, tptr(src, i0, i1, i2, i3));
            st(dst->type, tptr(dst, i0, i1, i2, i3), (float)s);
        }
    });
}

/* acc / set: dst = a (skipped when dst is a), a barrier, then the view of dst that b covers
 * (b's shape, strides nb1..nb3 and byte offset from op_params) gets view + b or b. */
static void op_acc_set(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    if (dst->data != a->data) {
        int64_t b0, b1;
        split_rows((int64_t)tsr_nbytes(dst), p.ith, p.nth, b0, b1);
        if (b1 > b0) std::memcpy((char *)dst->data + b0, (const char *)a->data + b0, (size_t)(b1 - b0));
        barrier(p);
    }
    int64_t prm[4];
    std::memcpy(prm, dst->op_params, sizeof(prm));
    tsr_tensor view = *dst;   /* dst seen through b's window: the same element type */
    view.data = (char *)dst->data + prm[3];
    view.nb[0] = tsr_type_size(dst->type);
    for (int d = 0; d < 4; ++d) view.ne[d] = b->ne[d];
    for (int d = 1; d < 4; ++d) view.nb[d] = (size_t)prm[d - 1];
    const bool acc = dst->op == TSR_OP_ACC;
    for_my_rows(p, b, [&](int64_t i1, int64_t i2, int64_t i3) {
        for (int64_t i0 = 0; i0 < b->ne[0]; ++i0) {
            char * v = tptr(&view, i0, i1, i2, i3);
            const float x = ld(b->type, tptr(b, i0, i1, i2, i3));
            st(dst->type, v, acc ? ld(dst->type, v) + x : x);
        }
    });
}

static void op_diag(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0)
            st(dst->type, tptr(dst, i0, i1, i2, i3), i0 == i1 ? ld(src->type, tptr(src, i0, 0, i2, i3)) : 0.0f);
    });
}

/* Each dst row sums the source rows that repeat it (r1..r3 repetitions of dims 1..3),
 * and within a row the r0 repetitions of each element. */
static void op_repeat_back(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    int64_t reps[4];
    for (int d = 0; d < 4; ++d) reps[d] = dst->ne[d] > 0 ? src->ne[d] / dst->ne[d] : 0;
    const bool src_empty = tsr_nelements(src) == 0;
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            double s = 0.0;
            // an empty source (some ne 0) sums nothing: never walk its other, maybe huge, dims
            for (int64_t k3 = 0; !src_empty && k3 < reps[3]; ++k3)
                for (int64_t k2 = 0; k2 < reps[2]; ++k2)
                    for (int64_t k1 = 0; k1 < reps[1]; ++k1)
                        for (int64_t k0 = 0; k0 < reps[0]; ++k0)
                            s += ld(src->type, tptr(src, i0 + k0 * dst->ne[0], i1 + k1 * dst->ne[1], i2 + k2 * dst->ne[2],
                                                    i3 + k3 * dst->ne[3]));
            st(dst->type, tptr(dst, i0, i1, i2, i3), (float)s);
        }
    });
}

static void op_l2_norm(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const double eps = tsr_get_op_params_f32(dst, 0);
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        double ss = 0.0;
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            const double v = *(const float *)tptr(src, i0, i1, i2, i3);
            ss += v * v;
        }
        const double norm = std::sqrt(ss);
        /* NaN-keeping max: a row with a NaN stays NaN (std::max(norm, eps) would not) */
        const float scale = (float)(1.0 / (norm < eps ? eps : norm));
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            float * d = (float *)tptr(dst, i0, i1, i2, i3);
            *d = *(const float *)tptr(src, i0, i1, i2, i3) * scale;
        }
    });
}

/* The k largest of each row, largest first: argsort's descending order (ties by index,
 * NaN largest), of which only the first k are sorted. */
static void op_top_k(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int64_t ne0 = src->ne[0], k = dst->ne[0];
    int32_t * idx = (int32_t *)thread_floats(p, (size_t)ne0);
    for_my_rows(p, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char * s = tptr(src, 0, i1, i2, i3);
        const size_t ss = src->nb[0];
        auto val = [&](int32_t i) { return *(const float *)(s + (size_t)i * ss); };
        auto before = [&](int32_t x, int32_t y) {
            const float vx = val(x), vy = val(y);
            if (vx != vx || vy != vy) return (vx != vx) != (vy != vy) ? vx != vx : x < y;
            return vx > vy || (vx == vy && x < y);
        };
        for (int64_t i = 0; i < ne0; ++i) idx[i] = (int32_t)i;
        std::partial_sort(idx, idx + k, idx + ne0, before);
        for (int64_t i = 0; i < k; ++i) *(int32_t *)tptr(dst, i, i1, i2, i3) = idx[i];
    });
}

} // namespace tcpu
} // namespace
