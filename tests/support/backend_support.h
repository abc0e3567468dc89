// Running graphs on backends for tests (library tsr_test_support, with test_support.h):
// tensors in any backend buffer read and written in logical order, a graph built once per
// backend from a deterministic builder with seeded inputs, the comparison of two runs,
// and the CPU backend's knobs (ISA path, threads).
#pragma once
#include "test_support.h"

#include "tessera/backend.h"
#include "tessera/backend_impl.h"  // masked_backend is a backend of its own: a writer's view
#include "tessera/alloc.h"
#include "tessera-cpu.h"

#include <functional>
#include <string>
#include <utility>

namespace tsrt {

// ---- tensors in any backend buffer (host or device; views included) -----------------------
void upload(tsr_tensor * t, const std::vector<float> & values);   // logical order
std::vector<float> download(const tsr_tensor * t);                // logical order
// Uniform values in [lo, hi) from std::mt19937(seed), converted to t's type.
void fill_random(tsr_tensor * t, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// ---- graphs built from a deterministic builder ----------------------------------------------
struct graph_input {
    tsr_tensor * t = nullptr;
    std::vector<int32_t> ints;   // I32 tensors: these values, repeated (empty: 0, 1, 2, ...)
    std::vector<float> values;   // float tensors: these values when not empty
    bool pattern = false;        // float tensors: pattern_value(i, seed) (cheap, for huge tensors)
    float lo = -1.0f, hi = 1.0f; // float tensors: uniform in [lo, hi), converted to t's type
    // float tensors: then these (logical index, value) pairs set, e.g. NaN and infinities
    std::vector<std::pair<size_t, float>> specials;
};

struct graph_inputs {
    std::vector<graph_input> list;
    tsr_tensor * add(tsr_tensor * t, float lo = -1.0f, float hi = 1.0f);
    tsr_tensor * add_values(tsr_tensor * t, std::vector<float> v);
    tsr_tensor * add_pattern(tsr_tensor * t);
    tsr_tensor * add_i32(tsr_tensor * t, std::vector<int32_t> v);
    // uniform in [lo, hi) with the specials set over it
    tsr_tensor * add_with_specials(tsr_tensor * t, float lo, float hi, std::vector<std::pair<size_t, float>> specials);
};

// Builds the graph in ctx (tensors without data), registers its inputs, returns the output.
using graph_builder = std::function<tsr_tensor *(tsr_context *, graph_inputs &)>;

// "MUL_MAT(bf16, f32) -> f32": a node's op and types.
std::string node_signature(const tsr_tensor * node);

// Upload one input's values; run_graph gives input i the seed `seed + 7919 * i`.
void fill_input(const graph_input & in, uint32_t seed);

struct run_result {
    bool ok = false;          // built, placed, computed and read
    bool supported = true;    // false: the backend declines a node (error names it)
    std::string error;
    std::vector<float> out;   // the output in logical order
};

// Build in a fresh no_alloc context, check the backend supports every node, place every
// tensor in one buffer of the backend, fill the inputs (seeded), compute, read the output.
run_result run_graph(tsr_backend_t be, const graph_builder & b, uint32_t seed = 1234, int n_tensors = 256);

// CHECK that both runs succeeded and NMSE(got, ref) <= max_nmse; returns the NMSE.
double check_close(const run_result & got, const run_result & ref, double max_nmse);

// run_graph on be and on ref_be, then check_close.
double compare_backends(tsr_backend_t be, tsr_backend_t ref_be, const graph_builder & b, double max_nmse,
                        uint32_t seed = 1234);

// ---- the CPU backend --------------------------------------------------------------------
// A CPU backend shared by a test program (freed at exit).
tsr_backend_t cpu();

// The ISA paths this CPU (and build) can run, scalar first.
std::vector<tsr_cpu_isa> isas();

// Selects an ISA path for the scope (REQUIREs it is supported), restores the one in use.
struct isa_scope {
    tsr_cpu_isa saved;
    explicit isa_scope(tsr_cpu_isa isa);
    ~isa_scope();
};

// Sets an environment variable for the scope (the backend reads some at init).
struct env_scope {
    std::string name;
    env_scope(const char * n, const char * value);
    ~env_scope();
};

// A CPU backend with n_threads. small_node: the TSR_CPU_SMALL_NODE it is created with;
// "0" (the default here) splits every node over all threads, so tiny test shapes still
// exercise the multi-thread paths; nullptr keeps the library default.
struct backend_holder {
    tsr_backend_t be = nullptr;
    explicit backend_holder(int n_threads, const char * small_node = "0");
    ~backend_holder();
    backend_holder(const backend_holder &) = delete;
    backend_holder & operator=(const backend_holder &) = delete;
    operator tsr_backend_t() const { return be; }
};

// ---- a backend with ops taken away (scheduler tests) ------------------------------------------
// Forwards everything to `inner` but declines the ops `declines` says yes to, so a test can
// force the scheduler's fallbacks with backends it has. It has a host buffer type of its
// own that only it accepts (memory from `alloc`, NULL: the default host allocator): two of
// them over one CPU backend behave like two devices, and tensors move between them by copy.
struct masked_backend {
    using predicate = std::function<bool(const tsr_tensor *)>;
    masked_backend(tsr_backend_t inner, std::string name, predicate declines, const tsr_host_allocator * alloc = nullptr);
    ~masked_backend();
    masked_backend(const masked_backend &) = delete;
    masked_backend & operator=(const masked_backend &) = delete;
    operator tsr_backend_t() { return &be; }
    tsr_backend_buffer_type_t buft() const { return own_buft; }
    // Its buffers claim not to be host memory, like a device's: copies between two such
    // backends then go device -> host -> device.
    void as_device_memory();

    tsr_backend be{};
    tsr_backend_t inner;
    std::string name;
    predicate declines;
    tsr_backend_buffer_type_t own_buft = nullptr;
    int n_computes = 0;   // graph_compute calls
};

} // namespace tsrt
