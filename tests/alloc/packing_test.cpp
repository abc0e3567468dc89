// The packing core: hand-computed cases, random instances and the small external traces,
// every result checked by a brute-force pairwise overlap test written here.
#include <catch2/catch.hpp>

#include "tessera/alloc.h"
#include "sched_trace.h"
#include "test_support.h"
#include "trace_csv.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

// Independent check: every pair of items live at a common step is disjoint in memory,
// offsets aligned, everything below peak.
bool brute_force_valid(const std::vector<tsr_pack_item> & v, size_t peak, size_t align, std::string & why) {
    auto up = [&](size_t s) { return (s + align - 1) / align * align; };
    for (size_t i = 0; i < v.size(); i++) {
        if (v[i].upper <= v[i].lower || v[i].size == 0) continue;
        if (v[i].offset % align) { why = "misaligned " + std::to_string(i); return false; }
        if (v[i].offset + up(v[i].size) > peak) { why = "above peak " + std::to_string(i); return false; }
        for (size_t j = i + 1; j < v.size(); j++) {
            if (v[j].upper <= v[j].lower || v[j].size == 0) continue;
            if (v[i].upper <= v[j].lower || v[j].upper <= v[i].lower) continue;
            if (v[i].offset + v[i].size <= v[j].offset || v[j].offset + v[j].size <= v[i].offset) continue;
            why = "overlap " + std::to_string(i) + " " + std::to_string(j);
            return false;
        }
    }
    return true;
}

size_t lower_bound_by_steps(const std::vector<tsr_pack_item> & v, size_t align) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (auto & it : v) { lo = std::min(lo, it.lower); hi = std::max(hi, it.upper); }
    size_t best = 0;
    for (int64_t t = lo; t < hi; t++) {
        size_t s = 0;
        for (auto & it : v) if (it.lower <= t && t < it.upper) s += (it.size + align - 1) / align * align;
        best = std::max(best, s);
    }
    return best;
}

// Cut rectangle [t0, t1) x [y0, y1) (steps x bytes, in 64-byte rows) into items: a
// cut across time or across offsets, again in each half, to `depth`. The items tile the
// rectangle exactly, so a packing at the full height exists, and the height is the
// lower bound wherever no step is left empty.
void guillotine(std::mt19937 & rng, int64_t t0, int64_t t1, size_t y0, size_t y1, int depth, std::vector<tsr_pack_item> & out) {
    const bool can_t = t1 - t0 >= 2, can_y = y1 - y0 >= 128;
    if (depth == 0 || (!can_t && !can_y)) { out.push_back({t0, t1, y1 - y0, 0}); return; }
    if (can_t && (!can_y || rng() % 2)) {
        const int64_t m = t0 + 1 + (int64_t) (rng() % (uint64_t) (t1 - t0 - 1));
        guillotine(rng, t0, m, y0, y1, depth - 1, out);
        guillotine(rng, m, t1, y0, y1, depth - 1, out);
    } else {
        const size_t m = y0 + 64 * (1 + rng() % ((y1 - y0) / 64 - 1));
        guillotine(rng, t0, t1, y0, m, depth - 1, out);
        guillotine(rng, t0, t1, m, y1, depth - 1, out);
    }
}

}  // namespace

TEST_CASE("pack: the search reaches the bound on tight tilings the greedy orders miss", "[alloc][pack]") {
    // The pruning (independent parts, the inference bound at the lower bound) must never
    // cut off a packing at the bound: every tiling packs at exactly its height.
    std::mt19937 rng(5);
    int searched = 0;
    for (int iter = 0; iter < 200; iter++) {
        std::vector<tsr_pack_item> v;
        guillotine(rng, 0, 12, 0, 1024, 5, v);
        std::shuffle(v.begin(), v.end(), rng);
        REQUIRE(tsr_pack_lower_bound(v.data(), v.size(), 64) == 1024);
        std::vector<tsr_pack_item> greedy = v;
        const size_t heuristics = tsr_pack(greedy.data(), greedy.size(), 64, 0.0);
        const size_t peak = tsr_pack(v.data(), v.size(), 64, 1000.0);
        INFO("iteration " << iter << ": " << v.size() << " items, heuristics " << heuristics);
        std::string why;
        REQUIRE(brute_force_valid(v, peak, 64, why));
        CHECK(peak == 1024);
        searched += heuristics > 1024;
    }
    CHECK(searched >= 10);  // instances only the search packs at the bound
}

