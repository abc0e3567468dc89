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

static void cvt_bf16_f32_neon(const void * src, float * dst, int64_t n) {
    const uint16_t * s = (const uint16_t *)src;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(s + i), 16)));
    for (; i < n; ++i) dst[i] = bf2f(s[i]);
}

/* Elements k..k+3 of a src0 row as floats (T: 0 f32, 1 f16, 2 bf16). */
template <int T>
static inline float32x4_t load4_as_f32(const char * row, int64_t k) {
    if (T == 0) return vld1q_f32((const float *)row + k);
    const uint16x4_t h = vld1_u16((const uint16_t *)row + k);
    if (T == 1) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

/* 4 rows x 8 elements per step: 8 accumulators, 4 row streams in flight, y loaded once. */
template <int T>
static void dot4_neon(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const float * y = (const float *)yv;
    float32x4_t acc[4][2];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t y0 = vld1q_f32(y + i), y1 = vld1q_f32(y + i + 4);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
            const char * row = x + (size_t)r * lda;
            acc[r][0] = vfmaq_f32(acc[r][0], load4_as_f32<T>(row, i), y0);
            acc[r][1] = vfmaq_f32(acc[r][1], load4_as_f32<T>(row, i + 4), y1);
        }
    }
    for (; i + 4 <= n; i += 4) {
        const float32x4_t y0 = vld1q_f32(y + i);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) acc[r][0] = vfmaq_f32(acc[r][0], load4_as_f32<T>(x + (size_t)r * lda, i), y0);
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
        const char * row = x + (size_t)r * lda;
        float s = vaddvq_f32(vaddq_f32(acc[r][0], acc[r][1]));
        for (int64_t j = i; j < n; ++j) s += elem_as_f32<T>(row, j) * y[j];
        out[r] = s;
    }
}

/* Q8_0 / Q4_0 against yq8 blocks, 4 rows per block step: the y block is loaded once, each
 * row's 32 products reduce to 4 exact int32 lanes, and the 4 rows' lanes fold pairwise
 * (vpaddq_s32) into one vector whose lane r is row r's block sum, so one convert and one
 * fma per block serve all 4 rows. The plain yq8 blocks suffice here: 16-byte vectors
 * already take a block's two halves as stored, and Q4_0's offset of 8 is the same for
 * every row (-8 * sum(y), added once after the fold), so no group of 4 blocks is needed
 * and a row of any n / 32 blocks takes the same loop. */
static inline int32x4_t fold4_s32_neon(int32x4_t p0, int32x4_t p1, int32x4_t p2, int32x4_t p3) {
    return vpaddq_s32(vpaddq_s32(p0, p1), vpaddq_s32(p2, p3));
}

/* The fp16 scales of block b of the 4 rows, as floats (Q8_0 and Q4_0 both start with d). */
template <typename B>
static inline float32x4_t load_d4_neon(const char * x, size_t lda, int64_t b) {
    uint16x4_t h = vdup_n_u16(0);
    h = vld1_lane_u16(&((const B *)x + b)->d, h, 0);
    h = vld1_lane_u16(&((const B *)(x + lda) + b)->d, h, 1);
    h = vld1_lane_u16(&((const B *)(x + 2 * lda) + b)->d, h, 2);
    h = vld1_lane_u16(&((const B *)(x + 3 * lda) + b)->d, h, 3);
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

/* One Q8_0 block against y: 4 lanes of exact int32 partial sums. Two products share an
 * int16 lane (vmlal_high_s8): yq8 bytes are in [-127, 127], so a pair stays within
 * 2 * 128 * 127 < 2^15 even against Q8_0's -128. */
static inline int32x4_t q8_block_neon(const tsr_block_q8_0 * xb, int8x16_t y0, int8x16_t y1) {
    const int8x16_t x0 = vld1q_s8(xb->qs), x1 = vld1q_s8(xb->qs + 16);
    const int16x8_t p0 = vmlal_high_s8(vmull_s8(vget_low_s8(x0), vget_low_s8(y0)), x0, y0);
    const int16x8_t p1 = vmlal_high_s8(vmull_s8(vget_low_s8(x1), vget_low_s8(y1)), x1, y1);
    return vpadalq_s16(vpaddlq_s16(p0), p1);
}

static void dot4_q8_0_neon(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const yq8 * y = (const yq8 *)yv;
    const tsr_block_q8_0 * x0 = (const tsr_block_q8_0 *)x;
    const tsr_block_q8_0 * x1 = (const tsr_block_q8_0 *)(x + lda);
    const tsr_block_q8_0 * x2 = (const tsr_block_q8_0 *)(x + 2 * lda);
    const tsr_block_q8_0 * x3 = (const tsr_block_q8_0 *)(x + 3 * lda);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t b = 0; b < n / 32; ++b) {
        const int8x16_t y0 = vld1q_s8(y[b].qs), y1 = vld1q_s8(y[b].qs + 16);
        const int32x4_t s = fold4_s32_neon(q8_block_neon(x0 + b, y0, y1), q8_block_neon(x1 + b, y0, y1),
                                           q8_block_neon(x2 + b, y0, y1), q8_block_neon(x3 + b, y0, y1));
        const float32x4_t d = vmulq_n_f32(load_d4_neon<tsr_block_q8_0>(x, lda, b), y[b].d);
        acc = vfmaq_f32(acc, vcvtq_f32_s32(s), d);
    }
    vst1q_f32(out, acc);
}

