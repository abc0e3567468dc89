// GGUF: round trips, v2, the chunked loader (host and a non-host staging buffer), and
// every class of malformed file.
#include <catch2/catch.hpp>

#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/gguf.h"
#include "tessera/backend_impl.h"  // a backend writer's view: one case implements a buffer of its own

#include <atomic>
#include <cstdio>
#include <unistd.h>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace {

std::string tmp_file(const char * tag) {
    const char * dir = getenv("TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/tsr_gguf_test_" + tag + "_" + std::to_string((long) getpid()) + ".gguf";
}

std::vector<uint8_t> read_all(const std::string & path) {
    std::vector<uint8_t> b;
    FILE * f = fopen(path.c_str(), "rb");
    if (!f) return b;
    int c;
    while ((c = fgetc(f)) != EOF) b.push_back((uint8_t) c);
    fclose(f);
    return b;
}

void write_all(const std::string & path, const std::vector<uint8_t> & b) {
    FILE * f = fopen(path.c_str(), "wb");
    REQUIRE(f);
    if (!b.empty()) REQUIRE(fwrite(b.data(), 1, b.size(), f) == b.size());
    fclose(f);
}

// Builds GGUF bytes field by field.
struct bytes {
    std::vector<uint8_t> b;
    template <typename T> bytes & put(T v) {
        const uint8_t * p = (const uint8_t *) &v;
        b.insert(b.end(), p, p + sizeof v);
        return *this;
    }
    bytes & u32(uint32_t v) { return put(v); }
    bytes & u64(uint64_t v) { return put(v); }
    bytes & str(const std::string & s) { u64(s.size()); b.insert(b.end(), s.begin(), s.end()); return *this; }
    bytes & pad(size_t a) { while (b.size() % a) b.push_back(0); return *this; }
    size_t size() const { return b.size(); }
};

// A valid file: 2 keys, 2 tensors (F32 [4,2] at 0, F32 [8] at 32), data.
struct spec {
    uint32_t version = 3;
    uint64_t n_tensors = 2, n_kv = 2;
    std::string key0 = "general.name", key1 = "a.arr";
    uint32_t type0 = 8;
    uint32_t arr_type = 4;
    uint64_t arr_n = 3;
    std::string t0 = "t0", t1 = "t1";
    uint32_t n_dims0 = 2;
    int64_t ne00 = 4, ne01 = 2;
    uint32_t ttype0 = 0;
    uint64_t off0 = 0, off1 = 32;
};

std::vector<uint8_t> make(const spec & s, size_t * data_at = nullptr, size_t * meta_end = nullptr) {
    bytes w;
    w.b = {'G', 'G', 'U', 'F'};
    w.u32(s.version).u64(s.n_tensors).u64(s.n_kv);
    w.str(s.key0).u32(s.type0);
    if (s.type0 == 8) w.str("tiny");
    else w.u32(7);
    w.str(s.key1).u32(9).u32(s.arr_type).u64(s.arr_n);
    for (uint64_t i = 0; i < 3; ++i) w.u32((uint32_t) (i + 1));
    w.str(s.t0).u32(s.n_dims0);
    w.put<int64_t>(s.ne00);
    if (s.n_dims0 >= 2) w.put<int64_t>(s.ne01);
    for (uint32_t d = 2; d < s.n_dims0 && d < 8; ++d) w.put<int64_t>(1);
    w.u32(s.ttype0).u64(s.off0);
    w.str(s.t1).u32(1).put<int64_t>(8).u32(0).u64(s.off1);
    if (meta_end) *meta_end = w.size();
    w.pad(32);
    if (data_at) *data_at = w.size();
    for (int i = 0; i < 16; ++i) w.put<float>((float) i);
    return w.b;
}

tsr_gguf_context * parse(const std::vector<uint8_t> & b, tsr_context ** ctx = nullptr) {
    tsr_gguf_init_params p = {false, ctx};
    return tsr_gguf_init_from_buffer(b.data(), b.size(), p);
}

// Expect a failure whose message contains `what` (and "byte ").
void expect_bad(const std::vector<uint8_t> & b, const char * what) {
    INFO("expecting: " << what);
    tsr_context * ctx = nullptr;
    tsr_gguf_context * g = parse(b, &ctx);
    CHECK(g == nullptr);
    CHECK(ctx == nullptr);
    tsr_gguf_free(g);
    const std::string err = tsr_last_error();
    INFO("error: " << err);
    CHECK(err.find(what) != std::string::npos);
    CHECK(err.find("byte ") != std::string::npos);
}

} // namespace

TEST_CASE("gguf: the hand-built valid file parses", "[gguf]") {
    const std::vector<uint8_t> b = make(spec());
    tsr_context * ctx = nullptr;
    tsr_gguf_context * g = parse(b, &ctx);
    REQUIRE(g);
    REQUIRE(ctx);
    CHECK(tsr_gguf_get_version(g) == 3);
    CHECK(tsr_gguf_get_n_kv(g) == 2);
    CHECK(std::string(tsr_gguf_get_val_str(g, tsr_gguf_find_key(g, "general.name"))) == "tiny");
    const int64_t ka = tsr_gguf_find_key(g, "a.arr");
    CHECK(tsr_gguf_get_arr_type(g, ka) == TSR_GGUF_TYPE_UINT32);
    CHECK(tsr_gguf_get_arr_n(g, ka) == 3);
    CHECK(((const uint32_t *) tsr_gguf_get_arr_data(g, ka))[2] == 3);
    CHECK(tsr_gguf_get_n_tensors(g) == 2);
    CHECK(tsr_gguf_get_tensor_offset(g, 1) == 32);
    CHECK(tsr_gguf_get_data_offset(g) % 32 == 0);
    tsr_tensor * t1 = tsr_get_tensor(ctx, "t1");
    REQUIRE(t1);
    CHECK(((const float *) t1->data)[3] == 11.0f);  // floats 8..15
    // typed getters reject the wrong type with a message instead of aborting
    CHECK(tsr_gguf_get_val_u32(g, tsr_gguf_find_key(g, "general.name")) == 0);
    CHECK(std::string(tsr_last_error()).find("not u32") != std::string::npos);
    CHECK(tsr_gguf_get_val_str(g, 99) == nullptr);
    tsr_free(ctx);
    tsr_gguf_free(g);
}