// Tiny instances whose greedy orders all end one row above the bound while a packing at
// the bound exists (found by a complete search; the bound is the reference). The search
// once ruled the bound out on each of them: a section left empty at its floor was lifted
// past the buffers that could have sat on it after a neighbour was filled.
TEST_CASE("pack: the search does not rule out a bound a packing reaches", "[alloc][pack]") {
    const std::vector<std::vector<tsr_pack_item>> cases = {
        {{7, 11, 2, 0}, {5, 11, 2, 0}, {1, 9, 2, 0}, {6, 7, 2, 0}, {0, 10, 4, 0}, {5, 9, 1, 0}, {4, 5, 2, 0}, {8, 10, 2, 0},
         {6, 11, 4, 0}, {5, 6, 4, 0}, {9, 10, 4, 0}, {3, 7, 2, 0}, {0, 11, 1, 0}, {4, 6, 3, 0}},
        {{1, 6, 4, 0}, {4, 6, 4, 0}, {8, 9, 2, 0}, {8, 10, 6, 0}, {5, 10, 2, 0}, {2, 3, 5, 0}, {5, 9, 1, 0}, {9, 10, 1, 0},
         {10, 11, 3, 0}, {10, 11, 3, 0}, {9, 10, 1, 0}, {0, 6, 5, 0}, {1, 10, 6, 0}, {6, 9, 6, 0}, {0, 2, 6, 0}, {6, 7, 2, 0}},
        {{8, 9, 6, 0}, {2, 8, 2, 0}, {8, 9, 1, 0}, {0, 7, 5, 0}, {5, 9, 3, 0}, {6, 9, 3, 0}, {4, 7, 4, 0}, {3, 4, 6, 0},
         {5, 8, 1, 0}, {1, 5, 3, 0}, {3, 7, 1, 0}, {3, 9, 2, 0}, {7, 9, 3, 0}, {7, 9, 3, 0}},
        {{6, 9, 3, 0}, {4, 9, 4, 0}, {3, 6, 1, 0}, {2, 7, 2, 0}, {1, 7, 2, 0}, {1, 3, 1, 0}, {3, 5, 1, 0}, {1, 4, 5, 0},
         {3, 8, 2, 0}, {5, 6, 5, 0}, {1, 2, 4, 0}, {7, 8, 3, 0}, {8, 9, 2, 0}, {0, 5, 1, 0}, {3, 5, 2, 0}, {8, 9, 5, 0}},
        {{8, 11, 8, 0}, {4, 11, 5, 0}, {7, 8, 7, 0}, {0, 2, 3, 0}, {1, 5, 5, 0}, {9, 11, 8, 0}, {1, 8, 3, 0}, {6, 7, 4, 0},
         {10, 11, 4, 0}, {10, 11, 5, 0}, {2, 10, 1, 0}, {10, 11, 3, 0}, {2, 9, 4, 0}, {2, 9, 7, 0}, {3, 5, 3, 0}, {2, 8, 7, 0},
         {0, 3, 8, 0}, {0, 5, 8, 0}, {1, 3, 1, 0}, {7, 11, 8, 0}},
    };
    for (size_t c = 0; c < cases.size(); c++) {
        std::vector<tsr_pack_item> v = cases[c];
        const size_t lb = lower_bound_by_steps(v, 1);
        INFO("case " << c << ", bound " << lb);
        CHECK(tsr_pack(v.data(), v.size(), 1, 1000.0) == lb);
        std::string why;
        CHECK(brute_force_valid(v, lb, 1, why));
    }
}

namespace {

// The least peak of tiny instances by trying every offset of every item (sizes in bytes,
// alignment 1): the reference for the search's pruning rules.
bool fits_under(std::vector<tsr_pack_item> & v, size_t k, size_t cap) {
    if (k == v.size()) return true;
    for (size_t o = 0; o + v[k].size <= cap; o++) {
        bool free = true;
        for (size_t j = 0; j < k && free; j++) {
            const bool live_together = v[k].lower < v[j].upper && v[j].lower < v[k].upper;
            free = !live_together || o + v[k].size <= v[j].offset || v[j].offset + v[j].size <= o;
        }
        if (!free) continue;
        v[k].offset = o;
        if (fits_under(v, k + 1, cap)) return true;
    }
    return false;
}
size_t least_peak_by_trying_all(std::vector<tsr_pack_item> v) {
    size_t cap = lower_bound_by_steps(v, 1);
    while (!fits_under(v, 0, cap)) cap++;
    return cap;
}

}  // namespace

