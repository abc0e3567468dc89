#version 450
// dst[i] = (i0 > n_past + i1) ? -inf : src0[i]; n_past in u0.
#include "common.glsl"
layout(local_size_x = TSR_WG) in;
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 3) buffer D { float d[]; };

void main() {
    uint idx = tsr_flat_id();
    if (idx >= pc.nrows * pc.ne0) return;
    uint i0 = idx % pc.ne0;
    uint r  = pc.row0 + idx / pc.ne0;
    uint i1 = r % pc.ne1; r /= pc.ne1;
    uint i2 = r % pc.ne2; uint i3 = r / pc.ne2;
    int ia = pc.off0 + int(i0*pc.nb00 + i1*pc.nb01 + i2*pc.nb02 + i3*pc.nb03);
    int id = pc.offd + int(i0*pc.nb0 + i1*pc.nb1 + i2*pc.nb2 + i3*pc.nb3);
    d[id] = (int(i0) > int(pc.u0) + int(i1)) ? uintBitsToFloat(0xff800000u) : a[ia];
}
