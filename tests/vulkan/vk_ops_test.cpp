// What the Vulkan backend declines. Every op it runs is compared with the CPU backend in
// tests/backend_ops (the shared table of op cases).
#include "vk_util.h"

TEST_CASE("vulkan supports_op declines what it cannot run", "[vulkan][ops]") {
    VK_OR_SKIP();
    tsr_init_params ip{64 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true};
    tsr_context * ctx = tsr_init(ip);
    REQUIRE(ctx);
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 16, 4);
    tsr_tensor * bf = tsr_new_tensor_2d(ctx, TSR_TYPE_BF16, 16, 4);
    CHECK(tsr_backend_supports_op(vkt::vk(), tsr_add(ctx, a, a)));
    CHECK(tsr_backend_supports_op(vkt::vk(), tsr_mul_mat(ctx, a, a)));
    CHECK_FALSE(tsr_backend_supports_op(vkt::vk(), tsr_argsort(ctx, a, TSR_SORT_ORDER_ASC)));
    CHECK_FALSE(tsr_backend_supports_op(vkt::vk(), tsr_sum_rows(ctx, a)));
    CHECK_FALSE(tsr_backend_supports_op(vkt::vk(), tsr_mul_mat(ctx, bf, a)));
    CHECK_FALSE(tsr_backend_supports_op(vkt::vk(), tsr_gelu(ctx, bf)));
    tsr_free(ctx);
}

// backend_ops counts a declined case without failing it: this pins what Vulkan claims of
// issue 17's model ops (docs/ops.md's backend table), so a lost claim is a failure.
TEST_CASE("vulkan supports_op claims the model-family ops it runs", "[vulkan][ops]") {
    VK_OR_SKIP();
    tsr_init_params ip{64 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true};
    tsr_context * ctx = tsr_init(ip);
    REQUIRE(ctx);
    tsr_tensor * x = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 64, 2, 3);
    tsr_tensor * pos = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 12);
    tsr_tensor * ids = tsr_new_tensor_2d(ctx, TSR_TYPE_I32, 2, 3);
    tsr_tensor * k1 = tsr_new_tensor_3d(ctx, TSR_TYPE_F16, 3, 4, 2);
    tsr_tensor * kdw = tsr_new_tensor_4d(ctx, TSR_TYPE_F16, 3, 3, 1, 2);
    tsr_tensor * img = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 9, 7, 2, 1);
    tsr_tensor * sig = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 11, 2, 1);
    tsr_tensor * t = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 5);
    tsr_tensor * sx = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 3 + 4, 6, 1);
    tsr_tensor * cw = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 4, 6);
    int sections[4] = {8, 4, 4, 0};
    for (tsr_type wt : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_Q4_K, TSR_TYPE_Q6_K}) {
        INFO("mul_mat_id " << tsr_type_name(wt));
        CHECK(tsr_backend_supports_op(vkt::vk(), tsr_mul_mat_id(ctx, tsr_new_tensor_3d(ctx, wt, 256, 5, 4),
                                                                 tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 256, 1, 3), ids)));
    }
    for (int mode : {TSR_ROPE_TYPE_MROPE, TSR_ROPE_TYPE_IMROPE, TSR_ROPE_TYPE_VISION}) {
        INFO("rope_multi mode " << mode);
        CHECK(tsr_backend_supports_op(vkt::vk(), tsr_rope_multi(ctx, x, pos, nullptr, mode == TSR_ROPE_TYPE_VISION ? 32 : 48, sections,
                                                                mode, 4096, 1e4f, 1, 0, 1, 32, 1)));
    }
    CHECK(tsr_backend_supports_op(vkt::vk(), tsr_conv_transpose_1d(ctx, k1, sig, 2, 1, 1)));
    CHECK(tsr_backend_supports_op(vkt::vk(), tsr_conv_2d_dw_direct(ctx, kdw, img, 2, 1, 1, 1, 1, 2)));
    CHECK(tsr_backend_supports_op(vkt::vk(), tsr_timestep_embedding(ctx, t, 15, 10000)));
    CHECK(tsr_backend_supports_op(vkt::vk(), tsr_pad_ext(ctx, x, 1, 2, 0, 1, 1, 0, 0, 0)));
    CHECK(tsr_backend_supports_op(vkt::vk(), tsr_pad_reflect_1d(ctx, x, 3, 5)));
    CHECK(tsr_backend_supports_op(vkt::vk(), tsr_roll(ctx, x, 5, -1, 2, 0)));
    CHECK(tsr_backend_supports_op(vkt::vk(), tsr_ssm_conv(ctx, sx, cw)));
    // what it leaves to the CPU: bf16 experts, f16 roll
    CHECK_FALSE(tsr_backend_supports_op(vkt::vk(), tsr_mul_mat_id(ctx, tsr_new_tensor_3d(ctx, TSR_TYPE_BF16, 256, 5, 4),
                                                                   tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 256, 1, 3), ids)));
    CHECK_FALSE(tsr_backend_supports_op(vkt::vk(), tsr_roll(ctx, tsr_new_tensor_1d(ctx, TSR_TYPE_F16, 8), 1, 0, 0, 0)));
    tsr_free(ctx);
}
