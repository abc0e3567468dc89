// tessera CUDA backend: the model-family ops of issue 17 part B. mul_mat_id is one warp per
// (row, (slot, token) pair), so decode reads only the experts the ids name; the others are
// a gather per output element (convolutions with F32/F16 kernels, padding, roll, timestep
// embeddings, Mamba's ssm_conv), each element written once, never in place.
#pragma once

namespace tsr_cuda {
namespace {

// ---- mul_mat_id ------------------------------------------------------------------------------

constexpr int MMID_WARPS = 4;

// out[m, e, t] = as[:, m, ids[e, t]] . b[:, e % n_b, t]; an id outside [0, n_expert) gives NaN
// (the CPU backend fails the graph; here the row is visibly wrong instead of read out of bounds).
template <int TYPE>
__global__ void k_mul_mat_id(const char * __restrict__ as, tdesc da, const char * __restrict__ b, tdesc db,
                             const char * __restrict__ ids, tdesc di, char * dst, tdesc dd, int64_t pair0) {
    const int64_t m = (int64_t) blockIdx.x * MMID_WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    const int64_t n_used = di.ne[0], pair = pair0 + blockIdx.y;
    const int64_t e = pair % n_used, t = pair / n_used;
    if (m >= da.ne[1]) return;   // whole warps exit together
    float * y = (float *) (dst + m * dd.nb[0] + e * dd.nb[1] + t * dd.nb[2]);
    const int32_t expert = *(const int32_t *) (ids + e * di.nb[0] + t * di.nb[1]);
    if (expert < 0 || expert >= da.ne[2]) {
        if (lane == 0) *y = NAN;
        return;
    }
    const char * w = as + m * da.nb[1] + expert * da.nb[2];
    const float * x = (const float *) (b + (e % db.ne[1]) * db.nb[1] + t * db.nb[2]);
    float acc = 0.0f;
    for (int64_t k = lane; k < da.ne[0]; k += 32) acc += load_elem<TYPE>(w, k) * x[k];
    acc = warp_sum(acc);
    if (lane == 0) *y = acc;
}

inline bool mul_mat_id_type_ok(tsr_type t) {
    return type_is_float_or_bf16(t) || t == TSR_TYPE_Q8_0 || t == TSR_TYPE_Q4_0 || is_dq_type(t);
}

inline bool mul_mat_id_supported(const tsr_tensor * op) {
    const tsr_tensor * as = op->src[0], * b = op->src[1], * ids = op->src[2];
    return as && b && ids && mul_mat_id_type_ok(as->type) && as->nb[0] == tsr_type_size(as->type) && b->type == TSR_TYPE_F32 &&
           b->nb[0] == 4 && op->type == TSR_TYPE_F32 && ids->type == TSR_TYPE_I32;
}

bool op_mul_mat_id(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * as = dst->src[0], * b = dst->src[1], * ids = dst->src[2];
    const int64_t pairs = ids->ne[0] * ids->ne[1];
    if (pairs == 0 || as->ne[1] == 0) return true;
    const unsigned row_blocks = (unsigned) ((as->ne[1] + MMID_WARPS - 1) / MMID_WARPS);
    // grid.y holds at most 65535 blocks: one launch per run of pairs
    auto launch = [&](auto type) {
        for (int64_t pair0 = 0; pair0 < pairs; pair0 += 65535) {
            const dim3 grid(row_blocks, (unsigned) std::min<int64_t>(pairs - pair0, 65535));
            k_mul_mat_id<decltype(type)::value><<<grid, MMID_WARPS * 32, 0, c.stream>>>(
                (const char *) as->data, make_desc(as), (const char *) b->data, make_desc(b), (const char *) ids->data,
                make_desc(ids), (char *) dst->data, make_desc(dst), pair0);
        }
    };
    switch (as->type) {
        case TSR_TYPE_F32:  launch(type_tag<TSR_TYPE_F32>()); return true;
        case TSR_TYPE_F16:  launch(type_tag<TSR_TYPE_F16>()); return true;
        case TSR_TYPE_BF16: launch(type_tag<TSR_TYPE_BF16>()); return true;
        case TSR_TYPE_Q8_0: launch(type_tag<TSR_TYPE_Q8_0>()); return true;
        case TSR_TYPE_Q4_0: launch(type_tag<TSR_TYPE_Q4_0>()); return true;
        default:
            if (with_dq_type(as->type, launch)) return true;
            return tsr_set_error("cuda: mul_mat_id '%s' of %s weights not supported", dst->name, tsr_type_name(as->type));
    }
}

// ---- gathers -----------------------------------------------------------------------------------

// An op's sources and integer parameters, passed by value.
struct gather_args {
    const char * a; tdesc da;   // src0
    const char * b; tdesc db;   // src1 (convolutions: the input; ssm_conv: the weights)
    char * d; tdesc dd;
    int32_t q[8];               // op_params slots 0..7
};

template <typename T> __device__ __forceinline__ float elem_at(const char * base, const tdesc & t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return to_f32(*(const T *) (base + offs(t, idx4{i0, i1, i2, i3})));
}

// depthwise: out[ow, oh, c, n] = sum a[kw, kh, 0, c] * b[ow*s0 + kw*d0 - p0, oh*s1 + kh*d1 - p1, c, n]
template <typename TK>
__device__ float conv_2d_dw_at(const gather_args & g, const idx4 & o) {
    const int32_t * q = g.q;   // s0, s1, p0, p1, d0, d1
    float sum = 0.0f;
    for (int64_t kh = 0; kh < g.da.ne[1]; ++kh) {
        const int64_t y = o.i1 * q[1] + kh * q[5] - q[3];
        if (y < 0 || y >= g.db.ne[1]) continue;
        for (int64_t kw = 0; kw < g.da.ne[0]; ++kw) {
            const int64_t x = o.i0 * q[0] + kw * q[4] - q[2];
            if (x >= 0 && x < g.db.ne[0]) sum += elem_at<TK>(g.a, g.da, kw, kh, 0, o.i2) * elem_at<float>(g.b, g.db, x, y, o.i2, o.i3);
        }
    }
    return sum;
}

// transposed: out[l*s0 + k*d0 - p0, oc, n] += a[k, oc, ic] * b[l, ic, n], gathered per output
template <typename TK>
__device__ float conv_transpose_1d_at(const gather_args & g, const idx4 & o) {
    const int32_t s0 = g.q[0], p0 = g.q[1], d0 = g.q[2];
    float sum = 0.0f;
    for (int64_t k = 0; k < g.da.ne[0]; ++k) {
        const int64_t pos = o.i0 + p0 - k * d0;
        if (pos < 0 || pos % s0 != 0 || pos / s0 >= g.db.ne[0]) continue;
        for (int64_t ic = 0; ic < g.da.ne[2]; ++ic) sum += elem_at<TK>(g.a, g.da, k, o.i1, ic, 0) * elem_at<float>(g.b, g.db, pos / s0, ic, o.i2, 0);
    }
    return sum;
}

__device__ float timestep_embedding_at(const gather_args & g, const idx4 & o) {
    const int half = g.q[0] / 2;
    if (o.i0 >= 2 * half) return 0.0f;   // an odd dim's last element
    const int j = (int) (o.i0 < half ? o.i0 : o.i0 - half);
    const float arg = elem_at<float>(g.a, g.da, o.i1, 0, 0, 0) * expf(-logf((float) g.q[1]) * (float) j / (float) half);
    return o.i0 < half ? cosf(arg) : sinf(arg);
}

// pad / pad_ext: trailing pads in slots 0..3, leading ones in 4..7
__device__ float pad_at(const gather_args & g, const idx4 & o) {
    const int64_t j[4] = {o.i0 - g.q[4], o.i1 - g.q[5], o.i2 - g.q[6], o.i3 - g.q[7]};
    for (int i = 0; i < 4; ++i)
        if (j[i] < 0 || j[i] >= g.da.ne[i]) return 0.0f;
    return elem_at<float>(g.a, g.da, j[0], j[1], j[2], j[3]);
}

__device__ float pad_reflect_1d_at(const gather_args & g, const idx4 & o) {
    const int64_t n0 = g.da.ne[0];
    int64_t j = o.i0 - g.q[0];   // mirrored at 0 and at n0 - 1
    if (j < 0) j = -j;
    else if (j >= n0) j = 2 * (n0 - 1) - j;
    return elem_at<float>(g.a, g.da, j, o.i1, o.i2, o.i3);
}

__device__ float ssm_conv_at(const gather_args & g, const idx4 & o) {
    float sum = 0.0f;   // out[i, t, s] = sum_k sx[t + k, i, s] * c[k, i]
    for (int64_t k = 0; k < g.db.ne[0]; ++k) sum += elem_at<float>(g.a, g.da, o.i1 + k, o.i0, o.i2, 0) * elem_at<float>(g.b, g.db, k, o.i0, 0, 0);
    return sum;
}

enum gather_op { G_CONV_2D_DW, G_CONV_TRANSPOSE_1D, G_TIMESTEP_EMBEDDING, G_PAD, G_PAD_REFLECT_1D, G_SSM_CONV };

template <int OP, typename TK>
__global__ void k_gather(gather_args g, int64_t n) {
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const idx4 o = unravel(i, g.dd.ne);
        float v;
        if (OP == G_CONV_2D_DW) v = conv_2d_dw_at<TK>(g, o);
        else if (OP == G_CONV_TRANSPOSE_1D) v = conv_transpose_1d_at<TK>(g, o);
        else if (OP == G_TIMESTEP_EMBEDDING) v = timestep_embedding_at(g, o);
        else if (OP == G_PAD) v = pad_at(g, o);
        else if (OP == G_PAD_REFLECT_1D) v = pad_reflect_1d_at(g, o);
        else v = ssm_conv_at(g, o);
        *(float *) (g.d + offs(g.dd, o)) = v;
    }
}

// roll: a copy of elements of any 2- or 4-byte type, out[i] = a[(i - shift) mod ne] per dim
template <typename T>
__global__ void k_roll(gather_args g, int64_t n) {
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const idx4 o = unravel(i, g.dd.ne);
        const int64_t x[4] = {o.i0, o.i1, o.i2, o.i3};
        int64_t j[4];
        for (int k = 0; k < 4; ++k) j[k] = ((x[k] - g.q[k]) % g.da.ne[k] + g.da.ne[k]) % g.da.ne[k];
        *(T *) (g.d + offs(g.dd, o)) = *(const T *) (g.a + offs(g.da, idx4{j[0], j[1], j[2], j[3]}));
    }
}

