/* tensor.inl - tensor creation, queries, names, flags, op params, element access, views. */

static inline size_t tsr_impl_nbytes(enum tsr_type type, const int64_t * ne, const size_t * nb) {
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (ne[i] <= 0) return 0;
    }
    const int64_t blck = tsr_blck_size(type);
    size_t n;
    if (blck == 1) {
        n = tsr_type_size(type);
        for (int i = 0; i < TSR_MAX_DIMS; i++) n += (size_t)(ne[i] - 1) * nb[i];
    } else {
        n = (size_t)(ne[0] / blck) * nb[0];
        for (int i = 1; i < TSR_MAX_DIMS; i++) n += (size_t)(ne[i] - 1) * nb[i];
    }
    return n;
}

/* tsr_impl_nbytes for user-given ne (>= 0) and strides: false when the extent overflows size_t. */
static inline bool tsr_impl_nbytes_checked(enum tsr_type type, const int64_t * ne, const size_t * nb, size_t * out) {
    *out = 0;
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (ne[i] <= 0) return true;
    }
    const int64_t blck = tsr_blck_size(type);
    size_t n = blck == 1 ? tsr_type_size(type) : 0;
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        const uint64_t k = (i == 0 && blck != 1) ? (uint64_t)(ne[0] / blck) : (uint64_t)(ne[i] - 1);
        if (k != 0 && nb[i] != 0 && k > SIZE_MAX / nb[i]) return false;
        const size_t term = (size_t)k * nb[i];
        if (term > SIZE_MAX - n) return false;
        n += term;
    }
    *out = n;
    return true;
}

/* Elements of a user-given shape of non-negative dims: false when there are more than
 * INT64_MAX (a shape with a 0 dim holds 0 elements, however large the others). */
static inline bool tsr_impl_count_elements(int n_dims, const int64_t * ne, int64_t * out) {
    *out = 0;
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] == 0) return true;
    }
    int64_t n = 1;
    for (int i = 0; i < n_dims; i++) {
        if (n > INT64_MAX / ne[i]) return false;
        n *= ne[i];
    }
    *out = n;
    return true;
}

static inline void tsr_impl_contiguous_nb(enum tsr_type type, const int64_t * ne, size_t * nb) {
    nb[0] = tsr_type_size(type);
    nb[1] = nb[0] * (size_t)(ne[0] / tsr_blck_size(type));
    for (int i = 2; i < TSR_MAX_DIMS; i++) nb[i] = nb[i - 1] * (size_t)ne[i - 1];
}