TEST_CASE("gguf: every truncation of a valid file is an error, never a crash", "[gguf][malformed]") {
    size_t data_at = 0, meta_end = 0;
    const std::vector<uint8_t> b = make(spec(), &data_at, &meta_end);
    for (size_t n = 0; n < b.size(); ++n) {
        std::vector<uint8_t> cut(b.begin(), b.begin() + (long) n);
        tsr_context * ctx = nullptr;
        tsr_gguf_context * g = parse(cut, &ctx);
        INFO("truncated to " << n << " bytes: " << tsr_last_error());
        CHECK(g == nullptr);
        CHECK(ctx == nullptr);
        const std::string err = tsr_last_error();
        if (n < meta_end) CHECK(err.find(" left") != std::string::npos);  // "only N bytes left"
        else CHECK(err.find("past the end") != std::string::npos);
    }
    // the same through the FILE path
    const std::string path = tmp_file("trunc");
    for (size_t n : {(size_t) 3, (size_t) 20, data_at + 10}) {
        write_all(path, std::vector<uint8_t>(b.begin(), b.begin() + (long) n));
        tsr_gguf_init_params p = {true, nullptr};
        CHECK(tsr_gguf_init_from_file(path.c_str(), p) == nullptr);
        CHECK(std::string(tsr_last_error()).find(path) != std::string::npos);
    }
    remove(path.c_str());
    tsr_gguf_init_params p = {true, nullptr};
    CHECK(tsr_gguf_init_from_file("/nonexistent/x.gguf", p) == nullptr);
    CHECK(std::string(tsr_last_error()).find("cannot open") != std::string::npos);
}

TEST_CASE("gguf: wrong magic and versions", "[gguf][malformed]") {
    std::vector<uint8_t> b = make(spec());
    b[0] = 'X';
    expect_bad(b, "bad magic");
    CHECK(std::string(tsr_last_error()).find("byte 0:") != std::string::npos);
    spec s;
    s.version = 1;
    expect_bad(make(s), "version 1");
    s.version = 4;
    expect_bad(make(s), "unsupported GGUF version 4");
    s.version = 0;
    expect_bad(make(s), "unsupported GGUF version 0");
    s.version = 0x03000000;  // 3, byte-swapped
    expect_bad(make(s), "big-endian");
    s.version = 2;  // v2 reads
    tsr_gguf_context * g = parse(make(s));
    REQUIRE(g);
    CHECK(tsr_gguf_get_version(g) == 2);
    tsr_gguf_free(g);
}

TEST_CASE("gguf: absurd counts and lengths are rejected before allocating", "[gguf][malformed]") {
    spec s;
    s.n_kv = 1ull << 60;
    expect_bad(make(s), "key/value count");
    CHECK(std::string(tsr_last_error()).find("byte 16:") != std::string::npos);
    s = spec();
    s.n_tensors = 1ull << 59;
    expect_bad(make(s), "tensor count");
    CHECK(std::string(tsr_last_error()).find("byte 8:") != std::string::npos);
    s = spec();
    s.arr_n = 1ull << 61;
    expect_bad(make(s), "array of");
    s = spec();
    s.arr_n = 1000;  // plausible, but more than the file holds
    expect_bad(make(s), "array of");
    // a string length of 2^62 in the first key
    std::vector<uint8_t> b = make(spec());
    const uint64_t huge = 1ull << 62;
    memcpy(&b[24], &huge, 8);
    expect_bad(b, "string length");
    CHECK(std::string(tsr_last_error()).find("byte 24:") != std::string::npos);
    // a string array claiming more strings than bytes
    bytes w;
    w.b = {'G', 'G', 'U', 'F'};
    w.u32(3).u64(0).u64(1).str("k").u32(9).u32(8).u64(1ull << 40);
    expect_bad(w.b, "array of");
}

TEST_CASE("gguf: unknown types", "[gguf][malformed]") {
    spec s;
    s.type0 = 99;
    expect_bad(make(s), "unknown value type 99");
    s = spec();
    s.arr_type = 77;
    expect_bad(make(s), "unknown array element type 77");
    s = spec();
    s.arr_type = 9;
    expect_bad(make(s), "arrays of arrays");
    s = spec();
    s.ttype0 = 99;
    expect_bad(make(s), "unknown tensor type 99");
    s = spec();
    s.ttype0 = 4;  // a removed ggml type (Q4_2) tessera does not know
    expect_bad(make(s), "unknown tensor type 4");
    s.ttype0 = 23;  // a ggml type tessera does not implement: named, with a hint
    expect_bad(make(s), "ggml type 23 (IQ4_XS) is not supported");
}

TEST_CASE("gguf: tensor shapes, offsets and overlaps", "[gguf][malformed]") {
    spec s;
    s.off1 = 4096;
    expect_bad(make(s), "past the end");
    s = spec();
    s.off1 = 1ull << 63;
    expect_bad(make(s), "past the end");
    s = spec();
    s.off1 = 8;  // misaligned
    expect_bad(make(s), "not a multiple of the alignment");
    s = spec();
    s.off1 = 0;  // overlaps t0
    expect_bad(make(s), "overlaps");
    s = spec();
    s.ne00 = 1ll << 40;
    s.ne01 = 1ll << 40;  // 2^80 elements
    expect_bad(make(s), "overflows");
    s = spec();
    s.ne00 = -4;
    expect_bad(make(s), "negative");
    s = spec();
    s.n_dims0 = 5;
    expect_bad(make(s), "n_dims 5");
    s = spec();
    s.n_dims0 = 0;
    expect_bad(make(s), "n_dims 0");
    s = spec();
    s.ttype0 = TSR_TYPE_Q8_0;
    s.ne00 = 20;  // not a multiple of the block size 32
    expect_bad(make(s), "block size");
    s = spec();
    s.t1 = std::string(80, 'x');
    expect_bad(make(s), "longer than");
}

TEST_CASE("gguf: duplicate names, empty names, bad alignment", "[gguf][malformed]") {
    spec s;
    s.key1 = "general.name";
    expect_bad(make(s), "duplicate key 'general.name'");
    s = spec();
    s.t1 = "t0";
    expect_bad(make(s), "duplicate tensor name 't0'");
    s = spec();
    s.key0 = "";
    expect_bad(make(s), "empty");
    s = spec();
    s.t0 = "";
    expect_bad(make(s), "empty name");
    s = spec();
    s.key0 = "general.alignment";
    s.type0 = 4;  // u32 7: not a power of two
    expect_bad(make(s), "not a power of two");
    s.type0 = 8;  // a string
    expect_bad(make(s), "expected u32");
}

