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

// Token embeddings, decode (mat-vec) and prompt (GEMM) of every quantized GGUF weight type;
// their results against the CPU backend are the mul_mat / get_rows cases of tests/backend_ops.
TEST_CASE("vulkan runs get_rows, mat-vec and GEMM of every quantized weight type", "[vulkan][ops]") {
    VK_OR_SKIP();
    tsr_init_params ip{64 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true};
    tsr_context * ctx = tsr_init(ip);
    REQUIRE(ctx);
    tsr_tensor * idx = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 3);
    tsr_tensor * vec = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 256, 1);
    tsr_tensor * mat = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 256, 9);
    for (enum tsr_type t : {TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL,
                            TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K}) {
        INFO(tsr_type_name(t));
        tsr_tensor * w = tsr_new_tensor_2d(ctx, t, 256, 5);
        CHECK(tsr_backend_supports_op(vkt::vk(), tsr_get_rows(ctx, w, idx)));
        CHECK(tsr_backend_supports_op(vkt::vk(), tsr_mul_mat(ctx, w, vec)));
        CHECK(tsr_backend_supports_op(vkt::vk(), tsr_mul_mat(ctx, w, mat)));
    }
    tsr_free(ctx);
}
