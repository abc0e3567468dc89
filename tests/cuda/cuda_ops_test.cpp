// CUDA backend: what only CUDA has among the ops (TF32 GEMM). Every op against the CPU
// backend is in tests/backend_ops (the shared table of op cases). Skips with a WARN where
// there is no CUDA device.
#include "cuda_test_util.h"

using namespace cudatest;

TEST_CASE("cuda ops: mul_mat F32 with TF32 allowed, within its documented tolerance", "[cuda][device][ops][mul_mat]") {
    CUDA_OR_SKIP(be);
    REQUIRE(tsr_backend_cuda_set_allow_tf32(be, true));
    compare_backends(be, cpu(), [](tsr_context * ctx, graph_inputs & in) {
        tsr_tensor * a = in.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 512, 96));
        tsr_tensor * b = in.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 512, 80));
        return tsr_mul_mat(ctx, a, b);
    }, 1e-4);
    REQUIRE(tsr_backend_cuda_set_allow_tf32(be, false));
}
