#version 450
// concat(src0, src1, dim = u0) -> dst (F32), any strides.
#include "common.glsl"
layout(local_size_x = TSR_WG) in;
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 3) buffer D { float d[]; };

void main() {
    uint idx = tsr_flat_id();
    if (idx >= pc.nrows * pc.ne0) return;
    uint i[4];
    i[0] = idx % pc.ne0;
    uint r = pc.row0 + idx / pc.ne0;
    i[1] = r % pc.ne1; r /= pc.ne1;
    i[2] = r % pc.ne2; i[3] = r / pc.ne2;
    int id = pc.offd + int(i[0]*pc.nb0 + i[1]*pc.nb1 + i[2]*pc.nb2 + i[3]*pc.nb3);
    uint na[4] = uint[4](pc.ne00, pc.ne01, pc.ne02, pc.ne03);
    uint dim = pc.u0;
    float v;
    if (i[dim] < na[dim]) {
        v = a[pc.off0 + int(i[0]*pc.nb00 + i[1]*pc.nb01 + i[2]*pc.nb02 + i[3]*pc.nb03)];
    } else {
        i[dim] -= na[dim];
        v = b[pc.off1 + int(i[0]*pc.nb10 + i[1]*pc.nb11 + i[2]*pc.nb12 + i[3]*pc.nb13)];
    }
    d[id] = v;
}
