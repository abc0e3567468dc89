// CUDA backend: a 2-layer GPT-2-shaped graph computed whole on CUDA equals the CPU result
// (weights F32, F16, Q8_0, Q4_0; compute buffer planned by gallocr, so in-place reuse is
// exercised), CUDA graph capture replays, and graph_reserve sizes the workspace up front.
#include "cuda_test_util.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

using namespace cudatest;

namespace {

struct gpt2_cfg {
    int E = 64, H = 4, L = 2, V = 97, NCTX = 32, T = 7;
    tsr_type wtype = TSR_TYPE_F32;
};

struct layer_w {
    tsr_tensor *ln1_g, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b, *ln2_g, *ln2_b, *fc_w, *fc_b, *fc2_w, *fc2_b;
};

struct gpt2_run {
    std::vector<float> logits;
    bool ok = false;
    std::string error;
    tsr_cuda_stats stats = {};
};

// Builds the weights on `be`, then the forward graph for cfg.T tokens; computes it `reps`
// times (capture on when asked) and returns the logits [V, T] of the last run.
gpt2_run run_gpt2(tsr_backend_t be, const gpt2_cfg & cfg, bool capture, int reps, bool reserve) {
    gpt2_run out;
    const int E = cfg.E, H = cfg.H, D = E / H, T = cfg.T;
    tsr_context * wctx = tsr_init({(16 + 16 * cfg.L) * tsr_tensor_overhead(), nullptr, true});
    REQUIRE(wctx);
    std::vector<std::pair<tsr_tensor *, std::pair<float, float>>> ws;
    auto W = [&](tsr_type t, int64_t a, int64_t b, float lo, float hi) {
        tsr_tensor * x = b > 0 ? tsr_new_tensor_2d(wctx, t, a, b) : tsr_new_tensor_1d(wctx, t, a);
        REQUIRE(x);
        ws.push_back({x, {lo, hi}});
        return x;
    };
    tsr_tensor * wte = W(cfg.wtype, E, cfg.V, -0.5f, 0.5f);
    tsr_tensor * wpe = W(TSR_TYPE_F32, E, cfg.NCTX, -0.1f, 0.1f);
    std::vector<layer_w> lw((size_t) cfg.L);
    for (auto & l : lw) {
        l.ln1_g = W(TSR_TYPE_F32, E, 0, 0.8f, 1.2f);
        l.ln1_b = W(TSR_TYPE_F32, E, 0, -0.1f, 0.1f);
        l.attn_w = W(cfg.wtype, E, 3 * E, -0.25f, 0.25f);
        l.attn_b = W(TSR_TYPE_F32, 3 * E, 0, -0.1f, 0.1f);
        l.proj_w = W(cfg.wtype, E, E, -0.25f, 0.25f);
        l.proj_b = W(TSR_TYPE_F32, E, 0, -0.1f, 0.1f);
        l.ln2_g = W(TSR_TYPE_F32, E, 0, 0.8f, 1.2f);
        l.ln2_b = W(TSR_TYPE_F32, E, 0, -0.1f, 0.1f);
        l.fc_w = W(cfg.wtype, E, 4 * E, -0.25f, 0.25f);
        l.fc_b = W(TSR_TYPE_F32, 4 * E, 0, -0.1f, 0.1f);
        l.fc2_w = W(cfg.wtype, 4 * E, E, -0.12f, 0.12f);
        l.fc2_b = W(TSR_TYPE_F32, E, 0, -0.1f, 0.1f);
    }
    tsr_tensor * lnf_g = W(TSR_TYPE_F32, E, 0, 0.8f, 1.2f);
    tsr_tensor * lnf_b = W(TSR_TYPE_F32, E, 0, -0.1f, 0.1f);
    tsr_backend_buffer_t wbuf = tsr_backend_alloc_ctx_tensors(wctx, be);
    REQUIRE(wbuf);
    for (size_t i = 0; i < ws.size(); ++i) fill_random(ws[i].first, 99u + 31u * (uint32_t) i, ws[i].second.first, ws[i].second.second);

    const size_t cmem = 1024 * tsr_tensor_overhead() + tsr_graph_overhead();
    tsr_context * ctx = tsr_init({cmem, nullptr, true});
    REQUIRE(ctx);
    tsr_tensor * tokens = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, T);
    tsr_tensor * pos = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, T);
    tsr_set_input(tokens);
    tsr_set_input(pos);
    tsr_tensor * x = tsr_add(ctx, tsr_get_rows(ctx, wte, tokens), tsr_get_rows(ctx, wpe, pos));
    for (const auto & l : lw) {
        tsr_tensor * cur = tsr_add(ctx, tsr_mul(ctx, tsr_norm(ctx, x, 1e-5f), l.ln1_g), l.ln1_b);
        tsr_tensor * qkv = tsr_add(ctx, tsr_mul_mat(ctx, l.attn_w, cur), l.attn_b);                     // [3E, T]
        tsr_tensor * q = tsr_view_2d(ctx, qkv, E, T, qkv->nb[1], 0);
        tsr_tensor * k = tsr_view_2d(ctx, qkv, E, T, qkv->nb[1], (size_t) E * sizeof(float));
        tsr_tensor * v = tsr_view_2d(ctx, qkv, E, T, qkv->nb[1], (size_t) 2 * E * sizeof(float));
        tsr_tensor * Q = tsr_permute(ctx, tsr_reshape_3d(ctx, tsr_cont(ctx, q), D, H, T), 0, 2, 1, 3);  // [D, T, H]
        tsr_tensor * K = tsr_permute(ctx, tsr_reshape_3d(ctx, tsr_cont(ctx, k), D, H, T), 0, 2, 1, 3);
        tsr_tensor * kq = tsr_mul_mat(ctx, K, Q);                                                        // [T, T, H]
        kq = tsr_soft_max(ctx, tsr_diag_mask_inf(ctx, tsr_scale(ctx, kq, 1.0f / std::sqrt((float) D)), 0));
        tsr_tensor * Vt = tsr_cont(ctx, tsr_permute(ctx, tsr_reshape_3d(ctx, tsr_cont(ctx, v), D, H, T), 1, 2, 0, 3)); // [T, D, H]
        tsr_tensor * kqv = tsr_mul_mat(ctx, Vt, kq);                                                     // [D, T, H]
        cur = tsr_cont_2d(ctx, tsr_permute(ctx, kqv, 0, 2, 1, 3), E, T);
        cur = tsr_add(ctx, tsr_mul_mat(ctx, l.proj_w, cur), l.proj_b);
        x = tsr_add(ctx, x, cur);
        cur = tsr_add(ctx, tsr_mul(ctx, tsr_norm(ctx, x, 1e-5f), l.ln2_g), l.ln2_b);
        cur = tsr_gelu(ctx, tsr_add(ctx, tsr_mul_mat(ctx, l.fc_w, cur), l.fc_b));
        cur = tsr_add(ctx, tsr_mul_mat(ctx, l.fc2_w, cur), l.fc2_b);
        x = tsr_add(ctx, x, cur);
    }
    x = tsr_add(ctx, tsr_mul(ctx, tsr_norm(ctx, x, 1e-5f), lnf_g), lnf_b);
    tsr_tensor * logits = tsr_mul_mat(ctx, wte, x);   // [V, T]
    REQUIRE(logits);
    tsr_set_output(logits);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(gf, logits));

    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_get_default_buffer_type(be));
    REQUIRE(ga);
    REQUIRE(tsr_gallocr_alloc_graph(ga, gf));
    std::vector<int32_t> tok(T), ps(T);
    for (int i = 0; i < T; ++i) { tok[i] = (i * 37 + 5) % cfg.V; ps[i] = i; }
    if (tsr_backend_is_cuda(be)) {
        REQUIRE(tsr_backend_cuda_set_graph_capture(be, capture));
        if (reserve) REQUIRE(tsr_backend_graph_reserve(be, gf));
        REQUIRE(tsr_backend_cuda_get_stats(be, &out.stats));
    }
    out.ok = true;
    tsr_cuda_stats before = out.stats;
    for (int r = 0; r < reps && out.ok; ++r) {
        // inputs are set before every compute, as a runner does: gallocr may place later
        // tensors over an input after its last use (alloc.h), so a compute clobbers them
        REQUIRE(tsr_backend_tensor_set(tokens, tok.data(), 0, tok.size() * 4));
        REQUIRE(tsr_backend_tensor_set(pos, ps.data(), 0, ps.size() * 4));
        if (tsr_backend_graph_compute(be, gf) != TSR_STATUS_SUCCESS) { out.ok = false; out.error = tsr_last_error(); }
    }
    if (out.ok) out.logits = download(logits);
    if (tsr_backend_is_cuda(be)) {
        REQUIRE(tsr_backend_cuda_get_stats(be, &out.stats));
        out.stats.pool_misses -= before.pool_misses;          // misses during the computes
        out.stats.graph_replays -= before.graph_replays;
        out.stats.graph_captures -= before.graph_captures;
        REQUIRE(tsr_backend_cuda_set_graph_capture(be, false));
    }
    tsr_gallocr_free(ga);
    tsr_free(ctx);
    tsr_backend_buffer_free(wbuf);
    tsr_free(wctx);
    return out;
}

} // namespace

