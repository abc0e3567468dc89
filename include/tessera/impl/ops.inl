/* ops.inl - op construction: validation, result-shape inference and op_params.
 *
 * Every op validates all its inputs BEFORE it creates its result, so a failed op returns
 * NULL with a message and consumes no arena memory. Shapes and op_params follow ggml; the
 * op_params layout of every op is written next to it (slot = 32-bit index) and collected
 * in docs/ops.md. */

#define TSR_IMPL_FAIL(...)                 \
    do {                                   \
        tsr_set_error(__VA_ARGS__);        \
        return nullptr;                    \
    } while (0)
#define TSR_IMPL_REQUIRE(cond, ...)        \
    do {                                   \
        if (!(cond)) TSR_IMPL_FAIL(__VA_ARGS__); \
    } while (0)
#define TSR_IMPL_D(t) tsr_impl_describe(t).s

/* Each op's name and symbol, by enumerator: a new op without them does not build (-Wswitch),
 * and none can shift the others. false: not an op. */
static bool tsr_impl_op_text(enum tsr_op op, const char ** name, const char ** symbol) {
    switch (op) {
        case TSR_OP_NONE:           *name = "NONE";           *symbol = "none"; return true;
        case TSR_OP_DUP:            *name = "DUP";            *symbol = "x"; return true;
        case TSR_OP_ADD:            *name = "ADD";            *symbol = "x+y"; return true;
        case TSR_OP_SUB:            *name = "SUB";            *symbol = "x-y"; return true;
        case TSR_OP_MUL:            *name = "MUL";            *symbol = "x*y"; return true;
        case TSR_OP_DIV:            *name = "DIV";            *symbol = "x/y"; return true;
        case TSR_OP_SQR:            *name = "SQR";            *symbol = "x^2"; return true;
        case TSR_OP_SQRT:           *name = "SQRT";           *symbol = "sqrt(x)"; return true;
        case TSR_OP_LOG:            *name = "LOG";            *symbol = "log(x)"; return true;
        case TSR_OP_SUM:            *name = "SUM";            *symbol = "sum(x)"; return true;
        case TSR_OP_SUM_ROWS:       *name = "SUM_ROWS";       *symbol = "sum_rows(x)"; return true;
        case TSR_OP_MEAN:           *name = "MEAN";           *symbol = "mean(x)"; return true;
        case TSR_OP_ARGMAX:         *name = "ARGMAX";         *symbol = "argmax(x)"; return true;
        case TSR_OP_REPEAT:         *name = "REPEAT";         *symbol = "repeat(x)"; return true;
        case TSR_OP_CONCAT:         *name = "CONCAT";         *symbol = "concat(x, y)"; return true;
        case TSR_OP_NORM:           *name = "NORM";           *symbol = "norm(x)"; return true;
        case TSR_OP_RMS_NORM:       *name = "RMS_NORM";       *symbol = "rms_norm(x)"; return true;
        case TSR_OP_GROUP_NORM:     *name = "GROUP_NORM";     *symbol = "group_norm(x)"; return true;
        case TSR_OP_MUL_MAT:        *name = "MUL_MAT";        *symbol = "X*Y"; return true;
        case TSR_OP_OUT_PROD:       *name = "OUT_PROD";       *symbol = "X*Y"; return true;
        case TSR_OP_SCALE:          *name = "SCALE";          *symbol = "x*v"; return true;
        case TSR_OP_CPY:            *name = "CPY";            *symbol = "x-\\>y"; return true;
        case TSR_OP_CONT:           *name = "CONT";           *symbol = "cont(x)"; return true;
        case TSR_OP_RESHAPE:        *name = "RESHAPE";        *symbol = "reshape(x)"; return true;
        case TSR_OP_VIEW:           *name = "VIEW";           *symbol = "view(x)"; return true;
        case TSR_OP_PERMUTE:        *name = "PERMUTE";        *symbol = "permute(x)"; return true;
        case TSR_OP_TRANSPOSE:      *name = "TRANSPOSE";      *symbol = "transpose(x)"; return true;
        case TSR_OP_GET_ROWS:       *name = "GET_ROWS";       *symbol = "get_rows(x)"; return true;
        case TSR_OP_SET_ROWS:       *name = "SET_ROWS";       *symbol = "set_rows(x)"; return true;
        case TSR_OP_DIAG_MASK_INF:  *name = "DIAG_MASK_INF";  *symbol = "diag_mask_inf(x)"; return true;
        case TSR_OP_SOFT_MAX:       *name = "SOFT_MAX";       *symbol = "soft_max(x)"; return true;
        case TSR_OP_ROPE:           *name = "ROPE";           *symbol = "rope(x)"; return true;
        case TSR_OP_CLAMP:          *name = "CLAMP";          *symbol = "clamp(x)"; return true;
        case TSR_OP_IM2COL:         *name = "IM2COL";         *symbol = "im2col(x)"; return true;
        case TSR_OP_CONV_2D:        *name = "CONV_2D";        *symbol = "conv_2d(x)"; return true;
        case TSR_OP_POOL_2D:        *name = "POOL_2D";        *symbol = "pool_2d(x)"; return true;
        case TSR_OP_UPSCALE:        *name = "UPSCALE";        *symbol = "upscale(x)"; return true;
        case TSR_OP_PAD:            *name = "PAD";            *symbol = "pad(x)"; return true;
        case TSR_OP_ARGSORT:        *name = "ARGSORT";        *symbol = "argsort(x)"; return true;
        case TSR_OP_FLASH_ATTN_EXT: *name = "FLASH_ATTN_EXT"; *symbol = "flash_attn_ext(x)"; return true;
        case TSR_OP_UNARY:          *name = "UNARY";          *symbol = "unary(x)"; return true;
        case TSR_OP_GLU:            *name = "GLU";            *symbol = "glu(x)"; return true;
        /* issue 17 part B */
        case TSR_OP_MUL_MAT_ID:     *name = "MUL_MAT_ID";     *symbol = "X[i]*Y"; return true;
        case TSR_OP_CONV_TRANSPOSE_1D: *name = "CONV_TRANSPOSE_1D"; *symbol = "conv_transpose_1d(x)"; return true;
        case TSR_OP_CONV_2D_DW:     *name = "CONV_2D_DW";     *symbol = "conv_2d_dw(x)"; return true;
        case TSR_OP_CONV_TRANSPOSE_2D: *name = "CONV_TRANSPOSE_2D"; *symbol = "conv_transpose_2d(x)"; return true;
        case TSR_OP_PAD_REFLECT_1D: *name = "PAD_REFLECT_1D"; *symbol = "pad_reflect_1d(x)"; return true;
        case TSR_OP_ROLL:           *name = "ROLL";           *symbol = "roll(x)"; return true;
        case TSR_OP_TIMESTEP_EMBEDDING: *name = "TIMESTEP_EMBEDDING"; *symbol = "timestep_embedding(x)"; return true;
        case TSR_OP_SSM_CONV:       *name = "SSM_CONV";       *symbol = "ssm_conv(x)"; return true;
        case TSR_OP_SSM_SCAN:       *name = "SSM_SCAN";       *symbol = "ssm_scan(x)"; return true;
        case TSR_OP_RWKV_WKV6:      *name = "RWKV_WKV6";      *symbol = "rwkv_wkv6(k, v, r, tf, td, s)"; return true;
        case TSR_OP_GATED_LINEAR_ATTN: *name = "GATED_LINEAR_ATTN"; *symbol = "gated_linear_attn(k, v, q, gate, s)"; return true;
        case TSR_OP_RWKV_WKV7:      *name = "RWKV_WKV7";      *symbol = "rwkv_wkv7(r, w, k, v, a, b, s)"; return true;
        case TSR_OP_WIN_PART:       *name = "WIN_PART";       *symbol = "win_part(x)"; return true;
        case TSR_OP_WIN_UNPART:     *name = "WIN_UNPART";     *symbol = "win_unpart(x)"; return true;
        case TSR_OP_GET_REL_POS:    *name = "GET_REL_POS";    *symbol = "get_rel_pos(x)"; return true;
        case TSR_OP_ADD_REL_POS:    *name = "ADD_REL_POS";    *symbol = "add_rel_pos(x)"; return true;
        /* issue 17 part A */
        case TSR_OP_SIN:            *name = "SIN";            *symbol = "sin(x)"; return true;
        case TSR_OP_COS:            *name = "COS";            *symbol = "cos(x)"; return true;
        case TSR_OP_LEAKY_RELU:     *name = "LEAKY_RELU";     *symbol = "leaky_relu(x)"; return true;
        case TSR_OP_ARANGE:         *name = "ARANGE";         *symbol = "arange(start, stop, step)"; return true;
        case TSR_OP_FILL:           *name = "FILL";           *symbol = "fill(x, c)"; return true;
        case TSR_OP_TRI:            *name = "TRI";            *symbol = "tri(x)"; return true;
        case TSR_OP_CUMSUM:         *name = "CUMSUM";         *symbol = "cumsum(x)"; return true;
        case TSR_OP_ACC:            *name = "ACC";            *symbol = "x[view]+=y"; return true;
        case TSR_OP_SET:            *name = "SET";            *symbol = "x[view]=y"; return true;
        case TSR_OP_DIAG:           *name = "DIAG";           *symbol = "diag(x)"; return true;
        case TSR_OP_REPEAT_BACK:    *name = "REPEAT_BACK";    *symbol = "repeat_back(x)"; return true;
        case TSR_OP_L2_NORM:        *name = "L2_NORM";        *symbol = "l2_norm(x)"; return true;
        case TSR_OP_TOP_K:          *name = "TOP_K";          *symbol = "top_k(x)"; return true;
        case TSR_OP_MAP_CUSTOM1:    *name = "MAP_CUSTOM1";    *symbol = "f(x)"; return true;
        case TSR_OP_MAP_CUSTOM2:    *name = "MAP_CUSTOM2";    *symbol = "f(x,y)"; return true;
        case TSR_OP_MAP_CUSTOM3:    *name = "MAP_CUSTOM3";    *symbol = "f(x,y,z)"; return true;
        case TSR_OP_CUSTOM:         *name = "CUSTOM";         *symbol = "custom"; return true;
        case TSR_OP_COUNT: break;
    }
    return false;
}

