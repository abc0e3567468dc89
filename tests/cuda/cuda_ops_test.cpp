// CUDA backend: every supported op against the CPU backend (the reference), on odd shapes,
// broadcasting, non-contiguous views, F16 and quantized types, and in-place variants.
// Skips with a WARN where there is no CUDA device.
#include "cuda_test_util.h"

#include <cmath>
#include <vector>

using namespace cudatest;

namespace {

constexpr double TOL_F32 = 1e-9;   // elementwise/row ops in F32 (libm differences only)
constexpr double TOL_F16 = 1e-5;   // F16 storage
constexpr double TOL_Q = 2e-3;     // quantized weights (activations quantized differently per backend)

tsr_tensor * t4(tsr_context * ctx, tsr_type type, int64_t a, int64_t b = 1, int64_t c = 1, int64_t d = 1) {
    return tsr_new_tensor_4d(ctx, type, a, b, c, d);
}

} // namespace

TEST_CASE("cuda ops: add sub mul div with broadcasting views and in place", "[cuda][device][ops]") {
    CUDA_OR_SKIP(be);
    using bin = tsr_tensor * (*)(tsr_context *, tsr_tensor *, tsr_tensor *);
    const bin ops[] = {tsr_add, tsr_sub, tsr_mul, tsr_div};
    const char * names[] = {"add", "sub", "mul", "div"};
    const int64_t bshapes[][4] = {{37, 5, 3, 2}, {37, 1, 3, 1}, {1, 5, 1, 2}, {37, 1, 1, 1}, {1, 1, 1, 1}};
    for (int o = 0; o < 4; ++o) {
        for (const auto & bs : bshapes) {
            for (tsr_type ta : {TSR_TYPE_F32, TSR_TYPE_F16}) {
                const bin f = ops[o];
                check_vs_cpu(be, names[o], [&](tsr_context * ctx, case_inputs & in) {
                    tsr_tensor * a = in.add(t4(ctx, ta, 37, 5, 3, 2));
                    tsr_tensor * b = in.add(t4(ctx, TSR_TYPE_F32, bs[0], bs[1], bs[2], bs[3]), 0.5f, 2.0f);
                    return f(ctx, a, b);
                }, ta == TSR_TYPE_F32 ? TOL_F32 : TOL_F16);
            }
        }
    }
    check_vs_cpu(be, "add of a permuted view", [](tsr_context * ctx, case_inputs & in) {
        tsr_tensor * a = in.add(t4(ctx, TSR_TYPE_F32, 9, 13, 4));
        tsr_tensor * b = in.add(t4(ctx, TSR_TYPE_F32, 13, 9, 1));
        return tsr_add(ctx, tsr_permute(ctx, a, 1, 0, 2, 3), b);
    }, TOL_F32);
    check_vs_cpu(be, "add_inplace", [](tsr_context * ctx, case_inputs & in) {
        tsr_tensor * a = in.add(t4(ctx, TSR_TYPE_F32, 130, 7));
        tsr_tensor * b = in.add(t4(ctx, TSR_TYPE_F32, 130, 1));
        return tsr_add_inplace(ctx, a, b);
    }, TOL_F32);
    check_vs_cpu(be, "mul_inplace", [](tsr_context * ctx, case_inputs & in) {
        tsr_tensor * a = in.add(t4(ctx, TSR_TYPE_F32, 130, 7));
        tsr_tensor * b = in.add(t4(ctx, TSR_TYPE_F32, 130, 7));
        return tsr_mul_inplace(ctx, a, b);
    }, TOL_F32);
}

