#version 450
// Matrix-vector: one workgroup per A row, up to 4 B columns at once (N <= 4).
// IDS (mul_mat_id): batch z is the pair (slot e, token t); A is the expert ids[e, t] names,
// B row e % n_b of token t, dst [M, n_used, n_tokens]; an id out of range gives NaN rows.
#extension GL_EXT_control_flow_attributes : enable
#include "mul_mat_common.glsl"
#define WG 128
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint IDS = 0;
layout(binding = 2) readonly buffer I { int ids[]; };
shared float red[4][WG];

#if A_TYPE >= 4
// Types 4..12 decode one unit of 16 values per step: the block's scale / min (K-quants:
// the unit's sub-block scales) once, its quant bytes as 32-bit words, four groups of 4
// consecutive values dotted with B in float. The quant words are read through a 32-bit or
// 16-bit view of the A buffer (same binding), B through a vec4 view.
layout(binding = 0) readonly buffer A16 { uint16_t a16[]; };
layout(binding = 0) readonly buffer A32 { uint a32[]; };
#if A_TYPE == 4
#define BLK_BYTES 20
#elif A_TYPE == 5
#define BLK_BYTES 22
#elif A_TYPE == 6
#define BLK_BYTES 24
#elif A_TYPE == 7
#define BLK_BYTES 18
#elif A_TYPE == 8
#define BLK_BYTES 84
#elif A_TYPE == 9
#define BLK_BYTES 110
#elif A_TYPE == 10
#define BLK_BYTES 144
#elif A_TYPE == 11
#define BLK_BYTES 176
#else
#define BLK_BYTES 210
#endif
#if A_TYPE <= 7
#define BLK_LOG2 5u   // 32 values a block, 2 units of 16
#define UPB_LOG2 1u
#else
#define BLK_LOG2 8u   // 256 values a super-block, 16 units of 16
#define UPB_LOG2 4u
#endif
#if A_TYPE == 4 || A_TYPE == 6 || A_TYPE == 8 || A_TYPE == 10 || A_TYPE == 11
#define HAS_MIN 1     // y = scale * q + min (Q4_1, Q5_1) or scale * q - min (K-quants)
#else
#define HAS_MIN 0
#endif

// the little-endian 32-bit word at byte o: o is a multiple of 4 where blocks are (and the
// row starts at one), else of 2 (every block size is even)
#define A_WORD ((BLK_BYTES & 3) == 0 ? 4u : 2u)
uint word_at(int o) {
    if (A_WORD == 4u) return a32[o >> 2];
    return uint(a16[o >> 1]) | (uint(a16[(o >> 1) + 1]) << 16);
}
float f16_at(int o) { return unpackHalf2x16(uint(a16[o >> 1])).x; }

const uvec4 SH8 = uvec4(0u, 8u, 16u, 24u);
// the 4 nibbles (hi: 0 low, 4 high) of the 4 bytes of w
uvec4 nib4(uint w, uint hi) { return (uvec4(w) >> (SH8 + hi)) & 15u; }
// bit `bit` of each of the 4 bytes of w, moved to bit 4
uvec4 bit4(uint w, uint bit) { return ((uvec4(w) >> (SH8 + bit)) & 1u) << 4; }

#if A_TYPE == 7
shared float kvalues[16];
#endif

// B through a vec4 view of its binding (the columns start at multiples of 4 floats)
layout(binding = 1) readonly buffer B4 { vec4 b4v[]; };

// acc[n] += sum over the unit's 4 groups g of sc[g] * dot(q[g], B[k0 + kg[g] ..]) (+ mn[g] * sum B)
void unit_acc(inout float acc[4], int bb, uint nc, uint k0, uvec4 kg, vec4 q[4], vec4 sc, vec4 mn) {
    // unrolled (constant indices keep acc, q, kg in registers)
    [[unroll]] for (uint n = 0; n < 4u; n++) {
        if (n >= nc) break;
        int bn = bb + int(n * pc.nb11 + k0);
        float s = 0.0;
        [[unroll]] for (uint g = 0; g < 4u; g++) {
            vec4 bv4 = b4v[(bn + int(kg[g])) >> 2];
            s += sc[g] * dot(q[g], bv4);
#if HAS_MIN
            s += mn[g] * ((bv4.x + bv4.y) + (bv4.z + bv4.w));
#endif
        }
        acc[n] += s;
    }
}

