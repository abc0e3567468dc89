// Host allocator hooks: the pool allocator (reuse, waste limit, trimming, locked and
// unlocked), the tracing allocator (counts), and buffer types built on them.
#include <catch2/catch.hpp>

#include "tessera/alloc.h"

#include <thread>
#include <vector>

TEST_CASE("tracing allocator counts allocations", "[alloc][host]") {
    tsr_tracing_allocator * tr = tsr_tracing_allocator_new(nullptr);
    REQUIRE(tr);
    const tsr_host_allocator * h = tsr_tracing_allocator_host(tr);
    void * a = h->alloc(1000, 64, h->user);
    void * b = h->alloc(24, 4096, h->user);
    REQUIRE(a);
    REQUIRE(b);
    CHECK(((uintptr_t) a % 64) == 0);
    CHECK(((uintptr_t) b % 4096) == 0);
    tsr_tracing_stats s = tsr_tracing_allocator_get_stats(tr);
    CHECK(s.current_bytes == 1024);
    CHECK(s.peak_bytes == 1024);
    CHECK(s.n_allocs == 2);
    CHECK(s.n_frees == 0);
    h->free(a, h->user);
    s = tsr_tracing_allocator_get_stats(tr);
    CHECK(s.current_bytes == 24);
    CHECK(s.peak_bytes == 1024);
    CHECK(s.n_frees == 1);
    tsr_tracing_allocator_reset_peak(tr);
    CHECK(tsr_tracing_allocator_get_stats(tr).peak_bytes == 24);
    void * c = h->alloc(100, 64, h->user);
    h->free(c, h->user);
    h->free(b, h->user);
    s = tsr_tracing_allocator_get_stats(tr);
    CHECK(s.current_bytes == 0);
    CHECK(s.peak_bytes == 124);
    CHECK(s.n_allocs == 3);
    CHECK(s.n_frees == 3);
    CHECK(s.total_bytes == 1124);
    tsr_tracing_allocator_free(tr);
}

TEST_CASE("pool allocator reuses blocks that are large enough but not wasteful", "[alloc][host]") {
    const bool thread_safe = GENERATE(false, true);
    tsr_tracing_allocator * tr = tsr_tracing_allocator_new(nullptr);
    tsr_pool_allocator * pool = tsr_pool_allocator_new(tsr_tracing_allocator_host(tr), 1 << 20, 1.5, thread_safe);
    REQUIRE(pool);
    const tsr_host_allocator * h = tsr_pool_allocator_host(pool);

    void * a = h->alloc(1000, 64, h->user);
    REQUIRE(a);
    h->free(a, h->user);
    tsr_pool_allocator_stats s = tsr_pool_allocator_get_stats(pool);
    CHECK(s.misses == 1);
    CHECK(s.cached_blocks == 1);
    CHECK(s.cached_bytes == 1000);
    CHECK(tsr_tracing_allocator_get_stats(tr).current_bytes == 1000);  // kept, not returned

    void * b = h->alloc(900, 64, h->user);  // 1000 <= 1.5 * 900: reused
    CHECK(b == a);
    s = tsr_pool_allocator_get_stats(pool);
    CHECK(s.hits == 1);
    CHECK(s.cached_blocks == 0);
    void * c = h->alloc(500, 64, h->user);  // nothing cached
    CHECK(c != a);
    h->free(b, h->user);
    void * d = h->alloc(600, 64, h->user);  // 1000 > 1.5 * 600: too wasteful, a miss
    CHECK(d != a);
    s = tsr_pool_allocator_get_stats(pool);
    CHECK(s.hits == 1);
    CHECK(s.misses == 3);
    CHECK(s.upstream_allocs == 3);
    h->free(c, h->user);
    h->free(d, h->user);
    s = tsr_pool_allocator_get_stats(pool);
    CHECK(s.cached_blocks == 3);
    CHECK(s.cached_bytes == 2100);

    // trimming returns the oldest blocks first until the budget holds
    tsr_pool_allocator_trim(pool, 1200);
    s = tsr_pool_allocator_get_stats(pool);
    CHECK(s.cached_bytes == 1100);  // 1000 (oldest) went back, 500 + 600 stay
    CHECK(s.upstream_frees == 1);
    CHECK(tsr_tracing_allocator_get_stats(tr).current_bytes == 1100);
    tsr_pool_allocator_trim(pool, 0);
    CHECK(tsr_pool_allocator_get_stats(pool).cached_bytes == 0);
    CHECK(tsr_tracing_allocator_get_stats(tr).current_bytes == 0);
    CHECK(tsr_tracing_allocator_get_stats(tr).n_frees == 3);
    tsr_pool_allocator_free(pool);
    tsr_tracing_allocator_free(tr);
}

TEST_CASE("pool allocator: budget enforced on free", "[alloc][host]") {
    tsr_tracing_allocator * tr = tsr_tracing_allocator_new(nullptr);
    tsr_pool_allocator * pool = tsr_pool_allocator_new(tsr_tracing_allocator_host(tr), 1500, 2.0, false);
    const tsr_host_allocator * h = tsr_pool_allocator_host(pool);
    void * a = h->alloc(1000, 64, h->user);
    void * b = h->alloc(1000, 64, h->user);
    h->free(a, h->user);
    h->free(b, h->user);  // 2000 cached > 1500: the oldest (a) goes
    tsr_pool_allocator_stats s = tsr_pool_allocator_get_stats(pool);
    CHECK(s.cached_bytes == 1000);
    CHECK(s.cached_blocks == 1);
    CHECK(s.upstream_frees == 1);
    void * c = h->alloc(1000, 64, h->user);
    CHECK(c == b);
    h->free(c, h->user);
    tsr_pool_allocator_free(pool);
    CHECK(tsr_tracing_allocator_get_stats(tr).current_bytes == 0);
    tsr_tracing_allocator_free(tr);
}

