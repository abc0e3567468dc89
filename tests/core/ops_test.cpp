// Ops: result shapes and types, sources, op_params, and the errors for invalid input.
#include "test_util.h"

#include <cmath>
#include <functional>
#include <vector>

namespace {
// Inputs live in their own context `in`, so that the arena accounting of `ctx` (where the
// ops build their results) sees only what the ops themselves consume.
struct fixture {
    tsr::context in{4 << 20};
    tsr::context ctx{4 << 20};
    tsr_tensor * f32(int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1) {
        return tsr_new_tensor_4d(in, TSR_TYPE_F32, ne0, ne1, ne2, ne3);
    }
    tsr_tensor * typed(tsr_type t, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1) {
        return tsr_new_tensor_4d(in, t, ne0, ne1, ne2, ne3);
    }
};
} // namespace

TEST_CASE("copies: dup, cpy, cast, cont", "[ops]") {
    fixture f;
    tsr_tensor * a = tsr_set_name(f.f32(4, 3), "a");
    tsr_tensor * b = tsr_set_name(f.typed(TSR_TYPE_F16, 12), "b");

    tsr_tensor * d = tsr_dup(f.ctx, a);
    CHECK(same_shape(d, 4, 3));
    CHECK(d->op == TSR_OP_DUP);
    CHECK(d->src[0] == a);

    tsr_tensor * c = tsr_cpy(f.ctx, a, b);
    REQUIRE(c);
    CHECK(c->op == TSR_OP_CPY);
    CHECK(c->src[0] == a);
    CHECK(c->src[1] == b);
    CHECK(c->view_src == b);
    CHECK(c->type == TSR_TYPE_F16);
    CHECK(same_shape(c, 12));
    CHECK(std::string(c->name) == "b (copy of a)");
    expect_op_fails(f.ctx, [&] { return tsr_cpy(f.ctx, a, f.f32(11)); }, "element count");
    expect_op_fails(f.ctx, [&] { return tsr_cpy(f.ctx, a, nullptr); }, "NULL");

    tsr_tensor * q = tsr_cast(f.ctx, f.f32(64, 2), TSR_TYPE_Q8_0);
    REQUIRE(q);
    CHECK(q->type == TSR_TYPE_Q8_0);
    CHECK(q->op == TSR_OP_CPY);
    CHECK(q->src[1] == q);
    expect_op_fails(f.ctx, [&] { return tsr_cast(f.ctx, a, TSR_TYPE_Q4_0); }, "block size");

    tsr_tensor * t = tsr_transpose(f.ctx, a);
    tsr_tensor * ct = tsr_cont(f.ctx, t);
    REQUIRE(ct);
    CHECK(same_shape(ct, 3, 4));
    CHECK(tsr_is_contiguous(ct));
    CHECK(ct->op == TSR_OP_CONT);
    CHECK(ct->src[0] == t);
    CHECK(same_shape(tsr_cont_2d(f.ctx, t, 2, 6), 2, 6));
    CHECK(same_shape(tsr_cont_4d(f.ctx, t, 1, 2, 3, 2), 1, 2, 3, 2));
    expect_op_fails(f.ctx, [&] { return tsr_cont_2d(f.ctx, t, 5, 5); }, "elements");
    // found by graph_fuzz: (2^62 + 1) * 12 wraps to 12, the element count of t, in int64
    expect_op_fails(f.ctx, [&] { return tsr_cont_4d(f.ctx, t, (INT64_C(1) << 62) + 1, 12, 1, 1); }, "tsr_cont: shape");
    expect_op_fails(f.ctx, [&] { return tsr_cont_4d(f.ctx, t, INT64_MAX, 3, 0, 1); }, "tsr_cont: shape");
}

TEST_CASE("binary ops broadcast b over a", "[ops]") {
    fixture f;
    tsr_tensor * a = f.f32(6, 4, 3, 2);
    tsr_tensor * b = f.f32(6, 1, 3, 1);
    tsr_tensor * (*fns[])(tsr_context *, tsr_tensor *, tsr_tensor *) = {tsr_add, tsr_sub, tsr_mul, tsr_div};
    const tsr_op ops[] = {TSR_OP_ADD, TSR_OP_SUB, TSR_OP_MUL, TSR_OP_DIV};
    for (int i = 0; i < 4; i++) {
        tsr_tensor * r = fns[i](f.ctx, a, b);
        REQUIRE(r);
        CHECK(same_shape(r, 6, 4, 3, 2));
        CHECK(r->type == TSR_TYPE_F32);
        CHECK(r->op == ops[i]);
        CHECK(r->src[0] == a);
        CHECK(r->src[1] == b);
        CHECK(r->view_src == nullptr);
        CHECK(r->data != a->data);
        expect_op_fails(f.ctx, [&] { return fns[i](f.ctx, b, a); }, "broadcast");            // a smaller than b
        expect_op_fails(f.ctx, [&] { return fns[i](f.ctx, a, f.f32(4)); }, "broadcast");     // 6 % 4 != 0
        expect_op_fails(f.ctx, [&] { return fns[i](f.ctx, a, nullptr); }, "NULL");
        expect_op_fails(f.ctx, [&] { return fns[i](nullptr, a, b); }, "NULL");
        expect_op_fails(f.ctx, [&] { return fns[i](f.ctx, a, f.typed(TSR_TYPE_I32, 6)); }, "type");
    }
    tsr_tensor * h = f.typed(TSR_TYPE_F16, 6, 4);
    CHECK(tsr_add(f.ctx, h, f.f32(6))->type == TSR_TYPE_F16);  // keeps a's type
    tsr_tensor * q = f.typed(TSR_TYPE_Q8_0, 64);
    CHECK(tsr_add(f.ctx, q, f.f32(64)) != nullptr);             // add into a quantized tensor, as ggml
    expect_op_fails(f.ctx, [&] { return tsr_mul(f.ctx, q, f.f32(64)); }, "type");

    tsr_tensor * ip = tsr_add_inplace(f.ctx, a, b);
    REQUIRE(ip);
    CHECK(ip->view_src == a);
    CHECK(ip->data == a->data);
    CHECK(ip->op == TSR_OP_ADD);
    tsr_tensor * mp = tsr_mul_inplace(f.ctx, a, b);
    CHECK(mp->op == TSR_OP_MUL);
    CHECK(mp->view_src == a);
}

