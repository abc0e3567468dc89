// Every op other than mul_mat against double-precision references written here, on
// odd shapes, views/permutes and broadcasting, for every ISA path; in-place variants
// (dst aliasing the operand) where tsr_op_can_inplace allows them.
#include "cpu_test_util.h"

#include <algorithm>
#include <numeric>

using namespace cput;

namespace {

using fn1 = double (*)(double);

double gelu_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu_ref(double x) { return x / (1 + std::exp(-x)); }

} // namespace

TEST_CASE("binary ops with broadcasting, views and types", "[cpu][ops]") {
    struct bop { const char * name; tsr_tensor * (*f)(tsr_context *, tsr_tensor *, tsr_tensor *); double (*r)(double, double); };
    const bop ops[] = {
        {"add", tsr_add, [](double a, double b) { return a + b; }},
        {"sub", tsr_sub, [](double a, double b) { return a - b; }},
        {"mul", tsr_mul, [](double a, double b) { return a * b; }},
        {"div", tsr_div, [](double a, double b) { return a / b; }},
    };
    const int64_t bshapes[][4] = {{33, 5, 3, 2}, {33, 1, 3, 1}, {1, 5, 1, 2}, {1, 1, 1, 1}, {33, 5, 1, 1}};
    for (tsr_type ta : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16})
        for (const bop & op : ops)
            for (const auto & bs : bshapes)
                for (bool permuted : {false, true}) {
                    ctx_holder ctx(16);
                    std::mt19937 rng(3);
                    tsr_tensor * a;
                    if (permuted) {  // a logical [33, 5, 3, 2] stored as [5, 33, 3, 2]
                        tsr_tensor * st = tsr_new_tensor_4d(ctx, ta, 5, 33, 3, 2);
                        fill(st, rng);
                        a = tsr_permute(ctx, st, 1, 0, 2, 3);
                    } else {
                        a = tsr_new_tensor_4d(ctx, ta, 33, 5, 3, 2);
                        fill(a, rng);
                    }
                    tsr_tensor * b = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, bs[0], bs[1], bs[2], bs[3]);
                    fill(b, rng, 0.5f, 1.5f);
                    tsr_tensor * c = op.f(ctx, a, b);
                    REQUIRE(c != nullptr);
                    std::vector<double> ref;
                    for (int64_t i3 = 0; i3 < 2; ++i3)
                        for (int64_t i2 = 0; i2 < 3; ++i2)
                            for (int64_t i1 = 0; i1 < 5; ++i1)
                                for (int64_t i0 = 0; i0 < 33; ++i0) {
                                    double v = op.r(at(a, i0, i1, i2, i3), at(b, i0 % bs[0], i1 % bs[1], i2 % bs[2], i3 % bs[3]));
                                    if (ta == TSR_TYPE_F16) v = tsr_fp16_to_fp32(tsr_fp32_to_fp16((float)v));
                                    if (ta == TSR_TYPE_BF16) v = tsr_bf16_to_fp32(tsr_fp32_to_bf16((float)v));
                                    ref.push_back(v);
                                }
                    check(ctx, c, ref, ta == TSR_TYPE_F32 ? 1e-12 : ta == TSR_TYPE_F16 ? 1e-7 : 1e-5, op.name);
                }
}

TEST_CASE("add with quantized a (dequantize, add, requantize)", "[cpu][ops]") {
    for (tsr_type t : {TSR_TYPE_Q8_0, TSR_TYPE_Q4_0}) {
        ctx_holder ctx(4);
        std::mt19937 rng(6);
        tsr_tensor * a = tsr_new_tensor_2d(ctx, t, 64, 5);
        tsr_tensor * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 64, 1);
        fill(a, rng);
        fill(b, rng, -0.5f, 0.5f);
        std::vector<double> ref;
        for (int64_t i1 = 0; i1 < 5; ++i1)
            for (int64_t i0 = 0; i0 < 64; ++i0) ref.push_back(at(a, i0, i1) + at(b, i0));
        check(ctx, tsr_add(ctx, a, b), ref, t == TSR_TYPE_Q8_0 ? 1e-4 : 1e-2, tsr_type_name(t));
    }
}

TEST_CASE("add_inplace / mul_inplace write into a", "[cpu][ops][inplace]") {
    ctx_holder ctx(4);
    std::mt19937 rng(5);
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 37, 4);
    tsr_tensor * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 37, 1);
    fill(a, rng);
    fill(b, rng);
    const std::vector<double> av = values(a);
    tsr_tensor * c = tsr_add_inplace(ctx, a, b);
    REQUIRE(c != nullptr);
    backend_holder be(2);
    REQUIRE(run(be, ctx, c) == TSR_STATUS_SUCCESS);
    for (int64_t i1 = 0; i1 < 4; ++i1)
        for (int64_t i0 = 0; i0 < 37; ++i0) CHECK(at(a, i0, i1) == Approx(av[(size_t)(i1 * 37 + i0)] + at(b, i0)));
}

