// vk_bench: Vulkan backend GEMM GFLOP/s and per-op times.
//
//   vk_bench [--csv] [--device N] [--small | --large] [--sched]
//
// --sched: instead, the scheduler's cost per graph over Vulkan + CPU (a stack of layers whose
// rms_norm is sent to the CPU: two splits and two input copies per layer), with parallel off
// and on, against the same graph computed on Vulkan alone.
//
// Each row is one single-node graph computed `reps` times after a warm-up; the time is
// per compute, submit and fence wait included. Sizes default to small on CPU devices
// (lavapipe: a smoke run) and large on GPUs. Prints a Markdown table (--csv: CSV rows).
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera/sched.h"
#include "tessera-cpu.h"
#include "tessera-vulkan.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

struct row {
    std::string op, type, shape;
    double ms, gflops, gbps;
};

using build_fn = std::function<tsr_tensor *(tsr_context *, std::vector<tsr_tensor *> &)>;

// Time one graph; flops and bytes moved per compute give the rates (0: not reported).
bool bench(tsr_backend_t be, const char * op, const char * type, const std::string & shape, const build_fn & build,
           double flops, double bytes, int reps, std::vector<row> & rows) {
    tsr_init_params ip{64 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true};
    tsr_context * ctx = tsr_init(ip);
    if (!ctx) return false;
    std::vector<tsr_tensor *> inputs;
    tsr_tensor * out = build(ctx, inputs);
    tsr_cgraph * g = tsr_new_graph(ctx);
    if (!out || !tsr_build_forward_expand(g, out)) { tsr_free(ctx); return false; }
    tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors(ctx, be);
    if (!buf) {
        fprintf(stderr, "vk_bench: %s %s: %s\n", op, type, tsr_last_error());
        tsr_free(ctx);
        return false;
    }
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (tsr_tensor * t : inputs) {
        std::vector<uint8_t> bytes_v(tsr_nbytes(t));
        if (t->type == TSR_TYPE_I32) {
            int32_t * p = reinterpret_cast<int32_t *>(bytes_v.data());
            for (int64_t i = 0; i < tsr_nelements(t); i++) p[i] = static_cast<int32_t>(i % 64);
        } else {
            std::vector<float> f(static_cast<size_t>(tsr_nelements(t)));
            for (auto & x : f) x = dist(rng);
            tsr_from_float_row(t->type, f.data(), bytes_v.data(), tsr_nelements(t));
        }
        tsr_backend_tensor_set(t, bytes_v.data(), 0, bytes_v.size());
    }
    bool ok = tsr_backend_graph_compute(be, g) == TSR_STATUS_SUCCESS;  // warm-up (pipelines)
    double ms = 0.0;
    if (ok) {
        auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps && ok; r++) ok = tsr_backend_graph_compute(be, g) == TSR_STATUS_SUCCESS;
        auto t1 = std::chrono::steady_clock::now();
        ms = std::chrono::duration<double, std::milli>(t1 - t0).count() / reps;
    }
    if (!ok) fprintf(stderr, "vk_bench: %s %s: %s\n", op, type, tsr_last_error());
    else rows.push_back(row{op, type, shape, ms, flops > 0 ? flops / (ms * 1e6) : 0.0, bytes > 0 ? bytes / (ms * 1e6) : 0.0});
    tsr_backend_buffer_free(buf);
    tsr_free(ctx);
    return ok;
}

// ---- --sched: the scheduler's cost per graph -------------------------------------------------

struct layer_stack {
    tsr_context * ctx_w = nullptr, * ctx = nullptr;
    tsr_backend_buffer_t wbuf = nullptr;
    tsr_tensor * x = nullptr;
    std::vector<tsr_tensor *> norms;
    tsr_cgraph * gf = nullptr;
    ~layer_stack() {
        tsr_backend_buffer_free(wbuf);
        tsr_free(ctx);
        tsr_free(ctx_w);
    }
};

