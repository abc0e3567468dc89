// tsr_graph_optimize_order: on random DAGs small enough to enumerate every topological
// order, the optimised lower bound equals the best one gallocr plans over all of them;
// with copies too (steps that free what they add, which the exact search runs
// at once), likewise, where the first greedy order misses it; the result is a
// topological order, never worse than the builder's, reported figures match gallocr's plans; results computed in both orders are bit-identical; a U-Net-like
// graph whose builder order is bad gets a lower peak; gallocr's reserve option.
#include <catch2/catch.hpp>

#include "tessera/alloc.h"
#include "tessera-cpu.h"
#include "test_support.h"
#include "ctx_guard.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <vector>

namespace {

// gallocr's lower bound for the graph in its current order (no packing search)
size_t planned_lower_bound(tsr_cgraph * gf) {
    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    tsr_gallocr_set_time_budget(ga, 0.0);
    REQUIRE(tsr_gallocr_reserve(ga, gf));
    const size_t lb = tsr_gallocr_get_plan(ga)->buffers[0].lower_bound;
    tsr_gallocr_free(ga);
    return lb;
}

bool is_topological(tsr_cgraph * gf) {
    std::map<const tsr_tensor *, int> pos;
    for (int i = 0; i < tsr_graph_n_nodes(gf); i++) pos[tsr_graph_node(gf, i)] = i;
    for (int i = 0; i < tsr_graph_n_nodes(gf); i++) {
        const tsr_tensor * t = tsr_graph_node(gf, i);
        for (const tsr_tensor * s : t->src) {
            if (s && pos.count(s) && pos[s] >= i) return false;
        }
        if (t->view_src && pos.count(t->view_src) && pos[t->view_src] >= i) return false;
    }
    return true;
}

// Every topological order of gf's nodes (written here, independent of the optimiser),
// each planned by gallocr: the smallest lower bound. 0 when there are more than max_orders.
struct brute_force {
    tsr_cgraph * gf;
    std::vector<tsr_tensor *> orig, cur;
    std::vector<char> used;
    size_t best = SIZE_MAX;
    long count = 0, max_orders;

    bool ready(const tsr_tensor * t) const {
        for (size_t j = 0; j < orig.size(); j++) {
            if (used[j]) continue;
            for (const tsr_tensor * s : t->src) if (s == orig[j]) return false;
            if (t->view_src == orig[j]) return false;
        }
        return true;
    }
    void rec() {
        if (count > max_orders) return;
        if (cur.size() == orig.size()) {
            count++;
            std::copy(cur.begin(), cur.end(), tsr_graph_nodes(gf));
            best = std::min(best, planned_lower_bound(gf));
            return;
        }
        for (size_t j = 0; j < orig.size(); j++) {
            if (used[j] || !ready(orig[j])) continue;
            used[j] = 1;
            cur.push_back(orig[j]);
            rec();
            cur.pop_back();
            used[j] = 0;
        }
    }
    size_t run() {
        orig.assign(tsr_graph_nodes(gf), tsr_graph_nodes(gf) + tsr_graph_n_nodes(gf));
        used.assign(orig.size(), 0);
        rec();
        std::copy(orig.begin(), orig.end(), tsr_graph_nodes(gf));
        return count > max_orders ? 0 : best;
    }
};

// A random DAG of 1-D f32 tensors of a few sizes: ops that may work in place (relu,
// scale, add), ops that may not (concat), and views; with copies, also copies that
// never work in place (like RandWire's convs: a new result the size of the operand,
// which may die with it; no weight, so that each plan's buffer stays small).
tsr_cgraph * random_dag(tsr_context * ctx, std::mt19937 & rng, int n_ops, bool copies = false) {
    const int64_t sizes[3] = {64, 256, 1024};
    std::vector<tsr_tensor *> vals;
    std::map<tsr_tensor *, int> uses;
    for (int k = 0; k < 2; k++) {
        tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, sizes[rng() % 3]);
        tsr_set_input(x);
        vals.push_back(x);
    }
    auto pick = [&]() { tsr_tensor * t = vals[rng() % vals.size()]; uses[t]++; return t; };
    for (int k = 0; k < n_ops; k++) {
        tsr_tensor * a = pick();
        tsr_tensor * r = nullptr;
        switch (rng() % (copies ? 6 : 5)) {
            case 0: r = tsr_relu(ctx, a); break;
            case 1: r = tsr_scale(ctx, a, 0.5f); break;
            case 2: {
                tsr_tensor * b = nullptr;
                for (tsr_tensor * c : vals) if (c != a && c->ne[0] == a->ne[0] && (!b || rng() % 2)) b = c;
                if (b) uses[b]++;
                r = b ? tsr_add(ctx, a, b) : tsr_sqr(ctx, a);
                break;
            }
            case 3: {
                tsr_tensor * b = pick();
                r = a->ne[0] + b->ne[0] <= 2048 ? tsr_concat(ctx, a, b, 0) : tsr_relu(ctx, b);
                break;
            }
            case 4: r = tsr_view_1d(ctx, a, a->ne[0] / 2, 0); break;
            default: r = tsr_repeat(ctx, a, a); break;  // a copy, never in place
        }
        REQUIRE(r);
        vals.push_back(r);
    }
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_set_output(vals.back());
    for (tsr_tensor * t : vals) if (!uses[t] && t->op != TSR_OP_NONE) REQUIRE(tsr_build_forward_expand(gf, t));
    return gf;
}

