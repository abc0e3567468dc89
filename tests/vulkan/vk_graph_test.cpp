// Whole graphs on Vulkan: a 2-layer GPT-2-shaped model against the CPU backend, gallocr
// with the Vulkan buffer type, barriers only between dependent nodes, pipeline caching.
#include "vk_util.h"

namespace {

struct gpt2_hparams {
    int64_t n_vocab = 300, n_ctx = 64, n_embd = 128, n_head = 4, n_layer = 2, n_tokens = 12;
    enum tsr_type wtype = TSR_TYPE_F32;
};

// The GPT-2 forward pass of ggml's gpt-2 example (layer norm, attention through
// mul_mat + soft_max_ext with a causal mask, GELU MLP), weights as graph inputs.
tsr_tensor * build_gpt2(tsr_context * ctx, vkt::graph_inputs & d, const gpt2_hparams & hp) {
    const int64_t E = hp.n_embd, H = hp.n_head, D = E / H, N = hp.n_tokens, V = hp.n_vocab;
    auto w = [&](int64_t ne0, int64_t ne1, enum tsr_type t) { return d.add(tsr_new_tensor_2d(ctx, t, ne0, ne1), -0.08f, 0.08f); };
    auto vec = [&](int64_t ne0, float lo, float hi) { return d.add(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, ne0), lo, hi); };
    tsr_tensor * wte = w(E, V, TSR_TYPE_F32);
    tsr_tensor * wpe = w(E, hp.n_ctx, TSR_TYPE_F32);
    std::vector<int32_t> tok, pos;
    for (int64_t i = 0; i < N; i++) { tok.push_back(static_cast<int32_t>((i * 37 + 5) % V)); pos.push_back(static_cast<int32_t>(i)); }
    tsr_tensor * tokens = d.add_i32(tsr_new_tensor_1d(ctx, TSR_TYPE_I32, N), tok);
    tsr_tensor * positions = d.add_i32(tsr_new_tensor_1d(ctx, TSR_TYPE_I32, N), pos);
    std::vector<float> mask_v(static_cast<size_t>(N * N));
    for (int64_t q = 0; q < N; q++)
        for (int64_t k = 0; k < N; k++) mask_v[static_cast<size_t>(q * N + k)] = k <= q ? 0.0f : -INFINITY;
    tsr_tensor * mask = d.add_values(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, N, N), mask_v);

    tsr_tensor * inpL = tsr_add(ctx, tsr_get_rows(ctx, wte, tokens), tsr_get_rows(ctx, wpe, positions));
    for (int64_t il = 0; il < hp.n_layer; il++) {
        tsr_tensor * cur = tsr_norm(ctx, inpL, 1e-5f);
        cur = tsr_add(ctx, tsr_mul(ctx, cur, vec(E, 0.8f, 1.2f)), vec(E, -0.1f, 0.1f));
        cur = tsr_add(ctx, tsr_mul_mat(ctx, w(E, 3 * E, hp.wtype), cur), vec(3 * E, -0.05f, 0.05f));  // [3E, N]
        tsr_tensor * Qv = tsr_view_2d(ctx, cur, E, N, cur->nb[1], 0);
        tsr_tensor * Kv = tsr_view_2d(ctx, cur, E, N, cur->nb[1], static_cast<size_t>(E) * sizeof(float));
        tsr_tensor * Vv = tsr_view_2d(ctx, cur, E, N, cur->nb[1], static_cast<size_t>(2 * E) * sizeof(float));
        tsr_tensor * Q = tsr_permute(ctx, tsr_cpy(ctx, Qv, tsr_new_tensor_3d(ctx, TSR_TYPE_F32, D, H, N)), 0, 2, 1, 3);  // [D, N, H]
        tsr_tensor * K = tsr_permute(ctx, tsr_cont_4d(ctx, Kv, D, H, N, 1), 0, 2, 1, 3);                                  // [D, N, H]
        tsr_tensor * KQ = tsr_mul_mat(ctx, K, Q);                                                                            // [N, N, H]
        tsr_tensor * KQs = tsr_soft_max_ext(ctx, KQ, mask, 1.0f / std::sqrt(static_cast<float>(D)), 0.0f);
        tsr_tensor * Vt = tsr_cont(ctx, tsr_permute(ctx, tsr_reshape_3d(ctx, tsr_cont(ctx, Vv), D, H, N), 1, 2, 0, 3));     // [N, D, H]
        tsr_tensor * KQV = tsr_mul_mat(ctx, Vt, KQs);                                                                        // [D, N, H]
        cur = tsr_cont_2d(ctx, tsr_permute(ctx, KQV, 0, 2, 1, 3), E, N);                                                    // [E, N]
        cur = tsr_add(ctx, tsr_mul_mat(ctx, w(E, E, hp.wtype), cur), vec(E, -0.05f, 0.05f));
        tsr_tensor * inpFF = tsr_add(ctx, cur, inpL);
        cur = tsr_norm(ctx, inpFF, 1e-5f);
        cur = tsr_add(ctx, tsr_mul(ctx, cur, vec(E, 0.8f, 1.2f)), vec(E, -0.1f, 0.1f));
        cur = tsr_gelu(ctx, tsr_add(ctx, tsr_mul_mat(ctx, w(E, 4 * E, hp.wtype), cur), vec(4 * E, -0.05f, 0.05f)));
        cur = tsr_add(ctx, tsr_mul_mat(ctx, w(4 * E, E, hp.wtype), cur), vec(E, -0.05f, 0.05f));
        inpL = tsr_add(ctx, cur, inpFF);
    }
    tsr_tensor * cur = tsr_norm(ctx, inpL, 1e-5f);
    cur = tsr_add(ctx, tsr_mul(ctx, cur, vec(E, 0.8f, 1.2f)), vec(E, -0.1f, 0.1f));
    return tsr_mul_mat(ctx, wte, cur);  // logits [V, N]
}

} // namespace