static inline tsr_impl_desc tsr_impl_describe(const struct tsr_tensor * t) {
    tsr_impl_desc d;
    if (!t) {
        snprintf(d.s, sizeof(d.s), "(null)");
    } else {
        snprintf(d.s, sizeof(d.s), "'%s' %s [%lld, %lld, %lld, %lld]", t->name, tsr_type_name(t->type),
                 (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    }
    return d;
}

static inline struct tsr_tensor * tsr_impl_new_tensor_nb(struct tsr_context * ctx, enum tsr_type type, int n_dims,
                                                         const int64_t * ne_in, const size_t * nb_in,
                                                         struct tsr_tensor * view_src, size_t view_offs) {
    if (!ctx) {
        tsr_set_error("tsr_new_tensor: NULL context");
        return nullptr;
    }
    if (!tsr_is_valid_type(type)) {
        tsr_set_error("tsr_new_tensor: unknown type %d", (int)type);
        return nullptr;
    }
    if (n_dims < 1 || n_dims > TSR_MAX_DIMS || !ne_in) {
        tsr_set_error("tsr_new_tensor: n_dims %d out of range [1, %d] (or NULL ne)", n_dims, TSR_MAX_DIMS);
        return nullptr;
    }
    int64_t ne[TSR_MAX_DIMS] = {1, 1, 1, 1};
    /* a 0 dim counts as 1 here: with it the tensor is empty, but tsr_nelements and
     * tsr_nrows still multiply the other dims, which must not overflow int64 */
    double extent = 1.0;
    for (int i = 0; i < n_dims; i++) {
        ne[i] = ne_in[i];
        if (ne[i] < 0 || ne[i] > TSR_IMPL_MAX_NE) {
            tsr_set_error("tsr_new_tensor: ne[%d] = %lld out of range", i, (long long)ne[i]);
            return nullptr;
        }
        extent *= (double)(ne[i] > 0 ? ne[i] : 1);
    }
    if (extent * (double)tsr_type_size(type) > 4.0e18) {
        tsr_set_error("tsr_new_tensor: shape [%lld, %lld, %lld, %lld] is too large (%.0f elements without its 0 dims)",
                      (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3], extent);
        return nullptr;
    }
    const int64_t blck = tsr_blck_size(type);
    if (!nb_in && ne[0] % blck != 0) {
        tsr_set_error("tsr_new_tensor: ne[0] = %lld is not a multiple of %s's block size %lld",
                      (long long)ne[0], tsr_type_name(type), (long long)blck);
        return nullptr;
    }
    size_t nb[TSR_MAX_DIMS];
    if (nb_in) {
        for (int i = 0; i < TSR_MAX_DIMS; i++) nb[i] = nb_in[i];
    } else {
        tsr_impl_contiguous_nb(type, ne, nb);
    }
    const size_t data_size = tsr_impl_nbytes(type, ne, nb);

    if (view_src) {
        if (view_src->view_src) { /* views of views point at the root source */
            view_offs += view_src->view_offs;
            view_src = view_src->view_src;
        }
        const size_t src_size = tsr_nbytes(view_src);
        if (data_size > 0 && (view_offs > src_size || data_size > src_size - view_offs)) {
            tsr_set_error("tsr view: view of %zu bytes at offset %zu lies outside its source %s (%zu bytes)",
                          data_size, view_offs, tsr_impl_describe(view_src).s, src_size);
            return nullptr;
        }
    }

    size_t obj_size = TSR_TENSOR_SIZE;
    const bool own_data = view_src == nullptr && !ctx->no_alloc;
    if (own_data) obj_size += TSR_PAD(data_size, TSR_MEM_ALIGN);

    struct tsr_object * obj = tsr_impl::new_object(ctx, TSR_OBJECT_TYPE_TENSOR, obj_size, "a tensor");
    if (!obj) return nullptr;

    struct tsr_tensor * t = (struct tsr_tensor *)((char *)ctx->mem_buffer + obj->offs);
    memset(t, 0, sizeof(*t));
    t->type = type;
    t->buffer = view_src ? view_src->buffer : nullptr;
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        t->ne[i] = ne[i];
        t->nb[i] = nb[i];
    }
    t->op = TSR_OP_NONE;
    t->view_src = view_src;
    t->view_offs = view_offs;
    if (view_src) {
        t->data = view_src->data ? (char *)view_src->data + view_offs : nullptr;
    } else if (own_data) {
        t->data = (char *)t + TSR_TENSOR_SIZE;
    }
    return t;
}

static inline struct tsr_tensor * tsr_impl_new_tensor_impl(struct tsr_context * ctx, enum tsr_type type, int n_dims,
                                                           const int64_t * ne, struct tsr_tensor * view_src, size_t view_offs) {
    return tsr_impl_new_tensor_nb(ctx, type, n_dims, ne, nullptr, view_src, view_offs);
}

static inline void tsr_impl_set_op(struct tsr_tensor * t, enum tsr_op op, struct tsr_tensor * s0,
                                   struct tsr_tensor * s1, struct tsr_tensor * s2, struct tsr_tensor * s3) {
    t->op = op;
    t->src[0] = s0;
    t->src[1] = s1;
    t->src[2] = s2;
    t->src[3] = s3;
}

TSR_API_IMPL struct tsr_tensor * tsr_new_tensor(struct tsr_context * ctx, enum tsr_type type, int n_dims, const int64_t * ne) {
    return tsr_impl_new_tensor_impl(ctx, type, n_dims, ne, nullptr, 0);
}
TSR_API_IMPL struct tsr_tensor * tsr_new_tensor_1d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0) {
    return tsr_new_tensor(ctx, type, 1, &ne0);
}
TSR_API_IMPL struct tsr_tensor * tsr_new_tensor_2d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return tsr_new_tensor(ctx, type, 2, ne);
}
TSR_API_IMPL struct tsr_tensor * tsr_new_tensor_3d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return tsr_new_tensor(ctx, type, 3, ne);
}
TSR_API_IMPL struct tsr_tensor * tsr_new_tensor_4d(struct tsr_context * ctx, enum tsr_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return tsr_new_tensor(ctx, type, 4, ne);
}

