// Buffers: the CPU buffer type, tensor set/get range checks, tallocr, whole contexts into
// (split) buffers, caller memory.
#include <catch2/catch.hpp>

#include "tessera/alloc.h"
#include "tessera/backend_impl.h"  // a backend writer's view: one case builds a buffer type of its own
#include "ctx_guard.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// A host buffer type whose max size is small, to force splits.
size_t small_max_size(tsr_backend_buffer_type_t) { return 1024; }

}  // namespace

TEST_CASE("CPU buffer type: 64-byte aligned host memory", "[alloc][buffer]") {
    tsr_backend_buffer_type_t buft = tsr_backend_cpu_buffer_type();
    REQUIRE(buft != nullptr);
    CHECK(tsr_backend_buft_get_alignment(buft) == 64);
    CHECK(tsr_backend_buft_is_host(buft));
    CHECK(tsr_backend_buft_get_max_size(buft) == SIZE_MAX);
    for (size_t size : {size_t(1), size_t(1000), size_t(4096), size_t(12345)}) {
        tsr_backend_buffer_t b = tsr_backend_buft_alloc_buffer(buft, size);
        REQUIRE(b != nullptr);
        CHECK(((uintptr_t) tsr_backend_buffer_get_base(b) % 64) == 0);
        CHECK(tsr_backend_buffer_get_size(b) == size);
        CHECK(tsr_backend_buffer_get_usage(b) == TSR_BUFFER_USAGE_ANY);
        tsr_backend_buffer_set_usage(b, TSR_BUFFER_USAGE_COMPUTE);
        CHECK(tsr_backend_buffer_get_usage(b) == TSR_BUFFER_USAGE_COMPUTE);
        tsr_backend_buffer_clear(b, 0xAB);
        const unsigned char * p = (const unsigned char *) tsr_backend_buffer_get_base(b);
        CHECK(p[0] == 0xAB);
        CHECK(p[size - 1] == 0xAB);
        tsr_backend_buffer_free(b);
    }
    tsr_backend_buffer_free(nullptr);
}

TEST_CASE("tensor set/get/memset are range checked", "[alloc][buffer]") {
    ctx_guard g(4);
    REQUIRE(g.ctx);
    tsr_tensor * t = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 10);
    tsr_set_name(t, "t10");
    tsr_backend_buffer_t b = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_buffer_type(), 256);
    REQUIRE(b);
    struct tsr_tallocr ta = tsr_tallocr_new(b);
    REQUIRE(tsr_tallocr_alloc(&ta, t));
    CHECK(t->buffer == b);

    float in[10], out[10];
    for (int i = 0; i < 10; i++) in[i] = (float) i * 1.5f;
    REQUIRE(tsr_backend_tensor_set(t, in, 0, sizeof(in)));
    REQUIRE(tsr_backend_tensor_get(t, out, 0, sizeof(out)));
    CHECK(std::memcmp(in, out, sizeof(in)) == 0);
    REQUIRE(tsr_backend_tensor_get(t, out, 4 * 3, 8));
    CHECK(out[0] == 4.5f);
    CHECK(out[1] == 6.0f);

    tsr_clear_error();
    CHECK_FALSE(tsr_backend_tensor_set(t, in, 36, 8));  // 44 > 40
    CHECK(std::string(tsr_last_error()).find("t10") != std::string::npos);
    CHECK(std::string(tsr_last_error()).find("40") != std::string::npos);
    CHECK_FALSE(tsr_backend_tensor_get(t, out, 41, 0));
    CHECK_FALSE(tsr_backend_tensor_get(t, out, 0, 41));
    CHECK_FALSE(tsr_backend_tensor_memset(t, 0, 8, 40));
    CHECK_FALSE(tsr_backend_tensor_set(t, in, SIZE_MAX - 2, 8));  // no wrap-around
    REQUIRE(tsr_backend_tensor_memset(t, 0, 8, 8));
    REQUIRE(tsr_backend_tensor_get(t, out, 0, sizeof(out)));
    CHECK(out[1] == 1.5f);
    CHECK(out[2] == 0.0f);
    CHECK(out[3] == 0.0f);
    CHECK(out[4] == 6.0f);

    // an unplaced tensor cannot be read
    tsr_tensor * u = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 4);
    CHECK_FALSE(tsr_backend_tensor_get(u, out, 0, 16));
    tsr_backend_buffer_free(b);
}

