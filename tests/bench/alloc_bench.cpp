// alloc_bench: how close gallocr and the packing core get to the lower bound.
//
//   alloc_bench [--csv] [--traces DIR] [--budget-ms MS] [--no-models] [--no-traces] [--no-baseline]
//               [--no-order] [--order-ms MS] [--exact-ms MS] [--exact-states N] [--order-only NAME-PART]
//
// Part 1: model graphs built with tessera ops (weights in their own buffer, not planned):
// nodes, lower bound, tessera's size, ratio, size without reuse, an online best-fit
// baseline (ggml's dynamic allocator emulated over the same live ranges), reserve time,
// steady-state alloc_graph time (graph rebuilt in a reset context, cached plan re-applied).
// Part 2: execution order: the lower bound of the builder's order and of the order
// tsr_graph_optimize_order finds, the planned size, the time, the floor no order goes under
// (where builder == floor the builder's order is optimal and nothing can be gained), and
// the exact optimum where the floor is met or exact search finishes (GPT-2/LLaMA are
// chains of blocks: little to gain there; on RandWire 3x32 the builder's order is 16
// activations of the first stage, the optimum 15: reordering gains 6.25 %, no more).
// Part 3: every CSV trace under DIR (id,lower,upper,size): buffers, lower bound, tessera's
// peak, ratio, time; and greedy-by-size best fit (TFLite's method) beside it.
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "../alloc/sched_trace.h"
#include "../alloc/trace_csv.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#ifndef TSR_ALLOC_TRACES_DIR
#define TSR_ALLOC_TRACES_DIR "../shared/bench/alloc-traces"
#endif

namespace {

using clk = std::chrono::steady_clock;
double ms_since(clk::time_point t0) { return std::chrono::duration<double, std::milli>(clk::now() - t0).count(); }
double mib(size_t b) { return (double) b / (1024.0 * 1024.0); }
// CPU time of this thread: the machine may be shared, so the traces report it beside wall time
double cpu_ms() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec * 1e-6;
}

bool g_csv = false;

// ---- table output -------------------------------------------------------------------
struct table {
    std::vector<std::string> head;
    std::vector<std::vector<std::string>> rows;
    void print(const char * title) const {
        if (g_csv) {
            printf("# %s\n", title);
            for (size_t i = 0; i < head.size(); i++) printf("%s%s", i ? "," : "", head[i].c_str());
            printf("\n");
            for (auto & r : rows) {
                for (size_t i = 0; i < r.size(); i++) printf("%s%s", i ? "," : "", r[i].c_str());
                printf("\n");
            }
        } else {
            printf("\n### %s\n\n|", title);
            for (auto & h : head) printf(" %s |", h.c_str());
            printf("\n|");
            for (size_t i = 0; i < head.size(); i++) printf(i == 0 ? " --- |" : " ---: |");
            printf("\n");
            for (auto & r : rows) {
                printf("|");
                for (auto & c : r) printf(" %s |", c.c_str());
                printf("\n");
            }
        }
        fflush(stdout);
    }
};
std::string fmt(const char * f, double v) { char b[64]; snprintf(b, sizeof(b), f, v); return b; }
std::string fmtu(unsigned long long v) { char b[64]; snprintf(b, sizeof(b), "%llu", v); return b; }

// ---- online best fit: ggml's dynamic allocator over given live ranges -----------------
// events: allocate at `first` (in order), free after `last`; in-place members reuse
// their predecessor's block. Free blocks best fit, the tail grows on demand, adjacent
// free blocks merge.
struct online_item { int first, last; size_t size; int inplace_of; };
size_t online_best_fit(const std::vector<online_item> & v, int n_steps) {
    struct blk { size_t off, size; };
    std::vector<blk> fr;  // sorted by offset, excluding the tail
    size_t tail = 0, peak = 0;
    std::vector<size_t> off(v.size(), 0);
    std::vector<std::vector<int>> starts((size_t) n_steps + 2), ends((size_t) n_steps + 2);
    for (size_t i = 0; i < v.size(); i++) {
        starts[(size_t) v[i].first].push_back((int) i);
        ends[(size_t) std::min(v[i].last, n_steps)].push_back((int) i);
    }
    std::vector<int> owner(v.size());  // the item that owns the block (in-place chains share)
    std::vector<int> live_members(v.size(), 0);
    auto alloc = [&](size_t size) -> size_t {
        int best = -1;
        for (size_t k = 0; k < fr.size(); k++) {
            if (fr[k].size >= size && (best < 0 || fr[k].size < fr[(size_t) best].size)) best = (int) k;
        }
        if (best >= 0) {
            const size_t o = fr[(size_t) best].off;
            fr[(size_t) best].off += size;
            fr[(size_t) best].size -= size;
            if (fr[(size_t) best].size == 0) fr.erase(fr.begin() + best);
            return o;
        }
        // from the tail, merged with a free block that ends at the tail
        size_t o = tail;
        if (!fr.empty() && fr.back().off + fr.back().size == tail) { o = fr.back().off; fr.pop_back(); }
        tail = o + size;
        peak = std::max(peak, tail);
        return o;
    };
    auto release = [&](size_t o, size_t size) {
        if (o + size == tail) {
            tail = o;
            if (!fr.empty() && fr.back().off + fr.back().size == tail) { tail = fr.back().off; fr.pop_back(); }
            return;
        }
        auto it = std::lower_bound(fr.begin(), fr.end(), o, [](const blk & b, size_t x) { return b.off < x; });
        it = fr.insert(it, blk{o, size});
        if (it + 1 != fr.end() && it->off + it->size == (it + 1)->off) { it->size += (it + 1)->size; fr.erase(it + 1); }
        if (it != fr.begin() && (it - 1)->off + (it - 1)->size == it->off) { (it - 1)->size += it->size; fr.erase(it); }
    };
    for (int s = 0; s <= n_steps; s++) {
        for (int i : starts[(size_t) s]) {
            if (v[(size_t) i].inplace_of >= 0) {
                owner[(size_t) i] = owner[(size_t) v[(size_t) i].inplace_of];
                off[(size_t) i] = off[(size_t) v[(size_t) i].inplace_of];
            } else {
                owner[(size_t) i] = i;
                off[(size_t) i] = alloc(v[(size_t) i].size);
            }
            live_members[(size_t) owner[(size_t) i]]++;
        }
        for (int i : ends[(size_t) s]) {
            const int o = owner[(size_t) i];
            if (--live_members[(size_t) o] == 0) release(off[(size_t) o], v[(size_t) o].size);
        }
    }
    return peak;
}

// ---- model graphs -------------------------------------------------------------------
struct model {
    std::string name;
    std::function<tsr_cgraph *(tsr_context * ctx, tsr_context * wctx)> build;  // wctx: weights (created on first call)
};

struct wstore {  // weights created once per model, by name
    tsr_context * ctx;
    std::map<std::string, tsr_tensor *> w;
    tsr_tensor * get(const std::string & name, enum tsr_type type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1) {
        auto it = w.find(name);
        if (it != w.end()) return it->second;
        tsr_tensor * t = tsr_new_tensor_4d(ctx, type, ne0, ne1, ne2, ne3);
        if (!t) { fprintf(stderr, "weights: %s\n", tsr_last_error()); exit(1); }
        tsr_set_name(t, name.c_str());
        w[name] = t;
        return t;
    }
};

