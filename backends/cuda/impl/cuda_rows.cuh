// tessera CUDA backend: row kernels (one thread block per row): norm, rms_norm, l2_norm,
// top_k, soft_max_ext, get_rows, set_rows, sum_rows / mean / sum, argmax.
//
// In-place contract: reductions finish (with a block barrier) before any element of the
// row is written, and each element is written by the thread that reads it, so a
// destination that exactly aliases the source is correct.
#pragma once

namespace tsr_cuda {
namespace {

inline int row_block_size(int64_t ne0) {
    if (ne0 <= 32) return 32;
    if (ne0 <= 256) return 128;
    if (ne0 <= 2048) return 256;
    return 1024;
}

inline unsigned row_grid(int64_t nrows) { return (unsigned) std::max<int64_t>(1, std::min<int64_t>(nrows, 0x7fffffffLL)); }

__device__ __forceinline__ void row_index(int64_t r, const tdesc & d, int64_t & i1, int64_t & i2, int64_t & i3) {
    i1 = r % d.ne[1]; r /= d.ne[1];
    i2 = r % d.ne[2];
    i3 = r / d.ne[2];
}

// ---- norm / rms_norm / l2_norm (issue 17 part A) ---------------------------------------

enum norm_kind { NORM_MEAN_VAR, NORM_RMS, NORM_L2 };

template <int KIND>
__global__ void k_norm(const char * src, tdesc ds, char * dst, tdesc dd, float eps) {
    __shared__ float sh[32];
    int64_t i1, i2, i3;
    row_index(blockIdx.x, ds, i1, i2, i3);
    const float * x = (const float *) (src + i1 * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3]);
    float * y = (float *) (dst + i1 * dd.nb[1] + i2 * dd.nb[2] + i3 * dd.nb[3]);
    const int n = (int) ds.ne[0];
    float mean = 0.0f;
    if (KIND == NORM_MEAN_VAR) {
        float s = 0.0f;
        for (int j = threadIdx.x; j < n; j += blockDim.x) s += x[j];
        mean = block_sum(s, sh) / n;
    }
    float s2 = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) { const float v = x[j] - mean; s2 += v * v; }
    float scale;
    if (KIND == NORM_L2) {   // 1 / max(|x|_2, eps), the max keeping a NaN norm (fmaxf would not), as the CPU
        const float nrm = sqrtf(block_sum(s2, sh));
        scale = 1.0f / (nrm < eps ? eps : nrm);
    } else {
        scale = rsqrtf(block_sum(s2, sh) / n + eps);
    }
    for (int j = threadIdx.x; j < n; j += blockDim.x) y[j] = (x[j] - mean) * scale;
}

bool op_norm(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const int64_t nrows = tsr_nrows(a);
    if (nrows == 0 || a->ne[0] == 0) return true;
    const float eps = tsr_get_op_params_f32(dst, 0);
    const int bs = row_block_size(a->ne[0]);
    const char * x = (const char *) a->data;
    char * y = (char *) dst->data;
    if (dst->op == TSR_OP_RMS_NORM) {
        k_norm<NORM_RMS><<<row_grid(nrows), bs, 0, c.stream>>>(x, make_desc(a), y, make_desc(dst), eps);
    } else if (dst->op == TSR_OP_L2_NORM) {
        k_norm<NORM_L2><<<row_grid(nrows), bs, 0, c.stream>>>(x, make_desc(a), y, make_desc(dst), eps);
    } else {
        k_norm<NORM_MEAN_VAR><<<row_grid(nrows), bs, 0, c.stream>>>(x, make_desc(a), y, make_desc(dst), eps);
    }
    return true;
}

// ---- top_k (issue 17 part A) -------------------------------------------------------------

constexpr int TOPK_BLOCK = 256;
constexpr uint32_t TOPK_NONE = 0xffffffffu;

