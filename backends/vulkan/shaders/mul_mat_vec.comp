#version 450
// Matrix-vector: one workgroup per A row, up to 4 B columns at once (N <= 4).
// IDS (mul_mat_id): batch z is the pair (slot e, token t); A is the expert ids[e, t] names,
// B row e % n_b of token t, dst [M, n_used, n_tokens]; an id out of range gives NaN rows.
#include "mul_mat_common.glsl"
#define WG 128
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint IDS = 0;
layout(binding = 2) readonly buffer I { int ids[]; };
shared float red[4][WG];

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
#else
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
#elif A_TYPE == 3
        int bo = ab + int(blk * 18u);
        float dd = half_at(bo);
        for (uint j = 0; j < 16u; j++) {
            uint by = uint(a[bo + 2 + int(j)]);
            uint k = blk * 32u + part * 16u + j;
            float av = dd * (float(part == 0u ? (by & 15u) : (by >> 4)) - 8.0);
            for (uint n = 0; n < nc; n++) acc[n] += av * b[bb + int(n * pc.nb11 + k)];
        }
#else
        // every other type: blocks are whole multiples of 16 values
        for (uint j = 0; j < 16u; j++) {
            uint k = h * 16u + j;
            float av = dq_value(ab, k);
            for (uint n = 0; n < nc; n++) acc[n] += av * b[bb + int(n * pc.nb11 + k)];
        }
#endif
    }
#endif
    for (uint n = 0; n < 4u; n++) red[n][t] = acc[n];
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) for (uint n = 0; n < 4u; n++) red[n][t] += red[n][t + s];
        barrier();
    }
    if (t == 0u) {
        for (uint n = 0; n < nc; n++)
            d[db + int(n * pc.nb1)] = red[n][0];
    }
}
