// White-box tests of the CPU kernels (kernel table entries called directly). The kernels
// live in an anonymous namespace, so this translation unit compiles tessera's
// implementation itself: it is test_cpu's implementation TU (from the single header when
// the build runs the tests against it).
#define TSR_IMPLEMENTATION
#ifdef TSR_IMPL_FROM_SINGLE_HEADER
#include "tessera.h"
#else
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"
#endif
#include "cpu_test_util.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

namespace {

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

// A yq8 row of nb blocks with its side arrays for weights of type wt, from the scalar quantizer.
struct yrow {
    std::vector<tcpu::yq8> buf;
    yrow(const std::vector<float> & x, tsr_type wt) : buf(tcpu::yq8_row_bytes((int64_t)x.size()) / sizeof(tcpu::yq8) + 1) {
        tcpu::quantize_y_scalar(x.data(), buf.data(), (int64_t)x.size());
        tcpu::y_side(buf.data(), (int64_t)x.size() / 32, wt);
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
    for (tsr_cpu_isa isa : cput::isas()) {
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
                const yrow y(yf, type);
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

// quantize_y of every SIMD path writes quantize_y_scalar's bytes (d, sum and every q): random
// rows of several scales and edge blocks: all zeros, one huge value, products exactly at
// .5 (ties to even both ways), NaN and inf present, denormal maxima (1/d overflows to inf),
// -0. NaN and inf must never give a -128 byte: the integer kernels rely on [-127, 127].
TEST_CASE("quantize_y: every SIMD kernel writes the scalar kernel's bytes", "[cpu][mul_mat][kernels]") {
    std::vector<std::vector<float>> blocks;
    std::mt19937 rng(5);
    for (float scale : {1e-3f, 1.0f, 3e4f, 1e30f}) {
        std::uniform_real_distribution<float> u(-scale, scale);
        for (int i = 0; i < 64; ++i) {
            std::vector<float> b(32);
            for (float & v : b) v = u(rng);
            blocks.push_back(b);
        }
    }
    const float inf = std::numeric_limits<float>::infinity(), qnan = std::numeric_limits<float>::quiet_NaN();
    const float snan = std::numeric_limits<float>::signaling_NaN(), den = std::numeric_limits<float>::denorm_min();
    blocks.push_back(std::vector<float>(32, 0.0f));
    blocks.push_back(std::vector<float>(32, -0.0f));
    {
        std::vector<float> b(32, 1.0f);
        b[7] = 3e38f;  // one huge value: the rest quantize to 0
        blocks.push_back(b);
        b[7] = -3e38f;
        blocks.push_back(b);
    }
    {
        // amax 127 makes d = 1 and id = 1: every product is the input, k + 0.5 ties round to even
        std::vector<float> b(32);
        for (int j = 0; j < 32; ++j) b[j] = (float)(j - 16) + 0.5f;
        b[0] = 127.0f;
        blocks.push_back(b);
        for (float & v : b) v = -v;
        blocks.push_back(b);
        for (int j = 1; j < 32; ++j) b[j] = 126.5f - (float)(j % 3);  // 126.5, 125.5, 124.5
        blocks.push_back(b);
    }
    for (float special : {qnan, -qnan, snan, inf, -inf}) {
        std::vector<float> b(32);
        std::uniform_real_distribution<float> u(-2.0f, 2.0f);
        for (float & v : b) v = u(rng);
        b[3] = special;
        blocks.push_back(b);
        b[30] = qnan;
        b[31] = -inf;
        blocks.push_back(b);
        blocks.push_back(std::vector<float>(32, special));
    }
    for (float amax : {den, 5 * den, 200 * den, 1e-38f, 1e-37f, std::numeric_limits<float>::min()}) {
        std::vector<float> b(32);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        for (float & v : b) v = u(rng) * amax;
        b[9] = amax;
        blocks.push_back(b);
    }
    std::vector<float> x;
    for (const auto & b : blocks) x.insert(x.end(), b.begin(), b.end());
    const int64_t n = (int64_t)x.size(), nb = n / 32;
    std::vector<tcpu::yq8> ref((size_t)nb), got((size_t)nb);
    tcpu::quantize_y_scalar(x.data(), ref.data(), n);
    bool ran = false;
    for (tsr_cpu_isa isa : cput::isas()) {
        if (isa == TSR_CPU_ISA_SCALAR) continue;
        kernels_of k(isa);
        ran = true;
        INFO("isa " << tsr_cpu_isa_name(isa));
        std::memset(got.data(), 0x5A, got.size() * sizeof(tcpu::yq8));
        k.K->quantize_y(x.data(), got.data(), n);
        for (int64_t b = 0; b < nb; ++b) {
            INFO("block " << b << " x[0] " << x[(size_t)b * 32] << " d " << ref[(size_t)b].d);
            CHECK(std::memcmp(&got[(size_t)b], &ref[(size_t)b], sizeof(tcpu::yq8)) == 0);
        }
        // a row of one block, and the row in pieces (no state between blocks)
        std::memset(got.data(), 0x5A, got.size() * sizeof(tcpu::yq8));
        for (int64_t b = 0; b < nb; ++b) k.K->quantize_y(x.data() + b * 32, got.data() + b, 32);
        CHECK(std::memcmp(got.data(), ref.data(), got.size() * sizeof(tcpu::yq8)) == 0);
    }
    if (!ran) WARN("no SIMD path on this CPU: quantize_y byte test skipped");
}

TEST_CASE("quantize_q8k: every SIMD kernel writes the scalar kernel's bytes", "[cpu][mul_mat][kernels][quant]") {
    std::mt19937 rng(11);
    std::vector<float> x;
    for (float scale : {1e-3f, 1.0f, 3e4f, 1e30f}) {
        std::uniform_real_distribution<float> u(-scale, scale);
        for (int i = 0; i < 4 * TSR_QK_K; ++i) x.push_back(u(rng));
    }
    x.insert(x.end(), TSR_QK_K, 0.0f);  // a zero block
    for (int j = 0; j < TSR_QK_K; ++j) x.push_back((float)(j % 17) - 8.5f);  // k + 0.5 values
    x.back() = -127.0f;  // the largest magnitude negative: d = 1, ties round to even
    const int64_t n = (int64_t)x.size(), nb = n / TSR_QK_K;
    std::vector<tsr_block_q8_K> ref((size_t)nb), got((size_t)nb);
    tcpu::kernels_scalar.quantize_q8k(x.data(), ref.data(), n);
    for (tsr_cpu_isa isa : tsrt::isas()) {
        kernels_of k(isa);
        INFO("isa " << tsr_cpu_isa_name(isa));
        if (!k.K->quantize_q8k) continue;  // the path uses the scalar quantizer
        std::memset(got.data(), 0x5A, got.size() * sizeof(got[0]));
        k.K->quantize_q8k(x.data(), got.data(), n);
        for (int64_t b = 0; b < nb; ++b) {
            INFO("block " << b);
            CHECK(got[(size_t)b].d == ref[(size_t)b].d);
            CHECK(std::memcmp(got[(size_t)b].qs, ref[(size_t)b].qs, TSR_QK_K) == 0);
            CHECK(std::memcmp(got[(size_t)b].bsums, ref[(size_t)b].bsums, sizeof(ref[0].bsums)) == 0);
        }
    }
}

// Random weight bytes (finite fp16 factors) against Q8_K activations at the int8 extremes
// and random: every path's integer sums are exact, so results differ only by float rounding.
TEST_CASE("dot_q8k: every ISA path equals the scalar path for every K-quant", "[cpu][mul_mat][kernels][quant]") {
    std::mt19937 rng(13);
    const int64_t nb = 9, n = nb * TSR_QK_K;
    std::vector<float> yf((size_t)n);
    for (int64_t i = 0; i < n; ++i) yf[(size_t)i] = i < TSR_QK_K ? ((i % 2) ? 1.0f : -1.0f) : std::uniform_real_distribution<float>(-1, 1)(rng);
    std::vector<tsr_block_q8_K> y((size_t)nb);
    REQUIRE(tsr_from_float_row(TSR_TYPE_Q8_K, yf.data(), y.data(), n));
    for (tsr_type t : {TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K}) {
        const int slot = tcpu::q8k_slot(t);
        REQUIRE(slot >= 0);
        const size_t bs = tsr_type_size(t);
        std::vector<uint8_t> w(bs * (size_t)nb);
        for (auto & v : w) v = (uint8_t)(rng() & 0xff);
        for (int64_t b = 0; b < nb; ++b) {  // fp16 factors: d (and dmin) at the format's offsets
            const size_t d_off = t == TSR_TYPE_Q2_K ? 80 : t == TSR_TYPE_Q3_K ? 108 : t == TSR_TYPE_Q6_K ? 208 : 0;
            const int nd = (t == TSR_TYPE_Q2_K || t == TSR_TYPE_Q4_K || t == TSR_TYPE_Q5_K) ? 2 : 1;
            for (int k = 0; k < nd; ++k) {
                const tsr_fp16_t h = tsr_fp32_to_fp16(std::uniform_real_distribution<float>(-0.01f, 0.01f)(rng));
                std::memcpy(w.data() + (size_t)b * bs + d_off + 2 * (size_t)k, &h, 2);
            }
        }
        // the reference in double: dequantized weights (the core's decoder) times y
        std::vector<float> wf((size_t)n), yq((size_t)n);
        REQUIRE(tsr_to_float_row(t, w.data(), wf.data(), n));
        REQUIRE(tsr_to_float_row(TSR_TYPE_Q8_K, y.data(), yq.data(), n));
        double want = 0.0, mag = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            want += (double)wf[(size_t)i] * yq[(size_t)i];
            mag += std::fabs((double)wf[(size_t)i] * yq[(size_t)i]);
        }
        const float ref = tcpu::kernels_scalar.dot_q8k[slot](n, w.data(), y.data());
        INFO(tsr_type_name(t));
        CHECK(std::fabs((double)ref - want) <= 1e-5 * mag);
        for (tsr_cpu_isa isa : tsrt::isas()) {
            kernels_of k(isa);
            INFO("isa " << tsr_cpu_isa_name(isa));
            if (!k.K->dot_q8k[slot]) continue;
            CHECK(std::fabs((double)k.K->dot_q8k[slot](n, w.data(), y.data()) - want) <= 1e-5 * mag);
        }
    }
}

TEST_CASE("dot_yq8: every ISA path equals the scalar path for Q4_1, Q5_0, Q5_1 and IQ4_NL", "[cpu][mul_mat][kernels][quant]") {
    std::mt19937 rng(17);
    const int64_t nb = 9, n = nb * 32;  // odd: the SIMD kernels' pairs of blocks leave one over
    std::vector<float> yf((size_t)n);
    for (int64_t i = 0; i < n; ++i) yf[(size_t)i] = i < 32 ? ((i % 2) ? 1.0f : -1.0f) : std::uniform_real_distribution<float>(-1, 1)(rng);
    // yq8 blocks and their Q4 side arrays, as mul_mat prepares them for these types
    std::vector<tcpu::yq8> ybuf((tcpu::yq8_row_bytes(n) + sizeof(tcpu::yq8) - 1) / sizeof(tcpu::yq8));
    tcpu::yq8 * y = ybuf.data();
    tcpu::kernels_scalar.quantize_y(yf.data(), y, n);
    std::vector<double> yq((size_t)n);
    for (int64_t i = 0; i < n; ++i) yq[(size_t)i] = (double)y[(size_t)(i / 32)].d * y[(size_t)(i / 32)].qs[i % 32];
    for (tsr_type t : {TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL}) {
        const int slot = tcpu::yq8_slot(t);
        REQUIRE(slot >= 0);
        tcpu::y_side(y, nb, t);
        const size_t bs = tsr_type_size(t);
        std::vector<uint8_t> w(bs * (size_t)nb);
        for (auto & v : w) v = (uint8_t)(rng() & 0xff);
        const int nd = (t == TSR_TYPE_Q4_1 || t == TSR_TYPE_Q5_1) ? 2 : 1;  // d (and m) lead the block
        for (int64_t b = 0; b < nb; ++b)
            for (int k = 0; k < nd; ++k) {
                const tsr_fp16_t h = tsr_fp32_to_fp16(std::uniform_real_distribution<float>(-0.01f, 0.01f)(rng));
                std::memcpy(w.data() + (size_t)b * bs + 2 * (size_t)k, &h, 2);
            }
        std::vector<float> wf((size_t)n);
        REQUIRE(tsr_to_float_row(t, w.data(), wf.data(), n));
        double want = 0.0, mag = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            want += (double)wf[(size_t)i] * yq[(size_t)i];
            mag += std::fabs((double)wf[(size_t)i] * yq[(size_t)i]);
        }
        INFO(tsr_type_name(t));
        CHECK(std::fabs((double)tcpu::kernels_scalar.dot_yq8[slot](n, w.data(), y) - want) <= 1e-5 * mag);
        for (tsr_cpu_isa isa : tsrt::isas()) {
            kernels_of k(isa);
            INFO("isa " << tsr_cpu_isa_name(isa));
            if (!k.K->dot_yq8[slot]) continue;
            for (int64_t m = 1; m <= nb; m += nb - 1) {  // one block alone, and all of them
                double wm = 0.0, mm = 0.0;
                for (int64_t i = 0; i < m * 32; ++i) {
                    wm += (double)wf[(size_t)i] * yq[(size_t)i];
                    mm += std::fabs((double)wf[(size_t)i] * yq[(size_t)i]);
                }
                INFO("blocks " << m);
                CHECK(std::fabs((double)k.K->dot_yq8[slot](m * 32, w.data(), y) - wm) <= 1e-5 * mm);
            }
        }
    }
}

// The 4-row mat-vec kernels of the K-quants and the other 32-element types (mm_range_dots
// walks 4 far-apart rows with them): each row's result equals the one-row kernel's bit for
// bit (a row's result must not depend on how the rows were split) and the double reference
// on the decoded weights. Rows adjacent, far apart with padding, and lda = 0 (one row four
// times, as the leftover rows go); row lengths leave 0..3 blocks past a group of 4.
TEST_CASE("dot4 of the K-quants and 32-element types: each row equals the one-row kernel and the reference", "[cpu][mul_mat][kernels][quant]") {
    std::mt19937 rng(19);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (tsr_type t : {TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0,
                       TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL}) {
        const bool kq = tcpu::q8k_slot(t) >= 0;
        for (int64_t nb : kq ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{3, 4, 5, 6, 7}) {
            const int64_t n = nb * tsr_blck_size(t);
            const size_t row = tsr_row_size(t, n), stride = row + 3 * tsr_type_size(t);
            std::vector<float> xf((size_t)n * 4), yf((size_t)n);
            for (float & v : xf) v = u(rng);
            for (float & v : yf) v = u(rng);
            std::vector<uint8_t> w(stride * 4);
            for (int r = 0; r < 4; ++r) REQUIRE(tsr_from_float_row(t, xf.data() + r * n, w.data() + r * stride, n));
            // the activations as mul_mat prepares them: Q8_K, or yq8 with the type's side arrays
            std::vector<tsr_block_q8_K> yk(kq ? (size_t)(n / TSR_QK_K) : 0);
            std::vector<tcpu::yq8> y8(kq ? 0 : tcpu::yq8_row_bytes(n) / sizeof(tcpu::yq8) + 1);
            std::vector<float> yv((size_t)n);
            if (kq) {
                REQUIRE(tsr_from_float_row(TSR_TYPE_Q8_K, yf.data(), yk.data(), n));
                REQUIRE(tsr_to_float_row(TSR_TYPE_Q8_K, yk.data(), yv.data(), n));
            } else {
                tcpu::quantize_y_scalar(yf.data(), y8.data(), n);
                tcpu::y_side(y8.data(), nb, t);
                for (int64_t i = 0; i < n; ++i) yv[(size_t)i] = y8[(size_t)(i / 32)].d * y8[(size_t)(i / 32)].qs[i % 32];
            }
            const void * y = kq ? (const void *)yk.data() : (const void *)y8.data();
            for (tsr_cpu_isa isa : tsrt::isas()) {
                kernels_of k(isa);
                const auto dot4 = tcpu::dot4_for(k.K, t);
                if (!dot4) continue;
                auto dot1 = [&](const uint8_t * x) {
                    return kq ? k.K->dot_q8k[tcpu::q8k_slot(t)](n, x, yk.data()) : k.K->dot_yq8[tcpu::yq8_slot(t)](n, x, y8.data());
                };
                for (size_t lda : {(size_t)0, row, stride}) {
                    float out[4] = {NAN, NAN, NAN, NAN};
                    dot4(n, (const char *)w.data(), lda, y, out);
                    for (int r = 0; r < 4; ++r) {
                        const uint8_t * x = w.data() + r * lda;
                        std::vector<float> wf((size_t)n);
                        REQUIRE(tsr_to_float_row(t, x, wf.data(), n));
                        double want = 0.0, mag = 0.0;
                        for (int64_t i = 0; i < n; ++i) {
                            want += (double)wf[(size_t)i] * yv[(size_t)i];
                            mag += std::fabs((double)wf[(size_t)i] * yv[(size_t)i]);
                        }
                        INFO(tsr_type_name(t) << " isa " << tsr_cpu_isa_name(isa) << " blocks " << nb << " lda " << lda << " row " << r);
                        CHECK(std::fabs((double)out[r] - want) <= 1e-5 * mag);
                        const float one = dot1(x);
                        CHECK(std::memcmp(&out[r], &one, sizeof one) == 0);
                    }
                }
            }
        }
    }
}

// Q5_0 and IQ4_NL are int8 values times one fp16 scale per 32, so their GEMM packs them
// exactly: each ISA's panel equals its Q8_0 packer's panel of the Q8_0 blocks written here
// (values q - 16 / the IQ4_NL table, the same d), for rows past a panel and k past K.
TEST_CASE("GEMM A panels of Q5_0 and IQ4_NL equal the Q8_0 panels of their exact values", "[cpu][mul_mat][kernels][quant]") {
    static const int8_t iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    std::mt19937 rng(17);
    const int64_t nb = 5, K = nb * 32;
    for (tsr_type t : {TSR_TYPE_Q5_0, TSR_TYPE_IQ4_NL}) {
        const size_t bs = tsr_type_size(t);
        const int rows = 3;
        std::vector<uint8_t> w(bs * (size_t)(nb * rows));
        for (auto & v : w) v = (uint8_t)(rng() & 0xff);
        std::vector<tsr_block_q8_0> q8((size_t)(nb * rows));
        for (size_t b = 0; b < q8.size(); ++b) {
            const uint8_t * blk = w.data() + b * bs;
            const tsr_fp16_t d = tsr_fp32_to_fp16(std::uniform_real_distribution<float>(-0.01f, 0.01f)(rng));
            std::memcpy(w.data() + b * bs, &d, 2);  // d first in both formats
            q8[b].d = d;
            const uint8_t * qs = blk + (t == TSR_TYPE_Q5_0 ? 6 : 2);
            uint32_t qh = 0;
            if (t == TSR_TYPE_Q5_0) std::memcpy(&qh, blk + 2, 4);
            for (int j = 0; j < 32; ++j) {
                const int nib = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
                q8[b].qs[j] = (int8_t)(t == TSR_TYPE_Q5_0 ? (nib | (int)((qh >> j) & 1) << 4) - 16 : iq4nl[nib]);
            }
        }
        for (tsr_cpu_isa isa : tsrt::isas()) {
            kernels_of k(isa);
            const tcpu::gemm_impl * g = k.K->gemm_x[tcpu::requant_slot(t)];
            const tcpu::gemm_impl * g8 = k.K->gemm[tcpu::SLOT_Q8_0];
            if (!g || !g8) continue;
            INFO(tsr_type_name(t) << " isa " << tsr_cpu_isa_name(isa));
            const int kc = 6 * 32;  // one block past K
            std::vector<uint8_t> got(g->a_bytes_32k * 6), want(g->a_bytes_32k * 6);
            g->pack_a((const char *)w.data(), bs * (size_t)nb, rows, K, 0, kc, got.data());
            g8->pack_a((const char *)q8.data(), sizeof(tsr_block_q8_0) * (size_t)nb, rows, K, 0, kc, want.data());
            CHECK(got == want);
        }
    }
}

// CPU_REPACK weights: set (in two parts, as loaders do) they get the GEMM's panels for the
// ISA in use, and mul_mat on them gives bit for bit the results of the same bytes in a plain
// CPU buffer, at prompt size (the GEMM reading the panels) and for one column (the mat-vec
// kernels reading the bytes as set); get returns those bytes, memset drops the panels.
TEST_CASE("CPU_REPACK buffers: panels made on set, results equal a plain buffer's, get returns the bytes", "[cpu][mul_mat][repack]") {
    const int64_t K = 512, M = 37;
    std::mt19937 rng(23);
    for (tsr_type t : {TSR_TYPE_Q4_0, TSR_TYPE_Q8_0, TSR_TYPE_Q4_K, TSR_TYPE_IQ4_NL, TSR_TYPE_Q6_K}) {
        std::vector<float> wf((size_t)(K * M));
        for (float & v : wf) v = std::uniform_real_distribution<float>(-1, 1)(rng);
        std::vector<uint8_t> wq(tsr_row_size(t, K) * (size_t)M);
        REQUIRE(tsr_quantize_chunk(t, wf.data(), wq.data(), 0, M, K, nullptr) == wq.size());
        for (int64_t N : {int64_t(9), int64_t(1)}) {
            tsr_context * meta = tsr_init(tsr_init_params{16 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
            tsr_tensor * wr = tsr_new_tensor_2d(meta, t, K, M);
            tsr_tensor * wp = tsr_new_tensor_2d(meta, t, K, M);
            tsr_tensor * x = tsr_new_tensor_2d(meta, TSR_TYPE_F32, K, N);
            tsr_tensor * cr = tsr_mul_mat(meta, wr, x);
            tsr_tensor * cp = tsr_mul_mat(meta, wp, x);
            tsr_cgraph * gf = tsr_new_graph(meta);
            REQUIRE(tsr_build_forward_expand(gf, cr));
            REQUIRE(tsr_build_forward_expand(gf, cp));
            tsr_backend_buffer_t rb = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_repack_buffer_type(), wq.size());
            tsr_backend_buffer_t pb = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_buffer_type(), wq.size());
            const size_t xbytes = (size_t)(K * N) * 4, cbytes = (size_t)(M * N) * 4 + 64;
            tsr_backend_buffer_t ab = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_buffer_type(), xbytes + 2 * cbytes);
            REQUIRE((rb && pb && ab));
            REQUIRE(std::string(tsr_backend_buffer_name(rb)) == "CPU_REPACK");
            char * abase = (char *)tsr_backend_buffer_get_base(ab);
            REQUIRE(tsr_backend_tensor_alloc(rb, wr, tsr_backend_buffer_get_base(rb)));
            REQUIRE(tsr_backend_tensor_alloc(pb, wp, tsr_backend_buffer_get_base(pb)));
            REQUIRE(tsr_backend_tensor_alloc(ab, x, abase));
            REQUIRE(tsr_backend_tensor_alloc(ab, cr, abase + xbytes));
            REQUIRE(tsr_backend_tensor_alloc(ab, cp, abase + xbytes + cbytes));
            std::vector<float> xv((size_t)(K * N));
            for (float & v : xv) v = std::uniform_real_distribution<float>(-1, 1)(rng);
            REQUIRE(tsr_backend_tensor_set(x, xv.data(), 0, xbytes));
            for (tsr_cpu_isa isa : tsrt::isas()) {
                kernels_of k(isa);
                INFO(tsr_type_name(t) << " N " << N << " isa " << tsr_cpu_isa_name(isa));
                const size_t half = wq.size() / 2;
                REQUIRE(tsr_backend_tensor_set(wr, wq.data(), 0, half));
                REQUIRE(tsr_backend_tensor_set(wr, wq.data() + half, half, wq.size() - half));
                REQUIRE(tsr_backend_tensor_set(wp, wq.data(), 0, wq.size()));
                const tcpu::gemm_impl * g = tcpu::gemm_for(k.K, t);
                const uint8_t * panels = nullptr;
                size_t stride = 0;
                CHECK(tcpu::prepacked_a(wr, g, &panels, &stride) == (g != nullptr));
                CHECK_FALSE(tcpu::prepacked_a(wp, g, &panels, &stride));
                std::vector<uint8_t> back(wq.size());
                REQUIRE(tsr_backend_tensor_get(wr, back.data(), 0, back.size()));
                CHECK(back == wq);
                for (int rep = 0; rep < 2; ++rep) {  // rep 1: the panels dropped by a memset, the bytes put back directly
                    tsrt::backend_holder be(2);
                    REQUIRE(tsr_backend_graph_compute(be, gf) == TSR_STATUS_SUCCESS);
                    CHECK(std::memcmp(cr->data, cp->data, (size_t)(M * N) * 4) == 0);
                    CHECK(std::isfinite(((const float *)cr->data)[0]));
                    if (rep == 0) {
                        REQUIRE(tsr_backend_tensor_memset(wr, 0, 0, wq.size()));
                        CHECK_FALSE(tcpu::prepacked_a(wr, g, &panels, &stride));
                        std::memcpy(wr->data, wq.data(), wq.size());
                    }
                }
            }
            tsr_backend_buffer_free(ab);
            tsr_backend_buffer_free(rb);
            tsr_backend_buffer_free(pb);
            tsr_free(meta);
        }
    }
}