TEST_CASE("unary ops, scale, clamp, sqr/sqrt/log (also in place and on permuted input)", "[cpu][ops]") {
    struct uop { const char * name; std::function<tsr_tensor *(tsr_context *, tsr_tensor *)> f; std::function<double(double)> r; bool positive; };
    const std::vector<uop> ops = {
        {"abs", tsr_abs, [](double x) { return std::fabs(x); }, false},
        {"neg", tsr_neg, [](double x) { return -x; }, false},
        {"tanh", tsr_tanh, [](double x) { return std::tanh(x); }, false},
        {"relu", tsr_relu, [](double x) { return x > 0 ? x : 0; }, false},
        {"sigmoid", tsr_sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, false},
        {"gelu", tsr_gelu, gelu_ref, false},
        {"gelu_quick", tsr_gelu_quick, [](double x) { return x / (1 + std::exp(-1.702 * x)); }, false},
        {"silu", tsr_silu, silu_ref, false},
        {"exp", tsr_exp, [](double x) { return std::exp(x); }, false},
        {"sqr", tsr_sqr, [](double x) { return x * x; }, false},
        {"sqrt", tsr_sqrt, [](double x) { return std::sqrt(x); }, true},
        {"log", tsr_log, [](double x) { return std::log(x); }, true},
        {"scale", [](tsr_context * c, tsr_tensor * a) { return tsr_scale(c, a, 0.37f); }, [](double x) { return x * 0.37; }, false},
        {"clamp", [](tsr_context * c, tsr_tensor * a) { return tsr_clamp(c, a, -0.3f, 0.6f); },
         [](double x) { return std::max(-0.3, std::min(0.6, x)); }, false},
    };
    for (const uop & op : ops)
        for (int mode = 0; mode < 3; ++mode) {  // 0 plain, 1 permuted src, 2 in place
            ctx_holder ctx(8);
            std::mt19937 rng(11);
            tsr_tensor * a;
            if (mode == 1) {
                tsr_tensor * st = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 7, 33, 2);
                fill(st, rng, op.positive ? 0.1f : -3.0f, 3.0f);
                a = tsr_permute(ctx, st, 1, 0, 2, 3);
            } else {
                a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 33, 7, 2);
                fill(a, rng, op.positive ? 0.1f : -3.0f, 3.0f);
            }
            std::vector<double> ref;
            for (double x : values(a)) ref.push_back(op.r(x));
            tsr_tensor * c = op.f(ctx, a);
            if (mode == 2) alias(c, a);
            check(ctx, c, ref, 1e-11, op.name, mode == 2 ? a : nullptr);
        }
}

TEST_CASE("swiglu and swiglu_split", "[cpu][ops]") {
    ctx_holder ctx(8);
    std::mt19937 rng(13);
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 66, 5, 2);
    tsr_tensor * x = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 33, 5, 2);
    tsr_tensor * g = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 33, 5, 2);
    fill(a, rng, -3, 3);
    fill(x, rng, -3, 3);
    fill(g, rng, -3, 3);
    std::vector<double> r1, r2;
    for (int64_t i2 = 0; i2 < 2; ++i2)
        for (int64_t i1 = 0; i1 < 5; ++i1)
            for (int64_t i0 = 0; i0 < 33; ++i0) {
                r1.push_back(silu_ref(at(a, i0, i1, i2)) * at(a, i0 + 33, i1, i2));
                r2.push_back(silu_ref(at(x, i0, i1, i2)) * at(g, i0, i1, i2));
            }
    check(ctx, tsr_swiglu(ctx, a), r1, 1e-11, "swiglu");
    check(ctx, tsr_swiglu_split(ctx, x, g), r2, 1e-11, "swiglu_split");
    tsr_tensor * c = tsr_swiglu_split(ctx, x, g);
    alias(c, x);
    check(ctx, c, r2, 1e-11, "swiglu_split in place", x);
}

TEST_CASE("sum, sum_rows, mean, argmax", "[cpu][ops]") {
    ctx_holder ctx(8);
    std::mt19937 rng(17);
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 4097, 3, 2);
    fill(a, rng);
    const std::vector<double> v = values(a);
    std::vector<double> rows, means;
    double total = 0;
    for (int r = 0; r < 6; ++r) {
        double s = 0;
        for (int i = 0; i < 4097; ++i) s += v[(size_t)(r * 4097 + i)];
        rows.push_back(s);
        means.push_back(s / 4097);
        total += s;
    }
    check(ctx, tsr_sum(ctx, a), {total}, 1e-10, "sum");
    check(ctx, tsr_sum_rows(ctx, a), rows, 1e-10, "sum_rows");
    check(ctx, tsr_mean(ctx, a), means, 1e-10, "mean");
    tsr_tensor * m = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 33, 7);
    fill(m, rng);
    std::vector<double> am;
    for (int64_t i1 = 0; i1 < 7; ++i1) {
        int best = 0;
        for (int i0 = 1; i0 < 33; ++i0) if (at(m, i0, i1) > at(m, best, i1)) best = i0;
        am.push_back(best);
    }
    check(ctx, tsr_argmax(ctx, m), am, 0, "argmax");
}

