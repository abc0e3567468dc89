/*
 * alloc.inl - tallocr and gallocr (see alloc.h). gallocr plans a whole graph:
 *
 *  1. Which tensors it owns: every node and leaf without data, buffer or view_src.
 *     Views own nothing: they alias their root source and extend its live range.
 *  2. Live ranges in execution order (step i = node i): a node is live from its step to
 *     its last consumer (through views too); leafs and INPUT tensors from step 0;
 *     OUTPUT tensors and nodes nobody consumes (the graph's results, e.g. its final
 *     node) to the last step, and they are never reused.
 *  3. In place: a node whose op allows it (tsr_op_can_inplace) takes over the memory of
 *     a src that dies at this step (directly, or through a contiguous view covering the
 *     whole source, e.g. rope(reshape(x))), if that src is a node, not INPUT/OUTPUT, in
 *     the same buffer and of the same aligned size. The two share one slot.
 *  4. Slots are packed per buffer with tsr_pack (packing.inl).
 *  5. The result is cached as a flat list of (tensor index, buffer, offset) together
 *     with a key of the graph (topology, shapes, flags, buffer ids): alloc_graph on a
 *     graph with the same key only re-applies the offsets.
 */

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

/* ---- tallocr ------------------------------------------------------------------------- */

TSR_API_IMPL struct tsr_tallocr tsr_tallocr_new(tsr_backend_buffer_t buffer) {
    struct tsr_tallocr t;
    t.buffer = buffer;
    t.base = tsr_backend_buffer_get_base(buffer);
    t.alignment = tsr_backend_buffer_get_alignment(buffer);
    t.offset = 0;
    if (t.alignment == 0) t.alignment = 1;
    /* the first tensor starts aligned even when the base is not */
    const size_t mis = (size_t) ((uintptr_t) t.base % t.alignment);
    if (mis) t.offset = t.alignment - mis;
    return t;
}

TSR_API_IMPL bool tsr_tallocr_alloc(struct tsr_tallocr * talloc, struct tsr_tensor * tensor) {
    if (!talloc || !talloc->buffer || !tensor) return tsr_set_error("tsr_tallocr_alloc: NULL allocator, buffer or tensor");
    const size_t size = tsr_backend_buffer_get_alloc_size(talloc->buffer, tensor);
    const size_t cap = tsr_backend_buffer_get_size(talloc->buffer);
    const size_t padded = TSR_PAD(size, talloc->alignment);
    if (talloc->offset > cap || padded > cap - talloc->offset) {
        return tsr_set_error("tsr_tallocr_alloc: not enough space in buffer '%s' for tensor '%s': needed %zu bytes, "
                             "%zu of %zu used, %zu free",
                             tsr_backend_buffer_name(talloc->buffer), tensor->name, padded, talloc->offset, cap,
                             talloc->offset > cap ? (size_t) 0 : cap - talloc->offset);
    }
    if (!tsr_backend_tensor_alloc(talloc->buffer, tensor, (char *) talloc->base + talloc->offset)) return false;
    talloc->offset += padded;
    return true;
}

/* ---- in-place contract ----------------------------------------------------------------- */

TSR_API_IMPL bool tsr_op_can_inplace(const struct tsr_tensor * node, int src_index) {
    if (!node || src_index < 0 || src_index >= TSR_MAX_SRC) return false;
    const struct tsr_tensor * s = node->src[src_index];
    if (!s || node->view_src) return false;
    if (s->type != node->type || !tsr_are_same_shape(s, node)) return false;
    if (!tsr_is_contiguous(s) || !tsr_is_contiguous(node)) return false;
    switch (node->op) {
        case TSR_OP_ADD:
        case TSR_OP_SUB:
        case TSR_OP_MUL:
        case TSR_OP_DIV:
            return src_index <= 1;
        case TSR_OP_GLU:
            return node->src[1] != nullptr && src_index <= 1;  /* split gate only */
        case TSR_OP_SCALE:
        case TSR_OP_SQR:
        case TSR_OP_SQRT:
        case TSR_OP_LOG:
        case TSR_OP_UNARY:
        case TSR_OP_CLAMP:
        case TSR_OP_NORM:
        case TSR_OP_RMS_NORM:
        case TSR_OP_SOFT_MAX:
        case TSR_OP_ROPE:
        case TSR_OP_DIAG_MASK_INF:
        case TSR_OP_DUP:
        case TSR_OP_CONT:
        /* issue 17 part B */
        case TSR_OP_ADD_REL_POS:   /* each element reads only its own a */
        /* issue 17 part A: elementwise, or a row read whole before it is written (cumsum,
         * l2_norm), or a copy of a into which b's view is written afterwards (acc, set) */
        case TSR_OP_SIN:
        case TSR_OP_COS:
        case TSR_OP_LEAKY_RELU:
        case TSR_OP_FILL:
        case TSR_OP_TRI:
        case TSR_OP_CUMSUM:
        case TSR_OP_L2_NORM:
        case TSR_OP_ACC:
        case TSR_OP_SET:
            return src_index == 0;
        default:
            return false;
    }
}

