// Q4_1, Q5_0, Q5_1, IQ4_NL and the K-quants: traits, hand-made blocks, random blocks
// against a double-precision decoder written here from the format description, and
// round-trip quality on ggml's test signal (and, hidden, against ggml's own quantizers).
#include "test_util.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using tsrt::half_value;
using tsrt::ref_elem;
using tsrt::ref_decode_block;

namespace {

const tsr_type kNewTypes[] = {TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_Q2_K, TSR_TYPE_Q3_K,
                              TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K, TSR_TYPE_Q8_K, TSR_TYPE_IQ4_NL};

// A random block: random bytes, with finite fp16 (or float) factors of moderate size.
std::vector<uint8_t> random_block(tsr_type t, std::mt19937 & rng) {
    std::vector<uint8_t> b(tsr_type_size(t));
    for (auto & v : b) v = (uint8_t)(rng() & 0xff);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    auto put_half = [&](size_t off) {
        const tsr_fp16_t v = tsr_fp32_to_fp16(u(rng));
        std::memcpy(b.data() + off, &v, 2);
    };
    switch (t) {
        case TSR_TYPE_Q4_1: case TSR_TYPE_Q5_1: case TSR_TYPE_Q4_K: case TSR_TYPE_Q5_K: put_half(0); put_half(2); break;
        case TSR_TYPE_Q5_0: case TSR_TYPE_IQ4_NL: put_half(0); break;
        case TSR_TYPE_Q2_K: put_half(80); put_half(82); break;
        case TSR_TYPE_Q3_K: put_half(108); break;
        case TSR_TYPE_Q6_K: put_half(208); break;
        case TSR_TYPE_Q8_K: { const float d = u(rng); std::memcpy(b.data(), &d, 4); break; }
        default: break;
    }
    return b;
}

// ggml's test signal and its error measure (test-quantize-fns: sqrt(sum of squares) / n).
std::vector<float> cos_signal(int n, float offset) {
    std::vector<float> x((size_t)n);
    for (int i = 0; i < n; i++) x[(size_t)i] = 0.1f + 2.0f * std::cos((float)i + offset);
    return x;
}

double ggml_rmse(const std::vector<float> & a, const std::vector<float> & b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return std::sqrt(s) / (double)a.size();
}

std::vector<float> round_trip(tsr_type t, const std::vector<float> & x) {
    const int64_t n = (int64_t)x.size();
    std::vector<uint8_t> q(tsr_row_size(t, n));
    std::vector<float> y(x.size());
    REQUIRE(tsr_from_float_row(t, x.data(), q.data(), n));
    REQUIRE(tsr_to_float_row(t, q.data(), y.data(), n));
    return y;
}

} // namespace

TEST_CASE("new quantized types: traits", "[types][quant]") {
    struct want { tsr_type t; const char * name; int64_t blck; size_t size; };
    const want ws[] = {
        {TSR_TYPE_Q4_1, "q4_1", 32, 20},  {TSR_TYPE_Q5_0, "q5_0", 32, 22},  {TSR_TYPE_Q5_1, "q5_1", 32, 24},
        {TSR_TYPE_Q2_K, "q2_K", 256, 84}, {TSR_TYPE_Q3_K, "q3_K", 256, 110}, {TSR_TYPE_Q4_K, "q4_K", 256, 144},
        {TSR_TYPE_Q5_K, "q5_K", 256, 176}, {TSR_TYPE_Q6_K, "q6_K", 256, 210}, {TSR_TYPE_Q8_K, "q8_K", 256, 292},
        {TSR_TYPE_IQ4_NL, "iq4_nl", 32, 18},
    };
    for (const auto & w : ws) {
        INFO(w.name);
        CHECK(tsr_is_valid_type(w.t));
        CHECK(tsr_is_quantized(w.t));
        CHECK(std::string(tsr_type_name(w.t)) == w.name);
        CHECK(tsr_blck_size(w.t) == w.blck);
        CHECK(tsr_type_size(w.t) == w.size);
        CHECK(tsr_row_size(w.t, 4 * w.blck) == 4 * w.size);
    }
    // ggml's enum values, so GGUF files name the types the same way
    CHECK((int)TSR_TYPE_Q4_1 == 3);
    CHECK((int)TSR_TYPE_Q5_0 == 6);
    CHECK((int)TSR_TYPE_Q5_1 == 7);
    CHECK((int)TSR_TYPE_Q2_K == 10);
    CHECK((int)TSR_TYPE_Q6_K == 14);
    CHECK((int)TSR_TYPE_Q8_K == 15);
    CHECK((int)TSR_TYPE_IQ4_NL == 20);
    CHECK(sizeof(tsr_block_q4_K) == 144);
    CHECK(sizeof(tsr_block_q8_K) == 292);
}

