// The CPU backend object: interface, ISA control, threads (1 vs N bitwise), abort
// callback between nodes, workspace reuse with zero allocations in steady state.
#include "cpu_test_util.h"

#include <atomic>

using namespace cput;

namespace {

// A small transformer-ish block: every node is row-parallel (no cross-thread reduction).
tsr_tensor * build_block(tsr_context * ctx, std::mt19937 & rng, tsr_tensor ** x_out) {
    const int64_t D = 64, T = 9, F = 96;
    tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, D, T);
    tsr_tensor * w1 = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, D, F);
    tsr_tensor * w2 = tsr_new_tensor_2d(ctx, TSR_TYPE_Q8_0, F, D);
    tsr_tensor * g = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, D);
    for (tsr_tensor * t : {x, w1, w2, g}) fill(t, rng);
    tsr_tensor * h = tsr_mul(ctx, tsr_rms_norm(ctx, x, 1e-5f), g);
    tsr_tensor * u = tsr_gelu(ctx, tsr_mul_mat(ctx, w1, h));
    tsr_tensor * kq = tsr_soft_max_ext(ctx, tsr_mul_mat(ctx, h, h), nullptr, 0.125f, 0.0f);
    tsr_tensor * y = tsr_add(ctx, tsr_mul_mat(ctx, w2, u), x);
    tsr_tensor * out = tsr_concat(ctx, y, tsr_sum_rows(ctx, kq), 0);
    *x_out = x;
    return out;
}

bool abort_after_3(void * data) {
    return ++*(std::atomic<int> *)data >= 3;
}

} // namespace

TEST_CASE("cpu backend: interface and ISA control", "[cpu][backend]") {
    backend_holder be(2);
    CHECK(std::string(tsr_backend_name(be)) == "CPU");
    CHECK(tsr_backend_is_cpu(be));
    CHECK(tsr_backend_cpu_get_n_threads(be) == 2);
    CHECK(tsr_backend_get_default_buffer_type(be) == tsr_backend_cpu_buffer_type());
    CHECK(tsr_backend_supports_buft(be, tsr_backend_cpu_buffer_type()));
    CHECK(tsr_cpu_isa_supported(TSR_CPU_ISA_SCALAR));
    CHECK(tsr_cpu_isa_supported(tsr_cpu_isa_best()));
    CHECK(std::string(tsr_cpu_isa_name(TSR_CPU_ISA_AMX)) == "amx");
    // the AMX path is the AVX-512 path plus tiles: never without it
    if (tsr_cpu_isa_supported(TSR_CPU_ISA_AMX)) CHECK(tsr_cpu_isa_supported(TSR_CPU_ISA_AVX512));
    for (tsr_cpu_isa isa : {TSR_CPU_ISA_AVX2, TSR_CPU_ISA_AVX512, TSR_CPU_ISA_AMX, TSR_CPU_ISA_NEON}) {
        if (!tsr_cpu_isa_supported(isa)) {
            WARN("skipped: ISA " << tsr_cpu_isa_name(isa) << " not supported here");
            tsr_cpu_isa before = tsr_cpu_get_isa();
            CHECK_FALSE(tsr_cpu_set_isa(isa));
            CHECK(tsr_cpu_get_isa() == before);
        }
    }
    ctx_holder ctx(1);
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 8, 2);
    tsr_tensor * q = tsr_new_tensor_2d(ctx, TSR_TYPE_Q4_0, 32, 2);
    CHECK(tsr_backend_supports_op(be, tsr_mul_mat(ctx, q, tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 32, 3))));
    CHECK(tsr_backend_supports_op(be, tsr_soft_max(ctx, a)));
    CHECK(tsr_backend_supports_op(be, tsr_add(ctx, q, tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 32, 2))));
    CHECK_FALSE(tsr_backend_supports_op(be, tsr_sub(ctx, a, tsr_new_tensor_2d(ctx, TSR_TYPE_I32, 8, 2))));
}

