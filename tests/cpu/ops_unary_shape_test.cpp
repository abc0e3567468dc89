// Issue 17 part A on the CPU: ggml's other unary and GLU functions, the fill and shape ops
// and user-defined ops, each against double-precision references written here (NaN and
// infinities by docs/ops.md's rules), on every ISA path with 2 threads; their in-place
// forms; and the errors of bad input (NULL, a message naming the shapes, no arena used).
#include "cpu_test_util.h"

#include <algorithm>
#include <atomic>
#include <numeric>

using namespace cput;

namespace {

// Values that cover every branch: NaN, infinities, signed zeros, halves (round), the
// softplus threshold, then uniform in [-4, 4).
tsr_tensor * special_input(tsr_context * ctx, tsr_type type, int64_t ne0, int64_t ne1, int64_t ne2, uint32_t seed) {
    tsr_tensor * a = tsr_new_tensor_3d(ctx, type, ne0, ne1, ne2);
    REQUIRE(a != nullptr);
    std::mt19937 rng(seed);
    fill(a, rng, -4.0f, 4.0f);
    const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 0.5f, -0.5f, 2.5f, -2.5f, 1.5f, 25.0f, -3.0f, 3.0f, 1e-8f};
    for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); ++i) tsr_set_f32_1d(a, (int64_t)(i * 3), specials[i]);
    return a;
}

double clamp_keep_nan(double x, double lo, double hi) { return x != x ? x : std::max(lo, std::min(hi, x)); }
double gelu_erf_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double gelu_quick_ref(double x) { return x / (1 + std::exp(-1.702 * x)); }
double silu_d(double x) { return x / (1 + std::exp(-x)); }
double relu_d(double x) { return x > 0 ? x : x <= 0 ? 0 : x; }

struct unary_case {
    const char * name;
    tsr_tensor * (*make)(tsr_context *, tsr_tensor *);
    tsr_tensor * (*make_inplace)(tsr_context *, tsr_tensor *);   // NULL: none
    double (*ref)(double);
};

const unary_case kUnary[] = {
    {"sgn", tsr_sgn, tsr_sgn_inplace, [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x == 0 ? 0.0 : x; }},
    {"step", tsr_step, tsr_step_inplace, [](double x) { return x > 0 ? 1.0 : x <= 0 ? 0.0 : x; }},
    {"elu", tsr_elu, tsr_elu_inplace, [](double x) { return x > 0 ? x : std::expm1(x); }},
    {"hardswish", tsr_hardswish, nullptr, [](double x) { return x * clamp_keep_nan((x + 3) / 6, 0, 1); }},
    {"hardsigmoid", tsr_hardsigmoid, nullptr, [](double x) { return clamp_keep_nan((x + 3) / 6, 0, 1); }},
    {"expm1", tsr_expm1, tsr_expm1_inplace, [](double x) { return std::expm1(x); }},
    {"softplus", tsr_softplus, tsr_softplus_inplace, [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); }},
    {"gelu_erf", tsr_gelu_erf, tsr_gelu_erf_inplace, gelu_erf_ref},
    {"floor", tsr_floor, tsr_floor_inplace, [](double x) { return std::floor(x); }},
    {"ceil", tsr_ceil, tsr_ceil_inplace, [](double x) { return std::ceil(x); }},
    {"round", tsr_round, tsr_round_inplace, [](double x) { return std::round(x); }},   // halves away from zero
    {"trunc", tsr_trunc, tsr_trunc_inplace, [](double x) { return std::trunc(x); }},
    {"sin", tsr_sin, tsr_sin_inplace, [](double x) { return std::sin(x); }},
    {"cos", tsr_cos, tsr_cos_inplace, [](double x) { return std::cos(x); }},
    {"leaky_relu", [](tsr_context * c, tsr_tensor * a) { return tsr_leaky_relu(c, a, 0.1f, false); },
     [](tsr_context * c, tsr_tensor * a) { return tsr_leaky_relu(c, a, 0.1f, true); },
     [](double x) { return x > 0 ? x : (double)0.1f * x; }},
};

