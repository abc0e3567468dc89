// mul_mat on every weight type x every ISA path x odd shapes, broadcasting and
// non-contiguous operands, against a double-precision reference computed here.
#include "cpu_test_util.h"
#include "gemm_test_columns.h"

#include <initializer_list>
#include <sstream>
#include <string>

using namespace cput;

namespace {

double threshold(tsr_type t) {
    switch (t) {
        case TSR_TYPE_F32: return 1e-10;
        case TSR_TYPE_F16: return 1e-9;
        case TSR_TYPE_BF16: return 2e-4;   // src1 rounded to bf16 on the vdpbf16ps path
        default: return 5e-4;              // src1 quantized to 8 bits (per 32, or Q8_K per 256)
    }
}

// Every element of t (tsr_get_f32_nd, the format's decoding), read once: the sums below
// reuse each row N or M times, and a quantized element costs a block's decoding.
std::vector<double> elements(const tsr_tensor * t) {
    std::vector<double> v;
    v.reserve((size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]));
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) v.push_back(at(t, i0, i1, i2, i3));
    return v;
}

// ref[n, m, i2, i3] = sum_k a[k, m, i2/r2, i3/r3] * b[k, n, i2, i3]
std::vector<double> ref_mul_mat(const tsr_tensor * a, const tsr_tensor * b) {
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const std::vector<double> A = elements(a), B = elements(b);
    std::vector<double> out;
    for (int64_t i3 = 0; i3 < b->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < b->ne[2]; ++i2)
            for (int64_t n = 0; n < N; ++n)
                for (int64_t m = 0; m < M; ++m) {
                    const double * ar = &A[(size_t)((((i3 / r3) * a->ne[2] + i2 / r2) * M + m) * K)];
                    const double * br = &B[(size_t)(((i3 * b->ne[2] + i2) * N + n) * K)];
                    double s = 0;
                    for (int64_t k = 0; k < K; ++k) s += ar[k] * br[k];
                    out.push_back(s);
                }
    return out;
}

// One product on every ISA path with each thread count in `threads` (one reference for all).
void check_mul_mat(tsr_type type, int64_t K, int64_t M, int64_t N, int64_t a2, int64_t a3, int64_t b2, int64_t b3,
                   bool transposed_b, std::initializer_list<int> threads) {
    ctx_holder ctx(64);
    std::mt19937 rng((unsigned)(K * 131 + M * 7 + N + type));
    tsr_tensor * a = tsr_new_tensor_4d(ctx, type, K, M, a2, a3);
    fill(a, rng);
    tsr_tensor * b;
    if (transposed_b) {
        tsr_tensor * bt = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, N, K, b2, b3);
        fill(bt, rng);
        b = tsr_transpose(ctx, bt);
    } else {
        b = tsr_new_tensor_4d(ctx, TSR_TYPE_F32, K, N, b2, b3);
        fill(b, rng);
    }
    tsr_tensor * c = tsr_mul_mat(ctx, a, b);
    REQUIRE(c != nullptr);
    const std::vector<double> ref = ref_mul_mat(a, b);
    for (int n_threads : threads) {
        std::ostringstream what;
        what << "type " << tsr_type_name(type) << " K " << K << " M " << M << " N " << N << " batch " << b2 << "x" << b3
             << " threads " << n_threads << (transposed_b ? " b^T" : "");
        check_every_isa(ctx, c, ref, threshold(type), what.str(), n_threads);
    }
}

void check_mul_mat(tsr_type type, int64_t K, int64_t M, int64_t N, int64_t a2, int64_t a3, int64_t b2, int64_t b3,
                   bool transposed_b, int n_threads = 2) {
    check_mul_mat(type, K, M, N, a2, a3, b2, b3, transposed_b, {n_threads});
}

const tsr_type kTypes[] = {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0};

