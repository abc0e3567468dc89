/* quants.inl - Q4_1, Q5_0, Q5_1, IQ4_NL and the K-quants (Q2_K..Q6_K, Q8_K): ggml's
 * layouts, dequantization in ggml's order of float operations (the formats are defined
 * by ggml's dequantize_row_*, so files decode to the same floats), and quantizers after
 * ggml's published reference algorithms. */

TSR_IMPL_NS_BEGIN

static_assert(sizeof(tsr_block_q4_1) == 20, "q4_1 block layout");
static_assert(sizeof(tsr_block_q5_0) == 22, "q5_0 block layout");
static_assert(sizeof(tsr_block_q5_1) == 24, "q5_1 block layout");
static_assert(sizeof(tsr_block_iq4_nl) == 18, "iq4_nl block layout");
static_assert(sizeof(tsr_block_q2_K) == 84, "q2_K block layout");
static_assert(sizeof(tsr_block_q3_K) == 110, "q3_K block layout");
static_assert(sizeof(tsr_block_q4_K) == 144, "q4_K block layout");
static_assert(sizeof(tsr_block_q5_K) == 176, "q5_K block layout");
static_assert(sizeof(tsr_block_q6_K) == 210, "q6_K block layout");
static_assert(sizeof(tsr_block_q8_K) == 292, "q8_K block layout");

static constexpr int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* ---- shared pieces ------------------------------------------------------------------- */

/* Round to nearest (ties to even) through the float adder, as ggml's quantizers do: the
 * same rounding as theirs, and no undefined float-to-int conversion for NaN input. */
static inline int nearest_int(float v) {
    const float biased = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &biased, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* floor(v) clamped to [lo, hi], clamped as a float first: a NaN or an infinity (a block
 * holding one) would make the float-to-int conversion undefined. NaN gives lo. */
static inline int floor_clamped(float v, int lo, int hi) {
    if (!(v >= (float)lo)) return lo;
    if (v > (float)hi) return hi;
    return (int)std::floor(v);
}

/* The 5-bit (or, with qh = 0, 4-bit) values of a 32-element block. */
static inline void unpack_q32(const uint8_t * qs, uint32_t qh, int * q) {
    for (int j = 0; j < 16; j++) {
        q[j]      = (qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
        q[j + 16] = (qs[j] >> 4)   | (int)(((qh >> (j + 16)) & 1u) << 4);
    }
}

/* The inverse: low nibbles into qs, fifth bits into *qh (when qh is not NULL). */
static inline void pack_q32(const int * q, uint8_t * qs, uint32_t * qh) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
        h |= (uint32_t)((q[j] >> 4) & 1) << j;
        h |= (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
    }
    if (qh) *qh = h;
}

static inline uint32_t load_u32(const uint8_t * p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline void     store_u32(uint8_t * p, uint32_t v) { memcpy(p, &v, 4); }

/* The value of largest magnitude, with its sign (0 for an all-zero block). */
static inline float signed_amax(const float * x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < std::fabs(x[j])) { amax = std::fabs(x[j]); max = x[j]; }
    }
    return max;
}

static inline void min_max(const float * x, int n, float * mn, float * mx) {
    float lo = std::numeric_limits<float>::max(), hi = -std::numeric_limits<float>::max();
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

/* Scale j (0..7) and min j of a Q4_K/Q5_K block: 6 bits each in 12 bytes. */
static inline void k4_scale_min(int j, const uint8_t * s, int * sc, int * mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static inline void k4_set_scale_min(int j, int sc, int mn, uint8_t * s) {
    if (j < 4) {
        s[j] = (uint8_t)sc;
        s[j + 4] = (uint8_t)mn;
    } else {
        s[j + 4] = (uint8_t)((sc & 0x0f) | ((mn & 0x0f) << 4));
        s[j - 4] |= (uint8_t)((sc >> 4) << 6);
        s[j] |= (uint8_t)((mn >> 4) << 6);
    }
}

/* Scale j (0..15) of a Q3_K block, -32..31: 4 low bits, then 2 high bits in bytes 8..11. */
static inline int q3k_scale(int j, const uint8_t * s) {
    const int lo = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

static inline void q3k_set_scale(int j, int biased, uint8_t * s) {
    if (j < 8) s[j] |= (uint8_t)(biased & 0x0f);
    else       s[j - 8] |= (uint8_t)((biased & 0x0f) << 4);
    s[8 + j % 4] |= (uint8_t)((biased >> 4) << (2 * (j / 4)));
}

/* 2-bit values of a 256-element super-block: element 128h + 32s + l at bits 2s of
 * qs[32h + l] (Q2_K and the low bits of Q3_K). */
static inline int q2_value(const uint8_t * qs, int e) {
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

static inline void pack_q2(const uint8_t * L, uint8_t * qs) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t * b = L + 128 * h + l;
            qs[32 * h + l] = (uint8_t)(b[0] | (b[32] << 2) | (b[64] << 4) | (b[96] << 6));
        }
}

/* ---- 32-element blocks: dequantization ------------------------------------------------- */

/* Q4_1 and Q5_1 (x = d * q + m) differ only in Q5_1's fifth bits. */
static inline uint32_t fifth_bits(const tsr_block_q4_1 &) { return 0; }
static inline uint32_t fifth_bits(const tsr_block_q5_1 & b) { return load_u32(b.qh); }
static inline void set_fifth_bits(tsr_block_q4_1 &, uint32_t) {}
static inline void set_fifth_bits(tsr_block_q5_1 & b, uint32_t qh) { store_u32(b.qh, qh); }

template <typename B> static void dequantize_row_min32(const B * x, float * y, int64_t n) {
    int q[32];
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = tsr_fp16_to_fp32(x[i].d), m = tsr_fp16_to_fp32(x[i].m);
        unpack_q32(x[i].qs, fifth_bits(x[i]), q);
        for (int j = 0; j < 32; j++) y[j] = (float)q[j] * d + m;
    }
}

static void dequantize_row_q4_1(const tsr_block_q4_1 * x, float * y, int64_t n) { dequantize_row_min32(x, y, n); }
static void dequantize_row_q5_1(const tsr_block_q5_1 * x, float * y, int64_t n) { dequantize_row_min32(x, y, n); }

static void dequantize_row_q5_0(const tsr_block_q5_0 * x, float * y, int64_t n) {
    int q[32];
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = tsr_fp16_to_fp32(x[i].d);
        unpack_q32(x[i].qs, load_u32(x[i].qh), q);
        for (int j = 0; j < 32; j++) y[j] = (float)(q[j] - 16) * d;
    }
}