tsr_tensor * chk(tsr_tensor * t, const char * what) {
    if (!t) { fprintf(stderr, "alloc_bench: building %s failed: %s\n", what, tsr_last_error()); exit(1); }
    return t;
}
#define C(x) chk((x), #x)

// Attention the way a runner without a KV cache builds it: q, k, v [hd, H, T] ->
// softmax(K^T Q * scale + mask) V, merged back to [d, T]. V is made contiguous first
// (as llama.cpp does), so the projection dies before the scores exist.
tsr_tensor * attention(tsr_context * ctx, tsr_cgraph * gf, tsr_tensor * q, tsr_tensor * k, tsr_tensor * v, tsr_tensor * mask,
                       float scale, int d, int T) {
    tsr_tensor * Q = C(tsr_permute(ctx, q, 0, 2, 1, 3));
    tsr_tensor * K = C(tsr_permute(ctx, k, 0, 2, 1, 3));
    tsr_tensor * Vt = C(tsr_cont(ctx, C(tsr_permute(ctx, v, 1, 2, 0, 3))));
    tsr_build_forward_expand(gf, Vt);
    tsr_tensor * KQ = C(tsr_soft_max_ext(ctx, C(tsr_mul_mat(ctx, K, Q)), mask, scale, 0.0f));
    tsr_tensor * KQV = C(tsr_mul_mat(ctx, Vt, KQ));
    return C(tsr_cont_2d(ctx, C(tsr_permute(ctx, KQV, 0, 2, 1, 3)), d, T));
}

// The inputs a decoder graph reads: token ids, positions, the causal mask.
struct lm_inputs { tsr_tensor * tok, * pos, * mask; };
lm_inputs make_inputs(tsr_context * ctx, int T) {
    lm_inputs in;
    in.tok = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, T); tsr_set_input(in.tok); tsr_set_name(in.tok, "tokens");
    in.pos = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, T); tsr_set_input(in.pos); tsr_set_name(in.pos, "pos");
    in.mask = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, T, T); tsr_set_input(in.mask); tsr_set_name(in.mask, "kq_mask");
    return in;
}

tsr_cgraph * gpt2(tsr_context * ctx, wstore & W, int T, bool last_only) {
    const int d = 768, H = 12, hd = 64, L = 12, V = 50257, ff = 3072;
    tsr_cgraph * gf = tsr_new_graph_custom(ctx, 4096, false);
    const lm_inputs in = make_inputs(ctx, T);
    tsr_tensor * tok = in.tok, * pos = in.pos, * mask = in.mask;
    tsr_tensor * x = C(tsr_add(ctx, C(tsr_get_rows(ctx, W.get("wte", TSR_TYPE_F16, d, V), tok)),
                               C(tsr_get_rows(ctx, W.get("wpe", TSR_TYPE_F16, d, 1024), pos))));
    for (int l = 0; l < L; l++) {
        const std::string p = "l" + std::to_string(l) + ".";
        tsr_tensor * cur = C(tsr_norm(ctx, x, 1e-5f));
        cur = C(tsr_add(ctx, C(tsr_mul(ctx, cur, W.get(p + "ln1_g", TSR_TYPE_F32, d))), W.get(p + "ln1_b", TSR_TYPE_F32, d)));
        tsr_tensor * qkv = C(tsr_add(ctx, C(tsr_mul_mat(ctx, W.get(p + "qkv", TSR_TYPE_F16, d, 3 * d), cur)), W.get(p + "qkv_b", TSR_TYPE_F32, 3 * d)));
        tsr_tensor * q = C(tsr_view_3d(ctx, qkv, hd, H, T, hd * 4, qkv->nb[1], 0));
        tsr_tensor * k = C(tsr_view_3d(ctx, qkv, hd, H, T, hd * 4, qkv->nb[1], (size_t) d * 4));
        tsr_tensor * v = C(tsr_view_3d(ctx, qkv, hd, H, T, hd * 4, qkv->nb[1], (size_t) 2 * d * 4));
        cur = attention(ctx, gf, q, k, v, mask, 0.125f, d, T);
        cur = C(tsr_add(ctx, C(tsr_mul_mat(ctx, W.get(p + "wo", TSR_TYPE_F16, d, d), cur)), W.get(p + "wo_b", TSR_TYPE_F32, d)));
        x = C(tsr_add(ctx, x, cur));
        cur = C(tsr_norm(ctx, x, 1e-5f));
        cur = C(tsr_add(ctx, C(tsr_mul(ctx, cur, W.get(p + "ln2_g", TSR_TYPE_F32, d))), W.get(p + "ln2_b", TSR_TYPE_F32, d)));
        cur = C(tsr_add(ctx, C(tsr_mul_mat(ctx, W.get(p + "fc", TSR_TYPE_F16, d, ff), cur)), W.get(p + "fc_b", TSR_TYPE_F32, ff)));
        cur = C(tsr_gelu(ctx, cur));
        cur = C(tsr_add(ctx, C(tsr_mul_mat(ctx, W.get(p + "proj", TSR_TYPE_F16, ff, d), cur)), W.get(p + "proj_b", TSR_TYPE_F32, d)));
        x = C(tsr_add(ctx, x, cur));
    }
    if (last_only) {
        tsr_tensor * ids = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 1); tsr_set_input(ids); tsr_set_name(ids, "out_ids");
        x = C(tsr_get_rows(ctx, x, ids));
    }
    x = C(tsr_norm(ctx, x, 1e-5f));
    x = C(tsr_add(ctx, C(tsr_mul(ctx, x, W.get("lnf_g", TSR_TYPE_F32, d))), W.get("lnf_b", TSR_TYPE_F32, d)));
    tsr_tensor * logits = C(tsr_mul_mat(ctx, W.get("wte", TSR_TYPE_F16, d, V), x));
    tsr_set_name(logits, "logits");
    tsr_set_output(logits);
    tsr_build_forward_expand(gf, logits);
    return gf;
}

