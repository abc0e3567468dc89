// cpu_bench: the CPU backend's GEMM / GEMV throughput per weight type, the machine's
// copy and read bandwidth and FMA peak measured in the same run, OpenBLAS (when libopenblas.so.0
// can be dlopen'ed; never a build dependency) and a GPT-2-small forward at 128 tokens.
//
//   cpu_bench [--csv] [--threads N] [--rounds N] [--quick] [--gpt2-only] [--matvec-only] [--conv-only] [--gemm-only]
//             [--matvec-cache-only] [--attn-only] [--read-only] [--types a,b,...] [--prefetch A,B,...]
//
// --types a,b,...: only these types' rows (tsr_type_name: GEMM, mat-vec and its read,
// in-cache, quantize; a type CPU_REPACK interleaves gets its CPU_REPACK rows too, "q4_K-repack"
// is another name for q4_K); no OpenBLAS unless f32 is named, no mul_mat_id rows unless "moe"
// is: a DRAM check of a few types in well under a minute.
// --prefetch A,B,...: each selected type's mat-vec with its software prefetch these many
// bytes ahead (tsr_cpu_set_matvec_prefetch; "default": the built-in distance), alternating
// on the same weights within every run, a row per setting with the spread of its rounds' bests.
//
// --matvec-cache-only: each type's mat-vec on one thread with its weights in cache (kernel
// cost per byte, robust on a loaded machine), CPU_REPACK's layout alternating with the
// plain one for the types it interleaves; TSR_CPU_ISA=avx2 (or scalar, avx512) times that
// kernel path.
//
// --attn-only: the decode attention rows alone (flash_attn_ext over KV caches from DRAM,
// against the read bandwidth).
// --read-only: the read bandwidth alone (a few seconds): side_by_side.sh measures it beside
// each pair, to say how close each side's generation reads its weights to the machine's rate.
//
// Prints one Markdown table (or CSV with --csv). Not a test.
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <functional>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct row {
    std::string name, value, unit, ref, note;
};
std::vector<row> g_rows;
bool g_csv = false;
int g_threads = 2;  // the backend's threads

void add_row(const std::string & name, double v, const char * unit, const std::string & ref, const std::string & note) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    g_rows.push_back({name, buf, unit, ref, note});
    std::fprintf(stderr, "  %-36s %10s %s %s\n", name.c_str(), buf, unit, ref.c_str());
}

std::string fmt(double v, int decimals = 1) {
    char b[32];
    std::snprintf(b, sizeof b, "%.*f", decimals, v);
    return b;
}

// Fill a tensor's data quickly: a 1 MiB block of valid random values, repeated.
void fast_fill(tsr_tensor * t, unsigned seed) {
    const size_t nbytes = tsr_nbytes(t);
    const int64_t ne0 = t->ne[0];
    const int64_t rows_per_block = std::max<int64_t>(1, (int64_t)((1u << 20) / tsr_row_size(t->type, ne0)));
    const int64_t nrows = std::min<int64_t>(rows_per_block, tsr_nrows(t));
    std::vector<float> f((size_t)(ne0 * nrows));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float & x : f) x = u(rng);
    const size_t blk = tsr_row_size(t->type, ne0) * (size_t)nrows;
    std::vector<char> tmp(blk);
    tsr_from_float_row(t->type, f.data(), tmp.data(), ne0 * nrows);
    for (size_t off = 0; off < nbytes; off += blk) std::memcpy((char *)t->data + off, tmp.data(), std::min(blk, nbytes - off));
}

// Best time over `reps` runs of compute (after one warm-up).
template <class F> double best_time(int reps, F && f) {
    f();
    double best = 1e30;
    for (int i = 0; i < reps; ++i) {
        const double t0 = now_s();
        f();
        best = std::min(best, now_s() - t0);
    }
    return best;
}

// ---- OpenBLAS through dlopen ------------------------------------------------------------

typedef void (*sgemm_t)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
typedef void (*sgemv_t)(int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
typedef void (*set_threads_t)(int);
struct blas {
    void * h = nullptr;
    sgemm_t sgemm = nullptr;
    sgemv_t sgemv = nullptr;
    blas(int n_threads) {
        h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
        if (!h) return;
        sgemm = (sgemm_t)dlsym(h, "cblas_sgemm");
        sgemv = (sgemv_t)dlsym(h, "cblas_sgemv");
        set_threads_t st = (set_threads_t)dlsym(h, "openblas_set_num_threads");
        if (st) st(n_threads);
        if (!sgemm || !sgemv) sgemm = nullptr, sgemv = nullptr;
    }
    ~blas() { if (h) dlclose(h); }
    bool ok() const { return sgemm != nullptr; }
};
enum { CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112 };

// ---- machine roofs ------------------------------------------------------------------------

double copy_bandwidth(int n_threads, size_t bytes) {
    std::vector<char> a(bytes, 1), b(bytes, 2);
    const size_t chunk = bytes / (size_t)n_threads;
    const double tc = best_time(3, [&] {
        std::vector<std::thread> th;
        for (int t = 0; t < n_threads; ++t) th.emplace_back([&, t] { std::memcpy(b.data() + t * chunk, a.data() + t * chunk, chunk); });
        for (auto & x : th) x.join();
    });
    return 2.0 * (double)bytes / tc / 1e9;  // read + write
}

// ---- read bandwidth, measured the way the mat-vec reads ----------------------------------
//
// A plain sum over a std::vector on fresh std::threads read 12 % slower than the F32 mat-vec,
// so every "x read bandwidth" ratio flattered. The read now goes through the same road as
// the mat-vec: the backend's own threads (already placed, waiting in the pool), the same
// weight tensors in the same CPU buffer, one node per matrix, rows taken in chunks from a
// shared counter as mul_mat takes them, each chunk walked as four streams side by side
// (mm_range_dots) with the widest loads, the kernels' prefetch and no arithmetic. What is left
// is the memory system.

// The four quarters of [p, p + 4 * part) side by side, OR-ed so the loads stay, every line
// prefetched 2 KiB ahead as the x86 mat-vec kernels prefetch theirs: on 2 MiB pages the kernels
// outran the plain read (Q4_0 1.07-1.10 x it), so it was no roof any more; with the prefetch
// and mul_mat's 3 chunks a thread it read 35.5-39.7 GB/s where it had read 29.6-33.3.
static constexpr size_t read_prefetch_ahead = 2048;
#if defined(__x86_64__)
__attribute__((target("avx512f"))) uint64_t read4_avx512(const char * p, size_t part) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 64 <= part; i += 64) {
        for (size_t k = 0; k < 4; ++k) _mm_prefetch(p + k * part + i + read_prefetch_ahead, _MM_HINT_T0);
        a0 = _mm512_or_si512(a0, _mm512_loadu_si512((const void *)(p + i)));
        a1 = _mm512_or_si512(a1, _mm512_loadu_si512((const void *)(p + part + i)));
        a2 = _mm512_or_si512(a2, _mm512_loadu_si512((const void *)(p + 2 * part + i)));
        a3 = _mm512_or_si512(a3, _mm512_loadu_si512((const void *)(p + 3 * part + i)));
    }
    uint64_t lanes[8], s = 0;
    _mm512_storeu_si512((void *)lanes, _mm512_or_si512(_mm512_or_si512(a0, a1), _mm512_or_si512(a2, a3)));
    for (uint64_t l : lanes) s |= l;
    for (; i < part; ++i) s |= (uint64_t)(p[i] | p[part + i] | p[2 * part + i] | p[3 * part + i]);
    return s;
}
__attribute__((target("avx2"))) uint64_t read4_avx2(const char * p, size_t part) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 64 <= part; i += 64) {
        for (size_t k = 0; k < 4; ++k) _mm_prefetch(p + k * part + i + read_prefetch_ahead, _MM_HINT_T0);
        for (size_t h = 0; h < 64; h += 32) {
            a0 = _mm256_or_si256(a0, _mm256_loadu_si256((const __m256i *)(p + i + h)));
            a1 = _mm256_or_si256(a1, _mm256_loadu_si256((const __m256i *)(p + part + i + h)));
            a2 = _mm256_or_si256(a2, _mm256_loadu_si256((const __m256i *)(p + 2 * part + i + h)));
            a3 = _mm256_or_si256(a3, _mm256_loadu_si256((const __m256i *)(p + 3 * part + i + h)));
        }
    }
    const __m256i a = _mm256_or_si256(_mm256_or_si256(a0, a1), _mm256_or_si256(a2, a3));
    uint64_t s = (uint64_t)(_mm256_extract_epi64(a, 0) | _mm256_extract_epi64(a, 1) | _mm256_extract_epi64(a, 2) | _mm256_extract_epi64(a, 3));
    for (; i < part; ++i) s |= (uint64_t)(p[i] | p[part + i] | p[2 * part + i] | p[3 * part + i]);
    return s;
}
#endif
uint64_t read4_portable(const char * p, size_t part) {
    uint64_t s = 0;
    for (size_t i = 0; i < part; ++i) s |= (uint64_t)(p[i] | p[part + i] | p[2 * part + i] | p[3 * part + i]);
    return s;
}
uint64_t read4(const char * p, size_t part) {
#if defined(__x86_64__)
    static const bool z = tsr_cpu_isa_supported(TSR_CPU_ISA_AVX512), y = tsr_cpu_isa_supported(TSR_CPU_ISA_AVX2);
    if (z) return read4_avx512(p, part);
    if (y) return read4_avx2(p, part);
#endif
    return read4_portable(p, part);
}

