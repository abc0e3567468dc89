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

#undef TSR_MODELS_D
#undef TSR_MODELS_REQUIRE
#undef TSR_MODELS_FAIL