TEST_CASE("unary ops, scale and clamp", "[ops]") {
    fixture f;
    tsr_tensor * a = f.f32(5, 3);
    struct {
        tsr_tensor * (*fn)(tsr_context *, tsr_tensor *);
        tsr_unary_op op;
    } unary[] = {
        {tsr_exp, TSR_UNARY_OP_EXP},   {tsr_neg, TSR_UNARY_OP_NEG},         {tsr_abs, TSR_UNARY_OP_ABS},
        {tsr_gelu, TSR_UNARY_OP_GELU}, {tsr_gelu_quick, TSR_UNARY_OP_GELU_QUICK}, {tsr_silu, TSR_UNARY_OP_SILU},
        {tsr_relu, TSR_UNARY_OP_RELU}, {tsr_tanh, TSR_UNARY_OP_TANH},        {tsr_sigmoid, TSR_UNARY_OP_SIGMOID},
    };
    for (const auto & u : unary) {
        tsr_tensor * r = u.fn(f.ctx, a);
        REQUIRE(r);
        CHECK(same_shape(r, 5, 3));
        CHECK(r->op == TSR_OP_UNARY);
        CHECK(tsr_get_unary_op(r) == u.op);
        CHECK(tsr_get_op_params_i32(r, 0) == (int32_t)u.op);
        CHECK(std::string(tsr_op_desc(r)) == tsr_unary_op_name(u.op));
        CHECK(r->src[0] == a);
        expect_op_fails(f.ctx, [&] { return u.fn(f.ctx, f.typed(TSR_TYPE_I32, 3)); }, "f32");
    }
    expect_op_fails(f.ctx, [&] { return tsr_unary(f.ctx, a, TSR_UNARY_OP_COUNT); }, "unknown");
    CHECK(std::string(tsr_unary_op_name(TSR_UNARY_OP_GELU_QUICK)) == "GELU_QUICK");

    const tsr_op simple_ops[] = {TSR_OP_SQR, TSR_OP_SQRT, TSR_OP_LOG};
    tsr_tensor * (*simple[])(tsr_context *, tsr_tensor *) = {tsr_sqr, tsr_sqrt, tsr_log};
    for (int i = 0; i < 3; i++) {
        tsr_tensor * r = simple[i](f.ctx, a);
        REQUIRE(r);
        CHECK(r->op == simple_ops[i]);
        CHECK(same_shape(r, 5, 3));
        expect_op_fails(f.ctx, [&] { return simple[i](f.ctx, f.typed(TSR_TYPE_Q8_0, 32)); });
    }

    tsr_tensor * s = tsr_scale(f.ctx, a, 0.25f);
    REQUIRE(s);
    CHECK(s->op == TSR_OP_SCALE);
    CHECK(tsr_get_op_params_f32(s, 0) == 0.25f);
    CHECK(tsr_get_op_params_f32(s, 1) == 0.0f);
    CHECK(s->view_src == nullptr);
    tsr_tensor * si = tsr_scale_inplace(f.ctx, a, 2.0f);
    CHECK(si->view_src == a);
    CHECK(tsr_get_op_params_f32(si, 0) == 2.0f);

    tsr_tensor * c = tsr_clamp(f.ctx, a, -1.0f, 2.0f);
    REQUIRE(c);
    CHECK(c->op == TSR_OP_CLAMP);
    CHECK(tsr_get_op_params_f32(c, 0) == -1.0f);
    CHECK(tsr_get_op_params_f32(c, 1) == 2.0f);
    expect_op_fails(f.ctx, [&] { return tsr_clamp(f.ctx, a, 3.0f, 2.0f); }, "min");
}

TEST_CASE("swiglu and swiglu_split", "[ops]") {
    fixture f;
    tsr_tensor * a = f.f32(8, 3, 2);
    tsr_tensor * g = tsr_swiglu(f.ctx, a);
    REQUIRE(g);
    CHECK(same_shape(g, 4, 3, 2));
    CHECK(g->op == TSR_OP_GLU);
    CHECK(tsr_get_glu_op(g) == TSR_GLU_OP_SWIGLU);
    CHECK(tsr_get_op_params_i32(g, 1) == 0);
    CHECK(g->src[0] == a);
    CHECK(g->src[1] == nullptr);
    CHECK(std::string(tsr_op_desc(g)) == "SWIGLU");
    expect_op_fails(f.ctx, [&] { return tsr_swiglu(f.ctx, f.f32(7)); }, "even");

    tsr_tensor * b = f.f32(8, 3, 2);
    tsr_tensor * s = tsr_swiglu_split(f.ctx, a, b);
    REQUIRE(s);
    CHECK(same_shape(s, 8, 3, 2));
    CHECK(s->src[1] == b);
    expect_op_fails(f.ctx, [&] { return tsr_swiglu_split(f.ctx, a, f.f32(8, 3)); }, "shape");
}