// U-Net-like: each decoder level concatenates a 4x widened projection of its skip with
// the deeper path. Built as concat(proj(skip), up), the builder runs every projection
// before the deep path and holds all of them through it; a good order runs each
// projection just before its level is decoded. Maps are 16 KiB, projections 64.
tsr_tensor * widen4(tsr_context * ctx, tsr_tensor * s) {
    tsr_tensor * a = tsr_concat(ctx, s, tsr_scale(ctx, s, -1.0f), 0);
    return tsr_concat(ctx, a, tsr_scale(ctx, a, 0.25f), 0);
}

// The U-Net-like stage on x (4096 floats): its output, of the same size.
tsr_tensor * unet_stage(tsr_context * ctx, tsr_tensor * x) {
    const int64_t n = 4096;
    std::vector<tsr_tensor *> skips;
    tsr_tensor * h = x;
    for (int lv = 0; lv < 3; lv++) {
        h = tsr_relu(ctx, tsr_scale(ctx, h, 1.5f));
        skips.push_back(h);
        h = tsr_sqr(ctx, h);  // down a level (a smaller map with more channels: the same bytes)
    }
    for (int lv = 2; lv >= 0; lv--) {
        tsr_tensor * cat = tsr_concat(ctx, widen4(ctx, skips[(size_t) lv]), tsr_scale(ctx, h, 0.5f), 0);
        h = tsr_cont(ctx, tsr_view_1d(ctx, tsr_relu(ctx, cat), n, (size_t) n * 4));
    }
    return h;
}

tsr_cgraph * unet_like(tsr_context * ctx, tsr_tensor ** out_input) {
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4096);
    tsr_set_input(x);
    *out_input = x;
    tsr_tensor * h = unet_stage(ctx, x);
    tsr_set_output(h);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(gf, h));
    return gf;
}

std::vector<std::vector<uint8_t>> run_on_cpu(tsr_cgraph * gf, tsr_tensor * input, const std::vector<tsr_tensor *> & outs) {
    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    REQUIRE(tsr_gallocr_alloc_graph(ga, gf));
    std::mt19937 rng(42);
    tsrt::fill(input, rng);
    tsr_backend_t be = tsr_backend_cpu_init();
    REQUIRE(be);
    REQUIRE(tsr_backend_graph_compute(be, gf) == TSR_STATUS_SUCCESS);
    std::vector<std::vector<uint8_t>> res;
    for (tsr_tensor * t : outs) {
        std::vector<uint8_t> b(tsr_nbytes(t));
        REQUIRE(tsr_backend_tensor_get(t, b.data(), 0, b.size()));
        res.push_back(b);
    }
    tsr_backend_free(be);
    tsr_gallocr_free(ga);
    return res;
}

}  // namespace