// One matrix's read: chunks of rows from a shared counter (reset before each run), each
// chunk's rows cut in four contiguous parts read side by side; rows past a multiple of 4
// are read as their own (short) part.
struct read_node {
    std::atomic<int64_t> next{0};
    std::atomic<uint64_t> sink{0};
    int64_t chunk_rows = 0;
};

void read_rows(tsr_tensor *, const tsr_tensor * w, int, int, void * ud) {
    read_node & rn = *(read_node *)ud;
    const int64_t M = w->ne[1];
    const size_t lda = w->nb[1];
    uint64_t s = 0;
    for (int64_t m0 = rn.next.fetch_add(rn.chunk_rows); m0 < M; m0 = rn.next.fetch_add(rn.chunk_rows)) {
        const int64_t rows = std::min(rn.chunk_rows, M - m0), q = rows / 4;
        const char * p = (const char *)w->data + (size_t)m0 * lda;
        s |= read4(p, (size_t)q * lda);
        for (size_t i = (size_t)(4 * q) * lda; i < (size_t)rows * lda; ++i) s |= (uint64_t)p[i];
    }
    rn.sink |= s;
}

// Read nodes over the matrices ws into graph gf, chunked as mul_mat chunks their rows for a
// mat-vec on nth threads (16 rows a unit, 3 chunks per thread: mm_items_per_thread).
void add_read_nodes(tsr_context * ctx, tsr_cgraph * gf, const std::vector<tsr_tensor *> & ws, int nth, std::vector<read_node> & nodes) {
    for (size_t i = 0; i < ws.size(); ++i) {
        const int64_t M = ws[i]->ne[1], chunks = nth > 1 ? 3 * nth : 1;
        nodes[i].chunk_rows = ((M + chunks - 1) / chunks + 15) / 16 * 16;
        tsr_build_forward_expand(gf, tsr_map_custom1_inplace(ctx, ws[i], read_rows, TSR_N_TASKS_MAX, &nodes[i]));
    }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) double fma_loop_512(int64_t iters) {
    __m512 a[12];
    const __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
    for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps((float)i);
    for (int64_t it = 0; it < iters; ++it)
        for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], x, y);
    float tmp[16], s = 0;
    for (int i = 0; i < 12; ++i) { _mm512_storeu_ps(tmp, a[i]); for (float v : tmp) s += v; }
    return s;
}
__attribute__((target("avx2,fma"))) double fma_loop_256(int64_t iters) {
    __m256 a[12];
    const __m256 x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
    for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps((float)i);
    for (int64_t it = 0; it < iters; ++it)
        for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], x, y);
    float tmp[8], s = 0;
    for (int i = 0; i < 12; ++i) { _mm256_storeu_ps(tmp, a[i]); for (float v : tmp) s += v; }
    return s;
}
#endif

double fma_peak(int n_threads) {
#if defined(__x86_64__)
    const bool z = tsr_cpu_isa_supported(TSR_CPU_ISA_AVX512);
    const bool y = tsr_cpu_isa_supported(TSR_CPU_ISA_AVX2);
    if (!z && !y) return 0;
    const int64_t iters = 20000000;
    std::atomic<double> sink{0};
    const double t = best_time(2, [&] {
        std::vector<std::thread> th;
        for (int i = 0; i < n_threads; ++i)
            th.emplace_back([&] { double s = z ? fma_loop_512(iters) : fma_loop_256(iters); sink = sink + s; });
        for (auto & x : th) x.join();
    });
    return (double)n_threads * (double)iters * 12 * (z ? 16 : 8) * 2 / t / 1e9;
#else
    (void)n_threads;
    return 0;
#endif
}

// ---- tessera GEMM / GEMV -------------------------------------------------------------------

double bench_gemm(tsr_backend_t be, tsr_type type, int64_t M, int64_t K, int64_t N, int reps) {
    const size_t mem = tsr_row_size(type, K) * (size_t)M + (size_t)(K * N + M * N) * 4 + 16 * tsr_tensor_overhead() + tsr_graph_overhead() + (1 << 20);
    tsr_context * ctx = tsr_init(tsr_init_params{mem, nullptr, false});
    tsr_tensor * a = tsr_new_tensor_2d(ctx, type, K, M);
    tsr_tensor * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, K, N);
    fast_fill(a, 1);
    fast_fill(b, 2);
    tsr_tensor * c = tsr_mul_mat(ctx, a, b);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_build_forward_expand(gf, c);
    tsr_backend_graph_reserve(be, gf);
    const double t = best_time(reps, [&] { tsr_backend_graph_compute(be, gf); });
    tsr_free(ctx);
    return 2.0 * (double)M * (double)N * (double)K / t / 1e9;
}

// bench_gemm with the weights in a CPU_REPACK buffer (Q4_0 / IQ4_NL / Q4_K / Q5_K / Q3_K / Q2_K: interleaved when set).
double bench_gemm_repack(tsr_backend_t be, tsr_type type, int64_t M, int64_t K, int64_t N, int reps) {
    tsr_context * ctx = tsr_init(tsr_init_params{8 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
    tsr_tensor * a = tsr_new_tensor_2d(ctx, type, K, M);
    tsr_tensor * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, K, N);
    tsr_tensor * c = tsr_mul_mat(ctx, a, b);
    const size_t bc = (size_t)(K * N + M * N) * 4 + 128;
    tsr_backend_buffer_t wb = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_repack_buffer_type(), tsr_nbytes(a));
    tsr_backend_buffer_t ab = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_buffer_type(), bc);
    double gflops = 0;
    if (wb && ab && tsr_backend_tensor_alloc(wb, a, tsr_backend_buffer_get_base(wb)) &&
        tsr_backend_tensor_alloc(ab, b, tsr_backend_buffer_get_base(ab)) &&
        tsr_backend_tensor_alloc(ab, c, (char *)tsr_backend_buffer_get_base(ab) + (size_t)(K * N) * 4 + 64)) {
        fast_fill(a, 1);
        fast_fill(b, 2);
        tsr_backend_tensor_set(a, a->data, 0, tsr_nbytes(a));  // filled in place: the buffer repacks it now
        tsr_cgraph * gf = tsr_new_graph(ctx);
        tsr_build_forward_expand(gf, c);
        tsr_backend_graph_reserve(be, gf);
        const double t = best_time(reps, [&] { tsr_backend_graph_compute(be, gf); });
        gflops = 2.0 * (double)M * (double)N * (double)K / t / 1e9;
    }
    tsr_backend_buffer_free(wb);
    tsr_backend_buffer_free(ab);
    tsr_free(ctx);
    return gflops;
}

// A software prefetch setting of the mat-vec kernels (tsr_cpu_set_matvec_prefetch).
struct prefetch_setting {
    std::string label;  // "default" or the bytes as given
    bool is_default;
    size_t ahead;
};

