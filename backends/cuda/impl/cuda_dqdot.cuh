// tessera CUDA backend: the integer dot products of k_mmv_dqx (cuda_mulmat.cuh), the mat-vec
// of the cuda_dequant.cuh types (Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K..Q6_K) against activations
// quantized by k_quantize_x (int8 per 32-block, xds = (d, d * sum)).
//
// A lane takes one 32-element slice of a weight row: a whole block of the 32-element types,
// an eighth of a K-quant super-block. dq_decode turns it into 8 int8x4 words in element
// order (the activations' order) plus its scales, read with the widest loads the layout's
// alignment allows (rows aligned to dqx_traits::align, what the blocks of an aligned row have
// anyway: 16 bytes for Q4_K / Q5_K, 4 for Q4_1 / Q5_1 / Q2_K, 2 for the others, whose 32-bit
// words are realigned by funnel shifts); dq_dot takes the dp4a dot of
// those words with one activation block and applies the scales:
//   - one scale per slice (Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K):
//       D * dx * sum(q * xq) + Dm * (dx * sum(xq))          (Dm: Q4_1 / Q5_1 m, K4 -dmin * mn)
//     Q5_0's offset -16 and IQ4_NL's table are in the int8 words already.
//   - two 16-element groups (Q2_K, Q3_K, Q6_K):
//       dx * (D * (sa0 * sum0(q * xq) + sa1 * sum1(q * xq)) + Dm * (sm0 * sum0(xq) + sm1 * sum1(xq)))
//     Q3_K's minus 4 and Q6_K's minus 32 are in the int8 words; Q2_K's scales are folded
//     into its words (q * sc <= 45) and its mins into per-group words for a dp4a against xq.
//
// Plain C++ apart from the intrinsics, which have host versions (hd_*), so the same decoding
// and dot code is checked on the host against the CPU's dequantized rows.
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define TSR_HD __host__ __device__ __forceinline__
#else
#define TSR_HD inline
#endif
// loops unrolled in device code (the host compiler does not know the pragma)
#ifdef __CUDA_ARCH__
#define TSR_HD_UNROLL _Pragma("unroll")
#else
#define TSR_HD_UNROLL
#endif

namespace tsr_cuda {
namespace {

// ---- the intrinsics, with host versions -----------------------------------------------------

TSR_HD int hd_dp4a(uint32_t a, int b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a((int) a, b, c);
#else
    for (int i = 0; i < 4; ++i) c += (int) (int8_t) (uint8_t) (a >> (8 * i)) * (int) (int8_t) (uint8_t) ((uint32_t) b >> (8 * i));
    return c;
#endif
}

// bytes of (y:x) chosen by the low 3 bits of each of the 4 selector nibbles
TSR_HD uint32_t hd_byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
    return __byte_perm(x, y, s);
#else
    const uint64_t in = ((uint64_t) y << 32) | x;
    uint32_t r = 0;
    for (int n = 0; n < 4; ++n) r |= (uint32_t) ((in >> (8 * ((s >> (4 * n)) & 7))) & 0xFF) << (8 * n);
    return r;
#endif
}

// (hi:lo) >> sh, sh in 0..31
TSR_HD uint32_t hd_funnel_r(uint32_t lo, uint32_t hi, uint32_t sh) {
#ifdef __CUDA_ARCH__
    return __funnelshift_r(lo, hi, sh);
#else
    return (uint32_t) ((((uint64_t) hi << 32) | lo) >> (sh & 31));
#endif
}

TSR_HD float hd_half(uint32_t bits) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half((unsigned short) (bits & 0xFFFFu)));
#else
    const uint32_t sign = (bits & 0x8000u) << 16, e = (bits >> 10) & 0x1F, m = bits & 0x3FF;
    float f;
    if (e == 0) {
        f = (float) m * 5.9604644775390625e-8f;   // 2^-24: subnormals (and zero), exact
        uint32_t u;
        memcpy(&u, &f, 4);
        u |= sign;
        memcpy(&f, &u, 4);
    } else {
        const uint32_t u = sign | (e == 31 ? (0xFFu << 23) | (m << 13) : ((e + 112) << 23) | (m << 13));
        memcpy(&f, &u, 4);
    }
    return f;
#endif
}

// ---- loads ------------------------------------------------------------------------------------

