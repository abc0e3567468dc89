/* ops_unary_shape.inl - construction of ggml's other unary and GLU functions, and of the
 * fill and shape ops (issue 17 part A): arange, fill, tri, cumsum, acc/set, diag,
 * repeat_back, l2_norm, top_k. Included by ops.inl (its helpers and TSR_IMPL_* macros);
 * the same rules: every input validated before the result is made, op_params layout
 * written next to each op and collected in docs/ops.md. */

/* ---- unary functions ------------------------------------------------------------------------ */

#define TSR_IMPL_UNARY_FNS(name, OP)                                                                        \
    TSR_API_IMPL struct tsr_tensor * tsr_##name(struct tsr_context * ctx, struct tsr_tensor * a) {            \
        return tsr_impl::unary_op("tsr_" #name, ctx, a, OP, false);                                         \
    }                                                                                                       \
    TSR_API_IMPL struct tsr_tensor * tsr_##name##_inplace(struct tsr_context * ctx, struct tsr_tensor * a) { \
        return tsr_impl::unary_op("tsr_" #name "_inplace", ctx, a, OP, true);                               \
    }
TSR_IMPL_UNARY_FNS(sgn, TSR_UNARY_OP_SGN)
TSR_IMPL_UNARY_FNS(step, TSR_UNARY_OP_STEP)
TSR_IMPL_UNARY_FNS(elu, TSR_UNARY_OP_ELU)
TSR_IMPL_UNARY_FNS(expm1, TSR_UNARY_OP_EXPM1)
TSR_IMPL_UNARY_FNS(softplus, TSR_UNARY_OP_SOFTPLUS)
TSR_IMPL_UNARY_FNS(gelu_erf, TSR_UNARY_OP_GELU_ERF)
TSR_IMPL_UNARY_FNS(floor, TSR_UNARY_OP_FLOOR)
TSR_IMPL_UNARY_FNS(ceil, TSR_UNARY_OP_CEIL)
TSR_IMPL_UNARY_FNS(round, TSR_UNARY_OP_ROUND)
TSR_IMPL_UNARY_FNS(trunc, TSR_UNARY_OP_TRUNC)
#undef TSR_IMPL_UNARY_FNS
/* ggml has no _inplace for these two */
TSR_API_IMPL struct tsr_tensor * tsr_hardswish(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_op("tsr_hardswish", ctx, a, TSR_UNARY_OP_HARDSWISH, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_hardsigmoid(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_op("tsr_hardsigmoid", ctx, a, TSR_UNARY_OP_HARDSIGMOID, false);
}

/* TSR_OP_SIN / TSR_OP_COS: no op_params. Result like a (inplace: a view of a). */
TSR_API_IMPL struct tsr_tensor * tsr_sin(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_sin", TSR_OP_SIN, ctx, a, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_sin_inplace(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_sin_inplace", TSR_OP_SIN, ctx, a, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_cos(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_cos", TSR_OP_COS, ctx, a, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_cos_inplace(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_cos_inplace", TSR_OP_COS, ctx, a, true);
}

/* TSR_OP_LEAKY_RELU: f32 negative_slope (slot 0). Result like a (inplace: a view of a). */
TSR_API_IMPL struct tsr_tensor * tsr_leaky_relu(struct tsr_context * ctx, struct tsr_tensor * a, float negative_slope,
                                                bool inplace) {
    struct tsr_tensor * r = tsr_impl::unary_like("tsr_leaky_relu", TSR_OP_LEAKY_RELU, ctx, a, inplace);
    if (r) tsr_set_op_params_f32(r, 0, negative_slope);
    return r;
}

/* ---- GLU ------------------------------------------------------------------------------------- */

TSR_API_IMPL struct tsr_tensor * tsr_glu(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_glu_op op, bool swapped) {
    return tsr_impl::glu_op("tsr_glu", ctx, a, nullptr, false, op, swapped);
}
TSR_API_IMPL struct tsr_tensor * tsr_glu_split(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                               enum tsr_glu_op op) {
    return tsr_impl::glu_op("tsr_glu_split", ctx, a, b, true, op, false);
}
#define TSR_IMPL_GLU_FNS(name, OP)                                                                            \
    TSR_API_IMPL struct tsr_tensor * tsr_##name(struct tsr_context * ctx, struct tsr_tensor * a) {              \
        return tsr_impl::glu_op("tsr_" #name, ctx, a, nullptr, false, OP, false);                             \
    }                                                                                                         \
    TSR_API_IMPL struct tsr_tensor * tsr_##name##_swapped(struct tsr_context * ctx, struct tsr_tensor * a) {    \
        return tsr_impl::glu_op("tsr_" #name "_swapped", ctx, a, nullptr, false, OP, true);                   \
    }                                                                                                         \
    TSR_API_IMPL struct tsr_tensor * tsr_##name##_split(struct tsr_context * ctx, struct tsr_tensor * a,        \
                                                        struct tsr_tensor * b) {                                \
        return tsr_impl::glu_op("tsr_" #name "_split", ctx, a, b, true, OP, false);                           \
    }
TSR_IMPL_GLU_FNS(reglu, TSR_GLU_OP_REGLU)
TSR_IMPL_GLU_FNS(geglu, TSR_GLU_OP_GEGLU)
TSR_IMPL_GLU_FNS(geglu_erf, TSR_GLU_OP_GEGLU_ERF)
TSR_IMPL_GLU_FNS(geglu_quick, TSR_GLU_OP_GEGLU_QUICK)
#undef TSR_IMPL_GLU_FNS
TSR_API_IMPL struct tsr_tensor * tsr_swiglu_swapped(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::glu_op("tsr_swiglu_swapped", ctx, a, nullptr, false, TSR_GLU_OP_SWIGLU, true);
}
/* b NULL: the fused form (ggml's). */
TSR_API_IMPL struct tsr_tensor * tsr_swiglu_oai(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                float alpha, float limit) {
    TSR_IMPL_REQUIRE(limit >= 0.0f, "tsr_swiglu_oai: limit %g must be >= 0", (double)limit);
    struct tsr_tensor * r = tsr_impl::glu_op("tsr_swiglu_oai", ctx, a, b, b != nullptr, TSR_GLU_OP_SWIGLU_OAI, false);
    if (r) {
        tsr_set_op_params_f32(r, 2, alpha);
        tsr_set_op_params_f32(r, 3, limit);
    }
    return r;
}

/* ---- fill and shape ops ------------------------------------------------------------------------ */

/* TSR_OP_ARANGE: f32 start (slot 0), stop (1), step (2). No sources. Result F32
 * [ceil((stop - start) / step)], element i = start + i*step (in float, as ggml). */
TSR_API_IMPL struct tsr_tensor * tsr_arange(struct tsr_context * ctx, float start, float stop, float step) {
    TSR_IMPL_REQUIRE(ctx, "tsr_arange: NULL context");
    const double n = std::ceil(((double)stop - (double)start) / (double)step);
    TSR_IMPL_REQUIRE(step != 0.0f && n >= 1.0 && n <= (double)INT32_MAX,
                     "tsr_arange: [%g, %g) in steps of %g holds no elements (or too many: %g)", (double)start,
                     (double)stop, (double)step, n);
    struct tsr_tensor * r = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, (int64_t)n);
    if (!r) return nullptr;
    tsr_set_op_params_f32(r, 0, start);
    tsr_set_op_params_f32(r, 1, stop);
    tsr_set_op_params_f32(r, 2, step);
    return tsr_impl::op_result(r, TSR_OP_ARANGE, nullptr);
}

/* TSR_OP_FILL: f32 c (slot 0). Result like a (f32/f16/bf16; inplace: a view of a), every
 * element c; src0 = a. */
TSR_IMPL_NS_BEGIN
static inline struct tsr_tensor * fill_op(const char * fn, struct tsr_context * ctx, struct tsr_tensor * a, float c,
                                          bool inplace) {
    struct tsr_tensor * r = unary_like(fn, TSR_OP_FILL, ctx, a, inplace);
    if (r) tsr_set_op_params_f32(r, 0, c);
    return r;
}
TSR_IMPL_NS_END
TSR_API_IMPL struct tsr_tensor * tsr_fill(struct tsr_context * ctx, struct tsr_tensor * a, float c) {
    return tsr_impl::fill_op("tsr_fill", ctx, a, c, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_fill_inplace(struct tsr_context * ctx, struct tsr_tensor * a, float c) {
    return tsr_impl::fill_op("tsr_fill_inplace", ctx, a, c, true);
}

/* TSR_OP_TRI: i32 type (slot 0, enum tsr_tri_type). Result like a (f32/f16/bf16): element
 * (i0, i1) kept where the type's predicate holds, 0 elsewhere; src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_tri(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_tri_type type) {
    TSR_IMPL_REQUIRE((int)type >= TSR_TRI_TYPE_UPPER_DIAG && (int)type <= TSR_TRI_TYPE_LOWER, "tsr_tri: unknown tri type %d",
                     (int)type);
    struct tsr_tensor * r = tsr_impl::unary_like("tsr_tri", TSR_OP_TRI, ctx, a, false);
    if (r) tsr_set_op_params_i32(r, 0, (int32_t)type);
    return r;
}

/* TSR_OP_CUMSUM: no op_params. Result like a (f32/f16/bf16): inclusive prefix sums of each
 * row (along ne0); src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_cumsum(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_cumsum", TSR_OP_CUMSUM, ctx, a, false);
}

/* TSR_OP_ACC / TSR_OP_SET: i64 nb1 (slots 0-1), nb2 (2-3), nb3 (4-5), offset (6-7), bytes;
 * i32 inplace (slot 8). a contiguous f32/f16/bf16, b f32/f16/bf16 of any layout; the view
 * of a with b's shape, strides (a's element size, nb1, nb2, nb3) and byte offset must lie
 * inside a, element-aligned. Result like a (inplace: a view of a): a, with that view
 * replaced by view + b (ACC) or b (SET). src0 = a, src1 = b. */
TSR_IMPL_NS_BEGIN
static inline bool check_acc_view(const char * fn, const struct tsr_tensor * a, const struct tsr_tensor * b, size_t nb1,
                                  size_t nb2, size_t nb3, size_t offset) {
    const size_t es = tsr_type_size(a->type);
    if (offset % es != 0 || nb1 % es != 0 || nb2 % es != 0 || nb3 % es != 0) {
        return tsr_set_error("%s: offset %zu and strides (%zu, %zu, %zu) must be multiples of %s's element size %zu", fn,
                             offset, nb1, nb2, nb3, TSR_IMPL_D(a), es);
    }
    if (tsr_nelements(b) == 0) return true;
    const size_t nb[4] = {es, nb1, nb2, nb3};
    /* the last element's byte: each term below is at most the sum, so overflow shows as wrap */
    double last = (double)offset;
    for (int d = 0; d < 4; ++d) last += (double)(b->ne[d] - 1) * (double)nb[d];
    if (last + (double)es > (double)tsr_nbytes(a)) {
        return tsr_set_error("%s: the view of %s at offset %zu with strides (%zu, %zu, %zu) for %s ends past its %zu bytes",
                             fn, TSR_IMPL_D(a), offset, nb1, nb2, nb3, TSR_IMPL_D(b), tsr_nbytes(a));
    }
    return true;
}

static inline struct tsr_tensor * acc_set_op(const char * fn, enum tsr_op op, struct tsr_context * ctx, struct tsr_tensor * a,
                                             struct tsr_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset,
                                             bool inplace) {
    if (!check_args(fn, ctx, a, b) || !check_float(fn, a, "a") || !check_float(fn, b, "b")) return nullptr;
    TSR_IMPL_REQUIRE(tsr_is_contiguous(a), "%s: %s must be contiguous", fn, TSR_IMPL_D(a));
    if (!check_acc_view(fn, a, b, nb1, nb2, nb3, offset)) return nullptr;
    struct tsr_tensor * r = like(ctx, a, inplace);
    if (!r) return nullptr;
    const int64_t params[4] = {(int64_t)nb1, (int64_t)nb2, (int64_t)nb3, (int64_t)offset};
    std::memcpy(r->op_params, params, sizeof(params));
    tsr_set_op_params_i32(r, 8, inplace ? 1 : 0);
    return op_result(r, op, a, b);
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_acc(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t nb1,
                                         size_t nb2, size_t nb3, size_t offset) {
    return tsr_impl::acc_set_op("tsr_acc", TSR_OP_ACC, ctx, a, b, nb1, nb2, nb3, offset, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_acc_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                 size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return tsr_impl::acc_set_op("tsr_acc_inplace", TSR_OP_ACC, ctx, a, b, nb1, nb2, nb3, offset, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_set(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t nb1,
                                         size_t nb2, size_t nb3, size_t offset) {
    return tsr_impl::acc_set_op("tsr_set", TSR_OP_SET, ctx, a, b, nb1, nb2, nb3, offset, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_set_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                 size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return tsr_impl::acc_set_op("tsr_set_inplace", TSR_OP_SET, ctx, a, b, nb1, nb2, nb3, offset, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_set_1d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t offset) {
    if (!tsr_impl::check_args("tsr_set_1d", ctx, a, b)) return nullptr;
    return tsr_impl::acc_set_op("tsr_set_1d", TSR_OP_SET, ctx, a, b, a->nb[1], a->nb[2], a->nb[3], offset, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_set_1d_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                    size_t offset) {
    if (!tsr_impl::check_args("tsr_set_1d_inplace", ctx, a, b)) return nullptr;
    return tsr_impl::acc_set_op("tsr_set_1d_inplace", TSR_OP_SET, ctx, a, b, a->nb[1], a->nb[2], a->nb[3], offset, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_set_2d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, size_t nb1,
                                            size_t offset) {
    if (!tsr_impl::check_args("tsr_set_2d", ctx, a, b)) return nullptr;
    return tsr_impl::acc_set_op("tsr_set_2d", TSR_OP_SET, ctx, a, b, nb1, a->nb[2], a->nb[3], offset, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_set_2d_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                    size_t nb1, size_t offset) {
    if (!tsr_impl::check_args("tsr_set_2d_inplace", ctx, a, b)) return nullptr;
    return tsr_impl::acc_set_op("tsr_set_2d_inplace", TSR_OP_SET, ctx, a, b, nb1, a->nb[2], a->nb[3], offset, true);
}

/* TSR_OP_DIAG: no op_params. a f32/f16/bf16 [n, 1, ne2, ne3] -> a's type [n, n, ne2, ne3]:
 * a's row on the diagonal, zeros elsewhere. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_diag(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!tsr_impl::check_args("tsr_diag", ctx, a) || !tsr_impl::check_float("tsr_diag", a, "a")) return nullptr;
    TSR_IMPL_REQUIRE(a->ne[1] == 1, "tsr_diag: %s must be one row per matrix (ne1 == 1)", TSR_IMPL_D(a));
    return tsr_impl::op_result(tsr_new_tensor_4d(ctx, a->type, a->ne[0], a->ne[0], a->ne[2], a->ne[3]), TSR_OP_DIAG, a);
}

/* TSR_OP_REPEAT_BACK: no op_params. a f32/f16/bf16, b gives the shape (tsr_can_repeat(b, a)):
 * result of a's type and b's shape, element i = the sum of a's elements that
 * tsr_repeat(result, a) would copy from i. src0 = a only. */
TSR_API_IMPL struct tsr_tensor * tsr_repeat_back(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!tsr_impl::check_args("tsr_repeat_back", ctx, a, b) || !tsr_impl::check_float("tsr_repeat_back", a, "a")) return nullptr;
    TSR_IMPL_REQUIRE(tsr_can_repeat(b, a), "tsr_repeat_back: %s is not a repetition of %s's shape", TSR_IMPL_D(a),
                     TSR_IMPL_D(b));
    return tsr_impl::op_result(tsr_new_tensor(ctx, a->type, TSR_MAX_DIMS, b->ne), TSR_OP_REPEAT_BACK, a);
}

/* TSR_OP_L2_NORM: f32 eps (slot 0). a f32, result like a (inplace: a view of a): each row
 * x / max(||x||_2, eps). src0 = a. */
TSR_IMPL_NS_BEGIN
static inline struct tsr_tensor * l2_norm_op(const char * fn, struct tsr_context * ctx, struct tsr_tensor * a, float eps,
                                             bool inplace) {
    if (!check_args(fn, ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "%s: %s must be f32", fn, TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(eps >= 0.0f, "%s: eps %g must be >= 0", fn, (double)eps);
    struct tsr_tensor * r = like(ctx, a, inplace);
    if (r) tsr_set_op_params_f32(r, 0, eps);
    return op_result(r, TSR_OP_L2_NORM, a);
}
TSR_IMPL_NS_END
TSR_API_IMPL struct tsr_tensor * tsr_l2_norm(struct tsr_context * ctx, struct tsr_tensor * a, float eps) {
    return tsr_impl::l2_norm_op("tsr_l2_norm", ctx, a, eps, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_l2_norm_inplace(struct tsr_context * ctx, struct tsr_tensor * a, float eps) {
    return tsr_impl::l2_norm_op("tsr_l2_norm_inplace", ctx, a, eps, true);
}

/* TSR_OP_TOP_K: i32 k (slot 0). a f32 -> I32 [k, ne1, ne2, ne3], 1 <= k <= ne0: per row the
 * indices of the k largest values, largest first (argsort's order: ties by index, NaN
 * largest). src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_top_k(struct tsr_context * ctx, struct tsr_tensor * a, int k) {
    if (!tsr_impl::check_args("tsr_top_k", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "tsr_top_k: %s must be f32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(k >= 1 && k <= a->ne[0], "tsr_top_k: k %d out of range [1, %lld] for %s", k, (long long)a->ne[0],
                     TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->ne[0] <= INT32_MAX, "tsr_top_k: rows of %s are too long for i32 indices", TSR_IMPL_D(a));
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_I32, k, a->ne[1], a->ne[2], a->ne[3]);
    if (r) tsr_set_op_params_i32(r, 0, k);
    return tsr_impl::op_result(r, TSR_OP_TOP_K, a);
}
