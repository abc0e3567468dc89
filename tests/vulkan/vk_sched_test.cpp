// The backend scheduler over Vulkan + CPU: weights on both, an op Vulkan lacks (BF16
// get_rows) falling back to the CPU; the split graph must compute what the CPU computes alone.
#include <catch2/catch.hpp>

#include "tessera/sched.h"
#include "vk_util.h"

namespace {

// e = get_rows(emb, tokens); h = silu(W1 e); y = rms_norm(W2 h); o = W3 y.
// emb (BF16), W1 (F16) and W3 in `gpu` buffers, W2 in `cpu` ones.
struct net {
    tsr_context * ctx_gpu = nullptr, * ctx_cpu = nullptr, * ctx = nullptr;
    tsr_backend_buffer_t buf_gpu = nullptr, buf_cpu = nullptr;
    tsr_tensor *emb, *W1, *W2, *W3, *tokens, *e, *h, *y, *o;
    tsr_cgraph * gf = nullptr;

    net(tsr_backend_buffer_type_t gpu, tsr_backend_buffer_type_t cpu) {
        ctx_gpu = tsr_init({4 * tsr_tensor_overhead(), nullptr, true});
        ctx_cpu = tsr_init({2 * tsr_tensor_overhead(), nullptr, true});
        ctx = tsr_init({32 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
        REQUIRE((ctx_gpu && ctx_cpu && ctx));
        emb = tsr_set_name(tsr_new_tensor_2d(ctx_gpu, TSR_TYPE_BF16, 32, 10), "emb");
        W1 = tsr_set_name(tsr_new_tensor_2d(ctx_gpu, TSR_TYPE_F16, 32, 48), "W1");
        W3 = tsr_set_name(tsr_new_tensor_2d(ctx_gpu, TSR_TYPE_F32, 48, 8), "W3");
        W2 = tsr_set_name(tsr_new_tensor_2d(ctx_cpu, TSR_TYPE_F32, 48, 48), "W2");
        buf_gpu = tsr_backend_alloc_ctx_tensors_from_buft(ctx_gpu, gpu);
        buf_cpu = tsr_backend_alloc_ctx_tensors_from_buft(ctx_cpu, cpu);
        REQUIRE((buf_gpu && buf_cpu));
        uint32_t seed = 21;
        for (tsr_tensor * w : {emb, W1, W2, W3}) tsrt::fill_random(w, seed++, -0.5f, 0.5f);
        tokens = tsr_set_name(tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 5), "tokens");
        tsr_set_input(tokens);
        e = tsr_set_name(tsr_get_rows(ctx, emb, tokens), "e");
        h = tsr_set_name(tsr_silu(ctx, tsr_mul_mat(ctx, W1, e)), "h");
        y = tsr_set_name(tsr_rms_norm(ctx, tsr_mul_mat(ctx, W2, h), 1e-5f), "y");
        o = tsr_set_name(tsr_mul_mat(ctx, W3, y), "o");
        tsr_set_output(o);
        gf = tsr_new_graph(ctx);
        REQUIRE(tsr_build_forward_expand(gf, o));
    }
    ~net() {
        tsr_backend_buffer_free(buf_gpu);
        tsr_backend_buffer_free(buf_cpu);
        for (tsr_context * c : {ctx, ctx_gpu, ctx_cpu}) tsr_free(c);
    }
    void set_tokens() const {
        const int32_t ids[5] = {3, 0, 9, 3, 7};
        REQUIRE(tsr_backend_tensor_set(tokens, ids, 0, sizeof(ids)));
    }
};

// The reference: every weight in host memory, the graph on the CPU backend alone.
std::vector<float> net_on_cpu() {
    net ref(tsr_backend_cpu_buffer_type(), tsr_backend_cpu_buffer_type());
    tsr::gallocr ga(tsr_backend_cpu_buffer_type());
    REQUIRE(tsr_gallocr_alloc_graph(ga, ref.gf));
    ref.set_tokens();
    REQUIRE(tsr_backend_graph_compute(tsrt::cpu(), ref.gf) == TSR_STATUS_SUCCESS);
    return tsrt::download(ref.o);
}

} // namespace

TEST_CASE("sched: Vulkan + CPU split of a small network computes what the CPU computes alone", "[vulkan][sched]") {
    VK_OR_SKIP();
    const std::vector<float> want = net_on_cpu();

    tsr_backend_t list[2] = {vkt::vk(), tsrt::cpu()};
    tsr::backend_sched sched(tsr_backend_sched_new(list, nullptr, 2, 64, false));
    REQUIRE(sched.get() != nullptr);
    net n(tsr_backend_get_default_buffer_type(vkt::vk()), tsr_backend_cpu_buffer_type());
    REQUIRE_FALSE(tsr_backend_supports_op(vkt::vk(), n.e));   // what this test relies on
    REQUIRE(tsr_backend_sched_reserve(sched, n.gf));
    // [get_rows]CPU [mul_mat silu]Vulkan [mul_mat rms_norm]CPU [mul_mat]Vulkan; copies:
    // emb -> CPU (Vulkan lacks its get_rows), e -> Vulkan, h -> CPU, y -> Vulkan
    CHECK(tsr_backend_sched_get_n_splits(sched) == 4);
    CHECK(tsr_backend_sched_get_n_split_inputs(sched) == 4);
    for (int i = 0; i < 4; i++) CHECK(tsr_backend_sched_get_split_backend(sched, i) == list[(i + 1) % 2]);
    for (tsr_backend_t be : list) {
        tsr_backend_sched_buffer_info info{};
        REQUIRE(tsr_backend_sched_get_buffer_info(sched, be, &info));
        INFO(tsr_backend_name(be) << ": planned " << info.planned_size << ", lower bound " << info.lower_bound);
        CHECK(info.n_inputs == 2);
        CHECK(info.planned_size <= info.lower_bound);
    }
    for (int run = 0; run < 2; run++) {
        REQUIRE(tsr_backend_sched_alloc_graph(sched, n.gf));
        n.set_tokens();
        REQUIRE(tsr_backend_sched_graph_compute(sched, n.gf) == TSR_STATUS_SUCCESS);
        const std::vector<float> got = tsrt::download(n.o);
        CHECK(tsrt::nmse(got, want) < 1e-6);
    }
}

TEST_CASE("sched: two Vulkan backends on one device share its memory: a layer split across them copies nothing between them", "[vulkan][sched]") {
    VK_OR_SKIP();
    const std::vector<float> want = net_on_cpu();
    tsr::backend vk2(tsr_backend_vk_init(-1));
    REQUIRE(vk2.get() != nullptr);
    tsr_backend_t list[3] = {vkt::vk(), vk2, tsrt::cpu()};
    tsr::backend_sched sched(tsr_backend_sched_new(list, nullptr, 3, 64, false));
    REQUIRE(sched.get() != nullptr);
    net n(tsr_backend_get_default_buffer_type(vkt::vk()), tsr_backend_cpu_buffer_type());
    tsr_backend_sched_set_tensor_backend(sched, n.h, vk2);   // the layer's silu on the second instance
    REQUIRE(tsr_backend_sched_alloc_graph(sched, n.gf));
    // [get_rows]CPU [mul_mat]Vulkan [silu]Vulkan#2 [mul_mat rms_norm]CPU [mul_mat]Vulkan: the
    // copies are those of the first test; none between the two instances
    CHECK(tsr_backend_sched_get_n_splits(sched) == 5);
    CHECK(tsr_backend_sched_get_n_split_inputs(sched) == 4);
    CHECK(tsr_backend_sched_get_split_backend(sched, 2) == vk2.get());
    CHECK(tsr_backend_sched_get_split_n_inputs(sched, 2) == 0);
    n.set_tokens();
    REQUIRE(tsr_backend_sched_graph_compute(sched, n.gf) == TSR_STATUS_SUCCESS);
    CHECK(tsrt::nmse(tsrt::download(n.o), want) < 1e-6);
}
