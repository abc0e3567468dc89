#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tsrt {

float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
uint32_t bits_from_f32(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

double half_value(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0) v = std::ldexp((double)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = std::ldexp(1.0 + m / 1024.0, e - 15);
    return s ? -v : v;
}

std::vector<float> uniform(size_t n, std::mt19937 & rng, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (float & x : v) x = u(rng);
    return v;
}

float pattern_value(uint64_t i, uint32_t seed) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ (seed * 40503u);
    h ^= h >> 15;
    return static_cast<float>(h & 1023u) / 512.0f - 1.0f;
}

namespace {

// Calls f(row pointer offset in bytes, index of the row's first value) for every row.
template <typename F>
void for_each_row(const tsr_tensor * t, F f) {
    int64_t first = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1, first += t->ne[0])
                f(static_cast<size_t>(i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] + i3 * (int64_t)t->nb[3]), first);
}

// A row is converted at once when its values are adjacent (always true of quantized rows,
// which must be whole), else element by element.
bool row_contiguous(const tsr_tensor * t) {
    if (tsr_is_quantized(t->type)) {
        REQUIRE(t->nb[0] == tsr_type_size(t->type));
        return true;
    }
    return t->nb[0] == tsr_type_size(t->type);
}

} // namespace

void encode(const tsr_tensor * t, const float * values, void * base) {
    const bool whole = row_contiguous(t);
    char * b = static_cast<char *>(base);
    for_each_row(t, [&](size_t off, int64_t first) {
        if (whole) {
            REQUIRE(tsr_from_float_row(t->type, values + first, b + off, t->ne[0]));
            return;
        }
        for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) REQUIRE(tsr_from_float_row(t->type, values + first + i0, b + off + i0 * t->nb[0], 1));
    });
}

void decode(const tsr_tensor * t, const void * base, float * values) {
    const bool whole = row_contiguous(t);
    const char * b = static_cast<const char *>(base);
    for_each_row(t, [&](size_t off, int64_t first) {
        if (whole) {
            REQUIRE(tsr_to_float_row(t->type, b + off, values + first, t->ne[0]));
            return;
        }
        for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) REQUIRE(tsr_to_float_row(t->type, b + off + i0 * t->nb[0], values + first + i0, 1));
    });
}

void fill(tsr_tensor * t, std::mt19937 & rng, float lo, float hi) {
    REQUIRE(t->data != nullptr);
    const std::vector<float> v = uniform(static_cast<size_t>(tsr_nelements(t)), rng, lo, hi);
    encode(t, v.data(), t->data);
}

void fill_i32(tsr_tensor * t, std::mt19937 & rng, int lo, int hi) {
    REQUIRE(t->type == TSR_TYPE_I32);
    REQUIRE(t->data != nullptr);
    std::uniform_int_distribution<int> u(lo, hi);
    std::vector<float> v(static_cast<size_t>(tsr_nelements(t)));
    for (float & x : v) x = static_cast<float>(u(rng));
    encode(t, v.data(), t->data);
}

std::vector<double> values(const tsr_tensor * t) {
    REQUIRE(t->data != nullptr);
    std::vector<float> v(static_cast<size_t>(tsr_nelements(t)));
    decode(t, t->data, v.data());
    return std::vector<double>(v.begin(), v.end());
}

double nmse(const std::vector<double> & got, const std::vector<double> & ref) {
    if (got.size() != ref.size()) return INFINITY;
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double g = got[i], r = ref[i];
        if (std::isinf(g) || std::isinf(r) || std::isnan(g) || std::isnan(r)) {
            const bool same = g == r || (std::isnan(g) && std::isnan(r));
            if (!same) return INFINITY;
            continue;
        }
        num += (g - r) * (g - r);
        den += r * r;
    }
    return den > 0.0 ? num / den : num;
}

double nmse(const std::vector<float> & got, const std::vector<float> & ref) {
    return nmse(std::vector<double>(got.begin(), got.end()), std::vector<double>(ref.begin(), ref.end()));
}

double max_abs_err(const std::vector<double> & got, const std::vector<double> & ref) {
    if (got.size() != ref.size()) return INFINITY;
    double worst = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double d = std::fabs(got[i] - ref[i]);
        if (std::isnan(d)) return INFINITY;
        worst = std::max(worst, d);
    }
    return worst;
}

double ulp_err(float g, double r) {
    if (std::isnan(r) || std::isnan(g)) return std::isnan(r) && std::isnan(g) ? 0.0 : INFINITY;
    const double big = std::ldexp(1.0, 128);
    const double gg = std::max(-big, std::min(big, (double)g));
    const double rr = std::max(-big, std::min(big, r));
    if (gg == rr) return 0.0;
    int e = -1000;
    if (rr != 0.0) std::frexp(rr, &e);  // |rr| in [2^(e-1), 2^e)
    return std::fabs(gg - rr) / std::ldexp(1.0, std::max(e - 24, -149));
}

} // namespace tsrt