inline int gather_op_of(tsr_op op) {
    switch (op) {
        case TSR_OP_CONV_2D_DW: return G_CONV_2D_DW;
        case TSR_OP_CONV_TRANSPOSE_1D: return G_CONV_TRANSPOSE_1D;
        case TSR_OP_TIMESTEP_EMBEDDING: return G_TIMESTEP_EMBEDDING;
        case TSR_OP_PAD: return G_PAD;
        case TSR_OP_PAD_REFLECT_1D: return G_PAD_REFLECT_1D;
        case TSR_OP_SSM_CONV: return G_SSM_CONV;
        default: return -1;
    }
}

inline bool models_supported(const tsr_tensor * op) {
    const tsr_tensor * a = op->src[0], * b = op->src[1];
    if (!a) return false;
    if (op->op == TSR_OP_ROLL) return op->type == a->type && (tsr_type_size(a->type) == 4 || tsr_type_size(a->type) == 2) && !tsr_is_quantized(a->type);
    if (op->type != TSR_TYPE_F32) return false;
    switch (gather_op_of(op->op)) {
        case G_CONV_2D_DW: case G_CONV_TRANSPOSE_1D: return type_is_float(a->type) && b && b->type == TSR_TYPE_F32;
        case G_SSM_CONV: return a->type == TSR_TYPE_F32 && b && b->type == TSR_TYPE_F32;
        case G_TIMESTEP_EMBEDDING: case G_PAD: case G_PAD_REFLECT_1D: return a->type == TSR_TYPE_F32;
        default: return false;
    }
}