tsr_cgraph * llama(tsr_context * ctx, wstore & W, int T, bool last_only) {
    const int d = 2048, H = 16, hd = 128, L = 16, V = 32000, ff = 5632;
    tsr_cgraph * gf = tsr_new_graph_custom(ctx, 4096, false);
    const lm_inputs in = make_inputs(ctx, T);
    tsr_tensor * tok = in.tok, * pos = in.pos, * mask = in.mask;
    tsr_tensor * x = C(tsr_get_rows(ctx, W.get("tok_embd", TSR_TYPE_F16, d, V), tok));
    for (int l = 0; l < L; l++) {
        const std::string p = "l" + std::to_string(l) + ".";
        tsr_tensor * cur = C(tsr_mul(ctx, C(tsr_rms_norm(ctx, x, 1e-5f)), W.get(p + "attn_norm", TSR_TYPE_F32, d)));
        tsr_tensor * q = C(tsr_mul_mat(ctx, W.get(p + "wq", TSR_TYPE_F16, d, d), cur));
        tsr_tensor * k = C(tsr_mul_mat(ctx, W.get(p + "wk", TSR_TYPE_F16, d, d), cur));
        tsr_tensor * v = C(tsr_mul_mat(ctx, W.get(p + "wv", TSR_TYPE_F16, d, d), cur));
        q = C(tsr_rope_ext(ctx, C(tsr_reshape_3d(ctx, q, hd, H, T)), pos, nullptr, hd, TSR_ROPE_TYPE_NORMAL, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f));
        k = C(tsr_rope_ext(ctx, C(tsr_reshape_3d(ctx, k, hd, H, T)), pos, nullptr, hd, TSR_ROPE_TYPE_NORMAL, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f));
        cur = attention(ctx, gf, q, k, C(tsr_reshape_3d(ctx, v, hd, H, T)), mask, 1.0f / 11.3137f, d, T);
        cur = C(tsr_mul_mat(ctx, W.get(p + "wo", TSR_TYPE_F16, d, d), cur));
        x = C(tsr_add(ctx, x, cur));
        cur = C(tsr_mul(ctx, C(tsr_rms_norm(ctx, x, 1e-5f)), W.get(p + "ffn_norm", TSR_TYPE_F32, d)));
        tsr_tensor * g = C(tsr_mul_mat(ctx, W.get(p + "w_gate", TSR_TYPE_F16, d, ff), cur));
        tsr_tensor * u = C(tsr_mul_mat(ctx, W.get(p + "w_up", TSR_TYPE_F16, d, ff), cur));
        cur = C(tsr_swiglu_split(ctx, g, u));
        cur = C(tsr_mul_mat(ctx, W.get(p + "w_down", TSR_TYPE_F16, ff, d), cur));
        x = C(tsr_add(ctx, x, cur));
    }
    if (last_only) {
        tsr_tensor * ids = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 1); tsr_set_input(ids); tsr_set_name(ids, "out_ids");
        x = C(tsr_get_rows(ctx, x, ids));
    }
    x = C(tsr_mul(ctx, C(tsr_rms_norm(ctx, x, 1e-5f)), W.get("out_norm", TSR_TYPE_F32, d)));
    tsr_tensor * logits = C(tsr_mul_mat(ctx, W.get("output", TSR_TYPE_F16, d, V), x));
    tsr_set_name(logits, "logits");
    tsr_set_output(logits);
    tsr_build_forward_expand(gf, logits);
    return gf;
}

tsr_cgraph * mlp(tsr_context * ctx, wstore & W) {
    tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 784, 1000); tsr_set_input(x); tsr_set_name(x, "x");
    tsr_tensor * h = C(tsr_relu(ctx, C(tsr_add(ctx, C(tsr_mul_mat(ctx, W.get("w1", TSR_TYPE_F32, 784, 500), x)), W.get("b1", TSR_TYPE_F32, 500)))));
    tsr_tensor * o = C(tsr_add(ctx, C(tsr_mul_mat(ctx, W.get("w2", TSR_TYPE_F32, 500, 10), h)), W.get("b2", TSR_TYPE_F32, 10)));
    o = C(tsr_soft_max(ctx, o));
    tsr_set_output(o);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_build_forward_expand(gf, o);
    return gf;
}

tsr_tensor * conv(tsr_context * ctx, wstore & W, const std::string & name, tsr_tensor * x, int k, int oc, int s, bool relu) {
    const int64_t ic = x->ne[2];
    tsr_tensor * y = C(tsr_conv_2d(ctx, W.get(name, TSR_TYPE_F16, k, k, ic, oc), x, s, s, k / 2, k / 2, 1, 1));
    y = C(tsr_add(ctx, y, W.get(name + ".b", TSR_TYPE_F32, 1, 1, oc)));  // folded batch norm
    return relu ? C(tsr_relu(ctx, y)) : y;
}

tsr_cgraph * resnet50(tsr_context * ctx, wstore & W) {
    tsr_tensor * x = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 224, 224, 3, 1); tsr_set_input(x); tsr_set_name(x, "image");
    x = conv(ctx, W, "stem", x, 7, 64, 2, true);
    x = C(tsr_pool_2d(ctx, x, TSR_OP_POOL_MAX, 3, 3, 2, 2, 1, 1));
    const int blocks[4] = {3, 4, 6, 3}, width[4] = {64, 128, 256, 512};
    for (int st = 0; st < 4; st++) {
        for (int b = 0; b < blocks[st]; b++) {
            const std::string p = "s" + std::to_string(st) + "b" + std::to_string(b);
            const int s = (b == 0 && st > 0) ? 2 : 1;
            tsr_tensor * sc = x;
            if (b == 0) sc = conv(ctx, W, p + ".down", x, 1, 4 * width[st], s, false);
            tsr_tensor * h = conv(ctx, W, p + ".c1", x, 1, width[st], 1, true);
            h = conv(ctx, W, p + ".c2", h, 3, width[st], s, true);
            h = conv(ctx, W, p + ".c3", h, 1, 4 * width[st], 1, false);
            x = C(tsr_relu(ctx, C(tsr_add(ctx, h, sc))));
        }
    }
    x = C(tsr_pool_2d(ctx, x, TSR_OP_POOL_AVG, 7, 7, 7, 7, 0, 0));  // [1, 1, 2048, 1]
    x = C(tsr_reshape_2d(ctx, x, 2048, 1));
    tsr_tensor * o = C(tsr_add(ctx, C(tsr_mul_mat(ctx, W.get("fc", TSR_TYPE_F16, 2048, 1000), x)), W.get("fc.b", TSR_TYPE_F32, 1000)));
    tsr_set_output(o);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_build_forward_expand(gf, o);
    return gf;
}

tsr_cgraph * unet(tsr_context * ctx, wstore & W) {
    tsr_tensor * x = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 256, 256, 3, 1); tsr_set_input(x); tsr_set_name(x, "image");
    const int ch[4] = {32, 64, 128, 256};
    std::vector<tsr_tensor *> skips;
    for (int lv = 0; lv < 4; lv++) {
        const std::string p = "e" + std::to_string(lv);
        x = conv(ctx, W, p + ".c1", x, 3, ch[lv], 1, true);
        x = conv(ctx, W, p + ".c2", x, 3, ch[lv], 1, true);
        skips.push_back(x);
        x = C(tsr_pool_2d(ctx, x, TSR_OP_POOL_MAX, 2, 2, 2, 2, 0, 0));
    }
    x = conv(ctx, W, "mid.c1", x, 3, 512, 1, true);
    x = conv(ctx, W, "mid.c2", x, 3, 512, 1, true);
    for (int lv = 3; lv >= 0; lv--) {
        const std::string p = "d" + std::to_string(lv);
        x = C(tsr_upscale(ctx, x, 2, TSR_SCALE_MODE_NEAREST));
        x = conv(ctx, W, p + ".up", x, 1, ch[lv], 1, true);
        x = C(tsr_concat(ctx, x, skips[(size_t) lv], 2));
        x = conv(ctx, W, p + ".c1", x, 3, ch[lv], 1, true);
        x = conv(ctx, W, p + ".c2", x, 3, ch[lv], 1, true);
    }
    tsr_tensor * o = conv(ctx, W, "head", x, 1, 2, 1, false);
    tsr_set_output(o);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_build_forward_expand(gf, o);
    return gf;
}

