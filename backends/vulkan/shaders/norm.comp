#version 450
// norm (OP 0) / rms_norm (OP 1) / l2_norm (OP 2) over rows of src0 (F32); one workgroup per
// row; eps = p0.
#include "common.glsl"
layout(local_size_x = TSR_WG) in;
layout(constant_id = 0) const uint OP = 0;
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 3) buffer D { float d[]; };
shared float red[256];

float block_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    red[t] = v;
    barrier();
    for (uint s = 128; s > 0; s >>= 1) {
        if (t < s) red[t] += red[t + s];
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
    int bd = pc.offd + int(i1*pc.nb1 + i2*pc.nb2 + i3*pc.nb3);
    uint t = gl_LocalInvocationID.x;
    if (OP == 2) {   // x / max(|x|, eps), the max keeping a NaN norm as the CPU
        float ss = 0.0;
        for (uint i = t; i < pc.ne00; i += 256) { float x = a[ba + int(i*pc.nb00)]; ss += x * x; }
        float nrm = sqrt(block_sum(ss));
        // a NaN norm stays NaN explicitly: NVIDIA's compiler turned the select into a max
        float den = isnan(nrm) ? nrm : nrm < pc.p0 ? pc.p0 : nrm;
        for (uint i = t; i < pc.ne00; i += 256) d[bd + int(i*pc.nb0)] = a[ba + int(i*pc.nb00)] / den;
        return;
    }
    float n = float(pc.ne00);
    float mean = 0.0;
    if (OP == 0) {
        float s = 0.0;
        for (uint i = t; i < pc.ne00; i += 256) s += a[ba + int(i*pc.nb00)];
        mean = block_sum(s) / n;
    }
    float s2 = 0.0;
    for (uint i = t; i < pc.ne00; i += 256) { float x = a[ba + int(i*pc.nb00)] - mean; s2 += x * x; }
    float inv = inversesqrt(block_sum(s2) / n + pc.p0);
    for (uint i = t; i < pc.ne00; i += 256) d[bd + int(i*pc.nb0)] = (a[ba + int(i*pc.nb00)] - mean) * inv;
}