// x (value vx at index ix) comes before y in argsort's descending order (ties by index, NaN
// largest); TOPK_NONE comes last
__device__ __forceinline__ bool topk_before(float vx, uint32_t ix, float vy, uint32_t iy) {
    if (iy == TOPK_NONE) return ix != TOPK_NONE;
    if (ix == TOPK_NONE) return false;
    const bool nx = isnan(vx), ny = isnan(vy);
    if (nx || ny) return nx != ny ? nx : ix < iy;
    return vx > vy || (vx == vy && ix < iy);
}

// One block per row; pick j is the best element ordered after pick j-1 (a total order, so
// nothing is picked twice): k block reductions, for the small k of sampling.
__global__ void k_top_k(const char * src, tdesc ds, char * dst, tdesc dd) {
    __shared__ float sv[TOPK_BLOCK];
    __shared__ uint32_t si[TOPK_BLOCK];
    int64_t i1, i2, i3;
    row_index(blockIdx.x, ds, i1, i2, i3);
    const char * x = src + i1 * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3];
    char * y = dst + i1 * dd.nb[1] + i2 * dd.nb[2] + i3 * dd.nb[3];
    const uint32_t n = (uint32_t) ds.ne[0], t = threadIdx.x;
    float pv = 0.0f;
    uint32_t pi = TOPK_NONE;
    for (int64_t j = 0; j < dd.ne[0]; ++j) {
        float bv = 0.0f;
        uint32_t bi = TOPK_NONE;
        for (uint32_t i = t; i < n; i += TOPK_BLOCK) {
            const float v = *(const float *) (x + i * ds.nb[0]);
            if ((pi == TOPK_NONE || topk_before(pv, pi, v, i)) && topk_before(v, i, bv, bi)) { bv = v; bi = i; }
        }
        sv[t] = bv;
        si[t] = bi;
        __syncthreads();
        for (uint32_t s = TOPK_BLOCK / 2; s > 0; s >>= 1) {
            if (t < s && topk_before(sv[t + s], si[t + s], sv[t], si[t])) { sv[t] = sv[t + s]; si[t] = si[t + s]; }
            __syncthreads();
        }
        pv = sv[0];
        pi = si[0];
        if (t == 0) *(int32_t *) (y + j * dd.nb[0]) = (int32_t) pi;
        __syncthreads();
    }
}

bool op_top_k(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const int64_t nrows = tsr_nrows(a);
    if (nrows == 0 || dst->ne[0] == 0) return true;
    k_top_k<<<row_grid(nrows), TOPK_BLOCK, 0, c.stream>>>((const char *) a->data, make_desc(a), (char *) dst->data, make_desc(dst));
    return true;
}

// ---- soft_max_ext ------------------------------------------------------------------------

// ALiBi: head h's slope for max_bias > 0 (1 otherwise), as the CPU's alibi_slope; soft_max_ext
// and flash_attn_ext (cuda_attn.cuh) take it.
struct alibi {
    float max_bias, m0, m1;
    int n_head_log2;
};

inline alibi make_alibi(float max_bias, int64_t n_head) {
    alibi a;
    a.max_bias = max_bias;
    a.n_head_log2 = n_head > 0 ? 1 << (int) floorf(log2f((float) n_head)) : 1;
    a.m0 = powf(2.0f, -max_bias / (float) a.n_head_log2);
    a.m1 = powf(2.0f, -(max_bias / 2.0f) / (float) a.n_head_log2);
    return a;
}

__device__ __forceinline__ float alibi_slope(const alibi & a, int h) {
    if (!(a.max_bias > 0.0f)) return 1.0f;
    return h < a.n_head_log2 ? powf(a.m0, (float) (h + 1)) : powf(a.m1, (float) (2 * (h - a.n_head_log2) + 1));
}

