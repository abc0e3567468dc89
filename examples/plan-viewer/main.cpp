// plan-viewer: show where gallocr puts every tensor of a graph.
//
//   tessera-plan-viewer [--out PREFIX] [--tokens N] [--trace FILE.csv]
//
// Without --trace: builds a small transformer block stack (attention + SwiGLU MLP),
// plans it with gallocr and writes PREFIX.json (every tensor: buffer, offset, size, live
// steps, in-place) and PREFIX.svg (steps on x, offsets on y, one rectangle per tensor,
// its name on hover; the dashed line is the lower bound). With --trace: packs an
// allocation trace (id,lower,upper,size) with tsr_pack and draws that instead.
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
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

static bool write_outputs(const tsr_plan * plan, const std::string & prefix) {
    const std::string jn = prefix + ".json", sn = prefix + ".svg";
    FILE * fj = fopen(jn.c_str(), "w");
    FILE * fs = fopen(sn.c_str(), "w");
    bool ok = fj && fs && tsr_plan_write_json(plan, fj) && tsr_plan_write_svg(plan, 0, fs);
    if (fj) ok = (fclose(fj) == 0) && ok;
    if (fs) ok = (fclose(fs) == 0) && ok;
    if (!ok) { fprintf(stderr, "plan-viewer: cannot write %s / %s: %s\n", jn.c_str(), sn.c_str(), tsr_last_error()); return false; }
    const tsr_plan_buffer & b = plan->buffers[0];
    printf("%d tensors, %d steps: planned %zu bytes, lower bound %zu (ratio %.4f), without reuse %zu\n", plan->n_tensors,
           plan->n_steps, b.planned_size, b.lower_bound, b.lower_bound ? (double) b.planned_size / (double) b.lower_bound : 1.0,
           b.no_reuse_size);
    printf("wrote %s and %s\n", jn.c_str(), sn.c_str());
    return true;
}

int main(int argc, char ** argv) {
    std::string prefix = "plan", trace;
    int T = 64;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--out" && i + 1 < argc) prefix = argv[++i];
        else if (a == "--tokens" && i + 1 < argc) T = atoi(argv[++i]);
        else if (a == "--trace" && i + 1 < argc) trace = argv[++i];
        else { fprintf(stderr, "usage: %s [--out PREFIX] [--tokens N] [--trace FILE.csv]\n", argv[0]); return 2; }
    }
    if (!trace.empty()) {
        // a trace: pack it, then draw it through the same plan exporter
        std::ifstream f(trace);
        std::string line;
        std::vector<tsr_pack_item> items;
        std::vector<std::string> names;
        std::getline(f, line);
        while (std::getline(f, line)) {
            long long id, lo, up;
            unsigned long long sz;
            if (sscanf(line.c_str(), "%lld,%lld,%lld,%llu", &id, &lo, &up, &sz) == 4) {
                items.push_back({lo, up, (size_t) sz, 0});
                names.push_back("buffer " + std::to_string(id));
            }
        }
        if (items.empty()) { fprintf(stderr, "plan-viewer: no buffers in %s\n", trace.c_str()); return 1; }
        const size_t peak = tsr_pack(items.data(), items.size(), 1, 1000.0);
        if (peak == SIZE_MAX) { fprintf(stderr, "plan-viewer: %s\n", tsr_last_error()); return 1; }
        int64_t lo = items[0].lower, hi = items[0].upper;
        for (auto & it : items) { lo = std::min(lo, it.lower); hi = std::max(hi, it.upper); }
        std::vector<tsr_plan_tensor> pts;
        for (size_t i = 0; i < items.size(); i++) {
            if (items[i].upper <= items[i].lower) continue;
            pts.push_back(tsr_plan_tensor{nullptr, names[i].c_str(), 0, items[i].offset, items[i].size, (int) (items[i].lower - lo),
                                          (int) (items[i].upper - 1 - lo), false, -1});
        }
        size_t total = 0;
        for (auto & it : items) total += it.size;
        tsr_plan_buffer pb = {peak, tsr_pack_lower_bound(items.data(), items.size(), 1), total, 1};
        tsr_plan plan = {(int) pts.size(), pts.data(), 1, &pb, (int) (hi - lo)};
        if (!tsr_plan_check(&plan, nullptr)) { fprintf(stderr, "plan-viewer: invalid packing: %s\n", tsr_last_error()); return 1; }
        return write_outputs(&plan, prefix) ? 0 : 1;
    }
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
    int rc = 1;
    if (wbuf && ga && tsr_gallocr_reserve(ga, gf)) {
        const tsr_plan * plan = tsr_gallocr_get_plan(ga);
        if (plan && tsr_plan_check(plan, nullptr) && write_outputs(plan, prefix)) rc = 0;
    }
    if (rc) fprintf(stderr, "plan-viewer: %s\n", tsr_last_error());
    tsr_gallocr_free(ga);
    tsr_backend_buffer_free(wbuf);
    tsr_free(ctx);
    tsr_free(wctx);
    return rc;
}