// The reference of an op on a float tensor's values, rounded to its storage type.
std::vector<double> map_ref(const tsr_tensor * a, double (*f)(double), tsr_type out) {
    std::vector<double> r;
    for (double x : values(a)) {
        double v = f(x);
        if (out == TSR_TYPE_F16) v = tsr_fp16_to_fp32(tsr_fp32_to_fp16((float)v));
        r.push_back(v);
    }
    return r;
}

} // namespace

TEST_CASE("new unary functions, sin, cos, leaky_relu: values, NaN/inf, views, f16, in place", "[cpu][ops][issue17]") {
    for (const unary_case & u : kUnary) {
        ctx_holder ctx(8);
        tsr_tensor * a = special_input(ctx, TSR_TYPE_F32, 37, 5, 2, 21);
        check(ctx, u.make(ctx, a), map_ref(a, u.ref, TSR_TYPE_F32), 1e-12, u.name);
        // a transposed view: strided rows
        tsr_tensor * st = special_input(ctx, TSR_TYPE_F32, 9, 13, 1, 22);
        tsr_tensor * t = tsr_transpose(ctx, st);
        check(ctx, u.make(ctx, t), map_ref(t, u.ref, TSR_TYPE_F32), 1e-12, std::string(u.name) + " transposed");
        tsr_tensor * h = special_input(ctx, TSR_TYPE_F16, 33, 3, 1, 23);
        check(ctx, u.make(ctx, h), map_ref(h, u.ref, TSR_TYPE_F16), 1e-6, std::string(u.name) + " f16");
        // in place through gallocr's contract, and the _inplace form (a view of a)
        tsr_tensor * c = u.make(ctx, a);
        alias(c, a);
        check(ctx, c, map_ref(a, u.ref, TSR_TYPE_F32), 1e-12, std::string(u.name) + " aliased", a);
        if (u.make_inplace) {
            tsr_tensor * v = u.make_inplace(ctx, a);
            REQUIRE(v != nullptr);
            CHECK(v->view_src == a);
            check(ctx, v, map_ref(a, u.ref, TSR_TYPE_F32), 1e-12, std::string(u.name) + "_inplace", a);
        }
    }
    // tsr_unary / tsr_unary_inplace name every function; ggml's halves-away rounding by hand
    ctx_holder ctx(1);
    tsr_tensor * a = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 6);
    const float in[6] = {2.5f, -2.5f, 0.5f, -0.5f, 1.49999988f, -0.0f};
    for (int i = 0; i < 6; ++i) tsr_set_f32_1d(a, i, in[i]);
    check(ctx, tsr_unary(ctx, a, TSR_UNARY_OP_ROUND), {3, -3, 1, -1, 1, 0}, 0.0, "round by hand");
    CHECK(std::string(tsr_unary_op_name(TSR_UNARY_OP_GELU_ERF)) == "GELU_ERF");
    CHECK(std::string(tsr_op_name(TSR_OP_LEAKY_RELU)) == "LEAKY_RELU");
}

namespace {

struct glu_case {
    tsr_glu_op op;
    double (*act)(double);
};
const glu_case kGlu[] = {
    {TSR_GLU_OP_SWIGLU, silu_d},   {TSR_GLU_OP_REGLU, relu_d},         {TSR_GLU_OP_GEGLU, gelu_tanh_ref},
    {TSR_GLU_OP_GEGLU_ERF, gelu_erf_ref}, {TSR_GLU_OP_GEGLU_QUICK, gelu_quick_ref},
};

double swiglu_oai_ref(double x, double g, double alpha, double limit) {
    const double xc = std::min(x, limit), gc = std::max(-limit, std::min(limit, g));
    return xc / (1 + std::exp(-alpha * xc)) * (gc + 1);
}

} // namespace