TEST_CASE("cuda ops: unary functions scale clamp", "[cuda][device][ops]") {
    CUDA_OR_SKIP(be);
    using un = tsr_tensor * (*)(tsr_context *, tsr_tensor *);
    struct { const char * name; un f; float lo, hi; } cases[] = {
        {"abs", tsr_abs, -2, 2}, {"neg", tsr_neg, -2, 2}, {"tanh", tsr_tanh, -3, 3}, {"relu", tsr_relu, -2, 2},
        {"sigmoid", tsr_sigmoid, -6, 6}, {"gelu", tsr_gelu, -4, 4}, {"gelu_quick", tsr_gelu_quick, -4, 4},
        {"silu", tsr_silu, -6, 6}, {"exp", tsr_exp, -3, 3}, {"sqr", tsr_sqr, -3, 3}, {"sqrt", tsr_sqrt, 0.01f, 9},
        {"log", tsr_log, 0.01f, 9},
    };
    for (const auto & c : cases) {
        for (tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16}) {
            // gelu: the CPU backend may use a table (as ggml does); allow F16-level error
            const double tol = (t == TSR_TYPE_F16 || std::string(c.name) == "gelu") ? 1e-5 : 1e-8;
            check_vs_cpu(be, c.name, [&](tsr_context * ctx, case_inputs & in) {
                return c.f(ctx, in.add(t4(ctx, t, 301, 3, 2), c.lo, c.hi));
            }, tol);
        }
        check_vs_cpu(be, c.name, [&](tsr_context * ctx, case_inputs & in) {   // non-contiguous source
            return c.f(ctx, tsr_transpose(ctx, in.add(t4(ctx, TSR_TYPE_F32, 17, 23), c.lo, c.hi)));
        }, std::string(c.name) == "gelu" ? 1e-5 : 1e-8);
    }
    check_vs_cpu(be, "scale", [](tsr_context * ctx, case_inputs & in) {
        return tsr_scale(ctx, in.add(t4(ctx, TSR_TYPE_F32, 1000, 3)), -0.37f);
    }, TOL_F32);
    check_vs_cpu(be, "scale_inplace", [](tsr_context * ctx, case_inputs & in) {
        return tsr_scale_inplace(ctx, in.add(t4(ctx, TSR_TYPE_F32, 1000, 3)), 2.5f);
    }, TOL_F32);
    check_vs_cpu(be, "clamp", [](tsr_context * ctx, case_inputs & in) {
        return tsr_clamp(ctx, in.add(t4(ctx, TSR_TYPE_F32, 999, 2), -3, 3), -0.5f, 1.25f);
    }, TOL_F32);
}

TEST_CASE("cuda ops: swiglu (fused and split)", "[cuda][device][ops]") {
    CUDA_OR_SKIP(be);
    for (tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16}) {
        const double tol = t == TSR_TYPE_F32 ? 1e-8 : TOL_F16;
        check_vs_cpu(be, "swiglu", [&](tsr_context * ctx, case_inputs & in) {
            return tsr_swiglu(ctx, in.add(t4(ctx, t, 2 * 173, 5, 2), -4, 4));
        }, tol);
        check_vs_cpu(be, "swiglu_split", [&](tsr_context * ctx, case_inputs & in) {
            tsr_tensor * a = in.add(t4(ctx, t, 173, 5, 2), -4, 4);
            tsr_tensor * b = in.add(t4(ctx, t, 173, 5, 2), -4, 4);
            return tsr_swiglu_split(ctx, a, b);
        }, tol);
    }
}

TEST_CASE("cuda ops: norm and rms_norm", "[cuda][device][ops]") {
    CUDA_OR_SKIP(be);
    const int64_t shapes[][3] = {{4096, 3, 1}, {37, 5, 2}, {1, 3, 1}, {768, 7, 1}, {5000, 2, 1}};
    for (const auto & s : shapes) {
        check_vs_cpu(be, "norm", [&](tsr_context * ctx, case_inputs & in) {
            return tsr_norm(ctx, in.add(t4(ctx, TSR_TYPE_F32, s[0], s[1], s[2]), -2, 3), 1e-5f);
        }, 1e-8);
        check_vs_cpu(be, "rms_norm", [&](tsr_context * ctx, case_inputs & in) {
            return tsr_rms_norm(ctx, in.add(t4(ctx, TSR_TYPE_F32, s[0], s[1], s[2]), -2, 3), 1e-6f);
        }, 1e-8);
    }
}