void run_models(table & t, int reps) {
    t.head = {"model", "nodes", "lower bound (MiB)", "tessera (MiB)", "ratio", "no reuse (MiB)", "online best fit (MiB)",
              "tessera/online", "reserve (ms)", "steady alloc_graph (us)"};
    struct spec { std::string name; std::function<tsr_cgraph *(tsr_context *, wstore &)> fn; int wkey; };
    std::vector<spec> specs = {
        {"GPT-2 small, 128 tok, all logits", [](tsr_context * c, wstore & w) { return gpt2(c, w, 128, false); }, 0},
        {"GPT-2 small, 512 tok, all logits", [](tsr_context * c, wstore & w) { return gpt2(c, w, 512, false); }, 0},
        {"GPT-2 small, 128 tok, last logits", [](tsr_context * c, wstore & w) { return gpt2(c, w, 128, true); }, 0},
        {"GPT-2 small, 512 tok, last logits", [](tsr_context * c, wstore & w) { return gpt2(c, w, 512, true); }, 0},
        {"LLaMA-style 16L/2048, 128 tok, all logits", [](tsr_context * c, wstore & w) { return llama(c, w, 128, false); }, 1},
        {"LLaMA-style 16L/2048, 512 tok, all logits", [](tsr_context * c, wstore & w) { return llama(c, w, 512, false); }, 1},
        {"LLaMA-style 16L/2048, 128 tok, last logits", [](tsr_context * c, wstore & w) { return llama(c, w, 128, true); }, 1},
        {"LLaMA-style 16L/2048, 512 tok, last logits", [](tsr_context * c, wstore & w) { return llama(c, w, 512, true); }, 1},
        {"MLP 784-500-10, batch 1000", [](tsr_context * c, wstore & w) { return mlp(c, w); }, 2},
        {"ResNet-50-style CNN, 224x224", [](tsr_context * c, wstore & w) { return resnet50(c, w); }, 3},
        {"U-Net-style CNN, 256x256", [](tsr_context * c, wstore & w) { return unet(c, w); }, 4},
    };
    std::map<int, std::pair<tsr_context *, tsr_backend_buffer_t>> weights;
    std::map<int, wstore> stores;
    const size_t ctx_size = 8192 * tsr_tensor_overhead() + tsr_graph_overhead_custom(4096, false);
    std::vector<char> dummy;
    for (auto & sp : specs) {
        if (!stores.count(sp.wkey)) {
            tsr_init_params wp = {4096 * tsr_tensor_overhead(), nullptr, true};
            stores[sp.wkey].ctx = tsr_init(wp);
        }
        wstore & W = stores[sp.wkey];
        tsr_init_params p = {ctx_size, nullptr, true};
        tsr_context * ctx = tsr_init(p);
        tsr_cgraph * gf = sp.fn(ctx, W);
        if (!weights.count(sp.wkey)) {
            // weights are not in the compute buffer: their own WEIGHTS buffer
            tsr_backend_buffer_t wb = tsr_backend_alloc_ctx_tensors_from_buft(W.ctx, tsr_backend_cpu_buffer_type());
            if (!wb) { fprintf(stderr, "weights: %s\n", tsr_last_error()); exit(1); }
            weights[sp.wkey] = {W.ctx, wb};
        }
        tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
        auto t0 = clk::now();
        if (!tsr_gallocr_reserve(ga, gf)) { fprintf(stderr, "%s: reserve failed: %s\n", sp.name.c_str(), tsr_last_error()); exit(1); }
        const double reserve_ms = ms_since(t0);
        const tsr_plan * plan = tsr_gallocr_get_plan(ga);
        const size_t cap = tsr_gallocr_get_buffer_size(ga, 0);
        if (!tsr_plan_check(plan, &cap)) { fprintf(stderr, "%s: INVALID PLAN: %s\n", sp.name.c_str(), tsr_last_error()); exit(1); }
        const tsr_plan_buffer pb = plan->buffers[0];
        std::vector<online_item> items;
        for (int i = 0; i < plan->n_tensors; i++) {
            const tsr_plan_tensor & pt = plan->tensors[i];
            // results live past the last step in the plan's semantics
            const bool result = pt.last == plan->n_steps - 1;
            items.push_back(online_item{pt.first, result ? plan->n_steps : pt.last, pt.size, pt.inplace_of});
        }
        const size_t online = online_best_fit(items, plan->n_steps);
        const int n_nodes = tsr_graph_n_nodes(gf);
        // steady state: the graph rebuilt in the reset context, the cached plan re-applied
        std::vector<double> us;
        for (int r = 0; r < reps; r++) {
            tsr_reset(ctx);
            gf = sp.fn(ctx, W);
            auto t1 = clk::now();
            if (!tsr_gallocr_alloc_graph(ga, gf)) { fprintf(stderr, "%s: alloc_graph failed: %s\n", sp.name.c_str(), tsr_last_error()); exit(1); }
            us.push_back(ms_since(t1) * 1000.0);
        }
        std::sort(us.begin(), us.end());
        if (tsr_gallocr_get_n_reallocs(ga) != 1) fprintf(stderr, "%s: %d reallocations\n", sp.name.c_str(), tsr_gallocr_get_n_reallocs(ga));
        t.rows.push_back({sp.name, fmtu((unsigned long long) n_nodes), fmt("%.2f", mib(pb.lower_bound)), fmt("%.2f", mib(pb.planned_size)),
                          fmt("%.4f", (double) pb.planned_size / (double) pb.lower_bound), fmt("%.2f", mib(pb.no_reuse_size)),
                          fmt("%.2f", mib(online)), fmt("%.4f", (double) pb.planned_size / (double) online), fmt("%.2f", reserve_ms),
                          fmt("%.1f", us.empty() ? 0.0 : us[us.size() / 2])});
        tsr_gallocr_free(ga);
        tsr_free(ctx);
    }
    for (auto & w : weights) { tsr_backend_buffer_free(w.second.second); tsr_free(w.second.first); }
}

// ---- execution order ------------------------------------------------------------------
// A diffusion-UNet-style stack (Stable Diffusion 1.x shapes at a 64x64 latent): res blocks
// with a timestep embedding, transformer blocks (8 heads; self attention, cross attention
// to a 77-token text context, GEGLU feed-forward), 12 skips concatenated in the decoder.
tsr_tensor * res_block(tsr_context * ctx, wstore & W, const std::string & p, tsr_tensor * x, tsr_tensor * emb, int oc) {
    const int64_t ic = x->ne[2];
    tsr_tensor * h = C(tsr_silu(ctx, C(tsr_group_norm(ctx, x, 32, 1e-5f))));
    h = conv(ctx, W, p + ".c1", h, 3, oc, 1, false);
    tsr_tensor * e = C(tsr_mul_mat(ctx, W.get(p + ".emb", TSR_TYPE_F16, 1280, oc), C(tsr_silu(ctx, emb))));
    h = C(tsr_add(ctx, h, C(tsr_reshape_3d(ctx, e, 1, 1, oc))));
    h = C(tsr_silu(ctx, C(tsr_group_norm(ctx, h, 32, 1e-5f))));
    h = conv(ctx, W, p + ".c2", h, 3, oc, 1, false);
    tsr_tensor * sc = ic == oc ? x : conv(ctx, W, p + ".skip", x, 1, oc, 1, false);
    return C(tsr_add(ctx, h, sc));
}

