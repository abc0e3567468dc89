/*
 * order.inl - tsr_graph_optimize_order (see alloc.h): choose the graph's execution order
 * (a topological order of its nodes) with the smallest lower bound gallocr can plan for.
 *
 * The model is gallocr's own (alloc.inl): ga_collect says which tensors own memory and
 * how many bytes, ga_live_ranges which ones live to the end, ga_inplace_candidate which
 * dying operand a node may take over. What changes with the order is only when each
 * tensor dies and whether its last user can take it over, and both depend on nothing
 * but the set of nodes already run. So the bytes live before a step are a function of
 * that set, and the problem is a shortest-bottleneck path over the graph's down-sets:
 *
 *  1. Cuts: a node every other node is an ancestor or a descendant of splits the graph;
 *     the pieces between cuts are independent (the set run at a cut is fixed).
 *  2. Each piece: greedy orders (several rules) give a first bound; exact search then
 *     asks "is there an order whose every step is under the bound?" (a depth-first
 *     search over the down-sets, remembering the ones that fail) and tightens the
 *     bound until the answer is no, while it stays under a state limit; otherwise a
 *     local search that moves one node within its dependencies, until the piece's
 *     share of the time budget is spent.
 *  3. A piece keeps the builder's order unless something strictly better was found.
 *
 * Order-independent rule used by both searches: a ready node whose step adds nothing
 * (a view, a tensor placed elsewhere, or a node that can take over a dying operand now:
 * its operand's bytes become its result's) runs at once. Running it earlier adds no
 * bytes, frees its operands sooner and only makes a later in-place takeover more likely
 * (a takeover open now stays open: no other user of that operand is left). Exact search
 * also runs at once a ready node under its bound that frees at least the bytes it adds
 * (ord_exact_frees): on RandWire that is every conv whose input dies with it, and it is
 * what lets the search settle a 134-node stage in ~200k states instead of >20M.
 *
 * The floor (ord_floor) is what every order holds at some step; a piece stops searching
 * when it meets it, and an order that meets the graph's floor is optimal.
 */

#include <chrono>
#include <numeric>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>

