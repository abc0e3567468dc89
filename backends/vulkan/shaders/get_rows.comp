#version 450
// get_rows(src0 [n, rows, ne2, ne3] of SRC_TYPE, src1 I32 [k, ne2, ne3]) -> F32 dst.
// SRC_TYPE 0 F32, 1 F16 (strides in elements), >= 2 a quantized type of dequant.glsl (strides
// in bytes).
// Only source rows in [u0, floatBitsToUint(p0)) are copied (large sources go in chunks).
#include "common.glsl"
layout(local_size_x = TSR_WG) in;
#if SRC_TYPE == 0
layout(binding = 0) readonly buffer A { float a[]; };
#elif SRC_TYPE == 1
layout(binding = 0) readonly buffer A { float16_t a[]; };
#else
layout(binding = 0) readonly buffer A { uint8_t a[]; };
#endif
layout(binding = 1) readonly buffer B { int b[]; };
layout(binding = 3) buffer D { float d[]; };

#if SRC_TYPE >= 2
#define DQ_TYPE SRC_TYPE
#include "dequant.glsl"
#endif

void main() {
    uint idx = tsr_flat_id();
    if (idx >= pc.nrows * pc.ne0) return;
    uint i0 = idx % pc.ne0;
    uint r  = pc.row0 + idx / pc.ne0;
    uint i10 = r % pc.ne1; r /= pc.ne1;
    uint i11 = r % pc.ne2; uint i12 = r / pc.ne2;
    uint row = uint(b[pc.off1 + int(i10*pc.nb10 + i11*pc.nb11 + i12*pc.nb12)]);
    if (row < pc.u0 || row >= floatBitsToUint(pc.p0)) return;
    int base = pc.off0 + int(row*pc.nb01 + i11*pc.nb02 + i12*pc.nb03);
    float v;
#if SRC_TYPE == 0 || SRC_TYPE == 1
    v = float(a[base + int(i0*pc.nb00)]);
#else
    v = dq_value(base, i0);
#endif
    d[pc.offd + int(i0*pc.nb0 + i10*pc.nb1 + i11*pc.nb2 + i12*pc.nb3)] = v;
}