TEST_CASE("GLU variants: fused, swapped and split, f32 and f16, swiglu_oai's clamps", "[cpu][ops][issue17]") {
    for (const glu_case & gc : kGlu)
        for (tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16}) {
            const std::string name = std::string(tsr_glu_op_name(gc.op)) + " " + tsr_type_name(t);
            ctx_holder ctx(8);
            std::mt19937 rng(31);
            const int64_t n = 45;   // odd: the vector paths' tails
            tsr_tensor * a = tsr_new_tensor_3d(ctx, t, 2 * n, 5, 2);
            tsr_tensor * x = tsr_new_tensor_3d(ctx, t, n, 5, 2);
            tsr_tensor * g = tsr_new_tensor_3d(ctx, t, n, 5, 2);
            fill(a, rng, -4, 4);
            fill(x, rng, -4, 4);
            fill(g, rng, -4, 4);
            std::vector<double> fused, swapped, split;
            for (int64_t i2 = 0; i2 < 2; ++i2)
                for (int64_t i1 = 0; i1 < 5; ++i1)
                    for (int64_t i0 = 0; i0 < n; ++i0) {
                        fused.push_back(gc.act(at(a, i0, i1, i2)) * at(a, i0 + n, i1, i2));
                        swapped.push_back(gc.act(at(a, i0 + n, i1, i2)) * at(a, i0, i1, i2));
                        split.push_back(gc.act(at(x, i0, i1, i2)) * at(g, i0, i1, i2));
                    }
            const double thr = t == TSR_TYPE_F32 ? 1e-11 : 1e-6;
            check(ctx, tsr_glu(ctx, a, gc.op, false), fused, thr, name + " fused");
            check(ctx, tsr_glu(ctx, a, gc.op, true), swapped, thr, name + " swapped");
            check(ctx, tsr_glu_split(ctx, x, g, gc.op), split, thr, name + " split");
            if (t == TSR_TYPE_F32) {   // the split form in place over either operand
                for (int s = 0; s < 2; ++s) {
                    tsr_tensor * c = tsr_glu_split(ctx, x, g, gc.op);
                    REQUIRE(tsr_op_can_inplace(c, s));
                    tsr_tensor * over = s == 0 ? x : g;
                    c->data = over->data;
                    check(ctx, c, split, thr, name + " split in place over src" + std::to_string(s), over);
                }
            }
        }
    // the named forms build the same op
    ctx_holder ctx(1);
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 8, 2);
    CHECK(tsr_get_glu_op(tsr_geglu_quick_swapped(ctx, a)) == TSR_GLU_OP_GEGLU_QUICK);
    CHECK(tsr_get_op_params_i32(tsr_reglu_swapped(ctx, a), 1) == 1);
    CHECK(tsr_get_glu_op(tsr_geglu_erf_split(ctx, a, a)) == TSR_GLU_OP_GEGLU_ERF);

    // swiglu_oai: values past the limit on both operands
    for (bool fused_form : {true, false}) {
        ctx_holder c2(8);
        std::mt19937 rng(37);
        const int64_t n = 33;
        const float alpha = 1.702f, limit = 3.0f;
        tsr_tensor * x = tsr_new_tensor_2d(c2, TSR_TYPE_F32, fused_form ? 2 * n : n, 6);
        tsr_tensor * g = tsr_new_tensor_2d(c2, TSR_TYPE_F32, n, 6);
        fill(x, rng, -6, 6);
        fill(g, rng, -6, 6);
        tsr_set_f32_1d(x, 4, NAN);
        std::vector<double> ref;
        for (int64_t i1 = 0; i1 < 6; ++i1)
            for (int64_t i0 = 0; i0 < n; ++i0) {
                const double xv = at(x, i0, i1), gv = fused_form ? at(x, i0 + n, i1) : at(g, i0, i1);
                ref.push_back(xv != xv ? xv : swiglu_oai_ref(xv, gv, alpha, limit));
            }
        check(c2, tsr_swiglu_oai(c2, x, fused_form ? nullptr : g, alpha, limit), ref, 1e-11,
              fused_form ? "swiglu_oai fused" : "swiglu_oai split");
    }
}