// Weights and activations at the int8 extremes, where the 16-bit pair sums of u8 x s8
// instructions (vpmaddubsw) saturate unless a kernel keeps them in range: Q8_0 bytes made
// unsigned (0..255) times activations of +-127 reach 2 * 255 * 127 = 64770. Rows mix
// all-max, all-min, random and pairwise alternating extremes (Q8_0: -128/127, Q4_0:
// nibbles 0/15); columns are +s, -s or random +-s, which quantize to exactly +-127. All
// values are exact, so the results must match to rounding, far below any saturation.
void check_extremes(tsr_type type, int64_t K, int64_t M, int64_t N, int n_threads = 2) {
    ctx_holder ctx(64);
    std::mt19937 rng((unsigned)(K + M * 3 + N * 5 + type));
    tsr_tensor * a = tsr_new_tensor_2d(ctx, type, K, M);
    const int lo = type == TSR_TYPE_Q8_0 ? -128 : 0, hi = type == TSR_TYPE_Q8_0 ? 127 : 15;
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t blk = 0; blk < K / 32; ++blk) {
            int v[32];
            for (int j = 0; j < 32; ++j) {
                switch (m % 4) {
                    case 0: v[j] = hi; break;
                    case 1: v[j] = lo; break;
                    case 2: v[j] = (rng() & 1) ? hi : lo; break;
                    default: v[j] = ((j / 2 + blk) & 1) ? hi : lo; break;
                }
            }
            const tsr_fp16_t d = tsr_fp32_to_fp16(0.0625f * (float)(1 + m % 3));
            if (type == TSR_TYPE_Q8_0) {
                tsr_block_q8_0 * q = (tsr_block_q8_0 *)((char *)a->data + m * a->nb[1]) + blk;
                q->d = d;
                for (int j = 0; j < 32; ++j) q->qs[j] = (int8_t)v[j];
            } else {
                tsr_block_q4_0 * q = (tsr_block_q4_0 *)((char *)a->data + m * a->nb[1]) + blk;
                q->d = d;
                for (int j = 0; j < 16; ++j) q->qs[j] = (uint8_t)(v[j] | (v[j + 16] << 4));
            }
        }
    }
    tsr_tensor * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, K, N);
    for (int64_t n = 0; n < N; ++n) {
        const float s = 0.5f + 0.25f * (float)n;
        for (int64_t k = 0; k < K; ++k) {
            const bool neg = n % 3 == 1 || (n % 3 == 2 && (rng() & 1));
            tsr_set_f32_nd(b, k, n, 0, 0, neg ? -s : s);
        }
    }
    tsr_tensor * c = tsr_mul_mat(ctx, a, b);
    REQUIRE(c != nullptr);
    const std::vector<double> ref = ref_mul_mat(a, b);
    std::ostringstream what;
    what << "extremes: type " << tsr_type_name(type) << " K " << K << " M " << M << " N " << N;
    check_every_isa(ctx, c, ref, 1e-10, what.str(), n_threads);
}

} // namespace

TEST_CASE("mul_mat: every type and ISA, odd shapes", "[cpu][mul_mat]") {
    for (tsr_cpu_isa i : {TSR_CPU_ISA_AVX2, TSR_CPU_ISA_AVX512, TSR_CPU_ISA_AMX, TSR_CPU_ISA_NEON})
        if (!tsr_cpu_isa_supported(i)) WARN("skipped ISA path (not on this CPU): " << tsr_cpu_isa_name(i));
    struct shape { int64_t K, M, N; };
    const shape shapes[] = {{32, 1, 1}, {64, 7, 1}, {96, 33, 7}, {288, 70, 13}, {64, 1, 33}, {1024, 40, 12}, {4096, 3, 2}, {672, 5, 1}};
    for (tsr_type t : kTypes)
        for (const shape & s : shapes) check_mul_mat(t, s.K, s.M, s.N, 1, 1, 1, 1, false);
}

// Shapes that walk every loop of the blocked GEMM (N >= 6): several k blocks with a short
// last one (K > kc for every kernel), M blocks past mc with a partial last tile (one thread
// gets all of M), N past the 528-column block, N and M not multiples of any tile.
TEST_CASE("mul_mat: GEMM blocking edges", "[cpu][mul_mat]") {
    for (tsr_type t : kTypes) {
        check_mul_mat(t, 2080, 150, 11, 1, 1, 1, 1, false, {1, 2});
        check_mul_mat(t, 64, 20, 530, 1, 1, 1, 1, false, 2);
        check_mul_mat(t, 1056, 21, 10, 2, 1, 4, 3, false, 2);
    }
}