TEST_CASE("order: exact optimum on random DAGs equals brute force over all topological orders", "[order]") {
    std::mt19937 rng(20261201);
    int checked = 0, improved = 0, floor_met = 0;
#ifdef TSR_TEST_SANITIZED
    const int n_graphs = 50;  // the brute force dominates: 8 s for 150 under ASan
#else
    const int n_graphs = 150;
#endif
    for (int it = 0; it < n_graphs; it++) {
        ctx_guard g(64);
        tsr_cgraph * gf = random_dag(g.ctx, rng, 4 + (int) (rng() % 6));
        INFO("graph " << it << ", " << tsr_graph_n_nodes(gf) << " nodes");
        brute_force bf{gf, {}, {}, {}, SIZE_MAX, 0, 4000};
        const size_t optimum = bf.run();
        const size_t before = planned_lower_bound(gf);
        std::vector<tsr_tensor *> builder(tsr_graph_nodes(gf), tsr_graph_nodes(gf) + tsr_graph_n_nodes(gf));
        tsr_order_report rep;
        tsr_order_params prm = tsr_order_default_params();
        prm.time_budget_ms = 10000.0;  // exact search takes microseconds here; a loaded machine must not cut it short
        prm.report = &rep;
        REQUIRE(tsr_graph_optimize_order(gf, &prm));
        REQUIRE(is_topological(gf));
        std::vector<tsr_tensor *> after(tsr_graph_nodes(gf), tsr_graph_nodes(gf) + tsr_graph_n_nodes(gf));
        std::sort(builder.begin(), builder.end());
        std::sort(after.begin(), after.end());
        REQUIRE(builder == after);  // a permutation: nothing lost, nothing added
        const size_t lb = planned_lower_bound(gf);
        REQUIRE(rep.builder_lower_bound == before);
        REQUIRE(rep.optimized_lower_bound == lb);
        REQUIRE(lb <= before);
        REQUIRE(rep.optimal);
        REQUIRE(rep.reordered == (lb < before));
        REQUIRE(rep.any_order_lower_bound <= lb);
        if (optimum == 0) continue;  // too many orders to enumerate
        REQUIRE(lb == optimum);
        // the floor holds for every order, and it is no empty promise: often it is the optimum
        REQUIRE(rep.any_order_lower_bound <= optimum);
        REQUIRE(rep.any_order_lower_bound > 0);
        checked++;
        improved += lb < before;
        floor_met += rep.any_order_lower_bound == optimum;
    }
    INFO(checked << " graphs checked, " << improved << " improved, floor = optimum on " << floor_met);
    REQUIRE(checked * 3 >= n_graphs * 2);
    REQUIRE(improved >= 5);  // the sample has graphs where the order matters
    REQUIRE(floor_met * 8 >= checked);
}

// With copies the exact search may run a step that frees what it adds at once (its
// exchange rule); the first greedy order alone (budget 0) misses the optimum on many of
// these graphs, so there the exact search is what reaches the brute force's optimum.
TEST_CASE("order: exact search with copies equals brute force over all topological orders", "[order]") {
    std::mt19937 rng(20261202);
    int checked = 0, exact_needed = 0;
    for (int it = 0; it < 50; it++) {
        ctx_guard g(64);
        tsr_cgraph * gf = random_dag(g.ctx, rng, 4 + (int) (rng() % 6), true);
        INFO("graph " << it << ", " << tsr_graph_n_nodes(gf) << " nodes");
        brute_force bf{gf, {}, {}, {}, SIZE_MAX, 0, 1000};
        const size_t optimum = bf.run();
        if (optimum == 0) continue;  // too many orders to enumerate
        std::vector<tsr_tensor *> builder(tsr_graph_nodes(gf), tsr_graph_nodes(gf) + tsr_graph_n_nodes(gf));
        tsr_order_params greedy = tsr_order_default_params();
        greedy.exact_max_nodes = 0;
        greedy.time_budget_ms = 0.0;
        REQUIRE(tsr_graph_optimize_order(gf, &greedy));
        exact_needed += planned_lower_bound(gf) > optimum;
        std::copy(builder.begin(), builder.end(), tsr_graph_nodes(gf));
        tsr_order_report rep;
        tsr_order_params prm = tsr_order_default_params();
        prm.time_budget_ms = 10000.0;  // as above: microseconds, but never cut short
        prm.report = &rep;
        REQUIRE(tsr_graph_optimize_order(gf, &prm));
        REQUIRE(is_topological(gf));
        REQUIRE(rep.optimal);
        REQUIRE(planned_lower_bound(gf) == optimum);
        REQUIRE(rep.optimized_lower_bound == optimum);
        checked++;
    }
    INFO(checked << " graphs checked, the exact search needed on " << exact_needed);
    REQUIRE(checked >= 30);
    REQUIRE(exact_needed >= 8);
}

