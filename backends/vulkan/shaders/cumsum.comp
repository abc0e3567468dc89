#version 450
// cumsum: inclusive prefix sums of each row of src0 (F32). One workgroup per row: each thread
// sums one contiguous chunk, thread 0 turns the chunk sums into their prefix, then each
// thread writes its chunk's running sums from its prefix.
#include "common.glsl"
layout(local_size_x = TSR_WG) in;
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 3) buffer D { float d[]; };
shared float part[256];

void main() {
    uint grp = tsr_flat_group();
    if (grp >= pc.nrows) return;
    uint r = pc.row0 + grp;
    uint i1 = r % pc.ne01; r /= pc.ne01;
    uint i2 = r % pc.ne02; uint i3 = r / pc.ne02;
    int ba = pc.off0 + int(i1*pc.nb01 + i2*pc.nb02 + i3*pc.nb03);
    int bd = pc.offd + int(i1*pc.nb1 + i2*pc.nb2 + i3*pc.nb3);
    uint t = gl_LocalInvocationID.x;
    uint chunk = (pc.ne00 + 255u) / 256u;
    uint i0 = min(t * chunk, pc.ne00), i1e = min(i0 + chunk, pc.ne00);
    float s = 0.0;
    for (uint i = i0; i < i1e; ++i) s += a[ba + int(i*pc.nb00)];
    part[t] = s;
    barrier();
    if (t == 0) {
        float run = 0.0;
        for (uint j = 0; j < 256u; ++j) { float v = part[j]; part[j] = run; run += v; }
    }
    barrier();
    float acc = part[t];
    for (uint i = i0; i < i1e; ++i) {
        acc += a[ba + int(i*pc.nb00)];
        d[bd + int(i*pc.nb0)] = acc;
    }
}