TEST_CASE("mul_mat: int8 extremes do not saturate", "[cpu][mul_mat]") {
    for (tsr_type t : {TSR_TYPE_Q8_0, TSR_TYPE_Q4_0}) {
        check_extremes(t, 2112, 37, 11);     // GEMM: 3 k blocks, edge tiles in M and N
        check_extremes(t, 256, 64, 24, 1);   // GEMM: whole tiles only
        check_extremes(t, 2112, 9, 3);       // dot products (N below the GEMM minimum)
    }
}

TEST_CASE("mul_mat: ragged K for float types", "[cpu][mul_mat]") {
    for (tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16}) {
        check_mul_mat(t, 1, 5, 3, 1, 1, 1, 1, false);
        check_mul_mat(t, 7, 33, 9, 1, 1, 1, 1, false);
        check_mul_mat(t, 33, 17, 20, 1, 1, 1, 1, false);
        check_mul_mat(t, 4097, 2, 7, 1, 1, 1, 1, false);
    }
}

TEST_CASE("mul_mat: broadcasting over dims 2 and 3", "[cpu][mul_mat]") {
    for (tsr_type t : kTypes) {
        check_mul_mat(t, 64, 9, 3, 2, 1, 4, 3, false);
        check_mul_mat(t, 32, 40, 8, 1, 3, 2, 3, false);
    }
}

TEST_CASE("mul_mat: non-contiguous operands", "[cpu][mul_mat]") {
    for (tsr_type t : kTypes) {
        check_mul_mat(t, 64, 13, 9, 1, 1, 2, 1, true);
        check_mul_mat(t, 32, 20, 2, 2, 1, 2, 1, true);
    }
}

// Shapes around the GEMM tiles of every path (x86 16x6 / 32x12 / 32x6, NEON 8x12): M and
// N off the tile, several k blocks (float kc 256/512, integer kc up to 1024) with a ragged
// last one, more than one GEMM_NC column block, batched/broadcast src0, transposed src1.
TEST_CASE("mul_mat: GEMM edge tiles and k blocks", "[cpu][mul_mat]") {
    for (tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16}) {
        check_mul_mat(t, 300, 19, 25, 1, 1, 1, 1, false);    // 2 k blocks, ragged K, M 8+8+3, N 12+12+1
        check_mul_mat(t, 545, 9, 6, 1, 1, 1, 1, false);      // 3 k blocks, N = GEMM_MIN_N
        check_mul_mat(t, 47, 30, 14, 2, 1, 4, 1, false);     // broadcast src0 over dim 2
        check_mul_mat(t, 70, 21, 15, 1, 1, 2, 1, true);      // non-contiguous src1
        check_mul_mat(t, 33, 11, 540, 1, 1, 1, 1, false);    // two GEMM_NC column blocks
    }
    for (tsr_type t : {TSR_TYPE_Q8_0, TSR_TYPE_Q4_0}) {
        check_mul_mat(t, 1088, 11, 14, 1, 1, 1, 1, false);   // 2+ integer k blocks, M and N off the tile
        check_mul_mat(t, 96, 13, 7, 2, 1, 4, 1, false);      // broadcast src0 over dim 2
        check_mul_mat(t, 64, 10, 9, 1, 1, 2, 1, true);       // non-contiguous src1
    }
}

// src0 rows a view into wider rows (row stride > K): matrix-vector (4 rows at once, ragged K
// tails of 4 and of 1..3) and GEMM read rows at the stride, not at K.
TEST_CASE("mul_mat: float src0 with padded rows, ragged K", "[cpu][mul_mat]") {
    for (tsr_type t : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16})
        for (int64_t K : {3, 13, 45, 260})
            for (int64_t N : {1, 9}) {
                ctx_holder ctx(16);
                std::mt19937 rng((unsigned)(K * 31 + N + t));
                const int64_t M = 18;
                tsr_tensor * wide = tsr_new_tensor_2d(ctx, t, K + 5, M);
                fill(wide, rng);
                tsr_tensor * a = tsr_view_2d(ctx, wide, K, M, wide->nb[1], 0);
                tsr_tensor * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, K, N);
                fill(b, rng);
                tsr_tensor * c = tsr_mul_mat(ctx, a, b);
                const std::vector<double> ref = ref_mul_mat(a, b);
                for (tsr_cpu_isa isa : isas()) {
                    isa_scope s(isa);
                    backend_holder be(2);
                    INFO("type " << tsr_type_name(t) << " K " << K << " N " << N << " isa " << tsr_cpu_isa_name(isa));
                    REQUIRE(run(be, ctx, c) == TSR_STATUS_SUCCESS);
                    CHECK(nmse(values(c), ref) < threshold(t));
                }
            }
}

