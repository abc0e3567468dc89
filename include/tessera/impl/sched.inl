/*
 * sched.inl - the backend scheduler (sched.h): assign, split, copy inputs, plan, run.
 *
 * A graph goes through split_graph (passes below), which builds graph_copy: per split, the
 * split's input copies (DUP nodes reading the foreign tensor, so the planner keeps that
 * tensor alive up to the copy) and then the split's own nodes. One gallocr with a buffer
 * type per backend plans graph_copy with each tensor's backend as its buffer id, so every
 * backend's compute buffer is packed against its own lower bound, copies included. Each
 * split runs as a graph view of graph_copy that starts after its copies.
 *
 * Splits are queued (graph_compute_async) and nothing waits for the last one. With
 * `parallel`, every input copy has TSR_SCHED_MAX_COPIES slots, all live through the whole
 * graph (so their offsets do not depend on which slot is current), the slot rotates per
 * graph, and an event per (backend, slot) recorded after the split that read it says
 * when the slot may be written again: the host prepares graph N+1's inputs while the
 * device still runs graph N (ggml_backend_sched_compute_splits). Copies between two
 * devices go through a host staging block the scheduler sizes at reserve.
 */
#include <algorithm>
#include <string>

TSR_IMPL_NS_BEGIN
TSR_IMPL_HANDLE(tsr_backend_sched, sched)

struct sched_split {
    int backend_id;
    int i_start, i_end;        /* the split's own nodes in graph_copy */
    int inputs_begin, n_inputs;  /* in sched::inputs */
};

/* A node whose src the scheduler redirected to a copy, to put back afterwards. */
struct sched_rewire {
    struct tsr_tensor * node;
    int src_index;
    struct tsr_tensor * original;
};

struct sched {
    vec<tsr_backend_t> backends;
    vec<tsr_backend_buffer_type_t> bufts;
    int n_backends = 0;
    int n_copies = 1;
    int cur_copy = 0;
    size_t graph_size = 0;
    tsr_gallocr_t galloc = nullptr;

    /* the copies and graph_copy live here; re-made per graph in the same block */
    struct tsr_context * ctx = nullptr;
    size_t ctx_size = 0;
    struct tsr_cgraph * graph_copy = nullptr;

    hash_map<const struct tsr_tensor *, int> ids;       /* backend of each tensor of the graph */
    hash_map<const struct tsr_tensor *, int> user_ids;  /* set_tensor_backend */
    hash_map<const struct tsr_tensor *, int> copy_base; /* tensor -> first of its n_backends * n_copies slots */
    vec<struct tsr_tensor *> copy_slots;
    vec<struct tsr_tensor *> inputs;                    /* originals, per split */
    std::vector<sched_split> splits;
    vec<sched_rewire> rewires;
    std::vector<int> node_ids, leaf_ids;
    std::vector<size_t> input_bytes;
    std::vector<int> n_inputs_per_backend;

    struct tsr_cgraph * allocated = nullptr;  /* the graph alloc_graph placed, until compute or reset */
    bool planned = false;
    bool queued = false;  /* splits may still run: compute_async since the last synchronize */

    tsr_backend_sched_eval_callback eval_cb = nullptr;
    void * eval_user = nullptr;

    /* parallel: recorded after the split of backend b that read copy slot c */
    tsr_backend_event_t events[TSR_SCHED_MAX_BACKENDS][TSR_SCHED_MAX_COPIES] = {};

    /* host memory for copies between two devices, from the host allocator of reserve time */
    void * staging = nullptr;
    size_t staging_size = 0;
    size_t staging_need = 0;  /* the largest such copy of the last split graph */
    struct tsr_host_allocator staging_alloc{};
};

