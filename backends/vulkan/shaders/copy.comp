#version 450
// cpy/cont/dup: element g of src (logical order by src's shape) -> element g of dst
// (by dst's shape); F32/F16 on either side (SRC_F16, DST_F16 defines).
#include "common.glsl"
layout(local_size_x = TSR_WG) in;
layout(constant_id = 0) const uint FLAT = 0;   // both contiguous: element g is at g
#if SRC_F16
layout(binding = 0) readonly buffer A { float16_t a[]; };
#else
layout(binding = 0) readonly buffer A { float a[]; };
#endif
#include "dst_f32_f16.glsl"

void main() {
    uint idx = tsr_flat_id();
    if (idx >= pc.nrows * pc.ne0) return;
    uint g = pc.row0 * pc.ne0 + idx;
    if (FLAT != 0u) {
        d_store(pc.offd + int(g), float(a[pc.off0 + int(g)]));
        return;
    }
    uint j0 = g % pc.ne00; uint s = g / pc.ne00;
    uint j1 = s % pc.ne01; s /= pc.ne01;
    uint j2 = s % pc.ne02; uint j3 = s / pc.ne02;
    uint i0 = g % pc.ne0;  uint r = g / pc.ne0;
    uint i1 = r % pc.ne1;  r /= pc.ne1;
    uint i2 = r % pc.ne2;  uint i3 = r / pc.ne2;
    int ia = pc.off0 + int(j0*pc.nb00 + j1*pc.nb01 + j2*pc.nb02 + j3*pc.nb03);
    int id = pc.offd + int(i0*pc.nb0 + i1*pc.nb1 + i2*pc.nb2 + i3*pc.nb3);
    d_store(id, float(a[ia]));
}