static void dequantize_row_iq4_nl(const tsr_block_iq4_nl * x, float * y, int64_t n) {
    int q[32];
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = tsr_fp16_to_fp32(x[i].d);
        unpack_q32(x[i].qs, 0, q);
        for (int j = 0; j < 32; j++) y[j] = d * (float)iq4nl_values[q[j]];
    }
}

/* ---- 32-element blocks: quantization (ggml's reference rounding) ---------------------- */

/* Q4_1 / Q5_1: levels 0..nmax from the block's min to its max (ggml rounds half up). */
template <typename B> static void quantize_row_min32(const float * x, B * y, int64_t n, int nmax) {
    int q[32];
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float mn, mx;
        min_max(x, 32, &mn, &mx);
        const float d = (mx - mn) / (float)nmax;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tsr_fp32_to_fp16(d);
        y[i].m = tsr_fp32_to_fp16(mn);
        for (int j = 0; j < 32; j++) q[j] = floor_clamped((x[j] - mn) * id + 0.5f, 0, nmax);
        uint32_t qh;
        pack_q32(q, y[i].qs, &qh);
        set_fifth_bits(y[i], qh);
    }
}

static void quantize_row_q4_1(const float * x, tsr_block_q4_1 * y, int64_t n) { quantize_row_min32(x, y, n, 15); }
static void quantize_row_q5_1(const float * x, tsr_block_q5_1 * y, int64_t n) { quantize_row_min32(x, y, n, 31); }

static void quantize_row_q5_0(const float * x, tsr_block_q5_0 * y, int64_t n) {
    int q[32];
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        const float d = signed_amax(x, 32) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tsr_fp32_to_fp16(d);
        /* ggml truncates x/d + 16.5 (never negative here): rounding half up, not to even */
        for (int j = 0; j < 32; j++) q[j] = floor_clamped(x[j] * id + 16.5f, 0, 31);
        uint32_t qh;
        pack_q32(q, y[i].qs, &qh);
        store_u32(y[i].qh, qh);
    }
}

/* Index of the table value nearest to v, ties to the higher one: ggml's best_index_int8 (a
 * binary search between the ends, then v - lo < hi - v picks lo) as the count of midpoints at
 * or below v. The table's values are integers and its midpoints integers or halves, all exact in
 * float, and the search's two differences are exact wherever they come close (every
 * midpoint is at least 4.5 from 0, no half-gap exceeds 12), so the two agree on every
 * float: checked over all floats of magnitude up to 140 (beyond, both clamp) and NaN
 * (15). The count comes from the integer part (at most one midpoint per unit interval: the
 * values are more than 1 apart) and one comparison: tsr_quantize_chunk's IQ4_NL, which
 * calls it 16 times an element, 18 -> 57-59 MB/s of F32 (cpu_bench, one thread, 2-core Zen 4
 * VM), where the branchy search mispredicted; the same bytes (a hash of 2M elements). */
struct iq4nl_midpoints {
    float mid[16];       /* mid[k]: between values k and k + 1; mid[15] past everything */
    uint8_t below[240];  /* below[f + 127]: how many midpoints are <= f, for f in [-127, 112] */
    constexpr iq4nl_midpoints() : mid{}, below{} {
        for (int k = 0; k < 15; ++k) mid[k] = (float)(iq4nl_values[k] + iq4nl_values[k + 1]) / 2.0f;
        mid[15] = 1e30f;
        for (int f = -127; f < 113; ++f) {
            int c = 0;
            for (int k = 0; k < 15; ++k) c += (float)f >= mid[k];
            below[f + 127] = (uint8_t)c;
        }
    }
};
static constexpr iq4nl_midpoints iq4nl_mid{};
static inline int iq4nl_index(float v) {
    if (!(v < iq4nl_values[15])) return 15;  /* NaN too, as the search */
    if (v <= iq4nl_values[0]) return 0;
    const int i = iq4nl_mid.below[(int)std::floor(v) + 127];
    return i + (v >= iq4nl_mid.mid[i]);
}