namespace {

static inline bool sched_is_view_op(enum tsr_op op) {
    return op == TSR_OP_NONE || op == TSR_OP_RESHAPE || op == TSR_OP_VIEW || op == TSR_OP_PERMUTE || op == TSR_OP_TRANSPOSE;
}

static inline int sched_id(const sched * s, const struct tsr_tensor * t) {
    auto it = s->ids.find(t);
    return it == s->ids.end() ? -1 : it->second;
}

/* The buffer a tensor's data lives in when someone else placed it (weights, KV cache). */
static inline tsr_backend_buffer_t sched_prealloc_buffer(const struct tsr_tensor * t) {
    const struct tsr_tensor * r = t->view_src ? t->view_src : t;
    return r->buffer;
}

static inline bool sched_is_weight(const struct tsr_tensor * t) {
    tsr_backend_buffer_t b = sched_prealloc_buffer(t);
    return b && tsr_backend_buffer_get_usage(b) == TSR_BUFFER_USAGE_WEIGHTS;
}

/* The first backend (priority order) that can use buffer b, and run op when op is given. */
static int sched_backend_for_buffer(const sched * s, tsr_backend_buffer_t b, const struct tsr_tensor * op) {
    const tsr_backend_buffer_type_t bt = tsr_backend_buffer_get_type(b);
    for (int i = 0; i < s->n_backends; i++) {
        if (!tsr_backend_supports_buft(s->backends[(size_t) i], bt)) continue;
        if (!op || tsr_backend_supports_op(s->backends[(size_t) i], op)) return i;
    }
    return -1;
}

static bool sched_no_backend_error(const sched * s, int i, const struct tsr_tensor * node, const char * why) {
    std::string tried;
    for (int b = 0; b < s->n_backends; b++) tried += (b ? ", " : "") + std::string(tsr_backend_name(s->backends[(size_t) b]));
    return tsr_set_error("tsr_backend_sched: node %d '%s' (%s, %s <- %s%s%s): %s (backends: %s)", i, node->name, tsr_op_desc(node),
                         tsr_type_name(node->type), node->src[0] ? tsr_type_name(node->src[0]->type) : "-",
                         node->src[1] ? ", " : "", node->src[1] ? tsr_type_name(node->src[1]->type) : "", why, tried.c_str());
}

/* Pass 1: overrides, tensors placed by someone else, graph inputs, ops beside their weights. */
static bool sched_assign_fixed(sched * s, struct tsr_cgraph * g) {
    const int last = s->n_backends - 1;
    for (int i = 0; i < g->n_leafs; i++) {
        struct tsr_tensor * t = g->leafs[i];
        auto u = s->user_ids.find(t);
        if (u != s->user_ids.end()) { s->ids[t] = u->second; continue; }
        if (tsr_backend_buffer_t b = sched_prealloc_buffer(t)) {
            const int id = sched_backend_for_buffer(s, b, nullptr);
            if (id < 0) return tsr_set_error("tsr_backend_sched: leaf '%s' lives in a %s buffer no backend can use", t->name, tsr_backend_buffer_name(b));
            s->ids[t] = id;
        } else if (t->flags & TSR_TENSOR_FLAG_INPUT) {
            s->ids[t] = last;  /* the program writes graph inputs in host memory */
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct tsr_tensor * t = g->nodes[i];
        auto u = s->user_ids.find(t);
        if (u != s->user_ids.end()) { s->ids[t] = u->second; continue; }
        if (tsr_backend_buffer_t b = sched_prealloc_buffer(t)) {
            /* a view computes nothing: any backend that can use the buffer */
            const int id = sched_backend_for_buffer(s, b, sched_is_view_op(t->op) ? nullptr : t);
            if (id < 0) return sched_no_backend_error(s, i, t, "writes into a buffer no backend that runs it can use");
            s->ids[t] = id;
            continue;
        }
        if (sched_is_view_op(t->op)) continue;
        for (int j = 0; j < TSR_MAX_SRC; j++) {
            const struct tsr_tensor * src = t->src[j];
            if (!src || !sched_is_weight(src)) continue;
            int id = sched_backend_for_buffer(s, sched_prealloc_buffer(src), t);
            if (id < 0) break;  /* the weight's backend lacks the op: a neighbour or fallback decides */
            if (id == last) {
                for (int b = 0; b < last; b++) {
                    if (tsr_backend_offload_op(s->backends[(size_t) b], t)) { id = b; break; }
                }
            }
            s->ids[t] = id;
            break;
        }
    }
    return true;
}

/* Pass 2, one sweep: unassigned nodes take the backend of the last assigned node before
 * them (in the sweep's direction) when it supports them. The lowest-priority backend
 * spreads only when with_last: the others grow first. */
static void sched_expand(sched * s, struct tsr_cgraph * g, bool down, bool with_last) {
    int cur = -1;
    for (int k = 0; k < g->n_nodes; k++) {
        struct tsr_tensor * t = g->nodes[down ? k : g->n_nodes - 1 - k];
        if (sched_is_view_op(t->op)) continue;
        const int id = sched_id(s, t);
        if (id >= 0) {
            cur = (id == s->n_backends - 1 && !with_last) ? -1 : id;
        } else if (cur >= 0 && tsr_backend_supports_op(s->backends[(size_t) cur], t)) {
            s->ids[t] = cur;
        }
    }
}

/* Pass 3: a node no neighbour could take goes to the backend that supports it and already
 * holds most of its inputs (ties: priority order). None supports it: the graph is refused. */
static bool sched_assign_fallbacks(sched * s, struct tsr_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        struct tsr_tensor * t = g->nodes[i];
        if (sched_is_view_op(t->op) || sched_id(s, t) >= 0) continue;
        int best = -1, best_inputs = -1;
        for (int b = 0; b < s->n_backends; b++) {
            if (!tsr_backend_supports_op(s->backends[(size_t) b], t)) continue;
            int n = 0;
            for (int j = 0; j < TSR_MAX_SRC; j++) n += t->src[j] && sched_id(s, t->src[j]) == b;
            if (n > best_inputs) { best = b; best_inputs = n; }
        }
        if (best < 0) return sched_no_backend_error(s, i, t, "no backend supports this op");
        s->ids[t] = best;
    }
    return true;
}

/* Pass 4: views run where their source is (they compute nothing, or write into it);
 * remaining leafs go where their first consumer runs; then every node is checked. */
static bool sched_assign_rest(sched * s, struct tsr_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        struct tsr_tensor * t = g->nodes[i];
        if (t->view_src && !sched_prealloc_buffer(t) && s->user_ids.find(t) == s->user_ids.end()) {
            const int id = sched_id(s, t->view_src);
            if (id >= 0) s->ids[t] = id;
        }
        const int id = sched_id(s, t);
        for (int j = 0; j < TSR_MAX_SRC; j++) {
            if (t->src[j] && id >= 0 && sched_id(s, t->src[j]) < 0) s->ids[t->src[j]] = id;
        }
    }
    for (int i = 0; i < g->n_leafs; i++) {
        if (sched_id(s, g->leafs[i]) < 0) s->ids[g->leafs[i]] = s->n_backends - 1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct tsr_tensor * t = g->nodes[i];
        int id = sched_id(s, t);
        if (id < 0) { id = s->n_backends - 1; s->ids[t] = id; }  /* a view of nothing assigned */
        if (!sched_is_view_op(t->op) && !tsr_backend_supports_op(s->backends[(size_t) id], t)) {
            std::string why = std::string("assigned to ") + tsr_backend_name(s->backends[(size_t) id]) + ", which does not support it";
            return sched_no_backend_error(s, i, t, why.c_str());
        }
    }
    return true;
}

