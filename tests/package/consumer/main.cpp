// A program outside the tessera tree, built against the installed package (CMake or
// pkg-config): it compiles the implementation itself and computes a small graph.
#define TSR_IMPLEMENTATION
#include <tessera/tessera.h>
#include <tessera/backend.h>
#include <tessera/alloc.h>
#include <tessera-cpu.h>
#ifdef TSR_HAVE_VULKAN
#include <tessera-vulkan.h>
#endif
#include <cmath>
#include <cstdio>

int main() {
    tsr::context ctx(8 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true);
    tsr_tensor * a = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 16);
    tsr_tensor * b = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 16);
    tsr_set_input(a);
    tsr_set_input(b);
    tsr_tensor * c = tsr_mul(ctx, a, b);
    tsr_set_output(c);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    if (!c || !gf || !tsr_build_forward_expand(gf, c)) { std::fprintf(stderr, "%s\n", tsr_last_error()); return 1; }
    tsr::backend cpu(tsr_backend_cpu_init());
    tsr::gallocr galloc(tsr_backend_get_default_buffer_type(cpu));
    if (!tsr_gallocr_alloc_graph(galloc, gf)) { std::fprintf(stderr, "%s\n", tsr_last_error()); return 1; }
    float x[16], y[16], z[16];
    for (int i = 0; i < 16; i++) { x[i] = (float)i; y[i] = 2.0f; }
    tsr_backend_tensor_set(a, x, 0, sizeof x);
    tsr_backend_tensor_set(b, y, 0, sizeof y);
    if (tsr_backend_graph_compute(cpu, gf) != TSR_STATUS_SUCCESS) { std::fprintf(stderr, "%s\n", tsr_last_error()); return 1; }
    tsr_backend_tensor_get(c, z, 0, sizeof z);
    for (int i = 0; i < 16; i++) {
        if (std::fabs(z[i] - 2.0f * (float)i) > 0.0f) { std::fprintf(stderr, "z[%d] = %g\n", i, z[i]); return 1; }
    }
#ifdef TSR_HAVE_VULKAN
    std::printf("consumer: %d Vulkan device(s)\n", tsr_backend_vk_get_device_count());
#endif
    std::printf("consumer: ok\n");
    return 0;
}