TSR_API_IMPL const char * tsr_op_name(enum tsr_op op) {
    const char * name = nullptr, * symbol = nullptr;
    return tsr_impl_op_text(op, &name, &symbol) ? name : "UNKNOWN";
}
TSR_API_IMPL const char * tsr_op_symbol(enum tsr_op op) {
    const char * name = nullptr, * symbol = nullptr;
    return tsr_impl_op_text(op, &name, &symbol) ? symbol : "?";
}
TSR_API_IMPL const char * tsr_unary_op_name(enum tsr_unary_op op) {
    switch (op) {
        case TSR_UNARY_OP_ABS:        return "ABS";
        case TSR_UNARY_OP_NEG:        return "NEG";
        case TSR_UNARY_OP_TANH:       return "TANH";
        case TSR_UNARY_OP_RELU:       return "RELU";
        case TSR_UNARY_OP_SIGMOID:    return "SIGMOID";
        case TSR_UNARY_OP_GELU:       return "GELU";
        case TSR_UNARY_OP_GELU_QUICK: return "GELU_QUICK";
        case TSR_UNARY_OP_SILU:       return "SILU";
        case TSR_UNARY_OP_EXP:        return "EXP";
        /* issue 17 part A */
        case TSR_UNARY_OP_SGN:         return "SGN";
        case TSR_UNARY_OP_STEP:        return "STEP";
        case TSR_UNARY_OP_ELU:         return "ELU";
        case TSR_UNARY_OP_HARDSWISH:   return "HARDSWISH";
        case TSR_UNARY_OP_HARDSIGMOID: return "HARDSIGMOID";
        case TSR_UNARY_OP_EXPM1:       return "EXPM1";
        case TSR_UNARY_OP_SOFTPLUS:    return "SOFTPLUS";
        case TSR_UNARY_OP_GELU_ERF:    return "GELU_ERF";
        case TSR_UNARY_OP_FLOOR:       return "FLOOR";
        case TSR_UNARY_OP_CEIL:        return "CEIL";
        case TSR_UNARY_OP_ROUND:       return "ROUND";
        case TSR_UNARY_OP_TRUNC:       return "TRUNC";
        case TSR_UNARY_OP_COUNT: break;
    }
    return "UNKNOWN";
}
TSR_API_IMPL const char * tsr_glu_op_name(enum tsr_glu_op op) {
    switch (op) {
        case TSR_GLU_OP_SWIGLU: return "SWIGLU";
        /* issue 17 part A */
        case TSR_GLU_OP_REGLU:       return "REGLU";
        case TSR_GLU_OP_GEGLU:       return "GEGLU";
        case TSR_GLU_OP_GEGLU_ERF:   return "GEGLU_ERF";
        case TSR_GLU_OP_GEGLU_QUICK: return "GEGLU_QUICK";
        case TSR_GLU_OP_SWIGLU_OAI:  return "SWIGLU_OAI";
        case TSR_GLU_OP_COUNT: break;
    }
    return "UNKNOWN";
}
TSR_API_IMPL const char * tsr_op_desc(const struct tsr_tensor * t) {
    if (!t) return "NULL";
    if (t->op == TSR_OP_UNARY) return tsr_unary_op_name(tsr_get_unary_op(t));
    if (t->op == TSR_OP_GLU) return tsr_glu_op_name(tsr_get_glu_op(t));
    return tsr_op_name(t->op);
}

TSR_IMPL_NS_BEGIN

static inline bool is_float_type(enum tsr_type t) {
    return t == TSR_TYPE_F32 || t == TSR_TYPE_F16 || t == TSR_TYPE_BF16;
}

/* ctx and n tensors non-NULL, else false with "<fn>: NULL ...". */
static inline bool check_args(const char * fn, const struct tsr_context * ctx, const struct tsr_tensor * a,
                              const struct tsr_tensor * b = reinterpret_cast<const struct tsr_tensor *>(1),
                              const struct tsr_tensor * c = reinterpret_cast<const struct tsr_tensor *>(1)) {
    if (!ctx) return tsr_set_error("%s: NULL context", fn);
    if (!a) return tsr_set_error("%s: NULL first operand", fn);
    if (!b) return tsr_set_error("%s: NULL second operand", fn);
    if (!c) return tsr_set_error("%s: NULL third operand", fn);
    return true;
}

static inline bool check_float(const char * fn, const struct tsr_tensor * t, const char * which) {
    if (!is_float_type(t->type)) {
        return tsr_set_error("%s: %s %s must be f32, f16 or bf16", fn, which, TSR_IMPL_D(t));
    }
    return true;
}

/* The result of an elementwise op: a new tensor like a, or (inplace) a view of a. */
static inline struct tsr_tensor * like(struct tsr_context * ctx, struct tsr_tensor * a, bool inplace) {
    return inplace ? tsr_view_tensor(ctx, a) : tsr_dup_tensor(ctx, a);
}

static inline struct tsr_tensor * op_result(struct tsr_tensor * r, enum tsr_op op, struct tsr_tensor * s0,
                                            struct tsr_tensor * s1 = nullptr, struct tsr_tensor * s2 = nullptr,
                                            struct tsr_tensor * s3 = nullptr) {
    if (r) tsr_impl_set_op(r, op, s0, s1, s2, s3);
    return r;
}

TSR_IMPL_NS_END

/* ---- copies ------------------------------------------------------------------------------ */

