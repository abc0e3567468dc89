// The device layer and the registry with the CPU backend: what the CPU device reports
// (against /proc/meminfo), backends made through the registry computing a small graph
// against a double-precision reference, errors for unknown names and bad params, and the
// API-version check on registration (a backend writer's test: it fills a reg itself).
#include "cpu_test_util.h"

#include "tessera/backend_impl.h"

#include <fstream>
#include <sstream>

using namespace cput;

namespace {

// MemTotal of /proc/meminfo in bytes (0 when the file is absent: not Linux).
size_t proc_mem_total() {
    std::ifstream f("/proc/meminfo");
    std::string line;
    while (std::getline(f, line)) {
        std::istringstream in(line);
        std::string key;
        unsigned long long kb = 0;
        if (in >> key >> kb && key == "MemTotal:") return (size_t) kb * 1024;
    }
    return 0;
}

// y = W x + b for W 5x3, x 3x2 (columns), with values small enough to check by hand.
const std::vector<float> kW = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};   // 5 rows of 3
const std::vector<float> kX = {0.5f, -1, 2, 3, 0.25f, -0.75f};                         // 2 columns of 3
const std::vector<float> kB = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};

tsr_tensor * build_affine(tsr_context * ctx, graph_inputs & in) {
    tsr_tensor * W = in.add_values(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 3, 5), kW);
    tsr_tensor * x = in.add_values(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 3, 2), kX);
    tsr_tensor * b = in.add_values(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 5), kB);
    return tsr_add(ctx, tsr_mul_mat(ctx, W, x), b);
}

std::vector<double> affine_reference() {
    std::vector<double> y;
    for (int c = 0; c < 2; ++c)
        for (int r = 0; r < 5; ++r) {
            double s = kB[(size_t) r];
            for (int k = 0; k < 3; ++k) s += (double) kW[(size_t) (r * 3 + k)] * kX[(size_t) (c * 3 + k)];
            y.push_back(s);
        }
    return y;
}

// The backend computes y = W x + b exactly (small integers and quarters: no rounding).
void check_computes_affine(tsr_backend_t be) {
    REQUIRE(be != nullptr);
    run_result r = run_graph(be, build_affine);
    REQUIRE(r.ok);
    const std::vector<double> ref = affine_reference();
    REQUIRE(r.out.size() == ref.size());
    for (size_t i = 0; i < ref.size(); ++i) CHECK(r.out[i] == Approx(ref[i]).epsilon(1e-6));
}

bool error_mentions(const char * what) { return std::string(tsr_last_error()).find(what) != std::string::npos; }

const char * fake_name(tsr_backend_reg_t) { return "FakeNoDevices"; }
size_t fake_count(tsr_backend_reg_t) { return 0; }
tsr_backend_dev_t fake_device(tsr_backend_reg_t, size_t) { return nullptr; }

tsr_backend_reg fake_reg(int api_version) {
    tsr_backend_reg r = {};
    r.api_version = api_version;
    r.iface.get_name = fake_name;
    r.iface.get_device_count = fake_count;
    r.iface.get_device = fake_device;
    return r;
}

} // namespace

TEST_CASE("registry: the CPU device and its properties", "[cpu][device]") {
    REQUIRE(tsr_backend_reg_count() >= 1);
    tsr_backend_reg_t reg = tsr_backend_reg_get(0);  // the CPU kind comes first
    REQUIRE(reg == tsr_backend_cpu_reg());
    CHECK(std::string(tsr_backend_reg_name(reg)) == "CPU");
    CHECK(tsr_backend_reg_by_name("cpu") == reg);
    REQUIRE(tsr_backend_reg_dev_count(reg) == 1);

    tsr_backend_dev_t dev = tsr_backend_reg_dev_get(reg, 0);
    REQUIRE(dev != nullptr);
    CHECK(tsr_backend_dev_get(0) == dev);
    CHECK(tsr_backend_dev_by_name("CPU") == dev);
    CHECK(tsr_backend_dev_by_type(TSR_BACKEND_DEVICE_TYPE_CPU) == dev);
    CHECK(tsr_backend_dev_backend_reg(dev) == reg);
    CHECK(tsr_backend_dev_type(dev) == TSR_BACKEND_DEVICE_TYPE_CPU);
    CHECK(std::string(tsr_backend_dev_name(dev)) == "CPU");
    CHECK(std::string(tsr_backend_dev_description(dev)).size() > 0);

    size_t free_b = 0, total_b = 0;
    tsr_backend_dev_memory(dev, &free_b, &total_b);
    const size_t mem_total = proc_mem_total();
    if (mem_total > 0) CHECK(total_b == mem_total);
    else WARN("no /proc/meminfo: the total is not checked against it");
    CHECK(free_b > 0);
    CHECK(free_b <= total_b);

    tsr_backend_dev_props props;
    tsr_backend_dev_get_props(dev, &props);
    CHECK(std::string(props.name) == "CPU");
    CHECK(std::string(props.description) == tsr_backend_dev_description(dev));
    CHECK(props.memory_total == total_b);
    CHECK(props.type == TSR_BACKEND_DEVICE_TYPE_CPU);

    CHECK(tsr_backend_dev_buffer_type(dev) == tsr_backend_cpu_buffer_type());
    CHECK(tsr_backend_dev_host_buffer_type(dev) == nullptr);
    CHECK(tsr_backend_dev_supports_buft(dev, tsr_backend_cpu_buffer_type()));
    tsr_backend_dev_t count_check = tsr_backend_dev_get(tsr_backend_dev_count());
    CHECK(count_check == nullptr);
    CHECK(error_mentions("tsr_backend_dev_get"));
}