TEST_CASE("repeat, concat, pad", "[cpu][ops]") {
    ctx_holder ctx(8);
    std::mt19937 rng(19);
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 3, 2, 1);
    tsr_tensor * shape = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 6, 4, 3, 2);
    fill(a, rng);
    std::vector<double> rr;
    for (int64_t i3 = 0; i3 < 2; ++i3)
        for (int64_t i2 = 0; i2 < 3; ++i2)
            for (int64_t i1 = 0; i1 < 4; ++i1)
                for (int64_t i0 = 0; i0 < 6; ++i0) rr.push_back(at(a, i0 % 3, i1 % 2, 0));
    check(ctx, tsr_repeat(ctx, a, shape), rr, 0, "repeat");
    for (int dim = 0; dim < 4; ++dim) {
        int64_t nb_[4] = {5, 3, 2, 2};
        nb_[dim] = 4;
        tsr_tensor * x = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 5, 3, 2, 2);
        tsr_tensor * y = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, nb_[0], nb_[1], nb_[2], nb_[3]);
        fill(x, rng);
        fill(y, rng);
        tsr_tensor * c = tsr_concat(ctx, x, y, dim);
        REQUIRE(c != nullptr);
        std::vector<double> rc;
        for (int64_t i3 = 0; i3 < c->ne[3]; ++i3)
            for (int64_t i2 = 0; i2 < c->ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < c->ne[1]; ++i1)
                    for (int64_t i0 = 0; i0 < c->ne[0]; ++i0) {
                        int64_t idx[4] = {i0, i1, i2, i3};
                        if (idx[dim] < x->ne[dim]) rc.push_back(at(x, idx[0], idx[1], idx[2], idx[3]));
                        else { idx[dim] -= x->ne[dim]; rc.push_back(at(y, idx[0], idx[1], idx[2], idx[3])); }
                    }
        check(ctx, c, rc, 0, "concat");
    }
    tsr_tensor * p = tsr_pad(ctx, shape, 1, 2, 0, 1);
    fill(shape, rng);
    std::vector<double> rp;
    for (int64_t i3 = 0; i3 < 3; ++i3)
        for (int64_t i2 = 0; i2 < 3; ++i2)
            for (int64_t i1 = 0; i1 < 6; ++i1)
                for (int64_t i0 = 0; i0 < 7; ++i0)
                    rp.push_back(i0 < 6 && i1 < 4 && i3 < 2 ? at(shape, i0, i1, i2, i3) : 0.0);
    check(ctx, p, rp, 0, "pad");
}

TEST_CASE("norm, rms_norm, group_norm (also in place)", "[cpu][ops]") {
    ctx_holder ctx(8);
    std::mt19937 rng(23);
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 33, 7, 2);
    fill(a, rng, -2, 3);
    std::vector<double> rn, rr;
    const double eps = 1e-5;
    for (int64_t r = 0; r < 14; ++r) {
        const int64_t i1 = r % 7, i2 = r / 7;
        double mean = 0, ms = 0;
        for (int i = 0; i < 33; ++i) { mean += at(a, i, i1, i2); ms += at(a, i, i1, i2) * at(a, i, i1, i2); }
        mean /= 33;
        ms /= 33;
        double var = 0;
        for (int i = 0; i < 33; ++i) var += (at(a, i, i1, i2) - mean) * (at(a, i, i1, i2) - mean);
        var /= 33;
        for (int i = 0; i < 33; ++i) {
            rn.push_back((at(a, i, i1, i2) - mean) / std::sqrt(var + eps));
            rr.push_back(at(a, i, i1, i2) / std::sqrt(ms + eps));
        }
    }
    check(ctx, tsr_norm(ctx, a, 1e-5f), rn, 1e-11, "norm");
    check(ctx, tsr_rms_norm(ctx, a, 1e-5f), rr, 1e-11, "rms_norm");
    tsr_tensor * ip = tsr_rms_norm(ctx, a, 1e-5f);
    alias(ip, a);
    check(ctx, ip, rr, 1e-11, "rms_norm in place", a);

    tsr_tensor * g = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 5, 4, 6, 2);
    fill(g, rng, -1, 2);
    const int groups = 4;  // 6 channels -> groups of 2, 2, 2, 0
    std::vector<double> rg((size_t)tsr_nelements(g));
    const int64_t cpg = (6 + groups - 1) / groups;
    for (int64_t n = 0; n < 2; ++n)
        for (int64_t gi = 0; gi < groups; ++gi) {
            const int64_t c0 = gi * cpg, c1 = std::min<int64_t>(6, c0 + cpg);
            double s = 0, cnt = 0;
            for (int64_t c = c0; c < c1; ++c) for (int64_t y = 0; y < 4; ++y) for (int64_t x = 0; x < 5; ++x) { s += at(g, x, y, c, n); ++cnt; }
            if (cnt == 0) continue;
            const double mean = s / cnt;
            double v = 0;
            for (int64_t c = c0; c < c1; ++c) for (int64_t y = 0; y < 4; ++y) for (int64_t x = 0; x < 5; ++x) v += std::pow(at(g, x, y, c, n) - mean, 2);
            v /= cnt;
            for (int64_t c = c0; c < c1; ++c) for (int64_t y = 0; y < 4; ++y) for (int64_t x = 0; x < 5; ++x)
                rg[(size_t)(((n * 6 + c) * 4 + y) * 5 + x)] = (at(g, x, y, c, n) - mean) / std::sqrt(v + eps);
        }
    check(ctx, tsr_group_norm(ctx, g, groups, 1e-5f), rg, 1e-11, "group_norm");
}

