#version 450
// RoPE (ggml's rope_yarn) on src0 [head_dim, n_head, n_tokens, ne3] F32 with positions
// src1 (I32 [ne2]) and optional frequency factors src2 (F32 [n_dims/2]).
// NEOX spec const: rotate (i, i + n_dims/2) instead of (2i, 2i+1).
#define TSR_CUSTOM_PC 1
#include "common.glsl"
layout(push_constant) uniform PC {
    uint ne00, ne01, ne02, ne03;  uint nb00, nb01, nb02, nb03;
    uint nb0, nb1, nb2, nb3;
    int off0, off1, off2, offd;
    uint row0, nrows, n_dims, has_ff;
    float freq_scale, ext_factor, attn_factor, corr0, corr1, theta_scale;
} pc;
layout(local_size_x = TSR_WG) in;
layout(constant_id = 0) const uint NEOX = 0;
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) readonly buffer P { int pos[]; };
layout(binding = 2) readonly buffer F { float ff[]; };
layout(binding = 3) buffer D { float d[]; };

void main() {
    // one invocation per rotated pair (or per copied element beyond n_dims)
    uint half_ne0 = (pc.ne00 + 1) / 2;
    uint idx = tsr_flat_id();
    if (idx >= pc.nrows * half_ne0) return;
    uint p = idx % half_ne0;              // pair index in the row
    uint r = pc.row0 + idx / half_ne0;
    uint i1 = r % pc.ne01; r /= pc.ne01;
    uint i2 = r % pc.ne02; uint i3 = r / pc.ne02;
    int ba = pc.off0 + int(i1*pc.nb01 + i2*pc.nb02 + i3*pc.nb03);
    int bd = pc.offd + int(i1*pc.nb1 + i2*pc.nb2 + i3*pc.nb3);
    uint i0 = 2 * p;
    if (i0 >= pc.n_dims) {
        // pass-through for dims beyond n_dims (both elements of the pair)
        d[bd + int(i0*pc.nb0)] = a[ba + int(i0*pc.nb00)];
        if (i0 + 1 < pc.ne00) d[bd + int((i0+1)*pc.nb0)] = a[ba + int((i0+1)*pc.nb00)];
        return;
    }
    float theta_extrap = float(pos[pc.off1 + int(i2)]) * pow(pc.theta_scale, float(p));
    if (pc.has_ff != 0u) theta_extrap /= ff[pc.off2 + int(p)];
    float theta_interp = pc.freq_scale * theta_extrap;
    float theta = theta_interp;
    float mscale = pc.attn_factor;
    if (pc.ext_factor != 0.0) {
        float y = (float(p) - pc.corr0) / max(0.001, pc.corr1 - pc.corr0);
        float ramp_mix = (1.0 - min(1.0, max(0.0, y))) * pc.ext_factor;
        theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0 + 0.1 * log(1.0 / pc.freq_scale);
    }
    float c = cos(theta) * mscale, s = sin(theta) * mscale;
    uint j0 = NEOX != 0 ? p : i0;
    uint j1 = NEOX != 0 ? p + pc.n_dims / 2 : i0 + 1;
    float x0 = a[ba + int(j0*pc.nb00)];
    float x1 = a[ba + int(j1*pc.nb00)];
    d[bd + int(j0*pc.nb0)] = x0 * c - x1 * s;
    d[bd + int(j1*pc.nb0)] = x0 * s + x1 * c;
}
