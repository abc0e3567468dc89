// gallocr: plans on thousands of random DAGs checked three ways (tsr_plan_check, a
// pairwise overlap check over live ranges computed here, and a simulated run that stamps
// every tensor's memory when it is produced and verifies every operand when it is read);
// reserve/realloc behaviour; several buffer types; in place through views.
#include <catch2/catch.hpp>

#include "tessera/alloc.h"
#include "ctx_guard.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

const tsr_tensor * root_of(const tsr_tensor * t) { return t->view_src ? t->view_src : t; }

bool in_buffers(const tsr_tensor * t, const std::vector<tsr_backend_buffer_t> & bufs) {
    for (auto b : bufs) if (b && t->buffer == b) return true;
    return false;
}

// Everything a correct plan must satisfy, checked without looking at the plan's own ranges.
void check_graph_memory(tsr_cgraph * gf, const std::vector<tsr_backend_buffer_t> & bufs, const char * what) {
    INFO(what);
    const int n = tsr_graph_n_nodes(gf);
    const int nl = tsr_graph_n_leafs(gf);
    std::vector<const tsr_tensor *> owned;  // tensors with memory of their own in our buffers
    std::map<const tsr_tensor *, int> first, last;
    std::map<const tsr_tensor *, bool> consumed;
    for (int i = 0; i < nl; i++) {
        const tsr_tensor * t = tsr_graph_leaf(gf, i);
        if (!t->view_src && in_buffers(t, bufs)) { owned.push_back(t); first[t] = 0; last[t] = 0; }
    }
    for (int i = 0; i < n; i++) {
        const tsr_tensor * t = tsr_graph_node(gf, i);
        REQUIRE(t->data != nullptr);
        if (!t->view_src && in_buffers(t, bufs)) {
            owned.push_back(t);
            first[t] = (t->flags & TSR_TENSOR_FLAG_INPUT) ? 0 : i;
            last[t] = first[t];
        }
        if (t->view_src) {
            REQUIRE(t->data == (const char *) t->view_src->data + t->view_offs);
            if (last.count(t->view_src)) last[t->view_src] = std::max(last[t->view_src], i);
        }
    }
    for (int i = 0; i < n; i++) {
        const tsr_tensor * t = tsr_graph_node(gf, i);
        for (int s = 0; s < TSR_MAX_SRC; s++) {
            if (!t->src[s]) continue;
            consumed[t->src[s]] = true;
            const tsr_tensor * r = root_of(t->src[s]);
            if (last.count(r)) last[r] = std::max(last[r], i);
        }
    }
    for (int i = 0; i < n; i++) {  // results live past the last step (views extend their roots)
        const tsr_tensor * t = tsr_graph_node(gf, i);
        if ((t->flags & TSR_TENSOR_FLAG_OUTPUT) || !consumed[t]) {
            const tsr_tensor * r = root_of(t);
            if (last.count(r)) last[r] = n;
        }
    }
    for (const tsr_tensor * t : owned) {  // inside its buffer
        const char * base = (const char *) tsr_backend_buffer_get_base(t->buffer);
        REQUIRE((const char *) t->data >= base);
        REQUIRE((const char *) t->data + tsr_nbytes(t) <= base + tsr_backend_buffer_get_size(t->buffer));
        REQUIRE(((uintptr_t) t->data % tsr_backend_buffer_get_alignment(t->buffer)) == 0);
    }
    // 1. pairwise: tensors live at a common step never share bytes, except an allowed in-place pair
    auto inplace_pair = [&](const tsr_tensor * later, const tsr_tensor * earlier) {
        if (later->data != earlier->data || first[later] != last[earlier]) return false;
        for (int s = 0; s < TSR_MAX_SRC; s++) {
            if (later->src[s] && root_of(later->src[s]) == earlier && tsr_op_can_inplace(later, s)) return true;
        }
        return false;
    };
    for (size_t a = 0; a < owned.size(); a++) {
        for (size_t b = a + 1; b < owned.size(); b++) {
            const tsr_tensor * x = owned[a];
            const tsr_tensor * y = owned[b];
            if (x->buffer != y->buffer) continue;
            if (last[x] < first[y] || last[y] < first[x]) continue;
            const char * xa = (const char *) x->data;
            const char * ya = (const char *) y->data;
            if (xa + tsr_nbytes(x) <= ya || ya + tsr_nbytes(y) <= xa) continue;
            const bool ok = inplace_pair(x, y) || inplace_pair(y, x);
            if (!ok) {
                FAIL_CHECK("'" << x->name << "' [" << first[x] << "," << last[x] << "] and '" << y->name << "' [" << first[y]
                               << "," << last[y] << "] overlap in memory");
                return;
            }
        }
    }
    // 2. simulated run: stamp on write, verify on read
    std::map<const tsr_tensor *, uint32_t> id;
    uint32_t next = 1;
    auto stamp = [&](const tsr_tensor * t) {
        id[t] = next++;
        uint32_t * p = (uint32_t *) t->data;
        for (size_t k = 0; k < tsr_nbytes(t) / 4; k++) p[k] = id[t];
    };
    auto intact = [&](const tsr_tensor * t) {
        const uint32_t * p = (const uint32_t *) t->data;
        for (size_t k = 0; k < tsr_nbytes(t) / 4; k++) if (p[k] != id[t]) return false;
        return true;
    };
    for (int i = 0; i < nl; i++) {
        const tsr_tensor * t = tsr_graph_leaf(gf, i);
        if (!t->view_src && in_buffers(t, bufs)) stamp(t);
    }
    for (int i = 0; i < n; i++) {
        const tsr_tensor * t = tsr_graph_node(gf, i);
        if (t->flags & TSR_TENSOR_FLAG_INPUT && !t->view_src && in_buffers(t, bufs)) stamp(t);
    }
    for (int i = 0; i < n; i++) {
        const tsr_tensor * t = tsr_graph_node(gf, i);
        for (int s = 0; s < TSR_MAX_SRC; s++) {
            if (!t->src[s]) continue;
            const tsr_tensor * r = root_of(t->src[s]);
            if (!id.count(r)) continue;
            if (!intact(r)) {
                FAIL_CHECK("step " << i << " ('" << t->name << "'): operand '" << r->name << "' was overwritten");
                return;
            }
        }
        if (!t->view_src && in_buffers(t, bufs) && !(t->flags & TSR_TENSOR_FLAG_INPUT)) stamp(t);
    }
    for (int i = 0; i < n; i++) {
        const tsr_tensor * t = tsr_graph_node(gf, i);
        if ((t->flags & TSR_TENSOR_FLAG_OUTPUT) || !consumed[t]) {
            const tsr_tensor * r = root_of(t);
            if (id.count(r) && !intact(r)) {
                FAIL_CHECK("result '" << t->name << "' did not survive to the end");
                return;
            }
        }
    }
}