/* sum w*q*x and sum w*q*q of a block quantized with inverse scale id. */
static inline void iq4nl_fit(const float * x, const float * w, float id, float * sqx, float * sq2) {
    float a = 0.0f, b = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float q = iq4nl_values[iq4nl_index(id * x[j])];
        a += w[j] * q * x[j];
        b += w[j] * q * q;
    }
    *sqx = a;
    *sq2 = b;
}

/* ggml's IQ4_NL search: start from the scale that maps the largest value onto the table's
 * end, then try 15 nearby inverse scales and keep the best weighted least-squares fit. */
static void quantize_row_iq4_nl(const float * x, tsr_block_iq4_nl * y, int64_t n) {
    const int ntry = 7;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float w[32];
        for (int j = 0; j < 32; j++) w[j] = x[j] * x[j];
        const float max = signed_amax(x, 32);
        int q[32];
        float d = 0.0f;
        if (std::fabs(max) < 1e-15f) {
            for (int j = 0; j < 32; j++) q[j] = iq4nl_index(0.0f);  /* ggml's bytes for a zero block */
        } else {
            float sqx, sq2;
            iq4nl_fit(x, w, 1.0f / (-max / iq4nl_values[0]), &sqx, &sq2);
            d = sq2 > 0 ? sqx / sq2 : 0.0f;
            float best = d * sqx;
            for (int t = -ntry; t <= ntry; t++) {
                iq4nl_fit(x, w, ((float)t + iq4nl_values[0]) / max, &sqx, &sq2);
                if (sq2 > 0 && sqx * sqx > best * sq2) {
                    d = sqx / sq2;
                    best = d * sqx;
                }
            }
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int j = 0; j < 32; j++) q[j] = iq4nl_index(id * x[j]);
        }
        y[i].d = tsr_fp32_to_fp16(d);
        pack_q32(q, y[i].qs, nullptr);
    }
}

/* ---- K-quants: dequantization ---------------------------------------------------------- */

static void dequantize_row_q2_K(const tsr_block_q2_K * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, y += TSR_QK_K) {
        const float d = tsr_fp16_to_fp32(x[i].d), dmin = tsr_fp16_to_fp32(x[i].dmin);
        for (int s = 0; s < 16; s++) {
            const uint8_t sc = x[i].scales[s];
            const float dl = d * (float)(sc & 0x0f), ml = dmin * (float)(sc >> 4);
            for (int l = 0; l < 16; l++) y[16 * s + l] = dl * (float)q2_value(x[i].qs, 16 * s + l) - ml;
        }
    }
}

static void dequantize_row_q3_K(const tsr_block_q3_K * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, y += TSR_QK_K) {
        const float d = tsr_fp16_to_fp32(x[i].d);
        for (int s = 0; s < 16; s++) {
            const float dl = d * (float)q3k_scale(s, x[i].scales);
            for (int l = 0; l < 16; l++) {
                const int e = 16 * s + l;
                /* the high bit of element e: bit e / 32 of hmask[e % 32]; clear means minus 4 */
                const bool high = (x[i].hmask[e % 32] >> (e / 32)) & 1;
                y[e] = dl * (float)(q2_value(x[i].qs, e) - (high ? 0 : 4));
            }
        }
    }
}

/* Q4_K and Q5_K: 8 sub-blocks of 32; sub-block 2c in the low nibbles of qs[32c..], 2c+1
 * in the high ones; Q5_K's fifth bit of element l of sub-block s is bit s of qh[l]. */
static void dequantize_k4(const uint8_t * scales, const uint8_t * qs, const uint8_t * qh,
                          float d, float dmin, float * y) {
    for (int s = 0; s < 8; s++) {
        int sc, mn;
        k4_scale_min(s, scales, &sc, &mn);
        const float ds = d * (float)sc, ms = dmin * (float)mn;
        const uint8_t * q = qs + 32 * (s / 2);
        for (int l = 0; l < 32; l++) {
            int v = (s % 2) ? (q[l] >> 4) : (q[l] & 0x0f);
            if (qh && ((qh[l] >> s) & 1)) v += 16;
            y[32 * s + l] = ds * (float)v - ms;
        }
    }
}

static void dequantize_row_q4_K(const tsr_block_q4_K * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++)
        dequantize_k4(x[i].scales, x[i].qs, nullptr, tsr_fp16_to_fp32(x[i].d), tsr_fp16_to_fp32(x[i].dmin), y + i * TSR_QK_K);
}

