// Comparison helpers shared by every test directory (library tsr_test_support):
// seeded random values, tensor contents in logical order (any type and layout, quantized
// included), normalized mean squared error, max-abs and ulp errors.
//
// This part needs only tessera's core (tessera.h); running graphs on backends is in
// backend_support.h. Everything is in namespace tsrt.
#pragma once
#include <catch2/catch.hpp>

#include "tessera/tessera.h"

// Defined in a build with AddressSanitizer (gcc or clang): tests whose cost is in
// repetitions (random instances, brute force) run fewer of them there, where every access
// costs several times more and they check memory safety, not more values.
#if defined(__SANITIZE_ADDRESS__)
#define TSR_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TSR_TEST_SANITIZED 1
#endif
#endif

#include <cstdint>
#include <random>
#include <vector>

namespace tsrt {

// ---- bits ---------------------------------------------------------------------------------
float f32_from_bits(uint32_t u);
uint32_t bits_from_f32(float f);
// The value of an IEEE binary16, decoded here (independently of tessera's conversions).
double half_value(uint16_t h);

// ---- quantized formats, decoded here from the format description ------------------------------
// One element of a Q4_1, Q5_0, Q5_1, IQ4_NL or K-quant (Q2_K..Q6_K, Q8_K) block:
// x = a * q - b, a and b the block's factors as the format's decoder rounds them (d * scale
// in float), q the integer level (the table value for IQ4_NL).
struct ref_elem { double a; int q; double b; };
std::vector<ref_elem> ref_decode_block(tsr_type t, const uint8_t * block);
// n elements (whole blocks) of those types, as doubles.
std::vector<double> ref_dequantize(tsr_type t, const void * data, int64_t n);

// ---- values -------------------------------------------------------------------------------
// n values uniform in [lo, hi), drawn in order from rng.
std::vector<float> uniform(size_t n, std::mt19937 & rng, float lo = -1.0f, float hi = 1.0f);

// Deterministic values in [-1, 1) for element i (cheap, for huge tensors).
float pattern_value(uint64_t i, uint32_t seed);

// ---- tensor layout <-> logical order (i0 fastest) -------------------------------------------
// base: host memory laid out as t's data (t's strides from base). Quantized tensors need
// whole, contiguous rows (nb[0] == type size); other types take any strides. I32 values
// are converted from/to float.
void encode(const tsr_tensor * t, const float * values, void * base);
void decode(const tsr_tensor * t, const void * base, float * values);

// ---- tensors whose data is in host memory (t->data: a plain context or a CPU buffer) ------
// Fill with uniform values in [lo, hi) in logical order, converted to t's type.
void fill(tsr_tensor * t, std::mt19937 & rng, float lo = -1.0f, float hi = 1.0f);
// Fill an I32 tensor with integers uniform in [lo, hi].
void fill_i32(tsr_tensor * t, std::mt19937 & rng, int lo, int hi);
// Contents in logical order.
std::vector<double> values(const tsr_tensor * t);
inline double at(const tsr_tensor * t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
    return tsr_get_f32_nd(t, i0, i1, i2, i3);
}

// ---- errors -------------------------------------------------------------------------------
// sum (got - ref)^2 / sum ref^2 (the plain sum when ref is all zeros). Infinities must match
// exactly and are left out of the sums; NaN must match NaN. A mismatch of either, or of
// the sizes, is an infinite error.
double nmse(const std::vector<double> & got, const std::vector<double> & ref);
double nmse(const std::vector<float> & got, const std::vector<float> & ref);
// max |got - ref| (infinite on a size mismatch or a NaN).
double max_abs_err(const std::vector<double> & got, const std::vector<double> & ref);
// |g - r| in ulps of the float grid at r (denormal spacing below FLT_MIN). A reference past
// the float range counts as +-2^128, where +-inf lies, so overflow to inf scores 0.
double ulp_err(float g, double r);

// ---- llama.cpp as a reference (hidden tests: scripts/llamacpp-quant-check.sh) -------------
// A symbol of the libggml-base.so in $TSR_LLAMACPP_LIBDIR (node-llama-cpp's prebuilt library,
// loaded once): nullptr where the variable is unset, the library does not load (why: in *err)
// or lacks the symbol.
void * ggml_base_symbol(const char * name, const char ** err = nullptr);

} // namespace tsrt