TEST_CASE("new quantized types: a ragged row is refused, naming the type", "[types][quant]") {
    std::vector<float> x(300, 1.0f);
    std::vector<uint8_t> q(1024);
    CHECK_FALSE(tsr_from_float_row(TSR_TYPE_Q4_K, x.data(), q.data(), 288));
    CHECK(std::string(tsr_last_error()).find("q4_K") != std::string::npos);
    CHECK(std::string(tsr_last_error()).find("288") != std::string::npos);
    CHECK_FALSE(tsr_to_float_row(TSR_TYPE_Q5_1, q.data(), x.data(), 48));
    CHECK(tsr_quantize_chunk(TSR_TYPE_Q6_K, x.data(), q.data(), 0, 1, 128, nullptr) == 0);
}

TEST_CASE("new quantized types: hand-made blocks decode to hand-computed values", "[types][quant]") {
    float y[256];
    SECTION("Q4_1: x = d * q + m") {
        tsr_block_q4_1 b{};
        b.d = 0x3800;  // 0.5
        b.m = 0xc000;  // -2
        b.qs[0] = 0x3a;  // element 0: 10, element 16: 3
        REQUIRE(tsr_to_float_row(TSR_TYPE_Q4_1, &b, y, 32));
        CHECK(y[0] == 3.0f);    // 0.5 * 10 - 2
        CHECK(y[16] == -0.5f);  // 0.5 * 3 - 2
        CHECK(y[1] == -2.0f);
    }
    SECTION("Q5_0: x = d * (q - 16), fifth bit from qh") {
        tsr_block_q5_0 b{};
        b.d = 0x4000;  // 2
        b.qs[1] = 0x0f;       // element 1 low bits 15, element 17 low bits 0
        b.qh[2] = 0x02;       // bit 17: element 17's fifth bit
        REQUIRE(tsr_to_float_row(TSR_TYPE_Q5_0, &b, y, 32));
        CHECK(y[1] == 2.0f * (15 - 16));
        CHECK(y[17] == 2.0f * (16 - 16));
        CHECK(y[0] == -32.0f);
    }
    SECTION("Q5_1") {
        tsr_block_q5_1 b{};
        b.d = 0x3c00;  // 1
        b.m = 0x3c00;  // 1
        b.qs[15] = 0xf7;   // element 15: 7, element 31: 15
        b.qh[3] = 0x80;    // bit 31
        REQUIRE(tsr_to_float_row(TSR_TYPE_Q5_1, &b, y, 32));
        CHECK(y[15] == 8.0f);
        CHECK(y[31] == 32.0f);  // 31 + 1
    }
    SECTION("IQ4_NL: table values") {
        tsr_block_iq4_nl b{};
        b.d = 0x3800;  // 0.5
        b.qs[0] = 0xf0;  // element 0: index 0 (-127), element 16: index 15 (113)
        REQUIRE(tsr_to_float_row(TSR_TYPE_IQ4_NL, &b, y, 32));
        CHECK(y[0] == -63.5f);
        CHECK(y[16] == 56.5f);
        CHECK(y[1] == -63.5f);
    }
    SECTION("Q4_K: 6-bit scales and mins") {
        tsr_block_q4_K b{};
        b.d = 0x3c00;     // 1
        b.dmin = 0x3800;  // 0.5
        b.scales[0] = 3;  // sub-block 0 scale 3
        b.scales[4] = 2;  // sub-block 0 min 2
        b.scales[8] = 0x45;  // sub-block 4: scale low 5, min low 4
        b.scales[0] |= 0x40; // sub-block 4 scale high bits 1 -> scale 5 + 16 = 21
        b.qs[0] = 0x97;   // sub-block 0 element 0: 7; sub-block 1 element 0: 9
        b.qs[64] = 0x02;  // sub-block 4 element 0: 2
        REQUIRE(tsr_to_float_row(TSR_TYPE_Q4_K, &b, y, 256));
        CHECK(y[0] == 1.0f * 3 * 7 - 0.5f * 2);
        CHECK(y[32] == 0.0f);            // sub-block 1: scale 0, min 0
        CHECK(y[128] == 1.0f * 21 * 2 - 0.5f * 4);
    }
    SECTION("Q5_K: fifth bit of sub-block s in bit s of qh") {
        tsr_block_q5_K b{};
        b.d = 0x3c00;
        b.scales[1] = 1;  // sub-block 1 scale 1, min 0
        b.qs[3] = 0x20;   // sub-block 1 element 3: low bits 2
        b.qh[3] = 0x02;   // sub-block 1 element 3: + 16
        REQUIRE(tsr_to_float_row(TSR_TYPE_Q5_K, &b, y, 256));
        CHECK(y[32 + 3] == 18.0f);
    }
    SECTION("Q6_K: signed scales, q - 32") {
        tsr_block_q6_K b{};
        b.d = 0x3800;         // 0.5
        b.scales[0] = -3;
        b.scales[4] = 2;      // element 64 + l (k = 2) of the first half, l < 16
        b.ql[0] = 0x51;       // element 0: low 1; element 64: low 5
        b.qh[0] = 0x23;       // element 0: high 3 (bits 0-1); element 64: high 2 (bits 4-5)
        REQUIRE(tsr_to_float_row(TSR_TYPE_Q6_K, &b, y, 256));
        CHECK(y[0] == 0.5f * -3 * ((1 | (3 << 4)) - 32));
        CHECK(y[64] == 0.5f * 2 * ((5 | (2 << 4)) - 32));
    }
    SECTION("Q3_K: a clear hmask bit subtracts 4") {
        tsr_block_q3_K b{};
        b.d = 0x4000;         // 2
        b.scales[0] = 0x01;   // scale 0: low 1, high 0 -> 1 - 32 = -31
        b.scales[8] = 0x02;   // scale 0's high bits 2 -> (1 | 32) - 32 = 1
        b.qs[0] = 0x03;       // element 0: 3
        b.hmask[0] = 0x01;    // element 0's bit set: no -4; element 32 (bit 1) clear
        REQUIRE(tsr_to_float_row(TSR_TYPE_Q3_K, &b, y, 256));
        CHECK(y[0] == 2.0f * 1 * 3);
        CHECK(y[1] == 2.0f * 1 * (0 - 4));
    }
    SECTION("Q2_K") {
        tsr_block_q2_K b{};
        b.d = 0x3c00;
        b.dmin = 0x3c00;
        b.scales[2] = 0x35;  // sub-block 2 (elements 32..47): scale 5, min 3
        b.qs[0] = 0x0c;      // element 32 = bits 2-3 of qs[0]: 3
        REQUIRE(tsr_to_float_row(TSR_TYPE_Q2_K, &b, y, 256));
        CHECK(y[32] == 5.0f * 3 - 3.0f);
        CHECK(y[33] == -3.0f);
    }
}