// A uint32_t / uint16_t at p, aligned to its size.
template <typename T> TSR_HD uint32_t ld_aligned(const uint8_t * p) {
#ifdef __CUDA_ARCH__
    return *(const T *) p;
#else
    T v;
    memcpy(&v, p, sizeof(T));
    return v;
#endif
}
TSR_HD uint32_t ld32(const uint8_t * p) { return ld_aligned<uint32_t>(p); }
TSR_HD uint32_t ld16(const uint8_t * p) { return ld_aligned<uint16_t>(p); }

// N words from a 16-byte aligned p (N a multiple of 4): 16-byte loads
template <int N> TSR_HD void ld_words16(const uint8_t * p, uint32_t * w) {
TSR_HD_UNROLL
    for (int i = 0; i < N; i += 4) {
#ifdef __CUDA_ARCH__
        const uint4 v = *(const uint4 *) (p + 4 * i);
        w[i] = v.x; w[i + 1] = v.y; w[i + 2] = v.z; w[i + 3] = v.w;
#else
        memcpy(w + i, p + 4 * i, 16);
#endif
    }
}

// N words from a 4-byte aligned p
template <int N> TSR_HD void ld_words4(const uint8_t * p, uint32_t * w) {
TSR_HD_UNROLL
    for (int i = 0; i < N; ++i) w[i] = ld32(p + 4 * i);
}

// N words from a 2-byte aligned p: N + 1 aligned loads, shifted together; every load is the
// aligned word of some byte of [p, p + 4N), so nothing outside the span's words is read
// (when p is aligned the last load repeats the one before and the shift ignores it).
template <int N> TSR_HD void ld_words2(const uint8_t * p, uint32_t * w) {
    const uint8_t * a = (const uint8_t *) ((uintptr_t) p & ~(uintptr_t) 3);
    const uint32_t sh = 8u * (uint32_t) ((uintptr_t) p & 3);
    uint32_t lo[N + 1];
TSR_HD_UNROLL
    for (int i = 0; i < N; ++i) lo[i] = ld32(a + 4 * i);
    lo[N] = ld32((const uint8_t *) ((uintptr_t) (p + 4 * N - 1) & ~(uintptr_t) 3));
TSR_HD_UNROLL
    for (int i = 0; i < N; ++i) w[i] = hd_funnel_r(lo[i], lo[i + 1], sh);
}

// ---- word helpers --------------------------------------------------------------------------

// bytes v - o for bytes v in [0, 128 + o) (o <= 128): no borrow crosses a byte
TSR_HD uint32_t sub_bytes(uint32_t v, uint32_t o4) { return ((v | 0x80808080u) - o4) ^ 0x80808080u; }

// bits 0..3 of n to bit 4 of bytes 0..3 (the Q5 fifth bits)
TSR_HD uint32_t spread_bit4(uint32_t n) { return (((n & 15u) * 0x00204081u) & 0x01010101u) << 4; }

// byte i (0..11, run time) of three words, without indexing a register array
TSR_HD uint32_t byte_of3(uint32_t w0, uint32_t w1, uint32_t w2, int i) {
    const uint32_t w = i < 4 ? w0 : (i < 8 ? w1 : w2);
    return (w >> (8 * (i & 3))) & 0xFF;
}

constexpr uint32_t pack_i8x4(int a, int b, int c, int d) {
    return (uint32_t) (uint8_t) a | ((uint32_t) (uint8_t) b << 8) | ((uint32_t) (uint8_t) c << 16) | ((uint32_t) (uint8_t) d << 24);
}

// ggml's IQ4_NL table as int8 x 4 words
constexpr uint32_t k_iq4nl_w0 = pack_i8x4(-127, -104, -83, -65), k_iq4nl_w1 = pack_i8x4(-49, -35, -22, -10);
constexpr uint32_t k_iq4nl_w2 = pack_i8x4(1, 13, 25, 38), k_iq4nl_w3 = pack_i8x4(53, 69, 89, 113);

// IQ4_NL: bytes 0..15 (4 nibble values, one per byte) to the table's values, by byte_perm
TSR_HD uint32_t iq4nl_lookup(uint32_t v) {
    const uint32_t c = v | (v >> 4);
    const uint32_t sel = (c & 0xFFu) | ((c >> 8) & 0xFF00u);   // nibble n: value n
    const uint32_t lo = hd_byte_perm(k_iq4nl_w0, k_iq4nl_w1, sel & 0x7777u);
    const uint32_t hi = hd_byte_perm(k_iq4nl_w2, k_iq4nl_w3, sel & 0x7777u);
    return hd_byte_perm(lo, hi, 0x3210u | ((sel & 0x8888u) >> 1));
}

