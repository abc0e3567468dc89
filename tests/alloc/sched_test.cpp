// The backend scheduler on the CPU: two masked backends over one CPU backend stand for two
// devices (each with a buffer type only it accepts), so fallbacks, splits and input copies
// are forced and counted by hand; results must equal the graph computed on one backend.
#include <catch2/catch.hpp>

#include "tessera/sched.h"
#include "backend_support.h"

#include <cstring>
#include <string>
#include <vector>

namespace {

bool is_unary(const tsr_tensor * t, tsr_unary_op u) { return t->op == TSR_OP_UNARY && tsr_get_op_params_i32(t, 0) == (int32_t) u; }
bool is_silu(const tsr_tensor * t) { return is_unary(t, TSR_UNARY_OP_SILU); }
bool is_gelu(const tsr_tensor * t) { return is_unary(t, TSR_UNARY_OP_GELU); }
bool silu_or_gelu(const tsr_tensor * t) { return is_silu(t) || is_gelu(t); }

// h = W1 x; s = silu(h); y = W2 s; g = gelu(y); o = g + s. Weights in their own WEIGHTS
// buffer of wbuft (seeded), x a graph input.
struct mlp {
    tsr_context * ctx_w = nullptr;
    tsr_context * ctx = nullptr;
    tsr_backend_buffer_t wbuf = nullptr;
    tsr_tensor *W1, *W2, *x, *h, *s, *y, *g, *o;
    tsr_cgraph * gf = nullptr;
    std::vector<float> x_values;