/* Unsigned levels of up to 5 bits (lo: elements 0..15, hi: 16..31) against y: 4 products
 * per int16 lane stay within 4 * 31 * 127 < 2^15. */
static inline int32x4_t nibble_dot_neon(int8x16_t lo, int8x16_t hi, int8x16_t y0, int8x16_t y1) {
    int16x8_t p = vmull_s8(vget_low_s8(lo), vget_low_s8(y0));
    p = vmlal_high_s8(p, lo, y0);
    p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(y1));
    p = vmlal_high_s8(p, hi, y1);
    return vpaddlq_s16(p);
}

/* One Q4_0 block against y with the nibbles left unsigned (0..15); the offset of 8 is taken
 * out after the fold. */
static inline int32x4_t q4_block_neon(const tsr_block_q4_0 * xb, int8x16_t y0, int8x16_t y1) {
    const uint8x16_t v = vld1q_u8(xb->qs);
    return nibble_dot_neon(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), y0, y1);
}

static void dot4_q4_0_neon(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const yq8 * y = (const yq8 *)yv;
    const tsr_block_q4_0 * x0 = (const tsr_block_q4_0 *)x;
    const tsr_block_q4_0 * x1 = (const tsr_block_q4_0 *)(x + lda);
    const tsr_block_q4_0 * x2 = (const tsr_block_q4_0 *)(x + 2 * lda);
    const tsr_block_q4_0 * x3 = (const tsr_block_q4_0 *)(x + 3 * lda);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t b = 0; b < n / 32; ++b) {
        const int8x16_t y0 = vld1q_s8(y[b].qs), y1 = vld1q_s8(y[b].qs + 16);
        int32x4_t s = fold4_s32_neon(q4_block_neon(x0 + b, y0, y1), q4_block_neon(x1 + b, y0, y1),
                                     q4_block_neon(x2 + b, y0, y1), q4_block_neon(x3 + b, y0, y1));
        s = vaddq_s32(s, vdupq_n_s32(-8 * y[b].sum));
        const float32x4_t d = vmulq_n_f32(load_d4_neon<tsr_block_q4_0>(x, lda, b), y[b].d);
        acc = vfmaq_f32(acc, vcvtq_f32_s32(s), d);
    }
    vst1q_f32(out, acc);
}

/* F32 row -> yq8 blocks, byte for byte what quantize_y_scalar writes: the same amax (NaN
 * lanes masked to 0 first, as std::max skips them; vmaxq_f32 would propagate them), the
 * same scalar d and id, the same product, clamp and round half to even (vcvtnq_s32_f32).
 * A NaN product (NaN input, or inf * 0 when amax is inf) passes the clamp as NaN, and
 * FCVTNS turns NaN into 0, which is the scalar code's explicit choice. */
static void quantize_y_neon(const float * x, yq8 * y, int64_t n) {
    const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
    for (int64_t b = 0; b < n / 32; ++b) {
        const float * xb = x + b * 32;
        float32x4_t v[8];
        float32x4_t m = vdupq_n_f32(0);
        TSR_UNROLL(8)
        for (int j = 0; j < 8; ++j) {
            v[j] = vld1q_f32(xb + 4 * j);
            const uint32x4_t ok = vceqq_f32(v[j], v[j]);
            m = vmaxq_f32(m, vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(vabsq_f32(v[j])), ok)));
        }
        const float amax = vmaxvq_f32(m);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int32x4_t q[8];
        int32x4_t sum = vdupq_n_s32(0);
        TSR_UNROLL(8)
        for (int j = 0; j < 8; ++j) {
            q[j] = vcvtnq_s32_f32(vminq_f32(hi, vmaxq_f32(lo, vmulq_n_f32(v[j], id))));
            sum = vaddq_s32(sum, q[j]);
        }
        /* |q| <= 127: the narrowing moves are exact */
        const int16x8_t h0 = vmovn_high_s32(vmovn_s32(q[0]), q[1]), h1 = vmovn_high_s32(vmovn_s32(q[2]), q[3]);
        const int16x8_t h2 = vmovn_high_s32(vmovn_s32(q[4]), q[5]), h3 = vmovn_high_s32(vmovn_s32(q[6]), q[7]);
        vst1q_s8(y[b].qs, vmovn_high_s16(vmovn_s16(h0), h1));
        vst1q_s8(y[b].qs + 16, vmovn_high_s16(vmovn_s16(h2), h3));
        y[b].d = d;
        y[b].sum = vaddvq_s32(sum);
    }
}

/* Store (or add) one C column of 8 m values; the M edge goes through a buffer. */
static inline void store_col8_neon(float * c, float32x4_t v0, float32x4_t v1, int mr_valid, bool accumulate) {
    if (mr_valid == 8) {
        if (accumulate) {
            v0 = vaddq_f32(v0, vld1q_f32(c));
            v1 = vaddq_f32(v1, vld1q_f32(c + 4));
        }
        vst1q_f32(c, v0);
        vst1q_f32(c + 4, v1);
        return;
    }
    float tmp[8];
    vst1q_f32(tmp, v0);
    vst1q_f32(tmp + 4, v1);
    for (int i = 0; i < mr_valid; ++i) c[i] = accumulate ? c[i] + tmp[i] : tmp[i];
}

