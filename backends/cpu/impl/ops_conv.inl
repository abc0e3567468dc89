/*
 * ops_conv.inl - the CPU ops on images: im2col, conv_2d (im2col + GEMM), pool_2d, upscale
 * (conventions: ops_elementwise.inl; fused attention: ops_attn.inl).
 */
namespace {
namespace tcpu {

/* ---- convolution and friends ---------------------------------------------------------------- */

struct conv_geom {
    int s0, s1, p0, p1, d0, d1;
    int64_t KW, KH, IC, IW, IH, OW, OH, N;
    bool is2d;
};

/* One im2col row (output pixel ow, oh of image n): IC*KH*KW values as F32. */
static inline void im2col_row(const tsr_tensor * in, const conv_geom & g, int64_t ow, int64_t oh, int64_t n, float * out) {
    for (int64_t ic = 0; ic < g.IC; ++ic)
        for (int64_t kh = 0; kh < g.KH; ++kh) {
            const int64_t ih = oh * g.s1 + kh * g.d1 - g.p1;
            for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t iw = ow * g.s0 + kw * g.d0 - g.p0;
                float v = 0.0f;
                if (ih >= 0 && ih < g.IH && iw >= 0 && iw < g.IW) {
                    const char * ptr = g.is2d ? tptr(in, iw, ih, ic, n) : tptr(in, iw, ic, n, 0);
                    v = ld(in->type, ptr);
                }
                out[(ic * g.KH + kh) * g.KW + kw] = v;
            }
        }
}

static conv_geom conv_geometry(const tsr_tensor * dst, bool is_2d) {
    const tsr_tensor * k = dst->src[0];
    const tsr_tensor * in = dst->src[1];
    conv_geom g;
    g.is2d = is_2d;
    g.s0 = tsr_get_op_params_i32(dst, 0); g.s1 = tsr_get_op_params_i32(dst, 1);
    g.p0 = tsr_get_op_params_i32(dst, 2); g.p1 = tsr_get_op_params_i32(dst, 3);
    g.d0 = tsr_get_op_params_i32(dst, 4); g.d1 = tsr_get_op_params_i32(dst, 5);
    if (is_2d) {
        g.KW = k->ne[0]; g.KH = k->ne[1]; g.IC = in->ne[2]; g.IW = in->ne[0]; g.IH = in->ne[1]; g.N = in->ne[3];
        g.OW = (g.IW + 2 * g.p0 - (int64_t)g.d0 * (g.KW - 1) - 1) / g.s0 + 1;
        g.OH = (g.IH + 2 * g.p1 - (int64_t)g.d1 * (g.KH - 1) - 1) / g.s1 + 1;
    } else {
        g.KW = k->ne[0]; g.KH = 1; g.IC = in->ne[1]; g.IW = in->ne[0]; g.IH = 1; g.N = in->ne[2];
        g.OW = (g.IW + 2 * g.p0 - (int64_t)g.d0 * (g.KW - 1) - 1) / g.s0 + 1;
        g.OH = 1;
        g.p1 = 0;
    }
    return g;
}

static void op_im2col(const cparams & p, tsr_tensor * dst) {
    const bool is_2d = tsr_get_op_params_i32(dst, 6) != 0;
    const conv_geom g = conv_geometry(dst, is_2d);
    const tsr_tensor * in = dst->src[1];
    const int64_t Kd = g.IC * g.KH * g.KW;
    if (Kd == 0) return;  /* empty rows: nothing to write, and im2col_row would still walk IC or KH */
    float * tmp = thread_floats(p, (size_t)Kd);
    const int64_t nr = g.OW * g.OH * g.N;
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        const int64_t ow = ir % g.OW, oh = (ir / g.OW) % g.OH, n = ir / (g.OW * g.OH);
        im2col_row(in, g, ow, oh, n, tmp);
        char * d = is_2d ? tptr(dst, 0, ow, oh, n) : tptr(dst, 0, ow, n, 0);
        for (int64_t i = 0; i < Kd; ++i) st(dst->type, d + i * dst->nb[0], tmp[i]);
    }
}