// x -> n_layers x (rms_norm(silu(W_l x))); weights on the Vulkan device.
bool build_stack(layer_stack & st, tsr_backend_t vk, int n_layers, int64_t E, int64_t T) {
    st.ctx_w = tsr_init({(size_t) n_layers * tsr_tensor_overhead(), nullptr, true});
    st.ctx = tsr_init({(size_t) (4 * n_layers + 4) * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
    if (!st.ctx_w || !st.ctx) return false;
    std::vector<tsr_tensor *> ws;
    for (int l = 0; l < n_layers; l++) ws.push_back(tsr_new_tensor_2d(st.ctx_w, TSR_TYPE_F32, E, E));
    st.wbuf = tsr_backend_alloc_ctx_tensors(st.ctx_w, vk);
    if (!st.wbuf) return false;
    tsr_backend_buffer_set_usage(st.wbuf, TSR_BUFFER_USAGE_WEIGHTS);
    std::vector<float> w((size_t) (E * E));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
    for (tsr_tensor * t : ws) {
        for (auto & v : w) v = dist(rng);
        tsr_backend_tensor_set(t, w.data(), 0, w.size() * sizeof(float));
    }
    st.x = tsr_new_tensor_2d(st.ctx, TSR_TYPE_F32, E, T);
    tsr_set_input(st.x);
    tsr_tensor * h = st.x;
    for (tsr_tensor * W : ws) {
        h = tsr_rms_norm(st.ctx, tsr_silu(st.ctx, tsr_mul_mat(st.ctx, W, h)), 1e-5f);
        st.norms.push_back(h);
    }
    tsr_set_output(h);
    st.gf = tsr_new_graph(st.ctx);
    return tsr_build_forward_expand(st.gf, h);
}

// Microseconds per graph: n graphs after one warm-up; each placed, its input set, run.
template <typename Place, typename Run> double us_per_graph(layer_stack & st, int n, Place place, Run run) {
    std::vector<float> xs((size_t) tsr_nelements(st.x), 0.5f);
    bool ok = true;
    auto one = [&](int i) {
        xs[0] = (float) i;
        ok = ok && place() && tsr_backend_tensor_set(st.x, xs.data(), 0, xs.size() * sizeof(float)) && run();
    };
    one(-1);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; i++) one(i);
    const auto t1 = std::chrono::steady_clock::now();
    if (!ok) fprintf(stderr, "vk_bench --sched: %s\n", tsr_last_error());
    return ok ? std::chrono::duration<double, std::micro>(t1 - t0).count() / n : -1.0;
}

int bench_sched(tsr_backend_t vk, bool large, bool csv) {
    const int n_layers = 8, n_graphs = large ? 100 : 20;
    const int64_t E = large ? 2048 : 128, T = 4;
    tsr_backend_t cpu = tsr_backend_cpu_init();
    if (!cpu) { fprintf(stderr, "vk_bench --sched: %s\n", tsr_last_error()); return 1; }
    double direct = -1, off = -1, on = -1;
    int n_splits = 0;
    {
        layer_stack st;
        tsr_gallocr_t ga = build_stack(st, vk, n_layers, E, T) ? tsr_gallocr_new(tsr_backend_get_default_buffer_type(vk)) : nullptr;
        if (ga)
            direct = us_per_graph(st, n_graphs, [&] { return tsr_gallocr_alloc_graph(ga, st.gf); },
                                  [&] { return tsr_backend_graph_compute(vk, st.gf) == TSR_STATUS_SUCCESS; });
        tsr_gallocr_free(ga);
    }
    for (bool parallel : {false, true}) {
        layer_stack st;
        tsr_backend_t list[2] = {vk, cpu};
        tsr_backend_sched_t sched = build_stack(st, vk, n_layers, E, T) ? tsr_backend_sched_new(list, nullptr, 2, 256, parallel) : nullptr;
        if (!sched) continue;
        for (tsr_tensor * n : st.norms) tsr_backend_sched_set_tensor_backend(sched, n, cpu);
        if (tsr_backend_sched_reserve(sched, st.gf)) {
            n_splits = tsr_backend_sched_get_n_splits(sched);
            const double us = us_per_graph(st, n_graphs, [&] { return tsr_backend_sched_alloc_graph(sched, st.gf); },
                                           [&] { return tsr_backend_sched_graph_compute_async(sched, st.gf) == TSR_STATUS_SUCCESS; });
            tsr_backend_sched_synchronize(sched);
            (parallel ? on : off) = us;
        }
        tsr_backend_sched_free(sched);
    }
    if (csv) {
        printf("graph,direct_us,sched_us,sched_parallel_us,splits\n");
        printf("%d layers %lldx%lld,%.1f,%.1f,%.1f,%d\n", n_layers, (long long) E, (long long) T, direct, off, on, n_splits);
    } else {
        printf("Scheduler over %s + CPU: %d layers of rms_norm(silu(W x)), W %lldx%lld F32 on Vulkan, x %lldx%lld, rms_norm on the CPU; %d graphs back to back\n\n",
               tsr_backend_name(vk), n_layers, (long long) E, (long long) E, (long long) E, (long long) T, n_graphs);
        printf("| graph | Vulkan alone (us/graph) | scheduler, parallel off (us/graph) | scheduler, parallel on (us/graph) | splits |\n");
        printf("|---|---:|---:|---:|---:|\n");
        printf("| %d layers | %.1f | %.1f | %.1f | %d |\n", n_layers, direct, off, on, n_splits);
    }
    tsr_backend_free(cpu);
    return direct < 0 || off < 0 || on < 0 ? 1 : 0;
}

std::string dims(std::initializer_list<int64_t> d) {
    std::string s;
    for (int64_t x : d) { if (!s.empty()) s += "x"; s += std::to_string(x); }
    return s;
}

} // namespace

