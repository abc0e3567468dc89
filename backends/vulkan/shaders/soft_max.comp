#version 450
// soft_max_ext over rows: softmax(src0*scale + slope*mask); one workgroup per row.
// p0 = scale, p1 = max_bias, u0 = n_head_log2; src1 = mask (F32, or F16 with MASK_F16),
// rows i01 (mask has >= ne01 rows), broadcast over dims 2-3 by modulo. HAS_MASK spec const.
#include "common.glsl"
layout(local_size_x = TSR_WG) in;
layout(constant_id = 0) const uint HAS_MASK = 0;
layout(binding = 0) readonly buffer A { float a[]; };
#if MASK_F16
layout(binding = 1) readonly buffer B { float16_t b[]; };
#else
layout(binding = 1) readonly buffer B { float b[]; };
#endif
layout(binding = 3) buffer D { float d[]; };
shared float red[256];

float block_reduce(float v, bool is_max) {
    uint t = gl_LocalInvocationID.x;
    red[t] = v;
    barrier();
    for (uint s = 128; s > 0; s >>= 1) {
        if (t < s) red[t] = is_max ? max(red[t], red[t + s]) : red[t] + red[t + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

void main() {
    uint grp = tsr_flat_group();
    if (grp >= pc.nrows) return;
    uint r = pc.row0 + grp;
    uint i1 = r % pc.ne01; r /= pc.ne01;
    uint i2 = r % pc.ne02; uint i3 = r / pc.ne02;
    int ba = pc.off0 + int(i1*pc.nb01 + i2*pc.nb02 + i3*pc.nb03);
    int bm = pc.off1 + int(i1*pc.nb11 + (i2 % pc.ne12)*pc.nb12 + (i3 % pc.ne13)*pc.nb13);
    int bd = pc.offd + int(i1*pc.nb1 + i2*pc.nb2 + i3*pc.nb3);
    uint t = gl_LocalInvocationID.x;

    float slope = 1.0;
    if (pc.p1 > 0.0) {
        uint nhl = pc.u0;
        float m0 = exp2(-pc.p1 / float(nhl));
        float m1 = exp2(-(pc.p1 / 2.0) / float(nhl));
        slope = i2 < nhl ? pow(m0, float(i2 + 1)) : pow(m1, float(2 * (i2 - nhl) + 1));
    }
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    const float POS_INF = uintBitsToFloat(0x7f800000u);
    // GLSL's max is undefined for NaN: a NaN enters the max as +inf, and a max of +inf
    // (a NaN or +inf entry) makes the row NaN, as on the CPU (docs/ops.md)
    float mx = NEG_INF;
    for (uint i = t; i < pc.ne00; i += 256) {
        float w = a[ba + int(i*pc.nb00)] * pc.p0;
        if (HAS_MASK != 0) w += slope * float(b[bm + int(i*pc.nb10)]);
        mx = max(mx, isnan(w) ? POS_INF : w);
    }
    mx = block_reduce(mx, true);
    if (mx == POS_INF || mx == NEG_INF) {   // uniform: every invocation reads the same mx
        const float fill = mx == POS_INF ? uintBitsToFloat(0x7fc00000u) : 0.0;   // NaN, or a fully masked row's zeros
        for (uint i = t; i < pc.ne00; i += 256) d[bd + int(i*pc.nb0)] = fill;
        return;
    }
    float s = 0.0;
    for (uint i = t; i < pc.ne00; i += 256) {
        float w = a[ba + int(i*pc.nb00)] * pc.p0;
        if (HAS_MASK != 0) w += slope * float(b[bm + int(i*pc.nb10)]);
        s += (w == NEG_INF) ? 0.0 : exp(w - mx);
    }
    s = block_reduce(s, false);
    float inv = 1.0 / s;   // s >= 1: the max's own term
    for (uint i = t; i < pc.ne00; i += 256) {
        float w = a[ba + int(i*pc.nb00)] * pc.p0;
        if (HAS_MASK != 0) w += slope * float(b[bm + int(i*pc.nb10)]);
        d[bd + int(i*pc.nb0)] = ((w == NEG_INF) ? 0.0 : exp(w - mx)) * inv;
    }
}