TEST_CASE("order: heuristics (no exact search) stay topological and never worse", "[order]") {
    std::mt19937 rng(7);
    for (int it = 0; it < 100; it++) {
        ctx_guard g(256);
        tsr_cgraph * gf = random_dag(g.ctx, rng, 20 + (int) (rng() % 60));
        const size_t before = planned_lower_bound(gf);
        tsr_order_report rep;
        tsr_order_params prm = tsr_order_default_params();
        prm.exact_max_nodes = 0;
        prm.time_budget_ms = 2.0;
        prm.report = &rep;
        REQUIRE(tsr_graph_optimize_order(gf, &prm));
        REQUIRE(is_topological(gf));
        REQUIRE(rep.optimized_lower_bound == planned_lower_bound(gf));
        REQUIRE(rep.optimized_lower_bound <= before);
        REQUIRE(rep.builder_lower_bound == before);
    }
}

TEST_CASE("order: a U-Net-like graph with a bad builder order gets a lower peak, same results bit for bit", "[order]") {
    ctx_guard g1(128), g2(128);
    tsr_tensor * in1 = nullptr, * in2 = nullptr;
    tsr_cgraph * builder = unet_like(g1.ctx, &in1);
    tsr_cgraph * reordered = unet_like(g2.ctx, &in2);
    const size_t before = planned_lower_bound(reordered);
    tsr_order_report rep;
    tsr_order_params prm = tsr_order_default_params();
    prm.report = &rep;
    REQUIRE(tsr_graph_optimize_order(reordered, &prm));
    REQUIRE(is_topological(reordered));
    const size_t after = planned_lower_bound(reordered);
    INFO("builder " << before << " bytes, optimised " << after);
    REQUIRE(rep.reordered);
    // builder: two 64 KiB projections are held through the deepest level
    REQUIRE(after * 10 <= before * 8);
    // every node's result, byte for byte, computed in both orders
    std::vector<tsr_tensor *> o1, o2;
    for (int i = 0; i < tsr_graph_n_nodes(builder); i++) {
        o1.push_back(tsr_graph_node(builder, i));
        o2.push_back(tsr_graph_get_tensor(reordered, tsr_graph_node(builder, i)->name));
    }
    const auto r1 = run_on_cpu(builder, in1, {o1.back()});
    const auto r2 = run_on_cpu(reordered, in2, {o2.back()});
    REQUIRE(r1 == r2);
    REQUIRE(!r1[0].empty());
}

