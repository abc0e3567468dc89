/*
 * quant.inl - Q8_0 / Q4_0 quantization and the scalar dot products (the reference the
 * SIMD paths are tested against), plus row conversions to and from F32 for every type.
 */
namespace {
namespace tcpu {

/* ---- quantization (ggml's reference rounding) ------------------------------------------ */

static void quantize_row_q8_0_ref(const float * x, tsr_block_q8_0 * y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float * xb = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        for (int j = 0; j < 32; ++j) y[b].qs[j] = (int8_t)std::lround(xb[j] * id);
    }
}

static void quantize_row_q4_0_ref(const float * x, tsr_block_q4_0 * y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float * xb = x + b * 32;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; ++j) {
            if (amax < std::fabs(xb[j])) { amax = std::fabs(xb[j]); max = xb[j]; }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        for (int j = 0; j < 16; ++j) {
            const int xi0 = std::min(15, (int)(int8_t)(xb[j] * id + 8.5f));
            const int xi1 = std::min(15, (int)(int8_t)(xb[16 + j] * id + 8.5f));
            y[b].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

static void quantize_y_scalar(const float * x, yq8 * y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float * xb = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < 32; ++j) {
            /* clamped, and NaN (from NaN or inf inputs) as 0: casting NaN to int is undefined */
            const float v = xb[j] * id;
            const int q = v == v ? (int)std::nearbyint(std::min(127.0f, std::max(-127.0f, v))) : 0;
            y[b].qs[j] = (int8_t)q;
            sum += q;
        }
        y[b].d = d;
        y[b].sum = sum;
    }
}

static void dequantize_row_q8_0(const tsr_block_q8_0 * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < 32; ++j) y[b * 32 + j] = d * x[b].qs[j];
    }
}

static void dequantize_row_q4_0(const tsr_block_q4_0 * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < 16; ++j) {
            y[b * 32 + j] = d * (float)((x[b].qs[j] & 0x0F) - 8);
            y[b * 32 + j + 16] = d * (float)((x[b].qs[j] >> 4) - 8);
        }
    }
}

/* Row conversions for any supported type (n a multiple of the block size). */
static void row_to_f32(enum tsr_type t, const void * src, float * dst, int64_t n) {
    switch (t) {
        case TSR_TYPE_F32: std::memcpy(dst, src, (size_t)n * 4); break;
        case TSR_TYPE_F16: for (int64_t i = 0; i < n; ++i) dst[i] = h2f(((const uint16_t *)src)[i]); break;
        case TSR_TYPE_BF16: for (int64_t i = 0; i < n; ++i) dst[i] = bf2f(((const uint16_t *)src)[i]); break;
        case TSR_TYPE_I32: for (int64_t i = 0; i < n; ++i) dst[i] = (float)((const int32_t *)src)[i]; break;
        case TSR_TYPE_Q8_0: dequantize_row_q8_0((const tsr_block_q8_0 *)src, dst, n); break;
        case TSR_TYPE_Q4_0: dequantize_row_q4_0((const tsr_block_q4_0 *)src, dst, n); break;
        default: tsr_to_float_row(t, src, dst, n); break;  /* the other quantized types */
    }
}

static void row_from_f32(enum tsr_type t, const float * src, void * dst, int64_t n) {
    switch (t) {
        case TSR_TYPE_F32: std::memmove(dst, src, (size_t)n * 4); break;
        case TSR_TYPE_F16: for (int64_t i = 0; i < n; ++i) ((uint16_t *)dst)[i] = f2h(src[i]); break;
        case TSR_TYPE_BF16: for (int64_t i = 0; i < n; ++i) ((uint16_t *)dst)[i] = f2bf(src[i]); break;
        case TSR_TYPE_I32: for (int64_t i = 0; i < n; ++i) ((int32_t *)dst)[i] = (int32_t)src[i]; break;
        case TSR_TYPE_Q8_0: quantize_row_q8_0_ref(src, (tsr_block_q8_0 *)dst, n); break;
        case TSR_TYPE_Q4_0: quantize_row_q4_0_ref(src, (tsr_block_q4_0 *)dst, n); break;
        default: tsr_from_float_row(t, src, dst, n); break;  /* the other quantized types */
    }
}

/* ---- scalar dot products -------------------------------------------------------------- */

