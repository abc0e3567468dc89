#version 450
// flash_attn_ext: one workgroup per (query row, head, batch); online softmax over the KV
// positions in chunks of TSR_WG, never materializing the scores. K/V F32 or F16 (KV_F16),
// mask F32 or F16 (MASK_F16, HAS_MASK spec const), any row/head/batch strides (permuted
// cache views), grouped-query heads. Result F32 [Dv, n_head, n_q, B] (contiguous).
#define TSR_CUSTOM_PC 1
#include "common.glsl"
layout(push_constant) uniform PC {
    uint D, Dv, n_q, n_kv;
    uint n_head, gqa, n_head_log2, nb_unused;
    uint q1, q2, q3;      // q strides (floats)
    uint k1, k2, k3;      // k strides (elements)
    uint v1, v2, v3;      // v strides (elements)
    uint m1, m2, m3, mne2, mne3;   // mask strides (elements), mask dims 2-3 for broadcast
    int offq, offk, offv, offm, offd;
    float scale, max_bias, softcap;
} pc;
layout(local_size_x = TSR_WG) in;
layout(constant_id = 0) const uint HAS_MASK = 0;
layout(binding = 0) readonly buffer Q { float q[]; };
#if KV_F16
layout(binding = 1) readonly buffer K { float16_t k[]; };
layout(binding = 2) readonly buffer V { float16_t v[]; };
#else
layout(binding = 1) readonly buffer K { float k[]; };
layout(binding = 2) readonly buffer V { float v[]; };
#endif
layout(binding = 3) buffer Dst { float d[]; };
#if MASK_F16
layout(binding = 4) readonly buffer M { float16_t msk[]; };
#else
layout(binding = 4) readonly buffer M { float msk[]; };
#endif

#define MAX_D 256
shared float qs[MAX_D];
shared float ps[TSR_WG];
shared float red[TSR_WG];

float reduce(float x, bool is_max) {
    uint t = gl_LocalInvocationID.x;
    red[t] = x;
    barrier();
    for (uint s = TSR_WG / 2; s > 0; s >>= 1) {
        if (t < s) red[t] = is_max ? max(red[t], red[t + s]) : red[t] + red[t + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint g = tsr_flat_group();
    const uint iq = g % pc.n_q;
    const uint h = (g / pc.n_q) % pc.n_head;
    const uint b = g / (pc.n_q * pc.n_head);
    const uint hk = h / pc.gqa;
    const float NEG_INF = uintBitsToFloat(0xff800000u);

    for (uint i = t; i < pc.D; i += TSR_WG) qs[i] = q[pc.offq + int(i + iq * pc.q1 + h * pc.q2 + b * pc.q3)];
    barrier();

    float slope = 1.0;
    if (pc.max_bias > 0.0) {
        float m0 = exp2(-pc.max_bias / float(pc.n_head_log2));
        float m1 = exp2(-(pc.max_bias / 2.0) / float(pc.n_head_log2));
        slope = h < pc.n_head_log2 ? pow(m0, float(h + 1)) : pow(m1, float(2 * (h - pc.n_head_log2) + 1));
    }
    const int kb = pc.offk + int(hk * pc.k2 + b * pc.k3);
    const int vb = pc.offv + int(hk * pc.v2 + b * pc.v3);
    const int mb = pc.offm + int(iq * pc.m1 + (h % pc.mne2) * pc.m2 + (b % pc.mne3) * pc.m3);

    // this invocation's output dims: t, t + TSR_WG (Dv <= 2 * TSR_WG)
    float acc0 = 0.0, acc1 = 0.0;
    float M = NEG_INF, S = 0.0;
    const float POS_INF = uintBitsToFloat(0x7f800000u);
    bool nan_row = false;   // a NaN or +inf score: the row is NaN (soft_max's rule, docs/ops.md)
    for (uint j0 = 0; j0 < pc.n_kv; j0 += TSR_WG) {
        uint j = j0 + t;
        float s = NEG_INF;
        if (j < pc.n_kv) {
            float mv = HAS_MASK != 0 ? slope * float(msk[mb + int(j)]) : 0.0;
            if (mv != NEG_INF) {
                float dot_ = 0.0;
                int kr = kb + int(j * pc.k1);
                for (uint i = 0; i < pc.D; i++) dot_ += qs[i] * float(k[kr + int(i)]);
                dot_ *= pc.scale;
                if (pc.softcap != 0.0) dot_ = pc.softcap * tanh(dot_);
                s = dot_ + mv;
            }
        }
        // GLSL's max is undefined for NaN: a NaN enters the max as +inf
        float cmax = reduce(isnan(s) ? POS_INF : s, true);
        if (cmax == POS_INF) {   // uniform: every invocation reads the same cmax
            nan_row = true;
            break;
        }
        float Mn = max(M, cmax);
        float p = (s == NEG_INF) ? 0.0 : exp(s - Mn);
        ps[t] = p;
        float csum = reduce(p, false);   // also a barrier for ps[]
        float corr = (M == NEG_INF) ? 0.0 : exp(M - Mn);
        S = S * corr + csum;
        M = Mn;
        acc0 *= corr; acc1 *= corr;
        uint nj = min(uint(TSR_WG), pc.n_kv - j0);
        for (uint jj = 0; jj < nj; jj++) {
            float pj = ps[jj];
            if (pj == 0.0) continue;
            int vr = vb + int((j0 + jj) * pc.v1);
            if (t < pc.Dv) acc0 += pj * float(v[vr + int(t)]);
            if (t + TSR_WG < pc.Dv) acc1 += pj * float(v[vr + int(t + TSR_WG)]);
        }
        barrier();
    }
    float inv = nan_row ? uintBitsToFloat(0x7fc00000u) : S > 0.0 ? 1.0 / S : 0.0;
    int db = pc.offd + int((h + pc.n_head * (iq + pc.n_q * b)) * pc.Dv);
    if (t < pc.Dv) d[db + int(t)] = acc0 * inv;
    if (t + TSR_WG < pc.Dv) d[db + int(t + TSR_WG)] = acc1 * inv;
}
