// Column (token) counts at which the CPU tests reach a weight type's GEMM or keep it on its
// dot kernels. The tests that say they cover a GEMM take their counts from here, and
// kernels_test.cpp checks these against gemm_min_cols (backends/cpu/impl/gemm.inl): a
// threshold raised past one fails there, naming the type, instead of quietly turning a
// GEMM test into another dot-kernel test.
#pragma once
#include <cstdint>

namespace gemm_test_columns {
// mul_mat_id (models_test.cpp): the 32-element types' experts take the GEMM, the K-quants' stay on their dots
constexpr int64_t k_quants_on_dots = 9;
// mul_mat (mul_mat_test.cpp): every type's GEMM but Q2_K's (and, off x86, Q3_K's)
constexpr int64_t all_but_q2_k = 17;
// the exactly packed types' GEMM errs by the activations' quantization only (mul_mat_test.cpp)
constexpr int64_t exactly_packed = 25;
// every type's GEMM in its file layout, Q2_K's too (mul_mat_test.cpp)
constexpr int64_t every_file_layout = 67;
// every type's GEMM in every layout, the word layouts' too (models_test.cpp's mul_mat_id,
// tests/run/model_test.cpp's CPU_REPACK prompt)
constexpr int64_t every_layout = 130;
}  // namespace gemm_test_columns
