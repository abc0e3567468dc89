// Dequantization of single elements of quantized rows, for get_rows, mul_mat and
// mul_mat_vec. Each format is defined by quants.inl's dequantize_row_* (ggml's order of
// float operations); the functions below mirror them element by element.
// A product and a sum are `precise`: a fused multiply-add would round once, not twice as
// the CPU does, and get_rows must give the CPU's floats exactly.
// The includer defines DQ_TYPE and a uint8_t buffer `a`:
//   2 Q8_0, 3 Q4_0, 4 Q4_1, 5 Q5_0, 6 Q5_1, 7 IQ4_NL (32-element blocks),
//   8 Q2_K, 9 Q3_K, 10 Q4_K, 11 Q5_K, 12 Q6_K (256-element super-blocks).

uint byte_at(int o) { return uint(a[o]); }
float half_at(int o) { return unpackHalf2x16(byte_at(o) | (byte_at(o + 1) << 8)).x; }
int int8_at(int o) { int v = int(byte_at(o)); return v - ((v & 128) << 1); }
// bit j (0..31) of the little-endian 32-bit word at o
uint bit_at(int o, uint j) { return (byte_at(o + int(j >> 3u)) >> (j & 7u)) & 1u; }

// 4-bit value j of a 32-element block: low nibbles of qs[0..15], then the high ones
uint nibble32(int qs, uint j) {
    uint by = byte_at(qs + int(j & 15u));
    return j < 16u ? (by & 15u) : (by >> 4);
}

#if DQ_TYPE == 7
const float iq4nl_values[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                                         1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
#endif

#if DQ_TYPE >= 8
// 2-bit value e of a super-block (Q2_K, low bits of Q3_K): bits 2s of qs[32h + l] for
// e = 128h + 32s + l
uint q2_value(int qs, uint e) {
    return (byte_at(qs + int(32u * (e >> 7) + (e & 31u))) >> (2u * ((e & 127u) >> 5))) & 3u;
}
#endif

#if DQ_TYPE == 9
// scale s (0..15) of Q3_K, minus 32: low 4 bits in the 8 bytes at sc, high 2 in the 4 after
int q3k_scale(int sc, uint s) {
    uint lo = s < 8u ? (byte_at(sc + int(s)) & 15u) : (byte_at(sc + int(s) - 8) >> 4);
    uint hi = (byte_at(sc + 8 + int(s & 3u)) >> (2u * (s >> 2))) & 3u;
    return int(lo | (hi << 4)) - 32;
}
#endif

#if DQ_TYPE == 10 || DQ_TYPE == 11
// scale and min of sub-block s (0..7) of Q4_K / Q5_K: 6 bits each in 12 bytes at sc
uvec2 k4_scale_min(int sc, uint s) {
    int j = int(s);
    if (s < 4u) return uvec2(byte_at(sc + j) & 63u, byte_at(sc + j + 4) & 63u);
    return uvec2((byte_at(sc + j + 4) & 15u) | ((byte_at(sc + j - 4) >> 6) << 4),
                 (byte_at(sc + j + 4) >> 4) | ((byte_at(sc + j) >> 6) << 4));
}
#endif

// element k of the quantized row that starts at byte `base`
float dq_value(int base, uint k) {
    uint j = k & 31u, e = k & 255u;
#if DQ_TYPE == 2
    int bo = base + int((k >> 5) * 34u);
    return half_at(bo) * float(int8_at(bo + 2 + int(j)));
#elif DQ_TYPE == 3
    int bo = base + int((k >> 5) * 18u);
    return half_at(bo) * (float(nibble32(bo + 2, j)) - 8.0);
#elif DQ_TYPE == 4
    int bo = base + int((k >> 5) * 20u);
    precise float x = float(nibble32(bo + 4, j)) * half_at(bo) + half_at(bo + 2);
    return x;
#elif DQ_TYPE == 5
    int bo = base + int((k >> 5) * 22u);
    int q = int(nibble32(bo + 6, j) | (bit_at(bo + 2, j) << 4));
    return float(q - 16) * half_at(bo);
#elif DQ_TYPE == 6
    int bo = base + int((k >> 5) * 24u);
    uint q = nibble32(bo + 8, j) | (bit_at(bo + 4, j) << 4);
    precise float x = float(q) * half_at(bo) + half_at(bo + 2);
    return x;
#elif DQ_TYPE == 7
    int bo = base + int((k >> 5) * 18u);
    return half_at(bo) * iq4nl_values[nibble32(bo + 2, j)];
#elif DQ_TYPE == 8
    int bo = base + int((k >> 8) * 84u);
    uint sc = byte_at(bo + int(e >> 4));
    precise float dl = half_at(bo + 80) * float(sc & 15u), ml = half_at(bo + 82) * float(sc >> 4);
    precise float x = dl * float(q2_value(bo + 16, e)) - ml;
    return x;
#elif DQ_TYPE == 9
    int bo = base + int((k >> 8) * 110u);
    float dl = half_at(bo + 108) * float(q3k_scale(bo + 96, e >> 4));
    // the high bit: bit e/32 of hmask[e%32]; clear means minus 4
    uint high = (byte_at(bo + int(j)) >> (e >> 5)) & 1u;
    return dl * float(int(q2_value(bo + 32, e)) - (high != 0u ? 0 : 4));
#elif DQ_TYPE == 10 || DQ_TYPE == 11
#if DQ_TYPE == 10
    int bo = base + int((k >> 8) * 144u), qs = bo + 16;
#else
    int bo = base + int((k >> 8) * 176u), qs = bo + 48;
#endif
    uint s = e >> 5;
    uvec2 sm = k4_scale_min(bo + 4, s);
    uint by = byte_at(qs + int(32u * (s >> 1) + j));
    uint v = (s & 1u) != 0u ? (by >> 4) : (by & 15u);
#if DQ_TYPE == 11
    v += ((byte_at(bo + 16 + int(j)) >> s) & 1u) << 4;
#endif
    precise float ds = half_at(bo) * float(sm.x), ms = half_at(bo + 2) * float(sm.y);
    precise float x = ds * float(v) - ms;
    return x;
#elif DQ_TYPE == 12
    // element 128h + 32q + l: low 4 bits in nibble q/2 of ql[64h + 32(q%2) + l], high 2 bits
    // at bits 2q of qh[32h + l]
    int bo = base + int((k >> 8) * 210u);
    uint h = e >> 7, q = (e & 127u) >> 5;
    uint lo = (byte_at(bo + int(64u * h + 32u * (q & 1u) + j)) >> (4u * (q >> 1))) & 15u;
    uint hi = (byte_at(bo + 128 + int(32u * h + j)) >> (2u * q)) & 3u;
    return half_at(bo + 208) * float(int8_at(bo + 192 + int(e >> 4))) * float(int(lo | (hi << 4)) - 32);
#endif
}
