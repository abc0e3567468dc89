// tessera CUDA backend: shared definitions (error checks, tensor descriptors, fp16).
// Part of the CUDA implementation TU (TSR_CUDA_IMPLEMENTATION); not a public header.
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#ifndef TSR_API_IMPL
#ifdef TSR_STATIC
#define TSR_API_IMPL static
#else
#define TSR_API_IMPL
#endif
#endif

namespace tsr_cuda {
namespace {

// ---- errors ---------------------------------------------------------------------------

// Record a failed CUDA runtime call as the thread's tessera error. Always false.
inline bool cu_fail(cudaError_t err, const char * what, int device) {
    return tsr_set_error("cuda: %s failed on device %d: %s (%s)", what, device,
                         cudaGetErrorString(err), cudaGetErrorName(err));
}

inline const char * cublas_status_str(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS:          return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED:  return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED:     return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE:    return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH:    return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR:    return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR:   return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED:    return "CUBLAS_STATUS_NOT_SUPPORTED";
        default:                             return "CUBLAS_STATUS_(unknown)";
    }
}

inline bool cublas_fail(cublasStatus_t s, const char * what, int device) {
    return tsr_set_error("cuda: cuBLAS %s failed on device %d: %s", what, device, cublas_status_str(s));
}

#define TSR_CU_CHECK(call, device)                                         \
    do {                                                                   \
        cudaError_t err_ = (call);                                         \
        if (err_ != cudaSuccess) return tsr_cuda::cu_fail(err_, #call, (device)); \
    } while (0)

// ---- tensor descriptors passed to kernels by value ------------------------------------

struct tdesc {
    int64_t ne[4];
    int64_t nb[4];   // bytes
};

inline tdesc make_desc(const tsr_tensor * t) {
    tdesc d;
    for (int i = 0; i < 4; ++i) { d.ne[i] = t->ne[i]; d.nb[i] = (int64_t) t->nb[i]; }
    return d;
}

// Contiguous descriptor of a given shape and element size.
inline tdesc make_contig_desc(const int64_t ne[4], int64_t elsize) {
    tdesc d;
    for (int i = 0; i < 4; ++i) d.ne[i] = ne[i];
    d.nb[0] = elsize;
    for (int i = 1; i < 4; ++i) d.nb[i] = d.nb[i - 1] * d.ne[i - 1];
    return d;
}

__host__ __device__ inline int64_t desc_nelements(const tdesc & d) { return d.ne[0] * d.ne[1] * d.ne[2] * d.ne[3]; }

// A 4-D element index.
struct idx4 { int64_t i0, i1, i2, i3; };

// flat logical index (i0 fastest) -> 4-D index within shape ne
__device__ __forceinline__ idx4 unravel(int64_t i, const int64_t * ne) {
    idx4 x;
    x.i0 = i % ne[0]; i /= ne[0];
    x.i1 = i % ne[1]; i /= ne[1];
    x.i2 = i % ne[2];
    x.i3 = i / ne[2];
    return x;
}

// byte offset of an index, and of an index broadcast into a smaller shape (modulo each dim)
__device__ __forceinline__ int64_t offs(const tdesc & d, const idx4 & x) {
    return x.i0 * d.nb[0] + x.i1 * d.nb[1] + x.i2 * d.nb[2] + x.i3 * d.nb[3];
}
__device__ __forceinline__ int64_t offs_bcast(const tdesc & d, const idx4 & x) {
    return (x.i0 % d.ne[0]) * d.nb[0] + (x.i1 % d.ne[1]) * d.nb[1] + (x.i2 % d.ne[2]) * d.nb[2] + (x.i3 % d.ne[3]) * d.nb[3];
}

// flat logical index -> byte offset of that element
__device__ __forceinline__ int64_t desc_offset(const tdesc & d, int64_t i) { return offs(d, unravel(i, d.ne)); }

// ---- element loads and stores -----------------------------------------------------------

template <typename T> __device__ __forceinline__ float to_f32(T v);
template <> __device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f32<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float  from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// F32/F16: every elementwise and row kernel; BF16 additionally in mul_mat, get_rows and copies.
inline bool type_is_float(tsr_type t) { return t == TSR_TYPE_F32 || t == TSR_TYPE_F16; }
inline bool type_is_float_or_bf16(tsr_type t) { return type_is_float(t) || t == TSR_TYPE_BF16; }

// ---- launch helpers --------------------------------------------------------------------

constexpr int CU_BLOCK = 256;

inline unsigned grid_1d(int64_t n, int block = CU_BLOCK) {
    int64_t g = (n + block - 1) / block;
    if (g < 1) g = 1;
    if (g > 0x7fffffffLL) g = 0x7fffffffLL;
    return (unsigned) g;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Block-wide sum / max (blockDim.x a multiple of 32, at most 1024). Every thread gets the
// result. `sh` holds 32 floats. Starts with a barrier, so back-to-back calls with the same
// `sh` are safe.
template <bool MAX>
__device__ __forceinline__ float block_reduce(float v, float * sh) {
    v = MAX ? warp_max(v) : warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    const int nw = (blockDim.x + 31) >> 5;
    v = lane < nw ? sh[lane] : (MAX ? -INFINITY : 0.0f);
    return MAX ? warp_max(v) : warp_sum(v);
}
__device__ __forceinline__ float block_sum(float v, float * sh) { return block_reduce<false>(v, sh); }
__device__ __forceinline__ float block_max(float v, float * sh) { return block_reduce<true>(v, sh); }

// Per-node launch context: stream, device, workspace bump allocator.
struct op_ctx {
    cudaStream_t stream;
    int          device;
    cublasHandle_t cublas;
    bool         allow_tf32;
    char *       ws;         // workspace base (device)
    size_t       ws_size;
    size_t       ws_used;    // bump offset, reset per node

    // 256-byte aligned chunk of the workspace; NULL + error when it does not fit (the
    // reserve step sized it, so that is a bug, reported not crashed).
    void * ws_alloc(size_t n) {
        const size_t off = (ws_used + 255) & ~(size_t) 255;
        if (off + n > ws_size) {
            tsr_set_error("cuda: workspace overflow on device %d: need %zu bytes at offset %zu, have %zu",
                          device, n, off, ws_size);
            return nullptr;
        }
        ws_used = off + n;
        return ws + off;
    }
};

inline size_t ws_round(size_t n) { return (n + 255) & ~(size_t) 255; }

} // namespace
} // namespace tsr_cuda
