// plan-viewer: show where gallocr puts every tensor of a graph.
//
//   tessera-plan-viewer [--out PREFIX] [--graph transformer|unet] [--tokens N (1-4096)] [--trace FILE.csv]
//
// Without --trace: builds a graph (a small transformer block stack, or a U-Net-style CNN
// with FPN-style lateral 1x1 convs on its skips), plans it with gallocr in the builder's
// order and again after tsr_graph_optimize_order, and writes PREFIX.svg (both plans,
// one panel each: steps on x, offsets on y, one rectangle per tensor coloured by op
// kind, the lower bound and planned size marked) and PREFIX.json (the optimised plan:
// every tensor's buffer, offset, size, live steps, in-place). With --trace: packs an
// allocation trace (id,lower,upper,size) with tsr_pack and draws that instead.
//
// The README's picture is `tessera-plan-viewer --graph unet --out docs/plan-unet`.
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "cli.h"

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <string>
#include <vector>

// The graph computing `out`, which is named "out" and marked OUTPUT.
static tsr_cgraph * graph_of_output(tsr_context * ctx, tsr_tensor * out) {
    tsr_set_name(out, "out");
    tsr_set_output(out);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_build_forward_expand(gf, out);
    return gf;
}

static tsr_cgraph * build_transformer(tsr_context * ctx, tsr_context * wctx, int T) {
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
    return graph_of_output(ctx, x);
}

// A conv without bias (the picture stays about memory), named, then relu (in place).
static tsr_tensor * conv_relu(tsr_context * ctx, tsr_context * wctx, const char * name, tsr_tensor * x, int k, int oc) {
    tsr_tensor * w = tsr_new_tensor_4d(wctx, TSR_TYPE_F16, k, k, x->ne[2], oc);
    tsr_format_name(w, "%s.w", name);
    tsr_tensor * y = tsr_conv_2d(ctx, w, x, 1, 1, k / 2, k / 2, 1, 1);
    if (!y) return nullptr;
    tsr_set_name(y, name);
    return tsr_relu(ctx, y);
}

// U-Net-style CNN, 3 levels at 64x64. Each decoder level concatenates a lateral 1x1 conv
// of its skip (widened, as in FPN) with the upsampled deeper path. The builder computes
// each lateral right after its encoder level and holds it through the deeper levels; a
// better order computes it when the decoder needs it.
static tsr_cgraph * build_unet(tsr_context * ctx, tsr_context * wctx) {
    tsr_tensor * x = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 64, 64, 3, 1);
    tsr_set_name(x, "image");
    tsr_set_input(x);
    const int ch[3] = {16, 64, 128};
    tsr_tensor * skips[3];
    char name[32];
    for (int lv = 0; lv < 3 && x; lv++) {
        snprintf(name, sizeof name, "enc%d", lv);
        skips[lv] = conv_relu(ctx, wctx, name, x, 3, ch[lv]);
        x = skips[lv] ? tsr_pool_2d(ctx, skips[lv], TSR_OP_POOL_MAX, 2, 2, 2, 2, 0, 0) : nullptr;
    }
    x = x ? conv_relu(ctx, wctx, "mid", x, 3, 256) : nullptr;
    for (int lv = 2; lv >= 0 && x; lv--) {
        snprintf(name, sizeof name, "lat%d", lv);
        tsr_tensor * lateral = conv_relu(ctx, wctx, name, skips[lv], 1, 2 * ch[lv]);
        snprintf(name, sizeof name, "up%d", lv);
        tsr_tensor * up = conv_relu(ctx, wctx, name, tsr_upscale(ctx, x, 2, TSR_SCALE_MODE_NEAREST), 1, ch[lv]);
        snprintf(name, sizeof name, "dec%d", lv);
        x = lateral && up ? conv_relu(ctx, wctx, name, tsr_concat(ctx, lateral, up, 2), 3, ch[lv]) : nullptr;
    }
    return x ? graph_of_output(ctx, x) : nullptr;
}