TEST_CASE("cuda ops: soft_max and soft_max_ext with mask scale ALiBi", "[cuda][device][ops]") {
    CUDA_OR_SKIP(be);
    check_vs_cpu(be, "soft_max", [](tsr_context * ctx, case_inputs & in) {
        return tsr_soft_max(ctx, in.add(t4(ctx, TSR_TYPE_F32, 100, 7, 3), -5, 5));
    }, 1e-8);
    check_vs_cpu(be, "soft_max large row", [](tsr_context * ctx, case_inputs & in) {
        return tsr_soft_max(ctx, in.add(t4(ctx, TSR_TYPE_F32, 50257, 2), -10, 10));
    }, 1e-8);
    for (tsr_type mt : {TSR_TYPE_F32, TSR_TYPE_F16}) {
        for (float max_bias : {0.0f, 8.0f}) {
            check_vs_cpu(be, "soft_max_ext", [&](tsr_context * ctx, case_inputs & in) {
                tsr_tensor * a = in.add(t4(ctx, TSR_TYPE_F32, 33, 7, 6), -3, 3);
                tsr_tensor * m = in.add(t4(ctx, mt, 33, 9), -2, 0);
                return tsr_soft_max_ext(ctx, a, m, 0.37f, max_bias);
            }, mt == TSR_TYPE_F32 ? 1e-8 : 1e-6);
        }
    }
}

TEST_CASE("cuda ops: rope normal and neox", "[cuda][device][ops]") {
    CUDA_OR_SKIP(be);
    for (int mode : {TSR_ROPE_TYPE_NORMAL, TSR_ROPE_TYPE_NEOX}) {
        for (int n_dims : {64, 32}) {
            for (tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16}) {
                check_vs_cpu(be, mode ? "rope neox" : "rope normal", [&](tsr_context * ctx, case_inputs & in) {
                    tsr_tensor * a = in.add(t4(ctx, t, 64, 4, 7));
                    tsr_tensor * pos = in.add(t4(ctx, TSR_TYPE_I32, 7), 0, 0, {0, 3, 5, 17, 100, 1000, 4095});
                    return tsr_rope_ext(ctx, a, pos, nullptr, n_dims, mode, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
                }, t == TSR_TYPE_F32 ? 1e-7 : TOL_F16);
            }
        }
        check_vs_cpu(be, "rope yarn", [&](tsr_context * ctx, case_inputs & in) {
            tsr_tensor * a = in.add(t4(ctx, TSR_TYPE_F32, 128, 3, 5));
            tsr_tensor * pos = in.add(t4(ctx, TSR_TYPE_I32, 5), 0, 0, {1, 2, 300, 7000, 9});
            return tsr_rope_ext(ctx, a, pos, nullptr, 128, mode, 2048, 500000.0f, 0.25f, 1.0f, 1.0f, 32.0f, 1.0f);
        }, 1e-6);
    }
}

TEST_CASE("cuda ops: get_rows and set_rows", "[cuda][device][ops]") {
    CUDA_OR_SKIP(be);
    for (tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0}) {
        check_vs_cpu(be, tsr_type_name(t), [&](tsr_context * ctx, case_inputs & in) {
            tsr_tensor * a = in.add(t4(ctx, t, 96, 20));
            tsr_tensor * b = in.add(t4(ctx, TSR_TYPE_I32, 6), 0, 0, {3, 0, 19, 3, 7, 11});
            return tsr_get_rows(ctx, a, b);
        }, 0.0);   // exact: both sides dequantize the same blocks
        check_vs_cpu(be, "get_rows batched", [&](tsr_context * ctx, case_inputs & in) {
            tsr_tensor * a = in.add(t4(ctx, t, 64, 10, 3));
            tsr_tensor * b = in.add(t4(ctx, TSR_TYPE_I32, 4, 3), 0, 0, {9, 1, 2, 0, 5, 5, 8, 3, 4, 6, 7, 0});
            return tsr_get_rows(ctx, a, b);
        }, 0.0);
    }
    for (tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16}) {
        check_vs_cpu(be, "set_rows", [&](tsr_context * ctx, case_inputs & in) {
            tsr_tensor * a = in.add(t4(ctx, t, 48, 10, 2));
            tsr_tensor * b = in.add(t4(ctx, TSR_TYPE_F32, 48, 3, 2));
            tsr_tensor * c = in.add(t4(ctx, TSR_TYPE_I32, 3, 2), 0, 0, {7, 0, 9, 1, 2, 3});
            return tsr_set_rows(ctx, a, b, c);
        }, 0.0);
    }
}