TEST_CASE("reductions", "[ops]") {
    fixture f;
    tsr_tensor * a = f.f32(7, 5, 3, 2);
    tsr_tensor * s = tsr_sum(f.ctx, a);
    CHECK(same_shape(s, 1));
    CHECK(s->op == TSR_OP_SUM);
    tsr_tensor * sr = tsr_sum_rows(f.ctx, a);
    CHECK(same_shape(sr, 1, 5, 3, 2));
    CHECK(sr->op == TSR_OP_SUM_ROWS);
    tsr_tensor * m = tsr_mean(f.ctx, f.typed(TSR_TYPE_F16, 7, 5));
    CHECK(same_shape(m, 1, 5));
    CHECK(m->type == TSR_TYPE_F32);
    CHECK(m->op == TSR_OP_MEAN);
    tsr_tensor * am = tsr_argmax(f.ctx, f.f32(10, 4));
    CHECK(same_shape(am, 4));
    CHECK(am->type == TSR_TYPE_I32);
    CHECK(am->op == TSR_OP_ARGMAX);
    expect_op_fails(f.ctx, [&] { return tsr_argmax(f.ctx, a); }, "matrix");
    expect_op_fails(f.ctx, [&] { return tsr_sum(f.ctx, f.typed(TSR_TYPE_I32, 3)); });
}

TEST_CASE("repeat and concat", "[ops]") {
    fixture f;
    tsr_tensor * a = f.f32(3, 1, 2);
    tsr_tensor * b = f.f32(6, 4, 2);
    tsr_tensor * r = tsr_repeat(f.ctx, a, b);
    REQUIRE(r);
    CHECK(same_shape(r, 6, 4, 2));
    CHECK(r->op == TSR_OP_REPEAT);
    CHECK(r->src[0] == a);
    CHECK(r->src[1] == nullptr);
    expect_op_fails(f.ctx, [&] { return tsr_repeat(f.ctx, b, a); }, "tiled");

    tsr_tensor * x = f.f32(4, 3, 2);
    for (int dim = 0; dim < 4; dim++) {
        int64_t ne[4] = {4, 3, 2, 1};
        ne[dim] = 5;
        tsr_tensor * y = f.f32(ne[0], ne[1], ne[2], ne[3]);
        tsr_tensor * c = tsr_concat(f.ctx, x, y, dim);
        REQUIRE(c);
        int64_t want[4] = {4, 3, 2, 1};
        want[dim] += 5;
        CHECK(same_shape(c, want[0], want[1], want[2], want[3]));
        CHECK(tsr_get_op_params_i32(c, 0) == dim);
        CHECK(c->op == TSR_OP_CONCAT);
        CHECK(c->src[1] == y);
    }
    expect_op_fails(f.ctx, [&] { return tsr_concat(f.ctx, x, f.f32(4, 3, 3), 0); }, "dim 2");
    expect_op_fails(f.ctx, [&] { return tsr_concat(f.ctx, x, x, 4); }, "range");
    expect_op_fails(f.ctx, [&] { return tsr_concat(f.ctx, x, f.typed(TSR_TYPE_F16, 4, 3, 2), 1); }, "type");
}

TEST_CASE("normalizations", "[ops]") {
    fixture f;
    tsr_tensor * a = f.f32(16, 4);
    tsr_tensor * n = tsr_norm(f.ctx, a, 1e-5f);
    CHECK(n->op == TSR_OP_NORM);
    CHECK(tsr_get_op_params_f32(n, 0) == 1e-5f);
    CHECK(same_shape(n, 16, 4));
    tsr_tensor * r = tsr_rms_norm(f.ctx, a, 1e-6f);
    CHECK(r->op == TSR_OP_RMS_NORM);
    CHECK(tsr_get_op_params_f32(r, 0) == 1e-6f);
    expect_op_fails(f.ctx, [&] { return tsr_rms_norm(f.ctx, f.typed(TSR_TYPE_F16, 16), 1e-6f); }, "f32");
    expect_op_fails(f.ctx, [&] { return tsr_norm(f.ctx, a, -1.0f); }, "eps");

    tsr_tensor * img = f.f32(8, 8, 32, 2);
    tsr_tensor * g = tsr_group_norm(f.ctx, img, 8, 1e-6f);
    REQUIRE(g);
    CHECK(g->op == TSR_OP_GROUP_NORM);
    CHECK(tsr_get_op_params_i32(g, 0) == 8);
    CHECK(tsr_get_op_params_f32(g, 1) == 1e-6f);
    CHECK(same_shape(g, 8, 8, 32, 2));
    expect_op_fails(f.ctx, [&] { return tsr_group_norm(f.ctx, img, 0, 1e-6f); }, "n_groups");
    expect_op_fails(f.ctx, [&] { return tsr_group_norm(f.ctx, img, 33, 1e-6f); }, "n_groups");
}

