// cuda_bench: matrix products through tessera's CUDA backend, timed around
// tsr_backend_graph_compute (which waits for the GPU), inputs already on the device.
//
//   - GEMM 8192^3: F16 weights x F16 activations (cuBLAS tensor cores, F32 accumulate and
//     output), F16 weights x F32 activations (includes the F32->F16 conversion of src1 in
//     the workspace), F32 (full F32), F32 with TF32 allowed; plus the same F16 product by
//     cublasGemmEx called directly on the same buffers, to show tessera's overhead.
//   - matrix-vector with Q4_0 / Q8_0 weights (16384 x 16384, 8 distinct weight tensors per
//     graph so nothing stays in L2), N = 1, 2, 4, 8 columns, and with the other quantized
//     types (Q4_K, Q6_K, Q5_K, Q3_K, Q2_K, IQ4_NL, Q4_1, Q5_0, Q5_1: k_mmv_dqx), N = 1, 4:
//     weight bytes read per second
//     and % of the H200's 4.8 TB/s. The time per product includes quantizing x (a small
//     kernel per node) and the graph's synchronization; CUDA graph replay is on. Each row
//     is checked against a double-precision host dot product on sampled outputs.
//
// Usage: cuda_bench [--csv] [--quick]   (no CUDA device: prints why and exits 0)
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr double HBM_BYTES_PER_S = 4.8e12;

struct row {
    std::string name, shape;
    double us = 0, tflops = 0, gbs = 0, pct = 0;
    std::string check;
};