/* ---- gallocr ----------------------------------------------------------------------------- */

TSR_IMPL_NS_BEGIN
TSR_IMPL_HANDLE(tsr_gallocr, gallocr)

struct gallocr {
    vec<tsr_backend_buffer_type_t> bufts;
    vec<tsr_backend_buffer_t> buffers;
    int n_reallocs = 0;
    double time_budget_ms = 10.0;

    /* the cached plan: owned tensors first, then views, in graph order */
    struct entry { int idx; int buffer_id; size_t offset; };  /* idx >= 0: node, < 0: leaf -1-idx */
    std::vector<entry> owned, views;
    std::vector<uint64_t> key;
    bool have_plan = false;
    std::vector<int> last_node_ids, last_leaf_ids;

    /* execution order (order.inl): reserve reorders the graph when enabled; order_perm is
     * the order it applied (empty: none), order_key the key of the graph before it */
    bool order_enabled = false;
    struct tsr_order_params order_params = {};
    std::vector<int> order_perm;
    std::vector<uint64_t> order_key;

    /* the readable plan */
    vec<struct tsr_plan_tensor> ptensors;
    std::vector<int> ptensor_idx;            /* graph index of each plan tensor (as entry::idx) */
    std::vector<std::string> pnames;
    vec<struct tsr_plan_buffer> pbuffers;
    struct tsr_plan plan = {0, nullptr, 0, nullptr, 0};
};

namespace {

static inline struct tsr_tensor * ga_tensor(struct tsr_cgraph * g, int idx) {
    return idx >= 0 ? g->nodes[idx] : g->leafs[-1 - idx];
}

static inline bool ga_is_ours(const gallocr * ga, const struct tsr_tensor * t) {
    if (!t->buffer) return false;
    for (tsr_backend_buffer_t b : ga->buffers) if (b && t->buffer == b) return true;
    return false;
}

/* Is t already placed by someone else (weights, user memory)? Our own earlier placements do
 * not count, so a graph re-run through alloc_graph keeps its plan. */
static inline bool ga_external(const gallocr * ga, const struct tsr_tensor * t) {
    const struct tsr_tensor * r = t->view_src ? t->view_src : t;
    if (ga_is_ours(ga, r)) return false;
    return r->data != nullptr || r->buffer != nullptr;
}

/* The key of a graph: everything the plan depends on. Pointers are kept relative to the
 * first node, so a graph rebuilt the same way in a reset context has the same key. */
struct ga_keyer {
    std::vector<uint64_t> * out;     /* build mode */
    const std::vector<uint64_t> * cmp;  /* compare mode */
    size_t pos = 0;
    bool equal = true;
    inline void put(uint64_t w) {
        if (out) { out->push_back(w); return; }
        if (equal && (pos >= cmp->size() || (*cmp)[pos] != w)) equal = false;
        pos++;
    }
};

static inline void ga_key_tensor(ga_keyer & k, const gallocr * ga, const struct tsr_tensor * t, intptr_t base) {
    k.put((uint64_t) (intptr_t) ((intptr_t) t - base));
    const bool ext = ga_external(ga, t);
    k.put((uint64_t) t->op | ((uint64_t) t->type << 8) | ((uint64_t) (uint32_t) t->flags << 16) | ((uint64_t) ext << 48));
    if (ext && t->data) return;  /* placed by someone else (weights): only its identity matters */
    for (int d = 0; d < TSR_MAX_DIMS; d++) { k.put((uint64_t) t->ne[d]); k.put((uint64_t) t->nb[d]); }
    k.put((uint64_t) (uint32_t) t->op_params[0] | ((uint64_t) (uint32_t) t->op_params[1] << 32));
    k.put(t->view_src ? (uint64_t) ((intptr_t) t->view_src - base) : ~(uint64_t) 0);
    k.put((uint64_t) t->view_offs);
    int ns = TSR_MAX_SRC;
    while (ns > 0 && !t->src[ns - 1]) ns--;
    k.put((uint64_t) ns);
    for (int s = 0; s < ns; s++) k.put(t->src[s] ? (uint64_t) ((intptr_t) t->src[s] - base) : ~(uint64_t) 0);
}

static inline void ga_key_graph(ga_keyer & k, const gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids) {
    const intptr_t base = g->n_nodes > 0 ? (intptr_t) g->nodes[0] : (g->n_leafs > 0 ? (intptr_t) g->leafs[0] : 0);
    k.put((uint64_t) g->n_nodes | ((uint64_t) g->n_leafs << 32));
    for (int i = 0; i < g->n_nodes; i++) { ga_key_tensor(k, ga, g->nodes[i], base); k.put((uint64_t) (node_ids ? node_ids[i] : 0)); }
    for (int i = 0; i < g->n_leafs; i++) { ga_key_tensor(k, ga, g->leafs[i], base); k.put((uint64_t) (leaf_ids ? leaf_ids[i] : 0)); }
}

/* Put t at base + offset of buffer b, bypassing the checks of tsr_backend_tensor_alloc
 * (the plan was checked against the buffer size when it was made). */
static inline bool ga_place(tsr_backend_buffer_t b, struct tsr_tensor * t, size_t offset) {
    t->buffer = b;
    t->data = (char *) tsr_backend_buffer_get_base(b) + offset;
    return b->iface.init_tensor ? b->iface.init_tensor(b, t) : true;
}

static inline bool ga_apply(gallocr * ga, struct tsr_cgraph * g) {
    for (const gallocr::entry & e : ga->owned) {
        struct tsr_tensor * t = ga_tensor(g, e.idx);
        if (t->data && !ga_is_ours(ga, t)) continue;
        if (!ga_place(ga->buffers[(size_t) e.buffer_id], t, e.offset)) return false;
    }
    for (const gallocr::entry & e : ga->views) {
        struct tsr_tensor * t = ga_tensor(g, e.idx);
        struct tsr_tensor * r = t->view_src;
        if (t->data && !ga_is_ours(ga, t)) continue;
        if (!r->data) return tsr_set_error("gallocr: view '%s' of '%s': the source has no data", t->name, r->name);
        t->buffer = r->buffer;
        t->data = (char *) r->data + t->view_offs;
        if (t->buffer && t->buffer->iface.init_tensor && !t->buffer->iface.init_tensor(t->buffer, t)) return false;
    }
    return true;
}

struct ga_info {
    int idx;          /* graph index (entry::idx encoding) */
    int buffer_id;
    int first, last;
    bool owned;
    bool consumed;
    int slot;         /* slot index */
    int inplace_of;   /* info index of the tensor whose memory it took, or -1 */
    size_t size;      /* aligned */
};

/* What ga_plan's steps share: one ga_info per graph tensor (leafs, then nodes) and where
 * each tensor's is. */
struct ga_tensors {
    std::vector<ga_info> info;
    hash_map<const struct tsr_tensor *, int> where;  /* tensor -> info index */

