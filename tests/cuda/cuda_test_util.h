// Helpers shared by the CUDA tests: backends (CUDA skips cleanly without a device), and a
// harness that builds the same graph twice, runs it on the CPU backend (the reference)
// and on CUDA, and compares the outputs by normalized mean squared error.
#pragma once

#include <catch2/catch.hpp>

#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"
#include "tessera-cuda.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace cudatest {

// One CUDA backend for the whole test run (NULL without a device; the reason is kept).
inline tsr_backend_t cuda() {
    static std::string why;
    static tsr_backend_t be = [] {
        tsr_backend_t b = tsr_backend_cuda_get_device_count() > 0 ? tsr_backend_cuda_init(0) : nullptr;
        if (!b) why = tsr_backend_cuda_get_device_count() > 0 ? tsr_last_error() : "no CUDA device (driver or GPU absent)";
        return b;
    }();
    // deliberately not freed at exit: the CUDA runtime may already be unloading then
    if (!be) tsr_set_error("%s", why.c_str());
    return be;
}

inline tsr_backend_t cpu() {
    static tsr_backend_t be = tsr_backend_cpu_init();
    static struct freer { ~freer() { tsr_backend_free(be); } } f;
    (void) f;
    return be;
}

#define CUDA_OR_SKIP(be)                                                             \
    tsr_backend_t be = cudatest::cuda();                                             \
    if (!be) {                                                                       \
        WARN("skipped: no CUDA device: " << tsr_last_error());                       \
        return;                                                                      \
    }

// Fill a tensor already placed in a buffer: I32 from `ints` (cycled), otherwise uniform
// values in [lo, hi) from a seeded generator, converted to the tensor's type.
inline void fill(tsr_tensor * t, uint32_t seed, float lo = -1.0f, float hi = 1.0f, const std::vector<int32_t> * ints = nullptr) {
    const int64_t n = tsr_nelements(t);
    std::vector<uint8_t> bytes(tsr_nbytes(t));
    if (t->type == TSR_TYPE_I32) {
        int32_t * p = (int32_t *) bytes.data();
        for (int64_t i = 0; i < n; ++i) p[i] = ints && !ints->empty() ? (*ints)[(size_t) i % ints->size()] : (int32_t) i;
    } else {
        std::mt19937 rng(seed);
        std::uniform_real_distribution<float> u(lo, hi);
        std::vector<float> f((size_t) n);
        for (auto & v : f) v = u(rng);
        REQUIRE(tsr_from_float_row(t->type, f.data(), bytes.data(), n));
    }
    REQUIRE(tsr_is_contiguous(t));
    REQUIRE(tsr_backend_tensor_set(t, bytes.data(), 0, bytes.size()));
}

// Read any F32/F16/BF16/I32 tensor (contiguous or a view) as floats in logical order.
inline std::vector<float> read(const tsr_tensor * t) {
    std::vector<uint8_t> bytes(tsr_nbytes(t));
    REQUIRE(tsr_backend_tensor_get(t, bytes.data(), 0, bytes.size()));
    std::vector<float> out;
    out.reserve((size_t) tsr_nelements(t));
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
                    const uint8_t * p = bytes.data() + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                    float v;
                    if (t->type == TSR_TYPE_F32) memcpy(&v, p, 4);
                    else if (t->type == TSR_TYPE_F16) { tsr_fp16_t h; memcpy(&h, p, 2); v = tsr_fp16_to_fp32(h); }
                    else if (t->type == TSR_TYPE_BF16) { tsr_bf16_t h; memcpy(&h, p, 2); v = tsr_bf16_to_fp32(h); }
                    else { int32_t x; memcpy(&x, p, 4); v = (float) x; }
                    out.push_back(v);
                }
    return out;
}