/* F32 GEMM micro-kernel: 8 x 12 tile. 24 accumulators + 2 A + 3 B quads = 29 of the 32
 * vector registers; B is used by lane (vfmaq_laneq_f32), so no broadcasts are needed. */
static void gemm_f32_kernel_neon(int kc, const void * ap, const void * bp, float * c, size_t ldc,
                                 int mr_valid, int nr_valid, bool accumulate) {
    const float * a = (const float *)ap;
    const float * b = (const float *)bp;
    float32x4_t c00 = vdupq_n_f32(0), c01 = vdupq_n_f32(0), c10 = vdupq_n_f32(0), c11 = vdupq_n_f32(0);
    float32x4_t c20 = vdupq_n_f32(0), c21 = vdupq_n_f32(0), c30 = vdupq_n_f32(0), c31 = vdupq_n_f32(0);
    float32x4_t c40 = vdupq_n_f32(0), c41 = vdupq_n_f32(0), c50 = vdupq_n_f32(0), c51 = vdupq_n_f32(0);
    float32x4_t c60 = vdupq_n_f32(0), c61 = vdupq_n_f32(0), c70 = vdupq_n_f32(0), c71 = vdupq_n_f32(0);
    float32x4_t c80 = vdupq_n_f32(0), c81 = vdupq_n_f32(0), c90 = vdupq_n_f32(0), c91 = vdupq_n_f32(0);
    float32x4_t ca0 = vdupq_n_f32(0), ca1 = vdupq_n_f32(0), cb0 = vdupq_n_f32(0), cb1 = vdupq_n_f32(0);
    for (int k = 0; k < kc; ++k) {
        const float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4);
        const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8);
#define TSR_NSTEP(bq, l, x0, x1) x0 = vfmaq_laneq_f32(x0, a0, bq, l); x1 = vfmaq_laneq_f32(x1, a1, bq, l);
        TSR_NSTEP(b0, 0, c00, c01) TSR_NSTEP(b0, 1, c10, c11) TSR_NSTEP(b0, 2, c20, c21) TSR_NSTEP(b0, 3, c30, c31)
        TSR_NSTEP(b1, 0, c40, c41) TSR_NSTEP(b1, 1, c50, c51) TSR_NSTEP(b1, 2, c60, c61) TSR_NSTEP(b1, 3, c70, c71)
        TSR_NSTEP(b2, 0, c80, c81) TSR_NSTEP(b2, 1, c90, c91) TSR_NSTEP(b2, 2, ca0, ca1) TSR_NSTEP(b2, 3, cb0, cb1)
#undef TSR_NSTEP
        a += 8;
        b += 12;
    }
    const float32x4_t r[12][2] = { {c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51},
                                   {c60, c61}, {c70, c71}, {c80, c81}, {c90, c91}, {ca0, ca1}, {cb0, cb1} };
    for (int j = 0; j < nr_valid; ++j) store_col8_neon(c + (size_t)j * ldc, r[j][0], r[j][1], mr_valid, accumulate);
}

/* mc = 128 rows x kc = 256 keeps the packed A block (128 KiB) in L2 and one B panel
 * (12 KiB) in L1 on common cores. */
static constexpr gemm_impl gemm_f32_neon = [] {
    gemm_impl g{};
    g.mr = 8; g.nr = 12; g.kc = 256; g.mc = 128;
    g.a_bytes_32k = 8 * 128; g.b_bytes_32k = 12 * 128;
    g.pack_a = pack_panel_f32<8, 4, cvt_f32_copy>;
    g.pack_b = pack_panel_f32<12, 4, cvt_f32_copy>;
    g.kernel = gemm_f32_kernel_neon;
    return g;
}();
static constexpr gemm_impl gemm_f16_neon = gemm_with_pack_a(gemm_f32_neon, pack_panel_f32<8, 2, f16_to_f32_neon>);
static constexpr gemm_impl gemm_bf16_neon = gemm_with_pack_a(gemm_f32_neon, pack_panel_f32<8, 2, cvt_bf16_f32_neon>);

/* Sum over 32 signed byte products, as 4 int32 partial sums. Two products share an int16
 * lane before widening (vmlal_s8): yq8 bytes are in [-127, 127] (quantize_y), so a pair is
 * at most 2 * 128 * 127 even against Q8_0's -128. */
static inline int32x4_t dot32_s8_partial(const int8_t * x, const int8_t * y) {
    const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
    const int8x16_t y0 = vld1q_s8(y), y1 = vld1q_s8(y + 16);
    const int32x4_t s = vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(x0), vget_low_s8(y0)), x0, y0));
    return vpadalq_s16(s, vmlal_high_s8(vmull_s8(vget_low_s8(x1), vget_low_s8(y1)), x1, y1));
}

/* Store (or add) one C column of 4 m values. */
static inline void store_col4_neon(float * c, float32x4_t v, int mr_valid, bool accumulate) {
    if (mr_valid == 4) {
        vst1q_f32(c, accumulate ? vaddq_f32(v, vld1q_f32(c)) : v);
        return;
    }
    float tmp[4];
    vst1q_f32(tmp, v);
    for (int i = 0; i < mr_valid; ++i) c[i] = accumulate ? c[i] + tmp[i] : tmp[i];
}

/* Sum over 16 signed byte products, as 4 int32 partial sums (dot32_s8_partial's half). */
static inline int32x4_t dot16_s8_partial(const int8_t * x, const int8_t * y) {
    const int8x16_t x0 = vld1q_s8(x), y0 = vld1q_s8(y);
    return vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(x0), vget_low_s8(y0)), x0, y0));
}

