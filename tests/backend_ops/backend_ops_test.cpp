// test_backend_ops: every case of the op table (op_cases.cpp) on every backend present
// (each CPU ISA path other than scalar, Vulkan, CUDA), compared with the CPU backend on
// the scalar path (one thread). A case a backend declines (tsr_backend_supports_op) is
// counted and reported, not failed; a backend that is absent says so with WARN.
//
// TSR_BACKEND_OPS_FILTER=text runs only the cases whose description contains text.
#include "op_cases.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <sstream>

using namespace bops;

namespace {

using backend_ptr = std::unique_ptr<tsr_backend, decltype(&tsr_backend_free)>;
using buffer_ptr = std::unique_ptr<tsr_backend_buffer, decltype(&tsr_backend_buffer_free)>;

bool selected(const op_case & c) {
    const char * f = std::getenv("TSR_BACKEND_OPS_FILTER");
    return !f || c.describe().find(f) != std::string::npos;
}

// The reference: the CPU backend on the scalar path, one thread; computed once per case.
const tsrt::run_result & reference(size_t i) {
    static std::vector<std::unique_ptr<tsrt::run_result>> cache(op_cases().size());
    if (!cache[i]) {
        static tsrt::backend_holder ref(1, nullptr);
        tsrt::isa_scope scalar(TSR_CPU_ISA_SCALAR);
        cache[i].reset(new tsrt::run_result(tsrt::run_graph(ref, op_cases()[i].builder())));
    }
    return *cache[i];
}

// Runs every case on be, checks each against the reference, prints a summary.
void run_table(tsr_backend_t be, const std::string & label) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<op_case> & cases = op_cases();
    // A small buffer held for the whole run keeps the backend's first memory block alive:
    // Vulkan frees a block when its last buffer goes, and making a 64 MiB block again for
    // every case would dominate the run (20x under glibc's MALLOC_PERTURB_, as meson sets).
    const buffer_ptr keep(tsr_backend_alloc_buffer(be, 256), tsr_backend_buffer_free);
    CHECK(keep);
    int n_run = 0, n_failed = 0, n_unsupported = 0;
    struct declined { int n = 0; std::string example; };
    std::map<std::string, declined> unsupported;   // by reason
    double worst = 0.0;                             // the largest NMSE / tolerance
    std::string worst_case;
    for (size_t i = 0; i < cases.size(); ++i) {
        const op_case & c = cases[i];
        if (!selected(c)) continue;
        INFO(label << ", case " << i << ": " << c.describe());
        const tsrt::run_result & ref = reference(i);
        CHECK(ref.supported);   // the table holds only what the CPU backend runs
        const tsrt::run_result got = tsrt::run_graph(be, c.builder());
        if (!got.supported) {
            ++n_unsupported;
            declined & d = unsupported[got.error];
            if (d.n++ == 0) d.example = c.describe();
            continue;
        }
        ++n_run;
        const double e = tsrt::check_close(got, ref, c.max_nmse);
        if (!(e <= c.max_nmse)) ++n_failed;
        const double ratio = e == 0.0 ? 0.0 : c.max_nmse > 0.0 ? e / c.max_nmse : INFINITY;
        if (ratio > worst || worst_case.empty()) {
            worst = ratio;
            std::ostringstream w;
            w << c.describe() << " (nmse " << e << ")";
            worst_case = w.str();
        }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("backend_ops on %s: %d cases run (%d failed), %d unsupported, %.1f s\n", label.c_str(), n_run, n_failed,
                n_unsupported, s);
    if (n_run) std::printf("  closest to its tolerance: %s, %.3g of the tolerance\n", worst_case.c_str(), worst);
    for (const auto & u : unsupported)
        std::printf("  unsupported: %s: %d case%s, e.g. %s\n", u.first.c_str(), u.second.n, u.second.n > 1 ? "s" : "",
                    u.second.example.c_str());
    std::fflush(stdout);
}

// A GPU backend runs token embeddings, decode (mat-vec) and prompt (GEMM) of every quantized
// GGUF weight type: run_table declining them would only count them.
void check_runs_every_weight_type(tsr_backend_t be) {
    tsr_init_params ip{64 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true};
    tsr_context * ctx = tsr_init(ip);
    REQUIRE(ctx);
    tsr_tensor * idx = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 3);
    tsr_tensor * vec = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 256, 1);
    tsr_tensor * mat = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 256, 9);
    for (tsr_type t : {TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL, TSR_TYPE_Q2_K,
                       TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K}) {
        INFO(tsr_backend_name(be) << ", weights " << tsr_type_name(t));
        tsr_tensor * w = tsr_new_tensor_2d(ctx, t, 256, 5);
        CHECK(tsr_backend_supports_op(be, tsr_get_rows(ctx, w, idx)));
        CHECK(tsr_backend_supports_op(be, tsr_mul_mat(ctx, w, vec)));
        CHECK(tsr_backend_supports_op(be, tsr_mul_mat(ctx, w, mat)));
    }
    tsr_free(ctx);
}

