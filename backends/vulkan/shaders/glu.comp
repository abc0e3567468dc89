#version 450
// GLU: fused (src1 absent, u0 bit0 = 0): row [x | g] of src0 (swapped, u0 bit1: [g | x]);
// split (u0 bit0 = 1): x from src0, g from src1. dst = act(x) * g, the act by the op in u0
// bits 2-4 (tsr_glu_op: 0 swiglu 1 reglu 2 geglu 3 geglu_erf 4 geglu_quick 5 swiglu_oai,
// alpha p0, limit p1).
#include "common.glsl"
layout(local_size_x = TSR_WG) in;
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 3) buffer D { float d[]; };

float glu(float x, float g) {
    switch ((pc.u0 >> 2) & 7u) {
    case 1u: return (isnan(x) ? x : max(x, 0.0)) * g;
    case 2u: return tsr_gelu(x) * g;
    case 3u: return tsr_gelu_erf(x) * g;
    case 4u: return tsr_gelu_quick(x) * g;
    case 5u: {   // NaN kept through both clamps, as the CPU
        float xc = x > pc.p1 ? pc.p1 : x;
        float gc = isnan(g) ? g : clamp(g, -pc.p1, pc.p1);
        return xc / (1.0 + exp(-pc.p0 * xc)) * (gc + 1.0);
    }
    default: return tsr_silu(x) * g;
    }
}

void main() {
    uint idx = tsr_flat_id();
    if (idx >= pc.nrows * pc.ne0) return;
    uint i0 = idx % pc.ne0;
    uint r  = pc.row0 + idx / pc.ne0;
    uint i1 = r % pc.ne1; r /= pc.ne1;
    uint i2 = r % pc.ne2; uint i3 = r / pc.ne2;
    int id = pc.offd + int(i0*pc.nb0 + i1*pc.nb1 + i2*pc.nb2 + i3*pc.nb3);
    float x, g;
    if ((pc.u0 & 1u) != 0u) {
        x = a[pc.off0 + int(i0*pc.nb00 + i1*pc.nb01 + i2*pc.nb02 + i3*pc.nb03)];
        g = b[pc.off1 + int(i0*pc.nb10 + i1*pc.nb11 + i2*pc.nb12 + i3*pc.nb13)];
    } else {
        uint ix = ((pc.u0 & 2u) != 0u) ? i0 + pc.ne0 : i0;
        uint ig = ((pc.u0 & 2u) != 0u) ? i0 : i0 + pc.ne0;
        int base = pc.off0 + int(i1*pc.nb01 + i2*pc.nb02 + i3*pc.nb03);
        x = a[base + int(ix*pc.nb00)];
        g = a[base + int(ig*pc.nb00)];
    }
    d[id] = glu(x, g);
}