// matrix-vector over several distinct 4096x4096 matrices totalling >= total_bytes, in
// buffers of type buft (a CPU_REPACK one repacks them when set). With read_gbs, the read
// of the same matrices (read_rows) is timed too, its runs alternating with the mat-vec's
// (CPU_REPACK: of as many file-layout matrices of their own, as chunked: the backend runs no
// other op on interleaved weights). With settings, every run times the mat-vec once per
// prefetch setting, in turn, on the same weights; each one's GB/s goes to setting_gbs (the
// type's own setting is restored). paired[v] gets one ratio per run: setting v's mat-vec
// time over the time of the read that follows the run's settings — a shared machine's
// bandwidth drifts between runs and rounds, much less between a run and the next.
double bench_gemv(tsr_backend_t be, tsr_type type, size_t total_bytes, int reps, tsr_backend_buffer_type_t buft = tsr_backend_cpu_buffer_type(),
                  double * read_gbs = nullptr, const std::vector<prefetch_setting> * settings = nullptr,
                  std::vector<double> * setting_gbs = nullptr, std::vector<std::vector<double>> * paired = nullptr) {
    const bool repacked = buft == tsr_backend_cpu_repack_buffer_type();
    size_t own_ahead = 0;
    if (settings && !tsr_cpu_get_matvec_prefetch(type, repacked, &own_ahead)) {
        std::fprintf(stderr, "%s\n", tsr_last_error());
        settings = nullptr;
    }
    const size_t nset = settings ? settings->size() : 1;
    if (setting_gbs) setting_gbs->assign(nset, 0.0);
    if (paired) paired->assign(nset, {});
    auto apply = [&](size_t v) {
        if (!settings) return;
        const prefetch_setting & p = (*settings)[v];
        if (!tsr_cpu_set_matvec_prefetch(type, repacked, p.is_default ? own_ahead : p.ahead))
            std::fprintf(stderr, "%s\n", tsr_last_error());
    };
    const int64_t K = 4096, M = 4096;
    const size_t mbytes = tsr_row_size(type, K) * (size_t)M;
    const int nmat = (int)((total_bytes + mbytes - 1) / mbytes);
    const size_t mem = (size_t)(6 * nmat + 8) * tsr_tensor_overhead() + 2 * tsr_graph_overhead();
    tsr_context * ctx = tsr_init(tsr_init_params{mem, nullptr, true});
    if (!ctx) return 0;
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, K);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    std::vector<tsr_tensor *> ws;
    for (int i = 0; i < nmat; ++i) {
        ws.push_back(tsr_new_tensor_2d(ctx, type, K, M));
        tsr_build_forward_expand(gf, tsr_mul_mat(ctx, ws.back(), x));
    }
    tsr_backend_buffer_t buf = tsr_backend_alloc_ctx_tensors_from_buft(ctx, buft);
    /* the read's matrices: the same ones, or file-layout twins of repacked ones */
    tsr_context * rctx = nullptr;
    tsr_backend_buffer_t rbuf = nullptr;
    std::vector<tsr_tensor *> rws = ws;
    if (read_gbs && repacked) {
        rctx = tsr_init(tsr_init_params{mem, nullptr, true});
        for (int i = 0; rctx && i < nmat; ++i) rws[(size_t)i] = tsr_new_tensor_2d(rctx, type, K, M);
        rbuf = rctx ? tsr_backend_alloc_ctx_tensors_from_buft(rctx, tsr_backend_cpu_buffer_type()) : nullptr;
        for (int i = 0; rbuf && i < nmat; ++i) fast_fill(rws[(size_t)i], 10 + (unsigned)i);
    }
    std::vector<read_node> nodes((size_t)nmat);
    tsr_cgraph * gr = read_gbs && (!repacked || rbuf) ? tsr_new_graph(repacked ? rctx : ctx) : nullptr;
    if (gr) add_read_nodes(repacked ? rctx : ctx, gr, rws, g_threads, nodes);
    double gbs = 0;
    if (buf) {
        fast_fill(x, 3);
        for (int i = 0; i < nmat; ++i) {
            fast_fill(ws[(size_t)i], 10 + (unsigned)i);
            tsr_backend_tensor_set(ws[(size_t)i], ws[(size_t)i]->data, 0, tsr_nbytes(ws[(size_t)i]));  // filled in place
        }
        tsr_backend_graph_reserve(be, gf);
        std::vector<double> t(nset, 1e30), run(nset, 0.0);
        double tr = 1e30;
        for (int r = -1; r < reps; ++r) {  // r = -1: warm-up
            for (size_t v = 0; v < nset; ++v) {
                apply(v);
                const double t0 = now_s();
                tsr_backend_graph_compute(be, gf);
                run[v] = now_s() - t0;
                if (r >= 0) t[v] = std::min(t[v], run[v]);
            }
            if (!gr) continue;
            for (read_node & n : nodes) n.next = 0;
            const double t1 = now_s();
            if (tsr_backend_graph_compute(be, gr) != TSR_STATUS_SUCCESS) {
                std::fprintf(stderr, "read of %s weights: %s\n", tsr_type_name(type), tsr_last_error());
                gr = nullptr;  /* no read figure: 0 */
                continue;
            }
            const double tread = now_s() - t1;
            if (r < 0) continue;
            tr = std::min(tr, tread);
            for (size_t v = 0; v < nset && paired; ++v) (*paired)[v].push_back(tread / run[v]);
        }
        gbs = (double)mbytes * nmat / t[0] / 1e9;
        for (size_t v = 0; v < nset && setting_gbs; ++v) (*setting_gbs)[v] = (double)mbytes * nmat / t[v] / 1e9;
        if (settings) tsr_cpu_set_matvec_prefetch(type, repacked, own_ahead);
        if (read_gbs) *read_gbs = gr ? (double)mbytes * nmat / tr / 1e9 : 0.0;
    }
    tsr_backend_buffer_free(rbuf);
    if (rctx) tsr_free(rctx);
    tsr_backend_buffer_free(buf);
    tsr_free(ctx);
    return gbs;
}

// One thread's mat-vec with its weights in cache (a CPU_REPACK buffer with repack): one
// matrix of about 1 MiB of 4096-wide rows, the best of `reps` short runs (a run takes tens of microseconds, so on a loaded
// machine the best of many still misses the other processes). What a kernel costs per byte
// where DRAM does not bound it: kernels compare by it on a shared machine, and a rate
// below a core's share of the read bandwidth says the kernel, not memory, bounds decoding.
// TSR_CPU_ISA picks the kernel path (e.g. avx2 on an AVX-512 machine).
double bench_gemv_in_cache(tsr_type type, int reps, bool repack = false) {
    const int64_t K = 4096, M = std::max<int64_t>(16, (int64_t)((1u << 20) / tsr_row_size(type, K)) / 16 * 16);
    tsr_backend_t be1 = tsr_backend_cpu_init();
    tsr_backend_cpu_set_n_threads(be1, 1);
    /* 2 M K flops per run */
    const double gflops = repack ? bench_gemm_repack(be1, type, M, K, 1, reps) : bench_gemm(be1, type, M, K, 1, reps);
    tsr_backend_free(be1);
    return gflops * (double)(tsr_row_size(type, K) * (size_t)M) / (2.0 * (double)M * (double)K);
}

// The machine's read bandwidth, as bench_gemv reads 512 MiB of F32 weights.
double read_bandwidth(tsr_backend_t be, int reps) {
    double rd = 0;
    bench_gemv(be, TSR_TYPE_F32, (size_t)512 << 20, reps, tsr_backend_cpu_buffer_type(), &rd);
    return rd;
}

// Host memory as it comes from malloc, without the huge pages the built-in allocator asks
// for on large blocks (on Linux, unless transparent huge pages are "always" on): the read and
// the Q4_0 mat-vec from it show what 4 KiB pages cost a DRAM-bound kernel.
void * small_pages_alloc(size_t size, size_t align, void *) { return std::aligned_alloc(align, (size + align - 1) / align * align); }
void small_pages_free(void * p, void *) { std::free(p); }
// The kernel's transparent huge page mode (the bracketed word of its setting): malloc's
// memory has 4 KiB pages unless it is "always".
std::string thp_mode() {
    std::string mode = "unknown";
    if (FILE * f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r")) {
        char line[128] = {};
        if (std::fgets(line, sizeof line, f)) {
            const char * a = std::strchr(line, '['), * b = a ? std::strchr(a, ']') : nullptr;
            if (a && b) mode = std::string(a + 1, b);
        }
        std::fclose(f);
    }
    return mode;
}
struct small_pages_buft {
    tsr_host_allocator a{small_pages_alloc, small_pages_free, nullptr};
    tsr_backend_buffer_type_t buft = tsr_backend_cpu_buffer_type_with_allocator(&a);
    ~small_pages_buft() { tsr_backend_cpu_buffer_type_free(buft); }
};

// MB/s of F32 input through tsr_quantize_chunk on one thread: 4 rows of 4096 (64 KiB, short
// enough for the best of many runs to miss other processes on a shared core), smooth values
// with noise like trained weights
double bench_quantize(tsr_type type, int reps) {
    const int64_t n_per_row = 4096, nrows = 4;
    std::vector<float> src((size_t)(n_per_row * nrows));
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 0.02f);
    for (size_t i = 0; i < src.size(); ++i) src[i] = 0.05f * std::cos(0.001f * (float)i) + nd(rng);
    std::vector<char> dst(tsr_row_size(type, n_per_row) * (size_t)nrows);
    const double t = best_time(reps, [&] { tsr_quantize_chunk(type, src.data(), dst.data(), 0, nrows, n_per_row, nullptr); });
    return (double)src.size() * 4 / t / 1e6;
}

// ---- MoE (issue 17 part B) ----------------------------------------------------------------