TEST_CASE("cpu backend: mat-vec prefetch distances are per type, bounded, and change no result", "[cpu][backend]") {
    const tsr_type file_types[] = {TSR_TYPE_F16, TSR_TYPE_BF16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0,
                                   TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL, TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K};
    size_t ahead = 0, q6k = 0;
    for (tsr_type t : file_types) {
        CHECK(tsr_cpu_get_matvec_prefetch(t, false, &ahead));
        CHECK(ahead > 0);
    }
    for (tsr_type t : {TSR_TYPE_Q4_0, TSR_TYPE_IQ4_NL, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q3_K, TSR_TYPE_Q2_K})
        CHECK(tsr_cpu_get_matvec_prefetch(t, true, &ahead));
    /* no setting: F32 streams without, Q8_0 has no CPU_REPACK layout */
    CHECK_FALSE(tsr_cpu_get_matvec_prefetch(TSR_TYPE_F32, false, &ahead));
    CHECK_FALSE(tsr_cpu_set_matvec_prefetch(TSR_TYPE_Q8_0, true, 1024));
    /* Q2_K / Q3_K: the repacked setting is the file's where the word layouts are in use (a
     * CPU_REPACK buffer's tsr_backend_cpu_repacks says which: they repack any shape), else
     * the records' own */
    for (tsr_type t : {TSR_TYPE_Q2_K, TSR_TYPE_Q3_K}) {
        size_t file = 0, rep = 0, back = 0;
        REQUIRE(tsr_cpu_get_matvec_prefetch(t, false, &file));
        REQUIRE(tsr_cpu_get_matvec_prefetch(t, true, &rep));
        REQUIRE(tsr_cpu_set_matvec_prefetch(t, false, file + 64));
        REQUIRE(tsr_cpu_get_matvec_prefetch(t, true, &back));
        tsr_context * meta = tsr_init(tsr_init_params{tsr_tensor_overhead(), nullptr, true});
        REQUIRE(meta);
        /* 3 rows: no record holds them, so only the word layout repacks them */
        const bool words = tsr_backend_cpu_repacks(tsr_new_tensor_2d(meta, t, 256, 3));
        tsr_free(meta);
        CHECK(back == (words ? file + 64 : rep));
        REQUIRE(tsr_cpu_set_matvec_prefetch(t, false, file));
    }
    REQUIRE(tsr_cpu_get_matvec_prefetch(TSR_TYPE_Q6_K, false, &q6k));
    CHECK_FALSE(tsr_cpu_set_matvec_prefetch(TSR_TYPE_Q6_K, false, ((size_t)1 << 20) + 1));
    REQUIRE(tsr_cpu_get_matvec_prefetch(TSR_TYPE_Q6_K, false, &ahead));
    CHECK(ahead == q6k);
    CHECK(tsr_cpu_set_matvec_prefetch(TSR_TYPE_Q6_K, true, 1024) == false);
    /* the same Q6_K mat-vec with no prefetch in effect, the default and 1 MiB past its rows
     * (prefetches never fault): the same bits; each setting reads back */
    backend_holder be(2);
    ctx_holder ctx(4);
    std::mt19937 rng(12);
    tsr_tensor * w = tsr_new_tensor_2d(ctx, TSR_TYPE_Q6_K, 512, 12);
    tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 512, 1);
    fill(w, rng);
    fill(x, rng);
    tsr_tensor * y = tsr_mul_mat(ctx, w, x);
    std::vector<std::vector<float>> got;
    for (size_t a : {q6k, (size_t)0, (size_t)1 << 20}) {
        REQUIRE(tsr_cpu_set_matvec_prefetch(TSR_TYPE_Q6_K, false, a));
        REQUIRE(tsr_cpu_get_matvec_prefetch(TSR_TYPE_Q6_K, false, &ahead));
        CHECK(ahead == a);
        REQUIRE(run(be, ctx, y) == TSR_STATUS_SUCCESS);
        got.emplace_back((const float *)y->data, (const float *)y->data + 12);
    }
    REQUIRE(tsr_cpu_set_matvec_prefetch(TSR_TYPE_Q6_K, false, q6k));
    CHECK(got[1] == got[0]);
    CHECK(got[2] == got[0]);
}