// A random DAG of small F32 ops: inputs, weights with data, elementwise ops (in-place
// candidates), matmuls, norms, softmax, views (reshape, transpose, partial views).
struct random_graph {
    tsr_cgraph * gf = nullptr;
    std::vector<tsr_tensor *> inputs;
};

random_graph build_random(tsr_context * ctx, tsr_context * wctx_tensors_src, std::mt19937 & rng, int n_ops) {
    (void) wctx_tensors_src;
    random_graph rg;
    std::vector<tsr_tensor *> pool;
    const int64_t dims[] = {4, 8, 16};
    auto rnd = [&](int n) { return (int) (rng() % (uint32_t) n); };
    const int n_in = 1 + rnd(3);
    for (int i = 0; i < n_in; i++) {
        tsr_tensor * t = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, dims[rnd(3)], dims[rnd(3)]);
        tsr_format_name(t, "in%d", i);
        tsr_set_input(t);
        rg.inputs.push_back(t);
        pool.push_back(t);
    }
    auto pick = [&]() -> tsr_tensor * {
        // prefer recent tensors
        const int k = (int) pool.size();
        const int j = rnd(4) == 0 ? rnd(k) : std::max(0, k - 1 - rnd(std::min(k, 4)));
        return pool[(size_t) j];
    };
    for (int op = 0; op < n_ops; op++) {
        tsr_tensor * x = pick();
        tsr_tensor * r = nullptr;
        switch (rnd(11)) {
            case 0: r = tsr_relu(ctx, x); break;
            case 1: r = tsr_scale(ctx, x, 0.5f); break;
            case 2:
            case 3: {
                tsr_tensor * y = x;
                for (int tries = 0; tries < 8; tries++) {
                    tsr_tensor * c = pool[(size_t) rnd((int) pool.size())];
                    if (tsr_are_same_shape(c, x)) { y = c; break; }
                }
                r = (op & 1) ? tsr_add(ctx, x, y) : tsr_mul(ctx, x, y);
                break;
            }
            case 4: {
                tsr_tensor * y = nullptr;
                for (int tries = 0; tries < 8 && !y; tries++) {
                    tsr_tensor * c = pool[(size_t) rnd((int) pool.size())];
                    if (c->ne[0] == x->ne[0]) y = c;
                }
                if (!y) y = x;
                r = tsr_mul_mat(ctx, y, x);
                break;
            }
            case 5:
                if (tsr_is_contiguous(x)) {
                    tsr_tensor * v = tsr_reshape_2d(ctx, x, x->ne[1], x->ne[0]);
                    r = rnd(2) ? tsr_scale(ctx, v, 2.0f) : v;
                } else {
                    r = tsr_cont(ctx, x);
                }
                break;
            case 6: r = tsr_cont(ctx, tsr_transpose(ctx, x)); break;
            case 7:
                if (x->ne[1] >= 2) {
                    tsr_tensor * v = tsr_view_2d(ctx, x, x->ne[0], x->ne[1] / 2, x->nb[1], 0);
                    r = rnd(2) ? tsr_relu(ctx, v) : tsr_cont(ctx, v);
                } else {
                    r = tsr_relu(ctx, x);
                }
                break;
            case 8: r = tsr_rms_norm(ctx, tsr_is_contiguous(x) ? x : tsr_cont(ctx, x), 1e-5f); break;
            case 9: r = tsr_soft_max(ctx, tsr_is_contiguous(x) ? x : tsr_cont(ctx, x)); break;
            default: r = tsr_cont(ctx, x); break;
        }
        REQUIRE(r != nullptr);
        tsr_format_name(r, "n%d", op);
        if (rnd(10) == 0) tsr_set_output(r);
        pool.push_back(r);
    }
    rg.gf = tsr_new_graph(ctx);
    // results: the last tensor and every output
    for (tsr_tensor * t : pool) if (t->flags & TSR_TENSOR_FLAG_OUTPUT) REQUIRE(tsr_build_forward_expand(rg.gf, t));
    REQUIRE(tsr_build_forward_expand(rg.gf, pool.back()));
    return rg;
}

}  // namespace