// T tokens through a Mixtral-shaped expert FFN (gate, up: 8 experts of 4096 -> 14336; down:
// 14336 -> 4096), 2 experts used per token (T = 1: experts 2 and 5; else spread evenly, so
// T = 128 gives each expert 32 pairs), the weights in buffers of buft (a CPU_REPACK one takes
// them in the layouts it keeps for such tensors). T = 1 (decode): GB/s of the used experts'
// weights, what a step must read; else GFLOPS (2 K M a pair and matrix). *total_mib gets the
// size of all the experts' weights.
double bench_moe(tsr_backend_t be, tsr_type type, int64_t T, int reps, tsr_backend_buffer_type_t buft, double * total_mib) {
    const int64_t K = 4096, M = 14336, n_expert = 8, n_used = 2;
    const size_t expert_bytes = tsr_row_size(type, K) * (size_t)M;
    *total_mib = (double)(3 * expert_bytes * (size_t)n_expert) / (1 << 20);
    tsr_context * ctx = tsr_init(tsr_init_params{16 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
    if (!ctx) return 0;
    tsr_tensor * w[3] = {tsr_new_tensor_3d(ctx, type, K, M, n_expert), tsr_new_tensor_3d(ctx, type, K, M, n_expert),
                         tsr_new_tensor_3d(ctx, type, M, K, n_expert)};  /* gate, up, down */
    tsr_tensor * x = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, K, 1, T);
    tsr_tensor * ids = tsr_new_tensor_2d(ctx, TSR_TYPE_I32, n_used, T);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_tensor * h = tsr_mul(ctx, tsr_mul_mat_id(ctx, w[0], x, ids), tsr_mul_mat_id(ctx, w[1], x, ids));  /* [M, 2, T] */
    tsr_build_forward_expand(gf, tsr_mul_mat_id(ctx, w[2], h, ids));
    const size_t align = tsr_backend_buft_get_alignment(buft);
    const size_t padded = (expert_bytes * (size_t)n_expert + align - 1) / align * align;
    tsr_backend_buffer_t wb = tsr_backend_buft_alloc_buffer(buft, 3 * padded);
    double rate = 0;
    bool ok = wb != nullptr;
    for (int i = 0; i < 3 && ok; ++i) ok = tsr_backend_tensor_alloc(wb, w[i], (char *)tsr_backend_buffer_get_base(wb) + (size_t)i * padded);
    tsr_backend_buffer_t ab = ok ? tsr_backend_alloc_ctx_tensors_from_buft(ctx, tsr_backend_cpu_buffer_type()) : nullptr;  /* the rest */
    if (ab) {
        for (int i = 0; i < 3; ++i) {
            fast_fill(w[i], 21 + (unsigned)i);
            /* filled in place: a CPU_REPACK buffer repacks it when told so */
            if (buft == tsr_backend_cpu_repack_buffer_type()) tsr_backend_tensor_set(w[i], w[i]->data, 0, tsr_nbytes(w[i]));
        }
        fast_fill(x, 23);
        for (int64_t t = 0; t < T; ++t) {
            ((int32_t *)ids->data)[2 * t] = (int32_t)((2 + t) % n_expert);
            ((int32_t *)ids->data)[2 * t + 1] = (int32_t)((5 + 3 * t) % n_expert);  /* never the first's: 2 t + 3 is odd */
        }
        tsr_backend_graph_reserve(be, gf);
        enum tsr_status st = TSR_STATUS_SUCCESS;
        const double t = best_time(reps, [&] { st = tsr_backend_graph_compute(be, gf); });
        if (st != TSR_STATUS_SUCCESS) std::fprintf(stderr, "moe: %s\n", tsr_last_error());
        rate = T == 1 ? (double)(3 * n_used) * (double)expert_bytes / t / 1e9 : 3.0 * 2.0 * (double)(K * M) * (double)(n_used * T) / t / 1e9;
    }
    tsr_backend_buffer_free(ab);
    tsr_backend_buffer_free(wb);
    tsr_free(ctx);
    return rate;
}

// ---- rms_norm and its weight (issue 17) ---------------------------------------------------------

// Microseconds per (rms_norm, mul by the norm's weight) pair on rows of 2048 (TinyLlama's
// width), T rows, over a chain of 45 pairs (a 22-layer LLaMA's norms); with_mul false: the
// rms_norm nodes alone. The difference bounds what fusing the mul into the norm could save.
double bench_norm_mul(tsr_backend_t be, int64_t T, bool with_mul, int reps) {
    const int64_t E = 2048, n_pairs = 45;
    const size_t row_bytes = (size_t)(E * T) * 4 + TSR_MEM_ALIGN;
    const size_t mem = (2 * n_pairs + 2) * (row_bytes + tsr_tensor_overhead()) + tsr_graph_overhead() + (1 << 16);
    tsr_context * ctx = tsr_init(tsr_init_params{mem, nullptr, false});
    if (!ctx) return 0;
    tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, E, T);
    tsr_tensor * w = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, E);
    fast_fill(x, 41);
    fast_fill(w, 42);
    tsr_tensor * y = x;
    for (int64_t i = 0; i < n_pairs; ++i) {
        y = tsr_rms_norm(ctx, y, 1e-5f);
        if (with_mul) y = tsr_mul(ctx, y, w);
    }
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_build_forward_expand(gf, y);
    tsr_backend_graph_compute(be, gf);  // warm-up
    const double t = best_time(reps, [&] {
        for (int i = 0; i < 20; ++i) tsr_backend_graph_compute(be, gf);
    }) / 20;
    tsr_free(ctx);
    return 1e6 * t / (double)n_pairs;
}

// ---- convolutions (issue 17 part B) -----------------------------------------------------------

// GFLOPS of one convolution node: `useful_flops` (2 per multiply-add of kernel and input
// that lands in the output) over the time of the graph `make` builds from a kernel and an
// input of the given shapes (F32, seeded).
double bench_conv(tsr_backend_t be, const int64_t kne[4], const int64_t ine[4], double useful_flops, int reps,
                  const std::function<tsr_tensor *(tsr_context *, tsr_tensor *, tsr_tensor *)> & make) {
    const size_t kbytes = (size_t)(kne[0] * kne[1] * kne[2] * kne[3]) * 4, ibytes = (size_t)(ine[0] * ine[1] * ine[2] * ine[3]) * 4;
    tsr_context * ctx = tsr_init(tsr_init_params{kbytes + ibytes + 8 * tsr_tensor_overhead() + tsr_graph_overhead() + (1 << 20), nullptr, false});
    if (!ctx) return 0;
    tsr_tensor * k = tsr_new_tensor(ctx, TSR_TYPE_F32, 4, kne);
    tsr_tensor * in = tsr_new_tensor(ctx, TSR_TYPE_F32, 4, ine);
    fast_fill(k, 31);
    fast_fill(in, 32);
    tsr_context * gctx = tsr_init(tsr_init_params{16 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
    tsr_tensor * out = make(gctx, k, in);
    tsr_cgraph * gf = tsr_new_graph(gctx);
    tsr_build_forward_expand(gf, out);
    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_get_default_buffer_type(be));
    double t = 0;
    if (out && tsr_gallocr_alloc_graph(ga, gf)) {
        tsr_backend_graph_reserve(be, gf);
        enum tsr_status st = TSR_STATUS_SUCCESS;
        t = best_time(reps, [&] { st = tsr_backend_graph_compute(be, gf); });
        if (st != TSR_STATUS_SUCCESS) {
            std::fprintf(stderr, "conv bench: %s\n", tsr_last_error());
            t = 0;
        }
    } else {
        std::fprintf(stderr, "conv bench: %s\n", tsr_last_error());
    }
    tsr_gallocr_free(ga);
    tsr_free(gctx);
    tsr_free(ctx);
    return t > 0 ? useful_flops / t / 1e9 : 0;
}

// ---- GPT-2 small forward -------------------------------------------------------------------

// flash_attn_ext alone, as a prompt runs it: T queries of H heads over T keys under a causal
// mask, K and V in F16 (a KV cache's type); ms per node.
double bench_attn(tsr_backend_t be, int64_t T, int64_t H, int64_t hd, int reps) {
    const size_t mem = (size_t)(hd * T * H) * 12 + (size_t)(T * T) * 2 + 16 * tsr_tensor_overhead() + tsr_graph_overhead() + (1 << 20);
    tsr_context * ctx = tsr_init(tsr_init_params{mem, nullptr, false});
    tsr_tensor * q = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, hd, T, H);
    tsr_tensor * k = tsr_new_tensor_3d(ctx, TSR_TYPE_F16, hd, T, H);
    tsr_tensor * v = tsr_new_tensor_3d(ctx, TSR_TYPE_F16, hd, T, H);
    tsr_tensor * mask = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, T, T);
    fast_fill(q, 1);
    fast_fill(k, 2);
    fast_fill(v, 3);
    uint16_t * md = (uint16_t *)mask->data;
    for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) md[i * T + j] = tsr_fp32_to_fp16(j <= i ? 0.0f : -INFINITY);
    tsr_tensor * o = tsr_flash_attn_ext(ctx, q, k, v, mask, 1.0f / std::sqrt((float)hd), 0.0f, 0.0f);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_build_forward_expand(gf, o);
    tsr_backend_graph_reserve(be, gf);
    const double t = best_time(reps, [&] { tsr_backend_graph_compute(be, gf); });
    tsr_free(ctx);
    return t * 1e3;
}