TEST_CASE("arange, fill, tri, cumsum, diag against loops by hand", "[cpu][ops][issue17]") {
    ctx_holder ctx(8);
    {   // ceil((10 - 1.5) / 0.75) = 12 elements; a negative step counts down
        std::vector<double> up, down = {5, 3, 1};
        for (int i = 0; i < 12; ++i) up.push_back(1.5 + 0.75 * i);
        check(ctx, tsr_arange(ctx, 1.5f, 10.0f, 0.75f), up, 1e-14, "arange");
        check(ctx, tsr_arange(ctx, 5.0f, 0.0f, -2.0f), down, 0.0, "arange down");
    }
    tsr_tensor * a = special_input(ctx, TSR_TYPE_F32, 9, 7, 3, 41);
    {
        check(ctx, tsr_fill(ctx, a, 2.5f), std::vector<double>((size_t)tsr_nelements(a), 2.5), 0.0, "fill");
        tsr_tensor * h = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, 17, 3);
        check(ctx, tsr_fill(ctx, h, -0.25f), std::vector<double>(51, -0.25), 0.0, "fill f16");
        tsr_tensor * v = tsr_fill_inplace(ctx, a, 7.0f);
        CHECK(v->view_src == a);
        check(ctx, v, std::vector<double>((size_t)tsr_nelements(a), 7.0), 0.0, "fill_inplace", a);
    }
    for (tsr_tri_type type : {TSR_TRI_TYPE_UPPER_DIAG, TSR_TRI_TYPE_UPPER, TSR_TRI_TYPE_LOWER_DIAG, TSR_TRI_TYPE_LOWER}) {
        std::vector<double> ref;
        for (int64_t i2 = 0; i2 < 3; ++i2)
            for (int64_t i1 = 0; i1 < 7; ++i1)
                for (int64_t i0 = 0; i0 < 9; ++i0) {
                    const bool keep = type == TSR_TRI_TYPE_UPPER_DIAG ? i0 >= i1 : type == TSR_TRI_TYPE_UPPER ? i0 > i1
                                    : type == TSR_TRI_TYPE_LOWER_DIAG ? i0 <= i1 : i0 < i1;
                    ref.push_back(keep ? at(a, i0, i1, i2) : 0.0);   // a NaN outside the triangle is gone
                }
        check(ctx, tsr_tri(ctx, a, type), ref, 0.0, "tri " + std::to_string((int)type));
    }
    {   // cumsum of a plain and of a transposed view
        std::mt19937 rng(43);
        tsr_tensor * b = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 37, 5, 3);
        fill(b, rng);
        tsr_tensor * st = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 6, 11);
        fill(st, rng);
        for (tsr_tensor * src : {b, tsr_transpose(ctx, st)}) {
            std::vector<double> ref;
            const int64_t ne0 = src->ne[0];
            const std::vector<double> v = values(src);
            for (size_t r = 0; r < v.size() / (size_t)ne0; ++r) {
                double s = 0;
                for (int64_t i = 0; i < ne0; ++i) ref.push_back(s += v[r * (size_t)ne0 + (size_t)i]);
            }
            check(ctx, tsr_cumsum(ctx, src), ref, 1e-13, "cumsum");
        }
    }
    {
        std::mt19937 rng(47);
        tsr_tensor * d = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 6, 1, 3, 2);
        fill(d, rng);
        std::vector<double> ref;
        for (int64_t i3 = 0; i3 < 2; ++i3)
            for (int64_t i2 = 0; i2 < 3; ++i2)
                for (int64_t i1 = 0; i1 < 6; ++i1)
                    for (int64_t i0 = 0; i0 < 6; ++i0) ref.push_back(i0 == i1 ? at(d, i0, 0, i2, i3) : 0.0);
        check(ctx, tsr_diag(ctx, d), ref, 0.0, "diag");
    }
}

