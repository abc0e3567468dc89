/*
 * sched.h - the backend scheduler: one graph split across several backends.
 *
 * Mirrors ggml_backend_sched (ggml-backend.h; replace `ggml_` by `tsr_`). Give it the
 * backends in priority order (the CPU last: it runs every op), and it
 *  - assigns every node to a backend: an op runs where its weights live when that backend
 *    supports it, user overrides (set_tensor_backend) win, neighbours join their
 *    neighbours' backend where it supports them, and an op the chosen backend lacks falls
 *    back to the next backend in priority order that has it;
 *  - cuts the graph into splits, runs of consecutive nodes on one backend;
 *  - copies each split's inputs that live on another backend, once per graph and backend
 *    (a tensor two splits of one backend read is copied once), into tensors planned in
 *    that backend's compute buffer;
 *  - plans every backend's compute buffer with one gallocr (one buffer type per backend,
 *    input copies included), so each lands at its own lower bound. reserve sizes the
 *    buffers once for the largest graph; alloc_graph and graph_compute on it or smaller
 *    graphs then allocate no buffer.
 *
 *     tsr_backend_t backends[2] = { vulkan, cpu };
 *     tsr_backend_sched_t s = tsr_backend_sched_new(backends, NULL, 2, TSR_DEFAULT_GRAPH_SIZE, false);
 *     if (!tsr_backend_sched_reserve(s, worst_graph)) puts(tsr_last_error());  // names the op no backend runs
 *     tsr_backend_sched_alloc_graph(s, gf);       // places every tensor without data
 *     tsr_backend_tensor_set(input, ...);         // graph inputs live on the last backend (the CPU)
 *     tsr_backend_sched_graph_compute(s, gf);
 *
 * Graph inputs (leafs flagged TSR_TENSOR_FLAG_INPUT without data) are placed on the last
 * backend, so the program writes them in host memory; a split on another backend gets a
 * copy. Between alloc_graph and the end of graph_compute (or reset), the graph's nodes read
 * foreign inputs through the scheduler's copies (their src pointers are redirected, as in
 * ggml); graph_compute, reset and free put the original sources back, so call one of
 * them before freeing a graph you allocated (the next alloc_graph writes into the last one).
 *
 * Implementation: TSR_IMPLEMENTATION, in one C++17 file, compiles the core and every
 * backend header included in that file, in any include order (README "Using tessera").
 */
#ifndef TESSERA_SCHED_H
#define TESSERA_SCHED_H

#include "tessera.h"
#include "backend.h"
#include "alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How many copies of the split inputs `parallel` keeps (ggml's GGML_SCHED_MAX_COPIES). */
#define TSR_SCHED_MAX_COPIES 4
/* The most backends one scheduler takes (ggml's GGML_SCHED_MAX_BACKENDS). */
#define TSR_SCHED_MAX_BACKENDS 16

typedef struct tsr_backend_sched * tsr_backend_sched_t;

/* Called per node with ask = true: "do you want to see this node's result?" Nodes up to
 * the first one answered true are computed together, then it is called again with
 * ask = false and the computed node: return true to go on, false to stop the graph
 * (graph_compute then returns TSR_STATUS_ABORTED). */
typedef bool (*tsr_backend_sched_eval_callback)(struct tsr_tensor * t, bool ask, void * user_data);

/* Would `backend` rather run op itself even though its weights live in another backend's
 * (host) buffer? ggml asks the device (offload_op); tessera asks the backend, and the
 * device layer will forward to it: true when the backend computes away from host memory,
 * supports op, and op is a batch of at least 32 rows (prompt processing), where copying
 * the weight costs less than computing on the CPU. GET_ROWS never: it reads a few rows. */
TSR_API bool tsr_backend_offload_op(tsr_backend_t backend, const struct tsr_tensor * op);

/* A scheduler over n_backends backends in priority order (at most TSR_SCHED_MAX_BACKENDS;
 * the last is the fallback that must run every op the others lack: the CPU). bufts: the
 * compute buffer type of each backend (NULL: each backend's default). graph_size: the
 * most nodes + leafs a graph may have. parallel: keep TSR_SCHED_MAX_COPIES copies of the
 * split inputs, rotated per graph, with an event per (backend, copy) on devices that have
 * events (Vulkan), so the host fills graph N+1's inputs and runs its CPU splits while a
 * device still runs graph N; results are those of parallel = false. NULL + error on bad
 * arguments (or an event a device could not make). */
TSR_API tsr_backend_sched_t tsr_backend_sched_new(tsr_backend_t * backends, tsr_backend_buffer_type_t * bufts, int n_backends,
                                                  size_t graph_size, bool parallel);
/* NULL is fine; the backends stay (free it before them when a graph_compute_async was not
 * synchronized: it waits for that work). Puts back the sources of
 * a graph allocated and not computed (so free that graph after the scheduler, or reset
 * the scheduler first). */
TSR_API void                tsr_backend_sched_free(tsr_backend_sched_t sched);

/* Split the graph and size every backend's compute buffer (and workspace) for it: call
 * it with the largest graph. false + error when an op runs on no backend (the error names
 * the node, its op and types), a tensor lives in a buffer no backend can use, or memory
 * runs out. The graph is left as it was (no tensor placed). */
TSR_API bool tsr_backend_sched_reserve(tsr_backend_sched_t sched, struct tsr_cgraph * measure_graph);

TSR_API int           tsr_backend_sched_get_n_backends(tsr_backend_sched_t sched);
TSR_API tsr_backend_t tsr_backend_sched_get_backend(tsr_backend_sched_t sched, int i);  /* NULL when out of range */

