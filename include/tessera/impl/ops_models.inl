/* ops_models.inl - construction of the ops that model families beyond decoder-only LLMs
 * need (issue 17 part B): expert-indexed mat-mul (MoE), 1-D and transposed / depthwise
 * convolutions, positions, sequence models. The rules of ops.inl hold: every input is
 * validated before the result is created (a failed op consumes no arena memory), shapes
 * and op_params follow ggml, and each op's op_params layout is written next to it and in
 * docs/ops.md. */

#define TSR_MODELS_FAIL(...)          \
    do {                              \
        tsr_set_error(__VA_ARGS__);   \
        return nullptr;               \
    } while (0)
#define TSR_MODELS_REQUIRE(cond, ...)              \
    do {                                           \
        if (!(cond)) TSR_MODELS_FAIL(__VA_ARGS__); \
    } while (0)
#define TSR_MODELS_D(t) tsr_impl_describe(t).s

/* ---- expert-indexed mat-mul ------------------------------------------------------------------ */

/* TSR_OP_MUL_MAT_ID: i32 precision (slot 0, enum tsr_prec). as [K, M, n_expert] (any mul_mat
 * weight type, rows not transposed), b f32 [K, n_b, n_tokens], ids I32 [n_used, n_tokens] with
 * n_used % n_b == 0. Result F32 [M, n_used, n_tokens]; src0 = as, src1 = b, src2 = ids. */
TSR_API_IMPL struct tsr_tensor * tsr_mul_mat_id(struct tsr_context * ctx, struct tsr_tensor * as, struct tsr_tensor * b,
                                                struct tsr_tensor * ids) {
    if (!tsr_impl::check_args("tsr_mul_mat_id", ctx, as, b, ids)) return nullptr;
    TSR_MODELS_REQUIRE(ids->type == TSR_TYPE_I32 && ids->ne[2] == 1 && ids->ne[3] == 1,
                       "tsr_mul_mat_id: ids %s must be an i32 matrix [n_used, n_tokens]", TSR_MODELS_D(ids));
    TSR_MODELS_REQUIRE(as->ne[3] == 1 && as->ne[2] > 0, "tsr_mul_mat_id: experts %s must be [K, M, n_expert] (3-D)",
                       TSR_MODELS_D(as));
    TSR_MODELS_REQUIRE(as->nb[0] == tsr_type_size(as->type) && as->nb[1] >= as->nb[0],
                       "tsr_mul_mat_id: experts %s must not be transposed", TSR_MODELS_D(as));
    TSR_MODELS_REQUIRE(b->ne[3] == 1 && b->ne[0] == as->ne[0],
                       "tsr_mul_mat_id: b %s must be [K, n_b, n_tokens] with the K of experts %s", TSR_MODELS_D(b),
                       TSR_MODELS_D(as));
    TSR_MODELS_REQUIRE(ids->ne[1] == b->ne[2], "tsr_mul_mat_id: ids %s and b %s differ in tokens (ids.ne1 vs b.ne2)",
                       TSR_MODELS_D(ids), TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(b->ne[1] > 0 && ids->ne[0] % b->ne[1] == 0,
                       "tsr_mul_mat_id: b %s has %lld rows per token, which do not divide the %lld ids per token of %s",
                       TSR_MODELS_D(b), (long long)b->ne[1], (long long)ids->ne[0], TSR_MODELS_D(ids));
    TSR_MODELS_REQUIRE(tsr_impl::is_float_type(b->type), "tsr_mul_mat_id: b %s must be f32, f16 or bf16", TSR_MODELS_D(b));
    struct tsr_tensor * r = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, as->ne[1], ids->ne[0], b->ne[2]);
    if (r) tsr_set_op_params_i32(r, 0, TSR_PREC_DEFAULT);
    return tsr_impl::op_result(r, TSR_OP_MUL_MAT_ID, as, b, ids);
}

TSR_API_IMPL bool tsr_mul_mat_set_prec(struct tsr_tensor * a, enum tsr_prec prec) {
    if (!a) return tsr_set_error("tsr_mul_mat_set_prec: NULL tensor");
    if (a->op != TSR_OP_MUL_MAT && a->op != TSR_OP_MUL_MAT_ID) {
        return tsr_set_error("tsr_mul_mat_set_prec: %s is a %s node, not MUL_MAT or MUL_MAT_ID", TSR_MODELS_D(a),
                             tsr_op_name(a->op));
    }
    if (prec != TSR_PREC_DEFAULT && prec != TSR_PREC_F32) {
        return tsr_set_error("tsr_mul_mat_set_prec: unknown precision %d for %s", (int)prec, TSR_MODELS_D(a));
    }
    tsr_set_op_params_i32(a, 0, (int32_t)prec);
    return true;
}

/* ---- convolutions and pooling ------------------------------------------------------------------ */

TSR_IMPL_NS_BEGIN
/* (ins - 1) * s - 2 * p + d * (ks - 1) + 1: ggml's transposed-convolution output size. */
static inline int64_t conv_transpose_out_size(int64_t ins, int64_t ks, int s, int p, int d) {
    return (ins - 1) * s - 2 * (int64_t)p + (int64_t)d * (ks - 1) + 1;
}
/* 3-D a seen as 4-D with a dim of size 1 inserted at `at` (a view: a's strides kept). */
static inline struct tsr_tensor * with_unit_dim(struct tsr_context * ctx, struct tsr_tensor * a, int at) {
    int64_t ne[4];
    size_t nb[4];
    for (int i = 0, j = 0; i < 4; ++i) {
        if (i == at) {
            ne[i] = 1;
            nb[i] = i > 0 ? nb[i - 1] * (size_t)ne[i - 1] : a->nb[0];
            continue;
        }
        ne[i] = a->ne[j];
        nb[i] = a->nb[j];
        ++j;
    }
    return tsr_view_4d(ctx, a, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], 0);
}
/* The 1-D convolutions view their operands as 2-D ones: rows must be dense for a view. */
static inline bool check_dense_rows(const char * fn, const struct tsr_tensor * a, const struct tsr_tensor * b) {
    if (a->nb[0] != tsr_type_size(a->type) || b->nb[0] != tsr_type_size(b->type)) {
        return tsr_set_error("%s: kernel %s and input %s need dense rows (nb0 = element size; tsr_cont a transposed one)", fn,
                             tsr_impl_describe(a).s, tsr_impl_describe(b).s);
    }
    return true;
}
TSR_IMPL_NS_END

