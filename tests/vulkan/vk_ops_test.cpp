// Every op the Vulkan backend supports, against the CPU backend (normalized MSE).
#include "vk_util.h"

using vkt::graph_def;

static const double F32_TOL = 1e-9;   // same math in float, different order/intrinsics
static const double F16_TOL = 1e-6;   // F16 storage on one side
static const double Q_TOL   = 2e-4;   // CPU quantizes activations for quantized weights

TEST_CASE("vulkan binary ops broadcast like the CPU backend", "[vulkan][ops]") {
    VK_OR_SKIP();
    const enum tsr_op ops[] = {TSR_OP_ADD, TSR_OP_SUB, TSR_OP_MUL, TSR_OP_DIV};
    const int64_t bshapes[][4] = {{37, 5, 3, 2}, {37, 1, 3, 1}, {1, 5, 1, 1}, {37, 1, 1, 1}, {1, 1, 1, 1}};
    for (enum tsr_op op : ops) {
        for (auto & bs : bshapes) {
            vkt::compare([&](tsr_context * ctx, graph_def & d) {
                tsr_tensor * a = d.add(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 37, 5, 3, 2));
                tsr_tensor * b = d.add(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, bs[0], bs[1], bs[2], bs[3]), 0.5f, 1.5f);
                switch (op) {
                case TSR_OP_ADD: return tsr_add(ctx, a, b);
                case TSR_OP_SUB: return tsr_sub(ctx, a, b);
                case TSR_OP_MUL: return tsr_mul(ctx, a, b);
                default:         return tsr_div(ctx, a, b);
                }
            }, F32_TOL, tsr_op_name(op));
        }
    }
    // in place: the result aliases a
    vkt::compare([](tsr_context * ctx, graph_def & d) {
        tsr_tensor * a = d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 300, 7));
        tsr_tensor * b = d.add(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 300));
        return tsr_add_inplace(ctx, tsr_scale(ctx, a, 2.0f), b);
    }, F32_TOL, "add_inplace");
}

TEST_CASE("vulkan unary ops match the CPU backend", "[vulkan][ops]") {
    VK_OR_SKIP();
    const enum tsr_unary_op ops[] = {TSR_UNARY_OP_ABS, TSR_UNARY_OP_NEG, TSR_UNARY_OP_TANH, TSR_UNARY_OP_RELU,
                                     TSR_UNARY_OP_SIGMOID, TSR_UNARY_OP_GELU, TSR_UNARY_OP_GELU_QUICK,
                                     TSR_UNARY_OP_SILU, TSR_UNARY_OP_EXP};
    for (auto u : ops) {
        vkt::compare([&](tsr_context * ctx, graph_def & d) {
            return tsr_unary(ctx, d.add(tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 67, 13, 3), -4.0f, 4.0f), u);
        }, 1e-7, tsr_unary_op_name(u));
    }
    vkt::compare([](tsr_context * ctx, graph_def & d) { return tsr_sqr(ctx, d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 129, 9))); }, F32_TOL, "sqr");
    vkt::compare([](tsr_context * ctx, graph_def & d) { return tsr_sqrt(ctx, d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 129, 9), 0.0f, 9.0f)); }, 1e-8, "sqrt");
    vkt::compare([](tsr_context * ctx, graph_def & d) { return tsr_log(ctx, d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 129, 9), 0.01f, 9.0f)); }, 1e-8, "log");
    vkt::compare([](tsr_context * ctx, graph_def & d) { return tsr_scale(ctx, d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 129, 9)), -0.37f); }, F32_TOL, "scale");
    vkt::compare([](tsr_context * ctx, graph_def & d) { return tsr_clamp(ctx, d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 129, 9)), -0.25f, 0.5f); }, F32_TOL, "clamp");
    // a non-contiguous (transposed) source
    vkt::compare([](tsr_context * ctx, graph_def & d) {
        return tsr_gelu(ctx, tsr_transpose(ctx, d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 31, 17), -3.0f, 3.0f)));
    }, 1e-7, "gelu of a transposed view");
}