TSR_IMPL_NS_BEGIN
namespace {

/* The memory side of a graph, indexed by node (builder position) and by root (the
 * info index of ga_tensors: leafs, then nodes). */
struct ord_problem {
    int n = 0;
    std::vector<int> pred_off, pred, succ_off, succ;  /* dependencies (CSR) */
    std::vector<size_t> alloc;                        /* bytes a node's step adds: 0 for views, placed, INPUT */
    std::vector<int> touch_off, touch;                /* roots the node uses (it counts down their users) */
    std::vector<int> inpl_off, inpl;                  /* roots it may take over if it is their last user */
    std::vector<int> users;                           /* per root: how many nodes use it */
    std::vector<size_t> root_size;                    /* per root: bytes it owns (0: none) */
    std::vector<char> immortal;                       /* per root: lives to the end (results, OUTPUT) */
    std::vector<int> maker;                           /* per root: the node whose step allocates it, or -1 */
    std::vector<int> made;                            /* per node: the root its step allocates, or -1 */
    size_t mem0 = 0;                                  /* bytes live before the first step */
    /* several buffers (node buffer ids): which buffer each root and each node's result
     * is in, the bytes each holds before the first step, and the caller's id per node;
     * pieces never cross from one run of equal ids to the next */
    int n_buffers = 1;
    std::vector<int> root_buffer, node_buffer;
    std::vector<size_t> mem0_buffer;
    std::vector<int> run_id;                          /* empty: one buffer, no runs */
};

static bool ord_pure_view_op(enum tsr_op op) {
    return op == TSR_OP_NONE || op == TSR_OP_VIEW || op == TSR_OP_RESHAPE || op == TSR_OP_PERMUTE || op == TSR_OP_TRANSPOSE;
}

static void ord_sorted_unique(std::vector<int> & v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
}

static void ord_flatten(const std::vector<std::vector<int>> & lists, std::vector<int> & off, std::vector<int> & flat) {
    off.assign(lists.size() + 1, 0);
    flat.clear();
    for (size_t i = 0; i < lists.size(); i++) {
        flat.insert(flat.end(), lists[i].begin(), lists[i].end());
        off[i + 1] = (int) flat.size();
    }
}

/* Dependencies: each node after the nodes among its sources (and its view source). A
 * view node with a computing op (an in-place op's result, a copy into a view) writes
 * into its root, so it also stays ordered against every other node using that root. */
static void ord_dependencies(struct tsr_cgraph * g, const ga_tensors & ts, const std::vector<std::vector<int>> & touch,
                             ord_problem & p) {
    const int nl = g->n_leafs, n = g->n_nodes;
    std::vector<std::vector<int>> preds((size_t) n), succs((size_t) n);
    auto node_of = [&](const struct tsr_tensor * t) {
        auto it = ts.where.find(t);
        return it == ts.where.end() || it->second < nl ? -1 : it->second - nl;
    };
    for (int i = 0; i < n; i++) {
        struct tsr_tensor * t = g->nodes[i];
        for (int s = 0; s < TSR_MAX_SRC; s++) {
            const int u = t->src[s] ? node_of(t->src[s]) : -1;
            if (u >= 0 && u != i) preds[(size_t) i].push_back(u);
        }
        const int u = t->view_src ? node_of(t->view_src) : -1;
        if (u >= 0 && u != i) preds[(size_t) i].push_back(u);
    }
    std::unordered_map<int, std::vector<int>> users_of_root;  /* only roots someone writes into */
    for (int i = 0; i < n; i++) {
        struct tsr_tensor * t = g->nodes[i];
        if (t->view_src && !ord_pure_view_op(t->op)) {
            const int r = ts.root_of(t);
            if (r >= 0) users_of_root[r];
        }
    }
    if (!users_of_root.empty()) {
        for (int i = 0; i < n; i++) {
            for (int r : touch[(size_t) i]) {
                auto it = users_of_root.find(r);
                if (it != users_of_root.end()) it->second.push_back(i);
            }
        }
        for (auto & ru : users_of_root) {
            const std::vector<int> & us = ru.second;
            for (size_t k = 0; k < us.size(); k++) {
                const struct tsr_tensor * w = g->nodes[us[k]];
                if (!w->view_src || ord_pure_view_op(w->op)) continue;
                for (size_t j = 0; j < k; j++) preds[(size_t) us[k]].push_back(us[j]);
                for (size_t j = k + 1; j < us.size(); j++) preds[(size_t) us[j]].push_back(us[k]);
            }
        }
    }
    for (int i = 0; i < n; i++) {
        ord_sorted_unique(preds[(size_t) i]);
        for (int u : preds[(size_t) i]) succs[(size_t) u].push_back(i);
    }
    ord_flatten(preds, p.pred_off, p.pred);
    ord_flatten(succs, p.succ_off, p.succ);
}

/* The problem of graph g as gallocr ga would plan it (node_ids / leaf_ids: each tensor's
 * buffer, as reserve_n takes them; NULL: all in buffer 0). */
static bool ord_build(const gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids, ord_problem & p) {
    const int n = g->n_nodes, nl = g->n_leafs;
    ga_tensors ts;
    ga_collect(ga, g, node_ids, leaf_ids, ts);
    if (!ga_live_ranges(ga, g, std::max(1, n), ts)) return false;
    const int n_steps = std::max(1, n);
    p.n = n;
    p.users.assign(ts.info.size(), 0);
    p.root_size.assign(ts.info.size(), 0);
    p.immortal.assign(ts.info.size(), 0);
    p.alloc.assign((size_t) n, 0);
    p.mem0 = 0;
    p.n_buffers = (int) ga->bufts.size();
    p.mem0_buffer.assign((size_t) p.n_buffers, 0);
    p.root_buffer.assign(ts.info.size(), 0);
    p.node_buffer.assign((size_t) n, 0);
    for (size_t r = 0; r < ts.info.size(); r++) {
        const ga_info & in = ts.info[r];
        p.immortal[r] = in.last == n_steps;
        p.root_buffer[r] = in.buffer_id;
        if (in.owned) p.root_size[r] = in.size;
        if (in.owned && in.first == 0 && (in.idx < 0 || (ga_tensor(g, in.idx)->flags & TSR_TENSOR_FLAG_INPUT))) {
            p.mem0 += in.size;
            p.mem0_buffer[(size_t) in.buffer_id] += in.size;
        }
    }
    for (int i = 0; i < n; i++) p.node_buffer[(size_t) i] = ts.info[(size_t) (nl + i)].buffer_id;
    p.maker.assign(ts.info.size(), -1);
    p.made.assign((size_t) n, -1);
    if (node_ids) p.run_id.assign(node_ids, node_ids + n);
    std::vector<std::vector<int>> touch((size_t) n), inpl((size_t) n);
    for (int i = 0; i < n; i++) {
        struct tsr_tensor * t = g->nodes[i];
        const ga_info & in = ts.info[(size_t) (nl + i)];
        const bool input = (t->flags & TSR_TENSOR_FLAG_INPUT) != 0;
        if (in.owned && !input && in.size > 0) {
            p.alloc[(size_t) i] = in.size;
            p.made[(size_t) i] = nl + i;
            p.maker[(size_t) (nl + i)] = i;
        }
        for (int s = 0; s < TSR_MAX_SRC; s++) {
            if (!t->src[s]) continue;
            const int r = ts.root_of(t->src[s]);
            if (r >= 0) touch[(size_t) i].push_back(r);
            const int c = input ? -1 : ga_inplace_candidate(g, i, s, ts, in);
            if (c >= 0 && !p.immortal[(size_t) c]) inpl[(size_t) i].push_back(c);
        }
        if (t->view_src) {
            const int r = ts.root_of(t);
            if (r >= 0) touch[(size_t) i].push_back(r);
        }
        ord_sorted_unique(touch[(size_t) i]);
        for (int r : touch[(size_t) i]) p.users[(size_t) r]++;
    }
    ord_dependencies(g, ts, touch, p);
    ord_flatten(touch, p.touch_off, p.touch);
    ord_flatten(inpl, p.inpl_off, p.inpl);
    return true;
}

/* Running nodes one at a time: the bytes live now, and what each step would need. */
struct ord_sim {
    const ord_problem * p = nullptr;
    std::vector<int> left;     /* per root: users not yet run */
    std::vector<int> waiting;  /* per node: predecessors not yet run */
    size_t mem = 0;

