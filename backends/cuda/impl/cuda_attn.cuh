// tessera CUDA backend: flash_attn_ext (fused attention, no n_q x n_kv score matrix).
//
//   dst [Dv, H, n_q, B] (F32) = softmax(q k^T * scale (softcap: softcap tanh(.)) + slope mask) v
//
// One block per (query row, head, batch) and FA_WARPS warps. Each warp takes chunks of 32
// keys (chunk w, w + FA_WARPS, ...): a lane computes its own key's score (the query in
// shared memory, the key's row read whole, 16 bytes at a time where aligned), the warp keeps
// an online softmax (max M, sum S, and the Dv accumulator spread over its lanes), and the
// chunk's V rows are read coalesced, one per non-zero weight. The warps' states are merged
// at the end. Decode (n_q = 1) gets one block per head; a prompt one per query and head.
//
// NaN rules (docs/ops.md, as the CPU): a NaN or +inf score (a NaN in q, a NaN or +inf mask
// entry) makes the row NaN; a fully masked row is zeros; keys whose mask is -inf are not
// read, nor V rows whose weight is 0.
#pragma once

namespace tsr_cuda {
namespace {

constexpr int FA_WARPS = 8;
constexpr int FA_MAX_D = 256, FA_MAX_DV = 512;
constexpr int FA_VC = FA_MAX_DV / 32;   // accumulator values per lane

struct fa_params {
    const char * q, * k, * v, * mask;
    char * dst;
    int64_t qnb[4], knb[4], vnb[4], mnb[4], dnb[4];   // byte strides
    int D, Dv, n_q, n_kv, H, gqa, mne2, mne3;
    bool mask_f16, k_vec;   // k_vec: K rows and strides 16-byte aligned, D a multiple of 16 bytes
    float scale, softcap;
    alibi ab;
};

// Score of the query (qs, shared) against one key row.
template <typename TKV>
__device__ __forceinline__ float fa_dot(const float * qs, const char * krow, int D, bool vec) {
    float s = 0.0f;
    if (vec) {
        constexpr int PER = 16 / sizeof(TKV);
        for (int i = 0; i < D; i += PER) {
            const uint4 w = __ldg((const uint4 *) (krow + (int64_t) i * sizeof(TKV)));
            const TKV * e = (const TKV *) &w;
#pragma unroll
            for (int u = 0; u < PER; ++u) s += qs[i + u] * to_f32(e[u]);
        }
    } else {
        const TKV * e = (const TKV *) krow;
        for (int i = 0; i < D; ++i) s += qs[i] * to_f32(e[i]);
    }
    return s;
}

template <typename TKV>
__global__ void __launch_bounds__(FA_WARPS * 32) k_flash_attn(fa_params p) {
    __shared__ float qs[FA_MAX_D];
    __shared__ float wm[FA_WARPS], wsum[FA_WARPS];
    __shared__ int wnan[FA_WARPS];
    __shared__ float wacc[FA_WARPS][FA_MAX_DV];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t g = blockIdx.x;
    const int iq = (int) (g % p.n_q);
    const int h = (int) ((g / p.n_q) % p.H);
    const int b = (int) (g / ((int64_t) p.n_q * p.H));
    const int hk = h / p.gqa;

    const char * qrow = p.q + iq * p.qnb[1] + h * p.qnb[2] + b * p.qnb[3];
    for (int i = threadIdx.x; i < p.D; i += blockDim.x) qs[i] = *(const float *) (qrow + i * p.qnb[0]);
    __syncthreads();

    const float slope = alibi_slope(p.ab, h);
    const char * kbase = p.k + hk * p.knb[2] + b * p.knb[3];
    const char * vbase = p.v + hk * p.vnb[2] + b * p.vnb[3];
    const char * mrow = p.mask ? p.mask + iq * p.mnb[1] + (h % p.mne2) * p.mnb[2] + (b % p.mne3) * p.mnb[3] : nullptr;

    float acc[FA_VC];
#pragma unroll
    for (int c = 0; c < FA_VC; ++c) acc[c] = 0.0f;
    float M = -INFINITY, S = 0.0f;
    bool nan_row = false;
    for (int j0 = warp * 32; j0 < p.n_kv && !nan_row; j0 += FA_WARPS * 32) {
        const int j = j0 + lane;
        float s = -INFINITY;
        if (j < p.n_kv) {
            float mv = 0.0f;
            if (mrow) mv = slope * (p.mask_f16 ? __half2float(((const __half *) mrow)[j]) : ((const float *) mrow)[j]);
            if (mv != -INFINITY) {
                float d = fa_dot<TKV>(qs, kbase + j * p.knb[1], p.D, p.k_vec) * p.scale;
                if (p.softcap != 0.0f) d = p.softcap * tanhf(d);
                s = d + mv;
            }
        }
        // a NaN or +inf score: the row is NaN (the warp leaves the loop together)
        if (__any_sync(0xffffffffu, isnan(s) || s == INFINITY)) { nan_row = true; break; }
        const float cmax = warp_max(s);
        if (cmax == -INFINITY) continue;   // the whole chunk is masked
        const float Mn = fmaxf(M, cmax);
        const float corr = M == -INFINITY ? 0.0f : expf(M - Mn);
        const float pj = s == -INFINITY ? 0.0f : expf(s - Mn);
        S = S * corr + warp_sum(pj);
        M = Mn;
#pragma unroll
        for (int c = 0; c < FA_VC; ++c) acc[c] *= corr;
        const int nj = min(32, p.n_kv - j0);
        for (int jj = 0; jj < nj; ++jj) {
            const float w = __shfl_sync(0xffffffffu, pj, jj);
            if (w == 0.0f) continue;   // the same w in every lane
            const TKV * vr = (const TKV *) (vbase + (int64_t) (j0 + jj) * p.vnb[1]);
#pragma unroll
            for (int c = 0; c < FA_VC; ++c) {
                const int i = lane + 32 * c;
                if (i < p.Dv) acc[c] += w * to_f32(vr[i]);
            }
        }
    }

    // merge the warps' (M, S, acc)
    if (lane == 0) { wm[warp] = M; wsum[warp] = S; wnan[warp] = nan_row; }
#pragma unroll
    for (int c = 0; c < FA_VC; ++c) {
        const int i = lane + 32 * c;
        if (i < p.Dv) wacc[warp][i] = acc[c];
    }
    __syncthreads();
    float Mt = -INFINITY;
    bool any_nan = false;
    for (int w = 0; w < FA_WARPS; ++w) { Mt = fmaxf(Mt, wm[w]); any_nan |= wnan[w] != 0; }
    float St = 0.0f, f[FA_WARPS];
    for (int w = 0; w < FA_WARPS; ++w) {
        f[w] = wm[w] == -INFINITY ? 0.0f : expf(wm[w] - Mt);
        St += wsum[w] * f[w];
    }
    const float inv = any_nan ? NAN : St > 0.0f ? 1.0f / St : 0.0f;
    float * out = (float *) (p.dst + h * p.dnb[1] + iq * p.dnb[2] + b * p.dnb[3]);
    for (int i = threadIdx.x; i < p.Dv; i += blockDim.x) {
        float o = 0.0f;
        for (int w = 0; w < FA_WARPS; ++w)
            if (f[w] != 0.0f) o += wacc[w][i] * f[w];
        out[i] = o * inv;
    }
}

inline bool fa_kv_type_ok(tsr_type t) { return t == TSR_TYPE_F32 || t == TSR_TYPE_F16; }

// What k_flash_attn runs: F32 q, F32/F16 K and V of one type with contiguous elements, head
// sizes up to FA_MAX_D / FA_MAX_DV, F32 output.
inline bool flash_attn_supported(const tsr_tensor * op) {
    const tsr_tensor * q = op->src[0], * k = op->src[1], * v = op->src[2], * m = op->src[3];
    if (!q || !k || !v || q->type != TSR_TYPE_F32 || op->type != TSR_TYPE_F32 || k->type != v->type || !fa_kv_type_ok(k->type))
        return false;
    if (m && !((m->type == TSR_TYPE_F32 && m->nb[0] == 4) || (m->type == TSR_TYPE_F16 && m->nb[0] == 2))) return false;
    const int64_t rows = q->ne[1] * q->ne[2] * q->ne[3];
    return q->ne[0] <= FA_MAX_D && v->ne[0] <= FA_MAX_DV && k->nb[0] == tsr_type_size(k->type) &&
           v->nb[0] == tsr_type_size(v->type) && op->nb[0] == 4 && rows <= 0x7fffffffLL && k->ne[1] <= 0x7fffffffLL;
}

bool op_flash_attn(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2], * m = dst->src[3];
    fa_params p;
    memset(&p, 0, sizeof(p));
    p.q = (const char *) q->data; p.k = (const char *) k->data; p.v = (const char *) v->data;
    p.mask = m ? (const char *) m->data : nullptr;
    p.dst = (char *) dst->data;
    for (int i = 0; i < 4; ++i) {
        p.qnb[i] = (int64_t) q->nb[i]; p.knb[i] = (int64_t) k->nb[i]; p.vnb[i] = (int64_t) v->nb[i];
        p.mnb[i] = m ? (int64_t) m->nb[i] : 0; p.dnb[i] = (int64_t) dst->nb[i];
    }
    p.D = (int) q->ne[0]; p.Dv = (int) v->ne[0]; p.n_q = (int) q->ne[1]; p.n_kv = (int) k->ne[1];
    p.H = (int) q->ne[2]; p.gqa = (int) (q->ne[2] / k->ne[2]);
    p.mne2 = m ? (int) m->ne[2] : 1; p.mne3 = m ? (int) m->ne[3] : 1;
    p.mask_f16 = m && m->type == TSR_TYPE_F16;
    const size_t es = tsr_type_size(k->type);
    p.k_vec = ((uintptr_t) k->data % 16) == 0 && k->nb[1] % 16 == 0 && k->nb[2] % 16 == 0 && k->nb[3] % 16 == 0 &&
              ((size_t) p.D * es) % 16 == 0;
    p.scale = tsr_get_op_params_f32(dst, 0);
    p.ab = make_alibi(tsr_get_op_params_f32(dst, 1), p.H);
    p.softcap = tsr_get_op_params_f32(dst, 2);
    if (p.softcap != 0.0f) p.scale /= p.softcap;   // s = softcap tanh(dot scale / softcap), as the CPU
    const int64_t rows = q->ne[1] * q->ne[2] * q->ne[3];
    if (rows == 0 || p.Dv == 0) return true;
    const unsigned grid = (unsigned) rows;
    if (k->type == TSR_TYPE_F16) k_flash_attn<__half><<<grid, FA_WARPS * 32, 0, c.stream>>>(p);
    else                         k_flash_attn<float><<<grid, FA_WARPS * 32, 0, c.stream>>>(p);
    return true;
}

} // namespace
} // namespace tsr_cuda
