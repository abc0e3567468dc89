// Context arena: exact sizing, alignment, guard bytes, reset, no_alloc, errors.
#include "test_util.h"

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace {

struct shape {
    tsr_type type;
    int64_t ne[4];
};

const shape k_shapes[] = {
    {TSR_TYPE_F32, {7, 3, 1, 1}},   {TSR_TYPE_F16, {5, 1, 1, 1}},  {TSR_TYPE_Q8_0, {64, 3, 1, 1}},
    {TSR_TYPE_Q4_0, {32, 5, 2, 1}}, {TSR_TYPE_I32, {1, 1, 1, 1}},  {TSR_TYPE_BF16, {16, 4, 1, 1}},
    {TSR_TYPE_F32, {16, 1, 1, 1}},  {TSR_TYPE_F32, {3, 5, 7, 2}},
};

// Bytes of a contiguous tensor of this shape, computed independently of tessera.
size_t ref_nbytes(const shape & s) {
    size_t block_bytes = 0, block = 1;
    switch (s.type) {
        case TSR_TYPE_F32: case TSR_TYPE_I32: block_bytes = 4; break;
        case TSR_TYPE_F16: case TSR_TYPE_BF16: block_bytes = 2; break;
        case TSR_TYPE_Q8_0: block_bytes = 34; block = 32; break;
        case TSR_TYPE_Q4_0: block_bytes = 18; block = 32; break;
        default: break;
    }
    return (size_t)s.ne[0] / block * block_bytes * (size_t)(s.ne[1] * s.ne[2] * s.ne[3]);
}

size_t pad64(size_t x) { return (x + 63) / 64 * 64; }

size_t data_bytes() {
    size_t sum = 0;
    for (const auto & s : k_shapes) sum += pad64(ref_nbytes(s));
    return sum;
}

const size_t n_shapes = sizeof(k_shapes) / sizeof(k_shapes[0]);

// Creates every shape, then (optionally) a graph. Returns how many creations succeeded.
size_t create_all(tsr_context * ctx, bool with_graph) {
    size_t ok = 0;
    for (const auto & s : k_shapes) {
        if (!tsr_new_tensor(ctx, s.type, 4, s.ne)) return ok;
        ok++;
    }
    if (with_graph) {
        if (!tsr_new_graph(ctx)) return ok;
        ok++;
    }
    return ok;
}

bool contains(const std::string & s, size_t v) { return s.find(std::to_string(v)) != std::string::npos; }

} // namespace

TEST_CASE("arena sizing formula is exact: fits, and one byte less fails on the last creation", "[context]") {
    const size_t mem = data_bytes() + n_shapes * tsr_tensor_overhead() + tsr_graph_overhead();

    SECTION("exact size: all tensors and the graph fit") {
        tsr::context ctx(mem);
        REQUIRE(ctx.ok());
        CHECK(create_all(ctx, true) == n_shapes + 1);
        CHECK(tsr_used_mem(ctx) == mem);
    }
    SECTION("one byte less: the last creation (the graph) fails with the numbers") {
        tsr::context ctx(mem - 1);
        REQUIRE(ctx.ok());
        tsr_clear_error();
        CHECK(create_all(ctx, true) == n_shapes);
        const std::string err = tsr_last_error();
        const size_t used = tsr_used_mem(ctx);
        CHECK(used == mem - tsr_graph_overhead());
        CHECK(contains(err, mem - 1));                // context size
        CHECK(contains(err, used));                   // bytes used
        CHECK(contains(err, tsr_graph_overhead()));   // bytes requested
    }
    SECTION("without a graph, one byte less fails on the last tensor") {
        const size_t mem_t = data_bytes() + n_shapes * tsr_tensor_overhead();
        {
            tsr::context ctx(mem_t);
            CHECK(create_all(ctx, false) == n_shapes);
            CHECK(tsr_used_mem(ctx) == mem_t);
        }
        tsr::context ctx(mem_t - 1);
        CHECK(create_all(ctx, false) == n_shapes - 1);
        const std::string err = tsr_last_error();
        const size_t last = tsr_tensor_overhead() + pad64(ref_nbytes(k_shapes[n_shapes - 1]));
        CHECK(contains(err, mem_t - 1));
        CHECK(contains(err, mem_t - last));
        CHECK(contains(err, last));
    }
    SECTION("no_alloc: headers and the graph only") {
        const size_t mem_na = n_shapes * tsr_tensor_overhead() + tsr_graph_overhead();
        {
            tsr::context ctx(mem_na, nullptr, true);
            CHECK(create_all(ctx, true) == n_shapes + 1);
            CHECK(tsr_used_mem(ctx) == mem_na);
        }
        tsr::context ctx(mem_na - 1, nullptr, true);
        CHECK(create_all(ctx, true) == n_shapes);
    }
}