uint64_t rng_state = 0x9E3779B97F4A7C15ull;
inline uint64_t next_u64() {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

// Random values in +-[0.5, 1) with a coarse mantissa, as F16 bits or F32.
void fill_f16(std::vector<uint16_t> & v) {
    for (auto & x : v) {
        const uint64_t r = next_u64();
        x = (uint16_t) (((r & 1) << 15) | (14u << 10) | ((r >> 8) & 0x3FF));
    }
}
void fill_f32(std::vector<float> & v) {
    for (auto & x : v) {
        const uint64_t r = next_u64();
        x = (float) ((double) (r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
}
// Rows of `type` quantized by the core from uniform [-1, 1) values (so every type's scales,
// K-quant d / dmin included, sit where the format puts them and are finite): up to 64 rows,
// repeated over v.
void fill_quant(std::vector<uint8_t> & v, tsr_type type, int64_t K) {
    const size_t row = tsr_row_size(type, K);
    const int64_t rows = (int64_t) std::min<size_t>(64, v.size() / row);
    std::vector<float> f((size_t) (rows * K));
    fill_f32(f);
    std::vector<uint8_t> q(row * (size_t) rows);
    tsr_quantize_chunk(type, f.data(), q.data(), 0, rows, K, nullptr);
    for (size_t off = 0; off < v.size(); off += q.size()) memcpy(&v[off], q.data(), std::min(q.size(), v.size() - off));
}

double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Time `reps` computes after `warm` warm-ups; returns microseconds per compute or -1.
double time_graph(tsr_backend_t be, tsr_cgraph * gf, int warm, int reps) {
    for (int i = 0; i < warm; ++i)
        if (tsr_backend_graph_compute(be, gf) != TSR_STATUS_SUCCESS) return -1;
    const double t0 = now_us();
    for (int i = 0; i < reps; ++i)
        if (tsr_backend_graph_compute(be, gf) != TSR_STATUS_SUCCESS) return -1;
    return (now_us() - t0) / reps;
}

// The F16 x F16 -> F32 product straight through cuBLAS on tessera's buffers and stream.
row bench_raw_cublas(tsr_backend_t be, const tsr_tensor * a, const tsr_tensor * b, tsr_tensor * c, int64_t n, int reps) {
    row r;
    r.name = "GEMM F16 raw cublasGemmEx (reference)";
    r.shape = std::to_string(n) + "^3 F16 x F16";
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) { r.check = "cublasCreate failed"; return r; }
    cudaStream_t st = (cudaStream_t) tsr_backend_cuda_get_stream(be);
    cublasSetStream(h, st);
    const float alpha = 1.0f, beta = 0.0f;
    auto run = [&]() {
        return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int) n, (int) n, (int) n, &alpha, a->data, CUDA_R_16F, (int) n,
                            b->data, CUDA_R_16F, (int) n, &beta, c->data, CUDA_R_32F, (int) n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
    };
    bool ok = run() && run();
    cudaStreamSynchronize(st);
    const double t0 = now_us();
    for (int i = 0; i < reps && ok; ++i) ok = run();
    ok = ok && cudaStreamSynchronize(st) == cudaSuccess;
    const double us = (now_us() - t0) / reps;
    cublasDestroy(h);
    if (!ok) { r.check = "cuBLAS failed"; return r; }
    r.us = us;
    r.tflops = 2.0 * (double) n * n * n / (us * 1e-6) / 1e12;
    r.check = "-";
    return r;
}

row bench_gemm(tsr_backend_t be, const char * name, tsr_type ta, tsr_type tb, bool tf32, int64_t n, int reps,
               std::vector<row> * raw = nullptr) {
    row r;
    r.name = name;
    r.shape = std::to_string(n) + "^3 " + tsr_type_name(ta) + " x " + tsr_type_name(tb);
    tsr_context * ctx = tsr_init({8 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
    tsr_tensor * a = tsr_new_tensor_2d(ctx, ta, n, n);
    tsr_tensor * b = tsr_new_tensor_2d(ctx, tb, n, n);
    tsr_tensor * c = tsr_mul_mat(ctx, a, b);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_build_forward_expand(gf, c);
    tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors(ctx, be);
    if (!buf) { r.check = std::string("alloc failed: ") + tsr_last_error(); tsr_free(ctx); return r; }
    std::vector<float> xa_f, xb_f;   // host copies as float for the check
    for (tsr_tensor * t : {a, b}) {
        const size_t cnt = (size_t) (n * n);
        std::vector<float> & keep = t == a ? xa_f : xb_f;
        keep.resize(cnt);
        if (t->type == TSR_TYPE_F16) {
            std::vector<uint16_t> h(cnt);
            fill_f16(h);
            tsr_backend_tensor_set(t, h.data(), 0, cnt * 2);
            for (size_t i = 0; i < cnt; ++i) keep[i] = tsr_fp16_to_fp32(h[i]);
        } else {
            fill_f32(keep);
            tsr_backend_tensor_set(t, keep.data(), 0, cnt * 4);
        }
    }
    tsr_backend_cuda_set_allow_tf32(be, tf32);
    tsr_backend_graph_reserve(be, gf);
    const double us = time_graph(be, gf, 2, reps);
    tsr_backend_cuda_set_allow_tf32(be, false);
    if (us < 0) { r.check = std::string("failed: ") + tsr_last_error(); }
    else {
        r.us = us;
        r.tflops = 2.0 * (double) n * n * n / (us * 1e-6) / 1e12;
        // check 8 sampled outputs: c[i, j] = sum_k a[k, i] b[k, j]
        double worst = 0;
        for (int s = 0; s < 8; ++s) {
            const int64_t i = (int64_t) (next_u64() % (uint64_t) n), j = (int64_t) (next_u64() % (uint64_t) n);
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < n; ++k) {
                const double p = (double) xa_f[(size_t) (i * n + k)] * xb_f[(size_t) (j * n + k)];
                ref += p;
                mag += std::fabs(p);
            }
            float got = 0;
            tsr_backend_tensor_get(c, &got, (size_t) (j * n + i) * 4, 4);
            worst = std::max(worst, std::fabs(got - ref) / mag);
        }
        // error relative to sum |a b|: F32 and exact F16 inputs ~1e-6; src1 rounded to F16
        // (converted) or TF32 inputs: each product off by up to ~5e-4
        const double lim = tf32 ? 2e-3 : (ta != tb ? 1e-3 : 1e-5);
        char msg[64];
        snprintf(msg, sizeof(msg), "%s (%.1e)", worst <= lim ? "ok" : "WRONG", worst);
        r.check = msg;
        if (raw) raw->push_back(bench_raw_cublas(be, a, b, c, n, reps));
    }
    tsr_backend_buffer_free(buf);
    tsr_free(ctx);
    return r;
}

row bench_matvec(tsr_backend_t be, tsr_type type, int64_t M, int64_t K, int64_t N, int n_mats, int reps) {
    row r;
    r.name = std::string(tsr_type_name(type)) + " mat-vec";
    r.shape = std::to_string(M) + "x" + std::to_string(K) + ", N=" + std::to_string(N);
    tsr_context * ctx = tsr_init({(size_t) (4 * n_mats + 8) * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
    tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, K, N);
    std::vector<tsr_tensor *> ws, ys;
    tsr_cgraph * gf = tsr_new_graph(ctx);
    for (int i = 0; i < n_mats; ++i) {
        ws.push_back(tsr_new_tensor_2d(ctx, type, K, M));
        ys.push_back(tsr_mul_mat(ctx, ws.back(), x));
        tsr_build_forward_expand(gf, ys.back());
    }
    tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors(ctx, be);
    if (!buf) { r.check = std::string("alloc failed: ") + tsr_last_error(); tsr_free(ctx); return r; }
    const size_t wbytes = tsr_nbytes(ws[0]);
    std::vector<uint8_t> w(wbytes);
    fill_quant(w, type, K);
    for (tsr_tensor * t : ws) tsr_backend_tensor_set(t, w.data(), 0, wbytes);
    std::vector<float> xv((size_t) (K * N));
    fill_f32(xv);
    tsr_backend_tensor_set(x, xv.data(), 0, xv.size() * 4);
    tsr_backend_graph_reserve(be, gf);
    tsr_backend_cuda_set_graph_capture(be, true);   // replay: no launch gaps between the small kernels
    const double us = time_graph(be, gf, 2, reps);
    tsr_backend_cuda_set_graph_capture(be, false);
    if (us < 0) { r.check = std::string("failed: ") + tsr_last_error(); }
    else {
        r.us = us / n_mats;
        r.gbs = (double) wbytes / (r.us * 1e-6) / 1e9;
        r.pct = 100.0 * (double) wbytes / (r.us * 1e-6) / HBM_BYTES_PER_S;
        // check sampled rows of the last product against double-precision host dots; the
        // kernel quantizes x to 8 bits, so allow 1% of sum |w x|
        double worst = 0;
        const size_t row_bytes = ws[0]->nb[1];
        for (int s = 0; s < 16; ++s) {
            const int64_t m = (int64_t) (next_u64() % (uint64_t) M), j = (int64_t) (next_u64() % (uint64_t) N);
            std::vector<float> wf((size_t) K);
            tsr_to_float_row(type, w.data() + (size_t) m * row_bytes, wf.data(), K);
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < K; ++k) {
                const double p = (double) wf[(size_t) k] * xv[(size_t) (j * K + k)];
                ref += p;
                mag += std::fabs(p);
            }
            float got = 0;
            tsr_backend_tensor_get(ys.back(), &got, (size_t) (j * M + m) * 4, 4);
            worst = std::max(worst, std::fabs(got - ref) / mag);
        }
        char msg[64];
        snprintf(msg, sizeof(msg), "%s (%.1e)", worst <= 1e-2 ? "ok" : "WRONG", worst);
        r.check = msg;
    }
    tsr_backend_buffer_free(buf);
    tsr_free(ctx);
    return r;
}

} // namespace

int main(int argc, char ** argv) {
    bool csv = false, quick = false;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--csv")) csv = true;
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else { fprintf(stderr, "usage: %s [--csv] [--quick]\n", argv[0]); return 2; }
    }
    tsr_backend_t be = tsr_backend_cuda_get_device_count() > 0 ? tsr_backend_cuda_init(0) : nullptr;
    if (!be) {
        printf("cuda_bench: skipped: no CUDA device (%s)\n",
               tsr_backend_cuda_get_device_count() > 0 ? tsr_last_error() : "no driver or no GPU");
        return 0;
    }
    char desc[256] = "";
    tsr_backend_cuda_get_device_description(0, desc, sizeof(desc));

    const int64_t G = quick ? 2048 : 8192;
    const int64_t MV = quick ? 4096 : 16384;
    const int reps = quick ? 3 : 10;
    std::vector<row> rows;
    std::vector<row> raw;
    rows.push_back(bench_gemm(be, "GEMM F16 (src1 F16)", TSR_TYPE_F16, TSR_TYPE_F16, false, G, reps, &raw));
    rows.insert(rows.end(), raw.begin(), raw.end());
    rows.push_back(bench_gemm(be, "GEMM F16 (src1 F32, converted)", TSR_TYPE_F16, TSR_TYPE_F32, false, G, reps));
    rows.push_back(bench_gemm(be, "GEMM F32", TSR_TYPE_F32, TSR_TYPE_F32, false, G, quick ? 2 : 3));
    rows.push_back(bench_gemm(be, "GEMM F32 (TF32 allowed)", TSR_TYPE_F32, TSR_TYPE_F32, true, G, reps));
    for (tsr_type t : {TSR_TYPE_Q4_0, TSR_TYPE_Q8_0})
        for (int64_t n : {1, 2, 4, 8}) rows.push_back(bench_matvec(be, t, MV, MV, n, quick ? 4 : 8, reps));
    for (tsr_type t : {TSR_TYPE_Q4_K, TSR_TYPE_Q6_K, TSR_TYPE_Q5_K, TSR_TYPE_Q3_K, TSR_TYPE_Q2_K, TSR_TYPE_IQ4_NL,
                       TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1})
        for (int64_t n : {1, 4}) rows.push_back(bench_matvec(be, t, MV, MV, n, quick ? 4 : 8, reps));

    if (csv) {
        printf("case,shape,time_us,tflops,weight_gbs,pct_of_4.8TBs,check\n");
        for (const row & r : rows)
            printf("%s,%s,%.1f,%.1f,%.1f,%.1f,%s\n", r.name.c_str(), r.shape.c_str(), r.us, r.tflops, r.gbs, r.pct, r.check.c_str());
    } else {
        printf("device: %s\n\n", desc);
        printf("| case | shape | time (us) | TFLOP/s | weight GB/s | %% of 4.8 TB/s | check |\n");
        printf("|---|---|---:|---:|---:|---:|---|\n");
        for (const row & r : rows) {
            printf("| %s | %s | %.1f | %s | %s | %s | %s |\n", r.name.c_str(), r.shape.c_str(), r.us,
                   r.tflops > 0 ? std::to_string((int) (r.tflops + 0.5)).c_str() : "",
                   r.gbs > 0 ? std::to_string((int) (r.gbs + 0.5)).c_str() : "",
                   r.pct > 0 ? std::to_string((int) (r.pct + 0.5)).c_str() : "", r.check.c_str());
        }
    }
    tsr_backend_free(be);
    return 0;
}
