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

} // namespace cput