TEST_CASE("new quantized types: random blocks match the format's decoder", "[types][quant]") {
    std::mt19937 rng(12);
    for (tsr_type t : kNewTypes) {
        INFO(tsr_type_name(t));
        const int64_t nb = tsr_blck_size(t);
        for (int trial = 0; trial < 50; trial++) {
            const auto blk = random_block(t, rng);
            std::vector<float> y((size_t)nb);
            REQUIRE(tsr_to_float_row(t, blk.data(), y.data(), nb));
            const auto ref = ref_decode_block(t, blk.data());
            REQUIRE(ref.size() == (size_t)nb);
            for (int64_t j = 0; j < nb; j++) {
                const ref_elem & e = ref[(size_t)j];
                const double want = e.a * e.q - e.b;
                // two float roundings (the product, the difference) at most
                const double tol = std::ldexp(std::fabs(e.a * e.q) + std::fabs(e.b), -23);
                if (std::fabs((double)y[(size_t)j] - want) > tol) {
                    FAIL_CHECK("element " << j << ": " << y[(size_t)j] << " want " << want);
                    break;
                }
            }
        }
    }
}

TEST_CASE("new quantized types: round trip on ggml's test signal", "[types][quant]") {
    // ggml's thresholds (test-quantize-fns), on its measure sqrt(sum d^2) / n
    struct want { tsr_type t; double max_err; };
    const want ws[] = {{TSR_TYPE_Q4_1, 0.002}, {TSR_TYPE_Q5_0, 0.002}, {TSR_TYPE_Q5_1, 0.002},
                       {TSR_TYPE_Q2_K, 0.0075}, {TSR_TYPE_Q3_K, 0.004}, {TSR_TYPE_Q4_K, 0.002},
                       {TSR_TYPE_Q5_K, 0.002}, {TSR_TYPE_Q6_K, 0.002}, {TSR_TYPE_Q8_K, 0.002},
                       {TSR_TYPE_IQ4_NL, 0.002}};
    const int n = 32 * 128;
    for (const auto & w : ws) {
        INFO(tsr_type_name(w.t));
        for (float offset : {0.0f, 0.5f, 3.0f}) {
            const auto x = cos_signal(n, offset);
            const auto y = round_trip(w.t, x);
            CHECK(ggml_rmse(x, y) <= w.max_err);
        }
    }
}