template <typename TM>
__global__ void k_soft_max(const char * src, tdesc ds, const char * mask, tdesc dm, char * dst, tdesc dd,
                           float scale, alibi ab) {
    __shared__ float sh[32];
    int64_t i1, i2, i3;
    row_index(blockIdx.x, ds, i1, i2, i3);
    const float * x = (const float *) (src + i1 * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3]);
    float * y = (float *) (dst + i1 * dd.nb[1] + i2 * dd.nb[2] + i3 * dd.nb[3]);
    const TM * m = mask ? (const TM *) (mask + (i1 % dm.ne[1]) * dm.nb[1] + (i2 % dm.ne[2]) * dm.nb[2] + (i3 % dm.ne[3]) * dm.nb[3])
                        : nullptr;
    const float slope = alibi_slope(ab, (int) i2);
    const int n = (int) ds.ne[0];
    // fmaxf drops a NaN: it enters the max as +inf, and a row max of +inf (a NaN or +inf
    // entry) makes the row NaN, a row of only -inf zeros, as on the CPU (docs/ops.md)
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const float v = x[j] * scale + (m ? slope * to_f32(m[j]) : 0.0f);
        mx = fmaxf(mx, isnan(v) ? INFINITY : v);
    }
    mx = block_max(mx, sh);
    if (isinf(mx)) {   // the same mx in every thread: the block leaves together
        for (int j = threadIdx.x; j < n; j += blockDim.x) y[j] = mx > 0.0f ? NAN : 0.0f;
        return;
    }
    float s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const float v = x[j] * scale + (m ? slope * to_f32(m[j]) : 0.0f);
        s += expf(v - mx);
    }
    s = block_sum(s, sh);
    const float inv = 1.0f / s;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const float v = x[j] * scale + (m ? slope * to_f32(m[j]) : 0.0f);
        y[j] = expf(v - mx) * inv;
    }
}

bool op_soft_max(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0], * mask = dst->src[1];
    const int64_t nrows = tsr_nrows(a);
    if (nrows == 0 || a->ne[0] == 0) return true;
    const float scale = tsr_get_op_params_f32(dst, 0);
    const alibi ab = make_alibi(tsr_get_op_params_f32(dst, 1), a->ne[2]);
    const int bs = row_block_size(a->ne[0]);
    const tdesc dm = mask ? make_desc(mask) : make_desc(a);
    if (mask && mask->type == TSR_TYPE_F16) {
        k_soft_max<__half><<<row_grid(nrows), bs, 0, c.stream>>>((const char *) a->data, make_desc(a), (const char *) mask->data, dm,
            (char *) dst->data, make_desc(dst), scale, ab);
    } else {
        k_soft_max<float><<<row_grid(nrows), bs, 0, c.stream>>>((const char *) a->data, make_desc(a),
            mask ? (const char *) mask->data : nullptr, dm, (char *) dst->data, make_desc(dst), scale, ab);
    }
    return true;
}

// ---- get_rows ---------------------------------------------------------------------------

template <int TYPE>
__device__ __forceinline__ float load_elem(const char * row, int64_t j) {
    if (TYPE == TSR_TYPE_F32) return ((const float *) row)[j];
    if (TYPE == TSR_TYPE_F16) return __half2float(((const __half *) row)[j]);
    if (TYPE == TSR_TYPE_BF16) return __bfloat162float(((const __nv_bfloat16 *) row)[j]);
    if (TYPE == TSR_TYPE_Q8_0) {
        const tsr_block_q8_0 * b = (const tsr_block_q8_0 *) row + j / 32;
        return __half2float(*(const __half *) &b->d) * (float) b->qs[j % 32];
    }
    if (TYPE == TSR_TYPE_Q4_0) {
        const tsr_block_q4_0 * b = (const tsr_block_q4_0 *) row + j / 32;
        return half_of(b->d) * (float) (nibble32(b->qs, (int) (j % 32)) - 8);
    }
    return dq_value<TYPE>(row, j);
}

// dst [n, k, ne2, ne3] row (i10, i11, i12) = src row idx[i10, i11, i12] of src's (i11, i12) matrix.
// An index outside [0, src ne1) gives a row of NaN (visible, never an out-of-bounds read).
template <int TYPE>
__global__ void k_get_rows(const char * src, tdesc ds, const char * idx, tdesc di, char * dst, tdesc dd) {
    int64_t i10, i11, i12;
    row_index(blockIdx.x, dd, i10, i11, i12);
    const int64_t r = *(const int32_t *) (idx + i10 * di.nb[0] + i11 * di.nb[1] + i12 * di.nb[2]);
    float * y = (float *) (dst + i10 * dd.nb[1] + i11 * dd.nb[2] + i12 * dd.nb[3]);
    const int64_t n = dd.ne[0];
    if (r < 0 || r >= ds.ne[1]) {
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) y[j] = NAN;
        return;
    }
    const char * row = src + r * ds.nb[1] + (i11 % ds.ne[2]) * ds.nb[2] + (i12 % ds.ne[3]) * ds.nb[3];
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) y[j] = load_elem<TYPE>(row, j);
}