// Attention as stable-diffusion.cpp runs it with --diffusion-fa: one fused op, no T x T scores.
tsr_tensor * flash_attention(tsr_context * ctx, tsr_tensor * q, tsr_tensor * k, tsr_tensor * v, float scale, int d, int T) {
    tsr_tensor * r = C(tsr_flash_attn_ext(ctx, C(tsr_permute(ctx, q, 0, 2, 1, 3)), C(tsr_permute(ctx, k, 0, 2, 1, 3)),
                                          C(tsr_permute(ctx, v, 0, 2, 1, 3)), nullptr, scale, 0.0f, 0.0f));
    return C(tsr_reshape_2d(ctx, r, d, T));
}

tsr_tensor * transformer(tsr_context * ctx, tsr_cgraph * gf, wstore & W, const std::string & p, tsr_tensor * x, tsr_tensor * text,
                         bool flash) {
    const int w = (int) x->ne[0], hh = (int) x->ne[1], c = (int) x->ne[2], T = w * hh, H = 8, hd = c / H;
    tsr_tensor * h = conv(ctx, W, p + ".in", C(tsr_group_norm(ctx, x, 32, 1e-6f)), 1, c, 1, false);
    tsr_tensor * t = C(tsr_cont_2d(ctx, C(tsr_permute(ctx, C(tsr_reshape_3d(ctx, h, T, c, 1)), 1, 0, 2, 3)), c, T));  // [c, T]
    auto lin = [&](const std::string & n, tsr_tensor * a, int in, int out) { return C(tsr_mul_mat(ctx, W.get(p + n, TSR_TYPE_F16, in, out), a)); };
    auto heads = [&](tsr_tensor * a, int n) { return C(tsr_reshape_3d(ctx, a, hd, H, n)); };
    tsr_tensor * n1 = C(tsr_norm(ctx, t, 1e-5f));
    auto attend = [&](tsr_tensor * q, tsr_tensor * k, tsr_tensor * v, int n_kv) {
        return flash ? flash_attention(ctx, heads(q, T), heads(k, n_kv), heads(v, n_kv), 1.0f / 8.0f, c, T)
                     : attention(ctx, gf, heads(q, T), heads(k, n_kv), heads(v, n_kv), nullptr, 1.0f / 8.0f, c, T);
    };
    tsr_tensor * sa = attend(lin(".q1", n1, c, c), lin(".k1", n1, c, c), lin(".v1", n1, c, c), T);
    t = C(tsr_add(ctx, t, lin(".o1", sa, c, c)));
    tsr_tensor * n2 = C(tsr_norm(ctx, t, 1e-5f));
    tsr_tensor * ca = attend(lin(".q2", n2, c, c), lin(".k2", text, 768, c), lin(".v2", text, 768, c), 77);
    t = C(tsr_add(ctx, t, lin(".o2", ca, c, c)));
    tsr_tensor * ff = C(tsr_geglu(ctx, lin(".ff1", C(tsr_norm(ctx, t, 1e-5f)), c, 8 * c)));  // SD's GEGLU feed-forward
    t = C(tsr_add(ctx, t, lin(".ff2", ff, 4 * c, c)));
    tsr_tensor * back = C(tsr_cont(ctx, C(tsr_permute(ctx, C(tsr_reshape_3d(ctx, t, c, w, hh)), 2, 0, 1, 3))));  // [w, hh, c]
    return C(tsr_add(ctx, conv(ctx, W, p + ".out", back, 1, c, 1, false), x));
}

tsr_cgraph * diffusion_unet(tsr_context * ctx, wstore & W, bool flash) {
    tsr_cgraph * gf = tsr_new_graph_custom(ctx, 8192, false);
    tsr_tensor * x = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 64, 64, 4, 1); tsr_set_input(x); tsr_set_name(x, "latent");
    tsr_tensor * temb = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 320); tsr_set_input(temb); tsr_set_name(temb, "t_freq");
    tsr_tensor * text = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 768, 77); tsr_set_input(text); tsr_set_name(text, "text");
    tsr_tensor * emb = C(tsr_mul_mat(ctx, W.get("temb2", TSR_TYPE_F16, 1280, 1280),
                                     C(tsr_silu(ctx, C(tsr_mul_mat(ctx, W.get("temb1", TSR_TYPE_F16, 320, 1280), temb))))));
    const int ch[4] = {320, 640, 1280, 1280};
    x = conv(ctx, W, "in", x, 3, ch[0], 1, false);
    std::vector<tsr_tensor *> skips = {x};
    for (int lv = 0; lv < 4; lv++) {
        for (int b = 0; b < 2; b++) {
            const std::string p = "d" + std::to_string(lv) + "." + std::to_string(b);
            x = res_block(ctx, W, p + ".res", x, emb, ch[lv]);
            if (lv < 3) x = transformer(ctx, gf, W, p + ".tf", x, text, flash);
            skips.push_back(x);
        }
        if (lv < 3) { x = conv(ctx, W, "down" + std::to_string(lv), x, 3, ch[lv], 2, false); skips.push_back(x); }
    }
    x = res_block(ctx, W, "mid.res1", x, emb, 1280);
    x = transformer(ctx, gf, W, "mid.tf", x, text, flash);
    x = res_block(ctx, W, "mid.res2", x, emb, 1280);
    for (int lv = 3; lv >= 0; lv--) {
        for (int b = 0; b < 3; b++) {
            const std::string p = "u" + std::to_string(lv) + "." + std::to_string(b);
            x = C(tsr_concat(ctx, x, skips.back(), 2));
            skips.pop_back();
            x = res_block(ctx, W, p + ".res", x, emb, ch[lv]);
            if (lv < 3) x = transformer(ctx, gf, W, p + ".tf", x, text, flash);
        }
        if (lv > 0) x = conv(ctx, W, "up" + std::to_string(lv), C(tsr_upscale(ctx, x, 2, TSR_SCALE_MODE_NEAREST)), 3, ch[lv], 1, false);
    }
    x = conv(ctx, W, "out", C(tsr_silu(ctx, C(tsr_group_norm(ctx, x, 32, 1e-5f)))), 3, 4, 1, false);
    tsr_set_output(x);
    tsr_build_forward_expand(gf, x);
    return gf;
}