TSR_API_IMPL struct tsr_tensor * tsr_new_i32(struct tsr_context * ctx, int32_t value) {
    if (ctx && ctx->no_alloc) {
        tsr_set_error("tsr_new_i32: the context is no_alloc, a scalar needs data");
        return nullptr;
    }
    struct tsr_tensor * t = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 1);
    if (t) memcpy(t->data, &value, sizeof(value));
    return t;
}

TSR_API_IMPL struct tsr_tensor * tsr_new_f32(struct tsr_context * ctx, float value) {
    if (ctx && ctx->no_alloc) {
        tsr_set_error("tsr_new_f32: the context is no_alloc, a scalar needs data");
        return nullptr;
    }
    struct tsr_tensor * t = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 1);
    if (t) memcpy(t->data, &value, sizeof(value));
    return t;
}

TSR_API_IMPL struct tsr_tensor * tsr_dup_tensor(struct tsr_context * ctx, const struct tsr_tensor * src) {
    if (!src) {
        tsr_set_error("tsr_dup_tensor: NULL source");
        return nullptr;
    }
    return tsr_new_tensor(ctx, src->type, TSR_MAX_DIMS, src->ne);
}

/* ---- queries ---------------------------------------------------------------------------- */

TSR_API_IMPL int64_t tsr_nelements(const struct tsr_tensor * t) {
    return t ? t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] : 0;
}
TSR_API_IMPL int64_t tsr_nrows(const struct tsr_tensor * t) { return t ? t->ne[1] * t->ne[2] * t->ne[3] : 0; }
TSR_API_IMPL size_t tsr_nbytes(const struct tsr_tensor * t) { return t ? tsr_impl_nbytes(t->type, t->ne, t->nb) : 0; }
TSR_API_IMPL size_t tsr_element_size(const struct tsr_tensor * t) { return t ? tsr_type_size(t->type) : 0; }

TSR_API_IMPL int tsr_n_dims(const struct tsr_tensor * t) {
    if (!t) return 0;
    for (int i = TSR_MAX_DIMS - 1; i >= 1; --i) {
        if (t->ne[i] > 1) return i + 1;
    }
    return 1;
}