TEST_CASE("get_rows from every type, set_rows into every type", "[cpu][ops]") {
    for (tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0}) {
        ctx_holder ctx(8);
        std::mt19937 rng(29);
        tsr_tensor * a = tsr_new_tensor_3d(ctx, t, 64, 9, 2);
        fill(a, rng);
        tsr_tensor * idx = tsr_new_tensor_2d(ctx, TSR_TYPE_I32, 5, 2);
        fill_i32(idx, rng, 0, 8);
        std::vector<double> ref;
        for (int64_t j = 0; j < 2; ++j)
            for (int64_t i = 0; i < 5; ++i)
                for (int64_t k = 0; k < 64; ++k) ref.push_back(at(a, k, (int64_t)at(idx, i, j), j));
        check(ctx, tsr_get_rows(ctx, a, idx), ref, 0, tsr_type_name(t));

        // set_rows: rows of an f32 source into rows of a
        tsr_tensor * dst = tsr_new_tensor_3d(ctx, t, 64, 9, 2);
        fill(dst, rng);
        tsr_tensor * src = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 64, 3, 2);
        fill(src, rng);
        tsr_tensor * ridx = tsr_new_tensor_2d(ctx, TSR_TYPE_I32, 3, 2);
        // -1 and 9 (of 9 rows) are out of range: their source rows are skipped
        const int rows[2][3] = {{4, -1, 8}, {1, 9, 2}};
        for (int j = 0; j < 2; ++j) for (int i = 0; i < 3; ++i) tsr_set_f32_nd(ridx, i, j, 0, 0, (float)rows[j][i]);
        std::vector<double> before = values(dst);
        tsr_tensor * sr = tsr_set_rows(ctx, dst, src, ridx);
        REQUIRE(sr != nullptr);
        // expected: rows replaced by the source converted to t (quantization error allowed)
        std::vector<double> ref2 = before;
        for (int j = 0; j < 2; ++j)
            for (int i = 0; i < 3; ++i)
                if (rows[j][i] >= 0 && rows[j][i] < 9)
                    for (int k = 0; k < 64; ++k) ref2[(size_t)((j * 9 + rows[j][i]) * 64 + k)] = at(src, k, i, j);
        const double thr = t == TSR_TYPE_F32 ? 0 : t == TSR_TYPE_F16 ? 1e-6 : t == TSR_TYPE_BF16 ? 1e-4 : t == TSR_TYPE_Q8_0 ? 1e-4 : 1e-2;
        for (tsr_cpu_isa isa : isas()) {
            isa_scope s(isa);
            backend_holder be(2);
            REQUIRE(run(be, ctx, sr) == TSR_STATUS_SUCCESS);
            INFO("set_rows " << tsr_type_name(t));
            CHECK(nmse(values(dst), ref2) <= thr);
        }
    }
}