TEST_CASE("cuda ops: cpy cont dup among F32 F16 and BF16", "[cuda][device][ops]") {
    CUDA_OR_SKIP(be);
    for (tsr_type ts : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16}) {
        for (tsr_type td : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16}) {
            check_vs_cpu(be, "cpy", [&](tsr_context * ctx, case_inputs & in) {
                tsr_tensor * a = in.add(t4(ctx, ts, 45, 6, 2));
                tsr_tensor * b = in.add(t4(ctx, td, 90, 6));
                return tsr_cpy(ctx, a, b);
            }, 0.0);
            check_vs_cpu(be, "cpy of a transposed view", [&](tsr_context * ctx, case_inputs & in) {
                tsr_tensor * a = in.add(t4(ctx, ts, 31, 17));
                tsr_tensor * b = in.add(t4(ctx, td, 17, 31));
                return tsr_cpy(ctx, tsr_transpose(ctx, a), b);
            }, 0.0);
        }
        check_vs_cpu(be, "cont of a permuted view", [&](tsr_context * ctx, case_inputs & in) {
            return tsr_cont(ctx, tsr_permute(ctx, in.add(t4(ctx, ts, 8, 5, 3, 2)), 2, 0, 3, 1));
        }, 0.0);
        check_vs_cpu(be, "dup", [&](tsr_context * ctx, case_inputs & in) {
            return tsr_dup(ctx, in.add(t4(ctx, ts, 1001)));
        }, 0.0);
    }
}

TEST_CASE("cuda ops: concat repeat diag_mask_inf", "[cuda][device][ops]") {
    CUDA_OR_SKIP(be);
    for (int dim = 0; dim < 4; ++dim) {
        check_vs_cpu(be, "concat", [&](tsr_context * ctx, case_inputs & in) {
            int64_t nb[4] = {5, 4, 3, 2};
            nb[dim] = 7;
            tsr_tensor * a = in.add(t4(ctx, TSR_TYPE_F32, 5, 4, 3, 2));
            tsr_tensor * b = in.add(t4(ctx, TSR_TYPE_F32, nb[0], nb[1], nb[2], nb[3]));
            return tsr_concat(ctx, a, b, dim);
        }, 0.0);
    }
    check_vs_cpu(be, "repeat", [](tsr_context * ctx, case_inputs & in) {
        tsr_tensor * a = in.add(t4(ctx, TSR_TYPE_F32, 3, 1, 2));
        tsr_tensor * b = in.add(t4(ctx, TSR_TYPE_F32, 9, 4, 2, 3));
        return tsr_repeat(ctx, a, b);
    }, 0.0);
    for (int n_past : {0, 2}) {
        check_vs_cpu(be, "diag_mask_inf", [&](tsr_context * ctx, case_inputs & in) {
            return tsr_diag_mask_inf(ctx, in.add(t4(ctx, TSR_TYPE_F32, 9, 7, 3)), n_past);
        }, 0.0);
    }
}

TEST_CASE("cuda ops: sum sum_rows mean argmax", "[cuda][device][ops]") {
    CUDA_OR_SKIP(be);
    check_vs_cpu(be, "sum", [](tsr_context * ctx, case_inputs & in) {
        return tsr_sum(ctx, in.add(t4(ctx, TSR_TYPE_F32, 1000, 7, 3)));
    }, 1e-9);
    check_vs_cpu(be, "sum_rows", [](tsr_context * ctx, case_inputs & in) {
        return tsr_sum_rows(ctx, in.add(t4(ctx, TSR_TYPE_F32, 333, 7, 3)));
    }, 1e-10);
    check_vs_cpu(be, "mean", [](tsr_context * ctx, case_inputs & in) {
        return tsr_mean(ctx, in.add(t4(ctx, TSR_TYPE_F32, 333, 7, 3)));
    }, 1e-10);
    check_vs_cpu(be, "argmax", [](tsr_context * ctx, case_inputs & in) {
        return tsr_argmax(ctx, in.add(t4(ctx, TSR_TYPE_F32, 5003, 9)));
    }, 0.0);
}