// Randomly wired (RandWire-style, Watts-Strogatz k=4 p=0.75): each node sums its inputs,
// applies relu and a 3x3 conv; the stage's first nodes read the stage input, its sinks
// are averaged into the output. The graph's order is ggml's: a depth-first walk from the
// output over each node's sources in order; with index_order every node is expanded as
// it is built, in the reference implementation's loop order (node 0, 1, ...), as a
// program calling build_forward_expand per node would do.
tsr_tensor * randwire_stage(tsr_context * ctx, wstore & W, const std::string & p, tsr_tensor * in, int n, int c, int stride,
                            std::mt19937 & rng, tsr_cgraph * expand_each) {
    std::vector<std::vector<int>> preds((size_t) n);
    for (int i = 0; i < n; i++) {
        for (int k = 1; k <= 2; k++) {
            int j = (i + k) % n;
            if (rng() % 4 != 0) j = (int) (rng() % (unsigned) n);  // rewired
            if (j == i) continue;
            const int a = std::min(i, j), b = std::max(i, j);
            if (std::find(preds[(size_t) b].begin(), preds[(size_t) b].end(), a) == preds[(size_t) b].end()) preds[(size_t) b].push_back(a);
        }
    }
    std::vector<tsr_tensor *> out((size_t) n, nullptr);
    std::vector<bool> used((size_t) n, false);
    for (int i = 0; i < n; i++) {
        tsr_tensor * agg = nullptr;
        for (int j : preds[(size_t) i]) { agg = agg ? C(tsr_add(ctx, agg, out[(size_t) j])) : out[(size_t) j]; used[(size_t) j] = true; }
        const bool first = agg == nullptr;
        if (first) agg = in;
        out[(size_t) i] = conv(ctx, W, p + std::to_string(i), C(tsr_relu(ctx, agg)), 3, c, first ? stride : 1, false);
        if (expand_each) tsr_build_forward_expand(expand_each, out[(size_t) i]);
    }
    tsr_tensor * sum = nullptr;
    for (int i = 0; i < n; i++) if (!used[(size_t) i]) sum = sum ? C(tsr_add(ctx, sum, out[(size_t) i])) : out[(size_t) i];
    return sum;
}

tsr_cgraph * randwire(tsr_context * ctx, wstore & W, int n, bool index_order) {
    std::mt19937 rng(5);
    tsr_cgraph * gf = tsr_new_graph_custom(ctx, 4096, false);
    tsr_cgraph * each = index_order ? gf : nullptr;
    tsr_tensor * x = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 112, 112, 3, 1); tsr_set_input(x); tsr_set_name(x, "image");
    x = conv(ctx, W, "stem", x, 3, 78, 2, true);  // 56x56
    x = randwire_stage(ctx, W, "s1.", x, n, 78, 1, rng, each);
    x = randwire_stage(ctx, W, "s2.", x, n, 156, 2, rng, each);
    x = randwire_stage(ctx, W, "s3.", x, n, 312, 2, rng, each);
    tsr_set_output(x);
    tsr_build_forward_expand(gf, x);
    return gf;
}

// Random DAGs of 1-D tensors (sizes 4 KiB to 1 MiB): unary ops (in place), adds, concats,
// views; every operand picked among the last `window` values.
tsr_cgraph * random_dag(tsr_context * ctx, uint32_t seed, int n_ops, int window) {
    std::mt19937 rng(seed);
    const int64_t sizes[4] = {1024, 16384, 65536, 262144};
    std::vector<tsr_tensor *> vals;
    std::map<tsr_tensor *, int> uses;
    for (int k = 0; k < 3; k++) { vals.push_back(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, sizes[rng() % 4])); tsr_set_input(vals.back()); }
    auto pick = [&]() {
        const size_t lo = vals.size() > (size_t) window ? vals.size() - (size_t) window : 0;
        tsr_tensor * t = vals[lo + rng() % (vals.size() - lo)];
        uses[t]++;
        return t;
    };
    for (int k = 0; k < n_ops; k++) {
        tsr_tensor * a = pick();
        tsr_tensor * r = nullptr;
        switch (rng() % 5) {
            case 0: r = tsr_relu(ctx, a); break;
            case 1: r = tsr_concat(ctx, a, C(tsr_scale(ctx, a, 0.5f)), 0); break;  // grows
            case 2: { tsr_tensor * b = pick(); r = b->ne[0] == a->ne[0] ? tsr_add(ctx, a, b) : tsr_concat(ctx, a, b, 0); break; }
            case 3: r = tsr_cont(ctx, C(tsr_view_1d(ctx, a, std::max<int64_t>(1024, a->ne[0] / 4), 0))); break;  // shrinks
            default: r = tsr_sqr(ctx, a); break;
        }
        if (r->ne[0] > 262144) r = tsr_cont(ctx, C(tsr_view_1d(ctx, r, 262144, 0)));
        vals.push_back(C(r));
    }
    tsr_cgraph * gf = tsr_new_graph_custom(ctx, (size_t) n_ops * 4 + 64, false);
    tsr_set_output(vals.back());
    for (tsr_tensor * t : vals) if (!uses[t] && t->op != TSR_OP_NONE) tsr_build_forward_expand(gf, t);
    return gf;
}

// gallocr's plan of gf as it stands (lower bound, planned size), with the packing search
size_t planned(tsr_cgraph * gf, size_t * lower_bound) {
    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    if (!tsr_gallocr_reserve(ga, gf)) { fprintf(stderr, "order: reserve failed: %s\n", tsr_last_error()); exit(1); }
    const tsr_plan_buffer pb = tsr_gallocr_get_plan(ga)->buffers[0];
    tsr_gallocr_free(ga);
    *lower_bound = pb.lower_bound;
    return pb.planned_size;
}