/* TSR_OP_DUP: no op_params. Result: new tensor like a. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_dup(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!tsr_impl::check_args("tsr_dup", ctx, a)) return nullptr;
    return tsr_impl::op_result(tsr_dup_tensor(ctx, a), TSR_OP_DUP, a);
}

/* TSR_OP_CPY: no op_params. Result: a view of b; src0 = a (source), src1 = b (destination).
 * Same element count; the types may differ (a conversion). */
TSR_API_IMPL struct tsr_tensor * tsr_cpy(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!tsr_impl::check_args("tsr_cpy", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(tsr_nelements(a) == tsr_nelements(b), "tsr_cpy: %s and %s differ in element count (%lld vs %lld)",
                     TSR_IMPL_D(a), TSR_IMPL_D(b), (long long)tsr_nelements(a), (long long)tsr_nelements(b));
    TSR_IMPL_REQUIRE(a->type == b->type || (tsr_impl::is_float_type(a->type) || tsr_impl::is_float_type(b->type)),
                     "tsr_cpy: cannot convert %s to %s", TSR_IMPL_D(a), TSR_IMPL_D(b));
    struct tsr_tensor * r = tsr_view_tensor(ctx, b);
    if (!r) return nullptr;
    if (b->name[0] != '\0') {
        tsr_format_name(r, "%s (copy of %s)", b->name, a->name);
    } else {
        tsr_format_name(r, "%s (copy)", a->name);
    }
    return tsr_impl::op_result(r, TSR_OP_CPY, a, b);
}

/* tsr_cast is a TSR_OP_CPY into a new tensor of `type` (src1 = the result itself, as ggml). */
TSR_API_IMPL struct tsr_tensor * tsr_cast(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_type type) {
    if (!tsr_impl::check_args("tsr_cast", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(tsr_is_valid_type(type), "tsr_cast: unknown type %d", (int)type);
    TSR_IMPL_REQUIRE(a->ne[0] % tsr_blck_size(type) == 0, "tsr_cast: ne0 of %s is not a multiple of %s's block size",
                     TSR_IMPL_D(a), tsr_type_name(type));
    struct tsr_tensor * r = tsr_new_tensor(ctx, type, TSR_MAX_DIMS, a->ne);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (copy)", a->name);
    return tsr_impl::op_result(r, TSR_OP_CPY, a, r);
}

/* TSR_OP_CONT: no op_params. Result: contiguous [ne0, ne1, ne2, ne3] of a's type, src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_cont_4d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1,
                                             int64_t ne2, int64_t ne3) {
    if (!tsr_impl::check_args("tsr_cont", ctx, a)) return nullptr;
    const int64_t ne[TSR_MAX_DIMS] = {ne0, ne1, ne2, ne3};
    int64_t n = -1;
    const bool counted = ne0 >= 0 && ne1 >= 0 && ne2 >= 0 && ne3 >= 0 && tsr_impl_count_elements(TSR_MAX_DIMS, ne, &n);
    TSR_IMPL_REQUIRE(counted && n == tsr_nelements(a),
                     "tsr_cont: shape [%lld, %lld, %lld, %lld] does not hold the %lld elements of %s", (long long)ne0,
                     (long long)ne1, (long long)ne2, (long long)ne3, (long long)tsr_nelements(a), TSR_IMPL_D(a));
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, a->type, ne0, ne1, ne2, ne3);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (cont)", a->name);
    return tsr_impl::op_result(r, TSR_OP_CONT, a);
}
TSR_API_IMPL struct tsr_tensor * tsr_cont(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!a) TSR_IMPL_FAIL("tsr_cont: NULL first operand");
    return tsr_cont_4d(ctx, a, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}
TSR_API_IMPL struct tsr_tensor * tsr_cont_2d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1) {
    return tsr_cont_4d(ctx, a, ne0, ne1, 1, 1);
}

/* ---- binary elementwise ------------------------------------------------------------------ */

TSR_IMPL_NS_BEGIN
/* TSR_OP_ADD/SUB/MUL/DIV: no op_params. Result like a (a's type), src0 = a, src1 = b;
 * b is broadcast over a (tsr_can_repeat(b, a)). a: f32/f16/bf16 (ADD: also quantized);
 * b: f32/f16/bf16. Inplace: a view of a. */
static inline struct tsr_tensor * binary(const char * fn, enum tsr_op op, struct tsr_context * ctx, struct tsr_tensor * a,
                                         struct tsr_tensor * b, bool inplace) {
    if (!check_args(fn, ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(tsr_can_repeat(b, a), "%s: %s cannot be broadcast to %s (each dim of a must be a multiple of b's)",
                     fn, TSR_IMPL_D(b), TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(is_float_type(a->type) || (op == TSR_OP_ADD && tsr_is_quantized(a->type)),
                     "%s: unsupported type of a %s", fn, TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(is_float_type(b->type), "%s: unsupported type of b %s", fn, TSR_IMPL_D(b));
    return op_result(like(ctx, a, inplace), op, a, b);
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_add(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::binary("tsr_add", TSR_OP_ADD, ctx, a, b, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_sub(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::binary("tsr_sub", TSR_OP_SUB, ctx, a, b, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_mul(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::binary("tsr_mul", TSR_OP_MUL, ctx, a, b, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_div(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::binary("tsr_div", TSR_OP_DIV, ctx, a, b, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_add_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::binary("tsr_add_inplace", TSR_OP_ADD, ctx, a, b, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_mul_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::binary("tsr_mul_inplace", TSR_OP_MUL, ctx, a, b, true);
}

/* ---- unary elementwise ------------------------------------------------------------------- */

TSR_IMPL_NS_BEGIN
static inline struct tsr_tensor * unary_like(const char * fn, enum tsr_op op, struct tsr_context * ctx,
                                             struct tsr_tensor * a, bool inplace) {
    if (!check_args(fn, ctx, a) || !check_float(fn, a, "a")) return nullptr;
    return op_result(like(ctx, a, inplace), op, a);
}

/* TSR_OP_SCALE: f32 s (slot 0), f32 bias (slot 1, always 0): x*s + bias. Result like a. */
static inline struct tsr_tensor * scale_impl(struct tsr_context * ctx, struct tsr_tensor * a, float s, bool inplace) {
    struct tsr_tensor * r = unary_like(inplace ? "tsr_scale_inplace" : "tsr_scale", TSR_OP_SCALE, ctx, a, inplace);
    if (r) {
        tsr_set_op_params_f32(r, 0, s);
        tsr_set_op_params_f32(r, 1, 0.0f);
    }
    return r;
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_scale(struct tsr_context * ctx, struct tsr_tensor * a, float s) {
    return tsr_impl::scale_impl(ctx, a, s, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_scale_inplace(struct tsr_context * ctx, struct tsr_tensor * a, float s) {
    return tsr_impl::scale_impl(ctx, a, s, true);
}

/* TSR_OP_SQR / SQRT / LOG: no op_params. Result like a (f32/f16/bf16). */
TSR_API_IMPL struct tsr_tensor * tsr_sqr(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_sqr", TSR_OP_SQR, ctx, a, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_sqrt(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_sqrt", TSR_OP_SQRT, ctx, a, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_log(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::unary_like("tsr_log", TSR_OP_LOG, ctx, a, false);
}

/* TSR_OP_UNARY: i32 op (slot 0, enum tsr_unary_op). Result like a (f32/f16/bf16; inplace:
 * a view of a), src0 = a. */
TSR_IMPL_NS_BEGIN
static inline struct tsr_tensor * unary_op(const char * fn, struct tsr_context * ctx, struct tsr_tensor * a,
                                           enum tsr_unary_op op, bool inplace) {
    TSR_IMPL_REQUIRE((int)op >= 0 && op < TSR_UNARY_OP_COUNT, "%s: unknown unary op %d", fn, (int)op);
    struct tsr_tensor * r = unary_like(fn, TSR_OP_UNARY, ctx, a, inplace);
    if (r) tsr_set_op_params_i32(r, 0, (int32_t)op);
    return r;
}
TSR_IMPL_NS_END
TSR_API_IMPL struct tsr_tensor * tsr_unary(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_unary_op op) {
    return tsr_impl::unary_op("tsr_unary", ctx, a, op, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_unary_inplace(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_unary_op op) {
    return tsr_impl::unary_op("tsr_unary_inplace", ctx, a, op, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_exp(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_EXP); }
TSR_API_IMPL struct tsr_tensor * tsr_neg(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_NEG); }
TSR_API_IMPL struct tsr_tensor * tsr_abs(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_ABS); }
TSR_API_IMPL struct tsr_tensor * tsr_gelu(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_GELU); }
TSR_API_IMPL struct tsr_tensor * tsr_gelu_quick(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_GELU_QUICK); }
TSR_API_IMPL struct tsr_tensor * tsr_silu(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_SILU); }
TSR_API_IMPL struct tsr_tensor * tsr_relu(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_RELU); }
TSR_API_IMPL struct tsr_tensor * tsr_tanh(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_TANH); }
TSR_API_IMPL struct tsr_tensor * tsr_sigmoid(struct tsr_context * ctx, struct tsr_tensor * a) { return tsr_unary(ctx, a, TSR_UNARY_OP_SIGMOID); }

/* TSR_OP_CLAMP: f32 min (slot 0), f32 max (slot 1). Result like a (a new tensor; ggml
 * returns a view of a here, tessera does not alias). */
TSR_API_IMPL struct tsr_tensor * tsr_clamp(struct tsr_context * ctx, struct tsr_tensor * a, float min, float max) {
    TSR_IMPL_REQUIRE(!(min > max), "tsr_clamp: min %g > max %g", (double)min, (double)max);
    struct tsr_tensor * r = tsr_impl::unary_like("tsr_clamp", TSR_OP_CLAMP, ctx, a, false);
    if (r) {
        tsr_set_op_params_f32(r, 0, min);
        tsr_set_op_params_f32(r, 1, max);
    }
    return r;
}

/* TSR_OP_GLU: i32 op (slot 0, enum tsr_glu_op), i32 swapped (slot 1, 0 or 1); SWIGLU_OAI:
 * f32 alpha (slot 2), f32 limit (slot 3). Fused (src1 NULL): a's rows [x | g] (swapped:
 * [g | x]), ne0 even, result [ne0/2, ne1, ne2, ne3] of a's type. Split: src0 = a (x),
 * src1 = b (g), same shape and type, result like a. */
TSR_IMPL_NS_BEGIN
static inline struct tsr_tensor * glu_op(const char * fn, struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                         bool split, enum tsr_glu_op op, bool swapped) {
    if (!check_args(fn, ctx, a, split ? b : a) || !check_float(fn, a, "a")) return nullptr;
    TSR_IMPL_REQUIRE((int)op >= 0 && op < TSR_GLU_OP_COUNT, "%s: unknown glu op %d", fn, (int)op);
    struct tsr_tensor * r = nullptr;
    if (split) {
        TSR_IMPL_REQUIRE(tsr_are_same_shape(a, b) && a->type == b->type, "%s: %s and %s differ in shape or type", fn,
                         TSR_IMPL_D(a), TSR_IMPL_D(b));
        r = tsr_dup_tensor(ctx, a);
    } else {
        TSR_IMPL_REQUIRE(a->ne[0] % 2 == 0, "%s: ne0 of %s must be even", fn, TSR_IMPL_D(a));
        TSR_IMPL_REQUIRE(tsr_is_contiguous_rows(a), "%s: rows of %s must be contiguous", fn, TSR_IMPL_D(a));
        const int64_t ne[4] = {a->ne[0] / 2, a->ne[1], a->ne[2], a->ne[3]};
        r = tsr_new_tensor(ctx, a->type, 4, ne);
    }
    if (!r) return nullptr;
    tsr_set_op_params_i32(r, 0, (int32_t)op);
    tsr_set_op_params_i32(r, 1, swapped ? 1 : 0);
    return op_result(r, TSR_OP_GLU, a, split ? b : nullptr);
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_swiglu(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_impl::glu_op("tsr_swiglu", ctx, a, nullptr, false, TSR_GLU_OP_SWIGLU, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_swiglu_split(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    return tsr_impl::glu_op("tsr_swiglu_split", ctx, a, b, true, TSR_GLU_OP_SWIGLU, false);
}

/* ---- reductions -------------------------------------------------------------------------- */

/* TSR_OP_SUM: no op_params. a f32/f16/bf16 -> [1] of a's type. */
TSR_API_IMPL struct tsr_tensor * tsr_sum(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!tsr_impl::check_args("tsr_sum", ctx, a) || !tsr_impl::check_float("tsr_sum", a, "a")) return nullptr;
    return tsr_impl::op_result(tsr_new_tensor_1d(ctx, a->type, 1), TSR_OP_SUM, a);
}
/* TSR_OP_SUM_ROWS: no op_params. -> [1, ne1, ne2, ne3] of a's type. */
TSR_API_IMPL struct tsr_tensor * tsr_sum_rows(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!tsr_impl::check_args("tsr_sum_rows", ctx, a) || !tsr_impl::check_float("tsr_sum_rows", a, "a")) return nullptr;
    return tsr_impl::op_result(tsr_new_tensor_4d(ctx, a->type, 1, a->ne[1], a->ne[2], a->ne[3]), TSR_OP_SUM_ROWS, a);
}
/* TSR_OP_MEAN: no op_params. -> F32 [1, ne1, ne2, ne3]. */
TSR_API_IMPL struct tsr_tensor * tsr_mean(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!tsr_impl::check_args("tsr_mean", ctx, a) || !tsr_impl::check_float("tsr_mean", a, "a")) return nullptr;
    return tsr_impl::op_result(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 1, a->ne[1], a->ne[2], a->ne[3]), TSR_OP_MEAN, a);
}
/* TSR_OP_ARGMAX: no op_params. a 2-D (ne2 = ne3 = 1) f32 -> I32 [ne1]. */
TSR_API_IMPL struct tsr_tensor * tsr_argmax(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!tsr_impl::check_args("tsr_argmax", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "tsr_argmax: %s must be f32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->ne[2] == 1 && a->ne[3] == 1, "tsr_argmax: %s must be a matrix", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->ne[0] <= INT32_MAX, "tsr_argmax: rows of %s are too long for i32 indices", TSR_IMPL_D(a));
    return tsr_impl::op_result(tsr_new_tensor_1d(ctx, TSR_TYPE_I32, a->ne[1]), TSR_OP_ARGMAX, a);
}

/* ---- shape ops ----------------------------------------------------------------------------- */

/* TSR_OP_REPEAT: no op_params. a tiled to b's shape (each of b's dims a multiple of a's);
 * result of a's type, src0 = a only (b just gives the shape). */
TSR_API_IMPL struct tsr_tensor * tsr_repeat(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!tsr_impl::check_args("tsr_repeat", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(tsr_can_repeat(a, b), "tsr_repeat: %s cannot be tiled to %s", TSR_IMPL_D(a), TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(!tsr_is_quantized(a->type), "tsr_repeat: quantized %s", TSR_IMPL_D(a));
    return tsr_impl::op_result(tsr_new_tensor(ctx, a->type, TSR_MAX_DIMS, b->ne), TSR_OP_REPEAT, a);
}

/* TSR_OP_CONCAT: i32 dim (slot 0). a, b same type, equal in every dim but dim;
 * result ne[dim] = a.ne[dim] + b.ne[dim]. src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_concat(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int dim) {
    if (!tsr_impl::check_args("tsr_concat", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(dim >= 0 && dim < TSR_MAX_DIMS, "tsr_concat: dim %d out of range [0, 4)", dim);
    TSR_IMPL_REQUIRE(a->type == b->type && !tsr_is_quantized(a->type), "tsr_concat: types of %s and %s differ (or are quantized)",
                     TSR_IMPL_D(a), TSR_IMPL_D(b));
    int64_t ne[4];
    for (int d = 0; d < 4; d++) {
        if (d == dim) {
            ne[d] = a->ne[d] + b->ne[d];
        } else {
            TSR_IMPL_REQUIRE(a->ne[d] == b->ne[d], "tsr_concat: %s and %s differ in dim %d (concatenating along %d)",
                             TSR_IMPL_D(a), TSR_IMPL_D(b), d, dim);
            ne[d] = a->ne[d];
        }
    }
    struct tsr_tensor * r = tsr_new_tensor(ctx, a->type, 4, ne);
    if (r) tsr_set_op_params_i32(r, 0, dim);
    return tsr_impl::op_result(r, TSR_OP_CONCAT, a, b);
}

/* ---- normalization ------------------------------------------------------------------------- */

TSR_IMPL_NS_BEGIN
/* TSR_OP_NORM / TSR_OP_RMS_NORM: f32 eps (slot 0). a f32, result like a. */
static inline struct tsr_tensor * norm_impl(const char * fn, enum tsr_op op, struct tsr_context * ctx,
                                            struct tsr_tensor * a, float eps) {
    if (!check_args(fn, ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "%s: %s must be f32", fn, TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(eps >= 0.0f, "%s: eps %g must be >= 0", fn, (double)eps);
    struct tsr_tensor * r = tsr_dup_tensor(ctx, a);
    if (r) tsr_set_op_params_f32(r, 0, eps);
    return op_result(r, op, a);
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_norm(struct tsr_context * ctx, struct tsr_tensor * a, float eps) {
    return tsr_impl::norm_impl("tsr_norm", TSR_OP_NORM, ctx, a, eps);
}
TSR_API_IMPL struct tsr_tensor * tsr_rms_norm(struct tsr_context * ctx, struct tsr_tensor * a, float eps) {
    return tsr_impl::norm_impl("tsr_rms_norm", TSR_OP_RMS_NORM, ctx, a, eps);
}

/* TSR_OP_GROUP_NORM: i32 n_groups (slot 0), f32 eps (slot 1). a f32 [W, H, C, N],
 * 1 <= n_groups <= C; result like a. */
TSR_API_IMPL struct tsr_tensor * tsr_group_norm(struct tsr_context * ctx, struct tsr_tensor * a, int n_groups, float eps) {
    if (!tsr_impl::check_args("tsr_group_norm", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "tsr_group_norm: %s must be f32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(n_groups >= 1 && n_groups <= a->ne[2], "tsr_group_norm: n_groups %d out of range [1, %lld] for %s",
                     n_groups, (long long)a->ne[2], TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(eps >= 0.0f, "tsr_group_norm: eps %g must be >= 0", (double)eps);
    struct tsr_tensor * r = tsr_dup_tensor(ctx, a);
    if (r) {
        tsr_set_op_params_i32(r, 0, n_groups);
        tsr_set_op_params_f32(r, 1, eps);
    }
    return tsr_impl::op_result(r, TSR_OP_GROUP_NORM, a);
}

/* ---- matrix products ----------------------------------------------------------------------- */

/* TSR_OP_MUL_MAT: no op_params. a [K, M, A2, A3] any type (not transposed), b [K, N, B2, B3]
 * f32 (or a's type when a is not quantized), B2 % A2 == 0, B3 % A3 == 0.
 * Result F32 [M, N, B2, B3]; src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_mul_mat(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!tsr_impl::check_args("tsr_mul_mat", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(a->ne[0] == b->ne[0] && a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 &&
                         b->ne[3] % a->ne[3] == 0,
                     "tsr_mul_mat: cannot multiply %s by %s (need a.ne0 == b.ne0 and b.ne2, b.ne3 multiples of a's)",
                     TSR_IMPL_D(a), TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(!tsr_is_transposed(a), "tsr_mul_mat: a %s must not be transposed", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->type != TSR_TYPE_I32, "tsr_mul_mat: a %s must not be i32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(b->type == TSR_TYPE_F32 || (b->type == a->type && tsr_impl::is_float_type(b->type)),
                     "tsr_mul_mat: b %s must be f32 (or a's float type %s)", TSR_IMPL_D(b), tsr_type_name(a->type));
    return tsr_impl::op_result(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, a->ne[1], b->ne[1], b->ne[2], b->ne[3]),
                               TSR_OP_MUL_MAT, a, b);
}

/* TSR_OP_OUT_PROD: no op_params. a [M, K, A2, A3], b [N, K, B2, B3] f32, B2 % A2 == 0,
 * B3 % A3 == 0 -> F32 [M, N, B2, B3]; src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_out_prod(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!tsr_impl::check_args("tsr_out_prod", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(a->ne[1] == b->ne[1] && a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 &&
                         b->ne[3] % a->ne[3] == 0,
                     "tsr_out_prod: cannot multiply %s by %s (need a.ne1 == b.ne1 and b.ne2, b.ne3 multiples of a's)",
                     TSR_IMPL_D(a), TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(!tsr_is_transposed(a), "tsr_out_prod: a %s must not be transposed", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->type != TSR_TYPE_I32 && b->type == TSR_TYPE_F32, "tsr_out_prod: unsupported types %s, %s",
                     TSR_IMPL_D(a), TSR_IMPL_D(b));
    return tsr_impl::op_result(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, a->ne[0], b->ne[0], b->ne[2], b->ne[3]),
                               TSR_OP_OUT_PROD, a, b);
}

/* ---- rows ------------------------------------------------------------------------------------ */

/* TSR_OP_GET_ROWS: no op_params. a [n, rows, A2, A3] any type, b I32 [k, A2, A3, 1] row
 * indices -> [n, k, A2, A3], F32 (I32 when a is I32). src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_get_rows(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!tsr_impl::check_args("tsr_get_rows", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(b->type == TSR_TYPE_I32, "tsr_get_rows: indices %s must be i32", TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(a->ne[2] == b->ne[1] && a->ne[3] == b->ne[2] && b->ne[3] == 1,
                     "tsr_get_rows: indices %s do not match %s (need b.ne1 == a.ne2, b.ne2 == a.ne3, b.ne3 == 1)",
                     TSR_IMPL_D(b), TSR_IMPL_D(a));
    const enum tsr_type type = a->type == TSR_TYPE_I32 ? TSR_TYPE_I32 : TSR_TYPE_F32;
    return tsr_impl::op_result(tsr_new_tensor_4d(ctx, type, a->ne[0], b->ne[0], b->ne[1], b->ne[2]), TSR_OP_GET_ROWS, a, b);
}

/* TSR_OP_SET_ROWS: no op_params. a dst [n, rows, A2, A3] (f32/f16/bf16/q8_0/q4_0), b src
 * F32 [n, k, A2, A3], c I32 [k, C1, C2, 1] with A2 % C1 == 0 and A3 % C2 == 0: row i of
 * b goes to row c[i] of a. Result: a view of a; src0 = b, src1 = c, src2 = a (ggml's
 * order: the source first). */
TSR_API_IMPL struct tsr_tensor * tsr_set_rows(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                              struct tsr_tensor * c) {
    if (!tsr_impl::check_args("tsr_set_rows", ctx, a, b, c)) return nullptr;
    TSR_IMPL_REQUIRE(b->type == TSR_TYPE_F32, "tsr_set_rows: source rows %s must be f32", TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(c->type == TSR_TYPE_I32, "tsr_set_rows: indices %s must be i32", TSR_IMPL_D(c));
    TSR_IMPL_REQUIRE(a->type != TSR_TYPE_I32, "tsr_set_rows: destination %s must not be i32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->ne[0] == b->ne[0] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3],
                     "tsr_set_rows: source %s does not match destination %s", TSR_IMPL_D(b), TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(b->ne[1] == c->ne[0] && c->ne[1] > 0 && c->ne[2] > 0 && b->ne[2] % c->ne[1] == 0 &&
                         b->ne[3] % c->ne[2] == 0 && c->ne[3] == 1,
                     "tsr_set_rows: indices %s do not match source %s", TSR_IMPL_D(c), TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(tsr_is_contiguous_rows(a) && tsr_is_contiguous_rows(b), "tsr_set_rows: rows must be contiguous");
    return tsr_impl::op_result(tsr_view_tensor(ctx, a), TSR_OP_SET_ROWS, b, c, a);
}

/* TSR_OP_DIAG_MASK_INF: i32 n_past (slot 0). a f32, result like a: a[i, j] = -inf where
 * i > n_past + j. */
TSR_API_IMPL struct tsr_tensor * tsr_diag_mask_inf(struct tsr_context * ctx, struct tsr_tensor * a, int n_past) {
    if (!tsr_impl::check_args("tsr_diag_mask_inf", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "tsr_diag_mask_inf: %s must be f32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(n_past >= 0, "tsr_diag_mask_inf: n_past %d < 0", n_past);
    struct tsr_tensor * r = tsr_dup_tensor(ctx, a);
    if (r) tsr_set_op_params_i32(r, 0, n_past);
    return tsr_impl::op_result(r, TSR_OP_DIAG_MASK_INF, a);
}

/* TSR_OP_SOFT_MAX: f32 scale (slot 0), f32 max_bias (slot 1). a f32 contiguous; mask
 * (src1, may be NULL) f32/f16 contiguous [a.ne0, >= a.ne1, M2, M3] with a.ne2 % M2 == 0
 * and a.ne3 % M3 == 0; max_bias > 0 needs a mask. Result like a; src0 = a, src1 = mask. */
TSR_API_IMPL struct tsr_tensor * tsr_soft_max_ext(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * mask,
                                                  float scale, float max_bias) {
    if (!tsr_impl::check_args("tsr_soft_max_ext", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "tsr_soft_max_ext: %s must be f32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(tsr_is_contiguous(a), "tsr_soft_max_ext: %s must be contiguous", TSR_IMPL_D(a));
    if (mask) {
        TSR_IMPL_REQUIRE(mask->type == TSR_TYPE_F32 || mask->type == TSR_TYPE_F16,
                         "tsr_soft_max_ext: mask %s must be f32 or f16", TSR_IMPL_D(mask));
        TSR_IMPL_REQUIRE(tsr_is_contiguous(mask), "tsr_soft_max_ext: mask %s must be contiguous", TSR_IMPL_D(mask));
        TSR_IMPL_REQUIRE(mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1] && mask->ne[2] > 0 && mask->ne[3] > 0 &&
                             a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0,
                         "tsr_soft_max_ext: mask %s does not fit %s (need ne0 equal, ne1 >= a's, a.ne2/ne3 multiples)",
                         TSR_IMPL_D(mask), TSR_IMPL_D(a));
    }
    TSR_IMPL_REQUIRE(!(max_bias > 0.0f) || mask, "tsr_soft_max_ext: max_bias %g > 0 needs a mask", (double)max_bias);
    struct tsr_tensor * r = tsr_dup_tensor(ctx, a);
    if (r) {
        tsr_set_op_params_f32(r, 0, scale);
        tsr_set_op_params_f32(r, 1, max_bias);
    }
    return tsr_impl::op_result(r, TSR_OP_SOFT_MAX, a, mask);
}
TSR_API_IMPL struct tsr_tensor * tsr_soft_max(struct tsr_context * ctx, struct tsr_tensor * a) {
    return tsr_soft_max_ext(ctx, a, nullptr, 1.0f, 0.0f);
}

/* TSR_OP_ROPE: i32 n_past (slot 0, always 0), n_dims (1), mode (2), n_ctx (3, 0),
 * n_ctx_orig (4); f32 freq_base (5), freq_scale (6), ext_factor (7), attn_factor (8),
 * beta_fast (9), beta_slow (10). a f32/f16 [head_dim, n_head, n_tokens, 1+], b I32
 * positions [n_tokens], c (may be NULL) f32 frequency factors [>= n_dims/2].
 * 0 < n_dims <= head_dim, n_dims even. Result like a; src0 = a, src1 = b, src2 = c. */
TSR_API_IMPL struct tsr_tensor * tsr_rope_ext(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                              struct tsr_tensor * c, int n_dims, int mode, int n_ctx_orig,
                                              float freq_base, float freq_scale, float ext_factor, float attn_factor,
                                              float beta_fast, float beta_slow) {
    if (!tsr_impl::check_args("tsr_rope_ext", ctx, a, b)) return nullptr;
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16, "tsr_rope_ext: %s must be f32 or f16", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(b->type == TSR_TYPE_I32 && b->ne[1] == 1 && b->ne[2] == 1 && b->ne[3] == 1,
                     "tsr_rope_ext: positions %s must be an i32 vector", TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(b->ne[0] == a->ne[2], "tsr_rope_ext: %lld positions for %s (need one per token, a.ne2)",
                     (long long)b->ne[0], TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(mode == TSR_ROPE_TYPE_NORMAL || mode == TSR_ROPE_TYPE_NEOX, "tsr_rope_ext: unknown mode %d", mode);
    TSR_IMPL_REQUIRE(n_dims > 0 && n_dims % 2 == 0 && n_dims <= a->ne[0],
                     "tsr_rope_ext: n_dims %d must be even and in (0, %lld]", n_dims, (long long)a->ne[0]);
    if (c) {
        TSR_IMPL_REQUIRE(c->type == TSR_TYPE_F32 && c->ne[0] >= n_dims / 2,
                         "tsr_rope_ext: frequency factors %s must be f32 with >= %d elements", TSR_IMPL_D(c), n_dims / 2);
    }
    struct tsr_tensor * r = tsr_dup_tensor(ctx, a);
    if (!r) return nullptr;
    int32_t params[11] = {0, n_dims, mode, 0, n_ctx_orig};
    memcpy(params + 5, &freq_base, sizeof(float));
    memcpy(params + 6, &freq_scale, sizeof(float));
    memcpy(params + 7, &ext_factor, sizeof(float));
    memcpy(params + 8, &attn_factor, sizeof(float));
    memcpy(params + 9, &beta_fast, sizeof(float));
    memcpy(params + 10, &beta_slow, sizeof(float));
    tsr_set_op_params(r, params, sizeof(params));
    return tsr_impl::op_result(r, TSR_OP_ROPE, a, b, c);
}
/* ggml_rope: freq_base 10000, freq_scale 1, ext_factor 0, attn_factor 1, beta 0/0, n_ctx_orig 0. */
TSR_API_IMPL struct tsr_tensor * tsr_rope(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int n_dims, int mode) {
    return tsr_rope_ext(ctx, a, b, nullptr, n_dims, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
}

/* ---- convolution and friends --------------------------------------------------------------- */

TSR_IMPL_NS_BEGIN
static inline int64_t conv_out_size(int64_t ins, int64_t ks, int s, int p, int d) {
    return (ins + 2 * p - (int64_t)d * (ks - 1) - 1) / s + 1;
}
static inline bool check_conv_params(const char * fn, int s0, int s1, int p0, int p1, int d0, int d1) {
    if (s0 <= 0 || s1 <= 0 || d0 <= 0 || d1 <= 0 || p0 < 0 || p1 < 0) {
        return tsr_set_error("%s: need strides and dilations > 0, paddings >= 0 (s %d %d, p %d %d, d %d %d)", fn, s0, s1,
                             p0, p1, d0, d1);
    }
    return true;
}
TSR_IMPL_NS_END

/* TSR_OP_IM2COL: i32 s0, s1, p0, p1, d0, d1, is_2D (slots 0..6). a kernel [KW, KH, IC, OC]
 * (only its shape is used), b input [W, H, IC, N] (2-D) or [W, IC, N] (1-D, a [KW, IC, OC]).
 * Result dst_type (f32/f16) [IC*KH*KW, OW, OH, N] (2-D) or [IC*KW, OW, N, 1] (1-D);
 * src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_im2col(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int s0,
                                            int s1, int p0, int p1, int d0, int d1, bool is_2D, enum tsr_type dst_type) {
    if (!tsr_impl::check_args("tsr_im2col", ctx, a, b)) return nullptr;
    if (!tsr_impl::check_conv_params("tsr_im2col", s0, is_2D ? s1 : 1, p0, is_2D ? p1 : 0, d0, is_2D ? d1 : 1)) return nullptr;
    TSR_IMPL_REQUIRE(dst_type == TSR_TYPE_F32 || dst_type == TSR_TYPE_F16, "tsr_im2col: dst_type %s must be f32 or f16",
                     tsr_type_name(dst_type));
    TSR_IMPL_REQUIRE(tsr_impl::is_float_type(b->type), "tsr_im2col: input %s must be f32, f16 or bf16", TSR_IMPL_D(b));
    if (is_2D) {
        TSR_IMPL_REQUIRE(a->ne[2] == b->ne[2], "tsr_im2col: kernel %s and input %s differ in channels", TSR_IMPL_D(a), TSR_IMPL_D(b));
    } else {
        TSR_IMPL_REQUIRE(a->ne[1] == b->ne[1] && b->ne[3] == 1, "tsr_im2col: kernel %s and input %s differ in channels",
                         TSR_IMPL_D(a), TSR_IMPL_D(b));
    }
    const int64_t OH = is_2D ? tsr_impl::conv_out_size(b->ne[1], a->ne[1], s1, p1, d1) : 1;
    const int64_t OW = tsr_impl::conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    TSR_IMPL_REQUIRE(OW > 0 && OH > 0, "tsr_im2col: input %s is too small for kernel %s (output %lld x %lld)", TSR_IMPL_D(b),
                     TSR_IMPL_D(a), (long long)OW, (long long)OH);
    const int64_t ne[4] = {
        is_2D ? a->ne[2] * a->ne[1] * a->ne[0] : a->ne[1] * a->ne[0],
        OW,
        is_2D ? OH : b->ne[2],
        is_2D ? b->ne[3] : 1,
    };
    struct tsr_tensor * r = tsr_new_tensor(ctx, dst_type, 4, ne);
    if (!r) return nullptr;
    const int32_t params[7] = {s0, s1, p0, p1, d0, d1, is_2D ? 1 : 0};
    tsr_set_op_params(r, params, sizeof(params));
    return tsr_impl::op_result(r, TSR_OP_IM2COL, a, b);
}

/* TSR_OP_CONV_2D: i32 s0, s1, p0, p1, d0, d1 (slots 0..5). a kernel [KW, KH, IC, OC]
 * (f32/f16), b input [W, H, IC, N] (f32) -> F32 [OW, OH, OC, N], OW = (W + 2*p0 -
 * d0*(KW-1) - 1)/s0 + 1 (OH likewise). src0 = a, src1 = b. */
TSR_API_IMPL struct tsr_tensor * tsr_conv_2d(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b, int s0,
                                             int s1, int p0, int p1, int d0, int d1) {
    if (!tsr_impl::check_args("tsr_conv_2d", ctx, a, b)) return nullptr;
    if (!tsr_impl::check_conv_params("tsr_conv_2d", s0, s1, p0, p1, d0, d1)) return nullptr;
    TSR_IMPL_REQUIRE(tsr_impl::is_float_type(a->type) && tsr_impl::is_float_type(b->type),
                     "tsr_conv_2d: kernel %s and input %s must be float types", TSR_IMPL_D(a), TSR_IMPL_D(b));
    TSR_IMPL_REQUIRE(a->ne[2] == b->ne[2], "tsr_conv_2d: kernel %s has %lld input channels, input %s has %lld", TSR_IMPL_D(a),
                     (long long)a->ne[2], TSR_IMPL_D(b), (long long)b->ne[2]);
    const int64_t OW = tsr_impl::conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    const int64_t OH = tsr_impl::conv_out_size(b->ne[1], a->ne[1], s1, p1, d1);
    TSR_IMPL_REQUIRE(OW > 0 && OH > 0, "tsr_conv_2d: input %s is too small for kernel %s (output %lld x %lld)", TSR_IMPL_D(b),
                     TSR_IMPL_D(a), (long long)OW, (long long)OH);
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, OW, OH, a->ne[3], b->ne[3]);
    if (!r) return nullptr;
    const int32_t params[6] = {s0, s1, p0, p1, d0, d1};
    tsr_set_op_params(r, params, sizeof(params));
    return tsr_impl::op_result(r, TSR_OP_CONV_2D, a, b);
}

/* TSR_OP_POOL_2D: i32 op (slot 0, enum tsr_op_pool), k0, k1, s0, s1 (1..4), f32 p0, p1
 * (5, 6). a [W, H, C, N] f32/f16 -> F32 [OW, OH, C, N], OW = (W + 2*p0 - k0)/s0 + 1
 * (computed in float and truncated, as ggml). src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_pool_2d(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_op_pool op, int k0,
                                             int k1, int s0, int s1, float p0, float p1) {
    if (!tsr_impl::check_args("tsr_pool_2d", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE((int)op >= 0 && op < TSR_OP_POOL_COUNT, "tsr_pool_2d: unknown pool op %d", (int)op);
    TSR_IMPL_REQUIRE(k0 > 0 && k1 > 0 && s0 > 0 && s1 > 0 && p0 >= 0.0f && p1 >= 0.0f,
                     "tsr_pool_2d: need kernel and stride > 0, padding >= 0 (k %d %d, s %d %d, p %g %g)", k0, k1, s0, s1,
                     (double)p0, (double)p1);
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16, "tsr_pool_2d: %s must be f32 or f16", TSR_IMPL_D(a));
    const float fw = ((float)a->ne[0] + 2.0f * p0 - (float)k0) / (float)s0 + 1.0f;
    const float fh = ((float)a->ne[1] + 2.0f * p1 - (float)k1) / (float)s1 + 1.0f;
    TSR_IMPL_REQUIRE(fw >= 1.0f && fh >= 1.0f, "tsr_pool_2d: input %s is smaller than the %dx%d window", TSR_IMPL_D(a), k0, k1);
    /* an infinite or huge padding: the float size would not convert to int64 */
    const float max_side = (float)((int64_t)1 << 56);
    TSR_IMPL_REQUIRE(fw <= max_side && fh <= max_side, "tsr_pool_2d: padding %g %g makes the output of %s too large (%g x %g)",
                     (double)p0, (double)p1, TSR_IMPL_D(a), (double)fw, (double)fh);
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, (int64_t)fw, (int64_t)fh, a->ne[2], a->ne[3]);
    if (!r) return nullptr;
    const int32_t params[5] = {(int32_t)op, k0, k1, s0, s1};
    tsr_set_op_params(r, params, sizeof(params));
    tsr_set_op_params_f32(r, 5, p0);
    tsr_set_op_params_f32(r, 6, p1);
    return tsr_impl::op_result(r, TSR_OP_POOL_2D, a);
}

/* TSR_OP_UPSCALE: i32 mode (slot 0, enum tsr_scale_mode). a f32/f16 -> [ne0, ne1, ne2, ne3]
 * of a's type (each > 0; downscaling allowed). src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_upscale_ext(struct tsr_context * ctx, struct tsr_tensor * a, int ne0, int ne1, int ne2,
                                                 int ne3, enum tsr_scale_mode mode) {
    if (!tsr_impl::check_args("tsr_upscale", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(mode == TSR_SCALE_MODE_NEAREST || mode == TSR_SCALE_MODE_BILINEAR, "tsr_upscale: unknown mode %d", (int)mode);
    TSR_IMPL_REQUIRE(ne0 > 0 && ne1 > 0 && ne2 > 0 && ne3 > 0, "tsr_upscale: target shape [%d, %d, %d, %d] must be positive",
                     ne0, ne1, ne2, ne3);
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16, "tsr_upscale: %s must be f32 or f16", TSR_IMPL_D(a));
    /* every result element samples the source: an empty one has nothing to give */
    TSR_IMPL_REQUIRE(tsr_nelements(a) > 0, "tsr_upscale: %s has no elements to scale to [%d, %d, %d, %d]", TSR_IMPL_D(a),
                     ne0, ne1, ne2, ne3);
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, a->type, ne0, ne1, ne2, ne3);
    if (r) tsr_set_op_params_i32(r, 0, (int32_t)mode);
    return tsr_impl::op_result(r, TSR_OP_UPSCALE, a);
}
TSR_API_IMPL struct tsr_tensor * tsr_upscale(struct tsr_context * ctx, struct tsr_tensor * a, int scale_factor,
                                             enum tsr_scale_mode mode) {
    if (!a) TSR_IMPL_FAIL("tsr_upscale: NULL first operand");
    TSR_IMPL_REQUIRE(scale_factor >= 1 && a->ne[0] * scale_factor <= INT32_MAX && a->ne[1] * scale_factor <= INT32_MAX,
                     "tsr_upscale: scale factor %d out of range for %s", scale_factor, TSR_IMPL_D(a));
    return tsr_upscale_ext(ctx, a, (int)(a->ne[0] * scale_factor), (int)(a->ne[1] * scale_factor), (int)a->ne[2],
                           (int)a->ne[3], mode);
}

/* TSR_OP_PAD: i32 p0, p1, p2, p3 (slots 0..3), zeros appended at the end of each dim.
 * a f32/f16 -> [ne0+p0, ne1+p1, ne2+p2, ne3+p3] of a's type. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_pad(struct tsr_context * ctx, struct tsr_tensor * a, int p0, int p1, int p2, int p3) {
    if (!tsr_impl::check_args("tsr_pad", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(p0 >= 0 && p1 >= 0 && p2 >= 0 && p3 >= 0, "tsr_pad: paddings (%d, %d, %d, %d) must be >= 0", p0, p1, p2, p3);
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32 || a->type == TSR_TYPE_F16, "tsr_pad: %s must be f32 or f16", TSR_IMPL_D(a));
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, a->type, a->ne[0] + p0, a->ne[1] + p1, a->ne[2] + p2, a->ne[3] + p3);
    if (r) {
        const int32_t params[4] = {p0, p1, p2, p3};
        tsr_set_op_params(r, params, sizeof(params));
    }
    return tsr_impl::op_result(r, TSR_OP_PAD, a);
}

/* TSR_OP_ARGSORT: i32 order (slot 0, enum tsr_sort_order). a f32 -> I32 of a's shape:
 * per row, the indices that sort it. src0 = a. */
TSR_API_IMPL struct tsr_tensor * tsr_argsort(struct tsr_context * ctx, struct tsr_tensor * a, enum tsr_sort_order order) {
    if (!tsr_impl::check_args("tsr_argsort", ctx, a)) return nullptr;
    TSR_IMPL_REQUIRE(order == TSR_SORT_ORDER_ASC || order == TSR_SORT_ORDER_DESC, "tsr_argsort: unknown order %d", (int)order);
    TSR_IMPL_REQUIRE(a->type == TSR_TYPE_F32, "tsr_argsort: %s must be f32", TSR_IMPL_D(a));
    TSR_IMPL_REQUIRE(a->ne[0] <= INT32_MAX, "tsr_argsort: rows of %s are too long for i32 indices", TSR_IMPL_D(a));
    struct tsr_tensor * r = tsr_new_tensor(ctx, TSR_TYPE_I32, TSR_MAX_DIMS, a->ne);
    if (r) tsr_set_op_params_i32(r, 0, (int32_t)order);
    return tsr_impl::op_result(r, TSR_OP_ARGSORT, a);
}

/* TSR_OP_FLASH_ATTN_EXT: f32 scale (slot 0), f32 max_bias (1), f32 logit_softcap (2),
 * i32 precision (3, 0 = default). q f32 [D, n_q, H, B]; k [D, n_kv, H_kv, B] and
 * v [Dv, n_kv, H_kv, B] f32/f16/bf16/q8_0/q4_0 with H % H_kv == 0 (as ggml: same B);
 * mask (may be NULL) f16/f32 contiguous [n_kv, >= n_q, M2, M3], H % M2 == 0, B % M3 == 0;
 * max_bias > 0 needs a mask. Result F32 [Dv, H, n_q, B]; src0 = q, src1 = k, src2 = v,
 * src3 = mask. */
TSR_API_IMPL struct tsr_tensor * tsr_flash_attn_ext(struct tsr_context * ctx, struct tsr_tensor * q, struct tsr_tensor * k,
                                                    struct tsr_tensor * v, struct tsr_tensor * mask, float scale,
                                                    float max_bias, float logit_softcap) {
    if (!tsr_impl::check_args("tsr_flash_attn_ext", ctx, q, k, v)) return nullptr;
    TSR_IMPL_REQUIRE(q->type == TSR_TYPE_F32, "tsr_flash_attn_ext: q %s must be f32", TSR_IMPL_D(q));
    TSR_IMPL_REQUIRE(k->type != TSR_TYPE_I32 && v->type != TSR_TYPE_I32, "tsr_flash_attn_ext: k %s / v %s must not be i32",
                     TSR_IMPL_D(k), TSR_IMPL_D(v));
    TSR_IMPL_REQUIRE(k->ne[0] == q->ne[0] && k->ne[2] > 0 && q->ne[2] % k->ne[2] == 0 && q->ne[3] == k->ne[3],
                     "tsr_flash_attn_ext: k %s does not fit q %s (need same head size, q heads a multiple of k heads)",
                     TSR_IMPL_D(k), TSR_IMPL_D(q));
    TSR_IMPL_REQUIRE(v->ne[1] == k->ne[1] && v->ne[2] == k->ne[2] && v->ne[3] == k->ne[3],
                     "tsr_flash_attn_ext: v %s does not match k %s in n_kv and heads", TSR_IMPL_D(v), TSR_IMPL_D(k));
    if (mask) {
        TSR_IMPL_REQUIRE(mask->type == TSR_TYPE_F16 || mask->type == TSR_TYPE_F32,
                         "tsr_flash_attn_ext: mask %s must be f16 or f32", TSR_IMPL_D(mask));
        TSR_IMPL_REQUIRE(tsr_is_contiguous(mask), "tsr_flash_attn_ext: mask %s must be contiguous", TSR_IMPL_D(mask));
        TSR_IMPL_REQUIRE(mask->ne[0] == k->ne[1] && mask->ne[1] >= q->ne[1] && mask->ne[2] > 0 && mask->ne[3] > 0 &&
                             q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0,
                         "tsr_flash_attn_ext: mask %s does not fit q %s and k %s (need [n_kv, >= n_q, ...])",
                         TSR_IMPL_D(mask), TSR_IMPL_D(q), TSR_IMPL_D(k));
    }
    TSR_IMPL_REQUIRE(!(max_bias > 0.0f) || mask, "tsr_flash_attn_ext: max_bias %g > 0 needs a mask", (double)max_bias);
    struct tsr_tensor * r = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, v->ne[0], q->ne[2], q->ne[1], q->ne[3]);
    if (!r) return nullptr;
    tsr_set_op_params_f32(r, 0, scale);
    tsr_set_op_params_f32(r, 1, max_bias);
    tsr_set_op_params_f32(r, 2, logit_softcap);
    tsr_set_op_params_i32(r, 3, 0);
    return tsr_impl::op_result(r, TSR_OP_FLASH_ATTN_EXT, q, k, v, mask);
}

/* issue 17 part A */
#include "ops_unary_shape.inl"
#include "ops_custom.inl"

#undef TSR_IMPL_D
#undef TSR_IMPL_REQUIRE
#undef TSR_IMPL_FAIL
