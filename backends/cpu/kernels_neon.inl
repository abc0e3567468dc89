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

static const kernels kernels_neon = {
    TSR_CPU_ISA_NEON,
    dot_f32_neon, dot_f16_neon, dot_bf16_neon, dot_q8_0_neon, dot_q4_0_neon,
    { nullptr, nullptr, nullptr, nullptr, nullptr },
    quantize_y_scalar, axpy_f32_neon, f16_to_f32_neon,
    { nullptr, nullptr, nullptr, nullptr, nullptr },
};

} // namespace tcpu
} // namespace
#endif /* TSR_CPU_ARM64 */