static float dot_f32_scalar(int64_t n, const float * x, const float * y) {
    float s[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; ++j) s[j] += x[i + j] * y[i + j];
    for (; i < n; ++i) s[0] += x[i] * y[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

static float dot_f16_scalar(int64_t n, const uint16_t * x, const float * y) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += h2f(x[i]) * y[i];
    return s;
}

static float dot_bf16_scalar(int64_t n, const uint16_t * x, const float * y) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += bf2f(x[i]) * y[i];
    return s;
}

static float dot_q8_0_scalar(int64_t n, const tsr_block_q8_0 * x, const yq8 * y) {
    float s = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        int32_t acc = 0;
        for (int j = 0; j < 32; ++j) acc += (int32_t)x[b].qs[j] * y[b].qs[j];
        s += h2f(x[b].d) * y[b].d * (float)acc;
    }
    return s;
}

static float dot_q4_0_scalar(int64_t n, const tsr_block_q4_0 * x, const yq8 * y) {
    float s = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        int32_t acc = 0;
        for (int j = 0; j < 16; ++j) {
            acc += (int32_t)(x[b].qs[j] & 0x0F) * y[b].qs[j];
            acc += (int32_t)(x[b].qs[j] >> 4) * y[b].qs[j + 16];
        }
        acc -= 8 * y[b].sum;
        s += h2f(x[b].d) * y[b].d * (float)acc;
    }
    return s;
}

/* K-quants against Q8_K (ggml's vec_dot_q*_K_q8_K): exact integer sums per sub-block,
 * scaled once per super-block. Q4_K's mins meet the sums of 16 activations (bsums). */
static float dot_q4_K_q8_K_scalar(int64_t n, const void * vx, const tsr_block_q8_K * y) {
    const tsr_block_q4_K * x = (const tsr_block_q4_K *)vx;
    float s = 0.0f;
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        int32_t sumi = 0, summ = 0;
        for (int sb = 0; sb < 8; ++sb) {
            int sc, mn;
            tsr_impl::k4_scale_min(sb, x[i].scales, &sc, &mn);
            const uint8_t * q = x[i].qs + 32 * (sb / 2);
            const int8_t * yq = y[i].qs + 32 * sb;
            int32_t acc = 0;
            for (int l = 0; l < 32; ++l) acc += ((sb % 2) ? (q[l] >> 4) : (q[l] & 0x0F)) * yq[l];
            sumi += sc * acc;
            summ += mn * (y[i].bsums[2 * sb] + y[i].bsums[2 * sb + 1]);
        }
        s += y[i].d * h2f(x[i].d) * (float)sumi - y[i].d * h2f(x[i].dmin) * (float)summ;
    }
    return s;
}

static float dot_q6_K_q8_K_scalar(int64_t n, const void * vx, const tsr_block_q8_K * y) {
    const tsr_block_q6_K * x = (const tsr_block_q6_K *)vx;
    float s = 0.0f;
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        int32_t sumi = 0;
        for (int g = 0; g < 16; ++g) {
            int32_t acc = 0;
            for (int e = 16 * g; e < 16 * g + 16; ++e) acc += tsr_impl::q6k_value(x[i], e) * y[i].qs[e];
            sumi += x[i].scales[g] * acc;
        }
        s += h2f(x[i].d) * y[i].d * (float)sumi;
    }
    return s;
}

static void axpy_f32_scalar(int64_t n, float a, const float * x, float * y) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

static void f16_to_f32_scalar(const void * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = h2f(((const uint16_t *)x)[i]);
}

/* The reference path: dot products one row at a time, no GEMM, libm activations (NULL). */
static constexpr kernels kernels_scalar = [] {
    kernels k{};
    k.isa = TSR_CPU_ISA_SCALAR;
    k.dot_f32 = dot_f32_scalar;
    k.dot_f16 = dot_f16_scalar;
    k.dot_bf16 = dot_bf16_scalar;
    k.dot_q8_0 = dot_q8_0_scalar;
    k.dot_q4_0 = dot_q4_0_scalar;
    k.dot_q8k[KSLOT_Q4_K] = dot_q4_K_q8_K_scalar;
    k.dot_q8k[KSLOT_Q6_K] = dot_q6_K_q8_K_scalar;
    k.quantize_y = quantize_y_scalar;
    k.axpy_f32 = axpy_f32_scalar;
    k.f16_to_f32 = f16_to_f32_scalar;
    return k;
}();

} // namespace tcpu
} // namespace