TEST_CASE("cpy/cont/dup conversions and layouts", "[cpu][ops]") {
    const tsr_type types[] = {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16};
    for (tsr_type ts : types)
        for (tsr_type td : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0}) {
            ctx_holder ctx(8);
            std::mt19937 rng(31);
            tsr_tensor * a = tsr_new_tensor_3d(ctx, ts, 64, 5, 3);
            fill(a, rng);
            tsr_tensor * b = tsr_new_tensor_3d(ctx, td, 64, 5, 3);
            tsr_tensor * c = tsr_cpy(ctx, a, b);
            std::vector<double> ref = values(a);
            const double thr = td == ts || td == TSR_TYPE_F32 ? 0 : td == TSR_TYPE_F16 ? 1e-6 : td == TSR_TYPE_BF16 ? 1e-4
                             : td == TSR_TYPE_Q8_0 ? 1e-4 : 1e-2;
            check(ctx, c, ref, thr, "cpy");
        }
    // cont of a permuted tensor, cpy into a different shape, dup
    ctx_holder ctx(8);
    std::mt19937 rng(37);
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 7, 33, 3);
    fill(a, rng);
    tsr_tensor * p = tsr_permute(ctx, a, 1, 2, 0, 3);  // -> [3, 7, 33]
    std::vector<double> rp = values(p);
    check(ctx, tsr_cont(ctx, p), rp, 0, "cont permuted");
    tsr_tensor * h = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, 21, 33);
    std::vector<double> rh;
    for (double x : rp) rh.push_back(tsr_fp16_to_fp32(tsr_fp32_to_fp16((float)x)));
    check(ctx, tsr_cpy(ctx, p, h), rh, 0, "cpy reshape f16");
    // packed on both sides, shapes differ (a model's K/V rows stored into a 1-D view of its
    // cache): converted as one flat run, split across the threads at an odd element
    std::vector<double> rf16, rbf16;
    for (double x : values(a)) {
        rf16.push_back(tsr_fp16_to_fp32(tsr_fp32_to_fp16((float)x)));
        rbf16.push_back(tsr_bf16_to_fp32(tsr_fp32_to_bf16((float)x)));
    }
    tsr_tensor * flat16 = tsr_new_tensor_1d(ctx, TSR_TYPE_F16, 7 * 33 * 3);
    check(ctx, tsr_cpy(ctx, a, flat16), rf16, 0, "cpy f32 -> f16 flat");
    check(ctx, tsr_cpy(ctx, a, tsr_new_tensor_2d(ctx, TSR_TYPE_BF16, 33, 21)), rbf16, 0, "cpy f32 -> bf16 reshaped");
    tsr_tensor * h3 = tsr_new_tensor_3d(ctx, TSR_TYPE_F16, 7, 33, 3);
    fill(h3, rng);
    check(ctx, tsr_cpy(ctx, h3, tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 231, 3)), values(h3), 0, "cpy f16 -> f32 reshaped");
    // rows packed but not the whole, into a packed tensor of another shape (attention heads
    // merged back into [n_embd, T]): row by row
    tsr_tensor * heads = tsr_permute(ctx, a, 0, 2, 1, 3);  // -> [7, 3, 33], rows of 7 packed
    std::vector<double> rheads = values(heads), rheads16;
    for (double x : rheads) rheads16.push_back(tsr_fp16_to_fp32(tsr_fp32_to_fp16((float)x)));
    check(ctx, tsr_cont_2d(ctx, heads, 21, 33), rheads, 0, "cont_2d of permuted heads");
    check(ctx, tsr_cpy(ctx, heads, tsr_new_tensor_1d(ctx, TSR_TYPE_F16, 693)), rheads16, 0, "cpy permuted heads -> f16 flat");
    tsr_tensor * heads_h = tsr_permute(ctx, h3, 0, 2, 1, 3);
    std::vector<double> rheads_bf;
    for (double x : values(heads_h)) rheads_bf.push_back(tsr_bf16_to_fp32(tsr_fp32_to_bf16((float)x)));
    check(ctx, tsr_cpy(ctx, heads_h, tsr_new_tensor_2d(ctx, TSR_TYPE_BF16, 21, 33)), rheads_bf, 0, "cpy permuted f16 heads -> bf16");
    check(ctx, tsr_dup(ctx, a), values(a), 0, "dup");
    tsr_tensor * q = tsr_new_tensor_2d(ctx, TSR_TYPE_Q8_0, 64, 6);
    fill(q, rng);
    tsr_tensor * q2 = tsr_new_tensor_2d(ctx, TSR_TYPE_Q8_0, 128, 3);
    check(ctx, tsr_cpy(ctx, q, q2), values(q), 0, "cpy q8_0 reshaped");
    tsr_tensor * ip = tsr_cont(ctx, a);
    alias(ip, a);
    check(ctx, ip, values(a), 0, "cont in place");
}

// Regression (found by graph_fuzz): quantizing a NaN to q4_0 was a plain float -> int8
// cast (undefined); it gives nibble 0, what x86's truncating conversion gave before.
TEST_CASE("cpy of a block with a NaN into q4_0", "[cpu][ops]") {
    ctx_holder ctx(8);
    // one block: -16 .. 15 with a NaN at 5; d = -16 / -8 = 2
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 32);
    for (int j = 0; j < 32; ++j) ((float *)x->data)[j] = j == 5 ? NAN : (float)(j - 16);
    tsr_tensor * q = tsr_new_tensor_1d(ctx, TSR_TYPE_Q4_0, 32);
    tsr_tensor * xq = tsr_cpy(ctx, x, q);
    for (tsr_cpu_isa isa : isas()) {
        INFO("isa " << tsr_cpu_isa_name(isa));
        isa_scope scope(isa);
        std::memset(q->data, 0xAB, tsr_nbytes(q));
        REQUIRE(run(cpu(), ctx, xq) == TSR_STATUS_SUCCESS);
        const tsr_block_q4_0 * blk = (const tsr_block_q4_0 *)q->data;
        CHECK(tsr_fp16_to_fp32(blk->d) == 2.0f);
        for (int j = 0; j < 32; ++j) {
            const int nibble = j < 16 ? (blk->qs[j] & 0x0F) : (blk->qs[j - 16] >> 4);
            const int want_nibble = j == 5 ? 0 : std::min(15, (int)((j - 16) * 0.5 + 8.5));
            CHECK(nibble == want_nibble);
        }
    }
}