TEST_CASE("cpu backend: 1 and N threads give bitwise equal results", "[cpu][threads]") {
    for (tsr_cpu_isa isa : isas()) {
        isa_scope s(isa);
        ctx_holder ctx(16);
        std::mt19937 rng(1);
        tsr_tensor * x;
        tsr_tensor * out = build_block(ctx, rng, &x);
        std::vector<double> r1;
        {
            backend_holder be(1);
            REQUIRE(run(be, ctx, out) == TSR_STATUS_SUCCESS);
            r1 = values(out);
        }
        for (int n : {2, 3, 5}) {
            backend_holder be(n);
            for (int rep = 0; rep < 3; ++rep) {
                REQUIRE(run(be, ctx, out) == TSR_STATUS_SUCCESS);
                INFO("isa " << tsr_cpu_isa_name(isa) << " threads " << n);
                CHECK(values(out) == r1);
            }
        }
    }
}

TEST_CASE("cpu backend: the pool survives many graphs and thread-count changes", "[cpu][threads]") {
    ctx_holder ctx(16);
    std::mt19937 rng(2);
    tsr_tensor * x;
    tsr_tensor * out = build_block(ctx, rng, &x);
    backend_holder be(2);
    REQUIRE(run(be, ctx, out) == TSR_STATUS_SUCCESS);
    const std::vector<double> ref = values(out);
    for (int i = 0; i < 50; ++i) {
        tsr_backend_cpu_set_n_threads(be, 1 + i % 4);
        REQUIRE(run(be, ctx, out) == TSR_STATUS_SUCCESS);
    }
    CHECK(values(out) == ref);
}

TEST_CASE("cpu backend: abort callback stops between nodes", "[cpu][threads][abort]") {
    ctx_holder ctx(4);
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 16);
    for (int i = 0; i < 16; ++i) tsr_set_f32_1d(x, i, 1.0f);
    // a chain of 10 nodes: y_k = y_{k-1} * 2
    std::vector<tsr_tensor *> chain;
    tsr_tensor * y = x;
    for (int k = 0; k < 10; ++k) {
        y = tsr_scale(ctx, y, 2.0f);
        chain.push_back(y);
    }
    for (tsr_tensor * t : chain)
        for (int i = 0; i < 16; ++i) tsr_set_f32_1d(t, i, -1.0f);
    for (int n_threads : {1, 2}) {
        backend_holder be(n_threads);
        std::atomic<int> calls{0};
        tsr_backend_cpu_set_abort_callback(be, abort_after_3, &calls);
        for (tsr_tensor * t : chain)
            for (int i = 0; i < 16; ++i) tsr_set_f32_1d(t, i, -1.0f);
        CHECK(run(be, ctx, y) == TSR_STATUS_ABORTED);
        CHECK(calls.load() == 3);
        // nodes 0..2 ran, node 3 and later did not
        CHECK(tsr_get_f32_1d(chain[0], 0) == 2.0f);
        CHECK(tsr_get_f32_1d(chain[2], 0) == 8.0f);
        CHECK(tsr_get_f32_1d(chain[3], 0) == -1.0f);
        CHECK(tsr_get_f32_1d(chain[9], 0) == -1.0f);
        tsr_backend_cpu_set_abort_callback(be, nullptr, nullptr);
        CHECK(run(be, ctx, y) == TSR_STATUS_SUCCESS);
        CHECK(tsr_get_f32_1d(chain[9], 0) == 1024.0f);
    }
}

TEST_CASE("cpu backend: no allocation in steady-state compute (tracing allocator)", "[cpu][alloc]") {
    tsr_tracing_allocator * tr = tsr_tracing_allocator_new(nullptr);
    REQUIRE(tr != nullptr);
    {
        backend_holder be(2);
        tsr_backend_cpu_set_host_allocator(be, tsr_tracing_allocator_host(tr));
        ctx_holder ctx(16);
        std::mt19937 rng(3);
        tsr_tensor * x;
        tsr_tensor * out = build_block(ctx, rng, &x);
        tsr_cgraph * gf = tsr_new_graph(ctx);
        REQUIRE(tsr_build_forward_expand(gf, out));
        REQUIRE(tsr_backend_graph_compute(be, gf) == TSR_STATUS_SUCCESS);  // first call may size the workspace
        const tsr_tracing_stats s1 = tsr_tracing_allocator_get_stats(tr);
        CHECK(s1.n_allocs >= 1);
        CHECK(tsr_backend_get_workspace_size(be) > 0);
        for (int i = 0; i < 5; ++i) REQUIRE(tsr_backend_graph_compute(be, gf) == TSR_STATUS_SUCCESS);
        const tsr_tracing_stats s2 = tsr_tracing_allocator_get_stats(tr);
        CHECK(s2.n_allocs == s1.n_allocs);
        CHECK(s2.n_frees == s1.n_frees);

        // reserve first, then compute: zero allocations inside compute at all
        backend_holder be2(3);
        tsr_backend_cpu_set_host_allocator(be2, tsr_tracing_allocator_host(tr));
        REQUIRE(tsr_backend_graph_reserve(be2, gf));
        const tsr_tracing_stats s3 = tsr_tracing_allocator_get_stats(tr);
        REQUIRE(tsr_backend_graph_compute(be2, gf) == TSR_STATUS_SUCCESS);
        CHECK(tsr_tracing_allocator_get_stats(tr).n_allocs == s3.n_allocs);
    }
    const tsr_tracing_stats s = tsr_tracing_allocator_get_stats(tr);
    CHECK(s.current_bytes == 0);
    tsr_tracing_allocator_free(tr);
}

