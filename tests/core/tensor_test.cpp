// Tensors: creation, strides, queries, names, flags, op params, element access, views.
#include "test_util.h"

#include <cmath>
#include <string>

TEST_CASE("new tensors: shapes and strides", "[tensor]") {
    tsr::context ctx(1 << 20);
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 5, 4, 3);
    REQUIRE(a);
    CHECK(same_shape(a, 5, 4, 3, 1));
    CHECK(a->nb[0] == 4);
    CHECK(a->nb[1] == 20);
    CHECK(a->nb[2] == 80);
    CHECK(a->nb[3] == 240);
    CHECK(tsr_nbytes(a) == 240);
    CHECK(tsr_nelements(a) == 60);
    CHECK(tsr_nrows(a) == 12);
    CHECK(tsr_n_dims(a) == 3);
    CHECK(tsr_element_size(a) == 4);
    CHECK(tsr_is_contiguous(a));
    CHECK_FALSE(tsr_is_transposed(a));
    CHECK_FALSE(tsr_is_permuted(a));
    CHECK_FALSE(tsr_is_view(a));
    CHECK_FALSE(tsr_is_empty(a));
    CHECK(a->op == TSR_OP_NONE);
    CHECK(a->buffer == nullptr);
    CHECK(a->view_src == nullptr);

    tsr_tensor * q = tsr_new_tensor_2d(ctx, TSR_TYPE_Q8_0, 64, 3);
    REQUIRE(q);
    CHECK(q->nb[0] == 34);
    CHECK(q->nb[1] == 68);
    CHECK(q->nb[2] == 204);
    CHECK(tsr_nbytes(q) == 204);
    tsr_tensor * q4 = tsr_new_tensor_1d(ctx, TSR_TYPE_Q4_0, 96);
    CHECK(tsr_nbytes(q4) == 54);
    CHECK(tsr_n_dims(q4) == 1);

    tsr_tensor * e = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 0, 3);
    REQUIRE(e);
    CHECK(tsr_is_empty(e));
    CHECK(tsr_nbytes(e) == 0);

    tsr_tensor * s = tsr_new_f32(ctx, 2.5f);
    REQUIRE(s);
    CHECK(tsr_is_scalar(s));
    CHECK(tsr_get_f32_1d(s, 0) == 2.5f);
    tsr_tensor * si = tsr_new_i32(ctx, -7);
    CHECK(*(int32_t *)si->data == -7);

    tsr_tensor * d = tsr_dup_tensor(ctx, a);
    CHECK(tsr_are_same_shape(a, d));
    CHECK(tsr_are_same_stride(a, d));
    CHECK(d->data != a->data);
    const int64_t ne4[4] = {2, 3, 4, 5};
    tsr_tensor * f = tsr_new_tensor(ctx, TSR_TYPE_BF16, 4, ne4);
    CHECK(same_shape(f, 2, 3, 4, 5));
    CHECK(f->nb[3] == 2 * 2 * 3 * 4);
}