TEST_CASE("order: gallocr reorders at reserve and re-applies the order to a rebuilt graph", "[order]") {
    ctx_guard g(128);
    tsr_tensor * in = nullptr;
    tsr_cgraph * gf = unet_like(g.ctx, &in);
    const size_t before = planned_lower_bound(gf);
    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    tsr_order_report rep;
    tsr_order_params prm = tsr_order_default_params();
    prm.report = &rep;
    REQUIRE(tsr_gallocr_set_optimize_order(ga, &prm));
    REQUIRE(tsr_gallocr_reserve(ga, gf));
    REQUIRE(is_topological(gf));
    REQUIRE(rep.reordered);
    REQUIRE(tsr_gallocr_get_plan(ga)->buffers[0].lower_bound == rep.optimized_lower_bound);
    REQUIRE(rep.optimized_lower_bound < before);
    std::vector<const tsr_tensor *> order(tsr_graph_nodes(gf), tsr_graph_nodes(gf) + tsr_graph_n_nodes(gf));
    // rebuilt the builder's way in the reset context: same order as reserved, no reallocation
    tsr_reset(g.ctx);
    gf = unet_like(g.ctx, &in);
    REQUIRE(tsr_gallocr_alloc_graph(ga, gf));
    REQUIRE(tsr_gallocr_get_n_reallocs(ga) == 1);
    std::vector<const tsr_tensor *> again(tsr_graph_nodes(gf), tsr_graph_nodes(gf) + tsr_graph_n_nodes(gf));
    REQUIRE(again == order);  // same arena addresses: the same tensors in the same order
    const size_t cap = tsr_gallocr_get_buffer_size(ga, 0);
    REQUIRE(tsr_plan_check(tsr_gallocr_get_plan(ga), &cap));
    // off again: reserve leaves the order alone
    REQUIRE(tsr_gallocr_set_optimize_order(ga, nullptr));
    tsr_reset(g.ctx);
    gf = unet_like(g.ctx, &in);
    std::vector<const tsr_tensor *> built(tsr_graph_nodes(gf), tsr_graph_nodes(gf) + tsr_graph_n_nodes(gf));
    REQUIRE(tsr_gallocr_reserve(ga, gf));
    std::vector<const tsr_tensor *> kept(tsr_graph_nodes(gf), tsr_graph_nodes(gf) + tsr_graph_n_nodes(gf));
    REQUIRE(kept == built);
    tsr_gallocr_free(ga);
}

// Two U-Net-like stages, the first in buffer 0 and the second in buffer 1 (node buffer
// ids as a scheduler gives them: one run per buffer); ids receives them.
tsr_cgraph * two_stage_unet(tsr_context * ctx, std::vector<int> & ids, tsr_tensor ** first_out) {
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4096);
    tsr_set_input(x);
    tsr_tensor * h1 = *first_out = unet_stage(ctx, x);
    tsr_tensor * h2 = unet_stage(ctx, h1);
    tsr_set_output(h2);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(gf, h2));
    ids.assign((size_t) tsr_graph_n_nodes(gf), 1);
    int k = 0;
    while (tsr_graph_node(gf, k) != h1) ids[(size_t) k++] = 0;
    ids[(size_t) k] = 0;
    return gf;
}

