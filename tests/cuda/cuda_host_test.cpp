// CUDA backend: what must hold on every machine (no driver, no GPU included), plus buffer
// behaviour on a device when there is one.
#include "cuda_test_util.h"

#include <cstdint>
#include <string>
#include <vector>

using namespace cudatest;

TEST_CASE("cuda: device count never fails and init agrees with it", "[cuda][host]") {
    const int n = tsr_backend_cuda_get_device_count();
    REQUIRE(n >= 0);
    REQUIRE(n <= TSR_CUDA_MAX_DEVICES);
    tsr_clear_error();
    tsr_backend_t be = tsr_backend_cuda_init(0);
    if (n == 0) {
        REQUIRE(be == nullptr);
        const std::string err = tsr_last_error();
        INFO(err);
        CHECK(err.find("cuda") != std::string::npos);
        CHECK(err.size() > 10);
        char desc[128] = "untouched";
        CHECK_FALSE(tsr_backend_cuda_get_device_description(0, desc, sizeof(desc)));
        size_t f = 1, t = 1;
        CHECK_FALSE(tsr_backend_cuda_get_device_memory(0, &f, &t));
        WARN("no CUDA device here (" << err << "): device parts of these tests skip");
    } else {
        REQUIRE(be != nullptr);
        CHECK(tsr_backend_is_cuda(be));
        CHECK(std::string(tsr_backend_name(be)) == "CUDA0");
        CHECK(tsr_backend_cuda_get_device(be) == 0);
        CHECK(tsr_backend_cuda_get_stream(be) != nullptr);
        char desc[128] = "";
        CHECK(tsr_backend_cuda_get_device_description(0, desc, sizeof(desc)));
        CHECK(std::string(desc).size() > 3);
        size_t f = 0, t = 0;
        CHECK(tsr_backend_cuda_get_device_memory(0, &f, &t));
        CHECK(t >= f);
        CHECK(t > 0);
        tsr_backend_free(be);
    }
}

TEST_CASE("cuda: bad device indices are errors not crashes", "[cuda][host]") {
    for (int dev : {-1, TSR_CUDA_MAX_DEVICES, 1000}) {
        tsr_clear_error();
        CHECK(tsr_backend_cuda_init(dev) == nullptr);
        CHECK(std::string(tsr_last_error()).size() > 0);
        tsr_clear_error();
        CHECK(tsr_backend_cuda_buffer_type(dev) == nullptr);
        CHECK(std::string(tsr_last_error()).find("device") != std::string::npos);
    }
}

TEST_CASE("cuda: buffer type metadata", "[cuda][host]") {
    tsr_backend_buffer_type_t b0 = tsr_backend_cuda_buffer_type(0);
    tsr_backend_buffer_type_t b3 = tsr_backend_cuda_buffer_type(3);
    REQUIRE(b0);
    REQUIRE(b3);
    CHECK(b0 != b3);
    CHECK(b0 == tsr_backend_cuda_buffer_type(0));   // one object per device
    CHECK(std::string(tsr_backend_buft_name(b0)) == "CUDA0");
    CHECK(std::string(tsr_backend_buft_name(b3)) == "CUDA3");
    CHECK(tsr_backend_buft_get_alignment(b0) == 256);
    CHECK(tsr_backend_buft_get_max_size(b0) == SIZE_MAX);
    CHECK_FALSE(tsr_backend_buft_is_host(b0));
    CHECK(tsr_backend_buft_is_cuda(b0));

    tsr_backend_buffer_type_t h = tsr_backend_cuda_host_buffer_type();
    REQUIRE(h);
    CHECK(std::string(tsr_backend_buft_name(h)) == "CUDA_Host");
    CHECK(tsr_backend_buft_is_host(h));
    CHECK(tsr_backend_buft_is_cuda(h));
    CHECK_FALSE(tsr_backend_buft_is_cuda(tsr_backend_cpu_buffer_type()));
    CHECK_FALSE(tsr_backend_buft_is_cuda(nullptr));

    // alloc_size of a tensor is its byte size
    tsr_context * ctx = tsr_init({4 * tsr_tensor_overhead(), nullptr, true});
    REQUIRE(ctx);
    tsr_tensor * t = tsr_new_tensor_2d(ctx, TSR_TYPE_Q4_0, 64, 3);
    CHECK(tsr_backend_buft_get_alloc_size(b0, t) == tsr_nbytes(t));
    tsr_free(ctx);
}