static void dequantize_row_q5_K(const tsr_block_q5_K * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++)
        dequantize_k4(x[i].scales, x[i].qs, x[i].qh, tsr_fp16_to_fp32(x[i].d), tsr_fp16_to_fp32(x[i].dmin), y + i * TSR_QK_K);
}

/* Q6_K: element 128h + 32k + l: low 4 bits in nibble k/2 of ql[64h + 32(k%2) + l], high 2
 * bits at bits 2k of qh[32h + l]; scale 8h + 2k + l/16; x = d * scale * (q - 32). */
static inline int q6k_value(const tsr_block_q6_K & b, int e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const int lo = (b.ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0x0f;
    const int hi = (b.qh[32 * h + l] >> (2 * k)) & 3;
    return (lo | (hi << 4)) - 32;
}

static void dequantize_row_q6_K(const tsr_block_q6_K * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, y += TSR_QK_K) {
        const float d = tsr_fp16_to_fp32(x[i].d);
        for (int e = 0; e < TSR_QK_K; e++)
            y[e] = d * (float)x[i].scales[e / 16] * (float)q6k_value(x[i], e);
    }
}

static void dequantize_row_q8_K(const tsr_block_q8_K * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, y += TSR_QK_K)
        for (int j = 0; j < TSR_QK_K; j++) y[j] = x[i].d * (float)x[i].qs[j];
}

/* ---- K-quants: the scale searches (ggml's make_qx_quants / make_q3_quants /
 * make_qkx2_quants) ---------------------------------------------------------------------- */

/* Symmetric levels -nmax..nmax-1 with weights x^2: the least-squares scale over 19
 * candidate inverse scales around nmax / max. L gets the levels plus nmax. */
static float make_qx_quants(int n, int nmax, const float * x, int8_t * L) {
    const float max = signed_amax(x, n);
    if (std::fabs(max) < 1e-15f) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    auto fit = [&](float iscale, float * slx, float * sl2, bool store) {
        float a = 0.0f, b = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            if (store) L[i] = (int8_t)(l + nmax);
            const float w = x[i] * x[i];
            a += w * x[i] * (float)l;
            b += w * (float)(l * l);
        }
        *slx = a;
        *sl2 = b;
    };
    float sumlx, suml2;
    fit(-(float)nmax / max, &sumlx, &suml2, true);
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        const float iscale = -((float)nmax + 0.1f * (float)is) / max;
        fit(iscale, &sumlx, &suml2, false);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            fit(iscale, &sumlx, &suml2, true);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's search: levels -nmax..nmax-1, then up to 5 passes moving single levels while the
 * weighted fit improves. L gets the levels plus nmax. */
static float make_q3_quants(int n, int nmax, const float * x, int8_t * L) {
    const float max = signed_amax(x, n);
    if (std::fabs(max) < 1e-15f) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    const float iscale = -(float)nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)(l * l);
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx <= 0) continue;
            float sl2 = suml2 - w * (float)(L[i] * L[i]);
            const int nl = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (nl == L[i]) continue;
            slx += w * x[i] * (float)nl;
            sl2 += w * (float)(nl * nl);
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                ++changed;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Weighted sums of a level assignment: sum w*l, sum w*l^2, sum w*l*x. */
struct level_sums {
    float l, l2, xl;
};

/* The scale searches try ~20 grids per sub-block, so these sums are most of a K-quant
 * quantizer's time: written over four-float vectors (GCC / clang vector extensions, SSE2
 * or NEON) because the auto-vectorizer, once n = 32 is unrolled, built the levels in
 * vectors but added each lane into its sum with scalar adds (1.4x slower for Q4_K). */
typedef float grid_f4 __attribute__((vector_size(16)));

static inline grid_f4 grid_splat(float v) {
    const grid_f4 zero = {0.0f, 0.0f, 0.0f, 0.0f};
    return zero + v;
}

/* The levels of four values xv on the grid min + k / iscale, k = 0..nmax (top: nmax in every
 * lane), as floats: rounded to nearest (ties to even) through the float adder as nearest_int,
 * and clamped in float (a NaN gives 0): no int conversions (SSE2 has no packed int32 min /
 * max). */
static inline grid_f4 grid_levels4(grid_f4 xv, grid_f4 iscale, grid_f4 min, grid_f4 top) {
    const grid_f4 zero = grid_splat(0.0f), magic = grid_splat(12582912.0f);
    grid_f4 r = (iscale * (xv - min) + magic) - magic;
    r = r >= zero ? r : zero;
    return r > top ? top : r;
}

/* The weighted sums of the grid's levels (n a multiple of 4): four partial sums per
 * quantity, element i in lane i % 4, added in lane order at the end; the levels themselves
 * are stored only for the winning grid. */
