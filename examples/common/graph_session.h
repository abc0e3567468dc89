// graph_session.h - one fixed graph of an example program run on one or several backends
// through the scheduler: built once, its compute buffers planned (reserve) once, then
// allocated and computed for each new input. And the summary both examples print: where the
// memory went and how long a run took. Shared by examples/whisper-encoder and examples/unet-block.
#pragma once

#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/sched.h"
#include "../run/backends.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace exw {

struct graph_session {
    std::vector<tsr_backend_t> backends;   // priority order: the weights' backend first, the CPU last
    tsr::context ctx_g{0, nullptr, true};   // the graph's metadata; sized by plan_graph
    // declared after ctx_g, so freed before it: freeing puts the graph's sources back
    std::unique_ptr<tsr_backend_sched, decltype(&tsr_backend_sched_free)> sched{nullptr, &tsr_backend_sched_free};
    tsr_cgraph * gf = nullptr;
    std::vector<tsr_backend_sched_buffer_info> compute;   // per backend, after plan_graph
    int n_nodes = 0, n_splits = 0, n_split_inputs = 0;
};

// Builds the graph in ctx (room for graph_size tensors and one graph of that many nodes).
using graph_builder = std::function<tsr_cgraph *(tsr_context * ctx, std::string & err)>;

// Build the graph and plan every backend's compute buffer for it (s: a fresh session).
inline bool plan_graph(graph_session & s, const std::vector<tsr_backend_t> & backends, size_t graph_size,
                       const graph_builder & build, std::string & err) {
    s.backends = backends;
    s.ctx_g = tsr::context(graph_size * tsr_tensor_overhead() + tsr_graph_overhead_custom(graph_size, false), nullptr, true);
    if (!s.ctx_g.ok()) { err = std::string("graph context: ") + tsr_last_error(); return false; }
    if (!(s.gf = build(s.ctx_g, err))) return false;
    s.sched.reset(tsr_backend_sched_new(s.backends.data(), nullptr, (int) s.backends.size(), 2 * graph_size, false));
    if (!s.sched) { err = std::string("scheduler: ") + tsr_last_error(); return false; }
    if (!tsr_backend_sched_reserve(s.sched.get(), s.gf)) {
        err = std::string("planning the compute buffers: ") + tsr_last_error();
        return false;
    }
    s.compute.assign(s.backends.size(), tsr_backend_sched_buffer_info{});
    for (size_t i = 0; i < s.backends.size(); ++i) {
        if (!tsr_backend_sched_get_buffer_info(s.sched.get(), s.backends[i], &s.compute[i])) { err = tsr_last_error(); return false; }
    }
    s.n_nodes = tsr_graph_n_nodes(s.gf);
    s.n_splits = tsr_backend_sched_get_n_splits(s.sched.get());
    s.n_split_inputs = tsr_backend_sched_get_n_split_inputs(s.sched.get());
    return true;
}

// Allocate the graph in the planned buffers, let set_inputs write its inputs, compute, and
// read `out` into host.
inline bool run_graph(graph_session & s, const std::function<bool()> & set_inputs, tsr_tensor * out, std::vector<float> & host,
                      std::string & err) {
    tsr_backend_sched_reset(s.sched.get());
    if (!tsr_backend_sched_alloc_graph(s.sched.get(), s.gf)) { err = std::string("alloc_graph: ") + tsr_last_error(); return false; }
    if (!set_inputs()) { err = std::string("setting the inputs: ") + tsr_last_error(); return false; }
    const tsr_status st = tsr_backend_sched_graph_compute(s.sched.get(), s.gf);
    if (st != TSR_STATUS_SUCCESS) { err = std::string("graph_compute: ") + tsr_status_to_string(st) + ": " + tsr_last_error(); return false; }
    host.resize((size_t) tsr_nelements(out));
    if (!tsr_backend_tensor_get(out, host.data(), 0, host.size() * sizeof(float))) {
        err = std::string("reading the output: ") + tsr_last_error();
        return false;
    }
    return true;
}

// How many nodes of each op (tsr_op_desc: unary functions by name) the scheduler placed on
// backend in the last split graph.
inline std::map<std::string, int> ops_on(const graph_session & s, tsr_backend_t backend) {
    std::map<std::string, int> n;
    for (int i = 0; i < tsr_graph_n_nodes(s.gf); ++i) {
        tsr_tensor * node = tsr_graph_node(s.gf, i);
        if (tsr_backend_sched_get_tensor_backend(s.sched.get(), node) == backend) n[tsr_op_desc(node)]++;
    }
    return n;
}

// ---- the programs' side ---------------------------------------------------------------------

inline double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline double mib(size_t b) { return (double) b / (1024.0 * 1024.0); }