TEST_CASE("gguf: write, read back: identical metadata and bytes", "[gguf][roundtrip]") {
    tsr_gguf_context * w = tsr_gguf_init_empty();
    REQUIRE(w);
    CHECK(tsr_gguf_set_val_u8(w, "k.u8", 200));
    CHECK(tsr_gguf_set_val_i8(w, "k.i8", -100));
    CHECK(tsr_gguf_set_val_u16(w, "k.u16", 60000));
    CHECK(tsr_gguf_set_val_i16(w, "k.i16", -30000));
    CHECK(tsr_gguf_set_val_u32(w, "k.u32", 4000000000u));
    CHECK(tsr_gguf_set_val_i32(w, "k.i32", -2000000000));
    CHECK(tsr_gguf_set_val_f32(w, "k.f32", 3.25f));
    CHECK(tsr_gguf_set_val_u64(w, "k.u64", 1ull << 63));
    CHECK(tsr_gguf_set_val_i64(w, "k.i64", -(1ll << 62)));
    CHECK(tsr_gguf_set_val_f64(w, "k.f64", -1.0 / 3.0));
    CHECK(tsr_gguf_set_val_bool(w, "k.bool", true));
    CHECK(tsr_gguf_set_val_str(w, "k.str", "h\xC3\xA9llo"));
    CHECK(tsr_gguf_set_val_str(w, "k.replaced", "first"));
    CHECK(tsr_gguf_set_val_i32(w, "k.replaced", 5));  // replaces value and type
    const int16_t a16[] = {-1, 2, -3};
    const double a64[] = {1.5, -2.5};
    const char * strs[] = {"a", "", "ccc"};
    CHECK(tsr_gguf_set_arr_data(w, "k.arr_i16", TSR_GGUF_TYPE_INT16, a16, 3));
    CHECK(tsr_gguf_set_arr_data(w, "k.arr_f64", TSR_GGUF_TYPE_FLOAT64, a64, 2));
    CHECK(tsr_gguf_set_arr_data(w, "k.arr_empty", TSR_GGUF_TYPE_UINT8, nullptr, 0));
    CHECK(tsr_gguf_set_arr_str(w, "k.arr_str", strs, 3));
    CHECK(tsr_gguf_set_val_u32(w, "general.alignment", 64));
    CHECK_FALSE(tsr_gguf_set_val_u32(w, "general.alignment", 48));
    CHECK_FALSE(tsr_gguf_set_val_u32(w, "", 1));
    CHECK(tsr_gguf_get_alignment(w) == 64);

    // tensors of several types with known bytes
    tsr_context * ctx = tsr_init(tsr_init_params{1 << 20, nullptr, false});
    REQUIRE(ctx);
    struct mk { tsr_type t; int64_t ne0, ne1; const char * name; };
    const mk ts[] = {{TSR_TYPE_F32, 5, 3, "f32"}, {TSR_TYPE_F16, 7, 2, "f16"}, {TSR_TYPE_Q8_0, 64, 3, "q8"},
                     {TSR_TYPE_Q4_0, 32, 5, "q4"}, {TSR_TYPE_I32, 9, 1, "i32"}, {TSR_TYPE_BF16, 3, 3, "bf16"}};
    std::vector<tsr_tensor *> tv;
    for (const mk & m : ts) {
        tsr_tensor * t = tsr_new_tensor_2d(ctx, m.t, m.ne0, m.ne1);
        REQUIRE(t);
        tsr_set_name(t, m.name);
        for (size_t i = 0; i < tsr_nbytes(t); ++i) ((uint8_t *) t->data)[i] = (uint8_t) (i * 31 + m.ne0);
        CHECK(tsr_gguf_add_tensor(w, t));
        tv.push_back(t);
    }
    CHECK_FALSE(tsr_gguf_add_tensor(w, tv[0]));  // duplicate name
    CHECK(std::string(tsr_last_error()).find("duplicate") != std::string::npos);
    for (int64_t i = 0; i < tsr_gguf_get_n_tensors(w); ++i) CHECK(tsr_gguf_get_tensor_offset(w, i) % 64 == 0);

    const std::string p1 = tmp_file("rt1"), p2 = tmp_file("rt2");
    REQUIRE(tsr_gguf_write_to_file(w, p1.c_str(), false));
    const std::vector<uint8_t> file1 = read_all(p1);
    CHECK(file1.size() == tsr_gguf_get_meta_size(w) + tsr_gguf_get_data_size(w));

    tsr_context * rctx = nullptr;
    tsr_gguf_init_params ip = {false, &rctx};
    tsr_gguf_context * r = tsr_gguf_init_from_file(p1.c_str(), ip);
    REQUIRE(r);
    REQUIRE(rctx);
    REQUIRE(tsr_gguf_get_n_kv(r) == tsr_gguf_get_n_kv(w));
    for (int64_t i = 0; i < tsr_gguf_get_n_kv(w); ++i) {
        const char * key = tsr_gguf_get_key(w, i);
        const int64_t j = tsr_gguf_find_key(r, key);
        INFO("key " << key);
        REQUIRE(j == i);  // order kept
        REQUIRE(tsr_gguf_get_kv_type(r, j) == tsr_gguf_get_kv_type(w, i));
    }
    auto id = [&](const char * k) { return tsr_gguf_find_key(r, k); };
    CHECK(tsr_gguf_get_val_u8(r, id("k.u8")) == 200);
    CHECK(tsr_gguf_get_val_i8(r, id("k.i8")) == -100);
    CHECK(tsr_gguf_get_val_u16(r, id("k.u16")) == 60000);
    CHECK(tsr_gguf_get_val_i16(r, id("k.i16")) == -30000);
    CHECK(tsr_gguf_get_val_u32(r, id("k.u32")) == 4000000000u);
    CHECK(tsr_gguf_get_val_i32(r, id("k.i32")) == -2000000000);
    CHECK(tsr_gguf_get_val_f32(r, id("k.f32")) == 3.25f);
    CHECK(tsr_gguf_get_val_u64(r, id("k.u64")) == (1ull << 63));
    CHECK(tsr_gguf_get_val_i64(r, id("k.i64")) == -(1ll << 62));
    CHECK(tsr_gguf_get_val_f64(r, id("k.f64")) == -1.0 / 3.0);
    CHECK(tsr_gguf_get_val_bool(r, id("k.bool")));
    CHECK(std::string(tsr_gguf_get_val_str(r, id("k.str"))) == "h\xC3\xA9llo");
    CHECK(tsr_gguf_get_val_i32(r, id("k.replaced")) == 5);
    CHECK(tsr_gguf_get_arr_n(r, id("k.arr_i16")) == 3);
    CHECK(memcmp(tsr_gguf_get_arr_data(r, id("k.arr_i16")), a16, sizeof a16) == 0);
    CHECK(memcmp(tsr_gguf_get_arr_data(r, id("k.arr_f64")), a64, sizeof a64) == 0);
    CHECK(tsr_gguf_get_arr_n(r, id("k.arr_empty")) == 0);
    CHECK(tsr_gguf_get_arr_n(r, id("k.arr_str")) == 3);
    CHECK(std::string(tsr_gguf_get_arr_str(r, id("k.arr_str"), 1)).empty());
    CHECK(std::string(tsr_gguf_get_arr_str(r, id("k.arr_str"), 2)) == "ccc");
    CHECK(tsr_gguf_get_arr_str(r, id("k.arr_str"), 3) == nullptr);
    CHECK(tsr_gguf_get_alignment(r) == 64);
    REQUIRE(tsr_gguf_get_n_tensors(r) == 6);
    for (size_t i = 0; i < tv.size(); ++i) {
        const tsr_tensor * a = tv[i];
        const tsr_tensor * b = tsr_get_tensor(rctx, a->name);
        REQUIRE(b);
        CHECK(b->type == a->type);
        for (int d = 0; d < TSR_MAX_DIMS; ++d) CHECK(b->ne[d] == a->ne[d]);
        CHECK(memcmp(a->data, b->data, tsr_nbytes(a)) == 0);
        CHECK(tsr_gguf_get_tensor_offset(r, (int64_t) i) == tsr_gguf_get_tensor_offset(w, (int64_t) i));
    }

    // write what was read: the same bytes
    REQUIRE(tsr_gguf_write_to_file(r, p2.c_str(), false));
    CHECK(read_all(p2) == file1);

    // v2 files read the same
    std::vector<uint8_t> v2 = file1;
    v2[4] = 2;
    tsr_gguf_context * r2 = parse(v2);
    REQUIRE(r2);
    CHECK(tsr_gguf_get_n_kv(r2) == tsr_gguf_get_n_kv(r));
    tsr_gguf_free(r2);

    // only_meta: header + metadata + infos, padded
    REQUIRE(tsr_gguf_write_to_file(w, p2.c_str(), true));
    const std::vector<uint8_t> meta = read_all(p2);
    CHECK(meta.size() == tsr_gguf_get_meta_size(w));
    CHECK(std::vector<uint8_t>(file1.begin(), file1.begin() + (long) meta.size()) == meta);
    std::vector<uint8_t> meta_mem(tsr_gguf_get_meta_size(w));
    tsr_gguf_get_meta_data(w, meta_mem.data());
    CHECK(meta_mem == meta);

    // remove_key and set_kv
    tsr_gguf_context * w2 = tsr_gguf_init_empty();
    CHECK(tsr_gguf_set_kv(w2, r));
    CHECK(tsr_gguf_get_n_kv(w2) == tsr_gguf_get_n_kv(r));
    CHECK(tsr_gguf_remove_key(w2, "k.u8") == 0);
    CHECK(tsr_gguf_find_key(w2, "k.u8") == -1);
    tsr_gguf_free(w2);

    tsr_free(rctx);
    tsr_gguf_free(r);
    tsr_gguf_free(w);
    tsr_free(ctx);
    remove(p1.c_str());
    remove(p2.c_str());
}

