/*
 * alloc.h - tallocr (one tensor at a time) and gallocr (a whole graph, planned offline).
 *
 * Mirrors ggml-alloc.h. gallocr differs from ggml's in how it plans: it computes every
 * tensor's live range over the graph's execution order, then packs the ranges into as
 * few bytes as it can (an offline packing algorithm, see impl/packing.inl), so the
 * compute buffer lands at or near the lower bound (the most bytes live at one step).
 * The plan is an object you can read, check and export.
 *
 * Implementation: TSR_IMPLEMENTATION, in one C++17 file, compiles the core and every
 * backend header included in that file, in any include order (README "Using tessera").
 */
#ifndef TESSERA_ALLOC_H
#define TESSERA_ALLOC_H

#include "tessera.h"
#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tallocr: place tensors one after another in a buffer ---------------------------- */

struct tsr_tallocr {
    tsr_backend_buffer_t buffer;
    void *               base;
    size_t               alignment;
    size_t               offset;
};

/* A bump allocator over buffer (offsets aligned to the buffer's alignment). */
TSR_API struct tsr_tallocr tsr_tallocr_new(tsr_backend_buffer_t buffer);
/* false + error naming the sizes when the tensor does not fit (nothing changes). */
TSR_API bool               tsr_tallocr_alloc(struct tsr_tallocr * talloc, struct tsr_tensor * tensor);

/* ---- gallocr: plan and place a whole graph's activations ----------------------------- */

typedef struct tsr_gallocr * tsr_gallocr_t;

/* A graph allocator with one buffer type (or n_bufs, indexed by the buffer ids of
 * reserve_n). NULL + error on bad arguments or out of memory. */
TSR_API tsr_gallocr_t tsr_gallocr_new(tsr_backend_buffer_type_t buft);
TSR_API tsr_gallocr_t tsr_gallocr_new_n(tsr_backend_buffer_type_t * bufts, int n_bufs);
TSR_API void          tsr_gallocr_free(tsr_gallocr_t galloc);  /* NULL is fine */

/* How long reserve's packing may search for a smaller buffer when its heuristics did
 * not reach the lower bound (default 10 ms; 0: heuristics only), as tsr_pack's budget:
 * deterministic work for up to 1,000 buffers, wall time above. alloc_graph on a graph
 * that differs from the cached plan replans with the heuristics only, so graphs that
 * change every call stay cheap. */
TSR_API void tsr_gallocr_set_time_budget(tsr_gallocr_t galloc, double ms);

/* Plan the graph and size the buffer(s) for it (grow only). Call it with the largest
 * graph; later alloc_graph calls on it or smaller graphs do not reallocate.
 * node_buffer_ids / leaf_buffer_ids (may be NULL) choose each tensor's buffer. */
TSR_API bool tsr_gallocr_reserve(tsr_gallocr_t galloc, struct tsr_cgraph * graph);
TSR_API bool tsr_gallocr_reserve_n(tsr_gallocr_t galloc, struct tsr_cgraph * graph,
                                   const int * node_buffer_ids, const int * leaf_buffer_ids);

/* Place every tensor of the graph that has no data yet. A graph with the same topology
 * and sizes as the last planned one re-applies the cached plan; another graph is
 * replanned, and the buffer is reallocated only if it must grow.
 *
 * Planning rules (what a plan guarantees):
 *  - tensors that already have data or a buffer (weights, user memory) are left alone;
 *  - a view (view_src != NULL) gets no memory: it aliases its source, which stays live
 *    until the view's last use;
 *  - leafs without data and INPUT tensors are live from step 0 to their last use, so
 *    nothing overwrites them before that (they are never taken over in place);
 *  - OUTPUT tensors, and nodes that no other node consumes (the graph's results, its
 *    final node included), are live to the last step and never reused;
 *  - in place: a node for which tsr_op_can_inplace(node, i) holds writes into the
 *    memory of src[i] when that src (or the whole source behind a contiguous view of it)
 *    is a node that dies at this step, is not INPUT/OUTPUT, has the same aligned size
 *    and lives in the same buffer;
 *  - each buffer id gets its own buffer (node_buffer_ids / leaf_buffer_ids; all 0 when
 *    NULL); alloc_graph on a graph that was not reserved reuses the ids of the last
 *    reserve_n when the node and leaf counts match. */
TSR_API bool   tsr_gallocr_alloc_graph(tsr_gallocr_t galloc, struct tsr_cgraph * graph);
TSR_API size_t tsr_gallocr_get_buffer_size(tsr_gallocr_t galloc, int buffer_id);
TSR_API tsr_backend_buffer_t tsr_gallocr_get_buffer(tsr_gallocr_t galloc, int buffer_id);
/* How many times a buffer was (re)allocated: for tests and diagnostics. */
TSR_API int    tsr_gallocr_get_n_reallocs(tsr_gallocr_t galloc);