TEST_CASE("new tensors: invalid input fails cleanly", "[tensor][error]") {
    tsr::context ctx(1 << 16);
    const int64_t ne[4] = {4, 4, 4, 4};
    expect_op_fails(ctx, [&] { return tsr_new_tensor(ctx, (tsr_type)5, 1, ne); }, "type");
    expect_op_fails(ctx, [&] { return tsr_new_tensor(ctx, TSR_TYPE_F32, 0, ne); }, "n_dims");
    expect_op_fails(ctx, [&] { return tsr_new_tensor(ctx, TSR_TYPE_F32, 5, ne); }, "n_dims");
    expect_op_fails(ctx, [&] { return tsr_new_tensor_2d(ctx, TSR_TYPE_F32, -1, 2); });
    expect_op_fails(ctx, [&] { return tsr_new_tensor_1d(ctx, TSR_TYPE_Q8_0, 33); }, "block size");
    expect_op_fails(ctx, [&] { return tsr_new_tensor_1d(nullptr, TSR_TYPE_F32, 3); });
    expect_op_fails(ctx, [&] { return tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 1 << 30, 1 << 30, 1 << 30, 1 << 30); });
    expect_op_fails(ctx, [&] { return tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 1 << 20); }, "out of memory");
    // found by graph_fuzz: with a 0 dim the other dims were unbounded, and tsr_nelements /
    // tsr_nrows overflowed int64 multiplying them (here 2^20 * 2^20 * 2^31 * 0)
    expect_op_fails(ctx, [&] { return tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 1 << 20, 1 << 20, INT64_C(1) << 31, 0); }, "too large");
    expect_op_fails(ctx, [&] { return tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 0, INT64_C(1) << 40, INT64_C(1) << 40); }, "too large");
    tsr::context nodata(4 * tsr_tensor_overhead(), nullptr, true);
    tsr_tensor * empty = tsr_new_tensor_4d(nodata, TSR_TYPE_F32, 0, INT64_C(1) << 20, INT64_C(1) << 20, INT64_C(1) << 10);
    REQUIRE(empty);  // empty with 2^50 rows still counts them in int64
    CHECK(tsr_nelements(empty) == 0);
    CHECK(tsr_nrows(empty) == INT64_C(1) << 50);
}

TEST_CASE("names, flags and op params", "[tensor]") {
    tsr::context ctx(1 << 16);
    tsr_tensor * a = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    CHECK(std::string(tsr_get_name(a)).empty());
    CHECK(tsr_set_name(a, "weights") == a);
    CHECK(std::string(tsr_get_name(a)) == "weights");
    tsr_format_name(a, "blk.%d.%s", 3, "attn");
    CHECK(std::string(a->name) == "blk.3.attn");
    const std::string longname(200, 'x');
    tsr_set_name(a, longname.c_str());
    CHECK(std::string(a->name) == std::string(TSR_MAX_NAME - 1, 'x'));

    tsr_set_input(a);
    tsr_set_output(a);
    CHECK(a->flags == (TSR_TENSOR_FLAG_INPUT | TSR_TENSOR_FLAG_OUTPUT));
    tsr_set_param(a);
    CHECK((a->flags & TSR_TENSOR_FLAG_PARAM) != 0);

    tsr_set_op_params_i32(a, 2, -5);
    tsr_set_op_params_f32(a, 3, 1.5f);
    CHECK(tsr_get_op_params_i32(a, 2) == -5);
    CHECK(tsr_get_op_params_f32(a, 3) == 1.5f);
    tsr_set_op_params_i32(a, 16, 9);  // out of range: ignored
    CHECK(tsr_get_op_params_i32(a, 16) == 0);
    const int32_t p[3] = {7, 8, 9};
    CHECK(tsr_set_op_params(a, p, sizeof(p)));
    CHECK(tsr_get_op_params_i32(a, 1) == 8);
    char big[TSR_MAX_OP_PARAMS + 4] = {0};
    CHECK_FALSE(tsr_set_op_params(a, big, sizeof(big)));
}