TEST_CASE("vulkan norm, rms_norm, soft_max_ext, diag_mask_inf match the CPU backend", "[vulkan][ops]") {
    VK_OR_SKIP();
    for (int64_t ne0 : {1, 7, 768, 4097}) {
        vkt::compare([&](tsr_context * ctx, graph_def & d) { return tsr_norm(ctx, d.add(tsr_new_tensor_3d(ctx, TSR_TYPE_F32, ne0, 5, 3), -2.0f, 3.0f), 1e-5f); }, 1e-8, "norm");
        vkt::compare([&](tsr_context * ctx, graph_def & d) { return tsr_rms_norm(ctx, d.add(tsr_new_tensor_3d(ctx, TSR_TYPE_F32, ne0, 5, 3), -2.0f, 3.0f), 1e-6f); }, 1e-8, "rms_norm");
    }
    for (int n_past : {0, 3}) {
        vkt::compare([&](tsr_context * ctx, graph_def & d) { return tsr_diag_mask_inf(ctx, d.add(tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 13, 11, 4)), n_past); }, F32_TOL, "diag_mask_inf");
    }
    for (enum tsr_type mt : {TSR_TYPE_F32, TSR_TYPE_F16}) {
        for (float max_bias : {0.0f, 8.0f}) {
            vkt::compare([&](tsr_context * ctx, graph_def & d) {
                tsr_tensor * a = d.add(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 45, 7, 6, 2), -3.0f, 3.0f);
                tsr_tensor * m = d.add(tsr_new_tensor_2d(ctx, mt, 45, 8), -1.0f, 0.0f);
                return tsr_soft_max_ext(ctx, a, m, 0.3f, max_bias);
            }, 1e-8, max_bias > 0 ? "soft_max_ext mask + ALiBi" : "soft_max_ext mask");
        }
    }
    vkt::compare([](tsr_context * ctx, graph_def & d) { return tsr_soft_max(ctx, d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 1000, 3), -5.0f, 5.0f)); }, 1e-8, "soft_max");
    // causal masking: diag_mask_inf then soft_max (the -inf entries become exact zeros)
    vkt::compare([](tsr_context * ctx, graph_def & d) {
        return tsr_soft_max(ctx, tsr_diag_mask_inf(ctx, d.add(tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 9, 9, 2)), 0));
    }, 1e-8, "soft_max(diag_mask_inf)");
}

TEST_CASE("vulkan rope normal and neox match the CPU backend", "[vulkan][ops]") {
    VK_OR_SKIP();
    for (int mode : {TSR_ROPE_TYPE_NORMAL, TSR_ROPE_TYPE_NEOX}) {
        for (int n_dims : {64, 32}) {
            for (float ext : {0.0f, 1.0f}) {
                vkt::compare([&](tsr_context * ctx, graph_def & d) {
                    tsr_tensor * a = d.add(tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 64, 4, 9));
                    std::vector<int32_t> pos;
                    for (int i = 0; i < 9; i++) pos.push_back(3 + 17 * i);
                    tsr_tensor * p = d.add_i32(tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 9), pos);
                    return tsr_rope_ext(ctx, a, p, nullptr, n_dims, mode, 4096, 10000.0f, ext != 0.0f ? 0.5f : 1.0f,
                                        ext, 1.0f, 32.0f, 1.0f);
                }, 1e-8, mode == TSR_ROPE_TYPE_NEOX ? "rope neox" : "rope normal");
            }
        }
    }
}

TEST_CASE("vulkan swiglu (fused, swapped, split) matches the CPU backend", "[vulkan][ops]") {
    VK_OR_SKIP();
    vkt::compare([](tsr_context * ctx, graph_def & d) { return tsr_swiglu(ctx, d.add(tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 2 * 45, 7, 2), -3.0f, 3.0f)); }, 1e-8, "swiglu");
    vkt::compare([](tsr_context * ctx, graph_def & d) {
        tsr_tensor * a = d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 45, 7), -3.0f, 3.0f);
        tsr_tensor * b = d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 45, 7), -3.0f, 3.0f);
        return tsr_swiglu_split(ctx, a, b);
    }, 1e-8, "swiglu_split");
    vkt::compare([](tsr_context * ctx, graph_def & d) {
        tsr_tensor * r = tsr_swiglu(ctx, d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 2 * 33, 5), -3.0f, 3.0f));
        tsr_set_op_params_i32(r, 1, 1);  // swapped: [g | x]
        return r;
    }, 1e-8, "swiglu swapped");
}

TEST_CASE("vulkan get_rows from F32/F16/Q8_0/Q4_0 matches the CPU backend", "[vulkan][ops]") {
    VK_OR_SKIP();
    for (enum tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0}) {
        vkt::compare([&](tsr_context * ctx, graph_def & d) {
            tsr_tensor * a = d.add(tsr_new_tensor_2d(ctx, t, 96, 50));
            tsr_tensor * i = d.add_i32(tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 7), {0, 49, 3, 3, 17, 48, 1});
            return tsr_get_rows(ctx, a, i);
        }, F32_TOL, tsr_type_name(t));
        vkt::compare([&](tsr_context * ctx, graph_def & d) {
            tsr_tensor * a = d.add(tsr_new_tensor_3d(ctx, t, 64, 10, 3));
            tsr_tensor * i = d.add_i32(tsr_new_tensor_2d(ctx, TSR_TYPE_I32, 5, 3), {0, 9, 2, 2, 5, 1, 1, 1, 8, 0, 9, 4, 3, 7, 6});
            return tsr_get_rows(ctx, a, i);
        }, F32_TOL, "3-D get_rows");
    }
}