// the row at byte ab against B at bb, each invocation taking units t, t + WG, ...
void mmv_row(int ab, int bb, uint nc, uint t, inout float acc[4]) {
    uint nunits = (pc.K >> BLK_LOG2) << UPB_LOG2;
    for (uint u = t; u < nunits; u += WG) {
        uint blk = u >> UPB_LOG2, c = u & ((1u << UPB_LOG2) - 1u);
        int bo = ab + int(blk * uint(BLK_BYTES));
        uint k0 = blk << BLK_LOG2;
        vec4 q[4];
        vec4 sc, mn = vec4(0.0);
        uvec4 kg;
#if A_TYPE <= 7
        // values 8c..8c+7 (low nibbles of qs[8c..8c+7]) and 16+8c.. (their high nibbles)
        kg = uvec4(8u * c, 8u * c + 4u, 16u + 8u * c, 20u + 8u * c);
#if A_TYPE == 4
        vec2 dm = unpackHalf2x16(word_at(bo));
        uint w0 = word_at(bo + 4 + int(8u * c)), w1 = word_at(bo + 8 + int(8u * c));
        sc = vec4(dm.x); mn = vec4(dm.y);
        q[0] = vec4(nib4(w0, 0u)); q[1] = vec4(nib4(w1, 0u)); q[2] = vec4(nib4(w0, 4u)); q[3] = vec4(nib4(w1, 4u));
#elif A_TYPE == 5 || A_TYPE == 6
#if A_TYPE == 5
        float d = f16_at(bo);
        uint qh = word_at(bo + 2);
        int qs = bo + 6;
        sc = vec4(d);
#else
        vec2 dm = unpackHalf2x16(word_at(bo));
        uint qh = word_at(bo + 4);
        int qs = bo + 8;
        sc = vec4(dm.x); mn = vec4(dm.y);
#endif
        uint w0 = word_at(qs + int(8u * c)), w1 = word_at(qs + 4 + int(8u * c));
        // bit j of qh is the fifth bit of value j
        uvec4 sh = uvec4(0u, 1u, 2u, 3u);
        q[0] = vec4(nib4(w0, 0u) | (((uvec4(qh) >> (sh + kg[0])) & 1u) << 4));
        q[1] = vec4(nib4(w1, 0u) | (((uvec4(qh) >> (sh + kg[1])) & 1u) << 4));
        q[2] = vec4(nib4(w0, 4u) | (((uvec4(qh) >> (sh + kg[2])) & 1u) << 4));
        q[3] = vec4(nib4(w1, 4u) | (((uvec4(qh) >> (sh + kg[3])) & 1u) << 4));
#if A_TYPE == 5
        [[unroll]] for (uint g = 0; g < 4u; g++) q[g] -= 16.0;
#endif
#else // IQ4_NL
        sc = vec4(f16_at(bo));
        uint w0 = word_at(bo + 2 + int(8u * c)), w1 = word_at(bo + 6 + int(8u * c));
        uvec4 n0 = nib4(w0, 0u), n1 = nib4(w1, 0u), n2 = nib4(w0, 4u), n3 = nib4(w1, 4u);
        q[0] = vec4(kvalues[n0.x], kvalues[n0.y], kvalues[n0.z], kvalues[n0.w]);
        q[1] = vec4(kvalues[n1.x], kvalues[n1.y], kvalues[n1.z], kvalues[n1.w]);
        q[2] = vec4(kvalues[n2.x], kvalues[n2.y], kvalues[n2.z], kvalues[n2.w]);
        q[3] = vec4(kvalues[n3.x], kvalues[n3.y], kvalues[n3.z], kvalues[n3.w]);
#endif
#elif A_TYPE == 8 || A_TYPE == 9 || A_TYPE == 12
        // Q2_K, Q3_K, Q6_K: unit (h, c) = values 128h + 32s + 4c + i (s, i 0..3); the four
        // groups s have the sub-block scales 8h + 2s + c/4
        uint h = c >> 3, cc = c & 7u;
        kg = 128u * h + 4u * cc + uvec4(0u, 32u, 64u, 96u);
        uint is0 = 8u * h + (cc >> 2);   // scale index of group 0; group s: is0 + 2s
#if A_TYPE == 8
        // scales[16] (scale low nibble, min high nibble), qs[64], d, dmin
        uvec2 sw = uvec2(word_at(bo + int(8u * h)), word_at(bo + 4 + int(8u * h)));
        uint so = cc >> 2;   // byte of the 8 at 8h: so + 2s
        uvec4 sb = uvec4(sw.x >> (8u * so), sw.x >> (8u * so + 16u), sw.y >> (8u * so), sw.y >> (8u * so + 16u)) & 255u;
        vec2 dm = unpackHalf2x16(word_at(bo + 80));
        // the CPU's dl = d * (sc & 15), ml = dmin * (sc >> 4), y = dl * q - ml
        sc = dm.x * vec4(sb & 15u);
        mn = -(dm.y * vec4(sb >> 4));
        uint w = word_at(bo + 16 + int(32u * h + 4u * cc));
        [[unroll]] for (uint s = 0; s < 4u; s++) q[s] = vec4((uvec4(w) >> (SH8 + 2u * s)) & 3u);
#elif A_TYPE == 9
        // hmask[32], qs[64], scales[12] (6-bit, minus 32), d
        uint hm = word_at(bo + int(4u * cc));
        uint w = word_at(bo + 32 + int(32u * h + 4u * cc));
        float d = f16_at(bo + 108);
        [[unroll]] for (uint s = 0; s < 4u; s++) {
            sc[s] = d * float(q3k_scale(bo + 96, is0 + 2u * s));
            // the high bit: bit 4h + s of hmask[4c + i]; clear means minus 4
            uvec4 high = (uvec4(hm) >> (SH8 + 4u * h + s)) & 1u;
            q[s] = vec4(ivec4((uvec4(w) >> (SH8 + 2u * s)) & 3u) - 4 * ivec4(1u - high));
        }
#else
        // ql[128], qh[64], scales[16] (int8), d: value 128h + 32s + l has the low 4 bits in
        // nibble s/2 of ql[64h + 32(s%2) + l], the high 2 bits at bits 2s of qh[32h + l]
        uint l0 = word_at(bo + int(64u * h + 4u * cc)), l1 = word_at(bo + int(64u * h + 32u + 4u * cc));
        uint qh = word_at(bo + 128 + int(32u * h + 4u * cc));
        uvec2 sw = uvec2(word_at(bo + 192 + int(8u * h)), word_at(bo + 196 + int(8u * h)));
        float d = f16_at(bo + 208);
        uint so = cc >> 2;
        ivec4 sb = ivec4(uvec4(sw.x >> (8u * so), sw.x >> (8u * so + 16u), sw.y >> (8u * so), sw.y >> (8u * so + 16u)) & 255u);
        sb -= (sb & 128) << 1;
        sc = d * vec4(sb);
        q[0] = vec4(ivec4(nib4(l0, 0u) | (((uvec4(qh) >> SH8) & 3u) << 4)) - 32);
        q[1] = vec4(ivec4(nib4(l1, 0u) | (((uvec4(qh) >> (SH8 + 2u)) & 3u) << 4)) - 32);
        q[2] = vec4(ivec4(nib4(l0, 4u) | (((uvec4(qh) >> (SH8 + 4u)) & 3u) << 4)) - 32);
        q[3] = vec4(ivec4(nib4(l1, 4u) | (((uvec4(qh) >> (SH8 + 6u)) & 3u) << 4)) - 32);
#endif
#else
        // Q4_K, Q5_K: unit (j, c) = values 64j + 8c + i (sub-block 2j, low nibbles of
        // qs[32j + 8c + i]) and 64j + 32 + 8c + i (sub-block 2j + 1, the high nibbles), i 0..7
        uint j = c >> 2, cc = c & 3u;
        kg = 64u * j + 8u * cc + uvec4(0u, 4u, 32u, 36u);
        vec2 dm = unpackHalf2x16(word_at(bo));
        // 6-bit scale and min of sub-blocks 2j and 2j + 1
        uvec2 s0 = k4_scale_min(bo + 4, 2u * j), s1 = k4_scale_min(bo + 4, 2u * j + 1u);
        float ds0 = dm.x * float(s0.x), ds1 = dm.x * float(s1.x);
        float ms0 = dm.y * float(s0.y), ms1 = dm.y * float(s1.y);
        sc = vec4(ds0, ds0, ds1, ds1);
        mn = -vec4(ms0, ms0, ms1, ms1);
#if A_TYPE == 10
        int qs = bo + 16;
#else
        int qs = bo + 48;
#endif
        uint w0 = word_at(qs + int(32u * j + 8u * cc)), w1 = word_at(qs + 4 + int(32u * j + 8u * cc));
        q[0] = vec4(nib4(w0, 0u)); q[1] = vec4(nib4(w1, 0u)); q[2] = vec4(nib4(w0, 4u)); q[3] = vec4(nib4(w1, 4u));
#if A_TYPE == 11
        // the fifth bit: bit 2j (low nibbles) or 2j + 1 (high) of qh[8c + i]
        uint h0 = word_at(bo + 16 + int(8u * cc)), h1 = word_at(bo + 20 + int(8u * cc));
        q[0] += vec4(bit4(h0, 2u * j)); q[1] += vec4(bit4(h1, 2u * j));
        q[2] += vec4(bit4(h0, 2u * j + 1u)); q[3] += vec4(bit4(h1, 2u * j + 1u));
#endif
#endif
        unit_acc(acc, bb, nc, k0, kg, q, sc, mn);
    }
}
#endif

