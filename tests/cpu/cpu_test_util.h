// Helpers for the CPU backend tests: the shared ones (tests/support: random tensors,
// reading results as doubles, NMSE, ISA paths, CPU backends with a thread count), plus a
// host context and running one output on a backend.
#pragma once
#include "backend_support.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace cput {

using namespace tsrt;

struct ctx_holder {
    tsr_context * ctx;
    explicit ctx_holder(size_t mb) : ctx(tsr_init(tsr_init_params{mb << 20, nullptr, false})) {}
    ~ctx_holder() { tsr_free(ctx); }
    operator tsr_context *() const { return ctx; }
};

inline tsr_status run(tsr_backend_t be, tsr_context * ctx, tsr_tensor * out) {
    tsr_cgraph * gf = tsr_new_graph(ctx);
    REQUIRE(gf != nullptr);
    REQUIRE(tsr_build_forward_expand(gf, out));
    return tsr_backend_graph_compute(be, gf);
}

// Runs `out` on every ISA path with n_threads and CHECKs its NMSE against ref; before_run
// (when set) runs before each run, e.g. to restore an operand an in-place op overwrites.
inline void check_every_isa(tsr_context * ctx, tsr_tensor * out, const std::vector<double> & ref, double max_nmse,
                            const std::string & what, int n_threads = 2, const std::function<void()> & before_run = {}) {
    REQUIRE(out != nullptr);
    for (tsr_cpu_isa isa : isas()) {
        if (before_run) before_run();
        isa_scope s(isa);
        backend_holder be(n_threads);
        INFO(what << " isa " << tsr_cpu_isa_name(isa));
        REQUIRE(run(be, ctx, out) == TSR_STATUS_SUCCESS);
        const double e = nmse(values(out), ref);
        INFO("nmse " << e);
        CHECK(e <= max_nmse);
    }
}

} // namespace cput