TEST_CASE("cpu backend: graphs placed by gallocr (in-place reuse) match a context run", "[cpu][alloc]") {
    const int64_t D = 64, T = 7;
    tsr_context * ctx = tsr_init(tsr_init_params{64 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
    REQUIRE(ctx != nullptr);
    tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, D, T);
    tsr_tensor * pos = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, T);
    tsr_set_input(x);
    tsr_set_input(pos);
    tsr_tensor * h = tsr_rms_norm(ctx, tsr_scale(ctx, x, 2.0f), 1e-5f);
    tsr_tensor * r = tsr_rope(ctx, tsr_reshape_3d(ctx, h, 16, 4, T), pos, 16, TSR_ROPE_TYPE_NEOX);
    tsr_tensor * o = tsr_soft_max(ctx, tsr_cont(ctx, tsr_reshape_2d(ctx, r, D, T)));
    tsr_set_output(o);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(gf, o));
    backend_holder be(2);
    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_get_default_buffer_type(be));
    REQUIRE(tsr_gallocr_alloc_graph(ga, gf));
    std::vector<float> xv((size_t)(D * T));
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float & f : xv) f = u(rng);
    std::vector<int32_t> pv((size_t)T);
    for (int i = 0; i < T; ++i) pv[(size_t)i] = i;
    REQUIRE(tsr_backend_tensor_set(x, xv.data(), 0, xv.size() * 4));
    REQUIRE(tsr_backend_tensor_set(pos, pv.data(), 0, pv.size() * 4));
    REQUIRE(tsr_backend_graph_compute(be, gf) == TSR_STATUS_SUCCESS);
    std::vector<float> got((size_t)(D * T));
    REQUIRE(tsr_backend_tensor_get(o, got.data(), 0, got.size() * 4));

    // the same graph in a plain context (no sharing of memory)
    ctx_holder c2(4);
    tsr_tensor * x2 = tsr_new_tensor_2d(c2, TSR_TYPE_F32, D, T);
    tsr_tensor * p2 = tsr_new_tensor_1d(c2, TSR_TYPE_I32, T);
    std::memcpy(x2->data, xv.data(), xv.size() * 4);
    std::memcpy(p2->data, pv.data(), pv.size() * 4);
    tsr_tensor * h2 = tsr_rms_norm(c2, tsr_scale(c2, x2, 2.0f), 1e-5f);
    tsr_tensor * r2 = tsr_rope(c2, tsr_reshape_3d(c2, h2, 16, 4, T), p2, 16, TSR_ROPE_TYPE_NEOX);
    tsr_tensor * o2 = tsr_soft_max(c2, tsr_cont(c2, tsr_reshape_2d(c2, r2, D, T)));
    REQUIRE(run(be, c2, o2) == TSR_STATUS_SUCCESS);
    for (int64_t i = 0; i < D * T; ++i) CHECK(got[(size_t)i] == ((float *)o2->data)[i]);
    tsr_gallocr_free(ga);
    tsr_free(ctx);
}