static int fail(const std::string & msg) {
    fprintf(stderr, "plan-viewer: %s\n", msg.c_str());
    return 1;
}

static void print_plan(const char * what, const tsr_plan * plan) {
    const tsr_plan_buffer & b = plan->buffers[0];
    printf("%s: %d tensors, %d steps: planned %zu bytes, lower bound %zu (ratio %.4f), without reuse %zu\n", what, plan->n_tensors,
           plan->n_steps, b.planned_size, b.lower_bound, b.lower_bound ? (double) b.planned_size / (double) b.lower_bound : 1.0,
           b.no_reuse_size);
}

static bool write_outputs(const std::vector<tsr_plan_panel> & panels, const std::string & prefix) {
    std::string err;
    if (!pv::write_plan_files(panels, prefix, err)) {
        fail(err);
        return false;
    }
    for (const tsr_plan_panel & p : panels) print_plan(p.caption ? p.caption : "plan", p.plan);
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
    return write_outputs({tsr_plan_panel{&plan, "packed trace"}}, prefix) ? 0 : 1;
}

// gallocr's plan of gf in its current order (valid while ga and gf live), checked.
static const tsr_plan * plan_of(tsr_gallocr_t ga, tsr_cgraph * gf) {
    if (!ga) return nullptr;
    tsr_gallocr_set_time_budget(ga, 1000.0);  // an offline tool: search as a model loader would not
    if (!tsr_gallocr_reserve(ga, gf)) return nullptr;
    const tsr_plan * plan = tsr_gallocr_get_plan(ga);
    return plan && tsr_plan_check(plan, nullptr) ? plan : nullptr;
}

// The graph's plan in the builder's order, then in the optimised order, in one picture.
static int show_graph(tsr_cgraph * gf, const std::string & prefix) {
    tsr_gallocr_t builder = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    tsr_gallocr_t optimised = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    const tsr_plan * before = plan_of(builder, gf);
    tsr_order_report rep = {};
    tsr_order_params op = tsr_order_default_params();
    op.report = &rep;
    const tsr_plan * after = before && tsr_graph_optimize_order(gf, &op) ? plan_of(optimised, gf) : nullptr;
    int rc = 1;
    if (!after) {
        fail(tsr_last_error());
    } else {
        printf("order: lower bound %zu -> %zu bytes%s, %.2f ms\n", rep.builder_lower_bound, rep.optimized_lower_bound,
               rep.optimal ? " (optimal)" : "", rep.ms);
        const char * caption = rep.reordered ? "optimised order" : "optimised order (no lower order found: the builder's)";
        rc = write_outputs({tsr_plan_panel{before, "builder order"}, tsr_plan_panel{after, caption}}, prefix) ? 0 : 1;
    }
    tsr_gallocr_free(builder);
    tsr_gallocr_free(optimised);
    return rc;
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
    tsr_init_params wp = {64 * tsr_tensor_overhead(), nullptr, true};
    tsr_context * wctx = tsr_init(wp);
    tsr_init_params p = {1024 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true};
    tsr_context * ctx = tsr_init(p);
    if (!ctx || !wctx) { fprintf(stderr, "plan-viewer: %s\n", tsr_last_error()); return 1; }
    tsr_cgraph * gf = a.graph == "unet" ? build_unet(ctx, wctx) : build_transformer(ctx, wctx, a.tokens);
    int rc = 1;
    // the weights get their own buffer; the compute buffer is planned by gallocr
    tsr_backend_buffer_t wbuf = gf ? tsr_backend_alloc_ctx_tensors_from_buft(wctx, tsr_backend_cpu_buffer_type()) : nullptr;
    if (!gf) fprintf(stderr, "plan-viewer: building the graph failed: %s\n", tsr_last_error());
    else if (!wbuf) fail(tsr_last_error());
    else rc = show_graph(gf, a.prefix);
    tsr_backend_buffer_free(wbuf);
    tsr_free(ctx);
    tsr_free(wctx);
    return rc;
}
