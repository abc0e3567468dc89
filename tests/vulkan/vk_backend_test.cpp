// The Vulkan backend itself: devices, buffers and memory, transfers, errors, large tensors.
#include "vk_util.h"

#include <cstdlib>

TEST_CASE("vulkan devices are listed and described", "[vulkan][device]") {
    int n = tsr_backend_vk_get_device_count();
    if (n == 0) {
        WARN("skipped: no Vulkan device: " << tsr_last_error());
        CHECK(tsr_backend_vk_init(-1) == nullptr);
        CHECK(std::string(tsr_last_error()).size() > 0);
        return;
    }
    for (int i = 0; i < n; i++) {
        char desc[256] = {0};
        REQUIRE(tsr_backend_vk_get_device_description(i, desc, sizeof desc));
        CHECK(strlen(desc) > 0);
        size_t free_b = 0, total = 0;
        REQUIRE(tsr_backend_vk_get_device_memory(i, &free_b, &total));
        CHECK(total > 0);
    }
    CHECK(tsr_backend_vk_default_device() >= 0);
    CHECK_FALSE(tsr_backend_vk_get_device_description(n, nullptr, 0));
    // TSR_VULKAN_DEVICE selects the default device; a bad value is an error naming it
    setenv("TSR_VULKAN_DEVICE", std::to_string(n - 1).c_str(), 1);
    CHECK(tsr_backend_vk_default_device() == n - 1);
    setenv("TSR_VULKAN_DEVICE", "99", 1);
    CHECK(tsr_backend_vk_default_device() == -1);
    CHECK(std::string(tsr_last_error()).find("TSR_VULKAN_DEVICE='99'") != std::string::npos);
    CHECK(tsr_backend_vk_init(-1) == nullptr);
    unsetenv("TSR_VULKAN_DEVICE");
    // an out-of-range index: NULL and a message naming the numbers
    CHECK(tsr_backend_vk_init(n + 3) == nullptr);
    CHECK(std::string(tsr_last_error()).find("out of range") != std::string::npos);
}

// Regression (issue 15, item 7): -1 means "the default device"; other negative indices are
// an error naming the index, whether or not a device exists.
TEST_CASE("vulkan init rejects negative device indices other than -1", "[vulkan][device][error]") {
    for (int bad : {-2, -100}) {
        tsr_clear_error();
        CHECK(tsr_backend_vk_init(bad) == nullptr);
        CHECK_THAT(std::string(tsr_last_error()), Catch::Matchers::Contains("device index " + std::to_string(bad)));
    }
}

TEST_CASE("vulkan backend and buffer type identify themselves", "[vulkan][device]") {
    VK_OR_SKIP();
    tsr_backend_t be = vkt::vk();
    CHECK(tsr_backend_is_vk(be));
    CHECK_FALSE(tsr_backend_is_vk(vkt::cpu()));
    tsr_backend_buffer_type_t buft = tsr_backend_get_default_buffer_type(be);
    REQUIRE(buft);
    CHECK(tsr_backend_buft_is_vk(buft));
    CHECK_FALSE(tsr_backend_buft_is_host(buft));
    CHECK(std::string(tsr_backend_buft_name(buft)).rfind("Vulkan", 0) == 0);
    size_t align = tsr_backend_buft_get_alignment(buft);
    CHECK(align >= 16);
    CHECK((align & (align - 1)) == 0);
    CHECK(tsr_backend_buft_get_max_size(buft) >= (size_t(128) << 20));
    CHECK(tsr_backend_supports_buft(be, buft));
    CHECK_FALSE(tsr_backend_supports_buft(be, tsr_backend_cpu_buffer_type()));
}

TEST_CASE("vulkan allocation failure is reported, nothing half-allocated", "[vulkan][memory]") {
    VK_OR_SKIP();
    tsr_backend_buffer_type_t buft = tsr_backend_get_default_buffer_type(vkt::vk());
    tsr_clear_error();
    tsr_backend_buffer_t b = tsr_backend_buft_alloc_buffer(buft, size_t(1) << 50);
    CHECK(b == nullptr);
    std::string err = tsr_last_error();
    INFO(err);
    CHECK(err.find("Vulkan") != std::string::npos);
    CHECK(err.find("1125899906842624") != std::string::npos);
    // the device still works afterwards
    tsr_backend_buffer_t ok = tsr_backend_buft_alloc_buffer(buft, 4096);
    CHECK(ok != nullptr);
    tsr_backend_buffer_free(ok);
}

