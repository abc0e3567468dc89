// The ops of model families beyond decoder-only LLMs (issue 17 part B) against
// double-precision references written here from ggml's documented semantics, on every
// ISA path with 2 threads (every node split), plus their shape errors.
#include "cpu_test_util.h"

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
    const int64_t K = as->ne[0], M = as->ne[1], n_tok = b->ne[2];
    std::vector<double> out;
    for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t e = 0; e < n_used; ++e)
            for (int64_t m = 0; m < M; ++m) {
                double s = 0;
                for (int64_t k = 0; k < K; ++k) s += at(as, k, m, ids[(size_t)(t * n_used + e)]) * at(b, k, e % b->ne[1], t);
                out.push_back(s);
            }
    return out;
}

} // namespace

TEST_CASE("mul_mat_id: every weight type, matrix-vector and GEMM experts, b broadcast or per slot", "[cpu][mul_mat]") {
    const int64_t K = 256, M = 37, n_expert = 5, n_used = 2;
    for (tsr_type type : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_Q5_1,
                          TSR_TYPE_Q4_K, TSR_TYPE_Q6_K})
        for (int64_t n_tok : {1, 9})
            for (int64_t n_b : {1, 2}) {
                ctx_holder ctx(32);
                std::mt19937 rng((unsigned)(type * 31 + n_tok * 7 + n_b));
                tsr_tensor * as = tsr_new_tensor_3d(ctx, type, K, M, n_expert);
                fill(as, rng);
                tsr_tensor * b = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, K, n_b, n_tok);
                fill(b, rng);
                // slot 0 is expert 3 for every token (9 tokens: its GEMM path), slot 1 walks
                // experts 0..2 (one token picks 3 twice); expert 4 is never used
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