/* Can backend b read t where it lives, without a copy? */
static bool sched_can_read(const sched * s, const struct tsr_tensor * t, int b) {
    tsr_backend_buffer_t buf = sched_prealloc_buffer(t);
    const tsr_backend_buffer_type_t bt = buf ? tsr_backend_buffer_get_type(buf) : s->bufts[(size_t) sched_id(s, t)];
    return tsr_backend_supports_buft(s->backends[(size_t) b], bt);
}

/* The copy slot of t on backend b (copy c), made with t's layout when new. */
static struct tsr_tensor * sched_copy_of(sched * s, struct tsr_tensor * t, int b, int c, bool * created) {
    auto it = s->copy_base.find(t);
    size_t base;
    if (it == s->copy_base.end()) {
        base = s->copy_slots.size();
        s->copy_base[t] = (int) base;
        s->copy_slots.resize(base + (size_t) (s->n_backends * s->n_copies), nullptr);
    } else {
        base = (size_t) it->second;
    }
    struct tsr_tensor ** slot = &s->copy_slots[base + (size_t) (b * s->n_copies)];
    *created = slot[0] == nullptr;
    if (*created) {
        for (int k = 0; k < s->n_copies; k++) {
            struct tsr_tensor * cp = tsr_impl_new_tensor_nb(s->ctx, t->type, TSR_MAX_DIMS, t->ne, t->nb, nullptr, 0);
            if (!cp) return nullptr;
            tsr_impl_set_op(cp, TSR_OP_DUP, t);  /* the planner keeps t alive until the copy */
            tsr_format_name(cp, "%s#%s#%d", tsr_backend_name(s->backends[(size_t) b]), t->name, k);
            slot[k] = cp;
        }
    }
    return slot[c];
}

/* Whether copying t to backend b goes device -> host -> device. */
static bool sched_copy_needs_staging(const sched * s, const struct tsr_tensor * t, int b) {
    tsr_backend_buffer_t buf = sched_prealloc_buffer(t);
    const tsr_backend_buffer_type_t from = buf ? tsr_backend_buffer_get_type(buf) : s->bufts[(size_t) sched_id(s, t)];
    return !tsr_backend_buft_is_host(from) && !tsr_backend_buft_is_host(s->bufts[(size_t) b]);
}