namespace {

// A non-host buffer type (memory is plain malloc, but tessera must go through set/get):
// exercises the loader's staging path the way a GPU buffer would.
struct fake_dev {
    static int n_set;
    static size_t max_set;
    static const char * name(tsr_backend_buffer_type_t) { return "FakeDevice"; }
    static size_t align(tsr_backend_buffer_type_t) { return 64; }
    static void free_buf(tsr_backend_buffer_t b) { free(b->context); }
    static void * base(tsr_backend_buffer_t b) { return b->context; }
    static bool memset_t(tsr_backend_buffer_t, tsr_tensor * t, uint8_t v, size_t off, size_t n) {
        memset((uint8_t *) t->data + off, v, n);
        return true;
    }
    static bool set(tsr_backend_buffer_t, tsr_tensor * t, const void * d, size_t off, size_t n) {
        ++n_set;
        if (n > max_set) max_set = n;
        memcpy((uint8_t *) t->data + off, d, n);
        return true;
    }
    static bool get(tsr_backend_buffer_t, const tsr_tensor * t, void * d, size_t off, size_t n) {
        memcpy(d, (const uint8_t *) t->data + off, n);
        return true;
    }
    static void clear(tsr_backend_buffer_t b, uint8_t v) { memset(b->context, v, b->size); }
    static tsr_backend_buffer_t alloc(tsr_backend_buffer_type_t buft, size_t size) {
        void * p = aligned_alloc(64, (size + 63) / 64 * 64 + 64);
        tsr_backend_buffer_i i = {};
        i.free_buffer = free_buf;
        i.get_base = base;
        i.memset_tensor = memset_t;
        i.set_tensor = set;
        i.get_tensor = get;
        i.clear = clear;
        return tsr_backend_buffer_init(buft, i, p, size);
    }
    static tsr_backend_buffer_type * type() {
        static tsr_backend_buffer_type t = {{name, alloc, align, nullptr, nullptr, nullptr}, nullptr};
        return &t;
    }
};
int fake_dev::n_set = 0;
size_t fake_dev::max_set = 0;

struct progress_log {
    std::vector<std::pair<size_t, size_t>> calls;
    size_t cancel_after = SIZE_MAX;
    static bool cb(size_t done, size_t total, void * u) {
        progress_log * p = (progress_log *) u;
        p->calls.push_back({done, total});
        return done < p->cancel_after;
    }
};

} // namespace

