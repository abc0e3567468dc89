// NaN and infinities through the ops, on every ISA path and thread count, against PyTorch's
// rules written out by hand here (docs/ops.md, "NaN and infinities"): soft_max and
// flash attention rows, argmax, argsort, relu, clamp, max pooling.
#include "cpu_test_util.h"

#include <algorithm>

using namespace cput;

namespace {

const float pinf = INFINITY, qnan = NAN;   // short names for the tables below

// PyTorch's softmax of one row, in double: a NaN or +inf entry makes the row NaN (x - max is
// NaN there); tessera's one departure: a row of only -inf gives zeros where PyTorch gives NaN.
std::vector<double> softmax_rule(const std::vector<float> & row) {
    const bool poisoned = std::any_of(row.begin(), row.end(), [](float v) { return std::isnan(v) || v == pinf; });
    const bool all_masked = std::all_of(row.begin(), row.end(), [](float v) { return v == -pinf; });
    if (poisoned) return std::vector<double>(row.size(), NAN);
    if (all_masked) return std::vector<double>(row.size(), 0.0);
    const double mx = *std::max_element(row.begin(), row.end());
    std::vector<double> out(row.size());
    double sum = 0;
    for (size_t i = 0; i < row.size(); ++i) sum += out[i] = std::exp((double)row[i] - mx);
    for (double & v : out) v /= sum;
    return out;
}

// NaN where want is NaN, exact zeros and infinities, finite values within rel of want.
void check_values(const float * got, const std::vector<double> & want, double rel, const std::string & what) {
    for (size_t i = 0; i < want.size(); ++i) {
        INFO(what << " at " << i << ": got " << got[i] << " want " << want[i]);
        if (std::isnan(want[i])) CHECK(std::isnan(got[i]));
        else if (want[i] == 0.0 || std::isinf(want[i])) CHECK(got[i] == want[i]);
        else CHECK(std::fabs(got[i] - want[i]) <= rel * std::fabs(want[i]));
    }
}

// Runs out (built in ctx) on every ISA path with 1 and 3 threads; check sees the output.
void on_every_path(tsr_context * ctx, tsr_tensor * out, const std::function<void(const std::string &)> & check) {
    for (tsr_cpu_isa isa : isas())
        for (int threads : {1, 3}) {
            isa_scope s(isa);
            backend_holder be(threads);
            REQUIRE(run(be, ctx, out) == TSR_STATUS_SUCCESS);
            check(std::string(tsr_cpu_isa_name(isa)) + ", " + std::to_string(threads) + " threads");
        }
}

} // namespace

TEST_CASE("soft_max_ext: a NaN or +inf logit or mask entry makes the row NaN, -inf gives 0, a fully masked row 0", "[cpu][ops][nan]") {
    // rows: logit specials at (row, column) on uniform [-10, 10); mask specials likewise
    struct special { int64_t row; int64_t col; float v; };   // col -1: the whole row
    const special logits[] = {{1, 3, qnan}, {2, -2, pinf}, {3, 0, -pinf}, {3, 5, -pinf}, {4, -1, qnan}, {5, 1, pinf}, {5, 2, -pinf}, {9, 4, pinf}};
    const special masks[] = {{6, -2, qnan}, {7, -1, -pinf}, {8, 0, pinf}, {9, 4, -pinf}, {10, -1, -pinf}};
    const int64_t R = 12;   // rows 0 and 11 plain; row 10: all masked; row 9: +inf logit + -inf mask = NaN
    for (int64_t n : {7, 33, 4097}) {   // the SIMD paths' bodies and tails
        ctx_holder ctx(4);
        tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, n, R);
        tsr_tensor * m = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, n, R);
        std::mt19937 rng((unsigned)n);
        fill(a, rng, -10.0f, 10.0f);
        fill(m, rng, -1.0f, 0.0f);
        auto put = [n](tsr_tensor * t, const special & s) {
            const int64_t col = s.col == -2 ? n - 1 : s.col;   // -2: the last column (in a SIMD tail)
            for (int64_t i = 0; i < n; ++i)
                if (col == -1 || i == col) ((float *)t->data)[s.row * n + i] = s.v;
        };
        for (const special & s : logits) put(a, s);
        for (const special & s : masks) put(m, s);
        std::vector<double> want;
        for (int64_t r = 0; r < R; ++r) {
            std::vector<float> row((size_t)n);
            for (int64_t i = 0; i < n; ++i) row[(size_t)i] = ((const float *)a->data)[r * n + i] + ((const float *)m->data)[r * n + i];
            const std::vector<double> w = softmax_rule(row);
            want.insert(want.end(), w.begin(), w.end());
        }
        // the rule's cases, spelled out: rows 1-2, 4-6, 8-9 NaN; row 7, 10 zeros; row 3 finite
        for (int64_t r : {1, 2, 4, 5, 6, 8, 9}) CHECK(std::isnan(want[(size_t)(r * n)]));
        for (int64_t r : {7, 10}) CHECK(want[(size_t)(r * n + 1)] == 0.0);
        CHECK(want[(size_t)(3 * n)] == 0.0);
        CHECK(want[(size_t)(3 * n + 1)] > 0.0);
        tsr_tensor * out = tsr_soft_max_ext(ctx, a, m, 1.0f, 0.0f);
        REQUIRE(out != nullptr);
        on_every_path(ctx, out, [&](const std::string & path) {
            check_values((const float *)out->data, want, 1e-5, "n " + std::to_string(n) + ", " + path);
        });
    }
}