    void reset(const ord_problem & prob) {
        p = &prob;
        left = prob.users;
        waiting.assign((size_t) prob.n, 0);
        for (int v = 0; v < prob.n; v++) waiting[(size_t) v] = prob.pred_off[(size_t) v + 1] - prob.pred_off[(size_t) v];
        mem = prob.mem0;
    }
    bool takes_over(int v) const {
        for (int k = p->inpl_off[(size_t) v]; k < p->inpl_off[(size_t) v + 1]; k++) {
            if (left[(size_t) p->inpl[(size_t) k]] == 1) return true;
        }
        return false;
    }
    /* bytes live while v runs */
    size_t step_bytes(int v) const {
        const size_t a = p->alloc[(size_t) v];
        return a && !takes_over(v) ? mem + a : mem;
    }
    /* runs v; returns the bytes live while it ran */
    size_t run(int v) {
        const size_t peak = step_bytes(v);
        mem += p->alloc[(size_t) v];
        for (int k = p->touch_off[(size_t) v]; k < p->touch_off[(size_t) v + 1]; k++) {
            const int r = p->touch[(size_t) k];
            if (--left[(size_t) r] == 0 && !p->immortal[(size_t) r]) mem -= p->root_size[(size_t) r];
        }
        for (int k = p->succ_off[(size_t) v]; k < p->succ_off[(size_t) v + 1]; k++) waiting[(size_t) p->succ[(size_t) k]]--;
        return peak;
    }
    void undo(int v) {
        for (int k = p->succ_off[(size_t) v]; k < p->succ_off[(size_t) v + 1]; k++) waiting[(size_t) p->succ[(size_t) k]]++;
        for (int k = p->touch_off[(size_t) v]; k < p->touch_off[(size_t) v + 1]; k++) {
            const int r = p->touch[(size_t) k];
            if (left[(size_t) r]++ == 0 && !p->immortal[(size_t) r]) mem += p->root_size[(size_t) r];
        }
        mem -= p->alloc[(size_t) v];
    }
    /* the largest step of running order[0..n) from here; the state is left as it was.
     * area (if not NULL): the sum of all steps, which tells two orders of one peak apart */
    size_t peak_of(const std::vector<int> & order, uint64_t * area = nullptr) {
        size_t peak = 0;
        uint64_t sum = 0;
        for (int v : order) {
            const size_t step = run(v);
            peak = std::max(peak, step);
            sum += step;
        }
        for (size_t k = order.size(); k-- > 0;) undo(order[k]);
        if (area) *area = sum;
        return peak;
    }
};

/* A piece of the graph between two cuts, solved from the state the cut leaves. */
struct ord_piece {
    ord_sim * sim;
    std::vector<int> nodes;       /* builder order */
    std::vector<int> local;       /* node -> index in nodes, or -1 (size n) */
    std::chrono::steady_clock::time_point deadline;
    size_t floor = 0;   /* no order of the piece goes under this (ord_floor) */
    size_t enough = 0;  /* a peak at or under this ends the search: the graph's floor is higher */
};

/* Which nodes are cuts (every other node an ancestor or a descendant of it). In the
 * builder's order that is: no dependency jumps over it, no sink lies before it and no
 * source after it. */
static std::vector<char> ord_cuts(const ord_problem & p) {
    const int n = p.n;
    std::vector<int> cover((size_t) n + 1, 0);
    for (int w = 0; w < n; w++) {
        for (int k = p.pred_off[(size_t) w]; k < p.pred_off[(size_t) w + 1]; k++) {
            const int u = p.pred[(size_t) k];
            if (w - u > 1) { cover[(size_t) u + 1]++; cover[(size_t) w]--; }
        }
    }
    std::vector<char> cut((size_t) n, 0);
    std::vector<int> sources_after((size_t) n + 1, 0);
    for (int v = n - 1; v >= 0; v--) {
        const bool source = p.pred_off[(size_t) v + 1] == p.pred_off[(size_t) v];
        sources_after[(size_t) v] = sources_after[(size_t) v + 1] + (source ? 1 : 0);
    }
    int covered = 0, sinks_before = 0;
    for (int v = 0; v < n; v++) {
        covered += cover[(size_t) v];
        cut[(size_t) v] = covered == 0 && sinks_before == 0 && sources_after[(size_t) v + 1] == 0;
        if (p.succ_off[(size_t) v + 1] == p.succ_off[(size_t) v]) sinks_before++;
    }
    return cut;
}

/* Bit rows over a piece's nodes (by local index). */
struct ord_rows {
    size_t words = 0;
    std::vector<uint64_t> bits;
    uint64_t * row(size_t k) { return bits.data() + k * words; }
    const uint64_t * row(size_t k) const { return bits.data() + k * words; }
    bool has(size_t k, size_t j) const { return (row(k)[j / 64] >> (j % 64)) & 1; }
};

/* The largest piece whose floor uses ancestor sets (two m x m bit matrices: 4 MiB here);
 * a larger one gets the floor from each node's own operands only. */
static const size_t ORD_FLOOR_MAX_NODES = 4096;

/* Each piece node's ancestors in the piece, or (desc) its descendants. The builder's
 * order is topological, so one pass in it (or against it) sees every relative first. */
static ord_rows ord_relatives(const ord_piece & pc, bool desc) {
    const ord_problem & p = *pc.sim->p;
    const std::vector<int> & off = desc ? p.succ_off : p.pred_off;
    const std::vector<int> & adj = desc ? p.succ : p.pred;
    const size_t m = pc.nodes.size();
    ord_rows r;
    r.words = (m + 63) / 64;
    r.bits.assign(m * r.words, 0);
    for (size_t i = 0; i < m; i++) {
        const size_t k = desc ? m - 1 - i : i;
        const int v = pc.nodes[k];
        uint64_t * dst = r.row(k);
        for (int e = off[(size_t) v]; e < off[(size_t) v + 1]; e++) {
            const int u = pc.local[(size_t) adj[(size_t) e]];
            if (u < 0) continue;
            const uint64_t * src = r.row((size_t) u);
            for (size_t w = 0; w < r.words; w++) dst[w] |= src[w];
            dst[(size_t) u / 64] |= 1ull << ((size_t) u % 64);
        }
    }
    return r;
}

/* The floor of a piece, from the state its first cut leaves: the most bytes that are live
 * at one node's step in EVERY order of the piece, so no order goes under it. At v's step
 * a root is surely live when it surely exists (live now, or made by an ancestor of v) and
 * is surely not freed yet (it outlives the piece, or v or a descendant of v uses it); v's
 * own result counts unless some order lets v take over a dying operand (no user of that
 * operand is a descendant of v). */
struct ord_floor {
    const ord_piece & pc;
    const ord_sim & sim;
    const ord_problem & p;
    bool rows;
    ord_rows anc, desc;
    std::unordered_map<int, std::vector<int>> users;  /* root -> its users in the piece (local) */
    std::vector<size_t> extra;                         /* per piece node: bytes over the base */
    size_t base;                                       /* bytes live at every step of the piece */
    /* per piece node u that makes a root: the steps at which that root is surely live once
     * u has run, but not counted before (they are not descendants of u); by ord_exact */
    std::vector<std::vector<uint64_t>> late;

    explicit ord_floor(const ord_piece & piece)
        : pc(piece), sim(*piece.sim), p(*piece.sim->p), rows(piece.nodes.size() <= ORD_FLOOR_MAX_NODES),
          extra(piece.nodes.size(), 0), base(piece.sim->mem) {
        if (rows) {
            anc = ord_relatives(pc, false);
            desc = ord_relatives(pc, true);
        }
        for (size_t k = 0; k < pc.nodes.size(); k++) {
            const int v = pc.nodes[k];
            for (int e = p.touch_off[(size_t) v]; e < p.touch_off[(size_t) v + 1]; e++) users[p.touch[(size_t) e]].push_back((int) k);
        }
    }

    /* freed after the piece, if ever */
    bool outlives(int r) const {
        if (p.immortal[(size_t) r] || p.users[(size_t) r] == 0) return true;
        auto it = users.find(r);
        return sim.left[(size_t) r] > (it == users.end() ? 0 : (int) it->second.size());
    }