TEST_CASE("tallocr: aligned placement, overflow is an error that changes nothing", "[alloc][tallocr]") {
    ctx_guard g(8);
    REQUIRE(g.ctx);
    tsr_backend_buffer_t b = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_buffer_type(), 256);
    REQUIRE(b);
    struct tsr_tallocr ta = tsr_tallocr_new(b);
    tsr_tensor * a = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 5);    // 20 bytes -> 64
    tsr_tensor * c = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 32);   // 128 bytes
    tsr_tensor * big = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 100); // 400 bytes
    tsr_tensor * d = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 16);   // 64 bytes
    tsr_tensor * e = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 1);
    tsr_set_name(big, "big");
    REQUIRE(tsr_tallocr_alloc(&ta, a));
    REQUIRE(tsr_tallocr_alloc(&ta, c));
    char * base = (char *) tsr_backend_buffer_get_base(b);
    CHECK((char *) a->data == base);
    CHECK((char *) c->data == base + 64);
    tsr_clear_error();
    CHECK_FALSE(tsr_tallocr_alloc(&ta, big));
    const std::string err = tsr_last_error();
    CHECK(err.find("big") != std::string::npos);
    CHECK(err.find("448") != std::string::npos);  // needed (padded)
    CHECK(err.find("256") != std::string::npos);  // capacity
    CHECK(big->data == nullptr);
    CHECK(big->buffer == nullptr);
    CHECK(ta.offset == 192);
    REQUIRE(tsr_tallocr_alloc(&ta, d));  // exactly fills the buffer
    CHECK((char *) d->data == base + 192);
    CHECK_FALSE(tsr_tallocr_alloc(&ta, e));
    tsr_backend_buffer_free(b);
}

TEST_CASE("alloc_ctx_tensors: one WEIGHTS buffer, split at the max size", "[alloc][buffer]") {
    ctx_guard g(16);
    REQUIRE(g.ctx);
    std::vector<tsr_tensor *> ts;
    for (int i = 0; i < 5; i++) ts.push_back(tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 100));  // 400 -> 448 bytes
    tsr_tensor * v = tsr_view_1d(g.ctx, ts[1], 10, 40);

    // a host buffer type with a max size of 1024 bytes
    tsr_backend_buffer_type_t cpu = tsr_backend_cpu_buffer_type();
    struct tsr_backend_buffer_type small = *cpu;
    small.iface.get_max_size = small_max_size;

    tsr_backend_buffer_t mb = tsr_backend_alloc_ctx_tensors_from_buft(g.ctx, &small);
    REQUIRE(mb != nullptr);
    CHECK(tsr_backend_buffer_is_multi_buffer(mb));
    CHECK(tsr_backend_buffer_get_usage(mb) == TSR_BUFFER_USAGE_WEIGHTS);
    CHECK(tsr_backend_buffer_get_size(mb) == 448 * 5);
    // pieces: (0,1) (2,3) (4); every piece <= 1024 bytes, WEIGHTS
    CHECK(ts[0]->buffer == ts[1]->buffer);
    CHECK(ts[2]->buffer == ts[3]->buffer);
    CHECK(ts[1]->buffer != ts[2]->buffer);
    CHECK(ts[3]->buffer != ts[4]->buffer);
    for (tsr_tensor * t : ts) {
        REQUIRE(t->buffer);
        CHECK(tsr_backend_buffer_get_size(t->buffer) <= 1024);
        CHECK(tsr_backend_buffer_get_usage(t->buffer) == TSR_BUFFER_USAGE_WEIGHTS);
        char * base = (char *) tsr_backend_buffer_get_base(t->buffer);
        CHECK((char *) t->data >= base);
        CHECK((char *) t->data + tsr_nbytes(t) <= base + tsr_backend_buffer_get_size(t->buffer));
    }
    // the view follows its source
    CHECK(v->data == (char *) ts[1]->data + 40);
    // every tensor can be written and read back independently
    for (size_t i = 0; i < ts.size(); i++) {
        std::vector<float> x(100, (float) i + 0.25f);
        REQUIRE(tsr_backend_tensor_set(ts[i], x.data(), 0, 400));
    }
    for (size_t i = 0; i < ts.size(); i++) {
        std::vector<float> y(100, -1.0f);
        REQUIRE(tsr_backend_tensor_get(ts[i], y.data(), 0, 400));
        CHECK(y[0] == (float) i + 0.25f);
        CHECK(y[99] == (float) i + 0.25f);
    }
    tsr_backend_buffer_free(mb);
}