TEST_CASE("vulkan computes a 2-layer GPT-2 graph like the CPU backend", "[vulkan][graph]") {
    VK_OR_SKIP();
    for (enum tsr_type wt : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_Q8_0}) {
        gpt2_hparams hp;
        hp.wtype = wt;
        INFO("weights " << tsr_type_name(wt));
        vkt::graph_builder b = [&](tsr_context * ctx, vkt::graph_inputs & d) { return build_gpt2(ctx, d, hp); };
        vkt::result rv = vkt::run(vkt::vk(), b, 99, 512);
        vkt::result rc = vkt::run(vkt::cpu(), b, 99, 512);
        vkt::check_close(rv, rc, wt == TSR_TYPE_Q8_0 ? 1e-3 : 1e-6);
        CHECK(rv.stats.n_submits == 1);
        CHECK(rv.stats.n_barriers < rv.stats.n_dispatches);
    }
}

TEST_CASE("vulkan records barriers only between dependent nodes, caches pipelines", "[vulkan][graph]") {
    VK_OR_SKIP();
    vkt::graph_builder b = [](tsr_context * ctx, vkt::graph_inputs & d) {
        tsr_tensor * in[8];
        for (auto & t : in) t = d.add(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 1000));
        tsr_tensor * x1 = tsr_add(ctx, in[0], in[1]);
        tsr_tensor * x2 = tsr_add(ctx, in[2], in[3]);
        tsr_tensor * x3 = tsr_add(ctx, in[4], in[5]);
        tsr_tensor * x4 = tsr_add(ctx, in[6], in[7]);
        tsr_tensor * y1 = tsr_add(ctx, x1, x2);
        tsr_tensor * y2 = tsr_add(ctx, x3, x4);
        return tsr_add(ctx, y1, y2);
    };
    vkt::result r1 = vkt::run(vkt::vk(), b);
    REQUIRE(r1.ok);
    // depth-first order: x1 x2 | y1 x3 x4 | y2 | z: a barrier before y1 (reads x1, x2),
    // none before x3 and x4 (independent), one before y2 (reads x3, x4), one before z
    CHECK(r1.stats.n_dispatches == 7);
    CHECK(r1.stats.n_barriers == 3);
    CHECK(r1.stats.n_submits == 1);
    vkt::result r2 = vkt::run(vkt::vk(), b);
    // graph_reserve creates a graph's pipelines ahead: computing it afterwards creates none
    {
        tsr_init_params ip{8 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true};
        tsr_context * ctx = tsr_init(ip);
        tsr_tensor * x = tsr_soft_max_ext(ctx, tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 19, 3, 5), nullptr, 0.7f, 0.0f);
        tsr_cgraph * g = tsr_new_graph(ctx);
        REQUIRE(tsr_build_forward_expand(g, x));
        REQUIRE(tsr_backend_graph_reserve(vkt::vk(), g));
        const int after_reserve = tsr_backend_vk_get_graph_stats(vkt::vk()).n_pipelines;
        CHECK(after_reserve >= r2.stats.n_pipelines);
        vkt::result r3 = vkt::run(vkt::vk(), [](tsr_context * c, vkt::graph_inputs & d) {
            return tsr_soft_max_ext(c, d.add(tsr_new_tensor_3d(c, TSR_TYPE_F32, 19, 3, 5)), nullptr, 0.7f, 0.0f);
        });
        REQUIRE(r3.ok);
        CHECK(r3.stats.n_pipelines == after_reserve);
        tsr_free(ctx);
    }
    REQUIRE(r2.ok);
    CHECK(r2.stats.n_pipelines == r1.stats.n_pipelines);  // nothing new created
    CHECK(r2.out == r1.out);
    // the sum of 8 inputs, checked on the host: rerun the generator
    std::vector<float> want(1000, 0.0f);
    for (int i = 0; i < 8; i++) {
        std::mt19937 rng(1234 + static_cast<uint32_t>(i) * 7919u);
        const std::vector<float> v = vkt::uniform(1000, rng);
        for (size_t k = 0; k < 1000; k++) want[k] += v[k];
    }
    CHECK(vkt::nmse(r1.out, want) < 1e-12);
}