/* ---- execution order: lower the lower bound itself ------------------------------------
 * The lower bound gallocr packs against is the most bytes live at one step of the
 * graph's order. Any topological order computes the same results (bit for bit: every
 * node still reads exactly its operands), but on branchy graphs (U-Net skips,
 * Inception/NASNet cells, attention with concatenated skips) some orders keep far fewer
 * tensors alive at once. tsr_graph_optimize_order reorders graph->nodes, within the
 * dependencies, to the order with the smallest lower bound it finds under gallocr's
 * rules (in place, views, INPUT/OUTPUT, results), and never to a worse one than the
 * builder's: when nothing strictly better is found the graph is left as it was.
 * A view node with a computing op (an *_inplace op's result, a copy into a view) writes
 * into its source, so it keeps its place relative to every other user of that source. */
struct tsr_order_report {
    size_t builder_lower_bound;    /* bytes, the order the graph had */
    size_t optimized_lower_bound;  /* bytes, the order it has now (<= builder_lower_bound) */
    size_t any_order_lower_bound;  /* bytes no order can go under (the order-independent floor:
                                      at some node's step, what is live in every order) */
    bool   optimal;                /* no order is lower: exact search finished on every piece at
                                      the peak, or optimized_lower_bound meets any_order_lower_bound */
    bool   reordered;              /* the graph's order changed */
    int    n_pieces;               /* independent pieces between single-node cuts */
    double ms;                     /* wall time spent */
};

struct tsr_order_params {
    double time_budget_ms;    /* wall time for the whole call (default 20): floor, greedy orders
                                 and searches all count; only each piece's first greedy order
                                 always completes. For a 2,000-node random DAG (thread CPU): the
                                 floor 3 ms, one greedy order 0.4 ms; the whole call with the
                                 default 9-12 ms CPU, 21-25 ms wall on a loaded machine */
    int    exact_max_nodes;   /* pieces up to this many nodes try exact search first (default 200) */
    int    exact_max_states;  /* exact search gives up on a piece after this many memoised states
                                 (default 200000, about 20 MB) and falls back to the heuristics */
    tsr_backend_buffer_type_t buft;   /* sizes and alignment as this type allocates; NULL: CPU */
    struct tsr_order_report * report; /* filled when not NULL */
};

TSR_API struct tsr_order_params tsr_order_default_params(void);
/* Reorders graph (params NULL: defaults). The graph must not be a tsr_graph_view of a
 * larger one. false + error on bad params or out of memory (graph unchanged). */
TSR_API bool tsr_graph_optimize_order(struct tsr_cgraph * graph, const struct tsr_order_params * params);
/* Opt-in: reserve reorders the graph before planning it, with these params (copied; buft
 * is the gallocr's; report, if set, is filled at each reserve and must outlive them;
 * NULL: off). With node buffer ids (reserve_n), nodes move only within each run of
 * consecutive nodes with the same id, so the caller's ids still name each node's buffer
 * and a scheduler's splits keep their nodes; the new order is kept only when no
 * buffer's lower bound grows and their sum drops (the report gives the sums).
 * alloc_graph on a graph rebuilt in the builder's order re-applies the reserved order
 * before it re-applies the cached plan. */
TSR_API bool tsr_gallocr_set_optimize_order(tsr_gallocr_t galloc, const struct tsr_order_params * params);

/* ---- plans: what gallocr decided, readable and checkable ----------------------------- */

struct tsr_plan_tensor {
    const struct tsr_tensor * tensor;
    const char * name;
    int    buffer_id;
    size_t offset;    /* within its buffer */
    size_t size;      /* aligned bytes reserved */
    int    first;     /* first step (node index) it is live */
    int    last;      /* last step it is live (inclusive) */
    bool   inplace;   /* reuses the memory of a dying operand */
    int    inplace_of;/* index (in tensors) of the tensor whose memory it took over, or -1 */
};

struct tsr_plan_buffer {
    size_t planned_size;   /* bytes of the buffer the plan needs */
    size_t lower_bound;    /* max over steps of the aligned bytes live at that step */
    size_t no_reuse_size;  /* sum of aligned sizes: every tensor in its own slot */
    size_t alignment;
};

struct tsr_plan {
    int n_tensors;
    const struct tsr_plan_tensor * tensors;
    int n_buffers;
    const struct tsr_plan_buffer * buffers;
    int n_steps;
};

/* The plan of the last reserve/alloc_graph; valid until the next one or free. Its tensor
 * pointers refer to the graph of the last reserve/alloc_graph (valid while it lives). */
TSR_API const struct tsr_plan * tsr_gallocr_get_plan(tsr_gallocr_t galloc);

/* true when no two tensors live at one step overlap in one buffer, every offset is
 * aligned and everything lies inside its buffer (capacities[i] = buffer i's bytes, or
 * NULL to use planned_size); otherwise false with the first violation in the error. */
TSR_API bool tsr_plan_check(const struct tsr_plan * plan, const size_t * capacities);

/* Export: JSON (every tensor and the totals) and an SVG picture of one buffer: steps on
 * x and offsets on y (numbered ticks, bytes in B/KiB/MiB/GiB), one rectangle per tensor
 * coloured by the kind of op that made it (a legend says which), labelled with its name
 * (or op and shape when unnamed) where the label fits and on hover always, at least a
 * few pixels high however small; the lower bound and the planned size are lines with
 * their captions beside the plot. false + error on a bad buffer id or I/O failure. */
