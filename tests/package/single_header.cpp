// The committed single header (include/single/tessera.h) alone (no include paths into the tree) builds a graph,
// plans it and computes it on the CPU; the result is checked by hand.
#define TSR_IMPLEMENTATION
#include "tessera.h"   // include/single/tessera.h
#include <cmath>
#include <cstdio>

int main() {
    tsr::context ctx(16 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true);
    tsr_tensor * a = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 8);
    tsr_tensor * b = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 8);
    tsr_set_input(a);
    tsr_set_input(b);
    tsr_tensor * c = tsr_scale(ctx, tsr_add(ctx, a, b), 0.5f);
    tsr_set_output(c);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_build_forward_expand(gf, c);
    tsr::backend cpu(tsr_backend_cpu_init());
    tsr::gallocr galloc(tsr_backend_get_default_buffer_type(cpu));
    if (!tsr_gallocr_alloc_graph(galloc, gf)) { std::fprintf(stderr, "%s\n", tsr_last_error()); return 1; }
    float x[8], y[8], z[8];
    for (int i = 0; i < 8; i++) { x[i] = (float)i; y[i] = 10.0f; }
    tsr_backend_tensor_set(a, x, 0, sizeof x);
    tsr_backend_tensor_set(b, y, 0, sizeof y);
    if (tsr_backend_graph_compute(cpu, gf) != TSR_STATUS_SUCCESS) { std::fprintf(stderr, "%s\n", tsr_last_error()); return 1; }
    tsr_backend_tensor_get(c, z, 0, sizeof z);
    for (int i = 0; i < 8; i++) {
        if (std::fabs(z[i] - (i + 10) * 0.5f) > 1e-6f) { std::fprintf(stderr, "z[%d] = %g\n", i, z[i]); return 1; }
    }
    std::printf("single header: ok\n");
    return 0;
}
