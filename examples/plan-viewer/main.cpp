// plan-viewer: show where gallocr puts every tensor of a graph.
//
//   tessera-plan-viewer [--out PREFIX] [--tokens N (1-4096)] [--trace FILE.csv]
//
// Without --trace: builds a small transformer block stack (attention + SwiGLU MLP),
// plans it with gallocr and writes PREFIX.json (every tensor: buffer, offset, size, live
// steps, in-place) and PREFIX.svg (steps on x, offsets on y, one rectangle per tensor,
// its name on hover; the dashed line is the lower bound). With --trace: packs an
// allocation trace (id,lower,upper,size) with tsr_pack and draws that instead.
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "cli.h"

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <string>
#include <vector>

static tsr_cgraph * build(tsr_context * ctx, tsr_context * wctx, int T) {
    const int d = 256, H = 4, hd = 64, ff = 704, L = 2;
    tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, d, T);
    tsr_set_name(x, "x");
    tsr_set_input(x);
    tsr_tensor * pos = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, T);
    tsr_set_name(pos, "pos");
    tsr_set_input(pos);
    tsr_tensor * mask = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, T, T);
    tsr_set_name(mask, "mask");
    tsr_set_input(mask);
    for (int l = 0; l < L; l++) {
        auto w = [&](const char * n, int64_t a, int64_t b) {
            tsr_tensor * t = tsr_new_tensor_2d(wctx, TSR_TYPE_F32, a, b);
            tsr_format_name(t, "l%d.%s", l, n);
            return t;
        };
        tsr_tensor * cur = tsr_rms_norm(ctx, x, 1e-5f);
        tsr_tensor * q = tsr_rope_ext(ctx, tsr_reshape_3d(ctx, tsr_mul_mat(ctx, w("wq", d, d), cur), hd, H, T), pos, nullptr, hd,
                                      TSR_ROPE_TYPE_NORMAL, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        tsr_tensor * k = tsr_rope_ext(ctx, tsr_reshape_3d(ctx, tsr_mul_mat(ctx, w("wk", d, d), cur), hd, H, T), pos, nullptr, hd,
                                      TSR_ROPE_TYPE_NORMAL, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        tsr_tensor * v = tsr_reshape_3d(ctx, tsr_mul_mat(ctx, w("wv", d, d), cur), hd, H, T);
        tsr_tensor * kq = tsr_soft_max_ext(ctx, tsr_mul_mat(ctx, tsr_permute(ctx, k, 0, 2, 1, 3), tsr_permute(ctx, q, 0, 2, 1, 3)),
                                           mask, 0.125f, 0.0f);
        tsr_tensor * kqv = tsr_mul_mat(ctx, tsr_cont(ctx, tsr_permute(ctx, v, 1, 2, 0, 3)), kq);
        cur = tsr_cont_2d(ctx, tsr_permute(ctx, kqv, 0, 2, 1, 3), d, T);
        x = tsr_add(ctx, x, tsr_mul_mat(ctx, w("wo", d, d), cur));
        cur = tsr_rms_norm(ctx, x, 1e-5f);
        cur = tsr_swiglu_split(ctx, tsr_mul_mat(ctx, w("gate", d, ff), cur), tsr_mul_mat(ctx, w("up", d, ff), cur));
        x = tsr_add(ctx, x, tsr_mul_mat(ctx, w("down", ff, d), cur));
        if (!x) return nullptr;
    }
    tsr_set_name(x, "out");
    tsr_set_output(x);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_build_forward_expand(gf, x);
    return gf;
}

static int fail(const std::string & msg) {
    fprintf(stderr, "plan-viewer: %s\n", msg.c_str());
    return 1;
}

static bool write_outputs(const tsr_plan * plan, const std::string & prefix) {
    std::string err;
    if (!pv::write_plan_files(plan, prefix, err)) {
        fail(err);
        return false;
    }
    const tsr_plan_buffer & b = plan->buffers[0];
    printf("%d tensors, %d steps: planned %zu bytes, lower bound %zu (ratio %.4f), without reuse %zu\n", plan->n_tensors,
           plan->n_steps, b.planned_size, b.lower_bound, b.lower_bound ? (double) b.planned_size / (double) b.lower_bound : 1.0,
           b.no_reuse_size);
    printf("wrote %s.json and %s.svg\n", prefix.c_str(), prefix.c_str());
    return true;
}

// A trace: pack it, then draw it through the same plan exporter.
static int show_trace(const std::string & trace, const std::string & prefix) {
    std::string text, err;
    std::vector<pv::trace_entry> entries;
    if (!pv::read_file(trace, text, err) || !pv::parse_trace(text, trace, entries, err)) return fail(err);
    std::vector<tsr_pack_item> items;
    std::vector<std::string> names;
    for (const pv::trace_entry & e : entries) {
        items.push_back(e.item);
        names.push_back("buffer " + std::to_string(e.id));
    }
    const size_t peak = tsr_pack(items.data(), items.size(), 1, 1000.0);
    if (peak == SIZE_MAX) return fail(tsr_last_error());
    int64_t lo = items[0].lower, hi = items[0].upper;
    for (auto & it : items) { lo = std::min(lo, it.lower); hi = std::max(hi, it.upper); }
    std::vector<tsr_plan_tensor> pts;
    for (size_t i = 0; i < items.size(); i++) {
        if (items[i].upper <= items[i].lower) continue;
        pts.push_back(tsr_plan_tensor{nullptr, names[i].c_str(), 0, items[i].offset, items[i].size, (int) (items[i].lower - lo),
                                      (int) (items[i].upper - 1 - lo), false, -1});
    }
    size_t total = 0;
    for (auto & it : items) total = it.size > SIZE_MAX - total ? SIZE_MAX : total + it.size;
    tsr_plan_buffer pb = {peak, tsr_pack_lower_bound(items.data(), items.size(), 1), total, 1};
    tsr_plan plan = {(int) pts.size(), pts.data(), 1, &pb, (int) (hi - lo)};
    if (!tsr_plan_check(&plan, nullptr)) return fail(std::string("invalid packing: ") + tsr_last_error());
    return write_outputs(&plan, prefix) ? 0 : 1;
}

int main(int argc, char ** argv) {
    pv::args a;
    std::string err;
    if (!pv::parse_args(argc, argv, a, err)) {
        fprintf(stderr, "plan-viewer: %s\n%s\n", err.c_str(), pv::usage());
        return 2;
    }
    if (a.help) { printf("%s\n", pv::usage()); return 0; }
    if (!a.trace.empty()) return show_trace(a.trace, a.prefix);
    const int T = a.tokens;
    tsr_init_params wp = {64 * tsr_tensor_overhead(), nullptr, true};
    tsr_context * wctx = tsr_init(wp);
    tsr_init_params p = {1024 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true};
    tsr_context * ctx = tsr_init(p);
    if (!ctx || !wctx) { fprintf(stderr, "plan-viewer: %s\n", tsr_last_error()); return 1; }
    tsr_cgraph * gf = build(ctx, wctx, T);
    if (!gf) { fprintf(stderr, "plan-viewer: building the graph failed: %s\n", tsr_last_error()); return 1; }
    // the weights get their own buffer; the compute buffer is planned by gallocr
    tsr_backend_buffer_t wbuf = tsr_backend_alloc_ctx_tensors_from_buft(wctx, tsr_backend_cpu_buffer_type());
    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    const bool planned = wbuf && ga && tsr_gallocr_reserve(ga, gf);
    const tsr_plan * plan = planned ? tsr_gallocr_get_plan(ga) : nullptr;
    int rc = 1;
    if (!plan || !tsr_plan_check(plan, nullptr)) fail(tsr_last_error());
    else if (write_outputs(plan, a.prefix)) rc = 0;
    tsr_gallocr_free(ga);
    tsr_backend_buffer_free(wbuf);
    tsr_free(ctx);
    tsr_free(wctx);
    return rc;
}
