// tessera CUDA backend: elementwise kernels (binary with broadcast, unary, scale, clamp,
// swiglu, copies and conversions, concat, repeat, diag_mask_inf).
//
// In-place contract: every kernel here computes each destination element from source
// elements at the same logical index only (or from indices no other thread writes), so a
// destination that exactly aliases an operand of the same type and shape is correct.
#pragma once

namespace tsr_cuda {
namespace {

constexpr unsigned CU_MAX_GRID = 65535u * 8u;

inline unsigned grid_for(int64_t n) { return std::min<unsigned>(grid_1d(n), CU_MAX_GRID); }

// ---- binary ops with broadcast of src1 over src0 -----------------------------------------

enum bin_op { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV };

template <int OP> __device__ __forceinline__ float bin_apply(float a, float b) {
    if (OP == BIN_ADD) return a + b;
    if (OP == BIN_SUB) return a - b;
    if (OP == BIN_MUL) return a * b;
    return a / b;
}

template <int OP, typename T0, typename T1>
__global__ void k_binary(const char * __restrict__ s0, tdesc d0, const char * __restrict__ s1, tdesc d1,
                         char * dst, tdesc dd, int64_t n) {
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const idx4 x = unravel(i, dd.ne);
        const float a = to_f32(*(const T0 *) (s0 + offs(d0, x)));
        const float b = to_f32(*(const T1 *) (s1 + offs_bcast(d1, x)));
        *(T0 *) (dst + offs(dd, x)) = from_f32<T0>(bin_apply<OP>(a, b));
    }
}

template <int OP, typename T0>
bool launch_binary_t1(op_ctx & c, const tsr_tensor * a, const tsr_tensor * b, tsr_tensor * dst) {
    const int64_t n = tsr_nelements(dst);
    if (n == 0) return true;
    if (b->type == TSR_TYPE_F32) {
        k_binary<OP, T0, float><<<grid_for(n), CU_BLOCK, 0, c.stream>>>((const char *) a->data, make_desc(a),
            (const char *) b->data, make_desc(b), (char *) dst->data, make_desc(dst), n);
    } else {
        k_binary<OP, T0, __half><<<grid_for(n), CU_BLOCK, 0, c.stream>>>((const char *) a->data, make_desc(a),
            (const char *) b->data, make_desc(b), (char *) dst->data, make_desc(dst), n);
    }
    return true;
}

template <int OP>
bool launch_binary_op(op_ctx & c, const tsr_tensor * a, const tsr_tensor * b, tsr_tensor * dst) {
    return a->type == TSR_TYPE_F32 ? launch_binary_t1<OP, float>(c, a, b, dst)
                                   : launch_binary_t1<OP, __half>(c, a, b, dst);
}

bool op_binary(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0], * b = dst->src[1];
    switch (dst->op) {
        case TSR_OP_ADD: return launch_binary_op<BIN_ADD>(c, a, b, dst);
        case TSR_OP_SUB: return launch_binary_op<BIN_SUB>(c, a, b, dst);
        case TSR_OP_MUL: return launch_binary_op<BIN_MUL>(c, a, b, dst);
        case TSR_OP_DIV: return launch_binary_op<BIN_DIV>(c, a, b, dst);
        default: return tsr_set_error("cuda: op_binary called for %s", tsr_op_name(dst->op));
    }
}

// ---- unary ops ------------------------------------------------------------------------

enum un_op {
    UN_ABS, UN_NEG, UN_TANH, UN_RELU, UN_SIGMOID, UN_GELU, UN_GELU_QUICK, UN_SILU, UN_EXP,
    UN_SQR, UN_SQRT, UN_LOG, UN_SCALE, UN_CLAMP,
    /* issue 17 part A */
    UN_SGN, UN_STEP, UN_ELU, UN_HARDSWISH, UN_HARDSIGMOID, UN_EXPM1, UN_SOFTPLUS, UN_GELU_ERF, UN_FLOOR, UN_CEIL,
    UN_ROUND, UN_TRUNC, UN_SIN, UN_COS, UN_LEAKY_RELU
};

