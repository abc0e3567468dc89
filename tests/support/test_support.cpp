#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>

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

namespace {
const int kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
double h(const uint8_t * p) { uint16_t v; std::memcpy(&v, p, 2); return half_value(v); }
}  // namespace

std::vector<ref_elem> ref_decode_block(tsr_type t, const uint8_t * blk) {
    std::vector<ref_elem> out;
    auto f = [](double v) { return (double)(float)v; };
    switch (t) {
        case TSR_TYPE_Q4_1: case TSR_TYPE_Q5_1: case TSR_TYPE_Q5_0: {
            // d [m] [qh:4] qs:16; element j < 16 low nibble of qs[j], else high nibble of qs[j-16]
            const bool has_m = t != TSR_TYPE_Q5_0, has_h = t != TSR_TYPE_Q4_1;
            const double d = h(blk), m = has_m ? h(blk + 2) : 0.0;
            uint32_t qh = 0;
            if (has_h) std::memcpy(&qh, blk + (has_m ? 4 : 2), 4);
            const uint8_t * qs = blk + 2 + (has_m ? 2 : 0) + (has_h ? 4 : 0);
            for (int j = 0; j < 32; j++) {
                int q = j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4);
                if (has_h) q |= (int)((qh >> j) & 1) << 4;
                if (t == TSR_TYPE_Q5_0) q -= 16;
                out.push_back({d, q, -m});
            }
            break;
        }
        case TSR_TYPE_IQ4_NL: {
            const double d = h(blk);
            for (int j = 0; j < 32; j++) out.push_back({d, kIq4nl[j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4)], 0.0});
            break;
        }
        case TSR_TYPE_Q2_K: {  // scales[16] qs[64] d dmin
            const uint8_t * sc = blk, * qs = blk + 16;
            const double d = h(blk + 80), dmin = h(blk + 82);
            for (int half = 0; half < 2; half++)
                for (int shift = 0; shift < 8; shift += 2)
                    for (int g = 0; g < 2; g++) {
                        const int s = sc[half * 8 + shift + g];
                        for (int l = 0; l < 16; l++)
                            out.push_back({f(d * (s & 15)), (qs[32 * half + 16 * g + l] >> shift) & 3, f(dmin * (s >> 4))});
                    }
            break;
        }
        case TSR_TYPE_Q3_K: {  // hmask[32] qs[64] scales[12] d
            const uint8_t * hm = blk, * qs = blk + 32, * sc = blk + 96;
            const double d = h(blk + 108);
            int scale[16];
            for (int j = 0; j < 16; j++) {
                const int lo = j < 8 ? (sc[j] & 15) : (sc[j - 8] >> 4);
                scale[j] = (lo | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            }
            int bit = 0, is = 0;
            for (int half = 0; half < 2; half++)
                for (int shift = 0; shift < 8; shift += 2, bit++)
                    for (int g = 0; g < 2; g++, is++)
                        for (int l = 0; l < 16; l++) {
                            const int lowbits = (qs[32 * half + 16 * g + l] >> shift) & 3;
                            const bool hi = (hm[16 * g + l] >> bit) & 1;
                            out.push_back({f(d * scale[is]), lowbits - (hi ? 0 : 4), 0.0});
                        }
            break;
        }
        case TSR_TYPE_Q4_K: case TSR_TYPE_Q5_K: {  // d dmin scales[12] [qh[32]] qs[128]
            const double d = h(blk), dmin = h(blk + 2);
            const uint8_t * sc = blk + 4;
            const uint8_t * qh = t == TSR_TYPE_Q5_K ? blk + 16 : nullptr;
            const uint8_t * qs = blk + (qh ? 48 : 16);
            for (int s = 0; s < 8; s++) {
                int scale, mn;
                if (s < 4) { scale = sc[s] & 63; mn = sc[s + 4] & 63; }
                else { scale = (sc[s + 4] & 15) | ((sc[s - 4] >> 6) << 4); mn = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4); }
                for (int l = 0; l < 32; l++) {
                    int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
                    if (qh && ((qh[l] >> s) & 1)) q += 16;
                    out.push_back({f(d * scale), q, f(dmin * mn)});
                }
            }
            break;
        }
        case TSR_TYPE_Q6_K: {  // ql[128] qh[64] scales[16] (int8) d
            const uint8_t * ql = blk, * qh = blk + 128;
            const int8_t * sc = (const int8_t *)(blk + 192);
            const double d = h(blk + 208);
            out.resize(256);
            for (int half = 0; half < 2; half++)
                for (int l = 0; l < 32; l++)
                    for (int k = 0; k < 4; k++) {
                        const int lo = (ql[64 * half + 32 * (k % 2) + l] >> (4 * (k / 2))) & 15;
                        const int hi = (qh[32 * half + l] >> (2 * k)) & 3;
                        const int e = 128 * half + 32 * k + l;
                        out[(size_t)e] = {f(d * sc[8 * half + 2 * k + l / 16]), (lo | (hi << 4)) - 32, 0.0};
                    }
            break;
        }
        case TSR_TYPE_Q8_K: {  // float d, int8 qs[256], int16 bsums[16]
            float d;
            std::memcpy(&d, blk, 4);
            for (int j = 0; j < 256; j++) out.push_back({d, (int8_t)blk[4 + j], 0.0});
            break;
        }
        default: break;
    }
    return out;
}


std::vector<double> ref_dequantize(tsr_type t, const void * data, int64_t n) {
    std::vector<double> out;
    const int64_t bs = tsr_blck_size(t);
    const size_t ts = tsr_type_size(t);
    for (int64_t b = 0; b < n / bs; ++b)
        for (const ref_elem & e : ref_decode_block(t, (const uint8_t *)data + (size_t)b * ts)) out.push_back(e.a * e.q - e.b);
    return out;
}

void * ggml_base_symbol(const char * name, const char ** err) {
    static std::string load_error, why;
    static void * lib = [] {
        const char * libdir = std::getenv("TSR_LLAMACPP_LIBDIR");
        if (!libdir) { load_error = "TSR_LLAMACPP_LIBDIR is not set"; return (void *)nullptr; }
        void * h = dlopen((std::string(libdir) + "/libggml-base.so").c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!h) load_error = dlerror();
        return h;
    }();
    void * sym = lib ? dlsym(lib, name) : nullptr;
    // this call's reason (empty when found), not one left by an earlier call
    why = !lib ? load_error : sym ? std::string() : std::string("libggml-base.so has no ") + name;
    if (err) *err = why.c_str();
    return sym;
}

} // namespace tsrt