TEST_CASE("mul_mat and out_prod", "[ops]") {
    fixture f;
    tsr_tensor * a = f.typed(TSR_TYPE_Q4_0, 64, 10, 2, 1);
    tsr_tensor * b = f.f32(64, 7, 6, 3);
    tsr_tensor * m = tsr_mul_mat(f.ctx, a, b);
    REQUIRE(m);
    CHECK(same_shape(m, 10, 7, 6, 3));
    CHECK(m->type == TSR_TYPE_F32);
    CHECK(m->op == TSR_OP_MUL_MAT);
    CHECK(m->src[0] == a);
    CHECK(m->src[1] == b);
    expect_op_fails(f.ctx, [&] { return tsr_mul_mat(f.ctx, a, f.f32(32, 7)); }, "cannot multiply");
    expect_op_fails(f.ctx, [&] { return tsr_mul_mat(f.ctx, a, f.f32(64, 7, 5)); }, "cannot multiply");  // 5 % 2
    expect_op_fails(f.ctx, [&] { return tsr_mul_mat(f.ctx, a, f.typed(TSR_TYPE_Q4_0, 64, 7, 2)); }, "f32");
    tsr_tensor * h = f.typed(TSR_TYPE_F16, 16, 4);
    CHECK(tsr_mul_mat(f.ctx, h, f.typed(TSR_TYPE_F16, 16, 3)) != nullptr);  // same float type
    tsr_tensor * sq = f.f32(4, 4);
    expect_op_fails(f.ctx, [&] { return tsr_mul_mat(f.ctx, tsr_transpose(f.in, sq), f.f32(4, 2)); }, "transposed");
    expect_op_fails(f.ctx, [&] { return tsr_mul_mat(f.ctx, a, nullptr); }, "NULL");

    tsr_tensor * oa = f.f32(5, 9, 2);
    tsr_tensor * ob = f.f32(3, 9, 4);
    tsr_tensor * o = tsr_out_prod(f.ctx, oa, ob);
    REQUIRE(o);
    CHECK(same_shape(o, 5, 3, 4));
    CHECK(o->op == TSR_OP_OUT_PROD);
    expect_op_fails(f.ctx, [&] { return tsr_out_prod(f.ctx, oa, f.f32(3, 8, 4)); }, "cannot multiply");
}

TEST_CASE("get_rows and set_rows", "[ops]") {
    fixture f;
    tsr_tensor * emb = f.typed(TSR_TYPE_Q8_0, 64, 100);
    tsr_tensor * idx = f.typed(TSR_TYPE_I32, 5);
    tsr_tensor * g = tsr_get_rows(f.ctx, emb, idx);
    REQUIRE(g);
    CHECK(same_shape(g, 64, 5));
    CHECK(g->type == TSR_TYPE_F32);
    CHECK(g->op == TSR_OP_GET_ROWS);
    CHECK(g->src[0] == emb);
    CHECK(g->src[1] == idx);
    tsr_tensor * g3 = tsr_get_rows(f.ctx, f.f32(8, 10, 3, 2), f.typed(TSR_TYPE_I32, 4, 3, 2));
    CHECK(same_shape(g3, 8, 4, 3, 2));
    CHECK(tsr_get_rows(f.ctx, f.typed(TSR_TYPE_I32, 2, 10), idx)->type == TSR_TYPE_I32);
    expect_op_fails(f.ctx, [&] { return tsr_get_rows(f.ctx, emb, f.f32(5)); }, "i32");
    expect_op_fails(f.ctx, [&] { return tsr_get_rows(f.ctx, emb, f.typed(TSR_TYPE_I32, 5, 2)); }, "do not match");

    tsr_tensor * dst = tsr_set_name(f.typed(TSR_TYPE_F16, 16, 50, 2), "cache");
    tsr_tensor * src = f.f32(16, 3, 2);
    tsr_tensor * rows = f.typed(TSR_TYPE_I32, 3, 2);
    tsr_tensor * s = tsr_set_rows(f.ctx, dst, src, rows);
    REQUIRE(s);
    CHECK(s->op == TSR_OP_SET_ROWS);
    CHECK(s->view_src == dst);
    CHECK(same_shape(s, 16, 50, 2));
    CHECK(s->type == TSR_TYPE_F16);
    CHECK(s->src[0] == src);
    CHECK(s->src[1] == rows);
    CHECK(s->src[2] == dst);
    expect_op_fails(f.ctx, [&] { return tsr_set_rows(f.ctx, dst, f.f32(15, 3, 2), rows); }, "does not match");
    expect_op_fails(f.ctx, [&] { return tsr_set_rows(f.ctx, dst, src, f.typed(TSR_TYPE_I32, 4)); }, "do not match");
    expect_op_fails(f.ctx, [&] { return tsr_set_rows(f.ctx, dst, f.typed(TSR_TYPE_F16, 16, 3, 2), rows); }, "f32");
}

