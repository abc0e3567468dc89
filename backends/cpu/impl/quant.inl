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
            const int xi0 = std::min(15, (int)(int8_t)trunc_to_i32(xb[j] * id + 8.5f));
            const int xi1 = std::min(15, (int)(int8_t)trunc_to_i32(xb[16 + j] * id + 8.5f));
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
        case TSR_TYPE_I32: for (int64_t i = 0; i < n; ++i) ((int32_t *)dst)[i] = trunc_to_i32(src[i]); break;
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

/* K-quants against Q8_K (ggml's vec_dot_q*_K_q8_K): a super-block's levels are unpacked to
 * bytes, multiplied with the activations in exact int32 sums per sub-block, scaled by the
 * sub-block scales in int32 and by d once per super-block; mins meet the sums of 16
 * activations (bsums). Plain loops over bytes: the ISA wrappers inline them into AVX2 code,
 * where the compiler vectorizes them. */
static TSR_ALWAYS_INLINE int32_t dot_i8(const int8_t * q, const int8_t * y, int n) {
    int32_t s = 0;
    for (int l = 0; l < n; ++l) s += (int32_t)q[l] * y[l];
    return s;
}

/* sum over sub-blocks of len elements of scale[s] * (q . y) */
static TSR_ALWAYS_INLINE int32_t scaled_dot(const int8_t * q, const int8_t * y, const int * scale, int nsub, int len) {
    int32_t s = 0;
    for (int b = 0; b < nsub; ++b) s += scale[b] * dot_i8(q + len * b, y + len * b, len);
    return s;
}

/* Q4_K (HIGH false) / Q5_K (HIGH true): levels 0..15 / 0..31, 8 sub-blocks of 32. */
template <bool HIGH>
static TSR_ALWAYS_INLINE float dot_k4_q8_K(int64_t n, const uint8_t * base, size_t bsize, const tsr_block_q8_K * y) {
    float s = 0.0f;
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        const uint8_t * b = base + (size_t)i * bsize;
        const uint8_t * scales = b + 4;
        const uint8_t * qh = b + 16;
        const uint8_t * qs = HIGH ? b + 48 : b + 16;
        int8_t q[TSR_QK_K];
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l) {
                int lo = qs[32 * c + l] & 0x0F, hi = qs[32 * c + l] >> 4;
                if (HIGH) {
                    lo |= ((qh[l] >> (2 * c)) & 1) << 4;
                    hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
                }
                q[64 * c + l] = (int8_t)lo;
                q[64 * c + 32 + l] = (int8_t)hi;
            }
        int sc[8], mn[8];
        int32_t summ = 0;
        for (int sb = 0; sb < 8; ++sb) {
            tsr_impl::k4_scale_min(sb, scales, &sc[sb], &mn[sb]);
            summ += mn[sb] * (y[i].bsums[2 * sb] + y[i].bsums[2 * sb + 1]);
        }
        uint16_t d16, dmin16;
        std::memcpy(&d16, b, 2);
        std::memcpy(&dmin16, b + 2, 2);
        s += y[i].d * h2f(d16) * (float)scaled_dot(q, y[i].qs, sc, 8, 32) - y[i].d * h2f(dmin16) * (float)summ;
    }
    return s;
}

/* Q2_K (levels 0..3, 4-bit scale and min per 16) and Q3_K (levels -4..3, 6-bit signed
 * scale per 16): the low two bits of element 128h + 32j + l sit at bits 2j of qs[32h + l]. */
template <bool Q3>
static TSR_ALWAYS_INLINE float dot_k2_q8_K(int64_t n, const void * vx, const tsr_block_q8_K * y) {
    float s = 0.0f;
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) {
        const uint8_t * qs = Q3 ? ((const tsr_block_q3_K *)vx)[i].qs : ((const tsr_block_q2_K *)vx)[i].qs;
        int8_t q[TSR_QK_K];
        for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 4; ++j)
                for (int l = 0; l < 32; ++l) {
                    int v = (qs[32 * h + l] >> (2 * j)) & 3;
                    if (Q3) v -= ((((const tsr_block_q3_K *)vx)[i].hmask[l] >> (4 * h + j)) & 1) ? 0 : 4;
                    q[128 * h + 32 * j + l] = (int8_t)v;
                }
        int sc[16];
        int32_t summ = 0;
        float d, dmin = 0.0f;
        if (Q3) {
            const tsr_block_q3_K & b = ((const tsr_block_q3_K *)vx)[i];
            for (int g = 0; g < 16; ++g) sc[g] = tsr_impl::q3k_scale(g, b.scales);
            d = h2f(b.d);
        } else {
            const tsr_block_q2_K & b = ((const tsr_block_q2_K *)vx)[i];
            for (int g = 0; g < 16; ++g) {
                sc[g] = b.scales[g] & 0x0F;
                summ += (b.scales[g] >> 4) * y[i].bsums[g];
            }
            d = h2f(b.d);
            dmin = h2f(b.dmin);
        }
        s += y[i].d * d * (float)scaled_dot(q, y[i].qs, sc, 16, 16) - y[i].d * dmin * (float)summ;
    }
    return s;
}