// Matrix-vector and N < 6 take the dot-product path: each thread's row range is cut into
// four parts walked side by side, with the leftover rows after them; quantized rows end in
// blocks past the last group of 4. M values leave 0..3 rows over and give parts of 1 row.
TEST_CASE("mul_mat: matrix-vector in four streams with leftover rows and blocks", "[cpu][mul_mat]") {
    for (tsr_type t : kTypes)
        for (int64_t K : {160, 4128})
            for (int64_t M : {4, 6, 203})
                for (int64_t N : {1, 3})
                    check_mul_mat(t, K, M, N, 1, 1, 1, 1, false, {1, 2});
}

// Quantized matrix-vector rows of 1..8 blocks: 0..3 blocks past the last group of 4 (and
// rows shorter than one group), M leaving 1 and 3 rows over for the lda = 0 calls.
TEST_CASE("mul_mat: quantized matrix-vector, 0..3 blocks past a group of 4", "[cpu][mul_mat]") {
    for (tsr_type t : {TSR_TYPE_Q8_0, TSR_TYPE_Q4_0})
        for (int64_t K : {32, 96, 160, 192, 224, 256})
            for (int64_t M : {5, 19})
                for (int64_t N : {1, 2}) check_mul_mat(t, K, M, N, 1, 1, 1, 1, false, 1);
}

TEST_CASE("mul_mat: 1 and N threads give bitwise equal results", "[cpu][mul_mat][threads]") {
    for (tsr_type t : kTypes) {
        ctx_holder ctx(32);
        std::mt19937 rng(7);
        tsr_tensor * a = tsr_new_tensor_2d(ctx, t, 256, 67);
        tsr_tensor * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 256, 19);
        fill(a, rng);
        fill(b, rng);
        tsr_tensor * c = tsr_mul_mat(ctx, a, b);
        tsr_tensor * g = tsr_mul_mat(ctx, a, tsr_view_2d(ctx, b, 256, 1, b->nb[1], 0));  // matrix-vector
        for (tsr_cpu_isa isa : isas()) {
            isa_scope s(isa);
            std::vector<double> r1, r3, g1, g3;
            {
                backend_holder be(1);
                REQUIRE(run(be, ctx, c) == TSR_STATUS_SUCCESS);
                r1 = values(c);
                REQUIRE(run(be, ctx, g) == TSR_STATUS_SUCCESS);
                g1 = values(g);
            }
            {
                backend_holder be(3);
                REQUIRE(run(be, ctx, c) == TSR_STATUS_SUCCESS);
                r3 = values(c);
                REQUIRE(run(be, ctx, g) == TSR_STATUS_SUCCESS);
                g3 = values(g);
            }
            INFO("type " << tsr_type_name(t) << " isa " << tsr_cpu_isa_name(isa));
            CHECK(r1 == r3);
            CHECK(g1 == g3);
        }
    }
}

TEST_CASE("mul_mat: large shapes", "[cpu][mul_mat][.big]") {
    for (tsr_type t : kTypes) check_mul_mat(t, 1024, 300, 130, 1, 1, 1, 1, false, 2);
}

namespace {
const tsr_type kRowQuants[] = {TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL, TSR_TYPE_Q2_K,
                               TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K};
} // namespace

// The reference: doubles on the weights as the core decodes them (tested in tests/core).
// K-quants go through integer dot products on activations quantized to Q8_K, the others
// on activations quantized per 32 (yq8).
TEST_CASE("mul_mat: Q4_1, Q5_0, Q5_1, IQ4_NL and K-quant weights", "[cpu][mul_mat][quant]") {
    for (tsr_type t : kRowQuants) {
        const int64_t B = tsr_blck_size(t);
        check_mul_mat(t, 8 * B, 37, 1, 1, 1, 1, 1, false, 1);    // matrix-vector
        check_mul_mat(t, 2 * B, 203, 3, 1, 1, 1, 1, false, 2);   // few columns, two threads, 3 rows past a group of 4
        check_mul_mat(t, 4 * B, 21, gemm_test_columns::all_but_q2_k, 1, 1, 1, 1, false, 2);       // the GEMM but for Q2_K
        check_mul_mat(t, 4 * B, 21, gemm_test_columns::every_file_layout, 1, 1, 1, 1, false, 2);  // every type's GEMM
        check_mul_mat(t, B, 9, 5, 2, 1, 4, 3, false, 2);         // broadcast over dims 2 and 3
        check_mul_mat(t, 2 * B, 13, 9, 1, 1, 2, 1, true, 2);     // transposed (non-contiguous) src1
    }
}