TEST_CASE("custom graph sizes are sized exactly", "[context]") {
    for (size_t size : {size_t(1), size_t(7), size_t(100), size_t(4096)}) {
        for (bool grads : {false, true}) {
            const size_t mem = tsr_graph_overhead_custom(size, grads);
            CHECK(mem % TSR_MEM_ALIGN == 0);
            {
                tsr::context ctx(mem);
                tsr_cgraph * g = tsr_new_graph_custom(ctx, size, grads);
                CHECK(g != nullptr);
                CHECK(tsr_graph_size(g) == (int)size);
                CHECK(tsr_used_mem(ctx) == mem);
            }
            tsr::context ctx(mem - 1);
            CHECK(tsr_new_graph_custom(ctx, size, grads) == nullptr);
            CHECK(tsr_used_mem(ctx) == 0);
        }
    }
    CHECK(tsr_graph_overhead() == tsr_graph_overhead_custom(TSR_DEFAULT_GRAPH_SIZE, false));
}

TEST_CASE("nothing is written outside a caller's block (guard bytes)", "[context]") {
    const size_t guard = 256, mem = 8 * tsr_tensor_overhead() + 4096 + 32;  // not a multiple of the alignment
    std::vector<uint8_t> raw(mem + 2 * guard + TSR_MEM_ALIGN);
    uint8_t * base = raw.data();
    while (((uintptr_t)(base + guard)) % TSR_MEM_ALIGN != 0) base++;
    std::memset(base, 0xA5, mem + 2 * guard);
    uint8_t * block = base + guard;

    tsr_context * ctx = tsr_init({mem, block, false});
    REQUIRE(ctx);
    CHECK(tsr_get_mem_buffer(ctx) == block);
    CHECK(tsr_get_mem_size(ctx) == mem);
    std::vector<tsr_tensor *> made;
    for (int i = 0; i < 64; i++) {
        tsr_tensor * t = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 17 + 13 * i);
        if (!t) break;
        std::memset(t->data, 0x5A, tsr_nbytes(t));  // write every byte a tensor owns
        made.push_back(t);
    }
    CHECK(made.size() >= 2);
    CHECK(tsr_new_graph(ctx) == nullptr);   // far too big: must fail without writing
    CHECK(tsr_used_mem(ctx) <= mem);
    for (size_t i = 0; i < guard; i++) {
        CHECK(base[i] == 0xA5);
        CHECK(block[mem + i] == 0xA5);
    }
    tsr_free(ctx);                          // never frees the caller's block
    CHECK(block[0] != 0xA5);                // still ours to read: the first object header was written
}

TEST_CASE("every object and data pointer is aligned", "[context]") {
    tsr::context ctx(1 << 20);
    std::vector<const void *> ptrs;
    for (int i = 0; i < 20; i++) {
        tsr_tensor * t = tsr_new_tensor_2d(ctx, i % 2 ? TSR_TYPE_F16 : TSR_TYPE_F32, 1 + i * 3, 1 + i % 5);
        REQUIRE(t);
        ptrs.push_back(t);
        ptrs.push_back(t->data);
        tsr_tensor * q = tsr_new_tensor_1d(ctx, TSR_TYPE_Q4_0, 32 * (1 + i % 3));
        REQUIRE(q);
        ptrs.push_back(q);
        ptrs.push_back(q->data);
        if (i % 7 == 0) {
            tsr_cgraph * g = tsr_new_graph_custom(ctx, 3 + i, i % 2);
            REQUIRE(g);
            ptrs.push_back(g);
        }
    }
    for (const void * p : ptrs) CHECK((uintptr_t)p % TSR_MEM_ALIGN == 0);
    CHECK(tsr_tensor_overhead() % TSR_MEM_ALIGN == 0);
    CHECK(tsr_used_mem(ctx) % TSR_MEM_ALIGN == 0);
}

TEST_CASE("a misaligned caller buffer is rejected", "[context]") {
    alignas(64) static uint8_t buf[4096 + 64];
    tsr_clear_error();
    CHECK(tsr_init({4096, buf + 8, false}) == nullptr);
    CHECK_THAT(std::string(tsr_last_error()), Catch::Matchers::Contains("aligned"));
    tsr_context * ok = tsr_init({4096, buf, false});
    CHECK(ok != nullptr);
    tsr_free(ok);
}