TEST_CASE("pack: tiny random instances reach their least peak found by trying all offsets", "[alloc][pack]") {
    std::mt19937 rng(16);
    for (int iter = 0; iter < 300; iter++) {
        const int n = 4 + (int) (rng() % 6), T = 3 + (int) (rng() % 6);
        std::vector<tsr_pack_item> v;
        for (int i = 0; i < n; i++) {
            const int64_t a = (int64_t) (rng() % (uint32_t) T);
            v.push_back({a, a + 1 + (int64_t) (rng() % (uint32_t) (T - a)), 1 + rng() % 4, 0});
        }
        const size_t least = least_peak_by_trying_all(v);
        INFO("iteration " << iter);
        std::vector<tsr_pack_item> aimed = v;
        REQUIRE(tsr_pack(v.data(), v.size(), 1, 50.0) == least);
        std::string why;
        REQUIRE(brute_force_valid(v, least, 1, why));
        // aimed at the least peak (above the bound where the bound is out of reach), the
        // search must not rule it out either
        const tsr_pack_params prm = {1, 50.0, least};
        REQUIRE(tsr_pack_ex(aimed.data(), aimed.size(), &prm) == least);
        REQUIRE(brute_force_valid(aimed, least, 1, why));
    }
}

TEST_CASE("pack_ex: meets its target, reaches the bound below it, rejects NULL params", "[alloc][pack]") {
    // bound 50 (hand-computed: 20 + 30 bytes live at step 2)
    std::vector<tsr_pack_item> v = {{0, 2, 10, 0}, {1, 3, 20, 0}, {2, 4, 30, 0}};
    std::string why;
    const tsr_pack_params at_60 = {1, 1000.0, 60};
    const size_t p60 = tsr_pack_ex(v.data(), v.size(), &at_60);
    CHECK(p60 <= 60);
    CHECK(p60 >= 50);
    CHECK(brute_force_valid(v, p60, 1, why));
    // a target under the bound means the bound: nothing packs lower
    const tsr_pack_params at_1 = {16, 1000.0, 1};
    const size_t p1 = tsr_pack_ex(v.data(), v.size(), &at_1);
    CHECK(p1 == 64);  // 16 + 32 + 32 with 16-byte alignment
    CHECK(brute_force_valid(v, p1, 16, why));
    CHECK(tsr_pack_ex(v.data(), v.size(), nullptr) == SIZE_MAX);
    CHECK(std::string(tsr_last_error()).find("params") != std::string::npos);
    const tsr_pack_params bad_align = {24, 0.0, 0};
    CHECK(tsr_pack_ex(v.data(), v.size(), &bad_align) == SIZE_MAX);
    CHECK(std::string(tsr_last_error()).find("24") != std::string::npos);
}

TEST_CASE("pack: hand-computed instance reaches its bound", "[alloc][pack]") {
    std::vector<tsr_pack_item> v = {{0, 2, 10, 0}, {1, 3, 20, 0}, {2, 4, 30, 0}};
    CHECK(tsr_pack_lower_bound(v.data(), v.size(), 1) == 50);
    const size_t peak = tsr_pack(v.data(), v.size(), 1, 0);
    CHECK(peak == 50);
    std::string why;
    CHECK(brute_force_valid(v, peak, 1, why));
    // with 16-byte alignment every size rounds up: 16 + 32 + 32
    CHECK(tsr_pack_lower_bound(v.data(), v.size(), 16) == 64);
    const size_t p16 = tsr_pack(v.data(), v.size(), 16, 0);
    CHECK(p16 == 64);
    CHECK(brute_force_valid(v, p16, 16, why));
}