// flash_attn_ext as one decode step runs it: a query per head over n_kv keys of each of L
// layers' KV caches, views as tessera-run makes them (a head's rows a whole cache row apart,
// F16), the layers' caches together well past the L2: the GB/s of K and V read per step, to
// hold against the read bandwidth (at long contexts a decode step reads as many bytes here as
// in its weights).
double bench_attn_decode(tsr_backend_t be, int64_t n_kv, int64_t H, int64_t Hkv, int64_t hd, int64_t L, int reps) {
    const size_t cache_bytes = (size_t)(hd * Hkv * n_kv) * 2;
    const size_t mem = (size_t)L * (2 * cache_bytes + (size_t)(hd * H) * 8 + (size_t)n_kv * 4 + 8 * tsr_tensor_overhead()) + tsr_graph_overhead() + (1 << 20);
    tsr_context * ctx = tsr_init(tsr_init_params{mem, nullptr, false});
    if (!ctx) return 0;
    tsr_cgraph * gf = tsr_new_graph(ctx);
    for (int64_t l = 0; l < L; ++l) {
        tsr_tensor * q = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, hd, 1, H);
        tsr_tensor * kc = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, hd * Hkv, n_kv);
        tsr_tensor * vc = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, hd * Hkv, n_kv);
        tsr_tensor * mask = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, n_kv, 1);
        fast_fill(q, (unsigned)(4 * l + 1));
        fast_fill(kc, (unsigned)(4 * l + 2));
        fast_fill(vc, (unsigned)(4 * l + 3));
        std::memset(mask->data, 0, tsr_nbytes(mask));
        tsr_tensor * k = tsr_view_3d(ctx, kc, hd, n_kv, Hkv, kc->nb[1], (size_t)hd * 2, 0);
        tsr_tensor * v = tsr_view_3d(ctx, vc, hd, n_kv, Hkv, vc->nb[1], (size_t)hd * 2, 0);
        tsr_build_forward_expand(gf, tsr_flash_attn_ext(ctx, q, k, v, mask, 1.0f / std::sqrt((float)hd), 0.0f, 0.0f));
    }
    tsr_backend_graph_reserve(be, gf);
    const double t = best_time(reps, [&] { tsr_backend_graph_compute(be, gf); });
    tsr_free(ctx);
    return t > 0 ? (double)(2 * cache_bytes * (size_t)L) / t / 1e9 : 0;
}

double bench_gpt2(tsr_backend_t be, int n_tokens, int reps) {
    const int64_t D = 768, H = 12, L = 12, F = 3072, V = 50257, NCTX = 1024, T = n_tokens;
    const size_t wbytes = (size_t)(V * D + NCTX * D + L * (4 * D * D + 2 * D * F + 13 * D + 2 * F) + 2 * D) * 4;
    tsr_context * wctx = tsr_init(tsr_init_params{wbytes + 400 * (tsr_tensor_overhead() + 64), nullptr, false});
    if (!wctx) return 0;
    auto W = [&](int64_t a, int64_t b) {
        tsr_tensor * t = b ? tsr_new_tensor_2d(wctx, TSR_TYPE_F32, a, b) : tsr_new_tensor_1d(wctx, TSR_TYPE_F32, a);
        fast_fill(t, (unsigned)(a * 7 + b));
        if (b) {  // small weights keep activations sane
            float * p = (float *)t->data;
            for (int64_t i = 0; i < tsr_nelements(t); ++i) p[i] *= 0.02f;
        }
        return t;
    };
    tsr_tensor * wte = W(D, V);
    tsr_tensor * wpe = W(D, NCTX);
    struct layer { tsr_tensor *ln1g, *ln1b, *wqkv, *bqkv, *wo, *bo, *ln2g, *ln2b, *wup, *bup, *wdn, *bdn; };
    std::vector<layer> ls((size_t)L);
    for (auto & l : ls) {
        l.ln1g = W(D, 0); l.ln1b = W(D, 0); l.wqkv = W(D, 3 * D); l.bqkv = W(3 * D, 0);
        l.wo = W(D, D); l.bo = W(D, 0); l.ln2g = W(D, 0); l.ln2b = W(D, 0);
        l.wup = W(D, F); l.bup = W(F, 0); l.wdn = W(F, D); l.bdn = W(D, 0);
    }
    tsr_tensor * lnfg = W(D, 0);
    tsr_tensor * lnfb = W(D, 0);

    tsr_context * ctx = tsr_init(tsr_init_params{4096 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
    tsr_tensor * tok = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, T);
    tsr_tensor * pos = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, T);
    tsr_tensor * mask = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, T, T);
    tsr_set_input(tok); tsr_set_input(pos); tsr_set_input(mask);
    tsr_tensor * x = tsr_add(ctx, tsr_get_rows(ctx, wte, tok), tsr_get_rows(ctx, wpe, pos));
    for (auto & l : ls) {
        tsr_tensor * h = tsr_add(ctx, tsr_mul(ctx, tsr_norm(ctx, x, 1e-5f), l.ln1g), l.ln1b);
        tsr_tensor * qkv = tsr_add(ctx, tsr_mul_mat(ctx, l.wqkv, h), l.bqkv);  // [3D, T]
        const size_t es = sizeof(float);
        tsr_tensor * q = tsr_view_3d(ctx, qkv, D / H, H, T, (D / H) * es, qkv->nb[1], 0);
        tsr_tensor * k = tsr_view_3d(ctx, qkv, D / H, H, T, (D / H) * es, qkv->nb[1], D * es);
        tsr_tensor * v = tsr_view_3d(ctx, qkv, D / H, H, T, (D / H) * es, qkv->nb[1], 2 * D * es);
        q = tsr_permute(ctx, q, 0, 2, 1, 3);  // [hd, T, H]
        k = tsr_permute(ctx, k, 0, 2, 1, 3);
        v = tsr_permute(ctx, v, 0, 2, 1, 3);
        tsr_tensor * att = tsr_flash_attn_ext(ctx, q, k, v, mask, 1.0f / std::sqrt((float)(D / H)), 0.0f, 0.0f);  // [hd, H, T]
        att = tsr_reshape_2d(ctx, att, D, T);
        x = tsr_add(ctx, x, tsr_add(ctx, tsr_mul_mat(ctx, l.wo, att), l.bo));
        tsr_tensor * h2 = tsr_add(ctx, tsr_mul(ctx, tsr_norm(ctx, x, 1e-5f), l.ln2g), l.ln2b);
        tsr_tensor * u = tsr_gelu(ctx, tsr_add(ctx, tsr_mul_mat(ctx, l.wup, h2), l.bup));
        x = tsr_add(ctx, x, tsr_add(ctx, tsr_mul_mat(ctx, l.wdn, u), l.bdn));
    }
    x = tsr_add(ctx, tsr_mul(ctx, tsr_norm(ctx, x, 1e-5f), lnfg), lnfb);
    tsr_tensor * logits = tsr_mul_mat(ctx, wte, x);
    tsr_set_output(logits);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    if (!tsr_build_forward_expand(gf, logits)) return 0;
    tsr_gallocr_t ga = tsr_gallocr_new(tsr_backend_get_default_buffer_type(be));
    if (!tsr_gallocr_alloc_graph(ga, gf)) { std::fprintf(stderr, "gallocr: %s\n", tsr_last_error()); return 0; }
    std::vector<int32_t> tv((size_t)T), pv((size_t)T);
    std::vector<uint16_t> mv((size_t)(T * T));
    for (int64_t i = 0; i < T; ++i) { tv[(size_t)i] = (int32_t)((i * 977) % V); pv[(size_t)i] = (int32_t)i; }
    for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) mv[(size_t)(i * T + j)] = tsr_fp32_to_fp16(j <= i ? 0.0f : -INFINITY);
    tsr_backend_tensor_set(tok, tv.data(), 0, tv.size() * 4);
    tsr_backend_tensor_set(pos, pv.data(), 0, pv.size() * 4);
    tsr_backend_tensor_set(mask, mv.data(), 0, mv.size() * 2);
    tsr_backend_graph_reserve(be, gf);
    enum tsr_status st = TSR_STATUS_SUCCESS;
    const double t = best_time(reps, [&] { st = tsr_backend_graph_compute(be, gf); });
    if (st != TSR_STATUS_SUCCESS) std::fprintf(stderr, "gpt2: %s\n", tsr_last_error());
    tsr_gallocr_free(ga);
    tsr_free(ctx);
    tsr_free(wctx);
    return t * 1e3;
}

} // namespace

