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
#include "gemm_test_columns.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <string>
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
        REQUIRE(K->isa == (isa == TSR_CPU_ISA_AMX ? TSR_CPU_ISA_AVX512 : isa));  // the AMX path runs AVX-512 vector kernels
    }
    ~kernels_of() { tsr_cpu_set_isa(saved); }
};

// The kernel tables the quantized dot tests check: every ISA path's and, on a CPU with
// AVX-512 and GFNI, AVX-512's without GFNI (whose Q3_K and 32-element kernels a CPU without
// it runs) and, with VBMI too, AVX-512's with GFNI only (Q3_K's scales and Q4_1 / Q5_0 /
// Q5_1's permutes without VBMI).
struct kernel_table {
    std::string name;
    tcpu::kernels k;
};
std::vector<kernel_table> kernel_tables() {
    std::vector<kernel_table> tables;
    for (tsr_cpu_isa isa : tsrt::isas()) {
        kernels_of k(isa);
        tables.push_back({tsr_cpu_isa_name(isa), *k.K});
    }
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    if (tcpu::features().avx512 && (tcpu::features().avx512_gfni || tcpu::features().avx512_vbmi)) {
        tcpu::cpu_features f = tcpu::features();
        f.avx512_gfni = false;  // the kernels of a CPU with neither (Q2_K's scales without VBMI)
        f.avx512_vbmi = false;
        tables.push_back({"avx512 without gfni and vbmi", tcpu::make_kernels_avx512(f)});
    }
    if (tcpu::features().avx512 && tcpu::features().avx512_gfni && tcpu::features().avx512_vbmi) {
        tcpu::cpu_features f = tcpu::features();
        f.avx512_vbmi = false;  // a CPU with GFNI only (Q3_K's scales without VBMI, its levels by GFNI)
        tables.push_back({"avx512 with gfni, without vbmi", tcpu::make_kernels_avx512(f)});
    }
#endif
    return tables;
}

// A yq8 row of nb blocks with its side arrays for weights of type wt, from the scalar quantizer.
struct yrow {
    std::vector<tcpu::yq8> buf;
    yrow(const std::vector<float> & x, tsr_type wt) : buf(tcpu::yq8_row_bytes((int64_t)x.size()) / sizeof(tcpu::yq8) + 1) {
        tcpu::quantize_y_scalar(x.data(), buf.data(), (int64_t)x.size());
        tcpu::y_side(buf.data(), (int64_t)x.size() / 32, wt);
    }
};

// sum over blocks of d_x * d_y * (exact integer block dot), in double; mag gets the sum of
// the products' magnitudes, |d_x d_y| sum |x_j y_j|: a float kernel's error scales with it
// (its lanes hold partial sums that can cancel in the end), not with the blocks' results
template <typename B>
double ref_block_dot(const B * x, const tcpu::yq8 * y, int64_t nb, double & mag) {
    double s = 0;
    for (int64_t b = 0; b < nb; ++b) {
        int64_t acc = 0, abs_acc = 0;
        for (int j = 0; j < 32; ++j) {
            int xq;
            if constexpr (std::is_same<B, tsr_block_q8_0>::value) xq = x[b].qs[j];
            else xq = (j < 16 ? (x[b].qs[j] & 0x0F) : (x[b].qs[j - 16] >> 4)) - 8;
            acc += (int64_t)xq * y[b].qs[j];
            abs_acc += std::abs((int64_t)xq * y[b].qs[j]);
        }
        const double dd = (double)tcpu::h2f(x[b].d) * (double)y[b].d;
        s += dd * (double)acc;
        mag += std::fabs(dd) * (double)abs_acc;
    }
    return s;
}

// dot4 of one quantized type against the exact block sums: nb = 1..13 (0..3 blocks past the
// last group of 4, and rows shorter than one group), rows adjacent, far apart with a
// padded stride, and lda = 0 (one row four times); each row equals dot1's value for it
// (mm_range's leftover rows) to the bit.
template <typename B>
void check_dot4(int slot, tsr_type type, std::mt19937 & rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::uniform_int_distribution<int> q(-128, 127);
    for (const kernel_table & kt : kernel_tables()) {
        const tcpu::kernels * K = &kt.k;
        if (!K->dot4[slot]) continue;
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
                    K->dot4[slot](n, x, lda, y.buf.data(), out);
                    for (int r = 0; r < 4; ++r) {
                        double mag = 0;
                        const double ref = ref_block_dot((const B *)(x + r * lda), y.buf.data(), nb, mag);
                        INFO(tsr_type_name(type) << " kernels " << kt.name << " nb " << nb << " lda " << lda
                                                 << " row " << r << " extreme " << extreme);
                        CHECK(std::fabs(out[r] - ref) <= 4e-6 * mag + 1e-30);
                        if (!K->dot1[slot]) continue;
                        float one = NAN;  // the one-row build: the same value to the bit
                        K->dot1[slot](n, x + r * lda, 0, y.buf.data(), &one);
                        CHECK(std::memcmp(&one, &out[r], sizeof one) == 0);
                    }
                }
            }
        }
    }
}

} // namespace

