/* types.inl - type traits, fp16/bf16 conversion, Q8_0/Q4_0 quantization (the other
 * quantized types and the row conversions of every type: quants.inl). */

TSR_IMPL_NS_BEGIN

struct type_traits {
    const char * name;
    int64_t blck_size;
    size_t  type_size;
    bool    quantized;
};

static inline const type_traits * get_traits(enum tsr_type type) {
    static const type_traits f32  = {"f32",  1, sizeof(float), false};
    static const type_traits f16  = {"f16",  1, sizeof(tsr_fp16_t), false};
    static const type_traits q4_0 = {"q4_0", TSR_QK4_0, sizeof(tsr_block_q4_0), true};
    static const type_traits q8_0 = {"q8_0", TSR_QK8_0, sizeof(tsr_block_q8_0), true};
    static const type_traits i32  = {"i32",  1, sizeof(int32_t), false};
    static const type_traits bf16 = {"bf16", 1, sizeof(tsr_bf16_t), false};
    static const type_traits q4_1 = {"q4_1", TSR_QK4_1, sizeof(tsr_block_q4_1), true};
    static const type_traits q5_0 = {"q5_0", TSR_QK5_0, sizeof(tsr_block_q5_0), true};
    static const type_traits q5_1 = {"q5_1", TSR_QK5_1, sizeof(tsr_block_q5_1), true};
    static const type_traits q2_k = {"q2_K", TSR_QK_K, sizeof(tsr_block_q2_K), true};
    static const type_traits q3_k = {"q3_K", TSR_QK_K, sizeof(tsr_block_q3_K), true};
    static const type_traits q4_k = {"q4_K", TSR_QK_K, sizeof(tsr_block_q4_K), true};
    static const type_traits q5_k = {"q5_K", TSR_QK_K, sizeof(tsr_block_q5_K), true};
    static const type_traits q6_k = {"q6_K", TSR_QK_K, sizeof(tsr_block_q6_K), true};
    static const type_traits q8_k = {"q8_K", TSR_QK_K, sizeof(tsr_block_q8_K), true};
    static const type_traits iq4_nl = {"iq4_nl", TSR_QK4_NL, sizeof(tsr_block_iq4_nl), true};
    switch (type) {
        case TSR_TYPE_F32:  return &f32;
        case TSR_TYPE_F16:  return &f16;
        case TSR_TYPE_Q4_0: return &q4_0;
        case TSR_TYPE_Q8_0: return &q8_0;
        case TSR_TYPE_I32:  return &i32;
        case TSR_TYPE_BF16: return &bf16;
        case TSR_TYPE_Q4_1: return &q4_1;
        case TSR_TYPE_Q5_0: return &q5_0;
        case TSR_TYPE_Q5_1: return &q5_1;
        case TSR_TYPE_Q2_K: return &q2_k;
        case TSR_TYPE_Q3_K: return &q3_k;
        case TSR_TYPE_Q4_K: return &q4_k;
        case TSR_TYPE_Q5_K: return &q5_k;
        case TSR_TYPE_Q6_K: return &q6_k;
        case TSR_TYPE_Q8_K: return &q8_k;
        case TSR_TYPE_IQ4_NL: return &iq4_nl;
        default:            return nullptr;
    }
}

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float    bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_is_valid_type(enum tsr_type type) { return tsr_impl::get_traits(type) != nullptr; }

TSR_API_IMPL size_t tsr_type_size(enum tsr_type type) {
    const auto * tr = tsr_impl::get_traits(type);
    return tr ? tr->type_size : 0;
}

TSR_API_IMPL int64_t tsr_blck_size(enum tsr_type type) {
    const auto * tr = tsr_impl::get_traits(type);
    return tr ? tr->blck_size : 0;
}

TSR_API_IMPL size_t tsr_row_size(enum tsr_type type, int64_t ne) {
    const auto * tr = tsr_impl::get_traits(type);
    if (!tr || ne < 0) return 0;
    return tr->type_size * (size_t)(ne / tr->blck_size);
}

TSR_API_IMPL const char * tsr_type_name(enum tsr_type type) {
    const auto * tr = tsr_impl::get_traits(type);
    return tr ? tr->name : "unknown";
}

TSR_API_IMPL bool tsr_is_quantized(enum tsr_type type) {
    const auto * tr = tsr_impl::get_traits(type);
    return tr ? tr->quantized : false;
}

/* ---- fp16 / bf16 ------------------------------------------------------------------- */

TSR_API_IMPL float tsr_fp16_to_fp32(tsr_fp16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp  = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) { /* inf / nan */
        return tsr_impl::bits_f32(sign | 0x7f800000u | (mant << 13));
    }
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in float */
        const float v = (float)mant * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    return tsr_impl::bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