// Matrix-vector of these types on the 4-row kernels: parts of 1 row and of many, rows left
// over, one and two threads (each thread's range split in four); the 32-element
// types' rows end 1 block past a group of 4.
TEST_CASE("mul_mat: matrix-vector of the K-quant and 32-element types in four streams", "[cpu][mul_mat][quant]") {
    for (tsr_type t : kRowQuants)
        for (int64_t M : {6, 47})
            for (int nth : {1, 2}) check_mul_mat(t, tsr_blck_size(t) == 32 ? 160 : 512, M, 1, 1, 1, 1, 1, false, nth);
}

// The packed int8 GEMM of these types (weights repacked as Q8_0 panels): K over two k
// blocks of the kernels (kc 512 / 1024) with a partial one, M past a panel of rows, N past
// every column count from which a type takes the GEMM (every_file_layout) and off the tiles.
TEST_CASE("mul_mat: GEMM of the requantized types over k blocks and row panels", "[cpu][mul_mat][quant]") {
    for (tsr_type t : kRowQuants) check_mul_mat(t, 1280, 37, gemm_test_columns::every_file_layout, 1, 1, 1, 1, false, 2);
}

namespace {

// Activations that quantize to 8 bits per 32 without error: integers -127..127 times a
// power of two per block, one of them +-127 (the block's step is then that power exactly).
std::vector<float> on_grid_activations(int64_t K, int64_t N, std::mt19937 & rng) {
    std::vector<float> x((size_t)(K * N));
    for (int64_t blk = 0; blk < K * N / 32; ++blk) {
        const float step = std::ldexp(1.0f, -(int)(3 + blk % 5));
        for (int j = 0; j < 32; ++j) x[(size_t)(blk * 32 + j)] = step * (float)((int)(rng() % 255) - 127);
        x[(size_t)(blk * 32 + blk % 32)] = step * ((blk & 1) ? 127.0f : -127.0f);
    }
    return x;
}

} // namespace