TEST_CASE("cuda ops: mul_mat F32 and F16 through cuBLAS", "[cuda][device][ops][mul_mat]") {
    CUDA_OR_SKIP(be);
    // plain, batched, broadcast over dims 2-3
    const int64_t shapes[][6] = {  // K, M, N, B2, B3, broadcast ratio in dim 2
        {67, 33, 9, 1, 1, 1}, {256, 128, 64, 3, 2, 1}, {64, 20, 7, 4, 2, 2}, {4096, 64, 1, 1, 1, 1}, {1, 5, 3, 1, 1, 1}};
    for (tsr_type ta : {TSR_TYPE_F32, TSR_TYPE_F16}) {
        for (tsr_type tb : {TSR_TYPE_F32, TSR_TYPE_F16}) {
            for (const auto & s : shapes) {
                check_vs_cpu(be, "mul_mat", [&](tsr_context * ctx, case_inputs & in) {
                    tsr_tensor * a = in.add(t4(ctx, ta, s[0], s[1], s[3] / s[5], s[4]));
                    tsr_tensor * b = in.add(t4(ctx, tb, s[0], s[2], s[3], s[4]));
                    return tsr_mul_mat(ctx, a, b);
                }, ta == TSR_TYPE_F32 && tb == TSR_TYPE_F32 ? 1e-10 : TOL_F16);
            }
        }
    }
    for (tsr_type tb : {TSR_TYPE_F32, TSR_TYPE_BF16}) {   // BF16 weights: activations rounded to BF16
        check_vs_cpu(be, "mul_mat BF16", [&](tsr_context * ctx, case_inputs & in) {
            tsr_tensor * a = in.add(t4(ctx, TSR_TYPE_BF16, 200, 45, 2));
            tsr_tensor * b = in.add(t4(ctx, tb, 200, 9, 2));
            return tsr_mul_mat(ctx, a, b);
        }, 1e-4);
    }
    check_vs_cpu(be, "mul_mat with permuted operands (attention shape)", [](tsr_context * ctx, case_inputs & in) {
        tsr_tensor * k = in.add(t4(ctx, TSR_TYPE_F32, 16, 4, 11));   // [D, H, T]
        tsr_tensor * q = in.add(t4(ctx, TSR_TYPE_F32, 16, 4, 7));
        return tsr_mul_mat(ctx, tsr_permute(ctx, k, 0, 2, 1, 3), tsr_permute(ctx, q, 0, 2, 1, 3));
    }, 1e-10);
    check_vs_cpu(be, "mul_mat with a transposed src0", [](tsr_context * ctx, case_inputs & in) {
        tsr_tensor * a = in.add(t4(ctx, TSR_TYPE_F32, 19, 40));
        tsr_tensor * b = in.add(t4(ctx, TSR_TYPE_F32, 40, 6));
        return tsr_mul_mat(ctx, tsr_transpose(ctx, a), b);
    }, 1e-10);
    // TF32: documented tolerance
    REQUIRE(tsr_backend_cuda_set_allow_tf32(be, true));
    check_vs_cpu(be, "mul_mat F32 with TF32 allowed", [](tsr_context * ctx, case_inputs & in) {
        tsr_tensor * a = in.add(t4(ctx, TSR_TYPE_F32, 512, 96));
        tsr_tensor * b = in.add(t4(ctx, TSR_TYPE_F32, 512, 80));
        return tsr_mul_mat(ctx, a, b);
    }, 1e-4);
    REQUIRE(tsr_backend_cuda_set_allow_tf32(be, false));
}

TEST_CASE("cuda ops: mul_mat with Q8_0 and Q4_0 weights on the mat-vec and GEMM paths", "[cuda][device][ops][mul_mat]") {
    CUDA_OR_SKIP(be);
    // K % 256 == 0 takes the staged fast kernel, other K the generic one; N > 8 dequantizes
    const int64_t shapes[][4] = {  // K, M, N, B2
        {512, 200, 1, 1}, {512, 67, 2, 1}, {4096, 96, 5, 1}, {1024, 64, 8, 1}, {96, 33, 1, 1}, {160, 70, 7, 1},
        {256, 48, 17, 1}, {96, 30, 40, 1}, {512, 40, 3, 3}};
    for (tsr_type ta : {TSR_TYPE_Q8_0, TSR_TYPE_Q4_0}) {
        for (const auto & s : shapes) {
            check_vs_cpu(be, tsr_type_name(ta), [&](tsr_context * ctx, case_inputs & in) {
                tsr_tensor * a = in.add(t4(ctx, ta, s[0], s[1], s[3]));
                tsr_tensor * b = in.add(t4(ctx, TSR_TYPE_F32, s[0], s[2], s[3]));
                return tsr_mul_mat(ctx, a, b);
            }, TOL_Q);
        }
    }
}