// relu6(x + 3) / 6 with the NaN kept (fminf/fmaxf would drop it), as the CPU
__device__ __forceinline__ float hardsigmoid_f(float x) { return isnan(x) ? x : fminf(fmaxf((x + 3.0f) / 6.0f, 0.0f), 1.0f); }
__device__ __forceinline__ float gelu_erf_f(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

__device__ __forceinline__ float un_apply(int op, float x, float p0, float p1) {
    switch (op) {
        case UN_ABS:        return fabsf(x);
        case UN_NEG:        return -x;
        case UN_TANH:       return tanhf(x);
        case UN_RELU:       return x <= 0.0f ? 0.0f : x;   // NaN stays NaN (PyTorch, the CPU)
        case UN_SIGMOID:    return 1.0f / (1.0f + expf(-x));
        case UN_GELU:       return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * x * (1.0f + 0.044715f * x * x)));
        case UN_GELU_QUICK: return x * (1.0f / (1.0f + expf(-1.702f * x)));
        case UN_SILU:       return x / (1.0f + expf(-x));
        case UN_EXP:        return expf(x);
        case UN_SQR:        return x * x;
        case UN_SQRT:       return sqrtf(x);
        case UN_LOG:        return logf(x);
        case UN_SCALE:      return x * p0 + p1;
        case UN_CLAMP:      return isnan(x) ? x : fminf(fmaxf(x, p0), p1);   // fmaxf drops a NaN
        case UN_SGN:        return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == 0.0f ? 0.0f : x;   // NaN kept
        case UN_STEP:       return x > 0.0f ? 1.0f : x <= 0.0f ? 0.0f : x;
        case UN_ELU:        return x > 0.0f ? x : expm1f(x);
        case UN_HARDSWISH:  return x * hardsigmoid_f(x);
        case UN_HARDSIGMOID: return hardsigmoid_f(x);
        case UN_EXPM1:      return expm1f(x);
        case UN_SOFTPLUS:   return x > 20.0f ? x : log1pf(expf(x));
        case UN_GELU_ERF:   return gelu_erf_f(x);
        case UN_FLOOR:      return floorf(x);
        case UN_CEIL:       return ceilf(x);
        case UN_ROUND:      return roundf(x);
        case UN_TRUNC:      return truncf(x);
        case UN_SIN:        return sinf(x);
        case UN_COS:        return cosf(x);
        case UN_LEAKY_RELU: return x > 0.0f ? x : p0 * x;
        default:            return x;
    }
}

template <typename T>
__global__ void k_unary(const char * src, tdesc ds, char * dst, tdesc dd, int64_t n, int op, float p0, float p1) {
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const float x = to_f32(*(const T *) (src + desc_offset(ds, i)));
        *(T *) (dst + desc_offset(dd, i)) = from_f32<T>(un_apply(op, x, p0, p1));
    }
}

bool launch_unary(op_ctx & c, const tsr_tensor * src, tsr_tensor * dst, int op, float p0, float p1) {
    const int64_t n = tsr_nelements(dst);
    if (n == 0) return true;
    if (src->type == TSR_TYPE_F32) {
        k_unary<float><<<grid_for(n), CU_BLOCK, 0, c.stream>>>((const char *) src->data, make_desc(src),
                                                               (char *) dst->data, make_desc(dst), n, op, p0, p1);
    } else {
        k_unary<__half><<<grid_for(n), CU_BLOCK, 0, c.stream>>>((const char *) src->data, make_desc(src),
                                                                (char *) dst->data, make_desc(dst), n, op, p0, p1);
    }
    return true;
}

// Map a tessera unary op to the kernel's code; -1 when unsupported.
inline int unary_code(enum tsr_unary_op op) {
    switch (op) {
        case TSR_UNARY_OP_ABS:        return UN_ABS;
        case TSR_UNARY_OP_NEG:        return UN_NEG;
        case TSR_UNARY_OP_TANH:       return UN_TANH;
        case TSR_UNARY_OP_RELU:       return UN_RELU;
        case TSR_UNARY_OP_SIGMOID:    return UN_SIGMOID;
        case TSR_UNARY_OP_GELU:       return UN_GELU;
        case TSR_UNARY_OP_GELU_QUICK: return UN_GELU_QUICK;
        case TSR_UNARY_OP_SILU:       return UN_SILU;
        case TSR_UNARY_OP_EXP:        return UN_EXP;
        /* issue 17 part A */
        case TSR_UNARY_OP_SGN:         return UN_SGN;
        case TSR_UNARY_OP_STEP:        return UN_STEP;
        case TSR_UNARY_OP_ELU:         return UN_ELU;
        case TSR_UNARY_OP_HARDSWISH:   return UN_HARDSWISH;
        case TSR_UNARY_OP_HARDSIGMOID: return UN_HARDSIGMOID;
        case TSR_UNARY_OP_EXPM1:       return UN_EXPM1;
        case TSR_UNARY_OP_SOFTPLUS:    return UN_SOFTPLUS;
        case TSR_UNARY_OP_GELU_ERF:    return UN_GELU_ERF;
        case TSR_UNARY_OP_FLOOR:       return UN_FLOOR;
        case TSR_UNARY_OP_CEIL:        return UN_CEIL;
        case TSR_UNARY_OP_ROUND:       return UN_ROUND;
        case TSR_UNARY_OP_TRUNC:       return UN_TRUNC;
        default:                      return -1;
    }
}