TEST_CASE("gallocr: random DAGs get valid plans", "[alloc][gallocr]") {
    std::mt19937 rng(1234);
    int n_graphs = 0, n_inplace = 0;
    for (int iter = 0; iter < 1500; iter++) {
        ctx_guard g(400);
        REQUIRE(g.ctx);
        const int n_ops = 2 + (int) (rng() % 60);
        random_graph rg = build_random(g.ctx, nullptr, rng, n_ops);
        tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
        REQUIRE(ga);
        if (iter % 7 == 0) {  // reserve searches (2 ms), alloc_graph re-applies that plan
            tsr_gallocr_set_time_budget(ga, 2.0);
            REQUIRE(tsr_gallocr_reserve(ga, rg.gf));
        }
        REQUIRE(tsr_gallocr_alloc_graph(ga, rg.gf));
        const tsr_plan * plan = tsr_gallocr_get_plan(ga);
        REQUIRE(plan);
        const size_t cap = tsr_gallocr_get_buffer_size(ga, 0);
        INFO("iteration " << iter);
        REQUIRE(tsr_plan_check(plan, &cap));
        REQUIRE(plan->buffers[0].planned_size >= plan->buffers[0].lower_bound);
        REQUIRE(plan->buffers[0].planned_size <= plan->buffers[0].no_reuse_size);
        for (int i = 0; i < plan->n_tensors; i++) n_inplace += plan->tensors[i].inplace ? 1 : 0;
        check_graph_memory(rg.gf, {tsr_gallocr_get_buffer(ga, 0)}, "random DAG");
        tsr_gallocr_free(ga);
        n_graphs++;
    }
    CHECK(n_graphs == 1500);
    CHECK(n_inplace > 100);  // the generator does exercise in-place reuse
}

