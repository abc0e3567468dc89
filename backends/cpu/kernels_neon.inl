/*
 * kernels_neon.inl - aarch64 Advanced SIMD kernels (baseline ARMv8.0: no dotprod, no
 * fp16 arithmetic needed). Tested under qemu-user by scripts/test-aarch64.sh.
 */
#if defined(TSR_CPU_ARM64)
namespace {
namespace tcpu {

static float dot_f32_neon(int64_t n, const float * x, const float * y) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0), a2 = vdupq_n_f32(0), a3 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
        a2 = vfmaq_f32(a2, vld1q_f32(x + i + 8), vld1q_f32(y + i + 8));
        a3 = vfmaq_f32(a3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
    }
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; ++i) s += x[i] * y[i];
    return s;
}

static float dot_f16_neon(int64_t n, const uint16_t * x, const float * y) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(x + i));
        a0 = vfmaq_f32(a0, vcvt_f32_f16(vget_low_f16(h)), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vcvt_high_f32_f16(h), vld1q_f32(y + i + 4));
    }
    float s = vaddvq_f32(vaddq_f32(a0, a1));
    for (; i < n; ++i) s += h2f(x[i]) * y[i];
    return s;
}

static float dot_bf16_neon(int64_t n, const uint16_t * x, const float * y) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t h = vld1q_u16(x + i);
        a0 = vfmaq_f32(a0, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16)), vld1q_f32(y + i + 4));
    }
    float s = vaddvq_f32(vaddq_f32(a0, a1));
    for (; i < n; ++i) s += bf2f(x[i]) * y[i];
    return s;
}

static inline int32_t dot16_s8_neon(int8x16_t a, int8x16_t b) {
    const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t hi = vmull_s8(vget_high_s8(a), vget_high_s8(b));
    return vaddvq_s32(vaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
}

static float dot_q8_0_neon(int64_t n, const tsr_block_q8_0 * x, const yq8 * y) {
    float s = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        const int32_t acc = dot16_s8_neon(vld1q_s8(x[b].qs), vld1q_s8(y[b].qs)) + dot16_s8_neon(vld1q_s8(x[b].qs + 16), vld1q_s8(y[b].qs + 16));
        s += h2f(x[b].d) * y[b].d * (float)acc;
    }
    return s;
}

static float dot_q4_0_neon(int64_t n, const tsr_block_q4_0 * x, const yq8 * y) {
    float s = 0.0f;
    const uint8x16_t m = vdupq_n_u8(0x0F);
    const int8x16_t eight = vdupq_n_s8(8);
    for (int64_t b = 0; b < n / 32; ++b) {
        const uint8x16_t v = vld1q_u8(x[b].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, m)), eight);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);
        const int32_t acc = dot16_s8_neon(lo, vld1q_s8(y[b].qs)) + dot16_s8_neon(hi, vld1q_s8(y[b].qs + 16));
        s += h2f(x[b].d) * y[b].d * (float)acc;
    }
    return s;
}

static void axpy_f32_neon(int64_t n, float a, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
    for (; i < n; ++i) y[i] += a * x[i];
}

static void f16_to_f32_neon(const void * x, float * y, int64_t n) {
    const uint16_t * s = (const uint16_t *)x;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(s + i))));
    for (; i < n; ++i) y[i] = h2f(s[i]);
}

/* ---- expf and the activations on it (constants and method: vexp in cpu_internal.inl) ---- */

static inline float32x4_t exp_neon(float32x4_t x) {
    /* fmax/fmin return NaN when either operand is NaN: NaN passes the clamp */
    x = vminq_f32(vdupq_n_f32(vexp::hi), vmaxq_f32(vdupq_n_f32(vexp::lo), x));
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, vexp::log2e));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(vexp::ln2_hi));
    r = vfmsq_f32(r, n, vdupq_n_f32(vexp::ln2_lo));
    float32x4_t q = vfmaq_f32(vdupq_n_f32(vexp::c5), vdupq_n_f32(vexp::c6), r);
    q = vfmaq_f32(vdupq_n_f32(vexp::c4), q, r);
    q = vfmaq_f32(vdupq_n_f32(vexp::c3), q, r);
    q = vfmaq_f32(vdupq_n_f32(vexp::c2), q, r);
    const float32x4_t p = vaddq_f32(vdupq_n_f32(1.0f), vfmaq_f32(r, q, vmulq_f32(r, r)));
    /* n in [-159, 145] here (a NaN lane converts to 0, p is NaN) */
    const int32x4_t ni = vcvtq_s32_f32(n);
    const int32x4_t n1 = vshrq_n_s32(ni, 1);
    const int32x4_t bias = vdupq_n_s32(127);
    const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vsubq_s32(ni, n1), bias), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
}