void main() {
    uint t = gl_LocalInvocationID.x;
    uint m = tsr_flat_group();
    uint batch = gl_WorkGroupID.z;
    if (m >= pc.M) return;
    int ab, bb, db;
    if (IDS != 0u) {
        uint pair = pc.pair0 + batch;
        uint e = pair % pc.n_used, tok = pair / pc.n_used;
        int expert = ids[pc.off2 + int(e + tok * pc.nb_ids1)];
        db = pc.offd + int((pc.m0 + m) + e * pc.nb1 + tok * pc.nb2);
        if (expert < 0 || uint(expert) >= pc.n_expert) {
            if (t == 0u) d[db] = uintBitsToFloat(0x7fc00000u);
            return;
        }
        ab = pc.off0 + int(m * pc.nb01 + uint(expert) * pc.nb02);
        bb = pc.off1 + int((e % pc.n_b) * pc.nb11 + tok * pc.nb12);
    } else {
        uint i12 = batch % pc.ne12, i13 = batch / pc.ne12;
        ab = a_row(m, i12, i13);
        bb = pc.off1 + int(i12 * pc.nb12 + i13 * pc.nb13);
        db = pc.offd + int((pc.m0 + m) + i12 * pc.nb2 + i13 * pc.nb3);
    }
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
    uint nc = min(pc.N, 4u);
#if A_TYPE <= 1
    for (uint k = t; k < pc.K; k += WG) {
        float av = float(a[ab + int(k)]);
        for (uint n = 0; n < nc; n++) acc[n] += av * b[bb + int(n * pc.nb11 + k)];
    }
#elif A_TYPE <= 3
    // each invocation takes 16 values (half a block of 32) at a time
    uint nhalf = pc.K / 16u;
    for (uint h = t; h < nhalf; h += WG) {
        uint blk = h >> 1, part = h & 1u;
#if A_TYPE == 2
        int bo = ab + int(blk * 34u);
        float dd = half_at(bo);
        for (uint j = 0; j < 16u; j++) {
            uint k = blk * 32u + part * 16u + j;
            int q = int(a[bo + 2 + int(part * 16u + j)]);
            float av = dd * float(q - ((q & 128) << 1));
            for (uint n = 0; n < nc; n++) acc[n] += av * b[bb + int(n * pc.nb11 + k)];
        }
#else
        int bo = ab + int(blk * 18u);
        float dd = half_at(bo);
        for (uint j = 0; j < 16u; j++) {
            uint by = uint(a[bo + 2 + int(j)]);
            uint k = blk * 32u + part * 16u + j;
            float av = dd * (float(part == 0u ? (by & 15u) : (by >> 4)) - 8.0);
            for (uint n = 0; n < nc; n++) acc[n] += av * b[bb + int(n * pc.nb11 + k)];
        }
#endif
    }
#else
#if A_TYPE == 7
    if (t < 16u) kvalues[t] = iq4nl_values[t];
    barrier();
#endif
    // A through its 32-bit view when the block size is a multiple of 4 bytes, else (the
    // sizes are even) its 16-bit one, when the row starts at a multiple of that; B as vec4
    // when every column starts at a multiple of 4 floats (the groups of 4 values are).
    // Anything else (views at odd offsets, which allocations never give) takes dq_value
    // per element: one copy of the unit code only (lavapipe runs 2x slower with a second).
    if (((uint(ab) & (A_WORD - 1u)) | ((uint(bb) | (nc > 1u ? pc.nb11 : 0u)) & 3u)) == 0u) {
        mmv_row(ab, bb, nc, t, acc);
    } else {
        for (uint k = t; k < pc.K; k += WG) {
            float av = dq_value(ab, k);
            for (uint n = 0; n < nc; n++) acc[n] += av * b[bb + int(n * pc.nb11 + k)];
        }
    }
#endif
    for (uint n = 0; n < nc; n++) red[n][t] = acc[n];
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) for (uint n = 0; n < nc; n++) red[n][t] += red[n][t + s];
        barrier();
    }
    if (t == 0u) {
        for (uint n = 0; n < nc; n++)
            d[db + int(n * pc.nb1)] = red[n][0];
    }
}
