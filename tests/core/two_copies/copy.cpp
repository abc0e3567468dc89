// One TSR_STATIC copy of tessera with its implementation, compiled twice into one binary
// (TSR_COPY=a: this tree's headers; TSR_COPY=b: a changed single header, see
// CMakeLists.txt). It exercises every part whose internals differ between the copies
// (gallocr, GGUF, the pool allocator, the CPU backend), so a shared definition would
// corrupt one copy's objects. The C++ wrappers are used too: they must stay private.
#define TSR_STATIC
#define TSR_IMPLEMENTATION
#ifdef TSR_COPY_SINGLE_HEADER
#include "tessera.h"
#else
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera/gguf.h"
#include "tessera-cpu.h"
#endif

#include <cmath>
#include <cstdio>
#include <vector>

#define TSR_CAT2(a, b) a##b
#define TSR_CAT(a, b) TSR_CAT2(a, b)
#define TSR_STR2(a) #a
#define TSR_STR(a) TSR_STR2(a)
#define TSR_COPY_NAME TSR_STR(TSR_COPY)

// The only external symbol: two_copies_run_a / two_copies_run_b.
extern "C" int TSR_CAT(two_copies_run_, TSR_COPY)(int seed);

extern "C" int TSR_CAT(two_copies_run_, TSR_COPY)(int seed) {
    int failures = 0;
    auto check = [&](bool ok, const char * what) {
        if (!ok) { std::fprintf(stderr, "copy %s: %s failed: %s\n", TSR_COPY_NAME, what, tsr_last_error()); failures++; }
    };
    // pool allocator under the CPU buffer type: blocks kept between the two plans below
    tsr_pool_allocator * pool = tsr_pool_allocator_new(nullptr, 1 << 20, 0.5, true);
    check(pool != nullptr, "pool_allocator_new");
    tsr_backend_buffer_type_t buft = tsr_backend_cpu_buffer_type_with_allocator(tsr_pool_allocator_host(pool));
    {
    tsr::context ctx(32 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true);
    const int n = 64 + seed;
    tsr_tensor * a = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, n);
    tsr_tensor * b = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, n);
    tsr_set_input(a);
    tsr_set_input(b);
    tsr_tensor * c = tsr_scale(ctx, tsr_mul(ctx, tsr_add(ctx, a, b), b), 0.5f);
    tsr_set_output(c);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    check(tsr_build_forward_expand(gf, c), "build");
    tsr::backend cpu(tsr_backend_cpu_init());
    tsr::gallocr galloc(buft);
    check(tsr_gallocr_reserve(galloc, gf) && tsr_gallocr_alloc_graph(galloc, gf), "gallocr");
    std::vector<float> x((size_t)n), y((size_t)n), z((size_t)n);
    for (int i = 0; i < n; i++) { x[(size_t)i] = (float)(i + seed); y[(size_t)i] = 0.25f * (float)(i % 7); }
    tsr_backend_tensor_set(a, x.data(), 0, x.size() * sizeof(float));
    tsr_backend_tensor_set(b, y.data(), 0, y.size() * sizeof(float));
    check(tsr_backend_graph_compute(cpu, gf) == TSR_STATUS_SUCCESS, "compute");
    tsr_backend_tensor_get(c, z.data(), 0, z.size() * sizeof(float));
    for (int i = 0; i < n; i++) {
        const double ref = 0.5 * ((double)x[(size_t)i] + y[(size_t)i]) * y[(size_t)i];
        if (std::fabs(z[(size_t)i] - ref) > 1e-5 * (1 + std::fabs(ref))) { check(false, "result"); break; }
    }
    // GGUF round trip in memory
    tsr::gguf g(tsr_gguf_init_empty());
    check(tsr_gguf_set_val_i32(g, "copy.seed", seed) && tsr_gguf_set_val_str(g, "copy.name", TSR_COPY_NAME), "gguf set");
    std::vector<unsigned char> meta(tsr_gguf_get_meta_size(g));
    tsr_gguf_get_meta_data(g, meta.data());
    tsr::gguf r(tsr_gguf_init_from_buffer(meta.data(), meta.size(), tsr_gguf_init_params{true, nullptr}));
    check(r.get() && tsr_gguf_get_val_i32(r, tsr_gguf_find_key(r, "copy.seed")) == seed, "gguf read");
    const tsr_pool_allocator_stats st = tsr_pool_allocator_get_stats(pool);
    check(st.upstream_allocs >= 1, "pool stats");
    }
    tsr_backend_cpu_buffer_type_free(buft);
    tsr_pool_allocator_free(pool);
    return failures;
}
