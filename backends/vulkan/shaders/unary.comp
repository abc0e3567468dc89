#version 450
// Elementwise F32 -> F32 with any strides on both sides; OP is a specialization constant.
#include "common.glsl"
layout(local_size_x = TSR_WG) in;
layout(constant_id = 0) const uint SPEC = 0;   // OP | FLAT << 4
const uint OP = SPEC & 15u;
const bool FLAT = (SPEC >> 4) != 0u;            // src0 and dst contiguous: flat indices
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 3) buffer D { float d[]; };

// 0 relu 1 tanh 2 sigmoid 3 gelu 4 gelu_quick 5 silu 6 neg 7 abs 8 exp
// 9 sqr 10 sqrt 11 log 12 scale(p0) 13 clamp(p0,p1)
// GLSL's max, min and clamp are undefined for NaN: relu, tanh and clamp pass it explicitly
float f(float x) {
    switch (OP) {
    case 0:  return isnan(x) ? x : max(x, 0.0);
    case 1:  return isnan(x) ? x : tanh(clamp(x, -15.0, 15.0));
    case 2:  return 1.0 / (1.0 + exp(-x));
    case 3:  return tsr_gelu(x);
    case 4:  return x / (1.0 + exp(-1.702 * x));
    case 5:  return tsr_silu(x);
    case 6:  return -x;
    case 7:  return abs(x);
    case 8:  return exp(x);
    case 9:  return x * x;
    case 10: return sqrt(x);
    case 11: return log(x);
    case 12: return x * pc.p0;
    default: return isnan(x) ? x : clamp(x, pc.p0, pc.p1);
    }
}

void main() {
    uint idx = tsr_flat_id();
    if (idx >= pc.nrows * pc.ne0) return;
    if (FLAT) {
        uint g = pc.row0 * pc.ne0 + idx;
        d[pc.offd + int(g)] = f(a[pc.off0 + int(g)]);
        return;
    }
    uint i0 = idx % pc.ne0;
    uint r  = pc.row0 + idx / pc.ne0;
    uint i1 = r % pc.ne1; r /= pc.ne1;
    uint i2 = r % pc.ne2; uint i3 = r / pc.ne2;
    int ia = pc.off0 + int(i0*pc.nb00 + i1*pc.nb01 + i2*pc.nb02 + i3*pc.nb03);
    int id = pc.offd + int(i0*pc.nb0 + i1*pc.nb1 + i2*pc.nb2 + i3*pc.nb3);
    d[id] = f(a[ia]);
}