static inline level_sums grid_sums(int n, int nmax, const float * x, const float * w, float iscale, float min) {
    const grid_f4 vis = grid_splat(iscale), vmin = grid_splat(min), top = grid_splat((float)nmax);
    grid_f4 sl = grid_splat(0.0f), sl2 = sl, sxl = sl;
    for (int i = 0; i < n; i += 4) {
        grid_f4 xv, wv;
        memcpy(&xv, x + i, sizeof(xv));
        memcpy(&wv, w + i, sizeof(wv));
        const grid_f4 l = grid_levels4(xv, vis, vmin, top);
        const grid_f4 wl = wv * l;
        sl += wl;
        sl2 += wl * l;
        sxl += wl * xv;
    }
    level_sums s{0.0f, 0.0f, 0.0f};
    for (int k = 0; k < 4; k++) {
        s.l += sl[k];
        s.l2 += sl2[k];
        s.xl += sxl[k];
    }
    return s;
}

/* Weighted sums of the values themselves: sum w, sum w*x, sum w*x^2. */
struct value_sums {
    float w, x, xx;
};

/* sum w * (sc * l + mn - x)^2 expanded over the sums, so a candidate costs no second pass
 * over its levels (in double: the terms are far larger than the error they leave). */
static inline float squared_error(const value_sums & v, const level_sums & s, float sc, float mn) {
    const double e = (double)sc * sc * s.l2 + 2.0 * sc * mn * s.l - 2.0 * sc * s.xl + (double)mn * mn * v.w - 2.0 * mn * v.x + v.xx;
    return (float)e;
}

/* sum w * |sc * l + mn - x| over the grid's levels (n a multiple of 4). */
static float absolute_error(int n, int nmax, const float * x, const float * w, float iscale, float min, float sc, float mn) {
    const grid_f4 vis = grid_splat(iscale), vmin = grid_splat(min), top = grid_splat((float)nmax);
    const grid_f4 vsc = grid_splat(sc), vmn = grid_splat(mn);
    float e = 0.0f;
    for (int i = 0; i < n; i += 4) {
        grid_f4 xv, wv;
        memcpy(&xv, x + i, sizeof(xv));
        memcpy(&wv, w + i, sizeof(wv));
        const grid_f4 d = vsc * grid_levels4(xv, vis, vmin, top) + vmn - xv;
        const grid_f4 t = wv * (d >= 0.0f ? d : -d);
        for (int k = 0; k < 4; k++) e += t[k];  /* in element order, one sum */
    }
    return e;
}

/* Asymmetric levels 0..nmax: x ~ scale * L - min. Tries nstep + 1 inverse scales and, for
 * each, the weighted least-squares scale and min; keeps the one of least error (absolute
 * error when use_mad). Returns the scale; *the_min gets min (>= 0). n: a multiple of 4. */
static float make_qkx2_quants(int n, int nmax, const float * x, const float * w, uint8_t * L, float * the_min,
                              float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    value_sums v{0.0f, 0.0f, 0.0f};
    for (int i = 0; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        v.w += w[i];
        v.x += w[i] * x[i];
        v.xx += w[i] * x[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -min;
        return 0.0f;
    }
    /* as ggml: each grid starts at the min of the best fit so far */
    const auto error_of = [&](float iscale, float gmin, const level_sums & s, float sc, float mn) {
        return use_mad ? absolute_error(n, nmax, x, w, iscale, gmin, sc, mn) : squared_error(v, s, sc, mn);
    };
    float best_iscale = (float)nmax / (max - min), best_grid_min = min;
    float scale = 1.0f / best_iscale;
    float best_error = error_of(best_iscale, min, grid_sums(n, nmax, x, w, best_iscale, min), scale, min);
    for (int is = 0; is <= nstep; is++) {
        const float iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min), grid_min = min;
        const level_sums s = grid_sums(n, nmax, x, w, iscale, grid_min);
        const float D = v.w * s.l2 - s.l * s.l;
        if (D <= 0) continue;
        float this_scale = (v.w * s.xl - v.x * s.l) / D;
        float this_min = (s.l2 * v.x - s.l * s.xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = s.xl / s.l2;
        }
        const float err = error_of(iscale, grid_min, s, this_scale, this_min);
        if (err < best_error) {
            best_iscale = iscale;
            best_grid_min = grid_min;
            best_error = err;
            scale = this_scale;
            min = this_min;
        }
    }
    const grid_f4 vis = grid_splat(best_iscale), vmin = grid_splat(best_grid_min), top = grid_splat((float)nmax);
    for (int i = 0; i < n; i += 4) {
        grid_f4 xv;
        memcpy(&xv, x + i, sizeof(xv));
        const grid_f4 l = grid_levels4(xv, vis, vmin, top);
        for (int k = 0; k < 4; k++) L[i + k] = (uint8_t)(int)l[k];
    }
    *the_min = -min;
    return scale;
}

/* ---- K-quants: quantization -------------------------------------------------------------- */

/* Sub-block scales and mins (nsub of them, non-negative) quantized to 'levels' steps of
 * the largest: returns the super-block factors d and dmin through *d / *dmin and the
 * integer scales / mins through ls / lm. */
static void quantize_scales(const float * scales, const float * mins, int nsub, int levels,
                            int * ls, int * lm, float * d, float * dmin) {
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < nsub; j++) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? (float)levels / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? (float)levels / max_min : 0.0f;
    for (int j = 0; j < nsub; j++) {
        ls[j] = std::min(levels, nearest_int(inv_scale * scales[j]));
        lm[j] = std::min(levels, nearest_int(inv_min * mins[j]));
    }
    *d = max_scale / (float)levels;
    *dmin = max_min / (float)levels;
}