    explicit mlp(tsr_backend_buffer_type_t wbuft) {
        ctx_w = tsr_init({4 * tsr_tensor_overhead(), nullptr, true});
        ctx = tsr_init({32 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
        REQUIRE((ctx_w && ctx));
        W1 = tsr_set_name(tsr_new_tensor_2d(ctx_w, TSR_TYPE_F32, 16, 16), "W1");
        W2 = tsr_set_name(tsr_new_tensor_2d(ctx_w, TSR_TYPE_F32, 16, 16), "W2");
        wbuf = tsr_backend_alloc_ctx_tensors_from_buft(ctx_w, wbuft);
        REQUIRE(wbuf != nullptr);
        tsrt::fill_random(W1, 11, -0.5f, 0.5f);
        tsrt::fill_random(W2, 12, -0.5f, 0.5f);
        x = tsr_set_name(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 16, 3), "x");
        tsr_set_input(x);
        h = tsr_set_name(tsr_mul_mat(ctx, W1, x), "h");
        s = tsr_set_name(tsr_silu(ctx, h), "s");
        y = tsr_set_name(tsr_mul_mat(ctx, W2, s), "y");
        g = tsr_set_name(tsr_gelu(ctx, y), "g");
        o = tsr_set_name(tsr_add(ctx, g, s), "o");
        tsr_set_output(o);
        gf = tsr_new_graph(ctx);
        REQUIRE(tsr_build_forward_expand(gf, o));
        std::mt19937 rng(13);
        x_values = tsrt::uniform(16 * 3, rng, -1.0f, 1.0f);
    }
    ~mlp() {
        tsr_backend_buffer_free(wbuf);
        tsr_free(ctx);
        tsr_free(ctx_w);
    }
};

// The reference: the same graph on the CPU backend alone, through gallocr.
std::vector<float> reference_output() {
    mlp m(tsr_backend_cpu_buffer_type());
    tsr::gallocr ga(tsr_backend_cpu_buffer_type());
    REQUIRE(tsr_gallocr_alloc_graph(ga, m.gf));
    tsrt::upload(m.x, m.x_values);
    REQUIRE(tsr_backend_graph_compute(tsrt::cpu(), m.gf) == TSR_STATUS_SUCCESS);
    return tsrt::download(m.o);
}

std::vector<float> sched_output(tsr_backend_sched_t sched, mlp & m) {
    REQUIRE(tsr_backend_sched_alloc_graph(sched, m.gf));
    tsrt::upload(m.x, m.x_values);
    REQUIRE(tsr_backend_sched_graph_compute(sched, m.gf) == TSR_STATUS_SUCCESS);
    return tsrt::download(m.o);
}

struct two_devices {
    tsrt::masked_backend a, b;
    tsr_backend_t list[2];
    explicit two_devices(tsrt::masked_backend::predicate a_declines, tsrt::masked_backend::predicate b_declines = nullptr,
                         const tsr_host_allocator * alloc = nullptr)
        : a(tsrt::cpu(), "devA", std::move(a_declines), alloc), b(tsrt::cpu(), "devB", std::move(b_declines), alloc) {
        list[0] = a;
        list[1] = b;
    }
};

} // namespace

TEST_CASE("sched: ops a backend lacks fall back; splits and copies as counted by hand; results bit-identical", "[sched]") {
    const std::vector<float> ref = reference_output();
    two_devices d(silu_or_gelu);   // devA declines silu and gelu; devB (the last) runs all
    tsr::backend_sched sched(tsr_backend_sched_new(d.list, nullptr, 2, 64, false));
    REQUIRE(sched.get() != nullptr);
    mlp m(d.a.buft());             // weights on devA

    // h, y: beside their weights on devA; s, g: only devB has them; o: devA by expansion.
    // Splits [h]A [s]B [y]A [g]B [o]A. Copies: x (input, on B) -> A; h -> B; s -> A; y -> B;
    // g -> A; o reads s on A again: the copy s -> A is shared, not made twice.
    REQUIRE(tsr_backend_sched_reserve(sched, m.gf));
    CHECK(tsr_backend_sched_get_n_splits(sched) == 5);
    CHECK(tsr_backend_sched_get_n_split_inputs(sched) == 5);
    const tsr_backend_t want[5] = {d.a, d.b, d.a, d.b, d.a};
    for (int i = 0; i < 5; i++) {
        CHECK(tsr_backend_sched_get_split_backend(sched, i) == want[i]);
        CHECK(tsr_backend_sched_get_split_n_inputs(sched, i) == 1);
    }
    CHECK(tsr_backend_sched_get_n_copies(sched) == 1);
    CHECK(m.h->src[1] == m.x);     // reserve leaves the graph's sources as they were

    const std::vector<float> got = sched_output(sched, m);
    CHECK(tsr_backend_sched_get_tensor_backend(sched, m.s) == (tsr_backend_t) d.b);
    CHECK(tsr_backend_sched_get_tensor_backend(sched, m.o) == (tsr_backend_t) d.a);
    CHECK(d.a.n_computes == 3);
    CHECK(d.b.n_computes == 2);
    CHECK(m.o->src[1] == m.s);     // compute puts the original sources back
    REQUIRE(got.size() == ref.size());
    CHECK(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)) == 0);
}

TEST_CASE("sched: a user override wins; backends that read each other's memory need no copies", "[sched]") {
    const std::vector<float> ref = reference_output();
    {
        two_devices d(silu_or_gelu);
        tsr::backend_sched sched(tsr_backend_sched_new(d.list, nullptr, 2, 64, false));
        mlp m(d.a.buft());
        tsr_backend_sched_set_tensor_backend(sched, m.o, d.b);
        // [h]A [s]B [y]A [g o]B: o joins g on devB; it reads s there without a copy
        REQUIRE(tsr_backend_sched_alloc_graph(sched, m.gf));
        CHECK(tsr_backend_sched_get_n_splits(sched) == 4);
        CHECK(tsr_backend_sched_get_n_split_inputs(sched) == 4);
        CHECK(tsr_backend_sched_get_tensor_backend(sched, m.o) == (tsr_backend_t) d.b);
        const std::vector<float> got = sched_output(sched, m);
        CHECK(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)) == 0);
    }
    {
        // two plain CPU backends: both read host memory, so splits need no copies at all
        tsrt::backend_holder c1(1), c2(2);
        tsr_backend_t list[2] = {c1, c2};
        tsr::backend_sched sched(tsr_backend_sched_new(list, nullptr, 2, 64, false));
        mlp m(tsr_backend_cpu_buffer_type());
        tsr_backend_sched_set_tensor_backend(sched, m.g, c2);
        REQUIRE(tsr_backend_sched_alloc_graph(sched, m.gf));
        // [h s y]c1 [g o]c2: o follows g, as c2 (the last backend) spreads to its neighbours
        // once the others have grown
        CHECK(tsr_backend_sched_get_n_splits(sched) == 2);
        CHECK(tsr_backend_sched_get_n_split_inputs(sched) == 0);
        const std::vector<float> got = sched_output(sched, m);
        CHECK(tsrt::nmse(got, ref) < 1e-12);
    }
}

