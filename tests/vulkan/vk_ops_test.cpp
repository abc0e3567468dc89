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
