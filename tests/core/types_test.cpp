// Type traits, fp16/bf16 conversion (against independent references) and Q8_0/Q4_0.
#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using tsrt::bits_from_f32;
using tsrt::f32_from_bits;
using tsrt::half_value;

namespace {

// Nearest binary16 (round to nearest, ties to even) by search over all finite halves.
uint16_t ref_fp16(float x) {
    static std::vector<double> pos;  // values of 0x0000..0x7bff, increasing
    if (pos.empty()) {
        for (uint32_t h = 0; h <= 0x7bff; h++) pos.push_back(half_value((uint16_t)h));
    }
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs((double)x);
    if (std::isnan(x)) return 0x7e00;
    // beyond 65504: the halfway point to 65536 (=2^16, the next "value") rounds to inf (even)
    if (a >= 65520.0) return sign | 0x7c00;
    auto it = std::lower_bound(pos.begin(), pos.end(), a);
    size_t hi = (size_t)(it - pos.begin());
    if (hi < pos.size() && pos[hi] == a) return sign | (uint16_t)hi;
    const size_t lo = hi - 1;
    if (hi >= pos.size()) return sign | (uint16_t)lo;
    const double dlo = a - pos[lo], dhi = pos[hi] - a;
    if (dlo < dhi) return sign | (uint16_t)lo;
    if (dhi < dlo) return sign | (uint16_t)hi;
    return sign | (uint16_t)((lo % 2 == 0) ? lo : hi);
}

// bf16 by rounding the value in double: candidates truncate(x) and the next bf16.
uint16_t ref_bf16(float x) {
    const uint32_t u = bits_from_f32(x);
    const uint16_t t = (uint16_t)(u >> 16);
    if ((u & 0xffff) == 0) return t;
    const double lo = (double)f32_from_bits((uint32_t)t << 16);
    double hi = (double)f32_from_bits((uint32_t)(t + 1) << 16);  // away from zero
    if (std::isinf(hi)) hi = std::copysign(std::ldexp(1.0, 128), hi);  // unbounded exponent, as IEEE rounds
    const double dlo = std::fabs((double)x - lo), dhi = std::fabs(hi - (double)x);
    if (dlo < dhi) return t;
    if (dhi < dlo) return (uint16_t)(t + 1);
    return (t % 2 == 0) ? t : (uint16_t)(t + 1);
}

} // namespace

TEST_CASE("type traits", "[types]") {
    CHECK(tsr_type_size(TSR_TYPE_F32) == 4);
    CHECK(tsr_type_size(TSR_TYPE_F16) == 2);
    CHECK(tsr_type_size(TSR_TYPE_BF16) == 2);
    CHECK(tsr_type_size(TSR_TYPE_I32) == 4);
    CHECK(tsr_type_size(TSR_TYPE_Q8_0) == 34);
    CHECK(tsr_type_size(TSR_TYPE_Q4_0) == 18);
    CHECK(tsr_blck_size(TSR_TYPE_Q8_0) == 32);
    CHECK(tsr_blck_size(TSR_TYPE_Q4_0) == 32);
    CHECK(tsr_blck_size(TSR_TYPE_F16) == 1);
    CHECK(tsr_row_size(TSR_TYPE_Q4_0, 64) == 36);
    CHECK(tsr_row_size(TSR_TYPE_F32, 10) == 40);
    CHECK(std::string(tsr_type_name(TSR_TYPE_BF16)) == "bf16");
    CHECK(std::string(tsr_type_name((tsr_type)5)) == "unknown");
    CHECK_FALSE(tsr_is_valid_type((tsr_type)5));
    CHECK(tsr_type_size((tsr_type)5) == 0);
    CHECK(tsr_is_quantized(TSR_TYPE_Q8_0));
    CHECK_FALSE(tsr_is_quantized(TSR_TYPE_F16));
    // ggml's enum values (GGUF files name types by them)
    CHECK((int)TSR_TYPE_Q8_0 == 8);
    CHECK((int)TSR_TYPE_BF16 == 30);
}