TEST_CASE("sched: each backend's compute buffer is planned at its lower bound, input copies included", "[sched]") {
    two_devices d(silu_or_gelu);
    tsr::backend_sched sched(tsr_backend_sched_new(d.list, nullptr, 2, 64, false));
    mlp m(d.a.buft());
    REQUIRE(tsr_backend_sched_reserve(sched, m.gf));
    for (tsr_backend_t be : d.list) {
        tsr_backend_sched_buffer_info info{};
        REQUIRE(tsr_backend_sched_get_buffer_info(sched, be, &info));
        INFO(tsr_backend_name(be) << ": planned " << info.planned_size << ", lower bound " << info.lower_bound);
        CHECK(info.lower_bound > 0);
        CHECK(info.planned_size <= info.lower_bound);
        CHECK(info.buffer_size >= info.planned_size);
        CHECK(tsr_backend_sched_get_buffer_size(sched, be) == info.buffer_size);
        // every copy here is a [16, 3] f32 tensor (192 bytes, one 64-byte aligned slot each)
        CHECK(info.input_bytes == (size_t) info.n_inputs * 192);
    }
    tsr_backend_sched_buffer_info ia{}, ib{};
    REQUIRE(tsr_backend_sched_get_buffer_info(sched, d.a, &ia));
    REQUIRE(tsr_backend_sched_get_buffer_info(sched, d.b, &ib));
    CHECK(ia.n_inputs == 3);   // x, s, g
    CHECK(ib.n_inputs == 2);   // h, y
    tsr_backend_sched_buffer_info none{};
    CHECK_FALSE(tsr_backend_sched_get_buffer_info(sched, tsrt::cpu(), &none));
    CHECK(std::string(tsr_last_error()).find("not in the scheduler") != std::string::npos);
}

TEST_CASE("sched: an op no backend runs is refused at reserve, naming it", "[sched]") {
    two_devices d(is_gelu, is_gelu);
    tsr::backend_sched sched(tsr_backend_sched_new(d.list, nullptr, 2, 64, false));
    mlp m(d.a.buft());
    CHECK_FALSE(tsr_backend_sched_reserve(sched, m.gf));
    const std::string err = tsr_last_error();
    INFO(err);
    CHECK(err.find("'g'") != std::string::npos);
    CHECK(err.find("GELU") != std::string::npos);
    CHECK(err.find("no backend supports") != std::string::npos);
    CHECK(m.o->src[0] == m.g);    // nothing of the graph changed
    CHECK(m.o->data == nullptr);
    // an override onto a backend that lacks the op is refused the same way
    two_devices e(is_gelu);
    tsr::backend_sched s2(tsr_backend_sched_new(e.list, nullptr, 2, 64, false));
    mlp m2(e.a.buft());
    tsr_backend_sched_set_tensor_backend(s2, m2.g, e.a);
    CHECK_FALSE(tsr_backend_sched_alloc_graph(s2, m2.gf));
    CHECK(std::string(tsr_last_error()).find("assigned to devA, which does not support it") != std::string::npos);
}