void cpu_isa_against_scalar(tsr_cpu_isa isa) {
    const std::string label = std::string("CPU ") + tsr_cpu_isa_name(isa);
    if (!tsr_cpu_isa_supported(isa)) {
        WARN("skipped: " << label << ": this CPU (or build) cannot run the path");
        return;
    }
    tsrt::isa_scope path(isa);
    tsrt::backend_holder be(2);   // every node split over both threads
    run_table(be, label);
}

} // namespace

TEST_CASE("backend_ops: the table covers every op of the CPU backend, and the CPU runs every case", "[backend_ops]") {
    std::set<int> ops, unary, glu;
    tsr_backend_t cpu = tsrt::cpu();
    for (const op_case & c : op_cases()) {
        INFO(c.describe());
        REQUIRE(c.make);
        CHECK(c.max_nmse >= 0.0);
        tsr_init_params ip{256 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true};
        tsr_context * ctx = tsr_init(ip);
        REQUIRE(ctx);
        tsrt::graph_inputs in;
        tsr_tensor * out = c.builder()(ctx, in);
        INFO(tsr_last_error());
        CHECK(out);
        tsr_cgraph * g = tsr_new_graph(ctx);
        REQUIRE(g);
        if (out) REQUIRE(tsr_build_forward_expand(g, out));
        for (int i = 0; i < tsr_graph_n_nodes(g); ++i) {
            const tsr_tensor * n = tsr_graph_node(g, i);
            ops.insert(n->op);
            if (n->op == TSR_OP_UNARY) unary.insert(tsr_get_op_params_i32(n, 0));
            if (n->op == TSR_OP_GLU) glu.insert(tsr_get_op_params_i32(n, 0));
            INFO("node " << i << ": " << tsr_op_desc(n));
            CHECK(tsr_backend_supports_op(cpu, n));
        }
        tsr_free(ctx);
    }
    for (int op = TSR_OP_NONE + 1; op < TSR_OP_COUNT; ++op) {
        if (op == TSR_OP_RESHAPE || op == TSR_OP_VIEW || op == TSR_OP_PERMUTE || op == TSR_OP_TRANSPOSE) continue;
        INFO("no case for op " << tsr_op_name((tsr_op)op));
        CHECK(ops.count(op) == 1);
    }
    for (int u = 0; u < TSR_UNARY_OP_COUNT; ++u) {
        INFO("no case for unary op " << tsr_unary_op_name((tsr_unary_op)u));
        CHECK(unary.count(u) == 1);
    }
    for (int u = 0; u < TSR_GLU_OP_COUNT; ++u) {
        INFO("no case for glu op " << tsr_glu_op_name((tsr_glu_op)u));
        CHECK(glu.count(u) == 1);
    }
    std::printf("backend_ops: %zu cases\n", op_cases().size());
}

TEST_CASE("backend_ops: CPU avx2 path against the scalar path", "[backend_ops][cpu]") { cpu_isa_against_scalar(TSR_CPU_ISA_AVX2); }
TEST_CASE("backend_ops: CPU avx512 path against the scalar path", "[backend_ops][cpu]") { cpu_isa_against_scalar(TSR_CPU_ISA_AVX512); }
TEST_CASE("backend_ops: CPU neon path against the scalar path", "[backend_ops][cpu]") { cpu_isa_against_scalar(TSR_CPU_ISA_NEON); }

// The table on the first device of a backend kind (for Vulkan the default device),
// found through the registry: WARN and return when the kind is not built in or has no
// usable device.
static void run_table_on(const char * kind) {
    if (!tsr_backend_reg_by_name(kind)) {
        WARN("skipped: " << kind << ": not compiled in");
        return;
    }
    const backend_ptr be(tsr_backend_init_by_name(kind, nullptr), tsr_backend_free);
    if (!be) {
        WARN("skipped: " << kind << ": no usable device: " << tsr_last_error());
        return;
    }
    run_table(be.get(), tsr_backend_name(be.get()));
    check_runs_every_weight_type(be.get());
}

TEST_CASE("backend_ops: Vulkan against the CPU scalar path", "[backend_ops][vulkan]") { run_table_on("Vulkan"); }
TEST_CASE("backend_ops: CUDA against the CPU scalar path", "[backend_ops][cuda]") { run_table_on("CUDA"); }
