// matvec_kernel_bench (CPU backend, white box): the K-quant 4-row mat-vec kernels alone, one
// thread, on weights small enough to stay in cache, in GB/s of weights read. A kernel that
// must keep up with one core's share of DRAM needs headroom here: DRAM-bound figures
// (cpu_bench --matvec-only) move with the machine's load, in-cache ones far less, so this is
// the figure to compare two builds by (run them alternating) on a shared machine.
//
//   matvec_kernel_bench [--kib N] [--k K] [--reps N] [--rounds N] [--csv] [TYPE...]
//
// TYPE: q2_K q3_K q4_K q5_K q6_K (default all). --kib: weight bytes per type (default 768:
// inside a 1 MiB L2), rows of K elements (default 4096), a multiple of 4 rows walked as
// mul_mat walks them (4 rows q apart per call). Each round times --reps passes over the
// weights (default 200); the best round counts. The kernel table is that of the ISA in use
// (TSR_CPU_ISA selects another). Like kernels_test.cpp, this translation unit compiles the
// implementation itself: the kernel tables are internal.
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera-cpu.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct options {
    int64_t kib = 768, k = 4096;
    int reps = 200, rounds = 7;
    bool csv = false;
    std::vector<tsr_type> types;
};

// Random weight bytes with small finite fp16 factors: the kernels' speed does not depend
// on the values, but NaN or infinite factors could take slow paths.
std::vector<uint8_t> random_rows(tsr_type t, int64_t rows, int64_t k, std::mt19937 & rng) {
    const size_t bs = tsr_type_size(t), row = tsr_row_size(t, k);
    std::vector<uint8_t> w(row * (size_t)rows);
    for (auto & v : w) v = (uint8_t)(rng() & 0xff);
    const size_t d_off = t == TSR_TYPE_Q2_K ? 80 : t == TSR_TYPE_Q3_K ? 108 : t == TSR_TYPE_Q6_K ? 208 : 0;
    const int nd = (t == TSR_TYPE_Q2_K || t == TSR_TYPE_Q4_K || t == TSR_TYPE_Q5_K) ? 2 : 1;
    for (size_t b = 0; b < w.size() / bs; ++b)
        for (int j = 0; j < nd; ++j) {
            const tsr_fp16_t h = tsr_fp32_to_fp16(std::uniform_real_distribution<float>(-0.01f, 0.01f)(rng));
            std::memcpy(w.data() + b * bs + d_off + 2 * (size_t)j, &h, 2);
        }
    return w;
}

// Best GB/s of weights over the rounds, and a checksum of the outputs (so none is dead code).
double bench_type(const options & o, tsr_type t, double & checksum) {
    const tcpu::kernels * K = tcpu::get_kernels();
    const auto dot4 = K->dot4_q8k[tcpu::q8k_slot(t)];
    if (!dot4) return 0.0;
    const size_t row = tsr_row_size(t, o.k);
    const int64_t rows = std::max<int64_t>(4, (o.kib * 1024 / (int64_t)row) / 4 * 4), q = rows / 4;
    std::mt19937 rng(7);
    const std::vector<uint8_t> w = random_rows(t, rows, o.k, rng);
    std::vector<float> yf((size_t)o.k), out((size_t)rows);
    for (float & v : yf) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    std::vector<tsr_block_q8_K> y((size_t)(o.k / TSR_QK_K));
    tsr_from_float_row(TSR_TYPE_Q8_K, yf.data(), y.data(), o.k);
    double best = 0.0;
    for (int round = 0; round < o.rounds; ++round) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int rep = 0; rep < o.reps; ++rep)
            for (int64_t i = 0; i < q; ++i) {
                float o4[4];
                dot4(o.k, (const char *)w.data() + (size_t)i * row, (size_t)q * row, y.data(), o4);
                for (int r = 0; r < 4; ++r) out[(size_t)(i + r * q)] = o4[r];
            }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::max(best, (double)w.size() * o.reps / s * 1e-9);
    }
    for (float v : out) checksum += v;
    return best;
}

bool parse(int argc, char ** argv, options & o) {
    for (int i = 1; i < argc; ++i) {
        auto num = [&](int64_t & v) { return i + 1 < argc && (v = std::atoll(argv[++i])) > 0; };
        int64_t v = 0;
        if (!std::strcmp(argv[i], "--csv")) o.csv = true;
        else if (!std::strcmp(argv[i], "--kib")) { if (!num(o.kib)) return false; }
        else if (!std::strcmp(argv[i], "--k")) { if (!num(o.k) || o.k % TSR_QK_K) return false; }
        else if (!std::strcmp(argv[i], "--reps")) { if (!num(v)) return false; o.reps = (int)v; }
        else if (!std::strcmp(argv[i], "--rounds")) { if (!num(v)) return false; o.rounds = (int)v; }
        else {
            tsr_type t = TSR_TYPE_COUNT;
            for (tsr_type c : {TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K})
                if (!std::strcmp(argv[i], tsr_type_name(c))) t = c;
            if (t == TSR_TYPE_COUNT) return false;
            o.types.push_back(t);
        }
    }
    return true;
}

} // namespace

int main(int argc, char ** argv) {
    options o;
    if (!parse(argc, argv, o)) {
        std::fprintf(stderr, "usage: %s [--kib N] [--k K (multiple of 256)] [--reps N] [--rounds N] [--csv] [q2_K q3_K q4_K q5_K q6_K]\n", argv[0]);
        return 2;
    }
    if (o.types.empty()) o.types = {TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K};
    const char * isa = tsr_cpu_isa_name(tsr_cpu_get_isa());
    if (o.csv) std::printf("type,isa,kib,k,gbps\n");
    else std::printf("| type | ISA | weights | GB/s, 1 thread (best of %d x %d passes) |\n|---|---|---|---|\n", o.rounds, o.reps);
    double checksum = 0.0;
    for (tsr_type t : o.types) {
        const double gbps = bench_type(o, t, checksum);
        if (o.csv) std::printf("%s,%s,%lld,%lld,%.2f\n", tsr_type_name(t), isa, (long long)o.kib, (long long)o.k, gbps);
        else std::printf("| %s | %s | %lld KiB, K %lld | %.2f |\n", tsr_type_name(t), isa, (long long)o.kib, (long long)o.k, gbps);
    }
    std::fprintf(stderr, "checksum %g\n", checksum);
    return 0;
}