/* The 4 rows' sums of products of A block aq (rows of 32 bytes) with B's yn over k in
 * [K0, K0 + N): one vector over m. */
template <int K0, int N>
static inline int32x4_t rows4_dot_neon(const int8_t * aq, const int8_t * yn) {
    const auto dot = [&](int r) { return N == 32 ? dot32_s8_partial(aq + r * 32, yn) : dot16_s8_partial(aq + r * 32 + K0, yn + K0); };
    return vpaddq_s32(vpaddq_s32(dot(0), dot(1)), vpaddq_s32(dot(2), dot(3)));
}

/* Integer GEMM micro-kernel over signed int8 panels (pack_panel_s8_a/b): 4 x 4 tile. Per 32 k
 * block and column n, the 4 partial-sum vectors of the 4 rows reduce pairwise (vpaddq_s32)
 * into one vector over m, which is scaled by d_a[m] * d_b[n] like the dot-product path.
 * KIND (panel_kind, pack.inl): min panels also subtract A's mins times B's d * sum(q) per
 * block; half panels sum and scale each 16 k on its own. */
template <int KIND>
static void gemm_s8_kernel_neon(int kc, const void * ap, const void * bp, float * c, size_t ldc,
                                int mr_valid, int nr_valid, bool accumulate) {
    const uint8_t * a = (const uint8_t *)ap;
    const uint8_t * b = (const uint8_t *)bp;
    float32x4_t acc[4];
    for (int n = 0; n < 4; ++n) acc[n] = vdupq_n_f32(0);
    for (int blk = 0; blk < kc / 32; ++blk) {
        const int8_t * aq = (const int8_t *)a;
        const int8_t * bq = (const int8_t *)b;
        const float32x4_t da = vld1q_f32((const float *)(a + 4 * 32));
        const float * db = (const float *)(b + 4 * 32);
        TSR_UNROLL(4)
        for (int n = 0; n < 4; ++n) {
            const int8_t * yn = bq + n * 32;
            if constexpr (KIND == PANEL_HALVES) {
                const float32x4_t da_hi = vld1q_f32((const float *)(a + 4 * 36));
                acc[n] = vfmaq_f32(acc[n], vcvtq_f32_s32(rows4_dot_neon<0, 16>(aq, yn)), vmulq_n_f32(da, db[n]));
                acc[n] = vfmaq_f32(acc[n], vcvtq_f32_s32(rows4_dot_neon<16, 16>(aq, yn)), vmulq_n_f32(da_hi, db[n]));
            } else {
                acc[n] = vfmaq_f32(acc[n], vcvtq_f32_s32(rows4_dot_neon<0, 32>(aq, yn)), vmulq_n_f32(da, db[n]));
            }
            if constexpr (KIND == PANEL_MIN)
                acc[n] = vfmsq_n_f32(acc[n], vld1q_f32((const float *)(a + 4 * 36)), ((const float *)(b + 4 * 36))[n]);
        }
        a += 4 * (KIND == PANEL_Q8 ? 36 : 40);
        b += 4 * (KIND == PANEL_MIN ? 40 : 36);
    }
    for (int n = 0; n < nr_valid; ++n) store_col4_neon(c + (size_t)n * ldc, acc[n], mr_valid, accumulate);
}

/* kc = 512: 16 blocks; the packed A block is 128 rows x 16 x 36 bytes (72 KiB). */
static constexpr gemm_impl gemm_q8_0_neon = [] {
    gemm_impl g{};
    g.mr = 4; g.nr = 4; g.kc = 512; g.mc = 128;
    g.a_bytes_32k = 4 * 36; g.b_bytes_32k = 4 * 36;
    g.pack_a = pack_panel_s8_a<4, TSR_TYPE_Q8_0>;
    g.pack_b = pack_panel_s8_b<4>;
    g.kernel = gemm_s8_kernel_neon<PANEL_Q8>;
    return g;
}();
/* The min panels' GEMM (Q4_1, Q5_1, Q4_K, Q5_K; their packer: gemm_kquant.inl). */
static constexpr gemm_impl gemm_min_neon =
    gemm_panel_variant(gemm_q8_0_neon, gemm_s8_kernel_neon<PANEL_MIN>, pack_panel_s8_b<4, true>, 4 * 40);
/* The half panels' GEMM (Q6_K: a scale per 16; B as Q8_0's). */
static constexpr gemm_impl gemm_halves_neon = gemm_panel_variant(gemm_q8_0_neon, gemm_s8_kernel_neon<PANEL_HALVES>);
static constexpr gemm_impl gemm_q4_0_neon = gemm_with_pack_a(gemm_q8_0_neon, pack_panel_s8_a<4, TSR_TYPE_Q4_0>);
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
    /* NaN lanes are tracked apart (v == v fails for them), whatever the max does with them */
    float32x4_t vm = vdupq_n_f32(-INFINITY);
    uint32x4_t ok = vdupq_n_u32(0xffffffffu);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        vm = vmaxq_f32(vm, v);
        ok = vandq_u32(ok, vceqq_f32(v, v));
    }
    float mx = vmaxvq_f32(vm);
    bool nan = vminvq_u32(ok) == 0;
    for (; i < n; ++i) {
        mx = std::max(mx, x[i]);
        nan |= x[i] != x[i];
    }
    if (soft_max_special_row(nan ? NAN : mx, n, x)) return;
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
    const float inv = (float)(1.0 / sum);   /* sum >= 1: the max's own term */
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inv));
    for (; i < n; ++i) x[i] *= inv;
}