static void roundtrip(tsr_backend_t be, size_t n_floats, const char * what) {
    INFO(what);
    tsr_init_params ip{4 * tsr_tensor_overhead(), nullptr, true};
    tsr_context * ctx = tsr_init(ip);
    tsr_tensor * t = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, static_cast<int64_t>(n_floats));
    tsr_tensor * u = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, static_cast<int64_t>(n_floats));
    tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors(ctx, be);
    REQUIRE(buf);
    std::vector<float> in(n_floats), out(n_floats, -1.0f);
    for (size_t i = 0; i < n_floats; i++) in[i] = static_cast<float>(i) * 0.5f - 3.0f;
    REQUIRE(tsr_backend_tensor_set(t, in.data(), 0, n_floats * 4));
    REQUIRE(tsr_backend_tensor_get(t, out.data(), 0, n_floats * 4));
    CHECK(in == out);
    // partial, unaligned set/get
    float v[3] = {7.0f, 8.0f, 9.0f};
    REQUIRE(tsr_backend_tensor_set(t, v, 4 * 5, sizeof v));
    float w[5] = {0};
    REQUIRE(tsr_backend_tensor_get(t, w, 4 * 4, sizeof w));
    CHECK(w[0] == in[4]);
    CHECK(w[1] == 7.0f);
    CHECK(w[3] == 9.0f);
    CHECK(w[4] == in[8]);
    // memset on odd byte ranges
    REQUIRE(tsr_backend_tensor_memset(t, 0, 3, 10));
    uint8_t bytes[16];
    REQUIRE(tsr_backend_tensor_get(t, bytes, 0, 16));
    const uint8_t * src = reinterpret_cast<const uint8_t *>(in.data());
    for (int i = 0; i < 16; i++) {
        if (i >= 3 && i < 13) CHECK(bytes[i] == 0);
        else if (i >= 20 || i < 3) CHECK(bytes[i] == src[i]);
    }
    // device-to-device copy
    REQUIRE(tsr_backend_tensor_copy(t, u));
    std::vector<float> out2(n_floats);
    REQUIRE(tsr_backend_tensor_get(u, out2.data(), 0, n_floats * 4));
    REQUIRE(tsr_backend_tensor_get(t, out.data(), 0, n_floats * 4));
    CHECK(out == out2);
    // out-of-range access is an error, not a crash
    CHECK_FALSE(tsr_backend_tensor_set(t, in.data(), 4, n_floats * 4));
    tsr_backend_buffer_free(buf);
    tsr_free(ctx);
}

TEST_CASE("vulkan tensor_set/get/memset/copy through unified memory and staging", "[vulkan][memory]") {
    VK_OR_SKIP();
    roundtrip(vkt::vk(), 1000, "default path");
    roundtrip(vkt::vk(), (size_t(40) << 20) / 4, "40 MiB (several staging chunks)");
    setenv("TSR_VULKAN_NO_UNIFIED", "1", 1);
    roundtrip(vkt::vk(), 1000, "staging path");
    roundtrip(vkt::vk(), (size_t(40) << 20) / 4, "staging path, 40 MiB");
    unsetenv("TSR_VULKAN_NO_UNIFIED");
}

