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

// out computed on a fresh CPU backend of n_threads on the ISA path isa: its values.
inline std::vector<double> values_on(tsr_cpu_isa isa, int n_threads, tsr_context * ctx, tsr_tensor * out) {
    isa_scope s(isa);
    backend_holder be(n_threads);
    REQUIRE(run(be, ctx, out) == TSR_STATUS_SUCCESS);
    return values(out);
}

// True when out's bytes are its own: not a view, and apart from every source's (an in-place
// result shares its operand's memory).
inline bool owns_its_bytes(const tsr_tensor * out) {
    if (out->view_src || !out->data) return false;
    const char * o = (const char *)out->data;
    for (const tsr_tensor * s : out->src) {
        if (!s || !s->data) continue;
        const char * b = (const char *)s->data;
        if (o < b + tsr_nbytes(s) && b < o + tsr_nbytes(out)) return false;
    }
    return true;
}

// Runs `out` on every ISA path with n_threads and CHECKs its NMSE against ref (NaN and
// infinities must match exactly); before_run (when set) runs before each run, e.g. to
// restore an operand an in-place op overwrites. An output with bytes of its own is filled
// with 0xFF (NaN for floats) before each run, so a path that leaves outputs unwritten cannot
// pass on the values an earlier path wrote.
inline void check_every_isa(tsr_context * ctx, tsr_tensor * out, const std::vector<double> & ref, double max_nmse,
                            const std::string & what, int n_threads = 2, const std::function<void()> & before_run = {}) {
    REQUIRE(out != nullptr);
    const bool poison = owns_its_bytes(out);
    for (tsr_cpu_isa isa : isas()) {
        if (poison) std::memset(out->data, 0xFF, tsr_nbytes(out));
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

// check_every_isa with 2 threads; `restore` (in-place results): its bytes are put back
// before every run and after the last, so later checks see the input again.
inline void check(tsr_context * ctx, tsr_tensor * out, const std::vector<double> & ref, double thr, const std::string & what,
                  tsr_tensor * restore = nullptr) {
    REQUIRE(out != nullptr);
    std::vector<char> saved;
    if (restore) saved.assign((const char *)restore->data, (const char *)restore->data + tsr_nbytes(restore));
    const auto put_back = [&] { if (restore) std::memcpy(restore->data, saved.data(), saved.size()); };
    check_every_isa(ctx, out, ref, thr, what, 2, put_back);
    put_back();
}

// Make dst share src's memory (as gallocr does for in-place ops).
inline void alias(tsr_tensor * dst, tsr_tensor * src) {
    REQUIRE(tsr_op_can_inplace(dst, 0));
    REQUIRE(tsr_nbytes(dst) == tsr_nbytes(src));
    dst->data = src->data;
}

// flash_attn_ext in double precision: q [D, nq, H, B], k [D, nkv, Hk, B], v [Dv, nkv, Hk, B]
// (query head h reads K/V head h / (H / Hk)), mask [nkv, >= nq] or null; the result in the
// op's layout [Dv, H, nq, B]. A row whose keys are all masked is 0.
inline std::vector<double> flash_attn_reference(const tsr_tensor * q, const tsr_tensor * k, const tsr_tensor * v,
                                                const tsr_tensor * m, double scale, double max_bias, double softcap) {
    const int64_t D = q->ne[0], nq = q->ne[1], H = q->ne[2], B = q->ne[3], nkv = k->ne[1], Dv = v->ne[0];
    const double nl2 = std::pow(2, std::floor(std::log2((double)H)));
    std::vector<double> ref((size_t)(Dv * H * nq * B));
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < nq; ++i) {
                double slope = 1;
                if (max_bias > 0) {
                    const double m0 = std::pow(2, -max_bias / nl2), m1 = std::pow(2, -max_bias / 2 / nl2);
                    slope = h < nl2 ? std::pow(m0, h + 1) : std::pow(m1, 2 * (h - nl2) + 1);
                }
                const int64_t hk = h / (H / k->ne[2]);
                std::vector<double> s((size_t)nkv);
                double mx = -INFINITY;
                for (int64_t j = 0; j < nkv; ++j) {
                    double d = 0;
                    for (int64_t e = 0; e < D; ++e) d += at(q, e, i, h, b) * at(k, e, j, hk, b);
                    d *= scale;
                    if (softcap != 0) d = softcap * std::tanh(d / softcap);
                    if (m) d += slope * at(m, j, i);
                    s[(size_t)j] = d;
                    mx = std::max(mx, d);
                }
                double sum = 0;
                for (double & x : s) {
                    x = mx == -INFINITY ? 0.0 : std::exp(x - mx);
                    sum += x;
                }
                for (int64_t e = 0; e < Dv; ++e) {
                    double o = 0;
                    for (int64_t j = 0; j < nkv; ++j) o += s[(size_t)j] * at(v, e, j, hk, b);
                    ref[(size_t)(((b * nq + i) * H + h) * Dv + e)] = sum > 0 ? o / sum : 0.0;
                }
            }
    return ref;
}

} // namespace cput