TEST_CASE("tsr_reset drops objects and reuses the block", "[context]") {
    tsr::context ctx(64 * 1024);
    tsr_tensor * a = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 100);
    tsr_tensor * b = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 100);
    REQUIRE((a && b));
    const size_t used = tsr_used_mem(ctx);
    CHECK(used > 0);
    tsr_reset(ctx);
    CHECK(tsr_used_mem(ctx) == 0);
    CHECK(tsr_get_first_tensor(ctx) == nullptr);
    tsr_tensor * a2 = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 100);
    tsr_tensor * b2 = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 100);
    CHECK(a2 == a);
    CHECK(b2 == b);
    CHECK(tsr_used_mem(ctx) == used);
    CHECK(tsr_get_tensor(ctx, "") == a2);
}

TEST_CASE("no_alloc contexts hold no data", "[context]") {
    tsr::context ctx(4 * tsr_tensor_overhead(), nullptr, true);
    CHECK(tsr_get_no_alloc(ctx));
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 1000, 1000);  // 4 MB of data would not fit
    REQUIRE(a);
    CHECK(a->data == nullptr);
    CHECK(tsr_nbytes(a) == 4000000);
    tsr_tensor * v = tsr_view_1d(ctx, a, 10, 40);
    REQUIRE(v);
    CHECK(v->data == nullptr);
    CHECK(tsr_used_mem(ctx) == 2 * tsr_tensor_overhead());
    CHECK(tsr_new_f32(ctx, 1.0f) == nullptr);  // a scalar with a value needs data
    CHECK(tsr_used_mem(ctx) == 2 * tsr_tensor_overhead());
    tsr_set_no_alloc(ctx, false);
    CHECK_FALSE(tsr_get_no_alloc(ctx));
}

TEST_CASE("a mem_size 0 context is valid but holds nothing", "[context]") {
    tsr::context ctx(0);
    REQUIRE(ctx.ok());
    CHECK(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 1) == nullptr);
    CHECK(std::strlen(tsr_last_error()) > 0);
    CHECK(tsr_used_mem(ctx) == 0);
}

TEST_CASE("a failed creation leaves the context unchanged", "[context]") {
    tsr::context ctx(2 * tsr_tensor_overhead() + 128);
    tsr_tensor * a = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 16);
    REQUIRE(a);
    const size_t used = tsr_used_mem(ctx);
    CHECK(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 17) == nullptr);  // needs 128 data bytes
    CHECK(tsr_used_mem(ctx) == used);
    CHECK(tsr_get_next_tensor(ctx, a) == nullptr);
    CHECK(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 16) != nullptr);  // the remaining space is still usable
}

TEST_CASE("tensors can be iterated and found by name", "[context]") {
    tsr::context ctx(1 << 16);
    tsr_tensor * a = tsr_set_name(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4), "a");
    tsr_new_graph_custom(ctx, 4, false);  // graphs are skipped by the iteration
    tsr_tensor * b = tsr_set_name(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 40, 2), "b");
    tsr_tensor * c = tsr_set_name(tsr_new_tensor_1d(ctx, TSR_TYPE_F16, 4), "c");
    CHECK(tsr_get_first_tensor(ctx) == a);
    CHECK(tsr_get_next_tensor(ctx, a) == b);
    CHECK(tsr_get_next_tensor(ctx, b) == c);
    CHECK(tsr_get_next_tensor(ctx, c) == nullptr);
    CHECK(tsr_get_tensor(ctx, "b") == b);
    CHECK(tsr_get_tensor(ctx, "zz") == nullptr);
    CHECK(tsr_get_max_tensor_size(ctx) == 320);
}

namespace {
struct cb_log {
    int calls = 0;
    std::string last;
};
void record(const char * msg, void * user) {
    auto * log = static_cast<cb_log *>(user);
    log->calls++;
    log->last = msg;
}
} // namespace

TEST_CASE("errors: thread-local message and callback", "[context][error]") {
    cb_log log;
    tsr_set_error_callback(record, &log);
    tsr::context ctx(0);
    CHECK(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4) == nullptr);
    CHECK(log.calls == 1);
    CHECK(log.last == tsr_last_error());
    CHECK_FALSE(tsr_set_error("custom %d", 42));
    CHECK(log.calls == 2);
    CHECK(std::string(tsr_last_error()) == "custom 42");
    tsr_set_error_callback(nullptr, nullptr);
    tsr_set_error("after");
    CHECK(log.calls == 2);

    std::string other = "unset";
    std::thread th([&] { other = tsr_last_error(); });
    th.join();
    CHECK(other.empty());  // another thread has its own (empty) message
    tsr_clear_error();
    CHECK(std::string(tsr_last_error()).empty());
    CHECK(std::string(tsr_status_to_string(TSR_STATUS_ALLOC_FAILED)) == "ALLOC_FAILED");
}