TEST_CASE("vulkan tensors above maxStorageBufferRange (130 MiB) compute correctly", "[vulkan][large]") {
    VK_OR_SKIP();
    const uint32_t seed = 1234, seed1 = seed + 7919u;  // run() seeds input i with seed + 7919 * i
    // lavapipe's limit is 128 MiB; GPUs' (NVIDIA: 4 GiB) run these tensors whole
    tsr_vk_memory_stats ms{};
    REQUIRE(tsr_backend_vk_get_memory_stats(-1, &ms));
    const bool splits = ms.max_range < (size_t(130) << 20);
    if (!splits) WARN("maxStorageBufferRange " << ms.max_range << " bytes: these tensors fit whole, no window split to check");
    // F32 [4096, 8320] = 130 MiB: elementwise ops split into row windows
    {
        const int64_t ne0 = 4096, ne1 = 8320;
        vkt::result r = vkt::run(vkt::vk(), [&](tsr_context * ctx, vkt::graph_inputs & d) {
            tsr_tensor * a = d.add_pattern(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, ne0, ne1));
            tsr_tensor * b = d.add_pattern(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, ne0));
            return tsr_add(ctx, tsr_scale(ctx, a, 0.5f), b);
        }, seed);
        INFO(r.error);
        REQUIRE(r.ok);
        if (splits) CHECK(r.stats.n_dispatches > 2);  // split into windows
        size_t bad = 0;
        for (size_t i = 0; i < r.out.size(); i++) {
            float want = vkt::pattern_value(i, seed) * 0.5f + vkt::pattern_value(i % ne0, seed1);
            if (std::fabs(r.out[i] - want) > 1e-6f) {
                if (bad < 5) WARN("index " << i << " row " << i / ne0 << " got " << r.out[i] << " want " << want);
                bad++;
            }
        }
        CHECK(bad == 0);
    }
    // F16 weight [4096, 16640] = 130 MiB: mul_mat (vector path) and get_rows split by rows;
    // checked on the host for rows on both sides of the 128 MiB boundary (row 16384)
    {
        const int64_t K = 4096, M = 16640;
        const std::vector<int32_t> idx = {0, 16639, 8000, 16383, 16384, 12345};
        vkt::result r = vkt::run(vkt::vk(), [&](tsr_context * ctx, vkt::graph_inputs & d) {
            tsr_tensor * w = d.add_pattern(tsr_new_tensor_2d(ctx, TSR_TYPE_F16, K, M));
            tsr_tensor * x = d.add_pattern(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, K, 2));
            tsr_tensor * ix = d.add_i32(tsr_new_tensor_1d(ctx, TSR_TYPE_I32, static_cast<int64_t>(idx.size())), idx);
            tsr_tensor * y = tsr_mul_mat(ctx, w, x);   // [M, 2]
            tsr_tensor * rows = tsr_get_rows(ctx, w, ix);   // [K, 6]
            return tsr_concat(ctx, tsr_reshape_1d(ctx, y, M * 2), tsr_reshape_1d(ctx, rows, K * static_cast<int64_t>(idx.size())), 0);
        }, seed);
        INFO(r.error);
        REQUIRE(r.ok);
        REQUIRE(r.out.size() == static_cast<size_t>(M * 2 + K * static_cast<int64_t>(idx.size())));
        auto wval = [&](int64_t k, int64_t m) { return tsr_fp16_to_fp32(tsr_fp32_to_fp16(vkt::pattern_value(static_cast<uint64_t>(m * K + k), seed))); };
        std::vector<int64_t> check_rows = {0, 1, 4095, 8191, 16382, 16383, 16384, 16385, 16639};
        for (int64_t m = 37; m < M; m += 997) check_rows.push_back(m);
        double num = 0.0, den = 0.0;
        for (int64_t m : check_rows) {
            for (int64_t n = 0; n < 2; n++) {
                double acc = 0.0;
                for (int64_t k = 0; k < K; k++) acc += static_cast<double>(wval(k, m)) * vkt::pattern_value(static_cast<uint64_t>(n * K + k), seed1);
                double got = r.out[static_cast<size_t>(n * M + m)];
                num += (got - acc) * (got - acc);
                den += acc * acc;
            }
        }
        INFO("mul_mat nmse over " << check_rows.size() << " rows: " << num / den);
        CHECK(num / den < 1e-9);
        size_t bad = 0;
        for (size_t j = 0; j < idx.size(); j++)
            for (int64_t k = 0; k < K; k++)
                if (r.out[static_cast<size_t>(M * 2 + static_cast<int64_t>(j) * K + k)] != wval(k, idx[j])) bad++;
        CHECK(bad == 0);
    }
}