void run_order(table & t, double budget_ms, double exact_ms, int exact_states, const std::string & only) {
    t.head = {"graph", "nodes", "builder order LB (MiB)", "optimised LB (MiB)", "planned (MiB)", "optimised / builder",
              "optimise wall (ms)", "optimise cpu (ms)", "pieces", "floor, any order (MiB)", "floor / builder", "exact optimum (MiB)", "optimised / exact"};
    struct spec { std::string name; std::function<tsr_cgraph *(tsr_context *, wstore &)> fn; int wkey; };
    std::vector<spec> specs = {
        {"GPT-2 small, 512 tok, all logits", [](tsr_context * c, wstore & w) { return gpt2(c, w, 512, false); }, 0},
        {"LLaMA-style 16L/2048, 512 tok, all logits", [](tsr_context * c, wstore & w) { return llama(c, w, 512, false); }, 1},
        {"ResNet-50-style CNN, 224x224", [](tsr_context * c, wstore & w) { return resnet50(c, w); }, 3},
        {"U-Net-style CNN, 4 levels, 256x256", [](tsr_context * c, wstore & w) { return unet(c, w); }, 4},
        {"diffusion UNet (SD 1.x shapes), 64x64 latent", [](tsr_context * c, wstore & w) { return diffusion_unet(c, w, false); }, 5},
        {"diffusion UNet, flash attention (sd.cpp --diffusion-fa)", [](tsr_context * c, wstore & w) { return diffusion_unet(c, w, true); }, 5},
        {"RandWire-style, 3 stages x 32 nodes, 112x112", [](tsr_context * c, wstore & w) { return randwire(c, w, 32, false); }, 6},
        {"RandWire-style, expanded in node index order", [](tsr_context * c, wstore & w) { return randwire(c, w, 32, true); }, 6},
        {"RandWire-style, 3 stages x 16 nodes (exact search finishes)", [](tsr_context * c, wstore & w) { return randwire(c, w, 16, false); }, 8},
        {"random DAG, 12 ops", [](tsr_context * c, wstore &) { return random_dag(c, 1, 12, 6); }, 7},
        {"random DAG, 40 ops", [](tsr_context * c, wstore &) { return random_dag(c, 2, 40, 8); }, 7},
        {"random DAG, 200 ops, window 16", [](tsr_context * c, wstore &) { return random_dag(c, 3, 200, 16); }, 7},
        {"random DAG, 500 ops, window 64", [](tsr_context * c, wstore &) { return random_dag(c, 4, 500, 64); }, 7},
        {"random DAG, 2,000 nodes (timing)", [](tsr_context * c, wstore &) { return random_dag(c, 5, 1400, 24); }, 7},
    };
    std::map<int, wstore> stores;
    std::map<int, tsr_backend_buffer_t> weights;
    const size_t ctx_size = 24576 * tsr_tensor_overhead() + tsr_graph_overhead_custom(8192, false);
    for (auto & sp : specs) {
        if (sp.name.find(only) == std::string::npos) continue;
        if (!stores.count(sp.wkey)) {
            tsr_init_params wp = {8192 * tsr_tensor_overhead(), nullptr, true};
            stores[sp.wkey].ctx = tsr_init(wp);
        }
        wstore & W = stores[sp.wkey];
        tsr_init_params p = {ctx_size, nullptr, true};
        tsr_context * ctx = tsr_init(p);
        tsr_cgraph * gf = sp.fn(ctx, W);
        if (!weights.count(sp.wkey)) {  // weights in their own buffer, as in run_models: not planned
            weights[sp.wkey] = tsr_backend_alloc_ctx_tensors_from_buft(W.ctx, tsr_backend_cpu_buffer_type());
            if (!weights[sp.wkey] && tsr_graph_n_leafs(gf) > 0 && W.w.size() > 0) { fprintf(stderr, "weights: %s\n", tsr_last_error()); exit(1); }
        }
        size_t lb0 = 0;
        planned(gf, &lb0);
        tsr_order_report rep;
        tsr_order_params prm = tsr_order_default_params();
        prm.time_budget_ms = budget_ms;
        prm.report = &rep;
        const double cpu0 = cpu_ms();
        const auto wall0 = std::chrono::steady_clock::now();
        if (!tsr_graph_optimize_order(gf, &prm)) { fprintf(stderr, "%s: %s\n", sp.name.c_str(), tsr_last_error()); exit(1); }
        const double opt_cpu = cpu_ms() - cpu0;
        const double opt_wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count();
        size_t lb1 = 0;
        const size_t size1 = planned(gf, &lb1);
        if (lb1 != rep.optimized_lower_bound || lb0 != rep.builder_lower_bound || lb1 > lb0 || rep.any_order_lower_bound > lb1) {
            fprintf(stderr, "%s: MISMATCH: gallocr %zu -> %zu, report %zu -> %zu\n", sp.name.c_str(), lb0, lb1,
                    rep.builder_lower_bound, rep.optimized_lower_bound);
            exit(1);
        }
        // the exact optimum, where exact search finishes on every piece within exact_ms
        std::string exact = "-", gap = "-";
        if (rep.optimal) {
            exact = fmt("%.3f", mib(lb1));
            gap = "1.0000";
        } else if (exact_ms > 0) {
            tsr_reset(ctx);
            tsr_cgraph * g2 = sp.fn(ctx, W);
            tsr_order_report rx;
            tsr_order_params px = tsr_order_default_params();
            px.time_budget_ms = exact_ms;
            px.exact_max_nodes = 1 << 30;
            px.exact_max_states = exact_states;
            px.report = &rx;
            if (tsr_graph_optimize_order(g2, &px) && rx.optimal) {
                exact = fmt("%.3f", mib(rx.optimized_lower_bound));
                gap = fmt("%.4f", (double) rep.optimized_lower_bound / (double) rx.optimized_lower_bound);
            }
        }
        t.rows.push_back({sp.name, fmtu((unsigned long long) tsr_graph_n_nodes(gf)), fmt("%.3f", mib(lb0)), fmt("%.3f", mib(lb1)),
                          fmt("%.3f", mib(size1)), fmt("%.4f", (double) lb1 / (double) lb0), fmt("%.2f", opt_wall), fmt("%.2f", opt_cpu),
                          fmtu((unsigned long long) rep.n_pieces), fmt("%.3f", mib(rep.any_order_lower_bound)),
                          fmt("%.4f", (double) rep.any_order_lower_bound / (double) lb0), exact, gap});
        tsr_free(ctx);
    }
    for (auto & w : weights) tsr_backend_buffer_free(w.second);
    for (auto & w : stores) tsr_free(w.second.ctx);
}

// ---- traces ---------------------------------------------------------------------------
// Greedy by size, best fit (TFLite's GreedyBySize): largest first, into the smallest gap
// among already placed buffers that overlap in time, else on top.
size_t greedy_by_size(const std::vector<tsr_pack_item> & v) {
    std::vector<size_t> order(v.size());
    for (size_t i = 0; i < v.size(); i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a].size > v[b].size; });
    std::vector<size_t> placed, off(v.size(), 0);
    std::vector<std::pair<size_t, size_t>> conf;
    size_t peak = 0;
    for (size_t i : order) {
        if (v[i].upper <= v[i].lower || v[i].size == 0) continue;
        conf.clear();
        for (size_t j : placed) {
            if (v[j].lower < v[i].upper && v[i].lower < v[j].upper) conf.emplace_back(off[j], off[j] + v[j].size);
        }
        std::sort(conf.begin(), conf.end());
        size_t prev_end = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
        for (auto & c : conf) {
            if (c.first > prev_end) {
                const size_t gap = c.first - prev_end;
                if (gap >= v[i].size && gap < best_gap) { best_gap = gap; best = prev_end; }
            }
            prev_end = std::max(prev_end, c.second);
        }
        off[i] = best != SIZE_MAX ? best : prev_end;
        peak = std::max(peak, off[i] + v[i].size);
        placed.push_back(i);
    }
    return peak;
}

// sweep check: no two buffers live at one step overlap (independent of the packer)
bool valid(const std::vector<tsr_pack_item> & v, size_t peak) {
    std::vector<std::pair<int64_t, long>> ev;
    for (size_t i = 0; i < v.size(); i++) {
        if (v[i].upper <= v[i].lower || v[i].size == 0) continue;
        if (v[i].offset + v[i].size > peak) return false;
        ev.push_back({v[i].lower, (long) i + 1});
        ev.push_back({v[i].upper, -(long) i - 1});
    }
    std::sort(ev.begin(), ev.end());
    std::map<size_t, size_t> live;  // offset -> end
    for (auto & e : ev) {
        if (e.second < 0) { live.erase(v[(size_t) (-e.second - 1)].offset); continue; }
        const tsr_pack_item & it = v[(size_t) (e.second - 1)];
        auto nx = live.lower_bound(it.offset);
        if (nx != live.end() && nx->first < it.offset + it.size) return false;
        if (nx != live.begin() && std::prev(nx)->second > it.offset) return false;
        live[it.offset] = it.offset + it.size;
    }
    return true;
}

// The capacity a trace's file name says it is known to fit in (MiniMalloc's A.1048576.csv), 0 if none.
size_t known_capacity(const std::string & name) {
    const size_t dot = name.find('.'), ext = name.rfind(".csv");
    if (dot == std::string::npos || ext == std::string::npos || ext <= dot + 1 ||
        name.find_first_not_of("0123456789", dot + 1) != ext) return 0;
    return (size_t) strtoull(name.c_str() + dot + 1, nullptr, 10);
}