    /* the info index of t's root (t itself, or its view source); -1: not in the graph */
    int root_of(const struct tsr_tensor * t) const {
        const struct tsr_tensor * r = t->view_src ? t->view_src : t;
        auto it = where.find(r);
        return it == where.end() ? -1 : it->second;
    }
};

/* A piece of memory to pack: one owned tensor, or several in place of one another. */
struct ga_slot { int buffer_id; int first, last; size_t size; };

/* ga_plan, step 1: every buffer id names one of ga's buffer types. */
static bool ga_check_ids(const gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids) {
    const int n_bufs = (int) ga->bufts.size();
    for (int i = 0; i < g->n_nodes; i++) {
        if (node_ids && (node_ids[i] < 0 || node_ids[i] >= n_bufs)) {
            return tsr_set_error("gallocr: node %d ('%s') has buffer id %d, but the gallocr has %d buffer type(s)", i,
                                 g->nodes[i]->name, node_ids[i], n_bufs);
        }
    }
    for (int i = 0; i < g->n_leafs; i++) {
        if (leaf_ids && (leaf_ids[i] < 0 || leaf_ids[i] >= n_bufs)) {
            return tsr_set_error("gallocr: leaf %d ('%s') has buffer id %d, but the gallocr has %d buffer type(s)", i,
                                 g->leafs[i]->name, leaf_ids[i], n_bufs);
        }
    }
    return true;
}

/* ga_plan, step 2: the info of every leaf and node (owned?, aligned size, live from its step). */
static void ga_collect(const gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids, ga_tensors & ts) {
    ts.where.reserve((size_t) (g->n_nodes + g->n_leafs) * 2);
    ts.info.reserve((size_t) (g->n_nodes + g->n_leafs));
    auto add = [&](struct tsr_tensor * t, int idx, int bid) {
        ga_info in;
        in.idx = idx;
        in.buffer_id = bid;
        in.first = idx >= 0 ? idx : 0;
        in.last = in.first;
        in.owned = !t->view_src && !ga_external(ga, t);
        in.consumed = false;
        in.slot = -1;
        in.inplace_of = -1;
        const tsr_backend_buffer_type_t bt = ga->bufts[(size_t) bid];
        const size_t al = std::max<size_t>(1, tsr_backend_buft_get_alignment(bt));
        in.size = TSR_PAD(tsr_backend_buft_get_alloc_size(bt, t), al);
        if ((t->flags & TSR_TENSOR_FLAG_INPUT) != 0) in.first = 0;
        ts.where[t] = (int) ts.info.size();
        ts.info.push_back(in);
    };
    for (int i = 0; i < g->n_leafs; i++) add(g->leafs[i], -1 - i, leaf_ids ? leaf_ids[i] : 0);
    for (int i = 0; i < g->n_nodes; i++) add(g->nodes[i], i, node_ids ? node_ids[i] : 0);
}

/* ga_plan, step 3: live ranges: each root lives to its last consumer (through views);
 * outputs and results to the end. n_steps: "the end". */
static bool ga_live_ranges(const gallocr * ga, struct tsr_cgraph * g, int n_steps, ga_tensors & ts) {
    std::vector<ga_info> & info = ts.info;
    for (int i = 0; i < g->n_nodes; i++) {
        struct tsr_tensor * t = g->nodes[i];
        for (int s = 0; s < TSR_MAX_SRC; s++) {
            if (!t->src[s]) continue;
            const int r = ts.root_of(t->src[s]);
            if (r < 0) {
                if (!ga_external(ga, t->src[s])) {
                    return tsr_set_error("gallocr: node %d ('%s') uses '%s', which is not in the graph and has no data", i,
                                         t->name, t->src[s]->name);
                }
                continue;
            }
            info[(size_t) r].last = std::max(info[(size_t) r].last, i);
            info[(size_t) r].consumed = true;
            auto d = ts.where.find(t->src[s]);
            if (d != ts.where.end()) info[(size_t) d->second].consumed = true;
        }
        if (t->view_src) {
            const int r = ts.root_of(t);
            if (r >= 0) {
                info[(size_t) r].last = std::max(info[(size_t) r].last, i);
                if (t->flags & TSR_TENSOR_FLAG_OUTPUT) info[(size_t) r].last = n_steps;
            } else if (!ga_external(ga, t)) {
                return tsr_set_error("gallocr: view '%s' has a source '%s' that is not in the graph and has no data", t->name,
                                     t->view_src->name);
            }
        }
    }
    for (ga_info & in : info) {
        struct tsr_tensor * t = ga_tensor(g, in.idx);
        if ((t->flags & TSR_TENSOR_FLAG_OUTPUT) || (in.idx >= 0 && !in.consumed)) in.last = n_steps;
    }
    /* a view that is a result keeps its root alive to the end. "The end" is n_steps, one
     * past the last step, so that even the last node cannot take a result over in place
     * (the plan reports it as n_steps - 1). */
    for (const ga_info & in : info) {
        struct tsr_tensor * t = ga_tensor(g, in.idx);
        if (t->view_src && in.idx >= 0 && in.last == n_steps) {
            const int r = ts.root_of(t);
            if (r >= 0) info[(size_t) r].last = n_steps;
        }
    }
    return true;
}

/* May node i take over the memory of its src s in place, should that src die at step i?
 * (tsr_op_can_inplace; a root of the same buffer and size, not INPUT/OUTPUT, directly or
 * through a contiguous view of all of it.) The info index of that root, or -1. The order
 * optimiser (order.inl) asks the same question for orders other than the graph's. */
static int ga_inplace_candidate(struct tsr_cgraph * g, int i, int s, const ga_tensors & ts, const ga_info & in) {
    struct tsr_tensor * t = g->nodes[i];
    struct tsr_tensor * src = t->src[s];
    if (!src || !tsr_op_can_inplace(t, s)) return -1;
    const int r = ts.root_of(src);
    if (r < 0) return -1;
    const ga_info & rin = ts.info[(size_t) r];
    struct tsr_tensor * rt = ga_tensor(g, rin.idx);
    if (!rin.owned || rin.idx < 0) return -1;
    if (rt->flags & (TSR_TENSOR_FLAG_INPUT | TSR_TENSOR_FLAG_OUTPUT)) return -1;
    if (rin.buffer_id != in.buffer_id || rin.size != in.size) return -1;
    if (src->view_src && (src->view_offs != 0 || tsr_nbytes(src) != tsr_nbytes(rt) || !tsr_is_contiguous(rt) ||
                          rt->type != t->type)) return -1;
    return r;
}

/* ga_plan, step 4, for node i: the slot of a src that dies here and that this node may take
 * over in place (ga_inplace_candidate). Sets in.slot / in.inplace_of. */
static void ga_take_inplace(struct tsr_cgraph * g, int i, ga_tensors & ts, std::vector<ga_slot> & slots, ga_info & in) {
    for (int s = 0; s < TSR_MAX_SRC && in.slot < 0; s++) {
        const int r = ga_inplace_candidate(g, i, s, ts, in);
        if (r < 0) continue;
        const ga_info & rin = ts.info[(size_t) r];
        if (rin.slot < 0 || rin.last != i) continue;
        if (slots[(size_t) rin.slot].last != i) continue;  /* slot still needed later */
        in.slot = rin.slot;
        in.inplace_of = r;
        slots[(size_t) rin.slot].last = std::max(slots[(size_t) rin.slot].last, in.last);
    }
}

/* ga_plan, step 4: a slot for every owned tensor (leafs first: they live from step 0),
 * shared where a node works in place. */
static void ga_assign_slots(struct tsr_cgraph * g, ga_tensors & ts, std::vector<ga_slot> & slots) {
    for (ga_info & in : ts.info) {
        if (!in.owned || in.idx >= 0) continue;
        in.slot = (int) slots.size();
        slots.push_back(ga_slot{in.buffer_id, in.first, in.last, in.size});
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const int ii = ts.where[g->nodes[i]];
        ga_info & in = ts.info[(size_t) ii];
        if (!in.owned) continue;
        if (!(g->nodes[i]->flags & TSR_TENSOR_FLAG_INPUT)) ga_take_inplace(g, i, ts, slots, in);
        if (in.slot < 0) {
            in.slot = (int) slots.size();
            slots.push_back(ga_slot{in.buffer_id, in.first, in.last, in.size});
        }
    }
}

/* ga_plan, step 5: pack each buffer's slots (slot_off: each slot's offset; ga->pbuffers:
 * each buffer's alignment, planned size and lower bound). */
static bool ga_pack_buffers(gallocr * ga, const std::vector<ga_slot> & slots, double budget_ms, std::vector<size_t> & slot_off) {
    const int n_bufs = (int) ga->bufts.size();
    slot_off.assign(slots.size(), 0);
    ga->pbuffers.assign((size_t) n_bufs, tsr_plan_buffer{0, 0, 0, 1});
    for (int b = 0; b < n_bufs; b++) {
        vec<struct tsr_pack_item> items;
        std::vector<int> which;
        for (size_t s = 0; s < slots.size(); s++) {
            if (slots[s].buffer_id != b) continue;
            items.push_back(tsr_pack_item{slots[s].first, (int64_t) slots[s].last + 1, slots[s].size, 0});
            which.push_back((int) s);
        }
        const size_t al = std::max<size_t>(1, tsr_backend_buft_get_alignment(ga->bufts[(size_t) b]));
        struct tsr_plan_buffer & pb = ga->pbuffers[(size_t) b];
        pb.alignment = al;
        if (items.empty()) continue;
        const size_t peak = tsr_pack(items.data(), items.size(), al, budget_ms);
        if (peak == SIZE_MAX) return false;
        for (size_t k = 0; k < items.size(); k++) slot_off[(size_t) which[k]] = items[k].offset;
        pb.planned_size = peak;
        pb.lower_bound = tsr_pack_lower_bound(items.data(), items.size(), al);
        const size_t max = tsr_backend_buft_get_max_size(ga->bufts[(size_t) b]);
        if (peak > max) {
            return tsr_set_error("gallocr: buffer %d (%s) needs %zu bytes, more than its max size %zu", b,
                                 tsr_backend_buft_name(ga->bufts[(size_t) b]), peak, max);
        }
    }
    return true;
}

/* ga_plan, step 6: the cache (owned tensors with their offsets, then views) and the
 * readable plan. */
static void ga_store_plan(gallocr * ga, struct tsr_cgraph * g, const std::vector<ga_info> & info,
                          const std::vector<size_t> & slot_off, int n_steps) {
    ga->owned.clear();
    ga->views.clear();
    ga->ptensors.clear();
    ga->ptensor_idx.clear();
    ga->pnames.clear();
    std::vector<int> plan_pos(info.size(), -1);
    for (size_t ii = 0; ii < info.size(); ii++) {
        const ga_info & in = info[ii];
        struct tsr_tensor * t = ga_tensor(g, in.idx);
        if (in.owned) {
            const size_t off = slot_off[(size_t) in.slot];
            ga->owned.push_back(gallocr::entry{in.idx, in.buffer_id, off});
            plan_pos[ii] = (int) ga->ptensors.size();
            struct tsr_plan_tensor pt;
            pt.tensor = t;
            pt.name = nullptr;
            pt.buffer_id = in.buffer_id;
            pt.offset = off;
            pt.size = in.size;
            pt.first = in.first;
            pt.last = std::min(in.last, n_steps - 1);
            pt.inplace = in.inplace_of >= 0;
            pt.inplace_of = -1;
            ga->ptensors.push_back(pt);
            ga->ptensor_idx.push_back(in.idx);
            ga->pnames.push_back(t->name);
            ga->pbuffers[(size_t) in.buffer_id].no_reuse_size += in.size;
        } else if (t->view_src && (!ga_external(ga, t) || !t->data)) {
            ga->views.push_back(gallocr::entry{in.idx, in.buffer_id, 0});
        }
    }
    for (size_t ii = 0; ii < info.size(); ii++) {
        if (plan_pos[ii] >= 0 && info[ii].inplace_of >= 0) ga->ptensors[(size_t) plan_pos[ii]].inplace_of = plan_pos[(size_t) info[ii].inplace_of];
    }
    /* views in node order (a view of a view-node needs that node first: nodes are topological) */
    std::stable_sort(ga->views.begin(), ga->views.end(), [](const gallocr::entry & a, const gallocr::entry & b) {
        const int ka = a.idx >= 0 ? a.idx : -1, kb = b.idx >= 0 ? b.idx : -1;
        return ka < kb;
    });
    for (size_t i = 0; i < ga->ptensors.size(); i++) ga->ptensors[i].name = ga->pnames[i].c_str();
    ga->plan.n_tensors = (int) ga->ptensors.size();
    ga->plan.tensors = ga->ptensors.data();
    ga->plan.n_buffers = (int) ga->bufts.size();
    ga->plan.buffers = ga->pbuffers.data();
    ga->plan.n_steps = n_steps;
}

/* Plan g: fills ga's cache and readable plan (ga_size_buffers then grows the buffers to it). */
static bool ga_plan(gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids, double budget_ms) {
    const int n_steps = std::max(1, g->n_nodes);
    if (!ga_check_ids(ga, g, node_ids, leaf_ids)) return false;
    ga_tensors ts;
    ga_collect(ga, g, node_ids, leaf_ids, ts);
    if (!ga_live_ranges(ga, g, n_steps, ts)) return false;
    std::vector<ga_slot> slots;
    ga_assign_slots(g, ts, slots);
    std::vector<size_t> slot_off;
    if (!ga_pack_buffers(ga, slots, budget_ms, slot_off)) return false;
    ga_store_plan(ga, g, ts.info, slot_off, n_steps);

    ga->key.clear();
    ga_keyer k;
    k.out = &ga->key;
    k.cmp = nullptr;
    ga_key_graph(k, ga, g, node_ids, leaf_ids);
    ga->have_plan = true;
    return true;
}

/* Grow buffers to the plan (never shrink). */
static bool ga_size_buffers(gallocr * ga) {
    for (size_t b = 0; b < ga->bufts.size(); b++) {
        /* A plan of 0 bytes whose tensors all have 0 elements still needs a buffer to place
         * them in (an address nothing reads or writes): the smallest one the type makes. A
         * buffer no tensor uses gets none. */
        bool used = false;
        for (const gallocr::entry & e : ga->owned) used = used || e.buffer_id == (int) b;
        const size_t planned = ga->pbuffers[b].planned_size;
        const size_t need = planned ? planned : used ? tsr_backend_buft_get_alignment(ga->bufts[b]) : 0;
        const size_t cur = ga->buffers[b] ? tsr_backend_buffer_get_size(ga->buffers[b]) : 0;
        if (need == 0 || (ga->buffers[b] && cur >= need)) continue;
        tsr_backend_buffer_free(ga->buffers[b]);
        ga->buffers[b] = nullptr;
        tsr_backend_buffer_t nb = tsr_backend_buft_alloc_buffer(ga->bufts[b], need);
        if (!nb) {
            ga->have_plan = false;
            return false;
        }
        tsr_backend_buffer_set_usage(nb, TSR_BUFFER_USAGE_COMPUTE);
        ga->buffers[b] = nb;
        ga->n_reallocs++;
    }
    return true;
}

} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL tsr_gallocr_t tsr_gallocr_new_n(tsr_backend_buffer_type_t * bufts, int n_bufs) {
    if (!bufts || n_bufs <= 0) { tsr_set_error("tsr_gallocr_new_n: need at least one buffer type (got %d)", n_bufs); return nullptr; }
    for (int i = 0; i < n_bufs; i++) {
        if (!bufts[i]) { tsr_set_error("tsr_gallocr_new_n: buffer type %d is NULL", i); return nullptr; }
    }
    tsr_impl::gallocr * ga = new (std::nothrow) tsr_impl::gallocr;
    if (!ga) { tsr_set_error("tsr_gallocr_new: out of memory"); return nullptr; }
    try {
        ga->bufts.assign(bufts, bufts + n_bufs);
        ga->buffers.assign((size_t) n_bufs, nullptr);
        ga->pbuffers.assign((size_t) n_bufs, tsr_plan_buffer{0, 0, 0, 1});
    } catch (...) {
        delete ga;
        tsr_set_error("tsr_gallocr_new_n: out of memory for %d buffer types", n_bufs);
        return nullptr;
    }
    return tsr_impl::handle(ga);
}
TSR_API_IMPL tsr_gallocr_t tsr_gallocr_new(tsr_backend_buffer_type_t buft) { return tsr_gallocr_new_n(&buft, 1); }