TEST_CASE("element access in logical order, any layout", "[tensor]") {
    tsr::context ctx(1 << 16);
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 3, 2);
    for (int i = 0; i < 6; i++) tsr_set_f32_1d(a, i, (float)(i * 10));
    CHECK(((float *)a->data)[4] == 40.0f);
    CHECK(tsr_get_f32_nd(a, 1, 1, 0, 0) == 40.0f);

    tsr_tensor * t = tsr_transpose(ctx, a);  // [2, 3]: t[i0, i1] = a[i1, i0]
    REQUIRE(t);
    CHECK(tsr_get_f32_nd(t, 1, 2, 0, 0) == 50.0f);
    CHECK(tsr_get_f32_1d(t, 1) == 30.0f);  // (1, 0) -> a(0, 1)
    tsr_set_f32_1d(t, 2, -1.0f);           // (0, 1) -> a(1, 0)
    CHECK(((float *)a->data)[1] == -1.0f);

    tsr_tensor * h = tsr_new_tensor_1d(ctx, TSR_TYPE_F16, 4);
    tsr_set_f32_1d(h, 3, 0.333f);
    CHECK(tsr_get_f32_1d(h, 3) == tsr_fp16_to_fp32(tsr_fp32_to_fp16(0.333f)));
    tsr_tensor * b = tsr_new_tensor_1d(ctx, TSR_TYPE_BF16, 4);
    tsr_set_f32_1d(b, 0, 3.0f);
    CHECK(tsr_get_f32_1d(b, 0) == 3.0f);
    tsr_tensor * i = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 4);
    tsr_set_f32_1d(i, 1, 42.0f);
    CHECK(((int32_t *)i->data)[1] == 42);
    CHECK(tsr_get_f32_1d(i, 1) == 42.0f);

    tsr_tensor * q = tsr_new_tensor_1d(ctx, TSR_TYPE_Q8_0, 64);
    float src[64];
    for (int k = 0; k < 64; k++) src[k] = (float)(k - 32);
    REQUIRE(tsr_from_float_row(TSR_TYPE_Q8_0, src, q->data, 64));
    CHECK(std::fabs(tsr_get_f32_1d(q, 40) - 8.0f) < 0.2f);
    tsr_clear_error();
    tsr_set_f32_1d(q, 0, 1.0f);  // no single-element writes into blocks
    CHECK(std::strlen(tsr_last_error()) > 0);

    tsr_clear_error();
    CHECK(std::isnan(tsr_get_f32_1d(a, 6)));
    CHECK(std::strlen(tsr_last_error()) > 0);
    tsr::context na(1 << 12, nullptr, true);
    tsr_tensor * nd = tsr_new_tensor_1d(na, TSR_TYPE_F32, 4);
    tsr_clear_error();
    CHECK(std::isnan(tsr_get_f32_1d(nd, 0)));
    CHECK_THAT(std::string(tsr_last_error()), Catch::Matchers::Contains("no host data"));
}

TEST_CASE("views: strides, offsets, data pointers", "[tensor][view]") {
    tsr::context ctx(1 << 16);
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 8, 6, 4);  // 768 bytes
    tsr_set_name(a, "a");
    char * base = (char *)a->data;

    tsr_tensor * v1 = tsr_view_1d(ctx, a, 5, 12);
    REQUIRE(v1);
    CHECK(same_shape(v1, 5));
    CHECK(v1->nb[0] == 4);
    CHECK(v1->nb[1] == 20);
    CHECK(v1->view_src == a);
    CHECK(v1->view_offs == 12);
    CHECK(v1->data == base + 12);
    CHECK(v1->op == TSR_OP_VIEW);
    CHECK(v1->src[0] == a);
    CHECK(std::string(v1->name) == "a (view)");
    size_t offs = 0;
    std::memcpy(&offs, v1->op_params, sizeof(offs));
    CHECK(offs == 12);

    tsr_tensor * v2 = tsr_view_2d(ctx, a, 4, 6, a->nb[1], 16);  // columns 4..7 of every row of plane 0
    REQUIRE(v2);
    CHECK(same_shape(v2, 4, 6));
    CHECK(v2->nb[1] == 32);
    CHECK(v2->nb[2] == 192);
    CHECK_FALSE(tsr_is_contiguous(v2));
    CHECK(tsr_nbytes(v2) == 5 * 32 + 16);

    tsr_tensor * v3 = tsr_view_3d(ctx, a, 8, 3, 2, a->nb[1] * 2, a->nb[2] * 2, a->nb[2]);  // every other row/plane from plane 1
    REQUIRE(v3);
    CHECK(v3->nb[1] == 64);
    CHECK(v3->nb[2] == 384);
    CHECK(v3->data == base + 192);

    tsr_tensor * v4 = tsr_view_4d(ctx, a, 8, 6, 2, 2, a->nb[1], a->nb[2], 2 * a->nb[2], 0);
    REQUIRE(v4);
    CHECK(same_shape(v4, 8, 6, 2, 2));
    CHECK(v4->nb[3] == 384);

    // a view of a view points at the root and adds up offsets
    tsr_tensor * vv = tsr_view_1d(ctx, v2, 2, 8);
    REQUIRE(vv);
    CHECK(vv->view_src == a);
    CHECK(vv->view_offs == 24);
    CHECK(vv->data == base + 24);
    CHECK(vv->src[0] == v2);

    tsr_tensor * plain = tsr_view_tensor(ctx, a);
    REQUIRE(plain);
    CHECK(plain->op == TSR_OP_NONE);
    CHECK(plain->view_src == a);
    CHECK(plain->data == a->data);
    CHECK(tsr_are_same_stride(plain, a));
    CHECK(tsr_is_view(plain));
}

