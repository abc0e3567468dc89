#version 450
// dst = src0 OP src1 (F32), src1 broadcast over src0 by modulo; any strides.
#include "common.glsl"
layout(local_size_x = TSR_WG) in;
layout(constant_id = 0) const uint SPEC = 0;  // OP | MODE << 2
const uint OP = SPEC & 3u;                     // 0 add 1 sub 2 mul 3 div
const uint MODE = SPEC >> 2;                   // 0 strided, 1 all contiguous and same shape,
                                               // 2 contiguous with src1 one contiguous row [ne0]
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 3) buffer D { float d[]; };

void main() {
    uint idx = tsr_flat_id();
    if (idx >= pc.nrows * pc.ne0) return;
    int ia, ib, id;
    if (MODE != 0u) {
        uint g = pc.row0 * pc.ne0 + idx;
        ia = pc.off0 + int(g);
        id = pc.offd + int(g);
        ib = pc.off1 + int(MODE == 1u ? g : g % pc.ne0);
    } else {
        uint i0 = idx % pc.ne0;
        uint r  = pc.row0 + idx / pc.ne0;
        uint i1 = r % pc.ne1; r /= pc.ne1;
        uint i2 = r % pc.ne2; uint i3 = r / pc.ne2;
        ia = pc.off0 + int(i0*pc.nb00 + i1*pc.nb01 + i2*pc.nb02 + i3*pc.nb03);
        ib = pc.off1 + int((i0 % pc.ne10)*pc.nb10 + (i1 % pc.ne11)*pc.nb11 + (i2 % pc.ne12)*pc.nb12 + (i3 % pc.ne13)*pc.nb13);
        id = pc.offd + int(i0*pc.nb0 + i1*pc.nb1 + i2*pc.nb2 + i3*pc.nb3);
    }
    float x = a[ia], y = b[ib], z;
    if (OP == 0) z = x + y; else if (OP == 1) z = x - y; else if (OP == 2) z = x * y; else z = x / y;
    d[id] = z;
}