TEST_CASE("diag_mask_inf and soft_max", "[ops]") {
    fixture f;
    tsr_tensor * kq = f.f32(10, 4, 8);
    tsr_tensor * d = tsr_diag_mask_inf(f.ctx, kq, 6);
    REQUIRE(d);
    CHECK(d->op == TSR_OP_DIAG_MASK_INF);
    CHECK(tsr_get_op_params_i32(d, 0) == 6);
    CHECK(same_shape(d, 10, 4, 8));
    expect_op_fails(f.ctx, [&] { return tsr_diag_mask_inf(f.ctx, kq, -1); }, "n_past");

    tsr_tensor * s = tsr_soft_max(f.ctx, kq);
    REQUIRE(s);
    CHECK(s->op == TSR_OP_SOFT_MAX);
    CHECK(tsr_get_op_params_f32(s, 0) == 1.0f);
    CHECK(tsr_get_op_params_f32(s, 1) == 0.0f);
    CHECK(s->src[1] == nullptr);

    tsr_tensor * mask = f.typed(TSR_TYPE_F16, 10, 6);
    tsr_tensor * se = tsr_soft_max_ext(f.ctx, kq, mask, 0.125f, 8.0f);
    REQUIRE(se);
    CHECK(tsr_get_op_params_f32(se, 0) == 0.125f);
    CHECK(tsr_get_op_params_f32(se, 1) == 8.0f);
    CHECK(se->src[1] == mask);
    CHECK(tsr_soft_max_ext(f.ctx, kq, f.f32(10, 4, 2), 1.0f, 0.0f) != nullptr);  // broadcast over heads
    expect_op_fails(f.ctx, [&] { return tsr_soft_max_ext(f.ctx, kq, f.f32(9, 4), 1.0f, 0.0f); }, "mask");
    expect_op_fails(f.ctx, [&] { return tsr_soft_max_ext(f.ctx, kq, f.f32(10, 3), 1.0f, 0.0f); }, "mask");
    expect_op_fails(f.ctx, [&] { return tsr_soft_max_ext(f.ctx, kq, f.f32(10, 4, 3), 1.0f, 0.0f); }, "mask");
    expect_op_fails(f.ctx, [&] { return tsr_soft_max_ext(f.ctx, kq, nullptr, 1.0f, 8.0f); }, "max_bias");
    expect_op_fails(f.ctx, [&] { return tsr_soft_max_ext(f.ctx, kq, f.typed(TSR_TYPE_I32, 10, 4), 1.0f, 0.0f); }, "mask");
    expect_op_fails(f.ctx, [&] { return tsr_soft_max(f.ctx, tsr_transpose(f.in, kq)); }, "contiguous");
}

TEST_CASE("rope and rope_ext record every parameter", "[ops]") {
    fixture f;
    tsr_tensor * x = f.f32(64, 8, 5);  // head_dim 64, 8 heads, 5 tokens
    tsr_tensor * pos = f.typed(TSR_TYPE_I32, 5);
    tsr_tensor * r = tsr_rope(f.ctx, x, pos, 64, TSR_ROPE_TYPE_NEOX);
    REQUIRE(r);
    CHECK(r->op == TSR_OP_ROPE);
    CHECK(same_shape(r, 64, 8, 5));
    CHECK(tsr_get_op_params_i32(r, 0) == 0);
    CHECK(tsr_get_op_params_i32(r, 1) == 64);
    CHECK(tsr_get_op_params_i32(r, 2) == TSR_ROPE_TYPE_NEOX);
    CHECK(tsr_get_op_params_f32(r, 5) == 10000.0f);
    CHECK(tsr_get_op_params_f32(r, 6) == 1.0f);
    CHECK(tsr_get_op_params_f32(r, 8) == 1.0f);
    CHECK(r->src[1] == pos);
    CHECK(r->src[2] == nullptr);

    tsr_tensor * ff = f.f32(16);
    tsr_tensor * e = tsr_rope_ext(f.ctx, x, pos, ff, 32, TSR_ROPE_TYPE_NORMAL, 4096, 500000.0f, 0.5f, 0.25f, 1.5f, 32.0f, 1.0f);
    REQUIRE(e);
    CHECK(tsr_get_op_params_i32(e, 1) == 32);
    CHECK(tsr_get_op_params_i32(e, 2) == TSR_ROPE_TYPE_NORMAL);
    CHECK(tsr_get_op_params_i32(e, 3) == 0);
    CHECK(tsr_get_op_params_i32(e, 4) == 4096);
    CHECK(tsr_get_op_params_f32(e, 5) == 500000.0f);
    CHECK(tsr_get_op_params_f32(e, 6) == 0.5f);
    CHECK(tsr_get_op_params_f32(e, 7) == 0.25f);
    CHECK(tsr_get_op_params_f32(e, 8) == 1.5f);
    CHECK(tsr_get_op_params_f32(e, 9) == 32.0f);
    CHECK(tsr_get_op_params_f32(e, 10) == 1.0f);
    CHECK(e->src[2] == ff);

    expect_op_fails(f.ctx, [&] { return tsr_rope(f.ctx, x, f.typed(TSR_TYPE_I32, 4), 64, 0); }, "positions");
    expect_op_fails(f.ctx, [&] { return tsr_rope(f.ctx, x, f.f32(5), 64, 0); }, "i32");
    expect_op_fails(f.ctx, [&] { return tsr_rope(f.ctx, x, pos, 66, 0); }, "n_dims");
    expect_op_fails(f.ctx, [&] { return tsr_rope(f.ctx, x, pos, 31, 0); }, "n_dims");
    expect_op_fails(f.ctx, [&] { return tsr_rope(f.ctx, x, pos, 64, 1); }, "mode");
    expect_op_fails(f.ctx, [&] {
        return tsr_rope_ext(f.ctx, x, pos, f.f32(8), 32, 0, 0, 1e4f, 1, 0, 1, 0, 0);
    }, "frequency");
}