TEST_CASE("new quantized types: true RMSE against the format's step", "[types][quant]") {
    // The measure above divides by n; this one is the plain RMS error on N(0, 1) data,
    // bounded by the rounding error of a uniform grid of 2^bits levels over +-4 sigma
    // (step / sqrt(12)). Each format's scales fit its blocks more closely than that; a
    // broken quantizer (wrong level, wrong scale, lost bit) exceeds it many times.
    struct want { tsr_type t; int bits; };
    const want ws[] = {{TSR_TYPE_Q4_1, 4}, {TSR_TYPE_Q5_0, 5}, {TSR_TYPE_Q5_1, 5}, {TSR_TYPE_Q2_K, 2},
                       {TSR_TYPE_Q3_K, 3}, {TSR_TYPE_Q4_K, 4}, {TSR_TYPE_Q5_K, 5}, {TSR_TYPE_Q6_K, 6},
                       {TSR_TYPE_Q8_K, 8}, {TSR_TYPE_IQ4_NL, 4}};
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int n = 256 * 16;
    for (const auto & w : ws) {
        INFO(tsr_type_name(w.t));
        std::vector<float> x((size_t)n);
        for (auto & v : x) v = nd(rng);
        const auto y = round_trip(w.t, x);
        double s = 0.0;
        for (int i = 0; i < n; i++) s += ((double)x[(size_t)i] - y[(size_t)i]) * ((double)x[(size_t)i] - y[(size_t)i]);
        const double rmse = std::sqrt(s / n);
        const double step = 8.0 / ((1 << w.bits) - 1);
        CHECK(rmse <= step / std::sqrt(12.0));
    }
}