TEST_CASE("fp16: every half decodes exactly and round-trips", "[types][fp16]") {
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = tsr_fp16_to_fp32((tsr_fp16_t)h);
        const double ref = half_value((uint16_t)h);
        if (std::isnan(ref)) {
            CHECK(std::isnan(f));
            CHECK(std::isnan(tsr_fp16_to_fp32(tsr_fp32_to_fp16(f))));
            continue;
        }
        REQUIRE((double)f == ref);
        REQUIRE(std::signbit(f) == ((h & 0x8000) != 0));
        REQUIRE(tsr_fp32_to_fp16(f) == h);
    }
}

TEST_CASE("fp16: rounding to nearest even against a search reference", "[types][fp16]") {
    std::mt19937 rng(1234);
    std::uniform_int_distribution<uint32_t> bits;
    int checked = 0;
    for (int i = 0; i < 200000; i++) {
        const uint32_t u = bits(rng);
        float x = f32_from_bits(u);
        if (std::isnan(x)) continue;
        // concentrate on the half range
        if (i % 2 == 0) x = std::ldexp(std::fmod(std::fabs(x), 1.0f) + 0.5f, (int)(u % 44) - 28) * ((u & 1) ? -1.0f : 1.0f);
        REQUIRE(tsr_fp32_to_fp16(x) == ref_fp16(x));
        checked++;
    }
    CHECK(checked > 150000);
    // exact ties: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 -> even (1.0)
    CHECK(tsr_fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
    CHECK(tsr_fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
    CHECK(tsr_fp32_to_fp16(65504.0f) == 0x7bff);
    CHECK(tsr_fp32_to_fp16(65519.99f) == 0x7bff);
    CHECK(tsr_fp32_to_fp16(65520.0f) == 0x7c00);
    CHECK(tsr_fp32_to_fp16(-INFINITY) == 0xfc00);
    CHECK(tsr_fp32_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);  // tie between 0 and the smallest subnormal
    CHECK(tsr_fp32_to_fp16(std::ldexp(3.0f, -26)) == 0x0001);
    CHECK((tsr_fp32_to_fp16(NAN) & 0x7c00) == 0x7c00);
    CHECK((tsr_fp32_to_fp16(NAN) & 0x03ff) != 0);
}

TEST_CASE("bf16: exact round trips, RNE and quiet NaN", "[types][bf16]") {
    for (uint32_t h = 0; h < 65536; h++) {
        tsr_bf16_t b;
        b.bits = (uint16_t)h;
        const float f = tsr_bf16_to_fp32(b);
        REQUIRE(bits_from_f32(f) == h << 16);
        if (std::isnan(f)) {
            CHECK(std::isnan(tsr_bf16_to_fp32(tsr_fp32_to_bf16(f))));
        } else {
            REQUIRE(tsr_fp32_to_bf16(f).bits == h);
        }
    }
    std::mt19937 rng(99);
    std::uniform_int_distribution<uint32_t> bits;
    for (int i = 0; i < 200000; i++) {
        const float x = f32_from_bits(bits(rng));
        if (std::isnan(x) || std::isinf(x)) continue;
        REQUIRE(tsr_fp32_to_bf16(x).bits == ref_bf16(x));
    }
    // a signalling NaN comes back quiet
    const float snan = f32_from_bits(0x7f800001u);
    const tsr_bf16_t q = tsr_fp32_to_bf16(snan);
    CHECK(std::isnan(tsr_bf16_to_fp32(q)));
    CHECK((q.bits & 0x0040) != 0);
}

TEST_CASE("row conversions", "[types]") {
    const float src[5] = {0.5f, -2.0f, 1e-3f, 3.0f, -0.0f};
    tsr_fp16_t h[5];
    float back[5];
    tsr_fp32_to_fp16_row(src, h, 5);
    tsr_fp16_to_fp32_row(h, back, 5);
    for (int i = 0; i < 5; i++) CHECK(back[i] == (float)half_value(ref_fp16(src[i])));
    std::vector<uint16_t> buf(5);
    REQUIRE(tsr_from_float_row(TSR_TYPE_BF16, src, buf.data(), 5));
    REQUIRE(tsr_to_float_row(TSR_TYPE_BF16, buf.data(), back, 5));
    CHECK(back[1] == -2.0f);
    int32_t ints[5];
    REQUIRE(tsr_from_float_row(TSR_TYPE_I32, src, ints, 5));
    CHECK(ints[3] == 3);
    CHECK_FALSE(tsr_to_float_row(TSR_TYPE_Q8_0, buf.data(), back, 5));  // ragged: 5 % 32 != 0
    CHECK(std::string(tsr_last_error()).find("block size") != std::string::npos);
    CHECK_FALSE(tsr_to_float_row((tsr_type)5, buf.data(), back, 5));
}

TEST_CASE("Q8_0 and Q4_0 block layouts (hand-made blocks)", "[types][quant]") {
    tsr_block_q8_0 b8;
    b8.d = 0x4000;  // 2.0 in fp16
    for (int j = 0; j < 32; j++) b8.qs[j] = (int8_t)(j - 16);
    float y[32];
    REQUIRE(tsr_to_float_row(TSR_TYPE_Q8_0, &b8, y, 32));
    for (int j = 0; j < 32; j++) CHECK(y[j] == 2.0f * (j - 16));

    tsr_block_q4_0 b4;
    b4.d = 0x3800;  // 0.5
    for (int j = 0; j < 16; j++) b4.qs[j] = (uint8_t)((j & 15) | ((15 - j) << 4));
    REQUIRE(tsr_to_float_row(TSR_TYPE_Q4_0, &b4, y, 32));
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == 0.5f * (j - 8));              // low nibble: element j
        CHECK(y[j + 16] == 0.5f * ((15 - j) - 8));  // high nibble: element j + 16
    }
    CHECK(sizeof(tsr_block_q8_0) == 34);
    CHECK(sizeof(tsr_block_q4_0) == 18);
}

