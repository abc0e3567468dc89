// tessera CUDA backend: rotary position embedding (ggml's rope_ext with YaRN), normal
// (pairs 2i, 2i+1) and NeoX (pairs i, i + n_dims/2) modes, and rope_multi's M-RoPE,
// interleaved M-RoPE (NeoX pairs, each pair's angle from the position stream of its
// section) and vision (pairs i, i + n_dims over the whole row), F32 and F16.
//
// In-place contract: each thread reads and writes one pair (or one passed-through
// element), so dst may exactly alias src.
#pragma once

namespace tsr_cuda {
namespace {

struct rope_params {
    int   n_dims;
    int   mode;
    float freq_base, freq_scale, ext_factor, attn_factor;
    float corr_lo, corr_hi;
    float theta_scale;
    int   sections[TSR_MROPE_SECTIONS];   // rope_multi's pairs per position stream
};

// k_rope's pairing and angle rule of a ggml rope mode.
enum rope_kind { RK_NORMAL, RK_NEOX, RK_MROPE, RK_VISION, RK_IMROPE };

// The position stream of pair ip (the CPU backend's mrope_stream) and the power of
// theta_scale its angle takes: vision restarts each section's angles at its first pair.
template <int KIND>
__device__ __forceinline__ int mrope_stream(const rope_params & p, int ip, int & steps) {
    const int * sec = p.sections;
    const int sector = ip % (sec[0] + sec[1] + sec[2] + sec[3]);
    int stream = 0, start = 0;
    if (KIND == RK_IMROPE) {
        stream = sector % 3;
        if (sector >= 3 * sec[stream]) stream = 3;
    } else {
        while (stream < 3 && sector >= start + sec[stream]) start += sec[stream++];
    }
    steps = KIND == RK_VISION ? sector - start : ip;
    return stream;
}

__device__ __forceinline__ void rope_yarn(float theta_extrap, const rope_params & p, int i0, float & c, float & s) {
    const float theta_interp = p.freq_scale * theta_extrap;
    float theta = theta_interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
        const float y = (i0 / 2 - p.corr_lo) / fmaxf(0.001f, p.corr_hi - p.corr_lo);
        const float ramp_mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * p.ext_factor;
        theta = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0f + 0.1f * logf(1.0f / p.freq_scale);
    }
    c = cosf(theta) * mscale;
    s = sinf(theta) * mscale;
}

// One thread per pair index i0/2 over ne0/2 pairs of every row (i1 head, i2 token, i3).
template <typename T, int KIND>
__global__ void k_rope(const char * src, tdesc ds, char * dst, tdesc dd, const int32_t * pos,
                       const float * freq_factors, rope_params p, int64_t n_pairs) {
    for (int64_t t = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; t < n_pairs; t += (int64_t) gridDim.x * blockDim.x) {
        const int64_t half = ds.ne[0] / 2;
        int64_t r = t;
        const int ip = (int) (r % half); r /= half;     // pair index
        const int64_t i1 = r % ds.ne[1]; r /= ds.ne[1];
        const int64_t i2 = r % ds.ne[2];
        const int64_t i3 = r / ds.ne[2];
        const char * xs = src + i1 * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3];
        char * ys = dst + i1 * dd.nb[1] + i2 * dd.nb[2] + i3 * dd.nb[3];
        const int i0 = 2 * ip;
        if (i0 >= (KIND == RK_VISION ? 2 * p.n_dims : p.n_dims)) {
            // beyond the rotated dims: pass through (both elements of the pair)
            const float a = to_f32(*(const T *) (xs + (int64_t) i0 * ds.nb[0]));
            const float b = to_f32(*(const T *) (xs + (int64_t) (i0 + 1) * ds.nb[0]));
            *(T *) (ys + (int64_t) i0 * dd.nb[0]) = from_f32<T>(a);
            *(T *) (ys + (int64_t) (i0 + 1) * dd.nb[0]) = from_f32<T>(b);
            continue;
        }
        const float ff = freq_factors ? freq_factors[ip] : 1.0f;
        // theta = pos * theta_scale^ip by repeated multiplication, exactly as ggml's CPU code
        // does (powf differs by a few ulp, which at positions in the thousands moves the
        // angle by 1e-3 rad)
        int steps = ip, stream = 0;
        if (KIND >= RK_MROPE) stream = mrope_stream<KIND>(p, ip, steps);
        float theta = (float) pos[i2 + stream * ds.ne[2]];
        for (int k = 0; k < steps; ++k) theta *= p.theta_scale;
        const float theta_extrap = theta / ff;
        float cs, sn;
        rope_yarn(theta_extrap, p, i0, cs, sn);
        const int64_t ja = KIND == RK_NORMAL ? i0 : ip;
        const int64_t jb = KIND == RK_NORMAL ? i0 + 1 : KIND == RK_VISION ? ip + p.n_dims : ip + p.n_dims / 2;
        const float x0 = to_f32(*(const T *) (xs + ja * ds.nb[0]));
        const float x1 = to_f32(*(const T *) (xs + jb * ds.nb[0]));
        *(T *) (ys + ja * dd.nb[0]) = from_f32<T>(x0 * cs - x1 * sn);
        *(T *) (ys + jb * dd.nb[0]) = from_f32<T>(x0 * sn + x1 * cs);
    }
}