TSR_IMPL_NS_BEGIN
/* ggml_is_contiguous_n: dims <= n need not be contiguous with the next. */
static inline bool is_contiguous_n(const struct tsr_tensor * t, int n) {
    size_t next_nb = tsr_type_size(t->type);
    if (t->ne[0] != tsr_blck_size(t->type) && t->nb[0] != next_nb) return false;
    next_nb *= (size_t)(t->ne[0] / tsr_blck_size(t->type));
    for (int i = 1; i < TSR_MAX_DIMS; i++) {
        if (t->ne[i] != 1) {
            if (i > n) {
                if (t->nb[i] != next_nb) return false;
                next_nb *= (size_t)t->ne[i];
            } else {
                next_nb = (size_t)t->ne[i] * t->nb[i];
            }
        }
    }
    return true;
}
TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_is_contiguous(const struct tsr_tensor * t) { return t && tsr_impl::is_contiguous_n(t, 0); }
TSR_API_IMPL bool tsr_is_contiguous_rows(const struct tsr_tensor * t) {
    return t && (t->ne[0] == tsr_blck_size(t->type) || t->nb[0] == tsr_type_size(t->type));
}
TSR_API_IMPL bool tsr_is_transposed(const struct tsr_tensor * t) { return t && t->nb[0] > t->nb[1]; }
TSR_API_IMPL bool tsr_is_permuted(const struct tsr_tensor * t) {
    return t && (t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3]);
}
TSR_API_IMPL bool tsr_is_view(const struct tsr_tensor * t) { return t && t->view_src != nullptr; }
TSR_API_IMPL bool tsr_is_empty(const struct tsr_tensor * t) {
    if (!t) return true;
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (t->ne[i] == 0) return true;
    }
    return false;
}
TSR_API_IMPL bool tsr_is_scalar(const struct tsr_tensor * t) {
    return t && t->ne[0] == 1 && t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1;
}
TSR_API_IMPL bool tsr_are_same_shape(const struct tsr_tensor * a, const struct tsr_tensor * b) {
    if (!a || !b) return false;
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (a->ne[i] != b->ne[i]) return false;
    }
    return true;
}
TSR_API_IMPL bool tsr_are_same_stride(const struct tsr_tensor * a, const struct tsr_tensor * b) {
    if (!a || !b) return false;
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (a->nb[i] != b->nb[i]) return false;
    }
    return true;
}
TSR_API_IMPL bool tsr_can_repeat(const struct tsr_tensor * a, const struct tsr_tensor * b) {
    if (!a || !b) return false;
    if (tsr_is_empty(a)) return tsr_is_empty(b);
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (b->ne[i] % a->ne[i] != 0) return false;
    }
    return true;
}

/* ---- names, flags, op params ------------------------------------------------------------ */

TSR_API_IMPL const char * tsr_get_name(const struct tsr_tensor * t) { return t ? t->name : ""; }

TSR_API_IMPL struct tsr_tensor * tsr_set_name(struct tsr_tensor * t, const char * name) {
    if (!t) return nullptr;
    if (!name) name = "";
    size_t n = strlen(name);
    if (n >= sizeof(t->name)) n = sizeof(t->name) - 1;
    memmove(t->name, name, n);
    t->name[n] = '\0';
    return t;
}

TSR_API_IMPL struct tsr_tensor * tsr_format_name(struct tsr_tensor * t, const char * fmt, ...) {
    if (!t) return nullptr;
    if (!fmt) return tsr_set_name(t, "");
    char buf[TSR_MAX_NAME * 2];
    va_list args;
    va_start(args, fmt);
    const int n = vsnprintf(buf, sizeof(buf), fmt, args);
    va_end(args);
    if (n < 0) buf[0] = '\0';
    return tsr_set_name(t, buf);
}

TSR_API_IMPL void tsr_set_input(struct tsr_tensor * t) { if (t) t->flags |= TSR_TENSOR_FLAG_INPUT; }
TSR_API_IMPL void tsr_set_output(struct tsr_tensor * t) { if (t) t->flags |= TSR_TENSOR_FLAG_OUTPUT; }
TSR_API_IMPL void tsr_set_param(struct tsr_tensor * t) { if (t) t->flags |= TSR_TENSOR_FLAG_PARAM; }

TSR_API_IMPL bool tsr_set_op_params(struct tsr_tensor * t, const void * params, size_t size) {
    if (!t || (!params && size > 0)) return tsr_set_error("tsr_set_op_params: NULL tensor or params");
    if (size > TSR_MAX_OP_PARAMS) {
        return tsr_set_error("tsr_set_op_params: %zu bytes exceed TSR_MAX_OP_PARAMS (%d)", size, TSR_MAX_OP_PARAMS);
    }
    if (size > 0) memcpy(t->op_params, params, size);
    return true;
}

#define TSR_IMPL_N_OP_PARAMS ((uint32_t)(TSR_MAX_OP_PARAMS / sizeof(int32_t)))