TEST_CASE("cpu backend: small nodes on one thread, barriers only around them", "[cpu][threads][abort]") {
    // runs of small nodes (one thread, no barrier between them) between large nodes
    // (split over all threads), ending with a small run; checked against double math
    const int64_t big = 40000, small = 16;
    ctx_holder ctx(8);
    tsr_tensor * a = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, big);
    tsr_tensor * s = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, small);
    std::mt19937 rng(5);
    fill(a, rng, 0.5f, 1.5f);
    fill(s, rng, 0.5f, 1.5f);
    std::vector<tsr_tensor *> nodes;  // kind per node: 0 small scale, 1 big scale
    std::vector<int> kind;
    tsr_tensor * ys = s;
    tsr_tensor * yb = a;
    const int pattern[] = {0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0};
    for (int k : pattern) {
        if (k == 0) ys = tsr_scale(ctx, ys, 2.0f);
        else yb = tsr_scale(ctx, yb, 0.5f);
        nodes.push_back(k == 0 ? ys : yb);
        kind.push_back(k);
    }
    tsr_tensor * out = tsr_add(ctx, tsr_view_1d(ctx, yb, small, 0), ys);  // small last node
    nodes.push_back(out);
    kind.push_back(0);
    auto run_in_order = [&](tsr_backend_t be) {  // graph nodes in exactly this order
        tsr_cgraph * gf = tsr_new_graph(ctx);
        for (tsr_tensor * t : nodes) REQUIRE(tsr_build_forward_expand(gf, t));
        return tsr_backend_graph_compute(be, gf);
    };
    auto expect = [&](int upto, int64_t i) {  // value of node `upto` at element i, in double
        double vs = tsr_get_f32_1d(s, (int)i), vb = tsr_get_f32_1d(a, (int)i);
        for (int n = 0; n <= upto && n < (int)sizeof(pattern) / (int)sizeof(int); ++n) {
            if (pattern[n] == 0) vs *= 2.0; else vb *= 0.5;
        }
        return std::make_pair(vs, vb);
    };
    for (const char * small_node : {(const char *)nullptr, "64"}) {
        for (int n_threads : {1, 2, 3}) {
            backend_holder be(n_threads, small_node);
            for (tsr_tensor * t : nodes) tsr_set_f32_1d(t, 0, -1.0f);
            REQUIRE(run_in_order(be) == TSR_STATUS_SUCCESS);
            const auto e = expect(100, 0);
            CHECK(tsr_get_f32_1d(out, 0) == (float)(e.first + e.second));
            CHECK(tsr_get_f32_1d(yb, (int)(big - 1)) == (float)expect(100, big - 1).second);
            // abort after node 1 (inside the first small run, before a large node), after
            // node 5 (small run closed by a large node) and after node 8 (a small run that
            // reaches the last node): later nodes do not run, earlier ones did
            for (int stop : {1, 5, 8}) {
                for (tsr_tensor * t : nodes) tsr_set_f32_1d(t, 0, -1.0f);
                std::pair<std::atomic<int>, int> st;
                st.first = 0;
                st.second = stop + 1;
                tsr_backend_cpu_set_abort_callback(be, [](void * d) {
                    auto * p = (std::pair<std::atomic<int>, int> *)d;
                    return ++p->first >= p->second;
                }, &st);
                CHECK(run_in_order(be) == TSR_STATUS_ABORTED);
                CHECK(st.first.load() == stop + 1);
                const auto es = expect(stop, 0);
                CHECK(tsr_get_f32_1d(nodes[(size_t)stop], 0) == (float)(kind[(size_t)stop] == 0 ? es.first : es.second));
                CHECK(tsr_get_f32_1d(nodes[(size_t)stop + 1], 0) == -1.0f);
                CHECK(tsr_get_f32_1d(out, 0) == -1.0f);
                tsr_backend_cpu_set_abort_callback(be, nullptr, nullptr);
            }
        }
    }
}

TEST_CASE("cpu backend: a graph ending in a split mul_mat runs again correctly", "[cpu][threads]") {
    // the last node takes its rows from the shared chunk counter; the next run must start
    // that counter from zero again
    const int64_t K = 64, M = 300;
    ctx_holder ctx(4);
    tsr_tensor * w = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, K, M);
    tsr_tensor * v = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, K);
    std::mt19937 rng(9);
    fill(w, rng);
    fill(v, rng);
    tsr_tensor * out = tsr_mul_mat(ctx, w, v);
    for (const char * small_node : {(const char *)nullptr, "0"}) {
        backend_holder be(2, small_node);
        for (int rep = 0; rep < 4; ++rep) {
            for (int64_t m = 0; m < M; ++m) tsr_set_f32_1d(out, (int)m, NAN);
            REQUIRE(run(be, ctx, out) == TSR_STATUS_SUCCESS);
            double worst = 0;
            for (int64_t m = 0; m < M; ++m) {
                double ref = 0;
                for (int64_t k = 0; k < K; ++k) ref += (double)tsr_get_f32_nd(w, (int)k, (int)m, 0, 0) * tsr_get_f32_1d(v, (int)k);
                const double d = std::fabs(ref - tsr_get_f32_1d(out, (int)m));
                worst = std::isnan(d) ? INFINITY : std::max(worst, d);
            }
            CHECK(worst < 1e-4);
        }
    }
}