static constexpr act_kernels act_table_neon = [] {
    act_kernels a{};
    a.exp = act_row_neon<ACT_EXP>;
    a.silu = act_row_neon<ACT_SILU>;
    a.sigmoid = act_row_neon<ACT_SIGMOID>;
    a.gelu = act_row_neon<ACT_GELU>;
    a.gelu_quick = act_row_neon<ACT_GELU_QUICK>;
    a.tanh = act_row_neon<ACT_TANH>;
    a.swiglu = swiglu_neon;
    a.soft_max = soft_max_neon;
    return a;
}();

/* ---- K-quants against Q8_K ---------------------------------------------------------------
 * Levels unpacked 16 at a time, multiplied with the activations in int16 pairs (a level of at
 * most 63 in magnitude times 127, two per lane: within int16), pairs summed into 4 int32
 * lanes per 16 elements and scaled by the sub-block's integer scale in int32; d once per
 * super-block in float. Each format is one super-block step (below) that a row driver runs
 * over one row or four: the 4-row kernel does each row's float operations in the same order
 * as the 1-row one, so a row's result does not depend on which kernel ran it. */

/* 4 int32 lanes holding the sum of a[i] * b[i] over 16 int8 pairs */
static inline int32x4_t dot16_lanes_neon(int8x16_t a, int8x16_t b) {
    const int16x8_t p = vmlal_s8(vmull_s8(vget_low_s8(a), vget_low_s8(b)), vget_high_s8(a), vget_high_s8(b));
    return vpaddlq_s16(p);
}

/* What a row has summed so far: the scaled level sums in 4 float lanes, and the mins' part
 * (subtracted at the end). */
struct k_row_sum_neon {
    float32x4_t acc = vdupq_n_f32(0.0f);
    float mins = 0.0f;
    float total() const { return vaddvq_f32(acc) - mins; }
};

/* Q4_K (HIGH false) / Q5_K (HIGH true): qs byte 32c + l holds element 64c + l (low nibble)
 * and 64c + 32 + l (high); Q5_K's fifth bits are bits 2c / 2c + 1 of qh[l]. */
template <bool HIGH>
static inline void k4_step_neon(const uint8_t * blk, const tsr_block_q8_K & y, k_row_sum_neon & r) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m10 = vdupq_n_u8(0x10);
    const uint8_t * qs = blk + (HIGH ? 48 : 16);
    int sc[8], mn[8];
    int32_t summ = 0;
    TSR_UNROLL(8)
    for (int sb = 0; sb < 8; ++sb) {
        tsr_impl::k4_scale_min(sb, blk + 4, &sc[sb], &mn[sb]);
        summ += mn[sb] * (y.bsums[2 * sb] + y.bsums[2 * sb + 1]);
    }
    uint16_t d16, dmin16;
    std::memcpy(&d16, blk, 2);
    std::memcpy(&dmin16, blk + 2, 2);
    r.mins += y.d * h2f(dmin16) * (float)summ;
    const uint8x16_t qh[2] = {HIGH ? vld1q_u8(blk + 16) : vdupq_n_u8(0), HIGH ? vld1q_u8(blk + 32) : vdupq_n_u8(0)};
    int32x4_t sumi = vdupq_n_s32(0);
    TSR_UNROLL(4)
    for (int c = 0; c < 4; ++c) {
        int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
        TSR_UNROLL(2)
        for (int half = 0; half < 2; ++half) {
            const uint8x16_t v = vld1q_u8(qs + 32 * c + 16 * half);
            uint8x16_t l = vandq_u8(v, m4), h = vshrq_n_u8(v, 4);
            if (HIGH) {
                /* bit 2c (2c + 1) of qh to bit 4: shift left by 4 - 2c (right when negative) */
                const int8x16_t s0 = vdupq_n_s8((int8_t)(4 - 2 * c)), s1 = vdupq_n_s8((int8_t)(3 - 2 * c));
                l = vorrq_u8(l, vandq_u8(vshlq_u8(qh[half], s0), m10));
                h = vorrq_u8(h, vandq_u8(vshlq_u8(qh[half], s1), m10));
            }
            lo = vaddq_s32(lo, dot16_lanes_neon(vreinterpretq_s8_u8(l), vld1q_s8(y.qs + 64 * c + 16 * half)));
            hi = vaddq_s32(hi, dot16_lanes_neon(vreinterpretq_s8_u8(h), vld1q_s8(y.qs + 64 * c + 32 + 16 * half)));
        }
        sumi = vmlaq_n_s32(vmlaq_n_s32(sumi, lo, sc[2 * c]), hi, sc[2 * c + 1]);
    }
    r.acc = vmlaq_n_f32(r.acc, vcvtq_f32_s32(sumi), y.d * h2f(d16));
}

/* Q6_K: element 128h + 32k + l is a nibble of ql[64h + 32(k % 2) + l] (low for k < 2) with
 * bits 2k..2k+1 of qh[32h + l] above it, minus 32; a signed 8-bit scale per 16 elements. */
