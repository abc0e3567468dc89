/* graph.inl - computation graphs: build (deduplicated topological order), query, print. */

TSR_IMPL_NS_BEGIN

static inline size_t ptr_hash(const struct tsr_tensor * t) {
    uint64_t x = (uint64_t)(uintptr_t)t;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

/* Slot holding t, or the empty slot where it would go. visited_size > 0. */
static inline size_t visited_slot(const struct tsr_cgraph * g, const struct tsr_tensor * t) {
    const size_t mask = g->visited_size - 1;
    size_t i = ptr_hash(t) & mask;
    while (g->visited[i] && g->visited[i] != t) i = (i + 1) & mask;
    return i;
}

static inline void visited_insert(struct tsr_cgraph * g, struct tsr_tensor * t) {
    g->visited[visited_slot(g, t)] = t;
}

static inline void visited_rebuild(struct tsr_cgraph * g) {
    memset(g->visited, 0, g->visited_size * sizeof(*g->visited));
    for (int i = 0; i < g->n_nodes; i++) visited_insert(g, g->nodes[i]);
    for (int i = 0; i < g->n_leafs; i++) visited_insert(g, g->leafs[i]);
}

static inline bool is_leaf(const struct tsr_tensor * t) {
    return t->op == TSR_OP_NONE && !(t->flags & TSR_TENSOR_FLAG_PARAM);
}

TSR_IMPL_NS_END

static inline bool tsr_impl_graph_visited(const struct tsr_cgraph * g, const struct tsr_tensor * t) {
    if (!g || !t || g->visited_size == 0) return false;
    return g->visited[tsr_impl::visited_slot(g, t)] == t;
}

TSR_API_IMPL struct tsr_cgraph * tsr_new_graph_custom(struct tsr_context * ctx, size_t size, bool grads) {
    if (!ctx) {
        tsr_set_error("tsr_new_graph_custom: NULL context");
        return nullptr;
    }
    if (size > (size_t)(INT32_MAX / 4)) {
        tsr_set_error("tsr_new_graph_custom: size %zu is too large", size);
        return nullptr;
    }
    struct tsr_object * obj = tsr_impl::new_object(ctx, TSR_OBJECT_TYPE_GRAPH, tsr_impl::graph_nbytes(size, grads), "a graph");
    if (!obj) return nullptr;
    char * p = (char *)ctx->mem_buffer + obj->offs;
    struct tsr_cgraph * g = (struct tsr_cgraph *)p;
    p += TSR_PAD(sizeof(struct tsr_cgraph), sizeof(void *));
    const size_t hsize = tsr_impl::graph_hash_size(size);
    g->size = (int)size;
    g->n_nodes = 0;
    g->n_leafs = 0;
    g->nodes = (struct tsr_tensor **)p;       p += size * sizeof(struct tsr_tensor *);
    g->leafs = (struct tsr_tensor **)p;       p += size * sizeof(struct tsr_tensor *);
    g->visited = (struct tsr_tensor **)p;     p += hsize * sizeof(struct tsr_tensor *);
    g->visited_size = hsize;
    if (grads) {
        g->grads = (struct tsr_tensor **)p;     p += size * sizeof(struct tsr_tensor *);
        g->grad_accs = (struct tsr_tensor **)p; p += size * sizeof(struct tsr_tensor *);
        memset(g->grads, 0, size * sizeof(struct tsr_tensor *));
        memset(g->grad_accs, 0, size * sizeof(struct tsr_tensor *));
    } else {
        g->grads = nullptr;
        g->grad_accs = nullptr;
    }
    g->stack = (struct tsr_graph_visit *)p;
    memset(g->visited, 0, hsize * sizeof(struct tsr_tensor *));
    return g;
}

TSR_API_IMPL struct tsr_cgraph * tsr_new_graph(struct tsr_context * ctx) {
    return tsr_new_graph_custom(ctx, TSR_DEFAULT_GRAPH_SIZE, false);
}

TSR_API_IMPL struct tsr_cgraph tsr_graph_view(struct tsr_cgraph * cgraph, int i0, int i1) {
    struct tsr_cgraph v;
    memset(&v, 0, sizeof(v));
    if (!cgraph) {
        tsr_set_error("tsr_graph_view: NULL graph");
        return v;
    }
    if (i0 < 0 || i1 < i0 || i1 > cgraph->n_nodes) {
        tsr_set_error("tsr_graph_view: range [%d, %d) is not inside the graph's %d nodes", i0, i1, cgraph->n_nodes);
        return v;
    }
    v.size = i1 - i0;
    v.n_nodes = i1 - i0;
    v.n_leafs = 0;
    v.nodes = cgraph->nodes + i0;
    v.grads = nullptr;
    v.grad_accs = nullptr;
    v.leafs = nullptr;
    v.visited_size = 0;
    v.visited = nullptr;
    v.stack = nullptr;
    return v;
}

TSR_API_IMPL void tsr_graph_reset(struct tsr_cgraph * cgraph) {
    if (!cgraph) return;
    if (cgraph->visited_size == 0) { /* a view: it does not own its arrays */
        cgraph->n_nodes = 0;
        cgraph->size = 0;
        return;
    }
    cgraph->n_nodes = 0;
    cgraph->n_leafs = 0;
    memset(cgraph->visited, 0, cgraph->visited_size * sizeof(*cgraph->visited));
    if (cgraph->grads) {
        memset(cgraph->grads, 0, (size_t)cgraph->size * sizeof(*cgraph->grads));
        memset(cgraph->grad_accs, 0, (size_t)cgraph->size * sizeof(*cgraph->grad_accs));
    }
}

TSR_API_IMPL bool tsr_graph_cpy(const struct tsr_cgraph * src, struct tsr_cgraph * dst) {
    if (!src || !dst) return tsr_set_error("tsr_graph_cpy: NULL graph");
    if (dst->visited_size == 0) return tsr_set_error("tsr_graph_cpy: the destination is a graph view");
    if (src->n_nodes > dst->size || src->n_leafs > dst->size) {
        return tsr_set_error("tsr_graph_cpy: destination of size %d cannot hold %d nodes and %d leafs", dst->size,
                             src->n_nodes, src->n_leafs);
    }
    if (src == dst) return true;
    dst->n_nodes = src->n_nodes;
    dst->n_leafs = src->n_leafs;
    if (src->n_nodes > 0) memmove(dst->nodes, src->nodes, (size_t)src->n_nodes * sizeof(*src->nodes));
    if (src->n_leafs > 0) memmove(dst->leafs, src->leafs, (size_t)src->n_leafs * sizeof(*src->leafs));
    if (dst->grads) {
        for (int i = 0; i < dst->size; i++) {
            dst->grads[i] = (src->grads && i < src->size) ? src->grads[i] : nullptr;
            dst->grad_accs[i] = (src->grad_accs && i < src->size) ? src->grad_accs[i] : nullptr;
        }
    }
    tsr_impl::visited_rebuild(dst);
    return true;
}

TSR_API_IMPL bool tsr_build_forward_expand(struct tsr_cgraph * g, struct tsr_tensor * tensor) {
    if (!g || !tensor) return tsr_set_error("tsr_build_forward_expand: NULL %s", g ? "tensor" : "graph");
    if (g->visited_size == 0) return tsr_set_error("tsr_build_forward_expand: cannot expand a graph view");
    if (tsr_impl_graph_visited(g, tensor)) return true;

    const int n_nodes0 = g->n_nodes;
    const int n_leafs0 = g->n_leafs;
    const size_t stack_cap = 2 * (size_t)g->size + 1;
    size_t sp = 0;
    struct tsr_tensor * failed = nullptr;
    /* Every tensor in the visited set is placed (a node or a leaf) or waits on the stack to
     * be, and each needs one of the graph's 2 * size places: more than that and the graph
     * is full. Checking it before each insert also keeps the set (> 2 * size slots) from
     * ever filling up, so its probing always finds an empty slot. */
    auto has_room = [&]() { return (size_t)g->n_nodes + (size_t)g->n_leafs + sp < 2 * (size_t)g->size; };

    if (!has_room()) failed = tensor;
    else {
        tsr_impl::visited_insert(g, tensor);
        g->stack[sp++] = {tensor, 0};
    }
    while (sp > 0) {
        struct tsr_graph_visit * top = &g->stack[sp - 1];
        if (top->next_src < TSR_MAX_SRC) {
            struct tsr_tensor * s = top->t->src[top->next_src++];
            if (s && !tsr_impl_graph_visited(g, s)) {
                if (sp >= stack_cap || !has_room()) {
                    failed = s;
                    break;
                }
                tsr_impl::visited_insert(g, s);
                g->stack[sp++] = {s, 0};
            }
            continue;
        }
        struct tsr_tensor * t = top->t;
        --sp;
        if (tsr_impl::is_leaf(t)) {
            if (g->n_leafs >= g->size) {
                failed = t;
                break;
            }
            g->leafs[g->n_leafs++] = t;
        } else {
            if (g->n_nodes >= g->size) {
                failed = t;
                break;
            }
            g->nodes[g->n_nodes++] = t;
        }
    }
    if (failed) {
        const int nn = g->n_nodes, nl = g->n_leafs;
        g->n_nodes = n_nodes0;
        g->n_leafs = n_leafs0;
        tsr_impl::visited_rebuild(g);
        return tsr_set_error("tsr_build_forward_expand: graph of size %d is full (%d nodes, %d leafs) while adding %s "
                             "(op %s) for %s; the graph is unchanged (use tsr_new_graph_custom with a larger size)",
                             g->size, nn, nl, tsr_impl_describe(failed).s, tsr_op_desc(failed),
                             tsr_impl_describe(tensor).s);
    }
    return true;
}

TSR_API_IMPL int tsr_graph_size(const struct tsr_cgraph * cgraph) { return cgraph ? cgraph->size : 0; }
TSR_API_IMPL int tsr_graph_n_nodes(const struct tsr_cgraph * cgraph) { return cgraph ? cgraph->n_nodes : 0; }
TSR_API_IMPL int tsr_graph_n_leafs(const struct tsr_cgraph * cgraph) { return cgraph ? cgraph->n_leafs : 0; }

TSR_API_IMPL struct tsr_tensor * tsr_graph_node(const struct tsr_cgraph * cgraph, int i) {
    if (!cgraph) return nullptr;
    if (i < 0) i += cgraph->n_nodes;
    if (i < 0 || i >= cgraph->n_nodes) {
        tsr_set_error("tsr_graph_node: index %d out of range for %d nodes", i, cgraph->n_nodes);
        return nullptr;
    }
    return cgraph->nodes[i];
}

TSR_API_IMPL struct tsr_tensor ** tsr_graph_nodes(struct tsr_cgraph * cgraph) { return cgraph ? cgraph->nodes : nullptr; }

TSR_API_IMPL struct tsr_tensor * tsr_graph_leaf(const struct tsr_cgraph * cgraph, int i) {
    if (!cgraph) return nullptr;
    if (i < 0) i += cgraph->n_leafs;
    if (i < 0 || i >= cgraph->n_leafs) {
        tsr_set_error("tsr_graph_leaf: index %d out of range for %d leafs", i, cgraph->n_leafs);
        return nullptr;
    }
    return cgraph->leafs[i];
}

TSR_API_IMPL bool tsr_graph_add_node(struct tsr_cgraph * cgraph, struct tsr_tensor * t) {
    if (!cgraph || !t) return tsr_set_error("tsr_graph_add_node: NULL %s", cgraph ? "tensor" : "graph");
    if (cgraph->visited_size == 0) return tsr_set_error("tsr_graph_add_node: cannot add to a graph view");
    if (cgraph->n_nodes >= cgraph->size) {
        return tsr_set_error("tsr_graph_add_node: graph of size %d is full, cannot add %s", cgraph->size,
                             tsr_impl_describe(t).s);
    }
    cgraph->nodes[cgraph->n_nodes++] = t;
    tsr_impl::visited_insert(cgraph, t);
    return true;
}

TSR_API_IMPL struct tsr_tensor * tsr_graph_get_tensor(const struct tsr_cgraph * cgraph, const char * name) {
    if (!cgraph || !name) return nullptr;
    for (int i = 0; i < cgraph->n_leafs; i++) {
        if (strcmp(cgraph->leafs[i]->name, name) == 0) return cgraph->leafs[i];
    }
    for (int i = 0; i < cgraph->n_nodes; i++) {
        if (strcmp(cgraph->nodes[i]->name, name) == 0) return cgraph->nodes[i];
    }
    return nullptr;
}

TSR_API_IMPL void tsr_graph_print(const struct tsr_cgraph * cgraph, FILE * out) {
    if (!out) out = stdout;
    if (!cgraph) {
        fprintf(out, "(null graph)\n");
        return;
    }
    fprintf(out, "=== GRAPH ===\n");
    fprintf(out, "n_nodes = %d\n", cgraph->n_nodes);
    for (int i = 0; i < cgraph->n_nodes; i++) {
        const struct tsr_tensor * t = cgraph->nodes[i];
        fprintf(out, " - %3d: [ %5lld, %5lld, %5lld, %5lld] %-5s %16s %s", i, (long long)t->ne[0], (long long)t->ne[1],
                (long long)t->ne[2], (long long)t->ne[3], tsr_type_name(t->type), tsr_op_desc(t), t->name);
        for (int j = 0; j < TSR_MAX_SRC; j++) {
            if (t->src[j]) fprintf(out, "%s%s", j == 0 ? " <- " : ", ", t->src[j]->name[0] ? t->src[j]->name : "?");
        }
        fprintf(out, "\n");
    }
    fprintf(out, "n_leafs = %d\n", cgraph->n_leafs);
    for (int i = 0; i < cgraph->n_leafs; i++) {
        const struct tsr_tensor * t = cgraph->leafs[i];
        fprintf(out, " - %3d: [ %5lld, %5lld, %5lld, %5lld] %-5s %16s %s\n", i, (long long)t->ne[0], (long long)t->ne[1],
                (long long)t->ne[2], (long long)t->ne[3], tsr_type_name(t->type), tsr_op_name(t->op), t->name);
    }
    fprintf(out, "========================================\n");
}

TSR_IMPL_NS_BEGIN
/* Write s escaped for a Graphviz record label. */
static inline void dot_escape(FILE * f, const char * s) {
    for (; *s; ++s) {
        if (strchr("{}|<>\"\\", *s)) fputc('\\', f);
        fputc(*s, f);
    }
}
static inline void dot_shape(FILE * f, const struct tsr_tensor * t) {
    fprintf(f, "%s [%lld, %lld, %lld, %lld]", tsr_type_name(t->type), (long long)t->ne[0], (long long)t->ne[1],
            (long long)t->ne[2], (long long)t->ne[3]);
}
TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_graph_dump_dot(const struct tsr_cgraph * gb, const struct tsr_cgraph * gf, const char * filename) {
    (void)gf; /* ggml colours gradients found via gf; tessera builds no backward graphs */
    if (!gb || !filename) return tsr_set_error("tsr_graph_dump_dot: NULL %s", gb ? "filename" : "graph");
    FILE * f = fopen(filename, "w");
    if (!f) return tsr_set_error("tsr_graph_dump_dot: cannot open '%s' for writing", filename);
    fprintf(f, "digraph G {\n  newrank = true;\n  rankdir = TB;\n");
    for (int i = 0; i < gb->n_nodes; i++) {
        const struct tsr_tensor * t = gb->nodes[i];
        fprintf(f, "  \"%p\" [style = filled; fillcolor = %s; shape = record; label=\"", (const void *)t,
                (t->flags & TSR_TENSOR_FLAG_OUTPUT) ? "lightblue" : "white");
        tsr_impl::dot_escape(f, t->name[0] ? t->name : "(unnamed)");
        fprintf(f, " (");
        tsr_impl::dot_shape(f, t);
        fprintf(f, ")|%d|", i);
        tsr_impl::dot_escape(f, tsr_op_desc(t));
        fprintf(f, "\"; ];\n");
    }
    for (int i = 0; i < gb->n_leafs; i++) {
        const struct tsr_tensor * t = gb->leafs[i];
        fprintf(f, "  \"%p\" [style = filled; fillcolor = %s; shape = record; label=\"<x>", (const void *)t,
                (t->flags & TSR_TENSOR_FLAG_INPUT) ? "yellow" : "pink");
        tsr_impl::dot_escape(f, t->name[0] ? t->name : "(unnamed)");
        fprintf(f, " (");
        tsr_impl::dot_shape(f, t);
        fprintf(f, ")\"; ];\n");
    }
    const struct tsr_cgraph * g = gb;
    for (int pass = 0; pass < 2; pass++) {
        const int n = pass == 0 ? g->n_nodes : g->n_leafs;
        struct tsr_tensor * const * arr = pass == 0 ? g->nodes : g->leafs;
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < TSR_MAX_SRC; j++) {
                const struct tsr_tensor * s = arr[i]->src[j];
                if (s && s != arr[i]) {
                    fprintf(f, "  \"%p\" -> \"%p\" [ arrowhead = %s; label = \"%d\"; ];\n", (const void *)s,
                            (const void *)arr[i], j == 1 ? "empty" : "vee", j);
                }
            }
        }
    }
    fprintf(f, "}\n");
    const bool ok = !ferror(f);
    if (fclose(f) != 0 || !ok) return tsr_set_error("tsr_graph_dump_dot: write error on '%s'", filename);
    return true;
}
