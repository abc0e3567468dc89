/*
 * simple.c - the smallest complete tessera program, in C99.
 *
 * Builds y = silu(W x + b) for a batch of inputs, plans the activations with gallocr,
 * runs the graph on the CPU backend and checks the result against plain C loops.
 * The implementation of tessera is compiled once, in one C++17 file (in this tree
 * tests/support/tessera_impl.cpp); README "Using tessera" gives the link line for C.
 */
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { N_IN = 64, N_OUT = 32, N_BATCH = 8 };

static float ref_silu(float x) { return x / (1.0f + expf(-x)); }

int main(void) {
    /* 1. Metadata only: 4 tensors + 3 ops + one graph, sized exactly. */
    struct tsr_init_params params = { 16 * tsr_tensor_overhead() + tsr_graph_overhead(), NULL, true };
    struct tsr_context * ctx = tsr_init(params);
    if (!ctx) { fprintf(stderr, "tsr_init: %s\n", tsr_last_error()); return 1; }

    struct tsr_tensor * W = tsr_set_name(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, N_IN, N_OUT), "W");
    struct tsr_tensor * b = tsr_set_name(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, N_OUT), "b");
    struct tsr_tensor * x = tsr_set_name(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, N_IN, N_BATCH), "x");
    tsr_set_input(x);

    struct tsr_tensor * y = tsr_silu(ctx, tsr_add(ctx, tsr_mul_mat(ctx, W, x), b));
    if (!y) { fprintf(stderr, "graph construction: %s\n", tsr_last_error()); return 1; }
    tsr_set_name(y, "y");
    tsr_set_output(y);

    struct tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_build_forward_expand(gf, y);

    /* 2. Weights in their own buffer; activations (x, y, intermediates) planned by gallocr. */
    tsr_backend_t backend = tsr_backend_cpu_init();
    if (!backend) { fprintf(stderr, "cpu backend: %s\n", tsr_last_error()); return 1; }

    /* W and b are the weights: place them in a WEIGHTS buffer via a tallocr. */
    size_t wbytes = tsr_backend_buft_get_alloc_size(tsr_backend_get_default_buffer_type(backend), W) + 64 +
                    tsr_backend_buft_get_alloc_size(tsr_backend_get_default_buffer_type(backend), b) + 64;
    tsr_backend_buffer_t wbuf = tsr_backend_alloc_buffer(backend, wbytes);
    tsr_backend_buffer_set_usage(wbuf, TSR_BUFFER_USAGE_WEIGHTS);
    struct tsr_tallocr talloc = tsr_tallocr_new(wbuf);
    if (!tsr_tallocr_alloc(&talloc, W) || !tsr_tallocr_alloc(&talloc, b)) {
        fprintf(stderr, "tallocr: %s\n", tsr_last_error());
        return 1;
    }

    tsr_gallocr_t galloc = tsr_gallocr_new(tsr_backend_get_default_buffer_type(backend));
    if (!tsr_gallocr_alloc_graph(galloc, gf)) { fprintf(stderr, "gallocr: %s\n", tsr_last_error()); return 1; }

    /* 3. Data in, compute, data out. */
    static float w[N_OUT][N_IN], bias[N_OUT], in[N_BATCH][N_IN], out[N_BATCH][N_OUT];
    for (int o = 0; o < N_OUT; o++) {
        bias[o] = 0.01f * (float)o;
        for (int i = 0; i < N_IN; i++) w[o][i] = (float)((o * 7 + i * 3) % 11 - 5) / 16.0f;
    }
    for (int n = 0; n < N_BATCH; n++)
        for (int i = 0; i < N_IN; i++) in[n][i] = (float)((n + i) % 5) / 4.0f - 0.5f;
    tsr_backend_tensor_set(W, w, 0, sizeof w);
    tsr_backend_tensor_set(b, bias, 0, sizeof bias);
    tsr_backend_tensor_set(x, in, 0, sizeof in);

    enum tsr_status st = tsr_backend_graph_compute(backend, gf);
    if (st != TSR_STATUS_SUCCESS) { fprintf(stderr, "compute: %s\n", tsr_last_error()); return 1; }
    tsr_backend_tensor_get(y, out, 0, sizeof out);

    /* 4. Show the graph and its memory plan, and check the numbers. */
    tsr_graph_print(gf, stdout);
    const struct tsr_plan * plan = tsr_gallocr_get_plan(galloc);
    printf("\ncompute buffer: %zu bytes planned, lower bound %zu, %zu without reuse\n",
           plan->buffers[0].planned_size, plan->buffers[0].lower_bound, plan->buffers[0].no_reuse_size);
    for (int i = 0; i < plan->n_tensors; i++) {
        const struct tsr_plan_tensor * t = &plan->tensors[i];
        printf("  %-12s offset %8zu size %8zu steps %d..%d%s\n", t->name, t->offset, t->size, t->first, t->last,
               t->inplace ? " (in place)" : "");
    }

    double max_err = 0.0;
    for (int n = 0; n < N_BATCH; n++)
        for (int o = 0; o < N_OUT; o++) {
            float acc = bias[o];
            for (int i = 0; i < N_IN; i++) acc += w[o][i] * in[n][i];
            double err = fabs((double)ref_silu(acc) - (double)out[n][o]);
            if (err > max_err) max_err = err;
        }
    printf("\ny[0][0..3] = %.5f %.5f %.5f %.5f   max |error| vs plain C = %.2e\n", out[0][0], out[0][1], out[0][2],
           out[0][3], max_err);

    tsr_gallocr_free(galloc);
    tsr_backend_buffer_free(wbuf);
    tsr_backend_free(backend);
    tsr_free(ctx);
    return max_err < 1e-4 ? 0 : 1;
}