static float dot_q2_K_q8_K_scalar(int64_t n, const void * x, const tsr_block_q8_K * y) { return dot_k2_q8_K<false>(n, x, y); }
static float dot_q3_K_q8_K_scalar(int64_t n, const void * x, const tsr_block_q8_K * y) { return dot_k2_q8_K<true>(n, x, y); }
static float dot_q4_K_q8_K_scalar(int64_t n, const void * x, const tsr_block_q8_K * y) {
    return dot_k4_q8_K<false>(n, (const uint8_t *)x, sizeof(tsr_block_q4_K), y);
}
static float dot_q5_K_q8_K_scalar(int64_t n, const void * x, const tsr_block_q8_K * y) {
    return dot_k4_q8_K<true>(n, (const uint8_t *)x, sizeof(tsr_block_q5_K), y);
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

/* Q4_1, Q5_0, Q5_1, IQ4_NL against yq8: a block's levels unpacked, one exact int32 sum
 * per block; Q4_1 / Q5_1's min meets the activations' block sum, Q5_0's offset of 16 too. */
template <tsr_type T>
static TSR_ALWAYS_INLINE float dot_q32_yq8(int64_t n, const void * vx, const yq8 * y) {
    float s = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        int q[32];
        float d, m = 0.0f;
        if (T == TSR_TYPE_Q4_1 || T == TSR_TYPE_Q5_1) {
            using block = std::conditional_t<T == TSR_TYPE_Q4_1, tsr_block_q4_1, tsr_block_q5_1>;
            const block & x = ((const block *)vx)[b];
            tsr_impl::unpack_q32(x.qs, tsr_impl::fifth_bits(x), q);
            d = h2f(x.d);
            m = h2f(x.m);
        } else if (T == TSR_TYPE_Q5_0) {
            const tsr_block_q5_0 & x = ((const tsr_block_q5_0 *)vx)[b];
            tsr_impl::unpack_q32(x.qs, tsr_impl::load_u32(x.qh), q);
            d = h2f(x.d);
        } else {
            const tsr_block_iq4_nl & x = ((const tsr_block_iq4_nl *)vx)[b];
            tsr_impl::unpack_q32(x.qs, 0, q);
            for (int j = 0; j < 32; ++j) q[j] = tsr_impl::iq4nl_values[q[j]];
            d = h2f(x.d);
        }
        int32_t acc = 0;
        for (int j = 0; j < 32; ++j) acc += q[j] * y[b].qs[j];
        if (T == TSR_TYPE_Q5_0) acc -= 16 * y[b].sum;
        s += d * y[b].d * (float)acc + m * y[b].d * (float)y[b].sum;
    }
    return s;
}

static float dot_q4_1_yq8_scalar(int64_t n, const void * x, const yq8 * y) { return dot_q32_yq8<TSR_TYPE_Q4_1>(n, x, y); }
static float dot_q5_0_yq8_scalar(int64_t n, const void * x, const yq8 * y) { return dot_q32_yq8<TSR_TYPE_Q5_0>(n, x, y); }
static float dot_q5_1_yq8_scalar(int64_t n, const void * x, const yq8 * y) { return dot_q32_yq8<TSR_TYPE_Q5_1>(n, x, y); }
static float dot_iq4_nl_yq8_scalar(int64_t n, const void * x, const yq8 * y) { return dot_q32_yq8<TSR_TYPE_IQ4_NL>(n, x, y); }

static void quantize_q8k_scalar(const float * x, tsr_block_q8_K * y, int64_t n) { tsr_from_float_row(TSR_TYPE_Q8_K, x, y, n); }

static void axpy_f32_scalar(int64_t n, float a, const float * x, float * y) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

static void f16_to_f32_scalar(const void * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = h2f(((const uint16_t *)x)[i]);
}

static void f32_to_f16_scalar(const float * x, void * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) ((uint16_t *)y)[i] = f2h(x[i]);
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
    k.dot_q8k[KSLOT_Q2_K] = dot_q2_K_q8_K_scalar;
    k.dot_q8k[KSLOT_Q3_K] = dot_q3_K_q8_K_scalar;
    k.dot_q8k[KSLOT_Q4_K] = dot_q4_K_q8_K_scalar;
    k.dot_q8k[KSLOT_Q5_K] = dot_q5_K_q8_K_scalar;
    k.dot_q8k[KSLOT_Q6_K] = dot_q6_K_q8_K_scalar;
    k.dot_yq8[QSLOT_Q4_1] = dot_q4_1_yq8_scalar;
    k.dot_yq8[QSLOT_Q5_0] = dot_q5_0_yq8_scalar;
    k.dot_yq8[QSLOT_Q5_1] = dot_q5_1_yq8_scalar;
    k.dot_yq8[QSLOT_IQ4_NL] = dot_iq4_nl_yq8_scalar;
    k.quantize_q8k = quantize_q8k_scalar;
    k.quantize_y = quantize_y_scalar;
    k.axpy_f32 = axpy_f32_scalar;
    k.f16_to_f32 = f16_to_f32_scalar;
    k.f32_to_f16 = f32_to_f16_scalar;
    return k;
}();

} // namespace tcpu
} // namespace