TEST_CASE("views outside their source are errors", "[tensor][view][error]") {
    tsr::context ctx(1 << 16);
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 8, 6);  // 192 bytes
    expect_op_fails(ctx, [&] { return tsr_view_1d(ctx, a, 48, 4); }, "outside");        // 196 > 192
    expect_op_fails(ctx, [&] { return tsr_view_1d(ctx, a, 1, 192); }, "outside");
    expect_op_fails(ctx, [&] { return tsr_view_1d(ctx, a, 1, (size_t)-4); }, "outside");
    expect_op_fails(ctx, [&] { return tsr_view_2d(ctx, a, 8, 6, 36, 0); }, "outside");   // 5*36+32 > 192
    expect_op_fails(ctx, [&] { return tsr_view_3d(ctx, a, 8, 3, 2, 32, 128, 0); }, "outside");
    expect_op_fails(ctx, [&] { return tsr_view_1d(ctx, nullptr, 1, 0); });
    expect_op_fails(ctx, [&] { return tsr_view_1d(ctx, a, -1, 0); });
    CHECK(tsr_view_1d(ctx, a, 48, 0) != nullptr);  // exactly the whole source is fine
    // found by graph_fuzz: a view at offset 2 of an f32 tensor made the kernels load floats
    // from misaligned addresses (undefined, and a fault on some CPUs)
    expect_op_fails(ctx, [&] { return tsr_view_1d(ctx, a, 4, 2); }, "multiples of its element size");
    expect_op_fails(ctx, [&] { return tsr_view_2d(ctx, a, 4, 2, 18, 0); }, "multiples of its element size");
    tsr_tensor * q8 = tsr_new_tensor_2d(ctx, TSR_TYPE_Q8_0, 64, 2);  // 2 blocks of 34 bytes a row
    expect_op_fails(ctx, [&] { return tsr_view_1d(ctx, q8, 32, 17); }, "multiples of its element size");
    CHECK(tsr_view_1d(ctx, q8, 32, 34) != nullptr);  // the second block
    CHECK(tsr_view_1d(ctx, a, 1, 188) != nullptr);
    tsr_tensor * part = tsr_view_1d(ctx, a, 8, 32);
    expect_op_fails(ctx, [&] { return tsr_view_1d(ctx, part, 9, 0); }, "outside");  // bigger than the view
    tsr_tensor * q = tsr_new_tensor_1d(ctx, TSR_TYPE_Q8_0, 64);
    expect_op_fails(ctx, [&] { return tsr_view_1d(ctx, q, 16, 0); }, "block size");
    CHECK(tsr_view_1d(ctx, q, 32, 34) != nullptr);
}