bool op_get_rows(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0], * b = dst->src[1];
    const int64_t nrows = tsr_nrows(dst);
    if (nrows == 0 || dst->ne[0] == 0) return true;
    const int bs = row_block_size(dst->ne[0]);
    const char * s = (const char *) a->data, * ix = (const char *) b->data;
    const tdesc da = make_desc(a), di = make_desc(b), dd = make_desc(dst);
    char * d = (char *) dst->data;
    switch (a->type) {
        case TSR_TYPE_F32:  k_get_rows<TSR_TYPE_F32><<<row_grid(nrows), bs, 0, c.stream>>>(s, da, ix, di, d, dd); break;
        case TSR_TYPE_F16:  k_get_rows<TSR_TYPE_F16><<<row_grid(nrows), bs, 0, c.stream>>>(s, da, ix, di, d, dd); break;
        case TSR_TYPE_BF16: k_get_rows<TSR_TYPE_BF16><<<row_grid(nrows), bs, 0, c.stream>>>(s, da, ix, di, d, dd); break;
        case TSR_TYPE_Q8_0: k_get_rows<TSR_TYPE_Q8_0><<<row_grid(nrows), bs, 0, c.stream>>>(s, da, ix, di, d, dd); break;
        case TSR_TYPE_Q4_0: k_get_rows<TSR_TYPE_Q4_0><<<row_grid(nrows), bs, 0, c.stream>>>(s, da, ix, di, d, dd); break;
        default: {
            const bool known = with_dq_type(a->type, [&](auto t) {
                k_get_rows<decltype(t)::value><<<row_grid(nrows), bs, 0, c.stream>>>(s, da, ix, di, d, dd);
            });
            if (!known) return tsr_set_error("cuda: get_rows '%s' from %s not supported", dst->name, tsr_type_name(a->type));
        }
    }
    return true;
}

// ---- set_rows ----------------------------------------------------------------------------

// src0 b F32 [n, k, A2, A3] rows, src1 c I32 [k, C1, C2, 1], dst = view of a [n, rows, A2, A3]:
// row (i, i2, i3) of b goes to row c[i, i2 % C1, i3 % C2] of a. Out-of-range indices are
// skipped (graph_compute reports nothing; the CPU backend's behaviour decides the test).
template <typename TD>
__global__ void k_set_rows(const char * src, tdesc ds, const char * idx, tdesc di, char * dst, tdesc dd) {
    int64_t i, i2, i3;
    row_index(blockIdx.x, ds, i, i2, i3);
    const int64_t r = *(const int32_t *) (idx + i * di.nb[0] + (i2 % di.ne[1]) * di.nb[1] + (i3 % di.ne[2]) * di.nb[2]);
    if (r < 0 || r >= dd.ne[1]) return;
    const float * x = (const float *) (src + i * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3]);
    TD * y = (TD *) (dst + r * dd.nb[1] + i2 * dd.nb[2] + i3 * dd.nb[3]);
    for (int64_t j = threadIdx.x; j < ds.ne[0]; j += blockDim.x) y[j] = from_f32<TD>(x[j]);
}

bool op_set_rows(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * b = dst->src[0], * ix = dst->src[1];
    const int64_t nrows = tsr_nrows(b);
    if (nrows == 0 || b->ne[0] == 0) return true;
    const int bs = row_block_size(b->ne[0]);
    if (dst->type == TSR_TYPE_F32) {
        k_set_rows<float><<<row_grid(nrows), bs, 0, c.stream>>>((const char *) b->data, make_desc(b), (const char *) ix->data,
                                                                make_desc(ix), (char *) dst->data, make_desc(dst));
    } else {
        k_set_rows<__half><<<row_grid(nrows), bs, 0, c.stream>>>((const char *) b->data, make_desc(b), (const char *) ix->data,
                                                                 make_desc(ix), (char *) dst->data, make_desc(dst));
    }
    return true;
}