TEST_CASE("pool allocator: thread-safe variant under concurrent use", "[alloc][host]") {
    tsr_tracing_allocator * tr = tsr_tracing_allocator_new(nullptr);
    tsr_pool_allocator * pool = tsr_pool_allocator_new(tsr_tracing_allocator_host(tr), 1 << 22, 2.0, true);
    const tsr_host_allocator * h = tsr_pool_allocator_host(pool);
    std::vector<std::thread> th;
    for (int t = 0; t < 4; t++) {
        th.emplace_back([h, t]() {
            for (int i = 0; i < 500; i++) {
                const size_t sz = 64 * (size_t) (1 + (i * 7 + t) % 16);
                unsigned char * p = (unsigned char *) h->alloc(sz, 64, h->user);
                if (!p) continue;
                p[0] = (unsigned char) t;
                p[sz - 1] = (unsigned char) i;
                h->free(p, h->user);
            }
        });
    }
    for (auto & x : th) x.join();
    tsr_pool_allocator_stats s = tsr_pool_allocator_get_stats(pool);
    CHECK(s.hits + s.misses == 2000);
    CHECK(s.upstream_allocs == s.misses);
    CHECK(s.upstream_allocs - s.upstream_frees == s.cached_blocks);
    tsr_pool_allocator_free(pool);
    CHECK(tsr_tracing_allocator_get_stats(tr).current_bytes == 0);
    tsr_tracing_allocator_free(tr);
}

TEST_CASE("CPU buffer type with a custom allocator", "[alloc][host]") {
    tsr_tracing_allocator * tr = tsr_tracing_allocator_new(nullptr);
    tsr_backend_buffer_type_t buft = tsr_backend_cpu_buffer_type_with_allocator(tsr_tracing_allocator_host(tr));
    REQUIRE(buft);
    tsr_backend_buffer_t b = tsr_backend_buft_alloc_buffer(buft, 5000);
    REQUIRE(b);
    CHECK(((uintptr_t) tsr_backend_buffer_get_base(b) % 64) == 0);
    CHECK(tsr_tracing_allocator_get_stats(tr).current_bytes == 5000);
    CHECK(tsr_tracing_allocator_get_stats(tr).n_allocs == 1);
    tsr_backend_buffer_free(b);
    CHECK(tsr_tracing_allocator_get_stats(tr).current_bytes == 0);
    tsr_backend_cpu_buffer_type_free(buft);

    // the process-wide hook
    tsr_set_host_allocator(tsr_tracing_allocator_host(tr));
    b = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_buffer_type(), 300);
    REQUIRE(b);
    CHECK(tsr_tracing_allocator_get_stats(tr).current_bytes == 300);
    tsr_set_host_allocator(nullptr);  // restore; b keeps the allocator it came from
    tsr_backend_buffer_free(b);
    CHECK(tsr_tracing_allocator_get_stats(tr).current_bytes == 0);
    tsr_tracing_allocator_free(tr);
}

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__linux__) && defined(MADV_HUGEPAGE)  /* as the allocator's own condition */
#include <cstdio>
#include <cstring>
#include <string>

// The VmFlags line of the mapping of /proc/self/smaps that holds address a ("" if none).
static std::string vm_flags_at(const void * a) {
    FILE * f = std::fopen("/proc/self/smaps", "r");
    if (!f) return "";
    char line[512];
    bool inside = false;
    std::string flags;
    while (std::fgets(line, sizeof line, f)) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {  /* a mapping's first line */
            inside = (uintptr_t) a >= lo && (uintptr_t) a < hi;
            continue;
        }
        if (inside && std::strncmp(line, "VmFlags:", 8) == 0) {
            flags = line + 8;
            break;
        }
    }
    std::fclose(f);
    return flags;
}

TEST_CASE("built-in host allocator: large blocks 2 MiB aligned and advised huge pages (Linux)", "[alloc][host]") {
    const char * env = std::getenv("TSR_HUGE_PAGES");
    if (env && std::strcmp(env, "0") == 0) return;  /* turned off for this process */
    const tsr_host_allocator * h = tsr_get_host_allocator();
    const size_t big = (size_t) TSR_HUGE_PAGE_MIN + 12345;  /* not a whole number of pages */
    char * p = (char *) h->alloc(big, 64, h->user);
    REQUIRE(p);
    CHECK(((uintptr_t) p % ((size_t) 2 << 20)) == 0);
    std::memset(p, 0x5a, big);  /* every byte asked for is there (ASan checks the block) */
    CHECK(p[big - 1] == 0x5a);
    /* the kernel's record of the advice: "hg" (VM_HUGEPAGE) in the mapping's VmFlags */
    const std::string flags = vm_flags_at(p + big / 2);
    INFO("VmFlags: " << flags);
    if (flags.empty()) WARN("no VmFlags for the block in /proc/self/smaps: the advice is not checked");
    else CHECK(flags.find(" hg") != std::string::npos);
    h->free(p, h->user);

    /* a small block: only the alignment asked for, no advice */
    char * s = (char *) h->alloc(4096, 64, h->user);
    REQUIRE(s);
    CHECK(((uintptr_t) s % 64) == 0);
    CHECK(vm_flags_at(s).find(" hg") == std::string::npos);
    h->free(s, h->user);
}
#endif