bool op_unary(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    switch (dst->op) {
        case TSR_OP_UNARY: {
            const int code = unary_code(tsr_get_unary_op(dst));
            if (code < 0) return tsr_set_error("cuda: unary op %s not supported", tsr_op_desc(dst));
            return launch_unary(c, a, dst, code, 0.0f, 0.0f);
        }
        case TSR_OP_SQR:   return launch_unary(c, a, dst, UN_SQR, 0.0f, 0.0f);
        case TSR_OP_SQRT:  return launch_unary(c, a, dst, UN_SQRT, 0.0f, 0.0f);
        case TSR_OP_LOG:   return launch_unary(c, a, dst, UN_LOG, 0.0f, 0.0f);
        case TSR_OP_SCALE: return launch_unary(c, a, dst, UN_SCALE, tsr_get_op_params_f32(dst, 0), tsr_get_op_params_f32(dst, 1));
        case TSR_OP_CLAMP: return launch_unary(c, a, dst, UN_CLAMP, tsr_get_op_params_f32(dst, 0), tsr_get_op_params_f32(dst, 1));
        /* issue 17 part A */
        case TSR_OP_SIN:   return launch_unary(c, a, dst, UN_SIN, 0.0f, 0.0f);
        case TSR_OP_COS:   return launch_unary(c, a, dst, UN_COS, 0.0f, 0.0f);
        case TSR_OP_LEAKY_RELU: return launch_unary(c, a, dst, UN_LEAKY_RELU, tsr_get_op_params_f32(dst, 0), 0.0f);
        default: return tsr_set_error("cuda: op_unary called for %s", tsr_op_name(dst->op));
    }
}

// ---- GLU --------------------------------------------------------------------------------

// act(x) * g for op (enum tsr_glu_op); swiglu_oai clamps x from above and g both ways by
// limit, scales the sigmoid by alpha, and multiplies by g + 1. NaN kept, as the CPU.
__device__ __forceinline__ float glu_apply(int op, float x, float g, float alpha, float limit) {
    switch (op) {
        case TSR_GLU_OP_REGLU:       return (x <= 0.0f ? 0.0f : x) * g;
        case TSR_GLU_OP_GEGLU:       return un_apply(UN_GELU, x, 0.0f, 0.0f) * g;
        case TSR_GLU_OP_GEGLU_ERF:   return gelu_erf_f(x) * g;
        case TSR_GLU_OP_GEGLU_QUICK: return un_apply(UN_GELU_QUICK, x, 0.0f, 0.0f) * g;
        case TSR_GLU_OP_SWIGLU_OAI: {
            const float xc = x > limit ? limit : x;
            const float gc = isnan(g) ? g : fminf(fmaxf(g, -limit), limit);
            return xc / (1.0f + expf(-alpha * xc)) * (gc + 1.0f);
        }
        default:                     return x / (1.0f + expf(-x)) * g;
    }
}

struct glu_params { int op, split, swapped; float alpha, limit; };

// Single-tensor form: src0 rows are [x | g] (swapped: [g | x]), nc = dst ne0. Split form:
// x from src0, g from src1 (same shapes as dst).
template <typename T>
__global__ void k_glu(const char * s0, tdesc d0, const char * s1, tdesc d1, char * dst, tdesc dd, int64_t n, glu_params gp) {
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const idx4 ix = unravel(i, dd.ne);
        const char * row0 = s0 + offs(d0, idx4{0, ix.i1, ix.i2, ix.i3});
        float x, g;
        if (gp.split) {
            x = to_f32(*(const T *) (row0 + ix.i0 * d0.nb[0]));
            g = to_f32(*(const T *) (s1 + offs(d1, ix)));
        } else {
            const int64_t nc = dd.ne[0];
            const int64_t jx = gp.swapped ? ix.i0 + nc : ix.i0, jg = gp.swapped ? ix.i0 : ix.i0 + nc;
            x = to_f32(*(const T *) (row0 + jx * d0.nb[0]));
            g = to_f32(*(const T *) (row0 + jg * d0.nb[0]));
        }
        *(T *) (dst + offs(dd, ix)) = from_f32<T>(glu_apply(gp.op, x, g, gp.alpha, gp.limit));
    }
}

