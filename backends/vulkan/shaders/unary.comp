#version 450
// Elementwise F32 -> F32 with any strides on both sides; OP is a specialization constant.
#include "common.glsl"
layout(local_size_x = TSR_WG) in;
layout(constant_id = 0) const uint SPEC = 0;   // OP | FLAT << 5
const uint OP = SPEC & 31u;
const bool FLAT = (SPEC >> 5) != 0u;            // src0 and dst contiguous: flat indices
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 3) buffer D { float d[]; };

// 0 relu 1 tanh 2 sigmoid 3 gelu 4 gelu_quick 5 silu 6 neg 7 abs 8 exp
// 9 sqr 10 sqrt 11 log 12 scale(p0) 13 clamp(p0,p1)
// 14 sgn 15 step 16 elu 17 hardswish 18 hardsigmoid 19 expm1 20 softplus 21 gelu_erf
// 22 floor 23 ceil 24 round 25 trunc 26 sin 27 cos 28 leaky_relu(p0) 29 fill(p0)
// GLSL's max, min and clamp are undefined for NaN, and drivers may fold comparisons as if
// there were none: relu, tanh, clamp and step pass a NaN explicitly

float hardsigmoid(float x) { return isnan(x) ? x : clamp((x + 3.0) / 6.0, 0.0, 1.0); }
// halves away from zero (C's roundf, as the CPU); GLSL's round() may go either way
float round_away(float x) {
    float t = trunc(x);
    return abs(x - t) >= 0.5 ? t + sign(x) : t;
}
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
    case 13: return isnan(x) ? x : clamp(x, pc.p0, pc.p1);
    case 14: return x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : x == 0.0 ? 0.0 : x;
    case 15: return isnan(x) ? x : x > 0.0 ? 1.0 : 0.0;   // NVIDIA folded "x <= 0 ? 0 : x" to 0
    case 16: return x > 0.0 ? x : tsr_expm1(x);
    case 17: return x * hardsigmoid(x);
    case 18: return hardsigmoid(x);
    case 19: return tsr_expm1(x);
    case 20: return x > 20.0 ? x : x < -20.0 ? exp(x) : log(1.0 + exp(x));
    case 21: return tsr_gelu_erf(x);
    case 22: return floor(x);
    case 23: return ceil(x);
    case 24: return round_away(x);
    case 25: return trunc(x);
    case 26: return sin(x);
    case 27: return cos(x);
    case 28: return x > 0.0 ? x : pc.p0 * x;
    default: return pc.p0;
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