// Q4_1, Q5_1, Q3_K, Q4_K, Q5_K and Q6_K pack exactly (levels, scales, mins): their GEMM is the
// format's weights against the 8-bit activations, so against the double product of the
// dequantized weights it errs by the activations' quantization only, element by element:
// at most sum |w| * step / 2 (step: the block's amax / 127), and nothing for activations on
// their 8-bit grid (blocks of 32; the paths that quantize them per 256 as Q8_K, the scalar
// path's K-quant dots and the AMX path's Q6_K GEMM, have the bound of 256-element blocks on
// the grid too, which is not theirs); float rounding on top (1e-5 of sum (|w| + the block's largest |w|) |x|,
// the min's correction cancelling up to that). K spans two k blocks of every kernel, M a
// partial row panel. The requantizing packers erred by up to half a step of 1/254 of each
// block's largest weight on top: far past the bound on the grid.
TEST_CASE("mul_mat: GEMM of the exactly packed types errs by the activations' quantization only", "[cpu][mul_mat][quant]") {
    const int64_t K = 1280, M = 37, N = gemm_test_columns::exactly_packed;  // every type here takes the GEMM
    for (tsr_type t : {TSR_TYPE_Q4_1, TSR_TYPE_Q5_1, TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K})
        for (bool on_grid : {true, false}) {
            std::mt19937 rng((unsigned)(t * 2 + on_grid));
            ctx_holder ctx(16);
            tsr_tensor * a = tsr_new_tensor_2d(ctx, t, K, M);
            tsr_tensor * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, K, N);
            std::vector<float> wf((size_t)(K * M));
            for (auto & v : wf) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
            REQUIRE(tsr_from_float_row(t, wf.data(), a->data, K * M));
            REQUIRE(tsr_to_float_row(t, a->data, wf.data(), K * M));
            std::vector<float> x = on_grid ? on_grid_activations(K, N, rng) : std::vector<float>((size_t)(K * N));
            if (!on_grid)
                for (auto & v : x) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
            std::memcpy(b->data, x.data(), x.size() * 4);
            tsr_tensor * c = tsr_mul_mat(ctx, a, b);
            // tol[0]: activations quantized in blocks of 32, tol[1]: in blocks of 256
            std::vector<double> ref((size_t)(M * N)), tol[2] = {ref, ref};
            for (int g = 0; g < 2; ++g) {
                const int64_t G = g ? 256 : 32;
                for (int64_t n = 0; n < N; ++n)
                    for (int64_t m = 0; m < M; ++m) {
                        double sum = 0, act = 0, mag = 0;
                        for (int64_t k0 = 0; k0 < K; k0 += G) {
                            double xmax = 0;
                            for (int64_t k = k0; k < k0 + G; ++k) xmax = std::max(xmax, std::fabs((double)x[(size_t)(n * K + k)]));
                            for (int64_t k = k0; k < k0 + G; k += 32) {
                                double wmax = 0;
                                for (int64_t i = k; i < k + 32; ++i) wmax = std::max(wmax, std::fabs((double)wf[(size_t)(m * K + i)]));
                                for (int64_t i = k; i < k + 32; ++i) {
                                    const double w = wf[(size_t)(m * K + i)], xv = x[(size_t)(n * K + i)];
                                    sum += w * xv;
                                    act += std::fabs(w) * xmax / 127 / 2;
                                    mag += (std::fabs(w) + wmax) * std::fabs(xv);
                                }
                            }
                        }
                        ref[(size_t)(n * M + m)] = sum;
                        tol[g][(size_t)(n * M + m)] = (on_grid && !g ? 0.0 : act * (1 + 1e-6)) + 1e-5 * mag;
                    }
            }
            for (tsr_cpu_isa isa : isas()) {
                const bool per_256 = tsr_blck_size(t) == 256 &&
                                     (isa == TSR_CPU_ISA_SCALAR || (t == TSR_TYPE_Q6_K && (isa == TSR_CPU_ISA_AVX512 || isa == TSR_CPU_ISA_AMX)));
                const std::vector<double> & bound = tol[per_256];
                const std::vector<double> got = values_on(isa, 2, ctx, c);
                int bad = 0;
                double worst = 0;
                for (size_t i = 0; i < ref.size(); ++i) {
                    bad += !(std::fabs(got[i] - ref[i]) <= bound[i]);
                    worst = std::max(worst, std::fabs(got[i] - ref[i]) / bound[i]);
                }
                INFO(tsr_type_name(t) << (on_grid ? " on the grid" : " random") << " isa " << tsr_cpu_isa_name(isa) << " worst error / bound "
                                      << worst);
                CHECK(bad == 0);
            }
        }
}

// The AMX path's GEMMs sum the same int8 products exactly and scale them with the VNNI
// kernels' float operations in the same order (kernels_amx.inl): on every quantized type but
// Q6_K (its own GEMM on AMX, against Q8_K activations: the next test) they give the AVX-512
// path's bits. Shapes: K over two k blocks (kc 1024) with a partial one, M ending in a
// partial 32-row panel, N in a partial 16-column panel, and N past the GEMM's 528-column
// block.
TEST_CASE("mul_mat: the AMX path's quantized GEMMs give the AVX-512 path's bits", "[cpu][mul_mat][quant]") {
    if (!tsr_cpu_isa_supported(TSR_CPU_ISA_AMX)) {
        WARN("skipped: no AMX path on this CPU");
        return;
    }
    std::vector<tsr_type> types = {TSR_TYPE_Q8_0, TSR_TYPE_Q4_0};
    for (tsr_type t : kRowQuants)
        if (t != TSR_TYPE_Q6_K) types.push_back(t);
    struct shape { int64_t K, M, N; };
    for (tsr_type t : types)
        for (const shape & sh : {shape{2304, 45, 133}, shape{256, 70, 530}}) {
            ctx_holder ctx(32);
            std::mt19937 rng((unsigned)(t * 7 + sh.N));
            tsr_tensor * a = tsr_new_tensor_2d(ctx, t, sh.K, sh.M);
            tsr_tensor * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, sh.K, sh.N);
            fill(a, rng);
            fill(b, rng);
            tsr_tensor * c = tsr_mul_mat(ctx, a, b);
            std::vector<double> out[2];
            int i = 0;
            for (tsr_cpu_isa isa : {TSR_CPU_ISA_AVX512, TSR_CPU_ISA_AMX}) out[i++] = values_on(isa, 2, ctx, c);
            size_t differ = 0;
            for (size_t j = 0; j < out[0].size(); ++j) differ += out[0][j] != out[1][j];
            INFO(tsr_type_name(t) << " K " << sh.K << " M " << sh.M << " N " << sh.N);
            CHECK(differ == 0);
        }
}

