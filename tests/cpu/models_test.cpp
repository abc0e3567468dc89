// The ops of model families beyond decoder-only LLMs (issue 17 part B) against
// double-precision references written here from ggml's documented semantics, on every
// ISA path with 2 threads (every node split), plus their shape errors.
#include "cpu_test_util.h"
#include "gemm_test_columns.h"

#include <sstream>
#include <string>

using namespace cput;

namespace {

// A builder that must fail: NULL and a message containing `needle`.
void check_fails(tsr_tensor * t, const char * needle) {
    CHECK(t == nullptr);
    INFO("error: " << tsr_last_error());
    CHECK(std::string(tsr_last_error()).find(needle) != std::string::npos);
}

double mm_threshold(tsr_type t) {
    switch (t) {
        case TSR_TYPE_F32: case TSR_TYPE_F16: return 1e-10;
        case TSR_TYPE_BF16: return 2e-4;   // src1 rounded to bf16 on the vdpbf16ps path
        default: return 5e-4;              // src1 quantized to 8 bits (per 32, or Q8_K per 256)
    }
}

// out[m, e, t] = sum_k as[k, m, ids[e, t]] * b[k, e % n_b, t]
std::vector<double> ref_mul_mat_id(const tsr_tensor * as, const tsr_tensor * b, const std::vector<int32_t> & ids, int64_t n_used) {
    const int64_t K = as->ne[0], M = as->ne[1], n_tok = b->ne[2], n_b = b->ne[1];
    const std::vector<double> A = values(as), Bv = values(b);   // logical order, dequantized once
    std::vector<double> out;
    for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t e = 0; e < n_used; ++e)
            for (int64_t m = 0; m < M; ++m) {
                const double * w = A.data() + (ids[(size_t)(t * n_used + e)] * M + m) * K;
                const double * x = Bv.data() + (t * n_b + e % n_b) * K;
                double s = 0;
                for (int64_t k = 0; k < K; ++k) s += w[k] * x[k];
                out.push_back(s);
            }
    return out;
}

} // namespace

TEST_CASE("mul_mat_id: every weight type, matrix-vector and GEMM experts, b broadcast or per slot", "[cpu][mul_mat]") {
    const int64_t K = 256, M = 37, n_expert = 5, n_used = 2;
    for (tsr_type type : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_Q4_1, TSR_TYPE_Q5_0,
                          TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL, TSR_TYPE_Q2_K, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K})
        for (int64_t n_tok : {int64_t(1), gemm_test_columns::k_quants_on_dots, gemm_test_columns::every_layout})
            for (int64_t n_b : {1, 2}) {
                ctx_holder ctx(32);
                std::mt19937 rng((unsigned)(type * 31 + n_tok * 7 + n_b));
                tsr_tensor * as = tsr_new_tensor_3d(ctx, type, K, M, n_expert);
                fill(as, rng);
                tsr_tensor * b = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, K, n_b, n_tok);
                fill(b, rng);
                // slot 0 is expert 3 for every token, slot 1 walks experts 0..2 (one token picks
                // 3 twice); expert 4 is never used. k_quants_on_dots tokens: expert 3 takes the
                // GEMM but for the K-quants; every_layout (130): expert 3 takes it for every
                // type, experts 0..2 (43-44 pairs) for all but Q2_K
                std::vector<int32_t> idv;
                for (int64_t t = 0; t < n_tok; ++t) {
                    idv.push_back(3);
                    idv.push_back(t == 4 ? 3 : (int32_t)(t % 3));
                }
                tsr_tensor * ids = tsr_new_tensor_2d(ctx, TSR_TYPE_I32, n_used, n_tok);
                for (size_t i = 0; i < idv.size(); ++i) ((int32_t *)ids->data)[i] = idv[i];
                tsr_tensor * out = tsr_mul_mat_id(ctx, as, b, ids);
                REQUIRE(out != nullptr);
                CHECK(out->ne[0] == M);
                CHECK(out->ne[1] == n_used);
                CHECK(out->ne[2] == n_tok);
                std::ostringstream what;
                what << "mul_mat_id " << tsr_type_name(type) << " tokens " << n_tok << " n_b " << n_b;
                check_every_isa(ctx, out, ref_mul_mat_id(as, b, idv, n_used), mm_threshold(type), what.str());
            }
}

TEST_CASE("mul_mat_id: an expert id out of range fails the compute and names the id", "[cpu][mul_mat]") {
    ctx_holder ctx(4);
    tsr_tensor * as = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 32, 8, 4);
    tsr_tensor * b = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 32, 1, 2);
    std::mt19937 rng(5);
    fill(as, rng);
    fill(b, rng);
    tsr_tensor * ids = tsr_new_tensor_2d(ctx, TSR_TYPE_I32, 2, 2);
    const int32_t idv[4] = {0, 1, 2, 7};
    std::memcpy(ids->data, idv, sizeof(idv));
    tsr_tensor * out = tsr_mul_mat_id(ctx, as, b, ids);
    REQUIRE(out != nullptr);
    for (int threads : {1, 2}) {
        backend_holder be(threads);
        tsr_clear_error();
        CHECK(run(be, ctx, out) == TSR_STATUS_FAILED);
        INFO(tsr_last_error());
        CHECK(std::string(tsr_last_error()).find("expert id 7 at ids[1, 1]") != std::string::npos);
        // the good pairs are computed, the bad one is NaN
        double s = 0;
        for (int64_t k = 0; k < 32; ++k) s += at(as, k, 5, 2) * at(b, k, 0, 1);
        CHECK(std::fabs(at(out, 5, 0, 1) - s) < 1e-4);
        CHECK(std::isnan(at(out, 0, 1, 1)));
    }
}