TEST_CASE("acc, set, set_1d, set_2d and their in-place forms write the view of a that b covers", "[cpu][ops][issue17]") {
    ctx_holder ctx(8);
    std::mt19937 rng(53);
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 10, 6, 3);
    tsr_tensor * b = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 4, 3, 2);
    tsr_tensor * b1 = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 7);
    tsr_tensor * b2 = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 3, 4);
    for (tsr_tensor * t : {a, b, b1, b2}) fill(t, rng);
    const std::vector<double> av = values(a);
    // the reference: a's flat values, b's element (i0, i1, i2) at offset/4 + i0 + i1*nb1/4 + i2*nb2/4
    auto expect = [&](const tsr_tensor * src, size_t nb1, size_t nb2, size_t offset, bool acc) {
        std::vector<double> r = av;
        for (int64_t i2 = 0; i2 < src->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < src->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < src->ne[0]; ++i0) {
                    const size_t k = offset / 4 + (size_t)i0 + (size_t)i1 * nb1 / 4 + (size_t)i2 * nb2 / 4;
                    r[k] = (acc ? r[k] : 0.0) + at(src, i0, i1, i2);
                }
        return r;
    };
    const size_t off = (1 + 2 * 10) * 4;   // element (1, 2, 0)
    check(ctx, tsr_acc(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], off), expect(b, a->nb[1], a->nb[2], off, true), 1e-14, "acc");
    check(ctx, tsr_set(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], off), expect(b, a->nb[1], a->nb[2], off, false), 0.0, "set");
    // strides of our own: every other row of a
    check(ctx, tsr_acc(ctx, a, b, 2 * a->nb[1], a->nb[2], a->nb[3], 4), expect(b, 2 * a->nb[1], a->nb[2], 4, true), 1e-14,
          "acc every other row");
    check(ctx, tsr_set_1d(ctx, a, b1, 5 * 4), expect(b1, 0, 0, 20, false), 0.0, "set_1d");
    check(ctx, tsr_set_2d(ctx, a, b2, 3 * a->nb[1], 8), expect(b2, 3 * a->nb[1], 0, 8, false), 0.0, "set_2d");
    // in place: the result is a view of a (ggml's _inplace), or gallocr aliases it (the contract)
    tsr_tensor * v = tsr_acc_inplace(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], off);
    REQUIRE(v != nullptr);
    CHECK(v->view_src == a);
    check(ctx, v, expect(b, a->nb[1], a->nb[2], off, true), 1e-14, "acc_inplace", a);
    check(ctx, tsr_set_1d_inplace(ctx, a, b1, 0), expect(b1, 0, 0, 0, false), 0.0, "set_1d_inplace", a);
    check(ctx, tsr_set_2d_inplace(ctx, a, b2, a->nb[1], 4 * 10 * 6), expect(b2, a->nb[1], 0, 240, false), 0.0, "set_2d_inplace", a);
    check(ctx, tsr_set_inplace(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], off), expect(b, a->nb[1], a->nb[2], off, false), 0.0,
          "set_inplace", a);
    tsr_tensor * c = tsr_set(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], off);
    alias(c, a);
    check(ctx, c, expect(b, a->nb[1], a->nb[2], off, false), 0.0, "set aliased", a);
}

TEST_CASE("repeat_back sums the repetitions; l2_norm; top_k of rows with ties and NaN", "[cpu][ops][issue17]") {
    ctx_holder ctx(8);
    std::mt19937 rng(59);
    {
        tsr_tensor * a = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 12, 6, 4, 2);
        tsr_tensor * shape = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 4, 3, 2, 1);
        fill(a, rng);
        std::vector<double> ref(4 * 3 * 2, 0.0);
        for (int64_t i3 = 0; i3 < 2; ++i3)
            for (int64_t i2 = 0; i2 < 4; ++i2)
                for (int64_t i1 = 0; i1 < 6; ++i1)
                    for (int64_t i0 = 0; i0 < 12; ++i0) ref[(size_t)((i2 % 2) * 12 + (i1 % 3) * 4 + i0 % 4)] += at(a, i0, i1, i2, i3);
        check(ctx, tsr_repeat_back(ctx, a, shape), ref, 1e-13, "repeat_back");
        // repeat_back(repeat(x)) = x times the repetitions
        tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 5, 2);
        fill(x, rng);
        tsr_tensor * big = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 15, 4);
        std::vector<double> six;
        for (double v : values(x)) six.push_back(6 * v);
        check(ctx, tsr_repeat_back(ctx, tsr_repeat(ctx, x, big), x), six, 1e-13, "repeat_back of repeat");
    }
    {   // l2_norm: a plain row, a zero row (eps), a row with a NaN (all NaN), a row with inf
        const int64_t n = 37;
        tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, n, 4);
        fill(a, rng);
        for (int64_t i = 0; i < n; ++i) tsr_set_f32_nd(a, i, 1, 0, 0, 0.0f);
        tsr_set_f32_nd(a, 5, 2, 0, 0, NAN);
        tsr_set_f32_nd(a, 7, 3, 0, 0, INFINITY);
        const double eps = 1e-3;
        std::vector<double> ref;
        for (int64_t r = 0; r < 4; ++r) {
            double ss = 0;
            for (int64_t i = 0; i < n; ++i) ss += at(a, i, r) * at(a, i, r);
            const double norm = std::sqrt(ss), den = norm < eps ? eps : norm;   // NaN-keeping max
            for (int64_t i = 0; i < n; ++i) ref.push_back(at(a, i, r) / den);
        }
        check(ctx, tsr_l2_norm(ctx, a, (float)eps), ref, 1e-13, "l2_norm");
        check(ctx, tsr_l2_norm_inplace(ctx, a, (float)eps), ref, 1e-13, "l2_norm_inplace", a);
    }
    {   // top_k: the k largest, largest first, ties by index, NaN the largest
        const int64_t n = 50, rows = 7;
        const int k = 5;
        tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, n, rows);
        fill(a, rng);
        tsr_set_f32_nd(a, 3, 1, 0, 0, 2.0f);
        tsr_set_f32_nd(a, 9, 1, 0, 0, 2.0f);   // a tie for first place
        tsr_set_f32_nd(a, 40, 2, 0, 0, NAN);
        tsr_set_f32_nd(a, 0, 3, 0, 0, INFINITY);
        std::vector<double> ref;
        for (int64_t r = 0; r < rows; ++r) {
            std::vector<int> idx(n);
            std::iota(idx.begin(), idx.end(), 0);
            std::stable_sort(idx.begin(), idx.end(), [&](int x, int y) {
                const double vx = at(a, x, r), vy = at(a, y, r);
                if (std::isnan(vx) || std::isnan(vy)) return std::isnan(vx) && !std::isnan(vy);
                return vx > vy;
            });
            for (int i = 0; i < k; ++i) ref.push_back(idx[(size_t)i]);
        }
        check(ctx, tsr_top_k(ctx, a, k), ref, 0.0, "top_k");
        check(ctx, tsr_top_k(ctx, a, (int)n), [&] {   // k = n is argsort descending
            std::vector<double> all;
            tsr_tensor * s = tsr_argsort(ctx, a, TSR_SORT_ORDER_DESC);
            backend_holder be(1);
            REQUIRE(run(be, ctx, s) == TSR_STATUS_SUCCESS);
            for (double v : values(s)) all.push_back(v);
            return all;
        }(), 0.0, "top_k all = argsort desc");
    }
}