TEST_CASE("vulkan small buffers share memory blocks, freed blocks go back", "[vulkan][memory]") {
    VK_OR_SKIP();
    tsr_backend_buffer_type_t buft = tsr_backend_get_default_buffer_type(vkt::vk());
    const int dev = tsr_backend_vk_default_device();
    tsr_vk_memory_stats before{}, during{}, after{};
    REQUIRE(tsr_backend_vk_get_memory_stats(dev, &before));
    REQUIRE(before.block_size > 0);
    const size_t n = 40, size = 300 * 1024 + 12;  // odd sizes, below block_size / 4
    REQUIRE(size <= before.block_size / 4);
    std::vector<tsr_backend_buffer_t> bufs;
    for (size_t i = 0; i < n; i++) {
        tsr_backend_buffer_t b = tsr_backend_buft_alloc_buffer(buft, size);
        REQUIRE(b);
        bufs.push_back(b);
    }
    REQUIRE(tsr_backend_vk_get_memory_stats(dev, &during));
    CHECK(during.n_regions == before.n_regions + n);
    CHECK(during.n_blocks <= before.n_blocks + (n * size) / before.block_size + 1);
    CHECK(during.n_dedicated == before.n_dedicated);
    // every buffer holds its own data (regions do not overlap)
    tsr_init_params ip{n * tsr_tensor_overhead(), nullptr, true};
    tsr_context * ctx = tsr_init(ip);
    std::vector<tsr_tensor *> ts;
    for (size_t i = 0; i < n; i++) {
        tsr_tensor * t = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, static_cast<int64_t>(size / 4));
        REQUIRE(tsr_backend_tensor_alloc(bufs[i], t, tsr_backend_buffer_get_base(bufs[i])));
        std::vector<float> v(size / 4, static_cast<float>(i));
        REQUIRE(tsr_backend_tensor_set(t, v.data(), 0, v.size() * 4));
        ts.push_back(t);
    }
    for (size_t i = 0; i < n; i++) {
        std::vector<float> v(size / 4);
        REQUIRE(tsr_backend_tensor_get(ts[i], v.data(), 0, v.size() * 4));
        CHECK(v.front() == static_cast<float>(i));
        CHECK(v.back() == static_cast<float>(i));
    }
    tsr_free(ctx);
    for (auto b : bufs) tsr_backend_buffer_free(b);
    REQUIRE(tsr_backend_vk_get_memory_stats(dev, &after));
    CHECK(after.n_regions == before.n_regions);
    CHECK(after.n_blocks <= before.n_blocks);
    // a large buffer gets its own allocation
    tsr_backend_buffer_t big = tsr_backend_buft_alloc_buffer(buft, before.block_size / 2);
    REQUIRE(big);
    REQUIRE(tsr_backend_vk_get_memory_stats(dev, &during));
    CHECK(during.n_dedicated == before.n_dedicated + 1);
    tsr_backend_buffer_free(big);
}

// ---- the device layer: Vulkan devices in the registry ------------------------------------

namespace {

tsr_tensor * build_small_block(tsr_context * ctx, tsrt::graph_inputs & in) {
    tsr_tensor * w = in.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F16, 64, 48));
    tsr_tensor * x = in.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 64, 5));
    tsr_tensor * g = in.add(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 48));
    return tsr_mul(ctx, tsr_rms_norm(ctx, tsr_silu(ctx, tsr_mul_mat(ctx, w, x)), 1e-5f), g);
}

} // namespace

TEST_CASE("registry: Vulkan devices are listed with their Vulkan properties", "[vulkan][device][registry]") {
    tsr_backend_reg_t reg = tsr_backend_reg_by_name("Vulkan");
    REQUIRE(reg == tsr_backend_vk_reg());
    const int n = tsr_backend_vk_get_device_count();
    REQUIRE(tsr_backend_reg_dev_count(reg) == (size_t) n);
    CHECK(tsr_backend_reg_get(0) == tsr_backend_cpu_reg());   // the CPU kind first
    if (n == 0) { WARN("skipped: no Vulkan device: " << tsr_last_error()); return; }
    CHECK(tsr_backend_dev_count() >= 1 + (size_t) n);
    // the kind's first device is the default one; every index is there once, by name
    const int def = tsr_backend_vk_default_device();
    REQUIRE(def >= 0);
    CHECK(std::string(tsr_backend_dev_name(tsr_backend_reg_dev_get(reg, 0))) == "Vulkan" + std::to_string(def));
    for (int i = 0; i < n; i++) {
        const std::string name = "Vulkan" + std::to_string(i);
        tsr_backend_dev_t dev = tsr_backend_dev_by_name(name.c_str());
        REQUIRE(dev != nullptr);
        CHECK(tsr_backend_dev_backend_reg(dev) == reg);
        char desc[256] = {0};
        REQUIRE(tsr_backend_vk_get_device_description(i, desc, sizeof desc));
        CHECK(std::string(tsr_backend_dev_description(dev)) == desc);
        size_t free_vk = 0, total_vk = 0, free_b = 0, total_b = 0;
        REQUIRE(tsr_backend_vk_get_device_memory(i, &free_vk, &total_vk));
        tsr_backend_dev_memory(dev, &free_b, &total_b);
        CHECK(total_b == total_vk);
        CHECK(free_b == free_vk);
        // a Vulkan implementation on the CPU (lavapipe: "[cpu]") is a CPU device
        const bool on_cpu = std::string(desc).find("[cpu]") != std::string::npos;
        CHECK(tsr_backend_dev_type(dev) == (on_cpu ? TSR_BACKEND_DEVICE_TYPE_CPU : TSR_BACKEND_DEVICE_TYPE_GPU));
        CHECK(tsr_backend_dev_buffer_type(dev) == tsr_backend_vk_buffer_type(i));
        CHECK(tsr_backend_dev_supports_buft(dev, tsr_backend_vk_buffer_type(i)));
        CHECK_FALSE(tsr_backend_dev_supports_buft(dev, tsr_backend_cpu_buffer_type()));
    }
    // the CPU backend stays the first CPU device, ahead of lavapipe
    CHECK(tsr_backend_dev_by_type(TSR_BACKEND_DEVICE_TYPE_CPU) == tsr_backend_dev_by_name("CPU"));
}