/* Pass 5: cut the nodes into splits and give each split copies of its foreign inputs. */
static bool sched_cut_splits(sched * s, struct tsr_cgraph * g) {
    s->staging_need = 0;
    s->splits.clear();
    s->inputs.clear();
    s->copy_base.clear();
    s->copy_slots.clear();
    for (int i = 0; i < g->n_nodes; i++) {
        struct tsr_tensor * t = g->nodes[i];
        const int id = sched_id(s, t);
        const bool view = sched_is_view_op(t->op);
        if (s->splits.empty() || (!view && id != s->splits.back().backend_id)) {
            if (!s->splits.empty()) s->splits.back().i_end = i;
            s->splits.push_back(sched_split{id, i, g->n_nodes, (int) s->inputs.size(), 0});
        }
        if (view) continue;
        sched_split & sp = s->splits.back();
        for (int j = 0; j < TSR_MAX_SRC; j++) {
            struct tsr_tensor * src = t->src[j];
            if (!src || sched_id(s, src) == sp.backend_id || sched_can_read(s, src, sp.backend_id)) continue;
            bool created = false;
            struct tsr_tensor * cp = sched_copy_of(s, src, sp.backend_id, s->cur_copy, &created);
            if (!cp) return false;
            if (created) {
                s->inputs.push_back(src);
                sp.n_inputs++;
                if (sched_copy_needs_staging(s, src, sp.backend_id)) s->staging_need = std::max(s->staging_need, tsr_nbytes(src));
            }
            s->rewires.push_back(sched_rewire{t, j, src});
            t->src[j] = cp;
        }
    }
    return true;
}

static void sched_restore_sources(sched * s) {
    for (size_t k = s->rewires.size(); k-- > 0;) s->rewires[k].node->src[s->rewires[k].src_index] = s->rewires[k].original;
    s->rewires.clear();
}

/* Bytes the copies and graph_copy of g need at most: every tensor copied to every other
 * backend, n_copies times. */
static size_t sched_ctx_need(const sched * s, const struct tsr_cgraph * g) {
    const size_t n = (size_t) (g->n_nodes + g->n_leafs);
    const size_t n_cp = n * (size_t) ((s->n_backends - 1) * s->n_copies);
    return n_cp * tsr_tensor_overhead() + tsr_graph_overhead_custom(n + n_cp, false);
}

static bool sched_ensure_ctx(sched * s, const struct tsr_cgraph * g) {
    const size_t need = sched_ctx_need(s, g);
    if (s->ctx && s->ctx_size >= need) { tsr_reset(s->ctx); return true; }
    tsr_free(s->ctx);
    struct tsr_init_params p = {need, nullptr, true};
    s->ctx = tsr_init(p);
    s->ctx_size = s->ctx ? need : 0;
    return s->ctx != nullptr;
}

/* graph_copy: per split its current input copies, then its nodes; the other copies (when
 * parallel) as leafs that live through the whole graph. Buffer ids: each tensor's backend. */
static bool sched_build_graph_copy(sched * s, struct tsr_cgraph * g) {
    const int n_cp = (int) s->inputs.size();
    s->graph_copy = tsr_new_graph_custom(s->ctx, (size_t) (g->n_nodes + g->n_leafs + n_cp * s->n_copies), false);
    if (!s->graph_copy) return false;
    struct tsr_cgraph * gc = s->graph_copy;
    s->node_ids.clear();
    s->leaf_ids.clear();
    s->input_bytes.assign((size_t) s->n_backends, 0);
    s->n_inputs_per_backend.assign((size_t) s->n_backends, 0);
    for (sched_split & sp : s->splits) {
        const size_t al = tsr_backend_buft_get_alignment(s->bufts[(size_t) sp.backend_id]);
        for (int k = 0; k < sp.n_inputs; k++) {
            struct tsr_tensor * in = s->inputs[(size_t) (sp.inputs_begin + k)];
            bool created = false;
            for (int c = 0; c < s->n_copies; c++) {
                struct tsr_tensor * cp = sched_copy_of(s, in, sp.backend_id, c, &created);
                s->input_bytes[(size_t) sp.backend_id] += TSR_PAD(tsr_backend_buft_get_alloc_size(s->bufts[(size_t) sp.backend_id], cp), al);
                /* parallel: every slot lives through the graph, so no slot's offset depends
                 * on which one is current, and a later node never overwrites a slot a
                 * device may still read */
                if (s->n_copies > 1) cp->flags |= TSR_TENSOR_FLAG_INPUT | TSR_TENSOR_FLAG_OUTPUT;
                if (c == s->cur_copy) {
                    gc->nodes[gc->n_nodes++] = cp;
                    s->node_ids.push_back(sp.backend_id);
                } else {
                    gc->leafs[gc->n_leafs++] = cp;
                    s->leaf_ids.push_back(sp.backend_id);
                }
            }
            s->n_inputs_per_backend[(size_t) sp.backend_id]++;
        }
        const int start = gc->n_nodes;
        for (int i = sp.i_start; i < sp.i_end; i++) {
            gc->nodes[gc->n_nodes++] = g->nodes[i];
            s->node_ids.push_back(sched_id(s, g->nodes[i]));
        }
        sp.i_start = start;
        sp.i_end = gc->n_nodes;
    }
    for (int i = 0; i < g->n_leafs; i++) {
        gc->leafs[gc->n_leafs++] = g->leafs[i];
        s->leaf_ids.push_back(sched_id(s, g->leafs[i]));
    }
    return true;
}

