#include "vk_util.h"

namespace vkt {

static std::string g_reason;

tsr_backend_t vk() {
    static tsr_backend_t be = [] {
        tsr_backend_t b = tsr_backend_vk_init(-1);
        if (!b) g_reason = tsr_last_error();
        return b;
    }();
    return be;
}

const std::string & vk_reason() { return g_reason; }

tsr_backend_t cpu() {
    static tsr_backend_t be = tsr_backend_cpu_init();
    return be;
}

void fill(const input & in, uint32_t seed) {
    tsr_tensor * t = in.t;
    const size_t nb = tsr_nbytes(t);
    std::vector<uint8_t> bytes(nb);
    if (t->type == TSR_TYPE_I32) {
        REQUIRE(in.ints.size() * 4 == nb);
        memcpy(bytes.data(), in.ints.data(), nb);
    } else {
        const int64_t n = tsr_nelements(t);
        std::vector<float> f(static_cast<size_t>(n));
        if (in.pattern) {
            for (size_t i = 0; i < f.size(); i++) f[i] = pattern_value(i, seed);
        } else {
            std::mt19937 rng(seed);
            std::uniform_real_distribution<float> dist(in.lo, in.hi);
            for (auto & x : f) x = dist(rng);
        }
        if (!in.values.empty()) {
            REQUIRE(in.values.size() == f.size());
            f = in.values;
        }
        REQUIRE(tsr_is_contiguous(t));
        REQUIRE(tsr_from_float_row(t->type, f.data(), bytes.data(), n));
    }
    REQUIRE(tsr_backend_tensor_set(t, bytes.data(), 0, nb));
}

static std::vector<float> read_f32(const tsr_tensor * t) {
    const size_t nb = tsr_nbytes(t);
    std::vector<uint8_t> bytes(nb + 64);
    REQUIRE(tsr_backend_tensor_get(t, bytes.data(), 0, nb));
    if (t->type == TSR_TYPE_F32 && tsr_is_contiguous(t)) {
        std::vector<float> out(static_cast<size_t>(tsr_nelements(t)));
        REQUIRE(tsr_backend_tensor_get(t, out.data(), 0, out.size() * 4));
        return out;
    }
    tsr_tensor h = *t;   // a host copy with the same strides
    h.data = bytes.data();
    h.buffer = nullptr;
    h.view_src = nullptr;
    std::vector<float> out;
    out.reserve(static_cast<size_t>(tsr_nelements(t)));
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) out.push_back(tsr_get_f32_nd(&h, i0, i1, i2, i3));
    return out;
}

result run(tsr_backend_t be, const builder & b, uint32_t seed, int n_tensors) {
    result r;
    tsr_init_params ip{static_cast<size_t>(n_tensors) * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true};
    tsr_context * ctx = tsr_init(ip);
    REQUIRE(ctx);
    graph_def def;
    tsr_tensor * out = b(ctx, def);
    REQUIRE(out);
    tsr_cgraph * g = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(g, out));
    tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors(ctx, be);
    if (!buf) { r.error = tsr_last_error(); tsr_free(ctx); return r; }
    for (size_t i = 0; i < def.inputs.size(); i++) fill(def.inputs[i], seed + static_cast<uint32_t>(i) * 7919u);
    enum tsr_status st = tsr_backend_graph_compute(be, g);
    if (st != TSR_STATUS_SUCCESS) {
        r.error = tsr_last_error();
    } else {
        r.ok = true;
        r.out = read_f32(out);
        if (tsr_backend_is_vk(be)) r.stats = tsr_backend_vk_get_graph_stats(be);
    }
    tsr_backend_buffer_free(buf);
    tsr_free(ctx);
    return r;
}

double nmse(const std::vector<float> & out, const std::vector<float> & ref) {
    REQUIRE(out.size() == ref.size());
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < out.size(); i++) {
        const bool a_inf = std::isinf(out[i]), b_inf = std::isinf(ref[i]);
        if (a_inf || b_inf) {  // -inf from masks must match exactly
            if (out[i] != ref[i]) return INFINITY;
            continue;
        }
        double d = static_cast<double>(out[i]) - ref[i];
        num += d * d;
        den += static_cast<double>(ref[i]) * ref[i];
    }
    if (std::isnan(num)) return INFINITY;
    return den > 0.0 ? num / den : num;
}

void compare(const builder & b, double max_nmse, const char * what, uint32_t seed) {
    INFO(what);
    result rv = run(vk(), b, seed);
    INFO("vulkan: " << rv.error);
    REQUIRE(rv.ok);
    result rc = run(cpu(), b, seed);
    INFO("cpu: " << rc.error);
    REQUIRE(rc.ok);
    double e = nmse(rv.out, rc.out);
    INFO("nmse " << e << " (max " << max_nmse << ") over " << rv.out.size() << " values");
    CHECK(e <= max_nmse);
}

} // namespace vkt
