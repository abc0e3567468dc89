// The checks every include_order/order_*.cpp runs after its own sequence of includes: it
// touches every part (core, backend, alloc, gguf, sched, CPU, Vulkan where compiled in), so a part
// whose implementation the order dropped fails to link, and a wrong result fails the run.
// This file includes no tessera header: each order must have declared everything itself.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

static int tsr_order_failures = 0;
#define ORDER_CHECK(cond)                                                                     \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            std::fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
                         tsr_last_error());                                                   \
            tsr_order_failures++;                                                             \
        }                                                                                     \
    } while (0)

// y = relu(W x) + b for W [4 x 3], x [4], b [3] on the CPU backend, planned by gallocr,
// against the same sums done by hand in double; then a GGUF round trip in memory.
static int run_order_program(const char * order) {
    const int K = 4, M = 3;
    tsr_context * ctx = tsr_init(tsr_init_params{16 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true});
    ORDER_CHECK(ctx != nullptr);
    if (!ctx) return 1;
    tsr_tensor * W = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, K, M);
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, K);
    tsr_tensor * b = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, M);
    tsr_set_input(x);
    tsr_tensor * y = tsr_add(ctx, tsr_relu(ctx, tsr_mul_mat(ctx, W, x)), b);
    tsr_set_output(y);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    ORDER_CHECK(tsr_build_forward_expand(gf, y));

    tsr_backend_t cpu = tsr_backend_cpu_init();
    ORDER_CHECK(cpu != nullptr);
    tsr_backend_buffer_t weights = tsr_backend_alloc_buffer(cpu, 2 * 64 + 64);
    tsr_tallocr ta = tsr_tallocr_new(weights);
    ORDER_CHECK(tsr_tallocr_alloc(&ta, W) && tsr_tallocr_alloc(&ta, b));
    tsr_gallocr_t galloc = tsr_gallocr_new(tsr_backend_get_default_buffer_type(cpu));
    ORDER_CHECK(tsr_gallocr_alloc_graph(galloc, gf));

    const float w[12] = {1, -2, 3, 0.5f, -1, 4, 2, -3, 0.25f, 1, -1, 2};
    const float xv[4] = {1, 2, -1, 0.5f}, bv[3] = {0.5f, -1, 2};
    tsr_backend_tensor_set(W, w, 0, sizeof w);
    tsr_backend_tensor_set(x, xv, 0, sizeof xv);
    tsr_backend_tensor_set(b, bv, 0, sizeof bv);
    ORDER_CHECK(tsr_backend_graph_compute(cpu, gf) == TSR_STATUS_SUCCESS);
    float out[3] = {0, 0, 0};
    tsr_backend_tensor_get(y, out, 0, sizeof out);
    for (int m = 0; m < M; m++) {
        double s = 0;
        for (int k = 0; k < K; k++) s += (double)w[m * K + k] * xv[k];
        const double ref = (s > 0 ? s : 0) + bv[m];
        ORDER_CHECK(std::fabs(out[m] - ref) < 1e-6);
    }

    // GGUF: write a key and read it back from memory
    tsr_gguf_context * g = tsr_gguf_init_empty();
    ORDER_CHECK(g && tsr_gguf_set_val_u32(g, "order.answer", 42));
    std::vector<unsigned char> meta(tsr_gguf_get_meta_size(g));
    tsr_gguf_get_meta_data(g, meta.data());
    tsr_gguf_context * r = tsr_gguf_init_from_buffer(meta.data(), meta.size(), tsr_gguf_init_params{true, nullptr});
    ORDER_CHECK(r && tsr_gguf_get_val_u32(r, tsr_gguf_find_key(r, "order.answer")) == 42);
    tsr_gguf_free(r);
    tsr_gguf_free(g);

    // the scheduler: made over the CPU backend, and gone
    tsr_backend_sched_t sched = tsr_backend_sched_new(&cpu, nullptr, 1, 64, false);
    ORDER_CHECK(sched != nullptr && tsr_backend_sched_get_n_copies(sched) == 1);
    tsr_backend_sched_free(sched);

#ifdef TSR_HAVE_VULKAN
    ORDER_CHECK(tsr_backend_vk_get_device_count() >= 0);  // linked and callable, device or not
    // the Vulkan part registered itself whatever the order (its devices, if any, listed)
    ORDER_CHECK(tsr_backend_reg_by_name("Vulkan") == tsr_backend_vk_reg());
#endif
    // the CPU part registered itself whatever the order; its device is the CPU backend's
    ORDER_CHECK(tsr_backend_reg_get(0) == tsr_backend_cpu_reg());
    ORDER_CHECK(tsr_backend_get_device(cpu) == tsr_backend_dev_by_name("CPU"));
    tsr_gallocr_free(galloc);
    tsr_backend_buffer_free(weights);
    tsr_backend_free(cpu);
    tsr_free(ctx);
    std::printf("include order %s: %s\n", order, tsr_order_failures ? "FAILED" : "ok");
    return tsr_order_failures ? 1 : 0;
}