struct conv_plan {
    conv_geom g;
    int64_t Kd, P;
    bool kconv;
    const gemm_impl * gi;
    size_t cols_bytes, kern_bytes, thread_bytes;
};

static conv_plan conv_make_plan(const tsr_tensor * dst, const kernels * K) {
    conv_plan c;
    c.g = conv_geometry(dst, true);
    c.Kd = c.g.IC * c.g.KH * c.g.KW;
    c.P = c.g.OW * c.g.OH;
    const tsr_tensor * k = dst->src[0];
    c.kconv = !(k->type == TSR_TYPE_F32 && tsr_is_contiguous(k));
    const int64_t OC = k->ne[3];
    c.gi = OC >= GEMM_MIN_N ? K->gemm[SLOT_F32] : nullptr;
    c.cols_bytes = align_up((size_t)(c.P * c.Kd) * 4, 64);
    c.kern_bytes = c.kconv ? align_up((size_t)(OC * c.Kd) * 4, 64) : 0;
    c.thread_bytes = gemm_thread_bytes(c.gi, OC);
    return c;
}

static void op_conv_2d(const cparams & p, tsr_tensor * dst) {
    const conv_plan c = conv_make_plan(dst, p.K);
    if (c.Kd == 0) {  /* an empty kernel (KW, KH or IC 0) sums nothing: zeros, without walking its other dims */
        if (p.ith == 0) std::memset(dst->data, 0, tsr_nbytes(dst));
        return;
    }
    const tsr_tensor * k = dst->src[0];
    const tsr_tensor * in = dst->src[1];
    const int64_t OC = k->ne[3];
    float * cols = (float *)p.wdata;
    float * kern = (float *)(p.wdata + c.cols_bytes);
    uint8_t * tw = p.wdata + c.cols_bytes + c.kern_bytes + c.thread_bytes * (size_t)p.ith;
    if (c.kconv) {
        int64_t r0, r1;
        split_rows(OC, p.ith, p.nth, r0, r1);
        for (int64_t oc = r0; oc < r1; ++oc)
            for (int64_t ic = 0; ic < c.g.IC; ++ic)
                for (int64_t kh = 0; kh < c.g.KH; ++kh)
                    for (int64_t kw = 0; kw < c.g.KW; ++kw)
                        kern[oc * c.Kd + (ic * c.g.KH + kh) * c.g.KW + kw] = ld(k->type, tptr(k, kw, kh, ic, oc));
    }
    for (int64_t n = 0; n < c.g.N; ++n) {
        int64_t r0, r1;
        split_rows(c.P, p.ith, p.nth, r0, r1);
        for (int64_t pi = r0; pi < r1; ++pi) im2col_row(in, c.g, pi % c.g.OW, pi / c.g.OW, n, cols + pi * c.Kd);
        barrier(p);
        mm_args a;
        a.ta = TSR_TYPE_F32;
        a.A = (const char *)cols; a.lda = (size_t)c.Kd * 4;
        a.B = c.kconv ? (const char *)kern : (const char *)k->data; a.ldb = (size_t)c.Kd * 4;
        a.M = c.P; a.N = OC; a.K = c.Kd;
        a.C = (float *)tptr(dst, 0, 0, 0, n);
        a.ldc = dst->nb[2] / 4;
        a.g = c.gi;
        mm_range_split(p, a, tw);
        barrier(p);
    }
}