TSR_API_IMPL int32_t tsr_get_op_params_i32(const struct tsr_tensor * t, uint32_t i) {
    return (t && i < TSR_IMPL_N_OP_PARAMS) ? t->op_params[i] : 0;
}
TSR_API_IMPL float tsr_get_op_params_f32(const struct tsr_tensor * t, uint32_t i) {
    if (!t || i >= TSR_IMPL_N_OP_PARAMS) return 0.0f;
    float f;
    memcpy(&f, &t->op_params[i], sizeof(f));
    return f;
}
TSR_API_IMPL void tsr_set_op_params_i32(struct tsr_tensor * t, uint32_t i, int32_t value) {
    if (t && i < TSR_IMPL_N_OP_PARAMS) t->op_params[i] = value;
}
TSR_API_IMPL void tsr_set_op_params_f32(struct tsr_tensor * t, uint32_t i, float value) {
    if (t && i < TSR_IMPL_N_OP_PARAMS) memcpy(&t->op_params[i], &value, sizeof(value));
}
TSR_API_IMPL enum tsr_unary_op tsr_get_unary_op(const struct tsr_tensor * t) {
    return (enum tsr_unary_op)tsr_get_op_params_i32(t, 0);
}
TSR_API_IMPL enum tsr_glu_op tsr_get_glu_op(const struct tsr_tensor * t) {
    return (enum tsr_glu_op)tsr_get_op_params_i32(t, 0);
}

/* ---- element access ----------------------------------------------------------------------- */

TSR_IMPL_NS_BEGIN
static inline bool elem_ptr(const struct tsr_tensor * t, const int64_t * idx, const char * fn, char ** out) {
    if (!t) return tsr_set_error("%s: NULL tensor", fn);
    if (!t->data) return tsr_set_error("%s: tensor %s has no host data", fn, tsr_impl_describe(t).s);
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        if (idx[i] < 0 || idx[i] >= t->ne[i]) {
            return tsr_set_error("%s: index %lld out of range [0, %lld) in dim %d of %s", fn, (long long)idx[i],
                                 (long long)t->ne[i], i, tsr_impl_describe(t).s);
        }
    }
    const int64_t blck = tsr_blck_size(t->type);
    char * p = (char *)t->data + (size_t)(idx[0] / blck) * t->nb[0];
    for (int i = 1; i < TSR_MAX_DIMS; i++) p += (size_t)idx[i] * t->nb[i];
    *out = p;
    return true;
}
static inline void unravel(const struct tsr_tensor * t, int64_t i, int64_t * idx) {
    idx[0] = i % t->ne[0]; i /= t->ne[0];
    idx[1] = i % t->ne[1]; i /= t->ne[1];
    idx[2] = i % t->ne[2]; i /= t->ne[2];
    idx[3] = i;
}
TSR_IMPL_NS_END

TSR_API_IMPL float tsr_get_f32_nd(const struct tsr_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t idx[4] = {i0, i1, i2, i3};
    char * p = nullptr;
    if (!tsr_impl::elem_ptr(t, idx, "tsr_get_f32_nd", &p)) return NAN;
    switch (t->type) {
        case TSR_TYPE_F32: { float v; memcpy(&v, p, 4); return v; }
        case TSR_TYPE_F16: { tsr_fp16_t v; memcpy(&v, p, 2); return tsr_fp16_to_fp32(v); }
        case TSR_TYPE_BF16: { tsr_bf16_t v; memcpy(&v, p, 2); return tsr_bf16_to_fp32(v); }
        case TSR_TYPE_I32: { int32_t v; memcpy(&v, p, 4); return (float)v; }
        default: break;
    }
    if (tsr_is_quantized(t->type)) {
        const int64_t blck = tsr_blck_size(t->type);
        float blk[TSR_QK_K];  /* the largest block */
        tsr_to_float_row(t->type, p, blk, blck);
        return blk[i0 % blck];
    }
    tsr_set_error("tsr_get_f32_nd: unsupported type %s", tsr_type_name(t->type));
    return NAN;
}