// sum (a-b)^2 / sum b^2 (0 when both are zero); NaN/inf mismatches count as infinite error.
inline double nmse(const std::vector<float> & a, const std::vector<float> & ref) {
    if (a.size() != ref.size()) return INFINITY;
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::isinf(ref[i]) || std::isinf(a[i])) { if (a[i] != ref[i]) return INFINITY; continue; }
        if (std::isnan(ref[i]) != std::isnan(a[i])) return INFINITY;
        if (std::isnan(ref[i])) continue;
        const double d = (double) a[i] - (double) ref[i];
        num += d * d;
        den += (double) ref[i] * ref[i];
    }
    if (den == 0) return num == 0 ? 0 : INFINITY;
    return num / den;
}

// A graph builder: makes its input leafs (named, in order) and returns the output.
struct case_inputs {
    std::vector<tsr_tensor *> leafs;
    std::vector<std::vector<int32_t>> ints;  // per leaf: I32 contents (empty: 0..n-1)
    std::vector<std::pair<float, float>> ranges;
    tsr_tensor * add(tsr_tensor * t, float lo = -1.0f, float hi = 1.0f, std::vector<int32_t> iv = {}) {
        leafs.push_back(t);
        ranges.emplace_back(lo, hi);
        ints.push_back(std::move(iv));
        return t;
    }
};
using build_fn = std::function<tsr_tensor *(tsr_context *, case_inputs &)>;

struct run_out {
    std::vector<float> values;
    enum tsr_status status = TSR_STATUS_FAILED;
    bool supported = true;
    std::string error;
};

// Build with `build` in a fresh no_alloc context, place every tensor in one buffer of the
// backend, fill the leafs (same seeds on every backend), compute, read the output.
inline run_out run_on(tsr_backend_t be, const build_fn & build) {
    run_out r;
    const size_t mem = 256 * tsr_tensor_overhead() + tsr_graph_overhead();
    tsr_context * ctx = tsr_init({mem, nullptr, true});
    REQUIRE(ctx);
    case_inputs in;
    tsr_tensor * out = build(ctx, in);
    REQUIRE(out);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    REQUIRE(gf);
    REQUIRE(tsr_build_forward_expand(gf, out));
    for (int i = 0; i < tsr_graph_n_nodes(gf); ++i) {
        if (!tsr_backend_supports_op(be, tsr_graph_node(gf, i))) { r.supported = false; r.error = tsr_op_desc(tsr_graph_node(gf, i)); }
    }
    if (!r.supported) { tsr_free(ctx); return r; }
    tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors(ctx, be);
    REQUIRE(buf);
    for (size_t i = 0; i < in.leafs.size(); ++i)
        fill(in.leafs[i], 1234u + 77u * (uint32_t) i, in.ranges[i].first, in.ranges[i].second, &in.ints[i]);
    r.status = tsr_backend_graph_compute(be, gf);
    if (r.status == TSR_STATUS_SUCCESS) r.values = read(out);
    else r.error = tsr_last_error();
    tsr_backend_buffer_free(buf);
    tsr_free(ctx);
    return r;
}

// Run on CPU and CUDA; check both succeed and the NMSE is within `tol`. Uses CHECK (not
// REQUIRE) so one failing case does not hide the others of a test.
inline void check_vs_cpu(tsr_backend_t gpu, const char * what, const build_fn & build, double tol) {
    INFO(what);
    run_out ref = run_on(cpu(), build);
    INFO("cpu: " << ref.error);
    if (!ref.supported) {   // no reference to compare with: say so, do not pass silently
        WARN("skipped: the CPU backend does not support " << ref.error << " (" << what << ")");
        return;
    }
    CHECK(ref.status == TSR_STATUS_SUCCESS);
    if (!ref.supported || ref.status != TSR_STATUS_SUCCESS) return;
    run_out got = run_on(gpu, build);
    INFO("cuda: " << got.error);
    CHECK(got.supported);
    CHECK(got.status == TSR_STATUS_SUCCESS);
    if (!got.supported || got.status != TSR_STATUS_SUCCESS) return;
    const double e = nmse(got.values, ref.values);
    INFO("nmse " << e << " (tolerance " << tol << "), " << ref.values.size() << " values");
    CHECK(e <= tol);
}

} // namespace cudatest