TEST_CASE("gguf: load_tensors reads in chunks into host and non-host buffers", "[gguf][load]") {
    // a file with a tensor bigger than one chunk
    const int64_t big = (int64_t) TSR_GGUF_LOAD_CHUNK / 4 + 1000;
    tsr_context * src = tsr_init(tsr_init_params{(size_t) big * 4 + 4096 + 4 * tsr_tensor_overhead(), nullptr, false});
    REQUIRE(src);
    tsr_tensor * a = tsr_new_tensor_1d(src, TSR_TYPE_F32, big);
    tsr_tensor * b = tsr_new_tensor_2d(src, TSR_TYPE_F16, 33, 3);
    tsr_set_name(a, "big");
    tsr_set_name(b, "small");
    for (int64_t i = 0; i < big; ++i) ((float *) a->data)[i] = (float) (i % 1000) - 3.5f;
    for (size_t i = 0; i < tsr_nbytes(b); ++i) ((uint8_t *) b->data)[i] = (uint8_t) (i * 7);
    tsr_gguf_context * w = tsr_gguf_init_empty();
    REQUIRE(tsr_gguf_add_tensor(w, a));
    REQUIRE(tsr_gguf_add_tensor(w, b));
    const std::string path = tmp_file("load");
    REQUIRE(tsr_gguf_write_to_file(w, path.c_str(), false));

    for (int dev = 0; dev < 2; ++dev) {
        DYNAMIC_SECTION((dev ? "non-host buffer (staging)" : "host buffer (in place)")) {
            tsr_context * meta = nullptr;
            tsr_gguf_init_params ip = {true, &meta};
            tsr_gguf_context * g = tsr_gguf_init_from_file(path.c_str(), ip);
            REQUIRE(g);
            REQUIRE(meta);
            CHECK(tsr_get_tensor(meta, "big")->data == nullptr);
            CHECK_FALSE(tsr_gguf_load_tensors(g, meta, path.c_str(), nullptr, nullptr));  // nothing placed yet
            CHECK(std::string(tsr_last_error()).find("no memory") != std::string::npos);
            tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors_from_buft(meta, dev ? fake_dev::type() : tsr_backend_cpu_buffer_type());
            REQUIRE(buf);
            fake_dev::n_set = 0;
            fake_dev::max_set = 0;
            progress_log log;
            REQUIRE(tsr_gguf_load_tensors(g, meta, path.c_str(), progress_log::cb, &log));
            const size_t total = tsr_nbytes(a) + tsr_nbytes(b);
            REQUIRE(log.calls.size() >= 3);
            CHECK(log.calls.front().first == 0);
            CHECK(log.calls.back().first == total);
            for (size_t i = 1; i < log.calls.size(); ++i) CHECK(log.calls[i].first >= log.calls[i - 1].first);
            if (dev) {
                CHECK(fake_dev::n_set >= 3);                            // big came in 2 chunks, small in 1
                CHECK(fake_dev::max_set <= (size_t) TSR_GGUF_LOAD_CHUNK);  // bounded staging
            } else {
                CHECK(fake_dev::n_set == 0);
            }
            std::vector<uint8_t> got(tsr_nbytes(a));
            REQUIRE(tsr_backend_tensor_get(tsr_get_tensor(meta, "big"), got.data(), 0, got.size()));
            CHECK(memcmp(got.data(), a->data, got.size()) == 0);
            got.resize(tsr_nbytes(b));
            REQUIRE(tsr_backend_tensor_get(tsr_get_tensor(meta, "small"), got.data(), 0, got.size()));
            CHECK(memcmp(got.data(), b->data, got.size()) == 0);

            // a cancelled load says so
            progress_log stop;
            stop.cancel_after = 1;
            CHECK_FALSE(tsr_gguf_load_tensors(g, meta, path.c_str(), progress_log::cb, &stop));
            CHECK(std::string(tsr_last_error()).find("cancelled") != std::string::npos);

            // writing from (non-host) buffers gives the same file
            tsr_gguf_context * w2 = tsr_gguf_init_empty();
            REQUIRE(tsr_gguf_add_tensor(w2, tsr_get_tensor(meta, "big")));
            REQUIRE(tsr_gguf_add_tensor(w2, tsr_get_tensor(meta, "small")));
            const std::string p2 = tmp_file("load2");
            REQUIRE(tsr_gguf_write_to_file(w2, p2.c_str(), false));
            CHECK(read_all(p2) == read_all(path));
            remove(p2.c_str());
            tsr_gguf_free(w2);

            // the file shrank after parsing: the loader notices
            std::vector<uint8_t> whole = read_all(path);
            const std::string p3 = tmp_file("load3");
            write_all(p3, std::vector<uint8_t>(whole.begin(), whole.end() - 200));
            CHECK_FALSE(tsr_gguf_load_tensors(g, meta, p3.c_str(), nullptr, nullptr));
            CHECK(std::string(tsr_last_error()).find("past the end") != std::string::npos);
            remove(p3.c_str());

            // a context tensor that differs from the file is refused
            tsr_context * other = tsr_init(tsr_init_params{4 * tsr_tensor_overhead(), nullptr, true});
            tsr_set_name(tsr_new_tensor_1d(other, TSR_TYPE_F32, 7), "small");
            CHECK_FALSE(tsr_gguf_load_tensors(g, other, path.c_str(), nullptr, nullptr));
            CHECK(std::string(tsr_last_error()).find("in the file but") != std::string::npos);
            tsr_free(other);

            tsr_backend_buffer_free(buf);
            tsr_free(meta);
            tsr_gguf_free(g);
        }
    }
    remove(path.c_str());
    tsr_gguf_free(w);
    tsr_free(src);
}