/* Every pass, from a graph to graph_copy. false + error; the graph's sources are restored. */
static bool sched_split_graph(sched * s, struct tsr_cgraph * g) {
    sched_restore_sources(s);
    s->allocated = nullptr;
    s->ids.clear();
    s->splits.clear();
    s->graph_copy = nullptr;
    s->planned = false;
    if (!g) return tsr_set_error("tsr_backend_sched: NULL graph");
    if ((size_t) (g->n_nodes + g->n_leafs) > s->graph_size) {
        return tsr_set_error("tsr_backend_sched: the graph has %d nodes and %d leafs, more than the graph_size %zu the scheduler was made for",
                             g->n_nodes, g->n_leafs, s->graph_size);
    }
    bool ok;
    try {
        ok = sched_ensure_ctx(s, g) && sched_assign_fixed(s, g);
        if (ok) {
            sched_expand(s, g, true, false);
            sched_expand(s, g, false, false);
            sched_expand(s, g, true, true);
            sched_expand(s, g, false, true);
            ok = sched_assign_fallbacks(s, g) && sched_assign_rest(s, g) && sched_cut_splits(s, g) &&
                 sched_build_graph_copy(s, g);
        }
    } catch (...) {
        ok = tsr_set_error("tsr_backend_sched: out of memory splitting a graph of %d nodes", g->n_nodes);
    }
    if (!ok) { sched_restore_sources(s); s->splits.clear(); s->graph_copy = nullptr; }
    return ok;
}

/* Fill a split's current input copies once their producers are done and the split's
 * backend is done with the slot (its event, or the whole backend without events). */
static bool sched_copy_inputs(sched * s, const sched_split & sp) {
    tsr_backend_t be = s->backends[(size_t) sp.backend_id];
    tsr_backend_event_t slot_free = s->events[sp.backend_id][s->cur_copy];
    for (int k = 0; k < sp.n_inputs; k++) {
        struct tsr_tensor * in = s->inputs[(size_t) (sp.inputs_begin + k)];
        bool created = false;
        struct tsr_tensor * cp = sched_copy_of(s, in, sp.backend_id, s->cur_copy, &created);
        tsr_backend_synchronize(s->backends[(size_t) sched_id(s, in)]);
        if (slot_free) tsr_backend_event_synchronize(slot_free);
        else tsr_backend_synchronize(be);
        if (!tsr_backend_tensor_copy_staged(in, cp, s->staging, s->staging_size)) return false;
    }
    return true;
}

/* Run one split, in pieces ending at each node the eval callback asks to see. */
static enum tsr_status sched_run_split(sched * s, const sched_split & sp) {
    tsr_backend_t be = s->backends[(size_t) sp.backend_id];
    if (!s->eval_cb) {
        tsr_cgraph v = tsr_graph_view(s->graph_copy, sp.i_start, sp.i_end);
        return tsr_backend_graph_compute_async(be, &v);
    }
    for (int j0 = sp.i_start; j0 < sp.i_end;) {
        int j1 = j0;
        bool wanted = false;
        for (; j1 < sp.i_end && !wanted; j1++) wanted = s->eval_cb(s->graph_copy->nodes[j1], true, s->eval_user);
        j1--;  /* the node asked for, or the split's last */
        tsr_cgraph v = tsr_graph_view(s->graph_copy, j0, j1 + 1);
        const enum tsr_status st = tsr_backend_graph_compute_async(be, &v);
        if (st != TSR_STATUS_SUCCESS) return st;
        tsr_backend_synchronize(be);
        if (wanted && !s->eval_cb(s->graph_copy->nodes[j1], false, s->eval_user)) return TSR_STATUS_ABORTED;
        j0 = j1 + 1;
    }
    return TSR_STATUS_SUCCESS;
}

static enum tsr_status sched_compute_splits(sched * s) {
    enum tsr_status st = TSR_STATUS_SUCCESS;
    for (const sched_split & sp : s->splits) {
        if (!sched_copy_inputs(s, sp)) { st = TSR_STATUS_FAILED; break; }
        st = sched_run_split(s, sp);
        if (st != TSR_STATUS_SUCCESS) break;
        tsr_backend_event_t slot_read = s->events[sp.backend_id][s->cur_copy];
        if (slot_read && sp.n_inputs > 0 && !tsr_backend_event_record(slot_read, s->backends[(size_t) sp.backend_id])) {
            st = TSR_STATUS_FAILED;
            break;
        }
    }
    s->cur_copy = (s->cur_copy + 1) % s->n_copies;
    sched_restore_sources(s);
    s->allocated = nullptr;
    return st;
}