TSR_API_IMPL void tsr_set_f32_nd(struct tsr_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
    const int64_t idx[4] = {i0, i1, i2, i3};
    char * p = nullptr;
    if (!tsr_impl::elem_ptr(t, idx, "tsr_set_f32_nd", &p)) return;
    switch (t->type) {
        case TSR_TYPE_F32: memcpy(p, &v, 4); return;
        case TSR_TYPE_F16: { tsr_fp16_t h = tsr_fp32_to_fp16(v); memcpy(p, &h, 2); return; }
        case TSR_TYPE_BF16: { tsr_bf16_t h = tsr_fp32_to_bf16(v); memcpy(p, &h, 2); return; }
        case TSR_TYPE_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); return; }
        default: break;
    }
    tsr_set_error("tsr_set_f32_nd: cannot set single elements of type %s", tsr_type_name(t->type));
}

TSR_API_IMPL float tsr_get_f32_1d(const struct tsr_tensor * t, int64_t i) {
    if (!t) { tsr_set_error("tsr_get_f32_1d: NULL tensor"); return NAN; }
    if (i < 0 || i >= tsr_nelements(t)) {
        tsr_set_error("tsr_get_f32_1d: index %lld out of range for %s", (long long)i, tsr_impl_describe(t).s);
        return NAN;
    }
    int64_t idx[4];
    tsr_impl::unravel(t, i, idx);
    return tsr_get_f32_nd(t, idx[0], idx[1], idx[2], idx[3]);
}

TSR_API_IMPL void tsr_set_f32_1d(struct tsr_tensor * t, int64_t i, float v) {
    if (!t) { tsr_set_error("tsr_set_f32_1d: NULL tensor"); return; }
    if (i < 0 || i >= tsr_nelements(t)) {
        tsr_set_error("tsr_set_f32_1d: index %lld out of range for %s", (long long)i, tsr_impl_describe(t).s);
        return;
    }
    int64_t idx[4];
    tsr_impl::unravel(t, i, idx);
    tsr_set_f32_nd(t, idx[0], idx[1], idx[2], idx[3], v);
}

/* ---- views ---------------------------------------------------------------------------------- */

TSR_API_IMPL struct tsr_tensor * tsr_view_tensor(struct tsr_context * ctx, struct tsr_tensor * src) {
    if (!src) {
        tsr_set_error("tsr_view_tensor: NULL source");
        return nullptr;
    }
    struct tsr_tensor * r = tsr_impl_new_tensor_nb(ctx, src->type, TSR_MAX_DIMS, src->ne, src->nb, src, 0);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (view)", src->name);
    return r;
}