TEST_CASE("gallocr: tsr_plan_check catches overlaps and bad offsets", "[alloc][gallocr]") {
    tsr_plan_tensor ts[2] = {
        {nullptr, "a", 0, 0, 128, 0, 3, false, -1},
        {nullptr, "b", 0, 64, 128, 2, 5, false, -1},
    };
    tsr_plan_buffer pb = {256, 256, 256, 64};
    tsr_plan plan = {2, ts, 1, &pb, 6};
    CHECK_FALSE(tsr_plan_check(&plan, nullptr));
    CHECK(std::string(tsr_last_error()).find("overlap") != std::string::npos);
    ts[1].offset = 128;
    CHECK(tsr_plan_check(&plan, nullptr));
    ts[1].offset = 96;  // misaligned
    CHECK_FALSE(tsr_plan_check(&plan, nullptr));
    ts[1].offset = 192;  // outside the buffer
    CHECK_FALSE(tsr_plan_check(&plan, nullptr));
    ts[1].offset = 128;
    ts[1].first = 4;  // no common step: may share memory
    ts[1].offset = 0;
    CHECK(tsr_plan_check(&plan, nullptr));
    ts[1].first = 3;  // in place: exact alias starting where 'a' dies
    ts[1].inplace = true;
    ts[1].inplace_of = 0;
    CHECK(tsr_plan_check(&plan, nullptr));
    ts[1].inplace_of = -1;
    CHECK_FALSE(tsr_plan_check(&plan, nullptr));
}

namespace {
// A chain whose widest tensor is `width` floats wide: in -> mul_mat(w) -> relu -> ... -> out
tsr_cgraph * build_chain(tsr_context * ctx, tsr_tensor * w, int64_t width, int n_layers) {
    tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 64, width);
    tsr_set_name(x, "x");
    tsr_set_input(x);
    for (int l = 0; l < n_layers; l++) {
        tsr_tensor * h = tsr_mul_mat(ctx, w, x);  // [64, width]
        h = tsr_relu(ctx, h);
        x = tsr_add(ctx, h, x);
    }
    tsr_set_output(x);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_build_forward_expand(gf, x);
    return gf;
}
}  // namespace

TEST_CASE("gallocr: reserve with the largest graph, smaller graphs never reallocate; growth does", "[alloc][gallocr]") {
    ctx_guard wg(4);
    tsr_tensor * w = tsr_new_tensor_2d(wg.ctx, TSR_TYPE_F32, 64, 64);
    tsr_backend_buffer_t wbuf = tsr_backend_alloc_ctx_tensors_from_buft(wg.ctx, tsr_backend_cpu_buffer_type());
    REQUIRE(wbuf);

    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    {
        ctx_guard g(200);
        tsr_cgraph * big = build_chain(g.ctx, w, 512, 6);
        REQUIRE(tsr_gallocr_reserve(ga, big));
    }
    CHECK(tsr_gallocr_get_n_reallocs(ga) == 1);
    const size_t reserved = tsr_gallocr_get_buffer_size(ga, 0);
    for (int width : {1, 7, 100, 511, 512}) {
        for (int layers : {1, 3, 6}) {
            ctx_guard g(200);
            tsr_cgraph * gf = build_chain(g.ctx, w, width, layers);
            REQUIRE(tsr_gallocr_alloc_graph(ga, gf));
            CHECK(w->buffer == wbuf);  // weights left alone
            check_graph_memory(gf, {tsr_gallocr_get_buffer(ga, 0)}, "chain");
            const size_t cap = tsr_gallocr_get_buffer_size(ga, 0);
            REQUIRE(tsr_plan_check(tsr_gallocr_get_plan(ga), &cap));
        }
    }
    CHECK(tsr_gallocr_get_n_reallocs(ga) == 1);
    CHECK(tsr_gallocr_get_buffer_size(ga, 0) == reserved);
    {
        ctx_guard g(200);
        tsr_cgraph * bigger = build_chain(g.ctx, w, 2048, 2);
        REQUIRE(tsr_gallocr_alloc_graph(ga, bigger));
        check_graph_memory(bigger, {tsr_gallocr_get_buffer(ga, 0)}, "bigger chain");
    }
    CHECK(tsr_gallocr_get_n_reallocs(ga) == 2);
    CHECK(tsr_gallocr_get_buffer_size(ga, 0) > reserved);
    tsr_gallocr_free(ga);
    tsr_backend_buffer_free(wbuf);
}