/* The staging block at least as large as the largest copy between two devices (grows only). */
static bool sched_ensure_staging(sched * s) {
    if (s->staging_size >= s->staging_need) return true;
    const struct tsr_host_allocator * a = tsr_get_host_allocator();
    void * block = a->alloc(s->staging_need, 64, a->user);
    if (!block) return tsr_set_error("tsr_backend_sched: out of host memory for %zu bytes of staging between devices", s->staging_need);
    if (s->staging) s->staging_alloc.free(s->staging, s->staging_alloc.user);
    s->staging = block;
    s->staging_size = s->staging_need;
    s->staging_alloc = *a;
    return true;
}

/* Whether alloc_graph will place graph_copy with the cached plan in the present buffers:
 * then no tensor a queued graph still uses moves and no buffer is freed under it. */
static bool sched_plan_stays(sched * s) {
    gallocr * ga = internal(s->galloc);
    if (!ga->have_plan || !ga_matches_key(ga, s->graph_copy, ga->key, s->node_ids.data(), s->leaf_ids.data())) return false;
    for (size_t b = 0; b < ga->bufts.size(); b++) {
        if (ga->pbuffers[b].planned_size > tsr_backend_buffer_get_size(ga->buffers[b])) return false;
    }
    return true;
}

static void sched_free_events(sched * s) {
    for (auto & per_backend : s->events) {
        for (tsr_backend_event_t & e : per_backend) { tsr_backend_event_free(e); e = nullptr; }
    }
}

/* parallel: an event per (backend, slot) on backends whose device has events. */
static bool sched_make_events(sched * s) {
    for (int b = 0; b < s->n_backends; b++) {
        tsr_backend_dev_t dev = tsr_backend_get_device(s->backends[(size_t) b]);
        struct tsr_backend_dev_props props;
        tsr_backend_dev_get_props(dev, &props);
        if (!dev || !props.caps.events) continue;
        for (int c = 0; c < s->n_copies; c++) {
            s->events[b][c] = tsr_backend_event_new(dev);
            if (!s->events[b][c]) { sched_free_events(s); return false; }
        }
    }
    return true;
}

static int sched_backend_index(const sched * s, tsr_backend_t backend) {
    for (int i = 0; i < s->n_backends; i++) if (s->backends[(size_t) i] == backend) return i;
    return -1;
}

} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_backend_offload_op(tsr_backend_t backend, const struct tsr_tensor * op) {
    if (!backend || !op) return false;
    // a registered device decides (its offload_op); a backend without one (a test wrapper) gets
    // the same rule the GPU devices use
    if (tsr_backend_dev_t dev = tsr_backend_get_device(backend)) return tsr_backend_dev_offload_op(dev, op);
    if (tsr_backend_buft_is_host(tsr_backend_get_default_buffer_type(backend))) return false;
    return tsr_backend_offload_by_batch(op) && tsr_backend_supports_op(backend, op);
}

TSR_API_IMPL tsr_backend_sched_t tsr_backend_sched_new(tsr_backend_t * backends, tsr_backend_buffer_type_t * bufts, int n_backends,
                                                       size_t graph_size, bool parallel) {
    if (!backends || n_backends <= 0 || n_backends > TSR_SCHED_MAX_BACKENDS) {
        tsr_set_error("tsr_backend_sched_new: need 1 to %d backends (got %d)", TSR_SCHED_MAX_BACKENDS, n_backends);
        return nullptr;
    }
    if (graph_size == 0) { tsr_set_error("tsr_backend_sched_new: graph_size is 0"); return nullptr; }
    for (int i = 0; i < n_backends; i++) {
        if (!backends[i]) { tsr_set_error("tsr_backend_sched_new: backend %d is NULL", i); return nullptr; }
        for (int j = 0; j < i; j++) {
            if (backends[j] == backends[i]) { tsr_set_error("tsr_backend_sched_new: backend %d (%s) is also backend %d", i, tsr_backend_name(backends[i]), j); return nullptr; }
        }
        tsr_backend_buffer_type_t bt = bufts && bufts[i] ? bufts[i] : tsr_backend_get_default_buffer_type(backends[i]);
        if (!tsr_backend_supports_buft(backends[i], bt)) {
            tsr_set_error("tsr_backend_sched_new: backend %d (%s) cannot use buffer type %s", i, tsr_backend_name(backends[i]), tsr_backend_buft_name(bt));
            return nullptr;
        }
    }
    tsr_impl::sched * s = new (std::nothrow) tsr_impl::sched;
    if (!s) { tsr_set_error("tsr_backend_sched_new: out of memory"); return nullptr; }
    try {
        s->backends.assign(backends, backends + n_backends);
        for (int i = 0; i < n_backends; i++) s->bufts.push_back(bufts && bufts[i] ? bufts[i] : tsr_backend_get_default_buffer_type(backends[i]));
        s->n_backends = n_backends;
        s->n_copies = parallel ? TSR_SCHED_MAX_COPIES : 1;
        s->graph_size = graph_size;
        s->ids.reserve(graph_size);
    } catch (...) {
        delete s;
        tsr_set_error("tsr_backend_sched_new: out of memory for a graph of %zu tensors", graph_size);
        return nullptr;
    }
    s->galloc = tsr_gallocr_new_n(s->bufts.data(), n_backends);
    if (!s->galloc) { delete s; return nullptr; }
    if (parallel && !tsr_impl::sched_make_events(s)) {
        tsr_gallocr_free(s->galloc);
        delete s;
        return nullptr;
    }
    tsr_gallocr_set_time_budget(s->galloc, 10.0);
    return tsr_impl::handle(s);
}