/* Requantize sub-block values to 0..nmax with the stored (rounded) scale and min. */
static void requantize_asym(const float * x, int n, float d, float dm, int nmax, uint8_t * L) {
    if (d == 0.0f) return;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)clamp_int(nearest_int((x[i] + dm) / d), 0, nmax);
}

/* The 16 sub-blocks of 16 of a super-block fitted by 'fit' (symmetric levels); returns
 * the signed scale of largest magnitude. */
static float fit_sub_blocks(const float * x, float (*fit)(int, int, const float *, int8_t *), int nmax,
                            int8_t * L, float * scales) {
    float max_scale = 0.0f, amax = 0.0f;
    for (int j = 0; j < 16; j++) {
        scales[j] = fit(16, nmax, x + 16 * j, L + 16 * j);
        if (std::fabs(scales[j]) > amax) { amax = std::fabs(scales[j]); max_scale = scales[j]; }
    }
    return max_scale;
}

static void quantize_row_q2_K(const float * x, tsr_block_q2_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, x += TSR_QK_K) {
        uint8_t L[TSR_QK_K];
        float scales[16], mins[16], w[16];
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = std::fabs(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
        }
        int ls[16], lm[16];
        float d, dmin;
        quantize_scales(scales, mins, 16, 15, ls, lm, &d, &dmin);
        y[i].d = tsr_fp32_to_fp16(d);
        y[i].dmin = tsr_fp32_to_fp16(dmin);
        for (int j = 0; j < 16; j++) y[i].scales[j] = (uint8_t)(ls[j] | (lm[j] << 4));
        const float dq = tsr_fp16_to_fp32(y[i].d), mq = tsr_fp16_to_fp32(y[i].dmin);
        for (int j = 0; j < 16; j++)
            requantize_asym(x + 16 * j, 16, dq * (float)ls[j], mq * (float)lm[j], 3, L + 16 * j);
        pack_q2(L, y[i].qs);
    }
}

static void quantize_row_q3_K(const float * x, tsr_block_q3_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, x += TSR_QK_K) {
        int8_t L[TSR_QK_K];
        float scales[16];
        const float max_scale = fit_sub_blocks(x, make_q3_quants, 4, L, scales);
        memset(y[i].scales, 0, sizeof(y[i].scales));
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) q3k_set_scale(j, clamp_int(nearest_int(iscale * scales[j]), -32, 31) + 32, y[i].scales);
            y[i].d = tsr_fp32_to_fp16(1.0f / iscale);
        } else {
            y[i].d = tsr_fp32_to_fp16(0.0f);
        }
        const float dq = tsr_fp16_to_fp32(y[i].d);
        for (int j = 0; j < 16; j++) {
            const float d = dq * (float)q3k_scale(j, y[i].scales);
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; l++) L[16 * j + l] = (int8_t)(clamp_int(nearest_int(x[16 * j + l] / d), -4, 3) + 4);
        }
        /* bit 2 of element e goes to bit e / 32 of hmask[e % 32]; the low 2 bits to qs */
        memset(y[i].hmask, 0, sizeof(y[i].hmask));
        uint8_t low[TSR_QK_K];
        for (int e = 0; e < TSR_QK_K; e++) {
            if (L[e] > 3) y[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
            low[e] = (uint8_t)(L[e] & 3);
        }
        pack_q2(low, y[i].qs);
    }
}

/* Q4_K and Q5_K: 8 sub-blocks of 32 with levels 0..nmax, weights |x| + rms(x). */
static void quantize_k4_levels(const float * x, int nmax, float rmin, int nstep, uint8_t * scales12,
                               tsr_fp16_t * d16, tsr_fp16_t * dmin16, uint8_t * L) {
    float scales[8], mins[8], w[32];
    for (int j = 0; j < 8; j++) {
        const float * xs = x + 32 * j;
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float av_x = std::sqrt(sum_x2 / 32.0f);
        for (int l = 0; l < 32; l++) w[l] = av_x + std::fabs(xs[l]);
        scales[j] = make_qkx2_quants(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, false);
    }
    int ls[8], lm[8];
    float d, dmin;
    quantize_scales(scales, mins, 8, 63, ls, lm, &d, &dmin);
    memset(scales12, 0, TSR_K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) k4_set_scale_min(j, ls[j], lm[j], scales12);
    *d16 = tsr_fp32_to_fp16(d);
    *dmin16 = tsr_fp32_to_fp16(dmin);
    const float dq = tsr_fp16_to_fp32(*d16), mq = tsr_fp16_to_fp32(*dmin16);
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        k4_scale_min(j, scales12, &sc, &mn);
        requantize_asym(x + 32 * j, 32, dq * (float)sc, mq * (float)mn, nmax, L + 32 * j);
    }
}