/* conv_1d(a kernel [K, IC, OC], b input [L, IC, N]) -> F32 [OL, OC, N], OL = (L + 2*p0 -
 * d0*(K-1) - 1)/s0 + 1: a CONV_2D node (height 1) over views of a and b, so the columns live
 * in the backend's workspace as conv_2d's do; the result is its 3-D reshape. */
TSR_API_IMPL struct tsr_tensor * tsr_conv_1d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int s0,
                                             int p0, int d0) {
    if (!tsr_impl::check_args("tsr_conv_1d", ctx, a, b)) return nullptr;
    if (!tsr_impl::check_conv_params("tsr_conv_1d", s0, 1, p0, 0, d0, 1)) return nullptr;
    TSR_MODELS_REQUIRE(a->ne[3] == 1 && b->ne[3] == 1, "tsr_conv_1d: kernel %s and input %s must be 3-D", TSR_MODELS_D(a),
                       TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(a->ne[1] == b->ne[1], "tsr_conv_1d: kernel %s has %lld input channels, input %s has %lld",
                       TSR_MODELS_D(a), (long long)a->ne[1], TSR_MODELS_D(b), (long long)b->ne[1]);
    TSR_MODELS_REQUIRE(tsr_impl::is_float_type(a->type) && tsr_impl::is_float_type(b->type),
                       "tsr_conv_1d: kernel %s and input %s must be float types", TSR_MODELS_D(a), TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(tsr_impl::conv_out_size(b->ne[0], a->ne[0], s0, p0, d0) > 0,
                       "tsr_conv_1d: input %s is too short for kernel %s", TSR_MODELS_D(b), TSR_MODELS_D(a));
    if (!tsr_impl::check_dense_rows("tsr_conv_1d", a, b)) return nullptr;
    struct tsr_tensor * a4 = tsr_impl::with_unit_dim(ctx, a, 1);
    struct tsr_tensor * b4 = a4 ? tsr_impl::with_unit_dim(ctx, b, 1) : nullptr;
    struct tsr_tensor * r = b4 ? tsr_conv_2d(ctx, a4, b4, s0, 1, p0, 0, d0, 1) : nullptr;
    return r ? tsr_reshape_3d(ctx, r, r->ne[0], r->ne[2], r->ne[3]) : nullptr;
}

/* TSR_OP_CONV_2D_DW: i32 s0, s1, p0, p1, d0, d1 (slots 0..5). a kernel [KW, KH, 1, C] (f32/f16),
 * b input [W, H, C, N] (f32/f16) -> F32 [OW, OH, C, N] (sizes as conv_2d): channel c of the
 * input convolved with kernel c alone (depthwise), computed directly. src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_conv_2d_dw_direct(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                       int s0, int s1, int p0, int p1, int d0, int d1) {
    if (!tsr_impl::check_args("tsr_conv_2d_dw", ctx, a, b)) return nullptr;
    if (!tsr_impl::check_conv_params("tsr_conv_2d_dw", s0, s1, p0, p1, d0, d1)) return nullptr;
    TSR_MODELS_REQUIRE((a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && (b->type == TSR_TYPE_F32 || b->type == TSR_TYPE_F16),
                       "tsr_conv_2d_dw: kernel %s and input %s must be f32 or f16", TSR_MODELS_D(a), TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(a->ne[2] == 1 && a->ne[3] == b->ne[2],
                       "tsr_conv_2d_dw: kernel %s must be [KW, KH, 1, C] with the C = %lld channels of input %s",
                       TSR_MODELS_D(a), (long long)b->ne[2], TSR_MODELS_D(b));
    const int64_t OW = tsr_impl::conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    const int64_t OH = tsr_impl::conv_out_size(b->ne[1], a->ne[1], s1, p1, d1);
    TSR_MODELS_REQUIRE(OW > 0 && OH > 0, "tsr_conv_2d_dw: input %s is too small for kernel %s (output %lld x %lld)",
                       TSR_MODELS_D(b), TSR_MODELS_D(a), (long long)OW, (long long)OH);
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, OW, OH, b->ne[2], b->ne[3]);
    if (!r) return nullptr;
    const int32_t params[6] = {s0, s1, p0, p1, d0, d1};
    tsr_set_op_params(r, params, sizeof(params));
    return tsr_impl::op_result(r, TSR_OP_CONV_2D_DW, a, b);
}
TSR_API_IMPL struct tsr_tensor * tsr_conv_2d_dw(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int s0,
                                                int s1, int p0, int p1, int d0, int d1) {
    return tsr_conv_2d_dw_direct(ctx, a, b, s0, s1, p0, p1, d0, d1);
}

/* conv_1d_dw(a kernel [K, 1, C], b input [L, C, N]) -> F32 [OL, C, N]: a CONV_2D_DW node
 * (height 1) over views of a and b, reshaped to 3-D. */
TSR_API_IMPL struct tsr_tensor * tsr_conv_1d_dw(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int s0,
                                                int p0, int d0) {
    if (!tsr_impl::check_args("tsr_conv_1d_dw", ctx, a, b)) return nullptr;
    if (!tsr_impl::check_conv_params("tsr_conv_1d_dw", s0, 1, p0, 0, d0, 1)) return nullptr;
    TSR_MODELS_REQUIRE(a->ne[1] == 1 && a->ne[3] == 1 && b->ne[3] == 1 && a->ne[2] == b->ne[1],
                       "tsr_conv_1d_dw: kernel %s must be [K, 1, C] with the C = %lld channels of input %s [L, C, N]",
                       TSR_MODELS_D(a), (long long)b->ne[1], TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE((a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && (b->type == TSR_TYPE_F32 || b->type == TSR_TYPE_F16),
                       "tsr_conv_1d_dw: kernel %s and input %s must be f32 or f16", TSR_MODELS_D(a), TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(tsr_impl::conv_out_size(b->ne[0], a->ne[0], s0, p0, d0) > 0,
                       "tsr_conv_1d_dw: input %s is too short for kernel %s", TSR_MODELS_D(b), TSR_MODELS_D(a));
    if (!tsr_impl::check_dense_rows("tsr_conv_1d_dw", a, b)) return nullptr;
    /* kernel [K, 1, C] -> [K, 1, 1, C]; input [L, C, N] -> [L, 1, C, N] */
    struct tsr_tensor * a4 = tsr_view_4d(ctx, a, a->ne[0], 1, 1, a->ne[2], a->nb[1], a->nb[1], a->nb[2], 0);
    struct tsr_tensor * b4 = a4 ? tsr_impl::with_unit_dim(ctx, b, 1) : nullptr;
    struct tsr_tensor * r = b4 ? tsr_conv_2d_dw_direct(ctx, a4, b4, s0, 1, p0, 0, d0, 1) : nullptr;
    return r ? tsr_reshape_3d(ctx, r, r->ne[0], r->ne[2], r->ne[3]) : nullptr;
}

/* TSR_OP_CONV_TRANSPOSE_1D: i32 s0, p0, d0 (slots 0..2). a kernel [K, OC, IC] (f32/f16),
 * b input [L, IC, N] (f32/f16) -> F32 [OL, OC, N], OL = (L-1)*s0 - 2*p0 + d0*(K-1) + 1:
 * out[l*s0 + k*d0 - p0, oc, n] += a[k, oc, ic] * b[l, ic, n] (ggml takes only p0 = 0,
 * d0 = 1 and N = 1; tessera any). src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_conv_transpose_1d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                       int s0, int p0, int d0) {
    if (!tsr_impl::check_args("tsr_conv_transpose_1d", ctx, a, b)) return nullptr;
    if (!tsr_impl::check_conv_params("tsr_conv_transpose_1d", s0, 1, p0, 0, d0, 1)) return nullptr;
    TSR_MODELS_REQUIRE((a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && (b->type == TSR_TYPE_F32 || b->type == TSR_TYPE_F16),
                       "tsr_conv_transpose_1d: kernel %s and input %s must be f32 or f16", TSR_MODELS_D(a), TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(a->ne[3] == 1 && b->ne[3] == 1 && a->ne[2] == b->ne[1],
                       "tsr_conv_transpose_1d: kernel %s must be [K, OC, IC] with the IC = %lld channels of input %s [L, IC, N]",
                       TSR_MODELS_D(a), (long long)b->ne[1], TSR_MODELS_D(b));
    const int64_t OL = tsr_impl::conv_transpose_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    TSR_MODELS_REQUIRE(OL > 0, "tsr_conv_transpose_1d: padding %d leaves no output of input %s and kernel %s", p0,
                       TSR_MODELS_D(b), TSR_MODELS_D(a));
    struct tsr_tensor * r = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, OL, a->ne[1], b->ne[2]);
    if (!r) return nullptr;
    const int32_t params[3] = {s0, p0, d0};
    tsr_set_op_params(r, params, sizeof(params));
    return tsr_impl::op_result(r, TSR_OP_CONV_TRANSPOSE_1D, a, b);
}

/* TSR_OP_CONV_TRANSPOSE_2D: i32 stride (slot 0). a kernel [KW, KH, OC, IC] (f32/f16), b input
 * [W, H, IC, N] (f32/f16) -> F32 [(W-1)*stride + KW, (H-1)*stride + KH, OC, N] (no padding).
 * src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_conv_transpose_2d_p0(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                          int stride) {
    if (!tsr_impl::check_args("tsr_conv_transpose_2d_p0", ctx, a, b)) return nullptr;
    TSR_MODELS_REQUIRE(stride > 0, "tsr_conv_transpose_2d_p0: stride %d must be > 0", stride);
    TSR_MODELS_REQUIRE((a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && (b->type == TSR_TYPE_F32 || b->type == TSR_TYPE_F16),
                       "tsr_conv_transpose_2d_p0: kernel %s and input %s must be f32 or f16", TSR_MODELS_D(a), TSR_MODELS_D(b));
    TSR_MODELS_REQUIRE(a->ne[3] == b->ne[2],
                       "tsr_conv_transpose_2d_p0: kernel %s must be [KW, KH, OC, IC] with the IC = %lld channels of input %s",
                       TSR_MODELS_D(a), (long long)b->ne[2], TSR_MODELS_D(b));
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, tsr_impl::conv_transpose_out_size(b->ne[0], a->ne[0], stride, 0, 1),
                                              tsr_impl::conv_transpose_out_size(b->ne[1], a->ne[1], stride, 0, 1), a->ne[2], b->ne[3]);
    if (r) tsr_set_op_params_i32(r, 0, stride);
    return tsr_impl::op_result(r, TSR_OP_CONV_TRANSPOSE_2D, a, b);
}

/* pool_1d(a [L, ...]) -> F32 [(L + 2*p0 - k0)/s0 + 1, ne1, ne2, ne3]: a POOL_2D node with a
 * window of height 1 (ggml has an op of its own; the arithmetic is the same). */
TSR_API_IMPL struct tsr_tensor * tsr_pool_1d(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_op_pool op, int k0, int s0,
                                             int p0) {
    return tsr_pool_2d(ctx, a, op, k0, 1, s0, 1, (float)p0, 0.0f);
}

/* TSR_OP_PAD_REFLECT_1D: i32 p0, p1 (slots 0, 1). a f32 -> [p0 + ne0 + p1, ne1, ne2, ne3]:
 * dim 0 mirrored at both ends without repeating the edge (PyTorch's ReflectionPad1d), so
 * p0, p1 < ne0. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_pad_reflect_1d(struct tsr_context * ctx, struct tsr_tensor * a, int p0, int p1) {
    if (!tsr_impl::check_args("tsr_pad_reflect_1d", ctx, a)) return nullptr;
    TSR_MODELS_REQUIRE(a->type == TSR_TYPE_F32, "tsr_pad_reflect_1d: %s must be f32", TSR_MODELS_D(a));
    TSR_MODELS_REQUIRE(p0 >= 0 && p1 >= 0 && p0 < a->ne[0] && p1 < a->ne[0],
                       "tsr_pad_reflect_1d: paddings %d, %d must be in [0, ne0 = %lld) for %s", p0, p1, (long long)a->ne[0],
                       TSR_MODELS_D(a));
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, a->type, a->ne[0] + p0 + p1, a->ne[1], a->ne[2], a->ne[3]);
    if (r) {
        const int32_t params[2] = {p0, p1};
        tsr_set_op_params(r, params, sizeof(params));
    }
    return tsr_impl::op_result(r, TSR_OP_PAD_REFLECT_1D, a);
}

/* pad_ext: a PAD node with zeros before (lp*) and after (rp*) each dim: trailing pads in slots
 * 0..3 as tsr_pad, leading pads in slots 4..7. */
TSR_API_IMPL struct tsr_tensor * tsr_pad_ext(struct tsr_context * ctx, struct tsr_tensor * a, int lp0, int rp0, int lp1, int rp1,
                                             int lp2, int rp2, int lp3, int rp3) {
    if (!tsr_impl::check_args("tsr_pad_ext", ctx, a)) return nullptr;
    TSR_MODELS_REQUIRE(lp0 >= 0 && lp1 >= 0 && lp2 >= 0 && lp3 >= 0 && rp0 >= 0 && rp1 >= 0 && rp2 >= 0 && rp3 >= 0,
                       "tsr_pad_ext: paddings (%d, %d, %d, %d, %d, %d, %d, %d) of %s must be >= 0", lp0, rp0, lp1, rp1, lp2, rp2,
                       lp3, rp3, TSR_MODELS_D(a));
    struct tsr_tensor * r = tsr_pad(ctx, a, lp0 + rp0, lp1 + rp1, lp2 + rp2, lp3 + rp3);
    if (!r) return nullptr;
    const int32_t lead[4] = {lp0, lp1, lp2, lp3};
    for (int i = 0; i < 4; ++i) tsr_set_op_params_i32(r, 4 + (uint32_t)i, lead[i]);
    return r;
}

/* TSR_OP_ROLL: i32 shift0..shift3 (slots 0..3). a (f32/f16/bf16/i32) -> like a, every dim
 * rotated: out[i] = a[(i - shift) mod ne] (torch.roll); |shift_i| <= ne_i. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_roll(struct tsr_context * ctx, struct tsr_tensor * a, int shift0, int shift1, int shift2,
                                          int shift3) {
    if (!tsr_impl::check_args("tsr_roll", ctx, a)) return nullptr;
    TSR_MODELS_REQUIRE(!tsr_is_quantized(a->type), "tsr_roll: %s must not be quantized", TSR_MODELS_D(a));
    const int32_t shifts[4] = {shift0, shift1, shift2, shift3};
    for (int i = 0; i < 4; ++i) {
        TSR_MODELS_REQUIRE(shifts[i] <= a->ne[i] && -shifts[i] <= a->ne[i], "tsr_roll: shift %d of dim %d exceeds ne%d = %lld of %s",
                           shifts[i], i, i, (long long)a->ne[i], TSR_MODELS_D(a));
    }
    struct tsr_tensor * r = tsr_new_tensor(ctx, a->type, TSR_MAX_DIMS, a->ne);
    if (r) tsr_set_op_params(r, shifts, sizeof(shifts));
    return tsr_impl::op_result(r, TSR_OP_ROLL, a);
}

/* ---- positions ------------------------------------------------------------------------------------ */

/* TSR_OP_TIMESTEP_EMBEDDING: i32 dim (slot 0), max_period (slot 1). timesteps f32 [N] -> F32
 * [dim, N]: out[j, i] = cos(t_i * f_j), out[j + dim/2, i] = sin(t_i * f_j), f_j =
 * exp(-ln(max_period) * j / (dim/2)), j < dim/2; an odd dim's last element is 0. src0 = t. */
TSR_API_IMPL struct tsr_tensor * tsr_timestep_embedding(struct tsr_context * ctx, struct tsr_tensor * timesteps, int dim,
                                                        int max_period) {
    if (!tsr_impl::check_args("tsr_timestep_embedding", ctx, timesteps)) return nullptr;
    TSR_MODELS_REQUIRE(timesteps->type == TSR_TYPE_F32 && timesteps->ne[1] == 1 && timesteps->ne[2] == 1 && timesteps->ne[3] == 1,
                       "tsr_timestep_embedding: timesteps %s must be an f32 vector", TSR_MODELS_D(timesteps));
    TSR_MODELS_REQUIRE(dim > 0 && max_period > 0, "tsr_timestep_embedding: dim %d and max_period %d must be > 0", dim, max_period);
    struct tsr_tensor * r = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, dim, timesteps->ne[0]);
    if (r) {
        const int32_t params[2] = {dim, max_period};
        tsr_set_op_params(r, params, sizeof(params));
    }
    return tsr_impl::op_result(r, TSR_OP_TIMESTEP_EMBEDDING, timesteps);
}

/* TSR_OP_ROPE with mode TSR_ROPE_TYPE_MROPE, _IMROPE or _VISION: the ROPE slots 0..10, then i32
 * sections[4] in slots 11..14. a f32/f16 [head_dim, n_head, n_tokens] -> like a. b I32
 * [4 * n_tokens]; c freq factors f32 [>= head_dim / 2] or NULL. src0 = a, src1 = b, src2 = c. */
TSR_API_IMPL struct tsr_tensor * tsr_rope_multi(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                struct tsr_tensor * c, int n_dims, int sections[TSR_MROPE_SECTIONS], int mode,
                                                int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                                float attn_factor, float beta_fast, float beta_slow) {
    if (!tsr_impl::check_args("tsr_rope_multi", ctx, a, b)) return nullptr;
    TSR_MODELS_REQUIRE(sections != nullptr, "tsr_rope_multi: NULL sections");
    TSR_MODELS_REQUIRE((a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && a->ne[3] == 1,
                       "tsr_rope_multi: %s must be f32 or f16 [head_dim, n_head, n_tokens]", TSR_MODELS_D(a));
    TSR_MODELS_REQUIRE(b->type == TSR_TYPE_I32 && b->ne[1] == 1 && b->ne[2] == 1 && b->ne[3] == 1 && b->ne[0] == 4 * a->ne[2],
                       "tsr_rope_multi: positions %s must be i32 [4 * n_tokens = %lld]", TSR_MODELS_D(b), (long long)(4 * a->ne[2]));
    TSR_MODELS_REQUIRE(mode == TSR_ROPE_TYPE_MROPE || mode == TSR_ROPE_TYPE_VISION || mode == TSR_ROPE_TYPE_IMROPE,
                       "tsr_rope_multi: mode %d must be TSR_ROPE_TYPE_MROPE (8), TSR_ROPE_TYPE_VISION (24) or TSR_ROPE_TYPE_IMROPE (40)",
                       mode);
    TSR_MODELS_REQUIRE(n_dims > 0 && n_dims % 2 == 0 && n_dims <= a->ne[0] && (mode != TSR_ROPE_TYPE_VISION || 2 * n_dims == a->ne[0]),
                       "tsr_rope_multi: n_dims %d must be even and in (0, %lld] (vision: half of it)", n_dims, (long long)a->ne[0]);
    const int sect_dims = sections[0] + sections[1] + sections[2] + sections[3];
    TSR_MODELS_REQUIRE(sections[0] >= 0 && sections[1] >= 0 && sections[2] >= 0 && sections[3] >= 0 && sect_dims > 0 &&
                           sect_dims <= a->ne[0],
                       "tsr_rope_multi: sections (%d, %d, %d, %d) must be >= 0 with a sum in (0, %lld]", sections[0], sections[1],
                       sections[2], sections[3], (long long)a->ne[0]);
    if (c) {
        TSR_MODELS_REQUIRE(c->type == TSR_TYPE_F32 && c->ne[0] >= a->ne[0] / 2,
                           "tsr_rope_multi: frequency factors %s must be f32 with >= %lld elements", TSR_MODELS_D(c),
                           (long long)(a->ne[0] / 2));
    }
    struct tsr_tensor * r = tsr_dup_tensor(ctx, a);
    if (!r) return nullptr;
    int32_t params[15] = {0, n_dims, mode, 0, n_ctx_orig};
    const float fp[6] = {freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow};
    memcpy(params + 5, fp, sizeof(fp));
    memcpy(params + 11, sections, sizeof(int32_t) * TSR_MROPE_SECTIONS);
    tsr_set_op_params(r, params, sizeof(params));
    return tsr_impl::op_result(r, TSR_OP_ROPE, a, b, c);
}

/* ---- windows and relative positions (SAM-style vision transformers) ---------------------------------- */

/* TSR_OP_WIN_PART: i32 npx, npy, w (slots 0..2). a f32 [C, W, H] -> F32 [C, w, w, npx*npy],
 * npx = ceil(W / w), npy = ceil(H / w): window (px, py) is number py*npx + px, zero past the
 * image. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_win_part(struct tsr_context * ctx, struct tsr_tensor * a, int w) {
    if (!tsr_impl::check_args("tsr_win_part", ctx, a)) return nullptr;
    TSR_MODELS_REQUIRE(a->type == TSR_TYPE_F32 && a->ne[3] == 1, "tsr_win_part: %s must be f32 [C, W, H]", TSR_MODELS_D(a));
    TSR_MODELS_REQUIRE(w > 0, "tsr_win_part: window %d must be > 0", w);
    const int64_t npx = (a->ne[1] + w - 1) / w, npy = (a->ne[2] + w - 1) / w;
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, a->ne[0], w, w, npx * npy);
    if (r) {
        const int32_t params[3] = {(int32_t)npx, (int32_t)npy, w};
        tsr_set_op_params(r, params, sizeof(params));
    }
    return tsr_impl::op_result(r, TSR_OP_WIN_PART, a);
}

/* TSR_OP_WIN_UNPART: i32 w (slot 0). a f32 [C, w, w, n_windows] -> F32 [C, w0, h0]: the inverse
 * of win_part for an image of w0 x h0 (n_windows = ceil(w0/w) * ceil(h0/w)). src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_win_unpart(struct tsr_context * ctx, struct tsr_tensor * a, int w0, int h0, int w) {
    if (!tsr_impl::check_args("tsr_win_unpart", ctx, a)) return nullptr;
    TSR_MODELS_REQUIRE(w > 0 && w0 > 0 && h0 > 0, "tsr_win_unpart: window %d and image %d x %d must be > 0", w, w0, h0);
    const int64_t nw = (int64_t)((w0 + w - 1) / w) * ((h0 + w - 1) / w);
    TSR_MODELS_REQUIRE(a->type == TSR_TYPE_F32 && a->ne[1] == w && a->ne[2] == w && a->ne[3] == nw,
                       "tsr_win_unpart: %s must be f32 [C, %d, %d, %lld windows of a %d x %d image]", TSR_MODELS_D(a), w, w,
                       (long long)nw, w0, h0);
    struct tsr_tensor * r = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, a->ne[0], w0, h0);
    if (r) tsr_set_op_params_i32(r, 0, w);
    return tsr_impl::op_result(r, TSR_OP_WIN_UNPART, a);
}

/* TSR_OP_GET_REL_POS: no op_params. a f32/f16 [C, 2*qh - 1] (a table of relative positions) ->
 * a's type [C, kh, qh], qh == kh: out[:, k, q] = a[:, (kh - 1 - k) + q] (ggml: f16 only).
 * src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_get_rel_pos(struct tsr_context * ctx, struct tsr_tensor * a, int qh, int kh) {
    if (!tsr_impl::check_args("tsr_get_rel_pos", ctx, a)) return nullptr;
    TSR_MODELS_REQUIRE(qh > 0 && qh == kh, "tsr_get_rel_pos: qh %d and kh %d must be equal and > 0", qh, kh);
    TSR_MODELS_REQUIRE((a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16) && a->ne[1] == 2 * (int64_t)qh - 1 && a->ne[2] == 1 &&
                           a->ne[3] == 1,
                       "tsr_get_rel_pos: %s must be f32 or f16 [C, 2*%d - 1]", TSR_MODELS_D(a), qh);
    struct tsr_tensor * r = tsr_new_tensor_3d(ctx, a->type, a->ne[0], kh, qh);
    return tsr_impl::op_result(r, TSR_OP_GET_REL_POS, a);
}

TSR_IMPL_NS_BEGIN
/* TSR_OP_ADD_REL_POS: i32 inplace (slot 0). a f32 contiguous [W*W, ne11*ne12, ne13], pw and ph
 * f32 contiguous [W, ne11, ne12, ne13] -> like a (inplace: a view of a): out[x + W*y, i11 +
 * ne11*i12, i13] = a[...] + ph[y, i11, i12, i13] + pw[x, i11, i12, i13]. src0..2 = a, pw, ph. */
static inline struct tsr_tensor * add_rel_pos(const char * fn, struct tsr_context * ctx, struct tsr_tensor * a,
                                              struct tsr_tensor * pw, struct tsr_tensor * ph, bool inplace) {
    if (!check_args(fn, ctx, a, pw, ph)) return nullptr;
    TSR_MODELS_REQUIRE(a->type == TSR_TYPE_F32 && pw->type == TSR_TYPE_F32 && ph->type == TSR_TYPE_F32 && tsr_is_contiguous(a) &&
                           tsr_is_contiguous(pw) && tsr_is_contiguous(ph),
                       "%s: a %s, pw %s and ph %s must be contiguous f32", fn, TSR_MODELS_D(a), TSR_MODELS_D(pw), TSR_MODELS_D(ph));
    TSR_MODELS_REQUIRE(tsr_are_same_shape(pw, ph) && pw->ne[0] * pw->ne[0] == a->ne[0] && pw->ne[1] * pw->ne[2] == a->ne[1] &&
                           pw->ne[3] == a->ne[2] && a->ne[3] == 1,
                       "%s: pw %s and ph %s must be [W, n1, n2, n3] for a %s [W*W, n1*n2, n3]", fn, TSR_MODELS_D(pw),
                       TSR_MODELS_D(ph), TSR_MODELS_D(a));
    struct tsr_tensor * r = like(ctx, a, inplace);
    if (r) tsr_set_op_params_i32(r, 0, inplace ? 1 : 0);
    return op_result(r, TSR_OP_ADD_REL_POS, a, pw, ph);
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_add_rel_pos(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * pw,
                                                 struct tsr_tensor * ph) {
    return tsr_impl::add_rel_pos("tsr_add_rel_pos", ctx, a, pw, ph, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_add_rel_pos_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * pw,
                                                         struct tsr_tensor * ph) {
    return tsr_impl::add_rel_pos("tsr_add_rel_pos_inplace", ctx, a, pw, ph, true);
}

/* ---- sequence models ---------------------------------------------------------------------------- */

/* TSR_OP_SSM_CONV: no op_params. sx f32 [d_conv - 1 + n_t, d_inner, n_s] (dense rows), c f32
 * [d_conv, d_inner] -> F32 [d_inner, n_t, n_s]: out[i, t, s] = sum_k sx[t + k, i, s] * c[k, i]
 * (Mamba's causal depthwise convolution over a window that carries the previous state).
 * src0 = sx, src1 = c. */
TSR_API_IMPL struct tsr_tensor * tsr_ssm_conv(struct tsr_context * ctx, struct tsr_tensor * sx, struct tsr_tensor * c) {
    if (!tsr_impl::check_args("tsr_ssm_conv", ctx, sx, c)) return nullptr;
    TSR_MODELS_REQUIRE(sx->type == TSR_TYPE_F32 && c->type == TSR_TYPE_F32, "tsr_ssm_conv: sx %s and c %s must be f32",
                       TSR_MODELS_D(sx), TSR_MODELS_D(c));
    TSR_MODELS_REQUIRE(sx->ne[3] == 1 && c->ne[2] == 1 && c->ne[3] == 1 && sx->ne[1] == c->ne[1],
                       "tsr_ssm_conv: sx %s must be [d_conv - 1 + n_t, d_inner, n_s] and c %s [d_conv, d_inner]",
                       TSR_MODELS_D(sx), TSR_MODELS_D(c));
    TSR_MODELS_REQUIRE(c->ne[0] > 0 && sx->ne[0] >= c->ne[0], "tsr_ssm_conv: sx %s is shorter than the window of c %s",
                       TSR_MODELS_D(sx), TSR_MODELS_D(c));
    TSR_MODELS_REQUIRE(sx->nb[0] == 4 && c->nb[0] == 4, "tsr_ssm_conv: sx %s and c %s need dense rows", TSR_MODELS_D(sx),
                       TSR_MODELS_D(c));
    struct tsr_tensor * r = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, sx->ne[1], sx->ne[0] - c->ne[0] + 1, sx->ne[2]);
    return tsr_impl::op_result(r, TSR_OP_SSM_CONV, sx, c);
}

/* TSR_OP_SSM_SCAN: no op_params. s f32 [d_state, head_dim, n_head, >= n_seqs] (the state pool),
 * x f32 [head_dim, n_head, n_t, n_seqs], dt f32 [n_head, n_t, n_seqs], A f32 [d_state, n_head]
 * (Mamba-1) or [1, n_head] (Mamba-2), B and C f32 [d_state, n_group, n_t, n_seqs] (n_head %
 * n_group == 0), ids I32 [n_seqs] (the state of sequence q is s[..., ids[q]]). Result F32 1-D:
 * y [head_dim, n_head, n_t, n_seqs] then the final states [d_state, head_dim, n_head, n_seqs].
 * Per token: dt' = softplus(dt), state = state * exp(dt' A) + B x dt', y = state . C.
 * src0..6 = s, x, dt, A, B, C, ids. */
TSR_API_IMPL struct tsr_tensor * tsr_ssm_scan(struct tsr_context * ctx, struct tsr_tensor * s, struct tsr_tensor * x,
                                              struct tsr_tensor * dt, struct tsr_tensor * A, struct tsr_tensor * B,
                                              struct tsr_tensor * C, struct tsr_tensor * ids) {
    if (!tsr_impl::check_args("tsr_ssm_scan", ctx, s, x, dt) || !tsr_impl::check_args("tsr_ssm_scan", ctx, A, B, C) ||
        !tsr_impl::check_args("tsr_ssm_scan", ctx, ids)) {
        return nullptr;
    }
    const struct tsr_tensor * fs[6] = {s, x, dt, A, B, C};
    for (const struct tsr_tensor * t : fs) {
        TSR_MODELS_REQUIRE(t->type == TSR_TYPE_F32 && tsr_is_contiguous(t), "tsr_ssm_scan: %s must be contiguous f32", TSR_MODELS_D(t));
    }
    const int64_t d_state = s->ne[0], head_dim = x->ne[0], n_head = x->ne[1], n_t = x->ne[2], n_seqs = x->ne[3];
    TSR_MODELS_REQUIRE(s->ne[1] == head_dim && s->ne[2] == n_head && s->ne[3] >= n_seqs,
                       "tsr_ssm_scan: states %s must be [d_state, %lld, %lld, >= %lld] for x %s", TSR_MODELS_D(s),
                       (long long)head_dim, (long long)n_head, (long long)n_seqs, TSR_MODELS_D(x));
    TSR_MODELS_REQUIRE(dt->ne[0] == n_head && dt->ne[1] == n_t && dt->ne[2] == n_seqs && dt->ne[3] == 1,
                       "tsr_ssm_scan: dt %s must be [n_head, n_t, n_seqs] of x %s", TSR_MODELS_D(dt), TSR_MODELS_D(x));
    TSR_MODELS_REQUIRE((A->ne[0] == 1 || A->ne[0] == d_state) && A->ne[1] == n_head && A->ne[2] == 1 && A->ne[3] == 1,
                       "tsr_ssm_scan: A %s must be [d_state or 1, n_head = %lld]", TSR_MODELS_D(A), (long long)n_head);
    TSR_MODELS_REQUIRE(tsr_are_same_shape(B, C) && B->ne[0] == d_state && B->ne[1] > 0 && n_head % B->ne[1] == 0 &&
                           B->ne[2] == n_t && B->ne[3] == n_seqs,
                       "tsr_ssm_scan: B %s and C %s must be [d_state, n_group, n_t, n_seqs] with n_head %% n_group == 0",
                       TSR_MODELS_D(B), TSR_MODELS_D(C));
    TSR_MODELS_REQUIRE(ids->type == TSR_TYPE_I32 && ids->ne[0] == n_seqs && ids->ne[1] == 1 && ids->ne[2] == 1 && ids->ne[3] == 1,
                       "tsr_ssm_scan: ids %s must be an i32 vector of %lld sequences", TSR_MODELS_D(ids), (long long)n_seqs);
    struct tsr_tensor * r = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, tsr_nelements(x) + d_state * head_dim * n_head * n_seqs);
    if (!r) return nullptr;
    tsr_impl_set_op(r, TSR_OP_SSM_SCAN, s, x, dt, A);
    r->src[4] = B;
    r->src[5] = C;
    r->src[6] = ids;
    return r;
}

/* ---- linear attention (RWKV 6/7, gated linear attention) ------------------------------------------ */

TSR_IMPL_NS_BEGIN
/* The shared contract of the linear-attention recurrences: every token tensor f32 contiguous
 * [S, H, n_tokens], the state f32 contiguous with S*S*H*n_seqs elements ([S*S*H, n_seqs]),
 * n_tokens a multiple of n_seqs (each sequence's tokens consecutive). */
static inline bool check_linear_attn(const char * fn, struct tsr_tensor * const * toks, int n, const struct tsr_tensor * state) {
    const struct tsr_tensor * k = toks[0];
    for (int i = 0; i < n; ++i) {
        const struct tsr_tensor * t = toks[i];
        if (t->type != TSR_TYPE_F32 || !tsr_is_contiguous(t) || t->ne[0] != k->ne[0] || t->ne[1] != k->ne[1] ||
            t->ne[2] != k->ne[2] || t->ne[3] != 1) {
            return tsr_set_error("%s: %s must be contiguous f32 [S, H, n_tokens] like %s", fn, tsr_impl_describe(t).s,
                                 tsr_impl_describe(k).s);
        }
    }
    const int64_t S = k->ne[0], H = k->ne[1];
    if (state->type != TSR_TYPE_F32 || !tsr_is_contiguous(state) || state->ne[0] != S * S * H || state->ne[2] != 1 ||
        state->ne[3] != 1 || state->ne[1] <= 0 || k->ne[2] % state->ne[1] != 0) {
        return tsr_set_error("%s: state %s must be contiguous f32 [S*S*H = %lld, n_seqs] with n_seqs dividing the %lld tokens",
                             fn, tsr_impl_describe(state).s, (long long)(S * S * H), (long long)k->ne[2]);
    }
    return true;
}
/* [S*H, n_tokens + S*n_seqs]: the outputs, then the final states. */
static inline struct tsr_tensor * linear_attn_result(struct tsr_context * ctx, const struct tsr_tensor * k, const struct tsr_tensor * state) {
    return tsr_new_tensor_2d(ctx, TSR_TYPE_F32, k->ne[0] * k->ne[1], k->ne[2] + k->ne[0] * state->ne[1]);
}
TSR_IMPL_NS_END

/* TSR_OP_RWKV_WKV6: no op_params. k, v, r, td f32 [S, H, n_tokens], tf f32 [S, H], state f32
 * [S*S*H, n_seqs] -> F32 [S*H, n_tokens + S*n_seqs] (outputs, then final states). Per head,
 * with kv = k[i] v[j]: y[j] += r[i] (tf[i] kv + st[i][j]), st[i][j] = st[i][j] td[i] + kv.
 * src0..5 = k, v, r, tf, td, state. */
TSR_API_IMPL struct tsr_tensor * tsr_rwkv_wkv6(struct tsr_context * ctx, struct tsr_tensor * k, struct tsr_tensor * v,
                                               struct tsr_tensor * r, struct tsr_tensor * tf, struct tsr_tensor * td,
                                               struct tsr_tensor * state) {
    if (!tsr_impl::check_args("tsr_rwkv_wkv6", ctx, k, v, r) || !tsr_impl::check_args("tsr_rwkv_wkv6", ctx, tf, td, state)) return nullptr;
    struct tsr_tensor * toks[4] = {k, v, r, td};
    if (!tsr_impl::check_linear_attn("tsr_rwkv_wkv6", toks, 4, state)) return nullptr;
    TSR_MODELS_REQUIRE(tf->type == TSR_TYPE_F32 && tsr_is_contiguous(tf) && tsr_nelements(tf) == k->ne[0] * k->ne[1],
                       "tsr_rwkv_wkv6: time_first %s must be contiguous f32 [S, H] of k %s", TSR_MODELS_D(tf), TSR_MODELS_D(k));
    struct tsr_tensor * res = tsr_impl::linear_attn_result(ctx, k, state);
    if (!res) return nullptr;
    tsr_impl_set_op(res, TSR_OP_RWKV_WKV6, k, v, r, tf);
    res->src[4] = td;
    res->src[5] = state;
    return res;
}

/* TSR_OP_GATED_LINEAR_ATTN: f32 scale (slot 0). k, v, q, g f32 [S, H, n_tokens], state f32
 * [S*S*H, n_seqs] -> F32 [S*H, n_tokens + S*n_seqs]. Per head: st[i][j] = st[i][j] g[i] +
 * k[i] v[j], y[j] = scale sum_i q[i] st[i][j]. src0..4 = k, v, q, g, state. */
TSR_API_IMPL struct tsr_tensor * tsr_gated_linear_attn(struct tsr_context * ctx, struct tsr_tensor * k, struct tsr_tensor * v,
                                                       struct tsr_tensor * q, struct tsr_tensor * g, struct tsr_tensor * state,
                                                       float scale) {
    if (!tsr_impl::check_args("tsr_gated_linear_attn", ctx, k, v, q) || !tsr_impl::check_args("tsr_gated_linear_attn", ctx, g, state))
        return nullptr;
    struct tsr_tensor * toks[4] = {k, v, q, g};
    if (!tsr_impl::check_linear_attn("tsr_gated_linear_attn", toks, 4, state)) return nullptr;
    struct tsr_tensor * res = tsr_impl::linear_attn_result(ctx, k, state);
    if (!res) return nullptr;
    tsr_set_op_params_f32(res, 0, scale);
    tsr_impl_set_op(res, TSR_OP_GATED_LINEAR_ATTN, k, v, q, g);
    res->src[4] = state;
    return res;
}

/* TSR_OP_RWKV_WKV7: no op_params. r, w, k, v, a, b f32 [S, H, n_tokens], state f32 [S*S*H,
 * n_seqs] -> F32 [S*H, n_tokens + S*n_seqs]. Per head, state row i (value index):
 * sa = a . st[i], st[i][j] = st[i][j] w[j] + v[i] k[j] + sa b[j], y[i] = r . st[i].
 * src0..6 = r, w, k, v, a, b, state. */
TSR_API_IMPL struct tsr_tensor * tsr_rwkv_wkv7(struct tsr_context * ctx, struct tsr_tensor * r, struct tsr_tensor * w,
                                               struct tsr_tensor * k, struct tsr_tensor * v, struct tsr_tensor * a,
                                               struct tsr_tensor * b, struct tsr_tensor * state) {
    if (!tsr_impl::check_args("tsr_rwkv_wkv7", ctx, r, w, k) || !tsr_impl::check_args("tsr_rwkv_wkv7", ctx, v, a, b) ||
        !tsr_impl::check_args("tsr_rwkv_wkv7", ctx, state)) {
        return nullptr;
    }
    struct tsr_tensor * toks[6] = {r, w, k, v, a, b};
    if (!tsr_impl::check_linear_attn("tsr_rwkv_wkv7", toks, 6, state)) return nullptr;
    struct tsr_tensor * res = tsr_impl::linear_attn_result(ctx, r, state);
    if (!res) return nullptr;
    tsr_impl_set_op(res, TSR_OP_RWKV_WKV7, r, w, k, v);
    res->src[4] = a;
    res->src[5] = b;
    res->src[6] = state;
    return res;
}

#undef TSR_MODELS_D
#undef TSR_MODELS_REQUIRE
#undef TSR_MODELS_FAIL