bool op_glu(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0], * b = dst->src[1];
    const int64_t n = tsr_nelements(dst);
    if (n == 0) return true;
    const glu_params gp = {tsr_get_op_params_i32(dst, 0), b != nullptr, tsr_get_op_params_i32(dst, 1) != 0,
                           tsr_get_op_params_f32(dst, 2), tsr_get_op_params_f32(dst, 3)};
    const tdesc db = b ? make_desc(b) : make_desc(a);
    const char * pb = b ? (const char *) b->data : (const char *) a->data;
    if (a->type == TSR_TYPE_F32) {
        k_glu<float><<<grid_for(n), CU_BLOCK, 0, c.stream>>>((const char *) a->data, make_desc(a), pb, db,
                                                             (char *) dst->data, make_desc(dst), n, gp);
    } else {
        k_glu<__half><<<grid_for(n), CU_BLOCK, 0, c.stream>>>((const char *) a->data, make_desc(a), pb, db,
                                                              (char *) dst->data, make_desc(dst), n, gp);
    }
    return true;
}

// ---- copies and conversions (dup, cont, cpy; also used for scratch copies) ---------------

template <typename TS, typename TD>
__global__ void k_cpy(const char * src, tdesc ds, char * dst, tdesc dd, int64_t n) {
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        *(TD *) (dst + desc_offset(dd, i)) = from_f32<TD>(to_f32(*(const TS *) (src + desc_offset(ds, i))));
    }
}

__global__ void k_cpy_bytes4(const char * src, tdesc ds, char * dst, tdesc dd, int64_t n) {
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        *(int32_t *) (dst + desc_offset(dd, i)) = *(const int32_t *) (src + desc_offset(ds, i));
    }
}

template <typename TS>
bool launch_cpy_from(op_ctx & c, const char * s, const tdesc & ds, char * d, tsr_type td, const tdesc & dd, int64_t n) {
    const unsigned g = grid_for(n);
    switch (td) {
        case TSR_TYPE_F32:  k_cpy<TS, float><<<g, CU_BLOCK, 0, c.stream>>>(s, ds, d, dd, n); return true;
        case TSR_TYPE_F16:  k_cpy<TS, __half><<<g, CU_BLOCK, 0, c.stream>>>(s, ds, d, dd, n); return true;
        case TSR_TYPE_BF16: k_cpy<TS, __nv_bfloat16><<<g, CU_BLOCK, 0, c.stream>>>(s, ds, d, dd, n); return true;
        default: return false;
    }
}

// Copy n = nelements(ds) elements in logical order from src (layout ds, type ts) to dst
// (layout dd, type td). F32/F16/BF16 convert among each other; I32 copies to I32.
bool launch_cpy(op_ctx & c, const void * src, tsr_type ts, const tdesc & ds, void * dst, tsr_type td, const tdesc & dd) {
    const int64_t n = desc_nelements(ds);
    if (n == 0) return true;
    const char * s = (const char *) src;
    char * d = (char *) dst;
    bool ok = false;
    switch (ts) {
        case TSR_TYPE_F32:  ok = launch_cpy_from<float>(c, s, ds, d, td, dd, n); break;
        case TSR_TYPE_F16:  ok = launch_cpy_from<__half>(c, s, ds, d, td, dd, n); break;
        case TSR_TYPE_BF16: ok = launch_cpy_from<__nv_bfloat16>(c, s, ds, d, td, dd, n); break;
        case TSR_TYPE_I32:
            if (td == TSR_TYPE_I32) { k_cpy_bytes4<<<grid_for(n), CU_BLOCK, 0, c.stream>>>(s, ds, d, dd, n); ok = true; }
            break;
        default: break;
    }
    if (!ok) return tsr_set_error("cuda: copy from %s to %s not supported", tsr_type_name(ts), tsr_type_name(td));
    return true;
}

inline bool cpy_types_ok(tsr_type ts, tsr_type td) {
    return (type_is_float_or_bf16(ts) && type_is_float_or_bf16(td)) || (ts == TSR_TYPE_I32 && td == TSR_TYPE_I32);
}