TSR_API_IMPL void tsr_backend_sched_free(tsr_backend_sched_t sched_h) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s) return;
    /* only with work queued are the backends touched: they may be freed already otherwise */
    if (s->queued) tsr_backend_sched_synchronize(sched_h);
    /* a graph allocated and not computed still reads the copies freed below */
    tsr_impl::sched_restore_sources(s);
    tsr_impl::sched_free_events(s);
    if (s->staging) s->staging_alloc.free(s->staging, s->staging_alloc.user);
    tsr_gallocr_free(s->galloc);
    tsr_free(s->ctx);
    delete s;
}

TSR_API_IMPL bool tsr_backend_sched_reserve(tsr_backend_sched_t sched_h, struct tsr_cgraph * measure_graph) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s) return tsr_set_error("tsr_backend_sched_reserve: NULL scheduler");
    tsr_backend_sched_synchronize(sched_h);
    if (!tsr_impl::sched_split_graph(s, measure_graph)) return false;
    bool ok = tsr_impl::sched_ensure_staging(s) && tsr_gallocr_reserve_n(s->galloc, s->graph_copy, s->node_ids.data(), s->leaf_ids.data());
    for (size_t k = 0; ok && k < s->splits.size(); k++) {
        const tsr_impl::sched_split & sp = s->splits[k];
        tsr_cgraph v = tsr_graph_view(s->graph_copy, sp.i_start, sp.i_end);
        ok = tsr_backend_graph_reserve(s->backends[(size_t) sp.backend_id], &v);
    }
    s->planned = ok;
    tsr_impl::sched_restore_sources(s);
    return ok;
}

TSR_API_IMPL int tsr_backend_sched_get_n_backends(tsr_backend_sched_t sched_h) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s ? s->n_backends : 0;
}
TSR_API_IMPL tsr_backend_t tsr_backend_sched_get_backend(tsr_backend_sched_t sched_h, int i) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s && i >= 0 && i < s->n_backends ? s->backends[(size_t) i] : nullptr;
}
TSR_API_IMPL int tsr_backend_sched_get_n_splits(tsr_backend_sched_t sched_h) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s ? (int) s->splits.size() : 0;
}
TSR_API_IMPL int tsr_backend_sched_get_n_split_inputs(tsr_backend_sched_t sched_h) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s ? (int) s->inputs.size() : 0;
}
TSR_API_IMPL tsr_backend_t tsr_backend_sched_get_split_backend(tsr_backend_sched_t sched_h, int i) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s && i >= 0 && i < (int) s->splits.size() ? s->backends[(size_t) s->splits[(size_t) i].backend_id] : nullptr;
}
TSR_API_IMPL int tsr_backend_sched_get_split_n_inputs(tsr_backend_sched_t sched_h, int i) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s && i >= 0 && i < (int) s->splits.size() ? s->splits[(size_t) i].n_inputs : -1;
}
TSR_API_IMPL int tsr_backend_sched_get_n_copies(tsr_backend_sched_t sched_h) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s ? s->n_copies : 0;
}

TSR_API_IMPL size_t tsr_backend_sched_get_staging_size(tsr_backend_sched_t sched_h) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    return s ? s->staging_size : 0;
}

TSR_API_IMPL size_t tsr_backend_sched_get_buffer_size(tsr_backend_sched_t sched_h, tsr_backend_t backend) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    const int b = s ? tsr_impl::sched_backend_index(s, backend) : -1;
    return b < 0 ? 0 : tsr_gallocr_get_buffer_size(s->galloc, b);
}