TEST_CASE("sched: after reserve, alloc_graph and compute allocate no host memory; parallel rotates input copies", "[sched]") {
    const std::vector<float> ref = reference_output();
    tsr_tracing_allocator * tr = tsr_tracing_allocator_new(nullptr);
    REQUIRE(tr != nullptr);
    {
        tsrt::backend_holder cpu(2);
        tsr_backend_cpu_set_host_allocator(cpu, tsr_tracing_allocator_host(tr));
        tsrt::masked_backend a(cpu, "devA", silu_or_gelu, tsr_tracing_allocator_host(tr));
        tsrt::masked_backend b(cpu, "devB", nullptr, tsr_tracing_allocator_host(tr));
        tsr_backend_t list[2] = {a, b};
        tsr::backend_sched sched(tsr_backend_sched_new(list, nullptr, 2, 64, true));
        CHECK(tsr_backend_sched_get_n_copies(sched) == TSR_SCHED_MAX_COPIES);
        mlp m(a.buft());
        REQUIRE(tsr_backend_sched_reserve(sched, m.gf));
        const tsr_tracing_stats before = tsr_tracing_allocator_get_stats(tr);
        CHECK(before.n_allocs > 0);
        for (int run = 0; run < TSR_SCHED_MAX_COPIES + 1; run++) {   // every copy used, one twice
            const std::vector<float> got = sched_output(sched, m);
            CHECK(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)) == 0);
        }
        CHECK(tsr_tracing_allocator_get_stats(tr).n_allocs == before.n_allocs);
    }
    tsr_tracing_allocator_free(tr);
}

TEST_CASE("sched: the eval callback observes the nodes it asks for and can stop the graph", "[sched]") {
    two_devices d(silu_or_gelu);
    tsr::backend_sched sched(tsr_backend_sched_new(d.list, nullptr, 2, 64, false));
    mlp m(d.a.buft());
    struct watch { std::vector<std::string> seen; std::vector<float> s_values; bool stop_at_y = false; } w;
    tsr_backend_sched_set_eval_callback(sched, [](tsr_tensor * t, bool ask, void * u) {
        watch & wt = *static_cast<watch *>(u);
        const std::string n = t->name;
        if (ask) return n == "s" || n == "y";
        wt.seen.push_back(n);
        if (n == "s") wt.s_values = tsrt::download(t);
        return !(wt.stop_at_y && n == "y");
    }, &w);
    const std::vector<float> ref = reference_output();
    CHECK(tsrt::nmse(sched_output(sched, m), ref) == 0.0);
    CHECK(w.seen == std::vector<std::string>{"s", "y"});
    // s observed when computed: silu(W1 x), checked in double precision
    std::vector<float> w1 = tsrt::download(m.W1);
    for (int t = 0; t < 3; t++) {
        for (int r = 0; r < 16; r++) {
            double acc = 0;
            for (int k = 0; k < 16; k++) acc += (double) w1[(size_t) (r * 16 + k)] * m.x_values[(size_t) (t * 16 + k)];
            CHECK(w.s_values[(size_t) (t * 16 + r)] == Approx(acc / (1.0 + std::exp(-acc))).epsilon(1e-4).margin(1e-6));
        }
    }
    w.seen.clear();
    w.stop_at_y = true;
    tsr_backend_sched_reset(sched);
    mlp m2(d.a.buft());
    REQUIRE(tsr_backend_sched_alloc_graph(sched, m2.gf));
    tsrt::upload(m2.x, m2.x_values);
    CHECK(tsr_backend_sched_graph_compute(sched, m2.gf) == TSR_STATUS_ABORTED);
    CHECK(w.seen == std::vector<std::string>{"s", "y"});
}

TEST_CASE("sched: bad arguments are errors", "[sched]") {
    tsr_backend_t none[1] = {nullptr};
    CHECK(tsr_backend_sched_new(none, nullptr, 1, 64, false) == nullptr);
    CHECK(std::string(tsr_last_error()).find("backend 0 is NULL") != std::string::npos);
    tsr_backend_t twice[2] = {tsrt::cpu(), tsrt::cpu()};
    CHECK(tsr_backend_sched_new(twice, nullptr, 2, 64, false) == nullptr);
    CHECK(tsr_backend_sched_new(twice, nullptr, 0, 64, false) == nullptr);
    tsr::backend_sched one(tsr_backend_sched_new(twice, nullptr, 1, 4, false));
    mlp m(tsr_backend_cpu_buffer_type());
    CHECK_FALSE(tsr_backend_sched_reserve(one, m.gf));   // 5 nodes + 3 leafs > 4
    CHECK(std::string(tsr_last_error()).find("graph_size 4") != std::string::npos);
}

