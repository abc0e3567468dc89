// The one translation unit of test_cpu that compiles tessera's implementation, so the tests
// of internal kernels (kernel table entries called directly) live here too.
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

namespace {

std::vector<tsr_cpu_isa> kernel_isas() {
    std::vector<tsr_cpu_isa> v;
    for (tsr_cpu_isa i : {TSR_CPU_ISA_SCALAR, TSR_CPU_ISA_AVX2, TSR_CPU_ISA_AVX512, TSR_CPU_ISA_NEON})
        if (tsr_cpu_isa_supported(i)) v.push_back(i);
    return v;
}

// The kernel table of one ISA path (the one in use is restored on scope exit).
struct kernels_of {
    tsr_cpu_isa saved = tsr_cpu_get_isa();
    const tcpu::kernels * K;
    explicit kernels_of(tsr_cpu_isa isa) {
        REQUIRE(tsr_cpu_set_isa(isa));
        K = tcpu::get_kernels();
        REQUIRE(K->isa == isa);
    }
    ~kernels_of() { tsr_cpu_set_isa(saved); }
};

// A yq8 row of nb blocks with its side arrays, from the scalar quantizer.
struct yrow {
    std::vector<tcpu::yq8> buf;
    yrow(const std::vector<float> & x) : buf(tcpu::yq8_row_bytes((int64_t)x.size()) / sizeof(tcpu::yq8) + 1) {
        tcpu::quantize_y_scalar(x.data(), buf.data(), (int64_t)x.size());
        tcpu::y_side(buf.data(), (int64_t)x.size() / 32);
    }
};

// sum over blocks of d_x * d_y * (exact integer block dot), in double
template <typename B>
double ref_block_dot(const B * x, const tcpu::yq8 * y, int64_t nb, double & mag) {
    double s = 0;
    for (int64_t b = 0; b < nb; ++b) {
        int64_t acc = 0;
        for (int j = 0; j < 32; ++j) {
            int xq;
            if constexpr (std::is_same<B, tsr_block_q8_0>::value) xq = x[b].qs[j];
            else xq = (j < 16 ? (x[b].qs[j] & 0x0F) : (x[b].qs[j - 16] >> 4)) - 8;
            acc += (int64_t)xq * y[b].qs[j];
        }
        const double t = (double)tcpu::h2f(x[b].d) * (double)y[b].d * (double)acc;
        s += t;
        mag += std::fabs(t);
    }
    return s;
}

// dot4 of one quantized type against the exact block sums: nb = 1..13 (0..3 blocks past the
// last group of 4, and rows shorter than one group), rows adjacent, far apart with a
// padded stride, and lda = 0 (one row four times, as mm_range passes its leftover rows).
template <typename B>
void check_dot4(int slot, tsr_type type, std::mt19937 & rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::uniform_int_distribution<int> q(-128, 127);
    for (tsr_cpu_isa isa : kernel_isas()) {
        kernels_of k(isa);
        if (!k.K->dot4[slot]) continue;
        for (int64_t nb = 1; nb <= 13; ++nb) {
            const int64_t n = nb * 32;
            for (int extreme = 0; extreme < 2; ++extreme) {
                const size_t row = (size_t)nb * sizeof(B);
                const size_t stride = row + 3 * sizeof(B);
                std::vector<B> xs(stride / sizeof(B) * 4);
                // extremes: Q8_0 bytes -128 / 127, Q4_0 nibbles 0 / 15, against y of +-127
                const uint8_t hi = type == TSR_TYPE_Q8_0 ? 0x7F : 0xFF, lo = type == TSR_TYPE_Q8_0 ? 0x80 : 0x00;
                for (B & blk : xs) {
                    blk.d = tcpu::f2h(0.01f + 0.1f * std::fabs(u(rng)));
                    uint8_t bytes[sizeof(blk.qs)];
                    for (uint8_t & c : bytes) c = (uint8_t)(extreme ? ((rng() & 1) ? hi : lo) : q(rng));
                    std::memcpy(blk.qs, bytes, sizeof(bytes));
                }
                std::vector<float> yf((size_t)n);
                for (float & v : yf) v = extreme ? ((rng() & 1) ? 1.0f : -1.0f) : u(rng);
                const yrow y(yf);
                const char * x = (const char *)xs.data();
                for (size_t lda : {(size_t)0, row, stride}) {
                    float out[4] = {NAN, NAN, NAN, NAN};
                    k.K->dot4[slot](n, x, lda, y.buf.data(), out);
                    for (int r = 0; r < 4; ++r) {
                        double mag = 0;
                        const double ref = ref_block_dot((const B *)(x + r * lda), y.buf.data(), nb, mag);
                        INFO(tsr_type_name(type) << " isa " << tsr_cpu_isa_name(isa) << " nb " << nb << " lda " << lda
                                                 << " row " << r << " extreme " << extreme);
                        CHECK(std::fabs(out[r] - ref) <= 4e-6 * mag + 1e-30);
                    }
                }
            }
        }
    }
}

} // namespace

TEST_CASE("dot4 Q8_0/Q4_0 on every ISA: exact block sums, leftover blocks, lda 0 and padded", "[cpu][mul_mat][kernels]") {
    std::mt19937 rng(11);
    check_dot4<tsr_block_q8_0>(tcpu::SLOT_Q8_0, TSR_TYPE_Q8_0, rng);
    check_dot4<tsr_block_q4_0>(tcpu::SLOT_Q4_0, TSR_TYPE_Q4_0, rng);
}