TEST_CASE("registry: a Vulkan backend by name computes like the CPU backend", "[vulkan][device][registry]") {
    VK_OR_SKIP();
    const std::string name = "Vulkan" + std::to_string(tsr_backend_vk_default_device());
    for (const char * asked : {name.c_str(), "vulkan"}) {
        CAPTURE(asked);
        tsr_backend_t be = tsr_backend_init_by_name(asked, nullptr);
        REQUIRE(be != nullptr);
        CHECK(tsr_backend_is_vk(be));
        CHECK(tsr_backend_get_device(be) == tsr_backend_dev_by_name(name.c_str()));
        tsrt::compare_backends(be, vkt::cpu(), build_small_block, 1e-5);
        tsr_backend_free(be);
    }
    // tsr_backend_vk_init's backends know their device too
    CHECK(tsr_backend_get_device(vkt::vk()) == tsr_backend_dev_by_name(name.c_str()));
    CHECK(tsr_backend_init_by_name(name.c_str(), "n_threads=2") == nullptr);   // Vulkan takes no params
    CHECK_THAT(std::string(tsr_last_error()), Catch::Matchers::Contains("'n_threads=2'"));
    CHECK(tsr_backend_init_by_name("Vulkan99", nullptr) == nullptr);
    CHECK_THAT(std::string(tsr_last_error()), Catch::Matchers::Contains("'Vulkan99'"));
}

TEST_CASE("registry: Vulkan supports_op through the device equals the backend's", "[vulkan][device][registry]") {
    VK_OR_SKIP();
    tsr_backend_t be = vkt::vk();
    tsr_backend_dev_t dev = tsr_backend_get_device(be);
    REQUIRE(dev != nullptr);
    tsr_init_params p = {64 * tsr_tensor_overhead(), nullptr, true};
    tsr_context * ctx = tsr_init(p);
    REQUIRE(ctx);
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 256, 40);
    tsr_tensor * w16 = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, 256, 8);
    tsr_tensor * w4k = tsr_new_tensor_2d(ctx, TSR_TYPE_Q4_K, 256, 8);   // a type Vulkan refuses
    tsr_tensor * i32 = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 4);
    int n_supported = 0, n_refused = 0;
    for (tsr_tensor * op : {tsr_mul_mat(ctx, w16, a), tsr_mul_mat(ctx, w4k, a), tsr_get_rows(ctx, w16, i32),
                            tsr_get_rows(ctx, w4k, i32), tsr_soft_max_ext(ctx, a, nullptr, 1.0f, 0.0f),
                            tsr_argsort(ctx, a, TSR_SORT_ORDER_ASC), tsr_rms_norm(ctx, a, 1e-5f)}) {
        REQUIRE(op != nullptr);
        CAPTURE(tsrt::node_signature(op));
        const bool by_backend = tsr_backend_supports_op(be, op);
        CHECK(tsr_backend_dev_supports_op(dev, op) == by_backend);
        (by_backend ? n_supported : n_refused)++;
        // offload: only ops it runs, from a batch of 32 rows (40 here), never GET_ROWS
        CHECK(tsr_backend_dev_offload_op(dev, op) == (by_backend && op->op != TSR_OP_GET_ROWS));
    }
    CHECK(n_supported > 0);
    CHECK(n_refused > 0);
    tsr_free(ctx);
}