TSR_IMPL_NS_BEGIN
/* ggml_view_impl: n_dims dims of ne at byte offset; nb1..3 given (0 for dims >= n_dims). */
static inline struct tsr_tensor * view_impl(struct tsr_context * ctx, struct tsr_tensor * a, int n_dims,
                                            const int64_t * ne_in, const size_t * nb_in, size_t offset) {
    if (!a) {
        tsr_set_error("tsr_view_%dd: NULL source", n_dims);
        return nullptr;
    }
    int64_t ne[TSR_MAX_DIMS] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++) ne[i] = ne_in[i];
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 0) {
            tsr_set_error("tsr_view_%dd: ne[%d] = %lld is negative", n_dims, i, (long long)ne[i]);
            return nullptr;
        }
    }
    if (ne[0] % tsr_blck_size(a->type) != 0) {
        tsr_set_error("tsr_view_%dd: ne0 %lld is not a multiple of the block size of %s", n_dims,
                      (long long)ne[0], tsr_impl_describe(a).s);
        return nullptr;
    }
    size_t nb[TSR_MAX_DIMS];
    nb[0] = tsr_type_size(a->type);
    for (int i = 1; i < TSR_MAX_DIMS; i++) {
        nb[i] = i < n_dims ? nb_in[i - 1] : nb[i - 1] * (size_t)ne[i - 1];
    }
    if (n_dims == 1) nb[1] = nb[0] * (size_t)(ne[0] / tsr_blck_size(a->type));
    for (int i = 2; i < TSR_MAX_DIMS; i++) {
        if (i >= n_dims) nb[i] = nb[i - 1] * (size_t)ne[i - 1];
    }
    /* kernels load whole elements (blocks), aligned to their size */
    const size_t esz = tsr_type_size(a->type);
    if (offset % esz != 0 || nb[1] % esz != 0 || nb[2] % esz != 0 || nb[3] % esz != 0) {
        tsr_set_error("tsr_view_%dd: offset %zu and strides [%zu, %zu, %zu] of a view of %s must be multiples of its "
                      "element size %zu", n_dims, offset, nb[1], nb[2], nb[3], tsr_impl_describe(a).s, esz);
        return nullptr;
    }
    size_t extent = 0;
    if (!tsr_impl_nbytes_checked(a->type, ne, nb, &extent)) {
        tsr_set_error("tsr_view_%dd: view [%lld, %lld, %lld, %lld] with strides [%zu, %zu, %zu, %zu] of %s overflows size_t",
                      n_dims, (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3], nb[0], nb[1], nb[2],
                      nb[3], tsr_impl_describe(a).s);
        return nullptr;
    }
    const size_t a_size = tsr_nbytes(a);
    if (extent > 0 && (offset > a_size || extent > a_size - offset)) {
        tsr_set_error("tsr_view_%dd: view [%lld, %lld, %lld, %lld] spanning %zu bytes at offset %zu lies outside "
                      "its source %s (%zu bytes)", n_dims, (long long)ne[0], (long long)ne[1], (long long)ne[2],
                      (long long)ne[3], extent, offset, tsr_impl_describe(a).s, a_size);
        return nullptr;
    }
    struct tsr_tensor * r = tsr_impl_new_tensor_nb(ctx, a->type, n_dims, ne, nb, a, offset);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (view)", a->name);
    tsr_set_op_params(r, &offset, sizeof(offset));
    tsr_impl_set_op(r, TSR_OP_VIEW, a);
    return r;
}
TSR_IMPL_NS_END

/* TSR_OP_VIEW op_params: size_t offset (bytes, relative to the viewed tensor a = src[0]). */
TSR_API_IMPL struct tsr_tensor * tsr_view_1d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, size_t offset) {
    const int64_t ne[1] = {ne0};
    return tsr_impl::view_impl(ctx, a, 1, ne, nullptr, offset);
}
TSR_API_IMPL struct tsr_tensor * tsr_view_2d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1,
                                             size_t nb1, size_t offset) {
    const int64_t ne[2] = {ne0, ne1};
    const size_t nb[1] = {nb1};
    return tsr_impl::view_impl(ctx, a, 2, ne, nb, offset);
}
TSR_API_IMPL struct tsr_tensor * tsr_view_3d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1,
                                             int64_t ne2, size_t nb1, size_t nb2, size_t offset) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    const size_t nb[2] = {nb1, nb2};
    return tsr_impl::view_impl(ctx, a, 3, ne, nb, offset);
}
TSR_API_IMPL struct tsr_tensor * tsr_view_4d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1,
                                             int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    const size_t nb[3] = {nb1, nb2, nb3};
    return tsr_impl::view_impl(ctx, a, 4, ne, nb, offset);
}