static void op_pool_2d(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int op = tsr_get_op_params_i32(dst, 0);
    const int k0 = tsr_get_op_params_i32(dst, 1), k1 = tsr_get_op_params_i32(dst, 2);
    const int s0 = tsr_get_op_params_i32(dst, 3), s1 = tsr_get_op_params_i32(dst, 4);
    const int p0 = (int)tsr_get_op_params_f32(dst, 5), p1 = (int)tsr_get_op_params_f32(dst, 6);
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t oy, c, n;
        row_index(dst, ir, oy, c, n);
        float * d = (float *)tptr(dst, 0, oy, c, n);
        for (int64_t ox = 0; ox < dst->ne[0]; ++ox) {
            float out = op == TSR_OP_POOL_AVG ? 0.0f : -FLT_MAX;   /* -FLT_MAX: ggml's value for a window in the padding */
            const int64_t ix = ox * s0 - p0, iy = oy * s1 - p1;
            for (int ky = 0; ky < k1; ++ky) {
                if (iy + ky < 0 || iy + ky >= src->ne[1]) continue;
                for (int kx = 0; kx < k0; ++kx) {
                    if (ix + kx < 0 || ix + kx >= src->ne[0]) continue;
                    const float v = ld(src->type, tptr(src, ix + kx, iy + ky, c, n));
                    if (op == TSR_OP_POOL_AVG) out += v;
                    else if (v > out || v != v) out = v;   /* a NaN stays (PyTorch's max_pool2d) */
                }
            }
            if (op == TSR_OP_POOL_AVG) out /= (float)(k0 * k1);
            d[ox * (dst->nb[0] / 4)] = out;
        }
    }
}

static void op_upscale(const cparams & p, tsr_tensor * dst) {
    const tsr_tensor * src = dst->src[0];
    const int mode = tsr_get_op_params_i32(dst, 0);
    const float sf0 = (float)dst->ne[0] / (float)src->ne[0], sf1 = (float)dst->ne[1] / (float)src->ne[1];
    const float sf2 = (float)dst->ne[2] / (float)src->ne[2], sf3 = (float)dst->ne[3] / (float)src->ne[3];
    const int64_t nr = tsr_nrows(dst);
    int64_t r0, r1;
    split_rows(nr, p.ith, p.nth, r0, r1);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        row_index(dst, ir, i1, i2, i3);
        const int64_t i02 = std::min<int64_t>(src->ne[2] - 1, (int64_t)((float)i2 / sf2));
        const int64_t i03 = std::min<int64_t>(src->ne[3] - 1, (int64_t)((float)i3 / sf3));
        char * d = tptr(dst, 0, i1, i2, i3);
        if (mode == TSR_SCALE_MODE_NEAREST) {
            const int64_t i01 = std::min<int64_t>(src->ne[1] - 1, (int64_t)((float)i1 / sf1));
            for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
                const int64_t i00 = std::min<int64_t>(src->ne[0] - 1, (int64_t)((float)i0 / sf0));
                st(dst->type, d + i0 * dst->nb[0], ld(src->type, tptr(src, i00, i01, i02, i03)));
            }
        } else {
            const float pix = 0.5f;
            const float y = ((float)i1 + pix) / sf1 - pix;
            int64_t y0 = (int64_t)std::floor(y), y1 = y0 + 1;
            y0 = std::max<int64_t>(0, std::min<int64_t>(y0, src->ne[1] - 1));
            y1 = std::max<int64_t>(0, std::min<int64_t>(y1, src->ne[1] - 1));
            const float dy = std::max(0.0f, std::min(y - std::floor(y), 1.0f));
            for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
                const float x = ((float)i0 + pix) / sf0 - pix;
                int64_t x0 = (int64_t)std::floor(x), x1 = x0 + 1;
                x0 = std::max<int64_t>(0, std::min<int64_t>(x0, src->ne[0] - 1));
                x1 = std::max<int64_t>(0, std::min<int64_t>(x1, src->ne[0] - 1));
                const float dx = std::max(0.0f, std::min(x - std::floor(x), 1.0f));
                const float va = ld(src->type, tptr(src, x0, y0, i02, i03)), vb = ld(src->type, tptr(src, x1, y0, i02, i03));
                const float vc = ld(src->type, tptr(src, x0, y1, i02, i03)), vd = ld(src->type, tptr(src, x1, y1, i02, i03));
                const float v = va * (1 - dx) * (1 - dy) + vb * dx * (1 - dy) + vc * (1 - dx) * dy + vd * dx * dy;
                st(dst->type, d + i0 * dst->nb[0], v);
            }
        }
    }
}

} // namespace tcpu
} // namespace