TEST_CASE("mul_mat_id and mul_mat_set_prec: shape errors name the shapes", "[cpu][mul_mat]") {
    ctx_holder ctx(4);
    tsr_tensor * as = tsr_new_tensor_3d(ctx, TSR_TYPE_Q8_0, 64, 8, 4);
    tsr_tensor * b = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 64, 1, 3);
    tsr_tensor * ids = tsr_new_tensor_2d(ctx, TSR_TYPE_I32, 2, 3);
    tsr_tensor * ids_f32 = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 2, 3);
    tsr_tensor * b_short = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 32, 1, 3);
    tsr_tensor * b_4tok = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 64, 1, 4);
    tsr_tensor * b_3rows = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 64, 3, 3);
    const size_t used = tsr_used_mem(ctx);
    check_fails(tsr_mul_mat_id(ctx, as, b, ids_f32), "ids");
    check_fails(tsr_mul_mat_id(ctx, as, b_short, ids), "K of experts");
    check_fails(tsr_mul_mat_id(ctx, as, b_4tok, ids), "differ in tokens");
    check_fails(tsr_mul_mat_id(ctx, as, b_3rows, ids), "do not divide");
    CHECK(tsr_used_mem(ctx) == used);   // a failed op takes no arena memory
    tsr_tensor * ok = tsr_mul_mat_id(ctx, as, b, ids);
    REQUIRE(ok != nullptr);
    CHECK(tsr_mul_mat_set_prec(ok, TSR_PREC_F32));
    CHECK(tsr_get_op_params_i32(ok, 0) == TSR_PREC_F32);
    CHECK_FALSE(tsr_mul_mat_set_prec(b, TSR_PREC_F32));
    CHECK(std::string(tsr_last_error()).find("not MUL_MAT") != std::string::npos);
}

namespace {

// input value or 0 outside [0, n)
double in_or_zero(const tsr_tensor * t, int64_t i0, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) {
    return i0 < 0 || i0 >= t->ne[0] || i1 < 0 || i1 >= t->ne[1] ? 0.0 : at(t, i0, i1, i2, i3);
}

// conv_2d_dw's parameters in the builder's order
struct dw_params {
    int s0, s1, p0, p1, d0, d1;
};
// out[ox, oy, c, n] = sum over taps of kernel c x input channel c, in logical order
std::vector<double> ref_conv_2d_dw(const tsr_tensor * ker, const tsr_tensor * in, const dw_params & q) {
    const int64_t KW = ker->ne[0], KH = ker->ne[1], C = in->ne[2], N = in->ne[3];
    const int64_t OW = (in->ne[0] + 2 * q.p0 - q.d0 * (KW - 1) - 1) / q.s0 + 1;
    const int64_t OH = (in->ne[1] + 2 * q.p1 - q.d1 * (KH - 1) - 1) / q.s1 + 1;
    std::vector<double> ref((size_t)(OW * OH * C * N), 0.0);
    for (size_t i = 0; i < ref.size(); ++i) {
        const int64_t ox = (int64_t)i % OW, oy = (int64_t)i / OW % OH, c = (int64_t)i / (OW * OH) % C, n = (int64_t)i / (OW * OH * C);
        for (int64_t tap = 0; tap < KW * KH; ++tap) {
            const int64_t kx = tap % KW, ky = tap / KW;
            ref[i] += at(ker, kx, ky, 0, c) * in_or_zero(in, ox * q.s0 + kx * q.d0 - q.p0, oy * q.s1 + ky * q.d1 - q.p1, c, n);
        }
    }
    return ref;
}
void check_conv_2d_dw(tsr_context * ctx, tsr_tensor * ker, tsr_tensor * in, const dw_params & q, const std::string & what) {
    REQUIRE(in != nullptr);
    tsr_tensor * out = tsr_conv_2d_dw_direct(ctx, ker, in, q.s0, q.s1, q.p0, q.p1, q.d0, q.d1);
    REQUIRE(out != nullptr);
    check_every_isa(ctx, out, ref_conv_2d_dw(ker, in, q), 1e-10, "conv_2d_dw " + what);  // poisons out before each ISA
}
} // namespace