TSR_IMPL_NS_BEGIN
/* TSR_OP_RESHAPE: no op_params. */
static inline struct tsr_tensor * reshape_impl(struct tsr_context * ctx, struct tsr_tensor * a, int n_dims, const int64_t * ne) {
    if (!a) {
        tsr_set_error("tsr_reshape: NULL source");
        return nullptr;
    }
    if (!tsr_is_contiguous(a)) {
        tsr_set_error("tsr_reshape: source %s is not contiguous", tsr_impl_describe(a).s);
        return nullptr;
    }
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 0) {
            tsr_set_error("tsr_reshape: ne[%d] = %lld is negative", i, (long long)ne[i]);
            return nullptr;
        }
    }
    int64_t n = 0;
    if (!tsr_impl_count_elements(n_dims, ne, &n)) {
        tsr_set_error("tsr_reshape: shape [%lld, ...] of %d dims has more than INT64_MAX elements", (long long)ne[0], n_dims);
        return nullptr;
    }
    if (n != tsr_nelements(a)) {
        tsr_set_error("tsr_reshape: %lld elements requested, source %s has %lld", (long long)n,
                      tsr_impl_describe(a).s, (long long)tsr_nelements(a));
        return nullptr;
    }
    struct tsr_tensor * r = tsr_impl_new_tensor_impl(ctx, a->type, n_dims, ne, a, 0);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (reshaped)", a->name);
    tsr_impl_set_op(r, TSR_OP_RESHAPE, a);
    return r;
}
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_tensor * tsr_reshape(struct tsr_context * ctx, struct tsr_tensor * a, struct tsr_tensor * b) {
    if (!b) {
        tsr_set_error("tsr_reshape: NULL shape tensor");
        return nullptr;
    }
    return tsr_impl::reshape_impl(ctx, a, TSR_MAX_DIMS, b->ne);
}
TSR_API_IMPL struct tsr_tensor * tsr_reshape_1d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0) {
    return tsr_impl::reshape_impl(ctx, a, 1, &ne0);
}
TSR_API_IMPL struct tsr_tensor * tsr_reshape_2d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return tsr_impl::reshape_impl(ctx, a, 2, ne);
}
TSR_API_IMPL struct tsr_tensor * tsr_reshape_3d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return tsr_impl::reshape_impl(ctx, a, 3, ne);
}
TSR_API_IMPL struct tsr_tensor * tsr_reshape_4d(struct tsr_context * ctx, struct tsr_tensor * a, int64_t ne0, int64_t ne1,
                                                int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return tsr_impl::reshape_impl(ctx, a, 4, ne);
}

/* TSR_OP_PERMUTE op_params: i32 axis0, axis1, axis2, axis3. */
TSR_API_IMPL struct tsr_tensor * tsr_permute(struct tsr_context * ctx, struct tsr_tensor * a, int axis0, int axis1, int axis2, int axis3) {
    if (!a) {
        tsr_set_error("tsr_permute: NULL source");
        return nullptr;
    }
    const int axes[4] = {axis0, axis1, axis2, axis3};
    for (int i = 0; i < 4; i++) {
        if (axes[i] < 0 || axes[i] >= TSR_MAX_DIMS) {
            tsr_set_error("tsr_permute: axis%d = %d out of range [0, 4)", i, axes[i]);
            return nullptr;
        }
        for (int j = 0; j < i; j++) {
            if (axes[i] == axes[j]) {
                tsr_set_error("tsr_permute: axes (%d, %d, %d, %d) repeat axis %d", axis0, axis1, axis2, axis3, axes[i]);
                return nullptr;
            }
        }
    }
    int64_t ne[4];
    size_t nb[4];
    for (int i = 0; i < 4; i++) {
        ne[axes[i]] = a->ne[i];
        nb[axes[i]] = a->nb[i];
    }
    struct tsr_tensor * r = tsr_impl_new_tensor_nb(ctx, a->type, TSR_MAX_DIMS, ne, nb, a, 0);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (permuted)", a->name);
    tsr_impl_set_op(r, TSR_OP_PERMUTE, a);
    tsr_set_op_params(r, axes, sizeof(axes));
    return r;
}

/* TSR_OP_TRANSPOSE: no op_params (swaps dims 0 and 1). */
TSR_API_IMPL struct tsr_tensor * tsr_transpose(struct tsr_context * ctx, struct tsr_tensor * a) {
    if (!a) {
        tsr_set_error("tsr_transpose: NULL source");
        return nullptr;
    }
    const int64_t ne[4] = {a->ne[1], a->ne[0], a->ne[2], a->ne[3]};
    const size_t nb[4] = {a->nb[1], a->nb[0], a->nb[2], a->nb[3]};
    struct tsr_tensor * r = tsr_impl_new_tensor_nb(ctx, a->type, TSR_MAX_DIMS, ne, nb, a, 0);
    if (!r) return nullptr;
    tsr_format_name(r, "%s (transposed)", a->name);
    tsr_impl_set_op(r, TSR_OP_TRANSPOSE, a);
    return r;
}
