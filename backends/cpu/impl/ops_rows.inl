/*
 * ops_rows.inl - the CPU ops that work a row at a time: normalization, the outer product,
 * get/set rows, masking and soft_max, RoPE, argsort (conventions: ops_elementwise.inl).
 */
namespace {
namespace tcpu {

/* ---- normalization ------------------------------------------------------------------------- */

/* One row of norm / rms_norm (x at stride xs bytes, y at ys), mean and variance in double,
 * summed in 8 partial sums: with CONTIG (both strides 4) the compiler keeps them in vector
 * registers (one chain of double adds ran at 4 cycles an element: 5 % of a GPT-2 prompt). */
template <bool CONTIG>
static void norm_row(const char * s, size_t ss, char * d, size_t ds, int64_t n, bool rms, float eps) {
    const auto x = [&](int64_t i) { return (double)*(const float *)(s + (size_t)i * (CONTIG ? 4 : ss)); };
    const auto sum8 = [](const double * v) { return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])); };
    double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    double mean = 0.0;
    int64_t i;
    if (!rms) {
        for (i = 0; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; ++j) part[j] += x(i + j);
        for (; i < n; ++i) part[0] += x(i);
        mean = sum8(part) / (double)n;
        for (double & v : part) v = 0.0;
    }
    for (i = 0; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) part[j] += (x(i + j) - mean) * (x(i + j) - mean);
    for (; i < n; ++i) part[0] += (x(i) - mean) * (x(i) - mean);
    const float scale = (float)(1.0 / std::sqrt(sum8(part) / (double)n + (double)eps));
    const float fmean = (float)mean;
    for (i = 0; i < n; ++i) *(float *)(d + (size_t)i * (CONTIG ? 4 : ds)) = (*(const float *)(s + (size_t)i * (CONTIG ? 4 : ss)) - fmean) * scale;
}

static void op_norm(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const float eps = tsr_get_op_params_f32(dst, 0);
    const bool rms = dst->op == TSR_OP_RMS_NORM;
    const int64_t ne0 = src->ne[0];
    const int64_t nr = tsr_nrows(dst);
    const size_t ss = src->nb[0], ds = dst->nb[0];
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * s = tptr(src, 0, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        if (ss == 4 && ds == 4) norm_row<true>(s, ss, d, ds, ne0, rms, eps);
        else norm_row<false>(s, ss, d, ds, ne0, rms, eps);
    }
}

static void op_group_norm(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int n_groups = tsr_get_op_params_i32(dst, 0);
    const float eps = tsr_get_op_params_f32(dst, 1);
    const int64_t C = src->ne[2];
    const int64_t cpg = (C + n_groups - 1) / n_groups;
    const int64_t nitems = (int64_t)n_groups * src->ne[3];
    int64_t r0, r1;
    split_rows(nitems, p.ith, p.nth, r0, r1);
    for (int64_t it = r0; it < r1; ++it) {
        const int64_t g = it % n_groups, i3 = it / n_groups;
        const int64_t c0 = g * cpg, c1 = std::min(C, c0 + cpg);
        if (c0 >= c1) continue;
        double sum = 0.0;
        int64_t cnt = 0;
        for (int64_t i2 = c0; i2 < c1; ++i2)
            for (int64_t i1 = 0; i1 < src->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < src->ne[0]; ++i0) { sum += *(const float *)tptr(src, i0, i1, i2, i3); ++cnt; }
        const double mean = sum / (double)cnt;
        double var = 0.0;
        for (int64_t i2 = c0; i2 < c1; ++i2)
            for (int64_t i1 = 0; i1 < src->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < src->ne[0]; ++i0) {
                    const double v = *(const float *)tptr(src, i0, i1, i2, i3) - mean;
                    var += v * v;
                }
        const float scale = (float)(1.0 / std::sqrt(var / (double)cnt + (double)eps));
        for (int64_t i2 = c0; i2 < c1; ++i2)
            for (int64_t i1 = 0; i1 < src->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < src->ne[0]; ++i0)
                    *(float *)tptr(dst, i0, i1, i2, i3) = (float)(*(const float *)tptr(src, i0, i1, i2, i3) - mean) * scale;
    }
}

/* ---- products ------------------------------------------------------------------------------ */