// ---- one 32-element slice: decode ---------------------------------------------------------------

struct dq_slice {
    uint32_t q[8];   // int8 x 4, elements 4i..4i+3
    int sa[2];       // two-group types: integer scales of elements 0..15 / 16..31
    uint32_t mw[2];  // Q2_K: the mins as int8 x 4 words, per group
    float D, Dm;
};

template <int TYPE> struct dqx_traits;
template <> struct dqx_traits<TSR_TYPE_Q4_1>   { static constexpr int bytes = 20,  slices = 1, align = 4; static constexpr bool g16 = false, has_min = true; };
template <> struct dqx_traits<TSR_TYPE_Q5_0>   { static constexpr int bytes = 22,  slices = 1, align = 2; static constexpr bool g16 = false, has_min = false; };
template <> struct dqx_traits<TSR_TYPE_Q5_1>   { static constexpr int bytes = 24,  slices = 1, align = 4; static constexpr bool g16 = false, has_min = true; };
template <> struct dqx_traits<TSR_TYPE_IQ4_NL> { static constexpr int bytes = 18,  slices = 1, align = 2; static constexpr bool g16 = false, has_min = false; };
template <> struct dqx_traits<TSR_TYPE_Q2_K>   { static constexpr int bytes = 84,  slices = 8, align = 4; static constexpr bool g16 = true,  has_min = true; };
template <> struct dqx_traits<TSR_TYPE_Q3_K>   { static constexpr int bytes = 110, slices = 8, align = 2; static constexpr bool g16 = true,  has_min = false; };
template <> struct dqx_traits<TSR_TYPE_Q4_K>   { static constexpr int bytes = 144, slices = 8, align = 16; static constexpr bool g16 = false, has_min = true; };
template <> struct dqx_traits<TSR_TYPE_Q5_K>   { static constexpr int bytes = 176, slices = 8, align = 16; static constexpr bool g16 = false, has_min = true; };
template <> struct dqx_traits<TSR_TYPE_Q6_K>   { static constexpr int bytes = 210, slices = 8, align = 2; static constexpr bool g16 = true,  has_min = false; };

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j from the words of scales[0..11]
TSR_HD void k4_scale_min_w(uint32_t s0, uint32_t s1, uint32_t s2, int j, int & sc, int & mn) {
    const int sh = 8 * (j & 3);
    const int b0 = (int) ((s0 >> sh) & 0xFF), b1 = (int) ((s1 >> sh) & 0xFF), b2 = (int) ((s2 >> sh) & 0xFF);
    if (j < 4) {
        sc = b0 & 63;
        mn = b1 & 63;
    } else {
        sc = (b2 & 0x0F) | ((b0 >> 6) << 4);
        mn = (b2 >> 4) | ((b1 >> 6) << 4);
    }
}