TEST_CASE("im2col, conv_2d, pool_2d", "[ops]") {
    fixture f;
    tsr_tensor * k = f.typed(TSR_TYPE_F16, 3, 3, 4, 8);   // KW KH IC OC
    tsr_tensor * img = f.f32(10, 9, 4, 2);                // W H C N
    tsr_tensor * col = tsr_im2col(f.ctx, k, img, 1, 2, 1, 0, 1, 1, true, TSR_TYPE_F16);
    REQUIRE(col);
    // OW = (10 + 2 - 2 - 1)/1 + 1 = 10, OH = (9 + 0 - 2 - 1)/2 + 1 = 4
    CHECK(same_shape(col, 36, 10, 4, 2));
    CHECK(col->type == TSR_TYPE_F16);
    CHECK(col->op == TSR_OP_IM2COL);
    const int32_t want[7] = {1, 2, 1, 0, 1, 1, 1};
    for (int i = 0; i < 7; i++) CHECK(tsr_get_op_params_i32(col, (uint32_t)i) == want[i]);
    tsr_tensor * col1 = tsr_im2col(f.ctx, f.f32(5, 4, 6), f.f32(20, 4, 3), 2, 0, 0, 0, 2, 0, false, TSR_TYPE_F32);
    REQUIRE(col1);  // OW = (20 - 8 - 1)/2 + 1 = 6
    CHECK(same_shape(col1, 20, 6, 3, 1));
    CHECK(tsr_get_op_params_i32(col1, 6) == 0);
    expect_op_fails(f.ctx, [&] { return tsr_im2col(f.ctx, k, f.f32(10, 9, 3, 2), 1, 1, 0, 0, 1, 1, true, TSR_TYPE_F32); }, "channels");
    expect_op_fails(f.ctx, [&] { return tsr_im2col(f.ctx, k, f.f32(2, 9, 4, 1), 1, 1, 0, 0, 1, 1, true, TSR_TYPE_F32); }, "small");
    expect_op_fails(f.ctx, [&] { return tsr_im2col(f.ctx, k, img, 0, 1, 0, 0, 1, 1, true, TSR_TYPE_F32); }, "stride");
    expect_op_fails(f.ctx, [&] { return tsr_im2col(f.ctx, k, img, 1, 1, 0, 0, 1, 1, true, TSR_TYPE_I32); }, "dst_type");

    tsr_tensor * c = tsr_conv_2d(f.ctx, k, img, 2, 1, 1, 1, 1, 2);
    REQUIRE(c);
    // OW = (10 + 2 - 2 - 1)/2 + 1 = 5, OH = (9 + 2 - 4 - 1)/1 + 1 = 7
    CHECK(same_shape(c, 5, 7, 8, 2));
    CHECK(c->type == TSR_TYPE_F32);
    CHECK(c->op == TSR_OP_CONV_2D);
    const int32_t wc[6] = {2, 1, 1, 1, 1, 2};
    for (int i = 0; i < 6; i++) CHECK(tsr_get_op_params_i32(c, (uint32_t)i) == wc[i]);
    expect_op_fails(f.ctx, [&] { return tsr_conv_2d(f.ctx, k, f.f32(10, 9, 5, 2), 1, 1, 0, 0, 1, 1); }, "channels");
    expect_op_fails(f.ctx, [&] { return tsr_conv_2d(f.ctx, k, f.f32(1, 1, 4, 1), 1, 1, 0, 0, 1, 1); }, "small");
    expect_op_fails(f.ctx, [&] { return tsr_conv_2d(f.ctx, k, img, 1, 1, -1, 0, 1, 1); }, "padding");

    tsr_tensor * p = tsr_pool_2d(f.ctx, img, TSR_OP_POOL_AVG, 3, 2, 2, 2, 1.0f, 0.0f);
    REQUIRE(p);
    // OW = (10 + 2 - 3)/2 + 1 = 5 (4.5 + 1 truncated), OH = (9 - 2)/2 + 1 = 4
    CHECK(same_shape(p, 5, 4, 4, 2));
    CHECK(p->op == TSR_OP_POOL_2D);
    CHECK(tsr_get_op_params_i32(p, 0) == TSR_OP_POOL_AVG);
    CHECK(tsr_get_op_params_i32(p, 1) == 3);
    CHECK(tsr_get_op_params_i32(p, 2) == 2);
    CHECK(tsr_get_op_params_i32(p, 3) == 2);
    CHECK(tsr_get_op_params_i32(p, 4) == 2);
    CHECK(tsr_get_op_params_f32(p, 5) == 1.0f);
    CHECK(tsr_get_op_params_f32(p, 6) == 0.0f);
    expect_op_fails(f.ctx, [&] { return tsr_pool_2d(f.ctx, img, TSR_OP_POOL_MAX, 11, 2, 1, 1, 0, 0); }, "window");
    expect_op_fails(f.ctx, [&] { return tsr_pool_2d(f.ctx, img, TSR_OP_POOL_COUNT, 2, 2, 1, 1, 0, 0); }, "unknown");
    // found by graph_fuzz: an infinite padding made an infinite float size, cast to int64
    expect_op_fails(f.ctx, [&] { return tsr_pool_2d(f.ctx, img, TSR_OP_POOL_MAX, 2, 2, 1, 1, INFINITY, 0); }, "too large");
    expect_op_fails(f.ctx, [&] { return tsr_pool_2d(f.ctx, img, TSR_OP_POOL_AVG, 2, 2, 1, 1, 0, 1e30f); }, "too large");
}