TSR_API_IMPL void tsr_gallocr_free(tsr_gallocr_t galloc_h) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (!galloc) return;
    for (tsr_backend_buffer_t b : galloc->buffers) tsr_backend_buffer_free(b);
    delete galloc;
}

TSR_API_IMPL void tsr_gallocr_set_time_budget(tsr_gallocr_t galloc_h, double ms) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (galloc) galloc->time_budget_ms = ms < 0 ? 0 : ms;
}

TSR_IMPL_NS_BEGIN
namespace {
/* order.inl */
static bool ga_reorder_for_reserve(gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids);
static void ord_apply(struct tsr_cgraph * g, const std::vector<int> & order);

static bool ga_reserve(gallocr * galloc, struct tsr_cgraph * graph, const int * node_buffer_ids, const int * leaf_buffer_ids,
                       double budget_ms, bool reorder) {
    if (!galloc || !graph) return tsr_set_error("tsr_gallocr_reserve: NULL gallocr or graph");
    bool ok;
    try {
        if (!reorder) { galloc->order_perm.clear(); galloc->order_key.clear(); }
        ok = (!reorder || tsr_impl::ga_reorder_for_reserve(galloc, graph, node_buffer_ids, leaf_buffer_ids)) &&
             tsr_impl::ga_plan(galloc, graph, node_buffer_ids, leaf_buffer_ids, budget_ms);
        if (ok) {
            galloc->last_node_ids.assign(node_buffer_ids ? node_buffer_ids : nullptr,
                                         node_buffer_ids ? node_buffer_ids + graph->n_nodes : nullptr);
            galloc->last_leaf_ids.assign(leaf_buffer_ids ? leaf_buffer_ids : nullptr,
                                         leaf_buffer_ids ? leaf_buffer_ids + graph->n_leafs : nullptr);
        }
    } catch (...) {
        galloc->have_plan = false;
        return tsr_set_error("tsr_gallocr_reserve: out of memory while planning %d nodes", graph->n_nodes);
    }
    if (!ok) { galloc->have_plan = false; return false; }
    return tsr_impl::ga_size_buffers(galloc);
}
} // namespace
TSR_IMPL_NS_END