// One row: tessera with budget 0 (heuristics only) and with `budget`, the baseline; `name`
// may carry the capacity the trace is known to fit in (MiniMalloc's A.1048576.csv).
void trace_row(table & t, const std::string & name, std::vector<tsr_pack_item> v, double budget, bool baseline) {
    const size_t lb = tsr_pack_lower_bound(v.data(), v.size(), 1);
    // heuristics only (budget 0): every greedy order up to 1,000 buffers, the first above
    std::vector<tsr_pack_item> v0 = v;
    double c0 = cpu_ms();
    const size_t peak0 = tsr_pack(v0.data(), v0.size(), 1, 0.0);
    c0 = cpu_ms() - c0;
    if (!valid(v0, peak0)) { fprintf(stderr, "%s: INVALID PACKING\n", name.c_str()); exit(1); }
    auto t0 = clk::now();
    double c1 = cpu_ms();
    const size_t peak = tsr_pack(v.data(), v.size(), 1, budget);
    c1 = cpu_ms() - c1;
    const double ms = ms_since(t0);
    if (!valid(v, peak)) { fprintf(stderr, "%s: INVALID PACKING\n", name.c_str()); exit(1); }
    std::string gratio = "-", gms = "-";
    if (baseline) {
        double c2 = cpu_ms();
        const size_t g = greedy_by_size(v);
        gms = fmt("%.1f", cpu_ms() - c2);
        gratio = fmt("%.4f", (double) g / (double) lb);
    }
    const size_t cap = known_capacity(name);
    std::string known = "-", given = "-", given_cpu = "-";
    if (cap > 0) {
        known = fmt("%.4f", (double) peak / (double) cap);
        // given the capacity, as MiniMalloc is (a decision procedure): the search aims at it
        std::vector<tsr_pack_item> vc = v;
        const tsr_pack_params prm = {1, budget, cap};
        double c3 = cpu_ms();
        const size_t peak_c = tsr_pack_ex(vc.data(), vc.size(), &prm);
        given_cpu = fmt("%.1f", cpu_ms() - c3);
        if (!valid(vc, peak_c)) { fprintf(stderr, "%s: INVALID PACKING\n", name.c_str()); exit(1); }
        given = fmt("%.4f", (double) peak_c / (double) cap);
    }
    t.rows.push_back({name, fmtu(v.size()), fmtu(lb), fmt("%.4f", (double) peak0 / (double) lb), fmt("%.1f", c0), fmtu(peak),
                      fmt("%.4f", (double) peak / (double) lb), known, fmt("%.1f", ms), fmt("%.1f", c1), given, given_cpu, gratio, gms});
}

void run_traces(table & t, const std::string & dir, double budget_small, double budget_large, bool baseline) {
    t.head = {"trace", "buffers", "lower bound", "heuristics only: ratio", "cpu (ms)", "tessera peak", "ratio",
              "/ known fit", "wall (ms)", "cpu (ms)", "given the fit: / known fit", "cpu (ms)", "greedy-by-size best fit: ratio", "cpu (ms)"};
    std::vector<std::string> files;
    for (const char * sub : {"minimalloc-challenging", "real"}) {
        const std::string d = dir + "/" + sub;
        DIR * dp = opendir(d.c_str());
        if (!dp) continue;
        std::vector<std::string> fs;
        while (dirent * e = readdir(dp)) {
            const std::string n = e->d_name;
            if (n.size() > 4 && n.substr(n.size() - 4) == ".csv") fs.push_back(d + "/" + n);
        }
        closedir(dp);
        std::sort(fs.begin(), fs.end());
        files.insert(files.end(), fs.begin(), fs.end());
    }
    if (files.empty()) fprintf(stderr, "alloc_bench: no traces under %s (use --traces DIR)\n", dir.c_str());
    for (const std::string & f : files) {
        std::vector<tsr_pack_item> v = tsr_read_trace_csv(f);
        trace_row(t, f.substr(f.find_last_of('/') + 1), v, v.size() <= 1000 ? budget_small : budget_large, baseline);
    }
    // issue 14: the scheduler's Vulkan buffer for LLaMA -ngl 1 at batch 64 (16-byte aligned sizes)
    trace_row(t, "sched: llama -ngl 1 b64, Vulkan", tsr_sched_llama_ngl1_b64_trace(), budget_small, baseline);
}

}  // namespace

int main(int argc, char ** argv) {
    std::string traces = TSR_ALLOC_TRACES_DIR;
    double budget_small = 1000.0, budget_large = 1000.0;
    bool models = true, do_traces = true, baseline = true, order = true;
    /* the exact pass shares its budget among pieces by size and gives the exact search half
     * of each share: RandWire 3x32's first stage needs ~0.2 s CPU of it, ~0.8 s wall when
     * the machine is loaded */
    double order_ms = 20.0, exact_ms = 6000.0;
    int exact_states = 4000000;
    std::string order_only;
    int reps = 20;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--csv") g_csv = true;
        else if (a == "--traces" && i + 1 < argc) traces = argv[++i];
        else if (a == "--budget-ms" && i + 1 < argc) budget_small = atof(argv[++i]);
        else if (a == "--budget-large-ms" && i + 1 < argc) budget_large = atof(argv[++i]);
        else if (a == "--no-models") models = false;
        else if (a == "--no-traces") do_traces = false;
        else if (a == "--no-baseline") baseline = false;
        else if (a == "--no-order") order = false;
        else if (a == "--order-ms" && i + 1 < argc) order_ms = atof(argv[++i]);
        else if (a == "--exact-ms" && i + 1 < argc) exact_ms = atof(argv[++i]);
        else if (a == "--exact-states" && i + 1 < argc) exact_states = atoi(argv[++i]);
        else if (a == "--order-only" && i + 1 < argc) order_only = argv[++i];
        else if (a == "--reps" && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--csv] [--traces DIR] [--budget-ms MS (<= 1000 buffers)] [--budget-large-ms MS] "
                            "[--no-models] [--no-traces] [--no-baseline] [--no-order] [--order-ms MS] [--exact-ms MS] "
                            "[--exact-states N] [--order-only NAME-PART] [--reps N]\n", argv[0]);
            return a == "--help" || a == "-h" ? 0 : 2;
        }
    }
    if (models) {
        table t;
        run_models(t, reps);
        t.print("gallocr on model graphs (CPU buffer type, 64-byte alignment)");
    }
    if (order) {
        table t;
        run_order(t, order_ms, exact_ms, exact_states, order_only);
        char title[512];
        snprintf(title, sizeof(title), "execution order: tsr_graph_optimize_order (budget %.0f ms) against the builder's order "
                 "(CPU buffer type; LB = lower bound; floor: what every order holds at one step; exact optimum: the floor met, or "
                 "exact search on every piece, up to %.0f ms)", order_ms, exact_ms);
        t.print(title);
    }
    if (do_traces) {
        table t;
        run_traces(t, traces, budget_small, budget_large, baseline);
        char title[512];
        snprintf(title, sizeof(title), "tsr_pack on allocation traces (heuristics only = budget 0: every greedy order up to 1,000 "
                 "buffers, the first order above; then a budget of %.0f ms of search work (deterministic; ms as calibrated on one machine) for <= 1000 buffers, %.0f ms of wall time above; "
                 "/ known fit: peak / the capacity in the file name; given the fit: tsr_pack_ex aimed at that capacity, as MiniMalloc is given it)", budget_small, budget_large);
        t.print(title);
    }
    return 0;
}