TEST_CASE("cuda: options and queries reject backends that are not CUDA", "[cuda][host]") {
    CHECK_FALSE(tsr_backend_is_cuda(nullptr));
    CHECK_FALSE(tsr_backend_cuda_set_allow_tf32(nullptr, true));
    CHECK_FALSE(tsr_backend_cuda_set_graph_capture(nullptr, true));
    CHECK(tsr_backend_cuda_get_device(nullptr) == -1);
    CHECK(tsr_backend_cuda_get_stream(nullptr) == nullptr);
    tsr_cuda_stats st;
    CHECK_FALSE(tsr_backend_cuda_get_stats(nullptr, &st));
    tsr_backend_t c = cpu();
    REQUIRE(c);
    CHECK_FALSE(tsr_backend_is_cuda(c));
    tsr_clear_error();
    CHECK_FALSE(tsr_backend_cuda_set_allow_tf32(c, true));
    CHECK(std::string(tsr_last_error()).find("not CUDA") != std::string::npos);
}

TEST_CASE("cuda: buffers fail with the CUDA error without a device and round-trip with one", "[cuda][host]") {
    tsr_backend_buffer_type_t b0 = tsr_backend_cuda_buffer_type(0);
    tsr_backend_buffer_type_t h = tsr_backend_cuda_host_buffer_type();
    if (tsr_backend_cuda_get_device_count() == 0) {
        tsr_clear_error();
        CHECK(tsr_backend_buft_alloc_buffer(b0, 1024) == nullptr);
        CHECK(std::string(tsr_last_error()).find("cudaMalloc") != std::string::npos);
        tsr_clear_error();
        CHECK(tsr_backend_buft_alloc_buffer(h, 1024) == nullptr);
        CHECK(std::string(tsr_last_error()).find("cudaMallocHost") != std::string::npos);
        WARN("skipped: device buffer round trips (no CUDA device)");
        return;
    }
    for (tsr_backend_buffer_type_t bt : {b0, h}) {
        INFO(tsr_backend_buft_name(bt));
        tsr_context * ctx = tsr_init({4 * tsr_tensor_overhead(), nullptr, true});
        REQUIRE(ctx);
        tsr_tensor * t = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 1000);
        tsr_tensor * u = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 1000);
        tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors_from_buft(ctx, bt);
        REQUIRE(buf);
        CHECK(tsr_backend_buffer_get_size(buf) >= 2 * 4000);
        CHECK(((uintptr_t) t->data % 256) == 0);
        std::vector<float> x(1000), y(1000, 0.0f);
        for (int i = 0; i < 1000; ++i) x[i] = 0.5f * (float) i - 7.0f;
        REQUIRE(tsr_backend_tensor_set(t, x.data(), 0, 4000));
        REQUIRE(tsr_backend_tensor_get(t, y.data(), 0, 4000));
        CHECK(x == y);
        // partial set at an offset
        const float seven[3] = {7, 7, 7};
        REQUIRE(tsr_backend_tensor_set(t, seven, 40, 12));
        REQUIRE(tsr_backend_tensor_get(t, y.data(), 0, 4000));
        CHECK(y[9] == -2.5f);
        CHECK(y[10] == 7.0f);
        CHECK(y[12] == 7.0f);
        CHECK(y[13] == -0.5f);
        // tensor copy within the buffer type
        REQUIRE(tsr_backend_tensor_copy(t, u));
        std::vector<float> z(1000);
        REQUIRE(tsr_backend_tensor_get(u, z.data(), 0, 4000));
        CHECK(z == y);
        // memset and clear
        REQUIRE(tsr_backend_tensor_memset(u, 0, 0, 4000));
        REQUIRE(tsr_backend_tensor_get(u, z.data(), 0, 4000));
        CHECK(z == std::vector<float>(1000, 0.0f));
        tsr_backend_buffer_clear(buf, 0);
        REQUIRE(tsr_backend_tensor_get(t, z.data(), 0, 4000));
        CHECK(z == std::vector<float>(1000, 0.0f));
        tsr_backend_buffer_free(buf);
        tsr_free(ctx);
    }
}

TEST_CASE("cuda: async set/get on the backend stream", "[cuda][device]") {
    CUDA_OR_SKIP(be);
    tsr_context * ctx = tsr_init({2 * tsr_tensor_overhead(), nullptr, true});
    REQUIRE(ctx);
    tsr_tensor * t = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4096);
    tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors(ctx, be);
    REQUIRE(buf);
    std::vector<float> x(4096), y(4096);
    for (int i = 0; i < 4096; ++i) x[i] = (float) (i * 3 % 17);
    REQUIRE(tsr_backend_tensor_set_async(be, t, x.data(), 0, x.size() * 4));
    REQUIRE(tsr_backend_tensor_get_async(be, t, y.data(), 0, y.size() * 4));
    tsr_backend_synchronize(be);
    CHECK(x == y);
    tsr_backend_buffer_free(buf);
    tsr_free(ctx);
}