TSR_IMPL_NS_BEGIN
namespace {
static bool ga_matches_key(const gallocr * ga, struct tsr_cgraph * g, const std::vector<uint64_t> & key, const int * nids,
                           const int * lids) {
    ga_keyer k;
    k.out = nullptr;
    k.cmp = &key;
    ga_key_graph(k, ga, g, nids, lids);
    return k.equal && k.pos == key.size();
}

/* alloc_graph on the graph of the cached plan: the offsets again, if the buffers hold them */
static bool ga_reapply(gallocr * ga, struct tsr_cgraph * g, const int * nids, const int * lids) {
    for (size_t b = 0; b < ga->bufts.size(); b++) {
        if (ga->pbuffers[b].planned_size > tsr_backend_buffer_get_size(ga->buffers[b])) {
            return ga_reserve(ga, g, nids, lids, 0.0, false) && ga_apply(ga, g);
        }
    }
    for (size_t i = 0; i < ga->ptensors.size(); i++) ga->ptensors[i].tensor = ga_tensor(g, ga->ptensor_idx[i]);
    return ga_apply(ga, g);
}

/* Place g with these buffer ids: the cached plan again when g matches it (also the order
 * reserve applied, for a graph rebuilt in the builder's order), otherwise a new plan with
 * the heuristics only (no search): graphs that change every call must stay cheap; reserve
 * is where the search time goes. The scheduler calls it with the ids of each graph. */
static bool ga_alloc_graph_ids(gallocr * ga, struct tsr_cgraph * g, const int * nids, const int * lids) {
    if (ga->have_plan && ga_matches_key(ga, g, ga->key, nids, lids)) return ga_reapply(ga, g, nids, lids);
    if (ga->have_plan && !ga->order_perm.empty() && (int) ga->order_perm.size() == g->n_nodes &&
        ga_matches_key(ga, g, ga->order_key, nids, lids)) {
        ord_apply(g, ga->order_perm);
        if (ga_matches_key(ga, g, ga->key, nids, lids)) return ga_reapply(ga, g, nids, lids);
    }
    return ga_reserve(ga, g, nids, lids, 0.0, false) && ga_apply(ga, g);
}
} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_gallocr_reserve_n(tsr_gallocr_t galloc_h, struct tsr_cgraph * graph, const int * node_buffer_ids,
                                        const int * leaf_buffer_ids) {
    auto * galloc = tsr_impl::internal(galloc_h);
    return tsr_impl::ga_reserve(galloc, graph, node_buffer_ids, leaf_buffer_ids, galloc ? galloc->time_budget_ms : 0.0, true);
}
TSR_API_IMPL bool tsr_gallocr_reserve(tsr_gallocr_t galloc_h, struct tsr_cgraph * graph) {
    return tsr_gallocr_reserve_n(galloc_h, graph, nullptr, nullptr);
}