    /* the steps at which r is surely not freed yet: its users' and their ancestors' */
    std::vector<uint64_t> before_last_use(const std::vector<int> & us) const {
        std::vector<uint64_t> set(anc.words, 0);
        for (int w : us) {
            const uint64_t * a = anc.row((size_t) w);
            for (size_t i = 0; i < set.size(); i++) set[i] |= a[i];
            set[(size_t) w / 64] |= 1ull << ((size_t) w % 64);
        }
        return set;
    }

    void add_at(const std::vector<uint64_t> & set, size_t bytes) {
        for (size_t i = 0; i < set.size(); i++) {
            for (uint64_t b = set[i]; b; b &= b - 1) extra[i * 64 + (size_t) __builtin_ctzll(b)] += bytes;
        }
    }
    void add_at_users(const std::vector<int> & us, size_t bytes) {
        for (int w : us) extra[(size_t) w] += bytes;
    }

    /* a root the piece uses: live now, or made by a piece node */
    void count_used_root(int r, const std::vector<int> & us) {
        const size_t bytes = p.root_size[(size_t) r];
        const int mk = p.maker[(size_t) r] >= 0 ? pc.local[(size_t) p.maker[(size_t) r]] : -1;
        if (bytes == 0 || (mk < 0 && outlives(r))) return;  /* nothing, or in the base */
        if (mk < 0) base -= bytes;
        if (!rows) { add_at_users(us, bytes); return; }
        if (mk >= 0) count_made((size_t) mk, outlives(r) ? every_node() : before_last_use(us));
        else add_at(before_last_use(us), bytes);
    }

    std::vector<uint64_t> every_node() const {
        std::vector<uint64_t> set(anc.words, ~0ull);
        if (pc.nodes.size() % 64) set.back() = (1ull << (pc.nodes.size() % 64)) - 1;
        return set;
    }

    /* the root node k makes, live at `live` once made: surely made at k's descendants */
    void count_made(size_t k, std::vector<uint64_t> live) {
        const uint64_t * d = desc.row(k);
        if (late.empty()) late.resize(pc.nodes.size());
        std::vector<uint64_t> & lt = late[k];
        lt.resize(live.size());
        for (size_t i = 0; i < live.size(); i++) {
            lt[i] = live[i] & ~d[i];
            live[i] &= d[i];
        }
        add_at(live, p.alloc[(size_t) pc.nodes[k]]);
    }

    /* v's result, unless some order lets v work in place */
    void count_own(size_t k) {
        const int v = pc.nodes[k];
        if (p.alloc[(size_t) v] == 0) return;
        for (int e = p.inpl_off[(size_t) v]; e < p.inpl_off[(size_t) v + 1]; e++) {
            const int c = p.inpl[(size_t) e];
            if (outlives(c)) continue;
            if (!rows) return;
            bool used_later = false;
            for (int w : users.at(c)) used_later = used_later || desc.has(k, (size_t) w);
            if (!used_later) return;
        }
        extra[k] += p.alloc[(size_t) v];
    }

    size_t compute() {
        for (const auto & ru : users) count_used_root(ru.first, ru.second);
        for (size_t k = 0; k < pc.nodes.size(); k++) {
            const int r = p.made[(size_t) pc.nodes[k]];
            if (r >= 0 && !users.count(r) && rows) count_made(k, every_node());
            count_own(k);
        }
        size_t top = 0;
        for (size_t e : extra) top = std::max(top, e);
        return base + top;
    }
};

/* Whether running v now leaves no more bytes live than before it. Such a node under the
 * bound may run at once: in any order from here that runs it later, moving it to the front
 * keeps every step between no higher (the roots it frees now are freed then as well,
 * its result is then live too, and a takeover open then is still open), and its own step
 * is under the bound. One such node can then stand for all the ready ones. */
static bool ord_exact_frees(const ord_sim & sim, int v) {
    const ord_problem & p = *sim.p;
    size_t freed = 0;
    for (int k = p.touch_off[(size_t) v]; k < p.touch_off[(size_t) v + 1]; k++) {
        const int r = p.touch[(size_t) k];
        if (sim.left[(size_t) r] == 1 && !p.immortal[(size_t) r]) freed += p.root_size[(size_t) r];
    }
    return freed >= p.alloc[(size_t) v];
}

/* Exact search: is there an order of the rest of the piece whose every step stays under
 * `bound`? A depth-first search over the down-sets (the sets of nodes already run),
 * cheapest step first, remembering the sets from which none exists. Such a set fails
 * for every lower bound too, so the memory is kept as the bound tightens (ord_exact_solve).
 * Gives up past max_states remembered sets or the deadline. */
struct ord_exact {
    ord_piece & pc;
    size_t max_states;
    std::unordered_set<std::string> dead;
    std::string key;
    std::vector<int> path;  /* the order found, last node first */
    size_t bound = 0;
    bool aborted = false;
    size_t calls = 0;
    /* per piece node: bytes surely live at its step from the current set on (ord_floor's
     * count, kept current as nodes run); a set where one left is at the bound fails */
    std::vector<size_t> surely;
    const std::vector<std::vector<uint64_t>> * late = nullptr;

    ord_exact(ord_piece & piece, size_t states, const ord_floor * fl)
        : pc(piece), max_states(states), key((pc.nodes.size() + 7) / 8, '\0') {
        if (!fl || !fl->rows) return;
        surely = fl->extra;
        for (size_t & b : surely) b += fl->base;
        if (!fl->late.empty()) late = &fl->late;
    }

    /* v (local k) made its root: it is now surely live where its ancestors could not say */
    void made(size_t k, bool undo) {
        if (!late || (*late)[k].empty()) return;
        const size_t bytes = pc.sim->p->alloc[(size_t) pc.nodes[k]];
        const std::vector<uint64_t> & set = (*late)[k];
        for (size_t i = 0; i < set.size(); i++) {
            for (uint64_t b = set[i]; b; b &= b - 1) {
                size_t & s = surely[i * 64 + (size_t) __builtin_ctzll(b)];
                s = undo ? s - bytes : s + bytes;
            }
        }
    }

    bool doomed() const {
        for (size_t k = 0; k < surely.size(); k++) if (!done(k) && surely[k] >= bound) return true;
        return false;
    }