TEST_CASE("gallocr: the same graph rebuilt re-applies the cached plan", "[alloc][gallocr]") {
    ctx_guard wg(4);
    tsr_tensor * w = tsr_new_tensor_2d(wg.ctx, TSR_TYPE_F32, 64, 64);
    tsr_backend_buffer_t wbuf = tsr_backend_alloc_ctx_tensors_from_buft(wg.ctx, tsr_backend_cpu_buffer_type());
    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    ctx_guard g(200);
    std::vector<size_t> offs1, offs2;
    for (int round = 0; round < 3; round++) {
        tsr_reset(g.ctx);
        tsr_cgraph * gf = build_chain(g.ctx, w, 100, 4);
        REQUIRE(tsr_gallocr_alloc_graph(ga, gf));
        check_graph_memory(gf, {tsr_gallocr_get_buffer(ga, 0)}, "rebuilt");
        std::vector<size_t> & o = round == 0 ? offs1 : offs2;
        o.clear();
        const char * base = (const char *) tsr_backend_buffer_get_base(tsr_gallocr_get_buffer(ga, 0));
        for (int i = 0; i < tsr_graph_n_nodes(gf); i++) o.push_back((size_t) ((const char *) tsr_graph_node(gf, i)->data - base));
        if (round > 0) CHECK(offs1 == offs2);
        // allocating the same (already placed) graph again keeps everything where it is
        REQUIRE(tsr_gallocr_alloc_graph(ga, gf));
        for (int i = 0; i < tsr_graph_n_nodes(gf); i++) CHECK((size_t) ((const char *) tsr_graph_node(gf, i)->data - base) == o[(size_t) i]);
    }
    CHECK(tsr_gallocr_get_n_reallocs(ga) == 1);
    tsr_gallocr_free(ga);
    tsr_backend_buffer_free(wbuf);
}

TEST_CASE("gallocr: several buffer types in one gallocr", "[alloc][gallocr]") {
    tsr_tracing_allocator * tr = tsr_tracing_allocator_new(nullptr);
    tsr_backend_buffer_type_t bufts[2] = {tsr_backend_cpu_buffer_type(),
                                          tsr_backend_cpu_buffer_type_with_allocator(tsr_tracing_allocator_host(tr))};
    std::mt19937 rng(99);
    for (int iter = 0; iter < 200; iter++) {
        ctx_guard g(400);
        random_graph rg = build_random(g.ctx, nullptr, rng, 5 + (int) (rng() % 40));
        const int n = tsr_graph_n_nodes(rg.gf), nl = tsr_graph_n_leafs(rg.gf);
        std::vector<int> nid((size_t) n), lid((size_t) nl);
        for (int i = 0; i < n; i++) nid[(size_t) i] = (int) (rng() % 2);
        for (int i = 0; i < nl; i++) lid[(size_t) i] = (int) (rng() % 2);
        tsr_gallocr_t ga = tsr_gallocr_new_n(bufts, 2);
        REQUIRE(tsr_gallocr_reserve_n(ga, rg.gf, nid.data(), lid.data()));
        REQUIRE(tsr_gallocr_alloc_graph(ga, rg.gf));
        std::vector<tsr_backend_buffer_t> bufs = {tsr_gallocr_get_buffer(ga, 0), tsr_gallocr_get_buffer(ga, 1)};
        for (int i = 0; i < n; i++) {
            const tsr_tensor * t = tsr_graph_node(rg.gf, i);
            if (!t->view_src) CHECK(t->buffer == bufs[(size_t) nid[(size_t) i]]);
        }
        size_t caps[2] = {tsr_gallocr_get_buffer_size(ga, 0), tsr_gallocr_get_buffer_size(ga, 1)};
        REQUIRE(tsr_plan_check(tsr_gallocr_get_plan(ga), caps));
        check_graph_memory(rg.gf, bufs, "two buffer types");
        tsr_gallocr_free(ga);
    }
    CHECK(tsr_tracing_allocator_get_stats(tr).current_bytes == 0);
    CHECK(tsr_tracing_allocator_get_stats(tr).n_allocs > 0);
    tsr_backend_cpu_buffer_type_free(bufts[1]);
    tsr_tracing_allocator_free(tr);
}