TSR_API_IMPL bool tsr_gallocr_alloc_graph(tsr_gallocr_t galloc_h, struct tsr_cgraph * graph) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (!galloc || !graph) return tsr_set_error("tsr_gallocr_alloc_graph: NULL gallocr or graph");
    const int * nids = nullptr;
    const int * lids = nullptr;
    if (!galloc->last_node_ids.empty() || !galloc->last_leaf_ids.empty()) {
        /* ids passed as NULL (stored empty) fit any count */
        const bool nodes_fit = galloc->last_node_ids.empty() || (int) galloc->last_node_ids.size() == graph->n_nodes;
        const bool leafs_fit = galloc->last_leaf_ids.empty() || (int) galloc->last_leaf_ids.size() == graph->n_leafs;
        if (nodes_fit && leafs_fit) {
            nids = galloc->last_node_ids.empty() ? nullptr : galloc->last_node_ids.data();
            lids = galloc->last_leaf_ids.empty() ? nullptr : galloc->last_leaf_ids.data();
        } else if (galloc->bufts.size() > 1) {
            return tsr_set_error("tsr_gallocr_alloc_graph: the graph (%d nodes, %d leafs) differs from the one reserved with "
                                 "buffer ids (%zu nodes): call tsr_gallocr_reserve_n for it first",
                                 graph->n_nodes, graph->n_leafs, galloc->last_node_ids.size());
        }
    }
    return tsr_impl::ga_alloc_graph_ids(galloc, graph, nids, lids);
}