TEST_CASE("flash_attn_ext: a NaN query, a NaN or +inf mask entry make the row NaN; a fully masked row 0", "[cpu][ops][nan]") {
    const int64_t D = 32, nq = 6, nkv = 100;   // two key blocks
    ctx_holder ctx(4);
    std::mt19937 rng(5);
    tsr_tensor * q = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, D, nq);
    tsr_tensor * k = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, D, nkv);
    tsr_tensor * v = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, D, nkv);
    tsr_tensor * m = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, nkv, nq);
    fill(q, rng);
    fill(k, rng);
    fill(v, rng);
    fill(m, rng, -1, 0);
    tsr_set_f32_nd(q, 7, 1, 0, 0, qnan);                      // row 1: NaN query
    tsr_set_f32_nd(m, 80, 2, 0, 0, qnan);                     // row 2: NaN in the mask, second block
    tsr_set_f32_nd(m, 3, 3, 0, 0, pinf);                      // row 3: +inf in the mask
    for (int64_t j = 0; j < nkv; ++j) tsr_set_f32_nd(m, j, 4, 0, 0, -pinf);   // row 4: masked
    for (int64_t j = 0; j < 64; ++j) tsr_set_f32_nd(m, j, 5, 0, 0, j == 10 ? qnan : -pinf);   // row 5: NaN in a block otherwise masked
    tsr_tensor * out = tsr_flash_attn_ext(ctx, q, k, v, m, 0.2f, 0.0f, 0.0f);
    REQUIRE(out != nullptr);
    on_every_path(ctx, out, [&](const std::string & path) {
        for (int64_t r = 0; r < nq; ++r)
            for (int64_t i = 0; i < D; ++i) {
                const float got = ((const float *)out->data)[r * D + i];   // [D, H=1, nq]
                INFO(path << ": row " << r << " element " << i << " = " << got);
                if (r == 1 || r == 2 || r == 3 || r == 5) CHECK(std::isnan(got));
                else if (r == 4) CHECK(got == 0.0f);
                else CHECK(std::isfinite(got));
            }
    });
}