TEST_CASE("vulkan works with gallocr: weights in one buffer, activations planned", "[vulkan][graph][alloc]") {
    VK_OR_SKIP();
    gpt2_hparams hp;
    hp.n_layer = 1;
    // weights and inputs: a no_alloc context placed with alloc_ctx_tensors; activations by gallocr
    auto run_galloc = [&](tsr_backend_t be, std::vector<float> & out, size_t & planned) {
        tsr_init_params ip{512 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true};
        tsr_context * ctx = tsr_init(ip);
        REQUIRE(ctx);
        vkt::graph_inputs d;
        tsr_tensor * logits = build_gpt2(ctx, d, hp);
        tsr_set_output(logits);
        tsr_cgraph * g = tsr_new_graph(ctx);
        REQUIRE(tsr_build_forward_expand(g, logits));
        // a second context holding only the inputs' storage: allocate inputs, then plan the rest
        tsr_backend_buffer_type_t buft = tsr_backend_get_default_buffer_type(be);
        size_t total = 0;
        for (auto & in : d.list) total += TSR_PAD(tsr_backend_buft_get_alloc_size(buft, in.t), tsr_backend_buft_get_alignment(buft));
        tsr_backend_buffer_t wbuf = tsr_backend_buft_alloc_buffer(buft, total);
        REQUIRE(wbuf);
        tsr_backend_buffer_set_usage(wbuf, TSR_BUFFER_USAGE_WEIGHTS);
        struct tsr_tallocr ta = tsr_tallocr_new(wbuf);
        for (auto & in : d.list) { tsr_set_input(in.t); REQUIRE(tsr_tallocr_alloc(&ta, in.t)); }
        tsr_gallocr_t ga = tsr_gallocr_new(buft);
        REQUIRE(ga);
        REQUIRE(tsr_gallocr_reserve(ga, g));
        REQUIRE(tsr_gallocr_alloc_graph(ga, g));
        planned = tsr_gallocr_get_buffer_size(ga, 0);
        for (size_t i = 0; i < d.list.size(); i++) vkt::fill_input(d.list[i], 5 + static_cast<uint32_t>(i));
        REQUIRE(tsr_backend_graph_compute(be, g) == TSR_STATUS_SUCCESS);
        out.resize(static_cast<size_t>(tsr_nelements(logits)));
        REQUIRE(tsr_backend_tensor_get(logits, out.data(), 0, out.size() * 4));
        tsr_gallocr_free(ga);
        tsr_backend_buffer_free(wbuf);
        tsr_free(ctx);
    };
    std::vector<float> ov, oc;
    size_t pv = 0, pc = 0;
    run_galloc(vkt::vk(), ov, pv);
    run_galloc(vkt::cpu(), oc, pc);
    CHECK(pv > 0);
    INFO("planned vulkan " << pv << " cpu " << pc);
    CHECK(vkt::nmse(ov, oc) < 1e-6);
}