TSR_API_IMPL size_t tsr_gallocr_get_buffer_size(tsr_gallocr_t galloc_h, int buffer_id) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (!galloc || buffer_id < 0 || buffer_id >= (int) galloc->buffers.size()) return 0;
    return tsr_backend_buffer_get_size(galloc->buffers[(size_t) buffer_id]);
}
TSR_API_IMPL tsr_backend_buffer_t tsr_gallocr_get_buffer(tsr_gallocr_t galloc_h, int buffer_id) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (!galloc || buffer_id < 0 || buffer_id >= (int) galloc->buffers.size()) return nullptr;
    return galloc->buffers[(size_t) buffer_id];
}
TSR_API_IMPL int tsr_gallocr_get_n_reallocs(tsr_gallocr_t galloc_h) { auto * galloc = tsr_impl::internal(galloc_h); return galloc ? galloc->n_reallocs : 0; }

TSR_API_IMPL const struct tsr_plan * tsr_gallocr_get_plan(tsr_gallocr_t galloc_h) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (!galloc || !galloc->have_plan) { tsr_set_error("tsr_gallocr_get_plan: no plan yet (reserve or alloc_graph first)"); return nullptr; }
    return &galloc->plan;
}

/* ---- plan check ------------------------------------------------------------------------- */

TSR_API_IMPL bool tsr_plan_check(const struct tsr_plan * plan, const size_t * capacities) {
    if (!plan) return tsr_set_error("tsr_plan_check: plan is NULL");
    const int n = plan->n_tensors;
    if (n < 0 || (n > 0 && !plan->tensors)) return tsr_set_error("tsr_plan_check: plan has %d tensors and tensors = %p", n, (const void *) plan->tensors);
    for (int i = 0; i < n; i++) {
        const struct tsr_plan_tensor & a = plan->tensors[i];
        if (a.buffer_id < 0 || a.buffer_id >= plan->n_buffers) {
            return tsr_set_error("tsr_plan_check: tensor '%s' is in buffer %d of %d", a.name, a.buffer_id, plan->n_buffers);
        }
        const struct tsr_plan_buffer & pb = plan->buffers[a.buffer_id];
        const size_t cap = capacities ? capacities[a.buffer_id] : pb.planned_size;
        if (pb.alignment && a.offset % pb.alignment != 0) {
            return tsr_set_error("tsr_plan_check: tensor '%s' offset %zu is not aligned to %zu", a.name, a.offset, pb.alignment);
        }
        if (a.offset > cap || a.size > cap - a.offset) {
            return tsr_set_error("tsr_plan_check: tensor '%s' [%zu, %zu) is outside buffer %d of %zu bytes", a.name, a.offset,
                                 a.offset + a.size, a.buffer_id, cap);
        }
        if (a.first > a.last || a.first < 0 || a.last >= plan->n_steps) {
            return tsr_set_error("tsr_plan_check: tensor '%s' has live range [%d, %d] outside [0, %d)", a.name, a.first, a.last,
                                 plan->n_steps);
        }
    }
    /* sweep by first step; pairs that share a step and a buffer must not overlap */
    std::vector<int> ord;
    try { ord.resize((size_t) n); } catch (...) { return tsr_set_error("tsr_plan_check: out of memory for %d tensors", n); }
    for (int i = 0; i < n; i++) ord[(size_t) i] = i;
    std::sort(ord.begin(), ord.end(), [&](int x, int y) { return plan->tensors[x].first < plan->tensors[y].first; });
    for (int p = 0; p < n; p++) {
        const int i = ord[(size_t) p];
        const struct tsr_plan_tensor & a = plan->tensors[i];
        for (int q = p + 1; q < n; q++) {
            const int j = ord[(size_t) q];
            const struct tsr_plan_tensor & b = plan->tensors[j];
            if (b.first > a.last) break;
            if (a.buffer_id != b.buffer_id || a.size == 0 || b.size == 0) continue;
            if (a.offset >= b.offset + b.size || b.offset >= a.offset + a.size) continue;
            /* in place: exactly aliased, and the later one starts where the earlier dies */
            const bool ok_ab = b.inplace_of == i && b.offset == a.offset && b.size == a.size && b.first == a.last;
            const bool ok_ba = a.inplace_of == j && a.offset == b.offset && a.size == b.size && a.first == b.last;
            if (ok_ab || ok_ba) continue;
            return tsr_set_error("tsr_plan_check: '%s' [%zu, %zu) steps %d-%d and '%s' [%zu, %zu) steps %d-%d overlap in buffer %d",
                                 a.name, a.offset, a.offset + a.size, a.first, a.last, b.name, b.offset, b.offset + b.size,
                                 b.first, b.last, a.buffer_id);
        }
    }
    return true;
}