int main(int argc, char ** argv) {
    int n_threads = 2;
    bool quick = false, gpt2_only = false, matvec_only = false, conv_only = false, moe_only = false, norm_only = false, gemm_only = false;
    bool cache_only = false, read_only = false, attn_only = false;
    int matvec_rounds = -1;  /* default: 3, 1 with --quick */
    std::vector<std::string> types;  /* --types: empty, every type */
    std::vector<prefetch_setting> prefetch;
    auto split = [](const char * list) {
        std::vector<std::string> out;
        for (const char * p = list; *p;) {
            const char * e = std::strchr(p, ',');
            out.emplace_back(p, e ? (size_t)(e - p) : std::strlen(p));
            p = e ? e + 1 : p + out.back().size();
        }
        return out;
    };
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--csv")) g_csv = true;
        else if (!std::strcmp(argv[i], "--quick")) quick = true;
        else if (!std::strcmp(argv[i], "--gpt2-only")) gpt2_only = true;
        else if (!std::strcmp(argv[i], "--matvec-only")) matvec_only = true;  /* bandwidth and mat-vec rows */
        else if (!std::strcmp(argv[i], "--conv-only")) conv_only = true;      /* bandwidth, FMA peak and convolution rows */
        else if (!std::strcmp(argv[i], "--moe-only")) moe_only = matvec_only = true;  /* bandwidth and mul_mat_id rows */
        else if (!std::strcmp(argv[i], "--norm-only")) norm_only = true;     /* rms_norm + mul rows */
        else if (!std::strcmp(argv[i], "--matvec-cache-only")) cache_only = true;  /* one thread's in-cache mat-vec rows */
        else if (!std::strcmp(argv[i], "--read-only")) read_only = true;        /* the read bandwidth row alone */
        else if (!std::strcmp(argv[i], "--attn-only")) attn_only = true;        /* the decode attention rows alone */
        else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) n_threads = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) matvec_rounds = std::atoi(argv[++i]);  /* mat-vec rounds */
        else if (!std::strcmp(argv[i], "--gemm-only")) gemm_only = true;      /* bandwidth, FMA peak and mul_mat GEMM rows */
        else if (!std::strcmp(argv[i], "--types") && i + 1 < argc) types = split(argv[++i]);
        else if (!std::strcmp(argv[i], "--prefetch") && i + 1 < argc) {
            for (const std::string & v : split(argv[++i])) {
                prefetch_setting p{v, v == "default", 0};
                unsigned long long a = 0;
                if (!p.is_default && std::sscanf(v.c_str(), "%llu", &a) != 1) {
                    std::fprintf(stderr, "--prefetch: \"%s\" is neither default nor a number of bytes\n", v.c_str());
                    return 2;
                }
                p.ahead = (size_t)a;
                prefetch.push_back(p);
            }
        }
        else { std::fprintf(stderr, "usage: %s [--csv] [--threads N] [--rounds N] [--quick] [--gpt2-only] [--matvec-only] [--conv-only] [--moe-only] [--norm-only] [--gemm-only] [--matvec-cache-only] [--attn-only] [--read-only] [--types a,b,...] [--prefetch A,B,...]\n", argv[0]); return 2; }
    }
    auto named = [&](const std::string & name) { return types.empty() || std::find(types.begin(), types.end(), name) != types.end(); };
    /* the listed types of ts, in their order (all of them without --types) */
    auto wanted = [&](std::initializer_list<tsr_type> ts) {
        std::vector<tsr_type> out;
        for (tsr_type t : ts)
            if (named(tsr_type_name(t)) || named(std::string(tsr_type_name(t)) + "-repack")) out.push_back(t);
        return out;
    };
    std::vector<tsr_type> repack_types;  /* what CPU_REPACK interleaves here (Q5_K / Q3_K / Q2_K: repack_r8.inl) */
    for (tsr_type t : wanted({TSR_TYPE_Q4_0, TSR_TYPE_IQ4_NL, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q3_K, TSR_TYPE_Q2_K})) {
        tsr_context * probe = tsr_init(tsr_init_params{tsr_tensor_overhead(), nullptr, true});
        if (probe && tsr_backend_cpu_repacks(tsr_new_tensor_2d(probe, t, 4096, 8))) repack_types.push_back(t);
        tsr_free(probe);
    }
    auto interleaved = [&](tsr_type t) { return std::find(repack_types.begin(), repack_types.end(), t) != repack_types.end(); };
    g_threads = n_threads;
    tsr_backend_t be = tsr_backend_cpu_init();
    tsr_backend_cpu_set_n_threads(be, n_threads);
    std::fprintf(stderr, "cpu_bench: %d threads, ISA %s (bf16 %d, vnni %d)\n", n_threads, tsr_cpu_isa_name(tsr_cpu_get_isa()),
                 (int)tsr_cpu_has_avx512_bf16(), (int)tsr_cpu_has_avx512_vnni());
    const int reps = quick ? 1 : 3;
    if (matvec_rounds < 0) matvec_rounds = quick ? 1 : 3;
    const size_t gemv_bytes = quick ? (size_t)128 << 20 : (size_t)512 << 20;
    const int64_t M = 4096, K = 4096, N = quick ? 128 : 512;

    if (norm_only) {
        for (int64_t T : {1, 128}) {
            const double both = bench_norm_mul(be, T, true, reps), alone = bench_norm_mul(be, T, false, reps);
            char note[160];
            std::snprintf(note, sizeof note, "rows of 2048 x %lld, chain of 45; rms_norm alone %.2f us: the mul (what fusing could save) %.2f us",
                          (long long)T, alone, both - alone);
            add_row("rms_norm + mul " + std::to_string(T) + " token" + (T > 1 ? "s" : ""), both, "us per pair", "", note);
        }
        goto report;
    }
    if (cache_only) {
        const int cache_reps = quick ? 50 : 500;
        const std::string note = "one thread, ~1 MiB of 4096-wide rows, best of " + std::to_string(cache_reps);
        for (tsr_type t : wanted({TSR_TYPE_F16, TSR_TYPE_BF16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1,
                                  TSR_TYPE_IQ4_NL, TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K})) {
            if (!interleaved(t)) {
                add_row(std::string("mat-vec in cache ") + tsr_type_name(t), bench_gemv_in_cache(t, cache_reps), "GB/s (weights)",
                        tsr_cpu_isa_name(tsr_cpu_get_isa()), note);
                continue;
            }
            /* the two layouts alternating, matvec_rounds each: a loaded machine drifts */
            double plain = 0, repacked = 0;
            for (int round = 0; round < std::max(matvec_rounds, 1); ++round) {
                plain = std::max(plain, bench_gemv_in_cache(t, cache_reps));
                repacked = std::max(repacked, bench_gemv_in_cache(t, cache_reps, true));
            }
            add_row(std::string("mat-vec in cache ") + tsr_type_name(t), plain, "GB/s (weights)", tsr_cpu_isa_name(tsr_cpu_get_isa()), note);
            char ref[96];
            std::snprintf(ref, sizeof ref, "%s, %.2f x the plain layout's", tsr_cpu_isa_name(tsr_cpu_get_isa()), repacked / plain);
            add_row(std::string("mat-vec in cache ") + tsr_type_name(t) + " (CPU_REPACK)", repacked, "GB/s (weights)", ref,
                    note + ", layouts alternating, " + std::to_string(std::max(matvec_rounds, 1)) + " rounds");
        }
        goto report;
    }
    if (read_only) {
        add_row("read bandwidth", read_bandwidth(be, reps), "GB/s", "", "512 MiB of F32 weights read as the mat-vec reads them (read_rows)");
        goto report;
    }
    if (attn_only) goto attn;
    if (gpt2_only) goto gpt2;
    {
    add_row("copy bandwidth (read+write)", copy_bandwidth(n_threads, (size_t)512 << 20), "GB/s", "", "memcpy of 512 MiB");
    double rd = read_bandwidth(be, reps);
    add_row("read bandwidth", rd, "GB/s", "", "512 MiB of F32 weights read as the mat-vec reads them (read_rows)");
    if (wanted({TSR_TYPE_Q4_0}).size() == 1 && !gemm_only && !conv_only && !norm_only) {
        /* the same on 4 KiB pages, runs alternating with the default buffers' */
        small_pages_buft small;
        double rd_huge = 0, rd_small = 0, mv_huge = 0, mv_small = 0;
        for (int round = 0; round < 2; ++round) {
            double r = 0;
            mv_huge = std::max(mv_huge, bench_gemv(be, TSR_TYPE_Q4_0, (size_t)512 << 20, reps, tsr_backend_cpu_buffer_type(), &r));
            rd_huge = std::max(rd_huge, r);
            mv_small = std::max(mv_small, bench_gemv(be, TSR_TYPE_Q4_0, (size_t)512 << 20, reps, small.buft, &r));
            rd_small = std::max(rd_small, r);
        }
        const std::string note = "512+ MiB of Q4_0 4096x4096 weights from malloc (aligned_alloc; transparent huge pages: " + thp_mode() +
                                 "), 2 rounds alternating with the default allocator's";
        add_row("read bandwidth, 4 KiB pages", rd_small, "GB/s", fmt(rd_small / rd_huge, 2) + " x the default allocator's (" + fmt(rd_huge) + ")", note);
        add_row("mat-vec q4_0, 4 KiB pages", mv_small, "GB/s (weights)", fmt(mv_small / mv_huge, 2) + " x the default allocator's (" + fmt(mv_huge) + ")", note);
    }
    add_row("FMA peak", fma_peak(n_threads), "GFLOPS", "", tsr_cpu_isa_supported(TSR_CPU_ISA_AVX512) ? "zmm FMA, 12 chains" : "ymm FMA");

    blas ob(n_threads);
    double blas_gemm = 0;
    if (ob.ok() && !matvec_only && !conv_only && !wanted({TSR_TYPE_F32}).empty()) {
        std::vector<float> A((size_t)(M * K)), B((size_t)(K * N)), C((size_t)(M * N));
        for (size_t i = 0; i < A.size(); ++i) A[i] = (float)((i * 7) % 13) * 0.01f;
        for (size_t i = 0; i < B.size(); ++i) B[i] = (float)((i * 3) % 11) * 0.01f;
        // C[N x M] = B[N x K] * A^T
        const double t = best_time(reps, [&] {
            ob.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)M, (int)K, 1.0f, B.data(), (int)K, A.data(), (int)K, 0.0f, C.data(), (int)M);
        });
        blas_gemm = 2.0 * M * N * K / t / 1e9;
    }
    char shape[64];
    std::snprintf(shape, sizeof shape, "M=%lld K=%lld N=%lld", (long long)M, (long long)K, (long long)N);
    const std::vector<tsr_type> bench_types = wanted({TSR_TYPE_F32,  TSR_TYPE_F16,  TSR_TYPE_BF16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0,
                                                      TSR_TYPE_Q4_K, TSR_TYPE_Q6_K, TSR_TYPE_Q5_K, TSR_TYPE_Q3_K, TSR_TYPE_Q2_K,
                                                      TSR_TYPE_IQ4_NL, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1});
    /* on the AMX path, each GEMM the tiles run is timed again on the AVX-512 path right after
     * (the reference column): the two side by side in one run */
    const bool amx = tsr_cpu_get_isa() == TSR_CPU_ISA_AMX;
    const auto on_avx512 = [&](double (*bench)(tsr_backend_t, tsr_type, int64_t, int64_t, int64_t, int), tsr_type t) {
        tsr_cpu_set_isa(TSR_CPU_ISA_AVX512);
        const double g = bench(be, t, M, K, N, reps);
        tsr_cpu_set_isa(TSR_CPU_ISA_AMX);
        return "avx512 path " + fmt(g);
    };
    for (tsr_type t : bench_types) {
        if (matvec_only || conv_only) break;
        const double g = bench_gemm(be, t, M, K, N, reps);
        std::string ref = t == TSR_TYPE_F32 && ob.ok() ? "OpenBLAS sgemm " + fmt(blas_gemm) : "";
        if (amx && t != TSR_TYPE_F32 && t != TSR_TYPE_F16) ref = on_avx512(bench_gemm, t);
        add_row(std::string("mul_mat ") + tsr_type_name(t), g, "GFLOPS", ref, shape);
    }
    for (tsr_type t : repack_types) {
        if (matvec_only || conv_only) continue;
        const double g = bench_gemm_repack(be, t, M, K, N, reps);
        add_row(std::string("mul_mat ") + tsr_type_name(t) + " (CPU_REPACK)", g, "GFLOPS", amx ? on_avx512(bench_gemm_repack, t) : "", shape);
    }
    /* a short prompt (16 tokens): the GEMM from 6 columns (Q4_K..Q6_K from 10, Q3_K from 16),
     * but Q2_K's dot kernels below 64 (gemm_min_cols: whichever measured faster) */
    for (tsr_type t : bench_types) {
        if (matvec_only || conv_only || quick || t == TSR_TYPE_F32) continue;
        add_row(std::string("mul_mat ") + tsr_type_name(t) + ", 16 columns", bench_gemm(be, t, M, K, 16, reps), "GFLOPS", "", "M=4096 K=4096 N=16");
    }
    double blas_gemv = 0;
    if (ob.ok() && !conv_only && !moe_only && !gemm_only && named("f32")) {
        const int nmat = (int)(gemv_bytes / ((size_t)M * K * 4));
        std::vector<std::vector<float>> mats((size_t)nmat, std::vector<float>((size_t)(M * K), 0.5f));
        std::vector<float> xv((size_t)K, 1.0f), yv((size_t)M);
        const double t = best_time(reps, [&] {
            for (auto & m : mats) ob.sgemv(CblasRowMajor, CblasNoTrans, (int)M, (int)K, 1.0f, m.data(), (int)K, xv.data(), 1, 0.0f, yv.data(), 1);
        });
        blas_gemv = (double)nmat * M * K * 4 / t / 1e9;
    }
    if (!conv_only && !moe_only && !gemm_only) {
        /* a shared machine's bandwidth drifts: each mat-vec's runs alternate with reads of its
         * own weights (bench_gemv), several rounds, and each is compared with the best of its
         * own reads: the same buffer, pages, thread split and number of samples, the same
         * statistic. The best read of all the types (rd) is the maximum of over 14 times as many
         * samples as any one mat-vec, so on a drifting machine it sits above what the same
         * memory gave that mat-vec's runs: it is shown next to the fair ratio, not instead. The
         * paired ratios (each run against the read right after it) show the spread that drift
         * leaves between runs; their median is the figure to compare kernels by on such a host. */
        const size_t ntypes = bench_types.size(), nrepack = repack_types.size();
        const size_t nset = std::max<size_t>(1, prefetch.size());
        const std::vector<prefetch_setting> * settings = prefetch.empty() ? nullptr : &prefetch;
        /* [type][setting]: the best of all rounds, and the lowest round's best (the spread) */
        std::vector<std::vector<double>> best_gemv(ntypes, std::vector<double>(nset, 0.0)), low_gemv(ntypes, std::vector<double>(nset, 1e30));
        std::vector<std::vector<double>> best_repack(nrepack, std::vector<double>(nset, 0.0)), low_repack(nrepack, std::vector<double>(nset, 1e30));
        std::vector<double> own_read(ntypes, 0.0), repack_read(nrepack, 0.0), got;
        /* [type][setting]: every run's mat-vec against the read right after it (bench_gemv) */
        std::vector<std::vector<std::vector<double>>> pairs_gemv(ntypes, std::vector<std::vector<double>>(nset)),
            pairs_repack(nrepack, std::vector<std::vector<double>>(nset));
        std::vector<std::vector<double>> pr;
        auto keep_pairs = [&](std::vector<std::vector<double>> & all) {
            for (size_t v = 0; v < nset && v < pr.size(); ++v) all[v].insert(all[v].end(), pr[v].begin(), pr[v].end());
        };
        /* a run's results per setting: bench_gemv returns one where a type has no setting
         * (F32, or none for its layout; stderr says so), then every setting's row shows it */
        auto keep = [&](std::vector<double> & best, std::vector<double> & low) {
            got.resize(nset, got[0]);
            pr.resize(nset, pr[0]);
            for (size_t v = 0; v < nset; ++v) {
                best[v] = std::max(best[v], got[v]);
                low[v] = std::min(low[v], got[v]);
            }
        };
        for (int round = 0; round < matvec_rounds; ++round) {
            for (size_t i = 0; i < ntypes; ++i) {
                double r = 0;
                bench_gemv(be, bench_types[i], gemv_bytes, reps, tsr_backend_cpu_buffer_type(), &r,
                           bench_types[i] == TSR_TYPE_F32 ? nullptr : settings, &got, &pr);  /* F32 has no software prefetch */
                keep(best_gemv[i], low_gemv[i]);
                keep_pairs(pairs_gemv[i]);
                own_read[i] = std::max(own_read[i], r);
                rd = std::max(rd, r);
            }
            for (size_t i = 0; i < nrepack; ++i) {
                double r = 0;
                bench_gemv(be, repack_types[i], gemv_bytes, reps, tsr_backend_cpu_repack_buffer_type(), &r, settings, &got, &pr);
                keep(best_repack[i], low_repack[i]);
                keep_pairs(pairs_repack[i]);
                repack_read[i] = std::max(repack_read[i], r);
            }
        }
        if (matvec_rounds > 0)
            add_row("read bandwidth (best of the mat-vec rounds)", rd, "GB/s", "",
                    "every type's weights read as its mat-vec reads them, runs alternating, " + std::to_string(matvec_rounds) + " rounds");
        auto ratios = [&](double gbs, double own, std::vector<double> paired) {
            char ref[160];
            if (own > 0) std::snprintf(ref, sizeof ref, "%.2f x its weights' read (%.1f); %.2f x the best read", gbs / own, own, gbs / rd);
            else std::snprintf(ref, sizeof ref, "no read of its weights; %.2f x the best read", gbs / rd);
            std::string out = ref;
            if (!paired.empty()) {
                std::sort(paired.begin(), paired.end());
                const size_t n = paired.size();
                std::snprintf(ref, sizeof ref, "; paired runs %.2f-%.2f, median %.2f (%zu)", paired.front(), paired.back(),
                              n % 2 ? paired[n / 2] : 0.5 * (paired[n / 2 - 1] + paired[n / 2]), n);
                out += ref;
            }
            return out;
        };
        const std::string gemv_note = std::to_string(gemv_bytes >> 20) + "+ MiB of 4096x4096 weights, best of " + std::to_string(matvec_rounds) +
                                      " rounds of " + std::to_string(reps) + ", each run followed by a read of the same weights";
        auto add_rows = [&](const std::string & name, const std::vector<double> & best, const std::vector<double> & low, double own,
                            const std::vector<std::vector<double>> & paired, const std::string & extra, const std::string & note) {
            for (size_t v = 0; v < nset; ++v) {
                std::string ref = ratios(best[v], own, paired[v]) + extra;
                if (settings) ref += "; rounds' bests " + fmt(low[v]) + "-" + fmt(best[v]);
                add_row(name + (settings ? " prefetch " + prefetch[v].label : ""), best[v], "GB/s (weights)", ref,
                        settings ? note + ", each run timing every prefetch setting in turn" : note);
            }
        };
        for (size_t i = 0; i < ntypes && matvec_rounds > 0; ++i) {
            const tsr_type t = bench_types[i];
            add_rows(std::string("mat-vec ") + tsr_type_name(t), best_gemv[i], low_gemv[i], own_read[i], pairs_gemv[i],
                     t == TSR_TYPE_F32 && ob.ok() && blas_gemv > 0 ? ", OpenBLAS sgemv " + fmt(blas_gemv) : "", gemv_note);
        }
        /* the backend runs no other op on interleaved weights: a CPU_REPACK mat-vec's runs
         * alternate with reads of file-layout twins of its matrices (bench_gemv) */
        for (size_t i = 0; i < nrepack && matvec_rounds > 0; ++i) {
            add_rows(std::string("mat-vec ") + tsr_type_name(repack_types[i]) + " (CPU_REPACK)", best_repack[i], low_repack[i], repack_read[i],
                     pairs_repack[i], "", gemv_note + " (the read: of file-layout twins, as chunked)");
        }
    }
    for (tsr_type t : bench_types) {
        if (conv_only || matvec_only || gemm_only || t == TSR_TYPE_F32) continue;
        add_row(std::string("quantize ") + tsr_type_name(t), bench_quantize(t, quick ? 5 : 50), "MB/s (F32 in)", "",
                "tsr_quantize_chunk, 4 rows of 4096, one thread");
    }
    /* issue 17 part B: Q4_K (Q4_K_M files) and Q3_K too. CPU_REPACK keeps 3D expert tensors
     * in the file's layout but for Q2_K / Q3_K's word layouts (AVX-512 VNNI; Q3_K with GFNI
     * and VBMI): the plain rows time the kernels MoE files of the other types decode through */
    struct moe_row { tsr_type t; bool repack; };
    for (moe_row r : {moe_row{TSR_TYPE_Q4_0, false}, moe_row{TSR_TYPE_Q8_0, false}, moe_row{TSR_TYPE_Q4_K, false}, moe_row{TSR_TYPE_Q3_K, false},
                      moe_row{TSR_TYPE_Q3_K, true}, moe_row{TSR_TYPE_Q2_K, true}}) {
        if (conv_only || gemm_only || !named("moe")) break;
        tsr_backend_buffer_type_t buft = r.repack ? tsr_backend_cpu_repack_buffer_type() : tsr_backend_cpu_buffer_type();
        const std::string which = std::string(tsr_type_name(r.t)) + (r.repack ? " (CPU_REPACK)" : "");
        double total_mib = 0;
        const double g = bench_moe(be, r.t, 1, reps + 2, buft, &total_mib);
        char note[160];
        std::snprintf(note, sizeof note, "gate, up, down of 8 experts 4096x14336 (%.0f MiB), 2 used; %.2f x read bandwidth", total_mib, g / rd);
        add_row("mul_mat_id decode " + which, g, "GB/s (used experts)", "", note);
        if (matvec_only && !moe_only) continue;
        const double f = bench_moe(be, r.t, 128, reps, buft, &total_mib);
        add_row("mul_mat_id prompt " + which, f, "GFLOPS", "", "the same experts, 128 tokens (32 pairs an expert: the GEMM but for Q2_K)");
    }
    if (!matvec_only && !gemm_only) {
        struct conv_row {
            const char * name, * shape;
            int64_t k[4], in[4];
            double flops;
            double bytes;   /* input read + output written once: the DRAM bound of a memory-bound row; 0: compute-bound */
            std::function<tsr_tensor *(tsr_context *, tsr_tensor *, tsr_tensor *)> make;
        };
        const conv_row convs[] = {
            {"conv_2d 3x3", "64x64x64 -> 64 channels, pad 1", {3, 3, 64, 64}, {64, 64, 64, 1}, 2.0 * 64 * 64 * 64 * 64 * 9, 0,
             [](tsr_context * c, tsr_tensor * k, tsr_tensor * x) { return tsr_conv_2d(c, k, x, 1, 1, 1, 1, 1, 1); }},
            {"conv_1d k3", "L 750, 384 -> 384 channels, pad 1 (Whisper-style)", {3, 384, 384, 1}, {750, 384, 1, 1}, 2.0 * 750 * 384 * 384 * 3, 0,
             [](tsr_context * c, tsr_tensor * k, tsr_tensor * x) { return tsr_conv_1d(c, k, x, 1, 1, 1); }},
            {"conv_transpose_1d k4 s2", "L 512, 256 -> 256 channels", {4, 256, 256, 1}, {512, 256, 1, 1}, 2.0 * 512 * 256 * 256 * 4, 0,
             [](tsr_context * c, tsr_tensor * k, tsr_tensor * x) { return tsr_conv_transpose_1d(c, k, x, 2, 0, 1); }},
            {"conv_transpose_2d_p0 2x2 s2", "64x64x64 -> 64 channels (UNet upsampling)", {2, 2, 64, 64}, {64, 64, 64, 1},
             2.0 * 64 * 64 * 64 * 64 * 4, 0, [](tsr_context * c, tsr_tensor * k, tsr_tensor * x) { return tsr_conv_transpose_2d_p0(c, k, x, 2); }},
            {"conv_2d_dw 3x3", "64x64, 256 channels, pad 1", {3, 3, 1, 256}, {64, 64, 256, 1}, 2.0 * 64 * 64 * 256 * 9, 2.0 * 64 * 64 * 256 * 4,
             [](tsr_context * c, tsr_tensor * k, tsr_tensor * x) { return tsr_conv_2d_dw_direct(c, k, x, 1, 1, 1, 1, 1, 1); }},
        };
        double conv2d = 0;
        for (const conv_row & r : convs) {
            const double g = bench_conv(be, r.k, r.in, r.flops, reps + 1, r.make);
            if (conv2d == 0) conv2d = g;
            char ref[64];
            std::snprintf(ref, sizeof ref, "%.2f x conv_2d", conv2d > 0 ? g / conv2d : 0.0);
            std::string note = r.shape;
            /* a node whose input and output do not fit in cache runs at most at its FLOP per byte x the read bandwidth */
            if (r.bytes > 0) note += "; roofline " + fmt(r.flops / (r.bytes / (rd * 1e9)) / 1e9) + " GFLOPS at the read bandwidth";
            add_row(r.name, g, "GFLOPS (useful)", ref, note);
        }
    }
    }