/* Of the last split (reserve, alloc_graph or compute): the number of splits, and of input
 * copies made per graph (each a tensor copied once from another backend). */
TSR_API int tsr_backend_sched_get_n_splits(tsr_backend_sched_t sched);
TSR_API int tsr_backend_sched_get_n_split_inputs(tsr_backend_sched_t sched);
/* Split i's backend and the number of inputs copied for it (NULL / -1 out of range). */
TSR_API tsr_backend_t tsr_backend_sched_get_split_backend(tsr_backend_sched_t sched, int i);
TSR_API int           tsr_backend_sched_get_split_n_inputs(tsr_backend_sched_t sched, int i);
/* How many copies of the split inputs are kept (1, or TSR_SCHED_MAX_COPIES when parallel). */
TSR_API int tsr_backend_sched_get_n_copies(tsr_backend_sched_t sched);

/* Bytes of host memory kept for copies between two devices that cannot copy between
 * themselves (the largest such copy reserve or alloc_graph saw; 0 when none). */
TSR_API size_t tsr_backend_sched_get_staging_size(tsr_backend_sched_t sched);

/* Bytes of backend's compute buffer (0 for a backend not in the scheduler). */
TSR_API size_t tsr_backend_sched_get_buffer_size(tsr_backend_sched_t sched, tsr_backend_t backend);

/* What the last plan decided for one backend's compute buffer. */
struct tsr_backend_sched_buffer_info {
    size_t buffer_size;   /* bytes allocated (grows only) */
    size_t planned_size;  /* bytes the last plan needs */
    size_t lower_bound;   /* the most aligned bytes live at one step on this backend */
    size_t input_bytes;   /* aligned bytes of every input copy (all n_copies) summed: copies not live at once count each */
    int    n_inputs;      /* input copies on this backend per graph */
};
/* false + error for a backend not in the scheduler or before the first reserve/alloc. */
TSR_API bool tsr_backend_sched_get_buffer_info(tsr_backend_sched_t sched, tsr_backend_t backend,
                                               struct tsr_backend_sched_buffer_info * info);

/* Run node on backend whatever the rules say (until reset). Checked at the next split:
 * false + error there when backend cannot run the node. */
TSR_API void          tsr_backend_sched_set_tensor_backend(tsr_backend_sched_t sched, struct tsr_tensor * node, tsr_backend_t backend);
/* The backend a tensor of the last split graph was given (or its override); NULL if none. */
TSR_API tsr_backend_t tsr_backend_sched_get_tensor_backend(tsr_backend_sched_t sched, struct tsr_tensor * node);

/* Split the graph and place every tensor without data in the backends' compute buffers
 * (the buffers grow only when the graph needs more than reserve sized). false + error as
 * reserve. */
TSR_API bool            tsr_backend_sched_alloc_graph(tsr_backend_sched_t sched, struct tsr_cgraph * graph);
/* alloc_graph when the graph was not allocated, then run the splits in order (copying
 * each split's inputs first, once their producers are done) and wait for every backend. */
TSR_API enum tsr_status tsr_backend_sched_graph_compute(tsr_backend_sched_t sched, struct tsr_cgraph * graph);
/* The same without the final wait: the last splits may still run on their devices; the
 * results are ready after synchronize. The next alloc_graph or compute waits only where
 * it must (parallel: for the input copy slot it reuses, or when the plan changes). */
TSR_API enum tsr_status tsr_backend_sched_graph_compute_async(tsr_backend_sched_t sched, struct tsr_cgraph * graph);
TSR_API void            tsr_backend_sched_synchronize(tsr_backend_sched_t sched);

/* Forget the last graph's assignments, overrides and copies (the buffers stay): call it
 * before building a different graph whose overrides you set. */
TSR_API void tsr_backend_sched_reset(tsr_backend_sched_t sched);

/* Observe (or stop at) nodes while a graph computes; NULL callback: off. */
TSR_API void tsr_backend_sched_set_eval_callback(tsr_backend_sched_t sched, tsr_backend_sched_eval_callback callback,
                                                 void * user_data);

#ifdef __cplusplus
} /* extern "C" */
#endif

#ifdef __cplusplus
TSR_CXX_BEGIN
/* Owns a scheduler; tsr_backend_sched_free on destruction. */
class backend_sched {
public:
    explicit backend_sched(tsr_backend_sched_t s = nullptr) : s_(s) {}
    ~backend_sched() { tsr_backend_sched_free(s_); }
    backend_sched(const backend_sched &) = delete;
    backend_sched & operator=(const backend_sched &) = delete;
    backend_sched(backend_sched && o) noexcept : s_(o.s_) { o.s_ = nullptr; }
    tsr_backend_sched_t get() const { return s_; }
    operator tsr_backend_sched_t() const { return s_; }
private:
    tsr_backend_sched_t s_;
};
TSR_CXX_END /* namespace tsr */
#endif

#define TSR_SCHED_DECLARED  /* every declaration above is in: the implementation may follow */
#endif /* TESSERA_SCHED_H */

/* ---- implementation (outside the include guard: see tessera.h) ---------------------- */
#if defined(TSR_IMPLEMENTATION) && !defined(TSR_SCHED_IMPLEMENTED)
#define TSR_SCHED_IMPLEMENTED
#include "tessera.h"
#include "backend.h"
#include "alloc.h"
#include "backend_impl.h"  /* tsr_backend_offload_by_batch */
#include "impl/sched.inl"
#include "impl/implement_included.h"
#endif