static inline void q6k_step_neon(const uint8_t * blk, const tsr_block_q8_K & y, k_row_sum_neon & r) {
    const tsr_block_q6_K & x = *(const tsr_block_q6_K *)blk;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);
    const int8x16_t off = vdupq_n_s8(32);
    int32x4_t sumi = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h)
        TSR_UNROLL(2)
        for (int half = 0; half < 2; ++half) {  /* l in [16 half, 16 half + 16) */
            const uint8x16_t ql0 = vld1q_u8(x.ql + 64 * h + 16 * half), ql1 = vld1q_u8(x.ql + 64 * h + 32 + 16 * half);
            const uint8x16_t qh = vld1q_u8(x.qh + 32 * h + 16 * half);
            const uint8x16_t q[4] = {
                vorrq_u8(vandq_u8(ql0, m4), vandq_u8(vshlq_n_u8(qh, 4), m30)),
                vorrq_u8(vandq_u8(ql1, m4), vandq_u8(vshlq_n_u8(qh, 2), m30)),
                vorrq_u8(vshrq_n_u8(ql0, 4), vandq_u8(qh, m30)),
                vorrq_u8(vshrq_n_u8(ql1, 4), vandq_u8(vshrq_n_u8(qh, 2), m30)),
            };
            TSR_UNROLL(4)
            for (int k = 0; k < 4; ++k) {
                const int e = 128 * h + 32 * k + 16 * half;
                const int32x4_t p = dot16_lanes_neon(vsubq_s8(vreinterpretq_s8_u8(q[k]), off), vld1q_s8(y.qs + e));
                sumi = vmlaq_n_s32(sumi, p, x.scales[e / 16]);
            }
        }
    r.acc = vmlaq_n_f32(r.acc, vcvtq_f32_s32(sumi), h2f(x.d) * y.d);
}

/* Q2_K (levels 0..3, 4-bit scale and min per 16) and Q3_K (levels -4..3: the 2 low bits as
 * Q2_K's, minus 4 where the hmask bit is clear; signed 6-bit scale per 16): element
 * 128h + 32j + l sits at bits 2j of qs[32h + l] and bit 4h + j of hmask[l]. */
template <bool Q3>
static inline void k2_step_neon(const uint8_t * blk, const tsr_block_q8_K & y, k_row_sum_neon & r) {
    const uint8x16_t m3 = vdupq_n_u8(3), four = vdupq_n_u8(4);
    const tsr_block_q2_K * b2 = (const tsr_block_q2_K *)blk;
    const tsr_block_q3_K * b3 = (const tsr_block_q3_K *)blk;
    const uint8_t * qs = Q3 ? b3->qs : b2->qs;
    int sc[16];
    float d;
    if (Q3) {
        TSR_UNROLL(16)
        for (int g = 0; g < 16; ++g) sc[g] = tsr_impl::q3k_scale(g, b3->scales);
        d = h2f(b3->d);
    } else {
        /* mins (high nibbles) times bsums, 16 products in int32 */
        const uint8x16_t mn = vshrq_n_u8(vld1q_u8(b2->scales), 4);
        const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn))), m1 = vreinterpretq_s16_u16(vmovl_high_u8(mn));
        const int16x8_t s0 = vld1q_s16(y.bsums), s1 = vld1q_s16(y.bsums + 8);
        int32x4_t summ = vmull_s16(vget_low_s16(m0), vget_low_s16(s0));
        summ = vmlal_high_s16(summ, m0, s0);
        summ = vmlal_s16(summ, vget_low_s16(m1), vget_low_s16(s1));
        summ = vmlal_high_s16(summ, m1, s1);
        r.mins += y.d * h2f(b2->dmin) * (float)vaddvq_s32(summ);
        for (int g = 0; g < 16; ++g) sc[g] = b2->scales[g] & 0x0F;
        d = h2f(b2->d);
    }
    int32x4_t sumi = vdupq_n_s32(0);
    TSR_UNROLL(2)
    for (int h = 0; h < 2; ++h)
        TSR_UNROLL(2)
        for (int half = 0; half < 2; ++half) {  /* l in [16 half, 16 half + 16) */
            const uint8x16_t q = vld1q_u8(qs + 32 * h + 16 * half);
            const uint8x16_t hm = Q3 ? vld1q_u8(b3->hmask + 16 * half) : vdupq_n_u8(0);
            TSR_UNROLL(4)
            for (int j = 0; j < 4; ++j) {
                const int e = 128 * h + 32 * j + 16 * half;
                uint8x16_t v = vandq_u8(vshlq_u8(q, vdupq_n_s8((int8_t)(-2 * j))), m3);
                if (Q3) v = vorrq_u8(v, vandq_u8(vtstq_u8(hm, vdupq_n_u8((uint8_t)(1u << (4 * h + j)))), four));
                const int8x16_t sv = Q3 ? vsubq_s8(vreinterpretq_s8_u8(v), vreinterpretq_s8_u8(four)) : vreinterpretq_s8_u8(v);
                sumi = vmlaq_n_s32(sumi, dot16_lanes_neon(sv, vld1q_s8(y.qs + e)), sc[e / 16]);
            }
        }
    r.acc = vmlaq_n_f32(r.acc, vcvtq_f32_s32(sumi), y.d * d);
}

/* The row drivers: STEP over every super-block of BSIZE bytes, of one row or of four rows
 * lda apart (lda 0: one row four times, for the rows a 4-way split leaves over). */