TEST_CASE("cuda: the registry lists the CUDA devices (none without a GPU)", "[cuda][host][device]") {
    tsr_backend_reg_t reg = tsr_backend_reg_by_name("CUDA");
    REQUIRE(reg == tsr_backend_cuda_reg());   // registered although this program may name no CUDA call
    const int n = tsr_backend_cuda_get_device_count();
    REQUIRE(tsr_backend_reg_dev_count(reg) == (size_t) n);
    if (n == 0) {
        CHECK(tsr_backend_init_by_name("cuda", nullptr) == nullptr);
        CHECK(std::string(tsr_last_error()).find("has no device") != std::string::npos);
        CHECK(tsr_backend_dev_by_name("CUDA0") == nullptr);
        WARN("no CUDA device here: the device part of this test skips");
        return;
    }
    for (int i = 0; i < n; ++i) {
        tsr_backend_dev_t dev = tsr_backend_reg_dev_get(reg, (size_t) i);
        REQUIRE(dev != nullptr);
        CHECK(std::string(tsr_backend_dev_name(dev)) == "CUDA" + std::to_string(i));
        CHECK(tsr_backend_dev_type(dev) == TSR_BACKEND_DEVICE_TYPE_GPU);
        CHECK(tsr_backend_dev_buffer_type(dev) == tsr_backend_cuda_buffer_type(i));
        CHECK(tsr_backend_dev_host_buffer_type(dev) == tsr_backend_cuda_host_buffer_type());
        size_t f = 0, t = 0, f_cuda = 0, t_cuda = 0;
        tsr_backend_dev_memory(dev, &f, &t);
        REQUIRE(tsr_backend_cuda_get_device_memory(i, &f_cuda, &t_cuda));
        CHECK(t == t_cuda);
    }
    tsr_backend_t be = tsr_backend_init_by_name("CUDA0", nullptr);
    REQUIRE(be != nullptr);
    CHECK(tsr_backend_is_cuda(be));
    CHECK(tsr_backend_get_device(be) == tsr_backend_dev_by_name("cuda0"));
    // params through the registry: graph_capture=0|1, anything else an error naming them
    CHECK(tsr_backend_init_by_name("CUDA0", "graph_capture=2") == nullptr);
    CHECK(std::string(tsr_last_error()).find("graph_capture=0|1") != std::string::npos);
    tsr_backend_t cap = tsr_backend_init_by_name("CUDA0", "graph_capture=1");
    REQUIRE(cap != nullptr);
    {   // a graph computed three times: launched, captured, replayed, each with the op's result
        tsr_context * ctx = tsr_init({3 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
        REQUIRE(ctx);
        tsr_tensor * a = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 1000);
        tsr_tensor * y = tsr_scale(ctx, a, 2.0f);
        tsr_cgraph * gf = tsr_new_graph(ctx);
        REQUIRE(tsr_build_forward_expand(gf, y));
        tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors(ctx, cap);
        REQUIRE(buf);
        tsr_cuda_stats st0 = {}, st1 = {};
        REQUIRE(tsr_backend_cuda_get_stats(cap, &st0));
        std::vector<float> x(1000), got(1000);
        for (int r = 0; r < 3; ++r) {
            for (int i = 0; i < 1000; ++i) x[(size_t) i] = (float) (i % 13 + r);
            REQUIRE(tsr_backend_tensor_set(a, x.data(), 0, x.size() * 4));
            REQUIRE(tsr_backend_graph_compute(cap, gf) == TSR_STATUS_SUCCESS);
            REQUIRE(tsr_backend_tensor_get(y, got.data(), 0, got.size() * 4));
            for (int i = 0; i < 1000; ++i) REQUIRE(got[(size_t) i] == 2.0f * x[(size_t) i]);
        }
        REQUIRE(tsr_backend_cuda_get_stats(cap, &st1));
        CHECK(st1.graph_captures - st0.graph_captures == 1);
        CHECK(st1.graph_replays - st0.graph_replays == 1);
        tsr_backend_buffer_free(buf);
        tsr_free(ctx);
    }
    tsr_backend_free(cap);
    tsr_backend_t best = tsr_backend_init_best();   // a GPU is there: the best is a GPU device
    REQUIRE(best != nullptr);
    CHECK(tsr_backend_dev_type(tsr_backend_get_device(best)) == TSR_BACKEND_DEVICE_TYPE_GPU);
    tsr_backend_free(best);
    tsr_backend_free(be);
}