int main(int argc, char ** argv) {
    bool csv = false;
    int device = -1, size_mode = 0;  // 0 auto, 1 small, 2 large
    bool sched = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--csv")) csv = true;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) device = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--small")) size_mode = 1;
        else if (!strcmp(argv[i], "--large")) size_mode = 2;
        else if (!strcmp(argv[i], "--sched")) sched = true;
        else { fprintf(stderr, "usage: %s [--csv] [--device N] [--small|--large] [--sched]\n", argv[0]); return 2; }
    }
    tsr_backend_t be = tsr_backend_vk_init(device);
    if (!be) { fprintf(stderr, "vk_bench: no Vulkan device: %s\n", tsr_last_error()); return 1; }
    int dev = device >= 0 ? device : tsr_backend_vk_default_device();
    char desc[256] = "?";
    tsr_backend_vk_get_device_description(dev, desc, sizeof desc);
    bool cpu_dev = strstr(desc, "[cpu]") != nullptr;
    bool large = size_mode == 2 || (size_mode == 0 && !cpu_dev);
    const int reps = large ? 20 : 2;
    if (sched) {
        const int rc = bench_sched(be, large, csv);
        tsr_backend_free(be);
        return rc;
    }

    std::vector<row> rows;
    // GEMM (tiled) and matrix-vector, per weight type
    const int64_t G = large ? 4096 : 512;
    const int64_t MV = large ? 8192 : 1024;
    for (enum tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1,
                            TSR_TYPE_IQ4_NL, TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K}) {
        bench(be, "mul_mat (GEMM)", tsr_type_name(t), dims({G, G, G}), [&](tsr_context * ctx, std::vector<tsr_tensor *> & in) {
            tsr_tensor * a = tsr_new_tensor_2d(ctx, t, G, G), * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, G, G);
            in = {a, b};
            return tsr_mul_mat(ctx, a, b);
        }, 2.0 * G * G * G, 0.0, reps, rows);
        const double wbytes = static_cast<double>(tsr_row_size(t, MV)) * MV;
        bench(be, "mul_mat (vec)", tsr_type_name(t), dims({MV, MV, 1}), [&](tsr_context * ctx, std::vector<tsr_tensor *> & in) {
            tsr_tensor * a = tsr_new_tensor_2d(ctx, t, MV, MV), * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, MV, 1);
            in = {a, b};
            return tsr_mul_mat(ctx, a, b);
        }, 2.0 * MV * MV, wbytes, reps * 5, rows);
    }
    // per-op times on activations [E, T]
    const int64_t E = large ? 4096 : 512, T = large ? 2048 : 256;
    const double act = 4.0 * E * T;
    const std::string sh = dims({E, T});
    auto act_in = [&](tsr_context * ctx, std::vector<tsr_tensor *> & in) {
        tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, E, T);
        in.push_back(a);
        return a;
    };
    bench(be, "add", "F32", sh, [&](tsr_context * c, std::vector<tsr_tensor *> & in) { tsr_tensor * a = act_in(c, in); return tsr_add(c, a, act_in(c, in)); }, 0, 3 * act, reps * 5, rows);
    bench(be, "mul (broadcast row)", "F32", sh, [&](tsr_context * c, std::vector<tsr_tensor *> & in) {
        tsr_tensor * a = act_in(c, in); tsr_tensor * b = tsr_new_tensor_1d(c, TSR_TYPE_F32, E); in.push_back(b); return tsr_mul(c, a, b); }, 0, 2 * act, reps * 5, rows);
    bench(be, "scale", "F32", sh, [&](tsr_context * c, std::vector<tsr_tensor *> & in) { return tsr_scale(c, act_in(c, in), 0.5f); }, 0, 2 * act, reps * 5, rows);
    bench(be, "gelu", "F32", sh, [&](tsr_context * c, std::vector<tsr_tensor *> & in) { return tsr_gelu(c, act_in(c, in)); }, 0, 2 * act, reps * 5, rows);
    bench(be, "silu", "F32", sh, [&](tsr_context * c, std::vector<tsr_tensor *> & in) { return tsr_silu(c, act_in(c, in)); }, 0, 2 * act, reps * 5, rows);
    bench(be, "swiglu", "F32", sh, [&](tsr_context * c, std::vector<tsr_tensor *> & in) { return tsr_swiglu(c, act_in(c, in)); }, 0, 1.5 * act, reps * 5, rows);
    bench(be, "norm", "F32", sh, [&](tsr_context * c, std::vector<tsr_tensor *> & in) { return tsr_norm(c, act_in(c, in), 1e-5f); }, 0, 2 * act, reps * 5, rows);
    bench(be, "rms_norm", "F32", sh, [&](tsr_context * c, std::vector<tsr_tensor *> & in) { return tsr_rms_norm(c, act_in(c, in), 1e-5f); }, 0, 2 * act, reps * 5, rows);
    bench(be, "soft_max", "F32", sh, [&](tsr_context * c, std::vector<tsr_tensor *> & in) { return tsr_soft_max(c, act_in(c, in)); }, 0, 2 * act, reps * 5, rows);
    bench(be, "rope neox", "F32", dims({128, E / 128, T}), [&](tsr_context * c, std::vector<tsr_tensor *> & in) {
        tsr_tensor * a = tsr_new_tensor_3d(c, TSR_TYPE_F32, 128, E / 128, T);
        tsr_tensor * p = tsr_new_tensor_1d(c, TSR_TYPE_I32, T);
        in = {a, p};
        return tsr_rope_ext(c, a, p, nullptr, 128, TSR_ROPE_TYPE_NEOX, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f); }, 0, 2 * act, reps * 5, rows);
    bench(be, "cpy F32->F16", "F16", sh, [&](tsr_context * c, std::vector<tsr_tensor *> & in) { return tsr_cast(c, act_in(c, in), TSR_TYPE_F16); }, 0, 1.5 * act, reps * 5, rows);
    bench(be, "cont (transpose)", "F32", sh, [&](tsr_context * c, std::vector<tsr_tensor *> & in) { return tsr_cont(c, tsr_transpose(c, act_in(c, in))); }, 0, 2 * act, reps * 5, rows);
    bench(be, "get_rows", "Q8_0", dims({E, 32000, T}), [&](tsr_context * c, std::vector<tsr_tensor *> & in) {
        tsr_tensor * w = tsr_new_tensor_2d(c, TSR_TYPE_Q8_0, E, 32000);
        tsr_tensor * i = tsr_new_tensor_1d(c, TSR_TYPE_I32, T);
        in = {w, i};
        return tsr_get_rows(c, w, i); }, 0, act + 34.0 / 32 * E * T, reps * 5, rows);

    if (csv) {
        printf("op,type,shape,ms,gflops,gbps\n");
        for (auto & r : rows) printf("%s,%s,%s,%.4f,%.2f,%.2f\n", r.op.c_str(), r.type.c_str(), r.shape.c_str(), r.ms, r.gflops, r.gbps);
    } else {
        printf("Vulkan device: %s (%s sizes, per compute incl. submit + wait)\n\n", desc, large ? "large" : "small");
        printf("| op | type | shape | time (ms) | GFLOP/s | GB/s |\n|---|---|---|---:|---:|---:|\n");
        for (auto & r : rows) {
            char gf[32] = "", gb[32] = "";
            if (r.gflops > 0) snprintf(gf, sizeof gf, "%.1f", r.gflops);
            if (r.gbps > 0) snprintf(gb, sizeof gb, "%.1f", r.gbps);
            printf("| %s | %s | %s | %.3f | %s | %s |\n", r.op.c_str(), r.type.c_str(), r.shape.c_str(), r.ms, gf, gb);
        }
    }
    tsr_backend_free(be);
    return 0;
}