inline bool rope_mode_supported(int mode) {
    return mode == TSR_ROPE_TYPE_NORMAL || mode == TSR_ROPE_TYPE_NEOX || mode == TSR_ROPE_TYPE_MROPE ||
           mode == TSR_ROPE_TYPE_VISION || mode == TSR_ROPE_TYPE_IMROPE;
}

inline float rope_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * logf(n_ctx_orig / (n_rot * 2.0f * 3.14159265358979323846f)) / (2.0f * logf(base));
}

bool op_rope(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0], * pos = dst->src[1], * ff = dst->src[2];
    rope_params p;
    p.n_dims = tsr_get_op_params_i32(dst, 1);
    p.mode = tsr_get_op_params_i32(dst, 2);
    const int n_ctx_orig = tsr_get_op_params_i32(dst, 4);
    p.freq_base = tsr_get_op_params_f32(dst, 5);
    p.freq_scale = tsr_get_op_params_f32(dst, 6);
    p.ext_factor = tsr_get_op_params_f32(dst, 7);
    p.attn_factor = tsr_get_op_params_f32(dst, 8);
    const float beta_fast = tsr_get_op_params_f32(dst, 9), beta_slow = tsr_get_op_params_f32(dst, 10);
    if (p.n_dims <= 0 || p.n_dims > a->ne[0] || (p.n_dims & 1) || (a->ne[0] & 1))
        return tsr_set_error("cuda: rope '%s': n_dims %d with head size %lld", dst->name, p.n_dims, (long long) a->ne[0]);
    p.theta_scale = powf(p.freq_base, -2.0f / p.n_dims);
    const float lo = floorf(rope_corr_dim(p.n_dims, n_ctx_orig, beta_fast, p.freq_base));
    const float hi = ceilf(rope_corr_dim(p.n_dims, n_ctx_orig, beta_slow, p.freq_base));
    p.corr_lo = std::max(0.0f, lo);
    p.corr_hi = std::min((float) (p.n_dims - 1), hi);
    const int64_t n_pairs = tsr_nelements(a) / 2;
    if (n_pairs == 0) return true;
    for (int i = 0; i < TSR_MROPE_SECTIONS; ++i) p.sections[i] = tsr_get_op_params_i32(dst, 11 + (uint32_t) i);
    const char * s = (const char *) a->data;
    char * d = (char *) dst->data;
    const int32_t * pp = (const int32_t *) pos->data;
    const float * f = ff ? (const float *) ff->data : nullptr;
    const unsigned g = grid_for(n_pairs);
    auto launch = [&](auto kind) {
        if (a->type == TSR_TYPE_F32) k_rope<float, decltype(kind)::value><<<g, CU_BLOCK, 0, c.stream>>>(s, make_desc(a), d, make_desc(dst), pp, f, p, n_pairs);
        else                         k_rope<__half, decltype(kind)::value><<<g, CU_BLOCK, 0, c.stream>>>(s, make_desc(a), d, make_desc(dst), pp, f, p, n_pairs);
    };
    switch (p.mode) {
        case TSR_ROPE_TYPE_NORMAL: launch(std::integral_constant<int, RK_NORMAL>()); break;
        case TSR_ROPE_TYPE_NEOX:   launch(std::integral_constant<int, RK_NEOX>()); break;
        case TSR_ROPE_TYPE_MROPE:  launch(std::integral_constant<int, RK_MROPE>()); break;
        case TSR_ROPE_TYPE_VISION: launch(std::integral_constant<int, RK_VISION>()); break;
        case TSR_ROPE_TYPE_IMROPE: launch(std::integral_constant<int, RK_IMROPE>()); break;
        default: return tsr_set_error("cuda: rope '%s': mode %d not supported", dst->name, p.mode);
    }
    return true;
}

} // namespace
} // namespace tsr_cuda