TEST_CASE("argmax: the first NaN wins; argsort: NaN sorts as the largest value", "[cpu][ops][nan]") {
    ctx_holder ctx(16);   // room for a graph per run
    const int64_t n = 40;
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, n, 4);
    std::mt19937 rng(3);
    fill(a, rng);
    float * d = (float *)a->data;
    d[5] = pinf; d[20] = qnan; d[30] = qnan;              // row 0: argmax 20
    d[n + 9] = pinf; d[n + 12] = pinf;                   // row 1: argmax 9 (first of equal maxima)
    for (int64_t i = 0; i < n; ++i) d[2 * n + i] = -pinf;   // row 2: all -inf: argmax 0
    d[3 * n + 39] = qnan; d[3 * n + 2] = -pinf;          // row 3: argmax 39
    tsr_tensor * am = tsr_argmax(ctx, a);
    tsr_tensor * asc = tsr_argsort(ctx, a, TSR_SORT_ORDER_ASC);
    tsr_tensor * desc = tsr_argsort(ctx, a, TSR_SORT_ORDER_DESC);
    REQUIRE((am && asc && desc));
    const int32_t want_argmax[4] = {20, 9, 0, 39};
    on_every_path(ctx, am, [&](const std::string & path) {
        for (int r = 0; r < 4; ++r) {
            INFO(path << ": row " << r);
            CHECK(((const int32_t *)am->data)[r] == want_argmax[r]);
        }
    });
    on_every_path(ctx, asc, [&](const std::string & path) {
        const int32_t * o = (const int32_t *)asc->data;
        INFO(path);
        CHECK(o[n - 2] == 20);   // row 0 ascending: ..., +inf, NaN (index 20), NaN (30)
        CHECK(o[n - 1] == 30);
        CHECK(o[n - 3] == 5);
        CHECK(o[3 * n + n - 1] == 39);   // row 3: the NaN last, -inf first
        CHECK(o[3 * n] == 2);
        for (int64_t i = 0; i < n; ++i) CHECK(o[2 * n + i] == i);   // equal values keep their order
    });
    on_every_path(ctx, desc, [&](const std::string & path) {
        const int32_t * o = (const int32_t *)desc->data;
        INFO(path);
        CHECK(o[0] == 20);   // row 0 descending: NaN (20), NaN (30), +inf, ...
        CHECK(o[1] == 30);
        CHECK(o[2] == 5);
        CHECK(o[3 * n] == 39);
        CHECK(o[3 * n + n - 1] == 2);
    });
}

TEST_CASE("relu, clamp and max pooling keep NaN; infinities as PyTorch", "[cpu][ops][nan]") {
    ctx_holder ctx(16);   // room for a graph per run
    const std::vector<float> in = {qnan, pinf, -pinf, -2.0f, 0.5f, 3.0f, -0.0f, qnan, 1.0f};
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 3, 3);   // 3x3 image for the pooling
    std::memcpy(a->data, in.data(), in.size() * 4);
    tsr_tensor * relu = tsr_relu(ctx, a);
    tsr_tensor * clamp = tsr_clamp(ctx, a, -1.0f, 1.0f);
    tsr_tensor * pool = tsr_pool_2d(ctx, a, TSR_OP_POOL_MAX, 2, 2, 1, 1, 0, 0);   // 2x2 windows, stride 1 -> 2x2
    REQUIRE((relu && clamp && pool));
    const std::vector<double> want_relu = {NAN, INFINITY, 0, 0, 0.5, 3, 0, NAN, 1};
    const std::vector<double> want_clamp = {NAN, 1, -1, -1, 0.5, 1, 0, NAN, 1};
    // windows {nan, inf, -2, 0.5}, {inf, -inf, 0.5, 3}, {-2, 0.5, -0, nan}, {0.5, 3, nan, 1}
    const std::vector<double> want_pool = {NAN, INFINITY, NAN, NAN};
    on_every_path(ctx, relu, [&](const std::string & path) { check_values((const float *)relu->data, want_relu, 0, "relu, " + path); });
    on_every_path(ctx, clamp, [&](const std::string & path) { check_values((const float *)clamp->data, want_clamp, 0, "clamp, " + path); });
    on_every_path(ctx, pool, [&](const std::string & path) { check_values((const float *)pool->data, want_pool, 0, "pool, " + path); });
}

TEST_CASE("quantized mul_mat: a NaN or inf activation makes its column NaN, as in float", "[cpu][ops][nan]") {
    for (tsr_type wt : {TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL,
                        TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K})
        for (int64_t N : {1, 9}) {   // matrix-vector and GEMM
            const int64_t K = 256, M = 40;
            ctx_holder ctx(16);
            std::mt19937 rng(11);
            tsr_tensor * w = tsr_new_tensor_2d(ctx, wt, K, M);
            tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, K, N);
            fill(w, rng);
            fill(x, rng);
            ((float *)x->data)[40] = qnan;                   // column 0
            if (N > 1) ((float *)x->data)[K + 200] = pinf;   // column 1 (the float sum would be +-inf or NaN)
            tsr_tensor * y = tsr_mul_mat(ctx, w, x);
            REQUIRE(y != nullptr);
            on_every_path(ctx, y, [&](const std::string & path) {
                for (int64_t n = 0; n < N; ++n)
                    for (int64_t m = 0; m < M; ++m) {
                        const float v = ((const float *)y->data)[n * M + m];
                        INFO(tsr_type_name(wt) << " N " << N << ", " << path << ": column " << n << " row " << m << " = " << v);
                        if (n < 2) CHECK(std::isnan(v));
                        else CHECK(std::isfinite(v));
                    }
            });
        }
}