TEST_CASE("alloc_ctx_tensors: too large a tensor fails and places nothing", "[alloc][buffer]") {
    ctx_guard g(8);
    REQUIRE(g.ctx);
    tsr_tensor * a = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 16);
    tsr_tensor * b = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 1000);
    tsr_set_name(b, "huge");
    tsr_clear_error();
    CHECK(tsr_backend_alloc_ctx_tensors_from_buft_size(g.ctx, tsr_backend_cpu_buffer_type(), 1024) == nullptr);
    CHECK(std::string(tsr_last_error()).find("huge") != std::string::npos);
    CHECK(a->data == nullptr);
    CHECK(a->buffer == nullptr);
    CHECK(b->data == nullptr);
    // without the limit it fits into a single plain buffer
    tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors_from_buft(g.ctx, tsr_backend_cpu_buffer_type());
    REQUIRE(buf);
    CHECK_FALSE(tsr_backend_buffer_is_multi_buffer(buf));
    CHECK(a->buffer == buf);
    CHECK(b->buffer == buf);
    tsr_backend_buffer_free(buf);
}

TEST_CASE("cpu_buffer_from_ptr wraps caller memory", "[alloc][buffer]") {
    alignas(64) static unsigned char mem[1024];
    CHECK(tsr_backend_cpu_buffer_from_ptr(mem + 8, 512) == nullptr);  // misaligned
    tsr_backend_buffer_t b = tsr_backend_cpu_buffer_from_ptr(mem, sizeof(mem));
    REQUIRE(b);
    CHECK(tsr_backend_buffer_get_base(b) == mem);
    CHECK(tsr_backend_buffer_get_size(b) == sizeof(mem));
    ctx_guard g(2);
    tsr_tensor * t = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 4);
    struct tsr_tallocr ta = tsr_tallocr_new(b);
    REQUIRE(tsr_tallocr_alloc(&ta, t));
    const float x[4] = {1, 2, 3, 4};
    REQUIRE(tsr_backend_tensor_set(t, x, 0, sizeof(x)));
    float y;
    std::memcpy(&y, mem + 8, 4);
    CHECK(y == 3.0f);
    tsr_backend_buffer_free(b);  // must not free mem (ASan would complain)
}

TEST_CASE("tensor_copy between buffers", "[alloc][buffer]") {
    ctx_guard g(4);
    tsr_tensor * a = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 8);
    tsr_tensor * b = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 8);
    tsr_tensor * c = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 9);
    tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors_from_buft(g.ctx, tsr_backend_cpu_buffer_type());
    REQUIRE(buf);
    float x[8];
    for (int i = 0; i < 8; i++) x[i] = (float) (i * i);
    REQUIRE(tsr_backend_tensor_set(a, x, 0, sizeof(x)));
    REQUIRE(tsr_backend_tensor_copy(a, b));
    float y[8] = {0};
    REQUIRE(tsr_backend_tensor_get(b, y, 0, sizeof(y)));
    CHECK(std::memcmp(x, y, sizeof(x)) == 0);
    CHECK_FALSE(tsr_backend_tensor_copy(a, c));  // size mismatch
    tsr_backend_buffer_free(buf);
}