// Slice b (0 .. K/32 - 1) of the row that starts at row (dqx_traits<TYPE>::align aligned).
template <int TYPE>
TSR_HD void dq_decode(const uint8_t * row, int b, dq_slice & s) {
    constexpr int BS = dqx_traits<TYPE>::bytes;
    s.sa[0] = s.sa[1] = 1;
    s.mw[0] = s.mw[1] = 0;
    s.Dm = 0.0f;
    if (TYPE == TSR_TYPE_Q4_1 || TYPE == TSR_TYPE_Q5_1) {
        const uint8_t * p = row + (int64_t) b * BS;
        const uint32_t dm = ld32(p);
        uint32_t qs[4];
        uint32_t qh = 0;
        if (TYPE == TSR_TYPE_Q5_1) {
            qh = ld32(p + 4);
            ld_words4<4>(p + 8, qs);
        } else {
            ld_words4<4>(p + 4, qs);
        }
TSR_HD_UNROLL
        for (int i = 0; i < 4; ++i) {
            s.q[i] = (qs[i] & 0x0F0F0F0Fu) | spread_bit4(qh >> (4 * i));
            s.q[i + 4] = ((qs[i] >> 4) & 0x0F0F0F0Fu) | spread_bit4(qh >> (16 + 4 * i));
        }
        s.D = hd_half(dm);
        s.Dm = hd_half(dm >> 16);
    } else if (TYPE == TSR_TYPE_Q5_0) {
        const uint8_t * p = row + (int64_t) b * BS;
        const uint32_t qh = ld16(p + 2) | (ld16(p + 4) << 16);
        uint32_t qs[4];
        ld_words2<4>(p + 6, qs);
TSR_HD_UNROLL
        for (int i = 0; i < 4; ++i) {
            s.q[i] = sub_bytes((qs[i] & 0x0F0F0F0Fu) | spread_bit4(qh >> (4 * i)), 0x10101010u);
            s.q[i + 4] = sub_bytes(((qs[i] >> 4) & 0x0F0F0F0Fu) | spread_bit4(qh >> (16 + 4 * i)), 0x10101010u);
        }
        s.D = hd_half(ld16(p));
    } else if (TYPE == TSR_TYPE_IQ4_NL) {
        const uint8_t * p = row + (int64_t) b * BS;
        uint32_t qs[4];
        ld_words2<4>(p + 2, qs);
TSR_HD_UNROLL
        for (int i = 0; i < 4; ++i) {
            s.q[i] = iq4nl_lookup(qs[i] & 0x0F0F0F0Fu);
            s.q[i + 4] = iq4nl_lookup((qs[i] >> 4) & 0x0F0F0F0Fu);
        }
        s.D = hd_half(ld16(p));
    } else if (TYPE == TSR_TYPE_Q4_K || TYPE == TSR_TYPE_Q5_K) {
        // d, dmin, scales[12] | (Q5_K: qh[32]) | qs[128]: sub-block j in the low (j even) or
        // high nibbles of qs[32 (j / 2) ..]; Q5_K's fifth bit of its element l is bit j of qh[l]
        const int j = b & 7;
        const uint8_t * p = row + (int64_t) (b >> 3) * BS;
        uint32_t h[4], qs[8];
        ld_words16<4>(p, h);
        ld_words16<8>(p + (TYPE == TSR_TYPE_Q5_K ? 48 : 16) + 32 * (j >> 1), qs);
        const int sh = 4 * (j & 1);
TSR_HD_UNROLL
        for (int i = 0; i < 8; ++i) s.q[i] = (qs[i] >> sh) & 0x0F0F0F0Fu;
        if (TYPE == TSR_TYPE_Q5_K) {
            uint32_t qh[8];
            ld_words16<8>(p + 16, qh);
TSR_HD_UNROLL
            for (int i = 0; i < 8; ++i) s.q[i] |= ((qh[i] >> j) & 0x01010101u) << 4;
        }
        int sc, mn;
        k4_scale_min_w(h[1], h[2], h[3], j, sc, mn);
        s.D = hd_half(h[0]) * (float) sc;
        s.Dm = -hd_half(h[0] >> 16) * (float) mn;
    } else if (TYPE == TSR_TYPE_Q2_K) {
        // scales[16] | qs[64] | d, dmin: element 128h + 32t + l is bits 2t of qs[32h + l];
        // group g's scale is the low nibble of scales[g], its min the high one
        const int j = b & 7, h = j >> 2, t = j & 3;
        const uint8_t * p = row + (int64_t) (b >> 3) * BS;
        uint32_t qs[8];
        ld_words4<8>(p + 16 + 32 * h, qs);
        const uint32_t sc = ld16(p + 2 * j), dd = ld32(p + 80);
        const uint32_t sa0 = sc & 0x0F, sa1 = (sc >> 8) & 0x0F;
TSR_HD_UNROLL
        for (int i = 0; i < 8; ++i) s.q[i] = ((qs[i] >> (2 * t)) & 0x03030303u) * (i < 4 ? sa0 : sa1);   // <= 45 a byte
        s.mw[0] = ((sc >> 4) & 0x0F) * 0x01010101u;
        s.mw[1] = ((sc >> 12) & 0x0F) * 0x01010101u;
        s.D = hd_half(dd);
        s.Dm = -hd_half(dd >> 16);
    } else if (TYPE == TSR_TYPE_Q3_K) {
        // hmask[32] | qs[64] | scales[12] | d: low 2 bits as Q2_K; the high bit of element
        // 32j + l is bit j of hmask[l], clear means minus 4; 6-bit scales minus 32
        const int j = b & 7, h = j >> 2, t = j & 3;
        const uint8_t * p = row + (int64_t) (b >> 3) * BS;
        uint32_t hm[8], qs[8], sw[3];
        ld_words2<8>(p, hm);
        ld_words2<8>(p + 32 + 32 * h, qs);
        ld_words2<3>(p + 96, sw);
TSR_HD_UNROLL
        for (int i = 0; i < 8; ++i)
            s.q[i] = sub_bytes(((qs[i] >> (2 * t)) & 0x03030303u) | (((hm[i] >> j) & 0x01010101u) << 2), 0x04040404u);
TSR_HD_UNROLL
        for (int k = 0; k < 2; ++k) {
            const int g = 2 * j + k;
            const uint32_t lo = g < 8 ? byte_of3(sw[0], sw[1], sw[2], g) & 0x0F : byte_of3(sw[0], sw[1], sw[2], g - 8) >> 4;
            const uint32_t hi = (byte_of3(sw[0], sw[1], sw[2], 8 + (g & 3)) >> (2 * (g >> 2))) & 3;
            s.sa[k] = (int) (lo | (hi << 4)) - 32;
        }
        s.D = hd_half(ld16(p + 108));
    } else {   // Q6_K
        // ql[128] | qh[64] | scales[16] (int8) | d: element 128h + 32t + l: low 4 bits in nibble
        // t/2 of ql[64h + 32(t%2) + l], high 2 bits at bits 2t of qh[32h + l]; minus 32
        const int j = b & 7, h = j >> 2, t = j & 3;
        const uint8_t * p = row + (int64_t) (b >> 3) * BS;
        uint32_t ql[8], qh[8];
        ld_words2<8>(p + 64 * h + 32 * (t & 1), ql);
        ld_words2<8>(p + 128 + 32 * h, qh);
        const int shl = 4 * (t >> 1), shh = 2 * t;
TSR_HD_UNROLL
        for (int i = 0; i < 8; ++i)
            s.q[i] = sub_bytes(((ql[i] >> shl) & 0x0F0F0F0Fu) | (((qh[i] >> shh) & 0x03030303u) << 4), 0x20202020u);
        const uint32_t sc = ld16(p + 192 + 2 * j);
        s.sa[0] = (int) (int8_t) (uint8_t) sc;
        s.sa[1] = (int) (int8_t) (uint8_t) (sc >> 8);
        s.D = hd_half(ld16(p + 208));
    }
}

