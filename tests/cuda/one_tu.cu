// Everything in one nvcc translation unit, as a TSR_STATIC user builds it (tessera-cuda.h,
// case 2): the CUDA header first, so the core is compiled by its implementation block's
// catch-up, then the allocators and GGUF. Runs with or without a GPU.
#define TSR_STATIC
#define TSR_IMPLEMENTATION
#include "tessera-cuda.h"
#include "tessera/alloc.h"
#include "tessera/gguf.h"

#include <cstdio>

int main() {
    tsr::context ctx(8 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true);
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 4, 3);
    tsr_tensor * s = tsr_sum_rows(ctx, a);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    if (!s || !gf || !tsr_build_forward_expand(gf, s) || tsr_graph_n_nodes(gf) != 1) {
        std::fprintf(stderr, "one nvcc TU: graph failed: %s\n", tsr_last_error());
        return 1;
    }
    const int n = tsr_backend_cuda_get_device_count();
    // the CUDA part registered itself from its own static (no TSR_HAVE_CUDA path here)
    if (tsr_backend_reg_by_name("CUDA") != tsr_backend_cuda_reg() || tsr_backend_reg_dev_count(tsr_backend_cuda_reg()) != (size_t) n) {
        std::fprintf(stderr, "one nvcc TU: the registry lacks the CUDA kind or its %d devices: %s\n", n, tsr_last_error());
        return 1;
    }
    if (n > 0) {
        tsr::backend cuda(tsr_backend_cuda_init(0));
        tsr::gallocr galloc(tsr_backend_get_default_buffer_type(cuda));
        if (!cuda.get() || !tsr_gallocr_alloc_graph(galloc, gf)) { std::fprintf(stderr, "%s\n", tsr_last_error()); return 1; }
        const float x[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
        float y[3] = {0, 0, 0};
        tsr_backend_tensor_set(a, x, 0, sizeof x);
        if (tsr_backend_graph_compute(cuda, gf) != TSR_STATUS_SUCCESS) { std::fprintf(stderr, "%s\n", tsr_last_error()); return 1; }
        tsr_backend_tensor_get(s, y, 0, sizeof y);
        if (y[0] != 10 || y[1] != 26 || y[2] != 42) { std::fprintf(stderr, "sum_rows: %g %g %g\n", y[0], y[1], y[2]); return 1; }
    }
    std::printf("one nvcc TU: ok (%d CUDA device(s))\n", n);
    return 0;
}