// ---- llama.cpp's quantizers as the reference (hidden: scripts/llamacpp-quant-check.sh) ----
// ggml_quantize_chunk from the libggml-base.so in $TSR_LLAMACPP_LIBDIR (tsrt::ggml_base_symbol:
// node-llama-cpp's prebuilt library, a reference, never a dependency, so CI does not run this). Both
// quantizers take the same rows (ggml's test signal, Gaussian, and heavy-tailed Student-t
// with 3 degrees of freedom: outliers in most blocks); both results are decoded by ggml's own
// dequantize_row_*. The algorithms are ggml's, so at least 98 % of the bytes are the same and the
// error is ggml's within 0.1 %: the K-quants' grid searches score a candidate by the expanded
// sum of squares (quants.inl, squared_error: no second pass over the levels), whose rounding
// picks the other of two nearly equal grids now and then (measured on a Zen 5: Q4_K on the
// Student-t rows 1.0006 x ggml's error, 99.4 % of bytes equal; Q2_K there 0.9997 x, 98.9 %;
// the rest within 1e-4, 99.8-100 %).
TEST_CASE("quantizers: tsr_quantize_chunk runs ggml_quantize_chunk's algorithms", "[.][llamacpp-quantizers]") {
    using quantize_fn = size_t (*)(int type, const float * src, void * dst, int64_t start, int64_t nrows, int64_t n_per_row, const float * imatrix);
    using dequantize_fn = void (*)(const void * x, float * y, int64_t k);
    const char * why = "";
    const auto ggml_quantize = (quantize_fn) tsrt::ggml_base_symbol("ggml_quantize_chunk", &why);
    INFO(why);
    REQUIRE(ggml_quantize);
    const int64_t n_per_row = 4096, rows_per_kind = 16;
    const char * kinds[] = {"0.1 + 2 cos(i + row)", "Gaussian", "Student-t (3)"};
    std::mt19937 rng(42);
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    std::student_t_distribution<float> student(3.0f);
    std::vector<float> src((size_t) (3 * rows_per_kind * n_per_row));
    for (int64_t r = 0; r < 3 * rows_per_kind; ++r)
        for (int64_t i = 0; i < n_per_row; ++i) {
            const int kind = (int) (r / rows_per_kind);
            src[(size_t) (r * n_per_row + i)] = kind == 0 ? 0.1f + 2.0f * std::cos((float) (i + r)) : kind == 1 ? gauss(rng) : 0.05f * student(rng);
        }
    printf("| type | rows | tessera RMSE | ggml RMSE | ratio | bytes equal to ggml's |\n|---|---|---:|---:|---:|---:|\n");
    for (tsr_type t : {TSR_TYPE_Q4_0, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_Q8_0, TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K,
                       TSR_TYPE_Q5_K, TSR_TYPE_Q6_K, TSR_TYPE_IQ4_NL}) {
        const auto ggml_dequantize = (dequantize_fn) tsrt::ggml_base_symbol((std::string("dequantize_row_") + tsr_type_name(t)).c_str());
        INFO(tsr_type_name(t));
        REQUIRE(ggml_dequantize);
        const size_t row_bytes = tsr_row_size(t, n_per_row);
        for (int kind = 0; kind < 3; ++kind) {
            const float * x = src.data() + (size_t) (kind * rows_per_kind * n_per_row);
            const size_t bytes = row_bytes * (size_t) rows_per_kind, n = (size_t) (rows_per_kind * n_per_row);
            std::vector<uint8_t> ours(bytes), theirs(bytes);
            REQUIRE(tsr_quantize_chunk(t, x, ours.data(), 0, rows_per_kind, n_per_row, nullptr) == bytes);
            REQUIRE(ggml_quantize((int) t, x, theirs.data(), 0, rows_per_kind, n_per_row, nullptr) == bytes);
            std::vector<float> y_ours(n), y_theirs(n);
            ggml_dequantize(ours.data(), y_ours.data(), (int64_t) n);
            ggml_dequantize(theirs.data(), y_theirs.data(), (int64_t) n);
            double e_ours = 0, e_theirs = 0;
            for (size_t i = 0; i < n; ++i) {
                e_ours += ((double) y_ours[i] - x[i]) * ((double) y_ours[i] - x[i]);
                e_theirs += ((double) y_theirs[i] - x[i]) * ((double) y_theirs[i] - x[i]);
            }
            e_ours = std::sqrt(e_ours / (double) n);
            e_theirs = std::sqrt(e_theirs / (double) n);
            size_t same = 0;
            for (size_t i = 0; i < bytes; ++i) same += ours[i] == theirs[i];
            printf("| %s | %s | %.6f | %.6f | %.4f | %.2f %% |\n", tsr_type_name(t), kinds[kind], e_ours, e_theirs, e_ours / e_theirs, 100.0 * (double) same / (double) bytes);
            INFO(kinds[kind] << ": tessera " << e_ours << ", ggml " << e_theirs << ", " << same << " of " << bytes << " bytes equal");
            CHECK(e_ours <= e_theirs * 1.001);
            CHECK((double) same >= 0.98 * (double) bytes);
        }
    }
}