namespace {
std::vector<float> test_data(int n, int kind, std::mt19937 & rng) {
    std::vector<float> x((size_t)n);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(-100.0f, 3.0f);
    for (int i = 0; i < n; i++) {
        switch (kind) {
            case 0: x[(size_t)i] = nd(rng); break;
            case 1: x[(size_t)i] = ud(rng); break;
            case 2: x[(size_t)i] = (i % 32 == 5) ? 1000.0f : nd(rng) * 1e-3f; break;  // one outlier per block
            default: x[(size_t)i] = (i / 32 % 2) ? 0.0f : std::ldexp(nd(rng), -20); break;  // zero blocks, tiny values
        }
    }
    return x;
}
} // namespace

TEST_CASE("Q8_0 round trip is within the format's bound", "[types][quant]") {
    std::mt19937 rng(7);
    const int n = 32 * 64;
    for (int kind = 0; kind < 4; kind++) {
        const auto x = test_data(n, kind, rng);
        std::vector<tsr_block_q8_0> q((size_t)n / 32);
        std::vector<float> y((size_t)n);
        REQUIRE(tsr_from_float_row(TSR_TYPE_Q8_0, x.data(), q.data(), n));
        REQUIRE(tsr_to_float_row(TSR_TYPE_Q8_0, q.data(), y.data(), n));
        for (int b = 0; b < n / 32; b++) {
            double amax = 0.0;
            for (int j = 0; j < 32; j++) amax = std::max(amax, std::fabs((double)x[(size_t)(b * 32 + j)]));
            const double d = amax / 127.0;                        // the ideal scale
            const double d16 = half_value(q[(size_t)b].d);         // the stored (fp16) scale
            CHECK(std::fabs(d16 - d) <= d * std::ldexp(1.0, -11) + std::ldexp(1.0, -25));
            const double bound = d / 2 + 127 * std::fabs(d16 - d) + 1e-6 * amax + 1e-30;
            for (int j = 0; j < 32; j++) {
                const size_t i = (size_t)(b * 32 + j);
                REQUIRE(std::fabs((double)x[i] - (double)y[i]) <= bound);
            }
        }
    }
}