namespace {

// A user op that records every (ith, nth) it is called with and writes its share of rows.
struct call_log {
    std::atomic<int> calls{0};
    std::atomic<int> seen_nth{0};
    std::atomic<unsigned> ith_mask{0};
};

void scale_rows_by_ith_share(tsr_tensor * dst, const tsr_tensor * a, int ith, int nth, void * ud) {
    call_log * log = (call_log *)ud;
    log->calls++;
    log->seen_nth = nth;
    log->ith_mask |= 1u << ith;
    const int64_t nr = tsr_nrows(dst);
    for (int64_t r = ith; r < nr; r += nth)
        for (int64_t i = 0; i < dst->ne[0]; ++i)
            tsr_set_f32_nd(dst, i, r, 0, 0, 2.0f * tsr_get_f32_nd(a, i, r, 0, 0) + 1.0f);
}

void add_two(tsr_tensor * dst, const tsr_tensor * a, const tsr_tensor * b, int ith, int nth, void *) {
    for (int64_t i = ith; i < tsr_nelements(dst); i += nth) tsr_set_f32_1d(dst, i, tsr_get_f32_1d(a, i) + tsr_get_f32_1d(b, i));
}

void fma3(tsr_tensor * dst, const tsr_tensor * a, const tsr_tensor * b, const tsr_tensor * c, int ith, int nth, void *) {
    for (int64_t i = ith; i < tsr_nelements(dst); i += nth)
        tsr_set_f32_1d(dst, i, tsr_get_f32_1d(a, i) * tsr_get_f32_1d(b, i) + tsr_get_f32_1d(c, i));
}

// custom: dst = src0 + offset * src1 (offset from userdata), over dst's flat elements
void weighted_sum(tsr_tensor * dst, int ith, int nth, void * ud) {
    const float w = *(const float *)ud;
    for (int64_t i = ith; i < tsr_nelements(dst); i += nth)
        tsr_set_f32_1d(dst, i, tsr_get_f32_1d(dst->src[0], i) + w * tsr_get_f32_1d(dst->src[1], i));
}

} // namespace

