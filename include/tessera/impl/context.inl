/* context.inl - the context arena: one block, objects bump-allocated in it. */

TSR_IMPL_NS_BEGIN

/* Bytes of the graph object's payload (unpadded), see struct tsr_cgraph. */
static inline size_t graph_hash_size(size_t size) {
    size_t h = 1;
    while (h <= 2 * size) h <<= 1;  /* power of two strictly above 2*size: never full */
    return h;
}

static inline size_t graph_nbytes(size_t size, bool grads) {
    size_t n = TSR_PAD(sizeof(struct tsr_cgraph), sizeof(void *));
    n += 2 * size * sizeof(struct tsr_tensor *);                      /* nodes, leafs */
    n += graph_hash_size(size) * sizeof(struct tsr_tensor *);         /* visited set */
    if (grads) n += 2 * size * sizeof(struct tsr_tensor *);           /* grads, grad_accs */
    n += (2 * size + 1) * sizeof(struct tsr_graph_visit);              /* DFS stack */
    return n;
}

/* Allocate an object with `size` payload bytes (padded). NULL + error naming the
 * context size, the bytes used and the bytes requested when it does not fit; the
 * context is unchanged then. */
static inline struct tsr_object * new_object(struct tsr_context * ctx, enum tsr_object_type type, size_t size,
                                             const char * what) {
    const size_t cur_end = ctx->objects_end ? ctx->objects_end->offs + ctx->objects_end->size : 0;
    if (size > SIZE_MAX / 2) {
        tsr_set_error("tsr context: out of memory for %s: %zu bytes requested (context size %zu, %zu used)",
                      what, size, ctx->mem_size, cur_end);
        return nullptr;
    }
    const size_t size_needed = TSR_PAD(size, TSR_MEM_ALIGN);
    const size_t need = TSR_OBJECT_SIZE + size_needed;
    if (need > ctx->mem_size || cur_end > ctx->mem_size - need) {
        tsr_set_error("tsr context: out of memory for %s: context size %zu bytes, %zu used, %zu requested "
                      "(%zu free)", what, ctx->mem_size, cur_end, need, ctx->mem_size - cur_end);
        return nullptr;
    }
    char * base = (char *)ctx->mem_buffer;
    struct tsr_object * obj = (struct tsr_object *)(base + cur_end);
    obj->offs = cur_end + TSR_OBJECT_SIZE;
    obj->size = size_needed;
    obj->next = nullptr;
    obj->type = type;
    if (ctx->objects_end) {
        ctx->objects_end->next = obj;
    } else {
        ctx->objects_begin = obj;
    }
    ctx->objects_end = obj;
    ctx->n_objects++;
    return obj;
}

static inline struct tsr_object * object_of(const struct tsr_tensor * t) {
    return (struct tsr_object *)((char *)const_cast<struct tsr_tensor *>(t) - TSR_OBJECT_SIZE);
}

TSR_IMPL_NS_END

TSR_API_IMPL size_t tsr_tensor_overhead(void) { return TSR_OBJECT_SIZE + TSR_TENSOR_SIZE; }

TSR_API_IMPL size_t tsr_graph_overhead_custom(size_t size, bool grads) {
    return TSR_OBJECT_SIZE + TSR_PAD(tsr_impl::graph_nbytes(size, grads), TSR_MEM_ALIGN);
}

TSR_API_IMPL size_t tsr_graph_overhead(void) { return tsr_graph_overhead_custom(TSR_DEFAULT_GRAPH_SIZE, false); }