TEST_CASE("vulkan cpy/cont/dup among F32 and F16 match the CPU backend", "[vulkan][ops]") {
    VK_OR_SKIP();
    for (enum tsr_type st : {TSR_TYPE_F32, TSR_TYPE_F16}) {
        for (enum tsr_type dt : {TSR_TYPE_F32, TSR_TYPE_F16}) {
            const double tol = (st == TSR_TYPE_F32 && dt == TSR_TYPE_F16) ? F16_TOL : F32_TOL;
            vkt::compare([&](tsr_context * ctx, graph_def & d) {
                return tsr_cpy(ctx, d.add(tsr_new_tensor_3d(ctx, st, 33, 7, 3)), tsr_new_tensor_3d(ctx, dt, 33, 7, 3));
            }, tol, "cpy");
            // permuted source, reshaped destination (flat logical order)
            vkt::compare([&](tsr_context * ctx, graph_def & d) {
                tsr_tensor * a = d.add(tsr_new_tensor_3d(ctx, st, 33, 7, 3));
                return tsr_cpy(ctx, tsr_permute(ctx, a, 1, 2, 0, 3), tsr_new_tensor_2d(ctx, dt, 21, 33));
            }, tol, "cpy permuted");
        }
    }
    vkt::compare([](tsr_context * ctx, graph_def & d) {
        return tsr_cont(ctx, tsr_transpose(ctx, d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 45, 19))));
    }, F32_TOL, "cont of transpose");
    vkt::compare([](tsr_context * ctx, graph_def & d) { return tsr_dup(ctx, d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F16, 45, 19))); }, F32_TOL, "dup F16");
    // KV-cache style: write rows into a view of a larger F16 tensor, then read the whole cache
    vkt::compare([](tsr_context * ctx, graph_def & d) {
        tsr_tensor * cache = d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F16, 64, 20));
        tsr_tensor * k = d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 64, 5));
        tsr_tensor * view = tsr_view_2d(ctx, cache, 64, 5, cache->nb[1], 7 * cache->nb[1]);
        tsr_tensor * w = tsr_cpy(ctx, k, view);
        return tsr_scale(ctx, tsr_cast(ctx, w, TSR_TYPE_F32), 1.0f);
    }, F16_TOL, "cpy into a view");
}

TEST_CASE("vulkan concat along every dim matches the CPU backend", "[vulkan][ops]") {
    VK_OR_SKIP();
    for (int dim = 0; dim < 4; dim++) {
        vkt::compare([&](tsr_context * ctx, graph_def & d) {
            int64_t ne[4] = {5, 4, 3, 2};
            int64_t nb_[4] = {5, 4, 3, 2};
            nb_[dim] = 3;
            tsr_tensor * a = d.add(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, ne[0], ne[1], ne[2], ne[3]));
            tsr_tensor * b = d.add(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, nb_[0], nb_[1], nb_[2], nb_[3]));
            return tsr_concat(ctx, a, b, dim);
        }, F32_TOL, "concat");
    }
}

