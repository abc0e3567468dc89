// Helpers for the CPU backend tests: random tensors, reading results as doubles,
// running a graph on a CPU backend with a chosen ISA and thread count, NMSE.
#pragma once
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace cput {

struct ctx_holder {
    tsr_context * ctx;
    explicit ctx_holder(size_t mb) : ctx(tsr_init(tsr_init_params{mb << 20, nullptr, false})) {}
    ~ctx_holder() { tsr_free(ctx); }
    operator tsr_context *() const { return ctx; }
};

/* Fill a tensor (any type, any layout) with uniform values in [lo, hi). Quantized
 * tensors must be contiguous. */
inline void fill(tsr_tensor * t, std::mt19937 & rng, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    if (tsr_is_quantized(t->type)) {
        const int64_t n = tsr_nelements(t);
        std::vector<float> v((size_t)n);
        for (auto & x : v) x = u(rng);
        tsr_quantize_chunk(t->type, v.data(), t->data, 0, n / t->ne[0], t->ne[0], nullptr);
        return;
    }
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) tsr_set_f32_nd(t, i0, i1, i2, i3, u(rng));
}

inline void fill_i32(tsr_tensor * t, std::mt19937 & rng, int lo, int hi) {
    std::uniform_int_distribution<int> u(lo, hi);
    for (int64_t i = 0; i < tsr_nelements(t); ++i) tsr_set_f32_1d(t, i, (float)u(rng));
}

/* Values in logical order (i0 fastest). */
inline std::vector<double> values(const tsr_tensor * t) {
    std::vector<double> v;
    v.reserve((size_t)tsr_nelements(t));
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) v.push_back(tsr_get_f32_nd(t, i0, i1, i2, i3));
    return v;
}

inline double at(const tsr_tensor * t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
    return tsr_get_f32_nd(t, i0, i1, i2, i3);
}

inline double nmse(const std::vector<double> & got, const std::vector<double> & ref) {
    REQUIRE(got.size() == ref.size());
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::isinf(ref[i]) && got[i] == ref[i]) continue;
        const double d = got[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (den == 0) return num;
    return num / den;
}

inline std::vector<tsr_cpu_isa> isas() {
    std::vector<tsr_cpu_isa> v;
    for (tsr_cpu_isa i : {TSR_CPU_ISA_SCALAR, TSR_CPU_ISA_AVX2, TSR_CPU_ISA_AVX512, TSR_CPU_ISA_NEON})
        if (tsr_cpu_isa_supported(i)) v.push_back(i);
    return v;
}

/* Restores the ISA in use on scope exit. */
struct isa_scope {
    tsr_cpu_isa saved = tsr_cpu_get_isa();
    explicit isa_scope(tsr_cpu_isa isa) { REQUIRE(tsr_cpu_set_isa(isa)); }
    ~isa_scope() { tsr_cpu_set_isa(saved); }
};

/* Sets an environment variable for the scope (the backend reads some at init). */
struct env_scope {
    std::string name;
    explicit env_scope(const char * n, const char * value) : name(n) {
#if defined(_WIN32)
        _putenv_s(n, value);
#else
        setenv(n, value, 1);
#endif
    }
    ~env_scope() {
#if defined(_WIN32)
        _putenv_s(name.c_str(), "");
#else
        unsetenv(name.c_str());
#endif
    }
};

/* A CPU backend with n_threads. small_node: the TSR_CPU_SMALL_NODE it is created with;
 * "0" (the default here) splits every node over all threads, so tiny test shapes still
 * exercise the multi-thread paths; nullptr keeps the library default. */
struct backend_holder {
    tsr_backend_t be;
    explicit backend_holder(int n_threads, const char * small_node = "0") : be(nullptr) {
        if (small_node) {
            env_scope e("TSR_CPU_SMALL_NODE", small_node);
            be = tsr_backend_cpu_init();
        } else {
            be = tsr_backend_cpu_init();
        }
        REQUIRE(be != nullptr);
        tsr_backend_cpu_set_n_threads(be, n_threads);
    }
    ~backend_holder() { tsr_backend_free(be); }
    operator tsr_backend_t() const { return be; }
};

inline tsr_status run(tsr_backend_t be, tsr_context * ctx, tsr_tensor * out) {
    tsr_cgraph * gf = tsr_new_graph(ctx);
    REQUIRE(gf != nullptr);
    REQUIRE(tsr_build_forward_expand(gf, out));
    return tsr_backend_graph_compute(be, gf);
}

inline bool isa_warned(tsr_cpu_isa isa) {
    static bool warned = false;
    if (!warned && !tsr_cpu_isa_supported(isa)) { warned = true; return true; }
    return false;
}

} // namespace cput