TSR_API_IMPL struct tsr_context * tsr_init(struct tsr_init_params params) {
    if (params.mem_buffer && ((uintptr_t)params.mem_buffer % TSR_MEM_ALIGN) != 0) {
        tsr_set_error("tsr_init: mem_buffer %p is not aligned to TSR_MEM_ALIGN (%d bytes)",
                      params.mem_buffer, TSR_MEM_ALIGN);
        return nullptr;
    }
    if (params.mem_size > SIZE_MAX / 2) {
        tsr_set_error("tsr_init: mem_size %zu is too large", params.mem_size);
        return nullptr;
    }
    struct tsr_context * ctx = new (std::nothrow) tsr_context();
    if (!ctx) {
        tsr_set_error("tsr_init: out of host memory for the context struct");
        return nullptr;
    }
    ctx->mem_size = params.mem_size;
    ctx->no_alloc = params.no_alloc;
    ctx->n_objects = 0;
    ctx->objects_begin = nullptr;
    ctx->objects_end = nullptr;
    if (params.mem_buffer) {
        ctx->mem_buffer = params.mem_buffer;
        ctx->mem_buffer_owned = false;
    } else if (params.mem_size > 0) {
        ctx->mem_buffer = TSR_MALLOC(TSR_PAD(params.mem_size, TSR_MEM_ALIGN), TSR_MEM_ALIGN);
        if (!ctx->mem_buffer) {
            tsr_set_error("tsr_init: could not allocate a block of %zu bytes", params.mem_size);
            delete ctx;
            return nullptr;
        }
        if (((uintptr_t)ctx->mem_buffer % TSR_MEM_ALIGN) != 0) {
            TSR_FREE(ctx->mem_buffer);
            delete ctx;
            tsr_set_error("tsr_init: TSR_MALLOC returned memory not aligned to %d bytes", TSR_MEM_ALIGN);
            return nullptr;
        }
        ctx->mem_buffer_owned = true;
    } else {
        ctx->mem_buffer = nullptr;  /* an empty context: every creation fails with an error */
        ctx->mem_buffer_owned = false;
    }
    return ctx;
}

TSR_API_IMPL void tsr_free(struct tsr_context * ctx) {
    if (!ctx) return;
    if (ctx->mem_buffer_owned) TSR_FREE(ctx->mem_buffer);
    delete ctx;
}

TSR_API_IMPL void tsr_reset(struct tsr_context * ctx) {
    if (!ctx) return;
    ctx->n_objects = 0;
    ctx->objects_begin = nullptr;
    ctx->objects_end = nullptr;
}

TSR_API_IMPL size_t tsr_used_mem(const struct tsr_context * ctx) {
    if (!ctx || !ctx->objects_end) return 0;
    return ctx->objects_end->offs + ctx->objects_end->size;
}

TSR_API_IMPL size_t tsr_get_mem_size(const struct tsr_context * ctx) { return ctx ? ctx->mem_size : 0; }
TSR_API_IMPL void * tsr_get_mem_buffer(const struct tsr_context * ctx) { return ctx ? ctx->mem_buffer : nullptr; }
TSR_API_IMPL bool tsr_get_no_alloc(const struct tsr_context * ctx) { return ctx ? ctx->no_alloc : false; }
TSR_API_IMPL void tsr_set_no_alloc(struct tsr_context * ctx, bool no_alloc) {
    if (ctx) ctx->no_alloc = no_alloc;
}

TSR_API_IMPL struct tsr_tensor * tsr_get_first_tensor(const struct tsr_context * ctx) {
    if (!ctx) return nullptr;
    for (struct tsr_object * obj = ctx->objects_begin; obj; obj = obj->next) {
        if (obj->type == TSR_OBJECT_TYPE_TENSOR) return (struct tsr_tensor *)((char *)ctx->mem_buffer + obj->offs);
    }
    return nullptr;
}

TSR_API_IMPL struct tsr_tensor * tsr_get_next_tensor(const struct tsr_context * ctx, struct tsr_tensor * t) {
    if (!ctx || !t) return nullptr;
    for (struct tsr_object * obj = tsr_impl::object_of(t)->next; obj; obj = obj->next) {
        if (obj->type == TSR_OBJECT_TYPE_TENSOR) return (struct tsr_tensor *)((char *)ctx->mem_buffer + obj->offs);
    }
    return nullptr;
}

TSR_API_IMPL struct tsr_tensor * tsr_get_tensor(struct tsr_context * ctx, const char * name) {
    if (!ctx || !name) return nullptr;
    for (struct tsr_tensor * t = tsr_get_first_tensor(ctx); t; t = tsr_get_next_tensor(ctx, t)) {
        if (strcmp(t->name, name) == 0) return t;
    }
    return nullptr;
}

TSR_API_IMPL size_t tsr_get_max_tensor_size(const struct tsr_context * ctx) {
    size_t m = 0;
    for (struct tsr_tensor * t = tsr_get_first_tensor(ctx); t; t = tsr_get_next_tensor(ctx, t)) {
        const size_t n = tsr_nbytes(t);
        if (n > m) m = n;
    }
    return m;
}