static void op_out_prod(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];  /* [M, K, A2, A3] */
    const tsr_tensor * b = dst->src[1];  /* [N, K, B2, B3] f32 */
    const int64_t M = a->ne[0], Kd = a->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    float * tmp = thread_floats(p, (size_t)M);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t n, i2, i3;
        row_index(dst, ir, n, i2, i3);
        float * d = (float *)tptr(dst, 0, n, i2, i3);
        for (int64_t m = 0; m < M; ++m) d[m] = 0.0f;
        for (int64_t k = 0; k < Kd; ++k) {
            const float bv = *(const float *)tptr(b, n, k, i2, i3);
            const char * arow = tptr(a, 0, k, i2 / r2, i3 / r3);
            if (row_contig(a)) row_to_f32(a->type, arow, tmp, M);
            else for (int64_t m = 0; m < M; ++m) tmp[m] = ld(a->type, arow + m * a->nb[0]);
            p.K->axpy_f32(M, bv, tmp, d);
        }
    }
}

/* ---- rows ---------------------------------------------------------------------------------- */

/* Row `row` of a CPU_REPACK matrix (repack.inl) as floats, a block at a time through the
 * file's layout, to d (element stride nb0 bytes). s: the row's place (the word layouts keep
 * the file's rows, in any tensor shape; the records are 2D). */
static void get_row_r8(const tsr_tensor * a, int64_t row, const char * s, char * d, size_t nb0) {
    const uint8_t * grp = (const uint8_t *)a->data + (size_t)(row / R8 * R8) * a->nb[1];
    const bool words = is_words_repacked(a);
    const int64_t bs = tsr_blck_size(a->type);
    for (int64_t b = 0; b < a->ne[0] / bs; ++b) {
        alignas(16) uint8_t blk[R8_MAX_BLOCK_BYTES];
        float v[TSR_QK_K];
        if (words) {
            const size_t bb = tsr_type_size(a->type);
            std::memcpy(blk, s + (size_t)b * bb, bb);
            words_blocks_in_place(a->type, blk, 1, false);
        } else {
            r8_row_to_file(a->type, grp, (int)(row % R8), b, 1, blk);
        }
        row_to_f32(a->type, (const char *)blk, v, bs);
        for (int64_t j = 0; j < bs; ++j) std::memcpy(d + (size_t)(b * bs + j) * nb0, &v[j], 4);
    }
}

static void op_get_rows(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    const bool a_r8 = is_r8_repacked(a);
    const int64_t nr = tsr_nrows(dst), ne0 = dst->ne[0];
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i10, i11, i12;
        row_index(dst, ir, i10, i11, i12);
        const int64_t row = *(const int32_t *)tptr(b, i10, i11, i12, 0);
        char * d = tptr(dst, 0, i10, i11, i12);
        if (row < 0 || row >= a->ne[1]) {  /* out of range: zeros (validated by no one at run time) */
            for (int64_t i = 0; i < ne0; ++i) std::memset(d + i * dst->nb[0], 0, dst->nb[0]);
            continue;
        }
        const char * s = tptr(a, 0, row, i11, i12);
        if (a_r8) {
            get_row_r8(a, row, s, d, dst->nb[0]);
        } else if (a->type == TSR_TYPE_I32) {
            for (int64_t i = 0; i < ne0; ++i) *(int32_t *)(d + i * dst->nb[0]) = *(const int32_t *)(s + i * a->nb[0]);
        } else if (row_contig(a) && dst->nb[0] == 4) {
            row_to_f32(a->type, s, (float *)d, ne0);
        } else {
            for (int64_t i = 0; i < ne0; ++i) *(float *)(d + i * dst->nb[0]) = ld(a->type, s + i * a->nb[0]);
        }
    }
}

static void op_set_rows(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * b = dst->src[0];  /* values f32 [n, k, A2, A3] */
    const tsr_tensor * c = dst->src[1];  /* indices I32 [k, C1, C2] */
    const int64_t ne0 = b->ne[0];
    float * tmp = thread_floats(p, (size_t)ne0);
    const int64_t nr = tsr_nrows(b);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i01, i02, i03;
        row_index(b, ir, i01, i02, i03);
        const int64_t row = *(const int32_t *)tptr(c, i01, i02 % c->ne[1], i03 % c->ne[2], 0);
        if (row < 0 || row >= dst->ne[1]) continue;
        const char * s = tptr(b, 0, i01, i02, i03);
        char * d = tptr(dst, 0, row, i02, i03);
        for (int64_t i = 0; i < ne0; ++i) tmp[i] = *(const float *)(s + i * b->nb[0]);
        if (dst->type == TSR_TYPE_F16 && row_contig(dst)) p.K->f32_to_f16(tmp, d, ne0);  /* the KV cache's rows */
        else if (tsr_is_quantized(dst->type) || row_contig(dst)) row_from_f32(dst->type, tmp, d, ne0);
        else for (int64_t i = 0; i < ne0; ++i) st(dst->type, d + i * dst->nb[0], tmp[i]);
    }
}