static void quantize_row_q4_K(const float * x, tsr_block_q4_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, x += TSR_QK_K) {
        uint8_t L[TSR_QK_K];
        quantize_k4_levels(x, 15, -1.0f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) y[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

static void quantize_row_q5_K(const float * x, tsr_block_q5_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, x += TSR_QK_K) {
        uint8_t L[TSR_QK_K];
        quantize_k4_levels(x, 31, -0.5f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        memset(y[i].qh, 0, sizeof(y[i].qh));
        for (int s = 0; s < 8; s++)
            for (int l = 0; l < 32; l++) {
                const int v = L[32 * s + l];
                if (v > 15) y[i].qh[l] |= (uint8_t)(1u << s);
                uint8_t & q = y[i].qs[32 * (s / 2) + l];
                q = (s % 2) ? (uint8_t)(q | ((v & 0x0f) << 4)) : (uint8_t)(v & 0x0f);
            }
    }
}

static void quantize_row_q6_K(const float * x, tsr_block_q6_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, x += TSR_QK_K) {
        int8_t L[TSR_QK_K];
        float scales[16];
        const float max_scale = fit_sub_blocks(x, make_qx_quants, 32, L, scales);
        memset(&y[i], 0, sizeof(y[i]));
        if (std::fabs(max_scale) < 1e-15f) continue;
        const float iscale = -128.0f / max_scale;
        y[i].d = tsr_fp32_to_fp16(1.0f / iscale);
        for (int j = 0; j < 16; j++) y[i].scales[j] = (int8_t)std::min(127, nearest_int(iscale * scales[j]));
        const float dq = tsr_fp16_to_fp32(y[i].d);
        for (int j = 0; j < 16; j++) {
            const float d = dq * (float)y[i].scales[j];
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; l++) L[16 * j + l] = (int8_t)(clamp_int(nearest_int(x[16 * j + l] / d), -32, 31) + 32);
        }
        for (int e = 0; e < TSR_QK_K; e++) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            y[i].ql[64 * h + 32 * (k % 2) + l] |= (uint8_t)((L[e] & 0x0f) << (4 * (k / 2)));
            y[i].qh[32 * h + l] |= (uint8_t)((L[e] >> 4) << (2 * k));
        }
    }
}

static void quantize_row_q8_K(const float * x, tsr_block_q8_K * y, int64_t n) {
    for (int64_t i = 0; i < n / TSR_QK_K; i++, x += TSR_QK_K) {
        const float max = signed_amax(x, TSR_QK_K);
        memset(&y[i], 0, sizeof(y[i]));
        if (max == 0.0f) continue;
        const float iscale = -127.0f / max;
        for (int j = 0; j < TSR_QK_K; j++) {
            y[i].qs[j] = (int8_t)std::min(127, nearest_int(iscale * x[j]));
            y[i].bsums[j / 16] = (int16_t)(y[i].bsums[j / 16] + y[i].qs[j]);
        }
        y[i].d = 1.0f / iscale;
    }
}

TSR_IMPL_NS_END

/* ---- row conversions of every type (the public API) ----------------------------------- */

TSR_API_IMPL bool tsr_to_float_row(enum tsr_type type, const void * src, float * dst, int64_t n) {
    if (!tsr_impl::check_row("tsr_to_float_row", type, n)) return false;
    if (n == 0) return true; /* an empty row: src and dst may be NULL (memcpy may not get NULL) */
    if (!src || !dst) return tsr_set_error("tsr_to_float_row: NULL src or dst");
    switch (type) {
        case TSR_TYPE_F32:  memcpy(dst, src, (size_t)n * sizeof(float)); break;
        case TSR_TYPE_F16:  tsr_fp16_to_fp32_row((const tsr_fp16_t *)src, dst, n); break;
        case TSR_TYPE_BF16: tsr_bf16_to_fp32_row((const tsr_bf16_t *)src, dst, n); break;
        case TSR_TYPE_I32:
            for (int64_t i = 0; i < n; i++) dst[i] = (float)((const int32_t *)src)[i];
            break;
        case TSR_TYPE_Q8_0: tsr_impl::dequantize_row_q8_0((const tsr_block_q8_0 *)src, dst, n); break;
        case TSR_TYPE_Q4_0: tsr_impl::dequantize_row_q4_0((const tsr_block_q4_0 *)src, dst, n); break;
        case TSR_TYPE_Q4_1: tsr_impl::dequantize_row_q4_1((const tsr_block_q4_1 *)src, dst, n); break;
        case TSR_TYPE_Q5_0: tsr_impl::dequantize_row_q5_0((const tsr_block_q5_0 *)src, dst, n); break;
        case TSR_TYPE_Q5_1: tsr_impl::dequantize_row_q5_1((const tsr_block_q5_1 *)src, dst, n); break;
        case TSR_TYPE_Q2_K: tsr_impl::dequantize_row_q2_K((const tsr_block_q2_K *)src, dst, n); break;
        case TSR_TYPE_Q3_K: tsr_impl::dequantize_row_q3_K((const tsr_block_q3_K *)src, dst, n); break;
        case TSR_TYPE_Q4_K: tsr_impl::dequantize_row_q4_K((const tsr_block_q4_K *)src, dst, n); break;
        case TSR_TYPE_Q5_K: tsr_impl::dequantize_row_q5_K((const tsr_block_q5_K *)src, dst, n); break;
        case TSR_TYPE_Q6_K: tsr_impl::dequantize_row_q6_K((const tsr_block_q6_K *)src, dst, n); break;
        case TSR_TYPE_Q8_K: tsr_impl::dequantize_row_q8_K((const tsr_block_q8_K *)src, dst, n); break;
        case TSR_TYPE_IQ4_NL: tsr_impl::dequantize_row_iq4_nl((const tsr_block_iq4_nl *)src, dst, n); break;
        default: return tsr_set_error("tsr_to_float_row: unsupported type %s", tsr_type_name(type));
    }
    return true;
}