TEST_CASE("conv_1d, conv_1d_dw, conv_2d_dw, im2col 1-D", "[cpu][ops][conv]") {
    ctx_holder ctx(24);
    std::mt19937 rng(61);
    const int64_t L = 23, IC = 3, OC = 5, N = 2, K = 4;
    for (tsr_type kt : {TSR_TYPE_F32, TSR_TYPE_F16})
        for (int s0 : {1, 3})
            for (int d0 : {1, 2}) {
                const int p0 = 2;
                tsr_tensor * in = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, L, IC, N);
                fill(in, rng);
                tsr_tensor * ker = tsr_new_tensor_3d(ctx, kt, K, IC, OC);
                fill(ker, rng);
                const int64_t OL = (L + 2 * p0 - d0 * (K - 1) - 1) / s0 + 1;
                std::ostringstream what;
                what << tsr_type_name(kt) << " s0 " << s0 << " d0 " << d0;
                std::vector<double> rc, ri;
                for (int64_t n = 0; n < N; ++n)
                    for (int64_t oc = 0; oc < OC; ++oc)
                        for (int64_t ol = 0; ol < OL; ++ol) {
                            double s = 0;
                            for (int64_t ic = 0; ic < IC; ++ic)
                                for (int64_t k = 0; k < K; ++k) {
                                    const int64_t x = ol * s0 + k * d0 - p0;
                                    if (x >= 0 && x < L) s += at(ker, k, ic, oc) * at(in, x, ic, n);
                                }
                            rc.push_back(s);
                        }
                tsr_tensor * c1 = tsr_conv_1d(ctx, ker, in, s0, p0, d0);
                REQUIRE(c1 != nullptr);
                CHECK((c1->ne[0] == OL && c1->ne[1] == OC && c1->ne[2] == N));
                check_every_isa(ctx, c1, rc, 1e-10, "conv_1d " + what.str());
                // im2col 1-D: [IC*K, OL, N], element (ic*K + k, ol, n)
                for (int64_t n = 0; n < N; ++n)
                    for (int64_t ol = 0; ol < OL; ++ol)
                        for (int64_t ic = 0; ic < IC; ++ic)
                            for (int64_t k = 0; k < K; ++k) {
                                const int64_t x = ol * s0 + k * d0 - p0;
                                ri.push_back(x < 0 || x >= L ? 0.0 : at(in, x, ic, n));
                            }
                check_every_isa(ctx, tsr_im2col(ctx, ker, in, s0, 0, p0, 0, d0, 0, false, TSR_TYPE_F32), ri, 0, "im2col 1-D " + what.str());
                // depthwise: kernel [K, 1, IC]
                tsr_tensor * kdw = tsr_new_tensor_3d(ctx, kt, K, 1, IC);
                fill(kdw, rng);
                std::vector<double> rd;
                for (int64_t n = 0; n < N; ++n)
                    for (int64_t c = 0; c < IC; ++c)
                        for (int64_t ol = 0; ol < OL; ++ol) {
                            double s = 0;
                            for (int64_t k = 0; k < K; ++k) {
                                const int64_t x = ol * s0 + k * d0 - p0;
                                if (x >= 0 && x < L) s += at(kdw, k, 0, c) * at(in, x, c, n);
                            }
                            rd.push_back(s);
                        }
                check_every_isa(ctx, tsr_conv_1d_dw(ctx, kdw, in, s0, p0, d0), rd, 1e-10, "conv_1d_dw " + what.str());
            }
    // 2-D depthwise on odd sizes, strides, paddings and dilations per axis
    for (tsr_type kt : {TSR_TYPE_F32, TSR_TYPE_F16}) {
        tsr_tensor * in = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 13, 9, 4, N);
        fill(in, rng);
        tsr_tensor * ker = tsr_new_tensor_4d(ctx, kt, 3, 5, 1, 4);
        fill(ker, rng);
        check_conv_2d_dw(ctx, ker, in, {2, 1, 1, 3, 1, 2}, "s0 2");
    }
}

TEST_CASE("conv_2d_dw: stride-1 vector rows, their tails, bands and input layouts", "[cpu][ops][conv]") {
    ctx_holder ctx(24);
    std::mt19937 rng(67);
    struct dw_case {
        int64_t W, H, C, N, KW, KH;
        dw_params q;
        const char * what;
    };
    // widths below, at and past each ISA's 4-vector step (16, 32, 64 outputs) with a tail;
    // 5 channels (no multiple of a vector width); padding wider than the kernel
    const dw_case cases[] = {
        {37, 6, 5, 2, 3, 3, {1, 1, 1, 1, 1, 1}, "W 37, 3x3, pad 1"},
        {70, 5, 5, 1, 4, 2, {1, 2, 0, 1, 2, 1}, "W 70, 4x2, dilation 2 along W, stride 2 along H"},
        {17, 7, 3, 1, 3, 3, {1, 1, 4, 2, 1, 3}, "W 17, pad 4 > kernel, dilation 3 along H"},
        {1, 4, 2, 1, 1, 3, {1, 1, 0, 1, 1, 1}, "W 1, 1x3"},
        // one plane: split in row bands for the 2 threads, and in cache-sized bands
        {1100, 20, 1, 1, 3, 3, {1, 1, 1, 1, 1, 1}, "W 1100, one plane, bands"},
    };
    for (const dw_case & dc : cases) {
        tsr_tensor * in = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, dc.W, dc.H, dc.C, dc.N);
        fill(in, rng);
        tsr_tensor * ker = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, dc.KW, dc.KH, 1, dc.C);
        fill(ker, rng);
        check_conv_2d_dw(ctx, ker, in, dc.q, dc.what);
    }
    // an F16 input and a transposed F32 view (rows not contiguous) take the converting copy
    tsr_tensor * ker = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 3, 3, 1, 3);
    fill(ker, rng);
    tsr_tensor * in16 = tsr_new_tensor_4d(ctx, TSR_TYPE_F16, 21, 6, 3, 1);
    fill(in16, rng);
    check_conv_2d_dw(ctx, ker, in16, {1, 1, 1, 1, 1, 1}, "F16 input");
    tsr_tensor * hw = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 6, 21, 3, 1);
    fill(hw, rng);
    check_conv_2d_dw(ctx, ker, tsr_permute(ctx, hw, 1, 0, 2, 3), {1, 1, 2, 0, 1, 1}, "transposed input view");
}

