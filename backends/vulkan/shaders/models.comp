#version 450
// The model-family ops that are a gather per output element (one invocation each), F32
// except src0 F16 where KER_F16 (a convolution kernel). OP spec const:
//   0 timestep_embedding  src0 timesteps [N]; w0 = max_period
//   1 conv_2d_dw          src0 kernel [KW, KH, 1, C], src1 input [W, H, C, N]
//   2 conv_transpose_1d   src0 kernel [K, OC, IC], src1 input [L, IC, N]
//   3 pad                 src0; leading pads in the src1 shape slots (ne10..ne13)
//   4 pad_reflect_1d      src0; u0 = leading pad
//   5 roll                src0; shifts in [0, ne) in the src1 shape slots
//   6 ssm_conv            src0 sx [d_conv - 1 + n_t, d_inner, n_s], src1 c [d_conv, d_inner]
// Convolutions pack (x, y) pairs of stride, padding, dilation as x | y << 16 in w0, w1, u0.
// The push constants are common.glsl's with its float slots p0, p1 as words w0, w1.
#define TSR_CUSTOM_PC 1
#include "common.glsl"
layout(push_constant) uniform PC {
    uint ne00, ne01, ne02, ne03;  uint nb00, nb01, nb02, nb03;
    uint ne10, ne11, ne12, ne13;  uint nb10, nb11, nb12, nb13;
    uint ne0,  ne1,  ne2,  ne3;   uint nb0,  nb1,  nb2,  nb3;
    int  off0, off1, offd;        uint row0;
    uint w0, w1;                  uint nrows, u0;
} pc;
layout(local_size_x = TSR_WG) in;
layout(constant_id = 0) const uint OP = 0;
#if KER_F16
layout(binding = 0) readonly buffer A { float16_t a[]; };
#else
layout(binding = 0) readonly buffer A { float a[]; };
#endif
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 3) buffer D { float d[]; };

float src0_at(int i0, int i1, int i2, int i3) {
    return float(a[pc.off0 + i0 * int(pc.nb00) + i1 * int(pc.nb01) + i2 * int(pc.nb02) + i3 * int(pc.nb03)]);
}
float src1_at(int i0, int i1, int i2, int i3) {
    return b[pc.off1 + i0 * int(pc.nb10) + i1 * int(pc.nb11) + i2 * int(pc.nb12) + i3 * int(pc.nb13)];
}
ivec2 unpack_pair(uint v) { return ivec2(int(v & 0xffffu), int(v >> 16)); }

float timestep_embedding(int j, int i) {
    int half_dim = int(pc.ne0) / 2;
    if (j >= 2 * half_dim) return 0.0;   // an odd dim's last element
    int k = j < half_dim ? j : j - half_dim;
    float arg = src0_at(i, 0, 0, 0) * exp(-log(float(pc.w0)) * float(k) / float(half_dim));
    return j < half_dim ? cos(arg) : sin(arg);
}

float conv_2d_dw(int ow, int oh, int c, int n) {
    ivec2 s = unpack_pair(pc.w0), p = unpack_pair(pc.w1), dl = unpack_pair(pc.u0);
    float sum = 0.0;
    for (int kh = 0; kh < int(pc.ne01); kh++) {
        int y = oh * s.y + kh * dl.y - p.y;
        if (y < 0 || y >= int(pc.ne11)) continue;
        for (int kw = 0; kw < int(pc.ne00); kw++) {
            int x = ow * s.x + kw * dl.x - p.x;
            if (x >= 0 && x < int(pc.ne10)) sum += src0_at(kw, kh, 0, c) * src1_at(x, y, c, n);
        }
    }
    return sum;
}

// out[l*s0 + k*d0 - p0] gathers the input positions l that land on it
float conv_transpose_1d(int x, int oc, int n) {
    ivec2 s = unpack_pair(pc.w0), p = unpack_pair(pc.w1), dl = unpack_pair(pc.u0);
    float sum = 0.0;
    for (int k = 0; k < int(pc.ne00); k++) {
        int at = x + p.x - k * dl.x;
        if (at < 0 || at % s.x != 0 || at / s.x >= int(pc.ne10)) continue;
        for (int ic = 0; ic < int(pc.ne02); ic++) sum += src0_at(k, oc, ic, 0) * src1_at(at / s.x, ic, n, 0);
    }
    return sum;
}

float pad(ivec4 i) {
    ivec4 j = i - ivec4(pc.ne10, pc.ne11, pc.ne12, pc.ne13);
    if (any(lessThan(j, ivec4(0))) || any(greaterThanEqual(j, ivec4(pc.ne00, pc.ne01, pc.ne02, pc.ne03)))) return 0.0;
    return src0_at(j.x, j.y, j.z, j.w);
}

float pad_reflect_1d(ivec4 i) {
    int n0 = int(pc.ne00);
    int j = i.x - int(pc.u0);   // mirrored at 0 and at n0 - 1
    if (j < 0) j = -j;
    else if (j >= n0) j = 2 * (n0 - 1) - j;
    return src0_at(j, i.y, i.z, i.w);
}

float roll(ivec4 i) {
    ivec4 ne = ivec4(pc.ne00, pc.ne01, pc.ne02, pc.ne03);
    ivec4 j = (i + ne - ivec4(pc.ne10, pc.ne11, pc.ne12, pc.ne13)) % ne;
    return src0_at(j.x, j.y, j.z, j.w);
}

float ssm_conv(int i, int t, int s) {
    float sum = 0.0;
    for (int k = 0; k < int(pc.ne10); k++) sum += src0_at(t + k, i, s, 0) * src1_at(k, i, 0, 0);
    return sum;
}

void main() {
    uint idx = tsr_flat_id();
    if (idx >= pc.nrows * pc.ne0) return;
    uint r = pc.row0 + idx / pc.ne0;
    ivec4 i = ivec4(int(idx % pc.ne0), int(r % pc.ne1), int((r / pc.ne1) % pc.ne2), int(r / (pc.ne1 * pc.ne2)));
    float v;
    if (OP == 0) v = timestep_embedding(i.x, i.y);
    else if (OP == 1) v = conv_2d_dw(i.x, i.y, i.z, i.w);
    else if (OP == 2) v = conv_transpose_1d(i.x, i.y, i.z);
    else if (OP == 3) v = pad(i);
    else if (OP == 4) v = pad_reflect_1d(i);
    else if (OP == 5) v = roll(i);
    else v = ssm_conv(i.x, i.y, i.z);
    d[pc.offd + i.x * int(pc.nb0) + i.y * int(pc.nb1) + i.z * int(pc.nb2) + i.w * int(pc.nb3)] = v;
}