template <size_t BSIZE, void (*STEP)(const uint8_t *, const tsr_block_q8_K &, k_row_sum_neon &)>
static float dot_q8k_neon(int64_t n, const void * x, const tsr_block_q8_K * y) {
    k_row_sum_neon r;
    for (int64_t i = 0; i < n / TSR_QK_K; ++i) STEP((const uint8_t *)x + (size_t)i * BSIZE, y[i], r);
    return r.total();
}

template <size_t BSIZE, void (*STEP)(const uint8_t *, const tsr_block_q8_K &, k_row_sum_neon &)>
static void dot4_q8k_neon(int64_t n, const char * x, size_t lda, const void * yv, float * out) {
    const tsr_block_q8_K * y = (const tsr_block_q8_K *)yv;
    k_row_sum_neon r[4];
    for (int64_t i = 0; i < n / TSR_QK_K; ++i)
        for (int k = 0; k < 4; ++k) STEP((const uint8_t *)x + (size_t)k * lda + (size_t)i * BSIZE, y[i], r[k]);
    TSR_UNROLL(4)
    for (int k = 0; k < 4; ++k) out[k] = r[k].total();
}

#define TSR_NEON_KQ(name, block, step)                                                              \
    static constexpr auto dot_##name##_q8_K_neon = dot_q8k_neon<sizeof(block), step>;           \
    static constexpr auto dot4_##name##_q8_K_neon = dot4_q8k_neon<sizeof(block), step>;
TSR_NEON_KQ(q2_K, tsr_block_q2_K, k2_step_neon<false>)
TSR_NEON_KQ(q3_K, tsr_block_q3_K, k2_step_neon<true>)
TSR_NEON_KQ(q4_K, tsr_block_q4_K, k4_step_neon<false>)
TSR_NEON_KQ(q5_K, tsr_block_q5_K, k4_step_neon<true>)
TSR_NEON_KQ(q6_K, tsr_block_q6_K, q6k_step_neon)
#undef TSR_NEON_KQ

/* F32 -> Q8_K, byte for byte what the core's quantizer writes: the scale from the vector max
 * and min (vmaxnm / vminnm skip NaN, as the core does), levels rounded half to even like its
 * nearest_int (vcvtnq: NaN to 0 as well), the bsums as 16-byte sums. */
static void quantize_q8k_neon(const float * x, tsr_block_q8_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; ++i, x += TSR_QK_K) {
        float32x4_t vhi = vdupq_n_f32(0.0f), vlo = vdupq_n_f32(0.0f);
        for (int j = 0; j < TSR_QK_K; j += 4) {
            const float32x4_t v = vld1q_f32(x + j);
            vhi = vmaxnmq_f32(vhi, v);
            vlo = vminnmq_f32(vlo, v);
        }
        const float max = q8k_signed_max(vmaxnmvq_f32(vhi), vminnmvq_f32(vlo), x);
        std::memset(&y[i], 0, sizeof(y[i]));
        if (max == 0.0f) continue;
        const float iscale = -127.0f / max;
        const int32x4_t top = vdupq_n_s32(127);
        for (int j = 0; j < TSR_QK_K; j += 16) {
            int32x4_t q[4];
            TSR_UNROLL(4)
            for (int k = 0; k < 4; ++k) q[k] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4 * k), iscale)), top);
            const int16x8_t h0 = vqmovn_high_s32(vqmovn_s32(q[0]), q[1]), h1 = vqmovn_high_s32(vqmovn_s32(q[2]), q[3]);
            const int8x16_t b = vqmovn_high_s16(vqmovn_s16(h0), h1);
            vst1q_s8(y[i].qs + j, b);
            y[i].bsums[j / 16] = vaddlvq_s8(b);
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ---- Q4_1, Q5_0, Q5_1, IQ4_NL against yq8 ------------------------------------------------
 * A block's 32 levels as two vectors (elements 0..15: low nibbles, 16..31: high), one exact
 * int32 sum per block in 4 lanes scaled in float; Q5_0's offset of 16 and Q4_1 / Q5_1's min
 * meet the activations' block sum. */

/* Bit 4 of each level from the 32 fifth bits: bit j of qh for element j. */
static inline void fifth_bits_neon(const uint8_t * qh, uint8x16_t * lo, uint8x16_t * hi) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    static const uint8_t pick_lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    const uint8x8_t h8 = vreinterpret_u8_u32(vdup_n_u32(tsr_impl::load_u32(qh)));
    const uint8x16_t h = vcombine_u8(h8, h8);
    const uint8x16_t idx = vld1q_u8(pick_lo), b = vld1q_u8(bit), m10 = vdupq_n_u8(0x10);
    *lo = vandq_u8(vtstq_u8(vqtbl1q_u8(h, idx), b), m10);
    *hi = vandq_u8(vtstq_u8(vqtbl1q_u8(h, vaddq_u8(idx, vdupq_n_u8(2))), b), m10);
}

/* The levels of one block (unsigned, IQ4_NL's still as table indices), its d and its min m
 * (0 where the format has none). */