TEST_CASE("conv_transpose_1d (stride, padding, dilation, batch), conv_transpose_2d_p0", "[cpu][ops][conv]") {
    ctx_holder ctx(24);
    std::mt19937 rng(67);
    struct cfg { int s0, p0, d0; int64_t L, N; };
    // L 3: fewer input pixels than a GEMM takes (the dot-product path)
    for (const cfg & g : {cfg{1, 0, 1, 17, 1}, cfg{3, 0, 1, 17, 2}, cfg{2, 1, 2, 11, 2}, cfg{2, 0, 1, 3, 1}})
        for (tsr_type kt : {TSR_TYPE_F32, TSR_TYPE_F16}) {
            const int64_t IC = 6, OC = 5, K = 4;
            tsr_tensor * in = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, g.L, IC, g.N);
            fill(in, rng);
            tsr_tensor * ker = tsr_new_tensor_3d(ctx, kt, K, OC, IC);
            fill(ker, rng);
            const int64_t OL = (g.L - 1) * g.s0 - 2 * g.p0 + g.d0 * (K - 1) + 1;
            std::vector<double> ref((size_t)(OL * OC * g.N), 0.0);
            for (int64_t n = 0; n < g.N; ++n)
                for (int64_t oc = 0; oc < OC; ++oc)
                    for (int64_t l = 0; l < g.L; ++l)
                        for (int64_t k = 0; k < K; ++k) {
                            const int64_t ol = l * g.s0 + k * g.d0 - g.p0;
                            if (ol < 0 || ol >= OL) continue;
                            for (int64_t ic = 0; ic < IC; ++ic) ref[(size_t)((n * OC + oc) * OL + ol)] += at(ker, k, oc, ic) * at(in, l, ic, n);
                        }
            tsr_tensor * out = tsr_conv_transpose_1d(ctx, ker, in, g.s0, g.p0, g.d0);
            REQUIRE(out != nullptr);
            CHECK((out->ne[0] == OL && out->ne[1] == OC && out->ne[2] == g.N));
            std::ostringstream what;
            what << "conv_transpose_1d " << tsr_type_name(kt) << " s " << g.s0 << " p " << g.p0 << " d " << g.d0 << " L " << g.L;
            check_every_isa(ctx, out, ref, 1e-10, what.str());
        }
    for (int stride : {1, 2, 3}) {
        const int64_t W = 7, H = 5, IC = 4, OC = 3, KW = 3, KH = 2, N = 2;
        tsr_tensor * in = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, W, H, IC, N);
        fill(in, rng);
        tsr_tensor * ker = tsr_new_tensor_4d(ctx, TSR_TYPE_F16, KW, KH, OC, IC);
        fill(ker, rng);
        const int64_t OW = (W - 1) * stride + KW, OH = (H - 1) * stride + KH;
        std::vector<double> ref((size_t)(OW * OH * OC * N), 0.0);
        for (int64_t n = 0; n < N; ++n)
            for (int64_t oc = 0; oc < OC; ++oc)
                for (int64_t y = 0; y < H; ++y)
                    for (int64_t x = 0; x < W; ++x)
                        for (int64_t ky = 0; ky < KH; ++ky)
                            for (int64_t kx = 0; kx < KW; ++kx)
                                for (int64_t ic = 0; ic < IC; ++ic)
                                    ref[(size_t)(((n * OC + oc) * OH + y * stride + ky) * OW + x * stride + kx)] += at(ker, kx, ky, oc, ic) * at(in, x, y, ic, n);
        check_every_isa(ctx, tsr_conv_transpose_2d_p0(ctx, ker, in, stride), ref, 1e-10, "conv_transpose_2d_p0 stride " + std::to_string(stride));
    }
}

TEST_CASE("pool_1d, pad_reflect_1d, pad_ext, roll", "[cpu][ops]") {
    ctx_holder ctx(8);
    std::mt19937 rng(71);
    const int64_t L = 11, R = 3, Z = 2;
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, L, R, Z);
    fill(a, rng);
    for (int op : {TSR_OP_POOL_MAX, TSR_OP_POOL_AVG}) {
        const int k0 = 3, s0 = 2, p0 = 1;
        tsr_tensor * pl = tsr_pool_1d(ctx, a, (tsr_op_pool)op, k0, s0, p0);
        REQUIRE(pl != nullptr);
        const int64_t OL = (L + 2 * p0 - k0) / s0 + 1;
        CHECK(pl->ne[0] == OL);
        std::vector<double> ref;
        for (int64_t z = 0; z < Z; ++z)
            for (int64_t r = 0; r < R; ++r)
                for (int64_t o = 0; o < OL; ++o) {
                    double v = op == TSR_OP_POOL_MAX ? -1e30 : 0;
                    for (int k = 0; k < k0; ++k) {
                        const int64_t x = o * s0 - p0 + k;
                        if (x < 0 || x >= L) continue;
                        v = op == TSR_OP_POOL_MAX ? std::max(v, at(a, x, r, z)) : v + at(a, x, r, z);
                    }
                    ref.push_back(op == TSR_OP_POOL_MAX ? v : v / k0);
                }
        check_every_isa(ctx, pl, ref, 1e-12, "pool_1d");
    }
    {
        const int p0 = 4, p1 = 10;   // p1 = L - 1: the widest reflection
        std::vector<double> ref;
        for (int64_t z = 0; z < Z; ++z)
            for (int64_t r = 0; r < R; ++r)
                for (int64_t i = -p0; i < L + p1; ++i) ref.push_back(at(a, i < 0 ? -i : i >= L ? 2 * (L - 1) - i : i, r, z));
        check_every_isa(ctx, tsr_pad_reflect_1d(ctx, a, p0, p1), ref, 0, "pad_reflect_1d");
    }
    {
        const int lp[4] = {2, 1, 0, 1}, rp[4] = {3, 0, 2, 1};
        tsr_tensor * pe = tsr_pad_ext(ctx, a, lp[0], rp[0], lp[1], rp[1], lp[2], rp[2], lp[3], rp[3]);
        REQUIRE(pe != nullptr);
        std::vector<double> ref;
        for (int64_t i3 = 0; i3 < pe->ne[3]; ++i3)
            for (int64_t i2 = 0; i2 < pe->ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < pe->ne[1]; ++i1)
                    for (int64_t i0 = 0; i0 < pe->ne[0]; ++i0) {
                        const int64_t j0 = i0 - lp[0], j1 = i1 - lp[1], j2 = i2 - lp[2], j3 = i3 - lp[3];
                        const bool in = j0 >= 0 && j0 < L && j1 >= 0 && j1 < R && j2 >= 0 && j2 < Z && j3 == 0;
                        ref.push_back(in ? at(a, j0, j1, j2) : 0.0);
                    }
        check_every_isa(ctx, pe, ref, 0, "pad_ext");
    }
    {
        const int sh[4] = {-3, 1, 2, 0};
        std::vector<double> ref;
        auto wrap = [](int64_t i, int64_t n) { return ((i % n) + n) % n; };
        for (int64_t z = 0; z < Z; ++z)
            for (int64_t r = 0; r < R; ++r)
                for (int64_t i = 0; i < L; ++i) ref.push_back(at(a, wrap(i - sh[0], L), wrap(r - sh[1], R), wrap(z - sh[2], Z)));
        check_every_isa(ctx, tsr_roll(ctx, a, sh[0], sh[1], sh[2], sh[3]), ref, 0, "roll");
    }
}