TEST_CASE("sched: free puts back the sources of a graph allocated and not computed", "[sched]") {
    two_devices e(silu_or_gelu);
    mlp m(e.a.buft());
    tsr_backend_sched_t sched = tsr_backend_sched_new(e.list, nullptr, 2, 64, false);
    REQUIRE(sched != nullptr);
    REQUIRE(tsr_backend_sched_alloc_graph(sched, m.gf));
    CHECK(m.h->src[1] != m.x);   // h runs on devA and reads its copy of the input x
    tsr_backend_sched_free(sched);
    CHECK(m.h->src[1] == m.x);
    CHECK(m.y->src[1] == m.s);
}

namespace {

// A host allocator that remembers the blocks it handed out, so a test can tell the
// scheduler's memory from any other.
struct recording_allocator {
    std::vector<std::pair<const char *, size_t>> blocks;
    tsr_host_allocator host{};
    tsr_host_allocator upstream = *tsr_get_host_allocator();   // a copy: installing ours replaces the current one
    recording_allocator() {
        host.user = this;
        host.alloc = [](size_t size, size_t align, void * user) {
            auto * r = static_cast<recording_allocator *>(user);
            void * p = r->upstream.alloc(size, align, r->upstream.user);
            if (p) r->blocks.emplace_back(static_cast<const char *>(p), size);
            return p;
        };
        host.free = [](void * p, void * user) {
            auto * r = static_cast<recording_allocator *>(user);
            r->upstream.free(p, r->upstream.user);
        };
    }
    bool owns(const void * p, size_t n) const {
        for (const auto & b : blocks)
            if (static_cast<const char *>(p) >= b.first && static_cast<const char *>(p) + n <= b.first + b.second) return true;
        return false;
    }
};

// Where the bytes a device buffer hands out go during a graph.
struct get_record { const void * to; size_t size; std::string from; };
std::vector<get_record> g_gets;
bool recording_get(tsr_backend_buffer_t, const tsr_tensor * t, void * data, size_t offset, size_t size) {
    g_gets.push_back({data, size, t->name});
    std::memcpy(data, static_cast<const char *>(t->data) + offset, size);
    return true;
}

} // namespace

TEST_CASE("sched: copies between two devices go through the scheduler's staging, sized at reserve", "[sched]") {
    const std::vector<float> ref = reference_output();
    recording_allocator rec;   // must outlive every buffer made while it is installed
    tsr_set_host_allocator(&rec.host);
    {
        two_devices e(silu_or_gelu);
        e.a.as_device_memory();
        e.b.as_device_memory();
        tsr::backend_sched sched(tsr_backend_sched_new(e.list, nullptr, 2, 64, false));
        REQUIRE(sched.get() != nullptr);
        mlp m(e.a.buft());
        REQUIRE(tsr_backend_sched_reserve(sched, m.gf));
        // [h]A [s]B [y]A [g]B [o]A: x (the input, on devB) and s to devA, h and y to devB, g to
        // devA: five copies of 16 x 3 floats, each device -> host -> device
        CHECK(tsr_backend_sched_get_staging_size(sched) == 16 * 3 * sizeof(float));
        const size_t n_blocks = rec.blocks.size();
        for (int run = 0; run < 2; run++) {
            REQUIRE(tsr_backend_sched_alloc_graph(sched, m.gf));
            tsrt::upload(m.x, m.x_values);
            for (tsr_tensor * t : {m.h, m.s}) t->buffer->iface.get_tensor = recording_get;
            g_gets.clear();
            REQUIRE(tsr_backend_sched_graph_compute(sched, m.gf) == TSR_STATUS_SUCCESS);
            std::string names;
            for (const get_record & g : g_gets) names += g.from + " ";
            CHECK(names == "x h s y g ");
            for (const get_record & g : g_gets) CHECK(rec.owns(g.to, g.size));
            const std::vector<float> got = tsrt::download(m.o);
            CHECK(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)) == 0);
        }
        CHECK(rec.blocks.size() == n_blocks);   // nothing allocated after reserve
    }
    tsr_set_host_allocator(nullptr);
}