// Regression (with the gallocr one in tests/alloc): zero-element graphs compute as no-ops
// on every ISA path, next to a normal tensor whose result must be right.
TEST_CASE("cpu backend: zero-element tensors compute as no-ops", "[cpu][backend][error]") {
    tsr::context ctx(32 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true);
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 0, 3);
    tsr_tensor * e = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 8, 0);
    tsr_tensor * w = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 8, 4);
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    for (tsr_tensor * t : {a, e, w, x}) tsr_set_input(t);
    tsr_tensor * outs[] = {tsr_soft_max(ctx, a), tsr_rms_norm(ctx, e, 1e-5f), tsr_mul_mat(ctx, w, e),
                           tsr_sum_rows(ctx, a), tsr_sqr(ctx, x)};
    tsr_cgraph * g = tsr_new_graph(ctx);
    for (tsr_tensor * o : outs) {
        REQUIRE(o);
        tsr_set_output(o);
        REQUIRE(tsr_build_forward_expand(g, o));
    }
    tsr::backend cpu(tsr_backend_cpu_init());
    tsr::gallocr ga(tsr_backend_get_default_buffer_type(cpu));
    REQUIRE(tsr_gallocr_alloc_graph(ga, g));
    const float xv[4] = {1, -2, 3, 0.5f};
    tsr_backend_tensor_set(x, xv, 0, sizeof xv);
    std::vector<float> wv(32, 1.0f);
    tsr_backend_tensor_set(w, wv.data(), 0, wv.size() * sizeof(float));
    for (tsr_cpu_isa isa : cput::isas()) {
        INFO("isa " << tsr_cpu_isa_name(isa));
        cput::isa_scope scope(isa);
        REQUIRE(tsr_backend_graph_compute(cpu, g) == TSR_STATUS_SUCCESS);
        float y[4] = {0, 0, 0, 0};
        tsr_backend_tensor_get(outs[4], y, 0, sizeof y);
        for (int i = 0; i < 4; i++) CHECK(y[i] == xv[i] * xv[i]);
        // sum_rows of [0, 3] is [1, 3] of zeros: the sums of empty rows
        float r[3] = {-1, -1, -1};
        tsr_backend_tensor_get(outs[3], r, 0, sizeof r);
        for (float v : r) CHECK(v == 0.0f);
    }
}

// Regression (found by graph_fuzz): the sum of a zero-element tensor is 0 at once, however
// many empty rows its other dims make (2^50 here: the old loop visited each of them).
TEST_CASE("cpu backend: sum of a zero-element tensor with 2^50 empty rows", "[cpu][backend][error]") {
    tsr::context ctx(8 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true);
    tsr_tensor * a = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 0, INT64_C(1) << 20, INT64_C(1) << 20, INT64_C(1) << 10);
    REQUIRE(a);
    tsr_tensor * s = tsr_sum(ctx, a);
    REQUIRE(s);
    tsr_cgraph * g = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(g, s));
    tsr::backend cpu(tsr_backend_cpu_init());
    tsr::gallocr ga(tsr_backend_get_default_buffer_type(cpu));
    REQUIRE(tsr_gallocr_alloc_graph(ga, g));
    for (tsr_cpu_isa isa : cput::isas()) {
        INFO("isa " << tsr_cpu_isa_name(isa));
        cput::isa_scope scope(isa);
        float v = -1.0f;
        tsr_backend_tensor_set(s, &v, 0, sizeof v);
        REQUIRE(tsr_backend_graph_compute(cpu, g) == TSR_STATUS_SUCCESS);
        tsr_backend_tensor_get(s, &v, 0, sizeof v);
        CHECK(v == 0.0f);
    }
}