TEST_CASE("convolutions, padding and roll: bad shapes name them and take no memory", "[cpu][ops]") {
    ctx_holder ctx(4);
    tsr_tensor * k3 = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 3, 4, 5);
    tsr_tensor * in3 = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 10, 3, 1);
    tsr_tensor * k4 = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 3, 3, 2, 4);
    tsr_tensor * in4 = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 8, 8, 4, 1);
    const size_t used = tsr_used_mem(ctx);
    check_fails(tsr_conv_1d(ctx, k3, in3, 1, 0, 1), "input channels");
    check_fails(tsr_conv_1d(ctx, k3, in3, 0, 0, 1), "strides");
    check_fails(tsr_conv_transpose_1d(ctx, k3, in3, 1, 0, 1), "IC = 3");
    check_fails(tsr_conv_2d_dw_direct(ctx, k4, in4, 1, 1, 0, 0, 1, 1), "[KW, KH, 1, C]");
    check_fails(tsr_conv_transpose_2d_p0(ctx, k4, in4, 0), "stride 0");
    check_fails(tsr_pad_reflect_1d(ctx, in3, 10, 0), "[0, ne0 = 10)");
    check_fails(tsr_pad_ext(ctx, in3, 1, -1, 0, 0, 0, 0, 0, 0), "must be >= 0");
    check_fails(tsr_roll(ctx, in3, 11, 0, 0, 0), "shift 11 of dim 0");
    CHECK(tsr_used_mem(ctx) == used);
}

TEST_CASE("timestep_embedding (even and odd dim)", "[cpu][ops]") {
    ctx_holder ctx(4);
    tsr_tensor * ts = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 3);
    const float tv[3] = {0.0f, 17.5f, 999.0f};
    std::memcpy(ts->data, tv, sizeof(tv));
    for (int dim : {16, 9}) {
        const int max_period = 10000, half = dim / 2;
        std::vector<double> ref;
        for (float t : tv) {
            std::vector<double> row((size_t)dim, 0.0);
            for (int j = 0; j < half; ++j) {
                const double f = std::exp(-std::log((double)max_period) * j / half);
                row[(size_t)j] = std::cos(t * f);
                row[(size_t)(j + half)] = std::sin(t * f);
            }
            ref.insert(ref.end(), row.begin(), row.end());
        }
        // float arguments up to 999: sin/cos of an argument rounded to float (~3e-5 absolute)
        check_every_isa(ctx, tsr_timestep_embedding(ctx, ts, dim, max_period), ref, 1e-8, "timestep_embedding dim " + std::to_string(dim));
    }
}

TEST_CASE("ssm_conv and ssm_scan (Mamba-1, Mamba-2 with groups, state ids)", "[cpu][ops]") {
    ctx_holder ctx(8);
    std::mt19937 rng(73);
    {
        const int64_t d_conv = 4, n_t = 5, d_inner = 7, n_s = 2;
        tsr_tensor * sx = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, d_conv - 1 + n_t, d_inner, n_s);
        tsr_tensor * c = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, d_conv, d_inner);
        fill(sx, rng);
        fill(c, rng);
        // out[i, t, s]: the window of channel i starting at token t, in logical order
        std::vector<double> ref((size_t)(d_inner * n_t * n_s), 0.0);
        for (size_t o = 0; o < ref.size(); ++o) {
            const int64_t i = (int64_t)o % d_inner, t = (int64_t)o / d_inner % n_t, s = (int64_t)o / (d_inner * n_t);
            for (int64_t k = 0; k < d_conv; ++k) ref[o] += at(sx, t + k, i, s) * at(c, k, i);
        }
        check_every_isa(ctx, tsr_ssm_conv(ctx, sx, c), ref, 1e-12, "ssm_conv");
    }
    struct cfg { const char * name; int64_t d_state, head_dim, n_head, n_group; bool mamba1; };
    for (const cfg & g : {cfg{"mamba-1", 16, 1, 6, 1, true}, cfg{"mamba-2", 19, 4, 4, 2, false}}) {
        const int64_t n_t = 3, n_seqs = 2, n_pool = 3;
        tsr_tensor * s = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, g.d_state, g.head_dim, g.n_head, n_pool);
        tsr_tensor * x = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, g.head_dim, g.n_head, n_t, n_seqs);
        tsr_tensor * dt = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, g.n_head, n_t, n_seqs);
        tsr_tensor * A = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, g.mamba1 ? g.d_state : 1, g.n_head);
        tsr_tensor * B = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, g.d_state, g.n_group, n_t, n_seqs);
        tsr_tensor * C = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, g.d_state, g.n_group, n_t, n_seqs);
        tsr_tensor * ids = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, n_seqs);
        for (tsr_tensor * t : {s, x, B, C}) fill(t, rng);
        fill(dt, rng, -3, 25);   // both sides of softplus's cut at 20
        fill(A, rng, -2, 0);
        ((int32_t *)ids->data)[0] = 2;
        ((int32_t *)ids->data)[1] = 0;
        const int64_t ny = g.head_dim * g.n_head * n_t * n_seqs;
        std::vector<double> ref((size_t)(ny + g.d_state * g.head_dim * g.n_head * n_seqs));
        for (int64_t q = 0; q < n_seqs; ++q)
            for (int64_t h = 0; h < g.n_head; ++h)
                for (int64_t r = 0; r < g.head_dim; ++r) {
                    std::vector<double> st((size_t)g.d_state);
                    for (int64_t i = 0; i < g.d_state; ++i) st[(size_t)i] = at(s, i, r, h, ((int32_t *)ids->data)[q]);
                    const int64_t grp = h / (g.n_head / g.n_group);
                    for (int64_t t = 0; t < n_t; ++t) {
                        const double d = at(dt, h, t, q), sp = d > 20 ? d : std::log1p(std::exp(d));
                        double y = 0;
                        for (int64_t i = 0; i < g.d_state; ++i) {
                            const double a = at(A, g.mamba1 ? i : 0, h);
                            st[(size_t)i] = st[(size_t)i] * std::exp(sp * a) + at(B, i, grp, t, q) * at(x, r, h, t, q) * sp;
                            y += st[(size_t)i] * at(C, i, grp, t, q);
                        }
                        ref[(size_t)(((q * n_t + t) * g.n_head + h) * g.head_dim + r)] = y;
                    }
                    for (int64_t i = 0; i < g.d_state; ++i)
                        ref[(size_t)(ny + ((q * g.n_head + h) * g.head_dim + r) * g.d_state + i)] = st[(size_t)i];
                }
        check_every_isa(ctx, tsr_ssm_scan(ctx, s, x, dt, A, B, C, ids), ref, 1e-10, g.name);
    }
}