static void op_diag_mask_inf(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int n_past = tsr_get_op_params_i32(dst, 0);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * s = tptr(src, 0, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            const float v = *(const float *)(s + i0 * src->nb[0]);
            *(float *)(d + i0 * dst->nb[0]) = i0 > n_past + i1 ? -INFINITY : v;
        }
    }
}

/* ALiBi slope of head h (ggml). */
static inline float alibi_slope(float max_bias, int64_t h, int64_t n_head) {
    if (!(max_bias > 0.0f)) return 1.0f;
    const uint32_t n_head_log2 = 1u << (uint32_t)std::floor(std::log2((double)n_head));
    const float m0 = std::pow(2.0f, -(max_bias) / (float)n_head_log2);
    const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / (float)n_head_log2);
    return (uint32_t)h < n_head_log2 ? std::pow(m0, (float)(h + 1)) : std::pow(m1, (float)(2 * (h - n_head_log2) + 1));
}

/* The max of x[0, n) for the scalar path, NaN when any x is NaN (std::max drops a NaN). */
static float row_max_keep_nan(const float * x, int64_t n) {
    float mx = -INFINITY;
    bool nan = false;
    for (int64_t i = 0; i < n; ++i) {
        mx = std::max(mx, x[i]);
        nan |= x[i] != x[i];
    }
    return nan ? NAN : mx;
}

static void op_soft_max(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const tsr_tensor * mask = dst->src[1];
    const float scale = tsr_get_op_params_f32(dst, 0);
    const float max_bias = tsr_get_op_params_f32(dst, 1);
    const int64_t ne0 = src->ne[0];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const float slope = alibi_slope(max_bias, i2, src->ne[2]);
        const char * s = tptr(src, 0, i1, i2, i3);
        float * d = (float *)tptr(dst, 0, i1, i2, i3);
        const char * mrow = mask ? tptr(mask, 0, i1, i2 % mask->ne[2], i3 % mask->ne[3]) : nullptr;
        for (int64_t i = 0; i < ne0; ++i) {
            float v = *(const float *)(s + i * src->nb[0]) * scale;
            if (mrow) v += slope * ld(mask->type, mrow + i * mask->nb[0]);
            d[i] = v;
        }
        if (p.K->act) {
            p.K->act->soft_max(ne0, d);
            continue;
        }
        const float mx = row_max_keep_nan(d, ne0);
        if (soft_max_special_row(mx, ne0, d)) continue;
        double sum = 0.0;
        for (int64_t i = 0; i < ne0; ++i) {
            const float e = std::exp(d[i] - mx);
            d[i] = e;
            sum += e;
        }
        const float inv = (float)(1.0 / sum);   /* sum >= 1: the max's own term */
        for (int64_t i = 0; i < ne0; ++i) d[i] *= inv;
    }
}

/* ---- RoPE (ggml's rope with YaRN) --------------------------------------------------------- */