TEST_CASE("diag_mask_inf and soft_max_ext (mask f32/f16, ALiBi, in place)", "[cpu][ops]") {
    ctx_holder ctx(8);
    std::mt19937 rng(41);
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 33, 7, 4);
    fill(a, rng, -3, 3);
    std::vector<double> rd;
    for (int64_t i2 = 0; i2 < 4; ++i2)
        for (int64_t i1 = 0; i1 < 7; ++i1)
            for (int64_t i0 = 0; i0 < 33; ++i0) rd.push_back(i0 > 2 + i1 ? -INFINITY : at(a, i0, i1, i2));
    check(ctx, tsr_diag_mask_inf(ctx, a, 2), rd, 0, "diag_mask_inf");

    for (tsr_type mt : {TSR_TYPE_F32, TSR_TYPE_F16})
        for (float max_bias : {0.0f, 8.0f}) {
            tsr_tensor * mask = tsr_new_tensor_2d(ctx, mt, 33, 9);
            fill(mask, rng, -2, 0);
            for (int64_t i1 = 0; i1 < 9; ++i1) tsr_set_f32_nd(mask, 30 + i1 % 3, i1, 0, 0, -INFINITY);
            const float scale = 0.3f;
            std::vector<double> ref;
            const int n_head = 4;
            const double nl2 = std::pow(2, std::floor(std::log2(n_head)));
            for (int64_t h = 0; h < 4; ++h) {
                double slope = 1;
                if (max_bias > 0) {
                    const double m0 = std::pow(2, -max_bias / nl2), m1 = std::pow(2, -max_bias / 2 / nl2);
                    slope = h < nl2 ? std::pow(m0, h + 1) : std::pow(m1, 2 * (h - nl2) + 1);
                }
                for (int64_t i1 = 0; i1 < 7; ++i1) {
                    std::vector<double> w(33);
                    double mx = -INFINITY, sum = 0;
                    for (int i0 = 0; i0 < 33; ++i0) { w[i0] = at(a, i0, i1, h) * scale + slope * at(mask, i0, i1); mx = std::max(mx, w[i0]); }
                    for (double & x : w) { x = std::exp(x - mx); sum += x; }
                    for (double x : w) ref.push_back(x / sum);
                }
            }
            check(ctx, tsr_soft_max_ext(ctx, a, mask, scale, max_bias), ref, 1e-11, "soft_max_ext");
            tsr_tensor * ip = tsr_soft_max_ext(ctx, tsr_dup(ctx, a), mask, scale, max_bias);
            alias(ip, ip->src[0]);
            check(ctx, ip, ref, 1e-11, "soft_max_ext in place");
        }
    std::vector<double> rs;
    for (int64_t r = 0; r < 28; ++r) {
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < 33; ++i) mx = std::max(mx, at(a, i, r % 7, r / 7));
        for (int i = 0; i < 33; ++i) sum += std::exp(at(a, i, r % 7, r / 7) - mx);
        for (int i = 0; i < 33; ++i) rs.push_back(std::exp(at(a, i, r % 7, r / 7) - mx) / sum);
    }
    check(ctx, tsr_soft_max(ctx, a), rs, 1e-11, "soft_max");
}

TEST_CASE("rope normal and neox, freq_base/freq_scale, YaRN, in place", "[cpu][ops]") {
    for (int mode : {TSR_ROPE_TYPE_NORMAL, TSR_ROPE_TYPE_NEOX})
        for (float ext : {0.0f, 1.0f}) {
            ctx_holder ctx(8);
            std::mt19937 rng(43);
            const int64_t D = 64, H = 3, T = 5;
            const int n_dims = 48;
            tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, D, H, T);
            fill(a, rng);
            tsr_tensor * pos = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, T);
            for (int t = 0; t < T; ++t) tsr_set_f32_1d(pos, t, (float)(3 * t + 1));
            const float base = 5000.0f, fs = 0.5f, attn = 1.0f, bf = 32.0f, bs = 1.0f;
            const int n_ctx_orig = 4096;
            tsr_tensor * r = tsr_rope_ext(ctx, a, pos, nullptr, n_dims, mode, n_ctx_orig, base, fs, ext, attn, bf, bs);
            REQUIRE(r != nullptr);
            // reference (ggml's rope_yarn in double)
            auto corr_dim = [&](double n_rot) { return n_dims * std::log(n_ctx_orig / (n_rot * 2 * M_PI)) / (2 * std::log((double)base)); };
            const double c0 = std::max(0.0, std::floor(corr_dim(bf))), c1 = std::min((double)n_dims - 1, std::ceil(corr_dim(bs)));
            std::vector<double> ref;
            for (int64_t t = 0; t < T; ++t)
                for (int64_t h = 0; h < H; ++h) {
                    std::vector<double> row(D);
                    for (int64_t i = 0; i < D; ++i) row[i] = at(a, i, h, t);
                    std::vector<double> out = row;
                    for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
                        const double theta_ext = (3 * t + 1) * std::pow((double)base, -(double)i0 / n_dims);
                        const double theta_int = fs * theta_ext;
                        double theta = theta_int, ms = attn;
                        if (ext != 0) {
                            const double y = ((double)(i0 / 2) - c0) / std::max(0.001, c1 - c0);
                            const double ramp = (1 - std::min(1.0, std::max(0.0, y))) * ext;
                            theta = theta_int * (1 - ramp) + theta_ext * ramp;
                            ms *= 1 + 0.1 * std::log(1 / fs);
                        }
                        const int64_t ia = mode == TSR_ROPE_TYPE_NEOX ? i0 / 2 : i0;
                        const int64_t ib = mode == TSR_ROPE_TYPE_NEOX ? i0 / 2 + n_dims / 2 : i0 + 1;
                        out[ia] = (row[ia] * std::cos(theta) - row[ib] * std::sin(theta)) * ms;
                        out[ib] = (row[ia] * std::sin(theta) + row[ib] * std::cos(theta)) * ms;
                    }
                    ref.insert(ref.end(), out.begin(), out.end());
                }
            check(ctx, r, ref, 1e-10, "rope");
            tsr_tensor * ah = tsr_cast(ctx, a, TSR_TYPE_F16);
            tsr_tensor * rh = tsr_rope_ext(ctx, ah, pos, nullptr, n_dims, mode, n_ctx_orig, base, fs, ext, attn, bf, bs);
            check(ctx, rh, ref, 1e-6, "rope f16");
            tsr_tensor * ip = tsr_rope_ext(ctx, tsr_dup(ctx, a), pos, nullptr, n_dims, mode, n_ctx_orig, base, fs, ext, attn, bf, bs);
            alias(ip, ip->src[0]);
            check(ctx, ip, ref, 1e-10, "rope in place");
        }
}