    bool done(size_t k) const { return (key[k / 8] >> (k % 8)) & 1; }
    void flip(size_t k) { key[k / 8] = (char) (key[k / 8] ^ (1 << (k % 8))); }

    /* the ready nodes under the bound, cheapest step first; a lone one that frees at least
     * what it adds if any (ord_exact_frees) */
    void ready(std::vector<std::pair<size_t, int>> & out) const {
        out.clear();
        for (size_t k = 0; k < pc.nodes.size(); k++) {
            const int v = pc.nodes[k];
            if (done(k) || pc.sim->waiting[(size_t) v] != 0) continue;
            const size_t step = pc.sim->step_bytes(v);
            if (step >= bound) continue;
            if (step == pc.sim->mem || ord_exact_frees(*pc.sim, v)) { out.assign(1, {step, v}); return; }
            out.push_back({step, v});
        }
        std::sort(out.begin(), out.end());
    }

    bool reach(size_t n_left) {
        if (n_left == 0) return true;
        if (dead.count(key)) return false;
        if (dead.size() >= max_states || ((++calls & 255) == 0 && std::chrono::steady_clock::now() > pc.deadline)) {
            aborted = true;
            return false;
        }
        std::vector<std::pair<size_t, int>> cand;
        if (!doomed()) ready(cand);
        for (const auto & c : cand) {
            const int v = c.second;
            const size_t k = (size_t) pc.local[(size_t) v];
            pc.sim->run(v);
            flip(k);
            made(k, false);
            const bool ok = reach(n_left - 1);
            made(k, true);
            flip(k);
            pc.sim->undo(v);
            if (ok) { path.push_back(v); return true; }
            if (aborted) return false;
        }
        dead.insert(key);
        return false;
    }
};

/* Tightens `peak` (the piece's best so far, `order` its order) until no order is lower;
 * false when the search gave up first (order and peak keep the best found). */
static bool ord_exact_solve(ord_piece & pc, size_t max_states, std::vector<int> & order, size_t & peak) {
    ord_floor fl(pc);
    fl.compute();
    ord_exact ex(pc, max_states, &fl);
    for (;;) {
        if (peak <= pc.enough) return peak <= pc.floor;
        ex.bound = peak;
        ex.path.clear();
        if (!ex.reach(pc.nodes.size())) return !ex.aborted;
        order.assign(ex.path.rbegin(), ex.path.rend());
        peak = pc.sim->peak_of(order);
    }
}

/* How a greedy order ranks the ready nodes (smaller first). */
enum ord_rule { ORD_RULE_PEAK_THEN_NET, ORD_RULE_NET_THEN_STEP, ORD_RULE_STEP_THEN_NET, ORD_RULE_RANDOM_NET };

static std::vector<int> ord_greedy(ord_piece & pc, ord_rule rule, std::mt19937 & rng) {
    ord_sim & sim = *pc.sim;
    std::vector<int> out, ready;
    for (int v : pc.nodes) if (sim.waiting[(size_t) v] == 0) ready.push_back(v);
    size_t peak = 0;
    while (!ready.empty()) {
        size_t pick = 0;
        uint64_t best_a = UINT64_MAX, best_b = UINT64_MAX, best_c = UINT64_MAX;
        for (size_t k = 0; k < ready.size(); k++) {
            const int v = ready[k];
            if (sim.step_bytes(v) == sim.mem) { pick = k; break; }
            const size_t before = sim.mem;
            const size_t step = sim.run(v);
            const size_t after = sim.mem;
            sim.undo(v);
            /* net change, biased so that freeing sorts first and stays unsigned */
            const uint64_t net = (uint64_t) after + (UINT64_MAX / 2) - (uint64_t) before;
            uint64_t a = 0, b = 0;
            switch (rule) {
                case ORD_RULE_PEAK_THEN_NET: a = std::max(peak, step); b = net; break;
                case ORD_RULE_NET_THEN_STEP: a = net; b = step; break;
                case ORD_RULE_STEP_THEN_NET: a = step; b = net; break;
                case ORD_RULE_RANDOM_NET:    a = std::max(peak, step); b = net / 4096 * 4096 + (rng() & 4095); break;
            }
            const uint64_t c = (uint64_t) pc.local[(size_t) v];
            if (a < best_a || (a == best_a && (b < best_b || (b == best_b && c < best_c)))) {
                best_a = a; best_b = b; best_c = c; pick = k;
            }
        }
        const int v = ready[pick];
        ready[pick] = ready.back();
        ready.pop_back();
        peak = std::max(peak, sim.run(v));
        out.push_back(v);
        for (int k = sim.p->succ_off[(size_t) v]; k < sim.p->succ_off[(size_t) v + 1]; k++) {
            const int s = sim.p->succ[(size_t) k];
            if (sim.waiting[(size_t) s] == 0 && pc.local[(size_t) s] >= 0) ready.push_back(s);
        }
    }
    for (size_t k = out.size(); k-- > 0;) sim.undo(out[k]);
    return out;
}

/* A move for the local search that one-node moves cannot make step by step: v with its
 * feeders (ancestors that feed nothing but v and each other: its producer chain) or its
 * dependants (descendants fed by nothing but v and each other) goes elsewhere as a block,
 * so a producer chain runs just before its consumer, or a consumer right after v. */
struct ord_block_move {
    const ord_piece & pc;
    const ord_problem & p;
    std::vector<char> in;    /* per node: in the block */
    std::vector<int> block;  /* in the current order */
    std::vector<int> rest;

    explicit ord_block_move(const ord_piece & piece) : pc(piece), p(*piece.sim->p), in((size_t) piece.sim->p->n, 0) {}

    void gather(int v, bool feeders) {
        const std::vector<int> & off = feeders ? p.pred_off : p.succ_off, & adj = feeders ? p.pred : p.succ;
        const std::vector<int> & back_off = feeders ? p.succ_off : p.pred_off, & back = feeders ? p.succ : p.pred;
        block.assign(1, v);
        in[(size_t) v] = 1;
        for (size_t i = 0; i < block.size() && block.size() < 64; i++) {
            const int b = block[i];
            for (int e = off[(size_t) b]; e < off[(size_t) b + 1]; e++) {
                const int u = adj[(size_t) e];
                if (pc.local[(size_t) u] < 0 || in[(size_t) u]) continue;
                bool only_block = true;
                for (int f = back_off[(size_t) u]; f < back_off[(size_t) u + 1] && only_block; f++) only_block = in[(size_t) back[(size_t) f]];
                if (!only_block) continue;
                block.push_back(u);
                in[(size_t) u] = 1;
            }
        }
    }