TEST_CASE("registry: init by name, by type and best give working CPU backends", "[cpu][device]") {
    tsr_backend_dev_t dev = tsr_backend_dev_by_name("CPU");
    REQUIRE(dev != nullptr);
    tsr_backend_t by_name = tsr_backend_init_by_name("cpu", nullptr);
    tsr_backend_t by_type = tsr_backend_init_by_type(TSR_BACKEND_DEVICE_TYPE_CPU, "");
    tsr_backend_t by_dev = tsr_backend_dev_init(dev, "n_threads=3");
    for (tsr_backend_t be : {by_name, by_type, by_dev}) {
        REQUIRE(be != nullptr);
        CHECK(tsr_backend_is_cpu(be));
        CHECK(tsr_backend_get_device(be) == dev);
        check_computes_affine(be);
    }
    CHECK(tsr_backend_cpu_get_n_threads(by_dev) == 3);
    for (tsr_backend_t be : {by_name, by_type, by_dev}) tsr_backend_free(be);

    // the best device: a GPU when one is registered, else the CPU device
    tsr_backend_t best = tsr_backend_init_best();
    REQUIRE(best != nullptr);
    tsr_backend_dev_t best_dev = tsr_backend_get_device(best);
    REQUIRE(best_dev != nullptr);
    if (tsr_backend_dev_by_type(TSR_BACKEND_DEVICE_TYPE_GPU)) CHECK(tsr_backend_dev_type(best_dev) == TSR_BACKEND_DEVICE_TYPE_GPU);
    else CHECK(best_dev == dev);
    check_computes_affine(best);
    tsr_backend_free(best);
}

TEST_CASE("registry: unknown names and bad params give NULL and an error naming them", "[cpu][device][error]") {
    CHECK(tsr_backend_init_by_name("nosuch-device", nullptr) == nullptr);
    CHECK(error_mentions("'nosuch-device'"));
    CHECK(error_mentions("CPU"));  // lists what there is
    CHECK(tsr_backend_dev_by_name("nosuch-device") == nullptr);
    CHECK(error_mentions("'nosuch-device'"));
    CHECK(tsr_backend_reg_by_name("nosuch-kind") == nullptr);
    CHECK(error_mentions("'nosuch-kind'"));
    CHECK(tsr_backend_init_by_name(nullptr, nullptr) == nullptr);
    CHECK(tsr_backend_dev_init(nullptr, nullptr) == nullptr);
    for (const char * bad : {"n_threads=0", "n_threads=4x", "threads=4", "n_threads=100000"}) {
        CAPTURE(bad);
        CHECK(tsr_backend_init_by_name("CPU", bad) == nullptr);
        CHECK(error_mentions((std::string("'") + bad + "'").c_str()));
    }
    // NULL handles answer without crashing
    CHECK(std::string(tsr_backend_dev_name(nullptr)) == "(null)");
    CHECK(tsr_backend_get_device(nullptr) == nullptr);
    CHECK_FALSE(tsr_backend_dev_supports_op(nullptr, nullptr));
}

TEST_CASE("registry: supports_op through the device equals the backend's", "[cpu][device]") {
    ctx_holder ctx(4);
    tsr_backend_t be = cpu();
    tsr_backend_dev_t dev = tsr_backend_get_device(be);
    REQUIRE(dev == tsr_backend_dev_by_name("CPU"));
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 256, 4);
    tsr_tensor * w4k = tsr_new_tensor_2d(ctx, TSR_TYPE_Q4_K, 256, 4);
    tsr_tensor * i32 = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 4);
    std::vector<tsr_tensor *> ops = {
        tsr_mul_mat(ctx, w4k, a), tsr_soft_max_ext(ctx, a, nullptr, 1.0f, 0.0f), tsr_get_rows(ctx, w4k, i32),
        tsr_rms_norm(ctx, a, 1e-5f), tsr_argsort(ctx, a, TSR_SORT_ORDER_ASC), tsr_cont(ctx, tsr_transpose(ctx, a)),
    };
    for (tsr_tensor * op : ops) {
        REQUIRE(op != nullptr);
        CAPTURE(node_signature(op));
        CHECK(tsr_backend_dev_supports_op(dev, op) == tsr_backend_supports_op(be, op));
        CHECK_FALSE(tsr_backend_dev_offload_op(dev, op));  // the CPU never asks for host weights
    }
}