TEST_CASE("upscale, pad, argsort", "[ops]") {
    fixture f;
    tsr_tensor * a = f.f32(4, 3, 2);
    tsr_tensor * u = tsr_upscale(f.ctx, a, 2, TSR_SCALE_MODE_NEAREST);
    REQUIRE(u);
    CHECK(same_shape(u, 8, 6, 2));
    CHECK(u->op == TSR_OP_UPSCALE);
    CHECK(tsr_get_op_params_i32(u, 0) == TSR_SCALE_MODE_NEAREST);
    tsr_tensor * ue = tsr_upscale_ext(f.ctx, a, 5, 7, 2, 1, TSR_SCALE_MODE_BILINEAR);
    CHECK(same_shape(ue, 5, 7, 2));
    CHECK(tsr_get_op_params_i32(ue, 0) == TSR_SCALE_MODE_BILINEAR);
    expect_op_fails(f.ctx, [&] { return tsr_upscale(f.ctx, a, 0, TSR_SCALE_MODE_NEAREST); }, "scale factor");
    expect_op_fails(f.ctx, [&] { return tsr_upscale_ext(f.ctx, a, 5, 0, 2, 1, TSR_SCALE_MODE_NEAREST); }, "positive");
    expect_op_fails(f.ctx, [&] { return tsr_upscale(f.ctx, a, 2, (tsr_scale_mode)7); }, "mode");
    // found by graph_fuzz: the CPU kernel read the source at index -1
    expect_op_fails(f.ctx, [&] { return tsr_upscale_ext(f.ctx, f.f32(0, 3), 2, 3, 1, 1, TSR_SCALE_MODE_NEAREST); }, "no elements");
    expect_op_fails(f.ctx, [&] { return tsr_upscale_ext(f.ctx, f.f32(4, 3, 0), 4, 3, 1, 1, TSR_SCALE_MODE_BILINEAR); }, "no elements");

    tsr_tensor * p = tsr_pad(f.ctx, a, 1, 2, 0, 3);
    REQUIRE(p);
    CHECK(same_shape(p, 5, 5, 2, 4));
    CHECK(p->op == TSR_OP_PAD);
    CHECK(tsr_get_op_params_i32(p, 0) == 1);
    CHECK(tsr_get_op_params_i32(p, 1) == 2);
    CHECK(tsr_get_op_params_i32(p, 2) == 0);
    CHECK(tsr_get_op_params_i32(p, 3) == 3);
    expect_op_fails(f.ctx, [&] { return tsr_pad(f.ctx, a, -1, 0, 0, 0); }, "padding");

    tsr_tensor * s = tsr_argsort(f.ctx, a, TSR_SORT_ORDER_DESC);
    REQUIRE(s);
    CHECK(same_shape(s, 4, 3, 2));
    CHECK(s->type == TSR_TYPE_I32);
    CHECK(s->op == TSR_OP_ARGSORT);
    CHECK(tsr_get_op_params_i32(s, 0) == TSR_SORT_ORDER_DESC);
    expect_op_fails(f.ctx, [&] { return tsr_argsort(f.ctx, f.typed(TSR_TYPE_F16, 4), TSR_SORT_ORDER_ASC); }, "f32");
}

TEST_CASE("flash_attn_ext", "[ops]") {
    fixture f;
    tsr_tensor * q = f.f32(64, 7, 8, 1);      // D n_q H B
    tsr_tensor * k = f.typed(TSR_TYPE_F16, 64, 32, 2, 1);  // GQA: 2 kv heads
    tsr_tensor * v = f.typed(TSR_TYPE_F16, 48, 32, 2, 1);  // Dv 48
    tsr_tensor * mask = f.typed(TSR_TYPE_F16, 32, 8);
    tsr_tensor * r = tsr_flash_attn_ext(f.ctx, q, k, v, mask, 0.125f, 0.0f, 30.0f);
    REQUIRE(r);
    CHECK(same_shape(r, 48, 8, 7, 1));
    CHECK(r->type == TSR_TYPE_F32);
    CHECK(r->op == TSR_OP_FLASH_ATTN_EXT);
    CHECK(tsr_get_op_params_f32(r, 0) == 0.125f);
    CHECK(tsr_get_op_params_f32(r, 1) == 0.0f);
    CHECK(tsr_get_op_params_f32(r, 2) == 30.0f);
    CHECK(tsr_get_op_params_i32(r, 3) == 0);
    CHECK(r->src[0] == q);
    CHECK(r->src[1] == k);
    CHECK(r->src[2] == v);
    CHECK(r->src[3] == mask);
    CHECK(tsr_flash_attn_ext(f.ctx, q, k, v, nullptr, 1.0f, 0.0f, 0.0f) != nullptr);
    expect_op_fails(f.ctx, [&] { return tsr_flash_attn_ext(f.ctx, q, f.typed(TSR_TYPE_F16, 32, 32, 2), v, mask, 1, 0, 0); }, "k");
    expect_op_fails(f.ctx, [&] { return tsr_flash_attn_ext(f.ctx, q, f.typed(TSR_TYPE_F16, 64, 32, 3), v, mask, 1, 0, 0); }, "k");
    expect_op_fails(f.ctx, [&] { return tsr_flash_attn_ext(f.ctx, q, k, f.typed(TSR_TYPE_F16, 48, 31, 2), mask, 1, 0, 0); }, "v");
    expect_op_fails(f.ctx, [&] { return tsr_flash_attn_ext(f.ctx, q, k, v, f.typed(TSR_TYPE_F16, 32, 6), 1, 0, 0); }, "mask");
    expect_op_fails(f.ctx, [&] { return tsr_flash_attn_ext(f.ctx, q, k, v, f.typed(TSR_TYPE_F16, 31, 8), 1, 0, 0); }, "mask");
    expect_op_fails(f.ctx, [&] { return tsr_flash_attn_ext(f.ctx, q, k, v, nullptr, 1, 2.0f, 0); }, "max_bias");
    expect_op_fails(f.ctx, [&] { return tsr_flash_attn_ext(f.ctx, f.typed(TSR_TYPE_F16, 64, 7, 8), k, v, mask, 1, 0, 0); }, "q");
    expect_op_fails(f.ctx, [&] { return tsr_flash_attn_ext(f.ctx, q, k, nullptr, mask, 1, 0, 0); }, "NULL");
}