TEST_CASE("ssm_scan: a state id out of range fails the compute; shape errors", "[cpu][ops]") {
    ctx_holder ctx(4);
    tsr_tensor * s = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 8, 2, 2, 1);
    tsr_tensor * x = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 2, 2, 1, 1);
    tsr_tensor * dt = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 2, 1, 1);
    tsr_tensor * A = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 1, 2);
    tsr_tensor * B = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, 8, 1, 1, 1);
    tsr_tensor * ids = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 1);
    std::mt19937 rng(3);
    for (tsr_tensor * t : {s, x, dt, A, B}) fill(t, rng);
    ((int32_t *)ids->data)[0] = 5;
    tsr_tensor * A3 = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 3, 2);
    const size_t used = tsr_used_mem(ctx);
    check_fails(tsr_ssm_scan(ctx, s, x, dt, A3, B, B, ids), "A ");
    check_fails(tsr_ssm_scan(ctx, s, x, dt, A, B, B, A), "ids");
    check_fails(tsr_ssm_conv(ctx, x, A3), "shorter than the window");
    CHECK(tsr_used_mem(ctx) == used);
    tsr_tensor * out = tsr_ssm_scan(ctx, s, x, dt, A, B, B, ids);
    REQUIRE(out != nullptr);
    backend_holder be(2);
    CHECK(run(be, ctx, out) == TSR_STATUS_FAILED);
    CHECK(std::string(tsr_last_error()).find("state id 5 of sequence 0") != std::string::npos);
}

namespace {

// A linear-attention recurrence in double: per token and head, `step(t, h, st, y)` updates the
// S x S state st (the sequence's, carried over its tokens) and writes the S outputs y.
// Returns [S*H, T] outputs followed by the final states [S*S*H, n_seqs].
std::vector<double> ref_linear_attn(int64_t S, int64_t H, int64_t T, const tsr_tensor * state,
                                    const std::function<void(int64_t, int64_t, std::vector<double> &, double *)> & step) {
    const int64_t n_seqs = state->ne[1], per_seq = T / n_seqs;
    std::vector<double> out((size_t)(S * H * T + S * S * H * n_seqs));
    for (int64_t q = 0; q < n_seqs; ++q)
        for (int64_t h = 0; h < H; ++h) {
            std::vector<double> st((size_t)(S * S));
            for (int64_t e = 0; e < S * S; ++e) st[(size_t)e] = at(state, h * S * S + e, q);
            for (int64_t t = q * per_seq; t < (q + 1) * per_seq; ++t) step(t, h, st, out.data() + (t * H + h) * S);
            for (int64_t e = 0; e < S * S; ++e) out[(size_t)(S * H * T + q * S * S * H + h * S * S + e)] = st[(size_t)e];
        }
    return out;
}

} // namespace