// The Q6_K GEMMs of the AVX-512 and AMX paths take activations quantized per 256 (Q8_K), as
// ggml's Q6_K dot product does (AMX folds each scale per 16 into the weights and sums whole
// super-blocks in integers; AVX-512 sums each 16 in integers and scales it in float): against
// the double product of the dequantized weights and the activations as the core's Q8_K
// quantizer rounds them (tsr_from_float_row), only float rounding is left (1e-6 of sum |w x|
// bounds it). Levels and scales at their extremes (q - 32 = -32 with scale -128: v = 4096,
// the largest), K over two k blocks with a partial one, M and N ending in partial panels, N
// past the 528-column block.
TEST_CASE("mul_mat: the Q6_K GEMMs are exact against Q8_K activations", "[cpu][mul_mat][quant]") {
    struct shape { int64_t K, M, N; };
    for (const shape & sh : {shape{2304, 45, 133}, shape{256, 70, 530}}) {
        ctx_holder ctx(32);
        std::mt19937 rng((unsigned)sh.N);
        tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_Q6_K, sh.K, sh.M);
        tsr_tensor * b = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, sh.K, sh.N);
        auto * blocks = (tsr_block_q6_K *)a->data;
        const int64_t nblk = sh.K * sh.M / 256;
        for (int64_t i = 0; i < nblk; ++i) {
            tsr_block_q6_K & q = blocks[i];
            for (auto & v : q.ql) v = (uint8_t)rng();
            for (auto & v : q.qh) v = (uint8_t)rng();
            for (auto & v : q.scales) v = (int8_t)rng();
            q.d = tsr_fp32_to_fp16(std::uniform_real_distribution<float>(-1e-3f, 1e-3f)(rng));
            if (i % 3 == 0) {  // the extremes: level -32 (bits 0) with scale -128 in the first 16
                q.scales[0] = -128;
                q.ql[0] = 0;
                q.qh[0] &= (uint8_t)~3u;
            }
        }
        std::vector<float> x((size_t)(sh.K * sh.N));
        for (auto & v : x) v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
        std::memcpy(b->data, x.data(), x.size() * 4);
        std::vector<float> wf((size_t)(sh.K * sh.M)), xq(x.size());
        REQUIRE(tsr_to_float_row(TSR_TYPE_Q6_K, a->data, wf.data(), (int64_t)wf.size()));
        std::vector<uint8_t> x8(tsr_row_size(TSR_TYPE_Q8_K, sh.K) * (size_t)sh.N);
        REQUIRE(tsr_from_float_row(TSR_TYPE_Q8_K, x.data(), x8.data(), (int64_t)x.size()));
        REQUIRE(tsr_to_float_row(TSR_TYPE_Q8_K, x8.data(), xq.data(), (int64_t)xq.size()));
        tsr_tensor * c = tsr_mul_mat(ctx, a, b);
        for (tsr_cpu_isa isa : {TSR_CPU_ISA_AVX512, TSR_CPU_ISA_AMX}) {
            if (!tsr_cpu_isa_supported(isa)) {
                WARN("skipped: no " << tsr_cpu_isa_name(isa) << " path on this CPU");
                continue;
            }
            const std::vector<double> got = values_on(isa, 2, ctx, c);
            int bad = 0;
            double worst = 0;
            for (int64_t n = 0; n < sh.N; ++n)
                for (int64_t m = 0; m < sh.M; ++m) {
                    double sum = 0, mag = 0;
                    for (int64_t k = 0; k < sh.K; ++k) {
                        const double p = (double)wf[(size_t)(m * sh.K + k)] * xq[(size_t)(n * sh.K + k)];
                        sum += p;
                        mag += std::fabs(p);
                    }
                    const double err = std::fabs(got[(size_t)(n * sh.M + m)] - sum);
                    bad += !(err <= 1e-6 * mag);
                    worst = std::max(worst, err / (1e-6 * mag));
                }
            INFO(tsr_cpu_isa_name(isa) << " K " << sh.K << " M " << sh.M << " N " << sh.N << " worst error / bound " << worst);
            CHECK(bad == 0);
        }
    }
}