// The backend named on the command line and, next to a GPU, the CPU for the ops it lacks
// (owned), in priority order (list); false + err when one cannot start.
inline bool open_backends(const std::string & name, int device, int threads, std::vector<tsr::backend> & owned,
                          std::vector<tsr_backend_t> & list, std::string & err) {
    owned.emplace_back(trun::make_backend(name, device, threads, err));
    if (!owned.back().get()) return false;
    if (!tsr_backend_is_cpu(owned.back())) {
        owned.emplace_back(trun::make_backend("cpu", 0, threads, err));
        if (!owned.back().get()) return false;
    }
    for (const tsr::backend & b : owned) list.push_back(b.get());
    return true;
}

// "<program>: error: <msg>" on stderr; the exit status of a failed run.
inline int error_exit(const char * program, const std::string & msg) {
    fprintf(stderr, "%s: error: %s\n", program, msg.c_str());
    return 1;
}

// main's body: no exception leaves it; whatever escapes run (std::bad_alloc from a vector)
// is reported in one line like every other error.
inline int guarded_main(const char * program, int argc, char ** argv, int (*run)(int, char **)) {
    std::string what = "unknown exception";
    try {
        return run(argc, argv);
    } catch (const std::exception & e) {
        what = e.what();
    } catch (...) {
    }
    return error_exit(program, "unexpected error: " + what);
}

// values as raw float32
inline bool write_floats(const std::string & path, const std::vector<float> & values, std::string & err) {
    FILE * f = fopen(path.c_str(), "wb");
    bool ok = f && fwrite(values.data(), sizeof(float), values.size(), f) == values.size();
    if (f && fclose(f) != 0) ok = false;
    if (!ok) err = "cannot write " + path;
    return ok;
}

// Where the memory went: the weights, each backend's compute buffer against its lower bound
// and workspace, how the scheduler cut the graph.
inline void print_plan(const char * program, const graph_session & s, size_t weight_bytes, const std::string & weights_note) {
    fprintf(stderr, "\n%s: memory plan\n", program);
    fprintf(stderr, "  weights buffer : %10.2f MiB  (%s, %s)\n", mib(weight_bytes), tsr_backend_name(s.backends.front()),
            weights_note.c_str());
    for (size_t i = 0; i < s.backends.size(); ++i) {
        const tsr_backend_sched_buffer_info & c = s.compute[i];
        fprintf(stderr, "  %s\n", tsr_backend_name(s.backends[i]));
        fprintf(stderr, "    compute buffer : %10.2f MiB  (planned %.2f MiB, lower bound %.2f MiB, ratio %.3f; input copies %.2f MiB)\n",
                mib(c.buffer_size), mib(c.planned_size), mib(c.lower_bound),
                c.lower_bound ? (double) c.planned_size / (double) c.lower_bound : 0.0, mib(c.input_bytes));
        fprintf(stderr, "    workspace      : %10.2f MiB\n", mib(tsr_backend_get_workspace_size(s.backends[i])));
    }
    fprintf(stderr, "  graph          : %d nodes, %d splits, %d input copies\n", s.n_nodes, s.n_splits, s.n_split_inputs);
    // what the first backend did not run, so a user sees which ops a device lacks
    for (size_t i = 1; i < s.backends.size(); ++i) {
        std::string ops;
        for (const auto & op : ops_on(s, s.backends[i])) ops += (ops.empty() ? "" : ", ") + op.first + " x" + std::to_string(op.second);
        if (!ops.empty()) fprintf(stderr, "  on %-11s : %s\n", tsr_backend_name(s.backends[i]), ops.c_str());
    }
}

// Run once, then `repeat` timed more; print the times and the rate for `flops` per run.
inline bool timed_runs(const char * what, int repeat, double flops, const std::function<bool()> & run_once) {
    const double t0 = now_s();
    if (!run_once()) return false;
    const double t_first = now_s() - t0;
    double t_best = 1e300, t_sum = 0.0;
    for (int r = 0; r < repeat; ++r) {
        const double t = now_s();
        if (!run_once()) return false;
        const double dt = now_s() - t;
        t_best = std::min(t_best, dt);
        t_sum += dt;
    }
    const double t_timed = repeat > 0 ? t_best : t_first, gflop = flops * 1e-9;
    fprintf(stderr, "  %-14s : first %.3f s", what, t_first);
    if (repeat > 0) fprintf(stderr, "; %d more: best %.3f s, mean %.3f s", repeat, t_best, t_sum / repeat);
    fprintf(stderr, " (%.2f GFLOP, %.1f GFLOP/s)\n", gflop, t_timed > 0 ? gflop / t_timed : 0.0);
    return true;
}

} // namespace exw