TEST_CASE("pack: the scheduler's weight-copy graph packs at its bound by the heuristics alone", "[alloc][pack]") {
    // tessera-run's weight-copy graph (sched_trace.h): promoting the buffers above the bound
    // to the front of the greedy's order packs it at the bound
    std::vector<tsr_pack_item> v = tsr_sched_llama_ngl1_b64_trace();
    REQUIRE(lower_bound_by_steps(v, 16) == 171264);
    const size_t peak = tsr_pack(v.data(), v.size(), 16, 0.0);
    std::string why;
    REQUIRE(brute_force_valid(v, peak, 16, why));
    CHECK(peak == 171264);
}

TEST_CASE("pack: empty ranges, zero sizes and errors", "[alloc][pack]") {
    std::vector<tsr_pack_item> v = {{3, 3, 100, 7}, {0, 5, 0, 9}, {1, 2, 8, 0}};
    CHECK(tsr_pack(v.data(), v.size(), 8, 0) == 8);
    CHECK(v[0].offset == 0);
    CHECK(v[1].offset == 0);
    CHECK(tsr_pack(nullptr, 0, 1, 0) == 0);
    std::vector<tsr_pack_item> bad = {{5, 2, 8, 0}};
    CHECK(tsr_pack(bad.data(), bad.size(), 1, 0) == SIZE_MAX);
    CHECK(std::string(tsr_last_error()).find("lower") != std::string::npos);
    CHECK(tsr_pack(v.data(), v.size(), 24, 0) == SIZE_MAX);  // not a power of two
}

TEST_CASE("pack: random instances are valid and bounded", "[alloc][pack]") {
    std::mt19937 rng(7);
    for (int iter = 0; iter < 400; iter++) {
        const int n = 1 + (int) (rng() % 60);
        const int T = 2 + (int) (rng() % 30);
        std::vector<tsr_pack_item> v;
        size_t total = 0;
        for (int i = 0; i < n; i++) {
            int64_t a = (int64_t) (rng() % (uint32_t) T), b = (int64_t) (rng() % (uint32_t) T);
            if (a > b) std::swap(a, b);
            const size_t sz = 1 + rng() % (rng() % 4 == 0 ? 5000 : 300);
            v.push_back({a, b + 1, sz, 0});
            total += (sz + 63) / 64 * 64;
        }
        const size_t lb = lower_bound_by_steps(v, 64);
        REQUIRE(tsr_pack_lower_bound(v.data(), v.size(), 64) == lb);
        const size_t peak = tsr_pack(v.data(), v.size(), 64, iter % 10 == 0 ? 5.0 : 0.0);
        INFO("iteration " << iter);
        REQUIRE(peak >= lb);
        REQUIRE(peak <= total);
        std::string why;
        REQUIRE(brute_force_valid(v, peak, 64, why));
    }
}

TEST_CASE("pack: a perfect tiling is packed without waste", "[alloc][pack]") {
    // cut a [0,64) x [0,1024) rectangle into vertical strips, each strip into random
    // rows: the bound is the full height and a packing at exactly the bound exists
    std::mt19937 rng(11);
    for (int iter = 0; iter < 20; iter++) {
        std::vector<tsr_pack_item> v;
        int64_t t = 0;
        while (t < 64) {
            const int64_t w = std::min<int64_t>(64 - t, 1 + (int64_t) (rng() % 16));
            size_t y = 0;
            while (y < 1024) {
                const size_t h = std::min<size_t>(1024 - y, 64 * (1 + rng() % 6));
                v.push_back({t, t + w, h, 0});
                y += h;
            }
            t += w;
        }
        REQUIRE(tsr_pack_lower_bound(v.data(), v.size(), 64) == 1024);
        const size_t peak = tsr_pack(v.data(), v.size(), 64, 10.0);
        CHECK(peak == 1024);
        std::string why;
        REQUIRE(brute_force_valid(v, peak, 64, why));
    }
}