TEST_CASE("flash_attn_ext: GQA, mask, softcap, ALiBi, f16/q8_0 K and V", "[cpu][ops]") {
    struct cfg { tsr_type kv; float softcap; float max_bias; bool mask; };
    const cfg cfgs[] = {{TSR_TYPE_F32, 0, 0, false}, {TSR_TYPE_F16, 0, 0, true}, {TSR_TYPE_F32, 20, 0, true},
                        {TSR_TYPE_F16, 0, 4, true}, {TSR_TYPE_Q8_0, 0, 0, true}, {TSR_TYPE_BF16, 0, 0, true}};
    for (const cfg & c : cfgs) {
        ctx_holder ctx(16);
        std::mt19937 rng(47);
        const int64_t D = 64, Dv = 32, nq = 7, nkv = 33, H = 4, Hkv = 2, B = 2;
        tsr_tensor * q = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, D, nq, H, B);
        tsr_tensor * k = tsr_new_tensor_4d(ctx, c.kv, D, nkv, Hkv, B);
        tsr_tensor * v = tsr_new_tensor_4d(ctx, c.kv == TSR_TYPE_Q8_0 ? TSR_TYPE_Q8_0 : c.kv, Dv, nkv, Hkv, B);
        fill(q, rng);
        fill(k, rng);
        fill(v, rng);
        tsr_tensor * m = nullptr;
        if (c.mask) {
            m = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, nkv, 8);
            fill(m, rng, -1, 0);
            for (int64_t i = 0; i < 8; ++i)
                for (int64_t j = 20 + i; j < nkv; ++j) tsr_set_f32_nd(m, j, i, 0, 0, -INFINITY);
        }
        const float scale = 0.125f;
        tsr_tensor * out = tsr_flash_attn_ext(ctx, q, k, v, m, scale, c.max_bias, c.softcap);
        REQUIRE(out != nullptr);
        const std::vector<double> ref = flash_attn_reference(q, k, v, m, scale, c.max_bias, c.softcap);
        check(ctx, out, ref, c.kv == TSR_TYPE_Q8_0 ? 1e-4 : 1e-10, tsr_type_name(c.kv));
    }
}

TEST_CASE("im2col, conv_2d, pool_2d", "[cpu][ops]") {
    ctx_holder ctx(16);
    std::mt19937 rng(53);
    const int64_t W = 9, Hh = 7, IC = 3, N = 2, KW = 3, KH = 2, OC = 8;
    const int s0 = 2, s1 = 1, p0 = 1, p1 = 1, d0 = 1, d1 = 2;
    tsr_tensor * in = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, W, Hh, IC, N);
    fill(in, rng);
    const int64_t OW = (W + 2 * p0 - d0 * (KW - 1) - 1) / s0 + 1, OH = (Hh + 2 * p1 - d1 * (KH - 1) - 1) / s1 + 1;
    auto inval = [&](int64_t x, int64_t y, int64_t c, int64_t n) {
        return (x < 0 || x >= W || y < 0 || y >= Hh) ? 0.0 : at(in, x, y, c, n);
    };
    for (tsr_type kt : {TSR_TYPE_F32, TSR_TYPE_F16}) {
        tsr_tensor * ker = tsr_new_tensor_4d(ctx, kt, KW, KH, IC, OC);
        fill(ker, rng);
        std::vector<double> rc;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t oc = 0; oc < OC; ++oc)
                for (int64_t oy = 0; oy < OH; ++oy)
                    for (int64_t ox = 0; ox < OW; ++ox) {
                        double s = 0;
                        for (int64_t c = 0; c < IC; ++c)
                            for (int64_t ky = 0; ky < KH; ++ky)
                                for (int64_t kx = 0; kx < KW; ++kx)
                                    s += at(ker, kx, ky, c, oc) * inval(ox * s0 + kx * d0 - p0, oy * s1 + ky * d1 - p1, c, n);
                        rc.push_back(s);
                    }
        check(ctx, tsr_conv_2d(ctx, ker, in, s0, s1, p0, p1, d0, d1), rc, 1e-10, "conv_2d");
        std::vector<double> ri;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t oy = 0; oy < OH; ++oy)
                for (int64_t ox = 0; ox < OW; ++ox)
                    for (int64_t c = 0; c < IC; ++c)
                        for (int64_t ky = 0; ky < KH; ++ky)
                            for (int64_t kx = 0; kx < KW; ++kx) ri.push_back(inval(ox * s0 + kx * d0 - p0, oy * s1 + ky * d1 - p1, c, n));
        check(ctx, tsr_im2col(ctx, ker, in, s0, s1, p0, p1, d0, d1, true, TSR_TYPE_F32), ri, 0, "im2col");
    }
    for (int op : {TSR_OP_POOL_MAX, TSR_OP_POOL_AVG}) {
        tsr_tensor * pl = tsr_pool_2d(ctx, in, (tsr_op_pool)op, 3, 2, 2, 2, 1, 1);
        REQUIRE(pl != nullptr);
        std::vector<double> rp;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t c = 0; c < IC; ++c)
                for (int64_t oy = 0; oy < pl->ne[1]; ++oy)
                    for (int64_t ox = 0; ox < pl->ne[0]; ++ox) {
                        double v = op == TSR_OP_POOL_MAX ? -1e30 : 0;
                        for (int ky = 0; ky < 2; ++ky)
                            for (int kx = 0; kx < 3; ++kx) {
                                const int64_t x = ox * 2 - 1 + kx, y = oy * 2 - 1 + ky;
                                if (x < 0 || x >= W || y < 0 || y >= Hh) continue;
                                v = op == TSR_OP_POOL_MAX ? std::max(v, at(in, x, y, c, n)) : v + at(in, x, y, c, n);
                            }
                        rp.push_back(op == TSR_OP_POOL_MAX ? v : v / 6);
                    }
        check(ctx, pl, rp, 1e-12, "pool_2d");
    }
}

