// A program outside the tessera tree, built against the installed package.
#define TSR_IMPLEMENTATION
#include <tessera/tessera.h>
#include <tessera/backend.h>
#include <tessera/alloc.h>
#include <tessera-cpu.h>
#include <cstdio>

int main() {
    tsr::context ctx(8 * tsr_tensor_overhead() + 3 * TSR_PAD(16 * sizeof(float), TSR_MEM_ALIGN) + tsr_graph_overhead());
    if (!ctx.ok()) { std::fprintf(stderr, "%s\n", tsr_last_error()); return 1; }
    tsr_tensor * a = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 16);
    tsr_tensor * b = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 16);
    for (int i = 0; i < 16; i++) { tsr_set_f32_1d(a, i, (float)i); tsr_set_f32_1d(b, i, 2.0f); }
    tsr_tensor * c = tsr_mul(ctx, a, b);
    if (!c) { std::fprintf(stderr, "%s\n", tsr_last_error()); return 1; }
    tsr_cgraph * gf = tsr_new_graph(ctx);
    if (!gf || !tsr_build_forward_expand(gf, c)) { std::fprintf(stderr, "%s\n", tsr_last_error()); return 1; }
    std::printf("consumer: graph with %d node(s)\n", tsr_graph_n_nodes(gf));
    return tsr_graph_n_nodes(gf) == 1 ? 0 : 1;
}