    /* the block's place in `rest` if node u (not in it) keeps its place */
    int rest_index(const std::vector<int> & pos, int u) const {
        int before = 0;
        for (int b : block) before += pos[(size_t) b] < pos[(size_t) u];
        return pos[(size_t) u] - before;
    }

    /* out: order with the block of v moved to a random place within its dependencies;
     * false when there is no other place */
    bool propose(int v, bool feeders, const std::vector<int> & order, const std::vector<int> & pos, std::mt19937 & rng,
                 std::vector<int> & out) {
        gather(v, feeders);
        std::sort(block.begin(), block.end(), [&](int a, int b) { return pos[(size_t) a] < pos[(size_t) b]; });
        rest.clear();
        for (int u : order) if (!in[(size_t) u]) rest.push_back(u);
        int lo = 0, hi = (int) rest.size(), now = -1;
        for (int b : block) {
            for (int e = p.pred_off[(size_t) b]; e < p.pred_off[(size_t) b + 1]; e++) {
                const int u = p.pred[(size_t) e];
                if (pc.local[(size_t) u] >= 0 && !in[(size_t) u]) lo = std::max(lo, rest_index(pos, u) + 1);
            }
            for (int e = p.succ_off[(size_t) b]; e < p.succ_off[(size_t) b + 1]; e++) {
                const int u = p.succ[(size_t) e];
                if (pc.local[(size_t) u] >= 0 && !in[(size_t) u]) hi = std::min(hi, rest_index(pos, u));
            }
        }
        const size_t first = (size_t) pos[(size_t) block[0]];
        if (block.size() > 1 && first + block.size() <= order.size()) {
            bool contiguous = true;
            for (size_t k = 0; k < block.size(); k++) contiguous = contiguous && order[first + k] == block[k];
            if (contiguous) now = (int) first;
        }
        for (int b : block) in[(size_t) b] = 0;
        if (block.size() < 2 || hi < lo || (hi == lo && lo == now)) return false;
        const int at = lo + (int) (rng() % (unsigned) (hi - lo + 1));
        if (at == now) return false;
        out.assign(rest.begin(), rest.begin() + at);
        out.insert(out.end(), block.begin(), block.end());
        out.insert(out.end(), rest.begin() + at, rest.end());
        return true;
    }
};

/* Move one node at a time to another place between its predecessors and successors, or a
 * node's block (ord_block_move); keep moves that lower the peak, or keep it and do not
 * raise the sum of all steps (a slope towards orders that hold less, where the peak alone
 * is flat), until the deadline. */
static size_t ord_local_search(ord_piece & pc, std::vector<int> & order, size_t peak, std::mt19937 & rng) {
    const ord_problem & p = *pc.sim->p;
    const size_t m = order.size();
    if (m < 3) return peak;
    uint64_t area = 0;
    pc.sim->peak_of(order, &area);
    std::vector<int> pos((size_t) p.n, -1), moved;
    for (size_t k = 0; k < m; k++) pos[(size_t) order[k]] = (int) k;
    ord_block_move blocks(pc);
    for (int iter = 0;; iter++) {
        if (peak <= pc.enough || ((iter & 15) == 0 && std::chrono::steady_clock::now() > pc.deadline)) break;
        const int from = (int) (rng() % m);
        const int v = order[(size_t) from];
        if (iter & 1) {
            if (!blocks.propose(v, (iter & 2) != 0, order, pos, rng, moved)) continue;
            uint64_t na = 0;
            const size_t np = pc.sim->peak_of(moved, &na);
            if (np < peak || (np == peak && na <= area)) {
                peak = np;
                area = na;
                order.swap(moved);
                for (size_t k = 0; k < m; k++) pos[(size_t) order[k]] = (int) k;
            }
            continue;
        }
        int lo = 0, hi = (int) m - 1;
        for (int k = p.pred_off[(size_t) v]; k < p.pred_off[(size_t) v + 1]; k++) {
            const int q = pos[(size_t) p.pred[(size_t) k]];
            if (q >= 0) lo = std::max(lo, q + 1);
        }
        for (int k = p.succ_off[(size_t) v]; k < p.succ_off[(size_t) v + 1]; k++) {
            const int q = pos[(size_t) p.succ[(size_t) k]];
            if (q >= 0) hi = std::min(hi, q - 1);
        }
        if (hi <= lo) continue;
        int to = lo + (int) (rng() % (unsigned) (hi - lo + 1));
        if (to == from) continue;
        auto shift = [&](int a, int b) {  /* move the element at a to b */
            if (a < b) std::rotate(order.begin() + a, order.begin() + a + 1, order.begin() + b + 1);
            else std::rotate(order.begin() + b, order.begin() + a, order.begin() + a + 1);
        };
        shift(from, to);
        uint64_t na = 0;
        const size_t np = pc.sim->peak_of(order, &na);
        if (np < peak || (np == peak && na <= area)) {
            peak = np;
            area = na;
            const int a = std::min(from, to), b = std::max(from, to);
            for (int k = a; k <= b; k++) pos[(size_t) order[(size_t) k]] = k;
        } else {
            shift(to, from);
        }
    }
    return peak;
}

struct ord_piece_result { std::vector<int> order; size_t builder_peak, peak; bool exact; };

static ord_piece_result ord_solve_piece(ord_piece & pc, const struct tsr_order_params & prm) {
    ord_piece_result res;
    res.order = pc.nodes;
    res.builder_peak = res.peak = pc.sim->peak_of(pc.nodes);
    res.exact = pc.nodes.size() <= 1 || res.peak <= pc.floor;
    if (res.exact || res.peak <= pc.enough) return res;
    std::mt19937 rng(0x7e55e7a);
    bool first = true;
    for (ord_rule rule : {ORD_RULE_PEAK_THEN_NET, ORD_RULE_NET_THEN_STEP, ORD_RULE_STEP_THEN_NET}) {
        /* the first greedy order always completes (it alone gains most on large graphs);
         * the others count against the budget like the searches, so that a slow floor or
         * a loaded machine does not push the whole call far past it */
        if (!first && std::chrono::steady_clock::now() > pc.deadline) break;
        first = false;
        std::vector<int> o = ord_greedy(pc, rule, rng);
        const size_t pk = pc.sim->peak_of(o);
        if (pk < res.peak) { res.peak = pk; res.order = std::move(o); }
    }
    res.exact = res.peak <= pc.floor;
    if (res.exact || res.peak <= pc.enough) return res;
    if ((int) pc.nodes.size() <= prm.exact_max_nodes && prm.exact_max_states > 0) {
        /* half the piece's time at most: what is left goes to the local search */
        const auto end = pc.deadline, now = std::chrono::steady_clock::now();
        if (end > now) pc.deadline = now + (end - now) / 2;
        res.exact = ord_exact_solve(pc, (size_t) prm.exact_max_states, res.order, res.peak);
        pc.deadline = end;
        if (res.exact) return res;
    }
    if (std::chrono::steady_clock::now() > pc.deadline) return res;
    std::vector<int> o = res.order;
    const size_t pk = ord_local_search(pc, o, res.peak, rng);
    if (pk < res.peak) { res.peak = pk; res.order = std::move(o); }
    return res;
}

/* A stretch of the builder's order solved on its own: a cut (one node), or the nodes
 * between cuts within one run of node buffer ids. */
struct ord_segment { int begin, end; bool cut; };

static std::vector<ord_segment> ord_segments(const ord_problem & p) {
    const std::vector<char> cut = ord_cuts(p);
    std::vector<ord_segment> segs;
    for (int v = 0; v < p.n; v++) {
        const bool new_run = !p.run_id.empty() && v > 0 && p.run_id[(size_t) v] != p.run_id[(size_t) v - 1];
        if (cut[(size_t) v]) segs.push_back({v, v + 1, true});
        else if (segs.empty() || segs.back().cut || new_run) segs.push_back({v, v + 1, false});
        else segs.back().end = v + 1;
    }
    return segs;
}

static void ord_enter(ord_piece & pc, const ord_segment & sg) {
    pc.nodes.clear();
    for (int v = sg.begin; v < sg.end; v++) {
        pc.local[(size_t) v] = (int) pc.nodes.size();
        pc.nodes.push_back(v);
    }
}

static void ord_leave(ord_piece & pc) {
    for (int u : pc.nodes) pc.local[(size_t) u] = -1;
    pc.nodes.clear();
}

/* Each segment's floor (a cut's is its step): the set run before a segment is the same in
 * every order, so the builder's order gives every segment its starting state. */
static std::vector<size_t> ord_segment_floors(const std::vector<ord_segment> & segs, ord_piece & pc) {
    ord_sim & sim = *pc.sim;
    std::vector<size_t> floors;
    for (const ord_segment & sg : segs) {
        if (sg.cut) { floors.push_back(sim.run(sg.begin)); continue; }
        ord_enter(pc, sg);
        floors.push_back(ord_floor(pc).compute());
        for (int v : pc.nodes) sim.run(v);
        ord_leave(pc);
    }
    return floors;
}

/* The best order found for p (node indices in execution order) and its figures. */
static std::vector<int> ord_optimize(const ord_problem & p, const struct tsr_order_params & prm, struct tsr_order_report & rep) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const auto end = t0 + std::chrono::microseconds((int64_t) (std::max(0.0, prm.time_budget_ms) * 1000.0));
    ord_sim sim;
    sim.reset(p);
    ord_piece pc;
    pc.sim = &sim;
    pc.local.assign((size_t) p.n, -1);
    const std::vector<ord_segment> segs = ord_segments(p);
    const std::vector<size_t> floors = ord_segment_floors(segs, pc);
    const size_t floor = floors.empty() ? 0 : *std::max_element(floors.begin(), floors.end());
    sim.reset(p);
    std::vector<int> order;
    order.reserve((size_t) p.n);
    size_t builder = 0, best = 0, inexact_peak = 0;  /* the largest peak of a piece not solved exactly */
    int done = 0;
    rep.n_pieces = 0;
    for (size_t s = 0; s < segs.size(); s++) {
        const ord_segment & sg = segs[s];
        if (sg.cut) {
            const size_t step = sim.run(sg.begin);
            builder = std::max(builder, step);
            best = std::max(best, step);
            order.push_back(sg.begin);
            done++;
            continue;
        }
        ord_enter(pc, sg);
        /* this piece's share of the time left, by size */
        const auto now = clock::now();
        const double share = (double) pc.nodes.size() / (double) std::max(1, p.n - done);
        pc.deadline = now + std::chrono::duration_cast<clock::duration>((end > now ? end - now : clock::duration(0)) * share);
        pc.floor = floors[s];
        pc.enough = std::max(floor, floors[s]);
        ord_piece_result r = ord_solve_piece(pc, prm);
        builder = std::max(builder, r.builder_peak);
        best = std::max(best, r.peak);
        if (!r.exact) inexact_peak = std::max(inexact_peak, r.peak);
        for (int u : r.order) { sim.run(u); order.push_back(u); }
        done += (int) pc.nodes.size();
        ord_leave(pc);
        rep.n_pieces++;
    }
    rep.builder_lower_bound = builder;
    rep.optimized_lower_bound = best;
    rep.any_order_lower_bound = floor;
    /* the pieces at the peak decide it: the others may stop short of their optimum */
    rep.optimal = inexact_peak < best || best <= floor;
    rep.reordered = false;
    for (int k = 0; k < p.n; k++) rep.reordered = rep.reordered || order[(size_t) k] != k;
    rep.ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    return order;
}

