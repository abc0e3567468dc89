// Helpers shared by the core tests (the ones every test directory shares are in
// tests/support/test_support.h).
#pragma once
#include <catch2/catch.hpp>

#include "tessera/tessera.h"
#include "test_support.h"

#include <cstring>
#include <string>

// Runs `make` (which must build one op) and checks it fails cleanly: NULL result, a
// non-empty message, and no arena memory consumed.
template <typename F>
static void expect_op_fails(tsr_context * ctx, F make, const char * must_contain = nullptr) {
    tsr_clear_error();
    const size_t used = tsr_used_mem(ctx);
    tsr_tensor * r = make();
    CHECK(r == nullptr);
    CHECK(std::strlen(tsr_last_error()) > 0);
    if (must_contain) {
        CHECK_THAT(std::string(tsr_last_error()), Catch::Matchers::Contains(must_contain));
    }
    CHECK(tsr_used_mem(ctx) == used);
}

static inline bool same_shape(const tsr_tensor * t, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1) {
    return t && t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == ne2 && t->ne[3] == ne3;
}