TEST_CASE("rwkv_wkv6, gated_linear_attn, rwkv_wkv7 (2 sequences, state carried over tokens)", "[cpu][ops]") {
    ctx_holder ctx(8);
    std::mt19937 rng(79);
    const int64_t S = 8, H = 3, T = 6, n_seqs = 2;
    auto tok = [&](float lo, float hi) {
        tsr_tensor * t = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, S, H, T);
        fill(t, rng, lo, hi);
        return t;
    };
    tsr_tensor * state = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, S * S * H, n_seqs);
    fill(state, rng);
    {
        tsr_tensor * k = tok(-1, 1), * v = tok(-1, 1), * r = tok(-1, 1), * td = tok(0.5f, 1);
        tsr_tensor * tf = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, S, H);
        fill(tf, rng);
        const auto ref = ref_linear_attn(S, H, T, state, [&](int64_t t, int64_t h, std::vector<double> & st, double * y) {
            for (int64_t j = 0; j < S; ++j) y[j] = 0;
            for (int64_t i = 0; i < S; ++i)
                for (int64_t j = 0; j < S; ++j) {
                    const double kv = at(k, i, h, t) * at(v, j, h, t);
                    double & s = st[(size_t)(i * S + j)];
                    y[j] += at(r, i, h, t) * (at(tf, i, h) * kv + s);
                    s = s * at(td, i, h, t) + kv;
                }
        });
        check_every_isa(ctx, tsr_rwkv_wkv6(ctx, k, v, r, tf, td, state), ref, 1e-10, "rwkv_wkv6");
    }
    {
        tsr_tensor * k = tok(-1, 1), * v = tok(-1, 1), * q = tok(-1, 1), * g = tok(0.5f, 1);
        const double scale = 0.35;
        const auto ref = ref_linear_attn(S, H, T, state, [&](int64_t t, int64_t h, std::vector<double> & st, double * y) {
            for (int64_t j = 0; j < S; ++j) y[j] = 0;
            for (int64_t i = 0; i < S; ++i)
                for (int64_t j = 0; j < S; ++j) {
                    double & s = st[(size_t)(i * S + j)];
                    s = s * at(g, i, h, t) + at(k, i, h, t) * at(v, j, h, t);
                    y[j] += scale * at(q, i, h, t) * s;
                }
        });
        check_every_isa(ctx, tsr_gated_linear_attn(ctx, k, v, q, g, state, (float)scale), ref, 1e-10, "gated_linear_attn");
    }
    {
        tsr_tensor * r = tok(-1, 1), * w = tok(0.5f, 1), * k = tok(-1, 1), * v = tok(-1, 1), * a = tok(-0.5f, 0.5f), * b = tok(-0.5f, 0.5f);
        const auto ref = ref_linear_attn(S, H, T, state, [&](int64_t t, int64_t h, std::vector<double> & st, double * y) {
            for (int64_t i = 0; i < S; ++i) {
                double sa = 0, out = 0;
                for (int64_t j = 0; j < S; ++j) sa += at(a, j, h, t) * st[(size_t)(i * S + j)];
                for (int64_t j = 0; j < S; ++j) {
                    double & s = st[(size_t)(i * S + j)];
                    s = s * at(w, j, h, t) + at(v, i, h, t) * at(k, j, h, t) + sa * at(b, j, h, t);
                    out += s * at(r, j, h, t);
                }
                y[i] = out;
            }
        });
        check_every_isa(ctx, tsr_rwkv_wkv7(ctx, r, w, k, v, a, b, state), ref, 1e-10, "rwkv_wkv7");
    }
    // shape errors name the shapes and take no memory
    tsr_tensor * k = tok(-1, 1);
    tsr_tensor * short_v = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, S, H, T - 1);
    tsr_tensor * state3 = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, S * S * H, 4);
    const size_t used = tsr_used_mem(ctx);
    check_fails(tsr_gated_linear_attn(ctx, k, short_v, k, k, state, 1.0f), "like");
    check_fails(tsr_rwkv_wkv7(ctx, k, k, k, k, k, k, state3), "n_seqs dividing the 6 tokens");
    check_fails(tsr_rwkv_wkv6(ctx, k, k, k, k, k, state), "time_first");
    CHECK(tsr_used_mem(ctx) == used);
}

TEST_CASE("rope_multi: M-RoPE, interleaved M-RoPE and vision sections, YaRN, freq factors", "[cpu][ops]") {
    ctx_holder ctx(12);
    std::mt19937 rng(83);
    const int64_t H = 3, T = 4;
    for (int mode : {TSR_ROPE_TYPE_MROPE, TSR_ROPE_TYPE_VISION, TSR_ROPE_TYPE_IMROPE})
        for (float ext : {0.0f, 1.0f}) {
            const int64_t D = mode == TSR_ROPE_TYPE_VISION ? 32 : 40;
            const int n_dims = mode == TSR_ROPE_TYPE_VISION ? 16 : 32;
            int sections[4] = {3, 5, 4, 2};
            tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, D, H, T);
            fill(a, rng);
            tsr_tensor * pos = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 4 * T);
            for (int64_t i = 0; i < 4 * T; ++i) ((int32_t *)pos->data)[i] = (int32_t)((i * 7) % 23);
            tsr_tensor * ff = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, D / 2);
            fill(ff, rng, 1, 2);
            const float base = 10000.0f, fs = 0.5f, attn = 0.8f, bf = 32.0f, bs = 1.0f;
            const int n_ctx_orig = 2048;
            tsr_tensor * r = tsr_rope_multi(ctx, a, pos, ff, n_dims, sections, mode, n_ctx_orig, base, fs, ext, attn, bf, bs);
            REQUIRE(r != nullptr);
            auto corr_dim = [&](double n_rot) { return n_dims * std::log(n_ctx_orig / (n_rot * 2 * M_PI)) / (2 * std::log((double)base)); };
            const double c0 = std::max(0.0, std::floor(corr_dim(bf))), c1 = std::min((double)n_dims - 1, std::ceil(corr_dim(bs)));
            const int start[5] = {0, 3, 8, 12, 14};
            std::vector<double> ref;
            for (int64_t t = 0; t < T; ++t)
                for (int64_t h = 0; h < H; ++h) {
                    std::vector<double> out((size_t)D);
                    for (int64_t i = 0; i < D; ++i) out[(size_t)i] = at(a, i, h, t);
                    const int64_t n_pairs = mode == TSR_ROPE_TYPE_VISION ? D / 2 : n_dims / 2;
                    for (int64_t k = 0; k < n_pairs; ++k) {
                        const int sector = (int)(k % 14);
                        int stream = 0;
                        if (mode == TSR_ROPE_TYPE_IMROPE) {
                            // Qwen3-VL: t, h, w, t, h, w, ... while a stream has pairs left, then extra
                            stream = sector % 3;
                            if (sector >= 3 * sections[stream]) stream = 3;
                        } else {
                            while (sector >= start[stream + 1]) ++stream;
                        }
                        // vision: each section's angles start again at its first pair
                        const int64_t steps = mode == TSR_ROPE_TYPE_VISION ? sector - start[stream] : k;
                        const double p = ((int32_t *)pos->data)[t + stream * T];
                        const double theta_ext = p * std::pow((double)base, -2.0 * (double)steps / n_dims) / at(ff, k);
                        double theta = fs * theta_ext, ms = attn;
                        if (ext != 0) {
                            const double y = ((double)k - c0) / std::max(0.001, c1 - c0);
                            const double ramp = (1 - std::min(1.0, std::max(0.0, y))) * ext;
                            theta = theta * (1 - ramp) + theta_ext * ramp;
                            ms *= 1 + 0.1 * std::log(1 / fs);
                        }
                        const int64_t ia = k, ib = k + (mode == TSR_ROPE_TYPE_VISION ? n_dims : n_dims / 2);
                        const double x0 = at(a, ia, h, t), x1 = at(a, ib, h, t);
                        out[(size_t)ia] = (x0 * std::cos(theta) - x1 * std::sin(theta)) * ms;
                        out[(size_t)ib] = (x0 * std::sin(theta) + x1 * std::cos(theta)) * ms;
                    }
                    ref.insert(ref.end(), out.begin(), out.end());
                }
            std::ostringstream what;
            what << "rope_multi mode " << mode << " ext " << ext;
            check_every_isa(ctx, r, ref, 1e-10, what.str());
        }
    int bad[4] = {3, 5, 4, 2};
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, 32, 2, 3);
    tsr_tensor * pos3 = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 3);
    tsr_tensor * pos12 = tsr_new_tensor_1d(ctx, TSR_TYPE_I32, 12);
    const size_t used = tsr_used_mem(ctx);
    check_fails(tsr_rope_multi(ctx, a, pos3, nullptr, 16, bad, TSR_ROPE_TYPE_MROPE, 0, 1e4f, 1, 0, 1, 0, 0), "4 * n_tokens = 12");
    check_fails(tsr_rope_multi(ctx, a, pos12, nullptr, 16, bad, TSR_ROPE_TYPE_NEOX, 0, 1e4f, 1, 0, 1, 0, 0), "mode 2");
    check_fails(tsr_rope_multi(ctx, a, pos12, nullptr, 8, bad, TSR_ROPE_TYPE_VISION, 0, 1e4f, 1, 0, 1, 0, 0), "n_dims 8");
    CHECK(tsr_used_mem(ctx) == used);
}

