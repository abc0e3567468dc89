#include "op_cases.h"

#include <cmath>
#include <sstream>

namespace bops {

std::string tensor_spec::describe() const {
    std::ostringstream s;
    s << tsr_type_name(type) << "[" << ne[0];
    if (row_pad || row_offset) s << "+" << row_pad << "@" << row_offset;
    int n = 4;
    while (n > 1 && ne[n - 1] == 1) --n;
    for (int i = 1; i < n; ++i) s << "," << ne[i];
    s << "]";
    if (transpose) s << "^T";
    if (is_permuted()) s << "p(" << axes[0] << "," << axes[1] << "," << axes[2] << "," << axes[3] << ")";
    if (!specials.empty()) s << "+nan/inf";
    return s.str();
}

std::string op_case::describe() const {
    std::string s = name;
    for (const tensor_spec & t : inputs) s += " " + t.describe();
    return s;
}

tsrt::graph_builder op_case::builder() const {
    return [c = *this](tsr_context * ctx, tsrt::graph_inputs & in) -> tsr_tensor * {
        tensors xs;
        for (const tensor_spec & s : c.inputs) {
            tsr_tensor * t = tsr_new_tensor_4d(ctx, s.type, s.ne[0] + s.row_pad, s.ne[1], s.ne[2], s.ne[3]);
            REQUIRE(t);
            if (s.type == TSR_TYPE_I32) in.add_i32(t, s.ints);
            else if (!s.values.empty()) in.add_values(t, s.values);
            else if (!s.specials.empty()) in.add_with_specials(t, s.lo, s.hi, s.specials);
            else in.add(t, s.lo, s.hi);
            if (s.row_pad || s.row_offset)
                t = tsr_view_4d(ctx, t, s.ne[0], s.ne[1], s.ne[2], s.ne[3], t->nb[1], t->nb[2], t->nb[3], tsr_row_size(s.type, s.row_offset));
            if (t && s.transpose) t = tsr_transpose(ctx, t);
            if (t && s.is_permuted()) t = tsr_permute(ctx, t, s.axes[0], s.axes[1], s.axes[2], s.axes[3]);
            REQUIRE(t);
            xs.push_back(t);
        }
        return c.make(ctx, xs);
    };
}

namespace {

constexpr tsr_type F32 = TSR_TYPE_F32, F16 = TSR_TYPE_F16, BF16 = TSR_TYPE_BF16, Q8 = TSR_TYPE_Q8_0, Q4 = TSR_TYPE_Q4_0,
                   I32 = TSR_TYPE_I32;

// The weight types after Q8_0 / Q4_0 (the common GGUF ones; K-quants have rows of 256).
const tsr_type kRowQuants[] = {TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL, TSR_TYPE_Q2_K,
                               TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K};

// n, or the type's block size when n is not a whole number of blocks.
int64_t whole_blocks(tsr_type t, int64_t n) { return n % tsr_blck_size(t) == 0 ? n : tsr_blck_size(t); }

// NMSE tolerances
constexpr double EXACT = 0.0;      // data movement, exact arithmetic
constexpr double T_F32 = 1e-9;     // the same float math in another order or with other intrinsics
constexpr double T_FN = 1e-8;      // F32 through libm-like functions (exp, tanh, log, sin/cos)
constexpr double T_F16 = 1e-6;     // F16 storage on one side
constexpr double T_F16W = 1e-5;    // F16 storage through functions or GPU F16 math
constexpr double T_Q = 2e-4;       // quantized weights: activations quantized per backend
constexpr double T_QROUND = 1e-6;  // quantizing: a value on a rounding edge may go either way

std::string type_tag(const std::string & name, tsr_type t) { return name + " " + tsr_type_name(t); }

// ---- elementwise ----------------------------------------------------------------------------

using bin_fn = tsr_tensor * (*)(tsr_context *, tsr_tensor *, tsr_tensor *);

void binary_cases(case_table & T) {
    struct { const char * name; bin_fn f; } ops[] = {{"add", tsr_add}, {"sub", tsr_sub}, {"mul", tsr_mul}, {"div", tsr_div}};
    const int64_t bshapes[][4] = {{37, 5, 3, 2}, {37, 1, 3, 1}, {1, 5, 1, 1}, {1, 5, 1, 2}, {37, 1, 1, 1}, {1, 1, 1, 1}};
    for (const auto & o : ops) {
        const bin_fn f = o.f;
        const op_fn make = [f](tsr_context * c, const tensors & x) { return f(c, x[0], x[1]); };
        for (tsr_type ta : {F32, F16, BF16})
            for (const auto & bs : bshapes)
                T.add(o.name)
                    .input(tensor(ta, 37, 5, 3, 2))
                    .input(tensor(F32, bs[0], bs[1], bs[2], bs[3]).range(0.5f, 1.5f))
                    .op(make)
                    .nmse(ta == F32 ? T_F32 : ta == F16 ? T_F16W : 1e-4);
        // a permuted a (a logical [37, 5, 3, 2] stored as [5, 37, 3, 2]), b broadcast over rows
        T.add(o.name).input(tensor(F32, 5, 37, 3, 2).permuted(1, 0, 2, 3)).input(tensor(F32, 37, 1, 3, 1).range(0.5f, 1.5f)).op(make).nmse(T_F32);
        // b a window of wider rows
        T.add(o.name).input(tensor(F32, 37, 5, 3)).input(tensor(F32, 37, 5, 3).in_wider_rows(6, 3).range(0.5f, 1.5f)).op(make).nmse(T_F32);
    }
    T.add("add of a permuted view")
        .input(tensor(F32, 9, 13, 4).permuted(1, 0, 2, 3))
        .input(tensor(F32, 13, 9, 1))
        .op([](tsr_context * c, const tensors & x) { return tsr_add(c, x[0], x[1]); })
        .nmse(T_F32);
    // in place: the result aliases a
    T.add("add_inplace of scale")
        .input(tensor(F32, 300, 7))
        .input(tensor(F32, 300))
        .op([](tsr_context * c, const tensors & x) { return tsr_add_inplace(c, tsr_scale(c, x[0], 2.0f), x[1]); })
        .nmse(T_F32);
    T.add("add_inplace")
        .input(tensor(F32, 130, 7))
        .input(tensor(F32, 130, 1))
        .op([](tsr_context * c, const tensors & x) { return tsr_add_inplace(c, x[0], x[1]); })
        .nmse(T_F32);
    T.add("mul_inplace")
        .input(tensor(F32, 130, 7))
        .input(tensor(F32, 130, 7))
        .op([](tsr_context * c, const tensors & x) { return tsr_mul_inplace(c, x[0], x[1]); })
        .nmse(T_F32);
    // quantized a: dequantize, add, quantize again
    std::vector<tsr_type> quants = {Q8, Q4};
    quants.insert(quants.end(), std::begin(kRowQuants), std::end(kRowQuants));
    for (tsr_type t : quants)
        T.add(type_tag("add quantized", t))
            .input(tensor(t, whole_blocks(t, 64), 5))
            .input(tensor(F32, whole_blocks(t, 64), 1).range(-0.5f, 0.5f))
            .op([](tsr_context * c, const tensors & x) { return tsr_add(c, x[0], x[1]); })
            .nmse(T_QROUND);
}

using un_fn = tsr_tensor * (*)(tsr_context *, tsr_tensor *);

void unary_cases(case_table & T) {
    struct { const char * name; un_fn f; float lo, hi; } fns[] = {
        {"abs", tsr_abs, -2, 2}, {"neg", tsr_neg, -2, 2}, {"tanh", tsr_tanh, -3, 3}, {"relu", tsr_relu, -2, 2},
        {"sigmoid", tsr_sigmoid, -6, 6}, {"gelu", tsr_gelu, -4, 4}, {"gelu_quick", tsr_gelu_quick, -4, 4},
        {"silu", tsr_silu, -6, 6}, {"exp", tsr_exp, -3, 3}, {"sqr", tsr_sqr, -3, 3}, {"sqrt", tsr_sqrt, 0.01f, 9},
        {"log", tsr_log, 0.01f, 9},
    };
    for (const auto & u : fns) {
        const un_fn f = u.f;
        const op_fn make = [f](tsr_context * c, const tensors & x) { return f(c, x[0]); };
        // gelu: a backend may use a table (as ggml does); allow F16-level error
        const bool table = std::string(u.name) == "gelu";
        for (tsr_type t : {F32, F16}) T.add(u.name).input(tensor(t, 301, 3, 2).range(u.lo, u.hi)).op(make).nmse(t == F16 || table ? T_F16W : T_FN);
        T.add(u.name).input(tensor(F32, 17, 23).transposed().range(u.lo, u.hi)).op(make).nmse(table ? T_F16W : T_FN);
        T.add(u.name).input(tensor(F32, 33, 7, 2).in_wider_rows(5, 2).range(u.lo, u.hi)).op(make).nmse(table ? T_F16W : T_FN);
    }
    // every tsr_unary_op through tsr_unary, on [67, 13, 3] in [-4, 4)
    for (int u = 0; u < TSR_UNARY_OP_COUNT; ++u) {
        const tsr_unary_op op = (tsr_unary_op)u;
        T.add(tsr_unary_op_name(op))
            .input(tensor(F32, 67, 13, 3).range(-4, 4))
            .op([op](tsr_context * c, const tensors & x) { return tsr_unary(c, x[0], op); })
            .nmse(1e-7);
    }
    T.add("sqr").input(tensor(F32, 129, 9)).op([](tsr_context * c, const tensors & x) { return tsr_sqr(c, x[0]); }).nmse(T_F32);
    T.add("sqrt").input(tensor(F32, 129, 9).range(0, 9)).op([](tsr_context * c, const tensors & x) { return tsr_sqrt(c, x[0]); }).nmse(T_FN);
    T.add("log").input(tensor(F32, 129, 9).range(0.01f, 9)).op([](tsr_context * c, const tensors & x) { return tsr_log(c, x[0]); }).nmse(T_FN);
    T.add("gelu of a transposed view")
        .input(tensor(F32, 31, 17).transposed().range(-3, 3))
        .op([](tsr_context * c, const tensors & x) { return tsr_gelu(c, x[0]); })
        .nmse(1e-7);
    T.add("silu of an in-place scale")
        .input(tensor(F32, 33, 7, 2).range(-3, 3))
        .op([](tsr_context * c, const tensors & x) {
            return tsr_silu(c, tsr_scale_inplace(c, x[0], 1.5f));
        })
        .nmse(T_FN);
    for (tsr_type t : {F32, F16, BF16}) {
        T.add("scale").input(tensor(t, 129, 9)).op([](tsr_context * c, const tensors & x) { return tsr_scale(c, x[0], -0.37f); }).nmse(t == F32 ? T_F32 : 1e-4);
        T.add("clamp").input(tensor(t, 129, 9)).op([](tsr_context * c, const tensors & x) { return tsr_clamp(c, x[0], -0.25f, 0.5f); }).nmse(t == F32 ? T_F32 : 1e-4);
    }
    T.add("scale").input(tensor(F32, 1000, 3)).op([](tsr_context * c, const tensors & x) { return tsr_scale(c, x[0], -0.37f); }).nmse(T_F32);
    T.add("scale_inplace").input(tensor(F32, 1000, 3)).op([](tsr_context * c, const tensors & x) { return tsr_scale_inplace(c, x[0], 2.5f); }).nmse(T_F32);
    T.add("clamp").input(tensor(F32, 999, 2).range(-3, 3)).op([](tsr_context * c, const tensors & x) { return tsr_clamp(c, x[0], -0.5f, 1.25f); }).nmse(T_F32);
    T.add("clamp of a permuted view")
        .input(tensor(F32, 7, 33, 2).permuted(1, 0, 2, 3).range(-3, 3))
        .op([](tsr_context * c, const tensors & x) { return tsr_clamp(c, x[0], -0.3f, 0.6f); })
        .nmse(T_F32);
}

void glu_cases(case_table & T) {
    const op_fn fused = [](tsr_context * c, const tensors & x) { return tsr_swiglu(c, x[0]); };
    const op_fn split = [](tsr_context * c, const tensors & x) { return tsr_swiglu_split(c, x[0], x[1]); };
    T.add("swiglu").input(tensor(F32, 2 * 45, 7, 2).range(-3, 3)).op(fused).nmse(T_FN);
    T.add("swiglu_split").input(tensor(F32, 45, 7).range(-3, 3)).input(tensor(F32, 45, 7).range(-3, 3)).op(split).nmse(T_FN);
    T.add("swiglu swapped")
        .input(tensor(F32, 2 * 33, 5).range(-3, 3))
        .op([](tsr_context * c, const tensors & x) {
            tsr_tensor * r = tsr_swiglu(c, x[0]);
            if (r) tsr_set_op_params_i32(r, 1, 1);  // swapped: [g | x]
            return r;
        })
        .nmse(T_FN);
    for (tsr_type t : {F32, F16}) {
        const double tol = t == F32 ? T_FN : T_F16W;
        T.add("swiglu").input(tensor(t, 2 * 173, 5, 2).range(-4, 4)).op(fused).nmse(tol);
        T.add("swiglu_split").input(tensor(t, 173, 5, 2).range(-4, 4)).input(tensor(t, 173, 5, 2).range(-4, 4)).op(split).nmse(tol);
    }
    T.add("swiglu_split of views")
        .input(tensor(F32, 33, 5, 2).in_wider_rows(4, 4).range(-3, 3))
        .input(tensor(F32, 5, 33, 2).permuted(1, 0, 2, 3).range(-3, 3))
        .op(split)
        .nmse(T_FN);
}

// ---- reductions, layout --------------------------------------------------------------------

void reduce_cases(case_table & T) {
    const op_fn sum = [](tsr_context * c, const tensors & x) { return tsr_sum(c, x[0]); };
    const op_fn sum_rows = [](tsr_context * c, const tensors & x) { return tsr_sum_rows(c, x[0]); };
    const op_fn mean = [](tsr_context * c, const tensors & x) { return tsr_mean(c, x[0]); };
    const op_fn argmax = [](tsr_context * c, const tensors & x) { return tsr_argmax(c, x[0]); };
    T.add("sum").input(tensor(F32, 1000, 7, 3)).op(sum).nmse(T_F32);
    T.add("sum_rows").input(tensor(F32, 333, 7, 3)).op(sum_rows).nmse(1e-10);
    T.add("mean").input(tensor(F32, 333, 7, 3)).op(mean).nmse(1e-10);
    T.add("argmax").input(tensor(F32, 5003, 9)).op(argmax).nmse(EXACT);
    T.add("sum").input(tensor(F32, 4097, 3, 2)).op(sum).nmse(1e-10);
    T.add("sum_rows").input(tensor(F32, 4097, 3, 2)).op(sum_rows).nmse(1e-10);
    T.add("sum_rows of a transposed view").input(tensor(F32, 7, 33).transposed()).op(sum_rows).nmse(1e-10);
    T.add("mean").input(tensor(F16, 4097, 3, 2)).op(mean).nmse(1e-8);
    T.add("argmax").input(tensor(F32, 33, 7)).op(argmax).nmse(EXACT);
    for (tsr_sort_order order : {TSR_SORT_ORDER_ASC, TSR_SORT_ORDER_DESC})
        for (int64_t n : {33, 1000})
            T.add(order == TSR_SORT_ORDER_ASC ? "argsort asc" : "argsort desc")
                .input(tensor(F32, n, 4))
                .op([order](tsr_context * c, const tensors & x) { return tsr_argsort(c, x[0], order); })
                .nmse(EXACT);
}

void layout_cases(case_table & T) {
    const op_fn concat[4] = {
        [](tsr_context * c, const tensors & x) { return tsr_concat(c, x[0], x[1], 0); },
        [](tsr_context * c, const tensors & x) { return tsr_concat(c, x[0], x[1], 1); },
        [](tsr_context * c, const tensors & x) { return tsr_concat(c, x[0], x[1], 2); },
        [](tsr_context * c, const tensors & x) { return tsr_concat(c, x[0], x[1], 3); },
    };
    for (int dim = 0; dim < 4; ++dim)
        for (int64_t nb : {3, 7}) {
            int64_t ne[4] = {5, 4, 3, 2};
            ne[dim] = nb;
            T.add("concat").input(tensor(F32, 5, 4, 3, 2)).input(tensor(F32, ne[0], ne[1], ne[2], ne[3])).op(concat[dim]).nmse(EXACT);
        }
    T.add("concat of permuted views")
        .input(tensor(F32, 4, 5, 3, 2).permuted(1, 0, 2, 3))
        .input(tensor(F16, 5, 4, 3, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_concat(c, x[0], tsr_cast(c, x[1], TSR_TYPE_F32), 2); })
        .nmse(EXACT);
    const op_fn repeat = [](tsr_context * c, const tensors & x) { return tsr_repeat(c, x[0], x[1]); };
    T.add("repeat").input(tensor(F32, 3, 1, 2)).input(tensor(F32, 9, 4, 2, 3)).op(repeat).nmse(EXACT);
    T.add("repeat").input(tensor(F32, 3, 2, 1)).input(tensor(F32, 6, 4, 3, 2)).op(repeat).nmse(EXACT);
    T.add("repeat").input(tensor(F16, 5, 1, 3)).input(tensor(F16, 10, 3, 3)).op(repeat).nmse(EXACT);
    T.add("pad")
        .input(tensor(F32, 6, 4, 3, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_pad(c, x[0], 1, 2, 0, 1); })
        .nmse(EXACT);
    T.add("pad of a transposed view")
        .input(tensor(F32, 5, 9).transposed())
        .op([](tsr_context * c, const tensors & x) { return tsr_pad(c, x[0], 3, 1, 1, 0); })
        .nmse(EXACT);
}

// ---- copies and rows -------------------------------------------------------------------------

void copy_cases(case_table & T) {
    const op_fn cpy = [](tsr_context * c, const tensors & x) { return tsr_cpy(c, x[0], x[1]); };
    for (tsr_type st : {F32, F16, BF16})
        for (tsr_type dt : {F32, F16, BF16}) {
            const std::string name = std::string("cpy ") + tsr_type_name(st) + " -> " + tsr_type_name(dt);
            // every conversion rounds to nearest even: exact
            T.add(name).input(tensor(st, 45, 6, 2)).input(tensor(dt, 90, 6)).op(cpy).nmse(EXACT);
            T.add(name + " transposed").input(tensor(st, 31, 17).transposed()).input(tensor(dt, 17, 31)).op(cpy).nmse(EXACT);
            // the same, allowing F16-level error for F32 -> F16
            const double tol = st == F32 && dt == F16 ? T_F16 : EXACT;
            T.add(name).input(tensor(st, 33, 7, 3)).input(tensor(dt, 33, 7, 3)).op(cpy).nmse(tol);
            // permuted source, reshaped destination (flat logical order)
            T.add(name + " permuted").input(tensor(st, 33, 7, 3).permuted(1, 2, 0, 3)).input(tensor(dt, 21, 33)).op(cpy).nmse(tol);
        }
    // quantizing (a backend may round a block's scale differently) and dequantizing copies
    std::vector<tsr_type> quants = {Q8, Q4};
    quants.insert(quants.end(), std::begin(kRowQuants), std::end(kRowQuants));
    for (tsr_type q : quants) {
        const int64_t n64 = whole_blocks(q, 64), n96 = whole_blocks(q, 96);
        T.add(type_tag("cpy f32 ->", q)).input(tensor(F32, n64, 5, 2)).input(tensor(q, n64, 5, 2)).op(cpy).nmse(T_QROUND);
        T.add(type_tag("cpy to f32 from", q)).input(tensor(q, n96, 3)).input(tensor(F32, n96, 3)).op(cpy).nmse(EXACT);
        T.add(type_tag("cpy f16 ->", q) + " permuted rows")
            .input(tensor(F16, n64, 3, 4).permuted(0, 2, 1, 3))
            .input(tensor(q, n64, 4, 3))
            .op(cpy)
            .nmse(T_QROUND);
    }
    for (tsr_type t : {F32, F16, BF16}) {
        T.add("cont of a permuted view")
            .input(tensor(t, 8, 5, 3, 2).permuted(2, 0, 3, 1))
            .op([](tsr_context * c, const tensors & x) { return tsr_cont(c, x[0]); })
            .nmse(EXACT);
        T.add("dup").input(tensor(t, 1001)).op([](tsr_context * c, const tensors & x) { return tsr_dup(c, x[0]); }).nmse(EXACT);
    }
    T.add("cont of transpose")
        .input(tensor(F32, 45, 19).transposed())
        .op([](tsr_context * c, const tensors & x) { return tsr_cont(c, x[0]); })
        .nmse(EXACT);
    T.add("dup").input(tensor(F16, 45, 19)).op([](tsr_context * c, const tensors & x) { return tsr_dup(c, x[0]); }).nmse(EXACT);
    T.add("cont of a window of wider rows")
        .input(tensor(Q8, 64, 7).in_wider_rows(64, 32))
        .op([](tsr_context * c, const tensors & x) { return tsr_cont(c, x[0]); })
        .nmse(EXACT);
    // KV-cache style: write rows into a view of a larger F16 tensor, then read the whole cache
    T.add("cpy into a view")
        .input(tensor(F16, 64, 20))
        .input(tensor(F32, 64, 5))
        .op([](tsr_context * c, const tensors & x) {
            tsr_tensor * view = tsr_view_2d(c, x[0], 64, 5, x[0]->nb[1], 7 * x[0]->nb[1]);
            tsr_tensor * w = tsr_cpy(c, x[1], view);
            return tsr_scale(c, tsr_cast(c, w, TSR_TYPE_F32), 1.0f);
        })
        .nmse(T_F16);
}

void rows_cases(case_table & T) {
    const op_fn get_rows = [](tsr_context * c, const tensors & x) { return tsr_get_rows(c, x[0], x[1]); };
    std::vector<tsr_type> types = {F32, F16, BF16, Q8, Q4};
    types.insert(types.end(), std::begin(kRowQuants), std::end(kRowQuants));
    for (tsr_type t : types) {
        const std::string name = type_tag("get_rows", t);
        const int64_t n64 = whole_blocks(t, 64), n96 = whole_blocks(t, 96);
        T.add(name).input(tensor(t, n96, 50)).input(tensor(I32, 7).i32({0, 49, 3, 3, 17, 48, 1})).op(get_rows).nmse(EXACT);
        T.add(name).input(tensor(t, n96, 20)).input(tensor(I32, 6).i32({3, 0, 19, 3, 7, 11})).op(get_rows).nmse(EXACT);
        T.add(name + " 3-D")
            .input(tensor(t, n64, 10, 3))
            .input(tensor(I32, 5, 3).i32({0, 9, 2, 2, 5, 1, 1, 1, 8, 0, 9, 4, 3, 7, 6}))
            .op(get_rows)
            .nmse(EXACT);
        T.add(name + " batched")
            .input(tensor(t, n64, 10, 3))
            .input(tensor(I32, 4, 3).i32({9, 1, 2, 0, 5, 5, 8, 3, 4, 6, 7, 0}))
            .op(get_rows)
            .nmse(EXACT);
    }
    T.add("get_rows of a permuted view")
        .input(tensor(F32, 9, 33, 2).permuted(1, 0, 2, 3))
        .input(tensor(I32, 5, 2).i32({8, 0, 3, 3, 1, 2, 7, 6, 5, 4}))
        .op(get_rows)
        .nmse(EXACT);
    const op_fn set_rows = [](tsr_context * c, const tensors & x) { return tsr_set_rows(c, x[0], x[1], x[2]); };
    for (tsr_type t : types) {
        const bool quantized = tsr_is_quantized(t);
        for (int64_t row : {64, 48, 256}) {   // quantized rows: whole blocks only
            if (row % tsr_blck_size(t) != 0 || (row == 256 && !quantized)) continue;
            T.add(type_tag("set_rows", t))
                .input(tensor(t, row, 10, 2))
                .input(tensor(F32, row, 3, 2))
                .input(tensor(I32, 3, 2).i32({7, 0, 9, 1, 2, 3}))
                .op(set_rows)
                .nmse(quantized ? T_QROUND : EXACT);
        }
    }
    // indices outside [0, rows) skip their row (-1 and 10 of 10 rows); indices broadcast over
    // dims 2 and 3 (c [3, 2, 1] against 4 x 3 source planes: plane i2 takes c[:, i2 % 2])
    for (tsr_type t : {F32, F16}) {
        T.add(type_tag("set_rows index out of range", t))
            .input(tensor(t, 64, 10, 2))
            .input(tensor(F32, 64, 3, 2))
            .input(tensor(I32, 3, 2).i32({7, -1, 9, 10, 2, 3}))
            .op(set_rows)
            .nmse(EXACT);
        T.add(type_tag("set_rows broadcast indices", t))
            .input(tensor(t, 32, 10, 4, 3))
            .input(tensor(F32, 32, 3, 4, 3))
            .input(tensor(I32, 3, 2).i32({4, 0, 9, 1, 8, 5}))
            .op(set_rows)
            .nmse(EXACT);
    }
}

// ---- normalization, masks, softmax, rope, attention -----------------------------------------

void norm_cases(case_table & T) {
    const op_fn norm = [](tsr_context * c, const tensors & x) { return tsr_norm(c, x[0], 1e-5f); };
    const op_fn rms = [](tsr_context * c, const tensors & x) { return tsr_rms_norm(c, x[0], 1e-6f); };
    const int64_t shapes[][3] = {{1, 5, 3},  {7, 5, 3},    {768, 5, 3}, {4097, 5, 3}, {4096, 3, 1},
                                 {37, 5, 2}, {1, 3, 1},    {768, 7, 1}, {5000, 2, 1}};
    for (const auto & s : shapes) {
        T.add("norm").input(tensor(F32, s[0], s[1], s[2]).range(-2, 3)).op(norm).nmse(T_FN);
        T.add("rms_norm").input(tensor(F32, s[0], s[1], s[2]).range(-2, 3)).op(rms).nmse(T_FN);
    }
    T.add("norm of a window of wider rows").input(tensor(F32, 33, 7, 2).in_wider_rows(7, 5).range(-2, 3)).op(norm).nmse(T_FN);
    T.add("rms_norm of an in-place scale")
        .input(tensor(F32, 33, 7, 2).range(-2, 3))
        .op([](tsr_context * c, const tensors & x) { return tsr_rms_norm(c, tsr_scale_inplace(c, x[0], 1.5f), 1e-5f); })
        .nmse(T_FN);
    // 6 channels in 4 groups: groups of 2, 2, 2, 0
    T.add("group_norm")
        .input(tensor(F32, 5, 4, 6, 2).range(-1, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_group_norm(c, x[0], 4, 1e-5f); })
        .nmse(T_FN);
    T.add("group_norm")
        .input(tensor(F32, 16, 9, 32).range(-1, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_group_norm(c, x[0], 8, 1e-6f); })
        .nmse(T_FN);
}

void softmax_cases(case_table & T) {
    for (int n_past : {0, 3})
        T.add("diag_mask_inf")
            .input(tensor(F32, 13, 11, 4))
            .op([n_past](tsr_context * c, const tensors & x) { return tsr_diag_mask_inf(c, x[0], n_past); })
            .nmse(EXACT);
    for (int n_past : {0, 2})
        T.add("diag_mask_inf")
            .input(tensor(F32, 9, 7, 3))
            .op([n_past](tsr_context * c, const tensors & x) { return tsr_diag_mask_inf(c, x[0], n_past); })
            .nmse(EXACT);
    for (tsr_type mt : {F32, F16})
        for (float max_bias : {0.0f, 8.0f}) {
            const std::string name = max_bias > 0 ? "soft_max_ext mask + ALiBi" : "soft_max_ext mask";
            T.add(name)
                .input(tensor(F32, 45, 7, 6, 2).range(-3, 3))
                .input(tensor(mt, 45, 8).range(-1, 0))
                .op([max_bias](tsr_context * c, const tensors & x) { return tsr_soft_max_ext(c, x[0], x[1], 0.3f, max_bias); })
                .nmse(T_FN);
            T.add(name)
                .input(tensor(F32, 33, 7, 6).range(-3, 3))
                .input(tensor(mt, 33, 9).range(-2, 0))
                .op([max_bias](tsr_context * c, const tensors & x) { return tsr_soft_max_ext(c, x[0], x[1], 0.37f, max_bias); })
                .nmse(mt == F32 ? T_FN : T_F16);
        }
    // a mask with -inf entries (causal with 2 past tokens), in place
    {
        std::vector<float> mask(33 * 9);
        for (int64_t i = 0; i < 9; ++i)
            for (int64_t j = 0; j < 33; ++j) mask[(size_t)(i * 33 + j)] = j > 24 + i ? -INFINITY : -0.01f * (float)(j % 5);
        T.add("soft_max_ext -inf mask, of an in-place scale")
            .input(tensor(F32, 33, 7, 4).range(-3, 3))
            .input(tensor(F16, 33, 9).exact(mask))
            .op([](tsr_context * c, const tensors & x) {
                tsr_tensor * a = tsr_scale_inplace(c, x[0], 1.0f);
                return tsr_soft_max_ext(c, a, x[1], 0.3f, 0.0f);
            })
            .nmse(T_FN);
    }
    T.add("soft_max_ext without mask")
        .input(tensor(F32, 19, 3, 5).range(-3, 3))
        .op([](tsr_context * c, const tensors & x) { return tsr_soft_max_ext(c, x[0], nullptr, 0.7f, 0.0f); })
        .nmse(T_FN);
    const op_fn soft_max = [](tsr_context * c, const tensors & x) { return tsr_soft_max(c, x[0]); };
    T.add("soft_max").input(tensor(F32, 1000, 3).range(-5, 5)).op(soft_max).nmse(T_FN);
    T.add("soft_max").input(tensor(F32, 100, 7, 3).range(-5, 5)).op(soft_max).nmse(T_FN);
    T.add("soft_max large row").input(tensor(F32, 50257, 2).range(-10, 10)).op(soft_max).nmse(T_FN);
    // causal masking: diag_mask_inf then soft_max (the -inf entries become exact zeros)
    T.add("soft_max(diag_mask_inf)")
        .input(tensor(F32, 9, 9, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_soft_max(c, tsr_diag_mask_inf(c, x[0], 0)); })
        .nmse(T_FN);
}

void rope_cases(case_table & T) {
    std::vector<int32_t> pos9;
    for (int i = 0; i < 9; i++) pos9.push_back(3 + 17 * i);
    for (int mode : {TSR_ROPE_TYPE_NORMAL, TSR_ROPE_TYPE_NEOX}) {
        const std::string name = mode == TSR_ROPE_TYPE_NEOX ? "rope neox" : "rope normal";
        for (int n_dims : {64, 32}) {
            for (float ext : {0.0f, 1.0f})
                T.add(name)
                    .input(tensor(F32, 64, 4, 9))
                    .input(tensor(I32, 9).i32(pos9))
                    .op([=](tsr_context * c, const tensors & x) {
                        return tsr_rope_ext(c, x[0], x[1], nullptr, n_dims, mode, 4096, 10000.0f, ext != 0.0f ? 0.5f : 1.0f, ext, 1.0f,
                                            32.0f, 1.0f);
                    })
                    .nmse(T_FN);
            for (tsr_type t : {F32, F16})
                T.add(name)
                    .input(tensor(t, 64, 4, 7))
                    .input(tensor(I32, 7).i32({0, 3, 5, 17, 100, 1000, 4095}))
                    .op([=](tsr_context * c, const tensors & x) {
                        return tsr_rope_ext(c, x[0], x[1], nullptr, n_dims, mode, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
                    })
                    .nmse(t == F32 ? 1e-7 : T_F16W);
        }
        T.add(name + " yarn")
            .input(tensor(F32, 128, 3, 5))
            .input(tensor(I32, 5).i32({1, 2, 300, 7000, 9}))
            .op([=](tsr_context * c, const tensors & x) {
                return tsr_rope_ext(c, x[0], x[1], nullptr, 128, mode, 2048, 500000.0f, 0.25f, 1.0f, 1.0f, 32.0f, 1.0f);
            })
            .nmse(1e-6);
        T.add(name + " freq factors")
            .input(tensor(F32, 64, 3, 5))
            .input(tensor(I32, 5).i32({0, 1, 40, 900, 2}))
            .input(tensor(F32, 24).range(1, 4))
            .op([=](tsr_context * c, const tensors & x) {
                return tsr_rope_ext(c, x[0], x[1], x[2], 48, mode, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
            })
            .nmse(T_FN);
        T.add(name + " of a window of wider rows")
            .input(tensor(F32, 64, 3, 5).in_wider_rows(8, 4))
            .input(tensor(I32, 5).i32({4, 0, 2, 9, 33}))
            .op([=](tsr_context * c, const tensors & x) {
                return tsr_rope_ext(c, x[0], x[1], nullptr, 64, mode, 4096, 5000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
            })
            .nmse(T_FN);
    }
}

void attention_cases(case_table & T) {
    struct cfg { int64_t D, Dv, n_q, n_kv, n_head, n_head_kv, batch; tsr_type kv, mask; float max_bias, softcap; bool permuted; double tol; };
    const cfg cfgs[] = {
        {64, 64, 7, 45, 4, 4, 1, F32, F32, 0.0f, 0.0f, false, T_F32},
        {64, 64, 1, 300, 8, 2, 1, F16, F16, 0.0f, 0.0f, true, T_F16},    // GQA, decode, cache views
        {128, 128, 5, 33, 4, 4, 1, F16, F32, 8.0f, 0.0f, false, T_F16},  // ALiBi
        {32, 32, 6, 20, 2, 1, 1, F32, F16, 0.0f, 30.0f, true, T_F32},    // softcap
        {64, 32, 7, 33, 4, 2, 2, Q8, F16, 0.0f, 0.0f, false, T_Q},       // quantized K/V, Dv < D, batches
        {64, 32, 7, 33, 4, 2, 2, BF16, F16, 4.0f, 0.0f, false, T_F16},
        {64, 64, 6, 150, 2, 2, 1, F16, F16, 0.0f, 0.0f, false, T_F16},   // several key blocks
    };
    for (const cfg & c : cfgs) {
        // causal mask with -inf entries, one row more than queries
        std::vector<float> mv((size_t)(c.n_kv * (c.n_q + 1)));
        for (int64_t i = 0; i < c.n_q + 1; i++)
            for (int64_t j = 0; j < c.n_kv; j++)
                mv[(size_t)(i * c.n_kv + j)] = (j > c.n_kv - c.n_q + i) ? -INFINITY : -0.01f * (float)(j % 7);
        op_case & k = T.add(std::string("flash_attn_ext K/V ") + tsr_type_name(c.kv))
                          .input(tensor(F32, c.D, c.n_q, c.n_head, c.batch));
        if (c.permuted) {  // caches laid out [D, n_head_kv, n_kv] viewed as [D, n_kv, n_head_kv]
            k.input(tensor(c.kv, c.D, c.n_head_kv, c.n_kv).permuted(0, 2, 1, 3)).input(tensor(c.kv, c.Dv, c.n_head_kv, c.n_kv).permuted(0, 2, 1, 3));
        } else {
            k.input(tensor(c.kv, c.D, c.n_kv, c.n_head_kv, c.batch)).input(tensor(c.kv, c.Dv, c.n_kv, c.n_head_kv, c.batch));
        }
        const float scale = 1.0f / std::sqrt((float)c.D), max_bias = c.max_bias, softcap = c.softcap;
        k.input(tensor(c.mask, c.n_kv, c.n_q + 1).exact(mv))
            .op([=](tsr_context * ctx, const tensors & x) { return tsr_flash_attn_ext(ctx, x[0], x[1], x[2], x[3], scale, max_bias, softcap); })
            .nmse(c.tol);
    }
    T.add("flash_attn_ext without mask")
        .input(tensor(F32, 64, 7, 4, 2))
        .input(tensor(F32, 64, 33, 2, 2))
        .input(tensor(F32, 32, 33, 2, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_flash_attn_ext(c, x[0], x[1], x[2], nullptr, 0.125f, 0.0f, 0.0f); })
        .nmse(T_F32);
}

// ---- matrix products ----------------------------------------------------------------------

const op_fn mul_mat = [](tsr_context * c, const tensors & x) { return tsr_mul_mat(c, x[0], x[1]); };

double mm_tol(tsr_type a, tsr_type b = F32) {
    if (a == F32 && b == F32) return T_F32;
    if (a == BF16 || b == BF16) return 1e-4;   // src1 rounded to BF16
    if (tsr_is_quantized(a)) return T_Q;   // activations may be quantized to 8 bits (K-quants: Q8_K)
    return T_F16;
}

void mul_mat_cases(case_table & T) {
    struct kmn { int64_t K, M, N; };
    // vector and tiled paths; the last: 128x128 tiles
    const kmn shapes[] = {{256, 67, 1}, {256, 67, 3}, {256, 67, 70}, {512, 130, 129}, {64, 1, 5}, {96, 530, 260}};
    for (tsr_type t : {F32, F16, BF16, Q8, Q4}) {
        const std::string name = type_tag("mul_mat", t);
        for (const kmn & s : shapes) T.add(name).input(tensor(t, s.K, s.M)).input(tensor(F32, s.K, s.N)).op(mul_mat).nmse(mm_tol(t));
        // batched with broadcast of a over dims 2 and 3
        T.add(name + " batched broadcast").input(tensor(t, 64, 19, 2, 1)).input(tensor(F32, 64, 9, 6, 2)).op(mul_mat).nmse(mm_tol(t));
        // src0 rows in a window of wider rows, src1 transposed
        T.add(name + " src0 view").input(tensor(t, 64, 13).in_wider_rows(64, 32)).input(tensor(F32, 64, 9)).op(mul_mat).nmse(mm_tol(t));
        T.add(name + " src1 transposed").input(tensor(t, 64, 13)).input(tensor(F32, 9, 64, 2).transposed()).op(mul_mat).nmse(mm_tol(t));
    }
    // odd K (not a block multiple) for the float types
    for (tsr_type t : {F32, F16, BF16})
        for (int64_t N : {1, 37}) T.add(type_tag("mul_mat odd K", t)).input(tensor(t, 101, 23)).input(tensor(F32, 101, N)).op(mul_mat).nmse(mm_tol(t));
    // float weights with F32 activations or activations of the weights' type: plain, batched,
    // broadcast over dims 2-3 (tsr_mul_mat takes no other mix)
    const int64_t fshapes[][6] = {  // K, M, N, B2, B3, broadcast ratio in dim 2
        {67, 33, 9, 1, 1, 1}, {256, 128, 64, 3, 2, 1}, {64, 20, 7, 4, 2, 2}, {4096, 64, 1, 1, 1, 1}, {1, 5, 3, 1, 1, 1}};
    for (tsr_type ta : {F32, F16})
        for (tsr_type tb : {F32, ta})
            for (const auto & s : fshapes)
                T.add(std::string("mul_mat ") + tsr_type_name(ta) + " x " + tsr_type_name(tb))
                    .input(tensor(ta, s[0], s[1], s[3] / s[5], s[4]))
                    .input(tensor(tb, s[0], s[2], s[3], s[4]))
                    .op(mul_mat)
                    .nmse(ta == F32 && tb == F32 ? 1e-10 : T_F16W);
    for (tsr_type tb : {F32, BF16})   // BF16 weights: activations rounded to BF16
        T.add(std::string("mul_mat bf16 x ") + tsr_type_name(tb)).input(tensor(BF16, 200, 45, 2)).input(tensor(tb, 200, 9, 2)).op(mul_mat).nmse(1e-4);
    // quantized weights: K % 256 == 0 and other K, mat-vec (N <= 8) and GEMM, batched
    const int64_t qshapes[][4] = {  // K, M, N, B2
        {512, 200, 1, 1}, {512, 67, 2, 1}, {4096, 96, 5, 1}, {1024, 64, 8, 1}, {96, 33, 1, 1}, {160, 70, 7, 1},
        {256, 48, 17, 1}, {96, 30, 40, 1}, {512, 40, 3, 3}};
    for (tsr_type t : {Q8, Q4})
        for (const auto & s : qshapes)
            T.add(type_tag("mul_mat", t)).input(tensor(t, s[0], s[1], s[3])).input(tensor(F32, s[0], s[2], s[3])).op(mul_mat).nmse(2e-3);
    for (tsr_type t : kRowQuants)
        for (const auto & s : qshapes) {
            if (s[0] % tsr_blck_size(t) != 0) continue;
            T.add(type_tag("mul_mat", t)).input(tensor(t, s[0], s[1], s[3])).input(tensor(F32, s[0], s[2], s[3])).op(mul_mat).nmse(mm_tol(t));
        }
    // mat-vec (N 1..4) over many blocks / super-blocks (K 2304: 9 super-blocks, 72 blocks;
    // K 5120: 160 blocks, more than one per invocation of a 128-wide workgroup), odd M
    const int64_t mvshapes[][3] = {{2304, 77, 1}, {2304, 29, 3}, {5120, 13, 4}, {5120, 41, 2}};  // K, M, N
    for (tsr_type t : {Q8, Q4})
        for (const auto & s : mvshapes)
            T.add(type_tag("mul_mat vec", t)).input(tensor(t, s[0], s[1])).input(tensor(F32, s[0], s[2])).op(mul_mat).nmse(2e-3);
    for (tsr_type t : kRowQuants)
        for (const auto & s : mvshapes)
            T.add(type_tag("mul_mat vec", t)).input(tensor(t, s[0], s[1])).input(tensor(F32, s[0], s[2])).op(mul_mat).nmse(mm_tol(t));
    // src0 rows inside wider rows (a block further on), src1 columns at odd float offsets
    for (tsr_type t : {Q8, Q4})
        T.add(type_tag("mul_mat vec views", t))
            .input(tensor(t, 2304, 23).in_wider_rows(512, 256))
            .input(tensor(F32, 2304, 3).in_wider_rows(3, 1))
            .op(mul_mat)
            .nmse(2e-3);
    for (tsr_type t : kRowQuants)
        T.add(type_tag("mul_mat vec views", t))
            .input(tensor(t, 2304, 23).in_wider_rows(512, 256))
            .input(tensor(F32, 2304, 3).in_wider_rows(3, 1))
            .op(mul_mat)
            .nmse(mm_tol(t));
    // attention-shaped: permuted K and Q views (non-contiguous rows), kq = K^T Q per head
    T.add("mul_mat permuted K/Q")
        .input(tensor(F32, 32, 4, 11).permuted(0, 2, 1, 3))   // [D, H, T] seen as [D, T, H]
        .input(tensor(F32, 32, 4, 11).permuted(0, 2, 1, 3))
        .op(mul_mat)
        .nmse(T_F32);
    T.add("mul_mat permuted K/Q")
        .input(tensor(F32, 16, 4, 11).permuted(0, 2, 1, 3))
        .input(tensor(F32, 16, 4, 7).permuted(0, 2, 1, 3))
        .op(mul_mat)
        .nmse(1e-10);
    // tsr_mul_mat takes no transposed src0: the cont of one
    T.add("mul_mat of a transposed src0 made contiguous")
        .input(tensor(F32, 19, 40).transposed())
        .input(tensor(F32, 40, 6))
        .op([](tsr_context * c, const tensors & x) { return tsr_mul_mat(c, tsr_cont(c, x[0]), x[1]); })
        .nmse(1e-10);

    const op_fn out_prod = [](tsr_context * c, const tensors & x) { return tsr_out_prod(c, x[0], x[1]); };
    for (tsr_type t : {F32, F16, BF16, Q8, Q4, TSR_TYPE_Q4_K})
        T.add(type_tag("out_prod", t)).input(tensor(t, whole_blocks(t, 64), 9, 2)).input(tensor(F32, 5, 9, 2)).op(out_prod).nmse(t == F32 ? T_F32 : T_F16);
    T.add("out_prod of a transposed src1").input(tensor(F32, 33, 9)).input(tensor(F32, 9, 7).transposed()).op(out_prod).nmse(T_F32);
}

// ---- convolution, pooling, resampling -----------------------------------------------------

void conv_cases(case_table & T) {
    // kernel [KW, KH, IC, OC] over input [W, H, IC, N]: stride (2, 1), padding 1, dilation (1, 2)
    for (tsr_type kt : {F32, F16}) {
        T.add(type_tag("conv_2d", kt))
            .input(tensor(kt, 3, 2, 3, 8))
            .input(tensor(F32, 9, 7, 3, 2))
            .op([](tsr_context * c, const tensors & x) { return tsr_conv_2d(c, x[0], x[1], 2, 1, 1, 1, 1, 2); })
            .nmse(kt == F32 ? T_F32 : T_F16);
        for (tsr_type dt : {F32, F16})
            T.add(type_tag("im2col", kt) + " -> " + tsr_type_name(dt))
                .input(tensor(kt, 3, 2, 3, 8))
                .input(tensor(F32, 9, 7, 3, 2))
                .op([dt](tsr_context * c, const tensors & x) { return tsr_im2col(c, x[0], x[1], 2, 1, 1, 1, 1, 2, true, dt); })
                .nmse(dt == F32 ? EXACT : T_F16);
    }
    T.add("im2col 1-D")
        .input(tensor(F32, 5, 4, 6))
        .input(tensor(F32, 17, 4, 3))
        .op([](tsr_context * c, const tensors & x) { return tsr_im2col(c, x[0], x[1], 2, 0, 2, 0, 1, 0, false, TSR_TYPE_F32); })
        .nmse(EXACT);
    T.add("conv_2d 3x3 same")
        .input(tensor(F32, 3, 3, 4, 5))
        .input(tensor(F32, 12, 10, 4, 1))
        .op([](tsr_context * c, const tensors & x) { return tsr_conv_2d(c, x[0], x[1], 1, 1, 1, 1, 1, 1); })
        .nmse(T_F32);
    for (tsr_op_pool p : {TSR_OP_POOL_MAX, TSR_OP_POOL_AVG}) {
        const char * name = p == TSR_OP_POOL_MAX ? "pool_2d max" : "pool_2d avg";
        T.add(name)
            .input(tensor(F32, 9, 7, 3, 2))
            .op([p](tsr_context * c, const tensors & x) { return tsr_pool_2d(c, x[0], p, 3, 2, 2, 2, 1, 1); })
            .nmse(T_F32);
        T.add(name)
            .input(tensor(F16, 8, 8, 5))
            .op([p](tsr_context * c, const tensors & x) { return tsr_pool_2d(c, x[0], p, 2, 2, 2, 2, 0, 0); })
            .nmse(T_F32);
    }
    for (tsr_scale_mode m : {TSR_SCALE_MODE_NEAREST, TSR_SCALE_MODE_BILINEAR}) {
        const char * name = m == TSR_SCALE_MODE_NEAREST ? "upscale nearest" : "upscale bilinear";
        T.add(name)
            .input(tensor(F32, 5, 4, 2))
            .op([m](tsr_context * c, const tensors & x) { return tsr_upscale_ext(c, x[0], 11, 7, 2, 1, m); })
            .nmse(T_F32);
        T.add(name)
            .input(tensor(F32, 6, 5, 3, 2))
            .op([m](tsr_context * c, const tensors & x) { return tsr_upscale(c, x[0], 2, m); })
            .nmse(T_F32);
    }
}


// ---- NaN, +-inf and zero-size tensors ---------------------------------------------------------
// Every path must give the CPU scalar path's result with the same NaN positions and the same
// infinities (nmse: a mismatch of either is an infinite error); the semantics (PyTorch's)
// are checked by hand in tests/cpu/nan_inf_test.cpp.

using specials = std::vector<std::pair<size_t, float>>;

// NaN, +inf, -inf in turn at first, first + step, ... below n
specials sprinkled(size_t n, size_t first, size_t step) {
    const float cycle[3] = {NAN, INFINITY, -INFINITY};
    specials v;
    for (size_t i = first, k = 0; i < n; i += step, ++k) v.push_back({i, cycle[k % 3]});
    return v;
}

// value at every element of row r of rows of length n
specials whole_row(size_t n, size_t r, float value) {
    specials v;
    for (size_t i = 0; i < n; ++i) v.push_back({r * n + i, value});
    return v;
}

specials joined(specials a, const specials & b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

void nonfinite_elementwise_cases(case_table & T) {
    const size_t n = 67 * 13;
    for (int u = 0; u < TSR_UNARY_OP_COUNT; ++u) {
        const tsr_unary_op op = (tsr_unary_op)u;
        T.add(tsr_unary_op_name(op))
            .input(tensor(F32, 67, 13).range(-4, 4).with(sprinkled(n, 3, 7)))
            .op([op](tsr_context * c, const tensors & x) { return tsr_unary(c, x[0], op); })
            .nmse(1e-7);
    }
    T.add("silu").input(tensor(F16, 67, 13).range(-4, 4).with(sprinkled(n, 5, 11))).op([](tsr_context * c, const tensors & x) { return tsr_silu(c, x[0]); }).nmse(T_F16W);
    T.add("gelu").input(tensor(F16, 67, 13).range(-4, 4).with(sprinkled(n, 5, 11))).op([](tsr_context * c, const tensors & x) { return tsr_gelu(c, x[0]); }).nmse(T_F16W);
    T.add("sqr").input(tensor(F32, 67, 13).with(sprinkled(n, 1, 9))).op([](tsr_context * c, const tensors & x) { return tsr_sqr(c, x[0]); }).nmse(T_F32);
    T.add("sqrt").input(tensor(F32, 67, 13).range(-1, 9).with(sprinkled(n, 1, 9))).op([](tsr_context * c, const tensors & x) { return tsr_sqrt(c, x[0]); }).nmse(T_FN);
    T.add("log").input(tensor(F32, 67, 13).range(-1, 9).with(sprinkled(n, 1, 9))).op([](tsr_context * c, const tensors & x) { return tsr_log(c, x[0]); }).nmse(T_FN);
    T.add("scale").input(tensor(F32, 67, 13).with(sprinkled(n, 2, 5))).op([](tsr_context * c, const tensors & x) { return tsr_scale(c, x[0], -0.37f); }).nmse(T_F32);
    T.add("clamp").input(tensor(F32, 67, 13).range(-3, 3).with(sprinkled(n, 2, 5))).op([](tsr_context * c, const tensors & x) { return tsr_clamp(c, x[0], -0.5f, 1.25f); }).nmse(T_F32);
    struct { const char * name; bin_fn f; } ops[] = {{"add", tsr_add}, {"sub", tsr_sub}, {"mul", tsr_mul}, {"div", tsr_div}};
    for (const auto & o : ops) {
        const bin_fn f = o.f;
        T.add(o.name)
            .input(tensor(F32, 37, 5, 3).with(sprinkled(37 * 15, 0, 13)))
            .input(tensor(F32, 37, 5, 3).range(-1, 1).with(joined(sprinkled(37 * 15, 1, 6), {{4, 0.0f}, {41, 0.0f}})))
            .op([f](tsr_context * c, const tensors & x) { return f(c, x[0], x[1]); })
            .nmse(T_F32);
    }
    T.add("swiglu_split")
        .input(tensor(F32, 45, 7).range(-3, 3).with(sprinkled(45 * 7, 0, 8)))
        .input(tensor(F32, 45, 7).range(-3, 3).with(sprinkled(45 * 7, 3, 10)))
        .op([](tsr_context * c, const tensors & x) { return tsr_swiglu_split(c, x[0], x[1]); })
        .nmse(T_FN);
    T.add("swiglu").input(tensor(F32, 2 * 45, 7).range(-3, 3).with(sprinkled(90 * 7, 2, 9))).op([](tsr_context * c, const tensors & x) { return tsr_swiglu(c, x[0]); }).nmse(T_FN);
    for (tsr_type dt : {F16, BF16})
        T.add(std::string("cpy f32 -> ") + tsr_type_name(dt))
            .input(tensor(F32, 45, 6).with(sprinkled(45 * 6, 0, 4)))
            .input(tensor(dt, 45, 6))
            .op([](tsr_context * c, const tensors & x) { return tsr_cpy(c, x[0], x[1]); })
            .nmse(EXACT);
}

void nonfinite_row_cases(case_table & T) {
    const op_fn sum_rows = [](tsr_context * c, const tensors & x) { return tsr_sum_rows(c, x[0]); };
    // rows 0, 2, 4 with one special each (NaN, +inf, -inf); row 6 +inf and -inf; the rest finite
    const specials per_row = {{5, NAN}, {2 * 333 + 100, INFINITY}, {4 * 333 + 332, -INFINITY}, {6 * 333 + 1, INFINITY}, {6 * 333 + 2, -INFINITY}};
    T.add("sum_rows").input(tensor(F32, 333, 8).with(per_row)).op(sum_rows).nmse(1e-10);
    T.add("mean").input(tensor(F32, 333, 8).with(per_row)).op([](tsr_context * c, const tensors & x) { return tsr_mean(c, x[0]); }).nmse(1e-10);
    T.add("sum").input(tensor(F32, 333, 8).with({{17, INFINITY}})).op([](tsr_context * c, const tensors & x) { return tsr_sum(c, x[0]); }).nmse(1e-10);
    T.add("norm").input(tensor(F32, 333, 8).with(per_row)).op([](tsr_context * c, const tensors & x) { return tsr_norm(c, x[0], 1e-5f); }).nmse(T_FN);
    T.add("rms_norm").input(tensor(F32, 333, 8).with(per_row)).op([](tsr_context * c, const tensors & x) { return tsr_rms_norm(c, x[0], 1e-6f); }).nmse(T_FN);
    // argmax: the first NaN wins (rows 0, 3); +inf (row 1); a row of -inf (row 2) gives 0
    T.add("argmax")
        .input(tensor(F32, 1003, 5).with(joined(joined(whole_row(1003, 2, -INFINITY), {{7, NAN}, {9, INFINITY}, {900, NAN}}),
                                               {{1003 + 500, INFINITY}, {3 * 1003 + 1000, NAN}})))
        .op([](tsr_context * c, const tensors & x) { return tsr_argmax(c, x[0]); })
        .nmse(EXACT);
    for (tsr_sort_order order : {TSR_SORT_ORDER_ASC, TSR_SORT_ORDER_DESC})
        T.add(order == TSR_SORT_ORDER_ASC ? "argsort asc" : "argsort desc")
            .input(tensor(F32, 33, 4).with(joined(sprinkled(33 * 4, 1, 5), {{3, NAN}, {4, INFINITY}})))
            .op([order](tsr_context * c, const tensors & x) { return tsr_argsort(c, x[0], order); })
            .nmse(EXACT);
    T.add("pool_2d max")
        .input(tensor(F32, 9, 7, 3).with(sprinkled(9 * 7 * 3, 4, 17)))
        .op([](tsr_context * c, const tensors & x) { return tsr_pool_2d(c, x[0], TSR_OP_POOL_MAX, 3, 2, 2, 2, 1, 1); })
        .nmse(T_F32);
    T.add("mul_mat f32")
        .input(tensor(F32, 64, 19).with({{5, INFINITY}, {64 * 3 + 9, NAN}}))
        .input(tensor(F32, 64, 9).with({{64 * 4 + 2, -INFINITY}}))
        .op(mul_mat)
        .nmse(T_F32);
    T.add("mul_mat f16")
        .input(tensor(F16, 256, 67).with({{7, INFINITY}, {256 * 20, NAN}}))
        .input(tensor(F32, 256, 3).with({{256 + 11, NAN}}))
        .op(mul_mat)
        .nmse(T_F16);
    // the CPU quantizes the activations: a NaN still makes its column NaN (docs/ops.md)
    for (tsr_type q : {Q8, Q4, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL, TSR_TYPE_Q2_K, TSR_TYPE_Q3_K,
                       TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K})
        for (int64_t N : {1, 9})   // mat-vec and GEMM
            T.add(type_tag("mul_mat", q))
                .input(tensor(q, 256, 40))
                .input(tensor(F32, 256, N).with({{40, NAN}, {(size_t)(N * 256 - 1), NAN}}))
                .op(mul_mat)
                .nmse(2e-3);
}

// soft_max rows of 45 (rows 8..11 plain): 0 one NaN logit; 1 one +inf; 2 one -inf; 3 all NaN;
// 4 +inf and -inf; 5 all -inf; 6 a NaN in the mask; 7 all masked (-inf in the mask)
void nonfinite_softmax_cases(case_table & T) {
    const size_t n = 45;
    const specials logits = joined(joined({{3, NAN}, {n + 44, INFINITY}, {2 * n + 5, -INFINITY}, {4 * n, INFINITY}, {4 * n + 1, -INFINITY}},
                                          whole_row(n, 3, NAN)),
                                   whole_row(n, 5, -INFINITY));
    const specials mask = joined({{6 * n + 30, NAN}}, whole_row(n, 7, -INFINITY));
    T.add("soft_max").input(tensor(F32, 45, 12).range(-5, 5).with(logits)).op([](tsr_context * c, const tensors & x) { return tsr_soft_max(c, x[0]); }).nmse(T_FN);
    for (tsr_type mt : {F32, F16})
        for (float max_bias : {0.0f, 8.0f})
            T.add(max_bias > 0 ? "soft_max_ext mask + ALiBi" : "soft_max_ext mask")
                .input(tensor(F32, 45, 12, 2).range(-3, 3).with(logits))
                .input(tensor(mt, 45, 12).range(-1, 0).with(mask))
                .op([max_bias](tsr_context * c, const tensors & x) { return tsr_soft_max_ext(c, x[0], x[1], 0.3f, max_bias); })
                .nmse(mt == F32 ? T_FN : T_F16);
    T.add("soft_max large row").input(tensor(F32, 5003, 3).range(-10, 10).with({{4000, NAN}, {5003 + 17, INFINITY}})).op([](tsr_context * c, const tensors & x) { return tsr_soft_max(c, x[0]); }).nmse(T_FN);
}

// flash attention, per query row as soft_max: q row 1 has a NaN; the mask has a NaN (row 2),
// +inf (row 3), a whole row of -inf (row 4), a NaN among -inf (row 5); the other rows are causal
void nonfinite_attention_cases(case_table & T) {
    const int64_t D = 64, n_q = 7, n_kv = 80;
    std::vector<float> mv((size_t)(n_kv * (n_q + 1)));
    for (int64_t i = 0; i < n_q + 1; i++)
        for (int64_t j = 0; j < n_kv; j++) mv[(size_t)(i * n_kv + j)] = (j > n_kv - n_q + i) ? -INFINITY : -0.01f * (float)(j % 7);
    mv[(size_t)(2 * n_kv + 70)] = NAN;
    mv[(size_t)(3 * n_kv + 3)] = INFINITY;
    for (int64_t j = 0; j < n_kv; j++) mv[(size_t)(4 * n_kv + j)] = -INFINITY;
    for (int64_t j = 0; j < 64; j++) mv[(size_t)(5 * n_kv + j)] = j == 10 ? NAN : -INFINITY;   // a NaN in a block otherwise masked
    for (tsr_type kv : {F32, F16})
        for (tsr_type mt : {F32, F16})
            T.add(std::string("flash_attn_ext K/V ") + tsr_type_name(kv))
                .input(tensor(F32, D, n_q, 2).with({{(size_t)(D + 9), NAN}}))
                .input(tensor(kv, D, n_kv, 2))
                .input(tensor(kv, D, n_kv, 2))
                .input(tensor(mt, n_kv, n_q + 1).exact(mv))
                .op([](tsr_context * c, const tensors & x) { return tsr_flash_attn_ext(c, x[0], x[1], x[2], x[3], 0.125f, 0.0f, 0.0f); })
                .nmse(kv == F32 && mt == F32 ? T_F32 : T_F16);
}


// tensors of 0 elements: outputs of 0 elements, and a sum over 0 elements (zeros)
void zero_size_cases(case_table & T) {
    T.add("add").input(tensor(F32, 0, 3)).input(tensor(F32, 0, 3)).op([](tsr_context * c, const tensors & x) { return tsr_add(c, x[0], x[1]); }).nmse(EXACT);
    T.add("mul").input(tensor(F32, 7, 0, 2)).input(tensor(F32, 7, 1)).op([](tsr_context * c, const tensors & x) { return tsr_mul(c, x[0], x[1]); }).nmse(EXACT);
    for (const auto & u : {tsr_silu, tsr_gelu, tsr_exp, tsr_relu})
        T.add("unary").input(tensor(F32, 0, 5)).op([u](tsr_context * c, const tensors & x) { return u(c, x[0]); }).nmse(EXACT);
    T.add("soft_max").input(tensor(F32, 0, 3)).op([](tsr_context * c, const tensors & x) { return tsr_soft_max(c, x[0]); }).nmse(EXACT);
    T.add("soft_max").input(tensor(F32, 9, 0)).op([](tsr_context * c, const tensors & x) { return tsr_soft_max(c, x[0]); }).nmse(EXACT);
    T.add("soft_max_ext mask")
        .input(tensor(F32, 9, 0, 2))
        .input(tensor(F16, 9, 4))
        .op([](tsr_context * c, const tensors & x) { return tsr_soft_max_ext(c, x[0], x[1], 0.5f, 0.0f); })
        .nmse(EXACT);
    T.add("rms_norm").input(tensor(F32, 0, 4)).op([](tsr_context * c, const tensors & x) { return tsr_rms_norm(c, x[0], 1e-6f); }).nmse(EXACT);
    T.add("sum_rows").input(tensor(F32, 0, 4)).op([](tsr_context * c, const tensors & x) { return tsr_sum_rows(c, x[0]); }).nmse(EXACT);
    T.add("cpy f32 -> f16").input(tensor(F32, 0, 3)).input(tensor(F16, 0, 3)).op([](tsr_context * c, const tensors & x) { return tsr_cpy(c, x[0], x[1]); }).nmse(EXACT);
    T.add("mul_mat f32").input(tensor(F32, 16, 0)).input(tensor(F32, 16, 3)).op(mul_mat).nmse(EXACT);
}

/* issue 17 part B */
// mul_mat_id: 4 experts, 2 used per token; 1 token (mat-vec) and 9 tokens where expert 1 is
// chosen by every token (its GEMM path); b one row per token (broadcast) or one per slot
void mul_mat_id_cases(case_table & T) {
    const op_fn mmid = [](tsr_context * c, const tensors & x) { return tsr_mul_mat_id(c, x[0], x[1], x[2]); };
    std::vector<tsr_type> types = {F32, F16, BF16, Q8, Q4};
    types.insert(types.end(), std::begin(kRowQuants), std::end(kRowQuants));
    for (tsr_type t : types)
        for (int64_t n_tok : {1, 9})
            for (int64_t n_b : {1, 2})
                T.add(type_tag("mul_mat_id", t))
                    .input(tensor(t, 256, 19, 4))
                    .input(tensor(F32, 256, n_b, n_tok))
                    .input(tensor(I32, 2, n_tok).i32({1, 3, 1, 0, 1, 2}))
                    .op(mmid)
                    .nmse(mm_tol(t));
    // the mat-vec path over several super-blocks: 2 tokens of 3 slots, odd M
    for (tsr_type t : types)
        T.add(type_tag("mul_mat_id vec", t))
            .input(tensor(t, 1536, 21, 5))
            .input(tensor(F32, 1536, 3, 2))
            .input(tensor(I32, 3, 2).i32({4, 0, 2, 1, 4, 3}))
            .op(mmid)
            .nmse(mm_tol(t));
}

// convolutions, pooling, padding, roll (small odd shapes; GEMM and dot-product paths)
void conv_models_cases(case_table & T) {
    for (tsr_type kt : {F32, F16}) {
        T.add(type_tag("conv_1d", kt))
            .input(tensor(kt, 5, 3, 8))
            .input(tensor(F32, 29, 3, 2))
            .op([](tsr_context * c, const tensors & x) { return tsr_conv_1d(c, x[0], x[1], 2, 2, 1); })
            .nmse(kt == F32 ? T_F32 : T_F16);
        T.add(type_tag("conv_1d_dw", kt))
            .input(tensor(kt, 3, 1, 4))
            .input(tensor(F32, 29, 4, 2))
            .op([](tsr_context * c, const tensors & x) { return tsr_conv_1d_dw(c, x[0], x[1], 1, 1, 2); })
            .nmse(kt == F32 ? T_F32 : T_F16);
        T.add(type_tag("conv_2d_dw", kt))
            .input(tensor(kt, 3, 3, 1, 5))
            .input(tensor(F32, 17, 11, 5, 2))
            .op([](tsr_context * c, const tensors & x) { return tsr_conv_2d_dw_direct(c, x[0], x[1], 2, 1, 1, 1, 1, 2); })
            .nmse(kt == F32 ? T_F32 : T_F16);
        for (int64_t L : {3, 19})
            T.add(type_tag("conv_transpose_1d", kt))
                .input(tensor(kt, 4, 5, 6))
                .input(tensor(F32, L, 6, 2))
                .op([](tsr_context * c, const tensors & x) { return tsr_conv_transpose_1d(c, x[0], x[1], 2, 1, 1); })
                .nmse(kt == F32 ? T_F32 : T_F16);
        T.add(type_tag("conv_transpose_2d_p0", kt))
            .input(tensor(kt, 3, 2, 4, 6))
            .input(tensor(F32, 7, 5, 6, 2))
            .op([](tsr_context * c, const tensors & x) { return tsr_conv_transpose_2d_p0(c, x[0], x[1], 2); })
            .nmse(kt == F32 ? T_F32 : T_F16);
    }
    T.add("pool_1d avg")
        .input(tensor(F32, 23, 3, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_pool_1d(c, x[0], TSR_OP_POOL_AVG, 3, 2, 1); })
        .nmse(T_F32);
    T.add("pad_reflect_1d")
        .input(tensor(F32, 13, 3, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_pad_reflect_1d(c, x[0], 5, 12); })
        .nmse(EXACT);
    T.add("pad_ext")
        .input(tensor(F32, 13, 3, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_pad_ext(c, x[0], 2, 1, 0, 3, 1, 1, 0, 1); })
        .nmse(EXACT);
    for (tsr_type t : {F32, F16, I32})
        T.add(type_tag("roll", t))
            .input(tensor(t, 13, 3, 4))
            .op([](tsr_context * c, const tensors & x) { return tsr_roll(c, x[0], 5, -1, 4, 0); })
            .nmse(EXACT);
}

// timestep embeddings and Mamba's ssm_conv / ssm_scan (Mamba-1 and Mamba-2 shapes)
void sequence_model_cases(case_table & T) {
    for (int dim : {32, 15})
        T.add("timestep_embedding")
            .input(tensor(F32, 5).range(0, 1000))
            .op([dim](tsr_context * c, const tensors & x) { return tsr_timestep_embedding(c, x[0], dim, 10000); })
            .nmse(T_FN);
    T.add("ssm_conv")
        .input(tensor(F32, 3 + 6, 37, 2))
        .input(tensor(F32, 4, 37))
        .op([](tsr_context * c, const tensors & x) { return tsr_ssm_conv(c, x[0], x[1]); })
        .nmse(T_F32);
    for (bool mamba1 : {true, false}) {
        const int64_t d_state = 16, head_dim = mamba1 ? 1 : 8, n_head = mamba1 ? 24 : 4, n_group = mamba1 ? 1 : 2;
        T.add(mamba1 ? "ssm_scan mamba-1" : "ssm_scan mamba-2")
            .input(tensor(F32, d_state, head_dim, n_head, 3))
            .input(tensor(F32, head_dim, n_head, 5, 2))
            .input(tensor(F32, n_head, 5, 2).range(-3, 3))
            .input(tensor(F32, mamba1 ? d_state : 1, n_head).range(-2, 0))
            .input(tensor(F32, d_state, n_group, 5, 2))
            .input(tensor(F32, d_state, n_group, 5, 2))
            .input(tensor(I32, 2).i32({2, 0}))
            .op([](tsr_context * c, const tensors & x) { return tsr_ssm_scan(c, x[0], x[1], x[2], x[3], x[4], x[5], x[6]); })
            .nmse(T_FN);
    }
}

// linear-attention recurrences: 2 sequences of 3 tokens, head size 16
void linear_attention_cases(case_table & T) {
    const int64_t S = 16, H = 2, n_t = 6;
    T.add("rwkv_wkv6")
        .input(tensor(F32, S, H, n_t)).input(tensor(F32, S, H, n_t)).input(tensor(F32, S, H, n_t))
        .input(tensor(F32, S, H)).input(tensor(F32, S, H, n_t).range(0.5f, 1)).input(tensor(F32, S * S * H, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_rwkv_wkv6(c, x[0], x[1], x[2], x[3], x[4], x[5]); })
        .nmse(T_F32);
    T.add("gated_linear_attn")
        .input(tensor(F32, S, H, n_t)).input(tensor(F32, S, H, n_t)).input(tensor(F32, S, H, n_t))
        .input(tensor(F32, S, H, n_t).range(0.5f, 1)).input(tensor(F32, S * S * H, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_gated_linear_attn(c, x[0], x[1], x[2], x[3], x[4], 0.25f); })
        .nmse(T_F32);
    T.add("rwkv_wkv7")
        .input(tensor(F32, S, H, n_t)).input(tensor(F32, S, H, n_t).range(0.5f, 1)).input(tensor(F32, S, H, n_t))
        .input(tensor(F32, S, H, n_t)).input(tensor(F32, S, H, n_t).range(-0.5f, 0.5f)).input(tensor(F32, S, H, n_t).range(-0.5f, 0.5f))
        .input(tensor(F32, S * S * H, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_rwkv_wkv7(c, x[0], x[1], x[2], x[3], x[4], x[5], x[6]); })
        .nmse(T_F32);
}

// multi-section RoPE: each mode, and M-RoPE with frequency factors and YaRN
void rope_multi_cases(case_table & T) {
    for (int mode : {TSR_ROPE_TYPE_MROPE, TSR_ROPE_TYPE_VISION, TSR_ROPE_TYPE_IMROPE})
        T.add(mode == TSR_ROPE_TYPE_MROPE ? "rope_multi mrope" : mode == TSR_ROPE_TYPE_VISION ? "rope_multi vision" : "rope_multi imrope")
            .input(tensor(F32, 64, 3, 5))
            .input(tensor(I32, 20).i32({3, 9, 1, 14, 2, 7, 5}))
            .op([mode](tsr_context * c, const tensors & x) {
                int sections[4] = {6, 5, 5, 0};
                return tsr_rope_multi(c, x[0], x[1], nullptr, mode == TSR_ROPE_TYPE_VISION ? 32 : 48, sections, mode, 4096, 1e4f,
                                      1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
            })
            .nmse(T_FN);
    T.add("rope_multi mrope freq factors + YaRN")
        .input(tensor(F32, 40, 2, 3))
        .input(tensor(I32, 12).i32({4, 0, 11, 6, 2}))
        .input(tensor(F32, 20).range(1, 2))
        .op([](tsr_context * c, const tensors & x) {
            int sections[4] = {3, 5, 4, 2};
            return tsr_rope_multi(c, x[0], x[1], x[2], 32, sections, TSR_ROPE_TYPE_MROPE, 2048, 1e4f, 0.5f, 1.0f, 0.8f, 32.0f, 1.0f);
        })
        .nmse(T_FN);
}

// windows and relative positions
void window_cases(case_table & T) {
    T.add("win_part")
        .input(tensor(F32, 6, 11, 9))
        .op([](tsr_context * c, const tensors & x) { return tsr_win_part(c, x[0], 4); })
        .nmse(EXACT);
    T.add("win_unpart")
        .input(tensor(F32, 6, 4, 4, 9))
        .op([](tsr_context * c, const tensors & x) { return tsr_win_unpart(c, x[0], 11, 9, 4); })
        .nmse(EXACT);
    for (tsr_type t : {F32, F16})
        T.add(type_tag("get_rel_pos", t))
            .input(tensor(t, 8, 9))
            .op([](tsr_context * c, const tensors & x) { return tsr_get_rel_pos(c, x[0], 5, 5); })
            .nmse(EXACT);
    T.add("add_rel_pos")
        .input(tensor(F32, 16, 6, 2))
        .input(tensor(F32, 4, 2, 3, 2))
        .input(tensor(F32, 4, 2, 3, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_add_rel_pos(c, x[0], x[1], x[2]); })
        .nmse(T_F32);
}

void issue17b_cases(case_table & T) {
    mul_mat_id_cases(T);
    conv_models_cases(T);
    sequence_model_cases(T);
    linear_attention_cases(T);
    rope_multi_cases(T);
    window_cases(T);
}

/* issue 17 part A */
// ggml's other unary/GLU functions, the fill and shape ops; user-defined ops run on the CPU only
void issue17a_cases(case_table & T) {
    for (int u = TSR_UNARY_OP_SGN; u < TSR_UNARY_OP_COUNT; ++u) {
        const tsr_unary_op op = (tsr_unary_op)u;
        T.add(tsr_unary_op_name(op))
            .input(tensor(F32, 67, 13, 3).range(-4, 4).with({{0, NAN}, {1, INFINITY}, {2, -INFINITY}, {3, 2.5f}, {4, -0.5f}}))
            .op([op](tsr_context * c, const tensors & x) { return tsr_unary(c, x[0], op); })
            .nmse(1e-7);
        T.add(tsr_unary_op_name(op)).input(tensor(F16, 33, 5).range(-4, 4)).op([op](tsr_context * c, const tensors & x) { return tsr_unary(c, x[0], op); }).nmse(T_F16W);
        T.add(std::string(tsr_unary_op_name(op)) + " of a transposed view")
            .input(tensor(F32, 17, 23).transposed().range(-4, 4))
            .op([op](tsr_context * c, const tensors & x) { return tsr_unary(c, x[0], op); })
            .nmse(1e-7);
    }
    T.add("sin").input(tensor(F32, 301, 3).range(-10, 10)).op([](tsr_context * c, const tensors & x) { return tsr_sin(c, x[0]); }).nmse(T_FN);
    T.add("cos").input(tensor(F32, 301, 3).range(-10, 10)).op([](tsr_context * c, const tensors & x) { return tsr_cos(c, x[0]); }).nmse(T_FN);
    T.add("leaky_relu").input(tensor(F32, 301, 3).range(-3, 3)).op([](tsr_context * c, const tensors & x) { return tsr_leaky_relu(c, x[0], 0.01f, false); }).nmse(T_F32);
    T.add("leaky_relu in place").input(tensor(F32, 99, 4).range(-3, 3)).op([](tsr_context * c, const tensors & x) { return tsr_leaky_relu(c, x[0], 0.2f, true); }).nmse(T_F32);
    for (int g = TSR_GLU_OP_SWIGLU; g < TSR_GLU_OP_COUNT; ++g) {
        const tsr_glu_op op = (tsr_glu_op)g;
        const std::string name = tsr_glu_op_name(op);
        for (bool swapped : {false, true})
            T.add(name + (swapped ? " swapped" : ""))
                .input(tensor(F32, 2 * 45, 7, 2).range(-4, 4))
                .op([op, swapped](tsr_context * c, const tensors & x) {
                    tsr_tensor * r = tsr_glu(c, x[0], op, swapped);
                    if (r && op == TSR_GLU_OP_SWIGLU_OAI) { tsr_set_op_params_f32(r, 2, 1.702f); tsr_set_op_params_f32(r, 3, 3.0f); }
                    return r;
                })
                .nmse(T_FN);
        T.add(name + " split")
            .input(tensor(F32, 173, 5).range(-4, 4))
            .input(tensor(F32, 5, 173).permuted(1, 0, 2, 3).range(-4, 4))
            .op([op](tsr_context * c, const tensors & x) {
                return op == TSR_GLU_OP_SWIGLU_OAI ? tsr_swiglu_oai(c, x[0], x[1], 1.702f, 3.0f) : tsr_glu_split(c, x[0], x[1], op);
            })
            .nmse(T_FN);
        T.add(name + " split").input(tensor(F16, 64, 3).range(-4, 4)).input(tensor(F16, 64, 3).range(-4, 4))
            .op([op](tsr_context * c, const tensors & x) { return tsr_glu_split(c, x[0], x[1], op); })
            .nmse(T_F16W);
    }
    T.add("arange").op([](tsr_context * c, const tensors &) { return tsr_arange(c, -3.0f, 40.0f, 0.25f); }).nmse(T_F32);
    T.add("fill").input(tensor(F32, 45, 7, 2)).op([](tsr_context * c, const tensors & x) { return tsr_fill(c, x[0], 1.25f); }).nmse(EXACT);
    T.add("fill_inplace").input(tensor(F32, 45, 7)).op([](tsr_context * c, const tensors & x) { return tsr_fill_inplace(c, x[0], -2.0f); }).nmse(EXACT);
    for (int t = TSR_TRI_TYPE_UPPER_DIAG; t <= TSR_TRI_TYPE_LOWER; ++t)
        T.add("tri " + std::to_string(t)).input(tensor(F32, 19, 19, 3)).op([t](tsr_context * c, const tensors & x) { return tsr_tri(c, x[0], (tsr_tri_type)t); }).nmse(EXACT);
    T.add("cumsum").input(tensor(F32, 301, 5, 2)).op([](tsr_context * c, const tensors & x) { return tsr_cumsum(c, x[0]); }).nmse(T_F32);
    T.add("cumsum of a transposed view").input(tensor(F32, 9, 33).transposed()).op([](tsr_context * c, const tensors & x) { return tsr_cumsum(c, x[0]); }).nmse(T_F32);
    T.add("acc").input(tensor(F32, 20, 9, 3)).input(tensor(F32, 7, 4, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_acc(c, x[0], x[1], x[0]->nb[1], x[0]->nb[2], x[0]->nb[3], 4 * 23); })
        .nmse(T_F32);
    T.add("set_2d").input(tensor(F32, 20, 9)).input(tensor(F32, 5, 3))
        .op([](tsr_context * c, const tensors & x) { return tsr_set_2d(c, x[0], x[1], 2 * x[0]->nb[1], 4 * 3); })
        .nmse(EXACT);
    T.add("set_1d_inplace").input(tensor(F32, 20, 9)).input(tensor(F32, 30))
        .op([](tsr_context * c, const tensors & x) { return tsr_set_1d_inplace(c, x[0], x[1], 4 * 17); })
        .nmse(EXACT);
    T.add("diag").input(tensor(F32, 17, 1, 3)).op([](tsr_context * c, const tensors & x) { return tsr_diag(c, x[0]); }).nmse(EXACT);
    T.add("repeat_back").input(tensor(F32, 30, 8, 4)).input(tensor(F32, 10, 4, 1))
        .op([](tsr_context * c, const tensors & x) { return tsr_repeat_back(c, x[0], x[1]); })
        .nmse(T_F32);
    T.add("l2_norm").input(tensor(F32, 333, 7, 2)).op([](tsr_context * c, const tensors & x) { return tsr_l2_norm(c, x[0], 1e-6f); }).nmse(T_F32);
    T.add("l2_norm with NaN/inf rows")
        .input(tensor(F32, 64, 4).with({{3, NAN}, {64 + 9, INFINITY}}))
        .op([](tsr_context * c, const tensors & x) { return tsr_l2_norm(c, x[0], 1e-6f); })
        .nmse(T_F32);
    for (int k : {1, 4, 40})
        T.add("top_k " + std::to_string(k)).input(tensor(F32, 1000, 6)).op([k](tsr_context * c, const tensors & x) { return tsr_top_k(c, x[0], k); }).nmse(EXACT);
    T.add("top_k with NaN").input(tensor(F32, 40, 3).with({{7, NAN}, {45, INFINITY}}))
        .op([](tsr_context * c, const tensors & x) { return tsr_top_k(c, x[0], 5); })
        .nmse(EXACT);
    T.add("map_custom1")
        .input(tensor(F32, 33, 9))
        .op([](tsr_context * c, const tensors & x) {
            return tsr_map_custom1(c, x[0], [](tsr_tensor * dst, const tsr_tensor * a, int ith, int nth, void *) {
                for (int64_t i = ith; i < tsr_nelements(dst); i += nth) tsr_set_f32_1d(dst, i, 3.0f * tsr_get_f32_1d(a, i));
            }, TSR_N_TASKS_MAX, nullptr);
        })
        .nmse(EXACT);
    T.add("map_custom2").input(tensor(F32, 33, 9)).input(tensor(F32, 33, 9))
        .op([](tsr_context * c, const tensors & x) {
            return tsr_map_custom2(c, x[0], x[1], [](tsr_tensor * dst, const tsr_tensor * a, const tsr_tensor * b, int ith, int nth, void *) {
                for (int64_t i = ith; i < tsr_nelements(dst); i += nth) tsr_set_f32_1d(dst, i, tsr_get_f32_1d(a, i) - tsr_get_f32_1d(b, i));
            }, 2, nullptr);
        })
        .nmse(EXACT);
    T.add("map_custom3").input(tensor(F32, 33, 9)).input(tensor(F32, 33, 9)).input(tensor(F32, 33, 9))
        .op([](tsr_context * c, const tensors & x) {
            return tsr_map_custom3(c, x[0], x[1], x[2], [](tsr_tensor * dst, const tsr_tensor * a, const tsr_tensor * b, const tsr_tensor * d, int ith, int nth, void *) {
                for (int64_t i = ith; i < tsr_nelements(dst); i += nth)
                    tsr_set_f32_1d(dst, i, tsr_get_f32_1d(a, i) > 0.0f ? tsr_get_f32_1d(b, i) : tsr_get_f32_1d(d, i));
            }, 1, nullptr);
        })
        .nmse(EXACT);
    // tensors of 0 elements: nothing to write, nothing read out of range
    T.add("cumsum").input(tensor(F32, 0, 3)).op([](tsr_context * c, const tensors & x) { return tsr_cumsum(c, x[0]); }).nmse(EXACT);
    T.add("l2_norm").input(tensor(F32, 7, 0)).op([](tsr_context * c, const tensors & x) { return tsr_l2_norm(c, x[0], 1e-6f); }).nmse(EXACT);
    T.add("top_k").input(tensor(F32, 5, 0, 2)).op([](tsr_context * c, const tensors & x) { return tsr_top_k(c, x[0], 2); }).nmse(EXACT);
    T.add("geglu").input(tensor(F32, 0, 3)).op([](tsr_context * c, const tensors & x) { return tsr_geglu(c, x[0]); }).nmse(EXACT);
    T.add("acc of an empty b").input(tensor(F32, 6, 4)).input(tensor(F32, 0, 2))
        .op([](tsr_context * c, const tensors & x) { return tsr_acc(c, x[0], x[1], x[0]->nb[1], x[0]->nb[2], x[0]->nb[3], 0); })
        .nmse(EXACT);
    T.add("custom_4d").input(tensor(F32, 33, 9))
        .op([](tsr_context * c, const tensors & x) {
            tsr_tensor * args[1] = {x[0]};
            return tsr_custom_4d(c, TSR_TYPE_F32, 9, 33, 1, 1, args, 1, [](tsr_tensor * dst, int ith, int nth, void *) {
                for (int64_t i = ith; i < tsr_nelements(dst); i += nth)   // a transpose
                    tsr_set_f32_nd(dst, i % 9, i / 9, 0, 0, tsr_get_f32_nd(dst->src[0], i / 9, i % 9, 0, 0));
            }, TSR_N_TASKS_MAX, nullptr);
        })
        .nmse(EXACT);
}

std::vector<op_case> build_table() {
    case_table T;
    binary_cases(T);
    unary_cases(T);
    glu_cases(T);
    reduce_cases(T);
    layout_cases(T);
    copy_cases(T);
    rows_cases(T);
    norm_cases(T);
    softmax_cases(T);
    rope_cases(T);
    attention_cases(T);
    mul_mat_cases(T);
    conv_cases(T);
    nonfinite_elementwise_cases(T);
    nonfinite_row_cases(T);
    nonfinite_softmax_cases(T);
    nonfinite_attention_cases(T);
    zero_size_cases(T);
    /* issue 17 part B */
    issue17b_cases(T);
    /* issue 17 part A */
    issue17a_cases(T);
    return std::move(T.cases);
}

} // namespace

const std::vector<op_case> & op_cases() {
    static const std::vector<op_case> cases = build_table();
    return cases;
}

} // namespace bops