TEST_CASE("vulkan mul_mat F32/F16/Q8_0/Q4_0 (vector and tiled) matches the CPU backend", "[vulkan][ops][mul_mat]") {
    VK_OR_SKIP();
    struct shape { int64_t K, M, N; };
    const shape shapes[] = {{256, 67, 1}, {256, 67, 3}, {256, 67, 70}, {512, 130, 129}, {64, 1, 5}, {96, 530, 260}};  // last: 128x128 tiles
    for (enum tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0}) {
        const double tol = t == TSR_TYPE_F32 ? 1e-9 : t == TSR_TYPE_F16 ? 1e-6 : Q_TOL;
        for (const shape & s : shapes) {
            INFO("K " << s.K << " M " << s.M << " N " << s.N);
            vkt::compare([&](tsr_context * ctx, graph_def & d) {
                tsr_tensor * a = d.add(tsr_new_tensor_2d(ctx, t, s.K, s.M));
                tsr_tensor * b = d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, s.K, s.N));
                return tsr_mul_mat(ctx, a, b);
            }, tol, tsr_type_name(t));
        }
        // batched with broadcast of a over dims 2 and 3
        vkt::compare([&](tsr_context * ctx, graph_def & d) {
            tsr_tensor * a = d.add(tsr_new_tensor_4d(ctx, t, 64, 19, 2, 1));
            tsr_tensor * b = d.add(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 64, 9, 6, 2));
            return tsr_mul_mat(ctx, a, b);
        }, tol, "batched broadcast");
    }
    // odd K (not a block multiple) for the float types
    for (enum tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16}) {
        for (int64_t N : {1, 37}) {
            vkt::compare([&](tsr_context * ctx, graph_def & d) {
                return tsr_mul_mat(ctx, d.add(tsr_new_tensor_2d(ctx, t, 101, 23)), d.add(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 101, N)));
            }, t == TSR_TYPE_F32 ? 1e-9 : 1e-6, "odd K");
        }
    }
    // attention-shaped: permuted K and Q views (non-contiguous rows) as in kq = K^T Q per head
    vkt::compare([](tsr_context * ctx, graph_def & d) {
        const int64_t D = 32, H = 4, T = 11;
        tsr_tensor * k = d.add(tsr_new_tensor_3d(ctx, TSR_TYPE_F32, D, H, T));
        tsr_tensor * q = d.add(tsr_new_tensor_3d(ctx, TSR_TYPE_F32, D, H, T));
        tsr_tensor * kp = tsr_permute(ctx, k, 0, 2, 1, 3);  // [D, T, H]
        tsr_tensor * qp = tsr_permute(ctx, q, 0, 2, 1, 3);
        return tsr_mul_mat(ctx, kp, qp);                   // [T, T, H]
    }, 1e-9, "permuted K/Q");
}

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

TEST_CASE("vulkan flash_attn_ext matches the CPU backend", "[vulkan][ops][attention]") {
    VK_OR_SKIP();
    struct cfg { int64_t D, n_q, n_kv, n_head, n_head_kv; enum tsr_type kv, mask; float max_bias, softcap; bool permuted; };
    const cfg cfgs[] = {
        {64, 7, 45, 4, 4, TSR_TYPE_F32, TSR_TYPE_F32, 0.0f, 0.0f, false},
        {64, 1, 300, 8, 2, TSR_TYPE_F16, TSR_TYPE_F16, 0.0f, 0.0f, true},   // GQA, decode, cache views
        {128, 5, 33, 4, 4, TSR_TYPE_F16, TSR_TYPE_F32, 8.0f, 0.0f, false},  // ALiBi
        {32, 6, 20, 2, 1, TSR_TYPE_F32, TSR_TYPE_F16, 0.0f, 30.0f, true},   // softcap
    };
    for (const cfg & c : cfgs) {
        INFO("D " << c.D << " n_q " << c.n_q << " n_kv " << c.n_kv << " heads " << c.n_head << "/" << c.n_head_kv);
        vkt::compare([&](tsr_context * ctx, graph_def & d) {
            tsr_tensor * q = d.add(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, c.D, c.n_q, c.n_head, 1));
            tsr_tensor * k, * v;
            if (c.permuted) {  // caches laid out [D, n_head_kv, n_kv] viewed as [D, n_kv, n_head_kv]
                k = tsr_permute(ctx, d.add(tsr_new_tensor_3d(ctx, c.kv, c.D, c.n_head_kv, c.n_kv)), 0, 2, 1, 3);
                v = tsr_permute(ctx, d.add(tsr_new_tensor_3d(ctx, c.kv, c.D, c.n_head_kv, c.n_kv)), 0, 2, 1, 3);
            } else {
                k = d.add(tsr_new_tensor_4d(ctx, c.kv, c.D, c.n_kv, c.n_head_kv, 1));
                v = d.add(tsr_new_tensor_4d(ctx, c.kv, c.D, c.n_kv, c.n_head_kv, 1));
            }
            std::vector<float> mv(static_cast<size_t>(c.n_kv * (c.n_q + 1)));
            for (int64_t i = 0; i < c.n_q + 1; i++)
                for (int64_t j = 0; j < c.n_kv; j++) mv[static_cast<size_t>(i * c.n_kv + j)] = (j > c.n_kv - c.n_q + i) ? -INFINITY : -0.01f * static_cast<float>(j % 7);
            tsr_tensor * m = d.add_f32(tsr_new_tensor_2d(ctx, c.mask, c.n_kv, c.n_q + 1), mv);
            return tsr_flash_attn_ext(ctx, q, k, v, m, 1.0f / std::sqrt(static_cast<float>(c.D)), c.max_bias, c.softcap);
        }, c.kv == TSR_TYPE_F16 ? 1e-6 : 1e-9, "flash_attn_ext");
    }
}