TSR_API_IMPL bool tsr_backend_sched_get_buffer_info(tsr_backend_sched_t sched_h, tsr_backend_t backend,
                                                    struct tsr_backend_sched_buffer_info * info) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s || !info) return tsr_set_error("tsr_backend_sched_get_buffer_info: NULL scheduler or info");
    const int b = tsr_impl::sched_backend_index(s, backend);
    if (b < 0) return tsr_set_error("tsr_backend_sched_get_buffer_info: backend %s is not in the scheduler", tsr_backend_name(backend));
    const struct tsr_plan * plan = tsr_gallocr_get_plan(s->galloc);
    if (!plan || s->input_bytes.empty()) return tsr_set_error("tsr_backend_sched_get_buffer_info: no plan yet (reserve or alloc_graph first)");
    info->buffer_size = tsr_gallocr_get_buffer_size(s->galloc, b);
    info->planned_size = plan->buffers[b].planned_size;
    info->lower_bound = plan->buffers[b].lower_bound;
    info->input_bytes = s->input_bytes[(size_t) b];
    info->n_inputs = s->n_inputs_per_backend[(size_t) b];
    return true;
}

TSR_API_IMPL void tsr_backend_sched_set_tensor_backend(tsr_backend_sched_t sched_h, struct tsr_tensor * node, tsr_backend_t backend) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s || !node) return;
    const int b = tsr_impl::sched_backend_index(s, backend);
    if (b < 0) { tsr_set_error("tsr_backend_sched_set_tensor_backend: backend %s is not in the scheduler", tsr_backend_name(backend)); return; }
    try { s->user_ids[node] = b; } catch (...) { tsr_set_error("tsr_backend_sched_set_tensor_backend: out of memory"); }
}

TSR_API_IMPL tsr_backend_t tsr_backend_sched_get_tensor_backend(tsr_backend_sched_t sched_h, struct tsr_tensor * node) {
    const tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s || !node) return nullptr;
    int b = tsr_impl::sched_id(s, node);
    if (b < 0) {
        auto u = s->user_ids.find(node);
        if (u != s->user_ids.end()) b = u->second;
    }
    return b < 0 ? nullptr : s->backends[(size_t) b];
}

TSR_API_IMPL bool tsr_backend_sched_alloc_graph(tsr_backend_sched_t sched_h, struct tsr_cgraph * graph) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s) return tsr_set_error("tsr_backend_sched_alloc_graph: NULL scheduler");
    /* without slots and events, nothing may be queued while the host writes copies */
    if (s->n_copies == 1) tsr_backend_sched_synchronize(sched_h);
    if (!tsr_impl::sched_split_graph(s, graph)) return false;
    if (s->n_copies > 1 && !tsr_impl::sched_plan_stays(s)) tsr_backend_sched_synchronize(sched_h);
    if (!tsr_impl::sched_ensure_staging(s)) { tsr_impl::sched_restore_sources(s); return false; }
    if (!tsr_impl::ga_alloc_graph_ids(tsr_impl::internal(s->galloc), s->graph_copy, s->node_ids.data(), s->leaf_ids.data())) {
        tsr_impl::sched_restore_sources(s);
        return false;
    }
    s->planned = true;
    s->allocated = graph;
    return true;
}

TSR_API_IMPL enum tsr_status tsr_backend_sched_graph_compute_async(tsr_backend_sched_t sched_h, struct tsr_cgraph * graph) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s || !graph) { tsr_set_error("tsr_backend_sched_graph_compute: NULL scheduler or graph"); return TSR_STATUS_FAILED; }
    if (s->allocated != graph && !tsr_backend_sched_alloc_graph(sched_h, graph)) return TSR_STATUS_ALLOC_FAILED;
    s->queued = true;
    return tsr_impl::sched_compute_splits(s);
}

TSR_API_IMPL enum tsr_status tsr_backend_sched_graph_compute(tsr_backend_sched_t sched_h, struct tsr_cgraph * graph) {
    const enum tsr_status st = tsr_backend_sched_graph_compute_async(sched_h, graph);
    tsr_backend_sched_synchronize(sched_h);
    return st;
}

TSR_API_IMPL void tsr_backend_sched_synchronize(tsr_backend_sched_t sched_h) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s) return;
    for (tsr_backend_t b : s->backends) tsr_backend_synchronize(b);
    s->queued = false;
}

TSR_API_IMPL void tsr_backend_sched_reset(tsr_backend_sched_t sched_h) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s) return;
    tsr_impl::sched_restore_sources(s);
    s->allocated = nullptr;
    s->ids.clear();
    s->user_ids.clear();
}

TSR_API_IMPL void tsr_backend_sched_set_eval_callback(tsr_backend_sched_t sched_h, tsr_backend_sched_eval_callback callback,
                                                      void * user_data) {
    tsr_impl::sched * s = tsr_impl::internal(sched_h);
    if (!s) return;
    s->eval_cb = callback;
    s->eval_user = user_data;
}