TEST_CASE("reshape, permute, transpose", "[tensor][view]") {
    tsr::context ctx(1 << 16);
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 4, 3, 2);
    tsr_set_name(a, "a");

    tsr_tensor * r = tsr_reshape_2d(ctx, a, 6, 4);
    REQUIRE(r);
    CHECK(same_shape(r, 6, 4));
    CHECK(r->nb[1] == 24);
    CHECK(r->op == TSR_OP_RESHAPE);
    CHECK(r->src[0] == a);
    CHECK(r->view_src == a);
    CHECK(r->data == a->data);
    CHECK(std::string(r->name) == "a (reshaped)");
    CHECK(same_shape(tsr_reshape_1d(ctx, a, 24), 24));
    CHECK(same_shape(tsr_reshape_3d(ctx, a, 2, 2, 6), 2, 2, 6));
    CHECK(same_shape(tsr_reshape_4d(ctx, a, 2, 2, 3, 2), 2, 2, 3, 2));
    tsr_tensor * shape = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, 12, 2);
    CHECK(same_shape(tsr_reshape(ctx, a, shape), 12, 2));
    expect_op_fails(ctx, [&] { return tsr_reshape_2d(ctx, a, 5, 5); }, "elements");

    tsr_tensor * p = tsr_permute(ctx, a, 2, 0, 1, 3);  // dim0 -> 2, dim1 -> 0, dim2 -> 1
    REQUIRE(p);
    CHECK(same_shape(p, 3, 2, 4));
    CHECK(p->nb[0] == 16);
    CHECK(p->nb[1] == 48);
    CHECK(p->nb[2] == 4);
    CHECK(p->op == TSR_OP_PERMUTE);
    CHECK(tsr_get_op_params_i32(p, 0) == 2);
    CHECK(tsr_get_op_params_i32(p, 1) == 0);
    CHECK(tsr_is_permuted(p));
    CHECK_FALSE(tsr_is_contiguous(p));
    expect_op_fails(ctx, [&] { return tsr_reshape_1d(ctx, p, 24); }, "contiguous");
    expect_op_fails(ctx, [&] { return tsr_permute(ctx, a, 0, 0, 1, 2); }, "repeat");
    expect_op_fails(ctx, [&] { return tsr_permute(ctx, a, 0, 1, 2, 4); }, "range");

    tsr_tensor * t = tsr_transpose(ctx, a);
    REQUIRE(t);
    CHECK(same_shape(t, 3, 4, 2));
    CHECK(t->nb[0] == 16);
    CHECK(t->nb[1] == 4);
    CHECK(tsr_is_transposed(t));
    CHECK(t->op == TSR_OP_TRANSPOSE);
    CHECK(std::string(t->name) == "a (transposed)");
    CHECK(tsr_nbytes(t) == tsr_nbytes(a));

    tsr_tensor * tt = tsr_transpose(ctx, t);
    CHECK(tsr_are_same_stride(tt, a));
    CHECK(tsr_is_contiguous(tt));
    CHECK(tt->view_src == a);
}

TEST_CASE("can_repeat and contiguity helpers", "[tensor]") {
    tsr::context ctx(1 << 16);
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 6, 4, 2);
    tsr_tensor * b = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 3);
    tsr_tensor * c = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 6, 1, 2);
    tsr_tensor * d = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    CHECK(tsr_can_repeat(b, a));
    CHECK(tsr_can_repeat(c, a));
    CHECK_FALSE(tsr_can_repeat(d, a));
    CHECK_FALSE(tsr_can_repeat(a, b));
    tsr_tensor * rows = tsr_view_2d(ctx, a, 3, 4, a->nb[1], 0);
    CHECK(tsr_is_contiguous_rows(rows));
    CHECK_FALSE(tsr_is_contiguous(rows));
}

// Sizes computed from user input never wrap: a view whose extent overflows size_t, or a
// reshape whose element count overflows int64, is an error that consumes no arena memory.
TEST_CASE("views and reshapes: overflowing sizes are errors", "[tensor][view]") {
    tsr::context ctx(1 << 20);
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 16, 16);
    REQUIRE(a);
    const size_t used = tsr_used_mem(ctx);
    tsr_clear_error();
    CHECK(tsr_view_2d(ctx, a, 4, INT64_C(1) << 40, SIZE_MAX / 2, 0) == nullptr);
    CHECK(std::string(tsr_last_error()).size() > 0);
    tsr_clear_error();
    CHECK(tsr_reshape_4d(ctx, a, INT64_C(1) << 32, INT64_C(1) << 32, 16, 16) == nullptr);
    CHECK(std::string(tsr_last_error()).size() > 0);
    CHECK(tsr_used_mem(ctx) == used);
}