TEST_CASE("cuda graph: 2-layer GPT-2 on CUDA equals CPU", "[cuda][device][graph]") {
    CUDA_OR_SKIP(be);
    struct { tsr_type t; int T; double tol; } cases[] = {
        {TSR_TYPE_F32, 7, 1e-7}, {TSR_TYPE_F16, 7, 1e-5}, {TSR_TYPE_Q8_0, 7, 5e-3}, {TSR_TYPE_Q4_0, 7, 5e-3},
        {TSR_TYPE_Q8_0, 13, 5e-3}, {TSR_TYPE_F32, 1, 1e-7}, {TSR_TYPE_BF16, 7, 1e-4}};
    for (const auto & c : cases) {
        gpt2_cfg cfg;
        cfg.wtype = c.t;
        cfg.T = c.T;
        INFO("weights " << tsr_type_name(c.t) << ", " << c.T << " tokens");
        gpt2_run ref = run_gpt2(cpu(), cfg, false, 1, false);
        INFO("cpu: " << ref.error);
        REQUIRE(ref.ok);
        gpt2_run got = run_gpt2(be, cfg, false, 1, false);
        INFO("cuda: " << got.error);
        REQUIRE(got.ok);
        const double e = nmse(got.logits, ref.logits);
        INFO("nmse " << e << " tolerance " << c.tol);
        CHECK(e <= c.tol);
    }
}