static inline float32x4_t tanh_neon(float32x4_t x) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    const float32x4_t ax = vabsq_f32(x);
    const float32x4_t e = exp_neon(vaddq_f32(ax, ax));
    const float32x4_t big = vsubq_f32(one, vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, one)));
    const float32x4_t z = vmulq_f32(ax, ax);
    float32x4_t q = vfmaq_f32(vdupq_n_f32(vexp::t11), vdupq_n_f32(vexp::t13), z);
    q = vfmaq_f32(vdupq_n_f32(vexp::t9), q, z);
    q = vfmaq_f32(vdupq_n_f32(vexp::t7), q, z);
    q = vfmaq_f32(vdupq_n_f32(vexp::t5), q, z);
    q = vfmaq_f32(vdupq_n_f32(vexp::t3), q, z);
    const float32x4_t small = vfmaq_f32(ax, vmulq_f32(ax, z), q);
    /* NaN compares false and takes the exp branch, which keeps it NaN */
    const float32x4_t r = vbslq_f32(vcltq_f32(ax, vdupq_n_f32(vexp::tanh_small)), small, big);
    const uint32x4_t sign = vdupq_n_u32(0x80000000u);
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(r), vandq_u32(sign, vreinterpretq_u32_f32(x))));
}

template <int OP> static inline float32x4_t act_neon(float32x4_t x) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    switch (OP) {
        case ACT_EXP: return exp_neon(x);
        case ACT_SILU: return vdivq_f32(x, vaddq_f32(one, exp_neon(vnegq_f32(x))));
        case ACT_SIGMOID: return vdivq_f32(one, vaddq_f32(one, exp_neon(vnegq_f32(x))));
        case ACT_GELU: {
            const float32x4_t m2u = vmulq_f32(x, vfmaq_f32(vdupq_n_f32(vexp::gelu_k1), vmulq_f32(x, x), vdupq_n_f32(vexp::gelu_k3)));
            return vdivq_f32(x, vaddq_f32(one, exp_neon(m2u)));
        }
        case ACT_GELU_QUICK: return vdivq_f32(x, vaddq_f32(one, exp_neon(vmulq_n_f32(x, vexp::gelu_quick_k))));
        default: return tanh_neon(x);
    }
}

/* The last n % 4 elements go through a zero-padded copy (no masked loads on NEON). */
template <int OP> static void act_row_neon(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, act_neon<OP>(vld1q_f32(x + i)));
    if (i < n) {
        float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        std::memcpy(t, x + i, (size_t)(n - i) * 4);
        vst1q_f32(t, act_neon<OP>(vld1q_f32(t)));
        std::memcpy(y + i, t, (size_t)(n - i) * 4);
    }
}

static void swiglu_neon(int64_t n, const float * x, const float * g, float * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(act_neon<ACT_SILU>(vld1q_f32(x + i)), vld1q_f32(g + i)));
    if (i < n) {
        float t[4] = {0.0f, 0.0f, 0.0f, 0.0f}, u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        std::memcpy(t, x + i, (size_t)(n - i) * 4);
        std::memcpy(u, g + i, (size_t)(n - i) * 4);
        vst1q_f32(t, vmulq_f32(act_neon<ACT_SILU>(vld1q_f32(t)), vld1q_f32(u)));
        std::memcpy(y + i, t, (size_t)(n - i) * 4);
    }
}

static void soft_max_neon(int64_t n, float * x) {
    float32x4_t vm = vdupq_n_f32(-INFINITY);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vm = vmaxq_f32(vm, vld1q_f32(x + i));
    float mx = vmaxvq_f32(vm);
    for (; i < n; ++i) mx = std::max(mx, x[i]);
    if (mx == -INFINITY) {
        for (i = 0; i < n; ++i) x[i] = 0.0f;
        return;
    }
    /* the sum in double, as the scalar reference keeps it; the tail pads with -inf (e = 0) */
    const float32x4_t vmx = vdupq_n_f32(mx);
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = vdupq_n_f64(0.0);
    for (i = 0; i < n; i += 4) {
        const int64_t k = std::min<int64_t>(4, n - i);
        float t[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        std::memcpy(t, x + i, (size_t)k * 4);
        const float32x4_t e = exp_neon(vsubq_f32(vld1q_f32(t), vmx));
        vst1q_f32(t, e);
        std::memcpy(x + i, t, (size_t)k * 4);
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(e)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(e));
    }
    const double sum = vaddvq_f64(vaddq_f64(s0, s1));
    const float inv = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inv));
    for (; i < n; ++i) x[i] *= inv;
}

static const act_kernels act_table_neon = {
    act_row_neon<ACT_EXP>, act_row_neon<ACT_SILU>, act_row_neon<ACT_SIGMOID>, act_row_neon<ACT_GELU>,
    act_row_neon<ACT_GELU_QUICK>, act_row_neon<ACT_TANH>, swiglu_neon, soft_max_neon,
};

static const kernels kernels_neon = {
    TSR_CPU_ISA_NEON,
    dot_f32_neon, dot_f16_neon, dot_bf16_neon, dot_q8_0_neon, dot_q4_0_neon,
    { nullptr, nullptr, nullptr },
    quantize_y_scalar, axpy_f32_neon, f16_to_f32_neon,
    { nullptr, nullptr, nullptr, nullptr, nullptr },
    &act_table_neon,
};

} // namespace tcpu
} // namespace
#endif /* TSR_CPU_ARM64 */
