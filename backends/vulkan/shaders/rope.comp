#version 450
// RoPE (ggml's rope_yarn) on src0 [head_dim, n_head, n_tokens, ne3] F32 with positions
// src1 (I32 [ne2], or [4 * ne2] for the multi-section modes) and optional frequency factors
// src2 (F32 [n_dims/2]).
// MODE spec const: 0 rotates (2i, 2i+1); 1 (NEOX) (i, i + n_dims/2); 2 (M-RoPE) and 4
// (interleaved M-RoPE) as NEOX with each pair's angle from the position stream (time,
// height, width, extra) of its section; 3 (vision) pairs (i, i + n_dims) over the whole row,
// each section's angles restarting at its first pair.
#define TSR_CUSTOM_PC 1
#include "common.glsl"
layout(push_constant) uniform PC {
    uint ne00, ne01, ne02, ne03;  uint nb00, nb01, nb02, nb03;
    uint nb0, nb1, nb2, nb3;
    int off0, off1, off2, offd;
    uint row0, nrows, n_dims, has_ff;
    float freq_scale, ext_factor, attn_factor, corr0, corr1, theta_scale;
    uint sec0, sec1, sec2, sec3;
} pc;
layout(local_size_x = TSR_WG) in;
layout(constant_id = 0) const uint MODE = 0;
const uint M_NORMAL = 0, M_NEOX = 1, M_MROPE = 2, M_VISION = 3, M_IMROPE = 4;
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) readonly buffer P { int pos[]; };
layout(binding = 2) readonly buffer F { float ff[]; };
layout(binding = 3) buffer D { float d[]; };

// Position stream of pair p's section (the CPU backend's mrope_stream) and, for vision, the
// pair's index within its section (its angle's exponent).
uint section_stream(uint p, out uint steps) {
    uint sec[4] = uint[4](pc.sec0, pc.sec1, pc.sec2, pc.sec3);
    uint sector = p % (pc.sec0 + pc.sec1 + pc.sec2 + pc.sec3);
    uint stream = 0;
    uint start = 0;
    if (MODE == M_IMROPE) {
        stream = sector % 3u;
        if (sector >= 3u * sec[stream]) stream = 3u;
    } else {
        while (stream < 3u && sector >= start + sec[stream]) { start += sec[stream]; stream++; }
    }
    steps = MODE == M_VISION ? sector - start : p;
    return stream;
}

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
    if (i0 >= (MODE == M_VISION ? 2 * pc.n_dims : pc.n_dims)) {
        // pass-through for dims beyond n_dims (both elements of the pair)
        d[bd + int(i0*pc.nb0)] = a[ba + int(i0*pc.nb00)];
        if (i0 + 1 < pc.ne00) d[bd + int((i0+1)*pc.nb0)] = a[ba + int((i0+1)*pc.nb00)];
        return;
    }
    uint stream = 0, steps = p;
    if (MODE >= M_MROPE) stream = section_stream(p, steps);
    float theta_extrap = float(pos[pc.off1 + int(i2 + stream * pc.ne02)]) * pow(pc.theta_scale, float(steps));
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
    uint j0 = MODE == M_NORMAL ? i0 : p;
    uint j1 = MODE == M_NORMAL ? i0 + 1 : MODE == M_VISION ? p + pc.n_dims : p + pc.n_dims / 2;
    float x0 = a[ba + int(j0*pc.nb00)];
    float x1 = a[ba + int(j1*pc.nb00)];
    d[bd + int(j0*pc.nb0)] = x0 * c - x1 * s;
    d[bd + int(j1*pc.nb0)] = x0 * s + x1 * c;
}