TEST_CASE("pack: the small external traces", "[alloc][pack]") {
    const std::string dir = TSR_ALLOC_TRACES_DIR;
    struct trace { const char * file; size_t n; size_t lb; };
    // buffer counts and lower bounds from the traces' README (computed independently)
    const trace traces[] = {
        {"minimalloc-challenging/A.1048576.csv", 154, 1048576}, {"minimalloc-challenging/B.1048576.csv", 170, 1048576},
        {"minimalloc-challenging/C.1048576.csv", 203, 1039360}, {"minimalloc-challenging/D.1048576.csv", 213, 986112},
        {"minimalloc-challenging/E.1048576.csv", 215, 1048576}, {"minimalloc-challenging/F.1048576.csv", 296, 1048576},
        {"minimalloc-challenging/G.1048576.csv", 308, 1048576}, {"minimalloc-challenging/H.1048576.csv", 316, 1048576},
        {"minimalloc-challenging/I.1048576.csv", 374, 1048576}, {"minimalloc-challenging/J.1048576.csv", 409, 989184},
        {"minimalloc-challenging/K.1048576.csv", 454, 1048576}, {"real/G_1.csv", 816, 3030937746ull},
        {"real/resnet50.csv", 1042, 1515472556ull},
    };
    int found = 0;
    for (const trace & tr : traces) {
        std::vector<tsr_pack_item> v = tsr_read_trace_csv(dir + "/" + tr.file);
        if (v.empty()) continue;
        found++;
        INFO(tr.file);
        REQUIRE(v.size() == tr.n);
        REQUIRE(tsr_pack_lower_bound(v.data(), v.size(), 1) == tr.lb);
        const size_t peak = tsr_pack(v.data(), v.size(), 1, 5.0);
        REQUIRE(peak >= tr.lb);
        std::string why;
        REQUIRE(brute_force_valid(v, peak, 1, why));
    }
    if (found == 0) WARN("skipped: no traces found in " << dir);
}

// MiniMalloc's H fits in 1,048,576 bytes (its file name; MiniMalloc's paper), its lower
// bound: the long searches of a few orders missed it for 1.3 s of work; short restarts in
// random orders find it.
// A sanitized build (TSR_TEST_SANITIZED) runs the search several times slower than the
// work clock's rate, so its wall guard (10x the budget) cuts the search short there: the
// fit is checked only in builds without sanitizers.
TEST_CASE("pack: MiniMalloc's H packs at its known fit within a budget of 1,000", "[alloc][pack]") {
    std::vector<tsr_pack_item> v = tsr_read_trace_csv(std::string(TSR_ALLOC_TRACES_DIR) + "/minimalloc-challenging/H.1048576.csv");
    if (v.empty()) { WARN("skipped: no trace H in " << TSR_ALLOC_TRACES_DIR); return; }
    REQUIRE(v.size() == 316);
    const size_t peak = tsr_pack(v.data(), v.size(), 1, 1000.0);
    std::string why;
    const bool valid = brute_force_valid(v, peak, 1, why);
    INFO(why);
    CHECK(valid);
#ifdef TSR_TEST_SANITIZED
    WARN("the fit of H is not checked in a sanitized build (its wall guard cuts the search)");
#else
    CHECK(peak == 1048576);
#endif
}

// MiniMalloc's K fits in 1,048,576 bytes (its file name), its lower bound, with no slack in
// 108 of its 242 sections. The plain searches and restarts end at 1.0625 of it; the restarts
// that fail first (the section with the fewest choices, same-range stacks searched in one
// order) find it, minimising and given the fit alike (the fit is the bound, so both aim at
// the same target). Which restart hits is luck of its seeds (about 1 in 20 of them at
// this trace's dive length): with the lines of the file shuffled, 2 of 8 orders still
// pack it within the budget. A change before those restarts that moves this one should
// look at the restarts' hit rate, not at this trace alone.
TEST_CASE("pack: MiniMalloc's K packs at its known fit within a budget of 1,000", "[alloc][pack]") {
    const std::vector<tsr_pack_item> trace = tsr_read_trace_csv(std::string(TSR_ALLOC_TRACES_DIR) + "/minimalloc-challenging/K.1048576.csv");
    if (trace.empty()) { WARN("skipped: no trace K in " << TSR_ALLOC_TRACES_DIR); return; }
    REQUIRE(trace.size() == 454);
#ifdef TSR_TEST_SANITIZED
    const double budget = 100.0;  // only the packings' validity is checked there: its wall guard stops each at 1 s
#else
    const double budget = 1000.0;
#endif
    std::vector<tsr_pack_item> v = trace;
    const size_t peak = tsr_pack(v.data(), v.size(), 1, budget);
    std::string why;
    const bool valid = brute_force_valid(v, peak, 1, why);
    INFO(why);
    CHECK(valid);
    std::vector<tsr_pack_item> given = trace;
    const tsr_pack_params prm = {1, budget, 1048576};
    const size_t peak_given = tsr_pack_ex(given.data(), given.size(), &prm);
    const bool valid_given = brute_force_valid(given, peak_given, 1, why);
    INFO(why);
    CHECK(valid_given);
#ifdef TSR_TEST_SANITIZED
    WARN("the fit of K is not checked in a sanitized build (its wall guard cuts the search)");
#else
    CHECK(peak == 1048576);
    CHECK(peak_given == 1048576);
#endif
}