// ---- sum_rows / mean / sum / argmax ---------------------------------------------------------

__global__ void k_sum_rows(const char * src, tdesc ds, char * dst, tdesc dd, float mul) {
    __shared__ float sh[32];
    int64_t i1, i2, i3;
    row_index(blockIdx.x, ds, i1, i2, i3);
    const char * x = src + i1 * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3];
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < ds.ne[0]; j += blockDim.x) s += *(const float *) (x + j * ds.nb[0]);
    s = block_sum(s, sh);
    if (threadIdx.x == 0) *(float *) (dst + i1 * dd.nb[1] + i2 * dd.nb[2] + i3 * dd.nb[3]) = s * mul;
}

__global__ void k_sum_all(const char * src, tdesc ds, float * dst) {
    __shared__ float sh[32];
    const int64_t n = desc_nelements(ds);
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += *(const float *) (src + desc_offset(ds, i));
    s = block_sum(s, sh);
    if (threadIdx.x == 0) *dst = s;
}

// (v, i) before (best, bi): the larger value, NaN above all (PyTorch), ties to the smaller index
__device__ __forceinline__ bool argmax_before(float v, int i, float best, int bi) {
    if (isnan(v) || isnan(best)) return isnan(v) && (!isnan(best) || i < bi);
    return v > best || (v == best && i < bi);
}

__global__ void k_argmax(const char * src, tdesc ds, int32_t * dst) {
    __shared__ float shv[32];
    __shared__ int shi[32];
    const int64_t r = blockIdx.x;
    const char * x = src + r * ds.nb[1];
    float best = -INFINITY;
    int bi = 0x7fffffff;
    for (int64_t j = threadIdx.x; j < ds.ne[0]; j += blockDim.x) {
        const float v = *(const float *) (x + j * ds.nb[0]);
        if (argmax_before(v, (int) j, best, bi)) { best = v; bi = (int) j; }
    }
    // warp reduce: argmax_before (the first maximum; the first NaN)
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, best, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (argmax_before(ov, oi, best, bi)) { best = ov; bi = oi; }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { shv[warp] = best; shi[warp] = bi; }
    __syncthreads();
    if (warp == 0) {
        const int nw = (blockDim.x + 31) >> 5;
        best = lane < nw ? shv[lane] : -INFINITY;
        bi = lane < nw ? shi[lane] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, best, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (argmax_before(ov, oi, best, bi)) { best = ov; bi = oi; }
        }
        if (lane == 0) dst[r] = bi == 0x7fffffff ? 0 : bi;
    }
}

bool op_reduce(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    switch (dst->op) {
        case TSR_OP_SUM_ROWS:
        case TSR_OP_MEAN: {
            const int64_t nrows = tsr_nrows(a);
            if (nrows == 0) return true;
            const float mul = dst->op == TSR_OP_MEAN ? 1.0f / (float) a->ne[0] : 1.0f;
            k_sum_rows<<<row_grid(nrows), row_block_size(a->ne[0]), 0, c.stream>>>((const char *) a->data, make_desc(a),
                                                                                 (char *) dst->data, make_desc(dst), mul);
            return true;
        }
        case TSR_OP_SUM:
            k_sum_all<<<1, 1024, 0, c.stream>>>((const char *) a->data, make_desc(a), (float *) dst->data);
            return true;
        case TSR_OP_ARGMAX:
            if (a->ne[1] == 0) return true;
            k_argmax<<<row_grid(a->ne[1]), row_block_size(a->ne[0]), 0, c.stream>>>((const char *) a->data, make_desc(a),
                                                                                  (int32_t *) dst->data);
            return true;
        default:
            return tsr_set_error("cuda: op_reduce called for %s", tsr_op_name(dst->op));
    }
}

} // namespace
} // namespace tsr_cuda
