#include "backend_support.h"

#include <cmath>
#include <cstdlib>

namespace tsrt {

// ---- tensors in any backend buffer ----------------------------------------------------------

void upload(tsr_tensor * t, const std::vector<float> & values) {
    REQUIRE(values.size() == static_cast<size_t>(tsr_nelements(t)));
    std::vector<uint8_t> bytes(tsr_nbytes(t));
    // a view with gaps: keep what lies between its elements
    if (!tsr_is_contiguous(t)) REQUIRE(tsr_backend_tensor_get(t, bytes.data(), 0, bytes.size()));
    encode(t, values.data(), bytes.data());
    REQUIRE(tsr_backend_tensor_set(t, bytes.data(), 0, bytes.size()));
}

std::vector<float> download(const tsr_tensor * t) {
    std::vector<uint8_t> bytes(tsr_nbytes(t));
    REQUIRE(tsr_backend_tensor_get(t, bytes.data(), 0, bytes.size()));
    std::vector<float> out(static_cast<size_t>(tsr_nelements(t)));
    decode(t, bytes.data(), out.data());
    return out;
}

void fill_random(tsr_tensor * t, uint32_t seed, float lo, float hi) {
    std::mt19937 rng(seed);
    upload(t, uniform(static_cast<size_t>(tsr_nelements(t)), rng, lo, hi));
}

// ---- graphs ---------------------------------------------------------------------------------

std::string node_signature(const tsr_tensor * node) {
    std::string s = std::string(tsr_op_desc(node)) + "(";
    const char * sep = "";
    for (const tsr_tensor * src : node->src) {
        if (!src) continue;
        s += sep;
        s += tsr_type_name(src->type);
        sep = ", ";
    }
    return s + ") -> " + tsr_type_name(node->type);
}

tsr_tensor * graph_inputs::add(tsr_tensor * t, float lo, float hi) {
    graph_input in;
    in.t = t;
    in.lo = lo;
    in.hi = hi;
    list.push_back(in);
    return t;
}

tsr_tensor * graph_inputs::add_values(tsr_tensor * t, std::vector<float> v) {
    add(t);
    list.back().values = std::move(v);
    return t;
}

tsr_tensor * graph_inputs::add_pattern(tsr_tensor * t) {
    add(t);
    list.back().pattern = true;
    return t;
}

tsr_tensor * graph_inputs::add_with_specials(tsr_tensor * t, float lo, float hi, std::vector<std::pair<size_t, float>> specials) {
    add(t, lo, hi);
    list.back().specials = std::move(specials);
    return t;
}

tsr_tensor * graph_inputs::add_i32(tsr_tensor * t, std::vector<int32_t> v) {
    add(t);
    list.back().ints = std::move(v);
    return t;
}

void fill_input(const graph_input & in, uint32_t seed) {
    tsr_tensor * t = in.t;
    const size_t n = static_cast<size_t>(tsr_nelements(t));
    if (t->type == TSR_TYPE_I32) {
        std::vector<float> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(in.ints.empty() ? static_cast<int32_t>(i) : in.ints[i % in.ints.size()]);
        upload(t, v);
    } else if (!in.values.empty()) {
        upload(t, in.values);
    } else if (in.pattern) {
        std::vector<float> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = pattern_value(i, seed);
        upload(t, v);
    } else if (!in.specials.empty()) {
        std::mt19937 rng(seed);
        std::vector<float> v = uniform(n, rng, in.lo, in.hi);
        for (const auto & s : in.specials) {
            REQUIRE(s.first < n);
            v[s.first] = s.second;
        }
        upload(t, v);
    } else {
        fill_random(t, seed, in.lo, in.hi);
    }
}

run_result run_graph(tsr_backend_t be, const graph_builder & b, uint32_t seed, int n_tensors) {
    run_result r;
    REQUIRE(be != nullptr);
    tsr_init_params ip{static_cast<size_t>(n_tensors) * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true};
    tsr_context * ctx = tsr_init(ip);
    REQUIRE(ctx);
    graph_inputs inputs;
    tsr_tensor * out = b(ctx, inputs);
    INFO("building the graph: " << tsr_last_error());
    REQUIRE(out);
    tsr_cgraph * g = tsr_new_graph(ctx);
    REQUIRE(g);
    REQUIRE(tsr_build_forward_expand(g, out));
    for (int i = 0; i < tsr_graph_n_nodes(g) && r.supported; ++i) {
        const tsr_tensor * node = tsr_graph_node(g, i);
        if (!tsr_backend_supports_op(be, node)) {
            r.supported = false;
            r.error = std::string(tsr_backend_name(be)) + " does not support " + node_signature(node);
        }
    }
    tsr_backend_buffer_t buf = r.supported ? tsr_backend_alloc_ctx_tensors(ctx, be) : nullptr;
    if (r.supported && !buf) r.error = tsr_last_error();
    if (buf) {
        for (size_t i = 0; i < inputs.list.size(); ++i) fill_input(inputs.list[i], seed + static_cast<uint32_t>(i) * 7919u);
        if (tsr_backend_graph_compute(be, g) == TSR_STATUS_SUCCESS) {
            r.ok = true;
            r.out = download(out);
        } else {
            r.error = tsr_last_error();
        }
        tsr_backend_buffer_free(buf);
    }
    tsr_free(ctx);
    return r;
}

double check_close(const run_result & got, const run_result & ref, double max_nmse) {
    INFO("reference: " << ref.error);
    CHECK(ref.ok);
    INFO("tested: " << got.error);
    CHECK(got.ok);
    if (!got.ok || !ref.ok) return INFINITY;
    const double e = nmse(got.out, ref.out);
    INFO("nmse " << e << " (max " << max_nmse << ") over " << ref.out.size() << " values");
    CHECK(e <= max_nmse);
    return e;
}

double compare_backends(tsr_backend_t be, tsr_backend_t ref_be, const graph_builder & b, double max_nmse, uint32_t seed) {
    const run_result got = run_graph(be, b, seed);
    const run_result ref = run_graph(ref_be, b, seed);
    return check_close(got, ref, max_nmse);
}

// ---- the CPU backend ------------------------------------------------------------------------

tsr_backend_t cpu() {
    static tsr_backend_t be = tsr_backend_cpu_init();
    static struct freer { ~freer() { tsr_backend_free(be); } } f;
    (void)f;
    return be;
}

std::vector<tsr_cpu_isa> isas() {
    std::vector<tsr_cpu_isa> v;
    for (tsr_cpu_isa i : {TSR_CPU_ISA_SCALAR, TSR_CPU_ISA_AVX2, TSR_CPU_ISA_AVX512, TSR_CPU_ISA_AMX, TSR_CPU_ISA_NEON})
        if (tsr_cpu_isa_supported(i)) v.push_back(i);
    return v;
}

isa_scope::isa_scope(tsr_cpu_isa isa) : saved(tsr_cpu_get_isa()) { REQUIRE(tsr_cpu_set_isa(isa)); }
isa_scope::~isa_scope() { tsr_cpu_set_isa(saved); }

env_scope::env_scope(const char * n, const char * value) : name(n) {
#if defined(_WIN32)
    _putenv_s(n, value);
#else
    setenv(n, value, 1);
#endif
}

env_scope::~env_scope() {
#if defined(_WIN32)
    _putenv_s(name.c_str(), "");
#else
    unsetenv(name.c_str());
#endif
}

backend_holder::backend_holder(int n_threads, const char * small_node) {
    if (small_node) {
        env_scope e("TSR_CPU_SMALL_NODE", small_node);
        be = tsr_backend_cpu_init();
    } else {
        be = tsr_backend_cpu_init();
    }
    REQUIRE(be != nullptr);
    tsr_backend_cpu_set_n_threads(be, n_threads);
}

backend_holder::~backend_holder() { tsr_backend_free(be); }

// ---- masked_backend -------------------------------------------------------------------------

static masked_backend & masked(tsr_backend_t b) { return *static_cast<masked_backend *>(b->context); }

masked_backend::masked_backend(tsr_backend_t inner_be, std::string n, predicate d, const tsr_host_allocator * alloc)
    : inner(inner_be), name(std::move(n)), declines(std::move(d)) {
    own_buft = tsr_backend_cpu_buffer_type_with_allocator(alloc ? alloc : tsr_get_host_allocator());
    REQUIRE(own_buft != nullptr);
    be.context = this;
    be.iface.get_name = [](tsr_backend_t b) { return masked(b).name.c_str(); };
    be.iface.free = [](tsr_backend_t) {};  // owned by this object
    be.iface.get_default_buffer_type = [](tsr_backend_t b) { return masked(b).own_buft; };
    be.iface.synchronize = [](tsr_backend_t b) { tsr_backend_synchronize(masked(b).inner); };
    be.iface.graph_reserve = [](tsr_backend_t b, tsr_cgraph * g) { return tsr_backend_graph_reserve(masked(b).inner, g); };
    be.iface.graph_compute = [](tsr_backend_t b, tsr_cgraph * g) {
        masked(b).n_computes++;
        return tsr_backend_graph_compute(masked(b).inner, g);
    };
    be.iface.supports_op = [](tsr_backend_t b, const tsr_tensor * op) {
        return tsr_backend_supports_op(masked(b).inner, op) && !(masked(b).declines && masked(b).declines(op));
    };
    be.iface.supports_buft = [](tsr_backend_t b, tsr_backend_buffer_type_t bt) { return bt == masked(b).own_buft; };
    be.iface.get_workspace_size = [](tsr_backend_t b) { return tsr_backend_get_workspace_size(masked(b).inner); };
}

void masked_backend::as_device_memory() { own_buft->iface.is_host = [](tsr_backend_buffer_type_t) { return false; }; }

masked_backend::~masked_backend() { tsr_backend_cpu_buffer_type_free(own_buft); }

} // namespace tsrt