// DUP / CONT / CPY: src0 -> dst element by element in logical order (dst of CPY is a
// view of src1 with its shape).
bool op_cpy(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    tdesc ds = make_desc(a), dd = make_desc(dst);
    if (desc_nelements(ds) != desc_nelements(dd))
        return tsr_set_error("cuda: %s '%s': %lld elements into %lld", tsr_op_name(dst->op), dst->name,
                             (long long) desc_nelements(ds), (long long) desc_nelements(dd));
    // a plain contiguous same-type copy is a memcpy
    if (a->type == dst->type && tsr_is_contiguous(a) && tsr_is_contiguous(dst)) {
        if (a->data == dst->data) return true;
        TSR_CU_CHECK(cudaMemcpyAsync(dst->data, a->data, tsr_nbytes(dst), cudaMemcpyDeviceToDevice, c.stream), c.device);
        return true;
    }
    return launch_cpy(c, a->data, a->type, ds, dst->data, dst->type, dd);
}

// ---- concat, repeat, diag_mask_inf ------------------------------------------------------

template <typename T>
__global__ void k_concat(const char * sa, tdesc da, const char * sb, tdesc db, char * dst, tdesc dd, int64_t n, int dim) {
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        idx4 x = unravel(i, dd.ne);
        const int64_t dn = offs(dd, x);
        int64_t & xd = dim == 0 ? x.i0 : dim == 1 ? x.i1 : dim == 2 ? x.i2 : x.i3;
        const char * p;
        if (xd < da.ne[dim]) {
            p = sa + offs(da, x);
        } else {
            xd -= da.ne[dim];
            p = sb + offs(db, x);
        }
        *(T *) (dst + dn) = *(const T *) p;
    }
}

bool op_concat(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0], * b = dst->src[1];
    const int dim = tsr_get_op_params_i32(dst, 0);
    if (dim < 0 || dim > 3) return tsr_set_error("cuda: concat '%s': dim %d", dst->name, dim);
    const int64_t n = tsr_nelements(dst);
    if (n == 0) return true;
    if (tsr_type_size(dst->type) == 4) {
        k_concat<float><<<grid_for(n), CU_BLOCK, 0, c.stream>>>((const char *) a->data, make_desc(a), (const char *) b->data,
                                                                make_desc(b), (char *) dst->data, make_desc(dst), n, dim);
    } else {
        k_concat<__half><<<grid_for(n), CU_BLOCK, 0, c.stream>>>((const char *) a->data, make_desc(a), (const char *) b->data,
                                                                 make_desc(b), (char *) dst->data, make_desc(dst), n, dim);
    }
    return true;
}

template <typename T>
__global__ void k_repeat(const char * src, tdesc ds, char * dst, tdesc dd, int64_t n) {
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const idx4 x = unravel(i, dd.ne);
        *(T *) (dst + offs(dd, x)) = *(const T *) (src + offs_bcast(ds, x));
    }
}

bool op_repeat(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const int64_t n = tsr_nelements(dst);
    if (n == 0) return true;
    if (tsr_type_size(dst->type) == 4) {
        k_repeat<float><<<grid_for(n), CU_BLOCK, 0, c.stream>>>((const char *) a->data, make_desc(a), (char *) dst->data, make_desc(dst), n);
    } else {
        k_repeat<__half><<<grid_for(n), CU_BLOCK, 0, c.stream>>>((const char *) a->data, make_desc(a), (char *) dst->data, make_desc(dst), n);
    }
    return true;
}

__global__ void k_diag_mask_inf(const char * src, tdesc ds, char * dst, tdesc dd, int64_t n, int n_past) {
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const idx4 x = unravel(i, dd.ne);
        const float v = *(const float *) (src + offs(ds, x));
        *(float *) (dst + offs(dd, x)) = x.i0 > n_past + x.i1 ? -INFINITY : v;
    }
}

bool op_diag_mask_inf(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0];
    const int64_t n = tsr_nelements(dst);
    if (n == 0) return true;
    k_diag_mask_inf<<<grid_for(n), CU_BLOCK, 0, c.stream>>>((const char *) a->data, make_desc(a), (char *) dst->data,
                                                            make_desc(dst), n, tsr_get_op_params_i32(dst, 0));
    return true;
}

} // namespace
} // namespace tsr_cuda