/* Puts g's nodes (and their gradients, when it has any) in the given order. */
static void ord_apply(struct tsr_cgraph * g, const std::vector<int> & order) {
    std::vector<struct tsr_tensor *> tmp((size_t) g->n_nodes);
    for (struct tsr_tensor ** arr : {g->nodes, g->grads, g->grad_accs}) {
        if (!arr) continue;
        for (int k = 0; k < g->n_nodes; k++) tmp[(size_t) k] = arr[order[(size_t) k]];
        std::copy(tmp.begin(), tmp.end(), arr);
    }
}

/* Each buffer's lower bound for the nodes run in `order`: the searches count the bytes of
 * all buffers together, but each buffer is sized on its own. */
static std::vector<size_t> ord_buffer_peaks(const ord_problem & p, const std::vector<int> & order) {
    ord_sim sim;
    sim.reset(p);
    std::vector<size_t> mem = p.mem0_buffer, peak = p.mem0_buffer;
    for (int v : order) {
        const size_t a = p.alloc[(size_t) v];
        const size_t b = (size_t) p.node_buffer[(size_t) v];
        if (a && !sim.takes_over(v)) peak[b] = std::max(peak[b], mem[b] + a);
        mem[b] += a;
        for (int k = p.touch_off[(size_t) v]; k < p.touch_off[(size_t) v + 1]; k++) {
            const int r = p.touch[(size_t) k];
            if (sim.left[(size_t) r] == 1 && !p.immortal[(size_t) r]) mem[(size_t) p.root_buffer[(size_t) r]] -= p.root_size[(size_t) r];
        }
        sim.run(v);
    }
    return peak;
}