bool op_models(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0], * b = dst->src[1];
    gather_args g;
    g.a = (const char *) a->data; g.da = make_desc(a);
    g.b = b ? (const char *) b->data : nullptr; g.db = b ? make_desc(b) : g.da;
    g.d = (char *) dst->data; g.dd = make_desc(dst);
    for (int i = 0; i < 8; ++i) g.q[i] = tsr_get_op_params_i32(dst, (uint32_t) i);
    const int64_t n = tsr_nelements(dst);
    if (n == 0) return true;
    const unsigned grid = grid_for(n);
    if (dst->op == TSR_OP_ROLL) {
        if (tsr_type_size(a->type) == 4) k_roll<uint32_t><<<grid, CU_BLOCK, 0, c.stream>>>(g, n);
        else k_roll<uint16_t><<<grid, CU_BLOCK, 0, c.stream>>>(g, n);
        return true;
    }
    const bool k16 = a->type == TSR_TYPE_F16;
    switch (gather_op_of(dst->op)) {
        case G_CONV_2D_DW:
            if (k16) k_gather<G_CONV_2D_DW, __half><<<grid, CU_BLOCK, 0, c.stream>>>(g, n);
            else k_gather<G_CONV_2D_DW, float><<<grid, CU_BLOCK, 0, c.stream>>>(g, n);
            return true;
        case G_CONV_TRANSPOSE_1D:
            if (k16) k_gather<G_CONV_TRANSPOSE_1D, __half><<<grid, CU_BLOCK, 0, c.stream>>>(g, n);
            else k_gather<G_CONV_TRANSPOSE_1D, float><<<grid, CU_BLOCK, 0, c.stream>>>(g, n);
            return true;
        case G_TIMESTEP_EMBEDDING: k_gather<G_TIMESTEP_EMBEDDING, float><<<grid, CU_BLOCK, 0, c.stream>>>(g, n); return true;
        case G_PAD: k_gather<G_PAD, float><<<grid, CU_BLOCK, 0, c.stream>>>(g, n); return true;
        case G_PAD_REFLECT_1D: k_gather<G_PAD_REFLECT_1D, float><<<grid, CU_BLOCK, 0, c.stream>>>(g, n); return true;
        case G_SSM_CONV: k_gather<G_SSM_CONV, float><<<grid, CU_BLOCK, 0, c.stream>>>(g, n); return true;
        default: return tsr_set_error("cuda: op %s (node '%s') is not a gather", tsr_op_desc(dst), dst->name);
    }
}

} // namespace
} // namespace tsr_cuda