// An array whose byte size overflows size_t is refused before anything is read or stored.
// A file of two small tensors, "a" (F32) and "b" (F16), with the given general.alignment
// and `pad` bytes of extra metadata (to move the data section); the values a test compares.
struct two_tensor_file {
    std::string path;
    std::vector<float> a;
    std::vector<uint16_t> b;
    size_t data_offset = 0;
    two_tensor_file(const char * stem, uint32_t alignment, size_t pad) : path(tmp_file(stem)), a(40), b(2 * 24) {
        for (size_t i = 0; i < a.size(); ++i) a[i] = (float) i * 0.25f - 3.0f;
        for (size_t i = 0; i < b.size(); ++i) b[i] = (uint16_t) (0x3c00 + i);
        tsr_context * src = tsr_init(tsr_init_params{4096 + 4 * tsr_tensor_overhead(), nullptr, false});
        tsr_tensor * ta = tsr_new_tensor_1d(src, TSR_TYPE_F32, (int64_t) a.size());
        tsr_tensor * tb = tsr_new_tensor_2d(src, TSR_TYPE_F16, 24, 2);
        tsr_set_name(ta, "a");
        tsr_set_name(tb, "b");
        memcpy(ta->data, a.data(), a.size() * 4);
        memcpy(tb->data, b.data(), b.size() * 2);
        tsr_gguf_context * w = tsr_gguf_init_empty();
        REQUIRE(tsr_gguf_set_val_u32(w, "general.alignment", alignment));
        REQUIRE(tsr_gguf_set_val_str(w, "test.pad", std::string(pad, 'x').c_str()));
        REQUIRE(tsr_gguf_add_tensor(w, ta));
        REQUIRE(tsr_gguf_add_tensor(w, tb));
        data_offset = tsr_gguf_get_meta_size(w);
        REQUIRE(tsr_gguf_write_to_file(w, path.c_str(), false));
        tsr_gguf_free(w);
        tsr_free(src);
    }
    ~two_tensor_file() { remove(path.c_str()); }
};

struct opened_file {
    tsr_context * meta = nullptr;
    tsr_gguf_context * g = nullptr;
    explicit opened_file(const std::string & path) {
        g = tsr_gguf_init_from_file(path.c_str(), tsr_gguf_init_params{true, &meta});
        REQUIRE(g);
    }
    ~opened_file() { tsr_free(meta); tsr_gguf_free(g); }
};

TEST_CASE("gguf: map_tensors uses the data in place, read-only", "[gguf][mmap]") {
#if defined(__unix__) || defined(__APPLE__)
    two_tensor_file f("map", 32, 3);
    opened_file o(f.path);
    tsr_backend_buffer_t buf = tsr_gguf_map_tensors(o.g, o.meta, f.path.c_str());
    INFO(tsr_last_error());
    REQUIRE(buf);
    CHECK(tsr_backend_buffer_is_host(buf));
    CHECK(tsr_backend_buffer_get_usage(buf) == TSR_BUFFER_USAGE_WEIGHTS);
    tsr_tensor * a = tsr_get_tensor(o.meta, "a");
    tsr_tensor * b = tsr_get_tensor(o.meta, "b");
    // in place: the tensors' data are the file's bytes at their offsets
    CHECK((char *) a->data - (char *) tsr_backend_buffer_get_base(buf) == (ptrdiff_t) f.data_offset);
    CHECK(memcmp(a->data, f.a.data(), f.a.size() * 4) == 0);
    CHECK(memcmp(b->data, f.b.data(), f.b.size() * 2) == 0);
    // writes are refused with an error naming the tensor, never a fault
    const float one = 1.0f;
    CHECK_FALSE(tsr_backend_tensor_set(a, &one, 0, sizeof one));
    CHECK(std::string(tsr_last_error()).find("tensor 'a' is read-only") != std::string::npos);
    CHECK_FALSE(tsr_backend_tensor_memset(b, 0, 0, 2));
    CHECK(std::string(tsr_last_error()).find("tensor 'b' is read-only") != std::string::npos);
    tsr_context * host = tsr_init(tsr_init_params{4096 + 2 * tsr_tensor_overhead(), nullptr, false});
    tsr_tensor * a2 = tsr_new_tensor_1d(host, TSR_TYPE_F32, (int64_t) f.a.size());
    CHECK_FALSE(tsr_backend_tensor_copy(a2, a));
    CHECK(std::string(tsr_last_error()).find("read-only") != std::string::npos);
    tsr_backend_buffer_clear(buf, 0);
    CHECK(memcmp(a->data, f.a.data(), f.a.size() * 4) == 0);
    // reads work
    REQUIRE(tsr_backend_tensor_copy(a, a2));
    CHECK(memcmp(a2->data, f.a.data(), f.a.size() * 4) == 0);
    tsr_free(host);
    tsr_backend_buffer_free(buf);
#else
    WARN("skipped: tessera maps files on POSIX systems only");
#endif
}

TEST_CASE("gguf: map_tensors refuses misaligned data and mismatched tensors, leaving the context unplaced", "[gguf][mmap]") {
    // alignment 8, and metadata padded until the data section starts off a multiple of 32
    size_t pad = 0;
    while (two_tensor_file("probe", 8, pad).data_offset % TSR_GGUF_MMAP_ALIGN == 0) ++pad;
    two_tensor_file f("map_misaligned", 8, pad);
    {
        opened_file o(f.path);
        CHECK(tsr_gguf_map_tensors(o.g, o.meta, f.path.c_str()) == nullptr);
        const std::string e = tsr_last_error();
        INFO(e);
#if defined(__unix__) || defined(__APPLE__)
        CHECK(e.find("tensor 'a' starts at byte " + std::to_string(f.data_offset) + ", not a multiple of 32") != std::string::npos);
#endif
        CHECK(tsr_get_tensor(o.meta, "a")->data == nullptr);
        // reading still works
        tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors_from_buft(o.meta, tsr_backend_cpu_buffer_type());
        REQUIRE(buf);
        REQUIRE(tsr_gguf_load_tensors(o.g, o.meta, f.path.c_str(), nullptr, nullptr));
        CHECK(memcmp(tsr_get_tensor(o.meta, "b")->data, f.b.data(), f.b.size() * 2) == 0);
        tsr_backend_buffer_free(buf);
    }
#if defined(__unix__) || defined(__APPLE__)
    two_tensor_file ok("map_other", 32, 0);
    opened_file o(ok.path);
    tsr_context * other = tsr_init(tsr_init_params{4 * tsr_tensor_overhead(), nullptr, true});
    tsr_set_name(tsr_new_tensor_1d(other, TSR_TYPE_F32, 40), "a");
    tsr_set_name(tsr_new_tensor_1d(other, TSR_TYPE_F32, 7), "b");
    CHECK(tsr_gguf_map_tensors(o.g, other, ok.path.c_str()) == nullptr);
    CHECK(std::string(tsr_last_error()).find("in the file but") != std::string::npos);
    CHECK(tsr_get_tensor(other, "a")->data == nullptr);  // nothing placed
    CHECK(tsr_get_tensor(other, "a")->buffer == nullptr);
    tsr_free(other);
#endif
}