TEST_CASE("gallocr: alloc_graph after reserve_n with node ids and NULL leaf ids", "[alloc][gallocr]") {
    // NULL leaf ids mean "all in buffer 0" for any number of leafs, as in reserve_n
    tsr_backend_buffer_type_t bufts[2] = {tsr_backend_cpu_buffer_type(), tsr_backend_cpu_buffer_type()};
    ctx_guard g(16);
    tsr_tensor * x = tsr_new_tensor_1d(g.ctx, TSR_TYPE_F32, 256);
    tsr_set_input(x);
    tsr_tensor * y = tsr_sqr(g.ctx, tsr_scale(g.ctx, x, 2.0f));
    tsr_cgraph * gf = tsr_new_graph(g.ctx);
    tsr_build_forward_expand(gf, y);
    REQUIRE(tsr_graph_n_leafs(gf) == 1);
    const int nid[2] = {0, 1};
    tsr_gallocr_t ga = tsr_gallocr_new_n(bufts, 2);
    REQUIRE(tsr_gallocr_reserve_n(ga, gf, nid, nullptr));
    const bool ok = tsr_gallocr_alloc_graph(ga, gf);
    INFO(tsr_last_error());
    REQUIRE(ok);
    CHECK(tsr_graph_node(gf, 1)->buffer == tsr_gallocr_get_buffer(ga, 1));
    CHECK(x->buffer == tsr_gallocr_get_buffer(ga, 0));
    tsr_gallocr_free(ga);
}