TEST_CASE("map_custom1/2/3 and custom run the user's callback on the CPU's threads with (ith, nth)", "[cpu][ops][issue17]") {
    ctx_holder ctx(4);
    std::mt19937 rng(61);
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 19, 9);
    tsr_tensor * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 19, 9);
    tsr_tensor * c = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 19, 9);
    for (tsr_tensor * t : {a, b, c}) fill(t, rng);
    std::vector<double> r1, r2, r3, r4;
    for (int64_t i = 0; i < tsr_nelements(a); ++i) {
        const double x = tsr_get_f32_1d(a, i), y = tsr_get_f32_1d(b, i), z = tsr_get_f32_1d(c, i);
        r1.push_back(2 * x + 1);
        r2.push_back(x + y);
        r3.push_back((double)(float)(x * y) + z);
        r4.push_back(x + 0.5 * y);
    }
    for (int n_tasks : {TSR_N_TASKS_MAX, 2, 1}) {
        call_log log;
        tsr_tensor * out = tsr_map_custom1(ctx, a, scale_rows_by_ith_share, n_tasks, &log);
        REQUIRE(out != nullptr);
        backend_holder be(4);
        REQUIRE(run(be, ctx, out) == TSR_STATUS_SUCCESS);
        const int want = n_tasks == TSR_N_TASKS_MAX ? 4 : n_tasks;
        INFO("n_tasks " << n_tasks);
        CHECK(log.calls == want);
        CHECK(log.seen_nth == want);
        CHECK(log.ith_mask == (1u << want) - 1);
        CHECK(nmse(values(out), r1) < 1e-14);
    }
    check(ctx, tsr_map_custom2(ctx, a, b, add_two, TSR_N_TASKS_MAX, nullptr), r2, 1e-14, "map_custom2");
    check(ctx, tsr_map_custom3(ctx, a, b, c, fma3, 3, nullptr), r3, 1e-14, "map_custom3");
    float w = 0.5f;
    tsr_tensor * args[2] = {a, b};
    check(ctx, tsr_custom_4d(ctx, TSR_TYPE_F32, 19, 9, 1, 1, args, 2, weighted_sum, TSR_N_TASKS_MAX, &w), r4, 1e-14, "custom_4d");
    // in place: a view of the first operand, which the callback overwrites
    tsr_tensor * v = tsr_map_custom2_inplace(ctx, a, b, add_two, 2, nullptr);
    REQUIRE(v != nullptr);
    CHECK(v->view_src == a);
    CHECK_FALSE(tsr_op_can_inplace(tsr_map_custom1(ctx, a, scale_rows_by_ith_share, 1, nullptr), 0));
    check(ctx, v, r2, 1e-14, "map_custom2_inplace", a);
    tsr_tensor * one_arg[1] = {b};
    tsr_tensor * ci = tsr_custom_inplace(ctx, a, one_arg, 1, weighted_sum, TSR_N_TASKS_MAX, &w);
    REQUIRE(ci != nullptr);
    CHECK(ci->src[0] == a);
    CHECK(ci->src[1] == b);
    check(ctx, ci, r4, 1e-14, "custom_inplace", a);
}