TEST_CASE("gguf: array sizes that overflow are errors", "[gguf]") {
    tsr_gguf_context * g = tsr_gguf_init_empty();
    REQUIRE(g);
    const uint32_t one = 7;
    tsr_clear_error();
    CHECK_FALSE(tsr_gguf_set_arr_data(g, "big", TSR_GGUF_TYPE_UINT32, &one, SIZE_MAX / 2));
    CHECK(std::string(tsr_last_error()).find("overflow") != std::string::npos);
    CHECK(tsr_gguf_find_key(g, "big") < 0);
    tsr_gguf_free(g);
}

// Regressions (issue 15, items 4-5): an overlap hidden by a zero-size tensor between the two
// overlapping ranges (the check compared neighbours only), and messages whose numbers
// wrapped around 2^64 ("needs at least 0 bytes", "data [18446744073709551584, 0)").
TEST_CASE("gguf: overlaps behind a zero-size tensor; messages never print wrapped numbers", "[gguf][malformed]") {
    // A: F32 [32] at 0 (bytes [0, 128)); Z: F32 [0] at 32; B: F32 [8] at 64, inside A
    bytes w;
    w.b = {'G', 'G', 'U', 'F'};
    w.u32(3).u64(3).u64(0);
    w.str("A").u32(1).put<int64_t>(32).u32(0).u64(0);
    w.str("Z").u32(1).put<int64_t>(0).u32(0).u64(32);
    w.str("B").u32(1).put<int64_t>(8).u32(0).u64(64);
    w.pad(32);
    for (int i = 0; i < 32; ++i) w.put<float>((float) i);
    expect_bad(w.b, "tensor 'B' data [64, 96) overlaps tensor 'A' data [0, 128)");

    spec s;
    s.n_kv = 1ull << 63;  // 14 * 2^63 wraps to 0
    expect_bad(make(s), "key/value count 9223372036854775808 needs at least more than 2^64 bytes");
    s = spec();
    s.n_tensors = 1ull << 63;
    expect_bad(make(s), "tensor count 9223372036854775808 needs at least more than 2^64 bytes");
    s = spec();
    s.off1 = 18446744073709551584ull;  // 2^64 - 32: offset + size wraps
    expect_bad(make(s), "32 bytes of data at offset 18446744073709551584");
    CHECK(std::string(tsr_last_error()).find(", 0)") == std::string::npos);
}

// ---- issue 15, item 4: every loading mode validates alike; parsing memory is bounded ----

namespace {

// Every allocation of this test program goes through these counters, so a test can read
// the peak bytes a call held (the parser's containers and the context block alike).
std::atomic<size_t> g_heap_now{0}, g_heap_peak{0};

void * counted_alloc(size_t n, size_t align) {
    const size_t hdr = align > 16 ? align : 16;  // room for (hdr, n) in front, alignment kept
    void * base = nullptr;
    if (posix_memalign(&base, hdr, n + hdr) != 0) return nullptr;
    size_t * tag = (size_t *) ((char *) base + hdr);
    tag[-1] = n;
    tag[-2] = hdr;
    const size_t now = g_heap_now.fetch_add(n) + n;
    size_t peak = g_heap_peak.load();
    while (now > peak && !g_heap_peak.compare_exchange_weak(peak, now)) {}
    return tag;
}

void counted_free(void * p) {
    if (!p) return;
    size_t * tag = (size_t *) p;
    g_heap_now.fetch_sub(tag[-1]);
    free((char *) p - tag[-2]);
}

void * counted_alloc_or_throw(size_t n, size_t align) {
    void * p = counted_alloc(n, align);
    if (!p) throw std::bad_alloc();
    return p;
}

} // namespace

void * operator new(size_t n) { return counted_alloc_or_throw(n, 16); }
void * operator new[](size_t n) { return counted_alloc_or_throw(n, 16); }
void * operator new(size_t n, std::align_val_t a) { return counted_alloc_or_throw(n, (size_t) a); }
void * operator new[](size_t n, std::align_val_t a) { return counted_alloc_or_throw(n, (size_t) a); }
void * operator new(size_t n, const std::nothrow_t &) noexcept { return counted_alloc(n, 16); }
void * operator new[](size_t n, const std::nothrow_t &) noexcept { return counted_alloc(n, 16); }
void * operator new(size_t n, std::align_val_t a, const std::nothrow_t &) noexcept { return counted_alloc(n, (size_t) a); }
void * operator new[](size_t n, std::align_val_t a, const std::nothrow_t &) noexcept { return counted_alloc(n, (size_t) a); }
void operator delete(void * p) noexcept { counted_free(p); }
void operator delete[](void * p) noexcept { counted_free(p); }
void operator delete(void * p, size_t) noexcept { counted_free(p); }
void operator delete[](void * p, size_t) noexcept { counted_free(p); }
void operator delete(void * p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void * p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void * p, size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void * p, size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void * p, const std::nothrow_t &) noexcept { counted_free(p); }
void operator delete[](void * p, const std::nothrow_t &) noexcept { counted_free(p); }
void operator delete(void * p, std::align_val_t, const std::nothrow_t &) noexcept { counted_free(p); }
void operator delete[](void * p, std::align_val_t, const std::nothrow_t &) noexcept { counted_free(p); }

