#version 450
// set_rows(src0 F32 rows [n, k, ne2, ne3], src1 I32 indices [k, C1, C2]) into dst, the view
// of the destination [n, rows, ne2, ne3], F32 or F16 (DST_F16): element i0 of source row
// (i, i2, i3) goes to row src1[i, i2 % C1, i3 % C2] of dst. Rows whose index is outside
// [0, rows) are skipped, as the CPU backend skips them. One invocation per source element.
#include "common.glsl"
layout(local_size_x = TSR_WG) in;
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) readonly buffer B { int b[]; };
#include "dst_f32_f16.glsl"

void main() {
    uint idx = tsr_flat_id();
    if (idx >= pc.nrows * pc.ne00) return;
    uint i0 = idx % pc.ne00; uint r = idx / pc.ne00;
    uint i  = r % pc.ne01;   r /= pc.ne01;
    uint i2 = r % pc.ne02;   uint i3 = r / pc.ne02;
    int row = b[pc.off1 + int(i*pc.nb10 + (i2 % pc.ne11)*pc.nb11 + (i3 % pc.ne12)*pc.nb12)];
    if (row < 0 || uint(row) >= pc.ne1) return;
    d_store(pc.offd + int(i0*pc.nb0 + uint(row)*pc.nb1 + i2*pc.nb2 + i3*pc.nb3),
            a[pc.off0 + int(i0*pc.nb00 + i*pc.nb01 + i2*pc.nb02 + i3*pc.nb03)]);
}