// ggml's dot-product check (test-quantize-fns): quantized x against y on its cos signal,
// |q(x) . y - x . y| / n at most 0.02.
TEST_CASE("mul_mat: dot-product error of the new types on ggml's test signal", "[cpu][mul_mat][quant]") {
    const int64_t n = 4096;
    for (tsr_type t : kRowQuants) {
        ctx_holder ctx(16);
        tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, n, 1);
        tsr_tensor * y = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, n, 1);
        double ref = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            const float xi = 0.1f + 2.0f * std::cos((float)i), yi = 0.1f + 2.0f * std::cos((float)i + 1.0f);
            ((float *)x->data)[i] = xi;
            ((float *)y->data)[i] = yi;
            ref += (double)xi * yi;
        }
        tsr_tensor * q = tsr_new_tensor_2d(ctx, t, n, 1);
        REQUIRE(tsr_quantize_chunk(t, (const float *)x->data, q->data, 0, 1, n, nullptr) == tsr_row_size(t, n));
        tsr_tensor * c = tsr_mul_mat(ctx, q, y);
        for (tsr_cpu_isa isa : isas()) {
            isa_scope s(isa);
            backend_holder be(1);
            INFO(tsr_type_name(t) << " isa " << tsr_cpu_isa_name(isa));
            REQUIRE(run(be, ctx, c) == TSR_STATUS_SUCCESS);
            CHECK(std::fabs((double)((const float *)c->data)[0] - ref) / (double)n <= 0.02);
        }
    }
}

// A matrix-vector row's result must not depend on the split: one thread's range of 7 rows
// is one group of 4 (rows 0-3 walked side by side) and 3 rows left over (4-6, the one-row
// kernel). The same rows reordered (0-2 swapped with 4-6) trade places between the two
// kernels, and every row's value must stay the same to the bit; both against the double
// reference too. The 32-element types' rows end 1 block past a group of 4.
TEST_CASE("mul_mat: matrix-vector rows left over after groups of 4 equal their value inside one", "[cpu][mul_mat][quant]") {
    const int64_t M = 7;
    const int64_t perm[M] = {4, 5, 6, 3, 0, 1, 2};  /* row m of a is row perm[m] of b */
    std::vector<tsr_type> types(std::begin(kTypes), std::end(kTypes));
    types.insert(types.end(), std::begin(kRowQuants), std::end(kRowQuants));
    for (tsr_type t : types) {
        const int64_t K = tsr_blck_size(t) == 256 ? 256 : 160;
        ctx_holder ctx(8);
        std::mt19937 rng((unsigned)t + 23);
        tsr_tensor * a = tsr_new_tensor_2d(ctx, t, K, M);
        tsr_tensor * b = tsr_new_tensor_2d(ctx, t, K, M);
        tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, K, 1);
        fill(a, rng);
        fill(x, rng);
        for (int64_t m = 0; m < M; ++m) std::memcpy((char *)b->data + perm[m] * b->nb[1], (const char *)a->data + m * a->nb[1], a->nb[1]);
        tsr_tensor * ca = tsr_mul_mat(ctx, a, x);
        tsr_tensor * cb = tsr_mul_mat(ctx, b, x);
        const std::vector<double> ref = ref_mul_mat(a, x);
        for (tsr_cpu_isa isa : isas()) {
            isa_scope s(isa);
            backend_holder be(1);
            REQUIRE(run(be, ctx, ca) == TSR_STATUS_SUCCESS);
            REQUIRE(run(be, ctx, cb) == TSR_STATUS_SUCCESS);
            const float * va = (const float *)ca->data;
            const float * vb = (const float *)cb->data;
            INFO(tsr_type_name(t) << " isa " << tsr_cpu_isa_name(isa));
            CHECK(nmse(values(ca), ref) <= threshold(t));
            for (int64_t m = 0; m < M; ++m) {
                INFO("row " << m << ": " << va[m] << " in a, " << vb[perm[m]] << " as row " << perm[m] << " of b");
                CHECK(std::memcmp(&va[m], &vb[perm[m]], sizeof(float)) == 0);
            }
        }
    }
}