TEST_CASE("issue 17 part A ops: bad input is NULL, a message naming the values, no arena used", "[cpu][ops][issue17][errors]") {
    ctx_holder ctx(1);
    tsr_tensor * f = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 7, 3);
    tsr_tensor * odd = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 7, 3);
    tsr_tensor * i32 = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 4);
    tsr_tensor * wide = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 8, 3);
    tsr_tensor * other = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 5, 3);
    tsr_tensor * perm = tsr_transpose(ctx, wide);
    struct bad { const char * what; std::function<tsr_tensor *()> make; const char * needle; };
    const std::vector<bad> cases = {
        {"unary of i32", [&] { return tsr_softplus(ctx, i32); }, "i32"},
        {"unknown unary", [&] { return tsr_unary_inplace(ctx, f, (tsr_unary_op)99); }, "99"},
        {"glu of odd rows", [&] { return tsr_geglu(ctx, odd); }, "[7, 3"},
        {"glu split shapes", [&] { return tsr_reglu_split(ctx, f, other); }, "[5, 3"},
        {"glu split NULL", [&] { return tsr_geglu_split(ctx, f, nullptr); }, "NULL second"},
        {"unknown glu", [&] { return tsr_glu(ctx, wide, (tsr_glu_op)42, false); }, "42"},
        {"swiglu_oai limit", [&] { return tsr_swiglu_oai(ctx, wide, nullptr, 1.0f, -1.0f); }, "-1"},
        {"arange empty", [&] { return tsr_arange(ctx, 3.0f, 3.0f, 1.0f); }, "[3, 3)"},
        {"arange step 0", [&] { return tsr_arange(ctx, 0.0f, 3.0f, 0.0f); }, "steps of 0"},
        {"tri type", [&] { return tsr_tri(ctx, f, (tsr_tri_type)7); }, "7"},
        {"acc outside a", [&] { return tsr_acc(ctx, f, other, f->nb[1], f->nb[2], f->nb[3], 12); }, "ends past"},
        {"set misaligned", [&] { return tsr_set_1d(ctx, f, other, 2); }, "offset 2"},
        {"acc of a view", [&] { return tsr_acc(ctx, perm, other, perm->nb[1], perm->nb[2], perm->nb[3], 0); }, "contiguous"},
        {"diag of a matrix", [&] { return tsr_diag(ctx, f); }, "[7, 3"},
        {"repeat_back shape", [&] { return tsr_repeat_back(ctx, f, other); }, "[5, 3"},
        {"l2_norm eps", [&] { return tsr_l2_norm(ctx, f, -1.0f); }, "eps -1"},
        {"top_k k", [&] { return tsr_top_k(ctx, f, 8); }, "k 8"},
        {"top_k i32", [&] { return tsr_top_k(ctx, i32, 1); }, "i32"},
        {"custom NULL fn", [&] { return tsr_map_custom1(ctx, f, nullptr, 1, nullptr); }, "NULL callback"},
        {"custom n_tasks", [&] { return tsr_map_custom2(ctx, f, f, add_two, 0, nullptr); }, "n_tasks 0"},
        {"custom n_args", [&] { return tsr_custom_4d(ctx, TSR_TYPE_F32, 1, 1, 1, 1, nullptr, 11, weighted_sum, 1, nullptr); }, "n_args 11"},
        {"custom NULL arg", [&] { tsr_tensor * args[2] = {f, nullptr}; return tsr_custom_inplace(ctx, f, args, 2, weighted_sum, 1, nullptr); }, "args[1]"},
    };
    for (const bad & c : cases) {
        INFO(c.what);
        const size_t used = tsr_used_mem(ctx);
        tsr_clear_error();
        CHECK(c.make() == nullptr);
        CHECK(std::string(tsr_last_error()).find(c.needle) != std::string::npos);
        INFO(tsr_last_error());
        CHECK(tsr_used_mem(ctx) == used);
    }
}

TEST_CASE("issue 17 part A ops declare their in-place rules to gallocr", "[cpu][ops][issue17][inplace]") {
    ctx_holder ctx(1);
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 8, 8);
    tsr_tensor * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 3, 2);
    tsr_tensor * row = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 8);
    // elementwise, or each row read whole before it is written, or a copy of a then b's view
    for (tsr_tensor * t : {tsr_sin(ctx, a), tsr_cos(ctx, a), tsr_leaky_relu(ctx, a, 0.1f, false), tsr_fill(ctx, a, 1.0f),
                           tsr_tri(ctx, a, TSR_TRI_TYPE_LOWER), tsr_cumsum(ctx, a), tsr_l2_norm(ctx, a, 1e-6f),
                           tsr_acc(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], 0), tsr_set(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], 0),
                           tsr_elu(ctx, a)}) {
        INFO(tsr_op_desc(t));
        CHECK(tsr_op_can_inplace(t, 0));
        CHECK_FALSE(tsr_op_can_inplace(t, 1));
    }
    // a new shape, indices, or a user's function that may read what it already wrote
    for (tsr_tensor * t : {tsr_diag(ctx, row), tsr_top_k(ctx, a, 8), tsr_repeat_back(ctx, a, a), tsr_geglu(ctx, a),
                           tsr_map_custom1(ctx, a, scale_rows_by_ith_share, 1, nullptr),
                           tsr_map_custom2(ctx, a, a, add_two, 1, nullptr)}) {
        INFO(tsr_op_desc(t));
        CHECK_FALSE(tsr_op_can_inplace(t, 0));
    }
    // the _inplace forms are views of a: gallocr places them with a, never in place again
    CHECK_FALSE(tsr_op_can_inplace(tsr_sin_inplace(ctx, a), 0));
}
