/* ops_custom.inl - construction of user-defined ops (issue 17 part A): map_custom1/2/3 and
 * custom (ggml's callbacks). op_params hold tsr_impl::custom_params (core_internal.h):
 * the callback, n_tasks and userdata. Only the CPU backend runs them. Included by ops.inl. */

TSR_IMPL_NS_BEGIN
static inline bool check_custom(const char * fn, void (*fun)(void), int n_tasks) {
    if (!fun) return tsr_set_error("%s: NULL callback", fn);
    if (n_tasks != TSR_N_TASKS_MAX && n_tasks < 1) {
        return tsr_set_error("%s: n_tasks %d must be >= 1 or TSR_N_TASKS_MAX (%d)", fn, n_tasks, TSR_N_TASKS_MAX);
    }
    return true;
}

static inline struct tsr_tensor * with_custom_params(struct tsr_tensor * r, void (*fun)(void), int n_tasks, void * userdata) {
    if (!r) return nullptr;
    const custom_params cp = {fun, n_tasks, userdata};
    std::memcpy(r->op_params, &cp, sizeof(cp));
    return r;
}

/* MAP_CUSTOM1/2/3: result like a (inplace: a view of a); src0 = a, src1 = b, src2 = c. */
static inline struct tsr_tensor * map_custom(const char * fn, enum tsr_op op, struct tsr_context * ctx, struct tsr_tensor * a,
                                             struct tsr_tensor * b, struct tsr_tensor * c, void (*fun)(void), int n_tasks,
                                             void * userdata, bool inplace) {
    const int n_src = op == TSR_OP_MAP_CUSTOM1 ? 1 : op == TSR_OP_MAP_CUSTOM2 ? 2 : 3;
    if (!check_args(fn, ctx, a, n_src >= 2 ? b : a, n_src >= 3 ? c : a)) return nullptr;
    if (!check_custom(fn, fun, n_tasks)) return nullptr;
    struct tsr_tensor * r = with_custom_params(like(ctx, a, inplace), fun, n_tasks, userdata);
    return op_result(r, op, a, n_src >= 2 ? b : nullptr, n_src >= 3 ? c : nullptr);
}
TSR_IMPL_NS_END

#define TSR_IMPL_FN(f) reinterpret_cast<void (*)(void)>(f)
TSR_API_IMPL struct tsr_tensor * tsr_map_custom1(struct tsr_context * ctx, struct tsr_tensor * a, tsr_custom1_op_t fun,
                                                 int n_tasks, void * userdata) {
    return tsr_impl::map_custom("tsr_map_custom1", TSR_OP_MAP_CUSTOM1, ctx, a, nullptr, nullptr, TSR_IMPL_FN(fun), n_tasks,
                                userdata, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_map_custom1_inplace(struct tsr_context * ctx, struct tsr_tensor * a, tsr_custom1_op_t fun,
                                                         int n_tasks, void * userdata) {
    return tsr_impl::map_custom("tsr_map_custom1_inplace", TSR_OP_MAP_CUSTOM1, ctx, a, nullptr, nullptr, TSR_IMPL_FN(fun),
                                n_tasks, userdata, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_map_custom2(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                 tsr_custom2_op_t fun, int n_tasks, void * userdata) {
    return tsr_impl::map_custom("tsr_map_custom2", TSR_OP_MAP_CUSTOM2, ctx, a, b, nullptr, TSR_IMPL_FN(fun), n_tasks, userdata,
                                false);
}
TSR_API_IMPL struct tsr_tensor * tsr_map_custom2_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                         tsr_custom2_op_t fun, int n_tasks, void * userdata) {
    return tsr_impl::map_custom("tsr_map_custom2_inplace", TSR_OP_MAP_CUSTOM2, ctx, a, b, nullptr, TSR_IMPL_FN(fun), n_tasks,
                                userdata, true);
}
TSR_API_IMPL struct tsr_tensor * tsr_map_custom3(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                 struct tsr_tensor * c, tsr_custom3_op_t fun, int n_tasks, void * userdata) {
    return tsr_impl::map_custom("tsr_map_custom3", TSR_OP_MAP_CUSTOM3, ctx, a, b, c, TSR_IMPL_FN(fun), n_tasks, userdata, false);
}
TSR_API_IMPL struct tsr_tensor * tsr_map_custom3_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b,
                                                         struct tsr_tensor * c, tsr_custom3_op_t fun, int n_tasks,
                                                         void * userdata) {
    return tsr_impl::map_custom("tsr_map_custom3_inplace", TSR_OP_MAP_CUSTOM3, ctx, a, b, c, TSR_IMPL_FN(fun), n_tasks,
                                userdata, true);
}

TSR_IMPL_NS_BEGIN
/* CUSTOM's extra sources: n_args of them, none NULL. */
static inline bool check_custom_args(const char * fn, struct tsr_tensor ** args, int n_args, int max_args) {
    if (n_args < 0 || n_args > max_args) return tsr_set_error("%s: n_args %d out of range [0, %d]", fn, n_args, max_args);
    if (n_args > 0 && !args) return tsr_set_error("%s: NULL args with n_args %d", fn, n_args);
    for (int i = 0; i < n_args; ++i) {
        if (!args[i]) return tsr_set_error("%s: args[%d] is NULL", fn, i);
    }
    return true;
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_custom_4d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0, int64_t ne1,
                                               int64_t ne2, int64_t ne3, struct tsr_tensor ** args, int n_args,
                                               tsr_custom_op_t fun, int n_tasks, void * userdata) {
    TSR_IMPL_REQUIRE(ctx, "tsr_custom_4d: NULL context");
    if (!tsr_impl::check_custom_args("tsr_custom_4d", args, n_args, TSR_MAX_SRC)) return nullptr;
    if (!tsr_impl::check_custom("tsr_custom_4d", TSR_IMPL_FN(fun), n_tasks)) return nullptr;
    struct tsr_tensor * r = tsr_impl::with_custom_params(tsr_new_tensor_4d(ctx, type, ne0, ne1, ne2, ne3), TSR_IMPL_FN(fun),
                                                         n_tasks, userdata);
    if (!r) return nullptr;
    tsr_impl_set_op(r, TSR_OP_CUSTOM);
    for (int i = 0; i < n_args; ++i) r->src[i] = args[i];
    return r;
}
TSR_API_IMPL struct tsr_tensor * tsr_custom_inplace(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor ** args,
                                                    int n_args, tsr_custom_op_t fun, int n_tasks, void * userdata) {
    if (!tsr_impl::check_args("tsr_custom_inplace", ctx, a)) return nullptr;
    if (!tsr_impl::check_custom_args("tsr_custom_inplace", args, n_args, TSR_MAX_SRC - 1)) return nullptr;
    if (!tsr_impl::check_custom("tsr_custom_inplace", TSR_IMPL_FN(fun), n_tasks)) return nullptr;
    struct tsr_tensor * r = tsr_impl::with_custom_params(tsr_view_tensor(ctx, a), TSR_IMPL_FN(fun), n_tasks, userdata);
    if (!r) return nullptr;
    tsr_impl_set_op(r, TSR_OP_CUSTOM, a);
    for (int i = 0; i < n_args; ++i) r->src[i + 1] = args[i];
    return r;
}
#undef TSR_IMPL_FN