TSR_API bool tsr_plan_write_json(const struct tsr_plan * plan, FILE * out);
TSR_API bool tsr_plan_write_svg(const struct tsr_plan * plan, int buffer_id, FILE * out);

/* Several plans in one picture, one panel each, top to bottom, on one offset scale so
 * their sizes compare at a glance: e.g. the builder's order and the optimised order of a
 * graph (tsr_graph_optimize_order). caption (may be NULL) heads its panel. */
struct tsr_plan_panel {
    const struct tsr_plan * plan;
    const char * caption;
};
TSR_API bool tsr_plan_write_svg_panels(const struct tsr_plan_panel * panels, int n_panels, int buffer_id, FILE * out);

/* ---- the packing core, exposed for external workloads --------------------------------
 * n buffers, each live on the half-open step range [lower, upper) with a size; assigns
 * offsets (aligned to `alignment`) so that no two buffers live at one step overlap.
 * Returns the peak (max offset + size), or SIZE_MAX with an error. It stops early at the
 * lower bound. work_budget_ms bounds the improvement after the heuristics (0: heuristics
 * only; the first greedy packing always completes, and every greedy order and the
 * iterated greedy when n <= 1000):
 *  - n <= 1000 (the branch and bound): deterministic work, counted in search nodes and
 *    the cells its bounds scan, not time, so the result depends on the input and the
 *    budget alone, never on the machine or its load. The figure is in "ms" of that work
 *    as calibrated on one machine (10,000 units per ms of one core, +-30 % elsewhere); a
 *    wall-clock guard stops it at 10x the budget on a machine far slower than that.
 *  - n > 1000 (window search, more orders, iterated greedy, random walk): wall time from
 *    the call, so a budget that cuts it short can give a different answer under load. */
struct tsr_pack_item { int64_t lower, upper; size_t size; size_t offset; };
TSR_API size_t tsr_pack(struct tsr_pack_item * items, size_t n, size_t alignment, double work_budget_ms);
TSR_API size_t tsr_pack_lower_bound(const struct tsr_pack_item * items, size_t n, size_t alignment);

/* tsr_pack with a target: the search stops as soon as a packing's peak is <= target_peak
 * (0, or anything under the lower bound: the lower bound, as tsr_pack). A caller that
 * knows a capacity to fit in (a device's memory, a fit found before) aims the search at
 * it from the start instead of at the lower bound, which may be out of reach; without
 * a packing at the target the best one found comes back, as from tsr_pack. alignment and
 * work_budget_ms are tsr_pack's. params NULL: SIZE_MAX with an error. */
struct tsr_pack_params {
    size_t alignment;
    double work_budget_ms;
    size_t target_peak;
};
TSR_API size_t tsr_pack_ex(struct tsr_pack_item * items, size_t n, const struct tsr_pack_params * params);

/* In-place contract every backend honours: may node write its result into the memory
 * of src[src_index], exactly aliased? Always requires: node is not a view, src has the
 * same type and shape as node, and both are contiguous. Then, by op:
 *   ADD, SUB, MUL, DIV                              src 0 or 1 (same shape: no broadcast)
 *   GLU with a separate gate (swiglu_split)         src 0 or 1
 *   SCALE, SQR, SQRT, LOG, UNARY (every unary op), CLAMP,
 *   NORM, RMS_NORM, SOFT_MAX (not the mask), ROPE (not the positions),
 *   DIAG_MASK_INF, DUP, CONT                        src 0
 * and no other op. Backends must compute these ops correctly when dst->data ==
 * src[i]->data (row-wise ops: read the whole row before writing it). */
TSR_API bool tsr_op_can_inplace(const struct tsr_tensor * node, int src_index);

#ifdef __cplusplus
} /* extern "C" */
#endif

#ifdef __cplusplus
TSR_CXX_BEGIN
/* Owns a gallocr; tsr_gallocr_free on destruction. */
class gallocr {
public:
    explicit gallocr(tsr_backend_buffer_type_t buft) : g_(tsr_gallocr_new(buft)) {}
    ~gallocr() { tsr_gallocr_free(g_); }
    gallocr(const gallocr &) = delete;
    gallocr & operator=(const gallocr &) = delete;
    tsr_gallocr_t get() const { return g_; }
    operator tsr_gallocr_t() const { return g_; }
private:
    tsr_gallocr_t g_;
};
TSR_CXX_END /* namespace tsr */
#endif

#define TSR_ALLOC_DECLARED  /* every declaration above is in: the implementation may follow */
#endif /* TESSERA_ALLOC_H */

/* ---- implementation (outside the include guard: see tessera.h) ---------------------- */
#if defined(TSR_IMPLEMENTATION) && !defined(TSR_ALLOC_IMPLEMENTED)
#define TSR_ALLOC_IMPLEMENTED
#include "tessera.h"
#include "backend.h"
#include "backend_impl.h"
#include "impl/packing.inl"
#include "impl/alloc.inl"
#include "impl/order.inl"
#include "impl/plan_export.inl"
#include "impl/implement_included.h"
#endif