/* Several buffers: keep the new order only if no buffer's lower bound grows and their
 * sum drops; the report then gives the sums. */
static void ord_check_buffers(const ord_problem & p, std::vector<int> & order, struct tsr_order_report & rep) {
    std::vector<int> builder((size_t) p.n);
    std::iota(builder.begin(), builder.end(), 0);
    const std::vector<size_t> before = ord_buffer_peaks(p, builder), after = ord_buffer_peaks(p, order);
    size_t sum_before = 0, sum_after = 0;
    bool none_grows = true;
    for (int b = 0; b < p.n_buffers; b++) {
        sum_before += before[(size_t) b];
        sum_after += after[(size_t) b];
        none_grows = none_grows && after[(size_t) b] <= before[(size_t) b];
    }
    rep.builder_lower_bound = sum_before;
    if (rep.reordered && none_grows && sum_after < sum_before) {
        rep.optimized_lower_bound = sum_after;
        return;
    }
    rep.reordered = false;
    rep.optimized_lower_bound = sum_before;
    order = builder;
}

/* Reorders g as ga would plan it (node_ids / leaf_ids as reserve_n takes them, or NULL);
 * order receives the permutation applied (empty: none). */
static bool ord_reorder(const gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids,
                        const struct tsr_order_params & prm, std::vector<int> & order) {
    struct tsr_order_report local_rep;
    struct tsr_order_report & rep = prm.report ? *prm.report : local_rep;
    order.clear();
    ord_problem p;
    if (!ord_build(ga, g, node_ids, leaf_ids, p)) return false;
    std::vector<int> o = ord_optimize(p, prm, rep);
    if (node_ids || leaf_ids || p.n_buffers > 1) ord_check_buffers(p, o, rep);
    if (!rep.reordered) return true;
    ord_apply(g, o);
    order = std::move(o);
    return true;
}

/* gallocr at reserve (ga_reserve): reorder when asked to. With node buffer ids only
 * within each run of equal ids, so the caller's ids still name each node's buffer and a
 * scheduler's splits keep their nodes. */
static bool ga_reorder_for_reserve(gallocr * ga, struct tsr_cgraph * g, const int * node_ids, const int * leaf_ids) {
    ga->order_perm.clear();
    ga->order_key.clear();
    if (!ga->order_enabled) return true;
    ga_keyer k;
    k.out = &ga->order_key;
    k.cmp = nullptr;
    ga_key_graph(k, ga, g, node_ids, leaf_ids);
    if (!ord_reorder(ga, g, node_ids, leaf_ids, ga->order_params, ga->order_perm)) return false;
    if (ga->order_perm.empty()) ga->order_key.clear();
    return true;
}

} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_order_params tsr_order_default_params(void) {
    struct tsr_order_params p;
    p.time_budget_ms = 20.0;
    p.exact_max_nodes = 200;
    p.exact_max_states = 200000;
    p.buft = nullptr;
    p.report = nullptr;
    return p;
}

TSR_API_IMPL bool tsr_graph_optimize_order(struct tsr_cgraph * graph, const struct tsr_order_params * params) {
    if (!graph) return tsr_set_error("tsr_graph_optimize_order: graph is NULL");
    if (graph->n_nodes < 0) return tsr_set_error("tsr_graph_optimize_order: graph has %d nodes", graph->n_nodes);
    const struct tsr_order_params prm = params ? *params : tsr_order_default_params();
    if (prm.exact_max_nodes < 0 || prm.exact_max_states < 0 || !(prm.time_budget_ms >= 0)) {
        return tsr_set_error("tsr_graph_optimize_order: bad params: time_budget_ms %g, exact_max_nodes %d, exact_max_states %d "
                             "(none may be negative)", prm.time_budget_ms, prm.exact_max_nodes, prm.exact_max_states);
    }
    try {
        tsr_impl::gallocr ga;
        ga.bufts.assign(1, prm.buft ? prm.buft : tsr_backend_cpu_buffer_type());
        ga.buffers.assign(1, nullptr);
        std::vector<int> order;
        return tsr_impl::ord_reorder(&ga, graph, nullptr, nullptr, prm, order);
    } catch (...) {
        return tsr_set_error("tsr_graph_optimize_order: out of memory for a graph of %d nodes", graph->n_nodes);
    }
}

TSR_API_IMPL bool tsr_gallocr_set_optimize_order(tsr_gallocr_t galloc_h, const struct tsr_order_params * params) {
    auto * galloc = tsr_impl::internal(galloc_h);
    if (!galloc) return tsr_set_error("tsr_gallocr_set_optimize_order: gallocr is NULL");
    if (params && (params->exact_max_nodes < 0 || params->exact_max_states < 0 || !(params->time_budget_ms >= 0))) {
        return tsr_set_error("tsr_gallocr_set_optimize_order: bad params: time_budget_ms %g, exact_max_nodes %d, "
                             "exact_max_states %d (none may be negative)",
                             params->time_budget_ms, params->exact_max_nodes, params->exact_max_states);
    }
    galloc->order_enabled = params != nullptr;
    if (params) {
        galloc->order_params = *params;
        galloc->order_params.buft = nullptr;  /* gallocr's own buffer type decides the sizes */
    }
    return true;
}