gpt2:
    if (!matvec_only && !conv_only && !gemm_only) {
    const double ms = bench_gpt2(be, 128, quick ? 1 : 3);
    add_row("GPT-2 small forward, 128 tokens", ms, "ms", "", "F32 weights, flash_attn_ext, logits for all tokens");
    add_row("flash_attn_ext prompt, 128 tokens", bench_attn(be, 128, 12, 64, quick ? 2 : 10), "ms", "",
            "12 heads of 64 (GPT-2 small), causal mask, F16 K and V");
    add_row("flash_attn_ext prompt, 512 tokens", bench_attn(be, 512, 32, 64, quick ? 1 : 5), "ms", "",
            "32 heads of 64 (1.1B LLaMA), causal mask, F16 K and V");
    }
attn:
    if (attn_only || (!matvec_only && !conv_only && !gemm_only)) {
        /* decode attention from DRAM: GB/s of K and V against the read bandwidth */
        const double rd = read_bandwidth(be, 1);
        struct shape { const char * name; int64_t n_kv, H, Hkv, hd, L; };
        for (const shape & sh : {shape{"GPT-2 small, 1024 keys, 12 layers", 1024, 12, 12, 64, 12},
                                 shape{"LLaMA-2 7B (no GQA), 2048 keys, 4 layers", 2048, 32, 32, 128, 4},
                                 shape{"1.1B LLaMA (GQA 32/4), 2048 keys, 22 layers", 2048, 32, 4, 64, 22}}) {
            const double g = bench_attn_decode(be, sh.n_kv, sh.H, sh.Hkv, sh.hd, sh.L, quick ? 3 : 10);
            add_row(std::string("flash_attn_ext decode, ") + sh.name, g, "GB/s (K and V)", fmt(g / rd, 2) + " x the read (" + fmt(rd) + ")",
                    "a query per head, F16 KV-cache views; best of " + std::to_string(quick ? 3 : 10));
        }
    }
report:
    tsr_backend_free(be);

    if (g_csv) {
        std::printf("benchmark,value,unit,reference,note\n");
        for (const row & r : g_rows) std::printf("%s,%s,%s,%s,%s\n", r.name.c_str(), r.value.c_str(), r.unit.c_str(), r.ref.c_str(), r.note.c_str());
    } else {
        std::printf("| benchmark (%d threads) | value | unit | reference | note |\n|---|---:|---|---|---|\n", n_threads);
        for (const row & r : g_rows)
            std::printf("| %s | %s | %s | %s | %s |\n", r.name.c_str(), r.value.c_str(), r.unit.c_str(), r.ref.c_str(), r.note.c_str());
    }
    return 0;
}