TEST_CASE("Q4_0 round trip is within the format's bound", "[types][quant]") {
    std::mt19937 rng(8);
    const int n = 32 * 64;
    for (int kind = 0; kind < 4; kind++) {
        const auto x = test_data(n, kind, rng);
        std::vector<tsr_block_q4_0> q((size_t)n / 32);
        std::vector<float> y((size_t)n);
        REQUIRE(tsr_from_float_row(TSR_TYPE_Q4_0, x.data(), q.data(), n));
        REQUIRE(tsr_to_float_row(TSR_TYPE_Q4_0, q.data(), y.data(), n));
        for (int b = 0; b < n / 32; b++) {
            double vmax = 0.0;  // signed value of largest magnitude
            for (int j = 0; j < 32; j++) {
                const double v = x[(size_t)(b * 32 + j)];
                if (std::fabs(v) > std::fabs(vmax)) vmax = v;
            }
            const double d = vmax / -8.0;  // maps vmax to -8, the far end of [-8, 7]
            const double d16 = half_value(q[(size_t)b].d);
            const double amax = std::fabs(vmax);
            for (int j = 0; j < 32; j++) {
                const size_t i = (size_t)(b * 32 + j);
                const double t = d != 0.0 ? (double)x[i] / d : 0.0;  // in [-8, 8]
                // inside [-8, 7.5) rounding costs at most d/2; above, the clamp to 7 costs up to |d|
                const double step = t < 7.5 ? std::fabs(d) / 2 : std::fabs(d);
                const double bound = step + 8 * std::fabs(d16 - d) + 1e-6 * amax + 1e-30;
                REQUIRE(std::fabs((double)x[i] - (double)y[i]) <= bound);
            }
        }
    }
}

TEST_CASE("tsr_quantize_chunk writes whole rows at the right place", "[types][quant]") {
    std::mt19937 rng(3);
    const int64_t n_per_row = 64, nrows = 5;
    const auto x = test_data((int)(n_per_row * nrows), 0, rng);
    const size_t row = tsr_row_size(TSR_TYPE_Q8_0, n_per_row);
    std::vector<uint8_t> all(row * nrows), part(row * nrows, 0xEE);
    REQUIRE(tsr_quantize_chunk(TSR_TYPE_Q8_0, x.data(), all.data(), 0, nrows, n_per_row, nullptr) == row * nrows);
    CHECK(tsr_quantize_chunk(TSR_TYPE_Q8_0, x.data(), part.data(), 2 * n_per_row, 2, n_per_row, nullptr) == 2 * row);
    CHECK(std::memcmp(part.data() + 2 * row, all.data() + 2 * row, 2 * row) == 0);
    CHECK(part[0] == 0xEE);               // rows before the chunk untouched
    CHECK(part[4 * row] == 0xEE);         // and after
    CHECK(tsr_quantize_chunk(TSR_TYPE_Q8_0, x.data(), part.data(), 3, 1, n_per_row, nullptr) == 0);  // start not a row start
    CHECK(tsr_quantize_chunk(TSR_TYPE_Q4_0, x.data(), part.data(), 0, 1, 33, nullptr) == 0);        // ragged row
    std::vector<tsr_fp16_t> h((size_t)n_per_row);
    CHECK(tsr_quantize_chunk(TSR_TYPE_F16, x.data(), h.data(), 0, 1, n_per_row, nullptr) == (size_t)n_per_row * 2);
    CHECK(h[1] == ref_fp16(x[1]));
}