TEST_CASE("upscale nearest/bilinear, argsort, out_prod", "[cpu][ops]") {
    ctx_holder ctx(8);
    std::mt19937 rng(59);
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 5, 4, 2);
    fill(a, rng);
    for (int mode : {TSR_SCALE_MODE_NEAREST, TSR_SCALE_MODE_BILINEAR}) {
        tsr_tensor * u = tsr_upscale_ext(ctx, a, 11, 7, 2, 1, (tsr_scale_mode)mode);
        REQUIRE(u != nullptr);
        std::vector<double> ref;
        const double sx = 11.0 / 5, sy = 7.0 / 4;
        for (int64_t c = 0; c < 2; ++c)
            for (int64_t y = 0; y < 7; ++y)
                for (int64_t x = 0; x < 11; ++x) {
                    if (mode == TSR_SCALE_MODE_NEAREST) {
                        ref.push_back(at(a, std::min<int64_t>(4, (int64_t)(x / sx)), std::min<int64_t>(3, (int64_t)(y / sy)), c));
                    } else {
                        const double fx = (x + 0.5) / sx - 0.5, fy = (y + 0.5) / sy - 0.5;
                        auto cl = [](int64_t v, int64_t hi) { return std::max<int64_t>(0, std::min(v, hi)); };
                        const int64_t x0 = cl((int64_t)std::floor(fx), 4), x1 = cl((int64_t)std::floor(fx) + 1, 4);
                        const int64_t y0 = cl((int64_t)std::floor(fy), 3), y1 = cl((int64_t)std::floor(fy) + 1, 3);
                        const double dx = std::min(1.0, std::max(0.0, fx - std::floor(fx))), dy = std::min(1.0, std::max(0.0, fy - std::floor(fy)));
                        ref.push_back(at(a, x0, y0, c) * (1 - dx) * (1 - dy) + at(a, x1, y0, c) * dx * (1 - dy) +
                                      at(a, x0, y1, c) * (1 - dx) * dy + at(a, x1, y1, c) * dx * dy);
                    }
                }
        check(ctx, u, ref, 1e-11, "upscale");
    }
    tsr_tensor * s = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 33, 4);
    fill(s, rng);
    for (int order : {TSR_SORT_ORDER_ASC, TSR_SORT_ORDER_DESC}) {
        std::vector<double> ref;
        for (int64_t r = 0; r < 4; ++r) {
            std::vector<int> idx(33);
            std::iota(idx.begin(), idx.end(), 0);
            std::sort(idx.begin(), idx.end(), [&](int x, int y) { return order == TSR_SORT_ORDER_ASC ? at(s, x, r) < at(s, y, r) : at(s, x, r) > at(s, y, r); });
            for (int i : idx) ref.push_back(i);
        }
        check(ctx, tsr_argsort(ctx, s, (tsr_sort_order)order), ref, 0, "argsort");
    }
    for (tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_Q8_0}) {
        tsr_tensor * x = tsr_new_tensor_3d(ctx, t, 64, 9, 2);   // [M, K]
        tsr_tensor * y = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 5, 9, 2);   // [N, K]
        fill(x, rng);
        fill(y, rng);
        std::vector<double> ref;
        for (int64_t b = 0; b < 2; ++b)
            for (int64_t n = 0; n < 5; ++n)
                for (int64_t m = 0; m < 64; ++m) {
                    double acc = 0;
                    for (int64_t k = 0; k < 9; ++k) acc += at(x, m, k, b) * at(y, n, k, b);
                    ref.push_back(acc);
                }
        check(ctx, tsr_out_prod(ctx, x, y), ref, 1e-11, "out_prod");
    }
}