TEST_CASE("dot4 Q8_0/Q4_0 on every ISA: exact block sums, leftover blocks, lda 0 and padded, dot1 the same", "[cpu][mul_mat][kernels]") {
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

// f32_to_f16 (the KV cache's writes) of every ISA path writes f2h's bits: random bit patterns
// (NaNs with payloads of either sign among them), infinities, overflow to infinity, halfway
// cases of both parities, F16 denormals and zeros; n leaves a tail past every vector width.
TEST_CASE("f32_to_f16: every path writes the scalar conversion's bits", "[cpu][kernels]") {
    std::mt19937 rng(31);
    std::vector<float> x;
    for (int i = 0; i < 997; ++i) x.push_back(tcpu::bits_f32((uint32_t)rng()));
    for (uint32_t w : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x477FF000u, 0x477FE000u, 0x47800000u,
                       0x33800000u, 0x33000000u, 0x38800000u, 0x387FC000u, 0x3F801000u, 0x3F803000u, 0x00000000u, 0x80000000u})
        x.push_back(tcpu::bits_f32(w));
    std::vector<uint16_t> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = tcpu::f2h(x[i]);
    for (tsr_cpu_isa isa : tsrt::isas()) {
        kernels_of k(isa);
        std::vector<uint16_t> got(x.size(), 0xABCD);
        k.K->f32_to_f16(x.data(), got.data(), (int64_t)x.size());
        INFO("isa " << tsr_cpu_isa_name(isa));
        CHECK(got == want);
    }
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
    // +m and -m both: the first of them sets the scale's sign (a vector max and min cannot
    // tell which came first), negative first and positive first
    for (float first : {-3.0f, 3.0f}) {
        const size_t at = x.size();
        for (int j = 0; j < TSR_QK_K; ++j) x.push_back(std::uniform_real_distribution<float>(-2.5f, 2.5f)(rng));
        x[at + 7] = first;
        x[at + 200] = -first;
    }
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
// The scale bytes also at their extremes (every one 0xFF: 6-bit scales and mins 63, Q3_K's
// +31, Q6_K's -1; alternating 0xFF / 0x00: 63 next to 0, -32 next to +31, the packed high
// bits of one scale set while its neighbour's are clear; every one 0x00), where the SIMD
// scale decoders' shifts and masks show. Q3_K's levels also at their extremes, the hmask bits
// all clear with the qs bytes 0x00 (every level -4: against scales -32, products of 128) and
// all set with 0xFF (every level +3), where the unsigned levels' sums are largest.
TEST_CASE("dot_q8k: every ISA path equals the scalar path for every K-quant", "[cpu][mul_mat][kernels][quant]") {
    std::mt19937 rng(13);
    const int64_t nb = 9, n = nb * TSR_QK_K;
    std::vector<float> yf((size_t)n);
    for (int64_t i = 0; i < n; ++i) yf[(size_t)i] = i < TSR_QK_K ? ((i % 2) ? 1.0f : -1.0f) : std::uniform_real_distribution<float>(-1, 1)(rng);
    for (tsr_type t : {TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K}) {
        const int slot = tcpu::q8k_slot(t);
        REQUIRE(slot >= 0);
        // the activations as mul_mat prepares them for t: Q8_K blocks and their side blocks,
        // of all nb blocks and (yr) of the first 3, which the dot4 checks below read; block 1
        // all -128 (the quantizer's range ends at -127): its 16-element sums -2048, the end
        // of the side blocks' split
        auto q8k_row = [&](int64_t blocks) {
            std::vector<tsr_block_q8_K> v(tcpu::q8k_row_bytes(blocks * TSR_QK_K, t) / sizeof(tsr_block_q8_K) + 1);
            REQUIRE(tsr_from_float_row(TSR_TYPE_Q8_K, yf.data(), v.data(), blocks * TSR_QK_K));
            std::memset(v[1].qs, 0x80, sizeof(v[1].qs));
            for (int16_t & b : v[1].bsums) b = -2048;
            tcpu::y_side_q8k(v.data(), blocks, t);
            return v;
        };
        const std::vector<tsr_block_q8_K> y = q8k_row(nb), yr = q8k_row(3);
        const size_t bs = tsr_type_size(t);
        std::vector<uint8_t> w(bs * (size_t)nb);
        for (auto & v : w) v = (uint8_t)(rng() & 0xff);
        const size_t sc_off = t == TSR_TYPE_Q2_K ? 0 : t == TSR_TYPE_Q3_K ? 96 : t == TSR_TYPE_Q6_K ? 192 : 4;
        const size_t sc_len = (t == TSR_TYPE_Q3_K || t == TSR_TYPE_Q4_K || t == TSR_TYPE_Q5_K) ? 12 : 16;
        const int variants = t == TSR_TYPE_Q3_K ? 6 : 4;
        for (int variant = 0; variant < variants; ++variant) {
            static const char * const names[] = {"random", "all 0xFF", "0xFF / 0x00 alternating", "all 0x00",
                                                 "all 0x00, hmask and qs 0x00", "all 0xFF, hmask and qs 0xFF"};
            INFO("scale bytes " << names[variant]);
            for (int64_t b = 0; b < nb && variant > 0; ++b) {
                for (size_t k = 0; k < sc_len; ++k)
                    w[(size_t)b * bs + sc_off + k] = variant == 3 || variant == 4 || (variant == 2 && k % 2 == 1) ? 0x00 : 0xFF;
                if (variant >= 4) std::memset(w.data() + (size_t)b * bs, variant == 4 ? 0x00 : 0xFF, 96);  // hmask[32], qs[64]
            }
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
            for (const kernel_table & kt : kernel_tables()) {
                const tcpu::kernels * K = &kt.k;
                INFO("kernels " << kt.name);
                if (!K->dot_q8k[slot]) continue;
                CHECK(std::fabs((double)K->dot_q8k[slot](n, w.data(), y.data()) - want) <= 1e-5 * mag);
                if (!K->dot4_q8k[slot]) continue;
                // 4 rows of 3 super-blocks, 2 apart (overlapping), and lda 0: each row's result is
                // the 1-row kernel's to the bit, so a row's value never depends on the split
                const int64_t nr = 3 * TSR_QK_K;
                for (size_t lda : {(size_t)0, 2 * bs}) {
                    float out[4] = {NAN, NAN, NAN, NAN};
                    K->dot4_q8k[slot](nr, (const char *)w.data(), lda, yr.data(), out);
                    for (int r = 0; r < 4; ++r) {
                        INFO("dot4 lda " << lda << " row " << r);
                        const float one = K->dot_q8k[slot](nr, w.data() + r * lda, yr.data());
                        CHECK(std::memcmp(&out[r], &one, sizeof(float)) == 0);
                        double wr = 0.0, mr = 0.0;
                        for (int64_t i = 0; i < nr; ++i) {
                            const double p = (double)wf[(size_t)(i + (int64_t)(r * lda / bs) * TSR_QK_K)] * yq[(size_t)i];
                            wr += p;
                            mr += std::fabs(p);
                        }
                        CHECK(std::fabs((double)out[r] - wr) <= 1e-5 * mr);
                    }
                }
            }
        }
    }
}

// The IQ4_NL quantizer's nearest-level index (a midpoint count) against ggml's
// best_index_int8 as written there: clamps at the ends, a binary search, then x - lo < hi - x
// picks lo. Every float of magnitude up to 140 was checked offline (2.25e9, no difference);
// here the floats within 256 ulps of every midpoint and table value, 2e5 random ones over
// the range, and the specials.
TEST_CASE("IQ4_NL quantizer: the nearest level's index equals ggml's search on every float tried", "[cpu][quant]") {
    const int8_t * v = tsr_impl::iq4nl_values;
    auto ggml_index = [v](float x) {
        if (x <= v[0]) return 0;
        if (x >= v[15]) return 15;
        int lo = 0, hi = 15;
        while (hi - lo > 1) {
            const int mu = (lo + hi) / 2;
            if (x < v[mu]) hi = mu; else lo = mu;
        }
        return x - v[lo] < v[hi] - x ? lo : hi;
    };
    std::vector<float> xs = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(), 1e30f, -1e30f, 0.0f, -0.0f, 200.0f, -200.0f};
    for (int k = 0; k < 16; ++k)
        for (float c : {(float)v[k], k < 15 ? (float)(v[k] + v[k + 1]) / 2.0f : (float)v[k]}) {
            float up = c, down = c;
            for (int u = 0; u < 256; ++u) {
                xs.push_back(up);
                xs.push_back(down);
                up = std::nextafter(up, 1e9f);
                down = std::nextafter(down, -1e9f);
            }
        }
    std::mt19937 rng(23);
    std::uniform_real_distribution<float> u(-140.0f, 140.0f);
    for (int i = 0; i < 200000; ++i) xs.push_back(u(rng));
    size_t wrong = 0;
    for (float x : xs) wrong += tsr_impl::iq4nl_index(x) != ggml_index(x);
    CHECK(wrong == 0);
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
// times, as the leftover rows go); row lengths leave 0..3 blocks past a group of 4 (9: two
// groups, whose activation side arrays differ, and a block past them; 16 and 23: a whole quad
// of groups, and one more with a group of a second quad, as Q4_1 / Q5_1's mins are taken).
TEST_CASE("dot4 of the K-quants and 32-element types: each row equals the one-row kernel and the reference", "[cpu][mul_mat][kernels][quant]") {
    std::mt19937 rng(19);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (tsr_type t : {TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0,
                       TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL}) {
        const bool kq = tcpu::q8k_slot(t) >= 0;
        for (int64_t nb : kq ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{3, 4, 5, 6, 7, 9, 16, 23}) {
            const int64_t n = nb * tsr_blck_size(t);
            const size_t row = tsr_row_size(t, n), stride = row + 3 * tsr_type_size(t);
            std::vector<float> xf((size_t)n * 4), yf((size_t)n);
            for (float & v : xf) v = u(rng);
            for (float & v : yf) v = u(rng);
            std::vector<uint8_t> w(stride * 4);
            for (int r = 0; r < 4; ++r) REQUIRE(tsr_from_float_row(t, xf.data() + r * n, w.data() + r * stride, n));
            // the activations as mul_mat prepares them: Q8_K or yq8, with the type's side arrays
            std::vector<tsr_block_q8_K> yk(kq ? tcpu::q8k_row_bytes(n, t) / sizeof(tsr_block_q8_K) + 1 : 0);
            std::vector<tcpu::yq8> y8(kq ? 0 : tcpu::yq8_row_bytes(n) / sizeof(tcpu::yq8) + 1);
            std::vector<float> yv((size_t)n);
            if (kq) {
                REQUIRE(tsr_from_float_row(TSR_TYPE_Q8_K, yf.data(), yk.data(), n));
                tcpu::y_side_q8k(yk.data(), nb, t);
                REQUIRE(tsr_to_float_row(TSR_TYPE_Q8_K, yk.data(), yv.data(), n));
            } else {
                tcpu::quantize_y_scalar(yf.data(), y8.data(), n);
                tcpu::y_side(y8.data(), nb, t);
                for (int64_t i = 0; i < n; ++i) yv[(size_t)i] = y8[(size_t)(i / 32)].d * y8[(size_t)(i / 32)].qs[i % 32];
            }
            const void * y = kq ? (const void *)yk.data() : (const void *)y8.data();
            for (const kernel_table & kt : kernel_tables()) {
                const tcpu::kernels * K = &kt.k;
                const auto dot4 = tcpu::dot4_for(K, t);
                if (!dot4) continue;
                auto dot1 = [&](const uint8_t * x) {
                    return kq ? K->dot_q8k[tcpu::q8k_slot(t)](n, x, yk.data()) : K->dot_yq8[tcpu::yq8_slot(t)](n, x, y8.data());
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
                        INFO(tsr_type_name(t) << " kernels " << kt.name << " blocks " << nb << " lda " << lda << " row " << r);
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

namespace {

// How an ISA's int8 A panel holds weight levels (layouts in pack.inl): x86 writes per 32 k
// 8 quads x mr rows x 4 bytes, AVX-512 with the bytes of Q8_0-style levels offset by 128,
// AVX2 and AVX-512 Q4_0 as its nibbles (level + 8), AMX every level signed; NEON writes mr
// rows x 32 signed bytes. Then
// mr float scales. The panel of nb blocks from k0 of `rows` rows of type t (stride lda)
// packed by g, on the ISA in use (t: the encoding, Q4_0 or any other).
struct packed_panel {
    const tcpu::gemm_impl * g;
    std::vector<uint8_t> bytes;
    const uint8_t * p;
    bool rows_layout, is_signed;
    int kind, offset;
    packed_panel(const tcpu::gemm_impl * gi, tsr_cpu_isa isa, tsr_type t, const std::vector<uint8_t> & w, size_t lda, int rows,
                 int64_t K, int64_t k0, int nb)
        : g(gi), bytes(gi->a_bytes_32k * (size_t)nb, 0xAB), p(bytes.data()) {
        g->pack_a((const char *)w.data(), lda, rows, K, k0, nb * 32, bytes.data());
        rows_layout = isa == TSR_CPU_ISA_NEON;
        // min panels: levels 0..31 as they are, mr scales, mr mins; half panels: Q8_0-style
        // levels, mr scales per half
        kind = tcpu::panel_kind_of(t);
        const bool nibbles = t == TSR_TYPE_Q4_0 && !rows_layout && isa != TSR_CPU_ISA_AMX, mins = kind == tcpu::PANEL_MIN;
        is_signed = !mins && !nibbles && isa != TSR_CPU_ISA_AVX512;
        offset = nibbles ? 8 : (is_signed || mins ? 0 : 128);
    }
    int level(int b, int r, int j) const {
        const uint8_t * blk = p + (size_t)b * g->a_bytes_32k;
        const uint8_t byte = rows_layout ? blk[r * 32 + j] : blk[((j / 4) * g->mr + r) * 4 + j % 4];
        return (is_signed ? (int)(int8_t)byte : (int)byte) - offset;
    }
    // float `part` of row r after the levels: the scale (0), then the min or the second half's scale (1)
    float scale(int b, int r, int part = 0) const {
        float s;
        std::memcpy(&s, p + (size_t)b * g->a_bytes_32k + (size_t)g->mr * (32 + 4 * part) + (size_t)r * 4, 4);
        return s;
    }
};

// The panel of `rows` rows of type t (row stride lda) for k in [k0, k0 + kc) on the GEMM
// the ISA in use runs for t.
const tcpu::gemm_impl * gemm_of(const tcpu::kernels * K, tsr_type t) {
    const int slot = tcpu::type_slot(t);
    return slot >= 0 ? K->gemm[slot] : K->gemm_x[tcpu::requant_slot(t)];
}

// Element j of block b of an exact type's row, as the int8 level the format defines.
int exact_level(tsr_type t, const uint8_t * row, int64_t b, int j) {
    static const int8_t iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    const uint8_t * blk = row + (size_t)b * tsr_type_size(t);
    if (t == TSR_TYPE_Q8_0) return (int8_t)blk[2 + j];
    const uint8_t * qs = blk + (t == TSR_TYPE_Q5_0 ? 6 : 2);
    const int nib = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
    if (t == TSR_TYPE_Q4_0) return nib - 8;
    if (t == TSR_TYPE_IQ4_NL) return iq4nl[nib];
    uint32_t qh;
    std::memcpy(&qh, blk + 2, 4);
    return (nib | (int)((qh >> j) & 1) << 4) - 16;
}

} // namespace

// Q8_0, Q4_0, Q5_0 and IQ4_NL are int8 levels times one fp16 scale per 32: every ISA's
// GEMM packs them exactly. Each byte of the panel against the levels and scales read from
// the blocks here: rows past `rows` (a partial group of four) and blocks past K hold level
// 0 and scale 0, a k0 past the first blocks and a row stride past the row's end.
TEST_CASE("GEMM A panels of Q8_0, Q4_0, Q5_0 and IQ4_NL hold the blocks' exact levels on every ISA", "[cpu][mul_mat][kernels][quant]") {
    std::mt19937 rng(17);
    const int64_t nbk = 6, K = nbk * 32;
    const int rows = 5;
    for (tsr_type t : {TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_Q5_0, TSR_TYPE_IQ4_NL}) {
        const size_t bs = tsr_type_size(t), lda = bs * (size_t)(nbk + 1);
        std::vector<uint8_t> w(lda * rows);
        for (auto & v : w) v = (uint8_t)(rng() & 0xff);
        for (int r = 0; r < rows; ++r)
            for (int64_t b = 0; b <= nbk; ++b) {  // d first in every one of these formats
                const tsr_fp16_t d = tsr_fp32_to_fp16(std::uniform_real_distribution<float>(-0.01f, 0.01f)(rng));
                std::memcpy(w.data() + r * lda + (size_t)b * bs, &d, 2);
            }
        for (tsr_cpu_isa isa : tsrt::isas()) {
            kernels_of k(isa);
            const tcpu::gemm_impl * g = gemm_of(k.K, t);
            if (!g) continue;
            for (int64_t k0 : {(int64_t)0, (int64_t)64}) {
                const int nb = 7;  // past K: 1 block from k0 0, 3 from k0 64
                const packed_panel pv(g, isa, t, w, lda, rows, K, k0, nb);
                int bad = 0;
                for (int b = 0; b < nb; ++b)
                    for (int r = 0; r < g->mr; ++r) {
                        const int64_t kb = k0 / 32 + b;
                        const bool live = r < rows && kb < nbk;
                        const uint8_t * row = w.data() + r * lda;
                        tsr_fp16_t d = 0;
                        if (live) std::memcpy(&d, row + kb * bs, 2);
                        const float want_s = live ? tsr_fp16_to_fp32(d) : 0.0f;
                        bad += pv.scale(b, r) != want_s;
                        for (int j = 0; j < 32; ++j) bad += pv.level(b, r, j) != (live ? exact_level(t, row, kb, j) : 0);
                    }
                INFO(tsr_type_name(t) << " isa " << tsr_cpu_isa_name(isa) << " k0 " << k0);
                CHECK(bad == 0);
            }
        }
    }
}

namespace {

// Block kb (of 32) of a row of Q4_1, Q5_1, Q4_K, Q5_K or Q3_K as the format defines it,
// read from its bytes: w = scale * level - min.
struct ref_block {
    int level[32];
    double scale, min, scale_hi;  // scale_hi: Q6_K's scale of elements 16..31
    double d;                     // Q6_K: d, and the int8 scales of elements 0..15 and 16..31
    int sc[2];
};

double fp16_at(const uint8_t * p) {
    tsr_fp16_t h;
    std::memcpy(&h, p, 2);
    return tsr_fp16_to_fp32(h);
}

// Q4_K / Q5_K: 6-bit scale and min j of the 12 packed bytes s.
void k_scale_min(const uint8_t * s, int j, int & sc, int & mn) {
    sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    mn = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
}

ref_block read_ref_block(tsr_type t, const uint8_t * row, int64_t kb) {
    ref_block r{};
    if (t == TSR_TYPE_Q4_1 || t == TSR_TYPE_Q5_1) {  // d, m, (qh), qs: w = d * q + m
        const uint8_t * blk = row + (size_t)kb * tsr_type_size(t);
        const uint8_t * qs = blk + (t == TSR_TYPE_Q5_1 ? 8 : 4);
        for (int j = 0; j < 32; ++j) {
            r.level[j] = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
            if (t == TSR_TYPE_Q5_1) r.level[j] |= ((blk[4 + j / 8] >> (j % 8)) & 1) << 4;
        }
        r.scale = fp16_at(blk);
        r.min = -fp16_at(blk + 2);
        return r;
    }
    const uint8_t * sb = row + (size_t)(kb / 8) * tsr_type_size(t);
    const int s = (int)(kb % 8);
    if (t == TSR_TYPE_Q6_K) {  // ql[128], qh[64], scales[16] (int8), d: level q - 32, d * scale per 16
        for (int l = 0; l < 32; ++l) {
            const int e = 32 * s + l, h = e / 128, k = (e % 128) / 32;
            const int lo = (sb[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 15;
            const int hi = (sb[128 + 32 * h + l] >> (2 * k)) & 3;
            r.level[l] = (lo | (hi << 4)) - 32;
        }
        r.d = fp16_at(sb + 208);
        r.sc[0] = (int8_t)sb[192 + 2 * s];
        r.sc[1] = (int8_t)sb[192 + 2 * s + 1];
        r.scale = r.d * r.sc[0];
        r.scale_hi = r.d * r.sc[1];
        return r;
    }
    if (t == TSR_TYPE_Q3_K) {  // hmask[32], qs[64], scales[12], d: level -q*sc, scale -d
        for (int l = 0; l < 32; ++l) {
            const int e = 32 * s + l, j = e / 16;
            const int q2 = (sb[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const int q = q2 - (((sb[e % 32] >> (e / 32)) & 1) ? 0 : 4);
            const int lo = j < 8 ? sb[96 + j] & 15 : sb[96 + j - 8] >> 4;
            const int sc = (lo | (((sb[96 + 8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            r.level[l] = -q * sc;
        }
        r.scale = -fp16_at(sb + 108);
        return r;
    }
    // Q4_K / Q5_K: d, dmin, scales[12], (qh[32]), qs[128]: w = d*sc * q - dmin*m
    int sc, mn;
    k_scale_min(sb + 4, s, sc, mn);
    const uint8_t * qs = sb + (t == TSR_TYPE_Q5_K ? 48 : 16);
    for (int l = 0; l < 32; ++l) {
        r.level[l] = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
        if (t == TSR_TYPE_Q5_K) r.level[l] |= ((sb[16 + l] >> s) & 1) << 4;
    }
    r.scale = fp16_at(sb) * sc;
    r.min = fp16_at(sb + 2) * mn;
    return r;
}

} // namespace

// Q4_1, Q5_1, Q4_K and Q5_K (w = a * q - b per 32) pack as min panels: q, a and b exactly;
// Q3_K as Q8_0 panels of -q * sc with scale -d; Q6_K as half panels (levels q - 32, d * sc
// per 16), and on AMX as sc * (q - 32) in two int8 planes (kernels_amx.inl). Each byte and float of every ISA's panel against the blocks read here (random
// bytes, finite fp16 scales): rows past `rows` and blocks past K hold level 0 and floats
// 0, a k0 past the first super-block and a row stride past the row's end.
TEST_CASE("GEMM A panels of Q4_1, Q5_1, Q3_K, Q4_K, Q5_K and Q6_K hold the blocks' exact levels, scales and mins on every ISA",
          "[cpu][mul_mat][kernels][quant]") {
    std::mt19937 rng(29);
    const int64_t K = 512;
    const int rows = 5;
    for (tsr_type t : {TSR_TYPE_Q4_1, TSR_TYPE_Q5_1, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K}) {
        const size_t bs = tsr_type_size(t), lda = tsr_row_size(t, K) + bs;
        const std::vector<size_t> fp16_at_offsets = t == TSR_TYPE_Q3_K   ? std::vector<size_t>{108}
                                                  : t == TSR_TYPE_Q6_K ? std::vector<size_t>{208}
                                                                       : std::vector<size_t>{0, 2};
        std::vector<uint8_t> w(lda * rows);
        for (auto & v : w) v = (uint8_t)(rng() & 0xff);
        for (size_t at = 0; at + bs <= w.size(); at += bs)  // finite fp16 d and m / dmin
            for (size_t off : fp16_at_offsets) {
                const tsr_fp16_t h = tsr_fp32_to_fp16(std::uniform_real_distribution<float>(-0.01f, 0.01f)(rng));
                std::memcpy(w.data() + at + off, &h, 2);
            }
        for (tsr_cpu_isa isa : tsrt::isas()) {
            kernels_of k(isa);
            const tcpu::gemm_impl * g = gemm_of(k.K, t);
            if (!g) continue;
            for (int64_t k0 : {(int64_t)0, (int64_t)256}) {
                const int nb = 16;  // from k0 256: 8 blocks, then 8 past K
                const packed_panel pv(g, isa, t, w, lda, rows, K, k0, nb);
                int bad = 0;
#if defined(TSR_CPU_HAVE_X86_KERNELS)
                if (t == TSR_TYPE_Q6_K && isa == TSR_CPU_ISA_AMX) {
                    // per super-block: 4 chunks of 64 k, each the hi plane's quads then the lo
                    // plane's (32 rows, stride 128); then the rows' d. v = 128 hi + lo must be
                    // the level times its scale per 16.
                    REQUIRE(g->a_bytes_32k * 8 == tcpu::Q6K_AMX_A_SB);
                    for (int b = 0; b < nb; ++b)
                        for (int r = 0; r < g->mr; ++r) {
                            const int64_t kb = k0 / 32 + b;
                            const bool live = r < rows && kb < K / 32;
                            const ref_block want = live ? read_ref_block(t, w.data() + r * lda, kb) : ref_block{};
                            const uint8_t * sb = pv.p + (size_t)(b / 8) * tcpu::Q6K_AMX_A_SB;
                            const uint8_t * chunk = sb + (size_t)(b % 8 / 2) * 4096 + (size_t)(b % 2) * 8 * 128;
                            for (int j = 0; j < 32; ++j) {
                                const size_t at = (size_t)(j / 4) * 128 + (size_t)r * 4 + j % 4;
                                const int v = 128 * (int8_t)chunk[at] + (int8_t)chunk[at + 2048];
                                bad += v != want.level[j] * want.sc[j / 16];
                            }
                            float d;
                            std::memcpy(&d, sb + 16 * 2 * 16 * 32 + (size_t)r * 4, 4);
                            bad += (double)d != want.d;
                        }
                    INFO("q6_K isa amx k0 " << k0);
                    CHECK(bad == 0);
                    continue;
                }
#endif
                REQUIRE(g->a_bytes_32k == (size_t)g->mr * (t == TSR_TYPE_Q3_K ? 36 : 40));
                for (int b = 0; b < nb; ++b)
                    for (int r = 0; r < g->mr; ++r) {
                        const int64_t kb = k0 / 32 + b;
                        const bool live = r < rows && kb < K / 32;
                        const ref_block want = live ? read_ref_block(t, w.data() + r * lda, kb) : ref_block{};
                        bad += (double)pv.scale(b, r) != want.scale;
                        if (t == TSR_TYPE_Q6_K) bad += (double)pv.scale(b, r, 1) != want.scale_hi;
                        else if (t != TSR_TYPE_Q3_K) bad += (double)pv.scale(b, r, 1) != want.min;
                        for (int j = 0; j < 32; ++j) bad += pv.level(b, r, j) != want.level[j];
                    }
                INFO(tsr_type_name(t) << " isa " << tsr_cpu_isa_name(isa) << " k0 " << k0);
                CHECK(bad == 0);
            }
        }
    }
}

// Q2_K (a min per 16, which would need sums of the activations per 16) is requantized
// per 32 when packed: each block's scale is its largest dequantized weight / 127 and each level is
// within half a step of the weight (tsr_to_float_row's values; NEON's panels keep Q8_0's
// fp16 scale, the rounded scale's error times the level on top); a block with an infinite
// fp16 scale gets scale NaN (its products are NaN, as in float arithmetic); rows and
// blocks past the ends 0.
TEST_CASE("GEMM A panels of Q2_K requantize every block within half a step", "[cpu][mul_mat][kernels][quant]") {
    std::mt19937 rng(23);
    const int64_t K = 512;
    const int rows = 5;
    for (tsr_type t : {TSR_TYPE_Q2_K}) {
        const size_t lda = tsr_row_size(t, K);
        std::vector<float> x((size_t)(K * rows));
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng) * (1.0f + (float)(i / 32 % 5));
        std::vector<uint8_t> w(lda * rows);
        REQUIRE(tsr_from_float_row(t, x.data(), w.data(), K * rows));
        // row 1's super-block at k0 gets d = +inf
        const int64_t k0 = 256;
        const size_t d_at = offsetof(tsr_block_q2_K, d);
        const int64_t inf_blocks = tsr_blck_size(t) / 32;
        const tsr_fp16_t inf16 = 0x7C00;
        std::memcpy(w.data() + lda + (size_t)(k0 / tsr_blck_size(t)) * tsr_type_size(t) + d_at, &inf16, 2);
        std::vector<float> deq((size_t)(K * rows));
        REQUIRE(tsr_to_float_row(t, w.data(), deq.data(), K * rows));
        for (tsr_cpu_isa isa : tsrt::isas()) {
            kernels_of k(isa);
            const tcpu::gemm_impl * g = gemm_of(k.K, t);
            if (!g) continue;
            const int nb = 16;  // 8 blocks from k0, 8 past K
            const packed_panel pv(g, isa, t, w, lda, rows, K, k0, nb);
            int bad = 0;
            for (int b = 0; b < nb; ++b)
                for (int r = 0; r < g->mr; ++r) {
                    const int64_t kb = k0 / 32 + b;
                    const float s = pv.scale(b, r);
                    if (r >= rows || kb >= K / 32) {
                        bad += s != 0.0f;
                        for (int j = 0; j < 32; ++j) bad += pv.level(b, r, j) != 0;
                        continue;
                    }
                    if (r == 1 && b < inf_blocks) {
                        bad += !std::isnan(s);
                        continue;
                    }
                    const float * wv = deq.data() + (size_t)r * K + kb * 32;
                    double amax = 0;
                    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs((double)wv[j]));
                    const double step = amax / 127, s_err = std::fabs(s - step);
                    bad += s_err > (isa == TSR_CPU_ISA_NEON ? 4.9e-4 : 1e-6) * step;
                    for (int j = 0; j < 32; ++j) {
                        const int q = pv.level(b, r, j);
                        bad += q < -127 || q > 127 || std::fabs((double)q * s - wv[j]) > 0.5 * step * (1 + 1e-5) + 127 * s_err + 1e-30;
                    }
                }
            INFO(tsr_type_name(t) << " isa " << tsr_cpu_isa_name(isa));
            CHECK(bad == 0);
        }
    }
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
namespace {

// Test operands of the AVX2 GEMM kernel tests: 8 rows of type t from its quantizer, odd
// rows at the levels' extremes (+-1 blocks), Q8_0 with a -128 per block in row 0 (its
// format allows it, its quantizer never writes it); 8 yq8 columns, odd ones +-1 (+-127
// once quantized).
struct gemm_operands {
    static constexpr int64_t K = 512;
    static constexpr int rows = 8, cols = 8;
    size_t lda;
    std::vector<uint8_t> w;
    std::vector<tcpu::yq8> y;
    gemm_operands(tsr_type t, std::mt19937 & rng) : lda(tsr_row_size(t, K)), w(lda * rows), y((size_t)(cols * (K / 32))) {
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        std::vector<float> wf((size_t)(rows * K));
        for (int r = 0; r < rows; ++r)
            for (int64_t k = 0; k < K; ++k) wf[(size_t)(r * K + k)] = r % 2 ? ((k / 3) % 2 ? 1.0f : -1.0f) : u(rng);
        REQUIRE(tsr_from_float_row(t, wf.data(), w.data(), rows * K));
        if (t == TSR_TYPE_Q8_0)
            for (int64_t b = 0; b < K / 32; ++b) w[(size_t)b * tsr_type_size(t) + 2 + (size_t)(b % 32)] = 0x80;
        for (int n = 0; n < cols; ++n) {
            std::vector<float> x((size_t)K);
            for (int64_t k = 0; k < K; ++k) x[(size_t)k] = n % 2 ? ((k / 5) % 2 ? 1.0f : -1.0f) : u(rng);
            tcpu::quantize_y_scalar(x.data(), y.data() + (size_t)n * (K / 32), K);
        }
    }
    // One tile of GEMM g over all K (kc = K): its own packers (finish_a included) and kernel;
    // C starts at 0.5 everywhere (column-major, ldc = rows).
    std::vector<float> tile(const tcpu::gemm_impl * g, int valid_rows, int valid_cols, bool accumulate) const {
        const int kc = (int)K;
        std::vector<uint8_t> ap(g->a_bytes_32k * (size_t)(kc / 32)), bp(g->b_bytes_32k * (size_t)(kc / 32));
        g->pack_a((const char *)w.data(), lda, valid_rows, K, 0, kc, ap.data());
        if (g->finish_a) g->finish_a(ap.data(), kc);
        g->pack_b((const char *)y.data(), (size_t)(K / 32) * sizeof(tcpu::yq8), valid_cols, K, 0, kc, bp.data());
        std::vector<float> c((size_t)(cols * rows), 0.5f);
        g->kernel(kc, ap.data(), bp.data(), c.data(), rows, valid_rows, valid_cols, accumulate);
        return c;
    }
};

const tsr_type avx2_gemm_types[] = {TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL,
                                    TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K};

} // namespace

// The AVX2 path's int8 GEMM kernels with AVX-VNNI (one vpdpbusd per quad) and without it
// (the pair kernel for signed panels, vpmaddubsw + vpmaddwd for the others), each on its own
// panels, give the same bits, for every panel kind (Q8_0's sign trick, Q4_0's int16 sums and
// bias, min panels, half panels, the requantized Q2_K): partial tiles, accumulate on and off.
TEST_CASE("GEMM: the AVX2 int8 kernels on AVX-VNNI give the bits of the kernels without it", "[cpu][mul_mat][kernels][quant]") {
    if (!tcpu::features().avx_vnni) {
        WARN("skipped: no AVX-VNNI on this CPU");
        return;
    }
    tcpu::cpu_features f = tcpu::features();
    const tcpu::kernels vnni = tcpu::make_kernels_avx2(f);
    f.avx_vnni = false;
    const tcpu::kernels plain = tcpu::make_kernels_avx2(f);
    std::mt19937 rng(29);
    for (tsr_type t : avx2_gemm_types) {
        const tcpu::gemm_impl * gv = tcpu::gemm_for(&vnni, t), * gp = tcpu::gemm_for(&plain, t);
        REQUIRE(gv != nullptr);
        REQUIRE(gp != nullptr);
        CHECK(gv->kernel != gp->kernel);
        const gemm_operands o(t, rng);
        for (int valid_rows : {o.rows, 5})
            for (int valid_cols : {o.cols, 3})
                for (bool accumulate : {false, true}) {
                    const std::vector<float> cv = o.tile(gv, valid_rows, valid_cols, accumulate), cp = o.tile(gp, valid_rows, valid_cols, accumulate);
                    INFO(tsr_type_name(t) << " rows " << valid_rows << " cols " << valid_cols << " accumulate " << accumulate);
                    CHECK(std::memcmp(cv.data(), cp.data(), cv.size() * sizeof(float)) == 0);
                }
    }
}

// The AVX2 pair kernel (signed panels without VNNI: Q8_0-style levels and Q6_K's half
// panels) against the int8 panel as its packer wrote it, before finish_a regroups it: per
// block (per 16 k for half panels) the exact integer sum of levels times the column's yq8
// bytes, then the int8 kernels' float steps (fma of the sum by A's scale times B's, the
// 0.5 already in C added when accumulating). Bit for bit; the C entries outside the
// partial tile stay as they were.
TEST_CASE("GEMM: the AVX2 pair kernel equals exact integer block sums, scaled as the int8 kernels scale them", "[cpu][mul_mat][kernels][quant]") {
    if (!tsr_cpu_isa_supported(TSR_CPU_ISA_AVX2)) {
        WARN("skipped: no AVX2 path on this CPU");
        return;
    }
    tcpu::cpu_features f = tcpu::features();
    f.avx_vnni = false;
    const tcpu::kernels plain = tcpu::make_kernels_avx2(f);
    std::mt19937 rng(31);
    int checked = 0;
    for (tsr_type t : avx2_gemm_types) {
        const tcpu::gemm_impl * g = tcpu::gemm_for(&plain, t);
        REQUIRE(g != nullptr);
        const int kind = tcpu::panel_kind_of(t);
        const bool is_signed = kind == tcpu::PANEL_HALVES || (kind == tcpu::PANEL_Q8 && t != TSR_TYPE_Q4_0);
        CHECK((g->finish_a != nullptr) == is_signed);  // the signed panels take the pair kernel
        if (!is_signed) continue;
        const gemm_operands o(t, rng);
        const int64_t nb = o.K / 32;
        const int parts = kind == tcpu::PANEL_HALVES ? 2 : 1;
        for (int valid_rows : {o.rows, 5})
            for (int valid_cols : {o.cols, 3})
                for (bool accumulate : {false, true}) {
                    std::vector<uint8_t> ap(g->a_bytes_32k * (size_t)nb);
                    g->pack_a((const char *)o.w.data(), o.lda, valid_rows, o.K, 0, (int)o.K, ap.data());
                    std::vector<float> want((size_t)(o.cols * o.rows), 0.5f);
                    for (int j = 0; j < valid_cols; ++j)
                        for (int r = 0; r < valid_rows; ++r) {
                            float acc = 0.0f;
                            for (int64_t b = 0; b < nb; ++b) {
                                const uint8_t * blk = ap.data() + (size_t)b * g->a_bytes_32k;
                                const tcpu::yq8 & yb = o.y[(size_t)(j * nb + b)];
                                for (int part = 0; part < parts; ++part) {
                                    int32_t sum = 0;
                                    for (int k = part * 32 / parts; k < (part + 1) * 32 / parts; ++k)
                                        sum += (int8_t)blk[((k / 4) * 8 + r) * 4 + k % 4] * yb.qs[k];
                                    float da;
                                    std::memcpy(&da, blk + 8 * 32 + 32 * part + 4 * r, 4);
                                    acc = std::fma((float)sum, da * yb.d, acc);
                                }
                            }
                            float & c = want[(size_t)(j * o.rows + r)];
                            c = accumulate ? c + acc : acc;
                        }
                    const std::vector<float> got = o.tile(g, valid_rows, valid_cols, accumulate);
                    INFO(tsr_type_name(t) << " rows " << valid_rows << " cols " << valid_cols << " accumulate " << accumulate);
                    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
                    ++checked;
                }
    }
    CHECK(checked == 6 * 8);  // Q8_0, Q5_0, IQ4_NL, Q2_K, Q3_K, Q6_K
}
#endif

// One weight matrix in a CPU_REPACK buffer and its twin in a plain CPU buffer, multiplied
// by the same activations; get_rows of both.
struct repack_pair {
    tsr_context * meta = nullptr;
    tsr_tensor *wr, *wp, *x, *cr, *cp, *ids, *gr, *gp;
    tsr_cgraph * gf;
    tsr_backend_buffer_t rb = nullptr, pb = nullptr, ab = nullptr;
    repack_pair(tsr_type t, int64_t K, int64_t M, int64_t N) {
        meta = tsr_init(tsr_init_params{16 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
        wr = tsr_new_tensor_2d(meta, t, K, M);
        wp = tsr_new_tensor_2d(meta, t, K, M);
        x = tsr_new_tensor_2d(meta, TSR_TYPE_F32, K, N);
        ids = tsr_new_tensor_1d(meta, TSR_TYPE_I32, 3);
        cr = tsr_mul_mat(meta, wr, x);
        cp = tsr_mul_mat(meta, wp, x);
        gr = tsr_get_rows(meta, wr, ids);
        gp = tsr_get_rows(meta, wp, ids);
        gf = tsr_new_graph(meta);
        for (tsr_tensor * o : {cr, cp, gr, gp}) tsr_build_forward_expand(gf, o);
        rb = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_repack_buffer_type(), tsr_nbytes(wr));
        pb = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_buffer_type(), tsr_nbytes(wp));
        if (!rb || !pb || !tsr_backend_tensor_alloc(rb, wr, tsr_backend_buffer_get_base(rb)) ||
            !tsr_backend_tensor_alloc(pb, wp, tsr_backend_buffer_get_base(pb)))
            return;
        ab = tsr_backend_alloc_ctx_tensors_from_buft(meta, tsr_backend_cpu_buffer_type());  // the rest
    }
    ~repack_pair() {
        tsr_backend_buffer_free(ab);
        tsr_backend_buffer_free(rb);
        tsr_backend_buffer_free(pb);
        tsr_free(meta);
    }
};

// sum_k w[m][k] * x[n][k] in double from the dequantized weights.
std::vector<double> ref_mul_mat(tsr_type t, const std::vector<uint8_t> & wq, const std::vector<float> & xv, int64_t K, int64_t M, int64_t N,
                                std::vector<double> & mag) {
    std::vector<float> w((size_t)(K * M));
    for (int64_t m = 0; m < M; ++m) tsr_to_float_row(t, wq.data() + (size_t)m * tsr_row_size(t, K), w.data() + m * K, K);
    std::vector<double> out((size_t)(M * N));
    mag.assign(out.size(), 0.0);
    for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < M; ++m)
            for (int64_t k = 0; k < K; ++k) {
                out[(size_t)(n * M + m)] += (double)w[(size_t)(m * K + k)] * xv[(size_t)(n * K + k)];
                mag[(size_t)(n * M + m)] += std::fabs((double)w[(size_t)(m * K + k)] * xv[(size_t)(n * K + k)]);
            }
    return out;
}

// A repack_pair's computed results: the CPU_REPACK mul_mat against the plain buffer's (bit for
// bit when `bitwise`: the GEMM's panels are the same bytes) and both against the double
// reference; get_rows gives the plain buffer's rows.
static void check_repack_results(const repack_pair & P, const std::vector<double> & ref, const std::vector<double> & mag, int64_t MN, bool bitwise) {
    const float * cr = (const float *)P.cr->data;
    const float * cp = (const float *)P.cp->data;
    if (bitwise) CHECK(std::memcmp(cr, cp, (size_t)MN * 4) == 0);
    for (int64_t i = 0; i < MN; ++i) {
        CHECK(std::fabs(cr[i] - cp[i]) <= 1e-5 * mag[(size_t)i]);
        CHECK(std::fabs(cr[i] - ref[(size_t)i]) <= 2e-2 * mag[(size_t)i]);  // 8-bit activations
    }
    CHECK(std::memcmp(P.gr->data, P.gp->data, tsr_nbytes(P.gp)) == 0);
}

// CPU_REPACK weights: Q4_0, IQ4_NL, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q3_K and Q2_K matrices (rows a multiple of 8; any for the
// word layouts of Q2_K and Q3_K) are stored interleaved
// (their bytes differ from the file's), others keep their bytes. mul_mat on them, at prompt
// size (9 columns, or from where the type takes the GEMM, gemm_min_cols: its A panels packed from the layout equal those packed from the file, so the
// results are bit for bit the plain buffer's) and for 1 and 3 columns (the interleaved
// mat-vec: the same exact int32 block sums, float sums in another order), equals the plain
// buffer's and the double reference; get_rows gives the plain buffer's rows; get returns the
// file's bytes, whole and in part; a part set or a memset go through the file's bytes.
// M = 200 (25 groups): on 2 threads the mat-vec takes two items (128 + 72 rows), the
// second with a group left over from its streams; the smaller M take one.
TEST_CASE("CPU_REPACK buffers: Q4_0 / IQ4_NL / Q4_1 / Q5_0 / Q5_1 / Q4_K / Q5_K / Q3_K / Q2_K interleaved in place, results equal a plain buffer's, get returns the bytes", "[cpu][mul_mat][repack]") {
    const int64_t K = 320;
    std::mt19937 rng(23);
    struct tcase { tsr_type t; int64_t M; bool interleaved; };
    for (tcase tc : {tcase{TSR_TYPE_Q4_0, 40, true}, tcase{TSR_TYPE_IQ4_NL, 48, true}, tcase{TSR_TYPE_Q4_0, 36, false},
                     tcase{TSR_TYPE_Q8_0, 40, false}, tcase{TSR_TYPE_Q4_K, 40, true}, tcase{TSR_TYPE_Q4_K, 20, false}, tcase{TSR_TYPE_Q3_K, 40, true}, tcase{TSR_TYPE_Q2_K, 16, true},
                     tcase{TSR_TYPE_Q3_K, 20, tcpu::words_layout_for_type(TSR_TYPE_Q3_K)}, tcase{TSR_TYPE_Q2_K, 12, tcpu::words_layout_for_type(TSR_TYPE_Q2_K)},
                     tcase{TSR_TYPE_Q5_K, 16, true}, tcase{TSR_TYPE_Q6_K, 16, false}, tcase{TSR_TYPE_Q4_1, 40, true}, tcase{TSR_TYPE_Q5_0, 40, true},
                     tcase{TSR_TYPE_Q5_1, 24, true}, tcase{TSR_TYPE_Q4_0, 200, true}, tcase{TSR_TYPE_Q4_K, 200, true}}) {
        const tsr_type t = tc.t;
        tc.interleaved = tc.interleaved && tcpu::k_r8_layout_used && tcpu::r8_type_has_simd(t);
        // 5 super-blocks: the GEMMs' kc (256, 512, 1024) end inside the row or past it
        const int64_t Kt = tsr_blck_size(t) == TSR_QK_K ? 5 * TSR_QK_K : K, M = tc.M;
        std::vector<float> wf((size_t)(Kt * M));
        for (float & v : wf) v = std::uniform_real_distribution<float>(-1, 1)(rng);
        std::vector<uint8_t> wq(tsr_row_size(t, Kt) * (size_t)M);
        REQUIRE(tsr_quantize_chunk(t, wf.data(), wq.data(), 0, M, Kt, nullptr) == wq.size());
        // the GEMM's columns: 9, or as many as the type needs to take it in either layout
        const int64_t n_gemm = std::max<int64_t>(9, tcpu::gemm_min_cols(t, tcpu::words_layout_for_type(t)));
        for (int64_t N : {n_gemm, int64_t(1), int64_t(3)}) {
            repack_pair P(t, Kt, M, N);
            REQUIRE((P.rb && P.pb && P.ab));
            REQUIRE(std::string(tsr_backend_buffer_name(P.rb)) == "CPU_REPACK");
            std::vector<float> xv((size_t)(Kt * N));
            for (float & v : xv) v = std::uniform_real_distribution<float>(-1, 1)(rng);
            const int32_t rows[3] = {(int32_t)M - 1, 0, 5};
            REQUIRE(tsr_backend_tensor_set(P.x, xv.data(), 0, xv.size() * 4));
            REQUIRE(tsr_backend_tensor_set(P.ids, rows, 0, sizeof(rows)));
            const size_t half = wq.size() / 2;  // in two parts, as loaders write
            REQUIRE(tsr_backend_tensor_set(P.wr, wq.data(), 0, half));
            REQUIRE(tsr_backend_tensor_set(P.wr, wq.data() + half, half, wq.size() - half));
            REQUIRE(tsr_backend_tensor_set(P.wp, wq.data(), 0, wq.size()));
            INFO(tsr_type_name(t) << " M " << M << " N " << N);
            CHECK(tcpu::is_r8_repacked(P.wr) == tc.interleaved);
            CHECK((std::memcmp(P.wr->data, wq.data(), wq.size()) != 0) == tc.interleaved);
            std::vector<uint8_t> back(wq.size());
            REQUIRE(tsr_backend_tensor_get(P.wr, back.data(), 0, back.size()));
            CHECK(back == wq);
            std::vector<uint8_t> part(back.size() / 3);  // a part not on group bounds
            REQUIRE(tsr_backend_tensor_get(P.wr, part.data(), 77, part.size()));
            CHECK(std::memcmp(part.data(), wq.data() + 77, part.size()) == 0);
            std::vector<double> mag;
            const std::vector<double> ref = ref_mul_mat(t, wq, xv, Kt, M, N, mag);
            for (int rep = 0; rep < 2; ++rep) {
                for (tsr_cpu_isa isa : tsrt::isas()) {
                    kernels_of k(isa);
                    INFO("isa " << tsr_cpu_isa_name(isa) << " rep " << rep);
                    if (tcpu::is_words_repacked(P.wr) && N < n_gemm) {
                        // the word kernels read the Q8_K blocks alone: no side blocks sized
                        const tcpu::mm_plan pl = tcpu::mm_make_plan(P.cr, k.K, 2);
                        CHECK(pl.y_q8k_words);
                        CHECK_FALSE(pl.y_q8k_side);
                        CHECK(pl.y_row == (size_t)(Kt / TSR_QK_K) * sizeof(tsr_block_q8_K));
                    }
                    tsrt::backend_holder be(2);
                    REQUIRE(tsr_backend_graph_compute(be, P.gf) == TSR_STATUS_SUCCESS);
                    check_repack_results(P, ref, mag, M * N, N == n_gemm || !tc.interleaved);
                }
                if (rep == 0) {  // a part rewritten with other bytes, then the original back: same results
                    std::vector<uint8_t> junk(100, 0x5a);
                    REQUIRE(tsr_backend_tensor_set(P.wr, junk.data(), 300, junk.size()));
                    REQUIRE(tsr_backend_tensor_get(P.wr, back.data(), 0, back.size()));
                    CHECK(std::memcmp(back.data() + 300, junk.data(), junk.size()) == 0);
                    CHECK(std::memcmp(back.data(), wq.data(), 300) == 0);
                    CHECK(std::memcmp(back.data() + 400, wq.data() + 400, wq.size() - 400) == 0);
                    REQUIRE(tsr_backend_tensor_memset(P.wr, 0x11, 10, 50));
                    REQUIRE(tsr_backend_tensor_get(P.wr, back.data(), 0, back.size()));
                    CHECK(std::all_of(back.begin() + 10, back.begin() + 60, [](uint8_t v) { return v == 0x11; }));
                    REQUIRE(tsr_backend_tensor_set(P.wr, wq.data(), 0, 400));
                    CHECK(tcpu::is_r8_repacked(P.wr) == tc.interleaved);
                    REQUIRE(tsr_backend_tensor_get(P.wr, back.data(), 0, back.size()));
                    CHECK(back == wq);
                }
            }
        }
    }
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
// The Q4_K / Q5_K record mat-vecs prefetch two lines before each of a record's 16 loads of
// 64 bytes: together the steps ask for every line of the record (18 and 22 lines), none more
// than twice, and the lines in order (no line is asked for after a later one's first ask).
template <size_t BYTES>
static void check_record_prefetch_lines() {
    using P = tcpu::k4_record_prefetcher<BYTES>;
    const int L = (int)((BYTES + 63) / 64);
    std::vector<int> asked((size_t)L + 1, 0);
    int prev = -1;
    for (int s = 0; s < 16; ++s) {
        const int l = P::first_line(s);
        CHECK(l >= prev);
        prev = l;
        ++asked[(size_t)l];
        ++asked[(size_t)l + 1];
    }
    for (int l = 0; l < L; ++l) {
        INFO("record of " << BYTES << " bytes, line " << l);
        CHECK(asked[(size_t)l] >= 1);
        CHECK(asked[(size_t)l] <= 2);
    }
}
TEST_CASE("CPU_REPACK: the Q4_K / Q5_K record prefetch asks for every line of a record once or twice", "[cpu][repack]") {
    check_record_prefetch_lines<tcpu::Q4K_R8_BYTES>();
    check_record_prefetch_lines<tcpu::Q5K_R8_BYTES>();
}
#endif

// The word layouts of Q2_K and Q3_K have SIMD kernels on the AVX-512 path only: weights set
// while the AVX2 path is forced (TSR_CPU_ISA=avx2 on an AVX-512 CPU) take that path's layouts
// (Q3_K's record, Q2_K's record or file rows), whose AVX2 kernels read them, and their
// mat-vec still equals the plain buffer's and the double reference.
TEST_CASE("CPU_REPACK: Q2_K and Q3_K set while the AVX2 path is in use take its layouts, not the words", "[cpu][mul_mat][repack]") {
    if (!tsr_cpu_isa_supported(TSR_CPU_ISA_AVX2)) {
        WARN("skipped: no AVX2 path on this CPU");
        return;
    }
    std::mt19937 rng(29);
    const int64_t K = 2 * TSR_QK_K, M = 16, N = 1;
    for (tsr_type t : {TSR_TYPE_Q2_K, TSR_TYPE_Q3_K}) {
        INFO(tsr_type_name(t));
        std::vector<float> wf((size_t)(K * M)), xv((size_t)(K * N));
        for (float & v : wf) v = std::uniform_real_distribution<float>(-1, 1)(rng);
        for (float & v : xv) v = std::uniform_real_distribution<float>(-1, 1)(rng);
        std::vector<uint8_t> wq(tsr_row_size(t, K) * (size_t)M);
        REQUIRE(tsr_quantize_chunk(t, wf.data(), wq.data(), 0, M, K, nullptr) == wq.size());
        kernels_of k(TSR_CPU_ISA_AVX2);
        repack_pair P(t, K, M, N);
        REQUIRE((P.rb && P.pb && P.ab));
        const int32_t rows[3] = {(int32_t)M - 1, 0, 5};
        REQUIRE(tsr_backend_tensor_set(P.x, xv.data(), 0, xv.size() * 4));
        REQUIRE(tsr_backend_tensor_set(P.ids, rows, 0, sizeof(rows)));
        REQUIRE(tsr_backend_tensor_set(P.wr, wq.data(), 0, wq.size()));
        REQUIRE(tsr_backend_tensor_set(P.wp, wq.data(), 0, wq.size()));
        CHECK_FALSE(tcpu::is_words_repacked(P.wr));
        if (t == TSR_TYPE_Q3_K) CHECK(tcpu::is_r8_repacked(P.wr));  // the AVX2 path's record
        std::vector<uint8_t> back(wq.size());
        REQUIRE(tsr_backend_tensor_get(P.wr, back.data(), 0, back.size()));
        CHECK(back == wq);
        tsrt::backend_holder be(2);
        REQUIRE(tsr_backend_graph_compute(be, P.gf) == TSR_STATUS_SUCCESS);
        std::vector<double> mag;
        const std::vector<double> ref = ref_mul_mat(t, wq, xv, K, M, N, mag);
        check_repack_results(P, ref, mag, M * N, false);
    }
}

// Quantized file rows (the K-quants and 32-weight types CPU_REPACK interleaves) for the layout tests: random bytes, the first group's all
// 0xFF (the largest levels and scales) and the second's all 0x00 (Q3_K: levels -4, scales
// -32); with finite_scales, every super-block's fp16 scales (d, dmin) then replaced by finite
// values of either sign up to dmax.
std::vector<uint8_t> kquant_test_rows(tsr_type t, int64_t M, int64_t nb, bool finite_scales, float dmax, std::mt19937 & rng) {
    const size_t bbytes = tsr_type_size(t), row_bytes = (size_t)nb * bbytes;
    std::vector<uint8_t> file((size_t)M * row_bytes);
    for (auto & v : file) v = (uint8_t)(rng() & 0xff);
    std::memset(file.data(), 0xff, 8 * row_bytes);
    std::memset(file.data() + 8 * row_bytes, 0x00, 8 * row_bytes);
    const std::vector<size_t> fp16_at = t == TSR_TYPE_Q4_K   ? std::vector<size_t>{offsetof(tsr_block_q4_K, d), offsetof(tsr_block_q4_K, dmin)}
                                        : t == TSR_TYPE_Q5_K ? std::vector<size_t>{offsetof(tsr_block_q5_K, d), offsetof(tsr_block_q5_K, dmin)}
                                        : t == TSR_TYPE_Q2_K ? std::vector<size_t>{offsetof(tsr_block_q2_K, d), offsetof(tsr_block_q2_K, dmin)}
                                        : t == TSR_TYPE_Q3_K ? std::vector<size_t>{offsetof(tsr_block_q3_K, d)}
                                        : t == TSR_TYPE_Q4_1 || t == TSR_TYPE_Q5_1 ? std::vector<size_t>{0, 2}  /* d, m */
                                                                                   : std::vector<size_t>{0};    /* d */
    if (finite_scales)
        for (size_t b = 0; b < file.size() / bbytes; ++b)
            for (size_t off : fp16_at) {
                const tsr_fp16_t h = tsr_fp32_to_fp16(std::uniform_real_distribution<float>(-dmax, dmax)(rng));
                std::memcpy(file.data() + b * bbytes + off, &h, 2);
            }
    return file;
}

std::vector<uint8_t> to_r8(tsr_type t, const std::vector<uint8_t> & file, int64_t M, int64_t nb) {
    const size_t row_bytes = (size_t)nb * tsr_type_size(t);
    std::vector<uint8_t> r8 = file, tmp(8 * row_bytes);
    for (int64_t g0 = 0; g0 < M; g0 += 8) tcpu::r8_group_in_place(t, r8.data() + (size_t)g0 * row_bytes, nb, true, tmp.data());
    return r8;
}

// A K-quant type's records against the file's blocks: check(x, rec, r) counts what differs
// between each file block x and its group's record rec (x row r of it); then a row's blocks
// from the middle of a group come back alone, and every group back to the file's bytes.
template <class BLOCK, class CHECK_BLOCK>
void check_record_bijection(tsr_type t, const std::vector<uint8_t> & file, int64_t M, int64_t nb, CHECK_BLOCK check) {
    const size_t row_bytes = (size_t)nb * sizeof(BLOCK);
    std::vector<uint8_t> r8 = to_r8(t, file, M, nb);
    INFO(tsr_type_name(t));
    CHECK(r8 != file);
    int bad = 0;
    for (int64_t m = 0; m < M; ++m)
        for (int64_t b = 0; b < nb; ++b) {
            BLOCK x;
            std::memcpy(&x, file.data() + (size_t)m * row_bytes + (size_t)b * sizeof(x), sizeof(x));
            bad += check(x, r8.data() + (size_t)(m / 8 * 8) * row_bytes + (size_t)b * 8 * sizeof(x), (int)(m % 8));
        }
    CHECK(bad == 0);
    std::vector<uint8_t> part((size_t)(nb - 1) * sizeof(BLOCK));  // row 13's blocks from 1
    tcpu::r8_row_to_file(t, r8.data() + 8 * row_bytes, 5, 1, nb - 1, part.data());
    CHECK(std::memcmp(part.data(), file.data() + 13 * row_bytes + sizeof(BLOCK), part.size()) == 0);
    std::vector<uint8_t> tmp(8 * row_bytes);
    for (int64_t g0 = 0; g0 < M; g0 += 8) tcpu::r8_group_in_place(t, r8.data() + (size_t)g0 * row_bytes, nb, false, tmp.data());
    CHECK(r8 == file);
}

// The Q4_K and Q5_K records hold each row's d, dmin, scales, mins and levels where the
// kernels read them (against the core's decoding of the file's packed scales and the
// format's nibble order, Q5_K's fifth bit e / 32 of qh[e % 32]), and convert back to the
// file's bytes exactly: random bytes (every bit of the scale bytes and of d / dmin, NaN
// patterns included) and all-0x00 / all-0xFF blocks.
template <class BLOCK>
void check_k4_record(tsr_type t, std::mt19937 & rng) {
    constexpr bool q5 = std::is_same<BLOCK, tsr_block_q5_K>::value;
    const int64_t nb = 3, M = 24;
    const std::vector<uint8_t> file = kquant_test_rows(t, M, nb, false, 0, rng);
    check_record_bijection<BLOCK>(t, file, M, nb, [](const BLOCK & x, const uint8_t * rec, int r) {
        int bad = std::memcmp(rec + 2 * r, &x.d, 2) != 0;
        bad += std::memcmp(rec + tcpu::Q4K_R8_DMIN + 2 * r, &x.dmin, 2) != 0;
        for (int s = 0; s < 8; ++s) {
            int sc, mn, rsc, rmn;
            tsr_impl::k4_scale_min(s, x.scales, &sc, &mn);
            tcpu::q4k_record_scale_min(rec, s, r, &rsc, &rmn);
            bad += sc != rsc || mn != rmn;
        }
        for (int e = 0; e < 256; ++e) {  // weight e: sub-block e / 32, nibble of qs[32 * (e / 64) + e % 32]
            const int s = e / 32, l = e % 32;
            int level = (x.qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
            if constexpr (q5) level |= (x.qh[l] >> s & 1) << 4;
            bad += level != tcpu::k4_record_level<q5>(rec, e, r);
        }
        return bad;
    });
}

TEST_CASE("CPU_REPACK: the Q4_K and Q5_K records are bijections of 8 super-blocks, each value where the kernels read it", "[cpu][repack]") {
    std::mt19937 rng(37);
    check_k4_record<tsr_block_q4_K>(TSR_TYPE_Q4_K, rng);
    check_k4_record<tsr_block_q5_K>(TSR_TYPE_Q5_K, rng);
}

// The Q3_K and Q2_K records hold each row's d (and dmin), scale bytes and levels (2 bits
// of qs, Q3_K's third of hmask) where the kernels read them, against the format's
// decoding, and convert back to the file's bytes exactly: random bytes (NaN patterns in d
// included) and all-0x00 / all-0xFF blocks.
template <class BLOCK>
void check_k2_record(tsr_type t, std::mt19937 & rng) {
    const bool q3 = t == TSR_TYPE_Q3_K;
    const int64_t nb = 2, M = 24;
    const std::vector<uint8_t> file = kquant_test_rows(t, M, nb, false, 0, rng);
    check_record_bijection<BLOCK>(t, file, M, nb, [q3](const BLOCK & x, const uint8_t * rec, int r) {
        int bad = std::memcmp(rec + 2 * r, &x.d, 2) != 0;
        if constexpr (std::is_same<BLOCK, tsr_block_q2_K>::value) bad += std::memcmp(rec + tcpu::Q2K_R8_DMIN + 2 * r, &x.dmin, 2) != 0;
        const int scales_at = q3 ? (int)tcpu::Q3K_R8_SCALES : (int)tcpu::Q2K_R8_SCALES;
        for (size_t k = 0; k < sizeof(x.scales); ++k) bad += rec[(size_t)scales_at + 8 * k + (size_t)r] != x.scales[k];
        for (int e = 0; e < 256; ++e) {  // the format: 2 bits of qs; Q3_K's third: bit e / 32 of hmask[e % 32]
            int level = tsr_impl::q2_value(x.qs, e);
            if constexpr (std::is_same<BLOCK, tsr_block_q3_K>::value) level |= (x.hmask[e % 32] >> (e / 32) & 1) << 2;
            bad += level != (q3 ? tcpu::q3k_record_level(rec, e, r) : tcpu::q2k_record_level(rec, e, r));
        }
        return bad;
    });
}

TEST_CASE("CPU_REPACK: the Q3_K and Q2_K records are bijections of 8 super-blocks, each value where the kernels read it", "[cpu][repack]") {
    std::mt19937 rng(43);
    check_k2_record<tsr_block_q3_K>(TSR_TYPE_Q3_K, rng);
    check_k2_record<tsr_block_q2_K>(TSR_TYPE_Q2_K, rng);
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
// The Q2_K, Q3_K, Q4_K and Q5_K GEMMs' panels (Q2_K's requantized, Q3_K's levels times scales,
// the others' min panels)
// packed from the interleaved layout by direct equal those the file packer makes (levels,
// scales and mins bit for bit), for panel starts in and past the rows, k0 on and inside
// super-blocks, kc past K; and through the file's blocks (rows not whole groups).
template <int R, tsr_type T>
void check_r8_kquant_panel(tcpu::r8_pack_fn direct, tcpu::pack_panel_fn reference, std::mt19937 & rng) {
    const int64_t nb = 3, K = nb * TSR_QK_K, M = 40;
    const size_t row_bytes = (size_t)nb * tsr_type_size(T);
    const std::vector<uint8_t> file = kquant_test_rows(T, M, nb, true, 0.01f, rng);
    const std::vector<uint8_t> r8 = to_r8(T, file, M, nb);
    tcpu::gemm_impl g{};
    g.pack_a = reference;
    for (int kc : {256, 512})
        for (int64_t k0 : {int64_t(0), int64_t(96), int64_t(512)})
            for (int64_t row0 : {int64_t(0), int64_t(8), int64_t(24)}) {
                const int rows = (int)std::min<int64_t>(R, M - row0);
                std::vector<uint8_t> got((size_t)R * (T == TSR_TYPE_Q3_K || T == TSR_TYPE_Q2_K ? 36 : 40) * (kc / 32)), want(got.size()), via(got.size());
                direct(r8.data(), row_bytes, row0, rows, K, k0, kc, got.data());
                reference((const char *)file.data() + (size_t)row0 * row_bytes, row_bytes, rows, K, k0, kc, want.data());
                INFO(tsr_type_name(T) << " R " << R << " kc " << kc << " k0 " << k0 << " row0 " << row0);
                CHECK(got == want);
                const int odd_rows = std::min(rows, 5);  // from row row0 + 3: not a group's start
                tcpu::r8_pack_via_file(&g, T, r8.data(), row_bytes, row0 + 3, odd_rows, K, k0, kc, via.data());
                reference((const char *)file.data() + (size_t)(row0 + 3) * row_bytes, row_bytes, odd_rows, K, k0, kc, want.data());
                CHECK(via == want);
            }
}
#endif

// The GEMM A panels packed straight from the interleaved layout equal those the GEMMs'
// own packers make from the file's bytes, for every panel height and value mapping in use
// (x86 with AVX2: the packers are AVX2 code), K past the last block included.
template <int R, tsr_type T, uint8_t XOR>
void check_r8_panel(tcpu::pack_panel_fn reference, std::mt19937 & rng) {
    const int64_t nb = 5, K = nb * 32, M = 40;
    std::vector<uint8_t> file((size_t)(M * nb) * 18);
    for (auto & v : file) v = (uint8_t)(rng() & 0xff);
    for (size_t b = 0; b < file.size() / 18; ++b) {
        const tsr_fp16_t d = tsr_fp32_to_fp16(std::uniform_real_distribution<float>(-0.01f, 0.01f)(rng));
        std::memcpy(file.data() + b * 18, &d, 2);
    }
    std::vector<uint8_t> r8(file.size()), tmp(file.size());
    r8 = file;
    for (int64_t g0 = 0; g0 < M; g0 += 8) tcpu::r8_group_in_place(T, r8.data() + (size_t)g0 * nb * 18, nb, true, tmp.data());
    const int kc = 6 * 32;
    for (int64_t row0 : {int64_t(0), int64_t(8)}) {
        const int rows = (int)std::min<int64_t>(R, M - row0);
        std::vector<uint8_t> got((size_t)R * 36 * 6), want(got.size());
        tcpu::r8_pack_panel<R, T, XOR>(r8.data(), (size_t)nb * 18, row0, rows, K, 0, kc, got.data());
        reference((const char *)file.data() + (size_t)row0 * nb * 18, (size_t)nb * 18, rows, K, 0, kc, want.data());
        INFO(tsr_type_name(T) << " R " << R << " row0 " << row0);
        CHECK(got == want);
    }
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
// The Q4_1 / Q5_0 / Q5_1 GEMMs' panels (Q5_0's signed levels, the others' min panels) packed
// from the interleaved layout equal those the file packer makes (levels, scales, mins bit for
// bit), for panel starts in and past the rows and kc past K.
template <int R, tsr_type T, uint8_t XOR>
void check_r8_q32_panel(tcpu::pack_panel_fn reference, std::mt19937 & rng) {
    const int64_t nb = 5, K = nb * 32, M = 40;
    const size_t row_bytes = (size_t)nb * tsr_type_size(T);
    const std::vector<uint8_t> file = kquant_test_rows(T, M, nb, true, 0.01f, rng);
    const std::vector<uint8_t> r8 = to_r8(T, file, M, nb);
    const int kc = 6 * 32;
    const size_t panel_bytes = (size_t)R * (T == TSR_TYPE_Q5_0 ? 36 : 40) * 6;
    for (int64_t row0 : {int64_t(0), int64_t(8), int64_t(32)}) {
        const int rows = (int)std::min<int64_t>(R, M - row0);
        std::vector<uint8_t> got(panel_bytes), want(panel_bytes);
        tcpu::r8_q32_pack_panel<R, T, XOR>(r8.data(), row_bytes, row0, rows, K, 0, kc, got.data());
        reference((const char *)file.data() + (size_t)row0 * row_bytes, row_bytes, rows, K, 0, kc, want.data());
        INFO(tsr_type_name(T) << " R " << R << " row0 " << row0);
        CHECK(got == want);
    }
}
#endif

TEST_CASE("CPU_REPACK: GEMM panels packed from the interleaved layout equal the file packers' panels", "[cpu][mul_mat][repack]") {
    std::mt19937 rng(29);
    using namespace tcpu;
#if defined(TSR_CPU_HAVE_X86_KERNELS)
    const std::vector<tsr_cpu_isa> isas = tsrt::isas();
    if (std::find(isas.begin(), isas.end(), TSR_CPU_ISA_AVX2) == isas.end()) return;  // the x86 packers are AVX2 code
    check_r8_panel<8, TSR_TYPE_Q4_0, 0>(pack_panel_i8_avx2<8, TSR_TYPE_Q4_0, 0, 8>, rng);
    check_r8_panel<32, TSR_TYPE_Q4_0, 0>(pack_panel_i8_avx2<32, TSR_TYPE_Q4_0, 0, 8>, rng);
    check_r8_panel<8, TSR_TYPE_IQ4_NL, 0>(pack_panel_i8_avx2<8, TSR_TYPE_IQ4_NL, 0, 0>, rng);
    check_r8_panel<32, TSR_TYPE_IQ4_NL, 0x80>(pack_panel_i8_avx2<32, TSR_TYPE_IQ4_NL, 0x80, 0x80>, rng);
    check_r8_kquant_panel<8, TSR_TYPE_Q4_K>(r8_k4_pack_panel<8, false>, pack_panel_i8_avx2<8, TSR_TYPE_Q4_K, 0, 0, PANEL_MIN>, rng);
    check_r8_kquant_panel<32, TSR_TYPE_Q4_K>(r8_k4_pack_panel<32, false>, pack_panel_i8_avx2<32, TSR_TYPE_Q4_K, 0, 0, PANEL_MIN>, rng);
    check_r8_kquant_panel<8, TSR_TYPE_Q5_K>(r8_k4_pack_panel<8, true>, pack_panel_i8_avx2<8, TSR_TYPE_Q5_K, 0, 0, PANEL_MIN>, rng);
    check_r8_kquant_panel<32, TSR_TYPE_Q5_K>(r8_k4_pack_panel<32, true>, pack_panel_i8_avx2<32, TSR_TYPE_Q5_K, 0, 0, PANEL_MIN>, rng);
    check_r8_kquant_panel<8, TSR_TYPE_Q3_K>(r8_k2_pack_panel<8, TSR_TYPE_Q3_K, 0>, pack_panel_i8_avx2<8, TSR_TYPE_Q3_K, 0, 0, PANEL_Q8>, rng);
    check_r8_kquant_panel<32, TSR_TYPE_Q3_K>(r8_k2_pack_panel<32, TSR_TYPE_Q3_K, 0>, pack_panel_i8_avx2<32, TSR_TYPE_Q3_K, 0, 0, PANEL_Q8>, rng);
    check_r8_kquant_panel<32, TSR_TYPE_Q3_K>(r8_k2_pack_panel<32, TSR_TYPE_Q3_K, 0x80>, pack_panel_i8_avx2<32, TSR_TYPE_Q3_K, 0x80, 0x80, PANEL_Q8>, rng);
    check_r8_kquant_panel<8, TSR_TYPE_Q2_K>(r8_k2_pack_panel<8, TSR_TYPE_Q2_K, 0>, pack_panel_i8_avx2<8, TSR_TYPE_Q2_K, 0, 0, PANEL_Q8>, rng);
    check_r8_kquant_panel<32, TSR_TYPE_Q2_K>(r8_k2_pack_panel<32, TSR_TYPE_Q2_K, 0>, pack_panel_i8_avx2<32, TSR_TYPE_Q2_K, 0, 0, PANEL_Q8>, rng);
    check_r8_kquant_panel<32, TSR_TYPE_Q2_K>(r8_k2_pack_panel<32, TSR_TYPE_Q2_K, 0x80>, pack_panel_i8_avx2<32, TSR_TYPE_Q2_K, 0x80, 0x80, PANEL_Q8>, rng);
    check_r8_q32_panel<8, TSR_TYPE_Q5_0, 0>(pack_panel_i8_avx2<8, TSR_TYPE_Q5_0, 0, 0, PANEL_Q8>, rng);
    check_r8_q32_panel<32, TSR_TYPE_Q5_0, 0x80>(pack_panel_i8_avx2<32, TSR_TYPE_Q5_0, 0x80, 0x80, PANEL_Q8>, rng);
    check_r8_q32_panel<32, TSR_TYPE_Q5_0, 0>(pack_panel_i8_avx2<32, TSR_TYPE_Q5_0, 0, 0, PANEL_Q8>, rng);
    check_r8_q32_panel<8, TSR_TYPE_Q4_1, 0>(pack_panel_i8_avx2<8, TSR_TYPE_Q4_1, 0, 0, PANEL_MIN>, rng);
    check_r8_q32_panel<8, TSR_TYPE_Q5_1, 0>(pack_panel_i8_avx2<8, TSR_TYPE_Q5_1, 0, 0, PANEL_MIN>, rng);
#endif
}

// One ISA's interleaved mat-vec dots over the M / 8 groups of r8 (gstride bytes apart), one
// group at a time and dots.streams at once, each row against want within 1e-6 of mag (the
// caller's INFO names the type and ISA).
template <class Y>
void check_r8_dots_rows(const tcpu::r8_dots_of<Y> & dots, const std::vector<uint8_t> & r8, size_t gstride, int64_t nb, const std::vector<Y> & y,
                        const std::vector<double> & want, const std::vector<double> & mag) {
    const int64_t M = (int64_t)want.size();
    REQUIRE(dots.streams <= tcpu::R8_MAX_STREAMS);
    std::vector<float> one((size_t)M), multi((size_t)M);
    for (int64_t g = 0; g < M / 8; ++g) dots.one(r8.data() + (size_t)g * gstride, 0, nb, y.data(), one.data() + g * 8);
    for (int64_t g0 = 0; g0 + dots.streams <= M / 8; g0 += dots.streams)
        dots.multi(r8.data() + (size_t)g0 * gstride, gstride, nb, y.data(), multi.data() + g0 * 8);
    INFO("streams " << dots.streams);
    for (int64_t m = 0; m < M; ++m) {
        INFO("row " << m << " want " << want[(size_t)m]);
        CHECK(std::fabs(one[(size_t)m] - want[(size_t)m]) <= 1e-6 * mag[(size_t)m]);
        CHECK(std::fabs(multi[(size_t)m] - want[(size_t)m]) <= 1e-6 * mag[(size_t)m]);
    }
}

// Q8_K activations for the K-quant r8 kernels: block 0 all -128, block 1 all 127 (the
// int16 sums at their largest), the rest random; bsums as the quantizer makes them.
std::vector<tsr_block_q8_K> q8k_test_activations(int64_t nb, std::mt19937 & rng) {
    std::vector<tsr_block_q8_K> y((size_t)nb);
    for (int64_t b = 0; b < nb; ++b) {
        tsr_block_q8_K & yb = y[(size_t)b];
        yb.d = std::uniform_real_distribution<float>(0.001f, 0.01f)(rng);
        for (int j = 0; j < 256; ++j) yb.qs[j] = b == 0 ? (int8_t)-128 : b == 1 ? (int8_t)127 : (int8_t)((int)(rng() % 256) - 128);
        for (int k = 0; k < 16; ++k) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += yb.qs[16 * k + j];
            yb.bsums[k] = (int16_t)sum;
        }
    }
    return y;
}

// The Q4_K interleaved mat-vec kernels of every ISA, one group and several at once, against
// double sums of the format's weights d * sc * q - dmin * mn (the core's scale decoding)
// times the activations: random blocks and the extremes (levels, scales and mins all 15 /
// 63 or all 0, activations all -128 or 127: a sub-block's int16 sums at their largest).
TEST_CASE("CPU_REPACK: the Q4_K interleaved mat-vec kernels of every ISA equal double sums, extremes included", "[cpu][repack]") {
    std::mt19937 rng(41);
    const int64_t nb = 3, M = 8 * 4;
    const size_t row_bytes = (size_t)nb * sizeof(tsr_block_q4_K);
    const std::vector<uint8_t> file = kquant_test_rows(TSR_TYPE_Q4_K, M, nb, true, 0.05f, rng);
    const std::vector<uint8_t> r8 = to_r8(TSR_TYPE_Q4_K, file, M, nb);
    const std::vector<tsr_block_q8_K> y = q8k_test_activations(nb, rng);
    std::vector<double> want((size_t)M), mag((size_t)M);
    for (int64_t m = 0; m < M; ++m)
        for (int64_t b = 0; b < nb; ++b) {
            tsr_block_q4_K x;
            std::memcpy(&x, file.data() + (size_t)m * row_bytes + (size_t)b * sizeof(x), sizeof(x));
            const double d = tsr_fp16_to_fp32(x.d), dmin = tsr_fp16_to_fp32(x.dmin), yd = y[(size_t)b].d;
            for (int e = 0; e < 256; ++e) {
                int sc, mn;
                tsr_impl::k4_scale_min(e / 32, x.scales, &sc, &mn);
                const int q = (x.qs[32 * (e / 64) + e % 32] >> (4 * (e / 32 % 2))) & 15;
                const double yv = yd * y[(size_t)b].qs[e];
                want[(size_t)m] += (d * sc * q - dmin * mn) * yv;
                mag[(size_t)m] += (std::fabs(d * sc * q) + std::fabs(dmin * mn)) * std::fabs(yv);
            }
        }
    const size_t gstride = 8 * row_bytes;
    for (tsr_cpu_isa isa : tsrt::isas()) {
        kernels_of k(isa);
        const auto dots = tcpu::r8_q4k_dots();
        INFO("isa " << tsr_cpu_isa_name(isa));
        check_r8_dots_rows(dots, r8, gstride, nb, y, want, mag);
    }
}

// The interleaved mat-vec dots of type t (get_dots(f): the kernels for CPU features f) of
// every ISA, AVX-512 also without GFNI, on the nb blocks of the M file rows, against double
// sums of the rows' weights (the core's dequantization) times the activations y.
template <class Y, class GET_DOTS>
void check_r8_dots_against_file(tsr_type t, const std::vector<uint8_t> & file, int64_t M, int64_t nb, const std::vector<Y> & y, GET_DOTS get_dots) {
    const int64_t bk = (int64_t)sizeof(y[0].qs), K = nb * tsr_blck_size(t);  /* activations per block */
    const size_t row_bytes = (size_t)nb * tsr_type_size(t);
    const std::vector<uint8_t> r8 = to_r8(t, file, M, nb);
    std::vector<double> want((size_t)M), mag((size_t)M);
    std::vector<float> w((size_t)K);
    for (int64_t m = 0; m < M; ++m) {
        tsr_to_float_row(t, file.data() + (size_t)m * row_bytes, w.data(), K);
        for (int64_t k = 0; k < K; ++k) {
            const double yv = (double)y[(size_t)(k / bk)].d * y[(size_t)(k / bk)].qs[k % bk];
            want[(size_t)m] += (double)w[(size_t)k] * yv;
            mag[(size_t)m] += std::fabs((double)w[(size_t)k] * yv);
        }
    }
    for (tsr_cpu_isa isa : tsrt::isas())
        for (bool gfni : {true, false}) {  // false: the kernel of a CPU without GFNI
            if (!gfni && !tcpu::features().avx512_gfni) continue;
            kernels_of k(isa);
            tcpu::cpu_features f = tcpu::features();
            f.avx512_gfni = gfni && f.avx512_gfni;
            INFO(tsr_type_name(t) << " isa " << tsr_cpu_isa_name(isa) << " gfni " << f.avx512_gfni);
            check_r8_dots_rows(get_dots(f), r8, 8 * row_bytes, nb, y, want, mag);
        }
}

// The Q5_K, Q3_K and Q2_K interleaved mat-vec kernels of every ISA (AVX-512 also without
// GFNI), one group and several at once, against double sums of the format's weights (the
// core's dequantization: Q3_K's d x (scale - 32) x (level - 4) exact in float, Q5_K's and
// Q2_K's d x scale x level - dmin x min rounded once) times the activations: random blocks
// and the extremes (all 0xFF: Q5_K's levels 31, scales and mins 63, Q3_K's levels 3 and
// scales 31, Q2_K's levels 3, scales and mins 15; all 0x00: Q3_K's levels -4 and scales
// -32; against activations all -128 or 127: Q5_K's int16 sums of 4 chunks at their largest).
void check_r8_k2_dots(tsr_type t, std::mt19937 & rng) {
    const int64_t nb = 3, M = 8 * 4;
    const std::vector<uint8_t> file = kquant_test_rows(t, M, nb, true, 0.05f, rng);
    check_r8_dots_against_file(t, file, M, nb, q8k_test_activations(nb, rng), [t](const tcpu::cpu_features & f) {
        return t == TSR_TYPE_Q5_K ? tcpu::r8_q5k_dots() : t == TSR_TYPE_Q3_K ? tcpu::r8_k2_dots<true>(f) : tcpu::r8_k2_dots<false>(f);
    });
}

TEST_CASE("CPU_REPACK: the Q5_K, Q3_K and Q2_K interleaved mat-vec kernels of every ISA equal double sums, extremes included", "[cpu][repack]") {
    std::mt19937 rng(47);
    check_r8_k2_dots(TSR_TYPE_Q5_K, rng);
    check_r8_k2_dots(TSR_TYPE_Q3_K, rng);
    check_r8_k2_dots(TSR_TYPE_Q2_K, rng);
}

// The word layouts of Q2_K and Q3_K (repack_words.inl) against the format: every level where
// the layout says (qs byte 4s + k, bits 2j: the two low bits of weight 16s + 4j + k) from the
// file's bits (byte 32 (e / 128) + e % 32, bits 2 (e % 128 / 32)); Q3_K's third bit (file:
// bit e / 32 of hmask byte e % 32) at bit j of layout byte 4s + k for s < 8, bit 4 + j of
// byte 4 (s - 8) + k for s >= 8, and its 16 scales as 6-bit fields at bit 6s equal to the
// format's; Q2_K's scale bytes, d and dmin, Q3_K's d untouched; the file's bytes back
// exactly (in place, and as the GEMM converts); each conversion both scalar and by VBMI's
// bit gathers where the CPU has them; the activations' word order; then the layout's mat-vec kernels of every ISA, 4 rows
// and 1 row, against double sums of the core's dequantization times the activations, extremes
// included (all-0xFF and all-0x00 blocks: the largest and smallest levels and scales against
// activations all -128 or 127, every word's sum at its largest), a row's result the same for
// every row count.
void check_words_layout(tsr_type t, std::mt19937 & rng) {
    INFO(tsr_type_name(t));
    const bool q3 = t == TSR_TYPE_Q3_K;
    const size_t bb = tsr_type_size(t), qs_at = q3 ? 32 : 16;
    const int64_t nb = 3, M = 20, K = nb * TSR_QK_K;  // 16 + 4 rows: the test rows' two extreme groups, and no multiple of 8
    const size_t row_bytes = (size_t)nb * bb;
    const std::vector<uint8_t> file = kquant_test_rows(t, M, nb, true, 0.05f, rng);
    std::vector<uint8_t> words = file, words_vbmi = file;
    tcpu::words_blocks_in_place(t, words.data(), M * nb, true, false);
    tcpu::words_blocks_in_place(t, words_vbmi.data(), M * nb, true, true);
    CHECK(words != file);
    CHECK(words_vbmi == words);
    int bad = 0;
    for (int64_t i = 0; i < M * nb; ++i) {
        const uint8_t * f = file.data() + (size_t)i * bb, * w = words.data() + (size_t)i * bb;
        if (q3) {
            bad += std::memcmp(f + 108, w + 108, 2) != 0;
            for (int s = 0; s < 16; ++s) {
                uint64_t half = 0;
                std::memcpy(&half, w + 96 + 6 * (s / 8), 6);
                const int field = (int)(half >> (6 * (s % 8)) & 63);
                bad += field != (tsr_impl::q3k_scale(s, f + 96) & 63);
            }
        } else {
            bad += std::memcmp(f, w, 16) != 0 || std::memcmp(f + 80, w + 80, 4) != 0;
        }
        for (int e = 0; e < 256; ++e) {
            const int want = f[qs_at + 32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32)) & 3;
            const int s = e / 16, j = e % 16 / 4, k = e % 4;
            bad += (w[qs_at + 4 * s + k] >> (2 * j) & 3) != want;
            if (q3) bad += (s < 8 ? w[4 * s + k] >> j & 1 : w[4 * (s - 8) + k] >> (4 + j) & 1) != (f[e % 32] >> (e / 32) & 1);
        }
    }
    CHECK(bad == 0);
    for (bool vbmi : {false, true}) {  // scalar and (where the CPU has it) VBMI: in place, and as the GEMM converts
        std::vector<uint8_t> back = words, to_file(file.size());
        tcpu::words_blocks_in_place(t, back.data(), M * nb, false, vbmi);
        CHECK(back == file);
        tcpu::words_blocks_to_file(t, words.data(), to_file.data(), M * nb, vbmi);
        CHECK(to_file == file);
    }

    const std::vector<tsr_block_q8_K> y = q8k_test_activations(nb, rng);
    std::vector<tsr_block_q8_K> yw = y;
    tcpu::q8k_qs_to_words(yw.data(), nb);
    int bad_y = 0;
    for (int64_t b = 0; b < nb; ++b)
        for (int e = 0; e < 256; ++e) bad_y += yw[(size_t)b].qs[4 * (16 * (e % 16 / 4) + e / 16) + e % 4] != y[(size_t)b].qs[e];
    CHECK(bad_y == 0);

    std::vector<double> want((size_t)M), mag((size_t)M);
    std::vector<float> wf((size_t)K);
    for (int64_t m = 0; m < M; ++m) {
        tsr_to_float_row(t, file.data() + (size_t)m * row_bytes, wf.data(), K);
        for (int64_t k = 0; k < K; ++k) {
            const double yv = (double)y[(size_t)(k / 256)].d * y[(size_t)(k / 256)].qs[k % 256];
            want[(size_t)m] += (double)wf[(size_t)k] * yv;
            mag[(size_t)m] += std::fabs((double)wf[(size_t)k] * yv);
        }
    }
    for (tsr_cpu_isa isa : tsrt::isas()) {
        kernels_of k(isa);
        const tcpu::words_kernels ks = tcpu::words_kernels_for_isa(t);
        INFO("isa " << tsr_cpu_isa_name(isa));
        std::vector<float> one((size_t)M), four((size_t)M);
        for (int64_t m = 0; m < M; ++m) ks.one(K, (const char *)words.data() + (size_t)m * row_bytes, 0, yw.data(), &one[(size_t)m]);
        for (int64_t q = 0; q < M / 4; ++q)  // rows q + 5r: a quarter of the rows apart, as the mat-vec's streams
            ks.four(K, (const char *)words.data() + (size_t)q * row_bytes, (size_t)(M / 4) * row_bytes, yw.data(), &four[(size_t)(4 * q)]);
        for (int64_t m = 0; m < M; ++m) {
            const float f = four[(size_t)(4 * (m % (M / 4)) + m / (M / 4))];
            INFO("row " << m << " want " << want[(size_t)m]);
            CHECK(std::fabs(one[(size_t)m] - want[(size_t)m]) <= 1e-6 * mag[(size_t)m]);
            CHECK(f == one[(size_t)m]);
            const float ref = q3 ? tcpu::q3kw_dot_scalar(K, words.data() + (size_t)m * row_bytes, yw.data())
                                 : tcpu::q2kw_dot_scalar(K, words.data() + (size_t)m * row_bytes, yw.data());
            CHECK(std::fabs(ref - want[(size_t)m]) <= 1e-6 * mag[(size_t)m]);
        }
    }
}

TEST_CASE("CPU_REPACK: the Q2_K and Q3_K word layouts hold each value where their kernels read it, convert back, and their mat-vec kernels of every ISA equal double sums", "[cpu][repack]") {
    std::mt19937 rng(53);
    check_words_layout(TSR_TYPE_Q2_K, rng);
    check_words_layout(TSR_TYPE_Q3_K, rng);
}

// The Q4_1, Q5_0 and Q5_1 records hold each row's d (and m) and levels (Q5_0 / Q5_1: the
// fifth bit from the file's qh) where the kernels read them, against the core's unpacking,
// and convert back to the file's bytes exactly: random bytes and all-0x00 / all-0xFF blocks.
template <class BLOCK>
void check_q32_record(tsr_type t, std::mt19937 & rng) {
    const int64_t nb = 3, M = 24;
    const size_t row_bytes = (size_t)nb * sizeof(BLOCK);
    std::vector<uint8_t> file((size_t)M * row_bytes);
    for (auto & v : file) v = (uint8_t)(rng() & 0xff);
    std::memset(file.data(), 0xff, 8 * row_bytes);
    std::memset(file.data() + 8 * row_bytes, 0x00, 8 * row_bytes);
    check_record_bijection<BLOCK>(t, file, M, nb, [t](const BLOCK & x, const uint8_t * rec, int r) {
        int bad = std::memcmp(rec + 2 * r, &x.d, 2) != 0;
        uint32_t qh = 0;
        if constexpr (!std::is_same<BLOCK, tsr_block_q5_0>::value) bad += std::memcmp(rec + 16 + 2 * r, &x.m, 2) != 0;
        if constexpr (!std::is_same<BLOCK, tsr_block_q4_1>::value) std::memcpy(&qh, x.qh, 4);
        int q[32];
        tsr_impl::unpack_q32(x.qs, qh, q);
        for (int e = 0; e < 32; ++e) {
            const int level = t == TSR_TYPE_Q4_1 ? tcpu::q32_record_level<TSR_TYPE_Q4_1>(rec, e, r)
                              : t == TSR_TYPE_Q5_0 ? tcpu::q32_record_level<TSR_TYPE_Q5_0>(rec, e, r)
                                                   : tcpu::q32_record_level<TSR_TYPE_Q5_1>(rec, e, r);
            bad += level != q[e];
        }
        return bad;
    });
}

TEST_CASE("CPU_REPACK: the Q4_1, Q5_0 and Q5_1 records are bijections of 8 blocks, each value where the kernels read it", "[cpu][repack]") {
    std::mt19937 rng(53);
    check_q32_record<tsr_block_q4_1>(TSR_TYPE_Q4_1, rng);
    check_q32_record<tsr_block_q5_0>(TSR_TYPE_Q5_0, rng);
    check_q32_record<tsr_block_q5_1>(TSR_TYPE_Q5_1, rng);
}

// The interleaved mat-vec kernels of the 32-weight types (Q4_0, IQ4_NL, Q4_1, Q5_0, Q5_1) of
// every ISA, one group and several at once (the streams r8_gemv walks side by side), against
// double sums of the format's weights (the core's dequantization: Q4_0's, IQ4_NL's and
// Q5_0's exact, Q4_1's / Q5_1's level x d + m rounded once) times the activations: random
// blocks and the extremes (all 0xFF: levels 15 / 31; all 0x00: levels 0) against
// activations all -127 or 127, the quantizer's range (the AVX2 kernels add a block's
// products in int16 lanes before widening: any overflow there, or a lost offset, is off by
// far more than float rounding).
void check_r8_q32_dots(tsr_type t, std::mt19937 & rng) {
    const int64_t nb = 3, M = 8 * 4;
    const std::vector<uint8_t> file = kquant_test_rows(t, M, nb, true, 0.05f, rng);
    std::vector<tcpu::yq8> y((size_t)nb);
    for (int64_t b = 0; b < nb; ++b) {
        y[(size_t)b].d = std::uniform_real_distribution<float>(0.001f, 0.01f)(rng);
        y[(size_t)b].sum = 0;
        for (int j = 0; j < 32; ++j) {
            y[(size_t)b].qs[j] = b == 0 ? (int8_t)-127 : b == 1 ? (int8_t)127 : (int8_t)((int)(rng() % 255) - 127);
            y[(size_t)b].sum += y[(size_t)b].qs[j];
        }
    }
    check_r8_dots_against_file(t, file, M, nb, y, [t](const tcpu::cpu_features &) { return tcpu::r8_dots_for(t); });
}

TEST_CASE("CPU_REPACK: the 32-weight types' interleaved mat-vec kernels of every ISA equal double sums, extremes included", "[cpu][repack]") {
    std::mt19937 rng(31);
    check_r8_q32_dots(TSR_TYPE_Q4_0, rng);
    check_r8_q32_dots(TSR_TYPE_IQ4_NL, rng);
    check_r8_q32_dots(TSR_TYPE_Q4_1, rng);
    check_r8_q32_dots(TSR_TYPE_Q5_0, rng);
    check_r8_q32_dots(TSR_TYPE_Q5_1, rng);
}

// The CPU backend runs only mul_mat (src0) and get_rows on a repacked matrix: any other op
// reading its interleaved bytes, or a view of it, is refused.
TEST_CASE("CPU_REPACK buffers: ops other than mul_mat / get_rows on a repacked matrix are refused", "[cpu][repack]") {
    repack_pair P(TSR_TYPE_Q4_0, 64, 8, 1);
    REQUIRE((P.rb && P.ab));
    std::vector<float> wf(64 * 8, 0.5f);
    std::vector<uint8_t> wq(tsr_nbytes(P.wr));
    REQUIRE(tsr_quantize_chunk(TSR_TYPE_Q4_0, wf.data(), wq.data(), 0, 8, 64, nullptr) == wq.size());
    REQUIRE(tsr_backend_tensor_set(P.wr, wq.data(), 0, wq.size()));
    if (!tcpu::k_r8_layout_used) return;
    REQUIRE(tcpu::is_r8_repacked(P.wr));
    tsrt::backend_holder be(1);
    CHECK(tsr_backend_supports_op(be, P.cr));
    CHECK(tsr_backend_supports_op(be, P.gr));
    tsr_context * ctx = tsr_init(tsr_init_params{8 * tsr_tensor_overhead(), nullptr, true});
    tsr_tensor * dup = tsr_cpy(ctx, P.wr, tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 64, 8));
    tsr_tensor * v = tsr_view_2d(ctx, P.wr, 64, 4, P.wr->nb[1], 0);
    tsr_tensor * mv = tsr_mul_mat(ctx, v, P.x);
    tsr_tensor * mx = tsr_mul_mat(ctx, P.x, P.x);
    CHECK_FALSE(tsr_backend_supports_op(be, dup));
    CHECK_FALSE(tsr_backend_supports_op(be, mv));
    CHECK(tsr_backend_supports_op(be, mx));  // a plain operand still runs
    tsr_free(ctx);
}

// A MoE file's expert tensors (3D) in CPU_REPACK: Q2_K and Q3_K take their word layouts
// where the CPU has them (the records stay 2D), and mul_mat_id reads them for experts few
// tokens chose (the word kernels, activations in word order) and many chose (the GEMM,
// panels converted back) alike: its results equal the plain buffer's twin (within float
// summation order) and double sums over the dequantized file bytes; get_rows of the 3D
// tensor gives the twin's rows; get returns the file's bytes; a view or a copy of it is
// refused while mul_mat_id runs.
TEST_CASE("CPU_REPACK: Q2_K / Q3_K MoE experts (3D) take the word layout; mul_mat_id and get_rows equal a plain buffer's and double sums", "[cpu][mul_mat][repack]") {
    const int64_t K = 2 * TSR_QK_K, M = 20, n_expert = 4, n_used = 2;
    std::mt19937 rng(61);
    for (tsr_type t : {TSR_TYPE_Q2_K, TSR_TYPE_Q3_K})
        for (int64_t n_tok : {int64_t(1), int64_t(9), int64_t(130)}) {
            INFO(tsr_type_name(t) << " tokens " << n_tok);
            tsr_context * meta = tsr_init(tsr_init_params{16 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
            REQUIRE(meta);
            tsr_tensor * wr = tsr_new_tensor_3d(meta, t, K, M, n_expert);
            tsr_tensor * wp = tsr_new_tensor_3d(meta, t, K, M, n_expert);
            tsr_tensor * x = tsr_new_tensor_3d(meta, TSR_TYPE_F32, K, n_used, n_tok);
            tsr_tensor * ids = tsr_new_tensor_2d(meta, TSR_TYPE_I32, n_used, n_tok);
            tsr_tensor * rid = tsr_new_tensor_2d(meta, TSR_TYPE_I32, 3, n_expert);
            tsr_tensor * cr = tsr_mul_mat_id(meta, wr, x, ids);
            tsr_tensor * cp = tsr_mul_mat_id(meta, wp, x, ids);
            tsr_tensor * gr = tsr_get_rows(meta, wr, rid);
            tsr_tensor * gp = tsr_get_rows(meta, wp, rid);
            REQUIRE((cr && cp && gr && gp));
            tsr_cgraph * gf = tsr_new_graph(meta);
            for (tsr_tensor * o : {cr, cp, gr, gp}) tsr_build_forward_expand(gf, o);
            tsr_backend_buffer_t rb = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_repack_buffer_type(), tsr_nbytes(wr));
            tsr_backend_buffer_t pb = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_buffer_type(), tsr_nbytes(wp));
            REQUIRE((rb && pb));
            REQUIRE(tsr_backend_tensor_alloc(rb, wr, tsr_backend_buffer_get_base(rb)));
            REQUIRE(tsr_backend_tensor_alloc(pb, wp, tsr_backend_buffer_get_base(pb)));
            tsr_backend_buffer_t ab = tsr_backend_alloc_ctx_tensors_from_buft(meta, tsr_backend_cpu_buffer_type());
            REQUIRE(ab);

            std::vector<float> wf((size_t)(K * M * n_expert));
            for (float & v : wf) v = std::uniform_real_distribution<float>(-1, 1)(rng);
            std::vector<uint8_t> wq(tsr_nbytes(wr));
            REQUIRE(tsr_quantize_chunk(t, wf.data(), wq.data(), 0, M * n_expert, K, nullptr) == wq.size());
            REQUIRE(tsr_backend_tensor_set(wr, wq.data(), 0, wq.size()));
            REQUIRE(tsr_backend_tensor_set(wp, wq.data(), 0, wq.size()));
            const bool words = tcpu::words_layout_for_type(t);
            REQUIRE(tcpu::gemm_min_cols(t, words) <= 130);  // the GEMM path is taken below
            CHECK(tcpu::is_words_repacked(wr) == words);
            CHECK(tsr_backend_cpu_repacks(wr) == words);
            CHECK((std::memcmp(wr->data, wq.data(), wq.size()) != 0) == words);
            std::vector<uint8_t> back(wq.size());
            REQUIRE(tsr_backend_tensor_get(wr, back.data(), 0, back.size()));
            CHECK(back == wq);

            std::vector<float> xv((size_t)(K * n_used * n_tok));
            for (float & v : xv) v = std::uniform_real_distribution<float>(-1, 1)(rng);
            REQUIRE(tsr_backend_tensor_set(x, xv.data(), 0, xv.size() * 4));
            // slot 0 is expert 3 for every token, slot 1 walks experts 0..2: 130 tokens put
            // expert 3 (130 pairs) through the GEMM, 0..2 (43-44) through it for Q3_K only
            // (gemm_min_cols), 9 tokens all of them through the dots
            std::vector<int32_t> idv;
            for (int64_t k = 0; k < n_tok; ++k) {
                idv.push_back(3);
                idv.push_back((int32_t)(k % 3));
            }
            REQUIRE(tsr_backend_tensor_set(ids, idv.data(), 0, idv.size() * 4));
            const int32_t rows[3 * 4] = {(int32_t)M - 1, 0, 5, 1, 2, 3, 19, 18, 17, 7, 7, 0};
            REQUIRE(tsr_backend_tensor_set(rid, rows, 0, sizeof(rows)));

            // out[m, e, k] = sum_i w[ids[e, k]][m][i] * x[i, e, k], in double from the file's bytes
            const size_t row_bytes = tsr_row_size(t, K);
            std::vector<float> w((size_t)K);
            std::vector<double> ref((size_t)(M * n_used * n_tok)), mag(ref.size());
            for (int64_t k = 0; k < n_tok; ++k)
                for (int64_t e = 0; e < n_used; ++e)
                    for (int64_t m = 0; m < M; ++m) {
                        const int64_t row = idv[(size_t)(k * n_used + e)] * M + m;
                        tsr_to_float_row(t, wq.data() + (size_t)row * row_bytes, w.data(), K);
                        const size_t o = (size_t)((k * n_used + e) * M + m);
                        for (int64_t i = 0; i < K; ++i) {
                            const double p = (double)w[(size_t)i] * xv[(size_t)((k * n_used + e) * K + i)];
                            ref[o] += p;
                            mag[o] += std::fabs(p);
                        }
                    }
            for (tsr_cpu_isa isa : tsrt::isas()) {
                kernels_of kk(isa);
                INFO("isa " << tsr_cpu_isa_name(isa));
                if (words) {
                    // the word kernels read the Q8_K blocks alone (qs in the word order):
                    // a row of nb blocks, no side blocks written or sized
                    const tcpu::mmid_plan pl = tcpu::mmid_make_plan(cr, kk.K);
                    CHECK(pl.dot.y_q8k_words);
                    CHECK_FALSE(pl.dot.y_q8k_side);
                    CHECK(pl.dot.y_row == (size_t)(K / TSR_QK_K) * sizeof(tsr_block_q8_K));
                }
                tsrt::backend_holder be(2);
                CHECK(tsr_backend_supports_op(be, cr));
                REQUIRE(tsr_backend_graph_compute(be, gf) == TSR_STATUS_SUCCESS);
                const float * a = (const float *)cr->data, * b = (const float *)cp->data;
                int bad = 0;
                for (size_t i = 0; i < ref.size(); ++i) {
                    bad += !(std::fabs(a[i] - b[i]) <= 1e-5 * mag[i]);
                    bad += !(std::fabs(a[i] - ref[i]) <= 1e-2 * mag[i]);  // 8-bit activations
                }
                CHECK(bad == 0);
                CHECK(std::memcmp(gr->data, gp->data, tsr_nbytes(gp)) == 0);
            }
            if (words) {  // the layout is read by mul_mat_id itself, not by a view or a copy
                tsr_context * ctx = tsr_init(tsr_init_params{8 * tsr_tensor_overhead(), nullptr, true});
                tsr_tensor * v = tsr_view_3d(ctx, wr, K, M, 2, wr->nb[1], wr->nb[2], 0);
                tsr_tensor * mv = tsr_mul_mat_id(ctx, v, x, ids);
                tsr_tensor * dup = tsr_cpy(ctx, wr, tsr_new_tensor_3d(ctx, TSR_TYPE_F32, K, M, n_expert));
                tsrt::backend_holder be(1);
                CHECK_FALSE(tsr_backend_supports_op(be, mv));
                CHECK_FALSE(tsr_backend_supports_op(be, dup));
                tsr_free(ctx);
            }
            tsr_backend_buffer_free(ab);
            tsr_backend_buffer_free(rb);
            tsr_backend_buffer_free(pb);
            tsr_free(meta);
        }
}

TEST_CASE("mul_mat items: cover every row in whole kernel rows; a waiting thread prefetches inside its first item", "[cpu][mul_mat][threads]") {
    cput::ctx_holder ctx(64);
    const tcpu::kernels * K = tcpu::get_kernels();
    for (int64_t M : {16, 64, 200, 256, 2048, 5632, 32000}) {
        tsr_tensor * w = tsr_new_tensor_2d(ctx, TSR_TYPE_Q4_0, 256, M);
        tsr_tensor * x1 = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 256, 1);
        tsr_tensor * x8 = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 256, 8);
        REQUIRE((w && x1 && x8));
        tsr_tensor * mv = tsr_mul_mat(ctx, w, x1);
        tsr_tensor * mm = tsr_mul_mat(ctx, w, x8);
        REQUIRE((mv && mm));
        const char * lo = (const char *)w->data;
        const size_t row = w->nb[1];
        for (int nth : {1, 2, 3, 4, 8}) {
            INFO("M " << M << " threads " << nth);
            const tcpu::mm_items it = tcpu::mm_split(tcpu::mm_make_plan(mv, K, nth), M, 1, nth);
            CHECK(it.csize % 16 == 0);  // whole 16-row kernel steps
            CHECK(it.mchunks * it.csize >= M);
            CHECK((it.mchunks - 1) * it.csize < M);
            if (M >= 32 * nth) CHECK(it.mchunks >= nth);  // every thread has an item once rows allow
            for (int ith = 0; ith < nth; ++ith) {
                const char * start[tcpu::MM_DOT_STREAMS] = {};
                size_t bytes = 0;
                CHECK_FALSE(tcpu::matvec_first_streams(mm, K, ith, nth, start, bytes));  // 8 columns: a GEMM
                if (!tcpu::matvec_first_streams(mv, K, ith, nth, start, bytes)) {
                    CHECK((ith >= it.mchunks || M - ith * it.csize < tcpu::MM_DOT_STREAMS));  // no item, or too short to split
                    continue;
                }
                // the streams lie in order, apart, inside item ith's rows, and leave fewer
                // rows of it than there are streams
                const size_t first = (size_t)(ith * it.csize) * row, end = (size_t)std::min<int64_t>(M, (ith + 1) * it.csize) * row;
                CHECK(bytes % row == 0);
                CHECK(bytes > 0);
                for (int s = 0; s < tcpu::MM_DOT_STREAMS; ++s) {
                    CHECK((size_t)(start[s] - lo) >= first);
                    CHECK((size_t)(start[s] - lo) + bytes <= end);
                    if (s > 0) CHECK(start[s] >= start[s - 1] + bytes);
                }
                CHECK(end - first - tcpu::MM_DOT_STREAMS * bytes < tcpu::MM_DOT_STREAMS * row);
            }
        }
    }
}

// The column counts of gemm_test_columns.h against gemm_min_cols: the tests that say they
// cover a type's GEMM reach it (else they fall back to the dot kernels and the GEMMs go
// untested), and k_quants_on_dots keeps the K-quants on their dots. A threshold raised past
// a count fails here, naming the type.
TEST_CASE("gemm_min_cols: the GEMM-sized test shapes reach every type's GEMM they name", "[cpu][mul_mat][quant]") {
    namespace cols = gemm_test_columns;
    const tcpu::kernels * K = tcpu::get_kernels();
    const tsr_type k_quants[] = {TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K};
    const tsr_type q32[] = {TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL};
    for (tsr_type t : q32) {
        INFO(tsr_type_name(t));
        CHECK(tcpu::gemm_min_cols(t, false) <= cols::k_quants_on_dots);
    }
    for (tsr_type t : k_quants)
        for (bool words : {false, true}) {
            INFO(tsr_type_name(t) << (words ? " (word layout)" : ""));
            CHECK(tcpu::gemm_min_cols(t, words) > cols::k_quants_on_dots);
            CHECK(tcpu::gemm_min_cols(t, words) <= cols::every_layout);
            if (words) continue;
            CHECK(tcpu::gemm_min_cols(t, false) <= cols::every_file_layout);
            if (t != TSR_TYPE_Q2_K) CHECK(tcpu::gemm_min_cols(t, false) <= cols::exactly_packed);
#if defined(TSR_CPU_HAVE_X86_KERNELS)
            if (t != TSR_TYPE_Q2_K) CHECK(tcpu::gemm_min_cols(t, false) <= cols::all_but_q2_k);
#else
            if (t != TSR_TYPE_Q2_K && t != TSR_TYPE_Q3_K) CHECK(tcpu::gemm_min_cols(t, false) <= cols::all_but_q2_k);
#endif
        }
    // and the path in use has a GEMM for each of them (else no column count reaches one)
    for (tsr_type t : k_quants) CHECK(tcpu::gemm_for(K, t) != nullptr);
    for (tsr_type t : q32) CHECK(tcpu::gemm_for(K, t) != nullptr);
}