TEST_CASE("gallocr: in place through a view, norm and swiglu; never over inputs/outputs", "[alloc][gallocr]") {
    ctx_guard g(64);
    tsr_tensor * x = tsr_new_tensor_2d(g.ctx, TSR_TYPE_F32, 64, 8);
    tsr_set_input(x);
    tsr_tensor * w = tsr_new_tensor_2d(g.ctx, TSR_TYPE_F32, 64, 64);
    tsr_set_input(w);
    tsr_tensor * pos = tsr_new_tensor_1d(g.ctx, TSR_TYPE_I32, 8);
    tsr_set_input(pos);
    tsr_tensor * q = tsr_mul_mat(g.ctx, w, x);                       // [64, 8]
    tsr_tensor * q3 = tsr_reshape_3d(g.ctx, q, 16, 4, 8);            // view
    tsr_tensor * qr = tsr_rope_ext(g.ctx, q3, pos, nullptr, 16, TSR_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
    REQUIRE(qr);
    tsr_tensor * q2 = tsr_reshape_2d(g.ctx, qr, 64, 8);
    tsr_tensor * n = tsr_rms_norm(g.ctx, q2, 1e-5f);
    tsr_tensor * a = tsr_mul_mat(g.ctx, w, n);
    tsr_tensor * b = tsr_mul_mat(g.ctx, w, n);
    tsr_tensor * s = tsr_swiglu_split(g.ctx, a, b);
    REQUIRE(s);
    tsr_tensor * o = tsr_scale(g.ctx, s, 2.0f);
    tsr_set_output(o);
    tsr_tensor * xs = tsr_scale(g.ctx, x, 3.0f);  // x is an input: never taken over
    tsr_tensor * out = tsr_add(g.ctx, o, xs);
    tsr_cgraph * gf = tsr_new_graph(g.ctx);
    tsr_build_forward_expand(gf, out);
    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    REQUIRE(tsr_gallocr_alloc_graph(ga, gf));
    CHECK(qr->data == q->data);  // rope over reshape(q): in place through the view
    CHECK(n->data == q->data);   // rms_norm over reshape(rope): in place again
    CHECK((s->data == a->data || s->data == b->data));
    CHECK(xs->data != x->data);  // input preserved
    CHECK(out->data != o->data); // output preserved
    check_graph_memory(gf, {tsr_gallocr_get_buffer(ga, 0)}, "in place");
    const tsr_plan * plan = tsr_gallocr_get_plan(ga);
    REQUIRE(tsr_plan_check(plan, nullptr));
    CHECK(plan->buffers[0].planned_size == plan->buffers[0].lower_bound);
    tsr_gallocr_free(ga);
}

TEST_CASE("gallocr: plan export", "[alloc][gallocr]") {
    ctx_guard g(64);
    tsr_tensor * x = tsr_new_tensor_2d(g.ctx, TSR_TYPE_F32, 32, 8);
    tsr_set_input(x);
    tsr_set_name(x, "x<&\"in\">");
    tsr_tensor * y = tsr_relu(g.ctx, tsr_mul_mat(g.ctx, x, x));
    tsr_cgraph * gf = tsr_new_graph(g.ctx);
    tsr_build_forward_expand(gf, y);
    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    REQUIRE(tsr_gallocr_alloc_graph(ga, gf));
    const tsr_plan * plan = tsr_gallocr_get_plan(ga);
    REQUIRE(plan);
    CHECK(plan->n_tensors == 3);
    FILE * f = tmpfile();
    REQUIRE(f);
    REQUIRE(tsr_plan_write_json(plan, f));
    REQUIRE(tsr_plan_write_svg(plan, 0, f));
    CHECK_FALSE(tsr_plan_write_svg(plan, 1, f));
    std::string s((size_t) ftell(f), '\0');
    rewind(f);
    REQUIRE(fread(&s[0], 1, s.size(), f) == s.size());
    fclose(f);
    CHECK(s.find("\"name\": \"x<&\\\"in\\\">\"") != std::string::npos);
    CHECK(s.find("x&lt;&amp;&quot;in&quot;&gt;") != std::string::npos);
    CHECK(s.find("\"lower_bound\"") != std::string::npos);
    CHECK(s.find("<rect") != std::string::npos);
    tsr_gallocr_free(ga);
}

// Regression: a graph whose tensors all have 0 elements planned 0 bytes, allocated no
// buffer and then placed its tensors in a NULL buffer. Now it plans 0 bytes, places every
// tensor in a buffer of its own (the smallest the type makes) and checks clean.
TEST_CASE("gallocr: zero-element tensors plan at 0 bytes and are placed", "[alloc][gallocr][error]") {
    ctx_guard c(16);
    tsr_tensor * a = tsr_new_tensor_2d(c.ctx, TSR_TYPE_F32, 0, 3);
    tsr_tensor * b = tsr_new_tensor_1d(c.ctx, TSR_TYPE_F32, 0);
    tsr_set_input(a);
    tsr_set_input(b);
    tsr_tensor * s = tsr_soft_max(c.ctx, a);
    tsr_tensor * t = tsr_scale(c.ctx, tsr_add(c.ctx, b, b), 2.0f);
    tsr_set_output(s);
    tsr_set_output(t);
    tsr_cgraph * g = tsr_new_graph(c.ctx);
    REQUIRE(tsr_build_forward_expand(g, s));
    REQUIRE(tsr_build_forward_expand(g, t));
    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    REQUIRE(tsr_gallocr_alloc_graph(ga, g));
    const tsr_plan * plan = tsr_gallocr_get_plan(ga);
    REQUIRE(plan);
    CHECK(plan->buffers[0].planned_size == 0);
    CHECK(plan->buffers[0].lower_bound == 0);
    CHECK(tsr_plan_check(plan, nullptr));
    for (tsr_tensor * x : {a, b, s, t}) {
        CHECK(x->buffer == tsr_gallocr_get_buffer(ga, 0));
        CHECK(x->data != nullptr);
    }
    // a second run re-applies the plan
    REQUIRE(tsr_gallocr_alloc_graph(ga, g));
    CHECK(tsr_gallocr_get_n_reallocs(ga) == 1);
    tsr_gallocr_free(ga);
}
