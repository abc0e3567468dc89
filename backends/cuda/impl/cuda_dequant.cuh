// tessera CUDA backend: single elements of the weight types beyond Q8_0 / Q4_0 (Q4_1,
// Q5_0, Q5_1, IQ4_NL, Q2_K..Q6_K), for get_rows, the dequantizing mat-vec and the F16 copy
// of the cuBLAS path. Each format is defined by quants.inl's dequantize_row_* (ggml's order
// of float operations); dq_value mirrors it element by element, with _rn intrinsics where a
// product meets a sum: nvcc would fuse them into one rounding, and get_rows must give the
// CPU's floats exactly.
#pragma once

#include <type_traits>

namespace tsr_cuda {
namespace {

__constant__ float k_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

__device__ __forceinline__ float half_of(const tsr_fp16_t & h) { return __half2float(*(const __half *) &h); }

// 4-bit value j of a 32-element block: low nibbles of qs[0..15], then the high ones
__device__ __forceinline__ int nibble32(const uint8_t * qs, int j) { return j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4); }

// bit j (0..31) of the little-endian 32-bit word qh (the fifth bits of Q5_0 / Q5_1)
__device__ __forceinline__ int fifth_bit(const uint8_t * qh, int j) { return (qh[j >> 3] >> (j & 7)) & 1; }

// 2-bit value e of a super-block (Q2_K, low bits of Q3_K): bits 2s of qs[32h + l] for
// e = 128h + 32s + l
__device__ __forceinline__ int q2_value(const uint8_t * qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

// Element e of a Q4_K / Q5_K super-block (qh NULL for Q4_K): 8 sub-blocks of 32 with
// 6-bit scales and mins in 12 bytes; sub-block 2c in the low nibbles of qs[32c..], 2c+1
// in the high ones; the fifth bit of element l of sub-block s is bit s of qh[l].
__device__ __forceinline__ float k4_value(const uint8_t * scales, const uint8_t * qs, const uint8_t * qh, float d, float dmin, int e) {
    const int s = e / 32, l = e % 32;
    int sc, mn;
    if (s < 4) {
        sc = scales[s] & 63;
        mn = scales[s + 4] & 63;
    } else {
        sc = (scales[s + 4] & 0x0F) | ((scales[s - 4] >> 6) << 4);
        mn = (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4);
    }
    const uint8_t q = qs[32 * (s / 2) + l];
    int v = (s % 2) ? (q >> 4) : (q & 0x0F);
    if (qh && ((qh[l] >> s) & 1)) v += 16;
    return __fsub_rn(__fmul_rn(d * (float) sc, (float) v), __fmul_rn(dmin, (float) mn));
}

// Element k of the row of TYPE blocks that starts at row.
template <int TYPE>
__device__ __forceinline__ float dq_value(const char * row, int64_t k) {
    const int j = (int) (k % 32), e = (int) (k % 256);
    if (TYPE == TSR_TYPE_Q4_1) {
        const tsr_block_q4_1 * b = (const tsr_block_q4_1 *) row + k / 32;
        return __fadd_rn(__fmul_rn((float) nibble32(b->qs, j), half_of(b->d)), half_of(b->m));
    }
    if (TYPE == TSR_TYPE_Q5_0) {
        const tsr_block_q5_0 * b = (const tsr_block_q5_0 *) row + k / 32;
        return (float) ((nibble32(b->qs, j) | (fifth_bit(b->qh, j) << 4)) - 16) * half_of(b->d);
    }
    if (TYPE == TSR_TYPE_Q5_1) {
        const tsr_block_q5_1 * b = (const tsr_block_q5_1 *) row + k / 32;
        return __fadd_rn(__fmul_rn((float) (nibble32(b->qs, j) | (fifth_bit(b->qh, j) << 4)), half_of(b->d)), half_of(b->m));
    }
    if (TYPE == TSR_TYPE_IQ4_NL) {
        const tsr_block_iq4_nl * b = (const tsr_block_iq4_nl *) row + k / 32;
        return half_of(b->d) * k_iq4nl_values[nibble32(b->qs, j)];
    }
    if (TYPE == TSR_TYPE_Q2_K) {
        const tsr_block_q2_K * b = (const tsr_block_q2_K *) row + k / 256;
        const int sc = b->scales[e / 16];
        const float dl = half_of(b->d) * (float) (sc & 0x0F), ml = half_of(b->dmin) * (float) (sc >> 4);
        return __fsub_rn(__fmul_rn(dl, (float) q2_value(b->qs, e)), ml);
    }
    if (TYPE == TSR_TYPE_Q3_K) {
        const tsr_block_q3_K * b = (const tsr_block_q3_K *) row + k / 256;
        const int s = e / 16;
        const int lo = s < 8 ? (b->scales[s] & 0x0F) : (b->scales[s - 8] >> 4);
        const int hi = (b->scales[8 + s % 4] >> (2 * (s / 4))) & 3;
        const float dl = half_of(b->d) * (float) ((lo | (hi << 4)) - 32);
        // the high bit: bit e/32 of hmask[e%32]; clear means minus 4
        const bool high = (b->hmask[e % 32] >> (e / 32)) & 1;
        return dl * (float) (q2_value(b->qs, e) - (high ? 0 : 4));
    }
    if (TYPE == TSR_TYPE_Q4_K) {
        const tsr_block_q4_K * b = (const tsr_block_q4_K *) row + k / 256;
        return k4_value(b->scales, b->qs, nullptr, half_of(b->d), half_of(b->dmin), e);
    }
    if (TYPE == TSR_TYPE_Q5_K) {
        const tsr_block_q5_K * b = (const tsr_block_q5_K *) row + k / 256;
        return k4_value(b->scales, b->qs, b->qh, half_of(b->d), half_of(b->dmin), e);
    }
    // Q6_K: element 128h + 32q + l: low 4 bits in nibble q/2 of ql[64h + 32(q%2) + l], high
    // 2 bits at bits 2q of qh[32h + l]; scale 8h + 2q + l/16
    const tsr_block_q6_K * b = (const tsr_block_q6_K *) row + k / 256;
    const int h = e / 128, q = (e % 128) / 32;
    const int lo = (b->ql[64 * h + 32 * (q % 2) + j] >> (4 * (q / 2))) & 0x0F;
    const int hi = (b->qh[32 * h + j] >> (2 * q)) & 3;
    return half_of(b->d) * (float) b->scales[e / 16] * (float) ((lo | (hi << 4)) - 32);
}

template <int T> using type_tag = std::integral_constant<int, T>;

// f(type_tag<t>()) for a type dq_value decodes, and true; false for any other type.
template <typename F> bool with_dq_type(tsr_type t, F && f) {
    switch (t) {
        case TSR_TYPE_Q4_1: f(type_tag<TSR_TYPE_Q4_1>()); return true;
        case TSR_TYPE_Q5_0: f(type_tag<TSR_TYPE_Q5_0>()); return true;
        case TSR_TYPE_Q5_1: f(type_tag<TSR_TYPE_Q5_1>()); return true;
        case TSR_TYPE_IQ4_NL: f(type_tag<TSR_TYPE_IQ4_NL>()); return true;
        case TSR_TYPE_Q2_K: f(type_tag<TSR_TYPE_Q2_K>()); return true;
        case TSR_TYPE_Q3_K: f(type_tag<TSR_TYPE_Q3_K>()); return true;
        case TSR_TYPE_Q4_K: f(type_tag<TSR_TYPE_Q4_K>()); return true;
        case TSR_TYPE_Q5_K: f(type_tag<TSR_TYPE_Q5_K>()); return true;
        case TSR_TYPE_Q6_K: f(type_tag<TSR_TYPE_Q6_K>()); return true;
        default: return false;
    }
}

inline bool is_dq_type(tsr_type t) {
    return with_dq_type(t, [](auto) {});
}

} // namespace
} // namespace tsr_cuda