TSR_API_IMPL tsr_fp16_t tsr_fp32_to_fp16(float f) {
    /* Round to nearest even (F. Giesen's float_to_half_fast3_rtne). */
    uint32_t u = tsr_impl::f32_bits(f);
    const uint32_t sign = u & 0x80000000u;
    u ^= sign;
    uint32_t o;
    if (u >= (uint32_t)(127 + 16) << 23) {          /* >= 65536, inf or nan */
        o = u > 0x7f800000u ? (0x7e00u | ((u >> 13) & 0x3ffu)) : 0x7c00u;
    } else if (u < (uint32_t)113 << 23) {           /* < 2^-14: subnormal half or zero */
        const uint32_t magic_u = (uint32_t)((127 - 15) + (23 - 10) + 1) << 23;
        const float sum = tsr_impl::bits_f32(u) + tsr_impl::bits_f32(magic_u);
        o = tsr_impl::f32_bits(sum) - magic_u;
    } else {
        const uint32_t mant_odd = (u >> 13) & 1u;
        u += ((uint32_t)(15 - 127) << 23) + 0xfffu;
        u += mant_odd;
        o = u >> 13;
    }
    return (tsr_fp16_t)(o | (sign >> 16));
}

TSR_API_IMPL float tsr_bf16_to_fp32(tsr_bf16_t x) { return tsr_impl::bits_f32((uint32_t)x.bits << 16); }

TSR_API_IMPL tsr_bf16_t tsr_fp32_to_bf16(float f) {
    const uint32_t u = tsr_impl::f32_bits(f);
    tsr_bf16_t r;
    if ((u & 0x7fffffffu) > 0x7f800000u) { /* nan: keep it quiet */
        r.bits = (uint16_t)((u >> 16) | 64u);
        return r;
    }
    r.bits = (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
    return r;
}

TSR_API_IMPL void tsr_fp16_to_fp32_row(const tsr_fp16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = tsr_fp16_to_fp32(x[i]);
}
TSR_API_IMPL void tsr_fp32_to_fp16_row(const float * x, tsr_fp16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = tsr_fp32_to_fp16(x[i]);
}
TSR_API_IMPL void tsr_bf16_to_fp32_row(const tsr_bf16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = tsr_bf16_to_fp32(x[i]);
}
TSR_API_IMPL void tsr_fp32_to_bf16_row(const float * x, tsr_bf16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = tsr_fp32_to_bf16(x[i]);
}

/* ---- quantization (ggml's reference layouts and rounding) ------------------------------ */

TSR_IMPL_NS_BEGIN

static inline void quantize_row_q8_0(const float * x, tsr_block_q8_0 * y, int64_t n) {
    const int64_t nb = n / TSR_QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f;
        for (int j = 0; j < TSR_QK8_0; j++) amax = std::fmax(amax, std::fabs(x[i * TSR_QK8_0 + j]));
        const float d  = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tsr_fp32_to_fp16(d);
        for (int j = 0; j < TSR_QK8_0; j++) {
            y[i].qs[j] = (int8_t)std::lround(x[i * TSR_QK8_0 + j] * id);
        }
    }
}

static inline void dequantize_row_q8_0(const tsr_block_q8_0 * x, float * y, int64_t n) {
    const int64_t nb = n / TSR_QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        const float d = tsr_fp16_to_fp32(x[i].d);
        for (int j = 0; j < TSR_QK8_0; j++) y[i * TSR_QK8_0 + j] = (float)x[i].qs[j] * d;
    }
}

static inline void quantize_row_q4_0(const float * x, tsr_block_q4_0 * y, int64_t n) {
    const int64_t nb = n / TSR_QK4_0;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f, max = 0.0f; /* max: the value of largest magnitude, with its sign */
        for (int j = 0; j < TSR_QK4_0; j++) {
            const float v = x[i * TSR_QK4_0 + j];
            if (amax < std::fabs(v)) { amax = std::fabs(v); max = v; }
        }
        const float d  = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tsr_fp32_to_fp16(d);
        for (int j = 0; j < TSR_QK4_0 / 2; j++) {
            const float x0 = x[i * TSR_QK4_0 + j] * id;
            const float x1 = x[i * TSR_QK4_0 + TSR_QK4_0 / 2 + j] * id;
            int q0 = (int)(int8_t)(x0 + 8.5f);
            int q1 = (int)(int8_t)(x1 + 8.5f);
            q0 = q0 < 15 ? q0 : 15;
            q1 = q1 < 15 ? q1 : 15;
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static inline void dequantize_row_q4_0(const tsr_block_q4_0 * x, float * y, int64_t n) {
    const int64_t nb = n / TSR_QK4_0;
    for (int64_t i = 0; i < nb; i++) {
        const float d = tsr_fp16_to_fp32(x[i].d);
        for (int j = 0; j < TSR_QK4_0 / 2; j++) {
            y[i * TSR_QK4_0 + j]                 = (float)((x[i].qs[j] & 0x0f) - 8) * d;
            y[i * TSR_QK4_0 + TSR_QK4_0 / 2 + j] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static inline bool check_row(const char * fn, enum tsr_type type, int64_t n) {
    const auto * tr = get_traits(type);
    if (!tr) return tsr_set_error("%s: unknown type %d", fn, (int)type);
    if (n < 0 || n % tr->blck_size != 0) {
        return tsr_set_error("%s: %lld elements is not a multiple of %s's block size %lld", fn,
                             (long long)n, tr->name, (long long)tr->blck_size);
    }
    return true;
}

TSR_IMPL_NS_END