TEST_CASE("op names and symbols cover every op", "[ops]") {
    for (int op = 0; op < TSR_OP_COUNT; op++) {
        CHECK(tsr_op_name((tsr_op)op) != nullptr);
        CHECK(std::string(tsr_op_name((tsr_op)op)) != "UNKNOWN");
        CHECK(tsr_op_symbol((tsr_op)op) != nullptr);
    }
    CHECK(std::string(tsr_op_name(TSR_OP_MUL_MAT)) == "MUL_MAT");
    CHECK(std::string(tsr_op_name(TSR_OP_GLU)) == "GLU");
    CHECK(std::string(tsr_op_name(TSR_OP_FLASH_ATTN_EXT)) == "FLASH_ATTN_EXT");
    CHECK(std::string(tsr_op_name(TSR_OP_COUNT)) == "UNKNOWN");
    CHECK(std::string(tsr_op_symbol(TSR_OP_ADD)) == "x+y");
    CHECK(std::string(tsr_glu_op_name(TSR_GLU_OP_SWIGLU)) == "SWIGLU");
}

TEST_CASE("ops in an exhausted context fail without side effects", "[ops][error]") {
    tsr::context ctx(3 * tsr_tensor_overhead() + 3 * 64);
    tsr_tensor * a = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 16);
    tsr_tensor * b = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 16);
    REQUIRE((a && b));
    tsr_tensor * c = tsr_add(ctx, a, b);
    REQUIRE(c);
    expect_op_fails(ctx, [&] { return tsr_mul(ctx, a, b); }, "out of memory");
    expect_op_fails(ctx, [&] { return tsr_view_1d(ctx, a, 4, 0); }, "out of memory");
}

TEST_CASE("every op rejects NULL operands and a NULL context", "[ops][error]") {
    fixture f;
    tsr_tensor * a = f.f32(8, 4, 2);
    tsr_tensor * i = f.typed(TSR_TYPE_I32, 2);
    tsr_context * c = f.ctx;
    tsr_tensor * n = nullptr;
    std::vector<std::function<tsr_tensor *(tsr_context *, tsr_tensor *)>> ops = {
        [](tsr_context * x, tsr_tensor * t) { return tsr_dup(x, t); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_cont(x, t); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_cast(x, t, TSR_TYPE_F16); },
        [&](tsr_context * x, tsr_tensor * t) { return tsr_cpy(x, t, a); },
        [&](tsr_context * x, tsr_tensor * t) { return tsr_add(x, t, a); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_scale(x, t, 1.0f); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_sqr(x, t); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_silu(x, t); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_clamp(x, t, 0, 1); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_swiglu(x, t); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_sum(x, t); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_sum_rows(x, t); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_mean(x, t); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_argmax(x, t); },
        [&](tsr_context * x, tsr_tensor * t) { return tsr_repeat(x, t, a); },
        [&](tsr_context * x, tsr_tensor * t) { return tsr_concat(x, t, a, 0); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_norm(x, t, 0); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_group_norm(x, t, 1, 0); },
        [&](tsr_context * x, tsr_tensor * t) { return tsr_mul_mat(x, t, a); },
        [&](tsr_context * x, tsr_tensor * t) { return tsr_out_prod(x, t, a); },
        [&](tsr_context * x, tsr_tensor * t) { return tsr_get_rows(x, t, i); },
        [&](tsr_context * x, tsr_tensor * t) { return tsr_set_rows(x, t, a, i); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_diag_mask_inf(x, t, 0); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_soft_max(x, t); },
        [&](tsr_context * x, tsr_tensor * t) { return tsr_rope(x, t, i, 8, 0); },
        [&](tsr_context * x, tsr_tensor * t) { return tsr_im2col(x, t, a, 1, 1, 0, 0, 1, 1, true, TSR_TYPE_F32); },
        [&](tsr_context * x, tsr_tensor * t) { return tsr_conv_2d(x, t, a, 1, 1, 0, 0, 1, 1); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_pool_2d(x, t, TSR_OP_POOL_MAX, 1, 1, 1, 1, 0, 0); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_upscale(x, t, 2, TSR_SCALE_MODE_NEAREST); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_pad(x, t, 1, 0, 0, 0); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_argsort(x, t, TSR_SORT_ORDER_ASC); },
        [&](tsr_context * x, tsr_tensor * t) { return tsr_flash_attn_ext(x, t, a, a, nullptr, 1, 0, 0); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_view_1d(x, t, 1, 0); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_reshape_1d(x, t, 64); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_permute(x, t, 1, 0, 2, 3); },
        [](tsr_context * x, tsr_tensor * t) { return tsr_transpose(x, t); },
    };
    for (size_t k = 0; k < ops.size(); k++) {
        INFO("op #" << k);
        expect_op_fails(c, [&] { return ops[k](c, n); });
        expect_op_fails(c, [&] { return ops[k](nullptr, a); });
    }
}
