// The backend scheduler over Vulkan + CPU: weights on both, an op Vulkan lacks (BF16
// get_rows) falling back to the CPU; the split graph must compute what the CPU computes alone.
#include <catch2/catch.hpp>

#include "tessera/sched.h"
#include "vk_util.h"

#include <cstdlib>

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
    void set_tokens(const std::vector<int32_t> & ids = {3, 0, 9, 3, 7}) const {
        REQUIRE(ids.size() == 5);
        REQUIRE(tsr_backend_tensor_set(tokens, ids.data(), 0, ids.size() * sizeof(int32_t)));
    }
};

// The reference: every weight in host memory, the graph on the CPU backend alone.
std::vector<float> net_on_cpu(const std::vector<int32_t> & ids = {3, 0, 9, 3, 7}) {
    net ref(tsr_backend_cpu_buffer_type(), tsr_backend_cpu_buffer_type());
    tsr::gallocr ga(tsr_backend_cpu_buffer_type());
    REQUIRE(tsr_gallocr_alloc_graph(ga, ref.gf));
    ref.set_tokens(ids);
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

TEST_CASE("sched: parallel on Vulkan + CPU: graphs back to back with rotating input copies and events, each result the CPU's", "[vulkan][sched]") {
    VK_OR_SKIP();
    const std::vector<std::vector<int32_t>> batches = {{3, 0, 9, 3, 7}, {1, 2, 3, 4, 5}, {9, 9, 0, 0, 8}, {6, 5, 4, 3, 2},
                                                       {0, 1, 0, 1, 0}, {7, 7, 7, 2, 2}};
    tsr_backend_t list[2] = {vkt::vk(), tsrt::cpu()};
    tsr::backend_sched sched(tsr_backend_sched_new(list, nullptr, 2, 64, true));
    REQUIRE(sched.get() != nullptr);
    CHECK(tsr_backend_sched_get_n_copies(sched) == TSR_SCHED_MAX_COPIES);
    net n(tsr_backend_get_default_buffer_type(vkt::vk()), tsr_backend_cpu_buffer_type());
    REQUIRE(tsr_backend_sched_reserve(sched, n.gf));
    CHECK(tsr_backend_sched_get_n_splits(sched) == 4);
    // o is computed by the last split, on Vulkan: each graph's result is read by a copy
    // queued behind it, the next graph's tokens written at once
    std::vector<std::vector<float>> got(batches.size(), std::vector<float>(8 * 5));
    for (size_t i = 0; i < batches.size(); i++) {
        REQUIRE(tsr_backend_sched_alloc_graph(sched, n.gf));
        n.set_tokens(batches[i]);
        REQUIRE(tsr_backend_sched_graph_compute_async(sched, n.gf) == TSR_STATUS_SUCCESS);
        REQUIRE(tsr_backend_tensor_get_async(vkt::vk(), n.o, got[i].data(), 0, got[i].size() * sizeof(float)));
    }
    tsr_backend_sched_synchronize(sched);
    for (size_t i = 0; i < batches.size(); i++) {
        INFO("graph " << i);
        CHECK(tsrt::nmse(got[i], net_on_cpu(batches[i])) < 1e-6);
    }
}

TEST_CASE("Vulkan device: async caps and events; a graph queued, an event recorded behind it, its result after the event", "[vulkan][device]") {
    VK_OR_SKIP();
    tsr_backend_dev_t dev = tsr_backend_get_device(vkt::vk());
    REQUIRE(dev != nullptr);
    tsr_backend_dev_props props;
    tsr_backend_dev_get_props(dev, &props);
    CHECK(props.caps.async);
    CHECK(props.caps.events);
    tsr_backend_event_t ev = tsr_backend_event_new(dev);
    REQUIRE(ev != nullptr);
    tsr_backend_event_synchronize(ev);   // never recorded: returns at once

    // y = 3 x and z = -0.5 y on 4096 values, queued one after the other (z reads y)
    tsr_context * ctx = tsr_init({8 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
    REQUIRE(ctx != nullptr);
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4096);
    tsr_set_input(x);
    tsr_tensor * y = tsr_scale(ctx, x, 3.0f);
    tsr_tensor * z = tsr_scale(ctx, y, -0.5f);
    tsr_set_output(y);
    tsr_set_output(z);
    tsr_cgraph * g2 = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(g2, z));
    tsr::gallocr ga(tsr_backend_get_default_buffer_type(vkt::vk()));
    REQUIRE(tsr_gallocr_alloc_graph(ga, g2));
    std::vector<float> xs(4096);
    for (size_t i = 0; i < xs.size(); i++) xs[i] = (float) i * 0.25f - 100.0f;
    tsrt::upload(x, xs);
    tsr_cgraph v2 = tsr_graph_view(g2, 1, 2);   // the second scale alone
    tsr_cgraph v1 = tsr_graph_view(g2, 0, 1);
    REQUIRE(tsr_backend_graph_compute_async(vkt::vk(), &v1) == TSR_STATUS_SUCCESS);
    REQUIRE(tsr_backend_event_record(ev, vkt::vk()));
    REQUIRE(tsr_backend_event_wait(tsrt::cpu(), ev));   // the CPU cannot queue: the host waits
    std::vector<float> ys = tsrt::download(y);
    for (size_t i = 0; i < xs.size(); i++) REQUIRE(ys[i] == 3.0f * xs[i]);
    REQUIRE(tsr_backend_graph_compute_async(vkt::vk(), &v2) == TSR_STATUS_SUCCESS);
    REQUIRE(tsr_backend_event_record(ev, vkt::vk()));
    tsr_backend_event_synchronize(ev);
    std::vector<float> zs = tsrt::download(z);
    for (size_t i = 0; i < xs.size(); i++) REQUIRE(zs[i] == -1.5f * xs[i]);
    CHECK_FALSE(tsr_backend_event_record(ev, tsrt::cpu()));
    CHECK(std::string(tsr_last_error()).find("cannot record an event of device") != std::string::npos);
    tsr_backend_event_free(ev);
    tsr_free(ctx);
}

TEST_CASE("Vulkan device: a buffer over host memory is computed on in place, without a copy", "[vulkan][device]") {
    VK_OR_SKIP();
    tsr_backend_dev_t dev = tsr_backend_get_device(vkt::vk());
    tsr_backend_dev_props props;
    tsr_backend_dev_get_props(dev, &props);
    if (!props.caps.buffer_from_host_ptr) {
        CHECK(tsr_backend_dev_buffer_from_host_ptr(dev, &props, sizeof props, 0) == nullptr);
        WARN("skipped: " << tsr_backend_dev_description(dev) << " lacks VK_EXT_external_memory_host: " << tsr_last_error());
        return;
    }
    const size_t bytes = 65536;   // a multiple of any minImportedHostPointerAlignment seen in practice
    float * host = static_cast<float *>(std::aligned_alloc(bytes, bytes));
    REQUIRE(host != nullptr);
    const int n = 1024;
    for (int i = 0; i < n; i++) host[i] = (float) i * 0.5f - 7.0f;
    tsr_backend_buffer_t buf = tsr_backend_dev_buffer_from_host_ptr(dev, host, bytes, 0);
    REQUIRE(buf != nullptr);
    tsr_context * ctx = tsr_init({4 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
    REQUIRE(ctx != nullptr);
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, n);
    tsr_tensor * y = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, n);
    char * base = static_cast<char *>(tsr_backend_buffer_get_base(buf));
    REQUIRE(tsr_backend_tensor_alloc(buf, x, base));
    REQUIRE(tsr_backend_tensor_alloc(buf, y, base + 4 * n * sizeof(float)));   // host[4n ...]
    tsr_cgraph * gf = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(gf, tsr_cpy(ctx, tsr_scale(ctx, x, 2.0f), y)));
    tsr::gallocr ga(tsr_backend_get_default_buffer_type(vkt::vk()));
    REQUIRE(tsr_gallocr_alloc_graph(ga, gf));
    host[5] = 1000.0f;   // after placement: the device must read this memory itself
    REQUIRE(tsr_backend_graph_compute(vkt::vk(), gf) == TSR_STATUS_SUCCESS);
    for (int i = 0; i < n; i++) REQUIRE(host[4 * n + i] == 2.0f * host[i]);   // written in place
    CHECK(host[4 * n + 5] == 2000.0f);
    tsr_free(ctx);
    tsr_backend_buffer_free(buf);

    CHECK(tsr_backend_dev_buffer_from_host_ptr(dev, host + 1, bytes / 2, 0) == nullptr);
    CHECK(std::string(tsr_last_error()).find("minImportedHostPointerAlignment") != std::string::npos);
    std::free(host);
}
