/* A strict C99 program using tessera's API headers; linked with one C++ impl TU.
 * Compiled with -std=c99 -Wall -Wextra -pedantic -Werror. Exits non-zero on failure. */
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera/sched.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond)                                                    \
    do {                                                               \
        if (!(cond)) {                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                \
        }                                                              \
    } while (0)

int main(void) {
    struct tsr_init_params params;
    struct tsr_context * ctx;
    struct tsr_tensor * a, * b, * c, * bad;
    struct tsr_cgraph * gf;
    struct tsr_cgraph view;

    params.mem_size = 4 * tsr_tensor_overhead() + 4 * TSR_MEM_ALIGN + tsr_graph_overhead(); /* a, b, c, the 1-d tensor */
    params.mem_buffer = NULL;
    params.no_alloc = false;
    ctx = tsr_init(params);
    CHECK(ctx != NULL);
    if (!ctx) return 1;

    a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 4, 3);
    b = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    CHECK(a != NULL && b != NULL);
    tsr_set_name(a, "a");
    tsr_set_f32_1d(a, 5, 2.5f);
    CHECK(tsr_get_f32_nd(a, 1, 1, 0, 0) == 2.5f);
    c = tsr_add(ctx, a, b);
    CHECK(c != NULL && c->ne[0] == 4 && c->ne[1] == 3 && c->op == TSR_OP_ADD);

    bad = tsr_mul_mat(ctx, a, tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 5));
    CHECK(bad == NULL && strlen(tsr_last_error()) > 0);

    gf = tsr_new_graph(ctx);
    CHECK(gf != NULL);
    CHECK(tsr_build_forward_expand(gf, c));
    CHECK(tsr_graph_n_nodes(gf) == 1 && tsr_graph_n_leafs(gf) == 2);
    CHECK(tsr_graph_node(gf, -1) == c);
    view = tsr_graph_view(gf, 0, 1);
    CHECK(tsr_graph_n_nodes(&view) == 1);
    CHECK(tsr_fp16_to_fp32(tsr_fp32_to_fp16(0.5f)) == 0.5f);
    CHECK(strcmp(tsr_type_name(TSR_TYPE_Q8_0), "q8_0") == 0);
    CHECK(tsr_backend_sched_get_n_splits(NULL) == 0);

    tsr_free(ctx);
    if (failures == 0) printf("c99 consumer: ok\n");
    return failures == 0 ? 0 : 1;
}