TSR_API_IMPL bool tsr_from_float_row(enum tsr_type type, const float * src, void * dst, int64_t n) {
    if (!tsr_impl::check_row("tsr_from_float_row", type, n)) return false;
    if (n == 0) return true; /* an empty row: src and dst may be NULL (memcpy may not get NULL) */
    if (!src || !dst) return tsr_set_error("tsr_from_float_row: NULL src or dst");
    switch (type) {
        case TSR_TYPE_F32:  memcpy(dst, src, (size_t)n * sizeof(float)); break;
        case TSR_TYPE_F16:  tsr_fp32_to_fp16_row(src, (tsr_fp16_t *)dst, n); break;
        case TSR_TYPE_BF16: tsr_fp32_to_bf16_row(src, (tsr_bf16_t *)dst, n); break;
        case TSR_TYPE_I32:
            for (int64_t i = 0; i < n; i++) ((int32_t *)dst)[i] = (int32_t)std::lround(src[i]);
            break;
        case TSR_TYPE_Q8_0: tsr_impl::quantize_row_q8_0(src, (tsr_block_q8_0 *)dst, n); break;
        case TSR_TYPE_Q4_0: tsr_impl::quantize_row_q4_0(src, (tsr_block_q4_0 *)dst, n); break;
        case TSR_TYPE_Q4_1: tsr_impl::quantize_row_q4_1(src, (tsr_block_q4_1 *)dst, n); break;
        case TSR_TYPE_Q5_0: tsr_impl::quantize_row_q5_0(src, (tsr_block_q5_0 *)dst, n); break;
        case TSR_TYPE_Q5_1: tsr_impl::quantize_row_q5_1(src, (tsr_block_q5_1 *)dst, n); break;
        case TSR_TYPE_Q2_K: tsr_impl::quantize_row_q2_K(src, (tsr_block_q2_K *)dst, n); break;
        case TSR_TYPE_Q3_K: tsr_impl::quantize_row_q3_K(src, (tsr_block_q3_K *)dst, n); break;
        case TSR_TYPE_Q4_K: tsr_impl::quantize_row_q4_K(src, (tsr_block_q4_K *)dst, n); break;
        case TSR_TYPE_Q5_K: tsr_impl::quantize_row_q5_K(src, (tsr_block_q5_K *)dst, n); break;
        case TSR_TYPE_Q6_K: tsr_impl::quantize_row_q6_K(src, (tsr_block_q6_K *)dst, n); break;
        case TSR_TYPE_Q8_K: tsr_impl::quantize_row_q8_K(src, (tsr_block_q8_K *)dst, n); break;
        case TSR_TYPE_IQ4_NL: tsr_impl::quantize_row_iq4_nl(src, (tsr_block_iq4_nl *)dst, n); break;
        default: return tsr_set_error("tsr_from_float_row: unsupported type %s", tsr_type_name(type));
    }
    return true;
}

TSR_API_IMPL size_t tsr_quantize_chunk(enum tsr_type type, const float * src, void * dst,
                                       int64_t start, int64_t nrows, int64_t n_per_row,
                                       const float * imatrix) {
    (void)imatrix;
    if (!tsr_impl::check_row("tsr_quantize_chunk", type, n_per_row)) return 0;
    if (type == TSR_TYPE_I32) {
        tsr_set_error("tsr_quantize_chunk: cannot quantize to i32");
        return 0;
    }
    if (n_per_row <= 0 || nrows < 0 || start < 0 || start % n_per_row != 0) {
        tsr_set_error("tsr_quantize_chunk: start %lld must be a multiple of n_per_row %lld (nrows %lld)",
                      (long long)start, (long long)n_per_row, (long long)nrows);
        return 0;
    }
    if (nrows > 0 && (!src || !dst)) {
        tsr_set_error("tsr_quantize_chunk: NULL src or dst");
        return 0;
    }
    const size_t row_size = tsr_row_size(type, n_per_row);
    const int64_t start_row = start / n_per_row;
    for (int64_t r = 0; r < nrows; r++) {
        tsr_from_float_row(type, src + start + r * n_per_row,
                           (char *)dst + (size_t)(start_row + r) * row_size, n_per_row);
    }
    return (size_t)nrows * row_size;
}