TEST_CASE("order: reserve_n with node buffer ids reorders within each run of equal ids, no buffer's bound grows", "[order]") {
    tsr_backend_buffer_type_t bufts[2] = {tsr_backend_cpu_buffer_type(), tsr_backend_cpu_buffer_type()};
    // the builder's order, planned without reordering: each buffer's lower bound
    ctx_guard g0(256);
    std::vector<int> ids;
    tsr_tensor * h1 = nullptr;
    tsr_cgraph * ref = two_stage_unet(g0.ctx, ids, &h1);
    tsr_gallocr_t plain = tsr_gallocr_new_n(bufts, 2);
    REQUIRE(tsr_gallocr_reserve_n(plain, ref, ids.data(), nullptr));
    const size_t lb0 = tsr_gallocr_get_plan(plain)->buffers[0].lower_bound, lb1 = tsr_gallocr_get_plan(plain)->buffers[1].lower_bound;
    tsr_gallocr_free(plain);

    ctx_guard g(256);
    tsr_cgraph * gf = two_stage_unet(g.ctx, ids, &h1);
    const std::vector<const tsr_tensor *> built(tsr_graph_nodes(gf), tsr_graph_nodes(gf) + tsr_graph_n_nodes(gf));
    const int n_first = (int) std::count(ids.begin(), ids.end(), 0);
    tsr_gallocr_t ga = tsr_gallocr_new_n(bufts, 2);
    tsr_order_report rep = {};
    tsr_order_params prm = tsr_order_default_params();
    prm.report = &rep;
    REQUIRE(tsr_gallocr_set_optimize_order(ga, &prm));
    REQUIRE(tsr_gallocr_reserve_n(ga, gf, ids.data(), nullptr));
    REQUIRE(is_topological(gf));
    REQUIRE(rep.reordered);
    // every node kept its run (so ids[i] still names node i's buffer), the order changed in both
    const std::vector<const tsr_tensor *> now(tsr_graph_nodes(gf), tsr_graph_nodes(gf) + tsr_graph_n_nodes(gf));
    REQUIRE(now.size() == built.size());
    for (int part = 0; part < 2; part++) {
        const auto a = part ? built.begin() + n_first : built.begin(), b = part ? built.end() : built.begin() + n_first;
        const auto c = part ? now.begin() + n_first : now.begin(), d = part ? now.end() : now.begin() + n_first;
        REQUIRE(std::is_permutation(a, b, c, d));
        CHECK_FALSE(std::equal(a, b, c));
    }
    const tsr_plan * plan = tsr_gallocr_get_plan(ga);
    const size_t nb0 = plan->buffers[0].lower_bound, nb1 = plan->buffers[1].lower_bound;
    INFO("buffer 0: " << lb0 << " -> " << nb0 << ", buffer 1: " << lb1 << " -> " << nb1);
    // each stage alone: 4 x 16 KiB projections held through the deep path in the builder's order
    CHECK(nb0 * 10 <= lb0 * 8);
    CHECK(nb1 * 10 <= lb1 * 8);
    CHECK(rep.builder_lower_bound == lb0 + lb1);
    CHECK(rep.optimized_lower_bound == nb0 + nb1);
    REQUIRE(tsr_plan_check(plan, nullptr));
    // rebuilt in the builder's order: the reserved order again, no reallocation
    const int reallocs = tsr_gallocr_get_n_reallocs(ga);
    tsr_reset(g.ctx);
    gf = two_stage_unet(g.ctx, ids, &h1);
    const bool ok = tsr_gallocr_alloc_graph(ga, gf);
    INFO(tsr_last_error());
    REQUIRE(ok);
    CHECK(tsr_gallocr_get_n_reallocs(ga) == reallocs);
    const std::vector<const tsr_tensor *> again(tsr_graph_nodes(gf), tsr_graph_nodes(gf) + tsr_graph_n_nodes(gf));
    CHECK(again == now);
    tsr_gallocr_free(ga);
}

TEST_CASE("order: bad input gets a clear error and leaves the graph alone", "[order]") {
    REQUIRE_FALSE(tsr_graph_optimize_order(nullptr, nullptr));
    REQUIRE(std::string(tsr_last_error()).find("NULL") != std::string::npos);
    ctx_guard g(128);
    tsr_tensor * in = nullptr;
    tsr_cgraph * gf = unet_like(g.ctx, &in);
    std::vector<tsr_tensor *> built(tsr_graph_nodes(gf), tsr_graph_nodes(gf) + tsr_graph_n_nodes(gf));
    tsr_order_params prm = tsr_order_default_params();
    prm.exact_max_states = -3;
    REQUIRE_FALSE(tsr_graph_optimize_order(gf, &prm));
    REQUIRE(std::string(tsr_last_error()).find("-3") != std::string::npos);
    std::vector<tsr_tensor *> kept(tsr_graph_nodes(gf), tsr_graph_nodes(gf) + tsr_graph_n_nodes(gf));
    REQUIRE(kept == built);
    REQUIRE_FALSE(tsr_gallocr_set_optimize_order(nullptr, &prm));
    // an empty graph is fine: nothing to reorder
    ctx_guard g2(0);
    tsr_cgraph * empty = tsr_new_graph(g2.ctx);
    REQUIRE(empty);
    tsr_order_report rep;
    tsr_order_params ok = tsr_order_default_params();
    ok.report = &rep;
    REQUIRE(tsr_graph_optimize_order(empty, &ok));
    REQUIRE_FALSE(rep.reordered);
    REQUIRE(rep.optimized_lower_bound == rep.builder_lower_bound);
}