// ---- one 32-element slice: dot with an activation block (xw: its 8 int8x4 words; dx, dsum:
// its xds = (d, d * sum)) -------------------------------------------------------------------

template <int TYPE>
TSR_HD float dq_dot(const dq_slice & s, const int * xw, float dx, float dsum) {
    if (!dqx_traits<TYPE>::g16) {
        int acc = 0;
TSR_HD_UNROLL
        for (int i = 0; i < 8; ++i) acc = hd_dp4a(s.q[i], xw[i], acc);
        const float r = s.D * (dx * (float) acc);
        return dqx_traits<TYPE>::has_min ? r + s.Dm * dsum : r;
    } else if (TYPE == TSR_TYPE_Q2_K) {
        int acc = 0, m = 0;
TSR_HD_UNROLL
        for (int i = 0; i < 8; ++i) {
            acc = hd_dp4a(s.q[i], xw[i], acc);
            m = hd_dp4a(s.mw[i >> 2], xw[i], m);
        }
        return dx * (s.D * (float) acc + s.Dm * (float) m);
    } else {
        int a0 = 0, a1 = 0;
TSR_HD_UNROLL
        for (int i = 0; i < 4; ++i) {
            a0 = hd_dp4a(s.q[i], xw[i], a0);
            a1 = hd_dp4a(s.q[i + 4], xw[i + 4], a1);
        }
        return dx * (s.D * (float) (s.sa[0] * a0 + s.sa[1] * a1));
    }
}

// the row alignment dq_decode needs (0: not a type of it)
inline int dqx_align(tsr_type t) {
    switch (t) {
        case TSR_TYPE_Q4_1: return dqx_traits<TSR_TYPE_Q4_1>::align;
        case TSR_TYPE_Q5_0: return dqx_traits<TSR_TYPE_Q5_0>::align;
        case TSR_TYPE_Q5_1: return dqx_traits<TSR_TYPE_Q5_1>::align;
        case TSR_TYPE_IQ4_NL: return dqx_traits<TSR_TYPE_IQ4_NL>::align;
        case TSR_TYPE_Q2_K: return dqx_traits<TSR_TYPE_Q2_K>::align;
        case TSR_TYPE_Q3_K: return dqx_traits<TSR_TYPE_Q3_K>::align;
        case TSR_TYPE_Q4_K: return dqx_traits<TSR_TYPE_Q4_K>::align;
        case TSR_TYPE_Q5_K: return dqx_traits<TSR_TYPE_Q5_K>::align;
        case TSR_TYPE_Q6_K: return dqx_traits<TSR_TYPE_Q6_K>::align;
        default: return 0;
    }
}

} // namespace
} // namespace tsr_cuda