TEST_CASE("registry: a registration of another API version is refused", "[cpu][device][error]") {
    const size_t n_before = tsr_backend_reg_count();
    static tsr_backend_reg newer = fake_reg(TSR_BACKEND_API_VERSION + 1);
    CHECK_FALSE(tsr_backend_register(&newer));
    CHECK(error_mentions(std::to_string(TSR_BACKEND_API_VERSION + 1).c_str()));
    CHECK(tsr_backend_reg_count() == n_before);
    CHECK(tsr_backend_reg_by_name("FakeNoDevices") == nullptr);
    CHECK_FALSE(tsr_backend_register(nullptr));

    // the current version is taken, once, and a kind without devices cannot start a backend
    static tsr_backend_reg current = fake_reg(TSR_BACKEND_API_VERSION);
    CHECK(tsr_backend_register(&current));
    CHECK(tsr_backend_register(&current));
    CHECK(tsr_backend_reg_count() == n_before + 1);
    CHECK(tsr_backend_reg_get(0) == tsr_backend_cpu_reg());
    CHECK(tsr_backend_reg_by_name("fakenodevices") == &current);
    CHECK(tsr_backend_init_by_name("FakeNoDevices", nullptr) == nullptr);
    CHECK(error_mentions("has no device"));
}

TEST_CASE("CPU device: caps, no events, synchronous async calls, and a buffer over caller memory without a copy", "[cpu][device]") {
    tsr_backend_dev_t dev = tsr_backend_dev_by_name("CPU");
    REQUIRE(dev != nullptr);
    tsr_backend_dev_props props;
    tsr_backend_dev_get_props(dev, &props);
    CHECK_FALSE(props.caps.async);
    CHECK_FALSE(props.caps.events);
    CHECK_FALSE(props.caps.host_buffer);
    CHECK(props.caps.buffer_from_host_ptr);
    CHECK(tsr_backend_event_new(dev) == nullptr);
    CHECK(error_mentions("device CPU has no events"));

    // 8 floats of caller memory, 64-byte aligned; x = its first 4, y = 2 x + x into the rest
    alignas(64) float host[8] = {1.5f, -2, 0.25f, 8, 0, 0, 0, 0};
    tsr_backend_buffer_t buf = tsr_backend_dev_buffer_from_host_ptr(dev, host, sizeof host, 0);
    REQUIRE(buf != nullptr);
    tsr_context * ctx = tsr_init({8 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
    REQUIRE(ctx != nullptr);
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    tsr_tensor * y = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    REQUIRE(tsr_backend_tensor_alloc(buf, x, host));
    REQUIRE(tsr_backend_tensor_alloc(buf, y, host + 4));
    tsr_tensor * sum = tsr_add(ctx, tsr_scale(ctx, x, 2.0f), x);
    tsr_tensor * out = tsr_cpy(ctx, sum, y);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(gf, out));
    tsr::gallocr ga(tsr_backend_cpu_buffer_type());
    REQUIRE(tsr_gallocr_alloc_graph(ga, gf));
    host[3] = -4;   // written after placement: the graph must read the caller's memory itself
    tsr_backend_t cpu = tsrt::cpu();
    REQUIRE(tsr_backend_graph_compute_async(cpu, gf) == TSR_STATUS_SUCCESS);
    const float want[4] = {4.5f, -6, 0.75f, -12};
    for (int i = 0; i < 4; ++i) CHECK(host[4 + i] == want[i]);   // no synchronize: the CPU is done on return

    // async copies fall back to immediate ones on the CPU
    float back[4] = {};
    REQUIRE(tsr_backend_tensor_get_async(cpu, y, back, 0, sizeof back));
    for (int i = 0; i < 4; ++i) CHECK(back[i] == want[i]);
    REQUIRE(tsr_backend_tensor_copy_async(cpu, cpu, y, x));
    CHECK(host[0] == want[0]);
    tsr_free(ctx);
    tsr_backend_buffer_free(buf);

    CHECK(tsr_backend_dev_buffer_from_host_ptr(dev, host + 1, 16, 0) == nullptr);
    CHECK(error_mentions("not 64-byte aligned"));
    CHECK(tsr_backend_dev_buffer_from_host_ptr(dev, nullptr, 16, 0) == nullptr);
    CHECK(error_mentions("ptr is NULL"));
}