TEST_CASE("win_part / win_unpart round trip with padding, get_rel_pos, add_rel_pos (also in place)", "[cpu][ops]") {
    // a 7 x 5 image in 3 x 3 windows: 3 x 2 windows, the last column and row padded
    const int64_t C = 5, W = 7, H = 5, npx = 3, npy = 2;
    const int w = 3;
    ctx_holder ctx(8);
    std::mt19937 rng(89);
    tsr_tensor * img = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, C, W, H);
    fill(img, rng);
    tsr_tensor * parts = tsr_win_part(ctx, img, w);
    REQUIRE(parts != nullptr);
    CHECK(parts->ne[3] == npx * npy);
    std::vector<double> ref;
    for (int64_t win = 0; win < npx * npy; ++win)
        for (int64_t y = 0; y < w; ++y)
            for (int64_t x = 0; x < w; ++x)
                for (int64_t c = 0; c < C; ++c) {
                    const int64_t ix = (win % npx) * w + x, iy = (win / npx) * w + y;
                    ref.push_back(ix < W && iy < H ? at(img, c, ix, iy) : 0.0);
                }
    check_every_isa(ctx, parts, ref, 0, "win_part");
    check_every_isa(ctx, tsr_win_unpart(ctx, parts, (int)W, (int)H, w), values(img), 0, "win_unpart(win_part(x)) == x");

    const int qh = 4;
    for (tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16}) {
        tsr_tensor * table = tsr_new_tensor_2d(ctx, t, C, 2 * qh - 1);
        fill(table, rng);
        std::vector<double> rr;
        for (int64_t q = 0; q < qh; ++q)
            for (int64_t k = 0; k < qh; ++k)
                for (int64_t c = 0; c < C; ++c) rr.push_back(at(table, c, qh - 1 - k + q));
        check_every_isa(ctx, tsr_get_rel_pos(ctx, table, qh, qh), rr, 0, std::string("get_rel_pos ") + tsr_type_name(t));
    }

    const int64_t Wr = 3, n1 = 2, n2 = 3, n3 = 2;
    tsr_tensor * a = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, Wr * Wr, n1 * n2, n3);
    tsr_tensor * pw = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, Wr, n1, n2, n3);
    tsr_tensor * ph = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, Wr, n1, n2, n3);
    for (tsr_tensor * x : {a, pw, ph}) fill(x, rng);
    std::vector<double> ra;
    for (int64_t i3 = 0; i3 < n3; ++i3)
        for (int64_t i1 = 0; i1 < n1 * n2; ++i1)
            for (int64_t y = 0; y < Wr; ++y)
                for (int64_t x = 0; x < Wr; ++x)
                    ra.push_back(at(a, x + Wr * y, i1, i3) + at(ph, y, i1 % n1, i1 / n1, i3) + at(pw, x, i1 % n1, i1 / n1, i3));
    check_every_isa(ctx, tsr_add_rel_pos(ctx, a, pw, ph), ra, 1e-14, "add_rel_pos");
    tsr_tensor * ip = tsr_add_rel_pos(ctx, tsr_dup(ctx, a), pw, ph);
    REQUIRE(tsr_op_can_inplace(ip, 0));
    CHECK_FALSE(tsr_op_can_inplace(ip, 1));
    ip->data = ip->src[0]->data;   // as gallocr places an in-place node
    check_every_isa(ctx, ip, ra, 1e-14, "add_rel_pos in place");

    const size_t used = tsr_used_mem(ctx);
    check_fails(tsr_win_unpart(ctx, parts, (int)W, (int)H + 4, w), "windows of a 7 x 9 image");
    check_fails(tsr_get_rel_pos(ctx, img, 4, 4), "[C, 2*4 - 1]");
    check_fails(tsr_add_rel_pos(ctx, a, pw, img), "must be [W, n1, n2, n3]");
    CHECK(tsr_used_mem(ctx) == used);
}