// Where two logit vectors first differ, and how many values of each are not finite.
static std::string first_difference(const std::vector<float> & got, const std::vector<float> & ref) {
    std::ostringstream s;
    size_t bad_got = 0, bad_ref = 0;
    for (float v : got) bad_got += !std::isfinite(v);
    for (float v : ref) bad_ref += !std::isfinite(v);
    s << got.size() << " / " << ref.size() << " values, " << bad_got << " / " << bad_ref << " not finite";
    for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i)
        if (!(got[i] == ref[i])) { s << "; first difference at " << i << ": " << got[i] << " against " << ref[i]; break; }
    return s.str();
}

TEST_CASE("cuda graph: capture replays the same graph with the same results", "[cuda][device][graph]") {
    CUDA_OR_SKIP(be);
    gpt2_cfg cfg;
    cfg.wtype = TSR_TYPE_F16;
    gpt2_run ref = run_gpt2(be, cfg, false, 1, false);
    REQUIRE(ref.ok);
    // the same graph computed three times without capture; with capture on, computed once
    // (launched as it is: a graph is captured when it repeats), twice (the second compute
    // captured and launched), four times (captured, then replayed twice): each equals the
    // single uncaptured compute
    struct { const char * what; bool capture; int reps; size_t captures, replays; } variants[] = {
        {"three computes without capture", false, 3, 0, 0},
        {"capture on, computed once", true, 1, 0, 0},
        {"capture on, computed twice", true, 2, 1, 0},
        {"capture on, computed four times", true, 4, 1, 2}};
    for (const auto & v : variants) {
        gpt2_run got = run_gpt2(be, cfg, v.capture, v.reps, true);
        INFO(v.what << ": " << got.error);
        REQUIRE(got.ok);
        INFO(first_difference(got.logits, ref.logits));
        CHECK(got.stats.graph_captures == v.captures);
        CHECK(got.stats.graph_replays == v.replays);
        CHECK(nmse(got.logits, ref.logits) <= 1e-12);
    }
}

TEST_CASE("cuda graph: graph_reserve sizes the workspace so compute allocates nothing", "[cuda][device][graph]") {
    CUDA_OR_SKIP(be);
    gpt2_cfg cfg;
    cfg.wtype = TSR_TYPE_Q4_0;
    cfg.T = 12;   // the dequantize + cuBLAS path needs workspace
    gpt2_run r = run_gpt2(be, cfg, false, 2, true);
    INFO("cuda: " << r.error);
    REQUIRE(r.ok);
    CHECK(r.stats.workspace_size > 0);
    CHECK(r.stats.pool_misses == 0);
    CHECK(tsr_backend_get_workspace_size(be) == r.stats.workspace_size);
}