static inline float rope_yarn_ramp(float low, float high, int64_t i0) {
    const float y = ((float)(i0 / 2) - low) / std::max(0.001f, high - low);
    return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

static void rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]) {
    auto corr_dim = [&](float n_rot) {
        return (float)n_dims * std::log((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * std::log(freq_base));
    };
    const float start = std::floor(corr_dim(beta_fast));
    const float end = std::ceil(corr_dim(beta_slow));
    dims[0] = std::max(0.0f, start);
    dims[1] = std::min((float)(n_dims - 1), end);
}

/* ggml's rope_yarn: cos and sin of the angle theta_extrap (interpolated by freq_scale, ramped
 * back toward extrapolation by ext_factor in the YaRN band), each times mscale. */
static inline void rope_yarn(float theta_extrap, float freq_scale, const float corr[2], int64_t i0, float ext_factor, float mscale,
                             float * cos_sin) {
    const float theta_interp = freq_scale * theta_extrap;
    float th = theta_interp;
    if (ext_factor != 0.0f) {
        const float ramp_mix = rope_yarn_ramp(corr[0], corr[1], i0) * ext_factor;
        th = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0f + 0.1f * std::log(1.0f / freq_scale);
    }
    cos_sin[0] = std::cos(th) * mscale;
    cos_sin[1] = std::sin(th) * mscale;
}

static void op_rope(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const tsr_tensor * pos = dst->src[1];
    const tsr_tensor * ff = dst->src[2];
    const int n_dims = tsr_get_op_params_i32(dst, 1);
    const int mode = tsr_get_op_params_i32(dst, 2);
    const int n_ctx_orig = tsr_get_op_params_i32(dst, 4);
    const float freq_base = tsr_get_op_params_f32(dst, 5);
    const float freq_scale = tsr_get_op_params_f32(dst, 6);
    const float ext_factor = tsr_get_op_params_f32(dst, 7);
    const float attn_factor = tsr_get_op_params_f32(dst, 8);
    const float beta_fast = tsr_get_op_params_f32(dst, 9);
    const float beta_slow = tsr_get_op_params_f32(dst, 10);
    float corr[2];
    rope_yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow, corr);
    const float theta_scale = std::pow(freq_base, -2.0f / (float)n_dims);
    const bool neox = (mode & TSR_ROPE_TYPE_NEOX) != 0;
    float * cache = thread_floats(p, (size_t)n_dims);
    const int64_t ne0 = dst->ne[0];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    int64_t cached = -1;
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        if (cached != i2) {
            const float ppos = (float)*(const int32_t *)tptr(pos, i2, 0, 0, 0);
            float theta = ppos;
            for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
                const float f = ff ? *(const float *)tptr(ff, i0 / 2, 0, 0, 0) : 1.0f;
                rope_yarn(theta / f, freq_scale, corr, i0, ext_factor, attn_factor, cache + i0);
                theta *= theta_scale;
            }
            cached = i2;
        }
        const char * s = tptr(src, 0, i1, i2, i3);
        char * d = tptr(dst, 0, i1, i2, i3);
        const size_t ss = src->nb[0], ds = dst->nb[0];
        const enum tsr_type ts = src->type, td = dst->type;
        for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
            const int64_t ia = neox ? i0 / 2 : i0;
            const int64_t ib = neox ? i0 / 2 + n_dims / 2 : i0 + 1;
            const float c = cache[i0], sn = cache[i0 + 1];
            const float x0 = ld(ts, s + ia * ss), x1 = ld(ts, s + ib * ss);
            st(td, d + ia * ds, x0 * c - x1 * sn);
            st(td, d + ib * ds, x0 * sn + x1 * c);
        }
        for (int64_t i0 = n_dims; i0 < ne0; ++i0) st(td, d + i0 * ds, ld(ts, s + i0 * ss));
    }
}

/* ---- sorting ------------------------------------------------------------------------------ */

static void op_argsort(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const bool asc = tsr_get_op_params_i32(dst, 0) == TSR_SORT_ORDER_ASC;
    const int64_t ne0 = src->ne[0];
    int32_t * idx = (int32_t *)thread_floats(p, (size_t)ne0);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const char * s = tptr(src, 0, i1, i2, i3);
        const size_t ss = src->nb[0];
        for (int64_t i = 0; i < ne0; ++i) idx[i] = (int32_t)i;
        auto val = [&](int32_t i) { return *(const float *)(s + (size_t)i * ss); };
        /* NaN sorts as the largest value (as in PyTorch); without a rule for it the
         * comparison is no strict weak order and std::sort's result is undefined */
        auto before = [&](int32_t x, int32_t y) {
            const float a = asc ? val(x) : val(y), b = asc ? val(y) : val(x);
            if (a != a || b != b) return (b != b) != (a != a) ? b != b : x < y;
            return a < b || (a == b && x < y);
        };
        std::sort(idx, idx + ne0, before);
        char * d = tptr(dst, 0, i1, i2, i3);
        for (int64_t i = 0; i < ne0; ++i) *(int32_t *)(d + i * dst->nb[0]) = idx[i];
    }
}

} // namespace tcpu
} // namespace