// MiniMalloc's J fits in 1,048,576 bytes (its file name), 6 % above its lower bound, which
// is out of reach: aimed at the bound, the search spent most of its budget there and
// missed the fit (1.0049 of it at 1,000); given the capacity, as MiniMalloc is, it packs
// there in about a tenth of the budget.
TEST_CASE("pack_ex: MiniMalloc's J packs at its known fit when given it", "[alloc][pack]") {
    std::vector<tsr_pack_item> v = tsr_read_trace_csv(std::string(TSR_ALLOC_TRACES_DIR) + "/minimalloc-challenging/J.1048576.csv");
    if (v.empty()) { WARN("skipped: no trace J in " << TSR_ALLOC_TRACES_DIR); return; }
    REQUIRE(v.size() == 409);
#ifdef TSR_TEST_SANITIZED
    const double budget = 100.0;  // only the packing's validity is checked there: its wall guard stops it at 1 s
#else
    const double budget = 1000.0;
#endif
    const tsr_pack_params prm = {1, budget, 1048576};
    const size_t peak = tsr_pack_ex(v.data(), v.size(), &prm);
    std::string why;
    const bool valid = brute_force_valid(v, peak, 1, why);
    INFO(why);
    CHECK(valid);
#ifdef TSR_TEST_SANITIZED
    WARN("the fit of J is not checked in a sanitized build (its wall guard cuts the search)");
#else
    CHECK(peak <= 1048576);
#endif
}

// Instances above 1,000 buffers take the large-instance path (peak-first order, window
// search around the peak); check a few of them the same brute-force way.
TEST_CASE("pack: large random instances are valid", "[alloc][pack]") {
    std::mt19937_64 rng(42);
    for (int iter = 0; iter < 6; iter++) {
        const size_t n = 1001 + rng() % 1500;
        const int64_t T = 10 + (int64_t) (rng() % 3000);
        std::vector<tsr_pack_item> v(n);
        for (auto & x : v) {
            const int64_t a = (int64_t) (rng() % (uint64_t) T);
            const int64_t d = (int64_t) (rng() % 4 == 0 ? rng() % (uint64_t) T : rng() % 20);
            x = {a, a + d, rng() % 8 == 0 ? 0 : 1 + rng() % (rng() % 2 ? 100000 : 1000), 0};
        }
        const size_t align = (size_t) 1 << (rng() % 7);
        const size_t lb = tsr_pack_lower_bound(v.data(), n, align);
        const size_t peak = tsr_pack(v.data(), n, align, iter % 2 == 0 ? 20.0 : 0.0);
        INFO("iteration " << iter << " n " << n << " align " << align);
        REQUIRE(peak >= lb);
        std::string why;
        REQUIRE(brute_force_valid(v, peak, align, why));
    }
}

// Sizes from the caller never turn into exceptions or wrapped allocations.
TEST_CASE("pack: absurd item counts and plans are errors", "[alloc][pack]") {
    tsr_pack_item one = {0, 1, 8, 0};
    tsr_clear_error();
    CHECK(tsr_pack_lower_bound(&one, SIZE_MAX / 4, 1) == SIZE_MAX);
    CHECK(std::string(tsr_last_error()).size() > 0);
    tsr_clear_error();
    CHECK(tsr_pack(&one, SIZE_MAX / 4, 1, 0) == SIZE_MAX);
    CHECK(std::string(tsr_last_error()).size() > 0);
    tsr_plan bad = {};
    bad.n_tensors = -1;
    CHECK_FALSE(tsr_plan_check(&bad, nullptr));
}