template <tsr_type T> struct q32_block_neon {
    using block = std::conditional_t<T == TSR_TYPE_Q4_1, tsr_block_q4_1,
                  std::conditional_t<T == TSR_TYPE_Q5_0, tsr_block_q5_0,
                  std::conditional_t<T == TSR_TYPE_Q5_1, tsr_block_q5_1, tsr_block_iq4_nl>>>;
    uint8x16_t lo, hi;
    float d, m = 0.0f;
    explicit q32_block_neon(const block & x) {
        const uint8x16_t v = vld1q_u8(x.qs);
        lo = vandq_u8(v, vdupq_n_u8(0x0F));
        hi = vshrq_n_u8(v, 4);
        if constexpr (T == TSR_TYPE_Q5_0 || T == TSR_TYPE_Q5_1) {
            uint8x16_t l5, h5;
            fifth_bits_neon(x.qh, &l5, &h5);
            lo = vorrq_u8(lo, l5);
            hi = vorrq_u8(hi, h5);
        }
        if constexpr (T == TSR_TYPE_Q4_1 || T == TSR_TYPE_Q5_1) m = h2f(x.m);
        d = h2f(x.d);
    }
};

template <tsr_type T>
static float dot_q32_yq8_neon(int64_t n, const void * vx, const yq8 * y) {
    using B = q32_block_neon<T>;
    const int8x16_t table = vld1q_s8(tsr_impl::iq4nl_values);
    float s = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        const B x(((const typename B::block *)vx)[b]);
        const int8x16_t y0 = vld1q_s8(y[b].qs), y1 = vld1q_s8(y[b].qs + 16);
        int32_t acc;
        if constexpr (T == TSR_TYPE_IQ4_NL) {
            /* table values up to 127 in magnitude: two products per int16 lane */
            acc = vaddvq_s32(vaddq_s32(dot16_lanes_neon(vqtbl1q_s8(table, x.lo), y0), dot16_lanes_neon(vqtbl1q_s8(table, x.hi), y1)));
        } else {
            acc = vaddvq_s32(nibble_dot_neon(vreinterpretq_s8_u8(x.lo), vreinterpretq_s8_u8(x.hi), y0, y1));
        }
        if (T == TSR_TYPE_Q5_0) acc -= 16 * y[b].sum;
        s += x.d * y[b].d * (float)acc + x.m * y[b].d * (float)y[b].sum;
    }
    return s;
}

static constexpr kernels kernels_neon = [] {
    kernels k{};
    k.isa = TSR_CPU_ISA_NEON;
    k.dot_f32 = dot_f32_neon;
    k.dot_f16 = dot_f16_neon;
    k.dot_bf16 = dot_bf16_neon;
    k.dot_q8_0 = dot_q8_0_neon;
    k.dot_q4_0 = dot_q4_0_neon;
    k.dot4[SLOT_F32] = dot4_neon<0>;
    k.dot4[SLOT_F16] = dot4_neon<1>;
    k.dot4[SLOT_BF16] = dot4_neon<2>;
    k.dot4[SLOT_Q8_0] = dot4_q8_0_neon;
    k.dot4[SLOT_Q4_0] = dot4_q4_0_neon;
    k.dot_q8k[KSLOT_Q2_K] = dot_q2_K_q8_K_neon;
    k.dot_q8k[KSLOT_Q3_K] = dot_q3_K_q8_K_neon;
    k.dot_q8k[KSLOT_Q4_K] = dot_q4_K_q8_K_neon;
    k.dot_q8k[KSLOT_Q5_K] = dot_q5_K_q8_K_neon;
    k.dot_q8k[KSLOT_Q6_K] = dot_q6_K_q8_K_neon;
    k.dot4_q8k[KSLOT_Q2_K] = dot4_q2_K_q8_K_neon;
    k.dot4_q8k[KSLOT_Q3_K] = dot4_q3_K_q8_K_neon;
    k.dot4_q8k[KSLOT_Q4_K] = dot4_q4_K_q8_K_neon;
    k.dot4_q8k[KSLOT_Q5_K] = dot4_q5_K_q8_K_neon;
    k.dot4_q8k[KSLOT_Q6_K] = dot4_q6_K_q8_K_neon;
    k.dot_yq8[QSLOT_Q4_1] = dot_q32_yq8_neon<TSR_TYPE_Q4_1>;
    k.dot_yq8[QSLOT_Q5_0] = dot_q32_yq8_neon<TSR_TYPE_Q5_0>;
    k.dot_yq8[QSLOT_Q5_1] = dot_q32_yq8_neon<TSR_TYPE_Q5_1>;
    k.dot_yq8[QSLOT_IQ4_NL] = dot_q32_yq8_neon<TSR_TYPE_IQ4_NL>;
    k.quantize_q8k = quantize_q8k_neon;
    k.quantize_y = quantize_y_neon;
    k.axpy_f32 = axpy_f32_neon;
    k.f16_to_f32 = f16_to_f32_neon;
    k.f32_to_f16 = f32_to_f16_scalar;
    k.gemm[SLOT_F32] = &gemm_f32_neon;
    k.gemm[SLOT_F16] = &gemm_f16_neon;
    k.gemm[SLOT_BF16] = &gemm_bf16_neon;
    k.gemm[SLOT_Q8_0] = &gemm_q8_0_neon;
    k.gemm[SLOT_Q4_0] = &gemm_q4_0_neon;
    packed_gemms<gemm_q8_0_neon, gemm_min_neon, gemm_halves_neon, portable_packers<4, pack_panel_s8_a<4, TSR_TYPE_Q8_0>, quantize_y_neon>::of>::fill(k);
    k.act = &act_table_neon;
    return k;
}();

} // namespace tcpu
} // namespace
#endif /* TSR_CPU_ARM64 */