namespace {

struct parse_outcome {
    bool ok = false;
    std::string error;      // without the "gguf '<name>': " prefix, which names the source
    size_t peak_bytes = 0;  // heap held at the peak of the call, above what was held before
};

std::string without_source_name(const std::string & err) {
    const size_t at = err.find("': ");
    return at == std::string::npos ? err : err.substr(at + 3);
}

// Parse in one mode: from the file or from memory, with no context, a no_alloc one or one holding the data.
enum class ctx_mode { none, no_alloc, with_data };

parse_outcome parse_in_mode(const std::vector<uint8_t> & b, const std::string & path, bool from_file, ctx_mode mode) {
    tsr_context * ctx = nullptr;
    tsr_gguf_init_params p = {mode == ctx_mode::no_alloc, mode == ctx_mode::none ? nullptr : &ctx};
    const size_t before = g_heap_now.load();
    g_heap_peak.store(before);
    tsr_gguf_context * g = from_file ? tsr_gguf_init_from_file(path.c_str(), p) : tsr_gguf_init_from_buffer(b.data(), b.size(), p);
    parse_outcome o;
    o.peak_bytes = g_heap_peak.load() - before;
    o.ok = g != nullptr;
    if (!g) o.error = without_source_name(tsr_last_error());
    tsr_gguf_free(g);
    tsr_free(ctx);
    return o;
}

// Every mode gives the same verdict and message; each one's peak heap stays within 4 x the file + 64 MiB.
parse_outcome parse_in_every_mode(const std::vector<uint8_t> & b, const char * tag) {
    const std::string path = tmp_file(tag);
    write_all(path, b);
    const size_t bound = 4 * b.size() + ((size_t) 64 << 20);
    parse_outcome first;
    for (int from_file = 0; from_file < 2; ++from_file) {
        for (ctx_mode mode : {ctx_mode::none, ctx_mode::no_alloc, ctx_mode::with_data}) {
            const parse_outcome o = parse_in_mode(b, path, from_file != 0, mode);
            INFO("from_file " << from_file << ", context mode " << (int) mode << ": " << (o.ok ? "accepted" : o.error));
            CHECK(o.peak_bytes <= bound);
            if (from_file == 0 && mode == ctx_mode::none) {
                first = o;
            } else {
                CHECK(o.ok == first.ok);
                CHECK(o.error == first.error);
            }
        }
    }
    remove(path.c_str());
    return first;
}

} // namespace

TEST_CASE("gguf: a dimension of 0 next to one beyond 2^56 is refused in every mode", "[gguf][malformed]") {
    bytes w;
    w.b = {'G', 'G', 'U', 'F'};
    w.u32(3).u64(1).u64(0);
    w.str("z").u32(2).put<int64_t>(0).put<int64_t>(INT64_MAX - 7).u32(0).u64(0);  // 0 bytes of data
    w.pad(32);
    const parse_outcome o = parse_in_every_mode(w.b, "dim0");
    CHECK_FALSE(o.ok);
    CHECK(o.error.find("ne[1] = 9223372036854775800 exceeds the largest dimension") != std::string::npos);

    // each dimension within 2^56, but the strides of [0, 2^56, 2^56] wrap around 2^64
    bytes s;
    s.b = {'G', 'G', 'U', 'F'};
    s.u32(3).u64(1).u64(0);
    s.str("z").u32(3).put<int64_t>(0).put<int64_t>(1ll << 56).put<int64_t>(1ll << 56).u32(0).u64(0);
    s.pad(32);
    const parse_outcome o2 = parse_in_every_mode(s.b, "dim0_strides");
    CHECK_FALSE(o2.ok);
    CHECK(o2.error.find("tensor 'z': shape [0, 72057594037927936, 72057594037927936, 1] of type f32 overflows") != std::string::npos);
}

TEST_CASE("gguf: a data section beyond the end of the file is refused in every mode", "[gguf][malformed]") {
    // general.alignment 2^31: the data section starts at byte 2^31 of a file of 100-odd bytes;
    // its one tensor is empty, so no range check would catch it
    bytes w;
    w.b = {'G', 'G', 'U', 'F'};
    w.u32(3).u64(1).u64(1);
    w.str("general.alignment").u32(4).u32(1u << 31);
    w.str("empty").u32(1).put<int64_t>(0).u32(0).u64(0);
    w.pad(32);
    const parse_outcome o = parse_in_every_mode(w.b, "align31");
    CHECK_FALSE(o.ok);
    CHECK(o.error.find("starts at byte 2147483648") != std::string::npos);
    CHECK(o.error.find("past the end of the file (size " + std::to_string(w.size()) + ")") != std::string::npos);
}

namespace {

// A file holding nothing but n tensor infos (zero-size tensors, distinct names).
std::vector<uint8_t> tensor_infos_only(uint64_t n) {
    bytes w;
    w.b = {'G', 'G', 'U', 'F'};
    w.u32(3).u64(n).u64(0);
    char name[24];
    for (uint64_t i = 0; i < n; ++i) {
        snprintf(name, sizeof name, "t%06llu", (unsigned long long) i);
        w.str(name).u32(1).put<int64_t>(0).u32(0).u64(0);
    }
    w.pad(32);
    return w.b;
}

// A file holding nothing but n one-byte key/value pairs.
std::vector<uint8_t> kvs_only(uint64_t n) {
    bytes w;
    w.b = {'G', 'G', 'U', 'F'};
    w.u32(3).u64(0).u64(n);
    char key[24];
    for (uint64_t i = 0; i < n; ++i) {
        snprintf(key, sizeof key, "k%06llu", (unsigned long long) i);
        w.str(key).u32(0);
        w.b.push_back(7);
    }
    w.pad(32);
    return w.b;
}

} // namespace

// Regression (issue 15, item 4): a file of only tensor infos cost 17x its size (tensor infos,
// the duplicate-name set, the context's tensor headers); one of only tiny keys ~10x.
TEST_CASE("gguf: parsing memory stays within 4 x the file size + 64 MiB", "[gguf][malformed][memory]") {
    SECTION("a few thousand tensor infos load") {
        const parse_outcome o = parse_in_every_mode(tensor_infos_only(5000), "infos_small");
        CHECK(o.ok);
    }
    SECTION("100,000 tensor infos, near the limit, load within the bound") {
        const parse_outcome o = parse_in_every_mode(tensor_infos_only(100000), "infos_near");
        CHECK(o.ok);
    }
    SECTION("300,000 one-byte keys, near the limit, load within the bound") {
        const parse_outcome o = parse_in_every_mode(kvs_only(300000), "kvs_near");
        CHECK(o.ok);
    }
    SECTION("250,000 tensor infos (9.75 MB) are refused within the bound") {
        const parse_outcome o = parse_in_every_mode(tensor_infos_only(250000), "infos_big");
        CHECK_FALSE(o.ok);
        CHECK(o.error.find("the tensor table needs") != std::string::npos);
        CHECK(o.error.find("parsing budget") != std::string::npos);
    }
    SECTION("1,000,000 one-byte keys (20 MB) are refused within the bound") {
        const parse_outcome o = parse_in_every_mode(kvs_only(1000000), "kvs_big");
        CHECK_FALSE(o.ok);
        CHECK(o.error.find("the key/value table needs") != std::string::npos);
    }
}
